//! Sessions and watches through the pipeline: one-shot watches fire once,
//! before the reply of the write that fired them; expiry and closeSession
//! delete ephemerals and fire their watches; a re-attach needs the
//! password.

use super::*;

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions", "ZooKeeper Watches": set on read, fired once, before the data
// can be read.
#[test]
fn a_data_watch_fires_once_before_the_write_reply() {
    let mut h = Harness::default();
    h.connect(1);
    h.connect(2);
    ok(h.call(1, create("/w", b"", CreateMode::Persistent)));
    ok(h.call(
        2,
        Request::GetData {
            path: "/w".into(),
            watch: true,
        },
    ));
    ok(h.call(
        1,
        Request::SetData {
            path: "/w".into(),
            data: Some(b"1".to_vec()),
            version: -1,
        },
    ));
    ok(h.call(
        1,
        Request::SetData {
            path: "/w".into(),
            data: Some(b"2".to_vec()),
            version: -1,
        },
    ));
    assert_eq!(h.events(2), vec![(EventType::NodeDataChanged, "/w".into())]);
}

#[test]
fn exists_watch_on_a_missing_node_fires_on_create() {
    let mut h = Harness::default();
    h.connect(1);
    h.connect(2);
    assert_eq!(
        err(h.call(
            2,
            Request::Exists {
                path: "/n".into(),
                watch: true
            }
        )),
        ErrorCode::NoNode
    );
    ok(h.call(1, create("/n", b"", CreateMode::Persistent)));
    assert_eq!(h.events(2), vec![(EventType::NodeCreated, "/n".into())]);
}

#[test]
fn child_watch_fires_on_create_and_delete_of_a_child() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(1, create("/p", b"", CreateMode::Persistent)));
    ok(h.call(
        1,
        Request::GetChildren {
            path: "/p".into(),
            watch: true,
        },
    ));
    ok(h.call(1, create("/p/a", b"", CreateMode::Persistent)));
    assert_eq!(
        h.events(1),
        vec![(EventType::NodeChildrenChanged, "/p".into())]
    );
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": expiry deletes the ephemerals and fires
// their watches.
#[test]
fn session_expiry_removes_ephemerals_and_fires_watches() {
    let mut h = Harness::default();
    let s = h.connect_with(1, 0, vec![0; 16], 4000);
    h.connect_with(2, 0, vec![0; 16], 40_000);
    ok(h.call(1, create("/eph", b"", CreateMode::Ephemeral)));
    ok(h.call(
        2,
        Request::Exists {
            path: "/eph".into(),
            watch: true,
        },
    ));
    h.step(Input::Closed { conn: 1 });
    h.now += 3000;
    h.step(Input::Tick);
    assert!(h.events(2).is_empty(), "not expired yet");
    h.now += 10_000;
    h.step(Input::Tick);
    assert_eq!(h.events(2), vec![(EventType::NodeDeleted, "/eph".into())]);
    // Re-attaching to the expired session is refused the ZooKeeper way.
    let r = h.connect_with(3, s.session_id, s.passwd.clone(), 4000);
    assert_eq!((r.session_id, r.timeout_ms), (0, 0));
    assert!(h.closed.contains(&3));
}

#[test]
fn reattach_with_a_wrong_password_is_refused_and_the_session_survives() {
    let mut h = Harness::default();
    let s = h.connect(1);
    let r = h.connect_with(2, s.session_id, vec![1; 16], 30_000);
    assert_eq!(r.timeout_ms, 0);
    assert!(h.closed.contains(&2));
    assert!(
        !h.closed.contains(&1),
        "a bad password does not kick the owner out"
    );
    let r = h.connect_with(3, s.session_id, s.passwd.clone(), 30_000);
    assert_eq!(r.session_id, s.session_id);
    assert!(
        h.closed.contains(&1),
        "the session moved: its old connection is closed"
    );
}

#[test]
fn close_session_deletes_ephemerals_replies_then_closes() {
    let mut h = Harness::default();
    h.connect(1);
    h.connect(2);
    ok(h.call(1, create("/e", b"", CreateMode::Ephemeral)));
    h.call(1, Request::CloseSession);
    assert!(h.closed.contains(&1));
    assert_eq!(
        err(h.call(
            2,
            Request::Exists {
                path: "/e".into(),
                watch: false
            }
        )),
        ErrorCode::NoNode
    );
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a client re-attaches
// with its session's id and password. ZooKeeper computes the password from
// the id, which every reader sees (a node's ephemeralOwner, `cons`); here
// the password is the random bytes the shell gave the handshake, so the
// computed one is refused as ZooKeeper refuses a wrong password (timeout
// 0: the client sees its session expired) and the session is untouched.
#[test]
fn the_password_computed_from_the_session_id_does_not_reattach() {
    let mut h = Harness::default();
    let s = h.connect(1);
    assert_eq!(s.passwd, vec![0x41; 16], "the shell's random bytes");
    let hijack = crate::session::zookeeper_password(s.session_id).to_vec();
    let r = h.connect_with(2, s.session_id, hijack, 30_000);
    assert_eq!((r.session_id, r.timeout_ms), (0, 0));
    assert!(h.closed.contains(&2) && !h.closed.contains(&1));
    let r = h.connect_with(3, s.session_id, s.passwd.clone(), 30_000);
    assert_eq!((r.session_id, r.passwd), (s.session_id, s.passwd));
}

// A session restored without a verifier (a snapshot written before
// passwords were random, or ZooKeeper's data imported) keeps ZooKeeper's
// password: its client holds nothing else.
#[test]
fn a_session_from_before_random_passwords_keeps_zookeepers_password() {
    let mut h = Harness::default();
    let id = 0x0100_0000_0000_0007;
    h.server = Server::recovered(
        ServerConfig::default(),
        crate::tree::DataTree::new(),
        vec![wazoo_proto::SessionRecord {
            id,
            timeout_ms: 30_000,
            verifier: None,
        }],
        crate::recipe::RecipeWaits::default(),
        Zxid::ZERO,
        h.clocks(),
    );
    let r = h.connect_with(2, id, vec![0x42; 16], 30_000);
    assert_eq!(r.timeout_ms, 0, "a wrong password is still refused");
    let zk = crate::session::zookeeper_password(id).to_vec();
    let r = h.connect_with(3, id, zk.clone(), 30_000);
    assert_eq!((r.session_id, r.passwd), (id, zk));
}
