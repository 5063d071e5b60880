//! The exact-prefix check: do the built ids say what the template would say?
//!
//! Observation deltas assume the template is append-only: that rendering a longer conversation
//! only appends text. Templates that rewrite history (Qwen3 drops `<think>` blocks from earlier
//! assistant turns, Llama trims content) break that, and then the ids we trained on are not
//! what the model sees at inference. One comparison per episode catches it: decode all built
//! ids and compare, as text, with a full render of the conversation whose assistant contents
//! are the decoded generated ids (stop token excluded). Text, not ids, because the engine's ids
//! need not be the canonical encoding of their text.
//!
//! A turn is clean when some content reproduces its sampled ids exactly through the template:
//! first the sampled text as it is, then that text less what the template itself writes around
//! a reply (its opening, Llama 2's leading `' '`, and the gap below). A template that writes
//! `' ' + content + ' ' + eos` without trimming renders a model's own sampled spaces doubled
//! when given the sampled text as content, yet the ids are exactly its render of the reply
//! without them; the builder tries both (`TrajectoryBuilder::check_drift`).
//!
//! One difference is allowed. A template may write text between a reply and its end token:
//! Llama 2 renders `' ' + content.strip() + ' ' + eos_token`. The model stops at the end token and
//! never samples that text (the gap), so a well-behaved turn's ids read `turn left</s>` where the
//! render reads `turn left </s>`. Right before the special stop token that ends a turn, the check
//! takes the gap as the template's and compares as if it were there; with the gap present (the
//! model wrote the space itself) the texts match as they are. Anything else is drift: a reply the
//! template changes (a trimming template given `turn left  ` renders `turn left `, whichever
//! content is tried), text changed anywhere else, a plain-text stop (then no gap is allowed,
//! since the model never wrote the end token).

use crate::chat::ChatTokenizer;
use crate::error::Result;

/// Context kept on each side of the first difference in reports.
const EXCERPT: usize = 40;

/// Where two texts first differ, with short excerpts from that point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Difference {
    pub offset: usize,
    pub expected: String,
    pub actual: String,
}

/// Outcome of a drift check.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DriftReport {
    /// Byte offset of the first difference; `None` when the trajectory is exact.
    pub offset: Option<usize>,
    /// The full render around the difference.
    pub expected: String,
    /// The decoded built ids around the difference.
    pub actual: String,
}

impl DriftReport {
    pub fn is_clean(&self) -> bool {
        self.offset.is_none()
    }

    pub(crate) fn compare(expected: &str, actual: &str) -> DriftReport {
        if expected == actual {
            return DriftReport::default();
        }
        let d = first_difference(expected, actual);
        DriftReport {
            offset: Some(d.offset),
            expected: d.expected,
            actual: d.actual,
        }
    }
}

/// A turn's stop token in the built ids and the template text that precedes it in the render.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gap<'a> {
    /// Index of the stop token in the built ids.
    pub at: usize,
    pub text: &'a str,
}

/// Compare `expected` with the text of `ids` followed by `owed` (the closing still owed after a
/// final turn), allowing each gap to be absent before its stop token.
pub(crate) fn check(
    chat: &ChatTokenizer,
    expected: &str,
    ids: &[u32],
    gaps: &[Gap<'_>],
    owed: &str,
) -> Result<DriftReport> {
    let mut whole = chat.decode(ids)?;
    whole.push_str(owed);
    if gaps.is_empty() {
        return Ok(DriftReport::compare(expected, &whole));
    }
    // Decode in pieces cut before each stop token. A piece then starts with a special token, so
    // no decoder strips a leading space or joins bytes across the cut; should one do it anyway,
    // the pieces no longer spell `whole` and the check falls back to the plain comparison.
    let mut pieces = Vec::with_capacity(gaps.len() + 1);
    let mut stops = Vec::with_capacity(gaps.len());
    let mut from = 0;
    for gap in gaps {
        pieces.push(chat.decode(&ids[from..gap.at])?);
        stops.push(chat.decode(&ids[gap.at..=gap.at])?);
        from = gap.at;
    }
    pieces.push(chat.decode(&ids[from..])? + owed);
    if pieces.concat() != whole {
        return Ok(DriftReport::compare(expected, &whole));
    }
    let mut actual = pieces[0].clone();
    for ((gap, stop), piece) in gaps.iter().zip(&stops).zip(&pieces[1..]) {
        let rest = expected.get(actual.len()..).unwrap_or("");
        let filled = rest
            .strip_prefix(gap.text)
            .is_some_and(|after| after.starts_with(stop.as_str()));
        if filled {
            actual.push_str(gap.text);
        }
        actual.push_str(piece);
    }
    Ok(DriftReport::compare(expected, &actual))
}

/// First differing byte offset (on a char boundary) of two different strings.
pub(crate) fn first_difference(expected: &str, actual: &str) -> Difference {
    let mut offset = expected
        .bytes()
        .zip(actual.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| expected.len().min(actual.len()));
    while !expected.is_char_boundary(offset) || !actual.is_char_boundary(offset) {
        offset -= 1;
    }
    Difference {
        offset,
        expected: excerpt(expected, offset),
        actual: excerpt(actual, offset),
    }
}

fn excerpt(s: &str, at: usize) -> String {
    let mut start = at.saturating_sub(EXCERPT);
    while !s.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + EXCERPT).min(s.len());
    while !s.is_char_boundary(end) {
        end += 1;
    }
    s[start..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_first_difference() {
        assert!(DriftReport::compare("abc", "abc").is_clean());
        let r = DriftReport::compare("héllo world", "héllo wörld");
        assert_eq!(r.offset, Some(8));
        assert_eq!(r.expected, "héllo world");
        let r = DriftReport::compare("abc", "abcd");
        assert_eq!(r.offset, Some(3));
        let d = first_difference("aé", "aè");
        assert_eq!(d.offset, 1);
    }
}
