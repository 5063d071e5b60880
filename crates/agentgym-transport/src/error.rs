//! Errors of the group transport.
use std::time::Duration;

/// What went wrong on a sender or receiver.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// No credit (or no acknowledgement, for `flush`) arrived in time. Nothing was queued: the
    /// caller still owns the group.
    #[error("timed out after {waited:?} waiting for {what}")]
    Timeout {
        waited: Duration,
        what: &'static str,
    },

    /// The sender or receiver was closed (or its background task ended).
    #[error("transport closed")]
    Closed,

    /// `flush_while_linked`: no link to the receiver is in force while groups are still
    /// unacknowledged (the receiver went quiet for the peer timeout, or never answered).
    #[error("the link to the receiver is down with {unacked} sent groups unacknowledged")]
    LinkDown { unacked: u64 },

    /// The peer spoke a different protocol version or sent something this side cannot accept.
    #[error("protocol error: {detail}")]
    Protocol { detail: String },

    /// The socket layer failed (bad endpoint, address in use, ...).
    #[error("socket error on {endpoint}: {source}")]
    Socket {
        endpoint: String,
        #[source]
        source: zeromq::ZmqError,
    },

    /// The endpoint string is not one this transport accepts.
    #[error("invalid endpoint {endpoint:?}: {detail}")]
    InvalidEndpoint { endpoint: String, detail: String },

    /// The object was created in another process (before `fork()`): its sockets and runtime do
    /// not exist here. Create a new one in the child.
    #[error(
        "created in process {created} but used in process {current} (after fork); create a new one"
    )]
    Forked { created: u32, current: u32 },

    /// The shared secret is too short to authenticate anything.
    #[error("the secret has {len} bytes; at least {min} are needed", min = crate::auth::MIN_SECRET_LEN)]
    WeakSecret { len: usize },

    /// The peer's messages do not carry a valid signature (see [`crate::auth`]).
    #[error("authentication failed: {detail}")]
    Unauthenticated { detail: String },

    /// The background tokio runtime could not be started.
    #[error("cannot start the transport runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// `Result` with [`TransportError`].
pub type Result<T, E = TransportError> = std::result::Result<T, E>;
