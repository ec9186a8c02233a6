//! Security that operators rely on: a zoo.cfg (or a flag) asking for
//! security wazoo does not implement stops the start and names what it
//! refused, without echoing secrets; and ACLs filter every watch event,
//! on Apache ZooKeeper 3.8 (the oracle) and wazoo alike.

mod common;

use std::process::Command;
use std::time::Duration;

use common::Target;
use common::{connect, shared, within};
use zookeeper_client::{Acls, AddWatchMode, CreateMode, EventType};

// ----- fail closed -------------------------------------------------------

/// Runs `wazoo serve` with `args` on a zoo.cfg of `extra` lines; returns
/// whether it refused (exited by itself, non-zero, with an error line) and
/// its stdout + stderr. A server that starts instead is killed after 20 seconds and
/// counts as not refusing.
fn serve_with(extra: &str, args: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let port = wazoo_testkit::free_port();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n{extra}",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wazoo"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut killed = false;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            killed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let refused = !killed && !out.status.success() && text.contains("wazoo: ");
    (refused, text)
}

// ZooKeeper Administrator's Guide, "Encryption, Authentication,
// Authorization Options": a secured zoo.cfg never yields an open server.
// Its TLS and SASL keys are implemented (tests/tls.rs, tests/sasl.rs): a
// key store that cannot be read stops the start, naming the file.
#[test]
fn a_secured_zoo_cfg_whose_key_store_is_missing_stops_the_start_without_showing_passwords() {
    let secured = "secureClientPort=2281\n\
                   serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
                   ssl.keyStore.location=/etc/zk/keystore.p12\n\
                   ssl.keyStore.password=Hunter2-keystore\n\
                   ssl.trustStore.location=/etc/zk/truststore.p12\n\
                   ssl.trustStore.password=Hunter2-truststore\n\
                   authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
                   sessionRequireClientSASLAuth=true\n\
                   enforce.auth.enabled=true\n\
                   enforce.auth.schemes=sasl\n";
    let (refused, out) = serve_with(secured, &[]);
    assert!(refused, "refused to start: {out}");
    assert!(
        out.contains("/etc/zk/keystore.p12"),
        "the file is named: {out}"
    );
    assert!(!out.contains("Hunter2"), "no password in the output: {out}");
    assert!(!out.contains("panicked"), "{out}");
}

// ZooKeeper Administrator's Guide, "Encryption, Authentication,
// Authorization Options": a JAAS `Server` section wazoo cannot honour
// (Kerberos) stops the start by name, never a server without the
// authentication the operator configured.
#[test]
fn a_jaas_file_with_a_kerberos_login_module_is_refused_by_name_without_its_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let jaas = dir.path().join("jaas.conf");
    std::fs::write(
        &jaas,
        "Server {\n  com.sun.security.auth.module.Krb5LoginModule required\n  useKeyTab=true\n  keyTab=\"/etc/zk/Hunter2.keytab\"\n  principal=\"zookeeper/h@R\";\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  user_alice=\"Hunter2-jaas\";\n};\n",
    )
    .unwrap();
    let (refused, out) = serve_with("", &["--jaas", jaas.to_str().unwrap()]);
    assert!(refused, "refused to start: {out}");
    assert!(out.contains("Krb5LoginModule"), "{out}");
    assert!(
        !out.contains("Hunter2-jaas"),
        "no JAAS secret in the output: {out}"
    );
    assert!(!out.contains("panicked"), "{out}");
}

// ----- ACLs filter watch events ------------------------------------------

on_all!(
    recursive_watch_events_skip_nodes_the_watcher_cannot_read,
    persistent_watch_gets_child_events_by_the_parent_acl,
    standard_watches_are_filtered_by_the_acl_when_the_event_fires,
);

fn root(t: Target, name: &str) -> String {
    format!("/{name}-{t}")
}

/// `auth` ACL: full rights for the creator's digest identity only.
fn alice_only() -> Acls<'static> {
    Acls::creator_all()
}

