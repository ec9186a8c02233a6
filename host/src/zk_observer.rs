//! `wazoo.peers=zookeeper`: a member that observes a running Apache
//! ZooKeeper 3.8 ensemble (docs/MIGRATION.md, "Live migration"). The
//! learner's logic is the core's (`member/zk.rs`); here is its I/O:
//!
//! - **finding the leader** on the election port, as ZooKeeper's observer
//!   does in `FastLeaderElection`: it sends each voter its notification
//!   (state OBSERVING) and each voter answers a non-voter with its current
//!   vote. The leader is the one a quorum of voters follow or lead under,
//!   and that says it leads. A voter with a higher id closes the
//!   connection and connects back (`QuorumCnxManager`'s rule), so the
//!   member listens on its own election address too;
//! - **the link to the leader's quorum port**: QuorumPackets both ways,
//!   and the snapshot that follows SNAP outside any packet, read here,
//!   bounded, and converted to wazoo's tree as `wazoo import` converts
//!   ZooKeeper's.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

mod participant;

use participant::{participant_loop, VoteHub};

use crate::config::Config;
use crate::core::member::{Member as CoreMember, ZkInput, ZkObserverStart};
use crate::driver::{durable_callback, read_epoch, Driver};
use crate::member::{AdminContext, Event, MemberOptions, Started};
use wazoo_storage::zookeeper::{parse_sync_snapshot, SyncSnapshot, ZkSnapshot, ZkTree};
use wazoo_storage::GroupCommitLog;
use wazoo_zkquorum::{
    election::{decode_frame, encode_frame},
    InitialMessage, Limits, Notification, PeerState, QuorumPacket,
};

/// What the member asks of its link to the leader.
#[derive(Debug)]
pub(crate) enum ZkCmd {
    Send(Vec<u8>),
    Close,
    /// The ensemble's membership changed (`/zookeeper/config`'s text).
    Membership(Vec<u8>),
    /// A participant: a notification for member `to`'s election port.
    Vote {
        to: u64,
        n: Notification,
    },
    /// A participant: connect to the elected leader's quorum port.
    Follow {
        leader: u64,
    },
}

/// Bytes of packets for the leader queued at most: a leader that stops
/// reading must not make this member's memory grow with every request
/// forwarded and every PING answered. Past it the link is dropped.
const QUEUED_TO_LEADER_MAX: usize = 64 << 20;

/// How long one packet's write to the leader may take.
const LEADER_WRITE_WAIT: Duration = Duration::from_secs(15);

/// The member's side of the link to the leader: commands in order, and
/// the bytes queued, bounded.
pub(crate) struct ZkLink {
    cmds: mpsc::UnboundedSender<ZkCmd>,
    queue: Arc<Queued>,
}

#[derive(Default)]
struct Queued {
    bytes: AtomicUsize,
    /// Set when a packet did not fit: the link ends after the write in
    /// progress, and the leader is found again.
    overflowed: AtomicBool,
}

impl ZkLink {
    pub(crate) fn send(&self, cmd: ZkCmd) {
        if let ZkCmd::Send(b) = &cmd {
            let queued = self.queue.bytes.load(Ordering::Acquire);
            if queued + b.len() > QUEUED_TO_LEADER_MAX {
                if !self.queue.overflowed.swap(true, Ordering::AcqRel) {
                    tracing::warn!(queued, "the ZooKeeper leader does not take what this member sends: dropping the link");
                }
                return;
            }
            self.queue.bytes.fetch_add(b.len(), Ordering::AcqRel);
        }
        let _ = self.cmds.send(cmd);
    }
}

/// The largest snapshot a leader may send after SNAP: the tree is held in
/// memory whole, and a leader (or an impostor on its port) must not make
/// this member grow without bound.
const MAX_SYNC_SNAPSHOT: usize = 4 << 30;

/// Election connections from voters served at once.
const VOTER_CONNECTIONS_MAX: usize = 32;

/// Votes held between rounds at most; more are dropped (a round asks
/// again).
const VOTES_HELD_MAX: usize = 1024;

