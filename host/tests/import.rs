//! `wazoo import`: a tree built on a real Apache ZooKeeper 3.8, with every
//! node kind, is served by wazoo after the import exactly as ZooKeeper
//! served it (data, ACL, every Stat field), sessions included; a torn log
//! tail is cut as ZooKeeper cuts it, and corrupt snapshots are refused by
//! name. (ZooKeeper Administrator's Guide, "The Data Directory" and "The
//! Log Directory"; ZooKeeper Programmer's Guide, "Data Model".)

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use wazoo_client::{Acl, Client, ClientOptions, CreateMode, Id, Op};
use wazoo_testkit::{Flavor, TestEnsemble, WazooEnsemble, WazooServer, ZkServer};

/// Data, ACL and Stat of one node.
use common::Seen;

fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
    Acl {
        perms,
        id: Id {
            scheme: scheme.into(),
            id: id.into(),
        },
    }
}

fn open() -> Vec<Acl> {
    vec![acl(31, "world", "anyone")]
}

async fn connect(hosts: &str, timeout: Duration, auth: Option<&str>) -> Client {
    let mut opts = ClientOptions::new().session_timeout(timeout);
    if let Some(a) = auth {
        opts = opts.auth("digest", a.as_bytes());
    }
    let (c, _events) = Client::connect(hosts, opts)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {hosts}: {e}"));
    c
}

/// Every node under `/` (breadth first) with its data, ACL and Stat, read
/// as the super user so that no ACL hides anything.
async fn walk(hosts: &str) -> BTreeMap<String, Seen> {
    let c = connect(hosts, Duration::from_secs(10), Some("super:test")).await;
    let mut out = BTreeMap::new();
    let mut queue = vec!["/".to_string()];
    while let Some(p) = queue.pop() {
        let (data, stat) = c.get_data(&p).await.unwrap_or_else(|e| panic!("{p}: {e}"));
        let (acl, _) = c.get_acl(&p).await.unwrap();
        for child in c.get_children(&p).await.unwrap() {
            queue.push(if p == "/" {
                format!("/{child}")
            } else {
                format!("{p}/{child}")
            });
        }
        out.insert(p, (data, acl, stat));
    }
    let _ = c.close().await;
    out
}

/// A tree with every node kind ZooKeeper has. Returns the client that owns
/// the ephemeral (kept open: its session is live when ZooKeeper stops).
async fn build_tree(hosts: &str) -> Client {
    let owner = connect(hosts, Duration::from_secs(40), Some("alice:secret")).await;
    let c = &owner;
    c.create("/app", b"hello", &open(), CreateMode::Persistent)
        .await
        .unwrap();
    for i in 0..3u8 {
        c.create("/app/seq-", &[i], &open(), CreateMode::PersistentSequential)
            .await
            .unwrap();
    }
    c.delete("/app/seq-0000000001", None).await.unwrap();
    c.create("/app/eph", b"mine", &open(), CreateMode::Ephemeral)
        .await
        .unwrap();
    c.create("/app/eseq-", b"", &open(), CreateMode::EphemeralSequential)
        .await
        .unwrap();
    c.create("/app/cont", b"box", &open(), CreateMode::Container)
        .await
        .unwrap();
    c.create("/app/cont/in", b"", &open(), CreateMode::Persistent)
        .await
        .unwrap();
    c.create_ttl(
        "/app/ttl",
        b"t",
        &open(),
        CreateMode::PersistentWithTtl,
        Duration::from_secs(3600),
    )
    .await
    .unwrap();
    let alice = wazoo_client::digest_id("alice", "secret");
    c.create(
        "/acl",
        b"",
        &[acl(31, "digest", &alice)],
        CreateMode::Persistent,
    )
    .await
    .unwrap();
    c.create(
        "/acl/world-read",
        b"r",
        &[acl(1, "world", "anyone"), acl(31, "digest", &alice)],
        CreateMode::Persistent,
    )
    .await
    .unwrap();
    c.create(
        "/acl/ip",
        b"ip",
        &[acl(31, "ip", "127.0.0.1"), acl(1, "world", "anyone")],
        CreateMode::Persistent,
    )
    .await
    .unwrap();
    c.set_acl(
        "/acl/world-read",
        &[acl(3, "world", "anyone"), acl(31, "digest", &alice)],
        Some(0),
    )
    .await
    .unwrap();
    c.create("/data", b"", &open(), CreateMode::Persistent)
        .await
        .unwrap();
    c.create(
        "/data/bin",
        &(0..=255u8).collect::<Vec<_>>(),
        &open(),
        CreateMode::Persistent,
    )
    .await
    .unwrap();
    c.create("/data/empty", b"", &open(), CreateMode::Persistent)
        .await
        .unwrap();
    // Null data (ZooKeeper Programmer's Guide, "ZooKeeper Data Model"),
    // which no wazoo_client call makes: in a snapshot.
    common::raw_writes(hosts, &[common::raw_create("/data/null", None)]);
    let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    c.create("/data/big", &big, &open(), CreateMode::Persistent)
        .await
        .unwrap();
    for v in 0..3u8 {
        c.set_data("/data/empty", &[v; 3], None).await.unwrap();
    }
    // A quota as zkCli's setquota writes it: the limit, then the stats.
    c.create("/zookeeper/quota/app", b"", &open(), CreateMode::Persistent)
        .await
        .unwrap();
    c.create(
        "/zookeeper/quota/app/zookeeper_limits",
        b"count=100,bytes=-1",
        &open(),
        CreateMode::Persistent,
    )
    .await
    .unwrap();
    c.create(
        "/zookeeper/quota/app/zookeeper_stats",
        b"count=0,bytes=0",
        &open(),
        CreateMode::Persistent,
    )
    .await
    .unwrap();
    c.multi(&[
        Op::create("/m1", b"1", &open(), CreateMode::Persistent),
        Op::create("/m2", b"2", &open(), CreateMode::Persistent),
        Op::set_data("/app", b"hello again", Some(0)),
    ])
    .await
    .unwrap();
    // Enough churn for several snapshots at snapCount=10, and txns logged
    // after the newest one.
    for i in 0..25 {
        c.create(&format!("/app/n{i}"), b"n", &open(), CreateMode::Persistent)
            .await
            .unwrap();
        if i % 3 == 0 {
            c.delete(&format!("/app/n{i}"), None).await.unwrap();
        }
    }
    // Null data in the log after the newest snapshot.
    common::raw_writes(
        hosts,
        &[
            common::raw_create("/data/null-late", None),
            wazoo_proto::Request::SetData {
                path: "/data/empty".into(),
                data: None,
                version: -1,
            },
        ],
    );
    owner
}

