//! The state machine's part of a snapshot payload: the recipe wait table,
//! then the tree. It is the body of storage's snapshot envelope
//! (`wazoo_storage::write_snapshot_envelope`: magic, version, zxid and the
//! sessions), which the shell writes first. The envelope lives in storage
//! and the body here because the body is made of this crate's types, and
//! storage must not depend on the core (it stores opaque bytes); the core
//! does not depend on storage either (it does no I/O). Envelope version 1
//! has no wait table; version 3 adds the deployed recipe modules (bytes
//! and metadata) after it, version 4 the ACL of /zookeeper/recipes after
//! them.

use std::io::{self, Write};

use wazoo_proto::jute::{DecodeError, Reader};

use crate::recipe::RecipeWaits;
use crate::server::SnapshotJob;
use crate::tree::{DataTree, SnapshotError};

/// Why a snapshot body cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotBodyError {
    #[error("snapshot recipe waits: {0}")]
    Waits(DecodeError),
    #[error("snapshot tree: {0}")]
    Tree(SnapshotError),
}

/// Writes the body of `job`'s snapshot (format 4): the recipe waits, the
/// deployed modules, the ACL of /zookeeper/recipes, then the tree.
pub fn write_snapshot_body(job: &SnapshotJob, w: &mut dyn Write) -> io::Result<()> {
    let mut waits = Vec::new();
    job.waits.write(&mut waits);
    job.waits.write_modules(&mut waits);
    job.waits.write_recipes_acl(&mut waits);
    w.write_all(&waits)?;
    job.tree.write_to(w)
}

/// Reads a body written by [`write_snapshot_body`] under envelope
/// `version` (1 has no wait table, 1 and 2 no modules, 1 to 3 no ACL of
/// /zookeeper/recipes: it is the default one). Never panics on any input.
pub fn read_snapshot_body(
    version: u32,
    body: &[u8],
) -> Result<(RecipeWaits, DataTree), SnapshotBodyError> {
    let mut r = body;
    let waits = if version >= 2 {
        let mut jr = Reader::new(r);
        let mut waits = RecipeWaits::read(&mut jr).map_err(SnapshotBodyError::Waits)?;
        if version >= 3 {
            waits
                .read_modules(&mut jr)
                .map_err(SnapshotBodyError::Waits)?;
        }
        if version >= 4 {
            waits
                .read_recipes_acl(&mut jr)
                .map_err(SnapshotBodyError::Waits)?;
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
    use crate::server::SnapshotJob;

    fn job(tree: &DataTree) -> SnapshotJob {
        SnapshotJob {
            zxid: wazoo_proto::Zxid(7),
            tree: tree.snapshot(),
            waits: RecipeWaits::default(),
            sessions: vec![(1, 4000)],
        }
    }

    #[test]
    fn a_body_reads_back_as_the_tree_it_was_written_from() {
        let tree = DataTree::default();
        let mut body = Vec::new();
        write_snapshot_body(&job(&tree), &mut body).unwrap();
        let (waits, back) = read_snapshot_body(4, &body).unwrap();
        assert!(waits.is_empty());
        assert_eq!(back.node_count(), tree.node_count());
        back.check_invariants().unwrap();
    }

    #[test]
    fn every_truncated_body_is_an_error() {
        let mut body = Vec::new();
        write_snapshot_body(&job(&DataTree::default()), &mut body).unwrap();
        for len in 0..body.len() {
            assert!(
                read_snapshot_body(4, &body[..len]).is_err(),
                "a body cut at {len} bytes was accepted"
            );
        }
    }
}
