//! Hierarchical quorums (ZooKeeper Administrator's Guide, "Cluster
//! Options", `group.x` and `weight.x`) and the Oracle Quorum of 2-member
//! ensembles (ZooKeeper's Oracle Quorum guide, `oraclePath`), on a
//! ZooKeeper 3.8 ensemble and a wazoo ensemble started from the same
//! zoo.cfg lines: which members must be up for writes to go through is
//! the groups' and weights' decision, or the oracle's, not a count of
//! members.

mod common;

use std::time::{Duration, Instant};

use wazoo_testkit::{start_ensemble, Flavor, TestEnsemble};
use zookeeper_client::{Acls, Client, CreateMode};

fn ensemble(flavor: Flavor, n: usize, lines: &[&str]) -> Box<dyn TestEnsemble> {
    let mut opts = common::ensemble_options(flavor);
    for l in lines {
        opts = opts.cfg(*l);
    }
    start_ensemble(flavor, n, opts)
        .unwrap_or_else(|e| panic!("cannot start a {flavor} ensemble: {e:#}"))
}

/// The client addresses of the members `up` (indexes).
fn hosts(e: &dyn TestEnsemble, up: &[usize]) -> String {
    up.iter()
        .map(|&i| e.addr(i).to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Tries to create `path` through any of `hosts` until one create is
/// acknowledged or `within` is over; whether one was. Each attempt
/// (connect and create) is bounded.
async fn a_write_goes_through(hosts: &str, path: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt = tokio::time::timeout(left.min(Duration::from_secs(4)), async {
            let zk = Client::connector()
                .with_session_timeout(Duration::from_secs(4))
                .connect(hosts)
                .await
                .ok()?;
            let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
            match zk.create(path, b"x", &opts).await {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => Some(()),
                Err(_) => None,
            }
        })
        .await;
        if let Ok(Some(())) = attempt {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Long enough for a new leader to be elected and serve after a member
/// dies (a few seconds at the tests' tickTime of 500 ms).
const RESUME: Duration = Duration::from_secs(30);
/// How long writes are tried where they must not go through: past the
/// time a leader takes to notice it lost its quorum (syncLimit x tickTime,
/// 2.5 s) and to fail to find one in an election.
const STOPPED: Duration = Duration::from_secs(8);

// "Cluster Options", `weight.x`: with `group.1=1:2:3` and `weight.3=0`,
// member 3's vote and acks count for nothing, so 1 and 2 are the only
// quorum: without member 1, members 2 and 3 (a majority by count) take no
// write; with 1 back, writes resume.
async fn a_zero_weight_member_does_not_make_a_quorum(flavor: Flavor) {
    let mut e = ensemble(flavor, 3, &["group.1=1:2:3", "weight.3=0"]);
    let all = hosts(e.as_ref(), &[0, 1, 2]);
    assert!(
        a_write_goes_through(&all, "/before", RESUME).await,
        "{flavor}: writes with every member up"
    );
    // The configuration shows the groups and every grouped member's
    // weight after the servers.
    let zk = common::connect(&all).await;
    let (config, _) = zk.get_config().await.unwrap();
    let config = String::from_utf8(config).unwrap();
    let hierarchy: Vec<&str> = config
        .lines()
        .filter(|l| l.starts_with("group.") || l.starts_with("weight."))
        .collect();
    assert_eq!(
        hierarchy,
        ["group.1=1:2:3", "weight.1=1", "weight.2=1", "weight.3=0"],
        "{flavor}: {config}"
    );
    drop(zk);
    e.kill(0);
    let left = hosts(e.as_ref(), &[1, 2]);
    assert!(
        !a_write_goes_through(&left, "/without-1", STOPPED).await,
        "{flavor}: a write went through without member 1 (2 and 3 are no quorum)"
    );
    e.restart(0)
        .unwrap_or_else(|err| panic!("{flavor}: restart member 1: {err:#}"));
    assert!(
        a_write_goes_through(&all, "/with-1-again", RESUME).await,
        "{flavor}: writes resume with member 1 back"
    );
}

// "Cluster Options", `group.x`: with groups {1}, {2}, {3,4,5}, a quorum is
// any two groups held. Members 1 and 2 alone (two of five) take writes
// once 3, 4 and 5 are gone; member 1 alone does not.
async fn two_groups_of_three_make_a_quorum_of_two_members(flavor: Flavor) {
    let mut e = ensemble(flavor, 5, &["group.1=1", "group.2=2", "group.3=3:4:5"]);
    let all = hosts(e.as_ref(), &[0, 1, 2, 3, 4]);
    assert!(
        a_write_goes_through(&all, "/before", RESUME).await,
        "{flavor}: writes with every member up"
    );
    for i in [2, 3, 4] {
        e.kill(i);
    }
    let two = hosts(e.as_ref(), &[0, 1]);
    assert!(
        a_write_goes_through(&two, "/groups-1-and-2", RESUME).await,
        "{flavor}: members 1 and 2 hold two of three groups"
    );
    e.kill(1);
    let one = hosts(e.as_ref(), &[0]);
    assert!(
        !a_write_goes_through(&one, "/group-1-alone", STOPPED).await,
        "{flavor}: a write went through with member 1 alone (one group of three)"
    );
}

// Oracle Quorum guide: in a 2-member ensemble each member reads its own
// oracle file (`oraclePath=oracle`, relative to each member's working
// directory on both servers). Once member 2 is gone, member 1 serves
// writes while its file says 1, stops when it says 0, and serves again
// when it says 1.
async fn the_survivor_of_two_serves_writes_only_while_its_oracle_says_1(flavor: Flavor) {
    let mut e = ensemble(flavor, 2, &["oraclePath=oracle"]);
    let both = hosts(e.as_ref(), &[0, 1]);
    assert!(
        a_write_goes_through(&both, "/both", RESUME).await,
        "{flavor}: writes with both members up (no oracle file yet)"
    );
    let oracle = e.work_dir(0).join("oracle");
    std::fs::write(&oracle, "1\n").unwrap();
    e.kill(1);
    let one = hosts(e.as_ref(), &[0]);
    assert!(
        a_write_goes_through(&one, "/oracle-1", RESUME).await,
        "{flavor}: member 1 alone serves writes while its oracle says 1"
    );
    std::fs::write(&oracle, "0\n").unwrap();
    // The leader asks its oracle every half tick (ZooKeeper) or tick.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !a_write_goes_through(&one, "/oracle-0", STOPPED).await,
        "{flavor}: a write went through while the oracle said 0"
    );
    std::fs::write(&oracle, "1\n").unwrap();
    assert!(
        a_write_goes_through(&one, "/oracle-1-again", RESUME).await,
        "{flavor}: writes resume when the oracle says 1 again"
    );
}

on_both!(
    the_survivor_of_two_serves_writes_only_while_its_oracle_says_1,
    a_zero_weight_member_does_not_make_a_quorum,
    two_groups_of_three_make_a_quorum_of_two_members,
);
