//! The buffer proper: pending groups, the ready queue and release with the staleness check.
use std::collections::{HashMap, VecDeque};

use agentgym_wire::{Group, Sample, Status};

use crate::admission::{AdmissionConfig, Counters};
use crate::error::{BufferError, Result};

/// Permission to run one group, handed out by [`TrajectoryBuffer::try_admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    pub group_id: u64,
    /// The policy version current when the group was admitted; it fixes the turn cap.
    pub dispatch_version: u32,
}

/// What happened to a group when a sample completed it (or did not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOutcome {
    /// The group still waits for samples.
    Pending { have: usize, want: usize },
    /// The group is complete and queued for the learner.
    Ready,
    /// The group is complete but all rewards are equal; dropped and counted.
    Filtered,
}

#[derive(Debug)]
struct Pending {
    task_id: String,
    env: String,
    samples: Vec<Sample>,
    /// Finished episodes; an episode may give several samples (step-wise context, a user
    /// agent's segments).
    episodes: usize,
    /// Per sample, its episode's place in the group (in the order episodes finished).
    episode_of: Vec<u32>,
}

#[derive(Debug)]
pub struct TrajectoryBuffer {
    config: AdmissionConfig,
    version: u32,
    /// The version this buffer started at: the staleness budget counts versions from here, so
    /// a server that joins a run at version v does not get v versions' worth of budget at once.
    start_version: u32,
    next_group_id: u64,
    pending: HashMap<u64, Pending>,
    ready: VecDeque<Group>,
    counters: Counters,
}

