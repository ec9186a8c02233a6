//! The AdminServer's `restore` (ZooKeeper 3.9; Administrator's Guide,
//! "The AdminServer", restore) as the pipeline makes and applies it: a txn
//! whose snapshot replaces the tree and the sessions, closes every client
//! connection, and is refused without changing anything when its snapshot
//! does not load.

use super::*;
use crate::txn::RestoreTxn;
use std::sync::Arc;

/// A restore of `job`'s state, as the shell makes it from a snapshot file.
fn restore_of(job: &SnapshotJob, token: u64) -> Box<RestoreTxn> {
    let mut body = Vec::new();
    crate::snapshot::write_snapshot_body(job, &mut body).unwrap();
    Box::new(RestoreTxn {
        token,
        snapshot_zxid: job.zxid.to_wire(),
        body_version: crate::snapshot::SNAPSHOT_FORMAT,
        sessions: job.sessions.clone(),
        body: Arc::from(body),
    })
}

fn data(h: &Harness, path: &str) -> Option<Vec<u8>> {
    h.server.tree().get_data(path).and_then(|(d, _)| d)
}

#[test]
fn a_restore_puts_back_the_snapshots_tree_and_sessions_at_a_new_zxid() {
    let mut h = Harness::default();
    let kept = h.connect(1).session_id;
    ok(h.call(1, create("/a", b"1", CreateMode::Persistent)));
    ok(h.call(1, create("/a/b", b"", CreateMode::Persistent)));
    let job = h.server.snapshot_job();
    // Changes the restore undoes, by a session the snapshot does not hold.
    let later = h.connect(2).session_id;
    ok(h.call(
        2,
        Request::SetData {
            path: "/a".into(),
            data: Some(b"2".to_vec()),
            version: -1,
        },
    ));
    ok(h.call(2, create("/c", b"", CreateMode::Ephemeral)));
    let before = h.server.last_zxid();

    h.step(Input::Restore(restore_of(&job, 7)));
    let zxid = Zxid(before.0 + 1);
    assert_eq!(h.restored, vec![(7, zxid, None)]);
    assert_eq!(h.server.last_zxid(), zxid, "the zxid goes on, never back");
    assert_eq!(data(&h, "/a"), Some(b"1".to_vec()));
    assert!(h.server.tree().stat("/a/b").is_some());
    assert!(
        h.server.tree().stat("/c").is_none(),
        "the later ephemeral is gone"
    );
    h.server.tree().check_invariants().unwrap();
    let mut closed = h.closed.clone();
    closed.sort_unstable();
    assert_eq!(closed, vec![1, 2], "every connection is closed");
    assert!(h.server.sessions().get(kept).is_some());
    assert!(
        h.server.sessions().get(later).is_none(),
        "a session the snapshot does not hold is gone"
    );
    // The digest of the restored tree is logged at its zxid.
    assert!(h.server.digest_log().any(|(z, _)| z == zxid));
}

#[test]
fn a_restore_whose_snapshot_does_not_load_changes_nothing() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(1, create("/a", b"1", CreateMode::Persistent)));
    let mut bad = restore_of(&h.server.snapshot_job(), 9);
    bad.body = Arc::from(&b"not a snapshot body"[..]);
    let nodes = h.server.tree().node_count();
    h.step(Input::Restore(bad));
    let [(9, _, Some(why))] = h.restored.as_slice() else {
        panic!("{:?}", h.restored);
    };
    assert!(why.contains("does not load"), "{why}");
    assert_eq!(h.server.tree().node_count(), nodes);
    assert_eq!(data(&h, "/a"), Some(b"1".to_vec()));
    assert!(h.closed.is_empty(), "no connection was closed");
    // A snapshot over the bound is refused before it is proposed.
    let mut big = restore_of(&h.server.snapshot_job(), 10);
    big.body = Arc::from(vec![0u8; RESTORE_BYTES_MAX + 1]);
    let zxid = h.server.last_zxid();
    h.step(Input::Restore(big));
    assert_eq!(h.server.last_zxid(), zxid, "no txn");
    assert!(
        matches!(&h.restored[1], (10, _, Some(why)) if why.contains(&RESTORE_BYTES_MAX.to_string())),
        "{:?}",
        h.restored
    );
}

#[test]
fn a_follower_forwards_a_restore_and_a_member_without_a_leader_refuses_it() {
    let job = Harness::default().server.snapshot_job();
    let mut s = Server::new(ServerConfig::default(), Now::same(1_000_000));
    s.set_ensemble();
    s.handle(Input::Restore(restore_of(&job, 3)), Now::same(1_000_000));
    match s.take_outputs().as_slice() {
        [Output::Restored {
            token: 3,
            error: Some(_),
            ..
        }] => {}
        other => panic!("{other:?}"),
    }
    s.handle(
        Input::Role(Role::Follower { leader: 2 }),
        Now::same(1_000_000),
    );
    s.take_outputs();
    s.handle(Input::Restore(restore_of(&job, 4)), Now::same(1_000_000));
    let out = s.take_outputs();
    assert!(
        matches!(out.as_slice(), [Output::ToLeader(PeerMsg::Restore(r))] if r.token == 4),
        "{out:?}"
    );
}
