//! `lock` and `queue`: S sessions contending on one lock or one queue,
//! wazoo's recipe against kazoo's, and the accounting of queue items.

use std::collections::{BTreeMap, HashSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::task::JoinSet;
use wazoo_client::recipes::{Lock, Queue};
use zookeeper_client as zk;

use super::{wazoo_connect, WAZOO, WAZOO_KAZOO, ZK_KAZOO};
use crate::load::{connect_sessions, cpu_sample, persistent, CpuSample, Target};
use crate::stats::{new_histogram, record, Latency};

/// Which contended recipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Contended {
    Lock,
    Queue,
}

impl Contended {
    pub fn name(self) -> &'static str {
        match self {
            Contended::Lock => "lock",
            Contended::Queue => "queue",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ContendSpec {
    pub recipe: Contended,
    /// Contending sessions (one connection each).
    pub sessions: usize,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    /// Rounds per pairing, the order alternating.
    pub rounds: usize,
    /// One acquire/release or put/take gives up after this long.
    pub cycle_timeout_secs: f64,
    /// The Python running bench/kazoo_recipes.py.
    pub python: String,
    /// Also run kazoo's recipe against the wazoo ensemble.
    pub kazoo_on_wazoo: bool,
}

impl ContendSpec {
    /// An upper bound on one round: connecting, warm-up, window, the last
    /// cycles' timeout, the checks (and Python's start).
    pub fn round_bound_secs(&self) -> f64 {
        30.0 + self.warmup_secs + self.duration_secs + self.cycle_timeout_secs + 30.0
    }

    pub fn describe(&self) -> String {
        match self.recipe {
            Contended::Lock => format!(
                "{} sessions loop acquire + release on one lock path, {} s warm-up + {} s measured",
                self.sessions, self.warmup_secs, self.duration_secs
            ),
            Contended::Queue => format!(
                "{} sessions loop put + take on one queue, {} s warm-up + {} s measured",
                self.sessions, self.warmup_secs, self.duration_secs
            ),
        }
    }
}

/// One pairing (recipe implementation on a system), every round pooled.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ContendRun {
    /// What ran: client, recipe, server.
    pub what: String,
    /// Cycles (acquire + release, or put + take) completed inside the windows.
    pub cycles: u64,
    pub window_secs: f64,
    pub cycles_per_sec: f64,
    pub rounds_cycles_per_sec: Vec<f64>,
    pub cycle: Latency,
    pub cycle_cdf_us: Vec<f64>,
    pub errors: BTreeMap<String, u64>,
    /// lock: a session got the lock while another held it (must be 0).
    pub overlaps: u64,
    /// queue: items put, taken, taken twice, taken but never put, left in
    /// the queue, and neither taken nor left (all rounds; the last three
    /// must be 0 and taken + remaining = put).
    pub items_put: u64,
    pub items_taken: u64,
    pub duplicates: u64,
    pub foreign: u64,
    pub remaining: u64,
    pub lost: u64,
    /// The client's version (kazoo, Python) when kazoo ran.
    pub client_version: Option<String>,
    /// Server CPU (user+system, the members summed) over the windows, per
    /// cycle counted in them; 0 when no window was sampled.
    pub server_cpu_us_per_cycle: f64,
    /// The machine's other processes (neither the servers, the idle
    /// ensemble, the bench nor kazoo's Python) over the windows, in cores.
    pub other_cpu_cores: f64,
    pub failure: Option<String>,
}

/// The CPU one round's window took: the measured ensemble's members
/// summed, and every other process on the machine but the idle ensemble
/// and the clients (the noise the round ran in).
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowCpu {
    pub server_secs: f64,
    pub other_secs: f64,
}

impl WindowCpu {
    /// From samples at the window's start and end; `client0`/`client1`
    /// add the CPU of a client process other than the bench (kazoo's
    /// Python).
    fn between(a: &CpuSample, b: &CpuSample, client0: f64, client1: f64) -> WindowCpu {
        let server: f64 = b.servers.iter().zip(&a.servers).map(|(x, y)| x - y).sum();
        let client = (b.client - a.client) + (client1 - client0);
        let other = (b.busy - a.busy) - server - client - (b.idle - a.idle);
        WindowCpu {
            server_secs: server,
            other_secs: other.max(0.0),
        }
    }
}

/// One round of one pairing.
pub struct ContendRound {
    cycle: Histogram<u64>,
    window_secs: f64,
    errors: BTreeMap<String, u64>,
    overlaps: u64,
    items_put: u64,
    items_taken: u64,
    duplicates: u64,
    foreign: u64,
    remaining: u64,
    lost: u64,
    client_version: Option<String>,
    /// None when the window's CPU could not be sampled.
    cpu: Option<WindowCpu>,
    failure: Option<String>,
}

impl ContendRound {
    pub fn failed(why: String) -> ContendRound {
        let mut r = ContendRound::empty();
        r.failure = Some(why);
        r
    }

