//! wazoo: a ZooKeeper-compatible coordination server. This crate is the
//! binary and its I/O shell; the logic it drives lives in `wazoo-core`,
//! `wazoo-zab` and `wazoo-runtime` (see docs/ARCHITECTURE.md's crate map).
//!
//! Layout:
//! - [`member`]: the I/O shell of one standalone member: recovery, the core
//!   loop, the group-commit log, snapshots and purges.
//! - [`ensemble_member`]: the same for a member of an ensemble, driving
//!   ZAB's `Peer` next to the pipeline.
//! - [`quorum`]: the links between members.
//! - [`net`]: the client port (framing, backpressure, four-letter words).
//! - [`tls`]: TLS for the secure client port and the quorum links.
//! - [`admin`]: four-letter word answers.
//! - [`audit`]: the audit log file (`audit.enable`).
//! - [`backup`]: `wazoo backup` / `wazoo restore`, and a member's side of
//!   a backup (a consistent snapshot sent over the client port).
//! - [`metrics`]: the Prometheus endpoint.
//! - [`config`]: reading zoo.cfg.
//! - [`dev`]: `wazoo dev`'s playground ensemble (its members' configs).
//! - [`logging`]: reading `WAZOO_LOG`.
//! - [`import`]: `wazoo import` (an Apache ZooKeeper data directory) and
//!   the installing of a snapshot that it shares with `wazoo restore`.
//! - [`builtin`]: the built-in recipe modules embedded by build.rs.
//! - [`core`], [`plugin`]: re-exports of the crates that used to be these
//!   modules, so their old paths keep working.

pub mod admin;
pub mod audit;
pub mod backup;
pub mod config;
pub mod dev;
mod driver;
pub mod ensemble_member;
pub mod http;
pub mod import;
pub mod logging;
pub mod member;
pub mod metrics;
pub mod net;
pub mod quorum;
mod recipe_pool;
pub mod recipe_run;
pub mod sasl;
pub mod tls;
mod zk_observer;

/// The deterministic core, `wazoo-core`, with ZAB (`wazoo-zab`) at
/// `core::zab`. Keeps the old paths (`crate::core::server::Server`,
/// `wazoo::core::zab::Peer`) working now that both are crates of their own.
pub mod core {
    pub use wazoo_core::*;
    pub use wazoo_zab as zab;
}

/// The wasm recipe runtime, `wazoo-runtime`. Keeps the old path
/// (`wazoo::plugin::Runtime`) working now that it is a crate of its own.
pub use wazoo_runtime as plugin;

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
