//! `lease`: a named, time-limited lease (an exclusive claim that lapses by
//! itself), written from scratch with the SDK as the "custom recipe"
//! example (examples/custom_recipe.rs).
//!
//! Layout: `/leases/NAME`, a TTL node (persistent with a TTL of `ttl_ms`,
//! so the server also reaps a lapsed lease by itself; a plain persistent
//! node where TTL nodes are disabled), data = `HOLDER\nEXPIRES_MS`.
//!
//! Recipes have no clock. A step learns the time by writing: it touches
//! `/leases` and reads the stamp the server gives the write (`mtime`, the
//! leader's clock when the step runs). So every method below is one write
//! transaction, even the ones that grant nothing.
//!
//! Methods:
//! - `acquire {name, holder, ttl_ms}` -> `{granted, holder, expires_ms,
//!   now_ms}`: granted if the lease is free, lapsed, or already this
//!   holder's (then it is renewed for `ttl_ms` from now); otherwise the
//!   current holder and when its lease lapses. Never waits.
//! - `release {name, holder}` -> bool: deleted (false: not this holder's, or
//!   no lease).
//! - `get {name}` -> the current lease as above (`granted` false) or nil
//!   when free or lapsed.
use wazoo_sdk::prelude::*;

recipe!(
    name = "lease",
    prefixes = ["/leases"],
    methods = [acquire, release, get]
);

const ROOT: &str = "/leases";
/// Ten days: a lease is a short claim, renewed while needed.
const MAX_TTL_MS: i64 = 10 * 24 * 3600 * 1000;

#[derive(Deserialize)]
struct Acquire {
    name: String,
    holder: String,
    ttl_ms: i64,
}

#[derive(Deserialize)]
struct Release {
    name: String,
    holder: String,
}

#[derive(Deserialize)]
struct Name {
    name: String,
}

#[derive(Serialize)]
struct Grant {
    granted: bool,
    holder: String,
    expires_ms: i64,
    now_ms: i64,
}

fn check_name(what: &str, s: &str) -> Result<()> {
    if s.is_empty() || s.contains('/') || s.contains('\n') || s == "." || s == ".." {
        return Err(Error::bad_arguments(format!(
            "bad {what} {s:?}: one path component, no newline"
        )));
    }
    Ok(())
}

/// The server's time now: touches `/leases` (creating it if needed) and
/// returns the write's mtime.
fn now_ms(cx: &mut Ctx) -> Result<i64> {
    if cx.exists(ROOT)?.is_none() {
        cx.create(ROOT, b"", CreateMode::Persistent)?;
    }
    Ok(cx.set(ROOT, b"", -1)?.mtime)
}

/// The lease node's (holder, expires_ms), if there is one.
fn read(cx: &mut Ctx, path: &str) -> Result<Option<(String, i64)>> {
    match cx.get(path) {
        Ok((data, _)) => {
            let text = String::from_utf8_lossy(&data);
            let (holder, expires) = text.split_once('\n').unwrap_or((&text, "0"));
            Ok(Some((
                holder.to_string(),
                expires.trim().parse().unwrap_or(0),
            )))
        }
        Err(e) if e.is(code::NO_NODE) => Ok(None),
        Err(e) => Err(e),
    }
}

fn acquire(cx: &mut Ctx, a: Acquire) -> Result<Step<Grant>> {
    check_name("name", &a.name)?;
    check_name("holder", &a.holder)?;
    if !(1..=MAX_TTL_MS).contains(&a.ttl_ms) {
        return Err(Error::bad_arguments(format!(
            "ttl_ms {} out of 1..={MAX_TTL_MS}",
            a.ttl_ms
        )));
    }
    let now = now_ms(cx)?;
    let path = wazoo_sdk::join(ROOT, &a.name);
    if let Some((holder, expires)) = read(cx, &path)? {
        if holder != a.holder && now < expires {
            return Ok(Step::Done(Grant {
                granted: false,
                holder,
                expires_ms: expires,
                now_ms: now,
            }));
        }
        // Lapsed, or a renewal: replaced (a node's TTL is set at creation).
        cx.delete(&path, -1)?;
    }
    let expires = now + a.ttl_ms;
    let data = format!("{}\n{expires}", a.holder);
    match cx.create(
        &path,
        data.as_bytes(),
        CreateMode::PersistentWithTtl(a.ttl_ms),
    ) {
        Ok(_) => {}
        // TTL nodes disabled on this server (extendedTypesEnabled=false):
        // the expiry stamp alone decides.
        Err(e) if e.is(code::UNIMPLEMENTED) => {
            cx.create(&path, data.as_bytes(), CreateMode::Persistent)?;
        }
        Err(e) => return Err(e),
    }
    Ok(Step::Done(Grant {
        granted: true,
        holder: a.holder,
        expires_ms: expires,
        now_ms: now,
    }))
}

fn release(cx: &mut Ctx, a: Release) -> Result<Step<bool>> {
    check_name("name", &a.name)?;
    let path = wazoo_sdk::join(ROOT, &a.name);
    match read(cx, &path)? {
        Some((holder, _)) if holder == a.holder => {
            cx.delete(&path, -1)?;
            Ok(Step::Done(true))
        }
        _ => Ok(Step::Done(false)),
    }
}

fn get(cx: &mut Ctx, a: Name) -> Result<Step<Option<Grant>>> {
    check_name("name", &a.name)?;
    let now = now_ms(cx)?;
    let path = wazoo_sdk::join(ROOT, &a.name);
    Ok(Step::Done(match read(cx, &path)? {
        Some((holder, expires)) if now < expires => Some(Grant {
            granted: false,
            holder,
            expires_ms: expires,
            now_ms: now,
        }),
        _ => None,
    }))
}
