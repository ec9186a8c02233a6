//! wazoo-bench: wazoo against Apache ZooKeeper 3.8, side by side, in one run,
//! on one machine, with the same client (`zookeeper-client` crate) and the
//! same load.
//!
//! ```text
//! cargo build --release -p wazoo -p wazoo-bench
//! target/release/wazoo-bench --quick                  # about a minute
//! target/release/wazoo-bench --out results.json --report report.md
//! target/release/wazoo-bench --topology ensemble      # 3-member ensembles only
//! ```
//!
//! `--topology` picks standalone servers, 3-member ensembles, or both (the
//! default); the ensemble phase runs create/set/get/mixed with sessions
//! spread over every member, and the failover workload (kill the leader
//! under write load).
//!
//! Markdown tables go to stdout (and `--report`), raw figures to `--out`
//! (JSON, rewritten after every phase), progress to stderr.
//!
//! Layout:
//! - `main.rs`: the run, phase by phase; `args` (the command line),
//!   `phases` (the phases `run` calls), `results` (the raw figures, as
//!   `--out` writes them).
//! - `servers`, `ensembles`: the systems under test, standalone and as
//!   ensembles, and what the kernel says about their processes.
//! - `load` (with `load/nodes.rs`, `load/sample.rs`): the load generator;
//!   `stats`: latency histograms.
//! - `idle`: `wazoo-bench idle`, the resident memory of idle sessions.
//! - `startup`: `wazoo-bench startup`, writes on a fresh ensemble while its
//!   members compile their built-in recipes, against none compiling.
//! - `lean` (with `lean/gen.rs`): `wazoo-bench lean`, the bench's own lean
//!   generator (one thread, raw pre-encoded frames, pipelined), its
//!   closed-loop and fixed-rate windows and its table; `--pinned` puts the
//!   servers on CPU 1 and the generator on CPU 0.
//! - One module per other workload: `client_bench`, `sweep`, `fanout`,
//!   `churn`, `failover`, `memory`, `recovery`, `recipes` (with
//!   `recipes/call.rs`, `recipes/contend.rs`); `curves`: the scale curves
//!   (memory against znodes, fan-out against watchers, setData against
//!   payload size).
//! - `report` (with `report/recipes.rs`, `report/ensemble.rs`,
//!   `report/scale.rs`, `report/cpu.rs`): the Markdown report; `plots`, `svg`: the SVG plots.

mod args;
mod churn;
mod client_bench;
mod curves;
mod ensembles;
mod failover;
mod fanout;
mod idle;
mod lean;
mod load;
mod memory;
mod phases;
mod plots;
mod recipes;
mod recovery;
mod report;
mod results;
mod servers;
mod startup;
mod stats;
mod svg;
mod sweep;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use clap::Parser;
use wazoo_testkit::Flavor;

use churn::ChurnSpec;
use client_bench::ClientSpec;
use ensembles::Ensemble;
use failover::{FailoverRun, FailoverSpec};
use fanout::FanoutSpec;
use load::{LoadSpec, Workload};
use memory::MemorySpec;
use recovery::RecoverySpec;
use servers::{Server, ServerConfig};

use args::{Args, DEFAULT_WORKLOADS};
use phases::{
    churn_phase, ensemble_target, fanout_phase, names, recipes_phase, sessions_sweep,
    standalone_target, throughput_workload, RecipePhase,
};
use results::{
    ensemble_block, ClientBlock, EnsembleBlock, FailoverBlock, Machine, MemoryBlock, Results,
};

