//! Errors of the wire codec.
//!
//! Every malformed, truncated, wrong-version or inconsistent input maps onto one of these
//! variants; decoding never panics.

/// What went wrong while encoding or decoding a group message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The input ended before a complete value was read.
    #[error("truncated message: needed {needed} more byte(s) at offset {offset}")]
    Truncated { offset: usize, needed: usize },

    /// The bytes are not the msgpack structure the schema describes (wrong type, bad UTF-8,
    /// unknown status, bad dtype or shape, trailing bytes, nesting too deep, ...).
    #[error("malformed message at offset {offset}: {detail}")]
    Malformed { offset: usize, detail: String },

    /// The message was written under a schema version this build does not read.
    #[error(
        "unsupported wire schema version {found} (this build reads versions 1 to {supported})"
    )]
    SchemaVersion { found: u64, supported: u32 },

    /// A required key is absent.
    #[error("missing field `{field}`")]
    MissingField { field: &'static str },

    /// A value has the right type but is out of its domain (unknown status, a turn span past
    /// the end of the sample, an array too large for the format, ...).
    #[error("invalid `{field}`: {detail}")]
    InvalidValue { field: &'static str, detail: String },

    /// Per-token arrays of one sample disagree in length, or a shape disagrees with its data.
    #[error("inconsistent length of `{field}`: expected {expected}, found {found}")]
    InconsistentLength {
        field: &'static str,
        expected: usize,
        found: usize,
    },
}

/// `Result` with [`WireError`].
pub type Result<T, E = WireError> = std::result::Result<T, E>;
