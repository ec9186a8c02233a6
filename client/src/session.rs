//! The connection task: one per client, owning the socket.
//!
//! It connects to a server of the list, establishes or re-establishes the
//! session (id + password, last zxid seen), re-sends credentials and
//! re-registers watches, then pipelines requests (many in flight, replies
//! matched in order by xid), routes watch notifications, pings when idle and
//! notices a dead connection. On loss it fails what was pending with
//! ConnectionLoss and tries the next server after a jittered backoff, until the
//! session is expired, authentication fails or the client is closed (ZooKeeper
//! Programmer's Guide, "ZooKeeper Sessions": "Session re-establishment",
//! "Client Heartbeat", "Session Expiration").
//!
//! Reads and writes are non-blocking on one socket in one task: every frame
//! queued while the socket was busy goes out in one write.
//!
//! Here: the session's state and the loop between connections. The live
//! connection is in `connected` (sending, pings, setWatches, the socket's
//! writes) and `incoming` (frames, replies, events); opening one is in
//! `handshake`.

mod connected;
mod handshake;
mod incoming;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, info};
use wazoo_proto::{
    ConnectRequest, ConnectResponse, KeeperState, OpCode, Request, Response, WatcherType,
};

use crate::connect_string::{Chroot, HostPort};
use crate::error::{Error, Result};
use crate::hosts::{HostList, RandomSource, SplitMix64};
use crate::watch::{WatchKind, WatchPaths, WatchRegistry, WatchSink};

use handshake::establish;

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
                    // ZooKeeper Programmer's Guide ("ZooKeeper Sessions"):
                    // requests made while no server can be reached fail with
                    // ConnectionLoss.
                    self.fail_waiting(Error::ConnectionLoss);
                    self.set_state(SessionState::Disconnected, false);
                    continue;
                }
                Ok(Ok(est)) => est,
            };
            if est.resp.timeout_ms <= 0 {
                // ZooKeeper Programmer's Guide, "Session Expiration": the
                // client learns of the expiry only once it reaches the ensemble
                // again.
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
