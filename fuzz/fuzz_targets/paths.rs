//! Path resolution: any path string against a workspace with links in and out of it and a
//! blocked directory. What `resolve_write`/`resolve_read` accept is inside the root,
//! normalized and not blocked, its existing ancestors really are inside the root, and the
//! directory opened for a write is inside it. A workspace root is never `/`.
#![no_main]

use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use outrigger::tools::fs::paths::Workspace;
use outrigger::tools::fs::root;

#[path = "../oracles.rs"]
mod oracles;

struct Fixture {
    _root: tempfile::TempDir,
    _outside: tempfile::TempDir,
    ws: Workspace,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        use std::os::unix::fs::symlink;
        let root = tempfile::Builder::new()
            .prefix("outrigger-fuzz-paths")
            .tempdir()
            .unwrap();
        let outside = tempfile::Builder::new()
            .prefix("outrigger-fuzz-outside")
            .tempdir()
            .unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("sub")).unwrap();
        std::fs::write(r.join("sub/f"), "f").unwrap();
        std::fs::create_dir_all(r.join("secret")).unwrap();
        std::fs::write(r.join("secret/k"), "k").unwrap();
        symlink(outside.path(), r.join("out")).unwrap();
        symlink("..", r.join("sub/up")).unwrap();
        symlink("../..", r.join("upup")).unwrap();
        symlink("/", r.join("slash")).unwrap();
        symlink("/nonexistent-outrigger-fuzz/x", r.join("dang")).unwrap();
        symlink("loop", r.join("loop")).unwrap();
        symlink("sub", r.join("inner")).unwrap();
        symlink("secret", r.join("sec2")).unwrap();
        let inputs = outrigger::config::Inputs {
            home: PathBuf::from("/nonexistent-outrigger-home"),
            ..Default::default()
        };
        let mut s = outrigger::config::Config::load(&inputs).unwrap().settings();
        s.blocked_paths = vec![PathBuf::from("secret")];
        s.readable_roots = Vec::new();
        s.writable_roots = Vec::new();
        let ws = Workspace::new(r, &s).unwrap();
        Fixture {
            _root: root,
            _outside: outside,
            ws,
        }
    })
}

fn check_resolved(root: &Path, given: &str, p: &Path) {
    assert!(p.starts_with(root), "{given:?} resolved to {p:?}");
    assert!(
        p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
        "{given:?} resolved to the unnormalized {p:?}"
    );
    assert!(
        !p.starts_with(root.join("secret")),
        "{given:?} reached {p:?}"
    );
    for a in p.ancestors().take_while(|a| a.starts_with(root)) {
        if let Ok(real) = std::fs::canonicalize(a) {
            assert!(
                real.starts_with(root),
                "{given:?}: {a:?} is really {real:?}"
            );
            assert!(
                !real.starts_with(root.join("secret")),
                "{given:?}: {a:?} is blocked"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let fx = fixture();
    let root = fx.ws.root();
    let given = String::from_utf8_lossy(data);
    // `@` stands for the root, so the fuzzer can write absolute paths into it.
    let text = given.replace('@', &root.display().to_string());
    let write = fx.ws.resolve_write(&text);
    let read = fx.ws.resolve_read(&text);
    if let Ok(p) = &write {
        check_resolved(root, &text, p);
        if let Ok((fd, name)) = fx.ws.open_parent_for_write(&text, p) {
            use std::os::fd::AsRawFd;
            let dir = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
            let target = dir.join(name);
            assert!(target.starts_with(root), "{text:?} opens {target:?}");
            assert!(
                !target.starts_with(root.join("secret")),
                "{text:?} opens {target:?}"
            );
        }
    }
    if let Ok(p) = &read {
        check_resolved(root, &text, p);
    }
    if let Err(e) = oracles::check_write_read(&text, &write, &read) {
        panic!("{e}");
    }
    let joined = root.join(&*text);
    for candidate in [Path::new(&*text), joined.as_path()] {
        if let Ok(p) = root::resolve(Some(candidate), root::CONTEXT_CWD, None) {
            assert!(p.is_absolute() && p.is_dir(), "{p:?}");
            assert!(!root::is_filesystem_root(&p), "{candidate:?} gave /");
        }
    }
});
