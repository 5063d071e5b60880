//! The native ZeroMQ transport: one DEALER connection per server, requests multiplexed by a
//! `req` tag and replies dispatched by a reader task.
//!
//! `zeromq` 0.6 DEALERs do not reconnect and report no disconnect event, but a send to a peer
//! that went away fails at once ("not connected"). That failure marks the connection dead: every
//! request still waiting on it fails (their steps end their episodes) and the next call
//! connects afresh, which is how a restarted server is picked up again.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::AbortHandle;
use zeromq::{DealerSendHalf, DealerSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

use crate::error::{EnvPoolError, Result};
use crate::message::{DecodeError, Op, Reply};
use crate::zmq_codec::{self, WireReply};

type Waiter = oneshot::Sender<std::result::Result<WireReply, String>>;

struct Conn {
    send: tokio::sync::Mutex<DealerSendHalf>,
    pending: Mutex<HashMap<u64, Waiter>>,
    alive: AtomicBool,
    reader: Mutex<Option<AbortHandle>>,
}

impl Conn {
    fn kill(&self, why: &str) {
        self.alive.store(false, Ordering::SeqCst);
        if let Some(reader) = self
            .reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            reader.abort();
        }
        let waiters: Vec<Waiter> = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(_, w)| w)
            .collect();
        for w in waiters {
            let _ = w.send(Err(why.to_owned()));
        }
    }
}

/// Removes a request's waiter when its caller gives up (deadline, cancellation).
struct PendingGuard<'a> {
    conn: &'a Conn,
    req: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.conn
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.req);
    }
}

pub(crate) struct ZmqBackend {
    endpoint: String,
    connect_timeout: Duration,
    slot: tokio::sync::Mutex<Option<Arc<Conn>>>,
    next_req: AtomicU64,
}

impl ZmqBackend {
    pub(crate) fn new(endpoint: &str, connect_timeout: Duration) -> Self {
        ZmqBackend {
            endpoint: endpoint.to_owned(),
            connect_timeout,
            slot: tokio::sync::Mutex::new(None),
            next_req: AtomicU64::new(1),
        }
    }

    /// One request/reply. The caller applies the deadline.
    pub(crate) async fn call(&self, op: &Op) -> Result<Reply> {
        let req = self.next_req.fetch_add(1, Ordering::Relaxed);
        let frame = zmq_codec::encode(op, req).map_err(|d| self.malformed(op.name(), d))?;
        let reply = self.roundtrip(op.name(), req, frame).await?;
        zmq_codec::reply(op, reply).map_err(|e| self.decode_error(op.name(), e))
    }

    /// Many requests in one message; one result per op, in order.
    pub(crate) async fn batch(&self, ops: &[Op]) -> Result<Vec<Result<Reply>>> {
        let req = self.next_req.fetch_add(1, Ordering::Relaxed);
        let frame = zmq_codec::encode_batch(ops, req).map_err(|d| self.malformed("batch", d))?;
        let reply = self.roundtrip("batch", req, frame).await?;
        if !reply.ok {
            return Err(self.decode_error(
                "batch",
                DecodeError::Refused {
                    message: reply.error.unwrap_or_default(),
                    code: reply.code,
                },
            ));
        }
        let results = reply.results.unwrap_or_default();
        if results.len() != ops.len() {
            let detail = format!("{} results for {} ops", results.len(), ops.len());
            return Err(self.malformed("batch", detail));
        }
        Ok(ops
            .iter()
            .zip(results)
            .map(|(op, r)| zmq_codec::reply(op, r).map_err(|e| self.decode_error(op.name(), e)))
            .collect())
    }

    async fn roundtrip(&self, op: &'static str, req: u64, frame: Vec<u8>) -> Result<WireReply> {
        let conn = self.connection(op).await?;
        let (tx, rx) = oneshot::channel();
        conn.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(req, tx);
        let _guard = PendingGuard { conn: &conn, req };
        let sent = conn.send.lock().await.send(ZmqMessage::from(frame)).await;
        if let Err(e) = sent {
            // The peer is gone: nothing was written, and nothing in flight will be answered.
            conn.kill("connection lost: server went away");
            return Err(self.connection_error(op, e.to_string(), false));
        }
        match rx.await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(why)) => Err(self.connection_error(op, why, true)),
            Err(_) => Err(self.connection_error(op, "connection closed".into(), true)),
        }
    }

    /// The live connection, connecting first when there is none.
    async fn connection(&self, op: &'static str) -> Result<Arc<Conn>> {
        let mut slot = self.slot.lock().await;
        if let Some(conn) = slot.as_ref() {
            if conn.alive.load(Ordering::SeqCst) {
                return Ok(conn.clone());
            }
        }
        *slot = None;
        let mut socket = DealerSocket::new();
        let connected = tokio::time::timeout(self.connect_timeout, socket.connect(&self.endpoint))
            .await
            .unwrap_or_else(|_| Err(zeromq::ZmqError::Other("connect timed out")));
        if let Err(e) = connected {
            return Err(self.connection_error(op, format!("connect: {e}"), false));
        }
        let (send, mut recv) = socket.split();
        let conn = Arc::new(Conn {
            send: tokio::sync::Mutex::new(send),
            pending: Mutex::new(HashMap::new()),
            alive: AtomicBool::new(true),
            reader: Mutex::new(None),
        });
        let weak = Arc::downgrade(&conn);
        let reader = tokio::spawn(async move {
            loop {
                let msg = recv.recv().await;
                let Some(conn) = weak.upgrade() else { return };
                let Ok(msg) = msg else {
                    conn.kill("connection lost while receiving");
                    return;
                };
                let Some(frame) = msg.into_vec().pop() else {
                    continue;
                };
                // A reply that cannot be decoded cannot be dispatched; its caller times out.
                let Ok(reply) = zmq_codec::decode_frame(&frame) else {
                    continue;
                };
                let Some(req) = reply.req else { continue };
                let waiter = conn
                    .pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&req);
                if let Some(w) = waiter {
                    let _ = w.send(Ok(reply));
                }
            }
        });
        *conn.reader.lock().unwrap_or_else(PoisonError::into_inner) = Some(reader.abort_handle());
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Drop the connection (used at shutdown).
    pub(crate) async fn disconnect(&self) {
        if let Some(conn) = self.slot.lock().await.take() {
            conn.kill("pool shut down");
        }
    }

    fn connection_error(&self, op: &'static str, detail: String, sent: bool) -> EnvPoolError {
        EnvPoolError::Connection {
            server: self.endpoint.clone(),
            op,
            detail,
            sent,
        }
    }

    fn malformed(&self, op: &'static str, detail: String) -> EnvPoolError {
        EnvPoolError::Malformed {
            server: self.endpoint.clone(),
            op,
            detail,
        }
    }

    fn decode_error(&self, op: &'static str, e: DecodeError) -> EnvPoolError {
        match e {
            DecodeError::Refused { message, code } => EnvPoolError::Refused {
                server: self.endpoint.clone(),
                op,
                message,
                code,
            },
            DecodeError::Malformed(detail) => self.malformed(op, detail),
        }
    }
}

impl Drop for ZmqBackend {
    fn drop(&mut self) {
        if let Ok(mut slot) = self.slot.try_lock() {
            if let Some(conn) = slot.take() {
                conn.kill("pool dropped");
            }
        }
    }
}
