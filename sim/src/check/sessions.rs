//! Sessions and their ephemerals (ZooKeeper Programmer's Guide, "Ephemeral
//! Nodes" and "ZooKeeper Sessions"): an ephemeral znode exists only while
//! the session that created it lives, and an expired session's ephemerals
//! are gone everywhere.
//!
//! The committed sequence is checked as the [`super::Shadow`] applies it
//! (no session owns ephemerals after its close, no closed session is
//! created again). Here: every live member's own tables (each ephemeral's
//! owner is in the member's session table, so the member would expire
//! it), and at the end of a run, that a session its client abandoned long
//! enough ago has expired on every member.

use wazoo_core::server::Server;

/// Each ephemeral's owner is a session this member knows.
pub fn check_member(id: u64, server: &Server) -> Result<(), String> {
    for owner in server.tree().sessions_with_ephemerals() {
        if server.sessions().get(owner).is_none() {
            return Err(format!(
                "sessions: member {id} holds ephemerals {:?} of session 0x{owner:x}, which is not in its session table (they would never expire)",
                server.tree().ephemerals(owner)
            ));
        }
    }
    Ok(())
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a session expires
/// when the ensemble has not heard from its client within the timeout,
/// and the leader decides it (a follower asks the leader about a session
/// it does not know). So a client must not be told its session expired
/// while `leader`, leading since before the client asked, holds it live.
pub fn check_told_expired(
    leader: u64,
    server: &Server,
    leading_before_the_ask: bool,
    session: i64,
) -> Result<(), String> {
    if leading_before_the_ask && server.sessions().is_live(session) {
        return Err(format!(
            "sessions: a client was told session 0x{session:x} expired while leader {leader} holds it live"
        ));
    }
    Ok(())
}

/// At the end: `session`, abandoned by its client, is gone from `server`.
pub fn check_expired(id: u64, server: &Server, session: i64) -> Result<(), String> {
    let left = server.tree().ephemerals(session);
    if !left.is_empty() {
        return Err(format!(
            "sessions: member {id} still holds ephemerals {left:?} of session 0x{session:x}, abandoned by its client long before"
        ));
    }
    if server.sessions().is_live(session) {
        return Err(format!(
            "sessions: member {id} still has session 0x{session:x} live, abandoned by its client long before"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wazoo_core::recipe::RecipeWaits;
    use wazoo_core::server::ServerConfig;
    use wazoo_core::time::Now;
    use wazoo_core::tree::DataTree;
    use wazoo_core::txn::{CreateTxn, NodeKind, Txn, TxnHeader};
    use wazoo_proto::{Acl, Id};

    fn tree_with_ephemeral_of(owner: i64) -> DataTree {
        let mut t = DataTree::new();
        let hdr = TxnHeader {
            session_id: owner,
            cxid: 1,
            zxid: 1,
            time_ms: 0,
        };
        let create = Txn::Create(CreateTxn {
            path: "/e".into(),
            data: Some(vec![]),
            acl: vec![Acl {
                perms: 31,
                id: Id::new("world", "anyone"),
            }],
            ephemeral_owner: owner,
            parent_cversion: 1,
            kind: NodeKind::Regular,
        });
        t.apply(&hdr, &create).unwrap();
        t
    }

    #[test]
    fn an_ephemeral_of_an_unknown_session_fails() {
        let now = Now::same(0);
        let orphan = Server::recovered(
            ServerConfig::default(),
            tree_with_ephemeral_of(0x55),
            Vec::new(),
            RecipeWaits::default(),
            wazoo_zab::Zxid(1),
            now,
        );
        assert!(check_member(1, &orphan).is_err());
        assert!(check_expired(1, &orphan, 0x55).is_err());
        let owned = Server::recovered(
            ServerConfig::default(),
            tree_with_ephemeral_of(0x55),
            vec![wazoo_proto::SessionRecord {
                id: 0x55,
                timeout_ms: 4000,
                verifier: None,
            }],
            RecipeWaits::default(),
            wazoo_zab::Zxid(1),
            now,
        );
        check_member(1, &owned).unwrap();
        assert!(check_told_expired(1, &owned, true, 0x55).is_err());
        check_told_expired(1, &owned, false, 0x55).unwrap();
        check_told_expired(1, &owned, true, 0x66).unwrap();
        assert!(check_expired(1, &owned, 0x55).is_err());
        check_expired(1, &owned, 0x66).unwrap();
    }
}
