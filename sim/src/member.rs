//! THE ADAPTER TO REPLACE: one whole member (the ZAB [`Peer`] joined to
//! the pipeline [`Server`]) behind the narrow interface the simulation
//! drives: [`Member::recover`], [`Member::handle`], [`Member::take_outputs`]
//! (one ordered list of I/O for the shell), plus [`Member::take_applied`]
//! so the checkers can see what the member applied.
//!
//! It mirrors the shell's join today (`EnsembleCore` in the `wazoo`
//! binary: `run_inner`, `carry_out`, `peer_output`, `server_output`)
//! without sockets, files or a clock, including its order of carrying
//! out (each round takes both machines' outputs, then runs the peer's,
//! then the server's). When the core gains its own member state machine
//! (`wazoo_core::member::Member`), this file becomes a thin wrapper around
//! it (or goes away); nothing else in the simulation names `Peer` or
//! `Server` methods that drive them.

use wazoo_core::recipe::RecipeEngine;
use wazoo_core::server::{Input, Output, PeerMsg, Role, Server, ServerConfig};
use wazoo_core::time::Now;
use wazoo_core::watch::ConnId;
use wazoo_zab::{self as zab, Message, Payload, Peer, RoleChange, ServerId, Zxid};

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

/// An event for the member.
#[derive(Debug)]
pub enum In {
    Tick,
    /// The log is durable up to `zxid`.
    Durable {
        zxid: Zxid,
    },
    /// A client event for the pipeline (connect, request, closed, written).
    Client(Input),
    /// A ZAB message from another member.
    Zab {
        from: ServerId,
        msg: Message,
    },
    /// The quorum link with `peer` broke by itself.
    LinkDown {
        peer: ServerId,
    },
    /// A pipeline message from another member (encoded `PeerMsg`).
    App {
        from: ServerId,
        bytes: Vec<u8>,
    },
}

/// I/O for the shell, in the order it must be carried out. Epochs,
/// truncation and an installed snapshot are durable before the next one.
#[derive(Debug)]
pub enum Io {
    Zab {
        to: ServerId,
        msg: Message,
    },
    App {
        to: ServerId,
        bytes: Vec<u8>,
    },
    CloseLink {
        peer: ServerId,
    },
    SetAcceptedEpoch {
        epoch: u32,
    },
    SetCurrentEpoch {
        epoch: u32,
    },
    Persist {
        zxid: Zxid,
        payload: Payload,
    },
    Truncate {
        after: Zxid,
    },
    /// Store the leader's snapshot durably and drop the whole log.
    InstallSnapshot {
        zxid: Zxid,
        data: Vec<u8>,
    },
    /// Write a snapshot in the background (it counts once written).
    WriteSnapshot {
        zxid: Zxid,
        data: Vec<u8>,
    },
    ClientSend {
        conn: ConnId,
        bytes: Vec<u8>,
    },
    ClientClose {
        conn: ConnId,
    },
}

/// What the member applied, for the checkers.
#[derive(Debug, Clone)]
pub enum Applied {
    Txn {
        zxid: Zxid,
        record: Payload,
    },
    /// The state was replaced by the leader's snapshot at `zxid`.
    Snapshot {
        zxid: Zxid,
    },
}

pub struct Member {
    peer: Peer,
    server: Server,
    /// Who this member follows (where `ToLeader` goes).
    leader: Option<ServerId>,
    out: Vec<Io>,
    applied: Vec<Applied>,
    now: Now,
}

/// Encodes a snapshot payload as the shell does: storage's envelope
/// (zxid, sessions), then the core's body (waits, tree).
pub fn encode_snapshot(job: &wazoo_core::server::SnapshotJob) -> Vec<u8> {
    let mut data = Vec::new();
    wazoo_storage::write_snapshot_envelope(job.zxid, &job.sessions, &mut data)
        .expect("writing to a Vec");
    wazoo_core::snapshot::write_snapshot_body(job, &mut data).expect("writing to a Vec");
    data
}

