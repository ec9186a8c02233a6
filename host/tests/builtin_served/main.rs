//! The built-in recipes (recipes-wasm/: lock, rwlock, semaphore, queue,
//! double_barrier, twophase, election, group) served by a LIVE wazoo, driven
//! through the client's typed handles (`wazoo_client::recipes`), one session
//! per simulated process (docs/BUILTIN_RECIPES.md, "Testing"): contention,
//! session expiry of holders and waiters, a leader killed while callers wait.
//! Sessions are made to expire by blackholing their connection with the
//! testkit's Proxy (no byte passes, the server's session timer runs). Every
//! test is bounded by tokio timeouts; loopback only, free ports.

// Shared with the runtime's own tests, which it mostly serves.
#[path = "../../../runtime/tests/plugin_support/mod.rs"]
mod plugin_support;

mod barriers;
mod election;
mod lease;
mod locks;
mod queues;
mod two_phase;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use plugin_support::recipes_dir;
use wazoo_client::recipes::{
    DoubleBarrier, Election, Group, Lock, PriorityQueue, Queue, ReadWriteLock, RecipeError,
    Semaphore, TwoPhaseCommit, TwoPhaseSite, TxOutcome,
};
use wazoo_client::{Acl, Client, ClientOptions, CreateMode};
use wazoo_testkit::{Proxy, ServerOptions, TestEnsemble, WazooEnsemble, WazooServer};

/// A plugins directory holding only `modules` (each member compiles what it
/// loads at start), and server options using it. Ticks of 500 ms and a
/// 1 s minimum session timeout, so a blackholed session expires in ~2 s.
fn options(modules: &[&str]) -> (tempfile::TempDir, ServerOptions) {
    let dir = tempfile::tempdir().expect("temp dir");
    for m in modules {
        std::fs::copy(
            recipes_dir().join(format!("{m}.wasm")),
            dir.path().join(format!("{m}.wasm")),
        )
        .unwrap_or_else(|e| panic!("copy {m}.wasm: {e}"));
    }
    let opts = ServerOptions::default()
        .binary(env!("CARGO_BIN_EXE_wazoo"))
        .tick_time_ms(500)
        .session_timeouts_ms(1000, 30_000)
        .arg("--plugins")
        .arg(dir.path().to_string_lossy().to_string());
    (dir, opts)
}

struct Served {
    server: WazooServer,
    _plugins: tempfile::TempDir,
}

impl Served {
    fn start(modules: &[&str]) -> Served {
        let (plugins, opts) = options(modules);
        let server = WazooServer::start(opts).expect("start wazoo with --plugins");
        wait_deployed(server.addr(), modules);
        Served {
            server,
            _plugins: plugins,
        }
    }
    fn hosts(&self) -> String {
        self.server.addr().to_string()
    }
}

/// Waits until the member at `server` serves every module of the plugins
/// directory (see `wazoo_testkit::wait_for_recipes`): the tests' sessions,
/// some with 1.5 s timeouts, start after that.
fn wait_deployed(server: std::net::SocketAddr, modules: &[&str]) {
    wazoo_testkit::wait_for_recipes(server, modules, Duration::from_secs(120))
        .expect("the plugins directory's modules are deployed");
}

async fn connect(hosts: &str) -> Client {
    let opts = ClientOptions::default().session_timeout(Duration::from_secs(10));
    Client::connect(hosts, opts).await.expect("connect").0
}

/// A client whose session can be killed: it goes through a proxy, with a
/// 1.5 s session timeout; `proxy.blackhole()` makes the session expire.
async fn mortal(server: &Served) -> (Proxy, Client) {
    let proxy = Proxy::start(server.server.addr()).expect("proxy");
    let opts = ClientOptions::default()
        .session_timeout(Duration::from_millis(1500))
        .reconnect_delay(Duration::from_millis(50), Duration::from_millis(300));
    let c = Client::connect(&proxy.connect_string(), opts)
        .await
        .expect("connect through the proxy")
        .0;
    (proxy, c)
}

/// Runs `f`, failing the test if it takes longer than `d`.
async fn within<F: Future>(what: &str, d: Duration, f: F) -> F::Output {
    match tokio::time::timeout(d, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: not done within {d:?}"),
    }
}

/// Polls until `path` has `n` children (a missing node counts as none).
async fn wait_children(c: &Client, path: &str, n: usize) {
    let mut last = 0;
    for _ in 0..300 {
        last = c.get_children(path).await.map(|k| k.len()).unwrap_or(0);
        if last == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{path}: expected {n} children, still {last} after 15 s");
}

/// The server's count of registered recipe waits (`/zookeeper/recipes`).
async fn pending_waits(c: &Client) -> usize {
    let (data, _) = c
        .get_data("/zookeeper/recipes")
        .await
        .expect("recipes node");
    let text = String::from_utf8_lossy(&data).to_string();
    text.lines()
        .find_map(|l| l.strip_prefix("pending_waits="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pending_waits in {text:?}"))
}

async fn wait_pending(c: &Client, n: usize) {
    let mut last = 0;
    for _ in 0..300 {
        last = pending_waits(c).await;
        if last == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("expected {n} pending recipe waits, still {last} after 15 s");
}

/// Whether a spawned call is still waiting after `d`.
async fn still_waiting<T>(h: &tokio::task::JoinHandle<T>, d: Duration) -> bool {
    tokio::time::sleep(d).await;
    !h.is_finished()
}

// wazoo's own four-letter word (README, "Four-letter words"): `recp`
// answers on the client port, like ZooKeeper's words, with each module
// loaded and the pending waits.
#[tokio::test]
async fn the_recp_word_lists_the_loaded_modules() {
    let s = Served::start(&["lock"]);
    let answer = tokio::task::spawn_blocking(move || {
        wazoo_testkit::four_letter_word(s.server.addr(), "recp").expect("recp answers")
    })
    .await
    .unwrap();
    assert!(answer.contains("module=lock "), "{answer}");
    assert!(answer.ends_with("pending_waits=0\n"), "{answer}");
}
