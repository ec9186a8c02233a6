//! Request bodies: [`Request`], one variant per opcode, and its codec.

use super::{
    Acl, AuthPacket, CreateRequest, MultiHeader, ReconfigRequest, SetWatches, SetWatches2,
};
use crate::jute::{DecodeError, Jute, Reader, Writer};

/// One client request body, by opcode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Create(CreateRequest),
    Create2(CreateRequest),
    CreateContainer(CreateRequest),
    CreateTtl(CreateRequest),
    Delete {
        path: String,
        version: i32,
    },
    /// deleteContainer: sent by servers only; a client that sends it gets
    /// BadArguments, as from ZooKeeper.
    DeleteContainer {
        path: String,
    },
    Exists {
        path: String,
        watch: bool,
    },
    GetData {
        path: String,
        watch: bool,
    },
    SetData {
        path: String,
        /// `None`: jute's null (-1), which the node keeps as null data.
        data: Option<Vec<u8>>,
        version: i32,
    },
    GetAcl {
        path: String,
    },
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        version: i32,
    },
    GetChildren {
        path: String,
        watch: bool,
    },
    GetChildren2 {
        path: String,
        watch: bool,
    },
    /// `None` for a null path, which ZooKeeper's server echoes as null.
    Sync {
        path: Option<String>,
    },
    Ping,
    Check {
        path: String,
        version: i32,
    },
    Multi(Vec<Request>),
    MultiRead(Vec<Request>),
    Reconfig(ReconfigRequest),
    CheckWatches {
        path: String,
        watcher_type: i32,
    },
    RemoveWatches {
        path: String,
        watcher_type: i32,
    },
    Auth(AuthPacket),
    SetWatches(SetWatches),
    SetWatches2(SetWatches2),
    GetEphemerals {
        prefix: String,
    },
    GetAllChildrenNumber {
        path: String,
    },
    AddWatch {
        path: String,
        mode: i32,
    },
    WhoAmI,
    CloseSession,
    /// wazoo's recipe call: module, method, MessagePack arguments, and the
    /// call's guid: an id the client makes per call and sends again with
    /// every retry of the same call (the recipe's `caller_guid`). Empty:
    /// the client sent none (the body ends after `args`), and the server
    /// makes one for this request alone.
    RecipeCall {
        module: String,
        method: String,
        args: Vec<u8>,
        guid: String,
    },
}

impl Request {
    pub fn opcode(&self) -> crate::OpCode {
        use crate::OpCode as O;
        match self {
            Request::Create(_) => O::Create,
            Request::Create2(_) => O::Create2,
            Request::CreateContainer(_) => O::CreateContainer,
            Request::CreateTtl(_) => O::CreateTtl,
            Request::Delete { .. } => O::Delete,
            Request::DeleteContainer { .. } => O::DeleteContainer,
            Request::Exists { .. } => O::Exists,
            Request::GetData { .. } => O::GetData,
            Request::SetData { .. } => O::SetData,
            Request::GetAcl { .. } => O::GetAcl,
            Request::SetAcl { .. } => O::SetAcl,
            Request::GetChildren { .. } => O::GetChildren,
            Request::GetChildren2 { .. } => O::GetChildren2,
            Request::Sync { .. } => O::Sync,
            Request::Ping => O::Ping,
            Request::Check { .. } => O::Check,
            Request::Multi(_) => O::Multi,
            Request::MultiRead(_) => O::MultiRead,
            Request::Reconfig(_) => O::Reconfig,
            Request::CheckWatches { .. } => O::CheckWatches,
            Request::RemoveWatches { .. } => O::RemoveWatches,
            Request::Auth(_) => O::Auth,
            Request::SetWatches(_) => O::SetWatches,
            Request::SetWatches2(_) => O::SetWatches2,
            Request::GetEphemerals { .. } => O::GetEphemerals,
            Request::GetAllChildrenNumber { .. } => O::GetAllChildrenNumber,
            Request::AddWatch { .. } => O::AddWatch,
            Request::WhoAmI => O::WhoAmI,
            Request::CloseSession => O::CloseSession,
            Request::RecipeCall { .. } => O::RecipeCall,
        }
    }

