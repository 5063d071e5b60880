//! The operations a pool sends to a server and the replies it gets back, independent of the
//! transport: the HTTP dialects and the ZeroMQ codec both translate to and from these.

/// One request to an env server, addressed by the server's own episode id.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    Create,
    Reset { id: i64, data_idx: i64 },
    Step { id: i64, action: String },
    Observation { id: i64 },
    Close { id: i64 },
    Health,
}

impl Op {
    /// The protocol name of the operation (also used in error messages).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Reset { .. } => "reset",
            Op::Step { .. } => "step",
            Op::Observation { .. } => "observation",
            Op::Close { .. } => "close",
            Op::Health => "health",
        }
    }
}

/// What a reset or a step produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepOutcome {
    pub observation: String,
    /// This step's reward.
    pub reward: f64,
    /// The episode's running score (the reward when the server reports none).
    pub score: f64,
    pub done: bool,
    /// The server refused the action (not available, not understood): the turn was spent and
    /// nothing happened. Servers that do not say are taken to have accepted it.
    pub invalid: bool,
    /// The server's `info` field as JSON text, when it sends one.
    pub info: Option<String>,
}

/// Server state reported by a health check.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Health {
    /// Episodes live on the server (`None` when it does not say).
    pub live_episodes: Option<u64>,
    /// Seconds since the server started; a decrease means it restarted.
    pub uptime_s: Option<f64>,
}

/// A decoded reply, matching the [`Op`] that asked for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    Created { id: i64, first: Option<StepOutcome> },
    Outcome(StepOutcome),
    Observation(String),
    Closed,
    Health(Health),
}

/// Why a body could not be turned into a [`Reply`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DecodeError {
    /// The server reported an error.
    Refused {
        message: String,
        code: Option<String>,
    },
    /// The body is not what the protocol promises.
    Malformed(String),
}
