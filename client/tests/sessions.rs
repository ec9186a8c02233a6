//! Sessions and watches as ZooKeeper Programmer's Guide ("ZooKeeper
//! Sessions") describes them, against a real server; connection loss and
//! partitions are made with the testkit's TCP proxy.

mod common;

use std::time::Duration;

use common::{connect, fresh_root, opts, within};
use wazoo_client::{
    Acl, AddWatchMode, Client, ClientOptions, CreateMode, Error, EventType, KeeperState,
    SessionState,
};
use wazoo_testkit::{Flavor, Proxy};

flavored!(
    default_watcher_sees_connecting_then_connected,
    watch_events_arrive_before_the_results_that_depend_on_them,
    one_shot_watches_fire_once,
    persistent_and_recursive_watches_deliver_every_event_in_order,
    connection_loss_fails_pending_calls_and_the_session_survives_with_its_watches,
    expiry_is_reported_only_once_the_client_reaches_the_ensemble_again,
    idle_session_is_kept_alive_by_pings,
    silent_partition_is_detected_by_the_read_timeout,
    credentials_are_sent_again_on_reconnect,
    session_can_be_resumed_with_its_id_and_password,
    update_server_list_moves_the_client_when_its_server_leaves,
    pipelined_requests_complete_in_order,
);

/// `host:port/chroot` of the proxy in front of the server.
fn via(proxy: &Proxy, chroot_cs: &str) -> String {
    let chroot = &chroot_cs[chroot_cs.find('/').unwrap()..];
    format!("{}{chroot}", proxy.connect_string())
}

async fn default_watcher_sees_connecting_then_connected(flavor: Flavor) {
    // ZooKeeper Programmer's Guide, "Default Watcher": the initial state is
    // disconnected; the first event of a new connection is the connection event
    // (preceded here by Connecting, the handle state of "Session States").
    let (_srv, cs) = fresh_root(flavor, "states").await;
    let (zk, mut events) = Client::start(&cs, opts()).unwrap();
    assert_eq!(
        within("Connecting", events.recv()).await,
        Some(SessionState::Connecting)
    );
    assert_eq!(
        within("Connected", events.recv()).await,
        Some(SessionState::Connected)
    );
    assert_ne!(zk.session_id(), 0);
    assert!(zk.session_timeout() > Duration::ZERO);
    zk.close().await.unwrap();
    assert_eq!(
        within("Closed", events.recv()).await,
        Some(SessionState::Closed)
    );
    assert_eq!(within("the end", events.recv()).await, None);
}

async fn watch_events_arrive_before_the_results_that_depend_on_them(flavor: Flavor) {
    // The server sends a watch event before the reply of the write that
    // triggered it; the client hands it over in the same order, so once
    // the write's result is in, the event is already there.
    let (_srv, cs) = fresh_root(flavor, "order").await;
    let (zk, _e) = connect(&cs, opts()).await;
    let open = Acl::open_unsafe();
    zk.create("/n", b"0", &open, CreateMode::Persistent)
        .await
        .unwrap();
    let mut stream = zk.add_watch("/n", AddWatchMode::Persistent).await.unwrap();
    for i in 1..=20u8 {
        let (_, _, mut w) = zk.get_data_w("/n").await.unwrap();
        zk.set_data("/n", &[i], None).await.unwrap();
        let ev = w.try_recv().expect("the event precedes the setData result");
        assert_eq!(ev.event_type, EventType::NodeDataChanged);
        let ev = stream.try_recv().expect("the persistent event too");
        assert_eq!(ev.event_type, EventType::NodeDataChanged);
    }
    zk.close().await.unwrap();
}