    fn empty() -> ContendRound {
        ContendRound {
            cycle: new_histogram(),
            window_secs: 0.0,
            errors: BTreeMap::new(),
            overlaps: 0,
            items_put: 0,
            items_taken: 0,
            duplicates: 0,
            foreign: 0,
            remaining: 0,
            lost: 0,
            client_version: None,
            cpu: None,
            failure: None,
        }
    }
}

/// Pools the rounds of one pairing.
pub fn summarize(what: &str, rounds: &[ContendRound]) -> ContendRun {
    let mut h = new_histogram();
    let mut run = ContendRun {
        what: what.to_string(),
        ..Default::default()
    };
    let mut failures = Vec::new();
    let (mut cpu_cycles, mut cpu_window, mut server, mut other) = (0u64, 0.0, 0.0, 0.0);
    for r in rounds {
        if let Some(c) = r.cpu {
            cpu_cycles += r.cycle.len();
            cpu_window += r.window_secs;
            server += c.server_secs;
            other += c.other_secs;
        }
        h.add(&r.cycle).expect("same histogram bounds");
        run.window_secs += r.window_secs;
        run.rounds_cycles_per_sec.push(if r.window_secs > 0.0 {
            r.cycle.len() as f64 / r.window_secs
        } else {
            0.0
        });
        for (k, v) in &r.errors {
            *run.errors.entry(k.clone()).or_default() += v;
        }
        run.overlaps += r.overlaps;
        run.items_put += r.items_put;
        run.items_taken += r.items_taken;
        run.duplicates += r.duplicates;
        run.foreign += r.foreign;
        run.remaining += r.remaining;
        run.lost += r.lost;
        if run.client_version.is_none() {
            run.client_version = r.client_version.clone();
        }
        failures.extend(r.failure.clone());
    }
    run.cycles = h.len();
    run.cycles_per_sec = if run.window_secs > 0.0 {
        run.cycles as f64 / run.window_secs
    } else {
        0.0
    };
    if cpu_cycles > 0 {
        run.server_cpu_us_per_cycle = server * 1e6 / cpu_cycles as f64;
    }
    if cpu_window > 0.0 {
        run.other_cpu_cores = other / cpu_window;
    }
    run.cycle = Latency::of(&h);
    run.cycle_cdf_us = crate::svg::cdf_points(&h);
    run.failure = (!failures.is_empty()).then(|| failures.join("; "));
    run
}

/// wazoo's own recipe (`Lock` / `Queue` handles of wazoo-client), one round
/// on `path`, against `target` (its cluster; its processes' CPU is sampled
/// at the window's start and end).
pub async fn wazoo_round(target: &Target, spec: &ContendSpec, path: &str) -> ContendRound {
    match wazoo_round_inner(target, spec, path).await {
        Ok(r) => r,
        Err(e) => ContendRound::failed(format!("{e:#}")),
    }
}

struct SessionOut {
    cycle: Histogram<u64>,
    errors: BTreeMap<String, u64>,
    puts: Vec<Vec<u8>>,
    taken: Vec<Vec<u8>>,
}

/// One step of a contention cycle under `limit`: its value, or None after
/// counting "`what`: error" or "`what` timeout" in `errors`.
async fn timed<T, E: std::fmt::Display>(
    errors: &mut BTreeMap<String, u64>,
    what: &str,
    limit: Duration,
    step: impl std::future::Future<Output = Result<T, E>>,
) -> Option<T> {
    match tokio::time::timeout(limit, step).await {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            *errors.entry(format!("{what}: {e}")).or_default() += 1;
            None
        }
        Err(_) => {
            *errors.entry(format!("{what} timeout")).or_default() += 1;
            None
        }
    }
}

