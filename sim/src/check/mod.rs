//! The checkers, and the one sequence they check against.
//!
//! [`Shadow`] is the committed sequence as the members deliver it: the
//! first member to apply position `i` fixes it, every other member must
//! apply the same txn there (agreement and total order). The shadow
//! applies each txn to a tree of its own, which gives the watch triggers
//! of each txn (for the watch checker), the sessions closed so far (for
//! the session checker) and the recipe waits (for the recipe checker).
//!
//! | module | checks |
//! |---|---|
//! | [`linear`] | client-visible linearizability of register writes |
//! | [`sessions`] | an ephemeral lives only as long as its session, and abandoned sessions expire |
//! | [`watches`] | a watch event comes before the data of its change; events in zxid order |
//! | [`recipes`] | a recipe wait is called back exactly once |
//! | [`converge`] | every live member's tree equals the shadow's at the same zxid |
//! | [`leases`] | no leader proposes once a leader of a later epoch is established |

pub mod converge;
pub mod leases;
pub mod linear;
pub mod recipes;
pub mod sessions;
pub mod watches;

use std::collections::{BTreeMap, BTreeSet};

use wazoo_core::tree::DataTree;
use wazoo_core::txn::{Txn, TxnRecord};
use wazoo_zab::{Payload, ServerId, Zxid};

/// One watch trigger of the committed sequence: (zxid, path, event code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fired {
    pub zxid: Zxid,
    pub path: String,
    pub event: i32,
}

#[derive(Default)]
pub struct Shadow {
    /// The committed sequence.
    pub seq: Vec<(Zxid, Payload)>,
    index: BTreeMap<Zxid, usize>,
    /// Each member's next position in `seq`.
    position: BTreeMap<ServerId, usize>,
    pub tree: DataTree,
    /// Every trigger, in the order the txns fired them.
    pub fired: Vec<Fired>,
    /// Positions in `fired` by (path, event).
    fired_at: BTreeMap<(String, i32), Vec<usize>>,
    /// Sessions ended (close or expiry), with the zxid that ended them.
    pub closed: BTreeMap<i64, Zxid>,
    pub opened: BTreeSet<i64>,
    pub recipes: recipes::RecipeWaitsCheck,
    /// Txns the tree refused (a prep bug would show here).
    pub refused: u64,
}

impl Shadow {
    /// The zxid of the last committed txn.
    pub fn last_zxid(&self) -> Zxid {
        self.seq.last().map_or(Zxid::ZERO, |e| e.0)
    }

    /// A member (re)starts, or installs a snapshot, at `zxid`.
    pub fn member_at(&mut self, id: ServerId, zxid: Zxid) -> Result<(), String> {
        let pos = if zxid == Zxid::ZERO {
            0
        } else {
            *self.index.get(&zxid).ok_or_else(|| {
                format!("agreement: member {id} holds state at {zxid:?}, which was never committed")
            })? + 1
        };
        self.position.insert(id, pos);
        Ok(())
    }

    /// Member `id` applied this txn.
    pub fn applied(&mut self, id: ServerId, zxid: Zxid, record: &Payload) -> Result<(), String> {
        let pos = *self.position.entry(id).or_insert(0);
        self.position.insert(id, pos + 1);
        if let Some((z, p)) = self.seq.get(pos) {
            if *z != zxid || p != record {
                return Err(format!(
                    "agreement: member {id} applied {zxid:?} at position {pos}, where {z:?} was committed"
                ));
            }
            return Ok(());
        }
        if let Some((last, _)) = self.seq.last() {
            if zxid <= *last {
                return Err(format!(
                    "total order: member {id} applied {zxid:?} after {last:?}"
                ));
            }
        }
        self.index.insert(zxid, self.seq.len());
        self.seq.push((zxid, record.clone()));
        self.apply(zxid, record)
    }

    fn apply(&mut self, zxid: Zxid, record: &Payload) -> Result<(), String> {
        let rec = TxnRecord::decode(record)
            .map_err(|e| format!("committed txn {zxid:?} does not decode: {e}"))?;
        let triggers = match self.tree.apply(&rec.header, &rec.txn) {
            Ok(t) => t,
            Err(_) => {
                self.refused += 1;
                Vec::new()
            }
        };
        for t in &triggers {
            let key = (t.path.clone(), t.event as i32);
            self.fired_at.entry(key).or_default().push(self.fired.len());
            self.fired.push(Fired {
                zxid,
                path: t.path.clone(),
                event: t.event as i32,
            });
        }
        let session = rec.header.session_id;
        match &rec.txn {
            Txn::CreateSession { .. } => {
                if let Some(at) = self.closed.get(&session) {
                    return Err(format!(
                        "sessions: session 0x{session:x}, closed at {at:?}, created again at {zxid:?}"
                    ));
                }
                self.opened.insert(session);
            }
            Txn::CloseSession => {
                self.closed.insert(session, zxid);
            }
            _ => {}
        }
        self.recipes.on_txn(&rec, &triggers)?;
        if let Some(at) = self.closed.get(&session) {
            let left = self.tree.ephemerals(session);
            if !left.is_empty() {
                return Err(format!(
                    "sessions: at {zxid:?} session 0x{session:x}, closed at {at:?}, owns ephemerals {left:?}"
                ));
            }
        }
        Ok(())
    }

    /// The first trigger of (path, event) at or after position `from` of
    /// `fired`, if any.
    pub fn next_fired(&self, path: &str, event: i32, from: usize) -> Option<usize> {
        let list = self.fired_at.get(&(path.to_string(), event))?;
        let i = list.partition_point(|&p| p < from);
        list.get(i).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wazoo_core::txn::TxnHeader;

    fn record(zxid: u64, session: i64, txn: Txn) -> Payload {
        Payload::from(
            TxnRecord {
                header: TxnHeader {
                    session_id: session,
                    cxid: 1,
                    zxid: Zxid(zxid).to_wire(),
                    time_ms: 0,
                },
                txn,
            }
            .encode(),
        )
    }

    #[test]
    fn two_members_applying_different_txns_at_one_position_fail() {
        let mut s = Shadow::default();
        let a = record(
            1,
            7,
            Txn::CreateSession {
                timeout_ms: 1000,
                verifier: None,
            },
        );
        let b = record(
            1,
            8,
            Txn::CreateSession {
                timeout_ms: 1000,
                verifier: None,
            },
        );
        s.applied(1, Zxid(1), &a).unwrap();
        s.applied(2, Zxid(1), &a).unwrap();
        assert!(s.applied(3, Zxid(1), &b).is_err(), "agreement");
        assert!(
            s.applied(1, Zxid(1), &a).is_err(),
            "total order: nothing after 1 may be 1 again"
        );
        assert!(
            s.member_at(4, Zxid(9)).is_err(),
            "a state at a zxid never committed"
        );
    }

    #[test]
    fn a_session_closed_and_created_again_fails() {
        let mut s = Shadow::default();
        s.applied(
            1,
            Zxid(1),
            &record(
                1,
                7,
                Txn::CreateSession {
                    timeout_ms: 1000,
                    verifier: None,
                },
            ),
        )
        .unwrap();
        s.applied(1, Zxid(2), &record(2, 7, Txn::CloseSession))
            .unwrap();
        assert!(s
            .applied(
                1,
                Zxid(3),
                &record(
                    3,
                    7,
                    Txn::CreateSession {
                        timeout_ms: 1000,
                        verifier: None,
                    }
                )
            )
            .is_err());
    }
}
