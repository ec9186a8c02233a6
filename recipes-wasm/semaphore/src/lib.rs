//! `semaphore`: up to `max_leases` holders at once, fair (first come, first
//! served) and without a herd effect, in kazoo's `Semaphore` layout so both
//! can share a path.
//!
//! Layout (kazoo's):
//! - `PATH`: the lease pool, data = `max_leases` in decimal (set when the
//!   pool is created; an acquire with another value fails with BadArguments,
//!   as kazoo raises ValueError; non-numeric data is ignored, as kazoo does);
//! - `PATH/<guid>`: a lease, ephemeral, data = the caller's identifier;
//! - `PATH-__lock__`: a sibling exclusive lock (the `lock` recipe's layout,
//!   `<guid>__lock__<seq>` contenders) that orders acquirers.
//!
//! Why a lock in front (the choice the issue asks to document): with a plain
//! queue of sequential nodes where the first `max_leases` hold, no single
//! node to watch is right for a waiter: a release anywhere among the holders,
//! or a waiter leaving ahead of it, can make it a holder without touching the
//! node it watches (watching "the node N positions before" misses a waiter
//! that leaves; watching the predecessor misses a holder that releases). So,
//! like kazoo and Curator, acquirers queue on an exclusive lock (each watches
//! only its predecessor) and only the lock's head watches the lease pool
//! (one child watch). The head takes a lease as soon as the pool has fewer
//! than `max_leases` children, deleting its lock node in the same step, which
//! wakes exactly the next acquirer. One wake-up per release, in arrival order.
//!
//! - `acquire {path, max_leases, id?}` -> Done(lease path) when the caller
//!   holds a lease (at once if it already does); else Wait, token
//!   `acquire:PATH`: an exists watch on the lock predecessor, or, at the
//!   head, a child watch on the pool.
//! - `release {path}` -> Done(bool): deletes the caller's lease (and its
//!   lock node if it is still queued: a cancel).
//! - `holders {path}` -> Done(Vec<bytes>): the leases' data (kazoo's
//!   `lease_holders`).
use wazoo_sdk::prelude::*;

#[path = "../../common/util.rs"]
mod util;
use util::*;

recipe!(
    name = "semaphore",
    prefixes = ["/"],
    methods = [acquire, release, holders],
    on_watch = fired
);

#[derive(Deserialize)]
struct Acquire {
    path: String,
    max_leases: u32,
    #[serde(default, with = "wazoo_sdk::abi::bytes")]
    id: Vec<u8>,
}

#[derive(Deserialize)]
struct PathArg {
    path: String,
}

fn lock_path(path: &str) -> String {
    format!("{path}-{LOCK}")
}

fn acquire(cx: &mut Ctx, a: Acquire) -> Result<Step<String>> {
    check_path(&a.path)?;
    if a.max_leases == 0 {
        return Err(Error::bad_arguments("max_leases must be at least 1"));
    }
    if ensure_path(cx, &a.path)? {
        let (data, _) = cx.get(&a.path)?;
        if let Some(n) = std::str::from_utf8(&data)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        {
            if n != a.max_leases as u64 {
                return Err(Error::bad_arguments(format!(
                    "inconsistent max leases: {n} stored at {}, {} asked",
                    a.path, a.max_leases
                )));
            }
        }
    } else {
        cx.set(&a.path, a.max_leases.to_string().as_bytes(), -1)?;
    }
    let g = guid(cx);
    let lease = wazoo_sdk::join(&a.path, &g);
    if cx.exists(&lease)?.is_some() {
        return Ok(Step::Done(lease));
    }
    let lp = lock_path(&a.path);
    ensure_path(cx, &lp)?;
    // The lease's identifier rides on the lock node until it is taken.
    join_contenders(cx, &lp, LOCK, &a.id)?;
    decide(cx, &a.path, a.max_leases)
}

fn token(path: &str, max: u32) -> String {
    format!("acquire:{max}:{path}")
}

fn decide(cx: &mut Ctx, path: &str, max: u32) -> Result<Step<String>> {
    let g = guid(cx);
    let lease = wazoo_sdk::join(path, &g);
    let lp = lock_path(path);
    let t = token(path, max);
    loop {
        let kids = children_or_empty(cx, &lp)?;
        let own = find_own(&kids, &g, LOCK).ok_or_else(|| {
            Error::new(
                code::NO_NODE,
                format!("the caller is not queued for {path} (released, or the session lost it)"),
            )
        })?;
        let own_path = wazoo_sdk::join(&lp, &own);
        if let Some(p) = predecessor(&kids, &own, LOCK, &[LOCK]) {
            if cx.exists_watch(&wazoo_sdk::join(&lp, &p), &t)?.is_some() {
                return Ok(Step::Wait { token: t });
            }
            continue;
        }
        // The head of the queue: a lease if one is free, else watch the pool.
        let leases = cx.children(path)?;
        if (leases.len() as u64) < max as u64 {
            let (id, _) = cx.get(&own_path)?;
            cx.create(&lease, &id, CreateMode::Ephemeral)?;
            cx.delete(&own_path, -1)?;
            return Ok(Step::Done(lease));
        }
        cx.children_watch(path, &t)?;
        return Ok(Step::Wait { token: t });
    }
}

fn fired(cx: &mut Ctx, ev: Fired) -> Result<Step<String>> {
    let (kind, rest) = split_token(&ev.token)?;
    let (max, path) = rest
        .split_once(':')
        .ok_or_else(|| Error::bad_arguments("bad token"))?;
    let max: u32 = max.parse().map_err(|_| Error::bad_arguments("bad token"))?;
    match kind {
        "acquire" => decide(cx, path, max),
        _ => Err(Error::bad_arguments(format!("bad token {:?}", ev.token))),
    }
}

fn release(cx: &mut Ctx, a: PathArg) -> Result<Step<bool>> {
    check_path(&a.path)?;
    let g = guid(cx);
    let lp = lock_path(&a.path);
    if let Some(own) = find_own(&children_or_empty(cx, &lp)?, &g, LOCK) {
        delete_if_exists(cx, &wazoo_sdk::join(&lp, &own))?;
    }
    Ok(Step::Done(delete_if_exists(
        cx,
        &wazoo_sdk::join(&a.path, &g),
    )?))
}

fn holders(cx: &mut Ctx, a: PathArg) -> Result<Step<Vec<Bin>>> {
    check_path(&a.path)?;
    let mut out = Vec::new();
    for kid in children_or_empty(cx, &a.path)? {
        if let Ok((data, _)) = cx.get(&wazoo_sdk::join(&a.path, &kid)) {
            out.push(Bin(data));
        }
    }
    Ok(Step::Done(out))
}
