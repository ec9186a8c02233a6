//! `queue`: a distributed FIFO queue with priorities (ZooKeeper recipes,
//! "Queues" and "Priority Queues"), in kazoo's `Queue` layout so both can
//! share a path.
//!
//! Layout: `PATH/entry-PPP-<seq>`, persistent sequential, data = the item;
//! `PPP` is the priority in three digits (0-999, lower is taken first;
//! `put` uses kazoo's default, 100). Items are taken in name order, i.e. by
//! priority, then by sequence (FIFO within a priority).
//!
//! - `put {path, data}` -> Done(node name): priority 100.
//! - `put_priority {path, data, priority}` -> Done(node name); priority
//!   0-999 (a u8 fits).
//! - `take {path}` -> Done(bytes): the first item, deleted in the same step
//!   (so exactly one taker gets it); when the queue is empty, Wait (token
//!   `take:PATH`) on a child watch on the queue node. Every waiting taker
//!   registers its own child watch, so one `put` wakes all of them; each
//!   retries, one gets the item and the others register again and keep
//!   waiting (the recipe's priority-queue rule: always use a fresh children
//!   list). That is a herd on an empty queue with many takers; accepted.
//! - `len {path}` -> Done(u32): the number of items (0 if no queue node).
//!
//! As with kazoo's `Queue`, consumption is not reliable: an item is deleted
//! when taken; if the reply is lost (connection loss, crash) it is gone.
//! A `put` retried after a lost reply may add the item twice.
use wazoo_sdk::prelude::*;

#[path = "../../common/util.rs"]
mod util;
use util::*;

recipe!(
    name = "queue",
    prefixes = ["/"],
    methods = [put, put_priority, take, len],
    on_watch = fired
);

#[derive(Deserialize)]
struct Put {
    path: String,
    #[serde(with = "wazoo_sdk::abi::bytes")]
    data: Vec<u8>,
    #[serde(default = "default_priority")]
    priority: u16,
}

fn default_priority() -> u16 {
    100
}

#[derive(Deserialize)]
struct PathArg {
    path: String,
}

fn put(cx: &mut Ctx, a: Put) -> Result<Step<String>> {
    put_priority(cx, Put { priority: 100, ..a })
}

fn put_priority(cx: &mut Ctx, a: Put) -> Result<Step<String>> {
    check_path(&a.path)?;
    if a.priority > 999 {
        return Err(Error::bad_arguments("priority must be between 0 and 999"));
    }
    ensure_path(cx, &a.path)?;
    let created = cx.create(
        &format!("{}/entry-{:03}-", a.path, a.priority),
        &a.data,
        CreateMode::PersistentSequential,
    )?;
    Ok(Step::Done(wazoo_sdk::name(&created).to_string()))
}

fn take(cx: &mut Ctx, a: PathArg) -> Result<Step<Bin>> {
    check_path(&a.path)?;
    ensure_path(cx, &a.path)?;
    try_take(cx, &a.path)
}

fn try_take(cx: &mut Ctx, path: &str) -> Result<Step<Bin>> {
    let mut kids = cx.children(path)?;
    kids.sort();
    match kids.first() {
        Some(first) => {
            let node = wazoo_sdk::join(path, first);
            let (data, stat) = cx.get(&node)?;
            cx.delete(&node, stat.version)?;
            Ok(Step::Done(Bin(data)))
        }
        None => {
            let t = format!("take:{path}");
            cx.children_watch(path, &t)?;
            Ok(Step::Wait { token: t })
        }
    }
}

fn fired(cx: &mut Ctx, ev: Fired) -> Result<Step<Bin>> {
    match split_token(&ev.token)? {
        ("take", path) => match cx.exists(path)? {
            Some(_) => try_take(cx, path),
            None => Err(Error::new(
                code::NO_NODE,
                format!("the queue {path} was deleted"),
            )),
        },
        _ => Err(Error::bad_arguments(format!("bad token {:?}", ev.token))),
    }
}

fn len(cx: &mut Ctx, a: PathArg) -> Result<Step<u32>> {
    check_path(&a.path)?;
    Ok(Step::Done(match cx.exists(&a.path)? {
        Some(stat) => stat.num_children as u32,
        None => 0,
    }))
}
