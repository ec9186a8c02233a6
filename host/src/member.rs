//! A member's process side: its thread, clocks, recovery of a standalone
//! member, the snapshot payload format, recipe plugins, metrics and the
//! shell's tokio tasks. The I/O shell around [`crate::core`].
//!
//! Threads:
//! - the *member thread* runs a single-threaded tokio runtime: the tasks
//!   that own the sockets (see [`crate::net`]) and the *core loop*
//!   ([`crate::driver`]), which owns the member's state machine
//!   ([`crate::core::member::Member`], standalone or in an ensemble). It
//!   takes events from one channel (client input from the connection
//!   tasks, durability reports from the log writer, quorum links, ticks,
//!   admin queries), handles a batch, then carries out the outputs in the
//!   order the machine gives them: txns to the log, bytes to connections,
//!   messages to other members, snapshots to a writer thread.
//! - the *log writer* (`wazoo_storage::GroupCommitLog`) fsyncs batches and
//!   reports the durable zxid back to the core loop, which only then
//!   applies the txns and replies: persist before acknowledging.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::core::member::{LoadedSnapshot, Member as CoreMember, SnapshotCodec};
use crate::core::server::{Input, Server, ServerConfig, SnapshotJob};
use crate::core::time::Now;
use crate::core::txn::TxnRecord;
use crate::core::watch::ConnId;
use crate::driver::{durable_callback, Driver};
use wazoo_proto::Zxid;
use wazoo_storage::{GroupCommitLog, GroupCommitOptions, LogOptions, LogStats, TxnLog};

/// Bytes or a close for one connection's writer task.
#[derive(Debug)]
pub enum ConnMsg {
    /// Frames of which `replies` answer requests; `local`: answered by the
    /// connection's reader from the published tree (net/local_reads.rs),
    /// bytes the core does not count.
    Bytes {
        bytes: Vec<u8>,
        replies: u32,
        local: bool,
    },
    Close,
}

/// What the core loop listens to.
pub enum Event {
    /// A connection's writer, registered before its first input.
    Register {
        conn: ConnId,
        tx: crate::net::ConnTx,
    },
    Input(Input),
    /// Several inputs from one connection, in order (a reader found more
    /// than one whole frame buffered).
    Inputs(Vec<Input>),
    /// The log writer's report: every record up to this zxid is durable.
    Durable(Zxid),
    /// The snapshot writer's report on the state a sync installed
    /// (`Output::StoreInstalled`), the `seq`-th handed to it: durable at
    /// its zxid, every snapshot named by a later zxid removed; or why not.
    SnapshotInstalled {
        seq: u64,
        result: std::result::Result<Zxid, String>,
    },
    /// A four-letter word to answer, asked from `peer`; `allowed`: it is
    /// in 4lw.commands.whitelist (if not, it is counted as received and
    /// answered as not executed, as ZooKeeper does).
    Admin {
        word: String,
        allowed: bool,
        peer: std::net::SocketAddr,
        reply: oneshot::Sender<String>,
    },
    /// An AdminServer command to answer (`crate::admin::server`), asked
    /// from `ip` with the `Authorization` header `authorization`.
    AdminCommand {
        name: String,
        kwargs: Vec<(String, String)>,
        authorization: Option<String>,
        ip: std::net::IpAddr,
        /// The client certificate (DER) of a TLS connection, if any.
        cert: Option<Vec<u8>>,
        reply: oneshot::Sender<crate::admin::commands::Answer>,
    },
    /// A backup wants a consistent copy of the state (`crate::backup`).
    Backup {
        reply: oneshot::Sender<SnapshotJob>,
    },
    /// The AdminServer's `restore`, its snapshot read and checked
    /// (`crate::admin::server`): answered with the zxid it was applied
    /// at, or why not.
    Restore {
        txn: Box<crate::core::txn::RestoreTxn>,
        reply: oneshot::Sender<Result<Zxid, String>>,
    },
    /// The log writer stopped: the member can no longer make writes durable.
    LogFailed(String),
    /// Ensemble: something from another member.
    Link(crate::quorum::LinkEvent),
    /// An observer of a ZooKeeper ensemble: its link to the leader.
    Zk(crate::core::member::ZkInput),
    Shutdown,
}

