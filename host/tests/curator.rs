//! Apache Curator (Debian's `libcurator-framework-java` and
//! `libcurator-recipes-java`, 5.4) on a standalone server and a 3-member
//! ensemble of Apache ZooKeeper 3.8 and wazoo: the framework's basic
//! operations (ZooKeeper Programmer's Guide, "ZNodes" and "Multi"),
//! InterProcessMutex ("ZooKeeper Recipes and Solutions", "Locks"),
//! LeaderLatch ("Leader Election"), PathChildrenCache ("ZooKeeper
//! Watches") and CuratorCache ("Persistent, Recursive Watches"). The
//! program is tests/java/CuratorPins.java; every target must print
//! ZooKeeper 3.8's lines, written out below.

mod common;

use common::Target;

/// What CuratorPins prints against ZooKeeper 3.8 (paths relative to its
/// base node).
const EXPECTED: &[&str] = &[
    "create with parents: /fw/a/b",
    "create again: NODEEXISTS",
    "get: x version 0",
    "set stale: BADVERSION",
    "set: 1",
    "exists missing: null",
    "delete non-empty: NOTEMPTY",
    "ephemeral sequential: /fw/s-0000000001",
    "protected name: true",
    "children: [_c_...-p, a, s-0000000001]",
    "transaction with a stale check: BADVERSION",
    "nothing created: null",
    "transaction: [CREATE /fw/t 0, CHECK /fw/a/b 0, SET_DATA /fw/a/b 0]",
    "deleted with children: null",
    "first acquires: true",
    "reentrant: true",
    "participants: 1",
    "second times out: false",
    "still held after one release: true",
    "second still waits: true",
    "second acquires once released: true",
    "first holds: false",
    "lock nodes left: 0",
    "a leads: true",
    "participants: 2",
    "b leads: false",
    "leader seen by b: a",
    "b leads after a closed: true",
    "leader now: b",
    "path children cache: CHILD_ADDED /pcc/before 0",
    "path children cache: INITIALIZED 1",
    "path children cache: CHILD_ADDED /pcc/x 1",
    "path children cache: CHILD_UPDATED /pcc/x 2",
    "path children cache: CHILD_REMOVED /pcc/x 2",
    "path children cache: CHILD_REMOVED /pcc/before 0",
    "cached children: 0",
    "curator cache: created /cc root",
    "curator cache: initialized",
    "curator cache: created /cc/a 1",
    "curator cache: created /cc/a/deep 2",
    "curator cache: changed /cc/a/deep 3 was 2",
    "curator cache: deleted /cc/a/deep 3",
    "curator cache: deleted /cc/a 1",
    "cached nodes: 1",
];

async fn curator_recipes_and_caches_behave_as_on_zookeeper(target: Target) {
    let hosts = common::shared(target);
    let lines = tokio::task::spawn_blocking(move || {
        let classes = tempfile::tempdir().unwrap();
        common::run_java(
            classes.path(),
            "CuratorPins",
            common::CURATOR_CLASSPATH,
            &[&hosts, "/curator-pins"],
        )
    })
    .await
    .unwrap();
    common::assert_lines(target, &lines, EXPECTED);
}

on_all! {
    curator_recipes_and_caches_behave_as_on_zookeeper,
}
