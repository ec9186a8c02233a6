//! One member of an ensemble: the I/O shell around two deterministic
//! machines, the ZAB [`Peer`] (consensus) and the pipeline [`Server`]
//! (clients, tree, sessions), in one core loop on the member's thread.
//!
//! Each batch of events is handled, then the outputs of both machines are
//! carried out until neither has anything left, in the order each produced
//! them: the pipeline's proposals go to the peer; the peer's deliveries and
//! role changes go to the pipeline; storage outputs (epochs, truncation,
//! snapshot install) are made durable before the next output, as the ZAB
//! driving contract requires.
//!
//! On disk, beside the standalone layout: `acceptedEpoch` and
//! `currentEpoch` (ZooKeeper's two small files) in `<dataDir>/wazoo-v1/`.
//! At start the pipeline loads the newest snapshot only; the log after it
//! goes to the peer, which delivers those txns again once a leader
//! confirms them (some may never have been committed).

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use tokio::sync::mpsc;

use crate::config::Config;
use crate::core::server::{Input, Output, PeerMsg, Role, Server};
use crate::core::watch::ConnId;
use crate::core::zab::{self, Message, Peer, RoleChange, ServerId, Zxid};
use crate::member::{
    log_dir, read_snapshot_payload, server_config, snap_dir, write_snapshot_payload, AdminContext,
    Clock, ConnMsg, Event, LogFeed, MemberOptions,
};
use crate::quorum::{self, LinkCmd, LinkEvent, Links};
use wazoo_storage::{GroupCommitLog, GroupCommitOptions, LogOptions, TxnLog};

fn read_epoch(dir: &Path, name: &str) -> Result<u32> {
    let p = dir.join(name);
    match std::fs::read_to_string(&p) {
        Ok(s) => s
            .trim()
            .parse()
            .map_err(|_| anyhow!("{}: not an epoch number: {:?}", p.display(), s.trim())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
    }
}

/// Writes an epoch file durably (temp file, fsync, rename, fsync dir).
pub(crate) fn write_epoch(dir: &Path, name: &str, epoch: u32) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(epoch.to_string().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host}:{port}"))?
        .next()
        .ok_or_else(|| anyhow!("{host}:{port} resolves to nothing"))
}

/// The ZAB configuration from zoo.cfg.
pub fn zab_config(cfg: &Config, my_id: u64) -> zab::Config {
    let voters = cfg
        .servers
        .iter()
        .filter(|s| !s.observer)
        .map(|s| s.id)
        .collect();
    let observers = cfg
        .servers
        .iter()
        .filter(|s| s.observer)
        .map(|s| s.id)
        .collect();
    let mut z = zab::Config::new(my_id, voters, observers);
    z.tick_ms = cfg.tick_time_ms as u64;
    z.init_limit_ticks = cfg.init_limit as u64;
    z.sync_limit_ticks = cfg.sync_limit as u64;
    // Failover well under ZooKeeper's: a short finalize wait and resend cap
    // (ZooKeeper: 200 ms and 60 s).
    z.finalize_wait_ms = 50;
    z.notification_interval_ms_max = 2_000;
    z.outstanding_proposals_max = 1 << 20;
    z
}

