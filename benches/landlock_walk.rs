//! Building a sandboxed command's Landlock ruleset (`landlock_layer::Built::new`), which a
//! prepared spare does before every command: the walk from `/` that grants each sibling on
//! the way down to a hidden path, then a rule per granted path. The hidden paths are the
//! built-in credential list under a home of 15 entries, and a sidecar home inside a temp
//! directory of `ENTRIES` others (a desktop's `/tmp`); the walk also lists the real `/` and
//! the directories above the temp one, so figures differ between machines. Needs Landlock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use outrigger::config::keys::BUILTIN_BLOCKED_PATHS;
use outrigger::sandbox::landlock_layer::{Built, canonical, kernel_abi};
use outrigger::sandbox::policy::Policy;

const ENTRIES: usize = 200;

fn bench(c: &mut Criterion) {
    if kernel_abi() < 1 {
        println!("landlock_walk: no Landlock on this kernel; nothing to measure");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let root = canonical(dir.path());
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    for i in 0..ENTRIES {
        let p = tmp.join(format!("entry-{i:03}"));
        if i % 2 == 0 {
            std::fs::create_dir_all(p).unwrap();
        } else {
            std::fs::write(p, "x").unwrap();
        }
    }
    let home = root.join("home");
    for d in [
        ".cache", ".local", ".cargo", ".rustup", ".config", ".npm", ".ssh", ".aws", ".docker",
        "projects",
    ] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    for f in [".bashrc", ".profile", ".gitconfig", ".viminfo", "notes.txt"] {
        std::fs::write(home.join(f), "x").unwrap();
    }
    let sidecar_home = tmp.join("outrigger-home");
    let workspace = root.join("workspace");
    std::fs::create_dir_all(&sidecar_home).unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    let mut hidden: Vec<PathBuf> = BUILTIN_BLOCKED_PATHS
        .iter()
        .map(|p| match p.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => PathBuf::from(p),
        })
        .collect();
    hidden.push(sidecar_home.clone());
    hidden.push(tmp.join("outrigger-tmp"));
    let policy = Policy {
        writable_roots: vec![workspace],
        hidden_paths: hidden,
        ..Default::default()
    };
    Built::new(&policy).expect("the ruleset builds");
    c.bench_function(
        "landlock ruleset: credential list, 200 entries beside a hidden home",
        |b| b.iter(|| black_box(Built::new(black_box(&policy)).expect("builds"))),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50);
    targets = bench
}
criterion_main!(benches);
