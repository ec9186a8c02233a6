//! The nodes a run works on, created before it is measured.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use anyhow::{Context, Result};
use tokio::task::JoinSet;
use zookeeper_client as zk;

use super::{persistent, LoadSpec, Workload};

/// Outcome of [`create_many`].
#[derive(Debug)]
pub struct CreateMany {
    pub created: u64,
}

/// Creates `count` nodes, `path_of(i)` for i in `0..count`, as fast as
/// possible: `inflight` tasks per session pull the next index from a shared
/// counter. Fails on the first error (a node that already exists counts as
/// created when `existing_ok`) or after `timeout`; prints progress to stderr
/// every 2 s when `label` is given.
#[allow(clippy::too_many_arguments)]
pub async fn create_many(
    clients: &[zk::Client],
    inflight: usize,
    count: u64,
    path_of: Arc<dyn Fn(u64) -> String + Send + Sync>,
    data: Arc<Vec<u8>>,
    timeout: Duration,
    label: Option<String>,
    existing_ok: bool,
) -> Result<CreateMany> {
    let next = Arc::new(AtomicU64::new(0));
    let created = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut set = JoinSet::new();
    for client in clients {
        for _ in 0..inflight {
            let (client, next, created, path_of, data) = (
                client.clone(),
                next.clone(),
                created.clone(),
                path_of.clone(),
                data.clone(),
            );
            set.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        return Ok(());
                    }
                    let path = path_of(i);
                    match client.create(&path, &data, &persistent()).await {
                        Ok(_) | Err(zk::Error::NodeExists) if existing_ok => {
                            created.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(_) => {
                            created.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            next.store(count, Ordering::Relaxed);
                            return Err(anyhow::anyhow!("create {path}: {e}"));
                        }
                    }
                }
            });
        }
    }
    let progress = label.map(|label| {
        let created = created.clone();
        tokio::spawn(async move {
            let mut last = 0;
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let now = created.load(Ordering::Relaxed);
                eprintln!(
                    "  {label}: {now}/{count} created ({:.0}/s, {:.0} s)",
                    (now - last) as f64 / 2.0,
                    start.elapsed().as_secs_f64()
                );
                last = now;
            }
        })
    });
    let result = tokio::time::timeout(timeout, async {
        while let Some(r) = set.join_next().await {
            r.context("create task panicked")??;
        }
        Ok::<(), anyhow::Error>(())
    })
    .await;
    if let Some(p) = progress {
        p.abort();
    }
    let done = created.load(Ordering::Relaxed);
    match result {
        Ok(Ok(())) => Ok(CreateMany { created: done }),
        Ok(Err(e)) => Err(e.context(format!("after {done} of {count} creates"))),
        Err(_) => bail!("timed out after {timeout:?} with {done} of {count} nodes created"),
    }
}

/// The nodes a workload works on, created before it starts.
pub(super) struct Prepared {
    pub(super) parent: String,
    pub(super) keys: Arc<Vec<String>>,
}

pub(super) async fn prepare(
    clients: &[zk::Client],
    workload: Workload,
    spec: &LoadSpec,
) -> Result<Prepared> {
    // create gets a fresh parent every round (a round never meets the nodes
    // of an earlier one); the others share one set of keys per server.
    static CREATE_RUNS: AtomicU64 = AtomicU64::new(0);
    let parent = match workload {
        Workload::Create => format!(
            "/bench-create-{}",
            CREATE_RUNS.fetch_add(1, Ordering::Relaxed)
        ),
        _ => format!("/bench-{}", workload.name()),
    };
    match clients[0].create(&parent, b"", &persistent()).await {
        Ok(_) | Err(zk::Error::NodeExists) => {}
        Err(e) => bail!("create {parent}: {e}"),
    }
    let n_keys = match workload {
        Workload::Create => 0,
        Workload::ExistsWatch => spec.watch_paths,
        _ => spec.keys,
    };
    let keys: Vec<String> = if n_keys == 0 {
        Vec::new()
    } else {
        (0..n_keys).map(|i| format!("{parent}/k{i:07}")).collect()
    };
    if !keys.is_empty() {
        let k = Arc::new(keys.clone());
        create_many(
            clients,
            spec.inflight,
            keys.len() as u64,
            Arc::new(move |i| k[i as usize].clone()),
            Arc::new(vec![b'x'; spec.payload]),
            Duration::from_secs(120),
            None,
            true,
        )
        .await
        .context("pre-creating the workload's nodes")?;
    }
    // In an ensemble a session may sit on a member that has not applied the
    // last creates yet: sync every session before the load starts.
    for (i, c) in clients.iter().enumerate() {
        c.sync(&parent)
            .await
            .with_context(|| format!("sync {parent} on session {i}"))?;
    }
    Ok(Prepared {
        parent,
        keys: Arc::new(keys),
    })
}
