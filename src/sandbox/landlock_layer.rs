//! The Landlock layer: read everywhere except hidden paths (but for the revealed paths inside
//! them), write only beneath the writable roots and the private temp dir, TCP connect/bind
//! denied when the network is off, and the abstract-unix-socket (network off) and signal
//! scopes.
//!
//! Landlock only grants, so "everything but X" is built by granting each sibling on the way
//! down to X instead of X's ancestors; symlinks are skipped (their targets carry their own
//! rules), so a link cannot re-grant a hidden path.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
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
    let mut built = Built::new(policy)?;
    if let Some(t) = tmp_dir {
        built.add_root(t)?;
    }
    built.restrict()
}

fn err(what: &str, e: &dyn std::fmt::Display) -> String {
    format!("landlock: {what}: {e}")
}

/// A directory the walk listed, as it was then: a listing taken ahead of time (a warm spare
/// builds its rules before the command is known) is only used while none of these changed.
#[derive(PartialEq, Debug)]
struct Listed {
    path: PathBuf,
    stamp: Option<Stamp>,
}

/// Identity and modification time of a directory. A change of its entries moves `mtime`.
#[derive(PartialEq, Debug, Clone, Copy)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime: i64,
    mtime_nsec: i64,
}

/// File timestamps come from a coarse clock: a directory changed within this long before
/// its listing could change again without its mtime moving, so such a listing is never
/// trusted later.
const COARSE_CLOCK: std::time::Duration = std::time::Duration::from_millis(50);

fn stamp(p: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec(),
    })
}

/// A ruleset with its rules added but not yet enforced, and what its listing saw.
pub struct Built {
    ruleset: landlock::RulesetCreated,
    /// The policy's hidden paths, as given.
    hidden_given: Vec<PathBuf>,
    /// Those resolved when the rules were built.
    hidden: Vec<PathBuf>,
    listed: Vec<Listed>,
}

impl Built {
    /// Creates the ruleset for `policy` (everything but the private temp dir).
    pub fn new(policy: &Policy) -> Result<Built, String> {
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
        let created = ruleset
            .create()
            .map_err(|e| err("creating the ruleset", &e))?;
        let hidden = Resolver::all(&policy.hidden_paths);
        let started = std::time::SystemTime::now();
        let mut walk = Walk::default();
        // Directory listings everywhere (names only); file contents and exec via the expansion.
        walk.rules
            .push((PathBuf::from("/"), AccessFs::ReadDir.into(), true));
        walk.grant(Path::new("/"), read, &hidden, true);
        // Read-only exceptions inside hidden paths (this session's spill files, a plugin's dir).
        for p in &policy.revealed_paths {
            let c = canonical(p);
            if let Ok(m) = std::fs::metadata(&c) {
                walk.rules.push((c, read, m.is_dir()));
            }
        }
        for root in &policy.writable_roots {
            walk.root(root, all, &hidden);
        }
        for dev in WRITABLE_DEVICES {
            walk.rules.push((
                PathBuf::from(dev),
                AccessFs::ReadFile | AccessFs::WriteFile,
                false,
            ));
        }
        let mut built = Built {
            ruleset: created,
            hidden_given: policy.hidden_paths.clone(),
            hidden,
            listed: Vec::new(),
        };
        built.add(walk.rules)?;
        // A listing the coarse clock cannot vouch for is marked unknown: never fresh.
        let trusted = started.checked_sub(COARSE_CLOCK);
        built.listed = walk
            .listed
            .into_iter()
            .map(|path| {
                let stamp = stamp(&path).filter(|s| {
                    let mtime = std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(
                        u64::try_from(s.mtime).unwrap_or(0),
                        u32::try_from(s.mtime_nsec).unwrap_or(0),
                    ));
                    matches!((mtime, trusted), (Some(m), Some(t)) if m < t)
                });
                Listed { path, stamp }
            })
            .collect();
        Ok(built)
    }

    /// Whether the rules still say what a walk now would: every directory the walk listed
    /// is the same directory, unchanged, and the hidden paths are the ones the rules were
    /// built for. Not resolved again here: the sidecar resolves them for every command just
    /// before its order (`secrets::hidden_for`), so a link that appeared since makes them
    /// another list (and the prepared init's policy no longer matches: the command starts
    /// cold). Revealed paths and writable roots are not listed; the caller compares those
    /// itself.
    pub fn fresh(&self, policy: &Policy) -> bool {
        self.listed
            .iter()
            .all(|l| l.stamp.is_some() && stamp(&l.path) == l.stamp)
            && policy.hidden_paths == self.hidden_given
    }

    /// Grants everything beneath `root` (the private temp dir), but for hidden paths.
    pub fn add_root(&mut self, root: &Path) -> Result<(), String> {
        let mut walk = Walk::default();
        walk.root(root, AccessFs::from_all(TARGET_ABI), &self.hidden);
        self.add(walk.rules)
    }

    fn add(&mut self, rules: Vec<Rule>) -> Result<(), String> {
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
            (&mut self.ruleset)
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| err(&format!("adding a rule for {}", path.display()), &e))?;
        }
        Ok(())
    }

    /// Enforces the ruleset on the calling process.
    pub fn restrict(self) -> Result<(), String> {
        let status = self
            .ruleset
            .restrict_self()
            .map_err(|e| err("restricting the process", &e))?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err("landlock: the kernel enforced none of the ruleset".into());
        }
        Ok(())
    }
}

