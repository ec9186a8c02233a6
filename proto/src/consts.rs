//! Opcodes, special xids, create modes, permissions, watch event types and
//! keeper states, with ZooKeeper's wire numbers.

/// Request types (`ZooDefs.OpCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum OpCode {
    Notification = 0,
    Create = 1,
    Delete = 2,
    Exists = 3,
    GetData = 4,
    SetData = 5,
    GetAcl = 6,
    SetAcl = 7,
    GetChildren = 8,
    Sync = 9,
    Ping = 11,
    GetChildren2 = 12,
    Check = 13,
    Multi = 14,
    Create2 = 15,
    Reconfig = 16,
    CheckWatches = 17,
    RemoveWatches = 18,
    CreateContainer = 19,
    DeleteContainer = 20,
    CreateTtl = 21,
    MultiRead = 22,
    Auth = 100,
    SetWatches = 101,
    Sasl = 102,
    GetEphemerals = 103,
    GetAllChildrenNumber = 104,
    SetWatches2 = 105,
    AddWatch = 106,
    WhoAmI = 107,
    CreateSession = -10,
    CloseSession = -11,
    Error = -1,
    /// wazoo's extension: call a recipe. Outside ZooKeeper's range, so no
    /// standard client ever sends it.
    RecipeCall = 0x5A00,
}

impl OpCode {
    pub fn from_i32(n: i32) -> Option<OpCode> {
        use OpCode::*;
        Some(match n {
            0 => Notification,
            1 => Create,
            2 => Delete,
            3 => Exists,
            4 => GetData,
            5 => SetData,
            6 => GetAcl,
            7 => SetAcl,
            8 => GetChildren,
            9 => Sync,
            11 => Ping,
            12 => GetChildren2,
            13 => Check,
            14 => Multi,
            15 => Create2,
            16 => Reconfig,
            17 => CheckWatches,
            18 => RemoveWatches,
            19 => CreateContainer,
            20 => DeleteContainer,
            21 => CreateTtl,
            22 => MultiRead,
            100 => Auth,
            101 => SetWatches,
            102 => Sasl,
            103 => GetEphemerals,
            104 => GetAllChildrenNumber,
            105 => SetWatches2,
            106 => AddWatch,
            107 => WhoAmI,
            -10 => CreateSession,
            -11 => CloseSession,
            -1 => Error,
            0x5A00 => RecipeCall,
            _ => return None,
        })
    }

    pub fn code(self) -> i32 {
        self as i32
    }

    /// Whether the op changes the tree or the session table (goes through
    /// the write pipeline and gets a zxid of its own).
    pub fn is_write(self) -> bool {
        use OpCode::*;
        matches!(
            self,
            Create
                | Delete
                | SetData
                | SetAcl
                | Check
                | Multi
                | Create2
                | Reconfig
                | CreateContainer
                | DeleteContainer
                | CreateTtl
                | CreateSession
                | CloseSession
                | RecipeCall
        )
    }
}

/// Special xids.
pub mod xid {
    /// A watch event pushed by the server.
    pub const NOTIFICATION: i32 = -1;
    /// A heartbeat.
    pub const PING: i32 = -2;
    /// An auth packet.
    pub const AUTH: i32 = -4;
    /// setWatches sent on reconnect.
    pub const SET_WATCHES: i32 = -8;
    /// wazoo's extension: a recipe notification pushed to a session.
    pub const RECIPE_NOTIFICATION: i32 = -0x5A00;
}

/// Node permissions (`ZooDefs.Perms`).
pub mod perms {
    pub const READ: i32 = 1;
    pub const WRITE: i32 = 2;
    pub const CREATE: i32 = 4;
    pub const DELETE: i32 = 8;
    pub const ADMIN: i32 = 16;
    pub const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;

