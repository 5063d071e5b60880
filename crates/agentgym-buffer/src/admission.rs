//! Staleness admission control (the AReaL/SkyRL rule) and the buffer's counters.
//!
//! With S the maximum staleness in policy versions, v the learner's current version (counted
//! from the version the buffer started at: a server joining a run late gets no back budget) and
//! B the groups consumed per train step, at most `(S + v + 1) * B` groups may ever have been started by
//! version v. Together with the in-flight cap:
//!
//! `capacity = min(max_in_flight - running, (S + v + 1) * B - (accepted + running))`
//!
//! `accepted` counts groups that completed and will reach the learner. Groups that are filtered
//! (zero reward variance), dropped as stale or aborted give their slot back: counting them would
//! let the budget run out before the learner has its B groups, and rollout would stall.
use crate::error::{BufferError, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// Samples per group (GRPO's n).
    pub group_size: usize,
    /// Groups the learner consumes per optimizer step (B).
    pub groups_per_step: usize,
    /// Maximum policy-version lag of the oldest generated token of a released group (S).
    pub max_staleness: u32,
    /// Maximum groups running at once.
    pub max_in_flight: usize,
    /// Maximum complete groups held (ready plus running), the memory bound.
    pub max_ready: usize,
    /// Drop groups whose rewards are all equal (no GRPO signal); counted as filtered.
    pub filter_zero_variance: bool,
}

impl AdmissionConfig {
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("group_size", self.group_size),
            ("groups_per_step", self.groups_per_step),
            ("max_in_flight", self.max_in_flight),
            ("max_ready", self.max_ready),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(BufferError::InvalidConfig {
                    field,
                    reason: "must be at least 1".into(),
                });
            }
        }
        Ok(())
    }

    /// How many more groups may start now.
    pub(crate) fn capacity(&self, version: u32, c: &Counters) -> usize {
        let by_in_flight = self.max_in_flight.saturating_sub(c.running);
        let budget = (self.max_staleness as u64 + version as u64 + 1) * self.groups_per_step as u64;
        let by_staleness = budget.saturating_sub((c.accepted + c.running) as u64);
        let by_memory = self.max_ready.saturating_sub(c.ready + c.running);
        by_in_flight
            .min(usize::try_from(by_staleness).unwrap_or(usize::MAX))
            .min(by_memory)
    }
}

/// Where every admitted group went. `admitted == running + ready + released + filtered + stale +
/// aborted` always holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub admitted: usize,
    pub running: usize,
    pub ready: usize,
    pub released: usize,
    pub filtered: usize,
    pub stale: usize,
    pub aborted: usize,
    /// Completed groups that count against the staleness budget (ready + released).
    pub accepted: usize,
    /// Samples received, and those among them whose episode hit an environment failure.
    pub samples: usize,
    pub env_failures: usize,
}
