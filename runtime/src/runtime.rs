//! The engine, the module registry, loading and the per-call sandbox.

use super::cache::{content_hash, hex, ContentHash, ModuleCache};
use super::error::{LoadError, RecipeError};
use super::host::{path_within, RecipeHost};
use super::wasm;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};
use wasmtime::{
    Caller, Config, Engine, ExternType, FuncType, InstanceAllocationStrategy, InstancePre, Linker,
    Memory, Module, ModuleExport, PoolingAllocationConfig, ResourceLimiter, Store, Trap, TypedFunc,
    ValType,
};
use wazoo_sdk::abi::{
    self, exports, imports, CallRequest, CallerInfo, Manifest, OpOk, OpResult, Reply, TreeOp,
    WatchRequest,
};

/// Bytes of each pooled linear memory kept resident (reset with memset)
/// between instances: a Rust guest's stack and first heap pages.
const KEEP_RESIDENT: usize = 256 << 10;

/// Sandbox limits applied to every call and callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Fuel (roughly, wasm instructions) per call. A MessagePack round trip
    /// costs about 3,000.
    pub fuel: u64,
    /// Wall-clock deadline per call, enforced by epoch interruption (to
    /// within one epoch tick).
    pub deadline: Duration,
    /// Linear memory cap per instance, in bytes (growing past it traps).
    pub memory_bytes: usize,
    /// Tree ops (reads and writes) per call.
    pub max_ops: usize,
    /// Size cap of the reply.
    pub max_reply_bytes: usize,
    /// Size cap of one tree batch (request or response) and of one notification.
    pub max_message_bytes: usize,
    /// Notifications per call.
    pub max_notifications: usize,
    /// Log lines per call (more are dropped).
    pub max_log_lines: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            fuel: 10_000_000,
            deadline: Duration::from_millis(100),
            memory_bytes: 16 << 20,
            max_ops: 1_000,
            max_reply_bytes: 1 << 20,
            max_message_bytes: 4 << 20,
            max_notifications: 64,
            max_log_lines: 100,
        }
    }
}

/// How the runtime is built.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub limits: Limits,
    /// Instances that may exist at once (pooling allocator slots); a call
    /// beyond that fails with [`RecipeError::Instantiate`].
    pub max_instances: u32,
    /// Where compiled modules are cached across restarts (none: memory only).
    pub cache_dir: Option<PathBuf>,
    /// Epoch tick; the deadline is enforced to within one tick.
    pub epoch_tick: Duration,
    /// Wasm stack per call.
    pub max_wasm_stack: usize,
}

impl Default for RuntimeConfig {
    fn default() -> RuntimeConfig {
        RuntimeConfig {
            limits: Limits::default(),
            max_instances: 64,
            cache_dir: None,
            epoch_tick: Duration::from_millis(5),
            max_wasm_stack: 512 << 10,
        }
    }
}

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
    calls: AtomicU64,
    errors: AtomicU64,
    fuel: AtomicU64,
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
}

impl Loaded {
    fn info(&self) -> ModuleInfo {
        ModuleInfo {
            name: self.manifest.name.clone(),
            version: self.manifest.version.clone(),
            hash: self.hash_hex.clone(),
            abi: self.manifest.abi,
            methods: self.manifest.methods.clone(),
            prefixes: self.manifest.prefixes.clone(),
            on_watch: self.on_watch.is_some(),
            source: self.source.clone(),
            loaded_at: self.loaded_at,
        }
    }
}

/// The recipe runtime: one engine, a registry of loaded modules by name, the
/// compiled-module cache and the epoch ticker. Cheap to clone (shared inside);
/// `Send + Sync`: calls may run on any number of threads at once.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    linker: Linker<CallState>,
    limits: Limits,
    epoch_tick: Duration,
    cache: ModuleCache,
    modules: RwLock<HashMap<String, Arc<Loaded>>>,
    counters: Mutex<HashMap<String, Arc<Counters>>>,
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

