use super::keys::{KEYS_READ, KEYS_REFUSED, ZOOKEEPER_KEYS_NOT_USED};
use super::*;

#[test]
fn a_minimal_standalone_config_gets_zookeeper_defaults() {
    let c = Config::parse("dataDir=/tmp/zk\nclientPort=2181\n").unwrap();
    assert_eq!(c.tick_time_ms, 3000);
    assert_eq!(c.min_session_timeout_ms, 6000, "2 x tickTime");
    assert_eq!(c.max_session_timeout_ms, 60000, "20 x tickTime");
    assert_eq!(c.max_client_cnxns, 60);
    assert_eq!(c.data_log_dir, PathBuf::from("/tmp/zk"));
    assert_eq!(c.four_letter_words, vec!["srvr"]);
    assert!(!c.is_ensemble());
    assert_eq!(c.max_buffer, 0xfffff);
}

#[test]
fn session_timeouts_are_negotiated_into_the_configured_range() {
    let c = Config::parse("tickTime=2000\ndataDir=/d\n").unwrap();
    assert_eq!(c.negotiate_timeout(1000), 4000);
    assert_eq!(c.negotiate_timeout(10_000), 10_000);
    assert_eq!(c.negotiate_timeout(1_000_000), 40_000);
    assert_eq!(c.negotiate_timeout(-5), 4000);
}

#[test]
fn server_lines_parse_roles_and_client_ports() {
    let c = Config::parse(
        "dataDir=/d\nserver.1=127.0.0.1:2888:3888\nserver.3=h3:1:2:observer;2183\nserver.2=h2:1:2:participant;0.0.0.0:2182\n",
    )
    .unwrap();
    assert_eq!(c.servers.len(), 3);
    assert_eq!(c.servers[0].id, 1);
    assert_eq!(
        c.servers[1].client_addr,
        Some((Some("0.0.0.0".into()), 2182))
    );
    assert!(c.servers[2].observer);
    assert_eq!(c.servers[2].client_addr, Some((None, 2183)));
}

#[test]
fn bad_values_are_named_in_the_error() {
    let e = Config::parse("dataDir=/d\ntickTime=abc\n").unwrap_err();
    assert!(format!("{e:#}").contains("tickTime"), "{e:#}");
    let e = Config::parse("clientPort=1\n").unwrap_err();
    assert!(format!("{e:#}").contains("dataDir"), "{e:#}");
    let e = Config::parse("dataDir=/d\nserver.1=h:1\n").unwrap_err();
    assert!(format!("{e:#}").contains("server.1"), "{e:#}");
    let e = Config::parse("dataDir=/d\nkey=\\u00zz\n").unwrap_err();
    assert!(format!("{e:#}").contains("line 2"), "{e:#}");
}

#[test]
fn client_byte_bounds_default_to_multiples_of_jute_maxbuffer() {
    let c = Config::parse("dataDir=/d\n").unwrap();
    assert_eq!(c.max_unsent_reply_bytes, 2 * 0xfffff);
    assert_eq!(c.max_outbound_bytes, 8 * 0xfffff);
    let c = Config::parse("dataDir=/d\njute.maxbuffer=4000000\n").unwrap();
    assert_eq!(c.max_outbound_bytes, 32_000_000);
    let c = Config::parse(
        "dataDir=/d\nwazoo.client.maxOutboundBytes=3000\nwazoo.client.maxUnsentReplyBytes=1000\n",
    )
    .unwrap();
    assert_eq!(
        (c.max_outbound_bytes, c.max_unsent_reply_bytes),
        (3000, 1000)
    );
    assert!(!c.unknown.contains_key("wazoo.client.maxOutboundBytes"));
    let e = Config::parse("dataDir=/d\nwazoo.client.maxOutboundBytes=1000\n").unwrap_err();
    assert!(
        format!("{e:#}").contains("wazoo.client.maxOutboundBytes"),
        "{e:#}"
    );
}

#[test]
fn unknown_keys_are_kept_not_fatal() {
    let c = Config::parse("dataDir=/d\nfoo.bar=1\n").unwrap();
    assert_eq!(c.unknown.get("foo.bar").map(String::as_str), Some("1"));
}

// ZooKeeper Administrator's Guide, "Configuration Parameters": a
// misspelled key is not an error, but the warning says what was meant.
#[test]
fn an_unknown_key_gets_the_closest_known_key() {
    assert_eq!(
        unused_key_note("tickTme"),
        "zoo.cfg key tickTme is unknown; did you mean tickTime?"
    );
    assert_eq!(
        unused_key_note("maxclientcnxns"),
        "zoo.cfg key maxclientcnxns is unknown; did you mean maxClientCnxns?"
    );
    assert_eq!(
        unused_key_note("autopurge.purgeIntreval"),
        "zoo.cfg key autopurge.purgeIntreval is unknown; did you mean autopurge.purgeInterval?"
    );
    assert_eq!(
        unused_key_note("emulate353TTLNodes"),
        "zoo.cfg key emulate353TTLNodes is a ZooKeeper key that wazoo does not use"
    );
    assert_eq!(unused_key_note("zzz.qqq"), "zoo.cfg key zzz.qqq is unknown");
    // Every key wazoo reads is one from_map takes: none is left over.
    let text: String = KEYS_READ
        .iter()
        .map(|k| format!("{k}={}\n", sample_value(k)))
        .collect();
    let c = Config::parse(&text).unwrap();
    assert!(c.unknown.is_empty(), "{:?}", c.unknown);
}

fn sample_value(key: &str) -> &'static str {
    match key {
        "dataDir" | "dataLogDir" | "plugins.dir" => "/d",
        "clientPortAddress" | "metricsProvider.httpHost" | "admin.serverAddress" => "127.0.0.1",
        "admin.enableServer" => "true",
        "admin.forceHttps" | "admin.portUnification" | "admin.needClientAuth" => "false",
        "admin.commandURL" => "/commands",
        "DigestAuthenticationProvider.superDigest" => "super:x",
        "recipe.memoryBytes" => "65536",
        "wazoo.client.maxUnsentReplyBytes" => "2097152",
        "wazoo.client.maxOutboundBytes" => "8388608",
        "forceSync" => "no",
        "wazoo.peers" => "zookeeper",
        "peerType" => "observer",
        "quorumListenOnAllIPs" | "clientTcpKeepAlive" | "tcpKeepAlive" => "true",
        "zookeeper.datadir.autocreate" => "false",
        "metricsProvider.className" => {
            "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"
        }
        _ if key.ends_with("Enabled")
            || key.ends_with("enabled")
            || key == "enforceQuota"
            || key == "wazoo.recipes.builtin"
            || key == "audit.enable" =>
        {
            "false"
        }
        _ => "7",
    }
}

