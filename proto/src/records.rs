//! The records of `zookeeper.jute` that travel between clients and servers.

use crate::jute::{DecodeError, Jute, Reader, Writer};
use crate::jute_record;

jute_record! {
    /// An identity: a scheme and the id within it (`world:anyone`,
    /// `digest:user:hash`, `ip:10.0.0.0/8`, `auth:`).
    pub struct Id { pub scheme: String, pub id: String }
}

jute_record! {
    /// An access control entry: permission bits granted to an identity.
    pub struct Acl { pub perms: i32, pub id: Id }
}

impl Id {
    pub fn new(scheme: &str, id: &str) -> Id {
        Id {
            scheme: scheme.to_string(),
            id: id.to_string(),
        }
    }
}

impl Acl {
    pub fn new(perms: i32, scheme: &str, id: &str) -> Acl {
        Acl {
            perms,
            id: Id::new(scheme, id),
        }
    }

    /// `world:anyone` with every permission (`ZooDefs.Ids.OPEN_ACL_UNSAFE`).
    pub fn open_unsafe() -> Vec<Acl> {
        vec![Acl::new(crate::perms::ALL, "world", "anyone")]
    }

    /// `world:anyone` may read (`ZooDefs.Ids.READ_ACL_UNSAFE`).
    pub fn read_unsafe() -> Vec<Acl> {
        vec![Acl::new(crate::perms::READ, "world", "anyone")]
    }

    /// Every permission for the authenticated creator (`CREATOR_ALL_ACL`).
    pub fn creator_all() -> Vec<Acl> {
        vec![Acl::new(crate::perms::ALL, "auth", "")]
    }
}

jute_record! {
    /// A node's metadata.
    pub struct Stat {
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
}

jute_record! {
    pub struct RequestHeader { pub xid: i32, pub op: i32 }
}

jute_record! {
    pub struct ReplyHeader { pub xid: i32, pub zxid: i64, pub err: i32 }
}

jute_record! {
    pub struct MultiHeader { pub op: i32, pub done: bool, pub err: i32 }
}

jute_record! {
    pub struct AuthPacket { pub auth_type: i32, pub scheme: String, pub auth: Vec<u8> }
}

jute_record! {
    /// A watch event pushed with xid -1.
    pub struct WatcherEvent { pub event_type: i32, pub state: i32, pub path: String }
}

jute_record! {
    pub struct SetWatches {
        pub relative_zxid: i64,
        pub data_watches: Vec<String>,
        pub exist_watches: Vec<String>,
        pub child_watches: Vec<String>,
    }
}

jute_record! {
    pub struct SetWatches2 {
        pub relative_zxid: i64,
        pub data_watches: Vec<String>,
        pub exist_watches: Vec<String>,
        pub child_watches: Vec<String>,
        pub persistent_watches: Vec<String>,
        pub persistent_recursive_watches: Vec<String>,
    }
}

jute_record! {
    pub struct ClientInfo { pub auth_scheme: String, pub user: String }
}

jute_record! {
    pub struct ReconfigRequest {
        pub joining_servers: String,
        pub leaving_servers: String,
        pub new_members: String,
        pub cur_config_id: i64,
    }
}

/// The first frame a client sends. `read_only` is absent for old clients.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectRequest {
    pub protocol_version: i32,
    pub last_zxid_seen: i64,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub passwd: Vec<u8>,
    pub read_only: Option<bool>,
}

impl Jute for ConnectRequest {
    const MIN_SIZE: usize = 4 + 8 + 4 + 8 + 4;
    fn write(&self, w: &mut Vec<u8>) {
        w.write_i32(self.protocol_version);
        w.write_i64(self.last_zxid_seen);
        w.write_i32(self.timeout_ms);
        w.write_i64(self.session_id);
        w.write_buffer(&self.passwd);
        if let Some(ro) = self.read_only {
            w.write_bool(ro);
        }
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(ConnectRequest {
            protocol_version: r.read_i32()?,
            last_zxid_seen: r.read_i64()?,
            timeout_ms: r.read_i32()?,
            session_id: r.read_i64()?,
            passwd: r.read_buffer()?,
            read_only: if r.remaining() > 0 {
                Some(r.read_bool()?)
            } else {
                None
            },
        })
    }
}

