//! Tests of the data tree, each citing the section of ZooKeeper Programmer's Guide, "Data Model" ("Data
//! Model") whose rule it checks; ZooKeeper 3.8's `DataTree` is the oracle
//! for the details the seed leaves open.

use super::*;
use crate::txn::{CreateTxn, NodeKind, Txn, TxnHeader};
use wazoo_proto::{perms, Acl, ErrorCode, EventType, Stat};

const S1: i64 = 0x0100_0000_0000_0001;
const S2: i64 = 0x0100_0000_0000_0002;

/// A tree plus the zxid/time of the next txn, with pipeline-like helpers
/// (they compute the parent's next cversion as the pipeline does).
struct Fixture {
    tree: DataTree,
    zxid: i64,
}

fn hdr(session_id: i64, zxid: i64) -> TxnHeader {
    TxnHeader {
        session_id,
        cxid: 1,
        zxid,
        time_ms: 1_000_000 + zxid * 10,
    }
}

fn create_txn(tree: &DataTree, path: &str, data: &[u8], owner: i64, kind: NodeKind) -> Txn {
    let parent = wazoo_proto::path::parent(path);
    let pcv = tree
        .stored_cversion(parent)
        .map_or(0, |c| c.wrapping_add(1));
    Txn::Create(CreateTxn {
        path: path.to_string(),
        data: data.to_vec(),
        acl: Acl::open_unsafe(),
        ephemeral_owner: owner,
        parent_cversion: pcv,
        kind,
    })
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            tree: DataTree::new(),
            zxid: 0,
        }
    }

    fn next(&mut self, session: i64) -> TxnHeader {
        self.zxid += 1;
        hdr(session, self.zxid)
    }

    fn apply(&mut self, session: i64, txn: &Txn) -> Result<Vec<Trigger>, ApplyError> {
        let h = self.next(session);
        let r = self.tree.apply(&h, txn);
        self.tree.check_invariants().unwrap();
        r
    }

    /// Applies a txn that must fail, and checks it changed nothing.
    fn apply_err(&mut self, session: i64, txn: &Txn) -> ApplyError {
        let before = self.tree.clone();
        let before_bytes = snapshot_bytes(&self.tree);
        let e = self.apply(session, txn).unwrap_err();
        assert!(self.tree == before, "a failed txn changed the tree: {e}");
        assert_eq!(snapshot_bytes(&self.tree), before_bytes);
        assert_eq!(self.tree.ephemerals(S1), before.ephemerals(S1));
        assert_eq!(self.tree.reapable(i64::MAX), before.reapable(i64::MAX));
        e
    }

    fn create(&mut self, path: &str, data: &[u8]) -> Vec<Trigger> {
        let t = create_txn(&self.tree, path, data, 0, NodeKind::Regular);
        self.apply(S1, &t).unwrap()
    }

    fn create_kind(&mut self, path: &str, owner: i64, kind: NodeKind) {
        let t = create_txn(&self.tree, path, b"", owner, kind);
        self.apply(S1, &t).unwrap();
    }

    fn delete(&mut self, path: &str) -> Vec<Trigger> {
        self.apply(S1, &Txn::Delete { path: path.into() }).unwrap()
    }

    fn set_data(&mut self, path: &str, data: &[u8]) -> Vec<Trigger> {
        let v = self.tree.stat(path).unwrap().version + 1;
        let t = Txn::SetData {
            path: path.into(),
            data: data.to_vec(),
            version: v,
        };
        self.apply(S1, &t).unwrap()
    }

    fn stat(&self, path: &str) -> Stat {
        self.tree.stat(path).unwrap()
    }
}

fn trig(path: &str, event: EventType) -> Trigger {
    Trigger {
        path: path.into(),
        event,
        acl: std::sync::Arc::from(Vec::new()),
    }
}

// ZooKeeper Programmer's Guide, "ACL Permissions": a watcher must be able
// to READ the node an event is about. Each trigger carries the ACL to
// check, as ZooKeeper's DataTree hands it to the WatchManager: the node's
// own (as it was before a delete) and the parent's for children-changed.
#[test]
fn triggers_carry_the_acl_a_watcher_must_be_able_to_read() {
    let mut f = Fixture::new();
    f.create("/p", b"");
    let private = vec![Acl::new(perms::ALL, "digest", "alice:x")];
    let mut t = create_txn(&f.tree, "/p/s", b"", 0, NodeKind::Regular);
    if let Txn::Create(c) = &mut t {
        c.acl = private.clone();
    }
    let acls = |tr: &[Trigger]| -> Vec<(EventType, Vec<Acl>)> {
        tr.iter().map(|t| (t.event, t.acl.to_vec())).collect()
    };
    let created = f.apply(S1, &t).unwrap();
    assert_eq!(
        acls(&created),
        vec![
            (EventType::NodeCreated, private.clone()),
            (EventType::NodeChildrenChanged, Acl::open_unsafe()),
        ]
    );
    let changed = f.set_data("/p/s", b"x");
    assert_eq!(
        acls(&changed),
        vec![(EventType::NodeDataChanged, private.clone())]
    );
    let deleted = f.delete("/p/s");
    assert_eq!(
        acls(&deleted),
        vec![
            (EventType::NodeDeleted, private),
            (EventType::NodeChildrenChanged, Acl::open_unsafe()),
        ]
    );
}

fn snapshot_bytes(t: &DataTree) -> Vec<u8> {
    let mut v = Vec::new();
    t.snapshot().write_to(&mut v).unwrap();
    v
}

fn reload(t: &DataTree) -> DataTree {
    let bytes = snapshot_bytes(t);
    let back = DataTree::read_from(&mut bytes.as_slice()).unwrap();
    back.check_invariants().unwrap();
    back
}

// ----- the tree a server starts with -----------------------------------------

#[test]
fn a_fresh_tree_is_zookeeper_3_8_standalone() {
    let t = DataTree::new();
    t.check_invariants().unwrap();
    assert_eq!(t.node_count(), 4);
    assert_eq!(t.children("/").unwrap(), vec!["zookeeper"]);
    assert_eq!(t.children("/zookeeper").unwrap(), vec!["config", "quota"]);
    assert_eq!(
        t.children("/zookeeper/quota").unwrap(),
        Vec::<String>::new()
    );
    for (p, cversion) in [("/", -1), ("/zookeeper", -2), ("/zookeeper/quota", 0)] {
        let n = t.node(p).unwrap();
        assert_eq!(&*n.acl, Acl::open_unsafe().as_slice(), "{p}");
        assert!(n.data().is_empty());
        let s = &n.stat;
        assert_eq!(
            (s.czxid, s.mzxid, s.pzxid, s.ctime, s.mtime, s.version, s.aversion),
            (0, 0, 0, 0, 0, 0, 0),
            "{p}"
        );
        assert_eq!(s.ephemeral_owner, 0);
        // Stored cversion 0, reported as 2 * 0 - numChildren: what `stat /`
        // and `stat /zookeeper` print on a fresh ZooKeeper 3.8.
        assert_eq!((n.stored_cversion, s.cversion), (0, cversion), "{p}");
    }
    // ZOOKEEPER-2014: the config node is read-only, installed with
    // setACL(READ_ACL_UNSAFE, -1), hence aclVersion -1; empty standalone.
    let c = t.node("/zookeeper/config").unwrap();
    assert_eq!(&*c.acl, Acl::read_unsafe().as_slice());
    assert_eq!(c.stat.aversion, -1);
    assert_eq!(c.stat.version, 0);
    assert!(c.data().is_empty());
    assert_eq!(t.stat("/").unwrap().num_children, 1);
    assert_eq!(t.stat("/zookeeper").unwrap().num_children, 2);
    // zk_approximate_data_size of a fresh ZooKeeper: "/" + "/zookeeper" +
    // "/zookeeper/quota" + "/zookeeper/config" = 1 + 10 + 16 + 17.
    assert_eq!(t.approximate_data_size(), 44);
    assert_eq!(t.acl_cache_size(), 2);
    assert_eq!(t.all_children_number("/"), Some(3));
    assert_eq!(t.all_children_number("/zookeeper"), Some(2));
}

