//! Applying txns to the tree: the one way a replicated write changes it.

use std::sync::Arc;

use wazoo_proto::path;
use wazoo_proto::{Acl, EventType};

use super::check::{check_op, check_path, created_kind};
use super::node::{Header, Node, ZnodeType};
use super::quota::{self, STAT_NODE};
use super::{ApplyError, DataTree, Trigger};
use crate::txn::{CreateTxn, Txn, TxnHeader};

impl DataTree {
    /// Applies a txn and returns the watch events it triggers, in order
    /// (create: NodeCreated on the path, then NodeChildrenChanged on the
    /// parent; delete: NodeDeleted, then NodeChildrenChanged on the parent;
    /// setData: NodeDataChanged; setACL, check and session txns: none; a
    /// multi: its ops' events in op order; closeSession: the deletes of the
    /// session's ephemerals, in path order).
    ///
    /// A txn that does not fit leaves the tree unchanged; a multi applies all
    /// of its ops or none.
    pub fn apply(&mut self, hdr: &TxnHeader, txn: &Txn) -> Result<Vec<Trigger>, ApplyError> {
        let mut triggers = Vec::new();
        let result = match txn {
            Txn::Multi(ops) => self.atomically(|t| t.apply_all(hdr, ops, &mut triggers)),
            Txn::Recipe(r) => self.atomically(|t| t.apply_all(hdr, &r.ops, &mut triggers)),
            Txn::CloseSession => self.atomically(|t| t.close_session(hdr, &mut triggers)),
            // The tree is not touched: the pipeline keeps the deployed
            // modules (see `crate::recipe::DeployedModules`).
            Txn::CreateSession { .. }
            | Txn::Error { .. }
            | Txn::Noop
            | Txn::Deploy(_)
            | Txn::Undeploy { .. }
            | Txn::RecipeCounters(_) => Ok(()),
            // The pipeline replaces the whole tree (`Server::apply_restore`).
            Txn::Restore(_) => Ok(()),
            // Nor for the ACL of /zookeeper/recipes, kept beside the
            // modules; an empty one is refused (so not applied).
            Txn::SetRecipesAcl { acl, .. } => super::check::check_recipes_acl(acl),
            Txn::Reconfig { data } => {
                self.reconfig(hdr, data, &mut triggers);
                Ok(())
            }
            op => self.apply_op(hdr, op, &mut triggers),
        };
        self.acls.purge();
        result.map(|()| triggers)
    }

