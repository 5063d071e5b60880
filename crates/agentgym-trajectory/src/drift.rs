//! The exact-prefix check: do the built ids say what the template would say?
//!
//! Observation deltas assume the template is append-only: that rendering a longer conversation
//! only appends text. Templates that rewrite history (Qwen3 drops `<think>` blocks from earlier
//! assistant turns, Llama trims content) break that, and then the ids we trained on are not
//! what the model sees at inference. One comparison per episode catches it: decode all built
//! ids and compare, as text, with a full render of the conversation whose assistant contents
//! are the decoded generated ids (stop token excluded). Text, not ids, because the engine's ids
//! need not be the canonical encoding of their text.

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
