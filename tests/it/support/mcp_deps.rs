//! The MCP test dependencies (the official Python SDK, real MCP servers), installed under
//! `target/mcp` by `scripts/mcp-test-servers`, once per test binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `target/mcp`, installed: runs `scripts/mcp-test-servers` the first time a test asks (the
/// script is idempotent and returns at once when its stamp matches the pins). Panics with the
/// script's output when the install fails.
pub fn mcp_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = repo.join("target/mcp");
        // Run even when the stamp exists: the script compares it with the pinned versions
        // (a bash spawn, milliseconds) and reinstalls only when they changed.
        let out = Command::new(repo.join("scripts/mcp-test-servers"))
            .current_dir(repo)
            .output()
            .expect("run scripts/mcp-test-servers");
        assert!(
            out.status.success(),
            "scripts/mcp-test-servers failed ({}):\nstderr:\n{}\nstdout:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            dir.join("installed").is_file(),
            "scripts/mcp-test-servers succeeded but left no stamp in {}",
            dir.display()
        );
        dir
    })
}

/// The venv's Python, with `mcp` (the official SDK), `mcp-server-time` and `mcp-server-git`.
pub fn mcp_venv_python() -> PathBuf {
    mcp_dir().join("venv/bin/python")
}
