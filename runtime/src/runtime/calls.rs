//! Calls and callbacks: a fresh instance per call, run under the limits,
//! and a trap turned into a typed error.

use std::sync::Arc;

use wasmtime::{ModuleExport, Store, Trap};
use wazoo_sdk::abi::{self, CallRequest, CallerInfo, Reply, WatchRequest};

use super::guest_imports::{CallState, Entry, HostPtr};
use super::limits::Limiter;
use super::{Limits, Loaded, Outcome, Runtime};
use crate::error::RecipeError;
use crate::host::RecipeHost;

impl Runtime {
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
        let budgeted;
        let limits = match &self.budget {
            None => &self.inner.limits,
            Some(b) => {
                budgeted = Limits {
                    fuel: self.inner.limits.fuel.min(b.fuel),
                    deadline: self.inner.limits.deadline.min(b.deadline),
                    max_message_bytes: self.inner.limits.max_message_bytes.min(b.message_bytes),
                    ..self.inner.limits.clone()
                };
                &budgeted
            }
        };
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

        let started = std::time::Instant::now();
        let result = self.run_in(&m, entry, input, &mut store);
        let latency_us = started.elapsed().as_micros().min(u64::MAX as u128) as u64;
        let fuel_used = limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        let result = result.map_err(|e| classify(store.data_mut(), e, limits));
        let ops = store.data().ops;
        let memory_bytes = store.data().limiter.peak;
        drop(store);

        if let Err(e) | Ok(Err(e)) = &result {
            // A first try in place that ran out of its budget is dropped
            // and not counted: the step runs again on a worker.
            if self.over_budget(e) {
                return Err(e.clone());
            }
        }
        let error_kind = match &result {
            Ok(Ok(Reply::Error { .. })) => Some("recipe"),
            Ok(Ok(_)) => None,
            Ok(Err(e)) | Err(e) => Some(e.kind()),
        };
        m.counters
            .detail
            .lock()
            .unwrap()
            .record(fuel_used, latency_us, error_kind);
        match result {
            Ok(Ok(reply)) => Ok(Outcome {
                reply,
                fuel_used,
                ops,
                version: m.manifest.version.clone(),
                hash: m.hash_hex.clone(),
                memory_bytes,
            }),
            Ok(Err(e)) | Err(e) => {
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
