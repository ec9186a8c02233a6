//! The Prometheus endpoint (`metricsProvider.httpPort`, as ZooKeeper's
//! PrometheusMetricsProvider reads it; ZooKeeper Monitor Guide,
//! "Prometheus"), read by Prometheus' own parser (the Python
//! `prometheus_client`, installed by scripts/setup.sh), and the
//! directories `conf` and `dirs` report (ZooKeeper Administrator's Guide,
//! "The Four Letter Words").

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use wazoo_testkit::{free_port, Flavor, TestServer};
use zookeeper_client::{Acls, CreateMode};

/// Prometheus 2.x's scrape `Accept` header.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// The metrics the Grafana dashboard "ZooKeeper by Prometheus" (grafana.com
/// dashboard 10465, which the ZooKeeper Monitor Guide points to) queries,
/// as sample names.
const DASHBOARD_10465: &[&str] = &[
    "add_dead_watcher_stall_time",
    "approximate_data_size",
    "bytes_received_count",
    "close_session_prep_time_sum",
    "commit_commit_proc_req_queued_sum",
    "commit_count",
    "commit_process_time_sum",
    "commit_propagation_latency_sum",
    "concurrent_request_processing_in_commit_processor_sum",
    "connection_drop_count",
    "connection_drop_probability",
    "connection_rejected",
    "connection_request_count",
    "connection_token_deficit_sum",
    "dbinittime",
    "dbinittime_count",
    "dbinittime_sum",
    "dead_watchers_cleaner_latency_sum",
    "dead_watchers_cleared",
    "dead_watchers_queued",
    "diff_count",
    "digest_mismatches_count",
    "election_time",
    "election_time_count",
    "election_time_sum",
    "ensemble_auth_fail",
    "ensemble_auth_skip",
    "ensemble_auth_success",
    "ephemerals_count",
    "follower_sync_time_sum",
    "fsynctime",
    "fsynctime_count",
    "fsynctime_sum",
    "global_sessions",
    "jvm_pause_time_ms_sum",
    "last_client_response_size",
    "last_proposal_size",
    "leader_uptime",
    "learner_commit_received_count",
    "learner_handler_qp_size_sum",
    "learners",
    "local_sessions",
    "local_write_committed_time_ms_sum",
    "looking_count",
    "max_client_response_size",
    "max_latency",
    "max_proposal_size",
    "min_client_response_size",
    "min_latency",
    "min_proposal_size",
    "node_changed_watch_count_sum",
    "node_children_watch_count_sum",
    "node_created_watch_count_sum",
    "node_deleted_watch_count_sum",
    "num_alive_connections",
    "om_commit_process_time_ms_sum",
    "om_proposal_process_time_ms_sum",
    "open_file_descriptor_count",
    "outstanding_changes_queued",
    "outstanding_changes_removed",
    "outstanding_requests",
    "outstanding_tls_handshake",
    "packets_received",
    "packets_sent",
    "pending_session_queue_size_sum",
    "prep_process_time_sum",
    "prep_processor_queue_size_sum",
    "prep_processor_queue_time_ms_sum",
    "prep_processor_request_queued",
    "propagation_latency_sum",
    "proposal_ack_creation_latency",
    "proposal_count",
    "proposal_latency_sum",
    "quit_leading_due_to_disloyal_voter",
    "quorum_ack_latency_sum",
    "quorum_size",
    "read_commit_proc_issued_sum",
    "read_commit_proc_req_queued_sum",
    "read_commitproc_time_ms_sum",
    "read_final_proc_time_ms_sum",
    "read_per_namespace_sum",
    "readlatency_sum",
    "reads_after_write_in_session_queue_sum",
    "reads_issued_from_session_queue_sum",
    "request_commit_queued",
    "requests_in_session_queue_sum",
    "response_packet_cache_hits",
    "response_packet_cache_misses",
    "response_packet_get_children_cache_hits",
    "response_packet_get_children_cache_misses",
    "revalidate_count",
    "server_write_committed_time_ms_sum",
    "session_queues_drained_sum",
    "sessionless_connections_expired",
    "snap_count",
    "snapshottime_count",
    "snapshottime_sum",
    "stale_sessions_expired",
    "startup_snap_load_time",
    "startup_snap_load_time_count",
    "startup_snap_load_time_sum",
    "startup_txns_loaded",
    "startup_txns_loaded_count",
    "startup_txns_loaded_sum",
    "sync_process_time_sum",
    "sync_processor_batch_size_sum",
    "sync_processor_queue_flush_time_ms_sum",
    "sync_processor_queue_size_sum",
    "sync_processor_request_queued",
    "synced_non_voting_followers",
    "synced_observers",
    "time_waiting_empty_pool_in_commit_processor_read_ms_sum",
    "tls_handshake_exceeded",
    "unrecoverable_error_count",
    "updatelatency_sum",
    "uptime",
    "watch_count",
    "write_batch_time_in_commit_processor_sum",
    "write_commit_proc_issued_sum",
    "write_commit_proc_req_queued_sum",
    "write_commitproc_time_ms_sum",
    "write_final_proc_time_ms_sum",
    "write_per_namespace_sum",
    "znode_count",
];

