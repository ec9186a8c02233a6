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
//!
//! Layout: this file holds the inputs, outputs and the [`Server`] with its
//! constructors and accessors; `prep.rs` (a write becomes a txn, the
//! outstanding changes, the zxid source), `apply.rs` (committed txns,
//! watches, ticks), `conns.rs` (connections, sessions, the reply queues and
//! send buffers), `reads.rs`, `ensemble.rs` (the leader's and the
//! follower's side), `recipes.rs` (recipe calls and callbacks) and
//! `peer_msg.rs` (what pipelines say to each other).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use wazoo_proto::frame;
use wazoo_proto::{
    perms, Acl, AddWatchMode, ClientInfo, ConnectRequest, ConnectResponse, CreateMode, ErrorCode,
    EventType, KeeperState, OpCode, OpResult, Request, Response, SessionRecord, SetWatches2, Stat,
    WatcherEvent, WatcherType,
};

mod apply;
mod auditing;
mod conns;
mod deploy;
mod ensemble;
pub mod peer_msg;
mod prep;
mod reads;
pub use reads::{tree_read, tree_read_eligible};
mod recipe_counters;
mod recipes;
pub(crate) mod reconfig;
mod restore;

use conns::SendBufs;
pub use deploy::{plugins_identity, PluginOp};
pub use peer_msg::PeerMsg;
use prep::*;
pub use recipes::{dry_run_call, DryRun, RecipeJob, RecipeStepDone};
pub(crate) use reconfig::CONFIG_NODE;
pub use restore::RESTORE_BYTES_MAX;

use wazoo_proto::Zxid;

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

