//! Prep and apply share one set of rules, and a committed txn the tree
//! refuses anyway is an error result, never a stopped member (as
//! ZooKeeper's DataTree records a failed txn's error and goes on).

use super::*;
use crate::tree::{check_txn, ApplyError, MAX_TTL_MS};
use crate::txn::{CreateTxn, NodeKind, Txn, TxnHeader, TxnRecord};

fn create_ttl(path: &str, ttl: i64) -> Request {
    Request::CreateTtl(CreateRequest {
        path: path.into(),
        data: Some(vec![]),
        acl: Acl::open_unsafe(),
        flags: CreateMode::PersistentWithTtl.flags(),
        ttl: Some(ttl),
    })
}

fn record(zxid: i64, session_id: i64, txn: Txn) -> TxnRecord {
    TxnRecord {
        header: TxnHeader {
            session_id,
            cxid: 1,
            zxid,
            time_ms: 1_000_000,
        },
        txn,
    }
}

fn create_txn(path: &str, kind: NodeKind) -> Txn {
    Txn::Create(CreateTxn {
        path: path.into(),
        data: Some(b"x".to_vec()),
        acl: Acl::open_unsafe(),
        ephemeral_owner: 0,
        parent_cversion: 1,
        kind,
    })
}

// ZooKeeper Programmer's Guide, "TTL Nodes": a TTL is at most
// EphemeralType.TTL's maximum (2^40 - 1 ms); ZooKeeper answers
// BadArguments past it. The same range is what apply accepts, so such a
// create never becomes a txn.
#[test]
fn a_ttl_past_zookeepers_maximum_is_refused_in_prep_and_writes_go_on() {
    let mut h = Harness::default();
    h.connect(1);
    assert_eq!(
        err(h.call(1, create_ttl("/t", 1 << 40))),
        ErrorCode::BadArguments
    );
    assert_eq!(err(h.call(1, create_ttl("/t", 0))), ErrorCode::BadArguments);
    ok(h.call(1, create_ttl("/t", MAX_TTL_MS)));
    ok(h.call(1, create("/after", b"", CreateMode::Persistent)));
    assert!(h.server.fatal().is_none());
    assert_eq!(h.server.stats.txns_refused, 0);
}

// A recipe's writes are checked against jute.maxbuffer as a client's frame
// is (ZooKeeper Administrator's Guide, "Unsafe Options", jute.maxbuffer):
// node data over it is refused in prep with BadArguments.
#[test]
fn node_data_over_jute_maxbuffer_is_refused_in_prep() {
    let mut h = Harness::new(ServerConfig {
        max_buffer_bytes: 1024,
        ..ServerConfig::default()
    });
    h.connect(1);
    let big = vec![7u8; 1025];
    assert_eq!(
        err(h.call(1, create("/big", &big, CreateMode::Persistent))),
        ErrorCode::BadArguments
    );
    ok(h.call(1, create("/n", &big[..1024], CreateMode::Persistent)));
    let set = Request::SetData {
        path: "/n".into(),
        data: Some(big),
        version: -1,
    };
    assert_eq!(err(h.call(1, set)), ErrorCode::BadArguments);
}

// The rules apply checks without looking at the tree are one function that
// prep calls too: each fault it finds maps to the code ZooKeeper's prep
// answers for it.
#[test]
fn the_shared_txn_rules_refuse_what_apply_refuses_with_zookeepers_codes() {
    let bad_ttl = create_txn("/t", NodeKind::Ttl { ttl_ms: 1 << 40 });
    assert_eq!(
        check_txn(&bad_ttl).unwrap_err().code(),
        ErrorCode::BadArguments
    );
    let bad_path = create_txn("/a//b", NodeKind::Regular);
    assert_eq!(
        check_txn(&bad_path).unwrap_err().code(),
        ErrorCode::BadArguments
    );
    let mut no_acl = create_txn("/a", NodeKind::Regular);
    if let Txn::Create(c) = &mut no_acl {
        c.acl.clear();
    }
    assert_eq!(
        check_txn(&no_acl).unwrap_err().code(),
        ErrorCode::InvalidAcl
    );
    let owned_container = Txn::Create(CreateTxn {
        ephemeral_owner: 5,
        ..match create_txn("/c", NodeKind::Container) {
            Txn::Create(c) => c,
            _ => unreachable!(),
        }
    });
    assert_eq!(
        check_txn(&owned_container).unwrap_err().code(),
        ErrorCode::BadArguments
    );
    let root = Txn::Delete { path: "/".into() };
    assert_eq!(check_txn(&root).unwrap_err(), ApplyError::DeleteRoot);
    let multi = Txn::Multi(vec![create_txn("/ok", NodeKind::Regular), bad_ttl]);
    match check_txn(&multi).unwrap_err() {
        ApplyError::Multi { index: 1, error } => assert_eq!(error.code(), ErrorCode::BadArguments),
        other => panic!("expected op 1 of the multi to fail, got {other:?}"),
    }
    assert!(check_txn(&create_txn("/ok", NodeKind::Ttl { ttl_ms: MAX_TTL_MS })).is_ok());
}

