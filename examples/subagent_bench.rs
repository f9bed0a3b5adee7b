//! Sub-agent costs (issue 14's benchmark): the overhead of a delegation whose child answers at
//! once, over a plain tool call; and 8 children in parallel against a model server that takes
//! 50 ms per child request, against 8 × 50 ms.
//!
//! `cargo build --release --bin outrigger && cargo build --release --example subagent_bench &&
//!  target/release/examples/subagent_bench target/release/outrigger`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "shared/mod.rs"]
mod shared;
use shared::median;

const TURNS: usize = 20;
const CHILD_DELAY: Duration = Duration::from_millis(50);
const CHILDREN: usize = 8;

fn chunk(delta: Value, finish: Value) -> String {
    format!(
        "data: {}\n\n",
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    )
}

fn text_sse(text: &str) -> String {
    let mut s = chunk(json!({"role": "assistant", "content": text}), Value::Null);
    s.push_str(&chunk(json!({}), json!("stop")));
    s.push_str("data: [DONE]\n\n");
    s
}

fn calls_sse(calls: &[(&str, Value)]) -> String {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"index": i, "id": format!("call_{i}"), "type": "function",
                "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    let mut s = chunk(
        json!({"role": "assistant", "content": null, "tool_calls": tool_calls}),
        Value::Null,
    );
    s.push_str(&chunk(json!({}), json!("tool_calls")));
    s.push_str("data: [DONE]\n\n");
    s
}

/// The reply to one request, chosen by its content: a child (first user message starts with
/// `child`) answers after `CHILD_DELAY` when the task says `slow`; a parent calls what its
/// first user message names, then answers once the tool results are in.
fn reply(body: &Value) -> (String, Duration) {
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    let first_user = msgs
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    let last_is_tool = msgs.last().is_some_and(|m| m["role"] == "tool");
    if first_user.starts_with("child") {
        let delay = if first_user.contains("slow") {
            CHILD_DELAY
        } else {
            Duration::ZERO
        };
        return (text_sse("child done"), delay);
    }
    if last_is_tool || first_user == "answer" {
        return (text_sse("done"), Duration::ZERO);
    }
    let sse = match first_user.as_str() {
        "plain" => calls_sse(&[("read_file", json!({"path": "notes.txt"}))]),
        "delegate" => calls_sse(&[("delegate_subagent", json!({"task": "child: answer now"}))]),
        "fanout" | "fanout-sequential" => {
            let kind = if first_user == "fanout" { "w" } else { "s" };
            let calls: Vec<(&str, Value)> = (0..CHILDREN)
                .map(|i| {
                    (
                        "delegate_subagent",
                        json!({"task": format!("child {i}: slow"), "subagent_type": kind}),
                    )
                })
                .collect();
            calls_sse(&calls)
        }
        other => panic!("unexpected parent prompt {other:?}"),
    };
    (sse, Duration::ZERO)
}

fn serve(conn: TcpStream) {
    let _ = conn.set_nodelay(true);
    let mut r = BufReader::new(conn.try_clone().expect("clone"));
    let mut w = conn;
    while let Some((body, close)) = shared::read_request(&mut r) {
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (sse, delay) = reply(&body);
        std::thread::sleep(delay);
        if w.write_all(&shared::sse_response(&sse)).is_err() || close {
            return;
        }
    }
}

struct Sidecar {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    next: u64,
}

impl Sidecar {
    fn start(bin: &str, home: &std::path::Path, ws: &std::path::Path) -> Sidecar {
        let mut child = Command::new(bin)
            .env("OUTRIGGER_HOME", home)
            .current_dir(ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn outrigger");
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Sidecar {
            child,
            stdin,
            out,
            next: 0,
        }
    }

    /// One turn, request to `stream.done`: (wall, done params).
    fn turn(&mut self, params: Value) -> (Duration, Value) {
        self.next += 1;
        let frame = json!({"jsonrpc": "2.0", "id": self.next, "method": "agent.chat.stream", "params": params});
        let t = Instant::now();
        writeln!(self.stdin, "{frame}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.out.read_line(&mut line).unwrap() > 0, "sidecar exited");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("error").is_some() {
                panic!("refused: {v}");
            }
            if v["method"] == "stream.done" {
                return (t.elapsed(), v["params"].clone());
            }
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let bin = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/outrigger".into());
    // The sidecar runs in the workspace: a relative path would resolve there.
    let bin = std::fs::canonicalize(&bin)
        .expect("the outrigger binary")
        .display()
        .to_string();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || serve(conn));
        }
    });
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "notes\n").unwrap();
    let mut s = Sidecar::start(&bin, home.path(), ws.path());
    let mut n = 0;
    let mut params = |prompt: &str, extra: Value| {
        n += 1;
        let mut p = json!({"provider": "openai_compat", "model": "fake-model", "apiKey": "k",
            "baseUrl": format!("http://127.0.0.1:{port}/v1"), "cwd": ws.path(),
            "chatId": format!("bench_{n}"), "messages": [{"role": "user", "content": prompt}]});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p
    };
    let mut sample = |s: &mut Sidecar, prompt: &str, extra: Value, runs: usize| {
        let mut v = Vec::new();
        for i in 0..runs + 2 {
            let (d, done) = s.turn(params(prompt, extra.clone()));
            assert_eq!(done["status"], "completed", "{prompt}: {done}");
            if i >= 2 {
                v.push(d);
            }
        }
        v
    };
    let one = sample(&mut s, "answer", json!({}), TURNS);
    let plain = sample(&mut s, "plain", json!({}), TURNS);
    let deleg = sample(&mut s, "delegate", json!({}), TURNS);
    let round = median(&plain).saturating_sub(median(&one));
    let overhead = median(&deleg).saturating_sub(median(&plain));
    println!("turn, request -> stream.done, median of {TURNS} (ms):");
    println!(
        "  one round, text answer              {:>8.3}",
        ms(median(&one))
    );
    println!(
        "  read_file call + answer (2 rounds)   {:>8.3}",
        ms(median(&plain))
    );
    println!(
        "  delegate_subagent + answer (2 rounds + the child's 1) {:>8.3}",
        ms(median(&deleg))
    );
    println!(
        "  a delegation over a plain tool call  {:>8.3} (of which one model round ~{:.3})",
        ms(overhead),
        ms(round)
    );

    let profiles = json!({"subagent": {"maxParallel": CHILDREN,
        "profiles": {"w": {"concurrent": true}, "s": {}}}});
    let par = sample(&mut s, "fanout", profiles.clone(), 5);
    let seq = sample(&mut s, "fanout-sequential", profiles, 3);
    println!(
        "{CHILDREN} children, {} ms per child request, turn median (ms):",
        CHILD_DELAY.as_millis()
    );
    println!(
        "  concurrent profile   {:>8.3}  (ideal {} ms; one after another {} ms)",
        ms(median(&par)),
        CHILD_DELAY.as_millis(),
        CHILD_DELAY.as_millis() * CHILDREN as u128
    );
    println!("  sequential profile   {:>8.3}", ms(median(&seq)));
    drop(s.stdin);
    let _ = s.child.wait();
}
