//! The records of `zookeeper.jute` that travel between clients and servers.

use crate::jute::{DecodeError, Jute, Reader, Writer};
use crate::jute_record;

mod request;
mod response;

pub use request::Request;
pub use response::{OpResult, Response};

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
    /// zookeeper.jute's ReconfigRequest: absent fields are null, not
    /// empty (ZooKeeper's leader takes a non-null `newMembers` for a
    /// non-incremental change).
    pub struct ReconfigRequest {
        pub joining_servers: Option<String>,
        pub leaving_servers: Option<String>,
        pub new_members: Option<String>,
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

impl ConnectRequest {
    /// Decodes a connect frame as ZooKeeper 3.8's server does
    /// (`ZooKeeperServer.processConnectRequest`): the record, then the
    /// optional readOnly byte, and nothing more; bytes after them are
    /// ignored, not refused.
    pub fn from_frame(b: &[u8]) -> Result<ConnectRequest, DecodeError> {
        ConnectRequest::read(&mut Reader::new(b))
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
    /// `None`: jute's null (-1), which the node keeps as null data.
    pub data: Option<Vec<u8>>,
    pub acl: Vec<Acl>,
    pub flags: i32,
    pub ttl: Option<i64>,
}

impl CreateRequest {
    fn write_into(&self, w: &mut Vec<u8>) {
        w.write_string(&self.path);
        w.write_nullable_buffer(self.data.as_deref());
        w.write_vec(&self.acl);
        w.write_i32(self.flags);
        if let Some(ttl) = self.ttl {
            w.write_i64(ttl);
        }
    }
    fn read_from(r: &mut Reader<'_>, with_ttl: bool) -> Result<Self, DecodeError> {
        Ok(CreateRequest {
            path: r.read_path()?,
            data: r.read_nullable_buffer()?,
            acl: r.read_vec()?,
            flags: r.read_i32()?,
            ttl: if with_ttl { Some(r.read_i64()?) } else { None },
        })
    }
}

#[cfg(test)]
mod reconfig_tests {
    use super::*;
    use crate::jute::{Jute, Reader};

    /// zookeeper.jute's ReconfigRequest, as zkCli's `reconfig -remove 3`
    /// sends it: the absent joiningServers and newMembers are null (length
    /// -1), not empty, and read back as absent.
    #[test]
    fn absent_reconfig_fields_are_null_on_the_wire() {
        let r = ReconfigRequest {
            joining_servers: None,
            leaving_servers: Some("3".into()),
            new_members: None,
            cur_config_id: -1,
        };
        let mut w = Vec::new();
        r.write(&mut w);
        let mut golden = Vec::new();
        golden.extend_from_slice(&(-1i32).to_be_bytes());
        golden.extend_from_slice(&1i32.to_be_bytes());
        golden.push(b'3');
        golden.extend_from_slice(&(-1i32).to_be_bytes());
        golden.extend_from_slice(&(-1i64).to_be_bytes());
        assert_eq!(w, golden);
        assert_eq!(ReconfigRequest::read(&mut Reader::new(&w)).unwrap(), r);
    }
}
