//! The pool: episode handles over many servers, with balancing, health checks and the rules
//! that keep retries safe.
//!
//! Retry rules: reset, observation, close and health are idempotent and retried with backoff on
//! transient failures; `create` is retried (possibly on another server) only when the request
//! provably never left this process; `step` is never replayed. A step that fails ambiguously
//! ends its episode with [`EnvPoolError::EnvFailure`], and the pool closes the remote episode
//! in the background so the server does not keep it alive.
//!
//! Servers restart: each server has a generation that the health checks advance when they see
//! it restart, and an episode created under an older generation fails without a request
//! (after a restart the server reuses episode ids, so a request could hit someone else's
//! episode).
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use futures_util::future::join_all;
use tokio::runtime::Handle;
use tokio::task::AbortHandle;

use crate::config::PoolConfig;
use crate::error::{EnvPoolError, FailureKind, Result};
use crate::message::{Op, Reply, StepOutcome};
use crate::runtime;
use crate::server::{Server, ServerStatus};

/// Largest ZeroMQ batch sent as one message (the server refuses more than 4096).
const MAX_BATCH: usize = 1024;

/// A new episode.
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    /// The pool's handle for the episode (unique within the pool, never reused).
    pub episode: u64,
    /// Address of the server that holds it.
    pub server: String,
    /// The first observation, for servers whose `create` also resets (TextCraft).
    pub first: Option<StepOutcome>,
}

#[derive(Debug, Clone, Copy)]
struct Episode {
    server: usize,
    remote: i64,
    generation: u64,
}

struct Inner {
    config: PoolConfig,
    servers: Vec<Server>,
    by_env: HashMap<String, Vec<usize>>,
    episodes: Mutex<HashMap<u64, Episode>>,
    next_episode: AtomicU64,
    rotation: AtomicUsize,
    pid: u32,
    handle: Handle,
    closed: AtomicBool,
    health_task: Mutex<Option<AbortHandle>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self
            .health_task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

/// Async connections to many env servers. Cheap to clone (shared state).
///
/// Futures returned by its methods must run on [`EnvPool::handle`] (or another tokio runtime
/// that outlives them).
#[derive(Clone)]
pub struct EnvPool {
    inner: Arc<Inner>,
}

impl EnvPool {
    /// Build the pool and start its health checks on this process's env-pool runtime.
    pub fn new(config: PoolConfig) -> Result<Self> {
        config.validate()?;
        let handle = runtime::handle()?;
        let mut servers = Vec::with_capacity(config.servers.len());
        let mut by_env: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, sc) in config.servers.iter().enumerate() {
            // reqwest clients must be built inside a runtime context.
            let _guard = handle.enter();
            servers.push(Server::new(
                sc.clone(),
                &config,
                !config.health_interval.is_zero(),
            )?);
            by_env.entry(sc.env.clone()).or_default().push(i);
        }
        let inner = Arc::new(Inner {
            config,
            servers,
            by_env,
            episodes: Mutex::new(HashMap::new()),
            next_episode: AtomicU64::new(1),
            rotation: AtomicUsize::new(0),
            pid: std::process::id(),
            handle: handle.clone(),
            closed: AtomicBool::new(false),
            health_task: Mutex::new(None),
        });
        let interval = inner.config.health_interval;
        if !interval.is_zero() {
            let weak = Arc::downgrade(&inner);
            let task = handle.spawn(async move {
                loop {
                    tokio::time::sleep(interval).await;
                    let Some(inner) = weak.upgrade() else { return };
                    inner.check_health().await;
                }
            });
            *inner
                .health_task
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(task.abort_handle());
        }
        Ok(EnvPool { inner })
    }

    /// The runtime the pool's futures run on.
    pub fn handle(&self) -> Result<&Handle> {
        runtime::check_pid(self.inner.pid)?;
        Ok(&self.inner.handle)
    }

    /// Start an episode of `env` on the least loaded (or next) up server.
    pub async fn create(&self, env: &str) -> Result<Created> {
        self.inner.create(env).await
    }

    /// Start task `data_idx` in the episode (idempotent: retried on transient failures).
    pub async fn reset(&self, episode: u64, data_idx: i64) -> Result<StepOutcome> {
        let inner = &self.inner;
        let (ep, server) = inner.lookup(episode)?;
        let op = Op::Reset {
            id: ep.remote,
            data_idx,
        };
        match inner
            .idempotent(server, &op, inner.config.timeouts.reset)
            .await?
        {
            Reply::Outcome(o) => Ok(o),
            other => Err(unexpected(server, &op, &other)),
        }
    }

    /// Apply one action. Never replayed: an ambiguous failure ends the episode with
    /// [`EnvPoolError::EnvFailure`].
    pub async fn step(&self, episode: u64, action: &str) -> Result<StepOutcome> {
        self.inner.step(episode, action.to_owned()).await
    }

    /// Apply one action in each of many episodes. ZeroMQ servers get one batch message each,
    /// HTTP servers concurrent requests. One result per item, in order; one failure never
    /// fails the others.
    pub async fn step_many(&self, items: Vec<(u64, String)>) -> Vec<Result<StepOutcome>> {
        self.inner.clone().step_many(items).await
    }

    /// The current observation (idempotent).
    pub async fn observation(&self, episode: u64) -> Result<String> {
        let inner = &self.inner;
        let (ep, server) = inner.lookup(episode)?;
        let op = Op::Observation { id: ep.remote };
        match inner
            .idempotent(server, &op, inner.config.timeouts.observation)
            .await?
        {
            Reply::Observation(o) => Ok(o),
            other => Err(unexpected(server, &op, &other)),
        }
    }

