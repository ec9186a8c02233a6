//! A handle with a budget ([`Runtime::within`]): the member's first try at
//! a step. An ordinary call fits and counts as a call; one that needs more
//! fails with the budget's error, is not counted, and runs in full on the
//! plain handle (docs/ARCHITECTURE.md, "Recipes", "Steps off the member's
//! thread").

mod plugin_support;

use plugin_support::*;
use std::time::{Duration, Instant};
use wazoo_runtime::abi::CallerInfo;
use wazoo_runtime::{Budget, Limits, RecipeError, RecipeHost, Runtime, RuntimeConfig};

fn caller() -> CallerInfo {
    CallerInfo {
        session: 7,
        guid: "g-1".into(),
        ids: Vec::new(),
    }
}

fn calls_and_errors(rt: &Runtime, name: &str) -> (u64, u64) {
    let s = rt
        .stats()
        .into_iter()
        .find(|s| s.info.name == name)
        .expect("loaded");
    (s.calls, s.errors)
}

const QUICK: Budget = Budget {
    fuel: 500_000,
    deadline: Duration::ZERO,
    message_bytes: 64 << 10,
};

#[test]
fn an_ordinary_call_fits_the_budget_and_counts() {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    rt.load_bytes(&good_module("good", "1.0.0", "fine"))
        .unwrap();
    let quick = rt.within(QUICK);
    // The deadline is the next epoch tick: on a busy machine a tick may
    // land while the call runs (it is then over budget, not counted, and
    // tried again, as the member sends it to a worker). Twenty tries in a
    // row do not all meet one.
    let mut last = None;
    for _ in 0..20 {
        match quick.call("good", "get", &[], &caller(), &mut MemTree::new(7)) {
            Ok(out) => {
                last = Some(out);
                break;
            }
            Err(e) => assert!(quick.over_budget(&e), "only the budget may stop it: {e:?}"),
        }
    }
    let out = last.expect("fits");
    assert_eq!(done::<String>(&out.reply), "fine");
    assert_eq!(calls_and_errors(&rt, "good"), (1, 0));
}

#[test]
fn a_call_past_the_budget_is_not_counted_and_runs_in_full_afterwards() {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let spin = wat_module(
        &manifest("spin", "1.0.0", &["get"], &[]),
        "",
        "(loop $l (br $l)) (unreachable)",
        b"",
    );
    rt.load_bytes(&spin).unwrap();
    let quick = rt.within(QUICK);
    let t = Instant::now();
    let err = quick
        .call("spin", "get", &[], &caller(), &mut MemTree::new(7))
        .expect_err("an infinite loop does not fit");
    assert!(quick.over_budget(&err), "{err:?}");
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "the budget bounds the try (took {:?})",
        t.elapsed()
    );
    assert_eq!(calls_and_errors(&rt, "spin"), (0, 0), "a try is not a call");
    let err = rt
        .call("spin", "get", &[], &caller(), &mut MemTree::new(7))
        .expect_err("still an infinite loop");
    assert!(!rt.over_budget(&err), "the plain handle has no budget");
    assert_eq!(
        err,
        RecipeError::FuelExhausted {
            budget: Limits::default().fuel
        }
    );
    assert_eq!(calls_and_errors(&rt, "spin"), (1, 1));
}

#[test]
fn a_batch_past_the_budgets_bytes_is_over_budget_not_an_error() {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    // One read of a 200 KB node: within the limits, past the budget.
    let ops = mp(&vec![wazoo_runtime::abi::TreeOp::Get {
        path: "/big".into(),
        watch: None,
    }]);
    let body = "(drop (call $tree (i32.const 1024) (i32.const $DATA_LEN))) (i64.const 0)";
    let import = r#"(import "wazoo" "tree" (func $tree (param i32 i32) (result i64)))"#;
    rt.load_bytes(&wat_module(
        &manifest("reader", "1.0.0", &["get"], &["/big"]),
        import,
        body,
        &ops,
    ))
    .unwrap();
    let mut tree = MemTree::new(7);
    tree.create(
        "/big",
        &vec![1; 200_000],
        wazoo_runtime::abi::CreateMode::Persistent,
        None,
    )
    .unwrap();
    let quick = rt.within(QUICK);
    let err = quick
        .call("reader", "get", &[], &caller(), &mut tree.clone())
        .expect_err("past the budget's bytes");
    assert!(quick.over_budget(&err), "{err:?}");
    assert_eq!(calls_and_errors(&rt, "reader"), (0, 0));
}
