//! The engine, the module registry and loading. The per-call sandbox is
//! in the submodules: `limits` (what a call may use), `linker` (what a
//! module may import and must export), `guest_imports` (the host
//! functions), `calls` (running a call, and its traps as typed errors).

use super::cache::{content_hash, hex, ContentHash, ModuleCache};
use super::error::{LoadError, RecipeError};
use super::manifest;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};
use wasmtime::{
    Config, Engine, ExternType, InstanceAllocationStrategy, InstancePre, Linker, ModuleExport,
    PoolingAllocationConfig,
};
use wazoo_core::recipe::{DeployedModule, ModuleCounters, RecipeCounters};
use wazoo_sdk::abi::{exports, Manifest, Reply};

mod calls;
mod guest_imports;
mod limits;
mod linker;

use guest_imports::CallState;
use linker::{build_linker, check_imports, export_func};

pub use calls::{call_upkeep, call_upkeep_waiting, defer_call_upkeep};
pub use limits::{Limits, RuntimeConfig};

/// Bytes of each pooled linear memory kept resident (reset with memset)
/// between instances: a Rust guest's stack and first heap pages.
const KEEP_RESIDENT: usize = 256 << 10;

/// What a loaded module is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleInfo {
    pub name: String,
    pub version: String,
    /// SHA-256 of the module's bytes, hex.
    pub hash: String,
    pub abi: (u16, u16),
    pub methods: Vec<String>,
    pub prefixes: Vec<String>,
    pub on_watch: bool,
    /// The file it was loaded from, if any.
    pub source: Option<PathBuf>,
    pub loaded_at: SystemTime,
}

/// A loaded module and its counters (kept across reloads of the same name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleStats {
    pub info: ModuleInfo,
    pub calls: u64,
    /// Failed calls: an `Err` or a `Reply::Error`.
    pub errors: u64,
    pub fuel_used: u64,
    /// The same in full: failed calls by kind, and the latencies.
    pub counters: ModuleCounters,
    /// How many versions were loaded under this name (1 = never reloaded).
    pub loads: u64,
}

/// A finished call or callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What the recipe answered. On `Reply::Error` the caller discards what
    /// the call staged, exactly as on `Err`.
    pub reply: Reply,
    pub fuel_used: u64,
    /// Tree ops the call made.
    pub ops: usize,
    /// The version of the module that answered.
    pub version: String,
    /// The hash of the module that answered (hex).
    pub hash: String,
    /// The instance's linear memory at its largest, in bytes. A call that
    /// never grew memory reports the module's initial size.
    pub memory_bytes: usize,
}

#[derive(Default)]
struct Counters {
    /// Calls, errors by kind, fuel and latencies (ensemble-wide on the
    /// leader: seeded from the committed counters, see
    /// [`Runtime::seed_counters`]).
    detail: Mutex<ModuleCounters>,
    loads: AtomicU64,
}

struct Loaded {
    manifest: Manifest,
    hash: ContentHash,
    hash_hex: String,
    source: Option<PathBuf>,
    loaded_at: SystemTime,
    pre: InstancePre<CallState>,
    memory: ModuleExport,
    alloc: ModuleExport,
    call: ModuleExport,
    on_watch: Option<ModuleExport>,
    counters: Arc<Counters>,
    /// Whether the compiled code came from the cache.
    cached: bool,
    /// Whether an instance may be made ahead of its call (no start
    /// function: instantiating runs no guest code; see
    /// `calls::defer_call_upkeep`).
    warmable: bool,
}

impl Loaded {
    fn info(&self) -> ModuleInfo {
        ModuleInfo {
            on_watch: self.on_watch.is_some(),
            source: self.source.clone(),
            loaded_at: self.loaded_at,
            ..ModuleInfo::of(&self.manifest, self.hash_hex.clone())
        }
    }
}

impl ModuleInfo {
    /// What `manifest` declares, for the module of content hash `hash`
    /// (hex), loaded now from no file.
    fn of(manifest: &Manifest, hash: String) -> ModuleInfo {
        ModuleInfo {
            name: manifest.name.clone(),
            version: manifest.version.clone(),
            hash,
            abi: manifest.abi,
            methods: manifest.methods.clone(),
            prefixes: manifest.prefixes.clone(),
            on_watch: manifest.on_watch,
            source: None,
            loaded_at: SystemTime::now(),
        }
    }
}

