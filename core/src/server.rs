//! One member's request pipeline as a deterministic state machine.
//!
//! The shell feeds [`Input`]s (a connect, a request, a closed connection, a
//! tick, "the log is durable up to zxid Z") with the current time, and
//! drains [`Output`]s (bytes for a connection, a connection to close, a txn
//! to persist, a snapshot to write). Nothing here does I/O or reads a clock.
//!
//! The pipeline follows ZooKeeper's: *prep* turns a write into a txn,
//! checked against the committed tree plus every outstanding change (so a
//! create right after another create in flight sees it), stamps a zxid and
//! emits it for persistence; once the log says it is durable the txn is
//! *applied* to the tree, watches fire, and the reply goes out. Replies to
//! one connection leave in the order its requests arrived: a read or an
//! error that arrives behind a write in flight waits for that write.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use wazoo_proto::frame;
use wazoo_proto::{
    perms, Acl, AddWatchMode, ClientInfo, ConnectRequest, ConnectResponse, CreateMode, ErrorCode,
    EventType, KeeperState, OpCode, OpResult, Request, Response, SetWatches2, Stat, WatcherEvent,
    WatcherType,
};

mod ensemble;
pub mod peer_msg;
mod recipes;

pub use peer_msg::PeerMsg;

use super::acl::{self, AuthInfo};
use super::recipe::{RecipeEngine, RecipeWaits, WaitKey};
use super::session::{self, SessionTracker};
use super::time::Now;
use super::tree::{check_txn, ApplyError, DataTree, TreeSnapshot};
use super::txn::{CreateTxn, NodeKind, Txn, TxnHeader, TxnRecord};
use super::watch::{ConnId, Kind, WatchManager};

/// ZooKeeper 3.8 sends watch notifications with zxid -1 in the header.
const NOTIFICATION_ZXID: i64 = -1;

/// Paths clients may not delete.
const SPECIAL_PATHS: [&str; 4] = ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"];

/// What the pipeline needs from the configuration.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub server_id: u64,
    pub tick_ms: u32,
    pub min_session_timeout_ms: u32,
    pub max_session_timeout_ms: u32,
    pub extended_types_enabled: bool,
    pub enforce_quota: bool,
    pub super_digest: Option<String>,
    pub snap_count: u64,
    pub container_check_interval_ms: u64,
    pub container_max_per_minute: u32,
    pub reconfig_enabled: bool,
    /// Serve read-only clients while cut off from the quorum
    /// (ZooKeeper's `readonlymode.enabled`).
    pub read_only_enabled: bool,
    /// Most recipe waits one session may have pending.
    pub max_recipe_waits_per_session: usize,
    /// `jute.maxbuffer`: the largest node data and the largest txn prep
    /// admits. A client's frame is already bounded by it; a recipe step's
    /// writes are checked against it here.
    pub max_buffer_bytes: usize,
    /// Bytes a connection may have unsent (replies, watch events, recipe
    /// notifications handed to the shell and not yet written to its
    /// socket) before it is closed: a client that stops reading costs at
    /// most this much memory (`wazoo.client.maxOutboundBytes`).
    pub max_outbound_bytes: u64,
    /// Unsent bytes at which a connection's replies wait (reads are not
    /// run) until the client takes what it was sent, so a client that
    /// pipelines large reads without reading holds about this plus one
    /// reply (`wazoo.client.maxUnsentReplyBytes`).
    pub max_unsent_reply_bytes: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            server_id: 0,
            tick_ms: 2000,
            min_session_timeout_ms: 4000,
            max_session_timeout_ms: 40000,
            extended_types_enabled: false,
            enforce_quota: false,
            super_digest: None,
            snap_count: 100_000,
            container_check_interval_ms: 60_000,
            container_max_per_minute: 10_000,
            reconfig_enabled: false,
            read_only_enabled: false,
            max_recipe_waits_per_session: 1000,
            max_buffer_bytes: 0xfffff,
            max_outbound_bytes: DEFAULT_MAX_OUTBOUND_BYTES,
            max_unsent_reply_bytes: DEFAULT_MAX_UNSENT_REPLY_BYTES,
        }
    }
}

/// `wazoo.client.maxOutboundBytes` when zoo.cfg does not set it: eight
/// times jute.maxbuffer's default, room for the largest reply several times
/// over and for seconds of watch events to a briefly slow client.
pub const DEFAULT_MAX_OUTBOUND_BYTES: u64 = 8 * wazoo_proto::DEFAULT_MAX_BUFFER as u64;

/// `wazoo.client.maxUnsentReplyBytes` when zoo.cfg does not set it: twice
/// jute.maxbuffer's default, enough to keep a fast client's socket busy.
pub const DEFAULT_MAX_UNSENT_REPLY_BYTES: u64 = 2 * wazoo_proto::DEFAULT_MAX_BUFFER as u64;

/// What this member does for clients, as consensus decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// One member, no ensemble: writes are durable once the local log is.
    Standalone,
    /// Electing or cut off: no client is served.
    Looking,
    /// Preps every write of the ensemble; txns carry `epoch << 32 | n`.
    Leader { epoch: u32 },
    /// Serves reads, forwards writes to the leader.
    Follower { leader: u64 },
    /// A non-voting follower.
    Observer { leader: u64 },
}

impl Role {
    pub fn serves_clients(self) -> bool {
        !matches!(self, Role::Looking)
    }

    /// `srvr`'s and `mntr`'s name for the role.
    pub fn mode(self) -> &'static str {
        match self {
            Role::Standalone => "standalone",
            Role::Looking => "looking",
            Role::Leader { .. } => "leader",
            Role::Follower { .. } => "follower",
            Role::Observer { .. } => "observer",
        }
    }

    fn forwards(self) -> bool {
        matches!(self, Role::Follower { .. } | Role::Observer { .. })
    }

    fn decides(self) -> bool {
        matches!(self, Role::Standalone | Role::Leader { .. })
    }
}

/// An event from the shell.
#[derive(Debug)]
pub enum Input {
    /// A new connection's handshake.
    Connect {
        conn: ConnId,
        peer: Option<SocketAddr>,
        req: ConnectRequest,
    },
    /// A request on an established connection.
    Request {
        conn: ConnId,
        xid: i32,
        req: Request,
    },
    /// A request whose opcode the server does not know.
    Unknown { conn: ConnId, xid: i32, op: i32 },
    /// A request whose header was readable but whose body was not.
    Malformed { conn: ConnId, xid: i32 },
    /// The connection is gone (closed by the client or the network).
    Closed { conn: ConnId },
    /// The shell wrote `bytes` more of what it was sent for the connection
    /// to its socket. It may report in chunks: until it does, the bytes
    /// count as unsent, so the core overestimates, never underestimates.
    Written { conn: ConnId, bytes: u64 },
    /// Time passed: expire sessions, reap containers and TTL nodes. The
    /// shell sends it every half tick; every input carries the time
    /// ([`Now`]), and timers compare its monotonic reading only.
    Tick,
    /// Every txn up to and including `zxid` is durable.
    Durable { zxid: i64 },
    /// Ensemble: this txn is committed; apply it (in zxid order).
    Committed { zxid: i64, record: Vec<u8> },
    /// Ensemble: a message from another member's pipeline.
    Peer { from: u64, msg: PeerMsg },
    /// Ensemble: consensus changed this member's role.
    Role(Role),
}

/// What the shell must do, in order.
#[derive(Debug)]
pub enum Output {
    /// Frames for a connection; `replies` of them answer requests (the
    /// rest are notifications or the handshake), for flow control.
    Send {
        conn: ConnId,
        bytes: Vec<u8>,
        replies: u32,
    },
    /// Close the connection once what was sent before is flushed.
    Close { conn: ConnId },
    /// Append a txn to the log; answer with `Input::Durable` once synced.
    Persist { zxid: i64, record: Vec<u8> },
    /// Write a snapshot of the state as of `zxid`.
    Snapshot(Box<SnapshotJob>),
    /// Ensemble leader: propose this txn (its zxid is the next one).
    Propose { zxid: i64, record: Vec<u8> },
    /// Ensemble follower: send this to the leader's pipeline.
    ToLeader(PeerMsg),
}

/// A consistent snapshot, taken in O(1), for a background writer.
#[derive(Debug)]
pub struct SnapshotJob {
    pub zxid: i64,
    pub tree: TreeSnapshot,
    /// The recipe wait table as of `zxid`.
    pub waits: RecipeWaits,
    /// (session id, timeout) of every live session.
    pub sessions: Vec<(i64, i32)>,
}

/// How the result of a write is built once its txn is applied.
#[derive(Debug, Clone)]
enum WriteKind {
    Connect {
        session: i64,
        timeout_ms: i32,
        read_only_byte: bool,
    },
    Create {
        op: OpCode,
        path: String,
    },
    Delete,
    SetData {
        path: String,
    },
    SetAcl {
        path: String,
    },
    Multi(Vec<MultiKind>),
    CloseSession,
    /// A recipe call: its MessagePack reply.
    Recipe(Vec<u8>),
}

/// A multi op's result, computed in prep against the state the ops before
/// it leave (as ZooKeeper reports them).
#[derive(Debug, Clone)]
enum MultiKind {
    Create {
        op: OpCode,
        path: String,
        stat: Stat,
    },
    Delete,
    SetData {
        stat: Stat,
    },
    Check,
}

/// A finished write's answer.
#[derive(Debug)]
enum Reply {
    Frame(ErrorCode, Response),
    /// The handshake response of a new session.
    Connect(ConnectResponse),
}

/// A reply waiting its turn on a connection.
#[derive(Debug)]
enum Queued {
    /// A write whose txn is in flight; `result` is filled at apply.
    Write {
        xid: i32,
        zxid: i64,
        started_ms: i64,
        result: Option<Reply>,
        close_after: bool,
        /// Forwarded writes: how to build the reply from the committed txn.
        meta: Option<ensemble::WriteMeta>,
    },
    /// A read or a precomputed error, run when it reaches the head.
    Deferred {
        xid: i32,
        started_ms: i64,
        req: Deferred,
    },
}

#[derive(Debug)]
enum Deferred {
    Read(Request),
    Error(ErrorCode),
    /// A reply computed in prep (a failed multi, a lone check).
    Reply(Response),
    /// A reply sent once every txn up to `zxid` is applied (a recipe call
    /// that changed nothing, or a write prep refused: what it read must be
    /// committed first).
    After {
        zxid: i64,
        body: Response,
    },
    /// An error sent once every txn up to `zxid` is applied (a write prep
    /// refused while txns were outstanding, see `on_write`).
    ErrorAfter {
        zxid: i64,
        code: ErrorCode,
    },
    /// An opcode the server does not know: Unimplemented, then close.
    Unimplemented,
    /// A connect refused (bad password, unknown session): reply and close.
    InvalidConnect {
        read_only_byte: bool,
    },
}

