//! wazoo-sdk: write wazoo recipes in plain Rust.
//!
//! A recipe is a `cdylib` crate built for `wasm32-unknown-unknown`. Its methods
//! are plain functions `fn(&mut Ctx, Args) -> Result<Step<Out>>` where `Args:
//! Deserialize` and `Out: Serialize` (MessagePack on the wire); the [`recipe!`]
//! macro generates the module's exports, its manifest (a custom section the
//! host reads before anything runs) and a panic hook that hands panic
//! messages to the caller.
//!
//! ```ignore
//! use wazoo_sdk::prelude::*;
//!
//! recipe!(name = "counter", prefixes = ["/counters"], methods = [incr]);
//!
//! fn incr(cx: &mut Ctx, path: String) -> Result<Step<i64>> {
//!     let (data, stat) = cx.get(&path)?;
//!     let n = std::str::from_utf8(&data).ok().and_then(|s| s.parse().ok()).unwrap_or(0i64) + 1;
//!     cx.set(&path, n.to_string().as_bytes(), stat.version)?;
//!     Ok(Step::Done(n))
//! }
//! ```
//!
//! See docs/RECIPES.md in the wazoo repository for the whole walk-through.
//!
//! Layout: [`Ctx`] (the typed host API) and [`recipe!`] here; [`abi`], the
//! types and names shared with the host; `manifest` and `rt`, what
//! `recipe!` expands to; `sys`, the raw host imports; [`prelude`], [`code`].

pub mod abi;
#[doc(hidden)]
pub mod manifest;
#[doc(hidden)]
pub mod rt;
mod sys;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;

use abi::{AclEntry, AuthId, CallerInfo, NodeStat, OpOk, TreeOp};
use serde::Serialize;
use std::fmt;

pub use abi::{CreateMode, WatchEvent};
pub use rmp_serde;
pub use serde;

/// The usual imports of a recipe crate.
pub mod prelude {
    pub use crate::abi::{AuthId, CreateMode, NodeStat, WatchEvent};
    pub use crate::{code, perms, recipe, Acl, Ctx, Error, Fired, Result, Step};
    pub use serde::{Deserialize, Serialize};
}

/// ZooKeeper error codes (the values `Error::code` carries for tree errors).
pub mod code {
    pub const SYSTEM_ERROR: i32 = -1;
    pub const MARSHALLING_ERROR: i32 = -5;
    pub const UNIMPLEMENTED: i32 = -6;
    pub const BAD_ARGUMENTS: i32 = -8;
    pub const API_ERROR: i32 = -100;
    pub const NO_NODE: i32 = -101;
    pub const NO_AUTH: i32 = -102;
    pub const BAD_VERSION: i32 = -103;
    pub const NO_CHILDREN_FOR_EPHEMERALS: i32 = -108;
    pub const NODE_EXISTS: i32 = -110;
    pub const NOT_EMPTY: i32 = -111;
    pub const SESSION_EXPIRED: i32 = -112;
    pub const INVALID_ACL: i32 = -114;
    pub const SESSION_MOVED: i32 = -118;
    pub const QUOTA_EXCEEDED: i32 = -125;

    /// ZooKeeper's name for a code.
    pub fn name(code: i32) -> &'static str {
        match code {
            0 => "ok",
            SYSTEM_ERROR => "SystemError",
            MARSHALLING_ERROR => "MarshallingError",
            UNIMPLEMENTED => "Unimplemented",
            BAD_ARGUMENTS => "BadArguments",
            API_ERROR => "APIError",
            NO_NODE => "NoNode",
            NO_AUTH => "NoAuth",
            BAD_VERSION => "BadVersion",
            NO_CHILDREN_FOR_EPHEMERALS => "NoChildrenForEphemerals",
            NODE_EXISTS => "NodeExists",
            NOT_EMPTY => "Directory not empty",
            SESSION_EXPIRED => "Session expired",
            INVALID_ACL => "InvalidACL",
            SESSION_MOVED => "Session moved",
            QUOTA_EXCEEDED => "Quota has exceeded",
            _ => "error",
        }
    }
}

