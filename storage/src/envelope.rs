//! The envelope of a wazoo snapshot payload: what the state machine hands
//! [`crate::write_snapshot`] starts with a magic, a format version, the zxid
//! and the session table; the state machine's own bytes (wazoo-core's
//! recipe wait table and tree) follow as the body, which this crate does not
//! interpret, as it does not interpret log records.
//!
//! ```text
//! Envelope := magic:"WZST" version:u32 zxid:i64 count:u64 Session{count} body
//! Session  := id:i64 timeout_ms:i32 Verifier        (Verifier from version 5)
//! Verifier := 0:u8 | 1:u8 sha256:[u8; 32]
//! ```
//!
//! All integers are big-endian. A session's verifier is the SHA-256 of its
//! password (0: none, the session keeps ZooKeeper's password computed from
//! its id; every session of a version 1 to 4 envelope has none). The
//! version also says what the body holds
//! (version 1 only the tree; 2 starts it with the recipe wait table, 3 adds
//! the deployed modules, 4 the recipe counters, 5, written, is 4's body);
//! 1 to 4 are still read. The envelope is read
//! from bytes that came off disk or from another member, so every length is
//! checked against what is left before anything is allocated.

use crate::Zxid;
use std::io::{self, Write};
use wazoo_proto::{SessionRecord, VERIFIER_LEN};

/// The first four bytes of every snapshot payload.
pub const SNAPSHOT_MAGIC: &[u8; 4] = b"WZST";
/// 2 adds the recipe wait table after the sessions, 3 the deployed recipe
/// modules after the wait table, 4 the ACL of /zookeeper/recipes and the
/// recipe counters after the modules, 5 each session's password verifier;
/// 1 to 4 are still read. It is wazoo-core's `snapshot::SNAPSHOT_FORMAT`
/// (the body's layout follows it; the host checks they are equal).
pub const SNAPSHOT_VERSION: u32 = 5;

/// The first version whose sessions carry a verifier.
const VERIFIER_VERSION: u32 = 5;

/// The fewest bytes of a session entry: id (i64) and timeout (i32), and
/// from version 5 the verifier's tag.
fn session_bytes_min(version: u32) -> usize {
    if version >= VERIFIER_VERSION {
        13
    } else {
        12
    }
}

/// A snapshot payload's envelope, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotEnvelope<'a> {
    /// The format version: [`SNAPSHOT_VERSION`] or an older one (1 to 4).
    pub version: u32,
    /// The last zxid the snapshot holds.
    pub zxid: Zxid,
    /// Every live session.
    pub sessions: Vec<SessionRecord>,
    /// The state machine's bytes after the envelope.
    pub body: &'a [u8],
}

/// Why a snapshot payload's envelope cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("snapshot is truncated")]
    Truncated,
    #[error("not a wazoo snapshot (bad magic)")]
    BadMagic,
    #[error("unsupported snapshot version {0}")]
    UnsupportedVersion(u32),
    #[error("snapshot claims {0} sessions, more than it holds")]
    TooManySessions(u64),
    #[error("snapshot session has an unknown verifier tag {0}")]
    BadVerifier(u8),
}

/// Writes the envelope of a snapshot at `zxid` (version
/// [`SNAPSHOT_VERSION`]); the caller writes the body after it.
pub fn write_snapshot_envelope(
    zxid: Zxid,
    sessions: &[SessionRecord],
    w: &mut dyn Write,
) -> io::Result<()> {
    w.write_all(SNAPSHOT_MAGIC)?;
    w.write_all(&SNAPSHOT_VERSION.to_be_bytes())?;
    w.write_all(&zxid.0.to_be_bytes())?;
    w.write_all(&(sessions.len() as u64).to_be_bytes())?;
    for s in sessions {
        w.write_all(&s.id.to_be_bytes())?;
        w.write_all(&s.timeout_ms.to_be_bytes())?;
        match &s.verifier {
            None => w.write_all(&[0])?,
            Some(v) => {
                w.write_all(&[1])?;
                w.write_all(v)?;
            }
        }
    }
    Ok(())
}

/// Reads the envelope written by [`write_snapshot_envelope`] off the front
/// of `bytes`; the rest is the body.
pub fn read_snapshot_envelope(bytes: &[u8]) -> Result<SnapshotEnvelope<'_>, EnvelopeError> {
    let mut r = bytes;
    if take::<4>(&mut r)? != *SNAPSHOT_MAGIC {
        return Err(EnvelopeError::BadMagic);
    }
    let version = u32::from_be_bytes(take(&mut r)?);
    if !(1..=SNAPSHOT_VERSION).contains(&version) {
        return Err(EnvelopeError::UnsupportedVersion(version));
    }
    let zxid = Zxid(u64::from_be_bytes(take(&mut r)?));
    let n = u64::from_be_bytes(take(&mut r)?);
    if n > (r.len() / session_bytes_min(version)) as u64 {
        return Err(EnvelopeError::TooManySessions(n));
    }
    let mut sessions = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let id = i64::from_be_bytes(take(&mut r)?);
        let timeout_ms = i32::from_be_bytes(take(&mut r)?);
        let verifier = if version >= VERIFIER_VERSION {
            match take::<1>(&mut r)?[0] {
                0 => None,
                1 => Some(take::<VERIFIER_LEN>(&mut r)?),
                t => return Err(EnvelopeError::BadVerifier(t)),
            }
        } else {
            None
        };
        sessions.push(SessionRecord {
            id,
            timeout_ms,
            verifier,
        });
    }
    Ok(SnapshotEnvelope {
        version,
        zxid,
        sessions,
        body: r,
    })
}

