//! A follower in the member: it forwards what its clients write to the
//! leader and answers them when the commits apply here.

use super::*;

/// Member 1 of {1,2,3} following leader 3 in epoch 2 after a DIFF sync,
/// with a client on connection 5 whose session (1 << 56) was forwarded
/// and committed at 2:1.
fn follower_with_session() -> (Harness, i64) {
    let mut h = member(1, 100);
    h.zab(2, vote(3, ServerState::Following));
    h.zab(3, vote(3, ServerState::Leading));
    assert_eq!(h.state(), ServerState::Following);
    let info = Message::LeaderInfo {
        epoch: 2,
        confirmed: false,
    };
    assert_eq!(
        h.zab(3, info),
        vec![
            Out::AcceptedEpoch(2),
            Out::Peer(
                3,
                Message::AckEpoch {
                    epoch: 2,
                    current_epoch: 1,
                    last_zxid: Zxid::ZERO
                }
            ),
        ]
    );
    h.zab(3, Message::Diff);
    h.zab(
        3,
        Message::NewLeader {
            epoch: 2,
            zxid: Zxid::ZERO,
        },
    );
    assert!(h.zab(3, Message::UpToDate).is_empty());
    assert_eq!(h.m.server().role(), Role::Follower { leader: 3 });
    let session = 1 << 56;
    assert_eq!(
        h.connect(5),
        vec![Out::App(
            3,
            PeerMsg::CreateSession {
                session,
                timeout_ms: 30_000,
                verifier: Some(crate::session::verifier(&FRESH_PASSWORD)),
            }
        )]
    );
    let rec = create_session(session, z(2, 1));
    commit_from_leader(&mut h, &rec);
    assert_eq!(
        h.zab(3, Message::Commit { zxid: z(2, 1) }),
        vec![Out::Send {
            conn: 5,
            frames: vec![connected(session)],
            replies: 0
        }]
    );
    (h, session)
}

/// The leader's PROPOSAL of `rec`: logged, then acknowledged once durable.
fn commit_from_leader(h: &mut Harness, rec: &TxnRecord) {
    let zxid = Zxid::from_wire(rec.header.zxid);
    let proposal = Message::Proposal {
        zxid,
        payload: zab::Payload::from(rec.encode()),
    };
    assert_eq!(h.zab(3, proposal), vec![Out::Persist(rec.clone())]);
    assert_eq!(
        h.step(Input::Durable { zxid }),
        vec![Out::Peer(3, Message::Ack { zxid })]
    );
}

// ZooKeeper Internals, "Atomic Broadcast" and ZooKeeper Programmer's
// Guide, "ZooKeeper Sessions": a follower forwards a client's write to the
// leader and answers it when the committed txn carrying it is applied
// here, in zxid order.
#[test]
fn a_follower_forwards_a_write_and_answers_it_when_its_commit_applies() {
    let (mut h, session) = follower_with_session();
    let outs = h.request(5, 7, create("/a"));
    let mut body = Vec::new();
    create("/a").write_body(&mut body);
    assert_eq!(
        outs,
        vec![Out::App(
            3,
            PeerMsg::Forward {
                session,
                cxid: 7,
                auth: Vec::new(),
                op: wazoo_proto::OpCode::Create.code(),
                body,
                local: false,
            }
        )]
    );
    let rec = create_txn(session, 7, z(2, 2), "/a", 1);
    commit_from_leader(&mut h, &rec);
    assert_eq!(
        h.zab(3, Message::Commit { zxid: z(2, 2) }),
        vec![Out::Send {
            conn: 5,
            frames: vec![reply(
                7,
                z(2, 2),
                0,
                &Response::Create { path: "/a".into() }
            )],
            replies: 1
        }]
    );
    assert!(h.m.server().tree().node("/a").is_some());
    // A follower never numbers a txn: nothing it does is proposed.
    assert_eq!(
        h.m.peer().unwrap().proposal_window(),
        Err(zab::ProposeError::NotLeader { leader: Some(3) })
    );
}