/// The dashboard also queries the JVM's metrics (Prometheus' Java client's
/// hotspot exports, `jvm_*`): wazoo has no JVM.
const DASHBOARD_10465_JVM: &[&str] = &[
    "jvm_classes_loaded",
    "jvm_threads_current",
    "jvm_threads_deadlocked",
    "jvm_gc_collection_seconds_sum",
    "jvm_threads_state",
    "jvm_memory_pool_bytes_used",
];

/// The Prometheus type of each of ZooKeeper 3.8's metrics that wazoo has
/// (`registerGauge`, `getCounter` and `getSummary` in ZooKeeper's
/// `ZooKeeperServer`, `LeaderZooKeeperServer`, `QuorumZooKeeperServer`
/// and `ServerMetrics`).
const ZOOKEEPER_TYPES: &[(&str, &str)] = &[
    ("avg_latency", "gauge"),
    ("max_latency", "gauge"),
    ("min_latency", "gauge"),
    ("packets_received", "gauge"),
    ("packets_sent", "gauge"),
    ("num_alive_connections", "gauge"),
    ("outstanding_requests", "gauge"),
    ("uptime", "gauge"),
    ("znode_count", "gauge"),
    ("watch_count", "gauge"),
    ("ephemerals_count", "gauge"),
    ("approximate_data_size", "gauge"),
    ("global_sessions", "gauge"),
    ("local_sessions", "gauge"),
    ("open_file_descriptor_count", "gauge"),
    ("max_file_descriptor_count", "gauge"),
    ("looking_count", "counter"),
    ("diff_count", "counter"),
    ("snap_count", "counter"),
    ("stale_sessions_expired", "counter"),
    ("digest_mismatches_count", "counter"),
    ("readlatency", "summary"),
    ("updatelatency", "summary"),
    ("fsynctime", "summary"),
    ("sync_processor_batch_size", "summary"),
    ("election_time", "summary"),
];

/// The leader's and a quorum member's, absent on a standalone server (as
/// on ZooKeeper).
const ENSEMBLE_ONLY: &[&str] = &[
    "quorum_size",
    "learners",
    "synced_non_voting_followers",
    "synced_observers",
    "leader_uptime",
    "last_proposal_size",
    "max_proposal_size",
    "min_proposal_size",
];

struct Scrape {
    content_type: String,
    body: String,
}

fn scrape(port: u16, accept: Option<&str>) -> Scrape {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\n{accept}\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .expect("a content type")
        .to_string();
    Scrape {
        content_type,
        body: body.to_string(),
    }
}

/// Prometheus' parser (Python `prometheus_client`) on `body`: every family's
/// type and sample names. `openmetrics`: its OpenMetrics parser, which
/// also insists on the `# EOF` and on `_total` counters.
fn parse(body: &str, openmetrics: bool) -> BTreeMap<String, (String, Vec<String>)> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let script = r#"
import json, sys
if sys.argv[1] == "om":
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
else:
    from prometheus_client.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    out[f.name] = [f.type, [s.name for s in f.samples]]
print(json.dumps(out))
"#;
    let mut child = std::process::Command::new(&python)
        .args(["-c", script, if openmetrics { "om" } else { "text" }])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "Prometheus' parser (Python prometheus_client, installed by scripts/setup.sh) \
         refused the body: {}\n{body}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = String::from_utf8(out.stdout).unwrap();
    parse_families_json(&json)
}