fn take<const N: usize>(r: &mut &[u8]) -> Result<[u8; N], EnvelopeError> {
    let (head, rest) = r.split_first_chunk::<N>().ok_or(EnvelopeError::Truncated)?;
    *r = rest;
    Ok(*head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: i64, timeout_ms: i32, verifier: Option<[u8; VERIFIER_LEN]>) -> SessionRecord {
        SessionRecord {
            id,
            timeout_ms,
            verifier,
        }
    }

    fn written(zxid: u64, sessions: &[SessionRecord], body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_snapshot_envelope(Zxid(zxid), sessions, &mut out).unwrap();
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn an_envelope_reads_back_with_the_body_after_it() {
        let sessions = [rec(5, 4000, Some([7; VERIFIER_LEN])), rec(-3, 30000, None)];
        let bytes = written(0x1_0000_0007, &sessions, b"tree");
        let env = read_snapshot_envelope(&bytes).unwrap();
        assert_eq!(
            env,
            SnapshotEnvelope {
                version: SNAPSHOT_VERSION,
                zxid: Zxid(0x1_0000_0007),
                sessions: sessions.to_vec(),
                body: b"tree",
            }
        );
    }

    #[test]
    fn a_version_1_envelope_is_still_read() {
        let mut bytes = written(9, &[], b"");
        bytes[4..8].copy_from_slice(&1u32.to_be_bytes());
        assert_eq!(read_snapshot_envelope(&bytes).unwrap().version, 1);
    }

    /// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": the sessions of
    /// a version 4 envelope (written before passwords were random: id and
    /// timeout only) load without a verifier, so they keep ZooKeeper's
    /// password; an unknown verifier tag is an error.
    #[test]
    fn a_version_4_envelope_loads_its_sessions_without_verifiers() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(SNAPSHOT_MAGIC);
        bytes.extend_from_slice(&4u32.to_be_bytes());
        bytes.extend_from_slice(&9u64.to_be_bytes());
        bytes.extend_from_slice(&2u64.to_be_bytes());
        for (id, timeout) in [(5i64, 4000i32), (6, 30000)] {
            bytes.extend_from_slice(&id.to_be_bytes());
            bytes.extend_from_slice(&timeout.to_be_bytes());
        }
        bytes.extend_from_slice(b"body");
        let env = read_snapshot_envelope(&bytes).unwrap();
        assert_eq!(env.version, 4);
        assert_eq!(env.sessions, vec![rec(5, 4000, None), rec(6, 30000, None)]);
        assert_eq!(env.body, b"body");

        let mut bad = written(9, &[rec(1, 2, None)], b"");
        let tag_at = bad.len() - 1;
        bad[tag_at] = 2;
        assert_eq!(
            read_snapshot_envelope(&bad),
            Err(EnvelopeError::BadVerifier(2))
        );
    }

    #[test]
    fn bad_magic_and_unknown_versions_are_refused() {
        let mut bytes = written(9, &[], b"");
        let next = SNAPSHOT_VERSION + 1;
        bytes[4..8].copy_from_slice(&next.to_be_bytes());
        assert_eq!(
            read_snapshot_envelope(&bytes),
            Err(EnvelopeError::UnsupportedVersion(next))
        );
        bytes[4..8].copy_from_slice(&0u32.to_be_bytes());
        assert_eq!(
            read_snapshot_envelope(&bytes),
            Err(EnvelopeError::UnsupportedVersion(0))
        );
        bytes[0] = b'X';
        assert_eq!(read_snapshot_envelope(&bytes), Err(EnvelopeError::BadMagic));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let bytes = written(
            9,
            &[rec(1, 2, Some([1; VERIFIER_LEN])), rec(3, 4, None)],
            b"",
        );
        for len in 0..bytes.len() {
            assert!(
                read_snapshot_envelope(&bytes[..len]).is_err(),
                "a payload cut at {len} bytes was accepted"
            );
        }
    }

    #[test]
    fn a_huge_session_count_is_refused_before_allocating() {
        let mut bytes = written(9, &[], b"");
        bytes[16..24].copy_from_slice(&u64::MAX.to_be_bytes());
        assert_eq!(
            read_snapshot_envelope(&bytes),
            Err(EnvelopeError::TooManySessions(u64::MAX))
        );
    }
}
