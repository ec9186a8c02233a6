//! Tests of the data tree, each citing the section of ZooKeeper Programmer's
//! Guide, "Data Model" ("Data Model") whose rule it checks; ZooKeeper 3.8's
//! `DataTree` is the oracle for the details the Programmer's Guide leaves open.

use super::*;
use crate::txn::{CreateTxn, NodeKind, Txn, TxnHeader};
use wazoo_proto::{perms, Acl, ErrorCode, EventType, Stat};

mod all_or_nothing;
mod model;
mod node_kinds;
mod quotas;
mod snapshots;

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
        data: Some(data.to_vec()),
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

    /// Creates `path` with null data.
    fn create_null(&mut self, path: &str) -> Vec<Trigger> {
        let mut t = create_txn(&self.tree, path, b"", 0, NodeKind::Regular);
        if let Txn::Create(c) = &mut t {
            c.data = None;
        }
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
            data: Some(data.to_vec()),
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
    // ZooKeeper Programmer's Guide, "Data Model", "Time in ZooKeeper" and
    // "ZooKeeper Stat Structure": czxid, mzxid, ctime, mtime come from the
    // create; cversion counts children.
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
    // ZooKeeper Programmer's Guide, "Data Model", "ZNodes": a write replaces
    // all the data; each change of the data increases the version. "Time in
    // ZooKeeper": mzxid/mtime move.
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
        (Some(b"second value".to_vec()), s)
    );
    // The txn carries the absolute version; apply does not increment.
    f.apply(
        S1,
        &Txn::SetData {
            path: "/n".into(),
            data: Some(vec![]),
            version: 41,
        },
    )
    .unwrap();
    assert_eq!(f.stat("/n").version, 41);
    assert_eq!(f.stat("/n").data_length, 0);
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Data Model": a node created or
/// set with null data reads back as null (ZooKeeper's getData answers a
/// null buffer), not as empty data, and its Stat's dataLength is 0; data
/// set again reads back as set. Null counts as no bytes for quotas and the
/// data size, and trees that differ only in null against empty differ.
#[test]
fn null_data_reads_back_as_null_not_empty() {
    let mut f = Fixture::new();
    let size = f.tree.approximate_data_size();
    f.create_null("/n");
    assert_eq!(f.tree.approximate_data_size(), size + 2);
    let (data, stat) = f.tree.get_data("/n").unwrap();
    assert_eq!((data, stat.data_length), (None, 0));
    assert_eq!(f.tree.node("/n").unwrap().nullable_data(), None);
    assert_eq!(f.tree.node("/n").unwrap().data(), b"");
    let empty = {
        let mut g = Fixture::new();
        g.create("/n", b"");
        g.tree
    };
    assert!(f.tree != empty, "null and empty data are different trees");

    f.set_data("/n", b"x");
    assert_eq!(f.tree.get_data("/n").unwrap().0, Some(b"x".to_vec()));
    let set_null = |version| Txn::SetData {
        path: "/n".into(),
        data: None,
        version,
    };
    f.apply(S1, &set_null(2)).unwrap();
    let (data, stat) = f.tree.get_data("/n").unwrap();
    assert_eq!((data, stat.data_length, stat.version), (None, 0, 2));
    // A change of the header (a child, an ACL) keeps the data null.
    f.create("/n/c", b"");
    f.apply(
        S1,
        &Txn::SetAcl {
            path: "/n".into(),
            acl: Acl::read_unsafe(),
            aversion: 1,
        },
    )
    .unwrap();
    assert_eq!(f.tree.get_data("/n").unwrap().0, None);
    // A multi that fails rolls null data back as null.
    f.apply_err(
        S1,
        &Txn::Multi(vec![
            Txn::SetData {
                path: "/n".into(),
                data: Some(b"y".to_vec()),
                version: 3,
            },
            Txn::Delete {
                path: "/missing".into(),
            },
        ]),
    );
    assert_eq!(f.tree.get_data("/n").unwrap().0, None);
}

#[test]
fn set_acl_changes_the_acl_and_aversion_only() {
    // ZooKeeper Programmer's Guide, "Data Model", "Time in ZooKeeper": aversion
    // counts ACL changes; ACL changes are not data changes (mzxid/mtime/version
    // stay) and fire no watch.
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
    // ZooKeeper Programmer's Guide, "Data Model", "Sequence Nodes -- Unique
    // Naming": %010d of a counter kept by the parent, which overflows past
    // 2147483647 to -2147483648.
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
        data: Some(vec![]),
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
    // ZooKeeper Programmer's Guide, "Data Model", "ZooKeeper Stat Structure":
    // numChildren; getAllChildrenNumber.
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
            data: Some(data.clone()),
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
        "node allocations: {:.1} bytes/node (fields {}..{} + path + data, before allocator slack)",
        t.node_heap_bytes() as f64 / n as f64,
        node::HEADER_LEN_MIN,
        node::HEADER_LEN_MAX
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

#[test]
fn get_data_checked_reads_only_past_the_acl_check_and_names_a_missing_node() {
    // ZooKeeper Programmer's Guide, "ZooKeeper access control using ACLs":
    // getData needs READ; a node that does not exist is NoNode first.
    let mut f = Fixture::new();
    f.create("/app", b"hello");
    let allowed = f.tree.get_data_checked("/app", |acl| {
        assert_eq!(acl, &f.tree.acl("/app").unwrap()[..], "the node's own ACL");
        Ok::<(), ErrorCode>(())
    });
    let (data, stat) = allowed.expect("the node exists").expect("allowed");
    assert_eq!((data, stat), f.tree.get_data("/app").unwrap());
    let refused = f
        .tree
        .get_data_checked("/app", |_| Err(ErrorCode::NoAuth))
        .expect("the node exists");
    assert_eq!(refused, Err(ErrorCode::NoAuth));
    let mut asked = false;
    let missing = f.tree.get_data_checked("/nope", |_| {
        asked = true;
        Ok::<(), ErrorCode>(())
    });
    assert!(missing.is_none() && !asked, "no node, no check");
}