/// The sub-directory of dataDir / dataLogDir wazoo keeps its files in, so an
/// Apache ZooKeeper data directory next to it is never read or touched.
pub const DATA_SUBDIR: &str = "wazoo-v1";

/// Where a member reads the wall clock. The system's in production; a test
/// can inject one it steps, to show that no timer depends on it.
pub trait WallClock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn wall_ms(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn wall_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// A member's two clocks (see [`crate::core::time`]): monotonic
/// milliseconds since the member started, from [`Instant`], for every
/// timer and for uptime; and a wall clock, for the times stamped into txns.
#[derive(Clone)]
pub struct Clock {
    origin: Instant,
    wall: Arc<dyn WallClock>,
}

impl Clock {
    /// The monotonic clock and the system's wall clock.
    pub fn system() -> Clock {
        Clock::with_wall(Arc::new(SystemWallClock))
    }

    /// The monotonic clock and the given wall clock.
    pub fn with_wall(wall: Arc<dyn WallClock>) -> Clock {
        Clock {
            origin: Instant::now(),
            wall,
        }
    }

    /// Both clocks now.
    pub fn now(&self) -> Now {
        Now {
            mono_ms: self.mono_ms(),
            wall_ms: self.wall.wall_ms(),
        }
    }

    /// Milliseconds since this clock was made, on the monotonic clock.
    pub fn mono_ms(&self) -> i64 {
        self.origin.elapsed().as_millis() as i64
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clock")
            .field("mono_ms", &self.mono_ms())
            .finish()
    }
}

/// A client port's listener, made as tokio's `TcpListener::bind` makes one
/// (SO_REUSEADDR, a backlog of 1024), with zoo.cfg's
/// `clientPortListenBacklog` as the backlog when it is positive
/// (ZooKeeper, too, leaves the system's default for -1, its default).
pub fn client_listener(addr: SocketAddr, backlog: i32) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(
        u32::try_from(backlog)
            .ok()
            .filter(|&b| b > 0)
            .unwrap_or(1024),
    )
}

pub fn server_config(cfg: &Config) -> ServerConfig {
    ServerConfig {
        server_id: cfg.my_id.unwrap_or(0),
        tick_ms: cfg.tick_time_ms,
        min_session_timeout_ms: cfg.min_session_timeout_ms,
        max_session_timeout_ms: cfg.max_session_timeout_ms,
        extended_types_enabled: cfg.extended_types_enabled,
        enforce_quota: cfg.enforce_quota,
        super_digest: cfg.super_digest.clone(),
        enforce_auth_schemes: cfg.sasl.enforce_schemes.clone(),
        acl_schemes: crate::core::acl::Schemes {
            sasl: cfg.sasl.provider,
            x509: cfg.tls.secure_client_addr.is_some(),
        },
        snap_count: cfg.snap_count,
        snap_size_limit_bytes: cfg.snap_size_limit_kb.saturating_mul(1024),
        container_check_interval_ms: cfg.container_check_interval_ms,
        container_max_per_minute: cfg.container_max_per_minute,
        container_max_never_used_ms: cfg.container_max_never_used_ms,
        reconfig_enabled: cfg.reconfig_enabled,
        multi_address_enabled: cfg.multi_address_enabled,
        standalone_enabled: cfg.standalone_enabled,
        read_only_enabled: cfg.read_only_enabled,
        // ZooKeeper reads these in quorum mode only: a standalone server's
        // sessions are all global.
        local_sessions: cfg.local_sessions_enabled && cfg.is_ensemble(),
        local_sessions_upgrading: cfg.local_sessions_upgrading_enabled,
        max_recipe_waits_per_session: cfg.recipe.max_waits_per_session,
        max_buffer_bytes: cfg.max_buffer,
        max_outbound_bytes: cfg.max_outbound_bytes,
        max_unsent_reply_bytes: cfg.max_unsent_reply_bytes,
        audit: cfg.audit_enabled,
        zookeeper_passwords: cfg.peers_zookeeper,
        digest_enabled: cfg.digest_enabled,
    }
}