// ----- ZNodes, Time in ZooKeeper, ZooKeeper Stat Structure --------------------

#[test]
fn create_stamps_the_stat_from_the_header_and_txn() {
    // ZooKeeper Programmer's Guide, "Data Model", "Time in ZooKeeper" and "ZooKeeper Stat Structure": czxid,
    // mzxid, ctime, mtime come from the create; cversion counts children.
    let mut f = Fixture::new();
    let tr = f.create("/app", b"hello");
    assert_eq!(
        tr,
        vec![
            trig("/app", EventType::NodeCreated),
            trig("/", EventType::NodeChildrenChanged)
        ]
    );
    let s = f.stat("/app");
    assert_eq!(
        (s.czxid, s.mzxid, s.pzxid),
        (1, 1, 1),
        "pzxid of a new node is its czxid"
    );
    assert_eq!(
        (s.ctime, s.mtime),
        (1_000_010, 1_000_010),
        "mtime = ctime at create"
    );
    assert_eq!((s.version, s.cversion, s.aversion), (0, 0, 0));
    assert_eq!(
        (s.ephemeral_owner, s.data_length, s.num_children),
        (0, 5, 0)
    );
    let root = f.stat("/");
    assert_eq!(f.tree.stored_cversion("/"), Some(1));
    assert_eq!(
        (root.cversion, root.pzxid, root.num_children),
        (2 - 2, 1, 2)
    );
    assert_eq!(root.mzxid, 0, "a child does not modify the parent's data");

    f.create("/app/x", b"");
    let s = f.stat("/app");
    assert_eq!(f.tree.stored_cversion("/app"), Some(1));
    assert_eq!((s.cversion, s.pzxid, s.num_children, s.mzxid), (1, 2, 1, 1));
    assert_eq!(f.tree.node("/app").unwrap().data(), b"hello");
}

#[test]
fn set_data_replaces_the_data_and_takes_the_version_from_the_txn() {
    // ZooKeeper Programmer's Guide, "Data Model", "ZNodes": a write replaces all the data; each change of the
    // data increases the version. "Time in ZooKeeper": mzxid/mtime move.
    let mut f = Fixture::new();
    f.create("/n", b"one");
    let tr = f.set_data("/n", b"second value");
    assert_eq!(tr, vec![trig("/n", EventType::NodeDataChanged)]);
    let s = f.stat("/n");
    assert_eq!(
        (s.version, s.mzxid, s.mtime, s.czxid, s.ctime),
        (1, 2, 1_000_020, 1, 1_000_010)
    );
    assert_eq!(s.data_length, 12);
    assert_eq!(
        f.tree.get_data("/n").unwrap(),
        (b"second value".to_vec(), s)
    );
    // The txn carries the absolute version; apply does not increment.
    f.apply(
        S1,
        &Txn::SetData {
            path: "/n".into(),
            data: vec![],
            version: 41,
        },
    )
    .unwrap();
    assert_eq!(f.stat("/n").version, 41);
    assert_eq!(f.stat("/n").data_length, 0);
}

#[test]
fn set_acl_changes_the_acl_and_aversion_only() {
    // ZooKeeper Programmer's Guide, "Data Model", "Time in ZooKeeper": aversion counts ACL changes; ACL
    // changes are not data changes (mzxid/mtime/version stay) and fire no watch.
    let mut f = Fixture::new();
    f.create("/n", b"x");
    let acl = vec![Acl::new(perms::READ | perms::WRITE, "digest", "u:h")];
    let tr = f
        .apply(
            S1,
            &Txn::SetAcl {
                path: "/n".into(),
                acl: acl.clone(),
                aversion: 1,
            },
        )
        .unwrap();
    assert!(tr.is_empty());
    let s = f.stat("/n");
    assert_eq!(
        (s.aversion, s.version, s.mzxid, s.mtime),
        (1, 0, 1, 1_000_010)
    );
    assert_eq!(f.tree.acl("/n").unwrap(), acl);
}

#[test]
fn delete_moves_the_parent_pzxid_but_not_its_cversion() {
    // ZooKeeper 3.8 DataTree.deleteNode sets the parent's pzxid and leaves
    // its cversion alone ("we only set the cversion on create"), so the next
    // sequence number continues from the creates only.
    let mut f = Fixture::new();
    f.create("/q", b"");
    f.create("/q/a", b"");
    let tr = f.delete("/q/a");
    assert_eq!(
        tr,
        vec![
            trig("/q/a", EventType::NodeDeleted),
            trig("/q", EventType::NodeChildrenChanged)
        ]
    );
    let s = f.stat("/q");
    assert_eq!(f.tree.stored_cversion("/q"), Some(1), "creates only");
    assert_eq!((s.pzxid, s.num_children), (3, 0));
    // Reported as 2 * 1 - 0: a create and a delete, two changes.
    assert_eq!(s.cversion, 2);
    assert!(!f.tree.exists("/q/a"));
    assert_eq!(f.tree.stat("/q/a"), None);
}

#[test]
fn sequence_names_come_from_the_parent_cversion() {
    // ZooKeeper Programmer's Guide, "Data Model", "Sequence Nodes -- Unique Naming": %010d of a counter kept
    // by the parent, which overflows past 2147483647 to -2147483648.
    let mut f = Fixture::new();
    f.create("/q", b"");
    let mut names = Vec::new();
    for _ in 0..3 {
        let cv = f.tree.stored_cversion("/q").unwrap();
        let p = sequential_path("/q/job-", cv);
        f.create(&p, b"");
        names.push(p);
    }
    assert_eq!(
        names,
        [
            "/q/job-0000000000",
            "/q/job-0000000001",
            "/q/job-0000000002"
        ]
    );
    f.delete("/q/job-0000000000");
    let cv = f.tree.stored_cversion("/q").unwrap();
    assert_eq!(sequential_path("/q/job-", cv), "/q/job-0000000003");
    // What zkCli shows against ZooKeeper 3.8 after three creates and a
    // delete: cversion = 2 * 3 - 2.
    assert_eq!(f.stat("/q").cversion, 4);
    assert_eq!(sequential_path("/q/", i32::MAX), "/q/2147483647");
    assert_eq!(
        sequential_path("/q/", i32::MAX.wrapping_add(1)),
        "/q/-2147483648"
    );
    assert_eq!(
        sequential_path("/q/", -5),
        "/q/-000000005",
        "Java's %010d of -5"
    );

    // The tree stores whatever cversion the txn carries, wrapped ones too.
    let t = Txn::Create(CreateTxn {
        path: "/q/-2147483648".into(),
        data: vec![],
        acl: Acl::open_unsafe(),
        ephemeral_owner: 0,
        parent_cversion: i32::MIN,
        kind: NodeKind::Regular,
    });
    f.apply(S1, &t).unwrap();
    assert_eq!(f.tree.stored_cversion("/q"), Some(i32::MIN));
    assert_eq!(
        f.stat("/q").cversion,
        -3,
        "2 * i32::MIN - 3 wraps like Java"
    );
    assert_eq!(f.tree.children("/q").unwrap()[0], "-2147483648");
}

