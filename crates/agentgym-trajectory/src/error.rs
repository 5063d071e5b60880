//! Errors of the trajectory builder.
//!
//! One variant per way a build can fail, so the Python binding can map each to its own exception.
//! Refusing an append because the context is full is *not* an error: it is reported through
//! [`crate::Appended::Truncated`], because a long episode is an expected outcome, not a fault.

/// Everything that can go wrong while loading a chat tokenizer or building a trajectory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `tokenizer.json` could not be read or parsed.
    #[error("cannot load tokenizer from {path}: {message}")]
    TokenizerLoad { path: String, message: String },
    /// The model directory lacks a chat template, or `tokenizer_config.json` is malformed.
    #[error("bad model configuration: {0}")]
    Config(String),
    /// The chat template does not parse.
    #[error("chat template syntax error: {0}")]
    TemplateSyntax(String),
    /// The chat template failed while rendering (including `raise_exception(...)` calls).
    #[error("chat template render error: {0}")]
    TemplateRender(String),
    /// The tokenizer failed to encode or decode.
    #[error("tokenizer error: {0}")]
    Tokenize(String),
    /// The template did not render the placeholder assistant content verbatim, so the assistant
    /// closing (the text after the content) cannot be located.
    #[error(
        "the chat template does not render assistant content verbatim (placeholder not found)"
    )]
    PlaceholderNotFound,
    /// Rendering the fixed base plus an observation changed the base text: the template is not
    /// append-only for this conversation, so no observation delta exists.
    #[error("template is not append-only: base render is not a prefix (first difference at byte {offset}: expected {expected:?}, got {actual:?})")]
    BaseNotPrefix {
        offset: usize,
        expected: String,
        actual: String,
    },
    /// Strict mode only: the built ids do not decode to a full render of the conversation.
    #[error("trajectory drifted from the chat template at byte {offset}: template renders {expected:?}, built ids decode to {actual:?}")]
    Drift {
        offset: usize,
        expected: String,
        actual: String,
    },
    /// The caller passed something inconsistent (length mismatch, empty turn, wrong order).
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn render(err: &minijinja::Error) -> Self {
        Error::TemplateRender(describe(err))
    }

    pub(crate) fn tokenize(err: &(dyn std::error::Error + Send + Sync)) -> Self {
        Error::Tokenize(err.to_string())
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }
}

/// A minijinja error with its chain of causes (the `raise_exception` message lives in the detail).
pub(crate) fn describe(err: &minijinja::Error) -> String {
    let mut out = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}
