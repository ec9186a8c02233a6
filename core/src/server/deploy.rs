//! Recipe modules deployed through the log (docs/RECIPES.md, "Deploy";
//! docs/ARCHITECTURE.md, "Recipes").
//!
//! - A deploy is a write: `setData /zookeeper/recipes` with the module's
//!   bytes, prepped by the leader (the engine validates and compiles the
//!   module there; a refusal changes nothing and the old version keeps
//!   serving), committed through ZAB as a [`Txn::Deploy`] and applied by
//!   every member at its zxid. An undeploy is `delete
//!   /zookeeper/recipes/NAME` ([`Txn::Undeploy`]). Both need ADMIN in the
//!   ACL of /zookeeper/recipes ([`RecipesAcl`]): by default world READ
//!   only, so only the super user (who passes every ACL check) deploys.
//!   `setACL /zookeeper/recipes` sets it as ZooKeeper's setACL sets a
//!   node's ([`Txn::SetRecipesAcl`]: ADMIN in the current ACL, the
//!   aversion checked, the new list fixed up and validated), through the
//!   log; it is kept beside the modules and saved in snapshots with them.
//! - The deployed modules are replicated state ([`DeployedModules`], kept
//!   beside the wait table and saved in snapshots with it), so every
//!   member holds the same modules at the same zxid, a new leader runs
//!   exactly the committed ones, and a member that syncs by SNAP, or
//!   replays its log, has them.
//! - Which version a step runs is decided by zxid order: the leader's
//!   engine serves the module set of its prep view (committed modules plus
//!   the deploys it proposed and has not applied yet), so a call prepped
//!   after a deploy (a later zxid) runs the new version and one prepped
//!   before it ran the old one. Every other member's engine follows its
//!   applied state. A pending wait belongs to the module's name: its
//!   callback runs on the version serving when the callback is prepped (a
//!   replace keeps the wait; an undeploy ends it with an error).
//! - Applying stays pure: it changes the module set only; the engine is
//!   then told what to serve ([`RecipeEngine::install`]) and compiles what
//!   it has not cached (by sha256).
//! - A member's plugins directory deploys too ([`PluginOp`]): the shell's
//!   watcher hands the pipeline what a file change asks for, and the
//!   pipeline submits it as a deploy under the internal plugins identity
//!   ([`plugins_identity`], which no connection can hold): the leader preps
//!   it, a follower forwards it ([`PeerMsg::Plugin`]). Same bytes as the
//!   module served are no txn at all, so members watching copies of one
//!   directory do not churn versions; an undeploy names the sha256 the file
//!   deployed and is no txn when another version serves the name.

use std::collections::BTreeMap;

use wazoo_proto::{perms, Acl, ErrorCode, Id, Request};

use super::{acl, AuthInfo, Origin, Output, PeerMsg, Server, Txn, WriteKind, Zxid};
use crate::recipe::{DeployTxn, DeployedModule, DeployedModules, RecipesAcl};

use super::recipes::RECIPES_NODE;

/// The source a client deploy is recorded with.
pub const SOURCE_CLIENT: &str = "client";

/// What a member's plugins directory asks of the ensemble (docs/RECIPES.md,
/// "The plugins directory"). The shell's watcher makes these; they are
/// submitted with [`plugins_identity`] and never come from a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginOp {
    /// A file is new or changed: deploy its module, unless the module of
    /// its name served (committed or in flight) has the same sha256.
    Deploy {
        bytes: Vec<u8>,
        /// Where it comes from, as recorded with the module (e.g.
        /// `plugins:2:latch.wasm`: member 2's file latch.wasm).
        source: String,
    },
    /// The file that deployed `name` at `sha256` is gone and no other file
    /// declares the name: undeploy it, unless another version (a client's
    /// deploy, another file's) serves the name by then.
    Undeploy { name: String, sha256: String },
}

