//! The figures behind the metrics that are observed one event at a time:
//! ZooKeeper's summaries (count, sum, min, max, quantiles) and wazoo's
//! request latency histogram.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

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

impl SummaryState {
    fn record(&mut self, raw: u64, n: u64) {
        self.total_count += n;
        self.total_sum = self.total_sum.saturating_add(raw.saturating_mul(n));
        if self.count == 0 || raw < self.min {
            self.min = raw;
        }
        self.max = self.max.max(raw);
        self.count += n;
        self.sum = self.sum.saturating_add(raw.saturating_mul(n));
        for _ in 0..n.min(WINDOW_MAX as u64) {
            if self.window.len() == WINDOW_MAX {
                self.window.pop_front();
            }
            self.window.push_back(raw);
        }
    }
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
        s.record(raw, n);
    }

    /// Records each of `raws`, taking the lock once (a connection's writer
    /// records the requests of one write together).
    pub fn observe_all(&self, raws: &[u64]) {
        if raws.is_empty() {
            return;
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for &raw in raws {
            s.record(raw, 1);
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

/// Request latencies one connection's writer gathers for one write (the
/// replies it wrote together), recorded into the member's shared figures
/// at once ([`crate::metrics::Metrics::observe_requests`]): the shared
/// summaries are locked once per write, not once per request. The vectors
/// keep their room from one write to the next.
#[derive(Debug, Default)]
pub struct LatencyBatch {
    /// `readlatency` observations, microseconds.
    pub(super) read_us: Vec<u64>,
    /// `updatelatency` observations, microseconds.
    pub(super) update_us: Vec<u64>,
    /// Histogram counts per bucket (not cumulative); the last is `+Inf`.
    buckets: [u64; LATENCY_BUCKETS_S.len() + 1],
    sum_ns: u64,
}

impl LatencyBatch {
    /// One request answered: `update` if it went through the write
    /// pipeline, `took` from its frame read to its reply written.
    pub fn add(&mut self, update: bool, took: Duration) {
        self.buckets[bucket_of(took)] += 1;
        self.sum_ns = self
            .sum_ns
            .saturating_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        if update {
            self.update_us.push(us);
        } else {
            self.read_us.push(us);
        }
    }

    /// Empties the batch, keeping its room.
    pub fn clear(&mut self) {
        self.read_us.clear();
        self.update_us.clear();
        self.buckets = [0; LATENCY_BUCKETS_S.len() + 1];
        self.sum_ns = 0;
    }
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

/// The histogram bucket of a duration: the first upper bound it is at or
/// under (the last, `+Inf`, for anything longer).
fn bucket_of(d: Duration) -> usize {
    let s = d.as_secs_f64();
    LATENCY_BUCKETS_S
        .iter()
        .position(|&le| s <= le)
        .unwrap_or(LATENCY_BUCKETS_S.len())
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        self.buckets[bucket_of(d)].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds a batch's observations: one atomic add per bucket it touched.
    pub fn observe_batch(&self, b: &LatencyBatch) {
        let mut n = 0;
        for (bucket, &k) in self.buckets.iter().zip(&b.buckets) {
            if k > 0 {
                bucket.fetch_add(k, Ordering::Relaxed);
                n += k;
            }
        }
        if n > 0 {
            self.sum_ns.fetch_add(b.sum_ns, Ordering::Relaxed);
            self.count.fetch_add(n, Ordering::Relaxed);
        }
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
    fn a_latency_batch_records_the_same_figures_as_one_observation_at_a_time() {
        let one_by_one = (
            Histogram::default(),
            Summary::new(1000.0),
            Summary::new(1000.0),
        );
        let batched = (
            Histogram::default(),
            Summary::new(1000.0),
            Summary::new(1000.0),
        );
        let mut batch = LatencyBatch::default();
        let took = [
            (false, 8),
            (true, 30),
            (false, 700),
            (true, 10_000_000),
            (false, 30),
        ];
        for (update, us) in took {
            let d = Duration::from_micros(us);
            one_by_one.0.observe(d);
            if update {
                one_by_one.2.observe(us);
            } else {
                one_by_one.1.observe(us);
            }
            batch.add(update, d);
        }
        batched.0.observe_batch(&batch);
        batched.1.observe_all(&batch.read_us);
        batched.2.observe_all(&batch.update_us);
        assert_eq!(batched.0.figures(), one_by_one.0.figures());
        let qs = [0.5, 0.99];
        assert_eq!(batched.1.mntr(&qs), one_by_one.1.mntr(&qs), "readlatency");
        assert_eq!(batched.2.mntr(&qs), one_by_one.2.mntr(&qs), "updatelatency");
        assert_eq!(batched.1.prometheus(&qs).count, 3);
        batch.clear();
        batched.0.observe_batch(&batch);
        assert_eq!(batched.0.figures().count, 5, "an empty batch adds nothing");
        assert!(batch.read_us.is_empty() && batch.update_us.is_empty());
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
