//! The per-exec sandbox: the policy (`policy`), the launcher subcommand that applies it
//! (`launcher` with its `namespaces`, `landlock_layer` and `seccomp_layer`), the one spawn
//! helper every child goes through (`spawn`) with its private temp dirs (`private_tmp`), the
//! bounded reading of its output (`capture`),
//! and this service: what the host can enforce (probed once per process), the
//! `{backend, enforcement}` marker each result carries, and the resolution of a call's
//! request against the config into a launch spec.

mod ahead;
pub mod capture;
pub mod cgroup;
pub mod gitconfig;
pub mod landlock_layer;
pub mod launcher;
pub mod namespaces;
pub mod policy;
pub mod private_tmp;
pub mod protect;
pub mod pty;
pub mod seccomp_layer;
pub mod secrets;
pub mod spare;
pub mod spawn;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::config::{Config, Source};
pub use launcher::ProbeReport;
pub use policy::{LaunchSpec, Layers, Policy};

/// How long the one-off capability probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call's sandbox request cannot be met; the message names the field and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SandboxError {
    /// The request would loosen what the managed config pins.
    #[error("{asked} is refused: the managed config pins {key}")]
    Pinned {
        asked: &'static str,
        key: &'static str,
    },
    #[error("execSandbox.writableRoots entries must be absolute paths, got {}", .0.display())]
    RelativeRoot(PathBuf),
    #[error(
        "execSandbox.requireFull: this call would run with enforcement '{enforcement}' (backend '{backend}'); missing: {missing}"
    )]
    NotFull {
        enforcement: String,
        backend: String,
        missing: String,
    },
    #[error(
        "execSandbox.requireBackend: '{want}' is not available; this host's backend is '{backend}'{missing}"
    )]
    BackendUnavailable {
        want: String,
        backend: String,
        missing: String,
    },
}

/// The `data._sandbox` marker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    /// `landlock` or `none`.
    pub backend: String,
    /// `full`, `partial` or `none`.
    pub enforcement: String,
}

/// A call's sandbox request (`tool.invoke` `context.execSandbox`, the turn's
/// `execSandbox`). Also a wire type (`protocol::tools` re-exports it).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecSandboxRequest {
    /// Network on or off (default: the config's `sandbox_network`).
    pub network: Option<bool>,
    /// Reported only: hosts are not enforced one by one.
    pub allowed_hosts: Option<Vec<String>>,
    /// Absolute directories writable besides the workspace.
    pub writable_roots: Option<Vec<PathBuf>>,
    /// Refuse to run unless enforcement is `full`.
    #[serde(default)]
    pub require_full: bool,
    /// Refuse to run unless this backend (`landlock`) applies.
    pub require_backend: Option<String>,
    /// Accepted for parity with the reference; the Linux backend does not depend on it.
    pub shell: Option<Value>,
    /// `bash` asks the host to run the command (reverse `host.process.spawn`) under the
    /// host's own confinement instead of spawning it here.
    #[serde(default)]
    pub host_spawn: bool,
}

/// The marker for a posture, plus what keeps it from `full` and the layers to apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    pub marker: Marker,
    pub missing: Vec<String>,
    pub layers: Layers,
}

/// Derives the marker from what the host can do. Enforcement depends on egress only, so the
/// answer is exact before any path exists.
pub fn assess(caps: &ProbeReport, enabled: bool, network: bool) -> Assessment {
    let none = |why: String| Assessment {
        marker: Marker {
            backend: "none".into(),
            enforcement: "none".into(),
        },
        missing: vec![why],
        layers: Layers::default(),
    };
    if !enabled {
        return none("the sandbox is disabled (sandbox_enabled = false)".into());
    }
    if caps.landlock_abi < 1 {
        return none("landlock is unavailable on this host".into());
    }
    let mut missing = Vec::new();
    if network {
        missing.push("the network is on (hosts are not restricted)".to_string());
    }
    if !caps.seccomp {
        missing.push("seccomp is unavailable (sockets, including unix sockets, stay open)".into());
    }
    if !caps.namespaces {
        missing.push(
            "user namespaces are unavailable (existing protected paths such as .vscode stay writable; .git is only cleaned after each command; hidden directories can be listed)".into(),
        );
    }
    if caps.landlock_abi < 6 {
        missing.push(format!(
            "landlock ABI {} lacks the signal and abstract-socket scopes (needs 6)",
            caps.landlock_abi
        ));
    }
    Assessment {
        marker: Marker {
            backend: "landlock".into(),
            enforcement: if missing.is_empty() {
                "full"
            } else {
                "partial"
            }
            .into(),
        },
        missing,
        layers: Layers {
            namespaces: caps.namespaces,
            pid_namespace: caps.namespaces && caps.pid_namespace,
            net_namespace: caps.namespaces,
            landlock: true,
            seccomp: caps.seccomp,
        },
    }
}

