//! Frames: a big-endian `i32` length followed by that many bytes.
//!
//! [`check`] looks at buffered bytes and says whether a whole frame is there
//! (without copying or parsing anything); only then is the frame parsed.
//! An incomplete frame is a normal outcome, not an error.

use crate::jute::{DecodeError, Jute, Reader, Writer};
use crate::records::{ReplyHeader, Request, RequestHeader, Response, WatcherEvent};
use thiserror::Error;

/// Why a frame cannot be accepted. Either closes the connection, as
/// ZooKeeper does ("Len error").
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("frame length {len} is larger than jute.maxbuffer ({max})")]
    TooLarge { len: usize, max: usize },
    #[error("negative frame length {0}")]
    Negative(i32),
}

/// If `buf` starts with a whole frame, the frame's total size (length prefix
/// included); `Ok(None)` if more bytes are needed.
pub fn check(buf: &[u8], max_len: usize) -> Result<Option<usize>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < 0 {
        return Err(FrameError::Negative(len));
    }
    let len = len as usize;
    if len > max_len {
        return Err(FrameError::TooLarge { len, max: max_len });
    }
    if buf.len() < 4 + len {
        return Ok(None);
    }
    Ok(Some(4 + len))
}

/// Starts a frame in `out`; returns the offset to pass to [`finish`].
pub fn begin(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0, 0, 0, 0]);
    at
}

/// Writes the length prefix of the frame started at `at`.
pub fn finish(out: &mut [u8], at: usize) {
    let len = (out.len() - at - 4) as i32;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

/// Appends a whole frame holding one record.
pub fn write_record<T: Jute>(out: &mut Vec<u8>, rec: &T) {
    let at = begin(out);
    rec.write(out);
    finish(out, at);
}

/// Appends a request frame (header + body).
pub fn write_request(out: &mut Vec<u8>, xid: i32, req: &Request) {
    let at = begin(out);
    RequestHeader {
        xid,
        op: req.opcode().code(),
    }
    .write(out);
    req.write_body(out);
    finish(out, at);
}

/// Appends a reply frame. A non-zero `err` carries no body, as in ZooKeeper.
pub fn write_reply(out: &mut Vec<u8>, xid: i32, zxid: i64, err: i32, body: &Response) {
    let at = begin(out);
    ReplyHeader { xid, zxid, err }.write(out);
    if err == 0 {
        body.write_body(out);
    }
    finish(out, at);
}

/// Appends a reply frame whose body follows the header even when `err` is
/// not 0. ZooKeeper answers a failed SASL step so (an error code and a
/// SetSASLResponse with a null token), and its Java client reads that body
/// while authentication is in progress: without it the client sees a short
/// frame and reports a lost connection instead of AuthFailed.
pub fn write_reply_with_body(out: &mut Vec<u8>, xid: i32, zxid: i64, err: i32, body: &Response) {
    let at = begin(out);
    ReplyHeader { xid, zxid, err }.write(out);
    body.write_body(out);
    finish(out, at);
}

/// Appends a watch notification frame (xid -1).
pub fn write_notification(out: &mut Vec<u8>, zxid: i64, ev: &WatcherEvent) {
    let at = begin(out);
    ReplyHeader {
        xid: crate::xid::NOTIFICATION,
        zxid,
        err: 0,
    }
    .write(out);
    // As ZooKeeper writes it: its path in Java's string encoding.
    out.write_i32(ev.event_type);
    out.write_i32(ev.state);
    out.write_java_string(&ev.path);
    finish(out, at);
}

/// A wazoo recipe notification: the reply header with xid
/// [`crate::xid::RECIPE_NOTIFICATION`], then one buffer (MessagePack).
pub fn write_recipe_notification(out: &mut Vec<u8>, zxid: i64, payload: &[u8]) {
    let at = begin(out);
    ReplyHeader {
        xid: crate::xid::RECIPE_NOTIFICATION,
        zxid,
        err: 0,
    }
    .write(out);
    out.write_buffer(payload);
    finish(out, at);
}

/// A client frame after the handshake, as the server decodes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientFrame {
    Request {
        xid: i32,
        req: Request,
    },
    /// An opcode the server does not know; answered with `Unimplemented`.
    Unknown {
        xid: i32,
        op: i32,
    },
}

/// Decodes the payload of a client frame (the bytes after the length).
pub fn decode_client_frame(payload: &[u8]) -> Result<ClientFrame, DecodeError> {
    let mut r = Reader::client(payload);
    let h = RequestHeader::read(&mut r)?;
    // A check is an op of a multi only. Outside one it is answered as an
    // unknown opcode, before its body is read, as ZooKeeper 3.9.3 and later
    // do (ZOOKEEPER-2623): 3.8 logs a txn it cannot read back and never
    // answers a check that passes.
    if h.op == crate::OpCode::Check as i32 {
        return Ok(ClientFrame::Unknown {
            xid: h.xid,
            op: h.op,
        });
    }
    match Request::read_body(h.op, &mut r)? {
        Some(req) => Ok(ClientFrame::Request { xid: h.xid, req }),
        None => Ok(ClientFrame::Unknown {
            xid: h.xid,
            op: h.op,
        }),
    }
}

/// Appends raw `i32` to a buffer (used by tests building odd frames).
pub fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.write_i32(v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_reports_incomplete_until_the_whole_frame_is_there() {
        let mut f = Vec::new();
        write_request(&mut f, 7, &Request::Ping);
        for n in 0..f.len() {
            assert_eq!(check(&f[..n], 100), Ok(None), "prefix of {n} bytes");
        }
        assert_eq!(check(&f, 100), Ok(Some(f.len())));
    }

    #[test]
    fn check_refuses_a_length_over_max_before_reading_it() {
        let f = 2_000_000i32.to_be_bytes();
        assert_eq!(
            check(&f, crate::DEFAULT_MAX_BUFFER),
            Err(FrameError::TooLarge {
                len: 2_000_000,
                max: crate::DEFAULT_MAX_BUFFER
            })
        );
        assert_eq!(
            check(&(-5i32).to_be_bytes(), 10),
            Err(FrameError::Negative(-5))
        );
    }
}