/// How long one round of asking the voters for their votes waits.
const VOTE_ROUND: Duration = Duration::from_secs(2);

/// How long a learner waits before dialing again an elected leader that
/// refused it (ZooKeeper's `leaderConnectDelayDuringRetryMs`).
const LEADER_REDIAL: Duration = Duration::from_millis(100);

/// What the shell needs of the ZooKeeper ensemble's layout.
#[derive(Clone)]
struct Layout {
    my_id: u64,
    my_election: SocketAddr,
    /// Voters: id -> (election address, quorum address).
    voters: BTreeMap<u64, (SocketAddr, SocketAddr)>,
    /// How their votes make a quorum (`group.N`, `weight.N`).
    rule: wazoo_zab::QuorumRule,
}

impl Layout {
    /// Takes the voters of a membership the leader sent or committed
    /// (`/zookeeper/config`'s text); one that does not read, or leaves no
    /// voter whose addresses resolve, changes nothing.
    fn adopt(&mut self, text: &[u8]) {
        let parsed = std::str::from_utf8(text)
            .map_err(|e| e.to_string())
            .and_then(crate::core::quorum_config::QuorumConfig::parse);
        let c = match parsed {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("the ZooKeeper ensemble's membership does not read: {e}");
                return;
            }
        };
        let mut voters = BTreeMap::new();
        for (id, s) in c.servers.iter().filter(|(_, s)| !s.observer) {
            match addresses(&s.addrs[0]) {
                Ok(pair) => {
                    voters.insert(*id, pair);
                }
                Err(e) => tracing::warn!(id, "a voter's address: {e:#}"),
            }
        }
        if voters.is_empty() {
            return;
        }
        match c.quorum_rule() {
            Ok(rule) => self.rule = rule,
            Err(e) => {
                tracing::warn!("the ZooKeeper ensemble's groups and weights do not read: {e}");
                return;
            }
        }
        if voters != self.voters {
            tracing::info!(voters = ?voters.keys().collect::<Vec<_>>(), "the ZooKeeper ensemble's voters");
            self.voters = voters;
        }
    }
}

use crate::ensemble_member::resolve;

/// A member's (election, quorum) addresses. Every member has exactly one
/// pair here (`check_supported`); a membership the leader sends with more
/// is read by its first.
fn addresses(a: &crate::core::quorum_config::MemberAddr) -> Result<(SocketAddr, SocketAddr)> {
    Ok((
        resolve(&a.host, a.election_port)?,
        resolve(&a.host, a.quorum_port)?,
    ))
}

/// Refuses, by name, what this member cannot do beside ZooKeeper yet.
fn check_supported(cfg: &Config, my_id: u64) -> Result<()> {
    cfg.warn_peer_type_mismatch(my_id);
    if !cfg.servers.iter().any(|s| s.id == my_id) {
        bail!("myid is {my_id} but zoo.cfg has no server.{my_id} line");
    }
    if cfg.tls.ssl_quorum {
        bail!(
            "wazoo.peers=zookeeper: sslQuorum=true is not supported yet beside ZooKeeper members"
        );
    }
    if cfg.local_sessions_enabled {
        bail!("wazoo.peers=zookeeper: localSessionsEnabled=true is not supported yet beside ZooKeeper members");
    }
    if cfg.servers.iter().any(|s| s.addrs.len() > 1) {
        bail!("wazoo.peers=zookeeper: several addresses per member (multiAddress) are not supported yet beside ZooKeeper members");
    }
    if cfg.oracle_path.is_some() {
        bail!("wazoo.peers=zookeeper: oraclePath (the oracle of a two-voter ensemble) is not supported yet beside ZooKeeper members");
    }
    if cfg.observer_master_port.is_some() {
        bail!("wazoo.peers=zookeeper: observerMasterPort (observers that sync from a ZooKeeper follower) is not supported yet beside ZooKeeper members; this member syncs from the leader");
    }
    Ok(())
}

