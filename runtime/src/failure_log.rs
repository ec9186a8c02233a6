//! The WARN line of a failed recipe call, rate-limited per module.
//!
//! Every failed call or callback (out of fuel, trap, panic, a path outside
//! the module's prefixes, a tree error the recipe returned, an unknown
//! method...) is worth a line at the default level, but a client calling a
//! broken module in a loop must not flood the log: each module gets at most
//! [`LINES_PER_WINDOW_MAX`] lines per [`WINDOW`], and the first line after
//! a window in which lines were dropped says how many (`suppressed=K`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines per module per window.
pub const LINES_PER_WINDOW_MAX: u32 = 10;
/// The rate limiter's window.
pub const WINDOW: Duration = Duration::from_secs(1);
/// Modules tracked at once; past it, modules idle for a window are forgotten
/// (a forgotten module only loses its suppressed count).
const MODULES_MAX: usize = 1024;

/// One module's window.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    lines: u32,
    suppressed: u64,
}

/// Per-module line budget. Time is an argument so tests drive it.
#[derive(Debug, Default)]
pub struct FailureLimiter {
    modules: HashMap<String, Window>,
}

impl FailureLimiter {
    /// Whether a line for `module` may be written at `now`: `Some(k)` with
    /// the number of lines suppressed since the last line written, or `None`
    /// (the line is dropped and counted).
    pub fn admit(&mut self, module: &str, now: Instant) -> Option<u64> {
        if self.modules.len() >= MODULES_MAX && !self.modules.contains_key(module) {
            self.modules
                .retain(|_, w| now.saturating_duration_since(w.start) < WINDOW);
            if self.modules.len() >= MODULES_MAX {
                // Every tracked module is busy: write the line, track nothing new.
                return Some(0);
            }
        }
        let w = self.modules.entry(module.to_string()).or_insert(Window {
            start: now,
            lines: 0,
            suppressed: 0,
        });
        if now.saturating_duration_since(w.start) >= WINDOW {
            w.start = now;
            w.lines = 0;
        }
        if w.lines >= LINES_PER_WINDOW_MAX {
            w.suppressed += 1;
            return None;
        }
        w.lines += 1;
        Some(std::mem::take(&mut w.suppressed))
    }
}

/// A failed call as the log line names it.
#[derive(Debug, Clone, Copy)]
pub struct Failure<'a> {
    pub module: &'a str,
    /// The method, or `on_watch` for a callback.
    pub method: &'a str,
    pub session: i64,
    /// The ZooKeeper (or recipe's own) error code the caller sees.
    pub code: i32,
    /// `fuel`, `trap`, `panic`, ... ([`crate::RecipeError::kind`]), or
    /// `recipe` for an error the module returned itself.
    pub kind: &'a str,
    pub message: &'a str,
}

static LIMITER: Mutex<Option<FailureLimiter>> = Mutex::new(None);

/// Logs `f` at WARN unless its module is over its budget.
pub fn log_failure(f: &Failure<'_>) {
    let admitted = {
        let mut l = LIMITER.lock().unwrap_or_else(|e| e.into_inner());
        l.get_or_insert_with(FailureLimiter::default)
            .admit(f.module, Instant::now())
    };
    if let Some(suppressed) = admitted {
        tracing::warn!(
            target: "wazoo::recipe",
            module = f.module,
            method = f.method,
            session = %format_args!("0x{:x}", f.session),
            code = f.code,
            kind = f.kind,
            suppressed,
            // Quoted: a panic message spans lines, the log line does not.
            error = ?f.message,
            "recipe call failed"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_gets_its_budget_per_window_then_the_count_of_dropped_lines() {
        let mut l = FailureLimiter::default();
        let t0 = Instant::now();
        for _ in 0..LINES_PER_WINDOW_MAX {
            assert_eq!(l.admit("lock", t0), Some(0));
        }
        for _ in 0..7 {
            assert_eq!(l.admit("lock", t0 + Duration::from_millis(500)), None);
        }
        // Another module has its own budget.
        assert_eq!(l.admit("queue", t0), Some(0));
        // The next window's first line reports the 7 dropped ones, once.
        assert_eq!(l.admit("lock", t0 + WINDOW), Some(7));
        assert_eq!(l.admit("lock", t0 + WINDOW), Some(0));
    }

    #[test]
    fn the_tracked_modules_are_bounded() {
        let mut l = FailureLimiter::default();
        let t0 = Instant::now();
        for i in 0..MODULES_MAX {
            assert!(l.admit(&format!("m{i}"), t0).is_some());
        }
        // Full and all busy: a new module still logs, untracked.
        assert_eq!(l.admit("new", t0), Some(0));
        assert_eq!(l.modules.len(), MODULES_MAX);
        // A window later the idle ones are forgotten.
        assert_eq!(l.admit("new", t0 + WINDOW), Some(0));
        assert_eq!(l.modules.len(), 1);
    }
}