async fn one_shot_watches_fire_once(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "oneshot").await;
    let (zk, _e1) = connect(&cs, opts()).await;
    let (other, _e2) = connect(&cs, opts()).await;
    let open = Acl::open_unsafe();

    // exists on a missing node: fires on creation.
    let (none, created) = zk.exists_w("/n").await.unwrap();
    assert_eq!(none, None);
    // getData on a missing node sets no watch.
    assert_eq!(zk.get_data_w("/n").await.err(), Some(Error::NoNode));
    other
        .create("/n", b"", &open, CreateMode::Persistent)
        .await
        .unwrap();
    let ev = within("NodeCreated", created).await;
    assert_eq!(
        (ev.event_type, ev.path.as_deref()),
        (EventType::NodeCreated, Some("/n"))
    );

    let (_, _, changed) = zk.get_data_w("/n").await.unwrap();
    let (_, kids) = zk.get_children_w("/n").await.unwrap();
    other.set_data("/n", b"1", None).await.unwrap();
    other.set_data("/n", b"2", None).await.unwrap();
    other
        .create("/n/k", b"", &open, CreateMode::Persistent)
        .await
        .unwrap();
    assert_eq!(
        within("NodeDataChanged", changed).await.event_type,
        EventType::NodeDataChanged
    );
    assert_eq!(
        within("NodeChildrenChanged", kids).await.event_type,
        EventType::NodeChildrenChanged
    );

    // A deleted node fires data and child watches with NodeDeleted.
    let (_, _, d) = zk.get_data_w("/n/k").await.unwrap();
    let (_, c) = zk
        .get_children2_w("/n/k")
        .await
        .map(|(k, _, w)| (k, w))
        .unwrap();
    other.delete("/n/k", None).await.unwrap();
    assert_eq!(
        within("NodeDeleted", d).await.event_type,
        EventType::NodeDeleted
    );
    assert_eq!(
        within("NodeDeleted", c).await.event_type,
        EventType::NodeDeleted
    );
    zk.close().await.unwrap();
    other.close().await.unwrap();
}

async fn persistent_and_recursive_watches_deliver_every_event_in_order(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "persistent").await;
    let (zk, _e1) = connect(&cs, opts()).await;
    let (other, _e2) = connect(&cs, opts()).await;
    let open = Acl::open_unsafe();
    other
        .create("/tree", b"", &open, CreateMode::Persistent)
        .await
        .unwrap();
    // A server keeps one watch mode per (connection, path): the plain
    // persistent watch goes through a second client.
    let (zk2, _e3) = connect(&cs, opts()).await;
    let mut per = zk2
        .add_watch("/tree", AddWatchMode::Persistent)
        .await
        .unwrap();
    let mut rec = zk
        .add_watch("/tree", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();

    other
        .create("/tree/a", b"", &open, CreateMode::Persistent)
        .await
        .unwrap();
    other
        .create("/tree/a/b", b"", &open, CreateMode::Persistent)
        .await
        .unwrap();
    other.set_data("/tree/a/b", b"x", None).await.unwrap();
    other.set_data("/tree", b"y", None).await.unwrap();
    other.delete("/tree/a/b", None).await.unwrap();

    let mut got = Vec::new();
    for _ in 0..5 {
        let ev = within("a recursive event", rec.next_node_event())
            .await
            .unwrap();
        got.push((ev.event_type, ev.path.unwrap()));
    }
    assert_eq!(
        got,
        vec![
            (EventType::NodeCreated, "/tree/a".to_string()),
            (EventType::NodeCreated, "/tree/a/b".to_string()),
            (EventType::NodeDataChanged, "/tree/a/b".to_string()),
            (EventType::NodeDataChanged, "/tree".to_string()),
            (EventType::NodeDeleted, "/tree/a/b".to_string()),
        ]
    );
    let mut got = Vec::new();
    for _ in 0..2 {
        let ev = within("a persistent event", per.next_node_event())
            .await
            .unwrap();
        got.push((ev.event_type, ev.path.unwrap()));
    }
    assert_eq!(
        got,
        vec![
            (EventType::NodeChildrenChanged, "/tree".to_string()),
            (EventType::NodeDataChanged, "/tree".to_string()),
        ]
    );
    assert_eq!(per.try_recv(), None, "nothing else on /tree itself");
    zk.close().await.unwrap();
    zk2.close().await.unwrap();
    // The streams end once the client is closed.
    let last = within("the stream to end", async {
        let mut last = None;
        while let Some(ev) = per.recv().await {
            last = Some(ev);
        }
        last
    })
    .await;
    assert_eq!(last.map(|e| e.state), Some(KeeperState::Closed));
    other.close().await.unwrap();
}

