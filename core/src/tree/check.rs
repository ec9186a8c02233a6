//! The rules a txn must meet whatever the tree holds, and the error a txn
//! that does not fit the tree gets.

use wazoo_proto::path;
use wazoo_proto::ErrorCode;

use super::node::{ttl_in_range, ZnodeType};
use crate::txn::{CreateTxn, NodeKind, Txn};

/// A txn that does not fit the tree; the tree is left exactly as it was.
/// The pipeline checked it against the same state, so this is a prep bug:
/// the pipeline answers the write with [`ApplyError::code`] and goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath { path: String, reason: String },
    #[error("create {0}: the node already exists")]
    NodeExists(String),
    #[error("{0}: no such node")]
    NoNode(String),
    #[error("{0}: the parent does not exist")]
    NoParent(String),
    #[error("create {0}: the parent is ephemeral and cannot have children")]
    EphemeralParent(String),
    #[error("delete {0}: the node has children")]
    NotEmpty(String),
    #[error("the root cannot be deleted")]
    DeleteRoot,
    #[error("create {path}: {reason}")]
    BadCreate { path: String, reason: String },
    #[error("a {0} txn cannot be part of a multi")]
    NotInMulti(&'static str),
    #[error("{0}: an ACL list cannot be empty")]
    EmptyAcl(String),
    #[error("op {index} of a multi: {error}")]
    Multi {
        index: usize,
        error: Box<ApplyError>,
    },
}

impl ApplyError {
    /// The error code a client gets for a write whose txn this refuses,
    /// the one ZooKeeper's prep answers for the same fault.
    pub fn code(&self) -> ErrorCode {
        match self {
            ApplyError::InvalidPath { .. }
            | ApplyError::DeleteRoot
            | ApplyError::BadCreate { .. }
            | ApplyError::NotInMulti(_) => ErrorCode::BadArguments,
            ApplyError::NodeExists(_) => ErrorCode::NodeExists,
            ApplyError::NoNode(_) | ApplyError::NoParent(_) => ErrorCode::NoNode,
            ApplyError::EphemeralParent(_) => ErrorCode::NoChildrenForEphemerals,
            ApplyError::NotEmpty(_) => ErrorCode::NotEmpty,
            ApplyError::EmptyAcl(_) => ErrorCode::InvalidAcl,
            ApplyError::Multi { error, .. } => error.code(),
        }
    }
}

/// The rules a txn must meet whatever the tree holds: everything
/// [`DataTree::apply`](super::DataTree::apply) checks before it looks at a node (path rules, the
/// node kind and its owner, the TTL range, a non-empty ACL list, what may
/// stand inside a multi). The pipeline's prep calls this on every txn it
/// produces, for clients and recipes alike, so a committed txn can only be
/// refused by apply where the tree itself disagrees with prep's view.
pub fn check_txn(txn: &Txn) -> Result<(), ApplyError> {
    match txn {
        Txn::Multi(ops) => check_ops(ops),
        Txn::Recipe(r) => check_ops(&r.ops),
        Txn::CreateSession { .. }
        | Txn::CloseSession
        | Txn::Error { .. }
        | Txn::Noop
        | Txn::Deploy(_)
        | Txn::Undeploy { .. }
        // Prep built it from a configuration it checked; the tree only
        // stores its text.
        | Txn::Reconfig { .. }
        | Txn::RecipeCounters(_)
        // The shell checked the snapshot it carries before it was prepped.
        | Txn::Restore(_) => Ok(()),
        Txn::SetRecipesAcl { acl, .. } => check_recipes_acl(acl),
        op => check_op(op),
    }
}

pub(super) fn check_ops(ops: &[Txn]) -> Result<(), ApplyError> {
    for (index, op) in ops.iter().enumerate() {
        check_op(op).map_err(|e| ApplyError::Multi {
            index,
            error: Box::new(e),
        })?;
    }
    Ok(())
}

/// One op of a multi, or a single txn (see [`check_txn`]).
pub(super) fn check_op(op: &Txn) -> Result<(), ApplyError> {
    match op {
        Txn::Create(c) => {
            check_path(&c.path)?;
            if c.path == "/" {
                return Err(ApplyError::NodeExists(c.path.clone()));
            }
            if c.acl.is_empty() {
                return Err(ApplyError::EmptyAcl(c.path.clone()));
            }
            created_kind(c).map(|_| ())
        }
        Txn::Delete { path } => {
            check_path(path)?;
            if path == "/" {
                return Err(ApplyError::DeleteRoot);
            }
            Ok(())
        }
        Txn::SetAcl { path, acl, .. } => {
            check_path(path)?;
            if acl.is_empty() {
                return Err(ApplyError::EmptyAcl(path.clone()));
            }
            Ok(())
        }
        Txn::SetData { path, .. } | Txn::Check { path } => check_path(path),
        Txn::CreateSession { .. } => Err(ApplyError::NotInMulti("createSession")),
        Txn::CloseSession => Err(ApplyError::NotInMulti("closeSession")),
        Txn::Multi(_) => Err(ApplyError::NotInMulti("multi")),
        Txn::Error { .. } => Err(ApplyError::NotInMulti("error")),
        Txn::Noop => Err(ApplyError::NotInMulti("noop")),
        Txn::Recipe(_) => Err(ApplyError::NotInMulti("recipe")),
        Txn::Deploy(_) | Txn::Undeploy { .. } => Err(ApplyError::NotInMulti("deploy")),
        Txn::Reconfig { .. } => Err(ApplyError::NotInMulti("reconfig")),
        Txn::RecipeCounters(_) => Err(ApplyError::NotInMulti("recipe counters")),
        Txn::SetRecipesAcl { .. } => Err(ApplyError::NotInMulti("setACL of /zookeeper/recipes")),
        Txn::Restore(_) => Err(ApplyError::NotInMulti("restore")),
    }
}

/// The ACL of /zookeeper/recipes may not be empty (an empty ACL lets
/// anyone deploy).
pub(super) fn check_recipes_acl(acl: &[wazoo_proto::Acl]) -> Result<(), ApplyError> {
    if acl.is_empty() {
        return Err(ApplyError::EmptyAcl("/zookeeper/recipes".into()));
    }
    Ok(())
}

/// The kind of node a create makes: a container or a TTL node has no
/// owner, and a TTL is within ZooKeeper's range.
pub(super) fn created_kind(c: &CreateTxn) -> Result<ZnodeType, ApplyError> {
    let bad = |reason: &str| ApplyError::BadCreate {
        path: c.path.clone(),
        reason: reason.to_string(),
    };
    match (c.kind, c.ephemeral_owner) {
        (NodeKind::Regular, 0) => Ok(ZnodeType::Persistent),
        (NodeKind::Regular, owner) => Ok(ZnodeType::Ephemeral { owner }),
        (NodeKind::Container, 0) => Ok(ZnodeType::Container),
        (NodeKind::Ttl { ttl_ms }, 0) if ttl_in_range(ttl_ms) => Ok(ZnodeType::Ttl { ttl_ms }),
        (NodeKind::Ttl { .. }, 0) => Err(bad("the TTL is out of range")),
        (_, _) => Err(bad("containers and TTL nodes cannot be ephemeral")),
    }
}

/// The check of a path a txn carries.
pub(super) fn check_path(p: &str) -> Result<(), ApplyError> {
    path::validate(p, false).map_err(|reason| ApplyError::InvalidPath {
        path: p.to_string(),
        reason,
    })
}