/// The outcome of one SASL step, as the shell ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslStep {
    /// The exchange goes on: send this token.
    Continue(Vec<u8>),
    /// The client authenticated: send this token and add these
    /// identities (`sasl:<user>`, and `super` for the super user).
    Done {
        token: Vec<u8>,
        ids: Vec<wazoo_proto::Id>,
    },
    /// The exchange failed: the connection is answered with a failure and
    /// closed.
    Failed,
    /// The server has no SASL configured: as ZooKeeper 3.8's processSasl
    /// without a SASL server on the connection (it logs the
    /// NullPointerException), the answer is OK with a null token, and the
    /// connection goes on.
    NoServer,
}

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
    /// Enforced authentication (ZooKeeper's `enforce.auth.schemes`, or
    /// `sasl` for `sessionRequireClientSASLAuth`): a connection with no
    /// identity of these schemes has any request but auth and SASL
    /// refused with SessionClosedRequireSaslAuth, and is closed. Empty:
    /// not enforced.
    pub enforce_auth_schemes: Vec<String>,
    /// The ACL schemes registered beyond the built-in ones (`sasl` with
    /// the SASL provider, `x509` with a secure client port).
    pub acl_schemes: crate::acl::Schemes,
    pub snap_count: u64,
    /// A snapshot is also taken once the records logged since the last
    /// one reach this many bytes (ZooKeeper's `snapSizeLimitInKb`); 0
    /// never.
    pub snap_size_limit_bytes: u64,
    pub container_check_interval_ms: u64,
    pub container_max_per_minute: u32,
    /// `znode.container.maxNeverUsedIntervalMs`: a container that never
    /// had a child is deleted once its mtime is older than this (wall
    /// clock, as ZooKeeper's ContainerManager ages it); 0 never.
    pub container_max_never_used_ms: i64,
    pub reconfig_enabled: bool,
    /// zoo.cfg `multiAddress.enabled`: a reconfig may give a member
    /// several address pairs (`a:1:2|b:1:2`); without it such a line is
    /// refused, as ZooKeeper refuses it.
    pub multi_address_enabled: bool,
    /// zoo.cfg `standaloneEnabled`: while true, a reconfig may not leave
    /// fewer than two participants (ZooKeeper's rule).
    pub standalone_enabled: bool,
    /// Serve read-only clients while cut off from the quorum
    /// (ZooKeeper's `readonlymode.enabled`).
    pub read_only_enabled: bool,
    /// zoo.cfg `localSessionsEnabled`: in an ensemble, a new session is
    /// local to the member it connected to (no createSession txn; the
    /// member expires it itself). Ignored standalone, as by ZooKeeper.
    pub local_sessions: bool,
    /// zoo.cfg `localSessionsUpgradingEnabled`: a local session's first
    /// ephemeral (or recipe call) makes it global first; without it such a
    /// request fails with EphemeralOnLocalSession.
    pub local_sessions_upgrading: bool,
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
    /// `audit.enable`: make ZooKeeper's audit records
    /// ([`Output::Audit`]; see [`crate::audit`]).
    pub audit: bool,
    /// A learner of a ZooKeeper leader (`wazoo.peers=zookeeper`): a new
    /// session's password is ZooKeeper's, derived from its id, so that the
    /// ZooKeeper members it may move to accept it; no verifier is sent.
    pub zookeeper_passwords: bool,
    /// `digest.enabled` (ZooKeeper's default, true): log the tree's digest
    /// every 128th zxid for `hash`, as ZooKeeper's `DataTree` does. The
    /// digest itself is always kept (it is cheap and the tree checks it).
    pub digest_enabled: bool,
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
            enforce_auth_schemes: Vec::new(),
            acl_schemes: crate::acl::Schemes::default(),
            snap_count: 100_000,
            snap_size_limit_bytes: 4 << 30,
            container_check_interval_ms: 60_000,
            container_max_per_minute: 10_000,
            container_max_never_used_ms: 0,
            reconfig_enabled: false,
            multi_address_enabled: false,
            standalone_enabled: true,
            read_only_enabled: false,
            local_sessions: false,
            local_sessions_upgrading: false,
            max_recipe_waits_per_session: 1000,
            max_buffer_bytes: 0xfffff,
            max_outbound_bytes: DEFAULT_MAX_OUTBOUND_BYTES,
            max_unsent_reply_bytes: DEFAULT_MAX_UNSENT_REPLY_BYTES,
            audit: false,
            zookeeper_passwords: false,
            digest_enabled: true,
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
        /// 16 random bytes the shell drew from the OS: the password of the
        /// session if this handshake creates one (unused otherwise). A
        /// simulation gives bytes from its seeded generator.
        fresh_password: [u8; session::PASSWORD_LEN],
    },
    /// Identities the transport proved for a connection, right after its
    /// Connect: a TLS client certificate's `x509` subject (and `super`
    /// for the configured super user), as ZooKeeper adds them when the
    /// TLS handshake completes.
    Authenticated {
        conn: ConnId,
        ids: Vec<wazoo_proto::Id>,
    },
    /// One step of a connection's SASL exchange (the sasl request), run
    /// by the shell, which keeps the mechanism's state: the core sends its
    /// reply and adds the identities it proved.
    Sasl {
        conn: ConnId,
        xid: i32,
        step: SaslStep,
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
    /// The shell answered `reads` more of the connection's reads itself,
    /// from a published copy of the tree ([`Output::LocalReads`]): they
    /// touch its session and count as packets received and sent, as if
    /// the pipeline had answered them. The shell reports them in batches.
    LocalReads { conn: ConnId, reads: u64 },
    /// Time passed: expire sessions, reap containers and TTL nodes. The
    /// shell sends it every half tick; every input carries the time
    /// ([`Now`]), and timers compare its monotonic reading only.
    Tick,
    /// Every txn up to and including `zxid` is durable.
    Durable { zxid: Zxid },
    /// Ensemble: this txn is committed; apply it (in zxid order).
    Committed { zxid: Zxid, record: Vec<u8> },
    /// Ensemble: a message from another member's pipeline.
    Peer { from: u64, msg: PeerMsg },
    /// Learner of a ZooKeeper leader: a forwarded request the leader
    /// answered on the quorum stream, not with a txn (a sync's SYNC, a
    /// re-attach's REVALIDATE), answered as if `txn` carried it (`Noop`
    /// for done, `Error` for refused), after every txn applied so far.
    Answered { session: i64, cxid: i32, txn: Txn },
    /// Ensemble: consensus changed this member's role.
    Role(Role),
    /// The member's plugins directory asks for a deploy or an undeploy
    /// (the shell's watcher; never a client).
    Plugin(PluginOp),
    /// A worker ran a step the pipeline sent ([`Output::RecipeStep`]).
    RecipeStepDone(Box<RecipeStepDone>),
    /// The AdminServer's `restore`, the snapshot read and checked by the
    /// shell (`restore.rs`); answered with [`Output::Restored`].
    Restore(Box<crate::txn::RestoreTxn>),
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
    /// The connection's reads that need the tree alone
    /// ([`tree_read_eligible`]) may be answered by the shell from a
    /// published copy of the tree, checked against these identities
    /// (until its `Close`), once what was sent to the connection before
    /// this output has been handed to it; the shell reports them with
    /// [`Input::LocalReads`]. Sent when the session is established and
    /// after every change of the connection's identities; never to a
    /// connection that enforced authentication would still refuse.
    LocalReads {
        conn: ConnId,
        auth: std::sync::Arc<AuthInfo>,
    },
    /// Append a txn to the log; answer with `Input::Durable` once synced.
    Persist { zxid: Zxid, record: Vec<u8> },
    /// Write a snapshot of the state as of `zxid`.
    Snapshot(Box<SnapshotJob>),
    /// Ensemble leader: propose this txn (its zxid is the next one).
    Propose { zxid: Zxid, record: Vec<u8> },
    /// Ensemble follower: send this to the leader's pipeline.
    ToLeader(PeerMsg),
    /// Ensemble leader: consensus refused a txn this member had to make
    /// ([`Numbering::Refused`], or a full [`Numbering::Granted`] window).
    /// Nothing of that txn was made visible and no reply was queued for
    /// it; the member must stop leading (as a ZooKeeper leader that cannot
    /// propose does), and the role change that follows closes its clients'
    /// connections so they reconnect to another member. Once per role.
    StepDown { why: String },
    /// Ensemble: a reconfig committed and this is the membership now active
    /// (consensus and the quorum links must follow it).
    Reconfigured(crate::quorum_config::QuorumConfig),
    /// An audit record (only with [`ServerConfig::audit`]): the shell
    /// stamps the time and writes it to the audit log.
    Audit(Box<crate::audit::AuditRecord>),
    /// Run this recipe step off the member's thread ([`RecipeJob::run`])
    /// and answer with [`Input::RecipeStepDone`]; only with
    /// [`Server::set_recipe_offload`]. Steps may finish in any order.
    RecipeStep(Box<RecipeJob>),
    /// A restore was applied at `zxid` (on every member), or refused
    /// (`error`): the member that was asked answers the request `token`
    /// names (`restore.rs`).
    Restored {
        token: u64,
        zxid: Zxid,
        error: Option<String>,
    },
}

