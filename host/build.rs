//! Builds the recipe modules of `recipes-wasm/` for wasm32-unknown-unknown
//! and embeds them, so `wazoo dev` serves the built-in recipes from a fresh
//! checkout with one command. When the wasm target is missing and rustup
//! runs this build, it adds the target first (`rustup target add`; see
//! build/wasm_target.rs for why rust-toolchain.toml is not enough).
//! Without the target (no rustup, `WAZOO_NO_RUSTUP` set, or the add failed,
//! e.g. offline), or with `WAZOO_NO_BUILTIN_RECIPES` set, the binary is
//! built without them and `wazoo dev` says so. Installing the target later
//! makes the next build run this script again and embed them: it watches
//! the toolchain's installed targets. The test modules `echo` and `counter`
//! are not embedded (tests build them with scripts/build-recipes.sh).

#[path = "build/wasm_target.rs"]
mod wasm_target;

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wasm_target::{plan, Facts, Plan, WASM_TARGET};

/// Crates of recipes-wasm/ that are not built-in recipes: the SDK's test
/// modules, which tests build and deploy themselves.
const NOT_BUILTIN: &[&str] = &["echo", "counter"];

/// How long `rustup target add` may take (a download of some 20 MB).
const RUSTUP_TIMEOUT: Duration = Duration::from_secs(600);

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let repo = manifest.parent().expect("host/ is inside the repository");
    let recipes = repo.join("recipes-wasm");
    let sdk = repo.join("sdk");
    println!("cargo:rerun-if-changed={}", recipes.display());
    println!("cargo:rerun-if-changed={}", sdk.join("src").display());
    println!(
        "cargo:rerun-if-changed={}",
        sdk.join("Cargo.toml").display()
    );
    println!("cargo:rerun-if-env-changed=WAZOO_NO_BUILTIN_RECIPES");
    println!("cargo:rerun-if-env-changed=WAZOO_NO_RUSTUP");
    let out = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    let rustlib = rustlib();
    let modules = if env::var_os("WAZOO_NO_BUILTIN_RECIPES").is_some() {
        Vec::new()
    } else {
        ensure_target(rustlib.as_deref(), &out)
            .and_then(|()| build(&recipes, &target_dir(&out, repo)))
            .unwrap_or_else(|why| {
                println!("cargo:warning=building without the built-in recipes: {why}");
                Vec::new()
            })
    };
    // After a target add, so that the target just added is what is watched.
    watch_wasm_target(rustlib.as_deref());
    let mut code = String::from("/// The built-in recipe modules: (file name, bytes).\n");
    code.push_str("pub const BUILTIN_RECIPES: &[(&str, &[u8])] = &[\n");
    for (name, path) in &modules {
        let _ = writeln!(
            code,
            "    ({name:?}, include_bytes!({:?})),",
            path.display().to_string()
        );
    }
    code.push_str("];\n");
    std::fs::write(out.join("builtin_recipes.rs"), code).expect("write builtin_recipes.rs");
}

/// `<sysroot>/lib/rustlib` of the rustc doing this build, if rustc says.
fn rustlib() -> Option<PathBuf> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())?;
    Some(Path::new(sysroot.trim()).join("lib").join("rustlib"))
}

/// Makes sure the wasm target is installed, adding it with rustup when
/// rustup runs this build ([`wasm_target::plan`]); `Err` says why the
/// recipes cannot be built. Without a sysroot to look in, the build is
/// tried (and says what failed).
fn ensure_target(rustlib: Option<&Path>, out: &Path) -> Result<(), String> {
    let facts = Facts {
        target_installed: rustlib.is_none_or(|r| r.join(WASM_TARGET).is_dir()),
        rustup_toolchain: env::var("RUSTUP_TOOLCHAIN").ok(),
        rustup: find_rustup(),
        no_rustup: env::var_os("WAZOO_NO_RUSTUP").is_some(),
    };
    match plan(&facts) {
        Plan::Build => Ok(()),
        Plan::Without(why) => Err(why),
        Plan::AddTarget { rustup, toolchain } => {
            add_target(&rustup, &toolchain, &out.join("rustup-target-add.log"))?;
            println!(
                "cargo:warning=added the {WASM_TARGET} target to the Rust toolchain {toolchain} (rustup target add), to embed the built-in recipes"
            );
            Ok(())
        }
    }
}

