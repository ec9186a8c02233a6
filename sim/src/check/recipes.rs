//! A recipe wait is called back exactly once.
//!
//! Follows the committed sequence: a recipe txn registers waits (session,
//! module, token) on a path; a later txn's watch trigger fires a wait; a
//! callback txn consumes the fired wait (and may register it again). At
//! most once: a callback must consume a wait that is registered and fired,
//! and each registration is consumed once. At least once: when the run is
//! quiet, no fired wait is left without its callback.

use std::collections::BTreeMap;

use wazoo_core::tree::Trigger;
use wazoo_core::txn::{Txn, TxnRecord};
use wazoo_proto::EventType;

#[derive(Clone, Debug)]
struct Registration {
    path: String,
    child: bool,
    fired: bool,
    /// The zxid that registered it.
    at: i64,
}

type Key = (i64, String, String);

#[derive(Default, Debug)]
pub struct RecipeWaitsCheck {
    regs: BTreeMap<Key, Registration>,
    pub registered: u64,
    pub called_back: u64,
}

fn fires(child: bool, event: EventType) -> bool {
    matches!(
        (child, event),
        (false, EventType::NodeCreated | EventType::NodeDataChanged)
            | (_, EventType::NodeDeleted)
            | (true, EventType::NodeChildrenChanged)
    )
}

impl RecipeWaitsCheck {
    /// One committed txn and the triggers applying it fired, in the order
    /// a member handles them: triggers, then the txn's consumed waits,
    /// then its registrations.
    pub fn on_txn(&mut self, rec: &TxnRecord, triggers: &[Trigger]) -> Result<(), String> {
        let zxid = rec.header.zxid;
        for t in triggers {
            for r in self.regs.values_mut() {
                if !r.fired && r.path == t.path && fires(r.child, t.event) {
                    r.fired = true;
                }
            }
        }
        match &rec.txn {
            Txn::CloseSession => {
                let s = rec.header.session_id;
                self.regs.retain(|k, _| k.0 != s);
            }
            Txn::Recipe(r) => {
                for (session, token) in &r.consumed {
                    let key = (*session, r.module.clone(), token.clone());
                    match self.regs.get(&key) {
                        Some(reg) if reg.fired => {
                            self.regs.remove(&key);
                            self.called_back += 1;
                        }
                        Some(reg) => {
                            return Err(format!(
                                "recipe waits: callback at 0x{zxid:x} for {key:?}, registered at 0x{:x}, which has not fired",
                                reg.at
                            ))
                        }
                        None => {
                            return Err(format!(
                                "recipe waits: callback at 0x{zxid:x} for {key:?}, which is not waiting (called back twice, or after its session ended)"
                            ))
                        }
                    }
                }
                for (session, token) in &r.cancelled {
                    self.regs
                        .remove(&(*session, r.module.clone(), token.clone()));
                }
                for w in &r.waits {
                    self.registered += 1;
                    self.regs.insert(
                        (rec.header.session_id, r.module.clone(), w.token.clone()),
                        Registration {
                            path: w.path.clone(),
                            child: w.child,
                            fired: false,
                            at: zxid,
                        },
                    );
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// At the end of a quiet run: every fired wait was called back.
    pub fn check_quiet(&self) -> Result<(), String> {
        match self.regs.iter().find(|(_, r)| r.fired) {
            Some((key, r)) => Err(format!(
                "recipe waits: {key:?} (registered at 0x{:x} on {}) fired and was never called back",
                r.at, r.path
            )),
            None => Ok(()),
        }
    }
}

/// The counter recipe's increments are linearizable: no value is
/// answered twice. Records `value` answered to `client`.
pub fn record_counter(
    seen: &mut BTreeMap<(String, i64), usize>,
    counter: &str,
    value: i64,
    client: usize,
) -> Result<(), String> {
    match seen.insert((counter.to_string(), value), client) {
        Some(other) => Err(format!(
            "recipes: counter {counter} answered {value} to clients {other} and {client}"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use wazoo_core::recipe::{RecipeTxn, RecipeWait};
    use wazoo_core::txn::TxnHeader;

    fn rec(zxid: i64, session: i64, txn: Txn) -> TxnRecord {
        TxnRecord {
            header: TxnHeader {
                session_id: session,
                cxid: 1,
                zxid,
                time_ms: 0,
            },
            txn,
        }
    }

    fn recipe(waits: Vec<&str>, consumed: Vec<(i64, &str)>) -> Txn {
        Txn::Recipe(Box::new(RecipeTxn {
            module: "lock".into(),
            ops: Vec::new(),
            consumed: consumed
                .into_iter()
                .map(|(s, t)| (s, t.to_string()))
                .collect(),
            cancelled: Vec::new(),
            waits: waits
                .into_iter()
                .map(|t| RecipeWait {
                    session: 7,
                    module: "lock".into(),
                    token: t.into(),
                    path: "/p".into(),
                    child: false,
                    auth: Vec::new(),
                    guid: String::new(),
                    call_node: String::new(),
                    fired: None,
                })
                .collect(),
            notifications: Vec::new(),
            reply: Vec::new(),
        }))
    }

    fn deleted(path: &str) -> Trigger {
        Trigger {
            path: path.into(),
            event: EventType::NodeDeleted,
            acl: Arc::from(Vec::new()),
        }
    }

    #[test]
    fn one_callback_per_fired_wait_passes() {
        let mut c = RecipeWaitsCheck::default();
        c.on_txn(&rec(1, 7, recipe(vec!["t"], vec![])), &[])
            .unwrap();
        c.on_txn(
            &rec(2, 8, Txn::Delete { path: "/p".into() }),
            &[deleted("/p")],
        )
        .unwrap();
        assert!(c.check_quiet().is_err(), "fired, not yet called back");
        c.on_txn(&rec(3, 7, recipe(vec![], vec![(7, "t")])), &[])
            .unwrap();
        c.check_quiet().unwrap();
        assert_eq!(c.called_back, 1);
    }

    #[test]
    fn a_second_callback_for_one_firing_fails() {
        let mut c = RecipeWaitsCheck::default();
        c.on_txn(&rec(1, 7, recipe(vec!["t"], vec![])), &[])
            .unwrap();
        c.on_txn(
            &rec(2, 8, Txn::Delete { path: "/p".into() }),
            &[deleted("/p")],
        )
        .unwrap();
        c.on_txn(&rec(3, 7, recipe(vec![], vec![(7, "t")])), &[])
            .unwrap();
        assert!(c
            .on_txn(&rec(4, 7, recipe(vec![], vec![(7, "t")])), &[])
            .is_err());
    }

    #[test]
    fn a_callback_before_the_wait_fired_fails() {
        let mut c = RecipeWaitsCheck::default();
        c.on_txn(&rec(1, 7, recipe(vec!["t"], vec![])), &[])
            .unwrap();
        assert!(c
            .on_txn(&rec(2, 7, recipe(vec![], vec![(7, "t")])), &[])
            .is_err());
    }

    #[test]
    fn one_counter_value_answered_twice_fails() {
        let mut seen = BTreeMap::new();
        record_counter(&mut seen, "c", 1, 0).unwrap();
        record_counter(&mut seen, "c", 2, 1).unwrap();
        assert!(record_counter(&mut seen, "c", 2, 0).is_err());
    }
}