    /// The ops of a multi (or a recipe step), in order; the caller rolls
    /// back on error.
    fn apply_all(
        &mut self,
        hdr: &TxnHeader,
        ops: &[Txn],
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ApplyError> {
        for (index, op) in ops.iter().enumerate() {
            self.apply_op(hdr, op, triggers)
                .map_err(|e| ApplyError::Multi {
                    index,
                    error: Box::new(e),
                })?;
        }
        Ok(())
    }

    /// Runs `f` with an undo log; if it fails, rolls every change back.
    fn atomically(
        &mut self,
        f: impl FnOnce(&mut DataTree) -> Result<(), ApplyError>,
    ) -> Result<(), ApplyError> {
        self.undo = Some(Vec::new());
        let result = f(self);
        let undo = self.undo.take().unwrap_or_default();
        if result.is_err() {
            for (p, old) in undo.into_iter().rev() {
                self.set_node(&p, old);
            }
        }
        result
    }

    /// One op of a multi, or a single txn. Checks everything before
    /// changing anything, so a failing op changes nothing itself.
    fn apply_op(
        &mut self,
        hdr: &TxnHeader,
        op: &Txn,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ApplyError> {
        check_op(op)?;
        match op {
            Txn::Create(c) => self.create(hdr, c, triggers),
            Txn::Delete { path } => self.delete(hdr, path, triggers),
            Txn::SetData {
                path,
                data,
                version,
            } => self.set_data(hdr, path, data.as_deref(), *version, triggers),
            Txn::SetAcl {
                path,
                acl,
                aversion,
            } => self.set_acl(path, acl, *aversion),
            Txn::Check { path } => {
                self.get(path)
                    .ok_or_else(|| ApplyError::NoNode(path.clone()))?;
                Ok(())
            }
            Txn::CreateSession { .. }
            | Txn::CloseSession
            | Txn::Multi(_)
            | Txn::Error { .. }
            | Txn::Noop
            | Txn::Recipe(_)
            | Txn::Deploy(_)
            | Txn::Undeploy { .. }
            | Txn::Reconfig { .. }
            | Txn::RecipeCounters(_)
            | Txn::SetRecipesAcl { .. }
            | Txn::Restore(_) => unreachable!("check_op refuses {op:?} as an op"),
        }
    }

    fn create(
        &mut self,
        hdr: &TxnHeader,
        c: &CreateTxn,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ApplyError> {
        let p = c.path.as_str();
        let kind = created_kind(c)?;
        let parent_path = path::parent(p);
        let parent = self
            .get(parent_path)
            .cloned()
            .ok_or_else(|| ApplyError::NoParent(c.path.clone()))?;
        if matches!(parent.kind(), ZnodeType::Ephemeral { .. }) {
            return Err(ApplyError::EphemeralParent(c.path.clone()));
        }

        // (An ACL list interned for a create that then fails is purged.)
        let acl = self.acls.intern(&c.acl);
        let h = Header {
            czxid: hdr.zxid,
            mzxid: hdr.zxid,
            pzxid: hdr.zxid,
            ctime: hdr.time_ms,
            mtime: hdr.time_ms,
            version: 0,
            cversion: 0,
            aversion: 0,
            acl,
            num_children: 0,
            kind,
        };
        if !self.insert_new(p, Node::for_path(&h, p, c.data.as_deref())) {
            return Err(ApplyError::NodeExists(c.path.clone()));
        }
        let mut ph = parent.header();
        ph.cversion = c.parent_cversion;
        ph.pzxid = hdr.zxid;
        ph.num_children = ph.num_children.saturating_add(1);
        self.set_node(parent_path, Some(parent.with_header(&ph)));

        if let Some(root) = quota::quota_target(parent_path, path::name(p), STAT_NODE) {
            self.update_quota_for_path(root);
        }
        if let Some(root) = self.quota_root_of(p).map(str::to_string) {
            self.update_quota_stat(&root, c.data_len(), 1);
        }
        let parent_acl = self.acl_of(&parent);
        // The new node's list, by the id it was interned under (the node
        // holds a reference now, so the list is in the table).
        let node_acl = self
            .acls
            .get(acl)
            .cloned()
            .unwrap_or_else(|| Arc::from(c.acl.clone()));
        triggers.push(Trigger::new(p, EventType::NodeCreated, node_acl));
        triggers.push(Trigger::new(
            parent_path,
            EventType::NodeChildrenChanged,
            parent_acl,
        ));
        Ok(())
    }

    fn delete(
        &mut self,
        hdr: &TxnHeader,
        p: &str,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ApplyError> {
        check_path(p)?;
        if p == "/" {
            return Err(ApplyError::DeleteRoot);
        }
        let node = self
            .get(p)
            .ok_or_else(|| ApplyError::NoNode(p.to_string()))?;
        if node.num_children() > 0 {
            return Err(ApplyError::NotEmpty(p.to_string()));
        }
        let data_len = node.data().len() as i64;
        let node_acl = self.acl_of(node);
        let parent_path = path::parent(p);
        let parent = self
            .get(parent_path)
            .cloned()
            .ok_or_else(|| ApplyError::NoParent(p.to_string()))?;

        self.set_node(p, None);
        // ZooKeeper 3.8 moves the parent's pzxid on a delete but not its
        // cversion: only creates count for the sequence counter.
        let mut ph = parent.header();
        ph.pzxid = hdr.zxid;
        ph.num_children = ph.num_children.saturating_sub(1);
        self.set_node(parent_path, Some(parent.with_header(&ph)));

        if let Some(root) = self.quota_root_of(p).map(str::to_string) {
            self.update_quota_stat(&root, -data_len, -1);
        }
        let parent_acl = self.acl_of(&parent);
        triggers.push(Trigger::new(p, EventType::NodeDeleted, node_acl));
        triggers.push(Trigger::new(
            parent_path,
            EventType::NodeChildrenChanged,
            parent_acl,
        ));
        Ok(())
    }

    fn set_data(
        &mut self,
        hdr: &TxnHeader,
        p: &str,
        data: Option<&[u8]>,
        version: i32,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ApplyError> {
        let node = self
            .get(p)
            .cloned()
            .ok_or_else(|| ApplyError::NoNode(p.to_string()))?;
        let mut h = node.header();
        h.mzxid = hdr.zxid;
        h.mtime = hdr.time_ms;
        h.version = version;
        let diff = data.map_or(0, <[u8]>::len) as i64 - node.data().len() as i64;
        self.set_node(p, Some(node.with_data(&h, data)));
        if let Some(root) = self.quota_root_of(p).map(str::to_string) {
            self.update_quota_stat(&root, diff, 0);
        }
        let acl = self.acl_of(&node);
        triggers.push(Trigger::new(p, EventType::NodeDataChanged, acl));
        Ok(())
    }

    fn set_acl(&mut self, p: &str, acl: &[Acl], aversion: i32) -> Result<(), ApplyError> {
        let node = self
            .get(p)
            .cloned()
            .ok_or_else(|| ApplyError::NoNode(p.to_string()))?;
        let mut h = node.header();
        h.acl = self.acls.intern(acl);
        h.aversion = aversion;
        self.set_node(p, Some(node.with_header(&h)));
        Ok(())
    }

    /// Deletes every ephemeral of the session, in path order.
    fn close_session(
        &mut self,
        hdr: &TxnHeader,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ApplyError> {
        let paths: Vec<Box<str>> = self
            .ephemerals
            .get(&hdr.session_id)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for p in paths {
            self.delete(hdr, &p, triggers)?;
        }
        Ok(())
    }
}
