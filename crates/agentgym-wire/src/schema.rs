//! The trajectory carriers: what a rollout produces, the buffer groups, and the wire moves.
//!
//! These are plain owned Rust values; `codec` turns them into bytes and back. Per-token arrays are
//! kept as typed vectors here and travel as raw little-endian bytes with dtype and shape.
//!
//! The checks that make a carrier well formed live here and in [`crate::codec::validate_tokens`],
//! once: the codec runs them on every message, the Python binding when a `Sample` is built.
use crate::codec::validate_tokens;
use crate::error::{Result, WireError};

/// Why an episode stopped. Exactly one per sample; never a set of booleans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// The environment reported `done`.
    Done,
    /// The turn cap of the episode's ScalingInter stage was reached.
    TurnCap,
    /// The next turn would not fit the context limit; the sample ends at a turn boundary.
    Truncated,
    /// The environment server failed (dead, timed out, ambiguous step); not for training.
    EnvFailure,
    /// The rollout server stopped the episode (shutdown, staleness cancel).
    Aborted,
}

impl Status {
    pub const ALL: [Status; 5] = [
        Status::Done,
        Status::TurnCap,
        Status::Truncated,
        Status::EnvFailure,
        Status::Aborted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Done => "done",
            Status::TurnCap => "turn_cap",
            Status::Truncated => "truncated",
            Status::EnvFailure => "env_failure",
            Status::Aborted => "aborted",
        }
    }

    /// The status named `s` (as written by [`Status::as_str`]); any other name is
    /// [`WireError::InvalidValue`].
    pub fn parse(s: &str) -> Result<Status> {
        Status::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| WireError::InvalidValue {
                field: "status",
                detail: format!("unknown status {s:?}"),
            })
    }
}

/// Per-token tensors of one sample, all of the same length.
///
/// `loss_mask` is 1 exactly on tokens the policy generated (the sampled stop token included) and 0
/// on prompt, chat-template glue and observation tokens. `logprobs` holds the behaviour policy's
/// log-probability of each generated token (0 where masked). `versions` holds the policy version
/// each token was generated under (for unmasked tokens, the version at the time they were added).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenArrays {
    pub input_ids: Vec<u32>,
    pub loss_mask: Vec<u8>,
    pub logprobs: Vec<f32>,
    pub versions: Vec<u32>,
    /// `[start, end)` token offsets of each generated turn, flattened as `[s0, e0, s1, e1, ...]`.
    pub turn_spans: Vec<u32>,
}

impl TokenArrays {
    pub fn len(&self) -> usize {
        self.input_ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.input_ids.is_empty()
    }

    /// The oldest policy version among generated tokens, if any token was generated.
    pub fn min_version(&self) -> Option<u32> {
        self.versions
            .iter()
            .zip(&self.loss_mask)
            .filter(|(_, &m)| m != 0)
            .map(|(&v, _)| v)
            .min()
    }

    pub fn max_version(&self) -> Option<u32> {
        self.versions
            .iter()
            .zip(&self.loss_mask)
            .filter(|(_, &m)| m != 0)
            .map(|(&v, _)| v)
            .max()
    }
}

/// One finished episode.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub tokens: TokenArrays,
    pub reward: f32,
    pub status: Status,
    /// The chat template was not append-only for this episode (see the trajectory builder).
    pub drift: bool,
    /// Number of generated turns.
    pub turns: u32,
    /// The turn cap the episode ran under and the ScalingInter stage it came from.
    pub turn_cap: u32,
    pub stage: u32,
    /// The policy version the episode was dispatched under.
    pub dispatch_version: u32,
    /// The episode's request id (joins a trained sample to the rollout's episode log); empty
    /// when the writer did not name it (an older writer).
    pub request_id: String,
    /// Per generated turn, in `turn_spans` order (schema version 2; empty: not given, and the
    /// whole `reward` is the last turn's): the reward the turn earned. They sum to `reward`.
    pub turn_rewards: Vec<f32>,
    /// Per generated turn (schema version 2; empty: not given): a key of the state the turn
    /// acted from (a hash of the env's normalised observation). Turns of one group with equal
    /// keys started from the same state: step-level credit compares them.
    pub turn_keys: Vec<u32>,
    /// The place of the sample's episode in its group, when some episode of the group trained
    /// as several samples (step-wise context: one per turn; a user agent's segments), in episode
    /// order (schema version 3; None: the sample is an episode of its own).
    pub episode: Option<u32>,
}

/// Check that a sample's per-turn arrays are absent or one entry per turn span, and its turn
/// rewards finite (shared by encode and decode).
pub fn validate_turns(s: &Sample) -> Result<()> {
    let k = s.tokens.turn_spans.len() / 2;
    for (field, len) in [
        ("turn_rewards", s.turn_rewards.len()),
        ("turn_keys", s.turn_keys.len()),
    ] {
        if len != 0 && len != k {
            return Err(WireError::InconsistentLength {
                field,
                expected: k,
                found: len,
            });
        }
    }
    if let Some(bad) = s.turn_rewards.iter().find(|r| !r.is_finite()) {
        return Err(WireError::InvalidValue {
            field: "turn_rewards",
            detail: format!("must be finite, got {bad}"),
        });
    }
    Ok(())
}

