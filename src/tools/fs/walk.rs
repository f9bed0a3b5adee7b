//! The walk `glob` and `grep` share: gitignore-aware (`ignore`), hidden files included, the
//! built-in exclusions, blocked paths, the symlink rules, an entry budget and cancellation.
//!
//! Symlinks: a nested link is followed only when its target is a regular file inside the search
//! root or the workspace that is readable (not blocked) and has no excluded component; the
//! result keeps the link name. Directory links are never followed.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::SystemTime;

use ignore::{WalkBuilder, WalkState};
use tokio_util::sync::CancellationToken;

use super::paths::Workspace;
use super::write::is_temp_name;

/// Directory (or file) names skipped at any depth below the search root.
pub const EXCLUDED_NAMES: &[&str] = &[
    ".git",
    "node_modules",
    ".outrigger",
    ".claude",
    ".git-worktrees",
    "vendor",
    ".cache",
    "dist",
    "build",
    "out",
    "target",
    ".next",
    ".nuxt",
];

/// Walker threads: crates.md §6 measured the parallel walk on 2 threads.
pub const WALK_THREADS: usize = 2;

pub fn is_excluded_name(name: &OsStr) -> bool {
    EXCLUDED_NAMES.iter().any(|n| OsStr::new(n) == name)
}

/// Whether any component of a relative path is an excluded name.
pub fn has_excluded_component(rel: &Path) -> bool {
    rel.components().any(|c| is_excluded_name(c.as_os_str()))
}

/// Path order by components (`a/b` before `a-b`, as `rg --sort path`), computed on the bytes:
/// only the first differing byte matters, with `/` ranking lowest.
pub fn path_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    use std::os::unix::ffi::OsStrExt;
    let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let rank = |s: &[u8]| {
        s.get(common)
            .map(|&c| if c == b'/' { 0 } else { u16::from(c) + 1 })
    };
    rank(a).cmp(&rank(b))
}

/// A file the walk accepted.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The walked path (the link name for a followed symlink): sort key and display source.
    pub path: PathBuf,
    /// What to open: the walked path, or a symlink's verified canonical target.
    pub open: PathBuf,
    /// Modification time (of the target for a symlink), when asked for.
    pub mtime: Option<SystemTime>,
}

#[derive(Debug, Default)]
pub struct WalkOutcome {
    pub files: Vec<Candidate>,
    /// The entry budget ran out before the walk finished.
    pub limited: bool,
    pub cancelled: bool,
}

pub struct WalkSpec<'a> {
    /// The resolved (canonical) search root: a directory, or a single file.
    pub root: &'a Path,
    pub max_entries: usize,
    pub want_mtime: bool,
    /// Filter on the search-root-relative path of a file (the link name for links).
    pub accept: &'a (dyn Fn(&Path) -> bool + Sync),
    /// `blocked_paths` as configured: see [`BlockedNames`].
    pub blocked: &'a [PathBuf],
}

/// The final names of the blocked paths (as written and resolved). A walked entry lies in a
/// directory that already passed `Workspace::is_readable` and is reached without following
/// links, so it can only be blocked when its own name is one of these: only those entries pay
/// for the authoritative (path-resolving) `is_readable` check.
#[derive(Debug, Default)]
pub struct BlockedNames(HashSet<OsString>);

impl BlockedNames {
    pub fn new(root: &Path, blocked: &[PathBuf]) -> BlockedNames {
        let mut names = HashSet::new();
        for b in blocked {
            let abs = root.join(b);
            names.extend(abs.file_name().map(OsStr::to_os_string));
            if let Ok(c) = std::fs::canonicalize(&abs) {
                names.extend(c.file_name().map(OsStr::to_os_string));
            }
        }
        BlockedNames(names)
    }

    /// Whether `path` (an entry reached by the walk) is readable.
    pub fn readable(&self, ws: &Workspace, path: &Path) -> bool {
        match path.file_name() {
            Some(n) if !self.0.contains(n) => true,
            _ => ws.is_readable(path),
        }
    }
}

