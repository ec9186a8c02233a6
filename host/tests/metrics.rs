//! The Prometheus endpoint (docs/ARCHITECTURE.md, "Metrics"):
//! `metricsProvider.httpPort` in zoo.cfg, as ZooKeeper's
//! PrometheusMetricsProvider reads it.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use wazoo_testkit::{free_port, Flavor};
use zookeeper_client::{Acls, CreateMode};

fn scrape(port: u16) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn value(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_report_requests_latencies_fsyncs_and_the_tree() {
    let port = free_port();
    let opts = common::options(Flavor::Wazoo)
        .cfg(format!("metricsProvider.httpPort={port}"))
        .cfg("metricsProvider.httpHost=127.0.0.1");
    let server = Flavor::Wazoo.start_with(opts).unwrap();
    let zk = common::connect(&server.connect_string()).await;
    for i in 0..10 {
        zk.create(
            &format!("/m{i}"),
            b"x",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    }
    let text = tokio::task::spawn_blocking(move || scrape(port))
        .await
        .unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(value(&text, "wazoo_znode_count") >= 14.0, "{text}");
    assert!(value(&text, "wazoo_fsyncs") >= 1.0, "{text}");
    assert!(
        value(&text, "wazoo_request_latency_seconds_count") >= 10.0,
        "{text}"
    );
    assert_eq!(value(&text, "wazoo_quorum_size"), 1.0);
    assert_eq!(value(&text, "wazoo_is_leader"), 1.0);
    assert!(
        text.contains("wazoo_request_latency_seconds_bucket{le=\"0.001\"}"),
        "{text}"
    );
}
