//! The connection task: one per client, owning the socket.
//!
//! It connects to a server of the list, establishes or re-establishes the
//! session (id + password, last zxid seen), re-sends credentials and
//! re-registers watches, then pipelines requests (many in flight, replies
//! matched in order by xid), routes watch notifications, pings when idle
//! and notices a dead connection. On loss it fails what was pending with
//! ConnectionLoss and tries the next server after a jittered backoff, until
//! the session is expired, authentication fails or the client is closed
//! (seed: "Session re-establishment", "Client Heartbeat", "Session
//! Expiration").
//!
//! Reads and writes are non-blocking on one socket in one task: every frame
//! queued while the socket was busy goes out in one write.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};
use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{
    frame, xid, AuthPacket, ConnectRequest, ConnectResponse, EventType, KeeperState, OpCode,
    ReplyHeader, Request, Response, SetWatches, SetWatches2, WatcherEvent, WatcherType,
};

use crate::connect_string::{to_client, Chroot, HostPort};
use crate::error::{Error, Result};
use crate::hosts::{HostList, RandomSource, SplitMix64};
use crate::watch::{WatchKind, WatchPaths, WatchRegistry, WatchSink};

/// Total length of the paths in one setWatches packet (ZooKeeper's
/// `SET_WATCHES_MAX_LENGTH`).
const SET_WATCHES_MAX_LENGTH: usize = 128 * 1024;
/// Stop taking new requests while this many bytes wait for the socket.
const WRITE_HIGH_WATER: usize = 4 << 20;
/// Stop taking new requests while this many are in flight.
const MAX_IN_FLIGHT: usize = 100_000;
/// Requests taken from the queue per wake-up before looking at the socket.
const BATCH: usize = 512;
const READ_BUF: usize = 64 * 1024;
/// Below this many bytes queued, the task yields once before writing so
/// that concurrent callers can add to the batch.
const COALESCE: usize = 32 * 1024;
/// How long the read-only probe waits at first, and at most (ZooKeeper's
/// client uses 100 ms doubling to 60 s).
const RO_PROBE_MIN: Duration = Duration::from_millis(100);
const RO_PROBE_MAX: Duration = Duration::from_secs(60);

/// The state of a client handle.
///
/// The [`crate::EventStream`] reports every change: a new client goes
/// `Connecting`, `Connected`; a lost connection `Disconnected`,
/// `Connecting`, then `Connected` again (same session) or `Expired`
/// (reported only once a server is reached again and says so). `Expired`,
/// `AuthFailed` and `Closed` are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// Not connected; waiting before the next attempt. The initial state.
    Disconnected,
    /// Trying to connect to a server.
    Connecting,
    /// Connected to a read-write server (ZooKeeper's `SyncConnected`).
    Connected,
    /// Connected to a read-only server: reads only, until a read-write
    /// server is found.
    ConnectedReadOnly,
    /// The ensemble expired the session. Final.
    Expired,
    /// A server refused the client's credentials. Final.
    AuthFailed,
    /// Closed by the application. Final.
    Closed,
}

impl SessionState {
    pub fn is_connected(self) -> bool {
        matches!(
            self,
            SessionState::Connected | SessionState::ConnectedReadOnly
        )
    }

    /// Whether the handle can still be used (not expired, failed or closed).
    pub fn is_alive(self) -> bool {
        !matches!(
            self,
            SessionState::Expired | SessionState::AuthFailed | SessionState::Closed
        )
    }

    /// ZooKeeper's `KeeperState` for this state (`Connecting` has none).
    pub fn keeper_state(self) -> Option<KeeperState> {
        Some(match self {
            SessionState::Disconnected => KeeperState::Disconnected,
            SessionState::Connecting => return None,
            SessionState::Connected => KeeperState::SyncConnected,
            SessionState::ConnectedReadOnly => KeeperState::ConnectedReadOnly,
            SessionState::Expired => KeeperState::Expired,
            SessionState::AuthFailed => KeeperState::AuthFailed,
            SessionState::Closed => KeeperState::Closed,
        })
    }

    /// The name zkCli shows in its prompt (`ZooKeeper.States`).
    pub fn zk_name(self) -> &'static str {
        match self {
            SessionState::Disconnected => "NOT_CONNECTED",
            SessionState::Connecting => "CONNECTING",
            SessionState::Connected => "CONNECTED",
            SessionState::ConnectedReadOnly => "CONNECTEDREADONLY",
            SessionState::Expired => "CLOSED",
            SessionState::AuthFailed => "AUTH_FAILED",
            SessionState::Closed => "CLOSED",
        }
    }
}

/// A recipe notification pushed by a wazoo server to this session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipeNotification {
    /// The zxid of the transaction that sent it (as the frame header says).
    pub zxid: i64,
    /// The recipe's payload (MessagePack).
    pub payload: Vec<u8>,
}

/// What the session looks like now, as the connection task last saw it.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionInfo {
    pub session_id: i64,
    pub password: Vec<u8>,
    pub timeout: Duration,
    pub server: Option<HostPort>,
}

