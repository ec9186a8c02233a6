//! The prep view as a recipe step sees it: [`PrepHost`], the
//! [`RecipeHost`] a recipe call or callback runs against, answered by the
//! pipeline's prep view (committed state plus outstanding changes) and
//! staging the step's writes, watches and notifications.

use wazoo_proto::{perms, Acl, CreateRequest, ErrorCode};
use wazoo_sdk::abi::{AclEntry, CreateMode, NodeStat, Notification};

use super::super::{
    acl, check_read_path, prep_check, prep_create, prep_delete, prep_set_data, validate_path,
    AuthInfo, Record, ServerConfig, Stat, Txn, View,
};
use super::encode;
use crate::recipe::{RecipeHost, RecipeWait};

/// The prep view as a recipe step sees it.
pub(super) struct PrepHost<'v, 'a> {
    pub(super) cfg: &'a ServerConfig,
    pub(super) view: View<'v>,
    pub(super) auth: &'a AuthInfo,
    pub(super) session: i64,
    /// The step's `caller_guid`, recorded with the waits it registers.
    pub(super) guid: String,
    pub(super) module: &'a str,
    pub(super) ops: Vec<Txn>,
    pub(super) waits: Vec<RecipeWait>,
    pub(super) notes: Vec<(i64, Vec<u8>)>,
    /// Bytes of paths, data and payloads staged so far (see `stage`).
    pub(super) staged_bytes: usize,
    /// The step was shown a stat stamped with its own txn's zxid (a node
    /// it wrote): a step run off the member's thread whose txn gets
    /// another zxid must then run again (see `recipes/offload.rs`).
    pub(super) saw_own_stamp: bool,
}

impl PrepHost<'_, '_> {
    /// A step's writes and notifications travel in one txn, which
    /// `jute.maxbuffer` bounds as a client's frame bounds its multi: the
    /// staged total after one more op of `path` and `data`, or
    /// BadArguments if that passes the bound (the op is then not staged).
    fn stage(&self, path: &str, data: &[u8]) -> Result<usize, ErrorCode> {
        let total = self.staged_bytes + path.len() + data.len();
        if total > self.cfg.max_buffer_bytes {
            return Err(ErrorCode::BadArguments);
        }
        Ok(total)
    }
}

fn node_stat(s: &Stat) -> NodeStat {
    NodeStat {
        czxid: s.czxid,
        mzxid: s.mzxid,
        ctime: s.ctime,
        mtime: s.mtime,
        version: s.version,
        cversion: s.cversion,
        aversion: s.aversion,
        ephemeral_owner: s.ephemeral_owner,
        data_length: s.data_length,
        num_children: s.num_children,
        pzxid: s.pzxid,
    }
}

impl PrepHost<'_, '_> {
    fn watch(&mut self, path: &str, token: Option<&str>, child: bool) {
        if let Some(token) = token {
            // One watch per token: a later registration replaces it.
            self.waits.retain(|w| w.token != token);
            self.waits.push(RecipeWait {
                session: self.session,
                module: self.module.to_string(),
                token: token.to_string(),
                path: path.to_string(),
                child,
                auth: self.auth.ids.clone(),
                guid: self.guid.clone(),
                call_node: String::new(),
                fired: None,
            });
        }
    }

    /// The guest's view of a node's stat, noting whether it shows this
    /// step's own stamps.
    fn shown(&mut self, s: &Stat) -> NodeStat {
        let own = self.view.zxid.to_wire();
        if s.czxid == own || s.mzxid == own || s.pzxid == own {
            self.saw_own_stamp = true;
        }
        node_stat(s)
    }

    fn readable(&self, path: &str) -> Result<Record, ErrorCode> {
        check_read_path(path)?;
        validate_path(path)?;
        let r = self.view.get(path).ok_or(ErrorCode::NoNode)?;
        acl::check(&r.acl, perms::READ, self.auth)?;
        Ok(r)
    }
}

impl RecipeHost for PrepHost<'_, '_> {
    fn get(&mut self, path: &str, watch: Option<&str>) -> Result<(Vec<u8>, NodeStat), ErrorCode> {
        let r = self.readable(path)?;
        self.watch(path, watch, false);
        let data = match &r.data {
            Some(d) => d.to_vec(),
            None => self
                .view
                .tree
                .get_data(path)
                .and_then(|(d, _)| d)
                .unwrap_or_default(),
        };
        Ok((data, self.shown(&r.stat)))
    }

    fn children(&mut self, path: &str, watch: Option<&str>) -> Result<Vec<String>, ErrorCode> {
        self.readable(path)?;
        self.watch(path, watch, true);
        Ok(self.view.children(path))
    }

