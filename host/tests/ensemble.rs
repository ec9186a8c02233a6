//! A 3-member ensemble, as processes on loopback (docs/ARCHITECTURE.md, "The
//! ensemble"), against Apache ZooKeeper's ensemble and wazoo's: replication,
//! killing the leader under write load, a follower's death, restarts, and
//! sessions that move between members. ZooKeeper Internals ("Leader Election",
//! "Atomic Broadcast").

mod common;

use common::connect;

use std::collections::HashMap;
use std::time::Duration;

use wazoo_testkit::{start_ensemble, Flavor, ServerOptions, TestEnsemble};
use zookeeper_client::{Acls, Client, CreateMode};

fn opts(flavor: Flavor) -> ServerOptions {
    common::ensemble_options(flavor)
}

fn ensemble(flavor: Flavor) -> Box<dyn TestEnsemble> {
    start_ensemble(flavor, 3, opts(flavor))
        .unwrap_or_else(|e| panic!("cannot start a {flavor} ensemble: {e:#}"))
}

/// Reads `path` on member `i` after a sync, so the member has caught up.
async fn exists_on(e: &dyn TestEnsemble, i: usize, path: &str) -> bool {
    let zk = connect(&e.addr(i).to_string()).await;
    zk.sync(path).await.ok();
    zk.check_stat(path).await.unwrap().is_some()
}

// ZooKeeper Internals, "Atomic Broadcast": every committed write reaches every member.
async fn writes_on_any_member_are_seen_on_every_member(flavor: Flavor) {
    let e = ensemble(flavor);
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    for i in 0..3 {
        let zk = connect(&e.addr(i).to_string()).await;
        zk.create(&format!("/via{i}"), format!("{i}").as_bytes(), &opts)
            .await
            .unwrap();
        assert_eq!(
            zk.create(&format!("/via{i}"), b"", &opts)
                .await
                .unwrap_err(),
            zookeeper_client::Error::NodeExists,
            "{flavor}: errors come back through any member"
        );
    }
    for i in 0..3 {
        for j in 0..3 {
            assert!(
                exists_on(e.as_ref(), i, &format!("/via{j}")).await,
                "{flavor}: /via{j} on member {i}"
            );
        }
    }
    let zk = connect(&e.addr(0).to_string()).await;
    let seq = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    let mut names = Vec::new();
    for i in 0..3 {
        let zk = connect(&e.addr(i).to_string()).await;
        let (_, s) = zk.create("/via0/n-", b"", &seq).await.unwrap();
        names.push(s.into_i64());
    }
    assert_eq!(
        names,
        vec![0, 1, 2],
        "{flavor}: one sequence across members"
    );
    drop(zk);
}