    /// The path the request names, if it names one.
    pub fn path(&self) -> Option<&str> {
        match self {
            Request::Create(c)
            | Request::Create2(c)
            | Request::CreateContainer(c)
            | Request::CreateTtl(c) => Some(&c.path),
            Request::Delete { path, .. }
            | Request::DeleteContainer { path }
            | Request::Exists { path, .. }
            | Request::GetData { path, .. }
            | Request::SetData { path, .. }
            | Request::GetAcl { path }
            | Request::SetAcl { path, .. }
            | Request::GetChildren { path, .. }
            | Request::GetChildren2 { path, .. }
            | Request::Check { path, .. }
            | Request::CheckWatches { path, .. }
            | Request::RemoveWatches { path, .. }
            | Request::GetAllChildrenNumber { path }
            | Request::AddWatch { path, .. } => Some(path),
            Request::GetEphemerals { prefix } => Some(prefix),
            Request::Sync { path } => path.as_deref(),
            _ => None,
        }
    }

    /// Encodes the body (without the request header).
    pub fn write_body(&self, w: &mut Vec<u8>) {
        match self {
            Request::Create(c)
            | Request::Create2(c)
            | Request::CreateContainer(c)
            | Request::CreateTtl(c) => c.write_into(w),
            Request::Delete { path, version } | Request::Check { path, version } => {
                w.write_string(path);
                w.write_i32(*version);
            }
            Request::DeleteContainer { path }
            | Request::GetAcl { path }
            | Request::GetAllChildrenNumber { path } => w.write_string(path),
            Request::Sync { path } => match path {
                Some(p) => w.write_string(p),
                None => w.write_null(),
            },
            Request::GetEphemerals { prefix } => w.write_string(prefix),
            Request::Exists { path, watch }
            | Request::GetData { path, watch }
            | Request::GetChildren { path, watch }
            | Request::GetChildren2 { path, watch } => {
                w.write_string(path);
                w.write_bool(*watch);
            }
            Request::SetData {
                path,
                data,
                version,
            } => {
                w.write_string(path);
                w.write_nullable_buffer(data.as_deref());
                w.write_i32(*version);
            }
            Request::SetAcl { path, acl, version } => {
                w.write_string(path);
                w.write_vec(acl);
                w.write_i32(*version);
            }
            Request::Ping | Request::WhoAmI | Request::CloseSession => {}
            Request::Multi(ops) | Request::MultiRead(ops) => {
                for op in ops {
                    // A createTTL without a TTL (TTL flags on a create
                    // record, see read_multi) goes as the create it came
                    // as, and decodes to the same op again.
                    let code = match op {
                        Request::CreateTtl(c) if c.ttl.is_none() => crate::OpCode::Create,
                        _ => op.opcode(),
                    };
                    MultiHeader {
                        op: code.code(),
                        done: false,
                        err: -1,
                    }
                    .write(w);
                    op.write_body(w);
                }
                MultiHeader {
                    op: -1,
                    done: true,
                    err: -1,
                }
                .write(w);
            }
            Request::Reconfig(r) => r.write(w),
            Request::CheckWatches { path, watcher_type }
            | Request::RemoveWatches { path, watcher_type } => {
                w.write_string(path);
                w.write_i32(*watcher_type);
            }
            Request::AddWatch { path, mode } => {
                w.write_string(path);
                w.write_i32(*mode);
            }
            Request::Auth(a) => a.write(w),
            Request::SetWatches(s) => s.write(w),
            Request::SetWatches2(s) => s.write(w),
            Request::RecipeCall {
                module,
                method,
                args,
                guid,
            } => {
                w.write_string(module);
                w.write_string(method);
                w.write_buffer(args);
                // Optional on the wire: a body without it is a call of a
                // client that sends no guid.
                if !guid.is_empty() {
                    w.write_string(guid);
                }
            }
        }
    }

