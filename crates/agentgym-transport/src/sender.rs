//! The rollout side: a DEALER that streams groups to one receiver under credit.
//!
//! [`GroupSender::send`] blocks (up to a timeout) until the receiver has granted credit, then
//! hands the group to the background task and returns its sequence number. The task keeps every
//! group until the receiver acknowledges it, and after a lost link it rebuilds its socket,
//! handshakes again and resends what the receiver has not accepted. The zeromq 0.6 DEALER does
//! not reconnect on its own; the task detects a dead link by a failed send or a missed heartbeat.
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc as tokio_mpsc;

use crate::auth::Secret;
use crate::endpoint;
use crate::error::{Result, TransportError};
use crate::runtime;
use crate::sender_task::{Cmd, SenderTask};

/// Tuning of a [`GroupSender`].
#[derive(Debug, Clone)]
pub struct SenderOptions {
    /// Stable name of this sender; must be unique among the receiver's senders. A new sender
    /// object with the same id (a restarted process) replaces the old one's state at the
    /// receiver. Default: `<hostname>-<pid>-<random>`.
    pub sender_id: Option<String>,
    /// How often the sender pings the receiver.
    pub heartbeat_interval: Duration,
    /// Silence from the receiver after which the link is considered dead and rebuilt.
    pub peer_timeout: Duration,
    /// Limit for one connect + handshake attempt.
    pub handshake_timeout: Duration,
    /// Longest pause between reconnection attempts (the pause doubles from 50 ms).
    pub max_reconnect_interval: Duration,
    /// With a secret, every message is signed and only replies signed with it are accepted
    /// ([`crate::auth`]); the receiver must hold the same secret.
    pub secret: Option<Secret>,
}

impl Default for SenderOptions {
    fn default() -> Self {
        SenderOptions {
            sender_id: None,
            heartbeat_interval: Duration::from_millis(500),
            peer_timeout: Duration::from_secs(3),
            handshake_timeout: Duration::from_secs(2),
            max_reconnect_interval: Duration::from_secs(1),
            secret: None,
        }
    }
}

/// Counters of a sender.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Groups accepted by `send` (the next sequence number).
    pub sent: u64,
    /// Groups the receiver has acknowledged (consumed by its application).
    pub acked: u64,
    /// Groups transmitted again after a reconnection.
    pub resent: u64,
    /// Completed handshakes (the first one included).
    pub handshakes: u64,
    /// Credit available to `send` right now.
    pub credit: u64,
    /// Whether a handshake is in force.
    pub connected: bool,
    /// Replies ignored because they were unsigned or wrongly signed.
    pub unauthenticated: u64,
}

impl SenderStats {
    /// Groups sent but not yet acknowledged (kept for resending).
    pub fn unacked(&self) -> u64 {
        self.sent - self.acked
    }
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) stats: SenderStats,
    pub(crate) closed: bool,
    pub(crate) fatal: Option<Fatal>,
}

/// State shared by the API side and the background task.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Change the state and wake every waiter.
    pub(crate) fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.lock());
        self.changed.notify_all();
    }

    /// Wait until `ready` holds (returning its value) or `timeout` passes.
    fn wait_for<T>(
        &self,
        timeout: Duration,
        what: &'static str,
        mut ready: impl FnMut(&mut State) -> Option<Result<T>>,
    ) -> Result<T> {
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        loop {
            if let Some(out) = ready(&mut st) {
                return out;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(TransportError::Timeout {
                    waited: timeout,
                    what,
                });
            }
            st = self
                .changed
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// Why a sender stopped for good.
#[derive(Debug, Clone)]
pub(crate) enum Fatal {
    /// The receiver refused us, or speaks another protocol version.
    Protocol(String),
    /// The receiver and this sender disagree about the secret.
    Unauthenticated(String),
}

fn terminal(st: &State) -> Option<TransportError> {
    if let Some(fatal) = &st.fatal {
        Some(match fatal.clone() {
            Fatal::Protocol(detail) => TransportError::Protocol { detail },
            Fatal::Unauthenticated(detail) => TransportError::Unauthenticated { detail },
        })
    } else if st.closed {
        Some(TransportError::Closed)
    } else {
        None
    }
}

/// Streams encoded groups to a [`crate::GroupReceiver`] (or any peer speaking the protocol).
pub struct GroupSender {
    endpoint: String,
    sender_id: String,
    pid: u32,
    shared: Arc<Shared>,
    cmds: tokio_mpsc::UnboundedSender<Cmd>,
    task_done: Mutex<Option<mpsc::Receiver<()>>>,
}

impl std::fmt::Debug for GroupSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupSender")
            .field("endpoint", &self.endpoint)
            .field("sender_id", &self.sender_id)
            .finish_non_exhaustive()
    }
}