fn layout(cfg: &Config, my_id: u64) -> Result<Layout> {
    let me = cfg
        .servers
        .iter()
        .find(|s| s.id == my_id)
        .expect("checked by check_supported");
    let mut voters = BTreeMap::new();
    for s in cfg.servers.iter().filter(|s| !s.observer) {
        voters.insert(s.id, addresses(&s.addrs[0])?);
    }
    if voters.is_empty() {
        bail!("wazoo.peers=zookeeper: zoo.cfg names no voting ZooKeeper member to observe");
    }
    let rule = cfg
        .quorum_config()
        .quorum_rule()
        .map_err(|e| anyhow!("hierarchical quorums (group.N, weight.N): {e}"))?;
    Ok(Layout {
        my_id,
        my_election: addresses(&me.addrs[0])?.0,
        voters,
        rule,
    })
}

/// Starts an observer of the ZooKeeper ensemble `cfg` describes.
pub(crate) async fn start(cfg: Config, opts: MemberOptions) -> Result<Started> {
    let MemberOptions {
        clock,
        group_commit,
    } = opts;
    let my_id = cfg.my_id.ok_or_else(|| {
        anyhow!(
            "{}/myid is missing: an observer of a ZooKeeper ensemble needs its id",
            cfg.data_dir.display()
        )
    })?;
    check_supported(&cfg, my_id)?;
    let layout = layout(&cfg, my_id)?;
    // The state its snapshot and log left (`server_config` gives it
    // ZooKeeper's passwords, `peers_zookeeper`), and the epochs.
    let (server, log) = crate::member::recover(&cfg, clock.now())?;
    let sdir = crate::member::snap_dir(&cfg);
    let participant = layout.voters.contains_key(&my_id);
    let start = ZkObserverStart {
        my_id,
        accepted_epoch: read_epoch(&sdir, "acceptedEpoch")?,
        current_epoch: read_epoch(&sdir, "currentEpoch")?,
        voters: participant.then(|| (layout.voters.keys().copied().collect(), layout.rule.clone())),
    };
    let log_stats = log.stats();
    let (tx, rx) = mpsc::channel::<Event>(65536);
    let (durable_tx, durable_rx) = mpsc::unbounded_channel::<Event>();
    let group = GroupCommitLog::start(
        log,
        group_commit.clone(),
        durable_callback(durable_tx.clone()),
    )?;
    let election = TcpListener::bind(layout.my_election)
        .await
        .with_context(|| {
            format!(
                "cannot listen on the election address {}",
                layout.my_election
            )
        })?;
    let (zk_tx, zk_rx) = mpsc::unbounded_channel::<ZkCmd>();
    let queue = Arc::new(Queued::default());
    if participant {
        tokio::spawn(participant_loop(
            layout,
            election,
            zk_rx,
            Arc::clone(&queue),
            tx.clone(),
        ));
    } else {
        tokio::spawn(link_loop(
            layout,
            election,
            zk_rx,
            Arc::clone(&queue),
            tx.clone(),
        ));
    }

    let me = cfg
        .servers
        .iter()
        .find(|s| s.id == my_id)
        .expect("checked by check_supported");
    let (listener, client_addr) = crate::ensemble_member::member_client_listener(&cfg, me)?;
    let ctx = Arc::new(AdminContext {
        cfg: cfg.clone(),
        log_stats,
        clock: clock.clone(),
        metrics: crate::member::start_metrics(&cfg).await?,
        local_reads: crate::net::local_reads::LocalReads::of(&cfg),
        plugins: None,
    });
    let audit = crate::audit::AuditLog::start(&cfg, clock.now().wall_ms)?;
    let mut driver = Driver::new(
        CoreMember::zookeeper_observer(server, start),
        cfg.clone(),
        clock,
        group,
        durable_tx,
        group_commit,
        audit,
        None,
    );
    driver.zk = Some(ZkLink { cmds: zk_tx, queue });
    let core = driver.run(rx, durable_rx, Arc::clone(&ctx));
    crate::member::spawn_shell_tasks(true, &cfg, listener, tx.clone(), &ctx)?;
    let role = if participant {
        "participant"
    } else {
        "observer"
    };
    tracing::info!(%client_addr, my_id, "wazoo {role} of a ZooKeeper ensemble started (looking for its leader)");
    Ok(Started {
        client_addr,
        events: tx,
        core: Box::pin(core),
    })
}

