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

/// The recipe driven natively by the SDK's test harness (`cargo test -p
/// lock` in recipes-wasm/): a simulated tree, its watches fired, the
/// waiting callers' callbacks run.
#[cfg(test)]
mod tests {
    use wazoo_sdk::abi::Reply;
    use wazoo_sdk::testing::{done, Harness};

    #[derive(serde::Serialize)]
    struct P<'a> {
        path: &'a str,
    }

    const X: P<'static> = P { path: "/locks/x" };

    fn finished_node(h: &mut Harness, session: i64) -> String {
        match h.finished(session).as_slice() {
            [(token, Reply::Done(v))] => {
                assert_eq!(token, "acquire:/locks/x");
                wazoo_sdk::abi::decode(v).unwrap()
            }
            other => panic!("expected one finished acquire, got {other:?}"),
        }
    }

    /// ZooKeeper Recipes and Solutions, "Locks": the lowest sequence holds
    /// the lock, each other contender watches only the one before it (no
    /// herd effect), and gets the lock when that node goes: released, or
    /// gone with its session.
    #[test]
    fn waiting_acquirers_get_the_lock_in_order_when_the_holder_leaves() {
        let mut h = Harness::new(wazoo_sdk::this_recipe!());
        let (a, b, c) = (h.session(), h.session(), h.session());
        let first: String = done(&h.call(a, "acquire", &X));
        assert!(h.call(b, "acquire", &X).is_wait());
        assert!(h.call(c, "acquire", &X).is_wait());
        assert_eq!(h.children("/locks/x").len(), 3);
        let holder: Option<String> = done(&h.call(c, "holder", &X));
        assert_eq!(holder, Some(first.clone()));

        assert!(done::<bool>(&h.call(a, "release", &X)));
        let second = finished_node(&mut h, b);
        assert!(h.finished(c).is_empty(), "c waits on b's node only");
        assert!(h.data(&first).is_none());

        // b's session ends: its ephemeral node goes, and c holds the lock.
        h.close_session(b);
        assert!(h.data(&second).is_none());
        let third = finished_node(&mut h, c);
        assert_eq!(h.children("/locks/x").len(), 1);

        // The guid rule: an acquire sent again (a reply lost) reuses the
        // caller's node instead of queueing a second one.
        let again: String = done(&h.call(c, "acquire", &X));
        assert_eq!(again, third);
        assert_eq!(h.children("/locks/x").len(), 1);
    }

    #[test]
    fn a_bad_path_or_an_unknown_method_is_an_error_reply_that_writes_nothing() {
        let mut h = Harness::new(wazoo_sdk::this_recipe!());
        let a = h.session();
        let r = h.call(a, "acquire", &P { path: "relative" });
        assert!(r.is_error(), "{r:?}");
        assert_eq!(h.children("/"), Vec::<String>::new());
        let r = h.call_raw(a, "no_such_method", &[]);
        assert_eq!(r.error_code(), Some(wazoo_sdk::code::UNIMPLEMENTED));
    }
}
