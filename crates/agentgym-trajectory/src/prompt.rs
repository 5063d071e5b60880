//! The fixed base of an episode: its prompt ids and the template's observation deltas.
//!
//! Observation tokens come from diffing two renders of a conversation that never grows: the
//! prefix messages plus one placeholder assistant turn (the base), with and without the new
//! observation. That keeps each observation's cost independent of how long the episode already
//! is, and it is what the template would emit after *any* assistant turn, provided the template
//! is append-only. The base render also tells where the assistant closing lies: the text after
//! the placeholder content (`<|im_end|>\n` for ChatML, `' </s>'` for Llama 2, whose space comes
//! before the end token), and the opening: the text between the generation prompt and the
//! content (Llama 2's `' '`; empty for ChatML, whose generation prompt ends the header). A `Prompt` is immutable and can be shared by all samples of a GRPO
//! group.
use minijinja::Value;

use crate::chat::ChatTokenizer;
use crate::drift::first_difference;
use crate::error::{Error, Result};
use crate::Message;

/// Content of the placeholder assistant turn. Letters only, so `trim`/`strip` leave it intact.
pub const PLACEHOLDER: &str = "AgentGymPlaceholderAssistantContent";

/// An episode's prefix messages, rendered and tokenized once.
#[derive(Debug, Clone)]
pub struct Prompt {
    messages: Vec<Message>,
    tools: Option<Message>,
    tools_value: Option<Value>,
    base_values: Vec<Value>,
    base_text: String,
    opening: String,
    closing: String,
    ids: Vec<u32>,
}

impl Prompt {
    /// Render and encode the prefix (`add_generation_prompt=True`) and the delta base.
    pub fn new(
        chat: &ChatTokenizer,
        messages: Vec<Message>,
        tools: Option<Message>,
    ) -> Result<Self> {
        let tools_value = tools.as_ref().map(Value::from_serialize);
        let text =
            chat.render_values(Value::from_serialize(&messages), tools_value.as_ref(), true)?;
        let ids = chat.encode(&text)?;
        let mut base_values: Vec<Value> = messages.iter().map(Value::from_serialize).collect();
        base_values.push(Value::from_serialize(serde_json::json!({
            "role": "assistant",
            "content": PLACEHOLDER,
        })));
        let base_text = chat.render_values(
            Value::from(base_values.clone()),
            tools_value.as_ref(),
            false,
        )?;
        let at = base_text
            .rfind(PLACEHOLDER)
            .ok_or(Error::PlaceholderNotFound)?;
        let closing = base_text[at + PLACEHOLDER.len()..].to_string();
        // A template whose generation prompt is not where the base render's turn starts (one
        // that opens a `<think>` block, say) has no opening we can tell: none is assumed.
        let opening = base_text[..at]
            .strip_prefix(text.as_str())
            .unwrap_or_default()
            .to_string();
        Ok(Prompt {
            messages,
            tools,
            tools_value,
            base_values,
            base_text,
            opening,
            closing,
            ids,
        })
    }

    /// Prompt token ids, as `apply_chat_template(messages, tokenize=True,
    /// add_generation_prompt=True)` returns them.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub fn tools(&self) -> Option<&Message> {
        self.tools.as_ref()
    }

    pub(crate) fn tools_value(&self) -> Option<&Value> {
        self.tools_value.as_ref()
    }

    /// What the template writes between the generation prompt and an assistant turn's content
    /// (Llama 2's `' '`); empty for most templates.
    pub fn opening(&self) -> &str {
        &self.opening
    }

    /// What the template writes after an assistant turn's content (e.g. `<|im_end|>\n`).
    pub fn closing(&self) -> &str {
        &self.closing
    }

    /// The closing split around the first occurrence of a stop token's text: what the template
    /// writes before it (Llama 2's `' '` in `' </s>'`), and after it (ChatML's `\n`). `None` when
    /// the closing does not contain it.
    pub fn split_closing(&self, stop_text: &str) -> Option<(&str, &str)> {
        let at = self.closing.find(stop_text)?;
        Some((&self.closing[..at], &self.closing[at + stop_text.len()..]))
    }

    /// The text the template adds for `observation` after an assistant turn, up to and
    /// including the next generation prompt: `render(base + obs, True)[len(render(base)):]`.
    pub fn observation_delta(
        &self,
        chat: &ChatTokenizer,
        observation: &[Message],
    ) -> Result<String> {
        let mut values = self.base_values.clone();
        values.extend(observation.iter().map(Value::from_serialize));
        let full = chat.render_values(Value::from(values), self.tools_value.as_ref(), true)?;
        match full.strip_prefix(self.base_text.as_str()) {
            Some(delta) => Ok(delta.to_string()),
            None => {
                let diff = first_difference(&self.base_text, &full);
                Err(Error::BaseNotPrefix {
                    offset: diff.offset,
                    expected: diff.expected,
                    actual: diff.actual,
                })
            }
        }
    }
}
