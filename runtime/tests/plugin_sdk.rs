//! Recipes built with wazoo-sdk (recipes-wasm/, compiled by
//! scripts/build-recipes.sh): calls, tree ops, watch callbacks, notifications,
//! panics and prefixes, end to end through the runtime.

mod plugin_support;

use plugin_support::*;
use wazoo_runtime::abi::{self, CallerInfo, Reply, WatchEvent, WatchRequest};
use wazoo_runtime::{Outcome, RecipeError, Runtime, RuntimeConfig};

fn rt() -> Runtime {
    // The compiled-module cache on disk makes every runtime after the first
    // one skip compiling (debug builds of cranelift are slow).
    let cache_dir = Some(recipes_dir().join("cache"));
    let rt = Runtime::new(RuntimeConfig {
        cache_dir,
        ..Default::default()
    })
    .unwrap();
    for name in ["echo", "counter"] {
        rt.load_bytes(&recipe_bytes(name)).unwrap();
    }
    rt
}

fn caller() -> CallerInfo {
    CallerInfo {
        session: 0x1234,
        guid: "call-1".into(),
        ids: Vec::new(),
    }
}

/// Runs a call against a clone of `tree`, keeping the clone only on success
/// (what the pipeline does with staged changes).
fn call(
    rt: &Runtime,
    tree: &mut MemTree,
    module: &str,
    method: &str,
    args: &[u8],
) -> Result<Outcome, RecipeError> {
    let mut view = tree.clone();
    let r = rt.call(module, method, args, &caller(), &mut view);
    if matches!(&r, Ok(o) if !matches!(o.reply, Reply::Error { .. })) {
        *tree = view;
    }
    r
}

#[test]
fn manifests_come_from_the_macro() {
    let rt = rt();
    let echo = rt.module("echo").unwrap();
    assert_eq!(echo.version, "0.1.0");
    assert_eq!(echo.methods, ["noop", "echo", "fail", "boom", "whoami"]);
    assert!(echo.prefixes.is_empty());
    assert!(!echo.on_watch);
    let counter = rt.module("counter").unwrap();
    assert_eq!(counter.version, "0.2.0");
    assert_eq!(counter.prefixes, ["/counters"]);
    assert!(counter.on_watch);
    assert_eq!(counter.abi, (abi::ABI_MAJOR, abi::ABI_MINOR));
}

#[test]
fn echo_methods() {
    let rt = rt();
    let mut t = MemTree::new(1);
    let out = call(&rt, &mut t, "echo", "noop", &[]).unwrap();
    assert_eq!(out.reply, Reply::Done(mp(&())));
    assert_eq!(out.ops, 0);
    assert!(
        out.fuel_used > 0 && out.fuel_used < 200_000,
        "fuel {}",
        out.fuel_used
    );
    let out = call(&rt, &mut t, "echo", "echo", &mp("hello")).unwrap();
    assert_eq!(done::<String>(&out.reply), "hello");
    let out = call(&rt, &mut t, "echo", "whoami", &[]).unwrap();
    assert_eq!(
        done::<(i64, String)>(&out.reply),
        (0x1234, "call-1".to_string())
    );
    let out = call(&rt, &mut t, "echo", "fail", &mp("nope")).unwrap();
    assert_eq!(
        out.reply,
        Reply::Error {
            code: 42,
            message: "nope".into()
        }
    );
    // Arguments of the wrong type are the recipe's BadArguments, not a trap.
    let out = call(&rt, &mut t, "echo", "echo", &mp(&17)).unwrap();
    assert!(
        matches!(out.reply, Reply::Error { code: -8, .. }),
        "{:?}",
        out.reply
    );
}

#[test]
fn guest_panic_message_reaches_the_caller() {
    let rt = rt();
    let mut t = MemTree::new(1);
    match call(&rt, &mut t, "echo", "boom", &mp("the sky fell")) {
        Err(RecipeError::Panic { message }) => {
            assert!(message.contains("boom: the sky fell"), "{message}");
            assert!(
                message.contains("src/lib.rs"),
                "location included: {message}"
            );
        }
        other => panic!("{other:?}"),
    }
    // And the next call is fine.
    assert_eq!(
        done::<String>(&call(&rt, &mut t, "echo", "echo", &mp("ok")).unwrap().reply),
        "ok"
    );
}

#[derive(serde::Serialize)]
struct Incr<'a> {
    name: &'a str,
    by: i64,
}

