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