type Loaded = (
    i64,
    Vec<(i64, i32)>,
    wazoo_core::recipe::RecipeWaits,
    wazoo_core::tree::DataTree,
);

/// Decodes a payload written by [`encode_snapshot`].
pub fn decode_snapshot(bytes: &[u8]) -> Result<Loaded, String> {
    let env = wazoo_storage::read_snapshot_envelope(bytes).map_err(|e| e.to_string())?;
    let (waits, tree) = wazoo_core::snapshot::read_snapshot_body(env.version, env.body)
        .map_err(|e| e.to_string())?;
    Ok((env.zxid, env.sessions, waits, tree))
}

impl Member {
    /// Starts a member from its disk, as the shell's `start` does: the
    /// pipeline loads the newest snapshot only; the log after it goes to
    /// the peer, which delivers those txns again once a leader confirms them.
    pub fn recover(
        cfg: &MemberConfig,
        stored: Stored<'_>,
        engine: Box<dyn RecipeEngine>,
        now: Now,
    ) -> Result<Member, String> {
        let (mut server, snap_zxid) = match stored.snapshot {
            Some(bytes) => {
                let (z, sessions, waits, tree) = decode_snapshot(bytes)?;
                (
                    Server::recovered(cfg.server.clone(), tree, sessions, waits, z, now),
                    z as u64,
                )
            }
            None => (Server::new(cfg.server.clone(), now), 0),
        };
        server.set_ensemble();
        server.set_recipe_engine(engine);
        let restored = zab::Restored {
            accepted_epoch: stored.accepted_epoch,
            current_epoch: stored.current_epoch,
            snapshot_zxid: Zxid(snap_zxid),
            log: stored.log,
        };
        restored.validate()?;
        let peer = Peer::new(cfg.zab.clone(), restored, now.mono_ms as u64)?;
        let mut m = Member {
            peer,
            server,
            leader: None,
            out: Vec::new(),
            applied: Vec::new(),
            now,
        };
        m.carry_out()?;
        Ok(m)
    }

    /// Handles one event and carries out both machines' outputs until
    /// neither has any left. An error means the member must stop.
    pub fn handle(&mut self, input: In, now: Now) -> Result<(), String> {
        self.now = now;
        let mono = now.mono_ms as u64;
        match input {
            In::Tick => {
                self.peer.handle(zab::Input::Tick, mono);
                self.server.handle(Input::Tick, now);
            }
            In::Durable { zxid } => self.peer.handle(zab::Input::Durable { zxid }, mono),
            In::Client(input) => self.server.handle(input, now),
            In::Zab { from, msg } => self.peer.handle(zab::Input::Message { from, msg }, mono),
            In::LinkDown { peer } => self.peer.handle(zab::Input::Disconnected { peer }, mono),
            In::App { from, bytes } => match PeerMsg::decode(&bytes) {
                Ok(msg) => self.server.handle(Input::Peer { from, msg }, now),
                Err(e) => return Err(format!("undecodable pipeline message from {from}: {e}")),
            },
        }
        self.carry_out()?;
        match self.server.fatal() {
            Some(why) => Err(format!("stopping: {why}")),
            None => Ok(()),
        }
    }

    pub fn take_outputs(&mut self) -> Vec<Io> {
        std::mem::take(&mut self.out)
    }

    pub fn take_applied(&mut self) -> Vec<Applied> {
        std::mem::take(&mut self.applied)
    }

    pub fn server(&self) -> &Server {
        &self.server
    }

    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    fn carry_out(&mut self) -> Result<(), String> {
        for _round in 0..1_000_000 {
            let peer_out = self.peer.take_outputs();
            let server_out = self.server.take_outputs();
            if peer_out.is_empty() && server_out.is_empty() {
                return Ok(());
            }
            for out in peer_out {
                self.peer_output(out)?;
            }
            for out in server_out {
                self.server_output(out)?;
            }
        }
        Err("outputs did not settle (a feedback loop between consensus and the pipeline)".into())
    }