/// A recipe error: a ZooKeeper error code (or the recipe's own, conventionally
/// positive) and a message. Returned to the caller; nothing the call staged is
/// applied.
///
/// A tree op's error names the path it failed on: its message is
/// ZooKeeper's name for the code, `": "`, then the path (`NoNode:
/// /locks/x/lock-0000000003`), and [`path`](Self::path) holds the path. The
/// caller sees that message (`recipe error -101: NoNode: /locks/x/...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: i32,
    pub message: String,
    /// The path a tree op failed on (`None` for other errors).
    pub path: Option<String>,
}

impl Error {
    pub fn new(code: i32, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
            path: None,
        }
    }
    /// The error for a ZooKeeper code, with ZooKeeper's message.
    pub fn zk(code: i32) -> Error {
        Error::new(code, code::name(code))
    }
    /// The error of a tree op on `path`: ZooKeeper's message and the path.
    pub fn tree(code: i32, path: &str) -> Error {
        Error {
            code,
            message: format!("{}: {path}", code::name(code)),
            path: Some(path.to_string()),
        }
    }
    /// The path a tree op failed on, if this is a tree error.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }
    pub fn bad_arguments(message: impl Into<String>) -> Error {
        Error::new(code::BAD_ARGUMENTS, message)
    }
    /// The caller's session no longer owns what the recipe expected.
    pub fn session_lost() -> Error {
        Error::new(
            code::SESSION_EXPIRED,
            "the caller's node is gone (session lost)",
        )
    }
    pub fn is(&self, code: i32) -> bool {
        self.code == code
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a method returns when it does not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<T> {
    /// Finished with a value for the caller.
    Done(T),
    /// Waiting for the watch registered with `token` (by a `*_watch` call of
    /// this step) to fire; the host then runs the `on_watch` handler.
    Wait { token: String },
}

/// A fired watch, as the `on_watch` handler receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    pub token: String,
    pub path: String,
    pub event: WatchEvent,
}

/// Permission bits of an ACL entry (ZooKeeper's `ZooDefs.Perms`).
pub mod perms {
    pub const READ: i32 = 1;
    pub const WRITE: i32 = 2;
    pub const CREATE: i32 = 4;
    pub const DELETE: i32 = 8;
    pub const ADMIN: i32 = 16;
    pub const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;
}

/// The ACL a node is created with ([`Ctx::create_with_acl`]), as a client
/// gives it to ZooKeeper's create. The host expands and checks it with the
/// caller's identities exactly as for the caller's own create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    entries: Vec<AclEntry>,
}

impl Acl {
    /// Any list of entries.
    pub fn new(entries: Vec<AclEntry>) -> Acl {
        Acl { entries }
    }
    /// ZooKeeper's `CREATOR_ALL_ACL` (`auth` scheme, all permissions): every
    /// identity the caller authenticated as (digest, sasl, x509; not its
    /// address) gets all permissions. Refused with INVALID_ACL when the
    /// caller authenticated as nothing, as ZooKeeper refuses it.
    pub fn creator_all() -> Acl {
        Acl::new(vec![AclEntry {
            perms: perms::ALL,
            scheme: "auth".into(),
            id: String::new(),
        }])
    }
    /// ZooKeeper's `OPEN_ACL_UNSAFE`: world:anyone, all permissions.
    pub fn open_unsafe() -> Acl {
        Acl::new(vec![AclEntry {
            perms: perms::ALL,
            scheme: "world".into(),
            id: "anyone".into(),
        }])
    }
    /// ZooKeeper's `READ_ACL_UNSAFE`: world:anyone, read only.
    pub fn read_unsafe() -> Acl {
        Acl::new(vec![AclEntry {
            perms: perms::READ,
            scheme: "world".into(),
            id: "anyone".into(),
        }])
    }
    pub fn entries(&self) -> &[AclEntry] {
        &self.entries
    }
}

/// The typed host API: the tree as the call sees it (committed state plus what
/// the call itself has staged), notifications and logging. Writes are staged
/// and become one atomic transaction when the step succeeds.
pub struct Ctx {
    caller: CallerInfo,
}

impl Ctx {
    #[doc(hidden)]
    pub fn new(caller: CallerInfo) -> Ctx {
        Ctx { caller }
    }

