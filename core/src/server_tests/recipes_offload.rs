//! Recipe steps run off the member's thread (docs/ARCHITECTURE.md,
//! "Recipes", "Where a step runs"): a step runs against a copy of the prep
//! view and is checked when it comes back; one that read a node a write
//! changed meanwhile runs again, so no update is lost, and a session's
//! requests keep their order (ZooKeeper Programmer's Guide, "ZooKeeper
//! guarantees", Sequential Consistency).

use super::*;
use crate::recipe::{error_reply, ModuleReport, RecipeEngine, RecipeHost};
use wazoo_sdk::abi::{self, CallerInfo, Reply, WatchRequest};

/// Module "c": `incr PATH` reads a number from PATH and writes it back
/// plus one (with version -1: only the read set keeps an update from being
/// lost); `read PATH` answers the data; `add PATH` creates a sequential
/// child of PATH and answers its path (it sees no stat of its own node).
struct Counter;

impl RecipeEngine for Counter {
    fn call(
        &mut self,
        _module: &str,
        method: &str,
        args: &[u8],
        _caller: &CallerInfo,
        h: &mut dyn RecipeHost,
    ) -> Reply {
        let path = String::from_utf8(args.to_vec()).unwrap();
        let r: Result<Reply, ErrorCode> = (|| {
            if method == "add" {
                let mode = abi::CreateMode::PersistentSequential;
                let p = h.create(&format!("{path}/n-"), b"", mode, None)?;
                return Ok(Reply::Done(p.into_bytes()));
            }
            let (data, _) = h.get(&path, None)?;
            if method == "read" {
                return Ok(Reply::Done(data));
            }
            let n: u64 = String::from_utf8(data).unwrap().parse().unwrap();
            let next = (n + 1).to_string(); // `incr` and `heavy`
            h.set(&path, next.as_bytes(), -1)?;
            Ok(Reply::Done(next.into_bytes()))
        })();
        r.unwrap_or_else(|e| error_reply(e, "tree error"))
    }

    fn on_watch(&mut self, _: &str, _: &WatchRequest, _: &mut dyn RecipeHost) -> Reply {
        error_reply(ErrorCode::Unimplemented, "no callbacks")
    }

    fn has_module(&self, module: &str) -> bool {
        module == "c"
    }

    fn modules(&self) -> Vec<ModuleReport> {
        Vec::new()
    }
}

/// [`Counter`] with a first try in place, as the wasm runtime has: every
/// method fits its budget but `heavy` (an `incr` that, in its try, stages
/// a write and then runs out of budget).
struct Quick;

impl RecipeEngine for Quick {
    fn call(
        &mut self,
        module: &str,
        method: &str,
        args: &[u8],
        caller: &CallerInfo,
        h: &mut dyn RecipeHost,
    ) -> Reply {
        Counter.call(module, method, args, caller, h)
    }

    fn try_call(
        &mut self,
        module: &str,
        method: &str,
        args: &[u8],
        caller: &CallerInfo,
        h: &mut dyn RecipeHost,
    ) -> Option<Reply> {
        if method == "heavy" {
            h.set("/c", b"999", -1).unwrap();
            return None;
        }
        Some(Counter.call(module, method, args, caller, h))
    }

    fn on_watch(&mut self, m: &str, r: &WatchRequest, h: &mut dyn RecipeHost) -> Reply {
        Counter.on_watch(m, r, h)
    }

    fn has_module(&self, module: &str) -> bool {
        module == "c"
    }

    fn modules(&self) -> Vec<ModuleReport> {
        Vec::new()
    }
}

/// A harness whose steps wait in `h.steps` until the test runs them.
fn offloading() -> Harness {
    let mut h = Harness::default();
    h.server.set_recipe_engine(Box::new(Counter));
    h.server.set_recipe_offload(true);
    h.connect(1);
    h.connect(2);
    ok(h.call(2, create("/c", b"0", CreateMode::Persistent)));
    h
}

fn incr() -> Request {
    Request::RecipeCall {
        module: "c".into(),
        method: "incr".into(),
        args: b"/c".to_vec(),
        guid: String::new(),
    }
}

