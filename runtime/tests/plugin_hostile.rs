//! Hostile modules (hand-written WAT) fail cleanly with a typed error, and the
//! runtime keeps serving a good module afterwards.

mod plugin_support;

use plugin_support::*;
use std::time::{Duration, Instant};
use wazoo_runtime::abi::{CallerInfo, CreateMode, Manifest, Reply, TreeOp};
use wazoo_runtime::{Limits, LoadError, RecipeError, Runtime, RuntimeConfig};

fn runtime_with(limits: Limits) -> Runtime {
    Runtime::new(RuntimeConfig {
        limits,
        ..Default::default()
    })
    .unwrap()
}

fn runtime() -> Runtime {
    runtime_with(Limits::default())
}

fn caller() -> CallerInfo {
    CallerInfo {
        session: 7,
        guid: "g-1".into(),
        ids: Vec::new(),
    }
}

fn call(rt: &Runtime, module: &str) -> Result<Reply, RecipeError> {
    let mut tree = MemTree::new(7);
    rt.call(module, "get", &[], &caller(), &mut tree)
        .map(|o| o.reply)
}

/// Loads `bytes` as module "bad" next to a good module "good", calls "bad",
/// then checks that "good" still answers.
fn hostile(rt: &Runtime, bytes: &[u8]) -> RecipeError {
    rt.load_bytes(&good_module("good", "1.0.0", "fine"))
        .unwrap();
    rt.load_bytes(bytes).expect("hostile module loads");
    let err = call(rt, "bad").expect_err("hostile call must fail");
    assert_eq!(
        done::<String>(&call(rt, "good").unwrap()),
        "fine",
        "runtime still healthy after {err}"
    );
    err
}

fn m() -> Manifest {
    manifest("bad", "0.1.0", &["get"], &["/ok"])
}

const TREE_IMPORT: &str = r#"(import "wazoo" "tree" (func $tree (param i32 i32) (result i64)))"#;
const PANIC_IMPORT: &str = r#"(import "wazoo" "panic" (func $panic (param i32 i32)))"#;

#[test]
fn good_module_answers() {
    let rt = runtime();
    let info = rt
        .load_bytes(&good_module("good", "1.2.3", "hello"))
        .unwrap();
    assert_eq!(
        (info.name.as_str(), info.version.as_str()),
        ("good", "1.2.3")
    );
    assert_eq!(done::<String>(&call(&rt, "good").unwrap()), "hello");
    let s = &rt.stats()[0];
    assert_eq!((s.calls, s.errors), (1, 0));
    assert!(s.fuel_used > 0);
}

#[test]
fn infinite_loop_runs_out_of_fuel() {
    let rt = runtime();
    let t = Instant::now();
    let err = hostile(
        &rt,
        &wat_module(&m(), "", "(loop $l (br $l)) (unreachable)", b""),
    );
    assert_eq!(
        err,
        RecipeError::FuelExhausted {
            budget: Limits::default().fuel
        }
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    let s = rt
        .stats()
        .into_iter()
        .find(|s| s.info.name == "bad")
        .unwrap();
    assert_eq!((s.calls, s.errors), (1, 1));
    assert!(s.fuel_used >= Limits::default().fuel);
}

#[test]
fn infinite_loop_hits_the_deadline() {
    let rt = runtime_with(Limits {
        fuel: u64::MAX / 4,
        deadline: Duration::from_millis(50),
        ..Default::default()
    });
    let t = Instant::now();
    let err = hostile(
        &rt,
        &wat_module(&m(), "", "(loop $l (br $l)) (unreachable)", b""),
    );
    assert_eq!(
        err,
        RecipeError::DeadlineExceeded {
            deadline: Duration::from_millis(50)
        }
    );
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
}

#[test]
fn infinite_loop_in_the_start_function_is_stopped_too() {
    let rt = runtime();
    let extra = "(func $spin (loop $l (br $l))) (start $spin)";
    let err = hostile(&rt, &wat_module(&m(), extra, RETURN_DATA, b""));
    assert!(matches!(err, RecipeError::FuelExhausted { .. }), "{err}");
}

#[test]
fn memory_bomb_hits_the_memory_cap() {
    let rt = runtime();
    let body =
        "(loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) (i64.const 0)";
    let err = hostile(&rt, &wat_module(&m(), "", body, b""));
    assert_eq!(
        err,
        RecipeError::MemoryLimit {
            limit: Limits::default().memory_bytes
        }
    );
}

#[test]
fn huge_initial_memory_is_refused() {
    let rt = runtime();
    // 1000 pages = 64 MiB, over the 16 MiB cap: refused at load or at instantiation.
    let text = format!(
        r#"(module (memory (export "memory") 1000)
             (func (export "alloc") (param i32) (result i32) (i32.const 0))
             (func (export "call") (param i32 i32) (result i64) (i64.const 0))
             (@custom "wazoo:recipe" "{}"))"#,
        wat_bytes(&mp(&m()))
    );
    let bytes = wat::parse_str(&text).unwrap();
    match rt.load_bytes(&bytes) {
        Err(e) => eprintln!("refused at load: {e}"),
        Ok(_) => {
            let err = call(&rt, "bad").unwrap_err();
            assert!(
                matches!(
                    err,
                    RecipeError::MemoryLimit { .. }
                        | RecipeError::Instantiate(_)
                        | RecipeError::Trap { .. }
                ),
                "{err:?}"
            );
        }
    }
    rt.load_bytes(&good_module("good", "1.0.0", "fine"))
        .unwrap();
    assert_eq!(done::<String>(&call(&rt, "good").unwrap()), "fine");
}

