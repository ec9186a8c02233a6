//! Every ZooKeeper operation through the client, against a real server (Apache
//! ZooKeeper 3.8; wazoo with `--ignored` once it serves clients). Each test
//! works under its own chroot (ZooKeeper Programmer's Guide, "How to Create A
//! Client Session": paths relative to the chroot).

mod common;

use common::{connect, fresh_root, opts, within};
use wazoo_client::{
    digest_id, perms, Acl, AddWatchMode, Client, CreateMode, Error, MultiResult, Op, ReadOp,
    ReadResult, SessionState, WatcherType,
};
use wazoo_testkit::Flavor;

flavored!(
    create_get_set_delete_follow_versions,
    chroot_applies_to_every_path_sent_and_received,
    sequential_nodes_get_ten_digit_counters,
    multi_is_all_or_nothing_and_names_the_failed_op,
    multi_read_answers_each_read_on_its_own,
    acl_and_digest_auth_guard_nodes,
    unknown_auth_scheme_is_fatal_auth_failure,
    containers_and_ttl_nodes_are_created_with_their_modes,
    ephemeral_nodes_go_when_the_session_is_closed,
    counting_ephemerals_and_identity,
    sync_and_check,
    remove_and_check_watches,
);

async fn create_get_set_delete_follow_versions(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "crud").await;
    let (zk, _ev) = connect(&cs, opts()).await;
    let open = Acl::open_unsafe();

    assert_eq!(zk.exists("/a").await.unwrap(), None);
    assert_eq!(
        zk.create("/a", b"one", &open, CreateMode::Persistent)
            .await
            .unwrap(),
        "/a"
    );
    assert_eq!(
        zk.create("/a", b"again", &open, CreateMode::Persistent)
            .await,
        Err(Error::NodeExists)
    );
    assert_eq!(
        zk.create("/missing/child", b"", &open, CreateMode::Persistent)
            .await,
        Err(Error::NoNode)
    );
    let (data, stat) = zk.get_data("/a").await.unwrap();
    assert_eq!(data, b"one");
    assert_eq!(stat.version, 0);
    assert_eq!(stat.data_length, 3);
    assert_eq!(zk.exists("/a").await.unwrap(), Some(stat.clone()));

    let stat1 = zk.set_data("/a", b"two", Some(0)).await.unwrap();
    assert_eq!(stat1.version, 1);
    assert_eq!(
        zk.set_data("/a", b"stale", Some(0)).await,
        Err(Error::BadVersion)
    );
    let stat2 = zk.set_data("/a", b"three", None).await.unwrap();
    assert_eq!(stat2.version, 2);
    assert_eq!(zk.get_data("/a").await.unwrap().0, b"three");

    let (path, stat) = zk
        .create2("/a/b", b"", &open, CreateMode::Persistent)
        .await
        .unwrap();
    assert_eq!(path, "/a/b");
    assert_eq!(stat.version, 0);
    assert_eq!(stat.czxid, stat.mzxid);
    assert_eq!(zk.delete("/a", None).await, Err(Error::NotEmpty));
    let (kids, parent) = zk.get_children2("/a").await.unwrap();
    assert_eq!(kids, vec!["b".to_string()]);
    assert_eq!(parent.num_children, 1);
    assert_eq!(zk.get_children("/a").await.unwrap(), kids);

    assert_eq!(zk.delete("/a/b", Some(7)).await, Err(Error::BadVersion));
    zk.delete("/a/b", Some(0)).await.unwrap();
    zk.delete("/a", Some(2)).await.unwrap();
    assert_eq!(zk.delete("/a", None).await, Err(Error::NoNode));
    assert_eq!(zk.get_data("/a").await, Err(Error::NoNode));
    zk.close().await.unwrap();
}

