//! The `wazoo cli` command as a process: zkCli's `-server` form and
//! command words, dates in the local time zone as zkCli prints them,
//! Ctrl-C during a command, history written after every command, tab
//! completion on a terminal, and a refused port. Against Apache ZooKeeper
//! and wazoo alike. zkCli's transcripts are also taken through a wazoo
//! follower of a ZooKeeper ensemble (docs/MIGRATION.md, phase 2).

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use common::zk_joiner::ZkJoiner;
use wazoo_testkit::{free_port, loopback, start_server, Flavor, TestServer};

/// Every wait here is bounded by this.
const WAIT: Duration = Duration::from_secs(30);

fn wazoo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wazoo"))
}

/// Waits for `child` to exit within [`WAIT`]; kills it and panics otherwise.
fn wait_exit(child: &mut Child, what: &str) -> i32 {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not exit within {WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `wazoo ARGS` with `env`: (exit code, stdout, stderr).
fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let child = wazoo()
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = output_within(child, &format!("wazoo {args:?}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// All of a child's output, both streams read to their ends, once it has
/// exited; killed if that takes longer than [`WAIT`].
fn output_within(child: Child, what: &str) -> std::process::Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(done) = rx.recv_timeout(WAIT) else {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        panic!("{what} did not exit within {WAIT:?}");
    };
    done.unwrap()
}

/// Reads a stream to its end in a thread, into a shared buffer that can be
/// looked at meanwhile.
fn collect(r: Option<impl Read + Send + 'static>) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = buf.clone();
    if let Some(mut r) = r {
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = r.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
    }
    buf
}

fn text(b: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&b.lock().unwrap()).into_owned()
}

/// Waits until `cond` holds on the text of `b`.
fn wait_text(b: &Arc<Mutex<Vec<u8>>>, what: &str, cond: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond(&text(b)) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; got {:?}",
            text(b)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Apache ZooKeeper's shell with `TZ=tz`: stdout without its connection lines.
fn zkcli(addr: &str, tz: &str, args: &[&str]) -> String {
    let child = Command::new("/usr/share/zookeeper/bin/zkCli.sh")
        .arg("-server")
        .arg(addr)
        .args(args)
        .env("TZ", tz)
        .env("ZOO_LOG_DIR", std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("zkCli.sh (Debian's zookeeper package)");
    let out = output_within(child, "zkCli").stdout;
    wazoo_testkit::zkcli_stdout(&String::from_utf8_lossy(&out))
}

fn server(flavor: Flavor) -> Box<dyn TestServer> {
    start_server(flavor).unwrap_or_else(|e| panic!("cannot start a {flavor} server: {e:#}"))
}

fn zkcli_form_and_local_dates(flavor: Flavor) {
    let srv = server(flavor);
    let addr = srv.addr().to_string();
    // zkCli's form: -server, then the command as words.
    let (code, out, err) = run(
        &["cli", "-server", &addr, "create", "/tz", "two words"],
        &[],
    );
    assert_eq!((code, out.as_str(), err.as_str()), (0, "Created /tz\n", ""));
    let (code, out, _) = run(&["cli", "-server", &addr, "get", "/tz"], &[]);
    assert_eq!((code, out.as_str()), (0, "two words\n"));
    // Dates in the local zone, summer time and abbreviation as Java's.
    for tz in ["Asia/Kolkata", "Europe/Paris", "America/New_York", "UTC"] {
        let (code, ours, err) = run(&["cli", "--server", &addr, "stat", "/tz"], &[("TZ", tz)]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(ours, zkcli(&addr, tz, &["stat", "/tz"]), "stat in TZ={tz}");
    }
}

#[test]
fn zkcli_form_and_local_dates_zookeeper() {
    zkcli_form_and_local_dates(Flavor::Zookeeper);
}

#[test]
fn zkcli_form_and_local_dates_wazoo() {
    zkcli_form_and_local_dates(Flavor::Wazoo);
}

/// Ctrl-C (SIGINT) while `watch` waits stops the watch, and the shell goes
/// on with the same session; the history file has every command at once.
fn interrupt_and_history(flavor: Flavor) {
    let srv = server(flavor);
    let addr = srv.addr().to_string();
    let home = tempfile::tempdir().unwrap();
    let mut child = wazoo()
        .args(["cli", "--server", &addr])
        .env("HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (out, err) = (collect(child.stdout.take()), collect(child.stderr.take()));
    stdin.write_all(b"create /cc\nls /\n").unwrap();
    wait_text(&out, "ls to list /cc", |o| o.contains("[cc"));
    stdin.write_all(b"watch /cc\n").unwrap();
    // SIGINT until the watch says it was stopped: one that comes while
    // the shell waits for a line is ignored.
    let deadline = Instant::now() + WAIT;
    while !text(&err).contains("^C (interrupted)") {
        assert!(
            Instant::now() < deadline,
            "the watch was never interrupted; stderr {:?}",
            text(&err)
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "SIGINT ended the shell"
        );
        let kill = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        std::thread::sleep(Duration::from_millis(300));
    }
    stdin.write_all(b"stat /cc\n").unwrap();
    wait_text(&out, "stat after the interrupt", |o| {
        o.contains("numChildren = 0")
    });
    // Written after each command, while the shell still runs.
    let history = std::fs::read_to_string(home.path().join(".wazoo_cli_history")).unwrap();
    for cmd in ["create /cc", "ls /", "watch /cc", "stat /cc"] {
        assert!(history.contains(cmd), "history lacks {cmd:?}: {history:?}");
    }
    stdin.write_all(b"delete /cc\nquit\n").unwrap();
    drop(stdin);
    assert_eq!(wait_exit(&mut child, "wazoo cli"), 0, "{}", text(&err));
}

#[test]
fn interrupt_and_history_zookeeper() {
    interrupt_and_history(Flavor::Zookeeper);
}

#[test]
fn interrupt_and_history_wazoo() {
    interrupt_and_history(Flavor::Wazoo);
}

/// On a terminal (a pty from util-linux's `script`): Tab completes a path
/// from the server's children, Ctrl-C typed while `watch` runs stops it,
/// and the shell goes on.
fn terminal_completion_and_ctrl_c(flavor: Flavor) {
    let srv = server(flavor);
    let addr = srv.addr().to_string();
    let (code, _, err) = run(
        &["cli", "-server", &addr, "create", "/complete_me", "x"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let home = tempfile::tempdir().unwrap();
    // `script` runs the command with `$SHELL -c`; `exec` keeps that shell
    // out of the pty's foreground group, where dash (CI's /bin/sh) would
    // take the Ctrl-C as its own and exit 130 after the shell quits.
    let shell = format!("exec {} cli -server {addr}", env!("CARGO_BIN_EXE_wazoo"));
    let mut child = Command::new("script")
        .args(["-qfec", &shell, "/dev/null"])
        .env("HOME", home.path())
        .env("TERM", "xterm")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("script (util-linux) for a pty");
    let mut tty = child.stdin.take().unwrap();
    let out = collect(child.stdout.take());
    wait_text(&out, "the first prompt", |o| o.contains("(CONNECTED) 0]"));
    tty.write_all(b"get /complete_m\t").unwrap();
    wait_text(&out, "the completed path", |o| {
        o.contains("get /complete_me")
    });
    tty.write_all(b"\r").unwrap();
    wait_text(&out, "the data and the next prompt", |o| {
        o.contains("\nx\r\n") && o.contains("(CONNECTED) 1]")
    });
    tty.write_all(b"watch /complete_me\r").unwrap();
    // A Ctrl-C read at the prompt only clears the line: type it until the
    // watch reports it was stopped.
    let deadline = Instant::now() + WAIT;
    while !text(&out).contains("^C (interrupted)") {
        assert!(
            Instant::now() < deadline,
            "never interrupted: {:?}",
            text(&out)
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "Ctrl-C ended the shell"
        );
        tty.write_all(b"\x03").unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    tty.write_all(b"delete /complete_me\r").unwrap();
    wait_text(&out, "the prompt after delete", |o| {
        o.contains("(CONNECTED) 3]")
    });
    tty.write_all(b"quit\r").unwrap();
    // `script` ends when its input does.
    drop(tty);
    let code = wait_exit(&mut child, "the shell on a pty");
    assert_eq!(code, 0, "{}", text(&out));
    let (code, _, err) = run(&["cli", "-server", &addr, "stat", "/complete_me"], &[]);
    assert_eq!(
        (code, err.as_str()),
        (1, "Node does not exist: /complete_me\n")
    );
}

#[test]
fn terminal_completion_and_ctrl_c_zookeeper() {
    terminal_completion_and_ctrl_c(Flavor::Zookeeper);
}

#[test]
fn terminal_completion_and_ctrl_c_wazoo() {
    terminal_completion_and_ctrl_c(Flavor::Wazoo);
}

#[test]
fn a_refused_port_fails_at_once_with_connection_refused() {
    let addr = format!("127.0.0.1:{}", wazoo_testkit::free_port());
    let started = Instant::now();
    let (code, out, err) = run(&["cli", "-server", &addr, "ls", "/"], &[]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        format!("Unable to connect to {addr}: connection refused\n")
    );
    // Generous bound: the default wait for a connection is 15 s.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// Runs zkCli interactively against `addr`, one command of `script` at a
/// time, and returns one block per command: the command, what zkCli
/// printed for it (stdout and stderr, in order), then the watch events its
/// watcher thread printed meanwhile, in their order. The two threads'
/// lines are kept apart because their interleaving is a race; after each
/// command zkCli runs `ls` of a missing marker node, and the block ends a
/// while after the marker's answer, once the events of the command are
/// printed.
fn zkcli_transcript(addr: &str, script: &[&str]) -> Vec<String> {
    let log_dir = tempfile::tempdir().unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("exec /usr/share/zookeeper/bin/zkCli.sh -server \"$1\" 2>&1")
        .arg("zkCli")
        .arg(addr)
        .env("ZOO_LOG_DIR", log_dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("zkCli.sh (Debian's zookeeper package)");
    let out = collect(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    wait_text(&out, "zkCli's connection", |t| {
        t.contains("WatchedEvent state:SyncConnected type:None path:null")
    });
    let mut seen = text(&out).len();
    let mut blocks = Vec::new();
    for (i, cmd) in script.iter().enumerate() {
        let marker = format!("/wz-step-{i}");
        writeln!(stdin, "{cmd}\nls {marker}").unwrap();
        stdin.flush().unwrap();
        wait_text(&out, cmd, |t| t[seen..].contains(&marker));
        std::thread::sleep(Duration::from_millis(250));
        let all = text(&out);
        let (mut printed, mut events) = (Vec::new(), Vec::new());
        for line in all[seen..].lines() {
            if line.contains(&marker)
                || line.trim().is_empty()
                || line == "WATCHER::"
                || line.starts_with("SLF4J:")
                || line.starts_with("log4j:")
            {
                continue;
            }
            if line.starts_with("WatchedEvent ") {
                events.push(line);
            } else {
                printed.push(line);
            }
        }
        seen = all.len();
        let mut block = format!("> {cmd}\n");
        for l in printed.iter().chain([&"-- events:"]).chain(&events) {
            block.push_str(l);
            block.push('\n');
        }
        blocks.push(block);
    }
    writeln!(stdin, "quit").unwrap();
    drop(stdin);
    wait_exit(&mut child, "zkCli");
    blocks
}

/// The events block `cmd` got in `transcript`.
fn events_of<'a>(transcript: &'a [String], cmd: &str) -> Vec<&'a str> {
    let block = transcript
        .iter()
        .find(|b| b.starts_with(&format!("> {cmd}\n")))
        .unwrap_or_else(|| panic!("no block for {cmd}"));
    block
        .split_once("-- events:\n")
        .unwrap()
        .1
        .lines()
        .map(|l| l.trim_start_matches("WatchedEvent state:SyncConnected "))
        .collect()
}

/// The zkCli script of the watch-modes transcript (below).
const WATCH_MODES_SCRIPT: &[&str] = &[
    "create /wm",
    // A persistent watch replaces a recursive one on the same path: no
    // NodeCreated for the new child, only NodeChildrenChanged. (The
    // mode is always given: zkCli's addWatch keeps the last -m.)
    "create /wm/p",
    "addWatch -m PERSISTENT_RECURSIVE /wm/p",
    "addWatch -m PERSISTENT /wm/p",
    "create /wm/p/c2",
    "set /wm/p x",
    // A data watch makes the data part of it one-shot; the child part
    // stays persistent.
    "get -w /wm/p",
    "set /wm/p y",
    "set /wm/p z",
    "create /wm/p/c3",
    // removewatches -c removes the child part of a persistent watch,
    // -d its data part (zkCli reports NoWatcher when its own maps have
    // no watch of that type, whatever the server did).
    "create /wm/r",
    "addWatch -m PERSISTENT /wm/r",
    "removewatches /wm/r -c",
    "create /wm/r/c",
    "set /wm/r x",
    "removewatches /wm/r -d",
    "set /wm/r y",
    "removewatches /wm/r -a",
    // A recursive watch without its data part hears of deletions only.
    "create /wm/t",
    "create /wm/t/a",
    "addWatch -m PERSISTENT_RECURSIVE /wm/t",
    "removewatches /wm/t -d",
    "set /wm/t/a x",
    "create /wm/t/b",
    "delete /wm/t/a",
    // A recursive watch replaces a child watch on the same path.
    "create /wm/w",
    "ls -w /wm/w",
    "addWatch -m PERSISTENT_RECURSIVE /wm/w",
    "create /wm/w/a",
    // A persistent watch replaces a data watch, and -a removes it.
    "create /wm/v v0",
    "get -w /wm/v",
    "addWatch -m PERSISTENT /wm/v",
    "set /wm/v 1",
    "set /wm/v 2",
    "removewatches /wm/v -a",
    "set /wm/v 3",
];

/// What ZooKeeper 3.8's transcript of [`WATCH_MODES_SCRIPT`] shows for the
/// commands whose events matter, so that a comparison is about them.
fn check_watch_modes(expected: &[String], what: &str) {
    let changed = |p: &str| format!("type:NodeDataChanged path:{p}");
    let children = |p: &str| format!("type:NodeChildrenChanged path:{p}");
    for (cmd, events) in [
        ("create /wm/p/c2", vec![children("/wm/p")]),
        ("set /wm/p y", vec![changed("/wm/p")]),
        ("set /wm/p z", vec![]),
        ("create /wm/p/c3", vec![children("/wm/p")]),
        ("create /wm/r/c", vec![]),
        ("set /wm/r x", vec![changed("/wm/r")]),
        ("set /wm/r y", vec![]),
        ("set /wm/t/a x", vec![]),
        ("create /wm/t/b", vec![]),
        (
            "delete /wm/t/a",
            vec!["type:NodeDeleted path:/wm/t/a".into()],
        ),
        (
            "create /wm/w/a",
            vec!["type:NodeCreated path:/wm/w/a".into()],
        ),
        ("set /wm/v 2", vec![changed("/wm/v")]),
        ("set /wm/v 3", vec![]),
    ] {
        assert_eq!(events_of(expected, cmd), events, "{what}: {cmd}");
    }
}

/// A zkCli session of everyday commands whose output does not depend on
/// zxids, times or ports: creates (plain, sequential, ephemeral, with an
/// ACL), get/set with versions, ls, one-shot watches, deletes, ACLs,
/// auth, whoami, quotas, sync and the errors zkCli prints for each.
const SESSION_SCRIPT: &[&str] = &[
    "create /s",
    "create /s/a hello",
    "create /s/a again",
    "create /nope/a x",
    "get /s/a",
    "set /s/a world",
    "get /s/a",
    "set -v 0 /s/a stale",
    "create -s /s/q- x",
    "create -s /s/q- y",
    "create -e /s/e",
    "create /s/e/c",
    "ls /s",
    "get -w /s/a",
    "set /s/a again",
    "set /s/a once-more",
    "ls -w /s",
    "create /s/b",
    "create /s/c",
    "delete /s",
    "delete -v 5 /s/b",
    "delete /s/b",
    "deleteall /s/q-0000000001",
    "stat /missing",
    "get /missing",
    "ls /zookeeper",
    "getAcl /s",
    "addauth digest u:p",
    "whoami",
    "create /s/p secret auth::cdrwa",
    "getAcl /s/p",
    "create /s/r readonly world:anyone:r",
    "set /s/r x",
    "getAcl /s/r",
    "setAcl /s/r world:anyone:cdrwa",
    "set /s/r x",
    "getEphemerals /s",
    "setquota -n 5 /s",
    "listquota /s",
    "delquota /s",
    "listquota /s",
    "sync /s",
];

/// What ZooKeeper 3.8 prints for some commands of [`SESSION_SCRIPT`]: the
/// lines of their blocks before "-- events:", then the events.
fn check_session(expected: &[String], what: &str) {
    let changed = "type:NodeDataChanged path:/s/a".to_string();
    let children = "type:NodeChildrenChanged path:/s".to_string();
    for (cmd, printed, events) in [
        (
            "create /s/a again",
            vec!["Node already exists: /s/a"],
            vec![],
        ),
        (
            "create /nope/a x",
            vec!["Node does not exist: /nope/a"],
            vec![],
        ),
        ("get /s/a", vec!["hello"], vec![]),
        (
            "set -v 0 /s/a stale",
            vec!["version No is not valid : /s/a"],
            vec![],
        ),
        ("create -s /s/q- y", vec!["Created /s/q-0000000002"], vec![]),
        (
            "create /s/e/c",
            vec!["Ephemerals cannot have children: /s/e/c"],
            vec![],
        ),
        ("ls /s", vec!["[a, e, q-0000000001, q-0000000002]"], vec![]),
        ("set /s/a again", vec![], vec![changed.clone()]),
        ("set /s/a once-more", vec![], vec![]),
        ("create /s/b", vec!["Created /s/b"], vec![children.clone()]),
        ("create /s/c", vec!["Created /s/c"], vec![]),
        ("delete /s", vec!["Node not empty: /s"], vec![]),
        ("ls /zookeeper", vec!["[config, quota]"], vec![]),
        ("getAcl /s", vec!["'world,'anyone", ": cdrwa"], vec![]),
        ("deleteall /s/q-0000000001", vec![], vec![]),
        (
            "whoami",
            vec!["Auth scheme: User", "ip: 127.0.0.1", "digest: u"],
            vec![],
        ),
        (
            "getAcl /s/p",
            vec!["'digest,'u:Jq7wMyA/w2Vd5WIDAKdu4OIIFEQ=", ": cdrwa"],
            vec![],
        ),
        ("set /s/r x", vec!["Insufficient permission : /s/r"], vec![]),
        (
            "setAcl /s/r world:anyone:cdrwa",
            vec!["Insufficient permission : /s/r"],
            vec![],
        ),
        ("getEphemerals /s", vec!["[/s/e]"], vec![]),
        (
            "listquota /s",
            vec![
                "absolute path is /zookeeper/quota/s/zookeeper_limits",
                "Output quota for /s count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=-1",
                "Output stat for /s count=7,bytes=24",
            ],
            vec![],
        ),
        ("sync /s", vec!["Sync is OK"], vec![]),
    ] {
        let block = expected
            .iter()
            .find(|b| b.starts_with(&format!("> {cmd}\n")))
            .unwrap_or_else(|| panic!("{what}: no block for {cmd}"));
        let (head, _) = block.split_once("-- events:\n").unwrap();
        let got: Vec<&str> = head.lines().skip(1).collect();
        assert_eq!(got, printed, "{what}: {cmd} in {}", expected.concat());
        assert_eq!(
            events_of(expected, cmd),
            events,
            "{what}: {cmd} in {}",
            expected.concat()
        );
    }
}

/// What checks ZooKeeper's transcript of a script: (transcript, what).
type Check = fn(&[String], &str);

/// Runs each script through zkCli against each flavor in turn (a
/// standalone server, or a 3-member ensemble through its full connect
/// string; one server or ensemble per flavor for all the scripts, which
/// use paths of their own), checks ZooKeeper's transcripts with their
/// checks, and wazoo's against ZooKeeper's block by block.
fn transcripts_agree(scripts: &[(&[&str], Check)], ensemble: bool) {
    let run = |flavor: Flavor| -> Vec<Vec<String>> {
        let each = |addr: &str| {
            scripts
                .iter()
                .map(|(s, _)| zkcli_transcript(addr, s))
                .collect()
        };
        if ensemble {
            let opts = match flavor {
                Flavor::Wazoo => wazoo_testkit::ServerOptions::default()
                    .binary(env!("CARGO_BIN_EXE_wazoo"))
                    .cfg("wazoo.recipes.builtin=false"),
                Flavor::Zookeeper => wazoo_testkit::ServerOptions::default(),
            };
            let e = wazoo_testkit::start_ensemble(flavor, 3, opts)
                .unwrap_or_else(|err| panic!("cannot start a {flavor} ensemble: {err:#}"));
            each(&e.connect_string())
        } else {
            each(&server(flavor).addr().to_string())
        }
    };
    let kind = if ensemble { "3 members" } else { "standalone" };
    let expected = run(Flavor::Zookeeper);
    for ((_, check), transcript) in scripts.iter().zip(&expected) {
        check(transcript, &format!("ZooKeeper, {kind}"));
    }
    let got = run(Flavor::Wazoo);
    assert_transcripts_match(&expected, &got, kind);
}

/// wazoo's transcripts (`got`) are ZooKeeper's (`expected`), block by
/// block.
fn assert_transcripts_match(expected: &[Vec<String>], got: &[Vec<String>], kind: &str) {
    for (expected, got) in expected.iter().zip(got) {
        for (z, w) in expected.iter().zip(got) {
            assert_eq!(w, z, "wazoo's transcript ({kind}) differs from ZooKeeper's");
        }
        assert_eq!(got.len(), expected.len());
    }
    assert_eq!(got.len(), expected.len());
}

// ZooKeeper Programmer's Guide, "ZooKeeper Watches", "Persistent,
// Recursive Watches" and "Remove Watches", and the ZooKeeper CLI's
// addWatch, get -w, ls -w and removewatches: zkCli prints the same
// transcript against wazoo as against ZooKeeper 3.8, which keeps one watch
// mode per path and connection in each of its data and child tables.
#[test]
fn zkcli_watch_modes_transcript_is_zookeepers() {
    transcripts_agree(&[(WATCH_MODES_SCRIPT, check_watch_modes)], false);
}

// ZooKeeper CLI (zkCli) commands of the "ZooKeeper Command Line Tools"
// page, on ZooKeeper Programmer's Guide, "ZNodes", "ZooKeeper Watches",
// "ZooKeeper access control using ACLs" and Administrator's Guide,
// "Quotas": zkCli prints the same transcript against wazoo as against
// ZooKeeper 3.8, standalone.
#[test]
fn zkcli_session_transcript_is_zookeepers() {
    transcripts_agree(&[(SESSION_SCRIPT, check_session)], false);
}

// Both transcripts on 3-member ensembles, one per flavor (watches live on
// the member a session is connected to; the changes come through the
// leader).
#[test]
fn zkcli_transcripts_on_three_members_are_zookeepers() {
    transcripts_agree(
        &[
            (WATCH_MODES_SCRIPT, check_watch_modes),
            (SESSION_SCRIPT, check_session),
        ],
        true,
    );
}

// docs/MIGRATION.md, phase 2, and the ZooKeeper CLI: zkCli connected to
// a wazoo follower alone, in an ensemble of two ZooKeeper members and
// wazoo where the ZooKeeper member that does not lead is down (every write
// commits with wazoo's ACK), prints the transcripts zkCli prints against
// a 3-member ZooKeeper ensemble.
#[test]
fn zkcli_transcripts_through_a_wazoo_follower_are_zookeepers() {
    let scripts: [(&[&str], Check); 2] = [
        (WATCH_MODES_SCRIPT, check_watch_modes),
        (SESSION_SCRIPT, check_session),
    ];
    let zk3 = wazoo_testkit::start_ensemble(Flavor::Zookeeper, 3, Default::default())
        .unwrap_or_else(|err| panic!("cannot start a ZooKeeper ensemble: {err:#}"));
    let expected: Vec<Vec<String>> = scripts
        .iter()
        .map(|(s, _)| zkcli_transcript(&zk3.connect_string(), s))
        .collect();
    drop(zk3);
    for ((_, check), transcript) in scripts.iter().zip(&expected) {
        check(transcript, "ZooKeeper, 3 members");
    }

    let (q3, e3, c3) = (free_port(), free_port(), free_port());
    let line = format!("server.3=127.0.0.1:{q3}:{e3}");
    let opts = common::ensemble_options(Flavor::Zookeeper).cfg(line);
    let mut zk = wazoo_testkit::ZkEnsemble::start_with(2, opts).unwrap();
    let mut w = ZkJoiner::start(&zk.config_path(0), 3, c3, &[]);
    w.wait_mode(loopback(c3), "follower");
    let leader = zk.wait_for_leader(Duration::from_secs(10)).unwrap();
    zk.kill(1 - leader);
    let got: Vec<Vec<String>> = scripts
        .iter()
        .map(|(s, _)| zkcli_transcript(&format!("127.0.0.1:{c3}"), s))
        .collect();
    assert_transcripts_match(&expected, &got, "a wazoo follower of ZooKeeper");
}