#[test]
fn huge_output_is_capped() {
    let rt = runtime();
    // Claims a 100 MB reply.
    let err = hostile(&rt, &wat_module(&m(), "", "(i64.const 100000000)", b""));
    assert_eq!(
        err,
        RecipeError::ReplyTooLarge {
            len: 100_000_000,
            limit: 1 << 20
        }
    );
    // A real 2 MiB reply, inside its memory.
    let body = "(drop (memory.grow (i32.const 40))) (i64.const 2097152)";
    let rt = runtime();
    let err = hostile(&rt, &wat_module(&m(), "", body, b""));
    assert!(matches!(err, RecipeError::ReplyTooLarge { .. }), "{err}");
}

#[test]
fn out_of_bounds_reply_pointer() {
    let rt = runtime();
    let body = "(i64.or (i64.shl (i64.const 0xFFFF0000) (i64.const 32)) (i64.const 16))";
    let err = hostile(&rt, &wat_module(&m(), "", body, b""));
    assert!(
        matches!(
            err,
            RecipeError::OutOfBounds {
                what: "reply",
                ptr: 0xFFFF0000,
                len: 16,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn out_of_bounds_import_arguments() {
    let rt = runtime();
    let body = "(drop (call $tree (i32.const 0xFFFFFFF0) (i32.const 100))) (i64.const 0)";
    let err = hostile(&rt, &wat_module(&m(), TREE_IMPORT, body, b""));
    assert!(
        matches!(
            err,
            RecipeError::OutOfBounds {
                what: "tree request",
                ..
            }
        ),
        "{err:?}"
    );

    let rt = runtime();
    let body = "(call $panic (i32.const 131000) (i32.const 1000)) (i64.const 0)";
    let err = hostile(&rt, &wat_module(&m(), PANIC_IMPORT, body, b""));
    assert!(
        matches!(
            err,
            RecipeError::OutOfBounds {
                what: "panic message",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn alloc_returning_a_bad_pointer() {
    let rt = runtime();
    let text = format!(
        r#"(module (memory (export "memory") 1)
             (func (export "alloc") (param i32) (result i32) (i32.const -8))
             (func (export "call") (param i32 i32) (result i64) (i64.const 0))
             (@custom "wazoo:recipe" "{}"))"#,
        wat_bytes(&mp(&m()))
    );
    let err = hostile(&rt, &wat::parse_str(&text).unwrap());
    assert!(
        matches!(
            err,
            RecipeError::OutOfBounds {
                what: "alloc result",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn trap_is_reported() {
    let rt = runtime();
    let body = "(drop (i32.div_s (i32.const 1) (i32.const 0))) (i64.const 0)";
    let err = hostile(&rt, &wat_module(&m(), "", body, b""));
    match err {
        RecipeError::Trap { message } => {
            eprintln!("{message}");
            assert!(message.contains("divide by zero"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn stack_overflow_is_reported() {
    let rt = runtime();
    let extra =
        "(func $r (param i64) (result i64) (call $r (i64.add (local.get 0) (i64.const 1))))";
    let err = hostile(
        &rt,
        &wat_module(&m(), extra, "(call $r (i64.const 0))", b""),
    );
    assert_eq!(err, RecipeError::StackOverflow);
}

#[test]
fn guest_panic_message_reaches_the_caller() {
    let rt = runtime();
    let body = "(call $panic (i32.const 1024) (i32.const $DATA_LEN)) (unreachable)";
    let err = hostile(
        &rt,
        &wat_module(&m(), PANIC_IMPORT, body, b"invariant violated: x > 3"),
    );
    assert_eq!(
        err,
        RecipeError::Panic {
            message: "invariant violated: x > 3".into()
        }
    );
}

#[test]
fn malformed_reply_is_reported() {
    let rt = runtime();
    let err = hostile(&rt, &wat_module(&m(), "", RETURN_DATA, b"\xc1\xc1garbage"));
    assert!(
        matches!(err, RecipeError::BadMessage { what: "reply", .. }),
        "{err:?}"
    );
}

#[test]
fn path_outside_prefixes_is_refused() {
    let rt = runtime();
    let ops = vec![TreeOp::Create {
        path: "/etc".into(),
        data: b"x".to_vec(),
        mode: CreateMode::Persistent,
        acl: None,
    }];
    let body = "(drop (call $tree (i32.const 1024) (i32.const $DATA_LEN))) (i64.const 0)";
    let err = hostile(&rt, &wat_module(&m(), TREE_IMPORT, body, &mp(&ops)));
    assert_eq!(
        err,
        RecipeError::PathOutsidePrefixes {
            path: "/etc".into(),
            prefixes: vec!["/ok".into()]
        }
    );

    // A sibling that shares the prefix's spelling is outside too.
    let rt = runtime();
    let ops = vec![TreeOp::Get {
        path: "/okay".into(),
        watch: None,
    }];
    let err = hostile(&rt, &wat_module(&m(), TREE_IMPORT, body, &mp(&ops)));
    assert!(
        matches!(err, RecipeError::PathOutsidePrefixes { .. }),
        "{err:?}"
    );

    // A sequential create on the prefix itself would land beside it.
    let rt = runtime();
    let ops = vec![TreeOp::Create {
        path: "/ok".into(),
        data: vec![],
        mode: CreateMode::PersistentSequential,
        acl: None,
    }];
    let err = hostile(&rt, &wat_module(&m(), TREE_IMPORT, body, &mp(&ops)));
    assert!(
        matches!(err, RecipeError::PathOutsidePrefixes { .. }),
        "{err:?}"
    );
}

#[test]
fn tree_ops_inside_prefixes_work_and_are_counted() {
    let rt = runtime();
    let ops = vec![
        TreeOp::Create {
            path: "/ok".into(),
            data: b"1".to_vec(),
            mode: CreateMode::Persistent,
            acl: None,
        },
        TreeOp::Get {
            path: "/ok".into(),
            watch: Some("t".into()),
        },
    ];
    let reply = mp(&Reply::Done(mp(&())));
    let mut data = mp(&ops);
    let off = 1024 + data.len();
    data.extend_from_slice(&reply);
    let body = format!(
        "(drop (call $tree (i32.const 1024) (i32.const {}))) (i64.or (i64.shl (i64.const {off}) (i64.const 32)) (i64.const {}))",
        mp(&ops).len(),
        reply.len()
    );
    rt.load_bytes(&wat_module(&m(), TREE_IMPORT, &body, &data))
        .unwrap();
    let mut tree = MemTree::new(7);
    let out = rt.call("bad", "get", &[], &caller(), &mut tree).unwrap();
    assert_eq!(out.ops, 2);
    assert_eq!(tree.data("/ok"), Some(&b"1"[..]));
    assert_eq!(
        tree.watches,
        vec![("/ok".to_string(), "t".to_string(), false)]
    );
}

#[test]
fn too_many_ops_is_refused() {
    let rt = runtime_with(Limits {
        max_ops: 10,
        ..Default::default()
    });
    let ops = vec![
        TreeOp::Exists {
            path: "/ok".into(),
            watch: None
        };
        3
    ];
    let body = "(loop $l (drop (call $tree (i32.const 1024) (i32.const $DATA_LEN))) (br $l)) (i64.const 0)";
    let err = hostile(&rt, &wat_module(&m(), TREE_IMPORT, body, &mp(&ops)));
    assert_eq!(err, RecipeError::TooManyOps { limit: 10 });
}

#[test]
fn wrong_abi_version_is_refused_at_load() {
    let rt = runtime();
    let mut man = m();
    man.abi = (2, 0);
    let err = rt
        .load_bytes(&wat_module(&man, "", RETURN_DATA, b""))
        .unwrap_err();
    assert_eq!(err, LoadError::AbiVersion { major: 2, minor: 0 });
    assert!(rt.module("bad").is_none());
}

#[test]
fn missing_or_bad_manifest_is_refused() {
    let rt = runtime();
    let plain = wat::parse_str(r#"(module (memory (export "memory") 1))"#).unwrap();
    assert_eq!(rt.load_bytes(&plain).unwrap_err(), LoadError::NoManifest);
    let mut man = m();
    man.name = "no spaces allowed".into();
    assert!(matches!(
        rt.load_bytes(&wat_module(&man, "", RETURN_DATA, b"")),
        Err(LoadError::BadManifest(_))
    ));
    let mut man = m();
    man.version = "latest".into();
    assert!(matches!(
        rt.load_bytes(&wat_module(&man, "", RETURN_DATA, b"")),
        Err(LoadError::BadManifest(_))
    ));
    let mut man = m();
    man.prefixes = vec!["relative/path".into()];
    assert!(matches!(
        rt.load_bytes(&wat_module(&man, "", RETURN_DATA, b"")),
        Err(LoadError::BadManifest(_))
    ));
    assert!(matches!(
        rt.load_bytes(b"not wasm at all"),
        Err(LoadError::Invalid(_))
    ));
    let mut truncated = good_module("x", "1.0.0", "v");
    truncated.truncate(truncated.len() / 2);
    assert!(rt.load_bytes(&truncated).is_err());
}

#[test]
fn missing_exports_are_refused() {
    let rt = runtime();
    let man = wat_bytes(&mp(&m()));
    let no_call = format!(
        r#"(module (memory (export "memory") 1) (func (export "alloc") (param i32) (result i32) (i32.const 0))
             (@custom "wazoo:recipe" "{man}"))"#
    );
    assert_eq!(
        rt.load_bytes(&wat::parse_str(&no_call).unwrap())
            .unwrap_err(),
        LoadError::MissingExport {
            name: "call".into(),
            expected: "(i32, i32) -> (i64)".into()
        }
    );
    let no_memory = format!(
        r#"(module (memory 1) (func (export "alloc") (param i32) (result i32) (i32.const 0))
             (func (export "call") (param i32 i32) (result i64) (i64.const 0))
             (@custom "wazoo:recipe" "{man}"))"#
    );
    assert!(matches!(
        rt.load_bytes(&wat::parse_str(&no_memory).unwrap()).unwrap_err(),
        LoadError::MissingExport { name, .. } if name == "memory"
    ));
    let bad_call = format!(
        r#"(module (memory (export "memory") 1) (func (export "alloc") (param i32) (result i32) (i32.const 0))
             (func (export "call") (param i32) (result i32) (i32.const 0))
             (@custom "wazoo:recipe" "{man}"))"#
    );
    assert!(matches!(
        rt.load_bytes(&wat::parse_str(&bad_call).unwrap()).unwrap_err(),
        LoadError::BadExport { name, .. } if name == "call"
    ));
    let mut man_w = m();
    man_w.on_watch = true;
    assert_eq!(
        rt.load_bytes(&wat_module(&man_w, "", RETURN_DATA, b""))
            .unwrap_err(),
        LoadError::MissingOnWatch
    );
}

#[test]
fn unknown_imports_are_refused() {
    let rt = runtime();
    let wasi = r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#;
    assert_eq!(
        rt.load_bytes(&wat_module(&m(), wasi, RETURN_DATA, b""))
            .unwrap_err(),
        LoadError::UnknownImport {
            module: "wasi_snapshot_preview1".into(),
            name: "fd_write".into()
        }
    );
    let clock = r#"(import "wazoo" "clock" (func (result i64)))"#;
    assert_eq!(
        rt.load_bytes(&wat_module(&m(), clock, RETURN_DATA, b""))
            .unwrap_err(),
        LoadError::UnknownImport {
            module: "wazoo".into(),
            name: "clock".into()
        }
    );
    let bad_sig = r#"(import "wazoo" "tree" (func (param i32) (result i64)))"#;
    assert!(matches!(
        rt.load_bytes(&wat_module(&m(), bad_sig, RETURN_DATA, b"")),
        Err(LoadError::BadImport { .. })
    ));
    let mem = r#"(import "wazoo" "memory" (memory 1))"#;
    assert!(matches!(
        rt.load_bytes(&wat_module(&m(), mem, RETURN_DATA, b"")),
        Err(LoadError::UnknownImport { .. })
    ));
    assert!(rt.stats().is_empty());
}

#[test]
fn unknown_module_and_method() {
    let rt = runtime();
    assert_eq!(
        call(&rt, "nope").unwrap_err(),
        RecipeError::UnknownModule("nope".into())
    );
    rt.load_bytes(&good_module("good", "1.0.0", "fine"))
        .unwrap();
    let mut tree = MemTree::new(1);
    assert!(matches!(
        rt.call("good", "other", &[], &caller(), &mut tree),
        Err(RecipeError::UnknownMethod { .. })
    ));
}

#[test]
fn hostile_calls_on_many_threads_leave_good_calls_unaffected() {
    let rt = runtime_with(Limits {
        fuel: 2_000_000,
        ..Default::default()
    });
    rt.load_bytes(&good_module("good", "1.0.0", "fine"))
        .unwrap();
    rt.load_bytes(&wat_module(
        &m(),
        "",
        "(loop $l (br $l)) (unreachable)",
        b"",
    ))
    .unwrap();
    std::thread::scope(|s| {
        for i in 0..4 {
            let rt = rt.clone();
            s.spawn(move || {
                for _ in 0..50 {
                    if i % 2 == 0 {
                        assert!(matches!(
                            call(&rt, "bad"),
                            Err(RecipeError::FuelExhausted { .. })
                        ));
                    } else {
                        assert_eq!(done::<String>(&call(&rt, "good").unwrap()), "fine");
                    }
                }
            });
        }
    });
    let stats = rt.stats();
    assert_eq!(stats.iter().map(|s| s.calls).sum::<u64>(), 200);
}

#[test]
fn reentrant_import_from_alloc_is_refused() {
    let rt = runtime();
    let ops = mp(&vec![TreeOp::Exists {
        path: "/ok".into(),
        watch: None,
    }]);
    let text = format!(
        r#"(module
  {TREE_IMPORT}
  (memory (export "memory") 2)
  (global $n (mut i32) (i32.const 0))
  (func (export "alloc") (param i32) (result i32)
    (global.set $n (i32.add (global.get $n) (i32.const 1)))
    (if (i32.gt_u (global.get $n) (i32.const 1))
      (then (drop (call $tree (i32.const 1024) (i32.const {len})))))
    (i32.const 4096))
  (func (export "call") (param i32 i32) (result i64)
    (drop (call $tree (i32.const 1024) (i32.const {len}))) (i64.const 0))
  (data (i32.const 1024) "{ops}")
  (@custom "wazoo:recipe" "{man}"))"#,
        len = ops.len(),
        ops = wat_bytes(&ops),
        man = wat_bytes(&mp(&m())),
    );
    let err = hostile(&rt, &wat::parse_str(&text).unwrap());
    assert_eq!(
        err,
        RecipeError::Trap {
            message: "host import called from inside alloc".into()
        }
    );
}

#[test]
fn too_many_notifications_and_oversized_ones_are_refused() {
    let notify = r#"(import "wazoo" "notify" (func $notify (param i64 i32 i32) (result i32)))"#;
    let rt = runtime_with(Limits {
        max_notifications: 5,
        ..Default::default()
    });
    let body = "(loop $l (drop (call $notify (i64.const 7) (i32.const 1024) (i32.const 3))) (br $l)) (i64.const 0)";
    let err = hostile(&rt, &wat_module(&m(), notify, body, b"abc"));
    assert_eq!(err, RecipeError::TooManyNotifications { limit: 5 });

    let rt = runtime_with(Limits {
        max_message_bytes: 1000,
        ..Default::default()
    });
    let body = "(drop (call $notify (i64.const 7) (i32.const 0) (i32.const 5000))) (i64.const 0)";
    let err = hostile(&rt, &wat_module(&m(), notify, body, b""));
    assert_eq!(
        err,
        RecipeError::TooLarge {
            what: "notification",
            len: 5000,
            limit: 1000
        }
    );
}

#[test]
fn log_lines_are_capped_not_fatal() {
    let log = r#"(import "wazoo" "log" (func $log (param i32 i32 i32)))"#;
    let rt = runtime();
    let reply = mp(&Reply::Done(mp("logged")));
    let body = format!(
        "(local $i i32) (local.set $i (i32.const 1000))
         (loop $l (call $log (i32.const 2) (i32.const 1024) (i32.const 5))
                  (local.set $i (i32.sub (local.get $i) (i32.const 1))) (br_if $l (local.get $i)))
         (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const {}))",
        reply.len()
    );
    rt.load_bytes(&wat_module(&m(), log, &body, &reply))
        .unwrap();
    assert_eq!(done::<String>(&call(&rt, "bad").unwrap()), "logged");
}

#[test]
fn instance_pool_exhaustion_is_a_clean_error() {
    use std::sync::mpsc;

    let rt = Runtime::new(RuntimeConfig {
        max_instances: 1,
        ..Default::default()
    })
    .unwrap();
    let ops = mp(&vec![TreeOp::Exists {
        path: "/ok".into(),
        watch: None,
    }]);
    let reply = mp(&Reply::Done(mp("held")));
    let mut data = reply.clone();
    data.extend_from_slice(&ops);
    let body = format!(
        "(drop (call $tree (i32.const {}) (i32.const {})))
         (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const {}))",
        1024 + reply.len(),
        ops.len(),
        reply.len()
    );
    rt.load_bytes(&wat_module(&m(), TREE_IMPORT, &body, &data))
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let (go, wait) = mpsc::channel();
    let held = {
        let rt = rt.clone();
        std::thread::spawn(move || {
            rt.call("bad", "get", &[], &caller(), &mut HoldAtExists(tx, wait))
        })
    };
    rx.recv().unwrap();
    // The only slot is taken: the next call fails cleanly, and is retryable.
    let err = call(&rt, "bad").unwrap_err();
    assert!(matches!(err, RecipeError::Instantiate(_)), "{err:?}");
    assert_eq!(err.code(), wazoo_proto::ErrorCode::ThrottledOp);
    go.send(()).unwrap();
    assert_eq!(done::<String>(&held.join().unwrap().unwrap().reply), "held");
}

// A batch of reads of a large node is bounded as its response is built:
// the call fails with TooLarge once the response passes the cap, having
// held about one node's data past it, not the whole batch's.
#[test]
fn a_read_batch_bomb_stops_at_the_response_cap() {
    const NODE: usize = 100_000;
    const CAP: usize = 1 << 20;
    let rt = runtime_with(Limits {
        max_message_bytes: CAP,
        ..Default::default()
    });
    let ops = mp(&vec![
        TreeOp::Get {
            path: "/ok/big".into(),
            watch: None,
        };
        999
    ]);
    let body = "(drop (call $tree (i32.const 1024) (i32.const $DATA_LEN))) (i64.const 0)";
    rt.load_bytes(&wat_module(&m(), TREE_IMPORT, body, &ops))
        .unwrap();
    let mut tree = MemTree::new(7);
    tree.nodes.insert(
        "/ok".into(),
        (Vec::new(), wazoo_runtime::abi::NodeStat::default()),
    );
    tree.nodes.insert(
        "/ok/big".into(),
        (vec![1; NODE], wazoo_runtime::abi::NodeStat::default()),
    );
    let err = rt
        .call("bad", "get", &[], &caller(), &mut tree)
        .expect_err("the batch's response is over the cap");
    match err {
        RecipeError::TooLarge {
            what: "tree response",
            len,
            limit,
        } => {
            assert_eq!(limit, CAP);
            assert!(
                len > CAP && len <= CAP + NODE + 1024,
                "stopped one result past the cap, at {len} bytes"
            );
        }
        other => panic!("expected TooLarge for the tree response, got {other}"),
    }
}

/// The member's thread defers a call's upkeep (`defer_call_upkeep`): the
/// store is dropped, and the next instance made, by `call_upkeep` after the
/// replies are written. Every call must still run in an instance nothing
/// ran in before, see the version loaded when it started, and a start
/// function must still run with the call's host.
#[test]
fn calls_whose_upkeep_is_deferred_each_run_in_an_instance_nothing_ran_in() {
    use wazoo_runtime::{call_upkeep, call_upkeep_waiting, defer_call_upkeep};
    // Traps if its instance ran a call before (a global and a byte of
    // memory both say so), else answers the data segment.
    let once = |version: &str, value: &str| {
        wat_module(
            &manifest("once", version, &["get"], &[]),
            "(global $ran (mut i32) (i32.const 0))",
            &format!(
                "(if (global.get $ran) (then (unreachable)))
                 (global.set $ran (i32.const 1))
                 (if (i32.load8_u (i32.const 4000)) (then (unreachable)))
                 (i32.store8 (i32.const 4000) (i32.const 1))
                 {RETURN_DATA}"
            ),
            &mp(&Reply::Done(mp(value))),
        )
    };
    let rt = runtime();
    defer_call_upkeep();
    rt.load_bytes(&once("1.0.0", "one")).unwrap();
    assert!(!call_upkeep_waiting());
    for _ in 0..3 {
        // The first call instantiates; the others take the instance the
        // upkeep made.
        assert_eq!(done::<String>(&call(&rt, "once").unwrap()), "one");
        assert!(call_upkeep_waiting());
        assert_eq!(call_upkeep(), 1, "the call's store is dropped here");
        assert!(!call_upkeep_waiting());
    }
    // Calls with no upkeep between them: at most 8 stores wait, the others
    // are dropped at once, and no call is refused for want of a pool slot.
    for _ in 0..100 {
        assert_eq!(done::<String>(&call(&rt, "once").unwrap()), "one");
    }
    assert_eq!(call_upkeep(), 8);
    // A new version: the instance made ahead for version 1 is not used.
    rt.load_bytes(&once("2.0.0", "two")).unwrap();
    assert_eq!(done::<String>(&call(&rt, "once").unwrap()), "two");
    call_upkeep();
    assert_eq!(done::<String>(&call(&rt, "once").unwrap()), "two");
    call_upkeep();

    // A module with a start function is instantiated by its call, so the
    // start function's imports reach the call's host: here a notification.
    let notify = r#"(import "wazoo" "notify" (func $notify (param i64 i32 i32) (result i32)))
      (func $start (drop (call $notify (i64.const 7) (i32.const 1024) (i32.const 3))))
      (start $start)"#;
    let started = wat_module(
        &manifest("started", "1.0.0", &["get"], &[]),
        notify,
        RETURN_DATA,
        &mp(&Reply::Done(mp("up"))),
    );
    rt.load_bytes(&started).unwrap();
    for _ in 0..3 {
        let mut tree = MemTree::new(7);
        let out = rt
            .call("started", "get", &[], &caller(), &mut tree)
            .unwrap();
        assert_eq!(done::<String>(&out.reply), "up");
        assert_eq!(
            tree.notifications.len(),
            1,
            "the start function ran with this call's host"
        );
        call_upkeep();
    }
}