/// The nodes [`build_tree`] leaves with null data, which the walk (through
/// wazoo_client) would not tell from empty data.
const NULL_DATA: [&str; 3] = ["/data/null", "/data/null-late", "/data/empty"];

/// The `count=` of a quota's zookeeper_stats node.
fn quota_count(stats: &[u8]) -> i64 {
    String::from_utf8_lossy(stats)
        .split(',')
        .find_map(|kv| kv.strip_prefix("count=")?.parse().ok())
        .unwrap_or_else(|| panic!("no count in {}", String::from_utf8_lossy(stats)))
}

/// After a move of [`build_tree`]'s tree (`before`, as the old server
/// served it): sequence numbers go on from the old counter, the parent's
/// stored cversion, (cversion + numChildren) / 2 from its Stat, and the
/// quota on /app keeps counting.
async fn counters_go_on(c: &Client, before: &BTreeMap<String, Seen>) {
    let parent = &before["/app"].2;
    let next = (parent.cversion + parent.num_children) / 2;
    let created = c
        .create("/app/seq-", b"", &open(), CreateMode::PersistentSequential)
        .await
        .unwrap();
    assert_eq!(created, format!("/app/seq-{next:010}"));
    let stats = "/zookeeper/quota/app/zookeeper_stats";
    let (now, _) = c.get_data(stats).await.unwrap();
    assert_eq!(quota_count(&now), quota_count(&before[stats].0) + 1);
}

fn zookeeper() -> ZkServer {
    let opts = common::options(Flavor::Zookeeper)
        .arg("-Dzookeeper.snapCount=10")
        .session_timeouts_ms(4000, 60_000);
    ZkServer::start_with(opts).expect("cannot start Apache ZooKeeper")
}

/// A zoo.cfg for a wazoo member with its data in `data_dir`.
fn member_cfg(dir: &Path, data_dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort=2181\nextendedTypesEnabled=true\n",
            data_dir.display()
        ),
    )
    .unwrap();
    cfg
}

/// Runs `wazoo import`; returns (success, stdout, stderr).
fn import(zk_data: &Path, cfg: &Path) -> (bool, String, String) {
    let (zk_data, cfg) = (zk_data.to_str().unwrap(), cfg.to_str().unwrap());
    common::run_wazoo(&["import", "--zookeeper-data", zk_data, "--config", cfg])
}

