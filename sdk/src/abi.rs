//! The wazoo recipe ABI, version 1: the types that cross the boundary between
//! the host (`wazoo::plugin`) and a guest module, and the names both sides use.
//!
//! Everything that crosses the boundary is MessagePack (rmp-serde, structs as
//! maps with named fields), so a guest written in another language only needs a
//! MessagePack library. The host depends on this module too, so the two sides
//! cannot drift apart.
//!
//! A module is a core WebAssembly module (wasm32-unknown-unknown, no WASI):
//!
//! * custom section [`MANIFEST_SECTION`]: a MessagePack [`Manifest`];
//! * exports: `memory`; `alloc(len: i32) -> i32` and `dealloc(ptr: i32, len: i32)`;
//!   `call(ptr: i32, len: i32) -> i64` taking a [`CallRequest`] and returning a
//!   packed `(ptr << 32) | len` of a [`Reply`]; optionally `on_watch` with the
//!   same shape, taking a [`WatchRequest`];
//! * imports, module `"wazoo"`, nothing else:
//!   - `tree(ptr: i32, len: i32) -> i64`: a MessagePack `Vec<TreeOp>` in, a packed
//!     `(ptr, len)` of a `Vec<OpResult>` out, placed in guest memory by calling
//!     the guest's `alloc`;
//!   - `notify(session: i64, ptr: i32, len: i32) -> i32`: a payload for a session;
//!     returns 0 or a ZooKeeper error code;
//!   - `log(level: i32, ptr: i32, len: i32)`: a UTF-8 message (level 0 error ..
//!     4 trace);
//!   - `panic(ptr: i32, len: i32)`: the guest's panic message; never returns (the
//!     host traps the call and hands the message to the caller).

use serde::{Deserialize, Serialize};

/// ABI major version: a module with another major is refused at load.
pub const ABI_MAJOR: u16 = 1;
/// ABI minor version: additions a host of the same major understands.
pub const ABI_MINOR: u16 = 1;
// 1.1: `CallerInfo::ids` and `TreeOp::Create::acl` (both optional on the
// wire: a 1.0 guest ignores the ids and creates with world:anyone).

/// Name of the custom section that carries the [`Manifest`].
pub const MANIFEST_SECTION: &str = "wazoo:recipe";

/// Export names.
pub mod exports {
    pub const MEMORY: &str = "memory";
    pub const ALLOC: &str = "alloc";
    pub const DEALLOC: &str = "dealloc";
    pub const CALL: &str = "call";
    pub const ON_WATCH: &str = "on_watch";
}

/// Import names (all in module [`imports::MODULE`]).
pub mod imports {
    pub const MODULE: &str = "wazoo";
    pub const TREE: &str = "tree";
    pub const NOTIFY: &str = "notify";
    pub const LOG: &str = "log";
    pub const PANIC: &str = "panic";
}

/// Log levels of the `log` import.
pub mod level {
    pub const ERROR: i32 = 0;
    pub const WARN: i32 = 1;
    pub const INFO: i32 = 2;
    pub const DEBUG: i32 = 3;
    pub const TRACE: i32 = 4;
}

/// What a module declares about itself, read before anything runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// (major, minor) of the ABI the module was built against.
    pub abi: (u16, u16),
    /// The recipe's name: what clients call it by.
    pub name: String,
    /// The recipe's semver version.
    pub version: String,
    /// The methods `call` answers.
    pub methods: Vec<String>,
    /// The path prefixes it may touch (`/locks` covers `/locks` and `/locks/...`).
    pub prefixes: Vec<String>,
    /// Whether the module exports `on_watch`.
    #[serde(default)]
    pub on_watch: bool,
}

