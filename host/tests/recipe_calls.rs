//! Recipe calls from stock clients, through ZooKeeper's standard operations
//! only (docs/RECIPES.md, "Calling from any client"): Debian's zkCli and
//! ZooKeeper's C client (libzookeeper-mt) create an ephemeral sequential
//! node under /zookeeper/calls/<module>/<method> with JSON arguments, and
//! read the result in its data; a waiting call finishes by changing that
//! data, which fires the caller's getData watch (ZooKeeper Programmer's
//! Guide, "ZooKeeper Watches"). kazoo's side is tests/python/
//! test_recipe_calls.py.

use std::process::{Command, Stdio};
use std::time::Duration;

// Shared with the runtime's own tests: where the built recipe modules are.
#[path = "../../runtime/tests/plugin_support/mod.rs"]
mod plugin_support;

mod common;

use wazoo_testkit::{ServerOptions, TestEnsemble, WazooEnsemble, WazooServer};

const COMPILE_WAIT: Duration = Duration::from_secs(300);

/// A plugins directory holding the lock module only, and server options
/// using it.
fn options() -> (tempfile::TempDir, ServerOptions) {
    common::plugins_options(&plugin_support::recipes_dir(), &["lock"])
}

/// zkCli.sh's answers to `commands` (one line each, on stdin): its stdout
/// without its banner and watcher lines, and its stderr without the
/// logger's lines (zkCli prints `Created` and errors there).
fn zkcli(addr: &str, commands: &str) -> (String, String) {
    use std::io::Write;
    let mut child = Command::new("timeout")
        .args(["60", "/usr/share/zookeeper/bin/zkCli.sh", "-server", addr])
        .env("ZOO_LOG_DIR", std::env::temp_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zkCli.sh (Debian's zookeeper package)");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(commands.as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.starts_with("SLF4J"))
        .map(|l| format!("{l}\n"))
        .collect();
    (
        wazoo_testkit::zkcli_stdout(&String::from_utf8_lossy(&out.stdout)),
        err,
    )
}

// The issue's own example: `create -e -s /zookeeper/calls/lock/acquire
// '{"path":"/locks/x"}'`, then `get` on the created node.
#[test]
fn zkcli_calls_a_recipe_with_create_and_reads_the_result_with_get() {
    let (_plugins, opts) = options();
    let srv = WazooServer::start(opts).expect("start wazoo");
    wazoo_testkit::wait_for_recipes(srv.addr(), &["lock"], COMPILE_WAIT).unwrap();
    let (out, err) = zkcli(
        &srv.addr().to_string(),
        "create -e -s /zookeeper/calls/lock/acquire '{\"path\":\"/locks/x\"}'\n\
         get /zookeeper/calls/lock/acquire0000000000\n\
         create -e -s /zookeeper/calls/lock/holder '{\"path\":\"/locks/x\"}'\n\
         get /zookeeper/calls/lock/holder0000000001\n\
         create -s /zookeeper/calls/lock/acquire '{}'\n",
    );
    let answers: Vec<&str> = out.lines().filter(|l| l.starts_with('{')).collect();
    let [held, holder] = answers[..] else {
        panic!("two results expected: {out}{err}");
    };
    assert!(
        held.starts_with(r#"{"done":"/locks/x/"#) && held.contains("__lock__"),
        "{out}"
    );
    let node = held.trim_start_matches(r#"{"done":"#).trim_end_matches('}');
    assert_eq!(holder, format!(r#"{{"done":{node}}}"#), "{out}");
    assert_eq!(
        err,
        "Created /zookeeper/calls/lock/acquire0000000000\n\
         Created /zookeeper/calls/lock/holder0000000001\n\
         Arguments are not valid : /zookeeper/calls/lock/acquire\n",
        "a call node must be ephemeral: zkCli prints the refusal"
    );
}

// ZooKeeper Recipes and Solutions, "Locks", run server-side: the waiter's
// wait is replicated state, so when the leader dies mid-wait the new
// leader runs the callback, and the waiter's call node changes on the
// member its session is on (ZooKeeper Programmer's Guide, "ZooKeeper
// Sessions": the client moves to another member with its session and
// watches).
#[test]
fn a_c_clients_waiting_call_ends_in_its_node_after_the_leader_dies() {
    let dir = tempfile::tempdir().unwrap();
    let bin = common::compile_c_client(dir.path(), "recipe_call");
    let (_plugins, opts) = options();
    let mut e = WazooEnsemble::start(3, opts).expect("start a wazoo ensemble");
    for i in 0..3 {
        wazoo_testkit::wait_for_recipes(e.addr(i), &["lock"], COMPILE_WAIT).unwrap();
    }
    let go = dir.path().join("go");
    let hosts = e.connect_string();
    let leader = e
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader");
    common::lock_waiter_outlives_the_leader(
        &mut e,
        leader,
        Command::new("timeout")
            .arg("120")
            .arg(&bin)
            .arg(&hosts)
            .arg("/locks/c")
            .arg(&go),
        "/locks/c",
        &go,
    );
}
