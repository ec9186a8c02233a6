//! Latency histograms, their summaries, and a tiny deterministic RNG.

use hdrhistogram::Histogram;
use serde::Serialize;

/// A latency histogram in nanoseconds, 1 ns .. 120 s, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000_000, 3).expect("valid histogram bounds")
}

/// Records one latency (saturating at the top of the range).
pub fn record(h: &mut Histogram<u64>, d: std::time::Duration) {
    h.saturating_record(d.as_nanos().clamp(1, u64::MAX as u128) as u64);
}

/// Percentiles of one histogram, in microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            count: h.len(),
            mean_us: h.mean() / 1000.0,
            p50_us: us(h.value_at_quantile(0.50)),
            p90_us: us(h.value_at_quantile(0.90)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

/// xorshift64*: enough to pick keys, identical sequence for both systems.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-enough in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() >> 32) * n) >> 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn percentiles_in_microseconds() {
        let mut h = new_histogram();
        for us in 1..=1000u64 {
            record(&mut h, Duration::from_micros(us));
        }
        let l = Latency::of(&h);
        assert_eq!(l.count, 1000);
        assert!((l.p50_us - 500.0).abs() < 2.0, "{l:?}");
        assert!((l.p99_us - 990.0).abs() < 2.0, "{l:?}");
        assert!((l.max_us - 1000.0).abs() < 2.0, "{l:?}");
        assert_eq!(Latency::of(&new_histogram()).count, 0);
    }

    #[test]
    fn rng_stays_in_range_and_spreads() {
        let mut r = Rng::new(7);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            seen[r.below(10) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
    }
}
