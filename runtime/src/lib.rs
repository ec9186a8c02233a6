//! The WebAssembly recipe runtime: wasmtime engine, module registry, compiled
//! module cache, hot reload, the guest ABI and the sandbox limits.
//!
//! Layout: `runtime` (the engine, the module registry, loading; under it
//! `runtime/limits.rs`, `runtime/linker.rs` (imports and exports checked at
//! load), `runtime/guest_imports.rs` (the host functions), `runtime/calls.rs`
//! (calls, and traps mapped to typed errors)), `recipe_engine` (the core's
//! `RecipeEngine` trait over it), `manifest` (reading and checking a module's
//! manifest section), `cache`, `reload`, `host` (the core's `RecipeHost`),
//! `failure_log` (the rate-limited WARN line of a failed call).
//!
//! What a recipe may do to the tree goes through [`RecipeHost`], which the
//! request pipeline implements against its prep view (committed state plus
//! outstanding changes): reads answer from that view, writes are staged, and
//! the staged writes become one multi txn when the step succeeds. The runtime
//! never touches the tree itself.
//!
//! Every [`Runtime::call`] and [`Runtime::on_watch`] runs in a fresh instance
//! (pooling allocator, pre-instantiated), with a fuel budget, an epoch
//! deadline, a memory cap, a cap on tree ops and on the reply size; a thread
//! can leave each call's upkeep (dropping its store, making the next
//! instance ahead) until after its replies are written ([`defer_call_upkeep`],
//! [`call_upkeep`]). A module is
//! compiled off the request path ([`Runtime::load_bytes`], [`Runtime::load_file`],
//! [`Runtime::load_dir`], or the [`PluginWatcher`]), validated (manifest, ABI
//! version, exports, imports) and swapped in atomically; calls in flight keep
//! the version they started on.
//!
//! The ABI itself (types, names, encoding) lives in [`wazoo_sdk::abi`], shared
//! with the guest SDK; see docs/RECIPES.md.

mod cache;
mod error;
pub mod failure_log;
mod host;
mod manifest;
mod recipe_engine;
mod reload;
mod runtime;

pub use error::{LoadError, RecipeError};
pub use host::{path_within, NoTree, RecipeHost};
pub use reload::{LoadReport, PluginWatcher, Submit, WatchConfig};
pub use runtime::{
    call_upkeep, call_upkeep_waiting, compile_thread_priority, defer_call_upkeep,
    lower_thread_priority, Budget, Limits, LoadingDefault, ModuleInfo, ModuleStats, Outcome,
    Runtime, RuntimeConfig,
};
pub use wazoo_sdk::abi;
pub use wazoo_sdk::abi::{
    CallerInfo, CreateMode, Manifest, NodeStat, Reply, WatchEvent, WatchRequest,
};
