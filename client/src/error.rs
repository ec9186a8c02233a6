//! The client's error type: one variant per ZooKeeper result code, plus the
//! few errors the client detects itself.

use wazoo_proto::ErrorCode;

/// What a client call can fail with.
///
/// Every ZooKeeper result code (`KeeperException.Code`) has a variant of the
/// same name; [`Error::code`] gives the wire code back. The client adds:
///
/// * [`Error::BadArguments`] with a message, for arguments refused before
///   anything is sent (an invalid path, an empty ACL list, a TTL on a mode
///   that has none), where ZooKeeper's Java client throws
///   `IllegalArgumentException`;
/// * [`Error::Multi`], a failed `multi`: which op failed and why;
/// * [`Error::Closed`], a call on a client that was closed;
/// * [`Error::Unknown`], a result code this client does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("SystemError")]
    SystemError,
    #[error("RuntimeInconsistency")]
    RuntimeInconsistency,
    #[error("DataInconsistency")]
    DataInconsistency,
    /// The connection to the server was lost while the call was pending (or
    /// could not be established for it). The session may well be alive: the
    /// client reconnects by itself. The call may or may not have taken effect.
    #[error("ConnectionLoss")]
    ConnectionLoss,
    #[error("MarshallingError")]
    MarshallingError,
    #[error("Unimplemented")]
    Unimplemented,
    #[error("OperationTimeout")]
    OperationTimeout,
    /// Invalid arguments; the message says which (empty when the server
    /// refused them).
    #[error("BadArguments{}", if .0.is_empty() { String::new() } else { format!(": {}", .0) })]
    BadArguments(String),
    #[error("UnknownSession")]
    UnknownSession,
    #[error("NewConfigNoQuorum")]
    NewConfigNoQuorum,
    #[error("ReconfigInProgress")]
    ReconfigInProgress,
    #[error("APIError")]
    ApiError,
    #[error("NoNode")]
    NoNode,
    #[error("NoAuth")]
    NoAuth,
    #[error("BadVersion")]
    BadVersion,
    #[error("NoChildrenForEphemerals")]
    NoChildrenForEphemerals,
    #[error("NodeExists")]
    NodeExists,
    #[error("Directory not empty")]
    NotEmpty,
    /// The session expired: this client is dead, create a new one.
    #[error("Session expired")]
    SessionExpired,
    #[error("Invalid callback")]
    InvalidCallback,
    #[error("InvalidACL")]
    InvalidAcl,
    /// Authentication failed: this client is dead.
    #[error("AuthFailed")]
    AuthFailed,
    #[error("Session moved")]
    SessionMoved,
    #[error("Not a read-only call")]
    NotReadOnly,
    #[error("Ephemeral node on local session")]
    EphemeralOnLocalSession,
    #[error("No such watcher")]
    NoWatcher,
    #[error("Request timeout")]
    RequestTimeout,
    #[error("Reconfig is disabled")]
    ReconfigDisabled,
    #[error("Session closed because client failed to authenticate")]
    SessionClosedRequireSaslAuth,
    #[error("Quota has exceeded")]
    QuotaExceeded,
    #[error("Op throttled due to high load")]
    ThrottledOp,
    /// A `multi` failed as a whole; `index` is the op (0-based) that failed
    /// and `error` why. Nothing of the multi was applied.
    #[error("multi op {index} failed: {error}")]
    Multi { index: usize, error: Box<Error> },
    /// The client was closed (by [`crate::Client::close`] or by dropping
    /// every handle); make a new one.
    #[error("client is closed")]
    Closed,
    /// A result code this client does not know.
    #[error("unknown error code {0}")]
    Unknown(i32),
}

/// The client's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

macro_rules! code_map {
    ($($name:ident),* $(,)?) => {
        impl Error {
            /// The error for a wire result code (`None` for `Ok`).
            pub fn from_code(code: i32) -> Option<Error> {
                match ErrorCode::from_i32(code) {
                    Some(ErrorCode::Ok) => None,
                    Some(ErrorCode::BadArguments) => Some(Error::BadArguments(String::new())),
                    $(Some(ErrorCode::$name) => Some(Error::$name),)*
                    None => Some(Error::Unknown(code)),
                }
            }

            /// The ZooKeeper result code of this error. For [`Error::Multi`]
            /// that of the op that failed; [`Error::Closed`] is reported as
            /// `SessionExpired`, as ZooKeeper's client does for a closed
            /// handle; [`Error::Unknown`] as `SystemError`.
            pub fn code(&self) -> ErrorCode {
                match self {
                    $(Error::$name => ErrorCode::$name,)*
                    Error::BadArguments(_) => ErrorCode::BadArguments,
                    Error::Multi { error, .. } => error.code(),
                    Error::Closed => ErrorCode::SessionExpired,
                    Error::Unknown(_) => ErrorCode::SystemError,
                }
            }
        }
    };
}

code_map!(
    SystemError,
    RuntimeInconsistency,
    DataInconsistency,
    ConnectionLoss,
    MarshallingError,
    Unimplemented,
    OperationTimeout,
    UnknownSession,
    NewConfigNoQuorum,
    ReconfigInProgress,
    ApiError,
    NoNode,
    NoAuth,
    BadVersion,
    NoChildrenForEphemerals,
    NodeExists,
    NotEmpty,
    SessionExpired,
    InvalidCallback,
    InvalidAcl,
    AuthFailed,
    SessionMoved,
    NotReadOnly,
    EphemeralOnLocalSession,
    NoWatcher,
    RequestTimeout,
    ReconfigDisabled,
    SessionClosedRequireSaslAuth,
    QuotaExceeded,
    ThrottledOp,
);

impl Error {
    /// `BadArguments` with a message.
    pub fn bad_arguments(msg: impl Into<String>) -> Error {
        Error::BadArguments(msg.into())
    }

    /// Whether the error ends the client for good (expired, auth failed,
    /// closed): every later call fails the same way.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Error::SessionExpired | Error::AuthFailed | Error::Closed
        )
    }

    /// The error itself, or for [`Error::Multi`] the error of the op that
    /// failed.
    pub fn root(&self) -> &Error {
        match self {
            Error::Multi { error, .. } => error.root(),
            e => e,
        }
    }
}

impl From<ErrorCode> for Error {
    fn from(code: ErrorCode) -> Error {
        Error::from_code(code.code()).unwrap_or(Error::Unknown(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_code_has_a_variant_that_maps_back() {
        for &code in ErrorCode::ALL {
            match Error::from_code(code.code()) {
                None => assert_eq!(code, ErrorCode::Ok),
                Some(e) => assert_eq!(e.code(), code, "{e:?}"),
            }
        }
        assert_eq!(Error::from_code(-4242), Some(Error::Unknown(-4242)));
    }

    #[test]
    fn multi_error_reports_the_code_of_the_failed_op() {
        let e = Error::Multi {
            index: 1,
            error: Box::new(Error::NodeExists),
        };
        assert_eq!(e.code(), ErrorCode::NodeExists);
        assert_eq!(e.root(), &Error::NodeExists);
        assert_eq!(e.to_string(), "multi op 1 failed: NodeExists");
    }
}