    pub fn caller(&self) -> &CallerInfo {
        &self.caller
    }
    /// The calling session's id.
    pub fn caller_session(&self) -> i64 {
        self.caller.session
    }
    /// The call's guid: an id of this call, distinct from the session id:
    /// the client makes one per call and sends it again with every retry of
    /// that call, so a retried call sees the same guid; a callback sees the
    /// guid of the call that registered its wait; a client that sends none
    /// gets one made for that request alone. For node names that must be
    /// found again by any later call of the session (ZooKeeper Recipes and
    /// Solutions, the guid in lock node names), use the session id, as the
    /// built-in recipes do.
    pub fn caller_guid(&self) -> &str {
        &self.caller.guid
    }

    /// Runs a batch of tree ops in one host round trip; each has its own result.
    pub fn batch(&mut self, ops: &[TreeOp]) -> Vec<Result<OpOk>> {
        let req = abi::encode(ops).expect("encode tree ops");
        let resp = sys::tree(&req);
        let results: Vec<abi::OpResult> = abi::decode(&resp).expect("decode tree results");
        results
            .into_iter()
            .zip(ops)
            .map(|(r, op)| r.map_err(|code| Error::tree(code, op.path())))
            .collect()
    }

    fn one(&mut self, op: TreeOp) -> Result<OpOk> {
        self.batch(std::slice::from_ref(&op))
            .pop()
            .unwrap_or_else(|| Err(Error::zk(code::SYSTEM_ERROR)))
    }

    /// The node's data and stat.
    pub fn get(&mut self, path: &str) -> Result<(Vec<u8>, NodeStat)> {
        self.get_inner(path, None)
    }
    /// Like [`get`](Self::get), registering a data watch with `token`.
    pub fn get_watch(&mut self, path: &str, token: &str) -> Result<(Vec<u8>, NodeStat)> {
        self.get_inner(path, Some(token))
    }
    fn get_inner(&mut self, path: &str, watch: Option<&str>) -> Result<(Vec<u8>, NodeStat)> {
        match self.one(TreeOp::Get {
            path: path.into(),
            watch: watch.map(Into::into),
        })? {
            OpOk::Data { data, stat } => Ok((data, stat)),
            _ => Err(Error::zk(code::SYSTEM_ERROR)),
        }
    }

    /// The node's children (names, unsorted).
    pub fn children(&mut self, path: &str) -> Result<Vec<String>> {
        self.children_inner(path, None)
    }
    /// Like [`children`](Self::children), registering a child watch with `token`.
    pub fn children_watch(&mut self, path: &str, token: &str) -> Result<Vec<String>> {
        self.children_inner(path, Some(token))
    }
    fn children_inner(&mut self, path: &str, watch: Option<&str>) -> Result<Vec<String>> {
        match self.one(TreeOp::Children {
            path: path.into(),
            watch: watch.map(Into::into),
        })? {
            OpOk::Children { children } => Ok(children),
            _ => Err(Error::zk(code::SYSTEM_ERROR)),
        }
    }
    /// The children sorted by their 10-digit sequence suffix (then by name).
    pub fn children_sorted_by_sequence(&mut self, path: &str) -> Result<Vec<String>> {
        let mut kids = self.children(path)?;
        kids.sort_by(|a, b| sequence_of(a).cmp(&sequence_of(b)).then_with(|| a.cmp(b)));
        Ok(kids)
    }

    /// The node's stat, or `None` if it does not exist.
    pub fn exists(&mut self, path: &str) -> Result<Option<NodeStat>> {
        self.exists_inner(path, None)
    }
    /// Like [`exists`](Self::exists), registering a watch with `token` (fires on
    /// creation if absent, on change or deletion if present).
    pub fn exists_watch(&mut self, path: &str, token: &str) -> Result<Option<NodeStat>> {
        self.exists_inner(path, Some(token))
    }
    fn exists_inner(&mut self, path: &str, watch: Option<&str>) -> Result<Option<NodeStat>> {
        match self.one(TreeOp::Exists {
            path: path.into(),
            watch: watch.map(Into::into),
        })? {
            OpOk::Exists { stat } => Ok(stat),
            _ => Err(Error::zk(code::SYSTEM_ERROR)),
        }
    }

    /// The caller's identities (`ip`, `digest`, `sasl`, `x509`, `super`),
    /// the ones the host checks this step's reads and writes with.
    pub fn caller_ids(&self) -> &[AuthId] {
        &self.caller.ids
    }

