//! The runtime as the pipeline's engine for deployed modules
//! (docs/RECIPES.md, "Deploy through the ensemble's log"): the leader
//! validates without swapping in; every member serves what the replicated
//! module set says.

mod plugin_support;

use plugin_support::*;
use std::sync::Arc;
use wazoo_core::recipe::{DeployedModule, RecipeEngine};
use wazoo_runtime::{Runtime, RuntimeConfig};

fn deployed(name: &str, bytes: &[u8], sha256: &str) -> DeployedModule {
    DeployedModule {
        name: name.into(),
        version: "x".into(),
        sha256: sha256.into(),
        bytes: Arc::from(bytes),
        zxid: wazoo_proto::Zxid(1),
        source: "client".into(),
    }
}

#[test]
fn validating_a_module_says_what_it_is_without_serving_it() {
    let mut rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let bytes = good_module("m", "1.2.3", "one");
    let meta = RecipeEngine::validate(&mut rt, &bytes).unwrap();
    assert_eq!((meta.name.as_str(), meta.version.as_str()), ("m", "1.2.3"));
    assert_eq!(meta.sha256.len(), 64);
    assert!(!rt.has_module("m"), "validation swaps nothing in");
    let why = RecipeEngine::validate(&mut rt, b"\0asm garbage").unwrap_err();
    assert!(!why.is_empty());
}

#[test]
fn install_serves_the_deployed_version_and_none_unloads_it() {
    let mut rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let v1 = good_module("m", "1.0.0", "one");
    let v2 = good_module("m", "2.0.0", "two");
    let s1 = RecipeEngine::validate(&mut rt, &v1).unwrap().sha256;
    let s2 = RecipeEngine::validate(&mut rt, &v2).unwrap().sha256;
    rt.install("m", Some(&deployed("m", &v1, &s1))).unwrap();
    assert_eq!(rt.module("m").unwrap().hash, s1);
    rt.install("m", Some(&deployed("m", &v2, &s2))).unwrap();
    assert_eq!(rt.module("m").unwrap().version, "2.0.0");
    rt.install("m", None).unwrap();
    assert!(rt.module("m").is_none());
}

#[test]
fn a_module_deployed_under_another_name_is_not_served() {
    let mut rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let bytes = good_module("real", "1.0.0", "one");
    let sha = RecipeEngine::validate(&mut rt, &bytes).unwrap().sha256;
    assert!(rt
        .install("other", Some(&deployed("other", &bytes, &sha)))
        .is_err());
    assert!(rt.module("real").is_none() && rt.module("other").is_none());
}

// The built-in recipes are defaults: loading one never replaces a module of
// its name that was deployed (or loaded from a file) first.
#[test]
fn a_default_module_never_replaces_one_already_served() {
    let mut rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let deployed_v = good_module("m", "2.0.0", "deployed");
    let default_v = good_module("m", "1.0.0", "default");
    let s2 = RecipeEngine::validate(&mut rt, &deployed_v).unwrap().sha256;
    rt.install("m", Some(&deployed("m", &deployed_v, &s2)))
        .unwrap();
    assert!(rt.load_bytes_if_absent(&default_v).unwrap().is_none());
    assert_eq!(rt.module("m").unwrap().version, "2.0.0");
    // Once undeployed, the default loads.
    rt.install("m", None).unwrap();
    let info = rt
        .load_bytes_if_absent(&default_v)
        .unwrap()
        .expect("loaded");
    assert_eq!(info.version, "1.0.0");
    assert!(rt.load_bytes_if_absent(b"\0asm garbage").is_err());
}

/// docs/RECIPES.md, "5. Load": a plugins file removed while its member was
/// down. The deployed set records which member's file deployed each
/// module (`plugins@MYID:FILE`); the watcher of member 1 starting on a
/// directory without `mine.wasm` undeploys that module at the sha256 the
/// file deployed, and nothing else: not a module whose file is still
/// there, not another member's (`plugins@11` is not `plugins@1`), not a
/// client's.
#[test]
fn a_module_whose_plugins_file_is_gone_at_start_is_undeployed_and_only_this_members() {
    let mut rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut sha = std::collections::BTreeMap::new();
    for (name, source) in [
        ("mine", "plugins@1:mine.wasm"),
        ("kept", "plugins@1:kept.wasm"),
        ("theirs", "plugins@11:mine.wasm"),
        ("clients", "client"),
    ] {
        let bytes = good_module(name, "1.0.0", name);
        let s = RecipeEngine::validate(&mut rt, &bytes).unwrap().sha256;
        let m = DeployedModule {
            source: source.into(),
            ..deployed(name, &bytes, &s)
        };
        rt.install(name, Some(&m)).unwrap();
        if name == "kept" {
            std::fs::write(dir.path().join("kept.wasm"), &bytes).unwrap();
        }
        sha.insert(name, s);
    }
    let ops = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = ops.clone();
    let submit: wazoo_runtime::Submit = Box::new(move |op| {
        seen.lock().unwrap().push(op);
        true
    });
    let quiet = wazoo_runtime::WatchConfig {
        rescan: std::time::Duration::from_secs(3600),
        retry: std::time::Duration::from_secs(3600),
        ..Default::default()
    };
    // The first scan runs before watch_dir_deploying returns.
    let _watcher = rt
        .watch_dir_deploying(dir.path(), "plugins@1", submit, quiet)
        .unwrap();
    assert_eq!(
        *ops.lock().unwrap(),
        vec![wazoo_core::server::PluginOp::Undeploy {
            name: "mine".into(),
            sha256: sha["mine"].clone(),
        }]
    );
}