/// `dataDir=/d` plus one line; the error text if it is refused.
fn refusal(line: &str) -> Option<String> {
    Config::parse(&format!("dataDir=/d\n{line}\n"))
        .err()
        .map(|e| format!("{e:#}"))
}

// ZooKeeper Administrator's Guide, "Cluster Options" (local sessions,
// leaderServes, electionAlg), "Experimental Options/Features" and "Audit
// Logs" (audit.impl.class), "AdminServer configuration": a key that asks for a
// feature wazoo does not implement yet stops the start, naming the key;
// the same key turning the feature off is accepted.
#[test]
fn every_feature_key_wazoo_does_not_implement_is_refused_by_name() {
    let refused = [
        (
            "audit.impl.class=com.example.MyAuditLogger",
            "an audit logger other than ZooKeeper's",
        ),
        ("leaderServes=no", "a leader that serves no clients"),
        ("electionAlg=0", "election algorithm"),
    ];
    for (line, why) in refused {
        let e = refusal(line).unwrap_or_else(|| panic!("{line} was accepted"));
        let key = line.split('=').next().unwrap();
        assert!(e.contains(key), "{line}: {e}");
        assert!(e.contains(why), "{line}: {e}");
        assert!(e.contains("ZooKeeper features not implemented"), "{e}");
    }
    let accepted = [
        "audit.enable=false",
        "audit.impl.class=org.apache.zookeeper.audit.Slf4jAuditLogger",
        "localSessionsEnabled=false",
        "localSessionsEnabled=true\nlocalSessionsUpgradingEnabled=true",
        "multiAddress.enabled=false",
        "multiAddress.enabled=true",
        "observerMasterPort=2191",
        "observerMasterPort=0",
        "leaderServes=yes",
        "electionAlg=3",
        "admin.enableServer=false",
        "admin.enableServer=false\nadmin.serverPort=9090\nadmin.serverAddress=127.0.0.1",
        "admin.enableServer=true\nadmin.snapshot.enabled=false\nadmin.restore.enabled=false",
    ];
    for line in accepted {
        assert_eq!(refusal(line), None, "{line}");
    }
}

// ZooKeeper Administrator's Guide, "Experimental Options/Features"
// (audit.enable, audit.impl.class) and ZooKeeper Audit Logging, "ZooKeeper
// Audit Log Configuration": audit.enable turns the records on, in either
// spelling; the file is wazoo's own key (ZooKeeper names it in logback).
#[test]
fn audit_enable_turns_audit_records_on_and_wazoo_audit_file_names_their_file() {
    let c = Config::parse("dataDir=/d\n").unwrap();
    assert!(!c.audit_enabled, "off by default");
    assert_eq!(crate::audit::audit_path(&c), None);
    for line in ["audit.enable=true", "zookeeper.audit.enable=TRUE"] {
        let c = Config::parse(&format!("dataDir=/d\n{line}\n")).unwrap();
        assert!(c.audit_enabled, "{line}");
        assert!(c.unknown.is_empty(), "{line}: {:?}", c.unknown);
        assert_eq!(
            crate::audit::audit_path(&c),
            Some(PathBuf::from("/d/zookeeper_audit.log"))
        );
    }
    let c = Config::parse(
        "dataDir=/d\naudit.enable=true\nwazoo.audit.file=/var/log/wazoo/audit.log\n\
         audit.impl.class=org.apache.zookeeper.audit.Slf4jAuditLogger\n",
    )
    .unwrap();
    assert!(c.unknown.is_empty(), "{:?}", c.unknown);
    assert_eq!(
        crate::audit::audit_path(&c),
        Some(PathBuf::from("/var/log/wazoo/audit.log"))
    );
    let e = refusal("audit.enable=yes").expect("refused");
    assert!(e.contains("audit.enable"), "{e}");
}

// ZooKeeper Administrator's Guide, "Advanced Configuration": forceSync
// `no` writes the log without syncing it to the media. ZooKeeper syncs
// unless the value is exactly `no` (so `false` syncs); wazoo takes the two
// words only and names the key otherwise.
#[test]
fn force_sync_takes_yes_or_no_and_reaches_the_log_options() {
    let c = Config::parse("dataDir=/d\n").unwrap();
    assert!(c.force_sync, "syncing is the default");
    assert!(crate::member::log_options(&c).force_sync);
    let c = Config::parse("dataDir=/d\nforceSync=no\n").unwrap();
    assert!(!c.force_sync);
    assert!(!crate::member::log_options(&c).force_sync);
    assert!(
        Config::parse("dataDir=/d\nforceSync=yes\n")
            .unwrap()
            .force_sync
    );
    let e = refusal("forceSync=false").expect("refused");
    assert!(e.contains("forceSync") && e.contains("yes or no"), "{e}");
}