/// Finds the leader, follows it until the link ends, and again, until the
/// member stops.
async fn link_loop(
    mut layout: Layout,
    election: TcpListener,
    mut cmds: mpsc::UnboundedReceiver<ZkCmd>,
    queue: Arc<Queued>,
    events: mpsc::Sender<Event>,
) {
    let (votes_tx, mut votes) = mpsc::channel::<(u64, Notification)>(VOTES_HELD_MAX);
    tokio::spawn(accept_voters(election, votes_tx.clone()));
    loop {
        if events.is_closed() {
            return;
        }
        let Some(leader) = find_leader(&layout, &votes_tx, &mut votes).await else {
            continue;
        };
        let Some(&(_, quorum_addr)) = layout.voters.get(&leader) else {
            continue;
        };
        // What the member asked of the last link is stale now, but for a
        // membership it learned.
        while let Ok(cmd) = cmds.try_recv() {
            match cmd {
                ZkCmd::Membership(text) => layout.adopt(&text),
                ZkCmd::Send(b) => {
                    queue.bytes.fetch_sub(b.len(), Ordering::AcqRel);
                }
                ZkCmd::Close | ZkCmd::Vote { .. } | ZkCmd::Follow { .. } => {}
            }
        }
        queue.overflowed.store(false, Ordering::Release);
        let link = Link {
            cmds: &mut cmds,
            queue: &queue,
            events: &events,
            layout: &mut layout,
            hub: None,
        };
        match link.run(leader, quorum_addr, VOTE_ROUND).await {
            Err(Stopping) => return,
            Ok(true) => {
                if events.send(Event::Zk(ZkInput::Down)).await.is_err() {
                    return;
                }
            }
            Ok(false) => {}
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The member is stopping.
struct Stopping;

/// What following a leader uses of its loop's state.
struct Link<'a> {
    cmds: &'a mut mpsc::UnboundedReceiver<ZkCmd>,
    queue: &'a Queued,
    events: &'a mpsc::Sender<Event>,
    layout: &'a mut Layout,
    hub: Option<&'a VoteHub>,
}

impl Link<'_> {
    /// Connects to `leader`'s quorum port (within `wait`), tells the core,
    /// and follows it until the link ends. `Ok(false)`: it could not be
    /// reached.
    ///
    async fn run(
        self,
        leader: u64,
        quorum_addr: SocketAddr,
        wait: Duration,
    ) -> std::result::Result<bool, Stopping> {
        match dial_leader(quorum_addr, wait).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                tracing::info!(leader, %quorum_addr, "connected to the ZooKeeper leader");
                let connected = Event::Zk(ZkInput::Connected { leader });
                self.events.send(connected).await.map_err(|_| Stopping)?;
                let (cmds, queue, events, layout) =
                    (self.cmds, self.queue, self.events, self.layout);
                if let Err(e) = follow(stream, cmds, queue, events, layout, self.hub).await {
                    tracing::warn!(leader, "the link to the ZooKeeper leader ended: {e:#}");
                }
                Ok(true)
            }
            Ok(Err(e)) => {
                tracing::info!(leader, %quorum_addr, "cannot reach the ZooKeeper leader: {e}");
                Ok(false)
            }
            Err(_) => {
                tracing::info!(leader, %quorum_addr, "the ZooKeeper leader did not take a connection within {wait:?}");
                Ok(false)
            }
        }
    }
}

/// Dials an elected leader's quorum port, within `wait`. A refused dial
/// is tried again every `LEADER_REDIAL`, as ZooKeeper's learner does
/// (`connectToLeader`): the elected member opens its quorum port only
/// once its own election has settled, which may be a little after this
/// member's. Without that, this member would go back to electing, and
/// the leader, short of followers, would give up too.
async fn dial_leader(
    addr: SocketAddr,
    wait: Duration,
) -> std::result::Result<std::io::Result<TcpStream>, tokio::time::error::Elapsed> {
    let dial = async {
        loop {
            match TcpStream::connect(addr).await {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    tokio::time::sleep(LEADER_REDIAL).await;
                }
                done => return done,
            }
        }
    };
    tokio::time::timeout(wait, dial).await
}

