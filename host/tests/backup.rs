//! `wazoo backup` / `wazoo restore`: a backup taken while a writer runs is
//! one consistent state at one zxid of the write stream, and a standalone
//! member or a 3-member ensemble restored from it serves exactly that
//! state. Only the super user may take one. (ZooKeeper Administrator's
//! Guide, "Data File Management"; ZooKeeper 3.9's admin `snapshot` command
//! is the precedent.)

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wazoo::core::tree::DataTree;
use wazoo_client::{Acl, Client, ClientOptions, CreateMode, Id};
use wazoo_testkit::{Flavor, ServerOptions, TestEnsemble, WazooEnsemble, WazooServer};

use common::Seen;

fn open() -> Vec<Acl> {
    vec![Acl {
        perms: 31,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    }]
}

async fn connect(hosts: &str, auth: Option<&str>) -> Client {
    let mut opts = ClientOptions::new().session_timeout(Duration::from_secs(40));
    if let Some(a) = auth {
        opts = opts.auth("digest", a.as_bytes());
    }
    Client::connect(hosts, opts)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {hosts}: {e}"))
        .0
}

/// Every node a server serves, read as the super user.
async fn walk(hosts: &str) -> BTreeMap<String, Seen> {
    let c = connect(hosts, Some("super:test")).await;
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

/// Every node of a backup's tree.
fn nodes_of(tree: &DataTree) -> BTreeMap<String, Seen> {
    let mut out = BTreeMap::new();
    let mut queue = vec!["/".to_string()];
    while let Some(p) = queue.pop() {
        let v = tree.node(&p).unwrap();
        for child in tree.children(&p).unwrap() {
            queue.push(if p == "/" {
                format!("/{child}")
            } else {
                format!("{p}/{child}")
            });
        }
        out.insert(p, (v.data().to_vec(), v.acl.to_vec(), v.stat));
    }
    out
}

fn restore(backup: &Path, data_dir: &Path) -> String {
    let cfg = data_dir.with_extension("cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort=2181\n",
            data_dir.display()
        ),
    )
    .unwrap();
    let (ok, stdout, stderr) = common::run_wazoo(&[
        "restore",
        "--from",
        &backup.display().to_string(),
        "--config",
        &cfg.display().to_string(),
    ]);
    assert!(ok, "restore into {} failed: {stderr}", data_dir.display());
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_super_user_may_take_a_backup() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("b.snap");
    let server = WazooServer::start(common::options(Flavor::Wazoo).cfg("snapCount=50")).unwrap();
    let addr = server.addr().to_string();
    let o = out.display().to_string();
    for (auth, why) in [
        ("super:wrong", "not the super user"),
        ("alice:test", "not the super user"),
        ("nocolon", "malformed credentials"),
    ] {
        let (ok, _, stderr) =
            common::run_wazoo(&["backup", "--server", &addr, "--out", &o, "--auth", auth]);
        assert!(!ok && stderr.contains(why), "{auth}: {stderr}");
        assert!(!out.exists() && !out.with_extension("partial").exists());
    }
    let (ok, _, stderr) = common::run_wazoo(&["backup", "--server", &addr, "--out", &o]);
    assert!(!ok && stderr.contains("credentials"), "{stderr}");
    // A member without a super user refuses everyone.
    let open_server =
        WazooServer::start(ServerOptions::default().binary(env!("CARGO_BIN_EXE_wazoo"))).unwrap();
    let (ok, _, stderr) = common::run_wazoo(&[
        "backup",
        "--server",
        &open_server.addr().to_string(),
        "--out",
        &o,
        "--auth",
        "super:test",
    ]);
    assert!(!ok && stderr.contains("no super user"), "{stderr}");
    assert!(!out.exists());
    // The member goes on serving, and the super user gets a backup.
    let (ok, stdout, stderr) = common::run_wazoo(&[
        "backup",
        "--server",
        &addr,
        "--out",
        &o,
        "--auth",
        "super:test",
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("zxid 0x"), "{stdout}");
    assert!(out.is_file());
}

/// Creates sequential nodes until told to stop; returns (czxid, path) of
/// every acknowledged create.
struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<(i64, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Writer {
    async fn start(hosts: &str) -> Writer {
        let c = connect(hosts, None).await;
        c.create("/load", b"", &open(), CreateMode::Persistent)
            .await
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let (s, a) = (stop.clone(), acked.clone());
        let task = tokio::spawn(async move {
            let mut i = 0u32;
            while !s.load(Ordering::Relaxed) {
                let (path, stat) = c
                    .create2(
                        "/load/w-",
                        &i.to_be_bytes(),
                        &open(),
                        CreateMode::PersistentSequential,
                    )
                    .await
                    .unwrap();
                c.set_data("/load", &i.to_be_bytes(), None).await.unwrap();
                a.lock().unwrap().push((stat.czxid, path));
                i += 1;
            }
            let _ = c.close().await;
        });
        Writer { stop, acked, task }
    }

    fn count(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    async fn wait_for(&self, n: usize) {
        for _ in 0..600 {
            if self.count() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the writer made {} writes in 30 s, not {n}", self.count());
    }

    async fn finish(self) -> Vec<(i64, String)> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        Arc::try_unwrap(self.acked).unwrap().into_inner().unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_writes_restores_into_a_member_and_an_ensemble() {
    let work = tempfile::tempdir().unwrap();
    let server = WazooServer::start(
        common::options(Flavor::Wazoo)
            .cfg("snapCount=64")
            .session_timeouts_ms(4000, 60_000),
    )
    .unwrap();
    let hosts = server.connect_string();
    // Something of every kind besides the writer's nodes.
    let owner = connect(&hosts, None).await;
    owner
        .create("/eph", b"e", &open(), CreateMode::Ephemeral)
        .await
        .unwrap();
    owner
        .create("/box", b"", &open(), CreateMode::Container)
        .await
        .unwrap();
    owner
        .create("/box/in", &[0u8, 255], &open(), CreateMode::Persistent)
        .await
        .unwrap();
    // Null data (ZooKeeper Programmer's Guide, "ZooKeeper Data Model"),
    // which the walk's client reads as empty: checked on its own below.
    common::raw_writes(server.addr(), &[common::raw_create("/null", None)]);
    let writer = Writer::start(&hosts).await;
    writer.wait_for(100).await;
    let out: PathBuf = work.path().join("backup.snap");
    let (addr, o) = (server.addr().to_string(), out.display().to_string());
    let taken = tokio::task::spawn_blocking(move || {
        common::run_wazoo(&[
            "backup",
            "--server",
            &addr,
            "--out",
            &o,
            "--auth",
            "super:test",
        ])
    });
    let (ok, stdout, stderr) = taken.await.unwrap();
    assert!(ok, "backup failed: {stderr}");
    let after_backup = writer.count();
    writer.wait_for(after_backup + 100).await;
    let acked = writer.finish().await;

    let bytes = wazoo_storage::read_snapshot(&out).unwrap();
    let loaded = wazoo::member::read_snapshot_payload(&bytes).unwrap();
    let (zxid, sessions, tree) = (loaded.zxid.to_wire(), loaded.sessions, loaded.tree);
    assert!(stdout.contains(&format!("0x{zxid:x}")), "{stdout}");
    let first = acked.first().unwrap().0;
    let last = acked.last().unwrap().0;
    assert!(
        first < zxid && zxid < last,
        "the backup's zxid 0x{zxid:x} lies within the writes 0x{first:x}..0x{last:x}"
    );
    // One cut of the stream: every write up to the backup's zxid, none after.
    for (czxid, path) in &acked {
        assert_eq!(
            tree.exists(path),
            *czxid <= zxid,
            "{path} (0x{czxid:x}) against the backup at 0x{zxid:x}"
        );
    }
    // The session travels with its password's hash, never the password.
    let verifier = wazoo::core::session::verifier(&owner.session_password());
    assert!(sessions
        .iter()
        .any(|s| s.id == owner.session_id() && s.verifier == Some(verifier)));
    assert!(!bytes
        .windows(16)
        .any(|w| w == owner.session_password().as_slice()));
    let backup = nodes_of(&tree);
    assert_eq!(backup["/eph"].2.ephemeral_owner, owner.session_id());
    assert_eq!(tree.node("/null").unwrap().nullable_data(), None);
    assert_eq!(tree.node("/box").unwrap().nullable_data(), Some(&b""[..]));

    // A new standalone member.
    let data = work.path().join("standalone");
    restore(&out, &data);
    let restored = WazooServer::start(
        common::options(Flavor::Wazoo)
            .cfg(format!("dataDir={}", data.display()))
            .session_timeouts_ms(4000, 60_000),
    )
    .unwrap();
    common::assert_same_tree(
        "standalone",
        &walk(&restored.connect_string()).await,
        &backup,
    );
    assert_eq!(common::raw_data(restored.addr(), &["/null"]), [None]);
    // Restoring over it is refused.
    let cfg = data.with_extension("cfg");
    let (ok, _, stderr) = common::run_wazoo(&[
        "restore",
        "--from",
        &out.display().to_string(),
        "--config",
        &cfg.display().to_string(),
    ]);
    assert!(!ok && stderr.contains("not empty"), "{stderr}");
    drop(restored);

    // A 3-member ensemble, every member from the same file.
    let mut ensemble = WazooEnsemble::start(3, common::ensemble_options(Flavor::Wazoo)).unwrap();
    for i in 0..3 {
        ensemble.kill(i);
        let dir = ensemble.data_dir(i).to_path_buf();
        let _ = std::fs::remove_dir_all(dir.join("wazoo-v1"));
        restore(&out, &dir);
    }
    ensemble.restart_all().unwrap();
    // /zookeeper/config is the serving ensemble's membership (ZooKeeper
    // Dynamic Reconfiguration), not the backed-up member's: every other
    // node is the backup's.
    let mut backup_but_config = backup.clone();
    backup_but_config.remove("/zookeeper/config");
    for i in 0..3 {
        let addr = ensemble.addr(i).to_string();
        let mut served = walk(&addr).await;
        let (config, _, _) = served.remove("/zookeeper/config").unwrap();
        let config = String::from_utf8(config).unwrap();
        assert_eq!(
            config.lines().filter(|l| l.starts_with("server.")).count(),
            3,
            "member {}: {config}",
            i + 1
        );
        common::assert_same_tree(
            &format!("ensemble member {}", i + 1),
            &served,
            &backup_but_config,
        );
        assert_eq!(
            common::raw_data(ensemble.addr(i), &["/null"]),
            [None],
            "member {}",
            i + 1
        );
    }
    // The ensemble takes writes after the restored history.
    let c = connect(&ensemble.connect_string(), None).await;
    let (_, stat) = c
        .create2("/after", b"", &open(), CreateMode::Persistent)
        .await
        .unwrap();
    assert!(stat.czxid > zxid);
    drop(owner);
}
