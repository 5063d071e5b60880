//! Message authentication: HMAC-SHA256 under a secret shared by one run's processes.
//!
//! With a secret, every message in both directions carries one more frame at the end: the
//! 32-byte HMAC-SHA256 of a context label and the message's other frames, each prefixed with its
//! length (u64 little-endian), so frames cannot be re-split or reordered without changing the
//! tag. A receiving side verifies the tag (constant time) before it decodes anything. Without a
//! secret nothing is added and trailing frames are ignored.
//!
//! Replaying a captured message gains nothing: data is de-duplicated by (sender, session, seq),
//! and control replies only ever name the session and handshake they belong to.
use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{Result, TransportError};

/// Length of the tag frame.
pub const TAG_LEN: usize = 32;
/// Shortest secret accepted (128 bits).
pub const MIN_SECRET_LEN: usize = 16;
/// Binds tags to this stream (a tag made for another protocol with the same secret fails).
const CONTEXT: &[u8] = b"agentgym-rl group stream v1";

type HmacSha256 = Hmac<Sha256>;

/// The shared secret. Its bytes never appear in `Debug` output.
#[derive(Clone)]
pub struct Secret(Arc<[u8]>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

/// Why a message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No tag frame: the peer runs without a secret.
    Unsigned,
    /// A tag that does not verify: the peer holds another secret (or the message was altered).
    BadTag,
}

impl std::fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AuthFailure::Unsigned => "message is not signed (the peer has no secret)",
            AuthFailure::BadTag => {
                "message signature does not verify (the peer holds another secret)"
            }
        })
    }
}

impl Secret {
    /// A secret of at least [`MIN_SECRET_LEN`] bytes.
    pub fn new(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < MIN_SECRET_LEN {
            return Err(TransportError::WeakSecret { len: bytes.len() });
        }
        Ok(Secret(bytes.into()))
    }

    fn mac(&self, frames: &[Bytes]) -> HmacSha256 {
        // Any key length is valid for HMAC: this cannot fail.
        let mut mac = match HmacSha256::new_from_slice(&self.0) {
            Ok(mac) => mac,
            Err(_) => unreachable!("HMAC accepts keys of every length"),
        };
        mac.update(CONTEXT);
        for frame in frames {
            mac.update(&(frame.len() as u64).to_le_bytes());
            mac.update(frame);
        }
        mac
    }

    /// The tag of `frames`.
    pub fn tag(&self, frames: &[Bytes]) -> Bytes {
        Bytes::copy_from_slice(&self.mac(frames).finalize().into_bytes())
    }

    fn verify(&self, frames: &[Bytes], tag: &[u8]) -> bool {
        self.mac(frames).verify_slice(tag).is_ok()
    }
}

/// `frames` plus their tag when there is a secret.
pub(crate) fn seal(secret: Option<&Secret>, mut frames: Vec<Bytes>) -> Vec<Bytes> {
    if let Some(secret) = secret {
        let tag = secret.tag(&frames);
        frames.push(tag);
    }
    frames
}

/// Verify a message (with a secret) and take its tag off; on failure `frames` is unchanged.
pub(crate) fn open(
    secret: Option<&Secret>,
    frames: &mut VecDeque<Bytes>,
) -> std::result::Result<(), AuthFailure> {
    let Some(secret) = secret else {
        return Ok(());
    };
    // A signed message has its header and the tag at least.
    let n = frames.len();
    if n < 2 || frames[n - 1].len() != TAG_LEN {
        return Err(AuthFailure::Unsigned);
    }
    let (body, tag) = frames.make_contiguous().split_at(n - 1);
    if secret.verify(body, &tag[0]) {
        frames.pop_back();
        Ok(())
    } else {
        Err(AuthFailure::BadTag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(parts: &[&'static [u8]]) -> Vec<Bytes> {
        parts.iter().map(|p| Bytes::from_static(p)).collect()
    }

    fn secret(byte: u8) -> Secret {
        Secret::new(&[byte; 32]).unwrap()
    }

    #[test]
    fn sealed_messages_open_with_the_same_secret_only() {
        let msg = frames(&[b"header", b"payload"]);
        let sealed: VecDeque<Bytes> = seal(Some(&secret(1)), msg.clone()).into();
        assert_eq!(sealed.len(), 3);
        let mut wrong = sealed.clone();
        assert_eq!(open(Some(&secret(2)), &mut wrong), Err(AuthFailure::BadTag));
        assert_eq!(wrong, sealed, "a refused message is left as it came");
        let mut right = sealed;
        assert_eq!(open(Some(&secret(1)), &mut right), Ok(()));
        assert_eq!(right, VecDeque::from(msg.clone()));
        let mut unsigned = VecDeque::from(msg.clone());
        assert_eq!(
            open(Some(&secret(1)), &mut unsigned),
            Err(AuthFailure::Unsigned)
        );
        // Without a secret nothing is added or checked.
        assert_eq!(seal(None, msg.clone()), msg);
    }

    #[test]
    fn moving_bytes_between_frames_changes_the_tag() {
        let s = secret(7);
        let a = s.tag(&frames(&[b"ab", b"c"]));
        let b = s.tag(&frames(&[b"a", b"bc"]));
        assert_ne!(a, b);
        let mut tampered: VecDeque<Bytes> = seal(Some(&s), frames(&[b"ab", b"c"])).into();
        tampered[1] = Bytes::from_static(b"d");
        assert_eq!(open(Some(&s), &mut tampered), Err(AuthFailure::BadTag));
    }

    #[test]
    fn short_secrets_are_refused() {
        assert!(matches!(
            Secret::new(b"short"),
            Err(TransportError::WeakSecret { len: 5 })
        ));
        assert!(!format!("{:?}", secret(9)).contains('9'));
    }
}
