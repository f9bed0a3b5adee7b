//! The single-writer lease: an exclusive `flock` on `<db>.lock`, which holds the owner's pid.
//! The kernel drops the lock when the process dies, so a crash never leaves a stale lease.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::error::StoreError;

/// Held for the life of the `Store`; dropping it closes the file and releases the lock.
#[derive(Debug)]
pub struct Lease {
    _file: File,
    pub path: PathBuf,
}

pub fn lock_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(".lock");
    PathBuf::from(s)
}

/// Since when a live process holds the lease on `db` (when it wrote its pid), or `None` when
/// nobody does. Probes with a shared lock released at once, so it never holds a starting
/// sidecar back; for readers that must tell a live writer's rows from a dead one's.
pub fn held_since(db: &Path) -> Option<std::time::SystemTime> {
    let file = File::open(lock_path(db)).ok()?;
    // SAFETY: flock on a descriptor we own; no memory is involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    if rc == 0 {
        // SAFETY: as above; releases the probe's own lock.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
        return None;
    }
    file.metadata().and_then(|m| m.modified()).ok()
}

/// How long a new owner waits when the recorded owner has exited but its lease is still
/// held. A child it forked shares the lock until that child's exec closes it (or the child
/// dies of the death signal), which takes moments; a host that restarts the sidecar right
/// after a crash lands in that window.
const DEAD_OWNER_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether a process with this pid exists.
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

pub fn acquire(db: &Path) -> Result<Lease, StoreError> {
    let path = lock_path(db);
    let open_err = |e: std::io::Error| StoreError::Open {
        path: path.clone(),
        why: format!("cannot open the lease file: {e}"),
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(open_err)?;
    let started = std::time::Instant::now();
    loop {
        // SAFETY: flock on a descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(open_err(err));
        }
        let mut text = String::new();
        let _ = file.rewind().and_then(|()| file.read_to_string(&mut text));
        let pid = text.trim().parse::<i32>().ok();
        let dead = pid.is_some_and(|p| !alive(p));
        if dead && started.elapsed() < DEAD_OWNER_GRACE {
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        let owner = match pid {
            Some(pid) if dead => {
                format!("a process started by pid {pid}, which has exited (wait for it to end)")
            }
            Some(pid) => format!("pid {pid}"),
            // The owner locks before it writes its pid: a tiny window reads empty.
            None => "another process (pid not yet recorded)".to_string(),
        };
        return Err(StoreError::Owned {
            path: db.to_path_buf(),
            lock: path,
            owner,
        });
    }
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .and_then(|()| file.flush());
    written.map_err(open_err)?;
    Ok(Lease { _file: file, path })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pid of a process that has exited and been reaped.
    fn dead_pid() -> i32 {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id() as i32;
        c.wait().unwrap();
        pid
    }

    /// Holds `db`'s lease through a descriptor of our own, as a forked child of a dead owner
    /// does, with the dead owner's pid recorded.
    fn held_by_orphan(db: &Path) -> File {
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(lock_path(db))
            .unwrap();
        // SAFETY: flock on a descriptor we own.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(rc, 0);
        writeln!(f, "{}", dead_pid()).unwrap();
        f
    }

    #[test]
    fn a_lease_left_by_an_exited_owner_is_taken_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let orphan = held_by_orphan(&db);
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(150));
            drop(orphan);
        });
        let started = std::time::Instant::now();
        let lease = acquire(&db).expect("taken after the orphan let go");
        assert!(started.elapsed() >= std::time::Duration::from_millis(100));
        release.join().unwrap();
        let text = std::fs::read_to_string(&lease.path).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
    }

    #[test]
    fn a_lease_still_held_after_the_grace_names_the_exited_owner() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let _orphan = held_by_orphan(&db);
        let started = std::time::Instant::now();
        let err = acquire(&db).unwrap_err().to_string();
        assert!(started.elapsed() >= DEAD_OWNER_GRACE);
        assert!(err.contains("which has exited"), "{err}");
    }
}