impl TrajectoryBuffer {
    pub fn new(config: AdmissionConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            config,
            version: 0,
            start_version: 0,
            next_group_id: 0,
            pending: HashMap::new(),
            ready: VecDeque::new(),
            counters: Counters::default(),
        })
    }

    /// Start at policy `version` (a server joining a run the learner has advanced), handing
    /// out group ids from `first_group_id` (ids unique across restarts of one server).
    pub fn starting_at(mut self, version: u32, first_group_id: u64) -> Self {
        self.version = version;
        self.start_version = version;
        self.next_group_id = first_group_id;
        self
    }

    pub fn config(&self) -> &AdmissionConfig {
        &self.config
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Change the in-flight cap while running (the rollout server sizes it from measured
    /// generation and env times). Groups already running above a lowered cap finish; none
    /// start until the running count is below it. The staleness budget is not touched.
    pub fn set_max_in_flight(&mut self, max_in_flight: usize) -> Result<()> {
        if max_in_flight == 0 {
            return Err(BufferError::InvalidConfig {
                field: "max_in_flight",
                reason: "must be at least 1".into(),
            });
        }
        self.config.max_in_flight = max_in_flight;
        Ok(())
    }

    /// How many groups may be admitted right now.
    pub fn capacity(&self) -> usize {
        let versions_here = self.version - self.start_version;
        self.config.capacity(versions_here, &self.counters)
    }

    /// Admit one group of `group_size` episodes of `task_id`, if capacity allows.
    pub fn try_admit(&mut self, task_id: &str, env: &str) -> Option<Ticket> {
        if self.capacity() == 0 {
            return None;
        }
        let group_id = self.next_group_id;
        self.next_group_id += 1;
        self.pending.insert(
            group_id,
            Pending {
                task_id: task_id.to_owned(),
                env: env.to_owned(),
                samples: Vec::with_capacity(self.config.group_size),
                episodes: 0,
                episode_of: Vec::with_capacity(self.config.group_size),
            },
        );
        self.counters.admitted += 1;
        self.counters.running += 1;
        Some(Ticket {
            group_id,
            dispatch_version: self.version,
        })
    }

    /// Add one finished episode to its group; the last one completes the group.
    pub fn add_sample(&mut self, group_id: u64, sample: Sample) -> Result<AddOutcome> {
        self.add_episode(group_id, vec![sample])
    }

    /// Add one finished episode given as several samples (the token-consistent segments of a
    /// user agent's episode: each trains as a sample); `group_size` episodes complete the group.
    pub fn add_episode(&mut self, group_id: u64, samples: Vec<Sample>) -> Result<AddOutcome> {
        let pending = self
            .pending
            .get_mut(&group_id)
            .ok_or(BufferError::UnknownGroup(group_id))?;
        for sample in &samples {
            self.counters.samples += 1;
            if sample.status == Status::EnvFailure {
                self.counters.env_failures += 1;
            }
        }
        let place = u32::try_from(pending.episodes).unwrap_or(u32::MAX);
        pending
            .episode_of
            .extend(std::iter::repeat_n(place, samples.len()));
        pending.samples.extend(samples);
        pending.episodes += 1;
        let have = pending.episodes;
        let want = self.config.group_size;
        if have < want {
            return Ok(AddOutcome::Pending { have, want });
        }
        let Some(done) = self.pending.remove(&group_id) else {
            return Err(BufferError::UnknownGroup(group_id));
        };
        self.counters.running -= 1;
        let group = Group {
            group_id,
            task_id: done.task_id,
            env: done.env,
            samples: name_episodes(done.samples, &done.episode_of),
        };
        if self.config.filter_zero_variance && zero_variance(&group) {
            self.counters.filtered += 1;
            return Ok(AddOutcome::Filtered);
        }
        self.ready.push_back(group);
        self.counters.ready += 1;
        self.counters.accepted += 1;
        Ok(AddOutcome::Ready)
    }

    /// Give up on a running group (shutdown, cancelled); its slot is returned and it is counted.
    pub fn abort_group(&mut self, group_id: u64) -> Result<usize> {
        let pending = self
            .pending
            .remove(&group_id)
            .ok_or(BufferError::UnknownGroup(group_id))?;
        self.counters.running -= 1;
        self.counters.aborted += 1;
        Ok(pending.samples.len())
    }

    /// The learner moved to a new policy version.
    pub fn set_version(&mut self, version: u32) -> Result<()> {
        if version < self.version {
            return Err(BufferError::VersionRegression {
                current: self.version,
                requested: version,
            });
        }
        self.version = version;
        Ok(())
    }

    /// Release the oldest ready group that is fresh enough; stale ones met on the way are
    /// dropped and counted.
    pub fn pop_ready(&mut self) -> Option<Group> {
        let oldest_allowed = self.version.saturating_sub(self.config.max_staleness);
        while let Some(group) = self.ready.pop_front() {
            self.counters.ready -= 1;
            let min_version = group.min_version().unwrap_or(self.version);
            if min_version < oldest_allowed {
                self.counters.stale += 1;
                self.counters.accepted -= 1;
                continue;
            }
            self.counters.released += 1;
            return Some(group);
        }
        None
    }

    /// Put a released group back at the head of the queue (the transport could not take it).
    /// It keeps its place in the budget, so nothing is lost and nothing is counted twice.
    pub fn requeue_front(&mut self, group: Group) {
        self.counters.released = self.counters.released.saturating_sub(1);
        self.counters.ready += 1;
        self.ready.push_front(group);
    }

    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }
}

fn zero_variance(group: &Group) -> bool {
    let mut rewards = group.rewards();
    match rewards.next() {
        Some(first) => rewards.all(|r| r == first),
        None => true,
    }
}

#[cfg(test)]
mod tests;

/// The samples, each naming its episode when some episode gave several (else left as they
/// are, so a group of one sample per episode is written exactly as before).
fn name_episodes(mut samples: Vec<Sample>, episode_of: &[u32]) -> Vec<Sample> {
    if samples.len() > episode_of.last().map_or(0, |&e| e as usize + 1) {
        for (s, &e) in samples.iter_mut().zip(episode_of) {
            s.episode = Some(e);
        }
    }
    samples
}
