//! The state machine's part of a snapshot payload: the recipe wait table,
//! then the tree. It is the body of storage's snapshot envelope
//! (`wazoo_storage::write_snapshot_envelope`: magic, version, zxid and the
//! sessions), which the shell writes first. The envelope lives in storage
//! and the body here because the body is made of this crate's types, and
//! storage must not depend on the core (it stores opaque bytes); the core
//! does not depend on storage either (it does no I/O). The body's layout
//! follows the envelope's version ([`SNAPSHOT_FORMAT`] is the one written,
//! and storage's `SNAPSHOT_VERSION` must equal it):
//!
//! ```text
//! 1: Tree
//! 2: Waits Tree
//! 3: Waits Modules Tree
//! 4: Waits Modules RecipesAcl Counters Tree
//! 5: as 4 (the envelope's sessions carry their password's verifier)
//! ```
//!
//! The tree carries a version of its own (`crate::tree` snapshot format:
//! 2 written, keeping null data apart from empty data; 1 still read), so a
//! change of the tree's encoding needs no new body format.
//!
//! Every section is read from bytes off disk or from another member: each
//! count is checked against the bytes left (and a fixed maximum) before
//! anything is allocated, and a damaged section is an error naming it.

use std::io::{self, Write};

use wazoo_proto::jute::{DecodeError, Reader};

use crate::recipe::{read_counters, write_counters, RecipeWaits};
use crate::server::SnapshotJob;
use crate::tree::{DataTree, SnapshotError};

/// The body format [`write_snapshot_body`] writes: 4 adds the recipe
/// counters after the deployed modules; 5 lays the body out as 4 (it is
/// the envelope's sessions that changed, each with its password's
/// verifier).
pub const SNAPSHOT_FORMAT: u32 = 5;

/// Why a snapshot body cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotBodyError {
    #[error("snapshot recipe waits: {0}")]
    Waits(DecodeError),
    #[error("snapshot deployed recipe modules: {0}")]
    Modules(DecodeError),
    #[error("snapshot recipe counters: {0}")]
    Counters(DecodeError),
    #[error("unsupported snapshot body format {0}")]
    Format(u32),
    #[error("snapshot tree: {0}")]
    Tree(SnapshotError),
}

/// Writes the body of `job`'s snapshot (format [`SNAPSHOT_FORMAT`]): the
/// recipe waits, the deployed modules, the ACL of /zookeeper/recipes, the
/// recipe counters, then the tree.
pub fn write_snapshot_body(job: &SnapshotJob, w: &mut dyn Write) -> io::Result<()> {
    let mut waits = Vec::new();
    job.waits.write(&mut waits);
    job.waits.write_modules(&mut waits);
    job.waits.write_recipes_acl(&mut waits);
    write_counters(&job.waits.counters, &mut waits);
    w.write_all(&waits)?;
    job.tree.write_to(w)
}

