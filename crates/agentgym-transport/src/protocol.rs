//! Control messages of the group stream.
//!
//! Every message is a multipart ZeroMQ message whose first frame is a msgpack map with string
//! keys and a `"t"` tag; `data` messages carry the group bytes as a second frame (never
//! re-encoded). The ROUTER side sees the DEALER's routing id as an extra first frame.
//!
//! ```text
//! sender -> receiver
//!   {"t": "hello", "v": 1, "sender": str, "session": u64, "hs": u64, "first_unacked": u64}
//!   {"t": "data", "sender": str, "session": u64, "hs": u64, "seq": u64}  + payload frame
//!   {"t": "ping", "sender": str, "session": u64, "hs": u64}
//! receiver -> sender
//!   {"t": "ready", "v": 1, "session": u64, "hs": u64, "next": u64, "acked": u64,
//!    "credit": u64, "window": u64}
//!   {"t": "ack", "session": u64, "hs": u64, "acked": u64, "credit": u64}
//!   {"t": "pong", "session": u64, "hs": u64}
//!   {"t": "hello_required"}
//!   {"t": "reject", "reason": str}
//!   {"t": "unauthenticated", "reason": str}
//! ```
//!
//! With a shared secret every message also ends with a tag frame ([`crate::auth`]); a HELLO
//! that fails authentication is answered with `unauthenticated` and the sender stops.
//!
//! * `session` is random per sender object: a new session (a restarted sender) resets the
//!   receiver's state for that sender id. `hs` counts handshakes within a session; credit is only
//!   valid for the handshake that granted it.
//! * `seq` starts at 0 per session. `acked` = n means every seq < n was consumed by the receiving
//!   application; the sender drops those and keeps the rest for resending. `next` in `ready` is
//!   the first seq the receiver has not accepted: the sender resends from there.
//! * Each `data` uses one credit; the receiver returns credit as the application consumes.
//! * `hello_required` answers traffic from an unknown session (the receiver restarted) or a gap
//!   in sequence numbers: the sender handshakes again and resends.
use serde::{Deserialize, Serialize};

/// Version of this control protocol (independent of the group schema version).
pub const PROTOCOL_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum ToReceiver {
    Hello {
        v: u32,
        sender: String,
        session: u64,
        hs: u64,
        first_unacked: u64,
    },
    Data {
        sender: String,
        session: u64,
        hs: u64,
        seq: u64,
    },
    Ping {
        sender: String,
        session: u64,
        hs: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum ToSender {
    Ready {
        v: u32,
        session: u64,
        hs: u64,
        next: u64,
        acked: u64,
        credit: u64,
        window: u64,
    },
    Ack {
        session: u64,
        hs: u64,
        acked: u64,
        credit: u64,
    },
    Pong {
        session: u64,
        hs: u64,
    },
    HelloRequired {},
    Reject {
        reason: String,
    },
    Unauthenticated {
        reason: String,
    },
}

/// Encode a control header (string keys, so that Python's msgpack reads it).
pub(crate) fn encode<T: Serialize>(msg: &T) -> bytes::Bytes {
    // Serialising these plain structs cannot fail; an empty frame would be rejected by the peer.
    rmp_serde::to_vec_named(msg)
        .map(bytes::Bytes::from)
        .unwrap_or_default()
}

pub(crate) fn decode<'a, T: Deserialize<'a>>(frame: &'a [u8]) -> Option<T> {
    rmp_serde::from_slice(frame).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_with_string_keys() {
        let hello = ToReceiver::Hello {
            v: PROTOCOL_VERSION,
            sender: "s".into(),
            session: u64::MAX,
            hs: 1,
            first_unacked: 0,
        };
        let bytes = encode(&hello);
        assert_eq!(decode::<ToReceiver>(&bytes), Some(hello));
        // fixmap whose first key is the fixstr "t".
        assert_eq!(&bytes[1..3], &[0xa1, b't']);
        let hr = encode(&ToSender::HelloRequired {});
        assert_eq!(decode::<ToSender>(&hr), Some(ToSender::HelloRequired {}));
    }
}
