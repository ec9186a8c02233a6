//! `setquota`, `listquota` and `delquota`, as zkCli 3.8 runs them
//! (`SetQuotaCommand`, `ListQuotaCommand`, `DelQuotaCommand`).
//!
//! A quota on `/a/b` is the node `/zookeeper/quota/a/b/zookeeper_limits`
//! (the limits) beside `/zookeeper/quota/a/b/zookeeper_stats` (what the
//! subtree holds, kept up to date by the server). The shell only writes
//! these nodes; the server counts and, with `enforceQuota`, refuses writes
//! past a hard limit (ZooKeeper Administrator's Guide, "Quotas").

use std::collections::BTreeMap;
use std::io::Write;

use wazoo_proto::{Acl, CreateMode};

use super::parse::Args;
use super::{cmd_failed, wr, OpError};
use crate::client::Client;
use crate::error::Error;

/// `Quotas.quotaZookeeper`.
const QUOTA_ROOT: &str = "/zookeeper/quota";
/// `Quotas.limitNode`.
const LIMIT_NODE: &str = "zookeeper_limits";
/// `Quotas.statNode`.
const STAT_NODE: &str = "zookeeper_stats";
/// How many nodes the check for a quota below the path visits at most: the
/// quota tree mirrors only the paths that have quotas, so a real one is
/// far smaller; a bound keeps a hostile tree from holding the shell.
const CHILD_CHECK_NODES_MAX: usize = 100_000;

/// `Quotas.quotaPath`: `/a/b` -> `/zookeeper/quota/a/b`.
fn quota_path(path: &str) -> String {
    if path == "/" {
        QUOTA_ROOT.to_string()
    } else {
        format!("{QUOTA_ROOT}{path}")
    }
}

/// `Quotas.trimQuotaPath`: `/zookeeper/quota/a/b` -> `/a/b`.
fn trim_quota_path(p: &str) -> &str {
    p.strip_prefix(QUOTA_ROOT).unwrap_or(p)
}

/// ZooKeeper's `StatsTrack`: `key=value` pairs separated by `,` or `;`,
/// printed `count` and `bytes` first, then (after an extra `=` that old
/// parsers ignore) the others, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct StatsTrack {
    values: BTreeMap<String, i64>,
}

impl StatsTrack {
    /// Parses node data; a pair that does not parse is skipped, and an empty
    /// value reads as -1, as Java's `split("=")` leaves it.
    pub(super) fn parse(data: &[u8]) -> StatsTrack {
        let mut values = BTreeMap::new();
        let s = String::from_utf8_lossy(data);
        for pair in s.split([',', ';']).filter(|p| !p.is_empty()) {
            let mut kv = pair.split('=');
            let (Some(k), Some(v)) = (kv.next(), kv.next()) else {
                continue;
            };
            let v = if v.is_empty() { Ok(-1) } else { v.parse() };
            if let (false, Ok(v)) = (k.is_empty(), v) {
                values.insert(k.to_string(), v);
            }
        }
        StatsTrack { values }
    }

    fn get(&self, key: &str) -> i64 {
        self.values.get(key).copied().unwrap_or(-1)
    }

    fn set(&mut self, key: &str, v: i64) {
        self.values.insert(key.to_string(), v);
    }
}

impl std::fmt::Display for StatsTrack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "count={},bytes={}", self.get("count"), self.get("bytes"))?;
        let mut rest = self
            .values
            .iter()
            .filter(|(k, _)| k.as_str() != "count" && k.as_str() != "bytes")
            .peekable();
        if rest.peek().is_some() {
            write!(f, "=")?;
            for (k, v) in rest {
                write!(f, ";{k}={v}")?;
            }
        }
        Ok(())
    }
}

/// The flags of setquota and delquota, and the StatsTrack key each sets.
const FLAGS: [(char, &str); 4] = [
    ('n', "count"),
    ('b', "bytes"),
    ('N', "countHardLimit"),
    ('B', "byteHardLimit"),
];

/// zkCli takes one of `-n`, `-b`, `-N`, `-B` per command (an option group).
fn one_flag_at_most(a: &Args) -> Result<(), OpError> {
    if FLAGS.iter().filter(|(f, _)| a.has(*f)).count() > 1 {
        return Err(OpError::Cmd(super::CommandError::Usage(format!(
            "only one of -n, -b, -N, -B at a time; usage: {}",
            a.spec.usage
        ))));
    }
    Ok(())
}