    /// End the episode. The handle is released even when the server cannot be reached (its
    /// idle reaper then frees the episode); a refusal (already closed or reaped) is success, and
    /// so is a server without a close endpoint (HTTP 404/405).
    pub async fn close(&self, episode: u64) -> Result<()> {
        self.inner.close(episode).await
    }

    /// Probe every server now (the background checks do this every `health_interval`).
    pub async fn check_health(&self) -> Result<()> {
        runtime::check_pid(self.inner.pid)?;
        self.inner.check_health().await;
        Ok(())
    }

    /// Episodes this pool holds.
    pub fn live_episodes(&self) -> usize {
        self.inner
            .episodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// A snapshot of every server.
    pub fn servers(&self) -> Vec<ServerStatus> {
        self.inner.servers.iter().map(Server::status).collect()
    }

    /// Close every live episode, stop the health checks and drop connections. Later calls
    /// fail with [`EnvPoolError::Closed`].
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        if inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(task) = inner
            .health_task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
        let live: Vec<u64> = inner
            .episodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .copied()
            .collect();
        join_all(live.into_iter().map(|e| inner.close(e))).await;
        join_all(inner.servers.iter().map(Server::disconnect)).await;
    }
}

impl Inner {
    fn usable(&self) -> Result<()> {
        runtime::check_pid(self.pid)?;
        if self.closed.load(Ordering::SeqCst) {
            return Err(EnvPoolError::Closed);
        }
        Ok(())
    }

    async fn check_health(&self) {
        let deadline = self.config.timeouts.health;
        join_all(self.servers.iter().map(|s| s.check(deadline))).await;
    }

    /// The episode and its server; an episode whose server restarted since is ended here.
    fn lookup(&self, episode: u64) -> Result<(Episode, &Server)> {
        self.usable()?;
        let ep = *self
            .episodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&episode)
            .ok_or(EnvPoolError::UnknownEpisode(episode))?;
        let server = &self.servers[ep.server];
        if server.generation() != ep.generation {
            self.forget(episode);
            return Err(EnvPoolError::EnvFailure {
                episode,
                server: server.config.address.clone(),
                kind: FailureKind::ServerLost,
                detail: "the server restarted since the episode was created".into(),
            });
        }
        Ok((ep, server))
    }

    fn forget(&self, episode: u64) -> Option<Episode> {
        let ep = self
            .episodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&episode)?;
        self.servers[ep.server].live.fetch_sub(1, Ordering::SeqCst);
        Some(ep)
    }

    async fn idempotent(&self, server: &Server, op: &Op, deadline: Duration) -> Result<Reply> {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.config.retry_delay)
            .with_max_delay(Duration::from_secs(1))
            .with_max_times(self.config.retries)
            .with_jitter();
        (|| server.call(op, deadline))
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .when(EnvPoolError::is_transient)
            .await
    }

    async fn create(&self, env: &str) -> Result<Created> {
        self.usable()?;
        let candidates = self
            .by_env
            .get(env)
            .ok_or_else(|| EnvPoolError::UnknownEnv(env.to_owned()))?;
        let mut attempt = 0;
        loop {
            let idx = self.pick(env, candidates)?;
            let server = &self.servers[idx];
            // Count the episode before it exists so concurrent creates spread out.
            server.live.fetch_add(1, Ordering::SeqCst);
            let generation = server.generation();
            match server.call(&Op::Create, self.config.timeouts.create).await {
                Ok(Reply::Created { id, first }) => {
                    let episode = self.next_episode.fetch_add(1, Ordering::Relaxed);
                    let ep = Episode {
                        server: idx,
                        remote: id,
                        generation,
                    };
                    self.episodes
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(episode, ep);
                    return Ok(Created {
                        episode,
                        server: server.config.address.clone(),
                        first,
                    });
                }
                Ok(other) => {
                    server.live.fetch_sub(1, Ordering::SeqCst);
                    return Err(unexpected(server, &Op::Create, &other));
                }
                Err(e) => {
                    server.live.fetch_sub(1, Ordering::SeqCst);
                    if !e.never_sent() || attempt >= self.config.retries {
                        return Err(e);
                    }
                    attempt += 1;
                    tokio::time::sleep(self.config.retry_delay * attempt as u32).await;
                }
            }
        }
    }

    async fn close(&self, episode: u64) -> Result<()> {
        runtime::check_pid(self.pid)?;
        let ep = self
            .forget(episode)
            .ok_or(EnvPoolError::UnknownEpisode(episode))?;
        let server = &self.servers[ep.server];
        if server.generation() != ep.generation {
            return Ok(()); // the restart already dropped it
        }
        let op = Op::Close { id: ep.remote };
        match self
            .idempotent(server, &op, self.config.timeouts.close)
            .await
        {
            // A refusal: already closed or reaped. 404/405: a server without `/close` (older
            // AgentGym BabyAI servers) has nothing to free.
            Ok(_)
            | Err(EnvPoolError::Refused { .. })
            | Err(EnvPoolError::HttpStatus {
                status: 404 | 405, ..
            }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn unexpected(server: &Server, op: &Op, reply: &Reply) -> EnvPoolError {
    EnvPoolError::Malformed {
        server: server.config.address.clone(),
        op: op.name(),
        detail: format!("reply of another kind: {reply:?}"),
    }
}

#[path = "pool_step.rs"]
mod step;

#[path = "pool_pick.rs"]
mod pick;
