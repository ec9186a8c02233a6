//! One standalone member: recovery, the core loop, the group-commit log,
//! background snapshots and purges. The I/O shell around [`crate::core`].
//!
//! Threads:
//! - the *member thread* runs a single-threaded tokio runtime: the tasks
//!   that own the sockets (see [`crate::net`]) and the *core loop*, which
//!   owns the [`Server`] state machine. It takes events from one channel
//!   (client input from the connection tasks, durability reports from the
//!   log writer, ticks, admin queries), handles a batch, then carries out
//!   the outputs in order: txns to the log, bytes to connections,
//!   snapshots to a writer thread.
//! - the *log writer* (`wazoo_storage::GroupCommitLog`) fsyncs batches and
//!   reports the durable zxid back to the core loop, which only then
//!   applies the txns and replies: persist before acknowledging.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::core::recipe::RecipeWaits;
use crate::core::server::{Input, Output, Server, ServerConfig, SnapshotJob};
use crate::core::time::Now;
use crate::core::tree::DataTree;
use crate::core::txn::TxnRecord;
use crate::core::watch::ConnId;
use wazoo_storage::{
    GroupCommitLog, GroupCommitOptions, LogOptions, LogStats, TryAppendError, TxnLog,
};

/// Bytes or a close for one connection's writer task.
#[derive(Debug)]
pub enum ConnMsg {
    Bytes { bytes: Vec<u8>, replies: u32 },
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
    /// A four-letter word to answer.
    Admin {
        word: String,
        reply: oneshot::Sender<String>,
    },
    /// A backup wants a consistent copy of the state (`crate::backup`).
    Backup {
        reply: oneshot::Sender<SnapshotJob>,
    },
    /// The log writer stopped: the member can no longer make writes durable.
    LogFailed(String),
    /// Ensemble: something from another member.
    Link(crate::quorum::LinkEvent),
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

/// The time for a batch of events: read once per 32 events rather than per
/// event (reading the clock was 1.5 % of a member's time under write load);
/// a new batch starts with a fresh reading.
pub(crate) struct BatchClock<'c> {
    clock: &'c Clock,
    now: Now,
    left: u32,
}

impl<'c> BatchClock<'c> {
    pub(crate) fn new(clock: &'c Clock) -> Self {
        BatchClock {
            clock,
            now: Now::default(),
            left: 0,
        }
    }

    pub(crate) fn now(&mut self) -> Now {
        if self.left == 0 {
            self.now = self.clock.now();
            self.left = 32;
        }
        self.left -= 1;
        self.now
    }
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
        snap_count: cfg.snap_count,
        container_check_interval_ms: cfg.container_check_interval_ms,
        container_max_per_minute: cfg.container_max_per_minute,
        reconfig_enabled: cfg.reconfig_enabled,
        read_only_enabled: cfg.read_only_enabled,
        max_recipe_waits_per_session: cfg.recipe.max_waits_per_session,
        max_buffer_bytes: cfg.max_buffer,
        max_outbound_bytes: cfg.max_outbound_bytes,
        max_unsent_reply_bytes: cfg.max_unsent_reply_bytes,
    }
}

pub fn snap_dir(cfg: &Config) -> PathBuf {
    cfg.data_dir.join(DATA_SUBDIR)
}

pub fn log_dir(cfg: &Config) -> PathBuf {
    cfg.data_log_dir.join(DATA_SUBDIR)
}

/// Serializes a snapshot payload: storage's envelope (zxid, sessions),
/// then the core's body (recipe waits, then the tree).
pub fn write_snapshot_payload(job: &SnapshotJob, w: &mut dyn Write) -> std::io::Result<()> {
    wazoo_storage::write_snapshot_envelope(job.zxid, &job.sessions, w)?;
    crate::core::snapshot::write_snapshot_body(job, w)
}

/// A snapshot read back: its zxid, the sessions, the recipe waits and the tree.
pub type LoadedSnapshot = (i64, Vec<(i64, i32)>, RecipeWaits, DataTree);

/// Reads a snapshot payload written by [`write_snapshot_payload`].
pub fn read_snapshot_payload(bytes: &[u8]) -> Result<LoadedSnapshot> {
    let envelope = wazoo_storage::read_snapshot_envelope(bytes)?;
    let (waits, tree) = crate::core::snapshot::read_snapshot_body(envelope.version, envelope.body)?;
    Ok((envelope.zxid, envelope.sessions, waits, tree))
}

