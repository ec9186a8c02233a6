//! The Java helper jar (clients/java, package `io.wazoo.recipes`) on
//! ZooKeeper's stock Java client and on Apache Curator, Debian's jars:
//! recipe calls through standard operations only (docs/RECIPES.md,
//! "Calling from any client"), its JSON reader and writer, a typed handle
//! per built-in recipe (docs/BUILTIN_RECIPES.md, each after its section of
//! "ZooKeeper Recipes and Solutions"), and a lock waiter whose wait
//! outlives the leader. The program is tests/java/JavaRecipes.java.
//!
//! Also the runnable lock examples examples/java/LockExample.java (on the
//! jar) and examples/python/lock.py (kazoo and clients/python's
//! `wazoo_recipes`), run together against a live server.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

// Shared with the runtime's own tests: where the built recipe modules are.
#[path = "../../runtime/tests/plugin_support/mod.rs"]
mod plugin_support;

mod common;

use plugin_support::BUILTIN_MODULES as MODULES;

use wazoo_testkit::{TestEnsemble, WazooEnsemble};

const COMPILE_WAIT: Duration = Duration::from_secs(300);

/// Debian's jars the helper and the program run with.
const JARS: &[&str] = &[
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/curator-framework.jar",
    "/usr/share/java/curator-client.jar",
    "/usr/share/java/guava.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-nop.jar",
];

/// One ensemble at a time (the machine may be small; each member compiles
/// nine modules at start).
static ENSEMBLES: Mutex<()> = Mutex::new(());