#[test]
fn children_are_sorted_and_counted_at_every_depth() {
    // ZooKeeper Programmer's Guide, "Data Model", "ZooKeeper Stat Structure": numChildren; getAllChildrenNumber.
    let mut f = Fixture::new();
    for p in ["/b", "/a", "/a/z", "/a/y", "/a/y/1", "/a.b", "/a0", "/ab"] {
        f.create(p, b"");
    }
    assert_eq!(f.tree.children("/a").unwrap(), vec!["y", "z"]);
    assert_eq!(
        f.tree.children("/").unwrap(),
        vec!["a", "a.b", "a0", "ab", "b", "zookeeper"]
    );
    assert_eq!(f.tree.children("/a/y/1").unwrap(), Vec::<String>::new());
    assert_eq!(f.tree.children("/nope"), None);
    assert_eq!(f.tree.children("a"), None);
    assert_eq!(f.tree.children(""), None);
    assert_eq!(f.tree.stat("/a/"), None);
    let (kids, stat) = f.tree.children_with_stat("/a").unwrap();
    assert_eq!((kids.len(), stat.num_children), (2, 2));
    assert_eq!(f.tree.all_children_number("/a"), Some(3));
    assert_eq!(f.tree.all_children_number("/a/y"), Some(1));
    assert_eq!(f.tree.all_children_number("/b"), Some(0));
    assert_eq!(f.tree.all_children_number("/"), Some(11));
    assert_eq!(f.tree.all_children_number("/missing"), None);
    assert_eq!(f.tree.node_count(), 12);
}

#[test]
fn approximate_data_size_counts_paths_and_data() {
    let mut f = Fixture::new();
    f.create("/abc", b"12345");
    assert_eq!(f.tree.approximate_data_size(), 44 + 4 + 5);
    f.set_data("/abc", b"1");
    assert_eq!(f.tree.approximate_data_size(), 44 + 4 + 1);
    f.delete("/abc");
    assert_eq!(f.tree.approximate_data_size(), 44);
}

#[test]
fn identical_acls_are_stored_once() {
    // ZooKeeper's ReferenceCountedACLCache: nodes share one copy of a list.
    let mut f = Fixture::new();
    f.create("/d", b"");
    for i in 0..200 {
        f.create(&format!("/d/{i}"), b"");
    }
    assert_eq!(f.tree.acl_cache_size(), 2, "open and read-only lists only");
    let custom = vec![Acl::new(perms::ALL, "ip", "10.0.0.1")];
    for i in 0..2 {
        f.apply(
            S1,
            &Txn::SetAcl {
                path: format!("/d/{i}"),
                acl: custom.clone(),
                aversion: 1,
            },
        )
        .unwrap();
    }
    assert_eq!(f.tree.acl_cache_size(), 3);
    f.delete("/d/0");
    assert_eq!(f.tree.acl_cache_size(), 3);
    f.delete("/d/1");
    assert_eq!(f.tree.acl_cache_size(), 2, "an unused list is dropped");
}

// ----- Ephemeral Nodes ----------------------------------------------------------

#[test]
fn ephemerals_are_owned_listed_and_deleted_with_their_session() {
    // ZooKeeper Programmer's Guide, "Data Model", "Ephemeral Nodes": they exist as long as the session, are
    // listed by getEphemerals, and cannot have children. "ZooKeeper Stat
    // Structure": ephemeralOwner is the session id.
    let mut f = Fixture::new();
    f.create("/svc", b"");
    for p in ["/svc/b", "/svc/a", "/e"] {
        f.create_kind(p, S1, NodeKind::Regular);
    }
    f.create_kind("/svc/c", S2, NodeKind::Regular);
    assert_eq!(f.stat("/svc/a").ephemeral_owner, S1);
    assert_eq!(
        f.tree.node_type("/svc/a"),
        Some(ZnodeType::Ephemeral { owner: S1 })
    );
    assert_eq!(f.tree.ephemerals(S1), vec!["/e", "/svc/a", "/svc/b"]);
    assert_eq!(f.tree.ephemerals(S2), vec!["/svc/c"]);
    assert_eq!(f.tree.ephemerals(7), Vec::<String>::new());
    assert_eq!(f.tree.sessions_with_ephemerals(), vec![S1, S2]);
    assert_eq!(f.tree.ephemeral_count(), 4);

    let child = create_txn(&f.tree, "/svc/a/x", b"", 0, NodeKind::Regular);
    assert_eq!(
        f.apply_err(S1, &child),
        ApplyError::EphemeralParent("/svc/a/x".into())
    );

    // createSession changes nothing in the tree.
    assert!(f
        .apply(S1, &Txn::CreateSession { timeout_ms: 30_000 })
        .unwrap()
        .is_empty());

    let tr = f.apply(S1, &Txn::CloseSession).unwrap();
    assert_eq!(
        tr,
        vec![
            trig("/e", EventType::NodeDeleted),
            trig("/", EventType::NodeChildrenChanged),
            trig("/svc/a", EventType::NodeDeleted),
            trig("/svc", EventType::NodeChildrenChanged),
            trig("/svc/b", EventType::NodeDeleted),
            trig("/svc", EventType::NodeChildrenChanged),
        ]
    );
    assert_eq!(f.tree.children("/svc").unwrap(), vec!["c"]);
    assert_eq!(f.tree.ephemerals(S1), Vec::<String>::new());
    assert_eq!(f.tree.sessions_with_ephemerals(), vec![S2]);
    let zxid = f.zxid;
    assert_eq!(
        f.stat("/svc").pzxid,
        zxid,
        "deletes of a close carry its zxid"
    );
    // Closing a session without ephemerals is a no-op.
    assert!(f.apply(S1, &Txn::CloseSession).unwrap().is_empty());
}

// ----- Container Nodes, TTL Nodes -------------------------------------------------

#[test]
fn containers_report_their_owner_and_are_reaped_once_used_and_empty() {
    // ZooKeeper Programmer's Guide, "Data Model", "Container Nodes": when the last child is deleted the
    // container becomes a candidate for deletion. ContainerManager: only
    // once cversion > 0, so a fresh container is not reaped before use.
    let mut f = Fixture::new();
    f.create_kind("/lock", 0, NodeKind::Container); // Stored as EphemeralType.CONTAINER (0x8000000000000000), shown as 0
                                                    // (getClientEphemeralOwner), as `stat` of a container shows.
    assert_eq!(f.stat("/lock").ephemeral_owner, 0);
    assert_eq!(ZnodeType::Container.persisted_ephemeral_owner(), i64::MIN);
    assert_eq!(f.tree.node_type("/lock"), Some(ZnodeType::Container));
    assert_eq!(f.tree.reapable(i64::MAX), Vec::<String>::new());
    // znode.container.maxNeverUsedIntervalMs, when configured.
    let mtime = f.stat("/lock").mtime;
    assert_eq!(f.tree.reapable_with(mtime + 100, 100), Vec::<String>::new());
    assert_eq!(f.tree.reapable_with(mtime + 101, 100), vec!["/lock"]);
    f.create("/lock/n1", b"");
    assert_eq!(f.tree.reapable(i64::MAX), Vec::<String>::new());
    f.delete("/lock/n1");
    assert_eq!(f.stat("/lock").cversion, 2, "zkCli shows 2 here");
    assert_eq!(f.tree.reapable(0), vec!["/lock"]);
    f.delete("/lock");
    assert_eq!(f.tree.reapable(i64::MAX), Vec::<String>::new());

    let bad = create_txn(&f.tree, "/c", b"", S1, NodeKind::Container);
    assert!(matches!(
        f.apply_err(S1, &bad),
        ApplyError::BadCreate { .. }
    ));
}

