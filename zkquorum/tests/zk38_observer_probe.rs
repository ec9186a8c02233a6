//! A protocol-level probe of Apache ZooKeeper 3.8's quorum ports: the test
//! plays an observer (server 4) of a real 3-member ensemble with blocking
//! sockets and this crate's codec, as "Administrator's Guide, Observers"
//! configures one (`server.4=host:quorumPort:electionPort:observer` in
//! every member's config) and as "ZooKeeper Internals" describes Zab's
//! discovery, sync and broadcast. It checks that every message ZooKeeper
//! sends decodes, and that what ZooKeeper accepts from the codec keeps it
//! talking:
//!
//! 1. election port: the 3.8 handshake and a notification from a
//!    non-voter, answered with the members' vote, which names the leader;
//! 2. quorum port, three times, each sync kind the leader can choose:
//!    OBSERVERINFO, LEADERINFO, ACKEPOCH with a last zxid that makes it
//!    choose SNAP (0, with txn-log sync off), DIFF (a zxid in its
//!    committed log) or TRUNC (a zxid past its log), then NEWLEADER and
//!    UPTODATE; the snapshot after SNAP is read with
//!    `wazoo_storage::zookeeper::parse_sync_snapshot`;
//! 3. broadcast: while a client creates nodes, the INFORMs carry their
//!    txns, and the leader's PINGs are answered (with no sessions);
//! 4. what an observer forwards for its own clients: REQUESTs (a
//!    createSession, a create in that session, a sync answered by SYNC, a
//!    closeSession), each txn coming back as an INFORM; a PING answered
//!    with the session's touch; REVALIDATE of that session (valid) and of
//!    an unknown one (not valid).
//!
//! Nothing here is a wazoo observer: the probe keeps no tree, it only
//! checks the protocol. Loopback, free ports, bounded in time.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use wazoo_proto::jute::Jute;
use wazoo_proto::records::{Acl, CreateRequest, Id};
use wazoo_proto::{OpCode, ReplyHeader, Request};
use wazoo_storage::zookeeper::{parse_sync_snapshot, SyncSnapshot, ZkTxn};
use wazoo_testkit::{free_port, loopback, ServerOptions, ZkEnsemble};
use wazoo_zkquorum::election::{decode_frame, encode_frame};
use wazoo_zkquorum::*;

const OBSERVER_SID: i64 = 4;
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// The most snapshot bytes the probe buffers.
const MAX_SNAPSHOT: usize = 64 << 20;

/// (quorum, election) address of each `server.N` line of a zoo.cfg.
fn server_lines(cfg: &str) -> BTreeMap<i64, (SocketAddr, SocketAddr)> {
    let mut out = BTreeMap::new();
    for line in cfg.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let Some(sid) = k.strip_prefix("server.").and_then(|s| s.parse().ok()) else {
            continue;
        };
        let parts: Vec<&str> = v.split(';').next().unwrap_or("").split(':').collect();
        let q: u16 = parts[1].parse().expect("quorum port");
        let e: u16 = parts[2].parse().expect("election port");
        out.insert(sid, (loopback(q), loopback(e)));
    }
    out
}

/// A blocking reader of a byte stream with a buffer the codec decodes from.
struct Stream {
    sock: TcpStream,
    buf: Vec<u8>,
}

impl Stream {
    fn connect(addr: SocketAddr) -> anyhow::Result<Stream> {
        let sock = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        sock.set_read_timeout(Some(IO_TIMEOUT))?;
        sock.set_nodelay(true)?;
        Ok(Stream {
            sock,
            buf: Vec::new(),
        })
    }

