//! Recipe calls and callbacks through the pipeline (docs/ARCHITECTURE.md,
//! "Recipes"), with a recipe engine written in plain Rust (the core never
//! sees wasm).
//!
//! Every test here runs twice: with steps run in prep (module `recipes`)
//! and with steps sent to a worker and checked when they come back
//! (module `recipes_offloaded`, the same file; see `recipes/offload.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::*;
use crate::recipe::{error_reply, ModuleReport, RecipeEngine, RecipeHost};
use wazoo_sdk::abi::{self, CallerInfo, Notification, Reply, WatchEvent, WatchRequest};

/// Module "t": a handful of steps exercising the host API.
struct TestEngine {
    loaded: Arc<AtomicBool>,
}

/// ZooKeeper's CREATOR_ALL_ACL, as a recipe gives it.
fn creator_all() -> Vec<abi::AclEntry> {
    vec![abi::AclEntry {
        perms: wazoo_proto::perms::ALL,
        scheme: "auth".into(),
        id: String::new(),
    }]
}

fn ids_text(caller: &CallerInfo) -> String {
    let ids: Vec<String> = caller
        .ids
        .iter()
        .map(|i| format!("{}:{}", i.scheme, i.id))
        .collect();
    ids.join("\n")
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

impl RecipeEngine for TestEngine {
    fn call(
        &mut self,
        module: &str,
        method: &str,
        args: &[u8],
        caller: &CallerInfo,
        h: &mut dyn RecipeHost,
    ) -> Reply {
        if module != "t" || !self.has_module(module) {
            return error_reply(ErrorCode::Unimplemented, format!("no module {module}"));
        }
        // A call made by a create sends its JSON string as MessagePack.
        let arg = abi::decode::<String>(args).unwrap_or_else(|_| text(args));
        let r: Result<Reply, ErrorCode> = (|| match method {
            // Creates an ephemeral sequential node under `arg` (and the parent).
            "make" => {
                if h.exists(&arg, None)?.is_none() {
                    h.create(&arg, b"", abi::CreateMode::Persistent, None)?;
                }
                let p = h.create(
                    &format!("{arg}/n-"),
                    b"v",
                    abi::CreateMode::EphemeralSequential,
                    None,
                )?;
                Ok(Reply::Done(p.into_bytes()))
            }
            // Done when `arg` is gone; waits on it otherwise.
            "await_gone" => match h.exists(&arg, Some(&arg))? {
                Some(_) => Ok(Reply::Wait { token: arg }),
                None => Ok(Reply::Done(b"gone".to_vec())),
            },
            // Writes, then fails: nothing may be applied.
            "fail_after_write" => {
                h.create(&arg, b"", abi::CreateMode::Persistent, None)?;
                Ok(error_reply(ErrorCode::BadArguments, "changed my mind"))
            }
            "children" => Ok(Reply::Done(h.children(&arg, None)?.join(",").into_bytes())),
            "get" => Ok(Reply::Done(h.get(&arg, None)?.0)),
            "create" => Ok(Reply::Done(
                h.create(&arg, b"", abi::CreateMode::Persistent, None)?
                    .into_bytes(),
            )),
            // Creates `arg` with ZooKeeper's CREATOR_ALL_ACL.
            "create_creator" => Ok(Reply::Done(
                h.create(&arg, b"", abi::CreateMode::Persistent, Some(&creator_all()))?
                    .into_bytes(),
            )),
            // Creates `arg` with an ACL naming an unknown scheme, then with
            // an empty ACL: both are refused as a client's create is.
            "create_bad_acl" => {
                let bad = [abi::AclEntry {
                    perms: wazoo_proto::perms::ALL,
                    scheme: "nope".into(),
                    id: "x".into(),
                }];
                let unknown = h.create(&arg, b"", abi::CreateMode::Persistent, Some(&bad));
                let empty = h.create(&arg, b"", abi::CreateMode::Persistent, Some(&[]));
                assert_eq!(unknown, empty, "both refused alike");
                unknown.map(|p| Reply::Done(p.into_bytes()))
            }
            // Creates `/big-acl` with `arg` distinct world-readable ip entries.
            "create_many_acl" => {
                let n: u32 = arg.parse().unwrap();
                let acl: Vec<abi::AclEntry> = (0..n)
                    .map(|i| abi::AclEntry {
                        perms: wazoo_proto::perms::READ,
                        scheme: "ip".into(),
                        id: std::net::Ipv4Addr::from(i).to_string(),
                    })
                    .collect();
                let p = h.create("/big-acl", b"", abi::CreateMode::Persistent, Some(&acl))?;
                Ok(Reply::Done(p.into_bytes()))
            }
            "guid" => Ok(Reply::Done(caller.guid.clone().into_bytes())),
            // The caller's ids as `scheme:id` lines.
            "ids" => Ok(Reply::Done(ids_text(caller).into_bytes())),
            "notify" => {
                let to: i64 = arg.parse().unwrap();
                h.notify(to, b"hello")?;
                Ok(Reply::Done(caller.guid.clone().into_bytes()))
            }
            // "COUNT,SIZE": creates /grow-0.. with SIZE bytes each.
            "grow" => {
                let (count, size) = arg.split_once(',').unwrap();
                let size: usize = size.parse().unwrap();
                for i in 0..count.parse::<usize>().unwrap() {
                    h.create(
                        &format!("/grow-{i}"),
                        &vec![1; size],
                        abi::CreateMode::Persistent,
                        None,
                    )?;
                }
                Ok(Reply::Done(Vec::new()))
            }
            "bad_wait" => Ok(Reply::Wait {
                token: "never-registered".into(),
            }),
            _ => Err(ErrorCode::Unimplemented),
        })();
        r.unwrap_or_else(|code| error_reply(code, format!("{method} failed")))
    }

    fn on_watch(&mut self, _module: &str, req: &WatchRequest, h: &mut dyn RecipeHost) -> Reply {
        assert_eq!(
            req.event,
            WatchEvent::Deleted,
            "the test only waits on deletes"
        );
        // Leaves a trace, so the callback's writes are seen to apply; its
        // ACL is CREATOR_ALL when the callback runs with an identity (the
        // registering call's), with the ids it was told as data.
        let acl = req
            .caller
            .ids
            .iter()
            .any(|i| i.scheme == "digest")
            .then(creator_all);
        let trace = ids_text(&req.caller).into_bytes();
        // And the guid it was told, for the guid's test.
        let _ = h.create(
            "/callback-guid",
            req.caller.guid.as_bytes(),
            abi::CreateMode::Persistent,
            None,
        );
        match h.create(
            "/callback-ran",
            &trace,
            abi::CreateMode::Persistent,
            acl.as_deref(),
        ) {
            Ok(_) | Err(ErrorCode::NodeExists) => Reply::Done(req.token.clone().into_bytes()),
            Err(e) => error_reply(e, "trace"),
        }
    }

    fn has_module(&self, module: &str) -> bool {
        module == "t" && self.loaded.load(Ordering::SeqCst)
    }

    fn modules(&self) -> Vec<ModuleReport> {
        vec![ModuleReport {
            name: "t".into(),
            version: "1.0.0".into(),
            hash: "ab".into(),
            methods: vec!["make".into()],
            calls: 7,
            errors: 1,
            fuel_used: 0,
            loads: 1,
            counters: crate::recipe::ModuleCounters {
                calls: 7,
                errors: [("trap".to_string(), 1)].into_iter().collect(),
                ..Default::default()
            },
        }]
    }
}

/// Whether this copy of the tests offloads steps (see the module doc).
fn offloaded() -> bool {
    module_path!().ends_with("recipes_offloaded")
}

/// Gives `h` the test engine, and with offloaded steps a worker that runs
/// each step as soon as it is sent (with an engine of its own).
fn set_engine(h: &mut Harness, loaded: &Arc<AtomicBool>) {
    h.server.set_recipe_engine(Box::new(TestEngine {
        loaded: loaded.clone(),
    }));
    if offloaded() {
        h.server.set_recipe_offload(true);
        h.step_engine = Some(Box::new(TestEngine {
            loaded: loaded.clone(),
        }));
    }
}

fn with_engine() -> (Harness, Arc<AtomicBool>) {
    let mut h = Harness::default();
    let loaded = Arc::new(AtomicBool::new(true));
    set_engine(&mut h, &loaded);
    (h, loaded)
}

fn rcall(module: &str, method: &str, arg: &str) -> Request {
    Request::RecipeCall {
        module: module.into(),
        method: method.into(),
        args: arg.as_bytes().to_vec(),
        guid: String::new(),
    }
}

fn reply_of(r: (i32, Option<Response>)) -> Reply {
    match ok(r) {
        Response::Recipe(b) => abi::decode(&b).expect("a recipe reply is a MessagePack Reply"),
        other => panic!("expected a recipe reply, got {other:?}"),
    }
}

/// What `conn` was sent of the frames `pick` takes, in order.
fn frames<T>(h: &Harness, conn: u64, pick: impl Fn(&Sent) -> Option<T>) -> Vec<T> {
    h.sent
        .get(&conn)
        .into_iter()
        .flatten()
        .filter_map(pick)
        .collect()
}

fn notifications(h: &Harness, conn: u64) -> Vec<Notification> {
    frames(h, conn, |s| match s {
        Sent::Recipe(b) => Some(abi::decode(b).unwrap()),
        _ => None,
    })
}

fn exists(h: &mut Harness, conn: u64, path: &str) -> bool {
    h.call(
        conn,
        Request::Exists {
            path: path.into(),
            watch: false,
        },
    )
    .0 == 0
}

#[test]
fn a_recipe_call_applies_its_writes_as_one_txn_and_replies_with_the_result() {
    let (mut h, _) = with_engine();
    h.connect(1);
    let before = h.server.last_zxid();
    let r = reply_of(h.call(1, rcall("t", "make", "/locks")));
    assert_eq!(r, Reply::Done(b"/locks/n-0000000000".to_vec()));
    assert_eq!(
        h.server.last_zxid(),
        before.next(),
        "both creates in one txn"
    );
    assert!(exists(&mut h, 1, "/locks/n-0000000000"));
}

#[test]
fn a_failed_step_applies_nothing_and_its_error_reaches_the_caller() {
    let (mut h, _) = with_engine();
    h.connect(1);
    let before = h.server.last_zxid();
    match reply_of(h.call(1, rcall("t", "fail_after_write", "/x"))) {
        Reply::Error { code, message } => {
            assert_eq!(code, ErrorCode::BadArguments.code());
            assert_eq!(message, "changed my mind");
        }
        other => panic!("expected an error, got {other:?}"),
    }
    assert_eq!(h.server.last_zxid(), before, "no txn");
    assert!(!exists(&mut h, 1, "/x"));
}

// ZooKeeper Administrator's Guide, "Unsafe Options", jute.maxbuffer: no
// client can write a node, or a multi, larger than it. A recipe's writes
// are held to the same bound: a node over it, or a step whose staged
// writes pass it, fails that op with BadArguments, and the failed step
// applies nothing.
#[test]
fn a_recipe_cannot_write_past_jute_maxbuffer() {
    let mut h = Harness::new(ServerConfig {
        max_buffer_bytes: 1024,
        ..ServerConfig::default()
    });
    set_engine(&mut h, &Arc::new(AtomicBool::new(true)));
    h.connect(1);
    let before = h.server.last_zxid();
    for arg in ["1,1025", "3,400"] {
        match reply_of(h.call(1, rcall("t", "grow", arg))) {
            Reply::Error { code, .. } => assert_eq!(code, ErrorCode::BadArguments.code(), "{arg}"),
            other => panic!("{arg}: expected BadArguments, got {other:?}"),
        }
        assert_eq!(h.server.last_zxid(), before, "{arg}: no txn");
        assert!(!exists(&mut h, 1, "/grow-0"), "{arg}: nothing applied");
    }
    assert!(matches!(
        reply_of(h.call(1, rcall("t", "grow", "2,400"))),
        Reply::Done(_)
    ));
    assert!(exists(&mut h, 1, "/grow-1"));
}

#[test]
fn recipe_calls_fail_cleanly_without_an_engine_or_module() {
    let mut h = Harness::default();
    h.connect(1);
    match reply_of(h.call(1, rcall("t", "make", "/l"))) {
        Reply::Error { code, message } => {
            assert_eq!(code, ErrorCode::Unimplemented.code());
            assert!(message.contains("--plugins"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let (mut h, _) = with_engine();
    h.connect(1);
    assert!(matches!(
        reply_of(h.call(1, rcall("nope", "make", "/l"))),
        Reply::Error { code, .. } if code == ErrorCode::Unimplemented.code()
    ));
}

#[test]
fn a_waiting_call_is_finished_by_its_callback_when_the_watch_fires() {
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    ok(h.call(2, create("/n", b"", CreateMode::Ephemeral)));
    assert_eq!(
        reply_of(h.call(1, rcall("t", "await_gone", "/n"))),
        Reply::Wait { token: "/n".into() }
    );
    assert_eq!(
        h.server.recipe_waits().len(),
        1,
        "the wait is replicated state"
    );
    assert!(notifications(&h, 1).is_empty());
    ok(h.call(
        2,
        Request::Delete {
            path: "/n".into(),
            version: -1,
        },
    ));
    assert_eq!(
        notifications(&h, 1),
        vec![Notification::Finished {
            module: "t".into(),
            token: "/n".into(),
            reply: Reply::Done(b"/n".to_vec()),
        }]
    );
    assert!(
        h.server.recipe_waits().is_empty(),
        "the callback consumed it"
    );
    assert!(
        exists(&mut h, 1, "/callback-ran"),
        "the callback's write applied"
    );
}

#[test]
fn a_holders_expiry_wakes_the_waiter_and_a_waiters_end_drops_its_wait() {
    // ZooKeeper Recipes and Solutions (locks): a lock held by a session that dies is released by
    // its ephemeral node going; the waiter's callback runs.
    let (mut h, _) = with_engine();
    h.connect_with(1, 0, vec![0; 16], 40_000);
    let holder = h.connect_with(2, 0, vec![0; 16], 4_000).session_id;
    ok(h.call(2, create("/held", b"", CreateMode::Ephemeral)));
    reply_of(h.call(1, rcall("t", "await_gone", "/held")));
    h.now += 10_000;
    h.step(Input::Tick);
    h.step(Input::Tick);
    assert!(h.server.sessions().get(holder).is_none(), "holder expired");
    assert!(matches!(
        notifications(&h, 1).as_slice(),
        [Notification::Finished {
            reply: Reply::Done(_),
            ..
        }]
    ));

    // A waiter that closes its session leaves no wait behind.
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    ok(h.call(2, create("/held", b"", CreateMode::Persistent)));
    reply_of(h.call(1, rcall("t", "await_gone", "/held")));
    assert_eq!(h.server.recipe_waits().len(), 1);
    h.call(1, Request::CloseSession);
    assert!(h.server.recipe_waits().is_empty());
    ok(h.call(
        2,
        Request::Delete {
            path: "/held".into(),
            version: -1,
        },
    ));
    assert!(
        !exists(&mut h, 2, "/callback-ran"),
        "no callback for a gone session"
    );
}

/// Creates `path` holding `data`, all permissions to digest user alice
/// (password "secret") alone, from connection 1; returns alice's id.
fn create_alices_node(h: &mut Harness, path: &str, data: &[u8]) -> String {
    let id = crate::acl::digest_id("alice:secret");
    ok(h.call(
        1,
        Request::Create(CreateRequest {
            path: path.into(),
            data: Some(data.to_vec()),
            acl: vec![Acl::new(wazoo_proto::perms::ALL, "digest", &id)],
            flags: 0,
            ttl: None,
        }),
    ));
    id
}

#[test]
fn a_step_runs_with_the_callers_identity() {
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    create_alices_node(&mut h, "/s", b"x");
    for method in ["get", "children"] {
        assert!(matches!(
            reply_of(h.call(2, rcall("t", method, "/s"))),
            Reply::Error { code, .. } if code == ErrorCode::NoAuth.code()
        ));
    }
    assert!(matches!(
        reply_of(h.call(2, rcall("t", "create", "/s/child"))),
        Reply::Error { code, .. } if code == ErrorCode::NoAuth.code()
    ));
    h.digest_auth(2, "alice:secret");
    assert_eq!(
        reply_of(h.call(2, rcall("t", "get", "/s"))),
        Reply::Done(b"x".to_vec())
    );
    assert_eq!(
        reply_of(h.call(2, rcall("t", "create", "/s/child"))),
        Reply::Done(b"/s/child".to_vec())
    );
}

fn get_acl(h: &mut Harness, conn: u64, path: &str) -> Result<Vec<Acl>, ErrorCode> {
    match h.call(conn, Request::GetAcl { path: path.into() }) {
        (0, Some(Response::GetAcl { acl, .. })) => Ok(acl),
        (err, _) => Err(ErrorCode::from_i32(err).expect("a ZooKeeper error code")),
    }
}

// ZooKeeper Programmer's Guide, "ZooKeeper access control using ACLs":
// CREATOR_ALL_ACL (the `auth` scheme) gives the creator's authenticated
// ids all permissions; a recipe's create expands it with its caller's.
#[test]
fn a_digest_callers_step_creates_a_node_with_creator_all_acl() {
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    h.digest_auth(1, "alice:secret");
    assert_eq!(
        reply_of(h.call(1, rcall("t", "create_creator", "/mine"))),
        Reply::Done(b"/mine".to_vec())
    );
    let alice = crate::acl::digest_id("alice:secret");
    assert_eq!(
        get_acl(&mut h, 1, "/mine"),
        Ok(vec![Acl::new(wazoo_proto::perms::ALL, "digest", &alice)])
    );
    // Another client's requests, and its recipe steps, are refused.
    assert_eq!(get_acl(&mut h, 2, "/mine"), Err(ErrorCode::NoAuth));
    assert!(matches!(
        reply_of(h.call(2, rcall("t", "get", "/mine"))),
        Reply::Error { code, .. } if code == ErrorCode::NoAuth.code()
    ));
    assert_eq!(
        reply_of(h.call(1, rcall("t", "get", "/mine"))),
        Reply::Done(Vec::new())
    );
}

// ZooKeeper Programmer's Guide, "Built-in ACL Schemes": `auth` with no
// authenticated id is an invalid ACL, for a recipe's caller as for a client.
#[test]
fn an_unauthenticated_callers_creator_all_create_is_invalid_acl() {
    let (mut h, _) = with_engine();
    h.connect(1);
    assert!(matches!(
        reply_of(h.call(1, rcall("t", "create_creator", "/mine"))),
        Reply::Error { code, .. } if code == ErrorCode::InvalidAcl.code()
    ));
    assert!(!exists(&mut h, 1, "/mine"), "a failed step applies nothing");
}

// ZooKeeper Programmer's Guide, "ZooKeeper access control using ACLs":
// an ACL with an unknown scheme, or none at all, is InvalidACL.
#[test]
fn a_steps_create_with_an_invalid_acl_is_invalid_acl() {
    let (mut h, _) = with_engine();
    h.connect(1);
    h.digest_auth(1, "alice:secret");
    assert!(matches!(
        reply_of(h.call(1, rcall("t", "create_bad_acl", "/bad"))),
        Reply::Error { code, .. } if code == ErrorCode::InvalidAcl.code()
    ));
    assert!(!exists(&mut h, 1, "/bad"));
}

// The ACL travels in the step's txn: it counts toward the jute.maxbuffer
// bound on what a step stages, as a client's create frame is bounded.
#[test]
fn a_steps_acl_counts_toward_the_staged_bytes_bound() {
    let (mut h, _) = with_engine();
    h.connect(1);
    assert_eq!(
        reply_of(h.call(1, rcall("t", "create_many_acl", "3"))),
        Reply::Done(b"/big-acl".to_vec())
    );
    ok(h.call(
        1,
        Request::Delete {
            path: "/big-acl".into(),
            version: -1,
        },
    ));
    // ~20 bytes an entry: well past the harness's bound.
    let n = ServerConfig::default().max_buffer_bytes / 10;
    assert!(matches!(
        reply_of(h.call(1, rcall("t", "create_many_acl", &n.to_string()))),
        Reply::Error { code, .. } if code == ErrorCode::BadArguments.code()
    ));
    assert!(!exists(&mut h, 1, "/big-acl"));
}

#[test]
fn a_step_is_told_its_callers_ids() {
    let (mut h, _) = with_engine();
    h.connect(1);
    // The harness's connections come from 127.0.0.1: ZooKeeper's `ip` id.
    assert_eq!(
        reply_of(h.call(1, rcall("t", "ids", ""))),
        Reply::Done(b"ip:127.0.0.1".to_vec())
    );
    h.digest_auth(1, "alice:secret");
    let alice = crate::acl::digest_id("alice:secret");
    assert_eq!(
        reply_of(h.call(1, rcall("t", "ids", ""))),
        Reply::Done(format!("ip:127.0.0.1\ndigest:{alice}").into_bytes())
    );
}

// A callback runs later, without a request: it runs with the identities of
// the call that registered its wait (recorded in the replicated wait).
#[test]
fn a_callback_runs_with_the_identity_of_the_call_that_registered_its_wait() {
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    h.digest_auth(1, "alice:secret");
    ok(h.call(2, create("/n", b"", CreateMode::Persistent)));
    assert_eq!(
        reply_of(h.call(1, rcall("t", "await_gone", "/n"))),
        Reply::Wait { token: "/n".into() }
    );
    // The unauthenticated client's delete fires alice's wait.
    ok(h.call(
        2,
        Request::Delete {
            path: "/n".into(),
            version: -1,
        },
    ));
    let alice = crate::acl::digest_id("alice:secret");
    assert_eq!(
        get_acl(&mut h, 1, "/callback-ran"),
        Ok(vec![Acl::new(wazoo_proto::perms::ALL, "digest", &alice)]),
        "the callback created its trace with alice's CREATOR_ALL"
    );
    assert_eq!(get_acl(&mut h, 2, "/callback-ran"), Err(ErrorCode::NoAuth));
}

#[test]
fn a_step_reads_outstanding_writes_and_a_read_only_reply_waits_for_them() {
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    h.auto_sync = false;
    h.send(1, 1, create("/p", b"data", CreateMode::Persistent));
    h.send(1, 2, create("/p/a", b"", CreateMode::Persistent));
    h.send(2, 3, rcall("t", "children", "/p"));
    h.send(2, 4, rcall("t", "get", "/p"));
    let replies = |h: &Harness| {
        h.sent[&2]
            .iter()
            .filter(|s| matches!(s, Sent::Reply { .. }))
            .count()
    };
    assert_eq!(replies(&h), 0, "what the steps read is not committed yet");
    h.sync();
    assert_eq!(replies(&h), 2);
    let bodies: Vec<Reply> = h.sent[&2]
        .iter()
        .filter_map(|s| match s {
            Sent::Reply {
                body: Some(Response::Recipe(b)),
                ..
            } => Some(abi::decode(b).unwrap()),
            _ => None,
        })
        .collect();
    assert_eq!(
        bodies,
        vec![Reply::Done(b"a".to_vec()), Reply::Done(b"data".to_vec())]
    );
}

#[test]
fn notifications_reach_the_named_session_after_the_txn() {
    let (mut h, _) = with_engine();
    let s1 = h.connect(1).session_id;
    // A native call asks for wazoo's own frames (see
    // `a_session_that_never_called_natively_gets_no_recipe_frame`).
    reply_of(h.call(1, rcall("t", "children", "/")));
    h.connect(2);
    let r = reply_of(h.call(2, rcall("t", "notify", &s1.to_string())));
    assert!(
        matches!(&r, Reply::Done(g) if g.starts_with(format!("{:016x}-", s1 + 1).as_bytes())),
        "a call sent without a guid gets one of its session and xid: {r:?}"
    );
    assert_eq!(
        notifications(&h, 1),
        vec![Notification::Message {
            module: "t".into(),
            payload: b"hello".to_vec(),
        }]
    );
}

#[test]
fn a_wait_without_a_watch_is_refused() {
    let (mut h, _) = with_engine();
    h.connect(1);
    assert!(matches!(
        reply_of(h.call(1, rcall("t", "bad_wait", ""))),
        Reply::Error { code, message } if code == ErrorCode::BadArguments.code()
            && message.contains("never-registered")
    ));
    assert!(h.server.recipe_waits().is_empty());
}

#[test]
fn the_waits_on_an_unloaded_module_end_with_an_error() {
    let (mut h, loaded) = with_engine();
    h.connect(1);
    ok(h.call(1, create("/n", b"", CreateMode::Persistent)));
    reply_of(h.call(1, rcall("t", "await_gone", "/n")));
    loaded.store(false, Ordering::SeqCst);
    h.step(Input::Tick);
    match notifications(&h, 1).as_slice() {
        [Notification::Finished {
            reply: Reply::Error { message, .. },
            ..
        }] => assert!(message.contains("unloaded"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(h.server.recipe_waits().is_empty());
}

#[test]
fn zookeeper_recipes_shows_what_is_loaded_and_the_pending_waits() {
    let (mut h, _) = with_engine();
    h.connect(1);
    ok(h.call(1, create("/n", b"", CreateMode::Persistent)));
    reply_of(h.call(1, rcall("t", "await_gone", "/n")));
    match ok(h.call(
        1,
        Request::GetData {
            path: "/zookeeper/recipes".into(),
            watch: false,
        },
    )) {
        Response::GetData { data, .. } => assert_eq!(
            text(&data.unwrap()),
            "module=t version=1.0.0 hash=ab calls=7 errors=1 fuel_used=0 loads=1 methods=make \
             pending_waits=1 errors_by_kind=trap:1 \
             latency_us=le100:0,le250:0,le500:0,le1000:0,le2500:0,le10000:0,le50000:0,le250000:0,le1000000:0,inf:0 \
             latency_sum_us=0\npending_waits=1\n"
        ),
        other => panic!("{other:?}"),
    }
    // Without recipes, it is not there (as on ZooKeeper).
    let mut h = Harness::default();
    h.connect(1);
    assert_eq!(
        err(h.call(
            1,
            Request::GetData {
                path: "/zookeeper/recipes".into(),
                watch: false,
            },
        )),
        ErrorCode::NoNode
    );
}

#[test]
fn a_wait_that_ended_while_its_client_was_away_is_sent_on_reattach() {
    let (mut h, _) = with_engine();
    let r = h.connect_with(1, 0, vec![0; 16], 40_000);
    h.connect(2);
    ok(h.call(2, create("/n", b"", CreateMode::Persistent)));
    reply_of(h.call(1, rcall("t", "await_gone", "/n")));
    // The waiter's connection drops; the wait ends while it is away.
    h.step(Input::Closed { conn: 1 });
    ok(h.call(
        2,
        Request::Delete {
            path: "/n".into(),
            version: -1,
        },
    ));
    assert!(notifications(&h, 1).is_empty(), "nobody to send it to");
    // Same session, new connection: the Finished comes right after the
    // handshake.
    h.connect_with(3, r.session_id, r.passwd.clone(), 40_000);
    assert_eq!(
        notifications(&h, 3),
        vec![Notification::Finished {
            module: "t".into(),
            token: "/n".into(),
            reply: Reply::Done(b"/n".to_vec()),
        }]
    );
}

#[test]
fn a_closing_sessions_ephemerals_are_gone_for_steps_prepped_before_the_close_applies() {
    // As ZooKeeper's prep does for closeSession: otherwise a step between
    // the close's proposal and its apply would watch a node already gone,
    // and its wait would never end.
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    ok(h.call(2, create("/e", b"", CreateMode::Ephemeral)));
    h.auto_sync = false;
    h.send(2, 50, Request::CloseSession);
    h.send(1, 51, rcall("t", "await_gone", "/e"));
    h.sync();
    let reply = h.sent[&1].iter().find_map(|s| match s {
        Sent::Reply {
            xid: 51,
            body: Some(Response::Recipe(b)),
            ..
        } => Some(abi::decode::<Reply>(b).unwrap()),
        _ => None,
    });
    assert_eq!(reply, Some(Reply::Done(b"gone".to_vec())));
    assert!(h.server.recipe_waits().is_empty());
}

#[test]
fn a_callback_is_proposed_right_behind_the_txn_that_fires_its_wait() {
    // One commit round per handoff: the waiter's callback does not wait
    // for the delete to be applied; its view includes the delete.
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    ok(h.call(2, create("/n", b"", CreateMode::Persistent)));
    reply_of(h.call(1, rcall("t", "await_gone", "/n")));
    h.auto_sync = false;
    let before = h.server.pending_txns();
    h.send(
        2,
        60,
        Request::Delete {
            path: "/n".into(),
            version: -1,
        },
    );
    assert_eq!(
        h.server.pending_txns(),
        before + 2,
        "the delete and the callback's txn are both in flight"
    );
    h.sync();
    assert!(matches!(
        notifications(&h, 1).as_slice(),
        [Notification::Finished {
            reply: Reply::Done(_),
            ..
        }]
    ));
    assert!(h.server.recipe_waits().is_empty());
    assert!(exists(&mut h, 1, "/callback-ran"));
}

fn rcall_guid(method: &str, arg: &str, guid: &str) -> Request {
    Request::RecipeCall {
        module: "t".into(),
        method: method.into(),
        args: arg.as_bytes().to_vec(),
        guid: guid.into(),
    }
}

#[test]
fn caller_guid_is_the_calls_own_and_its_callback_is_told_the_same() {
    let (mut h, _) = with_engine();
    let s = h.connect(1).session_id;
    // The guid a client sends, for the call and each retry of it.
    let r = reply_of(h.call(1, rcall_guid("guid", "", "call-1")));
    assert_eq!(r, Reply::Done(b"call-1".to_vec()));
    let r = reply_of(h.call(1, rcall_guid("guid", "", "call-1")));
    assert_eq!(r, Reply::Done(b"call-1".to_vec()), "a retry: the same guid");
    // Without one, each call gets its own, never the session id alone.
    let a = reply_of(h.call(1, rcall("t", "guid", "")));
    let b = reply_of(h.call(1, rcall("t", "guid", "")));
    assert_ne!(a, b, "distinct per call");
    assert_ne!(a, Reply::Done(format!("{s:016x}").into_bytes()));
    // A callback runs with the guid of the call that registered its wait.
    ok(h.call(1, create("/w", b"", CreateMode::Persistent)));
    let r = reply_of(h.call(1, rcall_guid("await_gone", "/w", "waiting-call")));
    assert!(matches!(r, Reply::Wait { .. }), "{r:?}");
    ok(h.call(
        1,
        Request::Delete {
            path: "/w".into(),
            version: -1,
        },
    ));
    let data = match ok(h.call(
        1,
        Request::GetData {
            path: "/callback-guid".into(),
            watch: false,
        },
    )) {
        Response::GetData { data, .. } => data,
        other => panic!("{other:?}"),
    };
    assert_eq!(data.as_deref(), Some(&b"waiting-call"[..]));
}

#[test]
fn the_leaders_recipe_counters_are_committed_when_they_change_and_shown_from_the_log() {
    let (mut h, _) = with_engine();
    let before = h.server.last_zxid();
    h.step(Input::Tick);
    assert_eq!(h.server.last_zxid(), before.next(), "one counters txn");
    let c = &h.server.committed_recipe_counters()["t"];
    assert_eq!((c.calls, c.errors_total()), (7, 1));
    // Unchanged counters: no txn, however much time passes.
    h.now += 60_000;
    h.step(Input::Tick);
    assert_eq!(h.server.last_zxid(), before.next());
}

// docs/METRICS.md, "Recipes": the counters survive a reload; a member
// loaded from a snapshot (a restart, or a SNAP from the leader) shows the
// counters committed at the snapshot's zxid, not zeros.
#[test]
fn a_member_loaded_from_a_snapshot_shows_the_committed_recipe_counters() {
    let (mut h, _) = with_engine();
    h.step(Input::Tick);
    let committed = h.server.committed_recipe_counters().clone();
    assert_eq!(committed["t"].calls, 7, "the engine's counters, committed");
    let job = h.server.snapshot_job();
    let mut body = Vec::new();
    crate::snapshot::write_snapshot_body(&job, &mut body).unwrap();
    let (waits, tree) =
        crate::snapshot::read_snapshot_body(crate::snapshot::SNAPSHOT_FORMAT, &body).unwrap();
    let s = Server::recovered(
        ServerConfig::default(),
        tree,
        Vec::new(),
        waits.clone(),
        job.zxid,
        Now::same(1),
    );
    assert_eq!(*s.committed_recipe_counters(), committed, "after a restart");
    let (mut other, _) = with_engine();
    other.server.install_snapshot(
        crate::tree::DataTree::default(),
        Vec::new(),
        waits,
        job.zxid,
    );
    assert_eq!(
        *other.server.committed_recipe_counters(),
        committed,
        "after a SNAP"
    );
}

// ---- Calls made through ZooKeeper's standard operations (docs/RECIPES.md,
// "Calling from any client"): a create under /zookeeper/calls/<module>/.

fn call_create(method_path: &str, flags: i32, data: &[u8]) -> Request {
    Request::Create(CreateRequest {
        path: format!("/zookeeper/calls/{method_path}"),
        data: Some(data.to_vec()),
        acl: Acl::open_unsafe(),
        flags,
        ttl: None,
    })
}

const EPHEMERAL_SEQUENTIAL: i32 = 3;

fn created(r: (i32, Option<Response>)) -> String {
    match ok(r) {
        Response::Create { path } => path,
        other => panic!("expected a create reply, got {other:?}"),
    }
}

fn data_of(h: &mut Harness, conn: u64, path: &str, watch: bool) -> (String, wazoo_proto::Stat) {
    match ok(h.call(
        conn,
        Request::GetData {
            path: path.into(),
            watch,
        },
    )) {
        Response::GetData { data, stat } => (text(data.as_deref().unwrap_or_default()), stat),
        other => panic!("{other:?}"),
    }
}

fn events(h: &Harness, conn: u64) -> Vec<WatcherEvent> {
    frames(h, conn, |s| match s {
        Sent::Event(e) => Some(e.clone()),
        _ => None,
    })
}

// ZooKeeper Programmer's Guide, "Data Model", "Sequence Nodes -- Unique
// Naming" and "Ephemeral Nodes": the call node is the caller's, numbered
// as any sequential child, and holds the result.
#[test]
fn a_create_under_zookeeper_calls_runs_the_recipe_and_its_node_holds_the_result() {
    let (mut h, _) = with_engine();
    let s1 = h.connect(1).session_id;
    let before = h.server.last_zxid();
    let path = created(h.call(
        1,
        call_create("t/make", EPHEMERAL_SEQUENTIAL, br#""/locks""#),
    ));
    assert_eq!(path, "/zookeeper/calls/t/make0000000000");
    assert_eq!(
        h.server.last_zxid(),
        before.next(),
        "call and node in one txn"
    );
    let (data, stat) = data_of(&mut h, 1, &path, false);
    assert_eq!(data, r#"{"done":"/locks/n-0000000000"}"#);
    assert_eq!(stat.ephemeral_owner, s1, "the caller's node");
    assert!(
        exists(&mut h, 1, "/locks/n-0000000000"),
        "the recipe's write"
    );
    // The next call is numbered after it, and the node goes with its
    // session (the caller deletes it when it has read it, or not).
    let second = created(h.call(
        1,
        call_create("t/make", EPHEMERAL_SEQUENTIAL, br#""/locks""#),
    ));
    assert_eq!(second, "/zookeeper/calls/t/make0000000001");
    ok(h.call(
        1,
        Request::Delete {
            path: second.clone(),
            version: -1,
        },
    ));
    assert!(!exists(&mut h, 1, &second));
    assert!(
        notifications(&h, 1).is_empty(),
        "a stock client's session gets no frame of wazoo's own"
    );
}

// ZooKeeper Programmer's Guide, "ZooKeeper Watches": a getData watch on the
// call node fires NodeDataChanged when a waiting call finishes.
#[test]
fn a_waiting_call_made_by_a_create_finishes_by_changing_its_nodes_data() {
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    ok(h.call(2, create("/n", b"", CreateMode::Ephemeral)));
    let path = created(h.call(
        1,
        call_create("t/await_gone", EPHEMERAL_SEQUENTIAL, br#""/n""#),
    ));
    let (data, _) = data_of(&mut h, 1, &path, true);
    assert_eq!(data, r#"{"waiting":"/n"}"#);
    ok(h.call(
        2,
        Request::Delete {
            path: "/n".into(),
            version: -1,
        },
    ));
    assert_eq!(
        events(&h, 1),
        vec![WatcherEvent {
            event_type: EventType::NodeDataChanged as i32,
            state: 3,
            path: path.clone(),
        }]
    );
    let (data, stat) = data_of(&mut h, 1, &path, false);
    assert_eq!(data, r#"{"done":"/n"}"#);
    assert_eq!(stat.version, 1);
    assert!(notifications(&h, 1).is_empty(), "no frame of wazoo's own");
    assert!(
        h.server.recipe_waits().is_empty(),
        "the callback consumed it"
    );
}

#[test]
fn a_waiting_call_whose_node_was_deleted_ends_without_writing() {
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    ok(h.call(2, create("/n", b"", CreateMode::Ephemeral)));
    let path = created(h.call(
        1,
        call_create("t/await_gone", EPHEMERAL_SEQUENTIAL, br#""/n""#),
    ));
    ok(h.call(
        1,
        Request::Delete {
            path: path.clone(),
            version: -1,
        },
    ));
    ok(h.call(
        2,
        Request::Delete {
            path: "/n".into(),
            version: -1,
        },
    ));
    assert!(!exists(&mut h, 1, &path));
    assert!(h.server.recipe_waits().is_empty());
}

#[test]
fn a_failed_call_fails_its_create_with_the_recipes_code_and_applies_nothing() {
    let (mut h, _) = with_engine();
    h.connect(1);
    let before = h.server.last_zxid();
    let r = h.call(
        1,
        call_create("t/fail_after_write", EPHEMERAL_SEQUENTIAL, br#""/x""#),
    );
    assert_eq!(err(r), ErrorCode::BadArguments);
    assert_eq!(h.server.last_zxid(), before, "no txn");
    assert!(!exists(&mut h, 1, "/x"));
    assert!(!exists(&mut h, 1, "/zookeeper/calls"));
    let r = h.call(1, call_create("nope/make", EPHEMERAL_SEQUENTIAL, b""));
    assert_eq!(err(r), ErrorCode::Unimplemented, "a module not served");
}

#[test]
fn a_create_under_zookeeper_calls_that_is_no_call_is_bad_arguments() {
    let (mut h, _) = with_engine();
    h.connect(1);
    for (path, flags, data) in [
        ("t/make", 0, &b""[..]),
        ("t/make", 2, b""),
        ("t", 1, b""),
        ("t/make/x", 1, b""),
        ("t/make", 1, b"{not json"),
    ] {
        assert_eq!(
            err(h.call(1, call_create(path, flags, data))),
            ErrorCode::BadArguments,
            "{path} {flags}"
        );
    }
    // Nor inside a multi: a call is a request of its own.
    let r = ok(h.call(
        1,
        Request::Multi(vec![call_create("t/make", 1, br#""/m""#)]),
    ));
    assert!(
        matches!(&r, Response::Multi(rs) if matches!(rs[0], OpResult::Error { err } if err == ErrorCode::BadArguments.code())),
        "{r:?}"
    );
}

#[test]
fn only_the_owner_deletes_a_call_node_and_nobody_writes_one() {
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    let path = created(h.call(1, call_create("t/make", EPHEMERAL_SEQUENTIAL, br#""/l""#)));
    let delete = |p: &str| Request::Delete {
        path: p.into(),
        version: -1,
    };
    assert_eq!(err(h.call(2, delete(&path))), ErrorCode::NoAuth);
    assert_eq!(
        err(h.call(
            1,
            Request::SetData {
                path: path.clone(),
                data: Some(b"forged".to_vec()),
                version: -1,
            }
        )),
        ErrorCode::NoAuth
    );
    assert_eq!(
        err(h.call(1, delete("/zookeeper/calls/t"))),
        ErrorCode::NoAuth
    );
    ok(h.call(1, delete(&path)));
}

// Curator's protected mode (its "guid" in the node's name) gives the call
// the guid ZooKeeper Recipes and Solutions' lost-reply rule relies on: the
// same for every retry of the call.
#[test]
fn curators_protected_name_gives_the_call_its_guid() {
    let (mut h, _) = with_engine();
    h.connect(1);
    let guid = "0f8fad5b-d9cb-469f-a165-70867728950e";
    let path = created(h.call(
        1,
        call_create(&format!("t/_c_{guid}-guid"), EPHEMERAL_SEQUENTIAL, br#""""#),
    ));
    assert_eq!(path, format!("/zookeeper/calls/t/_c_{guid}-guid0000000000"));
    assert_eq!(
        data_of(&mut h, 1, &path, false).0,
        format!(r#"{{"done":"{guid}"}}"#)
    );
}

#[test]
fn a_session_that_never_called_natively_gets_no_recipe_frame() {
    let (mut h, _) = with_engine();
    let s1 = h.connect(1).session_id;
    h.connect(2);
    reply_of(h.call(2, rcall("t", "notify", &s1.to_string())));
    assert!(notifications(&h, 1).is_empty());
}

#[test]
fn a_call_nodes_wait_on_an_unloaded_module_ends_with_an_error_in_its_node() {
    let (mut h, loaded) = with_engine();
    h.connect(1);
    ok(h.call(1, create("/n", b"", CreateMode::Persistent)));
    let path = created(h.call(
        1,
        call_create("t/await_gone", EPHEMERAL_SEQUENTIAL, br#""/n""#),
    ));
    loaded.store(false, Ordering::SeqCst);
    h.step(Input::Tick);
    let (data, _) = data_of(&mut h, 1, &path, false);
    assert!(
        data.starts_with(r#"{"error":{"code":-6,"message":"recipe module \"t\" was unloaded"#),
        "{data}"
    );
    assert!(notifications(&h, 1).is_empty());
    assert!(h.server.recipe_waits().is_empty());
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions" (the chroot suffix):
// a chrooted client's create arrives with its chroot in front, and its
// call node is made there, where the client reads it.
#[test]
fn a_chrooted_clients_call_node_is_made_under_its_chroot() {
    let (mut h, _) = with_engine();
    h.connect(1);
    ok(h.call(1, create("/app", b"", CreateMode::Persistent)));
    let req = Request::Create(CreateRequest {
        path: "/app/zookeeper/calls/t/make".into(),
        data: Some(br#""/l""#.to_vec()),
        acl: Acl::open_unsafe(),
        flags: EPHEMERAL_SEQUENTIAL,
        ttl: None,
    });
    let path = created(h.call(1, req));
    assert_eq!(path, "/app/zookeeper/calls/t/make0000000000");
    assert_eq!(
        data_of(&mut h, 1, &path, false).0,
        r#"{"done":"/l/n-0000000000"}"#
    );
    // The chroot must exist, as any parent must.
    let req = Request::Create(CreateRequest {
        path: "/nowhere/zookeeper/calls/t/make".into(),
        data: Some(br#""/l""#.to_vec()),
        acl: Acl::open_unsafe(),
        flags: EPHEMERAL_SEQUENTIAL,
        ttl: None,
    });
    assert_eq!(err(h.call(1, req)), ErrorCode::NoNode);
}

// ZooKeeper Recipes and Solutions, "Locks": a waiter that calls again
// (re-registering its wait) while the node it waits on is deleted gets its
// answer in the node of the call it made last. The delete's callback,
// prepped right behind it while the new registration is still in flight,
// would otherwise run the registration the table held (the first call's)
// and answer in the first call's node, leaving the second one waiting for
// good.
#[test]
fn a_wait_registered_again_in_flight_is_answered_in_the_latest_call_node() {
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    ok(h.call(2, create("/n", b"", CreateMode::Ephemeral)));
    let first = created(h.call(
        1,
        call_create("t/await_gone", EPHEMERAL_SEQUENTIAL, br#""/n""#),
    ));
    h.auto_sync = false;
    h.send(
        1,
        70,
        call_create("t/await_gone", EPHEMERAL_SEQUENTIAL, br#""/n""#),
    );
    h.send(
        2,
        71,
        Request::Delete {
            path: "/n".into(),
            version: -1,
        },
    );
    h.auto_sync = true;
    h.sync();
    h.step(Input::Tick);
    let replies = frames(&h, 1, |s| match s {
        Sent::Reply { xid: 70, err, body } => Some((*err, body.clone())),
        _ => None,
    });
    let second = match replies.as_slice() {
        [(0, Some(Response::Create { path }))] => path.clone(),
        other => panic!("{other:?}"),
    };
    assert_ne!(first, second);
    assert_eq!(data_of(&mut h, 1, &second, false).0, r#"{"done":"/n"}"#);
    assert!(h.server.recipe_waits().is_empty());
}

// ---- Calls that change nothing, made by a getData (docs/RECIPES.md,
// "Calling from any client", "Calls that change nothing"): the path
// /zookeeper/calls/<module>/<method>/<ARGS> runs the method as a read.

/// A getData of the read call `module/method/args`: its data, or its code.
fn read_call(h: &mut Harness, conn: u64, call: &str) -> Result<String, ErrorCode> {
    let r = h.call(
        conn,
        Request::GetData {
            path: format!("/zookeeper/calls/{call}"),
            watch: true,
        },
    );
    match r {
        (0, Some(Response::GetData { data, stat })) => {
            let data = text(data.as_deref().unwrap_or_default());
            assert_eq!(stat.data_length as usize, data.len());
            Ok(data)
        }
        other => Err(err(other)),
    }
}

// ZooKeeper Programmer's Guide, "ZooKeeper Data Model" (a read answers
// from the member's tree and logs nothing): the result is the JSON a call
// node would hold, no txn is made and no node appears.
#[test]
fn a_getdata_under_a_method_runs_it_as_a_read_and_logs_nothing() {
    let (mut h, _) = with_engine();
    h.connect(1);
    ok(h.call(1, create("/r", b"hi", CreateMode::Persistent)));
    ok(h.call(1, create("/r/ab", b"", CreateMode::Persistent)));
    let before = h.server.last_zxid();
    assert_eq!(
        read_call(&mut h, 1, r#"t/get/"/r""#).unwrap(),
        r#"{"done":"hi"}"#
    );
    // A `/` of the arguments may be escaped, as JSON allows.
    assert_eq!(
        read_call(&mut h, 1, r#"t/get/"\/r""#).unwrap(),
        r#"{"done":"hi"}"#
    );
    assert_eq!(
        read_call(&mut h, 1, r#"t/children/"/r""#).unwrap(),
        r#"{"done":"ab"}"#
    );
    assert_eq!(h.server.last_zxid(), before, "nothing logged");
    assert!(!exists(&mut h, 1, "/zookeeper/calls"), "no node made");
    // The getData's watch is never set: nothing is there to change.
    assert_eq!(h.server.watches().count(), 0);
    assert!(notifications(&h, 1).is_empty());
}

#[test]
fn a_read_call_fails_with_the_code_a_create_call_would() {
    let (mut h, _) = with_engine();
    h.connect(1);
    assert_eq!(
        read_call(&mut h, 1, r#"t/get/"/none""#),
        Err(ErrorCode::NoNode)
    );
    assert_eq!(
        read_call(&mut h, 1, r#"t/nope/"/""#),
        Err(ErrorCode::Unimplemented)
    );
    assert_eq!(
        read_call(&mut h, 1, r#"u/get/"/""#),
        Err(ErrorCode::Unimplemented)
    );
    // Arguments that are no JSON.
    for bad in [
        "t/get/not json",
        "t/get/{",
        r#"t/get/"/r"x"#,
        "t/get/\u{fffd}",
    ] {
        assert_eq!(
            read_call(&mut h, 1, bad),
            Err(ErrorCode::BadArguments),
            "{bad}"
        );
    }
    // Two names below the calls root are a node's path (a call node's),
    // read as any node.
    assert_eq!(read_call(&mut h, 1, "t/get"), Err(ErrorCode::NoNode));
    // Without an engine, a node's path like any other.
    let mut plain = Harness::default();
    plain.connect(1);
    assert_eq!(
        read_call(&mut plain, 1, r#"t/get/"/""#),
        Err(ErrorCode::NoNode)
    );
}

// ZooKeeper Programmer's Guide, "Read-only mode" names NotReadOnly the
// answer to a state-changing request where only reads are served: a
// method that writes, waits or notifies is refused as such, and nothing
// of it applies.
#[test]
fn a_read_call_that_would_change_anything_is_not_read_only_and_applies_nothing() {
    let (mut h, _) = with_engine();
    let s1 = h.connect(1).session_id;
    ok(h.call(1, create("/n", b"", CreateMode::Persistent)));
    let before = h.server.last_zxid();
    assert_eq!(
        read_call(&mut h, 1, r#"t/create/"/x""#),
        Err(ErrorCode::NotReadOnly)
    );
    assert_eq!(
        read_call(&mut h, 1, r#"t/make/"/locks""#),
        Err(ErrorCode::NotReadOnly)
    );
    assert_eq!(
        read_call(&mut h, 1, r#"t/await_gone/"/n""#),
        Err(ErrorCode::NotReadOnly),
        "a call that waits"
    );
    assert_eq!(
        read_call(&mut h, 1, &format!(r#"t/notify/"{s1}""#)),
        Err(ErrorCode::NotReadOnly)
    );
    // A call that fails answers its own code, as a create's call does.
    assert_eq!(
        read_call(&mut h, 1, r#"t/fail_after_write/"/y""#),
        Err(ErrorCode::BadArguments)
    );
    assert_eq!(h.server.last_zxid(), before);
    for p in ["/x", "/locks", "/y"] {
        assert!(!exists(&mut h, 1, p), "{p}");
    }
    assert_eq!(h.server.recipe_waits().count_for(s1), 0, "no wait kept");
    assert!(notifications(&h, 1).is_empty());
    // Deleting /n does not wake anything.
    ok(h.call(
        1,
        Request::Delete {
            path: "/n".into(),
            version: -1,
        },
    ));
    assert!(!exists(&mut h, 1, "/callback-ran"));
}

// ZooKeeper Programmer's Guide, "ZooKeeper access control using ACLs": a
// read call runs as the caller's identities.
#[test]
fn a_read_call_runs_with_the_callers_identities() {
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    let id = create_alices_node(&mut h, "/s", b"xy");
    assert_eq!(
        read_call(&mut h, 2, r#"t/get/"/s""#),
        Err(ErrorCode::NoAuth)
    );
    h.digest_auth(2, "alice:secret");
    assert_eq!(
        read_call(&mut h, 2, r#"t/get/"/s""#).unwrap(),
        r#"{"done":"xy"}"#
    );
    assert_eq!(
        read_call(&mut h, 2, r#"t/ids/"""#).unwrap(),
        format!(r#"{{"done":"ip:127.0.0.1\ndigest:{id}"}}"#)
    );
}

// ZooKeeper Programmer's Guide, "Consistency Guarantees" (a client's
// operations are served in order; reads see the committed state): a read
// call behind the session's own write waits for it and sees it, and it
// never sees a write still in flight.
#[test]
fn a_read_call_sees_its_sessions_earlier_writes_and_only_committed_state() {
    let (mut h, _) = with_engine();
    h.connect(1);
    h.connect(2);
    h.auto_sync = false;
    h.send(1, 1, create("/p", b"data", CreateMode::Persistent));
    let call = |xid| {
        (
            xid,
            Request::GetData {
                path: r#"/zookeeper/calls/t/get/"/p""#.into(),
                watch: false,
            },
        )
    };
    let (x, r) = call(2);
    h.send(1, x, r);
    // Another session's read call reads the committed tree: /p is not there.
    let (x, r) = call(3);
    h.send(2, x, r);
    let replies = |h: &Harness, conn| -> Vec<(i32, Option<Response>)> {
        h.sent[&conn]
            .iter()
            .filter_map(|s| match s {
                Sent::Reply { err, body, .. } => Some((*err, body.clone())),
                _ => None,
            })
            .collect()
    };
    assert_eq!(replies(&h, 1).len(), 0, "behind its session's write");
    assert_eq!(
        replies(&h, 2).last().map(|r| r.0),
        Some(ErrorCode::NoNode.code()),
        "the write in flight is not seen"
    );
    h.sync();
    let got = replies(&h, 1);
    assert_eq!(got.len(), 2);
    match &got[1] {
        (0, Some(Response::GetData { data, .. })) => {
            assert_eq!(data.as_deref(), Some(&br#"{"done":"data"}"#[..]))
        }
        other => panic!("{other:?}"),
    }
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions" (the chroot suffix):
// a chrooted client's read call arrives with its chroot in front; its
// arguments name absolute paths.
#[test]
fn a_chrooted_clients_read_call_runs_as_any_other() {
    let (mut h, _) = with_engine();
    h.connect(1);
    ok(h.call(1, create("/r", b"hi", CreateMode::Persistent)));
    let r = h.call(
        1,
        Request::GetData {
            path: r#"/app/zookeeper/calls/t/get/"/q/zookeeper/calls/t/ids/x""#.into(),
            watch: false,
        },
    );
    // The first calls root is the one (the arguments hold a second: taken
    // from there, they would be `x"`, BadArguments).
    assert_eq!(err(r), ErrorCode::NoNode);
    let r = h.call(
        1,
        Request::GetData {
            path: r#"/app/zookeeper/calls/t/get/"/r""#.into(),
            watch: false,
        },
    );
    match ok(r) {
        Response::GetData { data, .. } => {
            assert_eq!(data.as_deref(), Some(&br#"{"done":"hi"}"#[..]))
        }
        other => panic!("{other:?}"),
    }
}

// ZooKeeper 3.8's multiRead ("Programmer's Guide", "Multi"): a read call
// is one of its getData ops like any other.
#[test]
fn a_read_call_in_a_multiread_answers_its_op() {
    let (mut h, _) = with_engine();
    h.connect(1);
    ok(h.call(1, create("/r", b"hi", CreateMode::Persistent)));
    let get = |p: &str| Request::GetData {
        path: p.into(),
        watch: false,
    };
    let r = ok(h.call(
        1,
        Request::MultiRead(vec![
            get(r#"/zookeeper/calls/t/get/"/r""#),
            get(r#"/zookeeper/calls/t/create/"/x""#),
        ]),
    ));
    let Response::Multi(results) = r else {
        panic!("{r:?}")
    };
    if offloaded() {
        // The test engine has no quick try: with steps off the member's
        // thread, a multiRead's read call that needs a worker is
        // ThrottledOp.
        for r in &results {
            assert!(matches!(r, OpResult::Error { err } if *err == ErrorCode::ThrottledOp.code()));
        }
        return;
    }
    match &results[0] {
        OpResult::GetData { data, .. } => {
            assert_eq!(data.as_deref(), Some(&br#"{"done":"hi"}"#[..]))
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&results[1], OpResult::Error { err } if *err == ErrorCode::NotReadOnly.code())
    );
}