/// ZooKeeper Internals, "Atomic Broadcast", "delivered messages will not be missed": writers keep going
/// while the leader is killed; every acknowledged write is on every member
/// once the old leader is back.
async fn killing_the_leader_loses_no_acknowledged_write(flavor: Flavor) {
    let mut e = ensemble(flavor);
    let hosts = e.connect_string();
    common::create_persistent(&hosts, "/load").await;
    let writers = common::Writers::start(&hosts, "/load", "", 3, 5000, false);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let leader = e.wait_for_leader(Duration::from_secs(20)).unwrap();
    let before = writers.count();
    e.kill(leader);
    let killed_at = std::time::Instant::now();
    // A new leader among the two left, and writes acknowledged again.
    writers
        .wait_for_more(10, "a write acknowledged after the leader died")
        .await;
    eprintln!(
        "{flavor}: writes resumed {:?} after killing the leader",
        killed_at.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    e.restart(leader).unwrap();
    let acked = writers.finish().await;
    assert!(acked.len() > before, "{flavor}: writes went on");
    for i in 0..3 {
        let zk = connect(&e.addr(i).to_string()).await;
        zk.sync("/load").await.unwrap();
        let kids: std::collections::HashSet<String> = zk
            .list_children("/load")
            .await
            .unwrap()
            .into_iter()
            .collect();
        let missing: Vec<&String> = acked
            .iter()
            .filter(|p| !kids.contains(p.trim_start_matches("/load/")))
            .collect();
        assert!(
            missing.is_empty(),
            "{flavor}: member {i} lacks {} of {} acknowledged writes, e.g. {:?}",
            missing.len(),
            acked.len(),
            &missing[..missing.len().min(3)]
        );
    }
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a client that loses its
/// server reconnects to another one and keeps its session, and with it its
/// ephemeral node.
async fn a_session_moves_to_another_member_with_its_ephemerals(flavor: Flavor) {
    let mut e = ensemble(flavor);
    let leader = e.wait_for_leader(Duration::from_secs(20)).unwrap();
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let other = (0..3).find(|&i| i != leader && i != follower).unwrap();
    let hosts = format!("{},{}", e.addr(follower), e.addr(other));
    // Detached: dropping this client must not close the session.
    let zk = Client::connector()
        .with_detached()
        .with_session_timeout(Duration::from_secs(15))
        .connect(&e.addr(follower).to_string())
        .await
        .unwrap();
    zk.create(
        "/eph",
        b"",
        &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let session = zk.session().clone();
    drop(zk);
    e.kill(follower);
    let _ = hosts;
    let back = Client::connector()
        .with_session(session)
        .with_session_timeout(Duration::from_secs(15))
        .connect(&e.addr(other).to_string())
        .await
        .unwrap();
    assert!(
        back.check_stat("/eph").await.unwrap().is_some(),
        "{flavor}: ephemeral kept"
    );
    back.create(
        "/after-move",
        b"",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a client that stops
/// talking (a silent partition) loses its session after the timeout, decided by
/// the leader for a session attached to a follower; its ephemerals go
/// everywhere.
async fn a_silent_client_on_a_follower_expires_everywhere(flavor: Flavor) {
    let e = ensemble(flavor);
    let leader = e.wait_for_leader(Duration::from_secs(20)).unwrap();
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let proxy = wazoo_testkit::Proxy::start(e.addr(follower)).unwrap();
    let zk = Client::connector()
        .with_session_timeout(Duration::from_millis(2000))
        .connect(&proxy.connect_string())
        .await
        .unwrap();
    zk.create(
        "/gone",
        b"",
        &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let watcher = connect(&e.addr(leader).to_string()).await;
    let (_, w) = watcher.check_and_watch_stat("/gone").await.unwrap();
    proxy.blackhole();
    let ev = common::within("the ephemeral of the expired session to go", w.changed()).await;
    assert_eq!(
        ev.event_type,
        zookeeper_client::EventType::NodeDeleted,
        "{flavor}"
    );
    for i in 0..3 {
        assert!(
            !exists_on(e.as_ref(), i, "/gone").await,
            "{flavor}: gone on member {i}"
        );
    }
    drop(zk);
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Sessions", and ZooKeeper
/// Administrator's Guide, `readonlymode.enabled`: a member cut off from its
/// quorum serves reads to clients that asked for read-only, refuses their
/// writes with NotReadOnly, and answers `isro` with `ro`.
async fn a_member_without_quorum_serves_read_only_clients(flavor: Flavor) {
    let opts = match flavor {
        Flavor::Wazoo => opts(flavor).cfg("readonlymode.enabled=true"),
        Flavor::Zookeeper => opts(flavor).arg("-Dreadonlymode.enabled=true"),
    };
    let mut e = start_ensemble(flavor, 3, opts).unwrap();
    let zk = connect(&e.connect_string()).await;
    zk.create(
        "/ro",
        b"kept",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    drop(zk);
    assert!(exists_on(e.as_ref(), 0, "/ro").await);
    e.kill(1);
    e.kill(2);
    let addr = e.addr(0);
    wazoo_testkit::wait_for(
        "member 0 to serve read-only",
        Duration::from_secs(60),
        || (wazoo_testkit::four_letter_word(addr, "isro").ok()? == "ro").then_some(()),
    )
    .unwrap();
    if flavor == Flavor::Zookeeper {
        // The oracle agrees on `isro` above. ZooKeeper 3.8's read-only
        // server opens no new session without localSessionsEnabled=true
        // (the createSession is a write it refuses: the client reads a
        // NotReadOnly reply header as its connect response), so the
        // client-side checks run on wazoo only here;
        // tests/python/test_read_only_kazoo.py runs them with kazoo on
        // both, ZooKeeper with local sessions.
        return;
    }
    let ro = Client::connector()
        .with_readonly(true)
        .with_session_timeout(Duration::from_secs(15))
        .connect(&addr.to_string())
        .await
        .unwrap();
    assert_eq!(ro.get_data("/ro").await.unwrap().0, b"kept");
    assert_eq!(
        ro.create(
            "/w",
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all())
        )
        .await
        .unwrap_err(),
        zookeeper_client::Error::NotReadOnly
    );
    assert!(wazoo_testkit::four_letter_word(addr, "srvr")
        .unwrap()
        .contains("Mode: read-only"));
    // The quorum comes back: read-only clients are closed and go find a
    // read-write server.
    e.restart(1).unwrap();
    wazoo_testkit::wait_for(
        "member 0 to serve read-write",
        Duration::from_secs(60),
        || (wazoo_testkit::four_letter_word(addr, "isro").ok()? == "rw").then_some(()),
    )
    .unwrap();
}

/// ZooKeeper Internals, "Atomic Broadcast": under write load, kill -9 the leader, then
/// a follower (the ensemble loses its quorum), then restart both: no
/// acknowledged write is lost and every member converges to the same tree.
async fn leader_then_follower_killed_then_both_restarted_converge(flavor: Flavor) {
    let mut e = ensemble(flavor);
    let hosts = e.connect_string();
    common::create_persistent(&hosts, "/conv").await;
    let writers = common::Writers::start(&hosts, "/conv", "", 2, 20_000, false);
    writers.wait_for_more(20, "writes before any kill").await;
    let leader = e.wait_for_leader(Duration::from_secs(20)).unwrap();
    e.kill(leader);
    writers
        .wait_for_more(20, "writes after the leader died")
        .await;
    let follower = (0..3)
        .find(|&i| i != leader && e.mode(i).as_deref() == Some("follower"))
        .unwrap_or((leader + 1) % 3);
    e.kill(follower);
    tokio::time::sleep(Duration::from_millis(500)).await;
    e.restart(leader).unwrap();
    e.restart(follower).unwrap();
    writers
        .wait_for_more(20, "writes after both came back")
        .await;
    let acked = writers.finish().await;
    let acked: std::collections::HashSet<String> = acked
        .iter()
        .map(|p| p.trim_start_matches("/conv/").to_string())
        .collect();
    let mut trees = Vec::new();
    for i in 0..3 {
        let zk = connect(&e.addr(i).to_string()).await;
        zk.sync("/conv").await.unwrap();
        let mut kids = zk.list_children("/conv").await.unwrap();
        kids.sort();
        let missing = acked
            .iter()
            .filter(|p| kids.binary_search(p).is_err())
            .count();
        assert_eq!(
            missing, 0,
            "{flavor}: member {i} lost {missing} acknowledged writes"
        );
        trees.push(kids);
    }
    assert_eq!(trees[0], trees[1], "{flavor}: members 0 and 1 converge");
    assert_eq!(trees[1], trees[2], "{flavor}: members 1 and 2 converge");
}

/// "ZooKeeper Observers": an observer replicates and serves clients but does not
/// vote; writes through it are committed by the participants.
async fn an_observer_serves_clients_without_voting(flavor: Flavor) {
    let e = start_ensemble(flavor, 4, opts(flavor).observers(1)).unwrap();
    let observer = 3;
    assert_eq!(e.mode(observer).as_deref(), Some("observer"), "{flavor}");
    let zk = connect(&e.addr(observer).to_string()).await;
    zk.create(
        "/via-observer",
        b"o",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let other = connect(&e.addr(0).to_string()).await;
    other
        .create(
            "/via-participant",
            b"p",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    assert!(exists_on(e.as_ref(), 0, "/via-observer").await, "{flavor}");
    assert!(
        exists_on(e.as_ref(), observer, "/via-participant").await,
        "{flavor}"
    );
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Sessions", "SessionMovedException":
/// a session re-attached through another server; a request still sent on the
/// old connection fails with SessionMoved instead of acting for a session that
/// now lives elsewhere.
async fn a_write_on_the_old_connection_of_a_moved_session_gets_session_moved(flavor: Flavor) {
    let e = ensemble(flavor);
    let leader = e.wait_for_leader(Duration::from_secs(20)).unwrap();
    let f1 = (0..3).find(|&i| i != leader).unwrap();
    let f2 = (0..3).find(|&i| i != leader && i != f1).unwrap();
    let old = Client::connector()
        .with_detached()
        .with_session_timeout(Duration::from_secs(15))
        .connect(&e.addr(f1).to_string())
        .await
        .unwrap();
    old.create(
        "/moved-before",
        b"",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let new = Client::connector()
        .with_detached()
        .with_session(old.session().clone())
        .with_session_timeout(Duration::from_secs(15))
        .connect(&e.addr(f2).to_string())
        .await
        .unwrap();
    new.create(
        "/moved-after",
        b"",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let r = old
        .create(
            "/moved-stale",
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await;
    // ZooKeeper Programmer's Guide, "ZooKeeper Sessions": the old server
    // "closes the client connection", so the client sees its connection lost,
    // not a reply.
    assert_eq!(
        r.unwrap_err(),
        zookeeper_client::Error::ConnectionLoss,
        "{flavor}"
    );
    assert!(
        !exists_on(e.as_ref(), leader, "/moved-stale").await,
        "{flavor}: nothing written"
    );
}

/// `mntr`'s key/value lines.
fn mntr(e: &dyn TestEnsemble, i: usize) -> std::collections::HashMap<String, String> {
    let text = wazoo_testkit::four_letter_word(e.addr(i), "mntr").expect("mntr answers");
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

// ZooKeeper Administrator's Guide, "The Four Letter Words", mntr: the
// leader adds its learners, synced followers and pending syncs; the
// followers do not have those keys.
async fn mntr_on_the_leader_reports_its_followers(flavor: Flavor) {
    let e = ensemble(flavor);
    let leader = e
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader");
    // A write, so every follower is synced and has seen a proposal.
    let zk = connect(&e.addr(leader).to_string()).await;
    zk.create(
        "/mntr",
        b"x",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let m = loop {
        let m = mntr(e.as_ref(), leader);
        if m.get("zk_synced_followers").map(String::as_str) == Some("2")
            || std::time::Instant::now() > deadline
        {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(m["zk_server_state"], "leader", "{flavor}");
    assert_eq!(
        m.get("zk_synced_followers").map(String::as_str),
        Some("2"),
        "{flavor}: {m:?}"
    );
    assert_eq!(
        m.get("zk_learners").map(String::as_str),
        Some("2"),
        "{flavor}: {m:?}"
    );
    assert_eq!(
        m.get("zk_pending_syncs").map(String::as_str),
        Some("0"),
        "{flavor}: {m:?}"
    );
    assert!(m.contains_key("zk_leader_uptime"), "{flavor}: {m:?}");
    let follower = (leader + 1) % 3;
    let f = mntr(e.as_ref(), follower);
    assert_eq!(f["zk_server_state"], "follower", "{flavor}");
    assert!(!f.contains_key("zk_synced_followers"), "{flavor}: {f:?}");
}

on_both!(
    mntr_on_the_leader_reports_its_followers,
    a_write_on_the_old_connection_of_a_moved_session_gets_session_moved,
    leader_then_follower_killed_then_both_restarted_converge,
    an_observer_serves_clients_without_voting,
    a_member_without_quorum_serves_read_only_clients,
    a_silent_client_on_a_follower_expires_everywhere,
    writes_on_any_member_are_seen_on_every_member,
    killing_the_leader_loses_no_acknowledged_write,
    a_session_moves_to_another_member_with_its_ephemerals,
);

/// One row of /proc/net/tcp or tcp6: local and remote endpoint (as the
/// table writes them), the socket's inode and its TCP timer (2 while
/// keepalive is armed on an idle connection).
struct TcpRow {
    local: String,
    remote: String,
    established: bool,
    timer: u32,
    inode: u64,
}

fn tcp_rows() -> Vec<TcpRow> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>())
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            Some(TcpRow {
                local: f.get(1)?.to_string(),
                remote: f.get(2)?.to_string(),
                established: *f.get(3)? == "01",
                timer: u32::from_str_radix(f.get(5)?.split(':').next()?, 16).ok()?,
                inode: f.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

fn socket_inodes(pid: u32) -> std::collections::HashSet<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    l.to_str()?
                        .strip_prefix("socket:[")?
                        .strip_suffix(']')?
                        .parse()
                        .ok()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The established connections between two members of `e` (both ends
/// are sockets of member processes), by local endpoint: whether keepalive
/// was seen armed on each in any of `samples` looks, 100 ms apart (a link
/// busy with a ping shows its retransmit timer instead).
fn member_links_keepalive(e: &dyn TestEnsemble, samples: usize) -> HashMap<String, bool> {
    let pids: Vec<u32> = (0..e.len()).filter_map(|i| e.pid(i)).collect();
    let mut seen: HashMap<String, bool> = HashMap::new();
    for _ in 0..samples {
        let inodes: std::collections::HashSet<u64> =
            pids.iter().flat_map(|&p| socket_inodes(p)).collect();
        let rows: Vec<TcpRow> = tcp_rows()
            .into_iter()
            .filter(|r| r.established && inodes.contains(&r.inode))
            .collect();
        let locals: std::collections::HashSet<&str> =
            rows.iter().map(|r| r.local.as_str()).collect();
        for r in rows.iter().filter(|r| locals.contains(r.remote.as_str())) {
            *seen.entry(r.local.clone()).or_default() |= r.timer == 2;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    seen
}

// ZooKeeper Administrator's Guide, "Cluster Options", tcpKeepAlive: with
// it, the sockets members use between them have TCP keepalive on (in
// ZooKeeper, those of leader election; wazoo's members have one link per
// pair, which carries election and the rest alike, so all of them);
// without it none has.
#[test]
fn tcp_keep_alive_arms_keepalive_on_the_links_between_members() {
    for flavor in [Flavor::Zookeeper, Flavor::Wazoo] {
        for on in [false, true] {
            let e = start_ensemble(flavor, 3, opts(flavor).cfg(format!("tcpKeepAlive={on}")))
                .unwrap_or_else(|err| panic!("cannot start a {flavor} ensemble: {err:#}"));
            e.wait_for_leader(Duration::from_secs(30)).unwrap();
            let links = member_links_keepalive(e.as_ref(), 30);
            assert!(
                !links.is_empty(),
                "{flavor}: no links between members found"
            );
            let armed = links.values().filter(|&&k| k).count();
            match (flavor, on) {
                (_, false) => assert_eq!(armed, 0, "{flavor}, tcpKeepAlive=false: {links:?}"),
                (Flavor::Zookeeper, true) => {
                    assert!(armed > 0, "{flavor}, tcpKeepAlive=true: {links:?}")
                }
                (Flavor::Wazoo, true) => {
                    assert_eq!(armed, links.len(), "{flavor}, tcpKeepAlive=true: {links:?}")
                }
            }
        }
    }
}