#[test]
fn ttl_nodes_encode_their_ttl_and_are_reaped_when_unmodified_and_childless() {
    // ZooKeeper Programmer's Guide, "Data Model", "TTL Nodes": not modified within the TTL and no children ->
    // candidate for deletion. EphemeralType.TTL: owner 0xFF00..00 | ttl.
    let mut f = Fixture::new();
    f.create_kind("/t", 0, NodeKind::Ttl { ttl_ms: 500 });
    let s = f.stat("/t");
    assert_eq!(s.ephemeral_owner, 0, "clients see 0 for a TTL node");
    let kind = f.tree.node_type("/t").unwrap();
    assert_eq!(kind, ZnodeType::Ttl { ttl_ms: 500 });
    assert_eq!(
        kind.persisted_ephemeral_owner(),
        0xFF00_0000_0000_01F4u64 as i64
    );
    let mtime = s.mtime;
    assert_eq!(
        f.tree.reapable(mtime + 500),
        Vec::<String>::new(),
        "not yet past the TTL"
    );
    assert_eq!(f.tree.reapable(mtime + 501), vec!["/t"]);

    f.create("/t/child", b"");
    assert_eq!(
        f.tree.reapable(i64::MAX),
        Vec::<String>::new(),
        "children keep it"
    );
    f.delete("/t/child");
    f.set_data("/t", b"touch");
    let mtime = f.stat("/t").mtime;
    assert_eq!(
        f.tree.reapable(mtime + 500),
        Vec::<String>::new(),
        "setData is a modification"
    );
    assert_eq!(f.tree.reapable(mtime + 501), vec!["/t"]);

    let max = create_txn(
        &f.tree,
        "/tmax",
        b"",
        0,
        NodeKind::Ttl { ttl_ms: MAX_TTL_MS },
    );
    f.apply(S1, &max).unwrap();
    assert_eq!(
        f.tree
            .node_type("/tmax")
            .unwrap()
            .persisted_ephemeral_owner(),
        0xFF00_00FF_FFFF_FFFFu64 as i64
    );
    for ttl in [0, -1, MAX_TTL_MS + 1] {
        let bad = create_txn(&f.tree, "/bad", b"", 0, NodeKind::Ttl { ttl_ms: ttl });
        assert!(
            matches!(f.apply_err(S1, &bad), ApplyError::BadCreate { .. }),
            "{ttl}"
        );
    }
    // Sorted: containers and TTL nodes together.
    f.create_kind("/a", 0, NodeKind::Container);
    f.create("/a/x", b"");
    f.delete("/a/x");
    assert_eq!(f.tree.reapable(i64::MAX), vec!["/a", "/t", "/tmax"]);
}

// ----- txns that do not fit -------------------------------------------------------

#[test]
fn txns_that_do_not_fit_are_errors_and_change_nothing() {
    let mut f = Fixture::new();
    f.create("/a", b"");
    f.create("/a/b", b"");
    let cases: Vec<(Txn, ApplyError)> = vec![
        (
            create_txn(&f.tree, "/a", b"", 0, NodeKind::Regular),
            ApplyError::NodeExists("/a".into()),
        ),
        (
            create_txn(&f.tree, "/", b"", 0, NodeKind::Regular),
            ApplyError::NodeExists("/".into()),
        ),
        (
            create_txn(&f.tree, "/x/y", b"", 0, NodeKind::Regular),
            ApplyError::NoParent("/x/y".into()),
        ),
        (
            Txn::Delete { path: "/x".into() },
            ApplyError::NoNode("/x".into()),
        ),
        (
            Txn::Delete { path: "/a".into() },
            ApplyError::NotEmpty("/a".into()),
        ),
        (Txn::Delete { path: "/".into() }, ApplyError::DeleteRoot),
        (
            Txn::SetData {
                path: "/x".into(),
                data: vec![],
                version: 1,
            },
            ApplyError::NoNode("/x".into()),
        ),
        (
            Txn::SetAcl {
                path: "/x".into(),
                acl: Acl::open_unsafe(),
                aversion: 1,
            },
            ApplyError::NoNode("/x".into()),
        ),
        (
            Txn::SetAcl {
                path: "/a".into(),
                acl: vec![],
                aversion: 1,
            },
            ApplyError::EmptyAcl("/a".into()),
        ),
        (
            Txn::Check { path: "/x".into() },
            ApplyError::NoNode("/x".into()),
        ),
    ];
    for (txn, want) in cases {
        assert_eq!(f.apply_err(S1, &txn), want, "{txn:?}");
    }
    for bad in ["a", "/a/", "//a", "/a/./b", "/a\u{1}", ""] {
        let t = create_txn(&f.tree, bad, b"", 0, NodeKind::Regular);
        assert!(
            matches!(f.apply_err(S1, &t), ApplyError::InvalidPath { .. }),
            "{bad:?}"
        );
        let d = Txn::Delete { path: bad.into() };
        assert!(
            matches!(f.apply_err(S1, &d), ApplyError::InvalidPath { .. }),
            "{bad:?}"
        );
    }
}

#[test]
fn a_multi_applies_all_of_its_ops_in_order_or_none() {
    let mut f = Fixture::new();
    f.create("/m", b"");
    let ok = Txn::Multi(vec![
        Txn::Check { path: "/m".into() },
        Txn::Create(CreateTxn {
            path: "/m/a".into(),
            data: b"1".to_vec(),
            acl: Acl::open_unsafe(),
            ephemeral_owner: S1,
            parent_cversion: 1,
            kind: NodeKind::Regular,
        }),
        Txn::SetData {
            path: "/m".into(),
            data: b"top".to_vec(),
            version: 1,
        },
        Txn::Create(CreateTxn {
            path: "/m/b".into(),
            data: vec![],
            acl: Acl::read_unsafe(),
            ephemeral_owner: 0,
            parent_cversion: 2,
            kind: NodeKind::Regular,
        }),
        Txn::Delete {
            path: "/m/b".into(),
        },
    ]);
    let tr = f.apply(S1, &ok).unwrap();
    assert_eq!(
        tr,
        vec![
            trig("/m/a", EventType::NodeCreated),
            trig("/m", EventType::NodeChildrenChanged),
            trig("/m", EventType::NodeDataChanged),
            trig("/m/b", EventType::NodeCreated),
            trig("/m", EventType::NodeChildrenChanged),
            trig("/m/b", EventType::NodeDeleted),
            trig("/m", EventType::NodeChildrenChanged),
        ]
    );
    let s = f.stat("/m");
    assert_eq!(f.tree.stored_cversion("/m"), Some(2));
    assert_eq!(
        (s.cversion, s.num_children, s.version, s.pzxid, s.mzxid),
        (3, 1, 1, 2, 2)
    );
    assert_eq!(f.tree.ephemerals(S1), vec!["/m/a"]);

    // Fails at op 3, after a create, a setData, a setACL and a delete that
    // emptied an ACL list: everything is rolled back.
    let bad = Txn::Multi(vec![
        Txn::Create(CreateTxn {
            path: "/m/c".into(),
            data: b"xyz".to_vec(),
            acl: vec![Acl::new(perms::ALL, "ip", "1.2.3.4")],
            ephemeral_owner: S2,
            parent_cversion: 3,
            kind: NodeKind::Container,
        }),
        Txn::Create(CreateTxn {
            path: "/m/d".into(),
            data: vec![],
            acl: vec![Acl::new(perms::ALL, "ip", "1.2.3.4")],
            ephemeral_owner: 0,
            parent_cversion: 3,
            kind: NodeKind::Container,
        }),
        Txn::SetData {
            path: "/m/a".into(),
            data: b"changed".to_vec(),
            version: 1,
        },
        Txn::SetAcl {
            path: "/m".into(),
            acl: vec![Acl::new(perms::READ, "ip", "9.9.9.9")],
            aversion: 1,
        },
        Txn::Delete {
            path: "/m/a".into(),
        },
        Txn::Delete {
            path: "/m/nope".into(),
        },
    ]);
    let e = f.apply_err(S1, &bad);
    assert!(matches!(e, ApplyError::Multi { index: 0, .. }), "{e}");
    let bad = match bad {
        Txn::Multi(mut ops) => {
            ops.remove(0);
            Txn::Multi(ops)
        }
        _ => unreachable!(),
    };
    let e = f.apply_err(S1, &bad);
    assert_eq!(
        e,
        ApplyError::Multi {
            index: 4,
            error: Box::new(ApplyError::NoNode("/m/nope".into()))
        }
    );
    assert_eq!(
        f.tree.acl_cache_size(),
        2,
        "lists interned by the failed multi are gone"
    );

    for inner in [
        Txn::Multi(vec![]),
        Txn::CloseSession,
        Txn::CreateSession { timeout_ms: 1 },
    ] {
        let e = f.apply_err(
            S1,
            &Txn::Multi(vec![Txn::Check { path: "/m".into() }, inner]),
        );
        assert!(matches!(e, ApplyError::Multi { index: 1, .. }), "{e}");
    }
    assert!(f.apply(S1, &Txn::Multi(vec![])).unwrap().is_empty());
}

