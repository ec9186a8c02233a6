//! A reconfig through the leader, output by output (ZooKeeper Dynamic
//! Reconfiguration): proposed to the old membership, committed by the old
//! quorum, answered with the new configuration, and activated on commit.

use super::*;
use crate::quorum_config::QuorumConfig;
use wazoo_proto::{AuthPacket, ErrorCode, ReconfigRequest};

const MEMBERS: &str = "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
                       server.2=127.0.0.1:2889:3889:participant;0.0.0.0:2182\n\
                       server.3=127.0.0.1:2890:3890:participant;0.0.0.0:2183\n\
                       version=0";

/// Leader 3 of {1,2,3} (follower 1 synced) with reconfiguration on, the
/// membership above and a super user, and a session on connection 1 that
/// authenticated as the super user.
fn reconfigurable_leader() -> (Harness, i64) {
    authenticated(reconfigurable_leader_without_auth())
}

/// Has the session of `(h, session)` authenticate as the super user.
fn authenticated((mut h, session): (Harness, i64)) -> (Harness, i64) {
    let auth = Request::Auth(AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: b"super:pw".to_vec(),
    });
    h.request(1, wazoo_proto::xid::AUTH, auth);
    (h, session)
}

/// [`reconfigurable_leader`] before its session authenticates.
fn reconfigurable_leader_without_auth() -> (Harness, i64) {
    leader_configured(ServerConfig::default())
}

/// [`reconfigurable_leader_without_auth`] with the rest of its
/// configuration taken from `base`.
fn leader_configured(base: ServerConfig) -> (Harness, i64) {
    let mut h = member_with(
        ServerConfig {
            server_id: 3,
            reconfig_enabled: true,
            super_digest: Some(crate::acl::digest_id("super:pw")),
            ..base
        },
        100,
    );
    h.m.server_mut()
        .set_quorum_config(QuorumConfig::parse(MEMBERS).unwrap());
    leader_with_session_from(leader_from(h))
}

fn remove(ids: &str, from: i64) -> Request {
    Request::Reconfig(ReconfigRequest {
        joining_servers: None,
        leaving_servers: Some(ids.into()),
        new_members: None,
        cur_config_id: from,
    })
}

/// ZooKeeper's Leader.isQuorumSynced: removing 1 would leave {2,3}, of
/// which only the leader is in sync (2 never connected): NewConfigNoQuorum.
/// Removing 2 leaves {1,3}, both in sync: proposed to the old membership,
/// committed by the old quorum, active from its commit; a second reconfig
/// meanwhile is ReconfigInProgress, answered after the first (replies keep
/// their order).
#[test]
fn a_reconfig_commits_on_the_old_quorum_and_is_active_from_its_commit() {
    let (mut h, session) = reconfigurable_leader();
    let refusal =
        |xid, zxid, code: wazoo_proto::ErrorCode| reply(xid, zxid, code.code(), &Response::Empty);
    assert_eq!(
        h.request(1, 8, remove("1", -1)),
        vec![Out::Send {
            conn: 1,
            frames: vec![refusal(
                8,
                z(2, 1),
                wazoo_proto::ErrorCode::NewConfigNoQuorum
            )],
            replies: 1
        }]
    );
    let new_text = "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
                    server.3=127.0.0.1:2890:3890:participant;0.0.0.0:2183\n\
                    version=200000002";
    let txn = TxnRecord {
        header: header(session, 9, z(2, 2)),
        txn: Txn::Reconfig {
            data: new_text.as_bytes().to_vec(),
        },
    };
    assert_eq!(
        h.request(1, 9, remove("2", 0)),
        vec![Out::Persist(txn.clone()), Out::Proposal(1, txn)]
    );
    assert!(
        h.request(1, 10, remove("1", -1)).is_empty(),
        "waits behind 9"
    );
    // The leader's log alone is not a quorum of {1,2,3}.
    assert!(h.step(Input::Durable { zxid: z(2, 2) }).is_empty());
    let stat = |h: &Harness| h.m.server().tree().stat("/zookeeper/config").unwrap();
    assert_eq!(stat(&h).mzxid, 0, "nothing is active before the commit");
    assert_eq!(h.m.peer().unwrap().config().voters, vec![1, 2, 3]);
    let committed = h.zab(1, Message::Ack { zxid: z(2, 2) });
    let config = QuorumConfig::parse(new_text).unwrap();
    assert_eq!(stat(&h).mzxid, z(2, 2).to_wire());
    assert_eq!(stat(&h).version, -1);
    assert_eq!(
        committed,
        vec![
            Out::Other(format!("{:?}", Output::Reconfigured(config.clone()))),
            Out::Send {
                conn: 1,
                frames: vec![
                    reply(
                        9,
                        z(2, 2),
                        0,
                        &Response::GetData {
                            data: Some(new_text.as_bytes().to_vec()),
                            stat: stat(&h),
                        }
                    ),
                    refusal(10, z(2, 2), wazoo_proto::ErrorCode::ReconfigInProgress),
                ],
                replies: 2
            },
            Out::Peer(1, Message::Commit { zxid: z(2, 2) }),
        ]
    );
    assert_eq!(h.m.server().quorum_config(), Some(&config));
    assert_eq!(h.m.peer().unwrap().config().voters, vec![1, 3]);
}

