//! Client-level behavior through the `zookeeper-client` crate, unchanged,
//! against Apache ZooKeeper 3.8 (the oracle) and against wazoo: every
//! scenario runs on both, so every assertion is ZooKeeper's behavior.

mod common;

use std::time::Duration;

use common::Target;
use common::{connect, shared, within};
use zookeeper_client::{Acl, Acls, AddWatchMode, AuthId, CreateMode, Error, EventType, Permission};

on_all!(
    create_get_set_delete_with_versions,
    sequential_nodes_are_numbered_per_parent,
    ephemeral_nodes_go_with_their_session,
    data_watch_fires_once_on_change,
    exists_watch_fires_on_create_and_child_watch_on_new_child,
    persistent_recursive_watch_sees_descendants,
    multi_is_all_or_nothing,
    digest_acl_denies_others_until_they_authenticate,
    container_is_reaped_after_its_last_child_goes,
    ttl_node_is_created_and_is_not_ephemeral,
    ephemerals_and_descendant_counts,
    errors_match_zookeeper,
    four_letter_words_answer,
    quota_stats_follow_the_subtree,
);

fn root(flavor: Target, name: &str) -> String {
    format!("/{name}-{flavor}")
}

// ZooKeeper Programmer's Guide, "Data Model", "ZNodes" and "ZooKeeper Stat Structure".
async fn create_get_set_delete_with_versions(flavor: Target) {
    let zk = connect(&shared(flavor)).await;
    let p = root(flavor, "crud");
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let (stat, _) = zk.create(&p, b"v0", &opts).await.unwrap();
    assert_eq!(stat.version, 0);
    assert_eq!(stat.data_length, 2);
    let (data, stat) = zk.get_data(&p).await.unwrap();
    assert_eq!(data, b"v0");
    assert_eq!(stat.czxid, stat.mzxid);
    assert_eq!(
        zk.set_data(&p, b"v1", Some(5)).await,
        Err(Error::BadVersion)
    );
    let stat = zk.set_data(&p, b"v1", Some(0)).await.unwrap();
    assert_eq!(stat.version, 1);
    assert!(stat.mzxid > stat.czxid);
    assert_eq!(zk.delete(&p, Some(0)).await, Err(Error::BadVersion));
    zk.delete(&p, Some(1)).await.unwrap();
    assert_eq!(zk.check_stat(&p).await.unwrap(), None);
}

// ZooKeeper Programmer's Guide, "Data Model", "Sequence Nodes -- Unique Naming".
async fn sequential_nodes_are_numbered_per_parent(flavor: Target) {
    let zk = connect(&shared(flavor)).await;
    let p = root(flavor, "seq");
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    zk.create(&p, b"", &opts).await.unwrap();
    let seq = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    let (_, a) = zk.create(&format!("{p}/n-"), b"", &seq).await.unwrap();
    let (_, b) = zk.create(&format!("{p}/n-"), b"", &seq).await.unwrap();
    assert_eq!(a.into_i64(), 0);
    assert_eq!(b.into_i64(), 1);
    let mut kids = zk.list_children(&p).await.unwrap();
    kids.sort();
    assert_eq!(kids, vec!["n-0000000000", "n-0000000001"]);
}

