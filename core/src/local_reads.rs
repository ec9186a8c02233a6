//! Reads answered outside the pipeline, from a published copy of the tree:
//! the rules, as data. The shell's client I/O threads answer plain reads
//! this way (`wazoo.client.ioThreads`, host/src/net/local_reads.rs, each
//! connection's [`LocalReadGate`] under a lock), and the whole-member
//! simulation models them with the same types.
//!
//! Only the reads the tree alone answers qualify
//! ([`crate::server::tree_read_eligible`]: no watch, nothing under
//! `/zookeeper`), and only on a connection the pipeline allowed
//! ([`crate::server::Output::LocalReads`], with its identities). Three
//! rules keep what a client sees as if the pipeline had answered:
//!
//! 1. **A session's order.** A read is answered outside only while the
//!    pipeline owes the connection nothing (every request it was handed
//!    has its reply in the connection's queue) and nothing is waiting to
//!    be handed to it; otherwise it goes to the pipeline behind the rest.
//!    Its reply then enters the queue after every earlier one.
//! 2. **Never older than what the connection was sent.** What the shell
//!    hands a connection at the end of a batch is stamped with the
//!    sequence number of the copy that holds the tree it was made from:
//!    the current copy's if no node changed in the batch, else the next
//!    one, published right after the hand-over ([`ReadViews`]). A read is
//!    answered outside only from a copy at least that new. So a client
//!    never reads older data than a reply or an event it was sent (its own
//!    write included), and a watch's event is in the queue before any
//!    reply that shows the change that fired it (ZooKeeper Programmer's
//!    Guide, "ZooKeeper Watches").
//! 3. **One at a time.** A hand-over to a connection and a read answered
//!    outside for it do not interleave (the shell holds the connection's
//!    lock for each): the queue's order is the order of the state they
//!    show.
//!
//! The reads answered outside reach the pipeline in batches
//! ([`crate::server::Input::LocalReads`]): they touch the session and are
//! counted.

use std::sync::Arc;

use wazoo_proto::{frame, Request, Response};

use crate::acl::AuthInfo;
use crate::server::{tree_read, tree_read_eligible, Server};
use crate::tree::DataTree;

/// One published copy of the tree.
pub struct ReadView {
    /// Increases by one with every copy published; the first is 1.
    pub seq: u64,
    tree: DataTree,
    /// The zxid the copy is the state of: the reply header's zxid.
    zxid: i64,
}

/// The publishing side: the copy last published, and when the next one is
/// due.
pub struct ReadViews {
    published: Arc<ReadView>,
}

impl ReadViews {
    /// The server's tree as it is, as copy 1.
    pub fn start(server: &Server) -> ReadViews {
        let (tree, zxid) = server.read_view();
        ReadViews {
            published: Arc::new(ReadView { seq: 1, tree, zxid }),
        }
    }

    /// The copy last published.
    pub fn current(&self) -> &Arc<ReadView> {
        &self.published
    }

    /// The sequence number of the copy that holds the state as it is now:
    /// what a batch's hand-overs are stamped with (rule 2). The next one
    /// if a node changed or a txn was applied since the last copy, which
    /// [`ReadViews::publish`] then publishes after the hand-overs.
    pub fn seq_of_now(&self, server: &Server) -> u64 {
        if server.read_view_current(&self.published.tree, self.published.zxid) {
            self.published.seq
        } else {
            self.published.seq + 1
        }
    }

    /// The state as it is now as a new copy, if it moved since the last
    /// one (None: the last one still holds).
    pub fn publish(&mut self, server: &Server) -> Option<Arc<ReadView>> {
        if server.read_view_current(&self.published.tree, self.published.zxid) {
            return None;
        }
        let (tree, zxid) = server.read_view();
        let seq = self.published.seq + 1;
        self.published = Arc::new(ReadView { seq, tree, zxid });
        Some(self.published.clone())
    }
}