/// Where a txn came from, to route its result.
#[derive(Debug, Clone, Copy)]
enum Origin {
    Conn(ConnId),
    Internal,
    /// Forwarded by another member; that member replies.
    Remote,
}

#[derive(Debug)]
struct Proposal {
    record: TxnRecord,
    origin: Origin,
    kind: Option<WriteKind>,
}

/// A connection as the pipeline sees it.
#[derive(Debug)]
pub struct Conn {
    pub session: i64,
    pub timeout_ms: i32,
    pub auth: AuthInfo,
    pub peer: Option<SocketAddr>,
    /// The client sent the readOnly byte, so replies carry it too.
    read_only_byte: bool,
    /// Connected to a member in read-only mode: reads only.
    pub read_only: bool,
    queue: VecDeque<Queued>,
    /// Bytes handed to the shell in [`Output::Send`] that it has not
    /// reported written ([`Input::Written`]); bounded by
    /// [`ServerConfig::max_outbound_bytes`].
    pub unsent_bytes: u64,
    /// The handshake reply has been sent; requests are accepted.
    pub established: bool,
    pub closing: bool,
    pub packets_received: u64,
    pub packets_sent: u64,
    pub last_zxid: i64,
    pub connected_at_ms: i64,
    pub last_latency_ms: i64,
    pub min_latency_ms: i64,
    pub max_latency_ms: i64,
    pub total_latency_ms: i64,
}

/// Counters for `srvr`, `stat`, `mntr` and metrics.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub packets_received: u64,
    pub packets_sent: u64,
    pub min_latency_ms: i64,
    pub max_latency_ms: i64,
    pub total_latency_ms: i64,
    pub requests_completed: u64,
    pub txns_applied: u64,
    /// Committed txns the tree refused (see `apply_txn`); 0 unless prep and
    /// apply disagree.
    pub txns_refused: u64,
    pub sessions_expired: u64,
    /// Request latencies since the shell last took them (for the metrics
    /// histogram); bounded, the excess is dropped.
    pub latency_samples_ms: Vec<i64>,
}

/// How many latency samples wait for the shell at most.
const LATENCY_SAMPLES_MAX: usize = 1 << 16;

/// A node's state as prep sees it: committed, or as outstanding changes
/// will leave it.
///
/// Like ZooKeeper's ChangeRecord it carries the full client-visible Stat, so
/// prep can also compute the per-op results of a multi (a setData's Stat
/// right after that op, not after the whole multi).
///
/// ZooKeeper stores a create-only child counter (the sequence counter) and
/// shows clients `2 * stored - numChildren` as cversion, so that deletes
/// count too; `stored_cversion` is that counter.
#[derive(Debug, Clone)]
struct Record {
    stat: Stat,
    stored_cversion: i32,
    acl: Vec<Acl>,
    /// The data outstanding writes leave, for recipe reads (`None`: the
    /// tree's data is current).
    data: Option<std::sync::Arc<[u8]>>,
}

impl Record {
    /// Recomputes the client-visible cversion after a child count change.
    fn refresh_cversion(&mut self) {
        self.stat.cversion = self
            .stored_cversion
            .wrapping_mul(2)
            .wrapping_sub(self.stat.num_children);
    }
}

/// Records a prep changed, by path (`None`: deleted).
type Changes = Vec<(String, Option<Record>)>;

/// ZooKeeper's outstanding changes: the effect of txns proposed but not yet
/// applied, consulted before the tree.
#[derive(Debug, Default)]
struct Outstanding {
    map: HashMap<String, (i64, Option<Record>)>,
    order: VecDeque<(i64, Vec<String>)>,
}

impl Outstanding {
    fn get(&self, tree: &DataTree, path: &str) -> Option<Record> {
        if let Some((_, r)) = self.map.get(path) {
            return r.clone();
        }
        let node = tree.node(path)?;
        Some(Record {
            stat: node.stat.clone(),
            stored_cversion: node.stored_cversion,
            acl: node.acl.to_vec(),
            data: None,
        })
    }

    fn commit(&mut self, zxid: i64, changes: Vec<(String, Option<Record>)>) {
        let mut paths = Vec::with_capacity(changes.len());
        for (p, r) in changes {
            paths.push(p.clone());
            self.map.insert(p, (zxid, r));
        }
        self.order.push_back((zxid, paths));
    }

    /// Forgets changes that the tree now reflects.
    fn applied(&mut self, zxid: i64) {
        while let Some((z, _)) = self.order.front() {
            if *z > zxid {
                break;
            }
            let (z, paths) = self.order.pop_front().expect("front exists");
            for p in paths {
                if self.map.get(&p).is_some_and(|(pz, _)| *pz == z) {
                    self.map.remove(&p);
                }
            }
        }
    }
}

/// A scratch view for prepping one request (or one whole multi): reads go
/// through it to the outstanding changes and the tree; writes stay in it
/// until the request as a whole succeeds.
struct View<'a> {
    tree: &'a DataTree,
    outstanding: &'a Outstanding,
    local: Vec<(String, Option<Record>)>,
    /// The zxid and leader time the txn being prepped will carry.
    zxid: i64,
    time_ms: i64,
}

impl View<'_> {
    fn get(&self, path: &str) -> Option<Record> {
        if let Some((_, r)) = self.local.iter().rev().find(|(p, _)| p == path) {
            return r.clone();
        }
        self.outstanding.get(self.tree, path)
    }

    fn set(&mut self, path: &str, r: Option<Record>) {
        self.local.push((path.to_string(), r));
    }

    fn into_changes(self) -> Vec<(String, Option<Record>)> {
        // The last write to a path wins.
        let mut out: Vec<(String, Option<Record>)> = Vec::new();
        for (p, r) in self.local {
            if let Some(e) = out.iter_mut().find(|(q, _)| *q == p) {
                e.1 = r;
            } else {
                out.push((p, r));
            }
        }
        out
    }
}

fn check_version(current: i32, expected: i32) -> Result<i32, ErrorCode> {
    if expected != -1 && expected != current {
        return Err(ErrorCode::BadVersion);
    }
    Ok(current.wrapping_add(1))
}

/// Reads look the path up as given (an invalid one is simply not there),
/// refusing only NUL, as ZooKeeper's FinalRequestProcessor does.
/// Reads do not validate their path in ZooKeeper: a path no node can
/// have is NoNode. One with a NUL is answered here, before any lookup.
fn check_read_path(path: &str) -> Result<(), ErrorCode> {
    if path.contains('\0') {
        return Err(ErrorCode::NoNode);
    }
    Ok(())
}

fn validate_path(path: &str) -> Result<(), ErrorCode> {
    wazoo_proto::path::validate(path, false).map_err(|_| ErrorCode::BadArguments)
}

/// The member's state machine.
pub struct Server {
    cfg: ServerConfig,
    tree: DataTree,
    sessions: SessionTracker,
    watches: WatchManager,
    conns: HashMap<ConnId, Conn>,
    session_conn: HashMap<i64, ConnId>,
    outstanding: Outstanding,
    proposals: VecDeque<Proposal>,
    /// The zxid of the last txn proposed.
    last_proposed: i64,
    /// The zxid of the last txn applied to the tree.
    last_applied: i64,
    txns_since_snapshot: u64,
    /// When the next container and TTL check is due, on the monotonic clock.
    next_container_check_ms: i64,
    /// The monotonic clock (see [`crate::time`]): every timer.
    mono_ms: i64,
    /// The wall clock, never behind a time this member stamped before: the
    /// ctime/mtime of txns it makes (see [`Server::handle`]).
    wall_ms: i64,
    out: Vec<Output>,
    /// Bytes queued per connection during one step, flushed as one send.
    sendbuf: HashMap<ConnId, (Vec<u8>, u32)>,
    send_order: Vec<ConnId>,
    pub stats: Stats,
    /// Packets received and sent when `srst` last reset the server's
    /// statistics: the four-letter words count from there, the metrics
    /// (counters) from the start.
    packets_at_reset: (u64, u64),
    role: Role,
    /// Ensemble bookkeeping (sessions touched, owners).
    ens: ensemble::EnsembleState,
    /// Set when a committed txn cannot be applied: this member's state can
    /// no longer be trusted and the shell must stop it.
    fatal: Option<String>,
    /// Local sessions made in read-only mode, dropped when it ends.
    ro_sessions: std::collections::HashSet<i64>,
    /// Runs recipe steps (the shell's wasm runtime); none: recipe calls fail.
    recipes: Option<Box<dyn RecipeEngine>>,
    /// The replicated table of recipe waits.
    waits: RecipeWaits,
    /// Leader: callbacks owed, in the order their waits fired.
    owed_callbacks: VecDeque<WaitKey>,
    /// Leader: waits a proposed (not yet applied) txn will fire, found in
    /// prep so their callbacks are proposed right behind it.
    prefired: VecDeque<(WaitKey, String, wazoo_sdk::abi::WatchEvent)>,
    /// Leader: callbacks proposed and not applied yet.
    running_callbacks: std::collections::HashSet<WaitKey>,
    /// Leader: look for fired waits in the table (after a role change).
    rescan_waits: bool,
    /// Connections with a `Deferred::After` reply, by the zxid it awaits.
    after_waiters: Vec<(i64, ConnId)>,
}

