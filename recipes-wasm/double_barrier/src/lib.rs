//! `double_barrier`: the double barrier of the ZooKeeper recipes ("Double
//! Barriers"), in kazoo's `DoubleBarrier` layout (process nodes are direct
//! children of the barrier node, beside `ready`).
//!
//! Layout: `PATH` (the barrier node `b`), `PATH/NAME` (a process node,
//! ephemeral, one per process `p`, data = empty), `PATH/ready` (persistent,
//! created by the process that completes the count).
//!
//! - `enter {path, name, count}` -> Done(()) once `count` process nodes are
//!   there; else Wait (token `enter:PATH/NAME`) on an exists watch on
//!   `PATH/ready`. The recipe's "Enter" steps 1-6: the process node is created
//!   (kept if the caller's session already made it: a retry), the children
//!   counted (`ready` excluded) and, at `count`, `ready` created. The recipe
//!   sets the watch on `ready` before counting; one step sees a consistent
//!   tree, so the watch is registered only when the caller has to wait
//!   (none is left behind). A watch fired by `ready`'s creation completes
//!   the wait even if `ready` is gone again by then.
//! - `leave {path, name}` -> Done(()) once no process node is left; else
//!   Wait (token `leave:PATH/NAME`). The recipe's "Leave" steps 1-6: with no
//!   process nodes, done; if the caller's node is the only one, delete it,
//!   done; if it is the lowest (by name), watch the highest; otherwise
//!   delete the caller's node (if still there) and watch the lowest. A
//!   fired watch runs the steps again. Process nodes are ephemeral, so a
//!   process that dies inside the barrier does not block the others.
//!   Addition to the recipe: the step in which the last process node goes
//!   also deletes `ready`, so the barrier can be used again.
use wazoo_sdk::prelude::*;

#[path = "../../common/util.rs"]
mod util;
use util::*;

recipe!(
    name = "double_barrier",
    prefixes = ["/"],
    methods = [enter, leave],
    on_watch = fired
);

const READY: &str = "ready";

#[derive(Deserialize)]
struct Enter {
    path: String,
    name: String,
    count: u32,
}

#[derive(Deserialize)]
struct Leave {
    path: String,
    name: String,
}

fn check_args(path: &str, name: &str) -> Result<()> {
    check_path(path)?;
    check_name("process name", name)?;
    if name == READY {
        return Err(Error::bad_arguments("\"ready\" is the barrier's own node"));
    }
    Ok(())
}

fn processes(cx: &mut Ctx, path: &str) -> Result<Vec<String>> {
    let mut kids: Vec<String> = children_or_empty(cx, path)?
        .into_iter()
        .filter(|k| k != READY)
        .collect();
    kids.sort();
    Ok(kids)
}

fn enter(cx: &mut Ctx, a: Enter) -> Result<Step<()>> {
    check_args(&a.path, &a.name)?;
    if a.count == 0 {
        return Err(Error::bad_arguments("count must be at least 1"));
    }
    ensure_path(cx, &a.path)?;
    // 1, 3: n = b + "/" + p; create(n, EPHEMERAL).
    let n = wazoo_sdk::join(&a.path, &a.name);
    match cx.exists(&n)? {
        Some(stat) if stat.ephemeral_owner == cx.caller_session() => {}
        Some(_) => {
            return Err(Error::new(
                code::NODE_EXISTS,
                format!("{n} belongs to another session"),
            ))
        }
        None => {
            cx.create(&n, b"", CreateMode::Ephemeral)?;
        }
    }
    let ready = wazoo_sdk::join(&a.path, READY);
    if cx.exists(&ready)?.is_some() {
        return Ok(Step::Done(()));
    }
    // 4-6: L = getChildren(b); fewer than x: wait for ready; else create it.
    if processes(cx, &a.path)?.len() as u64 >= a.count as u64 {
        cx.create(&ready, b"", CreateMode::Persistent)?;
        return Ok(Step::Done(()));
    }
    // 2: exists(b + "/ready", watch).
    let t = format!("enter:{n}");
    cx.exists_watch(&ready, &t)?;
    Ok(Step::Wait { token: t })
}

fn leave(cx: &mut Ctx, a: Leave) -> Result<Step<()>> {
    check_args(&a.path, &a.name)?;
    leave_steps(cx, &wazoo_sdk::join(&a.path, &a.name))
}

fn leave_steps(cx: &mut Ctx, n: &str) -> Result<Step<()>> {
    let b = wazoo_sdk::parent(n);
    let me = wazoo_sdk::name(n);
    let t = format!("leave:{n}");
    loop {
        // 1. L = getChildren(b, false)
        let l = processes(cx, b)?;
        // 2. if no children, exit
        if l.is_empty() {
            delete_if_exists(cx, &wazoo_sdk::join(b, READY))?;
            return Ok(Step::Done(()));
        }
        // 3. if p is the only process node in L, delete(n) and exit
        if l.len() == 1 && l[0] == me {
            cx.delete(n, -1)?;
            delete_if_exists(cx, &wazoo_sdk::join(b, READY))?;
            return Ok(Step::Done(()));
        }
        let lowest = &l[0];
        let highest = &l[l.len() - 1];
        let watch = if lowest == me {
            // 4. if p is the lowest process node in L, wait on highest
            highest
        } else {
            // 5. else delete(n) if still exists and wait on lowest
            delete_if_exists(cx, n)?;
            lowest
        };
        if cx.exists_watch(&wazoo_sdk::join(b, watch), &t)?.is_some() {
            return Ok(Step::Wait { token: t });
        }
        // 6. goto 1
    }
}

fn fired(cx: &mut Ctx, ev: Fired) -> Result<Step<()>> {
    match split_token(&ev.token)? {
        ("enter", _) if ev.event == WatchEvent::Created => Ok(Step::Done(())),
        ("enter", n) => {
            // Not a creation (cannot happen for an exists watch on a missing
            // node): look again.
            let ready = wazoo_sdk::join(wazoo_sdk::parent(n), READY);
            if cx.exists(&ready)?.is_some() {
                return Ok(Step::Done(()));
            }
            let t = ev.token.clone();
            cx.exists_watch(&ready, &t)?;
            Ok(Step::Wait { token: t })
        }
        ("leave", n) => leave_steps(cx, n),
        _ => Err(Error::bad_arguments(format!("bad token {:?}", ev.token))),
    }
}
