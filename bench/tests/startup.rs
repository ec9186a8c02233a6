//! `wazoo-bench startup` end to end, tiny: two fresh 3-member wazoo
//! ensembles, one compiling its built-in recipe modules and one with them
//! off, each written to for two one-second windows with no error reply.
//! Speed is not asserted: the machines are noisy; the figure itself is in
//! docs/BENCHMARKS.md.
//!
//! The writes are the ZooKeeper client protocol's setData (Programmer's
//! Guide, "ZooKeeper Sessions"), spread over the members of an ensemble
//! (Administrator's Guide, "Clustered (Multi-Server) Setup").

use std::process::Command;

use serde_json::Value;

mod common;
use common::wazoo_server;

#[test]
fn startup_writes_to_fresh_ensembles_with_and_without_compiling() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("startup.json");
    let output = Command::new(env!("CARGO_BIN_EXE_wazoo-bench"))
        .args([
            "startup",
            "--seconds",
            "2",
            "--sessions",
            "3",
            "--inflight",
            "2",
        ])
        .arg("--wazoo-bin")
        .arg(wazoo_server())
        .arg("--out")
        .arg(&out)
        .output()
        .expect("wazoo-bench startup runs");
    assert!(
        output.status.success(),
        "wazoo-bench startup failed: {}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let runs: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let kinds: Vec<bool> = runs
        .iter()
        .map(|r| r["builtins_compiling"].as_bool().unwrap())
        .collect();
    assert_eq!(kinds, [true, false]);
    for r in &runs {
        let windows = r["writes_per_sec"].as_array().unwrap();
        assert_eq!(windows.len(), 2, "{r}");
        assert!(
            windows.iter().all(|w| w.as_f64().unwrap() > 0.0),
            "every window wrote: {r}"
        );
        assert_eq!(r["errors"].as_u64(), Some(0), "{r}");
    }
}