/// The identity the plugins directory deploys with: the super user, held
/// by no connection (the pipeline gives it only to [`PluginOp`]s, which
/// only the shell's watcher makes), so no credential reaches it.
pub fn plugins_identity() -> AuthInfo {
    AuthInfo {
        ids: vec![Id {
            scheme: "super".into(),
            id: "wazoo:plugins".into(),
        }],
    }
}

/// The leader's view of the deployed modules while deploys are in flight.
#[derive(Debug, Default)]
pub(super) struct DeployState {
    /// Leader: deploys (`Some`) and undeploys (`None`) proposed and not
    /// applied yet, in zxid order.
    pub outstanding: Vec<(Zxid, String, Option<DeployedModule>)>,
    /// Leader: ACLs of /zookeeper/recipes set and not applied yet, in zxid
    /// order.
    pub acls_outstanding: Vec<(Zxid, RecipesAcl)>,
    /// What the engine was last told to serve: name -> sha256.
    pub installed: BTreeMap<String, String>,
    /// Plugins directory changes seen while there was no leader, oldest
    /// first, and the module bytes they hold (bounded: the watcher submits
    /// what is not served again anyway).
    pub held: std::collections::VecDeque<PluginOp>,
    pub held_bytes: usize,
}

/// Most plugins directory changes held while there is no leader, and most
/// module bytes among them.
const PLUGIN_OPS_HELD_MAX: usize = 256;
const PLUGIN_OPS_HELD_BYTES_MAX: usize = 16 << 20;

impl Server {
    /// The deployed modules, as applied here.
    pub fn deployed_modules(&self) -> &DeployedModules {
        &self.waits.modules
    }

    /// A write that deploys or undeploys a module, if `req` is one: its txn
    /// and how its reply is built, or the error it is refused with.
    pub(super) fn prep_deploy(
        &mut self,
        auth: &AuthInfo,
        req: &Request,
    ) -> Option<Result<(Txn, WriteKind), ErrorCode>> {
        match req {
            Request::SetData { path, data, .. } if path == RECIPES_NODE => {
                // Null data deploys nothing, as empty data does.
                let data = data.as_deref().unwrap_or_default();
                Some(self.prep_deploy_bytes(auth, data, SOURCE_CLIENT))
            }
            Request::Delete { path, .. } if is_module_path(path) => {
                let name = &path[RECIPES_NODE.len() + 1..];
                Some(self.prep_undeploy(auth, name))
            }
            Request::SetAcl { path, acl, version }
                if path == RECIPES_NODE && self.recipes.is_some() =>
            {
                Some(self.prep_set_recipes_acl(auth, acl, *version))
            }
            _ => None,
        }
    }

    /// The ACL of /zookeeper/recipes as prep sees it (committed, then set
    /// in flight).
    pub(super) fn prep_recipes_acl(&self) -> &RecipesAcl {
        self.deploys
            .acls_outstanding
            .last()
            .map_or(&self.waits.recipes_acl, |(_, a)| a)
    }

    /// `setACL /zookeeper/recipes`, as ZooKeeper preps a setACL: the list
    /// fixed up and validated (fixupACL), ADMIN in the current ACL, then
    /// the aversion.
    fn prep_set_recipes_acl(
        &self,
        auth: &AuthInfo,
        acl: &[Acl],
        version: i32,
    ) -> Result<(Txn, WriteKind), ErrorCode> {
        let fixed = acl::fixup(acl, auth, self.cfg.acl_schemes)?;
        let current = self.prep_recipes_acl();
        acl::check(&current.acl, perms::ADMIN, auth)?;
        let aversion = super::check_version(current.aversion, version)?;
        let txn = super::checked(Txn::SetRecipesAcl {
            acl: fixed,
            aversion,
        })?;
        Ok((
            txn,
            WriteKind::SetAcl {
                path: RECIPES_NODE.to_string(),
            },
        ))
    }

