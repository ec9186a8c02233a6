//! Raw-frame sessions: ZooKeeper's handshake over a plain blocking socket,
//! with no client library in the way. The probes of the tests and of the
//! bench (the recovery probe, the lean generator, the idle-session count,
//! the differential runner) open their sessions with it.
//!
//! ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a client connects,
//! sends a ConnectRequest (a session id of 0 asks for a new session), and
//! the server answers with a ConnectResponse that carries the session's id,
//! timeout and password; a session id of 0 in the answer is a refusal.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use wazoo_proto::jute::Jute;
use wazoo_proto::{frame, ConnectRequest, ConnectResponse};

/// Opens a connection to `addr` and a session on it: a new one when
/// `session_id` is 0, else that session re-attached with `passwd` (empty:
/// sixteen zero bytes). Connecting, reading and writing are each bounded
/// by `io_timeout`; the socket has `TCP_NODELAY`. Fails if the server
/// closes the connection or refuses the session.
pub fn handshake(
    addr: SocketAddr,
    session_id: i64,
    passwd: &[u8],
    session_timeout_ms: i32,
    io_timeout: Duration,
) -> Result<(TcpStream, ConnectResponse)> {
    let mut s = TcpStream::connect_timeout(&addr, io_timeout).context("connect")?;
    s.set_read_timeout(Some(io_timeout))?;
    s.set_write_timeout(Some(io_timeout))?;
    s.set_nodelay(true)?;
    let mut out = Vec::new();
    frame::write_record(
        &mut out,
        &ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: session_timeout_ms,
            session_id,
            passwd: if passwd.is_empty() {
                vec![0; 16]
            } else {
                passwd.to_vec()
            },
            read_only: Some(false),
        },
    );
    s.write_all(&out).context("send ConnectRequest")?;
    let payload = read_frame(&mut s, 1 << 20).context("read ConnectResponse")?;
    let resp = ConnectResponse::from_bytes(&payload)
        .map_err(|e| anyhow::anyhow!("decode ConnectResponse: {e}"))?;
    if resp.session_id == 0 {
        bail!("the server refused the session");
    }
    Ok((s, resp))
}

/// One length-prefixed frame's payload, blocking; an error at EOF, on a
/// timeout, or for a length outside `0..=max`.
pub fn read_frame(s: &mut TcpStream, max: usize) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    let n = usize::try_from(len)
        .ok()
        .filter(|&n| n <= max)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad frame length {len}"),
            )
        })?;
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf)?;
    Ok(buf)
}