/// The code of the one refusal request `xid` gets (zxid: nothing was
/// committed).
fn refusal_of(h: &mut Harness, xid: i32, req: Request) -> ErrorCode {
    let out = h.request(1, xid, req);
    [
        ErrorCode::BadVersion,
        ErrorCode::BadArguments,
        ErrorCode::NewConfigNoQuorum,
        ErrorCode::NoAuth,
    ]
    .into_iter()
    .find(|c| {
        out == vec![Out::Send {
            conn: 1,
            frames: vec![reply(xid, z(2, 1), c.code(), &Response::Empty)],
            replies: 1,
        }]
    })
    .unwrap_or_else(|| panic!("not one of the refusals: {out:?}"))
}

fn join(servers: &str) -> Request {
    Request::Reconfig(ReconfigRequest {
        joining_servers: Some(servers.into()),
        leaving_servers: None,
        new_members: None,
        cur_config_id: -1,
    })
}

/// ZooKeeper Dynamic Reconfiguration, "Security" and ZooKeeper 3.8's
/// PrepRequestProcessor: a reconfig is checked for its version, its new
/// membership, two participants, a synced quorum, and only then for WRITE
/// on /zookeeper/config; wazoo's own bound on server ids comes last. So a
/// client that is not the super user hears NoAuth for a well-formed
/// request (a client library's test adds `server.999=...:observer`), and
/// the other refusals first.
#[test]
fn reconfig_refusals_come_in_zookeepers_order() {
    let (mut h, _) = reconfigurable_leader_without_auth();
    let observer_999 = "server.999=0.0.0.0:1234:2345:observer;3456";
    let mut xid = 20;
    for (req, code) in [
        (remove("2", 0x1234), ErrorCode::BadVersion),
        (join("server.9=127.0.0.1:1:2"), ErrorCode::BadArguments),
        (remove("1,2", -1), ErrorCode::BadArguments),
        (remove("1", -1), ErrorCode::NewConfigNoQuorum),
        (join(observer_999), ErrorCode::NoAuth),
        (remove("2", 0), ErrorCode::NoAuth),
    ] {
        let what = format!("{req:?}");
        xid += 1;
        assert_eq!(refusal_of(&mut h, xid, req), code, "{what}");
    }
    let auth = Request::Auth(AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: b"super:pw".to_vec(),
    });
    h.request(1, wazoo_proto::xid::AUTH, auth);
    // The super user passes ZooKeeper's checks; wazoo keeps ids in a byte.
    assert_eq!(
        refusal_of(&mut h, xid + 1, join(observer_999)),
        ErrorCode::BadArguments
    );
}