    /// Decodes a body for `op`. Unknown opcodes are `Ok(None)`; the caller
    /// answers them (ZooKeeper replies `Unimplemented`).
    pub fn read_body(op: i32, r: &mut Reader<'_>) -> Result<Option<Request>, DecodeError> {
        use crate::OpCode as O;
        let Some(opcode) = crate::OpCode::from_i32(op) else {
            return Ok(None);
        };
        let path_watch = |r: &mut Reader<'_>| -> Result<(String, bool), DecodeError> {
            Ok((r.read_path()?, r.read_bool()?))
        };
        Ok(Some(match opcode {
            O::Create => Request::Create(CreateRequest::read_from(r, false)?),
            O::Create2 => Request::Create2(CreateRequest::read_from(r, false)?),
            O::CreateContainer => Request::CreateContainer(CreateRequest::read_from(r, false)?),
            O::CreateTtl => Request::CreateTtl(CreateRequest::read_from(r, true)?),
            O::Delete => Request::Delete {
                path: r.read_path()?,
                version: r.read_i32()?,
            },
            O::DeleteContainer => Request::DeleteContainer {
                path: r.read_string()?,
            },
            O::Exists => {
                let (path, watch) = path_watch(r)?;
                Request::Exists { path, watch }
            }
            O::GetData => {
                let (path, watch) = path_watch(r)?;
                Request::GetData { path, watch }
            }
            O::GetChildren => {
                let (path, watch) = path_watch(r)?;
                Request::GetChildren { path, watch }
            }
            O::GetChildren2 => {
                let (path, watch) = path_watch(r)?;
                Request::GetChildren2 { path, watch }
            }
            O::SetData => Request::SetData {
                path: r.read_string()?,
                data: r.read_nullable_buffer()?,
                version: r.read_i32()?,
            },
            O::GetAcl => Request::GetAcl {
                path: r.read_path()?,
            },
            O::SetAcl => Request::SetAcl {
                path: r.read_string()?,
                acl: r.read_vec()?,
                version: r.read_i32()?,
            },
            // ZooKeeper's sync echoes its path unchecked, a null one too.
            O::Sync => Request::Sync {
                path: r.read_opt_string()?,
            },
            O::Ping => Request::Ping,
            O::Check => Request::Check {
                path: r.read_string()?,
                version: r.read_i32()?,
            },
            O::Multi => Request::Multi(read_multi(r, false)?),
            O::MultiRead => Request::MultiRead(read_multi(r, true)?),
            O::Reconfig => Request::Reconfig(ReconfigRequest::read(r)?),
            O::CheckWatches => Request::CheckWatches {
                path: r.read_path()?,
                watcher_type: r.read_i32()?,
            },
            O::RemoveWatches => Request::RemoveWatches {
                path: r.read_string()?,
                watcher_type: r.read_i32()?,
            },
            O::Auth => Request::Auth(AuthPacket::read(r)?),
            // ZooKeeper's DataTree.setWatches looks each data, exist and
            // child watch's node up: a null path there is refused (see
            // Reader::read_path). The persistent ones it only files.
            O::SetWatches => Request::SetWatches(SetWatches {
                relative_zxid: r.read_i64()?,
                data_watches: r.read_paths()?,
                exist_watches: r.read_paths()?,
                child_watches: r.read_paths()?,
            }),
            O::SetWatches2 => Request::SetWatches2(SetWatches2 {
                relative_zxid: r.read_i64()?,
                data_watches: r.read_paths()?,
                exist_watches: r.read_paths()?,
                child_watches: r.read_paths()?,
                persistent_watches: r.read_strings()?,
                persistent_recursive_watches: r.read_strings()?,
            }),
            O::GetEphemerals => Request::GetEphemerals {
                prefix: r.read_string()?,
            },
            O::GetAllChildrenNumber => Request::GetAllChildrenNumber {
                path: r.read_path()?,
            },
            O::AddWatch => Request::AddWatch {
                path: r.read_string()?,
                mode: r.read_i32()?,
            },
            O::WhoAmI => Request::WhoAmI,
            O::CloseSession => Request::CloseSession,
            O::RecipeCall => Request::RecipeCall {
                module: r.read_string()?,
                method: r.read_string()?,
                args: r.read_buffer()?,
                guid: if r.remaining() > 0 {
                    r.read_string()?
                } else {
                    String::new()
                },
            },
            // A client's createSession is a request ZooKeeper's prep
            // cannot read (its body is no CreateSessionTxn): it answers
            // MarshallingError and the connection goes on.
            O::CreateSession => {
                return Err(DecodeError::Invalid(
                    "createSession is no client request".into(),
                ))
            }
            O::Notification | O::Sasl | O::Error => return Ok(None),
        }))
    }
}

