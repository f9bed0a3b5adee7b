//! What a sandboxed command may do, and the launch spec the launcher receives as JSON.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Names at the workspace root that stay read-only even though the workspace is writable:
/// the repository (whose hooks and config make git run things) and the agent, MCP and shell
/// configuration a later session would trust.
pub const PROTECTED_NAMES: &[&str] = &[
    ".git",
    ".outrigger",
    ".claude",
    ".codex",
    ".cursor",
    ".vscode",
    ".mcp.json",
    "AGENTS.md",
    "CLAUDE.md",
    ".envrc",
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zprofile",
];

/// The filesystem and network posture of one command.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// Directories the command may write (beneath), besides its private temp dir.
    pub writable_roots: Vec<PathBuf>,
    pub network: bool,
    /// Reported, not enforced per host (no proxy yet): any network is `partial`.
    pub allowed_hosts: Vec<String>,
    /// Read-only even inside a writable root.
    pub protected_paths: Vec<PathBuf>,
    /// Unreadable whatever the other fields say.
    pub hidden_paths: Vec<PathBuf>,
    /// Readable (only) although inside a hidden path: the current session's spill files, a
    /// plugin's own directory.
    #[serde(default)]
    pub revealed_paths: Vec<PathBuf>,
}

impl Policy {
    /// The default posture for `workspace`: it (plus `extra_roots`) writable, its protected
    /// names read-only, `hidden` unreadable.
    pub fn for_workspace(
        workspace: &Path,
        extra_roots: &[PathBuf],
        network: bool,
        allowed_hosts: Vec<String>,
        hidden: Vec<PathBuf>,
    ) -> Policy {
        let mut writable_roots = vec![workspace.to_path_buf()];
        writable_roots.extend(extra_roots.iter().filter(|p| p.is_absolute()).cloned());
        let mut protected_paths: Vec<PathBuf> =
            PROTECTED_NAMES.iter().map(|n| workspace.join(n)).collect();
        protected_paths.extend(git_run_paths(workspace, &writable_roots));
        Policy {
            writable_roots,
            network,
            allowed_hosts,
            protected_paths,
            hidden_paths: hidden,
            revealed_paths: Vec::new(),
        }
    }
}

/// What an existing repository makes git run from inside the writable roots: the git dir a
/// `.git` file or link points to (and its common dir), `core.hooksPath`, and the scripts
/// named (with a `/`) by the config entries that run commands (`core.fsmonitor`, filter
/// and diff drivers, …). Read-only for the command like the protected names.
fn git_run_paths(workspace: &Path, writable: &[PathBuf]) -> Vec<PathBuf> {
    let Some(gitdir) = super::protect::git_dir(workspace) else {
        return Vec::new();
    };
    let canonical = super::landlock_layer::canonical;
    let writable: Vec<PathBuf> = writable.iter().map(|w| canonical(w)).collect();
    let inside = |p: &Path| writable.iter().any(|w| p.starts_with(w));
    let dot_git = canonical(&workspace.join(".git"));
    let mut out = Vec::new();
    let mut dirs = vec![gitdir.clone()];
    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir"))
        && let Ok(c) = std::fs::canonicalize(gitdir.join(common.trim()))
    {
        dirs.push(c);
    }
    for d in &dirs {
        let c = canonical(d);
        if c != dot_git && inside(&c) {
            out.push(c);
        }
        let Ok(bytes) = std::fs::read(d.join("config")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        for e in super::gitconfig::parse(&text).entries {
            let Some(v) = e.value.as_deref() else {
                continue;
            };
            let hooks = e.section == "core" && e.subsection.is_none() && e.key == "hookspath";
            let first = v.split_whitespace().next().unwrap_or("");
            let path = if hooks {
                v.trim()
            } else if !super::gitconfig::is_safe(&e) && first.contains('/') {
                first
            } else {
                continue;
            };
            let p = match path.strip_prefix("~/") {
                Some(rest) => match std::env::var_os("HOME") {
                    Some(h) => PathBuf::from(h).join(rest),
                    None => continue,
                },
                None => workspace.join(path),
            };
            let p = canonical(&p);
            if inside(&p) && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Which layers the launcher must apply. The sidecar sets them from the probe, so a layer the
/// host lacks is skipped (and already reported), while a layer that was expected and fails is
/// an error, never a silent downgrade.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Layers {
    /// User + mount (+ network when off) namespaces; protected paths are bind-mounted
    /// read-only in the mount namespace.
    pub namespaces: bool,
    /// A new PID namespace (needs `namespaces`): the command's whole tree dies with it.
    pub pid_namespace: bool,
    /// A network namespace when the network is off (needs `namespaces`).
    #[serde(default)]
    pub net_namespace: bool,
    pub landlock: bool,
    pub seccomp: bool,
}

/// Everything `outrigger __sandbox-exec --spec <json> -- argv…` needs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchSpec {
    pub policy: Policy,
    pub layers: Layers,
    /// The private temp dir (writable); `None` when the caller made none.
    pub tmp_dir: Option<PathBuf>,
    /// The sidecar's pid: the launcher exits at once if its parent is already someone else.
    pub parent: i32,
    /// `RLIMIT_NPROC` to set inside the user namespace (when no cgroup bounds the command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_processes: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_policy_protects_git_and_config_at_the_root() {
        let ws = Path::new("/w");
        let p = Policy::for_workspace(
            ws,
            &[PathBuf::from("/extra"), PathBuf::from("relative")],
            false,
            vec![],
            vec![PathBuf::from("/h/secrets")],
        );
        assert_eq!(
            p.writable_roots,
            vec![PathBuf::from("/w"), PathBuf::from("/extra")]
        );
        assert!(p.protected_paths.contains(&PathBuf::from("/w/.git")));
        assert!(p.protected_paths.contains(&PathBuf::from("/w/.mcp.json")));
        let json = serde_json::to_string(&LaunchSpec {
            policy: p.clone(),
            ..Default::default()
        })
        .unwrap();
        let back: LaunchSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back.policy, p);
    }
}