fn caller() -> wazoo_runtime::abi::CallerInfo {
    wazoo_runtime::abi::CallerInfo {
        session: 7,
        guid: "g-1".into(),
        ids: Vec::new(),
    }
}

/// What `m.get` answers on `rt`.
fn served(rt: &Runtime) -> Result<String, String> {
    let r = rt
        .call("m", "get", &[], &caller(), &mut MemTree::new(7))
        .map_err(|e| e.to_string())?;
    Ok(done::<String>(&r.reply))
}

// docs/ARCHITECTURE.md, "Deployed modules": a member that has not compiled
// a deployed module compiles it off the installing thread; meanwhile the
// name lists the new version and a call of it waits for it, so a call
// made after the install never runs the version before.
#[test]
fn a_module_not_compiled_yet_installs_at_once_and_calls_wait_for_it() {
    let mut rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let v1 = good_module("m", "1.0.0", "one");
    let v2 = good_module("m", "2.0.0", "two");
    let s1 = RecipeEngine::validate(&mut rt, &v1).unwrap().sha256;
    rt.install("m", Some(&deployed("m", &v1, &s1))).unwrap();
    assert_eq!(served(&rt).as_deref(), Ok("one"));
    // v2 was never validated here (a follower's case): not in memory.
    let s2 = sha256_hex(&v2);
    rt.install("m", Some(&deployed("m", &v2, &s2))).unwrap();
    assert!(rt.has_module("m"));
    let listed = RecipeEngine::modules(&rt);
    assert_eq!(
        (listed.len(), listed[0].version.as_str(), &listed[0].hash),
        (1, "2.0.0", &s2),
        "listed as the version it will serve"
    );
    assert_eq!(served(&rt).as_deref(), Ok("two"), "a later call runs v2");
    assert!(!rt.is_pending("m"));

    // A newer install replaces one still compiling; an undeploy ends it.
    let v3 = good_module("m", "3.0.0", "three");
    let v4 = good_module("m", "4.0.0", "four");
    let (s3, s4) = (sha256_hex(&v3), sha256_hex(&v4));
    rt.install("m", Some(&deployed("m", &v3, &s3))).unwrap();
    rt.install("m", Some(&deployed("m", &v4, &s4))).unwrap();
    assert_eq!(served(&rt).as_deref(), Ok("four"));
    let v5 = good_module("m", "5.0.0", "five");
    rt.install("m", Some(&deployed("m", &v5, &sha256_hex(&v5))))
        .unwrap();
    rt.install("m", None).unwrap();
    assert!(!rt.has_module("m"));
    assert!(served(&rt).is_err(), "undeployed");
    // A module whose bytes are not what was deployed is refused at once.
    assert!(rt
        .install("m", Some(&deployed("m", &good_module("m", "6", "x"), &s4)))
        .is_err());
}

