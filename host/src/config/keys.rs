//! The zoo.cfg keys wazoo knows, and what to tell an operator about one it
//! did not use.

/// Every key wazoo reads: what "did you mean" suggests for a misspelled
/// key (`Config::from_map` takes exactly these).
pub(super) const KEYS_READ: &[&str] = &[
    "4lw.commands.whitelist",
    "admin.commandURL",
    "admin.enableServer",
    "admin.forceHttps",
    "admin.idleTimeout",
    "admin.needClientAuth",
    "admin.portUnification",
    "admin.rateLimiterIntervalInMS",
    "admin.serverAddress",
    "admin.serverPort",
    "admin.snapshot.enabled",
    "admin.restore.enabled",
    "DigestAuthenticationProvider.superDigest",
    "audit.enable",
    "autopurge.purgeInterval",
    "autopurge.snapRetainCount",
    "clientPort",
    "clientPortAddress",
    "clientPortListenBacklog",
    "clientTcpKeepAlive",
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
    "localSessionsEnabled",
    "localSessionsUpgradingEnabled",
    "maxClientCnxns",
    "maxCnxns",
    "maxSessionTimeout",
    "metricsProvider.className",
    "metricsProvider.httpHost",
    "metricsProvider.httpPort",
    "minSessionTimeout",
    "multiAddress.enabled",
    "observerMasterPort",
    "oraclePath",
    "plugins.dir",
    "quorumListenOnAllIPs",
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
    "tcpKeepAlive",
    "tickTime",
    "wazoo.audit.file",
    "wazoo.client.ioThreads",
    "wazoo.client.maxOutboundBytes",
    "wazoo.client.maxUnsentReplyBytes",
    "wazoo.quorum.suspectMs",
    "wazoo.recipes.builtin",
    "wazoo.peers",
    "digest.enabled",
    "peerType",
    "zookeeper.datadir.autocreate",
    "znode.container.checkIntervalMs",
    "znode.container.maxNeverUsedIntervalMs",
    "znode.container.maxPerMinute",
];

/// Keys of ZooKeeper's zoo.cfg (Administrator's Guide, "Configuration
/// Parameters") that wazoo accepts and does not use, as the Guide spells
/// them: tuning of ZooKeeper's own JVM, threads, queues, batching and
/// caches, and settings of features that only a refused key turns on.
/// docs/ZOOCFG_KEYS.md gives each one's reason ("no meaning here").
pub(super) const ZOOKEEPER_KEYS_NOT_USED: &[&str] = &[
    "advancedFlowControlEnabled",
    "bitHashCacheSize",
    "cnxTimeout",
    "commitLogCount",
    "connectionDecreaseRatio",
    "connectionDropDecrease",
    "connectionDropIncrease",
    "connectionFreezeTime",
    "connectionTokenFillCount",
    "connectionTokenFillTime",
    "connectToLearnerMasterLimit",
    "electionPortBindRetry",
    "fastleader.maxNotificationInterval",
    "fastleader.minNotificationInterval",
    "flushDelay",
    "forward_learner_requests_to_commit_processor_disabled",
    "fsync.warningthresholdms",
    "globalOutstandingLimit",
    "jute.maxbuffer.extrasize",
    "leader.closeSocketAsync",
    "learner.asyncSending",
    "learner.closeSocketAsync",
    "maxBatchSize",
    "maxConcurrentDiffSyncs",
    "maxConcurrentSnapSyncs",
    "maxGetChildrenResponseCacheSize",
    "maxInProcessingDeadWatchers",
    "maxResponseCacheSize",
    "maxTimeToWaitForEpoch",
    "maxWriteQueuePollTime",
    "metricsProvider.exportJvmInfo",
    "metricsProvider.maxQueueSize",
    "metricsProvider.numWorkerThreads",
    "metricsProvider.workerShutdownTimeoutMs",
    "multiAddress.reachabilityCheckEnabled",
    "multiAddress.reachabilityCheckTimeoutMs",
    "observer.election.DelayMs",
    "observer.reconnectDelayMs",
    "preAllocSize",
    "quorumCnxnTimeoutMs",
    "requestStaleConnectionCheck",
    "requestStaleLatencyCheck",
    "requestThrottleDropStale",
    "requestThrottleStallTime",
    "serializeLastProcessedZxid.enabled",
    "serverCnxnFactory",
    "txnLogSizeLimitInKb",
    "watcherCleanIntervalInSeconds",
    "watcherCleanThreadsNum",
    "watcherCleanThreshold",
    "watchManagerName",
    "zookeeper.clientCnxnSocket",
    "zookeeper.commitProcessor.maxCommitBatchSize",
    "zookeeper.commitProcessor.maxReadBatchSize",
    "zookeeper.commitProcessor.numWorkerThreads",
    "zookeeper.connection_throttle_global_session_weight",
    "zookeeper.connection_throttle_local_session_weight",
    "zookeeper.connection_throttle_renew_session_weight",
    "zookeeper.connection_throttle_weight_enabled",
    "zookeeper.follower.skipLearnerRequestToNextProcessor",
    "zookeeper.messageTracker.BufferSize",
    "zookeeper.messageTracker.Enabled",
    "zookeeper.nio.numSelectorThreads",
    "zookeeper.nio.numWorkerThreads",
    "zookeeper.request_throttler.shutdownTimeout",
    "zookeeper.serverCnxnFactory",
];