/// Recovers and starts serving as one member of the ensemble in `cfg`.
pub(crate) async fn start(cfg: Config, opts: MemberOptions) -> Result<crate::member::Started> {
    let MemberOptions {
        clock,
        group_commit,
    } = opts;
    let my_id = cfg.my_id.ok_or_else(|| {
        anyhow!(
            "{}/myid is missing: an ensemble member needs its id",
            cfg.data_dir.display()
        )
    })?;
    let me = cfg
        .servers
        .iter()
        .find(|s| s.id == my_id)
        .ok_or_else(|| anyhow!("myid is {my_id} but zoo.cfg has no server.{my_id} line"))?
        .clone();
    let zcfg = zab_config(&cfg, my_id);
    zcfg.validate()
        .map_err(|e| anyhow!("ensemble config: {e}"))?;
    let sdir = snap_dir(&cfg);
    let ldir = log_dir(&cfg);
    std::fs::create_dir_all(&sdir).with_context(|| format!("cannot create {}", sdir.display()))?;
    std::fs::create_dir_all(&ldir).with_context(|| format!("cannot create {}", ldir.display()))?;
    let now = clock.now();
    let scfg = server_config(&cfg);
    let (mut server, snap_zxid) = match wazoo_storage::latest_valid_snapshot(&sdir)? {
        Some((zxid, path)) => {
            let bytes = wazoo_storage::read_snapshot(&path)?;
            let (z, sessions, waits, tree) = read_snapshot_payload(&bytes)
                .with_context(|| format!("cannot load snapshot {}", path.display()))?;
            (Server::recovered(scfg, tree, sessions, waits, z, now), zxid)
        }
        None => (Server::new(scfg, now), 0),
    };
    server.set_ensemble();
    let plugins = crate::member::start_plugins(&cfg, &mut server)?;
    let (mut log, repaired) = TxnLog::open(&ldir, LogOptions::default())
        .with_context(|| format!("cannot open the transaction log in {}", ldir.display()))?;
    for r in &repaired.repairs {
        tracing::warn!("log repaired at startup: {r:?}");
    }
    let mut restored_log = Vec::new();
    for rec in log.read_from(snap_zxid)? {
        let rec = rec?;
        restored_log.push((Zxid(rec.zxid), zab::Payload::from(rec.body)));
    }
    let restored = zab::Restored {
        accepted_epoch: read_epoch(&sdir, "acceptedEpoch")?,
        current_epoch: read_epoch(&sdir, "currentEpoch")?,
        snapshot_zxid: Zxid(snap_zxid),
        log: restored_log,
    };
    restored
        .validate()
        .map_err(|e| anyhow!("stored state: {e}"))?;
    tracing::info!(
        my_id,
        snapshot = format!("0x{snap_zxid:x}"),
        logged = restored.log.len(),
        accepted_epoch = restored.accepted_epoch,
        current_epoch = restored.current_epoch,
        "recovered ensemble member"
    );
    let peer = Peer::new(zcfg, restored, now.mono_ms as u64).map_err(|e| anyhow!("{e}"))?;

    let log_stats = log.stats();
    let (tx, rx) = mpsc::channel::<Event>(65536);
    let (durable_tx, durable_rx) = mpsc::unbounded_channel::<Event>();
    let group = GroupCommitLog::start(
        log,
        group_commit.clone(),
        crate::member::durable_callback(durable_tx.clone()),
    )?;

    // Quorum links.
    let mut peers = HashMap::new();
    for s in &cfg.servers {
        peers.insert(s.id, resolve(&s.host, s.quorum_port)?);
    }
    let listen = resolve(&me.host, me.quorum_port)?;
    let (link_tx, mut link_rx) = mpsc::channel::<LinkEvent>(65536);
    let links = quorum::start(my_id, listen, peers, link_tx)
        .await
        .with_context(|| format!("cannot listen for the quorum on {listen}"))?;
    let fwd = tx.clone();
    tokio::spawn(async move {
        while let Some(ev) = link_rx.recv().await {
            if fwd.send(Event::Link(ev)).await.is_err() {
                return;
            }
        }
    });

    let client_addr = match &me.client_addr {
        Some((Some(h), p)) => resolve(h, *p)?,
        Some((None, p)) => SocketAddr::new(cfg.client_addr().ip(), *p),
        None => cfg.client_addr(),
    };
    let listener = tokio::net::TcpListener::bind(client_addr)
        .await
        .with_context(|| format!("cannot listen on {client_addr}"))?;
    let client_addr = listener.local_addr()?;
    let quorum = cfg.servers.iter().filter(|s| !s.observer).count() / 2 + 1;
    let ctx = Arc::new(AdminContext {
        cfg: cfg.clone(),
        log_stats,
        clock: clock.clone(),
        metrics: crate::member::start_metrics(&cfg, quorum).await?,
        plugins,
    });
    let core_ctx = Arc::clone(&ctx);
    let core_cfg = cfg.clone();
    let core = async move {
        let mut m = EnsembleCore {
            server,
            peer,
            log: Some(group),
            links,
            conns: HashMap::new(),
            leader: None,
            cfg: core_cfg,
            durable_tx,
            group_commit,
            feed: LogFeed::default(),
            clock,
        };
        m.run(rx, durable_rx, core_ctx).await
    };
    crate::member::spawn_shell_tasks(&cfg, listener, tx.clone());
    tracing::info!(%client_addr, my_id, "wazoo ensemble member started (electing)");
    Ok(crate::member::Started {
        client_addr,
        events: tx,
        core: Box::pin(core),
    })
}

