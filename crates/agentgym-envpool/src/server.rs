//! One env server as the pool sees it: a transport, a concurrency limit, and the state the
//! health checks and the balancer read (up/down, live episodes, restart generation).
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::config::{PoolConfig, ServerConfig, Transport};
use crate::error::{EnvPoolError, Result};
use crate::http::HttpBackend;
use crate::message::{Health, Op, Reply};
use crate::zmq::ZmqBackend;

enum Backend {
    Http(HttpBackend),
    Zmq(ZmqBackend),
}

/// A snapshot of one server's state, for monitoring.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerStatus {
    pub env: String,
    pub address: String,
    /// False while the last health check failed.
    pub up: bool,
    /// Episodes this pool holds on the server.
    pub live_episodes: usize,
    /// Requests in flight right now.
    pub inflight: usize,
    /// How many restarts the pool has noticed (episodes of older generations are lost).
    pub generation: u64,
    /// The server's own report from the last successful health check.
    pub reported: Option<Health>,
    /// Why the server is marked down (the failed health check or refused connection), while it
    /// is.
    pub down_reason: Option<String>,
}

pub(crate) struct Server {
    pub(crate) config: ServerConfig,
    backend: Backend,
    permits: Semaphore,
    up: AtomicBool,
    mark_down: bool,
    pub(crate) live: AtomicUsize,
    generation: AtomicU64,
    last_health: Mutex<Option<Health>>,
    down_reason: Mutex<Option<String>>,
}

impl Server {
    /// `mark_down`: stop routing to a server that refuses connections (only sensible when
    /// health checks run to bring it back).
    pub(crate) fn new(config: ServerConfig, pool: &PoolConfig, mark_down: bool) -> Result<Self> {
        let backend = match config.transport()? {
            Transport::Http => Backend::Http(HttpBackend::new(
                &config.address,
                config.dialect,
                config.max_inflight,
                pool.timeouts.connect,
                pool.pool_idle_timeout,
            )?),
            Transport::Zmq => Backend::Zmq(ZmqBackend::new(&config.address, pool.timeouts.connect)),
        };
        Ok(Server {
            permits: Semaphore::new(config.max_inflight),
            config,
            backend,
            up: AtomicBool::new(true),
            mark_down,
            live: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            last_health: Mutex::new(None),
            down_reason: Mutex::new(None),
        })
    }

    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::SeqCst)
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    pub(crate) fn supports_batch(&self) -> bool {
        matches!(self.backend, Backend::Zmq(_))
    }

    /// One request under the concurrency limit, within `deadline` (permit wait included).
    pub(crate) async fn call(&self, op: &Op, deadline: Duration) -> Result<Reply> {
        let work = async {
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| EnvPoolError::Closed)?;
            match &self.backend {
                Backend::Http(b) => b.call(op).await,
                Backend::Zmq(b) => b.call(op).await,
            }
        };
        let result = tokio::time::timeout(deadline, work)
            .await
            .unwrap_or_else(|_| Err(self.timeout(op.name(), deadline)));
        match &result {
            // Nothing listens there: stop routing new episodes to it until a health check passes.
            Err(e) if self.mark_down && e.never_sent() => self.mark_down(e),
            _ => {}
        }
        result
    }

    /// Stop routing to the server, remembering why (the error without its address prefix).
    fn mark_down(&self, why: &EnvPoolError) {
        let text = why.to_string();
        let prefix = format!("{}: ", self.config.address);
        let reason = text.strip_prefix(&prefix).unwrap_or(&text).to_owned();
        *self
            .down_reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(reason);
        self.up.store(false, Ordering::SeqCst);
    }

    /// Why the server is down (`None` while it is up).
    pub(crate) fn down_reason(&self) -> Option<String> {
        if self.is_up() {
            return None;
        }
        self.down_reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Many requests as one ZeroMQ batch message (one permit), within `deadline`.
    pub(crate) async fn batch(&self, ops: &[Op], deadline: Duration) -> Result<Vec<Result<Reply>>> {
        let Backend::Zmq(b) = &self.backend else {
            return Err(EnvPoolError::Config("batch on an HTTP server".into()));
        };
        let work = async {
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| EnvPoolError::Closed)?;
            b.batch(ops).await
        };
        tokio::time::timeout(deadline, work)
            .await
            .unwrap_or_else(|_| Err(self.timeout("batch", deadline)))
    }

    /// Probe the server and update its state. A server whose uptime went backwards (or that
    /// came back from down without reporting uptime) restarted: its generation advances.
    pub(crate) async fn check(&self, deadline: Duration) -> bool {
        match self.call(&Op::Health, deadline).await {
            Ok(Reply::Health(h)) => {
                let mut last = self
                    .last_health
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let was_up = self.up.swap(true, Ordering::SeqCst);
                let restarted = match (last.as_ref().and_then(|l| l.uptime_s), h.uptime_s) {
                    (Some(before), Some(now)) => now < before,
                    (_, None) => !was_up,
                    (None, Some(_)) => false,
                };
                if restarted {
                    self.generation.fetch_add(1, Ordering::SeqCst);
                }
                *last = Some(h);
                true
            }
            Ok(other) => {
                self.mark_down(&EnvPoolError::Malformed {
                    server: self.config.address.clone(),
                    op: "health",
                    detail: format!("reply of another kind: {other:?}"),
                });
                false
            }
            Err(e) => {
                self.mark_down(&e);
                false
            }
        }
    }

    pub(crate) fn status(&self) -> ServerStatus {
        ServerStatus {
            env: self.config.env.clone(),
            address: self.config.address.clone(),
            up: self.is_up(),
            live_episodes: self.live.load(Ordering::SeqCst),
            inflight: self.config.max_inflight - self.permits.available_permits(),
            generation: self.generation(),
            reported: self
                .last_health
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            down_reason: self.down_reason(),
        }
    }

    pub(crate) async fn disconnect(&self) {
        self.permits.close();
        if let Backend::Zmq(b) = &self.backend {
            b.disconnect().await;
        }
    }

    fn timeout(&self, op: &'static str, after: Duration) -> EnvPoolError {
        EnvPoolError::Timeout {
            server: self.config.address.clone(),
            op,
            after,
        }
    }
}
