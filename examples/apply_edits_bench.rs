//! `workspace.apply_edits` on inputs crafted against the matcher (issue 12), against a built
//! binary (not a test):
//!   cargo build --release && cargo run --release --example apply_edits_bench -- target/release/outrigger
//! Every case is 80,000 lines of one repeated line, so a search that restarts at each
//! candidate re-reads tens of thousands of lines (or bytes) per candidate. Prints, per case,
//! the wall time of the call and the CPU time the sidecar spent on it, and what it answered.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

const LINES: usize = 80_000;

/// User + system CPU seconds of a process so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc stat");
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf reads a constant of the running system and has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / hz
}

fn cases() -> Vec<(&'static str, Value)> {
    let n = LINES;
    let long = format!("{}\n", "a".repeat(100));
    vec![
        (
            "trim, not found",
            json!({"content": "a\n".repeat(n), "edits": [{"oldText": format!("{}zz", "a\n".repeat(n / 2)), "newText": "x"}]}),
        ),
        (
            "trim, one match at the end",
            json!({"content": format!("{}  b\n", "  a\n".repeat(n)), "edits": [{"oldText": format!("{}b", "a\n".repeat(n / 2)), "newText": "x"}]}),
        ),
        (
            "exact ambiguous (short lines), then trim",
            json!({"content": "a\n".repeat(n), "edits": [{"oldText": "a\n".repeat(n / 2), "newText": "x"}]}),
        ),
        (
            "exact ambiguous (100-byte lines), then trim",
            json!({"content": long.repeat(n), "edits": [{"oldText": long.repeat(n / 2), "newText": "x"}]}),
        ),
        (
            "unicode ambiguous",
            json!({"content": "\u{2019}\n".repeat(n), "edits": [{"oldText": "'\n".repeat(n / 2), "newText": "x"}]}),
        ),
        (
            "replaceAll every other line (diff of 40,000 hunks)",
            json!({"content": "a\nc\n".repeat(n / 2), "edits": [{"oldText": "a\n", "newText": "b\n"}], "replaceAll": true}),
        ),
    ]
}

fn main() {
    let bin = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/outrigger".into());
    let home = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(&bin)
        .env("OUTRIGGER_HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the binary");
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("lifecycle.ready");
    println!("| case | wall | sidecar CPU | answer |");
    println!("| --- | --- | --- | --- |");
    for (i, (name, params)) in cases().into_iter().enumerate() {
        let frame =
            json!({"jsonrpc": "2.0", "id": i, "method": "workspace.apply_edits", "params": params});
        let bytes = format!("{frame}\n");
        let cpu = cpu_seconds(pid);
        let t = Instant::now();
        stdin.write_all(bytes.as_bytes()).expect("write");
        stdin.flush().expect("flush");
        line.clear();
        stdout.read_line(&mut line).expect("answer");
        let wall = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds(pid) - cpu;
        let r: Value = serde_json::from_str(&line).expect("JSON answer");
        let answer = match (&r["result"], &r["error"]) {
            (Value::Object(res), _) => format!(
                "{} match(es), first {}",
                res["matches"].as_array().map_or(0, Vec::len),
                res["matches"][0]
            ),
            (_, e) => format!("error {}", e["data"]["code"]),
        };
        println!("| {name} | {wall:.3} s | {cpu:.2} s | {answer} |");
    }
    drop(stdin);
    let _ = child.wait();
}