/// This member's notification: an observer's, which proposes no one
/// (ZooKeeper's `Long.MIN_VALUE`s), in the 40-byte form that carries no
/// config for the voter to read.
fn my_notification() -> Notification {
    Notification {
        state: PeerState::Observing,
        leader: i64::MIN,
        zxid: i64::MIN,
        election_epoch: 1,
        peer_epoch: Some(i64::MIN),
        version: None,
        config: None,
    }
}

/// Reads framed notifications from `rd` (after `buf`, bytes already read)
/// and hands each to `on` until the connection ends, a frame is bad, `on`
/// says stop, or `until` passes.
async fn read_votes<R, F, Fut>(
    mut rd: R,
    mut buf: Vec<u8>,
    sid: u64,
    until: Option<tokio::time::Instant>,
    mut on: F,
) where
    R: tokio::io::AsyncRead + Unpin,
    F: FnMut(Notification) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let limits = Limits::default();
    let mut chunk = [0u8; 4096];
    loop {
        loop {
            match decode_frame(&buf, &limits) {
                Ok(Some((payload, used))) => {
                    match Notification::decode(payload) {
                        Ok(v) => {
                            if !on(v).await {
                                return;
                            }
                        }
                        Err(e) => tracing::debug!(sid, "an undecodable notification: {e}"),
                    }
                    buf.drain(..used);
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(sid, "a bad election frame: {e}");
                    return;
                }
            }
        }
        let read = match until {
            Some(t) => match tokio::time::timeout_at(t, rd.read(&mut chunk)).await {
                Ok(r) => r,
                Err(_) => return,
            },
            None => rd.read(&mut chunk).await,
        };
        match read {
            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => return,
        }
    }
}

/// Sends this member's notification on an election connection and reads
/// the votes that come back until `until`.
async fn exchange(
    mut s: TcpStream,
    sid: u64,
    votes: mpsc::Sender<(u64, Notification)>,
    read_ahead: Vec<u8>,
    until: tokio::time::Instant,
) {
    if s.write_all(&encode_frame(&my_notification().encode()))
        .await
        .is_err()
    {
        return;
    }
    read_votes(s, read_ahead, sid, Some(until), |v| {
        let _ = votes.try_send((sid, v));
        std::future::ready(true)
    })
    .await;
}

/// Accepts connections on this member's election address, at most
/// [`VOTER_CONNECTIONS_MAX`] served at once (more are dropped), and hands
/// each, once its handshake came within `handshake`, to `serve` with the
/// sender's id and the bytes read after the handshake. Stops once
/// `stopped` says so.
async fn accept_election<F, Fut>(
    listener: TcpListener,
    handshake: Duration,
    stopped: impl Fn() -> bool,
    serve: F,
) where
    F: Fn(TcpStream, u64, Vec<u8>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let serve = Arc::new(serve);
    let slots = Arc::new(tokio::sync::Semaphore::new(VOTER_CONNECTIONS_MAX));
    loop {
        let (s, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors, say: wait rather than spin.
                tracing::warn!("accepting on the election address: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        if stopped() {
            return;
        }
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            continue;
        };
        let deadline = tokio::time::Instant::now() + handshake;
        let serve = Arc::clone(&serve);
        // The handshake is read on a task of its own, then served there.
        tokio::spawn(async move {
            let _slot = slot;
            if let Some((s, sid, rest)) = read_hello(s, deadline).await {
                serve(s, sid, rest).await;
            }
        });
    }
}