/// Walks `spec.root` and returns the accepted files in no particular order.
pub fn walk_files(ws: &Workspace, spec: &WalkSpec<'_>, cancel: &CancellationToken) -> WalkOutcome {
    let root = spec.root;
    if !root.is_dir() {
        // A file named directly is searched whatever the filters say (as `rg FILE` does);
        // anything but a regular file (a FIFO would block the read) is not.
        if !root.is_file() {
            return WalkOutcome::default();
        }
        let mtime = spec
            .want_mtime
            .then(|| std::fs::metadata(root).and_then(|m| m.modified()).ok())
            .flatten();
        return WalkOutcome {
            files: vec![Candidate {
                path: root.to_path_buf(),
                open: root.to_path_buf(),
                mtime,
            }],
            ..Default::default()
        };
    }
    let blocked = Arc::new(BlockedNames::new(ws.root(), spec.blocked));
    let ws_filter = Arc::new(ws.clone());
    let blocked_filter = blocked.clone();
    let mut builder = WalkBuilder::new(root);
    builder
        .threads(WALK_THREADS)
        .hidden(false)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        // Honour .gitignore in workspaces that are not (yet) git repositories too.
        .require_git(false)
        .follow_links(false)
        .filter_entry(move |e| {
            // The root (depth 0) never reaches the filter, so a search rooted inside an
            // excluded directory still runs.
            // A write's temp file (left only by a killed writer) is nobody's content.
            if is_excluded_name(e.file_name()) || is_temp_name(e.file_name()) {
                return false;
            }
            // Directories are checked against blocked paths here so blocked subtrees are
            // pruned; files are checked when accepted.
            match e.file_type() {
                Some(t) if t.is_dir() => blocked_filter.readable(&ws_filter, e.path()),
                _ => true,
            }
        });
    let seen = AtomicUsize::new(0);
    let limited = AtomicBool::new(false);
    let found = std::sync::Mutex::new(Vec::new());
    builder.build_parallel().run(|| {
        let seen = &seen;
        let limited = &limited;
        let found = &found;
        let blocked = &blocked;
        // Flushes the thread's batch when the visitor is dropped at the end of the walk.
        let mut flush = FlushOnDrop {
            found,
            local: Vec::new(),
        };
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if entry.depth() == 0 {
                return WalkState::Continue;
            }
            if seen.fetch_add(1, Ordering::Relaxed) >= spec.max_entries {
                limited.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            let Some(ft) = entry.file_type() else {
                return WalkState::Continue;
            };
            if ft.is_dir() {
                return WalkState::Continue;
            }
            let path = entry.path();
            let Ok(rel) = path.strip_prefix(root) else {
                return WalkState::Continue;
            };
            if !(spec.accept)(rel) {
                return WalkState::Continue;
            }
            let candidate = if ft.is_symlink() {
                follow_file_link(ws, root, path, spec.want_mtime)
            } else if ft.is_file() && blocked.readable(ws, path) {
                let mtime = if spec.want_mtime {
                    entry.metadata().ok().and_then(|m| m.modified().ok())
                } else {
                    None
                };
                Some(Candidate {
                    path: path.to_path_buf(),
                    open: path.to_path_buf(),
                    mtime,
                })
            } else {
                None
            };
            if let Some(c) = candidate {
                flush.local.push(c);
            }
            WalkState::Continue
        })
    });
    let files = found.into_inner().unwrap_or_else(|e| e.into_inner());
    WalkOutcome {
        files,
        limited: limited.load(Ordering::Relaxed),
        cancelled: cancel.is_cancelled(),
    }
}

struct FlushOnDrop<'a> {
    found: &'a std::sync::Mutex<Vec<Candidate>>,
    local: Vec<Candidate>,
}

impl Drop for FlushOnDrop<'_> {
    fn drop(&mut self) {
        let mut found = self.found.lock().unwrap_or_else(|e| e.into_inner());
        found.append(&mut self.local);
    }
}

/// The symlink rule: follow only to a readable regular file inside the search root or the
/// workspace whose path there has no excluded component.
fn follow_file_link(
    ws: &Workspace,
    root: &Path,
    link: &Path,
    want_mtime: bool,
) -> Option<Candidate> {
    let target = std::fs::canonicalize(link).ok()?;
    let meta = std::fs::metadata(&target).ok()?;
    if !meta.is_file() {
        return None;
    }
    let rel = target
        .strip_prefix(root)
        .or_else(|_| target.strip_prefix(ws.root()))
        .ok()?;
    if has_excluded_component(rel) || !ws.is_readable(&target) {
        return None;
    }
    Some(Candidate {
        path: link.to_path_buf(),
        open: target,
        mtime: if want_mtime {
            meta.modified().ok()
        } else {
            None
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_order_is_by_components() {
        let mut v: Vec<PathBuf> = ["a-b/x", "a/y", "a/x", "a.rs", "a/x/z", "b"]
            .iter()
            .map(PathBuf::from)
            .collect();
        v.sort_by(|a, b| path_order(a, b));
        let mut by_components = v.clone();
        by_components.sort();
        assert_eq!(v, by_components);
        assert_eq!(v[0], PathBuf::from("a/x"));
    }

    #[test]
    fn excluded_names_match_whole_components() {
        assert!(has_excluded_component(Path::new("src/node_modules/x.js")));
        assert!(!has_excluded_component(Path::new(
            "src/node_modules_x/x.js"
        )));
        assert!(!has_excluded_component(Path::new("targets/x")));
    }
}