/// `p` with symlinks resolved; a path that does not exist yet keeps its missing tail on the
/// resolved existing ancestor (so a hidden file created later is still covered).
pub fn canonical(p: &Path) -> PathBuf {
    match p.canonicalize() {
        Ok(c) => c,
        Err(_) => match (p.parent(), p.file_name()) {
            (Some(parent), Some(name)) if parent != p => canonical(parent).join(name),
            _ => p.to_path_buf(),
        },
    }
}

/// [`canonical`] for many paths in one call, each directory on the way looked at once: the
/// hidden paths of a command (the credential list) share a few parents (`~`, `~/.config`)
/// and are mostly missing. `realpath` costs a `readlink` per component, walked again for
/// every entry and again for each missing entry's parent (~90 per command); this costs one
/// `lstat` per new component, none beneath a missing one.
#[derive(Default)]
pub struct Resolver {
    /// Each path asked (and each ancestor on the way): where it resolves, and whether that
    /// exists.
    known: HashMap<PathBuf, (PathBuf, bool)>,
    /// Each path `lstat`ed, and whether it existed (a link makes the answers unsettled).
    looked: Vec<(PathBuf, bool)>,
    /// A link, `..`, or a relative path was met: the answers depend on more than `looked`.
    unsettled: bool,
}

impl Resolver {
    /// Each of `paths`, resolved.
    pub fn all(paths: &[PathBuf]) -> Vec<PathBuf> {
        let mut resolver = Resolver::default();
        paths.iter().map(|p| resolver.canonical(p)).collect()
    }

    pub fn canonical(&mut self, p: &Path) -> PathBuf {
        self.resolve(p).0
    }

    /// What the answers so far depended on: the paths `lstat`ed and whether each existed.
    /// `None` when they depended on more (a link was followed, `..` or a relative path was
    /// met). While every one of them is as it was ([`Resolver::unchanged`]), the same
    /// questions get the same answers: without links, a path resolves to its parent's
    /// answer joined with its name, and exists when `lstat` finds it.
    pub fn depends_on(self) -> Option<Vec<(PathBuf, bool)>> {
        (!self.unsettled).then_some(self.looked)
    }

    /// Each path in `looked` still exists, and is not a link, or is still missing, as
    /// recorded.
    pub fn unchanged(looked: &[(PathBuf, bool)]) -> bool {
        looked
            .iter()
            .all(|(p, existed)| match std::fs::symlink_metadata(p) {
                Ok(m) => *existed && !m.file_type().is_symlink(),
                Err(_) => !existed,
            })
    }

