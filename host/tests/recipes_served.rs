//! Recipe modules served by a running wazoo (docs/RECIPES.md): `wazoo serve
//! --plugins DIR`, recipe calls over the client port from the client crate,
//! watch callbacks and notifications, sandbox errors reaching the caller,
//! and on a 3-member ensemble a waiting recipe that keeps working after the
//! leader is killed. The modules are the SDK-built ones in recipes-wasm/.

// Shared with the runtime's own tests, which it mostly serves.
mod common;
#[path = "../../runtime/tests/plugin_support/mod.rs"]
mod plugin_support;

use std::time::Duration;

use plugin_support::{mp, recipes_dir};
use wazoo::plugin::abi::{self, Notification, Reply};
use wazoo_client::{Client, ClientOptions, RecipeNotifications};
use wazoo_testkit::{ServerOptions, TestEnsemble, WazooEnsemble, WazooServer};

/// A plugins directory holding only the counter module (each member
/// compiles what it loads at start), and server options using it.
fn options() -> (tempfile::TempDir, ServerOptions) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(
        recipes_dir().join("counter.wasm"),
        dir.path().join("counter.wasm"),
    )
    .expect("copy counter.wasm");
    let opts = ServerOptions::default()
        .binary(env!("CARGO_BIN_EXE_wazoo"))
        .arg("--plugins")
        .arg(dir.path().to_string_lossy().to_string());
    (dir, opts)
}

async fn connect(hosts: &str) -> Client {
    let opts = ClientOptions {
        session_timeout: Duration::from_secs(10),
        ..Default::default()
    };
    Client::connect(hosts, opts).await.expect("connect").0
}

async fn call<A: serde::Serialize>(c: &Client, module: &str, method: &str, args: &A) -> Reply {
    let body = c
        .recipe_call(module, method, &mp(args))
        .await
        .expect("recipe call");
    abi::decode(&body).expect("a recipe reply is a MessagePack Reply")
}

fn done<T: serde::de::DeserializeOwned>(r: &Reply) -> T {
    match r {
        Reply::Done(v) => abi::decode(v).expect("result decodes"),
        other => panic!("expected Done, got {other:?}"),
    }
}

/// Polls /zookeeper/recipes (on `c`'s member) until it shows `n` pending
/// waits (60 s at most: a member restarted on a busy machine recompiles
/// its modules first; CI once took more than 10 s).
async fn until_pending_waits(c: &Client, n: usize) {
    let want = format!("pending_waits={n}\n");
    for _ in 0..1200 {
        let (data, _) = c
            .get_data("/zookeeper/recipes")
            .await
            .expect("recipes node");
        if String::from_utf8_lossy(&data).contains(&want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("/zookeeper/recipes never showed {want:?}");
}

/// counter.wait_for through the client's call helper (which waits for the
/// Finished and asks again after a reconnection), in a task.
fn spawn_wait_for(
    waiter: Client,
    name: &'static str,
    at_least: i64,
) -> tokio::task::JoinHandle<Result<i64, wazoo_client::recipes::RecipeError>> {
    tokio::spawn(async move {
        wazoo_client::recipes::call(&waiter, "counter", "wait_for", &WaitFor { name, at_least })
            .await
    })
}

/// `n` counter writes on nodes of their own (txns, to pass snapCount).
async fn pad_writes(c: &Client, n: usize) {
    for i in 0..n {
        let name = format!("pad{i}");
        call(c, "counter", "incr", &Incr { name: &name, by: 1 }).await;
    }
}

async fn next_notification(n: &mut RecipeNotifications) -> Notification {
    let got = tokio::time::timeout(Duration::from_secs(20), n.recv())
        .await
        .expect("a recipe notification within 20 s")
        .expect("notification stream open");
    abi::decode(&got.payload).expect("a notification is a MessagePack Notification")
}

#[derive(serde::Serialize)]
struct Incr<'a> {
    name: &'a str,
    by: i64,
}

#[derive(serde::Serialize)]
struct WaitFor<'a> {
    name: &'a str,
    at_least: i64,
}

