//! Typed ops for `multi` and `multiRead`, and their results.

use wazoo_proto::{Acl, CreateMode, CreateRequest, Request, Stat};

use crate::connect_string::{to_server, Chroot};
use crate::error::{Error, Result};

/// The largest TTL ZooKeeper accepts (`EphemeralType.TTL.maxValue()`: 40 bits).
pub const MAX_TTL_MS: i64 = 0xFF_FFFF_FFFF;

/// One op of a [`crate::Client::multi`] transaction. Build with the
/// constructors; all ops commit together or none does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Create {
        path: String,
        data: Vec<u8>,
        acl: Vec<Acl>,
        mode: CreateMode,
        ttl: Option<i64>,
    },
    Delete {
        path: String,
        version: i32,
    },
    SetData {
        path: String,
        data: Vec<u8>,
        version: i32,
    },
    Check {
        path: String,
        version: i32,
    },
}

impl Op {
    /// Create a node (any mode but the TTL ones; see [`Op::create_ttl`]).
    pub fn create(path: &str, data: &[u8], acl: &[Acl], mode: CreateMode) -> Op {
        Op::Create {
            path: path.to_string(),
            data: data.to_vec(),
            acl: acl.to_vec(),
            mode,
            ttl: None,
        }
    }

    /// Create a node with a TTL (mode `PersistentWithTtl` or
    /// `PersistentSequentialWithTtl`).
    pub fn create_ttl(path: &str, data: &[u8], acl: &[Acl], mode: CreateMode, ttl_ms: i64) -> Op {
        Op::Create {
            path: path.to_string(),
            data: data.to_vec(),
            acl: acl.to_vec(),
            mode,
            ttl: Some(ttl_ms),
        }
    }

    /// Delete a node; `version` `None` means any version.
    pub fn delete(path: &str, version: Option<i32>) -> Op {
        Op::Delete {
            path: path.to_string(),
            version: version.unwrap_or(-1),
        }
    }

    /// Set a node's data; `version` `None` means any version.
    pub fn set_data(path: &str, data: &[u8], version: Option<i32>) -> Op {
        Op::SetData {
            path: path.to_string(),
            data: data.to_vec(),
            version: version.unwrap_or(-1),
        }
    }

    /// Fail the transaction unless the node has this version (`None`: unless
    /// it exists).
    pub fn check(path: &str, version: Option<i32>) -> Op {
        Op::Check {
            path: path.to_string(),
            version: version.unwrap_or(-1),
        }
    }

    /// The request this op sends, with the chroot applied; arguments are
    /// checked as ZooKeeper's client checks them.
    pub(crate) fn to_request(&self, chroot: Option<&Chroot>) -> Result<Request> {
        Ok(match self {
            Op::Create {
                path,
                data,
                acl,
                mode,
                ttl,
            } => create_request(chroot, path, data, acl, *mode, *ttl)?,
            Op::Delete { path, version } => {
                check_path(path, false)?;
                if path == "/" && chroot.is_none() {
                    return Err(Error::bad_arguments("cannot delete the root node"));
                }
                Request::Delete {
                    path: to_server(chroot, path),
                    version: *version,
                }
            }
            Op::SetData {
                path,
                data,
                version,
            } => {
                check_path(path, false)?;
                Request::SetData {
                    path: to_server(chroot, path),
                    data: Some(data.clone()),
                    version: *version,
                }
            }
            Op::Check { path, version } => {
                check_path(path, false)?;
                Request::Check {
                    path: to_server(chroot, path),
                    version: *version,
                }
            }
        })
    }
}

/// Checks a client path like ZooKeeper's `PathUtils.validatePath`.
pub(crate) fn check_path(path: &str, sequential: bool) -> Result<()> {
    wazoo_proto::path::validate(path, sequential).map_err(Error::BadArguments)
}

