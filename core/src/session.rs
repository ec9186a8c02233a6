//! The session table (ZooKeeper Programmer's Guide, "ZooKeeper Sessions"): ids, passwords,
//! negotiated timeouts and bucketed expiry with the time passed in.
//!
//! Deadlines are on the monotonic clock (`mono_ms`, see
//! [`crate::time`]): a wall-clock step neither expires live sessions
//! nor keeps dead ones. Only the seed of session ids is a wall-clock
//! reading, so ids stay unique across restarts.
//!
//! Passwords: ZooKeeper computes a session's password from its id, and
//! every reader sees ids (`ephemeralOwner`, `cons`, `dump`), so anyone
//! can re-attach to anyone's session. wazoo's passwords are 16 random
//! bytes, drawn by the shell (an input, [`crate::server::Input::Connect`])
//! for each new session; the table keeps only their SHA-256 (the
//! *verifier*), which the createSession txn replicates to every member and
//! snapshots keep, so any member validates a re-attach and nothing on
//! disk or on the wire between members lets a reader present the
//! password. A session without a verifier (created before passwords were
//! random, or imported from ZooKeeper) keeps ZooKeeper's computed password.
//!
//! Expiry works like ZooKeeper's ExpiryQueue: deadlines are rounded up to the
//! next multiple of the tick, so sessions expire in buckets, one check per
//! tick. The tracker never deletes ephemerals itself: it reports expired
//! sessions and the pipeline turns each into a closeSession txn.
//!
//! A *local* session (zoo.cfg `localSessionsEnabled`, and every session of
//! a member in read-only mode) lives in this member's table only: no txn
//! created it, snapshots leave it out, and it expires in buckets of its
//! own, which the member that holds it checks whatever its role (global
//! sessions expire only where they are decided). Upgrading it (its first
//! ephemeral, as ZooKeeper's UpgradeableSessionTracker) makes it global in
//! place: the same id, verifier and deadline.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use wazoo_proto::jute::{DecodeError, Reader};
use wazoo_proto::{SessionRecord, VERIFIER_LEN};

use crate::id_hash::{IdMap, IdSet};

/// ZooKeeper's `superSecret`, from which it derives passwords.
const SUPER_SECRET: i64 = 0xB341_5C00;
pub const PASSWORD_LEN: usize = 16;

/// What a member keeps of a session's password: its SHA-256.
pub type Verifier = [u8; VERIFIER_LEN];

/// A verifier no password is known to hash to (no SHA-256 preimage of all
/// zeros is known): a session that must expire and never be re-attached.
pub const NO_PASSWORD: Verifier = [0; VERIFIER_LEN];

/// Java's `java.util.Random`, to derive passwords exactly as ZooKeeper does.
struct JavaRandom(u64);

impl JavaRandom {
    const MULT: u64 = 0x5_DEEC_E66D;
    const MASK: u64 = (1 << 48) - 1;

    fn new(seed: i64) -> Self {
        JavaRandom((seed as u64 ^ Self::MULT) & Self::MASK)
    }

    fn next_i32(&mut self) -> i32 {
        self.0 = (self.0.wrapping_mul(Self::MULT).wrapping_add(0xB)) & Self::MASK;
        (self.0 >> 16) as i32
    }

    fn next_bytes(&mut self, out: &mut [u8]) {
        let mut i = 0;
        while i < out.len() {
            let mut rnd = self.next_i32();
            let n = (out.len() - i).min(4);
            for _ in 0..n {
                out[i] = rnd as u8;
                rnd >>= 8;
                i += 1;
            }
        }
    }
}

/// The password ZooKeeper gives `session_id`, computed from the id alone.
/// wazoo accepts it only for a session without a verifier.
pub fn zookeeper_password(session_id: i64) -> [u8; PASSWORD_LEN] {
    let mut p = [0u8; PASSWORD_LEN];
    JavaRandom::new(session_id ^ SUPER_SECRET).next_bytes(&mut p);
    p
}

/// The verifier of `password`.
pub fn verifier(password: &[u8]) -> Verifier {
    Sha256::digest(password).into()
}

