//! Codec tests: bytes as ZooKeeper 3.8 writes them, round trips, limits,
//! and arbitrary bytes (which must give an error or a record, never a
//! panic or an allocation past the limits).

use proptest::prelude::*;
use wazoo_proto::records::Id;
use wazoo_storage::zookeeper::{
    encode_sync_snapshot, op, parse_sync_snapshot, Create, CreateKind, SnapNode, StatPersisted,
    SyncSnapshot, TxnDigest, TxnEntry, TxnHeader, ZkAcl, ZkTxn,
};

use crate::election::{decode_frame, encode_frame, PROTOCOL_VERSION_V1};
use crate::*;

fn limits() -> Limits {
    Limits::default()
}

#[test]
fn handshake_is_the_3_8_form_with_version_sid_and_address() {
    // QuorumCnxManager.initiateConnection: writeLong(PROTOCOL_VERSION_V1),
    // writeLong(myid), writeInt(len), the address bytes.
    let m = InitialMessage::new(4, "127.0.0.1:3888");
    let bytes = m.encode();
    let mut want = PROTOCOL_VERSION_V1.to_be_bytes().to_vec();
    want.extend_from_slice(&4i64.to_be_bytes());
    want.extend_from_slice(&14i32.to_be_bytes());
    want.extend_from_slice(b"127.0.0.1:3888");
    assert_eq!(bytes, want);
    assert_eq!(
        InitialMessage::decode(&bytes, &limits()).unwrap(),
        Some((m, bytes.len()))
    );
    for cut in 0..bytes.len() {
        assert_eq!(
            InitialMessage::decode(&bytes[..cut], &limits()).unwrap(),
            None
        );
    }
}

#[test]
fn handshake_refuses_what_quorum_cnx_manager_refuses() {
    let mut b = PROTOCOL_VERSION_V1.to_be_bytes().to_vec();
    b.extend_from_slice(&1i64.to_be_bytes());
    // An address length of 0 or past 2048 ("Unreasonable buffer length").
    for len in [0i32, -5, 2049, i32::MAX] {
        let mut m = b.clone();
        m.extend_from_slice(&len.to_be_bytes());
        assert!(matches!(
            InitialMessage::decode(&m, &limits()),
            Err(Error::Length { .. })
        ));
    }
    // An unknown negative protocol version.
    let m = (-3i64).to_be_bytes();
    assert!(InitialMessage::decode(&m, &limits()).is_err());
    // Addresses without a port.
    for addr in ["localhost", "host:port", "[::1]", ":1"] {
        let mut m = b.clone();
        m.extend_from_slice(&(addr.len() as i32).to_be_bytes());
        m.extend_from_slice(addr.as_bytes());
        assert!(
            InitialMessage::decode(&m, &limits()).is_err(),
            "{addr} accepted"
        );
    }
    // Before 3.5, the sid alone.
    let (m, n) = InitialMessage::decode(&7i64.to_be_bytes(), &limits())
        .unwrap()
        .unwrap();
    assert_eq!((m.version, m.sid, n), (ProtocolVersion::Legacy, 7, 8));
}

#[test]
fn notification_is_fast_leader_election_s_build_msg() {
    // FastLeaderElection.buildMsg(state, leader, zxid, electionEpoch,
    // epoch, configData): 44 bytes plus the config.
    let n = Notification::current(
        PeerState::Looking,
        4,
        0x1_0000_0005,
        3,
        1,
        b"version=0".to_vec(),
    );
    let b = n.encode();
    assert_eq!(b.len(), 44 + 9);
    assert_eq!(&b[..4], &0i32.to_be_bytes());
    assert_eq!(&b[4..12], &4i64.to_be_bytes());
    assert_eq!(&b[12..20], &0x1_0000_0005i64.to_be_bytes());
    assert_eq!(&b[36..40], &2i32.to_be_bytes());
    assert_eq!(&b[40..44], &9i32.to_be_bytes());
    assert_eq!(Notification::decode(&b).unwrap(), n);
}

#[test]
fn notification_old_forms_are_read_as_3_8_reads_them() {
    let full = Notification::current(PeerState::Leading, 2, 0x3_0000_0001, 9, 3, vec![]).encode();
    // 28 bytes: no peer epoch; it is the zxid's epoch.
    let n = Notification::decode(&full[..28]).unwrap();
    assert_eq!((n.peer_epoch, n.peer_epoch()), (None, 3));
    // 40 bytes: a peer epoch, and the version field is not read.
    let n = Notification::decode(&full[..40]).unwrap();
    assert_eq!((n.peer_epoch, n.version), (Some(3), None));
    // Between the forms, or a config length past the end: refused.
    for len in [0, 27, 29, 36, 39, 41, 43] {
        assert!(Notification::decode(&full[..len]).is_err(), "{len} bytes");
    }
    let mut long = full.clone();
    long[40..44].copy_from_slice(&100i32.to_be_bytes());
    assert!(matches!(
        Notification::decode(&long),
        Err(Error::Length { .. })
    ));
    let mut bad_state = full;
    bad_state[..4].copy_from_slice(&7i32.to_be_bytes());
    assert!(Notification::decode(&bad_state).is_err());
}