/// The create request for a mode: `create` (or `create2` when `want_stat`),
/// `createContainer` for containers, `createTTL` for the TTL modes.
pub(crate) fn create_request_with(
    chroot: Option<&Chroot>,
    path: &str,
    data: Option<&[u8]>,
    acl: &[Acl],
    mode: CreateMode,
    ttl: Option<i64>,
    want_stat: bool,
) -> Result<Request> {
    check_path(path, mode.is_sequential())?;
    if acl.is_empty() {
        return Err(Error::InvalidAcl);
    }
    match (mode.is_ttl(), ttl) {
        (true, Some(t)) if !(1..=MAX_TTL_MS).contains(&t) => {
            return Err(Error::bad_arguments(format!(
                "ttl must be in 1..={MAX_TTL_MS} ms, got {t}"
            )))
        }
        (true, None) => {
            return Err(Error::bad_arguments(format!(
                "create mode {mode:?} needs a ttl"
            )))
        }
        (false, Some(_)) => {
            return Err(Error::bad_arguments(format!(
                "create mode {mode:?} takes no ttl"
            )))
        }
        _ => {}
    }
    let body = CreateRequest {
        path: to_server(chroot, path),
        data: data.map(<[u8]>::to_vec),
        acl: acl.to_vec(),
        flags: mode.flags(),
        ttl,
    };
    Ok(if mode.is_ttl() {
        Request::CreateTtl(body)
    } else if mode.is_container() {
        Request::CreateContainer(body)
    } else if want_stat {
        Request::Create2(body)
    } else {
        Request::Create(body)
    })
}

fn create_request(
    chroot: Option<&Chroot>,
    path: &str,
    data: &[u8],
    acl: &[Acl],
    mode: CreateMode,
    ttl: Option<i64>,
) -> Result<Request> {
    create_request_with(chroot, path, Some(data), acl, mode, ttl, false)
}

/// The result of one op of a successful `multi`. Paths are relative to
/// the chroot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiResult {
    /// A create; `stat` is there for containers and TTL nodes (ZooKeeper
    /// answers those with create2 results).
    Create {
        path: String,
        stat: Option<Stat>,
    },
    Delete,
    SetData {
        stat: Stat,
    },
    Check,
}

/// One read of a [`crate::Client::multi_read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOp {
    GetData { path: String },
    GetChildren { path: String },
}

impl ReadOp {
    pub fn get_data(path: &str) -> ReadOp {
        ReadOp::GetData {
            path: path.to_string(),
        }
    }

    pub fn get_children(path: &str) -> ReadOp {
        ReadOp::GetChildren {
            path: path.to_string(),
        }
    }

    pub(crate) fn to_request(&self, chroot: Option<&Chroot>) -> Result<Request> {
        Ok(match self {
            ReadOp::GetData { path } => {
                check_path(path, false)?;
                Request::GetData {
                    path: to_server(chroot, path),
                    watch: false,
                }
            }
            ReadOp::GetChildren { path } => {
                check_path(path, false)?;
                Request::GetChildren {
                    path: to_server(chroot, path),
                    watch: false,
                }
            }
        })
    }
}

/// The result of one read of a `multiRead`; each read succeeds or fails on
/// its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadResult {
    Data { data: Vec<u8>, stat: Stat },
    Children { children: Vec<String> },
}

#[cfg(test)]
mod tests {
    use super::*;
    use wazoo_proto::frame;
    use wazoo_proto::jute::Writer;

    fn chroot(p: &str) -> Option<Chroot> {
        Chroot::new(p).unwrap()
    }

