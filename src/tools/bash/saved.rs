//! Full bash output saved for paging (`.outrigger/tmp/bash-output/`, dir 0700, files 0600),
//! and the startup prune: files older than 7 days go, then older files toward a 250 MiB
//! budget, never files younger than an hour.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Where saved output lives, relative to the workspace.
pub const OUTPUT_DIR: &str = ".outrigger/tmp/bash-output";
/// Most bytes saved per call.
pub const SAVE_CAP: usize = 1024 * 1024;
/// Saved output older than this is pruned.
const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// Total size the prune works toward.
const BUDGET_BYTES: u64 = 250 * 1024 * 1024;
/// Files younger than this are never evicted for the budget.
const MIN_AGE_FOR_BUDGET: Duration = Duration::from_secs(3600);

/// Writes `stdout` (and `stderr` after a separator) into a new 0600 file; returns its path.
pub fn save(
    workspace: &Path,
    call_id: &str,
    stdout: &str,
    stderr: &str,
) -> std::io::Result<PathBuf> {
    // Commands can write the workspace: never follow a link they planted on our path.
    let dir = ensure_dirs(workspace)?;
    // An existing directory keeps its mode from creation: enforce it.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    let stamp = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let id: String = call_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(64)
        .collect();
    let mut body = Vec::with_capacity((stdout.len() + stderr.len()).min(SAVE_CAP) + 16);
    body.extend_from_slice(stdout.as_bytes());
    if !stderr.is_empty() {
        if !body.is_empty() && !body.ends_with(b"\n") {
            body.push(b'\n');
        }
        body.extend_from_slice(b"--- stderr ---\n");
        body.extend_from_slice(stderr.as_bytes());
    }
    body.truncate(SAVE_CAP);
    for n in 0..100u32 {
        let path = dir.join(format!("{stamp}-{id}-{n}.log"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(mut f) => {
                f.write_all(&body)?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free saved-output file name"))
}

/// Checks that every component of [`OUTPUT_DIR`] under `workspace` is a real directory, not
/// a symlink a command planted to redirect our writes or deletes.
fn real_dirs(workspace: &Path) -> std::io::Result<()> {
    let mut p = workspace.to_path_buf();
    for part in Path::new(OUTPUT_DIR).components() {
        p.push(part);
        let m = std::fs::symlink_metadata(&p)?;
        if !m.file_type().is_dir() {
            return Err(std::io::Error::other(format!(
                "{} is not a plain directory (a symlink?); not following it",
                p.display()
            )));
        }
    }
    Ok(())
}

/// Creates [`OUTPUT_DIR`] under `workspace` one component at a time (0700), refusing any
/// component that exists as something other than a plain directory.
fn ensure_dirs(workspace: &Path) -> std::io::Result<PathBuf> {
    let mut p = workspace.to_path_buf();
    for part in Path::new(OUTPUT_DIR).components() {
        p.push(part);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(_) => {
                return Err(std::io::Error::other(format!(
                    "{} is not a plain directory (a symlink?); not following it",
                    p.display()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new().mode(0o700).create(&p)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(p)
}

/// Prunes `workspace`'s saved output; returns how many files were removed.
pub fn prune(workspace: &Path) -> usize {
    if real_dirs(workspace).is_err() {
        return 0;
    }
    prune_dir(&workspace.join(OUTPUT_DIR), SystemTime::now(), BUDGET_BYTES)
}

fn prune_dir(dir: &Path, now: SystemTime, budget: u64) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut files: Vec<(PathBuf, SystemTime, u64)> = entries
        .flatten()
        .filter_map(|e| {
            // DirEntry::metadata does not follow symlinks: a link is not a file to prune.
            let m = e.metadata().ok()?;
            m.is_file()
                .then(|| (e.path(), m.modified().unwrap_or(now), m.len()))
        })
        .collect();
    let age = |t: SystemTime| now.duration_since(t).unwrap_or_default();
    let mut removed = 0;
    files.retain(|(p, t, _)| {
        if age(*t) > MAX_AGE && std::fs::remove_file(p).is_ok() {
            removed += 1;
            false
        } else {
            true
        }
    });
    files.sort_by_key(|(_, t, _)| *t);
    let mut total: u64 = files.iter().map(|(_, _, n)| n).sum();
    for (p, t, n) in &files {
        if total <= budget || age(*t) < MIN_AGE_FOR_BUDGET {
            break;
        }
        if std::fs::remove_file(p).is_ok() {
            total -= n;
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn saved_files_are_private() {
        let d = tempfile::tempdir().unwrap();
        let p = save(d.path(), "call/1", "out\n", "err\n").unwrap();
        assert!(p.starts_with(d.path().join(OUTPUT_DIR)));
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "out\n--- stderr ---\nerr\n"
        );
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        let dir = d.path().join(OUTPUT_DIR);
        assert_eq!(std::fs::metadata(dir).unwrap().mode() & 0o777, 0o700);
    }

    #[test]
    fn a_planted_symlink_is_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(".outrigger/tmp")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), d.path().join(OUTPUT_DIR)).unwrap();
        let before = std::fs::metadata(elsewhere.path()).unwrap().mode();
        assert!(save(d.path(), "c", "out", "").is_err());
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
        assert_eq!(std::fs::metadata(elsewhere.path()).unwrap().mode(), before);
        std::fs::write(elsewhere.path().join("old"), "x").unwrap();
        assert_eq!(prune(d.path()), 0);
        assert!(elsewhere.path().join("old").exists());
    }

    #[test]
    fn prune_removes_old_files_then_oldest_toward_the_budget() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join(OUTPUT_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["a", "b", "c"] {
            std::fs::write(dir.join(name), vec![b'x'; 100]).unwrap();
        }
        let now = SystemTime::now();
        let set = |name: &str, ago: u64| {
            let f = std::fs::File::options()
                .write(true)
                .open(dir.join(name))
                .unwrap();
            f.set_modified(now - Duration::from_secs(ago)).unwrap();
        };
        set("a", 8 * 24 * 3600); // past the age limit
        set("b", 2 * 3600); // evictable for the budget
        set("c", 60); // too young to evict
        let removed = prune_dir(&dir, now, 150);
        assert_eq!(removed, 2);
        assert!(!dir.join("a").exists() && !dir.join("b").exists());
        assert!(dir.join("c").exists());
    }
}
