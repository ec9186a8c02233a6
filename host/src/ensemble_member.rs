//! Starting one member of an ensemble: its ZAB configuration, recovery of
//! what consensus restarts from, its quorum links, and the core loop
//! ([`crate::driver`]) around the member's state machine
//! ([`crate::core::member::Member`], which joins ZAB's [`Peer`] and the
//! pipeline).
//!
//! On disk, beside the standalone layout: `acceptedEpoch` and
//! `currentEpoch` (ZooKeeper's two small files) in `<dataDir>/wazoo-v1/`.
//! At start the pipeline loads the newest snapshot only; the log after it
//! goes to the peer, which delivers those txns again once a leader
//! confirms them (some may never have been committed).

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use tokio::sync::mpsc;

use crate::config::Config;
use crate::core::member::Member as CoreMember;
use crate::core::zab::{self, Peer};
use crate::driver::{durable_callback, read_epoch, Driver};
use crate::member::{
    load_newest_snapshot, snap_dir, AdminContext, Event, MemberOptions, PayloadCodec,
};
use crate::quorum::{self, LinkEvent};
use wazoo_storage::GroupCommitLog;

pub(crate) fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host}:{port}"))?
        .next()
        .ok_or_else(|| anyhow!("{host}:{port} resolves to nothing"))
}

/// Where a member keeps the last membership a reconfig committed, in the
/// text of `/zookeeper/config` (ZooKeeper writes `zoo.cfg.dynamic.<version>`
/// next to zoo.cfg and rewrites zoo.cfg; wazoo never rewrites the
/// operator's files and keeps its own copy in its data directory).
pub(crate) const DYNAMIC_FILE: &str = "zoo.cfg.dynamic";