#[test]
fn election_frames_are_bounded_like_recv_worker() {
    let f = encode_frame(b"abc");
    assert_eq!(decode_frame(&f, &limits()).unwrap(), Some((&b"abc"[..], 7)));
    assert_eq!(decode_frame(&f[..6], &limits()).unwrap(), None);
    for len in [0i32, -1, 512 * 1024 + 1] {
        assert!(decode_frame(&len.to_be_bytes(), &limits()).is_err());
    }
}

#[test]
fn quorum_packet_is_jute_with_nulls_kept() {
    // Learner.registerWithLeader: OBSERVERINFO, zxid = acceptedEpoch << 32,
    // data = LearnerInfo(sid, 0x10000, configVersion), null authinfo.
    let li = LearnerInfo {
        sid: 4,
        protocol_version: ZAB_PROTOCOL_VERSION,
        config_version: 0,
    };
    let p = Payload::ObserverInfo(li).to_packet(0);
    let b = p.to_bytes();
    assert_eq!(b.len(), 4 + 8 + 4 + 20 + 4);
    assert_eq!(&b[..4], &16i32.to_be_bytes());
    assert_eq!(&b[12..16], &20i32.to_be_bytes());
    assert_eq!(&b[b.len() - 4..], &(-1i32).to_be_bytes());
    let (q, n) = QuorumPacket::decode(&b, &limits()).unwrap().unwrap();
    assert_eq!((q.clone(), n), (p, b.len()));
    assert_eq!(
        q.payload(Direction::FromLearner).unwrap(),
        Payload::ObserverInfo(li)
    );
}

#[test]
fn quorum_packet_lengths_past_the_limit_fail_before_the_bytes_arrive() {
    let mut b = 2i32.to_be_bytes().to_vec();
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&(0x7fff_ffffi32).to_be_bytes());
    assert!(matches!(
        QuorumPacket::decode(&b, &limits()),
        Err(Error::Length { .. })
    ));
    let mut b2 = b[..12].to_vec();
    b2.extend_from_slice(&(-2i32).to_be_bytes());
    assert!(QuorumPacket::decode(&b2, &limits()).is_err());
    // Authinfo count past the limit.
    let mut b3 = b[..12].to_vec();
    b3.extend_from_slice(&(-1i32).to_be_bytes());
    b3.extend_from_slice(&(1_000_000i32).to_be_bytes());
    assert!(QuorumPacket::decode(&b3, &limits()).is_err());
}

#[test]
fn ping_touches_must_be_whole_pairs() {
    let p = QuorumPacket::new(kind::PING, 5, Some(vec![0; 13]));
    assert!(p.payload(Direction::FromLearner).is_err());
    let p = QuorumPacket::new(kind::PING, 5, None);
    assert_eq!(
        p.payload(Direction::FromLeader).unwrap(),
        Payload::Ping(vec![])
    );
}

#[test]
fn sync_snapshot_waits_for_its_signature() {
    let snap = SyncSnapshot {
        sessions: vec![(0x100, 30_000)],
        acls: [(
            1,
            vec![ZkAcl {
                perms: 31,
                scheme: "world".into(),
                id: "anyone".into(),
            }],
        )]
        .into_iter()
        .collect(),
        nodes: vec![
            SnapNode {
                path: String::new(),
                data: Some(vec![]),
                acl: -1,
                stat: StatPersisted::default(),
            },
            SnapNode {
                path: "/a".into(),
                data: Some(b"x".to_vec()),
                acl: 1,
                stat: StatPersisted::default(),
            },
        ],
    };
    let mut b = Vec::new();
    encode_sync_snapshot(&snap, &mut b);
    let whole = b.len();
    b.extend_from_slice(b"next packet");
    assert_eq!(parse_sync_snapshot(&b).unwrap(), Some((snap, whole)));
    for cut in 0..whole {
        assert_eq!(
            parse_sync_snapshot(&b[..cut]).unwrap(),
            None,
            "cut at {cut}"
        );
    }
    let mut wrong = b[..whole].to_vec();
    let at = wrong.len() - 1;
    wrong[at] = b'X';
    assert!(parse_sync_snapshot(&wrong).is_err());
}

// ---- generators ----

fn arb_path() -> impl Strategy<Value = String> {
    "(/[a-z0-9]{1,6}){1,3}"
}

fn arb_data() -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16))
}

