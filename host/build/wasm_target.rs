//! What host/build.rs does about the `wasm32-unknown-unknown` target before
//! it builds the built-in recipes (kept apart from build.rs so that a test,
//! host/tests/build_script.rs, checks the decision without touching the
//! machine's toolchain).
//!
//! rust-toolchain.toml lists the target, but rustup (1.28 and later) adds a
//! toolchain file's targets only when it installs the toolchain: on a
//! machine whose stable was installed before, the first `cargo run` finds
//! no wasm target. So when the target is missing and rustup manages the
//! toolchain doing the build, build.rs adds it.

use std::path::PathBuf;

/// The build environment, as far as the decision goes.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// `<sysroot>/lib/rustlib/wasm32-unknown-unknown` exists.
    pub target_installed: bool,
    /// `RUSTUP_TOOLCHAIN`: set by rustup's proxies for the build they run,
    /// so present only when rustup manages the toolchain doing the build.
    pub rustup_toolchain: Option<String>,
    /// The rustup binary, if there is one.
    pub rustup: Option<PathBuf>,
    /// `WAZOO_NO_RUSTUP` is set: never change the toolchain.
    pub no_rustup: bool,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The target is there: build the recipes.
    Build,
    /// Run `RUSTUP target add --toolchain TOOLCHAIN wasm32-unknown-unknown`,
    /// then build the recipes.
    AddTarget { rustup: PathBuf, toolchain: String },
    /// Build without the recipes, for this reason (printed as a warning).
    Without(String),
}

/// The target the recipes build for.
pub const WASM_TARGET: &str = "wasm32-unknown-unknown";

pub fn plan(f: &Facts) -> Plan {
    if f.target_installed {
        return Plan::Build;
    }
    let hint = "rustup target add wasm32-unknown-unknown, or scripts/setup.sh";
    if f.no_rustup {
        return Plan::Without(format!(
            "the {WASM_TARGET} target is missing and WAZOO_NO_RUSTUP is set ({hint})"
        ));
    }
    match (&f.rustup, &f.rustup_toolchain) {
        (Some(rustup), Some(toolchain)) if !toolchain.trim().is_empty() => Plan::AddTarget {
            rustup: rustup.clone(),
            toolchain: toolchain.trim().to_string(),
        },
        (None, _) => Plan::Without(format!(
            "the {WASM_TARGET} target is missing and there is no rustup to add it ({hint})"
        )),
        (Some(_), _) => Plan::Without(format!(
            "the {WASM_TARGET} target is missing and this build's toolchain is not run by rustup (no RUSTUP_TOOLCHAIN; {hint})"
        )),
    }
}