    #[test]
    fn multi_builder_encodes_like_zookeepers_multi_operation_record() {
        let c = chroot("/app");
        let ops = [
            Op::create("/a", b"x", &Acl::open_unsafe(), CreateMode::Persistent),
            Op::check("/a", Some(0)),
            Op::set_data("/a", b"yz", None),
            Op::delete("/a", Some(1)),
        ];
        let reqs: Vec<Request> = ops
            .iter()
            .map(|o| o.to_request(c.as_ref()).unwrap())
            .collect();
        let mut got = Vec::new();
        frame::write_request(&mut got, 5, &Request::Multi(reqs));

        // Built by hand: header, then (MultiHeader, body)* and the done marker.
        let mut body = Vec::new();
        body.write_i32(5); // xid
        body.write_i32(14); // multi
        let header = |b: &mut Vec<u8>, op: i32| {
            b.write_i32(op);
            b.write_bool(false);
            b.write_i32(-1);
        };
        header(&mut body, 1); // create
        body.write_string("/app/a");
        body.write_buffer(b"x");
        body.write_i32(1); // one ACL
        body.write_i32(31);
        body.write_string("world");
        body.write_string("anyone");
        body.write_i32(0); // persistent
        header(&mut body, 13); // check
        body.write_string("/app/a");
        body.write_i32(0);
        header(&mut body, 5); // setData
        body.write_string("/app/a");
        body.write_buffer(b"yz");
        body.write_i32(-1);
        header(&mut body, 2); // delete
        body.write_string("/app/a");
        body.write_i32(1);
        body.write_i32(-1); // done marker
        body.write_bool(true);
        body.write_i32(-1);
        let mut want = (body.len() as i32).to_be_bytes().to_vec();
        want.extend(body);
        assert_eq!(got, want);
    }

    #[test]
    fn create_picks_the_opcode_of_its_mode() {
        let acl = Acl::open_unsafe();
        let op = |mode, ttl| {
            create_request_with(None, "/a", Some(b""), &acl, mode, ttl, false)
                .unwrap()
                .opcode()
        };
        use wazoo_proto::OpCode;
        assert_eq!(op(CreateMode::Persistent, None), OpCode::Create);
        assert_eq!(op(CreateMode::EphemeralSequential, None), OpCode::Create);
        assert_eq!(op(CreateMode::Container, None), OpCode::CreateContainer);
        assert_eq!(
            op(CreateMode::PersistentWithTtl, Some(1000)),
            OpCode::CreateTtl
        );
        assert_eq!(
            create_request_with(
                None,
                "/a",
                Some(b""),
                &acl,
                CreateMode::Ephemeral,
                None,
                true
            )
            .unwrap()
            .opcode(),
            OpCode::Create2
        );
    }

    #[test]
    fn invalid_create_arguments_are_refused_before_sending() {
        let acl = Acl::open_unsafe();
        let bad = |path, mode, ttl, acl: &[Acl]| {
            create_request_with(None, path, Some(b""), acl, mode, ttl, false).unwrap_err()
        };
        assert!(matches!(
            bad("a", CreateMode::Persistent, None, &acl),
            Error::BadArguments(_)
        ));
        assert!(matches!(
            bad("/a/", CreateMode::Persistent, None, &acl),
            Error::BadArguments(_)
        ));
        assert_eq!(
            bad("/a", CreateMode::Persistent, None, &[]),
            Error::InvalidAcl
        );
        assert!(matches!(
            bad("/a", CreateMode::PersistentWithTtl, None, &acl),
            Error::BadArguments(_)
        ));
        assert!(matches!(
            bad("/a", CreateMode::PersistentWithTtl, Some(0), &acl),
            Error::BadArguments(_)
        ));
        assert!(matches!(
            bad("/a", CreateMode::Persistent, Some(10), &acl),
            Error::BadArguments(_)
        ));
        // A sequential create may end with '/': the name is the counter.
        assert!(create_request_with(
            None,
            "/a/",
            Some(b""),
            &acl,
            CreateMode::PersistentSequential,
            None,
            false
        )
        .is_ok());
    }

    #[test]
    fn read_ops_apply_the_chroot() {
        let c = chroot("/r");
        assert_eq!(
            ReadOp::get_data("/").to_request(c.as_ref()).unwrap(),
            Request::GetData {
                path: "/r".into(),
                watch: false
            }
        );
        assert_eq!(
            ReadOp::get_children("/x").to_request(c.as_ref()).unwrap(),
            Request::GetChildren {
                path: "/r/x".into(),
                watch: false
            }
        );
    }
}
