//! ZooKeeper's result codes (`KeeperException.Code`), with their wire numbers.

use std::fmt;

macro_rules! codes {
    ($($(#[$m:meta])* $name:ident = $num:expr, $text:expr;)*) => {
        /// A ZooKeeper result code. `Ok` is success; every other value is the
        /// error a reply header carries.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i32)]
        pub enum ErrorCode { $($(#[$m])* $name = $num),* }

        impl ErrorCode {
            /// Every code, for tests and tables.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name),*];

            /// The code for a wire number; unknown numbers map to `None`.
            pub fn from_i32(n: i32) -> Option<ErrorCode> {
                match n { $($num => Some(ErrorCode::$name),)* _ => None }
            }

            /// ZooKeeper's message text for the code (KeeperException.getCodeMessage).
            pub fn message(self) -> &'static str {
                match self { $(ErrorCode::$name => $text),* }
            }
        }
    };
}

codes! {
    Ok = 0, "ok";
    SystemError = -1, "SystemError";
    RuntimeInconsistency = -2, "RuntimeInconsistency";
    DataInconsistency = -3, "DataInconsistency";
    ConnectionLoss = -4, "ConnectionLoss";
    MarshallingError = -5, "MarshallingError";
    Unimplemented = -6, "Unimplemented";
    OperationTimeout = -7, "OperationTimeout";
    BadArguments = -8, "BadArguments";
    UnknownSession = -12, "UnknownSession";
    NewConfigNoQuorum = -13, "NewConfigNoQuorum";
    ReconfigInProgress = -14, "ReconfigInProgress";
    ApiError = -100, "APIError";
    NoNode = -101, "NoNode";
    NoAuth = -102, "NoAuth";
    BadVersion = -103, "BadVersion";
    NoChildrenForEphemerals = -108, "NoChildrenForEphemerals";
    NodeExists = -110, "NodeExists";
    NotEmpty = -111, "Directory not empty";
    SessionExpired = -112, "Session expired";
    InvalidCallback = -113, "Invalid callback";
    InvalidAcl = -114, "InvalidACL";
    AuthFailed = -115, "AuthFailed";
    SessionMoved = -118, "Session moved";
    NotReadOnly = -119, "Not a read-only call";
    EphemeralOnLocalSession = -120, "Ephemeral node on local session";
    NoWatcher = -121, "No such watcher";
    RequestTimeout = -122, "Request timeout";
    ReconfigDisabled = -123, "Reconfig is disabled";
    SessionClosedRequireSaslAuth = -124, "Session closed because client failed to authenticate";
    QuotaExceeded = -125, "Quota has exceeded";
    ThrottledOp = -127, "Op throttled due to high load";
}

impl ErrorCode {
    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn is_ok(self) -> bool {
        self == ErrorCode::Ok
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message(), self.code())
    }
}

impl std::error::Error for ErrorCode {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_wire_number() {
        for &c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_i32(c.code()), Some(c));
        }
        assert_eq!(ErrorCode::from_i32(-9999), None);
    }

    #[test]
    fn wire_numbers_match_keeper_exception_code() {
        assert_eq!(ErrorCode::NoNode.code(), -101);
        assert_eq!(ErrorCode::NodeExists.code(), -110);
        assert_eq!(ErrorCode::SessionExpired.code(), -112);
        assert_eq!(ErrorCode::SessionMoved.code(), -118);
        assert_eq!(ErrorCode::ReconfigDisabled.code(), -123);
        assert_eq!(ErrorCode::ThrottledOp.code(), -127);
    }
}
