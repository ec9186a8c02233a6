//! ZAB, deterministically: fast leader election, discovery,
//! synchronization (DIFF / TRUNC / SNAP), broadcast, heartbeats and
//! observers, as ZooKeeper Internals, "Leader Election" (leader election) and 004 (ZAB) describe them.
//!
//! The core does no I/O and reads no clock and no randomness. A [`Peer`]
//! is one member: the shell feeds it [`Input`]s with the current time, and
//! carries out the [`Output`]s it accumulates (the etcd-raft `Ready` idea).
//!
//! # Layout
//!
//! | file | owns |
//! |---|---|
//! | `quorum.rs` | `QuorumRule`: which sets of voters are a quorum (majority, groups and weights) |
//! | `types.rs` | `ServerId`, `Config`, `Restored`; `Zxid` (`epoch << 32 \| counter`) is `wazoo_proto::Zxid`, shared by every crate |
//! | `message.rs`, `codec.rs` | the messages and their versioned wire encoding |
//! | `history.rs` | the in-memory log (uncommitted tail + bounded committed log) and DIFF/TRUNC/SNAP choice |
//! | `election.rs` | fast leader election for one LOOKING member |
//! | `peer.rs` | `Peer`: inputs, outputs, dispatch, role changes |
//! | `leader.rs` (with `leader/broadcast.rs`), `learner.rs` | the two sides of discovery, sync and broadcast |
//! | `learner_master.rs` | a follower serving observers (`observerMasterPort`), and an observer's choice of that follower |
//! | `sim/` | (tests) the seeded whole-ensemble simulation |
//! | `purity.rs` | (tests) fails if a source names an I/O, clock or randomness API |
//!
//! # Driving contract
//!
//! ```text
//! let mut peer = Peer::new(config, restored_from_disk, mono_ms)?;
//! loop {
//!     peer.handle(input, mono_ms);             // or peer.propose(payload, mono_ms)
//!     for out in peer.take_outputs() { carry_out(out) }   // strictly in order
//! }
//! ```
//!
//! Outputs are carried out in the order given:
//!
//! 1. `SetAcceptedEpoch`, `SetCurrentEpoch`, `Truncate` and
//!    `InstallSnapshot` are durable before the next output is carried out
//!    (they are rare: once per election or sync).
//! 2. `Persist` appends to the txn log and may complete later (group
//!    commit): once fsynced, report `Input::Durable { zxid }` (every
//!    `Persist` up to `zxid` is on disk). The core sends an ACK only after
//!    that report: persist before acknowledging is the core's job, so a
//!    `Send` never waits for an earlier `Persist`.
//! 3. `Deliver` applies a committed txn to the state machine, in zxid
//!    order. Reply to clients only after applying. `SendSnapshot` serializes
//!    the state machine as it is at that point of the sequence (all earlier
//!    `Deliver`s applied, no later one) into `Message::Snap`.
//! 4. `Send` goes on the message's channel (`Message::channel`): election
//!    notifications on the election connection (may be lossy), everything
//!    else in FIFO order on the quorum connection with that member.
//!    `CloseLink` drops that quorum connection and what it has in flight.
//! 5. `Role` changes tell the shell when to serve: `Leading` (propose
//!    works), `Following`/`Observing` (synchronized), `Looking` (fail open
//!    proposals and syncs; read-only mode may keep serving reads).
//!    `SyncDone` completes a `sync`.
//!
//! Inputs: `Tick` at least every half `tick_ms`; `Disconnected { peer }`
//! when a quorum connection breaks by itself (not after `CloseLink`), and
//! before any message of a newer connection with that peer; messages in
//! the order they arrived on each connection.
//!
//! Observers behind followers (`Config::observer_master`, zoo.cfg
//! `observerMasterPort`): a synchronized follower serves observers the way
//! the leader does (sync from its committed history, INFORM, PING, `sync`
//! relayed to the leader), and an observer syncs from a follower it
//! chooses; `Status::leader` stays the ensemble's leader (the pipeline's
//! forwarding target) and [`Peer::learning_from`] names the follower. See
//! `learner_master.rs`.
//!
//! Persistent state: acceptedEpoch and currentEpoch (ZooKeeper's two small
//! files), the txn log and the state machine's snapshots. On restart the
//! shell passes [`Restored`]: both epochs, the snapshot's zxid (the state
//! machine restarts from that snapshot) and the durable log after it. The
//! core delivers the restored txns again only once a leader confirms them:
//! some may never have been committed.
//!
//! Proposals: `propose` works on the leader of an established epoch and
//! returns the zxid; `proposal_window` says beforehand which zxids the next
//! proposals get and how many `propose` takes in a row (a pipeline that
//! stamps the zxid into a txn before proposing it numbers from there); the txn is committed when `Deliver` for that zxid
//! comes out. Outputs of many proposals accumulate until `take_outputs`,
//! so the shell can batch a group commit and coalesce the sends to each
//! follower into one write: throughput grows with load. ACKs and COMMITs
//! are cumulative (one ACK covers every proposal durable so far).
//!
//! `sync(token)` is ZooKeeper's `sync`: `SyncDone { token }` comes out on
//! this member once every txn the leader had proposed when the request
//! reached it has been delivered here (the reply rides the leader's FIFO
//! link behind the COMMITs). As in ZooKeeper, a member still following a
//! deposed leader may answer without txns of the newer epoch.
//!
//! Adaptations of the first sketch: `propose` and `sync` are methods that
//! answer at once (not inputs); snapshot installation is a synchronous
//! output (no `SnapshotInstalled` input); connections are only reported
//! broken (`Disconnected`), never opened: a learner's first message
//! (FOLLOWERINFO) opens its session, and a member still LOOKING keeps such
//! a message until it knows whether it leads.
//!
//! # Safety notes (found by the simulation, see `sim/`)
//!
//! - currentEpoch is stored only once the history it vouches for is
//!   durable, on the leader (before it confirms its epoch) and on the
//!   learner (before ACK(NEWLEADER)). Storing it first lets a member that
//!   crashed in between win an election with a log missing committed txns.
//! - Election notifications are re-sent on a timer whatever arrives: with
//!   lossy notifications, hearing from one member must not stop us
//!   re-sending to one that missed our vote.
//! - Once established, members answer LOOKING voters with the vote
//!   `(leader, epoch:0, epoch)`, the same for every member of the epoch
//!   whichever election brought them in; otherwise a member that restarts
//!   may never see a quorum of equal votes and never join.
//!
//! # Guarantees checked by the simulation
//!
//! Integrity (only proposed txns are delivered), total order and agreement
//! (every member's delivered sequence is a prefix of one sequence), primary
//! order (an epoch's txns are delivered in the order its leader proposed
//! them, without gaps), at most one established leader per epoch, `sync`,
//! and a client oracle: every txn whose commit was reported to the proposer
//! is on every member once the network heals. The simulation lives in the
//! `wazoo-sim` crate (`zab_ensemble`), on the network and seeded generator
//! of its whole-member simulation: `WAZOO_ZAB_SIM_SEED=<n> cargo test -p
//! wazoo-sim --lib zab_ensemble` replays a seed, `WAZOO_ZAB_SIM_SEEDS=<count>`
//! runs more (default 300), `WAZOO_ZAB_SIM_TRACE=1` prints every input and
//! output.

#![forbid(unsafe_code)]

mod codec;
mod election;
mod history;
mod leader;
mod learner;
mod learner_master;
mod message;
mod peer;
mod quorum;
mod types;

#[cfg(test)]
mod peer_tests;
#[cfg(test)]
mod purity;

pub use codec::{DecodeError, WIRE_VERSION};
pub use election::Vote;
pub use history::{SyncKind, SyncPlan};
pub use message::{Channel, Message, Notification};
pub use peer::{
    Input, LeaderReport, Output, Peer, ProposalWindow, ProposeError, RoleChange, Stats, Status,
};
pub use quorum::{Hierarchy, QuorumRule};
pub use types::{
    Config, Payload, Restored, ServerId, ServerState, Zxid, OBSERVER_MASTER_LINKS_MAX_DEFAULT,
    SUSPECT_MS_MAX_DEFAULT,
};
