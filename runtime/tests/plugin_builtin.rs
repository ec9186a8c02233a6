//! The built-in recipes of recipes-wasm/ (lock, rwlock, semaphore, queue,
//! barrier, double_barrier, twophase, election, group) driven through the
//! runtime against the in-memory TEST DOUBLE tree of plugin_support, with a
//! small simulator of several sessions: it records each step's watches per
//! (session, module, token), fires them when the watched node changes (data
//! watch: created, deleted, data changed; child watch: children changed or
//! node deleted), runs `on_watch` and collects what the server would send as
//! `Finished`. Session expiry deletes the session's ephemerals and drops its
//! waits. This checks the recipes' logic, not the server's integration.

mod plugin_support;

use plugin_support::*;
use serde::Serialize;
use std::collections::BTreeMap;
use wazoo_runtime::abi::{self, CallerInfo, Reply, WatchEvent, WatchRequest};
use wazoo_runtime::{RecipeHost, Runtime, RuntimeConfig};

#[derive(Serialize, Clone)]
#[serde(untagged)]
enum V {
    S(String),
    U(u64),
    T(bool),
    L(Vec<String>),
    B(#[serde(with = "abi::bytes")] Vec<u8>),
}

fn s(x: &str) -> V {
    V::S(x.into())
}

fn args(kv: &[(&str, V)]) -> Vec<u8> {
    let m: BTreeMap<&str, V> = kv.iter().cloned().collect();
    mp(&m)
}

#[derive(Clone, Debug)]
struct Watch {
    session: i64,
    module: String,
    token: String,
    path: String,
    child: bool,
    /// (czxid, version or cversion) when registered; None: absent.
    seen: Option<(i64, i32)>,
}

struct Sim {
    rt: Runtime,
    tree: MemTree,
    watches: Vec<Watch>,
    /// (session, module, token) -> the Finished reply.
    finished: BTreeMap<(i64, String, String), Reply>,
}

fn caller(session: i64) -> CallerInfo {
    CallerInfo {
        session,
        guid: format!("{:016x}", session as u64),
        ids: Vec::new(),
    }
}

impl Sim {
    fn new() -> Sim {
        let rt = Runtime::new(RuntimeConfig {
            cache_dir: Some(recipes_dir().join("cache")),
            ..Default::default()
        })
        .unwrap();
        for m in BUILTIN_MODULES {
            rt.load_bytes(&recipe_bytes(m)).unwrap();
        }
        Sim {
            rt,
            tree: MemTree::new(0),
            watches: Vec::new(),
            finished: BTreeMap::new(),
        }
    }

    fn state(&self, path: &str, child: bool) -> Option<(i64, i32)> {
        self.tree.data(path)?;
        let st = self.tree.nodes[path].1;
        Some((st.czxid, if child { st.cversion } else { st.version }))
    }

    /// Keeps the step's tree if it did not fail; tags its watches.
    fn step(
        &mut self,
        session: i64,
        module: &str,
        run: impl FnOnce(&Runtime, &mut MemTree) -> Reply,
    ) -> Reply {
        let mut view = self.tree.clone();
        view.session = session;
        view.watches.clear();
        let reply = run(&self.rt, &mut view);
        if matches!(reply, Reply::Error { .. }) {
            return reply;
        }
        let new: Vec<(String, String, bool)> = std::mem::take(&mut view.watches);
        self.tree = view;
        for (path, token, child) in new {
            let seen = self.state(&path, child);
            if child && seen.is_none() {
                continue; // children_watch on a missing node registers nothing
            }
            self.watches
                .retain(|w| !(w.session == session && w.module == module && w.token == token));
            self.watches.push(Watch {
                session,
                module: module.into(),
                token,
                path,
                child,
                seen,
            });
        }
        reply
    }

    fn call(&mut self, session: i64, module: &str, method: &str, a: &[u8]) -> Reply {
        let r = self.step(session, module, |rt, view| {
            rt.call(module, method, a, &caller(session), view)
                .unwrap()
                .reply
        });
        self.fire();
        r
    }

