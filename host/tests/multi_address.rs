//! Several addresses per member (ZooKeeper Administrator's Guide, "Cluster
//! Options", `multiAddress.enabled` and the `server.x` line with `|`),
//! against Apache ZooKeeper 3.8's ensemble and wazoo's alike, on loopback:
//! member `i` on 127.0.0.1 and on 127.0.0.`i + 2`, each address pair with
//! ports of its own (docs/OPERATIONS.md, "Several addresses per member").

mod common;

use common::connect;

use std::time::Duration;

use wazoo_testkit::{start_ensemble, Flavor, MultiAddress, TestEnsemble};
use zookeeper_client::{Acls, CreateMode, EnsembleUpdate};

/// `super:test`, the super user of the reconfig test.
const SUPER_DIGEST: &str = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";

/// How long ZooKeeper 3.8 may take to form, or re-form, an ensemble whose
/// members list an unreachable address pair first. Its election link dials
/// one address of the set at random (`MultipleAddresses.getReachableOrOne`
/// says so: every loopback address counts as reachable), and after a
/// refused dial it waits for its next round of notifications, with a
/// backoff, so forming can take several rounds. wazoo dials every pair at
/// once and forms at once; the bound is for the oracle.
const FORMS_WITHIN: Duration = Duration::from_secs(120);

fn ensemble(flavor: Flavor, how: MultiAddress) -> Box<dyn TestEnsemble> {
    let opts = common::ensemble_options(flavor)
        .multi_address(how)
        .startup_timeout(FORMS_WITHIN)
        .cfg("reconfigEnabled=true");
    let opts = match flavor {
        Flavor::Wazoo => opts.cfg(format!(
            "DigestAuthenticationProvider.superDigest={SUPER_DIGEST}"
        )),
        Flavor::Zookeeper => opts.arg(format!(
            "-Dzookeeper.DigestAuthenticationProvider.superDigest={SUPER_DIGEST}"
        )),
    };
    start_ensemble(flavor, 3, opts)
        .unwrap_or_else(|e| panic!("cannot start a {flavor} ensemble ({how:?}): {e:#}"))
}

/// A write through every member, then every write read on every member
/// after a sync: the members replicate to each other.
async fn every_member_writes_and_reads(flavor: Flavor, e: &dyn TestEnsemble, tag: &str) {
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    for i in 0..e.len() {
        let zk = connect(&e.addr(i).to_string()).await;
        zk.create(&format!("/{tag}{i}"), b"", &opts)
            .await
            .unwrap_or_else(|err| panic!("{flavor}: create through member {i}: {err}"));
    }
    for i in 0..e.len() {
        let zk = connect(&e.addr(i).to_string()).await;
        zk.sync("/").await.unwrap();
        for j in 0..e.len() {
            assert!(
                zk.check_stat(&format!("/{tag}{j}"))
                    .await
                    .unwrap()
                    .is_some(),
                "{flavor}: /{tag}{j} on member {i}"
            );
        }
    }
}

/// Member `n`'s line of a `/zookeeper/config` text, without its client
/// part (which only wazoo's test ensembles give).
fn server_line(text: &str, n: usize) -> String {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("server.{n}=")))
        .unwrap_or_else(|| panic!("no server.{n} line in {text:?}"));
    line.split(';').next().unwrap().to_string()
}

// Administrator's Guide, "Cluster Options" (multiAddress.enabled): a
// 3-member ensemble whose members have two address pairs each elects a
// leader and serves, and `/zookeeper/config` shows each member's pairs
// joined by `|`, sorted by host, with the role once at the end (ZooKeeper
// 3.8's `QuorumServer.toString`), the same text on every member.
async fn members_with_two_addresses_each_elect_and_serve(flavor: Flavor) {
    let e = ensemble(flavor, MultiAddress::Working);
    e.wait_for_leader(Duration::from_secs(30)).unwrap();
    every_member_writes_and_reads(flavor, e.as_ref(), "two").await;
    let mut texts = Vec::new();
    for i in 0..3 {
        let zk = connect(&e.addr(i).to_string()).await;
        let (data, _) = zk.get_config().await.unwrap();
        let text = String::from_utf8(data).unwrap();
        for n in 1..=3 {
            let line = server_line(&text, n);
            let pairs: Vec<&str> = line
                .split_once('=')
                .unwrap()
                .1
                .strip_suffix(":participant")
                .unwrap_or_else(|| panic!("{flavor}: {line:?} ends with its role"))
                .split('|')
                .collect();
            assert_eq!(pairs.len(), 2, "{flavor}: {line:?}");
            assert!(
                pairs[0].starts_with("127.0.0.1:")
                    && pairs[1].starts_with(&format!("127.0.0.{}:", n + 1))
                    && pairs.iter().all(|p| p.split(':').count() == 3),
                "{flavor}: {line:?}"
            );
        }
        texts.push(text);
    }
    assert!(
        texts.windows(2).all(|w| w[0] == w[1]),
        "{flavor}: {texts:?}"
    );
}

