//! `grep` and `glob` through `tool.invoke` on a built binary, against the `rg` binary (not a
//! test):
//!   cargo build --release
//!   cargo run --release --example grep_bench -- target/release/outrigger [TREE]
//! TREE defaults to the crates under `~/.cargo/registry/src`. Each case runs once to warm the
//! page cache, then 5 timed runs; medians are printed, with ours / rg as a ratio. rg gets the
//! same walk rules (hidden files, .gitignore without a git repo, the built-in exclusions).
//! Also times `glob` over a generated tree of 50,000 files.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

#[path = "shared/mod.rs"]
mod shared;
use shared::median;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const RUNS: usize = 5;
const EXCLUDED: &str = ".git,node_modules,.outrigger,.claude,.git-worktrees,vendor,.cache,dist,build,out,target,.next,.nuxt";

struct Sidecar {
    pid: u32,
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    id: u64,
}

impl Sidecar {
    fn start(bin: &str, home: &Path) -> Sidecar {
        let mut child = Command::new(bin)
            .env("OUTRIGGER_HOME", home)
            .env("OUTRIGGER_MAX_WALK_ENTRIES", "2000000")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the binary");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut s = Sidecar {
            pid: child.id(),
            _child: child,
            stdin,
            stdout,
            id: 0,
        };
        // The first frame is lifecycle.ready.
        s.frame();
        s
    }

    fn frame(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read stdout");
        serde_json::from_str(&line).expect("a JSON frame")
    }

    fn invoke(&mut self, cwd: &Path, name: &str, args: Value) -> Value {
        self.id += 1;
        let req = json!({"jsonrpc": "2.0", "id": self.id, "method": "tool.invoke",
            "params": {"name": name, "arguments": args, "context": {"cwd": cwd}}});
        writeln!(self.stdin, "{req}").expect("write");
        loop {
            let f = self.frame();
            if f["id"] == json!(self.id) {
                let r = f["result"].clone();
                assert_eq!(r["success"], true, "{name} failed: {f}");
                return r["data"].clone();
            }
        }
    }
}

/// CPU seconds (user + system) the sidecar has used, from `/proc/<pid>/stat`.
fn process_cpu(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // SAFETY: sysconf has no preconditions.
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 / tck
}

