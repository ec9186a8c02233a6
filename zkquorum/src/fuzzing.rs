//! The property the `zk_quorum` fuzz target and this crate's property
//! tests check, kept in one place: bytes from a ZooKeeper peer, read as
//! every record this codec decodes, never make it panic, and whatever
//! decodes re-encodes to bytes that decode to the same record.

use wazoo_storage::zookeeper::parse_sync_snapshot;

use crate::election::decode_frame;
use crate::{Direction, InitialMessage, Limits, Notification, QuorumPacket};

/// Reads `data` as an election handshake, a framed notification, a
/// snapshot after SNAP, and a stream of QuorumPackets (each payload in
/// both directions); panics if a round trip does not hold.
pub fn check_decoders(data: &[u8]) {
    let limits = Limits::default();
    if let Ok(Some((m, n))) = InitialMessage::decode(data, &limits) {
        assert!(n <= data.len());
        let again = m.encode();
        assert_eq!(
            InitialMessage::decode(&again, &limits),
            Ok(Some((m, again.len())))
        );
    }
    if let Ok(Some((msg, _))) = decode_frame(data, &limits) {
        if let Ok(n) = Notification::decode(msg) {
            assert_eq!(Notification::decode(&n.encode()), Ok(n));
        }
    }
    if let Ok(Some((_, n))) = parse_sync_snapshot(data) {
        assert!(n <= data.len());
    }
    let mut rest = data;
    while let Ok(Some((p, n))) = QuorumPacket::decode(rest, &limits) {
        assert!(n > 0 && n <= rest.len());
        rest = &rest[n..];
        let again = p.to_bytes();
        assert_eq!(
            QuorumPacket::decode(&again, &limits),
            Ok(Some((p.clone(), again.len())))
        );
        for dir in [Direction::FromLeader, Direction::FromLearner] {
            if let Ok(payload) = p.payload(dir) {
                assert_eq!(payload.to_packet(p.zxid).payload(dir), Ok(payload));
            }
        }
    }
}
