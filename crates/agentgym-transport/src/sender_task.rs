//! The sender's background task: connect, handshake, stream under credit, resend after loss.
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedReceiver;
use zeromq::{DealerSocket, Socket, SocketOptions, SocketRecv, SocketSend, ZmqMessage};

use crate::protocol::{self, ToReceiver, ToSender, PROTOCOL_VERSION};
use crate::sender::{SenderOptions, Shared};

const FIRST_RECONNECT_INTERVAL: Duration = Duration::from_millis(50);

pub(crate) enum Cmd {
    /// A group with its sequence number, for which the API side already spent one credit.
    Group(u64, Bytes),
    Close,
}

/// What a READY told us.
struct Ready {
    next: u64,
    acked: u64,
    credit: u64,
}

enum HandshakeError {
    /// Worth retrying (peer absent, timed out).
    Retry,
    /// The receiver refused us; retrying cannot help.
    Fatal(String),
}

/// Why the connected phase ended.
enum LinkEnd {
    Lost,
    Closing,
    Fatal(String),
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
            let hello = protocol::encode(&ToReceiver::Hello {
                v: PROTOCOL_VERSION,
                sender: self.sender_id.clone(),
                session: self.session,
                hs: self.hs,
                first_unacked: self.acked,
            });
            // Every step of an attempt (connect, send, wait) is bounded as a whole: a send into a
            // half-dead connection must not hang the task.
            let limit = self.options.handshake_timeout;
            let attempt = async move {
                tokio::time::timeout(limit * 2, handshake(self_endpoint, hello, hs, limit))
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

    async fn transmit(&self, socket: &mut DealerSocket, seq: u64, payload: &Bytes) -> bool {
        let header = protocol::encode(&ToReceiver::Data {
            sender: self.sender_id.clone(),
            session: self.session,
            hs: self.hs,
            seq,
        });
        match ZmqMessage::try_from(vec![header, payload.clone()]) {
            Ok(msg) => self.bounded_send(socket, msg).await,
            Err(_) => false,
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
                    last_heard = Instant::now();
                    let Some(header) = msg.get(0).and_then(|f| protocol::decode(f)) else {
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
                        ToSender::Reject { reason } => return LinkEnd::Fatal(reason),
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
                    let ping = protocol::encode(&ToReceiver::Ping {
                        sender: self.sender_id.clone(),
                        session: self.session,
                        hs: self.hs,
                    });
                    if !self.bounded_send(socket, ZmqMessage::from(ping)).await {
                        return LinkEnd::Lost;
                    }
                }
            }
        }
    }
}

/// Connect a fresh DEALER, send HELLO and wait for the matching READY.
async fn handshake(
    endpoint: String,
    hello: Bytes,
    hs: u64,
    limit: Duration,
) -> Result<(DealerSocket, Ready), HandshakeError> {
    let mut options = SocketOptions::default();
    options.connect_timeout(limit);
    let mut socket = DealerSocket::with_options(options);
    socket
        .connect(&endpoint)
        .await
        .map_err(|_| HandshakeError::Retry)?;
    socket
        .send(ZmqMessage::from(hello))
        .await
        .map_err(|_| HandshakeError::Retry)?;
    let wait = async {
        loop {
            let msg = socket.recv().await.map_err(|_| HandshakeError::Retry)?;
            match msg.get(0).and_then(|f| protocol::decode(f)) {
                Some(ToSender::Ready { v, .. }) if v != PROTOCOL_VERSION => {
                    return Err(HandshakeError::Fatal(format!(
                        "receiver speaks protocol {v}, this sender {PROTOCOL_VERSION}"
                    )));
                }
                Some(ToSender::Ready {
                    hs: h,
                    next,
                    acked,
                    credit,
                    ..
                }) if h == hs => {
                    return Ok(Ready {
                        next,
                        acked,
                        credit,
                    })
                }
                Some(ToSender::Reject { reason }) => return Err(HandshakeError::Fatal(reason)),
                _ => {}
            }
        }
    };
    let ready = tokio::time::timeout(limit, wait)
        .await
        .map_err(|_| HandshakeError::Retry)??;
    Ok((socket, ready))
}