async fn chroot_applies_to_every_path_sent_and_received(flavor: Flavor) {
    // ZooKeeper Programmer's Guide: "getting/setting/etc... /foo/bar would
    // result in operations being run on /app/a/foo/bar (from the server
    // perspective)".
    let (srv, cs) = fresh_root(flavor, "chroot").await;
    let addr = srv.addr;
    let (root, _e1) = connect(&addr.to_string(), opts()).await;
    let (app, _e2) = connect(&cs, opts()).await;
    let open = Acl::open_unsafe();

    app.create("/foo", b"", &open, CreateMode::Persistent)
        .await
        .unwrap();
    app.create("/foo/bar", b"x", &open, CreateMode::Persistent)
        .await
        .unwrap();
    assert_eq!(root.get_data("/chroot/foo/bar").await.unwrap().0, b"x");
    assert_eq!(
        app.get_children("/").await.unwrap(),
        vec!["foo".to_string()]
    );

    // Paths coming back are relative: created names, watch events, multi.
    let seq = app
        .create("/foo/s-", b"", &open, CreateMode::PersistentSequential)
        .await
        .unwrap();
    assert!(seq.starts_with("/foo/s-"), "{seq}");
    let (_, _, w) = app.get_data_w("/foo/bar").await.unwrap();
    root.set_data("/chroot/foo/bar", b"y", None).await.unwrap();
    let ev = within("the data watch", w).await;
    assert_eq!(ev.path.as_deref(), Some("/foo/bar"));
    let res = app
        .multi(&[Op::create("/foo/m", b"", &open, CreateMode::Persistent)])
        .await
        .unwrap();
    assert_eq!(
        res,
        vec![MultiResult::Create {
            path: "/foo/m".into(),
            stat: None
        }]
    );
    // The chroot itself is "/".
    let (_, stat) = app.get_data("/").await.unwrap();
    assert_eq!(stat.num_children, 1);
    app.close().await.unwrap();
    root.close().await.unwrap();
}

async fn sequential_nodes_get_ten_digit_counters(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "seq").await;
    let (zk, _e) = connect(&cs, opts()).await;
    let open = Acl::open_unsafe();
    let a = zk
        .create("/q-", b"", &open, CreateMode::PersistentSequential)
        .await
        .unwrap();
    let b = zk
        .create("/q-", b"", &open, CreateMode::EphemeralSequential)
        .await
        .unwrap();
    assert_eq!(a, "/q-0000000000");
    assert_eq!(b, "/q-0000000001");
    zk.close().await.unwrap();
}

async fn multi_is_all_or_nothing_and_names_the_failed_op(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "multi").await;
    let (zk, _e) = connect(&cs, opts()).await;
    let open = Acl::open_unsafe();
    zk.create("/exists", b"", &open, CreateMode::Persistent)
        .await
        .unwrap();

    let err = zk
        .multi(&[
            Op::create("/new", b"", &open, CreateMode::Persistent),
            Op::set_data("/exists", b"changed", None),
            Op::create("/exists", b"", &open, CreateMode::Persistent),
        ])
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::Multi {
            index: 2,
            error: Box::new(Error::NodeExists)
        }
    );
    assert_eq!(
        zk.exists("/new").await.unwrap(),
        None,
        "nothing was applied"
    );
    assert_eq!(zk.get_data("/exists").await.unwrap().0, b"");

    let res = zk
        .multi(&[
            Op::check("/exists", Some(0)),
            Op::create("/new", b"n", &open, CreateMode::Persistent),
            Op::set_data("/exists", b"changed", Some(0)),
            Op::create("/c", b"", &open, CreateMode::Container),
            Op::delete("/new", None),
        ])
        .await
        .unwrap();
    assert_eq!(res.len(), 5);
    assert_eq!(res[0], MultiResult::Check);
    assert_eq!(
        res[1],
        MultiResult::Create {
            path: "/new".into(),
            stat: None
        }
    );
    assert!(matches!(&res[2], MultiResult::SetData { stat } if stat.version == 1));
    assert!(matches!(&res[3], MultiResult::Create { path, stat: Some(_) } if path == "/c"));
    assert_eq!(res[4], MultiResult::Delete);

    let err = zk
        .multi(&[Op::check("/exists", Some(0))])
        .await
        .unwrap_err();
    assert_eq!(err.code(), wazoo_client::ErrorCode::BadVersion);
    assert!(zk.multi(&[]).await.unwrap().is_empty());
    zk.close().await.unwrap();
}

