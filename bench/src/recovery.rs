//! Recovery time: a server holding a large tree (the memory figure's
//! loaded server) is killed with SIGKILL and started again on the same data
//! directory; the figure is the time from the new process's start until it
//! answers a request.
//!
//! "Answers a request" is measured by a probe that speaks the wire protocol
//! itself (`wazoo-proto` frames over a blocking socket): connect, open a
//! session, getData of the last znode loaded, and check its data. A client
//! library would add its own reconnect back-off to the figure. A fresh
//! attempt starts every `probe_interval_ms` (up to [`PROBE_ATTEMPTS_MAX`]
//! outstanding, each bounded by [`PROBE_IO_TIMEOUT`]) until one succeeds;
//! the figure is when the first success completed.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use wazoo_proto::{frame, ConnectResponse, Jute, Reader, ReplyHeader, Request};

use crate::servers::{dir_bytes, mntr, proc_status_bytes, Server};

/// Each probe attempt's connect, write and read timeout.
const PROBE_IO_TIMEOUT: Duration = Duration::from_secs(1);
/// Probe attempts in flight at most.
const PROBE_ATTEMPTS_MAX: usize = 32;
/// The largest reply frame a probe accepts (a getData of one small znode).
const PROBE_FRAME_MAX: usize = 1 << 20;

#[derive(Clone, Debug, Serialize)]
pub struct RecoverySpec {
    /// kill -9 + restart cycles per system, one after the other.
    pub restarts: usize,
    pub probe_interval_ms: u64,
    /// A restart fails when no probe succeeds this long after the start.
    pub timeout_secs: f64,
}

/// One kill -9 and restart.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RestartRun {
    /// Process start to the first answered getData (the figure).
    pub answered_ms: f64,
    /// Process start to testkit's readiness check (ZooKeeper: `ruok` and
    /// `srvr` with a mode; wazoo: `ruok`), polled every 50 ms: for reference.
    pub ready_ms: f64,
    pub probe_attempts: u64,
    /// Bytes in the data directory when the process was killed (snapshots
    /// and log).
    pub data_dir_bytes: u64,
    /// `mntr`'s znode count once it answers.
    pub znodes_after: Option<u64>,
    /// VmRSS of the restarted process once it answers.
    pub rss_after_bytes: Option<u64>,
    pub failure: Option<String>,
}

/// Kills `server` (SIGKILL), starts it again and times it (blocking: run
/// it on a blocking thread). `probe_path` must exist and hold `data_len`
/// bytes.
pub fn kill_and_restart(
    server: &mut Server,
    probe_path: &str,
    data_len: usize,
    spec: &RecoverySpec,
) -> RestartRun {
    let mut run = RestartRun::default();
    server.kill();
    run.data_dir_bytes = dir_bytes(&server.data_dir());
    let addr = server.addr();
    let t0 = Instant::now();
    // The probe loop runs beside the restart, which blocks until ready.
    let prober = {
        let path = probe_path.to_string();
        let interval = Duration::from_millis(spec.probe_interval_ms.max(1));
        let timeout = Duration::from_secs_f64(spec.timeout_secs);
        std::thread::spawn(move || probe_until(addr, &path, data_len, t0, interval, timeout))
    };
    let ready = server.restart();
    run.ready_ms = t0.elapsed().as_secs_f64() * 1e3;
    let probed = prober.join().expect("the probe thread does not panic");
    if let Err(e) = ready {
        run.failure = Some(format!("restart: {e:#}"));
    }
    match probed {
        Ok((at, attempts)) => {
            run.answered_ms = at.as_secs_f64() * 1e3;
            run.probe_attempts = attempts;
        }
        Err(e) => {
            let f = format!("probe: {e:#}");
            run.failure = Some(match run.failure.take() {
                Some(prev) => format!("{prev}; {f}"),
                None => f,
            });
        }
    }
    if run.failure.is_none() {
        run.znodes_after = mntr(addr)
            .get("zk_znode_count")
            .and_then(|v| v.parse().ok());
        run.rss_after_bytes = server
            .pid()
            .ok()
            .and_then(|p| proc_status_bytes(p, "VmRSS").ok());
    }
    run
}