/// Keys of the Guide that stop the start unless their value leaves off
/// what wazoo does not implement (`security_refusal`, `feature_refusal`;
/// docs/ZOOCFG_KEYS.md, "refused"), as the Guide spells them; with such a
/// value they are accepted and not used. (`group.N` and `weight.N` too.)
pub(super) const KEYS_REFUSED: &[&str] = &[
    "audit.impl.class",
    "client.portUnification",
    "connectionMaxTokens",
    "DigestAuthenticationProvider.digestAlg",
    "DigestAuthenticationProvider.enabled",
    "electionAlg",
    "emulate353TTLNodes",
    "enableEagerACLCheck",
    "fips-mode",
    "IPAuthenticationProvider.usexforwardedfor",
    "kerberos.canonicalizeHostNames",
    "kerberos.removeHostFromPrincipal",
    "kerberos.removeRealmFromPrincipal",
    "leaderServes",
    "netty.server.earlyDropSecureConnectionHandshakes",
    "outstandingHandshake.limit",
    "portUnification",
    "requestThrottleLimit",
    "skipACL",
    "snapshot.compression.method",
    "snapshot.trust.empty",
    "ssl.allowReverseDnsLookup",
    "ssl.clientHostnameVerification",
    "ssl.context.supplier.class",
    "ssl.crl",
    "ssl.ocsp",
    "ssl.quorum.allowReverseDnsLookup",
    "ssl.quorum.clientHostnameVerification",
    "ssl.quorum.context.supplier.class",
    "ssl.quorum.crl",
    "ssl.quorum.ocsp",
    "ssl.sslProvider",
    "syncEnabled",
    "throttledOpWaitTime",
    "zookeeper.db.autocreate",
    "zookeeper.ensembleAuthName",
];

/// What to tell an operator about a zoo.cfg key wazoo did not use: a
/// ZooKeeper key it ignores on purpose, or an unknown one with the closest
/// key wazoo reads (a misspelling is the likely cause).
pub fn unused_key_note(key: &str) -> String {
    let per_member = ["server.", "group.", "weight."].iter().any(|p| {
        key.strip_prefix(p)
            .is_some_and(|n| n.parse::<u64>().is_ok())
    });
    if ZOOKEEPER_KEYS_NOT_USED.contains(&key) || KEYS_REFUSED.contains(&key) || per_member {
        return format!("zoo.cfg key {key} is a ZooKeeper key that wazoo does not use");
    }
    let folded = key.to_ascii_lowercase();
    let closest = KEYS_READ
        .iter()
        .chain(ZOOKEEPER_KEYS_NOT_USED)
        .chain(KEYS_REFUSED)
        .map(|k| (strsim::jaro_winkler(&folded, &k.to_ascii_lowercase()), *k))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|(score, _)| *score >= 0.85);
    match closest {
        Some((_, k)) => format!("zoo.cfg key {key} is unknown; did you mean {k}?"),
        None => format!("zoo.cfg key {key} is unknown"),
    }
}