/// The host a call runs against, erased to `'static` for the store. Valid
/// only while [`Runtime::run`] runs: the store is dropped before it returns.
struct HostPtr(*mut (dyn RecipeHost + 'static));
// SAFETY: the store (and so the pointer) never leaves the calling thread.
unsafe impl Send for HostPtr {}
unsafe impl Sync for HostPtr {}

struct Limiter {
    cap: usize,
    hit: bool,
    /// The largest size granted (the initial size counts: wasmtime asks at
    /// instantiation too).
    peak: usize,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            // Like StoreLimits with trap_on_grow_failure(true): a clear
            // error instead of memory.grow returning -1 and the guest
            // aborting somewhere else.
            self.hit = true;
            return Err(wasmtime::Error::msg("memory cap reached"));
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }
    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
    fn instances(&self) -> usize {
        1
    }
    fn tables(&self) -> usize {
        4
    }
    fn memories(&self) -> usize {
        1
    }
}

struct CallState {
    host: HostPtr,
    module: Arc<Loaded>,
    limits: Limits,
    limiter: Limiter,
    /// Why a host function stopped the call (takes precedence over the trap).
    fatal: Option<RecipeError>,
    ops: usize,
    notifications: usize,
    logs: usize,
    memory: Option<Memory>,
    alloc: Option<TypedFunc<u32, u32>>,
    /// Set while the host runs the guest's `alloc` from inside an import: a
    /// guest that calls an import from there is refused (no re-entrancy).
    in_alloc: bool,
}

enum Entry {
    Call,
    OnWatch,
}

/// Stops the call with `err` (the trap carries no information; `fatal` does).
fn abort(caller: &mut Caller<'_, CallState>, err: RecipeError) -> wasmtime::Error {
    let msg = err.to_string();
    caller.data_mut().fatal = Some(err);
    wasmtime::Error::msg(msg)
}

fn guest_memory(caller: &mut Caller<'_, CallState>) -> Result<Memory, wasmtime::Error> {
    if let Some(m) = caller.data().memory {
        return Ok(m);
    }
    match caller
        .get_export(exports::MEMORY)
        .and_then(|e| e.into_memory())
    {
        Some(m) => Ok(m),
        None => Err(abort(
            caller,
            RecipeError::Trap {
                message: "no memory export".into(),
            },
        )),
    }
}

/// Refuses an import called from inside the guest's `alloc` run by the host.
fn not_reentrant(caller: &mut Caller<'_, CallState>) -> Result<(), wasmtime::Error> {
    if caller.data().in_alloc {
        return Err(abort(
            caller,
            RecipeError::Trap {
                message: "host import called from inside alloc".into(),
            },
        ));
    }
    Ok(())
}

/// Copies `len` bytes at `ptr` out of guest memory, bounds-checked and capped.
fn read_guest(
    caller: &mut Caller<'_, CallState>,
    what: &'static str,
    ptr: u32,
    len: u32,
    cap: usize,
) -> Result<Vec<u8>, wasmtime::Error> {
    if len as usize > cap {
        return Err(abort(
            caller,
            RecipeError::TooLarge {
                what,
                len: len as usize,
                limit: cap,
            },
        ));
    }
    let mem = guest_memory(caller)?;
    let data = mem.data(&*caller);
    match data.get(ptr as usize..ptr as usize + len as usize) {
        Some(b) => Ok(b.to_vec()),
        None => {
            let memory = data.len();
            Err(abort(
                caller,
                RecipeError::OutOfBounds {
                    what,
                    ptr,
                    len,
                    memory,
                },
            ))
        }
    }
}

/// Places `bytes` in guest memory through the guest's `alloc`; returns the packed (ptr, len).
fn write_guest(caller: &mut Caller<'_, CallState>, bytes: &[u8]) -> Result<u64, wasmtime::Error> {
    let alloc = match caller.data().alloc.clone() {
        Some(a) => a,
        None => match caller
            .get_export(exports::ALLOC)
            .and_then(|e| e.into_func())
        {
            Some(f) => f.typed::<u32, u32>(&*caller)?,
            None => {
                return Err(abort(
                    caller,
                    RecipeError::Trap {
                        message: "no alloc export".into(),
                    },
                ))
            }
        },
    };
    caller.data_mut().in_alloc = true;
    let ptr = alloc.call(&mut *caller, bytes.len() as u32);
    caller.data_mut().in_alloc = false;
    let ptr = ptr?;
    let mem = guest_memory(caller)?;
    if mem.write(&mut *caller, ptr as usize, bytes).is_err() {
        let memory = mem.data_size(&*caller);
        return Err(abort(
            caller,
            RecipeError::OutOfBounds {
                what: "alloc result",
                ptr,
                len: bytes.len() as u32,
                memory,
            },
        ));
    }
    Ok(abi::pack(ptr, bytes.len() as u32))
}

fn host_tree(
    caller: &mut Caller<'_, CallState>,
    ptr: u32,
    len: u32,
) -> Result<u64, wasmtime::Error> {
    not_reentrant(caller)?;
    let cap = caller.data().limits.max_message_bytes;
    let req = read_guest(caller, "tree request", ptr, len, cap)?;
    let ops: Vec<TreeOp> = match abi::decode(&req) {
        Ok(ops) => ops,
        Err(e) => {
            return Err(abort(
                caller,
                RecipeError::BadMessage {
                    what: "tree request",
                    message: e.to_string(),
                },
            ))
        }
    };
    let st = caller.data_mut();
    st.ops += ops.len();
    if st.ops > st.limits.max_ops {
        let limit = st.limits.max_ops;
        return Err(abort(caller, RecipeError::TooManyOps { limit }));
    }
    let prefixes = &st.module.manifest.prefixes;
    for op in &ops {
        let path = op.path();
        let mut ok = path_within(path, prefixes);
        // A sequential create appends to the last component, so it must be
        // strictly below a prefix to stay inside it.
        if let TreeOp::Create { mode, .. } = op {
            ok &= !mode.is_sequential() || !prefixes.iter().any(|p| p == path);
        }
        if !ok {
            let err = RecipeError::PathOutsidePrefixes {
                path: path.to_string(),
                prefixes: prefixes.clone(),
            };
            return Err(abort(caller, err));
        }
        if op.watch().is_some_and(|t| t.len() > 4096) {
            return Err(abort(
                caller,
                RecipeError::TooLarge {
                    what: "watch token",
                    len: 4096,
                    limit: 4096,
                },
            ));
        }
    }
    let cap = st.limits.max_message_bytes;
    // SAFETY: see HostPtr; the pointer is live for the whole call.
    let host = unsafe { &mut *st.host.0 };
    // The response is bounded as it is built, not once it is whole: a batch
    // of reads of a large node stops at the first result past the cap.
    let mut results: Vec<OpResult> = Vec::with_capacity(ops.len());
    let mut response_bytes = 0usize;
    for op in ops {
        let r = {
            let r = match op {
                TreeOp::Get { path, watch } => host
                    .get(&path, watch.as_deref())
                    .map(|(data, stat)| OpOk::Data { data, stat }),
                TreeOp::Children { path, watch } => host
                    .children(&path, watch.as_deref())
                    .map(|children| OpOk::Children { children }),
                TreeOp::Exists { path, watch } => host
                    .exists(&path, watch.as_deref())
                    .map(|stat| OpOk::Exists { stat }),
                TreeOp::Create { path, data, mode } => host
                    .create(&path, &data, mode)
                    .map(|path| OpOk::Created { path }),
                TreeOp::Set {
                    path,
                    data,
                    version,
                } => host
                    .set(&path, &data, version)
                    .map(|stat| OpOk::Stat { stat }),
                TreeOp::Delete { path, version } => {
                    host.delete(&path, version).map(|()| OpOk::Done)
                }
                TreeOp::Check { path, version } => host.check(&path, version).map(|()| OpOk::Done),
            };
            r.map_err(|c| c.code())
        };
        response_bytes += encoded_size_bound(&r);
        results.push(r);
        if response_bytes > cap {
            return Err(abort(
                caller,
                RecipeError::TooLarge {
                    what: "tree response",
                    len: response_bytes,
                    limit: cap,
                },
            ));
        }
    }
    let out = abi::encode(&results).map_err(|e| wasmtime::Error::msg(e.to_string()))?;
    if out.len() > caller.data().limits.max_message_bytes {
        let limit = caller.data().limits.max_message_bytes;
        return Err(abort(
            caller,
            RecipeError::TooLarge {
                what: "tree response",
                len: out.len(),
                limit,
            },
        ));
    }
    write_guest(caller, &out)
}

/// At least the bytes one result takes in the encoded tree response
/// (its data or names, plus a fixed allowance for stats and framing).
fn encoded_size_bound(r: &OpResult) -> usize {
    const FIXED: usize = 96;
    FIXED
        + match r {
            Ok(OpOk::Data { data, .. }) => data.len(),
            Ok(OpOk::Children { children }) => children.iter().map(|c| c.len() + 5).sum(),
            Ok(OpOk::Created { path }) => path.len(),
            _ => 0,
        }
}

fn host_notify(
    caller: &mut Caller<'_, CallState>,
    session: i64,
    ptr: u32,
    len: u32,
) -> Result<i32, wasmtime::Error> {
    not_reentrant(caller)?;
    let st = caller.data_mut();
    st.notifications += 1;
    if st.notifications > st.limits.max_notifications {
        let limit = st.limits.max_notifications;
        return Err(abort(caller, RecipeError::TooManyNotifications { limit }));
    }
    let cap = caller.data().limits.max_message_bytes;
    let payload = read_guest(caller, "notification", ptr, len, cap)?;
    // SAFETY: see HostPtr.
    let host = unsafe { &mut *caller.data_mut().host.0 };
    Ok(match host.notify(session, &payload) {
        Ok(()) => 0,
        Err(c) => c.code(),
    })
}

fn host_log(
    caller: &mut Caller<'_, CallState>,
    level: i32,
    ptr: u32,
    len: u32,
) -> Result<(), wasmtime::Error> {
    const MAX_LINE: u32 = 4096;
    let st = caller.data_mut();
    st.logs += 1;
    if st.logs > st.limits.max_log_lines {
        return Ok(());
    }
    let msg = read_guest(
        caller,
        "log message",
        ptr,
        len.min(MAX_LINE),
        MAX_LINE as usize,
    )?;
    let msg = String::from_utf8_lossy(&msg);
    let st = caller.data();
    let module = st.module.manifest.name.as_str();
    match level {
        abi::level::ERROR => tracing::error!(target: "wazoo::recipe", module, "{msg}"),
        abi::level::WARN => tracing::warn!(target: "wazoo::recipe", module, "{msg}"),
        abi::level::INFO => tracing::info!(target: "wazoo::recipe", module, "{msg}"),
        abi::level::DEBUG => tracing::debug!(target: "wazoo::recipe", module, "{msg}"),
        _ => tracing::trace!(target: "wazoo::recipe", module, "{msg}"),
    }
    if st.logs == st.limits.max_log_lines {
        tracing::warn!(target: "wazoo::recipe", module, "log line limit reached; dropping the rest of this call's lines");
    }
    Ok(())
}

fn host_panic(caller: &mut Caller<'_, CallState>, ptr: u32, len: u32) -> wasmtime::Error {
    const MAX: u32 = 16 << 10;
    match read_guest(caller, "panic message", ptr, len.min(MAX), MAX as usize) {
        Ok(msg) => {
            let message = String::from_utf8_lossy(&msg).into_owned();
            abort(caller, RecipeError::Panic { message })
        }
        Err(e) => e,
    }
}

fn build_linker(engine: &Engine) -> anyhow::Result<Linker<CallState>> {
    let mut l = Linker::new(engine);
    let m = imports::MODULE;
    let err = |e: wasmtime::Error| anyhow::anyhow!("{e:#}");
    l.func_wrap(
        m,
        imports::TREE,
        |mut c: Caller<'_, CallState>, ptr: u32, len: u32| host_tree(&mut c, ptr, len),
    )
    .map_err(err)?;
    l.func_wrap(
        m,
        imports::NOTIFY,
        |mut c: Caller<'_, CallState>, session: i64, ptr: u32, len: u32| {
            host_notify(&mut c, session, ptr, len)
        },
    )
    .map_err(err)?;
    l.func_wrap(
        m,
        imports::LOG,
        |mut c: Caller<'_, CallState>, level: i32, ptr: u32, len: u32| {
            host_log(&mut c, level, ptr, len)
        },
    )
    .map_err(err)?;
    l.func_wrap(
        m,
        imports::PANIC,
        |mut c: Caller<'_, CallState>, ptr: u32, len: u32| -> wasmtime::Result<()> {
            Err(host_panic(&mut c, ptr, len))
        },
    )
    .map_err(err)?;
    Ok(l)
}