/// SHA-256 of `b`, hex, computed here (not by the runtime under test).
fn sha256_hex(b: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

#[test]
fn a_module_validated_once_validates_quickly_after_and_a_refusal_is_remembered() {
    // The leader validates a deploy on a worker unless this says it need
    // not compile (docs/RECIPES.md, "Deploy through the ensemble's log").
    let mut rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let bytes = good_module("m", "1.0.0", "one");
    // Its name is known before it compiles: calls of "m" wait for it.
    assert_eq!(rt.deploy_name(&bytes).as_deref(), Some("m"));
    assert_eq!(rt.deploy_name(b"\0asm garbage"), None);
    assert!(!rt.validates_quickly(&bytes), "a first validation compiles");
    RecipeEngine::validate(&mut rt, &bytes).unwrap();
    assert!(rt.validates_quickly(&bytes));
    // It imports what the host does not offer: refused after compiling.
    let bad = wat_module(
        &manifest("bad", "1.0.0", &["get"], &[]),
        r#"(import "env" "evil" (func))"#,
        RETURN_DATA,
        &[],
    );
    assert!(!rt.validates_quickly(&bad));
    let compiles = rt.compiles();
    let why = RecipeEngine::validate(&mut rt, &bad).unwrap_err();
    assert!(rt.validates_quickly(&bad), "the refusal is remembered");
    assert_eq!(RecipeEngine::validate(&mut rt, &bad).unwrap_err(), why);
    assert_eq!(rt.compiles(), compiles + 1, "refused once, compiled once");
    assert!(
        rt.validates_quickly(b"\0asm garbage"),
        "no manifest: refused before compiling"
    );
}

#[test]
fn runtimes_sharing_a_cache_directory_compile_a_module_once_between_them() {
    // `wazoo dev`'s three members share one cache directory: starting
    // together, they compile each built-in once, not three times.
    let dir = tempfile::tempdir().unwrap();
    let bytes = Arc::new(recipe_bytes("lock"));
    let runtimes: Vec<Runtime> = (0..3)
        .map(|_| {
            Runtime::new(RuntimeConfig {
                cache_dir: Some(dir.path().to_path_buf()),
                ..Default::default()
            })
            .unwrap()
        })
        .collect();
    let loads: Vec<_> = runtimes
        .iter()
        .map(|rt| {
            let (rt, bytes) = (rt.clone(), bytes.clone());
            std::thread::spawn(move || rt.load_bytes(&bytes).unwrap())
        })
        .collect();
    for l in loads {
        assert_eq!(l.join().unwrap().name, "lock");
    }
    let compiles: u64 = runtimes.iter().map(Runtime::compiles).sum();
    assert_eq!(compiles, 1, "one compile, two cache reads");
}

/// Run as a child of the test below (this test binary, run again with
/// `WAZOO_CACHE_CHILD_DIR` set): loads the module in that directory's
/// `module.wasm` with the directory's `cache` as its cache, and prints how
/// many modules it compiled.
#[test]
fn cache_child_process_loads_the_lock_module() {
    let Some(dir) = std::env::var_os("WAZOO_CACHE_CHILD_DIR") else {
        return; // only meaningful as the child
    };
    let dir = std::path::PathBuf::from(dir);
    let rt = Runtime::new(RuntimeConfig {
        cache_dir: Some(dir.join("cache")),
        ..Default::default()
    })
    .unwrap();
    let bytes = std::fs::read(dir.join("module.wasm")).unwrap();
    assert_eq!(rt.load_bytes(&bytes).unwrap().name, "lock");
    println!("compiles={}", rt.compiles());
}

#[test]
fn processes_sharing_a_cache_directory_compile_a_module_once_between_them() {
    // Members on one machine run as processes of their own (a test
    // ensemble, the bench): starting together on one cache directory,
    // they compile a module once between them; the others wait for the
    // file lock and read the entry.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("module.wasm"), recipe_bytes("lock")).unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "cache_child_process_loads_the_lock_module",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("WAZOO_CACHE_CHILD_DIR", dir.path())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut compiles = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "a child failed: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let n: u64 = text
            .lines()
            .find_map(|l| l.split_once("compiles=").map(|(_, n)| n))
            .unwrap_or_else(|| panic!("no count in the child's output: {text}"))
            .trim()
            .parse()
            .unwrap();
        compiles += n;
    }
    assert_eq!(compiles, 1, "one compile, two cache reads");
}

// docs/RECIPES.md, "Built-in recipes as a member starts": a member loads
// its built-in modules in the background as it starts, announcing each
// first; a call of one made while it loads waits for it and runs it,
// instead of finding it unknown. A default whose load ends without it (one of its name was
// served, or it failed) holds no call any more.
#[test]
fn a_call_of_a_default_module_still_loading_waits_for_it_and_is_served() {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let m = good_module("m", "1.0.0", "built in");
    assert!(!rt.has_module("m"));
    assert!(
        served(&rt).unwrap_err().contains("no recipe module named"),
        "not announced"
    );

    let announced = rt.loading_default(&m).unwrap();
    assert_eq!(announced.name(), "m");
    assert!(rt.has_module("m"), "a default loading counts as served");
    assert!(rt.awaited("m"));
    let call = {
        let rt = rt.clone();
        std::thread::spawn(move || served(&rt))
    };
    // Not a timing assertion: the call is made before or after the load,
    // and is served either way; most runs make it before.
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(rt.load_bytes_if_absent(&m).unwrap().unwrap().name, "m");
    assert!(!rt.awaited("m"), "served now: nothing to wait for");
    drop(announced);
    assert_eq!(call.join().unwrap().as_deref(), Ok("built in"));

    // A default that does not load: once its guard drops, calls of the
    // name are answered at once.
    let other = good_module("n", "1.0.0", "never");
    let announced = rt.loading_default(&other).unwrap();
    assert!(rt.has_module("n"));
    drop(announced);
    assert!(!rt.has_module("n"));
    let r = rt.call("n", "get", &[], &caller(), &mut MemTree::new(7));
    assert!(
        matches!(r, Err(wazoo_runtime::RecipeError::UnknownModule(_))),
        "{:?}",
        r.map(|_| ())
    );
}
