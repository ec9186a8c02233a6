//! Benchmark-style figures (printed, not asserted): server-side instantiate +
//! call time of the SDK-built `echo.noop` recipe and of a minimal WAT module.
//! Meaningful in release:
//!   cargo test --release -p wazoo-runtime --test plugin_bench -- --ignored --nocapture

mod plugin_support;

use plugin_support::*;
use std::time::{Duration, Instant};
use wazoo_runtime::abi::CallerInfo;
use wazoo_runtime::{Runtime, RuntimeConfig};

fn measure(rt: &Runtime, module: &str, method: &str, iters: u32) -> (Duration, Duration, u64) {
    let caller = CallerInfo {
        session: 1,
        guid: "bench".into(),
        ids: Vec::new(),
    };
    let mut tree = MemTree::new(1);
    for _ in 0..iters / 10 {
        rt.call(module, method, &[], &caller, &mut tree).unwrap();
    }
    let mut samples = Vec::with_capacity(iters as usize);
    let mut fuel = 0;
    for _ in 0..iters {
        let t = Instant::now();
        let out = rt.call(module, method, &[], &caller, &mut tree).unwrap();
        samples.push(t.elapsed());
        fuel = out.fuel_used;
    }
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
        fuel,
    )
}

#[test]
#[ignore = "benchmark: run with --ignored --nocapture, in release"]
fn noop_instantiate_and_call() {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let t = Instant::now();
    rt.load_bytes(&recipe_bytes("echo")).unwrap();
    let compile = t.elapsed();
    rt.load_bytes(&good_module("wat", "1.0.0", "x")).unwrap();
    let (p50, p99, fuel) = measure(&rt, "echo", "noop", 20_000);
    println!(
        "echo.noop (SDK, {} bytes): compile {compile:?}; instantiate+call p50 {p50:?} p99 {p99:?}; fuel {fuel} (target p50 < 50µs)",
        recipe_bytes("echo").len()
    );
    let (p50, p99, fuel) = measure(&rt, "wat", "get", 20_000);
    println!("minimal WAT module: instantiate+call p50 {p50:?} p99 {p99:?}; fuel {fuel}");
    let threads = 2;
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| measure(&rt, "echo", "noop", 10_000));
        }
    });
    let per_sec = (threads as f64 * 11_000.0) / t.elapsed().as_secs_f64();
    println!("echo.noop on {threads} threads: {per_sec:.0} calls/s");
}