// ZooKeeper Programmer's Guide, "Data Model", "Ephemeral Nodes".
async fn ephemeral_nodes_go_with_their_session(flavor: Target) {
    let hosts = shared(flavor);
    let watcher = connect(&hosts).await;
    let p = root(flavor, "eph");
    {
        let owner = connect(&hosts).await;
        let opts = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
        owner.create(&p, b"", &opts).await.unwrap();
        // On an ensemble the watcher may sit on another member, whose reads
        // can be stale for a short window (ZooKeeper Internals, "Atomic Broadcast"): sync first.
        watcher.sync(&p).await.unwrap();
        let (stat, w) = watcher.check_and_watch_stat(&p).await.unwrap();
        assert_eq!(stat.unwrap().ephemeral_owner, owner.session_id().0);
        assert_eq!(
            owner
                .create(
                    &format!("{p}/child"),
                    b"",
                    &CreateMode::Persistent.with_acls(Acls::anyone_all())
                )
                .await,
            Err(Error::NoChildrenForEphemerals)
        );
        drop(owner); // closes the session
        let ev = within("the ephemeral's delete event", w.changed()).await;
        assert_eq!(ev.event_type, EventType::NodeDeleted);
    }
    assert_eq!(watcher.check_stat(&p).await.unwrap(), None);
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions", "ZooKeeper Watches": one-time triggers.
async fn data_watch_fires_once_on_change(flavor: Target) {
    let zk = connect(&shared(flavor)).await;
    let p = root(flavor, "dw");
    zk.create(
        &p,
        b"",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let (_, _, w) = zk.get_and_watch_data(&p).await.unwrap();
    zk.set_data(&p, b"1", None).await.unwrap();
    let ev = within("data change event", w.changed()).await;
    assert_eq!(ev.event_type, EventType::NodeDataChanged);
    assert_eq!(ev.path, p);
    // The client sees the event before it can read the new data.
    let (data, _) = zk.get_data(&p).await.unwrap();
    assert_eq!(data, b"1");
}

async fn exists_watch_fires_on_create_and_child_watch_on_new_child(flavor: Target) {
    let zk = connect(&shared(flavor)).await;
    let p = root(flavor, "ew");
    let (stat, w) = zk.check_and_watch_stat(&p).await.unwrap();
    assert!(stat.is_none());
    zk.create(
        &p,
        b"",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    assert_eq!(
        within("create event", w.changed()).await.event_type,
        EventType::NodeCreated
    );
    let (_, cw) = zk.list_and_watch_children(&p).await.unwrap();
    zk.create(
        &format!("{p}/c"),
        b"",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let ev = within("children event", cw.changed()).await;
    assert_eq!(ev.event_type, EventType::NodeChildrenChanged);
    assert_eq!(ev.path, p);
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions", "Persistent, Recursive Watches".
async fn persistent_recursive_watch_sees_descendants(flavor: Target) {
    let zk = connect(&shared(flavor)).await;
    let p = root(flavor, "prw");
    let mut w = zk
        .watch(&p, AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    zk.create(&p, b"", &opts).await.unwrap();
    zk.create(&format!("{p}/a"), b"", &opts).await.unwrap();
    zk.set_data(&format!("{p}/a"), b"x", None).await.unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        let ev = within("recursive watch event", w.changed()).await;
        got.push((ev.event_type, ev.path));
    }
    assert_eq!(
        got,
        vec![
            (EventType::NodeCreated, p.clone()),
            (EventType::NodeCreated, format!("{p}/a")),
            (EventType::NodeDataChanged, format!("{p}/a")),
        ],
        "no NodeChildrenChanged for recursive watches"
    );
}

// Programmer's Guide, "Multi": all ops or none, under one zxid.
async fn multi_is_all_or_nothing(flavor: Target) {
    let zk = connect(&shared(flavor)).await;
    let p = root(flavor, "multi");
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let mut w = zk.new_multi_writer();
    w.add_create(&p, b"", &opts).unwrap();
    w.add_create(&format!("{p}/a"), b"", &opts).unwrap();
    w.add_delete(&format!("{p}/missing"), None).unwrap();
    let err = w.commit().await.unwrap_err();
    assert!(format!("{err:?}").contains("NoNode"), "{err:?}");
    assert_eq!(zk.check_stat(&p).await.unwrap(), None, "nothing applied");
    let mut w = zk.new_multi_writer();
    w.add_create(&p, b"", &opts).unwrap();
    w.add_create(&format!("{p}/a"), b"", &opts).unwrap();
    w.add_set_data(&p, b"d", Some(0)).unwrap();
    let results = w.commit().await.unwrap();
    assert_eq!(results.len(), 3);
    let (_, a) = zk.get_data(&format!("{p}/a")).await.unwrap();
    let (_, root_stat) = zk.get_data(&p).await.unwrap();
    assert_eq!(a.czxid, root_stat.czxid, "one zxid for the whole multi");
}

// ZooKeeper Programmer's Guide, "Data Model", "ZooKeeper access control using ACLs".
async fn digest_acl_denies_others_until_they_authenticate(flavor: Target) {
    let hosts = shared(flavor);
    let owner = connect(&hosts).await;
    owner.auth("digest", b"alice:secret").await.unwrap();
    let p = root(flavor, "acl");
    let creator = [Acl::new(Permission::ALL, AuthId::authed())];
    owner
        .create(
            &p,
            b"s",
            &CreateMode::Persistent.with_acls(Acls::new(&creator)),
        )
        .await
        .unwrap();
    let (acl, _) = owner.get_acl(&p).await.unwrap();
    assert_eq!(acl.len(), 1);
    assert_eq!(acl[0].scheme(), "digest");
    assert!(acl[0].id().starts_with("alice:"));
    let other = connect(&hosts).await;
    assert_eq!(other.get_data(&p).await, Err(Error::NoAuth));
    assert_eq!(other.set_data(&p, b"x", None).await, Err(Error::NoAuth));
    other.auth("digest", b"alice:secret").await.unwrap();
    assert_eq!(other.get_data(&p).await.unwrap().0, b"s");
    let superuser = connect(&hosts).await;
    superuser.auth("digest", b"super:test").await.unwrap();
    superuser.set_data(&p, b"by super", None).await.unwrap();
    let users = superuser.list_auth_users().await.unwrap();
    assert!(
        users
            .iter()
            .any(|u| u.scheme() == "digest" && u.user() == "super"),
        "{users:?}"
    );
}

// ZooKeeper Programmer's Guide, "Data Model", "Container Nodes".
async fn container_is_reaped_after_its_last_child_goes(flavor: Target) {
    let zk = connect(&shared(flavor)).await;
    let p = root(flavor, "cont");
    zk.create(
        &p,
        b"",
        &CreateMode::Container.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let (_, stat) = zk.get_data(&p).await.unwrap();
    // ZooKeeper 3.8 shows clients 0, not its internal container marker.
    assert_eq!(stat.ephemeral_owner, 0);
    zk.create(
        &format!("{p}/c"),
        b"",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let (_, w) = zk.check_and_watch_stat(&p).await.unwrap();
    zk.delete(&format!("{p}/c"), None).await.unwrap();
    let ev = within("the container to be reaped", w.changed()).await;
    assert_eq!(ev.event_type, EventType::NodeDeleted);
}

// ZooKeeper Programmer's Guide, "Data Model", "TTL Nodes".
async fn ttl_node_is_created_and_is_not_ephemeral(flavor: Target) {
    let zk = connect(&shared(flavor)).await;
    let p = root(flavor, "ttl");
    let opts = CreateMode::Persistent
        .with_acls(Acls::anyone_all())
        .with_ttl(Duration::from_millis(60_000));
    zk.create(&p, b"", &opts).await.unwrap();
    let (_, stat) = zk.get_data(&p).await.unwrap();
    // ZooKeeper 3.8 shows clients 0, not its internal TTL marker.
    assert_eq!(stat.ephemeral_owner, 0);
    assert_eq!(zk.list_ephemerals(&p).await.unwrap(), Vec::<String>::new());
}

async fn ephemerals_and_descendant_counts(flavor: Target) {
    let zk = connect(&shared(flavor)).await;
    let p = root(flavor, "count");
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    zk.create(&p, b"", &opts).await.unwrap();
    zk.create(&format!("{p}/a"), b"", &opts).await.unwrap();
    zk.create(&format!("{p}/a/b"), b"", &opts).await.unwrap();
    zk.create(
        &format!("{p}/e"),
        b"",
        &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    assert_eq!(zk.count_descendants_number(&p).await.unwrap(), 3);
    assert_eq!(
        zk.list_ephemerals(&p).await.unwrap(),
        vec![format!("{p}/e")]
    );
}

async fn errors_match_zookeeper(flavor: Target) {
    let zk = connect(&shared(flavor)).await;
    let p = root(flavor, "errs");
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    assert_eq!(
        zk.create(&format!("{p}/x/y"), b"", &opts).await,
        Err(Error::NoNode)
    );
    zk.create(&p, b"", &opts).await.unwrap();
    assert_eq!(zk.create(&p, b"", &opts).await, Err(Error::NodeExists));
    zk.create(&format!("{p}/c"), b"", &opts).await.unwrap();
    assert_eq!(zk.delete(&p, None).await, Err(Error::NotEmpty));
    assert_eq!(zk.get_data(&format!("{p}/nope")).await, Err(Error::NoNode));
    let e = zk.delete("/zookeeper", None).await;
    assert!(matches!(e, Err(Error::BadArguments(_))), "{e:?}");
    let empty: [Acl; 0] = [];
    assert_eq!(
        zk.create(
            &format!("{p}/noacl"),
            b"",
            &CreateMode::Persistent.with_acls(Acls::new(&empty))
        )
        .await,
        Err(Error::InvalidAcl)
    );
}

async fn four_letter_words_answer(flavor: Target) {
    let hosts = shared(flavor);
    let first = hosts.split(',').next().unwrap();
    let addr: std::net::SocketAddr = first.parse().unwrap();
    assert_eq!(
        wazoo_testkit::four_letter_word(addr, "ruok").unwrap(),
        "imok"
    );
    let srvr = wazoo_testkit::four_letter_word(addr, "srvr").unwrap();
    let mntr = wazoo_testkit::four_letter_word(addr, "mntr").unwrap();
    let mode = if flavor.ensemble {
        if srvr.contains("Mode: leader") {
            "leader"
        } else {
            "follower"
        }
    } else {
        "standalone"
    };
    assert!(srvr.contains(&format!("Mode: {mode}")), "{srvr}");
    assert!(mntr.contains(&format!("zk_server_state\t{mode}")), "{mntr}");
    assert!(srvr.contains("Zxid: 0x"), "{srvr}");
    assert!(mntr.contains("zk_znode_count\t"), "{mntr}");
    assert_eq!(wazoo_testkit::four_letter_word(addr, "isro").unwrap(), "rw");
}

// ZooKeeper Programmer's Guide, "Data Model" / Administrator's Guide, "Quotas": once a limits node exists
// under /zookeeper/quota, the server keeps the stats node beside it in
// step with the subtree (what zkCli's setquota / listquota rely on).
async fn quota_stats_follow_the_subtree(flavor: Target) {
    let zk = connect(&shared(flavor)).await;
    let p = root(flavor, "quota");
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    zk.create(&p, b"12345", &opts).await.unwrap();
    let q = format!("/zookeeper/quota{p}");
    zk.create(&q, b"", &opts).await.unwrap();
    zk.create(
        &format!("{q}/zookeeper_limits"),
        b"count=10,bytes=-1",
        &opts,
    )
    .await
    .unwrap();
    zk.create(&format!("{q}/zookeeper_stats"), b"count=1,bytes=5", &opts)
        .await
        .unwrap();
    zk.create(&format!("{p}/a"), b"xyz", &opts).await.unwrap();
    zk.set_data(&p, b"1", None).await.unwrap();
    let (stats, _) = zk.get_data(&format!("{q}/zookeeper_stats")).await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&stats),
        "count=2,bytes=4",
        "{flavor}"
    );
    zk.delete(&format!("{p}/a"), None).await.unwrap();
    let (stats, _) = zk.get_data(&format!("{q}/zookeeper_stats")).await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&stats),
        "count=1,bytes=1",
        "{flavor}"
    );
}
