//! Typed errors of loading a module and of running a call.

use std::time::Duration;

/// Why a module was refused at load (the previously loaded version, if any,
/// keeps serving).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read module: {0}")]
    Io(String),
    #[error("invalid module: {0}")]
    Invalid(String),
    #[error(
        "module has no `wazoo:recipe` manifest section (build it with wazoo-sdk's recipe! macro)"
    )]
    NoManifest,
    #[error("bad manifest: {0}")]
    BadManifest(String),
    #[error(
        "module built for recipe ABI {major}.{minor}; this host speaks {}.{}",
        wazoo_sdk::abi::ABI_MAJOR,
        wazoo_sdk::abi::ABI_MINOR
    )]
    AbiVersion { major: u16, minor: u16 },
    #[error("cannot compile module: {0}")]
    Compile(String),
    #[error("module lacks the export `{name}` ({expected})")]
    MissingExport { name: String, expected: String },
    #[error("export `{name}` has the wrong type: expected {expected}, found {found}")]
    BadExport {
        name: String,
        expected: String,
        found: String,
    },
    #[error("module imports `{module}::{name}`, which the host does not provide (a recipe may import only wazoo::tree, notify, log and panic)")]
    UnknownImport { module: String, name: String },
    #[error("import `{module}::{name}` has the wrong type: expected {expected}, found {found}")]
    BadImport {
        module: String,
        name: String,
        expected: String,
        found: String,
    },
    #[error("manifest says on_watch but the module does not export it")]
    MissingOnWatch,
}

/// Why a call or callback failed. Whatever it staged must be discarded; the
/// runtime and every other call are unaffected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecipeError {
    #[error("no recipe module named {0:?} is loaded")]
    UnknownModule(String),
    #[error("recipe {module:?} has no method {method:?}")]
    UnknownMethod { module: String, method: String },
    #[error("recipe {0:?} has no on_watch handler")]
    NoWatchHandler(String),
    #[error("recipe ran out of fuel (budget {budget})")]
    FuelExhausted { budget: u64 },
    #[error("recipe exceeded its deadline of {deadline:?}")]
    DeadlineExceeded { deadline: Duration },
    #[error("recipe exceeded its memory cap of {limit} bytes")]
    MemoryLimit { limit: usize },
    #[error("recipe overflowed its stack")]
    StackOverflow,
    #[error("recipe panicked: {message}")]
    Panic { message: String },
    #[error("recipe trapped: {message}")]
    Trap { message: String },
    #[error(
        "recipe passed an out-of-bounds pointer: {what} at {ptr}+{len} (memory is {memory} bytes)"
    )]
    OutOfBounds {
        what: &'static str,
        ptr: u32,
        len: u32,
        memory: usize,
    },
    #[error("recipe reply of {len} bytes exceeds the cap of {limit}")]
    ReplyTooLarge { len: usize, limit: usize },
    #[error("recipe sent {what} of {len} bytes (cap {limit})")]
    TooLarge {
        what: &'static str,
        len: usize,
        limit: usize,
    },
    #[error("recipe sent a malformed {what}: {message}")]
    BadMessage { what: &'static str, message: String },
    #[error("recipe touched {path:?}, outside its declared prefixes {prefixes:?}")]
    PathOutsidePrefixes { path: String, prefixes: Vec<String> },
    #[error("recipe exceeded {limit} tree ops in one call")]
    TooManyOps { limit: usize },
    #[error("recipe exceeded {limit} notifications in one call")]
    TooManyNotifications { limit: usize },
    #[error("cannot instantiate recipe: {0}")]
    Instantiate(String),
}

impl RecipeError {
    /// A short stable name for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            RecipeError::UnknownModule(_) => "unknown_module",
            RecipeError::UnknownMethod { .. } => "unknown_method",
            RecipeError::NoWatchHandler(_) => "no_watch_handler",
            RecipeError::FuelExhausted { .. } => "fuel",
            RecipeError::DeadlineExceeded { .. } => "deadline",
            RecipeError::MemoryLimit { .. } => "memory",
            RecipeError::StackOverflow => "stack",
            RecipeError::Panic { .. } => "panic",
            RecipeError::Trap { .. } => "trap",
            RecipeError::OutOfBounds { .. } => "out_of_bounds",
            RecipeError::ReplyTooLarge { .. } => "reply_too_large",
            RecipeError::TooLarge { .. } => "too_large",
            RecipeError::BadMessage { .. } => "bad_message",
            RecipeError::PathOutsidePrefixes { .. } => "path_outside_prefixes",
            RecipeError::TooManyOps { .. } => "too_many_ops",
            RecipeError::TooManyNotifications { .. } => "too_many_notifications",
            RecipeError::Instantiate(_) => "instantiate",
        }
    }

    /// The ZooKeeper error code a client sees for it.
    pub fn code(&self) -> wazoo_proto::ErrorCode {
        use wazoo_proto::ErrorCode as E;
        match self {
            RecipeError::UnknownModule(_)
            | RecipeError::UnknownMethod { .. }
            | RecipeError::NoWatchHandler(_) => E::Unimplemented,
            RecipeError::PathOutsidePrefixes { .. } => E::NoAuth,
            RecipeError::Instantiate(_) => E::ThrottledOp,
            _ => E::SystemError,
        }
    }
}