/// CPU seconds used by waited-for children (the rg runs).
fn children_cpu() -> f64 {
    // SAFETY: rusage is plain data; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own and pass by pointer.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// Median wall time and median CPU seconds of `RUNS` runs after one warm-up.
fn time(cpu: impl Fn() -> f64, mut f: impl FnMut()) -> (Duration, f64) {
    f();
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    for _ in 0..RUNS {
        let c = cpu();
        let t = Instant::now();
        f();
        walls.push(t.elapsed());
        cpus.push(cpu() - c);
    }
    cpus.sort_by(f64::total_cmp);
    (median(&walls), cpus[cpus.len() / 2])
}

fn rg(tree: &Path, extra: &[&str], pattern: &str) -> Vec<u8> {
    let glob = format!("!{{{EXCLUDED}}}");
    let out = Command::new("rg")
        .args(["--hidden", "--no-require-git", "-j", "2", "-g", &glob])
        .args(extra)
        .arg("-e")
        .arg(pattern)
        .arg(tree)
        .stderr(Stdio::null())
        .output()
        .expect("run rg (apt-get install -y ripgrep)");
    out.stdout
}

fn row(label: &str, ours: (Duration, f64), theirs: (Duration, f64), results: &str) {
    println!(
        "| {label} | {} ({:.0} ms) | {} ({:.0} ms) | {:.2} | {:.2} | {results} |",
        ms(ours.0),
        ours.1 * 1000.0,
        ms(theirs.0),
        theirs.1 * 1000.0,
        ours.0.as_secs_f64() / theirs.0.as_secs_f64(),
        ours.1 / theirs.1.max(1e-9),
    );
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let bin = args
        .next()
        .unwrap_or_else(|| "target/release/outrigger".into());
    let tree = args.next().map(PathBuf::from).unwrap_or_else(|| {
        let src = PathBuf::from(std::env::var("HOME").expect("HOME")).join(".cargo/registry/src");
        std::fs::read_dir(&src)
            .expect("~/.cargo/registry/src")
            .flatten()
            .map(|e| e.path())
            .next()
            .expect("a registry index directory")
    });
    let tree = std::fs::canonicalize(&tree).expect("tree");
    let home = tempfile::tempdir().expect("tempdir");
    let mut s = Sidecar::start(&bin, home.path());
    let pid = s.pid;
    println!("tree: {}", tree.display());
    println!(
        "| case | ours wall (cpu) | rg 13 wall (cpu) | wall ratio | cpu ratio | results (ours / rg) |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");

    // Full-tree searches: a rare pattern in content mode (every file is searched to know
    // there is no next page) and a common one in count mode with an offset past the end
    // (every file is counted).
    let cases: &[(&str, &str, Value, &[&str])] = &[
        (
            "content, one page",
            "impl Drop for \\w+Guard",
            json!({"outputMode": "content", "headLimit": 500}),
            &["-n"],
        ),
        (
            "files_with_matches, one page",
            "Iterator for \\w+Iter\\b",
            json!({"headLimit": 500}),
            &["-l"],
        ),
        (
            "count, one page",
            "SIMD",
            json!({"outputMode": "count", "headLimit": 500}),
            &["-c"],
        ),
        (
            "count, offset past the end (9k files counted)",
            "fn \\w+\\(",
            json!({"outputMode": "count", "headLimit": 500, "offset": 10_000_000}),
            &["-c"],
        ),
    ];
    for (label, pattern, extra, rg_flags) in cases {
        let mut a = extra.clone();
        a["pattern"] = json!(pattern);
        let mut ours_n = String::new();
        let ours = time(
            || process_cpu(pid),
            || {
                let d = s.invoke(&tree, "grep", a.clone());
                ours_n = format!(
                    "{} files, {} matches{}",
                    d["numFiles"],
                    d.get("numMatches").unwrap_or(&Value::Null),
                    if d.get("next_offset").is_some() {
                        " (more pages)"
                    } else {
                        ""
                    }
                );
            },
        );
        let mut rg_lines = 0usize;
        let theirs = time(children_cpu, || {
            rg_lines = rg(&tree, rg_flags, pattern)
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .count();
        });
        row(
            &format!("grep {label} `{pattern}`"),
            ours,
            theirs,
            &format!("{ours_n} / {rg_lines} lines"),
        );
    }

    // First page of a common pattern: ours stops once the page is full; rg prints everything.
    let a = json!({"pattern": "fn \\w+\\(", "outputMode": "content"});
    let ours = time(
        || process_cpu(pid),
        || {
            s.invoke(&tree, "grep", a.clone());
        },
    );
    let theirs = time(children_cpu, || {
        rg(&tree, &["-n"], "fn \\w+\\(");
    });
    row(
        "grep first content page `fn \\w+\\(` (rg prints all)",
        ours,
        theirs,
        "one page / all",
    );

    // glob over 50,000 files.
    let generated = tempfile::tempdir().expect("tempdir");
    for d in 0..500 {
        let dir = generated.path().join(format!("d{d:03}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..100 {
            let ext = if f % 10 == 0 { "rs" } else { "txt" };
            std::fs::write(dir.join(format!("f{f:03}.{ext}")), "x").expect("write");
        }
    }
    let gen_root = std::fs::canonicalize(generated.path()).expect("gen");
    for (label, pattern) in [
        ("5,000 of 50,000 match", "**/*.rs"),
        ("all 50,000 match", "*"),
    ] {
        let mut total = Value::Null;
        let ours = time(
            || process_cpu(pid),
            || {
                total = s.invoke(&gen_root, "glob", json!({"pattern": pattern}))["total"].clone();
            },
        );
        let theirs = time(children_cpu, || {
            let glob = format!("!{{{EXCLUDED}}}");
            Command::new("rg")
                .args([
                    "--files",
                    "--hidden",
                    "--no-require-git",
                    "-j",
                    "2",
                    "--sort",
                    "modified",
                    "-g",
                    pattern,
                    "-g",
                    &glob,
                ])
                .arg(&gen_root)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("rg");
        });
        row(
            &format!("glob `{pattern}` ({label}); rg: `--files --sort modified`"),
            ours,
            theirs,
            &format!("total {total}"),
        );
    }
}
