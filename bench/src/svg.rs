//! Hand-built SVG plots for the report: grouped bars (throughput, times)
//! and latency CDF lines, ZooKeeper against wazoo. Plain text output, no
//! dependencies; every figure is a row of fixed-size panels.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// The quantiles a CDF is sampled at (`cdf_points`), denser in the tail.
pub const CDF_QUANTILES: &[f64] = &[
    0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8,
    0.85, 0.9, 0.925, 0.95, 0.975, 0.99, 0.995, 0.999, 1.0,
];

/// The histogram's values (ns) at [`CDF_QUANTILES`], in µs; empty if the
/// histogram is.
pub fn cdf_points(h: &Histogram<u64>) -> Vec<f64> {
    if h.is_empty() {
        return Vec::new();
    }
    CDF_QUANTILES
        .iter()
        .map(|&q| h.value_at_quantile(q) as f64 / 1000.0)
        .collect()
}

const PANEL_W: f64 = 380.0;
const PANEL_H: f64 = 260.0;
const MARGIN_L: f64 = 64.0;
const MARGIN_R: f64 = 16.0;
const MARGIN_T: f64 = 30.0;
const MARGIN_B: f64 = 48.0;
const TITLE_H: f64 = 28.0;

/// The colour of a system's bars and lines (others cycle through a palette).
pub fn color(system: &str) -> &'static str {
    match system {
        "zookeeper" => "#e8710a",
        "wazoo" => "#1f77b4",
        // recipe-call: both bars are wazoo's, the call darker.
        "recipe call" => "#1f77b4",
        "getData" => "#7fb3de",
        _ => "#7f7f7f",
    }
}

/// Series colours for more than one line per system (e.g. one per watcher
/// count): the system's colour, then a lighter shade.
fn shade(system: &str, i: usize) -> &'static str {
    match (system, i % 3) {
        ("zookeeper", 0) => "#e8710a",
        ("zookeeper", 1) => "#f5b06b",
        ("zookeeper", _) => "#a34f07",
        ("wazoo", 0) => "#1f77b4",
        ("wazoo", 1) => "#7fb3de",
        ("wazoo", _) => "#134a73",
        _ => "#7f7f7f",
    }
}

/// One panel of a figure.
pub enum Panel {
    /// Groups of bars: `groups[i] = (label, [(system, value)])`.
    Bars {
        title: String,
        unit: String,
        groups: Vec<(String, Vec<(String, f64)>)>,
    },
    /// Latency CDF lines: `(system, series label, values in µs at
    /// [`CDF_QUANTILES`])`. The x axis is cut at the largest p99.9 so the
    /// body of the distribution stays readable (the max is in the tables).
    Cdf {
        title: String,
        series: Vec<(String, String, Vec<f64>)>,
    },
    /// Lines over evenly spaced categories (e.g. session counts):
    /// `series[i] = (system, one value per x label, None where missing)`.
    Lines {
        title: String,
        x_label: String,
        y_label: String,
        x_labels: Vec<String>,
        series: Vec<(String, Vec<Option<f64>>)>,
    },
}

