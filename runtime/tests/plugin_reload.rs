//! Hot reload of a plugins directory under a stream of concurrent calls, and
//! the compiled-module cache.

mod plugin_support;

use plugin_support::*;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wazoo_runtime::abi::{CallerInfo, Reply, TreeOp};
use wazoo_runtime::{Limits, RecipeError, Runtime, RuntimeConfig, WatchConfig};

fn caller() -> CallerInfo {
    CallerInfo {
        session: 1,
        guid: "g".into(),
        ids: Vec::new(),
    }
}

fn answer(rt: &Runtime, name: &str) -> Result<(String, String), RecipeError> {
    let mut t = MemTree::new(1);
    let out = rt.call(name, "get", &[], &caller(), &mut t)?;
    Ok((done::<String>(&out.reply), out.version))
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Writes a file in two halves with a pause between: a watcher sees a
/// half-written module first.
fn write_slowly(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::File::create(path).unwrap();
    let half = bytes.len() / 2;
    f.write_all(&bytes[..half]).unwrap();
    f.flush().unwrap();
    std::thread::sleep(Duration::from_millis(150));
    f.write_all(&bytes[half..]).unwrap();
    f.flush().unwrap();
}

/// A module whose call burns some fuel, so calls are in flight during swaps.
fn versioned(version: &str) -> Vec<u8> {
    let reply = mp(&Reply::Done(mp(&format!("answer from {version}"))));
    let body = format!(
        "(local $i i32) (local.set $i (i32.const 20000))
         (loop $l (local.set $i (i32.sub (local.get $i) (i32.const 1))) (br_if $l (local.get $i)))
         {RETURN_DATA}"
    );
    wat_module(&manifest("svc", version, &["get"], &[]), "", &body, &reply)
}

#[test]
fn hot_reload_under_concurrent_calls() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("svc.wasm");
    std::fs::write(&file, versioned("1.0.0")).unwrap();
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let cfg = WatchConfig {
        debounce: Duration::from_millis(20),
        rescan: Duration::from_millis(500),
        ..WatchConfig::default()
    };
    let (_watcher, initial) = rt.watch_dir_with(dir.path(), cfg).unwrap();
    assert_eq!(initial.len(), 1);
    assert!(initial[0].1.is_ok());
    assert_eq!(answer(&rt, "svc").unwrap().1, "1.0.0");

    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (rt, stop, calls) = (rt.clone(), stop.clone(), calls.clone());
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    // Every call is answered, by a whole version: never an
                    // error, never a mix.
                    let (text, version) = answer(&rt, "svc").expect("no call lost during reload");
                    assert_eq!(text, format!("answer from {version}"));
                    calls.fetch_add(1, Ordering::Relaxed);
                    if seen.last() != Some(&version) {
                        seen.push(version);
                    }
                }
                seen
            })
        })
        .collect();

    std::thread::sleep(Duration::from_millis(100));
    // v2 written non-atomically (the watcher sees half a module first);
    // then a broken module (refused: 2.0.0 keeps serving); then v3 by an
    // atomic rename.
    write_slowly(&file, &versioned("2.0.0"));
    wait_until("2.0.0", || rt.module("svc").unwrap().version == "2.0.0");
    std::thread::sleep(Duration::from_millis(100));
    std::fs::write(&file, b"\0asm\x01\0\0\0garbage").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        rt.module("svc").unwrap().version,
        "2.0.0",
        "a bad module leaves the old one serving"
    );
    let tmp = dir.path().join(".svc.wasm.tmp");
    std::fs::write(&tmp, versioned("3.0.0")).unwrap();
    std::fs::rename(&tmp, &file).unwrap();
    wait_until("3.0.0", || rt.module("svc").unwrap().version == "3.0.0");
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);

    for t in threads {
        let seen = t.join().unwrap();
        // Versions only move forward for a caller.
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(seen, sorted, "versions seen in order: {seen:?}");
        assert_eq!(seen.last().map(String::as_str), Some("3.0.0"));
    }
    let n = calls.load(Ordering::Relaxed);
    assert!(n > 10, "{n} calls");
    let stats = rt.stats();
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0].calls, n + 1, "every call counted across versions");
    assert_eq!(stats[0].errors, 0);
    assert_eq!(stats[0].loads, 3);

    // Removing the file unloads the module.
    std::fs::remove_file(&file).unwrap();
    wait_until("unload", || rt.module("svc").is_none());
    assert_eq!(
        answer(&rt, "svc").unwrap_err(),
        RecipeError::UnknownModule("svc".into())
    );
}

#[test]
fn a_call_in_flight_finishes_on_the_old_version() {
    let limits = Limits {
        fuel: 1_000_000_000,
        deadline: Duration::from_secs(10),
        ..Default::default()
    };
    let rt = Runtime::new(RuntimeConfig {
        limits,
        ..Default::default()
    })
    .unwrap();
    // v1 makes one tree op (the test's signal that it is running), then
    // spins for a while before answering.
    let ops = mp(&vec![TreeOp::Exists {
        path: "/x".into(),
        watch: None,
    }]);
    let reply = mp(&Reply::Done(mp("slow v1")));
    let mut data = reply.clone();
    data.extend_from_slice(&ops);
    let body = format!(
        "(local $i i32)
         (drop (call $tree (i32.const {ops_at}) (i32.const {ops_len})))
         (local.set $i (i32.const 100000))
         (loop $l (local.set $i (i32.sub (local.get $i) (i32.const 1))) (br_if $l (local.get $i)))
         (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const {reply_len}))",
        reply_len = reply.len(),
        ops_at = 1024 + reply.len(),
        ops_len = ops.len(),
    );
    let tree = r#"(import "wazoo" "tree" (func $tree (param i32 i32) (result i64)))"#;
    let v1 = wat_module(
        &manifest("svc", "1.0.0", &["get"], &["/"]),
        tree,
        &body,
        &data,
    );
    rt.load_bytes(&v1).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let (go, wait) = std::sync::mpsc::channel();
    let slow = {
        let rt = rt.clone();
        std::thread::spawn(move || {
            rt.call("svc", "get", &[], &caller(), &mut HoldAtExists(tx, wait))
        })
    };
    // The v1 call is now inside its tree op.
    rx.recv().unwrap();
    rt.load_bytes(&good_module("svc", "2.0.0", "fast v2"))
        .unwrap();
    assert!(!slow.is_finished());
    assert_eq!(
        answer(&rt, "svc").unwrap(),
        ("fast v2".into(), "2.0.0".into())
    );
    // Let the v1 call finish: it completes on v1, which is no longer loaded.
    go.send(()).unwrap();
    let out = slow.join().unwrap().unwrap();
    assert_eq!(out.version, "1.0.0");
    assert_eq!(done::<String>(&out.reply), "slow v1");
}

