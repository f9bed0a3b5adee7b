//! Nothing a sandboxed command leaves behind runs outside the sandbox later: the protected
//! names at the workspace root ([`PROTECTED_NAMES`]) that exist when a command starts are
//! bind-mounted read-only (namespaces); for the rest, this guard looks after the command:
//!
//! - a protected name the command created is removed — except `.git`: `git init` is a
//!   legitimate thing to do, so a created repository is kept but neutralised (every hook
//!   removed, every git config file in it rewritten with only the entries that never make
//!   git run anything, see [`gitconfig::is_safe`]); a created `.git` that is a file or a
//!   symlink (a pointer to a git dir elsewhere) is removed; a created `.outrigger` keeps only
//!   the saved bash output (the sidecar may write it while the command runs);
//! - when `.git` existed but could not be mounted read-only (no user namespaces), the same
//!   neutralisation runs against a snapshot taken before the command: hooks and config
//!   entries that were there before stay, new or changed ones go.
//!
//! A protected path the file tools wrote while the command ran is left alone
//! ([`note_tool_write`]). Each removal is named in the guard's notes (the bash result's
//! `data.protectedCleanup`, the log for plugin executables).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use super::gitconfig::{self, Entry};
use super::policy::PROTECTED_NAMES;

/// Paths (a workspace root joined with a protected name) the file tools wrote, and when.
static TOOL_WRITES: Mutex<BTreeMap<PathBuf, Instant>> = Mutex::new(BTreeMap::new());

/// Called by the file tools before they write `abs` beneath the workspace `root`: a guard
/// running then must not remove what they create.
pub fn note_tool_write(root: &Path, abs: &Path) {
    let Ok(rel) = abs.strip_prefix(root) else {
        return;
    };
    let Some(first) = rel.components().next() else {
        return;
    };
    let first = first.as_os_str();
    if PROTECTED_NAMES
        .iter()
        .any(|n| std::ffi::OsStr::new(n) == first)
    {
        let mut map = TOOL_WRITES.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(root.join(first), Instant::now());
    }
}

fn written_by_tools_since(p: &Path, since: Instant) -> bool {
    let map = TOOL_WRITES.lock().unwrap_or_else(|e| e.into_inner());
    map.get(p).is_some_and(|t| *t >= since)
}

/// A file's identity and state, to tell a hook the command changed from the one it found.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    mode: u32,
}

impl Fingerprint {
    fn of(m: &std::fs::Metadata) -> Fingerprint {
        Fingerprint {
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            mode: m.mode(),
        }
    }
}

/// The places in a git dir git runs things from, found by a walk that does not follow
/// symlinks and skips object, ref and log stores.
#[derive(Debug, Default)]
struct Surface {
    /// Directories named `hooks` (and a symlink of that name, to be removed).
    hooks: Vec<PathBuf>,
    /// Files named `config` or `config.worktree`.
    configs: Vec<PathBuf>,
    /// Files named `commondir` (they point git at another git dir's config and hooks).
    commondirs: Vec<PathBuf>,
    /// The walk stopped at the entry limit.
    truncated: bool,
}

/// Directories of a git dir that hold data git never executes.
const DATA_DIRS: &[&str] = &["objects", "refs", "logs", "lfs", "rr-cache"];

fn surface(gitdir: &Path, max_entries: usize) -> Surface {
    let mut s = Surface::default();
    let mut seen = 0usize;
    let mut stack = vec![gitdir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let is_gitdir = dir.join("HEAD").is_file();
        for e in entries.flatten() {
            seen += 1;
            if seen > max_entries {
                s.truncated = true;
                return s;
            }
            let Ok(ft) = e.file_type() else {
                continue;
            };
            let name = e.file_name();
            let name = name.to_string_lossy();
            let p = e.path();
            match name.as_ref() {
                "hooks" => s.hooks.push(p),
                "config" | "config.worktree" if !ft.is_dir() => s.configs.push(p),
                "commondir" if !ft.is_dir() => s.commondirs.push(p),
                n if ft.is_dir() && !(is_gitdir && DATA_DIRS.contains(&n)) => stack.push(p),
                _ => {}
            }
        }
    }
    s
}

/// A git dir's state before the command, for a `.git` that stayed writable.
#[derive(Debug, Default)]
struct Snapshot {
    gitdir: PathBuf,
    hooks: HashMap<PathBuf, Fingerprint>,
    configs: HashMap<PathBuf, HashSet<Entry>>,
    commondirs: HashSet<PathBuf>,
}