/// A copy of ZooKeeper's data directory (its files stay untouched).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

fn start_wazoo(data_dir: &Path) -> WazooServer {
    let opts = common::options(Flavor::Wazoo)
        .cfg(format!("dataDir={}", data_dir.display()))
        .session_timeouts_ms(4000, 60_000);
    WazooServer::start(opts).expect("wazoo does not start on the imported data")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wazoo_serves_the_tree_zookeeper_served_after_import() {
    let mut zk = zookeeper();
    let owner = build_tree(&zk.connect_string()).await;
    let (session, password) = (owner.session_id(), owner.session_password());
    let before = walk(&zk.connect_string()).await;
    assert_eq!(common::raw_data(zk.addr(), &NULL_DATA), [None, None, None]);
    // Stop ZooKeeper with the owner's session still open: its ephemerals
    // and its session are in ZooKeeper's files.
    zk.kill();
    let work = tempfile::tempdir().unwrap();
    let zk_copy = work.path().join("zk");
    copy_dir(&zk.data_dir(), &zk_copy);
    let snapshots = std::fs::read_dir(zk_copy.join("version-2"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("snapshot.")
        })
        .count();
    assert!(snapshots >= 3, "ZooKeeper wrote {snapshots} snapshots");
    let data_dir = work.path().join("wazoo-data");
    let cfg = member_cfg(work.path(), &data_dir);
    let (ok, stdout, stderr) = import(&zk_copy, &cfg);
    assert!(ok, "import failed: {stderr}");
    let replayed: u64 = stdout
        .split(" plus ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no txn count in {stdout:?}"));
    assert!(replayed > 0, "no txn after the snapshot: {stdout}");
    assert!(!stdout.contains(" 0 digest(s) checked"), "{stdout}");

    let wazoo = start_wazoo(&data_dir);
    let after = walk(&wazoo.connect_string()).await;
    common::assert_same_tree("served", &after, &before);
    assert_eq!(after["/app/eph"].2.ephemeral_owner, session);
    assert_eq!(
        common::raw_data(wazoo.addr(), &NULL_DATA),
        [None, None, None]
    );
    assert!(before.contains_key("/data/big") && after["/data/big"].0.len() == 1_000_000);

    // The session the ephemerals belong to re-attaches to wazoo, with the
    // password ZooKeeper gave it.
    drop(owner);
    let (back, _events) = Client::connect(
        &wazoo.connect_string(),
        ClientOptions::new()
            .session_timeout(Duration::from_secs(40))
            .session(session, password),
    )
    .await
    .expect("the imported session re-attaches");
    assert_eq!(back.session_id(), session);
    assert!(back.exists("/app/eph").await.unwrap().is_some());
    counters_go_on(&back, &before).await;
    // An import refuses a member that already has data.
    let (ok, _, stderr) = import(&zk_copy, &cfg);
    assert!(!ok && stderr.contains("not empty"), "{stderr}");
    drop(back);
    drop(wazoo);

    // An ensemble, as docs/MIGRATION.md says to move one: every member
    // imports the same ZooKeeper data directory, then all start.
    let opts = common::ensemble_options(Flavor::Wazoo)
        .cfg("DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=");
    let mut ensemble = WazooEnsemble::start(3, opts).unwrap();
    for i in 0..3 {
        ensemble.kill(i);
        let dir = ensemble.data_dir(i).to_path_buf();
        let _ = std::fs::remove_dir_all(dir.join("wazoo-v1"));
        let cfg = member_cfg(&work.path().join(format!("m{i}")), &dir);
        let (ok, _, stderr) = import(&zk_copy, &cfg);
        assert!(ok, "import into member {}: {stderr}", i + 1);
    }
    ensemble.restart_all().unwrap();
    for i in 0..3 {
        let served = walk(&ensemble.addr(i).to_string()).await;
        // /zookeeper/config is the serving ensemble's membership (ZooKeeper
        // Dynamic Reconfiguration), not the imported server's.
        let config = String::from_utf8_lossy(&served["/zookeeper/config"].0).into_owned();
        assert_eq!(
            config.lines().filter(|l| l.starts_with("server.")).count(),
            3,
            "member {}: {config}",
            i + 1
        );
        let mut served_but_config = served.clone();
        served_but_config.insert(
            "/zookeeper/config".into(),
            before["/zookeeper/config"].clone(),
        );
        common::assert_same_tree(&format!("member {}", i + 1), &served_but_config, &before);
        assert_eq!(
            common::raw_data(ensemble.addr(i), &NULL_DATA),
            [None, None, None],
            "member {}",
            i + 1
        );
    }
}