/// Starts a probe attempt every `interval` (at most [`PROBE_ATTEMPTS_MAX`]
/// outstanding) until one succeeds; returns when it completed (from `t0`)
/// and how many attempts were started.
fn probe_until(
    addr: SocketAddr,
    path: &str,
    data_len: usize,
    t0: Instant,
    interval: Duration,
    timeout: Duration,
) -> Result<(Duration, u64)> {
    let (tx, rx) = mpsc::channel::<Result<Instant>>();
    let mut outstanding = 0usize;
    let mut started = 0u64;
    let mut last_error = String::from("no attempt finished");
    loop {
        if t0.elapsed() > timeout {
            bail!("no answer {timeout:?} after the start; last error: {last_error}");
        }
        if outstanding < PROBE_ATTEMPTS_MAX {
            let (tx, path) = (tx.clone(), path.to_string());
            std::thread::spawn(move || {
                let _ = tx.send(probe_once(addr, &path, data_len).map(|()| Instant::now()));
            });
            outstanding += 1;
            started += 1;
        }
        let wait_until = Instant::now() + interval;
        while let Some(left) = wait_until.checked_duration_since(Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(Ok(at)) => return Ok((at - t0, started)),
                Ok(Err(e)) => {
                    outstanding -= 1;
                    last_error = format!("{e:#}");
                }
                Err(_) => break,
            }
        }
    }
}

/// One attempt: TCP connect, open a session, getData `path`, expect
/// `data_len` bytes, close the session.
pub fn probe_once(addr: SocketAddr, path: &str, data_len: usize) -> Result<()> {
    let mut s = open_session(addr, PROBE_IO_TIMEOUT, 10_000)?.0;
    let mut out = Vec::new();
    out.clear();
    frame::write_request(
        &mut out,
        1,
        &Request::GetData {
            path: path.to_string(),
            watch: false,
        },
    );
    s.write_all(&out).context("send getData")?;
    let reply = read_frame(&mut s).context("read the getData reply")?;
    let mut r = Reader::new(&reply);
    let h = ReplyHeader::read(&mut r).map_err(|e| anyhow::anyhow!("decode reply header: {e}"))?;
    if h.xid != 1 || h.err != 0 {
        bail!("getData {path}: xid {} error {}", h.xid, h.err);
    }
    let data = r
        .read_buffer()
        .map_err(|e| anyhow::anyhow!("decode getData: {e}"))?;
    if data.len() != data_len {
        bail!("getData {path}: {} bytes, expected {data_len}", data.len());
    }
    // Close the session so it does not linger until it expires.
    out.clear();
    frame::write_request(&mut out, 2, &Request::CloseSession);
    let _ = s.write_all(&out);
    let _ = read_frame(&mut s);
    Ok(())
}

/// A TCP connection to `addr` (TCP_NODELAY, blocking, reads and writes
/// bounded by `io_timeout`) holding a new session of `session_timeout_ms`
/// (the server's ConnectResponse with it): the raw-frame clients' handshake
/// (this probe, the lean generator), the testkit's.
pub fn open_session(
    addr: SocketAddr,
    io_timeout: Duration,
    session_timeout_ms: i32,
) -> Result<(TcpStream, ConnectResponse)> {
    wazoo_testkit::raw::handshake(addr, 0, &[], session_timeout_ms, io_timeout)
}

/// One whole frame's payload (the length prefix read and dropped), blocking.
pub fn read_frame(s: &mut TcpStream) -> Result<Vec<u8>> {
    Ok(wazoo_testkit::raw::read_frame(s, PROBE_FRAME_MAX)?)
}