impl Snapshot {
    fn take(gitdir: &Path, max_entries: usize) -> Snapshot {
        let s = surface(gitdir, max_entries);
        let mut snap = Snapshot {
            gitdir: gitdir.to_path_buf(),
            ..Default::default()
        };
        for h in &s.hooks {
            if let Ok(m) = std::fs::symlink_metadata(h) {
                snap.hooks.insert(h.clone(), Fingerprint::of(&m));
            }
            for e in std::fs::read_dir(h).into_iter().flatten().flatten() {
                if let Ok(m) = e.metadata() {
                    snap.hooks.insert(e.path(), Fingerprint::of(&m));
                }
            }
        }
        for c in &s.configs {
            if let Ok(bytes) = std::fs::read(c) {
                let text = String::from_utf8_lossy(&bytes);
                let entries = gitconfig::parse(&text).entries.into_iter().collect();
                snap.configs.insert(c.clone(), entries);
            }
        }
        snap.commondirs = s.commondirs.into_iter().collect();
        snap
    }
}

/// The git dir `ws/.git` leads to: the directory itself, a symlink's target, or a `gitdir:`
/// file's target.
pub fn git_dir(ws: &Path) -> Option<PathBuf> {
    let dot = ws.join(".git");
    let m = std::fs::symlink_metadata(&dot).ok()?;
    if m.is_dir() {
        return Some(dot);
    }
    if m.file_type().is_symlink() {
        return std::fs::canonicalize(&dot).ok().filter(|p| p.is_dir());
    }
    let text = std::fs::read_to_string(&dot).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let p = ws.join(target);
    std::fs::canonicalize(p).ok().filter(|p| p.is_dir())
}

/// Looks after one command's protected names (see the module docs). Finishing (or dropping)
/// it does the work once.
#[derive(Debug)]
pub struct Guard {
    workspace: PathBuf,
    started: Instant,
    existed: Vec<bool>,
    /// Existing protected paths are mounted read-only for the command.
    read_only: bool,
    /// `.git` itself before the command (a file or link is not walked).
    dot_git: Option<Fingerprint>,
    baseline: Option<Snapshot>,
    max_entries: usize,
    done: bool,
}

impl Guard {
    /// Records what exists before the command. `read_only`: the existing protected paths
    /// are bind-mounted read-only for it (so an existing `.git` needs no snapshot).
    /// `max_entries` bounds each walk of a git dir (`max_walk_entries`).
    pub fn before(workspace: &Path, read_only: bool, max_entries: usize) -> Guard {
        let existed = PROTECTED_NAMES
            .iter()
            .map(|n| std::fs::symlink_metadata(workspace.join(n)).is_ok())
            .collect();
        let baseline = if read_only {
            None
        } else {
            git_dir(workspace).map(|g| Snapshot::take(&g, max_entries))
        };
        Guard {
            workspace: workspace.to_path_buf(),
            started: Instant::now(),
            existed,
            read_only,
            dot_git: std::fs::symlink_metadata(workspace.join(".git"))
                .ok()
                .map(|m| Fingerprint::of(&m)),
            baseline,
            max_entries,
            done: false,
        }
    }

    /// Call once the command and everything it started are gone. Returns what was removed
    /// or rewritten, one line each.
    pub fn finish(mut self) -> Vec<String> {
        self.run()
    }

    /// [`Guard::before`] from async code: in place when the existing names are mounted
    /// read-only (it only looks at a few names), else on the blocking pool (it snapshots the
    /// repository).
    pub async fn before_async(
        workspace: &Path,
        read_only: bool,
        max_entries: usize,
    ) -> Option<Guard> {
        if read_only {
            return Some(Guard::before(workspace, read_only, max_entries));
        }
        let ws = workspace.to_path_buf();
        tokio::task::spawn_blocking(move || Guard::before(&ws, read_only, max_entries))
            .await
            .ok()
    }

    /// [`Guard::finish`] from async code: in place when the existing names were mounted
    /// read-only and the command created none (a look at a few names: the usual case, on
    /// the reply's path), else on the blocking pool (it walks what was created, or compares
    /// the repository with the snapshot). Not `block_in_place`: that wakes a thread to take
    /// the worker's other tasks every call.
    pub async fn finish_async(mut self) -> Vec<String> {
        if self.read_only && !self.created_any() {
            self.done = true;
            return Vec::new();
        }
        tokio::task::spawn_blocking(move || self.finish())
            .await
            .unwrap_or_default()
    }