#[test]
fn a_file_that_changes_its_name_moves_the_module() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.wasm");
    std::fs::write(&file, good_module("alpha", "1.0.0", "a")).unwrap();
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let (watcher, _) = rt.watch_dir(dir.path()).unwrap();
    assert!(rt.module("alpha").is_some());
    std::fs::write(&file, good_module("beta", "1.0.0", "b")).unwrap();
    watcher.rescan();
    assert!(rt.module("alpha").is_none());
    assert_eq!(answer(&rt, "beta").unwrap().0, "b");
    // Files whose names start with '.' or do not end in .wasm are ignored.
    std::fs::write(
        dir.path().join(".hidden.wasm"),
        good_module("hidden", "1.0.0", "h"),
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"hello").unwrap();
    watcher.rescan();
    assert!(rt.module("hidden").is_none());
    drop(watcher);
    // load_dir is the one-shot form.
    let rt2 = Runtime::new(RuntimeConfig::default()).unwrap();
    let loaded = rt2.load_dir(dir.path());
    assert_eq!(loaded.len(), 1);
    assert!(rt2.module("beta").is_some());
}

#[test]
fn compiled_cache_survives_restarts_and_a_stale_entry_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || RuntimeConfig {
        cache_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let module = good_module("c", "1.0.0", "cached");
    {
        let rt = Runtime::new(cfg()).unwrap();
        rt.load_bytes(&module).unwrap();
    }
    // One entry (beside it, the lock file its compile held).
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x != "lock"))
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    // A second runtime deserializes it.
    let rt = Runtime::new(cfg()).unwrap();
    rt.load_bytes(&module).unwrap();
    assert_eq!(answer(&rt, "c").unwrap().0, "cached");
    drop(rt);
    // Corrupt the entry: a miss, recompiled and rewritten, never an error.
    let mut bytes = std::fs::read(&entries[0]).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    bytes.truncate(n - 10);
    std::fs::write(&entries[0], &bytes).unwrap();
    let rt = Runtime::new(cfg()).unwrap();
    rt.load_bytes(&module).unwrap();
    assert_eq!(answer(&rt, "c").unwrap().0, "cached");
    assert_eq!(
        std::fs::read(&entries[0]).unwrap().len(),
        n,
        "entry rewritten"
    );
    // An entry from another engine (different compatibility hash in the name)
    // is simply never looked at; garbage under the right name is a miss.
    std::fs::write(&entries[0], b"WZC1 not a module at all").unwrap();
    let rt = Runtime::new(cfg()).unwrap();
    rt.load_bytes(&module).unwrap();
    assert_eq!(answer(&rt, "c").unwrap().0, "cached");
}

// Two files declaring one module name: removing either leaves the module
// served from the other (a copy of a module file must not be a way to
// unload it), and the module is gone only with the last file.
#[test]
fn removing_one_of_two_files_of_a_module_keeps_it_served_from_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("latch.wasm");
    let copy = dir.path().join("latch_copy.wasm");
    std::fs::write(&first, good_module("latch", "1.0.0", "first")).unwrap();
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let (watcher, _) = rt.watch_dir(dir.path()).unwrap();
    assert_eq!(answer(&rt, "latch").unwrap().0, "first");
    std::fs::write(&copy, good_module("latch", "1.0.1", "copy")).unwrap();
    watcher.rescan();
    assert_eq!(answer(&rt, "latch").unwrap().0, "copy");
    std::fs::remove_file(&copy).unwrap();
    watcher.rescan();
    assert_eq!(
        answer(&rt, "latch").unwrap().0,
        "first",
        "latch.wasm still declares the module"
    );
    // The same with the copy back and the first file removed instead.
    std::fs::write(&copy, good_module("latch", "1.0.1", "copy")).unwrap();
    watcher.rescan();
    assert_eq!(answer(&rt, "latch").unwrap().0, "copy");
    std::fs::remove_file(&first).unwrap();
    watcher.rescan();
    assert_eq!(answer(&rt, "latch").unwrap().0, "copy");
    // A file that changes its name gives the old name back to the other file.
    std::fs::write(&first, good_module("latch", "1.0.0", "first")).unwrap();
    watcher.rescan();
    assert_eq!(answer(&rt, "latch").unwrap().0, "first");
    std::fs::write(&first, good_module("other", "1.0.0", "o")).unwrap();
    watcher.rescan();
    assert_eq!(answer(&rt, "latch").unwrap().0, "copy");
    assert_eq!(answer(&rt, "other").unwrap().0, "o");
    // The last file gone, the module is.
    std::fs::remove_file(&copy).unwrap();
    watcher.rescan();
    assert!(rt.module("latch").is_none());
    assert!(rt.module("other").is_some());
}
