//! `outrigger run` wall time, process start to exit, for a one-round scripted turn (issue 18):
//!   cargo build --release --bin outrigger && cargo build --release --example run_bench
//!   target/release/examples/run_bench target/release/outrigger
//! Reports the median and p90 of 30 runs for each output format, and for a turn with one
//! `read_file` call (two rounds). Each run has a fresh store, as an eval trial would.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

#[path = "shared/mod.rs"]
mod shared;
use shared::median;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 30;

fn p90(xs: &[Duration]) -> Duration {
    let mut v = xs.to_vec();
    v.sort();
    v[(v.len() * 9 / 10).min(v.len() - 1)]
}

fn main() {
    let bin = std::env::args()
        .nth(1)
        .expect("usage: run_bench <path to outrigger>");
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.jsonl");
    std::fs::write(&one, "{\"text\": \"Hello from the script.\"}\n").unwrap();
    let two = dir.path().join("two.jsonl");
    std::fs::write(
        &two,
        "{\"toolCalls\": [{\"id\": \"r1\", \"name\": \"read_file\", \"arguments\": {\"path\": \"one.jsonl\"}}]}\n{\"text\": \"Read it.\"}\n",
    )
    .unwrap();
    for (label, script, format) in [
        ("one round, text", &one, "text"),
        ("one round, json", &one, "json"),
        ("one round, stream-json", &one, "stream-json"),
        ("read_file + answer, json", &two, "json"),
    ] {
        let mut ms = Vec::new();
        for i in 0..RUNS {
            let home = dir.path().join(format!("home-{label}-{i}"));
            let started = Instant::now();
            let out = Command::new(&bin)
                .env("OUTRIGGER_HOME", &home)
                .args(["run", "--script"])
                .arg(script)
                .args(["--cwd"])
                .arg(dir.path())
                .args(["--output-format", format, "Say hello"])
                .stdin(Stdio::null())
                .output()
                .expect("run");
            ms.push(started.elapsed());
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let ms_of = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{label:<26} median {:6.1} ms   p90 {:6.1} ms   ({RUNS} runs)",
            ms_of(median(&ms)),
            ms_of(p90(&ms))
        );
    }
}