/// `setquota -n|-b|-N|-B val path`: prints nothing on success.
pub(super) async fn set_quota(zk: &Client, a: &Args, path: &str) -> Result<(), OpError> {
    if path.starts_with(QUOTA_ROOT) {
        return Err(cmd_failed(format!(
            "cannot set a quota under the path: {QUOTA_ROOT}"
        )));
    }
    let mut quota = StatsTrack::default();
    for (_, key) in FLAGS {
        quota.set(key, -1);
    }
    one_flag_at_most(a)?;
    let mut any = false;
    for (flag, key) in FLAGS {
        let Some(v) = a.value(flag) else { continue };
        any = true;
        // -n and -N are Java ints, -b and -B longs.
        let n: Result<i64, _> = if flag == 'n' || flag == 'N' {
            v.parse::<i32>().map(i64::from)
        } else {
            v.parse::<i64>()
        };
        let Ok(n) = n else {
            return Err(cmd_failed(
                "NumberFormatException happens when parsing the option value",
            ));
        };
        match flag {
            'n' | 'N' if n <= 0 => {
                return Err(cmd_failed("the num quota must be greater than zero"))
            }
            'b' | 'B' if n < 0 => {
                return Err(cmd_failed(
                    "the bytes quota must be greater than or equal to zero",
                ))
            }
            _ => quota.set(key, n),
        }
    }
    if !any {
        return Err(OpError::Cmd(a.usage()));
    }
    create_quota(zk, path, &quota).await
}

/// `SetQuotaCommand.createQuota`.
async fn create_quota(zk: &Client, path: &str, quota: &StatsTrack) -> Result<(), OpError> {
    if zk.exists(path).await?.is_none() {
        return Err(cmd_failed(format!("{path} does not exist.")));
    }
    check_no_child_quota(zk, path).await?;
    check_no_parent_quota(zk, path).await?;
    let open = Acl::open_unsafe();
    if zk.exists(QUOTA_ROOT).await?.is_none() {
        create_if_missing(zk, QUOTA_ROOT).await?;
    }
    let mut dir = QUOTA_ROOT.to_string();
    for part in path.split('/').filter(|s| !s.is_empty()) {
        dir.push('/');
        dir.push_str(part);
        if zk.exists(&dir).await?.is_none() {
            create_if_missing(zk, &dir).await?;
        }
    }
    let limit = format!("{dir}/{LIMIT_NODE}");
    let stat = format!("{dir}/{STAT_NODE}");
    if zk.exists(&limit).await?.is_none() {
        zk.create(
            &limit,
            quota.to_string().as_bytes(),
            &open,
            CreateMode::Persistent,
        )
        .await?;
        let mut stats = StatsTrack::default();
        stats.set("count", 0);
        stats.set("bytes", 0);
        zk.create(
            &stat,
            stats.to_string().as_bytes(),
            &open,
            CreateMode::Persistent,
        )
        .await?;
    } else {
        let (data, _) = zk.get_data(&limit).await?;
        let mut current = StatsTrack::parse(&data);
        for (_, key) in FLAGS {
            let v = quota.get(key);
            if v > -1 {
                current.set(key, v);
            }
        }
        zk.set_data(&limit, current.to_string().as_bytes(), None)
            .await?;
    }
    Ok(())
}

