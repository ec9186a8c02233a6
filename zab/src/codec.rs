//! Wire encoding of [`Message`]s, for the shell's quorum and election
//! connections.
//!
//! One message is one frame; the shell adds its own length prefix. Grammar
//! (all integers big-endian):
//!
//! ```text
//! frame   = version:u8 (=1) tag:u8 body
//! bytes   = len:u32 len*u8
//! 1  NOTIFICATION  leader:u64 zxid:u64 peer_epoch:u32 election_epoch:u64 state:u8
//! 2  FOLLOWERINFO  accepted_epoch:u32 last_zxid:u64 observer:u8(0|1)
//! 3  LEADERINFO    epoch:u32 confirmed:u8(0|1)
//! 4  ACKEPOCH      epoch:u32 current_epoch:u32 last_zxid:u64
//! 5  DIFF
//! 6  TRUNC         zxid:u64
//! 7  SNAP          zxid:u64 data:bytes
//! 8  PROPOSAL      zxid:u64 payload:bytes
//! 9  COMMIT        zxid:u64
//! 10 NEWLEADER     epoch:u32 zxid:u64
//! 11 ACKNEWLEADER  epoch:u32
//! 12 UPTODATE
//! 13 ACK           zxid:u64
//! 14 INFORM        zxid:u64 payload:bytes
//! 15 PING
//! 16 SYNC          token:u64
//! 17 SYNCREPLY     token:u64
//! 18 LEARNERMASTER leader:u64
//! state   = 0 looking | 1 following | 2 leading | 3 observing
//! ```
//!
//! A peer's bytes are untrusted: decoding checks every length against what
//! is left before allocating, rejects unknown versions, tags and enum
//! values and trailing bytes, and never panics.

use std::fmt;

use super::message::{Message, Notification};
use super::types::{Payload, ServerState, Zxid};

/// The version this code writes and the only one it reads.
pub const WIRE_VERSION: u8 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Empty,
    UnsupportedVersion(u8),
    UnknownTag(u8),
    /// The frame ends before the field does.
    Truncated,
    /// A field holds a value outside its domain.
    BadValue(&'static str),
    TrailingBytes(usize),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Empty => write!(f, "empty zab frame"),
            DecodeError::UnsupportedVersion(v) => write!(f, "unsupported zab wire version {v}"),
            DecodeError::UnknownTag(t) => write!(f, "unknown zab message tag {t}"),
            DecodeError::Truncated => write!(f, "truncated zab message"),
            DecodeError::BadValue(what) => write!(f, "bad value for {what}"),
            DecodeError::TrailingBytes(n) => write!(f, "{n} trailing bytes after zab message"),
        }
    }
}

impl std::error::Error for DecodeError {}