/// Whether the module `found_name` of hash `found_hash` is what was
/// deployed as `name` at `sha256`: a module is never served under another
/// name, or at other bytes, than the ones deployed.
fn check_deployed(
    name: &str,
    sha256: &str,
    found_name: &str,
    found_hash: &str,
) -> Result<(), String> {
    if found_name != name || found_hash != sha256 {
        return Err(format!(
            "deployed as {name:?} ({sha256}), the module is {found_name:?} ({found_hash})"
        ));
    }
    Ok(())
}

/// The deployed modules as the pipeline installed them.
#[derive(Default)]
struct DeployedSeen {
    /// name -> sha256 (hex) served now.
    current: HashMap<String, String>,
    /// name -> who deployed the module served now (`client`, or
    /// `LABEL:FILE` for a plugins directory's file).
    sources: HashMap<String, String>,
    /// Every (name, sha256) installed since the runtime started, with the
    /// number of the last install of it; at most [`DEPLOYED_SEEN_MAX`]
    /// (forgotten all at once past it: the watcher then submits what it
    /// still waits for again, which is no txn if it serves).
    seen: HashMap<(String, String), u64>,
    /// Installs so far.
    installs: u64,
}

const DEPLOYED_SEEN_MAX: usize = 4096;

/// A deployed module waiting for the compile worker, or compiling there.
struct Pending {
    /// The install's number: a later install of the name replaces it.
    n: u64,
    /// What it is (from its manifest), listed while it compiles.
    info: ModuleInfo,
    /// The sha256 it is deployed at and its bytes, until the worker takes
    /// them (`None`: compiling).
    job: Option<(String, Vec<u8>)>,
}

/// Refused modules whose reason is remembered (by content hash), so that
/// validating one again answers at once (see [`Runtime::validates_quickly`]).
const REFUSED_KEPT: usize = 64;

/// The recipe runtime: one engine, a registry of loaded modules by name, the
/// compiled-module cache and the epoch ticker. Cheap to clone (shared inside);
/// `Send + Sync`: calls may run on any number of threads at once.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
    /// A tighter fuel and deadline for the calls of this handle (see
    /// [`Runtime::within`]); `None`: the configured limits.
    budget: Option<Budget>,
}

/// A fuel and deadline tighter than the configured limits, for a first
/// try at a call on a thread that must not be held long (the member's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub fuel: u64,
    pub deadline: Duration,
    /// Bytes of one tree batch (request or response) or notification.
    pub message_bytes: usize,
}

struct Inner {
    engine: Engine,
    linker: Linker<CallState>,
    limits: Limits,
    epoch_tick: Duration,
    cache: ModuleCache,
    modules: RwLock<HashMap<String, Arc<Loaded>>>,
    counters: Mutex<HashMap<String, Arc<Counters>>>,
    /// Calls and callbacks of a module not served (the counters' entry
    /// [`UNSERVED`](wazoo_core::recipe::UNSERVED)).
    unserved: Mutex<ModuleCounters>,
    /// What the pipeline told this runtime to serve as deployed modules
    /// (`RecipeEngine::install`), for the plugins directory's watcher.
    deployed: Mutex<DeployedSeen>,
    /// Deployed modules being compiled on a thread of their own (see
    /// [`Runtime::install_deployed`]), by name. A call of such a name
    /// waits for it (`pending_done`).
    pending: Mutex<HashMap<String, Pending>>,
    pending_done: Condvar,
    /// Default modules (a member's built-in recipes) being loaded in the
    /// background, by name (how many loads of it are under way): a call of
    /// such a name that no module serves waits for them (`defaults_done`).
    defaults: Mutex<HashMap<String, usize>>,
    defaults_done: Condvar,
    installs: AtomicU64,
    /// Whether the compile worker runs (read and written with `pending`
    /// locked): one thread, at a lower priority, compiles the pending
    /// modules one after another and ends when none is left.
    compiler: AtomicBool,
    /// The reasons the last modules validated were refused, newest last.
    refused: Mutex<std::collections::VecDeque<(ContentHash, String)>>,
    ticker: Mutex<Option<(Arc<AtomicBool>, JoinHandle<()>)>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some((stop, handle)) = self.ticker.lock().unwrap().take() {
            stop.store(true, Ordering::Relaxed);
            let _ = handle.join();
        }
    }
}