// ----- quotas -----------------------------------------------------------------------

/// What zkCli's setquota does: the limits node, then the stats node.
fn set_quota(f: &mut Fixture, path: &str, limits: &str) {
    let mut cur = String::from(QUOTA_ROOT);
    for part in path.split('/').filter(|s| !s.is_empty()) {
        cur = format!("{cur}/{part}");
        if !f.tree.exists(&cur) {
            f.create(&cur, b"");
        }
    }
    f.create(&limit_path(path), limits.as_bytes());
    f.create(&stat_path(path), b"count=0,bytes=0");
}

fn quota_stats(f: &Fixture, path: &str) -> String {
    String::from_utf8(f.tree.node(&stat_path(path)).unwrap().data().to_vec()).unwrap()
}

#[test]
fn quota_stats_follow_creates_deletes_and_writes_under_the_quota() {
    let mut f = Fixture::new();
    f.create("/app", b"12");
    f.create("/app/a", b"345");
    f.create("/other", b"zzzz");
    set_quota(&mut f, "/app", "count=10,bytes=-1");
    // Creating the stats node recounts the subtree, the quota root included.
    assert_eq!(quota_stats(&f, "/app"), "count=2,bytes=5");
    assert_eq!(f.tree.quota_root_of("/app/a/deep"), Some("/app"));
    assert_eq!(f.tree.quota_root_of("/app"), Some("/app"));
    assert_eq!(f.tree.quota_root_of("/apple"), None);
    assert_eq!(f.tree.quota_root_of("/other"), None);

    f.create("/app/b", b"6789");
    assert_eq!(quota_stats(&f, "/app"), "count=3,bytes=9");
    f.set_data("/app/a", b"3");
    assert_eq!(quota_stats(&f, "/app"), "count=3,bytes=7");
    f.delete("/app/b");
    assert_eq!(quota_stats(&f, "/app"), "count=2,bytes=3");
    f.create("/other/x", b"ignored");
    assert_eq!(quota_stats(&f, "/app"), "count=2,bytes=3");
    // The stats node keeps its own stat (apply rewrites only its data).
    assert_eq!(f.stat(&stat_path("/app")).version, 0);

    // Removing the limits node ends the tracking.
    f.delete(&limit_path("/app"));
    assert_eq!(f.tree.quota_root_of("/app/a"), None);
    f.create("/app/c", b"");
    assert_eq!(quota_stats(&f, "/app"), "count=2,bytes=3");
    let back = reload(&f.tree);
    assert!(back == f.tree);
}

#[test]
fn hard_quota_limits_refuse_and_soft_ones_pass() {
    let mut f = Fixture::new();
    f.create("/hard", b"");
    f.create("/soft", b"");
    set_quota(
        &mut f,
        "/hard",
        "count=-1,bytes=-1=;byteHardLimit=10;countHardLimit=3",
    );
    set_quota(&mut f, "/soft", "count=1,bytes=1");
    assert_eq!(quota_stats(&f, "/hard"), "count=1,bytes=0");
    assert_eq!(f.tree.check_quota("/hard/a", 10, 1), Ok(()));
    assert_eq!(
        f.tree.check_quota("/hard/a", 11, 1),
        Err(ErrorCode::QuotaExceeded)
    );
    f.create("/hard/a", b"12345");
    f.create("/hard/b", b"");
    assert_eq!(
        f.tree.check_quota("/hard/c", 0, 1),
        Err(ErrorCode::QuotaExceeded)
    );
    assert_eq!(f.tree.check_quota("/hard/a", 5, 0), Ok(()));
    assert_eq!(
        f.tree.check_quota("/hard/a", 6, 0),
        Err(ErrorCode::QuotaExceeded)
    );
    assert_eq!(f.tree.check_quota("/hard/a", -5, 0), Ok(()));
    assert_eq!(
        f.tree.check_quota("/soft/x", 1_000, 1),
        Ok(()),
        "soft limits only warn"
    );
    assert_eq!(f.tree.check_quota("/elsewhere", 1_000, 1), Ok(()));
}

// ----- snapshots --------------------------------------------------------------------

/// A tree with one of everything.
fn busy_tree() -> Fixture {
    let mut f = Fixture::new();
    f.create("/app", b"root data");
    f.create("/app/cfg", &[0u8, 255, 7, 0]);
    f.create("/big", &vec![0xAB; 200_000]);
    f.create_kind("/app/e1", S1, NodeKind::Regular);
    f.create_kind("/app/e2", S2, NodeKind::Regular);
    f.create_kind("/lock", 0, NodeKind::Container);
    f.create_kind("/ttl", 0, NodeKind::Ttl { ttl_ms: 1234 });
    f.create("/lock/x", b"");
    f.delete("/lock/x");
    f.create("/\u{e9}t\u{e9}", "unicode".as_bytes());
    f.apply(
        S1,
        &Txn::SetAcl {
            path: "/app/cfg".into(),
            acl: vec![
                Acl::new(perms::READ, "world", "anyone"),
                Acl::new(perms::ALL, "digest", "bob:abc="),
            ],
            aversion: 3,
        },
    )
    .unwrap();
    f.set_data("/app", b"");
    set_quota(&mut f, "/app", "count=-1,bytes=-1=;countHardLimit=100");
    for i in 0..50 {
        f.create(&format!("/app/n{i:03}"), format!("{i}").as_bytes());
    }
    f
}

#[test]
fn a_snapshot_round_trips_to_an_equal_tree() {
    let f = busy_tree();
    let back = reload(&f.tree);
    assert!(back == f.tree);
    for p in [
        "/",
        "/app",
        "/app/cfg",
        "/big",
        "/app/e1",
        "/lock",
        "/ttl",
        "/zookeeper/config",
    ] {
        let (a, b) = (f.tree.node(p).unwrap(), back.node(p).unwrap());
        assert_eq!(
            (&a.stat, &a.acl, a.kind, a.data()),
            (&b.stat, &b.acl, b.kind, b.data()),
            "{p}"
        );
    }
    assert_eq!(back.ephemerals(S1), f.tree.ephemerals(S1));
    assert_eq!(back.sessions_with_ephemerals(), vec![S1, S2]);
    assert_eq!(back.reapable(i64::MAX), f.tree.reapable(i64::MAX));
    assert_eq!(back.quota_root_of("/app/x"), Some("/app"));
    assert_eq!(back.approximate_data_size(), f.tree.approximate_data_size());
    assert_eq!(back.acl_cache_size(), f.tree.acl_cache_size());
    assert_eq!(back.children("/app"), f.tree.children("/app"));
    // Same tree, same bytes, whatever internal ACL ids were used.
    assert_eq!(snapshot_bytes(&back), snapshot_bytes(&f.tree));
    // The reader takes exactly the snapshot's bytes.
    let mut embedded = snapshot_bytes(&f.tree);
    embedded.extend_from_slice(b"after");
    let mut r = embedded.as_slice();
    assert!(DataTree::read_from(&mut r).unwrap() == f.tree);
    assert_eq!(r, b"after");
}

#[test]
fn a_snapshot_is_a_frozen_copy_that_writes_do_not_touch() {
    let mut f = busy_tree();
    let snap = f.tree.snapshot();
    let frozen = f.tree.clone();
    let first = f.tree.get("/app").unwrap().clone();
    assert!(
        first.ptr_eq(snap.nodes().get(&node::Probe::path("/app")).unwrap()),
        "shared, not copied"
    );
    f.set_data("/app", b"after");
    f.delete("/app/n000");
    f.create("/new", b"");
    f.apply(S1, &Txn::CloseSession).unwrap();
    let mut bytes = Vec::new();
    snap.write_to(&mut bytes).unwrap();
    let back = DataTree::read_from(&mut bytes.as_slice()).unwrap();
    assert!(back == frozen);
    assert!(back != f.tree);
    assert_eq!(snap.node_count(), frozen.node_count());
    // The snapshot can go to another thread.
    let h = std::thread::spawn(move || {
        let mut v = Vec::new();
        snap.write_to(&mut v).unwrap();
        v.len()
    });
    assert_eq!(h.join().unwrap(), bytes.len());
}

