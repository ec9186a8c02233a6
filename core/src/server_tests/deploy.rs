//! Recipe modules deployed through the log (docs/RECIPES.md, "Deploy"),
//! with a plain-Rust engine whose "modules" are the text `name:version`.

use std::sync::{Arc, Mutex};

use super::*;
use crate::recipe::{
    error_reply, DeployedModule, ModuleMeta, ModuleReport, RecipeEngine, RecipeHost,
};
use wazoo_sdk::abi::{self, CallerInfo, Reply, WatchRequest};

/// What the engine serves: name -> version, as the pipeline installed it.
type Served = Arc<Mutex<std::collections::BTreeMap<String, String>>>;

struct DeployEngine {
    served: Served,
}

fn parse(bytes: &[u8]) -> Result<(String, String), String> {
    let t = std::str::from_utf8(bytes).map_err(|_| "not text".to_string())?;
    let (n, v) = t.split_once(':').ok_or("no manifest")?;
    if n.is_empty() || v.is_empty() {
        return Err("empty name or version".into());
    }
    Ok((n.into(), v.into()))
}

impl RecipeEngine for DeployEngine {
    /// Every method answers the serving version.
    fn call(
        &mut self,
        module: &str,
        _: &str,
        _: &[u8],
        _: &CallerInfo,
        _: &mut dyn RecipeHost,
    ) -> Reply {
        match self.served.lock().unwrap().get(module) {
            Some(v) => Reply::Done(v.clone().into_bytes()),
            None => error_reply(ErrorCode::Unimplemented, format!("no module {module}")),
        }
    }

    fn on_watch(&mut self, _: &str, _: &WatchRequest, _: &mut dyn RecipeHost) -> Reply {
        error_reply(ErrorCode::Unimplemented, "no callbacks here")
    }

    fn has_module(&self, module: &str) -> bool {
        self.served.lock().unwrap().contains_key(module)
    }

    fn modules(&self) -> Vec<ModuleReport> {
        Vec::new()
    }

    fn validate(&mut self, bytes: &[u8]) -> Result<ModuleMeta, String> {
        let (name, version) = parse(bytes)?;
        Ok(ModuleMeta {
            name,
            version,
            sha256: format!("sha-of-{}", String::from_utf8_lossy(bytes)),
        })
    }

    fn install(&mut self, name: &str, m: Option<&DeployedModule>) -> Result<(), String> {
        let mut s = self.served.lock().unwrap();
        match m {
            Some(m) => s.insert(name.into(), parse(&m.bytes)?.1),
            None => s.remove(name),
        };
        Ok(())
    }
}

fn harness() -> (Harness, Served) {
    let mut h = Harness::new(ServerConfig {
        super_digest: Some(crate::acl::digest_id("super:pw")),
        ..ServerConfig::default()
    });
    let served = Served::default();
    h.server.set_recipe_engine(Box::new(DeployEngine {
        served: served.clone(),
    }));
    (h, served)
}

fn deploy(bytes: &str) -> Request {
    Request::SetData {
        path: "/zookeeper/recipes".into(),
        data: Some(bytes.as_bytes().to_vec()),
        version: -1,
    }
}

fn undeploy(name: &str) -> Request {
    Request::Delete {
        path: format!("/zookeeper/recipes/{name}"),
        version: -1,
    }
}

fn rcall(module: &str) -> Request {
    Request::RecipeCall {
        module: module.into(),
        method: "m".into(),
        args: Vec::new(),
        guid: String::new(),
    }
}

fn version_of(r: (i32, Option<Response>)) -> String {
    match ok(r) {
        Response::Recipe(b) => match abi::decode::<Reply>(&b).unwrap() {
            Reply::Done(v) => String::from_utf8(v).unwrap(),
            other => panic!("expected Done, got {other:?}"),
        },
        other => panic!("expected a recipe reply, got {other:?}"),
    }
}

