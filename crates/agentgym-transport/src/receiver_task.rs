//! The receiver's background task: handshakes, credit accounting, de-duplication, acks.
use std::collections::{HashMap, VecDeque};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedReceiver;
use zeromq::{RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

use crate::address_book::AddressBook;
use crate::auth::{self, AuthFailure, Secret};
use crate::error::{Result, TransportError};
use crate::protocol::{self, ToReceiver, ToSender, PROTOCOL_VERSION};
use crate::receiver::{Delivery, ReceiverOptions, ReceiverStats, Refusal, MAX_KEPT_REFUSALS};

/// Longest wait for one control reply to be written.
const REPLY_TIMEOUT: Duration = Duration::from_millis(200);
pub(crate) enum RxCmd {
    /// The application took this group.
    Consumed {
        sender_id: String,
        session: u64,
        seq: u64,
    },
    Close,
}

/// What the receiver knows about one sender id.
struct Peer {
    routing_id: Bytes,
    session: u64,
    hs: u64,
    /// The next seq to accept.
    expected: u64,
    /// Every seq below this one was consumed.
    acked: u64,
    /// Accepted but not yet consumed.
    queued: u64,
    /// Credit the sender still holds (as far as we know).
    outstanding: u64,
    /// Credit granted since the last ack was sent.
    pending_grant: u64,
    ack_due: bool,
    /// The handshake for which a resend request was already sent after a gap.
    gap_notified_hs: u64,
}

pub(crate) struct ReceiverTask {
    window: u64,
    secret: Option<Secret>,
    stats: Arc<Mutex<ReceiverStats>>,
    refusals: Arc<Mutex<VecDeque<Refusal>>>,
    /// Filled in `run` (the monitor must be taken from the socket before binding).
    addresses: Option<AddressBook>,
    cmds: UnboundedReceiver<RxCmd>,
    deliveries: mpsc::Sender<Delivery>,
    peers: HashMap<String, Peer>,
}

impl ReceiverTask {
    pub(crate) fn new(
        options: ReceiverOptions,
        stats: Arc<Mutex<ReceiverStats>>,
        refusals: Arc<Mutex<VecDeque<Refusal>>>,
        cmds: UnboundedReceiver<RxCmd>,
        deliveries: mpsc::Sender<Delivery>,
    ) -> Self {
        ReceiverTask {
            window: options.window.into(),
            secret: options.secret,
            stats,
            refusals,
            addresses: None,
            cmds,
            deliveries,
            peers: HashMap::new(),
        }
    }

    fn count(&self, f: impl FnOnce(&mut ReceiverStats)) {
        f(&mut self.stats.lock().unwrap_or_else(PoisonError::into_inner));
    }

    pub(crate) async fn run(mut self, endpoint: String, bound: mpsc::Sender<Result<String>>) {
        let mut socket = RouterSocket::new();
        self.addresses = Some(AddressBook::new(socket.monitor()));
        match socket.bind(&endpoint).await {
            Ok(resolved) => {
                let _ = bound.send(Ok(resolved.to_string()));
            }
            Err(source) => {
                let _ = bound.send(Err(TransportError::Socket { endpoint, source }));
                return;
            }
        }
        loop {
            tokio::select! {
                msg = socket.recv() => match msg {
                    Ok(msg) => self.on_message(&mut socket, msg).await,
                    Err(_) => self.count(|s| s.rejected += 1),
                },
                () = async {
                    match self.addresses.as_mut() {
                        Some(book) => book.update().await,
                        None => std::future::pending().await,
                    }
                } => {}
                cmd = self.cmds.recv() => {
                    let mut next = cmd;
                    // Coalesce everything queued into one ack per sender.
                    loop {
                        match next {
                            Some(RxCmd::Consumed { sender_id, session, seq }) => {
                                self.on_consumed(&sender_id, session, seq);
                            }
                            Some(RxCmd::Close) | None => {
                                socket.close().await;
                                return;
                            }
                        }
                        match self.cmds.try_recv() {
                            Ok(cmd) => next = Some(cmd),
                            Err(_) => break,
                        }
                    }
                    self.send_acks(&mut socket).await;
                }
            }
        }
    }

    async fn reply(&mut self, socket: &mut RouterSocket, routing_id: &Bytes, msg: &ToSender) {
        let mut frames = vec![routing_id.clone()];
        frames.extend(auth::seal(
            self.secret.as_ref(),
            vec![protocol::encode(msg)],
        ));
        if let Ok(m) = ZmqMessage::try_from(frames) {
            // A peer that vanished will handshake again; nothing to do on failure. The bound
            // keeps a dying connection from stalling every other sender.
            let _ = tokio::time::timeout(REPLY_TIMEOUT, socket.send(m)).await;
        }
    }

    async fn on_message(&mut self, socket: &mut RouterSocket, msg: ZmqMessage) {
        let mut frames = msg.into_vecdeque();
        let Some(routing_id) = frames.pop_front() else {
            self.count(|s| s.rejected += 1);
            return;
        };
        if let Err(reason) = auth::open(self.secret.as_ref(), &mut frames) {
            let hello = frames
                .front()
                .and_then(|f| protocol::decode::<ToReceiver>(f))
                .is_some_and(|m| matches!(m, ToReceiver::Hello { .. }));
            return self.refuse(socket, &routing_id, hello, reason).await;
        }
        let Some(header) = frames.pop_front() else {
            self.count(|s| s.rejected += 1);
            return;
        };
        match protocol::decode::<ToReceiver>(&header) {
            Some(ToReceiver::Hello {
                v,
                sender,
                session,
                hs,
                first_unacked,
            }) => {
                if v != PROTOCOL_VERSION {
                    self.count(|s| s.rejected += 1);
                    let reason =
                        format!("sender speaks protocol {v}, this receiver {PROTOCOL_VERSION}");
                    self.reply(socket, &routing_id, &ToSender::Reject { reason })
                        .await;
                    return;
                }
                let ready = self.on_hello(routing_id.clone(), sender, session, hs, first_unacked);
                self.reply(socket, &routing_id, &ready).await;
            }
            Some(ToReceiver::Data {
                sender,
                session,
                seq,
                ..
            }) => {
                let payload = frames.pop_front().unwrap_or_default();
                self.on_data(socket, &routing_id, sender, session, seq, payload)
                    .await;
            }
            Some(ToReceiver::Ping {
                sender, session, ..
            }) => {
                let reply = match self.peers.get(&sender) {
                    Some(p) if p.session == session => ToSender::Pong { session, hs: p.hs },
                    _ => ToSender::HelloRequired {},
                };
                self.reply(socket, &routing_id, &reply).await;
            }
            None => self.count(|s| s.rejected += 1),
        }
    }

    /// Count and record a message that failed authentication. A refused HELLO is answered
    /// with UNAUTHENTICATED (signed), so a sender without the secret stops with the reason.
    async fn refuse(
        &mut self,
        socket: &mut RouterSocket,
        routing_id: &Bytes,
        hello: bool,
        reason: AuthFailure,
    ) {
        self.count(|s| {
            s.rejected += 1;
            s.unauthenticated += 1;
        });
        let peer = self
            .addresses
            .as_mut()
            .map_or_else(|| "unknown".to_owned(), |book| book.of(routing_id));
        {
            let mut kept = self.refusals.lock().unwrap_or_else(PoisonError::into_inner);
            if kept.len() < MAX_KEPT_REFUSALS {
                kept.push_back(Refusal { peer, reason });
            }
        }
        if hello {
            let reason = format!(
                "the receiver refused the handshake: {reason}; it accepts only messages \
                 signed with the run's secret"
            );
            self.reply(socket, routing_id, &ToSender::Unauthenticated { reason })
                .await;
        }
    }

    fn on_hello(
        &mut self,
        routing_id: Bytes,
        sender: String,
        session: u64,
        hs: u64,
        first_unacked: u64,
    ) -> ToSender {
        let window = self.window;
        let is_new = !self.peers.contains_key(&sender);
        let peer = self.peers.entry(sender).or_insert_with(|| Peer {
            routing_id: routing_id.clone(),
            session,
            hs,
            expected: first_unacked,
            acked: first_unacked,
            queued: 0,
            outstanding: 0,
            pending_grant: 0,
            ack_due: false,
            gap_notified_hs: 0,
        });
        if peer.session != session {
            // A restarted sender: forget the old session (its queued groups are still
            // delivered, but their consumption no longer counts for this sender).
            peer.session = session;
            peer.expected = first_unacked;
            peer.acked = first_unacked;
            peer.queued = 0;
        }
        peer.routing_id = routing_id;
        peer.hs = hs;
        peer.expected = peer.expected.max(first_unacked);
        peer.acked = peer.acked.max(first_unacked);
        peer.outstanding = window.saturating_sub(peer.queued);
        peer.pending_grant = 0;
        peer.ack_due = false;
        let ready = ToSender::Ready {
            v: PROTOCOL_VERSION,
            session,
            hs,
            next: peer.expected,
            acked: peer.acked,
            credit: peer.outstanding,
            window,
        };
        self.count(|s| {
            s.handshakes += 1;
            s.senders += u64::from(is_new);
        });
        ready
    }

    async fn on_data(
        &mut self,
        socket: &mut RouterSocket,
        routing_id: &Bytes,
        sender: String,
        session: u64,
        seq: u64,
        payload: Bytes,
    ) {
        let Some(peer) = self.peers.get_mut(&sender).filter(|p| p.session == session) else {
            self.count(|s| s.rejected += 1);
            self.reply(socket, routing_id, &ToSender::HelloRequired {})
                .await;
            return;
        };
        if seq < peer.expected {
            self.count(|s| s.duplicates += 1);
            return;
        }
        if seq > peer.expected {
            let notify = peer.gap_notified_hs != peer.hs;
            peer.gap_notified_hs = peer.hs;
            self.count(|s| s.gaps += 1);
            if notify {
                self.reply(socket, routing_id, &ToSender::HelloRequired {})
                    .await;
            }
            return;
        }
        peer.expected += 1;
        peer.queued += 1;
        peer.outstanding = peer.outstanding.saturating_sub(1);
        let delivery = Delivery {
            sender_id: sender,
            seq,
            payload,
            session,
        };
        // The application side holds the other end for the receiver's whole life.
        let _ = self.deliveries.send(delivery);
        self.count(|s| s.received += 1);
    }

    fn on_consumed(&mut self, sender_id: &str, session: u64, seq: u64) {
        let window = self.window;
        let Some(peer) = self
            .peers
            .get_mut(sender_id)
            .filter(|p| p.session == session)
        else {
            return;
        };
        peer.acked = peer.acked.max(seq + 1);
        peer.queued = peer.queued.saturating_sub(1);
        let grant = window.saturating_sub(peer.queued + peer.outstanding);
        peer.outstanding += grant;
        peer.pending_grant += grant;
        peer.ack_due = true;
    }

    async fn send_acks(&mut self, socket: &mut RouterSocket) {
        let mut acks = Vec::new();
        for peer in self.peers.values_mut().filter(|p| p.ack_due) {
            peer.ack_due = false;
            let ack = ToSender::Ack {
                session: peer.session,
                hs: peer.hs,
                acked: peer.acked,
                credit: std::mem::take(&mut peer.pending_grant),
            };
            acks.push((peer.routing_id.clone(), ack));
        }
        for (routing_id, ack) in acks {
            self.reply(socket, &routing_id, &ack).await;
        }
    }
}
