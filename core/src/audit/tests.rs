//! The text of audit records, field by field, against ZooKeeper's
//! (ZooKeeper Audit Logging, "ZooKeeper Audit Logs" and "Who is taken as
//! user in audit logs?"; ZooKeeper 3.8's `AuditEvent` and `AuditHelper`).

use super::*;
use crate::txn::{CreateTxn, NodeKind};
use wazoo_proto::{CreateRequest, Id};

fn auth(ids: &[(&str, &str)]) -> AuthInfo {
    AuthInfo {
        ids: ids.iter().map(|(s, i)| Id::new(s, i)).collect(),
    }
}

fn create(path: &str, mode: CreateMode) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: Some(Vec::new()),
        acl: vec![Acl {
            perms: wazoo_proto::perms::ALL,
            id: Id::new("world", "anyone"),
        }],
        flags: mode.flags(),
        ttl: None,
    }
}

fn request(req: &Request) -> AuditRequest {
    let who = auth(&[("ip", "127.0.0.1")]);
    AuditRequest::of(req, 0x1000a3f2c8b0001, &who, Some("127.0.0.1".into())).expect("audited")
}

fn created(path: &str) -> Txn {
    Txn::Create(CreateTxn {
        path: path.into(),
        data: None,
        acl: Vec::new(),
        ephemeral_owner: 0,
        parent_cversion: 1,
        kind: NodeKind::Regular,
    })
}

#[test]
fn fields_are_tab_separated_in_zookeepers_order_with_the_result_last() {
    let r = AuditRecord {
        session: Some(0x19344730000),
        user: AuditUser::Client(Some("192.168.1.2,zkcli@HADOOP.COM".into())),
        ip: Some("192.168.1.2".into()),
        operation: AuditOp::Create,
        znode: Some("/a".into()),
        znode_type: Some(CreateMode::Persistent),
        acl: None,
        result: AuditResult::Success,
    };
    assert_eq!(
        r.line("zookeeper"),
        "session=0x19344730000\tuser=192.168.1.2,zkcli@HADOOP.COM\tip=192.168.1.2\t\
         operation=create\tznode=/a\tznode_type=persistent\tresult=success"
    );
}

#[test]
fn server_records_carry_the_servers_user_and_no_session() {
    let start = AuditRecord::server(AuditOp::ServerStart, AuditResult::Success);
    assert_eq!(
        start.line("root"),
        "user=root\toperation=serverStart\tresult=success"
    );
    let stop = AuditRecord::server(AuditOp::ServerStop, AuditResult::Invoked);
    assert_eq!(
        stop.line("zk"),
        "user=zk\toperation=serverStop\tresult=invoked"
    );
}

#[test]
fn a_field_without_a_value_is_left_out() {
    let mut r = AuditRecord::server(AuditOp::ServerStart, AuditResult::Failure);
    r.user = AuditUser::Client(None);
    assert_eq!(r.line("root"), "operation=serverStart\tresult=failure");
}

#[test]
fn session_ids_are_lower_case_hex_without_leading_zeros_as_javas_to_hex_string() {
    let r = ephemeral_cleanup(0x0100_0a3f_2c8b_0001, "/e".into());
    assert_eq!(
        r.line("root"),
        "session=0x1000a3f2c8b0001\tuser=root\t\
         operation=ephemeralZNodeDeletionOnSessionCloseOrExpire\tznode=/e\tresult=success"
    );
    // A negative id (server ids from 128) prints as its two's complement.
    let r = ephemeral_cleanup(-0x7f00_0000_0000_0000, "/e".into());
    assert!(r.line("u").starts_with("session=0x8100000000000000\t"));
}