#[test]
fn truncated_or_corrupt_snapshots_are_errors_not_panics() {
    let mut f = Fixture::new();
    f.create("/a", b"data");
    f.create_kind("/a/e", S1, NodeKind::Regular);
    let bytes = snapshot_bytes(&f.tree);
    for n in 0..bytes.len() {
        let r = DataTree::read_from(&mut &bytes[..n]);
        assert!(r.is_err(), "prefix of {n} bytes loaded");
    }
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xFF] {
            let mut b = bytes.clone();
            b[i] ^= flip;
            assert!(
                DataTree::read_from(&mut b.as_slice()).is_err(),
                "flip {flip:x} at {i}"
            );
        }
    }
    assert!(matches!(
        DataTree::read_from(&mut &b"NOTATREE"[..]),
        Err(SnapshotError::BadMagic)
    ));
    let mut b = bytes.clone();
    b[6..8].copy_from_slice(&9u16.to_be_bytes());
    assert!(matches!(
        DataTree::read_from(&mut b.as_slice()),
        Err(SnapshotError::Version(9))
    ));
    let mut b = bytes.clone();
    let last = b.len() - 1;
    b[last] ^= 1;
    assert!(matches!(
        DataTree::read_from(&mut b.as_slice()),
        Err(SnapshotError::Checksum { .. })
    ));
    assert!(matches!(
        DataTree::read_from(&mut &bytes[..bytes.len() - 2]),
        Err(SnapshotError::Truncated)
    ));

    // Structurally wrong but well-formed streams.
    let node = |w: &mut Vec<u8>, path: &str, kind: u8, value: i64, acl: u32, define: bool| {
        w.extend_from_slice(&(path.len() as u32).to_be_bytes());
        w.extend_from_slice(path.as_bytes());
        w.push(kind);
        w.extend_from_slice(&value.to_be_bytes());
        w.extend_from_slice(&[0u8; 5 * 8 + 3 * 4]);
        w.extend_from_slice(&acl.to_be_bytes());
        if define {
            w.extend_from_slice(&0u32.to_be_bytes());
        }
        w.extend_from_slice(&0u32.to_be_bytes());
    };
    let stream = |nodes: &[(&str, u8, i64, u32, bool)], claimed: u64| {
        let mut w = b"WZTREE".to_vec();
        w.extend_from_slice(&1u16.to_be_bytes());
        w.extend_from_slice(&claimed.to_be_bytes());
        for &(p, k, v, a, d) in nodes {
            node(&mut w, p, k, v, a, d);
        }
        let crc = crc32fast::hash(&w);
        w.extend_from_slice(&crc.to_be_bytes());
        w
    };
    let good = stream(&[("/", 0, 0, 0, true), ("/a", 0, 0, 0, false)], 2);
    let t = DataTree::read_from(&mut good.as_slice()).unwrap();
    t.check_invariants().unwrap();
    assert_eq!(t.children("/").unwrap(), vec!["a"]);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (stream(&[], 0), "no root"),
        (stream(&[("/a", 0, 0, 0, true)], 1), "root first"),
        (stream(&[("/", 1, 5, 0, true)], 1), "ephemeral root"),
        (stream(&[("/", 2, 0, 0, true)], 1), "container root"),
        (
            stream(&[("/", 0, 0, 0, true), ("/", 0, 0, 0, false)], 2),
            "root twice",
        ),
        (
            stream(&[("/", 0, 0, 0, true), ("/a/b", 0, 0, 0, false)], 2),
            "orphan",
        ),
        (
            stream(
                &[
                    ("/", 0, 0, 0, true),
                    ("/b", 0, 0, 0, false),
                    ("/a", 0, 0, 0, false),
                ],
                3,
            ),
            "order",
        ),
        (
            stream(
                &[
                    ("/", 0, 0, 0, true),
                    ("/a", 0, 0, 0, false),
                    ("/a", 0, 0, 0, false),
                ],
                3,
            ),
            "dup",
        ),
        (
            stream(
                &[
                    ("/", 0, 0, 0, true),
                    ("/a", 1, 5, 0, false),
                    ("/a/b", 0, 0, 0, false),
                ],
                3,
            ),
            "child of ephemeral",
        ),
        (
            stream(&[("/", 0, 0, 0, true), ("/a", 9, 0, 0, false)], 2),
            "kind",
        ),
        (
            stream(&[("/", 0, 0, 0, true), ("/a", 1, 0, 0, false)], 2),
            "ownerless ephemeral",
        ),
        (
            stream(&[("/", 0, 0, 0, true), ("/a", 3, 0, 0, false)], 2),
            "zero ttl",
        ),
        (
            stream(&[("/", 0, 0, 0, true), ("/a", 0, 0, 5, false)], 2),
            "undefined acl",
        ),
        (
            stream(&[("/", 0, 0, 0, true), ("/a/", 0, 0, 0, false)], 2),
            "bad path",
        ),
        (stream(&[("/", 0, 0, 0, true)], 2), "count says more"),
        (stream(&[("/", 0, 0, 0, true)], u64::MAX), "huge count"),
    ];
    for (b, what) in cases {
        assert!(
            DataTree::read_from(&mut b.as_slice()).is_err(),
            "{what} loaded"
        );
    }
    // A length that lies about what follows does not allocate it.
    let mut huge = b"WZTREE".to_vec();
    huge.extend_from_slice(&1u16.to_be_bytes());
    huge.extend_from_slice(&1u64.to_be_bytes());
    huge.extend_from_slice(&(1u32 << 20).to_be_bytes());
    assert!(matches!(
        DataTree::read_from(&mut huge.as_slice()),
        Err(SnapshotError::Truncated)
    ));
    huge.truncate(16);
    huge.extend_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(
        DataTree::read_from(&mut huge.as_slice()),
        Err(SnapshotError::Corrupt(_))
    ));
}

#[test]
fn random_garbage_never_loads_or_panics() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for len in 0..300usize {
        let mut b = Vec::with_capacity(len + 8);
        b.extend_from_slice(b"WZTREE\0\x01");
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.push(x as u8);
        }
        assert!(DataTree::read_from(&mut b.as_slice()).is_err());
    }
}

// ----- the tree against a simple model ------------------------------------------------

