//! Calls and callbacks: a fresh instance per call, run under the limits,
//! and a trap turned into a typed error.

use std::cell::RefCell;
use std::sync::Arc;

use wasmtime::{Engine, Instance, ModuleExport, Store, Trap};
use wazoo_sdk::abi::{self, CallRequest, CallerInfo, Reply, WatchRequest};
use wazoo_sdk::code::BAD_ARGUMENTS;

use super::guest_imports::{CallState, Entry, HostPtr};
use super::{Limits, Loaded, Outcome, Runtime};
use crate::error::RecipeError;
use crate::host::RecipeHost;

/// The most spent stores a thread holds for [`call_upkeep`]; a call that
/// finds the list full drops its store at once. Each holds a slot of the
/// instance pool (`max_instances`, 64 by default, shared with the workers),
/// and the thread's ready instance one more.
const SPENT_MAX: usize = 8;

/// What a thread that called [`defer_call_upkeep`] does between its calls'
/// replies and its next input (see there).
#[derive(Default)]
struct Upkeep {
    /// Finished calls' stores, not dropped yet.
    spent: Vec<Store<CallState>>,
    /// The module of the last call, to make the next instance of.
    next: Option<NextInstance>,
    /// An instance made ahead of a call, never run.
    ready: Option<Ready>,
}

struct NextInstance {
    engine: Engine,
    module: Arc<Loaded>,
    limits: Limits,
}

/// A fresh instance of `module`, made by [`call_upkeep`] ahead of the call
/// that will use it. Nothing in it has run: it is made only for modules
/// without a start function, so instantiating ran no guest code.
struct Ready {
    module: Arc<Loaded>,
    store: Store<CallState>,
    instance: Instance,
}

thread_local! {
    /// `None` unless the thread called [`defer_call_upkeep`].
    static UPKEEP: RefCell<Option<Upkeep>> = const { RefCell::new(None) };
}

/// From now on, the upkeep of a call on this thread waits for
/// [`call_upkeep`] instead of being done on the call's path:
/// - a finished call's store is not dropped before the call returns its
///   outcome (the drop is the pooling allocator's reset of the instance's
///   memory: a `PAGEMAP_SCAN` of its pages and the zeroing of those the
///   call dirtied, about 8 µs of a no-op call's 25 µs on the member's
///   thread); at most [`SPENT_MAX`] wait, the others are dropped at once;
/// - [`call_upkeep`] then makes a fresh instance of the last call's module,
///   which the next call of that module (on this thread, same version)
///   takes instead of instantiating (about 8 µs).
///
/// The member's thread does this, and calls [`call_upkeep`] once the
/// replies of its batch of inputs are written, so both leave the request's
/// path. Each call still runs in an instance nothing has run in, and a
/// finished instance is never run again, only dropped.
pub fn defer_call_upkeep() {
    UPKEEP.with(|u| {
        u.borrow_mut().get_or_insert_with(Upkeep::default);
    });
}

/// Whether [`call_upkeep`] has anything to do on this thread.
pub fn call_upkeep_waiting() -> bool {
    UPKEEP.with(|u| {
        u.borrow()
            .as_ref()
            .is_some_and(|u| !u.spent.is_empty() || u.next.is_some())
    })
}

/// Drops this thread's spent stores and makes the instance the next call
/// will likely take (see [`defer_call_upkeep`]); returns how many stores it
/// dropped.
pub fn call_upkeep() -> usize {
    let (spent, next) = UPKEEP.with(|u| match &mut *u.borrow_mut() {
        Some(u) => (std::mem::take(&mut u.spent), u.next.take()),
        None => (Vec::new(), None),
    });
    let dropped = spent.len();
    drop(spent);
    if let Some(next) = next {
        let ready = make_ready(next);
        let stale = UPKEEP.with(|u| {
            let mut u = u.borrow_mut();
            let u = u.as_mut().expect("upkeep deferred on this thread");
            std::mem::replace(&mut u.ready, ready)
        });
        drop(stale);
    }
    dropped
}

/// A store for one call's instance: memory capped by its limiter, and the
/// epoch deadline a trap (each call sets its fuel and deadline).
fn new_store(engine: &Engine, state: CallState) -> Store<CallState> {
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.epoch_deadline_trap();
    store
}

/// A store and instance of `next.module` for a later call: `None` if the
/// pool has no slot free now (the call then instantiates as usual).
fn make_ready(next: NextInstance) -> Option<Ready> {
    let mut store = new_store(
        &next.engine,
        CallState::new(HostPtr::none(), next.module.clone(), &next.limits),
    );
    // The store has no fuel yet (the call sets its own): had the module a
    // start function after all, it would trap at once, and no instance is
    // made ahead.
    match next.module.pre.instantiate(&mut store) {
        Ok(instance) => Some(Ready {
            module: next.module,
            store,
            instance,
        }),
        Err(e) => {
            tracing::debug!(module = %next.module.manifest.name, "no instance made ahead: {e:#}");
            None
        }
    }
}

