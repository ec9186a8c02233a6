//! One session of a snapshot's session table, one type for every crate:
//! the pipeline hands it to the shell in a snapshot job, storage's
//! envelope writes it, and a member restores it.

/// The length of a [`SessionRecord::verifier`]: a SHA-256 digest.
pub const VERIFIER_LEN: usize = 32;

/// A live session as a snapshot keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRecord {
    pub id: i64,
    pub timeout_ms: i32,
    /// The SHA-256 of the session's password. `None` for a session whose
    /// password is ZooKeeper's, computed from its id: one created before
    /// wazoo drew random passwords, or imported from ZooKeeper.
    pub verifier: Option<[u8; VERIFIER_LEN]>,
}
