//! `rwlock`: shared (read/write) locks and their revocable form (ZooKeeper
//! recipes, "Shared Locks" and "Revocable Shared Locks"), with kazoo's
//! `ReadLock`/`WriteLock` node names so both can share a lock path.
//!
//! Layout: `PATH/<guid>__rlock__<seq>` (read) and `PATH/<guid>__lock__<seq>`
//! (write), ephemeral sequential, data = the caller's identifier. The recipe's
//! `read-`/`write-` prefixes are kazoo's `__rlock__`/`__lock__` markers.
//!
//! - `read_acquire {path, id?}` -> Done(node path) when no `__lock__` node
//!   has a lower sequence; else Wait (token `read:PATH`) on an exists watch
//!   on the next lower `__lock__` node (the recipe's read lock step 4).
//! - `write_acquire {path, id?}` -> Done(node path) when no contender of
//!   either kind has a lower sequence; else Wait (token `write:PATH`) on the
//!   next lower node of either kind (the recipe's write lock step 4).
//! - `release {path}` -> Done(number of the caller's nodes deleted, read and
//!   write).
//! - `revoke {node}` -> Done(bool): writes "unlock" into a lock node (the
//!   recipe's revocation request); false if the node is gone.
//! - `watch_revoke {node}` -> Done(true) once the node's data is "unlock",
//!   Done(false) if the node is gone (released); else Wait (token
//!   `revoke:NODE`) on a data watch on the node.
use wazoo_sdk::prelude::*;

#[path = "../../common/util.rs"]
mod util;
use util::*;

recipe!(
    name = "rwlock",
    prefixes = ["/"],
    methods = [read_acquire, write_acquire, release, revoke, watch_revoke],
    on_watch = fired
);

#[derive(Deserialize)]
struct Acquire {
    path: String,
    #[serde(default, with = "wazoo_sdk::abi::bytes")]
    id: Vec<u8>,
}

#[derive(Deserialize)]
struct PathArg {
    path: String,
}

#[derive(Deserialize)]
struct NodeArg {
    node: String,
}

/// (marker of the caller's node, markers that block it, token kind).
fn kind(read: bool) -> (&'static str, &'static [&'static str], &'static str) {
    if read {
        (RLOCK, &[LOCK], "read")
    } else {
        (LOCK, &[LOCK, RLOCK], "write")
    }
}

fn read_acquire(cx: &mut Ctx, a: Acquire) -> Result<Step<String>> {
    acquire(cx, a, true)
}

fn write_acquire(cx: &mut Ctx, a: Acquire) -> Result<Step<String>> {
    acquire(cx, a, false)
}

/// Step 1: create the node (reusing the caller's node of that kind: the
/// guid rule), then steps 2-5.
fn acquire(cx: &mut Ctx, a: Acquire, read: bool) -> Result<Step<String>> {
    check_path(&a.path)?;
    ensure_path(cx, &a.path)?;
    let (marker, _, _) = kind(read);
    join_contenders(cx, &a.path, marker, &a.id)?;
    decide(cx, &a.path, read)
}

fn decide(cx: &mut Ctx, path: &str, read: bool) -> Result<Step<String>> {
    let (marker, blockers, kind) = kind(read);
    loop {
        let kids = cx.children(path)?;
        let own = find_own(&kids, &guid(cx), marker).ok_or_else(|| {
            Error::new(
                code::NO_NODE,
                format!("no {kind} lock node of the caller under {path} (released, or the session lost it)"),
            )
        })?;
        match predecessor(&kids, &own, marker, blockers) {
            None => return Ok(Step::Done(wazoo_sdk::join(path, &own))),
            Some(p) => {
                let t = format!("{kind}:{path}");
                if cx.exists_watch(&wazoo_sdk::join(path, &p), &t)?.is_some() {
                    return Ok(Step::Wait { token: t });
                }
            }
        }
    }
}

fn release(cx: &mut Ctx, a: PathArg) -> Result<Step<u32>> {
    check_path(&a.path)?;
    let g = guid(cx);
    let mut n = 0;
    for kid in children_or_empty(cx, &a.path)? {
        if kid.starts_with(&format!("{g}{LOCK}")) || kid.starts_with(&format!("{g}{RLOCK}")) {
            n += delete_if_exists(cx, &wazoo_sdk::join(&a.path, &kid))? as u32;
        }
    }
    Ok(Step::Done(n))
}

fn check_lock_node(node: &str) -> Result<()> {
    check_path(node)?;
    if contender(wazoo_sdk::name(node), &[LOCK, RLOCK]).is_none() {
        return Err(Error::bad_arguments(format!("{node:?} is not a lock node")));
    }
    Ok(())
}

/// The revoker's side: setData(node, "unlock").
fn revoke(cx: &mut Ctx, a: NodeArg) -> Result<Step<bool>> {
    check_lock_node(&a.node)?;
    match cx.set(&a.node, b"unlock", -1) {
        Ok(_) => Ok(Step::Done(true)),
        Err(e) if e.is(code::NO_NODE) => Ok(Step::Done(false)),
        Err(e) => Err(e),
    }
}

/// The holder's side: getData with a watch on its node, looking for "unlock".
fn watch_revoke(cx: &mut Ctx, a: NodeArg) -> Result<Step<bool>> {
    check_lock_node(&a.node)?;
    revoke_check(cx, &a.node)
}

fn revoke_check(cx: &mut Ctx, node: &str) -> Result<Step<bool>> {
    let t = format!("revoke:{node}");
    match cx.get_watch(node, &t) {
        Ok((data, _)) if data == b"unlock" => Ok(Step::Done(true)),
        // The watch registered by get_watch stays; returning Wait keeps it.
        Ok(_) => Ok(Step::Wait { token: t }),
        Err(e) if e.is(code::NO_NODE) => Ok(Step::Done(false)),
        Err(e) => Err(e),
    }
}

fn fired(cx: &mut Ctx, ev: Fired) -> Result<Step<serde_either::Either>> {
    match split_token(&ev.token)? {
        ("read", path) => Ok(decide(cx, path, true)?.map(serde_either::Either::Node)),
        ("write", path) => Ok(decide(cx, path, false)?.map(serde_either::Either::Node)),
        ("revoke", node) => Ok(revoke_check(cx, node)?.map(serde_either::Either::Revoked)),
        _ => Err(Error::bad_arguments(format!("bad token {:?}", ev.token))),
    }
}

/// The on_watch handler answers for two kinds of waits: acquires (a node
/// path) and revocation watches (a bool). Untagged, so the caller decodes
/// the same MessagePack as the direct reply.
mod serde_either {
    use serde::Serialize;

    #[derive(Serialize)]
    #[serde(untagged)]
    pub enum Either {
        Node(String),
        Revoked(bool),
    }
}
