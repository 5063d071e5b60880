//! Errors of the env pool.
//!
//! The variants separate what a caller must treat differently: a request the server *refused*
//! (the episode is intact), a request that *failed* before or while reaching the server (retried
//! when the call is idempotent), and a step whose fate is unknown ([`EnvPoolError::EnvFailure`]):
//! that episode is over, and the rollout loop records it as an environment failure rather than
//! as a policy outcome.
use std::fmt;
use std::time::Duration;

/// Result alias of this crate.
pub type Result<T, E = EnvPoolError> = std::result::Result<T, E>;

/// Why a step ended its episode as an environment failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// No reply within the step timeout.
    Timeout,
    /// The connection failed while the request was (or may have been) in flight.
    Disconnected,
    /// The reply could not be understood, so the step's effect is unknown.
    Malformed,
    /// The server restarted (or is down) since the episode was created: its state is gone.
    ServerLost,
}

impl FailureKind {
    /// A stable lower-case name (`timeout`, `disconnected`, `malformed`, `server_lost`).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::Disconnected => "disconnected",
            FailureKind::Malformed => "malformed",
            FailureKind::ServerLost => "server_lost",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What went wrong in the pool.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvPoolError {
    /// No server is configured for this environment name.
    #[error("no server is configured for environment {0:?}")]
    UnknownEnv(String),

    /// Every server of this environment is marked down by the health checks. `reasons` says
    /// why, per server (`ADDRESS marked down: WHY`, joined by `; `).
    #[error("no server of environment {env:?} is up: {reasons}")]
    NoServerUp { env: String, reasons: String },

    /// The episode handle is not (or no longer) live in this pool.
    #[error("unknown episode {0} (never created, closed, or ended by a failure)")]
    UnknownEpisode(u64),

    /// The server answered with an error (AgentGym sends these as HTTP 200 `{"error": ...}`).
    /// The episode, if any, is unaffected.
    #[error("{server}: {op} refused: {message}")]
    Refused {
        server: String,
        op: &'static str,
        message: String,
        /// Machine-readable kind when the protocol carries one (ZeroMQ `code`).
        code: Option<String>,
    },

    /// No reply in time (an idempotent call, after its retries).
    #[error("{server}: {op} timed out after {after:?}")]
    Timeout {
        server: String,
        op: &'static str,
        after: Duration,
    },

    /// The connection failed. `sent` is false when the request provably never left this process
    /// (connection refused, no peer), which makes even `create` safe to retry.
    #[error("{server}: {op} connection failed ({}): {detail}", if *sent { "maybe sent" } else { "not sent" })]
    Connection {
        server: String,
        op: &'static str,
        detail: String,
        sent: bool,
    },

    /// The reply was not a body this protocol dialect can produce.
    #[error("{server}: {op} malformed reply: {detail}")]
    Malformed {
        server: String,
        op: &'static str,
        detail: String,
    },

    /// An HTTP status other than 200 (unknown endpoint, server error).
    #[error("{server}: {op} returned HTTP {status}")]
    HttpStatus {
        server: String,
        op: &'static str,
        status: u16,
    },

    /// A step failed ambiguously: the episode has been ended (never replayed) and should be
    /// recorded as an environment failure.
    #[error("episode {episode} on {server} ended by an environment failure ({kind}): {detail}")]
    EnvFailure {
        episode: u64,
        server: String,
        kind: FailureKind,
        detail: String,
    },

    /// The pool configuration is invalid.
    #[error("invalid env pool configuration: {0}")]
    Config(String),

    /// The background runtime could not start.
    #[error("env pool runtime failed to start: {0}")]
    Runtime(#[source] std::io::Error),

    /// Used in a process other than the one that created the pool (after `fork()`).
    #[error("env pool created in process {created} but used in process {current} (after fork); create a new one")]
    Forked { created: u32, current: u32 },

    /// The pool was shut down.
    #[error("env pool is shut down")]
    Closed,
}

impl EnvPoolError {
    /// True when repeating an idempotent call may succeed (transport trouble, not a refusal).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            EnvPoolError::Timeout { .. }
                | EnvPoolError::Connection { .. }
                | EnvPoolError::HttpStatus {
                    status: 500..=599,
                    ..
                }
        )
    }

    /// True when the request provably never reached the server.
    pub fn never_sent(&self) -> bool {
        matches!(self, EnvPoolError::Connection { sent: false, .. })
    }

    /// The failure kind a step with this error ends its episode with, or `None` when the step
    /// was refused (the episode is intact) or the error is not about the server.
    pub fn step_failure_kind(&self) -> Option<FailureKind> {
        match self {
            EnvPoolError::Timeout { .. } => Some(FailureKind::Timeout),
            EnvPoolError::Connection { .. } => Some(FailureKind::Disconnected),
            EnvPoolError::Malformed { .. } | EnvPoolError::HttpStatus { .. } => {
                Some(FailureKind::Malformed)
            }
            _ => None,
        }
    }
}
