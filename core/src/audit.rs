//! ZooKeeper's audit records as data (ZooKeeper Audit Logging, "ZooKeeper
//! Audit Logs"; `audit.enable`).
//!
//! The pipeline makes an [`AuditRecord`] where ZooKeeper 3.8 logs one and
//! hands it to the shell as an output, in order with the rest; the shell
//! stamps the time and writes the line. Nothing here reads a clock or
//! touches a file.
//!
//! Which records, and where (as ZooKeeper's `AuditHelper`,
//! `FinalRequestProcessor` and `DataTree.deleteNodes`):
//!
//! - create (also create2 and createContainer; not createTTL), delete,
//!   setData, setAcl, multi and reconfig, on the member the client is
//!   connected to, once the request's outcome is known: `success` once
//!   its txn is applied, `failure` when it was refused;
//! - a successful multi: one record per create, delete and setData in it
//!   (checks leave none); a failed one: a single `multiOperation` record;
//! - `ephemeralZNodeDeletionOnSessionCloseOrExpire`, one per ephemeral a
//!   closed or expired session leaves, on every member that applies the
//!   close, with the server's own user;
//! - `serverStart` and `serverStop`, written by the shell.

use wazoo_proto::{Acl, CreateMode, Request};

use crate::acl::AuthInfo;
use crate::txn::Txn;

/// The `operation` of a record, as ZooKeeper's `AuditConstants` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditOp {
    ServerStart,
    ServerStop,
    Create,
    Delete,
    SetData,
    SetAcl,
    MultiOperation,
    Reconfig,
    /// An ephemeral deleted because its session closed or expired.
    EphemeralCleanup,
}

impl AuditOp {
    pub fn name(self) -> &'static str {
        match self {
            AuditOp::ServerStart => "serverStart",
            AuditOp::ServerStop => "serverStop",
            AuditOp::Create => "create",
            AuditOp::Delete => "delete",
            AuditOp::SetData => "setData",
            AuditOp::SetAcl => "setAcl",
            AuditOp::MultiOperation => "multiOperation",
            AuditOp::Reconfig => "reconfig",
            AuditOp::EphemeralCleanup => "ephemeralZNodeDeletionOnSessionCloseOrExpire",
        }
    }
}

/// The `result` of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditResult {
    Success,
    Failure,
    /// serverStop: logged before the server has actually stopped.
    Invoked,
}

impl AuditResult {
    pub fn name(self) -> &'static str {
        match self {
            AuditResult::Success => "success",
            AuditResult::Failure => "failure",
            AuditResult::Invoked => "invoked",
        }
    }
}

/// Who did it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditUser {
    /// The server itself (a system operation): the shell fills in the user
    /// the process runs as, as ZooKeeper logs its login or system user.
    Server,
    /// A client: its identities' user names joined by `,` (see
    /// [`users_of`]); `None` when it has none, and the field is left out.
    Client(Option<String>),
}

/// One audit record, every field as ZooKeeper writes it; a `None` field
/// is left out of the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub session: Option<i64>,
    pub user: AuditUser,
    /// The client's address.
    pub ip: Option<String>,
    pub operation: AuditOp,
    pub znode: Option<String>,
    pub znode_type: Option<CreateMode>,
    /// setAcl's ACL, as [`acl_text`] writes it.
    pub acl: Option<String>,
    pub result: AuditResult,
}

impl AuditRecord {
    /// A record of the server itself (serverStart, serverStop).
    pub fn server(operation: AuditOp, result: AuditResult) -> AuditRecord {
        AuditRecord {
            session: None,
            user: AuditUser::Server,
            ip: None,
            operation,
            znode: None,
            znode_type: None,
            acl: None,
            result,
        }
    }

    /// ZooKeeper's text of the record (`AuditEvent.toString`): `key=value`
    /// pairs separated by a tab, in the order session, user, ip,
    /// operation, znode, znode_type, acl, and `result` last. `server_user`
    /// stands for [`AuditUser::Server`].
    pub fn line(&self, server_user: &str) -> String {
        let session = self.session.map(|s| format!("0x{s:x}"));
        let user = match &self.user {
            AuditUser::Server => Some(server_user),
            AuditUser::Client(u) => u.as_deref(),
        };
        let fields = [
            ("session", session.as_deref()),
            ("user", user),
            ("ip", self.ip.as_deref()),
            ("operation", Some(self.operation.name())),
            ("znode", self.znode.as_deref()),
            ("znode_type", self.znode_type.map(create_mode_name)),
            ("acl", self.acl.as_deref()),
            ("result", Some(self.result.name())),
        ];
        let mut out = String::with_capacity(128);
        for (key, value) in fields {
            let Some(value) = value else { continue };
            if !out.is_empty() {
                out.push('\t');
            }
            out.push_str(key);
            out.push('=');
            out.push_str(value);
        }
        out
    }
}