/// Shared between the handles and the task.
#[derive(Debug)]
pub(crate) struct Shared {
    pub state: watch::Sender<SessionState>,
    pub info: Mutex<SessionInfo>,
    /// Set once the client is dead: what every call fails with.
    pub dead: Mutex<Option<Error>>,
}

/// What the task is configured with.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub hosts: Vec<HostPort>,
    pub chroot: Option<Chroot>,
    pub session_timeout: Duration,
    pub read_only: bool,
    pub connect_timeout: Option<Duration>,
    pub reconnect_delay: Duration,
    pub max_reconnect_delay: Duration,
    pub max_frame_len: usize,
    pub session: Option<(i64, Vec<u8>)>,
    pub auth: Vec<(String, Vec<u8>)>,
}

/// A watch to register when the reply comes back successful.
#[derive(Debug)]
pub(crate) struct WatchReg {
    /// For exists: `Exist`, registered as a data watch if the node exists.
    pub kind: WatchKind,
    pub path: String,
    pub sink: WatchSink,
}

/// Watches to drop when a removeWatches reply comes back successful.
#[derive(Debug)]
pub(crate) struct Removal {
    pub path: String,
    pub client_path: String,
    pub ty: WatcherType,
}

#[derive(Debug)]
pub(crate) struct Outgoing {
    pub req: Request,
    pub reply: oneshot::Sender<Result<Response>>,
    pub watch: Option<WatchReg>,
    pub removal: Option<Removal>,
}