/// Reads `{"name": ["type", ["sample", ...]], ...}` (what the script
/// prints; names and types need no escapes).
fn parse_families_json(json: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let mut out = BTreeMap::new();
    let mut rest = json.trim().trim_start_matches('{');
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let end = after.find('"').unwrap();
        let name = after[..end].to_string();
        let after = &after[end + 1..];
        let list_start = after.find('[').unwrap();
        let list_end = after.find("]]").unwrap();
        let inner = &after[list_start + 1..list_end + 1];
        let mut strings = inner
            .split('"')
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, s)| s.to_string());
        let kind = strings.next().unwrap();
        out.insert(name, (kind, strings.collect()));
        rest = &after[list_end + 2..];
    }
    out
}

fn documented_missing() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/COMPATIBILITY.md"
    ))
    .unwrap();
    let section = doc
        .split("### Metrics ZooKeeper has and wazoo does not")
        .nth(1)
        .expect("docs/COMPATIBILITY.md has the section");
    section
        .split("\n#")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(n, _)| n.to_string())
        .collect()
}

/// The family a dashboard's sample name belongs to: itself if it is a
/// metric's name (`bytes_received_count` is a counter), else the summary
/// or histogram it is a sample of.
fn family_of<'a>(sample: &'a str, missing: &[String]) -> &'a str {
    let known = |n: &str| {
        ZOOKEEPER_TYPES.iter().any(|(k, _)| *k == n)
            || ENSEMBLE_ONLY.contains(&n)
            || missing.iter().any(|m| m == n)
    };
    if known(sample) {
        return sample;
    }
    ["_sum", "_count", "_bucket"]
        .iter()
        .find_map(|suffix| sample.strip_suffix(suffix))
        .unwrap_or(sample)
}