/// Who is calling: the session whose identity the recipe runs with, the
/// call's guid (an id of this call, distinct from the session id: the
/// client makes one per call and sends it again with every retry of that
/// call, so a retried call sees the same guid; a callback sees the guid of
/// the call that registered its wait; a client that sends none gets one
/// made for that request alone), and its authenticated identities.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CallerInfo {
    pub session: i64,
    pub guid: String,
    /// The identities the step runs with, as the server holds them for the
    /// caller's connection (ZooKeeper's auth info): `ip`, and whatever it
    /// authenticated as (`digest`, `sasl`, `x509`, `super`). A callback
    /// runs with the identities of the call that registered its wait. The
    /// host checks every read and write of the step against node ACLs with
    /// these, as it checks the caller's own requests.
    #[serde(default)]
    pub ids: Vec<AuthId>,
}

/// One identity (ZooKeeper's `Id`): a scheme and an id in that scheme.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AuthId {
    pub scheme: String,
    pub id: String,
}

/// One entry of a node's ACL (ZooKeeper's `ACL`): the permission bits it
/// grants (read 1, write 2, create 4, delete 8, admin 16) to the identity
/// `scheme:id`. The `auth` scheme (id ignored) stands for every identity the
/// caller authenticated as, as in a client's create.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AclEntry {
    pub perms: i32,
    pub scheme: String,
    pub id: String,
}

/// Input of `call`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRequest {
    pub method: String,
    /// The method's arguments, MessagePack, passed through untouched.
    #[serde(with = "bytes")]
    pub args: Vec<u8>,
    pub caller: CallerInfo,
}

/// What happened to a watched node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WatchEvent {
    Created,
    Deleted,
    DataChanged,
    ChildrenChanged,
}

/// Input of `on_watch`: a watch the recipe registered with `token` fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchRequest {
    pub token: String,
    pub path: String,
    pub event: WatchEvent,
    /// The session on whose behalf the watch was registered.
    pub caller: CallerInfo,
}

/// Output of `call` and `on_watch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// Finished; the value is MessagePack, passed through to the caller.
    Done(#[serde(with = "bytes")] Vec<u8>),
    /// Not finished: waiting for the watch registered with `token` to fire.
    Wait { token: String },
    /// Failed: nothing the call staged may be applied.
    Error { code: i32, message: String },
}

/// What a client receives in a recipe notification frame (xid
/// [`NOTIFICATION_XID`], reply header err 0, then one jute buffer holding
/// this, MessagePack).
///
/// - `Finished`: a call that answered `Wait { token }` is over. The host
///   sends it to the waiting session when an `on_watch` step for that token
///   ends with `Done` (the value) or fails (`Reply::Error`); a step that
///   answers `Wait` again sends nothing. Also sent with an error when the
///   module is unloaded while the session waits.
/// - `Message`: a payload the recipe sent with `notify`.
///
/// Notifications are ops of the txn that produced them: every member applies
/// them in zxid order and the member holding the session's connection
/// delivers them after the changes of that txn (and its watch events).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Notification {
    Finished {
        module: String,
        token: String,
        reply: Reply,
    },
    Message {
        module: String,
        #[serde(with = "bytes")]
        payload: Vec<u8>,
    },
}

/// The xid of recipe notification frames (wazoo's extension; ZooKeeper's
/// watch events use -1).
pub const NOTIFICATION_XID: i32 = -0x5A00;

/// The opcode of a recipe call request (outside ZooKeeper's range). Its body
/// is three jute fields: module (string), method (string), args (buffer,
/// MessagePack); the reply body is one buffer holding a MessagePack
/// [`Reply`] (header err 0), or an empty body with a ZooKeeper error code in
/// the header when the request never reached a recipe (session expired,
/// not connected to a serving member, malformed request).
pub const CALL_OPCODE: i32 = 0x5A00;

/// How a node is created (ZooKeeper's CreateMode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CreateMode {
    Persistent,
    PersistentSequential,
    Ephemeral,
    EphemeralSequential,
    Container,
    /// Persistent with a TTL in milliseconds.
    PersistentWithTtl(i64),
    /// Persistent sequential with a TTL in milliseconds.
    PersistentSequentialWithTtl(i64),
}

impl CreateMode {
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl(_)
        )
    }
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }
}

