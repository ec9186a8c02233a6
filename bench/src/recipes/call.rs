//! `recipe-call`: a no-op recipe call against a getData on one connection,
//! and the server-side instantiate + call time measured in this process.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use wazoo::plugin::abi::{CallerInfo, Reply};
use wazoo::plugin::{abi, NoTree, Runtime, RuntimeConfig};
use zookeeper_client as zk;

use super::wazoo_connect;
use crate::load::{connect_sessions, persistent};
use crate::stats::{new_histogram, record, Latency};

#[derive(Clone, Debug, Serialize)]
pub struct RecipeCallSpec {
    /// Samples of each kind (call and getData, alternating).
    pub samples: usize,
    /// Unmeasured pairs first.
    pub warmup_samples: usize,
    /// Bytes of the znode read by getData.
    pub node_bytes: usize,
    /// Calls of the in-process instantiate + call measurement.
    pub inprocess_calls: usize,
    /// The whole workload gives up after this long.
    pub timeout_secs: f64,
}

/// Server-side `echo.noop`: instantiate + call in the server's runtime.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InProcess {
    pub module_bytes: u64,
    pub compile_ms: f64,
    pub calls: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    pub fuel: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct RecipeCallRun {
    /// Round trip of `echo.noop` (a recipe call on the client port).
    pub call: Latency,
    /// Round trip of getData of a `node_bytes` znode, same connection.
    pub get: Latency,
    pub call_cdf_us: Vec<f64>,
    pub get_cdf_us: Vec<f64>,
    /// call / getData at p50 and p99 (target: at most 1.5).
    pub ratio_p50: f64,
    pub ratio_p99: f64,
    /// Server CPU (user+system) over the measured samples, per request
    /// (calls and gets together).
    pub server_cpu_us_per_request: f64,
    pub errors: BTreeMap<String, u64>,
    pub inprocess: Option<InProcess>,
    pub failure: Option<String>,
}

impl RecipeCallSpec {
    pub fn bound_secs(&self) -> f64 {
        self.timeout_secs + 10.0
    }
}

/// The recipe-call workload against the wazoo server at `addr` (process
/// `pid`) that has the echo module loaded, then the in-process figure with
/// `echo_wasm`.
pub async fn recipe_call(
    hosts: &str,
    pid: u32,
    echo_wasm: &Path,
    spec: &RecipeCallSpec,
) -> RecipeCallRun {
    let limit = Duration::from_secs_f64(spec.timeout_secs);
    let mut run = match tokio::time::timeout(limit, recipe_call_wire(hosts, pid, spec)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => RecipeCallRun {
            failure: Some(format!("{e:#}")),
            ..Default::default()
        },
        Err(_) => RecipeCallRun {
            failure: Some(format!("took longer than {limit:?}")),
            ..Default::default()
        },
    };
    let (bytes, calls) = (echo_wasm.to_path_buf(), spec.inprocess_calls);
    match tokio::task::spawn_blocking(move || inprocess(&bytes, calls)).await {
        Ok(Ok(p)) => run.inprocess = Some(p),
        Ok(Err(e)) => {
            let f = format!("in-process: {e:#}");
            run.failure = Some(match run.failure.take() {
                Some(prev) => format!("{prev}; {f}"),
                None => f,
            });
        }
        Err(e) => run.failure = Some(format!("in-process measurement panicked: {e}")),
    }
    run
}