    /// Every member, applying a setACL of /zookeeper/recipes at `zxid`
    /// (`applies`: the tree did not refuse it).
    pub(super) fn apply_recipes_acl(
        &mut self,
        zxid: Zxid,
        acl: &[Acl],
        aversion: i32,
        applies: bool,
    ) {
        if applies {
            tracing::info!(zxid = %zxid, aversion, "ACL of /zookeeper/recipes set: {acl:?}");
            self.waits.recipes_acl = RecipesAcl {
                acl: acl.to_vec(),
                aversion,
            };
        }
        self.deploys.acls_outstanding.retain(|(z, _)| *z > zxid);
    }

    fn prep_deploy_bytes(
        &mut self,
        auth: &AuthInfo,
        bytes: &[u8],
        source: &str,
    ) -> Result<(Txn, WriteKind), ErrorCode> {
        let txn = self.deploy_txn(auth, bytes, source)?;
        Ok((
            Txn::Deploy(Box::new(txn)),
            WriteKind::SetData {
                path: RECIPES_NODE.to_string(),
            },
        ))
    }

    /// The deploy of `bytes`, checked (ADMIN on /zookeeper/recipes, size)
    /// and validated by the engine.
    fn deploy_txn(
        &mut self,
        auth: &AuthInfo,
        bytes: &[u8],
        source: &str,
    ) -> Result<DeployTxn, ErrorCode> {
        self.deploy_checks(auth, bytes)?;
        let Some(engine) = self.recipes.as_mut() else {
            return Err(ErrorCode::Unimplemented);
        };
        let meta = engine.validate(bytes).map_err(|why| {
            tracing::warn!(
                source,
                "recipe module refused, the old version keeps serving: {why}"
            );
            ErrorCode::BadArguments
        })?;
        Ok(DeployTxn {
            name: meta.name,
            version: meta.version,
            sha256: meta.sha256,
            bytes: bytes.into(),
            source: source.to_string(),
        })
    }

    /// What a deploy of `bytes` by `auth` must pass before its module is
    /// validated: ADMIN on /zookeeper/recipes and a size within
    /// jute.maxbuffer (both callers then need a recipe engine).
    fn deploy_checks(&self, auth: &AuthInfo, bytes: &[u8]) -> Result<(), ErrorCode> {
        acl::check(&self.prep_recipes_acl().acl, perms::ADMIN, auth)?;
        if bytes.is_empty() || bytes.len() > self.cfg.max_buffer_bytes {
            return Err(ErrorCode::BadArguments);
        }
        Ok(())
    }

    /// Whether a deploy of `bytes` by `auth` gets as far as validating
    /// its module (so a refused one never costs a compile).
    pub(super) fn deploy_allowed(&self, auth: &AuthInfo, bytes: &[u8]) -> bool {
        self.deploy_checks(auth, bytes).is_ok()
    }

    /// The module a write deploys, if `req` is a deploy.
    pub(super) fn deploy_bytes(req: &Request) -> Option<&[u8]> {
        match req {
            Request::SetData { path, data, .. } if path == RECIPES_NODE => {
                Some(data.as_deref().unwrap_or_default())
            }
            _ => None,
        }
    }

    /// What the plugins directory asks for: the leader (or standalone
    /// member) preps it, a follower forwards it to the leader, a member
    /// without a leader drops it (the watcher submits again until the
    /// module set shows the change).
    pub(super) fn on_plugin(&mut self, op: PluginOp) {
        if self.role.forwards() {
            self.out.push(Output::ToLeader(PeerMsg::Plugin(op)));
        } else if self.role.decides() {
            self.prep_plugin(op);
        } else {
            // No leader yet (a member starting, an election): kept for the
            // role to come, so the directory's modules are deployed ahead
            // of the first client call (see `plugins_role_changed`).
            let op_bytes = |op: &PluginOp| match op {
                PluginOp::Deploy { bytes, .. } => bytes.len(),
                PluginOp::Undeploy { .. } => 0,
            };
            self.deploys.held_bytes += op_bytes(&op);
            self.deploys.held.push_back(op);
            while self.deploys.held_bytes > PLUGIN_OPS_HELD_BYTES_MAX
                || self.deploys.held.len() > PLUGIN_OPS_HELD_MAX
            {
                let Some(old) = self.deploys.held.pop_front() else {
                    break;
                };
                self.deploys.held_bytes -= op_bytes(&old);
            }
        }
    }

