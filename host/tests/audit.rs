//! Audit logs (ZooKeeper Audit Logging, "ZooKeeper Audit Logs"; the
//! Administrator's Guide's `audit.enable`): the same requests against
//! Apache ZooKeeper 3.8 and wazoo, with `audit.enable=true`, leave the
//! same records; on an ensemble a client's operations are logged on the
//! member it is connected to and a session's ephemeral cleanup on every
//! member; a file that cannot be written stops the member, named.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use wazoo_testkit::{
    free_port, Flavor, TestEnsemble, WazooEnsemble, WazooServer, ZkEnsemble, ZkServer,
};
use zookeeper_client::{Acls, CreateMode, EnsembleUpdate};

/// Waits (bounded) until `path` holds at least `n` lines, and returns them.
fn lines_at_least(path: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= n {
            // A moment more for records still on their way.
            std::thread::sleep(Duration::from_millis(300));
            let text = std::fs::read_to_string(path).unwrap_or_default();
            return text.lines().map(str::to_string).collect();
        }
        assert!(
            Instant::now() < deadline,
            "{} holds {} lines, expected {n}:\n{text}",
            path.display(),
            lines.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A line without its timestamp (`yyyy-MM-dd HH:mm:ss,SSS `), session ids
/// renamed S1, S2... in the order they first appear (they must differ
/// between the two servers), and each run of ephemeral-cleanup records
/// sorted (ZooKeeper deletes a session's ephemerals in hash-set order).
fn normalized(lines: &[String]) -> Vec<String> {
    let mut sessions: Vec<String> = Vec::new();
    let mut out: Vec<String> = lines
        .iter()
        .map(|l| {
            assert!(
                l.len() > 24 && l.as_bytes()[4] == b'-' && l.as_bytes()[19] == b',',
                "a timestamp starts {l:?}"
            );
            l[24..]
                .split('\t')
                .map(|f| match f.split_once("session=") {
                    Some((head, id)) => {
                        let i = sessions.iter().position(|s| s == id).unwrap_or_else(|| {
                            sessions.push(id.to_string());
                            sessions.len() - 1
                        });
                        format!("{head}session=S{}", i + 1)
                    }
                    None => f.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\t")
        })
        .collect();
    let cleanup = |l: &String| l.contains("operation=ephemeralZNodeDeletion");
    let mut i = 0;
    while i < out.len() {
        let mut j = i;
        while j < out.len() && cleanup(&out[j]) {
            j += 1;
        }
        out[i..j].sort();
        i = j.max(i + 1);
    }
    out
}

/// The requests of the comparison, on one server: every audited operation,
/// a failure of each, a multi that passes and one that fails, a reconfig
/// (refused: reconfigEnabled is off), an authenticated user, and a session
/// closed with two ephemerals.
async fn requests(hosts: &str) {
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let zk = common::connect(hosts).await;
    zk.create("/audit", b"", &open).await.unwrap();
    zk.create("/audit/p", b"x", &open).await.unwrap();
    zk.create("/audit/p", b"x", &open).await.unwrap_err();
    let seq = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    zk.create("/audit/s-", b"", &seq).await.unwrap();
    zk.set_data("/audit/p", b"y", None).await.unwrap();
    zk.set_data("/audit/p", b"z", Some(99)).await.unwrap_err();
    zk.set_acl("/audit/p", &Acls::anyone_all(), None)
        .await
        .unwrap();
    zk.set_acl("/audit/p", &Acls::anyone_all(), Some(99))
        .await
        .unwrap_err();
    zk.delete("/audit/none", None).await.unwrap_err();
    zk.delete("/audit/s-0000000001", None).await.unwrap();
    let mut multi = zk.new_multi_writer();
    multi.add_create("/audit/m", b"", &open).unwrap();
    multi.add_create("/audit/m/q-", b"", &seq).unwrap();
    multi.add_set_data("/audit/m", b"1", None).unwrap();
    multi.add_check_version("/audit/m", 1).unwrap();
    multi.add_delete("/audit/m/q-0000000000", None).unwrap();
    multi.commit().await.unwrap();
    let mut multi = zk.new_multi_writer();
    multi.add_create("/audit/n", b"", &open).unwrap();
    multi.add_create("/audit/p", b"", &open).unwrap();
    multi.commit().await.unwrap_err();
    zk.update_ensemble(
        EnsembleUpdate::Incremental {
            joinings: [].iter().copied(),
            leavings: ["3"].iter().copied(),
        },
        None,
    )
    .await
    .unwrap_err();
    zk.auth("digest", b"alice:secret").await.unwrap();
    zk.create("/audit/by-alice", b"", &open).await.unwrap();

    let other = common::connect(hosts).await;
    let eph = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    other.create("/audit/e", b"", &eph).await.unwrap();
    let eph_seq = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    other.create("/audit/es-", b"", &eph_seq).await.unwrap();
    // Dropping a client closes its session.
    drop(other);
    gone(&zk, "/audit/e").await;
}

/// Waits (bounded) until `path` no longer exists.
async fn gone(zk: &zookeeper_client::Client, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while zk.check_stat(path).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "{path} outlived its session");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The records the requests leave, after serverStart.
const EXPECTED_RECORDS: usize = 1 + 21;

// ZooKeeper Audit Logging, "ZooKeeper Audit Logs": the same requests leave
// the same lines (but for their time and session ids) on ZooKeeper 3.8 and
// wazoo: fields, their order and tabs, the level, the logger's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_requests_leave_the_same_audit_records_as_zookeeper() {
    let zk_server =
        ZkServer::start_with(common::options(Flavor::Zookeeper).cfg("audit.enable=true"))
            .unwrap_or_else(|e| panic!("cannot start ZooKeeper: {e:#}"));
    let mut wazoo = WazooServer::start(
        common::options(Flavor::Wazoo)
            .cfg("audit.enable=true")
            .cfg("4lw.commands.whitelist=*"),
    )
    .unwrap_or_else(|e| panic!("cannot start wazoo: {e:#}"));
    requests(&zk_server.connect_string()).await;
    requests(&wazoo.connect_string()).await;
    let want = lines_at_least(&zk_server.audit_log_path(), EXPECTED_RECORDS);
    let got = lines_at_least(
        &wazoo.data_dir().join("zookeeper_audit.log"),
        EXPECTED_RECORDS,
    );
    let (want, got) = (normalized(&want), normalized(&got));
    assert_eq!(
        got,
        want,
        "wazoo's records (left) and ZooKeeper's (right):\n{}\n---\n{}",
        got.join("\n"),
        want.join("\n")
    );
    // Counted in the metrics (serverStart aside).
    let mntr = wazoo_testkit::four_letter_word(wazoo.addr(), "mntr").unwrap();
    assert!(
        mntr.contains(&format!("wazoo_audit_records\t{}\n", EXPECTED_RECORDS - 1)),
        "{mntr}"
    );
    // What the comparison covered, so that a change to both cannot hide.
    let user = wazoo::audit::process_user();
    assert_eq!(
        got[0],
        format!("INFO audit.Slf4jAuditLogger: user={user}\toperation=serverStart\tresult=success")
    );
    let has = |s: &str| got.iter().any(|l| l.contains(s));
    assert!(has("ERROR audit.Slf4jAuditLogger: session=S1\tuser=127.0.0.1\tip=127.0.0.1\toperation=create\tznode=/audit/p\tznode_type=persistent\tresult=failure"));
    assert!(has(
        "operation=setAcl\tznode=/audit/p\tacl=world:anyone:cdrwa\tresult=success"
    ));
    assert!(has("operation=multiOperation\tresult=failure"));
    assert!(has("operation=reconfig\tresult=failure"));
    assert!(has(
        "user=alice,127.0.0.1\tip=127.0.0.1\toperation=create\tznode=/audit/by-alice"
    ));
    assert!(has(&format!("session=S2\tuser={user}\toperation=ephemeralZNodeDeletionOnSessionCloseOrExpire\tznode=/audit/es-0000000005\tresult=success")));
    // A stop on a signal records serverStop, "invoked" (ZooKeeper logs it
    // from its shutdown hook, before the server has stopped).
    let status = wazoo.stop(Duration::from_secs(20));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    let text = std::fs::read_to_string(wazoo.data_dir().join("zookeeper_audit.log")).unwrap();
    assert!(
        text.ends_with(&format!(
            " INFO audit.Slf4jAuditLogger: user={user}\toperation=serverStop\tresult=invoked\n"
        )),
        "{text}"
    );
}

// ZooKeeper Audit Logging, "ZooKeeper Audit Logs": "Audit logs are not
// logged on all the ZooKeeper servers, but logged only on the servers
// where client is connected"; the ephemerals a session leaves are deleted
// by every server, and each logs it (ZooKeeper's DataTree.deleteNodes).
// A client on each member (so on the leader and on followers, whose
// writes and refusals come back from the leader) shows both, on ZooKeeper
// 3.8 and on wazoo alike; so does a reconfig.
async fn client_records_stay_on_their_member_and_cleanup_is_on_every_member(
    ens: &dyn TestEnsemble,
    audit_log: impl Fn(usize) -> PathBuf,
    flavor: Flavor,
) {
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let eph = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let admin = common::connect(&ens.connect_string()).await;
    admin.create("/dup", b"", &open).await.unwrap();
    let mut sessions = Vec::new();
    for i in 0..3 {
        let c = common::connect(&ens.addr(i).to_string()).await;
        c.create(&format!("/e{i}"), b"", &eph).await.unwrap();
        c.create("/dup", b"", &open).await.unwrap_err();
        sessions.push(format!("0x{:x}", c.session_id().0));
        drop(c);
        gone(&admin, &format!("/e{i}")).await;
    }
    // A reconfig (by the super user, from a follower) that removes the
    // other follower: recorded on the client's member only.
    let leader = ens.wait_for_leader(Duration::from_secs(30)).unwrap();
    let mut followers = (0..3).filter(|&i| i != leader);
    let (client_member, removed) = (followers.next().unwrap(), followers.next().unwrap());
    let su = common::connect(&ens.addr(client_member).to_string()).await;
    su.auth("digest", b"super:test").await.unwrap();
    let removed_id = (removed + 1).to_string();
    su.update_ensemble(
        EnsembleUpdate::Incremental {
            joinings: [].iter().copied(),
            leavings: [removed_id.as_str()].iter().copied(),
        },
        None,
    )
    .await
    .unwrap();
    drop(su);
    drop(admin);
    for i in 0..3 {
        let lines = lines_at_least(&audit_log(i), 6);
        let reconfigs: Vec<&String> = lines
            .iter()
            .filter(|l| l.contains("operation=reconfig"))
            .collect();
        match i == client_member {
            true => assert!(
                reconfigs.len() == 1
                    && reconfigs[0].ends_with("\tznode=/zookeeper/config\tresult=success"),
                "{flavor} member {i}: {reconfigs:?}"
            ),
            false => assert!(reconfigs.is_empty(), "{flavor} member {i}: {reconfigs:?}"),
        }
    }
    let user = wazoo::audit::process_user();
    for i in 0..3 {
        // serverStart, this member's create and failure, and three
        // cleanups; the admin's create is on whichever member it used.
        let lines = lines_at_least(&audit_log(i), 6);
        let text = lines.join("\n");
        let count = |s: &str| lines.iter().filter(|l| l.contains(s)).count();
        assert_eq!(
            count("operation=serverStart"),
            1,
            "{flavor} member {i}:\n{text}"
        );
        for (j, session) in sessions.iter().enumerate() {
            let create = format!("session={session}\tuser=127.0.0.1\tip=127.0.0.1\toperation=create\tznode=/e{j}\tznode_type=ephemeral\tresult=success");
            let failed = format!("session={session}\tuser=127.0.0.1\tip=127.0.0.1\toperation=create\tznode=/dup\tznode_type=persistent\tresult=failure");
            let here = usize::from(i == j);
            assert_eq!(
                count(&create),
                here,
                "{flavor} member {i}, session of member {j}:\n{text}"
            );
            assert_eq!(
                count(&failed),
                here,
                "{flavor} member {i}, session of member {j}:\n{text}"
            );
            let cleanup = format!("session={session}\tuser={user}\toperation=ephemeralZNodeDeletionOnSessionCloseOrExpire\tznode=/e{j}\tresult=success");
            assert_eq!(
                count(&cleanup),
                1,
                "{flavor} member {i} logs the cleanup of /e{j}:\n{text}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_ensemble_logs_client_records_on_their_member_and_cleanup_on_every_member() {
    let opts = common::ensemble_options(Flavor::Zookeeper)
        .cfg("audit.enable=true")
        .cfg("reconfigEnabled=true")
        .arg(format!(
            "-Dzookeeper.DigestAuthenticationProvider.superDigest={SUPER_DIGEST}"
        ));
    let ens = ZkEnsemble::start_with(3, opts)
        .unwrap_or_else(|e| panic!("cannot start a ZooKeeper ensemble: {e:#}"));
    client_records_stay_on_their_member_and_cleanup_is_on_every_member(
        &ens,
        |i| ens.audit_log_path(i),
        Flavor::Zookeeper,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wazoo_ensemble_logs_client_records_on_their_member_and_cleanup_on_every_member() {
    let opts = common::ensemble_options(Flavor::Wazoo)
        .cfg("audit.enable=true")
        .cfg("reconfigEnabled=true")
        .cfg(format!(
            "DigestAuthenticationProvider.superDigest={SUPER_DIGEST}"
        ));
    let ens = WazooEnsemble::start(3, opts)
        .unwrap_or_else(|e| panic!("cannot start a wazoo ensemble: {e:#}"));
    client_records_stay_on_their_member_and_cleanup_is_on_every_member(
        &ens,
        |i| ens.data_dir(i).join("zookeeper_audit.log"),
        Flavor::Wazoo,
    )
    .await;
}

/// `super:test`.
const SUPER_DIGEST: &str = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";

/// A zoo.cfg for `wazoo serve` by hand, with audit on and the file at
/// `audit_file`.
fn config_with_audit_file(dir: &Path, audit_file: &Path) -> PathBuf {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\naudit.enable=true\nwazoo.audit.file={}\n",
            data.display(),
            free_port(),
            audit_file.display()
        ),
    )
    .unwrap();
    cfg
}

/// Runs `wazoo serve` on `cfg`, which must stop by itself (bounded); its
/// exit status and standard error.
fn serve_refused(cfg: &Path) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wazoo"))
        .args(["serve", "--config"])
        .arg(cfg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            return (status, err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("wazoo served with an audit log it cannot write");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ZooKeeper Audit Logging, "ZooKeeper Audit Log Configuration": the file
// the records go to. One that cannot be opened, or a full disk (/dev/full
// answers every write with ENOSPC), stops the start, naming the file.
#[test]
fn an_audit_log_that_cannot_be_opened_or_written_refuses_the_start_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("a-file");
    std::fs::write(&not_a_dir, b"").unwrap();
    let unopenable = not_a_dir.join("audit.log");
    for (file, why) in [
        (unopenable.as_path(), "Not a directory"),
        (Path::new("/dev/full"), "No space left on device"),
    ] {
        let cfg = config_with_audit_file(dir.path(), file);
        let (status, err) = serve_refused(&cfg);
        assert!(!status.success(), "{file:?}: {err}");
        assert!(err.contains(&file.display().to_string()), "{err}");
        assert!(err.contains("audit log"), "{err}");
        assert!(err.contains(why), "{err}");
    }
}

// ZooKeeper records `serverStart` `failure` when its start fails (here:
// the client port is taken).
#[test]
fn a_start_that_fails_records_a_server_start_failure() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.log");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let cfg = config_with_audit_file(dir.path(), &audit);
    let text = std::fs::read_to_string(&cfg).unwrap();
    let text: String = text
        .lines()
        .map(|l| match l.starts_with("clientPort=") {
            true => format!("clientPort={port}\n"),
            false => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&cfg, text).unwrap();
    let (status, err) = serve_refused(&cfg);
    assert!(!status.success(), "{err}");
    let lines = std::fs::read_to_string(&audit).unwrap();
    let user = wazoo::audit::process_user();
    assert!(
        lines.ends_with(&format!(
            " ERROR audit.Slf4jAuditLogger: user={user}\toperation=serverStart\tresult=failure\n"
        )),
        "{lines}"
    );
    assert!(!lines.contains("result=success"), "{lines}");
}

// A write error at run time (here the reader of a pipe going away, as a
// disk filling up would) stops the member with an error naming the file;
// the write whose record could not be written is not answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_write_that_fails_while_serving_stops_the_member_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("audit.pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // The reader takes serverStart, then goes away.
    let reader_path = fifo.clone();
    let reader = std::thread::spawn(move || {
        let f = std::fs::File::open(&reader_path).unwrap();
        let mut first = String::new();
        BufReader::new(f).read_line(&mut first).unwrap();
        first
    });
    let mut server = WazooServer::start(
        common::options(Flavor::Wazoo)
            .cfg("audit.enable=true")
            .cfg(format!("wazoo.audit.file={}", fifo.display())),
    )
    .unwrap_or_else(|e| panic!("cannot start wazoo: {e:#}"));
    let first = reader.join().unwrap();
    assert!(first.contains("operation=serverStart"), "{first}");
    let zk = zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&server.connect_string())
        .await
        .unwrap();
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let r = tokio::time::timeout(Duration::from_secs(20), zk.create("/x", b"", &open)).await;
    assert!(
        !matches!(r, Ok(Ok(_))),
        "a create whose record was not written was answered"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.is_running() {
        assert!(Instant::now() < deadline, "the member kept serving");
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = server.log_tail(50);
    assert!(log.contains("cannot write the audit log"), "{log}");
    assert!(log.contains(&fifo.display().to_string()), "{log}");
}