/// What the handles ask of the task.
#[derive(Debug)]
pub(crate) enum Command {
    Request(Outgoing),
    Auth {
        scheme: String,
        auth: Vec<u8>,
        reply: oneshot::Sender<Result<()>>,
    },
    UpdateServers {
        hosts: Vec<HostPort>,
        reply: oneshot::Sender<Result<bool>>,
    },
    RemoveWatchesLocal {
        removal: Removal,
        reply: oneshot::Sender<Result<()>>,
    },
    SubscribeRecipe(mpsc::UnboundedSender<RecipeNotification>),
    Close {
        reply: oneshot::Sender<Result<()>>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Terminal {
    Expired,
    AuthFailed,
    Closed,
}

enum End {
    Lost(String),
    Terminal(Terminal),
}

enum PendingKind {
    User {
        reply: oneshot::Sender<Result<Response>>,
        watch: Option<WatchReg>,
        removal: Option<Removal>,
    },
    SetWatches,
    Close,
}

struct Pending {
    xid: i32,
    op: OpCode,
    kind: PendingKind,
}

/// A connection whose handshake is done.
struct Established {
    stream: TcpStream,
    resp: ConnectResponse,
    leftover: Vec<u8>,
}

/// The per-connection state of [`Session::serve`].
struct Conn {
    stream: TcpStream,
    host: HostPort,
    wbuf: Vec<u8>,
    wpos: usize,
    pending: VecDeque<Pending>,
    auth_pending: VecDeque<Option<oneshot::Sender<Result<()>>>>,
    last_send: Instant,
    last_recv: Instant,
    read_timeout: Duration,
    ping_interval: Duration,
    read_only: bool,
}

struct ReadBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

type Probe = Pin<Box<dyn Future<Output = Option<HostPort>> + Send>>;
type PathField = fn(&mut WatchPaths) -> &mut Vec<String>;

pub(crate) struct Session {
    cfg: Config,
    rx: mpsc::UnboundedReceiver<Command>,
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<SessionState>,
    hosts: HostList,
    rng: SplitMix64,
    session_id: i64,
    passwd: Vec<u8>,
    negotiated: Option<Duration>,
    last_zxid: i64,
    seen_rw: bool,
    auth: Vec<(String, Vec<u8>)>,
    /// add_auth calls made while disconnected: (index in `auth`, waiter).
    auth_waiters: Vec<(usize, oneshot::Sender<Result<()>>)>,
    watches: WatchRegistry,
    recipe_subs: Vec<mpsc::UnboundedSender<RecipeNotification>>,
    /// Requests made while disconnected, sent once connected.
    queued: VecDeque<Outgoing>,
    xid: i32,
    closing: bool,
    close_replies: Vec<oneshot::Sender<Result<()>>>,
    /// A read-write server found while connected read-only: try it next.
    rw_server: Option<HostPort>,
    reported: SessionState,
}

impl Session {
    pub(crate) fn new(
        cfg: Config,
        rx: mpsc::UnboundedReceiver<Command>,
        shared: Arc<Shared>,
        events: mpsc::UnboundedSender<SessionState>,
    ) -> Session {
        let mut rng = SplitMix64::from_entropy();
        let hosts = HostList::new(cfg.hosts.clone(), &mut rng);
        let (session_id, passwd, seen_rw) = match &cfg.session {
            // A session handed in by the application was made on a
            // read-write server (ZooKeeper's client assumes the same).
            Some((id, pw)) => (*id, pw.clone(), true),
            None => (0, vec![0; 16], false),
        };
        let mut auth: Vec<(String, Vec<u8>)> = Vec::new();
        for a in &cfg.auth {
            if !auth.contains(a) {
                auth.push(a.clone());
            }
        }
        Session {
            rx,
            shared,
            events,
            hosts,
            rng,
            session_id,
            passwd,
            negotiated: None,
            last_zxid: 0,
            seen_rw,
            auth,
            auth_waiters: Vec::new(),
            watches: WatchRegistry::default(),
            recipe_subs: Vec::new(),
            queued: VecDeque::new(),
            xid: 1,
            closing: false,
            close_replies: Vec::new(),
            rw_server: None,
            reported: SessionState::Disconnected,
            cfg,
        }
    }

    pub(crate) async fn run(mut self) {
        let terminal = self.main_loop().await;
        self.shutdown(terminal);
    }

    /// Sets the handle state; `report` also puts it on the event stream
    /// (once per change).
    fn set_state(&mut self, s: SessionState, report: bool) {
        self.shared.state.send_replace(s);
        if report && self.reported != s {
            self.reported = s;
            let _ = self.events.send(s);
        }
    }

    fn timeout(&self) -> Duration {
        self.negotiated.unwrap_or(self.cfg.session_timeout)
    }

    fn connect_timeout(&self) -> Duration {
        self.cfg.connect_timeout.unwrap_or_else(|| {
            (self.timeout() / self.hosts.len().max(1) as u32).max(Duration::from_millis(100))
        })
    }

    async fn main_loop(&mut self) -> Terminal {
        let mut first = true;
        let mut failures: u32 = 0;
        let mut cycles: u32 = 0;
        loop {
            if self.closing {
                return Terminal::Closed;
            }
            if !first {
                // Jitter before every reconnect so that the clients of a
                // restarted ensemble do not all come back at once; the
                // window grows each time the whole list has failed.
                let window = backoff_window(
                    self.cfg.reconnect_delay,
                    self.cfg.max_reconnect_delay,
                    cycles,
                );
                let delay = window.mul_f64(self.rng.next_f64());
                if let Err(t) = self.idle_until(tokio::time::sleep(delay)).await {
                    return t;
                }
            }
            first = false;
            let host = match self.rw_server.take() {
                Some(h) => h,
                None => {
                    let (h, wrapped) = self.hosts.next(&mut self.rng);
                    if wrapped && failures > 0 {
                        cycles = cycles.saturating_add(1);
                    }
                    h
                }
            };
            self.set_state(SessionState::Connecting, true);
            let req = ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: self.last_zxid,
                timeout_ms: self.cfg.session_timeout.as_millis().min(i32::MAX as u128) as i32,
                session_id: if self.seen_rw { self.session_id } else { 0 },
                passwd: self.passwd.clone(),
                read_only: Some(self.cfg.read_only),
            };
            debug!(server = %host, session = format_args!("0x{:x}", req.session_id), "connecting");
            let attempt = establish(
                host.clone(),
                req,
                self.connect_timeout(),
                self.cfg.max_frame_len,
            );
            let est = match self.idle_until(attempt).await {
                Err(t) => return t,
                Ok(Err(e)) => {
                    debug!(server = %host, error = %e, "connection attempt failed");
                    failures += 1;
                    // Seed: requests made while no server can be reached
                    // fail with ConnectionLoss.
                    self.fail_waiting(Error::ConnectionLoss);
                    self.set_state(SessionState::Disconnected, false);
                    continue;
                }
                Ok(Ok(est)) => est,
            };
            if est.resp.timeout_ms <= 0 {
                // Seed "Session Expiration": the client learns of the
                // expiry only once it reaches the ensemble again.
                info!(server = %host, session = format_args!("0x{:x}", self.session_id), "session expired");
                return Terminal::Expired;
            }
            failures = 0;
            cycles = 0;
            self.hosts.on_connected();
            match self.serve(est, host).await {
                End::Terminal(t) => return t,
                End::Lost(why) => {
                    info!(reason = %why, "disconnected from the server; reconnecting");
                    self.set_state(SessionState::Disconnected, true);
                    self.watches.state_change(KeeperState::Disconnected, false);
                }
            }
        }
    }

    /// Runs `fut` while serving commands (no connection): requests queue,
    /// a close ends the client.
    async fn idle_until<F: Future>(&mut self, fut: F) -> std::result::Result<F::Output, Terminal> {
        tokio::pin!(fut);
        loop {
            tokio::select! {
                out = &mut fut => return Ok(out),
                cmd = self.rx.recv() => match cmd {
                    // Every handle is gone: nobody can use the session.
                    None => return Err(Terminal::Closed),
                    Some(cmd) => {
                        if let Some(t) = self.command_disconnected(cmd) {
                            return Err(t);
                        }
                    }
                },
            }
        }
    }

    fn command_disconnected(&mut self, cmd: Command) -> Option<Terminal> {
        match cmd {
            Command::Request(o) => {
                if let Some(o) = self.precheck(o) {
                    self.queued.push_back(o);
                }
            }
            Command::Auth {
                scheme,
                auth,
                reply,
            } => {
                let i = self.add_auth_entry(scheme, auth);
                self.auth_waiters.push((i, reply));
            }
            Command::UpdateServers { hosts, reply } => {
                let moved = self.hosts.update(hosts, None, &mut self.rng);
                let _ = reply.send(Ok(moved));
            }
            Command::RemoveWatchesLocal { removal, reply } => self.remove_local(removal, reply),
            Command::SubscribeRecipe(tx) => self.recipe_subs.push(tx),
            Command::Close { reply } => {
                // Nothing to tell a server: the session times out there.
                self.closing = true;
                self.close_replies.push(reply);
                return Some(Terminal::Closed);
            }
        }
        None
    }

    fn add_auth_entry(&mut self, scheme: String, auth: Vec<u8>) -> usize {
        let entry = (scheme, auth);
        match self.auth.iter().position(|a| *a == entry) {
            Some(i) => i,
            None => {
                self.auth.push(entry);
                self.auth.len() - 1
            }
        }
    }

    fn remove_local(&mut self, r: Removal, reply: oneshot::Sender<Result<()>>) {
        let res = if self.watches.remove(&r.path, r.ty, &r.client_path) {
            Ok(())
        } else {
            Err(Error::NoWatcher)
        };
        let _ = reply.send(res);
    }

    /// Checks done before a request is sent; `None` if it was answered.
    fn precheck(&mut self, o: Outgoing) -> Option<Outgoing> {
        if let Some(r) = &o.removal {
            // ZooKeeper's client refuses to remove a watch it does not have.
            if !self.watches.contains(&r.path, r.ty) {
                let _ = o.reply.send(Err(Error::NoWatcher));
                return None;
            }
        }
        Some(o)
    }

    /// Fails everything waiting for a connection.
    fn fail_waiting(&mut self, err: Error) {
        for o in self.queued.drain(..) {
            let _ = o.reply.send(Err(err.clone()));
        }
        for (_, w) in self.auth_waiters.drain(..) {
            let _ = w.send(Err(err.clone()));
        }
    }

    fn next_xid(&mut self) -> i32 {
        let x = self.xid;
        self.xid = if x == i32::MAX { 1 } else { x + 1 };
        x
    }

    async fn serve(&mut self, est: Established, host: HostPort) -> End {
        let timeout = Duration::from_millis(est.resp.timeout_ms as u64);
        let read_only = est.resp.read_only == Some(true);
        self.negotiated = Some(timeout);
        self.session_id = est.resp.session_id;
        self.passwd = est.resp.passwd.clone();
        if !read_only {
            self.seen_rw = true;
        }
        {
            let mut info = self.shared.info.lock().unwrap_or_else(|e| e.into_inner());
            info.session_id = self.session_id;
            info.password = self.passwd.clone();
            info.timeout = timeout;
            info.server = Some(host.clone());
        }
        info!(
            server = %host,
            session = format_args!("0x{:x}", self.session_id),
            timeout_ms = est.resp.timeout_ms,
            read_only,
            "session established"
        );
        // ZooKeeper's client: read timeout 2/3 of the session timeout, a
        // ping when nothing was sent for half of that (a third of the
        // timeout), so a dead connection is noticed and replaced well
        // within the session timeout.
        let read_timeout = timeout * 2 / 3;
        let now = Instant::now();
        let mut c = Conn {
            stream: est.stream,
            host,
            wbuf: Vec::with_capacity(64 * 1024),
            wpos: 0,
            pending: VecDeque::new(),
            auth_pending: VecDeque::new(),
            last_send: now,
            last_recv: now,
            read_timeout,
            ping_interval: read_timeout / 2,
            read_only,
        };
        let mut rb = ReadBuf {
            buf: vec![0; READ_BUF.max(est.leftover.len())],
            start: 0,
            end: est.leftover.len(),
        };
        rb.buf[..est.leftover.len()].copy_from_slice(&est.leftover);

        // Credentials first, then the watches, then what was queued.
        let mut waiters: Vec<Option<oneshot::Sender<Result<()>>>> =
            (0..self.auth.len()).map(|_| None).collect();
        for (i, w) in self.auth_waiters.drain(..) {
            if let Some(slot) = waiters.get_mut(i) {
                if let Some(old) = slot.replace(w) {
                    let _ = old.send(Ok(()));
                }
            }
        }
        for ((scheme, auth), waiter) in self.auth.iter().zip(waiters) {
            write_auth(&mut c.wbuf, scheme, auth);
            c.auth_pending.push_back(waiter);
        }
        self.send_set_watches(&mut c);
        while let Some(o) = self.queued.pop_front() {
            self.send(&mut c, o);
        }

        let state = if read_only {
            SessionState::ConnectedReadOnly
        } else {
            SessionState::Connected
        };
        self.set_state(state, true);
        self.watches.state_change(
            state.keeper_state().unwrap_or(KeeperState::SyncConnected),
            false,
        );

        let end = self.serve_loop(&mut c, &mut rb).await;

        // Seed: pending operations fail with ConnectionLoss when the
        // connection drops (with the terminal error if the client is dead).
        let err = match &end {
            End::Lost(_) => Error::ConnectionLoss,
            End::Terminal(t) => terminal_error(*t),
        };
        for p in c.pending.drain(..) {
            if let PendingKind::User { reply, .. } = p.kind {
                let _ = reply.send(Err(err.clone()));
            }
        }
        for w in c.auth_pending.drain(..).flatten() {
            let _ = w.send(Err(err.clone()));
        }
        let _ = c.stream.shutdown().await;
        match end {
            End::Lost(_) if self.closing => End::Terminal(Terminal::Closed),
            e => e,
        }
    }

    async fn serve_loop(&mut self, c: &mut Conn, rb: &mut ReadBuf) -> End {
        let mut probe: Option<Probe> = None;
        let mut probe_wait = RO_PROBE_MIN;
        let mut probe_at = Instant::now() + probe_wait;
        let mut probe_next = 0usize;
        let can_probe = c.read_only && self.hosts.len() > 1;

        let timer = tokio::time::sleep_until(next_deadline(c, can_probe.then_some(probe_at)));
        tokio::pin!(timer);

        // Frames that arrived with the handshake.
        match self.parse_frames(c, rb) {
            Ok(Some(end)) => return end,
            Ok(None) => {}
            Err(e) => return End::Lost(e),
        }
        loop {
            if let Err(e) = flush(c) {
                return End::Lost(format!("write failed: {e}"));
            }
            let accepting = !self.closing
                && c.wbuf.len() - c.wpos < WRITE_HIGH_WATER
                && c.pending.len() < MAX_IN_FLIGHT;
            let want_write = c.wpos < c.wbuf.len();
            tokio::select! {
                biased;
                r = c.stream.readable() => {
                    if let Err(e) = r {
                        return End::Lost(format!("read failed: {e}"));
                    }
                    match self.read(c, rb) {
                        Ok(None) => {}
                        Ok(Some(end)) => return end,
                        Err(e) => return End::Lost(e),
                    }
                }
                r = c.stream.writable(), if want_write => {
                    if let Err(e) = r {
                        return End::Lost(format!("write failed: {e}"));
                    }
                }
                cmd = self.rx.recv(), if accepting => {
                    let mut cmd = cmd;
                    let mut n = 0;
                    let mut yielded = false;
                    loop {
                        match cmd {
                            None => {
                                // Every handle was dropped: close the session.
                                self.begin_close(c);
                                break;
                            }
                            Some(cmd) => {
                                if let Some(end) = self.command_connected(c, cmd) {
                                    return end;
                                }
                            }
                        }
                        n += 1;
                        if n >= BATCH || self.closing || c.wbuf.len() - c.wpos >= WRITE_HIGH_WATER {
                            break;
                        }
                        cmd = match self.rx.try_recv() {
                            Ok(x) => Some(x),
                            Err(_) if !yielded && c.wbuf.len() - c.wpos < COALESCE => {
                                // Let the callers that are running queue
                                // more before this batch is written: one
                                // write for many requests.
                                yielded = true;
                                tokio::task::yield_now().await;
                                match self.rx.try_recv() {
                                    Ok(x) => Some(x),
                                    Err(_) => break,
                                }
                            }
                            Err(_) => break,
                        };
                    }
                }
                found = poll_probe(&mut probe), if probe.is_some() => {
                    probe = None;
                    if let Some(rw) = found {
                        info!(server = %rw, "found a read-write server; moving to it");
                        self.rw_server = Some(rw);
                        return End::Lost("leaving the read-only server".into());
                    }
                    probe_wait = (probe_wait * 2).min(RO_PROBE_MAX);
                    probe_at = Instant::now() + probe_wait;
                    timer.as_mut().reset(next_deadline(c, Some(probe_at)));
                }
                () = &mut timer => {
                    let now = Instant::now();
                    if now.duration_since(c.last_recv) >= c.read_timeout {
                        return End::Lost(format!(
                            "no answer from {} for {} ms",
                            c.host,
                            now.duration_since(c.last_recv).as_millis()
                        ));
                    }
                    if now.duration_since(c.last_send) >= c.ping_interval {
                        frame::write_request(&mut c.wbuf, xid::PING, &Request::Ping);
                        // Counts as sent: the deadline moves on.
                        c.last_send = now;
                    }
                    if can_probe && probe.is_none() && now >= probe_at {
                        let others: Vec<HostPort> = self
                            .hosts
                            .servers()
                            .iter()
                            .filter(|h| **h != c.host)
                            .cloned()
                            .collect();
                        if !others.is_empty() {
                            let h = others[probe_next % others.len()].clone();
                            probe_next += 1;
                            probe = Some(Box::pin(probe_read_write(h, self.connect_timeout())));
                        }
                        probe_at = now + RO_PROBE_MAX;
                    }
                    let probe_deadline = (can_probe && probe.is_none()).then_some(probe_at);
                    timer.as_mut().reset(next_deadline(c, probe_deadline));
                }
            }
        }
    }

    fn command_connected(&mut self, c: &mut Conn, cmd: Command) -> Option<End> {
        match cmd {
            Command::Request(o) => {
                if let Some(o) = self.precheck(o) {
                    self.send(c, o);
                }
            }
            Command::Auth {
                scheme,
                auth,
                reply,
            } => {
                self.add_auth_entry(scheme.clone(), auth.clone());
                write_auth(&mut c.wbuf, &scheme, &auth);
                c.auth_pending.push_back(Some(reply));
            }
            Command::UpdateServers { hosts, reply } => {
                let moved = self.hosts.update(hosts, Some(&c.host), &mut self.rng);
                let _ = reply.send(Ok(moved));
                if moved {
                    return Some(End::Lost(
                        "server list updated: rebalancing to another server".into(),
                    ));
                }
            }
            Command::RemoveWatchesLocal { removal, reply } => self.remove_local(removal, reply),
            Command::SubscribeRecipe(tx) => self.recipe_subs.push(tx),
            Command::Close { reply } => {
                self.close_replies.push(reply);
                self.begin_close(c);
            }
        }
        None
    }

    fn begin_close(&mut self, c: &mut Conn) {
        if self.closing {
            return;
        }
        self.closing = true;
        let xid = self.next_xid();
        frame::write_request(&mut c.wbuf, xid, &Request::CloseSession);
        c.pending.push_back(Pending {
            xid,
            op: OpCode::CloseSession,
            kind: PendingKind::Close,
        });
    }

    fn send(&mut self, c: &mut Conn, o: Outgoing) {
        let xid = self.next_xid();
        frame::write_request(&mut c.wbuf, xid, &o.req);
        c.pending.push_back(Pending {
            xid,
            op: o.req.opcode(),
            kind: PendingKind::User {
                reply: o.reply,
                watch: o.watch,
                removal: o.removal,
            },
        });
    }

    /// Re-registers every watch the application still holds, relative to
    /// the last zxid seen, so that the server fires at once those whose
    /// node changed while the client was away (seed: nothing is missed).
    fn send_set_watches(&mut self, c: &mut Conn) {
        let paths = self.watches.paths();
        if paths.is_empty() {
            return;
        }
        let with_persistent = !paths.persistent.is_empty() || !paths.recursive.is_empty();
        let mut batch = WatchPaths::default();
        let mut len = 0usize;
        let lists: [(PathField, Vec<String>); 5] = [
            (|b| &mut b.data, paths.data),
            (|b| &mut b.exist, paths.exist),
            (|b| &mut b.child, paths.child),
            (|b| &mut b.persistent, paths.persistent),
            (|b| &mut b.recursive, paths.recursive),
        ];
        for (field, list) in lists {
            for p in list {
                if len + p.len() > SET_WATCHES_MAX_LENGTH && !batch.is_empty() {
                    let full = std::mem::take(&mut batch);
                    self.write_set_watches(c, full, with_persistent);
                    len = 0;
                }
                len += p.len();
                field(&mut batch).push(p);
            }
        }
        if !batch.is_empty() {
            self.write_set_watches(c, batch, with_persistent);
        }
    }

    fn write_set_watches(&mut self, c: &mut Conn, b: WatchPaths, with_persistent: bool) {
        let req = if with_persistent {
            Request::SetWatches2(SetWatches2 {
                relative_zxid: self.last_zxid,
                data_watches: b.data,
                exist_watches: b.exist,
                child_watches: b.child,
                persistent_watches: b.persistent,
                persistent_recursive_watches: b.recursive,
            })
        } else {
            Request::SetWatches(SetWatches {
                relative_zxid: self.last_zxid,
                data_watches: b.data,
                exist_watches: b.exist,
                child_watches: b.child,
            })
        };
        frame::write_request(&mut c.wbuf, xid::SET_WATCHES, &req);
        c.pending.push_back(Pending {
            xid: xid::SET_WATCHES,
            op: req.opcode(),
            kind: PendingKind::SetWatches,
        });
    }

    /// Reads what the socket has and handles every whole frame.
    fn read(&mut self, c: &mut Conn, rb: &mut ReadBuf) -> std::result::Result<Option<End>, String> {
        let mut got = false;
        loop {
            if rb.end == rb.buf.len() {
                if rb.start > 0 {
                    rb.buf.copy_within(rb.start..rb.end, 0);
                    rb.end -= rb.start;
                    rb.start = 0;
                } else {
                    let n = rb.buf.len() * 2;
                    rb.buf.resize(n, 0);
                }
            }
            match c.stream.try_read(&mut rb.buf[rb.end..]) {
                Ok(0) => return Err(format!("{} closed the connection", c.host)),
                Ok(n) => {
                    got = true;
                    rb.end += n;
                    if rb.end < rb.buf.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("read failed: {e}")),
            }
        }
        if got {
            c.last_recv = Instant::now();
        }
        self.parse_frames(c, rb)
    }

    fn parse_frames(
        &mut self,
        c: &mut Conn,
        rb: &mut ReadBuf,
    ) -> std::result::Result<Option<End>, String> {
        loop {
            match frame::check(&rb.buf[rb.start..rb.end], self.cfg.max_frame_len) {
                Ok(Some(n)) => {
                    let payload = &rb.buf[rb.start + 4..rb.start + n];
                    rb.start += n;
                    if let Some(end) = self.on_frame(c, payload)? {
                        return Ok(Some(end));
                    }
                }
                Ok(None) => break,
                Err(e) => return Err(format!("bad frame from the server: {e}")),
            }
        }
        if rb.start == rb.end {
            rb.start = 0;
            rb.end = 0;
            if rb.buf.len() > 4 * READ_BUF {
                rb.buf = vec![0; READ_BUF];
            }
        }
        Ok(None)
    }

    fn on_frame(
        &mut self,
        c: &mut Conn,
        payload: &[u8],
    ) -> std::result::Result<Option<End>, String> {
        let mut r = Reader::new(payload);
        let h = ReplyHeader::read(&mut r).map_err(|e| format!("bad reply header: {e}"))?;
        match h.xid {
            xid::PING => Ok(None),
            xid::AUTH => {
                let waiter = c.auth_pending.pop_front().flatten();
                if h.err == 0 {
                    if let Some(w) = waiter {
                        let _ = w.send(Ok(()));
                    }
                    Ok(None)
                } else {
                    // Seed: authentication failure is unrecoverable.
                    warn!(err = h.err, "authentication failed");
                    if let Some(w) = waiter {
                        let _ = w.send(Err(Error::AuthFailed));
                    }
                    Ok(Some(End::Terminal(Terminal::AuthFailed)))
                }
            }
            xid::NOTIFICATION => {
                let ev = WatcherEvent::read(&mut r).map_err(|e| format!("bad watch event: {e}"))?;
                self.on_notification(ev);
                Ok(None)
            }
            xid::RECIPE_NOTIFICATION => {
                let payload = r
                    .read_buffer()
                    .map_err(|e| format!("bad recipe notification: {e}"))?;
                let n = RecipeNotification {
                    zxid: h.zxid,
                    payload,
                };
                self.recipe_subs.retain(|tx| tx.send(n.clone()).is_ok());
                Ok(None)
            }
            _ => {
                let Some(p) = c.pending.pop_front() else {
                    return Err(format!("reply with xid {} but nothing is pending", h.xid));
                };
                if p.xid != h.xid {
                    let expected = p.xid;
                    c.pending.push_front(p);
                    return Err(format!(
                        "xid out of order: got {}, expected {expected}",
                        h.xid
                    ));
                }
                if h.zxid > self.last_zxid {
                    self.last_zxid = h.zxid;
                }
                self.on_reply(p, h.err, &mut r)
            }
        }
    }

    fn on_reply(
        &mut self,
        p: Pending,
        err: i32,
        r: &mut Reader<'_>,
    ) -> std::result::Result<Option<End>, String> {
        match p.kind {
            PendingKind::SetWatches => {
                if err != 0 {
                    warn!(err, "the server refused to re-register watches");
                }
                Ok(None)
            }
            PendingKind::Close => Ok(Some(End::Terminal(Terminal::Closed))),
            PendingKind::User {
                reply,
                watch,
                removal,
            } => {
                let result = match Error::from_code(err) {
                    Some(e) => Err(e),
                    None => match Response::read_body(p.op, r) {
                        Ok(resp) => Ok(resp),
                        Err(e) => {
                            let _ = reply.send(Err(Error::MarshallingError));
                            return Err(format!("undecodable {:?} reply: {e}", p.op));
                        }
                    },
                };
                if let Some(w) = watch {
                    // ZooKeeper's client: exists registers a data watch if
                    // the node exists, an exist watch if it does not; other
                    // reads register only on success.
                    let kind = match (&result, w.kind) {
                        (Ok(_), WatchKind::Exist) => Some(WatchKind::Data),
                        (Ok(_), k) => Some(k),
                        (Err(Error::NoNode), WatchKind::Exist) => Some(WatchKind::Exist),
                        _ => None,
                    };
                    if let Some(kind) = kind {
                        self.watches.add(kind, w.path, w.sink);
                    }
                }
                if let (Some(rm), Ok(_)) = (removal, &result) {
                    self.watches.remove(&rm.path, rm.ty, &rm.client_path);
                }
                let moved = matches!(result, Err(Error::SessionMoved));
                let _ = reply.send(result);
                if moved {
                    // Seed "SessionMovedException": this connection is stale
                    // (the session lives on another server); the old server
                    // closes it, and the client reconnects.
                    return Ok(Some(End::Lost("session moved to another server".into())));
                }
                Ok(None)
            }
        }
    }

    fn on_notification(&mut self, ev: WatcherEvent) {
        let Some(et) = EventType::from_i32(ev.event_type) else {
            warn!(event_type = ev.event_type, "unknown watch event type");
            return;
        };
        if et == EventType::None {
            return;
        }
        let client_path = to_client(self.cfg.chroot.as_ref(), &ev.path);
        self.watches.trigger(et, &ev.path, client_path);
    }

    /// The client is dead: tell everyone, fail everything, forever.
    fn shutdown(&mut self, t: Terminal) {
        let err = terminal_error(t);
        *self.shared.dead.lock().unwrap_or_else(|e| e.into_inner()) = Some(err.clone());
        self.rx.close();
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Command::Request(o) => {
                    let _ = o.reply.send(Err(err.clone()));
                }
                Command::Auth { reply, .. } | Command::RemoveWatchesLocal { reply, .. } => {
                    let _ = reply.send(Err(err.clone()));
                }
                Command::UpdateServers { reply, .. } => {
                    let _ = reply.send(Err(err.clone()));
                }
                Command::SubscribeRecipe(_) => {}
                Command::Close { reply } => self.close_replies.push(reply),
            }
        }
        self.fail_waiting(err);
        let state = match t {
            Terminal::Expired => SessionState::Expired,
            Terminal::AuthFailed => SessionState::AuthFailed,
            Terminal::Closed => SessionState::Closed,
        };
        info!(
            ?state,
            session = format_args!("0x{:x}", self.session_id),
            "client is done"
        );
        self.set_state(state, true);
        if let Some(ks) = state.keeper_state() {
            self.watches.state_change(ks, true);
        }
        self.recipe_subs.clear();
        for r in self.close_replies.drain(..) {
            let _ = r.send(Ok(()));
        }
    }
}