/// Durably stores `c` as the member's membership (write, fsync, rename).
pub(crate) fn store_membership(
    dir: &std::path::Path,
    c: &crate::core::quorum_config::QuorumConfig,
) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{DYNAMIC_FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(c.render().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(DYNAMIC_FILE))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Replaces the membership of zoo.cfg with the one a reconfig committed
/// since, if the member stored a newer one ([`store_membership`]).
fn adopt_stored_membership(cfg: &mut Config, dir: &std::path::Path) -> Result<()> {
    let path = dir.join(DYNAMIC_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let q = crate::core::quorum_config::QuorumConfig::parse(&text)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    adopt_membership(cfg, q, "the last committed reconfig");
    Ok(())
}

/// Replaces the membership of `cfg` with `q` if `q` is newer.
fn adopt_membership(cfg: &mut Config, q: crate::core::quorum_config::QuorumConfig, from: &str) {
    if q.version <= cfg.config_version {
        return;
    }
    tracing::info!(
        version = format!("{:x}", q.version),
        "membership from {from}"
    );
    cfg.config_version = q.version;
    cfg.set_membership(q);
}

/// The ZAB configuration from zoo.cfg. Fails on groups and weights that
/// make no hierarchy of the members (ZooKeeper's `QuorumHierarchical`
/// errors).
pub fn zab_config(cfg: &Config, my_id: u64) -> Result<zab::Config> {
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
    z.suspect_ms_max = cfg.suspect_ms;
    // Failover well under ZooKeeper's: a short finalize wait and resend cap
    // (ZooKeeper: 200 ms and 60 s).
    z.finalize_wait_ms = 50;
    z.notification_interval_ms_max = 2_000;
    z.outstanding_proposals_max = 1 << 20;
    z.observer_master = cfg.observer_master_port.is_some();
    z.quorum = cfg
        .quorum_config()
        .quorum_rule()
        .map_err(|e| anyhow!("hierarchical quorums (group.N, weight.N): {e}"))?;
    if let Some(path) = &cfg.oracle_path {
        // Administrator's Guide, "Oracle Quorum": majorities, and with two
        // voters the oracle's answer, asked before every tick.
        z.quorum = zab::QuorumRule::Oracle {
            says_yes: crate::config::ask_oracle(path),
        };
    }
    Ok(z)
}

/// The client port of member `me`: the address its server line gives
/// after `;`, else zoo.cfg's clientPort(Address); bound, and where.
pub(crate) fn member_client_listener(
    cfg: &Config,
    me: &crate::config::ServerSpec,
) -> Result<(tokio::net::TcpListener, SocketAddr)> {
    let addr = match &me.client_addr {
        Some((Some(h), p)) => resolve(h, *p)?,
        Some((None, p)) => SocketAddr::new(cfg.client_addr().ip(), *p),
        None => cfg.client_addr(),
    };
    let listener = crate::member::client_listener(addr, cfg.client_port_listen_backlog)
        .with_context(|| format!("cannot listen on {addr}"))?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// Recovers and starts serving as one member of the ensemble in `cfg`.
pub(crate) async fn start(mut cfg: Config, opts: MemberOptions) -> Result<crate::member::Started> {
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
    // The membership of the last reconfig this member committed, if newer
    // than zoo.cfg's. Not the snapshot's /zookeeper/config: after `wazoo
    // import` that is the ZooKeeper ensemble's, while zoo.cfg says where
    // the wazoo members are.
    let sdir = snap_dir(&cfg);
    adopt_stored_membership(&mut cfg, &sdir)?;
    let me = cfg
        .servers
        .iter()
        .find(|s| s.id == my_id)
        .ok_or_else(|| anyhow!("myid is {my_id} but the membership has no server.{my_id} line"))?
        .clone();
    cfg.warn_peer_type_mismatch(my_id);
    let zcfg = zab_config(&cfg, my_id)?;
    zcfg.validate()
        .map_err(|e| anyhow!("ensemble config: {e}"))?;
    let (_, ldir) = crate::member::make_data_dirs(&cfg)?;
    let now = clock.now();
    let (mut server, snap_zxid) = load_newest_snapshot(&cfg, now)?;
    server.set_quorum_config(cfg.quorum_config());
    let plugins = crate::member::start_plugins(&cfg, &mut server)?;
    let (mut log, _) = crate::member::open_log(&cfg)?;
    let mut restored_log = Vec::new();
    for rec in log.read_from(snap_zxid)? {
        let rec = rec?;
        restored_log.push((rec.zxid, zab::Payload::from(rec.body)));
    }
    if let Some(gap) = log_gap_after_snapshot(snap_zxid, restored_log.first().map(|r| r.0)) {
        anyhow::bail!("{gap} (in {} and {})", sdir.display(), ldir.display());
    }
    let restored = zab::Restored {
        accepted_epoch: read_epoch(&sdir, "acceptedEpoch")?,
        current_epoch: read_epoch(&sdir, "currentEpoch")?,
        snapshot_zxid: snap_zxid,
        log: restored_log,
    };
    restored
        .validate()
        .map_err(|e| anyhow!("stored state: {e}"))?;
    tracing::info!(
        my_id,
        snapshot = %snap_zxid,
        logged = restored.log.len(),
        accepted_epoch = restored.accepted_epoch,
        current_epoch = restored.current_epoch,
        "recovered ensemble member"
    );
    let peer = Peer::new(zcfg, restored, now.mono_ms as u64).map_err(|e| anyhow!("{e}"))?;

    let log_stats = log.stats();
    let (tx, rx) = mpsc::channel::<Event>(65536);
    let plugins = crate::member::watch_plugins(&cfg, plugins, tx.clone())?;
    let (durable_tx, durable_rx) = mpsc::unbounded_channel::<Event>();
    let group = GroupCommitLog::start(
        log,
        group_commit.clone(),
        durable_callback(durable_tx.clone()),
    )?;

    // Quorum links.
    let mut peers = HashMap::new();
    for s in &cfg.servers {
        let addrs = s
            .addrs
            .iter()
            .map(|a| {
                Ok(quorum::PeerAddr {
                    host: a.host.clone(),
                    addr: resolve(&a.host, a.quorum_port)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        peers.insert(s.id, addrs);
    }
    let listen = me
        .addrs
        .iter()
        .map(|a| resolve(&a.host, a.quorum_port))
        .collect::<Result<Vec<_>>>()?;
    let (link_tx, mut link_rx) = mpsc::channel::<LinkEvent>(65536);
    let quorum_tls = crate::tls::QuorumTls::load(&cfg)?;
    let link_opts = quorum::LinkOptions {
        listen_on_all_ips: cfg.quorum_listen_on_all_ips,
        keepalive: cfg.quorum_tcp_keepalive,
        tls: quorum_tls,
    };
    let links = quorum::start(my_id, &listen, peers, link_tx, link_opts)
        .await
        .context("cannot listen for the quorum")?;
    let fwd = tx.clone();
    tokio::spawn(async move {
        while let Some(ev) = link_rx.recv().await {
            if fwd.send(Event::Link(ev)).await.is_err() {
                return;
            }
        }
    });

    let (listener, client_addr) = member_client_listener(&cfg, &me)?;
    let ctx = Arc::new(AdminContext {
        cfg: cfg.clone(),
        log_stats,
        clock: clock.clone(),
        metrics: crate::member::start_metrics(&cfg).await?,
        local_reads: crate::net::local_reads::LocalReads::of(&cfg),
        plugins,
    });
    let recipe_pool =
        crate::recipe_pool::RecipePool::for_member(&cfg, ctx.plugins.as_ref(), &durable_tx)?;
    let audit = crate::audit::AuditLog::start(&cfg, clock.now().wall_ms)?;
    let mut driver = Driver::new(
        CoreMember::new(server, peer, Box::new(PayloadCodec), now),
        cfg.clone(),
        clock,
        group,
        durable_tx,
        group_commit,
        audit,
        recipe_pool,
    );
    driver.links = Some(links);
    let core = driver.run(rx, durable_rx, Arc::clone(&ctx));
    crate::member::spawn_shell_tasks(true, &cfg, listener, tx.clone(), &ctx)?;
    tracing::info!(%client_addr, my_id, "wazoo ensemble member started (electing)");
    Ok(crate::member::Started {
        client_addr,
        events: tx,
        core: Box::pin(core),
    })
}

/// Whether the log, whose first txn after the snapshot at `snap` is
/// `first`, leaves txns out between them: the state would be the snapshot
/// without them, and ZAB's sync, which compares last zxids, would never
/// send them. Within one epoch the next txn must follow the snapshot's
/// directly; a later epoch's first txn may follow any snapshot (its
/// epoch's counter starts at 1, and a follower synced by SNAP logs from
/// there), and with no snapshot the log must start at a counter of 1.
/// A snapshot damaged on disk makes the member fall back to an older one:
/// this is what refuses the start when the logs do not reach back to it,
/// for every kind of member (standalone, ensemble, observer of
/// ZooKeeper). ZooKeeper's restore replays whatever is there, gap or not.
pub(crate) fn log_gap_after_snapshot(snap: zab::Zxid, first: Option<zab::Zxid>) -> Option<String> {
    let first = first?;
    let gap = if snap == zab::Zxid::ZERO {
        first.counter() > 1
    } else {
        first.epoch() == snap.epoch() && first > snap.next()
    };
    gap.then(|| {
        format!(
            "the log's first txn after the snapshot {snap} is {first}: the txns between them are missing"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::zab::Zxid;

    // ZooKeeper Internals, "Atomic Broadcast": a member restores its
    // snapshot and then every txn logged after it; a hole in between is
    // refused, by name, instead of served.
    #[test]
    fn a_log_that_skips_txns_after_the_snapshot_refuses_the_start() {
        let z = Zxid::new;
        let gap = log_gap_after_snapshot(z(3, 10), Some(z(3, 14))).expect("a gap");
        assert!(
            gap.contains(&z(3, 10).to_string()) && gap.contains(&z(3, 14).to_string()),
            "names both ends: {gap}"
        );
        assert!(log_gap_after_snapshot(Zxid::ZERO, Some(z(2, 5))).is_some());
    }

    #[test]
    fn a_log_that_follows_the_snapshot_or_opens_a_later_epoch_is_whole() {
        let z = Zxid::new;
        assert_eq!(log_gap_after_snapshot(z(3, 10), None), None);
        assert_eq!(log_gap_after_snapshot(z(3, 10), Some(z(3, 11))), None);
        assert_eq!(log_gap_after_snapshot(z(3, 10), Some(z(4, 1))), None);
        assert_eq!(log_gap_after_snapshot(Zxid::ZERO, Some(z(2, 1))), None);
    }
}
