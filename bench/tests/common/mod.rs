//! What the bench's end-to-end tests share.

use std::path::{Path, PathBuf};

/// The wazoo server binary to run: `$WAZOO_BIN`, else this workspace's
/// target/release/wazoo, else target/debug/wazoo.
pub fn wazoo_server() -> PathBuf {
    if let Some(p) = std::env::var_os("WAZOO_BIN") {
        return PathBuf::from(p);
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    for profile in ["release", "debug"] {
        let p = target.join(profile).join("wazoo");
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "no wazoo server binary: build one (cargo build -p wazoo, or --release) or set WAZOO_BIN"
    );
}