/// The signatures the ABI fixes, as "(params) -> (results)".
fn sig(ft: &FuncType) -> String {
    let name = |v: ValType| match v {
        ValType::I32 => "i32".to_string(),
        ValType::I64 => "i64".to_string(),
        ValType::F32 => "f32".to_string(),
        ValType::F64 => "f64".to_string(),
        other => format!("{other}"),
    };
    let p: Vec<String> = ft.params().map(name).collect();
    let r: Vec<String> = ft.results().map(name).collect();
    format!("({}) -> ({})", p.join(", "), r.join(", "))
}

fn expected_import(name: &str) -> Option<&'static str> {
    Some(match name {
        imports::TREE => "(i32, i32) -> (i64)",
        imports::NOTIFY => "(i64, i32, i32) -> (i32)",
        imports::LOG => "(i32, i32, i32) -> ()",
        imports::PANIC => "(i32, i32) -> ()",
        _ => return None,
    })
}

fn check_imports(module: &Module) -> Result<(), LoadError> {
    for imp in module.imports() {
        let unknown = || LoadError::UnknownImport {
            module: imp.module().into(),
            name: imp.name().into(),
        };
        if imp.module() != imports::MODULE {
            return Err(unknown());
        }
        let expected = expected_import(imp.name()).ok_or_else(unknown)?;
        match imp.ty() {
            ExternType::Func(ft) if sig(&ft) == expected => {}
            ExternType::Func(ft) => {
                return Err(LoadError::BadImport {
                    module: imp.module().into(),
                    name: imp.name().into(),
                    expected: expected.into(),
                    found: sig(&ft),
                })
            }
            _ => return Err(unknown()),
        }
    }
    Ok(())
}

