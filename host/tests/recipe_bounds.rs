//! A recipe's writes are held to jute.maxbuffer on a 3-member ensemble
//! (ZooKeeper Administrator's Guide, "Unsafe Options", jute.maxbuffer: no
//! client can write more in one request). A hand-written module stages
//! three creates of 900 KB in one step, each batch under the runtime's
//! message cap: only the first fits, the others fail with BadArguments, the
//! step commits one node, every member serves writes afterwards and after
//! the ensemble restarts.

#[path = "../../runtime/tests/plugin_support/mod.rs"]
mod plugin_support;

use std::time::Duration;

use plugin_support::{manifest, mp, wat_bytes};
use wazoo_client::{Acl, Client, ClientOptions, CreateMode};
use wazoo_runtime::abi::{CreateMode as RecipeMode, Reply, TreeOp};
use wazoo_testkit::{ServerOptions, TestEnsemble, WazooEnsemble};

const NODE_BYTES: usize = 900_000;

/// Module "grow": `call` sends the same batch (one sequential create of
/// NODE_BYTES under /big) three times, ignores the results and answers
/// Done. Its memory holds the batch at 1024 and the reply after it.
fn grow_module() -> Vec<u8> {
    let ops = mp(&vec![TreeOp::Create {
        path: "/big/n-".into(),
        data: vec![7; NODE_BYTES],
        mode: RecipeMode::PersistentSequential,
        acl: None,
    }]);
    let reply = mp(&Reply::Done(mp(&())));
    let reply_at = 1024 + ops.len() + 16;
    let text = format!(
        r#"(module
  (import "wazoo" "tree" (func $tree (param i32 i32) (result i64)))
  (memory (export "memory") 40)
  (global $bump (mut i32) (i32.const 1310720))
  (func $alloc (export "alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $bump))
    (global.set $bump (i32.add (global.get $bump) (local.get $n)))
    (local.get $p))
  (func (export "call") (param $ptr i32) (param $len i32) (result i64)
    (drop (call $tree (i32.const 1024) (i32.const {ops_len})))
    (drop (call $tree (i32.const 1024) (i32.const {ops_len})))
    (drop (call $tree (i32.const 1024) (i32.const {ops_len})))
    (i64.or (i64.shl (i64.const {reply_at}) (i64.const 32)) (i64.const {reply_len})))
  (data (i32.const 1024) "{ops}")
  (data (i32.const {reply_at}) "{reply}")
  (@custom "wazoo:recipe" "{manifest}"))"#,
        ops_len = ops.len(),
        reply_len = reply.len(),
        ops = wat_bytes(&ops),
        reply = wat_bytes(&reply),
        manifest = wat_bytes(&mp(&manifest("grow", "1.0.0", &["grow"], &["/big"]))),
    );
    wat::parse_str(&text).expect("valid WAT")
}

async fn connect(hosts: &str) -> Client {
    let opts = ClientOptions::default().session_timeout(Duration::from_secs(10));
    Client::connect(hosts, opts).await.expect("connect").0
}

/// On every member, after a sync: /big's children and their sizes.
async fn big_children(e: &WazooEnsemble) -> Vec<Vec<usize>> {
    let mut all = Vec::new();
    for i in 0..3 {
        let c = connect(&e.addr(i).to_string()).await;
        c.sync("/big").await.unwrap();
        let mut sizes = Vec::new();
        for name in c.get_children("/big").await.unwrap() {
            let (data, _) = c.get_data(&format!("/big/{name}")).await.unwrap();
            sizes.push(data.len());
        }
        all.push(sizes);
    }
    all
}

async fn every_member_writes(e: &WazooEnsemble, tag: &str) {
    for i in 0..3 {
        let c = connect(&e.addr(i).to_string()).await;
        c.create(
            &format!("/w-{tag}-{i}"),
            b"x",
            &Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .await
        .unwrap_or_else(|err| panic!("member {i} serves writes ({tag}): {err}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recipe_step_past_jute_maxbuffer_commits_only_what_fits() {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::write(plugins.path().join("grow.wasm"), grow_module()).unwrap();
    let opts = ServerOptions::default()
        .binary(env!("CARGO_BIN_EXE_wazoo"))
        .tick_time_ms(500)
        .session_timeouts_ms(1000, 30_000)
        // The bound checked here is jute.maxbuffer, not the step's deadline:
        // a debug-built member staging 2.7 MB through the module boundary
        // once passed the default 100 ms on a busy machine.
        .cfg("recipe.deadlineMs=10000")
        .arg("--plugins")
        .arg(plugins.path().to_string_lossy().to_string());
    let mut e = WazooEnsemble::start(3, opts).expect("start a 3-member ensemble");
    let leader = e
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader");
    let follower = connect(&e.addr((leader + 1) % 3).to_string()).await;
    follower
        .create("/big", b"", &Acl::open_unsafe(), CreateMode::Persistent)
        .await
        .unwrap();
    // Through a follower, so the step runs on the leader and is forwarded.
    let reply = follower
        .recipe_call("grow", "grow", &mp(&()))
        .await
        .expect("the call is answered");
    assert!(
        matches!(
            wazoo_runtime::abi::decode::<Reply>(&reply),
            Ok(Reply::Done(_))
        ),
        "{reply:?}"
    );
    assert_eq!(
        big_children(&e).await,
        vec![vec![NODE_BYTES]; 3],
        "one 900 KB node on every member: the second and third creates would pass jute.maxbuffer"
    );
    every_member_writes(&e, "after").await;
    for i in 0..3 {
        e.restart(i).expect("the member restarts");
    }
    e.wait_for_leader(Duration::from_secs(30))
        .expect("a leader after the restart");
    every_member_writes(&e, "restarted").await;
    assert_eq!(big_children(&e).await, vec![vec![NODE_BYTES]; 3]);
}
