//! The bench end to end against both systems with tiny sizes: every
//! standalone workload, the sessions sweep (standalone, two counts) and the
//! recipe workloads (recipe-call, and lock and queue on 3-member ensembles
//! against kazoo) run, and the report
//! (Markdown, JSON, SVG plots) is well formed. Speed is not asserted: the
//! machines are noisy.
//!
//! Needs Apache ZooKeeper (the Debian package), a wazoo server binary:
//! `$WAZOO_BIN`, else `target/release/wazoo`, else `target/debug/wazoo`
//! (build one first, e.g. `cargo build -p wazoo`), the wasm32 target for
//! scripts/build-recipes.sh (or `$WAZOO_RECIPES_DIR` with built modules)
//! and Python with kazoo (`$PYTHON`, else python3).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::wazoo_server;

#[test]
fn quick_bench_writes_a_well_formed_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.json");
    let report = dir.path().join("report.md");
    let started = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_wazoo-bench"))
        .args(["--quick", "--topology", "standalone"])
        .args([
            "--workloads",
            "create,get,exists-watch,fanout,churn,memory,recovery,recipe-call,lock,queue,sweep",
        ])
        .args(["--sessions-sweep", "1,3", "--sweep-workload", "get"])
        .args(["--sweep-duration-secs", "0.3"])
        .args(["--duration-secs", "0.5", "--warmup-secs", "0.2"])
        .args(["--sessions", "2", "--inflight", "2", "--keys", "50"])
        .args(["--watch-paths", "50", "--fanout-watchers", "5,10"])
        .args(["--fanout-rounds", "2", "--churn-sessions", "2"])
        .args(["--churn-duration-secs", "0.5", "--nodes", "2000"])
        .args(["--recipe-call-samples", "300", "--recipe-sessions", "4"])
        .args(["--recipe-duration-secs", "0.5"])
        .args(["--time-limit-secs", "170"])
        .arg("--wazoo-bin")
        .arg(wazoo_server())
        .arg("--out")
        .arg(&out)
        .arg("--report")
        .arg(&report)
        .status()
        .expect("wazoo-bench runs");
    assert!(status.success(), "wazoo-bench failed: {status}");
    assert!(
        started.elapsed() < Duration::from_secs(180),
        "the tiny run is bounded by --time-limit-secs"
    );

    let json: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(json["complete"], true);
    let systems = ["zookeeper", "wazoo"];
    let workloads = json["workloads"].as_array().unwrap();
    let names: Vec<&str> = workloads
        .iter()
        .map(|w| w["workload"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["create", "get", "exists-watch"]);
    for w in workloads {
        for s in systems {
            let run = &w["runs"][s];
            assert!(run["failure"].is_null(), "{s} {}: {run}", w["workload"]);
            assert!(run["ops"].as_u64().unwrap() > 0, "{s}: {run}");
            assert_eq!(run["latency_cdf_us"].as_array().unwrap().len(), 26);
        }
    }
    for s in systems {
        let fan = json["fanout"]["runs"][s].as_array().unwrap();
        assert_eq!(fan.len(), 2, "{s}: one run per watcher count");
        for (run, n) in fan.iter().zip([5u64, 10]) {
            assert!(run["failure"].is_null(), "{s} fanout: {run}");
            assert_eq!(run["watchers"], n);
            assert_eq!(run["rounds"].as_array().unwrap().len(), 2);
            assert_eq!(run["delivery"]["count"].as_u64().unwrap(), 2 * n);
        }
        let churn = &json["churn"]["runs"][s];
        assert!(churn["failure"].is_null(), "{s} churn: {churn}");
        assert!(churn["cycles"].as_u64().unwrap() > 0, "{s}: {churn}");
        assert_eq!(churn["leftover_ephemerals"], 0, "{s}: {churn}");

        let mem = &json["memory"]["runs"][s];
        assert!(mem["failure"].is_null(), "{s} memory: {mem}");
        let restarts = mem["restarts"].as_array().unwrap();
        assert_eq!(restarts.len(), 1, "{s}: --quick restarts once");
        let r = &restarts[0];
        assert!(r["failure"].is_null(), "{s} recovery: {r}");
        assert!(r["answered_ms"].as_f64().unwrap() > 0.0, "{s}: {r}");
        // The tree survived: 2000 leaves, 2 parents, /mem, and the rest.
        assert!(r["znodes_after"].as_u64().unwrap() >= 2003, "{s}: {r}");
    }

    let points = json["sweep"]["points"].as_array().unwrap();
    assert_eq!(json["sweep"]["workload"], "get");
    assert_eq!(points.len(), 2, "one point per session count");
    for (p, n) in points.iter().zip([1u64, 3]) {
        assert_eq!(p["sessions"], n);
        for s in systems {
            let run = &p["runs"][s];
            assert!(run["failure"].is_null(), "sweep {s} at {n}: {run}");
            assert!(run["ops"].as_u64().unwrap() > 0, "sweep {s} at {n}: {run}");
        }
    }

    let recipes = &json["recipes"];
    let call = &recipes["recipe_call"]["run"];
    assert!(call["failure"].is_null(), "recipe-call: {call}");
    assert_eq!(call["call"]["count"], 300);
    assert_eq!(call["get"]["count"], 300);
    assert!(call["ratio_p50"].as_f64().unwrap() > 0.0, "{call}");
    assert!(
        call["inprocess"]["p50_us"].as_f64().unwrap() > 0.0,
        "{call}"
    );
    for (recipe, check) in [("lock", "overlaps"), ("queue", "lost")] {
        for key in ["zookeeper", "wazoo", "wazoo-kazoo"] {
            let run = &recipes[recipe]["runs"][key];
            assert!(run["failure"].is_null(), "{recipe} {key}: {run}");
            assert!(run["cycles"].as_u64().unwrap() > 0, "{recipe} {key}: {run}");
            assert_eq!(run[check], 0, "{recipe} {key}: {run}");
            assert_eq!(run["cycle_cdf_us"].as_array().unwrap().len(), 26);
        }
    }
    for key in ["zookeeper", "wazoo", "wazoo-kazoo"] {
        // Every item put was taken exactly once (the sessions put then take).
        let run = &recipes["queue"]["runs"][key];
        assert_eq!(run["duplicates"], 0, "{key}: {run}");
        assert_eq!(run["foreign"], 0, "{key}: {run}");
        let put = run["items_put"].as_u64().unwrap();
        assert!(put > 0, "{key}: {run}");
        assert_eq!(
            put,
            run["items_taken"].as_u64().unwrap() + run["remaining"].as_u64().unwrap(),
            "{key}: {run}"
        );
    }

    let md = std::fs::read_to_string(&report).unwrap();
    for heading in [
        "## create",
        "## get",
        "## exists-watch",
        "## fanout",
        "## churn",
        "## memory",
        "## recovery",
        "## recipe-call",
        "## lock",
        "## queue",
        "## sessions sweep",
    ] {
        assert!(md.contains(heading), "the report lacks {heading:?}");
    }
    assert!(md.contains("| **wazoo/zookeeper** |"));

    let plots = json["plots"].as_array().unwrap();
    assert_eq!(plots.len(), 11, "{plots:?}");
    assert!(plots
        .iter()
        .any(|p| p.as_str().unwrap().ends_with("-sweep.svg")));
    for p in plots {
        let file = p.as_str().unwrap();
        assert!(
            md.contains(&format!("]({file})")),
            "the report links {file}"
        );
        let svg = std::fs::read_to_string(dir.path().join(file)).unwrap();
        assert!(svg.starts_with("<svg "), "{file}");
        assert!(svg.trim_end().ends_with("</svg>"), "{file}");
        assert_eq!(svg.matches("<g ").count(), svg.matches("</g>").count());
        assert!(!svg.contains("NaN"), "{file}");
    }
}
