//! `wazoo cli -c COMMAND` against a real server: zkCli's commands and output
//! formats, exit codes and error messages.

mod common;

use std::time::Duration;

use common::{connect, fresh_root, opts, within};
use wazoo_client::shell::{run_command, ShellOptions};
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
    assert_eq!(ok(&cs, "ls -R /").await, "/\n/a\n/a/b\n/c\n");
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
    // Java's Date.toString(): "Sat Nov 21 22:35:04 UTC 2026".
    let parts: Vec<&str> = ctime["ctime = ".len()..].split(' ').collect();
    assert_eq!(parts.len(), 6, "{ctime}");
    assert_eq!(parts[4], "UTC", "{ctime}");

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
