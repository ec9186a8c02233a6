//! `barrier`: the simple barrier of the ZooKeeper recipes ("Barriers"),
//! kazoo's `Barrier` layout: the barrier is up while the node exists.
//!
//! - `set {path}` -> Done(bool): creates the barrier node (and missing
//!   parents); false if it already existed.
//! - `remove {path}` -> Done(bool): deletes it; false if it was not there.
//! - `wait {path}` -> Done(()) when the node does not exist; else Wait
//!   (token `wait:PATH`) on an exists watch; when it fires the step looks
//!   again and waits again while the node exists (the recipe's steps 1-4).
use wazoo_sdk::prelude::*;

#[path = "../../common/util.rs"]
mod util;
use util::*;

recipe!(
    name = "barrier",
    prefixes = ["/"],
    methods = [set, remove, wait],
    on_watch = fired
);

#[derive(Deserialize)]
struct PathArg {
    path: String,
}

fn set(cx: &mut Ctx, a: PathArg) -> Result<Step<bool>> {
    check_path(&a.path)?;
    Ok(Step::Done(!ensure_path(cx, &a.path)?))
}

fn remove(cx: &mut Ctx, a: PathArg) -> Result<Step<bool>> {
    check_path(&a.path)?;
    Ok(Step::Done(delete_if_exists(cx, &a.path)?))
}

fn wait(cx: &mut Ctx, a: PathArg) -> Result<Step<()>> {
    check_path(&a.path)?;
    check(cx, &a.path)
}

fn check(cx: &mut Ctx, path: &str) -> Result<Step<()>> {
    // exists() without a watch first: no watch is left behind when done.
    if cx.exists(path)?.is_none() {
        return Ok(Step::Done(()));
    }
    let t = format!("wait:{path}");
    match cx.exists_watch(path, &t)? {
        Some(_) => Ok(Step::Wait { token: t }),
        None => Ok(Step::Done(())),
    }
}

fn fired(cx: &mut Ctx, ev: Fired) -> Result<Step<()>> {
    match split_token(&ev.token)? {
        ("wait", path) => check(cx, path),
        _ => Err(Error::bad_arguments(format!("bad token {:?}", ev.token))),
    }
}
