//! `election`: leader election (ZooKeeper recipes, "Leader Election"),
//! with the acknowledgement the recipe suggests ("Applications may consider
//! creating a separate znode to acknowledge that the leader has executed
//! the leader procedure"). kazoo's `Election` is its `Lock`; this recipe
//! uses the same node names, so kazoo elections and this one can share a
//! path.
//!
//! Layout:
//! - `PATH/<guid>__lock__<seq>`: a candidate (the recipe's `guid-n_<seq>`),
//!   ephemeral sequential, data = the candidate's id. The lowest sequence
//!   leads.
//! - `PATH/__ack__`: persistent, data = the name of the candidate node that
//!   acknowledged (its leader procedure ran). Stale once that node is gone.
//!
//! Methods:
//! - `campaign {path, id}` -> Done(node path) when the caller leads; else
//!   Wait (token `campaign:PATH`) on an exists watch on the next lower
//!   candidate only (no herd); when it fires, the step looks again.
//! - `leader {path}` -> Done(Option<bytes>): the leader's id.
//! - `resign {path}` -> Done(bool): deletes the caller's candidate node
//!   (also a withdrawal while still waiting).
//! - `ack {path}` -> Done(()): the leader acknowledges; fails with APIError
//!   (-100) if the caller does not lead.
//! - `wait_ack {path}` -> Done(bytes: the leader's id) once the current
//!   leader has acknowledged; else Wait (token `wait_ack:PATH`) on a data
//!   watch on `__ack__` (a new leader's ack changes it).
use wazoo_sdk::prelude::*;

#[path = "../../common/util.rs"]
mod util;
use util::*;

recipe!(
    name = "election",
    prefixes = ["/"],
    methods = [campaign, leader, resign, ack, wait_ack],
    on_watch = fired
);

const ACK: &str = "__ack__";

#[derive(Deserialize)]
struct Campaign {
    path: String,
    #[serde(default, with = "wazoo_sdk::abi::bytes")]
    id: Vec<u8>,
}

#[derive(Deserialize)]
struct PathArg {
    path: String,
}

fn campaign(cx: &mut Ctx, a: Campaign) -> Result<Step<String>> {
    check_path(&a.path)?;
    ensure_path(cx, &a.path)?;
    join_contenders(cx, &a.path, LOCK, &a.id)?;
    check(cx, &a.path)
}

fn check(cx: &mut Ctx, path: &str) -> Result<Step<String>> {
    let t = format!("campaign:{path}");
    loop {
        let kids = cx.children(path)?;
        let own = find_own(&kids, &guid(cx), LOCK).ok_or_else(|| {
            Error::new(
                code::NO_NODE,
                format!(
                    "the caller is not a candidate at {path} (resigned, or the session lost it)"
                ),
            )
        })?;
        match predecessor(&kids, &own, LOCK, &[LOCK]) {
            None => return Ok(Step::Done(wazoo_sdk::join(path, &own))),
            Some(p) => {
                if cx.exists_watch(&wazoo_sdk::join(path, &p), &t)?.is_some() {
                    return Ok(Step::Wait { token: t });
                }
            }
        }
    }
}

/// The leading candidate: (node name, id).
fn current(cx: &mut Ctx, path: &str) -> Result<Option<(String, Vec<u8>)>> {
    let kids = children_or_empty(cx, path)?;
    for c in contenders(&kids, &[LOCK]) {
        match cx.get(&wazoo_sdk::join(path, &c.name)) {
            Ok((data, _)) => return Ok(Some((c.name, data))),
            Err(e) if e.is(code::NO_NODE) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

fn leader(cx: &mut Ctx, a: PathArg) -> Result<Step<Option<Bin>>> {
    check_path(&a.path)?;
    Ok(Step::Done(current(cx, &a.path)?.map(|(_, id)| Bin(id))))
}

fn resign(cx: &mut Ctx, a: PathArg) -> Result<Step<bool>> {
    check_path(&a.path)?;
    Ok(Step::Done(leave_contenders(cx, &a.path, LOCK)?))
}

fn ack(cx: &mut Ctx, a: PathArg) -> Result<Step<()>> {
    check_path(&a.path)?;
    let g = guid(cx);
    let leading = current(cx, &a.path)?
        .map(|(name, _)| name)
        .filter(|name| name.starts_with(&format!("{g}{LOCK}")));
    let Some(name) = leading else {
        return Err(Error::new(
            code::API_ERROR,
            format!("the caller does not lead {}", a.path),
        ));
    };
    let node = wazoo_sdk::join(&a.path, ACK);
    if cx.exists(&node)?.is_some() {
        cx.set(&node, name.as_bytes(), -1)?;
    } else {
        cx.create(&node, name.as_bytes(), CreateMode::Persistent)?;
    }
    Ok(Step::Done(()))
}

fn wait_ack(cx: &mut Ctx, a: PathArg) -> Result<Step<Bin>> {
    check_path(&a.path)?;
    check_ack(cx, &a.path)
}

fn check_ack(cx: &mut Ctx, path: &str) -> Result<Step<Bin>> {
    let node = wazoo_sdk::join(path, ACK);
    let acked = match cx.get(&node) {
        Ok((data, _)) => Some(data),
        Err(e) if e.is(code::NO_NODE) => None,
        Err(e) => return Err(e),
    };
    if let (Some((name, id)), Some(acked)) = (current(cx, path)?, acked) {
        if acked == name.as_bytes() {
            return Ok(Step::Done(Bin(id)));
        }
    }
    let t = format!("wait_ack:{path}");
    cx.exists_watch(&node, &t)?;
    Ok(Step::Wait { token: t })
}

fn fired(cx: &mut Ctx, ev: Fired) -> Result<Step<serde_either::Either>> {
    match split_token(&ev.token)? {
        ("campaign", path) => Ok(check(cx, path)?.map(serde_either::Either::Node)),
        ("wait_ack", path) => Ok(check_ack(cx, path)?.map(serde_either::Either::Id)),
        _ => Err(Error::bad_arguments(format!("bad token {:?}", ev.token))),
    }
}

/// The on_watch handler answers two kinds of waits; untagged, so the caller
/// decodes the same MessagePack as a direct reply.
mod serde_either {
    use serde::Serialize;

    #[derive(Serialize)]
    #[serde(untagged)]
    pub enum Either {
        Node(String),
        Id(super::Bin),
    }
}
