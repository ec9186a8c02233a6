//! One whole member as the simulation drives it: the core's
//! [`wazoo_core::member::Member`] (ZAB's `Peer` joined to the pipeline
//! `Server`, one deterministic machine), started from a simulated disk as
//! the shell starts it from a real one, with its journal of what it
//! applied turned on for the checkers ([`Member::take_applied`]).
//!
//! The world ([`crate::world`]) feeds it the core's inputs and carries out
//! its one ordered output list against the simulated disk and network, as
//! the shell's driver (`host/src/driver.rs`) does against real I/O. Nothing
//! here joins consensus and the pipeline: that is the core's, and the
//! simulation tests exactly the join the binary runs.

use wazoo_core::member::{self as core_member, Input, LoadedSnapshot, Output, SnapshotCodec};
use wazoo_core::recipe::RecipeEngine;
use wazoo_core::server::{Server, ServerConfig, SnapshotJob};
use wazoo_core::time::Now;
use wazoo_zab::{self as zab, Payload, Peer, Zxid};

pub use wazoo_core::member::Applied;

/// Everything that configures one member.
#[derive(Clone, Debug)]
pub struct MemberConfig {
    pub zab: zab::Config,
    pub server: ServerConfig,
}

/// What recovery reads from the member's disk.
pub struct Stored<'a> {
    pub accepted_epoch: u32,
    pub current_epoch: u32,
    /// The newest snapshot's payload (storage's envelope, the core's body).
    pub snapshot: Option<&'a [u8]>,
    /// The durable log after the snapshot.
    pub log: Vec<(Zxid, Payload)>,
}

/// Encodes a snapshot payload as the shell does: storage's envelope
/// (zxid, sessions), then the core's body (waits, tree).
pub fn encode_snapshot(job: &SnapshotJob) -> Vec<u8> {
    let mut data = Vec::new();
    wazoo_storage::write_snapshot_envelope(job.zxid, &job.sessions, &mut data)
        .expect("writing to a Vec");
    wazoo_core::snapshot::write_snapshot_body(job, &mut data).expect("writing to a Vec");
    data
}

/// Decodes a payload written by [`encode_snapshot`].
pub fn decode_snapshot(bytes: &[u8]) -> Result<LoadedSnapshot, String> {
    let env = wazoo_storage::read_snapshot_envelope(bytes).map_err(|e| e.to_string())?;
    let (waits, tree) = wazoo_core::snapshot::read_snapshot_body(env.version, env.body)
        .map_err(|e| e.to_string())?;
    Ok(LoadedSnapshot {
        zxid: env.zxid,
        sessions: env.sessions,
        waits,
        tree,
    })
}

/// The shell's snapshot format, for the snapshots members send each other.
struct Codec;

impl SnapshotCodec for Codec {
    fn encode(&self, job: &SnapshotJob) -> Vec<u8> {
        encode_snapshot(job)
    }

    fn decode(&self, bytes: &[u8]) -> Result<LoadedSnapshot, String> {
        decode_snapshot(bytes)
    }
}

/// The core's member, always an ensemble member, journaling what it applies.
pub struct Member {
    inner: core_member::Member,
}

impl Member {
    /// Starts a member from its disk, as the shell's `start` does: the
    /// pipeline loads the newest snapshot only; the log after it goes to
    /// consensus, which delivers those txns again once a leader confirms
    /// them.
    pub fn recover(
        cfg: &MemberConfig,
        stored: Stored<'_>,
        engine: Box<dyn RecipeEngine>,
        now: Now,
    ) -> Result<Member, String> {
        let (mut server, snapshot_zxid) = match stored.snapshot {
            Some(bytes) => {
                let s = decode_snapshot(bytes)?;
                let server =
                    Server::recovered(cfg.server.clone(), s.tree, s.sessions, s.waits, s.zxid, now);
                (server, s.zxid)
            }
            None => (Server::new(cfg.server.clone(), now), Zxid::ZERO),
        };
        server.set_recipe_engine(engine);
        let restored = zab::Restored {
            accepted_epoch: stored.accepted_epoch,
            current_epoch: stored.current_epoch,
            snapshot_zxid,
            log: stored.log,
        };
        restored.validate()?;
        let peer = Peer::new(cfg.zab.clone(), restored, mono(now))?;
        let mut inner = core_member::Member::new(server, peer, Box::new(Codec), now);
        // The journal starts after construction: the checkers take the
        // member to be at its snapshot, so nothing may have been applied.
        if inner.server().last_zxid() != snapshot_zxid {
            return Err(format!(
                "applied up to {} while starting from the snapshot at {snapshot_zxid}",
                inner.server().last_zxid()
            ));
        }
        inner.observe_applied();
        Ok(Member { inner })
    }

    /// Handles one input. An error means the member must stop: the shell
    /// stops it before carrying out what it output for that input.
    pub fn handle(&mut self, input: Input, now: Now) -> Result<(), String> {
        self.inner.handle(input, now);
        match self.inner.fatal() {
            Some(why) => Err(format!("stopping: {why}")),
            None => Ok(()),
        }
    }

    /// What to carry out, strictly in order (the core's driving contract).
    pub fn take_outputs(&mut self) -> Vec<Output> {
        self.inner.take_outputs()
    }

    /// What was applied since the last call, for the checkers.
    pub fn take_applied(&mut self) -> Vec<Applied> {
        self.inner.take_applied()
    }

    pub fn server(&self) -> &Server {
        self.inner.server()
    }

    /// Recipe steps go to the world (a simulated worker pool) instead of
    /// running in prep, as the shell runs them with `recipe.workers`.
    pub fn offload_recipe_steps(&mut self) {
        self.inner.server_mut().set_recipe_offload(true);
    }

    pub fn peer(&self) -> &Peer {
        self.inner
            .peer()
            .expect("a simulated member is an ensemble member")
    }
}

/// Consensus reads the monotonic clock as unsigned milliseconds (as the
/// core's member does).
fn mono(now: Now) -> u64 {
    now.mono_ms.max(0) as u64
}
