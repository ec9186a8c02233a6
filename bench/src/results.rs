//! The raw figures of a run, as `--out` writes them (JSON) and the report
//! and plots read them.

use std::collections::BTreeMap;

use serde::Serialize;
use wazoo_testkit::Flavor;

use crate::args::Args;
use crate::churn::{ChurnRun, ChurnSpec};
use crate::client_bench::{ClientResult, ClientSpec};
use crate::failover::{FailoverRun, FailoverSpec};
use crate::fanout::{FanoutRun, FanoutSpec};
use crate::load::{LoadSpec, RunResult, Workload};
use crate::memory::{MemoryRun, MemorySpec};
use crate::recovery::RecoverySpec;
use crate::servers::SystemInfo;
use crate::{recipes, sweep};

#[derive(Debug, Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub kernel: String,
    pub mem_total_bytes: Option<u64>,
    pub loadavg_at_start: String,
    pub loadavg_at_end: String,
    pub client_threads: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct WorkloadResult {
    pub workload: Workload,
    /// The order the systems ran in (alternates from workload to workload).
    pub order: Vec<String>,
    pub runs: BTreeMap<String, RunResult>,
}

#[derive(Debug, Serialize)]
pub struct ClientBlock {
    pub spec: ClientSpec,
    pub result: ClientResult,
}

#[derive(Clone, Debug, Serialize)]
pub struct MemoryBlock {
    pub spec: MemorySpec,
    pub order: Vec<String>,
    /// Per system, the run with the median RSS of `all_runs` (the recovery
    /// workload's restarts are those of the first run).
    pub runs: BTreeMap<String, MemoryRun>,
    /// Per system, every run (`--memory-runs`), in the order run.
    pub all_runs: BTreeMap<String, Vec<MemoryRun>>,
}

impl MemoryBlock {
    /// Sets `runs` from `all_runs`: per system the completed run with the
    /// median RSS (the lower median for an even count), else the last run;
    /// `restarts` come from the first run that has them.
    pub fn pick_medians(&mut self) {
        self.runs.clear();
        for (name, all) in &self.all_runs {
            let restarts = all
                .iter()
                .find(|r| !r.restarts.is_empty())
                .map(|r| r.restarts.clone())
                .unwrap_or_default();
            let mut ok: Vec<&MemoryRun> = all.iter().filter(|r| r.failure.is_none()).collect();
            ok.sort_by_key(|r| r.rss_bytes);
            let pick = if ok.is_empty() {
                all.last()
            } else {
                Some(ok[(ok.len() - 1) / 2])
            };
            if let Some(run) = pick {
                let mut run = run.clone();
                run.restarts = restarts;
                self.runs.insert(name.clone(), run);
            }
        }
    }
}

#[derive(Debug, Serialize)]
pub struct FanoutBlock {
    pub spec: FanoutSpec,
    /// The order the systems ran in, per watcher count.
    pub order: Vec<String>,
    /// system -> one run per watcher count.
    pub runs: BTreeMap<String, Vec<FanoutRun>>,
}

#[derive(Debug, Serialize)]
pub struct ChurnBlock {
    pub spec: ChurnSpec,
    pub order: Vec<String>,
    pub runs: BTreeMap<String, ChurnRun>,
}

#[derive(Debug, Serialize)]
pub struct FailoverBlock {
    pub spec: FailoverSpec,
    /// The order of the kills, system by system.
    pub order: Vec<String>,
    pub runs: BTreeMap<String, FailoverRun>,
}

#[derive(Debug, Serialize)]
pub struct RecipeCallBlock {
    pub spec: recipes::RecipeCallSpec,
    pub run: recipes::RecipeCallRun,
}

#[derive(Debug, Serialize)]
pub struct ContendBlock {
    pub spec: recipes::ContendSpec,
    /// The order the pairings ran in.
    pub order: Vec<String>,
    /// `zookeeper` (kazoo's recipe on ZooKeeper), `wazoo` (wazoo's recipe),
    /// `wazoo-kazoo` (kazoo's recipe on wazoo).
    pub runs: BTreeMap<String, recipes::ContendRun>,
}

#[derive(Debug, Serialize)]
pub struct RecipesBlock {
    /// Where the modules came from.
    pub modules_dir: String,
    /// The servers the recipe workloads ran on.
    pub systems: Vec<SystemInfo>,
    pub recipe_call: Option<RecipeCallBlock>,
    pub isolation: Option<crate::recipes::IsolationBlock>,
    pub lock: Option<ContendBlock>,
    pub queue: Option<ContendBlock>,
}

#[derive(Debug, Serialize)]
pub struct EnsembleBlock {
    pub members: usize,
    pub load: LoadSpec,
    pub systems: Vec<SystemInfo>,
    pub workloads: Vec<WorkloadResult>,
    pub failover: Option<FailoverBlock>,
    /// The same with the leader paused (SIGSTOP), and cut off by a silent
    /// partition.
    pub failover_pause: Option<FailoverBlock>,
    pub failover_partition: Option<FailoverBlock>,
    /// Throughput against sessions on the ensembles.
    pub sweep: Option<sweep::SweepBlock>,
    /// VmRSS of each member (in member order) at the end of the phase.
    pub member_rss_bytes: BTreeMap<String, Vec<Option<u64>>>,
}

#[derive(Debug, Serialize)]
pub struct Results {
    pub started_unix_secs: u64,
    pub total_secs: f64,
    pub complete: bool,
    pub args: Args,
    pub machine: Machine,
    /// Standalone servers.
    pub load: LoadSpec,
    pub systems: Vec<SystemInfo>,
    pub workloads: Vec<WorkloadResult>,
    pub client: Option<ClientBlock>,
    pub memory: Option<MemoryBlock>,
    /// Ensembles (`--topology ensemble|both`).
    pub ensemble: Option<EnsembleBlock>,
    pub fanout: Option<FanoutBlock>,
    pub churn: Option<ChurnBlock>,
    /// Throughput against sessions on the standalone servers.
    pub sweep: Option<sweep::SweepBlock>,
    /// The recovery workload's settings; its runs are in `memory.runs[*].restarts`.
    pub recovery: Option<RecoverySpec>,
    /// recipe-call, lock, queue.
    pub recipes: Option<RecipesBlock>,
    /// The scale curves (memory-curve, fanout-curve, payload-curve).
    pub curves: Option<crate::curves::CurvesBlock>,
    /// SVG files written beside the report (file names).
    pub plots: Vec<String>,
}

pub fn recipes_block(r: &mut Results) -> &mut RecipesBlock {
    r.recipes.as_mut().expect("the recipe phase sets it first")
}

pub fn ensemble_block(r: &mut Results) -> &mut EnsembleBlock {
    r.ensemble
        .as_mut()
        .expect("the ensemble phase sets it first")
}

pub fn serialize_flavors<S: serde::Serializer>(v: &[Flavor], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|f| f.name()))
}
