//! Helpers shared by the built-in recipes. Not a crate: each recipe includes
//! this file with `#[path = "../../common/util.rs"] mod util;` (a library
//! member of the recipes-wasm workspace would have no .wasm for
//! scripts/build-recipes.sh to copy).
#![allow(dead_code)]

use wazoo_sdk::prelude::*;

/// The caller's guid for node names: its session id as 16 lowercase hex
/// digits, the same for every call and callback of the session, so a call
/// retried after a lost reply (even as a new call) finds the node it made
/// (the guid rule). Not `Ctx::caller_guid`, which is per call.
pub fn guid(cx: &Ctx) -> String {
    format!("{:016x}", cx.caller_session() as u64)
}

/// Checks a user-chosen absolute path: starts with `/`, is not `/`, has no
/// empty component and no trailing `/`.
pub fn check_path(path: &str) -> Result<()> {
    if !path.starts_with('/') || path.len() < 2 || path.ends_with('/') || path.contains("//") {
        return Err(Error::bad_arguments(format!(
            "bad path {path:?}: absolute, not the root, no empty component"
        )));
    }
    Ok(())
}

/// Checks a single path component chosen by the caller.
pub fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Error::bad_arguments(format!(
            "bad {what} {name:?}: one path component"
        )));
    }
    Ok(())
}

/// Creates `path` and its missing ancestors as persistent nodes (kazoo's
/// `ensure_path`). Returns whether `path` itself already existed.
pub fn ensure_path(cx: &mut Ctx, path: &str) -> Result<bool> {
    ensure_path_acl(cx, path, None)
}

/// [`ensure_path`], creating the missing nodes with `acl` (`None`: open
/// to everyone), as kazoo's `ensure_path(path, acl)`.
pub fn ensure_path_acl(cx: &mut Ctx, path: &str, acl: Option<&Acl>) -> Result<bool> {
    if cx.exists(path)?.is_some() {
        return Ok(true);
    }
    let mut at = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        at.push('/');
        at.push_str(part);
        if cx.exists(&at)?.is_none() {
            create_node(cx, &at, b"", CreateMode::Persistent, acl)?;
        }
    }
    Ok(false)
}

/// Creates a node with `acl`, or open to everyone when `None`.
pub fn create_node(
    cx: &mut Ctx,
    path: &str,
    data: &[u8],
    mode: CreateMode,
    acl: Option<&Acl>,
) -> Result<String> {
    match acl {
        Some(acl) => cx.create_with_acl(path, data, mode, acl),
        None => cx.create(path, data, mode),
    }
}

