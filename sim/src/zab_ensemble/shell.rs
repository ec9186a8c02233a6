//! The simulated shell: it starts and crashes members, feeds them inputs
//! and carries out their outputs in order against a simulated disk
//! (epochs, log with an unsynced tail, snapshot) and the simulated network.

use super::{Event, Sim};
use wazoo_zab::{
    Channel, Input, Message, Output, Payload, Peer, RoleChange, ServerId, ServerState, Zxid,
};

impl Sim {
    pub(super) fn start_member(&mut self, id: ServerId) {
        let m = self.members.get_mut(&id).expect("member");
        m.incarnation += 1;
        let restored = m.storage.restored();
        assert!(
            m.applied.len() >= m.storage.snapshot_len,
            "member {id}: applied sequence shorter than its snapshot"
        );
        m.applied.truncate(m.storage.snapshot_len);
        let peer =
            Peer::new(m.cfg.clone(), restored, self.now_ms).expect("valid config and storage");
        m.peer = Some(peer);
        self.log(format!(
            "start {id} (incarnation {})",
            self.members[&id].incarnation
        ));
        self.carry_out(id);
    }

    pub(super) fn crash(&mut self, id: ServerId) {
        let now_ms = self.now_ms;
        let m = self.members.get_mut(&id).expect("member");
        let Some(peer) = m.peer.take() else { return };
        self.summary.unexpected += peer.stats().unexpected_messages;
        if let (None, Some(what)) = (
            &self.summary.unexpected_example,
            &peer.stats().last_unexpected,
        ) {
            self.summary.unexpected_example = Some((self.seed, format!("member {id}: {what}")));
        }
        self.summary.elections += peer.stats().elections;
        self.summary.epochs += peer.stats().epochs_established;
        self.summary.diffs += peer.stats().syncs_diff;
        self.summary.truncs += peer.stats().syncs_trunc;
        self.summary.snaps += peer.stats().syncs_snap;
        self.summary.lost_quorum += peer.stats().leader_lost_quorum;
        self.summary.leases_expired += peer.stats().leases_expired;
        self.summary.later_epoch_step_downs += peer.stats().stepped_down_for_later_epoch;
        // The unsynced tail of the log is lost; it must be a tail.
        let kept = m.storage.log.iter().take_while(|e| e.3).count();
        assert!(
            m.storage.log[kept..].iter().all(|e| !e.3),
            "member {id}: durable entries after a lost one"
        );
        m.storage.log.truncate(kept);
        m.applied.truncate(m.storage.snapshot_len);
        m.fsync_in_flight = false;
        self.checker.open_syncs.retain(|k, _| k.0 != id);
        self.summary.crashes += 1;
        let others: Vec<ServerId> = self.members.keys().copied().filter(|&o| o != id).collect();
        for other in others {
            let delay = self.rng.range(1, 20);
            self.net.reset(id, other, [false, true], now_ms + delay);
        }
        self.net.crash(id, now_ms);
        self.log(format!("crash {id}; log keeps {kept} durable txns"));
    }

    pub(super) fn input(&mut self, id: ServerId, input: Input) {
        let now_ms = self.now_ms;
        let Some(peer) = self.members.get_mut(&id).and_then(|m| m.peer.as_mut()) else {
            return;
        };
        if self.trace && !matches!(input, Input::Tick) {
            eprintln!("[{now_ms:>6}ms] {id} <- {input:?}");
        }
        peer.handle(input, now_ms);
        self.carry_out(id);
    }

