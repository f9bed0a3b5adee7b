//! run_code cost (issue 17's benchmark): one `run_code` returning 1 (spawn through the sandbox
//! launcher + interpreter start + protocol), one with a nested `read_file`, and a plain
//! sandboxed `bash -c true` beside them, all through `tool.invoke`.
//!
//! `cargo build --release --bin outrigger && cargo build --release --example run_code_bench &&
//!  target/release/examples/run_code_bench target/release/outrigger`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::time::{Duration, Instant};

use serde_json::json;

#[path = "shared/mod.rs"]
mod shared;
use shared::{Sidecar, median};

const CALLS: usize = 40;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let bin = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/outrigger".into());
    let bin = std::fs::canonicalize(&bin)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "hello\n").unwrap();
    let mut s = Sidecar::start(
        &bin,
        home.path(),
        ws.path(),
        &[("OUTRIGGER_RUN_CODE", "1".into())],
    );
    let cases = [
        (
            "bash -c true (sandboxed)",
            "bash",
            json!({"command": "true"}),
        ),
        (
            "run_code returning 1",
            "run_code",
            json!({"code": "return 1", "description": "one"}),
        ),
        (
            "run_code with one nested read_file",
            "run_code",
            json!({"code": "return tools.read_file(path=\"a.txt\")[\"data\"][\"content\"]", "description": "read"}),
        ),
    ];
    for (label, name, args) in cases {
        let mut v = Vec::with_capacity(CALLS);
        for _ in 0..CALLS {
            let t = Instant::now();
            let r = s.call(
                "tool.invoke",
                json!({"name": name, "arguments": args, "consentGranted": true}),
            );
            v.push(t.elapsed());
            assert_eq!(r["result"]["success"], true, "{r}");
        }
        v.sort();
        println!(
            "{label}: tool.invoke median {:.1} ms, p90 {:.1} ms ({CALLS} calls)",
            ms(median(&v)),
            ms(v[v.len() * 9 / 10])
        );
    }
}