/// Rebuilds the state from the newest valid snapshot plus the log after it.
pub fn recover(cfg: &Config, now: Now) -> Result<(Server, TxnLog)> {
    let sdir = snap_dir(cfg);
    let ldir = log_dir(cfg);
    std::fs::create_dir_all(&sdir)
        .with_context(|| format!("cannot create data directory {}", sdir.display()))?;
    std::fs::create_dir_all(&ldir)
        .with_context(|| format!("cannot create data log directory {}", ldir.display()))?;
    let scfg = server_config(cfg);
    let started = std::time::Instant::now();
    let (mut server, snap_zxid) = match wazoo_storage::latest_valid_snapshot(&sdir)? {
        Some((zxid, path)) => {
            let bytes = wazoo_storage::read_snapshot(&path)?;
            let (z, sessions, waits, tree) = read_snapshot_payload(&bytes)
                .with_context(|| format!("cannot load snapshot {}", path.display()))?;
            if z as u64 != zxid {
                bail!(
                    "snapshot {} holds zxid 0x{z:x}, its name says 0x{zxid:x}",
                    path.display()
                );
            }
            tracing::info!(
                zxid = format!("0x{z:x}"),
                nodes = tree.node_count(),
                "loaded snapshot"
            );
            (Server::recovered(scfg, tree, sessions, waits, z, now), zxid)
        }
        None => (Server::new(scfg, now), 0),
    };
    let (mut log, recovered) = TxnLog::open(&ldir, LogOptions::default())
        .with_context(|| format!("cannot open the transaction log in {}", ldir.display()))?;
    for r in &recovered.repairs {
        tracing::warn!("log repaired at startup: {r:?}");
    }
    if let Some(first) = recovered.first_zxid {
        if snap_zxid > 0 && first > snap_zxid + 1 {
            bail!(
                "the log starts at zxid 0x{first:x} but the newest snapshot is 0x{snap_zxid:x}: txns in between are missing"
            );
        }
        if snap_zxid == 0 && first > 1 {
            bail!("the log starts at zxid 0x{first:x} and there is no snapshot: txns before it are missing");
        }
    }
    let mut replayed = 0u64;
    for rec in log.read_from(snap_zxid)? {
        let rec = rec?;
        let txn = TxnRecord::decode(&rec.body)
            .map_err(|e| anyhow!("log record 0x{:x} does not decode: {e}", rec.zxid))?;
        if txn.header.zxid as u64 != rec.zxid {
            bail!(
                "log record 0x{:x} holds txn 0x{:x}",
                rec.zxid,
                txn.header.zxid
            );
        }
        server.replay(&txn).map_err(|e| anyhow!("{e}"))?;
        replayed += 1;
    }
    server.finish_recovery();
    tracing::info!(
        zxid = format!("0x{:x}", server.last_zxid()),
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
    /// The recipe runtime, when a plugins directory is configured.
    pub plugins: Option<Plugins>,
}

/// A member's recipe runtime and the watcher keeping it in step with the
/// plugins directory (it stops when this is dropped).
pub struct Plugins {
    pub runtime: crate::plugin::Runtime,
    _watcher: std::sync::Mutex<crate::plugin::PluginWatcher>,
}

/// Starts the recipe runtime if a plugins directory is configured: loads
/// every module in it, keeps watching it, and gives the pipeline the
/// runtime as its recipe engine.
pub(crate) fn start_plugins(cfg: &Config, server: &mut Server) -> Result<Option<Plugins>> {
    let Some(dir) = &cfg.plugins_dir else {
        return Ok(None);
    };
    if !dir.is_dir() {
        bail!("plugins directory {} does not exist", dir.display());
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
        cache_dir: Some(snap_dir(cfg).join("recipe-cache")),
        ..Default::default()
    };
    let runtime = crate::plugin::Runtime::new(rcfg).context("cannot start the recipe runtime")?;
    let (watcher, report) = runtime
        .watch_dir(dir)
        .with_context(|| format!("cannot watch plugins directory {}", dir.display()))?;
    for (path, r) in report {
        match r {
            Ok(m) => {
                tracing::info!(module = %m.name, version = %m.version, hash = %m.hash, file = %path.display(), "recipe module loaded")
            }
            Err(e) => tracing::warn!(file = %path.display(), "recipe module not loaded: {e}"),
        }
    }
    server.set_recipe_engine(Box::new(runtime.clone()));
    Ok(Some(Plugins {
        runtime,
        _watcher: std::sync::Mutex::new(watcher),
    }))
}

/// Starts the metrics endpoint if zoo.cfg asks for one.
pub(crate) async fn start_metrics(
    cfg: &Config,
    quorum_size: usize,
) -> Result<Arc<crate::metrics::Metrics>> {
    let metrics = crate::metrics::Metrics::new(quorum_size);
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

/// The group-commit callback: durability reports go to the core loop, on a
/// channel of their own that never blocks the writer. The writer thus never
/// waits for the member thread (which may be waiting for room in the
/// writer's queue: the two would deadlock); reports come at most one per
/// fsync and the core loop takes them before anything else.
pub(crate) fn durable_callback(
    tx: mpsc::UnboundedSender<Event>,
) -> impl FnMut(wazoo_storage::DurabilityReport<'_>) + Send + 'static {
    move |report| {
        let ev = match report {
            Ok(zxid) => Event::Input(Input::Durable { zxid: zxid as i64 }),
            Err(e) => Event::LogFailed(e.to_string()),
        };
        // The core may be gone at shutdown; nothing to do then.
        let _ = tx.send(ev);
    }
}

/// Records the writer's queue had no room for, beyond which the core loop
/// stops taking new events (client work) and only takes the writer's
/// reports until it is back under.
pub(crate) const LOG_BACKLOG_MAX: usize = 65536;

/// The member thread's side of the hand-off to the log writer. The member
/// never blocks on the writer's queue: a slow disk must not stop it from
/// answering reads and pings, nor deadlock it against the writer. A record
/// the queue has no room for waits here, in zxid order, and moves on when
/// the writer reports progress ([`LogFeed::pump`]).
#[derive(Default)]
pub(crate) struct LogFeed {
    backlog: std::collections::VecDeque<(u64, Vec<u8>)>,
}

impl LogFeed {
    /// Hands a record to the writer, or keeps it while the writer is behind.
    pub(crate) fn append(&mut self, log: &GroupCommitLog, zxid: u64, body: Vec<u8>) -> Result<()> {
        if self.backlog.is_empty() {
            match log.try_append(zxid, body) {
                Ok(()) => return Ok(()),
                Err(TryAppendError::Full(body)) => {
                    tracing::debug!("the log writer is behind; holding 0x{zxid:x}");
                    self.backlog.push_back((zxid, body));
                    return Ok(());
                }
                Err(TryAppendError::Refused(e)) => return Err(e.into()),
            }
        }
        self.backlog.push_back((zxid, body));
        Ok(())
    }

    /// Moves held records to the writer while its queue has room.
    pub(crate) fn pump(&mut self, log: &GroupCommitLog) -> Result<()> {
        while let Some((zxid, body)) = self.backlog.pop_front() {
            match log.try_append(zxid, body) {
                Ok(()) => {}
                Err(TryAppendError::Full(body)) => {
                    self.backlog.push_front((zxid, body));
                    break;
                }
                Err(TryAppendError::Refused(e)) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Hands every held record to the writer, waiting for room (before the
    /// writer is stopped; it never waits for this thread, so this ends).
    pub(crate) fn flush(&mut self, log: &GroupCommitLog) -> Result<()> {
        while let Some((zxid, body)) = self.backlog.pop_front() {
            log.append(zxid, body)?;
        }
        Ok(())
    }

    /// Whether the core loop should stop taking client work until the
    /// writer catches up.
    pub(crate) fn over_limit(&self) -> bool {
        self.backlog.len() >= LOG_BACKLOG_MAX
    }
}

/// The next event for a core loop: the writer's reports first; other
/// events only while the log is not too far behind. None: stop.
pub(crate) async fn next_event(
    rx: &mut mpsc::Receiver<Event>,
    durable_rx: &mut mpsc::UnboundedReceiver<Event>,
    feed: &LogFeed,
) -> Option<Event> {
    tokio::select! {
        biased;
        Some(ev) = durable_rx.recv() => Some(ev),
        ev = rx.recv(), if !feed.over_limit() => ev,
        else => None,
    }
}

/// The next event of a batch already started, without waiting.
pub(crate) fn try_next_event(
    rx: &mut mpsc::Receiver<Event>,
    durable_rx: &mut mpsc::UnboundedReceiver<Event>,
    feed: &LogFeed,
) -> Option<Event> {
    if let Ok(ev) = durable_rx.try_recv() {
        return Some(ev);
    }
    if feed.over_limit() {
        return None;
    }
    rx.try_recv().ok()
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
    let (durable_tx, durable_rx) = mpsc::unbounded_channel::<Event>();
    let group = GroupCommitLog::start(log, group_commit, durable_callback(durable_tx))?;
    let listener = tokio::net::TcpListener::bind(cfg.client_addr())
        .await
        .with_context(|| format!("cannot listen on {}", cfg.client_addr()))?;
    let client_addr = listener.local_addr()?;
    let ctx = Arc::new(AdminContext {
        cfg: cfg.clone(),
        log_stats,
        clock,
        metrics: start_metrics(&cfg, 1).await?,
        plugins,
    });
    spawn_shell_tasks(&cfg, listener, tx.clone());
    tracing::info!(%client_addr, mode = "standalone", "wazoo serving");
    Ok(Started {
        client_addr,
        events: tx,
        core: Box::pin(core_loop(server, rx, durable_rx, group, ctx, cfg)),
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
        let (ready_tx, ready_rx) = oneshot::channel::<Result<(SocketAddr, mpsc::Sender<Event>)>>();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || -> Result<()> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the member's runtime")?;
                rt.block_on(async move {
                    let started = if cfg.is_ensemble() {
                        crate::ensemble_member::start(cfg, opts).await
                    } else {
                        start_standalone(cfg, opts).await
                    };
                    match started {
                        Err(e) => {
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

/// The tokio side of a member: the client listener, ticks and autopurge.
pub(crate) fn spawn_shell_tasks(
    cfg: &Config,
    listener: tokio::net::TcpListener,
    tx: mpsc::Sender<Event>,
) {
    tokio::spawn(crate::net::accept_loop(
        listener,
        tx.clone(),
        Arc::new(cfg.clone()),
    ));
    let tick_tx = tx.clone();
    let tick = Duration::from_millis((cfg.tick_time_ms as u64 / 2).clamp(10, 200));
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
}

async fn core_loop(
    mut server: Server,
    mut rx: mpsc::Receiver<Event>,
    mut durable_rx: mpsc::UnboundedReceiver<Event>,
    log: GroupCommitLog,
    ctx: Arc<AdminContext>,
    cfg: Config,
) -> Result<()> {
    let mut conns: HashMap<ConnId, crate::net::ConnTx> = HashMap::new();
    let snapshot_busy = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut feed = LogFeed::default();
    let mut result = Ok(());
    'outer: while let Some(ev) = next_event(&mut rx, &mut durable_rx, &feed).await {
        let mut clock = BatchClock::new(&ctx.clock);
        let mut next = Some(ev);
        let mut handled = 0;
        while let Some(ev) = next.take() {
            let now = clock.now();
            match ev {
                Event::Register { conn, tx } => {
                    conns.insert(conn, tx);
                }
                Event::Input(input) => {
                    if let Input::Closed { conn } = &input {
                        conns.remove(conn);
                    }
                    server.handle(input, now);
                }
                Event::Inputs(inputs) => {
                    for input in inputs {
                        server.handle(input, now);
                    }
                }
                Event::Admin { word, reply } => {
                    crate::admin::resets_stats(&word, &mut server);
                    let text = crate::admin::four_letter(&word, &server, &ctx, conns.len(), None);
                    let _ = reply.send(text);
                }
                Event::Backup { reply } => {
                    let _ = reply.send(server.snapshot_job());
                }
                Event::LogFailed(e) => {
                    tracing::error!("the transaction log failed, stopping: {e}");
                    result = Err(anyhow!("transaction log failed: {e}"));
                    break 'outer;
                }
                Event::Shutdown => break 'outer,
                Event::Link(_) => {}
            }
            handled += 1;
            if handled < 4096 {
                next = try_next_event(&mut rx, &mut durable_rx, &feed);
            }
        }
        if let Some(why) = server.fatal() {
            tracing::error!("stopping: {why}");
            result = Err(anyhow!("stopping: {why}"));
            break 'outer;
        }
        let outputs = server.take_outputs();
        ctx.metrics.update(&mut server, conns.len(), &ctx.log_stats);
        if let Err(e) = feed.pump(&log) {
            tracing::error!("cannot append to the transaction log, stopping: {e}");
            result = Err(anyhow!("transaction log append failed: {e}"));
            break 'outer;
        }
        for out in outputs {
            match out {
                Output::Persist { zxid, record } => {
                    if let Err(e) = feed.append(&log, zxid as u64, record) {
                        tracing::error!("cannot append to the transaction log, stopping: {e}");
                        result = Err(anyhow!("transaction log append failed: {e}"));
                        break 'outer;
                    }
                }
                Output::Send {
                    conn,
                    bytes,
                    replies,
                } => {
                    if let Some(tx) = conns.get(&conn) {
                        let _ = tx.send(ConnMsg::Bytes { bytes, replies });
                    }
                }
                Output::Close { conn } => {
                    if let Some(tx) = conns.get(&conn) {
                        let _ = tx.send(ConnMsg::Close);
                    }
                }
                Output::Snapshot(job) => {
                    start_snapshot(&cfg, *job, Arc::clone(&snapshot_busy));
                }
                Output::Propose { .. } | Output::ToLeader(_) => {
                    tracing::error!("a standalone member was asked to replicate; ignoring");
                }
            }
        }
    }
    for tx in conns.values() {
        let _ = tx.send(ConnMsg::Close);
    }
    if result.is_ok() {
        if let Err(e) = feed.flush(&log) {
            tracing::warn!("closing the transaction log: {e}");
        }
    }
    if let Err(e) = log.shutdown() {
        tracing::warn!("closing the transaction log: {e}");
    }
    result
}

/// Writes a snapshot on a background thread; skipped if one is running.
fn start_snapshot(cfg: &Config, job: SnapshotJob, busy: Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::Ordering;
    if busy.swap(true, Ordering::AcqRel) {
        tracing::warn!("a snapshot is still being written; skipping this one");
        return;
    }
    let dir = snap_dir(cfg);
    let spawned = std::thread::Builder::new()
        .name("wazoo-snapshot".into())
        .spawn(move || {
            let started = std::time::Instant::now();
            let r = wazoo_storage::write_snapshot(&dir, job.zxid as u64, |w| {
                write_snapshot_payload(&job, w)
            });
            match r {
                Ok(p) => tracing::info!(
                    path = %p.display(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "snapshot written"
                ),
                Err(e) => tracing::error!("snapshot at 0x{:x} failed: {e}", job.zxid),
            }
            busy.store(false, Ordering::Release);
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the snapshot thread: {e}");
    }
}

/// Total size of the files in a directory (for `dirs`).
pub fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slow disk: the member thread hands records over without ever
    /// waiting for the writer, and the writer commits them all while the
    /// member reads none of its reports (it never waits for the member).
    #[test]
    fn a_slow_log_writer_neither_blocks_the_member_nor_waits_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = TxnLog::open(dir.path(), LogOptions::default()).unwrap();
        let (tx, mut reports) = mpsc::unbounded_channel();
        let opts = GroupCommitOptions {
            queue_capacity: 2,
            sync_delay: Some(Duration::from_millis(100)),
            ..GroupCommitOptions::default()
        };
        let group = GroupCommitLog::start(log, opts, durable_callback(tx)).unwrap();
        let mut feed = LogFeed::default();
        for zxid in 1..=40u64 {
            feed.append(&group, zxid, vec![7; 16]).unwrap();
        }
        assert!(
            !feed.backlog.is_empty(),
            "a queue of 2 behind a 100 ms fsync cannot have taken 40 records"
        );
        // The member keeps pumping as a core loop does after every batch,
        // but does not read a single report until the end.
        let deadline = Instant::now() + Duration::from_secs(60);
        while group.durable_zxid() < 40 {
            assert!(
                Instant::now() < deadline,
                "the writer stopped making progress"
            );
            feed.pump(&group).unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(feed.backlog.is_empty());
        let mut last = 0;
        while let Ok(ev) = reports.try_recv() {
            match ev {
                Event::Input(Input::Durable { zxid }) => last = zxid,
                _ => panic!("unexpected report"),
            }
        }
        assert_eq!(last, 40, "the last report covers every record");
        group.shutdown().unwrap();
    }
}
