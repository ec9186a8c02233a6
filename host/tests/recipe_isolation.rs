//! Hostile recipe modules on a 3-member ensemble do not stall other
//! clients (docs/ARCHITECTURE.md, "Recipes", "Where a step runs"): steps
//! run on the members' recipe workers, so an infinite loop (out of fuel or
//! past its deadline), a read-batch bomb (batches of reads of a 900 KB
//! node until a limit stops it) and a giant node (a step that writes
//! 900 KB) cost the other clients' writes little. Bounds are generous
//! (each write under 2 s, the machine is shared); the p99s are printed.
//! `WAZOO_TEST_RECIPE_WORKERS=0` runs the same with steps on the members'
//! threads (`recipe.workers=0`), for comparison.

#[path = "../../runtime/tests/plugin_support/mod.rs"]
mod plugin_support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use plugin_support::{manifest, mp, wat_bytes};
use wazoo_client::{Acl, Client, ClientOptions, CreateMode};
use wazoo_runtime::abi::{CreateMode as RecipeMode, Reply, TreeOp};
use wazoo_testkit::{ServerOptions, TestEnsemble, WazooEnsemble};

const GIANT_BYTES: usize = 900_000;
const OP_BOUND: Duration = Duration::from_secs(2);

/// A module whose `call` runs `body` (a (result i64) expression), with
/// `data` at 1024, 80 pages of memory and an allocator that always hands
/// out the same region at 1 MiB (so batches of results never run it out).
fn module(name: &str, prefixes: &[&str], body: &str, data: &[u8]) -> Vec<u8> {
    let body = body.replace("$DATA_LEN", &data.len().to_string());
    let text = format!(
        r#"(module
  (import "wazoo" "tree" (func $tree (param i32 i32) (result i64)))
  (memory (export "memory") 80)
  (func $alloc (export "alloc") (param $n i32) (result i32) (i32.const 1048576))
  (func (export "call") (param $ptr i32) (param $len i32) (result i64)
    {body})
  (data (i32.const 1024) "{data}")
  (@custom "wazoo:recipe" "{manifest}"))"#,
        data = wat_bytes(data),
        manifest = wat_bytes(&mp(&manifest(name, "1.0.0", &["run"], prefixes))),
    );
    wat::parse_str(&text).unwrap_or_else(|e| panic!("bad WAT: {e}"))
}

/// An infinite loop: out of fuel, or past its deadline.
fn spin() -> Vec<u8> {
    module("spin", &[], "(loop $l (br $l)) (unreachable)", b"")
}

/// Batches of four reads of the 900 KB /giant, forever: the op limit, the
/// fuel or the deadline stops it, after hundreds of MB copied.
fn read_bomb() -> Vec<u8> {
    let ops = mp(&vec![
        TreeOp::Get {
            path: "/giant".into(),
            watch: None,
        };
        4
    ]);
    let body = "(loop $l (drop (call $tree (i32.const 1024) (i32.const $DATA_LEN))) (br $l)) (unreachable)";
    module("readbomb", &["/giant"], body, &ops)
}

/// One sequential create of a 900 KB node under /huge, then Done.
fn giant() -> Vec<u8> {
    let ops = mp(&vec![TreeOp::Create {
        path: "/huge/n-".into(),
        data: vec![7; GIANT_BYTES],
        mode: RecipeMode::PersistentSequential,
        acl: None,
    }]);
    let reply = mp(&Reply::Done(mp(&())));
    let reply_at = 1024 + ops.len();
    let mut data = ops.clone();
    data.extend_from_slice(&reply);
    let body = format!(
        "(drop (call $tree (i32.const 1024) (i32.const {}))) (i64.or (i64.shl (i64.const {reply_at}) (i64.const 32)) (i64.const {}))",
        ops.len(),
        reply.len()
    );
    module("giant", &["/huge"], &body, &data)
}

async fn connect(addr: &str) -> Client {
    let opts = ClientOptions::default().session_timeout(Duration::from_secs(20));
    Client::connect(addr, opts).await.expect("connect").0
}

fn p(lat: &mut [Duration], q: f64) -> Duration {
    lat.sort();
    lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)]
}

/// Writes of `path` in a loop until `stop`: each one's latency.
async fn writer(c: Client, path: String, stop: Arc<AtomicBool>) -> Vec<Duration> {
    let mut lat = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        c.set_data(&path, b"v", None)
            .await
            .unwrap_or_else(|e| panic!("a write of {path} failed: {e}"));
        let l = t.elapsed();
        assert!(
            l < OP_BOUND,
            "a write of {path} took {l:?} while hostile recipes ran"
        );
        lat.push(l);
    }
    lat
}