/// Runs the one step waiting, as a worker would, and reports it.
fn run_step(h: &mut Harness) {
    assert_eq!(h.steps.len(), 1, "one step in flight");
    let done = h.steps.remove(0).run(&mut Counter);
    h.step(Input::RecipeStepDone(Box::new(done)));
}

fn data_of(h: &mut Harness, path: &str) -> Vec<u8> {
    match ok(h.call(
        2,
        Request::GetData {
            path: path.into(),
            watch: false,
        },
    )) {
        Response::GetData { data, .. } => data.unwrap(),
        other => panic!("{other:?}"),
    }
}

fn set_c(h: &mut Harness, value: &str) {
    ok(h.call(
        2,
        Request::SetData {
            path: "/c".into(),
            data: Some(value.as_bytes().to_vec()),
            version: -1,
        },
    ));
}

fn recipe_reply(h: &Harness, conn: u64, xid: i32) -> Option<Reply> {
    h.sent.get(&conn)?.iter().find_map(|s| match s {
        Sent::Reply {
            xid: x,
            body: Some(Response::Recipe(b)),
            ..
        } if *x == xid => Some(abi::decode(b).unwrap()),
        _ => None,
    })
}

#[test]
fn a_write_that_lands_while_a_step_runs_makes_it_run_again_and_no_update_is_lost() {
    let mut h = offloading();
    h.send(1, 7, incr());
    assert_eq!(h.steps.len(), 1, "the step went to a worker");
    // Another client's write lands while the step runs on the old view.
    set_c(&mut h, "10");
    let before = h.server.last_zxid();
    run_step(&mut h);
    assert_eq!(
        recipe_reply(&h, 1, 7),
        None,
        "not answered from a stale read"
    );
    assert_eq!(h.server.last_zxid(), before, "the stale step made no txn");
    assert_eq!(h.server.recipe_step_reruns(), (1, 0));
    run_step(&mut h);
    assert_eq!(recipe_reply(&h, 1, 7), Some(Reply::Done(b"11".to_vec())));
    assert_eq!(data_of(&mut h, "/c"), b"11", "both updates are there");
    assert_eq!(h.server.recipe_steps_in_flight(), 0);
    assert_eq!(
        h.server.recipe_steps_offloaded(),
        1,
        "one step offloaded (its rerun is not another)"
    );
}

#[test]
fn a_step_whose_reads_did_not_change_commits_as_it_ran() {
    let mut h = offloading();
    h.send(
        1,
        7,
        Request::RecipeCall {
            module: "c".into(),
            method: "add".into(),
            args: b"/c".to_vec(),
            guid: String::new(),
        },
    );
    // A write elsewhere does not touch what the step read.
    ok(h.call(2, create("/other", b"", CreateMode::Persistent)));
    run_step(&mut h);
    assert!(h.steps.is_empty(), "no second run");
    let created = b"/c/n-0000000000".to_vec();
    assert_eq!(recipe_reply(&h, 1, 7), Some(Reply::Done(created)));
    assert_eq!(h.server.recipe_step_reruns(), (0, 0));
    // Its stamps are those of the zxid its txn got, not the one it ran at
    // (the create of /other took that one).
    let z = h.server.last_zxid().to_wire();
    for path in ["/c/n-0000000000", "/c"] {
        let (czxid, pzxid) = {
            let s = h.server.tree().stat(path).unwrap();
            (s.czxid, s.pzxid)
        };
        assert_eq!(pzxid, z, "{path}");
        if path != "/c" {
            assert_eq!(czxid, z, "{path}");
        }
    }
}

#[test]
fn a_step_shown_a_stat_of_its_own_write_runs_again_when_its_txn_gets_another_zxid() {
    let mut h = offloading();
    // `set` shows the step the new mzxid; a write elsewhere takes that
    // zxid first, so the step runs again to be shown the right one.
    h.send(1, 7, incr());
    ok(h.call(2, create("/other", b"", CreateMode::Persistent)));
    run_step(&mut h);
    assert_eq!(h.server.recipe_step_reruns(), (1, 0));
    run_step(&mut h);
    assert_eq!(recipe_reply(&h, 1, 7), Some(Reply::Done(b"1".to_vec())));
    let s = h.server.tree().stat("/c").unwrap();
    assert_eq!(s.mzxid, h.server.last_zxid().to_wire());
}

