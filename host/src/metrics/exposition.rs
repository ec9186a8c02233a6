//! The metric families and their three renderings: `mntr`'s lines,
//! Prometheus' text format 0.0.4 and OpenMetrics 1.0.0.
//!
//! Encoded by hand because ZooKeeper's names must come out exactly: its
//! Prometheus provider (Prometheus' Java client 0.9) names a counter's
//! sample as the counter (`looking_count`, no `_total`) and serves the
//! text format 0.0.4 only, which `prometheus-client` cannot reproduce.

use std::fmt::Write;

use super::figures::{HistogramFigures, SummaryFigures};

/// A number as `mntr` prints it: Java's `Long` or `Double`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i64),
    Float(f64),
}

/// One metric family.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// ZooKeeper's name without `mntr`'s `zk_` prefix (`znode_count`), or
    /// wazoo's own, which starts with `wazoo_`.
    pub name: String,
    pub help: &'static str,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Gauge(Num),
    /// `prom` since the member started; `mntr` since the last `srst`.
    /// `total`: the sample is `<name>_total` in both formats (wazoo's own
    /// counters, by Prometheus' naming rules); ZooKeeper's counters have
    /// no suffix in the text format, as its provider serves them.
    Counter {
        prom: u64,
        mntr: u64,
        total: bool,
    },
    /// ZooKeeper's summaries. `advanced`: `mntr` adds p50/p95/p99/p999
    /// and Prometheus the 0.5/0.9/0.99 quantiles (ZooKeeper's
    /// `DetailLevel.ADVANCED`); basic ones have the 0.5 quantile only.
    Summary {
        prom: SummaryFigures,
        mntr: SummaryFigures,
        advanced: bool,
    },
    /// Prometheus only.
    Histogram(HistogramFigures),
    /// A counter per label value (Prometheus only), always `_total`.
    LabeledCounter {
        label: &'static str,
        values: Vec<(String, u64)>,
    },
    /// Prometheus only: one sample per label set (`labels` names the
    /// labels, each sample gives their values in that order); a counter
    /// (`_total`) or a gauge.
    Labeled {
        counter: bool,
        labels: &'static [&'static str],
        values: Vec<(Vec<String>, u64)>,
    },
    /// Prometheus only: a histogram per label value.
    LabeledHistogram {
        label: &'static str,
        values: Vec<(String, HistogramFigures)>,
    },
    /// `mntr` only (`zk_version`, `zk_server_state`, `zk_peer_state`).
    Text(String),
}

/// Prometheus' quantiles of ZooKeeper's summaries.
pub const PROM_QUANTILES_ADVANCED: [f64; 3] = [0.5, 0.9, 0.99];
pub const PROM_QUANTILES_BASIC: [f64; 1] = [0.5];
/// `mntr`'s percentiles of ZooKeeper's advanced summaries, and their keys.
pub const MNTR_QUANTILES: [(f64, &str); 4] =
    [(0.5, "p50"), (0.95, "p95"), (0.99, "p99"), (0.999, "p999")];

/// The two exposition formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text004,
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text004 => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// Picks the format for an `Accept` header. The text format 0.0.4,
    /// which is all ZooKeeper 3.8 serves, whenever the client accepts it
    /// (a Prometheus server does, next to OpenMetrics): in OpenMetrics a
    /// counter's sample must end in `_total`, so a server storing it would
    /// name ZooKeeper's counters differently from ZooKeeper. OpenMetrics
    /// when the client accepts it and not the text format.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text004;
        };
        let (mut text, mut om) = (0.0f64, 0.0f64);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let (mut q, mut version) = (1.0f64, None);
            for p in parts {
                if let Some((k, v)) = p.split_once('=') {
                    match k.trim().to_ascii_lowercase().as_str() {
                        "q" => q = v.trim().parse().unwrap_or(0.0),
                        "version" => version = Some(v.trim().to_string()),
                        _ => {}
                    }
                }
            }
            let v = version.as_deref();
            match media.as_str() {
                "text/plain" if v.is_none() || v == Some("0.0.4") => text = text.max(q),
                "application/openmetrics-text"
                    if v.is_none() || v == Some("1.0.0") || v == Some("0.0.1") =>
                {
                    om = om.max(q)
                }
                "text/*" => text = text.max(q),
                "application/*" => om = om.max(q),
                "*/*" => {
                    text = text.max(q);
                    om = om.max(q);
                }
                _ => {}
            }
        }
        if text <= 0.0 && om > 0.0 {
            Format::OpenMetrics
        } else {
            Format::Text004
        }
    }
}

