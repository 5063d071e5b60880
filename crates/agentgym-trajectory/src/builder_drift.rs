//! The builder's side of the drift check: which conversation its ids stand for, and which
//! assistant contents to try (see [`TrajectoryBuilder::check_drift`]); the comparison itself is
//! in the drift module.
use super::{Segment, TrajectoryBuilder};
use crate::drift::{self, DriftReport, Gap};
use crate::error::Result;
use crate::Message;

/// A generated turn's text for the drift check (see [`TrajectoryBuilder::check_drift`]).
struct Reply {
    sampled: String,
    unwrapped: Option<String>,
}

impl Reply {
    fn unwrapped_or_sampled(&self) -> &str {
        self.unwrapped.as_deref().unwrap_or(&self.sampled)
    }
}

impl TrajectoryBuilder {
    /// The conversation these ids stand for: prefix, assistant turns with their decoded content
    /// (stop token excluded), observations.
    pub fn conversation(&self) -> Result<Vec<Message>> {
        let replies = self.replies()?;
        Ok(self.conversation_with(replies.iter().map(|r| r.sampled.as_str())))
    }

    /// Each generated turn's decoded content (stop token excluded) and, where it differs, that
    /// text less the template's own text around a reply: the opening before it and the gap
    /// before the stop token (Llama 2's spaces), when the model sampled them itself.
    fn replies(&self) -> Result<Vec<Reply>> {
        let opening = self.prompt.opening();
        let mut replies = Vec::new();
        for seg in &self.segments {
            if let Segment::Generated {
                start,
                end,
                stopped,
                gap,
                ..
            } = seg
            {
                let content_end = if *stopped { end - 1 } else { *end };
                let sampled = self
                    .chat
                    .decode(&self.arrays.input_ids[*start..content_end])?;
                let inner = sampled.strip_prefix(opening).unwrap_or(&sampled);
                let inner = inner.strip_suffix(gap.as_str()).unwrap_or(inner);
                let unwrapped = (inner != sampled).then(|| inner.to_string());
                replies.push(Reply { sampled, unwrapped });
            }
        }
        Ok(replies)
    }

    /// The prefix, observations and the given assistant contents, in order.
    fn conversation_with<'a>(&self, mut contents: impl Iterator<Item = &'a str>) -> Vec<Message> {
        let mut messages = self.prompt.messages().to_vec();
        for seg in &self.segments {
            match seg {
                Segment::Generated { .. } => {
                    let content = contents.next().unwrap_or_default();
                    messages.push(serde_json::json!({"role": "assistant", "content": content}));
                }
                Segment::Observation(obs) => messages.extend(obs.iter().cloned()),
            }
        }
        messages
    }

    /// Do the built ids say what the template would? A turn is clean when some content
    /// reproduces its sampled ids exactly through the template: the sampled text as it is, or
    /// else that text less the template's own text around a reply (a template that writes
    /// `' ' + content + ' ' + eos` without trimming doubles the spaces a model sampled itself).
    /// Tried in that order: every turn as sampled; every turn unwrapped; then turn by turn,
    /// keeping an unwrapped content where it moves the first difference later. The report is
    /// that of the best assignment found; the gaps (never sampled) may be absent before their
    /// stop tokens, as in [`drift::check`].
    pub fn check_drift(&self) -> Result<DriftReport> {
        let replies = self.replies()?;
        let mut chosen: Vec<&str> = replies.iter().map(|r| r.sampled.as_str()).collect();
        let mut report = self.check_contents(&chosen)?;
        if report.is_clean() || replies.iter().all(|r| r.unwrapped.is_none()) {
            return Ok(report);
        }
        let unwrapped: Vec<&str> = replies.iter().map(Reply::unwrapped_or_sampled).collect();
        let all = self.check_contents(&unwrapped)?;
        if all.is_clean() {
            return Ok(all);
        }
        for (i, reply) in replies.iter().enumerate() {
            let Some(inner) = reply.unwrapped.as_deref() else {
                continue;
            };
            let previous = std::mem::replace(&mut chosen[i], inner);
            let trial = self.check_contents(&chosen)?;
            let later = match (trial.offset, report.offset) {
                (None, _) => true,
                (Some(now), Some(before)) => now > before,
                (Some(_), None) => false,
            };
            if later {
                report = trial;
                if report.is_clean() {
                    break;
                }
            } else {
                chosen[i] = previous;
            }
        }
        Ok(report)
    }

    /// The drift check of one choice of assistant contents.
    fn check_contents(&self, contents: &[&str]) -> Result<DriftReport> {
        let messages = self.conversation_with(contents.iter().copied());
        let generation_prompt = self.expects_generation();
        let tools = self.prompt.tools_value();
        let expected = self.chat.render_values(
            minijinja::Value::from_serialize(&messages),
            tools,
            generation_prompt,
        )?;
        let gaps: Vec<Gap<'_>> = self
            .segments
            .iter()
            .filter_map(|seg| match seg {
                Segment::Generated { end, gap, .. } if !gap.is_empty() => Some(Gap {
                    at: end - 1,
                    text: gap,
                }),
                _ => None,
            })
            .collect();
        let owed = match self.segments.last() {
            Some(Segment::Generated { tail, .. }) => tail.as_str(),
            _ => "",
        };
        drift::check(&self.chat, &expected, &self.arrays.input_ids, &gaps, owed)
    }
}
