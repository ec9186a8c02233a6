//! wazoo: a ZooKeeper-compatible coordination server.
//!
//! Layout:
//! - [`core`]: the deterministic core — tree, sessions, watches, ACLs and
//!   the request pipeline — with no I/O, clocks or randomness.
//! - [`member`]: the I/O shell of one member: recovery, the core loop,
//!   the group-commit log, snapshots and purges.
//! - [`net`]: the client port (framing, backpressure, four-letter words).
//! - [`admin`]: four-letter word answers.
//! - [`config`]: reading zoo.cfg.
//! - [`logging`]: reading `WAZOO_LOG`.

pub mod admin;
pub mod config;
pub mod core;
pub mod ensemble_member;
pub mod logging;
pub mod member;
pub mod metrics;
pub mod net;
pub mod plugin;
pub mod quorum;

/// The recipe modules of `recipes-wasm/`, built and embedded by build.rs
/// (empty when the wasm target was missing at build time).
pub mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_recipes.rs"));

    /// Writes the built-in modules into `dir` (atomically, only those whose
    /// bytes differ) and returns how many there are.
    pub fn install(dir: &std::path::Path) -> std::io::Result<usize> {
        std::fs::create_dir_all(dir)?;
        for (name, bytes) in BUILTIN_RECIPES {
            let path = dir.join(name);
            if std::fs::read(&path).is_ok_and(|b| b == *bytes) {
                continue;
            }
            // A watched directory must never see half a module.
            let tmp = dir.join(format!(".{name}.tmp"));
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, &path)?;
        }
        Ok(BUILTIN_RECIPES.len())
    }
}
