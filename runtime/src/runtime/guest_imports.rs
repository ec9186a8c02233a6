//! The host functions a module imports (the `wazoo` import module of the
//! ABI): the tree, notifications, logging and panics, over guest memory
//! that is checked on every access.

use std::sync::Arc;

use wasmtime::{Caller, Memory, TypedFunc};
use wazoo_sdk::abi::{self, exports, OpOk, OpResult, TreeOp};

use super::limits::Limiter;
use super::{Limits, Loaded};
use crate::error::RecipeError;
use crate::host::{path_within, NoTree, RecipeHost};

/// The host a call runs against, erased to `'static` for the store. Valid
/// only while [`Runtime::run`] runs: after it returns, the store runs no
/// guest code again (it is dropped, or kept only to be dropped by
/// `calls::call_upkeep`); a store made ahead of its call holds
/// [`HostPtr::none`] until the call gives it its host.
pub(super) struct HostPtr(pub(super) *mut (dyn RecipeHost + 'static));
// SAFETY: the store (and so the pointer) never leaves the calling thread.
unsafe impl Send for HostPtr {}
unsafe impl Sync for HostPtr {}

impl HostPtr {
    /// The host of an instance made ahead of its call, which runs no guest
    /// code until the call gives it its host: one that refuses everything.
    pub(super) fn none() -> Self {
        // NoTree is zero-sized: any aligned pointer to it is valid.
        let none: *mut NoTree = std::ptr::NonNull::dangling().as_ptr();
        HostPtr(none)
    }
}

pub(super) struct CallState {
    pub(super) host: HostPtr,
    pub(super) module: Arc<Loaded>,
    pub(super) limits: Limits,
    pub(super) limiter: Limiter,
    /// Why a host function stopped the call (takes precedence over the trap).
    pub(super) fatal: Option<RecipeError>,
    pub(super) ops: usize,
    pub(super) notifications: usize,
    pub(super) logs: usize,
    pub(super) memory: Option<Memory>,
    pub(super) alloc: Option<TypedFunc<u32, u32>>,
    /// Set while the host runs the guest's `alloc` from inside an import: a
    /// guest that calls an import from there is refused (no re-entrancy).
    pub(super) in_alloc: bool,
}

impl CallState {
    /// The state of a call (or of an instance made ahead of one) of
    /// `module` under `limits`, nothing run yet.
    pub(super) fn new(host: HostPtr, module: Arc<Loaded>, limits: &Limits) -> Self {
        CallState {
            host,
            module,
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
        }
    }
}

pub(super) enum Entry {
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

pub(super) fn host_tree(
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
                TreeOp::Create {
                    path,
                    data,
                    mode,
                    acl,
                } => host
                    .create(&path, &data, mode, acl.as_deref())
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

pub(super) fn host_notify(
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

pub(super) fn host_log(
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

pub(super) fn host_panic(
    caller: &mut Caller<'_, CallState>,
    ptr: u32,
    len: u32,
) -> wasmtime::Error {
    const MAX: u32 = 16 << 10;
    match read_guest(caller, "panic message", ptr, len.min(MAX), MAX as usize) {
        Ok(msg) => {
            let message = String::from_utf8_lossy(&msg).into_owned();
            abort(caller, RecipeError::Panic { message })
        }
        Err(e) => e,
    }
}