    /// A protected name that did not exist before the command exists now.
    fn created_any(&self) -> bool {
        PROTECTED_NAMES
            .iter()
            .zip(&self.existed)
            .any(|(name, existed)| {
                !existed && std::fs::symlink_metadata(self.workspace.join(name)).is_ok()
            })
    }

    fn run(&mut self) -> Vec<String> {
        if std::mem::replace(&mut self.done, true) {
            return Vec::new();
        }
        let mut notes = Vec::new();
        for (name, existed) in PROTECTED_NAMES.iter().zip(self.existed.clone()) {
            let p = self.workspace.join(name);
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if *name == ".git" {
                self.git(&p, &meta, existed, &mut notes);
                continue;
            }
            if existed || written_by_tools_since(&p, self.started) {
                continue;
            }
            if *name == ".outrigger" && meta.is_dir() {
                clean_outrigger(&p, &mut notes);
                continue;
            }
            remove(
                &p,
                &mut notes,
                "sandboxed commands cannot create it; use the file tools",
            );
        }
        for n in &notes {
            tracing::warn!("sandbox cleanup in {}: {n}", self.workspace.display());
        }
        notes
    }

    fn git(&self, dot: &Path, meta: &std::fs::Metadata, existed: bool, notes: &mut Vec<String>) {
        // Mounted read-only for the command, or a `.git` that led nowhere and is unchanged.
        let unchanged = self.dot_git.as_ref() == Some(&Fingerprint::of(meta)) && !meta.is_dir();
        if existed && (self.read_only || (self.baseline.is_none() && unchanged)) {
            return;
        }
        if written_by_tools_since(dot, self.started) {
            return;
        }
        let now = git_dir(&self.workspace);
        match (&self.baseline, now) {
            (Some(b), Some(g)) if g == b.gitdir => {
                neutralise(&g, Some(b), self.max_entries, &self.workspace, notes);
            }
            (_, Some(g)) if meta.is_dir() && g == dot => {
                if !neutralise(&g, None, self.max_entries, &self.workspace, notes) {
                    quarantine(dot, notes);
                }
            }
            _ => remove(
                dot,
                notes,
                "a .git pointer a sandboxed command made is not trusted",
            ),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.run();
    }
}

fn rel<'a>(ws: &Path, p: &'a Path) -> std::borrow::Cow<'a, str> {
    match p.strip_prefix(ws) {
        Ok(r) => r.to_string_lossy(),
        Err(_) => p.to_string_lossy(),
    }
}

/// Removes a file, symlink or whole directory (never following links).
fn remove(p: &Path, notes: &mut Vec<String>, why: &str) {
    let r = match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => super::private_tmp::remove_tree(p),
        Ok(_) => std::fs::remove_file(p),
        Err(_) => return,
    };
    match r {
        Ok(()) => notes.push(format!("removed {} ({why})", p.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => notes.push(format!("could not remove {} ({why}): {e}", p.display())),
    }
}

/// A created repository too large to check is renamed so git no longer finds it.
fn quarantine(dot: &Path, notes: &mut Vec<String>) {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let to = dot.with_file_name(format!(".git-unchecked-{stamp}"));
    match std::fs::rename(dot, &to) {
        Ok(()) => notes.push(format!(
            "renamed {} to {}: too many entries to check for hooks (max_walk_entries)",
            dot.display(),
            to.display()
        )),
        Err(e) => {
            notes.push(format!("could not set aside {}: {e}", dot.display()));
            remove(dot, notes, "too many entries to check for hooks");
        }
    }
}

/// Removes what in the git dir `g` would make git run something and was not there before
/// (`baseline`). Returns false when the walk hit the entry limit.
fn neutralise(
    g: &Path,
    baseline: Option<&Snapshot>,
    max_entries: usize,
    ws: &Path,
    notes: &mut Vec<String>,
) -> bool {
    let s = surface(g, max_entries);
    let unchanged = |p: &Path, m: &std::fs::Metadata| {
        baseline.is_some_and(|b| b.hooks.get(p) == Some(&Fingerprint::of(m)))
    };
    for h in &s.hooks {
        let Ok(m) = std::fs::symlink_metadata(h) else {
            continue;
        };
        if !m.is_dir() {
            if !unchanged(h, &m) {
                remove(h, notes, "git would run what it points to");
            }
            continue;
        }
        for e in std::fs::read_dir(h).into_iter().flatten().flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            let sample = m.is_file() && e.file_name().to_string_lossy().ends_with(".sample");
            if !sample && !unchanged(&p, &m) {
                remove(
                    &p,
                    notes,
                    "git hooks made by a sandboxed command would run outside it",
                );
            }
        }
    }
    let empty = HashSet::new();
    for c in &s.configs {
        let keep = baseline.and_then(|b| b.configs.get(c)).unwrap_or(&empty);
        sanitize_config(c, g, keep, ws, notes);
    }
    for c in &s.commondirs {
        if baseline.is_some_and(|b| b.commondirs.contains(c)) {
            continue;
        }
        let inside = std::fs::read_to_string(c)
            .ok()
            .and_then(|t| {
                let target = c.parent()?.join(t.trim());
                std::fs::canonicalize(target).ok()
            })
            .zip(std::fs::canonicalize(g).ok())
            .is_some_and(|(t, g)| t.starts_with(g));
        if !inside {
            remove(
                c,
                notes,
                "it points git at another repository's config and hooks",
            );
        }
    }
    !s.truncated
}

