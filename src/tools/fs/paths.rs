//! Path resolution and containment for the workspace file tools.
//!
//! A model-supplied path resolves against the workspace root (never the process cwd), is
//! normalized lexically, then has the symlinks of its existing part resolved, and must land
//! inside a readable (or writable) root and outside every blocked path. That check is advisory:
//! the authoritative one runs on the file actually opened (`openat2` with `RESOLVE_BENEATH`
//! where the kernel has it, then the opened descriptor's `/proc/self/fd` path), so a symlink
//! swapped in after the check is refused, not followed. A file opened for reading that has
//! more than one link is also refused when it is a blocked file under another name (a hard
//! link placed in the workspace).

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use crate::config::Settings;

#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("path is empty; pass a path relative to the workspace root {root}")]
    Empty { root: PathBuf },
    #[error(
        "path escapes workspace: {path} (resolves to {resolved}, outside the workspace root {root}{extra}); use a path inside {root}"
    )]
    Escapes {
        path: String,
        resolved: PathBuf,
        root: PathBuf,
        /// Names the configured extra roots, if any.
        extra: String,
    },
    #[error(
        "path is blocked: {path} (resolves to {resolved}, under the blocked path {entry}); blocked_paths are refused everywhere"
    )]
    Blocked {
        path: String,
        resolved: PathBuf,
        entry: PathBuf,
    },
    #[error(
        "path is blocked: {path} is a hard link to {entry}, which blocked_paths refuse everywhere"
    )]
    BlockedLink { path: String, entry: PathBuf },
    #[error(
        "path is blocked: {path} has other hard links, and the blocked path {entry} holds more than max_walk_entries entries to compare it with; raise max_walk_entries"
    )]
    LinkUnchecked { path: String, entry: PathBuf },
    #[error(
        "path is protected: {path} (resolves to {resolved}) is inside a git directory; hooks and config written there run outside the sandbox on the user's next git command, so the file tools do not write them; change the repository with git commands through bash"
    )]
    GitDir { path: String, resolved: PathBuf },
    #[error("{path}: no such file or directory")]
    NotFound { path: String },
    #[error("{path}: {msg}")]
    Io { path: String, msg: String },
    #[error("workspace root {root} is unusable: {msg}")]
    BadRoot { root: PathBuf, msg: String },
}

impl PathError {
    fn io(path: &str, e: impl std::fmt::Display) -> PathError {
        PathError::Io {
            path: path.to_string(),
            msg: e.to_string(),
        }
    }

    fn errno(path: &str, e: nix::errno::Errno) -> PathError {
        if e == nix::errno::Errno::ENOENT {
            PathError::NotFound {
                path: path.to_string(),
            }
        } else {
            PathError::io(path, std::io::Error::from_raw_os_error(e as i32))
        }
    }
}

#[derive(Debug, Clone)]
pub struct Workspace {
    /// Canonical workspace root.
    root: PathBuf,
    /// Canonical readable roots: the root, `readable_roots` and `writable_roots`.
    readable: Vec<PathBuf>,
    /// Canonical writable roots: the root and `writable_roots`.
    writable: Vec<PathBuf>,
    /// Blocked paths, both as configured and canonical (when they exist).
    blocked: Vec<PathBuf>,
    /// `max_walk_entries`: the most entries the walk of the blocked paths for linked files
    /// visits.
    max_walk: usize,
    /// `(dev, ino)` of every file with more than one link beneath the blocked paths, with
    /// its path; collected the first time an opened file has more than one link. `Err`
    /// names the blocked path whose walk went past `max_walk`.
    linked: std::sync::OnceLock<Result<LinkedFiles, PathBuf>>,
}

/// `(dev, ino)` → path of the blocked files that have more than one link.
type LinkedFiles = HashMap<(u64, u64), PathBuf>;