pub fn snap_dir(cfg: &Config) -> PathBuf {
    cfg.data_dir.join(DATA_SUBDIR)
}

pub fn log_dir(cfg: &Config) -> PathBuf {
    cfg.data_log_dir.join(DATA_SUBDIR)
}

// The envelope's version says how the core's body is laid out.
const _: () = assert!(
    wazoo_storage::SNAPSHOT_VERSION == crate::core::snapshot::SNAPSHOT_FORMAT,
    "storage's snapshot version and the core's body format differ"
);

/// Serializes a snapshot payload: storage's envelope (zxid, sessions),
/// then the core's body (recipe waits, modules, counters, then the tree).
pub fn write_snapshot_payload(job: &SnapshotJob, w: &mut dyn Write) -> std::io::Result<()> {
    wazoo_storage::write_snapshot_envelope(job.zxid, &job.sessions, w)?;
    crate::core::snapshot::write_snapshot_body(job, w)
}

/// Reads a snapshot payload written by [`write_snapshot_payload`].
pub fn read_snapshot_payload(bytes: &[u8]) -> Result<LoadedSnapshot> {
    let envelope = wazoo_storage::read_snapshot_envelope(bytes)?;
    let (waits, tree) = crate::core::snapshot::read_snapshot_body(envelope.version, envelope.body)?;
    Ok(LoadedSnapshot {
        zxid: envelope.zxid,
        sessions: envelope.sessions,
        waits,
        tree,
    })
}

/// The snapshot payload format (storage's envelope, the core's body), for
/// the snapshots members send each other.
pub(crate) struct PayloadCodec;

impl SnapshotCodec for PayloadCodec {
    fn encode(&self, job: &SnapshotJob) -> Vec<u8> {
        let mut data = Vec::new();
        write_snapshot_payload(job, &mut data).expect("writing to memory does not fail");
        data
    }

    fn decode(&self, bytes: &[u8]) -> std::result::Result<LoadedSnapshot, String> {
        read_snapshot_payload(bytes).map_err(|e| format!("{e:#}"))
    }
}

/// The pipeline as the newest valid snapshot left it (a fresh tree
/// without one), and that snapshot's zxid.
pub(crate) fn load_newest_snapshot(cfg: &Config, now: Now) -> Result<(Server, Zxid)> {
    let scfg = server_config(cfg);
    let Some((zxid, path)) = wazoo_storage::latest_valid_snapshot(snap_dir(cfg))? else {
        return Ok((Server::new(scfg, now), Zxid::ZERO));
    };
    let bytes = wazoo_storage::read_snapshot(&path)?;
    let snap = read_snapshot_payload(&bytes)
        .with_context(|| format!("cannot load snapshot {}", path.display()))?;
    if snap.zxid != zxid {
        bail!(
            "snapshot {} holds zxid {}, its name says {zxid}",
            path.display(),
            snap.zxid
        );
    }
    tracing::info!(
        zxid = %zxid,
        nodes = snap.tree.node_count(),
        "loaded snapshot"
    );
    let server = Server::recovered(scfg, snap.tree, snap.sessions, snap.waits, zxid, now);
    Ok((server, zxid))
}

/// The options the member opens its log with; warns when `forceSync=no`
/// lets acknowledged writes go unsynced (the member calls this once, as
/// it opens its log).
pub fn log_options(cfg: &Config) -> LogOptions {
    if !cfg.force_sync {
        tracing::warn!(
            "forceSync=no: the transaction log is written without fdatasync, so writes acknowledged to clients may be lost if the machine crashes"
        );
    }
    LogOptions {
        truncate_corrupt_tail: cfg.truncate_corrupt_log_tail,
        force_sync: cfg.force_sync,
        ..LogOptions::default()
    }
}

