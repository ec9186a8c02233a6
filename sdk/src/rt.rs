//! Glue the `recipe!` macro expands to: memory hand-off, request decoding,
//! dispatch, reply encoding and the panic hook. Not a public API.

use crate::abi::{self, CallRequest, Reply, WatchRequest};
use crate::{code, Ctx, Error, Fired, Result, Step};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The guest's global allocator (set by the `recipe!` macro): dlmalloc over
/// the slack of the initial memory first, `memory.grow` after.
#[cfg(target_arch = "wasm32")]
pub use dlmalloc::GlobalDlmalloc as Heap;

/// `alloc` export: `len` bytes the host fills (owned by the guest afterwards).
pub fn alloc(len: usize) -> *mut u8 {
    if len == 0 {
        return std::ptr::NonNull::<u8>::dangling().as_ptr();
    }
    let layout = std::alloc::Layout::array::<u8>(len).expect("layout");
    unsafe { std::alloc::alloc(layout) }
}

/// `dealloc` export.
///
/// # Safety
/// `ptr` must come from [`alloc`] with the same `len`.
pub unsafe fn dealloc(ptr: *mut u8, len: usize) {
    if len != 0 && !ptr.is_null() {
        drop(unsafe { take(ptr as u32, len as u32) });
    }
}

/// Takes ownership of `len` bytes at `ptr` placed by the host through `alloc`.
///
/// # Safety
/// `ptr` must come from [`alloc`] with the same `len`.
pub unsafe fn take(ptr: u32, len: u32) -> Vec<u8> {
    if len == 0 {
        return Vec::new();
    }
    unsafe { Vec::from_raw_parts(ptr as usize as *mut u8, len as usize, len as usize) }
}

/// Leaks a reply buffer to the host (the instance is discarded after the call).
fn give(buf: Vec<u8>) -> u64 {
    let buf = buf.into_boxed_slice();
    let len = buf.len() as u32;
    let ptr = Box::into_raw(buf) as *mut u8 as usize as u32;
    abi::pack(ptr, len)
}

fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let msg = info.to_string();
            crate::sys::panic(&msg);
        }))
    });
}

fn reply(r: Result<Reply>) -> u64 {
    let r = r.unwrap_or_else(|e| Reply::Error {
        code: e.code,
        message: e.message,
    });
    give(abi::encode(&r).unwrap_or_else(|e| {
        abi::encode(&Reply::Error {
            code: code::MARSHALLING_ERROR,
            message: e.to_string(),
        })
        .unwrap_or_default()
    }))
}

/// The body of the `call` export.
///
/// # Safety
/// `(ptr, len)` must come from [`alloc`].
pub unsafe fn run_call(
    ptr: *mut u8,
    len: usize,
    dispatch: impl FnOnce(&mut Ctx, &str, &[u8]) -> Result<Reply>,
) -> u64 {
    install_panic_hook();
    let input = unsafe { take(ptr as u32, len as u32) };
    let r = match abi::decode::<CallRequest>(&input) {
        Ok(req) => {
            let mut cx = Ctx::new(req.caller);
            dispatch(&mut cx, &req.method, &req.args)
        }
        Err(e) => Err(Error::new(
            code::MARSHALLING_ERROR,
            format!("bad call request: {e}"),
        )),
    };
    reply(r)
}

/// The body of the `on_watch` export.
///
/// # Safety
/// `(ptr, len)` must come from [`alloc`].
pub unsafe fn run_on_watch<T: Serialize>(
    ptr: *mut u8,
    len: usize,
    handler: fn(&mut Ctx, Fired) -> Result<Step<T>>,
) -> u64 {
    install_panic_hook();
    let input = unsafe { take(ptr as u32, len as u32) };
    let r = match abi::decode::<WatchRequest>(&input) {
        Ok(req) => {
            let mut cx = Ctx::new(req.caller);
            let fired = Fired {
                token: req.token,
                path: req.path,
                event: req.event,
            };
            handler(&mut cx, fired).and_then(step_reply)
        }
        Err(e) => Err(Error::new(
            code::MARSHALLING_ERROR,
            format!("bad watch request: {e}"),
        )),
    };
    reply(r)
}

/// Runs an `on_watch` handler and encodes its step (the harness's call).
pub fn invoke_watch<T: Serialize>(
    cx: &mut Ctx,
    fired: Fired,
    handler: fn(&mut Ctx, Fired) -> Result<Step<T>>,
) -> Result<Reply> {
    handler(cx, fired).and_then(step_reply)
}

/// Type check for an `on_watch` handler.
pub fn check_on_watch<T: Serialize>(
    handler: fn(&mut Ctx, Fired) -> Result<Step<T>>,
) -> fn(&mut Ctx, Fired) -> Result<Step<T>> {
    handler
}

fn step_reply<T: Serialize>(s: Step<T>) -> Result<Reply> {
    match s {
        Step::Done(v) => abi::encode(&v).map(Reply::Done).map_err(|e| {
            Error::new(
                code::MARSHALLING_ERROR,
                format!("cannot encode the result: {e}"),
            )
        }),
        Step::Wait { token } => Ok(Reply::Wait { token }),
    }
}

/// Decodes the arguments, runs a method and encodes its step.
pub fn invoke<A: DeserializeOwned, T: Serialize>(
    cx: &mut Ctx,
    args: &[u8],
    f: impl FnOnce(&mut Ctx, A) -> Result<Step<T>>,
) -> Result<Reply> {
    // No arguments at all decodes as MessagePack nil (so `()` and `Option` work).
    let args: &[u8] = if args.is_empty() { &[0xc0] } else { args };
    let a: A =
        abi::decode(args).map_err(|e| Error::bad_arguments(format!("bad arguments: {e}")))?;
    f(cx, a).and_then(step_reply)
}

pub fn unknown_method(method: &str) -> Result<Reply> {
    Err(Error::new(
        code::UNIMPLEMENTED,
        format!("no method {method:?}"),
    ))
}
