//! Classifying one inbound line (`rpc::frame::parse_line`), the first thing every request
//! costs: a ping, a typical 2 KB `tool.invoke`, a 1 MB `debug.echo`, and the lenient path
//! (a lone surrogate in params). Before the criterion groups run, a plain timing loop prints
//! the CPU time per frame to stderr (only under `cargo bench`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use outrigger::rpc::frame::parse_line;

fn frames() -> Vec<(&'static str, Vec<u8>)> {
    let content = "fn main() {\\n    println!(\\\"hello\\\");\\n}\\n".repeat(50);
    vec![
        (
            "ping",
            br#"{"jsonrpc":"2.0","id":12345,"method":"system.ping"}"#.to_vec(),
        ),
        (
            "tool.invoke 2 KB",
            format!(
                r#"{{"jsonrpc":"2.0","id":"req-77","method":"tool.invoke","params":{{"name":"write_file","arguments":{{"path":"src/main.rs","content":"{content}"}},"context":{{"cwd":"/home/u/project","sessionId":"s1"}}}}}}"#
            )
            .into_bytes(),
        ),
        (
            "debug.echo 1 MB",
            format!(
                r#"{{"jsonrpc":"2.0","id":9,"method":"debug.echo","params":{{"value":"{}"}}}}"#,
                "x".repeat(1 << 20)
            )
            .into_bytes(),
        ),
        (
            "lone surrogate 2 KB",
            format!(
                r#"{{"jsonrpc":"2.0","id":"req-78","method":"tool.invoke","params":{{"name":"write_file","arguments":{{"path":"a.txt","content":"{content}\ud83d"}}}}}}"#
            )
            .into_bytes(),
        ),
    ]
}

fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn print_costs(frames: &[(&str, Vec<u8>)]) {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    for (name, frame) in frames {
        // About 0.2 s of work per round, best of 10 rounds.
        let n = (200_000_000 / frame.len().max(100)).clamp(10, 2_000_000);
        let mut best = f64::MAX;
        for _ in 0..10 {
            let c = cpu_seconds();
            for _ in 0..n {
                black_box(parse_line(black_box(frame)));
            }
            best = best.min(cpu_seconds() - c);
        }
        eprintln!(
            "parse_line, {name}: {:.0} ns/frame CPU time (best of 10 × {n})",
            best / n as f64 * 1e9
        );
    }
}

fn bench(c: &mut Criterion) {
    let frames = frames();
    print_costs(&frames);
    let mut g = c.benchmark_group("parse_line");
    g.sample_size(20);
    for (name, frame) in &frames {
        g.bench_function(*name, |b| {
            b.iter(|| black_box(parse_line(black_box(frame))))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