// ZooKeeper Administrator's Guide, "Encryption, Authentication,
// Authorization Options": every key that configures TLS, SASL,
// Kerberos, x509 or enforced authentication stops the start, and the
// error names it.
#[test]
fn every_security_key_wazoo_does_not_implement_is_refused_by_name() {
    let refused = [
        // TLS that wazoo does not implement (config/tls.rs has the rest).
        "client.secure=true",
        "client.portUnification=true",
        "portUnification=true",
        "ssl.keyStore.type=BKS",
        "ssl.trustStore.type=PKCS11",
        "ssl.ciphersuites=TLS_RSA_WITH_AES_128_CBC_SHA",
        "ssl.enabledProtocols=TLSv1",
        "ssl.authProvider=custom",
        "ssl.sslProvider=OpenSSL",
        "ssl.context.supplier.class=com.example.Supplier",
        "ssl.quorum.keyStore.type=BKS",
        "ssl.quorum.clientAuth=none",
        "zookeeper.ssl.keyStore.type=BKS",
        "requireClientAuthScheme=sasl",
        "allowSaslFailedClients=true",
        "quorum.auth.enableSasl=true",
        "quorum.auth.learnerRequireSasl=true",
        "quorum.auth.serverRequireSasl=true",
        "quorum.auth.learner.saslLoginContext=QuorumLearner",
        "quorum.auth.server.saslLoginContext=QuorumServer",
        "quorum.auth.kerberos.servicePrincipal=zkquorum/_HOST",
        "kerberos.removeHostFromPrincipal=true",
        "kerberos.removeRealmFromPrincipal=true",
        "kerberos.canonicalizeHostNames=true",
        "jaasLoginRenew=3600000",
        "zookeeper.sasl.serverconfig=QuorumServer",
        "java.security.auth.login.config=/jaas.conf",
        "ensembleAuthName=prod",
        "zookeeper.authProvider.2=com.example.Custom",
        "DigestAuthenticationProvider.enabled=false",
        "DigestAuthenticationProvider.digestAlg=SHA3-256",
        "skipACL=yes",
        // A value that is not the accepted "off" spelling is refused,
        // not guessed at.
        "client.portUnification=maybe",
        "PORTUNIFICATION=true",
    ];
    for line in refused {
        let key = line.split('=').next().unwrap();
        let err = refusal(line).unwrap_or_else(|| panic!("{line} was accepted"));
        assert!(err.contains(key), "{line}: the error names the key: {err}");
        assert!(err.contains("docs/SECURITY.md"), "{err}");
    }
}

// A typical zoo.cfg that turns the secure features off explicitly still
// starts: those values are what wazoo does.
#[test]
fn security_switches_set_to_off_are_accepted() {
    let accepted = [
        "sslQuorum=false",
        "portUnification=false",
        "sslQuorumReloadCertFiles=false",
        "client.secure=false",
        "client.portUnification=false",
        "client.certReload=false",
        "admin.forceHttps=false",
        "sessionRequireClientSASLAuth=false",
        "enforce.auth.enabled=false",
        "enforce.auth.enabled=FALSE",
        "enforce.auth.schemes=sasl",
        "allowSaslFailedClients=false",
        "quorum.auth.enableSasl=false",
        "quorum.auth.learnerRequireSasl=false",
        "quorum.auth.serverRequireSasl=false",
        "zookeeper.quorum.auth.enableSasl=false",
        "authProvider.1=org.apache.zookeeper.server.auth.DigestAuthenticationProvider",
        "authProvider.ip=org.apache.zookeeper.server.auth.IPAuthenticationProvider",
        "DigestAuthenticationProvider.enabled=true",
        "DigestAuthenticationProvider.digestAlg=SHA1",
        "skipACL=no",
        "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
        "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
        "X509AuthenticationProvider.superUser=CN=admin",
        "ssl.authProvider=x509",
        "ssl.quorum.hostnameVerification=false",
    ];
    for line in accepted {
        if let Some(err) = refusal(line) {
            panic!("{line} was refused: {err}");
        }
    }
    let all = format!("dataDir=/d\n{}\n", accepted.join("\n"));
    Config::parse(&all).expect("all of them at once");
}

// ZooKeeper Administrator's Guide, "Encryption, Authentication,
// Authorization Options", and ZooKeeper 3.8's AuthenticationHelper:
// sessionRequireClientSASLAuth means `sasl`, enforce.auth.* names the
// schemes, and an enforced scheme without its provider stops the start.
#[test]
fn sasl_and_enforced_authentication_keys_are_read_as_zookeeper_reads_them() {
    let sasl = |text: &str| Config::parse(&format!("dataDir=/d\n{text}")).map(|c| c.sasl);
    let provider = "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n";
    let off = sasl("").unwrap();
    assert!(!off.provider && off.enforce_schemes.is_empty() && off.super_user.is_none());
    let c = sasl(&format!(
        "{provider}sessionRequireClientSASLAuth=true\nenforce.auth.schemes=digest\n"
    ))
    .unwrap();
    assert!(c.provider);
    assert_eq!(c.enforce_schemes, ["sasl"]);
    let c = sasl(&format!("{provider}zookeeper.enforce.auth.enabled=TRUE\nenforce.auth.schemes=sasl, digest\nzookeeper.superUser=admin\n")).unwrap();
    assert_eq!(c.enforce_schemes, ["sasl", "digest"]);
    assert_eq!(c.super_user.as_deref(), Some("admin"));
    let c = sasl("enforce.auth.enabled=false\nenforce.auth.schemes=sasl\n").unwrap();
    assert!(c.enforce_schemes.is_empty());
    for (bad, why) in [
        (
            "sessionRequireClientSASLAuth=true\n",
            "scheme sasl is not available",
        ),
        (
            "enforce.auth.enabled=true\n",
            "enforce.auth.schemes must be configured",
        ),
        (
            "enforce.auth.enabled=true\nenforce.auth.schemes=kerberos\n",
            "scheme kerberos",
        ),
        ("enforce.auth.enabled=yes\n", "must be true or false"),
    ] {
        let err = format!("{:#}", sasl(bad).unwrap_err());
        assert!(err.contains(why), "{bad}: {err}");
    }
}

#[test]
fn every_refused_key_is_named_in_one_error_without_its_value() {
    let err = format!(
        "{:#}",
        Config::parse(
            "dataDir=/d\nssl.context.supplier.class=com.example.SecretCtx\nssl.sslProvider=OpenSSL\nssl.keyStore.password=hunter2\njaasLoginRenew=1\n"
        )
        .unwrap_err()
    );
    for key in [
        "ssl.context.supplier.class",
        "ssl.sslProvider",
        "jaasLoginRenew",
    ] {
        assert!(err.contains(key), "{key} named: {err}");
    }
    assert!(!err.contains("hunter2"), "{err}");
    assert!(!err.contains("com.example.SecretCtx"), "{err}");
}

