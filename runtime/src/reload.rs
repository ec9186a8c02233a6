//! Hot reload: keep a plugins directory and the loaded modules in step.
//!
//! `notify` events only trigger a (debounced) reconciliation of the whole
//! directory, so a missed, coalesced or reordered event cannot leave the
//! registry out of step; a periodic rescan is the safety net. Every `*.wasm`
//! file (names starting with `.` are ignored, so `cp x .x.tmp && mv .x.tmp
//! x.wasm` deploys atomically) is loaded if its bytes changed; a file that
//! fails to load leaves the previous version serving and is logged once per
//! content; a removed file unloads the module it provided.
//!
//! That is the local mode ([`Runtime::watch_dir`]). A member of wazoo uses
//! the deploying mode ([`Runtime::watch_dir_deploying`]): a new or changed
//! file becomes a [`PluginOp::Deploy`] the pipeline commits through the log,
//! a removed file a [`PluginOp::Undeploy`] of exactly the sha256 it deployed
//! (or, when another file in the directory declares the same name, a deploy
//! of that file), so every member serves the same version from the same
//! zxid. A submission is dropped while the member has no leader, so each is
//! submitted again (every [`WatchConfig::retry`], backing off) until the
//! deployed set this member serves shows it, or another version replaced it.
//! A deploy records its file as `LABEL:FILE` (the member's label,
//! `plugins@ID`), so a module whose file is gone from this member's
//! directory when the watcher starts (removed while the member was down),
//! or by the time the member learns of the deploy, is undeployed as a live
//! removal is, and another member's files are never taken for this one's.

use wazoo_core::server::PluginOp;

use super::cache::{content_hash, hex, ContentHash};
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
        let present = list_wasm(&self.dir);
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

/// Hands a [`PluginOp`] to the member's pipeline; `false` when it could
/// not be queued (it is submitted again later).
pub type Submit = Box<dyn Fn(PluginOp) -> bool + Send>;

/// What a deploying reconciler still waits to see in the deployed set.
#[derive(Debug)]
enum Want {
    /// The file's module deployed at its sha256.
    Deploy,
    /// The module `name` at `sha256` (a removed file's) undeployed.
    Undeploy { name: String, sha256: String },
}

#[derive(Debug)]
struct Pending {
    want: Want,
    attempts: u32,
    next_at: Instant,
    /// The runtime's install count when this began: an install of the
    /// wanted module after it is the deploy seen.
    since: u64,
}

/// A file as the deploying reconciler knows it.
struct DeployFile {
    hash: ContentHash,
    /// Its module's name and sha256 (hex), if it validated here.
    module: Option<(String, String)>,
    pending: Option<Pending>,
}

/// The deploying mode's reconciler (see the module docs).
struct Deployer {
    runtime: Runtime,
    dir: PathBuf,
    /// How the source of a deploy is recorded: `LABEL:FILE`.
    label: String,
    submit: Submit,
    retry: Duration,
    files: std::collections::BTreeMap<PathBuf, DeployFile>,
    /// Undeploys of removed files, until the deployed set shows them.
    removed: Vec<Pending>,
    /// The (name, sha256) of every module this directory deployed whose
    /// file was found gone (see [`Deployer::undeploy_orphans`]): each is
    /// undeployed once, as a live removal is.
    orphans: std::collections::BTreeSet<(String, String)>,
}

impl Deployer {
    fn run(&mut self) {
        self.scan(false)
    }

