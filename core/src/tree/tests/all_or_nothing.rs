//! Txns that do not fit the tree change nothing, and a multi applies all
//! of its ops or none (ZooKeeper Programmer's Guide, "Data Model").

use super::*;

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
                data: Some(vec![]),
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
            data: Some(b"1".to_vec()),
            acl: Acl::open_unsafe(),
            ephemeral_owner: S1,
            parent_cversion: 1,
            kind: NodeKind::Regular,
        }),
        Txn::SetData {
            path: "/m".into(),
            data: Some(b"top".to_vec()),
            version: 1,
        },
        Txn::Create(CreateTxn {
            path: "/m/b".into(),
            data: Some(vec![]),
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
            data: Some(b"xyz".to_vec()),
            acl: vec![Acl::new(perms::ALL, "ip", "1.2.3.4")],
            ephemeral_owner: S2,
            parent_cversion: 3,
            kind: NodeKind::Container,
        }),
        Txn::Create(CreateTxn {
            path: "/m/d".into(),
            data: Some(vec![]),
            acl: vec![Acl::new(perms::ALL, "ip", "1.2.3.4")],
            ephemeral_owner: 0,
            parent_cversion: 3,
            kind: NodeKind::Container,
        }),
        Txn::SetData {
            path: "/m/a".into(),
            data: Some(b"changed".to_vec()),
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
        Txn::CreateSession {
            timeout_ms: 1,
            verifier: None,
        },
    ] {
        let e = f.apply_err(
            S1,
            &Txn::Multi(vec![Txn::Check { path: "/m".into() }, inner]),
        );
        assert!(matches!(e, ApplyError::Multi { index: 1, .. }), "{e}");
    }
    assert!(f.apply(S1, &Txn::Multi(vec![])).unwrap().is_empty());
}
