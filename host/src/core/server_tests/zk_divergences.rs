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