    fn peer_output(&mut self, out: zab::Output) -> Result<(), String> {
        let now = self.now;
        match out {
            zab::Output::Send { to, msg } => self.out.push(Io::Zab { to, msg }),
            zab::Output::CloseLink { peer } => self.out.push(Io::CloseLink { peer }),
            zab::Output::SetAcceptedEpoch { epoch } => {
                self.out.push(Io::SetAcceptedEpoch { epoch })
            }
            zab::Output::SetCurrentEpoch { epoch } => self.out.push(Io::SetCurrentEpoch { epoch }),
            zab::Output::Persist { zxid, payload } => self.out.push(Io::Persist { zxid, payload }),
            zab::Output::Truncate { after } => self.out.push(Io::Truncate { after }),
            zab::Output::InstallSnapshot { zxid, data } => {
                let (z, sessions, waits, tree) = decode_snapshot(&data)
                    .map_err(|e| format!("the leader's snapshot does not load: {e}"))?;
                if z as u64 != zxid.0 {
                    return Err(format!(
                        "the leader's snapshot holds 0x{z:x}, announced {zxid}"
                    ));
                }
                self.out.push(Io::InstallSnapshot {
                    zxid,
                    data: data.to_vec(),
                });
                self.server.install_snapshot(tree, sessions, waits, z);
                self.applied.push(Applied::Snapshot { zxid });
            }
            zab::Output::SendSnapshot { to, zxid } => {
                // The shell only warns when the state is not at `zxid`;
                // the simulation's checkers would notice the damage.
                let data = encode_snapshot(&self.server.snapshot_job());
                self.out.push(Io::Zab {
                    to,
                    msg: Message::Snap {
                        zxid,
                        data: Payload::from(data),
                    },
                });
            }
            zab::Output::Deliver { zxid, payload } => {
                self.applied.push(Applied::Txn {
                    zxid,
                    record: payload.clone(),
                });
                self.server.handle(
                    Input::Committed {
                        zxid: zxid.0 as i64,
                        record: payload.to_vec(),
                    },
                    now,
                )
            }
            zab::Output::SyncDone { .. } => {}
            zab::Output::Role(r) => {
                let role = match r {
                    RoleChange::Looking | RoleChange::LeaderLostQuorum { .. } => Role::Looking,
                    RoleChange::Leading { epoch } => Role::Leader { epoch },
                    RoleChange::Following { leader, .. } => Role::Follower { leader },
                    RoleChange::Observing { leader, .. } => Role::Observer { leader },
                };
                self.leader = match role {
                    Role::Follower { leader } | Role::Observer { leader } => Some(leader),
                    _ => None,
                };
                self.server.handle(Input::Role(role), now);
            }
        }
        Ok(())
    }

    fn server_output(&mut self, out: Output) -> Result<(), String> {
        match out {
            Output::Propose { zxid, record } => {
                let mono = self.now.mono_ms as u64;
                match self.peer.propose(Payload::from(record), mono) {
                    Ok(z) if z.0 as i64 == zxid => {}
                    Ok(z) => {
                        return Err(format!(
                            "consensus gave zxid {z} to the pipeline's 0x{zxid:x}"
                        ))
                    }
                    // The pipeline numbered the txn and queued its reply;
                    // stepping down resets it (as the shell does).
                    Err(_) => self.peer.abdicate(mono),
                }
            }
            Output::ToLeader(msg) => {
                if let Some(to) = self.leader {
                    self.out.push(Io::App {
                        to,
                        bytes: msg.encode(),
                    });
                }
            }
            Output::Send { conn, bytes, .. } => self.out.push(Io::ClientSend { conn, bytes }),
            Output::Close { conn } => self.out.push(Io::ClientClose { conn }),
            Output::Snapshot(job) => self.out.push(Io::WriteSnapshot {
                zxid: Zxid(job.zxid as u64),
                data: encode_snapshot(&job),
            }),
            Output::Persist { .. } => {
                return Err("the pipeline asked to persist directly in ensemble mode".into())
            }
        }
        Ok(())
    }
}