/// The server's answer to a [`ConnectRequest`]. A session id of 0 and a
/// timeout of 0 mean the session is expired or unknown.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectResponse {
    pub protocol_version: i32,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub passwd: Vec<u8>,
    pub read_only: Option<bool>,
}

impl Jute for ConnectResponse {
    const MIN_SIZE: usize = 4 + 4 + 8 + 4;
    fn write(&self, w: &mut Vec<u8>) {
        w.write_i32(self.protocol_version);
        w.write_i32(self.timeout_ms);
        w.write_i64(self.session_id);
        w.write_buffer(&self.passwd);
        if let Some(ro) = self.read_only {
            w.write_bool(ro);
        }
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(ConnectResponse {
            protocol_version: r.read_i32()?,
            timeout_ms: r.read_i32()?,
            session_id: r.read_i64()?,
            passwd: r.read_buffer()?,
            read_only: if r.remaining() > 0 {
                Some(r.read_bool()?)
            } else {
                None
            },
        })
    }
}

/// A create of any kind. `ttl` is on the wire only for createTTL (and the
/// TTL modes inside multi, which ZooKeeper also sends as createTTL).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreateRequest {
    pub path: String,
    pub data: Vec<u8>,
    pub acl: Vec<Acl>,
    pub flags: i32,
    pub ttl: Option<i64>,
}

impl CreateRequest {
    fn write_into(&self, w: &mut Vec<u8>) {
        w.write_string(&self.path);
        w.write_buffer(&self.data);
        w.write_vec(&self.acl);
        w.write_i32(self.flags);
        if let Some(ttl) = self.ttl {
            w.write_i64(ttl);
        }
    }
    fn read_from(r: &mut Reader<'_>, with_ttl: bool) -> Result<Self, DecodeError> {
        Ok(CreateRequest {
            path: r.read_string()?,
            data: r.read_buffer()?,
            acl: r.read_vec()?,
            flags: r.read_i32()?,
            ttl: if with_ttl { Some(r.read_i64()?) } else { None },
        })
    }
}

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
        data: Vec<u8>,
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
    Sync {
        path: String,
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
    /// wazoo's recipe call: module, method, MessagePack arguments.
    RecipeCall {
        module: String,
        method: String,
        args: Vec<u8>,
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
            | Request::Sync { path }
            | Request::Check { path, .. }
            | Request::CheckWatches { path, .. }
            | Request::RemoveWatches { path, .. }
            | Request::GetAllChildrenNumber { path }
            | Request::AddWatch { path, .. } => Some(path),
            Request::GetEphemerals { prefix } => Some(prefix),
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
            | Request::Sync { path }
            | Request::GetAllChildrenNumber { path } => w.write_string(path),
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
                w.write_buffer(data);
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
                    MultiHeader {
                        op: op.opcode().code(),
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
            } => {
                w.write_string(module);
                w.write_string(method);
                w.write_buffer(args);
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
            Ok((r.read_string()?, r.read_bool()?))
        };
        Ok(Some(match opcode {
            O::Create => Request::Create(CreateRequest::read_from(r, false)?),
            O::Create2 => Request::Create2(CreateRequest::read_from(r, false)?),
            O::CreateContainer => Request::CreateContainer(CreateRequest::read_from(r, false)?),
            O::CreateTtl => Request::CreateTtl(CreateRequest::read_from(r, true)?),
            O::Delete => Request::Delete {
                path: r.read_string()?,
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
                data: r.read_buffer()?,
                version: r.read_i32()?,
            },
            O::GetAcl => Request::GetAcl {
                path: r.read_string()?,
            },
            O::SetAcl => Request::SetAcl {
                path: r.read_string()?,
                acl: r.read_vec()?,
                version: r.read_i32()?,
            },
            O::Sync => Request::Sync {
                path: r.read_string()?,
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
                path: r.read_string()?,
                watcher_type: r.read_i32()?,
            },
            O::RemoveWatches => Request::RemoveWatches {
                path: r.read_string()?,
                watcher_type: r.read_i32()?,
            },
            O::Auth => Request::Auth(AuthPacket::read(r)?),
            O::SetWatches => Request::SetWatches(SetWatches::read(r)?),
            O::SetWatches2 => Request::SetWatches2(SetWatches2::read(r)?),
            O::GetEphemerals => Request::GetEphemerals {
                prefix: r.read_string()?,
            },
            O::GetAllChildrenNumber => Request::GetAllChildrenNumber {
                path: r.read_string()?,
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
            },
            O::Notification | O::Sasl | O::CreateSession | O::Error => return Ok(None),
        }))
    }
}

