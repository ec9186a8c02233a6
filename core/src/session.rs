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
}

#[derive(Debug)]
pub struct SessionTracker {
    sessions: IdMap<i64, Session>,
    buckets: BTreeMap<i64, IdSet<i64>>,
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
    /// A re-add keeps the session's verifier.
    pub fn add(&mut self, id: i64, timeout_ms: i32, verifier: Option<Verifier>, mono_ms: i64) {
        if self.sessions.contains_key(&id) {
            self.touch(id, mono_ms);
            return;
        }
        let at = self.bucket_for(mono_ms, timeout_ms);
        self.buckets.entry(at).or_default().insert(id);
        self.sessions.insert(
            id,
            Session {
                id,
                timeout_ms,
                expires_at_ms: at,
                closing: false,
                verifier,
            },
        );
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
        let (old, timeout) = (s.expires_at_ms, s.timeout_ms);
        let at = self.bucket_for(mono_ms, timeout);
        if at == old {
            return true;
        }
        if let Some(b) = self.buckets.get_mut(&old) {
            b.remove(&id);
            if b.is_empty() {
                self.buckets.remove(&old);
            }
        }
        self.buckets.entry(at).or_default().insert(id);
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

    /// Sessions whose bucket has passed; each is marked closing and
    /// returned once, in id order for determinism.
    pub fn expire(&mut self, mono_ms: i64) -> Vec<i64> {
        let mut out = Vec::new();
        while let Some((&at, _)) = self.buckets.first_key_value() {
            if at > mono_ms {
                break;
            }
            let ids = self.buckets.remove(&at).unwrap_or_default();
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

    /// Every session marked closing is live again with a full timeout
    /// from `mono_ms`: the role changed, so the closes in flight were
    /// dropped with the proposals and may never commit. ZooKeeper's new
    /// leader likewise starts from a fresh session tracker, in which no
    /// session is closing. (Without this, a session whose close was lost
    /// stays closing on a member that leads again: expiry never picks it
    /// again and its ephemerals stay for good.)
    pub fn reopen_closing(&mut self, mono_ms: i64) {
        let mut ids: Vec<i64> = self
            .sessions
            .values()
            .filter(|s| s.closing)
            .map(|s| s.id)
            .collect();
        ids.sort_unstable();
        for id in ids {
            let Some(s) = self.sessions.get_mut(&id) else {
                continue;
            };
            s.closing = false;
            let (old, timeout) = (s.expires_at_ms, s.timeout_ms);
            if let Some(b) = self.buckets.get_mut(&old) {
                b.remove(&id);
                if b.is_empty() {
                    self.buckets.remove(&old);
                }
            }
            let at = self.bucket_for(mono_ms, timeout);
            self.buckets.entry(at).or_default().insert(id);
            if let Some(s) = self.sessions.get_mut(&id) {
                s.expires_at_ms = at;
            }
        }
    }

    pub fn remove(&mut self, id: i64) -> Option<Session> {
        let s = self.sessions.remove(&id)?;
        if let Some(b) = self.buckets.get_mut(&s.expires_at_ms) {
            b.remove(&id);
            if b.is_empty() {
                self.buckets.remove(&s.expires_at_ms);
            }
        }
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

    /// Every session as a snapshot keeps it, by id.
    pub fn records(&self) -> Vec<SessionRecord> {
        self.all()
            .into_iter()
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
}
