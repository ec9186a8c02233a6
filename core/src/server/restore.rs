//! The AdminServer's `restore` (ZooKeeper 3.9; docs/OPERATIONS.md, "The
//! AdminServer"): the whole state replaced by a snapshot's, through the
//! log.
//!
//! ZooKeeper 3.9 swaps the database of the one server that was asked. In
//! an ensemble that leaves the members with different trees, so here a
//! restore is a txn ([`Txn::Restore`]) like any write: the leader (or a
//! standalone member) proposes it, a follower forwards it
//! ([`PeerMsg::Restore`]), and every member applies it at its zxid. The
//! shell read and checked the snapshot (checksum, format, tree
//! invariants) before it asked; applying decodes the same bytes on every
//! member, so every member holds the same tree, sessions and recipe state
//! afterwards. Applying:
//!
//! - replaces the tree, the recipe state (waits, modules, counters, the
//!   ACL of /zookeeper/recipes) and the session table with the
//!   snapshot's, as ZooKeeper's `restoreFromSnapshot` replaces its
//!   database and session tracker; an ephemeral whose owner the snapshot
//!   does not list gets a session that can only expire (as after
//!   recovery);
//! - keeps `/zookeeper/config` as it is: the membership is not a
//!   snapshot's to change;
//! - closes every client connection, as a follower's SNAP does, so every
//!   watch is dropped with its connection: a client re-attaches (if the
//!   snapshot lists its session) and sets its watches again, and the
//!   member fires those whose node was deleted or created meanwhile, as
//!   for any re-attach; a session the snapshot does not list is expired;
//! - asks for a snapshot at its zxid, so a restart loads the restored
//!   state without replaying the txn.
//!
//! A txn is one log record: the snapshot a restore carries is bounded by
//! [`RESTORE_BYTES_MAX`].

use super::{ConnId, Output, PeerMsg, Server, Txn, Zxid};
use crate::txn::{RestoreTxn, TxnHeader};

/// The most snapshot bytes (body and sessions, as the txn encodes them)
/// one restore carries: with the txn's own fields it stays under the
/// log's 16 MiB record bound.
pub const RESTORE_BYTES_MAX: usize = 15 << 20;

impl Server {
    /// The shell asks for a restore (already checked): the leader or a
    /// standalone member proposes it, a follower forwards it; without a
    /// leader it is refused at once.
    pub(super) fn on_restore(&mut self, r: Box<RestoreTxn>) {
        if self.role.forwards() {
            self.out.push(Output::ToLeader(PeerMsg::Restore(r)));
        } else {
            self.prep_restore(r);
        }
    }

    /// Leader (or standalone): proposes a restore. A refusal goes back as
    /// [`Output::Restored`] with the reason (on a leader that was
    /// forwarded one, the asking member's shell times out instead).
    pub(super) fn prep_restore(&mut self, r: Box<RestoreTxn>) {
        let refuse = |s: &mut Server, why: String| {
            tracing::warn!(token = r.token, "restore refused: {why}");
            s.out.push(Output::Restored {
                token: r.token,
                zxid: s.last_applied,
                error: Some(why),
            });
        };
        if !self.role.decides() {
            return refuse(
                self,
                "this member has no leader to propose the restore".into(),
            );
        }
        // What the txn's encoding takes, sessions included (each at most
        // an id, a timeout and a 32-byte verifier with their lengths).
        let bytes = r.body.len() + r.sessions.len() * 48;
        if bytes > RESTORE_BYTES_MAX {
            return refuse(
                self,
                format!(
                    "the snapshot takes {bytes} bytes as a txn; a restore carries at most {RESTORE_BYTES_MAX}"
                ),
            );
        }
        if !self.can_propose() {
            return refuse(self, "consensus takes no more proposals now".into());
        }
        self.propose(
            super::Origin::Internal,
            super::ensemble::INTERNAL_CXID,
            0,
            Txn::Restore(r),
            Vec::new(),
            None,
            false,
        );
    }

    /// Applies a committed restore (see the module doc). A body that does
    /// not decode changes nothing on any member (they all hold the same
    /// bytes); the asking member is told why.
    pub(super) fn apply_restore(&mut self, hdr: &TxnHeader, r: &RestoreTxn) {
        let zxid = Zxid::from_wire(hdr.zxid);
        let (waits, mut tree) = match crate::snapshot::read_snapshot_body(r.body_version, &r.body) {
            Ok(loaded) => loaded,
            Err(e) => {
                tracing::error!(%zxid, "a committed restore does not load; nothing changed: {e}");
                self.out.push(Output::Restored {
                    token: r.token,
                    zxid,
                    error: Some(format!("the snapshot does not load: {e}")),
                });
                return;
            }
        };
        if let Some((Some(data), stat)) = self.tree.get_data(super::reconfig::CONFIG_NODE) {
            tree.set_config_node(&data, stat.mzxid, stat.mtime);
        }
        let mut conns: Vec<ConnId> = self.conns.keys().copied().collect();
        conns.sort_unstable(); // the same inputs give the same outputs
        for c in conns {
            self.close_conn(c);
        }
        let old: Vec<i64> = self.sessions.all().iter().map(|s| s.id).collect();
        for id in old {
            self.sessions.remove(id);
            self.ens.forget_owner(id);
        }
        for s in &r.sessions {
            self.sessions
                .add(s.id, s.timeout_ms, s.verifier, self.mono_ms);
        }
        tracing::info!(
            %zxid,
            snapshot_zxid = format!("0x{:x}", r.snapshot_zxid),
            nodes = tree.node_count(),
            sessions = r.sessions.len(),
            "restored the state of a snapshot"
        );
        self.tree = tree;
        self.waits = waits;
        self.adopt_orphan_ephemerals();
        self.sync_engine();
        self.out.push(Output::Restored {
            token: r.token,
            zxid,
            error: None,
        });
    }
}