/// Lexical normalization: `.` dropped, `..` pops (never above `/`).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => out.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Resolves the symlinks of the longest existing prefix of an absolute, normalized path and
/// appends the rest. A dangling final symlink stays as written.
fn resolve_existing(p: &Path) -> PathBuf {
    let mut base = p.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(&base) {
            let mut out = c;
            for r in rest.iter().rev() {
                out.push(r);
            }
            return normalize(&out);
        }
        match (base.file_name().map(|n| n.to_os_string()), base.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                base = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

fn canonical_roots(root: &Path, extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    for e in extra {
        let abs = if e.is_absolute() {
            normalize(e)
        } else {
            normalize(&root.join(e))
        };
        let c = resolve_existing(&abs);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Refuses a write whose resolved path has a `.git` component (any case: macOS and Windows
/// file systems are case-insensitive, and git finds `.GIT` there).
fn refuse_git_dir(path: &str, resolved: &Path) -> Result<(), PathError> {
    let git = resolved.components().any(|c| {
        c.as_os_str()
            .to_str()
            .is_some_and(|s| s.eq_ignore_ascii_case(".git"))
    });
    if git {
        return Err(PathError::GitDir {
            path: path.to_string(),
            resolved: resolved.to_path_buf(),
        });
    }
    Ok(())
}

impl Workspace {
    pub fn new(root: &Path, settings: &Settings) -> Result<Workspace, PathError> {
        let root = std::fs::canonicalize(root).map_err(|e| PathError::BadRoot {
            root: root.to_path_buf(),
            msg: e.to_string(),
        })?;
        if !root.is_dir() {
            return Err(PathError::BadRoot {
                root,
                msg: "not a directory".into(),
            });
        }
        // Every caller resolves roots through `root::resolve`, which refuses `/`; this is the
        // backstop for one that does not.
        if root.parent().is_none() {
            return Err(PathError::BadRoot {
                root,
                msg: "the filesystem root cannot be a workspace; name a project directory".into(),
            });
        }
        let writable = canonical_roots(&root, &settings.writable_roots);
        let mut readable = canonical_roots(&root, &settings.readable_roots);
        for w in &writable {
            if !readable.contains(w) {
                readable.push(w.clone());
            }
        }
        let mut blocked = Vec::new();
        for b in &settings.blocked_paths {
            let abs = normalize(&root.join(b));
            let c = resolve_existing(&abs);
            if c != abs {
                blocked.push(c);
            }
            blocked.push(abs);
        }
        Ok(Workspace {
            root,
            readable,
            writable,
            blocked,
            max_walk: settings.max_walk_entries,
            linked: std::sync::OnceLock::new(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn extra_label(&self, roots: &[PathBuf], what: &str) -> String {
        if roots.len() > 1 {
            let list: Vec<String> = roots[1..].iter().map(|r| r.display().to_string()).collect();
            format!(" and the {what} {}", list.join(", "))
        } else {
            String::new()
        }
    }

    fn blocked_entry(&self, abs: &Path) -> Option<&PathBuf> {
        self.blocked.iter().find(|b| abs.starts_with(b))
    }

    fn resolve(&self, path: &str, roots: &[PathBuf], what: &str) -> Result<PathBuf, PathError> {
        if path.is_empty() {
            return Err(PathError::Empty {
                root: self.root.clone(),
            });
        }
        let given = Path::new(path);
        let lexical = if given.is_absolute() {
            normalize(given)
        } else {
            normalize(&self.root.join(given))
        };
        let resolved = resolve_existing(&lexical);
        if let Some(entry) = self
            .blocked_entry(&lexical)
            .or_else(|| self.blocked_entry(&resolved))
        {
            return Err(PathError::Blocked {
                path: path.to_string(),
                resolved,
                entry: entry.clone(),
            });
        }
        if !roots.iter().any(|r| resolved.starts_with(r)) {
            return Err(PathError::Escapes {
                path: path.to_string(),
                resolved,
                root: self.root.clone(),
                extra: self.extra_label(roots, what),
            });
        }
        Ok(resolved)
    }

    /// Lexically resolves a model-supplied path (relative → against root; `..` normalized),
    /// resolves the symlinks of its existing part, and checks it is inside a readable root
    /// and not blocked. Does not require existence. Returns the resolved absolute path.
    pub fn resolve_read(&self, path: &str) -> Result<PathBuf, PathError> {
        self.resolve(path, &self.readable, "readable_roots")
    }

    /// As `resolve_read`, against the writable roots; nothing inside a `.git` directory (or
    /// a `.git` file, which could point git at another one).
    pub fn resolve_write(&self, path: &str) -> Result<PathBuf, PathError> {
        let abs = self.resolve(path, &self.writable, "writable_roots")?;
        refuse_git_dir(path, &abs)?;
        Ok(abs)
    }

    /// Whether a path (e.g. a symlink target found while walking) is readable: inside a
    /// readable root and not blocked.
    pub fn is_readable(&self, abs: &Path) -> bool {
        let abs = normalize(abs);
        let resolved = resolve_existing(&abs);
        self.blocked_entry(&abs).is_none()
            && self.blocked_entry(&resolved).is_none()
            && self.readable.iter().any(|r| resolved.starts_with(r))
    }

    /// Whether an already-resolved path is inside a writable root and not blocked.
    pub fn is_writable(&self, abs: &Path) -> bool {
        self.blocked_entry(abs).is_none() && self.writable.iter().any(|r| abs.starts_with(r))
    }

    /// Path relative to the root for display, falling back to the absolute path.
    pub fn display(&self, abs: &Path) -> String {
        match abs.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".into(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => abs.display().to_string(),
        }
    }

    /// Opens for reading with the containment decided on the opened file: `openat2` with
    /// `RESOLVE_BENEATH` from the containing root where available, then the descriptor's real
    /// path must be readable and unblocked.
    pub fn open_read(&self, path: &str) -> Result<(File, PathBuf), PathError> {
        let abs = self.resolve_read(path)?;
        self.open_resolved(path, &abs)
    }

    /// The open half of `open_read`: whatever `abs` has become since it was resolved, the
    /// file opened must be readable and unblocked.
    fn open_resolved(&self, path: &str, abs: &Path) -> Result<(File, PathBuf), PathError> {
        let fd = self.open_beneath(
            path,
            abs,
            &self.readable,
            // O_NONBLOCK: opening a FIFO must not hang waiting for a writer.
            OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK,
        )?;
        let real = fd_path(&fd).map_err(|e| PathError::io(path, e))?;
        self.check_opened(path, &real, &self.readable, "readable_roots")?;
        let file = File::from(fd);
        let meta = file.metadata().map_err(|e| PathError::io(path, e))?;
        self.check_links(path, &meta)?;
        Ok((file, real))
    }

    /// Refuses an opened file that is a blocked file under another name: with more than one
    /// link, its `(dev, ino)` is looked up among the blocked paths' linked files.
    pub fn check_links(&self, path: &str, meta: &std::fs::Metadata) -> Result<(), PathError> {
        if !meta.is_file() || meta.nlink() < 2 {
            return Ok(());
        }
        match self.linked.get_or_init(|| self.collect_linked()) {
            Ok(map) => match map.get(&(meta.dev(), meta.ino())) {
                Some(entry) => Err(PathError::BlockedLink {
                    path: path.to_string(),
                    entry: entry.clone(),
                }),
                None => Ok(()),
            },
            Err(entry) => Err(PathError::LinkUnchecked {
                path: path.to_string(),
                entry: entry.clone(),
            }),
        }
    }

    /// Whether an opened file must not be read because it is a link to a blocked file (or
    /// cannot be told apart from one): `check_links` for the walkers.
    pub fn is_blocked_link(&self, meta: &std::fs::Metadata) -> bool {
        self.check_links("", meta).is_err()
    }

    fn collect_linked(&self) -> Result<LinkedFiles, PathBuf> {
        let mut out = HashMap::new();
        let mut seen = 0usize;
        for b in &self.blocked {
            let mut stack = vec![b.clone()];
            while let Some(p) = stack.pop() {
                let Ok(m) = std::fs::symlink_metadata(&p) else {
                    continue;
                };
                seen += 1;
                if seen > self.max_walk {
                    return Err(b.clone());
                }
                if m.is_dir() {
                    for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                        stack.push(e.path());
                    }
                } else if m.is_file() && m.nlink() > 1 {
                    out.insert((m.dev(), m.ino()), p);
                }
            }
        }
        Ok(out)
    }

    /// Opens the directory that will hold `abs` (a path from `resolve_write`) for `*at`
    /// calls, verified on the opened descriptor to be writable and unblocked. Returns the
    /// directory and the file name inside it.
    pub fn open_parent_for_write(
        &self,
        path: &str,
        abs: &Path,
    ) -> Result<(OwnedFd, std::ffi::OsString), PathError> {
        let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
            return Err(PathError::io(path, "not a file path"));
        };
        let fd = self.open_beneath(
            path,
            parent,
            &self.writable,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        )?;
        let real = fd_path(&fd).map_err(|e| PathError::io(path, e))?;
        self.check_opened(path, &real.join(name), &self.writable, "writable_roots")?;
        // Decided again on the opened directory: a symlink swapped in since `resolve_write`.
        refuse_git_dir(path, &real.join(name))?;
        // A sandboxed command running now must not take what this tool writes for its own.
        crate::sandbox::protect::note_tool_write(&self.root, &real.join(name));
        Ok((fd, name.to_os_string()))
    }

    fn check_opened(
        &self,
        path: &str,
        real: &Path,
        roots: &[PathBuf],
        what: &str,
    ) -> Result<(), PathError> {
        if let Some(entry) = self.blocked_entry(real) {
            return Err(PathError::Blocked {
                path: path.to_string(),
                resolved: real.to_path_buf(),
                entry: entry.clone(),
            });
        }
        if !roots.iter().any(|r| real.starts_with(r)) {
            return Err(PathError::Escapes {
                path: path.to_string(),
                resolved: real.to_path_buf(),
                root: self.root.clone(),
                extra: self.extra_label(roots, what),
            });
        }
        Ok(())
    }

    /// Opens `abs` beneath the root that contains it. `openat2` refuses any resolution that
    /// leaves that root (`..` or a symlink), so a swapped-in link cannot redirect the open;
    /// kernels without it (ENOSYS, or a seccomp EPERM) fall back to a plain open, and the
    /// caller's descriptor check still decides.
    fn open_beneath(
        &self,
        path: &str,
        abs: &Path,
        roots: &[PathBuf],
        flags: OFlag,
    ) -> Result<OwnedFd, PathError> {
        let Some(root) = roots
            .iter()
            .filter(|r| abs.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
        else {
            return Err(PathError::Escapes {
                path: path.to_string(),
                resolved: abs.to_path_buf(),
                root: self.root.clone(),
                extra: String::new(),
            });
        };
        let rel = abs.strip_prefix(root).unwrap_or(Path::new(""));
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let root_fd = nix::fcntl::open(
            root.as_path(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| PathError::io(path, format!("cannot open root {}: {e}", root.display())))?;
        #[cfg(target_os = "linux")]
        {
            use nix::fcntl::{OpenHow, ResolveFlag, openat2};
            let how = OpenHow::new()
                .flags(flags)
                .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
            match openat2(root_fd.as_fd(), rel, how) {
                Ok(fd) => return Ok(fd),
                Err(nix::errno::Errno::ENOSYS) | Err(nix::errno::Errno::EPERM) => {}
                Err(nix::errno::Errno::EXDEV) => {
                    return Err(PathError::Escapes {
                        path: path.to_string(),
                        resolved: abs.to_path_buf(),
                        root: self.root.clone(),
                        extra: " (a symlink or `..` on the way leads out of it)".into(),
                    });
                }
                Err(e) => return Err(PathError::errno(path, e)),
            }
        }
        nix::fcntl::openat(root_fd.as_fd(), rel, flags, Mode::empty())
            .map_err(|e| PathError::errno(path, e))
    }
}

/// The real path of an open descriptor.
#[cfg(target_os = "linux")]
fn fd_path(fd: &OwnedFd) -> std::io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

#[cfg(not(target_os = "linux"))]
fn fd_path(_fd: &OwnedFd) -> std::io::Result<PathBuf> {
    Err(std::io::Error::other(
        "cannot name an open file on this platform; file tools need Linux",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        let mut s = crate::tools::fs::test_settings();
        s.blocked_paths = vec![PathBuf::from("secret")];
        s
    }

    #[test]
    fn normalizes_and_contains() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path(), &settings()).unwrap();
        let root = ws.root().to_path_buf();
        assert_eq!(ws.resolve_read("a/./b/../c").unwrap(), root.join("a/c"));
        assert!(matches!(
            ws.resolve_read("../x"),
            Err(PathError::Escapes { .. })
        ));
        assert!(matches!(
            ws.resolve_read("/etc/passwd"),
            Err(PathError::Escapes { .. })
        ));
        assert!(matches!(
            ws.resolve_read("secret/key"),
            Err(PathError::Blocked { .. })
        ));
        assert!(matches!(ws.resolve_read(""), Err(PathError::Empty { .. })));
        assert_eq!(ws.display(&root.join("a/c")), "a/c");
        assert_eq!(ws.display(Path::new("/etc")), "/etc");
    }

    #[test]
    fn symlink_out_is_refused_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("f"), "x").unwrap();
        std::os::unix::fs::symlink(out.path().join("f"), dir.path().join("link")).unwrap();
        std::fs::write(dir.path().join("in"), "y").unwrap();
        let ws = Workspace::new(dir.path(), &settings()).unwrap();
        assert!(ws.open_read("in").is_ok());
        assert!(matches!(
            ws.open_read("link"),
            Err(PathError::Escapes { .. })
        ));
        assert!(!ws.is_readable(&dir.path().join("link")));
        assert!(ws.is_readable(&dir.path().join("in")));
    }

    #[test]
    fn a_link_swapped_in_after_resolution_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("f"), "outside").unwrap();
        std::fs::write(dir.path().join("f"), "inside").unwrap();
        let ws = Workspace::new(dir.path(), &settings()).unwrap();
        let abs = ws.resolve_read("f").unwrap();
        std::fs::remove_file(&abs).unwrap();
        std::os::unix::fs::symlink(out.path().join("f"), &abs).unwrap();
        assert!(matches!(
            ws.open_resolved("f", &abs),
            Err(PathError::Escapes { .. })
        ));
        // Same for a blocked file reached through a link inside the root.
        std::fs::create_dir(dir.path().join("secret")).unwrap();
        std::fs::write(dir.path().join("secret/k"), "k").unwrap();
        std::fs::remove_file(&abs).unwrap();
        // Relative, so it stays beneath the root and only the descriptor check catches it.
        std::os::unix::fs::symlink("secret/k", &abs).unwrap();
        assert!(matches!(
            ws.open_resolved("f", &abs),
            Err(PathError::Blocked { .. })
        ));
    }

    #[test]
    fn path_list_and_bool_keys_coerce_from_env() {
        let load = |env: Vec<(&str, &str)>| {
            crate::config::Config::load(&crate::config::Inputs {
                home: PathBuf::from("/h"),
                env: env
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Default::default()
            })
        };
        let s = load(vec![
            ("readable_roots", "/a:/b::"),
            ("writable_roots", r#"["/c", "/d:e"]"#),
            ("require_read_before_write", "0"),
        ])
        .unwrap()
        .settings();
        assert_eq!(
            s.readable_roots,
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert_eq!(
            s.writable_roots,
            vec![PathBuf::from("/c"), PathBuf::from("/d:e")]
        );
        assert!(!s.require_read_before_write);
        let d = load(vec![]).unwrap().settings();
        assert!(d.require_read_before_write);
        assert!(d.blocked_paths.contains(&PathBuf::from("/h/secrets")));
        assert_eq!(d.max_output_chars, 100_000);
        assert_eq!(d.max_read_bytes, 10 << 20);
        assert!(load(vec![("require_read_before_write", "maybe")]).is_err());
        assert!(load(vec![("blocked_paths", r#"[""]"#)]).is_err());
        assert!(load(vec![("max_output_chars", "2000000")]).is_err());
    }

    #[test]
    fn a_hard_link_to_a_blocked_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("secret")).unwrap();
        std::fs::write(dir.path().join("secret/key"), "k").unwrap();
        std::fs::hard_link(dir.path().join("secret/key"), dir.path().join("innocent")).unwrap();
        std::fs::write(dir.path().join("a"), "a").unwrap();
        std::fs::hard_link(dir.path().join("a"), dir.path().join("b")).unwrap();
        let ws = Workspace::new(dir.path(), &settings()).unwrap();
        assert!(matches!(
            ws.open_read("innocent"),
            Err(PathError::BlockedLink { .. })
        ));
        assert!(
            ws.open_read("b").is_ok(),
            "other linked files stay readable"
        );
        // Too many entries to compare with: refused rather than guessed.
        let mut s = settings();
        s.max_walk_entries = 1;
        std::fs::write(dir.path().join("secret/other"), "o").unwrap();
        let ws = Workspace::new(dir.path(), &s).unwrap();
        assert!(matches!(
            ws.open_read("b"),
            Err(PathError::LinkUnchecked { .. })
        ));
        std::fs::write(dir.path().join("c"), "c").unwrap();
        assert!(ws.open_read("c").is_ok(), "single-link files need no walk");
    }

    #[test]
    fn extra_roots_are_readable() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("f"), "x").unwrap();
        let mut s = settings();
        s.readable_roots = vec![other.path().to_path_buf()];
        let ws = Workspace::new(dir.path(), &s).unwrap();
        let p = other.path().join("f");
        assert!(ws.open_read(&p.display().to_string()).is_ok());
        assert!(ws.resolve_write(&p.display().to_string()).is_err());
    }
}