    /// Reconciles the directory with what was submitted. `quick` (the
    /// first scan, on the member's start path): a file is only checked
    /// for a manifest, not compiled; the leader validates what it preps
    /// anyway, and logs a refusal.
    fn scan(&mut self, quick: bool) {
        let present = list_wasm(&self.dir);
        let now = Instant::now();
        for path in &present {
            let Ok(bytes) = std::fs::read(path) else {
                continue;
            };
            let hash = content_hash(&bytes);
            if self.files.get(path).is_some_and(|f| f.hash == hash) {
                continue;
            }
            // Validated here first: a module this member refuses is
            // logged here, and never submitted.
            let checked = if quick {
                super::manifest::read_manifest(&bytes).map(|m| (m.name, hex(&hash)))
            } else {
                self.runtime
                    .validate_bytes(&bytes)
                    .map(|info| (info.name, info.hash))
            };
            let module = match checked {
                Ok((name, sha256)) => {
                    let other = self.files.iter().find(|(p, f)| {
                        *p != path && f.module.as_ref().is_some_and(|(n, _)| *n == name)
                    });
                    if let Some((other, _)) = other {
                        tracing::warn!(
                            module = %name, file = %path.display(), also = %other.display(),
                            "two files declare this recipe module; the one deployed last serves it"
                        );
                    }
                    Some((name, sha256))
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), "recipe module file refused; nothing is deployed from it: {e}");
                    None
                }
            };
            let since = self.runtime.deploy_count();
            let pending = module.as_ref().map(|_| Pending {
                want: Want::Deploy,
                attempts: 0,
                next_at: now,
                since,
            });
            self.files.insert(
                path.clone(),
                DeployFile {
                    hash,
                    module,
                    pending,
                },
            );
        }
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| !present.contains(p))
            .cloned()
            .collect();
        for path in gone {
            let Some(file) = self.files.remove(&path) else {
                continue;
            };
            let deploying = file.pending.is_some();
            let Some((name, sha256)) = file.module else {
                continue;
            };
            tracing::info!(module = %name, file = %path.display(), "recipe module file removed");
            // Only what this directory's files deployed is undeployed:
            // another member's copy, or a client, may have deployed the
            // module (this file's deploy then made no txn). The deployed
            // module records the file that deployed it; while that file
            // is still here the module stays. While this file's own deploy
            // is not seen yet, it may be the one: its sha256 decides, as
            // the leader checks it.
            let prefix = format!("{}:", self.label);
            let deployer_gone = self
                .runtime
                .deployed_from(&prefix)
                .iter()
                .any(|(n, _, src)| {
                    *n == name
                        && !self
                            .files
                            .contains_key(&self.dir.join(&src[prefix.len()..]))
                });
            if !deployer_gone && !deploying {
                tracing::info!(module = %name, file = %path.display(), "another file, member or client deployed this module: kept");
                continue;
            }
            // Another file declaring the name serves it instead (a deploy
            // of the same bytes as the module served is no txn).
            let since = self.runtime.deploy_count();
            let other = self
                .files
                .values_mut()
                .find(|f| f.module.as_ref().is_some_and(|(n, _)| *n == name));
            let want = match other {
                Some(f) => {
                    f.pending = Some(Pending {
                        want: Want::Deploy,
                        attempts: 0,
                        next_at: now,
                        since,
                    });
                    continue;
                }
                None => Want::Undeploy { name, sha256 },
            };
            if let Want::Undeploy { name, sha256 } = &want {
                self.orphans.insert((name.clone(), sha256.clone()));
            }
            self.removed.push(Pending {
                want,
                attempts: 0,
                next_at: now,
                since,
            });
        }
        self.undeploy_orphans(now);
        self.settle();
    }

    /// Modules the deployed set records as this directory's (`LABEL:FILE`)
    /// whose file is not in the directory, and whose name no file here
    /// declares: the file was removed while the member was down (or
    /// before the member learned of the deploy, from its log or the
    /// leader). Undeployed as a live removal is: only the sha256 the file
    /// deployed, and not at all when another file declares the name (that
    /// one is submitted instead, as every file is on the first scan).
    /// Another member's directory records another label, so only what this
    /// member's files deployed is touched.
    fn undeploy_orphans(&mut self, now: Instant) {
        let prefix = format!("{}:", self.label);
        for (name, sha256, source) in self.runtime.deployed_from(&prefix) {
            let path = self.dir.join(&source[prefix.len()..]);
            let declared = self
                .files
                .values()
                .any(|f| f.module.as_ref().is_some_and(|(n, _)| *n == name));
            if self.files.contains_key(&path) || declared {
                continue;
            }
            if !self.orphans.insert((name.clone(), sha256.clone())) {
                continue;
            }
            tracing::info!(
                module = %name, file = %path.display(),
                "the plugins file that deployed this recipe module is gone (removed while the member was down?): undeploying it"
            );
            self.removed.push(Pending {
                want: Want::Undeploy { name, sha256 },
                attempts: 0,
                next_at: now,
                since: self.runtime.deploy_count(),
            });
        }
    }

    /// Submits what is due and not yet seen in the deployed set.
    fn settle(&mut self) {
        let now = Instant::now();
        let paths: Vec<PathBuf> = self.files.keys().cloned().collect();
        for path in paths {
            let f = self.files.get_mut(&path).expect("listed");
            let (Some(p), Some((name, sha256))) = (f.pending.as_mut(), f.module.as_ref()) else {
                continue;
            };
            // Done once it serves, or once it was installed since (a later
            // deploy may have replaced it: the file does not fight it).
            if self.runtime.deployed_since(name, sha256, p.since) {
                f.pending = None;
                continue;
            }
            if p.next_at > now {
                continue;
            }
            if p.attempts >= SUBMISSIONS_MAX {
                tracing::warn!(
                    module = %name, file = %path.display(),
                    "recipe module file not deployed after {SUBMISSIONS_MAX} submissions (refused by the leader? its log says why); it is submitted again when it changes"
                );
                f.pending = None;
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            if content_hash(&bytes) != f.hash {
                // Changed again: the next run takes the new content.
                continue;
            }
            let file = path.file_name().unwrap_or_default().to_string_lossy();
            let op = PluginOp::Deploy {
                bytes,
                source: format!("{}:{file}", self.label),
            };
            let p = f.pending.as_mut().expect("pending");
            let queued = (self.submit)(op);
            submitted(p, &file, queued, self.retry, now);
        }
        let runtime = &self.runtime;
        self.removed.retain(|p| match &p.want {
            Want::Undeploy { name, sha256 } => {
                runtime.deployed_hash(name).as_deref() == Some(sha256.as_str())
            }
            Want::Deploy => false,
        });
        self.removed.retain(|p| {
            if p.attempts < SUBMISSIONS_MAX {
                return true;
            }
            tracing::warn!(want = ?p.want, "removed recipe module file: not undeployed after {SUBMISSIONS_MAX} submissions");
            false
        });
        for p in &mut self.removed {
            if p.next_at > now {
                continue;
            }
            let Want::Undeploy { name, sha256 } = &p.want else {
                continue;
            };
            let what = format!("the undeploy of {name}");
            let op = PluginOp::Undeploy {
                name: name.clone(),
                sha256: sha256.clone(),
            };
            let queued = (self.submit)(op);
            submitted(p, &what, queued, self.retry, now);
        }
    }

    /// When something waits for a retry.
    fn next_retry(&self) -> Option<Instant> {
        self.files
            .values()
            .filter_map(|f| f.pending.as_ref())
            .chain(&self.removed)
            .map(|p| p.next_at)
            .min()
    }
}

