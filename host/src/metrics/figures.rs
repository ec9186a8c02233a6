//! The figures behind the metrics that are observed one event at a time:
//! ZooKeeper's summaries (count, sum, min, max, quantiles) and wazoo's
//! request latency histogram.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// How many recent observations a summary keeps for its quantiles.
const WINDOW_MAX: usize = 1024;

/// One of ZooKeeper's summaries (`ServerMetrics`: `fsynctime`,
/// `readlatency`, ...). Observations are raw integers (microseconds for
/// times, plain counts otherwise); what is shown is `raw / scale` (so
/// milliseconds for times, as ZooKeeper reports them).
///
/// Two views: Prometheus' (count and sum since the member started, never
/// reset, so that `rate()` works) and `mntr`'s (count, sum, min and max
/// since the last `srst`, as ZooKeeper's default provider resets them).
/// Quantiles come from the last [`WINDOW_MAX`] observations.
pub struct Summary {
    scale: f64,
    state: Mutex<SummaryState>,
}

#[derive(Default)]
struct SummaryState {
    total_count: u64,
    total_sum: u64,
    count: u64,
    sum: u64,
    min: u64,
    max: u64,
    window: VecDeque<u64>,
}

/// A summary's figures in displayed units.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryFigures {
    pub count: u64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
    /// `(q, value)`, value NaN without observations (as Prometheus' Java
    /// client reports an empty summary).
    pub quantiles: Vec<(f64, f64)>,
}

impl Summary {
    /// `scale`: raw units per displayed unit (1000 for microseconds shown
    /// as milliseconds, 1 for counts).
    pub fn new(scale: f64) -> Summary {
        assert!(scale > 0.0, "a summary's scale must be positive");
        Summary {
            scale,
            state: Mutex::new(SummaryState::default()),
        }
    }

    pub fn observe(&self, raw: u64) {
        self.observe_n(raw, 1);
    }

    /// Records `n` observations of the same value (a group of fsyncs of
    /// which only the total time is known).
    pub fn observe_n(&self, raw: u64, n: u64) {
        if n == 0 {
            return;
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.total_count += n;
        s.total_sum = s.total_sum.saturating_add(raw.saturating_mul(n));
        if s.count == 0 || raw < s.min {
            s.min = raw;
        }
        s.max = s.max.max(raw);
        s.count += n;
        s.sum = s.sum.saturating_add(raw.saturating_mul(n));
        for _ in 0..n.min(WINDOW_MAX as u64) {
            if s.window.len() == WINDOW_MAX {
                s.window.pop_front();
            }
            s.window.push_back(raw);
        }
    }

    /// `srst`: `mntr`'s view starts again; Prometheus' count and sum do not.
    pub fn reset(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.count = 0;
        s.sum = 0;
        s.min = 0;
        s.max = 0;
        s.window.clear();
    }

    /// Prometheus' view: count and sum since start, and `qs` quantiles.
    pub fn prometheus(&self, qs: &[f64]) -> SummaryFigures {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        SummaryFigures {
            count: s.total_count,
            sum: s.total_sum as f64 / self.scale,
            min: s.min as f64 / self.scale,
            max: s.max as f64 / self.scale,
            quantiles: self.quantiles(&s.window, qs),
        }
    }

    /// `mntr`'s view: since the last reset, and `qs` quantiles.
    pub fn mntr(&self, qs: &[f64]) -> SummaryFigures {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        SummaryFigures {
            count: s.count,
            sum: s.sum as f64 / self.scale,
            min: s.min as f64 / self.scale,
            max: s.max as f64 / self.scale,
            quantiles: self.quantiles(&s.window, qs),
        }
    }

    fn quantiles(&self, window: &VecDeque<u64>, qs: &[f64]) -> Vec<(f64, f64)> {
        let mut sorted: Vec<u64> = window.iter().copied().collect();
        sorted.sort_unstable();
        qs.iter()
            .map(|&q| {
                let v = if sorted.is_empty() {
                    f64::NAN
                } else {
                    // The nearest rank: the smallest value with at least
                    // q of the observations at or below it.
                    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
                    sorted[rank - 1] as f64 / self.scale
                };
                (q, v)
            })
            .collect()
    }
}

/// Upper bounds of the request latency histogram, in seconds: wazoo
/// answers a read in tens of microseconds, so the buckets start at 10 µs.
pub const LATENCY_BUCKETS_S: [f64; 17] = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5,
];

