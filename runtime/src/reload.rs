//! Hot reload: keep a plugins directory and the loaded modules in step.
//!
//! `notify` events only trigger a (debounced) reconciliation of the whole
//! directory, so a missed, coalesced or reordered event cannot leave the
//! registry out of step; a periodic rescan is the safety net. Every `*.wasm`
//! file (names starting with `.` are ignored, so `cp x .x.tmp && mv .x.tmp
//! x.wasm` deploys atomically) is loaded if its bytes changed; a file that
//! fails to load leaves the previous version serving and is logged once per
//! content; a removed file unloads the module it provided.

use super::cache::{content_hash, ContentHash};
use super::error::LoadError;
use super::runtime::{ModuleInfo, Runtime};
use notify::{RecursiveMode, Watcher};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What loading a directory gave, file by file.
pub type LoadReport = Vec<(PathBuf, Result<ModuleInfo, LoadError>)>;

/// Watches a plugins directory; stops when dropped.
pub struct PluginWatcher {
    dir: PathBuf,
    tx: mpsc::Sender<Msg>,
    thread: Option<JoinHandle<()>>,
    _watcher: notify::RecommendedWatcher,
}

enum Msg {
    Changed,
    Rescan(mpsc::Sender<()>),
    Stop,
}

struct FileState {
    hash: ContentHash,
    /// The module this file provides (kept when a later version failed).
    name: Option<String>,
}

struct Reconciler {
    runtime: Runtime,
    dir: PathBuf,
    files: HashMap<PathBuf, FileState>,
}

impl Reconciler {
    fn run(&mut self) -> LoadReport {
        let mut results = Vec::new();
        let mut present = Vec::new();
        match std::fs::read_dir(&self.dir) {
            Ok(entries) => {
                for e in entries.flatten() {
                    let path = e.path();
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    if name.starts_with('.') || !name.ends_with(".wasm") || !path.is_file() {
                        continue;
                    }
                    present.push(path);
                }
            }
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), "cannot read the plugins directory: {e}")
            }
        }
        present.sort();
        for path in &present {
            let Ok(bytes) = std::fs::read(path) else {
                continue;
            };
            let hash = content_hash(&bytes);
            let prev = self.files.get(path);
            if prev.is_some_and(|p| p.hash == hash) {
                continue;
            }
            let prev_name = prev.and_then(|p| p.name.clone());
            let r = self.runtime.load(&bytes, Some(path.clone()));
            let name = match &r {
                Ok(info) => {
                    if let Some(other) = self.provider_of(&info.name, path) {
                        tracing::warn!(
                            module = %info.name, file = %path.display(), also = %other.display(),
                            "two files declare this recipe module; the one loaded last serves it"
                        );
                    }
                    if let Some(old) = prev_name.as_deref().filter(|n| *n != info.name) {
                        if self.runtime.unload_if_source(old, path) {
                            self.files.insert(
                                path.clone(),
                                FileState {
                                    hash,
                                    name: Some(info.name.clone()),
                                },
                            );
                            self.restore(old);
                        }
                    }
                    Some(info.name.clone())
                }
                Err(e) => {
                    tracing::warn!(
                        file = %path.display(), serving = ?prev_name,
                        "recipe module refused; the previous version (if any) keeps serving: {e}"
                    );
                    prev_name
                }
            };
            self.files.insert(path.clone(), FileState { hash, name });
            results.push((path.clone(), r));
        }
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| !present.contains(p))
            .cloned()
            .collect();
        // Forget every removed file before restoring from the others.
        for path in &gone {
            self.files.remove(path);
        }
        for path in gone {
            for name in self.runtime.unload_source(&path) {
                tracing::info!(module = %name, file = %path.display(), "recipe module file removed");
                self.restore(&name);
            }
        }
        results
    }

    /// Another file than `path` that provides module `name`, if any.
    fn provider_of(&self, name: &str, path: &Path) -> Option<PathBuf> {
        self.files
            .iter()
            .filter(|(p, f)| p.as_path() != path && f.name.as_deref() == Some(name))
            .map(|(p, _)| p.clone())
            .min()
    }

    /// Module `name` was just unloaded with the file that served it: a
    /// file still in the directory that declares it serves it again, so
    /// removing one of two copies never takes the module away.
    fn restore(&mut self, name: &str) {
        let Some(other) = self.provider_of(name, Path::new("")) else {
            return;
        };
        let r = std::fs::read(&other)
            .map_err(|e| LoadError::Io(format!("{}: {e}", other.display())))
            .and_then(|bytes| self.runtime.load(&bytes, Some(other.clone())));
        match r {
            Ok(info) if info.name == name => {
                tracing::info!(module = %name, file = %other.display(), "recipe module served from the file that still declares it")
            }
            Ok(info) => tracing::warn!(
                module = %name, file = %other.display(), now = %info.name,
                "the file that declared this recipe module now declares another; rescanning picks it up"
            ),
            Err(e) => {
                tracing::warn!(module = %name, file = %other.display(), "recipe module not restored: {e}")
            }
        }
    }
}