#[test]
fn a_deploy_is_a_txn_that_only_the_super_user_may_make() {
    let (mut h, served) = harness();
    h.connect(1);
    assert_eq!(err(h.call(1, deploy("m:1"))), ErrorCode::NoAuth);
    assert!(h.server.deployed_modules().is_empty());
    h.digest_auth(1, "super:pw");
    let before = h.server.last_zxid();
    ok(h.call(1, deploy("m:1")));
    assert_eq!(h.server.last_zxid(), before.next(), "one txn");
    let m = &h.server.deployed_modules()["m"];
    assert_eq!((m.version.as_str(), m.zxid), ("1", before.next()));
    assert_eq!(served.lock().unwrap()["m"], "1");
    assert_eq!(version_of(h.call(1, rcall("m"))), "1");
}

#[test]
fn a_second_module_of_the_same_name_replaces_it_and_an_invalid_one_is_refused() {
    let (mut h, _) = harness();
    h.connect(1);
    h.digest_auth(1, "super:pw");
    ok(h.call(1, deploy("m:1")));
    ok(h.call(1, deploy("m:2")));
    assert_eq!(h.server.deployed_modules().len(), 1);
    assert_eq!(version_of(h.call(1, rcall("m"))), "2");
    let before = h.server.last_zxid();
    assert_eq!(err(h.call(1, deploy("garbage"))), ErrorCode::BadArguments);
    assert_eq!(
        h.server.last_zxid(),
        before,
        "a refused deploy makes no txn"
    );
    assert_eq!(
        version_of(h.call(1, rcall("m"))),
        "2",
        "the old version serves"
    );
}

#[test]
fn an_undeploy_removes_the_module_and_an_unknown_name_is_no_node() {
    let (mut h, served) = harness();
    h.connect(1);
    h.digest_auth(1, "super:pw");
    ok(h.call(1, deploy("m:1")));
    ok(h.call(1, undeploy("m")));
    assert!(h.server.deployed_modules().is_empty());
    assert!(served.lock().unwrap().is_empty());
    assert_eq!(err(h.call(1, undeploy("m"))), ErrorCode::NoNode);
    h.connect(2);
    assert_eq!(err(h.call(2, undeploy("m"))), ErrorCode::NoAuth);
}

/// docs/RECIPES.md, "Deploy"; ZooKeeper Programmer's Guide, "ZooKeeper
/// Nodes": a node is created once (NodeExists after). /zookeeper/recipes
/// is no node of the tree, yet it exists: a create of it, alone or in a
/// multi, must not make a real node that its virtual one would hide; its
/// children are the modules, made by a deploy, never by a create.
#[test]
fn zookeeper_recipes_cannot_be_created_and_a_child_of_it_is_refused() {
    let (mut h, _) = harness();
    h.connect(1);
    h.connect(2);
    h.digest_auth(2, "super:pw");
    let before = h.server.last_zxid();
    for conn in [1, 2] {
        for mode in [CreateMode::Persistent, CreateMode::Ephemeral] {
            assert_eq!(
                err(h.call(conn, create("/zookeeper/recipes", b"x", mode))),
                ErrorCode::NodeExists,
                "conn {conn} {mode:?}"
            );
        }
    }
    // A child: NoAuth without CREATE in the node's ACL (world READ by
    // default), as under ZooKeeper's /zookeeper/config; BadArguments for
    // the super user, who passes every ACL.
    let child = create("/zookeeper/recipes/m", b"", CreateMode::Persistent);
    assert_eq!(err(h.call(1, child.clone())), ErrorCode::NoAuth);
    assert_eq!(err(h.call(2, child)), ErrorCode::BadArguments);
    let multi = Request::Multi(vec![create(
        "/zookeeper/recipes",
        b"",
        CreateMode::Persistent,
    )]);
    assert_eq!(
        ok(h.call(2, multi)),
        Response::Multi(vec![OpResult::Error {
            err: ErrorCode::NodeExists.code()
        }])
    );
    assert_eq!(h.server.last_zxid(), before, "no txn was made");
    assert!(!h.server.tree().exists("/zookeeper/recipes"));
    // A sequential create makes a sibling, which is a plain node.
    ok(h.call(
        2,
        create("/zookeeper/recipes", b"", CreateMode::PersistentSequential),
    ));
}

