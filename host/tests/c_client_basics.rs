//! ZooKeeper's C client (libzookeeper-mt, Debian's `libzookeeper-mt-dev`)
//! through a session of basic operations and watches
//! (`tests/c_client/basics.c`, compiled at test time), on a standalone
//! server and a 3-member ensemble of Apache ZooKeeper 3.8 and wazoo: every
//! target prints the same transcript, ZooKeeper 3.8's, line by line. It
//! covers ZooKeeper Programmer's Guide, "ZNodes" (versions, ephemeral and
//! sequential nodes), "ZooKeeper Watches" (data, exists and child watches,
//! one event per watch, events of one change in ZooKeeper's order), "Multi"
//! ops (all or nothing, a result per op), "ZooKeeper access control using
//! ACLs" (the creator's digest ACL) and "ZooKeeper Sessions" (the
//! ephemerals of a closed session go, with their events).

mod common;

use common::Target;

/// What ZooKeeper 3.8 prints for basics.c (paths relative to the test's
/// base node; the sequential name is the parent's child count at the
/// create, three).
const TRANSCRIPT: &[&str] = &[
    "create base: ok",
    "create a: ok /a",
    "create a again: node exists",
    "create under a missing parent: no node",
    "get a (watch): ok data 'v0' version 0 dataLength 2 numChildren 0 ephemeral no",
    "other sets a at version 0: ok",
    "event: changed /a",
    "set a at version 0 again: bad version",
    "set a at any version: ok",
    "get a: ok data 'v2' version 2 dataLength 2 numChildren 0 ephemeral no",
    "sentinel /sentinel-1: ok",
    "event: created /sentinel-1",
    "exists b (watch): no node",
    "other creates b with null data: ok",
    "event: created /b",
    "get b: ok data '' version 0 dataLength 0 numChildren 0 ephemeral no",
    "children of base (watch): ok [a b sentinel-1]",
    "other creates an ephemeral sequential s-: ok /s-0000000003",
    "event: child (base)",
    "children of base (watch): ok [a b s-0000000003 sentinel-1]",
    "exists the sequential (watch): ok ephemeral yes",
    "other closed its session",
    "event: deleted /s-0000000003",
    "event: child (base)",
    "children of base: ok [a b sentinel-1]",
    "delete a at version 5: bad version",
    "delete base with children: not empty",
    "create ephemeral e: ok",
    "create a child of an ephemeral: no children for ephemerals",
    "multi create c, set b, check a at 7: bad version results ok ok bad version",
    "exists c: no node",
    "multi create c, set b, check a at 2: ok results ok ok ok",
    "get c: ok data 'c' version 0 dataLength 1 numChildren 0 ephemeral no",
    "get b: ok data 'b1' version 1 dataLength 2 numChildren 0 ephemeral no",
    "add auth digest alice: ok",
    "create private with the creator's ACL: ok",
    "alice gets private: ok data 'secret' version 0 dataLength 6 numChildren 0 ephemeral no",
    "anyone gets private: not authenticated",
    "anyone reads private's ACL: not authenticated",
    "anyone deletes private: ok",
    "sentinel /sentinel-2: ok",
    "event: created /sentinel-2",
    "done",
];

async fn the_c_client_transcript_is_zookeepers(target: Target) {
    let hosts = common::shared(target);
    let dir = tempfile::tempdir().unwrap();
    let bin = common::compile_c_client(dir.path(), "basics");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("timeout")
            .arg("120")
            .arg(&bin)
            .arg(&hosts)
            .arg("/c-basics")
            .output()
            .expect("the C program runs")
    })
    .await
    .unwrap();
    let got = String::from_utf8_lossy(&out.stdout);
    let got: Vec<&str> = got.lines().collect();
    common::assert_lines(target, &got, TRANSCRIPT);
    assert!(out.status.success(), "{target}: exit {:?}", out.status);
}

on_all! {
    the_c_client_transcript_is_zookeepers,
}