/// Reads the (header, op)* sequence of a multi or multiRead, up to the
/// header marked done. Ops that may not appear in it are an error, as in
/// ZooKeeper's MultiOperationRecord.
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
            ) => !read_only,
            _ => false,
        };
        if !allowed {
            return Err(DecodeError::Invalid(format!(
                "invalid type of op {} in {}",
                h.op,
                if read_only { "multiRead" } else { "multi" }
            )));
        }
        match Request::read_body(h.op, r)? {
            Some(op) => ops.push(op),
            None => return Err(DecodeError::Invalid(format!("unknown op {}", h.op))),
        }
    }
}

/// The result of one op inside a multi or multiRead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    Create { path: String },
    Create2 { path: String, stat: Stat },
    Delete,
    SetData { stat: Stat },
    Check,
    GetChildren { children: Vec<String> },
    GetData { data: Vec<u8>, stat: Stat },
    Error { err: i32 },
}

impl OpResult {
    fn write(&self, w: &mut Vec<u8>) {
        use crate::OpCode as O;
        let (op, err) = match self {
            OpResult::Create { .. } => (O::Create, 0),
            OpResult::Create2 { .. } => (O::Create2, 0),
            OpResult::Delete => (O::Delete, 0),
            OpResult::SetData { .. } => (O::SetData, 0),
            OpResult::Check => (O::Check, 0),
            OpResult::GetChildren { .. } => (O::GetChildren, 0),
            OpResult::GetData { .. } => (O::GetData, 0),
            OpResult::Error { err } => (O::Error, *err),
        };
        MultiHeader {
            op: op.code(),
            done: false,
            err,
        }
        .write(w);
        match self {
            OpResult::Create { path } => w.write_string(path),
            OpResult::Create2 { path, stat } => {
                w.write_string(path);
                stat.write(w);
            }
            OpResult::Delete | OpResult::Check => {}
            OpResult::SetData { stat } => stat.write(w),
            OpResult::GetChildren { children } => w.write_strings(children),
            OpResult::GetData { data, stat } => {
                w.write_buffer(data);
                stat.write(w);
            }
            OpResult::Error { err } => w.write_i32(*err),
        }
    }

    fn read_all(r: &mut Reader<'_>) -> Result<Vec<OpResult>, DecodeError> {
        use crate::OpCode as O;
        let mut out = Vec::new();
        loop {
            let h = MultiHeader::read(r)?;
            if h.done {
                return Ok(out);
            }
            out.push(match O::from_i32(h.op) {
                Some(O::Create) => OpResult::Create {
                    path: r.read_string()?,
                },
                Some(O::Create2 | O::CreateTtl | O::CreateContainer) => OpResult::Create2 {
                    path: r.read_string()?,
                    stat: Stat::read(r)?,
                },
                Some(O::Delete) => OpResult::Delete,
                Some(O::Check) => OpResult::Check,
                Some(O::SetData) => OpResult::SetData {
                    stat: Stat::read(r)?,
                },
                Some(O::GetChildren) => OpResult::GetChildren {
                    children: r.read_strings()?,
                },
                Some(O::GetData) => OpResult::GetData {
                    data: r.read_buffer()?,
                    stat: Stat::read(r)?,
                },
                Some(O::Error) => OpResult::Error { err: r.read_i32()? },
                _ => {
                    return Err(DecodeError::Invalid(format!(
                        "unexpected op {} in multi response",
                        h.op
                    )))
                }
            });
        }
    }
}

