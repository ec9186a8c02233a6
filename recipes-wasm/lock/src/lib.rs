//! `lock`: an exclusive, fair lock (ZooKeeper recipes, "Locks"), with node
//! names that interoperate with kazoo's `Lock`/`WriteLock`/`ReadLock` on the
//! same path.
//!
//! Layout: `PATH/<guid>__lock__<seq>`, ephemeral sequential, data = the
//! caller's identifier; `<guid>` is the caller's session id in 16 hex
//! digits. The holder is the contender with the lowest sequence. Like
//! kazoo's `WriteLock`, both `__lock__` and `__rlock__` (kazoo `ReadLock`)
//! nodes with a lower sequence block an acquirer, so this lock also excludes
//! kazoo readers; kazoo's plain `Lock` only looks at `__lock__` nodes, and
//! sees ours.
//!
//! Methods:
//! - `acquire {path, id?, creator_acl?}` -> Done(node path) once held; else
//!   Wait, token `acquire:PATH`, on an exists watch on the predecessor only.
//!   `creator_acl: true` creates the caller's lock node, and the lock's
//!   directories this call creates, with ZooKeeper's CREATOR_ALL_ACL (the
//!   caller's authenticated ids; INVALID_ACL for a caller that has none), as
//!   kazoo's `Lock` does with a client whose default ACL is CREATOR_ALL_ACL.
//!   A directory made so is the caller's: others' acquires there get
//!   NO_AUTH. Without it, nodes are world:anyone:cdrwa.
//! - `release {path}` -> Done(bool): deleted the caller's node (false: none).
//! - `holder {path}` -> Done(Option<node path>): the lowest contender if it
//!   is a `__lock__` node (None when free or held by kazoo readers).
use wazoo_sdk::prelude::*;

#[path = "../../common/util.rs"]
mod util;
use util::*;

recipe!(
    name = "lock",
    prefixes = ["/"],
    methods = [acquire, release, holder],
    on_watch = fired
);

const BLOCKERS: &[&str] = &[LOCK, RLOCK];

#[derive(Deserialize)]
struct Acquire {
    path: String,
    /// Written as the node's data (kazoo's `identifier`).
    #[serde(default, with = "wazoo_sdk::abi::bytes")]
    id: Vec<u8>,
    /// Create the nodes with the caller's ACL (CREATOR_ALL_ACL).
    #[serde(default)]
    creator_acl: bool,
}

#[derive(Deserialize)]
struct PathArg {
    path: String,
}

fn token(path: &str) -> String {
    format!("acquire:{path}")
}

/// Steps 1-5 of the recipe's lock: create `guid__lock__` (reusing the caller's
/// node if a lost reply made it already: the guid rule), then check.
fn acquire(cx: &mut Ctx, a: Acquire) -> Result<Step<String>> {
    check_path(&a.path)?;
    let acl = a.creator_acl.then(Acl::creator_all);
    ensure_path_acl(cx, &a.path, acl.as_ref())?;
    join_contenders_acl(cx, &a.path, LOCK, &a.id, acl.as_ref())?;
    decide(cx, &a.path)
}

/// getChildren without a watch; held if no lower contender; else an exists
/// watch on the next lower one (if it is already gone, look again).
fn decide(cx: &mut Ctx, path: &str) -> Result<Step<String>> {
    loop {
        let kids = cx.children(path)?;
        let own = find_own(&kids, &guid(cx), LOCK).ok_or_else(|| {
            Error::new(
                code::NO_NODE,
                format!(
                    "no lock node of the caller under {path} (released, or the session lost it)"
                ),
            )
        })?;
        match predecessor(&kids, &own, LOCK, BLOCKERS) {
            None => return Ok(Step::Done(wazoo_sdk::join(path, &own))),
            Some(p) => {
                let t = token(path);
                if cx.exists_watch(&wazoo_sdk::join(path, &p), &t)?.is_some() {
                    return Ok(Step::Wait { token: t });
                }
            }
        }
    }
}

fn fired(cx: &mut Ctx, ev: Fired) -> Result<Step<String>> {
    match split_token(&ev.token)? {
        ("acquire", path) => decide(cx, path),
        _ => Err(Error::bad_arguments(format!("bad token {:?}", ev.token))),
    }
}

fn release(cx: &mut Ctx, a: PathArg) -> Result<Step<bool>> {
    check_path(&a.path)?;
    Ok(Step::Done(leave_contenders(cx, &a.path, LOCK)?))
}

fn holder(cx: &mut Ctx, a: PathArg) -> Result<Step<Option<String>>> {
    check_path(&a.path)?;
    let kids = children_or_empty(cx, &a.path)?;
    Ok(Step::Done(
        contenders(&kids, BLOCKERS)
            .into_iter()
            .next()
            .filter(|c| c.marker == LOCK)
            .map(|c| wazoo_sdk::join(&a.path, &c.name)),
    ))
}
