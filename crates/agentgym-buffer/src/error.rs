use thiserror::Error;

pub type Result<T, E = BufferError> = std::result::Result<T, E>;

#[derive(Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum BufferError {
    /// A configuration value is out of range; `field` names it.
    #[error("invalid buffer config: {field} {reason}")]
    InvalidConfig { field: &'static str, reason: String },
    /// A sample was added to a group that was never admitted or has already completed.
    #[error("unknown group {0}: not admitted, or already complete")]
    UnknownGroup(u64),
    /// Policy versions only move forward.
    #[error("policy version went backwards: {current} -> {requested}")]
    VersionRegression { current: u32, requested: u32 },
}