/// Creates the member's snapshot and log directories if they are missing
/// and returns them; with `zookeeper.datadir.autocreate=false` a missing
/// one stops the start instead, as ZooKeeper's FileTxnSnapLog refuses a
/// missing `version-2` (a mistyped dataDir would otherwise serve an empty
/// tree).
pub fn make_data_dirs(cfg: &Config) -> Result<(PathBuf, PathBuf)> {
    let (sdir, ldir) = (snap_dir(cfg), log_dir(cfg));
    for (dir, what) in [(&sdir, "data directory"), (&ldir, "data log directory")] {
        if !cfg.data_dir_autocreate && !dir.is_dir() {
            bail!(
                "the {what} {} is missing and zookeeper.datadir.autocreate is false: create it \
                 (empty for a new member), or correct dataDir or dataLogDir",
                dir.display()
            );
        }
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create {what} {}", dir.display()))?;
    }
    Ok((sdir, ldir))
}

/// Rebuilds the state from the newest valid snapshot plus the log after it.
/// Opens the member's transaction log (repairing a torn tail, which is
/// logged), as a start does.
pub fn open_log(cfg: &Config) -> Result<(TxnLog, wazoo_storage::Recovered)> {
    let (_, ldir) = make_data_dirs(cfg)?;
    let (log, recovered) = TxnLog::open(&ldir, log_options(cfg))
        .with_context(|| format!("cannot open the transaction log in {}", ldir.display()))?;
    for r in &recovered.repairs {
        tracing::warn!("log repaired at startup: {r:?}");
    }
    Ok((log, recovered))
}

pub fn recover(cfg: &Config, now: Now) -> Result<(Server, TxnLog)> {
    make_data_dirs(cfg)?;
    let started = std::time::Instant::now();
    let (mut server, snap_zxid) = load_newest_snapshot(cfg, now)?;
    let (mut log, recovered) = open_log(cfg)?;
    if let Some(gap) =
        crate::ensemble_member::log_gap_after_snapshot(snap_zxid, recovered.first_zxid)
    {
        bail!("{gap}");
    }
    let (mut replayed, mut replayed_bytes) = (0u64, 0u64);
    for rec in log.read_from(snap_zxid)? {
        let rec = rec?;
        replayed_bytes += rec.body.len() as u64;
        let txn = TxnRecord::decode(&rec.body)
            .map_err(|e| anyhow!("log record {} does not decode: {e}", rec.zxid))?;
        if Zxid::from_wire(txn.header.zxid) != rec.zxid {
            bail!("log record {} holds txn 0x{:x}", rec.zxid, txn.header.zxid);
        }
        server.replay(&txn).map_err(|e| anyhow!("{e}"))?;
        replayed += 1;
    }
    server.count_replayed(replayed, replayed_bytes);
    server.finish_recovery();
    tracing::info!(
        zxid = %server.last_zxid(),
        replayed,
        nodes = server.tree().node_count(),
        sessions = server.sessions().len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "recovered"
    );
    Ok((server, log))
}

/// Shared, read-mostly facts for admin answers.
pub struct AdminContext {
    pub cfg: Config,
    pub log_stats: Arc<LogStats>,
    /// The member's clocks; uptime is its monotonic reading.
    pub clock: Clock,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// With client I/O threads (`wazoo.client.ioThreads`), the copy of the
    /// tree their readers answer plain reads from.
    pub local_reads: Option<Arc<crate::net::local_reads::LocalReads>>,
    /// The recipe runtime, when a plugins directory is configured.
    pub plugins: Option<Plugins>,
}

/// A member's recipe runtime and the watcher keeping it in step with the
/// plugins directory, if one is configured (it stops when this is dropped).
pub struct Plugins {
    pub runtime: crate::plugin::Runtime,
    _watcher: Option<std::sync::Mutex<crate::plugin::PluginWatcher>>,
}

