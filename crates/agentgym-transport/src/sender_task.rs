//! The sender's background task: connect, handshake, stream under credit, resend after loss.
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedReceiver;
use zeromq::{DealerSocket, SocketRecv, SocketSend, ZmqMessage};

use crate::auth;
use crate::handshake::{handshake, HandshakeError, Ready};
use crate::protocol::{self, ToReceiver, ToSender, PROTOCOL_VERSION};
use crate::sender::{Fatal, SenderOptions, Shared};

const FIRST_RECONNECT_INTERVAL: Duration = Duration::from_millis(50);

pub(crate) enum Cmd {
    /// A group with its sequence number, for which the API side already spent one credit.
    Group(u64, Bytes),
    Close,
}

/// Why the connected phase ended.
enum LinkEnd {
    Lost,
    Closing,
    Fatal(Fatal),
}

pub(crate) struct SenderTask {
    endpoint: String,
    sender_id: String,
    session: u64,
    options: SenderOptions,
    shared: Arc<Shared>,
    cmds: UnboundedReceiver<Cmd>,
    /// Sent groups not yet acknowledged, in sequence order.
    unacked: VecDeque<(u64, Bytes)>,
    /// Every seq below this one is acknowledged.
    acked: u64,
    /// The next seq to transmit on the current link.
    cursor: u64,
    /// The current handshake number.
    hs: u64,
    /// Credit held by the task for resending (the backlog); the rest goes to the API side.
    backlog_credit: u64,
    closing: bool,
}

impl SenderTask {
    pub(crate) fn new(
        endpoint: String,
        sender_id: String,
        session: u64,
        options: SenderOptions,
        shared: Arc<Shared>,
        cmds: UnboundedReceiver<Cmd>,
    ) -> Self {
        SenderTask {
            endpoint,
            sender_id,
            session,
            options,
            shared,
            cmds,
            unacked: VecDeque::new(),
            acked: 0,
            cursor: 0,
            hs: 0,
            backlog_credit: 0,
            closing: false,
        }
    }

    pub(crate) async fn run(mut self) {
        let mut pause = FIRST_RECONNECT_INTERVAL;
        let mut fatal = None;
        while !self.closing {
            self.hs += 1;
            let (self_endpoint, hs) = (self.endpoint.clone(), self.hs);
            let hello = self.sealed(
                &ToReceiver::Hello {
                    v: PROTOCOL_VERSION,
                    sender: self.sender_id.clone(),
                    session: self.session,
                    hs: self.hs,
                    first_unacked: self.acked,
                },
                None,
            );
            let secret = self.options.secret.clone();
            // Every step of an attempt (connect, send, wait) is bounded as a whole: a send into a
            // half-dead connection must not hang the task.
            let limit = self.options.handshake_timeout;
            let attempt = async move {
                tokio::time::timeout(
                    limit * 2,
                    handshake(self_endpoint, hello, hs, limit, secret),
                )
                .await
                .unwrap_or(Err(HandshakeError::Retry))
            };
            tokio::pin!(attempt);
            let outcome = loop {
                tokio::select! {
                    r = &mut attempt => break Some(r),
                    cmd = self.cmds.recv() => if !self.on_cmd_offline(cmd) { break None },
                }
            };
            match outcome {
                None => break,
                Some(Ok((socket, ready))) => {
                    pause = FIRST_RECONNECT_INTERVAL;
                    match self.connected(socket, ready).await {
                        LinkEnd::Lost => {}
                        LinkEnd::Closing => break,
                        LinkEnd::Fatal(reason) => {
                            fatal = Some(reason);
                            break;
                        }
                    }
                }
                Some(Err(HandshakeError::Fatal(reason))) => {
                    fatal = Some(reason);
                    break;
                }
                Some(Err(HandshakeError::Retry)) => {
                    self.pause(pause).await;
                    pause = (pause * 2).min(self.options.max_reconnect_interval);
                }
            }
        }
        self.shared.update(|st| {
            st.closed = true;
            st.fatal = fatal;
            st.stats.connected = false;
            st.stats.credit = 0;
        });
    }

    /// Handle a command while no link is up. Returns false when the task must stop.
    fn on_cmd_offline(&mut self, cmd: Option<Cmd>) -> bool {
        match cmd {
            Some(Cmd::Group(seq, payload)) => {
                self.unacked.push_back((seq, payload));
                true
            }
            Some(Cmd::Close) | None => {
                self.closing = true;
                false
            }
        }
    }