/// A client authenticated as `digest` user `cred` (`user:password`).
async fn authed(hosts: &str, cred: &str) -> zookeeper_client::Client {
    let zk = connect(hosts).await;
    zk.auth("digest", cred.as_bytes()).await.unwrap();
    zk
}

async fn next_event(w: &mut zookeeper_client::PersistentWatcher) -> (EventType, String) {
    let ev = within("a watch event", w.changed()).await;
    (ev.event_type, ev.path)
}

// ZooKeeper Programmer's Guide, "Persistent, Recursive Watches" and "ACL
// Permissions" (READ: getData, getChildren, and being told of changes):
// the reproduction of CVE-2024-23944. An unauthenticated watcher on a
// readable parent learns nothing about a child it cannot read, not even
// its name; its owner and the super user see every event.
async fn recursive_watch_events_skip_nodes_the_watcher_cannot_read(t: Target) {
    let hosts = shared(t);
    let r = root(t, "wacl-rec");
    let alice = authed(&hosts, "alice:pw").await;
    let superuser = authed(&hosts, "super:test").await;
    let mallory = connect(&hosts).await;
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    alice.create(&r, b"", &open).await.unwrap();
    // Clients may be on other members of an ensemble: they catch up
    // before they watch, or a watch could see the root's own create.
    mallory.sync(&r).await.unwrap();
    superuser.sync(&r).await.unwrap();
    let mut m = mallory
        .watch(&r, AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let mut a = alice
        .watch(&r, AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let mut s = superuser
        .watch(&r, AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let secret = format!("{r}/secret-name");
    let public = format!("{r}/public");
    let prot = CreateMode::Persistent.with_acls(alice_only());
    alice.create(&secret, b"", &prot).await.unwrap();
    alice.set_data(&secret, b"x", None).await.unwrap();
    alice.create(&public, b"", &open).await.unwrap();
    alice.delete(&secret, None).await.unwrap();
    alice.set_data(&public, b"y", None).await.unwrap();
    let everything = vec![
        (EventType::NodeCreated, secret.clone()),
        (EventType::NodeDataChanged, secret.clone()),
        (EventType::NodeCreated, public.clone()),
        (EventType::NodeDeleted, secret.clone()),
        (EventType::NodeDataChanged, public.clone()),
    ];
    for (who, w) in [("alice", &mut a), ("super", &mut s)] {
        let mut got = Vec::new();
        for _ in 0..everything.len() {
            got.push(next_event(w).await);
        }
        assert_eq!(got, everything, "{who} may read every node: {t}");
    }
    // mallory's first events are the public node's: the secret node's
    // create, change and delete were never sent (they came before).
    let got = vec![next_event(&mut m).await, next_event(&mut m).await];
    assert_eq!(
        got,
        vec![
            (EventType::NodeCreated, public.clone()),
            (EventType::NodeDataChanged, public.clone()),
        ],
        "{t}"
    );
}

// A persistent (not recursive) watch on a readable parent: children
// changed is checked against the parent's ACL, so it is delivered even
// for a child the watcher cannot read; events on a protected node itself
// are not.
async fn persistent_watch_gets_child_events_by_the_parent_acl(t: Target) {
    let hosts = shared(t);
    let r = root(t, "wacl-pers");
    let alice = authed(&hosts, "alice:pw").await;
    let mallory = connect(&hosts).await;
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let prot = CreateMode::Persistent.with_acls(alice_only());
    alice.create(&r, b"", &open).await.unwrap();
    // Clients may be on other members of an ensemble: they catch up
    // before they watch, or a watch could see the root's own create.
    mallory.sync(&r).await.unwrap();
    let secret = format!("{r}/secret");
    let sentinel = format!("{r}/sentinel");
    let mut on_parent = mallory.watch(&r, AddWatchMode::Persistent).await.unwrap();
    let mut on_secret = mallory
        .watch(&secret, AddWatchMode::Persistent)
        .await
        .unwrap();
    let mut on_sentinel = mallory
        .watch(&sentinel, AddWatchMode::Persistent)
        .await
        .unwrap();
    alice.create(&secret, b"", &prot).await.unwrap();
    alice.set_data(&secret, b"x", None).await.unwrap();
    alice.delete(&secret, None).await.unwrap();
    alice.create(&sentinel, b"", &open).await.unwrap();
    assert_eq!(
        next_event(&mut on_parent).await,
        (EventType::NodeChildrenChanged, r.clone()),
        "{t}"
    );
    assert_eq!(
        next_event(&mut on_parent).await,
        (EventType::NodeChildrenChanged, r.clone()),
        "{t}"
    );
    assert_eq!(
        next_event(&mut on_sentinel).await,
        (EventType::NodeCreated, sentinel.clone()),
        "{t}"
    );
    // The server sends a session's events in order and the client hands
    // them out in order: the sentinel's came after anything about the
    // secret node, so nothing about it is pending.
    let stray = tokio::time::timeout(Duration::from_millis(300), on_secret.changed()).await;
    assert!(
        stray.is_err(),
        "no event about the protected node: {stray:?} ({t})"
    );
}

// Standard one-shot watches are filtered the same way, by the ACL the node
// has when the event fires (ZooKeeper checks at delivery, not when the
// watch was set).
async fn standard_watches_are_filtered_by_the_acl_when_the_event_fires(t: Target) {
    let hosts = shared(t);
    let r = root(t, "wacl-std");
    let alice = authed(&hosts, "alice:pw").await;
    let mallory = connect(&hosts).await;
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let prot = CreateMode::Persistent.with_acls(alice_only());
    alice.create(&r, b"", &open).await.unwrap();
    let hidden = format!("{r}/hidden");
    let was_public = format!("{r}/was-public");
    let sentinel = format!("{r}/sentinel");
    alice.create(&was_public, b"", &open).await.unwrap();
    // Clients may be on other members of an ensemble: they catch up
    // before they watch, or a watch could see the root's own create.
    mallory.sync(&r).await.unwrap();
    // An exists watch on a node that does not exist yet, and a data watch
    // on a node mallory can read now.
    let (stat, exists_w) = mallory.check_and_watch_stat(&hidden).await.unwrap();
    assert!(stat.is_none());
    let (_, _, data_w) = mallory.get_and_watch_data(&was_public).await.unwrap();
    let (_, sentinel_w) = mallory.check_and_watch_stat(&sentinel).await.unwrap();
    alice.create(&hidden, b"", &prot).await.unwrap();
    alice
        .set_acl(&was_public, &alice_only(), None)
        .await
        .unwrap();
    alice
        .set_data(&was_public, b"now private", None)
        .await
        .unwrap();
    // Open again and change again: a filtered one-shot watch was used up
    // (as in ZooKeeper), so this change does not reach it either.
    alice
        .set_acl(&was_public, &Acls::anyone_all(), None)
        .await
        .unwrap();
    alice
        .set_data(&was_public, b"public again", None)
        .await
        .unwrap();
    alice.create(&sentinel, b"", &open).await.unwrap();
    let ev = within("the sentinel's create", sentinel_w.changed()).await;
    assert_eq!((ev.event_type, ev.path), (EventType::NodeCreated, sentinel));
    // The server sends a session's events in order and the client hands
    // them out in order: anything about the other nodes came before.
    let stray = tokio::time::timeout(Duration::from_millis(300), exists_w.changed()).await;
    assert!(
        stray.is_err(),
        "no NodeCreated for {hidden}: {stray:?} ({t})"
    );
    let stray = tokio::time::timeout(Duration::from_millis(300), data_w.changed()).await;
    assert!(
        stray.is_err(),
        "no NodeDataChanged for {was_public}: {stray:?} ({t})"
    );
    let (data, _) = mallory.get_data(&was_public).await.unwrap();
    assert_eq!(data, b"public again");
}
