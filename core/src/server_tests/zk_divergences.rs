//! Behaviors the differential test against Apache ZooKeeper 3.8 found
//! wazoo answering differently, each pinned to ZooKeeper's answer.

use super::*;

/// ZooKeeper Programmer's Guide, "ZooKeeper Watches" (removing watches):
/// checkWatches and removeWatches take the types Children (1), Data (2)
/// and Any (3); ZooKeeper 3.8 answers MarshallingError for any other
/// number, the persistent types 4 and 5 included.
#[test]
fn check_and_remove_watches_with_an_unknown_type_are_a_marshalling_error() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(1, create("/a", b"", CreateMode::Persistent)));
    ok(h.call(
        1,
        Request::AddWatch {
            path: "/a".into(),
            mode: 0,
        },
    ));
    for t in [0, 4, 5, 6, -1] {
        for req in [
            Request::CheckWatches {
                path: "/a".into(),
                watcher_type: t,
            },
            Request::RemoveWatches {
                path: "/a".into(),
                watcher_type: t,
            },
        ] {
            assert_eq!(err(h.call(1, req)), ErrorCode::MarshallingError, "type {t}");
        }
    }
    // Any (3) still finds and removes the persistent watch.
    ok(h.call(
        1,
        Request::RemoveWatches {
            path: "/a".into(),
            watcher_type: 3,
        },
    ));
}

/// ZooKeeper Programmer's Guide, "Persistent, Recursive Watches": addWatch
/// takes mode 0 (persistent) or 1 (persistent recursive); ZooKeeper 3.8
/// answers MarshallingError for another mode, whatever the path.
#[test]
fn add_watch_with_an_unknown_mode_is_a_marshalling_error() {
    let mut h = Harness::default();
    h.connect(1);
    for (path, mode) in [("/a", 2), ("/a", -1), ("/", 3), ("bad", 2)] {
        let e = err(h.call(
            1,
            Request::AddWatch {
                path: path.into(),
                mode,
            },
        ));
        assert_eq!(e, ErrorCode::MarshallingError, "{path} mode {mode}");
    }
}

/// ZooKeeper checks a delete's path only for a '/' and a NUL character;
/// any other path a node cannot have is simply not there (NoNode).
#[test]
fn delete_of_a_path_no_node_can_have_is_no_node() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(1, create("/a", b"", CreateMode::Persistent)));
    for path in ["/a/", "/a//b", "/a/.", "/a/\u{9f}", "/a/\u{e000}", "/."] {
        let e = err(h.call(
            1,
            Request::Delete {
                path: path.into(),
                version: -1,
            },
        ));
        assert_eq!(e, ErrorCode::NoNode, "{path:?}");
    }
    for path in ["", "a", "/a\0b", "/", "/zookeeper"] {
        let e = err(h.call(
            1,
            Request::Delete {
                path: path.into(),
                version: -1,
            },
        ));
        assert_eq!(e, ErrorCode::BadArguments, "{path:?}");
    }
}

/// ZooKeeper does not check addWatch's path: a watch on a path that no
/// node can have is accepted (and never fires).
#[test]
fn add_watch_accepts_any_path() {
    let mut h = Harness::default();
    h.connect(1);
    for path in ["//a", "a", "/a/", ""] {
        ok(h.call(
            1,
            Request::AddWatch {
                path: path.into(),
                mode: 1,
            },
        ));
    }
}

/// ZooKeeper's reads do not validate their path: a path with a NUL names
/// no node, so the read is NoNode; exists alone refuses a NUL.
#[test]
fn a_read_of_a_path_with_a_nul_is_no_node() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(1, create("/a", b"", CreateMode::Persistent)));
    for req in [
        Request::GetData {
            path: "/a\0b".into(),
            watch: false,
        },
        Request::GetChildren {
            path: "/a/\0".into(),
            watch: false,
        },
        Request::GetAllChildrenNumber {
            path: "/a\0".into(),
        },
    ] {
        assert_eq!(err(h.call(1, req)), ErrorCode::NoNode);
    }
    // exists is the one read that checks for a NUL.
    let e = err(h.call(
        1,
        Request::Exists {
            path: "/a\0b".into(),
            watch: false,
        },
    ));
    assert_eq!(e, ErrorCode::BadArguments);
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Watches": a multiRead's reads
/// set no watches in ZooKeeper (it rebuilds each read without its watch
/// flag), so a later change sends no event.
#[test]
fn a_multi_read_sets_no_watches() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(1, create("/a", b"", CreateMode::Persistent)));
    ok(h.call(
        1,
        Request::MultiRead(vec![
            Request::GetData {
                path: "/a".into(),
                watch: true,
            },
            Request::GetChildren {
                path: "/a".into(),
                watch: true,
            },
        ]),
    ));
    ok(h.call(1, create("/a/b", b"", CreateMode::Persistent)));
    ok(h.call(
        1,
        Request::SetData {
            path: "/a".into(),
            data: Some(b"x".to_vec()),
            version: -1,
        },
    ));
    assert_eq!(h.events(1), vec![]);
}

/// ZooKeeper answers a create2 inside a multi with a create result: the
/// path, no stat.
#[test]
fn a_create2_inside_a_multi_is_answered_as_a_create() {
    let mut h = Harness::default();
    h.connect(1);
    let c = CreateRequest {
        path: "/a".into(),
        data: Some(vec![]),
        acl: Acl::open_unsafe(),
        flags: 0,
        ttl: None,
    };
    let r = ok(h.call(1, Request::Multi(vec![Request::Create2(c)])));
    assert_eq!(
        r,
        Response::Multi(vec![OpResult::Create { path: "/a".into() }])
    );
}

