//! A counter kept in a node under /counters, plus a one-shot "wait until the
//! counter reaches N" that uses a watch callback, and a notification.
use wazoo_sdk::prelude::*;

recipe!(
    name = "counter",
    prefixes = ["/counters"],
    methods = [incr, get, reset, wait_for, escape],
    on_watch = fired
);

#[derive(Deserialize)]
struct Incr {
    name: String,
    by: i64,
}

fn path(name: &str) -> Result<String> {
    if name.is_empty() || name.contains('/') {
        return Err(Error::bad_arguments("a counter name is one path component"));
    }
    Ok(format!("/counters/{name}"))
}

fn read(cx: &mut Ctx, p: &str) -> Result<(i64, i32)> {
    match cx.get(p) {
        Ok((data, stat)) => {
            let n = std::str::from_utf8(&data)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| {
                    Error::new(code::BAD_ARGUMENTS, format!("{p} does not hold a number"))
                })?;
            Ok((n, stat.version))
        }
        Err(e) if e.is(code::NO_NODE) => Ok((0, -1)),
        Err(e) => Err(e),
    }
}

/// Adds `by` to the counter (creating /counters and the counter as needed); returns the new value.
fn incr(cx: &mut Ctx, a: Incr) -> Result<Step<i64>> {
    let p = path(&a.name)?;
    let (n, version) = read(cx, &p)?;
    let n = n + a.by;
    if version < 0 {
        if cx.exists("/counters")?.is_none() {
            cx.create("/counters", b"", CreateMode::Persistent)?;
        }
        cx.create(&p, n.to_string().as_bytes(), CreateMode::Persistent)?;
    } else {
        cx.set(&p, n.to_string().as_bytes(), version)?;
    }
    cx.debug(&format!("{p} = {n}"));
    Ok(Step::Done(n))
}

fn get(cx: &mut Ctx, name: String) -> Result<Step<i64>> {
    let p = path(&name)?;
    Ok(Step::Done(read(cx, &p)?.0))
}

fn reset(cx: &mut Ctx, name: String) -> Result<Step<bool>> {
    let p = path(&name)?;
    match cx.delete(&p, -1) {
        Ok(()) => Ok(Step::Done(true)),
        Err(e) if e.is(code::NO_NODE) => Ok(Step::Done(false)),
        Err(e) => Err(e),
    }
}

#[derive(Deserialize)]
struct WaitFor {
    name: String,
    at_least: i64,
}

/// Done when the counter is at least `at_least`; otherwise waits on a data
/// watch whose token carries the target, and notifies the caller when reached.
fn wait_for(cx: &mut Ctx, a: WaitFor) -> Result<Step<i64>> {
    let p = path(&a.name)?;
    check(cx, &p, a.at_least)
}

fn check(cx: &mut Ctx, p: &str, at_least: i64) -> Result<Step<i64>> {
    let token = format!("{at_least}:{p}");
    match cx.get_watch(p, &token) {
        Ok((data, _)) => {
            let n: i64 = std::str::from_utf8(&data)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if n >= at_least {
                Ok(Step::Done(n))
            } else {
                Ok(Step::Wait { token })
            }
        }
        Err(e) if e.is(code::NO_NODE) => match cx.exists_watch(p, &token)? {
            Some(_) => check(cx, p, at_least),
            None => Ok(Step::Wait { token }),
        },
        Err(e) => Err(e),
    }
}

fn fired(cx: &mut Ctx, ev: Fired) -> Result<Step<i64>> {
    let (at_least, p) = ev
        .token
        .split_once(':')
        .ok_or_else(|| Error::bad_arguments("bad token"))?;
    let at_least: i64 = at_least
        .parse()
        .map_err(|_| Error::bad_arguments("bad token"))?;
    let step = check(cx, p, at_least)?;
    if let Step::Done(n) = &step {
        let session = cx.caller_session();
        cx.notify(session, &("reached", p, *n))?;
    }
    Ok(step)
}

/// Tries to touch a path outside its prefixes: the host must refuse the call.
fn escape(cx: &mut Ctx, p: String) -> Result<Step<()>> {
    cx.create(&p, b"x", CreateMode::Persistent)?;
    Ok(Step::Done(()))
}