/// Starts the recipe runtime if a plugins directory is configured or the
/// built-in recipes are on (`wazoo.recipes.builtin`, the default), gives
/// the pipeline the runtime as its recipe engine (which installs the
/// deployed modules the member recovered) and loads the built-in modules
/// (each only if no module of its name is served). The plugins directory
/// is watched once the core loop's channel exists ([`watch_plugins`]).
pub(crate) fn start_plugins(cfg: &Config, server: &mut Server) -> Result<Option<Plugins>> {
    if cfg.plugins_dir.is_none() && !cfg.builtin_recipes {
        return Ok(None);
    }
    if let Some(dir) = &cfg.plugins_dir {
        if !dir.is_dir() {
            bail!("plugins directory {} does not exist", dir.display());
        }
    }
    let r = &cfg.recipe;
    let rcfg = crate::plugin::RuntimeConfig {
        limits: crate::plugin::Limits {
            fuel: r.fuel,
            deadline: std::time::Duration::from_millis(r.deadline_ms),
            memory_bytes: r.memory_bytes,
            max_ops: r.max_ops,
            max_reply_bytes: r.max_reply_bytes,
            max_notifications: r.max_notifications,
            ..Default::default()
        },
        cache_dir: Some(
            r.cache_dir
                .clone()
                .unwrap_or_else(|| snap_dir(cfg).join("recipe-cache")),
        ),
        ..Default::default()
    };
    let runtime = crate::plugin::Runtime::new(rcfg).context("cannot start the recipe runtime")?;
    server.set_recipe_engine(Box::new(runtime.clone()));
    // Steps run on the recipe workers the driver starts (`recipe_pool`).
    server.set_recipe_offload(cfg.recipe.worker_threads() > 0);
    if cfg.builtin_recipes {
        load_builtin_recipes(&runtime, cfg.recipe.worker_threads() > 0)?;
    }
    Ok(Some(Plugins {
        runtime,
        _watcher: None,
    }))
}

/// Watches the plugins directory, if one is configured, as a way to
/// deploy (docs/RECIPES.md, "The plugins directory"): what a file change
/// asks for goes to the core loop on `events` as an
/// [`Input::Plugin`](crate::core::server::Input::Plugin), and the pipeline
/// commits it through the log (a follower forwards it to the leader), so
/// every member serves the same version from the same zxid.
pub(crate) fn watch_plugins(
    cfg: &Config,
    plugins: Option<Plugins>,
    events: mpsc::Sender<Event>,
) -> Result<Option<Plugins>> {
    let Some(dir) = &cfg.plugins_dir else {
        return Ok(plugins);
    };
    let Some(mut plugins) = plugins else {
        return Ok(None);
    };
    let label = format!("plugins@{}", cfg.my_id.unwrap_or(0));
    let submit: crate::plugin::Submit =
        Box::new(move |op| events.try_send(Event::Input(Input::Plugin(op))).is_ok());
    let watcher = plugins
        .runtime
        .watch_dir_deploying(dir, &label, submit, Default::default())
        .with_context(|| format!("cannot watch plugins directory {}", dir.display()))?;
    plugins._watcher = Some(std::sync::Mutex::new(watcher));
    Ok(Some(plugins))
}

