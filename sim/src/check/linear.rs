//! Client-visible linearizability of writes: a history checker over the
//! invocations and responses clients saw, in the style of Wing and Gong's
//! search with Lowe's memoization (as Knossos and Porcupine do it).
//!
//! Each register is one znode written with unique values; linearizability
//! is local, so each key is checked alone. The model is the znode as a
//! client sees it: absent, or present with a version. An operation whose
//! outcome the client never learned (its connection broke first) may take
//! effect at any point after its invocation, or never.
//!
//! Only writes are checked: ZooKeeper promises linearizable writes, while
//! a read may be served by a member that is behind (ZooKeeper Programmer's
//! Guide, "Consistency Guarantees"). A failed conditional write is an
//! observation too: BadVersion says the version differed at that point.

use std::collections::{BTreeMap, HashSet};

/// A write on one register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegOp {
    Create {
        value: u64,
    },
    /// `version` -1 matches any version.
    Set {
        value: u64,
        version: i32,
    },
    Delete {
        version: i32,
    },
}

/// What the client was told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegResult {
    /// Success; for a set, the node's new version.
    Ok {
        version: i32,
    },
    NoNode,
    NodeExists,
    BadVersion,
}

#[derive(Clone, Debug)]
pub struct Op {
    pub key: String,
    pub client: usize,
    pub op: RegOp,
    /// `None`: the outcome is unknown.
    pub result: Option<RegResult>,
    pub invoke: u64,
    /// `u64::MAX` while (or if forever) unknown.
    pub respond: u64,
}

/// Every register write of a run.
#[derive(Default, Debug)]
pub struct History {
    pub ops: Vec<Op>,
}

/// The register's state: absent, or (version, value).
type State = Option<(i32, u64)>;

/// Applies `op` to `s`: the new state and the result a client would see.
fn step(s: State, op: RegOp) -> (State, RegResult) {
    match (op, s) {
        (RegOp::Create { value }, None) => (Some((0, value)), RegResult::Ok { version: 0 }),
        (RegOp::Create { .. }, Some(_)) => (s, RegResult::NodeExists),
        (RegOp::Set { .. } | RegOp::Delete { .. }, None) => (s, RegResult::NoNode),
        (RegOp::Set { value, version }, Some((v, _))) if version == -1 || version == v => {
            (Some((v + 1, value)), RegResult::Ok { version: v + 1 })
        }
        (RegOp::Delete { version }, Some((v, _))) if version == -1 || version == v => {
            (None, RegResult::Ok { version: 0 })
        }
        (_, Some(_)) => (s, RegResult::BadVersion),
    }
}

/// Search steps allowed per key before giving up (counted as inconclusive).
const SEARCH_STEPS_MAX: u64 = 2_000_000;

impl History {
    /// Records an invocation; returns its index for [`History::respond`].
    pub fn invoke(&mut self, key: &str, client: usize, op: RegOp, at: u64) -> usize {
        self.ops.push(Op {
            key: key.to_string(),
            client,
            op,
            result: None,
            invoke: at,
            respond: u64::MAX,
        });
        self.ops.len() - 1
    }

    pub fn respond(&mut self, index: usize, result: RegResult, at: u64) {
        let op = &mut self.ops[index];
        assert!(op.result.is_none(), "op {index} answered twice");
        op.result = Some(result);
        op.respond = at;
    }

    /// Checks every key; `Ok(inconclusive keys)` or the first violation.
    pub fn check(&self) -> Result<usize, String> {
        let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
        for op in &self.ops {
            by_key.entry(&op.key).or_default().push(op);
        }
        let mut inconclusive = 0;
        for (key, ops) in by_key {
            match check_key(&ops) {
                Some(true) => {}
                Some(false) => {
                    let mut lines = String::new();
                    for op in &ops {
                        lines.push_str(&format!(
                            "\n  client {} {:?} -> {:?} [{}, {}]",
                            op.client,
                            op.op,
                            op.result,
                            op.invoke,
                            if op.respond == u64::MAX {
                                "?".to_string()
                            } else {
                                op.respond.to_string()
                            }
                        ));
                    }
                    return Err(format!(
                        "linearizability: no order of the writes on {key} explains what clients saw:{lines}"
                    ));
                }
                None => inconclusive += 1,
            }
        }
        Ok(inconclusive)
    }
}

