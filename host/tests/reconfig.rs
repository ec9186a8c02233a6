//! Dynamic reconfiguration (ZooKeeper Dynamic Reconfiguration), against
//! Apache ZooKeeper's ensemble and wazoo's alike: `/zookeeper/config` on
//! every member, `reconfig` refused while `reconfigEnabled` is off, only
//! the super user may reconfigure, a stale version is refused, and
//! participants removed and added while clients keep writing.

mod common;

use common::connect;

use std::time::Duration;

use wazoo_testkit::{start_ensemble, Flavor, ServerOptions, TestEnsemble};
use zookeeper_client::EnsembleUpdate;

fn ensemble(flavor: Flavor, opts: ServerOptions) -> Box<dyn TestEnsemble> {
    start_ensemble(flavor, 3, opts)
        .unwrap_or_else(|e| panic!("cannot start a {flavor} ensemble: {e:#}"))
}

/// The `server.N=` lines and the version of a `/zookeeper/config` text.
fn parse_config(data: &[u8]) -> (Vec<String>, i64) {
    let text = std::str::from_utf8(data).expect("the config is text");
    let mut servers = Vec::new();
    let mut version = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("version=") {
            version = Some(i64::from_str_radix(v, 16).expect("a hexadecimal version"));
        } else {
            assert!(line.starts_with("server."), "unexpected line {line:?}");
            servers.push(line.to_string());
        }
    }
    (servers, version.expect("a version= line"))
}

