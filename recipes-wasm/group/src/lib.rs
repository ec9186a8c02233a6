//! `group`: group membership (ZooKeeper recipes, "Group Membership"): a
//! persistent group node whose members are ephemeral children, so a member
//! that fails leaves by itself. kazoo's `Party` uses the same shape (its
//! member names are `uuid` hex; here the caller names its member).
//!
//! Layout: `PATH` (persistent), `PATH/MEMBER` (ephemeral, data = the
//! member's data).
//!
//! - `join {path, member, data?}` -> Done(()): creates the member node (or
//!   updates its data if the caller's session already owns it; NodeExists if
//!   another session does).
//! - `leave {path, member}` -> Done(bool): deletes the caller's member node.
//! - `members {path}` -> Done({version, members: [{name, data}]}): members
//!   sorted by name; `version` is the group node's cversion (-1 if there
//!   is no group node), which changes with every join and leave.
//! - `watch_members {path, version}` -> Done(same as `members`) as soon as
//!   the group's version differs from `version`; else Wait (token
//!   `watch:VERSION:PATH`) on a child watch on the group node (an exists
//!   watch if it does not exist yet).
use wazoo_sdk::prelude::*;

#[path = "../../common/util.rs"]
mod util;
use util::*;

recipe!(
    name = "group",
    prefixes = ["/"],
    methods = [join, leave, members, watch_members],
    on_watch = fired
);

#[derive(Deserialize)]
struct Join {
    path: String,
    member: String,
    #[serde(default, with = "wazoo_sdk::abi::bytes")]
    data: Vec<u8>,
}

#[derive(Deserialize)]
struct Leave {
    path: String,
    member: String,
}

#[derive(Deserialize)]
struct PathArg {
    path: String,
}

#[derive(Deserialize)]
struct Watch {
    path: String,
    version: i32,
}

#[derive(Serialize)]
struct Member {
    name: String,
    #[serde(with = "wazoo_sdk::abi::bytes")]
    data: Vec<u8>,
}

#[derive(Serialize)]
struct Members {
    version: i32,
    members: Vec<Member>,
}

fn join(cx: &mut Ctx, a: Join) -> Result<Step<()>> {
    check_path(&a.path)?;
    check_name("member", &a.member)?;
    ensure_path(cx, &a.path)?;
    let n = wazoo_sdk::join(&a.path, &a.member);
    match cx.exists(&n)? {
        Some(stat) if stat.ephemeral_owner == cx.caller_session() => {
            cx.set(&n, &a.data, -1)?;
        }
        Some(_) => {
            return Err(Error::new(
                code::NODE_EXISTS,
                format!(
                    "member {} of {} belongs to another session",
                    a.member, a.path
                ),
            ))
        }
        None => {
            cx.create(&n, &a.data, CreateMode::Ephemeral)?;
        }
    }
    Ok(Step::Done(()))
}

fn leave(cx: &mut Ctx, a: Leave) -> Result<Step<bool>> {
    check_path(&a.path)?;
    check_name("member", &a.member)?;
    let n = wazoo_sdk::join(&a.path, &a.member);
    match cx.exists(&n)? {
        Some(stat) if stat.ephemeral_owner == cx.caller_session() => {
            cx.delete(&n, -1)?;
            Ok(Step::Done(true))
        }
        Some(_) => Err(Error::new(
            code::NO_AUTH,
            format!(
                "member {} of {} belongs to another session",
                a.member, a.path
            ),
        )),
        None => Ok(Step::Done(false)),
    }
}

fn read(cx: &mut Ctx, path: &str) -> Result<Members> {
    let Some(stat) = cx.exists(path)? else {
        return Ok(Members {
            version: -1,
            members: Vec::new(),
        });
    };
    let mut names = cx.children(path)?;
    names.sort();
    let mut members = Vec::with_capacity(names.len());
    for name in names {
        if let Ok((data, _)) = cx.get(&wazoo_sdk::join(path, &name)) {
            members.push(Member { name, data });
        }
    }
    Ok(Members {
        version: stat.cversion,
        members,
    })
}

fn members(cx: &mut Ctx, a: PathArg) -> Result<Step<Members>> {
    check_path(&a.path)?;
    Ok(Step::Done(read(cx, &a.path)?))
}

fn watch_members(cx: &mut Ctx, a: Watch) -> Result<Step<Members>> {
    check_path(&a.path)?;
    check(cx, &a.path, a.version)
}

fn check(cx: &mut Ctx, path: &str, version: i32) -> Result<Step<Members>> {
    let now = read(cx, path)?;
    if now.version != version {
        return Ok(Step::Done(now));
    }
    let t = format!("watch:{version}:{path}");
    if now.version < 0 {
        cx.exists_watch(path, &t)?;
    } else {
        cx.children_watch(path, &t)?;
    }
    Ok(Step::Wait { token: t })
}

fn fired(cx: &mut Ctx, ev: Fired) -> Result<Step<Members>> {
    let bad = || Error::bad_arguments(format!("bad token {:?}", ev.token));
    match split_token(&ev.token)? {
        ("watch", rest) => {
            let (v, path) = rest.split_once(':').ok_or_else(bad)?;
            let v: i32 = v.parse().map_err(|_| bad())?;
            check(cx, path, v)
        }
        _ => Err(bad()),
    }
}