    async fn pause(&mut self, d: Duration) {
        let sleep = tokio::time::sleep(d);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => return,
                cmd = self.cmds.recv() => if !self.on_cmd_offline(cmd) { return },
            }
        }
    }

    /// One past the last seq handed to the task.
    fn end(&self) -> u64 {
        self.unacked.back().map_or(self.acked, |(seq, _)| seq + 1)
    }

    fn drop_acked(&mut self, acked: u64) {
        while self.unacked.front().is_some_and(|(seq, _)| *seq < acked) {
            self.unacked.pop_front();
        }
        self.acked = self.acked.max(acked);
        self.cursor = self.cursor.max(self.acked);
    }

    /// A message of `header` (and `payload`), signed when there is a secret.
    fn sealed(&self, header: &ToReceiver, payload: Option<&Bytes>) -> Option<ZmqMessage> {
        let mut frames = vec![protocol::encode(header)];
        frames.extend(payload.cloned());
        ZmqMessage::try_from(auth::seal(self.options.secret.as_ref(), frames)).ok()
    }

    async fn transmit(&self, socket: &mut DealerSocket, seq: u64, payload: &Bytes) -> bool {
        let data = ToReceiver::Data {
            sender: self.sender_id.clone(),
            session: self.session,
            hs: self.hs,
            seq,
        };
        match self.sealed(&data, Some(payload)) {
            Some(msg) => self.bounded_send(socket, msg).await,
            None => false,
        }
    }

    /// Send with a bound (the peer timeout): a stuck write means a dead link.
    async fn bounded_send(&self, socket: &mut DealerSocket, msg: ZmqMessage) -> bool {
        matches!(
            tokio::time::timeout(self.options.peer_timeout, socket.send(msg)).await,
            Ok(Ok(()))
        )
    }

    /// Transmit groups from the cursor while backlog credit lasts. Returns false if the link
    /// failed. Leftover credit goes to the API side once the backlog is empty.
    async fn drain_backlog(&mut self, socket: &mut DealerSocket) -> bool {
        let mut resent = 0;
        while self.cursor < self.end() && self.backlog_credit > 0 {
            let idx = (self.cursor - self.acked) as usize;
            let Some((seq, payload)) = self.unacked.get(idx).cloned() else {
                break;
            };
            if !self.transmit(socket, seq, &payload).await {
                return false;
            }
            self.cursor += 1;
            self.backlog_credit -= 1;
            resent += 1;
        }
        let free = if self.cursor == self.end() {
            std::mem::take(&mut self.backlog_credit)
        } else {
            0
        };
        self.shared.update(|st| {
            st.stats.resent += resent;
            st.stats.credit += free;
        });
        true
    }

    async fn connected(&mut self, mut socket: DealerSocket, ready: Ready) -> LinkEnd {
        self.drop_acked(ready.acked);
        self.cursor = ready.next.max(self.acked);
        self.backlog_credit = ready.credit;
        let acked = self.acked;
        self.shared.update(|st| {
            st.stats.acked = acked;
            st.stats.credit = 0;
            st.stats.handshakes += 1;
            st.stats.connected = true;
        });
        let end = if self.drain_backlog(&mut socket).await {
            self.stream(&mut socket).await
        } else {
            LinkEnd::Lost
        };
        self.shared.update(|st| {
            st.stats.connected = false;
            st.stats.credit = 0;
        });
        end
    }

    async fn stream(&mut self, socket: &mut DealerSocket) -> LinkEnd {
        let mut last_heard = Instant::now();
        let mut heartbeat = tokio::time::interval(self.options.heartbeat_interval);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                msg = socket.recv() => {
                    let Ok(msg) = msg else { return LinkEnd::Lost };
                    let mut frames = msg.into_vecdeque();
                    if auth::open(self.options.secret.as_ref(), &mut frames).is_err() {
                        self.shared.update(|st| st.stats.unauthenticated += 1);
                        continue;
                    }
                    last_heard = Instant::now();
                    let Some(header) = frames.front().and_then(|f| protocol::decode(f)) else {
                        continue;
                    };
                    match header {
                        ToSender::Ack { session, hs, acked, credit } if session == self.session => {
                            self.drop_acked(acked);
                            let acked = self.acked;
                            self.shared.update(|st| st.stats.acked = acked);
                            if hs == self.hs {
                                self.backlog_credit += credit;
                                if !self.drain_backlog(socket).await {
                                    return LinkEnd::Lost;
                                }
                            }
                        }
                        ToSender::HelloRequired {} => return LinkEnd::Lost,
                        ToSender::Reject { reason } => {
                            return LinkEnd::Fatal(Fatal::Protocol(reason))
                        }
                        ToSender::Unauthenticated { reason } => {
                            return LinkEnd::Fatal(Fatal::Unauthenticated(reason))
                        }
                        _ => {}
                    }
                }
                cmd = self.cmds.recv() => match cmd {
                    Some(Cmd::Group(seq, payload)) => {
                        let prepaid = self.cursor == seq && self.cursor == self.end();
                        self.unacked.push_back((seq, payload.clone()));
                        if prepaid {
                            if !self.transmit(socket, seq, &payload).await {
                                return LinkEnd::Lost;
                            }
                            self.cursor += 1;
                        } else if !self.drain_backlog(socket).await {
                            return LinkEnd::Lost;
                        }
                    }
                    Some(Cmd::Close) | None => {
                        self.closing = true;
                        return LinkEnd::Closing;
                    }
                },
                _ = heartbeat.tick() => {
                    if last_heard.elapsed() > self.options.peer_timeout {
                        return LinkEnd::Lost;
                    }
                    let ping = self.sealed(&ToReceiver::Ping {
                        sender: self.sender_id.clone(),
                        session: self.session,
                        hs: self.hs,
                    }, None);
                    let Some(ping) = ping else { return LinkEnd::Lost };
                    if !self.bounded_send(socket, ping).await {
                        return LinkEnd::Lost;
                    }
                }
            }
        }
    }
}