/// A Prometheus histogram of durations, lock-free (the connections'
/// writers observe into it).
pub struct Histogram {
    /// Observations per bucket (not cumulative); the last is `+Inf`.
    buckets: [AtomicU64; LATENCY_BUCKETS_S.len() + 1],
    sum_ns: AtomicU64,
    count: AtomicU64,
}

/// A histogram's figures: cumulative counts per upper bound (the last is
/// `+Inf`), the sum in seconds, and the count.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramFigures {
    pub buckets: Vec<(f64, u64)>,
    pub sum: f64,
    pub count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub fn observe(&self, d: std::time::Duration) {
        let s = d.as_secs_f64();
        let i = LATENCY_BUCKETS_S
            .iter()
            .position(|&le| s <= le)
            .unwrap_or(LATENCY_BUCKETS_S.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub fn figures(&self) -> HistogramFigures {
        let mut acc = 0;
        let mut buckets = Vec::with_capacity(self.buckets.len());
        for (i, b) in self.buckets.iter().enumerate() {
            acc += b.load(Ordering::Relaxed);
            let le = LATENCY_BUCKETS_S.get(i).copied().unwrap_or(f64::INFINITY);
            buckets.push((le, acc));
        }
        HistogramFigures {
            // The count is the +Inf bucket, so that the two always agree
            // even while an observation is half recorded.
            count: acc,
            sum: self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
            buckets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reports_milliseconds_from_microseconds_and_resets_only_mntrs_view() {
        let s = Summary::new(1000.0);
        for us in [100, 2_000, 40_000] {
            s.observe(us);
        }
        let m = s.mntr(&[0.5, 0.99]);
        assert_eq!(m.count, 3);
        assert_eq!(m.sum, 42.1);
        assert_eq!(m.min, 0.1);
        assert_eq!(m.max, 40.0);
        assert_eq!(m.quantiles, vec![(0.5, 2.0), (0.99, 40.0)]);
        s.reset();
        let m = s.mntr(&[0.5]);
        assert_eq!((m.count, m.sum, m.max), (0, 0.0, 0.0));
        assert!(m.quantiles[0].1.is_nan(), "no observations: NaN");
        let p = s.prometheus(&[]);
        assert_eq!((p.count, p.sum), (3, 42.1), "Prometheus' view never resets");
    }

    #[test]
    fn a_summary_keeps_a_bounded_window_for_its_quantiles() {
        let s = Summary::new(1.0);
        s.observe_n(7, 10 * WINDOW_MAX as u64);
        s.observe(1);
        let st = s.state.lock().unwrap();
        assert_eq!(st.window.len(), WINDOW_MAX);
        assert_eq!(st.total_count, 10 * WINDOW_MAX as u64 + 1);
        assert_eq!(st.min, 1);
    }

    #[test]
    fn the_latency_histogram_has_sub_millisecond_buckets_and_cumulative_counts() {
        let h = Histogram::default();
        h.observe(std::time::Duration::from_micros(8));
        h.observe(std::time::Duration::from_micros(30));
        h.observe(std::time::Duration::from_secs(10));
        let f = h.figures();
        assert_eq!(f.count, 3);
        assert_eq!(f.buckets[0], (0.00001, 1), "8 µs is under 10 µs");
        assert_eq!(f.buckets[2], (0.00005, 2), "30 µs is under 50 µs");
        assert_eq!(f.buckets.last().unwrap().1, 3, "+Inf holds everything");
        assert!(f.buckets.last().unwrap().0.is_infinite());
        assert!((f.sum - 10.000038).abs() < 1e-9);
    }
}