/// Administrator's Guide, "Cluster Options" (multiAddress.enabled) and
/// ZooKeeper 3.8's `QuorumServer`: a joiner with several address pairs is
/// BadArguments unless multiAddress is enabled; with it, the new
/// configuration shows the line as ZooKeeper prints it (pairs sorted by
/// host, the role once). The joiner is an observer, so the leader and its
/// one synced follower stay a quorum.
#[test]
fn a_member_with_several_addresses_joins_only_with_multi_address_enabled() {
    let joiner = "server.4=127.0.0.2:2891:3891|127.0.0.1:2891:3891:observer;2184";
    let (mut h, _) = reconfigurable_leader();
    assert_eq!(
        refusal_of(&mut h, 30, join(joiner)),
        ErrorCode::BadArguments
    );
    let whole = format!(
        "{},{joiner}",
        MEMBERS.replace("\nversion=0", "").replace('\n', ",")
    );
    assert_eq!(
        refusal_of(&mut h, 31, members(&whole)),
        ErrorCode::BadArguments
    );

    let (mut h, session) = authenticated(leader_configured(ServerConfig {
        multi_address_enabled: true,
        ..ServerConfig::default()
    }));
    let new_text = format!(
        "{}\nserver.4=127.0.0.1:2891:3891|127.0.0.2:2891:3891:observer;0.0.0.0:2184\n\
         version=200000002",
        MEMBERS.replace("\nversion=0", "")
    );
    let txn = TxnRecord {
        header: header(session, 32, z(2, 2)),
        txn: Txn::Reconfig {
            data: new_text.into_bytes(),
        },
    };
    assert_eq!(
        h.request(1, 32, join(joiner)),
        vec![Out::Persist(txn.clone()), Out::Proposal(1, txn)]
    );
}

fn members(text: &str) -> Request {
    Request::Reconfig(ReconfigRequest {
        joining_servers: None,
        leaving_servers: None,
        new_members: Some(text.into()),
        cur_config_id: -1,
    })
}

/// ZooKeeper 3.8's PrepRequestProcessor with hierarchical quorums
/// (Administrator's Guide, "Cluster Options", `group.x`, `weight.x`): an
/// incremental reconfig is refused (BadArguments); a whole new membership
/// may carry groups and weights, and needs a quorum by its own rule among
/// the leader and its synced learners (3 and 1 here).
#[test]
fn a_hierarchical_configuration_changes_only_as_a_whole() {
    let (mut h, _) = reconfigurable_leader_without_auth();
    let grouped = format!(
        "{}\ngroup.1=1:2:3\nweight.2=0",
        MEMBERS.replace("\nversion=0", "")
    );
    h.m.server_mut()
        .set_quorum_config(QuorumConfig::parse(&grouped).unwrap());
    let three = "server.1=127.0.0.1:2888:3888:participant;2181,\
                 server.2=127.0.0.1:2889:3889:participant;2182,\
                 server.3=127.0.0.1:2890:3890:participant;2183";
    let mut xid = 40;
    for (req, code) in [
        (remove("2", -1), ErrorCode::BadArguments),
        (join("server.4=127.0.0.1:1:2;2184"), ErrorCode::BadArguments),
        // 1 weighs nothing: 3 alone holds half of group 1, not more.
        (
            members(&format!("{three},group.1=1:2:3,weight.1=0")),
            ErrorCode::NewConfigNoQuorum,
        ),
        (
            members(&format!("{three},group.1=1:2")),
            ErrorCode::BadArguments,
        ),
        // 2 weighs nothing: 1 and 3 hold all of group 1. Well formed, so
        // only the ACL stops it (the session is not the super user).
        (
            members(&format!("{three},group.1=1:2:3,weight.2=0")),
            ErrorCode::NoAuth,
        ),
        // Back to majorities.
        (members(three), ErrorCode::NoAuth),
    ] {
        let what = format!("{req:?}");
        xid += 1;
        assert_eq!(refusal_of(&mut h, xid, req), code, "{what}");
    }
}