/// A node's Stat, as ZooKeeper defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeStat {
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeral_owner: i64,
    pub data_length: i32,
    pub num_children: i32,
    pub pzxid: i64,
}

/// One tree operation of a `tree` batch. Reads may register a one-shot watch;
/// when it fires the host runs `on_watch` with the token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TreeOp {
    Get {
        path: String,
        watch: Option<String>,
    },
    Children {
        path: String,
        watch: Option<String>,
    },
    Exists {
        path: String,
        watch: Option<String>,
    },
    Create {
        path: String,
        #[serde(with = "bytes")]
        data: Vec<u8>,
        mode: CreateMode,
        /// The node's ACL, checked and expanded as ZooKeeper does for a
        /// client's create with the caller's identities (InvalidACL if it
        /// is empty, names an unknown scheme, or uses `auth` for a caller
        /// that authenticated as nothing). `None`: world:anyone:cdrwa.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        acl: Option<Vec<AclEntry>>,
    },
    Set {
        path: String,
        #[serde(with = "bytes")]
        data: Vec<u8>,
        /// Expected version, -1 for any.
        version: i32,
    },
    Delete {
        path: String,
        version: i32,
    },
    Check {
        path: String,
        version: i32,
    },
}

impl TreeOp {
    pub fn path(&self) -> &str {
        match self {
            TreeOp::Get { path, .. }
            | TreeOp::Children { path, .. }
            | TreeOp::Exists { path, .. }
            | TreeOp::Create { path, .. }
            | TreeOp::Set { path, .. }
            | TreeOp::Delete { path, .. }
            | TreeOp::Check { path, .. } => path,
        }
    }
    pub fn watch(&self) -> Option<&str> {
        match self {
            TreeOp::Get { watch, .. }
            | TreeOp::Children { watch, .. }
            | TreeOp::Exists { watch, .. } => watch.as_deref(),
            _ => None,
        }
    }
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            TreeOp::Create { .. } | TreeOp::Set { .. } | TreeOp::Delete { .. }
        )
    }
}

/// The successful result of one [`TreeOp`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpOk {
    /// `Get`: the data and stat.
    Data {
        #[serde(with = "bytes")]
        data: Vec<u8>,
        stat: NodeStat,
    },
    /// `Children`: the child names (unsorted, as ZooKeeper returns them).
    Children { children: Vec<String> },
    /// `Exists`: the stat, or none.
    Exists { stat: Option<NodeStat> },
    /// `Create`: the created path (with the sequence suffix if sequential).
    Created { path: String },
    /// `Set`: the new stat.
    Stat { stat: NodeStat },
    /// `Delete` and `Check`.
    Done,
}

/// The result of one [`TreeOp`]: `Err` holds a ZooKeeper error code.
pub type OpResult = Result<OpOk, i32>;

/// Packs a (ptr, len) pair into the i64 that `call`, `on_watch` and `tree` return.
pub const fn pack(ptr: u32, len: u32) -> u64 {
    ((ptr as u64) << 32) | len as u64
}

/// Splits a packed (ptr, len).
pub const fn unpack(v: u64) -> (u32, u32) {
    ((v >> 32) as u32, v as u32)
}

/// Encodes a value as MessagePack with named fields (the ABI's encoding).
pub fn encode<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, rmp_serde::encode::Error> {
    rmp_serde::to_vec_named(v)
}

/// Decodes a MessagePack value.
pub fn decode<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Result<T, rmp_serde::decode::Error> {
    rmp_serde::from_slice(b)
}

/// Serde helper: `Vec<u8>` as MessagePack bin (accepts arrays of ints too).
pub mod bytes {
    use serde::de::{Error, SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<Vec<u8>, E> {
                Ok(v.as_bytes().to_vec())
            }
            fn visit_unit<E: Error>(self) -> Result<Vec<u8>, E> {
                Ok(Vec::new())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Vec<u8>, A::Error> {
                let mut out = Vec::with_capacity(a.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(b) = a.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(out)
            }
        }
        d.deserialize_byte_buf(V)
    }
}
