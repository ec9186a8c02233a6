//! `wazoo-bench lean` end to end against a standalone wazoo, tiny windows:
//! every workload's requests are answered and counted, with no error
//! reply, in the closed loop and at a fixed rate; the create workload's
//! clean-up deletes every znode it made. Speed is not asserted: the
//! machines are noisy.
//!
//! The requests are the ZooKeeper client protocol's getData, setData and
//! create (Programmer's Guide, "ZooKeeper Sessions" and "Sequence Nodes --
//! Unique Naming"), and wazoo's recipe calls (a no-op and a counter
//! increment), natively and as node calls (docs/RECIPES.md, "Calling from
//! any client").
//!
//! Needs a wazoo server binary (`$WAZOO_BIN`, else target/release/wazoo,
//! else target/debug/wazoo) and the recipe modules (`$WAZOO_RECIPES_DIR`,
//! else scripts/build-recipes.sh builds them), as tests/quick_bench.rs.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::wazoo_server;

#[test]
fn lean_generator_counts_replies_without_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lean.json");
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_wazoo-bench"))
        .args(["lean", "--quick", "--systems", "wazoo"])
        .args([
            "--workloads",
            "get,set,create,call,node-call,call-write,node-call-write",
        ])
        .args(["--sessions", "3", "--inflight", "4", "--keys", "20"])
        .args(["--duration-secs", "0.4", "--warmup-secs", "0.5"])
        .args(["--rates", "50"])
        .arg("--wazoo-bin")
        .arg(wazoo_server())
        .arg("--out")
        .arg(&out)
        .output()
        .expect("wazoo-bench lean runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "wazoo-bench lean failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "a tiny lean run is short"
    );

    let json: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let closed = json["closed"].as_array().unwrap();
    let names: Vec<&str> = closed
        .iter()
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "get",
            "set",
            "create",
            "call",
            "node-call",
            "call-write",
            "node-call-write"
        ]
    );
    for r in closed.iter().chain(json["fixed_rate"].as_array().unwrap()) {
        let what = format!("{} {} at {:?}", r["system"], r["workload"], r["percent"]);
        assert_eq!(r["system"], "wazoo", "{what}");
        assert!(r["ops"].as_u64().unwrap() > 0, "{what}: no reply counted");
        assert_eq!(
            r["latency"]["count"], r["ops"],
            "{what}: every counted reply has a latency"
        );
        assert!(
            r["errors"].as_object().unwrap().is_empty(),
            "{what}: error replies {}",
            r["errors"]
        );
        assert!(r["server_cpu_us_per_op"].as_f64().unwrap() >= 0.0, "{what}");
        assert!(r["gen_cpu_us_per_op"].as_f64().unwrap() >= 0.0, "{what}");
    }
    assert!(closed.iter().all(|r| r["percent"].is_null()));
    let fixed = json["fixed_rate"].as_array().unwrap();
    assert_eq!(fixed.len(), 7, "one fixed-rate window per workload");
    assert!(fixed.iter().all(|r| r["percent"] == 50.0));
    // Every sequential child of the create workload and its parent deleted.
    assert!(
        json["cleanup_errors"].as_object().unwrap().is_empty(),
        "clean-up deletes failed: {}",
        json["cleanup_errors"]
    );
    assert!(json["ratios"].is_object());
    assert!(stdout.contains("| node-call |"), "{stdout}");
    assert!(json["affinity"]["wazoo"].is_string());
}
