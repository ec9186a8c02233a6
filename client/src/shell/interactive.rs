//! The interactive loop: line editing, history, completion, Ctrl-C.

use std::io::Write;
use std::sync::Mutex;

use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};

use super::{complete, Flow, Notifier, Outcome, Shell, ShellOptions};
use crate::client::Client;

/// The editor's helper: completes commands and paths. It runs on the
/// blocking thread that reads the line, and reaches the server through
/// the runtime's handle, for at most [`complete::LOOKUP_WAIT`].
struct ShellHelper {
    runtime: tokio::runtime::Handle,
    /// The current session's client (updated before each prompt).
    client: Option<Client>,
}

impl Completer for ShellHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let (start, found) =
            self.runtime
                .block_on(complete::complete(self.client.as_ref(), line, pos));
        let pairs = found
            .into_iter()
            .map(|c| Pair {
                display: c.clone(),
                replacement: c,
            })
            .collect();
        Ok((start, pairs))
    }
}

impl Hinter for ShellHelper {
    type Hint = String;
}

impl Highlighter for ShellHelper {}

impl Validator for ShellHelper {}

impl Helper for ShellHelper {}

/// The interactive loop: rustyline editing with completion; history kept
/// in `~/.wazoo_cli_history` and appended after every command (a shell
/// that is killed keeps what was typed); background events printed above
/// the prompt; Ctrl-C while a command runs stops that command, not the
/// shell (at the prompt it clears the line, as in zkCli).
pub(super) async fn run_interactive(server: &str, options: ShellOptions) -> anyhow::Result<i32> {
    use rustyline::error::ReadlineError;
    use rustyline::ExternalPrinter as _;

    let mut editor: Editor<ShellHelper, DefaultHistory> = Editor::new()?;
    editor.set_helper(Some(ShellHelper {
        runtime: tokio::runtime::Handle::current(),
        client: None,
    }));
    let history_file =
        std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".wazoo_cli_history"));
    if let Some(f) = &history_file {
        let _ = editor.load_history(f);
    }
    // Installed once for the whole session: from here on SIGINT no longer
    // ends the process; while a command runs it stops that command.
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let notifier = match editor.create_external_printer() {
        Ok(printer) => {
            let printer = Mutex::new(printer);
            Notifier::new(move |msg| {
                let mut p = printer.lock().unwrap_or_else(|e| e.into_inner());
                if p.print(msg.clone()).is_err() {
                    println!("{msg}");
                }
            })
        }
        Err(_) => Notifier::new(|msg| println!("{msg}")),
    };
    println!("Connecting to {server}");
    let mut shell = Shell::new(server, options, notifier);
    if let Err(e) = shell.connect(server).await {
        eprintln!("{e}");
    } else {
        println!("\nWATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null");
    }
    let mut n = 0usize;
    loop {
        if let Some(h) = editor.helper_mut() {
            h.client = shell.client().cloned();
        }
        let prompt = format!("[wazoo: {}({}) {n}] ", shell.server, shell.state_name());
        let (ed, line) = tokio::task::spawn_blocking(move || {
            let line = editor.readline(&prompt);
            (editor, line)
        })
        .await?;
        editor = ed;
        match line {
            Ok(line) => {
                if line.trim().is_empty() {
                    continue;
                }
                let _ = editor.add_history_entry(line.as_str());
                if let Some(f) = &history_file {
                    let _ = editor.append_history(f);
                }
                n += 1;
                // A Ctrl-C typed at the prompt was a key, not a signal; one
                // that came while nothing ran must not stop this command.
                drain(&mut sigint).await;
                let mut out = std::io::stdout();
                let interrupted = async {
                    sigint.recv().await;
                };
                match shell.execute_until(&line, &mut out, interrupted).await {
                    Outcome::Done(Ok(Flow::Continue)) => {}
                    Outcome::Done(Ok(Flow::Quit)) => break,
                    Outcome::Done(Err(e)) => eprintln!("{}", e.message()),
                    Outcome::Interrupted => eprintln!("^C (interrupted)"),
                }
                let _ = out.flush();
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    shell.close().await;
    Ok(0)
}

/// Forgets a SIGINT that arrived while no command ran.
async fn drain(sigint: &mut tokio::signal::unix::Signal) {
    tokio::select! {
        biased;
        _ = sigint.recv() => {}
        _ = std::future::ready(()) => {}
    }
}
