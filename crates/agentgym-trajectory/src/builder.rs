//! The incremental builder: prompt, then generated turns and observations, then `finish`.
//!
//! Generated ids are kept verbatim; only template text (glue + observation deltas) is ever
//! encoded. The glue after a turn that ends on a stop token is the template's closing after that
//! token, wherever the token sits in it: nothing for Llama 2's `' </s>'`, `\n` for ChatML. What the
//! closing has before the token (Llama 2's space) the model never sampled, so it stays out of the
//! ids (see the drift module for how the check treats it). The context limit is enforced per
//! append: a turn that does not fit is refused whole and the trajectory ends, flagged truncated,
//! at the last turn boundary.
use std::sync::Arc;

use agentgym_wire::TokenArrays;

use crate::chat::ChatTokenizer;
use crate::error::{Error, Result};
use crate::prompt::Prompt;
use crate::Message;

/// Builder settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuilderConfig {
    /// Maximum number of tokens of the trajectory (prompt included).
    pub max_len: usize,
    /// Ids that end a generated turn. `None`: the tokenizer's `eos_token`.
    pub stop_ids: Option<Vec<u32>>,
    /// Run the drift check in [`TrajectoryBuilder::finish`].
    pub check_drift: bool,
    /// Make drift found by `finish` an [`Error::Drift`] instead of a flag.
    pub strict: bool,
    /// Policy version recorded on prompt tokens.
    pub prompt_version: u32,
}

impl Default for BuilderConfig {
    fn default() -> Self {
        BuilderConfig {
            max_len: 32_768,
            stop_ids: None,
            check_drift: true,
            strict: false,
            prompt_version: 0,
        }
    }
}

/// Policy versions of a generated turn's tokens.
#[derive(Debug, Clone, Copy)]
pub enum Versions<'a> {
    /// Every token was sampled under this version.
    Uniform(u32),
    /// One version per token (a turn that straddles a weight update).
    PerToken(&'a [u32]),
}

/// Whether an append was taken.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    Appended,
    /// It would have exceeded `max_len` (or the builder was already truncated): nothing was
    /// appended and the trajectory is now final.
    Truncated,
}

/// A finished trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct Trajectory {
    pub tokens: TokenArrays,
    /// An append was refused for lack of context.
    pub truncated: bool,
    /// The drift check failed (see [`DriftReport`]); the ids do not match a full render.
    pub drift: bool,
    /// Generated turns.
    pub turns: u32,
    /// Number of prompt tokens at the start of `tokens`.
    pub prompt_len: usize,
}

#[derive(Debug, Clone)]
enum Segment {
    /// `tail`: the template text still owed after this turn (glue, or the whole closing when the
    /// turn did not end with a stop token); it is written before the next observation. `gap`: the
    /// closing's text before the stop token, which the ids lack (empty unless it was special).
    Generated {
        start: usize,
        end: usize,
        stopped: bool,
        gap: String,
        tail: String,
    },
    Observation(Vec<Message>),
}

/// Builds one episode's [`TokenArrays`].
#[derive(Debug)]
pub struct TrajectoryBuilder {
    chat: Arc<ChatTokenizer>,
    prompt: Arc<Prompt>,
    config: BuilderConfig,
    stop_ids: Vec<u32>,
    arrays: TokenArrays,
    segments: Vec<Segment>,
    last_version: u32,
    truncated: bool,
}

impl TrajectoryBuilder {
    /// Start from a prepared prompt. A prompt longer than `max_len` gives a builder that is
    /// already truncated (and holds the prompt, so the caller can see why).
    pub fn new(
        chat: Arc<ChatTokenizer>,
        prompt: Arc<Prompt>,
        config: BuilderConfig,
    ) -> Result<Self> {
        let stop_ids = match &config.stop_ids {
            Some(ids) => ids.clone(),
            None => chat.eos_token_id().into_iter().collect(),
        };
        let n = prompt.ids().len();
        let arrays = TokenArrays {
            input_ids: prompt.ids().to_vec(),
            loss_mask: vec![0; n],
            logprobs: vec![0.0; n],
            versions: vec![config.prompt_version; n],
            turn_spans: Vec::new(),
        };
        let truncated = n > config.max_len;
        Ok(TrajectoryBuilder {
            last_version: config.prompt_version,
            chat,
            prompt,
            stop_ids,
            arrays,
            segments: Vec::new(),
            truncated,
            config,
        })
    }

    /// Convenience: render the prompt from `messages` and start.
    pub fn from_messages(
        chat: Arc<ChatTokenizer>,
        messages: Vec<Message>,
        tools: Option<Message>,
        config: BuilderConfig,
    ) -> Result<Self> {
        let prompt = Arc::new(Prompt::new(&chat, messages, tools)?);
        Self::new(chat, prompt, config)
    }

    pub fn len(&self) -> usize {
        self.arrays.input_ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.arrays.input_ids.is_empty()
    }

    /// Tokens left before `max_len` (use it as the engine's `max_tokens`).
    pub fn remaining(&self) -> usize {
        self.config.max_len.saturating_sub(self.len())
    }

    pub fn is_truncated(&self) -> bool {
        self.truncated
    }

