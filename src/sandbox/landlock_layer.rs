//! The Landlock layer: read everywhere except hidden paths (but for the revealed paths inside
//! them), write only beneath the writable roots and the private temp dir, TCP connect/bind
//! denied when the network is off, and the abstract-unix-socket (network off) and signal
//! scopes.
//!
//! Landlock only grants, so "everything but X" is built by granting each sibling on the way
//! down to X instead of X's ancestors; symlinks are skipped (their targets carry their own
//! rules), so a link cannot re-grant a hidden path.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::policy::Policy;

/// The newest ABI this layer is written and tested against (the crate degrades below it).
const TARGET_ABI: ABI = ABI::V7;

/// Device files every command may write (shell redirections, `dd of=/dev/null`, …).
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// The kernel's Landlock ABI version (0 when unsupported). Does not restrict anything.
pub fn kernel_abi() -> i32 {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attr only queries the version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    i32::try_from(v).unwrap_or(0).max(0)
}

/// Restricts the calling process (and everything it later execs or forks).
pub fn apply(policy: &Policy, tmp_dir: Option<&Path>) -> Result<(), String> {
    let err = |what: &str, e: &dyn std::fmt::Display| format!("landlock: {what}: {e}");
    let all = AccessFs::from_all(TARGET_ABI);
    let read = AccessFs::from_read(TARGET_ABI);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|e| err("handling filesystem access", &e))?;
    let mut scopes: BitFlags<Scope> = Scope::Signal.into();
    if !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| err("handling TCP access", &e))?;
        scopes |= Scope::AbstractUnixSocket;
    }
    ruleset = ruleset
        .scope(scopes)
        .map_err(|e| err("adding scopes", &e))?;
    let mut created = ruleset
        .create()
        .map_err(|e| err("creating the ruleset", &e))?;

    let hidden: Vec<PathBuf> = policy.hidden_paths.iter().map(|p| canonical(p)).collect();
    let mut rules: Vec<Rule> = Vec::new();
    // Directory listings everywhere (names only); file contents and exec via the expansion.
    rules.push((PathBuf::from("/"), AccessFs::ReadDir.into(), true));
    grant(Path::new("/"), read, &hidden, &mut rules, true);
    // Read-only exceptions inside hidden paths (this session's spill files, a plugin's dir).
    for p in &policy.revealed_paths {
        let c = canonical(p);
        if let Ok(m) = std::fs::metadata(&c) {
            rules.push((c, read, m.is_dir()));
        }
    }
    for root in policy
        .writable_roots
        .iter()
        .map(PathBuf::as_path)
        .chain(tmp_dir)
    {
        let root = canonical(root);
        if let Ok(m) = std::fs::metadata(&root) {
            grant(&root, all, &hidden, &mut rules, m.is_dir());
        }
    }
    for dev in WRITABLE_DEVICES {
        rules.push((
            PathBuf::from(dev),
            AccessFs::ReadFile | AccessFs::WriteFile,
            false,
        ));
    }
    for (path, access, is_dir) in rules {
        let Ok(fd) = PathFd::new(&path) else {
            // Vanished since it was listed, or unopenable: nothing to grant.
            continue;
        };
        let access = if is_dir {
            access
        } else {
            access & AccessFs::from_file(TARGET_ABI)
        };
        if access.is_empty() {
            continue;
        }
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| err(&format!("adding a rule for {}", path.display()), &e))?;
    }
    let status = created
        .restrict_self()
        .map_err(|e| err("restricting the process", &e))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("landlock: the kernel enforced none of the ruleset".into());
    }
    Ok(())
}

/// `p` with symlinks resolved; a path that does not exist yet keeps its missing tail on the
/// resolved existing ancestor (so a hidden file created later is still covered).
pub fn canonical(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    match (p.parent(), p.file_name()) {
        (Some(parent), Some(name)) if parent != p => canonical(parent).join(name),
        _ => p.to_path_buf(),
    }
}

/// A path, what it is granted, and whether it is a directory (known from the listing, so
/// applying the rules costs no `stat` per path).
type Rule = (PathBuf, BitFlags<AccessFs>, bool);

/// Grants `access` beneath `dir`, except beneath any of `hidden`: where a hidden path lies
/// inside, `dir` itself gets no rule and each child is granted (recursively) instead.
fn grant(
    dir: &Path,
    access: BitFlags<AccessFs>,
    hidden: &[PathBuf],
    out: &mut Vec<Rule>,
    is_dir: bool,
) {
    // A root inside a hidden path (a writable root named there) gets nothing.
    if hidden.iter().any(|h| dir.starts_with(h)) {
        return;
    }
    let inside: Vec<PathBuf> = hidden
        .iter()
        .filter(|h| h.starts_with(dir))
        .cloned()
        .collect();
    if inside.is_empty() {
        out.push((dir.to_path_buf(), access, is_dir));
        return;
    }
    if inside.iter().any(|h| h == dir) {
        return;
    }
    // Unlistable: grant nothing below rather than risk granting a hidden path.
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        // The type from the listing itself (`d_type`; std falls back to lstat where the
        // filesystem does not fill it): no stat per entry.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        let path = entry.path();
        if kind.is_dir() {
            grant(&path, access, &inside, out, true);
        } else if !inside.contains(&path) {
            out.push((path, access, false));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_paths_are_carved_out_of_grants() {
        let d = tempfile::tempdir().unwrap();
        let root = canonical(d.path());
        std::fs::create_dir_all(root.join("a/secret")).unwrap();
        std::fs::create_dir_all(root.join("a/open")).unwrap();
        std::fs::write(root.join("a/file"), "x").unwrap();
        std::fs::create_dir_all(root.join("b")).unwrap();
        std::os::unix::fs::symlink(root.join("a/secret"), root.join("link")).unwrap();
        let mut out = Vec::new();
        grant(
            &root,
            AccessFs::ReadFile.into(),
            &[root.join("a/secret")],
            &mut out,
            true,
        );
        let mut beneath = Vec::new();
        grant(
            &root.join("a/secret/deeper"),
            AccessFs::ReadFile.into(),
            &[root.join("a/secret")],
            &mut beneath,
            true,
        );
        assert!(
            beneath.is_empty(),
            "a root beneath a hidden path gets nothing"
        );
        let mut paths: Vec<PathBuf> = out.into_iter().map(|(p, _, _)| p).collect();
        paths.sort();
        assert_eq!(
            paths,
            vec![root.join("a/file"), root.join("a/open"), root.join("b")]
        );
    }

    #[test]
    fn missing_paths_resolve_onto_their_existing_ancestor() {
        let d = tempfile::tempdir().unwrap();
        let c = canonical(&d.path().join("not/yet"));
        assert_eq!(c, canonical(d.path()).join("not/yet"));
    }
}
