//! Reply bodies: [`Response`] and the [`OpResult`]s of a multi, and their
//! codec.

use super::{Acl, ClientInfo, MultiHeader, Stat};
use crate::jute::{DecodeError, Jute, Reader, Writer};

/// The result of one op inside a multi or multiRead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    Create {
        path: String,
    },
    Create2 {
        path: String,
        stat: Stat,
    },
    Delete,
    SetData {
        stat: Stat,
    },
    Check,
    GetChildren {
        children: Vec<String>,
    },
    /// `data` is `None` for a node whose data is null (written as -1).
    GetData {
        data: Option<Vec<u8>>,
        stat: Stat,
    },
    Error {
        err: i32,
    },
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
            OpResult::Create { path } => w.write_java_string(path),
            OpResult::Create2 { path, stat } => {
                w.write_java_string(path);
                stat.write(w);
            }
            OpResult::Delete | OpResult::Check => {}
            OpResult::SetData { stat } => stat.write(w),
            OpResult::GetChildren { children } => w.write_java_strings(children),
            OpResult::GetData { data, stat } => {
                w.write_nullable_buffer(data.as_deref());
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
                    data: r.read_nullable_buffer()?,
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
    /// getData (and reconfig): `data` is `None` for a node whose data is
    /// null, written as jute's null (-1) as ZooKeeper writes it.
    GetData {
        data: Option<Vec<u8>>,
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
    /// `None`: the null path a sync was sent with, echoed.
    Sync {
        path: Option<String>,
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
    /// Encodes the body of a reply to a client. Strings go as ZooKeeper's
    /// server writes them ([`Writer::write_java_string`]).
    pub fn write_body(&self, w: &mut Vec<u8>) {
        match self {
            Response::Empty => {}
            Response::Create { path } => w.write_java_string(path),
            Response::Sync { path } => match path {
                Some(p) => w.write_java_string(p),
                None => w.write_null(),
            },
            Response::Create2 { path, stat } => {
                w.write_java_string(path);
                stat.write(w);
            }
            Response::Stat(s) => s.write(w),
            Response::GetData { data, stat } => {
                w.write_nullable_buffer(data.as_deref());
                stat.write(w);
            }
            Response::GetAcl { acl, stat } => {
                w.write_i32(acl.len() as i32);
                for a in acl {
                    w.write_i32(a.perms);
                    w.write_java_string(&a.id.scheme);
                    w.write_java_string(&a.id.id);
                }
                stat.write(w);
            }
            Response::GetChildren { children } | Response::Ephemerals(children) => {
                w.write_java_strings(children)
            }
            Response::GetChildren2 { children, stat } => {
                w.write_java_strings(children);
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
            Response::WhoAmI(infos) => {
                w.write_i32(infos.len() as i32);
                for i in infos {
                    w.write_java_string(&i.auth_scheme);
                    w.write_java_string(&i.user);
                }
            }
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
                data: r.read_nullable_buffer()?,
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
                path: r.read_opt_string()?,
            },
            O::Multi | O::MultiRead => Response::Multi(OpResult::read_all(r)?),
            O::GetAllChildrenNumber => Response::AllChildrenNumber(r.read_i32()?),
            O::GetEphemerals => Response::Ephemerals(r.read_strings()?),
            O::WhoAmI => Response::WhoAmI(r.read_vec()?),
            O::RecipeCall => Response::Recipe(r.read_buffer()?),
            O::AddWatch => Response::ErrorResponse(r.read_i32()?),
            O::Sasl => Response::Sasl(r.read_opt_buffer()?.map(<[u8]>::to_vec)),
            _ => Response::Empty,
        })
    }
}