/// How the watcher behaves.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    /// Quiet time after the last event before reconciling.
    pub debounce: Duration,
    /// Full rescan interval (a safety net for missed events).
    pub rescan: Duration,
}

impl Default for WatchConfig {
    fn default() -> WatchConfig {
        WatchConfig {
            debounce: Duration::from_millis(50),
            rescan: Duration::from_secs(5),
        }
    }
}

impl Runtime {
    /// Loads every `*.wasm` in `dir` once (no watching). Returns what each file gave.
    pub fn load_dir(&self, dir: &Path) -> LoadReport {
        Reconciler {
            runtime: self.clone(),
            dir: dir.to_path_buf(),
            files: HashMap::new(),
        }
        .run()
    }

    /// Loads every module in `dir` and keeps watching it (see the module docs).
    pub fn watch_dir(&self, dir: &Path) -> anyhow::Result<(PluginWatcher, LoadReport)> {
        self.watch_dir_with(dir, WatchConfig::default())
    }

    pub fn watch_dir_with(
        &self,
        dir: &Path,
        config: WatchConfig,
    ) -> anyhow::Result<(PluginWatcher, LoadReport)> {
        let dir = dir.canonicalize()?;
        let (tx, rx) = mpsc::channel::<Msg>();
        let events = tx.clone();
        let mut watcher =
            notify::recommended_watcher(move |ev: notify::Result<notify::Event>| match ev {
                Ok(ev) if ev.kind.is_access() => {}
                Ok(_) => {
                    let _ = events.send(Msg::Changed);
                }
                Err(e) => tracing::warn!("plugins directory watch error: {e}"),
            })?;
        watcher.watch(&dir, RecursiveMode::NonRecursive)?;
        let mut rec = Reconciler {
            runtime: self.clone(),
            dir: dir.clone(),
            files: HashMap::new(),
        };
        let initial = rec.run();
        let thread = std::thread::Builder::new()
            .name("wazoo-plugins".into())
            .spawn(move || {
                let mut due: Option<Instant> = None;
                let mut next_rescan = Instant::now() + config.rescan;
                loop {
                    let wake = due.unwrap_or(next_rescan).min(next_rescan);
                    let timeout = wake.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(timeout) {
                        Ok(Msg::Changed) => due = Some(Instant::now() + config.debounce),
                        Ok(Msg::Rescan(done)) => {
                            rec.run();
                            due = None;
                            let _ = done.send(());
                        }
                        Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            let now = Instant::now();
                            if due.is_some_and(|d| d <= now) || next_rescan <= now {
                                rec.run();
                                due = None;
                                next_rescan = now + config.rescan;
                            }
                        }
                    }
                }
            })?;
        Ok((
            PluginWatcher {
                dir,
                tx,
                thread: Some(thread),
                _watcher: watcher,
            },
            initial,
        ))
    }
}

impl PluginWatcher {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reconciles now and waits for it to finish.
    pub fn rescan(&self) {
        let (done, wait) = mpsc::channel();
        if self.tx.send(Msg::Rescan(done)).is_ok() {
            let _ = wait.recv();
        }
    }
}

impl Drop for PluginWatcher {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