#[test]
fn the_user_is_every_identitys_user_name_joined_by_commas_in_javas_set_order() {
    // The order ZooKeeper 3.8 gave for these (its connection keeps them
    // in a hash set): the digest user (of password `secret`) before the
    // address it came from.
    assert_eq!(
        users_of(&auth(&[
            ("ip", "127.0.0.1"),
            ("digest", "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E="),
        ]))
        .as_deref(),
        Some("alice,127.0.0.1")
    );
    let all = auth(&[
        ("ip", "127.0.0.1"),
        ("digest", "alice:Yc8gD3oW5o1U7a0rQK5XmX4bzbs="),
        ("sasl", "zkcli@HADOOP.COM"),
        ("x509", "CN=client"),
    ]);
    let mut names: Vec<String> = users_of(&all)
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["127.0.0.1", "CN=client", "alice", "zkcli@HADOOP.COM"]
    );
    // super has no provider, so no user name; nothing left is no field.
    assert_eq!(
        users_of(&auth(&[("ip", "10.0.0.1"), ("super", "")])).as_deref(),
        Some("10.0.0.1")
    );
    assert_eq!(users_of(&auth(&[("super", "")])), None);
    assert_eq!(users_of(&auth(&[])), None);
}

#[test]
fn identities_iterate_as_a_java_hash_set_of_ids_would() {
    // Java: "ip".hashCode() = 3367 and "10.0.0.3".hashCode() = 511552168
    // give Id(ip, 10.0.0.3) the hash 37 * (37 * 17 + 3367) + 511552168 =
    // 511700020, slot 11 of 16 once spread; "sasl"/"carol" also slot 11
    // (added later, so after it), "digest"/"bob:x" slot 12.
    let ids = [
        Id::new("digest", "bob:x"),
        Id::new("ip", "10.0.0.3"),
        Id::new("sasl", "carol"),
    ];
    let order: Vec<&str> = java_set_order(&ids).iter().map(|i| i.id.as_str()).collect();
    assert_eq!(order, ["10.0.0.3", "carol", "bob:x"]);
    // Twelve or more identities double the table: nothing is lost.
    let many: Vec<Id> = (0..20)
        .map(|i| Id::new("ip", &format!("10.0.0.{i}")))
        .collect();
    let mut ordered: Vec<&str> = java_set_order(&many)
        .iter()
        .map(|i| i.id.as_str())
        .collect();
    ordered.sort();
    let mut all: Vec<&str> = many.iter().map(|i| i.id.as_str()).collect();
    all.sort();
    assert_eq!(ordered, all);
}

#[test]
fn addresses_print_as_java_writes_them() {
    let ip = |s: &str| java_host_address(s.parse().unwrap());
    assert_eq!(ip("127.0.0.1"), "127.0.0.1");
    assert_eq!(ip("::1"), "0:0:0:0:0:0:0:1");
    assert_eq!(ip("fe80::1:abcd"), "fe80:0:0:0:0:0:1:abcd");
    assert_eq!(ip("::ffff:10.0.0.7"), "10.0.0.7");
    assert_eq!(
        users_of(&auth(&[("ip", "::1")])).as_deref(),
        Some("0:0:0:0:0:0:0:1")
    );
}

#[test]
fn acls_print_as_zkutil_writes_them_with_entries_run_together() {
    let acl = [
        Acl {
            perms: wazoo_proto::perms::ALL,
            id: Id::new("world", "anyone"),
        },
        Acl {
            perms: wazoo_proto::perms::READ | wazoo_proto::perms::ADMIN,
            id: Id::new("digest", "bob:h="),
        },
    ];
    assert_eq!(acl_text(&acl), "world:anyone:cdrwadigest:bob:h=:ra");
    assert_eq!(acl_text(&[]), "");
}

#[test]
fn create_modes_print_as_the_lower_cased_names_of_zookeepers_create_mode() {
    let names: Vec<&str> = (0..=6)
        .map(|f| create_mode_name(CreateMode::from_flags(f).unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            "persistent",
            "ephemeral",
            "persistent_sequential",
            "ephemeral_sequential",
            "container",
            "persistent_with_ttl",
            "persistent_sequential_with_ttl",
        ]
    );
}

#[test]
fn a_sequential_creates_success_names_the_created_node_and_its_failure_the_asked_one() {
    let req = request(&Request::Create2(create(
        "/q/item-",
        CreateMode::EphemeralSequential,
    )));
    let ok = req.succeeded(&created("/q/item-0000000003"));
    assert_eq!(
        ok.iter().map(|r| r.line("u")).collect::<Vec<_>>(),
        [
            "session=0x1000a3f2c8b0001\tuser=127.0.0.1\tip=127.0.0.1\toperation=create\t\
          znode=/q/item-0000000003\tznode_type=ephemeral_sequential\tresult=success"
        ]
    );
    assert_eq!(
        req.failed().line("u"),
        "session=0x1000a3f2c8b0001\tuser=127.0.0.1\tip=127.0.0.1\toperation=create\t\
         znode=/q/item-\tznode_type=ephemeral_sequential\tresult=failure"
    );
}

