//! The sandbox limits: what every call may use (fuel, time, memory, tree
//! ops, reply size), and the limiter that holds a store to its memory cap.

use std::path::PathBuf;
use std::time::Duration;

use wasmtime::ResourceLimiter;

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
    /// beyond that fails with [`RecipeError::Instantiate`](crate::RecipeError::Instantiate).
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

pub(super) struct Limiter {
    pub(super) cap: usize,
    pub(super) hit: bool,
    /// The largest size granted (the initial size counts: wasmtime asks at
    /// instantiation too).
    pub(super) peak: usize,
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