/// ZooKeeper's name of a create mode in audit records (the lower-cased
/// name of its `CreateMode`).
pub fn create_mode_name(mode: CreateMode) -> &'static str {
    match mode {
        CreateMode::Persistent => "persistent",
        CreateMode::Ephemeral => "ephemeral",
        CreateMode::PersistentSequential => "persistent_sequential",
        CreateMode::EphemeralSequential => "ephemeral_sequential",
        CreateMode::Container => "container",
        CreateMode::PersistentWithTtl => "persistent_with_ttl",
        CreateMode::PersistentSequentialWithTtl => "persistent_sequential_with_ttl",
    }
}

/// An ACL list as ZooKeeper's `ZKUtil.aclToString` writes it:
/// `scheme:id:perms` per entry, perms in the order `cdrwa`, and the
/// entries run together with no separator (ZooKeeper's own quirk, kept so
/// that tools reading its records read these).
pub fn acl_text(acl: &[Acl]) -> String {
    let mut out = String::new();
    for a in acl {
        out.push_str(&a.id.scheme);
        out.push(':');
        out.push_str(&a.id.id);
        out.push(':');
        out.push_str(&wazoo_proto::perms::letters(a.perms));
    }
    out
}

/// The `user` of a client's records: the user name of each of its
/// identities joined by `,`, as ZooKeeper's `AuthUtil.getUsers` (an `ip`
/// identity is its address, a `digest` one the user before the `:`,
/// `sasl` and `x509` ones their id; a scheme with no provider, such as
/// `super`, and an empty name give nothing). `None` when nothing is left.
///
/// In ZooKeeper's order: a connection keeps its identities in a
/// `ConcurrentHashMap` key set, so they come in the order of that map's
/// table (see [`java_set_order`]), not in the order they were added.
pub fn users_of(auth: &AuthInfo) -> Option<String> {
    let names: Vec<String> = java_set_order(&auth.ids)
        .into_iter()
        .filter_map(|id| match id.scheme.as_str() {
            "digest" => id.id.split(':').next().map(str::to_string),
            "ip" => Some(match id.id.parse::<std::net::IpAddr>() {
                Ok(ip) => java_host_address(ip),
                Err(_) => id.id.clone(),
            }),
            "sasl" | "x509" => Some(id.id.clone()),
            _ => None,
        })
        .filter(|n| !n.trim().is_empty())
        .collect();
    (!names.is_empty()).then(|| names.join(","))
}

/// An address as Java's `InetAddress.getHostAddress` writes it, as
/// ZooKeeper's records show it: an IPv4 address (also one mapped into
/// IPv6) dotted, an IPv6 one as eight hexadecimal groups without `::`
/// (`0:0:0:0:0:0:0:1`).
pub fn java_host_address(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6
                .segments()
                .iter()
                .map(|g| format!("{g:x}"))
                .collect::<Vec<_>>()
                .join(":"),
        },
    }
}

/// The identities in the order a Java `ConcurrentHashMap` key set of
/// ZooKeeper's `Id` records iterates them: by table slot (the spread hash
/// of `Id.hashCode`, `37 * (37 * 17 + scheme.hashCode()) +
/// id.hashCode()`, masked by the table's size: 16, doubled each time the
/// set reaches three quarters of it), and in the order added within a
/// slot. (Exact up to the few identities a connection has; a slot that
/// grows into a tree is not modelled.)
pub fn java_set_order(ids: &[wazoo_proto::Id]) -> Vec<&wazoo_proto::Id> {
    fn java_string_hash(s: &str) -> i32 {
        s.encode_utf16()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
    }
    let mut table = 16usize;
    while ids.len() >= table / 4 * 3 {
        table *= 2;
    }
    let slot = |id: &wazoo_proto::Id| {
        // ZooKeeper's `ip` ids hold Java's text of the address.
        let text = match (id.scheme.as_str(), id.id.parse::<std::net::IpAddr>()) {
            ("ip", Ok(ip)) => java_host_address(ip),
            _ => id.id.clone(),
        };
        let h = 37i32
            .wrapping_mul(
                37i32
                    .wrapping_mul(17)
                    .wrapping_add(java_string_hash(&id.scheme)),
            )
            .wrapping_add(java_string_hash(&text));
        let spread = (h ^ ((h as u32) >> 16) as i32) & 0x7fff_ffff;
        spread as usize & (table - 1)
    };
    let mut ordered: Vec<&wazoo_proto::Id> = ids.iter().collect();
    ordered.sort_by_key(|id| slot(id));
    ordered
}

/// What the member a client is connected to keeps of an audited write
/// until its outcome is known: who sent it, and what of the request the
/// records show (ZooKeeper reads these from the request itself, so a
/// create's mode and a setAcl's ACL are the client's, before any fixup).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRequest {
    session: i64,
    user: Option<String>,
    ip: Option<String>,
    op: AuditOp,
    path: Option<String>,
    mode: Option<CreateMode>,
    acl: Option<String>,
    /// A multi's creates (create, create2, createContainer): the mode of
    /// each by the path it asked for. A sequential create's record thus
    /// has no znode_type, its created path not being the one asked for,
    /// as in ZooKeeper.
    multi_modes: Vec<(String, CreateMode)>,
}