/// deleteContainer is for servers: ZooKeeper answers a client's with
/// BadArguments (it reads the body as a bare path, and the jute length in
/// front holds NUL bytes), and deletes nothing.
#[test]
fn a_clients_delete_container_is_bad_arguments_and_deletes_nothing() {
    let mut h = Harness::default();
    h.connect(1);
    let c = CreateRequest {
        path: "/c".into(),
        data: Some(vec![]),
        acl: Acl::open_unsafe(),
        flags: CreateMode::Container.flags(),
        ttl: None,
    };
    ok(h.call(1, Request::CreateContainer(c)));
    for path in ["/c", "/nope", "bad"] {
        let e = err(h.call(1, Request::DeleteContainer { path: path.into() }));
        assert_eq!(e, ErrorCode::BadArguments, "{path}");
    }
    ok(h.call(
        1,
        Request::Exists {
            path: "/c".into(),
            watch: false,
        },
    ));
}

/// getEphemerals lists every ephemeral for a blank prefix or one that
/// trims to "/", and otherwise matches the prefix as sent, untrimmed (as
/// ZooKeeper's FinalRequestProcessor does).
#[test]
fn get_ephemerals_matches_the_prefix_untrimmed() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(1, create("/e", b"", CreateMode::Ephemeral)));
    for (prefix, found) in [
        ("/\u{a0}", false),
        ("/e\u{1}", false),
        (" /e", false),
        ("/e", true),
        ("", true),
        ("  ", true),
        (" / ", true),
    ] {
        let r = ok(h.call(
            1,
            Request::GetEphemerals {
                prefix: prefix.into(),
            },
        ));
        let want: Vec<String> = if found { vec!["/e".into()] } else { vec![] };
        assert_eq!(r, Response::Ephemerals(want), "{prefix:?}");
    }
}

/// ZooKeeper queues a ping behind its session's requests in flight, as a
/// read; wazoo answers it at once (ZooKeeper Programmer's Guide, "ZooKeeper
/// Sessions": a client that hears nothing for 2/3 of its session timeout
/// drops the connection). A recipe call may wait seconds before it is even
/// proposed, and a client waiting for it must keep its connection. A ping
/// orders nothing: clients match its reply by its xid, not by position.
#[test]
fn a_ping_is_answered_at_once_behind_a_write_that_is_not_yet_durable() {
    let mut h = Harness::default();
    h.connect(1);
    h.auto_sync = false;
    h.send(1, 1, create("/a", b"", CreateMode::Persistent));
    h.send(1, wazoo_proto::xid::PING, Request::Ping);
    let replies = |h: &Harness| -> Vec<i32> {
        h.sent[&1]
            .iter()
            .filter_map(|s| match s {
                Sent::Reply { xid, err: 0, .. } => Some(*xid),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        replies(&h),
        vec![wazoo_proto::xid::PING],
        "the ping is answered while the create waits for the log"
    );
    h.sync();
    assert_eq!(replies(&h), vec![wazoo_proto::xid::PING, 1]);
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Data Model": a node created or
/// set with null data (a jute buffer of length -1) keeps it, and getData
/// answers null (length -1), alone and inside a multiRead, with dataLength
/// 0; empty data stays empty. wazoo answered an empty buffer for null.
#[test]
fn null_data_reads_back_as_null_not_empty() {
    let mut h = Harness::default();
    h.connect(1);
    let get = |path: &str| Request::GetData {
        path: path.into(),
        watch: false,
    };
    let data_of = |r: Response| match r {
        Response::GetData { data, stat } => {
            assert_eq!(stat.data_length, 0);
            data
        }
        other => panic!("{other:?}"),
    };
    let mut null_create = create("/n", b"", CreateMode::Persistent);
    if let Request::Create(c) = &mut null_create {
        c.data = None;
    }
    ok(h.call(1, null_create));
    ok(h.call(1, create("/e", b"", CreateMode::Persistent)));
    assert_eq!(data_of(ok(h.call(1, get("/n")))), None);
    assert_eq!(data_of(ok(h.call(1, get("/e")))), Some(Vec::new()));
    match ok(h.call(1, Request::MultiRead(vec![get("/n"), get("/e")]))) {
        Response::Multi(results) => {
            let data: Vec<_> = results
                .into_iter()
                .map(|r| match r {
                    OpResult::GetData { data, .. } => data,
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(data, vec![None, Some(Vec::new())]);
        }
        other => panic!("{other:?}"),
    }
    // setData with null, alone and in a multi, makes the data null again.
    let set = |path: &str, data: Option<&[u8]>| Request::SetData {
        path: path.into(),
        data: data.map(<[u8]>::to_vec),
        version: -1,
    };
    ok(h.call(1, set("/n", Some(b"x"))));
    assert!(matches!(
        ok(h.call(1, get("/n"))),
        Response::GetData { data: Some(d), .. } if d == b"x"
    ));
    ok(h.call(1, set("/n", None)));
    assert_eq!(data_of(ok(h.call(1, get("/n")))), None);
    ok(h.call(1, Request::Multi(vec![set("/e", None)])));
    assert_eq!(data_of(ok(h.call(1, get("/e")))), None);
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Watches" (removing watches):
/// checkWatches of the empty path finds nothing, even a watch filed
/// under "" (an exists of "" with a watch), as ZooKeeper 3.8's walk over a
/// path and its ancestors yields nothing for "" (found by the
/// differential long run).
#[test]
fn check_watches_of_the_empty_path_finds_no_watch() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(
        1,
        Request::Exists {
            path: String::new(),
            watch: true,
        },
    ));
    for t in [1, 2, 3] {
        let e = err(h.call(
            1,
            Request::CheckWatches {
                path: String::new(),
                watcher_type: t,
            },
        ));
        assert_eq!(e, ErrorCode::NoWatcher, "type {t}");
    }
}
