//! The zoo.cfg keys wazoo knows, and what to tell an operator about one it
//! did not use.

/// Every key wazoo reads: what "did you mean" suggests for a misspelled
/// key (`Config::from_map` takes exactly these).
pub(super) const KEYS_READ: &[&str] = &[
    "4lw.commands.whitelist",
    "DigestAuthenticationProvider.superDigest",
    "autopurge.purgeInterval",
    "autopurge.snapRetainCount",
    "clientPort",
    "clientPortAddress",
    "dataDir",
    "dataLogDir",
    "dynamicConfigFile",
    "enforceQuota",
    "extendedTypesEnabled",
    "forceSync",
    "initLimit",
    "jute.maxbuffer",
    "largeRequestMaxBytes",
    "largeRequestThreshold",
    "maxClientCnxns",
    "maxSessionTimeout",
    "metricsProvider.httpHost",
    "metricsProvider.httpPort",
    "minSessionTimeout",
    "plugins.dir",
    "readonlymode.enabled",
    "recipe.cacheDir",
    "recipe.deadlineMs",
    "recipe.fuel",
    "recipe.maxNotifications",
    "recipe.maxOps",
    "recipe.maxReplyBytes",
    "recipe.maxWaitsPerSession",
    "recipe.memoryBytes",
    "recipe.workers",
    "reconfigEnabled",
    "snapCount",
    "standaloneEnabled",
    "syncLimit",
    "tickTime",
    "wazoo.client.maxOutboundBytes",
    "wazoo.client.maxUnsentReplyBytes",
    "wazoo.quorum.suspectMs",
    "wazoo.recipes.builtin",
    "znode.container.checkIntervalMs",
    "znode.container.maxPerMinute",
];

/// Keys of ZooKeeper 3.8's zoo.cfg (Administrator's Guide, "Configuration
/// Parameters") that wazoo accepts and does not use: tuning for ZooKeeper's
/// own JVM, threads, caches and admin server. (Security keys are not here:
/// those wazoo does not implement stop the start.)
const ZOOKEEPER_KEYS_NOT_USED: &[&str] = &[
    "admin.commandURL",
    "admin.enableServer",
    "admin.idleTimeout",
    "admin.serverAddress",
    "admin.serverPort",
    "audit.enable",
    "clientTcpKeepAlive",
    "cnxTimeout",
    "commitLogCount",
    "connectToLearnerMasterLimit",
    "digest.enabled",
    "electionAlg",
    "electionPortBindRetry",
    "emulate353TTLNodes",
    "fsync.warningthresholdms",
    "globalOutstandingLimit",
    "leaderServes",
    "localSessionsEnabled",
    "localSessionsUpgradingEnabled",
    "maxCnxns",
    "maxGetChildrenResponseCacheSize",
    "maxResponseCacheSize",
    "metricsProvider.className",
    "metricsProvider.exportJvmInfo",
    "multiAddress.enabled",
    "multiAddress.reachabilityCheckEnabled",
    "multiAddress.reachabilityCheckTimeoutMs",
    "observer.election.DelayMs",
    "observer.reconnectDelayMs",
    "observerMasterPort",
    "oraclePath",
    "preAllocSize",
    "quorumCnxnTimeoutMs",
    "quorumListenOnAllIPs",
    "requestThrottleLimit",
    "serverCnxnFactory",
    "snapSizeLimitInKb",
    "snapshot.trust.empty",
    "syncEnabled",
    "tcpKeepAlive",
    "txnLogSizeLimitInKb",
    "znode.container.maxNeverUsedIntervalMs",
];

/// What to tell an operator about a zoo.cfg key wazoo did not use: a
/// ZooKeeper key it ignores on purpose, or an unknown one with the closest
/// key wazoo reads (a misspelling is the likely cause).
pub fn unused_key_note(key: &str) -> String {
    let per_member = ["server.", "group.", "weight."].iter().any(|p| {
        key.strip_prefix(p)
            .is_some_and(|n| n.parse::<u64>().is_ok())
    });
    if ZOOKEEPER_KEYS_NOT_USED.contains(&key) || per_member {
        return format!("zoo.cfg key {key} is a ZooKeeper key that wazoo does not use");
    }
    let folded = key.to_ascii_lowercase();
    let closest = KEYS_READ
        .iter()
        .chain(ZOOKEEPER_KEYS_NOT_USED)
        .map(|k| (strsim::jaro_winkler(&folded, &k.to_ascii_lowercase()), *k))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|(score, _)| *score >= 0.85);
    match closest {
        Some((_, k)) => format!("zoo.cfg key {key} is unknown; did you mean {k}?"),
        None => format!("zoo.cfg key {key} is unknown"),
    }
}