/// The waiter's side of counter.wait_for: Wait, then (after `bump`) the
/// recipe's own message and the host's Finished for the token.
async fn wait_then_finish(waiter: &Client, hosts_for_bumper: &str, name: &str) {
    let mut notes = waiter.recipe_notifications();
    let r = call(
        waiter,
        "counter",
        "wait_for",
        &WaitFor { name, at_least: 5 },
    )
    .await;
    let token = match r {
        Reply::Wait { token } => token,
        other => panic!("expected Wait, got {other:?}"),
    };
    let bumper = connect(hosts_for_bumper).await;
    assert_eq!(
        done::<i64>(&call(&bumper, "counter", "incr", &Incr { name, by: 5 }).await),
        5
    );
    let mut got = [
        next_notification(&mut notes).await,
        next_notification(&mut notes).await,
    ];
    got.sort_by_key(|n| matches!(n, Notification::Finished { .. }));
    match &got[0] {
        Notification::Message { module, payload } => {
            assert_eq!(module, "counter");
            let (what, path, n): (String, String, i64) = abi::decode(payload).unwrap();
            assert_eq!((what.as_str(), n), ("reached", 5));
            assert_eq!(path, format!("/counters/{name}"));
        }
        other => panic!("expected the recipe's message, got {other:?}"),
    }
    match &got[1] {
        Notification::Finished {
            module,
            token: t,
            reply,
        } => {
            assert_eq!((module.as_str(), t), ("counter", &token));
            assert_eq!(done::<i64>(reply), 5);
        }
        other => panic!("expected Finished, got {other:?}"),
    }
    bumper.close().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_recipe_call_writes_the_tree_atomically_and_answers() {
    let (_plugins, opts) = options();
    let server = WazooServer::start(opts).expect("start wazoo with --plugins");
    let hosts = server.addr().to_string();
    let c = connect(&hosts).await;
    assert_eq!(
        done::<i64>(&call(&c, "counter", "incr", &Incr { name: "a", by: 2 }).await),
        2
    );
    assert_eq!(
        done::<i64>(&call(&c, "counter", "incr", &Incr { name: "a", by: 3 }).await),
        5
    );
    // The recipe's writes are ordinary znodes, visible to every client.
    let (data, stat) = c.get_data("/counters/a").await.expect("get");
    assert_eq!(data, b"5");
    assert_eq!(stat.version, 1);
    assert_eq!(done::<i64>(&call(&c, "counter", "get", &"a").await), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_recipe_is_finished_by_its_watch_callback() {
    let (_plugins, opts) = options();
    let server = WazooServer::start(opts).expect("start");
    let hosts = server.addr().to_string();
    let waiter = connect(&hosts).await;
    wait_then_finish(&waiter, &hosts, "w").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_and_call_errors_reach_the_caller_and_the_member_stays_healthy() {
    let (_plugins, opts) = options();
    let metrics_port = wazoo_testkit::free_port();
    let opts = opts.cfg(format!("metricsProvider.httpPort={metrics_port}"));
    let server = WazooServer::start(opts).expect("start");
    let hosts = server.addr().to_string();
    let c = connect(&hosts).await;
    let cases: Vec<(&str, &str, Vec<u8>, i32, &str)> = vec![
        // A path outside the module's declared prefixes.
        (
            "counter",
            "escape",
            mp(&"/elsewhere"),
            -102,
            "outside its declared prefixes",
        ),
        ("counter", "no_such_method", mp(&()), -6, "no_such_method"),
        ("no_such_module", "x", mp(&()), -6, "no_such_module"),
        // Arguments the method cannot decode.
        ("counter", "incr", mp(&"not a struct"), -8, "bad arguments"),
    ];
    for (module, method, args, code, needle) in cases {
        let body = c.recipe_call(module, method, &args).await.expect("reply");
        match abi::decode::<Reply>(&body).unwrap() {
            Reply::Error { code: got, message } => {
                assert_eq!(got, code, "{module}.{method}: {message}");
                assert!(message.contains(needle), "{module}.{method}: {message}");
            }
            other => panic!("{module}.{method}: expected an error, got {other:?}"),
        }
    }
    assert!(c.exists("/elsewhere").await.unwrap().is_none());

    // Every failure is counted by kind, those before any guest code ran
    // too: the unknown method and the undecodable arguments under the
    // module, the call of a module not served under `*`.
    let recp = wazoo_testkit::four_letter_word(server.addr(), "recp").expect("recp");
    let line = |m: &str| {
        recp.lines()
            .find(|l| l.starts_with(&format!("module={m} ")))
            .unwrap_or_else(|| panic!("no module={m} in {recp}"))
            .to_string()
    };
    let counter = line("counter");
    assert!(counter.contains(" calls=3 errors=3 "), "{counter}");
    assert!(
        counter
            .contains(" errors_by_kind=bad_arguments:1,path_outside_prefixes:1,unknown_method:1 "),
        "{counter}"
    );
    let unserved = line("*");
    assert!(unserved.contains(" calls=1 errors=1 "), "{unserved}");
    assert!(
        unserved.contains(" errors_by_kind=unknown_module:1 "),
        "{unserved}"
    );
    // The same figures for Prometheus; and `*` is no deployed module.
    let body = common::get_metrics(metrics_port);
    for sample in [
        r#"wazoo_recipe_errors_by_kind_total{module="counter",kind="unknown_method"} 1"#,
        r#"wazoo_recipe_errors_by_kind_total{module="counter",kind="bad_arguments"} 1"#,
        r#"wazoo_recipe_errors_by_kind_total{module="*",kind="unknown_module"} 1"#,
    ] {
        assert!(body.contains(sample), "{sample} not in:\n{body}");
    }
    let listed: Vec<String> = c
        .deployed_recipes()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(listed, ["counter"]);

    assert_eq!(
        done::<i64>(&call(&c, "counter", "incr", &Incr { name: "h", by: 1 }).await),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_recipe_keeps_working_after_the_leader_is_killed() {
    let (_plugins, opts) = options();
    let mut ens = WazooEnsemble::start(3, opts).expect("start a 3-member ensemble");
    let leader = ens
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader");
    // Every member serves counter (compiled, deployed) before the calls.
    for i in 0..3 {
        wazoo_testkit::wait_for_recipes(ens.addr(i), &["counter"], Duration::from_secs(120))
            .expect("counter is deployed");
    }
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let waiter_at = ens.addr(followers[0]).to_string();
    let bumper_at = ens.addr(followers[1]).to_string();
    let waiter = connect(&waiter_at).await;
    // The client's call helper: it waits for the Finished notification, and
    // asks again after a reconnection (every member drops its clients when
    // the leader goes, and a notification pushed while a client is away is
    // not kept for it; wait_for is safe to repeat).
    let waiting = spawn_wait_for(waiter, "f", 5);
    // Wait until the registration is replicated, then kill the leader that
    // ran the call.
    let probe = connect(&bumper_at).await;
    until_pending_waits(&probe, 1).await;
    probe.close().await.ok();
    ens.kill(leader);
    let bumper = connect(&bumper_at).await;
    let mut bumped = None;
    for _ in 0..100 {
        match bumper
            .recipe_call("counter", "incr", &mp(&Incr { name: "f", by: 5 }))
            .await
        {
            Ok(b) => {
                bumped = Some(b);
                break;
            }
            // Until the survivors elect a new leader.
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let bumped: Reply = abi::decode(&bumped.expect("incr after failover")).unwrap();
    assert_eq!(done::<i64>(&bumped), 5);
    let got = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiting call finishes within 30 s")
        .unwrap()
        .expect("wait_for succeeds");
    assert_eq!(got, 5);
}

/// `wazoo cli -c "call ..."`: (exit code, stdout, stderr).
async fn cli(hosts: &str, cmd: &str) -> (i32, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = tokio::time::timeout(
        Duration::from_secs(30),
        wazoo_client::shell::run_command(
            hosts,
            cmd,
            wazoo_client::shell::ShellOptions::default(),
            &mut out,
            &mut err,
        ),
    )
    .await
    .expect("the cli command finishes")
    .expect("the shell runs");
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_calls_recipes_with_json_and_waits_for_a_waiting_call() {
    let (_plugins, opts) = options();
    let server = WazooServer::start(opts).expect("start");
    let hosts = server.addr().to_string();
    let (code, out, err) = cli(&hosts, r#"call counter incr '{"name":"s","by":4}'"#).await;
    assert_eq!((code, out.as_str(), err.as_str()), (0, "4\n", ""));

    let h = hosts.clone();
    let waiting = tokio::spawn(async move {
        cli(&h, r#"call counter wait_for '{"name":"s","at_least":6}'"#).await
    });
    // Once the wait is registered (visible in /zookeeper/recipes), bump it.
    let c = connect(&hosts).await;
    until_pending_waits(&c, 1).await;
    call(&c, "counter", "incr", &Incr { name: "s", by: 2 }).await;
    let (code, out, err) = waiting.await.unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("waiting (token 6:/counters/s)..."), "{out}");
    assert!(out.ends_with("\n6\n"), "{out}");

    let (code, _, err) = cli(&hosts, r#"call counter escape '"/x"'"#).await;
    assert_ne!(code, 0);
    assert!(err.contains("outside its declared prefixes"), "{err}");
    let (code, _, err) = cli(&hosts, "call counter incr '{not json'").await;
    assert_ne!(code, 0);
    assert!(err.contains("not JSON"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_modules_fail_their_calls_and_the_served_member_stays_healthy() {
    use plugin_support::{manifest, wat_module};
    let (plugins, opts) = options();
    let spin = "(loop $l (br $l)) (unreachable)";
    let bomb =
        "(loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) (i64.const 0)";
    let trap = "(drop (i32.div_s (i32.const 1) (i32.const 0))) (i64.const 0)";
    let bad_ptr = "(i64.const 0x7fff000000000010)";
    let cases = [
        ("spin", spin, "ran out of fuel"),
        ("bomb", bomb, "memory cap"),
        ("trap", trap, "divide by zero"),
        ("badptr", bad_ptr, "out-of-bounds"),
    ];
    for (name, body, _) in &cases {
        let m = manifest(name, "1.0.0", &["go"], &["/"]);
        std::fs::write(
            plugins.path().join(format!("{name}.wasm")),
            wat_module(&m, "", body, b""),
        )
        .unwrap();
    }
    let server = WazooServer::start(opts.cfg("recipe.deadlineMs=2000")).expect("start");
    let hosts = server.addr().to_string();
    let c = connect(&hosts).await;
    for (name, _, needle) in &cases {
        match call(&c, name, "go", &()).await {
            Reply::Error { message, .. } => assert!(message.contains(needle), "{name}: {message}"),
            other => panic!("{name}: expected an error, got {other:?}"),
        }
    }
    // The member is unaffected: other calls and plain requests work.
    assert_eq!(
        done::<i64>(&call(&c, "counter", "incr", &Incr { name: "ok", by: 1 }).await),
        1
    );
    c.create(
        "/still-here",
        b"",
        &wazoo_client::Acl::open_unsafe(),
        wazoo_client::CreateMode::Persistent,
    )
    .await
    .expect("a plain create after the hostile calls");
    let (data, _) = c
        .get_data("/zookeeper/recipes")
        .await
        .expect("recipes node");
    let text = String::from_utf8_lossy(&data).to_string();
    assert!(
        text.contains("module=spin") && text.contains("errors=1"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_waits_survive_a_restart_from_snapshot_and_log() {
    // A small snapCount: the wait is in a snapshot (format 2) as well as in
    // the log after it.
    let (_plugins, opts) = options();
    let mut server = WazooServer::start(opts.cfg("snapCount=4")).expect("start");
    let hosts = server.addr().to_string();
    let opts = ClientOptions {
        session_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    let waiter = Client::connect(&hosts, opts).await.expect("connect").0;
    let bumper = connect(&hosts).await;
    pad_writes(&bumper, 6).await;
    let waiting = spawn_wait_for(waiter, "r", 3);
    until_pending_waits(&bumper, 1).await;
    pad_writes(&bumper, 6).await;
    server.kill();
    server.restart().expect("restart");
    let bumper = connect(&hosts).await;
    until_pending_waits(&bumper, 1).await;
    call(&bumper, "counter", "incr", &Incr { name: "r", by: 3 }).await;
    let got = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiting call finishes after the restart")
        .unwrap()
        .expect("wait_for succeeds");
    assert_eq!(got, 3);
}

// docs/RECIPES.md, "Built-in recipes as a member starts": a fresh member
// serves sessions while it compiles its built-in modules in the background
// (ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a connected
// session's requests are served); a plain request is answered meanwhile,
// and a call of a built-in made before it is loaded waits for it and is
// served, never answered Unimplemented as a module the member does not
// know.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_of_a_builtin_right_after_a_fresh_start_is_served() {
    if wazoo::builtin::BUILTIN_RECIPES.is_empty() {
        eprintln!("skipped: this build has no built-in recipes (wasm target missing)");
        return;
    }
    // A fresh data directory, so a fresh compile cache: the member
    // compiles every built-in as it starts.
    let opts = ServerOptions::default()
        .binary(env!("CARGO_BIN_EXE_wazoo"))
        .cfg("wazoo.recipes.builtin=true");
    let server = WazooServer::start(opts).expect("start wazoo with its built-in recipes");
    let c = connect(&server.addr().to_string()).await;
    let lock_loaded = |answer: &str| answer.lines().any(|l| l.starts_with("module=lock "));
    let loaded_first =
        lock_loaded(&wazoo_testkit::four_letter_word(server.addr(), "recp").expect("recp answers"));
    c.create(
        "/plain",
        b"",
        &wazoo_client::Acl::open_unsafe(),
        wazoo_client::CreateMode::Persistent,
    )
    .await
    .expect("a plain create while the built-ins load");
    let lock = wazoo_client::recipes::Lock::new(&c, "/locks/first");
    let node = tokio::time::timeout(Duration::from_secs(600), lock.acquire())
        .await
        .expect("the call is answered once the lock module is loaded")
        .expect("the built-in lock serves the first call");
    assert!(node.starts_with("/locks/first/"), "{node}");
    assert!(
        lock_loaded(&wazoo_testkit::four_letter_word(server.addr(), "recp").expect("recp")),
        "served by the loaded module"
    );
    if loaded_first {
        eprintln!("note: the lock module was loaded before the call was made");
    }
}