// A log written by a build whose prep let a bad txn through (the poison
// txn: a createTTL with ttl = 2^40) must not make a member refuse its own
// log: replaying it changes nothing, and the txns after it apply.
#[test]
fn replaying_a_txn_the_tree_refuses_changes_nothing_and_recovery_goes_on() {
    let mut s = Server::new(ServerConfig::default(), Now::same(1_000_000));
    let session = 0x0100_0000_0000_0001;
    s.replay(&record(
        1,
        session,
        Txn::CreateSession {
            timeout_ms: 30_000,
            verifier: None,
        },
    ))
    .unwrap();
    let before = s.tree().node_count();
    s.replay(&record(
        2,
        session,
        create_txn("/t", NodeKind::Ttl { ttl_ms: 1 << 40 }),
    ))
    .expect("a refused txn is replayed, not fatal");
    s.replay(&record(
        3,
        session,
        create_txn("/missing/child", NodeKind::Regular),
    ))
    .expect("a refused txn is replayed, not fatal");
    assert_eq!(
        s.tree().node_count(),
        before,
        "a refused txn changes no node"
    );
    s.replay(&record(4, session, create_txn("/ok", NodeKind::Regular)))
        .unwrap();
    assert!(s.tree().exists("/ok"));
    assert!(!s.tree().exists("/t"));
    assert_eq!(s.stats.txns_refused, 2);
    assert_eq!(s.last_zxid(), Zxid(4));
    s.tree().check_invariants().unwrap();
}

// The same on a follower: a committed txn that does not fit the tree is
// applied as an error result on every member alike (every member refuses
// it against the same tree), and the member keeps applying what follows.
#[test]
fn a_follower_applies_a_refused_committed_txn_as_an_error_and_keeps_going() {
    let mut s = Server::new(ServerConfig::default(), Now::same(1_000_000));
    s.handle(
        Input::Role(Role::Follower { leader: 2 }),
        Now::same(1_000_000),
    );
    let _ = s.take_outputs();
    let session = 0x0200_0000_0000_0001;
    let commit = |s: &mut Server, zxid: i64, txn: Txn| {
        let record = record(zxid, session, txn).encode();
        let zxid = Zxid::from_wire(zxid);
        s.handle(Input::Committed { zxid, record }, Now::same(1_000_000));
        let _ = s.take_outputs();
    };
    commit(
        &mut s,
        0x1_0000_0001,
        Txn::CreateSession {
            timeout_ms: 30_000,
            verifier: None,
        },
    );
    commit(
        &mut s,
        0x1_0000_0002,
        create_txn("/t", NodeKind::Ttl { ttl_ms: 1 << 40 }),
    );
    commit(&mut s, 0x1_0000_0003, create_txn("/ok", NodeKind::Regular));
    assert_eq!(s.fatal(), None, "a refused txn never stops the member");
    assert!(s.tree().exists("/ok") && !s.tree().exists("/t"));
    assert_eq!(s.stats.txns_refused, 1);
}

// ZooKeeper Programmer's Guide, "Sequence Nodes -- Unique Naming": the
// counter is a signed int that overflows past 2147483647. The creates at
// the overflow are named as ZooKeeper names them (%010d of the counter,
// then of the wrapped one, -2147483648), and their txns apply: the rule
// prep and apply share has no case that prep passes and apply refuses.
#[test]
fn a_sequential_create_at_the_counters_overflow_is_named_and_applies() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(1, create("/p", b"", CreateMode::Persistent)));
    // A child whose create left the parent's counter at i32::MAX.
    let next = h.server.last_zxid().next().to_wire();
    let mut parent_at_max = create_txn("/p/last", NodeKind::Regular);
    if let Txn::Create(c) = &mut parent_at_max {
        c.parent_cversion = i32::MAX;
    }
    h.server.replay(&record(next, 0, parent_at_max)).unwrap();
    for want in ["/p/n-2147483647", "/p/n--2147483648"] {
        match ok(h.call(1, create("/p/n-", b"", CreateMode::PersistentSequential))) {
            Response::Create { path } | Response::Create2 { path, .. } => assert_eq!(path, want),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(h.server.stats.txns_refused, 0);
    assert!(h.server.fatal().is_none());
    h.server.tree().check_invariants().unwrap();
}
