//! The memory figure: a fresh server, N znodes of 100 bytes loaded as fast
//! as pipelined creates go, then the server process's resident memory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;
use wazoo_testkit::Flavor;

use crate::load::{connect_sessions, create_many};
use crate::recovery::{RecoverySpec, RestartRun};
use crate::servers::{jcmd, jvm_heap_used, proc_status_bytes, Server, ServerConfig, SystemInfo};

/// Children per parent: N nodes live under N/1000 parents of 1000 each
/// (`/mem/b0000/n0000` ...), so the figure is about node storage rather
/// than one giant child list.
pub const BUCKET: u64 = 1000;
/// Data bytes per znode.
pub const NODE_BYTES: usize = 100;

#[derive(Clone, Debug, Serialize)]
pub struct MemorySpec {
    pub nodes: u64,
    pub node_bytes: usize,
    pub children_per_parent: u64,
    pub sessions: usize,
    pub inflight: usize,
    pub settle_secs: f64,
    pub load_timeout_secs: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct MemoryRun {
    /// VmRSS of the fresh, empty server (after startup and 1 s idle).
    pub rss_empty_bytes: u64,
    /// VmRSS right after the last create was acknowledged.
    pub rss_loaded_bytes: u64,
    /// VmRSS after `settle_secs` more (the figure the table shows).
    pub rss_bytes: u64,
    /// VmHWM: the peak resident memory of the process.
    pub rss_peak_bytes: u64,
    /// Nodes created by the loader (parents included).
    pub created: u64,
    pub load_secs: f64,
    pub creates_per_sec: f64,
    /// CPU seconds (utime+stime) the server process used during the load.
    pub load_server_cpu_secs: f64,
    /// ZooKeeper only: VmRSS after a forced full GC (`jcmd GC.run`), and the
    /// live heap then (`jcmd GC.heap_info`): the least the JVM could hold
    /// the tree in, as opposed to what it does hold.
    pub rss_after_full_gc_bytes: Option<u64>,
    pub jvm_heap_used_after_gc_bytes: Option<u64>,
    /// `zk_znode_count` from `mntr`, if the server reports it.
    pub mntr_znode_count: Option<u64>,
    /// `zk_approximate_data_size` from `mntr`, if the server reports it.
    pub mntr_data_size: Option<u64>,
    pub failure: Option<String>,
    pub system: Option<SystemInfo>,
    /// The recovery workload: each kill -9 and restart of this loaded
    /// server, in order (empty when recovery is not run).
    pub restarts: Vec<RestartRun>,
}

/// Starts a fresh server of `flavor`, loads it and measures it; the server
/// is killed before this returns.
/// With `recovery`, the loaded server is then killed and restarted that many
/// times (see [`crate::recovery`]).
pub async fn measure(
    flavor: Flavor,
    cfg: &ServerConfig,
    spec: &MemorySpec,
    recovery: Option<&RecoverySpec>,
) -> MemoryRun {
    let mut run = MemoryRun::default();
    if let Err(e) = measure_inner(flavor, cfg, spec, recovery, &mut run).await {
        run.failure = Some(format!("{e:#}"));
    }
    run
}

async fn measure_inner(
    flavor: Flavor,
    cfg: &ServerConfig,
    spec: &MemorySpec,
    recovery: Option<&RecoverySpec>,
    run: &mut MemoryRun,
) -> Result<()> {
    let cfg2 = cfg.clone();
    let mut server = tokio::task::spawn_blocking(move || Server::start(flavor, &cfg2)).await??;
    let pid = server.pid()?;
    let addr = server.addr();
    tokio::time::sleep(Duration::from_secs(1)).await;
    run.rss_empty_bytes = proc_status_bytes(pid, "VmRSS")?;
    let name = flavor.name();
    eprintln!(
        "[memory] {name}: empty server RSS {:.1} MiB; loading {} znodes of {} bytes; \
         at most {:.0} s",
        mib(run.rss_empty_bytes),
        spec.nodes,
        spec.node_bytes,
        spec.load_timeout_secs + spec.settle_secs + 30.0
    );

    let clients = connect_sessions(&addr.to_string(), spec.sessions).await?;
    let buckets = spec.nodes.div_ceil(spec.children_per_parent);
    let cpu0 = crate::servers::cpu_secs(Some(pid))?;
    let start = Instant::now();
    let deadline = Duration::from_secs_f64(spec.load_timeout_secs);
    let root = create_many(
        &clients[..1],
        1,
        1,
        Arc::new(|_| "/mem".to_string()),
        Arc::new(Vec::new()),
        deadline,
        None,
        false,
    )
    .await
    .context("creating /mem")?;
    let parents = create_many(
        &clients,
        spec.inflight,
        buckets,
        Arc::new(|i| format!("/mem/b{i:04}")),
        Arc::new(Vec::new()),
        deadline.saturating_sub(start.elapsed()),
        None,
        false,
    )
    .await
    .context("creating the parents")?;
    let per = spec.children_per_parent;
    let leaves = create_many(
        &clients,
        spec.inflight,
        spec.nodes,
        Arc::new(move |i| format!("/mem/b{:04}/n{:04}", i / per, i % per)),
        Arc::new(vec![b'm'; spec.node_bytes]),
        deadline.saturating_sub(start.elapsed()),
        Some(format!("[memory] {name}")),
        false,
    )
    .await
    .context("loading the znodes")?;
    let elapsed = start.elapsed();
    run.load_server_cpu_secs = crate::servers::cpu_secs(Some(pid))? - cpu0;
    run.created = root.created + parents.created + leaves.created;
    run.load_secs = elapsed.as_secs_f64();
    run.creates_per_sec = run.created as f64 / run.load_secs;
    run.rss_loaded_bytes = proc_status_bytes(pid, "VmRSS")?;
    drop(clients);
    tokio::time::sleep(Duration::from_secs_f64(spec.settle_secs)).await;
    run.rss_bytes = proc_status_bytes(pid, "VmRSS")?;
    run.rss_peak_bytes = proc_status_bytes(pid, "VmHWM")?;
    let mntr = server.mntr();
    let num = |k: &str| mntr.get(k).and_then(|v| v.parse::<u64>().ok());
    run.mntr_znode_count = num("zk_znode_count");
    run.mntr_data_size = num("zk_approximate_data_size");
    run.system = Some(server.describe(cfg));
    if flavor == Flavor::Zookeeper {
        let gc = tokio::task::spawn_blocking(move || jcmd(pid, &["GC.run"]).is_some()).await?;
        if gc {
            tokio::time::sleep(Duration::from_secs(1)).await;
            run.rss_after_full_gc_bytes = proc_status_bytes(pid, "VmRSS").ok();
            run.jvm_heap_used_after_gc_bytes =
                tokio::task::spawn_blocking(move || jvm_heap_used(pid)).await?;
        }
    }
    eprintln!(
        "[memory] {name}: {} znodes in {:.1} s ({:.0}/s); RSS {:.1} MiB (peak {:.1} MiB){}",
        run.created,
        run.load_secs,
        run.creates_per_sec,
        mib(run.rss_bytes),
        mib(run.rss_peak_bytes),
        match (
            run.rss_after_full_gc_bytes,
            run.jvm_heap_used_after_gc_bytes
        ) {
            (Some(rss), Some(heap)) => format!(
                "; after a full GC: RSS {:.1} MiB, live heap {:.1} MiB",
                mib(rss),
                mib(heap)
            ),
            _ => String::new(),
        }
    );
    if let Some(rec) = recovery {
        // The last znode loaded: the probe reads it back after each restart.
        let last = spec.nodes.saturating_sub(1);
        let probe_path = format!("/mem/b{:04}/n{:04}", last / per, last % per);
        for k in 0..rec.restarts {
            eprintln!(
                "[recovery] {name}: kill -9 and restart {} of {} with {} znodes; at most {:.0} s",
                k + 1,
                rec.restarts,
                run.created,
                rec.timeout_secs + 5.0
            );
            let (rec2, path, bytes) = (rec.clone(), probe_path.clone(), spec.node_bytes);
            let (back, r) = tokio::task::spawn_blocking(move || {
                let r = crate::recovery::kill_and_restart(&mut server, &path, bytes, &rec2);
                (server, r)
            })
            .await?;
            server = back;
            eprintln!(
                "[recovery] {name}: answered {:.0} ms after the start (ready check {:.0} ms); {} znodes; RSS {:.1} MiB; data dir {:.1} MiB{}",
                r.answered_ms,
                r.ready_ms,
                r.znodes_after
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "?".into()),
                mib(r.rss_after_bytes.unwrap_or(0)),
                mib(r.data_dir_bytes),
                r.failure
                    .as_ref()
                    .map(|f| format!("; FAILED: {f}"))
                    .unwrap_or_default()
            );
            let failed = r.failure.is_some();
            run.restarts.push(r);
            if failed {
                break;
            }
        }
    }
    // Kill it now (Drop), off the async threads.
    tokio::task::spawn_blocking(move || drop(server)).await?;
    Ok(())
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