/// Submissions of one change at most (about a minute with the default
/// `retry`), before the watcher gives up on it until the file changes.
const SUBMISSIONS_MAX: u32 = 12;

/// A submission of `what` (a file, an undeploy) was made: the next one
/// after `retry`, doubling up to 16 times `retry`; a warning after a few
/// unanswered ones.
fn submitted(p: &mut Pending, what: &str, queued: bool, retry: Duration, now: Instant) {
    p.attempts += 1;
    let factor = 1u32 << p.attempts.saturating_sub(1).min(4);
    p.next_at = now + retry * factor;
    if p.attempts == 5 {
        tracing::warn!(
            want = ?p.want, queued,
            "a plugins directory change ({what}) is not deployed yet (no leader, or the leader is still compiling modules); still trying"
        );
    }
}

/// The `*.wasm` files of `dir` (not starting with `.`), sorted.
fn list_wasm(dir: &Path) -> Vec<PathBuf> {
    let mut present = Vec::new();
    match std::fs::read_dir(dir) {
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
            tracing::warn!(dir = %dir.display(), "cannot read the plugins directory: {e}")
        }
    }
    present.sort();
    present
}

/// How the watcher behaves.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    /// Quiet time after the last event before reconciling.
    pub debounce: Duration,
    /// Full rescan interval (a safety net for missed events).
    pub rescan: Duration,
    /// Deploying mode: how soon a submission not yet seen in the deployed
    /// set is made again (doubling up to 16 times this).
    pub retry: Duration,
}

