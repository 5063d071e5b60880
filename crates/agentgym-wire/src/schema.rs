//! The trajectory carriers: what a rollout produces, the buffer groups, and the wire moves.
//!
//! These are plain owned Rust values; `codec` turns them into bytes and back. Per-token arrays are
//! kept as typed vectors here and travel as raw little-endian bytes with dtype and shape.

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

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
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
}

impl Sample {
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
