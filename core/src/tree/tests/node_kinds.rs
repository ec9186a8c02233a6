//! Ephemeral, container and TTL nodes (ZooKeeper Programmer's Guide,
//! "Data Model", "Ephemeral Nodes", "Container Nodes", "TTL Nodes").

use super::*;

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
        .apply(
            S1,
            &Txn::CreateSession {
                timeout_ms: 30_000,
                verifier: None,
            }
        )
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