/// What one call runs with.
pub struct Prepared {
    pub marker: Marker,
    /// `None` when the sandbox is disabled: the command runs directly (own group, death
    /// signal, no restrictions).
    pub launch: Option<LaunchSpec>,
    /// The command's own pids cgroup (`sandbox_max_processes`), when cgroups are usable; the
    /// spawned process joins it (see `spawn`), and dropping it kills what is left in it.
    pub cgroup: Option<cgroup::CommandCgroup>,
    /// Looks after the workspace's protected names once the command is gone (see
    /// [`protect`]): finish it after the command's processes are dead (dropping it does the
    /// same, logging what it removed).
    pub guard: Option<protect::Guard>,
    /// `SpawnSpec::warm`: how many warm spares wait and how long (`sandbox_warm_spares`,
    /// `sandbox_warm_idle_ms`), or `None` to start cold.
    pub warm: Option<spare::Warm>,
}

impl Prepared {
    /// Lets the command read `paths` (read-only) although they lie inside hidden paths: this
    /// session's spill files, a plugin's own directory. Paths that do not exist are skipped.
    pub fn reveal(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        let Some(launch) = &mut self.launch else {
            return;
        };
        for p in paths {
            if let Ok(c) = p.canonicalize()
                && !launch.policy.revealed_paths.contains(&c)
            {
                launch.policy.revealed_paths.push(c);
            }
        }
    }
}

/// How `sandbox_max_processes` is enforced (the `processLimit` of `sandbox.describe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessLimit {
    pub mechanism: cgroup::Mechanism,
    pub max: u32,
}

/// The pids cgroup found once per process, or why there is none.
type CgroupBase = Result<cgroup::Base, Vec<String>>;

/// The process-wide sandbox service.
pub struct Sandbox {
    launcher: Option<PathBuf>,
    hidden: Vec<PathBuf>,
    live: Option<crate::config::SharedConfig>,
    caps: OnceCell<ProbeReport>,
    cgroup: OnceCell<CgroupBase>,
    /// A command cgroup made ahead, off a caller's time (see [`Sandbox::command_cgroup`]).
    next_cgroup: Arc<std::sync::Mutex<Option<cgroup::CommandCgroup>>>,
}

static GLOBAL: OnceLock<Arc<Sandbox>> = OnceLock::new();

/// Installs the service (once, at boot). Later calls are ignored.
pub fn install(s: Sandbox) -> Arc<Sandbox> {
    let s = Arc::new(s);
    let _ = GLOBAL.set(s.clone());
    GLOBAL.get().cloned().unwrap_or(s)
}

/// The installed service, if boot installed one (unit tests run without it).
pub fn global() -> Option<Arc<Sandbox>> {
    GLOBAL.get().cloned()
}

impl Sandbox {
    /// `launcher`: our own executable; `hidden`: credential paths the composition root names
    /// (always unreadable); `live`: the live config (its settings are built once per change).
    pub fn new(
        launcher: Option<PathBuf>,
        hidden: Vec<PathBuf>,
        live: Option<crate::config::SharedConfig>,
    ) -> Sandbox {
        Sandbox {
            launcher,
            hidden,
            live,
            caps: OnceCell::new(),
            cgroup: OnceCell::new(),
            next_cgroup: Arc::default(),
        }
    }

    pub fn launcher(&self) -> Option<&Path> {
        self.launcher.as_deref()
    }

    /// What the host can enforce, probed once (in a launcher child: namespaces can only be
    /// tried in a single-threaded process). Each unavailable layer is logged here, once.
    pub async fn caps(&self) -> &ProbeReport {
        self.caps
            .get_or_init(|| async {
                let report = probe(self.launcher.as_deref()).await;
                for e in &report.errors {
                    tracing::warn!("sandbox layer unavailable, enforcement is lowered: {e}");
                }
                report
            })
            .await
    }