    /// Creates a node open to everyone (world:anyone:cdrwa); returns the
    /// created path (with the sequence suffix if sequential).
    pub fn create(&mut self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        self.create_inner(path, data, mode, None)
    }
    /// Creates a node with `acl`, as a client's create with that ACL would
    /// (e.g. [`Acl::creator_all`]: only the caller's identities); fails with
    /// INVALID_ACL where ZooKeeper would refuse the client's create.
    pub fn create_with_acl(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: &Acl,
    ) -> Result<String> {
        self.create_inner(path, data, mode, Some(acl.entries.clone()))
    }
    fn create_inner(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: Option<Vec<AclEntry>>,
    ) -> Result<String> {
        match self.one(TreeOp::Create {
            path: path.into(),
            data: data.to_vec(),
            mode,
            acl,
        })? {
            OpOk::Created { path } => Ok(path),
            _ => Err(Error::zk(code::SYSTEM_ERROR)),
        }
    }
    /// Sets a node's data if its version is `version` (-1: any).
    pub fn set(&mut self, path: &str, data: &[u8], version: i32) -> Result<NodeStat> {
        match self.one(TreeOp::Set {
            path: path.into(),
            data: data.to_vec(),
            version,
        })? {
            OpOk::Stat { stat } => Ok(stat),
            _ => Err(Error::zk(code::SYSTEM_ERROR)),
        }
    }
    /// Deletes a node if its version is `version` (-1: any).
    pub fn delete(&mut self, path: &str, version: i32) -> Result<()> {
        self.one(TreeOp::Delete {
            path: path.into(),
            version,
        })
        .map(|_| ())
    }
    /// Fails with BadVersion (or NoNode) unless the node has this version.
    pub fn check(&mut self, path: &str, version: i32) -> Result<()> {
        self.one(TreeOp::Check {
            path: path.into(),
            version,
        })
        .map(|_| ())
    }

    /// Notifies a session with a MessagePack value, delivered after this step's changes.
    pub fn notify<T: Serialize + ?Sized>(&mut self, session: i64, value: &T) -> Result<()> {
        let payload =
            abi::encode(value).map_err(|e| Error::new(code::MARSHALLING_ERROR, e.to_string()))?;
        self.notify_raw(session, &payload)
    }
    /// Notifies a session with raw bytes.
    pub fn notify_raw(&mut self, session: i64, payload: &[u8]) -> Result<()> {
        match sys::notify(session, payload) {
            0 => Ok(()),
            c => Err(Error::zk(c)),
        }
    }

    /// Logs through the host's logger (rate-limited per call by the host).
    pub fn log(&self, level: i32, msg: &str) {
        sys::log(level, msg)
    }
    pub fn error(&self, msg: &str) {
        self.log(abi::level::ERROR, msg)
    }
    pub fn warn(&self, msg: &str) {
        self.log(abi::level::WARN, msg)
    }
    pub fn info(&self, msg: &str) {
        self.log(abi::level::INFO, msg)
    }
    pub fn debug(&self, msg: &str) {
        self.log(abi::level::DEBUG, msg)
    }
}