async fn multi_read_answers_each_read_on_its_own(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "multiread").await;
    let (zk, _e) = connect(&cs, opts()).await;
    let open = Acl::open_unsafe();
    zk.create("/a", b"A", &open, CreateMode::Persistent)
        .await
        .unwrap();
    zk.create("/a/k", b"", &open, CreateMode::Persistent)
        .await
        .unwrap();
    let res = zk
        .multi_read(&[
            ReadOp::get_data("/a"),
            ReadOp::get_children("/a"),
            ReadOp::get_data("/nope"),
        ])
        .await
        .unwrap();
    assert!(matches!(&res[0], Ok(ReadResult::Data { data, .. }) if data == b"A"));
    assert_eq!(
        res[1],
        Ok(ReadResult::Children {
            children: vec!["k".into()]
        })
    );
    assert_eq!(res[2], Err(Error::NoNode));
    zk.close().await.unwrap();
}

async fn acl_and_digest_auth_guard_nodes(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "acl").await;
    let (owner, _e1) = connect(&cs, opts()).await;
    let (other, _e2) = connect(&cs, opts()).await;
    owner.add_auth("digest", b"alice:secret").await.unwrap();
    // CREATOR_ALL_ACL: every permission for the authenticated creator.
    owner
        .create(
            "/private",
            b"p",
            &Acl::creator_all(),
            CreateMode::Persistent,
        )
        .await
        .unwrap();
    let (acl, _) = owner.get_acl("/private").await.unwrap();
    assert_eq!(
        acl,
        vec![Acl::new(
            perms::ALL,
            "digest",
            &digest_id("alice", "secret")
        )]
    );
    assert_eq!(other.get_data("/private").await, Err(Error::NoAuth));
    other.add_auth("digest", b"alice:wrong").await.unwrap();
    assert_eq!(other.get_data("/private").await, Err(Error::NoAuth));
    other.add_auth("digest", b"alice:secret").await.unwrap();
    assert_eq!(other.get_data("/private").await.unwrap().0, b"p");

    // setACL with a version; world may read afterwards.
    let stat = owner
        .set_acl(
            "/private",
            &[
                Acl::new(perms::ALL, "digest", &digest_id("alice", "secret")),
                Acl::new(perms::READ, "world", "anyone"),
            ],
            Some(0),
        )
        .await
        .unwrap();
    assert_eq!(stat.aversion, 1);
    assert_eq!(
        owner
            .set_acl("/private", &Acl::open_unsafe(), Some(0))
            .await,
        Err(Error::BadVersion)
    );
    let (third, _e3) = connect(&cs, opts()).await;
    assert_eq!(third.get_data("/private").await.unwrap().0, b"p");
    assert_eq!(
        third.set_data("/private", b"no", None).await,
        Err(Error::NoAuth)
    );
    assert_eq!(
        owner.set_acl("/private", &[], None).await,
        Err(Error::InvalidAcl)
    );

    let who = owner.who_am_i().await.unwrap();
    assert!(
        who.iter()
            .any(|c| c.auth_scheme == "digest" && c.user == "alice"),
        "{who:?}"
    );
    for c in [owner, other, third] {
        c.close().await.unwrap();
    }
}