async fn traffic(server: &dyn TestServer) {
    let zk = common::connect(&server.connect_string()).await;
    for i in 0..10 {
        zk.create(
            &format!("/m{i}"),
            b"x",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
        zk.get_data(&format!("/m{i}")).await.unwrap();
    }
}

// ZooKeeper Monitor Guide, "Prometheus" and "Grafana": the dashboard
// built for ZooKeeper's provider finds wazoo's metrics under the same
// names and types.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zookeeper_dashboard_finds_zookeepers_names_and_types() {
    let port = free_port();
    let opts = common::options(Flavor::Wazoo)
        .cfg(format!("metricsProvider.httpPort={port}"))
        .cfg("metricsProvider.httpHost=127.0.0.1");
    let server = Flavor::Wazoo.start_with(opts).unwrap();
    traffic(server.as_ref()).await;
    let text = tokio::task::spawn_blocking(move || scrape(port, Some(PROMETHEUS_ACCEPT)))
        .await
        .unwrap();
    // What ZooKeeper 3.8 serves to Prometheus: the text format 0.0.4.
    assert_eq!(
        text.content_type,
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert!(!text.body.contains("# EOF"), "{}", text.body);
    let families = parse(&text.body, false);

    for (name, kind) in ZOOKEEPER_TYPES {
        match families.get(*name) {
            Some((k, _)) => assert_eq!(k, kind, "{name}"),
            None => panic!("{name} missing from:\n{}", text.body),
        }
    }
    for name in ENSEMBLE_ONLY {
        assert!(
            !families.contains_key(*name),
            "{name} on a standalone server"
        );
    }
    // ZooKeeper's counters are sampled under their own name (Prometheus'
    // Java client 0.9), not `_total`.
    for (name, kind) in ZOOKEEPER_TYPES.iter().filter(|(_, k)| *k == "counter") {
        assert!(
            text.body
                .lines()
                .any(|l| l.starts_with(&format!("{name} "))),
            "{kind} {name} as a sample:\n{}",
            text.body
        );
        assert!(!text.body.contains(&format!("{name}_total")), "{name}");
    }
    // Every metric the dashboard queries is there with its samples, or
    // docs/COMPATIBILITY.md says why not (the ensemble's only on a quorum).
    let missing = documented_missing();
    for sample in DASHBOARD_10465 {
        let family = family_of(sample, &missing);
        if missing.iter().any(|m| m == family) || ENSEMBLE_ONLY.contains(&family) {
            assert!(
                !families.contains_key(family),
                "{family} is served after all"
            );
            continue;
        }
        let (kind, samples) = families
            .get(family)
            .unwrap_or_else(|| panic!("the dashboard's {sample}: no {family} in\n{}", text.body));
        if kind == "counter" {
            // The Python parser renames a counter's sample `_total`; the
            // body itself has it under its own name (checked above).
            assert!(
                text.body
                    .lines()
                    .any(|l| l.starts_with(&format!("{sample} "))),
                "the dashboard's {sample}"
            );
        } else {
            assert!(
                samples.iter().any(|s| s == sample),
                "the dashboard's {sample}: {family} has {samples:?}"
            );
        }
    }
    for name in DASHBOARD_10465_JVM {
        assert!(!families.contains_key(*name));
    }

    // The figures behind them.
    let value = |sample: &str| -> f64 {
        text.body
            .lines()
            .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{sample} not in:\n{}", text.body))
    };
    assert!(value("znode_count") >= 14.0);
    assert!(value("updatelatency_count") >= 10.0, "ten creates");
    assert!(value("readlatency_count") >= 10.0, "ten reads");
    assert!(value("fsynctime_count") >= 1.0);
    assert!(value("wazoo_txns_applied_total") >= 10.0);
    assert_eq!(value("wazoo_is_leader"), 1.0);
    // Sub-millisecond buckets: 10 µs first, and every request counted.
    assert_eq!(
        families["wazoo_request_latency_seconds"].0, "histogram",
        "{}",
        text.body
    );
    assert!(
        text.body
            .contains("wazoo_request_latency_seconds_bucket{le=\"0.00001\"}"),
        "{}",
        text.body
    );
    assert!(value("wazoo_request_latency_seconds_count") >= 20.0);

    // A client that asks for OpenMetrics only gets it, and its parser
    // (which requires `# EOF` and `_total` counters) reads it.
    let om = tokio::task::spawn_blocking(move || {
        scrape(port, Some("application/openmetrics-text; version=1.0.0"))
    })
    .await
    .unwrap();
    assert_eq!(
        om.content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(om.body.ends_with("# EOF\n"), "{}", om.body);
    let om_families = parse(&om.body, true);
    assert_eq!(om_families["looking_count"].0, "counter");
    assert_eq!(om_families["readlatency"].0, "summary");
    // No Accept header: the text format.
    let plain = tokio::task::spawn_blocking(move || scrape(port, None))
        .await
        .unwrap();
    assert_eq!(
        plain.content_type,
        "text/plain; version=0.0.4; charset=utf-8"
    );
}

/// The bytes of the files under `dir`, subdirectories included.
fn size_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| {
                    let m = e.metadata().unwrap();
                    if m.is_dir() {
                        size_under(&e.path())
                    } else {
                        m.len()
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

fn conf_value(conf: &str, key: &str) -> String {
    conf.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("conf has no {key}: {conf}"))
        .to_string()
}

// ZooKeeper Administrator's Guide, "The Four Letter Words": conf prints
// the data and log directories and their sizes, dirs the sizes; a backup
// script reads them, so they must be the directories that hold the data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conf_and_dirs_report_the_directories_in_use_and_their_sizes() {
    let log_dir = tempfile::tempdir().unwrap();
    let opts =
        common::options(Flavor::Wazoo).cfg(format!("dataLogDir={}", log_dir.path().display()));
    let server = Flavor::Wazoo.start_with(opts).unwrap();
    traffic(server.as_ref()).await;
    let addr = server.addr();
    // The closed session's txn may still be on its way to the log: read
    // until the member is quiet (bounded).
    let mut tries = 0;
    let (conf, dirs, data_size, log_size) = loop {
        tries += 1;
        let (conf, dirs) = tokio::task::spawn_blocking(move || {
            (
                wazoo_testkit::four_letter_word(addr, "conf").unwrap(),
                wazoo_testkit::four_letter_word(addr, "dirs").unwrap(),
            )
        })
        .await
        .unwrap();
        let data = std::path::PathBuf::from(conf_value(&conf, "dataDir"));
        let log = std::path::PathBuf::from(conf_value(&conf, "dataLogDir"));
        assert!(data.is_absolute() && data.is_dir(), "{conf}");
        assert!(log.starts_with(log_dir.path()) && log.is_dir(), "{conf}");
        assert_ne!(data, log);
        let log_size: u64 = conf_value(&conf, "dataLogSize").parse().unwrap();
        let data_size: u64 = conf_value(&conf, "dataDirSize").parse().unwrap();
        assert!(log_size > 0, "ten creates are in the log: {conf}");
        let on_disk = (size_under(&data), size_under(&log));
        if on_disk == (data_size, log_size) || tries == 10 {
            assert_eq!(on_disk, (data_size, log_size), "{conf}");
            break (conf, dirs, data_size, log_size);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let _ = conf;
    assert_eq!(
        dirs,
        format!("datadir_size: {data_size}\nlogdir_size: {log_size}\n")
    );
}
