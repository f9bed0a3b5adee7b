//! `bash_session` output latency (issue 21): a `write_stdin` echo round trip through
//! `tool.invoke`, from typing a line into `cat` on the session's terminal to the line coming
//! back as the command's output (polled with `yieldMs: 0`), and the cost of starting a session.
//!   cargo build --release --bin outrigger && cargo build --release --example session_bench
//!   target/release/examples/session_bench target/release/outrigger
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

#[path = "shared/mod.rs"]
mod shared;
use shared::{Sidecar, median};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const ROUNDS: usize = 200;
const STARTS: usize = 20;

fn tool(s: &mut Sidecar, name: &str, args: Value) -> Value {
    let r = s.call(
        "tool.invoke",
        json!({"name": name, "arguments": args, "consentGranted": true}),
    );
    assert_eq!(r["result"]["success"], true, "{r}");
    r["result"]["data"].clone()
}

fn p(v: &[Duration], q: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let bin = std::env::args()
        .nth(1)
        .expect("usage: session_bench <path to outrigger>");
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start(&bin, home.path(), ws.path(), &[]);

    let mut starts = Vec::new();
    for _ in 0..STARTS {
        let t = Instant::now();
        let d = tool(
            &mut s,
            "bash_session",
            json!({"command": "true", "yieldMs": 0}),
        );
        starts.push(t.elapsed());
        let id = d["sessionId"].as_str().unwrap().to_string();
        // Let it finish and be forgotten.
        while tool(
            &mut s,
            "bash_session",
            json!({"sessionId": id, "yieldMs": 200}),
        )["running"]
            == true
        {}
    }

    let d = tool(
        &mut s,
        "bash_session",
        json!({"command": "cat", "yieldMs": 0}),
    );
    let id = d["sessionId"].as_str().unwrap().to_string();
    let mut trips = Vec::new();
    let mut polls = 0usize;
    for i in 0..ROUNDS {
        let line = format!("ping-{i}");
        let t = Instant::now();
        let mut out = tool(
            &mut s,
            "write_stdin",
            json!({"sessionId": id, "chars": format!("{line}\n"), "yieldMs": 0}),
        )["output"]
            .as_str()
            .unwrap()
            .to_string();
        // The terminal echoes the typed line once; cat prints it a second time.
        while out.matches(line.as_str()).count() < 2 {
            polls += 1;
            out.push_str(
                tool(
                    &mut s,
                    "bash_session",
                    json!({"sessionId": id, "yieldMs": 0}),
                )["output"]
                    .as_str()
                    .unwrap(),
            );
        }
        trips.push(t.elapsed());
    }
    tool(&mut s, "bash_session_kill", json!({"sessionId": id}));
    println!(
        "bash_session start (sandboxed, yieldMs 0): median {:.2} ms, p90 {:.2} ms over {STARTS}",
        ms(median(&starts)),
        ms(p(&starts, 0.9))
    );
    println!(
        "write_stdin echo round trip (typed line back from cat): median {:.3} ms, p90 {:.3} ms, p99 {:.3} ms over {ROUNDS} ({:.2} polls per trip)",
        ms(median(&trips)),
        ms(p(&trips, 0.9)),
        ms(p(&trips, 0.99)),
        polls as f64 / ROUNDS as f64
    );
}
