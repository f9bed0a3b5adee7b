//! Confinement built ahead of the command. When the last two sandboxed commands had the same
//! policy, the next warm spare is told it too: it enters the namespaces (the slow `unshare`
//! of a user, mount, network and PID namespace and the mounts that protect and hide paths),
//! forks the namespace's init, and init mounts its `/proc` and builds the Landlock ruleset,
//! all before any command waits. The command's order then only adds its private temp dir,
//! enforces, and forks.
//!
//! Nothing built ahead is trusted blindly. The order's policy must equal the one prepared
//! for (the sidecar checks before sending it, init again). What the mounts were built from
//! (each protected, hidden, revealed path and writable root: what it resolves to, as seen in
//! the namespace) must be unchanged, or init refuses and the command starts cold. The
//! ruleset is rebuilt when a directory its walk listed changed since (a command created a
//! file beside a hidden one), so the rules always say what a walk at the command's start
//! would.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use super::landlock_layer::Built;
use super::launcher::{self, ERROR_PREFIX, LAUNCH_FAILED};
use super::policy::LaunchSpec;
use super::seccomp_layer;

/// Whether a spare prepared for `a` may run a command launched with `b`.
pub fn same_policy(a: &LaunchSpec, b: &LaunchSpec) -> bool {
    a.policy == b.policy && a.layers == b.layers
}

/// Whether `spec` can be prepared ahead: a PID-namespace launch (the init that waits for
/// the order is pid 1 of that namespace).
pub fn preparable(spec: &LaunchSpec) -> bool {
    spec.layers.namespaces && spec.layers.pid_namespace
}

/// What a path resolved to inside the namespace when the mounts were made.
#[derive(PartialEq, Debug)]
struct Resolved {
    path: PathBuf,
    id: Option<(u64, u64, bool)>,
}

fn resolve(path: &Path) -> Resolved {
    use std::os::unix::fs::MetadataExt;
    Resolved {
        path: path.to_path_buf(),
        id: std::fs::metadata(path)
            .ok()
            .map(|m| (m.dev(), m.ino(), m.is_dir())),
    }
}

/// The paths the mounts and rules were built from.
fn resolved(spec: &LaunchSpec) -> Vec<Resolved> {
    let p = &spec.policy;
    p.protected_paths
        .iter()
        .chain(&p.hidden_paths)
        .chain(&p.revealed_paths)
        .chain(&p.writable_roots)
        .map(|x| resolve(x))
        .collect()
}

/// Init's prepared state: the spec, the paths as they resolved, the unenforced ruleset.
pub(super) struct Ahead {
    spec: LaunchSpec,
    resolved: Vec<Resolved>,
    built: Option<Built>,
}

impl Ahead {
    /// In init, after [`launcher::init_start`]: records the paths and builds the ruleset.
    pub fn prepare(spec: LaunchSpec) -> Result<Ahead, String> {
        let built = if spec.layers.landlock {
            Some(Built::new(&spec.policy)?)
        } else {
            None
        };
        Ok(Ahead {
            resolved: resolved(&spec),
            spec,
            built,
        })
    }

    /// Whether a command launched with `spec` can run on what was prepared: the same
    /// policy, and every path the mounts were made from still resolves to the same thing.
    pub fn serves(&self, spec: &LaunchSpec) -> bool {
        same_policy(spec, &self.spec) && resolved(spec) == self.resolved
    }

    /// Enforces and starts the command (`spec` is the order's: its temp dir and process
    /// limit); returns the command's status, as [`launcher::init_run`].
    pub fn finish(self, spec: &LaunchSpec, args: &[CString]) -> i32 {
        match self.enforce(spec) {
            Ok(()) => launcher::init_run(args),
            Err(msg) => {
                eprintln!("{ERROR_PREFIX} {msg}");
                LAUNCH_FAILED
            }
        }
    }

    fn enforce(self, spec: &LaunchSpec) -> Result<(), String> {
        launcher::limit_processes(spec.max_processes)?;
        if let Some(mut built) = self.built {
            if !built.fresh(&spec.policy) {
                built = Built::new(&spec.policy)?;
            }
            if let Some(t) = &spec.tmp_dir {
                built.add_root(t)?;
            }
            built.restrict()?;
        }
        if spec.layers.seccomp {
            seccomp_layer::apply(spec.policy.network)?;
        }
        Ok(())
    }
}
