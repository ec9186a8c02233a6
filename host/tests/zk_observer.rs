//! A wazoo member observes a running Apache ZooKeeper 3.8 ensemble
//! (`wazoo.peers=zookeeper`; docs/MIGRATION.md, "Live migration", phase
//! 1): it finds the leader on the election port, syncs from it, applies
//! its INFORMs live, and serves ZooKeeper's data to its own clients, with
//! watches, and writes, sessions and syncs forwarded to ZooKeeper's
//! leader. ZooKeeper Administrator's Guide, "Observers" ("Observers:
//! Scaling ZooKeeper Without Hurting Write Performance"); ZooKeeper
//! Internals, "Atomic Broadcast".

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::zk_joiner::ZkJoiner;
use common::*;
use wazoo_testkit::{four_letter_word, free_port, loopback, Flavor, ZkEnsemble};
use zookeeper_client::{Acls, CreateMode, EventType};

fn open() -> zookeeper_client::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wazoo_observer_serves_a_zookeeper_ensemble_live_and_forwards_its_writes() {
    let (q4, e4, c4) = (free_port(), free_port(), free_port());
    let line = format!("server.4=127.0.0.1:{q4}:{e4}:observer");
    let zk = ZkEnsemble::start_with(3, ensemble_options(Flavor::Zookeeper).cfg(line)).unwrap();
    let zc = connect(&zk.connect_string()).await;
    // Written before the observer exists: it arrives by the sync.
    zc.create("/before", b"one", &open()).await.unwrap();

    let mut obs = ZkJoiner::start(&zk.config_path(0), 4, c4, &[]);
    obs.wait_observing(loopback(c4));
    let wc = connect(&format!("127.0.0.1:{c4}")).await;
    // ZooKeeper's leader counts it as a synced observer.
    let leader = zk.wait_for_leader(Duration::from_secs(10)).unwrap();
    let mntr = four_letter_word(zk.addr(leader), "mntr").unwrap();
    assert!(
        mntr.lines().any(|l| l == "zk_synced_observers\t1"),
        "the leader's mntr:\n{mntr}"
    );
    let (data, stat) = wc.get_data("/before").await.unwrap();
    assert_eq!(data, b"one", "the sync brought ZooKeeper's data");
    assert_eq!(stat.version, 0);

    // Live: a write on a ZooKeeper member fires the observer's watch.
    let (_, _, w) = wc.get_and_watch_data("/before").await.unwrap();
    zc.set_data("/before", b"two", None).await.unwrap();
    let ev = within("the watch on the observer", w.changed()).await;
    assert_eq!(ev.event_type, EventType::NodeDataChanged);
    assert_eq!(wc.get_data("/before").await.unwrap().0, b"two");

    // Writes through the observer go to ZooKeeper's leader; their replies
    // are ZooKeeper's.
    let (stat, _) = wc.create("/from-wazoo", b"w", &open()).await.unwrap();
    assert!(stat.czxid > 0);
    // A ZooKeeper follower may not have applied the commit yet: sync
    // first (Programmer's Guide, "Consistency Guarantees").
    zc.sync("/").await.unwrap();
    assert_eq!(zc.get_data("/from-wazoo").await.unwrap().0, b"w");
    let err = wc
        .create("/from-wazoo", b"again", &open())
        .await
        .unwrap_err();
    assert!(
        matches!(err, zookeeper_client::Error::NodeExists),
        "ZooKeeper's NodeExists: {err:?}"
    );
    let stat = wc.set_data("/from-wazoo", b"w2", Some(0)).await.unwrap();
    assert_eq!(stat.version, 1);
    let err = wc
        .set_data("/from-wazoo", b"w3", Some(0))
        .await
        .unwrap_err();
    assert!(
        matches!(err, zookeeper_client::Error::BadVersion),
        "{err:?}"
    );
    wc.sync("/from-wazoo").await.unwrap();
    let seq = wc
        .create(
            "/from-wazoo/s-",
            b"",
            &CreateMode::PersistentSequential.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap()
        .1;
    assert_eq!(seq.into_i64(), 0, "ZooKeeper's sequence numbering");
    zc.sync("/").await.unwrap();
    assert_eq!(
        zc.list_children("/from-wazoo").await.unwrap(),
        vec!["s-0000000000".to_string()]
    );

    // The trees are ZooKeeper's to the bit: past zxid 0x...80 both log
    // the tree digest ("hash"), and they agree; the observer compared the
    // leader's digest after every txn and found no difference.
    for i in 0..130 {
        zc.create(&format!("/from-wazoo/d{i}"), b"d", &open())
            .await
            .unwrap();
    }
    wc.sync("/").await.unwrap();
    let leader = zk.wait_for_leader(Duration::from_secs(10)).unwrap();
    let theirs = four_letter_word(zk.addr(leader), "hash").unwrap();
    let ours = four_letter_word(loopback(c4), "hash").unwrap();
    assert!(!ours.is_empty(), "the observer logged no digest");
    assert_eq!(ours, theirs, "the digest logs (zxid: digest)");
    let mntr = four_letter_word(loopback(c4), "mntr").unwrap();
    assert!(
        mntr.lines().any(|l| l == "zk_digest_mismatches_count\t0"),
        "{mntr}"
    );

    // A session made on the observer is ZooKeeper's: its ephemeral shows
    // on the members and goes with it.
    let ec = connect(&format!("127.0.0.1:{c4}")).await;
    ec.create(
        "/eph",
        b"",
        &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    // The ZooKeeper member zc reads may not have applied it yet.
    zc.sync("/").await.unwrap();
    let owner = zc
        .check_stat("/eph")
        .await
        .unwrap()
        .unwrap()
        .ephemeral_owner;
    assert_eq!(
        owner,
        ec.session().id().0,
        "owned by the observer's session"
    );
    assert_eq!(
        (owner as u64) >> 56,
        4,
        "the session id carries the observer's sid"
    );
    drop(ec);
    let deadline = Instant::now() + Duration::from_secs(20);
    while zc.check_stat("/eph").await.unwrap().is_some() {
        assert!(
            Instant::now() < deadline,
            "the closed session's ephemeral stays"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a client moves to
// another server with its session id and password; the observer
// revalidates it with ZooKeeper's leader and keeps the session.
#[test]
fn a_session_made_on_a_zookeeper_member_moves_to_the_observer() {
    let (q4, e4, c4) = (free_port(), free_port(), free_port());
    let line = format!("server.4=127.0.0.1:{q4}:{e4}:observer");
    let zk = ZkEnsemble::start_with(3, ensemble_options(Flavor::Zookeeper).cfg(line)).unwrap();
    let mut obs = ZkJoiner::start(&zk.config_path(0), 4, c4, &[]);
    obs.wait_observing(loopback(c4));
    let (_, first) = raw_handshake(zk.addr(0), 0, &[]).expect("a session on ZooKeeper");
    assert!(first.session_id != 0);
    let (_, moved) =
        raw_handshake(loopback(c4), first.session_id, &first.passwd).expect("a re-attach");
    assert_eq!(moved.session_id, first.session_id, "the same session");
    assert!(moved.timeout_ms > 0);
    // A wrong password and an unknown session are refused (ZooKeeper's
    // answer with session id 0, which the raw handshake reports as None).
    let mut bad = first.passwd.clone();
    bad[0] ^= 1;
    assert!(raw_handshake(loopback(c4), first.session_id, &bad).is_none());
    assert!(raw_handshake(loopback(c4), (4 << 56) | 12345, &[0; 16]).is_none());
    // The session writes where it moved: ZooKeeper's leader took the
    // observer as its owner (a write from a member that does not own a
    // session fails with SessionMoved).
    let (mut s, _) = raw_handshake(loopback(c4), first.session_id, &first.passwd)
        .unwrap_or_else(|| panic!("the session moved back:\n{}", obs.log_tail()));
    let (err, _) = raw_call(&mut s, 1, &raw_create("/moved", Some(b"x")));
    assert_eq!(err, 0, "the write of a moved session:\n{}", obs.log_tail());
}

/// Waits (bounded) until ZooKeeper member `i` says `Mode: {mode}`.
fn wait_zk_mode(zk: &ZkEnsemble, i: usize, mode: &str, w: &ZkJoiner) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while zk.mode(i).as_deref() != Some(mode) {
        assert!(
            Instant::now() < deadline,
            "ZooKeeper member {i} is not {mode} after 60 s (it is {:?}); wazoo's log:\n{}",
            zk.mode(i),
            w.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

// docs/MIGRATION.md, phase 2; ZooKeeper Internals, "Leader Activation"
// and "Atomic Broadcast": a wazoo participant of a ZooKeeper ensemble
// (two ZooKeeper members and wazoo as server.3) is elected a follower,
// and its votes and acknowledgements count. With one ZooKeeper member
// down, the other commits writes only with wazoo's ACKs; the member that
// comes back joins the leader wazoo follows; and with the ZooKeeper
// leader killed, the other ZooKeeper member and wazoo elect a leader
// (never wazoo, which does not lead yet) and go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wazoo_follower_votes_and_acknowledges_in_a_zookeeper_ensemble() {
    let (q3, e3, c3) = (free_port(), free_port(), free_port());
    let line = format!("server.3=127.0.0.1:{q3}:{e3}");
    let mut zk = ZkEnsemble::start_with(2, ensemble_options(Flavor::Zookeeper).cfg(line)).unwrap();
    let mut w = ZkJoiner::start(&zk.config_path(0), 3, c3, &[]);
    w.wait_mode(loopback(c3), "follower");
    let wc = connect(&format!("127.0.0.1:{c3}")).await;
    wc.create("/p", b"through wazoo", &open()).await.unwrap();

    // Only the leader and wazoo are up: a write commits with wazoo's ACK.
    let leader = zk.wait_for_leader(Duration::from_secs(10)).unwrap();
    let other = 1 - leader;
    zk.kill(other);
    let lc = connect(&zk.addr(leader).to_string()).await;
    within(
        "a write the ZooKeeper leader commits with wazoo's ACK",
        lc.create("/q", b"acked by wazoo", &open()),
    )
    .await
    .unwrap_or_else(|e| panic!("the write: {e}\n{}", w.log_tail()));
    wc.sync("/q").await.unwrap();
    assert_eq!(wc.get_data("/q").await.unwrap().0, b"acked by wazoo");
    // The leader counts wazoo as its one synced follower (once it has
    // dropped the killed member's link).
    let synced = wazoo_testkit::wait_for("one synced follower", Duration::from_secs(10), || {
        four_letter_word(zk.addr(leader), "mntr")
            .ok()
            .filter(|stat| stat.contains("zk_synced_followers\t1\n"))
    });
    assert!(synced.is_ok(), "{synced:?}");

    // The member that comes back learns the leader from the votes of the
    // members that follow and lead.
    zk.restart(other).unwrap();
    assert_eq!(zk.mode(other).as_deref(), Some("follower"));

    // The leader dies: the other ZooKeeper member and wazoo elect it.
    zk.kill(leader);
    wait_zk_mode(&zk, other, "leader", &w);
    w.wait_mode(loopback(c3), "follower");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match wc.create("/r", b"after", &open()).await {
            // A retry after a create whose answer was lost.
            Ok(_) | Err(zookeeper_client::Error::NodeExists) => break,
            Err(e) => assert!(
                Instant::now() < deadline,
                "a write through wazoo to the next leader: {e}\n{}",
                w.log_tail()
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let oc = connect(&zk.addr(other).to_string()).await;
    oc.sync("/r").await.unwrap();
    for path in ["/p", "/q", "/r"] {
        assert!(
            oc.check_stat(path).await.unwrap().is_some(),
            "{path} on the next leader"
        );
    }

    // Killed and restarted, the wazoo member loads what it stored, is
    // synced by DIFF and follows again.
    w.restart();
    w.wait_mode(loopback(c3), "follower");
    assert!(
        std::fs::read_to_string(&w.log)
            .unwrap_or_default()
            .contains("by DIFF"),
        "a restarted follower holds its history:\n{}",
        w.log_tail()
    );
    let rc = connect(&format!("127.0.0.1:{c3}")).await;
    rc.sync("/").await.unwrap();
    for path in ["/p", "/q", "/r"] {
        assert!(
            rc.check_stat(path).await.unwrap().is_some(),
            "{path} on the restarted wazoo member"
        );
    }
}

// docs/MIGRATION.md, phase 2; ZooKeeper Recipes and Solutions, "Locks"
// and "Leader Election"; Programmer's Guide, "ZooKeeper Watches": Apache
// Curator connected to the wazoo follower alone, in an ensemble of two
// ZooKeeper members and wazoo where the ZooKeeper member that does not
// lead is down (every write commits with wazoo's ACK), behaves as on
// ZooKeeper: the framework's operations, InterProcessMutex, LeaderLatch,
// PathChildrenCache and CuratorCache print ZooKeeper 3.8's lines.
#[test]
fn curator_on_a_wazoo_follower_behaves_as_on_zookeeper() {
    let (q3, e3, c3) = (free_port(), free_port(), free_port());
    let line = format!("server.3=127.0.0.1:{q3}:{e3}");
    let mut zk = ZkEnsemble::start_with(2, ensemble_options(Flavor::Zookeeper).cfg(line)).unwrap();
    let mut w = ZkJoiner::start(&zk.config_path(0), 3, c3, &[]);
    w.wait_mode(loopback(c3), "follower");
    let leader = zk.wait_for_leader(Duration::from_secs(10)).unwrap();
    zk.kill(1 - leader);
    let classes = tempfile::tempdir().unwrap();
    let lines = run_java(
        classes.path(),
        "CuratorPins",
        CURATOR_CLASSPATH,
        &[&format!("127.0.0.1:{c3}"), "/curator-pins"],
    );
    if lines.len() != CURATOR_PINS.len() {
        eprintln!("the wazoo follower's log:\n{}", w.log_tail());
    }
    assert_lines("Curator on a wazoo follower", &lines, CURATOR_PINS);
}

/// A ZooKeeper ensemble whose members keep only a few committed txns in
/// memory and never sync a learner from their log files, so that a
/// learner behind by more than that is synced with SNAP (ZooKeeper's
/// `zookeeper.commitLogCount` and `zookeeper.snapshotSizeFactor`).
fn snap_ensemble(line: String) -> ZkEnsemble {
    let opts = ensemble_options(Flavor::Zookeeper)
        .cfg(line)
        .arg("-Dzookeeper.commitLogCount=5")
        .arg("-Dzookeeper.snapshotSizeFactor=-1");
    ZkEnsemble::start_with(3, opts).unwrap()
}

// ZooKeeper Internals, "Atomic Broadcast": a learner too far behind the
// leader's committed log takes a snapshot (SNAP), sessions included; and
// its clients' sessions live on while their pings reach the leader in the
// observer's PING answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_synced_by_snapshot_keeps_its_clients_sessions_alive() {
    let (q4, e4, c4) = (free_port(), free_port(), free_port());
    let zk = snap_ensemble(format!("server.4=127.0.0.1:{q4}:{e4}:observer"));
    let zc = connect(&zk.connect_string()).await;
    zc.create("/snap", b"root", &open()).await.unwrap();
    for i in 0..30 {
        zc.create(
            &format!("/snap/n{i:02}"),
            format!("v{i}").as_bytes(),
            &open(),
        )
        .await
        .unwrap();
    }
    // A session of the ZooKeeper members' with an ephemeral: in the
    // snapshot's session table and tree.
    zc.create(
        "/snap/eph",
        b"",
        &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();

    let mut obs = ZkJoiner::start(&zk.config_path(0), 4, c4, &[]);
    obs.wait_observing(loopback(c4));
    let log = std::fs::read_to_string(&obs.log).unwrap_or_default();
    assert!(log.contains("by SNAP"), "synced by SNAP:\n{log}");
    let wc = connect(&format!("127.0.0.1:{c4}")).await;
    let mut kids = wc.list_children("/snap").await.unwrap();
    kids.sort();
    assert_eq!(kids.len(), 31, "every node of the snapshot:\n{log}");
    assert_eq!(wc.get_data("/snap/n17").await.unwrap().0, b"v17");
    let eph = wc.check_stat("/snap/eph").await.unwrap().unwrap();
    assert_eq!(eph.ephemeral_owner, zc.session().id().0);

    // A session on the observer, idle but for its client's pings, for
    // several times its timeout: the leader must hear of it.
    let short = zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(2))
        .connect(&format!("127.0.0.1:{c4}"))
        .await
        .unwrap();
    short
        .create(
            "/snap/short",
            b"",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(
        zc.check_stat("/snap/short").await.unwrap().is_some(),
        "the observer's idle session expired:\n{}",
        obs.log_tail()
    );
    drop(short);
}

// Administrator's Guide, "Observers", and "Configuration Parameters",
// syncEnabled (true by default): an observer keeps a log and snapshots
// like a follower, so a restarted one loads its state and is synced by
// DIFF, not by another whole snapshot, and serves what was written while
// it was down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_observer_loads_its_state_and_is_synced_by_diff() {
    let (q4, e4, c4) = (free_port(), free_port(), free_port());
    let zk = snap_ensemble(format!("server.4=127.0.0.1:{q4}:{e4}:observer"));
    let zc = connect(&zk.connect_string()).await;
    zc.create("/keep", b"root", &open()).await.unwrap();
    for i in 0..20 {
        zc.create(&format!("/keep/a{i:02}"), b"a", &open())
            .await
            .unwrap();
    }
    // snapCount=8: snapshots of its own are taken while it observes.
    let mut obs = ZkJoiner::start(&zk.config_path(0), 4, c4, &["snapCount=8".into()]);
    obs.wait_observing(loopback(c4));
    let first = std::fs::read_to_string(&obs.log).unwrap_or_default();
    assert!(first.contains("by SNAP"), "first synced by SNAP:\n{first}");
    for i in 0..20 {
        zc.create(&format!("/keep/b{i:02}"), b"b", &open())
            .await
            .unwrap();
    }
    let wc = connect(&format!("127.0.0.1:{c4}")).await;
    within("the observer applies the writes", async {
        while wc.check_stat("/keep/b19").await.ok().flatten().is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    drop(wc);
    // The leader's snapshot was stored when it came, and one of its own
    // since (every 8 txns).
    let snaps = std::fs::read_dir(obs.cfg.with_file_name("data").join("wazoo-v1"))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with("snapshot.")
        })
        .count();
    assert!(snaps >= 2, "snapshots stored: {snaps}");

    obs.restart();
    // Written while the observer is down: fewer than the leader's
    // committed log keeps (commitLogCount=5), so DIFF can carry them.
    zc.set_data("/keep/a03", b"changed", None).await.unwrap();
    zc.create("/keep/c", b"c", &open()).await.unwrap();
    obs.wait_observing(loopback(c4));
    let second = std::fs::read_to_string(&obs.log).unwrap_or_default();
    assert!(
        second.contains("recovered") && second.contains("by DIFF") && !second.contains("by SNAP"),
        "the restarted observer loads its snapshot and log, and is synced by DIFF:\n{second}"
    );
    let wc = connect(&format!("127.0.0.1:{c4}")).await;
    let mut kids = wc.list_children("/keep").await.unwrap();
    kids.sort();
    assert_eq!(kids.len(), 41, "every node, before and while it was down");
    assert_eq!(wc.get_data("/keep/a03").await.unwrap().0, b"changed");
    // Its tree is ZooKeeper's: the leader's digest after each txn agrees.
    zc.create("/keep/d", b"d", &open()).await.unwrap();
    within("the observer applies the last write", async {
        while wc.check_stat("/keep/d").await.ok().flatten().is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let mntr = four_letter_word(loopback(c4), "mntr").unwrap();
    assert!(
        mntr.contains("zk_digest_mismatches_count\t0"),
        "no digest mismatch:\n{mntr}"
    );
}

// Administrator's Guide, "Observers": an observer that loses its leader
// finds the new one and serves on; its clients reconnect and keep their
// sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_follows_the_next_leader_when_the_leader_dies() {
    let (q4, e4, c4) = (free_port(), free_port(), free_port());
    let line = format!("server.4=127.0.0.1:{q4}:{e4}:observer");
    let mut zk = ZkEnsemble::start_with(3, ensemble_options(Flavor::Zookeeper).cfg(line)).unwrap();
    let mut obs = ZkJoiner::start(&zk.config_path(0), 4, c4, &[]);
    obs.wait_observing(loopback(c4));
    let wc = connect(&format!("127.0.0.1:{c4}")).await;
    wc.create("/failover", b"a", &open()).await.unwrap();
    let session = wc.session().id().0;

    let leader = zk.wait_for_leader(Duration::from_secs(10)).unwrap();
    zk.kill(leader);
    let survivor = (0..3).find(|&i| i != leader).unwrap();
    let zc = connect(&zk.addr(survivor).to_string()).await;
    within("a write on the next leader", async {
        loop {
            if zc.set_data("/failover", b"b", None).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    obs.wait_observing(loopback(c4));
    // The client reconnected to the observer with its session.
    let data = within("the observer serves the next leader's write", async {
        loop {
            if let Ok((d, _)) = wc.get_data("/failover").await {
                if d == b"b" {
                    return d;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert_eq!(data, b"b");
    assert!(
        std::fs::read_to_string(&obs.log)
            .unwrap_or_default()
            .contains("by DIFF"),
        "the next leader syncs the observer, which holds its history, by DIFF:\n{}",
        obs.log_tail()
    );
    assert_eq!(wc.session().id().0, session, "the same session");
    wc.create("/failover/after", b"", &open()).await.unwrap();
    // A ZooKeeper member may not have applied the commit yet: sync first
    // (Programmer's Guide, "Consistency Guarantees").
    zc.sync("/failover/after").await.unwrap();
    assert!(zc.check_stat("/failover/after").await.unwrap().is_some());
}

const SUPER_DIGEST: &str = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";

/// The `server.N=` lines of a `/zookeeper/config` text.
fn server_lines(config: &[u8]) -> Vec<String> {
    std::str::from_utf8(config)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("server."))
        .map(str::to_string)
        .collect()
}

/// Starts wazoo member 4, as `role`, for a running ensemble whose
/// `/zookeeper/config` is `config`: its `server.4` entry (to add by
/// reconfig), its client port, and the process.
fn start_joiner(config: &[u8], role: &str) -> (String, u16, ZkJoiner) {
    let (q4, e4, c4) = (free_port(), free_port(), free_port());
    let entry = format!("server.4=127.0.0.1:{q4}:{e4}:{role};127.0.0.1:{c4}");
    let mut lines = server_lines(config);
    lines.push(entry.clone());
    lines.extend([
        "tickTime=500".to_string(),
        "initLimit=10".into(),
        "syncLimit=5".into(),
    ]);
    let w = ZkJoiner::start_with(&lines, 4, c4, &["reconfigEnabled=true".to_string()]);
    (entry, c4, w)
}

/// `reconfig -add` of `joining` or `-remove` of `leaving`: the new
/// configuration.
async fn reconfig(
    zc: &zookeeper_client::Client,
    joining: Option<&str>,
    leaving: Option<&str>,
) -> Result<Vec<u8>, zookeeper_client::Error> {
    let update = zookeeper_client::EnsembleUpdate::Incremental {
        joinings: joining.iter().copied(),
        leavings: leaving.iter().copied(),
    };
    Ok(zc.update_ensemble(update, None).await?.0)
}

// ZooKeeper Dynamic Reconfiguration, "Incremental mode" ("Adding
// servers"), the first step of a live migration: a wazoo observer is added
// to a running ZooKeeper ensemble with `reconfig -add`; it serves the new
// configuration, and a later removal of a ZooKeeper member reaches its
// tree while it keeps serving writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wazoo_observer_is_added_by_reconfig_and_follows_a_removal() {
    let opts = ensemble_options(Flavor::Zookeeper)
        .cfg("reconfigEnabled=true")
        .arg(format!(
            "-Dzookeeper.DigestAuthenticationProvider.superDigest={SUPER_DIGEST}"
        ));
    let zk = ZkEnsemble::start_with(3, opts).unwrap();
    let leader = zk.wait_for_leader(Duration::from_secs(10)).unwrap();
    let zc = connect(&zk.addr(leader).to_string()).await;
    zc.auth("digest", b"super:test").await.unwrap();
    let (before, _) = zc.get_config().await.unwrap();
    let (entry, c4, mut obs) = start_joiner(&before, "observer");
    let added = reconfig(&zc, Some(&entry), None)
        .await
        .unwrap_or_else(|e| panic!("reconfig -add: {e:?}\n{}", obs.log_tail()));
    assert_eq!(server_lines(&added).len(), 4);
    obs.wait_observing(loopback(c4));
    let wc = connect(&format!("127.0.0.1:{c4}")).await;
    wc.sync("/").await.unwrap();
    assert_eq!(
        wc.get_config().await.unwrap().0,
        added,
        "the configuration it was added by"
    );

    // A ZooKeeper follower leaves; the observer applies the new config
    // and still forwards writes.
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let id = (follower + 1).to_string();
    let removed = reconfig(&zc, None, Some(&id)).await.unwrap();
    assert_eq!(server_lines(&removed).len(), 3);
    wc.sync("/").await.unwrap();
    let (seen, stat) = wc.get_config().await.unwrap();
    assert_eq!(seen, removed);
    assert_eq!(
        stat.version, -1,
        "the config node's version, as ZooKeeper shows it"
    );
    let voters_left = format!(
        "{:?}",
        (1..=3).filter(|&i| i != follower + 1).collect::<Vec<_>>()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&obs.log)
        .unwrap_or_default()
        .contains(&format!("voters={voters_left}"))
    {
        assert!(
            Instant::now() < deadline,
            "the observer did not take the new voters {voters_left}:\n{}",
            obs.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wc.create("/after-removal", b"", &open()).await.unwrap();
    zc.sync("/").await.unwrap();
    assert!(zc.check_stat("/after-removal").await.unwrap().is_some());
}

// Issue 27's procedure, its first two steps, with ZooKeeper's Dynamic
// Reconfiguration ("Incremental mode": adding and removing servers):
// `reconfig -add` makes a wazoo member a voter of a running 3-member
// ZooKeeper ensemble, and `reconfig -remove` takes a ZooKeeper member
// out, which is then stopped. The voters are then two ZooKeeper members
// and wazoo: with one more ZooKeeper follower down, the leader commits
// writes with wazoo's ACK alone, so wazoo's vote counts in the new
// configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wazoo_voter_is_added_by_reconfig_and_a_zookeeper_member_removed() {
    let opts = ensemble_options(Flavor::Zookeeper)
        .cfg("reconfigEnabled=true")
        .arg(format!(
            "-Dzookeeper.DigestAuthenticationProvider.superDigest={SUPER_DIGEST}"
        ));
    let mut zk = ZkEnsemble::start_with(3, opts).unwrap();
    let leader = zk.wait_for_leader(Duration::from_secs(10)).unwrap();
    let zc = connect(&zk.addr(leader).to_string()).await;
    zc.auth("digest", b"super:test").await.unwrap();
    zc.create("/before", b"zookeeper's", &open()).await.unwrap();
    let (before, _) = zc.get_config().await.unwrap();
    let (entry, c4, mut w) = start_joiner(&before, "participant");
    w.wait_mode(loopback(c4), "follower");
    let added = reconfig(&zc, Some(&entry), None)
        .await
        .unwrap_or_else(|e| panic!("reconfig -add: {e:?}\n{}", w.log_tail()));
    assert_eq!(server_lines(&added).len(), 4);
    assert!(
        server_lines(&added).contains(&entry),
        "a participant: {added:?}"
    );

    // A ZooKeeper follower leaves the ensemble and is stopped.
    let gone = (0..3).find(|&i| i != leader).unwrap();
    let id = (gone + 1).to_string();
    reconfig(&zc, None, Some(&id))
        .await
        .unwrap_or_else(|e| panic!("reconfig -remove: {e:?}\n{}", w.log_tail()));
    zk.kill(gone);

    // The last ZooKeeper follower down too: the leader and wazoo are a
    // quorum of the voters {leader, the other, wazoo}.
    let last = (0..3).find(|&i| i != leader && i != gone).unwrap();
    zk.kill(last);
    within(
        "a write the leader commits with wazoo's ACK",
        zc.create("/after", b"acked by wazoo", &open()),
    )
    .await
    .unwrap_or_else(|e| panic!("the write: {e}\n{}", w.log_tail()));
    let wc = connect(&format!("127.0.0.1:{c4}")).await;
    wc.sync("/after").await.unwrap();
    assert_eq!(wc.get_data("/after").await.unwrap().0, b"acked by wazoo");
    assert_eq!(wc.get_data("/before").await.unwrap().0, b"zookeeper's");
}

/// Reads from `s` until `f` finds something in what was read, within 10 s.
fn read_until<T>(
    s: &mut std::net::TcpStream,
    buf: &mut Vec<u8>,
    mut f: impl FnMut(&mut Vec<u8>) -> Option<T>,
) -> T {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(t) = f(buf) {
            return t;
        }
        let n = s.read(&mut chunk).expect("the observer sends");
        assert!(n > 0, "the observer closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The next QuorumPacket the observer sent on `s`.
fn next_packet(s: &mut std::net::TcpStream, buf: &mut Vec<u8>) -> wazoo_zkquorum::QuorumPacket {
    let limits = wazoo_zkquorum::Limits::default();
    read_until(s, buf, |b| {
        let (p, used) = wazoo_zkquorum::QuorumPacket::decode(b, &limits).unwrap()?;
        b.drain(..used);
        Some(p)
    })
}

// Nothing a peer sends may grow a member's memory without bound: a
// "leader" that syncs the observer and then never reads what it answers
// (here, a flood of PINGs) loses its link, and the observer stays up and
// looks for the leader again. (Administrator's Guide, "Observers"; the
// leader here is a stand-in speaking ZooKeeper's quorum protocol, since a
// real ZooKeeper leader always reads.)
#[test]
fn an_observer_drops_a_leader_that_does_not_read() {
    use std::io::Write;
    use std::net::TcpListener;
    use wazoo_zkquorum::{
        election::{decode_frame, encode_frame},
        InitialMessage, Limits, Notification, Payload, PeerState,
    };
    let election = TcpListener::bind("127.0.0.1:0").unwrap();
    let quorum = TcpListener::bind("127.0.0.1:0").unwrap();
    let (e1, q1) = (
        election.local_addr().unwrap().port(),
        quorum.local_addr().unwrap().port(),
    );
    let (q4, e4, c4) = (free_port(), free_port(), free_port());
    let lines = vec![
        "tickTime=2000".to_string(),
        "initLimit=10".into(),
        "syncLimit=5".into(),
        format!("server.1=127.0.0.1:{q1}:{e1}:participant"),
        format!("server.4=127.0.0.1:{q4}:{e4}:observer"),
    ];
    let mut obs = ZkJoiner::start_with(&lines, 4, c4, &[]);

    // The election port: every connection is answered with "1 leads".
    std::thread::spawn(move || {
        for s in election.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let limits = Limits::default();
                let mut buf = Vec::new();
                read_until(&mut s, &mut buf, |b| {
                    let (_, used) = InitialMessage::decode(b, &limits).ok()??;
                    b.drain(..used);
                    Some(())
                });
                read_until(&mut s, &mut buf, |b| {
                    let (_, used) = decode_frame(b, &limits).ok()??;
                    b.drain(..used);
                    Some(())
                });
                let vote = Notification::current(PeerState::Leading, 1, 0, 1, 1, Vec::new());
                let _ = s.write_all(&encode_frame(&vote.encode()));
                std::thread::sleep(Duration::from_secs(30));
            });
        }
    });

    // The quorum port: a sync by an empty DIFF, then PINGs, never read.
    let (mut s, _) = quorum.accept().unwrap();
    let mut buf = Vec::new();
    let info = next_packet(&mut s, &mut buf);
    assert_eq!(info.kind, wazoo_zkquorum::kind::OBSERVERINFO);
    let epoch = 1i64 << 32;
    let leader_info = Payload::LeaderInfo {
        protocol_version: wazoo_zkquorum::ZAB_PROTOCOL_VERSION,
    };
    s.write_all(&leader_info.to_packet(epoch).to_bytes())
        .unwrap();
    let ack = next_packet(&mut s, &mut buf);
    assert_eq!(ack.kind, wazoo_zkquorum::kind::ACKEPOCH);
    for p in [
        Payload::Diff.to_packet(0),
        Payload::NewLeader { config: None }.to_packet(epoch),
        Payload::UpToDate.to_packet(epoch),
    ] {
        s.write_all(&p.to_bytes()).unwrap();
    }
    obs.wait_observing(loopback(c4));
    let ping = Payload::Ping(Vec::new()).to_packet(epoch).to_bytes();
    let flood: Vec<u8> = ping
        .iter()
        .copied()
        .cycle()
        .take(ping.len() * 4096)
        .collect();
    let mut w = s.try_clone().unwrap();
    w.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    std::thread::spawn(move || while w.write_all(&flood).is_ok() {});

    // The observer gives up on this link and connects again.
    quorum.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if quorum.accept().is_ok() {
            break;
        }
        if let Ok(Some(status)) = obs.child.try_wait() {
            panic!("the observer exited ({status}):\n{}", obs.log_tail());
        }
        assert!(
            Instant::now() < deadline,
            "the observer kept a link to a leader that reads nothing:\n{}",
            obs.log_tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(&obs.log).unwrap_or_default();
    assert!(
        log.contains("the leader took"),
        "says why it left the leader:\n{}",
        obs.log_tail()
    );
    assert_eq!(four_letter_word(loopback(c4), "ruok").unwrap(), "imok");
    drop(s);
}

/// The zoo.cfg lines of wazoo member `my_id` for a ZooKeeper ensemble,
/// with each other voter's quorum and election ports reached through a
/// proxy of the wazoo member's own (so that a test can cut it off), and
/// the proxies.
fn proxied_lines(zk_cfg: &Path, my_id: u64) -> (Vec<String>, Vec<wazoo_testkit::Proxy>) {
    let mut proxies = Vec::new();
    let mut lines = Vec::new();
    for l in std::fs::read_to_string(zk_cfg).unwrap().lines() {
        let Some((key, value)) = l.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if ["tickTime", "initLimit", "syncLimit", "maxSessionTimeout"].contains(&key) {
            lines.push(l.to_string());
            continue;
        }
        if !key.starts_with("server.") {
            continue;
        }
        let (addr, client) = value.split_once(';').unwrap_or((value, ""));
        let parts: Vec<&str> = addr.split(':').collect();
        if key == format!("server.{my_id}") {
            // Its own line: where it listens.
            lines.push(l.to_string());
            continue;
        }
        let mut via = |port: &str| {
            let target = format!("{}:{port}", parts[0]).parse().unwrap();
            let p = wazoo_testkit::Proxy::start(target).unwrap();
            let port = p.addr().port();
            proxies.push(p);
            port
        };
        let (q, e) = (via(parts[1]), via(parts[2]));
        let role = parts.get(3).map(|r| format!(":{r}")).unwrap_or_default();
        let client = if client.is_empty() {
            String::new()
        } else {
            format!(";{client}")
        };
        lines.push(format!("{key}=127.0.0.1:{q}:{e}{role}{client}"));
    }
    (lines, proxies)
}

/// Reads `/mixed`'s child count through the observer, again and again, on
/// one session: what one session sees never goes back (ZooKeeper
/// Programmer's Guide, "Consistency Guarantees": sequential consistency
/// and a single system image, across reconnects).
async fn monotonic_reader(
    addr: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (u64, Vec<String>) {
    let mut c = connect(&addr).await;
    let (mut reads, mut seen, mut backwards) = (0u64, 0i32, Vec::new());
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        match tokio::time::timeout(Duration::from_secs(3), c.check_stat("/mixed")).await {
            Ok(Ok(Some(stat))) => {
                reads += 1;
                if stat.num_children < seen {
                    backwards.push(format!("{} after {seen}", stat.num_children));
                }
                seen = seen.max(stat.num_children);
            }
            // The guarantee is per session: a new one starts afresh.
            Ok(Err(zookeeper_client::Error::SessionExpired)) => {
                if let Some(n) = try_connect(&addr).await {
                    c = n;
                    seen = 0;
                }
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (reads, backwards)
}

// Live migration's safety under faults, phase 1 (docs/MIGRATION.md, "Live
// migration"; Administrator's Guide, "Observers"): a wazoo observer in a
// ZooKeeper 3.8 ensemble, with clients writing through ZooKeeper members
// and through the observer, while a seeded schedule kills and restarts
// ZooKeeper members, pauses them (SIGSTOP), kills, restarts and pauses
// the observer, and cuts it off from the voters silently. At the end every
// acknowledged write is on both sides, the observer's tree is
// ZooKeeper's (same children, no digest mismatch), and a session reading
// through the observer never saw the tree go back. Default 40 s;
// WAZOO_MIXED_FAULT_SECS runs longer, WAZOO_MIXED_FAULT_SEED replays one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wazoo_observer_stays_consistent_under_faults_in_a_zookeeper_ensemble() {
    mixed_ensemble_under_faults(Joins::AsObserver).await
}

// The same for phase 2's first part (docs/MIGRATION.md, "Phase 2, first
// part"): the wazoo member is a fourth voter (a follower that does not
// lead), so its votes and ACKs count towards the quorum of three while
// members are killed, paused and cut off one at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wazoo_follower_stays_consistent_under_faults_in_a_zookeeper_ensemble() {
    mixed_ensemble_under_faults(Joins::AsFollower).await
}

/// How the wazoo member joins the ZooKeeper ensemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Joins {
    AsObserver,
    AsFollower,
}

async fn mixed_ensemble_under_faults(joins: Joins) {
    let (role, mode) = match joins {
        Joins::AsObserver => ("observer", "observer"),
        Joins::AsFollower => ("participant", "follower"),
    };
    let secs: u64 = std::env::var("WAZOO_MIXED_FAULT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let seed: u64 = std::env::var("WAZOO_MIXED_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_000
        });
    eprintln!(
        "mixed-ensemble faults, wazoo as {role}: seed {seed} (WAZOO_MIXED_FAULT_SEED), {secs} s"
    );
    let mut rng = Rng::new(seed);

    let (q4, e4, c4) = (free_port(), free_port(), free_port());
    let line = format!("server.4=127.0.0.1:{q4}:{e4}:{role}");
    let mut zk = ZkEnsemble::start_with(3, ensemble_options(Flavor::Zookeeper).cfg(line)).unwrap();
    let (lines, proxies) = proxied_lines(&zk.config_path(0), 4);
    let mut obs = ZkJoiner::start_with(&lines, 4, c4, &[]);
    obs.wait_mode(loopback(c4), mode);
    let obs_addr = format!("127.0.0.1:{c4}");
    let zc = connect(&zk.connect_string()).await;
    zc.create("/mixed", b"", &open()).await.unwrap();

    let zk_writers = Writers::start(&zk.connect_string(), "/mixed", "zk", 2, usize::MAX, false);
    let obs_writers = Writers::start(&obs_addr, "/mixed", "obs", 2, usize::MAX, false);
    let stop: std::sync::Arc<std::sync::atomic::AtomicBool> = Default::default();
    let reader = tokio::spawn(monotonic_reader(obs_addr.clone(), stop.clone()));

    let mut faults = Vec::new();
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(rng.range(300, 1500))).await;
        let hold = Duration::from_millis(rng.range(500, 4000));
        let i = rng.below(3);
        match rng.below(5) {
            0 => {
                faults.push(format!("kill ZooKeeper member {i} for {hold:?}"));
                tokio::task::block_in_place(|| zk.kill(i));
                tokio::time::sleep(hold).await;
                tokio::task::block_in_place(|| zk.restart(i)).unwrap();
            }
            1 => {
                faults.push(format!("pause ZooKeeper member {i} for {hold:?}"));
                let pid = zk.pid(i).unwrap().to_string();
                Command::new("kill").args(["-STOP", &pid]).status().unwrap();
                tokio::time::sleep(hold).await;
                Command::new("kill").args(["-CONT", &pid]).status().unwrap();
            }
            2 => {
                faults.push(format!("kill the wazoo {role} for {hold:?}"));
                obs.kill();
                tokio::time::sleep(hold).await;
                obs.start_again();
            }
            3 => {
                faults.push(format!("pause the wazoo {role} for {hold:?}"));
                let pid = obs.child.id().to_string();
                Command::new("kill").args(["-STOP", &pid]).status().unwrap();
                tokio::time::sleep(hold).await;
                Command::new("kill").args(["-CONT", &pid]).status().unwrap();
            }
            _ => {
                faults.push(format!("cut the wazoo {role} off for {hold:?}"));
                proxies.iter().for_each(|p| p.blackhole());
                tokio::time::sleep(hold).await;
                proxies.iter().for_each(|p| p.restore());
            }
        }
        if let Ok(Some(status)) = obs.child.try_wait() {
            panic!(
                "the observer exited by itself ({status}) after {faults:?}:\n{}",
                obs.log_tail()
            );
        }
    }

    // Healed: the observer catches up, the writers stop.
    tokio::task::block_in_place(|| obs.wait_mode(loopback(c4), mode));
    let (z, o) = (zk_writers.count(), obs_writers.count());
    let resumed = Instant::now() + Duration::from_secs(60);
    while zk_writers.count() <= z || obs_writers.count() <= o {
        assert!(
            Instant::now() < resumed,
            "writes did not go on after the faults (seed {seed}; {} through ZooKeeper, {} through the observer, {z} and {o} a minute ago; last errors {:?} and {:?}); faults {faults:?}; the observer:\n{}",
            zk_writers.count(),
            obs_writers.count(),
            zk_writers.last_error(),
            obs_writers.last_error(),
            obs.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let zk_acked = zk_writers.finish().await;
    let obs_acked = obs_writers.finish().await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (reads, backwards) = reader.await.unwrap();
    eprintln!(
        "faults: {faults:?}; acknowledged {} through ZooKeeper, {} through the wazoo {role}; {reads} reads",
        zk_acked.len(),
        obs_acked.len()
    );

    let history = obs.sync_history();
    let count = |what: &str| history.lines().filter(|l| l.contains(what)).count();
    eprintln!(
        "the wazoo {role} was synced {} times by DIFF, {} by TRUNC, {} by SNAP; {} reloads after a TRUNC; {} runs",
        count("by DIFF"),
        count("by TRUNC"),
        count("by SNAP"),
        count("reloaded the state"),
        obs.runs
    );
    let zc = connect(&zk.connect_string()).await;
    let oc = connect(&obs_addr).await;
    zc.sync("/mixed").await.unwrap();
    oc.sync("/mixed").await.unwrap();
    let mut on_zk = zc.list_children("/mixed").await.unwrap();
    let mut on_obs = oc.list_children("/mixed").await.unwrap();
    on_zk.sort();
    on_obs.sort();
    if on_obs != on_zk {
        let zk_set: std::collections::BTreeSet<&String> = on_zk.iter().collect();
        let obs_set: std::collections::BTreeSet<&String> = on_obs.iter().collect();
        let only_obs: Vec<&&String> = obs_set.difference(&zk_set).collect();
        let only_zk: Vec<&&String> = zk_set.difference(&obs_set).collect();
        let mut stats = Vec::new();
        for c in only_obs.iter().take(3).chain(only_obs.iter().rev().take(1)) {
            let stat = oc.check_stat(&format!("/mixed/{c}")).await.ok().flatten();
            stats.push(format!("{c}: czxid {:#x}", stat.map_or(0, |s| s.czxid)));
        }
        let acked: std::collections::BTreeSet<&String> = obs_acked.iter().collect();
        let acked_only_obs = only_obs
            .iter()
            .filter(|c| acked.contains(&format!("/mixed/{c}")))
            .count();
        panic!(
            "the wazoo {role}'s /mixed differs from ZooKeeper's (seed {seed}): {} only on wazoo ({acked_only_obs} of them acknowledged to its client; {stats:?}), {} only on ZooKeeper ({:?}); faults {faults:?}; its sync history:\n{}",
            only_obs.len(),
            only_zk.len(),
            only_zk.iter().take(5).collect::<Vec<_>>(),
            obs.sync_history()
        );
    }
    let present: std::collections::BTreeSet<String> =
        on_zk.iter().map(|c| format!("/mixed/{c}")).collect();
    let lost: Vec<&String> = zk_acked
        .iter()
        .chain(&obs_acked)
        .filter(|p| !present.contains(*p))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged and lost (seed {seed}): {lost:?}"
    );
    assert!(
        backwards.is_empty(),
        "a session on the observer saw the tree go back (seed {seed}): {backwards:?}"
    );
    let mntr = four_letter_word(loopback(c4), "mntr").unwrap();
    assert!(
        mntr.lines().any(|l| l == "zk_digest_mismatches_count\t0"),
        "the observer's tree digest differed from the leader's (seed {seed}):\n{mntr}"
    );
}

/// Creates `/big` and `n` children of it on ZooKeeper, each with `size`
/// bytes of data, as many to a multi as fit in jute.maxbuffer.
async fn populate(zc: &zookeeper_client::Client, n: usize, size: usize) {
    zc.create("/big", b"", &open()).await.unwrap();
    let data = vec![b'x'; size];
    let per = (900_000 / (size + 64)).clamp(1, 2000);
    let mut i = 0;
    while i < n {
        let mut multi = zc.new_multi_writer();
        for j in i..(i + per).min(n) {
            multi
                .add_create(&format!("/big/n{j:07}"), &data, &open())
                .unwrap();
        }
        multi.commit().await.unwrap();
        i += per;
    }
}

/// Nodes of `BIG_NODE_BYTES` under /big: a snapshot of about 100 MB,
/// which a debug observer takes a few seconds to receive and convert and
/// over 100 ms to store (150 MB: 2.3 s and 0.2 s on the reference
/// machine, both debug).
const BIG_NODES: usize = 400;
const BIG_NODE_BYTES: usize = 256 << 10;

/// The files of the observer's snapshot directory and their modification
/// times.
fn stored_files(obs: &ZkJoiner) -> Vec<(String, std::time::SystemTime)> {
    let dir = obs.cfg.with_file_name("data").join("wazoo-v1");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let modified = e.metadata().ok()?.modified().ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), modified))
        })
        .collect();
    files.sort();
    files
}

// Administrator's Guide, "Cluster Options", initLimit: a leader gives a
// learner initLimit ticks to sync, and drops it if its acknowledgment of
// NEWLEADER comes later. ZooKeeper's own learner stores the snapshot SNAP
// brought before it acknowledges; this observer acknowledges at once and
// stores it in the background (an observer's ACK counts towards no
// quorum), so the time to store a large tree is not spent in that window.
// Seen on disk: the currentEpoch it stores right before its ACK is older
// than the snapshot (whose write of about 100 MB takes over 100 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_acknowledges_a_large_snapshot_before_storing_it() {
    let (q4, e4, c4) = (free_port(), free_port(), free_port());
    let zk = snap_ensemble(format!("server.4=127.0.0.1:{q4}:{e4}:observer"));
    let zc = connect(&zk.connect_string()).await;
    populate(&zc, BIG_NODES, BIG_NODE_BYTES).await;

    let mut obs = ZkJoiner::start(&zk.config_path(0), 4, c4, &[]);
    tokio::task::block_in_place(|| obs.wait_observing(loopback(c4)));
    let log = std::fs::read_to_string(&obs.log).unwrap_or_default();
    assert!(log.contains("by SNAP"), "synced by SNAP:\n{log}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let snapshot = loop {
        let files = stored_files(&obs);
        if let Some(f) = files
            .iter()
            .find(|(name, _)| name.starts_with("snapshot.") && !name.ends_with(".tmp"))
        {
            break (f.clone(), files);
        }
        assert!(
            Instant::now() < deadline,
            "no snapshot stored:\n{}",
            obs.log_tail()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let ((name, stored_at), files) = snapshot;
    let epoch_at = files
        .iter()
        .find(|(n, _)| n == "currentEpoch")
        .map(|f| f.1)
        .expect("currentEpoch stored at NEWLEADER");
    assert!(
        epoch_at < stored_at,
        "NEWLEADER was acknowledged (currentEpoch {epoch_at:?}) before {name} was written ({stored_at:?}):\n{}",
        obs.log_tail()
    );
    let wc = connect(&format!("127.0.0.1:{c4}")).await;
    let kids = wc.list_children("/big").await.unwrap();
    assert_eq!(kids.len(), BIG_NODES, "every node of the snapshot");
    let (data, _) = wc.get_data("/big/n0000007").await.unwrap();
    assert_eq!(data.len(), BIG_NODE_BYTES);
}

// ZooKeeper Internals, "Atomic Broadcast"; Administrator's Guide,
// "Observers". An observer killed after it installed a large snapshot but
// before that snapshot was durable, while the leader's txns after it were
// coming in (held back from its log until then), restarts from the state
// it had stored before (here none: it was new), is synced again, and ends
// with ZooKeeper's tree: nothing missing, nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_killed_while_storing_a_snapshot_restarts_consistent() {
    let (q4, e4, c4) = (free_port(), free_port(), free_port());
    let zk = snap_ensemble(format!("server.4=127.0.0.1:{q4}:{e4}:observer"));
    let zc = connect(&zk.connect_string()).await;
    zc.create("/live", b"", &open()).await.unwrap();
    // A large SNAP, while writes go on.
    populate(&zc, BIG_NODES / 2, BIG_NODE_BYTES).await;
    let writer = {
        let zc = zc.clone();
        tokio::spawn(async move {
            for i in 0.. {
                if zc
                    .create(&format!("/live/new{i}"), b"n", &open())
                    .await
                    .is_err()
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let mut obs = ZkJoiner::start(&zk.config_path(0), 4, c4, &[]);
    // Killed as soon as the snapshot is being written.
    let deadline = Instant::now() + Duration::from_secs(60);
    let dir = obs.cfg.with_file_name("data").join("wazoo-v1");
    loop {
        let writing = std::fs::read_dir(&dir).into_iter().flatten().any(|e| {
            let name = e.unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("snapshot.") && name.ends_with(".tmp")
        });
        if writing {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the snapshot was never written:\n{}",
            obs.log_tail()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    obs.kill();
    let killed_log = std::fs::read_to_string(&obs.log).unwrap_or_default();
    assert!(
        killed_log.contains("by SNAP") && !killed_log.contains("is durable"),
        "killed after the SNAP install, before its snapshot was durable:\n{killed_log}"
    );
    let stored: Vec<String> = stored_files(&obs)
        .into_iter()
        .map(|f| f.0)
        .filter(|n| n.starts_with("snapshot.") && !n.ends_with(".tmp"))
        .collect();
    assert!(
        stored.iter().all(|n| n == "snapshot.0000000000000000"),
        "no snapshot but the empty state's: {stored:?}"
    );

    obs.start_again();
    tokio::task::block_in_place(|| obs.wait_observing(loopback(c4)));
    writer.abort();
    let restarted = std::fs::read_to_string(&obs.log).unwrap_or_default();
    assert!(
        restarted.contains("recovered") && restarted.contains("by SNAP"),
        "restarted from its stored state and synced again:\n{restarted}"
    );
    let wc = connect(&format!("127.0.0.1:{c4}")).await;
    zc.create("/live/last", b"", &open()).await.unwrap();
    within("the observer applies the last write", async {
        while wc.check_stat("/live/last").await.ok().flatten().is_none() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    zc.sync("/live").await.unwrap();
    let mut theirs = zc.list_children("/live").await.unwrap();
    let mut ours = wc.list_children("/live").await.unwrap();
    theirs.sort();
    ours.sort();
    assert_eq!(ours, theirs, "the observer's /live is ZooKeeper's");
    assert_eq!(wc.list_children("/big").await.unwrap().len(), BIG_NODES / 2);
    let (data, _) = wc.get_data("/big/n0000042").await.unwrap();
    assert_eq!(data.len(), BIG_NODE_BYTES);
    // Not the count of digest mismatches: the leader's snapshot is fuzzy
    // (taken while the writes went on), so the first txns after it may
    // already be in it, and the digests the leader sent with them are of
    // a tree without them.
}
