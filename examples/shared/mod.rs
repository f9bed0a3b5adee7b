//! Helpers the measuring programs share (included with `#[path]`: each example is its own
//! crate, and a file directly in `examples/` would be taken for one more example).
#![allow(dead_code)] // each program uses its own subset

use std::time::Duration;

/// `VmRSS` of `pid` in KiB, from `/proc/<pid>/status` (0 when unreadable).
pub fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The median of a non-empty sample.
pub fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

/// One HTTP/1.1 request read from a keep-alive connection: `Some((body, close))`, `None` when
/// the peer closed. Bodies must come with `Content-Length` (reqwest sends one for JSON).
pub fn read_request(r: &mut impl std::io::BufRead) -> Option<(Vec<u8>, bool)> {
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let (mut len, mut close) = (0usize, false);
    loop {
        line.clear();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let h = line.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            } else if k.eq_ignore_ascii_case("connection") && v.trim() == "close" {
                close = true;
            } else if k.eq_ignore_ascii_case("transfer-encoding") {
                panic!("the fake server reads Content-Length bodies only, got {h}");
            }
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    Some((body, close))
}

/// A `200 text/event-stream` response carrying `sse`.
pub fn sse_response(sse: &str) -> Vec<u8> {
    let mut resp = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n",
        sse.len()
    )
    .into_bytes();
    resp.extend_from_slice(sse.as_bytes());
    resp
}