    /// The role changed: what the plugins directory asked for while there
    /// was no leader goes to the leader now (prepped here when this member
    /// leads, before any client request of the new role).
    pub(super) fn plugins_role_changed(&mut self) {
        if !(self.role.decides() || self.role.forwards()) {
            return;
        }
        self.deploys.held_bytes = 0;
        for op in std::mem::take(&mut self.deploys.held) {
            self.on_plugin(op);
        }
    }

    /// Leader: proposes what a plugins directory asks for, if it changes
    /// the module set (see [`PluginOp`]); a refusal is logged, never
    /// answered (no client asked).
    pub(super) fn prep_plugin(&mut self, op: PluginOp) {
        let auth = plugins_identity();
        if let PluginOp::Deploy { bytes, source } = &op {
            // The watchers of every member submit a file until the module
            // set shows it: the same bytes served or on their way cost no
            // validating (nor hashing) again.
            let served = |m: &DeployedModule| m.bytes[..] == bytes[..];
            if self.prep_modules().any(served) || self.plugin_deploy_in_flight(bytes) {
                tracing::debug!(%source, "plugins file already deployed or being deployed");
                return;
            }
            if self.validate_off_thread(&auth, bytes) {
                let bytes = bytes.clone();
                let from = super::recipes::DeployFrom::Plugin(op);
                return self.offload_validation(0, &auth, bytes, from);
            }
        }
        let txn = match op {
            PluginOp::Deploy { bytes, source } => match self.deploy_txn(&auth, &bytes, &source) {
                Ok(d)
                    if self
                        .prep_module(&d.name)
                        .is_some_and(|m| m.sha256 == d.sha256) =>
                {
                    tracing::debug!(module = %d.name, %source, "plugins file already deployed");
                    return;
                }
                Ok(d) => Txn::Deploy(Box::new(d)),
                Err(code) => {
                    tracing::warn!(%source, "plugins file not deployed: {code:?}");
                    return;
                }
            },
            PluginOp::Undeploy { name, sha256 } => {
                if self.prep_module(&name).is_none_or(|m| m.sha256 != sha256) {
                    tracing::debug!(module = %name, "another version serves the name of a removed plugins file: kept");
                    return;
                }
                Txn::Undeploy { name }
            }
        };
        if !self.can_propose() {
            return;
        }
        self.propose(
            Origin::Internal,
            super::ensemble::INTERNAL_CXID,
            0,
            txn,
            Vec::new(),
            None,
            false,
        );
    }

    fn prep_undeploy(
        &mut self,
        auth: &AuthInfo,
        name: &str,
    ) -> Result<(Txn, WriteKind), ErrorCode> {
        acl::check(&self.prep_recipes_acl().acl, perms::ADMIN, auth)?;
        if self.prep_module(name).is_none() {
            return Err(ErrorCode::NoNode);
        }
        Ok((
            Txn::Undeploy {
                name: name.to_string(),
            },
            WriteKind::Delete,
        ))
    }

    /// Every module as prep sees it: the committed ones, then those of the
    /// deploys in flight.
    fn prep_modules(&self) -> impl Iterator<Item = &DeployedModule> {
        let in_flight = self.deploys.outstanding.iter();
        self.waits
            .modules
            .values()
            .chain(in_flight.filter_map(|(_, _, m)| m.as_ref()))
    }