// No secret in a log line or in `conf`: a key naming a password or a
// secret keeps its value as `****` from the moment it is read.
#[test]
fn secret_values_are_redacted_everywhere_keys_are_echoed() {
    let c = Config::parse("dataDir=/d\nmy.db.Password=hunter2\nclient.secret=s3cr3t\nfoo=bar\n")
        .unwrap();
    assert_eq!(c.unknown["my.db.Password"], "****");
    assert_eq!(c.unknown["client.secret"], "****");
    assert_eq!(c.unknown["foo"], "bar", "only secrets are hidden");
    let shown = format!("{c:?}\n{}", c.conf_lines().join("\n"));
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(!shown.contains("s3cr3t"), "{shown}");
    assert_eq!(redact("ssl.quorum.trustStore.PASSWORD", "x"), "****");
    let e = format!(
        "{:#}",
        Config::parse("dataDir=/d\nssl.context.supplier.password hunter2\n").unwrap_err()
    );
    assert!(
        e.contains("ssl.context.supplier.password") && !e.contains("hunter2"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        Config::parse("dataDir=/d\nssl.keyStore.password=hunter2\\u12\n").unwrap_err()
    );
    assert!(e.contains("line 2") && !e.contains("hunter2"), "{e}");
    // `conf` says there is no secure port, as ZooKeeper does without one.
    assert_eq!(c.conf_lines()[1], "secureClientPort=-1");
    assert_eq!(redact("clientPort", "2181"), "2181");
}

/// ZooKeeper Dynamic Reconfiguration, "Changes to Configuration Format":
/// zoo.cfg as ZooKeeper 3.5+ rewrites it, the membership in the file that
/// `dynamicConfigFile` names, its version in the file's name.
#[test]
fn the_membership_is_read_from_the_dynamic_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let dynamic = dir.path().join("zoo.cfg.dynamic.100000000");
    std::fs::write(
        &dynamic,
        "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
         server.2=127.0.0.1:2889:3889:participant;2182\n\
         server.3=127.0.0.1:2890:3890:observer\n",
    )
    .unwrap();
    let cfg_path = dir.path().join("zoo.cfg");
    let text = format!(
        "dataDir={}\nreconfigEnabled=true\ndynamicConfigFile={}\n",
        dir.path().display(),
        dynamic.display()
    );
    std::fs::write(&cfg_path, &text).unwrap();
    let c = Config::load(&cfg_path).unwrap();
    assert_eq!(c.config_version, 0x1_0000_0000);
    assert!(c.reconfig_enabled);
    assert_eq!(
        c.servers
            .iter()
            .map(|s| (s.id, s.observer))
            .collect::<Vec<_>>(),
        vec![(1, false), (2, false), (3, true)]
    );
    assert_eq!(c.servers[1].client_addr, Some((None, 2182)));
    assert_eq!(
        c.quorum_config().render(),
        "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
         server.2=127.0.0.1:2889:3889:participant;0.0.0.0:2182\n\
         server.3=127.0.0.1:2890:3890:observer\n\
         version=100000000"
    );

    // A version= line in the file wins over its name.
    std::fs::write(
        &dynamic,
        "server.1=127.0.0.1:2888:3888\nversion=200000003\n",
    )
    .unwrap();
    assert_eq!(
        Config::load(&cfg_path).unwrap().config_version,
        0x2_0000_0003
    );

    // Membership in both files is refused, and so is a dynamic file that
    // holds anything but membership.
    std::fs::write(&cfg_path, format!("{text}server.1=127.0.0.1:2888:3888\n")).unwrap();
    let e = format!("{:#}", Config::load(&cfg_path).unwrap_err());
    assert!(e.contains("keep one of the two"), "{e}");
    std::fs::write(&cfg_path, &text).unwrap();
    std::fs::write(&dynamic, "clientPort=2181\n").unwrap();
    let e = format!("{:#}", Config::load(&cfg_path).unwrap_err());
    assert!(
        e.contains("only server.N, group.N, weight.N and version"),
        "{e}"
    );
}

