//! The phases of a run that `run` calls in turn: throughput workloads,
//! the sessions sweep, fan-out, churn, and the recipe workloads.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Result;
use wazoo_testkit::Flavor;

use crate::args::Args;
use crate::churn::ChurnSpec;
use crate::ensembles::Ensemble;
use crate::fanout::FanoutSpec;
use crate::load::{LoadSpec, RawRound, RunResult, Target, Workload};
use crate::results::{
    recipes_block, ChurnBlock, ContendBlock, FanoutBlock, RecipeCallBlock, RecipesBlock, Results,
    WorkloadResult,
};
use crate::servers::{Server, ServerConfig};
use crate::{churn, fanout, load, recipes, report, sweep};

/// Runs the rounds of one throughput workload on every system: round r of
/// the i-th workload runs the systems in the listed order when i + r is
/// even, reversed when odd (A B, B A, ...). `target_of` says where a
/// system's load goes, or why it cannot run.
pub async fn throughput_workload(
    workload: Workload,
    order_index: usize,
    systems: &[Flavor],
    spec: &LoadSpec,
    prefix: &str,
    mut target_of: impl FnMut(Flavor) -> Result<Target, String>,
) -> WorkloadResult {
    let i = order_index;
    let mut order = Vec::new();
    let mut rounds: BTreeMap<&'static str, Vec<RawRound>> = BTreeMap::new();
    for r in 0..spec.rounds {
        let mut this_round = systems.to_vec();
        if (i + r) % 2 == 1 {
            this_round.reverse();
        }
        for &flavor in &this_round {
            order.push(flavor.name().to_string());
            let label = if spec.rounds > 1 {
                format!("[{prefix}{}] {flavor} (round {})", workload.name(), r + 1)
            } else {
                format!("[{prefix}{}] {flavor}", workload.name())
            };
            let round = match target_of(flavor) {
                Err(why) => RawRound::failed(why),
                Ok(target) => {
                    eprintln!(
                        "{label}: {} s warm-up + {} s measured, {} sessions x {} in flight; \
                         at most {:.0} s",
                        spec.warmup_secs,
                        spec.duration_secs,
                        spec.sessions,
                        spec.inflight,
                        load::round_bound_secs(spec)
                    );
                    load::run_workload(&target, workload, spec, &label).await
                }
            };
            log_run(
                &label,
                &load::summarize(workload, std::slice::from_ref(&round)),
            );
            rounds.entry(flavor.name()).or_default().push(round);
        }
    }
    let runs: BTreeMap<String, RunResult> = rounds
        .iter()
        .map(|(name, rs)| (name.to_string(), load::summarize(workload, rs)))
        .collect();
    WorkloadResult {
        workload,
        order,
        runs,
    }
}

/// Where a standalone system's load goes, or why it cannot run.
pub fn standalone_target(
    running: &mut BTreeMap<&'static str, Server>,
    flavor: Flavor,
) -> Result<Target, String> {
    let idle_pids: Vec<u32> = running
        .iter()
        .filter(|(name, _)| **name != flavor.name())
        .filter_map(|(_, s)| s.pid().ok())
        .collect();
    let server = running.get_mut(flavor.name()).expect("started above");
    if !server.is_running() {
        return Err(format!(
            "{flavor} is not running; log tail:\n{}",
            server.log_tail(20)
        ));
    }
    Ok(Target {
        cluster: server.addr().to_string(),
        members: Vec::new(),
        server_pids: vec![server.pid().map_err(|e| format!("{e:#}"))?],
        idle_pids,
    })
}

