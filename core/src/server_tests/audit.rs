//! Where and when the pipeline makes audit records (ZooKeeper Audit
//! Logging, "ZooKeeper Audit Logs"), input by input.

use super::*;
use crate::audit::{AuditOp, AuditRecord, AuditResult, AuditUser};

fn audited() -> Harness {
    Harness::new(ServerConfig {
        audit: true,
        ..ServerConfig::default()
    })
}

fn summary(records: &[AuditRecord]) -> Vec<(AuditOp, Option<&str>, AuditResult)> {
    records
        .iter()
        .map(|r| (r.operation, r.znode.as_deref(), r.result))
        .collect()
}

#[test]
fn without_audit_enable_no_record_is_made() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(1, create("/a", b"", CreateMode::Persistent)));
    err(h.call(1, create("/a", b"", CreateMode::Persistent)));
    assert!(h.audits.is_empty());
}

// As ZooKeeper logs a refusal when its error txn reaches the final
// processor, behind the txns proposed before it: the refusal's record
// waits for them, as its reply does.
#[test]
fn a_refusals_record_comes_after_the_writes_proposed_before_it() {
    let mut h = audited();
    h.connect(1);
    h.auto_sync = false;
    h.send(1, 1, create("/a", b"", CreateMode::Persistent));
    h.send(1, 2, create("/a", b"", CreateMode::Persistent));
    assert!(h.audits.is_empty(), "nothing before the log is durable");
    h.sync();
    assert_eq!(
        summary(&h.audits),
        [
            (AuditOp::Create, Some("/a"), AuditResult::Success),
            (AuditOp::Create, Some("/a"), AuditResult::Failure),
        ]
    );
    let r = &h.audits[0];
    assert_eq!(r.ip.as_deref(), Some("127.0.0.1"));
    assert_eq!(r.user, AuditUser::Client(Some("127.0.0.1".into())));
    assert_eq!(r.znode_type, Some(CreateMode::Persistent));
}

#[test]
fn a_closed_sessions_ephemerals_are_each_recorded_as_the_servers_doing() {
    let mut h = audited();
    let session = h.connect(1).session_id;
    h.connect(2);
    ok(h.call(1, create("/e1", b"", CreateMode::Ephemeral)));
    ok(h.call(1, create("/e2", b"", CreateMode::Ephemeral)));
    ok(h.call(2, create("/keep", b"", CreateMode::Ephemeral)));
    h.audits.clear();
    h.send(1, 9, Request::CloseSession);
    assert_eq!(
        summary(&h.audits),
        [
            (AuditOp::EphemeralCleanup, Some("/e1"), AuditResult::Success),
            (AuditOp::EphemeralCleanup, Some("/e2"), AuditResult::Success),
        ]
    );
    assert!(h
        .audits
        .iter()
        .all(|r| r.user == AuditUser::Server && r.session == Some(session) && r.ip.is_none()));
}
