//! Time as the core sees it: two readings the shell takes and passes in
//! with every input, because they answer different questions.
//!
//! - [`Now::mono_ms`] is a monotonic clock: it only moves forward, at the
//!   rate of real time, and never steps when someone (or NTP) sets the
//!   system clock. Every *timer* runs on it: session deadlines, the tick
//!   that expires them, container and TTL reaping intervals, election,
//!   sync and heartbeat limits, request latencies. Its origin means
//!   nothing (the shell starts it near zero when the process starts), so a
//!   reading is never compared with one from another member or another
//!   process: sessions get fresh deadlines from the local monotonic clock
//!   when a member takes them over (a new leader, a restart, a snapshot
//!   from the leader), as ZooKeeper's leader does on election.
//! - [`Now::wall_ms`] is the wall clock (milliseconds since the Unix
//!   epoch), which may step either way. It is used only for what clients
//!   see as dates: the ctime/mtime the leader stamps into a txn (so every
//!   replica applies the same value), the age of a TTL node (its mtime
//!   against the time a new txn would be stamped with, as ZooKeeper's
//!   ContainerManager does), a connection's established time, and the
//!   seed of session ids.

/// The two clocks at one instant (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Now {
    /// Milliseconds on the monotonic clock: for every timer.
    pub mono_ms: i64,
    /// Milliseconds since the Unix epoch on the wall clock: for stamps only.
    pub wall_ms: i64,
}

impl Now {
    /// Both clocks at the same reading (tests that do not step the wall clock).
    pub fn same(ms: i64) -> Now {
        Now {
            mono_ms: ms,
            wall_ms: ms,
        }
    }
}