/// The repository's root.
fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Builds the jar with clients/java/build.sh into `dir`: its path.
fn jar(dir: &Path) -> PathBuf {
    let repo = repo();
    let out = Command::new("bash")
        .arg(repo.join("clients/java/build.sh"))
        .arg(dir)
        .output()
        .expect("bash runs clients/java/build.sh");
    assert!(
        out.status.success(),
        "clients/java/build.sh (needs a JDK and Debian's zookeeper and \
         libcurator-framework-java, which scripts/setup.sh installs): {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let jar = dir.join("wazoo-recipes.jar");
    assert!(jar.is_file(), "build.sh made {}", jar.display());
    jar
}

/// Builds the jar with clients/java/build.sh and compiles the test program
/// against it, into `dir`: the classpath to run it with.
fn build(dir: &Path) -> String {
    let jar = jar(dir);
    let classpath = std::iter::once(jar.to_string_lossy().to_string())
        .chain(JARS.iter().map(|j| j.to_string()))
        .collect::<Vec<_>>()
        .join(":");
    let classes = dir.join("classes");
    common::compile_java(&classes, "JavaRecipes", &classpath);
    format!("{}:{classpath}", classes.display())
}

/// The program, at most `secs` seconds, with stdout piped.
fn program(classpath: &str, secs: u32, args: &[&str]) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.arg(secs.to_string())
        .args(["java", "-cp", classpath, "JavaRecipes"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs the program to its end: its stdout lines; panics unless it exits 0.
fn run(classpath: &str, args: &[&str]) -> Vec<String> {
    let out = program(classpath, 240, args).output().expect("java runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "JavaRecipes {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(str::to_string).collect()
}

/// A plugins directory holding the built-in modules, and a 3-member
/// ensemble loading it, each member serving them.
fn ensemble() -> (tempfile::TempDir, WazooEnsemble) {
    let (dir, opts) = common::plugins_options(&plugin_support::recipes_dir(), MODULES);
    let e = WazooEnsemble::start(3, opts).expect("start a wazoo ensemble");
    for i in 0..3 {
        wazoo_testkit::wait_for_recipes(e.addr(i), MODULES, COMPILE_WAIT).unwrap();
    }
    (dir, e)
}

fn temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    (dir, path)
}

// RFC 8259 for what the recipes' arguments and results use: objects,
// arrays, strings with escapes (surrogate pairs, control characters),
// numbers (integers past 64 bits, fractions, exponents), booleans, null;
// malformed text is refused. No server involved.
#[test]
fn the_json_reader_and_writer_round_trip_and_refuse_malformed_text() {
    let (_dir, dir) = temp();
    let cp = build(&dir);
    let lines = run(&cp, &["json"]);
    assert_eq!(
        lines.last().map(String::as_str),
        Some("json: ok"),
        "{lines:?}"
    );
}

// The build script can run again over its own output (the jar is replaced).
#[test]
fn the_build_script_is_idempotent() {
    let (_dir, dir) = temp();
    build(&dir);
    let first = std::fs::metadata(dir.join("wazoo-recipes.jar"))
        .unwrap()
        .len();
    build(&dir);
    let second = std::fs::metadata(dir.join("wazoo-recipes.jar"))
        .unwrap()
        .len();
    assert_eq!(first, second);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(".build"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

// Each typed handle against a 3-member ensemble, the program's sessions
// spread over the members: ZooKeeper Recipes and Solutions, "Locks",
// "Shared Locks", "Revocable Shared Locks", "Queues", "Priority Queues",
// "Barriers", "Double Barriers", "Two-phased Commit", "Leader Election",
// and group membership; kazoo's Semaphore; the generic call through
// ZooKeeper's client and through Curator, and a failing call.
#[test]
fn every_handle_works_on_a_3_member_ensemble() {
    let _one = ENSEMBLES.lock().unwrap_or_else(|p| p.into_inner());
    let (_dir, dir) = temp();
    let cp = build(&dir);
    let (_plugins, e) = ensemble();
    let lines = run(&cp, &["handles", &e.connect_string()]);
    let expected = [
        "call: done",
        "call failing: BADARGUMENTS",
        "curator call: done",
        "query: done, writes refused",
        "lock: held, waiter waits, gets it after release",
        "lock timeout: withdrawn",
        "rwlock: readers share, writer waits",
        "rwlock revoke: seen",
        "semaphore: 2 leases, third waits",
        "queue: priority order, take waits for put",
        "barrier: waits until removed",
        "double_barrier: entered and left",
        "twophase: commit",
        "twophase: abort",
        "election: leader, ack, failover to the next",
        "group: members and watch",
    ];
    assert_eq!(lines, expected);
}

// ZooKeeper Recipes and Solutions, "Locks", run server-side: the waiter's
// wait is replicated state, so when the leader dies while WazooLock.acquire
// waits, the new leader runs the callback and the waiter's call node
// changes on the member its session is on (ZooKeeper Programmer's Guide,
// "ZooKeeper Sessions": the client moves with its session and watches).
// The holder releases after the failover; the waiter must get the lock in
// the same session.
#[test]
fn a_java_lock_waiter_gets_the_lock_after_the_leader_dies() {
    lock_waiter_across_a_leader_failover("/locks/java", &[]);
}

// The same through Curator: the waiter's calls are Curator's protected-mode
// creates, its getData watch set with usingWatcher, and Curator's retry
// policy rides out the lost connection.
#[test]
fn a_curator_lock_waiter_gets_the_lock_after_the_leader_dies() {
    lock_waiter_across_a_leader_failover("/locks/curator", &["curator"]);
}

fn lock_waiter_across_a_leader_failover(lock: &str, flags: &[&str]) {
    let _one = ENSEMBLES.lock().unwrap_or_else(|p| p.into_inner());
    let (_dir, dir) = temp();
    let cp = build(&dir);
    let (_plugins, mut e) = ensemble();
    let leader = e
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader");
    let go = dir.join("go");
    let go_arg = go.to_string_lossy().to_string();
    let hosts = e.connect_string();
    let mut args = vec!["failover", &hosts, lock, &go_arg];
    args.extend_from_slice(flags);
    let (child, mut out, line) = common::spawn_first_line(&mut program(&cp, 180, &args));
    assert!(line.starts_with(&format!("holder {lock}/")), "{line:?}");
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(
        line.trim_end(),
        format!(r#"waiting {{"waiting":"acquire:{lock}"}}"#)
    );
    let rest = common::kill_leader_then_go(&mut e, leader, &go, child, out);
    assert!(
        rest.iter()
            .any(|l| l.starts_with(&format!("held {lock}/")) && l.contains("__lock__")),
        "{rest:?}"
    );
    assert!(rest.iter().any(|l| l == "same session"), "{rest:?}");
}

// The runnable examples examples/java/LockExample.java (ZooKeeper's Java
// client and the jar, built and run as the file's header says) and
// examples/python/lock.py (kazoo and clients/python's wazoo_recipes, as the
// README runs it), two processes of each at once on one lock against a
// live wazoo serving the built-in lock: each acquires, holds, releases
// (ZooKeeper Recipes and Solutions, "Locks"); every process holds its own
// lock node, and the lock nodes' sequence numbers are the four first ones.
#[test]
fn the_java_and_python_lock_examples_take_turns_on_one_lock() {
    let _one = ENSEMBLES.lock().unwrap_or_else(|p| p.into_inner());
    let (_dir, dir) = temp();
    let jar = jar(&dir);
    // The example's classpath: the jar, the ZooKeeper client and a logger.
    let classpath = std::iter::once(jar.to_string_lossy().to_string())
        .chain(
            [
                "zookeeper.jar",
                "zookeeper-jute.jar",
                "slf4j-api.jar",
                "slf4j-nop.jar",
            ]
            .iter()
            .map(|j| format!("/usr/share/java/{j}")),
        )
        .collect::<Vec<_>>()
        .join(":");
    let classes = dir.join("examples");
    common::compile_java_file(
        &classes,
        &repo().join("examples/java/LockExample.java"),
        &classpath,
    );
    let classpath = format!("{}:{classpath}", classes.display());
    let (_plugins, opts) = common::plugins_options(&plugin_support::recipes_dir(), &["lock"]);
    let srv = wazoo_testkit::WazooServer::start(opts).expect("start wazoo");
    wazoo_testkit::wait_for_recipes(srv.addr(), &["lock"], COMPILE_WAIT).unwrap();
    let server = srv.addr().to_string();
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmds = Vec::new();
    for _ in 0..2 {
        let mut cmd = Command::new("timeout");
        cmd.args(["120", "java", "-cp", &classpath, "LockExample"])
            .args([server.as_str(), "/examples/lock", "300"]);
        cmds.push(cmd);
        // This checkout's wazoo_recipes, ahead of an installed one.
        let mut cmd = Command::new("timeout");
        cmd.args(["120", &python])
            .arg(repo().join("examples/python/lock.py"))
            .args([server.as_str(), "/examples/lock", "300"])
            .env("PYTHONPATH", repo().join("clients/python"));
        cmds.push(cmd);
    }
    common::lock_examples_take_turns(&mut cmds, "/examples/lock");
}