impl Server {
    /// A view for prepping the next txn: the committed tree plus the
    /// outstanding changes, at the zxid after the last one proposed.
    fn prep_view(&self) -> View<'_> {
        View {
            tree: &self.tree,
            outstanding: &self.outstanding,
            local: Vec::new(),
            zxid: self.last_proposed + 1,
            time_ms: self.wall_ms,
        }
    }

    /// A member with a fresh tree.
    pub fn new(cfg: ServerConfig, now: Now) -> Server {
        Self::recovered(
            cfg,
            DataTree::new(),
            Vec::new(),
            RecipeWaits::default(),
            0,
            now,
        )
    }

    /// A member restored from a snapshot; replay the log after it with
    /// [`Server::replay`].
    pub fn recovered(
        cfg: ServerConfig,
        tree: DataTree,
        sessions: Vec<(i64, i32)>,
        waits: RecipeWaits,
        zxid: i64,
        now: Now,
    ) -> Server {
        // Session deadlines restart from this process's monotonic clock: a
        // reading from the process that wrote the snapshot means nothing
        // here (ZooKeeper also gives every session a full timeout on load).
        let mut tracker = SessionTracker::new(cfg.server_id, now.wall_ms, cfg.tick_ms);
        for (id, timeout) in sessions {
            tracker.add(id, timeout, now.mono_ms);
        }
        Server {
            next_container_check_ms: now.mono_ms + cfg.container_check_interval_ms as i64,
            cfg,
            tree,
            sessions: tracker,
            watches: WatchManager::new(),
            conns: HashMap::new(),
            session_conn: HashMap::new(),
            outstanding: Outstanding::default(),
            proposals: VecDeque::new(),
            last_proposed: zxid,
            last_applied: zxid,
            txns_since_snapshot: 0,
            mono_ms: now.mono_ms,
            wall_ms: now.wall_ms,
            out: Vec::new(),
            sendbuf: HashMap::new(),
            send_order: Vec::new(),
            stats: Stats::default(),
            packets_at_reset: (0, 0),
            role: Role::Standalone,
            ens: ensemble::EnsembleState::default(),
            fatal: None,
            ro_sessions: Default::default(),
            recipes: None,
            waits,
            owed_callbacks: VecDeque::new(),
            prefired: VecDeque::new(),
            running_callbacks: Default::default(),
            rescan_waits: true,
            after_waiters: Vec::new(),
        }
    }

    /// Applies a txn read back from the log during recovery: no replies, no
    /// watches (no connections exist yet).
    pub fn replay(&mut self, rec: &TxnRecord) -> Result<(), String> {
        if rec.header.zxid <= self.last_applied {
            return Ok(());
        }
        // A txn the tree refuses was refused alike when it was first
        // applied: replaying it changes nothing again.
        self.apply_txn(&rec.header, &rec.txn).map(|_| ())
    }

    /// After recovery: sessions that own ephemerals but no longer exist in
    /// the table (their close was never logged) get a close of their own.
    pub fn finish_recovery(&mut self) {
        for owner in self.tree.sessions_with_ephemerals() {
            if self.sessions.get(owner).is_none() {
                self.sessions
                    .add(owner, self.cfg.min_session_timeout_ms as i32, self.mono_ms);
            }
        }
    }

    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    pub fn sessions(&self) -> &SessionTracker {
        &self.sessions
    }

    pub fn watches(&self) -> &WatchManager {
        &self.watches
    }

    pub fn conns(&self) -> impl Iterator<Item = (&ConnId, &Conn)> {
        self.conns.iter()
    }

    pub fn last_zxid(&self) -> i64 {
        self.last_applied
    }

    pub fn config(&self) -> &ServerConfig {
        &self.cfg
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// Why this member must stop, if it must.
    pub fn fatal(&self) -> Option<&str> {
        self.fatal.as_deref()
    }

    /// Starts in ensemble mode, electing: no client is served until
    /// consensus gives a role.
    pub fn set_ensemble(&mut self) {
        self.role = Role::Looking;
    }

    /// Ensemble: replaces the state with a snapshot the leader sent (SNAP).
    /// Only happens while syncing, when no client is served.
    pub fn install_snapshot(
        &mut self,
        tree: DataTree,
        sessions: Vec<(i64, i32)>,
        waits: RecipeWaits,
        zxid: i64,
    ) {
        let mut conns: Vec<ConnId> = self.conns.keys().copied().collect();
        conns.sort_unstable(); // the same inputs give the same outputs
        for c in conns {
            self.close_conn(c);
        }
        self.tree = tree;
        self.sessions = SessionTracker::new(self.cfg.server_id, self.wall_ms, self.cfg.tick_ms);
        for (id, timeout) in sessions {
            self.sessions.add(id, timeout, self.mono_ms);
        }
        self.waits = waits;
        self.last_applied = zxid;
        self.last_proposed = zxid;
        self.proposals.clear();
        self.outstanding = Outstanding::default();
    }

    /// ZooKeeper's `srst`: the latency figures and packet counts the
    /// four-letter words show start again from zero (the metrics endpoint's
    /// counters do not: a Prometheus counter never goes back).
    pub fn reset_server_stats(&mut self) {
        let s = &mut self.stats;
        s.min_latency_ms = 0;
        s.max_latency_ms = 0;
        s.total_latency_ms = 0;
        s.requests_completed = 0;
        self.packets_at_reset = (s.packets_received, s.packets_sent);
    }

    /// ZooKeeper's `crst`: every connection's packet counts and latencies
    /// (what `cons` shows) start again.
    pub fn reset_connection_stats(&mut self) {
        for c in self.conns.values_mut() {
            c.packets_received = 0;
            c.packets_sent = 0;
            c.last_latency_ms = 0;
            c.min_latency_ms = i64::MAX;
            c.max_latency_ms = 0;
            c.total_latency_ms = 0;
        }
    }

    /// Packets received and sent since `srst` (see `reset_server_stats`).
    pub fn packets_since_reset(&self) -> (u64, u64) {
        (
            self.stats.packets_received - self.packets_at_reset.0,
            self.stats.packets_sent - self.packets_at_reset.1,
        )
    }

    /// Requests received but not answered yet.
    pub fn outstanding_requests(&self) -> usize {
        self.conns.values().map(|c| c.queue.len()).sum()
    }

    /// Txns proposed but not yet durable.
    pub fn pending_txns(&self) -> usize {
        self.proposals.len()
    }

    /// Handles one input at time `now`; outputs accumulate until
    /// [`Server::take_outputs`].
    ///
    /// Neither clock goes back here. The monotonic one cannot (the max only
    /// guards against a shell bug). The wall clock can step back; the time
    /// stamped into txns then stays at the last stamp until the wall clock
    /// passes it, so a member's stamps never decrease in zxid order and a
    /// TTL node's age is never negative. A step forward moves stamps (and
    /// TTL ages, as in ZooKeeper) forward, and no timer.
    pub fn handle(&mut self, input: Input, now: Now) {
        self.mono_ms = self.mono_ms.max(now.mono_ms);
        self.wall_ms = self.wall_ms.max(now.wall_ms);
        match input {
            Input::Connect { conn, peer, req } => self.on_connect(conn, peer, req),
            Input::Request { conn, xid, req } => self.on_request(conn, xid, req),
            Input::Unknown { conn, xid, .. } => {
                self.count_received(conn);
                if self
                    .conns
                    .get(&conn)
                    .is_some_and(|c| c.session != 0 && !c.closing)
                {
                    self.push_deferred(conn, xid, Deferred::Unimplemented);
                }
            }
            Input::Malformed { conn, xid } => {
                self.count_received(conn);
                self.enqueue_error(conn, xid, ErrorCode::MarshallingError)
            }
            Input::Closed { conn } => self.on_closed(conn),
            Input::Written { conn, bytes } => self.on_written(conn, bytes),
            Input::Tick => self.on_tick(),
            Input::Durable { zxid } => self.on_durable(zxid),
            Input::Committed { zxid, record } => self.on_committed(zxid, &record),
            Input::Peer { from, msg } => self.on_peer(from, msg),
            Input::Role(role) => self.on_role(role),
        }
        self.run_owed_callbacks();
    }

    /// Everything the shell must do, in order.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        self.flush_sends();
        std::mem::take(&mut self.out)
    }

    /// Turns the bytes queued this step into sends, counting them as
    /// unsent; a connection they would take past
    /// [`ServerConfig::max_outbound_bytes`] is closed instead.
    fn flush_sends(&mut self) {
        let mut over = Vec::new();
        for conn in std::mem::take(&mut self.send_order) {
            let Some((bytes, replies)) = self.sendbuf.remove(&conn) else {
                continue;
            };
            if bytes.is_empty() {
                continue;
            }
            if let Some(c) = self.conns.get_mut(&conn) {
                c.unsent_bytes += bytes.len() as u64;
                if c.unsent_bytes > self.cfg.max_outbound_bytes {
                    over.push((conn, c.unsent_bytes));
                    continue;
                }
            }
            self.out.push(Output::Send {
                conn,
                bytes,
                replies,
            });
        }
        for (conn, unsent) in over {
            self.close_slow_reader(conn, unsent);
        }
    }

    /// A client that does not take what it is sent (its watch events keep
    /// coming while it does not read): its connection is closed and its
    /// state dropped now, so nothing more is queued for it. What it was
    /// sent before stays sent; what pushed it over the bound is dropped.
    fn close_slow_reader(&mut self, conn: ConnId, unsent: u64) {
        tracing::warn!(
            conn,
            unsent,
            max = self.cfg.max_outbound_bytes,
            "closing a connection whose client does not read what it is sent"
        );
        self.out.push(Output::Close { conn });
        self.on_closed(conn);
    }

    /// The shell wrote some of a connection's bytes: replies that waited
    /// for room go out, and the session is touched.
    fn on_written(&mut self, conn: ConnId, bytes: u64) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        debug_assert!(
            bytes <= c.unsent_bytes,
            "connection {conn}: {bytes} bytes reported written, only {} unsent",
            c.unsent_bytes
        );
        if bytes > c.unsent_bytes {
            tracing::error!(
                conn,
                bytes,
                unsent = c.unsent_bytes,
                "more bytes reported written than were sent; counting none unsent"
            );
        }
        c.unsent_bytes = c.unsent_bytes.saturating_sub(bytes);
        // A client taking what it is sent is alive, also while its own
        // requests (pings too) wait unread behind the bound.
        let session = c.session;
        if session != 0 && bytes > 0 {
            self.sessions.touch(session, self.mono_ms);
            if self.role.forwards() {
                self.ens.touched(session);
            }
        }
        self.drain(conn);
    }

    fn send_buf(&mut self, conn: ConnId) -> &mut Vec<u8> {
        &mut self.send_entry(conn).0
    }

    fn send_entry(&mut self, conn: ConnId) -> &mut (Vec<u8>, u32) {
        if !self.sendbuf.contains_key(&conn) {
            self.send_order.push(conn);
        }
        self.sendbuf.entry(conn).or_default()
    }

    fn close_conn(&mut self, conn: ConnId) {
        self.flush_sends();
        self.out.push(Output::Close { conn });
        if let Some(c) = self.conns.get_mut(&conn) {
            c.closing = true;
        }
    }

    fn count_received(&mut self, conn: ConnId) {
        self.stats.packets_received += 1;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.packets_received += 1;
        }
    }

    // ----- connections and sessions -------------------------------------

    fn on_connect(&mut self, conn: ConnId, peer: Option<SocketAddr>, req: ConnectRequest) {
        self.stats.packets_received += 1;
        let read_only_byte = req.read_only.is_some();
        let mut c = Conn {
            session: 0,
            timeout_ms: 0,
            auth: AuthInfo::for_addr(peer.map(|p| p.ip())),
            peer,
            read_only_byte,
            read_only: false,
            queue: VecDeque::new(),
            unsent_bytes: 0,
            established: false,
            closing: false,
            packets_received: 1,
            packets_sent: 0,
            last_zxid: self.last_applied,
            connected_at_ms: self.wall_ms,
            last_latency_ms: 0,
            min_latency_ms: i64::MAX,
            max_latency_ms: 0,
            total_latency_ms: 0,
        };
        if !self.role.serves_clients() {
            if self.cfg.read_only_enabled && req.read_only == Some(true) {
                return self.connect_read_only(conn, c, &req);
            }
            self.conns.insert(conn, c);
            self.close_conn(conn);
            return;
        }
        if req.last_zxid_seen > self.last_applied {
            // ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a client that has seen a newer zxid must not connect
            // to a server that is behind it. ZooKeeper closes without reply.
            tracing::info!(
                "refusing session for client that has seen zxid 0x{:x}, our last zxid is 0x{:x}",
                req.last_zxid_seen,
                self.last_applied
            );
            self.conns.insert(conn, c);
            self.close_conn(conn);
            return;
        }
        let timeout = (req.timeout_ms.max(0) as u32).clamp(
            self.cfg.min_session_timeout_ms,
            self.cfg.max_session_timeout_ms,
        ) as i32;
        c.timeout_ms = timeout;
        if req.session_id == 0 && self.role.forwards() {
            self.conns.insert(conn, c);
            self.follower_new_session(conn, timeout);
            return;
        }
        if req.session_id == 0 {
            let id = self.sessions.next_session_id();
            c.session = id;
            self.conns.insert(conn, c);
            self.session_conn.insert(id, conn);
            self.sessions.add(id, timeout, self.mono_ms);
            self.ens.owned_here(id, self.cfg.server_id);
            let kind = WriteKind::Connect {
                session: id,
                timeout_ms: timeout,
                read_only_byte,
            };
            self.propose(
                Origin::Conn(conn),
                0,
                id,
                Txn::CreateSession {
                    timeout_ms: timeout,
                },
                Vec::new(),
                Some(kind),
                false,
            );
            return;
        }
        let id = req.session_id;
        if self.role.forwards()
            && req.passwd.as_slice() == session::password(id)
            && self.sessions.get(id).is_none()
        {
            c.session = id;
            self.conns.insert(conn, c);
            self.follower_revalidate(conn, id);
            return;
        }
        let valid = req.passwd.as_slice() == session::password(id)
            && self.sessions.is_live(id)
            && self.sessions.touch(id, self.mono_ms);
        if valid && self.role.forwards() {
            // Tell the leader now: the claim must reach it before any write
            // this connection forwards (the link is FIFO).
            self.ens.claim(id);
            self.report_touches();
        } else if valid {
            self.ens.owned_here(id, self.cfg.server_id);
        }
        c.session = if valid { id } else { 0 };
        self.conns.insert(conn, c);
        if !valid {
            self.push_deferred(conn, 0, Deferred::InvalidConnect { read_only_byte });
            return;
        }
        // Re-attach: the session moves here; its old connection is closed.
        if let Some(old) = self.session_conn.insert(id, conn) {
            if old != conn && self.conns.contains_key(&old) {
                tracing::debug!("session 0x{id:x} moved from connection {old} to {conn}");
                self.close_conn(old);
            }
        }
        let resp = ConnectResponse {
            protocol_version: 0,
            timeout_ms: timeout,
            session_id: id,
            passwd: session::password(id).to_vec(),
            read_only: read_only_byte.then_some(false),
        };
        self.send_connect_response(conn, &resp);
        self.redeliver_recipe_results(id, conn);
    }

    /// ZooKeeper Programmer's Guide, "ZooKeeper Sessions" / ZooKeeper's read-only mode: a member without a quorum
    /// serves reads to clients that allow it. Its sessions are local (not
    /// replicated) and every write gets NotReadOnly; when the quorum is
    /// back, the connection is closed and the client finds a read-write
    /// server.
    fn connect_read_only(&mut self, conn: ConnId, mut c: Conn, req: &ConnectRequest) {
        let timeout = c.timeout_ms;
        let id = if req.session_id != 0
            && req.passwd.as_slice() == session::password(req.session_id)
            && self.sessions.get(req.session_id).is_some()
        {
            req.session_id
        } else {
            let id = self.sessions.next_session_id();
            self.sessions.add(id, timeout, self.mono_ms);
            self.ro_sessions.insert(id);
            id
        };
        c.session = id;
        c.read_only = true;
        self.conns.insert(conn, c);
        self.session_conn.insert(id, conn);
        let resp = ConnectResponse {
            protocol_version: 0,
            timeout_ms: timeout,
            session_id: id,
            passwd: session::password(id).to_vec(),
            read_only: Some(true),
        };
        self.send_connect_response(conn, &resp);
    }

    /// Whether this member serves read-only clients now.
    pub fn in_read_only_mode(&self) -> bool {
        self.role == Role::Looking && self.cfg.read_only_enabled
    }

    fn send_connect_response(&mut self, conn: ConnId, resp: &ConnectResponse) {
        frame::write_record(self.send_buf(conn), resp);
        self.stats.packets_sent += 1;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.established = true;
            c.packets_sent += 1;
        }
    }

    fn on_closed(&mut self, conn: ConnId) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        self.watches.remove_conn(conn);
        self.sendbuf.remove(&conn);
        if c.session != 0 && self.session_conn.get(&c.session) == Some(&conn) {
            self.session_conn.remove(&c.session);
        }
    }

    fn on_tick(&mut self) {
        self.end_waits_of_unloaded_modules();
        if self.role.forwards() {
            self.report_touches();
            return;
        }
        if !self.role.decides() {
            return;
        }
        for id in self.sessions.expire(self.mono_ms) {
            self.stats.sessions_expired += 1;
            tracing::info!("expiring session 0x{id:x}");
            let changes = self.close_session_changes(id);
            self.propose(
                Origin::Internal,
                ensemble::INTERNAL_CXID,
                id,
                Txn::CloseSession,
                changes,
                None,
                false,
            );
        }
        if self.mono_ms >= self.next_container_check_ms {
            self.next_container_check_ms =
                self.mono_ms + self.cfg.container_check_interval_ms as i64;
            self.reap_containers();
        }
    }

    /// ZooKeeper's ContainerManager: delete empty containers (that once had
    /// children) and expired TTL nodes, through the pipeline like any write.
    ///
    /// A TTL node's age is the wall time a txn would be stamped with now
    /// minus its mtime, as ZooKeeper's `getElapsed` computes it: a step of
    /// the wall clock forward ages TTL nodes as it does in ZooKeeper (no
    /// more: the check's interval runs on the monotonic clock), a step back
    /// delays their expiry until the wall clock passes the last stamp.
    fn reap_containers(&mut self) {
        let candidates = self.tree.reapable(self.wall_ms);
        let limit = self.cfg.container_max_per_minute.max(1) as usize;
        for path in candidates.into_iter().take(limit) {
            let Some(r) = self.outstanding.get(&self.tree, &path) else {
                continue;
            };
            if r.stat.num_children != 0 {
                continue;
            }
            let parent = wazoo_proto::path::parent(&path).to_string();
            let Some(pr) = self.outstanding.get(&self.tree, &parent) else {
                continue;
            };
            let mut pnew = pr.clone();
            pnew.stat.num_children -= 1;
            pnew.refresh_cversion();
            pnew.stat.pzxid = self.last_proposed + 1;
            let changes = vec![(path.clone(), None), (parent, Some(pnew))];
            tracing::debug!("reaping {path}");
            self.propose(
                Origin::Internal,
                ensemble::INTERNAL_CXID,
                0,
                Txn::Delete { path },
                changes,
                None,
                false,
            );
        }
    }

    // ----- requests -------------------------------------------------------

    fn on_request(&mut self, conn: ConnId, xid: i32, req: Request) {
        self.count_received(conn);
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        // Requests pipelined behind the handshake queue behind its reply.
        if c.session == 0 || c.closing {
            return;
        }
        let session = c.session;
        self.sessions.touch(session, self.mono_ms);
        if self.role.forwards() {
            self.ens.touched(session);
        }
        match req {
            Request::Auth(pkt) => self.on_auth(conn, xid, pkt),
            Request::CloseSession if self.conns.get(&conn).is_some_and(|c| c.read_only) => {
                // A read-only session is local: it just ends.
                self.ro_sessions.remove(&session);
                self.sessions.remove(session);
                self.session_conn.remove(&session);
                self.send_reply(conn, xid, 0, &Response::Empty);
                self.close_conn(conn);
            }
            Request::CloseSession if self.role.forwards() => {
                self.forward_write(conn, xid, session, Request::CloseSession)
            }
            Request::Sync { .. } if self.role.forwards() => {
                self.forward_write(conn, xid, session, req)
            }
            Request::CloseSession => {
                self.sessions.set_closing(session);
                let changes = self.close_session_changes(session);
                self.propose(
                    Origin::Conn(conn),
                    xid,
                    session,
                    Txn::CloseSession,
                    changes,
                    Some(WriteKind::CloseSession),
                    true,
                );
            }
            req if self.conns.get(&conn).is_some_and(|c| c.read_only)
                && (req.opcode().is_write()
                    || matches!(req, Request::Check { .. } | Request::Sync { .. })) =>
            {
                self.push_deferred(conn, xid, Deferred::Error(ErrorCode::NotReadOnly))
            }
            req if req.opcode().is_write() || matches!(req, Request::Check { .. }) => {
                self.on_write(conn, xid, session, req)
            }
            req => self.push_deferred(conn, xid, Deferred::Read(req)),
        }
    }

    /// Auth is handled at once, as ZooKeeper's connection thread does; the
    /// reply echoes the request's xid (clients send -4 or an ordinary xid).
    fn on_auth(&mut self, conn: ConnId, xid: i32, pkt: wazoo_proto::AuthPacket) {
        let super_digest = self.cfg.super_digest.clone();
        let ids = if pkt.scheme == "ip" {
            // ZooKeeper's IPAuthenticationProvider accepts `addauth ip`
            // whatever it carries, and adds the address the connection
            // comes from (an identity every connection already has).
            let peer = self.conns.get(&conn).and_then(|c| c.peer);
            Ok(peer
                .map(|p| wazoo_proto::Id::new("ip", &p.ip().to_string()))
                .into_iter()
                .collect())
        } else {
            acl::authenticate(&pkt.scheme, &pkt.auth, super_digest.as_deref())
        };
        match ids {
            Ok(ids) => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    for id in ids {
                        c.auth.add(id);
                    }
                }
                // ZooKeeper's auth reply carries zxid 0.
                self.send_reply_at(conn, xid, 0, 0, &Response::Empty);
            }
            Err(code) => {
                tracing::info!("authentication with scheme {:?} failed", pkt.scheme);
                self.send_reply_at(conn, xid, 0, code.code(), &Response::Empty);
                self.close_conn(conn);
            }
        }
    }

    fn enqueue_error(&mut self, conn: ConnId, xid: i32, err: ErrorCode) {
        if self
            .conns
            .get(&conn)
            .is_some_and(|c| c.session != 0 && !c.closing)
        {
            self.push_deferred(conn, xid, Deferred::Error(err));
        }
    }

    fn push_deferred(&mut self, conn: ConnId, xid: i32, req: Deferred) {
        let now = self.mono_ms;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if let Deferred::After { zxid, .. } | Deferred::ErrorAfter { zxid, .. } = &req {
            if *zxid > self.last_applied {
                self.after_waiters.push((*zxid, conn));
            }
        }
        c.queue.push_back(Queued::Deferred {
            xid,
            started_ms: now,
            req,
        });
        self.drain(conn);
    }

    fn on_write(&mut self, conn: ConnId, xid: i32, session: i64, req: Request) {
        if self.role.forwards() {
            self.forward_write(conn, xid, session, req);
            return;
        }
        if !self.sessions.is_live(session) {
            self.push_deferred(conn, xid, Deferred::Error(ErrorCode::SessionExpired));
            return;
        }
        let auth = self
            .conns
            .get(&conn)
            .map(|c| c.auth.clone())
            .unwrap_or_default();
        if let Request::RecipeCall {
            module,
            method,
            args,
        } = &req
        {
            let call = recipes::RecipeCall {
                module,
                method,
                args,
            };
            return self.local_recipe_call(conn, xid, session, &auth, call);
        }
        let prepped = self.prep_write(&auth, session, &req);
        match prepped {
            Ok((txn, changes, kind)) => {
                self.propose(
                    Origin::Conn(conn),
                    xid,
                    session,
                    txn,
                    changes,
                    Some(kind),
                    false,
                );
            }
            // A refusal (or a lone check that passed) may rest on changes
            // proposed and not yet applied: its answer waits until they
            // are, as ZooKeeper's does behind the error txn it logs.
            // Answered at once, it could tell of a change that a leader's
            // fall then loses, and the client would have seen a state the
            // ensemble never had (found by the whole-member simulation).
            Err(PrepError::Code(code)) => {
                let d = match self.last_outstanding() {
                    Some(zxid) => Deferred::ErrorAfter { zxid, code },
                    None => Deferred::Error(code),
                };
                self.push_deferred(conn, xid, d)
            }
            Err(PrepError::Done) => {
                let d = self.reply_after_outstanding(Response::Empty);
                self.push_deferred(conn, xid, d)
            }
            // A failed multi is answered with per-op results and no txn.
            Err(PrepError::MultiFailed(results)) => {
                let d = self.reply_after_outstanding(Response::Multi(results));
                self.push_deferred(conn, xid, d)
            }
        }
    }

    /// The last txn proposed and not yet applied, if any.
    fn last_outstanding(&self) -> Option<i64> {
        self.proposals.back().map(|p| p.record.header.zxid)
    }

    /// `body` now, or once every txn proposed so far is applied.
    fn reply_after_outstanding(&self, body: Response) -> Deferred {
        match self.last_outstanding() {
            Some(zxid) => Deferred::After { zxid, body },
            None => Deferred::Reply(body),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn propose(
        &mut self,
        origin: Origin,
        xid: i32,
        session: i64,
        txn: Txn,
        changes: Vec<(String, Option<Record>)>,
        kind: Option<WriteKind>,
        close_after: bool,
    ) {
        self.last_proposed += 1;
        let zxid = self.last_proposed;
        let record = TxnRecord {
            header: TxnHeader {
                session_id: session,
                cxid: xid,
                zxid,
                time_ms: self.wall_ms,
            },
            txn,
        };
        self.find_prefired(&changes);
        self.outstanding.commit(zxid, changes);
        if matches!(self.role, Role::Leader { .. }) {
            self.out.push(Output::Propose {
                zxid,
                record: record.encode(),
            });
        } else {
            self.out.push(Output::Persist {
                zxid,
                record: record.encode(),
            });
        }
        if let Origin::Conn(conn) = origin {
            let now = self.mono_ms;
            if let Some(c) = self.conns.get_mut(&conn) {
                c.queue.push_back(Queued::Write {
                    xid,
                    zxid,
                    started_ms: now,
                    result: None,
                    close_after,
                    meta: None,
                });
            }
        }
        self.proposals.push_back(Proposal {
            record,
            origin,
            kind,
        });
    }

    // ----- apply ------------------------------------------------------------

    fn on_durable(&mut self, zxid: i64) {
        while self
            .proposals
            .front()
            .is_some_and(|p| p.record.header.zxid <= zxid)
        {
            let p = self.proposals.pop_front().expect("front exists");
            self.apply(p);
        }
    }

    /// Applies a committed txn to the tree and the session table and fires
    /// its watches: what every member does with every txn, in zxid order.
    ///
    /// A txn the tree refuses ([`ApplyError`]) changes no node, fires no
    /// watch and registers no recipe wait, and its outcome is that error,
    /// as ZooKeeper's `DataTree.processTxn` records one in its result:
    /// every member applies the same txns to the same tree, so every member
    /// refuses it alike and the replicas stay equal. It never stops the
    /// member, nor a restart that replays it from the log. Prep refuses
    /// everything apply would (`check_txn`), so this is a prep bug showing,
    /// logged as one; the returned error is what the client is answered.
    fn apply_txn(&mut self, hdr: &TxnHeader, txn: &Txn) -> Result<Option<ApplyError>, String> {
        if hdr.zxid <= self.last_applied {
            return Err(format!(
                "txn 0x{:x} arrived after 0x{:x}: txns apply in zxid order",
                hdr.zxid, self.last_applied
            ));
        }
        let (triggers, refused) = match self.tree.apply(hdr, txn) {
            Ok(triggers) => (triggers, None),
            Err(e) => {
                self.stats.txns_refused += 1;
                tracing::error!(
                    zxid = format_args!("0x{:x}", hdr.zxid),
                    "a committed txn does not fit the tree; it changes nothing and its \
                     request fails (prep should have refused it): {e}"
                );
                (Vec::new(), Some(e))
            }
        };
        self.last_applied = hdr.zxid;
        self.last_proposed = self.last_proposed.max(hdr.zxid);
        self.outstanding.applied(hdr.zxid);
        self.stats.txns_applied += 1;
        match txn {
            Txn::CreateSession { timeout_ms } => {
                tracing::debug!(
                    "session 0x{:x} opened, timeout {timeout_ms} ms",
                    hdr.session_id
                );
                self.sessions.add(hdr.session_id, *timeout_ms, self.mono_ms);
            }
            Txn::CloseSession => {
                tracing::debug!("session 0x{:x} closed", hdr.session_id);
                self.sessions.remove(hdr.session_id);
                self.ens.forget_owner(hdr.session_id);
            }
            _ => {}
        }
        let decides = self.role.decides();
        for t in triggers {
            self.notify(&t.path, t.event, &t.acl);
            let fired = self.waits.trigger(&t.path, t.event);
            if decides {
                self.owed_callbacks.extend(fired);
            }
        }
        match txn {
            // The session's waits end with it (its own ephemerals' deletes
            // fired other sessions' waits above).
            Txn::CloseSession => self.waits.drop_session(hdr.session_id),
            Txn::Recipe(r) => match &refused {
                None => self.apply_recipe_effects(hdr.session_id, hdr.zxid, r),
                Some(e) => {
                    let failed = recipes::refused_step(r, e);
                    self.apply_recipe_effects(hdr.session_id, hdr.zxid, &failed)
                }
            },
            _ => {}
        }
        Ok(refused)
    }

    /// The answer to a write whose committed txn the tree refused (see
    /// `apply_txn`): the error, in the shape the request's answer takes.
    fn refused_reply(txn: &Txn, e: &ApplyError) -> Reply {
        match (txn, e) {
            (Txn::Multi(ops), ApplyError::Multi { index, error }) => Reply::Frame(
                ErrorCode::Ok,
                Response::Multi(multi_failure(ops.len(), *index, error.code())),
            ),
            (Txn::Recipe(r), e) => Reply::Frame(
                ErrorCode::Ok,
                Response::Recipe(recipes::refused_step(r, e).reply),
            ),
            (_, e) => Reply::Frame(e.code(), Response::Empty),
        }
    }

    /// Applies a txn this member proposed and answers the request it came
    /// from, if it came from one of this member's connections.
    fn apply(&mut self, p: Proposal) {
        let hdr = p.record.header.clone();
        let refused = match self.apply_txn(&hdr, &p.record.txn) {
            Ok(refused) => refused,
            Err(e) => return self.fail(format!("invariant broken by a prepped txn: {e}")),
        };
        if matches!(p.record.txn, Txn::CloseSession) {
            if let Some(conn) = self.session_conn.remove(&hdr.session_id) {
                if !matches!(p.origin, Origin::Conn(c) if c == conn) {
                    self.close_conn(conn);
                }
            }
        }
        if let Origin::Conn(conn) = p.origin {
            let result = match &refused {
                None => p.kind.map(|k| self.result_of(k)),
                Some(e) => p.kind.map(|_| Self::refused_reply(&p.record.txn, e)),
            };
            if let Some(c) = self.conns.get_mut(&conn) {
                let head = c.queue.iter_mut().find(
                    |q| matches!(q, Queued::Write { zxid, result: None, .. } if *zxid == hdr.zxid),
                );
                if let Some(Queued::Write { result: r, .. }) = head {
                    *r = result;
                }
            }
            self.drain(conn);
        }
        self.after_apply();
    }

    /// Counts txns towards the next snapshot; sends replies that waited
    /// for this txn.
    fn after_apply(&mut self) {
        if !self.after_waiters.is_empty() {
            let applied = self.last_applied;
            let (ready, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.after_waiters)
                .into_iter()
                .partition(|(z, _)| *z <= applied);
            self.after_waiters = rest;
            for (_, conn) in ready {
                self.drain(conn);
            }
        }
        self.txns_since_snapshot += 1;
        if self.txns_since_snapshot >= self.cfg.snap_count {
            self.txns_since_snapshot = 0;
            self.out
                .push(Output::Snapshot(Box::new(self.snapshot_job())));
        }
    }

    /// A consistent snapshot of the applied state.
    pub fn snapshot_job(&self) -> SnapshotJob {
        SnapshotJob {
            zxid: self.last_applied,
            tree: self.tree.snapshot(),
            waits: self.waits.clone(),
            sessions: self
                .sessions
                .all()
                .iter()
                .map(|s| (s.id, s.timeout_ms))
                .collect(),
        }
    }

    /// Sends `event` on `path` to the connections watching it that may
    /// READ `acl` (the node's, or the parent's for children-changed), as
    /// ZooKeeper checks each watcher's auth info before it delivers. A super
    /// user reads everything; a gone connection reads nothing.
    fn notify(&mut self, path: &str, event: EventType, acl: &[Acl]) {
        let conns_now = &self.conns;
        let conns = self.watches.trigger(path, event, |conn| {
            conns_now
                .get(&conn)
                .is_some_and(|c| acl::check(acl, perms::READ, &c.auth).is_ok())
        });
        if conns.is_empty() {
            return;
        }
        let ev = WatcherEvent {
            event_type: event as i32,
            state: KeeperState::SyncConnected as i32,
            path: path.to_string(),
        };
        for conn in conns {
            if !self.conns.contains_key(&conn) {
                continue;
            }
            frame::write_notification(self.send_buf(conn), NOTIFICATION_ZXID, &ev);
            self.stats.packets_sent += 1;
        }
    }

    fn stat_or_default(&self, path: &str) -> Stat {
        self.tree.stat(path).unwrap_or_default()
    }

    fn created_result(&self, op: OpCode, path: &str) -> Response {
        match op {
            OpCode::Create => Response::Create {
                path: path.to_string(),
            },
            _ => Response::Create2 {
                path: path.to_string(),
                stat: self.stat_or_default(path),
            },
        }
    }

    fn result_of(&self, kind: WriteKind) -> Reply {
        let r = match kind {
            WriteKind::Connect {
                session,
                timeout_ms,
                read_only_byte,
            } => {
                return Reply::Connect(ConnectResponse {
                    protocol_version: 0,
                    timeout_ms,
                    session_id: session,
                    passwd: session::password(session).to_vec(),
                    read_only: read_only_byte.then_some(false),
                })
            }
            WriteKind::Create { op, path } => self.created_result(op, &path),
            WriteKind::Delete | WriteKind::CloseSession => Response::Empty,
            WriteKind::Recipe(reply) => Response::Recipe(reply),
            WriteKind::SetData { path } | WriteKind::SetAcl { path } => {
                Response::Stat(self.stat_or_default(&path))
            }
            WriteKind::Multi(kinds) => Response::Multi(
                kinds
                    .into_iter()
                    .map(|k| match k {
                        // ZooKeeper answers a create2 inside a multi as a
                        // create: the path without a stat.
                        MultiKind::Create { op, path, stat } => match op {
                            OpCode::Create | OpCode::Create2 => OpResult::Create { path },
                            _ => OpResult::Create2 { path, stat },
                        },
                        MultiKind::Delete => OpResult::Delete,
                        MultiKind::SetData { stat } => OpResult::SetData { stat },
                        MultiKind::Check => OpResult::Check,
                    })
                    .collect(),
            ),
        };
        Reply::Frame(ErrorCode::Ok, r)
    }

    // ----- replies -----------------------------------------------------------

    fn send_reply(&mut self, conn: ConnId, xid: i32, err: i32, body: &Response) {
        self.send_reply_at(conn, xid, self.last_applied, err, body)
    }

    fn send_reply_at(&mut self, conn: ConnId, xid: i32, zxid: i64, err: i32, body: &Response) {
        let entry = self.send_entry(conn);
        frame::write_reply(&mut entry.0, xid, zxid, err, body);
        entry.1 += 1;
        self.stats.packets_sent += 1;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.packets_sent += 1;
            c.last_zxid = zxid;
        }
    }

    fn record_latency(&mut self, conn: ConnId, started_ms: i64) {
        let l = (self.mono_ms - started_ms).max(0);
        let s = &mut self.stats;
        if s.requests_completed == 0 || l < s.min_latency_ms {
            s.min_latency_ms = l;
        }
        s.max_latency_ms = s.max_latency_ms.max(l);
        s.total_latency_ms += l;
        s.requests_completed += 1;
        if s.latency_samples_ms.len() < LATENCY_SAMPLES_MAX {
            s.latency_samples_ms.push(l);
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.last_latency_ms = l;
            c.min_latency_ms = c.min_latency_ms.min(l);
            c.max_latency_ms = c.max_latency_ms.max(l);
            c.total_latency_ms += l;
        }
    }

    /// Sends every reply at the head of the connection's queue that is
    /// ready, while the connection's unsent bytes (including this step's)
    /// are under [`ServerConfig::max_unsent_reply_bytes`]; past that the
    /// rest waits for [`Input::Written`].
    fn drain(&mut self, conn: ConnId) {
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            // Nothing queued after a close would be written.
            if c.closing {
                return;
            }
            let this_step = self.sendbuf.get(&conn).map_or(0, |(b, _)| b.len() as u64);
            if c.unsent_bytes + this_step >= self.cfg.max_unsent_reply_bytes {
                return;
            }
            let ready = match c.queue.front() {
                None => return,
                Some(Queued::Write { result, .. }) => result.is_some(),
                Some(Queued::Deferred {
                    req: Deferred::After { zxid, .. } | Deferred::ErrorAfter { zxid, .. },
                    ..
                }) => *zxid <= self.last_applied,
                Some(Queued::Deferred { .. }) => true,
            };
            if !ready {
                return;
            }
            let item = c.queue.pop_front().expect("front exists");
            match item {
                Queued::Write {
                    xid,
                    result,
                    started_ms,
                    close_after,
                    zxid,
                    meta: _,
                } => {
                    let _ = zxid;
                    let (err, body) = match result.expect("ready") {
                        Reply::Connect(resp) => {
                            self.send_connect_response(conn, &resp);
                            if resp.timeout_ms == 0 {
                                // A re-attach the leader refused: closed,
                                // as `Deferred::InvalidConnect` is.
                                self.close_conn(conn);
                                return;
                            }
                            self.redeliver_recipe_results(resp.session_id, conn);
                            continue;
                        }
                        Reply::Frame(err, body) => (err, body),
                    };
                    self.send_reply(conn, xid, err.code(), &body);
                    self.record_latency(conn, started_ms);
                    if close_after {
                        self.close_conn(conn);
                        return;
                    }
                }
                Queued::Deferred {
                    xid,
                    started_ms,
                    req,
                } => match req {
                    Deferred::Error(code) | Deferred::ErrorAfter { code, .. } => {
                        self.send_reply(conn, xid, code.code(), &Response::Empty);
                        self.record_latency(conn, started_ms);
                    }
                    Deferred::Unimplemented => {
                        // ZooKeeper's UnimplementedRequestProcessor: the
                        // reply carries zxid -1, then the connection closes.
                        let code = ErrorCode::Unimplemented.code();
                        self.send_reply_at(conn, xid, -1, code, &Response::Empty);
                        self.record_latency(conn, started_ms);
                        self.close_conn(conn);
                        return;
                    }
                    Deferred::Reply(body) | Deferred::After { body, .. } => {
                        self.send_reply(conn, xid, 0, &body);
                        self.record_latency(conn, started_ms);
                    }
                    Deferred::InvalidConnect { read_only_byte } => {
                        let resp = ConnectResponse {
                            protocol_version: 0,
                            timeout_ms: 0,
                            session_id: 0,
                            passwd: vec![0; session::PASSWORD_LEN],
                            read_only: read_only_byte.then_some(false),
                        };
                        frame::write_record(self.send_buf(conn), &resp);
                        self.stats.packets_sent += 1;
                        self.close_conn(conn);
                        return;
                    }
                    Deferred::Read(req) => {
                        let (err, body) = self.read(conn, req);
                        self.send_reply(conn, xid, err.code(), &body);
                        self.record_latency(conn, started_ms);
                    }
                },
            }
        }
    }

    // ----- reads -------------------------------------------------------------

    fn read(&mut self, conn: ConnId, req: Request) -> (ErrorCode, Response) {
        match self.try_read(conn, req) {
            Ok(r) => (ErrorCode::Ok, r),
            Err(e) => (e, Response::Empty),
        }
    }

    fn auth_of(&self, conn: ConnId) -> AuthInfo {
        self.conns
            .get(&conn)
            .map(|c| c.auth.clone())
            .unwrap_or_default()
    }

    fn check_acl(&self, conn: ConnId, path: &str, perm: i32) -> Result<(), ErrorCode> {
        let acl = self.tree.acl(path).ok_or(ErrorCode::NoNode)?;
        let c = self.conns.get(&conn).ok_or(ErrorCode::ConnectionLoss)?;
        acl::check(&acl, perm, &c.auth)
    }

    fn get_children(
        &mut self,
        conn: ConnId,
        path: &str,
        watch: bool,
    ) -> Result<Vec<String>, ErrorCode> {
        check_read_path(path)?;
        self.check_acl(conn, path, perms::READ)?;
        let children = self.tree.children(path).ok_or(ErrorCode::NoNode)?;
        if watch {
            self.watches.add(conn, path, Kind::Child);
        }
        Ok(children)
    }

    fn try_read(&mut self, conn: ConnId, req: Request) -> Result<Response, ErrorCode> {
        if let Some(r) = self.recipes_node_read(&req) {
            return r;
        }
        match req {
            Request::Ping => Ok(Response::Empty),
            Request::Exists { path, watch } => {
                // The one read ZooKeeper checks: a NUL is BadArguments.
                if path.contains('\0') {
                    return Err(ErrorCode::BadArguments);
                }
                match self.tree.stat(&path) {
                    Some(stat) => {
                        if watch {
                            self.watches.add(conn, &path, Kind::Data);
                        }
                        Ok(Response::Stat(stat))
                    }
                    None => {
                        if watch {
                            self.watches.add(conn, &path, Kind::Data);
                        }
                        Err(ErrorCode::NoNode)
                    }
                }
            }
            Request::GetData { path, watch } => {
                check_read_path(&path)?;
                self.check_acl(conn, &path, perms::READ)?;
                let (data, stat) = self.tree.get_data(&path).ok_or(ErrorCode::NoNode)?;
                if watch {
                    self.watches.add(conn, &path, Kind::Data);
                }
                Ok(Response::GetData { data, stat })
            }
            Request::GetChildren { path, watch } => {
                let children = self.get_children(conn, &path, watch)?;
                Ok(Response::GetChildren { children })
            }
            Request::GetChildren2 { path, watch } => {
                let children = self.get_children(conn, &path, watch)?;
                Ok(Response::GetChildren2 {
                    children,
                    stat: self.stat_or_default(&path),
                })
            }
            Request::GetAcl { path } => {
                check_read_path(&path)?;
                let acl = self.tree.acl(&path).ok_or(ErrorCode::NoNode)?;
                let auth = self.auth_of(conn);
                acl::check(&acl, perms::READ | perms::ADMIN, &auth)?;
                let stat = self.stat_or_default(&path);
                if acl::check(&acl, perms::ADMIN, &auth).is_ok() {
                    return Ok(Response::GetAcl { acl, stat });
                }
                // Without ADMIN, digest hashes are masked, as ZooKeeper does.
                let masked = acl
                    .into_iter()
                    .map(|mut a| {
                        if a.id.scheme == "digest" {
                            if let Some((user, _)) = a.id.id.split_once(':') {
                                a.id.id = format!("{user}:x");
                            }
                        }
                        a
                    })
                    .collect();
                Ok(Response::GetAcl { acl: masked, stat })
            }
            Request::Sync { path } => Ok(Response::Sync { path }),
            Request::GetAllChildrenNumber { path } => {
                check_read_path(&path)?;
                self.check_acl(conn, &path, perms::READ)?;
                let n = self
                    .tree
                    .all_children_number(&path)
                    .ok_or(ErrorCode::NoNode)?;
                Ok(Response::AllChildrenNumber(n))
            }
            Request::GetEphemerals { prefix } => {
                let session = self.conns.get(&conn).map(|c| c.session).unwrap_or(0);
                // As ZooKeeper: a blank prefix, or one that trims (Java's
                // String.trim, up to U+0020) to "/", lists them all; any
                // other is matched as sent, untrimmed.
                let java_blank = |c: char| {
                    (c.is_whitespace()
                        && !matches!(c, '\u{85}' | '\u{a0}' | '\u{2007}' | '\u{202f}'))
                        || ('\u{1c}'..='\u{1f}').contains(&c)
                };
                let all = self.tree.ephemerals(session);
                Ok(Response::Ephemerals(
                    if prefix.chars().all(java_blank)
                        || prefix.trim_matches(|c: char| c <= ' ') == "/"
                    {
                        all
                    } else {
                        all.into_iter().filter(|e| e.starts_with(&prefix)).collect()
                    },
                ))
            }
            Request::WhoAmI => {
                let auth = self.auth_of(conn);
                Ok(Response::WhoAmI(
                    auth.ids
                        .iter()
                        .map(|id| ClientInfo {
                            auth_scheme: id.scheme.clone(),
                            user: match id.scheme.as_str() {
                                "digest" => id.id.split(':').next().unwrap_or("").to_string(),
                                _ => id.id.clone(),
                            },
                        })
                        .collect(),
                ))
            }
            Request::AddWatch { path, mode } => {
                // An unknown mode is a MarshallingError in ZooKeeper (its
                // mode conversion throws), checked before the path.
                let kind = match AddWatchMode::from_i32(mode) {
                    Some(AddWatchMode::Persistent) => Kind::Persistent,
                    Some(AddWatchMode::PersistentRecursive) => Kind::Recursive,
                    None => return Err(ErrorCode::MarshallingError),
                };
                // ZooKeeper does not check the path: a watch on a path no
                // node can have never fires.
                self.watches.add(conn, &path, kind);
                // ZooKeeper answers addWatch with an ErrorResponse(0) body.
                Ok(Response::ErrorResponse(0))
            }
            Request::CheckWatches { path, watcher_type } => {
                let t = client_watcher_type(watcher_type)?;
                if self.watches.contains(conn, &path, t) {
                    Ok(Response::Empty)
                } else {
                    Err(ErrorCode::NoWatcher)
                }
            }
            Request::RemoveWatches { path, watcher_type } => {
                let t = client_watcher_type(watcher_type)?;
                if self.watches.remove(conn, &path, t) {
                    Ok(Response::Empty)
                } else {
                    Err(ErrorCode::NoWatcher)
                }
            }
            Request::SetWatches(s) => {
                self.set_watches(
                    conn,
                    SetWatches2 {
                        relative_zxid: s.relative_zxid,
                        data_watches: s.data_watches,
                        exist_watches: s.exist_watches,
                        child_watches: s.child_watches,
                        persistent_watches: Vec::new(),
                        persistent_recursive_watches: Vec::new(),
                    },
                );
                Ok(Response::Empty)
            }
            Request::SetWatches2(s) => {
                self.set_watches(conn, s);
                Ok(Response::Empty)
            }
            // ZooKeeper rebuilds each read of a multiRead without its
            // watch flag: a multiRead sets no watches.
            Request::MultiRead(ops) => Ok(Response::Multi(
                ops.into_iter()
                    .map(|op| match op {
                        Request::GetChildren { path, .. } => {
                            Request::GetChildren { path, watch: false }
                        }
                        Request::GetData { path, .. } => Request::GetData { path, watch: false },
                        other => other,
                    })
                    .map(|op| match op {
                        Request::GetChildren { .. } => match self.try_read(conn, op) {
                            Ok(Response::GetChildren { children }) => {
                                OpResult::GetChildren { children }
                            }
                            Ok(_) => OpResult::Error {
                                err: ErrorCode::SystemError.code(),
                            },
                            Err(e) => OpResult::Error { err: e.code() },
                        },
                        Request::GetData { .. } => match self.try_read(conn, op) {
                            Ok(Response::GetData { data, stat }) => {
                                OpResult::GetData { data, stat }
                            }
                            Ok(_) => OpResult::Error {
                                err: ErrorCode::SystemError.code(),
                            },
                            Err(e) => OpResult::Error { err: e.code() },
                        },
                        _ => OpResult::Error {
                            err: ErrorCode::BadArguments.code(),
                        },
                    })
                    .collect(),
            )),
            // A failed multi arrives here with its results precomputed.
            Request::Multi(_) => Ok(Response::Multi(Vec::new())),
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    /// setWatches after a reconnect: events the client missed since
    /// `relative_zxid` are delivered now; the rest are re-armed.
    fn set_watches(&mut self, conn: ConnId, s: SetWatches2) {
        let rz = s.relative_zxid;
        let mut events: Vec<(String, EventType)> = Vec::new();
        for p in s.data_watches {
            match self.tree.stat(&p) {
                None => events.push((p, EventType::NodeDeleted)),
                Some(st) if st.mzxid > rz => events.push((p, EventType::NodeDataChanged)),
                Some(_) => self.watches.add(conn, &p, Kind::Data),
            }
        }
        for p in s.exist_watches {
            match self.tree.stat(&p) {
                Some(_) => events.push((p, EventType::NodeCreated)),
                None => self.watches.add(conn, &p, Kind::Data),
            }
        }
        for p in s.child_watches {
            match self.tree.stat(&p) {
                None => events.push((p, EventType::NodeDeleted)),
                Some(st) if st.pzxid > rz => events.push((p, EventType::NodeChildrenChanged)),
                Some(_) => self.watches.add(conn, &p, Kind::Child),
            }
        }
        for p in s.persistent_watches {
            self.watches.add(conn, &p, Kind::Persistent);
        }
        for p in s.persistent_recursive_watches {
            self.watches.add(conn, &p, Kind::Recursive);
        }
        for (path, event) in events {
            let ev = WatcherEvent {
                event_type: event as i32,
                state: KeeperState::SyncConnected as i32,
                path,
            };
            frame::write_notification(self.send_buf(conn), NOTIFICATION_ZXID, &ev);
            self.stats.packets_sent += 1;
        }
    }
}

/// Preps one write request against `view` (ZooKeeper's pRequest2Txn).
fn prep_request(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    auth: &AuthInfo,
    session: i64,
    req: &Request,
) -> Result<(Txn, WriteKind), PrepError> {
    match req {
        Request::Multi(ops) => {
            let zxid = view.zxid;
            prep_multi(cfg, view, auth, session, zxid, ops).map(|(t, k)| (t, WriteKind::Multi(k)))
        }
        Request::Reconfig(_) => Err(PrepError::Code(if cfg.reconfig_enabled {
            ErrorCode::Unimplemented
        } else {
            ErrorCode::ReconfigDisabled
        })),
        Request::Check { path, version } => match prep_check(view, auth, path, *version) {
            Ok(_) => Err(PrepError::Done),
            Err(e) => Err(PrepError::Code(e)),
        },
        op => prep_single(cfg, view, auth, session, op)
            .map_err(PrepError::Code)
            .and_then(|(t, k)| match k {
                Some(k) => Ok((t, k)),
                None => Err(PrepError::Done),
            }),
    }
}

enum PrepError {
    Code(ErrorCode),
    /// Nothing to write; answer OK (a lone check that passed).
    Done,
    MultiFailed(Vec<OpResult>),
}

fn prep_check(
    view: &mut View<'_>,
    auth: &AuthInfo,
    path: &str,
    version: i32,
) -> Result<(), ErrorCode> {
    validate_path(path)?;
    let r = view.get(path).ok_or(ErrorCode::NoNode)?;
    acl::check(&r.acl, perms::READ, auth)?;
    check_version(r.stat.version, version)?;
    Ok(())
}

/// Preps one write. `Ok((txn, None))` never happens; a kind is always given.
fn prep_single(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    auth: &AuthInfo,
    session: i64,
    req: &Request,
) -> Result<(Txn, Option<WriteKind>), ErrorCode> {
    match req {
        Request::Create(c)
        | Request::Create2(c)
        | Request::CreateContainer(c)
        | Request::CreateTtl(c) => {
            let op = req.opcode();
            let (txn, path) = prep_create(cfg, view, auth, session, c)?;
            Ok((txn, Some(WriteKind::Create { op, path })))
        }
        Request::Delete { path, version } => {
            prep_delete(view, auth, path, *version)?;
            Ok((Txn::Delete { path: path.clone() }, Some(WriteKind::Delete)))
        }
        // ZooKeeper reads a deleteContainer's body as a bare path (servers
        // send it so); a client's jute string starts with its length, whose
        // NUL bytes make the path BadArguments. Its reaper does not come
        // this way in wazoo, so a client's deleteContainer deletes nothing.
        Request::DeleteContainer { .. } => Err(ErrorCode::BadArguments),
        Request::SetData {
            path,
            data,
            version,
        } => {
            let txn = prep_set_data(cfg, view, auth, path, data, *version)?;
            Ok((txn, Some(WriteKind::SetData { path: path.clone() })))
        }
        Request::SetAcl { path, acl, version } => {
            validate_path(path)?;
            let fixed = acl::fixup(acl, auth)?;
            let mut r = view.get(path).ok_or(ErrorCode::NoNode)?;
            acl::check(&r.acl, perms::ADMIN, auth)?;
            let aversion = check_version(r.stat.aversion, *version)?;
            let txn = checked(Txn::SetAcl {
                path: path.clone(),
                acl: fixed.clone(),
                aversion,
            })?;
            r.stat.aversion = aversion;
            r.acl = fixed;
            view.set(path, Some(r));
            Ok((txn, Some(WriteKind::SetAcl { path: path.clone() })))
        }
        _ => Err(ErrorCode::Unimplemented),
    }
}

fn prep_create(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    auth: &AuthInfo,
    session: i64,
    c: &wazoo_proto::CreateRequest,
) -> Result<(Txn, String), ErrorCode> {
    let mode = CreateMode::from_flags(c.flags).ok_or(ErrorCode::BadArguments)?;
    let ttl = c.ttl.unwrap_or(-1);
    if mode.is_ttl() && !cfg.extended_types_enabled {
        return Err(ErrorCode::Unimplemented);
    }
    // ZooKeeper's validateTTL: a TTL mode needs 0 < ttl <= max; any other
    // mode must not carry one.
    if mode.is_ttl() {
        if !super::tree::ttl_in_range(ttl) {
            return Err(ErrorCode::BadArguments);
        }
    } else if ttl >= 0 {
        return Err(ErrorCode::BadArguments);
    }
    let path = &c.path;
    let last_slash = path.rfind('/').ok_or(ErrorCode::BadArguments)?;
    if path.contains('\0') {
        return Err(ErrorCode::BadArguments);
    }
    let acl = acl::fixup(&c.acl, auth)?;
    let parent_path = if last_slash == 0 {
        "/"
    } else {
        &path[..last_slash]
    };
    if parent_path.is_empty() {
        return Err(ErrorCode::BadArguments);
    }
    let mut parent = view.get(parent_path).ok_or(ErrorCode::NoNode)?;
    acl::check(&parent.acl, perms::CREATE, auth)?;
    let final_path = if mode.is_sequential() {
        super::tree::sequential_path(path, parent.stored_cversion)
    } else {
        path.clone()
    };
    validate_path(&final_path)?;
    if final_path == "/" {
        return Err(ErrorCode::NodeExists);
    }
    if view.get(&final_path).is_some() {
        return Err(ErrorCode::NodeExists);
    }
    if parent.stat.ephemeral_owner != 0 {
        return Err(ErrorCode::NoChildrenForEphemerals);
    }
    check_data_size(cfg, &c.data)?;
    if cfg.enforce_quota {
        view.tree.check_quota(&final_path, c.data.len() as i64, 1)?;
    }
    let new_cversion = parent.stored_cversion.wrapping_add(1);
    let kind = if mode.is_container() {
        NodeKind::Container
    } else if mode.is_ttl() {
        NodeKind::Ttl { ttl_ms: ttl }
    } else {
        NodeKind::Regular
    };
    let txn = checked(Txn::Create(CreateTxn {
        path: final_path.clone(),
        data: c.data.clone(),
        acl: acl.clone(),
        ephemeral_owner: if mode.is_ephemeral() { session } else { 0 },
        parent_cversion: new_cversion,
        kind,
    }))?;
    // Nothing below fails: the view changes only for a create that passed.
    parent.stored_cversion = new_cversion;
    parent.stat.num_children += 1;
    parent.refresh_cversion();
    parent.stat.pzxid = view.zxid;
    view.set(parent_path, Some(parent));
    let stat = Stat {
        czxid: view.zxid,
        mzxid: view.zxid,
        ctime: view.time_ms,
        mtime: view.time_ms,
        version: 0,
        cversion: 0,
        aversion: 0,
        // Clients see containers and TTL nodes as owned by no one.
        ephemeral_owner: if mode.is_ephemeral() { session } else { 0 },
        data_length: c.data.len() as i32,
        num_children: 0,
        pzxid: view.zxid,
    };
    view.set(
        &final_path,
        Some(Record {
            stat,
            stored_cversion: 0,
            acl: acl.clone(),
            data: recipes::record_data(&c.data),
        }),
    );
    Ok((txn, final_path))
}

/// Prep's half of the rules prep and apply share ([`check_txn`]): a txn
/// apply would refuse is refused here, with the code ZooKeeper answers.
fn checked(txn: Txn) -> Result<Txn, ErrorCode> {
    check_txn(&txn).map_err(|e| e.code())?;
    Ok(txn)
}

/// The watcher type of a checkWatches or removeWatches: ZooKeeper 3.8
/// takes Children (1), Data (2) and Any (3) and answers MarshallingError
/// for anything else, the persistent types (4, 5) included.
fn client_watcher_type(t: i32) -> Result<WatcherType, ErrorCode> {
    match WatcherType::from_i32(t) {
        Some(t @ (WatcherType::Children | WatcherType::Data | WatcherType::Any)) => Ok(t),
        _ => Err(ErrorCode::MarshallingError),
    }
}

/// Node data over `jute.maxbuffer` is refused: no client can send it, and
/// no recipe may write it (no client could read it back).
fn check_data_size(cfg: &ServerConfig, data: &[u8]) -> Result<(), ErrorCode> {
    if data.len() > cfg.max_buffer_bytes {
        return Err(ErrorCode::BadArguments);
    }
    Ok(())
}

fn prep_delete(
    view: &mut View<'_>,
    auth: &AuthInfo,
    path: &str,
    version: i32,
) -> Result<(), ErrorCode> {
    // ZooKeeper checks a delete's path only for a '/' and a NUL (its
    // getParentPathAndValidate): any other invalid path names no node, so
    // it is NoNode (or NoAuth on the parent), not BadArguments. No node
    // with an invalid path exists, so nothing invalid gets past the lookup.
    let Some(last_slash) = path.rfind('/') else {
        return Err(ErrorCode::BadArguments);
    };
    if path.contains('\0') || SPECIAL_PATHS.contains(&path) {
        return Err(ErrorCode::BadArguments);
    }
    let parent_path = if last_slash == 0 {
        "/"
    } else {
        &path[..last_slash]
    };
    let mut parent = view.get(parent_path).ok_or(ErrorCode::NoNode)?;
    acl::check(&parent.acl, perms::DELETE, auth)?;
    let node = view.get(path).ok_or(ErrorCode::NoNode)?;
    check_version(node.stat.version, version)?;
    if node.stat.num_children > 0 {
        return Err(ErrorCode::NotEmpty);
    }
    checked(Txn::Delete {
        path: path.to_string(),
    })?;
    // A delete moves pzxid but not the stored (sequence) counter.
    parent.stat.num_children -= 1;
    parent.refresh_cversion();
    parent.stat.pzxid = view.zxid;
    view.set(parent_path, Some(parent));
    view.set(path, None);
    Ok(())
}

fn prep_set_data(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    auth: &AuthInfo,
    path: &str,
    data: &[u8],
    version: i32,
) -> Result<Txn, ErrorCode> {
    validate_path(path)?;
    let mut r = view.get(path).ok_or(ErrorCode::NoNode)?;
    acl::check(&r.acl, perms::WRITE, auth)?;
    if cfg.enforce_quota {
        let old = view.tree.stat(path).map(|s| s.data_length).unwrap_or(0) as i64;
        view.tree.check_quota(path, data.len() as i64 - old, 0)?;
    }
    check_data_size(cfg, data)?;
    let v = check_version(r.stat.version, version)?;
    let txn = checked(Txn::SetData {
        path: path.to_string(),
        data: data.to_vec(),
        version: v,
    })?;
    r.stat.version = v;
    r.stat.mzxid = view.zxid;
    r.stat.mtime = view.time_ms;
    r.stat.data_length = data.len() as i32;
    r.data = recipes::record_data(data);
    view.set(path, Some(r));
    Ok(txn)
}

/// ZooKeeper's per-op results of a multi whose op `failed` failed with
/// `code`: OK for the ops before it, its error, then RuntimeInconsistency.
fn multi_failure(ops: usize, failed: usize, code: ErrorCode) -> Vec<OpResult> {
    (0..ops)
        .map(|j| OpResult::Error {
            err: match j.cmp(&failed) {
                std::cmp::Ordering::Less => 0,
                std::cmp::Ordering::Equal => code.code(),
                std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency.code(),
            },
        })
        .collect()
}

/// Preps a multi: every op against the state the previous ops leave. On
/// failure, ZooKeeper's per-op results: OK for ops before the failing one,
/// its error, then RuntimeInconsistency for the rest.
fn prep_multi(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    auth: &AuthInfo,
    session: i64,
    _zxid: i64,
    ops: &[Request],
) -> Result<(Txn, Vec<MultiKind>), PrepError> {
    let mut txns = Vec::with_capacity(ops.len());
    let mut kinds = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let res = match op {
            Request::Check { path, version } => prep_check(view, auth, path, *version)
                .map(|_| (Txn::Check { path: path.clone() }, MultiKind::Check)),
            _ => prep_single(cfg, view, auth, session, op).map(|(t, k)| {
                // The op's result as of right after it, as ZooKeeper reports it.
                let stat_now = |p: &str| view.get(p).map(|r| r.stat).unwrap_or_default();
                let mk = match k {
                    Some(WriteKind::Create { op, path }) => MultiKind::Create {
                        op,
                        stat: stat_now(&path),
                        path,
                    },
                    Some(WriteKind::SetData { path }) => MultiKind::SetData {
                        stat: stat_now(&path),
                    },
                    _ => MultiKind::Delete,
                };
                (t, mk)
            }),
        };
        match res {
            Ok((t, k)) => {
                txns.push(t);
                kinds.push(k);
            }
            Err(code) => return Err(PrepError::MultiFailed(multi_failure(ops.len(), i, code))),
        }
    }
    Ok((Txn::Multi(txns), kinds))
}
