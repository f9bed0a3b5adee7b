//! The namespace layer: a user namespace (same uid/gid mapped), a private mount namespace
//! where the protected paths are bind-mounted read-only and each hidden directory is covered
//! by an empty read-only tmpfs (with the revealed paths inside it bound back read-only), a
//! network namespace (loopback down) when the network is off, and optionally a PID namespace
//! for the children forked next. Unprivileged user namespaces are often blocked (AppArmor,
//! hardened containers), so the probe decides whether this layer is attempted.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sched::{CloneFlags, unshare};
use nix::sys::stat::Mode;

#[derive(Default)]
pub struct Request<'a> {
    pub network: bool,
    pub pid: bool,
    pub protected: &'a [PathBuf],
    /// Directories covered by an empty read-only tmpfs (files are left to Landlock).
    pub hidden: &'a [PathBuf],
    /// Paths inside hidden directories bound back, read-only.
    pub revealed: &'a [PathBuf],
}

/// Flags of the covering tmpfs mounts.
const MASK_FLAGS: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;

pub fn enter(req: &Request<'_>) -> Result<(), String> {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS;
    if !req.network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if req.pid {
        flags |= CloneFlags::CLONE_NEWPID;
    }
    unshare(flags).map_err(|e| format!("namespaces: unshare: {e}"))?;
    write_proc("/proc/self/setgroups", "deny")?;
    write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
    write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
    // Nothing done here may propagate back to the host's mount table.
    mount(None, Path::new("/"), libc::MS_REC | libc::MS_PRIVATE)
        .map_err(|e| format!("namespaces: making / private: {e}"))?;
    // Opened before anything covers them.
    let reveals: Vec<(PathBuf, OwnedFd, bool)> = req
        .revealed
        .iter()
        .filter_map(|p| {
            let dir = std::fs::metadata(p).ok()?.is_dir();
            let fd = nix::fcntl::open(p, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()).ok()?;
            Some((p.clone(), fd, dir))
        })
        .collect();
    for p in req.protected {
        if std::fs::symlink_metadata(p).is_ok() {
            bind_read_only(p)
                .map_err(|e| format!("namespaces: making {} read-only: {e}", p.display()))?;
        }
    }
    mask(req.hidden, &reveals)
}

/// Covers each existing hidden directory (not already beneath another) with an empty tmpfs,
/// binds the revealed paths back into it, then makes the tmpfs read-only.
fn mask(hidden: &[PathBuf], reveals: &[(PathBuf, OwnedFd, bool)]) -> Result<(), String> {
    let mut dirs: Vec<&PathBuf> = hidden
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect();
    dirs.sort_by_key(|p| p.components().count());
    let mut masked: Vec<&PathBuf> = Vec::new();
    for d in dirs {
        if masked.iter().any(|m| d.starts_with(m)) {
            continue;
        }
        mount_tmpfs(d).map_err(|e| format!("namespaces: hiding {}: {e}", d.display()))?;
        masked.push(d);
    }
    for (p, fd, dir) in reveals {
        let Some(root) = masked.iter().find(|m| p.starts_with(m)) else {
            continue;
        };
        let bind = || -> std::io::Result<()> {
            make_mount_point(root, p, *dir)?;
            let src = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
            mount(Some(&src), p, libc::MS_BIND | libc::MS_REC)?;
            let locked = mount_flags(p)?;
            mount(
                None,
                p,
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | locked,
            )
        };
        bind().map_err(|e| format!("namespaces: revealing {}: {e}", p.display()))?;
    }
    for m in masked {
        mount(None, m, libc::MS_REMOUNT | libc::MS_RDONLY | MASK_FLAGS).map_err(|e| {
            format!(
                "namespaces: making the cover of {} read-only: {e}",
                m.display()
            )
        })?;
    }
    Ok(())
}

fn mount_tmpfs(p: &Path) -> std::io::Result<()> {
    let tgt = cstr(p)?;
    // SAFETY: valid C strings; the data argument is a NUL-terminated option string.
    let rc = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            tgt.as_ptr(),
            c"tmpfs".as_ptr(),
            MASK_FLAGS,
            c"mode=0755".as_ptr().cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Creates `p` (a directory, or an empty file) and its missing parents beneath `root`, in
/// the still-writable tmpfs covering `root`.
fn make_mount_point(root: &Path, p: &Path, dir: bool) -> std::io::Result<()> {
    if let Some(parent) = p.parent().filter(|d| d.starts_with(root)) {
        std::fs::create_dir_all(parent)?;
    }
    let made = if dir {
        std::fs::create_dir(p)
    } else {
        std::fs::write(p, b"")
    };
    match made {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// Mounts a fresh procfs on `/proc` (call as pid 1 of the new PID namespace, inside the
/// private mount namespace). Returns whether it worked.
pub fn mount_proc() -> bool {
    let rc = unsafe {
        // SAFETY: static C strings, no data argument.
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    rc == 0
}

/// Whether a read-only bind remount and a read-only tmpfs cover work here (the probe calls
/// it inside its namespaces, on a directory of its own mount namespace).
pub fn can_bind_read_only(p: &Path) -> Result<(), String> {
    bind_read_only(p).map_err(|e| format!("namespaces: read-only bind mounts fail: {e}"))?;
    mount_tmpfs(p)
        .and_then(|()| mount(None, p, libc::MS_REMOUNT | libc::MS_RDONLY | MASK_FLAGS))
        .map_err(|e| format!("namespaces: read-only tmpfs mounts fail: {e}"))
}

fn write_proc(path: &str, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("namespaces: writing {path}: {e}"))
}

fn bind_read_only(p: &Path) -> std::io::Result<()> {
    mount(Some(p), p, libc::MS_BIND | libc::MS_REC)?;
    // A remount inside a user namespace must keep the flags the original mount locked.
    let locked = mount_flags(p)?;
    mount(
        None,
        p,
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | locked,
    )
}

fn mount_flags(p: &Path) -> std::io::Result<libc::c_ulong> {
    let c = cstr(p)?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: c is a valid C string; st is a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs succeeded and filled the struct.
    let f = unsafe { st.assume_init() }.f_flag;
    let mut out = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if f & st_flag != 0 {
            out |= ms_flag;
        }
    }
    Ok(out)
}

fn cstr(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"))
}

fn mount(source: Option<&Path>, target: &Path, flags: libc::c_ulong) -> std::io::Result<()> {
    let src = source.map(cstr).transpose()?;
    let tgt = cstr(target)?;
    // SAFETY: valid C strings (or null) and no data argument.
    let rc = unsafe {
        libc::mount(
            src.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            tgt.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