async fn unknown_auth_scheme_is_fatal_auth_failure(flavor: Flavor) {
    // ZooKeeper Programmer's Guide, "Session States": authentication failure is
    // unrecoverable; the handle moves to a final state.
    let (_srv, cs) = fresh_root(flavor, "authfail").await;
    let (zk, mut events) = connect(&cs, opts()).await;
    assert_eq!(
        zk.add_auth("no-such-scheme", b"x").await,
        Err(Error::AuthFailed)
    );
    let s = within(
        "AuthFailed on the event stream",
        events.wait_for(|s| !s.is_alive()),
    )
    .await;
    assert_eq!(s, Some(SessionState::AuthFailed));
    assert_eq!(zk.state(), SessionState::AuthFailed);
    assert_eq!(zk.exists("/").await, Err(Error::AuthFailed));
}

async fn containers_and_ttl_nodes_are_created_with_their_modes(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "modes").await;
    let (zk, _e) = connect(&cs, opts()).await;
    let open = Acl::open_unsafe();
    assert_eq!(
        zk.create("/box", b"", &open, CreateMode::Container)
            .await
            .unwrap(),
        "/box"
    );
    let (path, stat) = zk
        .create_ttl(
            "/ttl",
            b"t",
            &open,
            CreateMode::PersistentWithTtl,
            std::time::Duration::from_secs(3600),
        )
        .await
        .unwrap();
    assert_eq!(path, "/ttl");
    assert_eq!(stat.data_length, 1);
    let (path, _) = zk
        .create_ttl(
            "/ttl-",
            b"",
            &open,
            CreateMode::PersistentSequentialWithTtl,
            std::time::Duration::from_secs(3600),
        )
        .await
        .unwrap();
    assert!(path.starts_with("/ttl-00"), "{path}");
    // Client-side refusals, as ZooKeeper's client does.
    assert!(matches!(
        zk.create("/t2", b"", &open, CreateMode::PersistentWithTtl)
            .await,
        Err(Error::BadArguments(_))
    ));
    assert_eq!(
        zk.create("/t2", b"", &[], CreateMode::Persistent).await,
        Err(Error::InvalidAcl)
    );
    zk.close().await.unwrap();
}

async fn ephemeral_nodes_go_when_the_session_is_closed(flavor: Flavor) {
    // ZooKeeper Programmer's Guide, "Session States": closing the handle moves
    // it to CLOSED; the session's ephemeral nodes are deleted.
    let (_srv, cs) = fresh_root(flavor, "ephemeral").await;
    let (watcher, _e1) = connect(&cs, opts()).await;
    let (zk, mut events) = connect(&cs, opts()).await;
    zk.create("/e", b"", &Acl::open_unsafe(), CreateMode::Ephemeral)
        .await
        .unwrap();
    let stat = watcher
        .exists("/e")
        .await
        .unwrap()
        .expect("ephemeral exists");
    assert_eq!(stat.ephemeral_owner, zk.session_id());
    assert_eq!(
        zk.create("/e/child", b"", &Acl::open_unsafe(), CreateMode::Persistent)
            .await,
        Err(Error::NoChildrenForEphemerals)
    );
    let (_, gone) = watcher.exists_w("/e").await.unwrap();

    zk.close().await.unwrap();
    assert_eq!(
        within("the Closed event", events.wait_for(|s| !s.is_alive())).await,
        Some(SessionState::Closed)
    );
    let ev = within("the ephemeral's deletion", gone).await;
    assert_eq!(ev.event_type, wazoo_client::EventType::NodeDeleted);
    assert_eq!(watcher.exists("/e").await.unwrap(), None);
    assert_eq!(zk.get_data("/").await, Err(Error::Closed));
    zk.close().await.unwrap();
    watcher.close().await.unwrap();
}

