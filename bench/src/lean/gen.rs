//! The lean generator's measured loop: one thread, nonblocking TCP_NODELAY
//! sockets under `ppoll(2)`, pre-encoded request frames. Per request the
//! loop copies a frame into the session's output buffer and writes its xid
//! (bytes 4..8); per reply it reads the header (length, xid, zxid, err) and
//! nothing else. No client library, no allocation per request.

use std::collections::{BTreeMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use wazoo_proto::{frame, Request};

use crate::stats::{new_histogram, record};

/// Session timeout asked for (ms): the load never idles that long.
const SESSION_TIMEOUT_MS: i32 = 30_000;
/// Replies still owed once the window ends must come within this.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest reply frame accepted (replies here are small).
const MAX_FRAME: usize = 64 * 1024;
/// A session's receive buffer: a read(2) asks for what is free in it.
const INPUT_BYTES: usize = 4 * MAX_FRAME;

/// Request frames encoded once (with xid 0); the loop cycles through them.
pub struct Frames(Vec<Vec<u8>>);

impl Frames {
    pub fn new(requests: &[Request]) -> Frames {
        Frames(requests.iter().map(encode).collect())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// One connection with its session.
pub struct Session {
    stream: TcpStream,
    out: Vec<u8>,
    sent: usize,
    /// Received bytes; `start..end` not parsed yet.
    input: Box<[u8]>,
    start: usize,
    end: usize,
    /// (xid, intended send time) of every request not yet answered, in
    /// order: ZooKeeper answers a session's requests in order.
    inflight: VecDeque<(i32, Instant)>,
    next_xid: i32,
    cursor: usize,
    /// Fixed-rate mode: when this session's next request is due.
    next_due: Instant,
}

/// One reply's header.
struct Reply {
    xid: i32,
    err: i32,
}

impl Session {
    /// Connects and opens a session (blocking handshake), then switches the
    /// socket to nonblocking.
    pub fn open(addr: SocketAddr) -> Result<Session> {
        let (stream, _) =
            crate::recovery::open_session(addr, Duration::from_secs(10), SESSION_TIMEOUT_MS)
                .with_context(|| format!("opening a session on {addr}"))?;
        stream.set_nonblocking(true)?;
        Ok(Session {
            stream,
            out: Vec::with_capacity(64 * 1024),
            sent: 0,
            input: vec![0; INPUT_BYTES].into_boxed_slice(),
            start: 0,
            end: 0,
            inflight: VecDeque::new(),
            next_xid: 1,
            cursor: 0,
            next_due: Instant::now(),
        })
    }

    fn push(&mut self, frame: &[u8], intended: Instant) {
        let at = self.out.len();
        self.out.extend_from_slice(frame);
        let xid = self.next_xid;
        self.next_xid = if xid == i32::MAX { 1 } else { xid + 1 };
        self.out[at + 4..at + 8].copy_from_slice(&xid.to_be_bytes());
        self.inflight.push_back((xid, intended));
    }

    fn push_next(&mut self, frames: &Frames, intended: Instant) {
        let i = self.cursor;
        self.cursor = if i + 1 == frames.0.len() { 0 } else { i + 1 };
        self.push(&frames.0[i], intended);
    }

    fn wants_write(&self) -> bool {
        self.sent < self.out.len()
    }

    /// Writes what the socket takes now.
    fn flush(&mut self) -> Result<()> {
        while self.sent < self.out.len() {
            match self.stream.write(&self.out[self.sent..]) {
                Ok(0) => bail!("the server closed the connection"),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("write"),
            }
        }
        self.out.clear();
        self.sent = 0;
        Ok(())
    }

    /// Reads what is there and hands every whole reply (intended send time,
    /// header) to `on_reply`. Notifications (negative xids) are skipped.
    /// Returns whether the server closed the connection.
    fn read_replies(&mut self, mut on_reply: impl FnMut(Instant, Reply)) -> Result<bool> {
        loop {
            if self.start == self.end {
                (self.start, self.end) = (0, 0);
            } else if INPUT_BYTES - self.end < MAX_FRAME {
                self.input.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            }
            match self.stream.read(&mut self.input[self.end..]) {
                Ok(0) => return Ok(true),
                Ok(n) => self.end += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("read"),
            }
            while let Some(size) = frame::check(&self.input[self.start..self.end], MAX_FRAME)
                .map_err(|e| anyhow::anyhow!("reply frame: {e}"))?
            {
                let f = &self.input[self.start..self.start + size];
                if size < 4 + 16 {
                    bail!("a reply frame of {size} bytes has no header");
                }
                let xid = i32::from_be_bytes([f[4], f[5], f[6], f[7]]);
                // zxid: f[8..16], not needed per request.
                let err = i32::from_be_bytes([f[16], f[17], f[18], f[19]]);
                self.start += size;
                if xid < 0 {
                    continue;
                }
                match self.inflight.pop_front() {
                    Some((want, intended)) if want == xid => on_reply(intended, Reply { xid, err }),
                    Some((want, _)) => bail!("reply xid {xid} where {want} was next"),
                    None => bail!("reply xid {xid} with no request outstanding"),
                }
            }
        }
        Ok(false)
    }

    /// [`Session::read_replies`], where the server closing the connection
    /// is an error.
    fn read_open(&mut self, on_reply: impl FnMut(Instant, Reply)) -> Result<()> {
        if self.read_replies(on_reply)? {
            bail!(
                "the server closed the connection with {} requests unanswered",
                self.inflight.len()
            );
        }
        Ok(())
    }

    /// Sends closeSession and waits (at most 5 s) for its answer or the
    /// server closing the connection (which it does once it has answered),
    /// so that the session's ephemeral nodes are gone when this returns.
    pub fn close(mut self) -> Result<()> {
        let mut close = Vec::new();
        frame::write_request(&mut close, 0, &Request::CloseSession);
        let xid = self.next_xid;
        self.push(&close, Instant::now());
        let deadline = Instant::now() + Duration::from_secs(5);
        let (mut closed, mut closed_reply) = (false, false);
        while !closed {
            self.flush()?;
            if Instant::now() >= deadline {
                bail!("closeSession unanswered after 5 s");
            }
            poll(&mut [&mut self], Duration::from_millis(100))?;
            closed |= self.read_replies(|_, r| closed_reply |= r.xid == xid)? || closed_reply;
        }
        Ok(())
    }
}

/// Waits until a session can read (or write, if it has bytes to send), or
/// `timeout`. Returns nothing: the callers then try every session.
fn poll(sessions: &mut [&mut Session], timeout: Duration) -> Result<()> {
    let mut fds: Vec<libc::pollfd> = sessions
        .iter()
        .map(|s| libc::pollfd {
            fd: s.stream.as_raw_fd(),
            events: libc::POLLIN | if s.wants_write() { libc::POLLOUT } else { 0 },
            revents: 0,
        })
        .collect();
    poll_fds(&mut fds, timeout)
}

fn poll_fds(fds: &mut [libc::pollfd], timeout: Duration) -> Result<()> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` is a valid slice of pollfd for its length; `ts` lives
    // across the call; a null sigmask leaves the mask alone.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(e).context("ppoll");
        }
    }
    Ok(())
}

/// How requests are issued.
#[derive(Clone, Copy, Debug)]
pub enum Pace {
    /// Closed loop: every session keeps this many requests in flight.
    Closed { inflight: usize },
    /// Open loop: `per_sec` requests a second over all sessions, on a fixed
    /// schedule; each latency is from the request's scheduled time, so a
    /// stalled server is charged for the requests it held back (no
    /// coordinated omission). A session holds at most `max_inflight`; past
    /// that, due requests wait (and are charged for it).
    Rate { per_sec: f64, max_inflight: usize },
}

/// What one window measured.
pub struct Tally {
    /// Requests sent and answered inside the measured window.
    pub ops: u64,
    pub secs: f64,
    /// Error replies by code, over the whole run (warm-up and drain too).
    pub errors: BTreeMap<i32, u64>,
    /// Successful replies over the whole run.
    pub ok_total: u64,
    /// Latency (ns) of the window's requests: from the send (closed loop)
    /// or the scheduled send (fixed rate) to the reply.
    pub latency: Histogram<u64>,
    /// CPU seconds in the window: the server process(es), this thread,
    /// and the whole machine (all CPUs, tasks + irq).
    pub server_cpu_secs: f64,
    pub gen_cpu_secs: f64,
    pub machine_cpu_secs: f64,
    /// Of the server's CPU, its threads named `wazoo-member` (the core
    /// loop; with `wazoo.client.ioThreads` the client sockets are not
    /// there). Zero for ZooKeeper.
    pub member_thread_cpu_secs: f64,
}

/// CPU seconds (user + system) of the calling thread.
pub fn thread_cpu_secs() -> f64 {
    // SAFETY: getrusage writes into the struct passed, which is zeroed plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to an rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// (server, generator, machine, the servers' `wazoo-member` threads).
fn cpu_snapshot(server_pids: &[u32]) -> Result<(f64, f64, f64, f64)> {
    let (mut server, mut member) = (0.0, 0.0);
    for &pid in server_pids {
        server += crate::servers::cpu_secs(Some(pid))?;
        member += crate::servers::threads_cpu_secs(pid, "wazoo-member")?;
    }
    let (tasks, irq) = crate::servers::machine_busy_secs()?;
    Ok((server, thread_cpu_secs(), tasks + irq, member))
}

/// Drives `sessions` with `frames` (each session starts at its own offset
/// in the list) for `warmup` then `measure`, then waits for every reply
/// still owed. `server_pids`' CPU is read at the window's edges.
pub fn drive(
    sessions: &mut [Session],
    frames: &Frames,
    pace: Pace,
    warmup: Duration,
    measure: Duration,
    server_pids: &[u32],
) -> Result<Tally> {
    anyhow::ensure!(
        !sessions.is_empty() && frames.len() > 0,
        "no sessions or no frames"
    );
    let n = sessions.len();
    let start = Instant::now();
    let (m0, m1) = (start + warmup, start + warmup + measure);
    let interval = match pace {
        Pace::Rate { per_sec, .. } => {
            anyhow::ensure!(per_sec > 0.0, "a fixed rate must be positive");
            Duration::from_secs_f64(n as f64 / per_sec)
        }
        Pace::Closed { .. } => Duration::ZERO,
    };
    for (i, s) in sessions.iter_mut().enumerate() {
        s.cursor = i * frames.len() / n;
        s.next_due = start + interval * i as u32 / n as u32;
    }
    let mut tally = Tally {
        ops: 0,
        secs: measure.as_secs_f64(),
        errors: BTreeMap::new(),
        ok_total: 0,
        latency: new_histogram(),
        server_cpu_secs: 0.0,
        gen_cpu_secs: 0.0,
        machine_cpu_secs: 0.0,
        member_thread_cpu_secs: 0.0,
    };
    let mut cpu0 = None;
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(n);
    let mut draining = false;
    let drain_deadline = m1 + DRAIN_TIMEOUT;
    loop {
        let now = Instant::now();
        if cpu0.is_none() && now >= m0 {
            cpu0 = Some(cpu_snapshot(server_pids)?);
        }
        if !draining && now >= m1 {
            let (s1, g1, a1, t1) = cpu_snapshot(server_pids)?;
            let (s0, g0, a0, t0) = cpu0.unwrap_or((s1, g1, a1, t1));
            tally.server_cpu_secs = s1 - s0;
            tally.gen_cpu_secs = g1 - g0;
            tally.machine_cpu_secs = a1 - a0;
            tally.member_thread_cpu_secs = t1 - t0;
            draining = true;
        }
        if draining {
            if sessions.iter().all(|s| s.inflight.is_empty()) {
                break;
            }
            if now >= drain_deadline {
                bail!("replies still owed {DRAIN_TIMEOUT:?} after the window");
            }
        }
        // Issue what is due.
        let mut wait = if draining {
            Duration::from_millis(100)
        } else {
            m1 - now
        };
        for s in sessions.iter_mut() {
            if !draining {
                match pace {
                    Pace::Closed { inflight } => {
                        while s.inflight.len() < inflight {
                            s.push_next(frames, now);
                        }
                    }
                    Pace::Rate { max_inflight, .. } => {
                        while s.next_due <= now && s.inflight.len() < max_inflight {
                            let due = s.next_due;
                            s.push_next(frames, due);
                            s.next_due += interval;
                        }
                        if s.inflight.len() < max_inflight {
                            wait = wait.min(s.next_due.saturating_duration_since(now));
                        }
                    }
                }
            }
            s.flush()?;
        }
        fds.clear();
        fds.extend(sessions.iter().map(|s| libc::pollfd {
            fd: s.stream.as_raw_fd(),
            events: libc::POLLIN | if s.wants_write() { libc::POLLOUT } else { 0 },
            revents: 0,
        }));
        poll_fds(&mut fds, wait)?;
        let now = Instant::now();
        for (s, fd) in sessions.iter_mut().zip(&fds) {
            if fd.revents & libc::POLLOUT != 0 {
                s.flush()?;
            }
            if fd.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0 {
                s.read_open(|intended, r| {
                    if r.err != 0 {
                        *tally.errors.entry(r.err).or_default() += 1;
                        return;
                    }
                    tally.ok_total += 1;
                    if intended >= m0 && now <= m1 {
                        tally.ops += 1;
                        record(&mut tally.latency, now - intended);
                    }
                })?;
            }
        }
    }
    Ok(tally)
}

/// Sends every frame of `frames` once over `session`, `inflight` at a
/// time, and waits for the replies (set-up and clean-up, not measured).
/// Returns the error replies by code.
pub fn send_all(
    session: &mut Session,
    frames: &[Vec<u8>],
    inflight: usize,
) -> Result<BTreeMap<i32, u64>> {
    let mut errors = BTreeMap::new();
    let mut next = 0;
    let deadline = Instant::now() + Duration::from_secs(60 + frames.len() as u64 / 1000);
    while next < frames.len() || !session.inflight.is_empty() {
        if Instant::now() >= deadline {
            bail!(
                "{} requests unanswered at the deadline",
                frames.len() - next
            );
        }
        let now = Instant::now();
        while next < frames.len() && session.inflight.len() < inflight {
            session.push(&frames[next], now);
            next += 1;
        }
        session.flush()?;
        poll(&mut [&mut *session], Duration::from_millis(100))?;
        session.read_open(|_, r| {
            if r.err != 0 {
                *errors.entry(r.err).or_default() += 1;
            }
        })?;
    }
    Ok(errors)
}

/// One encoded frame of `request` (xid written by the sender).
pub fn encode(request: &Request) -> Vec<u8> {
    let mut out = Vec::new();
    frame::write_request(&mut out, 0, request);
    out
}
