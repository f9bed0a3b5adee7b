//! Each command's private `$TMPDIR` (mode 0700), inside this process's own directory of
//! them. Made ahead and removed behind by one thread, so neither is on the command's path:
//! on ext4 a `mkdir` costs ~0.15-0.2 ms and the removal another ~0.06 ms of the sidecar's
//! time per command (perf, issue 13); taking a ready one costs one `lstat`. Also the one
//! removal of trees a command made (`remove_tree`), which must not recurse.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, mpsc};

/// How many dirs wait ready (as many as warm spares by default: commands that start
/// together past that make their own).
const AHEAD: usize = 2;

/// A private temp dir (mode 0700) for one command, removed when dropped.
pub struct PrivateTmp {
    path: PathBuf,
}

/// Made ahead, not yet taken.
static READY: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

enum Job {
    Remove(PathBuf),
    /// Make dirs in this parent until `AHEAD` wait.
    Refill(PathBuf),
    /// Remove this process's directory (shutdown); answered once done.
    RemoveParent(mpsc::Sender<()>),
}

/// The thread that makes and removes the dirs; `None` if it could not start (then both are
/// done in place).
fn janitor() -> Option<&'static mpsc::Sender<Job>> {
    static TX: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("tmp-janitor".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                for job in rx {
                    match job {
                        Job::Remove(p) => {
                            let _ = remove_tree(&p);
                        }
                        Job::Refill(base) => refill(&base),
                        Job::RemoveParent(done) => {
                            remove_parent_now();
                            let _ = done.send(());
                        }
                    }
                }
            })
            .ok()
            .map(|_| tx)
    })
    .as_ref()
}

fn ready() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    READY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn refill(base: &Path) {
    while ready().len() < AHEAD {
        match make_in(base) {
            Ok(p) => ready().push(p),
            // The parent is gone (shutdown removed it) or full: commands make their own.
            Err(_) => return,
        }
    }
}

/// A ready dir in `base` that is still ours; ready dirs of another parent (`TMPDIR`
/// changed) are removed.
fn take_ready(base: &Path) -> Option<PathBuf> {
    loop {
        let p = ready().pop()?;
        if p.parent() == Some(base) && own_dir(&p) {
            return Some(p);
        }
        drop(PrivateTmp { path: p });
    }
}

/// A real directory (not a link) this process's user owns.
fn own_dir(p: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir() && m.uid() == unsafe { libc::geteuid() })
}

/// A new dir in `base`, named by a counter and the clock.
fn make_in(base: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static N: AtomicU64 = AtomicU64::new(0);
    for _ in 0..16 {
        let n = N.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = base.join(format!("{n}-{nanos:08x}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!(
        "cannot create a private temp dir under {}",
        base.display()
    )))
}

/// Where this process's private temp dirs go.
fn tmp_parent_path() -> PathBuf {
    std::env::temp_dir().join(format!("outrigger-sbx-{}", std::process::id()))
}

/// The directory this process's private temp dirs are made in: `outrigger-sbx-<pid>` in
/// the temp dir, made once (mode 0700). Commands come and go inside it, so the temp dir
/// itself does not change per command, and a ruleset a warm spare listed it for ahead of
/// time stays fresh (see `sandbox/ahead.rs`).
fn tmp_parent() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static MADE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let path = tmp_parent_path();
    if MADE.get() == Some(&path) && std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
        return Ok(path);
    }
    match std::fs::DirBuilder::new().mode(0o700).create(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // Ours only if it is a real directory we own (not a link someone planted).
            if !own_dir(&path) {
                return Err(std::io::Error::other(format!(
                    "{} exists and is not this process's directory",
                    path.display()
                )));
            }
        }
        Err(e) => return Err(e),
    }
    let _ = MADE.set(path.clone());
    Ok(path)
}

