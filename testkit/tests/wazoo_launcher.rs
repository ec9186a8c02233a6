//! How the harness reports a wazoo binary that is missing or broken. (The
//! real server is exercised by the host crate's and the Python tests.)

use std::os::unix::fs::PermissionsExt;

use wazoo_testkit::{ServerOptions, WazooServer};

#[test]
fn missing_wazoo_binary_is_a_clear_error() {
    let err = WazooServer::start(ServerOptions::default().binary("/nonexistent/wazoo"))
        .err()
        .expect("starting a nonexistent binary must fail")
        .to_string();
    assert!(err.contains("/nonexistent/wazoo"), "{err}");
}

#[test]
fn wazoo_that_exits_at_startup_is_reported_with_its_log() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let fake = dir.path().join("wazoo");
    std::fs::write(&fake, "#!/bin/sh\necho \"fake wazoo got: $*\"\nexit 3\n")?;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755))?;

    let err = WazooServer::start(ServerOptions::default().binary(&fake))
        .err()
        .expect("a binary that exits must fail to start")
        .to_string();
    assert!(err.contains("exited"), "{err}");
    assert!(err.contains("fake wazoo got: serve --config"), "{err}");
    assert!(err.contains("zoo.cfg"), "{err}");
    Ok(())
}
