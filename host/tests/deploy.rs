//! Deploying recipe modules on a running 3-member wazoo ensemble
//! (docs/RECIPES.md, "Deploying"): a deploy is a write committed through
//! the ensemble's log, so a new leader serves exactly the committed
//! version, a member that was down during a deploy has the module once it
//! rejoins, and only a user with ADMIN in the ACL of /zookeeper/recipes
//! may deploy (by default the super user alone; ZooKeeper Programmer's
//! Guide, "Builtin ACL Schemes" and ZooKeeper Administrator's Guide,
//! "Authentication & Authorization Options", superDigest).

mod common;

// Shared with the runtime's own tests (the WAT module builders).
#[path = "../../runtime/tests/plugin_support/mod.rs"]
mod plugin_support;

use std::time::Duration;

use plugin_support::{good_module, mp};
use wazoo::plugin::abi::{self, Reply};
use wazoo_client::deploy::sha256_hex;
use wazoo_client::{Client, ClientOptions, Error};
use wazoo_testkit::{Flavor, ServerOptions, TestEnsemble, WazooEnsemble, WazooServer};

/// Ensemble options with a super user (`super:test`) and an empty plugins
/// directory (a member has a recipe engine only with one).
fn options() -> (tempfile::TempDir, ServerOptions) {
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = common::ensemble_options(Flavor::Wazoo)
        .cfg("DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=")
        .arg("--plugins")
        .arg(dir.path().to_string_lossy().to_string());
    (dir, opts)
}

/// A 3-member ensemble started with `opts`, once it has a leader, and the
/// leader's index.
fn start_three(opts: ServerOptions) -> (WazooEnsemble, usize) {
    let ens = WazooEnsemble::start(3, opts).expect("start a 3-member ensemble");
    let leader = ens
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader");
    (ens, leader)
}

async fn connect(hosts: &str, auth: Option<&str>) -> Client {
    let mut opts = ClientOptions::new().session_timeout(Duration::from_secs(20));
    if let Some(a) = auth {
        opts = opts.auth("digest", a.as_bytes());
    }
    Client::connect(hosts, opts)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {hosts}: {e}"))
        .0
}

/// A module "ver" whose one method (`get`) answers its own version.
fn version_module(version: &str) -> Vec<u8> {
    good_module("ver", version, version)
}

/// `ver.get` on `c`: the version string the serving module answers, or the
/// client's or the recipe host's error.
async fn served_version(c: &Client) -> Result<String, String> {
    let body = c
        .recipe_call("ver", "get", &mp(&()))
        .await
        .map_err(|e| e.to_string())?;
    match abi::decode::<Reply>(&body).expect("a recipe reply is a MessagePack Reply") {
        Reply::Done(v) => Ok(abi::decode(&v).expect("a string")),
        other => Err(format!("{other:?}")),
    }
}