/// Reads the (header, op)* sequence of a multi or multiRead, up to the
/// header marked done. Ops that may not appear in it are an error, as in
/// ZooKeeper's MultiOperationRecord, and so are reads mixed with writes; a
/// multiRead of writes decodes (ZooKeeper refuses it later, when it runs
/// the reads).
fn read_multi(r: &mut Reader<'_>, read_only: bool) -> Result<Vec<Request>, DecodeError> {
    use crate::OpCode as O;
    let mut ops = Vec::new();
    loop {
        let h = MultiHeader::read(r)?;
        if h.done {
            return Ok(ops);
        }
        let allowed = match O::from_i32(h.op) {
            Some(O::GetChildren | O::GetData) => read_only,
            Some(
                O::Create
                | O::Create2
                | O::CreateTtl
                | O::CreateContainer
                | O::Delete
                | O::SetData
                | O::Check,
            ) => true,
            _ => false,
        };
        if !allowed {
            return Err(DecodeError::Invalid(format!(
                "invalid type of op {} in {}",
                h.op,
                if read_only { "multiRead" } else { "multi" }
            )));
        }
        let op = match Request::read_body(h.op, r)? {
            Some(op) => multi_create_by_flags(op)?,
            None => return Err(DecodeError::Invalid(format!("unknown op {}", h.op))),
        };
        // ZooKeeper's MultiOperationRecord.add refuses to mix reads with
        // writes (a check is a write there), in a multi as in a multiRead.
        let is_read =
            |o: &Request| matches!(o, Request::GetChildren { .. } | Request::GetData { .. });
        if ops
            .first()
            .is_some_and(|first| is_read(first) != is_read(&op))
        {
            return Err(DecodeError::Invalid(
                "reads mixed with writes in a multi".into(),
            ));
        }
        ops.push(op);
    }
}

/// A create inside a multi is the op its flags make it, whatever opcode
/// its header had, as ZooKeeper 3.8's MultiOperationRecord builds it
/// (`Op.create`, whose opcode comes from the flags' CreateMode):
///
/// - a create, create2 or createContainer record becomes createContainer
///   with the container flag, and create otherwise (unknown flags are
///   kept, for prep to refuse); with TTL flags it becomes a createTTL
///   whose record has no TTL (`ttl` None), which ZooKeeper's prep cannot
///   cast: if prep reaches it, the whole multi fails with
///   MarshallingError;
/// - a createTTL record stays createTTL with TTL flags; with any other
///   flags it becomes the create their mode names (create for unknown
///   flags), its TTL dropped and its flags kept as sent (ZooKeeper's
///   `new Create(path, data, acl, flags)`), so prep refuses unknown flags
///   with BadArguments before it looks at the path.
fn multi_create_by_flags(op: Request) -> Result<Request, DecodeError> {
    use crate::CreateMode;
    Ok(match op {
        Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) => {
            match CreateMode::from_flags(c.flags) {
                Some(m) if m.is_ttl() => Request::CreateTtl(CreateRequest { ttl: None, ..c }),
                Some(m) if m.is_container() => Request::CreateContainer(c),
                _ => Request::Create(c),
            }
        }
        Request::CreateTtl(c) => {
            let mode = CreateMode::from_flags(c.flags).unwrap_or(CreateMode::Persistent);
            if mode.is_ttl() {
                Request::CreateTtl(c)
            } else {
                let c = CreateRequest { ttl: None, ..c };
                if mode.is_container() {
                    Request::CreateContainer(c)
                } else {
                    Request::Create(c)
                }
            }
        }
        other => other,
    })
}