    fn resolve(&mut self, p: &Path) -> (PathBuf, bool) {
        if let Some(r) = self.known.get(p) {
            return r.clone();
        }
        let r = match (p.parent(), p.file_name()) {
            (Some(parent), Some(name)) if parent != p && p.is_absolute() => {
                let (dir, exists) = self.resolve(parent);
                let at = dir.join(name);
                if !exists {
                    (at, false)
                } else {
                    let meta = std::fs::symlink_metadata(&at);
                    let link = meta.as_ref().is_ok_and(|m| m.file_type().is_symlink());
                    self.unsettled |= link;
                    self.looked.push((at.clone(), meta.is_ok() && !link));
                    match meta {
                        // A link: where it points, as `realpath` finds it; a dangling one
                        // keeps its own name, as `canonical` does.
                        Ok(_) if link => match at.canonicalize() {
                            Ok(c) => (c, true),
                            Err(_) => (at, false),
                        },
                        Ok(_) => (at, true),
                        Err(_) => (at, false),
                    }
                }
            }
            _ if p == Path::new("/") => (p.to_path_buf(), true),
            // `..` at the end, a relative path: as `canonical` does them.
            _ => {
                self.unsettled = true;
                match p.canonicalize() {
                    Ok(c) => (c, true),
                    Err(_) => (canonical(p), false),
                }
            }
        };
        self.known.insert(p.to_path_buf(), r.clone());
        r
    }
}

/// A path, what it is granted, and whether it is a directory (known from the listing, so
/// applying the rules costs no `stat` per path).
type Rule = (PathBuf, BitFlags<AccessFs>, bool);

/// Rules gathered by a walk, and the directories it listed to find them.
#[derive(Default)]
struct Walk {
    rules: Vec<Rule>,
    listed: Vec<PathBuf>,
}

impl Walk {
    /// Grants `access` beneath the existing `root`, but for hidden paths.
    fn root(&mut self, root: &Path, access: BitFlags<AccessFs>, hidden: &[PathBuf]) {
        let root = canonical(root);
        if let Ok(m) = std::fs::metadata(&root) {
            self.grant(&root, access, hidden, m.is_dir());
        }
    }

    /// Grants `access` beneath `dir`, except beneath any of `hidden`: where a hidden path
    /// lies inside, `dir` itself gets no rule and each child is granted (recursively)
    /// instead.
    fn grant(&mut self, dir: &Path, access: BitFlags<AccessFs>, hidden: &[PathBuf], is_dir: bool) {
        // Compared as bytes once each is in component form (no `.`, `//` or trailing `/`),
        // which is what `Path::starts_with` compares: its component walk, run for each listed
        // entry against each hidden path, was ~13 % of a prepared spare's CPU (perf), and the
        // ruleset build 2.75 ms where it is now 1.64 (`benches/landlock_walk.rs`).
        let dir: PathBuf = dir.components().collect();
        let hidden: Vec<PathBuf> = hidden.iter().map(|h| h.components().collect()).collect();
        let d = dir.as_os_str().as_bytes();
        // A root inside a hidden path (a writable root named there) gets nothing.
        if hidden.iter().any(|h| beneath(d, h.as_os_str().as_bytes())) {
            return;
        }
        let inside: Vec<&[u8]> = hidden
            .iter()
            .map(|h| h.as_os_str().as_bytes())
            .filter(|h| beneath(h, d))
            .collect();
        if inside.is_empty() {
            self.rules.push((dir, access, is_dir));
        } else {
            self.list(dir, access, &inside);
        }
    }

    /// Lists `dir`, which holds each of `inside` strictly beneath it (none is `dir`), and
    /// grants each entry but the hidden ones, going down into those that hold hidden paths.
    fn list(&mut self, dir: PathBuf, access: BitFlags<AccessFs>, inside: &[&[u8]]) {
        // Each hidden path by the name of the entry of `dir` it lies in; `true` when it is
        // that entry itself.
        let skip = dir.as_os_str().len() + usize::from(dir != Path::new("/"));
        let mut by_name: Vec<(&[u8], &[u8], bool)> = inside
            .iter()
            .filter_map(|h| {
                let rest = h.get(skip..)?;
                let name = rest.split(|b| *b == b'/').next()?;
                Some((name, *h, name.len() == rest.len()))
            })
            .collect();
        by_name.sort_unstable_by(|a, b| a.0.cmp(b.0));
        // Unlistable: grant nothing below rather than risk granting a hidden path.
        let entries = std::fs::read_dir(&dir);
        self.listed.push(dir);
        let Ok(entries) = entries else {
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
            let name = entry.file_name();
            let name = name.as_bytes();
            let from = by_name.partition_point(|(n, _, _)| *n < name);
            let to = by_name.partition_point(|(n, _, _)| *n <= name);
            let here = by_name.get(from..to).unwrap_or_default();
            if here.iter().any(|(_, _, whole)| *whole) {
                continue; // the entry is hidden itself
            }
            if here.is_empty() || !kind.is_dir() {
                self.rules.push((entry.path(), access, kind.is_dir()));
            } else {
                let below: Vec<&[u8]> = here.iter().map(|(_, h, _)| *h).collect();
                self.list(entry.path(), access, &below);
            }
        }
    }
}