fn arb_acl() -> impl Strategy<Value = Option<Vec<ZkAcl>>> {
    proptest::option::of(proptest::collection::vec(
        (any::<i32>(), "[a-z]{0,5}", "[a-z:]{0,8}").prop_map(|(perms, scheme, id)| ZkAcl {
            perms,
            scheme,
            id,
        }),
        0..3,
    ))
}

/// A txn that can stand inside a multi, and its opcode.
fn arb_sub_txn() -> impl Strategy<Value = (i32, ZkTxn)> {
    prop_oneof![
        (
            arb_path(),
            arb_data(),
            arb_acl(),
            any::<i32>(),
            0..4u8,
            any::<bool>(),
            any::<i64>()
        )
            .prop_map(|(path, data, acl, parent_cversion, k, ephemeral, ttl_ms)| {
                let (op, kind) = match k {
                    0 => (op::CREATE, CreateKind::Plain { ephemeral }),
                    1 => (op::CREATE2, CreateKind::Plain { ephemeral }),
                    2 => (op::CREATE_CONTAINER, CreateKind::Container),
                    _ => (op::CREATE_TTL, CreateKind::Ttl { ttl_ms }),
                };
                let create = Create {
                    path,
                    data,
                    acl,
                    parent_cversion,
                    kind,
                };
                (op, ZkTxn::Create { op, create })
            }),
        arb_path().prop_map(|path| (op::DELETE, ZkTxn::Delete { path })),
        (arb_path(), arb_data(), any::<i32>()).prop_map(|(path, data, version)| (
            op::SET_DATA,
            ZkTxn::SetData {
                path,
                data,
                version
            }
        )),
        (arb_path(), any::<i32>())
            .prop_map(|(path, version)| (op::CHECK, ZkTxn::Check { path, version })),
        any::<i32>().prop_map(|err| (op::ERROR, ZkTxn::Error { err })),
    ]
}

fn arb_txn() -> impl Strategy<Value = (i32, ZkTxn)> {
    prop_oneof![
        arb_sub_txn(),
        any::<i32>()
            .prop_map(|timeout_ms| (op::CREATE_SESSION, ZkTxn::CreateSession { timeout_ms })),
        proptest::collection::vec(arb_path(), 0..3)
            .prop_map(|p| (op::CLOSE_SESSION, ZkTxn::CloseSession { paths: Some(p) })),
        (arb_path(), arb_acl(), any::<i32>())
            .prop_map(|(path, acl, version)| (op::SET_ACL, ZkTxn::SetAcl { path, acl, version })),
        proptest::collection::vec(arb_sub_txn().prop_map(|(_, t)| t), 0..4)
            .prop_map(|subs| (op::MULTI, ZkTxn::Multi(subs))),
    ]
}

fn arb_entry() -> impl Strategy<Value = TxnEntry> {
    (
        arb_txn(),
        any::<(i64, i32, i64, i64)>(),
        proptest::option::of((1..3i32, any::<i64>())),
    )
        .prop_map(
            |((op, txn), (client_id, cxid, zxid, time), digest)| TxnEntry {
                header: TxnHeader {
                    client_id,
                    cxid,
                    zxid,
                    time,
                    op,
                },
                txn,
                digest: digest.map(|(version, tree_digest)| TxnDigest {
                    version,
                    tree_digest,
                }),
            },
        )
}

fn arb_ids() -> impl Strategy<Value = Option<Vec<Id>>> {
    proptest::option::of(proptest::collection::vec(
        ("[a-z]{0,6}", "[a-z0-9:.]{0,10}").prop_map(|(scheme, id)| Id { scheme, id }),
        0..3,
    ))
}

