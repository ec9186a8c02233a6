//! The interactive loop: line editing, history, completion, Ctrl-C.

use std::io::Write;
use std::sync::Mutex;

use super::{Flow, Notifier, Shell, ShellOptions};

/// The interactive loop: rustyline editing and history, background events
/// printed above the prompt.
pub(super) async fn run_interactive(server: &str, options: ShellOptions) -> anyhow::Result<i32> {
    use rustyline::error::ReadlineError;
    use rustyline::ExternalPrinter as _;

    let mut editor = rustyline::DefaultEditor::new()?;
    let history_file =
        std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".wazoo_cli_history"));
    if let Some(f) = &history_file {
        let _ = editor.load_history(f);
    }
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
                n += 1;
                let mut out = std::io::stdout();
                match shell.execute(&line, &mut out).await {
                    Ok(Flow::Continue) => {}
                    Ok(Flow::Quit) => break,
                    Err(e) => eprintln!("{}", e.message()),
                }
                let _ = out.flush();
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(f) = &history_file {
        let _ = editor.save_history(f);
    }
    shell.close().await;
    Ok(0)
}