struct EnsembleCore {
    server: Server,
    peer: Peer,
    log: Option<GroupCommitLog>,
    links: Links,
    conns: HashMap<ConnId, crate::net::ConnTx>,
    leader: Option<ServerId>,
    cfg: Config,
    /// Where a restarted log writer reports (see `with_log`).
    durable_tx: mpsc::UnboundedSender<Event>,
    group_commit: GroupCommitOptions,
    /// Records the log writer's queue had no room for yet.
    feed: LogFeed,
    clock: Clock,
}

impl EnsembleCore {
    async fn run(
        &mut self,
        mut rx: mpsc::Receiver<Event>,
        mut durable_rx: mpsc::UnboundedReceiver<Event>,
        ctx: Arc<AdminContext>,
    ) -> Result<()> {
        let result = self.run_inner(&mut rx, &mut durable_rx, &ctx).await;
        for tx in self.conns.values() {
            let _ = tx.send(ConnMsg::Close);
        }
        if let Some(log) = self.log.take() {
            if result.is_ok() {
                let _ = self.feed.flush(&log);
            }
            let _ = log.shutdown();
        }
        result
    }

    async fn run_inner(
        &mut self,
        rx: &mut mpsc::Receiver<Event>,
        durable_rx: &mut mpsc::UnboundedReceiver<Event>,
        ctx: &AdminContext,
    ) -> Result<()> {
        while let Some(ev) = crate::member::next_event(rx, durable_rx, &self.feed).await {
            let batch_clock = self.clock.clone();
            let mut clock = crate::member::BatchClock::new(&batch_clock);
            let mut next = Some(ev);
            let mut handled = 0;
            while let Some(ev) = next.take() {
                let now = clock.now();
                match ev {
                    Event::Register { conn, tx } => {
                        self.conns.insert(conn, tx);
                    }
                    Event::Input(Input::Durable { zxid }) => self.peer.handle(
                        zab::Input::Durable {
                            zxid: Zxid(zxid as u64),
                        },
                        now.mono_ms as u64,
                    ),
                    Event::Input(Input::Tick) => {
                        self.peer.handle(zab::Input::Tick, now.mono_ms as u64);
                        self.server.handle(Input::Tick, now);
                    }
                    Event::Input(input) => {
                        if let Input::Closed { conn } = &input {
                            self.conns.remove(conn);
                        }
                        self.server.handle(input, now);
                    }
                    Event::Inputs(inputs) => {
                        for input in inputs {
                            self.server.handle(input, now);
                        }
                    }
                    Event::Link(LinkEvent::Zab { from, msg }) => self
                        .peer
                        .handle(zab::Input::Message { from, msg }, now.mono_ms as u64),
                    Event::Link(LinkEvent::Down { peer }) => self
                        .peer
                        .handle(zab::Input::Disconnected { peer }, now.mono_ms as u64),
                    Event::Link(LinkEvent::App { from, payload }) => {
                        match PeerMsg::decode(&payload) {
                            Ok(msg) => self.server.handle(Input::Peer { from, msg }, now),
                            Err(e) => tracing::warn!(from, "undecodable pipeline message: {e}"),
                        }
                    }
                    Event::Admin { word, reply } => {
                        crate::admin::resets_stats(&word, &mut self.server);
                        let text = crate::admin::four_letter(
                            &word,
                            &self.server,
                            ctx,
                            self.conns.len(),
                            self.peer.leader_report(),
                        );
                        let _ = reply.send(text);
                    }
                    Event::Backup { reply } => {
                        let _ = reply.send(self.server.snapshot_job());
                    }
                    Event::LogFailed(e) => bail!("transaction log failed: {e}"),
                    Event::Shutdown => return Ok(()),
                }
                handled += 1;
                if handled < 4096 {
                    next = crate::member::try_next_event(rx, durable_rx, &self.feed);
                }
            }
            // Held records first: they come before anything proposed now.
            let log = self.log.as_ref().expect("the log is running");
            self.feed.pump(log)?;
            self.carry_out()?;
            ctx.metrics
                .update(&mut self.server, self.conns.len(), &ctx.log_stats);
            ctx.metrics.set_elections(self.peer.stats().elections);
            if let Some(why) = self.server.fatal() {
                bail!("stopping: {why}");
            }
        }
        Ok(())
    }