/// A whole SVG document: a title over the panels side by side.
pub fn figure(title: &str, panels: &[Panel]) -> String {
    let n = panels.len().max(1) as f64;
    let (w, h) = (PANEL_W * n, PANEL_H + TITLE_H);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="18" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
        w / 2.0,
        esc(title)
    );
    for (i, p) in panels.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<g transform="translate({},{TITLE_H})">"#,
            i as f64 * PANEL_W
        );
        match p {
            Panel::Bars {
                title,
                unit,
                groups,
            } => bars(&mut s, title, unit, groups),
            Panel::Cdf { title, series } => cdf(&mut s, title, series),
            Panel::Lines {
                title,
                x_label,
                y_label,
                x_labels,
                series,
            } => lines(&mut s, title, x_label, y_label, x_labels, series),
        }
        s.push_str("</g>\n");
    }
    s.push_str("</svg>\n");
    s
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" axis top and step for values up to `max` (1, 2 or 5 × 10^k).
fn nice_axis(max: f64) -> (f64, f64) {
    if max.is_nan() || max <= 0.0 || !max.is_finite() {
        return (1.0, 0.2);
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

fn fmt_tick(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Frame, title, y axis with ticks up to `top`; returns the plot area
/// (x0, y0, width, height).
fn axes(s: &mut String, title: &str, y_label: &str, top: f64, step: f64) -> (f64, f64, f64, f64) {
    let (x0, y0) = (MARGIN_L, MARGIN_T);
    let (pw, ph) = (PANEL_W - MARGIN_L - MARGIN_R, PANEL_H - MARGIN_T - MARGIN_B);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="16" text-anchor="middle" font-size="12">{}</text>"#,
        PANEL_W / 2.0,
        esc(title)
    );
    let mut v = 0.0;
    while v <= top + step / 2.0 {
        let y = y0 + ph - v / top * ph;
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 + pw,
            x0 - 4.0,
            y + 4.0,
            fmt_tick(v)
        );
        v += step;
    }
    let _ = writeln!(
        s,
        r##"<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{}" stroke="#333"/><line x1="{x0}" y1="{}" x2="{}" y2="{}" stroke="#333"/>"##,
        y0 + ph,
        y0 + ph,
        x0 + pw,
        y0 + ph
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(14,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        y0 + ph / 2.0,
        esc(y_label)
    );
    (x0, y0, pw, ph)
}

fn bars(s: &mut String, title: &str, unit: &str, groups: &[(String, Vec<(String, f64)>)]) {
    let max = groups
        .iter()
        .flat_map(|(_, b)| b.iter().map(|(_, v)| *v))
        .fold(0.0, f64::max);
    let (top, step) = nice_axis(max);
    let (x0, y0, pw, ph) = axes(s, title, unit, top, step);
    let ng = groups.len().max(1) as f64;
    let gw = pw / ng;
    for (gi, (label, bars)) in groups.iter().enumerate() {
        let nb = bars.len().max(1) as f64;
        let bw = (gw * 0.8 / nb).min(60.0);
        let gx = x0 + gi as f64 * gw + (gw - bw * nb) / 2.0;
        for (bi, (system, v)) in bars.iter().enumerate() {
            let bh = if top > 0.0 { v / top * ph } else { 0.0 };
            let x = gx + bi as f64 * bw;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                y0 + ph - bh,
                bw - 2.0,
                color(system),
                esc(system),
                trim(*v)
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{}</text>"#,
                x + bw / 2.0 - 1.0,
                y0 + ph - bh - 3.0,
                fmt_tick(*v)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x0 + gi as f64 * gw + gw / 2.0,
            y0 + ph + 14.0,
            esc(label)
        );
    }
    let systems: Vec<&str> = {
        let mut v: Vec<&str> = Vec::new();
        for (_, b) in groups {
            for (sys, _) in b {
                if !v.contains(&sys.as_str()) {
                    v.push(sys);
                }
            }
        }
        v
    };
    legend(
        s,
        y0 + ph + 30.0,
        &systems
            .iter()
            .map(|n| (n.to_string(), color(n)))
            .collect::<Vec<_>>(),
    );
}

fn legend(s: &mut String, y: f64, items: &[(String, &str)]) {
    let mut x = MARGIN_L;
    for (label, c) in items {
        let _ = writeln!(
            s,
            r#"<rect x="{x:.1}" y="{:.1}" width="10" height="10" fill="{c}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            y - 9.0,
            x + 14.0,
            y,
            esc(label)
        );
        x += 24.0 + 6.5 * label.len() as f64;
    }
}

fn cdf(s: &mut String, title: &str, series: &[(String, String, Vec<f64>)]) {
    // x: latency up to the largest p99.9 (index of 0.999); y: fraction.
    let p999 = CDF_QUANTILES
        .iter()
        .position(|&q| q == 0.999)
        .expect("0.999 is sampled");
    let xmax = series
        .iter()
        .filter_map(|(_, _, v)| v.get(p999).copied())
        .fold(0.0, f64::max);
    let (unit, div) = if xmax >= 5_000.0 {
        ("ms", 1000.0)
    } else {
        ("µs", 1.0)
    };
    let (xtop, xstep) = nice_axis(xmax / div);
    let (x0, y0, pw, ph) = axes(s, title, "fraction of requests", 1.0, 0.2);
    let mut v = 0.0;
    while v <= xtop + xstep / 2.0 {
        let x = x0 + v / xtop * pw;
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            y0 + ph + 14.0,
            fmt_tick(v)
        );
        v += xstep;
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">latency ({unit}), cut at the largest p99.9</text>"#,
        x0 + pw / 2.0,
        y0 + ph + 28.0
    );
    let mut items = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (system, label, values) in series {
        if values.len() != CDF_QUANTILES.len() {
            continue;
        }
        let i = seen.iter().filter(|s| *s == system).count();
        seen.push(system.clone());
        let c = shade(system, i);
        let pts: Vec<String> = values
            .iter()
            .zip(CDF_QUANTILES)
            .map(|(lat, q)| {
                let x = x0 + (lat / div / xtop).min(1.0) * pw;
                let y = y0 + ph - q * ph;
                format!("{x:.1},{y:.1}")
            })
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#,
            pts.join(" ")
        );
        items.push((label.clone(), c));
    }
    legend(s, y0 + ph + 44.0, &items);
}

