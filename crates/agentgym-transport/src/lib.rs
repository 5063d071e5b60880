//! ZeroMQ stream of encoded groups from rollout servers to a learner, with credit-based flow
//! control, acknowledgements and resending across reconnections.
//!
//! * [`GroupReceiver`] (learner side) binds a ROUTER, grants each sender a window of credits
//!   and acknowledges a group once the application has taken it with [`GroupReceiver::recv`].
//! * [`GroupSender`] (rollout side) connects a DEALER, sends only with credit, keeps every group
//!   until acknowledged and resends after a reconnection. Senders never block forever and never
//!   drop silently: `send` waits up to a timeout and then returns
//!   [`TransportError::Timeout`], with nothing queued.
//!
//! Delivery is exactly-once per receiver lifetime (de-duplicated by sender id, session and
//! sequence number) and at-least-once across a receiver crash (a group consumed just before the
//! crash, whose acknowledgement was lost, is sent again). The message layout is in [`protocol`];
//! with a [`Secret`], every message in both directions is signed ([`auth`]).
//!
//! The blocking API is driven by a lazily created background tokio runtime ([`runtime`]), which
//! is recreated in a forked child. Call it from plain threads, not from inside async code.
mod address_book;
pub mod auth;
pub mod endpoint;
pub mod error;
mod handshake;
pub mod protocol;
mod receiver;
mod receiver_task;
mod runtime;
mod sender;
mod sender_task;

pub use auth::{AuthFailure, Secret};
pub use bytes::Bytes;
pub use endpoint::DEFAULT_BIND;
pub use error::{Result, TransportError};
pub use protocol::PROTOCOL_VERSION;
pub use receiver::{Delivery, GroupReceiver, ReceiverOptions, ReceiverStats, Refusal};
pub use sender::{GroupSender, SenderOptions, SenderStats};
