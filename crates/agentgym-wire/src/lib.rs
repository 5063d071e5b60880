//! Trajectory schema and the versioned msgpack wire format.
//!
//! [`schema`] holds the carriers (a [`Group`] of [`Sample`]s with their per-token
//! [`TokenArrays`]); [`codec`] turns a group into bytes and back. Per-token arrays travel as raw
//! little-endian bytes with dtype and shape so that Python reads them with `numpy.frombuffer`
//! without a copy. Decoding untrusted bytes never panics: every failure is a [`WireError`].
pub mod codec;
pub mod error;
pub mod schema;

mod array;
mod msgpack;

pub use codec::{decode_group, encode_group, encode_group_into, version_of, SCHEMA_VERSION};
pub use error::{Result, WireError};
pub use schema::{validate_episodes, validate_turns, Group, Sample, Status, TokenArrays};
