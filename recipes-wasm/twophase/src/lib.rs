//! `twophase`: two-phase commit (ZooKeeper recipes, "Two-phased Commit"),
//! with the recipe's answers to both drawbacks it names.
//!
//! Layout:
//! - `TX` (the transaction node, e.g. `/app/Tx`), persistent, data = the
//!   transaction (the recipe: "propagating the transaction can be done through
//!   ZooKeeper by writing it in the transaction node");
//! - `TX/SITE`, one per participating site (the recipe's `/app/Tx/s_i`),
//!   persistent, created by the coordinator with empty ("undefined")
//!   content; then `joined` when the site joins, and its vote, `commit` or
//!   `abort`;
//! - `TX/SITE/alive`: ephemeral, created by the site itself (second
//!   drawback: "to detect the failure of a site using ephemeral nodes, it is
//!   necessary that the site create the node"); deleted when the site votes
//!   (it only matters before the vote) and when the outcome is decided;
//! - `TX/_coordinator`: persistent, data = the coordinator's guid (its
//!   session id in hex);
//! - `TX/_decision`: persistent, data = `commit` or `abort`, written once.
//!
//! Site names are one path component and may not start with `_`.
//!
//! First drawback (O(n^2) messages): sites do not watch each other's
//! nodes. The outcome is decided by the recipe itself in the step that
//! makes it certain: a `vote` for abort decides abort at once; the vote
//! that makes every site `commit` decides commit. Failures are detected by
//! the coordinator's `decision` wait alone, which watches one site's `alive`
//! node at a time (the first site, by name, that has not voted): when that
//! node goes (the site voted, or died) or appears (the site joined), the
//! coordinator's step looks at every site again and decides abort if a
//! site that had joined lost its `alive` node before voting. Every other
//! `decision` waiter watches only `TX/_decision`: one watch per site, each
//! fired once, when the outcome is written ("notify the sites once the
//! coordinator reaches a decision").
//!
//! Methods:
//! - `begin {tx, sites, data?}` (coordinator) -> Done(()).
//! - `join {tx, site}` (site) -> Done(bytes): creates the site's `alive`
//!   node and returns the transaction data.
//! - `vote {tx, site, commit}` -> Done(Option<String>): the outcome if it is
//!   decided (by this vote or earlier). A second vote must agree with the
//!   first.
//! - `decision {tx}` -> Done("commit" | "abort"); else Wait, token
//!   `decision:TX`.
//! - `abort {tx}` -> Done(outcome): decides abort unless already decided
//!   (the coordinator's timeout: recipes have no clock).
//!
//! Limitation: failure detection needs the coordinator to be waiting on
//! `decision`; a site that never joins blocks the outcome until someone
//! calls `abort`. A site that dies while the coordinator watches another
//! site is noticed when that other site joins or votes.
use wazoo_sdk::prelude::*;

#[path = "../../common/util.rs"]
mod util;
use util::*;

recipe!(
    name = "twophase",
    prefixes = ["/"],
    methods = [begin, join, vote, decision, abort],
    on_watch = fired
);

const COORDINATOR: &str = "_coordinator";
const DECISION: &str = "_decision";
const ALIVE: &str = "alive";
const JOINED: &[u8] = b"joined";
const COMMIT: &str = "commit";
const ABORT: &str = "abort";

#[derive(Deserialize)]
struct Begin {
    tx: String,
    sites: Vec<String>,
    #[serde(default, with = "wazoo_sdk::abi::bytes")]
    data: Vec<u8>,
}

#[derive(Deserialize)]
struct Join {
    tx: String,
    site: String,
}

#[derive(Deserialize)]
struct Vote {
    tx: String,
    site: String,
    commit: bool,
}

#[derive(Deserialize)]
struct TxArg {
    tx: String,
}

fn check_site(site: &str) -> Result<()> {
    check_name("site", site)?;
    if site.starts_with('_') {
        return Err(Error::bad_arguments("site names may not start with '_'"));
    }
    Ok(())
}

