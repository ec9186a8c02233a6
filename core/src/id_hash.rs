//! A fast hasher for hash maps keyed by ids the server makes itself
//! (connection ids from the shell, session ids from the session table),
//! never by what a client chooses: SipHash's resistance to hash flooding
//! buys nothing there and costs about 100 instructions per lookup, several
//! lookups per request. Maps keyed by client-chosen paths keep the
//! standard library's keyed SipHash.
//!
//! A client can name a session id (a reconnect's ConnectRequest), but only
//! to look it up: every key stored is one the server made. The hash is
//! deterministic (no seed), which the core does not depend on: no output
//! follows a hash map's iteration order.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash's multiply-and-rotate (as `rustc-hash` 2 computes it).
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = self.0.wrapping_add(n).wrapping_mul(K);
    }

    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn finish(&self) -> u64 {
        // hashbrown takes the bucket from the low bits and a tag from the
        // top 7: the rotation puts the product's best-mixed bits in both.
        self.0.rotate_left(26)
    }
}

/// A hash map keyed by server-made ids (see the module docs).
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;
/// A hash set of server-made ids (see the module docs).
pub type IdSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Consecutive ids (how connection and session ids are handed out)
    /// land in distinct buckets of a small table and carry distinct tags.
    #[test]
    fn consecutive_ids_spread_over_buckets_and_tags() {
        let b = BuildHasherDefault::<IdHasher>::default();
        let hashes: Vec<u64> = (0u64..64).map(|i| b.hash_one(i)).collect();
        let buckets: HashSet<u64> = hashes.iter().map(|h| h & 63).collect();
        let tags: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(buckets.len() >= 40, "{} buckets of 64", buckets.len());
        assert!(tags.len() >= 40, "{} tags of 64", tags.len());
        // Session ids: server id in the top byte, a counter below.
        let sessions: HashSet<u64> = (0i64..64)
            .map(|i| b.hash_one((1i64 << 56) | (0x1234 << 24) | i) & 63)
            .collect();
        assert!(sessions.len() >= 40, "{} buckets of 64", sessions.len());
    }

    #[test]
    fn an_id_map_finds_what_it_holds() {
        let mut m: IdMap<u64, u64> = IdMap::default();
        for i in 0..10_000u64 {
            m.insert(i * 7919, i);
        }
        assert!((0..10_000u64).all(|i| m.get(&(i * 7919)) == Some(&i)));
        assert_eq!(m.get(&1), None);
    }
}
