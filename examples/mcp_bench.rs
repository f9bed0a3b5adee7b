//! MCP costs (issue 15's benchmark): the first turn of a sidecar with three stdio MCP servers
//! configured (they start in parallel) against one with none; and the cost of one call of an
//! MCP tool through `tool.invoke` against a built-in tool's.
//!
//! `scripts/mcp-test-servers && cargo build --release --bin outrigger && cargo build --release --example mcp_bench &&
//!  target/release/examples/mcp_bench target/release/outrigger`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

#[path = "shared/mod.rs"]
mod shared;
use shared::{Sidecar, median};

const RUNS: usize = 5;
const CALLS: usize = 300;

/// A one-round scripted turn, from the request to its `stream.done`.
fn turn(s: &mut Sidecar) -> Duration {
    let t = Instant::now();
    s.send(
        "agent.chat.stream",
        json!({"provider": "scripted", "model": "m", "script": [{"text": "hi"}],
               "messages": [{"role": "user", "content": "hello"}]}),
    );
    let done = s.until(|v| v["method"] == "stream.done");
    assert_eq!(done["params"]["ok"], true, "{done}");
    t.elapsed()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let bin = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/outrigger".into());
    // Absolute: the sidecar starts in the workspace.
    let bin = std::fs::canonicalize(&bin)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let mcp = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mcp");
    assert!(
        mcp.join("installed").is_file(),
        "run scripts/mcp-test-servers first"
    );
    let venv = mcp.join("venv/bin");
    let everything = mcp.join("npm/node_modules/.bin/mcp-server-everything");
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "hello\n").unwrap();
    Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws.path())
        .status()
        .unwrap();
    let three = json!([
        {"name": "time", "command": venv.join("mcp-server-time")},
        {"name": "git", "command": venv.join("mcp-server-git"), "args": ["--repository", ws.path()]},
        {"name": "everything", "command": everything},
    ]);

    // Time to the first turn's done, spawn included, with and without the three servers.
    for (label, servers) in [
        ("no MCP servers", json!([])),
        ("3 stdio servers", three.clone()),
    ] {
        let mut firsts = Vec::new();
        for _ in 0..RUNS {
            let t = Instant::now();
            let mut s = Sidecar::start(
                &bin,
                home.path(),
                ws.path(),
                &[("OUTRIGGER_MCP_SERVERS", servers.to_string())],
            );
            turn(&mut s);
            firsts.push(t.elapsed());
        }
        println!(
            "{label}: spawn -> first turn done, median of {RUNS}: {:.1} ms",
            ms(median(&firsts))
        );
    }
    // Each server alone, for the parallel start's comparison.
    for entry in three.as_array().unwrap() {
        let mut firsts = Vec::new();
        for _ in 0..RUNS {
            let t = Instant::now();
            let mut s = Sidecar::start(
                &bin,
                home.path(),
                ws.path(),
                &[("OUTRIGGER_MCP_SERVERS", json!([entry]).to_string())],
            );
            turn(&mut s);
            firsts.push(t.elapsed());
        }
        println!(
            "  {} alone: {:.1} ms",
            entry["name"].as_str().unwrap(),
            ms(median(&firsts))
        );
    }

    // Per call: tool.invoke of an MCP tool against a built-in one, sequentially.
    let mut s = Sidecar::start(
        &bin,
        home.path(),
        ws.path(),
        &[("OUTRIGGER_MCP_SERVERS", three.to_string())],
    );
    let r = s.call("mcp.list", json!({"start": true}));
    assert!(r["result"]["servers"][2]["state"] == "running", "{r}");
    for (label, name, args) in [
        ("built-in read_file", "read_file", json!({"path": "a.txt"})),
        (
            "MCP everything echo (node)",
            "mcp__everything__echo",
            json!({"message": "hi"}),
        ),
        (
            "MCP time get_current_time (python)",
            "mcp__time__get_current_time",
            json!({"timezone": "UTC"}),
        ),
    ] {
        let mut v = Vec::with_capacity(CALLS);
        for _ in 0..CALLS {
            let t = Instant::now();
            let r = s.call("tool.invoke", json!({"name": name, "arguments": args}));
            v.push(t.elapsed());
            assert_eq!(r["result"]["success"], true, "{r}");
        }
        v.sort();
        println!(
            "{label}: tool.invoke median {:.3} ms, p99 {:.3} ms ({CALLS} calls)",
            ms(median(&v)),
            ms(v[v.len() * 99 / 100])
        );
    }
}
