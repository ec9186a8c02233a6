//! The leader's broadcast phase (ZooKeeper Internals, "Atomic Broadcast";
//! step 3 in `leader.rs`): proposals, cumulative ACKs, commits in zxid
//! order (COMMIT to followers, INFORM to observers) and `sync`s.

use super::super::message::Message;
use super::super::peer::{Output, Peer, ProposalWindow, ProposeError};
use super::super::types::{Payload, ServerId, Zxid};
use super::{PendingSync, Phase};

/// Proposal counters stop here: the leader then starts a new epoch.
const COUNTER_MAX: u32 = u32::MAX - 1;

impl Peer {
    pub(super) fn on_ack(&mut self, from: ServerId, zxid: Zxid) {
        let last = self.history.last();
        let Some(s) = self.leading().learners.get_mut(&from) else {
            self.unexpected(from, &Message::Ack { zxid });
            return;
        };
        if s.observer || !s.new_leader_acked || zxid > last {
            self.learner_violation(from, format!("ACK {zxid:?} out of turn"));
            return;
        }
        s.acked = s.acked.max(zxid);
        self.try_commit();
    }

    /// Commits the largest zxid a quorum of voters has logged durably.
    pub(super) fn try_commit(&mut self) {
        let l = self.leading_ref();
        if l.phase != Phase::Broadcast {
            return;
        }
        let mut acks: Vec<(ServerId, Zxid)> = l
            .learners
            .iter()
            .filter(|(id, s)| self.cfg.is_voter(**id) && s.new_leader_acked)
            .map(|(id, s)| (*id, s.acked))
            .collect();
        acks.push((self.cfg.my_id, self.history.durable()));
        let mut ids = Vec::with_capacity(acks.len());
        let rule = super::leader_rule(&self.cfg, l);
        let Some(candidate) = rule.quorum_value(&self.cfg.voters, &mut acks, &mut ids) else {
            return;
        };
        if candidate > self.history.committed() {
            self.leader_commit_to(candidate);
        }
    }

    pub(super) fn on_sync_request(&mut self, from: ServerId, token: u64) {
        let session = match self.leading_ref().learners.get(&from) {
            Some(s) if s.new_leader_acked && self.leading_ref().phase == Phase::Broadcast => {
                s.session
            }
            _ => {
                self.unexpected(from, &Message::SyncRequest { token });
                return;
            }
        };
        let target = self.history.last();
        if self.history.committed() >= target {
            self.send(from, Message::SyncReply { token });
        } else {
            let asker = Some((from, session));
            self.leading().pending_syncs.push_back(PendingSync {
                target,
                asker,
                token,
            });
        }
    }

    pub(crate) fn leader_sync_local(&mut self, token: u64) -> Result<(), ProposeError> {
        let l = self.leading_ref();
        if l.phase != Phase::Broadcast {
            return Err(ProposeError::NotReady);
        }
        if l.pending_syncs.len() >= self.cfg.outstanding_proposals_max {
            return Err(ProposeError::Backpressure);
        }
        let target = self.history.last();
        if self.history.committed() >= target {
            self.outputs.push(Output::SyncDone { token });
        } else {
            let pending = PendingSync {
                target,
                asker: None,
                token,
            };
            self.leading().pending_syncs.push_back(pending);
        }
        Ok(())
    }

    /// Answers the syncs whose txns are all committed now.
    fn answer_syncs(&mut self) {
        let committed = self.history.committed();
        while let Some(&PendingSync {
            target,
            asker,
            token,
        }) = self.leading_ref().pending_syncs.front()
        {
            if target > committed {
                break;
            }
            self.leading().pending_syncs.pop_front();
            match asker {
                None => self.outputs.push(Output::SyncDone { token }),
                Some((id, session))
                    if self
                        .leading_ref()
                        .learners
                        .get(&id)
                        .is_some_and(|s| s.session == session) =>
                {
                    self.send(id, Message::SyncReply { token });
                }
                Some(_) => {} // that session is over; its link was closed
            }
        }
    }

    /// Delivers locally, COMMIT to synced followers, INFORM to observers.
    pub(super) fn leader_commit_to(&mut self, zxid: Zxid) {
        if zxid <= self.history.committed() {
            return;
        }
        let before = self.history.committed();
        let newly = self.deliver_to(zxid);
        let targets: Vec<(ServerId, bool, Zxid)> = self
            .leading_ref()
            .learners
            .iter()
            .filter_map(|(id, s)| s.synced_to.map(|to| (*id, s.observer, to)))
            .collect();
        for (id, observer, synced_to) in targets {
            if observer {
                // Txns the observer got in its sync (our initial history
                // while we were not established yet) are committed now;
                // later ones it gets as INFORMs.
                if before < synced_to {
                    self.send(
                        id,
                        Message::Commit {
                            zxid: zxid.min(synced_to),
                        },
                    );
                }
                for (z, payload) in newly.iter().filter(|(z, _)| *z > synced_to) {
                    self.send(
                        id,
                        Message::Inform {
                            zxid: *z,
                            payload: payload.clone(),
                        },
                    );
                }
            } else {
                self.send(id, Message::Commit { zxid });
            }
        }
        self.answer_syncs();
    }

    /// What `leader_propose` would do now (see [`Peer::proposal_window`]);
    /// `leader_propose` decides by it, so the two cannot disagree.
    pub(crate) fn leader_window(&self) -> Result<ProposalWindow, ProposeError> {
        let l = self.leading_ref();
        if l.phase != Phase::Broadcast {
            return Err(ProposeError::NotReady);
        }
        let room = self
            .cfg
            .outstanding_proposals_max
            .saturating_sub(self.history.uncommitted_len());
        if room == 0 {
            return Err(ProposeError::Backpressure);
        }
        if l.next_counter > COUNTER_MAX {
            return Err(ProposeError::EpochExhausted);
        }
        let counters_left = (COUNTER_MAX - l.next_counter) as usize + 1;
        Ok(ProposalWindow {
            next: Zxid::new(l.epoch, l.next_counter),
            room: room.min(counters_left),
        })
    }

    pub(crate) fn leader_propose(&mut self, payload: Payload) -> Result<Zxid, ProposeError> {
        let zxid = match self.leader_window() {
            Ok(w) => w.next,
            Err(ProposeError::EpochExhausted) => {
                self.start_looking_after(None);
                return Err(ProposeError::EpochExhausted);
            }
            Err(e) => return Err(e),
        };
        self.leading().next_counter += 1;
        let sizes = &mut self.leading().proposal_sizes;
        let n = payload.len();
        sizes.min_proposal_bytes = if sizes.max_proposal_bytes == 0 {
            n
        } else {
            sizes.min_proposal_bytes.min(n)
        };
        sizes.max_proposal_bytes = sizes.max_proposal_bytes.max(n);
        sizes.last_proposal_bytes = n;
        self.history.append(zxid, payload.clone());
        self.outputs.push(Output::Persist {
            zxid,
            payload: payload.clone(),
        });
        let followers: Vec<ServerId> = self
            .leading_ref()
            .learners
            .iter()
            .filter(|(_, s)| !s.observer && s.synced_to.is_some())
            .map(|(id, _)| *id)
            .collect();
        for id in followers {
            self.send(
                id,
                Message::Proposal {
                    zxid,
                    payload: payload.clone(),
                },
            );
        }
        Ok(zxid)
    }
}