fn sanitize_config(c: &Path, g: &Path, keep: &HashSet<Entry>, ws: &Path, notes: &mut Vec<String>) {
    let Ok(m) = std::fs::symlink_metadata(c) else {
        return;
    };
    let text = match std::fs::read(c) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        // A link to nothing readable: git cannot read it either, but it may later.
        Err(_) if m.file_type().is_symlink() => {
            remove(
                c,
                notes,
                "a config link a sandboxed command made is not trusted",
            );
            return;
        }
        Err(_) => return,
    };
    let link_made = m.file_type().is_symlink() && keep.is_empty();
    let (clean, dropped) = match gitconfig::sanitize(&text, keep) {
        Some(x) => x,
        None if link_made => (text, Vec::new()),
        None => return,
    };
    // The directory must still be where the walk found it (no link swapped in since).
    let Some(dir) = c.parent() else {
        return;
    };
    let contained = std::fs::canonicalize(dir)
        .ok()
        .zip(std::fs::canonicalize(g).ok())
        .is_some_and(|(d, g)| d.starts_with(g));
    if !contained {
        notes.push(format!(
            "did not rewrite {}: its directory moved outside the git dir",
            c.display()
        ));
        return;
    }
    let tmp = dir.join(format!(".outrigger-config-{}.tmp", std::process::id()));
    let written = std::fs::write(&tmp, clean.as_bytes()).and_then(|()| std::fs::rename(&tmp, c));
    match written {
        Ok(()) if dropped.is_empty() => notes.push(format!(
            "replaced the link {} with a plain copy",
            rel(ws, c)
        )),
        Ok(()) => notes.push(format!(
            "removed {} from {} (git would run them outside the sandbox)",
            dropped.join(", "),
            rel(ws, c)
        )),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            notes.push(format!("could not rewrite {}: {e}", c.display()));
            remove(c, notes, "it could not be sanitised");
        }
    }
}