async fn connection_loss_fails_pending_calls_and_the_session_survives_with_its_watches(
    flavor: Flavor,
) {
    // ZooKeeper Programmer's Guide: "The ZooKeeper client disconnects from a
    // server when there are pending operations to that server" ->
    // connectionloss; "the client will automatically try the next server ...
    // until a connection is (re-)established"; the session survives when
    // reconnected within the timeout; watches are re-registered so a change
    // made meanwhile is delivered after the reconnect.
    let (srv, cs) = fresh_root(flavor, "connloss").await;
    let addr = srv.addr;
    let proxy = Proxy::start(addr).unwrap();
    let (zk, mut events) = connect(&via(&proxy, &cs), opts()).await;
    let (other, _e) = connect(&cs, opts()).await;
    let open = Acl::open_unsafe();
    zk.create("/eph", b"", &open, CreateMode::Ephemeral)
        .await
        .unwrap();
    zk.create("/watched", b"0", &open, CreateMode::Persistent)
        .await
        .unwrap();
    let session = zk.session_id();
    let (_, _, data_watch) = zk.get_data_w("/watched").await.unwrap();
    let (_, child_watch) = zk.get_children_w("/").await.unwrap();
    let (_, created_watch) = zk.exists_w("/later").await.unwrap();
    let mut recursive = zk
        .add_watch("/", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    assert_eq!(events.try_recv(), Some(SessionState::Connecting));
    assert_eq!(events.try_recv(), Some(SessionState::Connected));

    // A call in flight when the connection drops fails with ConnectionLoss.
    proxy.blackhole();
    let pending = {
        let zk = zk.clone();
        tokio::spawn(async move { zk.get_data("/watched").await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.cut();
    let res = within("the pending call", pending).await.unwrap();
    assert_eq!(res, Err(Error::ConnectionLoss));
    assert_eq!(
        within("Disconnected", events.recv()).await,
        Some(SessionState::Disconnected)
    );
    let ev = within("Disconnected on the persistent watch", recursive.recv())
        .await
        .unwrap();
    assert_eq!(ev.state, KeeperState::Disconnected);

    // Changes while the client is away.
    other.set_data("/watched", b"1", None).await.unwrap();
    other
        .create("/later", b"", &open, CreateMode::Persistent)
        .await
        .unwrap();

    proxy.restore();
    assert_eq!(
        within(
            "Connected again",
            events.wait_for(|s| s != SessionState::Connecting)
        )
        .await,
        Some(SessionState::Connected)
    );
    assert_eq!(zk.session_id(), session, "same session");
    assert!(
        other.exists("/eph").await.unwrap().is_some(),
        "ephemeral kept"
    );

    // setWatches relative to the last zxid seen: nothing was missed.
    let ev = within("the data change made while disconnected", data_watch).await;
    assert_eq!(
        (ev.event_type, ev.path.as_deref()),
        (EventType::NodeDataChanged, Some("/watched"))
    );
    let ev = within("the creation made while disconnected", created_watch).await;
    assert_eq!(ev.event_type, EventType::NodeCreated);
    let ev = within("the child change made while disconnected", child_watch).await;
    assert_eq!(ev.event_type, EventType::NodeChildrenChanged);
    // The persistent watch is back: it sees changes after the reconnect.
    other.set_data("/later", b"x", None).await.unwrap();
    let ev = within("a recursive event after reconnect", async {
        loop {
            let ev = recursive.next_node_event().await.unwrap();
            if ev.event_type == EventType::NodeDataChanged && ev.path.as_deref() == Some("/later") {
                return ev;
            }
        }
    })
    .await;
    assert_eq!(ev.state, KeeperState::SyncConnected);
    zk.close().await.unwrap();
    other.close().await.unwrap();
}

async fn expiry_is_reported_only_once_the_client_reaches_the_ensemble_again(flavor: Flavor) {
    // ZooKeeper Programmer's Guide, "Session Expiration": the cluster expires
    // the session; the client, still disconnected, sees nothing until it
    // reconnects, "at which point the watcher of the expired session will
    // receive the session expired notification".
    let (srv, cs) = fresh_root(flavor, "expiry").await;
    let addr = srv.addr;
    let proxy = Proxy::start(addr).unwrap();
    let short = ClientOptions::default()
        .session_timeout(Duration::from_millis(1500))
        .reconnect_delay(Duration::from_millis(50), Duration::from_millis(300));
    let (zk, mut events) = connect(&via(&proxy, &cs), short).await;
    let (other, _e) = connect(&cs, opts()).await;
    zk.create("/eph", b"", &Acl::open_unsafe(), CreateMode::Ephemeral)
        .await
        .unwrap();
    let (_, _, watch) = zk.get_data_w("/eph").await.unwrap();
    let (_, gone) = other.exists_w("/eph").await.unwrap();

    proxy.cut();
    assert_eq!(
        within(
            "Disconnected",
            events.wait_for(|s| s == SessionState::Disconnected)
        )
        .await,
        Some(SessionState::Disconnected)
    );
    // The ensemble expires the session and deletes its ephemeral node.
    let ev = within("the ensemble to expire the session", gone).await;
    assert_eq!(ev.event_type, EventType::NodeDeleted, "{}", srv.log());
    // Still disconnected: the client cannot know yet.
    assert!(zk.state().is_alive(), "{:?}", zk.state());

    proxy.restore();
    assert_eq!(
        within("Expired", events.wait_for(|s| !s.is_alive())).await,
        Some(SessionState::Expired)
    );
    assert_eq!(within("the end of the events", events.recv()).await, None);
    assert_eq!(zk.state(), SessionState::Expired);
    // The expired handle is dead.
    assert_eq!(zk.get_data("/").await, Err(Error::SessionExpired));
    assert_eq!(
        zk.create("/x", b"", &Acl::open_unsafe(), CreateMode::Persistent)
            .await,
        Err(Error::SessionExpired)
    );
    let ev = within("the watch to learn of the expiry", watch).await;
    assert_eq!(ev.state, KeeperState::Expired);
    other.close().await.unwrap();
}

async fn idle_session_is_kept_alive_by_pings(flavor: Flavor) {
    // ZooKeeper Programmer's Guide, "Client Heartbeat": an idle session is kept
    // alive by PINGs.
    let (_srv, cs) = fresh_root(flavor, "ping").await;
    let short = ClientOptions::default().session_timeout(Duration::from_millis(2000));
    let (zk, mut events) = connect(&cs, short).await;
    let (other, _e) = connect(&cs, opts()).await;
    zk.create("/eph", b"", &Acl::open_unsafe(), CreateMode::Ephemeral)
        .await
        .unwrap();
    // Several session timeouts without a request.
    tokio::time::sleep(zk.session_timeout() * 3).await;
    assert!(other.exists("/eph").await.unwrap().is_some());
    assert_eq!(zk.state(), SessionState::Connected);
    assert_eq!(events.try_recv(), Some(SessionState::Connecting));
    assert_eq!(events.try_recv(), Some(SessionState::Connected));
    assert_eq!(events.try_recv(), None, "never disconnected");
    zk.close().await.unwrap();
    other.close().await.unwrap();
}

async fn silent_partition_is_detected_by_the_read_timeout(flavor: Flavor) {
    // ZooKeeper Programmer's Guide, "Client Heartbeat": the PING also lets the
    // client verify that its connection is alive, "conservative enough to
    // ensure reasonable time to detect a dead connection and reconnect to a new
    // server".
    let (srv, cs) = fresh_root(flavor, "partition").await;
    let addr = srv.addr;
    let proxy = Proxy::start(addr).unwrap();
    let options = ClientOptions::default()
        .session_timeout(Duration::from_secs(9))
        .reconnect_delay(Duration::from_millis(20), Duration::from_millis(100));
    let (zk, mut events) = connect(&via(&proxy, &cs), options).await;
    let session = zk.session_id();
    proxy.blackhole();
    assert_eq!(
        within(
            "the client to notice the dead connection",
            events.wait_for(|s| s == SessionState::Disconnected)
        )
        .await,
        Some(SessionState::Disconnected)
    );
    proxy.restore();
    let s = within(
        "the client to come back",
        events.wait_for(|s| s.is_connected() || !s.is_alive()),
    )
    .await;
    assert_eq!(s, Some(SessionState::Connected));
    assert_eq!(zk.session_id(), session);
    zk.close().await.unwrap();
}

async fn credentials_are_sent_again_on_reconnect(flavor: Flavor) {
    let (srv, cs) = fresh_root(flavor, "reauth").await;
    let addr = srv.addr;
    let proxy = Proxy::start(addr).unwrap();
    let (zk, mut events) = connect(&via(&proxy, &cs), opts()).await;
    zk.add_auth("digest", b"bob:pw").await.unwrap();
    zk.create("/mine", b"m", &Acl::creator_all(), CreateMode::Persistent)
        .await
        .unwrap();
    proxy.cut();
    within(
        "Disconnected",
        events.wait_for(|s| s == SessionState::Disconnected),
    )
    .await;
    proxy.restore();
    within("Connected", events.wait_for(|s| s.is_connected())).await;
    assert_eq!(zk.get_data("/mine").await.unwrap().0, b"m");
    zk.close().await.unwrap();
}

async fn session_can_be_resumed_with_its_id_and_password(flavor: Flavor) {
    // ZooKeeper Programmer's Guide, "Server creates password and send it to
    // client": the client sends the session id and password to re-establish the
    // session. The first client is cut off first: two live clients sharing a
    // session would take it from each other (ZooKeeper Programmer's Guide,
    // "SessionMovedException").
    let (srv, cs) = fresh_root(flavor, "resume").await;
    let addr = srv.addr;
    let proxy = Proxy::start(addr).unwrap();
    let (first, mut e1) = connect(&via(&proxy, &cs), opts()).await;
    first
        .create("/eph", b"", &Acl::open_unsafe(), CreateMode::Ephemeral)
        .await
        .unwrap();
    let (id, pw) = (first.session_id(), first.session_password());
    proxy.cut();
    within(
        "Disconnected",
        e1.wait_for(|s| s == SessionState::Disconnected),
    )
    .await;

    let (second, _e2) = connect(&cs, opts().session(id, pw.clone())).await;
    assert_eq!(second.session_id(), id);
    assert_eq!(second.get_ephemerals("/").await.unwrap(), vec!["/eph"]);
    // A wrong password does not get the session.
    let mut bad = pw;
    bad[0] ^= 0xff;
    let (third, mut e3) = Client::start(&cs, opts().session(id, bad)).unwrap();
    assert_eq!(
        within(
            "the refusal",
            e3.wait_for(|s| !s.is_alive() || s.is_connected())
        )
        .await,
        Some(SessionState::Expired)
    );
    assert_eq!(third.exists("/").await, Err(Error::SessionExpired));
    second.close().await.unwrap();
    first.close().await.unwrap();
}

async fn update_server_list_moves_the_client_when_its_server_leaves(flavor: Flavor) {
    // ZooKeeper Programmer's Guide, "Updating the List of Servers": "In case
    // the current host to which the client is connected is not in the new list
    // this call will always cause the connection to be dropped."
    let (srv, cs) = fresh_root(flavor, "rebalance").await;
    let addr = srv.addr;
    let p1 = Proxy::start(addr).unwrap();
    let p2 = Proxy::start(addr).unwrap();
    let (zk, mut events) = connect(&via(&p1, &cs), opts()).await;
    let session = zk.session_id();
    // The same list: nobody moves.
    assert!(!zk.update_server_list(&p1.connect_string()).await.unwrap());
    assert!(zk.update_server_list(&p2.connect_string()).await.unwrap());
    within("Connected", async {
        events.wait_for(|s| s == SessionState::Disconnected).await;
        events.wait_for(|s| s.is_connected()).await
    })
    .await;
    assert_eq!(zk.session_id(), session);
    assert_eq!(
        zk.connected_server().unwrap().to_string(),
        p2.connect_string()
    );
    assert_eq!(p2.accepted_connections(), 1);
    zk.exists("/").await.unwrap();
    zk.close().await.unwrap();
}

async fn pipelined_requests_complete_in_order(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "pipeline").await;
    let (zk, _e) = connect(&cs, opts()).await;
    zk.create("/n", b"", &Acl::open_unsafe(), CreateMode::Persistent)
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..2000u32 {
        let zk = zk.clone();
        tasks.push(tokio::spawn(async move {
            if i % 10 == 0 {
                zk.set_data("/n", &i.to_be_bytes(), None)
                    .await
                    .map(|s| s.version)
            } else {
                zk.get_data("/n").await.map(|(_, s)| s.version)
            }
        }));
    }
    for t in tasks {
        within("a pipelined call", t).await.unwrap().unwrap();
    }
    assert_eq!(zk.get_data("/n").await.unwrap().1.version, 200);
    zk.close().await.unwrap();
}
