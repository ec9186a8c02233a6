//! docs/RECIPES.md, "2. Scaffold": `scripts/new-recipe.sh --out DIR NAME`
//! makes a standalone recipe project outside wazoo's repository, which
//! builds to a module on its own (offline here, from the registry cache
//! wazoo's own build filled) and runs under `wazoo recipe run`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the scaffolded project's first release build may take (it
/// compiles serde and the SDK for wasm32 with LTO on a busy machine).
const BUILD_BOUND: Duration = Duration::from_secs(900);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Runs `cmd` for at most `bound`; (success, stdout and stderr).
fn run_bounded(cmd: &mut Command, bound: Duration) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let file = std::fs::File::create(&log).unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = std::fs::read_to_string(&log).unwrap_or_default();
    match status {
        Some(s) => (s.success(), out),
        None => (false, format!("{out}\n(killed after {bound:?})")),
    }
}

#[test]
fn a_recipe_scaffolded_outside_the_repository_builds_to_wasm_and_runs() {
    if wazoo::builtin::BUILTIN_RECIPES.is_empty() {
        eprintln!("skipped: this build has no built-in recipes (wasm target missing)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    assert!(!tmp.path().starts_with(repo()), "outside the repository");
    let (ok, out) = run_bounded(
        Command::new("bash")
            .arg(repo().join("scripts/new-recipe.sh"))
            .arg("--out")
            .arg(tmp.path())
            .arg("greeter"),
        Duration::from_secs(60),
    );
    assert!(ok, "{out}");
    let project = tmp.path().join("greeter");
    for f in [
        "Cargo.toml",
        "src/lib.rs",
        ".cargo/config.toml",
        "README.md",
    ] {
        assert!(project.join(f).is_file(), "{f} missing");
    }
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    let sdk = repo().join("sdk");
    assert!(
        manifest.contains(&format!("wazoo-sdk = {{ path = \"{}\" }}", sdk.display())),
        "{manifest}"
    );
    assert!(manifest.contains("not on crates.io"), "{manifest}");
    // In the project, as its README says: `cargo wasm`, its .cargo alias
    // (so its link flags apply); nothing of the outer build leaks in.
    let (ok, out) = run_bounded(
        Command::new(env!("CARGO"))
            .current_dir(&project)
            .args(["wasm", "--offline", "--quiet"])
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_BUILD_TARGET")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS"),
        BUILD_BOUND,
    );
    assert!(ok, "cargo wasm failed:\n{out}");
    let module = project.join("target/wasm32-unknown-unknown/release/greeter.wasm");
    assert!(module.is_file(), "{out}");
    let run = Command::new(env!("CARGO_BIN_EXE_wazoo"))
        .args(["recipe", "run"])
        .arg(&module)
        .args(["hello", r#"{"who":"ada"}"#, "--now-ms", "5"])
        .env("WAZOO_LOG", "error")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(text.starts_with("module greeter 0.1.0 "), "{text}");
    assert!(text.contains("reply: done 1\n"), "{text}");
    assert!(
        text.contains("create /greeter/hello-0000000000 \"ada\""),
        "{text}"
    );
}

#[test]
fn the_scaffold_takes_the_sdk_from_git_when_asked_and_refuses_a_bad_sdk_path() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(repo().join("scripts/new-recipe.sh"))
        .args(["--out"])
        .arg(tmp.path())
        .args([
            "viagit",
            "--sdk-git",
            "https://example.org/wazoo.git",
            "--sdk-rev",
            "abc123",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = std::fs::read_to_string(tmp.path().join("viagit/Cargo.toml")).unwrap();
    assert!(
        manifest
            .contains(r#"wazoo-sdk = { git = "https://example.org/wazoo.git", rev = "abc123" }"#),
        "{manifest}"
    );
    let out = Command::new("bash")
        .arg(repo().join("scripts/new-recipe.sh"))
        .args(["--out"])
        .arg(tmp.path())
        .args(["nosdk", "--sdk-path"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no wazoo-sdk crate"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!tmp.path().join("nosdk").exists());
}
