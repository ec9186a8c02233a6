//! Observers behind followers: three voters and one observer on loopback
//! with `observerMasterPort`, against Apache ZooKeeper 3.8's ensemble and
//! wazoo's (Administrator's Guide, "Cluster Options", observerMasterPort;
//! Observers Guide). The observer syncs from a follower (its learner
//! master), serves reads, watches and writes, and when that follower dies
//! moves to another and stays consistent. What the client sees and what
//! `mntr` and the AdminServer's `observers` command say are compared
//! between the two.
//!
//! Every member is on a loopback address of its own (127.0.0.1 to .4),
//! because ZooKeeper's followers each listen on the same
//! `observerMasterPort` of their own quorum address; wazoo listens on
//! nothing for it (the session rides the members' link), and runs the same
//! zoo.cfg.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{connect, within};
use serde_json::Value;
use wazoo_testkit::{free_port, start_ensemble, Flavor, TestEnsemble};
use zookeeper_client::{Acls, CreateMode, EventType};

const OBSERVER: usize = 3;

fn mntr(e: &dyn TestEnsemble, i: usize) -> HashMap<String, String> {
    wazoo_testkit::four_letter_word(e.addr(i), "mntr")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The AdminServer's `observers` command on member `i`.
fn observers(e: &dyn TestEnsemble, i: usize) -> Value {
    let admin = e.admin_addr(i).expect("an AdminServer");
    serde_json::from_str(&common::http_get(admin.port(), "/commands/observers"))
        .expect("observers answers JSON")
}

/// The `zabstate` and `voting` the AdminServer's `zabstate` command gives
/// on member `i`.
fn zabstate(e: &dyn TestEnsemble, i: usize) -> String {
    let admin = e.admin_addr(i).expect("an AdminServer");
    let v: Value = serde_json::from_str(&common::http_get(admin.port(), "/commands/zabstate"))
        .expect("zabstate answers JSON");
    format!("{} voting={}", v["zabstate"], v["voting"])
}

/// The sids the `observers` command lists.
fn observer_sids(v: &Value) -> Vec<u64> {
    v["observers"]
        .as_array()
        .map(|a| a.iter().filter_map(|o| o["sid"].as_u64()).collect())
        .unwrap_or_default()
}

/// Waits until the observer serves, synced by a member other than the
/// leader and `not` (if given); returns that member's index.
fn wait_for_learner_master(
    e: &dyn TestEnsemble,
    leader: usize,
    not: Option<usize>,
    flavor: Flavor,
) -> usize {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let m = mntr(e, OBSERVER);
        let master = m
            .get("zk_observer_master_id")
            .and_then(|v| v.parse::<usize>().ok())
            .and_then(|sid| sid.checked_sub(1));
        if m.get("zk_server_state").map(String::as_str) == Some("observer") {
            if let Some(i) = master.filter(|&i| i != leader && Some(i) != not && i < OBSERVER) {
                // And that follower lists it.
                if observer_sids(&observers(e, i)) == vec![OBSERVER as u64 + 1] {
                    return i;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "{flavor}: the observer has no learner master but the leader {leader} (not {not:?}): {m:?}\n{}",
            e.log_tail(OBSERVER, 40)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What a client of the observer sees in the scenario, for comparison.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    read_after_leader_write: Vec<u8>,
    watch_event: EventType,
    written_through_observer: Vec<u8>,
    after_failover: Vec<(String, Vec<u8>)>,
}

async fn scenario(flavor: Flavor) -> (Seen, Vec<(String, String)>) {
    let port = free_port();
    let opts = common::ensemble_options(flavor)
        .observers(1)
        .distinct_loopback()
        .admin_server()
        .cfg(format!("observerMasterPort={port}"));
    let mut e = start_ensemble(flavor, 4, opts)
        .unwrap_or_else(|err| panic!("cannot start a {flavor} ensemble: {err:#}"));
    let leader = e.wait_for_leader(Duration::from_secs(60)).unwrap();
    let master = wait_for_learner_master(e.as_ref(), leader, None, flavor);
    let mut figures = Vec::new();
    let m = mntr(e.as_ref(), master);
    figures.push((
        "follower zk_synced_observers".to_string(),
        m.get("zk_synced_observers").cloned().unwrap_or_default(),
    ));
    let l = mntr(e.as_ref(), leader);
    figures.push((
        "leader zk_synced_observers".to_string(),
        l.get("zk_synced_observers").cloned().unwrap_or_default(),
    ));
    figures.push((
        "leader observers".to_string(),
        format!("{:?}", observer_sids(&observers(e.as_ref(), leader))),
    ));
    figures.push((
        "follower observers synced_observers".to_string(),
        observers(e.as_ref(), master)["synced_observers"].to_string(),
    ));
    figures.push((
        "observer zabstate".to_string(),
        zabstate(e.as_ref(), OBSERVER),
    ));

    let acl = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let on_leader = connect(&e.addr(leader).to_string()).await;
    let on_observer = connect(&e.addr(OBSERVER).to_string()).await;
    // Written on the leader, read on the observer.
    on_leader.create("/om", b"from-leader", &acl).await.unwrap();
    on_observer.sync("/om").await.unwrap();
    let (read, _) = on_observer.get_data("/om").await.unwrap();
    // A watch on the observer fires for a write on the leader.
    let (_, _, watch) = on_observer.get_and_watch_data("/om").await.unwrap();
    on_leader.set_data("/om", b"changed", None).await.unwrap();
    let event = within("the observer's watch", watch.changed()).await;
    // A write through the observer, read on the leader.
    on_observer
        .create("/om-via-observer", b"from-observer", &acl)
        .await
        .unwrap();
    on_leader.sync("/om-via-observer").await.unwrap();
    let (via, _) = on_leader.get_data("/om-via-observer").await.unwrap();
    drop(on_observer);

    // The learner master dies: the observer moves to the other follower.
    e.kill(master);
    let moved = wait_for_learner_master(e.as_ref(), leader, Some(master), flavor);
    figures.push((
        "new follower zk_synced_observers".to_string(),
        mntr(e.as_ref(), moved)
            .get("zk_synced_observers")
            .cloned()
            .unwrap_or_default(),
    ));
    on_leader
        .create("/om-after", b"after-failover", &acl)
        .await
        .unwrap();
    let on_observer = connect(&e.addr(OBSERVER).to_string()).await;
    on_observer.sync("/").await.unwrap();
    let mut after = Vec::new();
    for path in ["/om", "/om-via-observer", "/om-after"] {
        let (data, _) = on_observer.get_data(path).await.unwrap();
        after.push((path.to_string(), data));
    }
    let seen = Seen {
        read_after_leader_write: read,
        watch_event: event.event_type,
        written_through_observer: via,
        after_failover: after,
    };
    (seen, figures)
}

// Administrator's Guide, "Cluster Options", observerMasterPort: the
// observer syncs from a follower, not the leader; reads, a watch and a
// write through it work; when its follower dies it moves to another
// follower and misses nothing. ZooKeeper 3.8 and wazoo show the client
// the same and report the same figures (the follower's
// `zk_synced_observers` and `observers`, the leader's zero).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_behind_a_follower_moves_on_when_it_dies() {
    let (zk_seen, zk_figures) = scenario(Flavor::Zookeeper).await;
    let (wz_seen, wz_figures) = scenario(Flavor::Wazoo).await;
    assert_eq!(
        zk_seen.after_failover,
        vec![
            ("/om".to_string(), b"changed".to_vec()),
            ("/om-via-observer".to_string(), b"from-observer".to_vec()),
            ("/om-after".to_string(), b"after-failover".to_vec()),
        ]
    );
    assert_eq!(zk_seen.read_after_leader_write, b"from-leader");
    assert_eq!(zk_seen.watch_event, EventType::NodeDataChanged);
    assert_eq!(wz_seen, zk_seen, "what a client of the observer sees");
    assert_eq!(wz_figures, zk_figures, "mntr and observers");
}
