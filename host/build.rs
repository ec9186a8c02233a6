//! Builds the recipe modules of `recipes-wasm/` for wasm32-unknown-unknown
//! and embeds them, so `wazoo dev` serves the built-in recipes from a fresh
//! checkout with one command. When the wasm target is missing (or
//! `WAZOO_NO_BUILTIN_RECIPES` is set) the binary is built without them and
//! `wazoo dev` says so. Installing the target later (`rustup target add
//! wasm32-unknown-unknown`) makes the next build run this script again and
//! embed them: it watches the toolchain's installed targets.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

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
    watch_wasm_target();
    let out = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    let modules = if env::var_os("WAZOO_NO_BUILTIN_RECIPES").is_some() {
        Vec::new()
    } else {
        build(&recipes, &target_dir(&out, repo)).unwrap_or_else(|why| {
            println!("cargo:warning=building without the built-in recipes: {why}");
            Vec::new()
        })
    };
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

/// Asks cargo to run this script again when the wasm32 target is installed,
/// updated or removed. Cargo reruns a build script only for what it names,
/// so without this a binary built before `rustup target add` keeps its
/// empty module list for good. The target lives in
/// `<sysroot>/lib/rustlib/wasm32-unknown-unknown`; rustup also rewrites
/// `<sysroot>/lib/rustlib/components` on every target or component change.
/// Watching a path that does not exist would rerun the script on every
/// build, so a missing target directory is noticed through its parent.
fn watch_wasm_target() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Some(sysroot) = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
    else {
        println!("cargo:warning=cannot ask rustc for its sysroot: a wasm32 target installed later will need `touch host/build.rs`");
        return;
    };
    let rustlib = Path::new(sysroot.trim()).join("lib").join("rustlib");
    let wasm = rustlib.join("wasm32-unknown-unknown");
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

/// Builds every member crate; returns (file name, path of the module).
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
            "wasm32-unknown-unknown",
        ])
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
        .collect();
    dirs.sort();
    for d in dirs {
        let crate_name = d.file_name().unwrap().to_string_lossy().replace('-', "_");
        let wasm = target
            .join("wasm32-unknown-unknown")
            .join("release")
            .join(format!("{crate_name}.wasm"));
        if wasm.is_file() {
            modules.push((format!("{crate_name}.wasm"), wasm));
        }
    }
    Ok(modules)
}
