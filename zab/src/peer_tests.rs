//! Exact-output tests of one `Peer` driven by hand: the driving contract
//! and the seeds' rules, step by step.

use super::*;

fn z(e: u32, c: u32) -> Zxid {
    Zxid::new(e, c)
}

fn p(bytes: &[u8]) -> Payload {
    Payload::from(bytes)
}

fn cfg(me: ServerId, voters: &[ServerId]) -> Config {
    let mut c = Config::new(me, voters.to_vec(), vec![]);
    c.tick_ms = 100;
    c.init_limit_ticks = 10;
    c.sync_limit_ticks = 5;
    c.finalize_wait_ms = 0;
    c
}

/// A restarted voter's promise in these tests: syncLimit x tickTime.
const PROMISE_MS: u64 = 500;

fn msg(peer: &mut Peer, from: ServerId, m: Message, now_ms: u64) -> Vec<Output> {
    peer.handle(Input::Message { from, msg: m }, now_ms);
    peer.take_outputs()
}

fn sends(outs: &[Output]) -> Vec<(ServerId, Message)> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Send { to, msg } if msg.channel() == Channel::Quorum => {
                Some((*to, msg.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Member 1 of {1,2,3} joins the established leader 3 (ZooKeeper Internals, "Leader Election": "If a
/// leader already exists, other servers inform the new one which server is
/// the leader") and goes through discovery and a DIFF sync.
fn follower_of_3(restored: Restored) -> Peer {
    let mut f = Peer::new(cfg(1, &[1, 2, 3]), restored, 0).unwrap();
    // A restarted voter keeps its promise to the leader it may have
    // followed before (syncLimit x tickTime here) before it acknowledges
    // an epoch: the tests start after it.
    f.handle(Input::Tick, PROMISE_MS);
    f.take_outputs();
    let vote = |state| {
        Message::Notification(Notification {
            leader: 3,
            zxid: z(1, 2),
            peer_epoch: 1,
            election_epoch: 4,
            state,
        })
    };
    msg(&mut f, 2, vote(ServerState::Following), 0);
    let outs = msg(&mut f, 3, vote(ServerState::Leading), 0);
    assert_eq!(f.state(), ServerState::Following);
    let info = Message::FollowerInfo {
        accepted_epoch: f.status().accepted_epoch,
        last_zxid: f.status().last_zxid,
        observer: false,
    };
    assert_eq!(sends(&outs), vec![(3, info)]);
    f
}

#[test]
fn a_follower_acknowledges_only_a_later_epoch() {
    // ZooKeeper Internals, "Leader Election": "a follower acknowledges its new epoch proposal, and it only
    // does so if the new epoch proposed is later than its own".
    let restored = Restored {
        accepted_epoch: 2,
        current_epoch: 1,
        ..Restored::empty()
    };
    let mut f = follower_of_3(restored.clone());
    let outs = msg(
        &mut f,
        3,
        Message::LeaderInfo {
            epoch: 2,
            confirmed: false,
        },
        1,
    );
    assert_eq!(
        f.state(),
        ServerState::Looking,
        "epoch 2 is not later than acceptedEpoch 2"
    );
    assert_eq!(outs[0], Output::CloseLink { peer: 3 });
    assert!(!outs
        .iter()
        .any(|o| matches!(o, Output::SetAcceptedEpoch { .. })));

    // A later epoch: store it, then acknowledge with currentEpoch and zxid.
    let mut f = follower_of_3(restored.clone());
    let outs = msg(
        &mut f,
        3,
        Message::LeaderInfo {
            epoch: 3,
            confirmed: false,
        },
        1,
    );
    assert_eq!(
        outs,
        vec![
            Output::SetAcceptedEpoch { epoch: 3 },
            Output::Send {
                to: 3,
                msg: Message::AckEpoch {
                    epoch: 3,
                    current_epoch: 1,
                    last_zxid: Zxid::ZERO
                }
            },
        ]
    );

    // The same epoch once a quorum confirmed it: a late joiner of the one
    // leader of that epoch.
    let mut f = follower_of_3(restored);
    let outs = msg(
        &mut f,
        3,
        Message::LeaderInfo {
            epoch: 2,
            confirmed: true,
        },
        1,
    );
    assert_eq!(
        sends(&outs),
        vec![(
            3,
            Message::AckEpoch {
                epoch: 2,
                current_epoch: 1,
                last_zxid: Zxid::ZERO
            }
        )]
    );
}

#[test]
fn a_follower_persists_before_it_acknowledges() {
    let log = vec![
        (z(1, 1), p(b"a")),
        (z(1, 2), p(b"b")),
        (z(1, 3), p(b"never committed")),
    ];
    let restored = Restored {
        accepted_epoch: 1,
        current_epoch: 1,
        snapshot_zxid: Zxid::ZERO,
        log,
    };
    let mut f = follower_of_3(restored);
    msg(
        &mut f,
        3,
        Message::LeaderInfo {
            epoch: 2,
            confirmed: false,
        },
        1,
    );

    // ZooKeeper Internals, "Atomic Broadcast": "a skipped message must remain skipped": truncate 1:3.
    let outs = msg(&mut f, 3, Message::Trunc { zxid: z(1, 2) }, 2);
    assert_eq!(outs, vec![Output::Truncate { after: z(1, 2) }]);
    assert!(msg(&mut f, 3, Message::Commit { zxid: z(1, 2) }, 2)
        .iter()
        .all(|o| matches!(o, Output::Deliver { .. })));
    // NEWLEADER: the log is durable up to 1:2 (restored), so currentEpoch
    // is stored first, then acknowledged.
    let outs = msg(
        &mut f,
        3,
        Message::NewLeader {
            epoch: 2,
            zxid: z(1, 2),
        },
        3,
    );
    assert_eq!(
        outs,
        vec![
            Output::SetCurrentEpoch { epoch: 2 },
            Output::Send {
                to: 3,
                msg: Message::AckNewLeader { epoch: 2 }
            }
        ]
    );
    let outs = msg(&mut f, 3, Message::UpToDate, 4);
    assert_eq!(
        outs,
        vec![Output::Role(RoleChange::Following {
            leader: 3,
            epoch: 2
        })]
    );
    assert!(f.status().serving);

    // Broadcast: log, and ACK only once durable (cumulatively).
    let outs = msg(
        &mut f,
        3,
        Message::Proposal {
            zxid: z(2, 1),
            payload: p(b"x"),
        },
        5,
    );
    assert_eq!(
        outs,
        vec![Output::Persist {
            zxid: z(2, 1),
            payload: p(b"x")
        }]
    );
    msg(
        &mut f,
        3,
        Message::Proposal {
            zxid: z(2, 2),
            payload: p(b"y"),
        },
        5,
    );
    f.handle(Input::Durable { zxid: z(2, 2) }, 6);
    assert_eq!(
        f.take_outputs(),
        vec![Output::Send {
            to: 3,
            msg: Message::Ack { zxid: z(2, 2) }
        }]
    );
    // COMMIT delivers in zxid order.
    let outs = msg(&mut f, 3, Message::Commit { zxid: z(2, 2) }, 7);
    assert_eq!(
        outs,
        vec![
            Output::Deliver {
                zxid: z(2, 1),
                payload: p(b"x")
            },
            Output::Deliver {
                zxid: z(2, 2),
                payload: p(b"y")
            },
        ]
    );
    f.validate();
}

#[test]
fn current_epoch_waits_for_the_synced_history_to_be_durable() {
    let mut f = follower_of_3(Restored::empty());
    msg(
        &mut f,
        3,
        Message::LeaderInfo {
            epoch: 2,
            confirmed: false,
        },
        1,
    );
    msg(&mut f, 3, Message::Diff, 2);
    msg(
        &mut f,
        3,
        Message::Proposal {
            zxid: z(1, 1),
            payload: p(b"a"),
        },
        2,
    );
    let outs = msg(
        &mut f,
        3,
        Message::NewLeader {
            epoch: 2,
            zxid: z(1, 1),
        },
        2,
    );
    assert!(outs.is_empty(), "nothing before 1:1 is durable: {outs:?}");
    assert_eq!(f.status().current_epoch, 0);
    f.handle(Input::Durable { zxid: z(1, 1) }, 3);
    assert_eq!(
        f.take_outputs(),
        vec![
            Output::SetCurrentEpoch { epoch: 2 },
            Output::Send {
                to: 3,
                msg: Message::AckNewLeader { epoch: 2 }
            }
        ]
    );
}

#[test]
fn a_follower_abandons_a_silent_leader() {
    let mut f = follower_of_3(Restored::empty());
    msg(
        &mut f,
        3,
        Message::LeaderInfo {
            epoch: 1,
            confirmed: false,
        },
        PROMISE_MS,
    );
    f.handle(Input::Tick, PROMISE_MS + 999);
    assert_eq!(
        f.state(),
        ServerState::Following,
        "initLimit is 10 ticks of 100 ms"
    );
    f.handle(Input::Tick, PROMISE_MS + 1_000);
    assert_eq!(f.state(), ServerState::Looking);
    assert_eq!(
        f.take_outputs()[..2],
        [
            Output::CloseLink { peer: 3 },
            Output::Role(RoleChange::Looking)
        ]
    );
}

/// Leader 3 of {1,2,3} with follower 1 through discovery and sync.
fn leader_with_follower() -> Peer {
    let mut l = Peer::new(
        cfg(3, &[1, 2, 3]),
        Restored {
            accepted_epoch: 1,
            current_epoch: 1,
            ..Restored::empty()
        },
        0,
    )
    .unwrap();
    // Past its restart promise (`follower_of_3`); every time below is
    // after it.
    l.handle(Input::Tick, PROMISE_MS);
    l.take_outputs();
    let vote = Message::Notification(Notification {
        leader: 3,
        zxid: Zxid::ZERO,
        peer_epoch: 1,
        election_epoch: 1,
        state: ServerState::Looking,
    });
    let outs = msg(&mut l, 1, vote, 0);
    assert_eq!(
        l.state(),
        ServerState::Leading,
        "a quorum of votes for 3: {outs:?}"
    );
    let outs = msg(
        &mut l,
        1,
        Message::FollowerInfo {
            accepted_epoch: 1,
            last_zxid: Zxid::ZERO,
            observer: false,
        },
        1,
    );
    assert_eq!(
        outs,
        vec![
            Output::SetAcceptedEpoch { epoch: 2 },
            Output::Send {
                to: 1,
                msg: Message::LeaderInfo {
                    epoch: 2,
                    confirmed: false
                }
            }
        ]
    );
    let outs = msg(
        &mut l,
        1,
        Message::AckEpoch {
            epoch: 2,
            current_epoch: 1,
            last_zxid: Zxid::ZERO,
        },
        2,
    );
    assert_eq!(
        outs,
        vec![
            Output::SetCurrentEpoch { epoch: 2 },
            Output::Send {
                to: 1,
                msg: Message::Diff
            },
            Output::Send {
                to: 1,
                msg: Message::NewLeader {
                    epoch: 2,
                    zxid: Zxid::ZERO
                }
            },
        ]
    );
    let outs = msg(&mut l, 1, Message::AckNewLeader { epoch: 2 }, 3);
    assert_eq!(
        outs,
        vec![
            Output::Role(RoleChange::Leading { epoch: 2 }),
            Output::Send {
                to: 1,
                msg: Message::UpToDate
            }
        ]
    );
    l
}

#[test]
fn the_leader_commits_on_a_quorum_in_zxid_order() {
    let mut l = leader_with_follower();
    assert_eq!(l.propose(p(b"a"), 4), Ok(z(2, 1)));
    assert_eq!(l.propose(p(b"b"), 4), Ok(z(2, 2)));
    assert_eq!(
        l.take_outputs(),
        vec![
            Output::Persist {
                zxid: z(2, 1),
                payload: p(b"a")
            },
            Output::Send {
                to: 1,
                msg: Message::Proposal {
                    zxid: z(2, 1),
                    payload: p(b"a")
                }
            },
            Output::Persist {
                zxid: z(2, 2),
                payload: p(b"b")
            },
            Output::Send {
                to: 1,
                msg: Message::Proposal {
                    zxid: z(2, 2),
                    payload: p(b"b")
                }
            },
        ]
    );
    // The follower's ack alone is not a quorum: the leader's own log must
    // be durable too (2 of 3).
    assert!(msg(&mut l, 1, Message::Ack { zxid: z(2, 2) }, 5).is_empty());
    l.handle(Input::Durable { zxid: z(2, 1) }, 6);
    assert_eq!(
        l.take_outputs(),
        vec![
            Output::Deliver {
                zxid: z(2, 1),
                payload: p(b"a")
            },
            Output::Send {
                to: 1,
                msg: Message::Commit { zxid: z(2, 1) }
            }
        ]
    );
    // sync: answered once everything proposed before it is committed.
    l.sync(77, 6).unwrap();
    assert!(l.take_outputs().is_empty());
    l.handle(Input::Durable { zxid: z(2, 2) }, 7);
    assert_eq!(
        l.take_outputs(),
        vec![
            Output::Deliver {
                zxid: z(2, 2),
                payload: p(b"b")
            },
            Output::Send {
                to: 1,
                msg: Message::Commit { zxid: z(2, 2) }
            },
            Output::SyncDone { token: 77 },
        ]
    );
    l.validate();
}

// The lease (docs/ARCHITECTURE.md, "Timing model"): the leader of {1,2,3}
// serves while follower 1 answered a heartbeat sent less than lease_ms ago
// (452 ms here: syncLimit x tickTime = 500 ms less the clock drift), and
// steps down at the first input after that, before syncLimit would drop 1.
#[test]
fn a_leader_whose_lease_runs_out_steps_down() {
    let mut l = leader_with_follower();
    let t = PROMISE_MS;
    assert_eq!(l.config().lease_ms(), 452);
    assert_eq!(l.lease_until_ms(), Some(t + 452), "NEWLEADER answered");
    l.take_outputs();
    l.handle(Input::Tick, t + 100);
    assert_eq!(sends(&l.take_outputs()), vec![(1, Message::Ping)]);
    // Its answer, however late, counts from when the PING was sent.
    msg(&mut l, 1, Message::Ping, t + 400);
    assert_eq!(l.lease_until_ms(), Some(t + 100 + 452));
    l.handle(Input::Tick, t + 551);
    assert_eq!(l.state(), ServerState::Leading);
    l.take_outputs();
    assert_eq!(
        l.propose(p(b"late"), t + 552),
        Err(ProposeError::NotLeader { leader: None }),
        "the lease ran out at {}",
        t + 552
    );
    let outs = l.take_outputs();
    assert_eq!(
        outs[..3],
        [
            Output::CloseLink { peer: 1 },
            Output::Role(RoleChange::LeaderLostQuorum { epoch: 2 }),
            Output::Role(RoleChange::Looking),
        ]
    );
    assert_eq!(l.stats().leases_expired, 1);
}

#[test]
fn a_ping_that_answers_no_ping_costs_the_learner_its_link() {
    let mut l = leader_with_follower();
    l.take_outputs();
    let outs = msg(&mut l, 1, Message::Ping, PROMISE_MS + 1);
    assert_eq!(outs, vec![Output::CloseLink { peer: 1 }]);
    assert_eq!(l.stats().protocol_violations, 1);
    // Without 1 the lease has no quorum: the next input steps down.
    l.handle(Input::Tick, PROMISE_MS + 2);
    assert_eq!(l.state(), ServerState::Looking);
}

// The follower's side of the lease: silent for suspect_ms, it abandons the
// leader; but it acknowledges a new leader's epoch only once its promise
// (suspect_ms after it last heard from the old one) is kept, even when it
// left because the link broke.
#[test]
fn a_follower_keeps_its_promise_before_it_acknowledges_a_new_epoch() {
    let mut f = follower_of_3(Restored::empty());
    let t = PROMISE_MS;
    msg(
        &mut f,
        3,
        Message::LeaderInfo {
            epoch: 1,
            confirmed: false,
        },
        t,
    );
    msg(&mut f, 3, Message::Diff, t);
    msg(
        &mut f,
        3,
        Message::NewLeader {
            epoch: 1,
            zxid: Zxid::ZERO,
        },
        t,
    );
    msg(&mut f, 3, Message::UpToDate, t);
    assert!(f.status().serving);
    msg(&mut f, 3, Message::Ping, t + 100);
    f.handle(Input::Disconnected { peer: 3 }, t + 150);
    assert_eq!(f.state(), ServerState::Looking);
    f.take_outputs();
    // Member 2 leads epoch 2 now; we join it at once...
    let vote = |state| {
        Message::Notification(Notification {
            leader: 2,
            zxid: Zxid::ZERO,
            peer_epoch: 1,
            election_epoch: 9,
            state,
        })
    };
    msg(&mut f, 3, vote(ServerState::Following), t + 160);
    msg(&mut f, 2, vote(ServerState::Leading), t + 160);
    assert_eq!(f.state(), ServerState::Following);
    let info = Message::LeaderInfo {
        epoch: 2,
        confirmed: false,
    };
    // ... but acknowledge its epoch only at t + 100 + suspect_ms.
    assert!(sends(&msg(&mut f, 2, info, t + 170)).is_empty());
    f.handle(Input::Tick, t + 599);
    assert!(sends(&f.take_outputs()).is_empty());
    f.handle(Input::Tick, t + 600);
    assert_eq!(
        sends(&f.take_outputs()),
        vec![(
            2,
            Message::AckEpoch {
                epoch: 2,
                current_epoch: 1,
                last_zxid: Zxid::ZERO
            }
        )]
    );
}

#[test]
fn a_single_member_leads_by_itself() {
    let mut c = cfg(1, &[1]);
    c.finalize_wait_ms = 0;
    let mut l = Peer::new(c, Restored::empty(), 0).unwrap();
    let outs = l.take_outputs();
    assert_eq!(
        outs,
        vec![
            Output::Role(RoleChange::Looking),
            Output::SetAcceptedEpoch { epoch: 1 },
            Output::SetCurrentEpoch { epoch: 1 },
            Output::Role(RoleChange::Leading { epoch: 1 }),
        ]
    );
    let zxid = l.propose(p(b"solo"), 1).unwrap();
    l.take_outputs();
    l.handle(Input::Durable { zxid }, 2);
    assert_eq!(
        l.take_outputs(),
        vec![Output::Deliver {
            zxid,
            payload: p(b"solo")
        }]
    );
}

#[test]
fn a_restarted_member_delivers_its_log_only_once_confirmed() {
    // A log restored after a crash is not known committed: nothing is
    // delivered until this member leads (or a leader says so).
    let log = vec![(z(1, 1), p(b"a"))];
    let mut l = Peer::new(
        cfg(1, &[1]),
        Restored {
            accepted_epoch: 1,
            current_epoch: 1,
            snapshot_zxid: Zxid::ZERO,
            log,
        },
        0,
    )
    .unwrap();
    let outs = l.take_outputs();
    let delivered: Vec<&Output> = outs
        .iter()
        .filter(|o| matches!(o, Output::Deliver { .. }))
        .collect();
    assert_eq!(
        delivered,
        vec![&Output::Deliver {
            zxid: z(1, 1),
            payload: p(b"a")
        }]
    );
    let established = outs
        .iter()
        .position(|o| matches!(o, Output::Role(RoleChange::Leading { epoch: 2 })))
        .unwrap();
    let delivery = outs
        .iter()
        .position(|o| matches!(o, Output::Deliver { .. }))
        .unwrap();
    assert!(
        delivery < established,
        "the initial history is committed as the epoch is established"
    );
}

#[test]
fn a_leader_steps_down_for_a_follower_ahead_of_it() {
    // ZooKeeper's "Follower is ahead of the leader": an ACKEPOCH from a
    // member with a newer history than ours.
    let mut l = Peer::new(
        cfg(3, &[1, 2, 3]),
        Restored {
            accepted_epoch: 1,
            current_epoch: 1,
            ..Restored::empty()
        },
        0,
    )
    .unwrap();
    let vote = Message::Notification(Notification {
        leader: 3,
        zxid: Zxid::ZERO,
        peer_epoch: 1,
        election_epoch: 1,
        state: ServerState::Looking,
    });
    msg(&mut l, 1, vote, 0);
    msg(
        &mut l,
        1,
        Message::FollowerInfo {
            accepted_epoch: 1,
            last_zxid: z(1, 4),
            observer: false,
        },
        1,
    );
    msg(
        &mut l,
        1,
        Message::AckEpoch {
            epoch: 2,
            current_epoch: 1,
            last_zxid: z(1, 4),
        },
        2,
    );
    assert_eq!(l.state(), ServerState::Looking);
    assert_eq!(l.status().current_epoch, 1, "the epoch was never confirmed");
}

#[test]
fn members_answer_looking_voters_with_the_established_vote() {
    let mut l = leader_with_follower();
    let asking = Message::Notification(Notification {
        leader: 2,
        zxid: Zxid::ZERO,
        peer_epoch: 0,
        election_epoch: 9,
        state: ServerState::Looking,
    });
    l.handle(
        Input::Message {
            from: 2,
            msg: asking,
        },
        10,
    );
    let expected = Notification {
        leader: 3,
        zxid: Zxid::new(2, 0),
        peer_epoch: 2,
        election_epoch: 1,
        state: ServerState::Leading,
    };
    assert_eq!(
        l.take_outputs(),
        vec![Output::Send {
            to: 2,
            msg: Message::Notification(expected)
        }]
    );
}

// ZooKeeper Internals, "Atomic Broadcast": a leader that cannot carry a
// proposal (too many await a quorum) refuses it; the member above then has
// it step down (it abdicates), and an election starts.
#[test]
fn a_leader_that_refuses_a_proposal_steps_down_when_it_abdicates() {
    let mut l = leader_with_follower();
    l.cfg.outstanding_proposals_max = 2;
    assert_eq!(l.propose(p(b"a"), 10), Ok(z(2, 1)));
    assert_eq!(l.propose(p(b"b"), 10), Ok(z(2, 2)));
    assert_eq!(l.propose(p(b"c"), 10), Err(ProposeError::Backpressure));
    l.take_outputs();
    l.abdicate(11);
    assert_eq!(l.state(), ServerState::Looking);
    let outs = l.take_outputs();
    assert_eq!(
        outs[..2],
        [
            Output::CloseLink { peer: 1 },
            Output::Role(RoleChange::Looking),
        ]
    );
    // Abdicating again, or while not leading, changes nothing.
    l.abdicate(12);
    assert!(
        !l.take_outputs()
            .iter()
            .any(|o| matches!(o, Output::Role(_))),
        "no second role change"
    );
}

// A pipeline numbers its txns before it proposes them: the window it takes
// the numbers from is exactly what `propose` then does, and a full window
// (ZooKeeper Internals, "Atomic Broadcast": proposals awaiting a quorum)
// opens again once a quorum acknowledges.
#[test]
fn the_proposal_window_is_what_propose_then_does() {
    let mut l = leader_with_follower();
    l.cfg.outstanding_proposals_max = 2;
    let window = |next, room| Ok(ProposalWindow { next, room });
    assert_eq!(l.proposal_window(), window(z(2, 1), 2));
    assert_eq!(l.propose(p(b"a"), 4), Ok(z(2, 1)));
    assert_eq!(l.proposal_window(), window(z(2, 2), 1));
    assert_eq!(l.propose(p(b"b"), 4), Ok(z(2, 2)));
    assert_eq!(l.proposal_window(), Err(ProposeError::Backpressure));
    l.take_outputs();
    msg(&mut l, 1, Message::Ack { zxid: z(2, 2) }, 5);
    l.handle(Input::Durable { zxid: z(2, 2) }, 5);
    assert_eq!(l.proposal_window(), window(z(2, 3), 2));

    let f = follower_of_3(Restored::empty());
    assert_eq!(
        f.proposal_window(),
        Err(ProposeError::NotLeader { leader: Some(3) })
    );
}

/// ZooKeeper Dynamic Reconfiguration, "Incremental mode": once a
/// configuration without member 1 is active, leader 3's quorum is of the
/// remaining participants; 1's link is closed and its acks no longer count;
/// what the new quorum holds commits at once.
#[test]
fn a_reconfigured_leader_drops_a_removed_learner_and_commits_on_the_new_quorum() {
    let mut l = leader_with_follower();
    assert_eq!(l.propose(p(b"a"), 4), Ok(z(2, 1)));
    l.take_outputs();
    // Under {1,2,3} the leader's own durable log is not a quorum.
    l.handle(Input::Durable { zxid: z(2, 1) }, 5);
    assert!(l.take_outputs().is_empty());
    let mut synced = Vec::new();
    l.synced_learners_into(&mut synced);
    assert_eq!(synced, vec![1]);
    // Now only {2,3} vote, and 3 alone is not a majority of them either;
    // 1 is dropped.
    l.reconfigure(vec![2, 3], vec![], QuorumRule::Majority, 6);
    assert_eq!(l.take_outputs(), vec![Output::CloseLink { peer: 1 }]);
    assert_eq!(l.state(), ServerState::Leading);
    l.synced_learners_into(&mut synced);
    assert!(synced.is_empty());
    // Shrunk to {3}: the leader alone is the quorum and commits.
    l.reconfigure(vec![3], vec![], QuorumRule::Majority, 7);
    assert_eq!(
        l.take_outputs(),
        vec![Output::Deliver {
            zxid: z(2, 1),
            payload: p(b"a")
        }]
    );
    l.validate();
}

/// A leader that is not a participant of the new configuration steps
/// down (ZooKeeper Dynamic Reconfiguration, "Removing servers": the leader
/// may be removed; the remaining participants elect a new one).
#[test]
fn a_leader_removed_by_a_reconfig_steps_down() {
    let mut l = leader_with_follower();
    l.reconfigure(vec![1, 2], vec![], QuorumRule::Majority, 4);
    let outs = l.take_outputs();
    assert_eq!(
        outs[..2],
        [
            Output::CloseLink { peer: 1 },
            Output::Role(RoleChange::Looking)
        ]
    );
    assert_eq!(l.state(), ServerState::Looking);
}

/// A follower removed from the configuration, or made an observer,
/// leaves its leader; one that stays a participant keeps following.
#[test]
fn a_follower_leaves_its_leader_when_removed_or_its_role_changes() {
    let mut f = follower_of_3(Restored::empty());
    f.reconfigure(vec![1, 2, 3, 4], vec![], QuorumRule::Majority, 1);
    assert!(f.take_outputs().is_empty(), "still a participant");
    assert_eq!(f.state(), ServerState::Following);
    f.reconfigure(vec![2, 3], vec![1], QuorumRule::Majority, 2);
    let outs = f.take_outputs();
    assert_eq!(
        outs[..2],
        [
            Output::CloseLink { peer: 3 },
            Output::Role(RoleChange::Looking)
        ]
    );
    let mut f = follower_of_3(Restored::empty());
    f.reconfigure(vec![2, 3], vec![], QuorumRule::Majority, 1);
    assert_eq!(f.state(), ServerState::Looking);
}

// ZooKeeper Internals, "Atomic Broadcast": a follower goes back to election
// when its leader falls silent; at the default tickTime (2000) and syncLimit
// (5), one that heartbeats for a lease (a ping every 100 ms) is suspected
// after suspect_ms (750 ms), not syncLimit x tickTime.
#[test]
fn a_follower_suspects_a_silent_leader_after_suspect_ms() {
    let mut c = cfg(1, &[1, 2, 3]);
    c.tick_ms = 2_000;
    assert_eq!(
        (c.suspect_ms(), c.lease_ms(), c.heartbeat_ms()),
        (750, 678, 84)
    );
    let mut f = Peer::new(c, Restored::empty(), 0).unwrap();
    let vote = |state| {
        Message::Notification(Notification {
            leader: 3,
            zxid: z(1, 2),
            peer_epoch: 1,
            election_epoch: 4,
            state,
        })
    };
    msg(&mut f, 2, vote(ServerState::Following), 0);
    msg(&mut f, 3, vote(ServerState::Leading), 0);
    let info = Message::LeaderInfo {
        epoch: 1,
        confirmed: false,
    };
    msg(&mut f, 3, info, 0);
    msg(&mut f, 3, Message::Diff, 0);
    let nl = Message::NewLeader {
        epoch: 1,
        zxid: Zxid::ZERO,
    };
    msg(&mut f, 3, nl, 0);
    msg(&mut f, 3, Message::UpToDate, 0);
    assert!(f.status().serving);
    for t in (100..=1_000).step_by(100) {
        msg(&mut f, 3, Message::Ping, t);
    }
    f.handle(Input::Tick, 1_749);
    assert_eq!(f.state(), ServerState::Following);
    f.handle(Input::Tick, 1_750);
    assert_eq!(f.state(), ServerState::Looking, "silent since 1000 ms");
}

// The lease counts the quorum's latest answers: with five voters, the
// second latest of the four followers' (the leader is the third voter).
#[test]
fn the_lease_runs_from_the_quorums_latest_answers() {
    let mut l = leader_with_follower();
    let t = PROMISE_MS;
    // {1,2,3}: follower 1 alone makes the quorum with the leader.
    l.take_outputs();
    for (k, at) in [(1u64, t + 100), (2, t + 200), (3, t + 300)] {
        l.handle(Input::Tick, at);
        msg(&mut l, 1, Message::Ping, at + 1);
        assert_eq!(l.lease_until_ms(), Some(t + 100 * k + 452), "ping {k}");
    }
    // Answers are credited in order, to the pings they answer.
    l.handle(Input::Tick, t + 400);
    l.handle(Input::Tick, t + 500);
    msg(&mut l, 1, Message::Ping, t + 501);
    assert_eq!(l.lease_until_ms(), Some(t + 400 + 452));
    msg(&mut l, 1, Message::Ping, t + 502);
    assert_eq!(l.lease_until_ms(), Some(t + 500 + 452));
}

/// Member 1 of {1,2,3} (finalize wait 0) decides at once to follow 2 on the
/// quorum {1, 2} of votes for 2, in round 1, and sends it FOLLOWERINFO.
fn decided_to_follow_2() -> Peer {
    let mut f = Peer::new(cfg(1, &[1, 2, 3]), Restored::empty(), 0).unwrap();
    f.handle(Input::Tick, PROMISE_MS);
    f.take_outputs();
    let outs = msg(&mut f, 2, looking_vote(2, 1), PROMISE_MS);
    assert_eq!(f.state(), ServerState::Following);
    assert!(
        sends(&outs)
            .iter()
            .any(|(to, m)| *to == 2 && matches!(m, Message::FollowerInfo { .. })),
        "FOLLOWERINFO to 2: {outs:?}"
    );
    f
}

/// A notification of an empty-history member: its vote for `leader` in
/// `round`, in `state`.
fn vote_in(leader: ServerId, round: u64, state: ServerState) -> Message {
    Message::Notification(Notification {
        leader,
        zxid: Zxid::ZERO,
        peer_epoch: 0,
        election_epoch: round,
        state,
    })
}

fn looking_vote(leader: ServerId, round: u64) -> Message {
    vote_in(leader, round, ServerState::Looking)
}

#[test]
fn a_follower_looks_again_when_its_chosen_leader_votes_for_another() {
    // ZooKeeper Internals, "Leader Election": votes only move to a better
    // candidate, so a member whose vote in our round went to another will
    // not lead us; waiting initLimit x tickTime for it would keep this
    // member out of every quorum that long.
    let mut f = decided_to_follow_2();
    let outs = msg(&mut f, 2, looking_vote(3, 1), PROMISE_MS + 10);
    assert_eq!(f.state(), ServerState::Looking);
    assert!(outs.contains(&Output::CloseLink { peer: 2 }), "{outs:?}");
    assert!(
        outs.contains(&Output::Role(RoleChange::Looking)),
        "{outs:?}"
    );
    assert_eq!(f.stats().leaders_declined, 1);
    assert_eq!(
        f.status().election_epoch,
        1,
        "it looks again in the round the others are in"
    );

    // The same when the chosen leader says it follows another member.
    let mut f = decided_to_follow_2();
    let following_3 = vote_in(3, 1, ServerState::Following);
    msg(&mut f, 2, following_3, PROMISE_MS + 10);
    assert_eq!(f.state(), ServerState::Looking);
}

#[test]
fn a_follower_keeps_waiting_for_a_leader_that_still_votes_for_itself() {
    // A resend of the leader's own vote (it has not decided yet), or a
    // vote from a round before our decision, says nothing new.
    let mut f = decided_to_follow_2();
    msg(&mut f, 2, looking_vote(2, 1), PROMISE_MS + 10);
    msg(&mut f, 2, looking_vote(3, 0), PROMISE_MS + 20);
    // Another member's vote for 3 is no word from our leader.
    msg(&mut f, 3, looking_vote(3, 1), PROMISE_MS + 30);
    assert_eq!(f.state(), ServerState::Following);
    assert_eq!(f.stats().leaders_declined, 0);
}

#[test]
fn a_stale_word_from_an_earlier_round_keeps_the_follower_waiting() {
    // Member 1 decided in round 1; the chosen leader's FOLLOWING from the
    // round before (round 0: it followed somebody then) arrives late.
    let mut f = decided_to_follow_2();
    let old_following = vote_in(3, 0, ServerState::Following);
    msg(&mut f, 2, old_following, PROMISE_MS + 10);
    assert_eq!(f.state(), ServerState::Following);
}

/// Administrator's Guide, "Oracle Quorum": member 1 of a 2-voter
/// ensemble, alone, waits while its oracle says 0; when it says 1 it
/// elects itself and leads, committing on its own log; when it says 0
/// again it steps down at once.
#[test]
fn the_survivor_of_two_leads_only_while_its_oracle_says_1() {
    let mut c = cfg(1, &[1, 2]);
    c.quorum = QuorumRule::Oracle { says_yes: false };
    let mut m = Peer::new(c, Restored::empty(), 0).unwrap();
    for t in 1..=3 {
        m.handle(Input::Tick, t * 100);
    }
    m.take_outputs();
    assert_eq!(
        m.state(),
        ServerState::Looking,
        "no quorum without the oracle"
    );
    m.on_oracle(true, 400);
    m.handle(Input::Tick, 500);
    let outs = m.take_outputs();
    assert!(
        outs.contains(&Output::SetAcceptedEpoch { epoch: 1 }),
        "{outs:?}"
    );
    m.handle(Input::Tick, 600);
    m.take_outputs();
    assert_eq!(m.state(), ServerState::Leading);
    let zxid = m.propose(p(b"a"), 700).unwrap();
    m.handle(Input::Durable { zxid }, 700);
    let outs = m.take_outputs();
    assert!(
        outs.contains(&Output::Deliver {
            zxid,
            payload: p(b"a")
        }),
        "committed on its own log: {outs:?}"
    );
    m.on_oracle(false, 800);
    let outs = m.take_outputs();
    assert!(
        outs.contains(&Output::Role(RoleChange::Looking)),
        "{outs:?}"
    );
    assert_eq!(m.state(), ServerState::Looking);
    m.validate();
}

// ---- observers behind followers (observerMasterPort) ----------------------

/// An observer's OBSERVERINFO.
fn observer_info(accepted_epoch: u32, last_zxid: Zxid) -> Message {
    Message::FollowerInfo {
        accepted_epoch,
        last_zxid,
        observer: true,
    }
}

/// Member 1 of voters {1,2,3} and observers {4,5}, `observerMasterPort`
/// set, synchronized with leader 3 in epoch 2 and holding 2:1 committed.
fn master_follower() -> Peer {
    let mut c = cfg(1, &[1, 2, 3]);
    c.observers = vec![4, 5];
    c.observer_master = true;
    c.observer_master_links_max = 1;
    let mut f = Peer::new(c, Restored::empty(), 0).unwrap();
    f.handle(Input::Tick, PROMISE_MS);
    f.take_outputs();
    let vote = |state| {
        Message::Notification(Notification {
            leader: 3,
            zxid: z(0, 0),
            peer_epoch: 2,
            election_epoch: 4,
            state,
        })
    };
    msg(&mut f, 2, vote(ServerState::Following), PROMISE_MS);
    msg(&mut f, 3, vote(ServerState::Leading), PROMISE_MS);
    let leader_info = Message::LeaderInfo {
        epoch: 2,
        confirmed: true,
    };
    msg(&mut f, 3, leader_info, PROMISE_MS);
    msg(&mut f, 3, Message::Diff, PROMISE_MS);
    let txn = Message::Proposal {
        zxid: z(2, 1),
        payload: p(b"a"),
    };
    msg(&mut f, 3, txn, PROMISE_MS);
    let new_leader = Message::NewLeader {
        epoch: 2,
        zxid: z(2, 1),
    };
    msg(&mut f, 3, new_leader, PROMISE_MS);
    f.handle(Input::Durable { zxid: z(2, 1) }, PROMISE_MS);
    msg(&mut f, 3, Message::UpToDate, PROMISE_MS);
    msg(&mut f, 3, Message::Commit { zxid: z(2, 1) }, PROMISE_MS);
    assert!(f.status().serving);
    assert_eq!(f.status().committed_zxid, z(2, 1));
    f
}

// Administrator's Guide, "Cluster Options", observerMasterPort: a
// follower syncs an observer from its committed history, names its
// leader, INFORMs it of each commit in order, relays its `sync` to the
// leader and back behind the INFORMs, and counts it as synced.
#[test]
fn a_follower_syncs_an_observer_and_informs_it_of_commits() {
    let now = PROMISE_MS;
    let mut f = master_follower();
    let info = observer_info(0, Zxid::ZERO);
    let outs = msg(&mut f, 4, info, now);
    assert_eq!(
        sends(&outs),
        vec![
            (4, Message::LearnerMaster { leader: 3 }),
            (
                4,
                Message::LeaderInfo {
                    epoch: 2,
                    confirmed: true
                }
            ),
        ]
    );
    let ack = Message::AckEpoch {
        epoch: 2,
        current_epoch: 0,
        last_zxid: Zxid::ZERO,
    };
    let outs = msg(&mut f, 4, ack, now);
    assert_eq!(
        sends(&outs),
        vec![
            (4, Message::Diff),
            (
                4,
                Message::Proposal {
                    zxid: z(2, 1),
                    payload: p(b"a")
                }
            ),
            (4, Message::Commit { zxid: z(2, 1) }),
            (
                4,
                Message::NewLeader {
                    epoch: 2,
                    zxid: z(2, 1)
                }
            ),
        ]
    );
    let outs = msg(&mut f, 4, Message::AckNewLeader { epoch: 2 }, now);
    assert_eq!(sends(&outs), vec![(4, Message::UpToDate)]);
    assert_eq!(f.master_synced_observers(), Some(1));
    let mut synced = Vec::new();
    f.synced_learners_into(&mut synced);
    assert_eq!(synced, vec![4]);

    // A proposal is not the observer's business; its commit is.
    let txn = Message::Proposal {
        zxid: z(2, 2),
        payload: p(b"b"),
    };
    let outs = msg(&mut f, 3, txn, now);
    assert!(sends(&outs).iter().all(|(to, _)| *to != 4));
    let outs = msg(&mut f, 4, Message::SyncRequest { token: 9 }, now);
    assert_eq!(sends(&outs), vec![(3, Message::SyncRequest { token: 9 })]);
    let outs = msg(&mut f, 3, Message::Commit { zxid: z(2, 2) }, now);
    assert_eq!(
        sends(&outs),
        vec![(
            4,
            Message::Inform {
                zxid: z(2, 2),
                payload: p(b"b")
            }
        )]
    );
    let outs = msg(&mut f, 3, Message::SyncReply { token: 9 }, now);
    assert_eq!(sends(&outs), vec![(4, Message::SyncReply { token: 9 })]);
    assert!(!outs.iter().any(|o| matches!(o, Output::SyncDone { .. })));

    // A second observer beyond the cap is refused; the first stays.
    let info = observer_info(0, Zxid::ZERO);
    let outs = msg(&mut f, 5, info, now);
    assert_eq!(outs, vec![Output::CloseLink { peer: 5 }]);
    assert_eq!(f.master_synced_observers(), Some(1));
}

// A packet an observer has no business sending (an ACK of a txn) closes
// that observer's link only: the follower keeps following.
#[test]
fn a_bad_packet_from_an_observer_closes_its_link_only() {
    let now = PROMISE_MS;
    let mut f = master_follower();
    let info = observer_info(0, Zxid::ZERO);
    msg(&mut f, 4, info, now);
    let outs = msg(&mut f, 4, Message::Ack { zxid: z(2, 1) }, now);
    assert_eq!(outs, vec![Output::CloseLink { peer: 4 }]);
    assert_eq!(f.state(), ServerState::Following);
    assert!(f.status().serving);
    assert_eq!(f.master_synced_observers(), Some(0));
}

// An observer that holds more than the follower has committed (it came
// from a learner master further on) waits until the follower's commit
// point reaches its last zxid: it never loses a committed txn.
#[test]
fn an_observer_ahead_of_its_learner_master_waits_for_its_commits() {
    let now = PROMISE_MS;
    let mut f = master_follower();
    let txn = Message::Proposal {
        zxid: z(2, 2),
        payload: p(b"b"),
    };
    msg(&mut f, 3, txn, now);
    let info = observer_info(2, z(2, 2));
    msg(&mut f, 4, info, now);
    let ack = Message::AckEpoch {
        epoch: 2,
        current_epoch: 2,
        last_zxid: z(2, 2),
    };
    let outs = msg(&mut f, 4, ack, now);
    assert!(sends(&outs).is_empty(), "{outs:?}");
    let outs = msg(&mut f, 3, Message::Commit { zxid: z(2, 2) }, now);
    assert_eq!(
        sends(&outs),
        vec![
            (4, Message::Diff),
            (4, Message::Commit { zxid: z(2, 2) }),
            (
                4,
                Message::NewLeader {
                    epoch: 2,
                    zxid: z(2, 2)
                }
            ),
        ]
    );
}

// The observer's side: with observerMasterPort it syncs from a follower
// (not the leader the election named), takes the leader the follower
// names for its writes, and after every follower failed it once tries
// the leader itself.
#[test]
fn an_observer_chooses_a_follower_then_the_leader() {
    let mut c = cfg(4, &[1, 2, 3]);
    c.observers = vec![4];
    c.observer_master = true;
    let mut o = Peer::new(c, Restored::empty(), 0).unwrap();
    o.take_outputs();
    let decided = Message::Notification(Notification {
        leader: 3,
        zxid: z(0, 0),
        peer_epoch: 1,
        election_epoch: 1,
        state: ServerState::Leading,
    });
    let following = Message::Notification(Notification {
        leader: 3,
        zxid: z(0, 0),
        peer_epoch: 1,
        election_epoch: 1,
        state: ServerState::Following,
    });
    let mut chosen = Vec::new();
    for _ in 0..3 {
        msg(&mut o, 1, following.clone(), 0);
        let outs = msg(&mut o, 3, decided.clone(), 0);
        let master = o.learning_from().expect("observing");
        assert!(sends(&outs)
            .iter()
            .any(|(to, m)| *to == master && matches!(m, Message::FollowerInfo { .. })));
        chosen.push(master);
        assert_eq!(o.status().leader, Some(3));
        // The learner master goes away before it syncs us.
        o.handle(Input::Disconnected { peer: master }, 0);
        o.take_outputs();
    }
    let mut followers = chosen[..2].to_vec();
    followers.sort_unstable();
    assert_eq!(followers, vec![1, 2], "{chosen:?}");
    assert_eq!(chosen[2], 3, "the leader after every follower: {chosen:?}");

    // A follower names the leader it follows.
    msg(&mut o, 1, following.clone(), 0);
    msg(&mut o, 3, decided, 0);
    let master = o.learning_from().unwrap();
    assert_ne!(master, 3);
    msg(&mut o, master, Message::LearnerMaster { leader: 2 }, 0);
    assert_eq!(o.status().leader, Some(2));
}
