//! Stream overhead through the sidecar: a loopback fake OpenAI server serves 100,000 content
//! chunks as fast as it can; we drive the real binary over pipes like a host and count the
//! `stream.chunk` deltas reaching our reader. Prints chunks/s (wall) and the sidecar's CPU
//! time per chunk (utime + stime from /proc). Target: ≥ 200,000 chunks/s.
//!
//! `cargo build --release && cargo run --release --example demo_stream_bench [-- BIN]`
//! (BIN defaults to target/release/outrigger).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Instant;

const CHUNKS: usize = 100_000;

fn body() -> Vec<u8> {
    let mut b = Vec::with_capacity(CHUNKS * 200);
    for i in 0..CHUNKS {
        let word = [
            "Hello", " world", ",", " the", " quick", " brown", " fox", "!",
        ][i % 8];
        b.extend_from_slice(
            format!(
                "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{word}\"}},\"finish_reason\":null}}]}}\n\n"
            )
            .as_bytes(),
        );
    }
    b.extend_from_slice(b"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n");
    b.extend_from_slice(b"data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":100000,\"total_tokens\":100009}}\n\n");
    b.extend_from_slice(b"data: [DONE]\n\n");
    b
}

/// Serves the body to every connection (HTTP/1.1, close-delimited).
fn serve(body: Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let body = body.clone();
            std::thread::spawn(move || {
                let mut conn = conn;
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                // Read the headers and the JSON body (Content-Length).
                loop {
                    let n = conn.read(&mut buf).unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    req.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&req);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if req.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(&body);
            });
        }
    });
    port
}

/// utime + stime of `pid` in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 (1-based) are utime and stime; `after` starts at field 3.
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / hz
}

fn main() {
    let bin = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/outrigger").into());
    let port = serve(body());
    let home = std::env::temp_dir().join(format!("outrigger-bench-{}", std::process::id()));
    let mut child = Command::new(&bin)
        .arg("--quiet-ready")
        .env("OUTRIGGER_HOME", &home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready");
    let req = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"agent.chat.stream\",\"params\":{{\"provider\":\"openai_compat\",\"model\":\"m\",\"baseUrl\":\"http://127.0.0.1:{port}/v1\",\"apiKey\":\"k\",\"messages\":[{{\"role\":\"user\",\"content\":\"go\"}}]}}}}\n"
    );
    let cpu0 = cpu_seconds(child.id());
    let started = Instant::now();
    stdin.write_all(req.as_bytes()).expect("send");
    stdin.flush().expect("flush");
    let mut deltas = 0usize;
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            panic!("the sidecar closed stdout before stream.done");
        }
        if line.contains("\"delta\":") {
            deltas += 1;
        } else if line.contains("\"stream.done\"") {
            assert!(line.contains("\"completed\""), "{line}");
            break;
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds(child.id()) - cpu0;
    let _ = stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"system.shutdown\"}\n");
    drop(stdin);
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&home);
    assert_eq!(deltas, CHUNKS, "every chunk reaches the host");
    println!(
        "{deltas} chunks in {:.3} s: {:.0} chunks/s through the sidecar; sidecar CPU {:.3} s = {:.2} µs/chunk",
        wall,
        deltas as f64 / wall,
        cpu,
        cpu * 1e6 / deltas as f64
    );
}