/// Check that a group's samples name their episodes all or none, in episode order from 0 with
/// none skipped (shared by encode and decode).
pub fn validate_episodes(samples: &[Sample]) -> Result<()> {
    let named = samples.iter().filter(|s| s.episode.is_some()).count();
    if named != 0 && named != samples.len() {
        return Err(WireError::InvalidValue {
            field: "episode",
            detail: format!("{named} of {} samples name their episode", samples.len()),
        });
    }
    let mut last: Option<u32> = None;
    for e in samples.iter().filter_map(|s| s.episode) {
        let next = last.map_or(0, |l| l + 1);
        if Some(e) != last && e != next {
            return Err(WireError::InvalidValue {
                field: "episode",
                detail: format!("episode {e} where {next} or the same as before was next"),
            });
        }
        last = Some(e);
    }
    Ok(())
}

impl Sample {
    /// Check that the sample is well formed: its token arrays pass [`validate_tokens`] and its
    /// reward is finite ([`WireError::InvalidValue`] otherwise).
    pub fn validate(&self) -> Result<()> {
        validate_tokens(&self.tokens)?;
        validate_turns(self)?;
        if !self.reward.is_finite() {
            return Err(WireError::InvalidValue {
                field: "reward",
                detail: format!("must be finite, got {}", self.reward),
            });
        }
        Ok(())
    }

    /// The sample carries per-turn rewards or keys (schema version 2).
    pub fn has_turn_arrays(&self) -> bool {
        !self.turn_rewards.is_empty() || !self.turn_keys.is_empty()
    }

    pub fn truncated(&self) -> bool {
        self.status == Status::Truncated
    }

    pub fn env_failure(&self) -> bool {
        self.status == Status::EnvFailure
    }
}

/// `n` samples of one task: a GRPO group.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub group_id: u64,
    /// `<env>_<int>`, the dataset convention.
    pub task_id: String,
    pub env: String,
    pub samples: Vec<Sample>,
}

impl Group {
    /// The oldest policy version of any generated token in the group.
    pub fn min_version(&self) -> Option<u32> {
        self.samples
            .iter()
            .filter_map(|s| s.tokens.min_version())
            .min()
    }

    pub fn rewards(&self) -> impl Iterator<Item = f32> + '_ {
        self.samples.iter().map(|s| s.reward)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize, spans: Vec<u32>, reward: f32) -> Sample {
        Sample {
            tokens: TokenArrays {
                input_ids: vec![7; n],
                loss_mask: vec![1; n],
                logprobs: vec![-0.5; n],
                versions: vec![0; n],
                turn_spans: spans,
            },
            reward,
            status: Status::Done,
            drift: false,
            turns: 1,
            turn_cap: 4,
            stage: 0,
            dispatch_version: 0,
            request_id: String::new(),
            turn_rewards: Vec::new(),
            turn_keys: Vec::new(),
            episode: None,
        }
    }

    #[test]
    fn status_names_round_trip_and_unknown_names_are_invalid_values() {
        for st in Status::ALL {
            assert_eq!(Status::parse(st.as_str()), Ok(st));
        }
        let err = Status::parse("finished").unwrap_err();
        assert!(matches!(
            err,
            WireError::InvalidValue {
                field: "status",
                ..
            }
        ));
        assert!(
            err.to_string().contains("unknown status \"finished\""),
            "{err}"
        );
    }

    #[test]
    fn a_well_formed_sample_validates() {
        assert_eq!(sample(3, vec![0, 3], 1.0).validate(), Ok(()));
        assert_eq!(sample(0, vec![], -2.5).validate(), Ok(()));
    }

    #[test]
    fn per_token_arrays_of_different_lengths_are_rejected() {
        let mut s = sample(3, vec![], 0.0);
        s.tokens.loss_mask.pop();
        assert_eq!(
            s.validate(),
            Err(WireError::InconsistentLength {
                field: "loss_mask",
                expected: 3,
                found: 2
            })
        );
        let mut s = sample(3, vec![], 0.0);
        s.tokens.versions.push(0);
        assert!(matches!(
            s.validate(),
            Err(WireError::InconsistentLength {
                field: "versions",
                expected: 3,
                found: 4
            })
        ));
        let mut s = sample(3, vec![], 0.0);
        s.tokens.logprobs.clear();
        assert!(matches!(
            s.validate(),
            Err(WireError::InconsistentLength {
                field: "logprobs",
                ..
            })
        ));
    }

    #[test]
    fn turn_spans_must_be_pairs_within_the_sample() {
        assert!(matches!(
            sample(3, vec![0], 0.0).validate(),
            Err(WireError::InconsistentLength {
                field: "turn_spans",
                ..
            })
        ));
        for spans in [vec![0, 4], vec![2, 1]] {
            assert!(matches!(
                sample(3, spans, 0.0).validate(),
                Err(WireError::InvalidValue {
                    field: "turn_spans",
                    ..
                })
            ));
        }
    }

    #[test]
    fn a_reward_that_is_not_finite_is_rejected() {
        for reward in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let err = sample(2, vec![], reward).validate().unwrap_err();
            assert!(matches!(
                err,
                WireError::InvalidValue {
                    field: "reward",
                    ..
                }
            ));
            assert!(err.to_string().contains("finite"), "{err}");
        }
    }
}
