//! `mntr` against a real Apache ZooKeeper 3.8 (ZooKeeper Administrator's
//! Guide, "The Four Letter Words", mntr): on a standalone server, an
//! ensemble's leader and a follower, wazoo prints ZooKeeper's keys, with
//! the same number formatting, except the ones docs/COMPATIBILITY.md
//! lists ("Metrics ZooKeeper has and wazoo does not"), and adds only its
//! own (`wazoo_*`, and 3.4's `zk_followers` on the leader).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use wazoo_testkit::{start_ensemble, Flavor};
use zookeeper_client::{Acls, CreateMode};

type Mntr = BTreeMap<String, String>;

fn mntr(addr: std::net::SocketAddr) -> Mntr {
    let text = wazoo_testkit::four_letter_word(addr, "mntr").expect("mntr answers");
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const SUMMARY_PARTS: [&str; 5] = ["avg", "min", "max", "cnt", "sum"];

/// The metric names behind `mntr`'s keys: `zk_` dropped, a summary's
/// `avg_`/`min_`/`max_`/`cnt_`/`sum_`/`pNN_` keys folded into its name,
/// and the per-learner and per-namespace summaries into theirs.
fn metric_names(m: &Mntr) -> BTreeSet<String> {
    let keys: BTreeSet<&str> = m
        .keys()
        .map(|k| k.strip_prefix("zk_").unwrap_or(k))
        .collect();
    keys.iter()
        .map(|k| {
            let summary = k.split_once('_').and_then(|(part, rest)| {
                let is_part =
                    SUMMARY_PARTS.contains(&part) || ["p50", "p95", "p99", "p999"].contains(&part);
                let all = SUMMARY_PARTS
                    .iter()
                    .all(|p| keys.contains(format!("{p}_{rest}").as_str()));
                (is_part && all).then_some(rest)
            });
            let name = summary.unwrap_or(k);
            if let Some((sid, rest)) = name.split_once("_learner_handler") {
                if sid.chars().all(|c| c.is_ascii_digit()) {
                    return format!("learner_handler{rest}");
                }
            }
            for set in ["write_per_namespace", "read_per_namespace"] {
                if name.ends_with(&format!("_{set}")) {
                    return set.to_string();
                }
            }
            name.to_string()
        })
        .collect()
}

/// The metrics docs/COMPATIBILITY.md says wazoo does not have.
fn documented_missing() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/COMPATIBILITY.md"
    ))
    .unwrap();
    let section = doc
        .split("### Metrics ZooKeeper has and wazoo does not")
        .nth(1)
        .expect("docs/COMPATIBILITY.md has the section");
    let section = section.split("\n#").next().unwrap();
    let names: BTreeSet<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(name, _)| name.to_string())
        .collect();
    assert!(names.len() > 50, "the table was read: {names:?}");
    names
}

#[derive(Debug, PartialEq)]
enum Format {
    Integer,
    Float,
    Text,
}

fn format_of(v: &str) -> Format {
    if v.parse::<i64>().is_ok() {
        Format::Integer
    } else if v.parse::<f64>().is_ok() {
        Format::Float
    } else {
        Format::Text
    }
}

/// A write and a read under a top-level node, so that ZooKeeper's
/// per-namespace summaries appear.
async fn touch(addr: std::net::SocketAddr) {
    let zk = common::connect(&addr.to_string()).await;
    zk.create(
        "/mntr-keys",
        b"x",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    zk.get_data("/mntr-keys").await.unwrap();
}

/// Standalone, leader, follower: each role's `mntr`.
async fn mntr_by_role(flavor: Flavor) -> Vec<(&'static str, Mntr)> {
    let server = common::start(flavor);
    touch(server.addr()).await;
    let standalone = mntr(server.addr());
    drop(server);

    let e = start_ensemble(flavor, 3, common::options(flavor))
        .unwrap_or_else(|err| panic!("cannot start a {flavor} ensemble: {err:#}"));
    let leader = e.wait_for_leader(Duration::from_secs(60)).unwrap();
    touch(e.addr(leader)).await;
    let follower = (leader + 1) % 3;
    let deadline = Instant::now() + Duration::from_secs(30);
    let (l, f) = loop {
        let (l, f) = (mntr(e.addr(leader)), mntr(e.addr(follower)));
        let synced = l.get("zk_synced_followers").map(String::as_str) == Some("2");
        let serving = f.get("zk_peer_state").map(String::as_str) == Some("following - broadcast");
        if (synced && serving) || Instant::now() > deadline {
            break (l, f);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(l["zk_server_state"], "leader", "{flavor}: {l:?}");
    assert_eq!(
        l.get("zk_peer_state").map(String::as_str),
        Some("leading - broadcast"),
        "{flavor}"
    );
    assert_eq!(
        f.get("zk_peer_state").map(String::as_str),
        Some("following - broadcast"),
        "{flavor}"
    );
    vec![("standalone", standalone), ("leader", l), ("follower", f)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mntr_has_zookeepers_keys() {
    let documented = documented_missing();
    let zk = mntr_by_role(Flavor::Zookeeper).await;
    let wazoo = mntr_by_role(Flavor::Wazoo).await;
    let mut seen_on_zookeeper = BTreeSet::new();
    for ((role, z), (_, w)) in zk.iter().zip(&wazoo) {
        let (zn, wn) = (metric_names(z), metric_names(w));
        seen_on_zookeeper.extend(zn.iter().cloned());
        let extras: Vec<_> = wn
            .difference(&zn)
            .filter(|n| {
                let leaders_34_key = *role == "leader" && *n == "followers";
                !(n.starts_with("wazoo_") || leaders_34_key)
            })
            .collect();
        assert!(
            extras.is_empty(),
            "{role}: wazoo's keys ZooKeeper has not: {extras:?}"
        );
        let missing: BTreeSet<_> = zn.difference(&wn).cloned().collect();
        let expected: BTreeSet<_> = documented.intersection(&zn).cloned().collect();
        assert_eq!(
            missing,
            expected,
            "{role}: ZooKeeper's keys wazoo lacks (left) against docs/COMPATIBILITY.md (right); \
             undocumented: {:?}, documented but present: {:?}",
            missing.difference(&expected).collect::<Vec<_>>(),
            expected.difference(&missing).collect::<Vec<_>>()
        );
        for (k, v) in w.iter().filter(|(k, _)| z.contains_key(*k)) {
            assert_eq!(
                format_of(v),
                format_of(&z[k]),
                "{role}: {k} is {v:?} on wazoo, {:?} on ZooKeeper",
                z[k]
            );
        }
    }
    let stale: Vec<_> = documented.difference(&seen_on_zookeeper).collect();
    assert!(
        stale.is_empty(),
        "docs/COMPATIBILITY.md lists metrics ZooKeeper did not print: {stale:?}"
    );
    // The figures mean the same: the tree and the ensemble.
    for ((role, z), (_, w)) in zk.iter().zip(&wazoo) {
        for k in ["zk_znode_count", "zk_ephemerals_count", "zk_quorum_size"] {
            assert_eq!(z.get(k), w.get(k), "{role}: {k}");
        }
    }
    let leader = &wazoo[1].1;
    assert_eq!(leader["zk_learners"], "2");
    assert!(leader["zk_cnt_updatelatency"].parse::<u64>().unwrap() >= 1);
    assert!(leader["zk_cnt_election_time"].parse::<u64>().unwrap() >= 1);
    assert!(leader["zk_looking_count"].parse::<u64>().unwrap() >= 1);
}