    fn fill(&mut self) -> anyhow::Result<()> {
        let mut chunk = [0u8; 64 * 1024];
        let n = self
            .sock
            .read(&mut chunk)
            .context("reading from ZooKeeper")?;
        ensure!(n > 0, "ZooKeeper closed the connection");
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// Decodes the next record with `decode` (which answers `None` while
    /// the buffer holds only a prefix).
    fn next<T>(
        &mut self,
        mut decode: impl FnMut(&[u8]) -> anyhow::Result<Option<(T, usize)>>,
    ) -> anyhow::Result<T> {
        loop {
            if let Some((v, n)) = decode(&self.buf)? {
                self.buf.drain(..n);
                return Ok(v);
            }
            self.fill()?;
        }
    }

    fn packet(&mut self) -> anyhow::Result<QuorumPacket> {
        let limits = Limits::default();
        self.next(|b| Ok(QuorumPacket::decode(b, &limits)?))
    }

    fn send(&mut self, p: &QuorumPacket) -> anyhow::Result<()> {
        self.sock.write_all(&p.to_bytes())?;
        Ok(())
    }

    /// The snapshot after SNAP: the buffer is parsed again only after it
    /// doubled, so reading it stays linear.
    fn snapshot(&mut self) -> anyhow::Result<SyncSnapshot> {
        let mut next_try = 0;
        loop {
            if self.buf.len() >= next_try {
                if let Some((s, n)) = parse_sync_snapshot(&self.buf)? {
                    self.buf.drain(..n);
                    return Ok(s);
                }
                next_try = self.buf.len() * 2;
            }
            ensure!(
                self.buf.len() < MAX_SNAPSHOT,
                "snapshot past {MAX_SNAPSHOT} bytes"
            );
            if let Err(e) = self.fill() {
                // The stream may have ended right after the snapshot's last
                // byte arrived without a retry; try once more.
                if let Some((s, n)) = parse_sync_snapshot(&self.buf)? {
                    self.buf.drain(..n);
                    return Ok(s);
                }
                return Err(e);
            }
        }
    }
}

/// Step 1: learn the leader on the election port of server `member`.
fn leader_by_election(
    election: SocketAddr,
    my_election: SocketAddr,
    config: &str,
) -> anyhow::Result<(i64, Notification)> {
    let limits = Limits::default();
    let mut s = Stream::connect(election)?;
    s.sock
        .write_all(&InitialMessage::new(OBSERVER_SID, my_election.to_string()).encode())?;
    // An observer's vote while it looks (FastLeaderElection.getInitId and
    // friends answer Long.MIN_VALUE for a non-participant).
    let vote = Notification::current(
        PeerState::Looking,
        i64::MIN,
        i64::MIN,
        1,
        i64::MIN,
        config.as_bytes().to_vec(),
    );
    s.sock.write_all(&encode_frame(&vote.encode()))?;
    loop {
        let msg = s.next(|b| Ok(decode_frame(b, &limits)?.map(|(m, n)| (m.to_vec(), n))))?;
        let n = Notification::decode(&msg)?;
        if matches!(n.state, PeerState::Following | PeerState::Leading) {
            return Ok((n.leader, n));
        }
    }
}

/// What one sync gave.
struct Synced {
    stream: Stream,
    new_epoch: i64,
    sync_kind: i32,
    snapshot: Option<SyncSnapshot>,
    /// Txns sent during the sync (PROPOSALs after a DIFF, INFORMs).
    txns: Vec<wazoo_storage::zookeeper::TxnEntry>,
    newleader_config: Option<Vec<u8>>,
}

/// Step 2: register as an observer with `last_zxid`, and go through the
/// sync up to UPTODATE, acking as `Learner.syncWithLeader` does.
fn sync_with_leader(quorum: SocketAddr, last_zxid: i64) -> anyhow::Result<Synced> {
    let mut s = Stream::connect(quorum)?;
    let info = LearnerInfo {
        sid: OBSERVER_SID,
        protocol_version: ZAB_PROTOCOL_VERSION,
        config_version: 0,
    };
    s.send(&Payload::ObserverInfo(info).to_packet(0))?;
    let li = s.packet()?;
    let Payload::LeaderInfo { protocol_version } = li.payload(Direction::FromLeader)? else {
        bail!("expected LEADERINFO, got {:?}", kind::name(li.kind));
    };
    ensure!(protocol_version == ZAB_PROTOCOL_VERSION);
    let new_epoch = li.zxid >> 32;
    ensure!(new_epoch >= 1 && li.zxid & 0xffff_ffff == 0);
    // Our current epoch is 0, before the leader's: the ack counts.
    s.send(&Payload::AckEpoch { current_epoch: 0 }.to_packet(last_zxid))?;

    let sync = s.packet()?;
    let mut snapshot = None;
    match sync.payload(Direction::FromLeader)? {
        Payload::Snap => snapshot = Some(s.snapshot()?),
        Payload::Diff | Payload::Trunc => {}
        other => bail!("expected DIFF, TRUNC or SNAP, got {other:?}"),
    }
    let mut txns = Vec::new();
    let mut newleader_config = None;
    loop {
        let p = s.packet()?;
        match p.payload(Direction::FromLeader)? {
            Payload::Proposal(t) | Payload::Inform(t) => txns.push(t),
            Payload::Commit => {}
            Payload::NewLeader { config } => {
                newleader_config = config;
                s.send(&Payload::Ack.to_packet(p.zxid))?;
            }
            Payload::UpToDate => break,
            other => bail!("unexpected during the sync: {other:?}"),
        }
    }
    s.send(&Payload::Ack.to_packet(new_epoch << 32))?;
    Ok(Synced {
        stream: s,
        new_epoch,
        sync_kind: sync.kind,
        snapshot,
        txns,
        newleader_config,
    })
}

/// A minimal blocking ZooKeeper client: connect, then creates.
struct Client {
    sock: TcpStream,
    xid: i32,
}

fn read_client_frame(sock: &mut TcpStream) -> anyhow::Result<Vec<u8>> {
    Ok(wazoo_testkit::raw::read_frame(sock, 1 << 20)?)
}

impl Client {
    fn connect(addr: SocketAddr) -> anyhow::Result<Client> {
        let (sock, _) = wazoo_testkit::raw::handshake(addr, 0, &[], 30_000, IO_TIMEOUT)?;
        Ok(Client { sock, xid: 0 })
    }