fn begin(cx: &mut Ctx, a: Begin) -> Result<Step<()>> {
    check_path(&a.tx)?;
    if a.sites.is_empty() {
        return Err(Error::bad_arguments(
            "a transaction needs at least one site",
        ));
    }
    let mut sites = a.sites.clone();
    sites.sort();
    sites.dedup();
    if sites.len() != a.sites.len() {
        return Err(Error::bad_arguments("site names must be distinct"));
    }
    for s in &sites {
        check_site(s)?;
    }
    let g = guid(cx);
    let coord = wazoo_sdk::join(&a.tx, COORDINATOR);
    if cx.exists(&a.tx)?.is_some() {
        // A retry of our own begin (lost reply) is fine; anything else is not.
        return match cx.get(&coord) {
            Ok((data, _)) if data == g.as_bytes() => Ok(Step::Done(())),
            _ => Err(Error::new(
                code::NODE_EXISTS,
                format!("transaction {} exists", a.tx),
            )),
        };
    }
    let parent = wazoo_sdk::parent(&a.tx);
    if parent != "/" {
        ensure_path(cx, parent)?;
    }
    cx.create(&a.tx, &a.data, CreateMode::Persistent)?;
    cx.create(&coord, g.as_bytes(), CreateMode::Persistent)?;
    for s in &sites {
        cx.create(&wazoo_sdk::join(&a.tx, s), b"", CreateMode::Persistent)?;
    }
    Ok(Step::Done(()))
}

fn site_node(cx: &mut Ctx, tx: &str, site: &str) -> Result<(String, Vec<u8>)> {
    check_path(tx)?;
    check_site(site)?;
    let n = wazoo_sdk::join(tx, site);
    match cx.get(&n) {
        Ok((data, _)) => Ok((n, data)),
        Err(e) if e.is(code::NO_NODE) => Err(Error::new(
            code::NO_NODE,
            format!("{site} is not a site of {tx}"),
        )),
        Err(e) => Err(e),
    }
}

fn outcome(cx: &mut Ctx, tx: &str) -> Result<Option<String>> {
    match cx.get(&wazoo_sdk::join(tx, DECISION)) {
        Ok((data, _)) => Ok(Some(String::from_utf8_lossy(&data).into_owned())),
        Err(e) if e.is(code::NO_NODE) => Ok(None),
        Err(e) => Err(e),
    }
}

fn sites(cx: &mut Ctx, tx: &str) -> Result<Vec<String>> {
    let mut s: Vec<String> = cx
        .children(tx)?
        .into_iter()
        .filter(|k| !k.starts_with('_'))
        .collect();
    s.sort();
    Ok(s)
}

/// Writes the outcome and drops every `alive` node (they only matter
/// before the outcome; deleting them also wakes the coordinator's wait).
fn decide(cx: &mut Ctx, tx: &str, what: &str) -> Result<String> {
    cx.create(
        &wazoo_sdk::join(tx, DECISION),
        what.as_bytes(),
        CreateMode::Persistent,
    )?;
    for s in sites(cx, tx)? {
        delete_if_exists(cx, &format!("{tx}/{s}/{ALIVE}"))?;
    }
    Ok(what.to_string())
}

fn join(cx: &mut Ctx, a: Join) -> Result<Step<Bin>> {
    let (n, data) = site_node(cx, &a.tx, &a.site)?;
    if outcome(cx, &a.tx)?.is_none() && (data.is_empty() || data == JOINED) {
        let alive = wazoo_sdk::join(&n, ALIVE);
        match cx.exists(&alive)? {
            Some(stat) if stat.ephemeral_owner == cx.caller_session() => {}
            Some(_) => {
                return Err(Error::new(
                    code::NODE_EXISTS,
                    format!("site {} joined from another session", a.site),
                ))
            }
            None => {
                cx.create(&alive, b"", CreateMode::Ephemeral)?;
            }
        }
        if data.is_empty() {
            cx.set(&n, JOINED, -1)?;
        }
    }
    Ok(Step::Done(Bin(cx.get(&a.tx)?.0)))
}