/// Some(true): linearizable; Some(false): not; None: search too large.
fn check_key(ops: &[&Op]) -> Option<bool> {
    let n = ops.len();
    let words = n.div_ceil(64);
    let mut seen: HashSet<(Vec<u64>, State)> = HashSet::new();
    let mut steps = 0u64;
    // Depth-first over (linearized set, state).
    let mut stack: Vec<(Vec<u64>, State)> = vec![(vec![0; words], None)];
    let known: Vec<usize> = (0..n).filter(|&i| ops[i].result.is_some()).collect();
    while let Some((done, state)) = stack.pop() {
        steps += 1;
        if steps > SEARCH_STEPS_MAX {
            return None;
        }
        let is_done = |i: usize| done[i / 64] & (1 << (i % 64)) != 0;
        if known.iter().all(|&i| is_done(i)) {
            return Some(true);
        }
        // An op may go next only if no pending op responded before it was
        // invoked.
        let horizon = (0..n)
            .filter(|&i| !is_done(i))
            .map(|i| ops[i].respond)
            .min()
            .unwrap_or(u64::MAX);
        for i in (0..n).filter(|&i| !is_done(i) && ops[i].invoke < horizon) {
            let (next, result) = step(state, ops[i].op);
            let fits = match ops[i].result {
                None => true,
                Some(r) => r == result,
            };
            if !fits {
                continue;
            }
            let mut d = done.clone();
            d[i / 64] |= 1 << (i % 64);
            if seen.insert((d.clone(), next)) {
                stack.push((d, next));
            }
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(v: i32) -> Option<RegResult> {
        Some(RegResult::Ok { version: v })
    }

    fn op(op: RegOp, result: Option<RegResult>, invoke: u64, respond: u64) -> Op {
        Op {
            key: "/k".into(),
            client: 0,
            op,
            result,
            invoke,
            respond,
        }
    }

    fn history(ops: Vec<Op>) -> History {
        History { ops }
    }

    #[test]
    fn concurrent_writes_may_take_either_order() {
        let h = history(vec![
            op(RegOp::Create { value: 1 }, ok(0), 0, 1),
            op(
                RegOp::Set {
                    value: 2,
                    version: -1,
                },
                ok(2),
                2,
                6,
            ),
            op(
                RegOp::Set {
                    value: 3,
                    version: -1,
                },
                ok(1),
                3,
                5,
            ),
        ]);
        assert_eq!(h.check(), Ok(0));
    }

    #[test]
    fn a_stale_version_after_a_completed_write_fails_the_check() {
        // The second set finished before the third began, yet the third
        // was told it made version 1 again.
        let h = history(vec![
            op(RegOp::Create { value: 1 }, ok(0), 0, 1),
            op(
                RegOp::Set {
                    value: 2,
                    version: -1,
                },
                ok(1),
                2,
                3,
            ),
            op(
                RegOp::Set {
                    value: 3,
                    version: -1,
                },
                ok(1),
                4,
                5,
            ),
        ]);
        assert!(h.check().is_err());
    }

    #[test]
    fn a_lost_write_fails_the_check() {
        // Acknowledged create, then a later delete finds nothing.
        let h = history(vec![
            op(RegOp::Create { value: 1 }, ok(0), 0, 1),
            op(RegOp::Delete { version: -1 }, Some(RegResult::NoNode), 2, 3),
        ]);
        assert!(h.check().is_err());
    }

    #[test]
    fn an_unknown_outcome_may_have_happened_or_not() {
        let happened = history(vec![
            op(RegOp::Create { value: 1 }, None, 0, u64::MAX),
            op(RegOp::Delete { version: 0 }, ok(0), 5, 6),
        ]);
        assert_eq!(happened.check(), Ok(0));
        let did_not = history(vec![
            op(RegOp::Create { value: 1 }, None, 0, u64::MAX),
            op(RegOp::Delete { version: 0 }, Some(RegResult::NoNode), 5, 6),
        ]);
        assert_eq!(did_not.check(), Ok(0));
    }

    #[test]
    fn bad_version_is_an_observation() {
        // Created at version 0; nothing else wrote; BadVersion for 0 is a lie.
        let h = history(vec![
            op(RegOp::Create { value: 1 }, ok(0), 0, 1),
            op(
                RegOp::Set {
                    value: 2,
                    version: 0,
                },
                Some(RegResult::BadVersion),
                2,
                3,
            ),
        ]);
        assert!(h.check().is_err());
    }
}