#[test]
fn a_step_that_keeps_conflicting_runs_on_the_members_thread_after_bounded_retries() {
    let mut h = offloading();
    h.send(1, 7, incr());
    for round in 1..=3 {
        set_c(&mut h, &(round * 100).to_string());
        run_step(&mut h);
    }
    // The third conflict ran it here, against the view as it was: 300 + 1.
    assert!(h.steps.is_empty());
    assert_eq!(h.server.recipe_step_reruns(), (3, 1));
    assert_eq!(recipe_reply(&h, 1, 7), Some(Reply::Done(b"301".to_vec())));
    assert_eq!(data_of(&mut h, "/c"), b"301");
}

#[test]
fn a_sessions_later_requests_wait_behind_its_call_in_flight() {
    let mut h = offloading();
    h.send(1, 7, incr());
    // The same session's write, sent after the call, must not take effect
    // before it (nor its read be answered before the call's reply).
    h.ops.insert((1, 8), OpCode::SetData);
    h.step(Input::Request {
        conn: 1,
        xid: 8,
        req: Request::SetData {
            path: "/c".into(),
            data: Some(b"50".to_vec()),
            version: -1,
        },
    });
    h.ops.insert((1, 9), OpCode::GetData);
    h.step(Input::Request {
        conn: 1,
        xid: 9,
        req: Request::GetData {
            path: "/c".into(),
            watch: false,
        },
    });
    assert_eq!(data_of(&mut h, "/c"), b"0", "the later write waits");
    run_step(&mut h);
    assert!(h.steps.is_empty(), "nothing the step read changed");
    let xids: Vec<i32> = h.sent[&1]
        .iter()
        .filter_map(|s| match s {
            Sent::Reply { xid, .. } => Some(*xid),
            _ => None,
        })
        .collect();
    assert_eq!(xids, vec![7, 8, 9], "replies in request order");
    assert_eq!(recipe_reply(&h, 1, 7), Some(Reply::Done(b"1".to_vec())));
    match h.sent[&1].last() {
        Some(Sent::Reply {
            body: Some(Response::GetData { data, .. }),
            ..
        }) => assert_eq!(data.as_deref(), Some(&b"50"[..])),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_read_only_step_is_not_run_again_after_a_write() {
    let mut h = offloading();
    h.send(
        1,
        7,
        Request::RecipeCall {
            module: "c".into(),
            method: "read".into(),
            args: b"/c".to_vec(),
            guid: String::new(),
        },
    );
    set_c(&mut h, "5");
    run_step(&mut h);
    // It read the state of when it started, which was current then.
    assert!(h.steps.is_empty());
    assert_eq!(recipe_reply(&h, 1, 7), Some(Reply::Done(b"0".to_vec())));
}

#[test]
fn a_step_that_comes_back_after_a_role_change_is_dropped() {
    let mut h = offloading();
    h.send(1, 7, incr());
    let job = h.steps.remove(0);
    // Leaving and taking the standalone role again forgets what was in
    // flight (its connections were closed).
    h.step(Input::Role(Role::Looking));
    h.step(Input::Role(Role::Standalone));
    let done = job.run(&mut Counter);
    let before = h.server.last_zxid();
    h.step(Input::RecipeStepDone(Box::new(done)));
    assert_eq!(h.server.last_zxid(), before, "no txn from a forgotten step");
    assert_eq!(h.server.recipe_steps_in_flight(), 0);
}

#[test]
fn a_step_that_fits_the_members_budget_runs_in_place() {
    let mut h = offloading();
    h.server.set_recipe_engine(Box::new(Quick));
    h.send(1, 7, incr());
    assert!(h.steps.is_empty(), "no worker needed");
    assert_eq!(recipe_reply(&h, 1, 7), Some(Reply::Done(b"1".to_vec())));
    assert_eq!(data_of(&mut h, "/c"), b"1");
}

#[test]
fn a_step_past_the_members_budget_goes_to_a_worker_and_its_try_leaves_nothing() {
    let mut h = offloading();
    h.server.set_recipe_engine(Box::new(Quick));
    h.send(
        1,
        7,
        Request::RecipeCall {
            module: "c".into(),
            method: "heavy".into(),
            args: b"/c".to_vec(),
            guid: String::new(),
        },
    );
    assert_eq!(h.steps.len(), 1, "sent to a worker");
    assert_eq!(data_of(&mut h, "/c"), b"0", "the try's write was dropped");
    run_step(&mut h);
    assert_eq!(recipe_reply(&h, 1, 7), Some(Reply::Done(b"1".to_vec())));
    assert_eq!(data_of(&mut h, "/c"), b"1");
}

/// A harness with enforceQuota on and a hard count quota of 3 on /q
/// ("ZooKeeper Quota's Guide", as zkCli's setquota leaves the tree), with
/// /q and /q/a under it; steps run off the member's thread when
/// `offload`.
fn quota_harness(offload: bool) -> Harness {
    let mut h = Harness::new(ServerConfig {
        enforce_quota: true,
        ..ServerConfig::default()
    });
    h.server.set_recipe_engine(Box::new(Counter));
    h.server.set_recipe_offload(offload);
    h.connect(1);
    h.connect(2);
    for (path, data) in [
        ("/q", ""),
        ("/q/a", ""),
        ("/zookeeper/quota/q", ""),
        (
            "/zookeeper/quota/q/zookeeper_limits",
            "count=-1,bytes=-1,countHardLimit=3",
        ),
        ("/zookeeper/quota/q/zookeeper_stats", "count=0,bytes=0"),
    ] {
        ok(h.call(2, create(path, data.as_bytes(), CreateMode::Persistent)));
    }
    h
}

fn add_under_q_a() -> Request {
    Request::RecipeCall {
        module: "c".into(),
        method: "add".into(),
        args: b"/q/a".to_vec(),
        guid: String::new(),
    }
}

#[test]
fn an_offloaded_steps_writes_are_checked_against_the_quota_as_it_is_when_it_returns() {
    // In place, with /q/b created first, the step's create passes the hard
    // count quota (3 nodes: /q, /q/a, /q/b): QuotaExceeded.
    let mut here = quota_harness(false);
    ok(here.call(2, create("/q/b", b"", CreateMode::Persistent)));
    here.send(1, 7, add_under_q_a());
    let in_place = recipe_reply(&here, 1, 7);
    assert_eq!(
        in_place,
        Some(error_reply(ErrorCode::QuotaExceeded, "tree error"))
    );

    // Off the thread, /q/b is created while the step runs against a view
    // where the quota still had room: nothing the step read changed (it
    // read /q/a), but the quota it was checked against did. It runs again
    // and gets what it gets in place; nothing of it is committed.
    let mut h = quota_harness(true);
    h.send(1, 7, add_under_q_a());
    assert_eq!(h.steps.len(), 1, "the step went to a worker");
    ok(h.call(2, create("/q/b", b"", CreateMode::Persistent)));
    let before = h.server.last_zxid();
    run_step(&mut h);
    assert_eq!(recipe_reply(&h, 1, 7), None, "not committed over the quota");
    assert_eq!(h.server.recipe_step_reruns(), (1, 0));
    run_step(&mut h);
    assert_eq!(recipe_reply(&h, 1, 7), in_place);
    assert_eq!(h.server.last_zxid(), before, "the step made no txn");
    assert_eq!(h.server.tree().children("/q/a"), Some(Vec::new()));
    assert_eq!(
        h.server
            .tree()
            .get_data("/zookeeper/quota/q/zookeeper_stats")
            .map(|(d, _)| String::from_utf8(d.unwrap()).unwrap()),
        Some("count=3,bytes=0".to_string())
    );
}

#[test]
fn an_offloaded_step_that_met_the_quota_commits_when_the_quota_still_has_room() {
    let mut h = quota_harness(true);
    h.send(1, 7, add_under_q_a());
    // A write outside the quota changes neither what the step read nor
    // its quota check.
    ok(h.call(2, create("/c2", b"", CreateMode::Persistent)));
    run_step(&mut h);
    assert!(h.steps.is_empty(), "no second run");
    assert_eq!(h.server.recipe_step_reruns(), (0, 0));
    let created = b"/q/a/n-0000000000".to_vec();
    assert_eq!(recipe_reply(&h, 1, 7), Some(Reply::Done(created)));
}
