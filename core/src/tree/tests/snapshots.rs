//! Snapshots of the tree: round trips, frozen copies, and corrupt input
//! that is an error, never a panic.

use super::quotas::set_quota;
use super::*;

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
    f.create_null("/app/null");
    f.apply(
        S1,
        &Txn::SetData {
            path: "/app/cfg".into(),
            data: None,
            version: 1,
        },
    )
    .unwrap();
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
        "/app/null",
        "/app/cfg",
        "/big",
        "/app/e1",
        "/lock",
        "/ttl",
        "/zookeeper/config",
    ] {
        let (a, b) = (f.tree.node(p).unwrap(), back.node(p).unwrap());
        assert_eq!(
            (&a.stat, &a.acl, a.kind, a.nullable_data()),
            (&b.stat, &b.acl, b.kind, b.nullable_data()),
            "{p}"
        );
    }
    // ZooKeeper Programmer's Guide, "ZooKeeper Data Model": null data
    // stays null through a snapshot, and empty data stays empty.
    assert_eq!(back.node("/app/null").unwrap().nullable_data(), None);
    assert_eq!(back.node("/app/cfg").unwrap().nullable_data(), None);
    assert_eq!(back.node("/app").unwrap().nullable_data(), Some(&b""[..]));
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
        w.extend_from_slice(&2u16.to_be_bytes());
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
    huge.extend_from_slice(&2u16.to_be_bytes());
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
        b.extend_from_slice(b"WZTREE\0\x02");
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.push(x as u8);
        }
        assert!(DataTree::read_from(&mut b.as_slice()).is_err());
    }
}

/// A version 1 snapshot (the format before null data), written byte by
/// byte: the root, /a with data "x" and /e with empty data. It still
/// loads, and its empty data is empty, not null: version 1 had no null
/// data (ZooKeeper Programmer's Guide, "ZooKeeper Data Model" keeps the
/// two apart; version 2 does). A length of 0xFFFFFFFF, null data in
/// version 2, is corrupt in version 1.
#[test]
fn a_version_1_snapshot_loads_with_empty_data_not_null() {
    let v1 = |nodes: &[(&str, &[u8])], data_len: Option<u32>| {
        let mut w = b"WZTREE".to_vec();
        w.extend_from_slice(&1u16.to_be_bytes());
        w.extend_from_slice(&(nodes.len() as u64).to_be_bytes());
        for (i, (path, data)) in nodes.iter().enumerate() {
            w.extend_from_slice(&(path.len() as u32).to_be_bytes());
            w.extend_from_slice(path.as_bytes());
            // Persistent, no owner, every zxid, time and version 0.
            w.push(0);
            w.extend_from_slice(&[0u8; 8 + 5 * 8 + 3 * 4]);
            w.extend_from_slice(&0u32.to_be_bytes());
            if i == 0 {
                // The ACL list 0, defined at its first use: world:anyone.
                w.extend_from_slice(&1u32.to_be_bytes());
                w.extend_from_slice(&31i32.to_be_bytes());
                for s in ["world", "anyone"] {
                    w.extend_from_slice(&(s.len() as u32).to_be_bytes());
                    w.extend_from_slice(s.as_bytes());
                }
            }
            let len = data_len
                .filter(|_| *path == "/e")
                .unwrap_or(data.len() as u32);
            w.extend_from_slice(&len.to_be_bytes());
            w.extend_from_slice(data);
        }
        let crc = crc32fast::hash(&w);
        w.extend_from_slice(&crc.to_be_bytes());
        w
    };
    let nodes: &[(&str, &[u8])] = &[("/", b""), ("/a", b"x"), ("/e", b"")];
    let t = DataTree::read_from(&mut v1(nodes, None).as_slice()).unwrap();
    t.check_invariants().unwrap();
    assert_eq!(t.get_data("/e").unwrap().0, Some(Vec::new()));
    assert_eq!(t.get_data("/a").unwrap().0, Some(b"x".to_vec()));
    assert_eq!(t.node("/").unwrap().nullable_data(), Some(&b""[..]));
    assert_eq!(t.children("/").unwrap(), vec!["a", "e"]);
    // Written again, it is version 2 and reads back the same.
    let again = snapshot_bytes(&t);
    assert_eq!(&again[6..8], &2u16.to_be_bytes());
    assert!(reload(&t) == t);
    assert!(matches!(
        DataTree::read_from(&mut v1(nodes, Some(u32::MAX)).as_slice()),
        Err(SnapshotError::Corrupt(_))
    ));
}
