//! `wazoo cli -c COMMAND` against a real server: zkCli's commands and output
//! formats, exit codes and error messages.

mod common;

use std::time::Duration;

use common::{connect, delete_all, fresh_root, opts, server, within};
use wazoo_client::shell::{run_command, Notifier, Outcome, Shell, ShellOptions};
use wazoo_client::{Acl, CreateMode};
use wazoo_testkit::Flavor;

flavored!(
    create_get_set_ls_print_like_zkcli,
    stat_and_get_s_print_zkcli_stat_lines,
    failures_exit_non_zero_with_a_clear_message,
    delete_and_deleteall_remove_nodes,
    acl_commands_round_trip,
    create_flags_choose_the_mode,
    session_commands_report_the_session,
    watch_waits_for_one_event_and_prints_it,
    ls_r_prints_each_nodes_children_before_theirs_as_zkcli,
    quota_commands_print_as_zkcli,
    config_and_reconfig_answer_as_zkcli,
    completion_reads_children_from_the_server,
    reconfig_refusals_print_zookeepers_messages,
    an_interrupt_stops_the_running_command_not_the_shell,
    create_without_data_makes_null_data_printed_as_null,
);

/// Runs `wazoo cli --server cs -c cmd`: (exit code, stdout, stderr).
async fn cli(cs: &str, cmd: &str) -> (i32, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = within(
        &format!("cli -c {cmd:?}"),
        run_command(cs, cmd, ShellOptions::default(), &mut out, &mut err),
    )
    .await
    .unwrap();
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

async fn ok(cs: &str, cmd: &str) -> String {
    let (code, out, err) = cli(cs, cmd).await;
    assert_eq!(code, 0, "{cmd:?} failed: {err}");
    assert_eq!(err, "", "{cmd:?}");
    out
}

async fn create_get_set_ls_print_like_zkcli(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_basic").await;
    assert_eq!(ok(&cs, "create /a hello").await, "Created /a\n");
    assert_eq!(ok(&cs, "create /a/b").await, "Created /a/b\n");
    assert_eq!(ok(&cs, r#"create /c "two words""#).await, "Created /c\n");
    assert_eq!(ok(&cs, "get /a").await, "hello\n");
    assert_eq!(ok(&cs, "get /c").await, "two words\n");
    assert_eq!(ok(&cs, "set /a world").await, "");
    assert_eq!(ok(&cs, "get /a").await, "world\n");
    assert_eq!(ok(&cs, "ls /").await, "[a, c]\n");
    assert_eq!(ok(&cs, "ls /a/b").await, "[]\n");
    // zkCli's order: a node's children before their own children.
    assert_eq!(ok(&cs, "ls -R /").await, "/\n/a\n/c\n/a/b\n");
    assert_eq!(ok(&cs, "getAllChildrenNumber /").await, "3\n");
    assert_eq!(ok(&cs, "sync /").await, "Sync is OK\n");
}

async fn stat_and_get_s_print_zkcli_stat_lines(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_stat").await;
    ok(&cs, "create /n 12345").await;
    ok(&cs, "set /n abc").await;
    let out = ok(&cs, "stat /n").await;
    let keys: Vec<&str> = out
        .lines()
        .map(|l| l.split(" = ").next().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "cZxid",
            "ctime",
            "mZxid",
            "mtime",
            "pZxid",
            "cversion",
            "dataVersion",
            "aclVersion",
            "ephemeralOwner",
            "dataLength",
            "numChildren"
        ]
    );
    assert!(
        out.lines().next().unwrap().starts_with("cZxid = 0x"),
        "{out}"
    );
    assert!(out.contains("\ndataVersion = 1\n"), "{out}");
    assert!(out.contains("\ndataLength = 3\n"), "{out}");
    assert!(out.contains("\nephemeralOwner = 0x0\n"), "{out}");
    let ctime = out.lines().nth(1).unwrap();
    // Java's Date.toString() in the local zone: "Sat Nov 21 22:35:04 UTC 2026".
    let parts: Vec<&str> = ctime["ctime = ".len()..].split(' ').collect();
    assert_eq!(parts.len(), 6, "{ctime}");
    let zone = wazoo_client::shell::format::java_date(0);
    assert_eq!(parts[4], zone.split(' ').nth(4).unwrap(), "{ctime}");

    let get_s = ok(&cs, "get -s /n").await;
    assert!(get_s.starts_with("abc\ncZxid = 0x"), "{get_s}");
    let ls_s = ok(&cs, "ls -s /n").await;
    assert!(ls_s.starts_with("[]\ncZxid = 0x"), "{ls_s}");
    let set_s = ok(&cs, "set -s /n xy").await;
    assert!(set_s.contains("dataVersion = 2\n"), "{set_s}");
}

async fn failures_exit_non_zero_with_a_clear_message(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_errors").await;
    let (code, out, err) = cli(&cs, "get /missing").await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(err, "Node does not exist: /missing\n");
    let (code, _, err) = cli(&cs, "stat /missing").await;
    assert_eq!((code, err.as_str()), (1, "Node does not exist: /missing\n"));

    ok(&cs, "create /x").await;
    let (code, _, err) = cli(&cs, "create /x").await;
    assert_eq!((code, err.as_str()), (1, "Node already exists: /x\n"));
    let (code, _, err) = cli(&cs, "set -v 7 /x data").await;
    assert_eq!((code, err.as_str()), (1, "version No is not valid : /x\n"));
    ok(&cs, "create /x/y").await;
    let (code, _, err) = cli(&cs, "delete /x").await;
    assert_eq!((code, err.as_str()), (1, "Node not empty: /x\n"));

    let (code, _, err) = cli(&cs, "frobnicate /x").await;
    assert_eq!(code, 2);
    assert!(err.contains("unknown command: frobnicate"), "{err}");
    let (code, _, err) = cli(&cs, "get").await;
    assert_eq!((code, err.as_str()), (2, "usage: get [-s] [-w] path\n"));
    let (code, _, err) = cli(&cs, "get noslash").await;
    assert_eq!(code, 1);
    assert!(err.contains("Path must start with / character"), "{err}");
}

async fn delete_and_deleteall_remove_nodes(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_delete").await;
    for p in ["/t", "/t/a", "/t/a/b", "/t/c", "/u"] {
        ok(&cs, &format!("create {p}")).await;
    }
    ok(&cs, "delete -v 0 /u").await;
    ok(&cs, "deleteall /t").await;
    assert_eq!(ok(&cs, "ls /").await, "[]\n");
}

async fn acl_commands_round_trip(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_acl").await;
    ok(&cs, "create /open").await;
    assert_eq!(ok(&cs, "getAcl /open").await, "'world,'anyone\n: cdrwa\n");
    ok(&cs, "setAcl /open world:anyone:r").await;
    assert_eq!(ok(&cs, "getAcl /open").await, "'world,'anyone\n: r\n");
    let (code, _, err) = cli(&cs, "set /open x").await;
    assert_eq!(
        (code, err.as_str()),
        (1, "Insufficient permission : /open\n")
    );
    let out = ok(&cs, "getAcl -s /open").await;
    assert!(out.contains("aclVersion = 1\n"), "{out}");

    // A digest ACL in the create command, then addauth in the same session
    // is what it takes (zkCli's ACL syntax).
    let id = wazoo_client::digest_id("carol", "pw");
    ok(&cs, &format!("create /guarded data digest:{id}:cdrwa")).await;
    let (code, _, err) = cli(&cs, "get /guarded").await;
    assert_eq!(
        (code, err.as_str()),
        (1, "Insufficient permission : /guarded\n")
    );
    // One -c command per session: check through a client with the auth.
    let (zk, _e) = connect(&cs, opts()).await;
    zk.add_auth("digest", b"carol:pw").await.unwrap();
    assert_eq!(zk.get_data("/guarded").await.unwrap().0, b"data");
    zk.close().await.unwrap();
    let (code, _, err) = cli(&cs, "addauth nosuchscheme x").await;
    assert_eq!(code, 1, "{err}");
}

async fn create_flags_choose_the_mode(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_modes").await;
    let out = ok(&cs, "create -s /seq- x").await;
    assert_eq!(out, "Created /seq-0000000000\n");
    // The ephemeral goes with the one-command session.
    ok(&cs, "create -e /eph").await;
    assert_eq!(ok(&cs, "ls /").await, "[seq-0000000000]\n");
    ok(&cs, "create -c /box").await;
    ok(&cs, "create -t 100000 /ttl").await;
    // Servers show 0 as the ephemeral owner of containers and TTL nodes:
    // the nodes exist, persistent-looking.
    let (zk, _e) = connect(&cs, opts()).await;
    for p in ["/ttl", "/box"] {
        let stat = zk.exists(p).await.unwrap().unwrap();
        assert_eq!(stat.ephemeral_owner, 0, "{p}: {stat:?}");
    }
    zk.close().await.unwrap();
    let (code, _, err) = cli(&cs, "create -c -e /bad").await;
    assert_eq!(code, 1);
    assert!(err.contains("Containers cannot be ephemeral"), "{err}");
    let (code, _, err) = cli(&cs, "create -t 10 -e /bad").await;
    assert_eq!(
        (code, err.as_str()),
        (1, "TTLs cannot be used with Ephemeral znodes\n")
    );
}

async fn session_commands_report_the_session(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_session").await;
    assert_eq!(ok(&cs, "getEphemerals /").await, "[]\n");
    let who = ok(&cs, "whoami").await;
    assert!(who.starts_with("Auth scheme: User\nip: 127.0.0.1"), "{who}");
    let help = ok(&cs, "help").await;
    for cmd in [
        "ls [-s] [-w] [-R] path",
        "create [-s] [-e] [-c] [-t ttl] path [data] [acl]",
        "watch [-R] path",
        "call module method",
    ] {
        assert!(help.contains(cmd), "help lacks {cmd}: {help}");
    }
    assert!(help.contains("args are JSON"), "{help}");
}

async fn watch_waits_for_one_event_and_prints_it(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_watch").await;
    ok(&cs, "create /w").await;
    let watcher = {
        let cs = cs.clone();
        tokio::spawn(async move { cli(&cs, "watch /w").await })
    };
    // Change the node until the watch has seen a change (it may start
    // after the first one).
    let (zk, _e) = connect(&cs, opts()).await;
    let mut n = 0u32;
    while !watcher.is_finished() {
        n += 1;
        assert!(n < 300, "the watch never fired");
        zk.set_data("/w", &n.to_be_bytes(), None).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, out, err) = watcher.await.unwrap();
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "WatchedEvent state:SyncConnected type:NodeDataChanged path:/w\n"
    );
    zk.create("/other", b"", &Acl::open_unsafe(), CreateMode::Persistent)
        .await
        .unwrap();
    zk.close().await.unwrap();
}

#[tokio::test]
async fn unreachable_server_is_a_clear_failure() {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let options = ShellOptions {
        connect_wait: Duration::from_millis(300),
        ..ShellOptions::default()
    };
    let code = run_command("127.0.0.1:1", "ls /", options, &mut out, &mut err)
        .await
        .unwrap();
    assert_eq!(code, 1);
    let err = String::from_utf8(err).unwrap();
    assert!(err.starts_with("Unable to connect to 127.0.0.1:1"), "{err}");
}

/// Runs Apache ZooKeeper's own shell, `zkCli.sh -server cs WORDS...`, to
/// compare outputs: (exit code, stdout without the connection lines,
/// stderr without the JVM's logging noise). Bounded in time.
fn zkcli(cs: &str, cmd: &str) -> (i32, String, String) {
    const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";
    let words = wazoo_client::shell::tokenize(cmd).unwrap();
    let dir = std::env::temp_dir().join(format!("wazoo-zkcli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = std::process::Command::new(ZKCLI)
        .arg("-server")
        .arg(cs)
        .args(&words)
        .env("ZOO_LOG_DIR", &dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {ZKCLI} (Debian's zookeeper package): {e}"));
    let deadline = std::time::Instant::now() + common::WAIT;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("zkCli {cmd:?} did not finish within {:?}", common::WAIT);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = wazoo_testkit::zkcli_stdout(&String::from_utf8_lossy(&out.stdout));
    let stderr: String = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.starts_with("SLF4J:") && !l.starts_with("log4j:"))
        // Informational, printed before every listquota's answer.
        .filter(|l| !l.starts_with("absolute path is "))
        .map(|l| format!("{l}\n"))
        .collect();
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// Output of a command through this shell and through zkCli, on the same
/// server: stdout must match; both fail or both succeed; an error says
/// the same thing.
async fn same_as_zkcli(cs: &str, cmd: &str) -> String {
    let (code, out, err) = cli(cs, cmd).await;
    let (zk_code, zk_out, zk_err) = {
        let (cs, cmd) = (cs.to_string(), cmd.to_string());
        tokio::task::spawn_blocking(move || zkcli(&cs, &cmd))
            .await
            .unwrap()
    };
    assert_eq!(out, zk_out, "stdout of {cmd:?}: wazoo cli vs zkCli");
    if zk_err.is_empty() {
        assert_eq!((code, err.as_str()), (0, ""), "{cmd:?}: zkCli succeeded");
    } else {
        assert_ne!(code, 0, "{cmd:?}: zkCli failed with {zk_err}");
        assert_eq!(err, zk_err, "stderr of {cmd:?}: wazoo cli vs zkCli");
    }
    let _ = zk_code;
    out
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Data Model": a node's data
/// may be null. zkCli's `create` without data makes a node with null data
/// and `get` prints null data as `null`; this shell does both alike.
async fn create_without_data_makes_null_data_printed_as_null(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_null").await;
    ok(&cs, "create /n").await;
    assert_eq!(same_as_zkcli(&cs, "get /n").await, "null\n");
    let cs2 = cs.clone();
    tokio::task::spawn_blocking(move || zkcli(&cs2, "create /z"))
        .await
        .unwrap();
    assert_eq!(ok(&cs, "get /z").await, "null\n");
    ok(&cs, "set /n x").await;
    assert_eq!(same_as_zkcli(&cs, "get /n").await, "x\n");
    let get_s = ok(&cs, "get -s /z").await;
    assert!(get_s.starts_with("null\ncZxid = 0x"), "{get_s}");
    assert!(get_s.contains("\ndataLength = 0\n"), "{get_s}");
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Command Line Tools": `ls -R`.
async fn ls_r_prints_each_nodes_children_before_theirs_as_zkcli(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_ls_r").await;
    for p in [
        "/r", "/r/b", "/r/a", "/r/a/y", "/r/a/x", "/r/a/y/z", "/r/b/w",
    ] {
        ok(&cs, &format!("create {p}")).await;
    }
    let out = same_as_zkcli(&cs, "ls -R /r").await;
    assert_eq!(out, "/r\n/r/a\n/r/b\n/r/a/x\n/r/a/y\n/r/a/y/z\n/r/b/w\n");
    same_as_zkcli(&cs, "ls -R /r/missing").await;
}

/// ZooKeeper Administrator's Guide, "Quotas": zkCli's quota commands. The
/// quota nodes live at the real /zookeeper/quota, so no chroot here; two
/// sibling trees, one driven by each shell, must answer alike.
async fn quota_commands_print_as_zkcli(flavor: Flavor) {
    let srv = server(flavor);
    let cs = srv.addr.to_string();
    let (zk, _e) = connect(&cs, opts()).await;
    let steps = [
        "setquota -n 10 {}",
        "listquota {}",
        "setquota -b 100 {}",
        "setquota -N 20 {}",
        "listquota {}",
        "setquota -n 5 {}/x",
        "setquota -n 0 {}",
        "setquota -b x {}",
        "setquota -n 3 {}/nope",
        "delquota -n {}",
        "listquota {}",
        "delquota {}",
        "listquota {}",
        "delquota {}",
    ];
    let mut outputs = Vec::new();
    for who in ["wazoo", "zkcli"] {
        let base = format!("/cli_quota_{who}");
        delete_all(&zk, &base).await;
        let _ = run_command(
            &cs,
            &format!("delquota {base}"),
            ShellOptions::default(),
            &mut Vec::new(),
            &mut Vec::new(),
        )
        .await;
        zk.create(&base, b"", &Acl::open_unsafe(), CreateMode::Persistent)
            .await
            .unwrap();
        zk.create(
            &format!("{base}/x"),
            b"12345",
            &Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .await
        .unwrap();
        let mut mine = Vec::new();
        for step in steps {
            let cmd = step.replace("{}", &base);
            let got = if who == "wazoo" {
                let (code, out, err) = cli(&cs, &cmd).await;
                (code == 0, out, err)
            } else {
                let (c, cmd2) = (cs.clone(), cmd.clone());
                let (code, out, err) = tokio::task::spawn_blocking(move || zkcli(&c, &cmd2))
                    .await
                    .unwrap();
                (code == 0 && err.is_empty(), out, err)
            };
            mine.push((
                cmd.replace(&base, "BASE"),
                got.0,
                got.1.replace(&base, "BASE"),
                got.2.replace(&base, "BASE"),
            ));
        }
        delete_all(&zk, &base).await;
        outputs.push(mine);
    }
    for (w, z) in outputs[0].iter().zip(&outputs[1]) {
        assert_eq!(w.2, z.2, "stdout of {}: wazoo cli vs zkCli", w.0);
        assert_eq!(w.3, z.3, "stderr of {}: wazoo cli vs zkCli", w.0);
        assert_eq!(w.1, z.1, "success of {}: wazoo cli vs zkCli", w.0);
    }
    let listed: Vec<&str> = outputs[0].iter().map(|s| s.2.as_str()).collect();
    assert_eq!(listed[1], "Output quota for BASE count=10,bytes=-1=;byteHardLimit=-1;countHardLimit=-1\nOutput stat for BASE count=2,bytes=5\n");
    assert_eq!(listed[4], "Output quota for BASE count=10,bytes=100=;byteHardLimit=-1;countHardLimit=20\nOutput stat for BASE count=2,bytes=5\n");
    assert_eq!(
        outputs[0][5].3,
        "BASE/x has a parent BASE which has a quota\n"
    );
    assert_eq!(listed[13], "Quota does not exist for BASE\n");
    // zkCli's options are a group: one limit per command.
    let (code, _, err) = cli(&cs, "setquota -n 1 -b 1 /cli_quota_wazoo").await;
    assert_eq!(code, 2);
    assert!(
        err.starts_with("only one of -n, -b, -N, -B at a time"),
        "{err}"
    );
    zk.close().await.unwrap();
}

/// ZooKeeper Dynamic Reconfiguration, "Retrieving the current dynamic
/// configuration" and "Changing the membership": on a standalone server
/// with reconfiguration off, both shells get the same answers.
async fn config_and_reconfig_answer_as_zkcli(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_config").await;
    // getConfig reads /zookeeper/config whatever the chroot.
    same_as_zkcli(&cs, "config").await;
    same_as_zkcli(&cs, "config -c").await;
    same_as_zkcli(&cs, "reconfig -remove 3").await;
    same_as_zkcli(&cs, "reconfig -add server.5=127.0.0.1:1234:1235;1236").await;
    let (code, _, err) = cli(&cs, "reconfig -members server.1=a:1:2;3 -remove 2").await;
    assert_eq!(code, 2);
    assert!(
        err.starts_with("Can't use -file or -members together with -add or -remove"),
        "{err}"
    );
}

async fn completion_reads_children_from_the_server(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_complete").await;
    for p in ["/alpha", "/alps", "/beta", "/alpha/one"] {
        ok(&cs, &format!("create {p}")).await;
    }
    let (zk, _e) = connect(&cs, opts()).await;
    let complete = wazoo_client::shell::complete::complete;
    assert_eq!(
        complete(Some(&zk), "ls -s /al", 9).await,
        (6, vec!["/alpha".to_string(), "/alps".to_string()])
    );
    assert_eq!(
        complete(Some(&zk), "get /alpha/", 11).await,
        (4, vec!["/alpha/one".to_string()])
    );
    assert_eq!(complete(Some(&zk), "get /nope/", 10).await, (4, vec![]));
    assert_eq!(
        complete(Some(&zk), "setq", 4).await,
        (0, vec!["setquota".to_string()])
    );
    zk.close().await.unwrap();
}

async fn an_interrupt_stops_the_running_command_not_the_shell(flavor: Flavor) {
    let (_srv, cs) = fresh_root(flavor, "cli_interrupt").await;
    let mut shell = Shell::new(&cs, ShellOptions::default(), Notifier::silent());
    within("connect", shell.connect(&cs)).await.unwrap();
    let mut out = Vec::new();
    assert_eq!(
        within(
            "create",
            shell.execute_until("create /w", &mut out, std::future::pending())
        )
        .await,
        Outcome::Done(Ok(wazoo_client::shell::Flow::Continue))
    );
    // `watch` waits for an event that never comes, until interrupted.
    let stop = tokio::time::sleep(Duration::from_millis(300));
    assert_eq!(
        within("watch /w", shell.execute_until("watch /w", &mut out, stop)).await,
        Outcome::Interrupted
    );
    // The same session goes on.
    let mut out = Vec::new();
    let r = within(
        "ls",
        shell.execute_until("ls /", &mut out, std::future::pending()),
    )
    .await;
    assert_eq!(r, Outcome::Done(Ok(wazoo_client::shell::Flow::Continue)));
    assert_eq!(String::from_utf8(out).unwrap(), "[w]\n");
    shell.close().await;
}

#[tokio::test]
async fn a_refused_port_fails_at_once_naming_the_refusal() {
    // Nothing listens on a port just handed out and released.
    let port = wazoo_testkit::free_port();
    let cs = format!("127.0.0.1:{port}");
    let mut out = Vec::new();
    let mut err = Vec::new();
    let started = std::time::Instant::now();
    let code = run_command(&cs, "ls /", ShellOptions::default(), &mut out, &mut err)
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(code, 1);
    let err = String::from_utf8(err).unwrap();
    assert_eq!(
        err,
        format!("Unable to connect to {cs}: connection refused\n")
    );
    // The default wait for a first connection is 15 s; a refusal is
    // known at once (generous bound for a loaded machine).
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// ZooKeeper Dynamic Reconfiguration, "Enabling Dynamic Reconfiguration":
/// with `reconfigEnabled=true` a standalone server still cannot change its
/// membership; the shell prints the server's refusal as zkCli does.
async fn reconfig_refusals_print_zookeepers_messages(flavor: Flavor) {
    let srv = wazoo_testkit::start_server_with(
        flavor,
        wazoo_testkit::ServerOptions::default().cfg("reconfigEnabled=true"),
    )
    .unwrap_or_else(|e| panic!("cannot start a {flavor} server: {e:#}"));
    let cs = srv.addr().to_string();
    let err = {
        let (code, _, err) = cli(&cs, "reconfig -remove 3").await;
        assert_eq!(code, 1, "{err}");
        err
    };
    let (_, _, zk_err) = {
        let cs = cs.clone();
        tokio::task::spawn_blocking(move || zkcli(&cs, "reconfig -remove 3"))
            .await
            .unwrap()
    };
    assert_eq!(err, zk_err, "wazoo cli vs zkCli");
    assert!(err.starts_with("KeeperErrorCode = "), "{err}");
}

/// docs/RECIPES.md, "Who may deploy": deploying and undeploying need ADMIN
/// on /zookeeper/recipes (by default only the super user has it). A refusal
/// says so, not "Insufficient permission : FILE", which reads like a file
/// error. (wazoo only: ZooKeeper has no deploy.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_deploy_names_the_admin_permission_on_the_recipes_node() {
    let plugins = std::env::temp_dir().join(format!("wazoo-cli-deploy-{}", std::process::id()));
    std::fs::create_dir_all(&plugins).unwrap();
    let srv = wazoo_testkit::WazooServer::start(
        wazoo_testkit::ServerOptions::default()
            .arg("--plugins")
            .arg(plugins.to_string_lossy()),
    )
    .unwrap_or_else(|e| panic!("cannot start wazoo: {e:#}"));
    let cs = srv.connect_string();
    // Any bytes: the permission is checked before the module is read.
    let module = plugins.with_extension("wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    let (code, out, err) = cli(&cs, &format!("deploy {}", module.display())).await;
    let want = "deploy refused: needs ADMIN permission on /zookeeper/recipes (authenticate as a \
                user its ACL grants, e.g. the super user: addauth digest super:PASSWORD)\n";
    assert_eq!((code, out.as_str(), err.as_str()), (1, "", want));
    let (code, _, err) = cli(&cs, "undeploy lock").await;
    assert_eq!(
        (code, err.as_str()),
        (1, want.replacen("deploy", "undeploy", 1).as_str())
    );
    let _ = std::fs::remove_file(&module);
    let _ = std::fs::remove_dir_all(&plugins);
}
