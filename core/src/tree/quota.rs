//! Quotas as ZooKeeper 3.8 keeps them in the tree.
//!
//! A quota on `/a/b` is the node `/zookeeper/quota/a/b/zookeeper_limits`,
//! whose data is a [`StatsTrack`] string of limits (`count=10,bytes=-1`, or
//! with hard limits `count=-1,bytes=-1=;byteHardLimit=100;countHardLimit=10`),
//! next to `/zookeeper/quota/a/b/zookeeper_stats`, whose data the tree keeps
//! equal to the subtree's node count (the quota root included) and data
//! bytes, as `DataTree.updateQuotaStat` does.

use std::collections::BTreeMap;

/// `Quotas.quotaZookeeper`.
pub const QUOTA_ROOT: &str = "/zookeeper/quota";
/// `Quotas.limitNode`.
pub const LIMIT_NODE: &str = "zookeeper_limits";
/// `Quotas.statNode`.
pub const STAT_NODE: &str = "zookeeper_stats";

/// `Quotas.limitPath`.
pub fn limit_path(path: &str) -> String {
    format!("{QUOTA_ROOT}{path}/{LIMIT_NODE}")
}

/// `Quotas.statPath`.
pub fn stat_path(path: &str) -> String {
    format!("{QUOTA_ROOT}{path}/{STAT_NODE}")
}

/// For a node strictly below `/zookeeper/quota/` named `name`, the quota'd
/// path it belongs to (`/zookeeper/quota/a/b/x` -> `/a/b`); `None` elsewhere
/// and for the root (ZooKeeper keeps no quota on `/`).
pub fn quota_target<'a>(parent: &'a str, name: &str, wanted: &str) -> Option<&'a str> {
    if name != wanted {
        return None;
    }
    let rest = parent.strip_prefix(QUOTA_ROOT)?;
    if rest.len() > 1 && rest.starts_with('/') {
        Some(rest)
    } else {
        None
    }
}

/// ZooKeeper's `StatsTrack`: `key=value` pairs separated by `,` or `;`;
/// missing values read as -1.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsTrack {
    values: BTreeMap<String, i64>,
}

impl StatsTrack {
    /// Parses quota node data. Java throws on a malformed pair; this skips
    /// it, so a bad stats node can never stop the tree from applying txns.
    pub fn parse(data: &[u8]) -> StatsTrack {
        let mut values = BTreeMap::new();
        let s = String::from_utf8_lossy(data);
        for pair in s.split([',', ';']).filter(|p| !p.is_empty()) {
            // Java's split("=") drops trailing empty strings, so "bytes=5="
            // is ["bytes", "5"]; an empty value means -1.
            let mut kv = pair.split('=');
            let (Some(k), Some(v)) = (kv.next(), kv.next()) else {
                continue;
            };
            let v = if v.is_empty() {
                Ok(-1)
            } else {
                v.parse::<i64>()
            };
            if let Ok(v) = v {
                values.insert(k.to_string(), v);
            }
        }
        StatsTrack { values }
    }

    fn get(&self, key: &str) -> i64 {
        self.values.get(key).copied().unwrap_or(-1)
    }

    pub fn count(&self) -> i64 {
        self.get("count")
    }

    pub fn bytes(&self) -> i64 {
        self.get("bytes")
    }

    pub fn count_hard_limit(&self) -> i64 {
        self.get("countHardLimit")
    }

    pub fn byte_hard_limit(&self) -> i64 {
        self.get("byteHardLimit")
    }

    pub fn set_count(&mut self, v: i64) {
        self.values.insert("count".into(), v);
    }

    pub fn set_bytes(&mut self, v: i64) {
        self.values.insert("bytes".into(), v);
    }

    pub fn set_count_hard_limit(&mut self, v: i64) {
        self.values.insert("countHardLimit".into(), v);
    }

    pub fn set_byte_hard_limit(&mut self, v: i64) {
        self.values.insert("byteHardLimit".into(), v);
    }
}

/// `StatsTrack.toString`: `count` and `bytes` first, then, after an extra
/// `=` that old parsers ignore, the other keys sorted and `;`-separated.
impl std::fmt::Display for StatsTrack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "count={},bytes={}", self.count(), self.bytes())?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_track_reads_and_writes_zookeeper_3_8_strings() {
        let s = StatsTrack::parse(b"count=10,bytes=-1");
        assert_eq!((s.count(), s.bytes(), s.count_hard_limit()), (10, -1, -1));
        assert_eq!(s.to_string(), "count=10,bytes=-1");

        let mut h = StatsTrack::default();
        h.set_count(-1);
        h.set_bytes(-1);
        h.set_count_hard_limit(10);
        h.set_byte_hard_limit(100);
        let text = h.to_string();
        assert_eq!(
            text,
            "count=-1,bytes=-1=;byteHardLimit=100;countHardLimit=10"
        );
        let back = StatsTrack::parse(text.as_bytes());
        assert_eq!(back, h);
        assert_eq!(back.byte_hard_limit(), 100);

        // Garbage never panics; what parses is kept.
        let g = StatsTrack::parse(b",,count=x;bytes=;=;count;countHardLimit=3=4");
        assert_eq!((g.count(), g.bytes(), g.count_hard_limit()), (-1, -1, 3));
    }

    #[test]
    fn quota_targets_are_paths_strictly_below_the_quota_root() {
        assert_eq!(
            quota_target("/zookeeper/quota/a/b", LIMIT_NODE, LIMIT_NODE),
            Some("/a/b")
        );
        assert_eq!(
            quota_target("/zookeeper/quota", LIMIT_NODE, LIMIT_NODE),
            None
        );
        assert_eq!(
            quota_target("/zookeeper/quotax/a", LIMIT_NODE, LIMIT_NODE),
            None
        );
        assert_eq!(
            quota_target("/zookeeper/quota/a", STAT_NODE, LIMIT_NODE),
            None
        );
        assert_eq!(limit_path("/a"), "/zookeeper/quota/a/zookeeper_limits");
        assert_eq!(stat_path("/a"), "/zookeeper/quota/a/zookeeper_stats");
    }
}