/// Loads the recipe modules built into this binary (`crate::builtin`) on a
/// thread of their own, at a lower priority: compiling them takes seconds
/// the first time (the compiled code is cached under dataDir), and the
/// member serves meanwhile. Each is a default: it is not loaded if a
/// module of its name was deployed or loaded from the plugins directory
/// first, and one that does not load is logged and skipped.
///
/// With recipe workers (`offload`), each module is announced first
/// ([`Runtime::loading_default`](crate::plugin::Runtime::loading_default)):
/// a call of it made while it loads waits for it on a worker instead of
/// being answered Unimplemented. With `recipe.workers=0` calls run on the
/// member's thread, which must not wait for a compiler: such a call is
/// answered at once (Unimplemented while the module loads).
fn load_builtin_recipes(runtime: &crate::plugin::Runtime, offload: bool) -> Result<()> {
    let all = crate::builtin::BUILTIN_RECIPES;
    if all.is_empty() {
        tracing::warn!(
            "this binary was built without the built-in recipes (the wasm32-unknown-unknown target was missing)"
        );
        return Ok(());
    }
    let jobs: Vec<_> = all
        .iter()
        .map(|&(file, bytes)| {
            let announced = offload
                .then(|| runtime.loading_default(bytes).ok())
                .flatten();
            (file, bytes, announced)
        })
        .collect();
    let runtime = runtime.clone();
    std::thread::Builder::new()
        .name("wazoo-builtin-recipes".into())
        .spawn(move || {
            // Compiling must not take the cores from the member's thread
            // (wasmtime is built without parallel compilation: this thread
            // is the only one compiling them): it runs in the idle class.
            crate::plugin::compile_thread_priority();
            let started = std::time::Instant::now();
            let mut loaded = 0;
            for (file, bytes, announced) in jobs {
                match runtime.load_bytes_if_absent(bytes) {
                    Ok(Some(_)) => loaded += 1,
                    Ok(None) => {
                        tracing::debug!(
                            file,
                            "built-in recipe module not loaded: one of its name is served"
                        )
                    }
                    Err(e) => tracing::warn!(file, "built-in recipe module not loaded: {e}"),
                }
                // Calls of it waiting go on now, to the module if it loaded.
                drop(announced);
            }
            tracing::info!(
                loaded,
                of = all.len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "built-in recipe modules loaded"
            );
        })
        .context("cannot start the thread loading the built-in recipes")?;
    Ok(())
}

/// Starts the metrics endpoint if zoo.cfg asks for one.
pub(crate) async fn start_metrics(cfg: &Config) -> Result<Arc<crate::metrics::Metrics>> {
    let metrics = crate::metrics::Metrics::new();
    if let Some(port) = cfg.metrics_port {
        let host = cfg
            .metrics_host
            .unwrap_or(std::net::IpAddr::from([0, 0, 0, 0]));
        let addr = SocketAddr::new(host, port);
        crate::metrics::serve(addr, Arc::clone(&metrics))
            .await
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
    }
    Ok(metrics)
}

/// How a member is wired to the machine, beside its zoo.cfg: production
/// uses the defaults; tests change them.
#[derive(Clone)]
pub struct MemberOptions {
    /// The member's clocks.
    pub clock: Clock,
    /// The log writer's queue and batches.
    pub group_commit: GroupCommitOptions,
}

impl Default for MemberOptions {
    fn default() -> Self {
        MemberOptions {
            clock: Clock::system(),
            group_commit: GroupCommitOptions::default(),
        }
    }
}

/// A running member. Dropping it does not stop it; call [`Member::shutdown`].
pub struct Member {
    pub client_addr: SocketAddr,
    events: mpsc::Sender<Event>,
    core: Option<std::thread::JoinHandle<Result<()>>>,
}

/// What joining the member's thread says about how it ended.
fn joined(r: Result<std::thread::Result<Result<()>>, tokio::task::JoinError>) -> Result<()> {
    match r {
        Ok(Ok(res)) => res,
        Ok(Err(_)) => Err(anyhow!("the member thread panicked")),
        Err(e) => Err(anyhow!("core join failed: {e}")),
    }
}

/// A member set up on its own thread: where it serves, its event channel,
/// and the core loop to run there.
pub(crate) struct Started {
    pub client_addr: SocketAddr,
    pub events: mpsc::Sender<Event>,
    pub core: std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>>>>,
}