// ZooKeeper Dynamic Reconfiguration, "Retrieving the current dynamic
// configuration": every member serves the same membership, one
// `server.N=host:quorumPort:electionPort:participant[;clientAddr:port]` line
// per member (the testkit gives wazoo's client ports there), and a
// version that is the node's mzxid; the node's data version is -1.
async fn every_member_serves_the_configuration(flavor: Flavor) {
    let e = ensemble(flavor, common::ensemble_options(flavor));
    let mut seen = Vec::new();
    for i in 0..3 {
        let zk = connect(&e.addr(i).to_string()).await;
        let (data, stat) = zk.get_config().await.unwrap();
        let (servers, version) = parse_config(&data);
        assert_eq!(servers.len(), 3, "{flavor}: member {i}: {servers:?}");
        for (n, line) in servers.iter().enumerate() {
            assert!(
                line.starts_with(&format!("server.{}=127.0.0.1:", n + 1))
                    && line.split(';').next().unwrap().ends_with(":participant"),
                "{flavor}: member {i}: {line:?}"
            );
        }
        assert_eq!(stat.mzxid, version, "{flavor}: member {i}");
        assert_eq!(stat.version, -1, "{flavor}: member {i}");
        assert_eq!(stat.data_length as usize, data.len(), "{flavor}");
        seen.push(servers);
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{flavor}: {seen:?}");
}

// ZooKeeper Administrator's Guide, "reconfigEnabled": off by default, and a
// reconfig then fails with ReconfigDisabled.
async fn reconfig_is_refused_while_disabled(flavor: Flavor) {
    let e = ensemble(flavor, common::ensemble_options(flavor));
    let zk = connect(&e.addr(0).to_string()).await;
    let err = zk
        .update_ensemble(
            EnsembleUpdate::Incremental {
                joinings: [].iter().copied(),
                leavings: ["3"].iter().copied(),
            },
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err, zookeeper_client::Error::ReconfigDisabled, "{flavor}");
}

/// `super:test`, as the other tests' super user.
const SUPER_DIGEST: &str = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";

/// An ensemble with reconfiguration on and a super user.
fn reconfigurable(flavor: Flavor) -> ServerOptions {
    let o = common::ensemble_options(flavor).cfg("reconfigEnabled=true");
    match flavor {
        Flavor::Wazoo => o.cfg(format!(
            "DigestAuthenticationProvider.superDigest={SUPER_DIGEST}"
        )),
        Flavor::Zookeeper => o.arg(format!(
            "-Dzookeeper.DigestAuthenticationProvider.superDigest={SUPER_DIGEST}"
        )),
    }
}

fn id_of(member: usize) -> String {
    (member + 1).to_string()
}

/// Two clients writing under /load through `hosts`, once 50 writes are
/// acknowledged.
async fn writing_to(hosts: &str) -> common::Writers {
    common::create_persistent(hosts, "/load").await;
    let writers = common::Writers::start(hosts, "/load", "", 2, 100_000, false);
    writers
        .wait_for_more(50, "writes before the reconfig")
        .await;
    writers
}

async fn remove(
    zk: &zookeeper_client::Client,
    ids: &str,
    version: Option<i64>,
) -> Result<(Vec<u8>, zookeeper_client::Stat), zookeeper_client::Error> {
    zk.update_ensemble(
        EnsembleUpdate::Incremental {
            joinings: [].iter().copied(),
            leavings: [ids].iter().copied(),
        },
        version,
    )
    .await
}

// ZooKeeper Dynamic Reconfiguration, "Incremental mode" and "Conditional
// reconfig", and the Administrator's Guide on reconfigEnabled (only the
// super user may write /zookeeper/config): a follower is removed while
// clients write; the new configuration, whose version is the reconfig's
// zxid, is on every remaining member, and writes go on under it.
async fn a_participant_is_removed_while_clients_write(flavor: Flavor) {
    let e = ensemble(flavor, reconfigurable(flavor));
    let leader = e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let gone = (0..3).find(|&i| i != leader).unwrap();
    let stay: Vec<usize> = (0..3).filter(|&i| i != gone).collect();
    let hosts = stay
        .iter()
        .map(|&i| e.addr(i).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let writers = writing_to(&hosts).await;

    let zk = connect(&e.addr(stay[1]).to_string()).await;
    let (before, _) = zk.get_config().await.unwrap();
    let (_, version) = parse_config(&before);
    let id = (gone + 1).to_string();
    assert_eq!(
        remove(&zk, &id, None).await.unwrap_err(),
        zookeeper_client::Error::NoAuth,
        "{flavor}: only the super user reconfigures"
    );
    zk.auth("digest", b"super:test").await.unwrap();
    assert_eq!(
        remove(&zk, &id, Some(version + 1)).await.unwrap_err(),
        zookeeper_client::Error::BadVersion,
        "{flavor}: a stale version is refused"
    );
    let (data, stat) = remove(&zk, &id, Some(version)).await.unwrap();
    let (servers, new_version) = parse_config(&data);
    assert_eq!(servers.len(), 2, "{flavor}: {servers:?}");
    assert!(
        servers
            .iter()
            .all(|l| !l.starts_with(&format!("server.{id}="))),
        "{flavor}: {servers:?}"
    );
    assert_eq!(
        stat.mzxid, new_version,
        "{flavor}: the version is the reconfig's zxid"
    );
    assert!(new_version > version, "{flavor}");

    writers.wait_for_more(50, "writes after the reconfig").await;
    let acked = writers.finish().await;
    for &i in &stay {
        let zk = connect(&e.addr(i).to_string()).await;
        zk.sync("/").await.unwrap();
        let (d, _) = zk.get_config().await.unwrap();
        assert_eq!(d, data, "{flavor}: member {i} serves the new configuration");
        let last = acked.last().unwrap();
        assert!(
            zk.check_stat(last).await.unwrap().is_some(),
            "{flavor}: member {i} has {last}"
        );
    }
    // The removed member is still up (it serves no quorum any more).
    assert_eq!(
        wazoo_testkit::four_letter_word(e.addr(gone), "ruok")
            .ok()
            .as_deref(),
        Some("imok"),
        "{flavor}: the removed member keeps running:\n{}",
        e.log_tail(gone, 30)
    );
    // ZooKeeper's PrepRequestProcessor: while standaloneEnabled is true
    // (the default), a configuration keeps two participants at least.
    let err = remove(&zk, &id_of(stay[0]), None).await.unwrap_err();
    assert!(
        matches!(err, zookeeper_client::Error::BadArguments(_)),
        "{flavor}: {err:?}"
    );
}

/// A member started on its own, with a zoo.cfg that lists the current
/// members and itself (ZooKeeper Dynamic Reconfiguration, "Adding servers"),
/// killed when dropped.
struct Joiner {
    child: std::process::Child,
    client_port: u16,
    /// The entry a `reconfig -add` names it by.
    entry: String,
    dir: tempfile::TempDir,
}

impl Drop for Joiner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Joiner {
    /// `role`: `participant` or `observer`.
    fn start(flavor: Flavor, id: u64, role: &str, current: &[String]) -> Joiner {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("myid"), format!("{id}\n")).unwrap();
        let client_port = wazoo_testkit::free_port();
        let (quorum, election) = (wazoo_testkit::free_port(), wazoo_testkit::free_port());
        let entry =
            format!("server.{id}=127.0.0.1:{quorum}:{election}:{role};127.0.0.1:{client_port}");
        let mut cfg = format!(
            "tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort={client_port}\n\
             clientPortAddress=127.0.0.1\nadmin.enableServer=false\nreconfigEnabled=true\n4lw.commands.whitelist=*\n",
            data.display()
        );
        for line in current.iter().chain([&entry]) {
            cfg.push_str(line);
            cfg.push('\n');
        }
        let cfg_path = dir.path().join("zoo.cfg");
        let log = std::fs::File::create(dir.path().join("joiner.log")).unwrap();
        let mut cmd = match flavor {
            Flavor::Wazoo => {
                cfg.push_str("wazoo.recipes.builtin=false\n");
                let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_wazoo"));
                c.args(["serve", "--config"]).arg(&cfg_path);
                c.env("RUST_LOG", "info");
                c
            }
            Flavor::Zookeeper => {
                let mut cp = vec![dir.path().to_path_buf()];
                cp.extend(wazoo_testkit::zookeeper_classpath().unwrap());
                let mut c = std::process::Command::new("java");
                c.arg("-Xmx256m")
                    .arg("-Dzookeeper.admin.enableServer=false")
                    .arg("-cp")
                    .arg(std::env::join_paths(cp).unwrap())
                    .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
                    .arg(&cfg_path);
                c
            }
        };
        std::fs::write(&cfg_path, cfg).unwrap();
        let child = cmd
            .current_dir(dir.path())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        Joiner {
            child,
            client_port,
            entry,
            dir,
        }
    }

    fn addr(&self) -> std::net::SocketAddr {
        wazoo_testkit::loopback(self.client_port)
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("joiner.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

// ZooKeeper Dynamic Reconfiguration, "Incremental mode" ("Adding servers"):
// a member started with the current members and itself in its
// configuration is added with `reconfig -add` while clients write; it then
// follows, serves the new configuration and every acknowledged write, and
// the ensemble commits with it.
async fn a_running_participant_is_added_while_clients_write(flavor: Flavor) {
    let e = ensemble(flavor, reconfigurable(flavor));
    e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let hosts = e.connect_string();
    let writers = writing_to(&hosts).await;

    let zk = connect(&e.addr(0).to_string()).await;
    zk.auth("digest", b"super:test").await.unwrap();
    let (before, _) = zk.get_config().await.unwrap();
    let (current, version) = parse_config(&before);
    // A config watch on another member fires when the reconfig commits
    // (ZooKeeper's reconfig is a setData of /zookeeper/config).
    let watching = connect(&e.addr(1).to_string()).await;
    let (_, _, watch) = watching.get_and_watch_config().await.unwrap();
    let joiner = Joiner::start(flavor, 4, "participant", &current);
    // ZooKeeper's joiner syncs as a non-voting follower first; give it the
    // time to start (the reconfig does not depend on it: the three members
    // are a quorum of the four).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (data, stat) = zk
        .update_ensemble(
            EnsembleUpdate::Incremental {
                joinings: [joiner.entry.as_str()].iter().copied(),
                leavings: [].iter().copied(),
            },
            Some(version),
        )
        .await
        .unwrap_or_else(|err| panic!("{flavor}: {err:?}\n{}", joiner.log_tail()));
    let (servers, new_version) = parse_config(&data);
    assert_eq!(servers.len(), 4, "{flavor}: {servers:?}");
    assert!(servers.contains(&joiner.entry), "{flavor}: {servers:?}");
    assert_eq!(stat.mzxid, new_version, "{flavor}");
    let event = common::within("the config watch", watch.changed()).await;
    assert_eq!(
        event.event_type,
        zookeeper_client::EventType::NodeDataChanged,
        "{flavor}"
    );
    assert_eq!(event.path, "/zookeeper/config", "{flavor}");

    writers.wait_for_more(50, "writes after the reconfig").await;
    let acked = writers.finish().await;
    let last = acked.last().unwrap().clone();
    // The joiner follows and has every acknowledged write (bounded wait:
    // it may still be electing or syncing).
    let addr = joiner.addr();
    wait_mode(addr, "follower", || {
        format!("{flavor}: the joiner\n{}", joiner.log_tail())
    })
    .await;
    let j = connect(&addr.to_string()).await;
    j.sync("/").await.unwrap();
    assert_eq!(j.get_config().await.unwrap().0, data, "{flavor}");
    assert!(
        j.check_stat(&last).await.unwrap().is_some(),
        "{flavor}: {last}"
    );
    // The joiner's writes commit through the ensemble of four.
    j.create(
        "/from-joiner",
        b"",
        &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
    )
    .await
    .unwrap();
    let zk0 = connect(&e.addr(0).to_string()).await;
    zk0.sync("/").await.unwrap();
    assert!(
        zk0.check_stat("/from-joiner").await.unwrap().is_some(),
        "{flavor}"
    );
}

/// Runs `zkCli.sh -server ADDR ARGS...` (one command) or `wazoo cli -server
/// ADDR ARGS...`: (exit code, stdout without zkCli's connection banner).
fn shell(flavor_of_cli: &str, addr: &str, args: &[&str]) -> (i32, String) {
    let mut cmd = match flavor_of_cli {
        "zkCli" => std::process::Command::new("/usr/share/zookeeper/bin/zkCli.sh"),
        _ => {
            let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_wazoo"));
            c.arg("cli");
            c
        }
    };
    let log_dir = tempfile::tempdir().unwrap();
    let child = cmd
        .arg("-server")
        .arg(addr)
        .args(args)
        .env("ZOO_LOG_DIR", log_dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
            panic!("{flavor_of_cli} {args:?} did not finish within 60 s");
        }
    };
    let mut stdout = wazoo_testkit::zkcli_stdout(&String::from_utf8_lossy(&out.stdout));
    let code = out.status.code().unwrap_or(-1);
    if code != 0 {
        let stderr = String::from_utf8_lossy(&out.stderr);
        for l in stderr
            .lines()
            .filter(|l| !l.starts_with("SLF4J:") && !l.starts_with("log4j:"))
        {
            stdout.push_str(l);
            stdout.push('\n');
        }
    }
    (code, stdout)
}

// ZooKeeper CLI, "config" and "reconfig", and ZooKeeper Dynamic
// Reconfiguration, "Incremental mode": zkCli and `wazoo cli` print the
// configuration alike, and remove both followers one after the other; the
// leader alone is then a quorum, and commits with both followers stopped
// (it could not under the old configuration).
async fn zkcli_and_wazoo_cli_shrink_the_ensemble_to_its_leader(flavor: Flavor) {
    // standaloneEnabled=false: ZooKeeper lets a configuration shrink to
    // one participant only then.
    let mut e = ensemble(
        flavor,
        reconfigurable(flavor).cfg("standaloneEnabled=false"),
    );
    let leader = e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let at = e.addr(leader).to_string();
    // The super user opens /zookeeper/config to everyone, so that one-shot
    // shell commands (which cannot addauth first) may reconfigure.
    let admin = connect(&at).await;
    admin.auth("digest", b"super:test").await.unwrap();
    admin
        .set_acl(
            "/zookeeper/config",
            zookeeper_client::Acls::anyone_all().as_ref(),
            None,
        )
        .await
        .unwrap();

    let (code, zk_config) = shell("zkCli", &at, &["config"]);
    assert_eq!(code, 0, "{flavor}: {zk_config}");
    let (code, our_config) = shell("wazoo", &at, &["config"]);
    assert_eq!(code, 0, "{flavor}: {our_config}");
    assert_eq!(our_config, zk_config, "{flavor}: wazoo cli vs zkCli");
    assert_eq!(
        zk_config.matches("server.").count(),
        3,
        "{flavor}: {zk_config}"
    );

    let first = (followers[0] + 1).to_string();
    let (code, out) = shell("zkCli", &at, &["reconfig", "-remove", &first]);
    assert_eq!(code, 0, "{flavor}: {out}");
    assert!(
        out.starts_with("Committed new configuration:\n"),
        "{flavor}: {out}"
    );
    assert_eq!(out.matches("server.").count(), 2, "{flavor}: {out}");

    let second = (followers[1] + 1).to_string();
    let (code, out) = shell("wazoo", &at, &["reconfig", "-remove", &second]);
    assert_eq!(code, 0, "{flavor}: {out}");
    assert!(
        out.starts_with("Committed new configuration:\n"),
        "{flavor}: {out}"
    );
    assert_eq!(out.matches("server.").count(), 1, "{flavor}: {out}");
    assert!(
        out.contains(&format!("server.{}=", leader + 1)),
        "{flavor}: {out}"
    );

    for &f in &followers {
        e.kill(f);
    }
    let zk = connect(&at).await;
    let opts =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    common::within(
        "a write with both followers gone",
        zk.create("/alone", b"", &opts),
    )
    .await
    .unwrap();
    let (code, after) = shell("zkCli", &at, &["config"]);
    assert_eq!(code, 0, "{flavor}");
    assert_eq!(shell("wazoo", &at, &["config"]).1, after, "{flavor}");
    assert_eq!(after.matches("server.").count(), 1, "{flavor}: {after}");
}

/// Waits (bounded) until member `addr` reports `mode` in `srvr`.
/// Waits (30 s at most) until the member at `addr` reports `mode`; `what`
/// names it in the failure.
async fn wait_mode(addr: std::net::SocketAddr, mode: &str, what: impl Fn() -> String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let now = wazoo_testkit::four_letter_word(addr, "srvr")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Mode: ").map(str::to_string))
            });
        if now.as_deref() == Some(mode) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{}: mode {now:?}, expected {mode}",
            what()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ZooKeeper Dynamic Reconfiguration, "Removing servers" (the leader may be
// removed) and "Changes to Configuration Format" (a member restarts with the
// last committed membership): the leader is removed while clients write,
// the two others elect a leader and go on, and a restarted member still
// serves the new membership.
async fn the_leader_is_removed_and_the_membership_survives_a_restart(flavor: Flavor) {
    let mut e = ensemble(flavor, reconfigurable(flavor));
    let leader = e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let stay: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let hosts = stay
        .iter()
        .map(|&i| e.addr(i).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let writers = writing_to(&hosts).await;

    let zk = connect(&e.addr(stay[0]).to_string()).await;
    zk.auth("digest", b"super:test").await.unwrap();
    // ZooKeeper's followers restart their peers when the leader leaves, so
    // the answer may be lost (ConnectionLoss); the change is committed
    // either way.
    match remove(&zk, &id_of(leader), None).await {
        Ok((data, _)) => assert_eq!(parse_config(&data).0.len(), 2, "{flavor}"),
        Err(zookeeper_client::Error::ConnectionLoss) => {}
        Err(err) => panic!("{flavor}: {err:?}"),
    }
    writers
        .wait_for_more(50, "writes under a leader of the new membership")
        .await;
    let zk = connect(&e.addr(stay[0]).to_string()).await;
    zk.sync("/").await.unwrap();
    let (data, _) = zk.get_config().await.unwrap();
    let (servers, _) = parse_config(&data);
    assert_eq!(servers.len(), 2, "{flavor}: {servers:?}");
    e.kill(leader);
    let restarted = stay[1];
    e.restart(restarted).unwrap();
    writers.wait_for_more(20, "writes after the restart").await;
    let conf = wazoo_testkit::four_letter_word(e.addr(restarted), "conf").unwrap();
    assert_eq!(
        conf.lines().filter(|l| l.starts_with("server.")).count(),
        2,
        "{flavor}: the restarted member runs with the new membership:\n{conf}"
    );
    assert!(
        conf.contains("\nmembership: \nserver.") && conf.contains("\nversion="),
        "{flavor}: conf prints the membership as ZooKeeper does:\n{conf}"
    );
    let acked = writers.finish().await;
    for &i in &stay {
        let zk = connect(&e.addr(i).to_string()).await;
        zk.sync("/").await.unwrap();
        assert_eq!(
            zk.get_config().await.unwrap().0,
            data,
            "{flavor}: member {i} (restarted: {})",
            i == restarted
        );
        for p in acked.iter().rev().take(20) {
            assert!(
                zk.check_stat(p).await.unwrap().is_some(),
                "{flavor}: {p} on {i}"
            );
        }
    }
}

// ZooKeeper Dynamic Reconfiguration, "Non-incremental mode" and "Changing
// an observer into a follower" (and back): the whole membership is given,
// with one follower as an observer; it then observes, and its writes still
// commit.
async fn a_new_membership_makes_a_follower_an_observer(flavor: Flavor) {
    let e = ensemble(flavor, reconfigurable(flavor));
    let leader = e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let demoted = (0..3).find(|&i| i != leader).unwrap();
    let zk = connect(&e.addr(leader).to_string()).await;
    zk.auth("digest", b"super:test").await.unwrap();
    let (before, _) = zk.get_config().await.unwrap();
    let (current, _) = parse_config(&before);
    let prefix = format!("server.{}=", id_of(demoted));
    let members: Vec<String> = current
        .iter()
        .map(|l| {
            if l.starts_with(&prefix) {
                l.replacen(":participant", ":observer", 1)
            } else {
                l.clone()
            }
        })
        .collect();
    let (data, _) = zk
        .update_ensemble(
            EnsembleUpdate::New {
                ensemble: members.iter().map(String::as_str),
            },
            None,
        )
        .await
        .unwrap();
    let (servers, _) = parse_config(&data);
    let line = servers.iter().find(|l| l.starts_with(&prefix)).unwrap();
    assert!(line.contains(":observer"), "{flavor}: {servers:?}");
    wait_mode(e.addr(demoted), "observer", || {
        format!("{flavor}: member {demoted}")
    })
    .await;
    let o = connect(&e.addr(demoted).to_string()).await;
    let opts =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    common::within(
        "a write through the observer",
        o.create("/via-observer", b"", &opts),
    )
    .await
    .unwrap();
    zk.sync("/").await.unwrap();
    assert!(
        zk.check_stat("/via-observer").await.unwrap().is_some(),
        "{flavor}"
    );
    assert_eq!(o.get_config().await.unwrap().0, data, "{flavor}");
}

// ZooKeeper Dynamic Reconfiguration, "Incremental mode" (a joiner gives
// its client port) and ZooKeeper's Leader.isQuorumSynced (a quorum of the
// new membership must be in sync): refusals that zkCli and `wazoo cli`
// print alike.
async fn refused_reconfigs_print_alike_in_both_shells(flavor: Flavor) {
    let mut e = ensemble(flavor, reconfigurable(flavor));
    let leader = e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let at = e.addr(leader).to_string();
    let admin = connect(&at).await;
    admin.auth("digest", b"super:test").await.unwrap();
    admin
        .set_acl(
            "/zookeeper/config",
            zookeeper_client::Acls::anyone_all().as_ref(),
            None,
        )
        .await
        .unwrap();
    let ports = || {
        (
            wazoo_testkit::free_port(),
            wazoo_testkit::free_port(),
            wazoo_testkit::free_port(),
        )
    };
    let both = |args: &[&str]| {
        let (zk_code, zk_out) = shell("zkCli", &at, args);
        let (our_code, our_out) = shell("wazoo", &at, args);
        assert_eq!(our_out, zk_out, "{flavor}: {args:?}: wazoo cli vs zkCli");
        assert_ne!(zk_code, 0, "{flavor}: {args:?}");
        assert_ne!(our_code, 0, "{flavor}: {args:?}");
        zk_out
    };
    let (q, el, _) = ports();
    let no_client = format!("server.9=127.0.0.1:{q}:{el}");
    let out = both(&["reconfig", "-add", &no_client]);
    assert!(out.contains("Argument"), "{flavor}: {out}");
    let out = both(&["reconfig", "-remove", "1", "-v", "ffffffffff"]);
    assert!(out.contains("version"), "{flavor}: {out}");
    // With one follower down, the leader and the other follower are not a
    // majority of four.
    let follower = (0..3).find(|&i| i != leader).unwrap();
    e.kill(follower);
    let (q, el, c) = ports();
    let joiner = format!("server.9=127.0.0.1:{q}:{el}:participant;{c}");
    let out = both(&["reconfig", "-add", &joiner]);
    assert!(out.contains("No quorum of new config"), "{flavor}: {out}");
}

// ZooKeeper Dynamic Reconfiguration, "Incremental mode" with an observer
// (ZooKeeper Observers Guide): a running observer is added; it observes,
// serves reads of every write, forwards its writes, and does not count in
// the quorum (the two participants left commit with one of three down).
async fn a_running_observer_is_added(flavor: Flavor) {
    let mut e = ensemble(flavor, reconfigurable(flavor));
    let leader = e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let zk = connect(&e.addr(leader).to_string()).await;
    zk.auth("digest", b"super:test").await.unwrap();
    let (before, _) = zk.get_config().await.unwrap();
    let (current, _) = parse_config(&before);
    let joiner = Joiner::start(flavor, 5, "observer", &current);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (data, _) = zk
        .update_ensemble(
            EnsembleUpdate::Incremental {
                joinings: [joiner.entry.as_str()].iter().copied(),
                leavings: [].iter().copied(),
            },
            None,
        )
        .await
        .unwrap_or_else(|err| panic!("{flavor}: {err:?}\n{}", joiner.log_tail()));
    let (servers, _) = parse_config(&data);
    assert_eq!(servers.len(), 4, "{flavor}: {servers:?}");
    wait_mode(joiner.addr(), "observer", || {
        format!("{flavor}: the joiner\n{}", joiner.log_tail())
    })
    .await;
    // One participant down: the other two are still a majority of three.
    let follower = (0..3).find(|&i| i != leader).unwrap();
    e.kill(follower);
    let o = connect(&joiner.addr().to_string()).await;
    let opts =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    common::within(
        "a write through the observer",
        o.create("/via-observer", b"", &opts),
    )
    .await
    .unwrap();
    assert_eq!(o.get_config().await.unwrap().0, data, "{flavor}");
}

// ZooKeeper Dynamic Reconfiguration, "Security" and "Incremental mode"
// ("Adding servers"), in the order of ZooKeeper 3.8's PrepRequestProcessor:
// a standalone server answers Unimplemented; on an ensemble the version,
// the new membership's form, its two participants and a synced quorum of
// it are checked before WRITE on /zookeeper/config, so a client that is
// not the super user hears those refusals first, and NoAuth for a
// well-formed request (a client library's test adds
// `server.999=0.0.0.0:1234:2345:observer;3456` and expects NoAuth).
async fn reconfig_refusals_come_in_zookeepers_order(flavor: Flavor) {
    use zookeeper_client::Error;
    let standalone = flavor
        .start_with(common::options(flavor).cfg("reconfigEnabled=true"))
        .unwrap_or_else(|e| panic!("cannot start a {flavor} server: {e:#}"));
    let zk = connect(&standalone.connect_string()).await;
    assert_eq!(
        remove(&zk, "1", None).await.unwrap_err(),
        Error::Unimplemented,
        "{flavor}: standalone"
    );
    drop(standalone);

    let e = ensemble(flavor, reconfigurable(flavor));
    let leader = e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let zk = connect(&e.addr(leader).to_string()).await;
    let (config, _) = zk.get_config().await.unwrap();
    let (members, version) = parse_config(&config);
    let join = |servers: &[String]| {
        let zk = &zk;
        let servers = servers.to_vec();
        async move {
            let joinings: Vec<&str> = servers.iter().map(String::as_str).collect();
            zk.update_ensemble(
                EnsembleUpdate::Incremental {
                    joinings: joinings.iter().copied(),
                    leavings: [].iter().copied(),
                },
                None,
            )
            .await
            .unwrap_err()
        }
    };
    let port = wazoo_testkit::free_port;
    // The version first.
    assert_eq!(
        remove(&zk, &id_of(follower), Some(version + 1))
            .await
            .unwrap_err(),
        Error::BadVersion,
        "{flavor}"
    );
    // The new membership's form: a joiner gives three ports.
    let no_client = format!("server.9=127.0.0.1:{}:{}", port(), port());
    let err = join(&[no_client]).await;
    assert!(matches!(err, Error::BadArguments(_)), "{flavor}: {err:?}");
    // Two participants at least (standaloneEnabled is true).
    let others: Vec<String> = (0..3).filter(|&i| i != leader).map(id_of).collect();
    let err = remove(&zk, &others.join(","), None).await.unwrap_err();
    assert!(matches!(err, Error::BadArguments(_)), "{flavor}: {err:?}");
    // A synced quorum of the new membership: three joiners that do not
    // run make the three members half of six.
    let absent: Vec<String> = (7..10)
        .map(|id| {
            format!(
                "server.{id}=127.0.0.1:{}:{}:participant;{}",
                port(),
                port(),
                port()
            )
        })
        .collect();
    assert_eq!(
        join(&absent).await,
        Error::UnexpectedErrorCode(-13),
        "{flavor}: NewConfigNoQuorum"
    );
    // Then the ACL: a well-formed request is NoAuth.
    assert_eq!(
        join(&["server.999=0.0.0.0:1234:2345:observer;3456".to_string()]).await,
        Error::NoAuth,
        "{flavor}: an observer joins"
    );
    assert_eq!(
        remove(&zk, &id_of(follower), Some(version))
            .await
            .unwrap_err(),
        Error::NoAuth,
        "{flavor}: a follower leaves"
    );
    let err = zk
        .update_ensemble(
            EnsembleUpdate::New {
                ensemble: members.iter().map(String::as_str),
            },
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err, Error::NoAuth, "{flavor}: the same membership");
    // Nothing changed.
    assert_eq!(zk.get_config().await.unwrap().0, config, "{flavor}");
}

on_both! {
    every_member_serves_the_configuration,
    reconfig_is_refused_while_disabled,
    a_participant_is_removed_while_clients_write,
    a_running_participant_is_added_while_clients_write,
    zkcli_and_wazoo_cli_shrink_the_ensemble_to_its_leader,
    the_leader_is_removed_and_the_membership_survives_a_restart,
    a_new_membership_makes_a_follower_an_observer,
    refused_reconfigs_print_alike_in_both_shells,
    a_running_observer_is_added,
    curator_removes_a_follower,
    reconfig_refusals_come_in_zookeepers_order,
}

/// Compiles and runs `tests/java/CuratorReconfig.java`: its `name: result`
/// lines.
fn curator_reconfig(addr: &str, leaving: &str) -> Vec<String> {
    let classes = tempfile::tempdir().unwrap();
    common::run_java(
        classes.path(),
        "CuratorReconfig",
        common::CURATOR_CLASSPATH,
        &[addr, leaving],
    )
}

// ZooKeeper Dynamic Reconfiguration, "Incremental mode" and "Conditional
// reconfig", through Apache Curator's reconfig API: a stale expected
// version is BADVERSION, a follower is removed, the new configuration's
// version is its mzxid, and writes go on.
async fn curator_removes_a_follower(flavor: Flavor) {
    let e = ensemble(flavor, reconfigurable(flavor));
    let leader = e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let gone = (0..3).find(|&i| i != leader).unwrap();
    let addr = e.addr(leader).to_string();
    let lines = tokio::task::spawn_blocking(move || curator_reconfig(&addr, &id_of(gone)))
        .await
        .unwrap();
    assert_eq!(
        lines,
        [
            "servers before: 3",
            "version is mzxid: true",
            "stale version: BADVERSION",
            "servers after: 2",
            "left: true",
            "new version is its mzxid: true",
            "getConfig agrees: true",
            "write after: x",
        ],
        "{flavor}"
    );
}