    /// Carries out both machines' outputs until neither has any left.
    fn carry_out(&mut self) -> Result<()> {
        for _round in 0..1_000_000 {
            let peer_out = self.peer.take_outputs();
            let server_out = self.server.take_outputs();
            if peer_out.is_empty() && server_out.is_empty() {
                return Ok(());
            }
            for out in peer_out {
                self.peer_output(out)?;
            }
            for out in server_out {
                self.server_output(out)?;
            }
        }
        bail!("outputs did not settle (a feedback loop between consensus and the pipeline)")
    }

    /// Stops the log writer (after handing it every held record, which
    /// come before what `f` does), runs `f` on the log, and starts it again.
    fn with_log(&mut self, f: impl FnOnce(&mut TxnLog) -> wazoo_storage::Result<()>) -> Result<()> {
        let group = self.log.take().expect("the log is running");
        self.feed.flush(&group)?;
        let mut log = group.shutdown()?;
        f(&mut log)?;
        self.log = Some(GroupCommitLog::start(
            log,
            self.group_commit.clone(),
            crate::member::durable_callback(self.durable_tx.clone()),
        )?);
        Ok(())
    }

    fn peer_output(&mut self, out: zab::Output) -> Result<()> {
        let now = self.clock.now();
        let sdir = snap_dir(&self.cfg);
        match out {
            zab::Output::Send { to, msg } => self.links.send(to, LinkCmd::Zab(msg)),
            zab::Output::CloseLink { peer } => self.links.send(peer, LinkCmd::Close),
            zab::Output::SetAcceptedEpoch { epoch } => {
                write_epoch(&sdir, "acceptedEpoch", epoch)
                    .with_context(|| format!("cannot store acceptedEpoch in {}", sdir.display()))?
            }
            zab::Output::SetCurrentEpoch { epoch } => write_epoch(&sdir, "currentEpoch", epoch)
                .with_context(|| format!("cannot store currentEpoch in {}", sdir.display()))?,
            zab::Output::Persist { zxid, payload } => {
                let log = self.log.as_ref().expect("the log is running");
                self.feed.append(log, zxid.0, payload.to_vec())?
            }
            zab::Output::Truncate { after } => self.with_log(|log| log.truncate_after(after.0))?,
            zab::Output::InstallSnapshot { zxid, data } => {
                let (z, sessions, waits, tree) = read_snapshot_payload(&data)
                    .map_err(|e| anyhow!("the leader's snapshot does not load: {e}"))?;
                if z as u64 != zxid.0 {
                    bail!(
                        "the leader's snapshot holds 0x{z:x}, announced 0x{:x}",
                        zxid.0
                    );
                }
                wazoo_storage::write_snapshot(&sdir, zxid.0, |w| {
                    std::io::Write::write_all(w, &data)
                })?;
                self.with_log(|log| log.truncate_after(0))?;
                self.server.install_snapshot(tree, sessions, waits, z);
            }
            zab::Output::SendSnapshot { to, zxid } => {
                let job = self.server.snapshot_job();
                let mut data = Vec::new();
                write_snapshot_payload(&job, &mut data)?;
                if job.zxid as u64 != zxid.0 {
                    tracing::warn!(
                        "snapshot for {to} is at 0x{:x}, consensus asked for 0x{:x}",
                        job.zxid,
                        zxid.0
                    );
                }
                self.links.send(
                    to,
                    LinkCmd::Zab(Message::Snap {
                        zxid,
                        data: zab::Payload::from(data),
                    }),
                );
            }
            zab::Output::Deliver { zxid, payload } => self.server.handle(
                Input::Committed {
                    zxid: zxid.0 as i64,
                    record: payload.to_vec(),
                },
                now,
            ),
            zab::Output::SyncDone { .. } => {}
            zab::Output::Role(r) => {
                let role = match r {
                    RoleChange::Looking | RoleChange::LeaderLostQuorum { .. } => Role::Looking,
                    RoleChange::Leading { epoch } => Role::Leader { epoch },
                    RoleChange::Following { leader, .. } => Role::Follower { leader },
                    RoleChange::Observing { leader, .. } => Role::Observer { leader },
                };
                self.leader = match role {
                    Role::Follower { leader } | Role::Observer { leader } => Some(leader),
                    _ => None,
                };
                self.server.handle(Input::Role(role), now);
            }
        }
        Ok(())
    }