// ZooKeeper Administrator's Guide, "Cluster Options" (multiAddress.enabled):
// a server.N line with several address pairs separated by `|` is refused
// while the key is false (its default), with ZooKeeper 3.8's words, in
// zoo.cfg and in a dynamic config file alike; with it, every pair is
// kept in the order listed, and `conf` shows them all.
#[test]
fn several_address_pairs_need_multi_address_enabled() {
    let lines = "server.1=127.0.0.1:2888:3888|127.0.0.2:2888:3888;2181\n\
                 server.2=127.0.0.1:2889:3889\n";
    let e = refusal(lines).expect("refused without multiAddress.enabled");
    assert!(
        e.contains(
            "Multiple address feature is disabled, but multiple addresses were specified for sid 1"
        ),
        "{e}"
    );
    for key in ["multiAddress.enabled", "zookeeper.multiAddress.enabled"] {
        let c = Config::parse(&format!("dataDir=/d\n{key}=true\n{lines}")).unwrap();
        assert!(c.multi_address_enabled, "{key}");
        let hosts: Vec<&str> = c.servers[0].addrs.iter().map(|a| a.host.as_str()).collect();
        assert_eq!(hosts, ["127.0.0.1", "127.0.0.2"], "{key}");
        assert!(c.unknown.is_empty(), "{:?}", c.unknown);
        assert!(c
            .conf_lines()
            .contains(&"server.1=127.0.0.1:2888:3888|127.0.0.2:2888:3888:participant".to_string()));
    }
    let e = refusal("multiAddress.enabled=yes").expect("refused");
    assert!(e.contains("must be true or false"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let dynamic = dir.path().join("zoo.cfg.dynamic.100000000");
    std::fs::write(&dynamic, lines).unwrap();
    let cfg_path = dir.path().join("zoo.cfg");
    let text = format!(
        "dataDir={}\ndynamicConfigFile={}\n",
        dir.path().display(),
        dynamic.display()
    );
    std::fs::write(&cfg_path, &text).unwrap();
    let e = format!("{:#}", Config::load(&cfg_path).unwrap_err());
    assert!(e.contains("Multiple address feature is disabled"), "{e}");
    std::fs::write(&cfg_path, format!("{text}multiAddress.enabled=true\n")).unwrap();
    let c = Config::load(&cfg_path).unwrap();
    assert_eq!(
        c.quorum_config().render(),
        "server.1=127.0.0.1:2888:3888|127.0.0.2:2888:3888:participant;0.0.0.0:2181\n\
         server.2=127.0.0.1:2889:3889:participant\n\
         version=100000000"
    );
}

// ZooKeeper Administrator's Guide, largeRequestThreshold: -1 or a positive
// size; anything else is named, not silently replaced.
#[test]
fn a_large_request_threshold_of_zero_or_below_minus_one_is_refused() {
    for bad in ["0", "-2"] {
        let e = Config::parse(&format!("dataDir=/d\nlargeRequestThreshold={bad}\n")).unwrap_err();
        assert!(format!("{e:#}").contains("largeRequestThreshold"), "{e:#}");
    }
    let c = Config::parse("dataDir=/d\nlargeRequestThreshold=4096\n").unwrap();
    assert_eq!(c.large_request_threshold, 4096);
    assert_eq!(
        Config::parse("dataDir=/d\n")
            .unwrap()
            .large_request_threshold,
        -1
    );
}

// docs/OPERATIONS.md, "Timing": the follower's suspicion (and the leader's
// lease under it) is a zoo.cfg key, 750 ms by default.
#[test]
fn the_suspicion_time_is_a_key_with_a_bounded_range() {
    assert_eq!(Config::parse("dataDir=/d\n").unwrap().suspect_ms, 750);
    let c = Config::parse("dataDir=/d\nwazoo.quorum.suspectMs=3000\n").unwrap();
    assert_eq!(c.suspect_ms, 3000);
    for bad in ["0", "3600001", "-5", "soon"] {
        let e = Config::parse(&format!("dataDir=/d\nwazoo.quorum.suspectMs={bad}\n")).unwrap_err();
        assert!(
            format!("{e:#}").contains("wazoo.quorum.suspectMs"),
            "{bad}: {e:#}"
        );
    }
    let z = crate::ensemble_member::zab_config(&c, 1).unwrap();
    assert_eq!(
        (z.suspect_ms(), z.tick_ms, z.sync_limit_ticks),
        (3000, 3000, 5)
    );
    assert!(z.lease_ms() < 3000, "the lease stays under the promise");
}

/// docs/ZOOCFG_KEYS.md, the table of every zoo.cfg key of ZooKeeper's
/// Administrator's Guide and what wazoo does with it.
const ZOOCFG_KEYS: &str = include_str!("../../../docs/ZOOCFG_KEYS.md");

/// The rows `(key, class)` of the table under `heading` in ZOOCFG_KEYS.
fn key_table(heading: &str) -> Vec<(String, String)> {
    let start = ZOOCFG_KEYS
        .find(heading)
        .unwrap_or_else(|| panic!("docs/ZOOCFG_KEYS.md has no {heading:?}"));
    let section = &ZOOCFG_KEYS[start + heading.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| {
            let (key, rest) = l.split_once("` | ").expect("a key cell");
            let class = rest.split(" | ").next().expect("a class cell");
            (key.to_string(), class.to_string())
        })
        .collect()
}

/// A key of the table as a zoo.cfg spells it: `server.x` is `server.1`.
fn concrete(key: &str) -> String {
    match key.strip_suffix(".x") {
        Some(prefix) => format!("{prefix}.1"),
        None => key.to_string(),
    }
}

/// zoo.cfg lines (after `dataDir=/d`) that set a `read` key of the Guide
/// to a value wazoo takes: the TLS keys with the stores their side needs.
fn read_sample(key: &str) -> String {
    let tls_value = |suffix: &str| match suffix {
        "keyStore.location" => "/k.pem",
        "trustStore.location" => "/t.pem",
        "keyStore.password" | "trustStore.password" => "pw",
        "keyStore.passwordPath" | "trustStore.passwordPath" => "/pw",
        "keyStore.type" | "trustStore.type" => "PEM",
        "protocol" | "enabledProtocols" => "TLSv1.3",
        "ciphersuites" => "TLS_AES_128_GCM_SHA256",
        "hostnameVerification" => "true",
        "clientAuth" => "need",
        "handshakeDetectionTimeoutMillis" => "5000",
        other => panic!("no sample for the TLS key suffix {other}"),
    };
    if let Some(suffix) = key.strip_prefix("ssl.quorum.") {
        return format!(
            "sslQuorum=true\nssl.quorum.keyStore.location=/k.pem\nssl.quorum.trustStore.location=/t.pem\n{key}={}",
            tls_value(suffix)
        );
    }
    let client_tls =
        "secureClientPort=2281\nssl.keyStore.location=/k.pem\nssl.trustStore.location=/t.pem";
    if let Some(suffix) = key.strip_prefix("ssl.").filter(|s| *s != "authProvider") {
        return format!("{client_tls}\n{key}={}", tls_value(suffix));
    }
    let sasl = "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider";
    match key {
        "secureClientPort" => client_tls.to_string(),
        "sslQuorum" => "sslQuorum=true\nssl.quorum.keyStore.location=/k.pem\nssl.quorum.trustStore.location=/t.pem".to_string(),
        "server.x" => "server.1=127.0.0.1:2888:3888".to_string(),
        "group.x" => "group.1=1:2:3".to_string(),
        "weight.x" => "weight.1=2".to_string(),
        "authProvider.x" => sasl.to_string(),
        "sessionRequireClientSASLAuth" => format!("{sasl}\n{key}=true"),
        "enforce.auth.enabled" => format!("{key}=true\nenforce.auth.schemes=digest"),
        "enforce.auth.schemes" => format!("{key}=digest"),
        "ssl.authProvider" => format!("{key}=x509"),
        "X509AuthenticationProvider.superUser" => format!("{key}=CN=admin"),
        "zookeeper.superUser" => format!("{key}=admin"),
        "sslQuorumReloadCertFiles" | "client.certReload" => format!("{key}=true"),
        // Alone, each must agree with the other keys' defaults.
        "maxSessionTimeout" => format!("{key}=100000"),
        "largeRequestMaxBytes" => format!("{key}=104857600"),
        _ => format!("{key}={}", sample_value(key)),
    }
}

/// A zoo.cfg line that sets a `refused` key of the Guide to a value that
/// asks for what wazoo does not implement.
fn refused_sample(key: &str) -> String {
    let value = match key {
        "electionAlg" => "0",
        "leaderServes" => "no",
        "skipACL" => "yes",
        "DigestAuthenticationProvider.enabled" | "syncEnabled" => "false",
        "zookeeper.db.autocreate" => "false",
        "DigestAuthenticationProvider.digestAlg" => "SHA3-256",
        "snapshot.compression.method" => "gz",
        "connectionMaxTokens"
        | "requestThrottleLimit"
        | "throttledOpWaitTime"
        | "outstandingHandshake.limit" => "250",
        _ => "true",
    };
    format!("{}={value}", concrete(key))
}

// ZooKeeper Administrator's Guide, "Configuration Parameters": every key
// it names is read, refused by name, or accepted as tuning that has no
// meaning in wazoo, as docs/ZOOCFG_KEYS.md says; none is ignored
// silently, and every key the code knows is in that table.
#[test]
fn every_key_of_the_administrators_guide_is_read_refused_or_listed_as_no_meaning_here() {
    let guide = key_table("## Keys of the Guide");
    let others = key_table("## Keys that are not in the Guide");
    // The Guide of ZooKeeper 3.9.5 names 198 keys (bullets split into the
    // keys they name, plus portUnification, zookeeper.serverCnxnFactory,
    // zookeeper.clientCnxnSocket, zookeeper.datadir.autocreate and
    // zookeeper.db.autocreate from its prose): a row lost is caught here.
    assert_eq!(guide.len(), 198, "rows of the Guide's table");
    let mut seen = std::collections::BTreeSet::new();
    for (key, class) in guide.iter().chain(&others) {
        assert!(seen.insert(key.clone()), "{key} is in the tables twice");
        let sample = match class.as_str() {
            "read" | "wazoo" => read_sample(key),
            "refused" => refused_sample(key),
            "no meaning here" => format!("{key}=7"),
            other => panic!("{key}: unknown class {other:?}"),
        };
        let parsed = Config::parse(&format!("dataDir=/d\n{sample}\n"));
        let concrete = concrete(key);
        match class.as_str() {
            "read" | "wazoo" => {
                let c = parsed.unwrap_or_else(|e| panic!("{sample}: {e:#}"));
                assert!(c.unknown.is_empty(), "{sample}: left over {:?}", c.unknown);
                if class == "wazoo" {
                    assert!(KEYS_READ.contains(&key.as_str()), "{key} is not read");
                }
            }
            "refused" => {
                let e = format!(
                    "{:#}",
                    parsed
                        .err()
                        .unwrap_or_else(|| panic!("{sample} was accepted"))
                );
                assert!(
                    e.contains(&concrete),
                    "{sample}: the error names the key: {e}"
                );
                assert!(
                    !ZOOKEEPER_KEYS_NOT_USED.contains(&key.as_str()),
                    "{key} is refused and on the list of keys not used"
                );
                if !key.ends_with(".x") {
                    assert!(
                        KEYS_REFUSED.contains(&key.as_str()),
                        "{key} is not in KEYS_REFUSED"
                    );
                }
            }
            _ => {
                let c = parsed.unwrap_or_else(|e| panic!("{sample} was refused: {e:#}"));
                assert!(
                    c.unknown.contains_key(key.as_str()),
                    "{sample}: {:?}",
                    c.unknown
                );
                assert!(
                    ZOOKEEPER_KEYS_NOT_USED.contains(&key.as_str()),
                    "{key} is not in ZOOKEEPER_KEYS_NOT_USED"
                );
                assert_eq!(
                    unused_key_note(key),
                    format!("zoo.cfg key {key} is a ZooKeeper key that wazoo does not use")
                );
            }
        }
    }
    // Every key the code knows is in a table (and so has a class).
    for key in KEYS_READ
        .iter()
        .chain(ZOOKEEPER_KEYS_NOT_USED)
        .chain(KEYS_REFUSED)
    {
        assert!(
            seen.contains(*key),
            "{key} is known to wazoo and not in docs/ZOOCFG_KEYS.md"
        );
    }
}

// ZooKeeper Administrator's Guide, "Metrics Providers": the Prometheus
// provider serves on port 7000 unless metricsProvider.httpPort says
// otherwise; a provider class wazoo does not have stops the start.
#[test]
fn the_prometheus_provider_class_serves_metrics_on_its_default_port() {
    let prometheus =
        "metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";
    let port = |text: &str| {
        Config::parse(&format!("dataDir=/d\n{text}\n"))
            .unwrap()
            .metrics_port
    };
    assert_eq!(port(prometheus), Some(7000));
    assert_eq!(
        port(&format!("{prometheus}\nmetricsProvider.httpPort=7777")),
        Some(7777)
    );
    assert_eq!(port(""), None);
    assert_eq!(
        port("metricsProvider.className=org.apache.zookeeper.metrics.impl.DefaultMetricsProvider"),
        None
    );
    let e = refusal("metricsProvider.className=com.example.Metrics").expect("refused");
    assert!(e.contains("metricsProvider.className"), "{e}");
}

// ZooKeeper Administrator's Guide, "Performance Tuning Options":
// znode.container.maxNeverUsedIntervalMs, 0 by default, reaches the core.
#[test]
fn the_never_used_container_interval_is_read_and_not_negative() {
    let c = Config::parse("dataDir=/d\n").unwrap();
    assert_eq!(c.container_max_never_used_ms, 0);
    let c = Config::parse("dataDir=/d\nznode.container.maxNeverUsedIntervalMs=5000\n").unwrap();
    assert_eq!(
        crate::member::server_config(&c).container_max_never_used_ms,
        5000
    );
    let e = refusal("znode.container.maxNeverUsedIntervalMs=-1").expect("refused");
    assert!(e.contains("znode.container.maxNeverUsedIntervalMs"), "{e}");
}

// ZooKeeper Administrator's Guide, "Advanced Configuration",
// clientPortListenBacklog: the client port's listen backlog, shown by
// `conf`. With a backlog of 1 and no accept, Linux completes two
// connections and drops the SYNs of the rest; with wazoo's default all
// complete.
#[tokio::test]
async fn the_client_port_listen_backlog_bounds_connections_waiting_to_be_accepted() {
    let c = Config::parse("dataDir=/d\n").unwrap();
    assert_eq!(c.client_port_listen_backlog, -1);
    assert!(c
        .conf_lines()
        .contains(&"clientPortListenBacklog=-1".to_string()));
    let c = Config::parse("dataDir=/d\nclientPortListenBacklog=1\n").unwrap();
    assert!(c
        .conf_lines()
        .contains(&"clientPortListenBacklog=1".to_string()));
    for (backlog, most) in [(c.client_port_listen_backlog, 2), (-1, 4)] {
        let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
        let listener = crate::member::client_listener(addr, backlog).unwrap();
        let addr = listener.local_addr().unwrap();
        let attempts: Vec<_> = (0..4)
            .map(|_| {
                tokio::spawn(tokio::time::timeout(
                    std::time::Duration::from_secs(2),
                    tokio::net::TcpStream::connect(addr),
                ))
            })
            .collect();
        let mut connected = Vec::new();
        for a in attempts {
            if let Ok(Ok(stream)) = a.await.unwrap() {
                connected.push(stream);
            }
        }
        assert_eq!(connected.len(), most, "backlog {backlog}");
        drop(listener);
    }
}

// ZooKeeper Administrator's Guide, "Disabling data directory
// autocreation": with zookeeper.datadir.autocreate=false a missing data
// directory stops the start instead of being created; by default it is
// created.
#[test]
fn with_data_dir_autocreate_off_a_missing_data_directory_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let logs = dir.path().join("logs");
    let text = |extra: &str| {
        format!(
            "dataDir={}\ndataLogDir={}\n{extra}\n",
            data.display(),
            logs.display()
        )
    };
    for off in [
        "zookeeper.datadir.autocreate=false",
        "datadir.autocreate=false",
    ] {
        let c = Config::parse(&text(off)).unwrap();
        assert!(!c.data_dir_autocreate, "{off}");
        let e = format!("{:#}", crate::member::make_data_dirs(&c).unwrap_err());
        assert!(e.contains("zookeeper.datadir.autocreate"), "{e}");
        assert!(!data.exists() && !logs.exists(), "nothing was created");
    }
    let c = Config::parse(&text("")).unwrap();
    assert!(c.data_dir_autocreate);
    let (sdir, ldir) = crate::member::make_data_dirs(&c).unwrap();
    assert!(sdir.is_dir() && ldir.is_dir());
    // Once they exist, a member with autocreation off starts.
    let c = Config::parse(&text("zookeeper.datadir.autocreate=false")).unwrap();
    assert_eq!(crate::member::make_data_dirs(&c).unwrap(), (sdir, ldir));
    // The log directory is checked too.
    std::fs::remove_dir_all(&logs).unwrap();
    let e = format!("{:#}", crate::member::make_data_dirs(&c).unwrap_err());
    assert!(e.contains("data log directory"), "{e}");
}

// ZooKeeper Administrator's Guide, "The AdminServer" and its keys:
// admin.enableServer, admin.serverAddress, admin.serverPort (8080),
// admin.commandURL (/commands), admin.idleTimeout (30000 ms).
#[test]
fn admin_server_keys_are_read_with_zookeepers_defaults() {
    let on = Config::parse("dataDir=/d\n").unwrap();
    assert_eq!(
        on.admin.expect("on by default, as ZooKeeper's").addr,
        "0.0.0.0:8080".parse().unwrap()
    );
    let off = Config::parse("dataDir=/d\nadmin.enableServer=false\nadmin.serverPort=9\n").unwrap();
    assert_eq!(off.admin, None);
    let on = Config::parse("dataDir=/d\nadmin.enableServer=true\n").unwrap();
    let a = on.admin.expect("on");
    assert_eq!(a.addr, "0.0.0.0:8080".parse().unwrap());
    assert_eq!(a.command_url, "/commands");
    assert_eq!(a.idle_timeout_ms, 30_000);
    assert!(a.snapshot_enabled, "as in ZooKeeper 3.9");
    assert!(a.restore_enabled, "as in ZooKeeper 3.9");
    assert_eq!(a.rate_limit_ms, 300_000);
    // Another admin key without admin.enableServer: ZooKeeper serves, so
    // does wazoo; either spelling and any case.
    let on = Config::parse(
        "dataDir=/d\nzookeeper.admin.serverPort=9091\nADMIN.serverAddress=127.0.0.1\nadmin.commandURL=/cmd/\nadmin.idleTimeout=500\n",
    )
    .unwrap();
    assert!(on.unknown.is_empty(), "{:?}", on.unknown);
    let a = on.admin.expect("on");
    assert_eq!(a.addr, "127.0.0.1:9091".parse().unwrap());
    assert_eq!(a.command_url, "/cmd");
    assert_eq!(a.idle_timeout_ms, 500);
    let a = Config::parse(
        "dataDir=/d\nadmin.enableServer=true\nadmin.snapshot.enabled=false\nzookeeper.admin.restore.enabled=FALSE\nadmin.rateLimiterIntervalInMS=10\n",
    )
    .unwrap()
    .admin
    .unwrap();
    assert!(!a.snapshot_enabled);
    assert!(!a.restore_enabled);
    assert_eq!(a.rate_limit_ms, 10);
    assert_eq!(a.tls, crate::config::AdminTls::Off);
    // TLS takes the ssl.quorum key store, which must be given.
    let e = Config::parse("dataDir=/d\nadmin.forceHttps=true\n").unwrap_err();
    assert!(
        format!("{e:#}").contains("ssl.quorum.keyStore.location"),
        "{e:#}"
    );
    for bad in [
        "admin.enableServer=yes",
        "admin.serverPort=70000",
        "admin.serverAddress=localhost",
        "admin.commandURL=commands",
        "admin.commandURL=/",
        "admin.idleTimeout=0",
    ] {
        let key = bad.split('=').next().unwrap();
        let e = Config::parse(&format!("dataDir=/d\n{bad}\n")).unwrap_err();
        assert!(format!("{e:#}").contains(key), "{bad}: {e:#}");
    }
}

// ZooKeeper Administrator's Guide, "Cluster Options" (`group.x`,
// `weight.x`): the groups and weights reach the quorum rule, and what
// ZooKeeper's QuorumHierarchical rejects stops the start with the reason.
#[test]
fn groups_and_weights_make_the_quorum_rule_or_stop_the_start() {
    let servers = "dataDir=/d\n\
                   server.1=127.0.0.1:2888:3888\n\
                   server.2=127.0.0.1:2889:3889\n\
                   server.3=127.0.0.1:2890:3890\n";
    let c = Config::parse(&format!("{servers}group.1=1:2:3\nweight.3=0\n")).unwrap();
    assert!(c.unknown.is_empty(), "{:?}", c.unknown);
    let z = crate::ensemble_member::zab_config(&c, 1).unwrap();
    assert!(z.contains_quorum(&[1, 2]));
    assert!(!z.contains_quorum(&[2, 3]), "3 weighs nothing");
    assert!(c
        .quorum_config()
        .render()
        .contains("group.1=1:2:3\nweight.1=1\nweight.2=1\nweight.3=0\n"));
    for (lines, reason) in [
        ("group.1=1:2", "server 3 is in no group"),
        ("group.1=1:2:3\ngroup.2=3", "more than one group"),
        ("group.1=1:2:3:4", "no server.4"),
        (
            "group.1=1:2:3\nweight.2=heavy",
            "the weight must be a number",
        ),
        ("group.x=1:2:3", "the group id must be a number"),
    ] {
        let e = format!(
            "{:#}",
            Config::parse(&format!("{servers}{lines}\n")).unwrap_err()
        );
        assert!(e.contains(reason), "{lines}: {e}");
    }
}

// ZooKeeper's Oracle Quorum guide: `oraclePath` makes the rule a majority
// with the oracle's answer (the file's first character `1`; anything
// else, or no file, says no); with groups it is refused, as ZooKeeper
// would ignore the groups.
#[test]
fn the_oracle_path_makes_an_oracle_majority() {
    let dir = tempfile::tempdir().unwrap();
    let oracle = dir.path().join("mastership");
    let servers = format!(
        "dataDir=/d\n\
         server.1=127.0.0.1:2888:3888\n\
         server.2=127.0.0.1:2889:3889\n\
         oraclePath={}\n",
        oracle.display()
    );
    let c = Config::parse(&servers).unwrap();
    assert_eq!(c.oracle_path.as_deref(), Some(oracle.as_path()));
    assert!(!super::ask_oracle(&oracle), "no file says no");
    std::fs::write(&oracle, "1\n").unwrap();
    assert!(super::ask_oracle(&oracle));
    let z = crate::ensemble_member::zab_config(&c, 1).unwrap();
    assert_eq!(
        z.quorum,
        crate::core::zab::QuorumRule::Oracle { says_yes: true }
    );
    assert!(z.contains_quorum(&[1]));
    for text in ["0\n", "", "yes"] {
        std::fs::write(&oracle, text).unwrap();
        assert!(!super::ask_oracle(&oracle), "{text:?}");
    }
    let e = format!(
        "{:#}",
        Config::parse(&format!("{servers}group.1=1:2\n")).unwrap_err()
    );
    assert!(e.contains("oraclePath and group.N"), "{e}");
}

// The oracle is asked on the member's thread before every tick: whatever
// is put at the path must answer at once. A FIFO with no writer would
// block an ordinary open for ever; it says no.
#[test]
fn an_oracle_path_that_is_a_fifo_says_no_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("mastership");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path and a plain mode.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let asked = fifo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(super::ask_oracle(&asked));
    });
    // Not a timing assertion: a blocked open never answers at all.
    let answer = rx.recv_timeout(std::time::Duration::from_secs(30));
    assert_eq!(answer, Ok(false), "the oracle read blocked on a FIFO");
}

