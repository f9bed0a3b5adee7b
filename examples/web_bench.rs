//! web_fetch cost (issue 16's benchmark): a 1 MB HTML page from a loopback server, fetched
//! and turned into Markdown through `tool.invoke`: time per fetch and the sidecar's peak RSS.
//!
//! `cargo build --release --bin outrigger && cargo build --release --example web_bench &&
//!  target/release/examples/web_bench target/release/outrigger`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "shared/mod.rs"]
mod shared;
use shared::{median, vm_hwm_kib};

const FETCHES: usize = 20;
const PAGE_BYTES: usize = 1_000_000;

/// A page of about `PAGE_BYTES`: a real documentation page from the fixtures, repeated.
fn page() -> Vec<u8> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/web/pages");
    let mut best: Vec<u8> = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let b = std::fs::read(e.unwrap().path()).unwrap();
        if b.len() > best.len() {
            best = b;
        }
    }
    let text = String::from_utf8_lossy(&best).into_owned();
    let (head, body) = text.split_once("<body").unwrap_or(("<html>", &text));
    let mut out = format!("{head}<body>");
    while out.len() < PAGE_BYTES {
        out.push_str(body.split_once('>').map_or(body, |(_, b)| b));
    }
    out.truncate(PAGE_BYTES);
    out.push_str("</body></html>");
    out.into_bytes()
}

fn main() {
    let bin = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/outrigger".into());
    let body = page();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = body.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let mut c = conn.unwrap();
            let served = served.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(c.try_clone().unwrap());
                loop {
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line.trim().is_empty() {
                            break;
                        }
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\r\n",
                        served.len()
                    );
                    if c.write_all(head.as_bytes()).is_err() || c.write_all(&served).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(&bin)
        .env("OUTRIGGER_HOME", home.path())
        .env("OUTRIGGER_WEB_PRIVATE_HOSTS", "127.0.0.1")
        .env("OUTRIGGER_WEB_FETCH_MAX_BYTES", "2000000")
        .env("OUTRIGGER_LOG_LEVEL", "WARNING")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let at_ready = vm_hwm_kib(pid);
    let url = format!("http://127.0.0.1:{port}/big.html");
    let mut times: Vec<Duration> = Vec::new();
    let mut md_len = 0;
    for id in 0..FETCHES {
        let req = json!({"jsonrpc": "2.0", "id": id, "method": "tool.invoke",
                         "params": {"name": "web_fetch", "arguments": {"url": url}}});
        let t = Instant::now();
        writeln!(stdin, "{req}").unwrap();
        stdin.flush().unwrap();
        line.clear();
        out.read_line(&mut line).unwrap();
        times.push(t.elapsed());
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v["result"]["success"],
            true,
            "{}",
            &line[..line.len().min(400)]
        );
        md_len = v["result"]["data"]["content"].as_str().unwrap().len();
    }
    let peak = vm_hwm_kib(pid);
    drop(stdin);
    let mut rest = Vec::new();
    let _ = out.read_to_end(&mut rest);
    let _ = child.wait();
    println!(
        "web_fetch of a {} byte HTML page ({} bytes of Markdown), {FETCHES} fetches: median {:.1} ms, min {:.1} ms",
        body.len(),
        md_len,
        median(&times).as_secs_f64() * 1000.0,
        times.iter().min().unwrap().as_secs_f64() * 1000.0
    );
    println!(
        "sidecar peak RSS: {:.1} MiB at ready, {:.1} MiB after the fetches",
        at_ready as f64 / 1024.0,
        peak as f64 / 1024.0
    );
}
