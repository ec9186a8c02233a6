//! The recipe workers: threads that run recipe steps off the member's
//! thread (docs/ARCHITECTURE.md, "Recipes", "Where a step runs").
//!
//! The pipeline emits a step as `Output::RecipeStep` with an O(1) copy of
//! its prep view; the core loop hands it here and goes on serving. A
//! worker runs it with its own handle on the shared wasm runtime and
//! reports it on the log writer's report channel (which the core loop
//! reads first) as `Input::RecipeStepDone`; the pipeline checks what the
//! step read against its view then. So a step that burns its whole fuel
//! or deadline holds a worker, never the member.
//!
//! Workers run at a lower scheduling priority (nice 10 on Linux) than the
//! member's thread and the log writer: on a machine whose cores are all
//! busy, a recipe flat out costs other clients little; on an idle core it
//! runs at full speed.

use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use crate::core::recipe::RecipeEngine;
use crate::core::server::{Input, RecipeJob};
use crate::member::Event;

/// Threads that run recipe steps; they stop when this is dropped (after
/// the step each is running).
pub(crate) struct RecipePool {
    jobs: std_mpsc::Sender<RecipeJob>,
}

impl RecipePool {
    /// Starts `threads` workers, each with its own handle on `engine`
    /// (the runtime is shared inside), reporting on `results`.
    pub(crate) fn start(
        threads: usize,
        engine: &crate::plugin::Runtime,
        results: mpsc::UnboundedSender<Event>,
    ) -> Result<RecipePool> {
        assert!(threads > 0, "a recipe pool has at least one worker");
        // Unbounded, yet bounded by the pipeline: a session has at most
        // one call in flight, and a fired wait one callback.
        let (tx, rx) = std_mpsc::channel::<RecipeJob>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = Arc::clone(&rx);
            let mut engine: Box<dyn RecipeEngine> = Box::new(engine.clone());
            let results = results.clone();
            std::thread::Builder::new()
                .name(format!("wazoo-recipe-{i}"))
                .spawn(move || {
                    crate::plugin::lower_thread_priority();
                    loop {
                        let job = match rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => return,
                        };
                        let Ok(job) = job else {
                            return; // the member stopped
                        };
                        let done = job.run(engine.as_mut());
                        let ev = Event::Input(Input::RecipeStepDone(Box::new(done)));
                        if results.send(ev).is_err() {
                            return;
                        }
                    }
                })
                .context("cannot start a recipe worker thread")?;
        }
        Ok(RecipePool { jobs: tx })
    }

    /// The pool of a member whose pipeline offloads steps (recipes on and
    /// `recipe.workers` not 0: see `member::start_plugins`); `None`
    /// otherwise.
    pub(crate) fn for_member(
        cfg: &crate::config::Config,
        plugins: Option<&crate::member::Plugins>,
        results: &mpsc::UnboundedSender<Event>,
    ) -> Result<Option<RecipePool>> {
        let threads = cfg.recipe.worker_threads();
        match plugins {
            Some(p) if threads > 0 => Ok(Some(RecipePool::start(
                threads,
                &p.runtime,
                results.clone(),
            )?)),
            _ => Ok(None),
        }
    }

    /// Queues a step for the next free worker.
    pub(crate) fn run(&self, job: RecipeJob) {
        if self.jobs.send(job).is_err() {
            // Only when every worker died, which a worker never does while
            // the pool lives (a panicking step is caught in `run`).
            tracing::error!("the recipe workers are gone; a step was dropped");
        }
    }
}