// Administrator's Guide, "Advanced Configuration", snapSizeLimitInKb:
// 4 GiB by default, in KiB, with 0 or below turning it off; the Java
// property's name is read too.
#[test]
fn snap_size_limit_is_read_in_kib_with_zookeepers_default() {
    let kb = |text: &str| {
        Config::parse(&format!("dataDir=/d\n{text}"))
            .unwrap()
            .snap_size_limit_kb
    };
    assert_eq!(kb(""), 4 * 1024 * 1024);
    assert_eq!(kb("snapSizeLimitInKb=250\n"), 250);
    assert_eq!(kb("zookeeper.snapSizeLimitInKb=300\n"), 300);
    assert_eq!(kb("snapSizeLimitInKb=0\n"), 0);
    assert_eq!(kb("snapSizeLimitInKb=-1\n"), 0);
    assert!(Config::parse("dataDir=/d\nsnapSizeLimitInKb=lots\n").is_err());
}

// ZooKeeper Administrator's Guide, "Cluster Options", observerMasterPort:
// a port turns observers behind followers on; 0 or less leaves them off,
// as ZooKeeper starts no learner master then; anything else is refused
// at start, naming the key.
#[test]
fn observer_master_port_is_read() {
    let parse = |line: &str| Config::parse(&format!("dataDir=/d\n{line}\n"));
    assert_eq!(parse("").unwrap().observer_master_port, None);
    assert_eq!(
        parse("observerMasterPort=2191")
            .unwrap()
            .observer_master_port,
        Some(2191)
    );
    assert_eq!(
        parse("observerMasterPort=0").unwrap().observer_master_port,
        None
    );
    assert_eq!(
        parse("observerMasterPort=-1").unwrap().observer_master_port,
        None
    );
    // Several addresses per member: the session rides whichever address
    // carries the members' link, so the two keys go together.
    let multi = parse(
        "multiAddress.enabled=true\nobserverMasterPort=2191\n\
         server.1=127.0.0.1:2888:3888|127.0.0.2:2888:3888\n\
         server.2=127.0.0.1:2889:3889|127.0.0.2:2889:3889\n\
         server.3=127.0.0.1:2890:3890:observer",
    )
    .unwrap();
    assert_eq!(multi.observer_master_port, Some(2191));
    for bad in ["observerMasterPort=70000", "observerMasterPort=two"] {
        let e = format!("{:#}", parse(bad).unwrap_err());
        assert!(e.contains("observerMasterPort"), "{bad}: {e}");
    }
}