async fn wazoo_round_inner(
    target: &Target,
    spec: &ContendSpec,
    path: &str,
) -> Result<ContendRound> {
    let hosts = target.cluster.as_str();
    let admin = connect_sessions(hosts, 1)
        .await?
        .pop()
        .expect("one session");
    match admin.create(path, b"", &persistent()).await {
        Ok(_) | Err(zk::Error::NodeExists) => {}
        Err(e) => bail!("create {path}: {e}"),
    }
    let mut clients = Vec::with_capacity(spec.sessions);
    let mut connecting = JoinSet::new();
    for _ in 0..spec.sessions {
        let hosts = hosts.to_string();
        connecting.spawn(async move { wazoo_connect(&hosts).await });
    }
    while let Some(c) = connecting.join_next().await {
        clients.push(c.context("connect task")??);
    }
    let start = Instant::now();
    let measure_start = start + Duration::from_secs_f64(spec.warmup_secs);
    let end = measure_start + Duration::from_secs_f64(spec.duration_secs);
    let cycle_timeout = Duration::from_secs_f64(spec.cycle_timeout_secs);
    let held = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    let sampler = {
        let target = target.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(measure_start.into()).await;
            let a = cpu_sample(&target);
            tokio::time::sleep_until(end.into()).await;
            let b = cpu_sample(&target);
            match (a, b) {
                (Ok(a), Ok(b)) => Some(WindowCpu::between(&a, &b, 0.0, 0.0)),
                _ => None,
            }
        })
    };
    let mut set = JoinSet::new();
    for (i, client) in clients.iter().cloned().enumerate() {
        let (path, recipe) = (path.to_string(), spec.recipe);
        let (held, overlaps) = (held.clone(), overlaps.clone());
        set.spawn(async move {
            let mut out = SessionOut {
                cycle: new_histogram(),
                errors: BTreeMap::new(),
                puts: Vec::new(),
                taken: Vec::new(),
            };
            let lock = Lock::new(&client, &path).with_id(format!("wazoo-{i}").as_bytes());
            let queue = Queue::new(&client, &path);
            let mut n = 0u64;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                n += 1;
                let ok = match recipe {
                    Contended::Lock => {
                        let acquired =
                            timed(&mut out.errors, "acquire", cycle_timeout, lock.acquire()).await;
                        if acquired.is_some() {
                            if held.swap(true, Ordering::SeqCst) {
                                overlaps.fetch_add(1, Ordering::Relaxed);
                            }
                            // Cleared before the release is sent: the next
                            // holder can only be told after it applies.
                            held.store(false, Ordering::SeqCst);
                            timed(&mut out.errors, "release", cycle_timeout, lock.release())
                                .await
                                .is_some()
                        } else {
                            false
                        }
                    }
                    Contended::Queue => {
                        let item = format!("{i}-{n}").into_bytes();
                        let put =
                            timed(&mut out.errors, "put", cycle_timeout, queue.put(&item)).await;
                        if put.is_some() {
                            out.puts.push(item);
                            match timed(&mut out.errors, "take", cycle_timeout, queue.take()).await
                            {
                                Some(data) => {
                                    out.taken.push(data);
                                    true
                                }
                                None => false,
                            }
                        } else {
                            false
                        }
                    }
                };
                let t1 = Instant::now();
                if ok && t0 >= measure_start && t1 <= end {
                    record(&mut out.cycle, t1 - t0);
                }
            }
            out
        });
    }
    let mut round = ContendRound::empty();
    let mut puts: HashSet<Vec<u8>> = HashSet::new();
    let mut taken: Vec<Vec<u8>> = Vec::new();
    let drained = tokio::time::timeout(
        end.saturating_duration_since(Instant::now()) + cycle_timeout * 2 + Duration::from_secs(5),
        async {
            while let Some(r) = set.join_next().await {
                let out = r.context("a session's task panicked")?;
                round.cycle.add(&out.cycle).expect("same histogram bounds");
                for (k, v) in out.errors {
                    *round.errors.entry(k).or_default() += v;
                }
                puts.extend(out.puts);
                taken.extend(out.taken);
            }
            Ok::<(), anyhow::Error>(())
        },
    )
    .await;
    match drained {
        Ok(r) => r?,
        Err(_) => bail!(
            "sessions still busy {:?} after the window",
            cycle_timeout * 2
        ),
    }
    round.window_secs = spec.duration_secs;
    round.cpu = sampler.await.ok().flatten();
    round.overlaps = overlaps.load(Ordering::Relaxed);
    round.client_version = Some("wazoo-client".into());
    for c in &clients {
        let _ = c.close().await;
    }
    if spec.recipe == Contended::Queue {
        admin.sync(path).await.context("sync before counting")?;
        let remaining = admin
            .list_children(path)
            .await
            .with_context(|| format!("list {path}"))?
            .iter()
            .filter(|n| n.starts_with("entry-"))
            .count() as u64;
        check_items(&mut round, &puts, &taken, remaining);
    }
    Ok(round)
}