/// A number as Java's `Double.toString` prints it for the values `mntr`
/// shows (`0.0`, `12.5`).
pub fn java_double(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e7 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

fn mntr_key(name: &str) -> String {
    if name.starts_with("wazoo_") {
        name.to_string()
    } else {
        format!("zk_{name}")
    }
}

/// `mntr`'s lines, in the order of `families`. Summaries come out as
/// ZooKeeper's default provider prints them: `avg` rounded to two
/// decimals, `min`, `max`, `cnt`, `sum` (and percentiles) as integers.
pub fn mntr(families: &[Family]) -> Vec<(String, String)> {
    mntr_values(families)
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect()
}

/// A figure of `mntr`, typed: the AdminServer's `monitor` command gives
/// the same figures as JSON numbers and strings.
#[derive(Debug, Clone, PartialEq)]
pub enum MntrValue {
    Text(String),
    Int(i64),
    Float(f64),
}

impl std::fmt::Display for MntrValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MntrValue::Text(t) => f.write_str(t),
            MntrValue::Int(v) => write!(f, "{v}"),
            MntrValue::Float(v) => f.write_str(&java_double(*v)),
        }
    }
}

/// `mntr`'s keys (with `zk_`) and figures, in order.
pub fn mntr_values(families: &[Family]) -> Vec<(String, MntrValue)> {
    use MntrValue::{Float, Int, Text};
    let mut out = Vec::new();
    for f in families {
        match &f.value {
            Value::Text(t) => out.push((mntr_key(&f.name), Text(t.clone()))),
            Value::Gauge(Num::Int(v)) => out.push((mntr_key(&f.name), Int(*v))),
            Value::Gauge(Num::Float(v)) => out.push((mntr_key(&f.name), Float(*v))),
            Value::Counter { mntr, .. } => out.push((mntr_key(&f.name), Int(*mntr as i64))),
            Value::Summary {
                mntr: s, advanced, ..
            } => {
                let avg = if s.count == 0 {
                    0.0
                } else {
                    (s.sum / s.count as f64 * 100.0).round() / 100.0
                };
                let name = &f.name;
                let int = |v: f64| Int(v.floor() as i64);
                out.push((format!("zk_avg_{name}"), Float(avg)));
                out.push((format!("zk_min_{name}"), int(s.min)));
                out.push((format!("zk_max_{name}"), int(s.max)));
                out.push((format!("zk_cnt_{name}"), Int(s.count as i64)));
                out.push((format!("zk_sum_{name}"), int(s.sum)));
                if *advanced {
                    for ((_, v), (_, key)) in s.quantiles.iter().zip(MNTR_QUANTILES) {
                        let v = if v.is_nan() { 0.0 } else { *v };
                        out.push((format!("zk_{key}_{name}"), int(v)));
                    }
                }
            }
            Value::Histogram(_)
            | Value::LabeledCounter { .. }
            | Value::Labeled { .. }
            | Value::LabeledHistogram { .. } => {}
        }
    }
    out
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn num(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// The families in `format`.
pub fn encode(families: &[Family], format: Format) -> String {
    let om = format == Format::OpenMetrics;
    let mut out = String::new();
    for f in families {
        let name = &f.name;
        let head = |out: &mut String, family: &str, kind: &str| {
            let _ = writeln!(out, "# HELP {family} {}", escape_help(f.help));
            let _ = writeln!(out, "# TYPE {family} {kind}");
        };
        match &f.value {
            Value::Text(_) => {}
            Value::Gauge(v) => {
                head(&mut out, name, "gauge");
                let v = match v {
                    Num::Int(i) => i.to_string(),
                    Num::Float(x) => num(*x),
                };
                let _ = writeln!(out, "{name} {v}");
            }
            Value::Counter { prom, total, .. } => {
                // OpenMetrics: the family has no suffix, the sample `_total`.
                // Text 0.0.4: the family is the sample's name.
                let sample = if *total || om {
                    format!("{name}_total")
                } else {
                    name.clone()
                };
                head(&mut out, if om { name } else { &sample }, "counter");
                let _ = writeln!(out, "{sample} {prom}");
            }
            Value::LabeledCounter { label, values } => {
                let sample = format!("{name}_total");
                head(&mut out, if om { name } else { &sample }, "counter");
                for (l, v) in values {
                    let _ = writeln!(out, "{sample}{{{label}=\"{}\"}} {v}", escape_label(l));
                }
            }
            Value::Labeled {
                counter,
                labels,
                values,
            } => {
                let sample = if *counter {
                    format!("{name}_total")
                } else {
                    name.clone()
                };
                let kind = if *counter { "counter" } else { "gauge" };
                head(&mut out, if om { name } else { &sample }, kind);
                for (ls, v) in values {
                    let set: Vec<String> = labels
                        .iter()
                        .zip(ls)
                        .map(|(k, l)| format!("{k}=\"{}\"", escape_label(l)))
                        .collect();
                    let _ = writeln!(out, "{sample}{{{}}} {v}", set.join(","));
                }
            }
            Value::LabeledHistogram { label, values } => {
                head(&mut out, name, "histogram");
                for (l, h) in values {
                    let l = format!("{label}=\"{}\"", escape_label(l));
                    for (le, n) in &h.buckets {
                        let _ = writeln!(out, "{name}_bucket{{{l},le=\"{}\"}} {n}", num(*le));
                    }
                    let _ = writeln!(out, "{name}_count{{{l}}} {}", h.count);
                    let _ = writeln!(out, "{name}_sum{{{l}}} {}", num(h.sum));
                }
            }
            Value::Summary { prom, .. } => {
                head(&mut out, name, "summary");
                for (q, v) in &prom.quantiles {
                    let _ = writeln!(out, "{name}{{quantile=\"{q}\"}} {}", num(*v));
                }
                let _ = writeln!(out, "{name}_count {}", prom.count);
                let _ = writeln!(out, "{name}_sum {}", num(prom.sum));
            }
            Value::Histogram(h) => {
                head(&mut out, name, "histogram");
                for (le, n) in &h.buckets {
                    let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {n}", num(*le));
                }
                let _ = writeln!(out, "{name}_count {}", h.count);
                let _ = writeln!(out, "{name}_sum {}", num(h.sum));
            }
        }
    }
    if om {
        out.push_str("# EOF\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn families() -> Vec<Family> {
        let s = SummaryFigures {
            count: 2,
            sum: 3.5,
            min: 0.5,
            max: 3.0,
            quantiles: vec![(0.5, 0.5)],
        };
        vec![
            Family {
                name: "znode_count".into(),
                help: "nodes",
                value: Value::Gauge(Num::Int(5)),
            },
            Family {
                name: "looking_count".into(),
                help: "elections",
                value: Value::Counter {
                    prom: 3,
                    mntr: 1,
                    total: false,
                },
            },
            Family {
                name: "wazoo_txns_applied".into(),
                help: "txns",
                value: Value::Counter {
                    prom: 9,
                    mntr: 9,
                    total: true,
                },
            },
            Family {
                name: "fsynctime".into(),
                help: "fsync ms",
                value: Value::Summary {
                    prom: s.clone(),
                    mntr: s,
                    advanced: false,
                },
            },
        ]
    }

    // ZooKeeper's Prometheus provider (Prometheus' Java client 0.9): a
    // counter's sample is named as the counter, in the text format 0.0.4.
    #[test]
    fn text_format_names_zookeepers_counters_without_total_and_wazoos_with_it() {
        let t = encode(&families(), Format::Text004);
        assert!(
            t.contains("# TYPE looking_count counter\nlooking_count 3\n"),
            "{t}"
        );
        assert!(
            t.contains("# TYPE wazoo_txns_applied_total counter\nwazoo_txns_applied_total 9\n"),
            "{t}"
        );
        assert!(t.contains("fsynctime{quantile=\"0.5\"} 0.5\n"), "{t}");
        assert!(t.contains("fsynctime_count 2\nfsynctime_sum 3.5\n"), "{t}");
        assert!(!t.contains("# EOF"), "{t}");
    }

    #[test]
    fn openmetrics_ends_in_eof_and_gives_every_counter_sample_total() {
        let t = encode(&families(), Format::OpenMetrics);
        assert!(
            t.contains("# TYPE looking_count counter\nlooking_count_total 3\n"),
            "{t}"
        );
        assert!(t.ends_with("# EOF\n"), "{t}");
    }

    #[test]
    fn mntr_prints_summaries_as_zookeepers_default_provider_does() {
        let lines = mntr(&families());
        let get = |k: &str| lines.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("zk_znode_count"), Some("5"));
        assert_eq!(get("zk_looking_count"), Some("1"), "since srst");
        assert_eq!(get("wazoo_txns_applied"), Some("9"));
        assert_eq!(get("zk_avg_fsynctime"), Some("1.75"));
        assert_eq!(get("zk_min_fsynctime"), Some("0"));
        assert_eq!(get("zk_max_fsynctime"), Some("3"));
        assert_eq!(get("zk_cnt_fsynctime"), Some("2"));
        assert_eq!(get("zk_sum_fsynctime"), Some("3"));
        assert_eq!(get("zk_p50_fsynctime"), None, "a basic summary");
    }

    #[test]
    fn the_text_format_is_served_whenever_the_client_accepts_it() {
        // Prometheus 2.x's scrape Accept header.
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::Text004);
        assert_eq!(Format::negotiate(None), Format::Text004);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text004);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text; version=1.0.0")),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text, text/plain;q=0")),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some("application/json")),
            Format::Text004,
            "nothing acceptable: the default"
        );
    }

    #[test]
    fn java_doubles_keep_a_decimal() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(20.0), "20.0");
        assert_eq!(java_double(0.05), "0.05");
    }
}
