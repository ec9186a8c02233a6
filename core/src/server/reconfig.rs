//! The leader's prep of a `reconfig` request (ZooKeeper Dynamic
//! Reconfiguration, "Modifying the current dynamic configuration"), in the
//! order of ZooKeeper 3.8's PrepRequestProcessor: reconfiguration enabled,
//! an ensemble, no reconfiguration in flight, the expected version, the new
//! membership well formed (several address pairs for a member only with
//! `multiAddress.enabled`; two participants at least while
//! `standaloneEnabled` is true, as ZooKeeper requires), a quorum of it
//! synced with the leader, and last
//! WRITE on `/zookeeper/config` (read-only for `world:anyone`, so only the
//! super user passes). wazoo's own bounds (server ids 1 to 255, at most
//! 255 members) are checked after all of these. The txn carries the new configuration's text with
//! the txn's zxid as its version; every member activates it when it
//! applies it (see `apply.rs`).

use super::*;
use crate::quorum_config::{parse_server_line, QuorumConfig};
use wazoo_proto::ReconfigRequest;

/// The node that holds the configuration.
pub(crate) const CONFIG_NODE: &str = "/zookeeper/config";

/// A field of the request that is present: ZooKeeper's leader tells an
/// absent field by null; an empty string is taken as absent too (older
/// wazoo clients sent that).
fn given(f: &Option<String>) -> Option<&str> {
    f.as_deref().filter(|s| !s.trim().is_empty())
}

/// Preps a reconfig. `ensemble`: this member runs in an ensemble (it has
/// an active configuration). `synced` are the learners in sync with this
/// leader (`me`), whose acks count once the new configuration is active.
pub(super) fn prep_reconfig(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    auth: &AuthInfo,
    req: &ReconfigRequest,
    ensemble: bool,
    me: u64,
    synced: &[u64],
) -> Result<Txn, ErrorCode> {
    if !cfg.reconfig_enabled {
        return Err(ErrorCode::ReconfigDisabled);
    }
    let (committed, committed_stat) = view.tree.get_data(CONFIG_NODE).ok_or(ErrorCode::NoNode)?;
    let committed = committed.unwrap_or_default();
    if !ensemble || committed.is_empty() {
        // A standalone server has no membership to change (whatever an
        // imported tree holds): ZooKeeper's ZooKeeperServer (not a
        // leader's) answers Unimplemented.
        return Err(ErrorCode::Unimplemented);
    }
    let mut record = view.get(CONFIG_NODE).ok_or(ErrorCode::NoNode)?;
    if record.stat.mzxid != committed_stat.mzxid {
        return Err(ErrorCode::ReconfigInProgress);
    }
    let text = std::str::from_utf8(&committed).map_err(|_| ErrorCode::BadArguments)?;
    let current = QuorumConfig::parse(text).map_err(|e| {
        tracing::error!("the committed configuration does not parse: {e}");
        ErrorCode::BadArguments
    })?;
    if req.cur_config_id != -1 && req.cur_config_id != current.version {
        return Err(ErrorCode::BadVersion);
    }
    let mut next = match given(&req.new_members) {
        // Non-incremental: the whole membership, comma or line separated.
        Some(members) => {
            let text = members.replace(',', "\n");
            let mut c = QuorumConfig::parse_any_ids(&text).map_err(|e| bad(&e))?;
            if !cfg.multi_address_enabled {
                c.check_single_addresses().map_err(|e| bad(&e))?;
            }
            c.version = 0;
            c
        }
        None => {
            // ZooKeeper's PrepRequestProcessor: groups and weights are
            // changed only by giving the whole new configuration.
            if current.is_hierarchical() {
                return Err(bad(
                    "Incremental reconfiguration requested but last configuration seen has a non-majority quorum system",
                ));
            }
            let mut c = current.clone();
            if let Some(leaving) = given(&req.leaving_servers) {
                for id in leaving.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    let id: u64 = id
                        .parse()
                        .map_err(|_| bad(&format!("leaving server id {id:?} is not a number")))?;
                    c.servers.remove(&id);
                }
            }
            if let Some(joining) = given(&req.joining_servers) {
                for joiner in joining.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    let (key, spec) = joiner
                        .split_once('=')
                        .ok_or_else(|| bad("wrong format of server string"))?;
                    let id = key.trim().rsplit('.').next().unwrap_or_default();
                    let (id, entry) = parse_server_line(id, spec).map_err(|e| bad(&e))?;
                    if !cfg.multi_address_enabled {
                        entry.check_single_address(id).map_err(|e| bad(&e))?;
                    }
                    if entry.client.is_none() {
                        return Err(bad(&format!(
                            "server.{id}: each server should have 3 ports specified (the client port after ';')"
                        )));
                    }
                    c.servers.insert(id, entry);
                }
            }
            c
        }
    };
    next.validate().map_err(|e| bad(&e))?;
    if cfg.standalone_enabled && next.voters().len() < 2 {
        return Err(bad(
            "reconfig failed - new configuration must include at least 2 followers",
        ));
    }
    // ZooKeeper's Leader.isQuorumSynced: the participants of the new
    // configuration that are this leader or in sync with it must be a
    // quorum of it (by its own rule: majority, or groups and weights), or
    // the new configuration could not commit anything.
    let rule = next.quorum_rule().map_err(|e| bad(&e))?;
    let voters = next.voters();
    let live: Vec<u64> = synced.iter().copied().chain([me]).collect();
    if !rule.contains_quorum(&voters, &live) {
        return Err(ErrorCode::NewConfigNoQuorum);
    }
    acl::check(&record.acl, perms::WRITE, auth)?;
    // wazoo's own bounds come after ZooKeeper's checks, so a client that
    // may not reconfigure hears NoAuth as from ZooKeeper.
    next.check_ids().map_err(|e| bad(&e))?;
    next.version = view.zxid.to_wire();
    let data = next.render().into_bytes();
    check_data_size(cfg, Some(&data))?;
    record.stat.mzxid = view.zxid.to_wire();
    record.stat.mtime = view.time_ms;
    record.stat.version = -1;
    record.stat.data_length = data.len() as i32;
    record.data = recipes::record_data(Some(&data));
    view.set(CONFIG_NODE, Some(record));
    Ok(Txn::Reconfig { data })
}

fn bad(why: &str) -> ErrorCode {
    tracing::info!("reconfig refused: {why}");
    ErrorCode::BadArguments
}
