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
         get /zookeeper/calls/lock/holder/{\"path\":\"/locks/x\"}\n\
         get /zookeeper/calls/lock/acquire/{\"path\":\"/locks/y\"}\n\
         create -s /zookeeper/calls/lock/acquire '{}'\n",
    );
    let answers: Vec<&str> = out.lines().filter(|l| l.starts_with('{')).collect();
    let [held, holder, read_holder] = answers[..] else {
        panic!("three results expected: {out}{err}");
    };
    // The same call made by a get: its result is the get's data
    // (docs/RECIPES.md, "Calls that change nothing").
    assert_eq!(read_holder, holder, "{out}");
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
         Not a read-only call: /zookeeper/calls/lock/acquire/{\"path\":\"/locks/y\"}\n\
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

/// A plugins directory holding the lock and echo modules, and options.
fn lock_and_echo() -> (tempfile::TempDir, ServerOptions) {
    common::plugins_options(&plugin_support::recipes_dir(), &["lock", "echo"])
}

// docs/RECIPES.md, "Calls that change nothing": a getData of
// /zookeeper/calls/<module>/<method>/<ARGS> runs the method as a read on
// the member the session is on (here a follower, the client connected to
// it alone), as the caller, and logs nothing; a method that writes is
// refused with NotReadOnly (ZooKeeper Programmer's Guide, "Read-only
// mode", names the code) and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_clients_getdata_calls_a_method_as_a_read_on_a_follower() {
    use zookeeper_client::{Acls, CreateMode, Error};
    let (_plugins, opts) = lock_and_echo();
    let e = WazooEnsemble::start(3, opts).expect("start a wazoo ensemble");
    for i in 0..3 {
        wazoo_testkit::wait_for_recipes(e.addr(i), &["lock", "echo"], COMPILE_WAIT).unwrap();
    }
    let leader = e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let follower = (leader + 1) % 3;
    let zk = common::connect(&e.addr(follower).to_string()).await;
    let get = |path: &'static str| {
        let zk = zk.clone();
        async move {
            zk.get_data(path)
                .await
                .map(|(d, _)| String::from_utf8(d).unwrap())
        }
    };
    assert_eq!(
        get("/zookeeper/calls/echo/noop/null").await.unwrap(),
        r#"{"done":null}"#
    );
    assert_eq!(
        get(r#"/zookeeper/calls/echo/echo/"hi""#).await.unwrap(),
        r#"{"done":"hi"}"#
    );
    // As the caller: echo.whoami answers the session (and the guid).
    let who = get("/zookeeper/calls/echo/whoami/null").await.unwrap();
    let session = zk.session_id().0;
    assert!(
        who.starts_with(&format!(r#"{{"done":[{session},"#)),
        "{who}"
    );
    // A lock taken with a create, read with a get, in the session's order.
    zk.create(
        "/zookeeper/calls/lock/acquire",
        br#"{"path":"/locks/r"}"#,
        &CreateMode::EphemeralSequential.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let (held, _) = zk
        .get_data("/zookeeper/calls/lock/acquire0000000000")
        .await
        .unwrap();
    let held = String::from_utf8(held).unwrap();
    assert!(held.starts_with(r#"{"done":"/locks/r/"#), "{held}");
    let read = get(r#"/zookeeper/calls/lock/holder/{"path":"\/locks\/r"}"#)
        .await
        .unwrap();
    assert_eq!(read, held);
    // A method that writes is refused, and nothing of it applies (the
    // holder's own acquire of /locks/r would change nothing: another lock).
    assert_eq!(
        get(r#"/zookeeper/calls/lock/acquire/{"path":"/locks/s"}"#).await,
        Err(Error::NotReadOnly)
    );
    assert_eq!(zk.get_children("/locks/s").await.err(), Some(Error::NoNode));
    assert_eq!(
        get("/zookeeper/calls/nope/x/null").await,
        Err(Error::Unimplemented)
    );
    assert!(matches!(
        get("/zookeeper/calls/echo/echo/{").await,
        Err(Error::BadArguments(_))
    ));
    // The reads made no node: echo was only ever called by getData.
    assert_eq!(
        zk.get_children("/zookeeper/calls/echo").await.err(),
        Some(Error::NoNode)
    );
}
