//! Plugin fixtures for the tests: a tempdir of manifests and `#!/bin/sh` executables.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::{self, Opts, Sidecar};

/// A plugin directory: manifests at the top, executables under `bin/`, scratch files (pid
/// files, markers) under `scratch/`. Everything a script writes uses absolute paths because the
/// plugin's cwd is the workspace, not this directory.
pub struct Plugins {
    dir: tempfile::TempDir,
}

impl Plugins {
    pub fn new() -> Plugins {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("bin")).unwrap();
        fs::create_dir(dir.path().join("scratch")).unwrap();
        Plugins { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Absolute path of a scratch file, for scripts to write to and tests to read.
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.path().join("scratch").join(name)
    }

    /// Writes `bin/<name>` as an executable `#!/bin/sh` script (atomically, so a rewrite never
    /// races a running call).
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        let p = self.path().join("bin").join(name);
        atomic_write(&p, &format!("#!/bin/sh\n{body}\n"), 0o755);
        p
    }

    /// Writes a manifest file at the top of the plugin dir (atomically).
    pub fn manifest(&self, file: &str, text: &str) -> PathBuf {
        let p = self.path().join(file);
        atomic_write(&p, text, 0o644);
        p
    }

    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "OUTRIGGER_PLUGIN_DIR".into(),
                self.path().display().to_string(),
            ),
            // Plugins run sandboxed; their scratch files live outside the workspace.
            (
                "OUTRIGGER_SANDBOX_WRITABLE_ROOTS".into(),
                self.path().display().to_string(),
            ),
        ]
    }

    pub fn start(&self) -> Sidecar {
        Sidecar::start_with(Opts {
            env: self.env(),
            ..Default::default()
        })
    }

    /// Boots the binary expecting a boot failure; returns stderr.
    pub fn boot_failure(&self) -> String {
        let home = tempfile::tempdir().unwrap();
        boot_failure_with(
            home.path(),
            &[("OUTRIGGER_PLUGIN_DIR", &self.path().display().to_string())],
        )
    }
}

pub fn boot_failure_with(home: &Path, env: &[(&str, &str)]) -> String {
    let (status, out, err) = common::run_once(home, &[], env, b"");
    assert_eq!(status.code(), Some(2), "stdout {out:?} stderr {err:?}");
    assert!(out.is_empty(), "nothing on stdout when boot fails: {out:?}");
    assert!(
        !err.contains("__SIDECAR_READY__"),
        "no ready marker when boot fails: {err}"
    );
    err
}

pub fn atomic_write(p: &Path, text: &str, mode: u32) {
    let tmp = p.with_file_name(format!(".{}.tmp", p.file_name().unwrap().to_string_lossy()));
    fs::write(&tmp, text).unwrap();
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode)).unwrap();
    fs::rename(&tmp, p).unwrap();
}

/// One `[[tools]]` table. `extra` is appended verbatim (mode, exposure, parameters, …); when it
/// sets no `mode`, `mode = "read"` is added so no test depends on name-based inference.
pub fn tool(name: &str, description: &str, exec: &str, timeout: &str, extra: &str) -> String {
    let mode = if extra.contains("mode =") {
        ""
    } else {
        "mode = \"read\"\n"
    };
    format!(
        "[[tools]]\nname = \"{name}\"\ndescription = \"{description}\"\nexec = \"bin/{exec}\"\ntimeout = \"{timeout}\"\n{mode}{extra}\n"
    )
}