/// Only files named `prefix.*` in ZooKeeper's version-2 directory.
fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("version-2"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_log_tail_is_cut_and_corrupt_snapshots_are_refused_by_name() {
    let mut zk = zookeeper();
    let c = connect(&zk.connect_string(), Duration::from_secs(10), None).await;
    for i in 0..12 {
        c.create(&format!("/n{i}"), b"v", &open(), CreateMode::Persistent)
            .await
            .unwrap();
    }
    let _ = c.close().await;
    zk.kill();
    let work = tempfile::tempdir().unwrap();

    // The newest log, cut in the middle of its last entry as a crash
    // during the write leaves it (then ZooKeeper's preallocated zeros).
    let torn = work.path().join("torn");
    copy_dir(&zk.data_dir(), &torn);
    let last_log = files(&torn, "log.").pop().unwrap();
    let mut bytes = std::fs::read(&last_log).unwrap();
    let end = bytes.iter().rposition(|&b| b == b'B').unwrap();
    bytes.truncate(end - 3);
    bytes.resize(bytes.len() + 4096, 0);
    std::fs::write(&last_log, bytes).unwrap();
    let data_dir = work.path().join("torn-data");
    let cfg = member_cfg(work.path(), &data_dir);
    let (ok, _, stderr) = import(&torn, &cfg);
    assert!(ok, "a torn tail is tolerated: {stderr}");
    let name = last_log.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        stderr.contains(&name) && stderr.contains("never acknowledged"),
        "{stderr}"
    );
    let wazoo = start_wazoo(&data_dir);
    let w = connect(&wazoo.connect_string(), Duration::from_secs(10), None).await;
    // The close session was the last entry; every create is there.
    for i in 0..12 {
        assert!(
            w.exists(&format!("/n{i}")).await.unwrap().is_some(),
            "/n{i}"
        );
    }
    drop(wazoo);

    // Every snapshot damaged: nothing to start from, each one named.
    let bad = work.path().join("bad");
    copy_dir(&zk.data_dir(), &bad);
    let snaps = files(&bad, "snapshot.");
    for s in &snaps {
        let mut b = std::fs::read(s).unwrap();
        // An empty one (a snapshot the kill cut short) is damaged already.
        if !b.is_empty() {
            let mid = b.len() / 2;
            b[mid] ^= 0x55;
            std::fs::write(s, b).unwrap();
        }
    }
    let cfg = member_cfg(work.path(), &work.path().join("bad-data"));
    let (ok, _, stderr) = import(&bad, &cfg);
    assert!(!ok, "corrupt snapshots must be refused");
    for s in &snaps {
        let name = s.file_name().unwrap().to_string_lossy().into_owned();
        assert!(stderr.contains(&name), "{name} is not named in: {stderr}");
    }
    assert!(stderr.contains("offset"), "{stderr}");
    assert!(
        !work.path().join("bad-data/wazoo-v1").exists()
            || std::fs::read_dir(work.path().join("bad-data/wazoo-v1"))
                .unwrap()
                .next()
                .is_none(),
        "a refused import writes nothing"
    );
}

// ZooKeeper Administrator's Guide, "snapshot.compression.method": a
// ZooKeeper that writes gz or snappy snapshots is imported from its newest
// (compressed) snapshot, and wazoo serves the same tree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_zookeeper_snapshots_are_imported() {
    for method in ["gz", "snappy"] {
        let opts = common::options(Flavor::Zookeeper)
            .arg("-Dzookeeper.snapCount=10")
            .arg(format!("-Dzookeeper.snapshot.compression.method={method}"))
            .session_timeouts_ms(4000, 60_000);
        let mut zk = ZkServer::start_with(opts).expect("cannot start Apache ZooKeeper");
        let c = connect(&zk.connect_string(), Duration::from_secs(10), None).await;
        for i in 0..30 {
            let data = format!("{method} node {i}").repeat(i + 1);
            c.create(
                &format!("/c{i}"),
                data.as_bytes(),
                &open(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        }
        let _ = c.close().await;
        let before = walk(&zk.connect_string()).await;
        zk.kill();
        let work = tempfile::tempdir().unwrap();
        let zk_copy = work.path().join("zk");
        copy_dir(&zk.data_dir(), &zk_copy);
        let newest = files(&zk_copy, "snapshot.").into_iter().max_by_key(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            i64::from_str_radix(name.split('.').nth(1).unwrap(), 16).unwrap()
        });
        let newest = newest.expect("ZooKeeper wrote no snapshot");
        assert!(
            newest.to_string_lossy().ends_with(&format!(".{method}")),
            "ZooKeeper wrote {} with compression {method}",
            newest.display()
        );
        let data_dir = work.path().join("wazoo-data");
        let cfg = member_cfg(work.path(), &data_dir);
        let (ok, stdout, stderr) = import(&zk_copy, &cfg);
        assert!(ok, "{method}: import failed: {stderr}");
        // ZooKeeper writes a snapshot on a thread of its own, and the kill
        // may catch it writing the newest: then the import skips that one,
        // torn, by name, and takes the one before (compressed too).
        let torn = format!("skipped snapshot {}", newest.display());
        assert!(
            stdout.contains(&*newest.file_name().unwrap().to_string_lossy())
                || stderr.contains(&torn),
            "{method}: not imported from the newest snapshot: {stdout}{stderr}"
        );
        let wazoo = start_wazoo(&data_dir);
        let after = walk(&wazoo.connect_string()).await;
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>(),
            "{method}: the same paths"
        );
        for (path, (data, _, stat)) in &before {
            if path.starts_with("/zookeeper") {
                continue;
            }
            let (d, _, s) = &after[path];
            assert!(d == data, "{method}: {path}: data differs");
            assert_eq!(s, stat, "{method}: {path}: Stat");
        }
    }
}