/// The connection handshake of an accepted election connection, bounded
/// in time and size: the sender's id and the bytes read after it. `None`:
/// the connection is dropped.
async fn read_hello(
    mut s: TcpStream,
    deadline: tokio::time::Instant,
) -> Option<(TcpStream, u64, Vec<u8>)> {
    let limits = Limits::default();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        let n = match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => return None,
        };
        buf.extend_from_slice(&chunk[..n]);
        match InitialMessage::decode(&buf, &limits) {
            Ok(Some((m, used))) => {
                let sid = u64::try_from(m.sid).ok()?;
                return Some((s, sid, buf.split_off(used)));
            }
            Ok(None) if buf.len() < 4096 => continue,
            _ => return None,
        }
    }
}

/// Voters that connect back to this member (their id is higher).
async fn accept_voters(listener: TcpListener, votes: mpsc::Sender<(u64, Notification)>) {
    let closed = votes.clone();
    accept_election(
        listener,
        VOTE_ROUND,
        move || closed.is_closed(),
        move |s, sid, rest| {
            // Any id: only the voters of the membership current when the
            // votes are counted count (`zk_leader_of`). A voter's
            // connection stays for as long as it sends; one round's worth
            // is read at a time.
            let until = tokio::time::Instant::now() + VOTE_ROUND * 5;
            exchange(s, sid, votes.clone(), rest, until)
        },
    )
    .await
}

/// One round of asking every voter; the leader once known.
async fn find_leader(
    layout: &Layout,
    votes_tx: &mpsc::Sender<(u64, Notification)>,
    votes: &mut mpsc::Receiver<(u64, Notification)>,
) -> Option<u64> {
    // Votes from before this round may name a leader that is gone.
    while votes.try_recv().is_ok() {}
    let until = tokio::time::Instant::now() + VOTE_ROUND;
    for (&sid, &(addr, _)) in &layout.voters {
        let hello = InitialMessage::new(layout.my_id as i64, layout.my_election.to_string());
        let tx = votes_tx.clone();
        tokio::spawn(async move {
            let Ok(Ok(mut s)) = tokio::time::timeout_at(until, TcpStream::connect(addr)).await
            else {
                return;
            };
            if s.write_all(&hello.encode()).await.is_err() {
                return;
            }
            exchange(s, sid, tx, Vec::new(), until).await;
        });
    }
    let voters: Vec<u64> = layout.voters.keys().copied().collect();
    let mut seen = BTreeMap::new();
    loop {
        match tokio::time::timeout_at(until, votes.recv()).await {
            Ok(Some((sid, v))) => {
                seen.insert(sid, v);
                if let Some(l) = crate::core::member::zk_leader_of(&voters, &layout.rule, &seen) {
                    return Some(l);
                }
            }
            Ok(None) => return None,
            Err(_) => {
                tracing::debug!(answered = seen.len(), "no ZooKeeper leader agreed on yet");
                return None;
            }
        }
    }
}