    fn create(&mut self, path: &str, data: &[u8]) -> anyhow::Result<i64> {
        self.xid += 1;
        let mut out = Vec::new();
        let req = Request::Create(CreateRequest {
            path: path.into(),
            data: Some(data.to_vec()),
            acl: Acl::open_unsafe(),
            flags: 0,
            ttl: None,
        });
        wazoo_proto::frame::write_request(&mut out, self.xid, &req);
        self.sock.write_all(&out)?;
        let reply = read_client_frame(&mut self.sock)?;
        let mut r = wazoo_proto::Reader::new(&reply);
        let h = ReplyHeader::read(&mut r)?;
        ensure!(h.xid == self.xid && h.err == 0, "create {path}: {h:?}");
        Ok(h.zxid)
    }
}

fn created(t: &ZkTxn) -> Option<(String, Vec<u8>)> {
    match t {
        ZkTxn::Create { create, .. } => {
            Some((create.path.clone(), create.data.clone().unwrap_or_default()))
        }
        _ => None,
    }
}

#[test]
fn an_observer_speaking_the_codec_syncs_with_zookeeper_3_8_and_receives_informs(
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(240);
    let (my_quorum, my_election) = (free_port(), free_port());
    let opts = ServerOptions {
        // The probe's line; nothing listens on these ports (members connect
        // to an observer's election port only to send it votes, and give
        // up quietly).
        extra_cfg: vec![format!(
            "server.4=127.0.0.1:{my_quorum}:{my_election}:observer"
        )],
        // No sync from the txn log: a learner behind the leader's
        // in-memory committed log gets SNAP (LearnerHandler.syncFollower).
        extra_args: vec!["-Dzookeeper.snapshotSizeFactor=-1".into()],
        ..ServerOptions::default()
    };
    let zk = ZkEnsemble::start_with(3, opts)?;
    let leader_index = zk.wait_for_leader(Duration::from_secs(60))?;
    let cfg = std::fs::read_to_string(zk.config_path(0))?;
    let servers = server_lines(&cfg);
    ensure!(servers.len() == 4, "server lines: {servers:?}");

    // Some state before the observer joins.
    let mut client = Client::connect(zk.addr(leader_index))?;
    let pre_zxid = client.create("/probe-pre", b"before")?;
    client.create("/probe-pre-2", b"before, 2")?;

    // 1. Election port: ask a member that is not the leader.
    let asked = (0..3).find(|&i| i != leader_index).unwrap() as i64 + 1;
    let config: String = servers
        .iter()
        .map(|(sid, (q, e))| {
            let role = if *sid == OBSERVER_SID {
                "observer"
            } else {
                "participant"
            };
            format!("server.{sid}={}:{}:{}:{role}\n", q.ip(), q.port(), e.port())
        })
        .collect::<String>()
        + "version=0";
    let (leader, vote) = leader_by_election(servers[&asked].1, loopback(my_election), &config)?;
    ensure!(
        leader == leader_index as i64 + 1,
        "election says {leader}, srvr says {}",
        leader_index + 1
    );
    ensure!(vote.version == Some(2) && vote.config.as_ref().is_some_and(|c| !c.is_empty()));
    let leader_quorum = servers[&leader].0;

    // 2a. SNAP: nothing logged on our side.
    let snap = sync_with_leader(leader_quorum, 0)?;
    ensure!(
        snap.sync_kind == kind::SNAP,
        "expected SNAP, got {:?}",
        kind::name(snap.sync_kind)
    );
    let tree = snap.snapshot.as_ref().unwrap();
    let pre = tree
        .nodes
        .iter()
        .find(|n| n.path == "/probe-pre")
        .context("/probe-pre not in the snapshot")?;
    ensure!(pre.data.as_deref() == Some(&b"before"[..]) && pre.stat.czxid == pre_zxid);
    ensure!(tree.nodes.iter().any(|n| n.path == "/zookeeper/config"));
    ensure!(
        tree.sessions.iter().any(|(_, t)| *t == 30_000),
        "client session missing: {:?}",
        tree.sessions
    );
    let nl = String::from_utf8(snap.newleader_config.clone().unwrap_or_default())?;
    ensure!(
        nl.contains("server.4=") && nl.contains("observer"),
        "NEWLEADER config: {nl}"
    );
    eprintln!(
        "leader {leader} (vote from server {asked}: {:?}, epoch {}, config of {} bytes); SNAP at 0x{:x}: {} nodes, {} sessions, then {} txns",
        vote.state,
        vote.peer_epoch(),
        vote.config.as_ref().map_or(0, Vec::len),
        snap.new_epoch << 32,
        tree.nodes.len(),
        tree.sessions.len(),
        snap.txns.len()
    );
    drop(snap);

    // 2b. DIFF: we claim to have everything up to /probe-pre.
    let diff = sync_with_leader(leader_quorum, pre_zxid)?;
    ensure!(
        diff.sync_kind == kind::DIFF,
        "expected DIFF, got {:?}",
        kind::name(diff.sync_kind)
    );
    let paths: Vec<_> = diff.txns.iter().filter_map(|t| created(&t.txn)).collect();
    ensure!(
        paths.contains(&("/probe-pre-2".into(), b"before, 2".to_vec())),
        "DIFF txns: {paths:?}"
    );
    ensure!(diff.txns.iter().all(|t| t.header.zxid > pre_zxid));
    eprintln!(
        "DIFF from 0x{pre_zxid:x}: {} txns {paths:?}",
        diff.txns.len()
    );
    drop(diff);

    // 2c. TRUNC: we claim txns the leader never had, in its epoch.
    let ahead = pre_zxid + 1000;
    let trunc = sync_with_leader(leader_quorum, ahead)?;
    ensure!(
        trunc.sync_kind == kind::TRUNC,
        "expected TRUNC, got {:?}",
        kind::name(trunc.sync_kind)
    );
    eprintln!("TRUNC for 0x{ahead:x}: {} txns after it", trunc.txns.len());
    drop(trunc);

    // 3. Broadcast: stay synced, answer PINGs, read INFORMs.
    let mut obs = sync_with_leader(leader_quorum, 0)?;
    ensure!(obs.new_epoch == pre_zxid >> 32);
    let mut wanted: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for i in 0..5 {
        let path = format!("/probe-live-{i}");
        let data = format!("live {i}").into_bytes();
        client.create(&path, &data)?;
        wanted.insert(path, data);
    }
    let mut seen = BTreeMap::new();
    let mut pings = 0;
    while seen != wanted || pings < 2 {
        ensure!(
            Instant::now() < deadline,
            "timed out: {pings} pings, informs {seen:?}"
        );
        let p = obs.stream.packet()?;
        match p.payload(Direction::FromLeader)? {
            Payload::Inform(t) => {
                if let Some((path, data)) = created(&t.txn) {
                    ensure!(t.header.zxid == p.zxid);
                    seen.insert(path, data);
                }
            }
            Payload::Ping(touches) => {
                ensure!(touches.is_empty());
                pings += 1;
                // Learner.ping: the same type and zxid, our touches (none).
                obs.stream.send(&Payload::Ping(vec![]).to_packet(p.zxid))?;
            }
            other => bail!("unexpected in broadcast: {other:?}"),
        }
    }
    eprintln!(
        "broadcast: {} INFORMs of creates, {pings} PINGs answered",
        seen.len()
    );
    // The leader still counts us: `srvr` on the leader lists no error, and
    // a create after the pings is still informed.
    client.create("/probe-last", b"")?;
    loop {
        ensure!(Instant::now() < deadline, "no INFORM for /probe-last");
        let p = obs.stream.packet()?;
        match p.payload(Direction::FromLeader)? {
            Payload::Inform(t) if created(&t.txn).is_some_and(|(p, _)| p == "/probe-last") => break,
            Payload::Ping(_) => obs.stream.send(&Payload::Ping(vec![]).to_packet(p.zxid))?,
            _ => {}
        }
    }
    // 4. What an observer does for its own clients, forwarded to the
    // leader: a session (REQUEST createSession), a create in it, a sync
    // (answered by SYNC), REVALIDATE of it and of an unknown session, the
    // session in PING touches, and its close. Each txn comes back as an
    // INFORM (the observer answers its client only then).
    let session: i64 = (OBSERVER_SID << 56) | 0x5eed;
    let timeout_ms: i32 = 30_000;
    let auth = Some(vec![Id::new("ip", "127.0.0.1")]);
    let forward = |obs: &mut Stream, cxid: i32, req: Option<&Request>, op: i32, body: Vec<u8>| {
        let body = match req {
            Some(r) => {
                let mut b = Vec::new();
                r.write_body(&mut b);
                b
            }
            None => body,
        };
        let fr = ForwardedRequest {
            session_id: session,
            cxid,
            op,
            body,
            authinfo: auth.clone(),
        };
        obs.send(&Payload::Request(fr).to_packet(-1))
    };
    let mut touches = vec![];
    // The next packet that is not a PING, answering PINGs with `touches`.
    let next =
        |obs: &mut Synced, touches: &Vec<(i64, i32)>| -> anyhow::Result<(QuorumPacket, Payload)> {
            loop {
                ensure!(
                    Instant::now() < deadline,
                    "timed out waiting for the leader"
                );
                let p = obs.stream.packet()?;
                match p.payload(Direction::FromLeader)? {
                    Payload::Ping(_) => obs
                        .stream
                        .send(&Payload::Ping(touches.clone()).to_packet(p.zxid))?,
                    payload => return Ok((p, payload)),
                }
            }
        };
    // Forwards a request and returns the txn the leader informs back.
    let forward_informed = |obs: &mut Synced,
                            touches: &Vec<(i64, i32)>,
                            cxid: i32,
                            req: Option<&Request>,
                            op: OpCode,
                            body: Vec<u8>|
     -> anyhow::Result<wazoo_storage::zookeeper::TxnEntry> {
        forward(&mut obs.stream, cxid, req, op.code(), body)?;
        match next(obs, touches)? {
            (_, Payload::Inform(t)) => Ok(t),
            (_, other) => bail!("expected the INFORM of {op:?}, got {other:?}"),
        }
    };
    let t = forward_informed(
        &mut obs,
        &touches,
        0,
        None,
        OpCode::CreateSession,
        timeout_ms.to_be_bytes().to_vec(),
    )?;
    ensure!(
        t.header.client_id == session && t.txn == ZkTxn::CreateSession { timeout_ms },
        "{t:?}"
    );
    touches.push((session, timeout_ms));

    let create = Request::Create(CreateRequest {
        path: "/probe-forwarded".into(),
        data: Some(b"via the observer".to_vec()),
        acl: Acl::open_unsafe(),
        flags: 0,
        ttl: None,
    });
    let t = forward_informed(&mut obs, &touches, 1, Some(&create), OpCode::Create, vec![])?;
    ensure!((t.header.client_id, t.header.cxid) == (session, 1));
    ensure!(
        created(&t.txn) == Some(("/probe-forwarded".into(), b"via the observer".to_vec())),
        "{t:?}"
    );

    let sync = Request::Sync {
        path: Some("/".into()),
    };
    forward(&mut obs.stream, 2, Some(&sync), OpCode::Sync.code(), vec![])?;
    let (_, answer) = next(&mut obs, &touches)?;
    ensure!(answer == Payload::Sync, "expected SYNC, got {answer:?}");

    // One PING answered with the session's touch (LearnerHandler touches
    // each listed session), before the session is revalidated.
    loop {
        ensure!(
            Instant::now() < deadline,
            "no PING after the session was created"
        );
        let p = obs.stream.packet()?;
        if let Payload::Ping(_) = p.payload(Direction::FromLeader)? {
            obs.stream
                .send(&Payload::Ping(touches.clone()).to_packet(p.zxid))?;
            break;
        }
    }
    for (id, valid) in [(session, true), ((OBSERVER_SID << 56) | 0xdead, false)] {
        obs.stream.send(
            &Payload::RevalidateRequest {
                session_id: id,
                timeout_ms,
            }
            .to_packet(-1),
        )?;
        let (_, answer) = next(&mut obs, &touches)?;
        ensure!(
            answer
                == Payload::RevalidateReply {
                    session_id: id,
                    valid
                },
            "revalidate 0x{id:x}: {answer:?}"
        );
    }

    let t = forward_informed(&mut obs, &touches, 3, None, OpCode::CloseSession, vec![])?;
    ensure!(
        t.header.client_id == session && matches!(t.txn, ZkTxn::CloseSession { .. }),
        "{t:?}"
    );
    eprintln!("forwarded: createSession, create, sync; PING with its touch; revalidate (valid and not); closeSession");

    // The leader logged the probe as a learner (LearnerHandler.run), and
    // no member logged a complaint about what the codec sent.
    let leader_log = zk.log_tail(leader_index, 5000);
    ensure!(
        leader_log.contains("Follower sid: 4"),
        "the leader's log does not name the probe"
    );
    for i in 0..3 {
        let log = zk.log_tail(i, 5000);
        for complaint in [
            "Initial message parsing error",
            "partial / malformed response",
            "Something went wrong while processing config",
            "not in the current config",
            "Unexpected exception causing shutdown",
            "First packet should have been",
        ] {
            ensure!(
                !log.contains(complaint),
                "member {} logged {complaint:?}",
                i + 1
            );
        }
    }
    Ok(())
}
