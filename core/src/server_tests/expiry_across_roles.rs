//! Session expiry across role changes (ZooKeeper Programmer's Guide,
//! "ZooKeeper Sessions": a session whose client is gone expires). Found
//! by the whole-member simulation (`sim/`): a leader that marked a session
//! closing and lost its role before the close committed never expired it
//! again when it led anew, so the session and its ephemerals stayed.

use super::*;
use crate::txn::{Txn, TxnHeader, TxnRecord};

const SESSION: i64 = 0x0200_0000_0000_0001;

fn at(ms: i64) -> Now {
    Now::same(ms)
}

/// The zxids of the closeSession txns for `SESSION` this leader proposes.
fn closes_proposed(s: &mut Server) -> Vec<i64> {
    s.take_outputs()
        .into_iter()
        .filter_map(|o| match o {
            Output::Propose { zxid, record } => {
                let r = TxnRecord::decode(&record).expect("a txn");
                (r.header.session_id == SESSION && r.txn == Txn::CloseSession).then_some(zxid)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_session_whose_close_was_lost_with_the_leadership_expires_under_the_next_leader() {
    let mut s = Server::new(ServerConfig::default(), at(1_000_000));
    s.set_ensemble();
    s.handle(Input::Role(Role::Follower { leader: 2 }), at(1_000_000));
    let record = TxnRecord {
        header: TxnHeader {
            session_id: SESSION,
            cxid: 0,
            zxid: 0x1_0000_0001,
            time_ms: 0,
        },
        txn: Txn::CreateSession { timeout_ms: 4_000 },
    }
    .encode();
    s.handle(
        Input::Committed {
            zxid: 0x1_0000_0001,
            record,
        },
        at(1_000_000),
    );
    s.handle(Input::Role(Role::Leader { epoch: 2 }), at(1_000_000));
    let _ = s.take_outputs();
    // The client is gone: the leader expires the session...
    s.handle(Input::Tick, at(1_010_000));
    assert_eq!(closes_proposed(&mut s), vec![0x2_0000_0001]);
    // ...and loses its role before the close commits.
    s.handle(Input::Role(Role::Looking), at(1_010_000));
    s.handle(Input::Role(Role::Leader { epoch: 3 }), at(1_010_000));
    let _ = s.take_outputs();
    assert!(
        s.sessions().is_live(SESSION),
        "the close never committed: the session lives"
    );
    s.handle(Input::Tick, at(1_012_000));
    assert!(closes_proposed(&mut s).is_empty(), "a full timeout first");
    s.handle(Input::Tick, at(1_020_000));
    assert_eq!(
        closes_proposed(&mut s),
        vec![0x3_0000_0001],
        "the next leader expires it again"
    );
}