/// Carries packets between the leader and the member until the link ends
/// or the member closes it.
async fn follow(
    stream: TcpStream,
    cmds: &mut mpsc::UnboundedReceiver<ZkCmd>,
    queue: &Queued,
    events: &mpsc::Sender<Event>,
    layout: &mut Layout,
    hub: Option<&VoteHub>,
) -> Result<()> {
    let limits = Limits::default();
    let (mut rd, mut wr) = stream.into_split();
    let mut buf: Vec<u8> = Vec::with_capacity(64 << 10);
    // After SNAP: when to try to read the snapshot from `buf` next.
    let mut snapshot_try: Option<SnapshotTries> = None;
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        if queue.overflowed.load(Ordering::Acquire) {
            bail!("the leader took too little of what this member sends (over {QUEUED_TO_LEADER_MAX} bytes queued)");
        }
        let wait = if snapshot_try.is_some() {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(3600)
        };
        tokio::select! {
            cmd = cmds.recv() => match cmd {
                Some(ZkCmd::Send(b)) => {
                    let written = tokio::time::timeout(LEADER_WRITE_WAIT, wr.write_all(&b)).await;
                    queue.bytes.fetch_sub(b.len(), Ordering::AcqRel);
                    match written {
                        Ok(r) => r.context("write to the leader")?,
                        Err(_) => bail!("the leader took nothing for {LEADER_WRITE_WAIT:?}"),
                    }
                }
                Some(ZkCmd::Membership(text)) => {
                    layout.adopt(&text);
                    if let Some(h) = hub {
                        h.set_layout(layout);
                    }
                }
                Some(ZkCmd::Vote { to, n }) => {
                    if let Some(h) = hub {
                        h.send(to, &n);
                    }
                }
                // Already following.
                Some(ZkCmd::Follow { .. }) => {}
                Some(ZkCmd::Close) | None => return Ok(()),
            },
            read = tokio::time::timeout(wait, rd.read(&mut chunk)) => {
                let paused = match read {
                    Ok(Ok(0)) => bail!("the leader closed the connection"),
                    Ok(Ok(n)) => { buf.extend_from_slice(&chunk[..n]); false }
                    Ok(Err(e)) => return Err(e).context("read from the leader"),
                    Err(_) => true,
                };
                loop {
                    if let Some(tries) = &mut snapshot_try {
                        if buf.len() > MAX_SYNC_SNAPSHOT {
                            bail!("the snapshot after SNAP is larger than {MAX_SYNC_SNAPSHOT} bytes");
                        }
                        let now = std::time::Instant::now();
                        if !tries.due(buf.len(), paused, now) {
                            break;
                        }
                        match parse_sync_snapshot(&buf) {
                            Ok(Some((snap, used))) => {
                                buf.drain(..used);
                                snapshot_try = None;
                                let input = convert_snapshot(snap)?;
                                events.send(Event::Zk(input)).await.map_err(|_| anyhow!("stopping"))?;
                            }
                            Ok(None) => {
                                tries.tried(buf.len(), now, std::time::Instant::now());
                                break;
                            }
                            Err(e) => bail!("the snapshot after SNAP does not read: {e}"),
                        }
                        continue;
                    }
                    match QuorumPacket::decode(&buf, &limits) {
                        Ok(Some((p, used))) => {
                            buf.drain(..used);
                            if p.kind == wazoo_zkquorum::kind::SNAP {
                                snapshot_try = Some(SnapshotTries::default());
                            }
                            events.send(Event::Zk(ZkInput::Packet(p))).await.map_err(|_| anyhow!("stopping"))?;
                        }
                        Ok(None) => break,
                        Err(e) => bail!("a bad packet from the leader: {e}"),
                    }
                }
            }
        }
    }
}

/// When to try to read the snapshot that follows SNAP from the bytes
/// received so far. Each try reads from the start, so not at every read:
/// once the bytes have doubled since the last try (a large snapshot is
/// read a few times, not once per read), once the stream pauses (the
/// leader sent the snapshot and NEWLEADER and waits for the ACK), or once
/// twice as long as the last try took has passed (at least 250 ms): a
/// ZooKeeper leader sends the txns committed meanwhile right after
/// NEWLEADER, before the ACK, so on a busy ensemble the stream never
/// pauses and a snapshot that ends short of the doubled size would wait
/// for bytes that come only after the ACK, until initLimit ran out.
#[derive(Debug, Default)]
struct SnapshotTries {
    /// The size at the last try, if any.
    tried_len: Option<usize>,
    /// When the last try started and how long it took.
    last: Option<(std::time::Instant, Duration)>,
}

impl SnapshotTries {
    const MIN_INTERVAL: Duration = Duration::from_millis(250);

    /// Whether to try with `len` bytes now; `paused`: nothing came for a
    /// while.
    fn due(&self, len: usize, paused: bool, now: std::time::Instant) -> bool {
        let Some(tried) = self.tried_len else {
            return true;
        };
        if len == tried {
            return false;
        }
        let waited = self.last.is_some_and(|(at, took)| {
            now.saturating_duration_since(at) >= (took * 2).max(Self::MIN_INTERVAL)
        });
        paused || waited || len >= (tried * 2).max(64 << 10)
    }

    /// A try that started at `started` with `len` bytes found them short.
    fn tried(&mut self, len: usize, started: std::time::Instant, ended: std::time::Instant) {
        self.tried_len = Some(len);
        self.last = Some((started, ended.saturating_duration_since(started)));
    }
}