/// A process-unique random 64-bit value (no RNG dependency needed for ids).
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.write_u32(std::process::id());
    h.finish()
}

fn default_sender_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".to_owned());
    format!("{host}-{}-{:08x}", std::process::id(), random_u64() as u32)
}

impl GroupSender {
    /// Start a sender towards `endpoint` (`tcp://HOST:PORT` or `ipc://PATH`). Returns at once;
    /// the connection and handshake happen in the background (see [`Self::wait_connected`]).
    pub fn connect(endpoint: &str, options: SenderOptions) -> Result<Self> {
        endpoint::check(endpoint, false)?;
        let handle = runtime::handle()?;
        let sender_id = options.sender_id.clone().unwrap_or_else(default_sender_id);
        let shared = Arc::new(Shared::default());
        let (cmds, cmd_rx) = tokio_mpsc::unbounded_channel();
        let (done_tx, done_rx) = mpsc::channel();
        let task = SenderTask::new(
            endpoint.to_owned(),
            sender_id.clone(),
            random_u64(),
            options,
            shared.clone(),
            cmd_rx,
        );
        handle.spawn(async move {
            task.run().await;
            drop(done_tx);
        });
        Ok(GroupSender {
            endpoint: endpoint.to_owned(),
            sender_id,
            pid: std::process::id(),
            shared,
            cmds,
            task_done: Mutex::new(Some(done_rx)),
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn sender_id(&self) -> &str {
        &self.sender_id
    }

    /// Queue one group, waiting up to `timeout` for credit. Returns its sequence number. On
    /// error nothing was queued (the caller keeps `payload`; cloning `Bytes` is cheap).
    pub fn send(&self, payload: &Bytes, timeout: Duration) -> Result<u64> {
        runtime::check_pid(self.pid)?;
        self.shared
            .wait_for(timeout, "credit from the receiver", |st| {
                if let Some(e) = terminal(st) {
                    return Some(Err(e));
                }
                if st.stats.credit == 0 || !st.stats.connected {
                    return None;
                }
                let seq = st.stats.sent;
                // Ordered with `seq` because both happen under the lock.
                if self.cmds.send(Cmd::Group(seq, payload.clone())).is_err() {
                    return Some(Err(TransportError::Closed));
                }
                st.stats.credit -= 1;
                st.stats.sent += 1;
                Some(Ok(seq))
            })
    }

    /// Wait until every group sent so far is acknowledged (through reconnections).
    pub fn flush(&self, timeout: Duration) -> Result<()> {
        self.wait_acked(timeout, false)
    }

    /// [`Self::flush`], but end with [`TransportError::LinkDown`] once no link is in force while
    /// groups are unacknowledged, instead of waiting for a reconnection: at a run's exit a
    /// receiver that went quiet for the peer timeout is gone and acknowledges nothing more.
    pub fn flush_while_linked(&self, timeout: Duration) -> Result<()> {
        self.wait_acked(timeout, true)
    }

    fn wait_acked(&self, timeout: Duration, while_linked: bool) -> Result<()> {
        runtime::check_pid(self.pid)?;
        self.shared
            .wait_for(timeout, "acknowledgement of every sent group", |st| {
                if st.stats.acked == st.stats.sent {
                    Some(Ok(()))
                } else if let Some(end) = terminal(st) {
                    Some(Err(end))
                } else if while_linked && !st.stats.connected {
                    let unacked = st.stats.unacked();
                    Some(Err(TransportError::LinkDown { unacked }))
                } else {
                    None
                }
            })
    }

    /// Wait until a handshake with the receiver is in force.
    pub fn wait_connected(&self, timeout: Duration) -> Result<()> {
        runtime::check_pid(self.pid)?;
        self.shared.wait_for(timeout, "the receiver's READY", |st| {
            if st.stats.connected {
                Some(Ok(()))
            } else {
                terminal(st).map(Err)
            }
        })
    }

    pub fn stats(&self) -> SenderStats {
        self.shared.lock().stats.clone()
    }

    /// Stop the background task and close the socket (waits up to one second for it).
    /// Unacknowledged groups are dropped with it: call [`Self::flush`] first to avoid that.
    pub fn close(&self) {
        self.shared.update(|st| st.closed = true);
        let _ = self.cmds.send(Cmd::Close);
        if std::process::id() != self.pid {
            return;
        }
        let done = self
            .task_done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(done) = done {
            let _ = done.recv_timeout(Duration::from_secs(1));
        }
    }
}

impl Drop for GroupSender {
    fn drop(&mut self) {
        self.shared.update(|st| st.closed = true);
        let _ = self.cmds.send(Cmd::Close);
    }
}