#[test]
fn calls_prepped_after_a_deploy_in_flight_run_the_new_version_and_earlier_ones_the_old() {
    let (mut h, _) = harness();
    h.connect(1);
    h.digest_auth(1, "super:pw");
    ok(h.call(1, deploy("m:1")));
    ok(h.call(
        1,
        Request::Create(wazoo_proto::CreateRequest {
            path: "/x".into(),
            data: Some(Vec::new()),
            acl: wazoo_proto::Acl::open_unsafe(),
            flags: 0,
            ttl: None,
        }),
    ));
    // Nothing is durable until `sync`: the deploy is in flight when the
    // second call is prepped.
    h.connect(2);
    h.auto_sync = false;
    h.send(
        1,
        1,
        Request::SetData {
            path: "/x".into(),
            data: Some(b"a".to_vec()),
            version: -1,
        },
    );
    h.send(2, 1, rcall("m"));
    h.send(1, 2, deploy("m:2"));
    h.send(2, 2, rcall("m"));
    assert_eq!(
        h.server.deployed_modules()["m"].version,
        "1",
        "not applied yet"
    );
    h.sync();
    let replies: Vec<String> = h.sent[&2]
        .iter()
        .filter_map(|s| match s {
            Sent::Reply {
                xid,
                body: Some(Response::Recipe(b)),
                ..
            } if *xid > 0 => match abi::decode::<Reply>(b).unwrap() {
                Reply::Done(v) => Some(String::from_utf8(v).unwrap()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        replies,
        vec!["1", "2"],
        "each call runs the version of its zxid order"
    );
    assert_eq!(h.server.deployed_modules()["m"].version, "2");
}

#[test]
fn the_deployed_modules_travel_in_snapshots_and_are_served_after_loading_one() {
    let (mut h, _) = harness();
    h.connect(1);
    h.digest_auth(1, "super:pw");
    ok(h.call(1, deploy("m:3")));
    let (job, body) = snapshot_of(&h);
    let (waits, tree) =
        crate::snapshot::read_snapshot_body(crate::snapshot::SNAPSHOT_FORMAT, &body).unwrap();
    assert_eq!(waits.modules, *h.server.deployed_modules());
    let mut s = Server::recovered(
        ServerConfig::default(),
        tree,
        Vec::new(),
        waits,
        job.zxid,
        Now::same(1),
    );
    let served = Served::default();
    s.set_recipe_engine(Box::new(DeployEngine {
        served: served.clone(),
    }));
    assert_eq!(
        served.lock().unwrap()["m"],
        "3",
        "a loaded snapshot's modules are served"
    );
    for len in 0..body.len() {
        assert!(crate::snapshot::read_snapshot_body(
            crate::snapshot::SNAPSHOT_FORMAT,
            &body[..len]
        )
        .is_err());
    }
}

/// The snapshot job of `h`'s server now, and the body it writes.
fn snapshot_of(h: &Harness) -> (SnapshotJob, Vec<u8>) {
    let job = SnapshotJob {
        zxid: h.server.last_zxid(),
        tree: h.server.tree().snapshot(),
        waits: h.server.recipe_waits().clone(),
        sessions: Vec::new(),
    };
    let mut body = Vec::new();
    crate::snapshot::write_snapshot_body(&job, &mut body).unwrap();
    (job, body)
}

fn set_recipes_acl(acl: Vec<Acl>, version: i32) -> Request {
    Request::SetAcl {
        path: "/zookeeper/recipes".into(),
        acl,
        version,
    }
}

fn get_recipes_acl(h: &mut Harness, conn: u64) -> (Vec<Acl>, i32) {
    match ok(h.call(
        conn,
        Request::GetAcl {
            path: "/zookeeper/recipes".into(),
        },
    )) {
        Response::GetAcl { acl, stat } => (acl, stat.aversion),
        other => panic!("expected an ACL, got {other:?}"),
    }
}

fn aversion_of(r: (i32, Option<Response>)) -> i32 {
    match ok(r) {
        Response::Stat(s) => s.aversion,
        other => panic!("expected a stat, got {other:?}"),
    }
}

/// bob may do anything with /zookeeper/recipes; anyone may read it.
fn bob_admin() -> Vec<Acl> {
    vec![
        Acl::new(
            wazoo_proto::perms::ALL,
            "digest",
            &crate::acl::digest_id("bob:pw"),
        ),
        Acl::new(wazoo_proto::perms::READ, "world", "anyone"),
    ]
}

/// docs/RECIPES.md, "Deploy" ("Who may deploy"); ZooKeeper Programmer's
/// Guide, "ZooKeeper access control using ACLs" (setACL needs ADMIN, its
/// version is the aversion).
#[test]
fn the_acl_of_zookeeper_recipes_is_world_read_until_set_and_set_acl_needs_admin_in_it() {
    let (mut h, _) = harness();
    h.connect(1);
    assert_eq!(get_recipes_acl(&mut h, 1), (Acl::read_unsafe(), 0));
    assert_eq!(
        err(h.call(1, set_recipes_acl(bob_admin(), -1))),
        ErrorCode::NoAuth
    );
    h.connect(2);
    h.digest_auth(2, "super:pw");
    // Validated as for any node: an empty list, an unknown scheme.
    assert_eq!(
        err(h.call(2, set_recipes_acl(Vec::new(), -1))),
        ErrorCode::InvalidAcl
    );
    assert_eq!(
        err(h.call(2, set_recipes_acl(vec![Acl::new(31, "nope", "x")], -1))),
        ErrorCode::InvalidAcl
    );
    assert_eq!(
        err(h.call(2, set_recipes_acl(bob_admin(), 3))),
        ErrorCode::BadVersion
    );
    let before = h.server.last_zxid();
    assert_eq!(aversion_of(h.call(2, set_recipes_acl(bob_admin(), 0))), 1);
    assert_eq!(h.server.last_zxid(), before.next(), "one txn");
    assert_eq!(get_recipes_acl(&mut h, 2), (bob_admin(), 1));
    assert_eq!(
        h.server.recipe_waits().recipes_acl,
        crate::recipe::RecipesAcl {
            acl: bob_admin(),
            aversion: 1
        }
    );
    // Without ADMIN, the digest is masked, as ZooKeeper masks it.
    let (masked, _) = get_recipes_acl(&mut h, 1);
    assert_eq!(masked[0].id.id, "bob:x");
    assert_eq!(
        err(h.call(2, set_recipes_acl(bob_admin(), 0))),
        ErrorCode::BadVersion
    );
}

#[test]
fn a_user_with_admin_in_the_recipes_acl_deploys_and_undeploys_and_others_only_read() {
    let (mut h, served) = harness();
    h.connect(1);
    h.digest_auth(1, "super:pw");
    ok(h.call(1, set_recipes_acl(bob_admin(), -1)));
    h.connect(2);
    h.digest_auth(2, "bob:pw");
    h.connect(3);
    h.digest_auth(3, "alice:pw");
    ok(h.call(2, deploy("m:1")));
    assert_eq!(served.lock().unwrap()["m"], "1");
    assert_eq!(err(h.call(3, deploy("m:2"))), ErrorCode::NoAuth);
    assert_eq!(err(h.call(3, undeploy("m"))), ErrorCode::NoAuth);
    // World READ: anyone lists what is loaded.
    match ok(h.call(
        3,
        Request::GetData {
            path: "/zookeeper/recipes".into(),
            watch: false,
        },
    )) {
        Response::GetData { stat, .. } => assert_eq!(stat.aversion, 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err(h.call(3, set_recipes_acl(Acl::read_unsafe(), -1))),
        ErrorCode::NoAuth
    );
    ok(h.call(2, undeploy("m")));
    assert!(h.server.deployed_modules().is_empty());
    // bob may hand the node back to the super user alone; the super user
    // and the plugins identity always pass.
    ok(h.call(
        2,
        set_recipes_acl(
            vec![Acl::new(wazoo_proto::perms::ADMIN, "digest", "nobody:x")],
            1,
        ),
    ));
    assert_eq!(err(h.call(2, deploy("m:3"))), ErrorCode::NoAuth);
    // No READ for the world now: getData is refused, exists is not.
    assert_eq!(
        err(h.call(
            3,
            Request::GetData {
                path: "/zookeeper/recipes".into(),
                watch: false,
            }
        )),
        ErrorCode::NoAuth
    );
    ok(h.call(
        3,
        Request::Exists {
            path: "/zookeeper/recipes".into(),
            watch: false,
        },
    ));
    ok(h.call(1, deploy("m:4")));
    h.step(plugin_deploy("p:1", "p.wasm"));
    assert_eq!(served.lock().unwrap()["p"], "1");
}

#[test]
fn a_deploy_prepped_after_a_set_acl_in_flight_is_checked_against_it() {
    let (mut h, _) = harness();
    h.connect(1);
    h.digest_auth(1, "super:pw");
    h.connect(2);
    h.digest_auth(2, "bob:pw");
    h.auto_sync = false;
    h.send(1, 1, set_recipes_acl(bob_admin(), 0));
    h.send(2, 1, deploy("m:1"));
    h.send(1, 2, set_recipes_acl(Acl::read_unsafe(), 1));
    h.send(2, 2, deploy("m:2"));
    assert!(
        h.server.deployed_modules().is_empty(),
        "nothing applied yet"
    );
    h.sync();
    let errs: Vec<(i32, i32)> = h.sent[&2]
        .iter()
        .filter_map(|s| match s {
            Sent::Reply { xid, err, .. } if *xid > 0 => Some((*xid, *err)),
            _ => None,
        })
        .collect();
    assert_eq!(errs, vec![(1, 0), (2, ErrorCode::NoAuth as i32)]);
    assert_eq!(h.server.deployed_modules()["m"].version, "1");
    assert_eq!(h.server.recipe_waits().recipes_acl.aversion, 2);
}

#[test]
fn the_recipes_acl_travels_in_snapshots_and_is_enforced_after_loading_one() {
    let (mut h, _) = harness();
    h.connect(1);
    h.digest_auth(1, "super:pw");
    ok(h.call(1, set_recipes_acl(bob_admin(), -1)));
    let (job, body) = snapshot_of(&h);
    let (waits, tree) =
        crate::snapshot::read_snapshot_body(crate::snapshot::SNAPSHOT_FORMAT, &body).unwrap();
    assert_eq!(waits.recipes_acl.acl, bob_admin());
    let mut h2 = Harness::new(ServerConfig::default());
    h2.server = Server::recovered(
        ServerConfig::default(),
        tree,
        Vec::new(),
        waits,
        job.zxid,
        Now::same(h2.now),
    );
    h2.server.set_recipe_engine(Box::new(DeployEngine {
        served: Served::default(),
    }));
    h2.step(Input::Role(Role::Standalone));
    h2.connect(1);
    h2.digest_auth(1, "bob:pw");
    assert_eq!(get_recipes_acl(&mut h2, 1), (bob_admin(), 1));
    ok(h2.call(1, deploy("m:1")));
    // A snapshot of format 3 has no ACL: the default one.
    let mut v3 = Vec::new();
    let mut waits = Vec::new();
    crate::recipe::RecipeWaits::default().write(&mut waits);
    crate::recipe::RecipeWaits::default().write_modules(&mut waits);
    v3.extend_from_slice(&waits);
    h.server.tree().snapshot().write_to(&mut v3).unwrap();
    let (waits, _) = crate::snapshot::read_snapshot_body(3, &v3).unwrap();
    assert_eq!(waits.recipes_acl, crate::recipe::RecipesAcl::default());
}

/// Member 0's plugins directory asks to deploy `file` holding `bytes`.
fn plugin_deploy(bytes: &str, file: &str) -> Input {
    plugin_deploy_from(0, bytes, file)
}

fn plugin_deploy_from(member: u64, bytes: &str, file: &str) -> Input {
    Input::Plugin(PluginOp::Deploy {
        bytes: bytes.as_bytes().to_vec(),
        source: format!("plugins@{member}:{file}"),
    })
}

#[test]
fn a_plugins_file_deploys_through_the_log_and_the_same_bytes_again_make_no_txn() {
    let (mut h, served) = harness();
    let before = h.server.last_zxid();
    h.step(plugin_deploy("m:1", "m.wasm"));
    assert_eq!(h.server.last_zxid(), before.next(), "one txn");
    let m = &h.server.deployed_modules()["m"];
    assert_eq!(
        (m.version.as_str(), m.source.as_str()),
        ("1", "plugins@0:m.wasm")
    );
    assert_eq!(served.lock().unwrap()["m"], "1");
    // Another member's copy of the same file, or the same file again: no
    // txn (no version churn).
    h.step(plugin_deploy_from(1, "m:1", "m.wasm"));
    h.step(plugin_deploy("m:1", "m.wasm"));
    assert_eq!(h.server.last_zxid(), before.next(), "no version churn");
    assert_eq!(h.server.deployed_modules()["m"].zxid, before.next());
    // A second file of the same directory holding the same bytes: no txn
    // either (the watcher keeps track of which file deployed it).
    h.step(plugin_deploy("m:1", "copy.wasm"));
    assert_eq!(h.server.last_zxid(), before.next());
    // A changed file replaces it; an invalid one changes nothing.
    h.step(plugin_deploy("m:2", "m.wasm"));
    assert_eq!(h.server.deployed_modules()["m"].version, "2");
    let at = h.server.last_zxid();
    h.step(plugin_deploy("garbage", "m.wasm"));
    assert_eq!(h.server.last_zxid(), at, "a refused file makes no txn");
    assert_eq!(served.lock().unwrap()["m"], "2");
}

#[test]
fn a_removed_plugins_file_undeploys_only_the_version_it_deployed() {
    let (mut h, served) = harness();
    h.step(plugin_deploy("m:1", "m.wasm"));
    // A client replaced it since: removing the file keeps the client's.
    h.connect(1);
    h.digest_auth(1, "super:pw");
    ok(h.call(1, deploy("m:2")));
    let at = h.server.last_zxid();
    h.step(Input::Plugin(PluginOp::Undeploy {
        name: "m".into(),
        sha256: "sha-of-m:1".into(),
    }));
    assert_eq!(h.server.last_zxid(), at, "no txn");
    assert_eq!(served.lock().unwrap()["m"], "2");
    // The version it deployed is undeployed.
    h.step(Input::Plugin(PluginOp::Undeploy {
        name: "m".into(),
        sha256: "sha-of-m:2".into(),
    }));
    assert_eq!(h.server.last_zxid(), at.next());
    assert!(h.server.deployed_modules().is_empty());
    assert!(served.lock().unwrap().is_empty());
}

#[test]
fn a_plugins_change_seen_with_no_leader_is_held_for_the_role_to_come() {
    let (mut h, served) = harness();
    h.step(Input::Role(Role::Looking));
    let before = h.server.last_zxid();
    h.step(plugin_deploy("m:1", "m.wasm"));
    assert_eq!(h.server.last_zxid(), before, "no txn while looking");
    assert!(served.lock().unwrap().is_empty());
    // The member decides again: the held change is prepped at once.
    h.step(Input::Role(Role::Standalone));
    assert_eq!(h.server.last_zxid(), before.next());
    assert_eq!(served.lock().unwrap()["m"], "1");
    // Held once: another role change submits nothing more.
    h.step(Input::Role(Role::Looking));
    h.step(Input::Role(Role::Standalone));
    assert_eq!(h.server.last_zxid(), before.next());
}

/// [`DeployEngine`] as the wasm runtime is: validating a module compiles
/// it unless it was validated before (compiled, or refused: the text
/// `name:bad` does not compile), and only then answers at once.
struct CompilingEngine {
    inner: DeployEngine,
    /// Modules validated (by any handle): the compiled-module cache.
    validated: Arc<Mutex<std::collections::HashSet<Vec<u8>>>>,
    /// Compiles this handle made.
    compiles: Arc<std::sync::atomic::AtomicUsize>,
}

impl CompilingEngine {
    /// The member's handle and a worker's, sharing the cache and serving
    /// `served`; and each one's compile count.
    fn pair(served: &Served) -> (Self, Self) {
        let validated = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let handle = || CompilingEngine {
            inner: DeployEngine {
                served: served.clone(),
            },
            validated: validated.clone(),
            compiles: Default::default(),
        };
        (handle(), handle())
    }
}

impl RecipeEngine for CompilingEngine {
    fn call(
        &mut self,
        m: &str,
        f: &str,
        a: &[u8],
        c: &CallerInfo,
        h: &mut dyn RecipeHost,
    ) -> Reply {
        self.inner.call(m, f, a, c, h)
    }

    fn on_watch(&mut self, m: &str, r: &WatchRequest, h: &mut dyn RecipeHost) -> Reply {
        self.inner.on_watch(m, r, h)
    }

    fn has_module(&self, module: &str) -> bool {
        self.inner.has_module(module)
    }

    fn modules(&self) -> Vec<ModuleReport> {
        Vec::new()
    }

    fn validates_quickly(&mut self, bytes: &[u8]) -> bool {
        parse(bytes).is_err() || self.validated.lock().unwrap().contains(bytes)
    }

    fn deploy_name(&self, bytes: &[u8]) -> Option<String> {
        parse(bytes).ok().map(|(name, _)| name)
    }

    fn validate(&mut self, bytes: &[u8]) -> Result<ModuleMeta, String> {
        if self.validated.lock().unwrap().insert(bytes.to_vec()) {
            self.compiles
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        match parse(bytes)? {
            (_, v) if v == "bad" => Err("does not compile".into()),
            _ => self.inner.validate(bytes),
        }
    }

    fn install(&mut self, name: &str, m: Option<&DeployedModule>) -> Result<(), String> {
        self.inner.install(name, m)
    }
}

/// A harness whose steps go to workers (which the test runs), with a
/// compiling engine; the member's handle's compile count, the worker's
/// handle, and what is served.
fn compiling_harness() -> (
    Harness,
    Arc<std::sync::atomic::AtomicUsize>,
    CompilingEngine,
    Served,
) {
    let (mut h, served) = harness();
    let (member, worker) = CompilingEngine::pair(&served);
    let member_compiles = member.compiles.clone();
    h.server.set_recipe_engine(Box::new(member));
    h.server.set_recipe_offload(true);
    (h, member_compiles, worker, served)
}

/// Runs every step and validation sent to a worker until none is left.
fn run_workers(h: &mut Harness, worker: &mut CompilingEngine) {
    while !h.steps.is_empty() {
        let done = h.steps.remove(0).run(worker);
        h.step(Input::RecipeStepDone(Box::new(done)));
    }
}

/// The replies `conn` got to xids above 0, in the order sent: (xid, err).
fn reply_order(h: &Harness, conn: u64) -> Vec<(i32, i32)> {
    h.sent
        .get(&conn)
        .into_iter()
        .flatten()
        .filter_map(|s| match s {
            Sent::Reply { xid, err, .. } if *xid > 0 => Some((*xid, *err)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_deploy_that_must_compile_is_validated_on_a_worker_and_its_sessions_next_requests_wait_for_it()
{
    // The member's thread never compiles (a large module would hold it
    // past the followers' patience); ZooKeeper Programmer's Guide,
    // "ZooKeeper guarantees" (Sequential Consistency): the session's
    // later requests are answered after the deploy, in order.
    let (mut h, member_compiles, mut worker, served) = compiling_harness();
    h.connect(1);
    h.connect(2);
    h.digest_auth(1, "super:pw");
    let before = h.server.last_zxid();
    h.send(1, 1, deploy("m:1"));
    h.send(1, 2, rcall("m"));
    h.send(
        1,
        3,
        Request::GetData {
            path: "/".into(),
            watch: false,
        },
    );
    assert_eq!(reply_order(&h, 1), vec![], "all three wait");
    // A ping is answered meanwhile: the client keeps its connection while
    // the module compiles.
    h.send(1, wazoo_proto::xid::PING, Request::Ping);
    assert!(
        h.sent[&1].iter().any(
            |s| matches!(s, Sent::Reply { xid, err: 0, .. } if *xid == wazoo_proto::xid::PING)
        ),
        "the ping is answered at once"
    );
    assert_eq!(h.steps.len(), 1, "the module goes to a worker");
    assert_eq!(h.server.last_zxid(), before, "no txn yet");
    // Another session is not held behind it.
    ok(h.call(
        2,
        Request::GetData {
            path: "/".into(),
            watch: false,
        },
    ));
    run_workers(&mut h, &mut worker);
    assert_eq!(reply_order(&h, 1), vec![(1, 0), (2, 0), (3, 0)]);
    assert_eq!(h.server.last_zxid(), before.next(), "one txn: the deploy");
    assert_eq!(served.lock().unwrap()["m"], "1");
    let compiles =
        |e: &Arc<std::sync::atomic::AtomicUsize>| e.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        compiles(&member_compiles),
        0,
        "the member's thread compiled nothing"
    );
    assert_eq!(compiles(&worker.compiles), 1);
    // A module that does not compile is refused with the worker's reason,
    // and not compiled again; the old version keeps serving.
    h.send(1, 4, deploy("m:bad"));
    let done = h.steps.remove(0).run(&mut worker);
    h.step(Input::RecipeStepDone(Box::new(done)));
    assert_eq!(
        reply_order(&h, 1).last(),
        Some(&(4, ErrorCode::BadArguments.code()))
    );
    assert_eq!(
        h.server.last_zxid(),
        before.next(),
        "a refused deploy makes no txn"
    );
    assert_eq!(compiles(&member_compiles), 0);
    assert_eq!(served.lock().unwrap()["m"], "1");
    // A deploy without ADMIN on /zookeeper/recipes is refused before any
    // compile: no worker, NoAuth at once.
    h.send(2, 1, deploy("m:never-compiled"));
    assert!(
        h.steps.is_empty(),
        "nothing to validate for a refused deploy"
    );
    assert_eq!(
        reply_order(&h, 2).last(),
        Some(&(1, ErrorCode::NoAuth.code()))
    );
    assert_eq!(compiles(&worker.compiles), 2);
    // Deploying bytes validated before needs no worker.
    h.send(1, 5, deploy("m:1"));
    assert!(h.steps.is_empty());
    assert_eq!(reply_order(&h, 1).last(), Some(&(5, 0)));
}

#[test]
fn a_plugins_deploy_is_validated_on_a_worker_once_and_a_call_of_its_module_waits_for_it() {
    // A member starting deploys its plugins directory: a client's first
    // call of one of its modules must not find it missing while the
    // module compiles; the watchers' repeats cost nothing.
    let (mut h, member_compiles, mut worker, _) = compiling_harness();
    h.connect(2);
    h.connect(3);
    let before = h.server.last_zxid();
    h.step(plugin_deploy("m:1", "m.wasm"));
    h.step(plugin_deploy("m:1", "copy.wasm"));
    assert_eq!(h.steps.len(), 1, "one validation for both copies");
    h.send(2, 1, rcall("m"));
    h.send(2, 2, rcall("other"));
    assert_eq!(reply_order(&h, 2), vec![], "the calls wait");
    assert_eq!(h.steps.len(), 1, "only the validation runs");
    // Another session's call of a module no deploy in flight brings is
    // not held behind it: its step runs (on a worker), and finds no module.
    h.send(3, 1, rcall("other"));
    assert_eq!(h.steps.len(), 2, "the call of other runs");
    run_workers(&mut h, &mut worker);
    assert_eq!(h.server.deployed_modules()["m"].zxid, before.next());
    let replies = reply_order(&h, 2);
    assert_eq!(replies.len(), 2, "both answered: {replies:?}");
    assert_eq!(reply_order(&h, 3).len(), 1);
    let first = h.sent[&2]
        .iter()
        .find_map(|s| match s {
            Sent::Reply {
                xid: 1,
                body: Some(Response::Recipe(b)),
                ..
            } => Some(abi::decode::<Reply>(b).unwrap()),
            _ => None,
        })
        .expect("the call of m is answered");
    assert_eq!(
        first,
        Reply::Done(b"1".to_vec()),
        "it ran the deployed module"
    );
    assert_eq!(
        member_compiles.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    // The same file again once deployed: no validation, no txn.
    let deployed = h.server.last_zxid();
    h.step(plugin_deploy("m:1", "m.wasm"));
    assert!(h.steps.is_empty());
    assert_eq!(h.server.last_zxid(), deployed);
}
