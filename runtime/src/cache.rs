//! The compiled-module cache: in memory (by content hash) and optionally on
//! disk, keyed by the module's content hash and the engine's compatibility
//! hash. A stale, foreign or corrupt entry is a miss, never an error.

use super::error::LoadError;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use wasmtime::{Engine, Module};

const MAGIC: &[u8; 4] = b"WZC1";
const MEMORY_ENTRIES: usize = 64;

pub(crate) type ContentHash = [u8; 32];

pub(crate) fn content_hash(bytes: &[u8]) -> ContentHash {
    Sha256::digest(bytes).into()
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Feeds `Hash` output into SHA-256 (stable for a given build and platform).
struct ShaHasher(Sha256);
impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

pub(crate) struct ModuleCache {
    dir: Option<PathBuf>,
    engine_key: String,
    memory: Mutex<HashMap<ContentHash, Module>>,
    /// Names this cache's compiles apart from every other cache's in the
    /// process when it has no directory.
    id: u64,
    /// Modules this cache compiled (not found in memory or on disk).
    compiles: AtomicU64,
}

/// What one compile produces: a cache file (shared by every cache of the
/// process that has the same directory and engine settings, e.g. the three
/// members of `wazoo dev`), or a module of one directory-less cache.
#[derive(Clone, PartialEq, Eq, Hash)]
enum CompileKey {
    File(PathBuf),
    Memory(u64, ContentHash),
}

/// The compiles running in this process: a second caller wanting the
/// same module waits for the first instead of compiling it again (then
/// finds it in memory or on disk).
static COMPILING: Mutex<Vec<CompileKey>> = Mutex::new(Vec::new());
static COMPILED: Condvar = Condvar::new();
static NEXT_CACHE_ID: AtomicU64 = AtomicU64::new(0);

/// A compile this thread claimed; released (and waiters woken) when
/// dropped, also if the compiler panics.
struct Claim(CompileKey);

impl Claim {
    /// Claims `key`, first waiting for any compile of it to end; `None`
    /// when one ended while waiting (the caller looks in the cache again).
    fn take(key: CompileKey) -> Option<Claim> {
        let mut running = COMPILING.lock().unwrap_or_else(|e| e.into_inner());
        let mut waited = false;
        while running.contains(&key) {
            waited = true;
            running = COMPILED.wait(running).unwrap_or_else(|e| e.into_inner());
        }
        if waited {
            return None;
        }
        running.push(key.clone());
        Some(Claim(key))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut running = COMPILING.lock().unwrap_or_else(|e| e.into_inner());
        running.retain(|k| *k != self.0);
        COMPILED.notify_all();
    }
}

impl ModuleCache {
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> ModuleCache {
        let mut h = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut h);
        let engine_key = hex(&h.0.finalize()[..8]);
        if let Some(d) = &dir {
            if let Err(e) = std::fs::create_dir_all(d) {
                tracing::warn!(dir = %d.display(), "cannot create the module cache directory: {e}");
            }
        }
        ModuleCache {
            dir,
            engine_key,
            memory: Mutex::new(HashMap::new()),
            id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed),
            compiles: AtomicU64::new(0),
        }
    }

    fn path(&self, hash: &ContentHash) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{}-{}.cwasm", hex(hash), self.engine_key)))
    }

    /// Modules compiled so far (cache misses).
    pub fn compiles(&self) -> u64 {
        self.compiles.load(Ordering::Relaxed)
    }

    /// Whether the module of `hash` is compiled and held in memory (taking
    /// it costs nothing).
    pub fn in_memory(&self, hash: &ContentHash) -> bool {
        self.memory.lock().unwrap().contains_key(hash)
    }

    /// The compiled module for `bytes`, from the cache or freshly compiled
    /// (then stored). Returns whether it was a cache hit. Compiles of one
    /// module never run side by side in the process: a second caller waits
    /// for the first and takes its result from the cache.
    pub fn get_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        hash: &ContentHash,
    ) -> Result<(Module, bool), LoadError> {
        let path = self.path(hash);
        let key = match &path {
            Some(p) => CompileKey::File(p.clone()),
            None => CompileKey::Memory(self.id, *hash),
        };
        loop {
            if let Some(m) = self.cached(engine, hash, path.as_deref()) {
                return Ok((m, true));
            }
            let Some(_claim) = Claim::take(key.clone()) else {
                continue; // another thread compiled it meanwhile (or failed to)
            };
            // Other processes sharing the directory (members on one
            // machine) compile it once between them too: the file lock
            // waits for one compiling it, then the look below finds it.
            let _file_lock = path.as_deref().and_then(FileLock::take);
            // It may have landed between the look above and the claims.
            if let Some(m) = self.cached(engine, hash, path.as_deref()) {
                return Ok((m, true));
            }
            self.compiles.fetch_add(1, Ordering::Relaxed);
            let m = Module::from_binary(engine, bytes)
                .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
            if let Some(p) = &path {
                if let Err(e) = store(&m, p) {
                    tracing::warn!(path = %p.display(), "cannot write the compiled module cache: {e:#}");
                }
            }
            self.remember(hash, &m);
            return Ok((m, false));
        }
    }

    /// The module of `hash` from memory, else from the cache file `path`
    /// (then kept in memory).
    fn cached(&self, engine: &Engine, hash: &ContentHash, path: Option<&Path>) -> Option<Module> {
        if let Some(m) = self.memory.lock().unwrap().get(hash) {
            return Some(m.clone());
        }
        let m = load(engine, path?)?;
        self.remember(hash, &m);
        Some(m)
    }

    fn remember(&self, hash: &ContentHash, m: &Module) {
        let mut mem = self.memory.lock().unwrap();
        if mem.len() >= MEMORY_ENTRIES {
            if let Some(k) = mem.keys().next().copied() {
                mem.remove(&k);
            }
        }
        mem.insert(*hash, m.clone());
    }
}