// Administrator's Guide, "Cluster Options" (multiAddress.enabled): the
// other members list each member's first address pair with ports nothing
// listens on, so only the second pair reaches it; the ensemble forms over
// the second pairs, serves, and after its leader is killed elects another
// and takes the old one back, every link dialled again over the address
// that answers.
async fn the_ensemble_forms_over_the_address_that_works(flavor: Flavor) {
    let mut e = ensemble(flavor, MultiAddress::FirstUnreachable);
    let leader = e.wait_for_leader(FORMS_WITHIN).unwrap();
    every_member_writes_and_reads(flavor, e.as_ref(), "second").await;
    e.kill(leader);
    let next = wazoo_testkit::wait_for("another leader", FORMS_WITHIN, || {
        e.leader().filter(|&l| l != leader)
    })
    .unwrap_or_else(|err| panic!("{flavor}: {err:#}"));
    e.restart(leader)
        .unwrap_or_else(|err| panic!("{flavor}: the old leader rejoins: {err:#}"));
    assert_ne!(next, leader);
    every_member_writes_and_reads(flavor, e.as_ref(), "again").await;
}

// ZooKeeper Dynamic Reconfiguration, "Incremental mode", with the
// Administrator's Guide's `server.x` line of several address pairs: a
// reconfig adds an observer (not running, so no quorum is at stake) given
// two pairs in reverse host order and a role on the first only; every
// member then serves the same configuration, in which the line reads as
// ZooKeeper 3.8 prints it, to the letter.
async fn a_reconfig_adds_a_member_with_two_addresses(flavor: Flavor) {
    let e = ensemble(flavor, MultiAddress::Working);
    e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let zk = connect(&e.addr(0).to_string()).await;
    zk.auth("digest", b"super:test").await.unwrap();
    let (q1, e1, q2, e2, client) = (
        wazoo_testkit::free_port(),
        wazoo_testkit::free_port(),
        wazoo_testkit::free_port(),
        wazoo_testkit::free_port(),
        wazoo_testkit::free_port(),
    );
    let joiner = format!("server.4=127.0.0.9:{q2}:{e2}:observer|127.0.0.1:{q1}:{e1};{client}");
    zk.update_ensemble(
        EnsembleUpdate::Incremental {
            joinings: [joiner.as_str()].iter().copied(),
            leavings: [].iter().copied(),
        },
        None,
    )
    .await
    .unwrap_or_else(|err| panic!("{flavor}: reconfig {joiner}: {err}"));
    let want =
        format!("server.4=127.0.0.1:{q1}:{e1}|127.0.0.9:{q2}:{e2}:observer;0.0.0.0:{client}");
    let mut texts = Vec::new();
    for i in 0..3 {
        let zk = connect(&e.addr(i).to_string()).await;
        zk.sync("/zookeeper/config").await.unwrap();
        let (data, _) = zk.get_config().await.unwrap();
        let text = String::from_utf8(data).unwrap();
        assert!(
            text.lines().any(|l| l == want),
            "{flavor}: member {i}: {want:?} in {text:?}"
        );
        texts.push(text);
    }
    assert!(
        texts.windows(2).all(|w| w[0] == w[1]),
        "{flavor}: {texts:?}"
    );
}

on_both! {
    members_with_two_addresses_each_elect_and_serve,
    a_reconfig_adds_a_member_with_two_addresses,
    the_ensemble_forms_over_the_address_that_works,
}