#[test]
fn set_acl_records_carry_the_acl_the_client_sent() {
    let req = request(&Request::SetAcl {
        path: "/a".into(),
        acl: vec![Acl {
            perms: wazoo_proto::perms::ALL,
            id: Id::new("auth", ""),
        }],
        version: -1,
    });
    let ok = req.succeeded(&Txn::SetAcl {
        path: "/a".into(),
        acl: Vec::new(),
        aversion: 1,
    });
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0].acl.as_deref(), Some("auth::cdrwa"));
    assert_eq!(req.failed().acl.as_deref(), Some("auth::cdrwa"));
}

#[test]
fn a_multi_logs_each_create_delete_and_set_data_or_one_failure_without_a_path() {
    let req = request(&Request::Multi(vec![
        Request::Create(create("/m", CreateMode::Persistent)),
        Request::Create(create("/m/s-", CreateMode::PersistentSequential)),
        Request::SetData {
            path: "/m".into(),
            data: None,
            version: -1,
        },
        Request::Check {
            path: "/m".into(),
            version: -1,
        },
        Request::Delete {
            path: "/m/s-0000000000".into(),
            version: -1,
        },
    ]));
    let txn = Txn::Multi(vec![
        created("/m"),
        created("/m/s-0000000000"),
        Txn::SetData {
            path: "/m".into(),
            data: None,
            version: 1,
        },
        Txn::Check { path: "/m".into() },
        Txn::Delete {
            path: "/m/s-0000000000".into(),
        },
    ]);
    let got: Vec<(AuditOp, Option<String>, Option<CreateMode>)> = req
        .succeeded(&txn)
        .into_iter()
        .map(|r| (r.operation, r.znode, r.znode_type))
        .collect();
    assert_eq!(
        got,
        [
            (
                AuditOp::Create,
                Some("/m".into()),
                Some(CreateMode::Persistent)
            ),
            // Looked up by the created path, which the request did not
            // name: no type, as in ZooKeeper.
            (AuditOp::Create, Some("/m/s-0000000000".into()), None),
            (AuditOp::SetData, Some("/m".into()), None),
            (AuditOp::Delete, Some("/m/s-0000000000".into()), None),
        ]
    );
    assert_eq!(
        req.failed().line("u"),
        "session=0x1000a3f2c8b0001\tuser=127.0.0.1\tip=127.0.0.1\t\
         operation=multiOperation\tresult=failure"
    );
}

#[test]
fn reads_sync_close_and_create_ttl_are_not_audited() {
    let who = auth(&[]);
    for req in [
        Request::GetData {
            path: "/a".into(),
            watch: false,
        },
        Request::Sync {
            path: Some("/a".into()),
        },
        Request::CloseSession,
        Request::CreateTtl(create("/t", CreateMode::PersistentWithTtl)),
    ] {
        assert_eq!(AuditRequest::of(&req, 1, &who, None), None, "{req:?}");
    }
    // A create whose flags name no mode: ZooKeeper fails to audit it.
    let mut bad = create("/b", CreateMode::Persistent);
    bad.flags = 99;
    assert_eq!(AuditRequest::of(&Request::Create(bad), 1, &who, None), None);
}

#[test]
fn a_reconfig_names_the_config_node_on_success_and_no_node_on_failure() {
    let req = request(&Request::Reconfig(wazoo_proto::ReconfigRequest {
        joining_servers: None,
        leaving_servers: Some("3".into()),
        new_members: None,
        cur_config_id: -1,
    }));
    let ok = req.succeeded(&Txn::Reconfig { data: Vec::new() });
    assert_eq!(ok[0].znode.as_deref(), Some("/zookeeper/config"));
    assert_eq!(req.failed().znode, None);
    assert_eq!(req.failed().operation, AuditOp::Reconfig);
}