/// This thread's ready instance, if it is one of `module` (this version).
/// One of another module stays where it is: [`call_upkeep`] replaces it,
/// so its drop too waits until the replies are written.
fn take_ready(module: &Arc<Loaded>) -> Option<(Store<CallState>, Instance)> {
    let ready = UPKEEP.with(|u| {
        let mut u = u.borrow_mut();
        let slot = &mut u.as_mut()?.ready;
        slot.take_if(|r| Arc::ptr_eq(&r.module, module))
    })?;
    Some((ready.store, ready.instance))
}

/// After a call: its store is dropped now, or kept for [`call_upkeep`],
/// which will also make the next instance of `next` (a module without a
/// start function).
fn retire(store: Store<CallState>, next: impl FnOnce() -> Option<NextInstance>) {
    let now = UPKEEP.with(|u| match &mut *u.borrow_mut() {
        Some(u) => {
            u.next = next();
            if u.spent.len() < SPENT_MAX {
                u.spent.push(store);
                None
            } else {
                Some(store)
            }
        }
        None => Some(store),
    });
    drop(now);
}

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
        let m = self.get(module).inspect_err(|e| self.count_unserved(e))?;
        if !m.manifest.methods.iter().any(|x| x == method) {
            let e = RecipeError::UnknownMethod {
                module: module.into(),
                method: method.into(),
            };
            // Failed before any guest code ran, and counted as a failure
            // of the module all the same (`recp`'s errors_by_kind, metrics).
            m.counters
                .detail
                .lock()
                .unwrap()
                .record(0, 0, Some(e.kind()));
            return Err(e);
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
        let m = self.get(module).inspect_err(|e| self.count_unserved(e))?;
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
        // SAFETY: lifetime erasure only; the store holding it is never run
        // again after this function (it is dropped here, or kept only to be
        // dropped by `retire`, and dropping it does not touch the host).
        let host: *mut (dyn RecipeHost + 'static) = unsafe { std::mem::transmute(host) };
        let (mut store, instance) = match take_ready(&m) {
            Some((mut store, instance)) => {
                let state = store.data_mut();
                state.host = HostPtr(host);
                state.limits = limits.clone();
                (store, Some(instance))
            }
            None => {
                let store = new_store(
                    &self.inner.engine,
                    CallState::new(HostPtr(host), m.clone(), limits),
                );
                (store, None)
            }
        };
        store.set_fuel(limits.fuel).expect("fuel is enabled");
        let tick = self.inner.epoch_tick.as_nanos().max(1);
        store.set_epoch_deadline((limits.deadline.as_nanos().div_ceil(tick) + 1) as u64);

        let started = std::time::Instant::now();
        let result = self.run_in(&m, entry, input, &mut store, instance);
        let latency_us = started.elapsed().as_micros().min(u64::MAX as u128) as u64;
        let fuel_used = limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        let result = result.map_err(|e| classify(store.data_mut(), e, limits));
        let ops = store.data().ops;
        let memory_bytes = store.data().limiter.peak;
        retire(store, || {
            m.warmable.then(|| NextInstance {
                engine: self.inner.engine.clone(),
                module: m.clone(),
                limits: self.inner.limits.clone(),
            })
        });

        if let Err(e) | Ok(Err(e)) = &result {
            // A first try in place that ran out of its budget is dropped
            // and not counted: the step runs again on a worker.
            if self.over_budget(e) {
                return Err(e.clone());
            }
        }
        let error_kind = match &result {
            // Arguments that do not decode (the SDK answers so before the
            // method runs), or that the recipe found wrong.
            Ok(Ok(Reply::Error { code, .. })) if *code == BAD_ARGUMENTS => Some("bad_arguments"),
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

    /// The wasm part of a call: instantiate (unless `ready` is an instance
    /// made ahead in `store`), place the input, run, read the reply.
    /// The outer error is a trap to classify; the inner one is already typed.
    fn run_in(
        &self,
        m: &Loaded,
        entry: Entry,
        input: &[u8],
        store: &mut Store<CallState>,
        ready: Option<Instance>,
    ) -> Result<Result<Reply, RecipeError>, wasmtime::Error> {
        let instance = match ready {
            Some(instance) => instance,
            None => m.pre.instantiate(&mut *store)?,
        };
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
