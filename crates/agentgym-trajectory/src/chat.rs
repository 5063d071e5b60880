//! A tokenizer paired with its chat template: the model-side half of trajectory building.
//!
//! Shared (behind an `Arc`) by every builder of a rollout worker; it also keeps the drift
//! counters, so a run can report how often its template broke the exact-prefix property.
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use minijinja::Value;
use tokenizers::Tokenizer;

use crate::error::{Error, Result};
use crate::template::{ChatTemplate, SpecialTokens};
use crate::Message;

/// `tokenizer.json` + chat template + special tokens, with transformers' semantics.
#[derive(Debug)]
pub struct ChatTokenizer {
    tokenizer: Tokenizer,
    template: ChatTemplate,
    special: SpecialTokens,
    checked: AtomicU64,
    drifted: AtomicU64,
}

impl ChatTokenizer {
    /// Load from a Hugging Face model directory: `tokenizer.json`, `tokenizer_config.json`
    /// (special tokens, `chat_template`), and `chat_template.jinja` when present (it takes
    /// precedence, as in transformers).
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let config_path = dir.join("tokenizer_config.json");
        let config: serde_json::Value = if config_path.exists() {
            let text = std::fs::read_to_string(&config_path)
                .map_err(|e| Error::Config(format!("{}: {e}", config_path.display())))?;
            serde_json::from_str(&text)
                .map_err(|e| Error::Config(format!("{}: {e}", config_path.display())))?
        } else {
            serde_json::Value::Null
        };
        let jinja_path = dir.join("chat_template.jinja");
        let template = if jinja_path.exists() {
            std::fs::read_to_string(&jinja_path)
                .map_err(|e| Error::Config(format!("{}: {e}", jinja_path.display())))?
        } else {
            template_from_config(&config)?
        };
        let special = SpecialTokens::from_tokenizer_config(&config);
        Self::from_parts(dir.join("tokenizer.json"), &template, special)
    }

    /// Load from explicit pieces: a `tokenizer.json` path, the template source and the special
    /// tokens the template refers to.
    pub fn from_parts(
        tokenizer_json: impl AsRef<Path>,
        template: &str,
        special: SpecialTokens,
    ) -> Result<Self> {
        let path = tokenizer_json.as_ref();
        let tokenizer = Tokenizer::from_file(path).map_err(|e| Error::TokenizerLoad {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::from_tokenizer(tokenizer, template, special)
    }

    /// Wrap an already constructed tokenizer.
    pub fn from_tokenizer(
        tokenizer: Tokenizer,
        template: &str,
        special: SpecialTokens,
    ) -> Result<Self> {
        let template = ChatTemplate::new(template, &special)?;
        Ok(ChatTokenizer {
            tokenizer,
            template,
            special,
            checked: AtomicU64::new(0),
            drifted: AtomicU64::new(0),
        })
    }

    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// `apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=...)`.
    pub fn render(
        &self,
        messages: &[Message],
        tools: Option<&Message>,
        add_generation_prompt: bool,
    ) -> Result<String> {
        let tools = tools.map(Value::from_serialize);
        self.render_values(
            Value::from_serialize(messages),
            tools.as_ref(),
            add_generation_prompt,
        )
    }

    pub(crate) fn render_values(
        &self,
        messages: Value,
        tools: Option<&Value>,
        add_generation_prompt: bool,
    ) -> Result<String> {
        self.template.render(messages, tools, add_generation_prompt)
    }

    /// `apply_chat_template(..., tokenize=True)`: render, then encode without special tokens.
    pub fn apply_chat_template(
        &self,
        messages: &[Message],
        tools: Option<&Message>,
        add_generation_prompt: bool,
    ) -> Result<Vec<u32>> {
        self.encode(&self.render(messages, tools, add_generation_prompt)?)
    }

    /// Encode text as transformers does for chat templates (`add_special_tokens=False`; special
    /// token strings in the text still map to their ids).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self
            .tokenizer
            .encode_fast(text, false)
            .map_err(|e| Error::tokenize(e.as_ref()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Decode keeping special tokens, so the text can be compared with a template render.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.tokenizer
            .decode(ids, false)
            .map_err(|e| Error::tokenize(e.as_ref()))
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }

    /// Whether `id` is a special added token (`</s>`, `<|im_end|>`), as opposed to plain text.
    pub fn is_special(&self, id: u32) -> bool {
        self.tokenizer
            .get_added_vocabulary()
            .get_added_tokens_decoder()
            .get(&id)
            .is_some_and(|token| token.special)
    }

    pub fn eos_token_id(&self) -> Option<u32> {
        self.special.eos().and_then(|t| self.token_to_id(t))
    }

    /// Episodes checked for drift at `finish` so far.
    pub fn checked_count(&self) -> u64 {
        self.checked.load(Ordering::Relaxed)
    }

    /// Episodes found drifted at `finish` so far.
    pub fn drift_count(&self) -> u64 {
        self.drifted.load(Ordering::Relaxed)
    }

    pub(crate) fn record_check(&self, drifted: bool) {
        self.checked.fetch_add(1, Ordering::Relaxed);
        if drifted {
            self.drifted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// `chat_template` of a tokenizer config: a string, or a list of named templates (the one named
/// `default` wins, as in transformers).
fn template_from_config(config: &serde_json::Value) -> Result<String> {
    match config.get("chat_template") {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(serde_json::Value::Array(list)) => list
            .iter()
            .find(|t| t.get("name").and_then(serde_json::Value::as_str) == Some("default"))
            .and_then(|t| t.get("template"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| Error::Config("chat_template list has no entry named 'default'".into())),
        _ => Err(Error::Config(
            "no chat template: neither chat_template.jinja nor tokenizer_config.json's chat_template".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_from_config_variants() {
        let one = serde_json::json!({"chat_template": "x"});
        assert_eq!(template_from_config(&one).unwrap(), "x");
        let many = serde_json::json!({"chat_template": [{"name": "tool_use", "template": "t"}, {"name": "default", "template": "d"}]});
        assert_eq!(template_from_config(&many).unwrap(), "d");
        assert!(matches!(
            template_from_config(&serde_json::json!({})),
            Err(Error::Config(_))
        ));
    }

    #[test]
    fn special_tokens_from_config() {
        let cfg = serde_json::json!({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "model_max_length": 4, "pad_token": null});
        let s = SpecialTokens::from_tokenizer_config(&cfg);
        assert_eq!(
            (s.bos(), s.eos(), s.get("pad_token")),
            (Some("<s>"), Some("</s>"), None)
        );
    }

    #[test]
    fn missing_tokenizer_is_a_load_error() {
        let err =
            ChatTokenizer::from_parts("/nonexistent/tokenizer.json", "x", SpecialTokens::new())
                .unwrap_err();
        assert!(matches!(err, Error::TokenizerLoad { .. }));
    }
}