/// Retries `ver.get` on `hosts` (a new session each round, so a dropped
/// connection during an election does not end the test) until it answers,
/// for 30 s at most; returns the version and the sha256 the member lists.
async fn until_served(hosts: &str, want_sha: &str) -> (String, String) {
    let mut last = String::new();
    for _ in 0..150 {
        let c = connect(hosts, None).await;
        let listed = c.deployed_recipes().await;
        let got = served_version(&c).await;
        c.close().await.ok();
        match (listed, got) {
            (Ok(listed), Ok(v)) => {
                let sha = listed
                    .iter()
                    .find(|r| r.name == "ver")
                    .map(|r| r.sha256.clone())
                    .unwrap_or_default();
                if sha == want_sha {
                    return (v, sha);
                }
                last = format!("serves {v} with sha256 {sha}");
            }
            (l, g) => last = format!("listed {l:?}, call {g:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{hosts} never served sha256 {want_sha}: last {last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_leader_serves_the_version_that_was_committed() {
    let (_plugins, opts) = options();
    let (mut ens, leader) = start_three(opts);
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let at = ens.addr(followers[0]).to_string();
    let admin = connect(&at, Some("super:test")).await;
    let v1 = version_module("1.0.0");
    let v2 = version_module("2.0.0");
    let d1 = admin.deploy(&v1).await.expect("deploy 1.0.0");
    assert_eq!(
        (d1.name.as_str(), d1.version.as_str(), d1.sha256.clone()),
        ("ver", "1.0.0", sha256_hex(&v1))
    );
    // A second module of the same name replaces the first.
    let d2 = admin.deploy(&v2).await.expect("deploy 2.0.0");
    assert_eq!(d2.sha256, sha256_hex(&v2));
    assert_eq!(served_version(&admin).await.unwrap(), "2.0.0");
    let listed = admin.deployed_recipes().await.unwrap();
    assert_eq!(
        listed.iter().filter(|r| r.name == "ver").count(),
        1,
        "a replace, never a duplicate: {listed:?}"
    );
    admin.close().await.ok();

    ens.kill(leader);
    // Every survivor, the new leader among them, serves the committed bytes.
    for &f in &followers {
        let (v, sha) = until_served(&ens.addr(f).to_string(), &sha256_hex(&v2)).await;
        assert_eq!((v.as_str(), sha), ("2.0.0", sha256_hex(&v2)), "member {f}");
    }
    let new_leader = ens
        .wait_for_leader(Duration::from_secs(30))
        .expect("a new leader");
    assert_ne!(new_leader, leader);
    let (v, _) = until_served(&ens.addr(new_leader).to_string(), &sha256_hex(&v2)).await;
    assert_eq!(v, "2.0.0", "the new leader runs the committed version");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_down_during_a_deploy_has_the_module_after_it_rejoins() {
    let (_plugins, opts) = options();
    let (mut ens, leader) = start_three(opts);
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let (down, up) = (followers[0], followers[1]);
    ens.kill(down);
    let v1 = version_module("1.0.0");
    let admin = connect(&ens.addr(up).to_string(), Some("super:test")).await;
    let mut deployed = None;
    for _ in 0..100 {
        match admin.deploy(&v1).await {
            Ok(d) => {
                deployed = Some(d);
                break;
            }
            // The two left may still be settling after the kill.
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let d = deployed.expect("a deploy with one member down");
    assert_eq!(d.sha256, sha256_hex(&v1));
    admin.close().await.ok();

    ens.restart(down).expect("restart the member that was down");
    let (v, sha) = until_served(&ens.addr(down).to_string(), &sha256_hex(&v1)).await;
    assert_eq!((v.as_str(), sha), ("1.0.0", sha256_hex(&v1)));

    // And an undeploy reaches it too.
    let admin = connect(&ens.addr(up).to_string(), Some("super:test")).await;
    admin.undeploy("ver").await.expect("undeploy");
    admin.close().await.ok();
    let c = connect(&ens.addr(down).to_string(), None).await;
    let mut gone = false;
    for _ in 0..100 {
        c.sync("/").await.ok();
        if !c
            .deployed_recipes()
            .await
            .unwrap()
            .iter()
            .any(|r| r.name == "ver")
        {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the rejoined member unloads the undeployed module");
    let err = served_version(&c).await.unwrap_err();
    assert!(
        err.contains("no recipe module"),
        "no module, no call: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_only_the_super_user_may_deploy_or_undeploy() {
    let (_plugins, opts) = options();
    let (ens, _) = start_three(opts);
    let hosts = ens.addr(0).to_string();
    let v1 = version_module("1.0.0");
    for auth in [None, Some("super:wrong"), Some("alice:test")] {
        let c = connect(&hosts, auth).await;
        match c.deploy(&v1).await {
            Err(Error::NoAuth) => {}
            other => panic!("{auth:?}: a deploy without the super user is NoAuth, got {other:?}"),
        }
        c.close().await.ok();
    }
    let admin = connect(&hosts, Some("super:test")).await;
    assert!(
        !admin
            .deployed_recipes()
            .await
            .unwrap()
            .iter()
            .any(|r| r.name == "ver"),
        "a refused deploy deploys nothing"
    );
    admin.deploy(&v1).await.expect("the super user deploys");
    let c = connect(&hosts, None).await;
    assert!(matches!(c.undeploy("ver").await, Err(Error::NoAuth)));
    // Calling needs no permission on the node; the module still serves.
    assert_eq!(served_version(&c).await.unwrap(), "1.0.0");
    // A module that fails validation is refused, and the old one keeps serving.
    assert!(matches!(
        admin.deploy(b"\0asm not a module").await,
        Err(Error::BadArguments(_))
    ));
    assert_eq!(served_version(&c).await.unwrap(), "1.0.0");
}

/// The ACL of /zookeeper/recipes `member` answers (after a sync), and its
/// aversion.
async fn recipes_acl_on(ens: &WazooEnsemble, member: usize) -> (Vec<wazoo_client::Acl>, i32) {
    let c = connect(&ens.addr(member).to_string(), Some("super:test")).await;
    c.sync("/").await.ok();
    let (acl, stat) = c
        .get_acl("/zookeeper/recipes")
        .await
        .unwrap_or_else(|e| panic!("getACL /zookeeper/recipes on member {member}: {e}"));
    c.close().await.ok();
    (acl, stat.aversion)
}

// docs/RECIPES.md, "Who may deploy"; ZooKeeper Programmer's Guide,
// "ZooKeeper access control using ACLs" (setACL needs ADMIN).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_granted_admin_on_the_recipes_node_deploys_and_the_acl_survives_a_restart() {
    let (_plugins, opts) = options();
    let (mut ens, leader) = start_three(opts);
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let acl = |perms: i32, scheme: &str, id: &str| wazoo_client::Acl {
        perms,
        id: wazoo_client::Id {
            scheme: scheme.into(),
            id: id.into(),
        },
    };
    let granted = vec![
        acl(31, "digest", &wazoo_client::digest_id("bob", "pw")),
        acl(1, "world", "anyone"),
    ];
    let bob_at = ens.addr(followers[1]).to_string();
    let bob = connect(&bob_at, Some("bob:pw")).await;
    let v1 = version_module("1.0.0");
    assert!(
        matches!(bob.deploy(&v1).await, Err(Error::NoAuth)),
        "world READ by default: bob may not deploy yet"
    );
    let plain = connect(&bob_at, None).await;
    assert!(matches!(
        plain.set_acl("/zookeeper/recipes", &granted, None).await,
        Err(Error::NoAuth)
    ));
    let admin = connect(&ens.addr(followers[0]).to_string(), Some("super:test")).await;
    assert!(matches!(
        admin.set_acl("/zookeeper/recipes", &granted, Some(5)).await,
        Err(Error::BadVersion)
    ));
    let stat = admin
        .set_acl("/zookeeper/recipes", &granted, Some(0))
        .await
        .expect("the super user sets the ACL");
    assert_eq!(stat.aversion, 1);
    admin.close().await.ok();
    for i in 0..3 {
        assert_eq!(
            recipes_acl_on(&ens, i).await,
            (granted.clone(), 1),
            "member {i}"
        );
    }

    let d = bob.deploy(&v1).await.expect("bob deploys with ADMIN");
    assert_eq!(d.sha256, sha256_hex(&v1));
    for i in 0..3 {
        let (v, _) = until_served(&ens.addr(i).to_string(), &sha256_hex(&v1)).await;
        assert_eq!(v, "1.0.0", "member {i}");
    }
    let alice = connect(&bob_at, Some("alice:pw")).await;
    assert!(matches!(
        alice.deploy(&version_module("9.0.0")).await,
        Err(Error::NoAuth)
    ));
    assert!(matches!(alice.undeploy("ver").await, Err(Error::NoAuth)));
    // World READ: anyone still lists what is deployed.
    let listed = plain.deployed_recipes().await.expect("list the recipes");
    assert!(listed.iter().any(|r| r.name == "ver"), "{listed:?}");
    for c in [bob, alice, plain] {
        c.close().await.ok();
    }

    // Every member restarts from its own log: the ACL is still the one set.
    ens.restart_all().expect("restart every member");
    let leader = ens
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader after the restart");
    for i in 0..3 {
        assert_eq!(
            recipes_acl_on(&ens, i).await,
            (granted.clone(), 1),
            "member {i}"
        );
    }
    let v2 = version_module("2.0.0");
    let bob = connect(&ens.addr(leader).to_string(), Some("bob:pw")).await;
    let mut deployed = None;
    for _ in 0..100 {
        match bob.deploy(&v2).await {
            Ok(d) => {
                deployed = Some(d);
                break;
            }
            Err(Error::NoAuth) => panic!("bob lost ADMIN over a restart"),
            // The members may still be syncing after the restart.
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    assert_eq!(
        deployed.expect("a deploy after the restart").sha256,
        sha256_hex(&v2)
    );
    bob.undeploy("ver").await.expect("bob undeploys");
}

/// Every built-in module's sha256 (the binary embeds them; none when it was
/// built without the wasm target).
fn builtin_shas() -> Vec<String> {
    wazoo::builtin::BUILTIN_RECIPES
        .iter()
        .map(|(_, bytes)| sha256_hex(bytes))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_loads_the_builtin_recipes_unless_turned_off() {
    let want = builtin_shas();
    if want.is_empty() {
        eprintln!("skipped: this binary was built without the built-in recipes");
        return;
    }
    // On (the default of `wazoo serve`; the testkit turns it off): no
    // plugins directory, and every built-in is served once compiled.
    let on = WazooServer::start(common::options(Flavor::Wazoo).cfg("wazoo.recipes.builtin=true"))
        .expect("start wazoo");
    let c = connect(&on.connect_string(), None).await;
    let mut listed = Vec::new();
    // Compiling ten modules in a debug build takes tens of seconds
    // (at nice 10: more on a busy machine).
    for _ in 0..1500 {
        listed = c.deployed_recipes().await.expect("the recipes node");
        if want.iter().all(|s| listed.iter().any(|r| &r.sha256 == s)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for s in &want {
        assert!(
            listed.iter().any(|r| &r.sha256 == s),
            "built-in {s} not served: {listed:?}"
        );
    }
    c.close().await.ok();

    // Off: no recipe engine at all.
    let off = WazooServer::start(common::options(Flavor::Wazoo).cfg("wazoo.recipes.builtin=false"))
        .expect("start wazoo");
    let recp = wazoo_testkit::four_letter_word(off.addr(), "recp").expect("recp");
    assert!(recp.contains("not enabled"), "{recp}");
    let c = connect(&off.connect_string(), None).await;
    match c.recipe_call("echo", "echo", &mp(&())).await {
        Err(_) => {}
        Ok(body) => assert!(
            !matches!(abi::decode::<Reply>(&body), Ok(Reply::Done(_))),
            "no built-in is served when turned off"
        ),
    }
}

/// The largest zxid of the snapshots in a member's data directory.
fn newest_snapshot(data_dir: &std::path::Path) -> u64 {
    std::fs::read_dir(data_dir.join("wazoo-v1"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().to_string();
                    u64::from_str_radix(name.strip_prefix("snapshot.")?, 16).ok()
                })
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// Deploys `module` through `admin` while a member is down (retrying
/// while the ensemble settles), for 20 s at most.
async fn deploy_with_one_member_down(admin: &Client, module: &[u8]) {
    for _ in 0..100 {
        if admin.deploy(module).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no deploy with one member down");
}

/// Commits more txns than a leader keeps to send as a DIFF (500), so a
/// member that was down is synced by a snapshot.
async fn more_txns_than_a_diff(admin: &Client) {
    let open = vec![wazoo_client::Acl {
        perms: 31,
        id: wazoo_client::Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    }];
    for i in 0..600 {
        admin
            .create(
                &format!("/pad{i}"),
                b"",
                &open,
                wazoo_client::CreateMode::Persistent,
            )
            .await
            .expect("create");
    }
}

/// A 3-member ensemble with one follower killed: the plugins directory,
/// the ensemble, the leader, the follower down, the other follower, and
/// the newest snapshot's zxid in the down member's data directory.
fn ensemble_with_a_follower_down() -> (tempfile::TempDir, WazooEnsemble, usize, usize, usize, u64) {
    let (plugins, opts) = options();
    let (mut ens, leader) = start_three(opts);
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let (down, up) = (followers[0], followers[1]);
    ens.kill(down);
    let before = newest_snapshot(ens.data_dir(down));
    (plugins, ens, leader, down, up, before)
}

// ZooKeeper Internals, "Atomic Broadcast" (a follower too far behind is
// sent a snapshot): the snapshot carries the deployed modules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_rejoins_by_snapshot_has_the_deployed_module() {
    let (_plugins, mut ens, _leader, down, up, before) = ensemble_with_a_follower_down();
    let v1 = version_module("1.0.0");
    let admin = connect(&ens.addr(up).to_string(), Some("super:test")).await;
    deploy_with_one_member_down(&admin, &v1).await;
    more_txns_than_a_diff(&admin).await;
    admin.close().await.ok();
    ens.restart(down).expect("restart the member that was down");
    let (v, sha) = until_served(&ens.addr(down).to_string(), &sha256_hex(&v1)).await;
    assert_eq!((v.as_str(), sha), ("1.0.0", sha256_hex(&v1)));
    assert!(
        newest_snapshot(ens.data_dir(down)) > before,
        "the member was synced by a snapshot"
    );
}

/// The `key=value` fields of module `name`'s line in /zookeeper/recipes
/// on the member at `addr`, after a sync (so it has applied everything
/// committed before), or `None` if it does not list the module.
async fn recipes_line(addr: &str, name: &str) -> Option<std::collections::HashMap<String, String>> {
    let c = connect(addr, None).await;
    c.sync("/").await.ok();
    let (data, _) = c
        .get_data("/zookeeper/recipes")
        .await
        .expect("read /zookeeper/recipes");
    c.close().await.ok();
    String::from_utf8_lossy(&data).lines().find_map(|line| {
        let fields: std::collections::HashMap<String, String> = line
            .split(' ')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        (fields.get("module").map(String::as_str) == Some(name)).then_some(fields)
    })
}

/// Polls every member until each lists `name` with `sha` (or, `None`, does
/// not list it), for 30 s at most; returns each member's line.
async fn until_every_member_lists(
    ens: &WazooEnsemble,
    name: &str,
    sha: Option<&str>,
) -> Vec<Option<std::collections::HashMap<String, String>>> {
    let mut last = Vec::new();
    for _ in 0..150 {
        last.clear();
        for i in 0..3 {
            last.push(recipes_line(&ens.addr(i).to_string(), name).await);
        }
        let matches = last
            .iter()
            .all(|l| l.as_ref().and_then(|f| f.get("hash")).map(String::as_str) == sha);
        if matches {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the members never all listed {name} with sha256 {sha:?}: {last:?}");
}

/// Writes a module into a plugins directory as the guide says: a hidden
/// temporary name, then a rename (the watcher ignores names starting with `.`).
fn drop_in(dir: &std::path::Path, file: &str, bytes: &[u8]) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, bytes).expect("write the module");
    std::fs::rename(&tmp, dir.join(file)).expect("rename the module into place");
}

/// The one deployed zxid every member lists, checking they agree.
fn same_deployed_zxid(lines: &[Option<std::collections::HashMap<String, String>>]) -> String {
    let zxids: Vec<&str> = lines
        .iter()
        .map(|l| l.as_ref().expect("listed")["deployed_zxid"].as_str())
        .collect();
    assert!(
        zxids.iter().all(|z| *z == zxids[0]),
        "every member serves the module deployed by one txn: {zxids:?}"
    );
    zxids[0].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_directory_deploys_through_the_log_and_a_removed_file_undeploys_only_its_module()
{
    let (ens, leader) = start_three(own_plugins_dirs());
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    // A follower's directory: its deploy is forwarded to the leader.
    let (f, g) = (followers[0], followers[1]);
    let dir_f = ens.member_dir(f).join("plugins");
    let dir_g = ens.member_dir(g).join("plugins");
    let v1 = version_module("1.0.0");
    let v2 = version_module("2.0.0");

    // A new file in one member's directory: every member serves it, from
    // the same txn.
    drop_in(&dir_f, "ver.wasm", &v1);
    let lines = until_every_member_lists(&ens, "ver", Some(&sha256_hex(&v1))).await;
    let z1 = same_deployed_zxid(&lines);
    let source = &lines[0].as_ref().unwrap()["source"];
    assert_eq!(source, &format!("plugins@{}:ver.wasm", f + 1));
    for i in 0..3 {
        let c = connect(&ens.addr(i).to_string(), None).await;
        assert_eq!(
            served_version(&c).await.as_deref(),
            Ok("1.0.0"),
            "member {i}"
        );
        c.close().await.ok();
    }

    // The same bytes again (a copy declaring the same name in the same
    // directory, and another member's copy): no new deploy.
    drop_in(&dir_f, "ver_copy.wasm", &v1);
    drop_in(&dir_g, "ver.wasm", &v1);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lines = until_every_member_lists(&ens, "ver", Some(&sha256_hex(&v1))).await;
    assert_eq!(
        same_deployed_zxid(&lines),
        z1,
        "same bytes: no version churn"
    );

    // Removing another member's copy keeps the module this member's file
    // deployed; so does removing the copy in the same directory.
    std::fs::remove_file(dir_g.join("ver.wasm")).unwrap();
    std::fs::remove_file(dir_f.join("ver_copy.wasm")).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lines = until_every_member_lists(&ens, "ver", Some(&sha256_hex(&v1))).await;
    assert_eq!(
        same_deployed_zxid(&lines),
        z1,
        "the file that deployed it is still there"
    );

    // A changed file: a new version everywhere, from one later txn.
    drop_in(&dir_f, "ver.wasm", &v2);
    let lines = until_every_member_lists(&ens, "ver", Some(&sha256_hex(&v2))).await;
    let z2 = same_deployed_zxid(&lines);
    let hex = |z: &str| u64::from_str_radix(z.trim_start_matches("0x"), 16).unwrap();
    assert!(hex(&z2) > hex(&z1), "{z2} after {z1}");

    // Removing the file undeploys the module it deployed, on every member.
    std::fs::remove_file(dir_f.join("ver.wasm")).unwrap();
    until_every_member_lists(&ens, "ver", None).await;
    let c = connect(&ens.addr(leader).to_string(), None).await;
    let err = served_version(&c).await.unwrap_err();
    assert!(err.contains("no recipe module"), "undeployed: {err}");
    c.close().await.ok();
}

/// Each member its own plugins directory (relative to its working
/// directory), as `--plugins plugins`.
fn own_plugins_dirs() -> ServerOptions {
    common::ensemble_options(Flavor::Wazoo)
        .member_dir("plugins")
        .arg("--plugins")
        .arg("plugins")
}

// docs/RECIPES.md, "The plugins directory": a removed file undeploys what
// it deployed, also when it was removed while its member was down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_file_removed_while_its_member_was_down_is_undeployed_when_it_returns() {
    let (mut ens, leader) = start_three(own_plugins_dirs());
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let (f, g) = (followers[0], followers[1]);
    let dir_f = ens.member_dir(f).join("plugins");
    let dir_g = ens.member_dir(g).join("plugins");
    let v1 = version_module("1.0.0");
    let other = good_module("other", "1.0.0", "other");
    drop_in(&dir_f, "ver.wasm", &v1);
    drop_in(&dir_g, "other.wasm", &other);
    until_every_member_lists(&ens, "ver", Some(&sha256_hex(&v1))).await;
    until_every_member_lists(&ens, "other", Some(&sha256_hex(&other))).await;

    // f's file goes while f is down: nothing watches it meanwhile.
    ens.kill(f);
    std::fs::remove_file(dir_f.join("ver.wasm")).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in [leader, g] {
        assert!(
            recipes_line(&ens.addr(i).to_string(), "ver")
                .await
                .is_some(),
            "member {i} keeps the module while f is down"
        );
    }
    // Once f is back, its first scan finds the module its file deployed
    // gone from its directory: undeployed everywhere. g's module, which
    // f's directory never had, stays.
    ens.restart(f).expect("restart f");
    until_every_member_lists(&ens, "ver", None).await;
    let lines = until_every_member_lists(&ens, "other", Some(&sha256_hex(&other))).await;
    assert_eq!(
        lines[0].as_ref().unwrap()["source"],
        format!("plugins@{}:other.wasm", g + 1)
    );

    // Removed while down, but another file of f's declares the name: that
    // one is deployed instead, and stays.
    drop_in(&dir_f, "ver.wasm", &v1);
    until_every_member_lists(&ens, "ver", Some(&sha256_hex(&v1))).await;
    ens.kill(f);
    std::fs::remove_file(dir_f.join("ver.wasm")).unwrap();
    let v2 = version_module("2.0.0");
    drop_in(&dir_f, "ver_next.wasm", &v2);
    ens.restart(f).expect("restart f");
    let lines = until_every_member_lists(&ens, "ver", Some(&sha256_hex(&v2))).await;
    assert_eq!(
        lines[0].as_ref().unwrap()["source"],
        format!("plugins@{}:ver_next.wasm", f + 1)
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    until_every_member_lists(&ens, "ver", Some(&sha256_hex(&v2))).await;
}

/// Polls the members in `members` until each lists `ver` with `calls`
/// calls, for 30 s at most (counters are committed every 5 s at most);
/// returns the last lines.
async fn until_counted(
    ens: &WazooEnsemble,
    members: &[usize],
    calls: u64,
) -> Vec<std::collections::HashMap<String, String>> {
    let mut last = Vec::new();
    for _ in 0..150 {
        last.clear();
        for &i in members {
            if let Some(l) = recipes_line(&ens.addr(i).to_string(), "ver").await {
                last.push(l);
            }
        }
        if last.len() == members.len() && last.iter().all(|l| l["calls"] == calls.to_string()) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("members {members:?} never all counted {calls} calls: {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recipe_counters_are_the_ensembles_on_every_member_and_survive_reload_and_failover() {
    let (_plugins, opts) = options();
    let (mut ens, leader) = start_three(opts);
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let admin = connect(&ens.addr(followers[0]).to_string(), Some("super:test")).await;
    admin
        .deploy(&version_module("1.0.0"))
        .await
        .expect("deploy");
    // Calls through every member: the leader runs them all.
    for i in 0..6 {
        let c = connect(&ens.addr(i % 3).to_string(), None).await;
        assert_eq!(served_version(&c).await.as_deref(), Ok("1.0.0"));
        c.close().await.ok();
    }
    // A reload (a new version of the name) keeps the counters; its calls trap.
    let trapping = plugin_support::wat_module(
        &plugin_support::manifest("ver", "9.9.9", &["get"], &[]),
        "",
        "(unreachable)",
        b"",
    );
    admin
        .deploy(&trapping)
        .await
        .expect("deploy the trapping version");
    for _ in 0..3 {
        assert!(
            served_version(&admin).await.is_err(),
            "a trap fails the call"
        );
    }
    admin.close().await.ok();
    let lines = until_counted(&ens, &[0, 1, 2], 9).await;
    for l in &lines {
        assert_eq!(l["errors"], "3", "{l:?}");
        assert_eq!(l["errors_by_kind"], "trap:3", "{l:?}");
        let latencies: u64 = l["latency_us"]
            .split(',')
            .map(|b| b.split_once(':').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(latencies, 9, "every call is in the histogram: {l:?}");
    }

    // The new leader goes on from the committed counters.
    ens.kill(leader);
    let survivors = followers.clone();
    let admin = connect(&ens.addr(survivors[0]).to_string(), Some("super:test")).await;
    let mut redeployed = false;
    for _ in 0..150 {
        if admin.deploy(&version_module("2.0.0")).await.is_ok() {
            redeployed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(redeployed, "a deploy to the two survivors");
    admin.close().await.ok();
    let (v, _) = until_served(
        &ens.addr(survivors[1]).to_string(),
        &sha256_hex(&version_module("2.0.0")),
    )
    .await;
    assert_eq!(v, "2.0.0");
    until_counted(&ens, &survivors, 10).await;
}

// docs/METRICS.md, "Recipes" (the counters are the ensemble's and survive
// reload) and ZooKeeper Internals, "Atomic Broadcast" (a follower too far
// behind is sent a snapshot): the snapshot carries the committed counters,
// so the member shows the leader's figures as soon as it serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_synced_by_snapshot_shows_the_leaders_recipe_counters() {
    let (_plugins, mut ens, leader, down, up, before) = ensemble_with_a_follower_down();
    let admin = connect(&ens.addr(up).to_string(), Some("super:test")).await;
    deploy_with_one_member_down(&admin, &version_module("1.0.0")).await;
    for _ in 0..4 {
        assert_eq!(served_version(&admin).await.as_deref(), Ok("1.0.0"));
    }
    // The leader commits its counters (within 5 s); no call follows, so
    // its counters never change again and no other counters txn comes.
    let want = until_counted(&ens, &[leader, up], 4).await;
    more_txns_than_a_diff(&admin).await;
    admin.close().await.ok();
    ens.restart(down).expect("restart the member that was down");
    // The first line the member lists is already the leader's: without
    // the counters in the snapshot it would list 0 calls for good.
    let mut got = None;
    for _ in 0..150 {
        got = recipes_line(&ens.addr(down).to_string(), "ver").await;
        if got.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let got = got.expect("the member lists ver once it serves");
    assert!(
        newest_snapshot(ens.data_dir(down)) > before,
        "the member was synced by a snapshot"
    );
    for key in [
        "calls",
        "errors",
        "fuel_used",
        "errors_by_kind",
        "latency_us",
        "latency_sum_us",
    ] {
        assert_eq!(got[key], want[0][key], "{key} of {got:?}");
    }
}

/// A module "ver" (prefix /calls) whose `get` creates the sequential node
/// `/calls/c-` with its version as data, then answers its version: the
/// node's czxid is the call's zxid.
fn recording_module(version: &str) -> Vec<u8> {
    use wazoo::plugin::abi::{CreateMode, TreeOp};
    let ops = mp(&vec![TreeOp::Create {
        path: "/calls/c-".into(),
        data: version.as_bytes().to_vec(),
        mode: CreateMode::PersistentSequential,
        acl: None,
    }]);
    let reply = mp(&Reply::Done(mp(version)));
    let mut data = reply.clone();
    data.extend_from_slice(&ops);
    let body = format!(
        "(drop (call $tree (i32.const {ops_at}) (i32.const {ops_len})))
         (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const {reply_len}))",
        reply_len = reply.len(),
        ops_at = 1024 + reply.len(),
        ops_len = ops.len(),
    );
    plugin_support::wat_module(
        &plugin_support::manifest("ver", version, &["get"], &["/calls"]),
        r#"(import "wazoo" "tree" (func $tree (param i32 i32) (result i64)))"#,
        &body,
        &data,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_during_a_stream_of_calls_fails_none_and_splits_them_by_zxid() {
    let (_plugins, opts) = options();
    let (ens, leader) = start_three(opts);
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let admin = connect(&ens.addr(follower).to_string(), Some("super:test")).await;
    let open = vec![wazoo_proto::Acl {
        perms: wazoo_proto::perms::ALL,
        id: wazoo_proto::Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    }];
    admin
        .create("/calls", b"", &open, wazoo_client::CreateMode::Persistent)
        .await
        .expect("create /calls");
    let (v1, v2) = (recording_module("1.0.0"), recording_module("2.0.0"));
    admin.deploy(&v1).await.expect("deploy 1.0.0");

    // A caller on every member, calling back to back until told to stop.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut callers = Vec::new();
    for i in 0..3 {
        let addr = ens.addr(i).to_string();
        let stop = stop.clone();
        callers.push(tokio::spawn(async move {
            let c = connect(&addr, None).await;
            let mut answers = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && answers.len() < 2000 {
                answers.push(served_version(&c).await);
            }
            c.close().await.ok();
            answers
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let d2 = admin
        .deploy(&v2)
        .await
        .expect("deploy 2.0.0 during the calls");
    assert_eq!(d2.sha256, sha256_hex(&v2));
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut answers = Vec::new();
    for c in callers {
        answers.extend(c.await.expect("a caller"));
    }
    let failed: Vec<&Result<String, String>> = answers.iter().filter(|a| a.is_err()).collect();
    assert!(failed.is_empty(), "no call fails: {failed:?}");

    // The deploy's zxid, and each call's (its node's czxid): every call
    // committed before the deploy ran 1.0.0, every one after it 2.0.0.
    let line = recipes_line(&ens.addr(follower).to_string(), "ver")
        .await
        .expect("ver is listed");
    let deployed = u64::from_str_radix(line["deployed_zxid"].trim_start_matches("0x"), 16).unwrap();
    admin.sync("/").await.ok();
    let nodes = admin
        .get_children("/calls")
        .await
        .expect("the calls' nodes");
    assert_eq!(nodes.len(), answers.len(), "one node per call");
    let (mut before, mut after) = (0, 0);
    for n in &nodes {
        let (data, stat) = admin.get_data(&format!("/calls/{n}")).await.unwrap();
        let czxid = stat.czxid as u64;
        assert_ne!(czxid, deployed);
        let want: &[u8] = if czxid < deployed { b"1.0.0" } else { b"2.0.0" };
        assert_eq!(
            data, want,
            "call {n} at 0x{czxid:x}, deploy at 0x{deployed:x}"
        );
        if czxid < deployed {
            before += 1;
        } else {
            after += 1;
        }
    }
    assert!(
        before > 0 && after > 0,
        "calls on both sides of the deploy: {before} and {after}"
    );
    let v1_answers = answers
        .iter()
        .filter(|a| a.as_deref() == Ok("1.0.0"))
        .count();
    assert_eq!(
        v1_answers, before,
        "each call answered with the version it ran"
    );
    admin.close().await.ok();
}

/// A valid module of `functions` functions (each a little arithmetic):
/// long to compile, as a large real recipe is.
fn large_module(functions: usize) -> Vec<u8> {
    let mut extra = String::new();
    for i in 0..functions {
        extra.push_str(&format!(
            "(func $f{i} (param i32) (result i32) (i32.add (i32.mul (local.get 0) (i32.const {i})) (i32.const 7)))\n"
        ));
    }
    let reply = mp(&Reply::Done(mp("large")));
    plugin_support::wat_module(
        &plugin_support::manifest("large", "1.0.0", &["get"], &[]),
        &extra,
        plugin_support::RETURN_DATA,
        &reply,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploying_a_module_long_to_compile_holds_no_other_client_and_elects_no_one() {
    // The leader compiles a module it validates on a recipe worker, not
    // on the thread that serves its clients and answers its followers: a
    // writer on another session goes on, and nobody's connection drops
    // (every member drops its clients when the leader changes).
    let (_plugins, opts) = options();
    let (ens, leader) = start_three(opts);
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let module = large_module(6000);
    let started = std::time::Instant::now();
    wazoo::plugin::Runtime::new(Default::default())
        .unwrap()
        .validate_bytes(&module)
        .expect("the large module is valid");
    let compile = started.elapsed();
    eprintln!("compiling the large module here took {compile:?}");
    let writer = connect(&ens.addr(follower).to_string(), None).await;
    let open = wazoo_client::Acl::open_unsafe();
    writer
        .create("/w", b"0", &open, wazoo_client::CreateMode::Persistent)
        .await
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writes = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut n, mut slowest) = (0u64, Duration::ZERO);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = std::time::Instant::now();
                writer
                    .set_data("/w", b"x", None)
                    .await
                    .expect("a write during the deploy");
                slowest = slowest.max(t.elapsed());
                n += 1;
            }
            (n, slowest)
        })
    };
    let admin = connect(&ens.addr(leader).to_string(), Some("super:test")).await;
    let d = admin
        .deploy(&module)
        .await
        .expect("deploy the large module");
    assert_eq!(d.sha256, sha256_hex(&module));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (n, slowest) = writes.await.unwrap();
    eprintln!("{n} writes during the deploy, the slowest {slowest:?}");
    assert!(n > 0);
    assert_eq!(
        ens.wait_for_leader(Duration::from_secs(5)).unwrap(),
        leader,
        "no election"
    );
    assert_eq!(served_module(&admin).await, "large");
}

async fn served_module(c: &Client) -> String {
    let body = c.recipe_call("large", "get", &mp(&())).await.unwrap();
    match abi::decode::<Reply>(&body).unwrap() {
        Reply::Done(v) => abi::decode(&v).unwrap(),
        other => panic!("{other:?}"),
    }
}
