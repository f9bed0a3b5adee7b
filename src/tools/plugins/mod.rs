//! Executable plugins: tools declared by TOML manifests and run as child processes.
//!
//! A Rust binary cannot import Python plugins, so a plugin is an executable plus a manifest
//! (`manifest`) and every call runs it once under the stdin/stdout JSON contract (`exec`).
//! The tool router registers the loaded specs; this module only provides the pieces.
//! See `docs/plugins.md` for the manifest format and the call contract.

pub mod exec;
pub mod manifest;
pub mod registry;

use std::path::PathBuf;

pub use exec::{ExecOutcome, run_tool};
pub use manifest::{PluginManifest, PluginToolSpec, load_dir, load_file};
pub use registry::{PluginOpError, PluginRegistry, PluginRow};

/// A plugin directory or manifest that cannot be loaded. Every message names the file (or
/// directory), the offending field where there is one, and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error(
        "plugin directory {} does not exist; create it or point the plugin directory setting at an existing one",
        dir.display()
    )]
    MissingDir { dir: PathBuf },
    #[error("plugin directory {}: {msg}", dir.display())]
    Dir { dir: PathBuf, msg: String },
    #[error("plugin manifest {}: {msg}", path.display())]
    Read { path: PathBuf, msg: String },
    #[error("plugin manifest {}: {msg}", path.display())]
    Parse { path: PathBuf, msg: String },
    #[error("plugin manifest {}: {field}: {msg}", path.display())]
    Invalid {
        path: PathBuf,
        field: String,
        msg: String,
    },
    #[error(
        "plugin manifest {}: name: plugin `{name}` is already declared by {}; set a different `name` in one of them",
        path.display(),
        first.display()
    )]
    DuplicatePlugin {
        name: String,
        path: PathBuf,
        first: PathBuf,
    },
}