impl Message {
    /// Appends this message's frame body to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(WIRE_VERSION);
        match self {
            Message::Notification(n) => {
                out.push(1);
                put_u64(out, n.leader);
                put_u64(out, n.zxid.0);
                put_u32(out, n.peer_epoch);
                put_u64(out, n.election_epoch);
                out.push(state_code(n.state));
            }
            Message::FollowerInfo {
                accepted_epoch,
                last_zxid,
                observer,
            } => {
                out.push(2);
                put_u32(out, *accepted_epoch);
                put_u64(out, last_zxid.0);
                out.push(u8::from(*observer));
            }
            Message::LeaderInfo { epoch, confirmed } => {
                out.push(3);
                put_u32(out, *epoch);
                out.push(u8::from(*confirmed));
            }
            Message::AckEpoch {
                epoch,
                current_epoch,
                last_zxid,
            } => {
                out.push(4);
                put_u32(out, *epoch);
                put_u32(out, *current_epoch);
                put_u64(out, last_zxid.0);
            }
            Message::Diff => out.push(5),
            Message::Trunc { zxid } => {
                out.push(6);
                put_u64(out, zxid.0);
            }
            Message::Snap { zxid, data } => {
                out.push(7);
                put_u64(out, zxid.0);
                put_bytes(out, data);
            }
            Message::Proposal { zxid, payload } => {
                out.push(8);
                put_u64(out, zxid.0);
                put_bytes(out, payload);
            }
            Message::Commit { zxid } => {
                out.push(9);
                put_u64(out, zxid.0);
            }
            Message::NewLeader { epoch, zxid } => {
                out.push(10);
                put_u32(out, *epoch);
                put_u64(out, zxid.0);
            }
            Message::AckNewLeader { epoch } => {
                out.push(11);
                put_u32(out, *epoch);
            }
            Message::UpToDate => out.push(12),
            Message::Ack { zxid } => {
                out.push(13);
                put_u64(out, zxid.0);
            }
            Message::Inform { zxid, payload } => {
                out.push(14);
                put_u64(out, zxid.0);
                put_bytes(out, payload);
            }
            Message::Ping => out.push(15),
            Message::SyncRequest { token } => {
                out.push(16);
                put_u64(out, *token);
            }
            Message::SyncReply { token } => {
                out.push(17);
                put_u64(out, *token);
            }
            Message::LearnerMaster { leader } => {
                out.push(18);
                put_u64(out, *leader);
            }
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Decodes one complete frame body.
    pub fn decode(frame: &[u8]) -> Result<Message, DecodeError> {
        let (&version, rest) = frame.split_first().ok_or(DecodeError::Empty)?;
        if version != WIRE_VERSION {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        let mut r = Reader { rest };
        let tag = r.u8()?;
        let msg = match tag {
            1 => Message::Notification(Notification {
                leader: r.u64()?,
                zxid: r.zxid()?,
                peer_epoch: r.u32()?,
                election_epoch: r.u64()?,
                state: match r.u8()? {
                    0 => ServerState::Looking,
                    1 => ServerState::Following,
                    2 => ServerState::Leading,
                    3 => ServerState::Observing,
                    _ => return Err(DecodeError::BadValue("state")),
                },
            }),
            2 => Message::FollowerInfo {
                accepted_epoch: r.u32()?,
                last_zxid: r.zxid()?,
                observer: r.bool("observer")?,
            },
            3 => Message::LeaderInfo {
                epoch: r.u32()?,
                confirmed: r.bool("confirmed")?,
            },
            4 => Message::AckEpoch {
                epoch: r.u32()?,
                current_epoch: r.u32()?,
                last_zxid: r.zxid()?,
            },
            5 => Message::Diff,
            6 => Message::Trunc { zxid: r.zxid()? },
            7 => Message::Snap {
                zxid: r.zxid()?,
                data: r.bytes()?,
            },
            8 => Message::Proposal {
                zxid: r.zxid()?,
                payload: r.bytes()?,
            },
            9 => Message::Commit { zxid: r.zxid()? },
            10 => Message::NewLeader {
                epoch: r.u32()?,
                zxid: r.zxid()?,
            },
            11 => Message::AckNewLeader { epoch: r.u32()? },
            12 => Message::UpToDate,
            13 => Message::Ack { zxid: r.zxid()? },
            14 => Message::Inform {
                zxid: r.zxid()?,
                payload: r.bytes()?,
            },
            15 => Message::Ping,
            16 => Message::SyncRequest { token: r.u64()? },
            17 => Message::SyncReply { token: r.u64()? },
            18 => Message::LearnerMaster { leader: r.u64()? },
            other => return Err(DecodeError::UnknownTag(other)),
        };
        if !r.rest.is_empty() {
            return Err(DecodeError::TrailingBytes(r.rest.len()));
        }
        Ok(msg)
    }
}

fn state_code(state: ServerState) -> u8 {
    match state {
        ServerState::Looking => 0,
        ServerState::Following => 1,
        ServerState::Leading => 2,
        ServerState::Observing => 3,
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).expect("a zab payload is under 4 GiB");
    put_u32(out, len);
    out.extend_from_slice(bytes);
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    fn zxid(&mut self) -> Result<Zxid, DecodeError> {
        self.u64().map(Zxid)
    }

    fn bool(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::BadValue(what)),
        }
    }