fn arb_payload() -> impl Strategy<Value = (Payload, Direction)> {
    use Direction::*;
    let li =
        any::<(i64, i32, i64)>().prop_map(|(sid, protocol_version, config_version)| LearnerInfo {
            sid,
            protocol_version,
            config_version,
        });
    prop_oneof![
        li.clone()
            .prop_map(|l| (Payload::FollowerInfo(l), FromLearner)),
        li.prop_map(|l| (Payload::ObserverInfo(l), FromLearner)),
        any::<i32>().prop_map(|v| (
            Payload::LeaderInfo {
                protocol_version: v
            },
            FromLeader
        )),
        any::<i32>().prop_map(|e| (Payload::AckEpoch { current_epoch: e }, FromLearner)),
        Just((Payload::Diff, FromLeader)),
        Just((Payload::Trunc, FromLeader)),
        Just((Payload::Snap, FromLeader)),
        Just((Payload::UpToDate, FromLeader)),
        Just((Payload::Ack, FromLearner)),
        Just((Payload::Commit, FromLeader)),
        Just((Payload::Sync, FromLeader)),
        arb_data().prop_map(|config| (Payload::NewLeader { config }, FromLeader)),
        arb_entry().prop_map(|t| (Payload::Proposal(t), FromLeader)),
        arb_entry().prop_map(|t| (Payload::Inform(t), FromLeader)),
        any::<i64>().prop_map(|l| (
            Payload::CommitAndActivate {
                suggested_leader: l
            },
            FromLeader
        )),
        (any::<i64>(), arb_entry()).prop_map(|(l, txn)| (
            Payload::InformAndActivate {
                suggested_leader: l,
                txn
            },
            FromLeader
        )),
        proptest::collection::vec(any::<(i64, i32)>(), 0..5)
            .prop_map(|t| (Payload::Ping(t), FromLearner)),
        any::<(i64, i32)>().prop_map(|(session_id, timeout_ms)| (
            Payload::RevalidateRequest {
                session_id,
                timeout_ms
            },
            FromLearner
        )),
        any::<(i64, bool)>().prop_map(|(session_id, valid)| (
            Payload::RevalidateReply { session_id, valid },
            FromLeader
        )),
        (
            any::<(i64, i32, i32)>(),
            proptest::collection::vec(any::<u8>(), 0..20),
            arb_ids()
        )
            .prop_map(|((session_id, cxid, op), body, authinfo)| (
                Payload::Request(ForwardedRequest {
                    session_id,
                    cxid,
                    op,
                    body,
                    authinfo
                }),
                FromLearner
            )),
    ]
}

fn arb_notification() -> impl Strategy<Value = Notification> {
    (
        0..4i32,
        any::<(i64, i64, i64, i64)>(),
        0..3u8,
        any::<i32>(),
        proptest::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(
            |(state, (leader, zxid, election_epoch, pe), form, version, config)| {
                let mut n = Notification {
                    state: PeerState::from_i32(state).unwrap(),
                    leader,
                    zxid,
                    election_epoch,
                    peer_epoch: None,
                    version: None,
                    config: None,
                };
                if form >= 1 {
                    n.peer_epoch = Some(pe);
                }
                if form == 2 {
                    n.version = Some(version);
                    n.config = (version > 1).then_some(config);
                }
                n
            },
        )
}

proptest! {
    #[test]
    fn txn_entries_round_trip(e in arb_entry()) {
        let b = wazoo_storage::zookeeper::encode_entry(&e);
        prop_assert_eq!(wazoo_storage::zookeeper::decode_entry(&b, 0).unwrap(), e);
    }

    #[test]
    fn payloads_round_trip_through_packet_bytes((p, dir) in arb_payload(), zxid in any::<i64>()) {
        let packet = p.to_packet(zxid);
        let bytes = packet.to_bytes();
        let (back, n) = QuorumPacket::decode(&bytes, &limits()).unwrap().unwrap();
        prop_assert_eq!(n, bytes.len());
        prop_assert_eq!(&back, &packet);
        prop_assert_eq!(back.payload(dir).unwrap(), p);
        // Every strict prefix is incomplete, not an error.
        for cut in [0, bytes.len() / 2, bytes.len() - 1] {
            prop_assert_eq!(QuorumPacket::decode(&bytes[..cut], &limits()).unwrap(), None);
        }
    }

    #[test]
    fn notifications_round_trip(n in arb_notification()) {
        let b = n.encode();
        prop_assert_eq!(Notification::decode(&b).unwrap(), n.clone());
        let framed = encode_frame(&b);
        prop_assert_eq!(decode_frame(&framed, &limits()).unwrap(), Some((&b[..], framed.len())));
    }

    #[test]
    fn handshakes_round_trip(sid in 0..i64::MAX, v2 in any::<bool>(), ports in proptest::collection::vec(1..u16::MAX, 1..3)) {
        let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let m = InitialMessage {
            version: if v2 { ProtocolVersion::V2 } else { ProtocolVersion::V1 },
            sid,
            addresses: if v2 { addresses } else { addresses[..1].to_vec() },
        };
        let b = m.encode();
        prop_assert_eq!(InitialMessage::decode(&b, &limits()).unwrap(), Some((m, b.len())));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), k in 0..22i32) {
        crate::fuzzing::check_decoders(&bytes);
        // The same bytes as the data of every packet type.
        let p = QuorumPacket::new(k, 0, Some(bytes.clone()));
        let _ = p.payload(Direction::FromLeader);
        let _ = p.payload(Direction::FromLearner);
    }

    #[test]
    fn encoded_records_with_bytes_flipped_never_panic(
        (p, _) in arb_payload(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut b = p.to_packet(1).to_bytes();
        for (i, v) in flips {
            let i = i.index(b.len());
            b[i] = v;
        }
        crate::fuzzing::check_decoders(&b);
    }
}
