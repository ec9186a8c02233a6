//! What a run samples of the servers around its window: CPU time, and on
//! ensembles each member's mode and sessions.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use zookeeper_client as zk;

use super::Target;
use crate::servers::{cpu_secs, machine_busy_secs};

/// CPU seconds so far.
pub(crate) struct CpuSample {
    /// Each server process (one, or every member).
    pub(crate) servers: Vec<f64>,
    pub(crate) client: f64,
    pub(crate) idle: f64,
    /// Every task on the machine.
    pub(crate) busy: f64,
    /// irq + softirq.
    pub(crate) irq: f64,
}

pub(crate) fn cpu_sample(target: &Target) -> Result<CpuSample> {
    let (busy, irq) = machine_busy_secs()?;
    let mut idle = 0.0;
    for &p in &target.idle_pids {
        idle += cpu_secs(Some(p)).unwrap_or(0.0);
    }
    let servers = target
        .server_pids
        .iter()
        .map(|&p| cpu_secs(Some(p)).with_context(|| format!("server process {p} is gone")))
        .collect::<Result<Vec<_>>>()?;
    Ok(CpuSample {
        servers,
        client: cpu_secs(None)?,
        idle,
        busy,
        irq,
    })
}

/// How many of `sessions` each member holds, from the `sid=0x...` of its
/// `cons` (-1 when a member does not answer).
pub(super) async fn sessions_per_member(
    members: &[SocketAddr],
    sessions: &[zk::Client],
) -> Vec<i64> {
    let members = members.to_vec();
    let ids: Vec<i64> = sessions.iter().map(|c| c.session_id().0).collect();
    tokio::task::spawn_blocking(move || {
        members
            .iter()
            .map(|&a| match wazoo_testkit::four_letter_word(a, "cons") {
                Ok(text) => {
                    let held = cons_session_ids(&text);
                    ids.iter().filter(|id| held.contains(id)).count() as i64
                }
                Err(_) => -1,
            })
            .collect()
    })
    .await
    .unwrap_or_default()
}

/// The session ids (`sid=0x...`) in a `cons` answer.
pub fn cons_session_ids(cons: &str) -> Vec<i64> {
    cons.split("sid=0x")
        .skip(1)
        .filter_map(|rest| {
            let hex: String = rest.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
            u64::from_str_radix(&hex, 16).ok().map(|v| v as i64)
        })
        .collect()
}

/// Each member's `srvr` mode.
pub(super) async fn member_modes(members: &[SocketAddr]) -> Vec<String> {
    let members = members.to_vec();
    tokio::task::spawn_blocking(move || {
        members
            .iter()
            .map(|&a| {
                crate::ensembles::quick_mode(a, Duration::from_secs(2))
                    .unwrap_or_else(|| "not serving".to_string())
            })
            .collect()
    })
    .await
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_from_cons() {
        // ZooKeeper's and wazoo's `cons` lines look alike.
        let cons =
            " /127.0.0.1:50012[1](queued=0,recved=5,sent=5,sid=0x100012ab0000,lop=PING,est=1)\n \
                    /127.0.0.1:50014[1](queued=0,recved=1,sent=1,sid=0xff,est=2)\n \
                    /127.0.0.1:50016[0](queued=0,recved=1,sent=0)\n";
        assert_eq!(cons_session_ids(cons), vec![0x100012ab0000, 0xff]);
    }
}
