//! The recipe workloads (docs/RECIPES.md, docs/BUILTIN_RECIPES.md): wazoo's
//! server-side recipes (WebAssembly modules loaded with `--plugins`) against
//! kazoo's client-side ones on Apache ZooKeeper.
//!
//! * `recipe-call`: on a standalone wazoo with the `echo` module, ONE
//!   connection alternates a no-op recipe call (`echo.noop`) and a getData
//!   of a small znode, N samples each: the round trip of each and the ratio.
//!   Plus the server-side instantiate + call time of `echo.noop`, measured
//!   in this process with the server's own runtime (`wazoo::plugin::Runtime`,
//!   default configuration: pooling allocator, fresh instance per call), as
//!   runtime/tests/plugin_bench.rs does.
//! * `recipe-isolation`: on a standalone wazoo, W clients loop setData
//!   while 4 clients call a fuel-exhausting recipe (`spin`, an infinite
//!   loop built here from WAT) flat out, and with no recipe load: the
//!   writes' p50 and p99 and the ratio (target: p99 within 1.5x).
//! * `lock`: S sessions loop acquire + release on one lock path: wazoo's
//!   `lock` recipe (client handle `Lock`) on a wazoo ensemble against kazoo's
//!   `Lock` on a ZooKeeper ensemble (bench/kazoo_recipes.py, a thread and a
//!   `KazooClient` per session), and kazoo's `Lock` on the wazoo ensemble
//!   (the server's share of the difference, apart from the recipe's).
//! * `queue`: S sessions loop put + take on one queue: wazoo's `queue`
//!   recipe (`Queue`) against kazoo's `Queue`, same three pairings. Every
//!   item must be taken exactly once or still be in the queue.

mod call;
mod contend;
mod isolation;

pub use call::{recipe_call, RecipeCallRun, RecipeCallSpec};
pub use contend::{
    has_kazoo, kazoo_round, pairing, python, summarize, wazoo_round, ContendRound, ContendRun,
    ContendSpec, Contended,
};
pub use isolation::{isolation, spin_module, IsolationBlock, IsolationSpec};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use wazoo_client::{Client, ClientOptions};

/// The modules the recipe workloads load.
pub const MODULES: &[&str] = &["echo", "lock", "queue"];

/// The run keys: kazoo's recipe on ZooKeeper, wazoo's recipe on wazoo,
/// kazoo's recipe on wazoo.
pub const ZK_KAZOO: &str = "zookeeper";
pub const WAZOO: &str = "wazoo";
pub const WAZOO_KAZOO: &str = "wazoo-kazoo";

const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the compiled recipe modules (`echo.wasm`, `lock.wasm`,
/// `queue.wasm`) come from: `--recipes-dir`, else `$WAZOO_RECIPES_DIR`,
/// else scripts/build-recipes.sh builds them into `<workspace>/target/recipes`
/// (incremental: about a second when nothing changed).
pub fn find_modules(explicit: Option<PathBuf>) -> Result<PathBuf> {
    let dir = match explicit.or_else(|| std::env::var_os("WAZOO_RECIPES_DIR").map(PathBuf::from)) {
        Some(d) => d,
        None => {
            let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .expect("bench lives inside the workspace");
            let out = workspace.join("target").join("recipes");
            eprintln!(
                "building the recipe modules (scripts/build-recipes.sh {}) ...",
                out.display()
            );
            let status = Command::new("bash")
                .arg(workspace.join("scripts").join("build-recipes.sh"))
                .arg(&out)
                .stdout(Stdio::null())
                .status()
                .context("running scripts/build-recipes.sh")?;
            if !status.success() {
                bail!(
                    "scripts/build-recipes.sh failed ({status}); is the wasm32-unknown-unknown \
                     target installed? Or point --recipes-dir at built modules"
                );
            }
            out
        }
    };
    for m in MODULES {
        let p = dir.join(format!("{m}.wasm"));
        if !p.is_file() {
            bail!(
                "{} is missing (--recipes-dir {})",
                p.display(),
                dir.display()
            );
        }
    }
    std::fs::canonicalize(&dir).with_context(|| format!("resolving {}", dir.display()))
}

/// A plugins directory holding only the named modules (a wazoo member
/// compiles every module it loads at start); removed on drop.
pub struct PluginsDir(PathBuf);

impl PluginsDir {
    pub fn new(modules_dir: &Path, modules: &[&str], tag: &str) -> Result<PluginsDir> {
        let dir =
            std::env::temp_dir().join(format!("wazoo-bench-plugins-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for m in modules {
            let name = format!("{m}.wasm");
            std::fs::copy(modules_dir.join(&name), dir.join(&name))
                .with_context(|| format!("copying {name}"))?;
        }
        Ok(PluginsDir(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PluginsDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn wazoo_connect(hosts: &str) -> Result<Client> {
    let opts = ClientOptions {
        session_timeout: SESSION_TIMEOUT,
        connect_timeout: Some(Duration::from_secs(10)),
        ..Default::default()
    };
    let (c, _events) = Client::connect(hosts, opts)
        .await
        .with_context(|| format!("wazoo-client connecting to {hosts}"))?;
    Ok(c)
}