/// One reply body. Error replies carry no body: only the header's `err`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// delete, check, ping, auth, setWatches, removeWatches, checkWatches,
    /// addWatch, closeSession: nothing after the header.
    Empty,
    Create {
        path: String,
    },
    Create2 {
        path: String,
        stat: Stat,
    },
    /// exists, setData, setACL.
    Stat(Stat),
    GetData {
        data: Vec<u8>,
        stat: Stat,
    },
    GetAcl {
        acl: Vec<Acl>,
        stat: Stat,
    },
    GetChildren {
        children: Vec<String>,
    },
    GetChildren2 {
        children: Vec<String>,
        stat: Stat,
    },
    Sync {
        path: String,
    },
    Multi(Vec<OpResult>),
    AllChildrenNumber(i32),
    Ephemerals(Vec<String>),
    WhoAmI(Vec<ClientInfo>),
    /// A recipe call's MessagePack reply.
    Recipe(Vec<u8>),
    /// sasl: a `SetSASLResponse`, the server's SASL token; `None` is
    /// jute's null buffer (length -1), which ZooKeeper sends with a failure.
    Sasl(Option<Vec<u8>>),
    /// addWatch: ZooKeeper answers with an `ErrorResponse` body holding 0.
    ErrorResponse(i32),
}

impl Response {
    pub fn write_body(&self, w: &mut Vec<u8>) {
        match self {
            Response::Empty => {}
            Response::Create { path } | Response::Sync { path } => w.write_string(path),
            Response::Create2 { path, stat } => {
                w.write_string(path);
                stat.write(w);
            }
            Response::Stat(s) => s.write(w),
            Response::GetData { data, stat } => {
                w.write_buffer(data);
                stat.write(w);
            }
            Response::GetAcl { acl, stat } => {
                w.write_vec(acl);
                stat.write(w);
            }
            Response::GetChildren { children } | Response::Ephemerals(children) => {
                w.write_strings(children)
            }
            Response::GetChildren2 { children, stat } => {
                w.write_strings(children);
                stat.write(w);
            }
            Response::Multi(results) => {
                for res in results {
                    res.write(w);
                }
                MultiHeader {
                    op: -1,
                    done: true,
                    err: -1,
                }
                .write(w);
            }
            Response::AllChildrenNumber(n) => w.write_i32(*n),
            Response::WhoAmI(infos) => w.write_vec(infos),
            Response::Recipe(b) => w.write_buffer(b),
            Response::Sasl(Some(b)) => w.write_buffer(b),
            Response::Sasl(None) => w.write_i32(-1),
            Response::ErrorResponse(e) => w.write_i32(*e),
        }
    }

    /// Decodes the body of a successful reply to a request of type `op`.
    pub fn read_body(op: crate::OpCode, r: &mut Reader<'_>) -> Result<Response, DecodeError> {
        use crate::OpCode as O;
        Ok(match op {
            O::Create => Response::Create {
                path: r.read_string()?,
            },
            O::Create2 | O::CreateContainer | O::CreateTtl => Response::Create2 {
                path: r.read_string()?,
                stat: Stat::read(r)?,
            },
            O::Exists | O::SetData | O::SetAcl => Response::Stat(Stat::read(r)?),
            // A reconfig answers with the new configuration's data and stat.
            O::GetData | O::Reconfig => Response::GetData {
                data: r.read_buffer()?,
                stat: Stat::read(r)?,
            },
            O::GetAcl => Response::GetAcl {
                acl: r.read_vec()?,
                stat: Stat::read(r)?,
            },
            O::GetChildren => Response::GetChildren {
                children: r.read_strings()?,
            },
            O::GetChildren2 => Response::GetChildren2 {
                children: r.read_strings()?,
                stat: Stat::read(r)?,
            },
            O::Sync => Response::Sync {
                path: r.read_string()?,
            },
            O::Multi | O::MultiRead => Response::Multi(OpResult::read_all(r)?),
            O::GetAllChildrenNumber => Response::AllChildrenNumber(r.read_i32()?),
            O::GetEphemerals => Response::Ephemerals(r.read_strings()?),
            O::WhoAmI => Response::WhoAmI(r.read_vec()?),
            O::RecipeCall => Response::Recipe(r.read_buffer()?),
            O::AddWatch => Response::ErrorResponse(r.read_i32()?),
            _ => Response::Empty,
        })
    }
}