impl AuditRequest {
    /// The request to audit, if ZooKeeper audits its kind: `None` for
    /// reads, sync, closeSession, createTTL (which ZooKeeper 3.8 leaves
    /// out) and wazoo's own requests, and for a create whose flags name no
    /// mode (ZooKeeper fails to audit it).
    pub fn of(
        req: &Request,
        session: i64,
        auth: &AuthInfo,
        ip: Option<String>,
    ) -> Option<AuditRequest> {
        let mut mode = None;
        let mut acl = None;
        let mut multi_modes = Vec::new();
        let (op, path) = match req {
            Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) => {
                mode = Some(CreateMode::from_flags(c.flags)?);
                (AuditOp::Create, Some(c.path.clone()))
            }
            Request::Delete { path, .. } | Request::DeleteContainer { path } => {
                (AuditOp::Delete, Some(path.clone()))
            }
            Request::SetData { path, .. } => (AuditOp::SetData, Some(path.clone())),
            Request::SetAcl { path, acl: a, .. } => {
                acl = Some(acl_text(a));
                (AuditOp::SetAcl, Some(path.clone()))
            }
            Request::Multi(ops) => {
                for op in ops {
                    if let Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) =
                        op
                    {
                        if let Some(m) = CreateMode::from_flags(c.flags) {
                            multi_modes.push((c.path.clone(), m));
                        }
                    }
                }
                (AuditOp::MultiOperation, None)
            }
            Request::Reconfig(_) => (AuditOp::Reconfig, None),
            _ => return None,
        };
        Some(AuditRequest {
            session,
            user: users_of(auth),
            ip,
            op,
            path,
            mode,
            acl,
            multi_modes,
        })
    }

    fn record(
        &self,
        op: AuditOp,
        znode: Option<&str>,
        mode: Option<CreateMode>,
        acl: Option<&str>,
        result: AuditResult,
    ) -> AuditRecord {
        AuditRecord {
            session: Some(self.session),
            user: AuditUser::Client(self.user.clone()),
            ip: self.ip.clone(),
            operation: op,
            znode: znode.map(str::to_string),
            znode_type: mode,
            acl: acl.map(str::to_string),
            result,
        }
    }

    /// The record of the request refused: the path it named (none for a
    /// multi or a reconfig), a create's mode, a setAcl's ACL.
    pub fn failed(&self) -> AuditRecord {
        self.record(
            self.op,
            self.path.as_deref(),
            self.mode,
            self.acl.as_deref(),
            AuditResult::Failure,
        )
    }

    /// The records of the request's txn applied: the path the txn wrote
    /// (a sequential create's full name), or one record per create, delete
    /// and setData of a multi. A txn of another kind (wazoo's own, which a
    /// create may become) leaves none.
    pub fn succeeded(&self, txn: &Txn) -> Vec<AuditRecord> {
        let ok = AuditResult::Success;
        match (self.op, txn) {
            (AuditOp::MultiOperation, Txn::Multi(ops)) => ops
                .iter()
                .filter_map(|t| match t {
                    Txn::Create(c) => {
                        let mode = self
                            .multi_modes
                            .iter()
                            .find(|(p, _)| *p == c.path)
                            .map(|(_, m)| *m);
                        Some(self.record(AuditOp::Create, Some(&c.path), mode, None, ok))
                    }
                    Txn::Delete { path } => {
                        Some(self.record(AuditOp::Delete, Some(path), None, None, ok))
                    }
                    Txn::SetData { path, .. } => {
                        Some(self.record(AuditOp::SetData, Some(path), None, None, ok))
                    }
                    _ => None,
                })
                .collect(),
            (AuditOp::Create, Txn::Create(c)) => {
                vec![self.record(AuditOp::Create, Some(&c.path), self.mode, None, ok)]
            }
            (AuditOp::Delete, Txn::Delete { path })
            | (AuditOp::SetData, Txn::SetData { path, .. }) => {
                vec![self.record(self.op, Some(path), None, None, ok)]
            }
            (AuditOp::SetAcl, Txn::SetAcl { path, .. }) => {
                vec![self.record(self.op, Some(path), None, self.acl.as_deref(), ok)]
            }
            (AuditOp::Reconfig, Txn::Reconfig { .. }) => {
                vec![self.record(self.op, Some(crate::server::CONFIG_NODE), None, None, ok)]
            }
            _ => Vec::new(),
        }
    }
}

/// The record of an ephemeral deleted when its session closed or expired.
pub fn ephemeral_cleanup(session: i64, path: String) -> AuditRecord {
    AuditRecord {
        session: Some(session),
        user: AuditUser::Server,
        ip: None,
        operation: AuditOp::EphemeralCleanup,
        znode: Some(path),
        znode_type: None,
        acl: None,
        result: AuditResult::Success,
    }
}

#[cfg(test)]
mod tests;