    /// The live settings (shared, built once per config change).
    fn live_settings(&self) -> Option<Arc<crate::config::Settings>> {
        self.live
            .as_ref()
            .map(crate::config::SharedConfig::settings)
    }

    /// Whether the live config's `key` comes from the managed layer (a host cannot loosen it).
    fn pinned(&self, key: &str) -> bool {
        self.live.as_ref().is_some_and(|l| {
            l.with(|c| {
                c.merged()
                    .get(key)
                    .is_some_and(|r| r.source == Source::Managed)
            })
        })
    }

    /// The pids cgroup commands' cgroups are created under, found once (and logged once).
    async fn cgroup_base(&self) -> Option<&cgroup::Base> {
        self.cgroup
            .get_or_init(|| async {
                let launcher = self.launcher.clone();
                let found = tokio::task::spawn_blocking(move || detect_cgroup(launcher))
                    .await
                    .unwrap_or_else(|e| Err(vec![format!("cgroup: detection failed: {e}")]));
                match &found {
                    Ok(b) => tracing::info!(
                        "process limits: {} under {}",
                        b.mechanism().as_str(),
                        b.dir().display()
                    ),
                    Err(errors) => {
                        for e in errors {
                            tracing::info!("process limits: no cgroup: {e}");
                        }
                    }
                }
                found
            })
            .await
            .as_ref()
            .ok()
    }

    /// How `sandbox_max_processes` holds for a command run now: a per-command cgroup where
    /// one is usable, else `RLIMIT_NPROC` in the launcher's user namespace (when the sandbox
    /// runs commands through it and the limit binds this uid), else nothing.
    pub async fn process_limit(&self) -> ProcessLimit {
        let settings = self.live_settings();
        let max = settings.as_ref().map_or(256, |s| s.sandbox_max_processes);
        let enabled = settings.as_ref().is_none_or(|s| s.sandbox_enabled);
        let mechanism = match self.cgroup_base().await {
            Some(b) => b.mechanism(),
            None if enabled
                && self.launcher.is_some()
                && self.caps().await.namespaces
                && cgroup::rlimit_binds() =>
            {
                cgroup::Mechanism::Rlimit
            }
            None => cgroup::Mechanism::None,
        };
        ProcessLimit { mechanism, max }
    }

