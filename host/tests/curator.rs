//! Apache Curator (Debian's `libcurator-framework-java` and
//! `libcurator-recipes-java`, 5.4) on a standalone server and a 3-member
//! ensemble of Apache ZooKeeper 3.8 and wazoo: the framework's basic
//! operations (ZooKeeper Programmer's Guide, "ZNodes" and "Multi"),
//! InterProcessMutex ("ZooKeeper Recipes and Solutions", "Locks"),
//! LeaderLatch ("Leader Election"), PathChildrenCache ("ZooKeeper
//! Watches") and CuratorCache ("Persistent, Recursive Watches"). The
//! program is tests/java/CuratorPins.java; every target must print
//! ZooKeeper 3.8's lines (`common::CURATOR_PINS`).

mod common;

use common::Target;

async fn curator_recipes_and_caches_behave_as_on_zookeeper(target: Target) {
    let hosts = common::shared(target);
    let lines = tokio::task::spawn_blocking(move || {
        let classes = tempfile::tempdir().unwrap();
        common::run_java(
            classes.path(),
            "CuratorPins",
            common::CURATOR_CLASSPATH,
            &[&hosts, "/curator-pins"],
        )
    })
    .await
    .unwrap();
    common::assert_lines(target, &lines, common::CURATOR_PINS);
}

on_all! {
    curator_recipes_and_caches_behave_as_on_zookeeper,
}