/// A `.outrigger` the command created: only the saved bash output the sidecar may have
/// written meanwhile stays.
fn clean_outrigger(p: &Path, notes: &mut Vec<String>) {
    let why = "sandboxed commands cannot create it";
    for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
        let path = e.path();
        let real_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if e.file_name() != "tmp" || !real_dir {
            remove(&path, notes, why);
            continue;
        }
        for t in std::fs::read_dir(&path).into_iter().flatten().flatten() {
            let tp = t.path();
            let real_dir = t.file_type().is_ok_and(|t| t.is_dir());
            if t.file_name() != "bash-output" || !real_dir {
                remove(&tp, notes, why);
                continue;
            }
            for f in std::fs::read_dir(&tp).into_iter().flatten().flatten() {
                if !f.file_type().is_ok_and(|t| t.is_file()) {
                    remove(&f.path(), notes, why);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const MAX: usize = 10_000;

    fn exe(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_created_repository_is_kept_but_neutralised() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path();
        let g = Guard::before(ws, true, MAX);
        exe(
            &ws.join(".git/hooks/pre-commit"),
            "#!/bin/sh\ntouch pwned\n",
        );
        exe(&ws.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n");
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            ws.join(".git/config"),
            "[core]\n\tbare = false\n\thooksPath = /tmp\n\tfsmonitor = x\n[user]\n\tname = m\n",
        )
        .unwrap();
        exe(
            &ws.join(".git/modules/sub/hooks/post-checkout"),
            "#!/bin/sh\n",
        );
        std::fs::write(
            ws.join(".git/modules/sub/config"),
            "[core]\nsshCommand = x\n",
        )
        .unwrap();
        std::fs::create_dir_all(ws.join(".git/worktrees/w")).unwrap();
        std::fs::write(ws.join(".git/worktrees/w/commondir"), "/elsewhere\n").unwrap();
        std::fs::write(ws.join(".mcp.json"), "{}").unwrap();
        std::fs::create_dir_all(ws.join(".vscode")).unwrap();
        std::fs::write(ws.join("AGENTS.md"), "x").unwrap();
        let notes = g.finish();
        assert!(!ws.join(".git/hooks/pre-commit").exists(), "{notes:?}");
        assert!(ws.join(".git/hooks/pre-commit.sample").exists());
        assert!(!ws.join(".git/modules/sub/hooks/post-checkout").exists());
        assert!(!ws.join(".git/worktrees/w/commondir").exists());
        let cfg = std::fs::read_to_string(ws.join(".git/config")).unwrap();
        assert!(
            !cfg.contains("hooksPath") && !cfg.contains("fsmonitor"),
            "{cfg}"
        );
        assert!(
            cfg.contains("bare = \"false\"") && cfg.contains("name = \"m\""),
            "{cfg}"
        );
        let sub = std::fs::read_to_string(ws.join(".git/modules/sub/config")).unwrap();
        assert!(!sub.contains("sshCommand"), "{sub}");
        for n in [".mcp.json", ".vscode", "AGENTS.md"] {
            assert!(!ws.join(n).exists(), "{n}: {notes:?}");
        }
    }

    #[test]
    fn existing_names_stay_and_tool_writes_are_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path();
        std::fs::write(ws.join("CLAUDE.md"), "mine").unwrap();
        let g = Guard::before(ws, true, MAX);
        std::fs::write(ws.join("CLAUDE.md"), "changed").unwrap();
        note_tool_write(ws, &ws.join("AGENTS.md"));
        std::fs::write(ws.join("AGENTS.md"), "from write_file").unwrap();
        std::os::unix::fs::symlink("/elsewhere", ws.join(".git")).unwrap();
        let notes = g.finish();
        assert!(ws.join("CLAUDE.md").exists() && ws.join("AGENTS.md").exists());
        assert!(
            std::fs::symlink_metadata(ws.join(".git")).is_err(),
            "{notes:?}"
        );
    }

    #[test]
    fn a_writable_existing_repository_loses_only_what_the_command_added() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            ws.join(".git/config"),
            "[filter \"lfs\"]\n\tprocess = git-lfs filter-process\n",
        )
        .unwrap();
        exe(&ws.join(".git/hooks/pre-push"), "#!/bin/sh\n# the user's\n");
        let g = Guard::before(ws, false, MAX);
        exe(
            &ws.join(".git/hooks/pre-commit"),
            "#!/bin/sh\ntouch pwned\n",
        );
        let mut cfg = std::fs::read_to_string(ws.join(".git/config")).unwrap();
        cfg.push_str("[core]\n\tfsmonitor = ./evil\n");
        std::fs::write(ws.join(".git/config"), cfg).unwrap();
        let notes = g.finish();
        assert!(ws.join(".git/hooks/pre-push").exists(), "{notes:?}");
        assert!(!ws.join(".git/hooks/pre-commit").exists(), "{notes:?}");
        let cfg = std::fs::read_to_string(ws.join(".git/config")).unwrap();
        assert!(
            cfg.contains("git-lfs filter-process") && !cfg.contains("fsmonitor"),
            "{cfg}"
        );
    }

    #[test]
    fn a_created_outrigger_keeps_only_saved_output() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path();
        let g = Guard::before(ws, true, MAX);
        std::fs::create_dir_all(ws.join(".outrigger/tmp/bash-output")).unwrap();
        std::fs::write(ws.join(".outrigger/tmp/bash-output/1.log"), "out").unwrap();
        std::fs::write(ws.join(".outrigger/config.json"), "{}").unwrap();
        std::fs::write(ws.join(".outrigger/tmp/x"), "").unwrap();
        g.finish();
        assert!(ws.join(".outrigger/tmp/bash-output/1.log").exists());
        assert!(!ws.join(".outrigger/config.json").exists());
        assert!(!ws.join(".outrigger/tmp/x").exists());
    }

    #[test]
    fn git_dir_follows_gitdir_files() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path();
        assert_eq!(git_dir(ws), None);
        std::fs::create_dir_all(ws.join("real.git")).unwrap();
        std::fs::write(ws.join(".git"), "gitdir: real.git\n").unwrap();
        assert_eq!(
            git_dir(ws),
            Some(std::fs::canonicalize(ws.join("real.git")).unwrap())
        );
    }
}