/// Where the zxids of the txns this member makes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Numbering {
    /// Standalone: this member numbers its txns, after the last it made.
    Own,
    /// Ensemble: consensus numbers txns (it is their one owner). It takes
    /// `room` more in a row from now, the first numbered `next`; the join
    /// sets this from consensus before every input.
    Granted { next: Zxid, room: usize },
    /// Ensemble: consensus takes no txn now, for this reason.
    Refused(String),
}

/// A consistent snapshot, taken in O(1), for a background writer.
#[derive(Debug)]
pub struct SnapshotJob {
    pub zxid: Zxid,
    pub tree: TreeSnapshot,
    /// The recipe wait table as of `zxid`.
    pub waits: RecipeWaits,
    /// (session id, timeout) of every live session.
    pub sessions: Vec<SessionRecord>,
}

/// How the result of a write is built once its txn is applied.
#[derive(Debug, Clone)]
enum WriteKind {
    Connect {
        session: i64,
        timeout_ms: i32,
        read_only_byte: bool,
        password: [u8; session::PASSWORD_LEN],
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
    /// A reconfig: answered with the new configuration and its stat.
    Reconfig,
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
        zxid: Zxid,
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
    /// A reply computed in prep (a failed multi).
    Reply(Response),
    /// A reply sent once every txn up to `zxid` is applied (a recipe call
    /// that changed nothing, or a write prep refused: what it read must be
    /// committed first).
    After {
        zxid: Zxid,
        body: Response,
    },
    /// An error sent once every txn up to `zxid` is applied (a write prep
    /// refused while txns were outstanding, see `on_write`).
    ErrorAfter {
        zxid: Zxid,
        code: ErrorCode,
    },
    /// A read call whose step runs on a worker (`job`): its reply once
    /// done (`Server::read_call_done`).
    ReadCall {
        job: u64,
        reply: Option<Result<Response, ErrorCode>>,
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
    /// A client's write to audit once applied (with `ServerConfig::audit`).
    audit: Option<Box<crate::audit::AuditRequest>>,
}

impl Proposal {
    fn zxid(&self) -> Zxid {
        Zxid::from_wire(self.record.header.zxid)
    }
}

/// A connection as the pipeline sees it.
#[derive(Debug)]
pub struct Conn {
    pub session: i64,
    /// The session's password as this connection's handshake presented it
    /// (a re-attach) or was given it (a new session): what its connect
    /// response carries. The session table keeps only its hash.
    password: Vec<u8>,
    pub timeout_ms: i32,
    /// Shared, so that a write borrows it for its prep without a copy;
    /// adding an identity copies it once ([`Arc::make_mut`]).
    pub auth: std::sync::Arc<AuthInfo>,
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
    /// The connection asked for wazoo's own recipe frames (notifications,
    /// xid -0x5A00): it sent a native recipe call, or its session
    /// re-attached with native waits pending. Stock clients never do, and
    /// never get a frame ZooKeeper would not send.
    pub native_recipes: bool,
    /// The handshake reply has been sent; requests are accepted.
    pub established: bool,
    pub closing: bool,
    pub packets_received: u64,
    pub packets_sent: u64,
    /// The zxid of the last reply header sent, as it went on the wire
    /// (jute's `long`: -1 after an unimplemented request), for `cons`.
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
    /// Reads the shell answered from a published copy of the tree
    /// ([`Input::LocalReads`]), as reported.
    pub local_reads: u64,
    /// Audit records made (`ServerConfig::audit`); the shell writes each,
    /// or stops the member.
    pub audit_records: u64,
    pub sessions_expired: u64,
    /// Txns after which the tree's digest differed from the one a
    /// ZooKeeper leader sent with them (an observer of ZooKeeper).
    pub digest_mismatches: u64,
    /// Request latencies since the shell last took them (for the metrics
    /// histogram); bounded, the excess is dropped.
    pub latency_samples_ms: Vec<i64>,
}

/// How many latency samples wait for the shell at most.
const LATENCY_SAMPLES_MAX: usize = 1 << 16;

/// The member's state machine.
pub struct Server {
    cfg: ServerConfig,
    tree: DataTree,
    sessions: SessionTracker,
    watches: WatchManager,
    conns: crate::id_hash::IdMap<ConnId, Conn>,
    session_conn: crate::id_hash::IdMap<i64, ConnId>,
    /// What prep keeps between txns: the outstanding changes, the txns
    /// made and not applied, where their zxids come from.
    prep: PrepState,
    /// The zxid of the last txn applied to the tree.
    last_applied: Zxid,
    /// `(zxid, tree digest)` after every applied txn whose zxid is a
    /// multiple of 128, the newest 1024 (ZooKeeper's `digestLog`, which
    /// `hash` prints); empty with `digest.enabled=false`.
    digest_log: VecDeque<(Zxid, i64)>,
    txns_since_snapshot: u64,
    /// Bytes of the records logged since the last snapshot.
    bytes_since_snapshot: u64,
    /// When the next container and TTL check is due, on the monotonic clock.
    next_container_check_ms: i64,
    /// The monotonic clock (see [`crate::time`]): every timer.
    mono_ms: i64,
    /// The wall clock, never behind a time this member stamped before: the
    /// ctime/mtime of txns it makes (see [`Server::handle`]).
    wall_ms: i64,
    out: Vec<Output>,
    /// Bytes queued per connection during one step, flushed as one send.
    sends: SendBufs,
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
    after_waiters: Vec<(Zxid, ConnId)>,
    /// Audit records of writes prep refused, each out once the txn it
    /// waits for is applied (as its reply); at most one per request held.
    audit_after: VecDeque<(Zxid, crate::audit::AuditRecord)>,
    /// Follower: writes forwarded to the leader to audit once applied, by
    /// (session, cxid); at most one per forwarded write in flight,
    /// forgotten with them when the role changes.
    forwarded_audits: std::collections::BTreeMap<(i64, i32), Box<crate::audit::AuditRequest>>,
    /// Deploys in flight and what the engine serves (see `deploy.rs`).
    deploys: deploy::DeployState,
    /// Ensemble: the active configuration, the one `/zookeeper/config`
    /// shows (ZooKeeper Dynamic Reconfiguration); none when standalone.
    quorum: Option<crate::quorum_config::QuorumConfig>,
    /// Leader: the learners in sync with it, as consensus reports them
    /// before each input (a reconfig needs a quorum of the new
    /// configuration among them).
    synced_learners: Vec<u64>,
    /// Leader: no counters commit before this (monotonic ms).
    counters_next_ms: i64,
    /// Leader: a counters txn is proposed and not applied yet.
    counters_in_flight: bool,
    /// Recipe steps running off the member's thread, and the requests
    /// that wait behind them (see `recipes/offload.rs`).
    offload: recipes::Offload,
}

impl Server {
    /// A member with a fresh tree.
    pub fn new(cfg: ServerConfig, now: Now) -> Server {
        Self::recovered(
            cfg,
            DataTree::new(),
            Vec::new(),
            RecipeWaits::default(),
            Zxid::ZERO,
            now,
        )
    }

    /// A member restored from a snapshot; replay the log after it with
    /// [`Server::replay`].
    pub fn recovered(
        cfg: ServerConfig,
        tree: DataTree,
        sessions: Vec<SessionRecord>,
        waits: RecipeWaits,
        zxid: Zxid,
        now: Now,
    ) -> Server {
        // Session deadlines restart from this process's monotonic clock: a
        // reading from the process that wrote the snapshot means nothing
        // here (ZooKeeper also gives every session a full timeout on load).
        let mut tracker = SessionTracker::new(cfg.server_id, now.wall_ms, cfg.tick_ms);
        for s in sessions {
            tracker.add(s.id, s.timeout_ms, s.verifier, now.mono_ms);
        }
        Server {
            next_container_check_ms: now.mono_ms + cfg.container_check_interval_ms as i64,
            cfg,
            tree,
            sessions: tracker,
            watches: WatchManager::new(),
            conns: Default::default(),
            session_conn: Default::default(),
            prep: PrepState::default(),
            last_applied: zxid,
            digest_log: VecDeque::new(),
            txns_since_snapshot: 0,
            bytes_since_snapshot: 0,
            mono_ms: now.mono_ms,
            wall_ms: now.wall_ms,
            out: Vec::new(),
            sends: SendBufs::default(),
            stats: Stats::default(),
            packets_at_reset: (0, 0),
            role: Role::Standalone,
            ens: ensemble::EnsembleState::default(),
            fatal: None,
            recipes: None,
            waits,
            owed_callbacks: VecDeque::new(),
            prefired: VecDeque::new(),
            running_callbacks: Default::default(),
            rescan_waits: true,
            after_waiters: Vec::new(),
            audit_after: VecDeque::new(),
            forwarded_audits: Default::default(),
            deploys: Default::default(),
            quorum: None,
            synced_learners: Vec::new(),
            counters_next_ms: 0,
            counters_in_flight: false,
            offload: Default::default(),
        }
    }

    /// Applies a txn read back from the log during recovery: no replies, no
    /// watches (no connections exist yet).
    pub fn replay(&mut self, rec: &TxnRecord) -> Result<(), String> {
        if Zxid::from_wire(rec.header.zxid) <= self.last_applied {
            return Ok(());
        }
        // A txn the tree refuses was refused alike when it was first
        // applied: replaying it changes nothing again.
        self.apply_txn(&rec.header, &rec.txn).map(|_| ())
    }

    /// After recovery: the txns replayed from the log (and their logged
    /// bytes) count towards the next snapshot, as if applied since the
    /// last one. A member that restarts before reaching `snapCount` would
    /// otherwise never take one, and its log and its replay at start would
    /// grow with every restart.
    pub fn count_replayed(&mut self, txns: u64, bytes: u64) {
        self.txns_since_snapshot += txns;
        self.bytes_since_snapshot += bytes;
    }

    /// After recovery: sessions that own ephemerals but no longer exist in
    /// the table (their close was never logged) get a close of their own.
    /// No password re-attaches to such a session: it only expires.
    pub fn finish_recovery(&mut self) {
        self.adopt_orphan_ephemerals();
    }

    /// Ephemerals whose owner the session table does not hold get a
    /// session that only expires (after recovery, or a restore).
    fn adopt_orphan_ephemerals(&mut self) {
        for owner in self.tree.sessions_with_ephemerals() {
            if self.sessions.get(owner).is_none() {
                self.sessions.add(
                    owner,
                    self.cfg.min_session_timeout_ms as i32,
                    Some(session::NO_PASSWORD),
                    self.mono_ms,
                );
            }
        }
    }

    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    /// A copy of the tree for [`tree_read`]s off the member's thread, in
    /// O(1) ([`DataTree::read_only_copy`]), and the zxid it is the state
    /// of (the reply header's zxid of a read answered from it).
    pub fn read_view(&self) -> (DataTree, i64) {
        (self.tree.read_only_copy(), self.last_applied.to_wire())
    }

    /// Whether `view` of `zxid` (from [`Server::read_view`]) is still the
    /// state: no node changed and no txn was applied since it was taken (a
    /// txn that changes no node, a session's, still moves the zxid a read's
    /// reply header carries).
    pub fn read_view_current(&self, view: &DataTree, zxid: i64) -> bool {
        self.tree.same_nodes(view) && self.last_applied.to_wire() == zxid
    }

    /// The timeout negotiated by the connection `session` is attached to
    /// here, if it is.
    pub fn attached_timeout_ms(&self, session: i64) -> Option<i32> {
        let conn = self.session_conn.get(&session)?;
        self.conns.get(conn).map(|c| c.timeout_ms)
    }

    /// The tree digests logged, oldest first (`hash`).
    pub fn digest_log(&self) -> impl Iterator<Item = (Zxid, i64)> + '_ {
        self.digest_log.iter().copied()
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

    pub fn last_zxid(&self) -> Zxid {
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

    /// Ensemble: makes `c` the active configuration and writes it to
    /// `/zookeeper/config`, as ZooKeeper does at start and when a reconfig
    /// commits (data version -1, mzxid the configuration's version, mtime
    /// now).
    pub fn set_quorum_config(&mut self, c: crate::quorum_config::QuorumConfig) {
        self.tree
            .set_config_node(c.render().as_bytes(), c.version, self.wall_ms);
        self.quorum = Some(c);
    }

    /// Leader: where consensus writes the learners in sync with it before
    /// each input (the list is cleared and refilled, never reallocated
    /// once grown).
    pub fn synced_learners_mut(&mut self) -> &mut Vec<u64> {
        &mut self.synced_learners
    }

    /// The active configuration of an ensemble member.
    pub fn quorum_config(&self) -> Option<&crate::quorum_config::QuorumConfig> {
        self.quorum.as_ref()
    }

    /// Ensemble: replaces the state with a snapshot the leader sent (SNAP).
    /// Only happens while syncing, when no client is served.
    /// The state this pipeline holds, taken whole: its tree, its
    /// sessions and the zxid they are at (a state recovered from disk, to
    /// be installed in a running member).
    pub fn into_state(self) -> (DataTree, Vec<SessionRecord>, Zxid) {
        let sessions = self.sessions.records();
        (self.tree, sessions, self.last_applied)
    }

    pub fn install_snapshot(
        &mut self,
        tree: DataTree,
        sessions: Vec<SessionRecord>,
        waits: RecipeWaits,
        zxid: Zxid,
    ) {
        let mut conns: Vec<ConnId> = self.conns.keys().copied().collect();
        conns.sort_unstable(); // the same inputs give the same outputs
        for c in conns {
            self.close_conn(c);
        }
        self.tree = tree;
        self.sessions = SessionTracker::new(self.cfg.server_id, self.wall_ms, self.cfg.tick_ms);
        for s in sessions {
            self.sessions
                .add(s.id, s.timeout_ms, s.verifier, self.mono_ms);
        }
        self.waits = waits;
        self.last_applied = zxid;
        self.prep.proposals.clear();
        self.prep.outstanding = Outstanding::default();
        self.offload.forget();
        self.forget_deploys_in_flight();
        self.adopt_config_of_tree();
    }

    /// After a SNAP: a reconfig the snapshot already holds was never
    /// applied here, so its configuration is activated now if it is newer
    /// than the active one.
    fn adopt_config_of_tree(&mut self) {
        let Some(current) = &self.quorum else {
            return;
        };
        let Some((Some(data), _)) = self.tree.get_data(reconfig::CONFIG_NODE) else {
            return;
        };
        let Ok(c) = std::str::from_utf8(&data)
            .map_err(|e| e.to_string())
            .and_then(crate::quorum_config::QuorumConfig::parse)
        else {
            return;
        };
        if c.version > current.version && !c.servers.is_empty() {
            tracing::info!(
                version = format!("{:x}", c.version),
                "configuration from the leader's snapshot"
            );
            self.quorum = Some(c.clone());
            self.out.push(Output::Reconfigured(c));
        }
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
        self.prep.proposals.len()
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
            Input::Connect {
                conn,
                peer,
                req,
                fresh_password,
            } => self.on_connect(conn, peer, req, fresh_password),
            Input::Authenticated { conn, ids } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    for id in ids {
                        std::sync::Arc::make_mut(&mut c.auth).add(id);
                    }
                }
                self.allow_local_reads(conn);
            }
            Input::Sasl { conn, xid, step } => self.on_sasl(conn, xid, step),
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
            Input::LocalReads { conn, reads } => self.on_local_reads(conn, reads),
            Input::Tick => self.on_tick(),
            Input::Durable { zxid } => self.on_durable(zxid),
            Input::Committed { zxid, record } => self.on_committed(zxid, &record),
            Input::Peer { from, msg } => self.on_peer(from, msg),
            Input::Answered { session, cxid, txn } => self.on_answered(session, cxid, txn),
            Input::Role(role) => self.on_role(role),
            Input::Plugin(op) => self.on_plugin(op),
            Input::RecipeStepDone(done) => self.on_step_done(*done),
            Input::Restore(r) => self.on_restore(r),
        }
        self.run_owed_callbacks();
    }

    /// Everything the shell must do, in order.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        self.flush_sends();
        std::mem::take(&mut self.out)
    }
}