/// The sequence number of a sequential node's name (its trailing 10 digits).
pub fn sequence_of(name: &str) -> Option<u64> {
    let b = name.as_bytes();
    if b.len() < 10 || !b[b.len() - 10..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    name[name.len() - 10..].parse().ok()
}

/// The parent of a path (`/` for top-level nodes).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last component of a path.
pub fn name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Joins a parent path and a child name.
pub fn join(parent: &str, child: &str) -> String {
    if parent.ends_with('/') {
        format!("{parent}{child}")
    } else {
        format!("{parent}/{child}")
    }
}

/// Declares a recipe module: its name, the path prefixes it may touch, its
/// methods and (optionally) its watch handler and version (default: the
/// crate's version). Generates the manifest custom section, the ABI exports
/// (`alloc`, `dealloc`, `call`, `on_watch`), the panic hook and the global
/// allocator (dlmalloc starting in the initial memory's free tail, so a call
/// that fits there never grows memory; a recipe crate must not set its own).
///
/// ```ignore
/// recipe!(name = "lock", prefixes = ["/locks"], methods = [acquire, release], on_watch = recheck);
/// ```
#[macro_export]
macro_rules! recipe {
    (
        name = $name:literal,
        $(version = $version:literal,)?
        prefixes = [$($prefix:literal),* $(,)?],
        methods = [$($method:ident),* $(,)?]
        $(, on_watch = $on_watch:ident)?
        $(,)?
    ) => {
        const _: () = {
            const __WAZOO_NAME: &str = $name;
            const __WAZOO_VERSION: &str = $crate::__wazoo_or!([$($version)?] env!("CARGO_PKG_VERSION"));
            const __WAZOO_METHODS: &[&str] = &[$(stringify!($method)),*];
            const __WAZOO_PREFIXES: &[&str] = &[$($prefix),*];
            const __WAZOO_ON_WATCH: bool = $crate::__wazoo_has!([$($on_watch)?]);
            const __WAZOO_LEN: usize = $crate::manifest::encoded_len(
                __WAZOO_NAME, __WAZOO_VERSION, __WAZOO_METHODS, __WAZOO_PREFIXES, __WAZOO_ON_WATCH,
            );

            #[cfg(target_arch = "wasm32")]
            #[unsafe(link_section = "wazoo:recipe")]
            #[used]
            static __WAZOO_MANIFEST: [u8; __WAZOO_LEN] = $crate::manifest::encode::<__WAZOO_LEN>(
                __WAZOO_NAME, __WAZOO_VERSION, __WAZOO_METHODS, __WAZOO_PREFIXES, __WAZOO_ON_WATCH,
            );

            #[cfg(target_arch = "wasm32")]
            #[global_allocator]
            static __WAZOO_HEAP: $crate::rt::Heap = $crate::rt::Heap;

            #[cfg(target_arch = "wasm32")]
            #[unsafe(no_mangle)]
            extern "C" fn alloc(len: usize) -> *mut u8 {
                $crate::rt::alloc(len)
            }

            #[cfg(target_arch = "wasm32")]
            #[unsafe(no_mangle)]
            unsafe extern "C" fn dealloc(ptr: *mut u8, len: usize) {
                unsafe { $crate::rt::dealloc(ptr, len) }
            }

            #[cfg(target_arch = "wasm32")]
            #[unsafe(no_mangle)]
            unsafe extern "C" fn call(ptr: *mut u8, len: usize) -> u64 {
                unsafe {
                    $crate::rt::run_call(ptr, len, |cx, method, args| match method {
                        $(stringify!($method) => $crate::rt::invoke(cx, args, $method),)*
                        other => $crate::rt::unknown_method(other),
                    })
                }
            }

            $(
            #[cfg(target_arch = "wasm32")]
            #[unsafe(no_mangle)]
            unsafe extern "C" fn on_watch(ptr: *mut u8, len: usize) -> u64 {
                unsafe { $crate::rt::run_on_watch(ptr, len, $on_watch) }
            }
            )?

            // Type-check the handlers on every target.
            #[allow(dead_code)]
            fn __wazoo_check(cx: &mut $crate::Ctx) {
                $(let _ = |a: &[u8]| $crate::rt::invoke(cx, a, $method);)*
                $(let _ = $crate::rt::check_on_watch($on_watch);)?
            }
        };

        /// The recipe for `wazoo_sdk::testing::Harness` (native only).
        #[cfg(not(target_arch = "wasm32"))]
        #[doc(hidden)]
        #[allow(dead_code)]
        pub(crate) fn __wazoo_recipe() -> $crate::testing::Recipe {
            $crate::testing::Recipe {
                name: $name,
                prefixes: &[$($prefix),*],
                methods: &[$(stringify!($method)),*],
                call: |cx, method, args| match method {
                    $(stringify!($method) => $crate::rt::invoke(cx, args, $method),)*
                    other => $crate::rt::unknown_method(other),
                },
                on_watch: $crate::__wazoo_watch_fn!([$($on_watch)?]),
            }
        }
    };
}

/// The recipe this crate declares with [`recipe!`], for
/// [`testing::Harness::new`] (native targets only).
#[macro_export]
#[allow(clippy::crate_in_macro_def)] // the caller's crate is meant: it holds the recipe.
macro_rules! this_recipe {
    () => {
        crate::__wazoo_recipe()
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __wazoo_watch_fn {
    ([]) => {
        None
    };
    ([$on_watch:ident]) => {
        Some(|cx, fired| $crate::rt::invoke_watch(cx, fired, $on_watch))
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __wazoo_or {
    ([] $default:expr) => {
        $default
    };
    ([$value:expr] $default:expr) => {
        $value
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __wazoo_has {
    ([]) => {
        false
    };
    ([$i:ident]) => {
        true
    };
}
