//! `wazoo recipe run` (docs/RECIPES.md, "Try a call without a server"): one
//! call of a module against an in-memory tree, with the real sandbox and
//! limits, printing the reply, the staged ops and the waits.

#[path = "../../runtime/tests/plugin_support/mod.rs"]
mod plugin_support;

use std::path::Path;
use std::process::Command;

use plugin_support::{manifest, mp, wat_bytes};

/// `wazoo recipe run ARGS...`: (success, stdout, stderr).
fn recipe_run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wazoo"))
        .arg("recipe")
        .arg("run")
        .args(args)
        .env("WAZOO_LOG", "error")
        .output()
        .expect("run wazoo");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn builtin(name: &str, dir: &Path) -> Option<String> {
    let (_, bytes) = wazoo::builtin::BUILTIN_RECIPES
        .iter()
        .find(|(n, _)| *n == format!("{name}.wasm"))?;
    let path = dir.join(format!("{name}.wasm"));
    std::fs::write(&path, bytes).unwrap();
    Some(path.to_string_lossy().into_owned())
}

// ZooKeeper Recipes and Solutions, "Locks", steps 1-2: the first acquirer
// of an empty tree creates its ephemeral sequential node and holds the lock;
// the run prints that create (owned by the calling session) and no wait.
#[test]
fn a_lock_acquire_on_an_empty_tree_prints_its_node_and_no_wait() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lock) = builtin("lock", dir.path()) else {
        eprintln!("skipped: this build has no built-in recipes (wasm target missing)");
        return;
    };
    let (ok, out, err) = recipe_run(&[
        &lock,
        "acquire",
        r#"{"path":"/locks/x"}"#,
        "--session",
        "0x5",
    ]);
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("module lock "), "{out}");
    assert!(out.contains("session 0x5"), "{out}");
    let node = "/locks/x/0000000000000005__lock__0000000000";
    assert!(out.contains(&format!("reply: done \"{node}\"")), "{out}");
    assert!(
        out.contains(&format!("create {node} \"\" (ephemeral, owner 0x5)")),
        "{out}"
    );
    assert!(out.contains("waits: 0\n"), "{out}");
    // A method the module does not have is an error with its reason.
    let (ok, out, _) = recipe_run(&[&lock, "nope", "null"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("reply: error -6: recipe \"lock\" has no method \"nope\""),
        "{out}"
    );
}

// docs/RECIPES.md, "Time in a recipe": a recipe learns the time from the
// mtime of its own write, which the leader stamps with its clock;
// `--now-ms` is that clock for the run. The lease recipe grants a lease
// until now + ttl_ms, and its write carries the time given.
#[test]
fn now_ms_is_the_clock_that_stamps_the_steps_writes() {
    let dir = tempfile::tempdir().unwrap();
    let Some(lease) = builtin("lease", dir.path()) else {
        eprintln!("skipped: this build has no built-in recipes (wasm target missing)");
        return;
    };
    let args = r#"{"name":"report","holder":"alice","ttl_ms":1500}"#;
    let (ok, out, err) = recipe_run(&[&lease, "acquire", args, "--now-ms", "1700000000000"]);
    assert!(ok, "{out}{err}");
    assert!(
        out.lines()
            .next()
            .unwrap()
            .ends_with(", now_ms 1700000000000"),
        "{out}"
    );
    assert!(out.contains("\"now_ms\":1700000000000"), "{out}");
    assert!(out.contains("\"expires_ms\":1700000001500"), "{out}");
    // The write that told the recipe the time: one op of the step's txn.
    assert!(out.contains("\n  set /leases \"\" (version "), "{out}");
}

/// Module "spin": `call` loops forever.
fn spin_module() -> Vec<u8> {
    let text = format!(
        r#"(module
  (memory (export "memory") 1)
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "call") (param i32 i32) (result i64)
    (loop $l (br $l))
    (i64.const 0))
  (@custom "wazoo:recipe" "{manifest}"))"#,
        manifest = wat_bytes(&mp(&manifest("spin", "1.0.0", &["spin"], &["/spin"]))),
    );
    wat::parse_str(&text).expect("valid WAT")
}

// A hostile module runs out of fuel under the real limits: the run ends,
// prints the error and stages nothing.
#[test]
fn a_module_that_loops_forever_runs_out_of_fuel_and_stages_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spin.wasm");
    std::fs::write(&path, spin_module()).unwrap();
    let path = path.to_string_lossy().into_owned();
    let (ok, out, err) = recipe_run(&[&path, "spin", "null", "--fuel", "100000"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("reply: error -1: recipe ran out of fuel (budget 100000)"),
        "{out}{err}"
    );
    assert!(out.contains("staged ops: 0\n"), "{out}");
    assert!(err.contains("the call failed"), "{err}");
}

// wazoo's own four-letter word `recp` (README, "Four-letter words") answers
// on every member of an ensemble, as ZooKeeper's words do (ZooKeeper
// Administrator's Guide, "The Four Letter Words"): the modules each member
// loaded, their counters and the pending waits.
#[test]
fn recp_answers_on_every_member_of_an_ensemble() {
    use wazoo_testkit::{ServerOptions, TestEnsemble, WazooEnsemble};
    let dir = tempfile::tempdir().unwrap();
    if builtin("lock", dir.path()).is_none() {
        eprintln!("skipped: this build has no built-in recipes (wasm target missing)");
        return;
    }
    let opts = ServerOptions::default()
        .binary(env!("CARGO_BIN_EXE_wazoo"))
        .arg("--plugins")
        .arg(dir.path().to_string_lossy().to_string());
    let ens = WazooEnsemble::start(3, opts).expect("start a 3-member ensemble");
    ens.wait_for_leader(std::time::Duration::from_secs(30))
        .expect("a leader");
    for i in 0..3 {
        // The leader deploys the directory's module once it is compiled
        // (on a worker, not the member's thread): a few seconds at most.
        wazoo_testkit::wait_for_recipes(ens.addr(i), &["lock"], std::time::Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("member {i}: {e:#}"));
        let answer = wazoo_testkit::four_letter_word(ens.addr(i), "recp").expect("recp answers");
        assert!(answer.contains("module=lock "), "member {i}: {answer:?}");
        assert!(
            answer.ends_with("pending_waits=0\n"),
            "member {i}: {answer:?}"
        );
    }
    // A call of a module not served is counted (under `*`) by the leader,
    // which commits its counters: every member shows them within 5 s.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let (c, _) = wazoo_client::Client::connect(&ens.addr(0).to_string(), Default::default())
            .await
            .expect("connect");
        let reply = c
            .recipe_call("nosuch", "x", &mp(&()))
            .await
            .expect("a reply");
        assert!(
            matches!(
                wazoo::plugin::abi::decode::<wazoo::plugin::abi::Reply>(&reply),
                Ok(wazoo::plugin::abi::Reply::Error { code: -6, .. })
            ),
            "{reply:?}"
        );
    });
    for i in 0..3 {
        wazoo_testkit::wait_for(
            &format!("member {i} to count the call of a module not served"),
            std::time::Duration::from_secs(30),
            || {
                let answer = wazoo_testkit::four_letter_word(ens.addr(i), "recp").ok()?;
                answer
                    .lines()
                    .any(|l| {
                        l.starts_with("module=* ")
                            && l.contains(" errors_by_kind=unknown_module:1 ")
                    })
                    .then_some(())
            },
        )
        .unwrap();
    }
}