/// Calls `module` in a loop until `stop`, `gap` apart; counts the answers.
async fn hostile(
    c: Client,
    module: &'static str,
    gap: Duration,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicU64>,
) {
    while !stop.load(Ordering::Relaxed) {
        let reply = c
            .recipe_call(module, "run", &mp(&()))
            .await
            .unwrap_or_else(|e| panic!("{module} is answered: {e}"));
        let reply: Reply = wazoo_runtime::abi::decode(&reply).expect("a recipe reply");
        match (module, &reply) {
            ("giant", Reply::Done(_)) => {}
            ("giant", other) => panic!("the giant node's step: {other:?}"),
            (_, Reply::Error { .. }) => {}
            (_, other) => panic!("{module} must fail: {other:?}"),
        }
        answered.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(gap).await;
    }
}

/// Two writers (on the leader and on a follower) for `d`: their latencies.
async fn write_for(e: &WazooEnsemble, leader: usize, d: Duration, tag: &str) -> Vec<Duration> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (k, i) in [leader, (leader + 1) % 3].into_iter().enumerate() {
        let c = connect(&e.addr(i).to_string()).await;
        let path = format!("/w-{tag}-{k}");
        c.create(&path, b"", &Acl::open_unsafe(), CreateMode::Persistent)
            .await
            .unwrap();
        tasks.push(tokio::spawn(writer(c, path, Arc::clone(&stop))));
    }
    tokio::time::sleep(d).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("writer"));
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_recipes_do_not_stall_other_clients_on_a_3_member_ensemble() {
    let plugins = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        ("spin", spin()),
        ("readbomb", read_bomb()),
        ("giant", giant()),
    ] {
        std::fs::write(plugins.path().join(format!("{name}.wasm")), bytes).unwrap();
    }
    let mut opts = ServerOptions::default();
    if let Ok(n) = std::env::var("WAZOO_TEST_RECIPE_WORKERS") {
        opts = opts.cfg(format!("recipe.workers={n}"));
    }
    let opts = opts
        .binary(env!("CARGO_BIN_EXE_wazoo"))
        .tick_time_ms(500)
        .session_timeouts_ms(1000, 30_000)
        .arg("--plugins")
        .arg(plugins.path().to_string_lossy().to_string());
    let e = WazooEnsemble::start(3, opts).expect("start a 3-member ensemble");
    let leader = e
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader");
    let setup = connect(&e.addr(leader).to_string()).await;
    for (path, data) in [("/giant", vec![1; GIANT_BYTES]), ("/huge", Vec::new())] {
        setup
            .create(path, &data, &Acl::open_unsafe(), CreateMode::Persistent)
            .await
            .unwrap();
    }

    let mut quiet = write_for(&e, leader, Duration::from_secs(3), "quiet").await;

    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let mut load = Vec::new();
    // Two loops on the leader, and a loop and the bomb through followers
    // (forwarded: the steps run on the leader too); the giant node paced.
    let hostiles: [(&'static str, usize, u64); 5] = [
        ("spin", leader, 0),
        ("spin", leader, 0),
        ("spin", (leader + 1) % 3, 0),
        ("readbomb", (leader + 2) % 3, 0),
        ("giant", (leader + 1) % 3, 200),
    ];
    for (module, member, gap_ms) in hostiles {
        let c = connect(&e.addr(member).to_string()).await;
        load.push(tokio::spawn(hostile(
            c,
            module,
            Duration::from_millis(gap_ms),
            Arc::clone(&stop),
            Arc::clone(&answered),
        )));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut loaded = write_for(&e, leader, Duration::from_secs(8), "loaded").await;
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.expect("hostile caller");
    }

    let calls = answered.load(Ordering::Relaxed);
    eprintln!(
        "writes: quiet n={} p50={:?} p99={:?}; under hostile recipes n={} p50={:?} p99={:?} max={:?}; hostile calls answered: {calls}",
        quiet.len(),
        p(&mut quiet, 0.5),
        p(&mut quiet, 0.99),
        loaded.len(),
        p(&mut loaded, 0.5),
        p(&mut loaded, 0.99),
        p(&mut loaded, 1.0),
    );
    assert!(calls >= 10, "the hostile modules were called ({calls})");
    assert!(!loaded.is_empty(), "the other clients were served");
    // Every member still serves writes, and holds what the giant step wrote.
    for i in 0..3 {
        let c = connect(&e.addr(i).to_string()).await;
        c.sync("/huge").await.unwrap();
        let n = c.get_children("/huge").await.unwrap().len();
        assert!(n > 0, "member {i} holds the giant nodes");
        c.set_data("/giant", b"small", None)
            .await
            .unwrap_or_else(|err| panic!("member {i} serves writes: {err}"));
    }
}
