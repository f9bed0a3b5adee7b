//! Per-command process limits. Where a pids cgroup is writable (cgroup v2 with the `pids`
//! controller, or the v1 `pids` hierarchy), each command gets a child cgroup of ours with
//! `pids.max`: the spawned process joins it between `fork` and `exec`, everything it starts
//! stays in it, and when the call ends whatever is left is killed and the cgroup removed.
//! Elsewhere the launcher sets `RLIMIT_NPROC` inside the command's user namespace, where it
//! counts the namespaced uid's processes only (it does not bind root of the initial user
//! namespace, so there the limit is `none`). `sandbox.describe` says which applies.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Prefix of the cgroups we create: `outrigger-<sidecar pid>-<n>`.
const PREFIX: &str = "outrigger-";
/// How long the removal of a cgroup keeps killing and retrying before giving up.
const REMOVE_BUDGET: Duration = Duration::from_secs(5);

/// How a command's process count is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    CgroupV2,
    CgroupV1,
    Rlimit,
    None,
}

impl Mechanism {
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::CgroupV2 => "cgroup_v2",
            Mechanism::CgroupV1 => "cgroup_v1",
            Mechanism::Rlimit => "rlimit",
            Mechanism::None => "none",
        }
    }
}

/// A writable pids cgroup of ours, under which per-command cgroups are created.
#[derive(Debug, Clone)]
pub struct Base {
    dir: PathBuf,
    v2: bool,
}