    /// The shell: carries out a member's outputs in order.
    pub(super) fn carry_out(&mut self, id: ServerId) {
        let outputs = match self.members.get_mut(&id).and_then(|m| m.peer.as_mut()) {
            Some(peer) => peer.take_outputs(),
            None => return,
        };
        for out in outputs {
            if self.trace {
                eprintln!("[{:>6}ms] {id} -> {out:?}", self.now_ms);
            }
            self.carry_out_one(id, out);
        }
        let m = &self.members[&id];
        if let Some(peer) = &m.peer {
            peer.validate();
            let stats = peer.stats();
            assert_eq!(
                stats.protocol_violations, 0,
                "protocol violation: {:?}",
                stats.last_violation
            );
            // The simulated shell keeps the contract exactly, so no message
            // can arrive outside its session.
            assert_eq!(
                stats.unexpected_messages, 0,
                "unexpected message: {:?}",
                stats.last_unexpected
            );
            let status = peer.status();
            let applied_last = m.applied.last().map_or(Zxid::ZERO, |e| e.0);
            assert_eq!(
                status.committed_zxid, applied_last,
                "member {id}: core and state machine disagree"
            );
            assert!(
                status.accepted_epoch == m.storage.accepted_epoch
                    && status.current_epoch == m.storage.current_epoch,
                "member {id}: epochs in memory and on disk differ"
            );
        }
    }

    fn carry_out_one(&mut self, id: ServerId, out: Output) {
        let now_ms = self.now_ms;
        match out {
            Output::Send { to, msg } => self.send(id, to, msg),
            Output::SendSnapshot { to, zxid } => {
                let applied = &self.members[&id].applied;
                let at = applied.last().map_or(Zxid::ZERO, |e| e.0);
                assert_eq!(
                    at, zxid,
                    "member {id}: snapshot asked at {zxid:?}, state machine at {at:?}"
                );
                let data = encode_snapshot(applied);
                self.send(id, to, Message::Snap { zxid, data });
            }
            Output::CloseLink { peer } => {
                let delay = self.rng.range(1, 20);
                self.net.reset(id, peer, [false, true], now_ms + delay);
            }
            Output::SetAcceptedEpoch { epoch } => {
                let s = &mut self.members.get_mut(&id).expect("member").storage;
                assert!(
                    epoch > s.accepted_epoch,
                    "member {id}: acceptedEpoch {epoch} not after {}",
                    s.accepted_epoch
                );
                s.accepted_epoch = epoch;
            }
            Output::SetCurrentEpoch { epoch } => {
                let s = &mut self.members.get_mut(&id).expect("member").storage;
                assert!(
                    epoch > s.current_epoch && epoch <= s.accepted_epoch,
                    "member {id}: currentEpoch {epoch}"
                );
                s.current_epoch = epoch;
            }
            Output::Persist { zxid, payload } => {
                self.checker.check_integrity(zxid, &payload, "logged");
                let m = self.members.get_mut(&id).expect("member");
                let last = m
                    .storage
                    .log
                    .last()
                    .map_or(m.storage.snapshot_zxid, |e| e.0);
                assert!(
                    zxid > last,
                    "member {id}: log append {zxid:?} after {last:?}"
                );
                m.storage.appended += 1;
                let seq = m.storage.appended;
                m.storage.log.push((zxid, payload, seq, false));
                self.start_fsync(id);
            }
            Output::Truncate { after } => {
                let m = self.members.get_mut(&id).expect("member");
                let applied = m.applied.last().map_or(Zxid::ZERO, |e| e.0);
                assert!(
                    after >= applied,
                    "member {id}: truncating to {after:?} undoes applied {applied:?}"
                );
                m.storage.log.retain(|e| e.0 <= after);
            }
            Output::InstallSnapshot { zxid, data } => {
                let list = decode_snapshot(&data);
                assert_eq!(
                    list.last().map_or(Zxid::ZERO, |e| e.0),
                    zxid,
                    "snapshot zxid"
                );
                for (i, (z, p)) in list.iter().enumerate() {
                    self.checker.check_position(i, *z, p);
                }
                let m = self.members.get_mut(&id).expect("member");
                assert!(
                    m.applied.len() <= list.len(),
                    "member {id}: a snapshot that goes back in time"
                );
                m.storage.snapshot_len = list.len();
                m.storage.snapshot_zxid = zxid;
                m.applied = list;
                m.storage.log.clear();
            }
            Output::Deliver { zxid, payload } => {
                let m = self.members.get_mut(&id).expect("member");
                let index = m.applied.len();
                let incarnation = m.incarnation;
                m.applied.push((zxid, payload.clone()));
                m.deliveries_to_snapshot = m.deliveries_to_snapshot.saturating_sub(1);
                let snapshot_now = m.deliveries_to_snapshot == 0;
                self.checker.check_position(index, zxid, &payload);
                if let Some(waiting) = self.checker.waiting.get_mut(&(id, incarnation)) {
                    if waiting.remove(&zxid) {
                        self.checker.acknowledged.insert(zxid, now_ms);
                    }
                }
                if snapshot_now {
                    self.take_snapshot(id);
                }
            }
            Output::SyncDone { token } => {
                let m = &self.members[&id];
                let status = m.peer.as_ref().expect("live").status();
                let epoch = status.current_epoch;
                if status.state == ServerState::Leading {
                    self.checker
                        .on_leader_served(epoch, id, now_ms, "answered a sync");
                }
                let applied_last = m.applied.last().map_or(Zxid::ZERO, |e| e.0);
                self.checker
                    .on_sync_done((id, m.incarnation, token), epoch, applied_last);
                self.summary.syncs += 1;
            }
            Output::Role(change) => {
                self.log(format!("{id} role {change:?}"));
                match change {
                    RoleChange::Leading { epoch } => {
                        // Administrator's Guide, "Cluster Options"
                        // (`weight.x`): a member of weight zero is never
                        // elected.
                        assert!(
                            self.params.quorum.weight(id) > 0,
                            "member {id} of weight zero leads epoch {epoch}"
                        );
                        self.checker.on_established(epoch, id, now_ms)
                    }
                    RoleChange::Looking => {
                        // Open syncs fail with the session.
                        self.checker.open_syncs.retain(|k, _| k.0 != id);
                    }
                    _ => {}
                }
            }
        }
    }