fn vote(cx: &mut Ctx, a: Vote) -> Result<Step<Option<String>>> {
    let (n, data) = site_node(cx, &a.tx, &a.site)?;
    if let Some(o) = outcome(cx, &a.tx)? {
        return Ok(Step::Done(Some(o)));
    }
    let v = if a.commit { COMMIT } else { ABORT };
    if (data == COMMIT.as_bytes() || data == ABORT.as_bytes()) && data != v.as_bytes() {
        return Err(Error::bad_arguments(format!(
            "site {} already voted {}",
            a.site,
            String::from_utf8_lossy(&data)
        )));
    }
    cx.set(&n, v.as_bytes(), -1)?;
    delete_if_exists(cx, &wazoo_sdk::join(&n, ALIVE))?;
    if !a.commit {
        return Ok(Step::Done(Some(decide(cx, &a.tx, ABORT)?)));
    }
    for s in sites(cx, &a.tx)? {
        if cx.get(&wazoo_sdk::join(&a.tx, &s))?.0 != COMMIT.as_bytes() {
            return Ok(Step::Done(None));
        }
    }
    Ok(Step::Done(Some(decide(cx, &a.tx, COMMIT)?)))
}

fn abort(cx: &mut Ctx, a: TxArg) -> Result<Step<String>> {
    check_path(&a.tx)?;
    match outcome(cx, &a.tx)? {
        Some(o) => Ok(Step::Done(o)),
        None => {
            cx.get(&a.tx)?;
            Ok(Step::Done(decide(cx, &a.tx, ABORT)?))
        }
    }
}

fn decision(cx: &mut Ctx, a: TxArg) -> Result<Step<String>> {
    check_path(&a.tx)?;
    cx.get(&a.tx)?;
    wait_decision(cx, &a.tx)
}

fn wait_decision(cx: &mut Ctx, tx: &str) -> Result<Step<String>> {
    if let Some(o) = outcome(cx, tx)? {
        return Ok(Step::Done(o));
    }
    let t = format!("decision:{tx}");
    let coordinator = match cx.get(&wazoo_sdk::join(tx, COORDINATOR)) {
        Ok((data, _)) => data == guid(cx).as_bytes(),
        Err(e) if e.is(code::NO_NODE) => false,
        Err(e) => return Err(e),
    };
    if !coordinator {
        cx.exists_watch(&wazoo_sdk::join(tx, DECISION), &t)?;
        return Ok(Step::Wait { token: t });
    }
    // The coordinator: find a failed site, or the first site to watch.
    let mut watch = None;
    for s in sites(cx, tx)? {
        let n = wazoo_sdk::join(tx, &s);
        let data = cx.get(&n)?.0;
        if data == COMMIT.as_bytes() {
            continue;
        }
        if data == ABORT.as_bytes() {
            return Ok(Step::Done(decide(cx, tx, ABORT)?));
        }
        let alive = wazoo_sdk::join(&n, ALIVE);
        if data == JOINED && cx.exists(&alive)?.is_none() {
            cx.warn(&format!("{tx}: site {s} failed before voting: abort"));
            return Ok(Step::Done(decide(cx, tx, ABORT)?));
        }
        watch.get_or_insert(alive);
    }
    match watch {
        None => Ok(Step::Done(decide(cx, tx, COMMIT)?)),
        Some(alive) => {
            cx.exists_watch(&alive, &t)?;
            Ok(Step::Wait { token: t })
        }
    }
}

fn fired(cx: &mut Ctx, ev: Fired) -> Result<Step<String>> {
    match split_token(&ev.token)? {
        ("decision", tx) => wait_decision(cx, tx),
        _ => Err(Error::bad_arguments(format!("bad token {:?}", ev.token))),
    }
}
