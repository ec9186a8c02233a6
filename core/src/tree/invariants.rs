//! The tree's invariants, checked over the whole state (for tests and
//! diagnostics).

use std::collections::{BTreeMap, BTreeSet};

use wazoo_proto::path;

use super::check::check_path;
use super::node::{self, decode_key, plain, Node, ZnodeType};
use super::quota::{self, LIMIT_NODE};
use super::DataTree;

impl DataTree {
    /// Checks every invariant the tree keeps; the first violation is
    /// described in the error. O(n log n): for tests and diagnostics.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.undo.is_some() {
            return Err("an undo log is left over from an apply".into());
        }
        if self.get("/").is_none() {
            return Err("the root is missing".into());
        }
        let mut prev: Option<&Node> = None;
        let mut acl_refs: BTreeMap<u32, u64> = BTreeMap::new();
        let mut data_size = 0i64;
        let mut digest = 0u64;
        let mut ephemerals: BTreeMap<i64, BTreeSet<Box<str>>> = BTreeMap::new();
        let mut containers = BTreeSet::new();
        let mut ttls = BTreeSet::new();
        let mut quotas = BTreeSet::new();
        for n in self.nodes.iter() {
            if let Some(prev) = prev {
                if prev.key() >= n.key() {
                    return Err(format!("keys out of order: {prev:?} then {n:?}"));
                }
            }
            prev = Some(n);
            let p = decode_key(n.key());
            check_path(&p).map_err(|e| e.to_string())?;
            if node::encode_key(&p) != n.key() {
                return Err(format!("{p}: key does not encode its path"));
            }
            if p != "/" {
                let parent = self
                    .get(path::parent(&p))
                    .ok_or_else(|| format!("{p}: the parent is missing"))?;
                if matches!(parent.kind(), ZnodeType::Ephemeral { .. }) {
                    return Err(format!("{p}: the parent is ephemeral"));
                }
            }
            let kids = self.child_nodes(plain(&p)).count();
            if kids != n.num_children() as usize {
                return Err(format!(
                    "{p}: numChildren is {} but it has {kids} children",
                    n.num_children()
                ));
            }
            if self.acls.get(n.acl()).is_none() {
                return Err(format!("{p}: ACL id {} is not in the table", n.acl()));
            }
            *acl_refs.entry(n.acl()).or_insert(0) += 1;
            data_size += (p.len() + n.data().len()) as i64;
            digest = digest.wrapping_add(super::node_digest(&p, n));
            match n.kind() {
                ZnodeType::Ephemeral { owner } => {
                    ephemerals
                        .entry(owner)
                        .or_default()
                        .insert(p.as_str().into());
                }
                ZnodeType::Container => {
                    containers.insert(Box::<str>::from(p.as_str()));
                }
                ZnodeType::Ttl { .. } => {
                    ttls.insert(Box::<str>::from(p.as_str()));
                }
                ZnodeType::Persistent => {}
            }
            if p != "/" {
                if let Some(t) = quota::quota_target(path::parent(&p), path::name(&p), LIMIT_NODE) {
                    quotas.insert(Box::<str>::from(t));
                }
            }
        }
        if data_size != self.data_size {
            return Err(format!(
                "approximate data size is {} but the nodes add up to {data_size}",
                self.data_size
            ));
        }
        if digest != self.digest {
            return Err(format!(
                "the tree digest is {} but the nodes add up to {digest}",
                self.digest
            ));
        }
        if ephemerals != self.ephemerals {
            return Err(format!(
                "ephemeral index {:?} differs from the nodes' {ephemerals:?}",
                self.ephemerals
            ));
        }
        if containers != self.containers {
            return Err(format!(
                "container index {:?} differs from the nodes' {containers:?}",
                self.containers
            ));
        }
        if ttls != self.ttls {
            return Err(format!(
                "TTL index {:?} differs from the nodes' {ttls:?}",
                self.ttls
            ));
        }
        if quotas != self.quotas {
            return Err(format!(
                "quota index {:?} differs from the limit nodes' {quotas:?}",
                self.quotas
            ));
        }
        self.acls.check(&acl_refs)
    }
}