fn export_func(
    module: &Module,
    name: &str,
    expected: &str,
    required: bool,
) -> Result<Option<ModuleExport>, LoadError> {
    let missing = || LoadError::MissingExport {
        name: name.into(),
        expected: expected.into(),
    };
    let Some(ty) = module.get_export(name) else {
        return if required { Err(missing()) } else { Ok(None) };
    };
    match ty {
        ExternType::Func(ft) if sig(&ft) == expected => Ok(module.get_export_index(name)),
        ExternType::Func(ft) => Err(LoadError::BadExport {
            name: name.into(),
            expected: expected.into(),
            found: sig(&ft),
        }),
        other => Err(LoadError::BadExport {
            name: name.into(),
            expected: expected.into(),
            found: format!("{other:?}"),
        }),
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
                ticker: Mutex::new(Some((stop, handle))),
            }),
        })
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
        // The manifest first: nothing is compiled for a module we would refuse.
        let manifest = wasm::read_manifest(bytes)?;
        let hash = content_hash(bytes);
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
                calls: m.counters.calls.load(Ordering::Relaxed),
                errors: m.counters.errors.load(Ordering::Relaxed),
                fuel_used: m.counters.fuel.load(Ordering::Relaxed),
                loads: m.counters.loads.load(Ordering::Relaxed),
            })
            .collect();
        out.sort_by(|a, b| a.info.name.cmp(&b.info.name));
        out
    }

    fn get(&self, name: &str) -> Result<Arc<Loaded>, RecipeError> {
        self.inner
            .modules
            .read()
            .unwrap()
            .get(name)
            .cloned()
            .ok_or_else(|| RecipeError::UnknownModule(name.into()))
    }

    /// Runs `method` of `module` with MessagePack `args` as `caller`, in a
    /// fresh instance, against `host`. See [`RecipeHost`] for what to do
    /// with what the call staged.
    pub fn call(
        &self,
        module: &str,
        method: &str,
        args: &[u8],
        caller: &CallerInfo,
        host: &mut dyn RecipeHost,
    ) -> Result<Outcome, RecipeError> {
        let m = self.get(module)?;
        if !m.manifest.methods.iter().any(|x| x == method) {
            return Err(RecipeError::UnknownMethod {
                module: module.into(),
                method: method.into(),
            });
        }
        let req = CallRequest {
            method: method.into(),
            args: args.to_vec(),
            caller: caller.clone(),
        };
        let input = abi::encode(&req).map_err(|e| RecipeError::BadMessage {
            what: "call request",
            message: e.to_string(),
        })?;
        self.run(m, Entry::Call, &input, host)
    }

    /// Runs the module's `on_watch` for a fired watch, in a fresh instance.
    pub fn on_watch(
        &self,
        module: &str,
        event: &WatchRequest,
        host: &mut dyn RecipeHost,
    ) -> Result<Outcome, RecipeError> {
        let m = self.get(module)?;
        if m.on_watch.is_none() {
            return Err(RecipeError::NoWatchHandler(module.into()));
        }
        let input = abi::encode(event).map_err(|e| RecipeError::BadMessage {
            what: "watch request",
            message: e.to_string(),
        })?;
        self.run(m, Entry::OnWatch, &input, host)
    }

    fn run(
        &self,
        m: Arc<Loaded>,
        entry: Entry,
        input: &[u8],
        host: &mut dyn RecipeHost,
    ) -> Result<Outcome, RecipeError> {
        let limits = &self.inner.limits;
        let host: *mut (dyn RecipeHost + '_) = host;
        // SAFETY: lifetime erasure only; the store holding it is dropped at
        // the end of this function, before `host`'s borrow ends.
        let host: *mut (dyn RecipeHost + 'static) = unsafe { std::mem::transmute(host) };
        let state = CallState {
            host: HostPtr(host),
            module: m.clone(),
            limits: limits.clone(),
            limiter: Limiter {
                cap: limits.memory_bytes,
                hit: false,
                peak: 0,
            },
            fatal: None,
            ops: 0,
            notifications: 0,
            logs: 0,
            memory: None,
            alloc: None,
            in_alloc: false,
        };
        let mut store = Store::new(&self.inner.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_fuel(limits.fuel).expect("fuel is enabled");
        let tick = self.inner.epoch_tick.as_nanos().max(1);
        store.set_epoch_deadline((limits.deadline.as_nanos().div_ceil(tick) + 1) as u64);
        store.epoch_deadline_trap();

        let result = self.run_in(&m, entry, input, &mut store);
        let fuel_used = limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        let result = result.map_err(|e| classify(store.data_mut(), e, limits));
        let ops = store.data().ops;
        let memory_bytes = store.data().limiter.peak;
        drop(store);

        m.counters.calls.fetch_add(1, Ordering::Relaxed);
        m.counters.fuel.fetch_add(fuel_used, Ordering::Relaxed);
        match result {
            Ok(Ok(reply)) => {
                if matches!(reply, Reply::Error { .. }) {
                    m.counters.errors.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Outcome {
                    reply,
                    fuel_used,
                    ops,
                    version: m.manifest.version.clone(),
                    hash: m.hash_hex.clone(),
                    memory_bytes,
                })
            }
            Ok(Err(e)) | Err(e) => {
                m.counters.errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(module = %m.manifest.name, error = %e, "recipe call failed");
                Err(e)
            }
        }
    }

    /// The wasm part of a call: instantiate, place the input, run, read the reply.
    /// The outer error is a trap to classify; the inner one is already typed.
    fn run_in(
        &self,
        m: &Loaded,
        entry: Entry,
        input: &[u8],
        store: &mut Store<CallState>,
    ) -> Result<Result<Reply, RecipeError>, wasmtime::Error> {
        let instance = m.pre.instantiate(&mut *store)?;
        let memory = instance
            .get_module_export(&mut *store, &m.memory)
            .and_then(|e| e.into_memory())
            .ok_or_else(|| wasmtime::Error::msg("no memory export"))?;
        let func = |store: &mut Store<CallState>, idx: &ModuleExport| {
            instance
                .get_module_export(&mut *store, idx)
                .and_then(|e| e.into_func())
                .ok_or_else(|| wasmtime::Error::msg("missing export"))
        };
        let alloc = func(store, &m.alloc)?.typed::<u32, u32>(&*store)?;
        let entry = match entry {
            Entry::Call => &m.call,
            Entry::OnWatch => m.on_watch.as_ref().expect("checked by the caller"),
        };
        let entry = func(store, entry)?.typed::<(u32, u32), u64>(&*store)?;
        store.data_mut().memory = Some(memory);
        store.data_mut().alloc = Some(alloc.clone());

        let len = input.len() as u32;
        let ptr = alloc.call(&mut *store, len)?;
        if memory.write(&mut *store, ptr as usize, input).is_err() {
            let mem = memory.data_size(&*store);
            return Ok(Err(RecipeError::OutOfBounds {
                what: "alloc result",
                ptr,
                len,
                memory: mem,
            }));
        }
        let (rptr, rlen) = abi::unpack(entry.call(&mut *store, (ptr, len))?);
        let limit = store.data().limits.max_reply_bytes;
        if rlen as usize > limit {
            return Ok(Err(RecipeError::ReplyTooLarge {
                len: rlen as usize,
                limit,
            }));
        }
        let data = memory.data(&*store);
        let Some(bytes) = data.get(rptr as usize..rptr as usize + rlen as usize) else {
            return Ok(Err(RecipeError::OutOfBounds {
                what: "reply",
                ptr: rptr,
                len: rlen,
                memory: data.len(),
            }));
        };
        Ok(
            abi::decode::<Reply>(bytes).map_err(|e| RecipeError::BadMessage {
                what: "reply",
                message: e.to_string(),
            }),
        )
    }
}

/// Turns a trap (or host abort) into a typed error.
fn classify(state: &mut CallState, e: wasmtime::Error, limits: &Limits) -> RecipeError {
    if let Some(f) = state.fatal.take() {
        return f;
    }
    if state.limiter.hit {
        return RecipeError::MemoryLimit {
            limit: limits.memory_bytes,
        };
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => RecipeError::FuelExhausted {
            budget: limits.fuel,
        },
        Some(Trap::Interrupt) => RecipeError::DeadlineExceeded {
            deadline: limits.deadline,
        },
        Some(Trap::StackOverflow) => RecipeError::StackOverflow,
        Some(Trap::UnreachableCodeReached) => RecipeError::Trap {
            message:
                "wasm `unreachable` executed (an abort, or a panic without the SDK's panic hook)"
                    .into(),
        },
        Some(t) => {
            // Append where it happened (function names survive unless the
            // module was stripped of its name section).
            let message = match e.downcast_ref::<wasmtime::WasmBacktrace>() {
                Some(bt) if !bt.frames().is_empty() => format!("{t}\n{bt}"),
                _ => t.to_string(),
            };
            RecipeError::Trap { message }
        }
        None => {
            let message = format!("{e:#}");
            if message.contains("concurrent") && message.contains("limit") {
                RecipeError::Instantiate(message)
            } else {
                RecipeError::Trap { message }
            }
        }
    }
}