    /// Fires every watch whose node changed, until none does.
    fn fire(&mut self) {
        loop {
            let Some(i) = self
                .watches
                .iter()
                .position(|w| self.state(&w.path, w.child) != w.seen)
            else {
                return;
            };
            let w = self.watches.remove(i);
            let now = self.state(&w.path, w.child);
            let event = match (w.seen, now) {
                (None, Some(_)) => WatchEvent::Created,
                (_, None) => WatchEvent::Deleted,
                _ if w.child => WatchEvent::ChildrenChanged,
                _ => WatchEvent::DataChanged,
            };
            let ev = WatchRequest {
                token: w.token.clone(),
                path: w.path.clone(),
                event,
                caller: caller(w.session),
            };
            let r = self.step(w.session, &w.module, |rt, view| {
                rt.on_watch(&w.module, &ev, view).unwrap().reply
            });
            if !matches!(r, Reply::Wait { .. }) {
                self.finished
                    .insert((w.session, w.module.clone(), w.token), r);
            }
        }
    }

    fn expire(&mut self, session: i64) {
        let mine: Vec<String> = self
            .tree
            .nodes
            .iter()
            .filter(|(_, (_, st))| st.ephemeral_owner == session)
            .map(|(p, _)| p.clone())
            .collect();
        for p in mine {
            self.tree.delete(&p, -1).unwrap();
        }
        self.watches.retain(|w| w.session != session);
        self.fire();
    }

    /// The Finished reply of a wait (taken), if it finished.
    fn take_finished(&mut self, session: i64, module: &str, token: &str) -> Option<Reply> {
        self.finished
            .remove(&(session, module.to_string(), token.to_string()))
    }