// docs/MIGRATION.md, "Back to ZooKeeper"; ZooKeeper Administrator's
// Guide, "The Data Directory": a backup of a wazoo member restored as
// ZooKeeper's data directory is served by Apache ZooKeeper 3.8 as wazoo
// served it: the same paths, data (null apart from empty), ACLs and
// Stats, ephemerals of the sessions the backup holds, sequence numbers
// going on, the quota counting. A second restore into that directory is
// refused, and ZooKeeper's files are never overwritten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_serves_the_tree_wazoo_served_after_a_restore() {
    let wazoo =
        WazooServer::start(common::options(Flavor::Wazoo).session_timeouts_ms(4000, 60_000))
            .expect("cannot start wazoo");
    let owner = build_tree(&wazoo.connect_string()).await;
    let session = owner.session_id();
    let before = walk(&wazoo.connect_string()).await;
    assert_eq!(
        common::raw_data(wazoo.addr(), &NULL_DATA),
        [None, None, None]
    );
    let work = tempfile::tempdir().unwrap();
    let backup = work.path().join("wazoo.backup");
    let b = backup.to_str().unwrap();
    let (ok, _, stderr) = common::run_wazoo(&[
        "backup",
        "--server",
        &wazoo.addr().to_string(),
        "--out",
        b,
        "--auth",
        "super:test",
    ]);
    assert!(ok, "backup: {stderr}");
    let zk_data = work.path().join("zk-data");
    let z = zk_data.to_str().unwrap();
    let (ok, stdout, stderr) = common::run_wazoo(&["restore", "--from", b, "--zookeeper-data", z]);
    assert!(ok, "restore: {stderr}");
    assert!(
        stdout.contains(&format!("{} znodes", before.len())),
        "{stdout}"
    );

    let zk = ZkServer::start_with(
        common::options(Flavor::Zookeeper)
            .cfg(format!("dataDir={}", zk_data.display()))
            .session_timeouts_ms(4000, 60_000),
    )
    .expect("ZooKeeper does not start on the restored data");
    let after = walk(&zk.connect_string()).await;
    common::assert_same_tree("served", &after, &before);
    assert_eq!(after["/app/eph"].2.ephemeral_owner, session);
    assert_eq!(common::raw_data(zk.addr(), &NULL_DATA), [None, None, None]);
    assert!(after["/data/big"].0.len() == 1_000_000);
    // ZooKeeper checks the snapshot's digest against the tree it loaded.
    let mntr = wazoo_testkit::four_letter_word(zk.addr(), "mntr").unwrap();
    assert!(
        mntr.contains("zk_digest_mismatches_count\t0\n"),
        "ZooKeeper found the snapshot's digest wrong:\n{mntr}\n{}",
        zk.log_tail(40)
    );

    let c = connect(&zk.connect_string(), Duration::from_secs(10), None).await;
    counters_go_on(&c, &before).await;
    drop(c);
    drop(owner);

    // ZooKeeper's directory now holds its data: never written into again.
    let (ok, _, stderr) = common::run_wazoo(&["restore", "--from", b, "--zookeeper-data", z]);
    assert!(!ok && stderr.contains("refusing to overwrite"), "{stderr}");
}
