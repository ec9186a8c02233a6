//! Per-module recipe counters for the whole ensemble (docs/METRICS.md,
//! "Recipes"). Only the leader runs steps, so its engine's counters are the
//! ensemble's; every `COUNTERS_INTERVAL_MS` in which they changed, the
//! leader commits them as a [`Txn::RecipeCounters`](crate::txn::Txn), so
//! every member shows the same figures, and a new leader (or a restarted
//! standalone member, replaying its log) goes on counting from them.

use std::collections::BTreeMap;

use wazoo_proto::jute::{DecodeError, Reader, Writer};

/// Upper bounds (inclusive, µs) of the latency histogram's buckets; a last
/// bucket counts the calls above the largest.
pub const LATENCY_BOUNDS_US: [u64; 9] = [
    100, 250, 500, 1_000, 2_500, 10_000, 50_000, 250_000, 1_000_000,
];

/// Buckets of the latency histogram: one per bound and one above them.
pub const LATENCY_BUCKETS: usize = LATENCY_BOUNDS_US.len() + 1;

/// The entry of the counters for calls and callbacks of a module that is
/// not served (kind `unknown_module`): they fail before any module runs,
/// and count under this name, which no module can have (module names are
/// `[A-Za-z0-9_.-]`). `recp`, /zookeeper/recipes and the metrics show it
/// as the module `*`.
pub const UNSERVED: &str = "*";

impl super::ModuleReport {
    /// The report listed as the module [`UNSERVED`]: no module, the
    /// counters of the calls that found none.
    pub fn unserved(counters: ModuleCounters) -> super::ModuleReport {
        super::ModuleReport {
            name: UNSERVED.into(),
            version: "-".into(),
            hash: "-".into(),
            methods: Vec::new(),
            calls: counters.calls,
            errors: counters.errors_total(),
            fuel_used: counters.fuel,
            loads: 0,
            counters,
        }
    }
}

/// How often, at most, the leader commits changed counters.
pub const COUNTERS_INTERVAL_MS: i64 = 5_000;

/// Most error kinds kept per module (the engine's kinds are a fixed set;
/// the bound keeps a hostile log record from growing memory).
const ERROR_KINDS_MAX: usize = 64;

/// Most modules in one counters txn.
const MODULES_MAX: usize = 4096;

/// One module's counters: every call and callback the leader ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleCounters {
    pub calls: u64,
    /// Failed calls (an error reply or a sandbox failure), by kind: the
    /// engine's error kind (`fuel`, `trap`, `panic`, `deadline`,
    /// `path_outside_prefixes`, ...), or `recipe` for an error the recipe
    /// answered itself.
    pub errors: BTreeMap<String, u64>,
    pub fuel: u64,
    /// Calls by latency bucket ([`LATENCY_BOUNDS_US`]).
    pub latency_buckets: [u64; LATENCY_BUCKETS],
    /// The sum of the calls' latencies, µs.
    pub latency_sum_us: u64,
}

impl ModuleCounters {
    /// Failed calls of every kind.
    pub fn errors_total(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Counts one finished call.
    pub fn record(&mut self, fuel: u64, latency_us: u64, error_kind: Option<&str>) {
        self.calls += 1;
        self.fuel = self.fuel.saturating_add(fuel);
        self.latency_sum_us = self.latency_sum_us.saturating_add(latency_us);
        let b = LATENCY_BOUNDS_US
            .iter()
            .position(|&bound| latency_us <= bound)
            .unwrap_or(LATENCY_BOUNDS_US.len());
        self.latency_buckets[b] += 1;
        if let Some(kind) = error_kind {
            if self.errors.len() < ERROR_KINDS_MAX || self.errors.contains_key(kind) {
                *self.errors.entry(kind.to_string()).or_default() += 1;
            }
        }
    }

    fn write(&self, w: &mut Vec<u8>) {
        w.write_i64(self.calls as i64);
        w.write_i32(self.errors.len() as i32);
        for (kind, n) in &self.errors {
            w.write_string(kind);
            w.write_i64(*n as i64);
        }
        w.write_i64(self.fuel as i64);
        w.write_i32(LATENCY_BUCKETS as i32);
        for n in &self.latency_buckets {
            w.write_i64(*n as i64);
        }
        w.write_i64(self.latency_sum_us as i64);
    }

    fn read(r: &mut Reader<'_>) -> Result<ModuleCounters, DecodeError> {
        let mut c = ModuleCounters {
            calls: r.read_i64()? as u64,
            ..Default::default()
        };
        let kinds = r.read_len(12)?;
        if kinds > ERROR_KINDS_MAX {
            return Err(DecodeError::Invalid(format!("{kinds} error kinds")));
        }
        for _ in 0..kinds {
            let kind = r.read_string()?;
            c.errors.insert(kind, r.read_i64()? as u64);
        }
        c.fuel = r.read_i64()? as u64;
        let buckets = r.read_len(8)?;
        if buckets != LATENCY_BUCKETS {
            return Err(DecodeError::Invalid(format!(
                "{buckets} latency buckets, not {LATENCY_BUCKETS}"
            )));
        }
        for b in &mut c.latency_buckets {
            *b = r.read_i64()? as u64;
        }
        c.latency_sum_us = r.read_i64()? as u64;
        Ok(c)
    }
}

/// The counters of every module, by name.
pub type RecipeCounters = BTreeMap<String, ModuleCounters>;

pub(crate) fn write_counters(c: &RecipeCounters, w: &mut Vec<u8>) {
    w.write_i32(c.len() as i32);
    for (name, m) in c {
        w.write_string(name);
        m.write(w);
    }
}

pub(crate) fn read_counters(r: &mut Reader<'_>) -> Result<RecipeCounters, DecodeError> {
    let n = r.read_len(4 + 8 + 4 + 8 + 4 + 8)?;
    if n > MODULES_MAX {
        return Err(DecodeError::Invalid(format!("counters of {n} modules")));
    }
    let mut c = RecipeCounters::new();
    for _ in 0..n {
        let name = r.read_string()?;
        c.insert(name, ModuleCounters::read(r)?);
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_bucket_latencies_count_errors_by_kind_and_round_trip() {
        let mut m = ModuleCounters::default();
        m.record(10, 50, None);
        m.record(20, 100, Some("fuel"));
        m.record(5, 2_000_000, Some("trap"));
        m.record(5, 300, Some("fuel"));
        assert_eq!(m.calls, 4);
        assert_eq!(m.fuel, 40);
        assert_eq!(m.errors_total(), 3);
        assert_eq!(m.errors["fuel"], 2);
        assert_eq!(
            m.latency_buckets[0], 2,
            "50 and 100 µs are in the first bucket"
        );
        assert_eq!(m.latency_buckets[2], 1, "300 µs is in the 500 µs bucket");
        assert_eq!(
            m.latency_buckets[LATENCY_BUCKETS - 1],
            1,
            "2 s is above them all"
        );
        let c: RecipeCounters = [("lock".to_string(), m)].into_iter().collect();
        let mut w = Vec::new();
        write_counters(&c, &mut w);
        assert_eq!(read_counters(&mut Reader::new(&w)).unwrap(), c);
        for n in 0..w.len() {
            assert!(read_counters(&mut Reader::new(&w[..n])).is_err());
        }
    }
}