    fn server_output(&mut self, out: Output) -> Result<()> {
        match out {
            Output::Propose { zxid, record } => {
                let mono_ms = self.clock.mono_ms() as u64;
                match self.peer.propose(zab::Payload::from(record), mono_ms) {
                    Ok(z) if z.0 as i64 == zxid => {}
                    Ok(z) => bail!(
                        "consensus gave zxid 0x{:x} to the pipeline's 0x{zxid:x}",
                        z.0
                    ),
                    Err(e) => {
                        // The pipeline has numbered this txn and queued its
                        // reply; consensus will not carry it. Stepping down
                        // resets the pipeline (its clients reconnect), where
                        // going on would number the next txn apart.
                        tracing::warn!(
                            "proposal 0x{zxid:x} refused ({e}): leaving leadership for an election"
                        );
                        self.peer.abdicate(mono_ms);
                    }
                }
            }
            Output::ToLeader(msg) => match self.leader {
                Some(l) => self.links.send(l, LinkCmd::App(msg.encode())),
                None => tracing::debug!("no leader to forward to"),
            },
            Output::Send {
                conn,
                bytes,
                replies,
            } => {
                if let Some(tx) = self.conns.get(&conn) {
                    let _ = tx.send(ConnMsg::Bytes { bytes, replies });
                }
            }
            Output::Close { conn } => {
                if let Some(tx) = self.conns.get(&conn) {
                    let _ = tx.send(ConnMsg::Close);
                }
            }
            Output::Snapshot(job) => {
                let dir = snap_dir(&self.cfg);
                std::thread::spawn(move || {
                    if let Err(e) = wazoo_storage::write_snapshot(&dir, job.zxid as u64, |w| {
                        write_snapshot_payload(&job, w)
                    }) {
                        tracing::error!("snapshot at 0x{:x} failed: {e}", job.zxid);
                    }
                });
            }
            Output::Persist { .. } => {
                bail!("the pipeline asked to persist directly in ensemble mode")
            }
        }
        Ok(())
    }
}