/// Whether the path `p` is `root` or beneath it, both in component form.
fn beneath(p: &[u8], root: &[u8]) -> bool {
    p.strip_prefix(root)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/") || root.ends_with(b"/"))
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
        let mut out = Walk::default();
        out.grant(
            &root,
            AccessFs::ReadFile.into(),
            &[root.join("a/secret")],
            true,
        );
        let mut beneath = Walk::default();
        beneath.grant(
            &root.join("a/secret/deeper"),
            AccessFs::ReadFile.into(),
            &[root.join("a/secret")],
            true,
        );
        assert!(
            beneath.rules.is_empty() && beneath.listed.is_empty(),
            "a root beneath a hidden path gets nothing"
        );
        assert_eq!(out.listed, vec![root.clone(), root.join("a")]);
        let mut paths: Vec<PathBuf> = out.rules.into_iter().map(|(p, _, _)| p).collect();
        paths.sort();
        assert_eq!(
            paths,
            vec![root.join("a/file"), root.join("a/open"), root.join("b")]
        );
    }

    /// The walk as it was written first, with `Path::starts_with` throughout: what the byte
    /// comparisons must agree with.
    fn walk_by_components(w: &mut Walk, dir: &Path, hidden: &[PathBuf]) {
        if hidden.iter().any(|h| dir.starts_with(h)) {
            return;
        }
        let inside: Vec<PathBuf> = hidden
            .iter()
            .filter(|h| h.starts_with(dir))
            .cloned()
            .collect();
        if inside.is_empty() {
            w.rules
                .push((dir.to_path_buf(), AccessFs::ReadFile.into(), true));
            return;
        }
        w.listed.push(dir.to_path_buf());
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let kind = entry.file_type().unwrap();
            if kind.is_symlink() {
                continue;
            }
            let path = entry.path();
            if kind.is_dir() {
                walk_by_components(w, &path, &inside);
            } else if !inside.contains(&path) {
                w.rules.push((path, AccessFs::ReadFile.into(), false));
            }
        }
    }

    #[test]
    fn the_walk_agrees_with_component_comparison() {
        let d = tempfile::tempdir().unwrap();
        let root = canonical(d.path());
        for dir in [
            "a/sec/deep/er",
            "a/secret",
            "a/sec2",
            "a/se",
            "b/x",
            "b/y",
            "c",
            "files",
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        for file in [
            "a/sec/deep/f",
            "a/secret.txt",
            "files/key",
            "files/keys",
            "b/x/f",
        ] {
            std::fs::write(root.join(file), "x").unwrap();
        }
        std::os::unix::fs::symlink(root.join("a/sec"), root.join("b/link")).unwrap();
        let r = |p: &str| root.join(p);
        let cases: Vec<Vec<PathBuf>> = vec![
            // A name that is a byte prefix of its siblings (`sec` and `secret`, `sec2`).
            vec![r("a/sec")],
            // Two hidden paths in one child, one deeper than the other's parent.
            vec![r("a/sec/deep/er"), r("a/sec/deep/f"), r("b/x")],
            // A hidden file beside files whose names extend it; one beneath a file.
            vec![r("files/key"), r("files/keys/beneath")],
            // Written with `.`, `//` and a trailing `/`; one missing, one the root itself.
            vec![
                PathBuf::from(format!("{}/./a//secret/", root.display())),
                r("missing/x"),
            ],
            vec![root.clone()],
            vec![r("c"), r("b"), r("a/se")],
            // Siblings of the root whose names extend it, or that it extends.
            vec![PathBuf::from(format!("{}zz", root.display()))],
            vec![PathBuf::from(
                root.to_str().unwrap().strip_suffix(|_| true).unwrap(),
            )],
        ];
        for hidden in cases {
            let normal: Vec<PathBuf> = hidden.iter().map(|h| h.components().collect()).collect();
            let mut want = Walk::default();
            walk_by_components(&mut want, &root, &normal);
            let mut got = Walk::default();
            got.grant(&root, AccessFs::ReadFile.into(), &hidden, true);
            let sorted = |w: Walk| {
                let mut rules: Vec<(PathBuf, bool)> =
                    w.rules.into_iter().map(|(p, _, d)| (p, d)).collect();
                rules.sort();
                (rules, w.listed)
            };
            assert_eq!(sorted(got), sorted(want), "hidden {hidden:?}");
        }
    }

    #[test]
    fn a_listing_is_fresh_only_while_its_directories_are_unchanged() {
        if kernel_abi() < 1 {
            return; // no Landlock here: nothing to build
        }
        let d = tempfile::tempdir().unwrap();
        let root = canonical(d.path());
        std::fs::create_dir_all(root.join("h/secret")).unwrap();
        let policy = Policy {
            hidden_paths: vec![root.join("h/secret")],
            ..Default::default()
        };
        // Listed right after the directory changed: the coarse clock cannot vouch for it.
        let built = Built::new(&policy).unwrap();
        assert!(built.listed.iter().any(|l| l.path == root.join("h")));
        assert!(
            !built.fresh(&policy),
            "a listing this recent is never trusted"
        );
        // Built once nothing changed for a while. Every ancestor from `/` is listed, and
        // other tests make temp dirs beside ours, so wait for a quiet moment.
        let quiet = || {
            (0..50)
                .find_map(|_| {
                    std::thread::sleep(COARSE_CLOCK * 2);
                    Some(Built::new(&policy).unwrap()).filter(|b| b.fresh(&policy))
                })
                .expect("a listing became fresh")
        };
        let built = quiet();
        // A new entry beside the hidden one moves the listed directory's mtime.
        std::fs::write(root.join("h/new.txt"), "x").unwrap();
        assert!(!built.fresh(&policy));
        // So does a hidden path resolving elsewhere.
        let built = quiet();
        let moved = Policy {
            hidden_paths: vec![root.join("h/other")],
            ..Default::default()
        };
        assert!(!built.fresh(&moved));
    }

    #[test]
    fn the_resolver_agrees_with_canonical() {
        use std::os::unix::fs::symlink;
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::create_dir_all(r.join("real/sub")).unwrap();
        std::fs::write(r.join("real/file"), "x").unwrap();
        symlink(r.join("real"), r.join("link")).unwrap();
        symlink("real/sub", r.join("rel")).unwrap();
        symlink(r.join("gone"), r.join("dangling")).unwrap();
        symlink(r.join("link"), r.join("chain")).unwrap();
        let cases = [
            "real",
            "real/sub",
            "real/file",
            "real/file/under",
            "link",
            "link/sub",
            "link/missing/deeper",
            "rel",
            "rel/x",
            "dangling",
            "dangling/x",
            "chain/sub",
            "missing",
            "missing/a/b",
            "real/..",
            "real/../link/sub",
            "missing/../real",
            "real/./sub",
        ];
        let mut resolver = Resolver::default();
        // Twice: the second pass answers from what the first learnt.
        for _ in 0..2 {
            for c in cases {
                let p = r.join(c);
                assert_eq!(resolver.canonical(&p), canonical(&p), "{c}");
            }
        }
        assert_eq!(resolver.canonical(Path::new("/")), PathBuf::from("/"));
        assert_eq!(
            resolver.canonical(Path::new("relative/x")),
            canonical(Path::new("relative/x"))
        );
    }

    #[test]
    fn missing_paths_resolve_onto_their_existing_ancestor() {
        let d = tempfile::tempdir().unwrap();
        let c = canonical(&d.path().join("not/yet"));
        assert_eq!(c, canonical(d.path()).join("not/yet"));
    }
}