/// Creates an empty persistent node; one that appeared meanwhile is fine.
async fn create_if_missing(zk: &Client, path: &str) -> Result<(), OpError> {
    match zk
        .create(path, b"", &Acl::open_unsafe(), CreateMode::Persistent)
        .await
    {
        Ok(_) | Err(Error::NodeExists) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// `checkIfChildQuota`: no quota may sit below the new one.
async fn check_no_child_quota(zk: &Client, path: &str) -> Result<(), OpError> {
    let top = quota_path(path);
    let mut stack = vec![top.clone()];
    let mut visited = 0usize;
    while let Some(node) = stack.pop() {
        visited += 1;
        if visited > CHILD_CHECK_NODES_MAX {
            return Err(cmd_failed(format!(
                "{top} has more than {CHILD_CHECK_NODES_MAX} nodes below it: not checked"
            )));
        }
        let kids = match zk.get_children(&node).await {
            Ok(k) => k,
            Err(Error::NoNode) => continue,
            Err(e) => return Err(e.into()),
        };
        if node != top && kids.iter().any(|k| k == LIMIT_NODE) {
            return Err(cmd_failed(format!(
                "{path} has a child {} which has a quota",
                trim_quota_path(&node)
            )));
        }
        for k in kids {
            stack.push(wazoo_proto::path::join(&node, &k));
        }
    }
    Ok(())
}

/// `checkIfParentQuota`: no quota may sit above the new one.
async fn check_no_parent_quota(zk: &Client, path: &str) -> Result<(), OpError> {
    let parts: Vec<&str> = path.split('/').collect();
    let mut dir = QUOTA_ROOT.to_string();
    for part in parts.iter().take(parts.len().saturating_sub(1)).skip(1) {
        dir.push('/');
        dir.push_str(part);
        let kids = match zk.get_children(&dir).await {
            Ok(k) => k,
            Err(Error::NoNode) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if kids.iter().any(|k| k == LIMIT_NODE) {
            return Err(cmd_failed(format!(
                "{path} has a parent {} which has a quota",
                trim_quota_path(&dir)
            )));
        }
    }
    Ok(())
}

/// `listquota path`: the limits, then what the subtree holds.
pub(super) async fn list_quota(
    zk: &Client,
    path: &str,
    out: &mut (dyn Write + Send),
) -> Result<(), OpError> {
    let dir = quota_path(path);
    let missing = || cmd_failed(format!("quota for {path} does not exist."));
    let limit = match zk.get_data(&format!("{dir}/{LIMIT_NODE}")).await {
        Ok((d, _)) => StatsTrack::parse(&d),
        Err(Error::NoNode) => return Err(missing()),
        Err(e) => return Err(e.into()),
    };
    let stats = match zk.get_data(&format!("{dir}/{STAT_NODE}")).await {
        Ok((d, _)) => StatsTrack::parse(&d),
        Err(Error::NoNode) => return Err(missing()),
        Err(e) => return Err(e.into()),
    };
    wr(writeln!(out, "Output quota for {path} {limit}"))?;
    wr(writeln!(out, "Output stat for {path} {stats}"))
}

/// `delquota [-n|-b|-N|-B] path`: without a flag the whole quota goes
/// (and the quota tree's directories left empty); with flags, only those
/// limits (set back to -1).
pub(super) async fn del_quota(
    zk: &Client,
    a: &Args,
    path: &str,
    out: &mut (dyn Write + Send),
) -> Result<(), OpError> {
    one_flag_at_most(a)?;
    let dir = quota_path(path);
    let limit = format!("{dir}/{LIMIT_NODE}");
    if zk.exists(&limit).await?.is_none() {
        return wr(writeln!(out, "Quota does not exist for {path}"));
    }
    let data = match zk.get_data(&limit).await {
        Ok((d, _)) => d,
        Err(Error::NoNode) => return Err(cmd_failed(format!("quota for {path} does not exist."))),
        Err(e) => return Err(e.into()),
    };
    let flagged: Vec<&str> = FLAGS
        .iter()
        .filter(|(f, _)| a.has(*f))
        .map(|(_, k)| *k)
        .collect();
    if flagged.is_empty() {
        for k in zk.get_children(&dir).await? {
            zk.delete(&wazoo_proto::path::join(&dir, &k), None).await?;
        }
        // `trimProcQuotas`: remove the directories left empty, upwards.
        let mut p = dir;
        while p != QUOTA_ROOT && p.starts_with(QUOTA_ROOT) {
            if !zk.get_children(&p).await?.is_empty() {
                break;
            }
            zk.delete(&p, None).await?;
            p = wazoo_proto::path::parent(&p).to_string();
        }
    } else {
        let mut current = StatsTrack::parse(&data);
        for key in flagged {
            current.set(key, -1);
        }
        zk.set_data(&limit, current.to_string().as_bytes(), None)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_track_prints_as_zookeeper_3_8() {
        let mut q = StatsTrack::default();
        for (_, key) in FLAGS {
            q.set(key, -1);
        }
        q.set("count", 10);
        assert_eq!(
            q.to_string(),
            "count=10,bytes=-1=;byteHardLimit=-1;countHardLimit=-1"
        );
        assert_eq!(StatsTrack::parse(q.to_string().as_bytes()), q);
        let s = StatsTrack::parse(b"count=7,bytes=0");
        assert_eq!(s.to_string(), "count=7,bytes=0");
        // Garbage is skipped, never a panic.
        let g = StatsTrack::parse(b",,count=x;bytes=;=;count;=5;countHardLimit=3=4");
        assert_eq!(g.to_string(), "count=-1,bytes=-1=;countHardLimit=3");
    }

    #[test]
    fn quota_paths_mirror_the_tree() {
        assert_eq!(quota_path("/a/b"), "/zookeeper/quota/a/b");
        assert_eq!(trim_quota_path("/zookeeper/quota/a/b"), "/a/b");
    }
}