/// What may be answered outside the pipeline for one connection.
#[derive(Default)]
pub struct LocalReadGate {
    /// The connection's identities, once the pipeline allowed its reads
    /// outside; None before that and once it is closing.
    auth: Option<Arc<AuthInfo>>,
    /// The copy the last hand-over was made from (rule 2).
    handed_seq: u64,
    /// Requests handed to the pipeline whose replies are not yet in the
    /// connection's queue (rule 1).
    pipeline_owes: u64,
}

impl LocalReadGate {
    /// A request goes to the pipeline.
    pub fn to_pipeline(&mut self) {
        self.pipeline_owes += 1;
    }

    /// The shell hands the connection `replies` replies (and maybe events)
    /// made from copy `seq`, and with `allow` the pipeline's permission
    /// ([`crate::server::Output::LocalReads`]) that was gathered with them.
    pub fn handed_over(&mut self, seq: u64, replies: u32, allow: Option<Arc<AuthInfo>>) {
        self.handed_seq = self.handed_seq.max(seq);
        self.pipeline_owes = self.pipeline_owes.saturating_sub(u64::from(replies));
        // Nothing re-opens a connection that is closing.
        if allow.is_some() && self.handed_seq != u64::MAX {
            self.auth = allow;
        }
    }

    /// The connection is closing: nothing more is answered outside.
    pub fn stop(&mut self) {
        self.auth = None;
        self.handed_seq = u64::MAX;
    }

    /// The reply frame of `req` (of `xid`) answered from `view`, if the
    /// rules allow it; None: it goes to the pipeline.
    pub fn answer(&self, view: &ReadView, xid: i32, req: &Request) -> Option<Vec<u8>> {
        let auth = self.auth.as_ref()?;
        if self.pipeline_owes != 0 || view.seq < self.handed_seq || !tree_read_eligible(req) {
            return None;
        }
        let mut out = Vec::new();
        match tree_read(&view.tree, auth, req)? {
            Ok(resp) => frame::write_reply(&mut out, xid, view.zxid, 0, &resp),
            Err(e) => frame::write_reply(&mut out, xid, view.zxid, e.code(), &Response::Empty),
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::ServerConfig;
    use crate::time::Now;

    fn get(path: &str, watch: bool) -> Request {
        Request::GetData {
            path: path.into(),
            watch,
        }
    }

    /// The three rules, one refusal each, and an answer when all hold.
    #[test]
    fn a_gate_answers_only_what_the_rules_allow() {
        let server = Server::new(ServerConfig::default(), Now::default());
        let views = ReadViews::start(&server);
        let view = views.current();
        assert_eq!(view.seq, 1);
        let mut gate = LocalReadGate::default();
        // Not allowed by the pipeline yet.
        assert!(gate.answer(view, 1, &get("/", false)).is_none());
        gate.handed_over(1, 0, Some(Arc::new(AuthInfo::default())));
        assert!(gate.answer(view, 1, &get("/", false)).is_some());
        // Not a plain read: a watch, or a path the pipeline answers.
        assert!(gate.answer(view, 1, &get("/", true)).is_none());
        assert!(gate
            .answer(view, 1, &get("/zookeeper/config", false))
            .is_none());
        // Rule 1: the pipeline owes the connection a reply.
        gate.to_pipeline();
        assert!(gate.answer(view, 2, &get("/", false)).is_none());
        // Rule 2: the reply was made from a copy not yet published.
        gate.handed_over(2, 1, None);
        assert!(gate.answer(view, 2, &get("/", false)).is_none());
        let newer = ReadView {
            seq: 2,
            tree: server.read_view().0,
            zxid: 0,
        };
        assert!(gate.answer(&newer, 2, &get("/", false)).is_some());
        // Closing: nothing more, and no permission re-opens it.
        gate.stop();
        gate.handed_over(3, 0, Some(Arc::new(AuthInfo::default())));
        assert!(gate.answer(&newer, 3, &get("/", false)).is_none());
    }
}