#[test]
fn counter_uses_the_tree() {
    let rt = rt();
    let mut t = MemTree::new(1);
    for i in 1..=5 {
        let out = call(
            &rt,
            &mut t,
            "counter",
            "incr",
            &mp(&Incr { name: "a", by: 2 }),
        )
        .unwrap();
        assert_eq!(done::<i64>(&out.reply), 2 * i);
    }
    assert_eq!(t.data("/counters/a"), Some(&b"10"[..]));
    assert_eq!(
        done::<i64>(&call(&rt, &mut t, "counter", "get", &mp("a")).unwrap().reply),
        10
    );
    assert_eq!(
        done::<i64>(&call(&rt, &mut t, "counter", "get", &mp("b")).unwrap().reply),
        0
    );
    assert!(done::<bool>(
        &call(&rt, &mut t, "counter", "reset", &mp("a"))
            .unwrap()
            .reply
    ));
    assert!(!done::<bool>(
        &call(&rt, &mut t, "counter", "reset", &mp("a"))
            .unwrap()
            .reply
    ));
    // A bad name is the recipe's error, and nothing is applied.
    let before = t.nodes.clone();
    let out = call(
        &rt,
        &mut t,
        "counter",
        "incr",
        &mp(&Incr { name: "x/y", by: 1 }),
    )
    .unwrap();
    assert!(matches!(out.reply, Reply::Error { code: -8, .. }));
    assert_eq!(t.nodes, before);
    let stats = rt
        .stats()
        .into_iter()
        .find(|s| s.info.name == "counter")
        .unwrap();
    assert_eq!((stats.calls, stats.errors), (10, 1));
}

#[test]
fn a_path_outside_the_prefixes_fails_the_call() {
    let rt = rt();
    let mut t = MemTree::new(1);
    let before = t.nodes.clone();
    assert_eq!(
        call(&rt, &mut t, "counter", "escape", &mp("/zookeeper/config")).unwrap_err(),
        RecipeError::PathOutsidePrefixes {
            path: "/zookeeper/config".into(),
            prefixes: vec!["/counters".into()]
        }
    );
    assert_eq!(t.nodes, before);
    // Inside its prefixes the same method works.
    call(
        &rt,
        &mut t,
        "counter",
        "incr",
        &mp(&Incr { name: "z", by: 1 }),
    )
    .unwrap();
    call(&rt, &mut t, "counter", "escape", &mp("/counters/free")).unwrap();
    assert_eq!(t.data("/counters/free"), Some(&b"x"[..]));
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions" names the errors a
// client acts on; the message of a tree op's error names the path it failed
// on, so the caller sees which node was missing or already there.
#[test]
fn a_tree_error_names_its_path() {
    let rt = rt();
    let mut t = MemTree::new(1);
    call(&rt, &mut t, "counter", "escape", &mp("/counters")).unwrap();
    call(&rt, &mut t, "counter", "escape", &mp("/counters/free")).unwrap();
    let out = call(&rt, &mut t, "counter", "escape", &mp("/counters/free")).unwrap();
    assert_eq!(
        out.reply,
        Reply::Error {
            code: -110,
            message: "NodeExists: /counters/free".into()
        }
    );
}

/// A writer the test reads back: what a subscriber formats lands here.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// A failed call is visible at the default level (WARN) with the module, the
// method, the session, the code and the message; a module failing in a loop
// gets a bounded number of lines per second, then a count of the dropped ones.
#[test]
fn a_failed_call_is_logged_at_warn_with_who_called_what_and_rate_limited() {
    use wazoo_core::recipe::RecipeEngine;
    let mut rt = rt();
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let mut t = MemTree::new(1);
    tracing::subscriber::with_default(subscriber, || {
        let r = RecipeEngine::call(&mut rt, "echo", "boom", &mp("kaboom"), &caller(), &mut t);
        assert!(matches!(r, Reply::Error { code: -1, .. }), "{r:?}");
        let r = RecipeEngine::call(&mut rt, "echo", "nope", &mp(&()), &caller(), &mut t);
        assert!(matches!(r, Reply::Error { code: -6, .. }), "{r:?}");
        // A loop of failures: far more calls than lines.
        for _ in 0..50 {
            RecipeEngine::call(
                &mut rt,
                "counter",
                "escape",
                &mp("/elsewhere"),
                &caller(),
                &mut t,
            );
        }
    });
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let boom = lines
        .iter()
        .find(|l| l.contains("method=\"boom\""))
        .expect(&text);
    for want in [
        "WARN",
        "module=\"echo\"",
        "session=0x1234",
        "code=-1",
        "kind=\"panic\"",
        "kaboom",
    ] {
        assert!(boom.contains(want), "{want} in {boom}");
    }
    let nope = lines
        .iter()
        .find(|l| l.contains("method=\"nope\""))
        .expect(&text);
    assert!(
        nope.contains("code=-6") && nope.contains("kind=\"unknown_method\""),
        "{nope}"
    );
    let escapes = lines
        .iter()
        .filter(|l| {
            l.contains("module=\"counter\"") && l.contains("kind=\"path_outside_prefixes\"")
        })
        .count();
    assert!(
        (1..=wazoo_runtime::failure_log::LINES_PER_WINDOW_MAX as usize * 2).contains(&escapes),
        "{escapes} lines for 50 failures:\n{text}"
    );
}

#[derive(serde::Serialize)]
struct WaitFor<'a> {
    name: &'a str,
    at_least: i64,
}