mod model {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Debug, Clone, PartialEq)]
    struct MNode {
        data: Vec<u8>,
        acl: Vec<Acl>,
        kind: ZnodeType,
        czxid: i64,
        mzxid: i64,
        pzxid: i64,
        ctime: i64,
        mtime: i64,
        version: i32,
        cversion: i32,
        aversion: i32,
    }

    /// The tree as a map of path -> node, with the rules written plainly.
    #[derive(Debug, Clone)]
    struct Model {
        nodes: BTreeMap<String, MNode>,
    }

    fn zero(acl: Vec<Acl>) -> MNode {
        MNode {
            data: vec![],
            acl,
            kind: ZnodeType::Persistent,
            czxid: 0,
            mzxid: 0,
            pzxid: 0,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
        }
    }

    impl Model {
        fn new() -> Model {
            let mut nodes = BTreeMap::new();
            for p in ["/", "/zookeeper", "/zookeeper/quota"] {
                nodes.insert(p.to_string(), zero(Acl::open_unsafe()));
            }
            let mut config = zero(Acl::read_unsafe());
            config.aversion = -1;
            nodes.insert("/zookeeper/config".into(), config);
            Model { nodes }
        }

        fn children(&self, p: &str) -> Vec<String> {
            self.nodes
                .keys()
                .filter(|k| k.as_str() != "/" && wazoo_proto::path::parent(k) == p)
                .map(|k| wazoo_proto::path::name(k).to_string())
                .collect()
        }
        fn stat(&self, p: &str) -> Stat {
            let n = &self.nodes[p];
            let kids = self.children(p).len() as i32;
            Stat {
                czxid: n.czxid,
                mzxid: n.mzxid,
                ctime: n.ctime,
                mtime: n.mtime,
                version: n.version,
                cversion: n.cversion.wrapping_mul(2).wrapping_sub(kids),
                aversion: n.aversion,
                ephemeral_owner: match n.kind {
                    ZnodeType::Ephemeral { owner } => owner,
                    _ => 0,
                },
                data_length: n.data.len() as i32,
                num_children: kids,
                pzxid: n.pzxid,
            }
        }

        fn ephemerals(&self, s: i64) -> Vec<String> {
            self.nodes
                .iter()
                .filter(|(_, n)| n.kind == ZnodeType::Ephemeral { owner: s })
                .map(|(p, _)| p.clone())
                .collect()
        }

        fn apply(&mut self, h: &TxnHeader, txn: &Txn, tr: &mut Vec<Trigger>) -> Result<(), ()> {
            match txn {
                Txn::CreateSession { .. } => Ok(()),
                Txn::CloseSession => {
                    for p in self.ephemerals(h.session_id) {
                        self.op(h, &Txn::Delete { path: p }, tr)?;
                    }
                    Ok(())
                }
                Txn::Multi(ops) => {
                    let saved = self.clone();
                    for op in ops {
                        if matches!(
                            op,
                            Txn::Multi(_) | Txn::CloseSession | Txn::CreateSession { .. }
                        ) || self.op(h, op, tr).is_err()
                        {
                            *self = saved;
                            return Err(());
                        }
                    }
                    Ok(())
                }
                op => self.op(h, op, tr),
            }
        }

        fn op(&mut self, h: &TxnHeader, txn: &Txn, tr: &mut Vec<Trigger>) -> Result<(), ()> {
            match txn {
                Txn::Create(c) => {
                    let kind = match (c.kind, c.ephemeral_owner) {
                        (NodeKind::Regular, 0) => ZnodeType::Persistent,
                        (NodeKind::Regular, owner) => ZnodeType::Ephemeral { owner },
                        (NodeKind::Container, 0) => ZnodeType::Container,
                        (NodeKind::Ttl { ttl_ms }, 0) if ttl_ms > 0 && ttl_ms <= MAX_TTL_MS => {
                            ZnodeType::Ttl { ttl_ms }
                        }
                        _ => return Err(()),
                    };
                    let p = c.path.as_str();
                    if p == "/" || wazoo_proto::path::validate(p, false).is_err() {
                        return Err(());
                    }
                    let parent = wazoo_proto::path::parent(p);
                    match self.nodes.get(parent) {
                        Some(pn) if !matches!(pn.kind, ZnodeType::Ephemeral { .. }) => {}
                        _ => return Err(()),
                    }
                    if self.nodes.contains_key(p) {
                        return Err(());
                    }
                    self.nodes.insert(
                        p.to_string(),
                        MNode {
                            data: c.data.clone(),
                            acl: c.acl.clone(),
                            kind,
                            czxid: h.zxid,
                            mzxid: h.zxid,
                            pzxid: h.zxid,
                            ctime: h.time_ms,
                            mtime: h.time_ms,
                            version: 0,
                            cversion: 0,
                            aversion: 0,
                        },
                    );
                    let pn = self.nodes.get_mut(parent).unwrap();
                    pn.cversion = c.parent_cversion;
                    pn.pzxid = h.zxid;
                    tr.push(trig(p, EventType::NodeCreated));
                    tr.push(trig(parent, EventType::NodeChildrenChanged));
                }
                Txn::Delete { path: p } => {
                    if p == "/" || !self.nodes.contains_key(p) || !self.children(p).is_empty() {
                        return Err(());
                    }
                    self.nodes.remove(p);
                    let parent = wazoo_proto::path::parent(p);
                    self.nodes.get_mut(parent).unwrap().pzxid = h.zxid;
                    tr.push(trig(p, EventType::NodeDeleted));
                    tr.push(trig(parent, EventType::NodeChildrenChanged));
                }
                Txn::SetData {
                    path: p,
                    data,
                    version,
                } => {
                    let n = self.nodes.get_mut(p).ok_or(())?;
                    n.data = data.clone();
                    n.version = *version;
                    n.mzxid = h.zxid;
                    n.mtime = h.time_ms;
                    tr.push(trig(p, EventType::NodeDataChanged));
                }
                Txn::SetAcl {
                    path: p,
                    acl,
                    aversion,
                } => {
                    let n = self.nodes.get_mut(p).ok_or(())?;
                    n.acl = acl.clone();
                    n.aversion = *aversion;
                }
                Txn::Check { path: p } => {
                    self.nodes.get(p).ok_or(())?;
                }
                _ => return Err(()),
            }
            Ok(())
        }
    }

    /// Where an op points: mostly at a node the model has (by index), else
    /// at a path built from a few names, which may or may not exist.
    #[derive(Debug, Clone)]
    struct Target {
        existing: bool,
        index: usize,
        parts: Vec<u8>,
    }

    impl Target {
        fn resolve(&self, m: &Model) -> String {
            if self.existing {
                let keys: Vec<&String> = m.nodes.keys().collect();
                return keys[self.index % keys.len()].clone();
            }
            path_of(&self.parts)
        }
    }

    /// An op as generated; turned into a txn against the model's state,
    /// the way a pipeline would (but without checking that it fits).
    #[derive(Debug, Clone)]
    enum Op {
        Create {
            parent: Target,
            name: u8,
            seq: bool,
            kind: u8,
            session: u8,
            data: Vec<u8>,
            acl: u8,
        },
        Delete(Target),
        SetData(Target, Vec<u8>),
        SetAcl(Target, u8),
        Check(Target),
        Close(u8),
        Multi(Vec<Op>),
        Reload,
        Freeze,
    }

    const NAMES: [&str; 4] = ["a", "b", "c", "zookeeper"];

    fn path_of(parts: &[u8]) -> String {
        if parts.is_empty() {
            return "/".into();
        }
        parts
            .iter()
            .map(|&c| NAMES[c as usize % 4])
            .fold(String::new(), |p, n| format!("{p}/{n}"))
    }

    fn acl_of(i: u8) -> Vec<Acl> {
        match i % 3 {
            0 => Acl::open_unsafe(),
            1 => Acl::read_unsafe(),
            _ => vec![
                Acl::new(perms::ALL, "digest", "u:x"),
                Acl::new(perms::READ, "ip", "10.0.0.0/8"),
            ],
        }
    }

    fn session(i: u8) -> i64 {
        i64::from(i % 3) + 1
    }

    fn to_txn(m: &Model, op: &Op) -> Txn {
        match op {
            Op::Create {
                parent,
                name,
                seq,
                kind,
                session: s,
                data,
                acl,
            } => {
                let parent = parent.resolve(m);
                let cv = m.nodes.get(&parent).map_or(0, |n| n.cversion);
                let name = NAMES[*name as usize % 4];
                let mut p = wazoo_proto::path::join(&parent, name);
                if *seq {
                    p = sequential_path(&format!("{p}-"), cv);
                }
                let (owner, kind) = match kind % 5 {
                    0 | 1 => (0, NodeKind::Regular),
                    2 => (session(*s), NodeKind::Regular),
                    3 => (0, NodeKind::Container),
                    _ => (0, NodeKind::Ttl { ttl_ms: 100 }),
                };
                Txn::Create(CreateTxn {
                    path: p,
                    data: data.clone(),
                    acl: acl_of(*acl),
                    ephemeral_owner: owner,
                    parent_cversion: cv.wrapping_add(1),
                    kind,
                })
            }
            Op::Delete(t) => Txn::Delete { path: t.resolve(m) },
            Op::SetData(t, data) => {
                let p = t.resolve(m);
                let v = m.nodes.get(&p).map_or(0, |n| n.version + 1);
                Txn::SetData {
                    path: p,
                    data: data.clone(),
                    version: v,
                }
            }
            Op::SetAcl(t, a) => {
                let p = t.resolve(m);
                let v = m.nodes.get(&p).map_or(0, |n| n.aversion + 1);
                Txn::SetAcl {
                    path: p,
                    acl: acl_of(*a),
                    aversion: v,
                }
            }
            Op::Check(t) => Txn::Check { path: t.resolve(m) },
            Op::Close(_) => Txn::CloseSession,
            Op::Multi(ops) => {
                // Later ops see the model as the earlier ones leave it.
                let mut scratch = m.clone();
                let mut txns = Vec::new();
                for (i, o) in ops.iter().enumerate() {
                    let t = to_txn(&scratch, o);
                    let h = hdr(1, i as i64);
                    let _ = scratch.apply(&h, &t, &mut Vec::new());
                    txns.push(t);
                }
                Txn::Multi(txns)
            }
            Op::Reload | Op::Freeze => Txn::Check { path: "/".into() },
        }
    }

    fn target() -> impl Strategy<Value = Target> {
        (
            proptest::bool::weighted(0.8),
            any::<usize>(),
            proptest::collection::vec(0u8..4, 0..4),
        )
            .prop_map(|(existing, index, parts)| Target {
                existing,
                index,
                parts,
            })
    }

    fn data() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..8)
    }

    fn leaf_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (target(), any::<u8>(), proptest::bool::weighted(0.3), any::<u8>(), any::<u8>(), data(), any::<u8>())
                .prop_map(|(parent, name, seq, kind, session, data, acl)| Op::Create { parent, name, seq, kind, session, data, acl }),
            2 => target().prop_map(Op::Delete),
            2 => (target(), data()).prop_map(|(t, d)| Op::SetData(t, d)),
            1 => (target(), any::<u8>()).prop_map(|(t, a)| Op::SetAcl(t, a)),
            1 => target().prop_map(Op::Check),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            12 => leaf_op(),
            1 => any::<u8>().prop_map(Op::Close),
            3 => proptest::collection::vec(leaf_op(), 0..4).prop_map(Op::Multi),
            1 => Just(Op::Reload),
            1 => Just(Op::Freeze),
        ]
    }

    fn assert_same(t: &DataTree, m: &Model) {
        t.check_invariants().unwrap();
        assert_eq!(t.node_count(), m.nodes.len());
        for (p, n) in &m.nodes {
            let v = t.node(p).unwrap_or_else(|| panic!("{p} missing"));
            assert_eq!(v.stat, m.stat(p), "{p}");
            assert_eq!(v.stored_cversion, n.cversion, "{p}");
            assert_eq!(v.data(), n.data.as_slice(), "{p}");
            assert_eq!(&*v.acl, n.acl.as_slice(), "{p}");
            assert_eq!(v.kind, n.kind, "{p}");
            assert_eq!(t.children(p).unwrap(), m.children(p), "{p}");
        }
        for s in 1..=3 {
            assert_eq!(t.ephemerals(s), m.ephemerals(s), "session {s}");
        }
        let with: Vec<i64> = (1..=3).filter(|&s| !m.ephemerals(s).is_empty()).collect();
        assert_eq!(t.sessions_with_ephemerals(), with);
        assert_eq!(t.all_children_number("/"), Some(m.nodes.len() as i32 - 1));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn random_txns_match_a_simple_model(ops in proptest::collection::vec(op(), 1..80)) {
            let mut tree = DataTree::new();
            let mut m = Model::new();
            let mut frozen: Option<(TreeSnapshot, Model)> = None;
            for (i, op) in ops.iter().enumerate() {
                let zxid = i as i64 + 1;
                match op {
                    Op::Reload => {
                        let back = reload(&tree);
                        prop_assert!(back == tree);
                        tree = back;
                        continue;
                    }
                    Op::Freeze => {
                        frozen = Some((tree.snapshot(), m.clone()));
                        continue;
                    }
                    _ => {}
                }
                let sess = match op { Op::Close(s) => session(*s), _ => 1 };
                let txn = to_txn(&m, op);
                let h = TxnHeader { session_id: sess, cxid: 0, zxid, time_ms: zxid * 10 };
                let mut want = Vec::new();
                let before = tree.clone();
                let expect_ok = m.apply(&h, &txn, &mut want).is_ok();
                match tree.apply(&h, &txn) {
                    Ok(got) => {
                        prop_assert!(expect_ok, "tree applied what the model refused: {txn:?}");
                        prop_assert_eq!(got, want);
                    }
                    Err(e) => {
                        prop_assert!(!expect_ok, "tree refused {txn:?}: {e}");
                        prop_assert!(tree == before);
                    }
                }
                assert_same(&tree, &m);
            }
            if let Some((snap, m)) = frozen {
                let mut b = Vec::new();
                snap.write_to(&mut b).unwrap();
                let t = DataTree::read_from(&mut b.as_slice()).unwrap();
                assert_same(&t, &m);
            }
        }
    }
}

