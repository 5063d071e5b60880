//! One connection attempt of a sender: connect a DEALER, send HELLO, wait for READY.
use std::time::Duration;

use zeromq::{DealerSocket, Socket, SocketOptions, SocketRecv, SocketSend, ZmqMessage};

use crate::auth::{self, Secret};
use crate::protocol::{self, ToSender, PROTOCOL_VERSION};
use crate::sender::Fatal;

/// What a READY told us.
pub(crate) struct Ready {
    pub(crate) next: u64,
    pub(crate) acked: u64,
    pub(crate) credit: u64,
}

pub(crate) enum HandshakeError {
    /// Worth retrying (peer absent, timed out).
    Retry,
    /// The receiver refused us; retrying cannot help.
    Fatal(Fatal),
}

/// Connect a fresh DEALER, send HELLO and wait for the matching READY.
pub(crate) async fn handshake(
    endpoint: String,
    hello: Option<ZmqMessage>,
    hs: u64,
    limit: Duration,
    secret: Option<Secret>,
) -> Result<(DealerSocket, Ready), HandshakeError> {
    let hello = hello.ok_or(HandshakeError::Retry)?;
    let mut options = SocketOptions::default();
    options.connect_timeout(limit);
    let mut socket = DealerSocket::with_options(options);
    socket
        .connect(&endpoint)
        .await
        .map_err(|_| HandshakeError::Retry)?;
    socket
        .send(hello)
        .await
        .map_err(|_| HandshakeError::Retry)?;
    let wait = async {
        loop {
            let msg = socket.recv().await.map_err(|_| HandshakeError::Retry)?;
            let mut frames = msg.into_vecdeque();
            if let Err(reason) = auth::open(secret.as_ref(), &mut frames) {
                // Only the receiver we connected to answers here: the two sides disagree
                // about the secret, and retrying cannot mend that.
                return Err(HandshakeError::Fatal(Fatal::Unauthenticated(format!(
                    "the receiver's reply failed authentication: {reason}; give the sender and \
                     the receiver the same secret"
                ))));
            }
            match frames.front().and_then(|f| protocol::decode(f)) {
                Some(ToSender::Ready { v, .. }) if v != PROTOCOL_VERSION => {
                    return Err(HandshakeError::Fatal(Fatal::Protocol(format!(
                        "receiver speaks protocol {v}, this sender {PROTOCOL_VERSION}"
                    ))));
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
                Some(ToSender::Reject { reason }) => {
                    return Err(HandshakeError::Fatal(Fatal::Protocol(reason)))
                }
                Some(ToSender::Unauthenticated { reason }) => {
                    return Err(HandshakeError::Fatal(Fatal::Unauthenticated(reason)))
                }
                _ => {}
            }
        }
    };
    let ready = tokio::time::timeout(limit, wait)
        .await
        .map_err(|_| HandshakeError::Retry)??;
    Ok((socket, ready))
}