/// The reconnect jitter window after `cycles` passes over the whole server
/// list without a success: `initial`, doubling per pass, at most `max`. The
/// delay before an attempt is uniform in `[0, window)`.
pub(crate) fn backoff_window(initial: Duration, max: Duration, cycles: u32) -> Duration {
    initial.saturating_mul(1u32 << cycles.min(16)).min(max)
}

fn terminal_error(t: Terminal) -> Error {
    match t {
        Terminal::Expired => Error::SessionExpired,
        Terminal::AuthFailed => Error::AuthFailed,
        Terminal::Closed => Error::Closed,
    }
}

fn write_auth(out: &mut Vec<u8>, scheme: &str, auth: &[u8]) {
    frame::write_request(
        out,
        xid::AUTH,
        &Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: scheme.to_string(),
            auth: auth.to_vec(),
        }),
    );
}

/// Writes what the socket takes now; never waits.
fn flush(c: &mut Conn) -> io::Result<()> {
    let mut wrote = false;
    while c.wpos < c.wbuf.len() {
        match c.stream.try_write(&c.wbuf[c.wpos..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                c.wpos += n;
                wrote = true;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    if wrote {
        c.last_send = Instant::now();
    }
    if c.wpos == c.wbuf.len() {
        c.wbuf.clear();
        c.wpos = 0;
        if c.wbuf.capacity() > 2 * WRITE_HIGH_WATER {
            c.wbuf = Vec::with_capacity(64 * 1024);
        }
    }
    Ok(())
}

fn next_deadline(c: &Conn, probe_at: Option<Instant>) -> Instant {
    let d = (c.last_send + c.ping_interval).min(c.last_recv + c.read_timeout);
    match probe_at {
        Some(p) => d.min(p),
        None => d,
    }
}

async fn poll_probe(p: &mut Option<Probe>) -> Option<HostPort> {
    match p.as_mut() {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// Asks a server whether it serves writes (`isro` answers `rw` or `ro`), as
/// ZooKeeper's client does while it is connected read-only.
async fn probe_read_write(host: HostPort, timeout: Duration) -> Option<HostPort> {
    let ask = async {
        let mut s = TcpStream::connect((host.host.as_str(), host.port))
            .await
            .ok()?;
        s.write_all(b"isro").await.ok()?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).await.ok()?;
        Some(answer == b"rw")
    };
    match tokio::time::timeout(timeout, ask).await {
        Ok(Some(true)) => Some(host),
        _ => None,
    }
}

/// Connects and does the session handshake (ConnectRequest / Response).
async fn establish(
    host: HostPort,
    req: ConnectRequest,
    timeout: Duration,
    max_frame: usize,
) -> io::Result<Established> {
    let attempt = async {
        let mut stream = TcpStream::connect((host.host.as_str(), host.port)).await?;
        stream.set_nodelay(true)?;
        let mut out = Vec::with_capacity(64);
        frame::write_record(&mut out, &req);
        stream.write_all(&out).await?;
        let mut buf = vec![0u8; 256];
        let mut len = 0;
        loop {
            match frame::check(&buf[..len], max_frame) {
                Ok(Some(n)) => {
                    let resp = ConnectResponse::from_bytes(&buf[4..n])
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    let leftover = buf[n..len].to_vec();
                    return Ok(Established {
                        stream,
                        resp,
                        leftover,
                    });
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
            if len == buf.len() {
                buf.resize(len * 2, 0);
            }
            let n = stream.read(&mut buf[len..]).await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection during the handshake",
                ));
            }
            len += n;
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no handshake within {} ms", timeout.as_millis()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_window_doubles_per_failed_pass_up_to_the_maximum() {
        let (i, m) = (Duration::from_millis(100), Duration::from_secs(2));
        let w: Vec<u64> = (0..7)
            .map(|c| backoff_window(i, m, c).as_millis() as u64)
            .collect();
        assert_eq!(w, [100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(backoff_window(i, m, u32::MAX), m);
    }

    #[test]
    fn session_states_map_to_zookeepers_keeper_states() {
        assert_eq!(
            SessionState::Connected.keeper_state(),
            Some(KeeperState::SyncConnected)
        );
        assert_eq!(SessionState::Connecting.keeper_state(), None);
        assert!(!SessionState::Expired.is_alive());
        assert!(SessionState::Disconnected.is_alive());
        assert!(SessionState::ConnectedReadOnly.is_connected());
        assert_eq!(SessionState::AuthFailed.zk_name(), "AUTH_FAILED");
    }
}
