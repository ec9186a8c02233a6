//! ZooKeeper's Go client (github.com/samuel/go-zookeeper/zk, Debian's
//! golang-github-samuel-go-zookeeper-dev, compiled at test time with
//! Debian's golang-go in GOPATH mode, offline) against wazoo: the program
//! is tests/go/client.go.
//!
//! - Recipe calls through standard operations only (docs/RECIPES.md,
//!   "Calling from any client"): the built-in lock with a waiter whose wait
//!   outlives the leader, a queue take under a chroot prefix and a
//!   semaphore, on a 3-member ensemble.
//! - The runnable examples examples/go/lock.go and examples/c/lock.c, run
//!   together against a live server.
//! - The client's API behaviors (create, get, set, null data, errors,
//!   ephemerals, sequential names, watches, multi, session expiry) as a
//!   transcript on Apache ZooKeeper 3.8 and on wazoo, standalone and on 3
//!   members: the transcripts must be equal.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

// Shared with the runtime's own tests: where the built recipe modules are.
#[path = "../../runtime/tests/plugin_support/mod.rs"]
mod plugin_support;

mod common;

use wazoo_testkit::{Flavor, TestEnsemble, WazooEnsemble, WazooServer};

const COMPILE_WAIT: Duration = Duration::from_secs(300);