fn check_items(
    round: &mut ContendRound,
    puts: &HashSet<Vec<u8>>,
    taken: &[Vec<u8>],
    remaining: u64,
) {
    let taken_set: HashSet<&Vec<u8>> = taken.iter().collect();
    round.items_put = puts.len() as u64;
    round.items_taken = taken.len() as u64;
    round.duplicates = (taken.len() - taken_set.len()) as u64;
    round.foreign = taken_set.iter().filter(|t| !puts.contains(**t)).count() as u64;
    let taken_known = taken_set.len() as u64 - round.foreign;
    round.remaining = remaining;
    round.lost = (puts.len() as u64).saturating_sub(taken_known + remaining);
}

/// kazoo's recipe (bench/kazoo_recipes.py in a subprocess) against
/// `target` (its cluster; its processes' CPU is sampled when the script
/// says its window starts and ends).
pub async fn kazoo_round(target: &Target, spec: &ContendSpec, path: &str) -> ContendRound {
    let (target, spec, path) = (target.clone(), spec.clone(), path.to_string());
    match tokio::task::spawn_blocking(move || kazoo_round_blocking(&target, &spec, &path)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => ContendRound::failed(format!("{e:#}")),
        Err(e) => ContendRound::failed(format!("kazoo round panicked: {e}")),
    }
}

/// The kazoo driver script.
pub fn kazoo_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("kazoo_recipes.py")
}

#[derive(serde::Deserialize)]
struct KazooOut {
    window_secs: f64,
    latencies_ns: Vec<u64>,
    errors: BTreeMap<String, u64>,
    stuck_threads: u64,
    kazoo: String,
    python: String,
    #[serde(default)]
    overlaps: u64,
    #[serde(default)]
    items_put: u64,
    #[serde(default)]
    items_taken: u64,
    #[serde(default)]
    duplicates: u64,
    #[serde(default)]
    foreign: u64,
    #[serde(default)]
    remaining: u64,
    #[serde(default)]
    lost: u64,
}

/// What kazoo_recipes.py prints on stderr when its window starts and ends.
const WINDOW_START: &str = "wazoo-bench: window start";
const WINDOW_END: &str = "wazoo-bench: window end";