async fn counting_ephemerals_and_identity(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "count").await;
    let (zk, _e) = connect(&cs, opts()).await;
    let open = Acl::open_unsafe();
    zk.create("/p", b"", &open, CreateMode::Persistent)
        .await
        .unwrap();
    zk.create("/p/e1", b"", &open, CreateMode::Ephemeral)
        .await
        .unwrap();
    zk.create("/p/x", b"", &open, CreateMode::Persistent)
        .await
        .unwrap();
    zk.create("/p/x/e2", b"", &open, CreateMode::Ephemeral)
        .await
        .unwrap();
    assert_eq!(zk.get_all_children_number("/p").await.unwrap(), 3);
    let mut eph = zk.get_ephemerals("/").await.unwrap();
    eph.sort();
    assert_eq!(eph, vec!["/p/e1".to_string(), "/p/x/e2".to_string()]);
    assert_eq!(
        zk.get_ephemerals("/p/x").await.unwrap(),
        vec!["/p/x/e2".to_string()]
    );
    let who = zk.who_am_i().await.unwrap();
    assert!(who.iter().any(|c| c.auth_scheme == "ip"), "{who:?}");
    zk.close().await.unwrap();
}

async fn sync_and_check(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "sync").await;
    let (zk, _e) = connect(&cs, opts()).await;
    zk.create("/n", b"", &Acl::open_unsafe(), CreateMode::Persistent)
        .await
        .unwrap();
    zk.sync("/n").await.unwrap();
    zk.check("/n", Some(0)).await.unwrap();
    zk.check("/n", None).await.unwrap();
    assert_eq!(zk.check("/n", Some(3)).await, Err(Error::BadVersion));
    assert_eq!(zk.check("/none", None).await, Err(Error::NoNode));
    zk.close().await.unwrap();
}

async fn remove_and_check_watches(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "rmwatch").await;
    let (zk, _e) = connect(&cs, opts()).await;
    zk.create("/n", b"", &Acl::open_unsafe(), CreateMode::Persistent)
        .await
        .unwrap();
    // The client refuses to remove what it does not have (NoWatcher).
    assert_eq!(
        zk.remove_watches("/n", WatcherType::Data, false).await,
        Err(Error::NoWatcher)
    );
    let (_, _, data_w) = zk.get_data_w("/n").await.unwrap();
    let (_, child_w) = zk.get_children_w("/n").await.unwrap();
    zk.check_watches("/n", WatcherType::Data).await.unwrap();
    zk.remove_watches("/n", WatcherType::Data, false)
        .await
        .unwrap();
    let ev = within("DataWatchRemoved", data_w).await;
    assert_eq!(ev.event_type, wazoo_client::EventType::DataWatchRemoved);
    assert_eq!(
        zk.check_watches("/n", WatcherType::Data).await,
        Err(Error::NoWatcher)
    );
    // Local removal: no request; the watch gets its removal event.
    zk.remove_watches("/n", WatcherType::Children, true)
        .await
        .unwrap();
    let ev = within("ChildWatchRemoved", child_w).await;
    assert_eq!(ev.event_type, wazoo_client::EventType::ChildWatchRemoved);

    let mut pw = zk.add_watch("/n", AddWatchMode::Persistent).await.unwrap();
    zk.remove_watches("/n", WatcherType::Persistent, false)
        .await
        .unwrap();
    let ev = within("PersistentWatchRemoved", pw.recv()).await.unwrap();
    assert_eq!(
        ev.event_type,
        wazoo_client::EventType::PersistentWatchRemoved
    );
    assert_eq!(within("the stream to end", pw.recv()).await, None);
    assert_eq!(
        zk.check_watches("/n", WatcherType::Any).await,
        Err(Error::NoWatcher),
        "the server dropped it too"
    );
    zk.close().await.unwrap();
}

#[tokio::test]
async fn client_refuses_bad_arguments_before_sending() {
    // ZooKeeper's client throws IllegalArgumentException for these.
    let (zk, _e) = Client::start("127.0.0.1:1", opts()).unwrap();
    for p in ["", "noslash", "/trailing/", "/a//b", "/a/./b"] {
        assert!(
            matches!(zk.exists(p).await, Err(Error::BadArguments(_))),
            "{p:?}"
        );
    }
    assert!(matches!(
        zk.multi(&[Op::delete("bad", None)]).await,
        Err(Error::BadArguments(_))
    ));
    zk.close().await.unwrap();
}
