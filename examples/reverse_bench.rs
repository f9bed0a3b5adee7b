//! The added latency of a host tool: one reverse `tool.invoke` round trip (the host answering
//! at once) against a local tool call. We drive the real binary over pipes as a host, with a
//! scripted model that calls one tool per round, and time each call from its `toolCall`
//! chunk to its `toolResult` chunk on our side of the pipes. The local tool is `todo_write`
//! (pure: validation and a summary), the host tool takes the same arguments.
//!
//! `cargo build --release && cargo run --release --example reverse_bench [-- BIN [ROUNDS]]`
//! (BIN defaults to target/release/outrigger, ROUNDS to 300).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn todos() -> Value {
    json!({"todos": [{"id": "1", "content": "measure", "status": "completed"}]})
}

/// Runs one turn of `rounds` calls of `tool`; returns each call's chunk-to-chunk time.
fn run(bin: &str, rounds: usize, host_tool: bool) -> Vec<Duration> {
    let home = std::env::temp_dir().join(format!("outrigger-revbench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    let mut child = Command::new(bin)
        .env("OUTRIGGER_HOME", &home)
        .arg("--quiet-ready")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the sidecar");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let name = if host_tool { "get_todos" } else { "todo_write" };
    let mut script: Vec<Value> = (0..rounds)
        .map(
            |i| json!({"toolCalls": [{"id": format!("c{i}"), "name": name, "arguments": todos()}]}),
        )
        .collect();
    script.push(json!({"text": "done"}));
    let mut params = json!({"provider": "scripted", "model": "m", "script": script,
        "maxRounds": rounds + 1, "messages": [{"role": "user", "content": "go"}]});
    if host_tool {
        params["toolsViaHost"] = json!(true);
        params["tools"] = json!([{"type": "function", "function": {"name": name,
            "parameters": {"type": "object", "properties": {"todos": {"type": "array"}}}}}]);
    }
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": "agent.chat.stream", "params": params});
    writeln!(stdin, "{req}").expect("send");
    stdin.flush().expect("flush");
    let mut started: HashMap<String, Instant> = HashMap::new();
    let mut times = Vec::with_capacity(rounds);
    for line in lines.by_ref() {
        let line = line.expect("read");
        let v: Value = serde_json::from_str(&line).expect("JSON frame");
        if v["method"] == "tool.invoke" {
            let answer = json!({"jsonrpc": "2.0", "id": v["id"],
                "result": {"success": true, "data": {"todos": v["params"]["arguments"]["todos"]}}});
            writeln!(stdin, "{answer}").expect("answer");
            stdin.flush().expect("flush");
            continue;
        }
        let p = &v["params"];
        if let Some(id) = p["toolCall"]["id"].as_str() {
            started.insert(id.to_string(), Instant::now());
        } else if let Some(id) = p["toolResult"]["id"].as_str() {
            assert_eq!(p["toolResult"]["success"], true, "{line}");
            if let Some(t) = started.remove(id) {
                times.push(t.elapsed());
            }
        } else if v["method"] == "stream.done" {
            assert_eq!(p["status"], "completed", "{line}");
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&home);
    times
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bin = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "target/release/outrigger".into());
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(300);
    for (label, host) in [("local todo_write", false), ("host tool.invoke", true)] {
        let mut t = run(&bin, rounds, host);
        t.sort();
        println!(
            "{label:18} calls {:4}  median {:7.1} µs  p90 {:7.1} µs  p99 {:7.1} µs",
            t.len(),
            pct(&t, 0.5),
            pct(&t, 0.9),
            pct(&t, 0.99)
        );
    }
}