    /// A fresh cgroup for one command, when cgroups are the mechanism. A failure is logged
    /// and the command runs with the fallback (the rlimit, when it applies).
    ///
    /// `mkdir` in the pids hierarchy takes a millisecond or more, so the one made ahead is
    /// handed out and the next is made on the blocking pool, after the caller's command has
    /// its own.
    async fn command_cgroup(&self, max: u32) -> Option<cgroup::CommandCgroup> {
        let base = self.cgroup_base().await?;
        let ahead = self
            .next_cgroup
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let made = match ahead {
            Some(mut c) => {
                if c.max() == max || c.set_max(max).is_ok() {
                    Ok(c)
                } else {
                    base.create(max)
                }
            }
            None => base.create(max),
        };
        let slot = self.next_cgroup.clone();
        let next_base = base.clone();
        tokio::task::spawn_blocking(move || {
            if let Ok(c) = next_base.create(max) {
                let mut g = slot.lock().unwrap_or_else(|e| e.into_inner());
                if g.is_none() {
                    *g = Some(c);
                }
            }
        });
        match made {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(
                    "cannot create a command cgroup under {}: {e}",
                    base.dir().display()
                );
                None
            }
        }
    }

    /// The live settings, or the built-in defaults when no config is attached.
    pub fn settings(&self) -> Option<Arc<crate::config::Settings>> {
        self.live_settings().or_else(|| {
            Config::load(&crate::config::Inputs::default())
                .ok()
                .map(|c| Arc::new(c.settings()))
        })
    }

    /// `sandbox.describe`: the marker a call with this egress would carry.
    pub async fn describe(&self, network: Option<bool>) -> Assessment {
        let settings = self.live_settings();
        let enabled = settings.as_ref().is_none_or(|s| s.sandbox_enabled);
        let network =
            network.unwrap_or_else(|| settings.as_ref().is_some_and(|s| s.sandbox_network));
        assess(self.caps().await, enabled, network)
    }

    /// Resolves a call's request against the config into what to run; an unmet
    /// `requireFull` / `requireBackend` or an attempt to loosen a managed pin is an error.
    pub async fn prepare(
        &self,
        workspace: &Path,
        req: Option<&ExecSandboxRequest>,
        tmp_dir: Option<&Path>,
        pid_namespace: bool,
    ) -> Result<Prepared, SandboxError> {
        let settings = self.live_settings();
        // Merging the layers is only needed when the call asks to loosen something.
        let pinned = |key: &str| self.pinned(key);
        let default_req = ExecSandboxRequest::default();
        let req = req.unwrap_or(&default_req);
        let cfg_network = settings.as_ref().is_some_and(|s| s.sandbox_network);
        let network = match req.network {
            Some(true) if !cfg_network && pinned("sandbox_network") => {
                return Err(SandboxError::Pinned {
                    asked: "execSandbox.network: true",
                    key: "sandbox_network = false",
                });
            }
            Some(n) => n,
            None => cfg_network,
        };
        let mut roots = settings
            .as_ref()
            .map(|s| s.sandbox_writable_roots.clone())
            .unwrap_or_default();
        if let Some(extra) = &req.writable_roots {
            if !extra.is_empty() && pinned("sandbox_writable_roots") {
                return Err(SandboxError::Pinned {
                    asked: "execSandbox.writableRoots",
                    key: "sandbox_writable_roots",
                });
            }
            if let Some(rel) = extra.iter().find(|p| !p.is_absolute()) {
                return Err(SandboxError::RelativeRoot(rel.clone()));
            }
            roots.extend(extra.iter().cloned());
        }
        let enabled = settings.as_ref().is_none_or(|s| s.sandbox_enabled);
        let a = assess(self.caps().await, enabled, network);
        if req.require_full && a.marker.enforcement != "full" {
            return Err(SandboxError::NotFull {
                enforcement: a.marker.enforcement,
                backend: a.marker.backend,
                missing: a.missing.join("; "),
            });
        }
        if let Some(want) = &req.require_backend
            && want != &a.marker.backend
        {
            return Err(SandboxError::BackendUnavailable {
                want: want.clone(),
                backend: a.marker.backend,
                missing: if a.missing.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", a.missing.join("; "))
                },
            });
        }
        let limit = self.process_limit().await;
        let cgroup = match limit.mechanism {
            cgroup::Mechanism::CgroupV1 | cgroup::Mechanism::CgroupV2 => {
                self.command_cgroup(limit.max).await
            }
            _ => None,
        };
        let (idle, spares) = settings.as_ref().map_or((300_000, 2), |s| {
            (s.sandbox_warm_idle_ms, s.sandbox_warm_spares)
        });
        let warm = (idle > 0 && spares > 0 && self.launcher.is_some()).then(|| spare::Warm {
            idle: std::time::Duration::from_millis(idle),
            spares,
        });
        if !enabled || self.launcher.is_none() {
            return Ok(Prepared {
                marker: a.marker,
                launch: None,
                cgroup,
                guard: None,
                warm,
            });
        }
        let hidden = self.hidden_paths(workspace, settings.as_deref());
        let policy = Policy::for_workspace(
            workspace,
            &roots,
            network,
            req.allowed_hosts.clone().unwrap_or_default(),
            hidden,
        );
        let mut layers = a.layers;
        layers.pid_namespace &= pid_namespace;
        let max_walk = settings.as_deref().map_or(500_000, |s| s.max_walk_entries);
        let guard = protect::Guard::before_async(workspace, layers.namespaces, max_walk).await;
        // Without a cgroup, the launcher limits the command in its user namespace.
        let max_processes =
            (cgroup.is_none() && layers.namespaces && cgroup::rlimit_binds()).then_some(limit.max);
        Ok(Prepared {
            marker: a.marker,
            launch: Some(LaunchSpec {
                policy,
                layers,
                tmp_dir: tmp_dir.map(Path::to_path_buf),
                parent: std::process::id() as i32,
                max_processes,
            }),
            cgroup,
            guard,
            warm,
        })
    }
}