    fn exists(&mut self, path: &str, watch: Option<&str>) -> Result<Option<NodeStat>, ErrorCode> {
        check_read_path(path)?;
        validate_path(path)?;
        // ZooKeeper registers an exists watch whether or not the node is there.
        self.watch(path, watch, false);
        let r = self.view.get(path);
        Ok(r.map(|r| self.shown(&r.stat)))
    }

    fn create(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: Option<&[AclEntry]>,
    ) -> Result<String, ErrorCode> {
        // The ACL travels in the txn too: its ids count toward the bound.
        let acl_bytes: usize = acl
            .unwrap_or_default()
            .iter()
            .map(|a| 4 + a.scheme.len() + a.id.len())
            .sum();
        let staged = self.stage(path, data)? + acl_bytes;
        if staged > self.cfg.max_buffer_bytes {
            return Err(ErrorCode::BadArguments);
        }
        let (flags, ttl) = match mode {
            CreateMode::Persistent => (0, None),
            CreateMode::Ephemeral => (1, None),
            CreateMode::PersistentSequential => (2, None),
            CreateMode::EphemeralSequential => (3, None),
            CreateMode::Container => (4, None),
            CreateMode::PersistentWithTtl(t) => (5, Some(t)),
            CreateMode::PersistentSequentialWithTtl(t) => (6, Some(t)),
        };
        let req = CreateRequest {
            path: path.to_string(),
            data: Some(data.to_vec()),
            // As a client's create: `auth` entries expand to the caller's
            // identities in `prep_create` (fixupACL), with its errors.
            acl: match acl {
                None => Acl::open_unsafe(),
                Some(entries) => entries
                    .iter()
                    .map(|a| Acl::new(a.perms, &a.scheme, &a.id))
                    .collect(),
            },
            flags,
            ttl,
        };
        // The opcode a client would send for this mode.
        let op = match flags {
            4 => wazoo_proto::OpCode::CreateContainer,
            5 | 6 => wazoo_proto::OpCode::CreateTtl,
            _ => wazoo_proto::OpCode::Create,
        };
        let (txn, created) =
            prep_create(self.cfg, &mut self.view, self.auth, self.session, op, &req)?;
        self.ops.push(txn);
        self.staged_bytes = staged;
        Ok(created)
    }

    fn set(&mut self, path: &str, data: &[u8], version: i32) -> Result<NodeStat, ErrorCode> {
        let staged = self.stage(path, data)?;
        let txn = prep_set_data(
            self.cfg,
            &mut self.view,
            self.auth,
            path,
            Some(data),
            version,
        )?;
        self.ops.push(txn);
        self.staged_bytes = staged;
        let r = self.view.get(path).ok_or(ErrorCode::NoNode)?;
        Ok(self.shown(&r.stat))
    }

    fn delete(&mut self, path: &str, version: i32) -> Result<(), ErrorCode> {
        let staged = self.stage(path, b"")?;
        prep_delete(&mut self.view, self.auth, self.session, path, version)?;
        self.ops.push(Txn::Delete {
            path: path.to_string(),
        });
        self.staged_bytes = staged;
        Ok(())
    }

    fn check(&mut self, path: &str, version: i32) -> Result<(), ErrorCode> {
        let staged = self.stage(path, b"")?;
        prep_check(&mut self.view, self.auth, path, version)?;
        self.ops.push(Txn::Check {
            path: path.to_string(),
        });
        self.staged_bytes = staged;
        Ok(())
    }

    fn notify(&mut self, session: i64, payload: &[u8]) -> Result<(), ErrorCode> {
        self.staged_bytes = self.stage("", payload)?;
        self.notes.push((
            session,
            encode(&Notification::Message {
                module: self.module.to_string(),
                payload: payload.to_vec(),
            }),
        ));
        Ok(())
    }
}

impl View<'_> {
    /// The children of `path` as this view sees them, sorted by name.
    pub(in crate::server) fn children(&self, path: &str) -> Vec<String> {
        let mut names: std::collections::BTreeSet<String> = self
            .tree
            .children(path)
            .unwrap_or_default()
            .into_iter()
            .collect();
        let changed = self
            .outstanding
            .map
            .keys()
            .map(String::as_str)
            .chain(self.local.paths());
        for p in changed {
            if p != "/" && wazoo_proto::path::parent(p) == path {
                let name = &p[p.rfind('/').map_or(0, |i| i + 1)..];
                names.insert(name.to_string());
            }
        }
        names
            .into_iter()
            .filter(|n| {
                let child = if path == "/" {
                    format!("/{n}")
                } else {
                    format!("{path}/{n}")
                };
                self.get_unrecorded(&child).is_some()
            })
            .collect()
    }
}