impl Runtime {
    /// Builds the engine (fuel, epoch interruption, pooling allocator sized
    /// from the config) and starts the epoch ticker.
    pub fn new(config: RuntimeConfig) -> anyhow::Result<Runtime> {
        let limits = config.limits.clone();
        anyhow::ensure!(
            limits.memory_bytes >= 64 << 10,
            "memory cap below one wasm page"
        );
        let mut c = Config::new();
        c.consume_fuel(true);
        c.epoch_interruption(true);
        c.max_wasm_stack(config.max_wasm_stack);
        let mut pool = PoolingAllocationConfig::new();
        let n = config.max_instances.max(1);
        pool.total_core_instances(n);
        pool.total_memories(n);
        pool.total_tables(n);
        pool.max_memories_per_module(1);
        pool.max_tables_per_module(4);
        pool.max_memory_size(limits.memory_bytes.next_multiple_of(64 << 10));
        // Reset a slot's first pages with memset rather than madvise, so the
        // next instance does not page-fault on its stack and heap (a fresh
        // instance per call makes this the hot path).
        pool.linear_memory_keep_resident(KEEP_RESIDENT);
        pool.table_keep_resident(64 << 10);
        // Where the kernel has PAGEMAP_SCAN (Linux 6.7+), reset only the
        // pages a call dirtied instead of all of the resident part.
        pool.pagemap_scan(wasmtime::Enabled::Auto);
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine =
            Engine::new(&c).map_err(|e| anyhow::anyhow!("cannot create the wasm engine: {e:#}"))?;
        let linker = build_linker(&engine)?;
        let cache = ModuleCache::new(&engine, config.cache_dir.clone());

        let stop = Arc::new(AtomicBool::new(false));
        let tick = config.epoch_tick.max(Duration::from_millis(1));
        let handle = {
            let engine = engine.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("wazoo-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(tick);
                        engine.increment_epoch();
                    }
                })?
        };
        Ok(Runtime {
            inner: Arc::new(Inner {
                engine,
                linker,
                limits,
                epoch_tick: tick,
                cache,
                modules: RwLock::new(HashMap::new()),
                counters: Mutex::new(HashMap::new()),
                unserved: Mutex::default(),
                deployed: Mutex::default(),
                pending: Mutex::default(),
                pending_done: Condvar::new(),
                defaults: Mutex::default(),
                defaults_done: Condvar::new(),
                installs: AtomicU64::new(0),
                compiler: AtomicBool::new(false),
                refused: Mutex::default(),
                ticker: Mutex::new(Some((stop, handle))),
            }),
            budget: None,
        })
    }

    /// A handle whose calls run within `budget` (and the limits): one that
    /// needs more fails with `FuelExhausted`, `DeadlineExceeded` or
    /// `TooLarge` (a batch or notification past the budget's bytes) and is
    /// not counted (no call, no error, no failure logged), so it can run
    /// again with the full limits.
    pub fn within(&self, budget: Budget) -> Runtime {
        Runtime {
            inner: Arc::clone(&self.inner),
            budget: Some(budget),
        }
    }

    /// Whether `e` is a call of a [`Runtime::within`] handle running out of
    /// its budget.
    pub fn over_budget(&self, e: &RecipeError) -> bool {
        let full = self.inner.limits.max_message_bytes;
        self.budget.is_some()
            && match e {
                RecipeError::FuelExhausted { .. } | RecipeError::DeadlineExceeded { .. } => true,
                RecipeError::TooLarge { limit, .. } => *limit < full,
                _ => false,
            }
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Validates, compiles (or takes from the cache) and swaps in a module
    /// under its manifest's name. On error nothing changes. Call it off the
    /// request path: compiling takes tens to hundreds of milliseconds.
    pub fn load_bytes(&self, bytes: &[u8]) -> Result<ModuleInfo, LoadError> {
        self.load(bytes, None)
    }

    /// [`load_bytes`](Self::load_bytes) of a file, remembered as the module's source.
    pub fn load_file(&self, path: &Path) -> Result<ModuleInfo, LoadError> {
        let bytes =
            std::fs::read(path).map_err(|e| LoadError::Io(format!("{}: {e}", path.display())))?;
        self.load(&bytes, Some(path.to_path_buf()))
    }

    /// Validates and compiles a module (or takes it from the cache) as
    /// [`load_bytes`](Self::load_bytes) does, without swapping it in.
    pub fn validate_bytes(&self, bytes: &[u8]) -> Result<ModuleInfo, LoadError> {
        self.prepare(bytes, None).map(|l| l.info())
    }

    pub(crate) fn load(
        &self,
        bytes: &[u8],
        source: Option<PathBuf>,
    ) -> Result<ModuleInfo, LoadError> {
        let started = Instant::now();
        let loaded = self.prepare(bytes, source)?;
        let cached = loaded.cached;
        self.swap_in(loaded, started, cached)
    }

    fn prepare(&self, bytes: &[u8], source: Option<PathBuf>) -> Result<Arc<Loaded>, LoadError> {
        self.prepare_hashed(bytes, content_hash(bytes), source)
    }

    /// [`prepare`](Self::prepare) for a caller that hashed `bytes` already.
    fn prepare_hashed(
        &self,
        bytes: &[u8],
        hash: ContentHash,
        source: Option<PathBuf>,
    ) -> Result<Arc<Loaded>, LoadError> {
        // The manifest first: nothing is compiled for a module we would refuse.
        let manifest = manifest::read_manifest(bytes)?;
        let warmable = !manifest::has_start_function(bytes)?;
        let (module, cached) = self
            .inner
            .cache
            .get_or_compile(&self.inner.engine, bytes, &hash)?;
        check_imports(&module)?;
        let memory = match module.get_export(exports::MEMORY) {
            Some(ExternType::Memory(mt)) if !mt.is_64() && !mt.is_shared() => {
                module.get_export_index(exports::MEMORY)
            }
            Some(other) => {
                return Err(LoadError::BadExport {
                    name: exports::MEMORY.into(),
                    expected: "a 32-bit unshared memory".into(),
                    found: format!("{other:?}"),
                })
            }
            None => None,
        }
        .ok_or_else(|| LoadError::MissingExport {
            name: exports::MEMORY.into(),
            expected: "memory".into(),
        })?;
        let alloc =
            export_func(&module, exports::ALLOC, "(i32) -> (i32)", true)?.expect("required");
        let call =
            export_func(&module, exports::CALL, "(i32, i32) -> (i64)", true)?.expect("required");
        let on_watch = export_func(&module, exports::ON_WATCH, "(i32, i32) -> (i64)", false)?;
        export_func(&module, exports::DEALLOC, "(i32, i32) -> ()", false)?;
        if manifest.on_watch && on_watch.is_none() {
            return Err(LoadError::MissingOnWatch);
        }
        let pre = self
            .inner
            .linker
            .instantiate_pre(&module)
            .map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        let counters = self
            .inner
            .counters
            .lock()
            .unwrap()
            .entry(manifest.name.clone())
            .or_default()
            .clone();
        Ok(Arc::new(Loaded {
            hash_hex: hex(&hash),
            hash,
            source,
            loaded_at: SystemTime::now(),
            pre,
            memory,
            alloc,
            call,
            on_watch,
            counters,
            manifest,
            cached,
            warmable,
        }))
    }

    fn swap_in(
        &self,
        loaded: Arc<Loaded>,
        started: Instant,
        cached: bool,
    ) -> Result<ModuleInfo, LoadError> {
        let info = loaded.info();
        let old = self
            .inner
            .modules
            .write()
            .unwrap()
            .insert(info.name.clone(), loaded.clone());
        loaded.counters.loads.fetch_add(1, Ordering::Relaxed);
        match old {
            Some(old) if old.hash == loaded.hash => {
                tracing::debug!(module = %info.name, "module reloaded unchanged")
            }
            Some(old) => tracing::info!(
                module = %info.name, from = %old.manifest.version, to = %info.version, hash = %info.hash,
                cached, elapsed_ms = started.elapsed().as_millis() as u64, "recipe module replaced"
            ),
            None => tracing::info!(
                module = %info.name, version = %info.version, hash = %info.hash,
                cached, elapsed_ms = started.elapsed().as_millis() as u64, "recipe module loaded"
            ),
        }
        Ok(info)
    }

    /// Loads a module only if none of its name is loaded when it is ready
    /// to swap in (compiling happens first, outside the lock): `Ok(None)`
    /// when one was, and nothing changes. For defaults (the built-in
    /// recipes) that must never replace a module deployed or loaded from a
    /// file meanwhile.
    pub fn load_bytes_if_absent(&self, bytes: &[u8]) -> Result<Option<ModuleInfo>, LoadError> {
        // Reading the manifest is cheap; compiling is not.
        let name = manifest::read_manifest(bytes)?.name;
        // A deployed module of the name compiling counts as served.
        if self.is_pending(&name) || self.inner.modules.read().unwrap().contains_key(&name) {
            return Ok(None);
        }
        let loaded = self.prepare(bytes, None)?;
        let info = loaded.info();
        {
            let pending = self.inner.pending.lock().unwrap();
            let mut mods = self.inner.modules.write().unwrap();
            if pending.contains_key(&info.name) || mods.contains_key(&info.name) {
                return Ok(None);
            }
            mods.insert(info.name.clone(), loaded.clone());
        }
        loaded.counters.loads.fetch_add(1, Ordering::Relaxed);
        Ok(Some(info))
    }

    /// Announces the default module of `bytes` (by its manifest's name;
    /// reading it is cheap) before it is loaded in the background with
    /// [`Runtime::load_bytes_if_absent`]: until the returned guard drops, a
    /// call of that name that no module serves waits for it, as one of a
    /// deployed module compiling does, instead of finding it unknown; the
    /// pipeline counts the name as served ([`Runtime::awaited`]) and runs
    /// such a call off the member's thread. The loader drops the guard
    /// once the load is done, loaded or not (also if it panics).
    pub fn loading_default(&self, bytes: &[u8]) -> Result<LoadingDefault, LoadError> {
        let name = manifest::read_manifest(bytes)?.name;
        *self
            .inner
            .defaults
            .lock()
            .unwrap()
            .entry(name.clone())
            .or_default() += 1;
        Ok(LoadingDefault {
            runtime: self.clone(),
            name,
        })
    }

    /// Whether a call of `name` is to wait for a module that is not served
    /// yet: a deployed one compiling ([`Runtime::is_pending`]) or an
    /// announced default loading ([`Runtime::loading_default`]).
    pub fn awaited(&self, name: &str) -> bool {
        self.is_pending(name) || self.default_loading(name)
    }

    /// Whether a default of `name` is loading and no module serves the name.
    fn default_loading(&self, name: &str) -> bool {
        self.inner.defaults.lock().unwrap().contains_key(name)
            && !self.inner.modules.read().unwrap().contains_key(name)
    }

    /// Unloads a module; calls in flight finish on it. Returns whether it was loaded.
    pub fn unload(&self, name: &str) -> bool {
        let removed = self.inner.modules.write().unwrap().remove(name).is_some();
        if removed {
            self.inner.counters.lock().unwrap().remove(name);
            tracing::info!(module = name, "recipe module unloaded");
        }
        removed
    }

    /// Unloads the modules loaded from `path`; returns their names.
    pub fn unload_source(&self, path: &Path) -> Vec<String> {
        let names: Vec<String> = {
            let mods = self.inner.modules.read().unwrap();
            mods.values()
                .filter(|m| m.source.as_deref() == Some(path))
                .map(|m| m.manifest.name.clone())
                .collect()
        };
        names
            .into_iter()
            .filter(|n| self.unload_if_source(n, path))
            .collect()
    }

    pub(crate) fn unload_if_source(&self, name: &str, path: &Path) -> bool {
        let mut mods = self.inner.modules.write().unwrap();
        if mods
            .get(name)
            .is_some_and(|m| m.source.as_deref() == Some(path))
        {
            mods.remove(name);
            drop(mods);
            self.inner.counters.lock().unwrap().remove(name);
            tracing::info!(module = name, source = %path.display(), "recipe module unloaded");
            true
        } else {
            false
        }
    }

    pub fn module(&self, name: &str) -> Option<ModuleInfo> {
        self.inner
            .modules
            .read()
            .unwrap()
            .get(name)
            .map(|m| m.info())
    }

    /// Every loaded module with its counters, sorted by name.
    pub fn stats(&self) -> Vec<ModuleStats> {
        let mods: Vec<Arc<Loaded>> = self
            .inner
            .modules
            .read()
            .unwrap()
            .values()
            .cloned()
            .collect();
        let mut out: Vec<ModuleStats> = mods
            .iter()
            .map(|m| ModuleStats {
                info: m.info(),
                counters: m.counters.detail.lock().unwrap().clone(),
                calls: 0,
                errors: 0,
                fuel_used: 0,
                loads: m.counters.loads.load(Ordering::Relaxed),
            })
            .map(|mut s: ModuleStats| {
                s.calls = s.counters.calls;
                s.errors = s.counters.errors_total();
                s.fuel_used = s.counters.fuel;
                s
            })
            .collect();
        // A module compiling is listed as what it will serve (calls of its
        // name wait for it).
        for (name, p) in self.inner.pending.lock().unwrap().iter() {
            let loads = match out.iter().position(|s| &s.info.name == name) {
                Some(i) => out.swap_remove(i).loads,
                None => 0,
            };
            let counters = self
                .inner
                .counters
                .lock()
                .unwrap()
                .get(name)
                .map(|c| c.detail.lock().unwrap().clone())
                .unwrap_or_default();
            out.push(ModuleStats {
                info: p.info.clone(),
                calls: counters.calls,
                errors: counters.errors_total(),
                fuel_used: counters.fuel,
                counters,
                loads,
            });
        }
        out.sort_by(|a, b| a.info.name.cmp(&b.info.name));
        out
    }

    /// The counters of calls and callbacks of modules not served.
    pub fn unserved_counters(&self) -> ModuleCounters {
        self.inner.unserved.lock().unwrap().clone()
    }

    /// Counts a call or callback that found no module: it failed before
    /// any module ran (kind `unknown_module`).
    pub(crate) fn count_unserved(&self, e: &RecipeError) {
        if matches!(e, RecipeError::UnknownModule(_)) {
            self.inner
                .unserved
                .lock()
                .unwrap()
                .record(0, 0, Some(e.kind()));
        }
    }

    /// Goes on counting from `counters` (the ensemble's committed figures,
    /// when this member becomes the leader): each module's counters are
    /// set to them, those of a module not named there are kept.
    pub fn seed_counters(&self, counters: &RecipeCounters) {
        let mut all = self.inner.counters.lock().unwrap();
        for (name, c) in counters {
            if name == wazoo_core::recipe::UNSERVED {
                *self.inner.unserved.lock().unwrap() = c.clone();
                continue;
            }
            *all.entry(name.clone()).or_default().detail.lock().unwrap() = c.clone();
        }
    }

    /// The pipeline installed (`Some(sha256)`) or removed (`None`) the
    /// deployed module `name`.
    pub(crate) fn note_deployed(&self, name: &str, module: Option<&DeployedModule>) {
        let mut d = self.inner.deployed.lock().unwrap();
        match module {
            Some(m) => {
                if d.seen.len() >= DEPLOYED_SEEN_MAX {
                    d.seen.clear();
                }
                d.installs += 1;
                let n = d.installs;
                d.seen.insert((name.to_string(), m.sha256.clone()), n);
                d.sources.insert(name.to_string(), m.source.clone());
                d.current.insert(name.to_string(), m.sha256.clone())
            }
            None => {
                d.sources.remove(name);
                d.current.remove(name)
            }
        };
    }

    /// The deployed modules this member serves whose source starts with
    /// `prefix`: (name, sha256, source), by name.
    pub(crate) fn deployed_from(&self, prefix: &str) -> Vec<(String, String, String)> {
        let d = self.inner.deployed.lock().unwrap();
        let mut out: Vec<(String, String, String)> = d
            .sources
            .iter()
            .filter(|(_, source)| source.starts_with(prefix))
            .filter_map(|(name, source)| {
                let sha = d.current.get(name)?;
                Some((name.clone(), sha.clone(), source.clone()))
            })
            .collect();
        out.sort();
        out
    }

    /// The sha256 of the deployed module `name` this member serves (the
    /// leader: including deploys in flight).
    pub fn deployed_hash(&self, name: &str) -> Option<String> {
        self.inner
            .deployed
            .lock()
            .unwrap()
            .current
            .get(name)
            .cloned()
    }

    /// How many deployed modules were installed so far (see
    /// [`Runtime::deployed_since`]).
    pub(crate) fn deploy_count(&self) -> u64 {
        self.inner.deployed.lock().unwrap().installs
    }

    /// Whether `name` at `sha256` serves now, or was installed after the
    /// first `count` installs.
    pub(crate) fn deployed_since(&self, name: &str, sha256: &str, count: u64) -> bool {
        let d = self.inner.deployed.lock().unwrap();
        d.current.get(name).is_some_and(|s| s == sha256)
            || d.seen
                .get(&(name.to_string(), sha256.to_string()))
                .is_some_and(|&n| n > count)
    }

    /// Makes the deployed `module` serve under `name` (`None`: nothing).
    /// A module compiled already (in memory) swaps in now; any other is
    /// compiled (or read from the disk cache) on a thread of its own, so
    /// the caller (the member's thread, applying a deploy) is never held
    /// by the compiler, and swaps in when ready unless another install of
    /// the name came first. Until then the name is pending: a call of it
    /// waits for the module ([`Runtime::get`]), so a call that comes after
    /// the install runs the installed version, never the one before.
    pub(crate) fn install_deployed(
        &self,
        name: &str,
        module: Option<(&[u8], &str)>,
    ) -> Result<(), String> {
        let mut pending = self.inner.pending.lock().unwrap();
        // This install replaces any still compiling.
        if pending.remove(name).is_some() {
            self.inner.pending_done.notify_all();
        }
        let Some((bytes, sha256)) = module else {
            drop(pending);
            self.unload(name);
            return Ok(());
        };
        if self.module(name).is_some_and(|i| i.hash == sha256) {
            return Ok(());
        }
        let hash = content_hash(bytes);
        if self.inner.cache.in_memory(&hash) {
            // Compiled already (the leader validated it): no wait.
            let prepared = self.prepare_hashed(bytes, hash, None);
            return self.swap_in_deployed(name, sha256, prepared);
        }
        let manifest = manifest::read_manifest(bytes).map_err(|e| e.to_string())?;
        let info = ModuleInfo::of(&manifest, hex(&hash));
        check_deployed(name, sha256, &info.name, &info.hash)?;
        let n = self.inner.installs.fetch_add(1, Ordering::Relaxed) + 1;
        let job = Some((sha256.to_string(), bytes.to_vec()));
        pending.insert(name.to_string(), Pending { n, info, job });
        if !self.inner.compiler.swap(true, Ordering::Relaxed) {
            let rt = self.clone();
            let spawned = std::thread::Builder::new()
                .name("wazoo-compile".into())
                .spawn(move || rt.compile_pending());
            if let Err(e) = spawned {
                self.inner.compiler.store(false, Ordering::Relaxed);
                pending.remove(name);
                self.inner.pending_done.notify_all();
                return Err(format!("cannot start a thread to compile it: {e}"));
            }
        }
        Ok(())
    }

    /// The compile worker: compiles the pending modules one at a time (the
    /// oldest install first) and swaps each in unless another install of
    /// its name came meanwhile; ends when none is left. It runs in the idle
    /// scheduling class ([`compile_thread_priority`]), so compiling never
    /// delays the member's answers or its heartbeats on a busy machine.
    fn compile_pending(&self) {
        compile_thread_priority();
        loop {
            let (name, n, sha256, bytes) = {
                let mut pending = self.inner.pending.lock().unwrap();
                let next = pending
                    .iter_mut()
                    .filter(|(_, p)| p.job.is_some())
                    .min_by_key(|(_, p)| p.n);
                let Some((name, p)) = next else {
                    self.inner.compiler.store(false, Ordering::Relaxed);
                    return;
                };
                let (sha256, bytes) = p.job.take().expect("filtered on a job");
                (name.clone(), p.n, sha256, bytes)
            };
            let prepared = self.prepare(&bytes, None);
            let mut pending = self.inner.pending.lock().unwrap();
            if pending.get(&name).map(|p| p.n) != Some(n) {
                continue; // another install of the name came first
            }
            if let Err(e) = self.swap_in_deployed(&name, &sha256, prepared) {
                tracing::error!(module = %name, "this member cannot serve the deployed recipe module: {e}");
            }
            pending.remove(&name);
            self.inner.pending_done.notify_all();
        }
    }

    /// How many modules this runtime compiled (found neither in memory
    /// nor in the cache directory).
    pub fn compiles(&self) -> u64 {
        self.inner.cache.compiles()
    }

    /// Whether validating `bytes` ([`RecipeEngine::validate`]) answers
    /// without compiling: the module is compiled and in memory, it was
    /// refused lately, or its manifest is refused already.
    ///
    /// [`RecipeEngine::validate`]: wazoo_core::recipe::RecipeEngine::validate
    pub fn validates_quickly(&self, bytes: &[u8]) -> bool {
        if manifest::read_manifest(bytes).is_err() {
            return true;
        }
        let hash = content_hash(bytes);
        self.inner.cache.in_memory(&hash) || self.refusal(&hash).is_some()
    }

    /// Validates a module to deploy, remembering why one was refused.
    pub(crate) fn validate_deploy(&self, bytes: &[u8]) -> Result<ModuleInfo, String> {
        let hash = content_hash(bytes);
        if let Some(why) = self.refusal(&hash) {
            return Err(why);
        }
        let prepared = self.prepare_hashed(bytes, hash, None);
        prepared.map(|l| l.info()).map_err(|e| {
            let why = e.to_string();
            let mut refused = self.inner.refused.lock().unwrap();
            if refused.len() >= REFUSED_KEPT {
                refused.pop_front();
            }
            refused.push_back((hash, why.clone()));
            why
        })
    }

    fn refusal(&self, hash: &ContentHash) -> Option<String> {
        let refused = self.inner.refused.lock().unwrap();
        refused
            .iter()
            .find(|(h, _)| h == hash)
            .map(|(_, why)| why.clone())
    }

    /// Swaps in a deployed module `prepare` made, if it is the one deployed
    /// as `name` at `sha256`.
    fn swap_in_deployed(
        &self,
        name: &str,
        sha256: &str,
        prepared: Result<Arc<Loaded>, LoadError>,
    ) -> Result<(), String> {
        let loaded = prepared.map_err(|e| e.to_string())?;
        check_deployed(name, sha256, &loaded.manifest.name, &loaded.hash_hex)?;
        let cached = loaded.cached;
        self.swap_in(loaded, Instant::now(), cached)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// Whether the deployed module `name` is still compiling.
    pub fn is_pending(&self, name: &str) -> bool {
        self.inner.pending.lock().unwrap().contains_key(name)
    }

    /// The module serving `name`; if it is compiling, or is a default
    /// loading that no module serves yet, once it is ready.
    fn get(&self, name: &str) -> Result<Arc<Loaded>, RecipeError> {
        let mut defaults = self.inner.defaults.lock().unwrap();
        while defaults.contains_key(name) && !self.inner.modules.read().unwrap().contains_key(name)
        {
            defaults = self.inner.defaults_done.wait(defaults).unwrap();
        }
        drop(defaults);
        let mut pending = self.inner.pending.lock().unwrap();
        while pending.contains_key(name) {
            pending = self.inner.pending_done.wait(pending).unwrap();
        }
        drop(pending);
        self.inner
            .modules
            .read()
            .unwrap()
            .get(name)
            .cloned()
            .ok_or_else(|| RecipeError::UnknownModule(name.into()))
    }
}

/// A default module announced as loading ([`Runtime::loading_default`]);
/// dropping it ends the wait of the calls of its name.
pub struct LoadingDefault {
    runtime: Runtime,
    name: String,
}

impl LoadingDefault {
    /// The module's name, from its manifest.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for LoadingDefault {
    fn drop(&mut self) {
        let inner = &self.runtime.inner;
        let mut defaults = inner.defaults.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = defaults.get_mut(&self.name) {
            *n -= 1;
            if *n == 0 {
                defaults.remove(&self.name);
            }
        }
        inner.defaults_done.notify_all();
    }
}

/// Lowers the calling thread's scheduling priority to nice 10 (Linux sets
/// it per thread): for threads whose work may wait (recipe steps off the
/// member's thread) on a machine whose cores the member's thread and the
/// log writer need.
pub fn lower_thread_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: setpriority takes plain integers; who = 0 is this thread.
        let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) };
        if r != 0 {
            tracing::debug!(
                "cannot lower a thread's priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// Puts the calling thread in Linux's idle scheduling class (`SCHED_IDLE`),
/// for work that may take whatever CPU is left over: compiling recipe
/// modules. Nice 10 was not enough: three members compiling their built-in
/// modules on two cores held a fresh ensemble's writes to about a fifth of
/// its rate for the ten seconds compiling took (`wazoo-bench startup`),
/// as a nice-10 thread still gets a share of a core while the member's
/// threads wait for it; an idle-class thread runs only when no other
/// thread of the machine wants the core. Falls back to nice 19.
pub fn compile_thread_priority() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread; param is a valid sched_param.
        let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
        if r != 0 {
            tracing::debug!(
                "cannot put a compiling thread in the idle class: {}",
                std::io::Error::last_os_error()
            );
            // SAFETY: setpriority takes plain integers; who = 0 is this thread.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
        }
    }
}
