//! Token-in/token-out trajectory builder.
//!
//! An agent episode alternates model generations and environment observations. Training needs
//! the exact token ids the engine sampled (decoding and re-encoding them does not round-trip:
//! BPE ambiguity, tool-parser rewrites), plus a mask of which tokens the policy produced. This
//! crate builds those arrays incrementally:
//!
//! - the prompt is `encode(render(prefix, add_generation_prompt=True))`, exactly what
//!   transformers' `apply_chat_template(tokenize=True)` produces;
//! - each generated turn is appended verbatim (ids, behaviour log-probs, policy versions);
//! - each observation is appended as the template's *delta* for that message, rendered against
//!   a fixed base (prefix + a placeholder assistant turn) rather than by re-rendering the whole
//!   conversation, preceded by the closing "glue" the engine never emits: the template's text
//!   after the end token the turn stopped on (the `\n` after `<|im_end|>`; nothing after Llama
//!   2's `' </s>'`, whose space before `</s>` the model never samples and the ids never hold);
//! - at the end, the built ids are checked against one full render of the conversation. A
//!   template that is not append-only (Qwen3 strips `<think>` from history) is reported as
//!   drift, never silently patched; the one difference allowed is that unsampled text before
//!   a turn's end token.
//!
//! Cost per episode is linear in its length: one small render and one encode per observation,
//! one full render and one decode at finish (two decodes for templates with text before the end
//! token).
mod builder;
mod chat;
mod drift;
mod error;
mod prompt;
mod pyjson;
mod strftime;
mod template;

pub use builder::{Appended, BuilderConfig, Trajectory, TrajectoryBuilder, Versions};
pub use chat::ChatTokenizer;
pub use drift::DriftReport;
pub use error::{Error, Result};
pub use prompt::{Prompt, PLACEHOLDER};
pub use template::{ChatTemplate, SpecialTokens};

/// Messages are JSON objects as in the OpenAI / transformers chat format.
pub type Message = serde_json::Value;

/// Parse a JSON list of messages (the form bindings and config files hand over).
pub fn messages_from_json(text: &str) -> Result<Vec<Message>> {
    match serde_json::from_str(text) {
        Ok(serde_json::Value::Array(list)) => Ok(list),
        Ok(_) => Err(Error::InvalidInput("messages: expected a JSON list".into())),
        Err(e) => Err(Error::InvalidInput(format!("messages: invalid JSON: {e}"))),
    }
}

/// Parse any JSON value (e.g. a list of tool schemas).
pub fn value_from_json(text: &str) -> Result<Message> {
    serde_json::from_str(text).map_err(|e| Error::InvalidInput(format!("invalid JSON: {e}")))
}