/// Reads a body written by [`write_snapshot_body`] under envelope
/// `version` (1 has no wait table, 1 and 2 no modules, 1 to 3 no ACL of
/// /zookeeper/recipes, which is then the default one, and no counters:
/// they load as none, zeros until the next counters txn). Never panics on
/// any input.
pub fn read_snapshot_body(
    version: u32,
    body: &[u8],
) -> Result<(RecipeWaits, DataTree), SnapshotBodyError> {
    if !(1..=SNAPSHOT_FORMAT).contains(&version) {
        return Err(SnapshotBodyError::Format(version));
    }
    let mut r = body;
    let waits = if version >= 2 {
        let mut jr = Reader::new(r);
        let mut waits = RecipeWaits::read(&mut jr).map_err(SnapshotBodyError::Waits)?;
        if version >= 3 {
            waits
                .read_modules(&mut jr)
                .map_err(SnapshotBodyError::Modules)?;
        }
        if version >= 4 {
            waits
                .read_recipes_acl(&mut jr)
                .map_err(SnapshotBodyError::Waits)?;
            waits.counters = read_counters(&mut jr).map_err(SnapshotBodyError::Counters)?;
        }
        r = jr.rest();
        waits
    } else {
        RecipeWaits::default()
    };
    let tree = DataTree::read_from(&mut r).map_err(SnapshotBodyError::Tree)?;
    Ok((waits, tree))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::{ModuleCounters, RecipeCounters};
    use crate::server::SnapshotJob;

    fn job(tree: &DataTree) -> SnapshotJob {
        SnapshotJob {
            zxid: wazoo_proto::Zxid(7),
            tree: tree.snapshot(),
            waits: RecipeWaits::default(),
            sessions: vec![wazoo_proto::SessionRecord {
                id: 1,
                timeout_ms: 4000,
                verifier: None,
            }],
        }
    }

    #[test]
    fn a_body_reads_back_as_the_tree_it_was_written_from() {
        let tree = DataTree::default();
        let mut body = Vec::new();
        write_snapshot_body(&job(&tree), &mut body).unwrap();
        let (waits, back) = read_snapshot_body(SNAPSHOT_FORMAT, &body).unwrap();
        assert!(waits.is_empty());
        assert_eq!(back.node_count(), tree.node_count());
        back.check_invariants().unwrap();
    }

    /// Counters of two modules, one with errors of two kinds.
    fn counters() -> RecipeCounters {
        let mut lock = ModuleCounters::default();
        lock.record(40, 120, None);
        lock.record(7, 3_000, Some("fuel"));
        lock.record(9, 90, Some("recipe"));
        let mut queue = ModuleCounters::default();
        queue.record(1, 1, None);
        [("lock".to_string(), lock), ("queue".to_string(), queue)]
            .into_iter()
            .collect()
    }

    /// [`job`] with the committed recipe counters of [`counters`].
    fn job_with_counters(tree: &DataTree) -> SnapshotJob {
        let mut j = job(tree);
        j.waits.counters = counters();
        j
    }

    fn body_of(j: &SnapshotJob) -> Vec<u8> {
        let mut body = Vec::new();
        write_snapshot_body(j, &mut body).unwrap();
        body
    }

    #[test]
    fn every_truncated_body_is_an_error() {
        let j = job_with_counters(&DataTree::default());
        let body = body_of(&j);
        for len in 0..body.len() {
            assert!(
                read_snapshot_body(SNAPSHOT_FORMAT, &body[..len]).is_err(),
                "a body cut at {len} bytes was accepted"
            );
        }
    }

    // docs/METRICS.md, "Recipes": the per-module counters are the
    // ensemble's and survive a reload; a snapshot carries them.
    #[test]
    fn the_committed_recipe_counters_read_back_from_a_snapshot_body() {
        let tree = DataTree::default();
        let j = job_with_counters(&tree);
        let body = body_of(&j);
        let (waits, back) = read_snapshot_body(SNAPSHOT_FORMAT, &body).unwrap();
        assert_eq!(waits.counters, counters());
        assert_eq!(waits, j.waits, "the whole recipe state round-trips");
        assert_eq!(back.node_count(), tree.node_count());
    }

    /// A body as format 3 wrote it: waits, modules, tree; no counters.
    fn format_3_body(j: &SnapshotJob) -> Vec<u8> {
        let mut body = Vec::new();
        j.waits.write(&mut body);
        j.waits.write_modules(&mut body);
        j.tree.write_to(&mut body).unwrap();
        body
    }

    #[test]
    fn a_format_3_snapshot_without_counters_loads_with_none() {
        let tree = DataTree::default();
        let j = job_with_counters(&tree);
        let body = format_3_body(&j);
        let (waits, back) = read_snapshot_body(3, &body).unwrap();
        assert!(waits.counters.is_empty(), "format 3 has no counters");
        assert_eq!(waits.modules, j.waits.modules);
        assert_eq!(back.node_count(), tree.node_count());
        back.check_invariants().unwrap();
        // The same bytes are not a format 4 body: its tree would be read
        // as the ACL and counters, and that is refused, not guessed at.
        assert!(read_snapshot_body(SNAPSHOT_FORMAT, &body).is_err());
    }

    #[test]
    fn a_damaged_counters_section_is_an_error_naming_it() {
        let j = job_with_counters(&DataTree::default());
        let body = body_of(&j);
        // The counters' module count follows the waits, the modules and
        // the ACL of /zookeeper/recipes.
        let mut head = Vec::new();
        j.waits.write(&mut head);
        j.waits.write_modules(&mut head);
        j.waits.write_recipes_acl(&mut head);
        let at = head.len();
        assert_eq!(body[at..at + 4], 2i32.to_be_bytes(), "two modules");
        for bad in [i32::MAX, 1_000_000, -2] {
            let mut damaged = body.clone();
            damaged[at..at + 4].copy_from_slice(&bad.to_be_bytes());
            let err = read_snapshot_body(SNAPSHOT_FORMAT, &damaged).unwrap_err();
            assert!(
                matches!(err, SnapshotBodyError::Counters(_))
                    && err.to_string().starts_with("snapshot recipe counters:"),
                "count {bad}: {err}"
            );
        }
    }

    #[test]
    fn unknown_body_formats_are_refused() {
        let mut body = Vec::new();
        write_snapshot_body(&job(&DataTree::default()), &mut body).unwrap();
        for v in [0, SNAPSHOT_FORMAT + 1] {
            assert!(matches!(
                read_snapshot_body(v, &body),
                Err(SnapshotBodyError::Format(n)) if n == v
            ));
        }
    }
}