// ----- memory -------------------------------------------------------------------------

/// Prints what 100k znodes of 100 bytes cost (`WAZOO_MEM_NODES` for another
/// count). Run alone, in release:
/// `cargo test -p wazoo-core --release --lib memory_per_node -- --ignored --nocapture`
#[test]
#[ignore]
#[allow(clippy::disallowed_methods)] // a measurement: reads RSS and the clock
fn memory_per_node() {
    fn rss() -> Option<usize> {
        let s = std::fs::read_to_string("/proc/self/statm").ok()?;
        Some(s.split_whitespace().nth(1)?.parse::<usize>().ok()? * 4096)
    }
    let n: i64 = std::env::var("WAZOO_MEM_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let before = rss();
    let mut t = DataTree::new();
    let data = vec![b'x'; 100];
    let started = std::time::Instant::now();
    t.apply(
        &hdr(1, 1),
        &create_txn(&t, "/bench", b"", 0, NodeKind::Regular),
    )
    .unwrap();
    for i in 0..n {
        let txn = Txn::Create(CreateTxn {
            path: format!("/bench/node{i:010}"),
            data: data.clone(),
            acl: Acl::open_unsafe(),
            ephemeral_owner: 0,
            parent_cversion: i as i32 + 1,
            kind: NodeKind::Regular,
        });
        t.apply(&hdr(1, i + 2), &txn).unwrap();
    }
    let elapsed = started.elapsed();
    let after = rss();
    println!(
        "size_of::<DataTree>() = {}",
        std::mem::size_of::<DataTree>()
    );
    println!(
        "node allocations: {:.1} bytes/node (header {} + path + data, before allocator slack)",
        t.node_heap_bytes() as f64 / n as f64,
        node::HEADER_LEN
    );
    if let (Some(b), Some(a)) = (before, after) {
        println!("RSS growth: {:.1} bytes/node", (a - b) as f64 / n as f64);
    }
    println!("{n} creates applied in {elapsed:?}");
    let started = std::time::Instant::now();
    let mut hits = 0;
    for i in 0..n {
        hits += t.stat(&format!("/bench/node{i:010}")).is_some() as usize;
    }
    println!("{n} stats in {:?}", started.elapsed());
    assert_eq!(hits, n as usize);
    let started = std::time::Instant::now();
    let mut v = Vec::new();
    t.snapshot().write_to(&mut v).unwrap();
    println!("snapshot: {} bytes in {:?}", v.len(), started.elapsed());
    let started = std::time::Instant::now();
    let back = DataTree::read_from(&mut v.as_slice()).unwrap();
    println!("load in {:?}", started.elapsed());
    assert!(back == t);
}