/// `rustup` on PATH, else in `$CARGO_HOME/bin` or `~/.cargo/bin`.
fn find_rustup() -> Option<PathBuf> {
    let on_path = env::var_os("PATH")
        .map(|p| {
            env::split_paths(&p)
                .map(|d| d.join("rustup"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let homes = [
        env::var_os("CARGO_HOME").map(PathBuf::from),
        env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")),
    ];
    on_path
        .into_iter()
        .chain(
            homes
                .into_iter()
                .flatten()
                .map(|h| h.join("bin").join("rustup")),
        )
        .find(|p| p.is_file())
}

/// Runs `rustup target add`, bounded by [`RUSTUP_TIMEOUT`], its output in
/// `log` (this script's stdout is for cargo).
fn add_target(rustup: &Path, toolchain: &str, log: &Path) -> Result<(), String> {
    let file =
        std::fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let mut child = Command::new(rustup)
        .args(["target", "add", "--toolchain", toolchain, WASM_TARGET])
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", rustup.display()))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if started.elapsed() > RUSTUP_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`rustup target add {WASM_TARGET}` took more than {} s",
                    RUSTUP_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("waiting for rustup: {e}")),
        }
    };
    if status.success() {
        return Ok(());
    }
    let said = std::fs::read_to_string(log).unwrap_or_default();
    let last = said
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(format!(
        "`rustup target add --toolchain {toolchain} {WASM_TARGET}` failed ({status}): {}",
        last.trim()
    ))
}

/// Asks cargo to run this script again when the wasm32 target is installed,
/// updated or removed. Cargo reruns a build script only for what it names,
/// so without this a binary built before `rustup target add` keeps its
/// empty module list for good. The target lives in
/// `<sysroot>/lib/rustlib/wasm32-unknown-unknown`; rustup also rewrites
/// `<sysroot>/lib/rustlib/components` on every target or component change.
/// Watching a path that does not exist would rerun the script on every
/// build, so a missing target directory is noticed through its parent.
fn watch_wasm_target(rustlib: Option<&Path>) {
    let Some(rustlib) = rustlib else {
        println!("cargo:warning=cannot ask rustc for its sysroot: a wasm32 target installed later will need `touch host/build.rs`");
        return;
    };
    let wasm = rustlib.join(WASM_TARGET);
    let components = rustlib.join("components");
    if wasm.is_dir() {
        println!("cargo:rerun-if-changed={}", wasm.display());
    }
    if components.is_file() {
        println!("cargo:rerun-if-changed={}", components.display());
    } else if rustlib.is_dir() {
        println!("cargo:rerun-if-changed={}", rustlib.display());
    }
}

/// `target/recipes-build` of the workspace, shared with
/// scripts/build-recipes.sh (OUT_DIR is `<target>/<profile>/build/<pkg>/out`).
fn target_dir(out: &Path, repo: &Path) -> PathBuf {
    out.ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|b| b.parent())
        .and_then(|profile| profile.parent())
        .map(|t| t.join("recipes-build"))
        .unwrap_or_else(|| repo.join("target").join("recipes-build"))
}

/// Builds every member crate but the test modules ([`NOT_BUILTIN`]);
/// returns (file name, path of the module).
fn build(recipes: &Path, target: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        // From recipes-wasm/, so its .cargo/config.toml (link flags) applies.
        .current_dir(recipes)
        .args([
            "build",
            "--quiet",
            "--release",
            "--target",
            WASM_TARGET,
            "--workspace",
        ])
        .args(NOT_BUILTIN.iter().flat_map(|n| ["--exclude", n]))
        .arg("--manifest-path")
        .arg(recipes.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target)
        // The outer build's flags are for the host, not for wasm.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(
            "cargo build of recipes-wasm/ failed (is the wasm32-unknown-unknown target installed? scripts/setup.sh installs it)"
                .into(),
        );
    }
    let mut modules = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(recipes)
        .map_err(|e| format!("cannot list {}: {e}", recipes.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .filter(|p| {
            !NOT_BUILTIN
                .iter()
                .any(|n| p.file_name().is_some_and(|f| f == *n))
        })
        .collect();
    dirs.sort();
    for d in dirs {
        let crate_name = d.file_name().unwrap().to_string_lossy().replace('-', "_");
        let wasm = target
            .join(WASM_TARGET)
            .join("release")
            .join(format!("{crate_name}.wasm"));
        if wasm.is_file() {
            modules.push((format!("{crate_name}.wasm"), wasm));
        }
    }
    Ok(modules)
}
