//! The learner side: a ROUTER that grants credit, de-duplicates and acknowledges on consumption.
use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc as tokio_mpsc;

use crate::auth::{AuthFailure, Secret};
use crate::endpoint;
use crate::error::{Result, TransportError};
use crate::receiver_task::{ReceiverTask, RxCmd};
use crate::runtime;

/// Tuning of a [`GroupReceiver`].
#[derive(Debug, Clone)]
pub struct ReceiverOptions {
    /// Credit window per sender: at most this many groups of one sender wait in the receiver
    /// (sent but not yet taken by `recv`).
    pub window: u32,
    /// With a secret, only messages signed with it are accepted and every reply is signed
    /// ([`crate::auth`]).
    pub secret: Option<Secret>,
}

impl Default for ReceiverOptions {
    fn default() -> Self {
        ReceiverOptions {
            window: 16,
            secret: None,
        }
    }
}

/// A message refused because it was not signed with the receiver's secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The sending peer's address (`tcp://IP:PORT`; `unknown` when the socket did not say).
    pub peer: String,
    pub reason: AuthFailure,
}

/// Refusals kept for [`GroupReceiver::take_refusals`]; beyond this they are only counted, so a
/// flood of forged messages cannot grow memory.
pub(crate) const MAX_KEPT_REFUSALS: usize = 64;

/// One group taken from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub sender_id: String,
    /// Sequence number within the sender's session (starts at 0 for each new sender process).
    pub seq: u64,
    pub payload: Bytes,
    pub(crate) session: u64,
}

/// Counters of a receiver.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Groups accepted from the wire (first copies only).
    pub received: u64,
    /// Groups handed to the application by `recv`.
    pub delivered: u64,
    /// Copies dropped because that (sender, seq) was already accepted.
    pub duplicates: u64,
    /// Groups dropped because earlier ones were missing (the sender is asked to resend).
    pub gaps: u64,
    /// Handshakes answered.
    pub handshakes: u64,
    /// Messages that were not valid protocol messages, or were refused.
    pub rejected: u64,
    /// Messages refused because they were unsigned or wrongly signed (also in `rejected`).
    pub unauthenticated: u64,
    /// Distinct sender ids seen.
    pub senders: u64,
}

/// Receives groups from any number of [`crate::GroupSender`]s.
pub struct GroupReceiver {
    endpoint: String,
    pid: u32,
    stats: Arc<Mutex<ReceiverStats>>,
    refusals: Arc<Mutex<VecDeque<Refusal>>>,
    deliveries: Mutex<mpsc::Receiver<Delivery>>,
    cmds: tokio_mpsc::UnboundedSender<RxCmd>,
    task_done: Mutex<Option<mpsc::Receiver<()>>>,
}

impl std::fmt::Debug for GroupReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupReceiver")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl GroupReceiver {
    /// Bind `endpoint` (e.g. [`crate::DEFAULT_BIND`], `tcp://127.0.0.1:5555`, `ipc:///tmp/x`).
    /// Port 0 picks a free port: read the result from [`Self::endpoint`]. A stale ipc socket
    /// file left by a dead process is removed first.
    pub fn bind(endpoint: &str, options: ReceiverOptions) -> Result<Self> {
        endpoint::check(endpoint, true)?;
        if options.window == 0 {
            return Err(TransportError::InvalidEndpoint {
                endpoint: endpoint.to_owned(),
                detail: "the credit window must be at least 1".into(),
            });
        }
        endpoint::remove_stale_ipc(endpoint);
        let handle = runtime::handle()?;
        let stats = Arc::new(Mutex::new(ReceiverStats::default()));
        let refusals = Arc::new(Mutex::new(VecDeque::new()));
        let (cmds, cmd_rx) = tokio_mpsc::unbounded_channel();
        let (deliver_tx, deliver_rx) = mpsc::channel();
        let (bound_tx, bound_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let task = ReceiverTask::new(options, stats.clone(), refusals.clone(), cmd_rx, deliver_tx);
        let requested = endpoint.to_owned();
        handle.spawn(async move {
            task.run(requested, bound_tx).await;
            drop(done_tx);
        });
        let resolved = bound_rx.recv().map_err(|_| TransportError::Closed)??;
        Ok(GroupReceiver {
            endpoint: resolved,
            pid: std::process::id(),
            stats,
            refusals,
            deliveries: Mutex::new(deliver_rx),
            cmds,
            task_done: Mutex::new(Some(done_rx)),
        })
    }

    /// The bound endpoint, with the actual port when port 0 was requested.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Take the next group, waiting up to `timeout`; `None` on timeout. Taking a group
    /// acknowledges it to its sender and returns one credit.
    pub fn recv(&self, timeout: Duration) -> Result<Option<Delivery>> {
        runtime::check_pid(self.pid)?;
        let rx = self
            .deliveries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match rx.recv_timeout(timeout) {
            Ok(d) => {
                self.cmds
                    .send(RxCmd::Consumed {
                        sender_id: d.sender_id.clone(),
                        session: d.session,
                        seq: d.seq,
                    })
                    .map_err(|_| TransportError::Closed)?;
                self.stats
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .delivered += 1;
                Ok(Some(d))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(TransportError::Closed),
        }
    }

    pub fn stats(&self) -> ReceiverStats {
        self.stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The messages refused for want of a valid signature since the last call (at most
    /// the first 64 of them; `stats().unauthenticated` counts them all).
    pub fn take_refusals(&self) -> Vec<Refusal> {
        self.refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
            .collect()
    }

    /// Unbind and close (waits up to one second). Groups not yet taken are not acknowledged, so
    /// their senders resend them to the next receiver.
    pub fn close(&self) {
        let _ = self.cmds.send(RxCmd::Close);
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

impl Drop for GroupReceiver {
    fn drop(&mut self) {
        let _ = self.cmds.send(RxCmd::Close);
    }
}
