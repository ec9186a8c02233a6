//! `kill -9` at any moment loses no acknowledged write (issue 2, item 7),
//! and recovery (snapshot + log replay) brings back the same tree. Run
//! against Apache ZooKeeper too, which makes the same promise.

mod common;

use std::time::Duration;

use common::{connect, start};
use wazoo_testkit::{Flavor, TestServer};
use zookeeper_client::{Acls, CreateMode};

/// Writers create nodes as fast as they can; the server is killed while
/// they run; after a restart every acknowledged create must be there.
async fn acknowledged_writes_survive_kill_9(flavor: Flavor, rounds: usize) {
    let mut server: Box<dyn TestServer> = start(flavor);
    let hosts = server.connect_string();
    common::create_persistent(&hosts, "/dur").await;
    let mut acked: Vec<String> = Vec::new();
    for round in 0..rounds {
        // Each writer stops at its first failure (the kill).
        let writers =
            common::Writers::start(&hosts, "/dur", &format!("r{round}-"), 4, usize::MAX, true);
        // Let some writes land, then pull the plug mid-stream.
        tokio::time::sleep(Duration::from_millis(300 + 170 * round as u64)).await;
        server.kill();
        acked.extend(writers.finish().await);
        server.restart().unwrap();
        let zk = connect(&hosts).await;
        let acked_now = acked.clone();
        assert!(!acked_now.is_empty(), "some writes were acknowledged");
        let mut missing = Vec::new();
        for p in &acked_now {
            if zk.check_stat(p).await.unwrap().is_none() {
                missing.push(p.clone());
            }
        }
        assert!(
            missing.is_empty(),
            "{flavor}: {} of {} acknowledged creates lost after kill -9 in round {round}: {:?}",
            missing.len(),
            acked_now.len(),
            &missing[..missing.len().min(5)]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wazoo_loses_no_acknowledged_write_on_kill_9() {
    acknowledged_writes_survive_kill_9(Flavor::Wazoo, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_loses_no_acknowledged_write_on_kill_9() {
    acknowledged_writes_survive_kill_9(Flavor::Zookeeper, 1).await;
}

/// Sessions and their ephemerals are part of the durable state: a session
/// that re-attaches after a restart finds its ephemeral node.
async fn sessions_survive_a_restart(flavor: Flavor) {
    let mut server: Box<dyn TestServer> = start(flavor);
    let hosts = server.connect_string();
    let zk = zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(30))
        .connect(&hosts)
        .await
        .unwrap();
    zk.create(
        "/e",
        b"",
        &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let session = zk.session().clone();
    drop(zk);
    // The close above may or may not reach the server before the kill; use
    // a session that we keep open instead.
    // Detached: dropping this client must not close the session.
    let keeper = zookeeper_client::Client::connector()
        .with_detached()
        .with_session_timeout(Duration::from_secs(30))
        .connect(&hosts)
        .await
        .unwrap();
    keeper
        .create(
            "/kept",
            b"",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let kept_session = keeper.session().clone();
    let _ = session;
    server.kill();
    drop(keeper);
    server.restart().unwrap();
    let back = zookeeper_client::Client::connector()
        .with_session(kept_session)
        .with_session_timeout(Duration::from_secs(30))
        .connect(&hosts)
        .await
        .unwrap();
    assert!(
        back.check_stat("/kept").await.unwrap().is_some(),
        "{flavor}: ephemeral kept with its session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wazoo_sessions_survive_a_restart() {
    sessions_survive_a_restart(Flavor::Wazoo).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_sessions_survive_a_restart() {
    sessions_survive_a_restart(Flavor::Zookeeper).await;
}