fn kazoo_round_blocking(target: &Target, spec: &ContendSpec, path: &str) -> Result<ContendRound> {
    let hosts = target.cluster.as_str();
    let script = kazoo_script();
    let mut child = Command::new(&spec.python)
        .arg(&script)
        .args([
            "--hosts",
            hosts,
            "--recipe",
            spec.recipe.name(),
            "--path",
            path,
        ])
        .args(["--sessions", &spec.sessions.to_string()])
        .args(["--warmup", &spec.warmup_secs.to_string()])
        .args(["--duration", &spec.duration_secs.to_string()])
        .args(["--cycle-timeout", &spec.cycle_timeout_secs.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {} {}", spec.python, script.display()))?;
    // Read both pipes on threads (a full pipe would stall the script).
    let mut stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    // The stderr reader samples CPU at the script's window marks.
    let (sample_target, python_pid) = (target.clone(), child.id());
    let err_t = std::thread::spawn(move || {
        use std::io::BufRead as _;
        let sample = || {
            let s = cpu_sample(&sample_target).ok()?;
            let py = crate::servers::cpu_secs(Some(python_pid)).ok()?;
            Some((s, py))
        };
        let (mut s, mut start, mut cpu) = (String::new(), None, None);
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line == WINDOW_START {
                start = sample();
            } else if line == WINDOW_END {
                if let (Some((a, pa)), Some((b, pb))) = (start.take(), sample()) {
                    cpu = Some(WindowCpu::between(&a, &b, pa, pb));
                }
            }
            s.push_str(&line);
            s.push('\n');
        }
        (s, cpu)
    });
    let deadline = Instant::now() + Duration::from_secs_f64(spec.round_bound_secs());
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = out_t.join().unwrap_or_default();
    let (err, cpu) = err_t.join().unwrap_or_default();
    let tail = |s: &str| {
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    };
    match status {
        None => bail!(
            "kazoo_recipes.py took longer than {:.0} s; killed. stderr:\n{}",
            spec.round_bound_secs(),
            tail(&err)
        ),
        Some(st) if !st.success() => {
            bail!("kazoo_recipes.py failed ({st}); stderr:\n{}", tail(&err))
        }
        Some(_) => {}
    }
    let k: KazooOut = serde_json::from_str(out.trim()).with_context(|| {
        format!(
            "kazoo_recipes.py printed no JSON: {:?}; stderr:\n{}",
            out.chars().take(200).collect::<String>(),
            tail(&err)
        )
    })?;
    let mut round = ContendRound::empty();
    for ns in &k.latencies_ns {
        record(&mut round.cycle, Duration::from_nanos(*ns));
    }
    round.window_secs = k.window_secs;
    round.cpu = cpu;
    round.errors = k.errors;
    if k.stuck_threads > 0 {
        round
            .errors
            .insert("threads stuck at the end".into(), k.stuck_threads);
    }
    round.overlaps = k.overlaps;
    round.items_put = k.items_put;
    round.items_taken = k.items_taken;
    round.duplicates = k.duplicates;
    round.foreign = k.foreign;
    round.remaining = k.remaining;
    round.lost = k.lost;
    round.client_version = Some(format!("kazoo {} (Python {})", k.kazoo, k.python));
    Ok(round)
}

/// What each run key means, for the report.
pub fn pairing(key: &str, recipe: Contended) -> String {
    let (kazoo_name, wazoo_name) = match recipe {
        Contended::Lock => ("Lock", "lock"),
        Contended::Queue => ("Queue", "queue"),
    };
    match key {
        ZK_KAZOO => format!("kazoo `{kazoo_name}` on ZooKeeper"),
        WAZOO => format!("wazoo `{wazoo_name}` recipe on wazoo"),
        WAZOO_KAZOO => format!("kazoo `{kazoo_name}` on wazoo"),
        other => other.to_string(),
    }
}

/// The Python to run the kazoo script with: `--python`, else `$PYTHON`,
/// else `python3`.
pub fn python(explicit: Option<String>) -> String {
    explicit
        .or_else(|| std::env::var("PYTHON").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "python3".to_string())
}

/// Whether `python` imports kazoo (a short check before the rounds).
pub fn has_kazoo(python: &str) -> Result<String> {
    let out = Command::new(python)
        .args(["-c", "import kazoo, sys; print(kazoo.__version__)"])
        .output()
        .with_context(|| format!("running {python}"))?;
    if !out.status.success() {
        bail!(
            "{python} cannot import kazoo: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_accounting() {
        let puts: HashSet<Vec<u8>> = [b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
            .into_iter()
            .collect();
        let taken = vec![b"a".to_vec(), b"b".to_vec(), b"b".to_vec(), b"z".to_vec()];
        let mut r = ContendRound::empty();
        check_items(&mut r, &puts, &taken, 1);
        assert_eq!(
            (
                r.items_put,
                r.items_taken,
                r.duplicates,
                r.foreign,
                r.remaining,
                r.lost
            ),
            (4, 4, 1, 1, 1, 1)
        );
        let mut ok = ContendRound::empty();
        check_items(
            &mut ok,
            &puts,
            &[b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
            1,
        );
        assert_eq!((ok.duplicates, ok.foreign, ok.lost), (0, 0, 0));
    }

    #[test]
    fn pools_rounds() {
        let mut a = ContendRound::empty();
        record(&mut a.cycle, Duration::from_micros(100));
        record(&mut a.cycle, Duration::from_micros(200));
        a.window_secs = 1.0;
        let mut b = ContendRound::empty();
        record(&mut b.cycle, Duration::from_micros(300));
        b.window_secs = 1.0;
        b.overlaps = 2;
        let run = summarize("x", &[a, b]);
        assert_eq!(run.cycles, 3);
        assert!((run.cycles_per_sec - 1.5).abs() < 1e-9);
        assert_eq!(run.rounds_cycles_per_sec, vec![2.0, 1.0]);
        assert_eq!(run.overlaps, 2);
        assert_eq!(run.cycle_cdf_us.len(), crate::svg::CDF_QUANTILES.len());
    }
}