    fn kids(&self, path: &str) -> Vec<String> {
        let prefix = format!("{path}/");
        self.tree
            .nodes
            .keys()
            .filter(|k| k.starts_with(&prefix) && !k[prefix.len()..].contains('/'))
            .map(|k| k[prefix.len()..].to_string())
            .collect()
    }
}

fn token(r: &Reply) -> String {
    match r {
        Reply::Wait { token } => token.clone(),
        other => panic!("expected Wait, got {other:?}"),
    }
}

fn err_code(r: &Reply) -> i32 {
    match r {
        Reply::Error { code, .. } => *code,
        other => panic!("expected Error, got {other:?}"),
    }
}

const A: i64 = 0xa;
const B: i64 = 0xb;
const C: i64 = 0xc;
const D: i64 = 0xd;

// The lock's `creator_acl` option: its nodes are created with ZooKeeper's
// CREATOR_ALL_ACL (the `auth` scheme, which the host expands with the
// caller's ids); without it, as before, with no ACL (world:anyone).
#[test]
fn lock_creates_its_nodes_with_the_callers_acl_when_asked() {
    let mut sim = Sim::new();
    let creator_all = Some(vec![abi::AclEntry {
        perms: 31,
        scheme: "auth".into(),
        id: String::new(),
    }]);
    let mine = args(&[("path", s("/app/mine")), ("creator_acl", V::T(true))]);
    let a: String = done(&sim.call(A, "lock", "acquire", &mine));
    for node in ["/app", "/app/mine", a.as_str()] {
        assert_eq!(sim.tree.acls.get(node), Some(&creator_all), "{node}");
    }
    let open = args(&[("path", s("/app/open"))]);
    let b: String = done(&sim.call(B, "lock", "acquire", &open));
    for node in ["/app/open", b.as_str()] {
        assert_eq!(sim.tree.acls.get(node), Some(&None), "{node}");
    }
}

#[test]
fn lock_is_fair_watches_only_the_predecessor_and_survives_retries() {
    let mut sim = Sim::new();
    let p = || args(&[("path", s("/app/locks/x")), ("id", V::B(b"me".to_vec()))]);
    let a: String = done(&sim.call(A, "lock", "acquire", &p()));
    assert_eq!(a, "/app/locks/x/000000000000000a__lock__0000000000");
    // A retry (lost reply) reuses the node.
    let again: String = done(&sim.call(A, "lock", "acquire", &p()));
    assert_eq!(again, a);
    let tb = token(&sim.call(B, "lock", "acquire", &p()));
    let tc = token(&sim.call(C, "lock", "acquire", &p()));
    assert_eq!(sim.kids("/app/locks/x").len(), 3);
    // No herd: B watches A's node, C watches B's.
    let watched: Vec<(i64, String)> = sim
        .watches
        .iter()
        .map(|w| (w.session, w.path.clone()))
        .collect();
    assert_eq!(
        watched,
        [
            (B, a.clone()),
            (C, "/app/locks/x/000000000000000b__lock__0000000001".into())
        ]
    );
    let h: Option<String> = done(&sim.call(D, "lock", "holder", &p()));
    assert_eq!(h.as_deref(), Some(a.as_str()));
    assert!(done::<bool>(&sim.call(A, "lock", "release", &p())));
    assert!(!done::<bool>(&sim.call(A, "lock", "release", &p())));
    let b: String = done(&sim.take_finished(B, "lock", &tb).unwrap());
    assert!(b.contains("000000000000000b__lock__"));
    assert!(sim.take_finished(C, "lock", &tc).is_none());
    // B's session ends: C holds.
    sim.expire(B);
    let c: String = done(&sim.take_finished(C, "lock", &tc).unwrap());
    assert!(c.contains("000000000000000c__lock__"));
    // A kazoo reader (__rlock__) ahead of an acquirer blocks it, as kazoo's WriteLock.
    sim.call(C, "lock", "release", &p());
    sim.tree.session = 0x77;
    sim.tree
        .create(
            "/app/locks/x/ffffffffffffffffffffffffffffffff__rlock__",
            b"",
            wazoo_runtime::abi::CreateMode::EphemeralSequential,
            None,
        )
        .unwrap();
    let td = token(&sim.call(D, "lock", "acquire", &p()));
    let h: Option<String> = done(&sim.call(A, "lock", "holder", &p()));
    assert_eq!(h, None, "held by a reader");
    sim.expire(0x77);
    assert!(sim.take_finished(D, "lock", &td).is_some());
}

#[test]
fn rwlock_readers_share_writers_exclude_and_revocation_works() {
    let mut sim = Sim::new();
    let p = || args(&[("path", s("/rw"))]);
    let r1: String = done(&sim.call(A, "rwlock", "read_acquire", &p()));
    let _r2: String = done(&sim.call(B, "rwlock", "read_acquire", &p()));
    let tw = token(&sim.call(C, "rwlock", "write_acquire", &p()));
    let tr = token(&sim.call(D, "rwlock", "read_acquire", &p()));
    // The late reader waits for the writer, and only for it.
    let w_d = sim.watches.iter().find(|w| w.session == D).unwrap();
    assert!(w_d.path.contains("000000000000000c__lock__"));
    assert_eq!(done::<u32>(&sim.call(A, "rwlock", "release", &p())), 1);
    assert!(sim.take_finished(C, "rwlock", &tw).is_none());
    sim.call(B, "rwlock", "release", &p());
    let w: String = done(&sim.take_finished(C, "rwlock", &tw).unwrap());
    assert!(sim.take_finished(D, "rwlock", &tr).is_none());
    // Revocation: the holder waits for "unlock", someone asks.
    let n = || args(&[("node", s(&w))]);
    let tv = token(&sim.call(C, "rwlock", "watch_revoke", &n()));
    assert!(done::<bool>(&sim.call(A, "rwlock", "revoke", &n())));
    assert!(done::<bool>(&sim.take_finished(C, "rwlock", &tv).unwrap()));
    // The reader behind was woken by the data change but still waits.
    assert!(sim.take_finished(D, "rwlock", &tr).is_none());
    sim.call(C, "rwlock", "release", &p());
    let r4: String = done(&sim.take_finished(D, "rwlock", &tr).unwrap());
    assert!(r4.contains("__rlock__"));
    let _ = r1;
    let bad = sim.call(A, "rwlock", "revoke", &args(&[("node", s("/rw/x"))]));
    assert_eq!(err_code(&bad), -8);
}

#[test]
fn semaphore_hands_out_max_leases_in_order() {
    let mut sim = Sim::new();
    let p = |max: u64| args(&[("path", s("/sem")), ("max_leases", V::U(max))]);
    let a: String = done(&sim.call(A, "semaphore", "acquire", &p(2)));
    assert_eq!(a, "/sem/000000000000000a");
    let _b: String = done(&sim.call(B, "semaphore", "acquire", &p(2)));
    let tc = token(&sim.call(C, "semaphore", "acquire", &p(2)));
    let td = token(&sim.call(D, "semaphore", "acquire", &p(2)));
    assert_eq!(err_code(&sim.call(0xe, "semaphore", "acquire", &p(3))), -8);
    // Only the head (C) watches the pool; D watches C's queue node.
    let wc = sim.watches.iter().find(|w| w.session == C).unwrap();
    assert!(wc.child && wc.path == "/sem");
    let wd = sim.watches.iter().find(|w| w.session == D).unwrap();
    assert!(!wd.child && wd.path.starts_with("/sem-__lock__/000000000000000c"));
    sim.call(A, "semaphore", "release", &p(2));
    let c: String = done(&sim.take_finished(C, "semaphore", &tc).unwrap());
    assert_eq!(c, "/sem/000000000000000c");
    assert!(sim.take_finished(D, "semaphore", &td).is_none());
    sim.expire(B);
    let d: String = done(&sim.take_finished(D, "semaphore", &td).unwrap());
    assert_eq!(d, "/sem/000000000000000d");
    assert_eq!(sim.kids("/sem-__lock__"), Vec::<String>::new());
    assert_eq!(sim.tree.data("/sem"), Some(&b"2"[..]));
}

#[derive(serde::Deserialize, Debug, PartialEq)]
struct Bin(#[serde(with = "abi::bytes")] Vec<u8>);

#[test]
fn queue_takes_once_in_priority_then_fifo_order() {
    let mut sim = Sim::new();
    let path = || ("path", s("/q"));
    let t1 = token(&sim.call(A, "queue", "take", &args(&[path()])));
    let t2 = token(&sim.call(B, "queue", "take", &args(&[path()])));
    let name: String = done(&sim.call(
        C,
        "queue",
        "put",
        &args(&[path(), ("data", V::B(b"x".to_vec()))]),
    ));
    assert_eq!(name, "entry-100-0000000000");
    let got: Vec<Reply> = [
        sim.take_finished(A, "queue", &t1),
        sim.take_finished(B, "queue", &t2),
    ]
    .into_iter()
    .flatten()
    .collect();
    assert_eq!(got.len(), 1, "exactly one taker gets the item");
    assert_eq!(done::<Bin>(&got[0]), Bin(b"x".to_vec()));
    assert_eq!(sim.watches.len(), 1, "the other taker waits again");
    sim.watches.clear();
    for (d, prio) in [
        (&b"b"[..], Some(5)),
        (b"a", None),
        (b"c", Some(1)),
        (b"a2", None),
    ] {
        let mut kv = vec![path(), ("data", V::B(d.to_vec()))];
        match prio {
            Some(p) => {
                kv.push(("priority", V::U(p)));
                sim.call(C, "queue", "put_priority", &args(&kv));
            }
            None => {
                sim.call(C, "queue", "put", &args(&kv));
            }
        }
    }
    assert_eq!(
        done::<u32>(&sim.call(C, "queue", "len", &args(&[path()]))),
        4
    );
    let order: Vec<Vec<u8>> = (0..4)
        .map(|_| done::<Bin>(&sim.call(C, "queue", "take", &args(&[path()]))).0)
        .collect();
    assert_eq!(
        order,
        [b"c".to_vec(), b"b".to_vec(), b"a".to_vec(), b"a2".to_vec()]
    );
    let bad = sim.call(
        C,
        "queue",
        "put_priority",
        &args(&[path(), ("data", V::B(vec![])), ("priority", V::U(1000))]),
    );
    assert_eq!(err_code(&bad), -8);
}

#[test]
fn barrier_and_double_barrier() {
    let mut sim = Sim::new();
    let p = || args(&[("path", s("/b/one"))]);
    assert_eq!(done::<()>(&sim.call(A, "barrier", "wait", &p())), ());
    assert!(done::<bool>(&sim.call(A, "barrier", "set", &p())));
    let t = token(&sim.call(B, "barrier", "wait", &p()));
    assert!(done::<bool>(&sim.call(A, "barrier", "remove", &p())));
    assert!(sim.take_finished(B, "barrier", &t).is_some());

    let enter = |n: &str| args(&[("path", s("/db")), ("name", s(n)), ("count", V::U(3))]);
    let leave = |n: &str| args(&[("path", s("/db")), ("name", s(n))]);
    let ta = token(&sim.call(A, "double_barrier", "enter", &enter("a")));
    let tb = token(&sim.call(B, "double_barrier", "enter", &enter("b")));
    assert_eq!(
        done::<()>(&sim.call(C, "double_barrier", "enter", &enter("c"))),
        ()
    );
    assert!(sim.tree.data("/db/ready").is_some());
    assert!(sim.take_finished(A, "double_barrier", &ta).is_some());
    assert!(sim.take_finished(B, "double_barrier", &tb).is_some());
    // Leave: a (lowest) waits on c (highest); b deletes its node, waits on a.
    let la = token(&sim.call(A, "double_barrier", "leave", &leave("a")));
    let lb = token(&sim.call(B, "double_barrier", "leave", &leave("b")));
    assert_eq!(sim.kids("/db"), ["a", "c", "ready"]);
    assert!(sim.take_finished(A, "double_barrier", &la).is_none());
    let lc = token(&sim.call(C, "double_barrier", "leave", &leave("c")));
    for (who, t) in [(A, la), (B, lb), (C, lc)] {
        assert!(
            matches!(
                sim.take_finished(who, "double_barrier", &t),
                Some(Reply::Done(_))
            ),
            "{who:x} left"
        );
    }
    assert_eq!(sim.kids("/db"), Vec::<String>::new());
    // A process that dies inside does not block the others.
    let ta = token(&sim.call(A, "double_barrier", "enter", &enter("a")));
    sim.call(B, "double_barrier", "enter", &enter("b"));
    sim.call(C, "double_barrier", "enter", &enter("c"));
    assert!(sim.take_finished(A, "double_barrier", &ta).is_some());
    let la = token(&sim.call(A, "double_barrier", "leave", &leave("a")));
    let lb = token(&sim.call(B, "double_barrier", "leave", &leave("b")));
    sim.expire(C);
    assert!(sim.take_finished(A, "double_barrier", &la).is_some());
    assert!(sim.take_finished(B, "double_barrier", &lb).is_some());
}

#[test]
fn twophase_commits_when_all_vote_commit_and_aborts_on_site_failure() {
    let mut sim = Sim::new();
    let tx = |t: &str| ("tx", s(t));
    let sites = || ("sites", V::L(vec!["s1".into(), "s2".into()]));
    done::<()>(&sim.call(
        A,
        "twophase",
        "begin",
        &args(&[tx("/app/T1"), sites(), ("data", V::B(b"q".to_vec()))]),
    ));
    let tc = token(&sim.call(A, "twophase", "decision", &args(&[tx("/app/T1")])));
    for (sess, site) in [(B, "s1"), (C, "s2")] {
        let d: Bin = done(&sim.call(
            sess,
            "twophase",
            "join",
            &args(&[tx("/app/T1"), ("site", s(site))]),
        ));
        assert_eq!(d.0, b"q");
    }
    let ts = token(&sim.call(B, "twophase", "decision", &args(&[tx("/app/T1")])));
    let v = |site: &str, c: bool| args(&[tx("/app/T1"), ("site", s(site)), ("commit", V::T(c))]);
    assert_eq!(
        done::<Option<String>>(&sim.call(B, "twophase", "vote", &v("s1", true))),
        None
    );
    assert!(sim.take_finished(A, "twophase", &tc).is_none());
    assert_eq!(
        done::<Option<String>>(&sim.call(C, "twophase", "vote", &v("s2", true))).as_deref(),
        Some("commit")
    );
    assert_eq!(
        done::<String>(&sim.take_finished(A, "twophase", &tc).unwrap()),
        "commit"
    );
    assert_eq!(
        done::<String>(&sim.take_finished(B, "twophase", &ts).unwrap()),
        "commit"
    );

    // A site that joined and dies before voting: abort.
    done::<()>(&sim.call(A, "twophase", "begin", &args(&[tx("/app/T2"), sites()])));
    let tc = token(&sim.call(A, "twophase", "decision", &args(&[tx("/app/T2")])));
    sim.call(
        B,
        "twophase",
        "join",
        &args(&[tx("/app/T2"), ("site", s("s1"))]),
    );
    sim.call(
        C,
        "twophase",
        "join",
        &args(&[tx("/app/T2"), ("site", s("s2"))]),
    );
    let v2 = |site: &str, c: bool| args(&[tx("/app/T2"), ("site", s(site)), ("commit", V::T(c))]);
    sim.call(B, "twophase", "vote", &v2("s1", true));
    assert!(sim.take_finished(A, "twophase", &tc).is_none());
    sim.expire(C);
    assert_eq!(
        done::<String>(&sim.take_finished(A, "twophase", &tc).unwrap()),
        "abort"
    );

    // An abort vote decides at once.
    done::<()>(&sim.call(A, "twophase", "begin", &args(&[tx("/app/T3"), sites()])));
    let ts = token(&sim.call(B, "twophase", "decision", &args(&[tx("/app/T3")])));
    assert_eq!(
        done::<Option<String>>(&sim.call(
            C,
            "twophase",
            "vote",
            &args(&[tx("/app/T3"), ("site", s("s2")), ("commit", V::T(false))])
        ))
        .as_deref(),
        Some("abort")
    );
    assert_eq!(
        done::<String>(&sim.take_finished(B, "twophase", &ts).unwrap()),
        "abort"
    );
}

#[test]
fn election_with_acknowledgement_and_group_membership() {
    let mut sim = Sim::new();
    let c = |id: &[u8]| args(&[("path", s("/el")), ("id", V::B(id.to_vec()))]);
    let p = || args(&[("path", s("/el"))]);
    done::<String>(&sim.call(A, "election", "campaign", &c(b"a")));
    let tb = token(&sim.call(B, "election", "campaign", &c(b"b")));
    assert_eq!(
        done::<Option<Bin>>(&sim.call(D, "election", "leader", &p())),
        Some(Bin(b"a".to_vec()))
    );
    let tw = token(&sim.call(D, "election", "wait_ack", &p()));
    assert_eq!(err_code(&sim.call(B, "election", "ack", &p())), -100);
    sim.call(A, "election", "ack", &p());
    assert_eq!(
        done::<Bin>(&sim.take_finished(D, "election", &tw).unwrap()).0,
        b"a"
    );
    sim.expire(A);
    assert!(sim.take_finished(B, "election", &tb).is_some());
    // The old ack is stale: wait for the new leader's.
    let tw = token(&sim.call(D, "election", "wait_ack", &p()));
    sim.call(B, "election", "ack", &p());
    assert_eq!(
        done::<Bin>(&sim.take_finished(D, "election", &tw).unwrap()).0,
        b"b"
    );

    #[derive(serde::Deserialize, Debug)]
    struct Members {
        version: i32,
        members: Vec<Member>,
    }
    #[derive(serde::Deserialize, Debug)]
    struct Member {
        name: String,
    }
    let g = || args(&[("path", s("/g"))]);
    let m: Members = done(&sim.call(A, "group", "members", &g()));
    assert_eq!((m.version, m.members.len()), (-1, 0));
    sim.call(
        A,
        "group",
        "join",
        &args(&[
            ("path", s("/g")),
            ("member", s("a")),
            ("data", V::B(vec![1])),
        ]),
    );
    let m: Members = done(&sim.call(A, "group", "members", &g()));
    let tw = token(&sim.call(
        C,
        "group",
        "watch_members",
        &args(&[("path", s("/g")), ("version", V::U(m.version as u64))]),
    ));
    let other = sim.call(
        B,
        "group",
        "join",
        &args(&[("path", s("/g")), ("member", s("a"))]),
    );
    assert_eq!(err_code(&other), -110);
    sim.call(
        B,
        "group",
        "join",
        &args(&[("path", s("/g")), ("member", s("b"))]),
    );
    let m2: Members = done(&sim.take_finished(C, "group", &tw).unwrap());
    assert_eq!(
        m2.members
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    sim.expire(A);
    let m3: Members = done(&sim.call(C, "group", "members", &g()));
    assert_eq!(m3.members.len(), 1);
}

/// recipes-wasm/.cargo/config.toml links every module with a 256 KiB initial
/// memory and the SDK's allocator starts in its free tail: an ordinary step
/// never calls `memory.grow`, so the host's per-call reset changes no page
/// protections (the cost that made a call 1.6x a getData; docs/ARCHITECTURE.md,
/// "Recipe runtime").
#[test]
fn ordinary_calls_run_inside_the_initial_memory() {
    const INITIAL: usize = 256 << 10;
    let mut sim = Sim::new();
    sim.rt.load_bytes(&recipe_bytes("echo")).unwrap();
    let lock = args(&[("path", s("/app/locks/m")), ("id", V::B(b"me".to_vec()))]);
    let put = args(&[("path", s("/app/q")), ("data", V::B(vec![7; 1000]))]);
    let steps: [(&str, &str, &[u8]); 4] = [
        ("echo", "noop", &[]),
        ("lock", "acquire", &lock),
        ("lock", "release", &lock),
        ("queue", "put", &put),
    ];
    for (module, method, a) in steps {
        let mut view = sim.tree.clone();
        view.session = A;
        let out = sim
            .rt
            .call(module, method, a, &caller(A), &mut view)
            .unwrap();
        assert!(
            !matches!(out.reply, Reply::Error { .. }),
            "{module}.{method} failed: {:?}",
            out.reply
        );
        assert_eq!(
            out.memory_bytes, INITIAL,
            "{module}.{method} grew its memory past the initial {INITIAL} bytes"
        );
        sim.tree = view;
    }
}