impl PrivateTmp {
    /// A ready dir if one waits, else a new one; either way the next is made behind.
    pub fn create() -> std::io::Result<PrivateTmp> {
        let base = tmp_parent()?;
        let taken = take_ready(&base);
        if let Some(tx) = janitor() {
            let _ = tx.send(Job::Refill(base.clone()));
        }
        let path = match taken {
            Some(p) => p,
            None => make_in(&base)?,
        };
        Ok(PrivateTmp { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Removes this process's directory of private temp dirs (shutdown), with whatever is left.
/// On the janitor, after the jobs given to it before: a removal of a finished command's dir
/// running beside this one made both bail out (each stops at an entry the other removed
/// first) and left the directory behind. In place if the janitor does not answer in time.
pub fn remove_tmp_parent() {
    if std::fs::symlink_metadata(tmp_parent_path()).is_err() {
        return;
    }
    if let Some(tx) = janitor() {
        let (done, wait) = mpsc::channel();
        if tx.send(Job::RemoveParent(done)).is_ok()
            && wait.recv_timeout(PARENT_REMOVAL_WAIT).is_ok()
        {
            return;
        }
    }
    remove_parent_now();
}

/// How long shutdown waits for the janitor to remove this process's directory.
const PARENT_REMOVAL_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

fn remove_parent_now() {
    ready().clear();
    let path = tmp_parent_path();
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
        let _ = remove_tree(&path);
    }
}

/// Removes private temp dirs left by sidecars that died without dropping them (SIGKILL,
/// power loss): the name (`outrigger-sbx-<pid>`, or `outrigger-sbx-<pid>-…` from older
/// builds) carries the owner's pid, and only dirs whose owner is gone are
/// touched. Returns how many were removed. Run in the background after ready; besides the
/// litter, every sandboxed command's Landlock rules list the temp dir's entries.
pub fn sweep_stale_tmp() -> usize {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return 0;
    };
    let me = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("outrigger-sbx-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid <= 0 || pid as u32 == me {
            continue;
        }
        let gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        // Only our own dirs (mode 0700, a directory, not a link someone planted).
        let ours = entry.file_type().is_ok_and(|t| t.is_dir());
        if gone && ours && remove_tree(&entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

impl Drop for PrivateTmp {
    /// Removed behind: the command and everything it started are dead by now, and a late
    /// removal is only disk litter that shutdown (or the next boot's sweep) clears.
    fn drop(&mut self) {
        let path = std::mem::take(&mut self.path);
        let Some(tx) = janitor() else {
            let _ = remove_tree(&path);
            return;
        };
        // Not sent (the janitor is gone): removed here.
        if let Err(mpsc::SendError(Job::Remove(path))) = tx.send(Job::Remove(path)) {
            let _ = remove_tree(&path);
        }
    }
}

/// Removes `root` and everything beneath it, links not followed, for any tree a command made.
/// std's `remove_dir_all` recurses once per level: a command that nests directories a few
/// thousand deep (`mkdir d && cd d` in a loop) would overflow the stack of the thread removing
/// them and abort the sidecar. Here each directory found below the first level is renamed up
/// to the first level before it is emptied, so the work is a loop, every path stays two names
/// long, and at most one directory is open at a time.
pub fn remove_tree(root: &Path) -> std::io::Result<()> {
    if !std::fs::symlink_metadata(root)?.is_dir() {
        return std::fs::remove_file(root);
    }
    let mut moved = 0u64;
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            if !entry.file_type()?.is_dir() {
                std::fs::remove_file(&path)?;
            } else if dir == root {
                dirs.push(path);
            } else {
                let to = loop {
                    let to = root.join(format!(".outrigger-rm-{moved}"));
                    moved += 1;
                    if std::fs::symlink_metadata(&to).is_err() {
                        break to;
                    }
                };
                std::fs::rename(&path, &to)?;
                dirs.push(to);
            }
        }
        if dir != *root {
            std::fs::remove_dir(&dir)?;
        }
    }
    std::fs::remove_dir(root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    /// `depth` directories nested in `root`, made with `mkdirat`/`openat` (no path grows long).
    fn nest(root: &Path, depth: usize) {
        let name = CString::new("d").unwrap();
        let mut fd = std::fs::File::open(root).unwrap();
        for _ in 0..depth {
            use std::os::fd::{AsRawFd, FromRawFd};
            // SAFETY: a valid dir fd and NUL-terminated name; the new fd is owned by a File.
            unsafe {
                assert_eq!(libc::mkdirat(fd.as_raw_fd(), name.as_ptr(), 0o700), 0);
                let next = libc::openat(fd.as_raw_fd(), name.as_ptr(), libc::O_DIRECTORY);
                assert!(next >= 0);
                fd = std::fs::File::from_raw_fd(next);
            }
        }
        std::fs::write(root.join("d/d/file"), "x").unwrap();
    }

    #[test]
    fn a_deep_tree_goes_on_a_small_stack_and_links_are_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("tmp");
        let outside = d.path().join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "k").unwrap();
        // Deeper than std's recursion survives on the janitor's 64 KiB stack (~500 levels).
        nest(&root, 3000);
        std::os::unix::fs::symlink(&outside, root.join("d/link")).unwrap();
        // A name the renames may meet (when this is emptied after `d`): stepped over.
        std::fs::create_dir_all(root.join(".outrigger-rm-0/x")).unwrap();
        let r = root.clone();
        let removed = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || remove_tree(&r).map_err(|e| e.to_string()))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(removed, Ok(()));
        assert!(!root.exists());
        assert!(outside.join("keep").exists());
        // A file, and a path that is not there.
        std::fs::write(d.path().join("f"), "").unwrap();
        assert!(remove_tree(&d.path().join("f")).is_ok());
        assert_eq!(
            remove_tree(&d.path().join("f")).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::NotFound)
        );
    }
}