async fn recipe_call_wire(hosts: &str, pid: u32, spec: &RecipeCallSpec) -> Result<RecipeCallRun> {
    let path = "/bench-recipe-call";
    let admin = connect_sessions(hosts, 1)
        .await?
        .pop()
        .expect("one session");
    match admin
        .create(path, &vec![b'x'; spec.node_bytes], &persistent())
        .await
    {
        Ok(_) | Err(zk::Error::NodeExists) => {}
        Err(e) => bail!("create {path}: {e}"),
    }
    drop(admin);
    let c = wazoo_connect(hosts).await?;
    let args = abi::encode(&()).context("encoding ()")?;
    let (mut call_h, mut get_h) = (new_histogram(), new_histogram());
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut cpu0 = None;
    for i in 0..spec.warmup_samples + spec.samples {
        if i == spec.warmup_samples {
            cpu0 = Some(crate::servers::cpu_secs(Some(pid))?);
        }
        let measured = i >= spec.warmup_samples;
        // Alternate which goes first, so neither always follows the other.
        for k in 0..2 {
            let do_call = (i + k) % 2 == 0;
            let t = Instant::now();
            if do_call {
                match c.recipe_call("echo", "noop", &args).await {
                    Ok(body) => match abi::decode::<Reply>(&body) {
                        Ok(Reply::Done(_)) => {
                            if measured {
                                record(&mut call_h, t.elapsed());
                            }
                        }
                        Ok(other) => bail!("echo.noop answered {other:?}"),
                        Err(e) => bail!("echo.noop reply does not decode: {e}"),
                    },
                    Err(e) => *errors.entry(format!("call: {e}")).or_default() += 1,
                }
            } else {
                match c.get_data(path).await {
                    Ok((data, _)) => {
                        if data.len() != spec.node_bytes {
                            bail!("getData returned {} bytes", data.len());
                        }
                        if measured {
                            record(&mut get_h, t.elapsed());
                        }
                    }
                    Err(e) => *errors.entry(format!("get: {e}")).or_default() += 1,
                }
            }
        }
        if errors.values().sum::<u64>() > 100 {
            bail!("too many errors: {errors:?}");
        }
    }
    let cpu1 = crate::servers::cpu_secs(Some(pid))?;
    let _ = c.close().await;
    let (call, get) = (Latency::of(&call_h), Latency::of(&get_h));
    let requests = (call.count + get.count).max(1) as f64;
    Ok(RecipeCallRun {
        ratio_p50: if get.p50_us > 0.0 {
            call.p50_us / get.p50_us
        } else {
            0.0
        },
        ratio_p99: if get.p99_us > 0.0 {
            call.p99_us / get.p99_us
        } else {
            0.0
        },
        call_cdf_us: crate::svg::cdf_points(&call_h),
        get_cdf_us: crate::svg::cdf_points(&get_h),
        call,
        get,
        server_cpu_us_per_request: (cpu1 - cpu0.unwrap_or(cpu1)) * 1e6 / requests,
        errors,
        inprocess: None,
        failure: None,
    })
}

/// `echo.noop` instantiated and called `calls` times (after a tenth as
/// many unmeasured) in the server's runtime, in this process.
fn inprocess(echo_wasm: &Path, calls: usize) -> Result<InProcess> {
    let bytes = std::fs::read(echo_wasm).with_context(|| format!("{}", echo_wasm.display()))?;
    let rt = Runtime::new(RuntimeConfig::default())?;
    let t = Instant::now();
    rt.load_bytes(&bytes)
        .map_err(|e| anyhow::anyhow!("loading echo.wasm: {e}"))?;
    let compile = t.elapsed();
    let caller = CallerInfo {
        session: 1,
        guid: "bench".into(),
        ids: Vec::new(),
    };
    // `echo.noop` never touches the tree.
    let mut tree = NoTree;
    let mut fuel = 0;
    for _ in 0..calls / 10 {
        rt.call("echo", "noop", &[], &caller, &mut tree)
            .map_err(|e| anyhow::anyhow!("echo.noop: {e}"))?;
    }
    let mut h = new_histogram();
    for _ in 0..calls {
        let t = Instant::now();
        let out = rt
            .call("echo", "noop", &[], &caller, &mut tree)
            .map_err(|e| anyhow::anyhow!("echo.noop: {e}"))?;
        record(&mut h, t.elapsed());
        fuel = out.fuel_used;
    }
    let l = Latency::of(&h);
    Ok(InProcess {
        module_bytes: bytes.len() as u64,
        compile_ms: compile.as_secs_f64() * 1e3,
        calls,
        p50_us: l.p50_us,
        p99_us: l.p99_us,
        mean_us: l.mean_us,
        fuel,
    })
}