fn main() -> ExitCode {
    // `wazoo-bench lean ...`: the lean generator's run, synchronous, with
    // its own options (src/lean.rs).
    if std::env::args_os().nth(1).is_some_and(|a| a == "lean") {
        return lean::main(std::env::args_os().skip(1));
    }
    // `wazoo-bench idle ...`: the memory of idle sessions (src/idle.rs).
    if std::env::args_os().nth(1).is_some_and(|a| a == "idle") {
        return idle::main(std::env::args_os().skip(1));
    }
    // `wazoo-bench startup ...`: writes on a fresh ensemble while it
    // compiles its built-in recipes (src/startup.rs).
    if std::env::args_os().nth(1).is_some_and(|a| a == "startup") {
        return startup::main(std::env::args_os().skip(1));
    }
    let mut args = Args::parse();
    let threads = args.client_threads.unwrap_or_else(cpus).max(1);
    args.client_threads = Some(threads);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let limit = Duration::from_secs_f64(args.time_limit_secs.unwrap_or(if args.quick {
        420.0
    } else {
        1800.0
    }));
    let outcome = runtime.block_on(async {
        match tokio::time::timeout(limit, run(args)).await {
            Ok(r) => r,
            Err(_) => bail!("the run took longer than --time-limit-secs ({limit:?}); abandoned"),
        }
    });
    // Any server still alive is killed when its handle drops (it has by now)
    // or, at the latest, by the kernel as this process exits (PR_SET_PDEATHSIG).
    runtime.shutdown_timeout(Duration::from_secs(5));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn mem_total() -> Option<u64> {
    read_trimmed("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

async fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let quick = args.quick;
    let mut args = args;
    if args.workloads.is_empty() {
        args.workloads = DEFAULT_WORKLOADS.to_vec();
    }
    if args.sessions_sweep.is_some() && !args.workloads.contains(&Workload::Sweep) {
        args.workloads.push(Workload::Sweep);
    }
    let args = args;
    let duration = args.duration_secs.unwrap_or(if quick { 0.5 } else { 8.0 });
    let warmup = args.warmup_secs.unwrap_or(if quick { 0.25 } else { 2.0 });
    let nodes = args.nodes.unwrap_or(if quick { 20_000 } else { 1_000_000 });
    let rounds_per_workload = args.rounds.unwrap_or(if quick { 1 } else { 2 }).max(1);
    let client_duration = args
        .client_duration_secs
        .unwrap_or(if quick { 0.5 } else { 5.0 });
    let ensemble_duration = args.ensemble_duration_secs.unwrap_or(duration);
    anyhow::ensure!(
        args.sessions > 0 && args.inflight > 0,
        "--sessions and --inflight must be positive"
    );
    anyhow::ensure!(
        duration > 0.0 && ensemble_duration > 0.0 && warmup >= 0.0,
        "--duration-secs must be positive"
    );
    anyhow::ensure!(args.keys > 0, "--keys must be positive");
    anyhow::ensure!((2..=9).contains(&args.members), "--members must be 2..=9");
    anyhow::ensure!(
        args.failover_sessions > 0 && args.failover_inflight > 0,
        "--failover-sessions and --failover-inflight must be positive"
    );

    let mut systems: Vec<Flavor> = Vec::new();
    for s in &args.systems {
        if !systems.contains(s) {
            systems.push(*s);
        }
    }
    if systems.is_empty() {
        bail!("--systems is empty");
    }
    let wazoo_bin = if systems.contains(&Flavor::Wazoo) {
        servers::find_wazoo_bin(args.wazoo_bin.clone())?
    } else {
        PathBuf::from("(not used)")
    };
    if systems.contains(&Flavor::Zookeeper) {
        wazoo_testkit::zookeeper_classpath().context("Apache ZooKeeper is needed")?;
    }
    let server_cfg = ServerConfig {
        wazoo_bin,
        zk_heap: args.zk_heap.clone(),
        wazoo_cfg: args.wazoo_cfg.clone(),
        extra_cfg: args.zoo_cfg.clone(),
        zk_jvm_args: Vec::new(),
        startup_timeout_secs: args.recovery_timeout_secs.max(90.0),
    };
    let (nofile, nofile_max) = servers::raise_nofile_limit();
    eprintln!("open files: soft limit {nofile} (hard {nofile_max}); the servers inherit it");

    let watch_paths = args
        .watch_paths
        .unwrap_or(if quick { 2000 } else { 10_000 })
        .max(1);
    let load_spec = LoadSpec {
        sessions: args.sessions,
        inflight: args.inflight,
        payload: args.payload,
        warmup_secs: warmup,
        duration_secs: duration,
        keys: args.keys,
        rounds: rounds_per_workload,
        mixed_read_percent: args.mixed_read_percent.min(100),
        watch_paths,
    };
    let ensemble_load = LoadSpec {
        duration_secs: ensemble_duration,
        ..load_spec.clone()
    };
    let sweep_sessions: Vec<usize> = args
        .sessions_sweep
        .clone()
        .unwrap_or_else(|| vec![1, 4, 16, 64])
        .into_iter()
        .filter(|&n| n > 0)
        .collect();
    anyhow::ensure!(
        !args.workloads.contains(&Workload::Sweep)
            || (!sweep_sessions.is_empty() && args.sweep_workload.is_throughput()),
        "sweep: --sessions-sweep needs a positive count and --sweep-workload a throughput workload"
    );
    let sweep_load = LoadSpec {
        duration_secs: args
            .sweep_duration_secs
            .unwrap_or(if quick { 1.0 } else { 3.0 }),
        rounds: 1,
        ..load_spec.clone()
    };
    let failover_spec = FailoverSpec {
        failure: failover::Failure::Kill,
        sessions: args.failover_sessions,
        inflight: args.failover_inflight,
        payload: args.payload,
        warmup_secs: args
            .failover_warmup_secs
            .unwrap_or(if quick { 1.0 } else { 2.0 })
            .max(0.2),
        window_secs: args
            .failover_window_secs
            .unwrap_or(if quick { 1.0 } else { 5.0 }),
        timeout_secs: args.failover_timeout_secs.max(1.0),
        rounds: args
            .failover_rounds
            .unwrap_or(if quick { 1 } else { 3 })
            .max(1),
        probe_interval_ms: args.failover_probe_interval_ms.max(1),
    };
    let fanout_spec = FanoutSpec {
        watchers: args
            .fanout_watchers
            .clone()
            .unwrap_or(if quick { vec![50] } else { vec![100, 1000] })
            .into_iter()
            .filter(|&n| n > 0)
            .collect(),
        rounds: args
            .fanout_rounds
            .unwrap_or(if quick { 3 } else { 5 })
            .max(1),
        round_timeout_secs: 30.0,
    };
    let churn_spec = ChurnSpec {
        churners: args.churn_sessions.max(1),
        warmup_secs: warmup,
        duration_secs: args.churn_duration_secs.unwrap_or(duration),
        rounds: rounds_per_workload,
        session_timeout_ms: 10_000,
    };
    let recovery_spec = RecoverySpec {
        restarts: args
            .recovery_restarts
            .unwrap_or(if quick { 1 } else { 2 })
            .max(1),
        probe_interval_ms: 10,
        timeout_secs: args.recovery_timeout_secs.max(1.0),
    };
    let mut results = Results {
        started_unix_secs: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        total_secs: 0.0,
        complete: false,
        args: args.clone(),
        machine: Machine {
            cpus: cpus(),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            mem_total_bytes: mem_total(),
            loadavg_at_start: read_trimmed("/proc/loadavg"),
            loadavg_at_end: String::new(),
            client_threads: args.client_threads.unwrap_or(1),
        },
        load: load_spec.clone(),
        systems: Vec::new(),
        workloads: Vec::new(),
        client: None,
        memory: None,
        ensemble: None,
        fanout: None,
        churn: None,
        sweep: None,
        recovery: None,
        recipes: None,
        curves: None,
        plots: Vec::new(),
    };
    let save = |results: &Results| -> Result<()> {
        let json = serde_json::to_string_pretty(results)?;
        std::fs::write(&args.out, json + "\n")
            .with_context(|| format!("writing {}", args.out.display()))
    };
    eprintln!(
        "wazoo-bench: systems {}; topology {:?}; workloads {}; {} sessions x {} in flight, {} B payload, \
         {warmup} s warm-up + {duration} s per run ({ensemble_duration} s for ensembles); \
         {nodes} znodes for memory",
        names(&systems),
        args.topology,
        args.workloads
            .iter()
            .map(|w| w.name())
            .collect::<Vec<_>>()
            .join(","),
        args.sessions,
        args.inflight,
        args.payload,
    );

    // Which throughput workload this is, to alternate who goes first.
    let mut order_index = 0usize;

    // Phase 1: throughput workloads and the client benchmark, on one server
    // of each system that lives through the phase.
    let needs_servers = args.topology.standalone()
        && args.workloads.iter().any(|w| {
            w.is_throughput()
                || matches!(
                    w,
                    Workload::Client | Workload::Fanout | Workload::Churn | Workload::Sweep
                )
        });
    if needs_servers {
        let mut running: BTreeMap<&'static str, Server> = BTreeMap::new();
        let any_throughput = args.workloads.iter().any(|w| {
            w.is_throughput() || matches!(w, Workload::Fanout | Workload::Churn | Workload::Sweep)
        });
        for &flavor in &systems {
            // The client benchmark alone needs only wazoo.
            if !any_throughput && flavor != Flavor::Wazoo {
                continue;
            }
            eprintln!("starting {flavor} ...");
            let cfg = server_cfg.clone();
            let server = tokio::task::spawn_blocking(move || Server::start(flavor, &cfg)).await??;
            let info = server.describe(&server_cfg);
            eprintln!(
                "  {flavor} on {} (pid {}): {}",
                server.addr(),
                server.pid()?,
                info.version
            );
            results.systems.push(info);
            running.insert(flavor.name(), server);
        }
        save(&results)?;

        for &workload in &args.workloads {
            if workload.is_throughput() {
                let result = throughput_workload(
                    workload,
                    order_index,
                    &systems,
                    &load_spec,
                    "",
                    |flavor| standalone_target(&mut running, flavor),
                )
                .await;
                order_index += 1;
                results.workloads.push(result);
                save(&results)?;
            } else if workload == Workload::Client {
                let Some(server) = running.get("wazoo") else {
                    eprintln!("[client] skipped: wazoo is not among --systems");
                    continue;
                };
                let spec = ClientSpec {
                    inflight: args.client_inflight,
                    warmup_secs: warmup.min(1.0),
                    duration_secs: client_duration,
                    rounds: args
                        .client_rounds
                        .unwrap_or(if quick { 1 } else { 2 })
                        .max(1),
                };
                eprintln!(
                    "[client] one connection to wazoo, {} getData in flight, {} round(s) of {} s per crate",
                    spec.inflight, spec.rounds, spec.duration_secs
                );
                let result = client_bench::run(server.addr(), server.pid()?, &spec).await;
                if let Some(f) = &result.failure {
                    eprintln!("[client] FAILED: {f}");
                }
                results.client = Some(ClientBlock { spec, result });
                save(&results)?;
            } else if workload == Workload::Fanout {
                results.fanout =
                    Some(fanout_phase(&running, &systems, &fanout_spec, order_index).await);
                order_index += 1;
                save(&results)?;
            } else if workload == Workload::Churn {
                results.churn =
                    Some(churn_phase(&running, &systems, &churn_spec, order_index).await);
                order_index += 1;
                save(&results)?;
            } else if workload == Workload::Sweep {
                results.sweep = Some(
                    sessions_sweep(
                        args.sweep_workload,
                        &sweep_sessions,
                        &systems,
                        &sweep_load,
                        "",
                        &mut order_index,
                        |flavor| standalone_target(&mut running, flavor),
                    )
                    .await,
                );
                save(&results)?;
            }
        }
        eprintln!("stopping the throughput servers");
        tokio::task::spawn_blocking(move || drop(running)).await?;
    }

    // Phase 2: ensembles of every system, alive through the phase.
    let ensemble_workloads: Vec<Workload> = args
        .workloads
        .iter()
        .copied()
        .filter(|w| {
            w.is_throughput()
                || matches!(
                    w,
                    Workload::Failover
                        | Workload::FailoverPause
                        | Workload::FailoverPartition
                        | Workload::Sweep
                )
        })
        .collect();
    if args.topology.ensemble() && !ensemble_workloads.is_empty() {
        let mut block = EnsembleBlock {
            members: args.members,
            load: ensemble_load.clone(),
            systems: Vec::new(),
            workloads: Vec::new(),
            failover: None,
            failover_pause: None,
            failover_partition: None,
            sweep: None,
            member_rss_bytes: BTreeMap::new(),
        };
        let mut running: BTreeMap<&'static str, Ensemble> = BTreeMap::new();
        for &flavor in &systems {
            eprintln!("starting a {}-member {flavor} ensemble ...", args.members);
            let (cfg, n) = (server_cfg.clone(), args.members);
            let t = Instant::now();
            let ens =
                tokio::task::spawn_blocking(move || Ensemble::start(flavor, n, &cfg)).await??;
            let info = tokio::task::block_in_place(|| ens.describe(&server_cfg));
            eprintln!(
                "  {flavor} ensemble serving after {:.1} s on {}; {}",
                t.elapsed().as_secs_f64(),
                ens.connect_string(),
                info.notes.get(1).map(String::as_str).unwrap_or("")
            );
            block.systems.push(info);
            running.insert(flavor.name(), ens);
        }
        results.ensemble = Some(block);
        save(&results)?;

        for &workload in &ensemble_workloads {
            if workload.is_throughput() {
                let result = throughput_workload(
                    workload,
                    order_index,
                    &systems,
                    &ensemble_load,
                    "ensemble ",
                    |flavor| ensemble_target(&running, flavor),
                )
                .await;
                order_index += 1;
                ensemble_block(&mut results).workloads.push(result);
                save(&results)?;
            } else if let Some(failure) = failover::Failure::of(workload) {
                let spec = FailoverSpec {
                    failure,
                    ..failover_spec.clone()
                };
                // A silent partition needs the fault proxies between members:
                // ensembles of their own, so the other workloads' quorum
                // traffic never goes through them.
                let mut proxied: BTreeMap<&'static str, Ensemble> = BTreeMap::new();
                if failure == failover::Failure::Partition {
                    for &flavor in &systems {
                        eprintln!(
                            "starting a {}-member {flavor} ensemble with quorum proxies ...",
                            args.members
                        );
                        let (cfg, n) = (server_cfg.clone(), args.members);
                        let ens = tokio::task::spawn_blocking(move || {
                            Ensemble::start_with_quorum_proxies(flavor, n, &cfg)
                        })
                        .await??;
                        proxied.insert(flavor.name(), ens);
                    }
                }
                let ensembles = if failure == failover::Failure::Partition {
                    &mut proxied
                } else {
                    &mut running
                };
                let mut rounds: BTreeMap<&'static str, Vec<failover::FailoverRound>> =
                    BTreeMap::new();
                let mut order = Vec::new();
                for r in 0..spec.rounds {
                    let mut this_round = systems.clone();
                    if (order_index + r) % 2 == 1 {
                        this_round.reverse();
                    }
                    for &flavor in &this_round {
                        order.push(flavor.name().to_string());
                        let label = format!("[{}] {flavor} (round {})", workload.name(), r + 1);
                        eprintln!(
                            "{label}: {} sessions x {} creates in flight over all members, \
                             {} after {} s; at most {:.0} s",
                            spec.sessions,
                            spec.inflight,
                            failure.what(),
                            spec.warmup_secs,
                            spec.warmup_secs + spec.timeout_secs + spec.window_secs + 120.0
                        );
                        let ens = ensembles.get_mut(flavor.name()).expect("started above");
                        let tag = format!("{}-{}-{}", workload.name(), flavor.name(), r + 1);
                        let round = failover::run_round(ens, &spec, &tag, &label).await;
                        if let Some(f) = &round.failure {
                            eprintln!("{label}: FAILED: {f}");
                        }
                        rounds.entry(flavor.name()).or_default().push(round);
                        let runs = rounds
                            .iter()
                            .map(|(name, rs)| {
                                (name.to_string(), FailoverRun::summarize(rs.clone()))
                            })
                            .collect();
                        let block = FailoverBlock {
                            spec: spec.clone(),
                            order: order.clone(),
                            runs,
                        };
                        let e = ensemble_block(&mut results);
                        match failure {
                            failover::Failure::Kill => e.failover = Some(block),
                            failover::Failure::Pause => e.failover_pause = Some(block),
                            failover::Failure::Partition => e.failover_partition = Some(block),
                        }
                        save(&results)?;
                    }
                }
                order_index += 1;
                tokio::task::spawn_blocking(move || drop(proxied)).await?;
            } else if workload == Workload::Sweep {
                let block = sessions_sweep(
                    args.sweep_workload,
                    &sweep_sessions,
                    &systems,
                    &sweep_load,
                    "ensemble ",
                    &mut order_index,
                    |flavor| ensemble_target(&running, flavor),
                )
                .await;
                ensemble_block(&mut results).sweep = Some(block);
                save(&results)?;
            }
        }
        for (name, ens) in &running {
            let rss = (0..ens.len())
                .map(|i| {
                    ens.pid(i)
                        .and_then(|p| servers::proc_status_bytes(p, "VmRSS").ok())
                })
                .collect();
            ensemble_block(&mut results)
                .member_rss_bytes
                .insert(name.to_string(), rss);
        }
        save(&results)?;
        eprintln!("stopping the ensembles");
        tokio::task::spawn_blocking(move || drop(running)).await?;
    }

    // Phase 2b: the recipe workloads (recipe-call on a standalone wazoo
    // with the echo module; lock and queue on ensembles, wazoo's members
    // loading the lock and queue modules). Whatever --topology says: they
    // have their own servers.
    let recipe_workloads = [
        Workload::RecipeCall,
        Workload::RecipeIsolation,
        Workload::Lock,
        Workload::Queue,
    ];
    if args.workloads.iter().any(|w| recipe_workloads.contains(w)) {
        let spec = RecipePhase {
            quick,
            warmup,
            duration,
            rounds: rounds_per_workload,
        };
        recipes_phase(
            &args,
            &systems,
            &server_cfg,
            &spec,
            &mut order_index,
            &mut results,
            &save,
        )
        .await?;
    }

    // Phase 3: memory, one fresh server at a time, and recovery (the
    // loaded server killed and restarted).
    let recovery = args
        .workloads
        .contains(&Workload::Recovery)
        .then_some(&recovery_spec);
    results.recovery = recovery.cloned();
    if args.topology.standalone()
        && (args.workloads.contains(&Workload::Memory) || recovery.is_some())
    {
        let spec = MemorySpec {
            nodes,
            node_bytes: memory::NODE_BYTES,
            children_per_parent: memory::BUCKET,
            sessions: args.sessions,
            inflight: args.load_inflight,
            settle_secs: if quick { 0.5 } else { 3.0 },
            load_timeout_secs: args.load_timeout_secs,
        };
        let memory_runs = args.memory_runs.unwrap_or(1).max(1);
        let mut block = MemoryBlock {
            spec: spec.clone(),
            order: Vec::new(),
            runs: BTreeMap::new(),
            all_runs: BTreeMap::new(),
        };
        for k in 0..memory_runs {
            let order = phases::order_for(&systems, order_index, k);
            for &flavor in &order {
                if memory_runs > 1 {
                    eprintln!("[memory] run {} of {memory_runs}", k + 1);
                }
                // The recovery workload restarts the first run's servers only.
                let rec = if k == 0 { recovery } else { None };
                let run = memory::measure(flavor, &server_cfg, &spec, rec).await;
                if let Some(f) = &run.failure {
                    eprintln!("[memory] {flavor} FAILED: {f}");
                }
                if let Some(info) = &run.system {
                    if !results.systems.iter().any(|s| s.name == info.name) {
                        results.systems.push(info.clone());
                    }
                }
                block.order.push(flavor.name().to_string());
                block
                    .all_runs
                    .entry(flavor.name().to_string())
                    .or_default()
                    .push(run);
                block.pick_medians();
                results.memory = Some(block.clone());
                save(&results)?;
            }
        }
        order_index += 1;
    }

    // Phase 4: the scale curves, each on servers of its own.
    if args.topology.standalone() {
        let curve_runs = curves::CurveRuns {
            memory_nodes: args.workloads.contains(&Workload::MemoryCurve).then(|| {
                args.memory_curve_nodes
                    .clone()
                    .unwrap_or_else(|| vec![10_000, 100_000, 1_000_000])
            }),
            fanout_watchers: args.workloads.contains(&Workload::FanoutCurve).then(|| {
                args.fanout_curve_watchers
                    .clone()
                    .unwrap_or_else(|| vec![10, 100, 1000, 10_000])
            }),
            payloads: args.workloads.contains(&Workload::PayloadCurve).then(|| {
                args.payload_curve_bytes
                    .clone()
                    .unwrap_or_else(|| vec![10, 100, 1000, 10_000, 100_000, 1_000_000])
            }),
        };
        if curve_runs.any() {
            let template = MemorySpec {
                nodes: 0,
                node_bytes: memory::NODE_BYTES,
                children_per_parent: memory::BUCKET,
                sessions: args.sessions,
                inflight: args.load_inflight,
                settle_secs: if quick { 0.5 } else { 3.0 },
                load_timeout_secs: args.load_timeout_secs,
            };
            let payload_load = LoadSpec {
                duration_secs: args.payload_curve_duration_secs.unwrap_or(3.0),
                rounds: 1,
                ..load_spec.clone()
            };
            curves::run(
                &curve_runs,
                &systems,
                &server_cfg,
                &template,
                &fanout_spec,
                &payload_load,
                &mut order_index,
                &mut results,
                &save,
            )
            .await?;
        }
    }

    results.total_secs = started.elapsed().as_secs_f64();
    results.machine.loadavg_at_end = read_trimmed("/proc/loadavg");
    results.complete = true;
    let plots_dir = args.plots_dir.clone().unwrap_or_else(|| {
        let beside = args.report.as_deref().unwrap_or(&args.out);
        match beside.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    });
    let stem = args
        .report
        .as_deref()
        .or(Some(args.out.as_path()))
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "wazoo-bench".into());
    // Links in the report: bare file names when the plots sit beside it.
    let link_prefix = match &args.plots_dir {
        None => String::new(),
        Some(d) => format!("{}/", d.display()),
    };
    results.plots = plots::write_all(&results, &plots_dir, &stem, &link_prefix)?;
    save(&results)?;
    eprintln!(
        "{} SVG plot(s) in {}",
        results.plots.len(),
        plots_dir.display()
    );
    let markdown = report::markdown(&results);
    println!("{markdown}");
    if let Some(path) = &args.report {
        std::fs::write(path, &markdown).with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!(
        "done in {:.0} s; raw figures in {}",
        results.total_secs,
        args.out.display()
    );
    Ok(())
}
