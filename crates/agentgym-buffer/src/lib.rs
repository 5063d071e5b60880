//! Trajectory buffer: collects finished episodes into GRPO groups, decides how many new groups
//! the rollout side may start (staleness admission control), and releases complete groups to the
//! learner side.
//!
//! Every group that is admitted ends in exactly one counted bucket (released, filtered, stale,
//! aborted): nothing is dropped silently. Memory is bounded: admission stops while the groups
//! already running could overfill the ready queue (backpressure).
mod admission;
mod buffer;
mod error;

pub use admission::{AdmissionConfig, Counters};
pub use buffer::{AddOutcome, Ticket, TrajectoryBuffer};
pub use error::{BufferError, Result};
