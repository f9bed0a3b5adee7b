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
    // SAFETY: flock on a descriptor we own; no memory is involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(open_err(err));
        }
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let owner = match text.trim().parse::<u32>() {
            Ok(pid) => format!("pid {pid}"),
            // The owner locks before it writes its pid: a tiny window reads empty.
            Err(_) => "another process (pid not yet recorded)".to_string(),
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