/// An exclusive `flock` on `<entry>.lock`, held while one process
/// compiles the entry; the kernel releases it when the holder exits,
/// however it exits. Without it (a directory where locks cannot be made)
/// processes may compile the same module side by side, which wastes CPU
/// only: entries are written whole and renamed into place.
struct FileLock {
    _file: std::fs::File,
}

impl FileLock {
    fn take(entry: &Path) -> Option<FileLock> {
        let path = entry.with_extension("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| tracing::debug!(path = %path.display(), "cannot open a compile lock: {e}"))
            .ok()?;
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: flock on a descriptor this File owns; retried on EINTR.
            loop {
                if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                    break;
                }
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    tracing::debug!(path = %path.display(), "cannot take a compile lock: {e}");
                    return None;
                }
            }
        }
        Some(FileLock { _file: file })
    }
}

/// Reads a cache entry; anything wrong with it makes it a miss.
fn load(engine: &Engine, path: &Path) -> Option<Module> {
    let data = std::fs::read(path).ok()?;
    if data.len() < 36 || &data[..4] != MAGIC || data[4..36] != Sha256::digest(&data[36..])[..] {
        tracing::debug!(path = %path.display(), "ignoring a corrupt compiled-module cache entry");
        return None;
    }
    // SAFETY: the bytes are what `Module::serialize` wrote (checked by the
    // digest above) into the operator's cache directory; wasmtime itself
    // refuses artifacts from an incompatible engine, which is a miss.
    match unsafe { Module::deserialize(engine, &data[36..]) } {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::debug!(path = %path.display(), "stale compiled-module cache entry: {e:#}");
            None
        }
    }
}

fn store(m: &Module, path: &Path) -> anyhow::Result<()> {
    let body = m.serialize().map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let mut data = Vec::with_capacity(body.len() + 36);
    data.extend_from_slice(MAGIC);
    data.extend_from_slice(&Sha256::digest(&body));
    data.extend_from_slice(&body);
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, &data)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}