/// Recovers, starts the log writer, binds the client port and returns the
/// core loop of a standalone member (run by [`Member::start`]).
async fn start_standalone(cfg: Config, opts: MemberOptions) -> Result<Started> {
    let MemberOptions {
        clock,
        group_commit,
    } = opts;
    let (mut server, log) = recover(&cfg, clock.now())?;
    let plugins = start_plugins(&cfg, &mut server)?;
    let log_stats = log.stats();
    let (tx, rx) = mpsc::channel::<Event>(65536);
    let plugins = watch_plugins(&cfg, plugins, tx.clone())?;
    let (durable_tx, durable_rx) = mpsc::unbounded_channel::<Event>();
    let group = GroupCommitLog::start(
        log,
        group_commit.clone(),
        durable_callback(durable_tx.clone()),
    )?;
    let listener = client_listener(cfg.client_addr(), cfg.client_port_listen_backlog)
        .with_context(|| format!("cannot listen on {}", cfg.client_addr()))?;
    let client_addr = listener.local_addr()?;
    let ctx = Arc::new(AdminContext {
        cfg: cfg.clone(),
        log_stats,
        clock: clock.clone(),
        metrics: start_metrics(&cfg).await?,
        local_reads: crate::net::local_reads::LocalReads::of(&cfg),
        plugins,
    });
    spawn_shell_tasks(false, &cfg, listener, tx.clone(), &ctx)?;
    tracing::info!(%client_addr, mode = "standalone", "wazoo serving");
    let recipe_pool =
        crate::recipe_pool::RecipePool::for_member(&cfg, ctx.plugins.as_ref(), &durable_tx)?;
    let audit = crate::audit::AuditLog::start(&cfg, clock.now().wall_ms)?;
    let driver = Driver::new(
        CoreMember::standalone(server),
        cfg,
        clock,
        group,
        durable_tx,
        group_commit,
        audit,
        recipe_pool,
    );
    Ok(Started {
        client_addr,
        events: tx,
        core: Box::pin(driver.run(rx, durable_rx, ctx)),
    })
}

impl Member {
    /// Recovers, binds the client port and starts serving: standalone, or
    /// as one member of the ensemble the config's `server.N` lines describe.
    ///
    /// The member runs on a thread of its own, in a single-threaded tokio
    /// runtime that holds its core loop and every one of its sockets
    /// (clients, quorum links, metrics): a request crosses no thread
    /// between the socket and the core, only to the log writer and back.
    /// On a small machine the wake-ups between threads, not CPU, bounded
    /// replicated writes (docs/ARCHITECTURE.md, "Threads").
    pub async fn start(cfg: Config) -> Result<Member> {
        Member::start_with(cfg, MemberOptions::default()).await
    }

    /// [`Member::start`] wired as `opts` says (a test steps the wall clock
    /// of an in-process member, or slows its log writer, this way).
    pub async fn start_with(cfg: Config, opts: MemberOptions) -> Result<Member> {
        let name = match cfg.my_id {
            Some(id) if cfg.is_ensemble() => format!("wazoo-member-{id}"),
            _ => "wazoo-member".to_string(),
        };
        let audit_path = crate::audit::audit_path(&cfg);
        let (ready_tx, ready_rx) = oneshot::channel::<Result<(SocketAddr, mpsc::Sender<Event>)>>();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || -> Result<()> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the member's runtime")?;
                // The core loop does a recipe call's upkeep after the
                // replies of its batch are written (Driver::run_inner).
                crate::plugin::defer_call_upkeep();
                rt.block_on(async move {
                    let started = if cfg.peers_zookeeper {
                        crate::zk_observer::start(cfg, opts).await
                    } else if cfg.is_ensemble() {
                        crate::ensemble_member::start(cfg, opts).await
                    } else {
                        start_standalone(cfg, opts).await
                    };
                    match started {
                        Err(e) => {
                            if let Some(path) = &audit_path {
                                crate::audit::start_failed(path);
                            }
                            let _ = ready_tx.send(Err(e));
                            Ok(())
                        }
                        Ok(st) => {
                            let _ = ready_tx.send(Ok((st.client_addr, st.events)));
                            st.core.await
                        }
                    }
                })
            })?;
        match ready_rx.await {
            Ok(Ok((client_addr, events))) => Ok(Member {
                client_addr,
                events,
                core: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = tokio::task::spawn_blocking(move || thread.join()).await;
                Err(e)
            }
            // The thread ended before it reported.
            Err(_) => joined(tokio::task::spawn_blocking(move || thread.join()).await)
                .and_then(|()| Err(anyhow!("the member stopped while starting"))),
        }
    }

    /// Runs until the core stops (log failure) or `shutdown` resolves.
    pub async fn run_until(
        mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<()> {
        let core = self.core.take().expect("member thread handle");
        let waiter = tokio::task::spawn_blocking(move || core.join());
        tokio::pin!(waiter);
        tokio::select! {
            r = &mut waiter => return joined(r),
            _ = shutdown => {}
        }
        let _ = self.events.send(Event::Shutdown).await;
        joined(waiter.await)
    }
}

