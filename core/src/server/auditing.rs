//! Audit records (`audit.enable`; ZooKeeper Audit Logging): where the
//! pipeline makes them, as ZooKeeper 3.8 logs them (see [`crate::audit`]).
//!
//! - A client's write is audited on the member its connection is on: the
//!   leader or a standalone member when its txn is applied (or when prep
//!   refuses it, in order behind the txns already proposed, as ZooKeeper
//!   logs a refusal when its error txn passes the final processor), a
//!   follower when the committed txn carrying it (or the leader's error
//!   txn) is applied. Either way the record does not depend on the client
//!   still being connected (what to record rides with the proposal, or,
//!   on a follower, waits by session and cxid).
//! - A session's close is audited on every member that applies it: one
//!   record per ephemeral it deletes. A log replayed at start makes none
//!   (ZooKeeper's replay logs its closes again).
//!
//! Records leave as [`Output::Audit`]; none is made unless
//! [`ServerConfig::audit`] is on.

use super::*;
use crate::audit::{ephemeral_cleanup, AuditRecord, AuditRequest};

impl Server {
    /// What to audit of a client's request, if audit is on and ZooKeeper
    /// audits its kind.
    pub(super) fn audit_request(
        &self,
        conn: ConnId,
        session: i64,
        req: &Request,
    ) -> Option<Box<AuditRequest>> {
        if !self.cfg.audit {
            return None;
        }
        let c = self.conns.get(&conn)?;
        let ip = c.peer.map(|p| crate::audit::java_host_address(p.ip()));
        AuditRequest::of(req, session, &c.auth, ip).map(Box::new)
    }

    pub(super) fn audit(&mut self, record: AuditRecord) {
        self.stats.audit_records += 1;
        self.out.push(Output::Audit(Box::new(record)));
    }

    /// A request refused in prep: its record goes out once every txn
    /// proposed before it is applied (its reply waits as long).
    pub(super) fn audit_refused(&mut self, audit: Option<Box<AuditRequest>>) {
        let Some(a) = audit else { return };
        let record = a.failed();
        match self.last_outstanding() {
            Some(zxid) => self.audit_after.push_back((zxid, record)),
            None => self.audit(record),
        }
    }

    /// The records of a request whose txn (or error txn) was applied.
    pub(super) fn audit_applied(&mut self, a: &AuditRequest, txn: &Txn, refused: bool) {
        if refused || matches!(txn, Txn::Error { .. }) {
            self.audit(a.failed());
        } else {
            for r in a.succeeded(txn) {
                self.audit(r);
            }
        }
    }

    /// Refusals waiting for txns now applied.
    pub(super) fn release_audits(&mut self) {
        while self
            .audit_after
            .front()
            .is_some_and(|(z, _)| *z <= self.last_applied)
        {
            let (_, r) = self.audit_after.pop_front().expect("front exists");
            self.audit(r);
        }
    }

    /// [`Server::apply_txn`] for a txn committed while the member runs,
    /// auditing the ephemerals a session's close deletes.
    pub(super) fn apply_live(
        &mut self,
        hdr: &TxnHeader,
        txn: &Txn,
    ) -> Result<Option<ApplyError>, String> {
        let mut gone = if self.cfg.audit && matches!(txn, Txn::CloseSession) {
            self.tree.ephemerals(hdr.session_id)
        } else {
            Vec::new()
        };
        let refused = self.apply_txn(hdr, txn)?;
        if refused.is_none() {
            gone.sort_unstable();
            for path in gone {
                self.audit(ephemeral_cleanup(hdr.session_id, path));
            }
        }
        Ok(refused)
    }
}