impl Sandbox {
    /// What a command in `workspace` must not read: the credential paths the composition
    /// root names, `blocked_paths` (which holds the built-in credential list), the whole
    /// `$OUTRIGGER_HOME` and the store's files wherever `storage_path` puts them. A hidden
    /// directory holding the workspace is narrowed to the entries around it.
    fn hidden_paths(
        &self,
        workspace: &Path,
        settings: Option<&crate::config::Settings>,
    ) -> Vec<PathBuf> {
        let mut hidden = self.hidden.clone();
        if let Some(h) = self.home() {
            hidden.push(h);
        }
        if let Some(s) = settings {
            hidden.extend(s.blocked_paths.iter().cloned());
            let db = s.storage_path.as_os_str();
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut p = db.to_os_string();
                p.push(suffix);
                hidden.push(PathBuf::from(p));
            }
        }
        secrets::hidden_for(workspace, &hidden)
    }

    /// `$OUTRIGGER_HOME`, when a config is attached.
    pub fn home(&self) -> Option<PathBuf> {
        self.live
            .as_ref()
            .map(|l| l.with(|c| c.home().to_path_buf()))
    }
}

/// Finds the pids cgroup; the join is tried with a launcher process that exits at once.
fn detect_cgroup(launcher: Option<PathBuf>) -> CgroupBase {
    let join = |procs: &std::ffi::CStr| -> std::io::Result<()> {
        use std::os::unix::process::CommandExt;
        let Some(exe) = &launcher else {
            return Ok(());
        };
        let procs = procs.to_owned();
        let mut cmd = std::process::Command::new(exe);
        // No spec: the launcher refuses and exits 125 without doing anything.
        cmd.arg(launcher::SUBCOMMAND)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: the hook only makes async-signal-safe calls (open, write, close).
        unsafe {
            cmd.pre_exec(move || cgroup::join_in_child(&procs));
        }
        cmd.status().map(|_| ())
    };
    cgroup::detect(Some(&join))
}

async fn probe(launcher: Option<&Path>) -> ProbeReport {
    let unavailable = |why: String| ProbeReport {
        errors: vec![why],
        ..Default::default()
    };
    let Some(exe) = launcher else {
        return unavailable("the sandbox launcher is not available in this process".into());
    };
    let run = tokio::process::Command::new(exe)
        .args([launcher::SUBCOMMAND, "--probe"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(PROBE_TIMEOUT, run).await {
        Ok(Ok(out)) if out.status.success() => {
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                unavailable(format!("the sandbox probe's report is unreadable: {e}"))
            })
        }
        Ok(Ok(out)) => unavailable(format!("the sandbox probe failed ({})", out.status)),
        Ok(Err(e)) => unavailable(format!(
            "cannot run the sandbox probe {}: {e}",
            exe.display()
        )),
        Err(_) => unavailable("the sandbox probe timed out".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(abi: i32, ns: bool, seccomp: bool) -> ProbeReport {
        ProbeReport {
            landlock_abi: abi,
            namespaces: ns,
            pid_namespace: ns,
            seccomp,
            errors: vec![],
        }
    }

    #[test]
    fn enforcement_levels() {
        let full = assess(&caps(7, true, true), true, false);
        assert_eq!(
            (
                full.marker.backend.as_str(),
                full.marker.enforcement.as_str()
            ),
            ("landlock", "full")
        );
        assert!(full.layers.landlock && full.layers.seccomp && full.layers.pid_namespace);
        let net = assess(&caps(7, true, true), true, true);
        assert_eq!(net.marker.enforcement, "partial");
        assert!(net.missing[0].contains("network"));
        let no_ns = assess(&caps(7, false, true), true, false);
        assert_eq!(no_ns.marker.enforcement, "partial");
        assert!(!no_ns.layers.namespaces && !no_ns.layers.pid_namespace);
        let old = assess(&caps(3, true, true), true, false);
        assert_eq!(old.marker.enforcement, "partial");
        let none = assess(&caps(0, true, true), true, false);
        assert_eq!(
            (
                none.marker.backend.as_str(),
                none.marker.enforcement.as_str()
            ),
            ("none", "none")
        );
        let off = assess(&caps(7, true, true), false, false);
        assert_eq!(off.marker.enforcement, "none");
        assert_eq!(off.layers, Layers::default());
    }
}
