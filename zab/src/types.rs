//! The small vocabulary every other ZAB file uses: server ids, zxids,
//! payloads, server states, the configuration and the durable state a
//! member restarts from.

use std::sync::Arc;

use super::quorum::QuorumRule;

/// A member's `myid` (the N of `server.N=` in zoo.cfg).
pub type ServerId = u64;

/// An opaque txn body. Shared because one proposal goes to the local log,
/// to every follower and to the state machine.
pub type Payload = Arc<[u8]>;

/// The transaction id, shared with every other crate (`wazoo_proto::Zxid`).
pub use wazoo_proto::Zxid;

/// The four server states of ZooKeeper Internals, "Leader Election", as carried in notifications and
/// reported by `mntr`/`srvr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ServerState {
    Looking,
    Following,
    Leading,
    Observing,
}

impl ServerState {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Looking => "looking",
            ServerState::Following => "follower",
            ServerState::Leading => "leader",
            ServerState::Observing => "observer",
        }
    }
}

/// The default cap on [`Config::suspect_ms`]: with ZooKeeper's default
/// tickTime (2000) and syncLimit (5), a follower suspects a silent leader
/// after 750 ms instead of 10 s, and a new leader serves within about a
/// second of a silent failure.
pub const SUSPECT_MS_MAX_DEFAULT: u64 = 750;

/// The most two members' monotonic clocks may run apart, in parts per
/// million of real time, each way (the lease assumes it; quartz is within
/// 100 ppm, and this leaves room for VMs that slew).
pub const CLOCK_DRIFT_MAX_PPM: u64 = 50_000;

/// Static configuration of one member. Times are in milliseconds, limits in
/// ticks, as in zoo.cfg (`tickTime`, `initLimit`, `syncLimit`).
/// Default of [`Config::observer_master_links_max`].
pub const OBSERVER_MASTER_LINKS_MAX_DEFAULT: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub my_id: ServerId,
    /// Participants: they vote in elections and their acks count.
    pub voters: Vec<ServerId>,
    /// Observers replicate committed txns and never vote or ack.
    pub observers: Vec<ServerId>,
    /// Which sets of voters are a quorum: a majority, or zoo.cfg's groups
    /// and weights.
    pub quorum: QuorumRule,
    /// zoo.cfg `tickTime`. The leader pings every half tick.
    pub tick_ms: u64,
    /// zoo.cfg `initLimit`: ticks a leader has to establish its epoch, and a
    /// learner has to finish discovery and synchronization.
    pub init_limit_ticks: u64,
    /// zoo.cfg `syncLimit`: ticks without hearing from a follower after
    /// which a leader counts it as gone. A follower suspects its leader
    /// sooner, after [`Config::suspect_ms`].
    pub sync_limit_ticks: u64,
    /// Cap on [`Config::suspect_ms`], the silence after which a follower
    /// abandons its leader (ZooKeeper waits the whole syncLimit x tickTime,
    /// 10 s by default). `u64::MAX` gives ZooKeeper's timing.
    pub suspect_ms_max: u64,
    /// How long a member that sees a quorum for its vote waits for a better
    /// notification before deciding (ZooKeeper's `finalizeWait`, 200 ms).
    pub finalize_wait_ms: u64,
    /// First notification resend interval while LOOKING; doubles when
    /// nothing arrives, up to the max (ZooKeeper: 200 ms and 60 s).
    pub notification_interval_ms_min: u64,
    pub notification_interval_ms_max: u64,
    /// How many committed txns the core keeps in memory for DIFFs (the
    /// leader's `committedLog`, ZooKeeper's default is 500). A learner
    /// further behind gets a SNAP.
    pub committed_log_max: usize,
    /// Bound on proposals the leader has not committed yet; `propose` is
    /// refused beyond it (backpressure, not an error of the protocol).
    pub outstanding_proposals_max: usize,
    /// zoo.cfg `observerMasterPort` is set (Administrator's Guide, "Cluster
    /// Options"): a synchronized follower serves observers as their learner
    /// master (sync from its committed history, INFORM of its commits,
    /// PINGs, `sync`s relayed to the leader), and an observer syncs from a
    /// follower instead of the leader.
    pub observer_master: bool,
    /// Bound on the observers one follower serves at once; more are
    /// refused (their link closed) and try another follower.
    pub observer_master_links_max: usize,
}

impl Config {
    /// A configuration with ZooKeeper's default timings.
    pub fn new(my_id: ServerId, voters: Vec<ServerId>, observers: Vec<ServerId>) -> Config {
        Config {
            my_id,
            voters,
            observers,
            quorum: QuorumRule::Majority,
            tick_ms: 2000,
            init_limit_ticks: 10,
            sync_limit_ticks: 5,
            suspect_ms_max: SUSPECT_MS_MAX_DEFAULT,
            finalize_wait_ms: 200,
            notification_interval_ms_min: 200,
            notification_interval_ms_max: 60_000,
            committed_log_max: 500,
            outstanding_proposals_max: 10_000,
            observer_master: false,
            observer_master_links_max: OBSERVER_MASTER_LINKS_MAX_DEFAULT,
        }
    }

    /// How long a follower hears nothing from its leader before it
    /// abandons it: syncLimit x tickTime, at most `suspect_ms_max`. It is
    /// also the follower's promise to its leader: a voter acknowledges no
    /// other leader's epoch (ACKEPOCH) until this long after it last heard
    /// from the leader it followed, however it left it.
    pub fn suspect_ms(&self) -> u64 {
        self.sync_limit_ticks
            .saturating_mul(self.tick_ms)
            .min(self.suspect_ms_max)
            .max(1)
    }

