//! ZooKeeper's `ReferenceCountedACLCache`: every distinct ACL list is stored
//! once and nodes hold a 4-byte id. A list is dropped when no node uses it.
//!
//! The id -> list map is persistent (shared with snapshots in O(1)); the
//! reference counts and the reverse index are live-only and rebuilt when a
//! snapshot is loaded. Ids are internal: snapshots renumber them.

use std::collections::BTreeMap;
use std::sync::Arc;

use wazoo_proto::{Acl, Writer};

#[derive(Clone, Default)]
pub(crate) struct AclTable {
    lists: imbl::OrdMap<u32, Arc<[Acl]>>,
    refs: BTreeMap<u32, u64>,
    /// The jute encoding of a list -> its id.
    ids: BTreeMap<Vec<u8>, u32>,
    next: u32,
    /// Ids whose count reached zero; dropped by `purge` unless used again.
    zero: Vec<u32>,
    /// The last list interned: most creates repeat it, and comparing is
    /// cheaper than encoding.
    last: Option<(Arc<[Acl]>, u32)>,
}

fn encode(acl: &[Acl]) -> Vec<u8> {
    let mut w = Vec::with_capacity(16 + acl.len() * 32);
    w.write_vec(acl);
    w
}

impl AclTable {
    /// The id of `acl`, adding it (with no references yet) if it is new.
    pub fn intern(&mut self, acl: &[Acl]) -> u32 {
        if let Some((list, id)) = &self.last {
            let current = self.lists.get(id).is_some_and(|l| Arc::ptr_eq(l, list));
            if current && **list == *acl {
                return *id;
            }
        }
        let enc = encode(acl);
        if let Some(&id) = self.ids.get(&enc) {
            self.last = self.lists.get(&id).map(|l| (l.clone(), id));
            return id;
        }
        while self.lists.contains_key(&self.next) {
            self.next = self.next.wrapping_add(1);
        }
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        let list: Arc<[Acl]> = Arc::from(acl);
        self.last = Some((list.clone(), id));
        self.lists.insert(id, list);
        self.ids.insert(enc, id);
        self.refs.insert(id, 0);
        self.zero.push(id);
        id
    }

    /// Adds a list under a given id (snapshot load, ids dense from 0).
    pub fn insert_with_id(&mut self, id: u32, acl: Vec<Acl>) {
        self.ids.insert(encode(&acl), id);
        self.lists.insert(id, Arc::from(acl));
        self.refs.insert(id, 0);
        self.zero.push(id);
        self.next = self.next.max(id.wrapping_add(1));
    }

    pub fn add_ref(&mut self, id: u32) {
        *self.refs.entry(id).or_insert(0) += 1;
    }

    pub fn release(&mut self, id: u32) {
        if let Some(n) = self.refs.get_mut(&id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.zero.push(id);
            }
        }
    }

    /// Drops the lists no node uses any more.
    pub fn purge(&mut self) {
        for id in std::mem::take(&mut self.zero) {
            if self.refs.get(&id) == Some(&0) {
                self.refs.remove(&id);
                if let Some(list) = self.lists.remove(&id) {
                    self.ids.remove(&encode(&list));
                }
            }
        }
    }

    pub fn get(&self, id: u32) -> Option<&Arc<[Acl]>> {
        self.lists.get(&id)
    }

    /// A table that answers `get` as this one does, for a read-only copy of
    /// the tree (see `DataTree::read_only_copy`): the persistent map is
    /// shared in O(1); the counts and the reverse index stay behind.
    pub fn read_only_copy(&self) -> AclTable {
        AclTable {
            lists: self.lists.clone(),
            ..AclTable::default()
        }
    }

    /// The persistent id -> list map, for a snapshot.
    pub fn lists(&self) -> imbl::OrdMap<u32, Arc<[Acl]>> {
        self.lists.clone()
    }

    /// Distinct lists held.
    pub fn len(&self) -> usize {
        self.lists.len()
    }

    /// Checks the table against the reference counts the tree computes.
    pub fn check(&self, counted: &BTreeMap<u32, u64>) -> Result<(), String> {
        if !self.zero.is_empty() {
            return Err(format!("ACL ids {:?} are waiting to be purged", self.zero));
        }
        if &self.refs != counted {
            return Err(format!(
                "ACL reference counts {:?} differ from the nodes' {:?}",
                self.refs, counted
            ));
        }
        if self.lists.len() != self.refs.len() || self.ids.len() != self.refs.len() {
            return Err(format!(
                "ACL table sizes differ: {} lists, {} counts, {} reverse entries",
                self.lists.len(),
                self.refs.len(),
                self.ids.len()
            ));
        }
        for (enc, id) in &self.ids {
            match self.lists.get(id) {
                Some(l) if &encode(l) == enc => {}
                _ => return Err(format!("ACL reverse index entry for id {id} is stale")),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_lists_share_one_id_and_unused_lists_are_purged() {
        let mut t = AclTable::default();
        let a = t.intern(&Acl::open_unsafe());
        let b = t.intern(&Acl::open_unsafe());
        let c = t.intern(&Acl::read_unsafe());
        assert_eq!(a, b);
        assert_ne!(a, c);
        t.add_ref(a);
        t.add_ref(a);
        t.purge();
        assert_eq!(t.len(), 1, "the unused read-only list is gone");
        t.release(a);
        t.purge();
        assert_eq!(t.len(), 1);
        t.release(a);
        t.purge();
        assert_eq!(t.len(), 0);
        assert!(t.check(&BTreeMap::new()).is_ok());
    }
}