/// Children of a node, or none if it does not exist.
pub fn children_or_empty(cx: &mut Ctx, path: &str) -> Result<Vec<String>> {
    match cx.children(path) {
        Ok(kids) => Ok(kids),
        Err(e) if e.is(code::NO_NODE) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Deletes a node; `Ok(false)` if it was already gone.
pub fn delete_if_exists(cx: &mut Ctx, path: &str) -> Result<bool> {
    match cx.delete(path, -1) {
        Ok(()) => Ok(true),
        Err(e) if e.is(code::NO_NODE) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Node name markers of kazoo's locks.
pub const LOCK: &str = "__lock__";
pub const RLOCK: &str = "__rlock__";

/// A lock contender as kazoo's `_contenders_re` sees it:
/// `(?:MARKER...)(-?\d{10})$`. `seq` is the matched sequence text (kazoo
/// compares and sorts these as strings; so do we).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contender {
    pub name: String,
    pub marker: &'static str,
    pub seq: String,
}

/// Parses a child name against the given markers (kazoo's regex).
pub fn contender(name: &str, markers: &[&'static str]) -> Option<Contender> {
    let b = name.as_bytes();
    if b.len() < 10 || !b[b.len() - 10..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let digits_at = name.len() - 10;
    // With a '-' before the digits, only `marker-digits` can match (markers
    // end with '_'); without, `marker digits`.
    let (head, seq_at) = match name[..digits_at].strip_suffix('-') {
        Some(h) => (h, digits_at - 1),
        None => (&name[..digits_at], digits_at),
    };
    let marker = markers.iter().find(|m| head.ends_with(**m))?;
    Some(Contender {
        name: name.to_string(),
        marker,
        seq: name[seq_at..].to_string(),
    })
}

/// The contenders among `children` for `markers`, sorted by sequence (as
/// kazoo sorts them: by the sequence text).
pub fn contenders(children: &[String], markers: &[&'static str]) -> Vec<Contender> {
    let mut out: Vec<Contender> = children
        .iter()
        .filter_map(|c| contender(c, markers))
        .collect();
    out.sort_by(|a, b| a.seq.cmp(&b.seq).then_with(|| a.name.cmp(&b.name)));
    out
}

/// The caller's own node among `children`: the first whose name starts with
/// `guid + marker` (kazoo's `_find_node`).
pub fn find_own(children: &[String], guid: &str, marker: &str) -> Option<String> {
    let prefix = format!("{guid}{marker}");
    let mut mine: Vec<&String> = children.iter().filter(|c| c.starts_with(&prefix)).collect();
    mine.sort();
    mine.first().map(|s| s.to_string())
}

/// ZooKeeper Recipes and Solutions, lock step 1 with the guid rule: the caller's ephemeral
/// sequential contender `dir/<guid><marker><seq>` (data `id`), created
/// unless a retried call already made it.
pub fn join_contenders(cx: &mut Ctx, dir: &str, marker: &str, id: &[u8]) -> Result<()> {
    join_contenders_acl(cx, dir, marker, id, None)
}

/// [`join_contenders`], creating the caller's node with `acl` (`None`:
/// open to everyone).
pub fn join_contenders_acl(
    cx: &mut Ctx,
    dir: &str,
    marker: &str,
    id: &[u8],
    acl: Option<&Acl>,
) -> Result<()> {
    let g = guid(cx);
    if find_own(&cx.children(dir)?, &g, marker).is_none() {
        create_node(
            cx,
            &format!("{dir}/{g}{marker}"),
            id,
            CreateMode::EphemeralSequential,
            acl,
        )?;
    }
    Ok(())
}

/// The unlock step: deletes the caller's contender in `dir`, if any;
/// whether there was one.
pub fn leave_contenders(cx: &mut Ctx, dir: &str, marker: &str) -> Result<bool> {
    match find_own(&children_or_empty(cx, dir)?, &guid(cx), marker) {
        Some(own) => delete_if_exists(cx, &wazoo_sdk::join(dir, &own)),
        None => Ok(false),
    }
}

/// kazoo's `_get_predecessor`: among the children matching `blockers`, the
/// one with the largest sequence smaller than `own`'s. `None`: `own` holds.
pub fn predecessor(
    children: &[String],
    own: &str,
    marker: &'static str,
    blockers: &[&'static str],
) -> Option<String> {
    let me = contender(own, &[marker])?;
    contenders(children, blockers)
        .into_iter()
        .rfind(|c| c.seq < me.seq)
        .map(|c| c.name)
}

/// Splits a token `KIND:REST` made by the recipe.
pub fn split_token(token: &str) -> Result<(&str, &str)> {
    token
        .split_once(':')
        .ok_or_else(|| Error::bad_arguments(format!("bad token {token:?}")))
}

/// Bytes as MessagePack bin (for results).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bin(#[serde(with = "wazoo_sdk::abi::bytes")] pub Vec<u8>);

/// `Step::map`.
pub trait MapStep<T> {
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Step<U>;
}

impl<T> MapStep<T> for Step<T> {
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Step<U> {
        match self {
            Step::Done(v) => Step::Done(f(v)),
            Step::Wait { token } => Step::Wait { token },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn contenders_follow_kazoos_regex() {
        let c = contender("abc__lock__0000000007", &[LOCK, RLOCK]).unwrap();
        assert_eq!((c.marker, c.seq.as_str()), (LOCK, "0000000007"));
        let c = contender("abc__rlock__-000000001", &[LOCK, RLOCK]);
        assert!(c.is_none(), "9 digits after '-' do not match");
        let c = contender("abc__rlock__-2147483648", &[LOCK, RLOCK]).unwrap();
        assert_eq!((c.marker, c.seq.as_str()), (RLOCK, "-2147483648"));
        assert!(contender("abc__rlock__0000000001", &[LOCK]).is_none());
        assert!(contender("ready", &[LOCK, RLOCK]).is_none());
        assert!(contender("__ack__", &[LOCK]).is_none());
    }

    #[test]
    fn predecessor_is_the_next_lower_blocker() {
        let kids = names(&[
            "a__lock__0000000003",
            "b__rlock__0000000001",
            "c__rlock__0000000004",
            "d__lock__0000000002",
            "__ack__",
        ]);
        // A write lock is blocked by both kinds.
        assert_eq!(
            predecessor(&kids, "c__rlock__0000000004", RLOCK, &[LOCK, RLOCK]).as_deref(),
            Some("a__lock__0000000003")
        );
        // A read lock only by writers.
        assert_eq!(
            predecessor(&kids, "b__rlock__0000000001", RLOCK, &[LOCK]),
            None
        );
        assert_eq!(
            predecessor(&kids, "c__rlock__0000000004", RLOCK, &[LOCK]).as_deref(),
            Some("a__lock__0000000003")
        );
        assert_eq!(
            predecessor(&kids, "d__lock__0000000002", LOCK, &[LOCK, RLOCK]).as_deref(),
            Some("b__rlock__0000000001")
        );
        assert_eq!(
            find_own(&kids, "d", LOCK).as_deref(),
            Some("d__lock__0000000002")
        );
        assert_eq!(find_own(&kids, "d", RLOCK), None);
    }

    #[test]
    fn paths_are_checked() {
        assert!(check_path("/a/b").is_ok());
        for bad in ["", "/", "a", "/a/", "//a", "/a//b"] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
    }
}