    /// The shell's periodic snapshot: store the state machine, purge the
    /// log it covers.
    fn take_snapshot(&mut self, id: ServerId) {
        let next = self.draw(self.params.snapshot_every);
        let m = self.members.get_mut(&id).expect("member");
        m.deliveries_to_snapshot = next;
        m.storage.snapshot_len = m.applied.len();
        let at = m.applied.last().map_or(Zxid::ZERO, |e| e.0);
        m.storage.snapshot_zxid = at;
        m.storage.log.retain(|e| e.0 > at);
    }

    pub(super) fn start_fsync(&mut self, id: ServerId) {
        let latency = self.draw(self.params.fsync_ms);
        let m = self.members.get_mut(&id).expect("member");
        if m.fsync_in_flight || m.storage.log.iter().all(|e| e.3) {
            return;
        }
        m.fsync_in_flight = true;
        let (incarnation, upto) = (m.incarnation, m.storage.appended);
        self.schedule(
            latency,
            Event::FsyncDone {
                id,
                incarnation,
                upto,
            },
        );
    }

    fn send(&mut self, from: ServerId, to: ServerId, msg: Message) {
        let bytes = msg.to_bytes();
        match msg.channel() {
            Channel::Election => {
                if self.chaos && self.rng.chance(self.params.election_drop_per_mille) {
                    return;
                }
                let copies = if self.chaos && self.rng.chance(self.params.election_dup_per_mille) {
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    let at = self.now_ms + self.rng.range(1, 30);
                    self.net.send_datagram(from, to, bytes.clone(), at);
                }
            }
            Channel::Quorum => {
                let delay = self.draw(self.params.quorum_delay_ms);
                self.net
                    .send_quorum(from, to, false, bytes, self.now_ms + delay);
            }
        }
    }
}

fn encode_snapshot(applied: &[(Zxid, Payload)]) -> Payload {
    let mut out = Vec::new();
    for (zxid, payload) in applied {
        out.extend_from_slice(&zxid.0.to_be_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(payload);
    }
    Payload::from(out)
}

fn decode_snapshot(mut data: &[u8]) -> Vec<(Zxid, Payload)> {
    let mut list = Vec::new();
    while !data.is_empty() {
        let zxid = Zxid(u64::from_be_bytes(data[..8].try_into().expect("8 bytes")));
        let len = u32::from_be_bytes(data[8..12].try_into().expect("4 bytes")) as usize;
        list.push((zxid, Payload::from(&data[12..12 + len])));
        data = &data[12 + len..];
    }
    list
}
