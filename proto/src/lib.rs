//! The ZooKeeper client wire protocol, sans-io: jute records, opcodes, error
//! codes and the frame codec. Shared by the `wazoo` server and the client.
//!
//! Layout:
//! - [`jute`]: the binary encoding and the [`jute_record!`] macro.
//! - [`records`]: the records of `zookeeper.jute`, and the [`Request`]
//!   (`records/request.rs`) and [`Response`] (`records/response.rs`) enums
//!   that pair bodies with opcodes.
//! - [`frame`]: length-prefixed frames, checked before they are parsed.
//! - [`error`]: [`ErrorCode`], `KeeperException.Code` with wire numbers.
//! - [`consts`]: opcodes, xids, create modes, permissions, event types.
//! - [`path`]: the path rules of the data model.
//! - [`Zxid`]: the transaction id every wazoo crate uses.

#![forbid(unsafe_code)]

pub mod consts;
pub mod error;
pub mod frame;
pub mod jute;
pub mod path;
pub mod records;
mod session_record;
mod zxid;

pub use consts::*;
pub use error::ErrorCode;
pub use jute::{DecodeError, Jute, Reader, Writer};
pub use records::*;
pub use session_record::{SessionRecord, VERIFIER_LEN};
pub use zxid::Zxid;