    /// The leader's lease: an established leader serves (takes proposals,
    /// answers syncs) only while a quorum of voters (itself included)
    /// answered a heartbeat sent less than this long ago, by its own
    /// clock. Shorter than the followers' promise by the clock drift two
    /// members may have between them (`CLOCK_DRIFT_MAX_PPM` each way), so
    /// the lease ends, in real time, before any follower of that quorum may
    /// help a new leader in: see docs/ARCHITECTURE.md, "Timing model".
    pub fn lease_ms(&self) -> u64 {
        let s = u128::from(self.suspect_ms());
        let d = u128::from(CLOCK_DRIFT_MAX_PPM);
        (s * (1_000_000 - d) / (1_000_000 + d)) as u64
    }

    /// How often the leader pings its learners: half a tick, at most an
    /// eighth of the lease (so a lease survives a few slow rounds). The
    /// shell's `Tick` must come at least this often.
    pub fn heartbeat_ms(&self) -> u64 {
        (self.tick_ms / 2).min(self.lease_ms() / 8).max(1)
    }

    pub fn is_voter(&self, id: ServerId) -> bool {
        self.voters.contains(&id)
    }

    pub fn is_observer(&self, id: ServerId) -> bool {
        self.observers.contains(&id)
    }

    /// Whether the voters among `ids` are a quorum (ZooKeeper's
    /// `containsQuorum`).
    pub fn contains_quorum(&self, ids: &[ServerId]) -> bool {
        self.quorum.contains_quorum(&self.voters, ids)
    }

    /// Whether this member alone is a quorum (a one-voter ensemble, or a
    /// hierarchy in which the others weigh nothing).
    pub fn alone_is_quorum(&self) -> bool {
        self.contains_quorum(&[self.my_id])
    }

    /// A voter's weight: zero keeps it out of every decision (it is never
    /// elected, its votes and acks count for nothing).
    pub fn weight(&self, id: ServerId) -> u64 {
        self.quorum.weight(id)
    }

    /// Every member but this one, voters first, in id order.
    pub fn others(&self) -> impl Iterator<Item = ServerId> + '_ {
        let me = self.my_id;
        self.voters
            .iter()
            .chain(self.observers.iter())
            .copied()
            .filter(move |&id| id != me)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.voters.is_empty() {
            return Err("no voting members".into());
        }
        let mut all: Vec<ServerId> = self.voters.iter().chain(&self.observers).copied().collect();
        all.sort_unstable();
        if all.windows(2).any(|w| w[0] == w[1]) {
            return Err("a server id is listed twice".into());
        }
        if !all.contains(&self.my_id) {
            return Err(format!("my id {} is not a member", self.my_id));
        }
        if self.tick_ms == 0 || self.init_limit_ticks == 0 || self.sync_limit_ticks == 0 {
            return Err("tickTime, initLimit and syncLimit must be positive".into());
        }
        if self.notification_interval_ms_min == 0
            || self.notification_interval_ms_max < self.notification_interval_ms_min
        {
            return Err("bad notification intervals".into());
        }
        if self.committed_log_max == 0 || self.outstanding_proposals_max == 0 {
            return Err("committed_log_max and outstanding_proposals_max must be positive".into());
        }
        if self.observer_master && self.observer_master_links_max == 0 {
            return Err("observer_master_links_max must be positive".into());
        }
        Ok(())
    }
}

/// What a member restarts from: exactly what the shell keeps on disk.
///
/// - `accepted_epoch` and `current_epoch` are ZooKeeper's `acceptedEpoch`
///   and `currentEpoch` files (written on `SetAcceptedEpoch` /
///   `SetCurrentEpoch`).
/// - `snapshot_zxid` is the last txn the state machine's snapshot contains
///   (zero without a snapshot); the state machine restarts from that
///   snapshot and nothing else.
/// - `log` is every txn of the durable log after `snapshot_zxid`, in zxid
///   order. These may include txns that were never committed; the core
///   delivers them only once a leader confirms them (or truncates them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    pub accepted_epoch: u32,
    pub current_epoch: u32,
    pub snapshot_zxid: Zxid,
    pub log: Vec<(Zxid, Payload)>,
}

impl Restored {
    /// A member with empty storage.
    pub fn empty() -> Restored {
        Restored::default()
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.current_epoch > self.accepted_epoch {
            return Err(format!(
                "currentEpoch {} is newer than acceptedEpoch {}",
                self.current_epoch, self.accepted_epoch
            ));
        }
        let mut previous = self.snapshot_zxid;
        for (zxid, _) in &self.log {
            if *zxid <= previous || zxid.counter() == 0 {
                return Err(format!(
                    "log not strictly ascending at {zxid:?} after {previous:?}"
                ));
            }
            previous = *zxid;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_checks() {
        let c = Config::new(1, vec![1, 2, 3], vec![4]);
        assert_eq!(c.validate(), Ok(()));
        assert!(c.contains_quorum(&[1, 3]));
        assert!(!c.contains_quorum(&[1, 4]), "an observer does not count");
        assert_eq!(c.others().collect::<Vec<_>>(), vec![2, 3, 4]);
        assert!(Config::new(9, vec![1, 2, 3], vec![]).validate().is_err());
        assert!(Config::new(1, vec![1, 2], vec![2]).validate().is_err());
    }
}