/// The tokio side of a member: the client listeners, the AdminServer,
/// ticks and autopurge. `in_ensemble`: the member is one of an ensemble
/// (not standalone).
pub(crate) fn spawn_shell_tasks(
    in_ensemble: bool,
    cfg: &Config,
    listener: tokio::net::TcpListener,
    tx: mpsc::Sender<Event>,
    ctx: &AdminContext,
) -> Result<()> {
    let secure = crate::tls::bind_secure_client_port(cfg)?;
    let metrics = Arc::clone(&ctx.metrics);
    let local_reads = ctx.local_reads.clone();
    crate::net::spawn_accept_loops(
        listener,
        secure,
        tx.clone(),
        Arc::new(cfg.clone()),
        metrics,
        local_reads,
    )
    .context("cannot start the client I/O threads (wazoo.client.ioThreads)")?;
    if let Some(admin) = &cfg.admin {
        let tls = match admin.tls {
            crate::config::AdminTls::Off => None,
            mode => Some(crate::http::Tls {
                config: crate::tls::admin_server_config(cfg, admin.need_client_auth)?,
                unified: mode == crate::config::AdminTls::Unified,
            }),
        };
        let started = crate::admin::server::start(admin, tls, snap_dir(cfg), tx.clone());
        match started {
            Ok(_) => {}
            // As ZooKeeper's QuorumPeer: a member of an ensemble serves
            // without it ("Problem starting AdminServer"); a standalone
            // server does not start ("Unable to start AdminServer").
            Err(e) if in_ensemble => {
                tracing::warn!("problem starting the AdminServer, serving without it: {e:#}")
            }
            Err(e) => return Err(e),
        }
    }
    let tick_tx = tx.clone();
    // At least every half tick (ZooKeeper's timers) and often enough for
    // the leader's heartbeats, `zab::Config::heartbeat_ms` (84 ms at the
    // default tickTime), on which its lease rests.
    let tick = Duration::from_millis((cfg.tick_time_ms as u64 / 2).clamp(10, 50));
    tokio::spawn(async move {
        let mut iv = tokio::time::interval(tick);
        loop {
            iv.tick().await;
            if tick_tx.send(Event::Input(Input::Tick)).await.is_err() {
                return;
            }
        }
    });
    if cfg.purge_interval_hours > 0 {
        let (sd, ld, keep) = (snap_dir(cfg), log_dir(cfg), cfg.snap_retain_count as usize);
        let every = Duration::from_secs(cfg.purge_interval_hours as u64 * 3600);
        tokio::spawn(async move {
            let mut iv = tokio::time::interval(every);
            loop {
                iv.tick().await;
                let (sd, ld) = (sd.clone(), ld.clone());
                let r =
                    tokio::task::spawn_blocking(move || wazoo_storage::purge(&sd, &ld, keep)).await;
                match r {
                    Ok(Ok(rep)) => tracing::info!(
                        "autopurge: removed {} snapshot(s) and {} log segment(s); oldest snapshot kept: {}",
                        rep.removed_snapshots.len(),
                        rep.removed_segments.len(),
                        rep.oldest_kept_snapshot
                            .map_or_else(|| "none (too few to purge)".to_string(), |z| format!("0x{z:x}"))
                    ),
                    Ok(Err(e)) => tracing::warn!("autopurge failed: {e}"),
                    Err(e) => tracing::warn!("autopurge task failed: {e}"),
                }
            }
        });
    }
    Ok(())
}