impl Base {
    pub fn mechanism(&self) -> Mechanism {
        if self.v2 {
            Mechanism::CgroupV2
        } else {
            Mechanism::CgroupV1
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A fresh cgroup for one command, its `pids.max` set.
    pub fn create(&self, max: u32) -> std::io::Result<CommandCgroup> {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = self.dir.join(format!("{PREFIX}{}-{n}", std::process::id()));
        std::fs::create_dir(&dir)?;
        let mut cg = CommandCgroup {
            procs: cstr(&dir.join("cgroup.procs"))?,
            dir,
            v2: self.v2,
            max,
        };
        // On failure `cg` is dropped, which removes the directory again.
        cg.set_max(max)?;
        Ok(cg)
    }
}

/// One command's cgroup: whatever is still in it is killed and the directory removed when
/// it is dropped.
#[derive(Debug)]
pub struct CommandCgroup {
    dir: PathBuf,
    /// `<dir>/cgroup.procs`, ready for the async-signal-safe join in the forked child.
    procs: CString,
    v2: bool,
    max: u32,
}

impl CommandCgroup {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `cgroup.procs` path the child writes to (see [`join_in_child`]).
    pub fn procs_path(&self) -> &std::ffi::CStr {
        &self.procs
    }

    pub fn max(&self) -> u32 {
        self.max
    }

    /// Sets `pids.max`.
    pub fn set_max(&mut self, max: u32) -> std::io::Result<()> {
        std::fs::write(self.dir.join("pids.max"), max.to_string())?;
        self.max = max;
        Ok(())
    }

    /// A fresh cgroup beside this one, with the same `pids.max`.
    pub fn sibling(&self) -> std::io::Result<CommandCgroup> {
        let parent = self.dir.parent().unwrap_or(Path::new("/"));
        Base {
            dir: parent.to_path_buf(),
            v2: self.v2,
        }
        .create(self.max)
    }

    /// SIGKILLs every process in the cgroup (once: one started meanwhile needs another).
    pub fn kill_all(&self) {
        kill_members(&self.dir, self.v2);
    }
}

impl Drop for CommandCgroup {
    fn drop(&mut self) {
        // The remover thread kills what is left, then removes the directory (that waits for
        // an RCU grace period, 10–20 ms on cgroup v1). Not killed here: on cgroup v1 that is
        // a read of `cgroup.procs` on the reply's path, and whoever needs the command dead
        // before going on (a reply, a drained pipe) has killed it already (`Group`).
        let job = Job::Remove(std::mem::take(&mut self.dir), self.v2);
        if !queue(job) {
            tracing::warn!("cannot queue the removal of a command cgroup");
        }
    }
}

enum Job {
    Remove(PathBuf, bool),
    /// Answered once everything queued before it is done.
    Flush(std::sync::mpsc::Sender<()>),
}

fn queue(job: Job) -> bool {
    remover()
        .lock()
        .map(|tx| tx.send(job))
        .is_ok_and(|r| r.is_ok())
}

/// Waits (up to `timeout`) until the cgroups dropped so far are removed: at shutdown, so a
/// clean exit leaves none behind.
pub fn flush_removals(timeout: Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    if queue(Job::Flush(tx)) {
        let _ = rx.recv_timeout(timeout);
    }
}

/// The queue of cgroups to remove, served by one long-lived thread.
fn remover() -> &'static std::sync::Mutex<std::sync::mpsc::Sender<Job>> {
    static TX: std::sync::OnceLock<std::sync::Mutex<std::sync::mpsc::Sender<Job>>> =
        std::sync::OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("cgroup-remove".into())
            .spawn(move || {
                for job in rx {
                    match job {
                        Job::Remove(dir, v2) => remove_within_budget(&dir, v2),
                        Job::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the cgroup remover: {e}");
        }
        std::sync::Mutex::new(tx)
    })
}

/// Kills and removes until the directory is gone (killed processes take a moment to exit),
/// giving up after `REMOVE_BUDGET`.
fn remove_within_budget(dir: &Path, v2: bool) {
    let deadline = Instant::now() + REMOVE_BUDGET;
    while !try_remove(dir, v2) {
        if Instant::now() > deadline {
            tracing::warn!(
                "cannot remove the command cgroup {}: processes are still in it",
                dir.display()
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn kill_members(dir: &Path, v2: bool) {
    if v2 && std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    for pid in members(dir) {
        if pid > 1 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Kills what is left and removes the directory; `false` while processes are still in it
/// (they take a moment to exit after SIGKILL).
fn try_remove(dir: &Path, v2: bool) -> bool {
    kill_members(dir, v2);
    match std::fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`. Only
/// async-signal-safe calls: meant for the child between `fork` and `exec`.
pub fn join_in_child(procs: &std::ffi::CStr) -> std::io::Result<()> {
    // SAFETY: a valid NUL-terminated path; open/write/close are async-signal-safe.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // "0" moves the writer itself (v1 and v2).
        let n = libc::write(fd, b"0".as_ptr().cast(), 1);
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if n != 1 {
            return Err(err);
        }
    }
    Ok(())
}

/// The pids listed in a cgroup's `cgroup.procs`.
pub fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Starts a short-lived process that joins the cgroup whose `cgroup.procs` it is given.
pub type JoinTest<'a> = dyn Fn(&std::ffi::CStr) -> std::io::Result<()> + 'a;

/// Finds a pids cgroup of ours in which children can be created, moved into and limited
/// (v2 first, then v1), and removes cgroups left by sidecars that are gone. `join_test`
/// starts a short-lived process with the given `cgroup.procs` to join (an error when the
/// join fails); without it the join is not tried. Blocking.
pub fn detect(join_test: Option<&JoinTest<'_>>) -> Result<Base, Vec<String>> {
    let disabled = std::env::var(super::launcher::DISABLE_ENV).unwrap_or_default();
    if disabled.split(',').any(|d| d.trim() == "cgroup") {
        return Err(vec![format!(
            "cgroup: disabled by {}",
            super::launcher::DISABLE_ENV
        )]);
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut errors = Vec::new();
    for v2 in [true, false] {
        let Some(dir) = own_dir(&mountinfo, &own, v2) else {
            continue;
        };
        let base = Base { dir, v2 };
        match usable(&base, join_test) {
            Ok(()) => {
                sweep(&base.dir);
                return Ok(base);
            }
            Err(e) => errors.push(format!(
                "cgroup {}: {} is not usable: {e}",
                if v2 { "v2" } else { "v1 pids" },
                base.dir.display()
            )),
        }
    }
    if errors.is_empty() {
        errors.push(
            "cgroup: no cgroup v2 with the pids controller and no v1 pids hierarchy is mounted"
                .into(),
        );
    }
    Err(errors)
}

/// Our own cgroup's directory in the v2 hierarchy (`v2`) or the v1 `pids` hierarchy.
fn own_dir(mountinfo: &str, own: &str, v2: bool) -> Option<PathBuf> {
    let path = own.lines().find_map(|l| {
        let mut it = l.splitn(3, ':');
        let (id, controllers, path) = (it.next()?, it.next()?, it.next()?);
        let hit = if v2 {
            id == "0" && controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == "pids")
        };
        hit.then(|| path.to_string())
    })?;
    let (root, mountpoint) = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split_whitespace();
        let (fstype, _source, opts) = (r.next()?, r.next()?, r.next().unwrap_or(""));
        let hit = if v2 {
            fstype == "cgroup2"
        } else {
            fstype == "cgroup" && opts.split(',').any(|o| o == "pids")
        };
        if !hit {
            return None;
        }
        let f: Vec<&str> = left.split_whitespace().collect();
        Some((unescape(f.get(3)?), unescape(f.get(4)?)))
    })?;
    // The mount shows the hierarchy from `root` down; our path is relative to the hierarchy.
    let rel = Path::new(&path)
        .strip_prefix(&root)
        .unwrap_or_else(|_| Path::new(&path));
    let rel = rel.strip_prefix("/").unwrap_or(rel);
    Some(Path::new(&mountpoint).join(rel))
}

/// mountinfo escapes blanks and backslashes as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 4])
                .ok()
                .and_then(|o| u8::from_str_radix(o, 8).ok())
        {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Creates a test child, limits it and (when a join test is given) moves a process into it.
fn usable(base: &Base, join_test: Option<&JoinTest<'_>>) -> std::io::Result<()> {
    if base.v2 {
        let controllers = std::fs::read_to_string(base.dir.join("cgroup.controllers"))?;
        if !controllers.split_whitespace().any(|c| c == "pids") {
            return Err(std::io::Error::other(
                "the pids controller is not delegated",
            ));
        }
        let subtree = std::fs::read_to_string(base.dir.join("cgroup.subtree_control"))?;
        if !subtree.split_whitespace().any(|c| c == "pids") {
            // Fails (EBUSY) when our cgroup holds processes and is not the root.
            std::fs::write(base.dir.join("cgroup.subtree_control"), "+pids")?;
        }
    }
    let cg = base.create(8)?;
    if let Some(test) = join_test {
        test(cg.procs_path())?;
    }
    drop(cg);
    Ok(())
}

/// Removes the cgroups of sidecars that no longer run (SIGKILLed ones cannot clean up),
/// killing anything left in them.
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid <= 1 || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let dir = e.path();
        let deadline = Instant::now() + Duration::from_secs(1);
        while !try_remove(&dir, false) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn cstr(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"))
}

/// Whether `RLIMIT_NPROC` would bind a command here: not for root of the initial user
/// namespace (the kernel exempts it, even inside a new user namespace).
pub fn rlimit_binds() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return true;
    }
    // Root: does our uid 0 map to the initial namespace's 0?
    let map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
    !map.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() == 3 && f[0] == "0" && f[1] == "0"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_our_cgroup_in_each_hierarchy() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
31 25 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
32 25 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
";
        let own = "8:pids:/a/b\n1:cpu:/\n0::/user.slice/x.scope\n";
        assert_eq!(
            own_dir(mountinfo, own, false),
            Some(PathBuf::from("/sys/fs/cgroup/pids/a/b"))
        );
        assert_eq!(
            own_dir(mountinfo, own, true),
            Some(PathBuf::from("/sys/fs/cgroup/unified/user.slice/x.scope"))
        );
        // A mount of a sub-tree (a container's view): the path is taken relative to it.
        let sub = "40 1 0:26 /docker/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            own_dir(sub, "0::/docker/c1/inner\n", true),
            Some(PathBuf::from("/sys/fs/cgroup/inner"))
        );
        assert_eq!(own_dir("", own, true), None);
        assert_eq!(unescape(r"/a\040b"), "/a b");
    }

    #[test]
    fn mechanism_names() {
        assert_eq!(Mechanism::CgroupV1.as_str(), "cgroup_v1");
        assert_eq!(Mechanism::None.as_str(), "none");
    }
}
