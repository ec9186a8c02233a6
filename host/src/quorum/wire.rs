//! A link's wire format (see the module doc of `quorum`): the hello, and
//! the frames' lengths and kinds.

use std::fmt;

use crate::core::zab::{Message, ServerId};

const MAGIC: &[u8; 4] = b"WZQ1";
/// Version 2 added the keepalive frame; a version 1 peer would close the
/// link on it, so the versions do not mix.
const VERSION: u8 = 2;
/// The length of a hello.
pub const HELLO_LEN: usize = 4 + 1 + 8 + 8;
/// The largest frame a peer may send (a snapshot travels in one frame).
pub const MAX_FRAME: usize = 1 << 30;

pub(super) const KIND_ZAB: u8 = 1;
pub(super) const KIND_APP: u8 = 2;
pub(super) const KIND_KEEPALIVE: u8 = 3;

/// Why a peer's bytes were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkError {
    BadMagic,
    UnsupportedVersion(u8),
    /// A frame length of 0 or over [`MAX_FRAME`].
    BadLength(usize),
    UnknownKind(u8),
    /// A keepalive that carries bytes.
    KeepaliveWithPayload(usize),
    Zab(crate::core::zab::DecodeError),
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::BadMagic => write!(f, "not a wazoo quorum hello"),
            LinkError::UnsupportedVersion(v) => write!(f, "unsupported link version {v}"),
            LinkError::BadLength(n) => {
                write!(f, "frame length {n} is outside 1..={MAX_FRAME}")
            }
            LinkError::UnknownKind(k) => write!(f, "unknown frame kind {k}"),
            LinkError::KeepaliveWithPayload(n) => write!(f, "keepalive with {n} payload bytes"),
            LinkError::Zab(e) => write!(f, "undecodable zab message: {e}"),
        }
    }
}

impl std::error::Error for LinkError {}

/// A decoded hello: who the sender claims to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    pub sender: ServerId,
    pub link_epoch: u64,
}

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(MAGIC);
        b[4] = VERSION;
        b[5..13].copy_from_slice(&self.sender.to_be_bytes());
        b[13..21].copy_from_slice(&self.link_epoch.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, LinkError> {
        if &b[..4] != MAGIC {
            return Err(LinkError::BadMagic);
        }
        if b[4] != VERSION {
            return Err(LinkError::UnsupportedVersion(b[4]));
        }
        Ok(Hello {
            sender: u64::from_be_bytes(b[5..13].try_into().expect("8 bytes")),
            link_epoch: u64::from_be_bytes(b[13..21].try_into().expect("8 bytes")),
        })
    }
}

/// One frame's content, after its length.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    Zab(Message),
    App(Vec<u8>),
    Keepalive,
}

/// Checks a frame length, before anything is read or allocated for it.
pub fn check_frame_len(len: usize) -> Result<(), LinkError> {
    if len == 0 || len > MAX_FRAME {
        return Err(LinkError::BadLength(len));
    }
    Ok(())
}

/// Decodes one frame (`kind payload`, the bytes after the length).
pub fn decode_frame(frame: &[u8]) -> Result<Frame, LinkError> {
    check_frame_len(frame.len())?;
    let payload = &frame[1..];
    match frame[0] {
        KIND_ZAB => Message::decode(payload)
            .map(Frame::Zab)
            .map_err(LinkError::Zab),
        KIND_APP => Ok(Frame::App(payload.to_vec())),
        KIND_KEEPALIVE if payload.is_empty() => Ok(Frame::Keepalive),
        KIND_KEEPALIVE => Err(LinkError::KeepaliveWithPayload(payload.len())),
        k => Err(LinkError::UnknownKind(k)),
    }
}

/// Appends a whole frame (length, kind, payload).
pub(super) fn put_frame(buf: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    buf.extend_from_slice(&((payload.len() + 1) as u32).to_be_bytes());
    buf.push(kind);
    buf.extend_from_slice(payload);
}
