//! Helpers the measuring programs share (included with `#[path]`: each example is its own
//! crate, and a file directly in `examples/` would be taken for one more example).
#![allow(dead_code)] // each program uses its own subset

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// A `/proc/<pid>/status` field in KiB (`VmRSS`, `VmHWM`, …); 0 when unreadable.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `VmRSS` of `pid` in KiB (0 when unreadable).
#[allow(dead_code)] // not every bench reads it
pub fn vm_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// `VmHWM` (peak RSS) of `pid` in KiB (0 when unreadable).
#[allow(dead_code)] // not every bench reads it
pub fn vm_hwm_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM")
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

/// A sidecar driven over its pipes by a measuring program.
pub struct Sidecar {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    next: u64,
}

impl Sidecar {
    /// Starts `bin` with its home, workspace and `env`, and reads its ready line.
    pub fn start(bin: &str, home: &Path, ws: &Path, env: &[(&str, String)]) -> Sidecar {
        let mut child = Command::new(bin)
            .env("OUTRIGGER_HOME", home)
            .env("OUTRIGGER_WORKSPACE_ROOT", ws)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("OUTRIGGER_LOG_LEVEL", "WARNING")
            .current_dir(ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert!(line.contains("lifecycle.ready"), "{line}");
        Sidecar {
            child,
            stdin,
            out,
            next: 1,
        }
    }

    /// The sidecar's process id.
    #[allow(dead_code)] // not every bench reads it
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{frame}").unwrap();
        self.stdin.flush().unwrap();
        id
    }

    /// Reads until the frame `pick` accepts.
    pub fn until(&mut self, pick: impl Fn(&Value) -> bool) -> Value {
        loop {
            let mut line = String::new();
            assert!(
                self.out.read_line(&mut line).unwrap() > 0,
                "sidecar closed stdout"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if pick(&v) {
                return v;
            }
        }
    }

    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.until(|v| v["id"] == id)
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.send("system.shutdown", json!({}));
        let _ = self.child.wait();
    }
}