#[test]
fn wait_on_a_watch_then_the_callback_finishes_and_notifies() {
    let rt = rt();
    let mut t = MemTree::new(0x1234);
    call(
        &rt,
        &mut t,
        "counter",
        "incr",
        &mp(&Incr { name: "w", by: 1 }),
    )
    .unwrap();
    let out = call(
        &rt,
        &mut t,
        "counter",
        "wait_for",
        &mp(&WaitFor {
            name: "w",
            at_least: 3,
        }),
    )
    .unwrap();
    let token = match out.reply {
        Reply::Wait { token } => token,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        t.watches,
        vec![("/counters/w".to_string(), token.clone(), false)]
    );

    // The pipeline fires the watch after another write; the callback re-checks.
    call(
        &rt,
        &mut t,
        "counter",
        "incr",
        &mp(&Incr { name: "w", by: 1 }),
    )
    .unwrap();
    let ev = WatchRequest {
        token: token.clone(),
        path: "/counters/w".into(),
        event: WatchEvent::DataChanged,
        caller: caller(),
    };
    let mut view = t.clone();
    let out = rt.on_watch("counter", &ev, &mut view).unwrap();
    assert_eq!(
        out.reply,
        Reply::Wait {
            token: token.clone()
        },
        "2 < 3: waits again"
    );
    assert!(view.notifications.is_empty());

    call(
        &rt,
        &mut t,
        "counter",
        "incr",
        &mp(&Incr { name: "w", by: 1 }),
    )
    .unwrap();
    let mut view = t.clone();
    let out = rt.on_watch("counter", &ev, &mut view).unwrap();
    assert_eq!(done::<i64>(&out.reply), 3);
    assert_eq!(view.notifications.len(), 1);
    let (session, payload) = &view.notifications[0];
    assert_eq!(*session, 0x1234);
    assert_eq!(
        abi::decode::<(String, String, i64)>(payload).unwrap(),
        ("reached".into(), "/counters/w".into(), 3)
    );

    assert_eq!(
        rt.on_watch("echo", &ev, &mut view).unwrap_err(),
        RecipeError::NoWatchHandler("echo".into())
    );
}

#[test]
fn every_call_gets_a_fresh_instance() {
    // Nothing a call leaves in memory is visible to the next: the counter's
    // only state is the tree.
    let rt = rt();
    let mut a = MemTree::new(1);
    let mut b = MemTree::new(2);
    for _ in 0..3 {
        call(
            &rt,
            &mut a,
            "counter",
            "incr",
            &mp(&Incr { name: "c", by: 1 }),
        )
        .unwrap();
    }
    let out = call(
        &rt,
        &mut b,
        "counter",
        "incr",
        &mp(&Incr { name: "c", by: 1 }),
    )
    .unwrap();
    assert_eq!(done::<i64>(&out.reply), 1);
}

// A call that fails before any guest code runs is counted all the same, by
// kind: an unknown method under its module, arguments that do not decode
// as `bad_arguments`, and a call of a module not served under `*`
// (`UNSERVED`), which a new leader's runtime goes on counting from.
#[test]
fn failures_before_the_recipe_runs_are_counted_by_kind() {
    use wazoo_core::recipe::{RecipeCounters, RecipeEngine, UNSERVED};
    let mut first = rt();
    let mut t = MemTree::new(1);
    for (module, method, args, code) in [
        ("echo", "nope", mp(&()), -6),
        ("echo", "echo", mp(&17), -8),
        ("nosuch", "x", mp(&()), -6),
    ] {
        let r = RecipeEngine::call(&mut first, module, method, &args, &caller(), &mut t);
        assert!(
            matches!(&r, Reply::Error { code: c, .. } if *c == code),
            "{module}.{method}: {r:?}"
        );
    }
    let reports = first.modules();
    let echo = reports.iter().find(|m| m.name == "echo").unwrap();
    assert_eq!((echo.calls, echo.errors), (2, 2));
    assert_eq!(echo.counters.errors["unknown_method"], 1);
    assert_eq!(echo.counters.errors["bad_arguments"], 1);
    let unserved = reports.iter().find(|m| m.name == UNSERVED).unwrap();
    assert_eq!((unserved.calls, unserved.errors), (1, 1));
    assert_eq!(unserved.counters.errors["unknown_module"], 1);
    assert!(unserved.methods.is_empty());

    let committed: RecipeCounters = reports
        .iter()
        .map(|m| (m.name.clone(), m.counters.clone()))
        .collect();
    let mut next = rt();
    assert!(
        !next.modules().iter().any(|m| m.name == UNSERVED),
        "listed only once a call found no module"
    );
    RecipeEngine::seed_counters(&mut next, &committed);
    RecipeEngine::call(&mut next, "gone", "x", &mp(&()), &caller(), &mut t);
    let after = next.modules();
    let unserved = after.iter().find(|m| m.name == UNSERVED).unwrap();
    assert_eq!(unserved.counters.errors["unknown_module"], 2);
}