/// Where an ensemble's load goes, or why it cannot run.
pub fn ensemble_target(
    running: &BTreeMap<&'static str, Ensemble>,
    flavor: Flavor,
) -> Result<Target, String> {
    let idle_pids: Vec<u32> = running
        .iter()
        .filter(|(name, _)| **name != flavor.name())
        .flat_map(|(_, e)| (0..e.len()).filter_map(|i| e.pid(i)))
        .collect();
    let ens = running.get(flavor.name()).expect("started above");
    let server_pids = ens.pids().map_err(|e| {
        format!(
            "{e:#}; log tails:\n{}",
            (0..ens.len())
                .map(|i| format!("--- member {} ---\n{}", i + 1, ens.log_tail(i, 10)))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })?;
    Ok(Target {
        cluster: ens.connect_string(),
        members: ens.addrs(),
        server_pids,
        idle_pids,
    })
}

/// The sessions sweep: `workload` at each session count, one round per
/// system and count, the order alternating from count to count.
pub async fn sessions_sweep(
    workload: Workload,
    counts: &[usize],
    systems: &[Flavor],
    load: &LoadSpec,
    prefix: &str,
    order_index: &mut usize,
    mut target_of: impl FnMut(Flavor) -> Result<Target, String>,
) -> sweep::SweepBlock {
    let mut points = Vec::new();
    for &n in counts {
        let spec = LoadSpec {
            sessions: n,
            rounds: 1,
            ..load.clone()
        };
        let result = throughput_workload(
            workload,
            *order_index,
            systems,
            &spec,
            &format!("{prefix}sweep n={n} "),
            &mut target_of,
        )
        .await;
        *order_index += 1;
        points.push(sweep::SweepPoint {
            sessions: n,
            result,
        });
    }
    sweep::SweepBlock {
        workload,
        load: load.clone(),
        points,
    }
}

/// The order of the systems for the `i`-th workload, round `r`: as listed
/// when i + r is even, reversed when odd.
pub fn order_for(systems: &[Flavor], i: usize, r: usize) -> Vec<Flavor> {
    let mut v = systems.to_vec();
    if (i + r) % 2 == 1 {
        v.reverse();
    }
    v
}

/// The fan-out workload on the standalone servers: every watcher count,
/// the systems alternating.
pub async fn fanout_phase(
    running: &BTreeMap<&'static str, Server>,
    systems: &[Flavor],
    spec: &FanoutSpec,
    order_index: usize,
) -> FanoutBlock {
    let mut block = FanoutBlock {
        spec: spec.clone(),
        order: Vec::new(),
        runs: BTreeMap::new(),
    };
    for (k, &n) in spec.watchers.iter().enumerate() {
        for flavor in order_for(systems, order_index, k) {
            let Some(server) = running.get(flavor.name()) else {
                continue;
            };
            let label = format!("[fanout] {flavor}, {n} watchers");
            eprintln!(
                "{label}: {n} sessions watch one znode, {} write(s); at most {:.0} s",
                spec.rounds,
                spec.bound_secs()
            );
            block.order.push(flavor.name().to_string());
            let run = fanout::run(&server.addr().to_string(), n, spec, flavor.name()).await;
            match &run.failure {
                Some(f) => eprintln!("{label}: FAILED: {f}"),
                None => eprintln!(
                    "{label}: delivery p50 {:.0} µs, p99 {:.0} µs; all delivered in {:.1} ms (median of {}), worst {:.1} ms",
                    run.delivery.p50_us,
                    run.delivery.p99_us,
                    run.all_delivered_ms_median,
                    run.rounds.len(),
                    run.all_delivered_ms_max
                ),
            }
            block
                .runs
                .entry(flavor.name().to_string())
                .or_default()
                .push(run);
        }
    }
    block
}

/// The churn workload on the standalone servers: rounds alternating the
/// systems, pooled per system.
pub async fn churn_phase(
    running: &BTreeMap<&'static str, Server>,
    systems: &[Flavor],
    spec: &ChurnSpec,
    order_index: usize,
) -> ChurnBlock {
    let mut order = Vec::new();
    let mut rounds: BTreeMap<&'static str, Vec<churn::ChurnRound>> = BTreeMap::new();
    for r in 0..spec.rounds {
        for flavor in order_for(systems, order_index, r) {
            let Some(server) = running.get(flavor.name()) else {
                continue;
            };
            let label = format!("[churn] {flavor} (round {})", r + 1);
            eprintln!(
                "{label}: {}; at most {:.0} s",
                churn::describe(spec),
                spec.round_bound_secs()
            );
            order.push(flavor.name().to_string());
            let round = match server.pid() {
                Ok(pid) => {
                    let tag = format!("{}-{}", flavor.name(), r + 1);
                    churn::run_round(&server.addr().to_string(), pid, spec, &tag).await
                }
                Err(e) => churn::ChurnRound::failed(format!("{e:#}")),
            };
            let one = churn::summarize(std::slice::from_ref(&round));
            match &one.failure {
                Some(f) => eprintln!("{label}: FAILED: {f}"),
                None => eprintln!(
                    "{label}: {:.0} sessions/s; cycle p50 {:.0} µs, p99 {:.0} µs; {} errors; {} ephemerals left",
                    one.sessions_per_sec,
                    one.cycle.p50_us,
                    one.cycle.p99_us,
                    one.errors.values().sum::<u64>(),
                    one.leftover_ephemerals
                ),
            }
            rounds.entry(flavor.name()).or_default().push(round);
        }
    }
    ChurnBlock {
        spec: spec.clone(),
        order,
        runs: rounds
            .iter()
            .map(|(name, rs)| (name.to_string(), churn::summarize(rs)))
            .collect(),
    }
}

pub fn names(systems: &[Flavor]) -> String {
    systems
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(",")
}

pub fn log_run(label: &str, r: &RunResult) {
    if let Some(line) = report::members_line(r) {
        eprintln!("{label}: members {line}");
    }
    match &r.failure {
        Some(f) if r.ops == 0 => eprintln!("{label}: FAILED: {f}"),
        _ => eprintln!(
            "{label}: {:.0} ops/s, p50 {:.0} µs, p99 {:.0} µs, server CPU {:.1} µs/op{}{}",
            r.ops_per_sec,
            r.latency.p50_us,
            r.latency.p99_us,
            r.server_cpu_us_per_op,
            if r.errors > 0 {
                format!(", {} errors {:?}", r.errors, r.error_kinds)
            } else {
                String::new()
            },
            r.failure
                .as_ref()
                .map(|f| format!(" (incomplete: {f})"))
                .unwrap_or_default()
        ),
    }
}

/// The run-wide settings the recipe phase uses.
pub struct RecipePhase {
    pub quick: bool,
    pub warmup: f64,
    pub duration: f64,
    pub rounds: usize,
}

/// recipe-call, lock and queue (see src/recipes.rs).
pub async fn recipes_phase(
    args: &Args,
    systems: &[Flavor],
    server_cfg: &ServerConfig,
    p: &RecipePhase,
    order_index: &mut usize,
    results: &mut Results,
    save: &dyn Fn(&Results) -> Result<()>,
) -> Result<()> {
    use recipes::{ContendSpec, Contended, PluginsDir, RecipeCallSpec};
    let explicit = args.recipes_dir.clone();
    let modules_dir =
        tokio::task::spawn_blocking(move || recipes::find_modules(explicit)).await??;
    eprintln!("recipe modules from {}", modules_dir.display());
    results.recipes = Some(RecipesBlock {
        modules_dir: modules_dir.display().to_string(),
        systems: Vec::new(),
        recipe_call: None,
        isolation: None,
        lock: None,
        queue: None,
    });

    if args.workloads.contains(&Workload::RecipeCall) {
        if !systems.contains(&Flavor::Wazoo) {
            eprintln!("[recipe-call] skipped: wazoo is not among --systems");
        } else {
            let spec = RecipeCallSpec {
                samples: args
                    .recipe_call_samples
                    .unwrap_or(if p.quick { 2000 } else { 20_000 })
                    .max(1),
                warmup_samples: if p.quick { 200 } else { 2000 },
                node_bytes: 100,
                inprocess_calls: if p.quick { 2000 } else { 20_000 },
                timeout_secs: 120.0,
            };
            let plugins = PluginsDir::new(&modules_dir, &["echo"], "call")?;
            let (cfg, dir) = (server_cfg.clone(), plugins.path().to_path_buf());
            eprintln!("starting wazoo with the echo module ...");
            let server = tokio::task::spawn_blocking(move || {
                Server::start_with_plugins(Flavor::Wazoo, &cfg, Some(&dir))
            })
            .await??;
            let mut info = server.describe(server_cfg);
            info.notes.push(format!(
                "--plugins {} (echo.wasm)",
                plugins.path().display()
            ));
            recipes_block(results).systems.push(info);
            eprintln!(
                "[recipe-call] one connection: {} no-op recipe calls (echo.noop) and {} getData \
                 of a {}-byte znode, alternating (after {} pairs of warm-up); then {} in-process \
                 instantiate+call; at most {:.0} s",
                spec.samples,
                spec.samples,
                spec.node_bytes,
                spec.warmup_samples,
                spec.inprocess_calls,
                spec.bound_secs()
            );
            let run = recipes::recipe_call(
                &server.addr().to_string(),
                server.pid()?,
                &modules_dir.join("echo.wasm"),
                &spec,
            )
            .await;
            if let Some(f) = &run.failure {
                eprintln!("[recipe-call] FAILED: {f}");
            }
            eprintln!(
                "[recipe-call] call p50 {:.0} µs p99 {:.0} µs; getData p50 {:.0} µs p99 {:.0} µs; \
                 call/getData {:.2}x (p50), {:.2}x (p99); in-process instantiate+call p50 {}",
                run.call.p50_us,
                run.call.p99_us,
                run.get.p50_us,
                run.get.p99_us,
                run.ratio_p50,
                run.ratio_p99,
                run.inprocess
                    .as_ref()
                    .map(|i| format!("{:.1} µs", i.p50_us))
                    .unwrap_or_else(|| "–".into())
            );
            recipes_block(results).recipe_call = Some(RecipeCallBlock { spec, run });
            save(results)?;
            tokio::task::spawn_blocking(move || drop(server)).await?;
            drop(plugins);
        }
    }

    if args.workloads.contains(&Workload::RecipeIsolation) {
        if !systems.contains(&Flavor::Wazoo) {
            eprintln!("[recipe-isolation] skipped: wazoo is not among --systems");
        } else {
            let spec = recipes::IsolationSpec {
                writers: args.isolation_writers.max(1),
                spinners: 4,
                warmup_secs: p.warmup,
                secs: p.duration,
                rounds: p.rounds.max(1),
            };
            let dir = std::env::temp_dir().join(format!(
                "wazoo-bench-plugins-{}-isolation",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("spin.wasm"), recipes::spin_module())?;
            let (cfg, d) = (server_cfg.clone(), dir.clone());
            eprintln!("starting wazoo with the spin module ...");
            let server = tokio::task::spawn_blocking(move || {
                Server::start_with_plugins(Flavor::Wazoo, &cfg, Some(&d))
            })
            .await??;
            let mut info = server.describe(server_cfg);
            info.notes
                .push("--plugins with spin.wasm (an infinite loop)".to_string());
            recipes_block(results).systems.push(info);
            eprintln!(
                "[recipe-isolation] {} clients loop setData, {:.1} s per phase after {:.1} s of \
                 warm-up, {} round(s) of: no recipe load, and {} clients calling spin.spin \
                 (out of fuel) flat out",
                spec.writers, spec.secs, spec.warmup_secs, spec.rounds, spec.spinners
            );
            let run = recipes::isolation(&server.addr().to_string(), &spec).await;
            if let Some(f) = &run.failure {
                eprintln!("[recipe-isolation] FAILED: {f}");
            }
            eprintln!(
                "[recipe-isolation] setData p50 {:.0} µs p99 {:.0} µs ({:.0}/s) quiet; p50 {:.0} µs \
                 p99 {:.0} µs ({:.0}/s) with {:.0} spin calls/s: {:.2}x (p50), {:.2}x (p99)",
                run.quiet.p50_us,
                run.quiet.p99_us,
                run.quiet_writes_per_sec,
                run.loaded.p50_us,
                run.loaded.p99_us,
                run.loaded_writes_per_sec,
                run.spin_calls_per_sec,
                run.ratio_p50,
                run.ratio_p99
            );
            recipes_block(results).isolation = Some(recipes::IsolationBlock {
                spec,
                wazoo_cfg: server_cfg.wazoo_cfg.clone(),
                run,
            });
            save(results)?;
            tokio::task::spawn_blocking(move || drop(server)).await?;
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    let contended: Vec<Contended> = args
        .workloads
        .iter()
        .filter_map(|w| match w {
            Workload::Lock => Some(Contended::Lock),
            Workload::Queue => Some(Contended::Queue),
            _ => None,
        })
        .collect();
    if contended.is_empty() {
        return Ok(());
    }
    let python = recipes::python(args.python.clone());
    let kazoo = {
        let py = python.clone();
        tokio::task::spawn_blocking(move || recipes::has_kazoo(&py)).await?
    };
    match &kazoo {
        Ok(v) => eprintln!("kazoo {v} ({python}) drives kazoo's recipes"),
        Err(e) => eprintln!("kazoo's recipes cannot run: {e:#}"),
    }
    let plugins = PluginsDir::new(&modules_dir, &["lock", "queue"], "ensemble")?;
    let mut running: BTreeMap<&'static str, Ensemble> = BTreeMap::new();
    for &flavor in systems {
        eprintln!(
            "starting a {}-member {flavor} ensemble for the recipes ...",
            args.members
        );
        let (cfg, n) = (server_cfg.clone(), args.members);
        let dir = (flavor == Flavor::Wazoo).then(|| plugins.path().to_path_buf());
        let t = Instant::now();
        let ens = tokio::task::spawn_blocking(move || {
            Ensemble::start_with_plugins(flavor, n, &cfg, dir.as_deref())
        })
        .await??;
        let mut info = tokio::task::block_in_place(|| ens.describe(server_cfg));
        if flavor == Flavor::Wazoo {
            info.notes.push(format!(
                "every member with --plugins {} (lock.wasm, queue.wasm)",
                plugins.path().display()
            ));
        }
        eprintln!(
            "  {flavor} ensemble serving after {:.1} s on {}",
            t.elapsed().as_secs_f64(),
            ens.connect_string()
        );
        recipes_block(results).systems.push(info);
        running.insert(flavor.name(), ens);
    }
    save(results)?;
    // Pairings: kazoo on ZooKeeper, wazoo's recipe, kazoo on wazoo.
    let kazoo_on_wazoo = !args.no_kazoo_on_wazoo;
    let mut pairings: Vec<&'static str> = Vec::new();
    for &flavor in systems {
        match flavor {
            Flavor::Zookeeper => pairings.push(recipes::ZK_KAZOO),
            Flavor::Wazoo => {
                pairings.push(recipes::WAZOO);
                if kazoo_on_wazoo {
                    pairings.push(recipes::WAZOO_KAZOO);
                }
            }
        }
    }
    for recipe in contended {
        let spec = ContendSpec {
            recipe,
            sessions: args.recipe_sessions.max(1),
            warmup_secs: p.warmup,
            duration_secs: args.recipe_duration_secs.unwrap_or(if p.quick {
                p.duration
            } else {
                5.0
            }),
            rounds: p.rounds,
            cycle_timeout_secs: 10.0,
            python: python.clone(),
            kazoo_on_wazoo,
        };
        let mut order = Vec::new();
        let mut rounds: BTreeMap<&'static str, Vec<recipes::ContendRound>> = BTreeMap::new();
        for r in 0..spec.rounds {
            let mut this_round = pairings.clone();
            if (*order_index + r) % 2 == 1 {
                this_round.reverse();
            }
            for key in this_round {
                let flavor = if key == recipes::ZK_KAZOO {
                    Flavor::Zookeeper
                } else {
                    Flavor::Wazoo
                };
                let ens = running.get(flavor.name()).expect("started above");
                let pids =
                    |e: &Ensemble| tokio::task::block_in_place(|| e.pids()).unwrap_or_default();
                let target = Target {
                    cluster: ens.connect_string(),
                    members: Vec::new(),
                    server_pids: pids(ens),
                    idle_pids: running
                        .iter()
                        .filter(|(name, _)| **name != flavor.name())
                        .flat_map(|(_, e)| pids(e))
                        .collect(),
                };
                let label = format!(
                    "[{}] {} (round {})",
                    recipe.name(),
                    recipes::pairing(key, recipe),
                    r + 1
                );
                eprintln!(
                    "{label}: {}; at most {:.0} s",
                    spec.describe(),
                    spec.round_bound_secs()
                );
                order.push(key.to_string());
                let path = format!("/bench-{}-{key}-{}", recipe.name(), r + 1);
                let round = if key == recipes::WAZOO {
                    recipes::wazoo_round(&target, &spec, &path).await
                } else {
                    match &kazoo {
                        Ok(_) => recipes::kazoo_round(&target, &spec, &path).await,
                        Err(e) => recipes::ContendRound::failed(format!("{e:#}")),
                    }
                };
                let one = recipes::summarize(key, std::slice::from_ref(&round));
                match &one.failure {
                    Some(f) => eprintln!("{label}: FAILED: {f}"),
                    None => eprintln!(
                        "{label}: {:.0} cycles/s; cycle p50 {:.0} µs, p99 {:.0} µs; server CPU {:.0} µs/cycle, other processes {:.2} cores; errors {:?}; {}",
                        one.cycles_per_sec,
                        one.cycle.p50_us,
                        one.cycle.p99_us,
                        one.server_cpu_us_per_cycle,
                        one.other_cpu_cores,
                        one.errors,
                        match recipe {
                            Contended::Lock => format!("{} overlaps", one.overlaps),
                            Contended::Queue => format!(
                                "{} put, {} taken, {} left, {} duplicates, {} lost",
                                one.items_put,
                                one.items_taken,
                                one.remaining,
                                one.duplicates,
                                one.lost
                            ),
                        }
                    ),
                }
                rounds.entry(key).or_default().push(round);
                let runs = rounds
                    .iter()
                    .map(|(k, rs)| {
                        (
                            k.to_string(),
                            recipes::summarize(&recipes::pairing(k, recipe), rs),
                        )
                    })
                    .collect();
                let b = ContendBlock {
                    spec: spec.clone(),
                    order: order.clone(),
                    runs,
                };
                match recipe {
                    Contended::Lock => recipes_block(results).lock = Some(b),
                    Contended::Queue => recipes_block(results).queue = Some(b),
                }
                save(results)?;
            }
        }
        *order_index += 1;
    }
    eprintln!("stopping the recipe ensembles");
    tokio::task::spawn_blocking(move || drop(running)).await?;
    drop(plugins);
    Ok(())
}