/// One set of servers at a time (the machine may be small).
static SERVERS: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERVERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Compiles the Go program `src` (one file, package main) against
/// Debian's go-zookeeper into `dir/<name>`: the program. GOPATH mode and
/// no module proxy, so nothing is fetched. Panics if `go` is missing.
fn compile_go(dir: &Path, src: &Path, name: &str) -> PathBuf {
    let bin = dir.join(name);
    let out = Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg(src)
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "")
        .env(
            "GOCACHE",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-build"),
        )
        .output()
        .expect(
            "the Go toolchain (`go`, Debian's golang-go, which scripts/setup.sh installs) runs",
        );
    assert!(
        out.status.success(),
        "go build {} (needs golang-go and golang-github-samuel-go-zookeeper-dev, which \
         scripts/setup.sh installs): {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// tests/go/client.go, compiled into `dir`.
fn client(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/client.go");
    compile_go(dir, &src, "client")
}

/// Runs the program with `args` (at most 180 s) to its end: its stdout
/// lines; panics unless it exits 0.
fn run(bin: &Path, args: &[&str]) -> Vec<String> {
    let out = Command::new("timeout")
        .arg("180")
        .arg(bin)
        .args(args)
        .output()
        .expect("the Go program runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(str::to_string).collect()
}

/// A 3-member wazoo ensemble serving `modules`, and its plugins directory.
fn ensemble(modules: &[&str]) -> (tempfile::TempDir, WazooEnsemble) {
    let (dir, opts) = common::plugins_options(&plugin_support::recipes_dir(), modules);
    let e = WazooEnsemble::start(3, opts).expect("start a wazoo ensemble");
    for i in 0..3 {
        wazoo_testkit::wait_for_recipes(e.addr(i), modules, COMPILE_WAIT).unwrap();
    }
    (dir, e)
}

// ZooKeeper Recipes and Solutions, "Locks", run server-side: a Go waiter's
// wait is replicated state, so when the leader (the member its session
// starts on) dies mid-wait the new leader runs the callback, and the
// waiter's call node changes on the member its session moved to (ZooKeeper Programmer's Guide, "ZooKeeper
// Sessions"; its getData watch is set again on reconnect, "ZooKeeper
// Watches").
#[test]
fn a_go_clients_waiting_lock_call_ends_in_its_node_after_the_leader_dies() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let bin = client(dir.path());
    let (_plugins, mut e) = ensemble(&["lock"]);
    let leader = e
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader");
    // The program's sessions start on the leader, so they must move.
    let hosts = std::iter::once(leader)
        .chain((0..3).filter(|&i| i != leader))
        .map(|i| e.addr(i).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let go = dir.path().join("go");
    let rest = common::lock_waiter_outlives_the_leader(
        &mut e,
        leader,
        Command::new("timeout")
            .arg("180")
            .arg(&bin)
            .args(["lock", &hosts, "", "/locks/go"])
            .arg(&go),
        "/locks/go",
        &go,
    );
    assert_eq!(
        rest.first().map(String::as_str),
        Some(r#"released {"done":true}"#),
        "{rest:?}"
    );
    let dead = format!("waiter on {}", e.addr(leader));
    assert!(
        rest.last()
            .is_some_and(|l| l.starts_with("waiter on ") && *l != dead),
        "the waiter's session moved off the dead leader: {rest:?}"
    );
}

// ZooKeeper Recipes and Solutions, "Queues" (a take that waits on the
// empty queue gets the next put) and a semaphore of two leases (kazoo's
// design; docs/BUILTIN_RECIPES.md), called from Go on 3 members, the
// program's sessions spread over them. The queue calls are made under the
// prefix /app, as a client chrooted at /app sends them (Programmer's
// Guide, "ZooKeeper Sessions": the chroot suffix of the connect string;
// go-zookeeper has no chroot option, so the program prefixes the paths
// itself, which is all a chrooted client does on the wire).
#[test]
fn go_clients_take_from_a_queue_under_a_chroot_and_share_a_semaphore_on_3_members() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let bin = client(dir.path());
    let (_plugins, e) = ensemble(&["queue", "semaphore"]);
    let hosts = e.connect_string();
    common::raw_writes(e.addr(0), &[common::raw_create("/app", None)]);
    let lines = run(&bin, &["queue", &hosts, "/app", "/jobs"]);
    assert_eq!(
        lines,
        [
            r#"taking {"waiting":"take:/jobs"}"#,
            r#"put {"done":"entry-100-0000000000"}"#,
            r#"took {"done":"job-1"}"#,
        ],
    );
    let lines = run(&bin, &["semaphore", &hosts, "", "/sem/go"]);
    assert_eq!(lines.len(), 5, "{lines:?}");
    for (i, l) in lines[..2].iter().enumerate() {
        assert!(
            l.starts_with(&format!(r#"lease {} {{"done":"/sem/go/"#, i + 1)),
            "{lines:?}"
        );
    }
    assert_eq!(lines[2], r#"third {"waiting":"acquire:2:/sem/go"}"#);
    assert_eq!(lines[3], r#"released {"done":true}"#);
    assert!(
        lines[4].starts_with(r#"third {"done":"/sem/go/"#),
        "{lines:?}"
    );
}

// The runnable examples examples/go/lock.go and examples/c/lock.c (two
// processes each, at once, on one lock) against a live wazoo serving the
// built-in lock: each acquires, holds, releases (ZooKeeper Recipes and
// Solutions, "Locks"); every process holds its own lock node, and the lock
// nodes' sequence numbers are the four first ones.
#[test]
fn the_go_and_c_lock_examples_take_turns_on_one_lock() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let go = compile_go(dir.path(), &examples.join("go/lock.go"), "go-lock");
    let c = common::compile_c(dir.path(), &examples.join("c/lock.c"), "c-lock");
    let (_plugins, opts) = common::plugins_options(&plugin_support::recipes_dir(), &["lock"]);
    let srv = WazooServer::start(opts).expect("start wazoo");
    wazoo_testkit::wait_for_recipes(srv.addr(), &["lock"], COMPILE_WAIT).unwrap();
    let server = srv.addr().to_string();
    let mut cmds = Vec::new();
    for _ in 0..2 {
        let mut cmd = Command::new("timeout");
        cmd.arg("120")
            .arg(&go)
            .args(["-server", &server, "-hold", "300ms"]);
        cmds.push(cmd);
        let mut cmd = Command::new("timeout");
        cmd.arg("120")
            .arg(&c)
            .args([server.as_str(), "/examples/lock", "300"]);
        cmds.push(cmd);
    }
    common::lock_examples_take_turns(&mut cmds, "/examples/lock");
}

/// The transcript of the program's API scenario on a server of each
/// flavor, standalone or 3 members.
fn transcripts(ensemble: bool) -> [Vec<String>; 2] {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let bin = client(dir.path());
    [Flavor::Zookeeper, Flavor::Wazoo].map(|flavor| {
        let opts = common::options(flavor);
        if ensemble {
            let e = wazoo_testkit::start_ensemble(flavor, 3, opts)
                .unwrap_or_else(|e| panic!("cannot start a {flavor} ensemble: {e:#}"));
            run(&bin, &["transcript", &e.connect_string()])
        } else {
            let s = common::start(flavor);
            run(&bin, &["transcript", &s.connect_string()])
        }
    })
}

/// The transcripts are equal line by line, and hold lines that say what
/// ZooKeeper does (so that this fails even if both servers agree on
/// something else).
fn assert_same_and_expected([zookeeper, wazoo]: [Vec<String>; 2]) {
    for (i, (z, w)) in zookeeper.iter().zip(&wazoo).enumerate() {
        assert_eq!(w, z, "line {i}: wazoo (left) and ZooKeeper (right) differ");
    }
    assert_eq!(wazoo.len(), zookeeper.len(), "{wazoo:#?}\n{zookeeper:#?}");
    for expected in [
        // Null data stays null (Programmer's Guide, "ZooKeeper Data Model").
        "get /go/null: null version=0 cversion=0 aversion=0 dataLength=0 numChildren=0 \
         ephemeral=false mzxid>=czxid=true ok",
        "get /go/empty: null version=1 cversion=0 aversion=0 dataLength=0 numChildren=0 \
         ephemeral=false mzxid>=czxid=true ok",
        "set /go/null version 7: zk: version conflict",
        "delete /go (has children): zk: node has children",
        "create /go/eph/child: zk: ephemeral nodes may not have children",
        "the other session closed; watch: EventNodeDeleted /go/eph",
        "create /go/seq/n- again: /go/seq/n-0000000003 ok",
        "set /go/null: ok; data watch: EventNodeDataChanged /go/null",
        "create /go/later: ok; exists watch: EventNodeCreated /go/later; \
         child watch: EventNodeChildrenChanged /go",
        "set /go/null again: ok; the data watch fired once only",
        "multi create,check(bad version),set: zk: version conflict",
        "exists /go/m3: false ok",
        // A session cut off past its timeout expires.
        "the short session cut off; watch: EventNodeDeleted /go/exp",
        "the short session reaches a server: StateExpired",
        "its watch: EventNotWatching /go/exp zk: session has been expired by the server",
        "done",
    ] {
        assert!(
            zookeeper.iter().any(|l| l == expected),
            "ZooKeeper's transcript lacks {expected:?}: {zookeeper:#?}"
        );
    }
}

// Programmer's Guide, "ZooKeeper Data Model" (null data, versions,
// "Ephemeral Nodes", "Sequence Nodes -- Unique Naming"), "ZooKeeper
// Watches" (one-time triggers, event types), the multi operation and
// "ZooKeeper Sessions" (a session cut off past its timeout expires), with
// the error codes a client sees: the Go client's answers on one server.
#[test]
fn the_go_clients_transcript_is_the_same_on_zookeeper_and_wazoo_standalone() {
    assert_same_and_expected(transcripts(false));
}

// The same on 3-member ensembles, the client's two sessions on any members.
#[test]
fn the_go_clients_transcript_is_the_same_on_zookeeper_and_wazoo_on_3_members() {
    assert_same_and_expected(transcripts(true));
}