/// Reads a verifier written as a jute buffer (in a txn or a peer
/// message); any other length is an error.
pub fn read_verifier(r: &mut Reader<'_>) -> Result<Verifier, DecodeError> {
    r.read_buffer()?.try_into().map_err(|b: Vec<u8>| {
        DecodeError::Invalid(format!("session verifier of {} bytes", b.len()))
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: i64,
    pub timeout_ms: i32,
    /// The bucket (a multiple of the tick) in which the session expires,
    /// on this process's monotonic clock.
    pub expires_at_ms: i64,
    /// Set once expiry or a close has been decided; no more touches count.
    pub closing: bool,
    /// The SHA-256 of the password; `None`: ZooKeeper's computed password.
    pub verifier: Option<Verifier>,
    /// Known to this member only: no txn made it (see the module doc).
    pub local: bool,
}

#[derive(Debug)]
pub struct SessionTracker {
    sessions: IdMap<i64, Session>,
    buckets: BTreeMap<i64, IdSet<i64>>,
    /// The expiry buckets of local sessions, apart: a follower holds
    /// global sessions it must not expire and local ones it must.
    local_buckets: BTreeMap<i64, IdSet<i64>>,
    local_count: usize,
    tick_ms: i64,
    next_id: i64,
}

impl SessionTracker {
    /// `server_id` goes in the top byte of every id this member hands out,
    /// the rest starts from the clock, as ZooKeeper's
    /// `initializeNextSessionId` does, so ids stay unique across restarts.
    pub fn new(server_id: u64, wall_ms: i64, tick_ms: u32) -> Self {
        assert!(tick_ms > 0, "tick must be positive");
        let mut next = ((wall_ms << 24) as u64 >> 8) as i64;
        next |= ((server_id & 0xff) as i64) << 56;
        if next == i64::MIN {
            next += 1;
        }
        SessionTracker {
            sessions: IdMap::default(),
            buckets: BTreeMap::new(),
            local_buckets: BTreeMap::new(),
            local_count: 0,
            tick_ms: tick_ms as i64,
            next_id: next,
        }
    }

    /// A fresh session id.
    pub fn next_session_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        if self.next_id == i64::MIN {
            // The container owner marker is never a session id.
            self.next_id += 1;
        }
        id
    }

    fn bucket_for(&self, mono_ms: i64, timeout_ms: i32) -> i64 {
        let t = mono_ms + timeout_ms as i64;
        (t / self.tick_ms + 1) * self.tick_ms
    }

    /// Adds (or re-adds, as log replay does) a session with a fresh deadline.
    /// A re-add keeps the session's verifier; a re-add of a local session
    /// (its createSession committed: it was upgraded) makes it global, as
    /// ZooKeeper's `commitSession` takes it out of the local tracker.
    pub fn add(&mut self, id: i64, timeout_ms: i32, verifier: Option<Verifier>, mono_ms: i64) {
        if self.sessions.contains_key(&id) {
            self.upgrade(id);
            self.touch(id, mono_ms);
            return;
        }
        self.insert(id, timeout_ms, verifier, mono_ms, false);
    }

    /// Adds a session known to this member only (see the module doc).
    pub fn add_local(
        &mut self,
        id: i64,
        timeout_ms: i32,
        verifier: Option<Verifier>,
        mono_ms: i64,
    ) {
        if self.sessions.contains_key(&id) {
            self.touch(id, mono_ms);
            return;
        }
        self.insert(id, timeout_ms, verifier, mono_ms, true);
    }

    fn insert(
        &mut self,
        id: i64,
        timeout_ms: i32,
        verifier: Option<Verifier>,
        mono_ms: i64,
        local: bool,
    ) {
        let at = self.bucket_for(mono_ms, timeout_ms);
        self.buckets_mut(local).entry(at).or_default().insert(id);
        self.local_count += usize::from(local);
        self.sessions.insert(
            id,
            Session {
                id,
                timeout_ms,
                expires_at_ms: at,
                closing: false,
                verifier,
                local,
            },
        );
    }

    fn buckets_mut(&mut self, local: bool) -> &mut BTreeMap<i64, IdSet<i64>> {
        if local {
            &mut self.local_buckets
        } else {
            &mut self.buckets
        }
    }

    /// Moves a session out of the bucket `at`.
    fn unbucket(&mut self, id: i64, at: i64, local: bool) {
        let buckets = self.buckets_mut(local);
        if let Some(b) = buckets.get_mut(&at) {
            b.remove(&id);
            if b.is_empty() {
                buckets.remove(&at);
            }
        }
    }

    /// Whether `id` is a local session of this member.
    pub fn is_local(&self, id: i64) -> bool {
        self.sessions.get(&id).is_some_and(|s| s.local)
    }

    /// Makes a local session global, keeping its id, verifier and
    /// deadline (its createSession is on its way); false if it is not a
    /// local session.
    pub fn upgrade(&mut self, id: i64) -> bool {
        let Some(s) = self.sessions.get_mut(&id) else {
            return false;
        };
        if !s.local {
            return false;
        }
        s.local = false;
        let at = s.expires_at_ms;
        self.local_count -= 1;
        self.unbucket(id, at, true);
        self.buckets.entry(at).or_default().insert(id);
        true
    }

    /// How many local sessions this member holds.
    pub fn local_len(&self) -> usize {
        self.local_count
    }

    /// Whether `password` is the password of session `id` (false if the
    /// session is unknown).
    pub fn password_matches(&self, id: i64, password: &[u8]) -> bool {
        match self.sessions.get(&id).map(|s| s.verifier) {
            None => false,
            Some(None) => password == zookeeper_password(id),
            Some(Some(v)) => verifier(password) == v,
        }
    }

    pub fn get(&self, id: i64) -> Option<&Session> {
        self.sessions.get(&id)
    }

    /// Whether a session exists and is not closing.
    pub fn is_live(&self, id: i64) -> bool {
        self.sessions.get(&id).is_some_and(|s| !s.closing)
    }

    /// Pushes the deadline out; false if the session is unknown or closing.
    pub fn touch(&mut self, id: i64, mono_ms: i64) -> bool {
        let Some(s) = self.sessions.get(&id) else {
            return false;
        };
        if s.closing {
            return false;
        }
        let (old, timeout, local) = (s.expires_at_ms, s.timeout_ms, s.local);
        let at = self.bucket_for(mono_ms, timeout);
        if at == old {
            return true;
        }
        self.unbucket(id, old, local);
        self.buckets_mut(local).entry(at).or_default().insert(id);
        if let Some(s) = self.sessions.get_mut(&id) {
            s.expires_at_ms = at;
        }
        true
    }

    /// Marks a session closing (a closeSession is on its way).
    pub fn set_closing(&mut self, id: i64) {
        if let Some(s) = self.sessions.get_mut(&id) {
            s.closing = true;
        }
    }

    /// Global sessions whose bucket has passed; each is marked closing
    /// and returned once, in id order for determinism.
    pub fn expire(&mut self, mono_ms: i64) -> Vec<i64> {
        self.expire_in(mono_ms, false)
    }

    /// Local sessions whose bucket has passed, marked closing and returned
    /// once, in id order: the member that holds them ends them itself.
    pub fn expire_local(&mut self, mono_ms: i64) -> Vec<i64> {
        self.expire_in(mono_ms, true)
    }

    fn expire_in(&mut self, mono_ms: i64, local: bool) -> Vec<i64> {
        let mut out = Vec::new();
        loop {
            let buckets = self.buckets_mut(local);
            let Some((&at, _)) = buckets.first_key_value() else {
                break;
            };
            if at > mono_ms {
                break;
            }
            let ids = buckets.remove(&at).unwrap_or_default();
            for id in ids {
                if let Some(s) = self.sessions.get_mut(&id) {
                    if !s.closing {
                        s.closing = true;
                        out.push(id);
                    }
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// The ids of the sessions `pred` holds for, in order (determinism).
    fn ids_where(&self, pred: impl Fn(&Session) -> bool) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .sessions
            .values()
            .filter(|s| pred(s))
            .map(|s| s.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Removes every local session (the role changed: ZooKeeper starts a
    /// new server with new trackers), returning their ids in order.
    pub fn remove_local_all(&mut self) -> Vec<i64> {
        let ids = self.ids_where(|s| s.local);
        for &id in &ids {
            self.remove(id);
        }
        ids
    }

    /// Every session marked closing is live again with a full timeout
    /// from `mono_ms`: the role changed, so the closes in flight were
    /// dropped with the proposals and may never commit. ZooKeeper's new
    /// leader likewise starts from a fresh session tracker, in which no
    /// session is closing. (Without this, a session whose close was lost
    /// stays closing on a member that leads again: expiry never picks it
    /// again and its ephemerals stay for good.)
    pub fn reopen_closing(&mut self, mono_ms: i64) {
        for id in self.ids_where(|s| s.closing) {
            let Some(s) = self.sessions.get_mut(&id) else {
                continue;
            };
            s.closing = false;
            let (old, timeout, local) = (s.expires_at_ms, s.timeout_ms, s.local);
            self.unbucket(id, old, local);
            let at = self.bucket_for(mono_ms, timeout);
            self.buckets_mut(local).entry(at).or_default().insert(id);
            if let Some(s) = self.sessions.get_mut(&id) {
                s.expires_at_ms = at;
            }
        }
    }

    pub fn remove(&mut self, id: i64) -> Option<Session> {
        let s = self.sessions.remove(&id)?;
        self.unbucket(id, s.expires_at_ms, s.local);
        self.local_count -= usize::from(s.local);
        Some(s)
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Every session, by id.
    pub fn all(&self) -> Vec<&Session> {
        let mut v: Vec<&Session> = self.sessions.values().collect();
        v.sort_by_key(|s| s.id);
        v
    }

    /// Every global session as a snapshot keeps it, by id (local ones
    /// are this member's alone).
    pub fn records(&self) -> Vec<SessionRecord> {
        self.all()
            .into_iter()
            .filter(|s| !s.local)
            .map(|s| SessionRecord {
                id: s.id,
                timeout_ms: s.timeout_ms,
                verifier: s.verifier,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_match_zookeepers_java_random_derivation() {
        // java: new Random(0 ^ 0xB3415C00L).nextBytes(new byte[16])
        let p = zookeeper_password(0);
        assert_eq!(p.len(), 16);
        assert_eq!(
            zookeeper_password(42),
            zookeeper_password(42),
            "derivation is a pure function"
        );
        assert_ne!(zookeeper_password(42), zookeeper_password(43));
    }

    // ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a client
    // re-attaches with the session's id and password. A session with a
    // verifier takes only the password whose hash it is; ZooKeeper's
    // password computed from the id is refused.
    #[test]
    fn a_session_with_a_verifier_takes_only_its_password() {
        let mut t = SessionTracker::new(1, 0, 1000);
        let pw = [7u8; PASSWORD_LEN];
        t.add(5, 4000, Some(verifier(&pw)), 0);
        assert!(t.password_matches(5, &pw));
        assert!(!t.password_matches(5, &zookeeper_password(5)), "the hijack");
        assert!(!t.password_matches(5, &[7u8; PASSWORD_LEN - 1]));
        assert!(!t.password_matches(5, &[]));
        assert!(!t.password_matches(6, &pw), "unknown session");
        t.add(5, 4000, None, 10);
        assert!(t.password_matches(5, &pw), "a re-add keeps the verifier");
    }

    #[test]
    fn a_session_without_a_verifier_keeps_zookeepers_password() {
        let mut t = SessionTracker::new(1, 0, 1000);
        t.add(5, 4000, None, 0);
        assert!(t.password_matches(5, &zookeeper_password(5)));
        assert!(!t.password_matches(5, &zookeeper_password(6)));
        t.add(8, 4000, Some(NO_PASSWORD), 0);
        assert!(!t.password_matches(8, &zookeeper_password(8)));
        assert!(!t.password_matches(8, &[]));
        assert_eq!(
            t.records(),
            vec![
                SessionRecord {
                    id: 5,
                    timeout_ms: 4000,
                    verifier: None
                },
                SessionRecord {
                    id: 8,
                    timeout_ms: 4000,
                    verifier: Some(NO_PASSWORD)
                },
            ]
        );
    }

    #[test]
    fn java_random_matches_the_jdk_sequence() {
        // new java.util.Random(42).nextInt() == -1170105035
        let mut r = JavaRandom::new(42);
        assert_eq!(r.next_i32(), -1170105035);
        assert_eq!(r.next_i32(), 234785527);
    }

    #[test]
    fn session_ids_carry_the_server_id_in_the_top_byte() {
        let mut t = SessionTracker::new(3, 1_700_000_000_000, 2000);
        let a = t.next_session_id();
        let b = t.next_session_id();
        assert_eq!((a >> 56) & 0xff, 3);
        assert_eq!(b, a + 1);
    }

    #[test]
    fn a_session_expires_in_the_bucket_after_its_timeout_unless_touched() {
        let mut t = SessionTracker::new(1, 0, 1000);
        t.add(7, 5000, None, 0);
        assert!(
            t.expire(5000).is_empty(),
            "bucket is rounded up to the next tick"
        );
        assert_eq!(t.expire(6000), vec![7]);
        assert!(t.expire(7000).is_empty(), "reported once");
        assert!(!t.is_live(7));

        t.add(8, 5000, None, 10_000);
        assert!(t.touch(8, 14_000));
        assert!(t.expire(16_000).is_empty(), "a touch pushed the deadline");
        assert_eq!(t.expire(20_000), vec![8]);
    }

    #[test]
    fn reopened_sessions_expire_again_after_a_full_timeout() {
        let mut t = SessionTracker::new(1, 0, 1000);
        t.add(7, 5000, None, 0);
        t.add(8, 5000, None, 0);
        assert_eq!(t.expire(6000), vec![7, 8]);
        t.set_closing(8);
        t.reopen_closing(10_000);
        assert!(t.is_live(7) && t.is_live(8));
        assert!(
            t.expire(15_000).is_empty(),
            "a full timeout from the reopen"
        );
        assert_eq!(t.expire(16_000), vec![7, 8], "and they expire again");
    }

    #[test]
    fn closing_sessions_cannot_be_touched_back_to_life() {
        let mut t = SessionTracker::new(1, 0, 1000);
        t.add(1, 4000, None, 0);
        t.set_closing(1);
        assert!(!t.touch(1, 100));
        assert!(t.remove(1).is_some());
        assert!(t.is_empty());
    }

    // ZooKeeper Administrator's Guide, "Advanced Configuration"
    // (localSessionsEnabled): a local session is this member's alone. It
    // expires apart from the global ones (a follower expires its local
    // sessions and never a global one), a snapshot leaves it out, and an
    // upgrade makes it global with the same id, verifier and deadline.
    #[test]
    fn local_sessions_expire_apart_and_stay_out_of_snapshots_until_upgraded() {
        let mut t = SessionTracker::new(1, 0, 1000);
        let pw = [9u8; PASSWORD_LEN];
        t.add(1, 5000, None, 0);
        t.add_local(2, 5000, Some(verifier(&pw)), 0);
        t.add_local(3, 5000, None, 0);
        assert!(t.is_local(2) && !t.is_local(1));
        assert_eq!(t.local_len(), 2);
        assert!(t.password_matches(2, &pw));
        assert_eq!(
            t.records().iter().map(|r| r.id).collect::<Vec<_>>(),
            vec![1],
            "no local session in a snapshot"
        );
        assert!(t.upgrade(3));
        assert!(!t.upgrade(3), "once");
        assert!(!t.upgrade(1), "a global session is not upgraded");
        assert_eq!(t.local_len(), 1);
        assert_eq!(t.records().len(), 2, "upgraded: in snapshots");
        assert_eq!(t.expire_local(6000), vec![2], "local ones only");
        assert!(t.remove(2).is_some_and(|s| s.local));
        assert_eq!(t.expire(6000), vec![1, 3], "global ones only");
        // A committed createSession of a local session upgrades it too.
        t.add_local(4, 5000, Some(verifier(&pw)), 10_000);
        t.add(4, 5000, None, 10_000);
        assert!(!t.is_local(4));
        assert!(t.password_matches(4, &pw), "its verifier kept");
        t.add_local(5, 5000, None, 10_000);
        assert_eq!(t.remove_local_all(), vec![5]);
        assert_eq!(t.local_len(), 0);
        assert!(t.get(5).is_none() && t.get(4).is_some());
        assert!(t.expire_local(100_000).is_empty());
    }
}