    /// The permissions as ZooKeeper's `ZKUtil.getPermString` writes them:
    /// their letters in the order `cdrwa`.
    pub fn letters(perms: i32) -> String {
        let mut s = String::new();
        for (bit, c) in [
            (CREATE, 'c'),
            (DELETE, 'd'),
            (READ, 'r'),
            (WRITE, 'w'),
            (ADMIN, 'a'),
        ] {
            if perms & bit != 0 {
                s.push(c);
            }
        }
        s
    }
}

/// How a node is created (`CreateMode`), as the `flags` field carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateMode {
    Persistent = 0,
    Ephemeral = 1,
    PersistentSequential = 2,
    EphemeralSequential = 3,
    Container = 4,
    PersistentWithTtl = 5,
    PersistentSequentialWithTtl = 6,
}

impl CreateMode {
    pub fn from_flags(f: i32) -> Option<CreateMode> {
        use CreateMode::*;
        Some(match f {
            0 => Persistent,
            1 => Ephemeral,
            2 => PersistentSequential,
            3 => EphemeralSequential,
            4 => Container,
            5 => PersistentWithTtl,
            6 => PersistentSequentialWithTtl,
            _ => return None,
        })
    }
    pub fn flags(self) -> i32 {
        self as i32
    }
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }
    pub fn is_container(self) -> bool {
        self == CreateMode::Container
    }
    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}

/// Watch event types (`Watcher.Event.EventType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    None = -1,
    NodeCreated = 1,
    NodeDeleted = 2,
    NodeDataChanged = 3,
    NodeChildrenChanged = 4,
    DataWatchRemoved = 5,
    ChildWatchRemoved = 6,
    PersistentWatchRemoved = 7,
}

impl EventType {
    pub fn from_i32(n: i32) -> Option<EventType> {
        use EventType::*;
        Some(match n {
            -1 => None,
            1 => NodeCreated,
            2 => NodeDeleted,
            3 => NodeDataChanged,
            4 => NodeChildrenChanged,
            5 => DataWatchRemoved,
            6 => ChildWatchRemoved,
            7 => PersistentWatchRemoved,
            _ => return Option::None,
        })
    }
}

/// Connection states carried by watch events (`Watcher.Event.KeeperState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeeperState {
    Unknown = -1,
    Disconnected = 0,
    NoSyncConnected = 1,
    SyncConnected = 3,
    AuthFailed = 4,
    ConnectedReadOnly = 5,
    SaslAuthenticated = 6,
    Expired = -112,
    Closed = 7,
}

impl KeeperState {
    pub fn from_i32(n: i32) -> Option<KeeperState> {
        use KeeperState::*;
        Some(match n {
            -1 => Unknown,
            0 => Disconnected,
            1 => NoSyncConnected,
            3 => SyncConnected,
            4 => AuthFailed,
            5 => ConnectedReadOnly,
            6 => SaslAuthenticated,
            -112 => Expired,
            7 => Closed,
            _ => return None,
        })
    }
}

/// Watch kinds named by checkWatches / removeWatches (`Watcher.WatcherType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatcherType {
    Children = 1,
    Data = 2,
    Any = 3,
    Persistent = 4,
    PersistentRecursive = 5,
}

impl WatcherType {
    pub fn from_i32(n: i32) -> Option<WatcherType> {
        Some(match n {
            1 => WatcherType::Children,
            2 => WatcherType::Data,
            3 => WatcherType::Any,
            4 => WatcherType::Persistent,
            5 => WatcherType::PersistentRecursive,
            _ => return None,
        })
    }
}

/// addWatch modes (`AddWatchMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddWatchMode {
    Persistent = 0,
    PersistentRecursive = 1,
}

impl AddWatchMode {
    pub fn from_i32(n: i32) -> Option<AddWatchMode> {
        match n {
            0 => Some(AddWatchMode::Persistent),
            1 => Some(AddWatchMode::PersistentRecursive),
            _ => None,
        }
    }
}

/// jute.maxbuffer's default: the largest frame either side accepts.
pub const DEFAULT_MAX_BUFFER: usize = 0xfffff;