// A follower whose leader goes: its link breaks, it stops serving (its
// client is closed and reconnects), and a forwarded write still pending
// is not answered by this member.
#[test]
fn a_follower_that_loses_its_leader_closes_its_clients() {
    let (mut h, _) = follower_with_session();
    h.request(5, 7, create("/a"));
    let outs = h.step(Input::LinkDown { peer: 3 });
    assert_eq!(h.state(), ServerState::Looking);
    let looking = |to| {
        Out::Peer(
            to,
            Message::Notification(Notification {
                leader: 1,
                zxid: z(2, 1),
                peer_epoch: 2,
                election_epoch: 2,
                state: ServerState::Looking,
            }),
        )
    };
    assert_eq!(
        outs,
        vec![Out::CloseLink(3), Out::Close(5), looking(2), looking(3)]
    );
}

/// Member 1 of {1,2,3} that acknowledged leader 3's epoch 2 and now awaits
/// its sync.
fn follower_awaiting_sync() -> Harness {
    let mut h = member(1, 100);
    h.zab(2, vote(3, ServerState::Following));
    h.zab(3, vote(3, ServerState::Leading));
    let info = Message::LeaderInfo {
        epoch: 2,
        confirmed: false,
    };
    h.zab(3, info);
    h
}

// ZooKeeper Internals, "Atomic Broadcast": a learner too far behind gets a
// SNAP. The member loads it before anything after it (the pipeline holds
// the leader's state at once), and the shell stores it durably, with the
// log dropped, before the next output.
#[test]
fn a_snapshot_from_the_leader_becomes_the_state_before_the_next_output() {
    let mut h = follower_awaiting_sync();
    let mut leader = Server::new(ServerConfig::default(), at(0));
    leader.replay(&create_txn(0, 0, z(1, 7), "/x", 1)).unwrap();
    let data = zab::Payload::from(TestCodec.encode(&leader.snapshot_job()));
    let outs = h.step(Input::Zab {
        from: 3,
        msg: Message::Snap {
            zxid: z(1, 7),
            data: data.clone(),
        },
    });
    assert_eq!(
        outs,
        vec![Out::Other(format!(
            "{:?}",
            Output::InstallSnapshot {
                zxid: z(1, 7),
                data
            }
        ))]
    );
    assert_eq!(h.m.server().last_zxid(), z(1, 7));
    assert!(h.m.server().tree().node("/x").is_some());
    assert!(h.m.fatal().is_none());
}

// The observer's journal: the leader's snapshot where it replaced the
// state, then each txn delivered after it, in zxid order.
#[test]
fn the_applied_journal_shows_a_snapshot_in_its_place_among_txns() {
    let mut h = follower_awaiting_sync();
    h.m.observe_applied();
    let mut leader = Server::new(ServerConfig::default(), at(0));
    leader.replay(&create_txn(0, 0, z(1, 7), "/x", 1)).unwrap();
    let data = zab::Payload::from(TestCodec.encode(&leader.snapshot_job()));
    h.zab(
        3,
        Message::Snap {
            zxid: z(1, 7),
            data,
        },
    );
    h.zab(
        3,
        Message::NewLeader {
            epoch: 2,
            zxid: z(1, 7),
        },
    );
    h.zab(3, Message::UpToDate);
    assert_eq!(h.m.server().role(), Role::Follower { leader: 3 });
    let rec = create_txn(0, 0, z(2, 1), "/y", 2);
    commit_from_leader(&mut h, &rec);
    h.zab(3, Message::Commit { zxid: z(2, 1) });
    assert!(h.m.server().tree().node("/y").is_some());
    assert_eq!(
        h.m.take_applied(),
        vec![
            Applied::Snapshot { zxid: z(1, 7) },
            Applied::Txn {
                zxid: z(2, 1),
                record: zab::Payload::from(rec.encode()),
            },
        ]
    );
}

// A snapshot that does not load (or holds another zxid than announced)
// leaves the member nothing to serve from: it stops, saying why, rather
// than serve a state it does not have.
#[test]
fn a_snapshot_that_does_not_load_stops_the_member() {
    let mut h = follower_awaiting_sync();
    h.step(Input::Zab {
        from: 3,
        msg: Message::Snap {
            zxid: z(1, 7),
            data: zab::Payload::from(&b"not a snapshot"[..]),
        },
    });
    assert!(
        h.m.fatal()
            .is_some_and(|why| why.starts_with("the leader's snapshot does not load")),
        "{:?}",
        h.m.fatal()
    );
}
