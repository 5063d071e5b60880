//! Placement of a new episode: among the servers of its env that are up, round robin or the
//! least loaded (ties broken by rotation); none up is an error that says why each is down.
use std::sync::atomic::Ordering;

use super::Inner;
use crate::config::Balance;
use crate::error::{EnvPoolError, Result};

impl Inner {
    pub(super) fn pick(&self, env: &str, candidates: &[usize]) -> Result<usize> {
        let up: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&i| self.servers[i].is_up())
            .collect();
        if up.is_empty() {
            let reasons: Vec<String> = candidates
                .iter()
                .map(|&i| {
                    let s = &self.servers[i];
                    let why = s
                        .down_reason()
                        .unwrap_or_else(|| "no reason recorded".into());
                    format!("{} marked down: {why}", s.config.address)
                })
                .collect();
            return Err(EnvPoolError::NoServerUp {
                env: env.to_owned(),
                reasons: reasons.join("; "),
            });
        }
        let start = self.rotation.fetch_add(1, Ordering::Relaxed) % up.len();
        let rotated = up[start..].iter().chain(&up[..start]).copied();
        Ok(match self.config.balance {
            Balance::RoundRobin => up[start],
            Balance::LeastLoaded => rotated
                .min_by_key(|&i| self.servers[i].live.load(Ordering::SeqCst))
                .unwrap_or(up[start]),
        })
    }
}
