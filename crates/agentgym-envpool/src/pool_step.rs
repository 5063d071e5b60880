//! Steps, single and batched, under the never-replay rule: an ambiguous failure ends the
//! episode. Batches go as one ZeroMQ message per server (chunked) or as concurrent HTTP
//! requests; each item settles on its own.
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::future::join_all;

use super::{Inner, MAX_BATCH};
use crate::error::{EnvPoolError, FailureKind, Result};
use crate::message::{Op, Reply, StepOutcome};

/// One resolved item: its position in the caller's list, episode handle and request.
type Item = (usize, u64, Op);

/// Per-item results of one group, keyed by position.
type Settled = Pin<Box<dyn Future<Output = Vec<(usize, Result<StepOutcome>)>> + Send>>;

impl Inner {
    pub(super) async fn step(
        self: &Arc<Self>,
        episode: u64,
        action: String,
    ) -> Result<StepOutcome> {
        let (ep, server) = self.lookup(episode)?;
        let op = Op::Step {
            id: ep.remote,
            action,
        };
        let result = server.call(&op, self.config.timeouts.step).await;
        self.settle_step(episode, result)
    }

    /// Turn a step reply into the caller's result, ending the episode on ambiguous failures.
    fn settle_step(self: &Arc<Self>, episode: u64, result: Result<Reply>) -> Result<StepOutcome> {
        let err = match result {
            Ok(Reply::Outcome(o)) => return Ok(o),
            Ok(other) => EnvPoolError::Malformed {
                server: String::new(),
                op: "step",
                detail: format!("unexpected reply {other:?}"),
            },
            Err(e) => e,
        };
        let Some(kind) = err.step_failure_kind() else {
            return Err(err);
        };
        Err(self.fail(episode, kind, err.to_string()))
    }
    /// End `episode` as an environment failure and close it remotely in the background.
    fn fail(self: &Arc<Self>, episode: u64, kind: FailureKind, detail: String) -> EnvPoolError {
        let Some(ep) = self.forget(episode) else {
            return EnvPoolError::UnknownEpisode(episode);
        };
        let address = self.servers[ep.server].config.address.clone();
        if self.servers[ep.server].generation() == ep.generation {
            // Best effort: if this fails too, the server's idle reaper frees the episode.
            let inner = Arc::clone(self);
            self.handle.spawn(async move {
                let close = Op::Close { id: ep.remote };
                let deadline = inner.config.timeouts.close;
                let _ = inner.servers[ep.server].call(&close, deadline).await;
            });
        }
        EnvPoolError::EnvFailure {
            episode,
            server: address,
            kind,
            detail,
        }
    }

    pub(super) async fn step_many(
        self: Arc<Self>,
        items: Vec<(u64, String)>,
    ) -> Vec<Result<StepOutcome>> {
        let mut results: Vec<Option<Result<StepOutcome>>> = Vec::with_capacity(items.len());
        let mut groups: BTreeMap<usize, Vec<Item>> = BTreeMap::new();
        for (pos, (episode, action)) in items.into_iter().enumerate() {
            match self.lookup(episode) {
                Ok((ep, _)) => {
                    let op = Op::Step {
                        id: ep.remote,
                        action,
                    };
                    groups
                        .entry(ep.server)
                        .or_default()
                        .push((pos, episode, op));
                    results.push(None);
                }
                Err(e) => results.push(Some(Err(e))),
            }
        }
        let mut work = Vec::new();
        for (server, group) in groups {
            if self.servers[server].supports_batch() {
                for chunk in group.chunks(MAX_BATCH) {
                    work.push(self.batch_chunk(server, chunk.to_vec()));
                }
            } else {
                work.push(self.http_group(server, group));
            }
        }
        for settled in join_all(work).await.into_iter().flatten() {
            let (pos, result) = settled;
            results[pos] = Some(result);
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or(Err(EnvPoolError::Closed)))
            .collect()
    }

    fn batch_chunk(self: &Arc<Self>, server: usize, chunk: Vec<Item>) -> Settled {
        let inner = Arc::clone(self);
        Box::pin(async move {
            let ops: Vec<Op> = chunk.iter().map(|(_, _, op)| op.clone()).collect();
            let srv = &inner.servers[server];
            match srv.batch(&ops, inner.config.timeouts.step).await {
                Ok(replies) => chunk
                    .iter()
                    .zip(replies)
                    .map(|((pos, episode, _), r)| (*pos, inner.settle_step(*episode, r)))
                    .collect(),
                Err(e) => {
                    // The whole message failed: no item can be known to have run or not.
                    let kind = e.step_failure_kind();
                    let detail = e.to_string();
                    chunk
                        .iter()
                        .map(|(pos, episode, _)| {
                            let err = match kind {
                                Some(kind) => inner.fail(*episode, kind, detail.clone()),
                                None => EnvPoolError::Refused {
                                    server: srv.config.address.clone(),
                                    op: "batch",
                                    message: detail.clone(),
                                    code: None,
                                },
                            };
                            (*pos, Err(err))
                        })
                        .collect()
                }
            }
        })
    }

    fn http_group(self: &Arc<Self>, server: usize, group: Vec<Item>) -> Settled {
        let inner = Arc::clone(self);
        Box::pin(async move {
            let srv = &inner.servers[server];
            let deadline = inner.config.timeouts.step;
            let calls = group.iter().map(|(pos, episode, op)| {
                let inner = &inner;
                async move {
                    let r = srv.call(op, deadline).await;
                    (*pos, inner.settle_step(*episode, r))
                }
            });
            join_all(calls).await
        })
    }
}
