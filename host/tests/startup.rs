//! What wazoo does with what it finds on disk at start (docs/ARCHITECTURE.md,
//! "Durability and recovery"): a torn tail from a crash is cut with a warning
//! and the member serves; a corrupt record in the middle of the log stops the
//! start with a message naming the file; nothing panics.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{connect, start};
use wazoo_testkit::{Flavor, TestServer};
use zookeeper_client::{Acls, CreateMode};

fn log_segments(data_dir: &Path) -> Vec<PathBuf> {
    let dir = data_dir.join("wazoo-v1");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("log."))
        .collect();
    v.sort();
    v
}

async fn write_some(server: &dyn TestServer, n: usize) {
    let zk = connect(&server.connect_string()).await;
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    for i in 0..n {
        zk.create(&format!("/n{i}"), &[1u8; 200], &opts)
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_log_tail_is_cut_and_the_member_serves() {
    let mut server = start(Flavor::Wazoo);
    write_some(server.as_ref(), 20).await;
    server.kill();
    let seg = log_segments(&server.data_dir())
        .pop()
        .expect("a log segment");
    // A crash in the middle of a write: half a record at the end.
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes.extend_from_slice(&[0, 0, 0, 40, 1, 2, 3, 4, 5, 6, 7]);
    std::fs::write(&seg, bytes).unwrap();
    server.restart().expect("restart after a torn tail");
    let zk = connect(&server.connect_string()).await;
    for i in 0..20 {
        assert!(
            zk.check_stat(&format!("/n{i}")).await.unwrap().is_some(),
            "/n{i} survived"
        );
    }
    assert!(
        server.log_tail(200).contains("repaired"),
        "a warning says the log was repaired"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_record_in_the_middle_refuses_to_start_with_a_clear_message() {
    let mut server = start(Flavor::Wazoo);
    write_some(server.as_ref(), 20).await;
    server.kill();
    let seg = log_segments(&server.data_dir())
        .pop()
        .expect("a log segment");
    let mut bytes = std::fs::read(&seg).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&seg, &bytes).unwrap();
    drop(server);
    // Run the binary by hand on the damaged directory: it must stop with an
    // error that names the file, not panic and not serve a damaged tree.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("wazoo-v1")).unwrap();
    std::fs::write(data.join("wazoo-v1").join(seg.file_name().unwrap()), &bytes).unwrap();
    let port = wazoo_testkit::free_port();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n",
            data.display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wazoo"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused to start; stderr: {stderr}");
    assert!(stderr.contains("corrupt"), "{stderr}");
    assert!(
        stderr.contains(&seg.file_name().unwrap().to_string_lossy().to_string()),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_bad_config_is_refused_with_the_key_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!("dataDir={}\ntickTime=soon\n", dir.path().display()),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wazoo"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("tickTime"), "{stderr}");
}

/// A zoo.cfg in every syntax `java.util.Properties` reads: `key: value`,
/// `key value`, `!` and `#` comments, a `\` continuation, an escaped
/// character in a key, CRLF line ends.
fn java_properties_cfg(dir: &Path, port: u16) -> String {
    format!(
        "! written the way Java properties allow\r\n\
         tickTime: 2000\r\n\
         dataDir {dir}\r\n\
         # a comment\r\n\
         client\\Port={port}\r\n\
         clientPortAddress = 127.0.0.1\r\n\
         4lw.commands.whitelist=srvr, \\\r\n      ruok\r\n\
         maxClientCnxns\t60\r\n\
         admin.enableServer : false\r\n",
        dir = dir.display()
    )
}

/// Asks `ruok` until `imok` comes back, for up to `secs` seconds.
fn answers_ruok(port: u16, secs: u64) -> bool {
    use std::io::{Read, Write};
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let mut answer = String::new();
            if s.write_all(b"ruok").is_ok()
                && s.read_to_string(&mut answer).is_ok()
                && answer == "imok"
            {
                return true;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    false
}

/// Kills the child when dropped, so a failing test leaves no server.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ZooKeeper Administrator's Guide, "Configuration Parameters": zoo.cfg is
// read as a Java properties file. The same file starts Apache ZooKeeper
// 3.8 and wazoo, and both serve the four-letter words its continued
// whitelist line names.
#[test]
fn a_zoo_cfg_in_java_properties_syntax_starts_zookeeper_and_wazoo() {
    let zk_dir = tempfile::tempdir().unwrap();
    let zk_port = wazoo_testkit::free_port();
    let zk_cfg = zk_dir.path().join("zoo.cfg");
    std::fs::write(&zk_cfg, java_properties_cfg(zk_dir.path(), zk_port)).unwrap();
    let classpath = wazoo_testkit::zookeeper_classpath()
        .expect("Apache ZooKeeper 3.8 (Debian package zookeeper) is installed")
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    let _zk = Killed(
        Command::new("java")
            .arg("-cp")
            .arg(&classpath)
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(&zk_cfg)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );

    let wz_dir = tempfile::tempdir().unwrap();
    let wz_port = wazoo_testkit::free_port();
    let wz_cfg = wz_dir.path().join("zoo.cfg");
    std::fs::write(&wz_cfg, java_properties_cfg(wz_dir.path(), wz_port)).unwrap();
    let _wazoo = Killed(
        Command::new(env!("CARGO_BIN_EXE_wazoo"))
            .args(["serve", "--config"])
            .arg(&wz_cfg)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(
        answers_ruok(zk_port, 60),
        "ZooKeeper serves with this zoo.cfg"
    );
    assert!(answers_ruok(wz_port, 60), "wazoo serves with this zoo.cfg");
}

// WAZOO_LOG takes levels the way operators spell them: `warning` shows
// warnings (it used to be read as a target name and hide every line), and
// a word that is no level stops the start with a message that says so.
#[test]
fn wazoo_log_levels_as_operators_spell_them_and_a_bad_one_is_an_error() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("zoo.cfg");
    let port = wazoo_testkit::free_port();
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\ntickTme=2000\n",
            dir.path().display()
        ),
    )
    .unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_wazoo"))
        .env("WAZOO_LOG", "loud")
        .args(["serve", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("\"loud\" is not a level"), "{stderr}");

    let mut child = Killed(
        Command::new(env!("CARGO_BIN_EXE_wazoo"))
            .env("WAZOO_LOG", "warning")
            .args(["serve", "--config"])
            .arg(&cfg)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("a warning line at WAZOO_LOG=warning");
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("did you mean tickTime?"), "{line}");
}