    /// A length-prefixed byte string; the length is checked against the
    /// bytes actually present before anything is allocated.
    fn bytes(&mut self) -> Result<Payload, DecodeError> {
        let len = self.u32()? as usize;
        Ok(Payload::from(self.take(len)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn samples() -> Vec<Message> {
        vec![
            Message::Notification(Notification {
                leader: 3,
                zxid: Zxid::new(2, 7),
                peer_epoch: 2,
                election_epoch: 9,
                state: ServerState::Following,
            }),
            Message::FollowerInfo {
                accepted_epoch: 4,
                last_zxid: Zxid::new(3, 1),
                observer: true,
            },
            Message::LeaderInfo {
                epoch: 5,
                confirmed: false,
            },
            Message::AckEpoch {
                epoch: 5,
                current_epoch: 3,
                last_zxid: Zxid::new(3, 9),
            },
            Message::Diff,
            Message::Trunc {
                zxid: Zxid::new(3, 2),
            },
            Message::Snap {
                zxid: Zxid::new(3, 2),
                data: Payload::from(&b"tree"[..]),
            },
            Message::Proposal {
                zxid: Zxid::new(5, 1),
                payload: Payload::from(&b"set /a 1"[..]),
            },
            Message::Commit {
                zxid: Zxid::new(5, 1),
            },
            Message::NewLeader {
                epoch: 5,
                zxid: Zxid::new(3, 9),
            },
            Message::AckNewLeader { epoch: 5 },
            Message::UpToDate,
            Message::Ack {
                zxid: Zxid::new(5, 1),
            },
            Message::Inform {
                zxid: Zxid::new(5, 1),
                payload: Payload::from(&[][..]),
            },
            Message::Ping,
            Message::SyncRequest { token: 7 },
            Message::SyncReply { token: 7 },
            Message::LearnerMaster { leader: 2 },
        ]
    }

    #[test]
    fn round_trips() {
        for m in samples() {
            assert_eq!(
                Message::decode(&m.to_bytes()),
                Ok(m.clone()),
                "{}",
                m.name()
            );
        }
    }

    #[test]
    fn golden_bytes() {
        // Pinned: changing these means a new WIRE_VERSION.
        let m = Message::Proposal {
            zxid: Zxid::new(5, 1),
            payload: Payload::from(&b"ab"[..]),
        };
        assert_eq!(
            m.to_bytes(),
            [1, 8, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 2, b'a', b'b']
        );
        let n = Message::Notification(Notification {
            leader: 2,
            zxid: Zxid::new(1, 3),
            peer_epoch: 1,
            election_epoch: 4,
            state: ServerState::Looking,
        });
        assert_eq!(
            n.to_bytes(),
            [
                1, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
                0, 4, 0
            ]
        );
        assert_eq!(Message::Ping.to_bytes(), [1, 15]);
    }

    #[test]
    fn rejects_bad_frames() {
        assert_eq!(Message::decode(&[]), Err(DecodeError::Empty));
        assert_eq!(
            Message::decode(&[2, 15]),
            Err(DecodeError::UnsupportedVersion(2))
        );
        assert_eq!(Message::decode(&[1, 99]), Err(DecodeError::UnknownTag(99)));
        assert_eq!(
            Message::decode(&[1, 15, 0]),
            Err(DecodeError::TrailingBytes(1))
        );
        assert_eq!(
            Message::decode(&[1, 3, 0, 0, 0, 1, 2]),
            Err(DecodeError::BadValue("confirmed"))
        );
        // A length that claims more than the frame holds.
        assert_eq!(
            Message::decode(&[1, 8, 0, 0, 0, 5, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 1]),
            Err(DecodeError::Truncated)
        );
    }

    /// A frame cut, extended or with one bit flipped: a valid message's
    /// bytes, or arbitrary ones.
    fn damaged_frame() -> impl Strategy<Value = Vec<u8>> {
        let start = prop_oneof![
            prop::collection::vec(any::<u8>(), 0..40),
            prop::sample::select(samples().iter().map(Message::to_bytes).collect::<Vec<_>>()),
        ];
        (
            start,
            0..3u8,
            any::<prop::sample::Index>(),
            0..8u32,
            any::<u8>(),
        )
            .prop_map(|(mut bytes, how, at, bit, extra)| {
                match how {
                    0 if !bytes.is_empty() => {
                        let i = at.index(bytes.len());
                        bytes[i] ^= 1 << bit;
                    }
                    1 => bytes.truncate(at.index(bytes.len() + 1)),
                    _ => bytes.push(extra),
                }
                bytes
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        #[test]
        fn garbage_never_panics(bytes in damaged_frame()) {
            if let Ok(m) = Message::decode(&bytes) {
                // Whatever decodes re-encodes to the same bytes.
                prop_assert_eq!(m.to_bytes(), bytes);
            }
        }
    }
}