    pub fn turns(&self) -> u32 {
        self.arrays.turn_spans.len() as u32 / 2
    }

    pub fn stop_ids(&self) -> &[u32] {
        &self.stop_ids
    }

    /// The token arrays built so far.
    pub fn tokens(&self) -> &TokenArrays {
        &self.arrays
    }

    /// True when the next append must be a generated turn (after the prompt or an observation).
    pub fn expects_generation(&self) -> bool {
        !matches!(self.segments.last(), Some(Segment::Generated { .. }))
    }

    /// Append a generated turn verbatim: loss mask 1 on every id (stop token included).
    pub fn add_generated(
        &mut self,
        ids: &[u32],
        logprobs: &[f32],
        versions: Versions<'_>,
    ) -> Result<Appended> {
        if ids.is_empty() {
            return Err(Error::invalid("a generated turn has no tokens"));
        }
        if logprobs.len() != ids.len() {
            return Err(Error::invalid(format!(
                "{} logprobs for {} ids",
                logprobs.len(),
                ids.len()
            )));
        }
        if let Versions::PerToken(v) = versions {
            if v.len() != ids.len() {
                return Err(Error::invalid(format!(
                    "{} versions for {} ids",
                    v.len(),
                    ids.len()
                )));
            }
        }
        if !self.expects_generation() {
            return Err(Error::invalid(
                "a generated turn must follow the prompt or an observation, not another generated turn",
            ));
        }
        if self.truncated || self.len() + ids.len() > self.config.max_len {
            self.truncated = true;
            return Ok(Appended::Truncated);
        }
        let last = ids[ids.len() - 1];
        let stopped = self.stop_ids.contains(&last);
        let closing = self.prompt.closing();
        let split = if stopped {
            let stop_text = self.chat.decode(&[last])?;
            self.prompt.split_closing(&stop_text)
        } else {
            None
        };
        let (gap, tail) = match split {
            // Only a special token stands for the template's end token; a plain-text stop (a
            // newline) inside the closing means the model never wrote that token: drift.
            Some((before, after)) if before.is_empty() || self.chat.is_special(last) => {
                (before.to_string(), after.to_string())
            }
            // No stop token, or one the closing lacks: the whole closing is owed (for the
            // latter the drift check reports the mismatch).
            _ => (String::new(), closing.to_string()),
        };
        let start = self.len();
        let a = &mut self.arrays;
        a.input_ids.extend_from_slice(ids);
        a.loss_mask.resize(start + ids.len(), 1);
        a.logprobs.extend_from_slice(logprobs);
        match versions {
            Versions::Uniform(v) => a.versions.resize(start + ids.len(), v),
            Versions::PerToken(v) => a.versions.extend_from_slice(v),
        }
        self.last_version = a.versions.last().copied().unwrap_or(self.last_version);
        let end = a.input_ids.len();
        a.turn_spans.extend([start as u32, end as u32]);
        self.segments.push(Segment::Generated {
            start,
            end,
            stopped,
            gap,
            tail,
        });
        Ok(Appended::Appended)
    }

    /// Append one environment step's messages (consecutive user/tool messages go in one call,
    /// since templates may merge them) as glue + template delta, loss mask 0.
    pub fn add_observation(&mut self, messages: &[Message]) -> Result<Appended> {
        if messages.is_empty() {
            return Err(Error::invalid("an observation needs at least one message"));
        }
        if self.truncated {
            return Ok(Appended::Truncated);
        }
        let tail = match self.segments.last() {
            Some(Segment::Generated { tail, .. }) => tail.clone(),
            _ => {
                return Err(Error::invalid(
                    "an observation must follow a generated turn (pass consecutive messages in one call)",
                ))
            }
        };
        let delta = self.prompt.observation_delta(&self.chat, messages)?;
        let ids = self.chat.encode(&(tail + &delta))?;
        if self.len() + ids.len() > self.config.max_len {
            self.truncated = true;
            return Ok(Appended::Truncated);
        }
        let n = self.len() + ids.len();
        let a = &mut self.arrays;
        a.input_ids.extend_from_slice(&ids);
        a.loss_mask.resize(n, 0);
        a.logprobs.resize(n, 0.0);
        a.versions.resize(n, self.last_version);
        self.segments.push(Segment::Observation(messages.to_vec()));
        Ok(Appended::Appended)
    }

    /// Finish: run the drift check (when configured) and hand over the arrays.
    pub fn finish(self) -> Result<Trajectory> {
        let drift = if self.config.check_drift {
            let report = self.check_drift()?;
            self.chat.record_check(!report.is_clean());
            match report.offset {
                Some(offset) if self.config.strict => {
                    return Err(Error::Drift {
                        offset,
                        expected: report.expected,
                        actual: report.actual,
                    })
                }
                Some(_) => true,
                None => false,
            }
        } else {
            false
        };
        Ok(Trajectory {
            turns: self.turns(),
            prompt_len: self.prompt.ids().len(),
            truncated: self.truncated,
            drift,
            tokens: self.arrays,
        })
    }
}

#[path = "builder_drift.rs"]
mod drift_check;

#[cfg(test)]
#[path = "builder_tests.rs"]
mod tests;