    /// The module `name` as prep sees it (committed, then in flight).
    pub(super) fn prep_module(&self, name: &str) -> Option<&DeployedModule> {
        match self
            .deploys
            .outstanding
            .iter()
            .rev()
            .find(|(_, n, _)| n == name)
        {
            Some((_, _, m)) => m.as_ref(),
            None => self.waits.modules.get(name),
        }
    }

    /// Leader: a deploy or undeploy was just proposed (as `zxid`): steps
    /// prepped from now on run what it leaves; or a setACL of
    /// /zookeeper/recipes: deploys prepped from now on are checked against
    /// it.
    pub(super) fn deploy_proposed(&mut self, zxid: Zxid, txn: &Txn) {
        let entry = match txn {
            Txn::Deploy(d) => (zxid, d.name.clone(), Some(d.module(zxid))),
            Txn::Undeploy { name } => (zxid, name.clone(), None),
            Txn::SetRecipesAcl { acl, aversion } => {
                let acl = RecipesAcl {
                    acl: acl.clone(),
                    aversion: *aversion,
                };
                return self.deploys.acls_outstanding.push((zxid, acl));
            }
            _ => return,
        };
        self.deploys.outstanding.push(entry);
        self.sync_engine();
    }

    /// Every member, applying a txn at `zxid`: the module set changes.
    pub(super) fn apply_deploy(&mut self, zxid: Zxid, txn: &Txn) {
        match txn {
            Txn::Deploy(d) => {
                tracing::info!(
                    module = %d.name, version = %d.version, sha256 = %d.sha256,
                    zxid = %zxid, source = %d.source, "recipe module deployed"
                );
                self.waits.modules.insert(d.name.clone(), d.module(zxid));
            }
            Txn::Undeploy { name } => {
                tracing::info!(module = %name, zxid = %zxid, "recipe module undeployed");
                self.waits.modules.remove(name);
            }
            _ => return,
        }
        self.deploys.outstanding.retain(|(z, _, _)| *z > zxid);
        self.sync_engine();
    }

    /// The leader's deploys in flight are gone (role change, SNAP): the
    /// engine serves the applied set again.
    pub(super) fn forget_deploys_in_flight(&mut self) {
        self.deploys.outstanding.clear();
        self.deploys.acls_outstanding.clear();
        self.sync_engine();
    }

    /// Tells the engine what to serve where it differs from what it was
    /// last told: the applied modules, overlaid with the deploys in flight.
    pub(super) fn sync_engine(&mut self) {
        // Steps running off this thread may have run another version.
        self.offload.deploy_gen += 1;
        let Some(engine) = self.recipes.as_mut() else {
            return;
        };
        let mut want: BTreeMap<String, Option<DeployedModule>> = self
            .waits
            .modules
            .iter()
            .map(|(n, m)| (n.clone(), Some(m.clone())))
            .collect();
        for (_, name, m) in &self.deploys.outstanding {
            want.insert(name.clone(), m.clone());
        }
        for name in self.deploys.installed.keys() {
            want.entry(name.clone()).or_insert(None);
        }
        for (name, m) in want {
            let sha = m.as_ref().map(|m| m.sha256.clone());
            if self.deploys.installed.get(&name) == sha.as_ref() {
                continue;
            }
            if let Err(e) = engine.install(&name, m.as_ref()) {
                tracing::error!(module = %name, "this member cannot serve the deployed recipe module: {e}");
            }
            match sha {
                Some(sha) => self.deploys.installed.insert(name, sha),
                None => self.deploys.installed.remove(&name),
            };
        }
    }
}

/// `/zookeeper/recipes/NAME` with a plain name.
fn is_module_path(path: &str) -> bool {
    path.strip_prefix(RECIPES_NODE)
        .and_then(|r| r.strip_prefix('/'))
        .is_some_and(|n| !n.is_empty() && !n.contains('/'))
}