fn lines(
    s: &mut String,
    title: &str,
    x_label: &str,
    y_label: &str,
    x_labels: &[String],
    series: &[(String, Vec<Option<f64>>)],
) {
    let max = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().copied())
        .fold(0.0, f64::max);
    let (top, step) = nice_axis(max);
    let (x0, y0, pw, ph) = axes(s, title, y_label, top, step);
    let n = x_labels.len().max(1) as f64;
    let x_at = |i: usize| x0 + (i as f64 + 0.5) / n * pw;
    for (i, label) in x_labels.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x_at(i),
            y0 + ph + 14.0,
            esc(label)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        x0 + pw / 2.0,
        y0 + ph + 28.0,
        esc(x_label)
    );
    let mut items = Vec::new();
    for (system, values) in series {
        let c = color(system);
        let pts: Vec<(f64, f64, f64)> = values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (x_at(i), y0 + ph - v / top * ph, v)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#,
            pts.iter()
                .map(|(x, y, _)| format!("{x:.1},{y:.1}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        for (x, y, v) in &pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{c}"><title>{}: {}</title></circle>"#,
                esc(system),
                trim(*v)
            );
        }
        items.push((system.clone(), c));
    }
    legend(s, y0 + ph + 44.0, &items);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_are_nice() {
        assert_eq!(nice_axis(97.0), (100.0, 20.0));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        assert_eq!(nice_axis(12_345.0), (15_000.0, 5_000.0));
        assert_eq!(fmt_tick(15_000.0), "15k");
        assert_eq!(fmt_tick(2_500_000.0), "2.5M");
        assert_eq!(fmt_tick(0.25), "0.25");
    }

    #[test]
    fn a_figure_is_one_well_formed_svg_document() {
        let mut h = crate::stats::new_histogram();
        for us in 1..=1000u64 {
            crate::stats::record(&mut h, std::time::Duration::from_micros(us));
        }
        let cdf = cdf_points(&h);
        assert_eq!(cdf.len(), CDF_QUANTILES.len());
        assert!(cdf.windows(2).all(|w| w[0] <= w[1]));
        let svg = figure(
            "get <& \"quoted\">",
            &[
                Panel::Bars {
                    title: "ops/s".into(),
                    unit: "ops/s".into(),
                    groups: vec![(
                        "get".into(),
                        vec![("zookeeper".into(), 50_000.0), ("wazoo".into(), 150_000.0)],
                    )],
                },
                Panel::Cdf {
                    title: "latency".into(),
                    series: vec![
                        ("zookeeper".into(), "zookeeper".into(), cdf.clone()),
                        ("wazoo".into(), "wazoo".into(), cdf),
                    ],
                },
            ],
        );
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("&lt;&amp; &quot;quoted&quot;&gt;"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<g ").count(), svg.matches("</g>").count());
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn a_line_plot_skips_missing_points() {
        let svg = figure(
            "sweep",
            &[Panel::Lines {
                title: "mixed".into(),
                x_label: "sessions".into(),
                y_label: "ops/s".into(),
                x_labels: vec!["1".into(), "4".into(), "16".into()],
                series: vec![
                    (
                        "zookeeper".into(),
                        vec![Some(1_000.0), None, Some(30_000.0)],
                    ),
                    (
                        "wazoo".into(),
                        vec![Some(2_000.0), Some(20_000.0), Some(60_000.0)],
                    ),
                ],
            }],
        );
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 5);
        assert!(svg.contains("#e8710a") && svg.contains("#1f77b4"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
}