/// The leader's snapshot as wazoo's tree and session table.
fn convert_snapshot(snap: SyncSnapshot) -> Result<ZkInput> {
    let file = ZkSnapshot {
        dbid: 0,
        sessions: snap.sessions,
        acls: snap.acls,
        nodes: snap.nodes,
        digest: None,
        last_processed_zxid: None,
    };
    let zk = ZkTree::from_snapshot(&file, 0).map_err(|e| anyhow!("the leader's snapshot: {e}"))?;
    let tree = crate::import::convert(&zk)?;
    let sessions = crate::import::sessions_of(&zk);
    Ok(ZkInput::Snapshot {
        tree: Box::new(tree),
        sessions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // ZooKeeper Internals, "Leader Activation": a learner connects to the
    // leader it elected, which opens its quorum port only once its own
    // election has settled. A refused dial is tried again until the port
    // opens; a port that never opens is given up within the wait.
    #[tokio::test]
    async fn a_learner_dials_again_a_leader_that_opens_its_port_late() {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let t0 = tokio::time::Instant::now();
        let late = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(350)).await;
            let l = tokio::net::TcpListener::bind(addr).await.unwrap();
            l.accept().await.map(|_| ())
        });
        let dialed = dial_leader(addr, Duration::from_secs(10)).await;
        assert!(
            matches!(dialed, Ok(Ok(_))),
            "a leader that opens its port after 350 ms is reached: {dialed:?}"
        );
        assert!(
            t0.elapsed() >= Duration::from_millis(300),
            "not before it opened"
        );
        late.await.unwrap().unwrap();

        let t0 = tokio::time::Instant::now();
        let never = dial_leader(addr, Duration::from_millis(500)).await;
        assert!(never.is_err(), "a port that stays closed: {never:?}");
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "given up within the wait"
        );
    }

    // ZooKeeper Internals, "Atomic Broadcast": after SNAP the leader sends
    // the snapshot, NEWLEADER and, on a busy ensemble, the txns committed
    // meanwhile, before it has the ACK. A snapshot is read when the bytes
    // double, when the stream pauses, or, while bytes keep trickling in,
    // at most twice as long after the last try as that try took: never
    // stuck waiting for the doubled size.
    #[test]
    fn a_snapshot_is_read_even_while_txns_trickle_in_after_it() {
        let t0 = std::time::Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut tries = SnapshotTries::default();
        assert!(
            tries.due(10, false, t0),
            "the first bytes are tried at once"
        );
        tries.tried(1 << 20, t0, ms(400));
        assert!(!tries.due(1 << 20, true, ms(900)), "nothing new: no try");
        assert!(!tries.due((1 << 20) + 100, false, ms(500)), "too soon");
        assert!(tries.due((1 << 20) + 100, true, ms(500)), "a pause");
        assert!(tries.due(2 << 20, false, ms(500)), "doubled");
        assert!(
            tries.due((1 << 20) + 100, false, ms(800)),
            "trickling: twice the last try's time has passed"
        );
        let mut quick = SnapshotTries::default();
        quick.tried(1000, t0, ms(1));
        assert!(!quick.due(1100, false, ms(100)), "at least 250 ms apart");
        assert!(quick.due(1100, false, ms(250)));
    }

    // Administrator's Guide, "Cluster Options", observerMasterPort: a wazoo
    // member that observes a ZooKeeper ensemble syncs from the leader; it
    // refuses the key by name rather than ignore it.
    #[test]
    fn observer_master_port_is_refused_beside_zookeeper_members() {
        let base = "dataDir=/d\nwazoo.peers=zookeeper\npeerType=observer\n\
            server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\n\
            server.3=127.0.0.1:2890:3890\nserver.4=127.0.0.1:2891:3891:observer\n";
        let cfg = Config::parse(base).unwrap();
        check_supported(&cfg, 4).unwrap();
        let cfg = Config::parse(&format!("{base}observerMasterPort=2191\n")).unwrap();
        let e = format!("{:#}", check_supported(&cfg, 4).unwrap_err());
        assert!(e.contains("observerMasterPort"), "{e}");
    }
}