impl Default for WatchConfig {
    fn default() -> WatchConfig {
        WatchConfig {
            debounce: Duration::from_millis(50),
            rescan: Duration::from_secs(5),
            retry: Duration::from_millis(500),
        }
    }
}

/// The reconciler a watcher runs.
enum Rec {
    Load(Reconciler),
    Deploy(Box<Deployer>),
}

impl Rec {
    fn run(&mut self) {
        match self {
            Rec::Load(r) => {
                r.run();
            }
            Rec::Deploy(d) => d.run(),
        }
    }

    fn retry(&mut self) {
        if let Rec::Deploy(d) = self {
            d.settle();
        }
    }

    fn next_retry(&self) -> Option<Instant> {
        match self {
            Rec::Load(_) => None,
            Rec::Deploy(d) => d.next_retry(),
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
        let mut rec = Reconciler {
            runtime: self.clone(),
            dir: dir.clone(),
            files: HashMap::new(),
        };
        let initial = rec.run();
        let watcher = spawn_watcher(dir, config, Rec::Load(rec))?;
        Ok((watcher, initial))
    }

    /// Watches `dir` in the deploying mode (see the module docs): what its
    /// files ask for goes to `submit`, recorded as `LABEL:FILE`. The
    /// deployed modules the pipeline installed must already be installed
    /// (a file whose module is deployed at its sha256 submits nothing).
    pub fn watch_dir_deploying(
        &self,
        dir: &Path,
        label: &str,
        submit: Submit,
        config: WatchConfig,
    ) -> anyhow::Result<PluginWatcher> {
        let dir = dir.canonicalize()?;
        let mut rec = Deployer {
            runtime: self.clone(),
            dir: dir.clone(),
            label: label.to_string(),
            submit,
            retry: config.retry,
            files: Default::default(),
            removed: Vec::new(),
            orphans: Default::default(),
        };
        // The first scan submits every file before the member serves (a
        // client's first call finds the directory's modules, or their
        // deploys ahead of it), without compiling anything here.
        rec.scan(true);
        spawn_watcher(dir, config, Rec::Deploy(Box::new(rec)))
    }
}

/// Starts watching `dir` and the thread that runs `rec` on its events,
/// every `config.rescan`, and at its retries.
fn spawn_watcher(dir: PathBuf, config: WatchConfig, mut rec: Rec) -> anyhow::Result<PluginWatcher> {
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
    let thread = std::thread::Builder::new()
        .name("wazoo-plugins".into())
        .spawn(move || {
            // Reading and hashing the files, and submitting them again
            // until they serve, is background work: the member's thread
            // comes first.
            crate::lower_thread_priority();
            let mut due: Option<Instant> = None;
            let mut next_rescan = Instant::now() + config.rescan;
            loop {
                let mut wake = due.unwrap_or(next_rescan).min(next_rescan);
                if let Some(r) = rec.next_retry() {
                    wake = wake.min(r);
                }
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
                        } else {
                            rec.retry();
                        }
                    }
                }
            }
        })?;
    Ok(PluginWatcher {
        dir,
        tx,
        thread: Some(thread),
        _watcher: watcher,
    })
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
