//! cargo build --release --bin outrigger && cargo build --release --example growth_bench && target/release/examples/growth_bench target/release/outrigger
//!
//! Whole-process growth benchmark against a built binary (not a test). Each figure is printed
//! next to a floor measured in the same run: 10,000 plugin tools (RSS, spawn → ready,
//! `tool.list`), sandboxed and unsandboxed `bash -c true` via `tool.invoke` against plain
//! bash, follow-up turns re-sending 100 and 6,000 history messages, the fixed cost per model
//! round above a loopback fake OpenAI server, RSS after 100 small turns, the first
//! `system.ping` after ready, and the process_bench trio (spawn → ready, RSS, pipelined pings).
//! Prints a markdown table, then the raw numbers. Exits non-zero only on a protocol error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

#[path = "shared/mod.rs"]
mod shared;
use shared::{median, vm_rss_kib};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const PLUGIN_FILES: usize = 40;
const TOOLS_PER_FILE: usize = 250;
const PLUGIN_SPAWNS: usize = 5;
const BARE_SPAWNS: usize = 20;
const PING_SPAWNS: usize = 10;
const LIST_CALLS: usize = 10;
const BASH_CALLS: usize = 200;
const BASH_WARMUP: usize = 10;
/// Spaced bash calls (`BASH_GAP` apart) per variant.
const BASH_SPACED_CALLS: usize = 40;
const BASH_GAP: Duration = Duration::from_millis(100);
const PIPELINED_PINGS: usize = 100_000;
const ROUNDS: usize = 10;
const ROUND_TURNS: usize = 5;
const SMALL_TURNS: usize = 100;
const FOLLOW_UPS: usize = 7;
/// The whole run is abandoned (exit 2) after this long.
const WATCHDOG: Duration = Duration::from_secs(300);

/// Protocol errors seen (an error response, a failed stream, a reverse request nobody asked for).
static FAILURES: AtomicUsize = AtomicUsize::new(0);

fn failure(what: &str) {
    FAILURES.fetch_add(1, Ordering::SeqCst);
    let mut what = what.to_string();
    if what.len() > 600 {
        what.truncate(600);
        what.push('…');
    }
    println!("PROTOCOL ERROR: {what}");
}

/// Warning and error lines the sidecars wrote to stderr, tagged with their scenario.
static STDERR_NOTES: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn p99(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    let i = ((v.len() as f64 * 0.99).ceil() as usize).saturating_sub(1);
    v[i.min(v.len() - 1)]
}

fn median_u64(v: &[u64]) -> u64 {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

/// CPU time of every live thread of `pid` (first field of each task's schedstat, in ns).
fn cpu_time(pid: u32) -> Duration {
    let mut ns = 0u64;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let s = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
            ns += s
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(ns)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

// ---------------------------------------------------------------------------------------------
// The sidecar over its pipes.

struct Sidecar {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
    next_id: u64,
    buf: Vec<u8>,
    tail: Arc<Mutex<Vec<String>>>,
}

impl Sidecar {
    /// Spawns the binary and waits for the ready marker; returns it with spawn → marker.
    fn spawn(
        bin: &str,
        home: &Path,
        ws: &Path,
        env: &[(&str, &str)],
        tag: &str,
    ) -> (Sidecar, Duration) {
        let t = Instant::now();
        let mut cmd = Command::new(bin);
        cmd.env("OUTRIGGER_HOME", home)
            .env("OUTRIGGER_WORKSPACE_ROOT", ws)
            .current_dir(ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn the binary");
        let mut err = BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        let mut before = String::new();
        loop {
            line.clear();
            if err.read_line(&mut line).expect("read stderr") == 0 {
                panic!("{tag}: no ready marker; stderr:\n{before}");
            }
            if line.starts_with("__SIDECAR_READY__:") {
                break;
            }
            before.push_str(&line);
        }
        let ready = t.elapsed();
        let tail = Arc::new(Mutex::new(Vec::new()));
        let (tail2, tag) = (tail.clone(), tag.to_string());
        // Drained for the process's life so a chatty log can never block it.
        std::thread::spawn(move || {
            let mut line = String::new();
            loop {
                line.clear();
                if err.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let l = line.trim_end().to_string();
                if l.contains("WARN") || l.contains("ERROR") {
                    let mut notes = STDERR_NOTES.lock().unwrap();
                    if notes.len() < 200 {
                        notes.push(format!("[{tag}] {l}"));
                    }
                }
                let mut t = tail2.lock().unwrap();
                if t.len() >= 40 {
                    t.remove(0);
                }
                t.push(l);
            }
        });
        let stdin = child.stdin.take().expect("stdin");
        let out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
        (
            Sidecar {
                child,
                stdin: Some(stdin),
                out,
                next_id: 1,
                buf: Vec::new(),
                tail,
            },
            ready,
        )
    }

    fn rss_kib(&self) -> u64 {
        vm_rss_kib(self.child.id())
    }

    fn cpu(&self) -> Duration {
        cpu_time(self.child.id())
    }

    /// A request frame (with its id) serialized ahead of the clock.
    fn frame(&mut self, method: &str, params: &Value) -> (u64, Vec<u8>) {
        let id = self.next_id;
        self.next_id += 1;
        let mut f = if params.is_null() {
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method}))
        } else {
            serde_json::to_vec(
                &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            )
        }
        .expect("encode");
        f.push(b'\n');
        (id, f)
    }

    fn write(&mut self, frame: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin");
        stdin.write_all(frame).expect("write stdin");
        stdin.flush().expect("flush stdin");
    }

    /// The next stdout line into `self.buf` (without the newline).
    fn read_line(&mut self) {
        self.buf.clear();
        if self
            .out
            .read_until(b'\n', &mut self.buf)
            .expect("read stdout")
            == 0
        {
            let tail = self.tail.lock().unwrap().join("\n");
            panic!("the sidecar closed stdout; stderr tail:\n{tail}");
        }
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        }
    }

    fn is_response(&self, id: u64) -> bool {
        let prefix = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},");
        self.buf.starts_with(prefix.as_bytes())
    }

    fn check_reverse(&self) {
        if self.buf.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":\"") {
            failure(&format!(
                "unexpected reverse request: {}",
                String::from_utf8_lossy(&self.buf)
            ));
        }
    }

    /// Sends a pre-built frame and returns the time to its whole response line, and the line.
    fn call_frame(&mut self, id: u64, frame: &[u8], what: &str) -> (Duration, Value) {
        let t = Instant::now();
        self.write(frame);
        loop {
            self.read_line();
            if self.is_response(id) {
                break;
            }
            self.check_reverse();
        }
        let d = t.elapsed();
        let v: Value = serde_json::from_slice(&self.buf).expect("response JSON");
        if v.get("error").is_some() {
            failure(&format!("{what}: {}", v["error"]));
        }
        (d, v)
    }

    fn call(&mut self, method: &str, params: Value) -> (Duration, Value) {
        let (id, f) = self.frame(method, &params);
        self.call_frame(id, &f, method)
    }

    /// Runs one `agent.chat.stream` turn; returns request → `stream.done`.
    fn turn(&mut self, params: &Value) -> Duration {
        let (id, f) = self.frame("agent.chat.stream", params);
        let t = Instant::now();
        self.write(&f);
        let mut answered = false;
        let mut done: Option<(Duration, Vec<u8>)> = None;
        loop {
            self.read_line();
            if self.is_response(id) {
                answered = true;
                let v: Value = serde_json::from_slice(&self.buf).expect("response JSON");
                if v.get("error").is_some() {
                    failure(&format!("agent.chat.stream: {}", v["error"]));
                    return t.elapsed();
                }
            } else if self
                .buf
                .starts_with(b"{\"jsonrpc\":\"2.0\",\"method\":\"stream.done\"")
            {
                done = Some((t.elapsed(), self.buf.clone()));
            } else if self
                .buf
                .starts_with(b"{\"jsonrpc\":\"2.0\",\"method\":\"stream.error\"")
            {
                failure(&format!(
                    "stream.error: {}",
                    String::from_utf8_lossy(&self.buf)
                ));
            } else {
                self.check_reverse();
            }
            if answered && done.is_some() {
                break;
            }
        }
        let (d, line) = done.expect("stream.done");
        let v: Value = serde_json::from_slice(&line).expect("stream.done JSON");
        if v["params"]["status"] != "completed" {
            failure(&format!("turn did not complete: {}", v["params"]));
        }
        d
    }

    fn close(mut self) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        let _ = self.out.read_to_end(&mut rest);
        let _ = self.child.wait();
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

// ---------------------------------------------------------------------------------------------
// Plugins: 40 manifests × 250 tools.

const VERBS: &[&str] = &[
    "list",
    "get",
    "search",
    "describe",
    "count",
    "export",
    "sync",
    "audit",
    "tag",
    "inspect",
    "summarize",
];
const NOUNS: &[&str] = &[
    "tickets",
    "invoices",
    "deployments",
    "customers",
    "builds",
    "alerts",
    "documents",
    "pipelines",
    "accounts",
    "metrics",
    "releases",
    "contracts",
    "incidents",
];

fn write_plugins(home: &Path) {
    let dir = home.join("plugins");
    std::fs::create_dir_all(&dir).expect("plugins dir");
    let exec = home.join("plugin-tool.sh");
    std::fs::write(
        &exec,
        "#!/bin/sh\ncat >/dev/null\necho '{\"success\":true,\"message\":\"ok\"}'\n",
    )
    .expect("plugin exec");
    std::fs::set_permissions(&exec, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let exec = exec.display().to_string();
    for f in 0..PLUGIN_FILES {
        let suite = format!("suite{f:02}");
        let mut s = format!(
            "name = \"{suite}\"\ndescription = \"Integration suite {f}: records of a company's internal services\"\n\n"
        );
        for t in 0..TOOLS_PER_FILE {
            let n = f * TOOLS_PER_FILE + t;
            let noun = NOUNS[n % NOUNS.len()];
            let verb = VERBS[(n / NOUNS.len()) % VERBS.len()];
            let exposure = if t.is_multiple_of(25) {
                "direct"
            } else {
                "deferred"
            };
            let mode = ["read", "external", "safe_write"][t % 3];
            let mut props = format!(
                "\"query\":{{\"type\":\"string\",\"description\":\"Free-text filter over {noun} names, ids and owners\"}},\"limit\":{{\"type\":\"integer\",\"minimum\":1,\"maximum\":500,\"description\":\"Most rows to return (default 50)\"}}"
            );
            if n.is_multiple_of(2) {
                props.push_str(&format!(
                    ",\"include_archived\":{{\"type\":\"boolean\",\"description\":\"Also return archived {noun}\"}}"
                ));
            }
            s.push_str(&format!(
                "[[tools]]\nname = \"{verb}_{noun}_{n:05}\"\ndescription = \"{verb} {noun} in the {suite} service; returns matching rows as JSON with ids, owners, status and timestamps.\"\nexec = \"{exec}\"\ntimeout = \"30s\"\nmode = \"{mode}\"\nexposure = \"{exposure}\"\nparameters = '''{{\"type\":\"object\",\"properties\":{{{props}}},\"required\":[\"query\"]}}'''\n\n"
            ));
        }
        std::fs::write(dir.join(format!("{suite}.toml")), s).expect("manifest");
    }
}

// ---------------------------------------------------------------------------------------------
// A fake OpenAI-compatible server: HTTP/1.1 keep-alive, a canned SSE body per POST (a tool
// call while `tool_rounds` > 0, else a tiny text answer). Its own time per request (request
// line read → response written) is summed so the bench can take it out.

struct Fake {
    port: u16,
    tool_rounds: Arc<AtomicUsize>,
    started: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
    busy_ns: Arc<AtomicU64>,
}

const TEXT_SSE: &str = concat!(
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1,\"total_tokens\":10}}\n\n",
    "data: [DONE]\n\n",
);

fn tool_sse(n: usize) -> String {
    format!(
        concat!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{{\"index\":0,\"id\":\"call_{n}\",\"type\":\"function\",\"function\":{{\"name\":\"read_file\",\"arguments\":\"{{\\\"path\\\":\\\"notes.txt\\\"}}\"}}}}]}},\"finish_reason\":null}}]}}\n\n",
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\n",
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":[],\"usage\":{{\"prompt_tokens\":9,\"completion_tokens\":5,\"total_tokens\":14}}}}\n\n",
            "data: [DONE]\n\n",
        ),
        n = n
    )
}

impl Fake {
    fn start() -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = listener.local_addr().expect("addr").port();
        let fake = Fake {
            port,
            tool_rounds: Arc::new(AtomicUsize::new(0)),
            started: Arc::new(AtomicUsize::new(0)),
            finished: Arc::new(AtomicUsize::new(0)),
            busy_ns: Arc::new(AtomicU64::new(0)),
        };
        let (rounds, started, finished, busy) = (
            fake.tool_rounds.clone(),
            fake.started.clone(),
            fake.finished.clone(),
            fake.busy_ns.clone(),
        );
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (r, s, f, b) = (
                    rounds.clone(),
                    started.clone(),
                    finished.clone(),
                    busy.clone(),
                );
                std::thread::spawn(move || serve_conn(conn, r, s, f, b));
            }
        });
        fake
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// (requests served, server time) once every started request has been answered.
    fn snapshot(&self) -> (usize, Duration) {
        for _ in 0..10_000 {
            let s = self.started.load(Ordering::SeqCst);
            if self.finished.load(Ordering::SeqCst) == s {
                return (s, Duration::from_nanos(self.busy_ns.load(Ordering::SeqCst)));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        panic!("the fake server never finished its requests");
    }
}

fn serve_conn(
    conn: TcpStream,
    tool_rounds: Arc<AtomicUsize>,
    started: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
    busy_ns: Arc<AtomicU64>,
) {
    let _ = conn.set_nodelay(true);
    let mut r = BufReader::new(conn.try_clone().expect("clone conn"));
    let mut w = conn;
    loop {
        let Some((_body, close)) = shared::read_request(&mut r) else {
            return;
        };
        let t0 = Instant::now();
        let n = started.fetch_add(1, Ordering::SeqCst);
        let tool = tool_rounds
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1))
            .is_ok();
        let sse = if tool {
            tool_sse(n)
        } else {
            TEXT_SSE.to_string()
        };
        let resp = shared::sse_response(&sse);
        let ok = w.write_all(&resp).and_then(|_| w.flush()).is_ok();
        busy_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::SeqCst);
        finished.fetch_add(1, Ordering::SeqCst);
        if !ok || close {
            return;
        }
    }
}

/// The floor of a model round: the bench itself POSTs `rounds` requests to the fake server
/// over one keep-alive connection (tool calls, then text, like a turn). Returns wall, server.
fn direct_rounds(fake: &Fake, conn: &mut TcpStream, rounds: usize) -> (Duration, Duration) {
    let body = json!({"model": "fake-model", "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "read notes.txt"}]})
    .to_string();
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nAuthorization: Bearer k\r\nAccept: text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        fake.port,
        body.len()
    );
    let (_, b0) = fake.snapshot();
    fake.tool_rounds.store(rounds - 1, Ordering::SeqCst);
    let mut r = BufReader::new(conn.try_clone().expect("clone"));
    let mut line = String::new();
    let mut resp = Vec::new();
    let t = Instant::now();
    for _ in 0..rounds {
        conn.write_all(req.as_bytes()).expect("post");
        let mut len = 0usize;
        loop {
            line.clear();
            r.read_line(&mut line).expect("response head");
            let h = line.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        resp.resize(len, 0);
        r.read_exact(&mut resp).expect("response body");
        assert!(resp.ends_with(b"data: [DONE]\n\n"));
    }
    let wall = t.elapsed();
    let (_, b1) = fake.snapshot();
    (wall, b1 - b0)
}

// ---------------------------------------------------------------------------------------------

struct Row {
    figure: String,
    floor: String,
    measured: String,
    diff: String,
    target: String,
}

fn row(figure: &str, floor: String, measured: String, diff: String, target: &str) -> Row {
    Row {
        figure: figure.into(),
        floor,
        measured,
        diff,
        target: target.into(),
    }
}

fn f_ms(d: Duration) -> String {
    format!("{:.3} ms", ms(d))
}

fn diff_ms(a: Duration, floor: Duration) -> String {
    let (a, f) = (ms(a), ms(floor));
    format!("{:+.3} ms (×{:.2})", a - f, a / f.max(1e-9))
}

fn diff_mib(a: u64, floor: u64) -> String {
    format!(
        "{:+.1} MiB (×{:.2})",
        mib(a) - mib(floor),
        a as f64 / (floor.max(1)) as f64
    )
}

/// `--pipe-floor BYTES`: answers each stdin line with one stdout line of `BYTES` bytes, made
/// before the first request; the floor of a large answer is moving its bytes through the pipe.
fn pipe_floor(bytes: usize) {
    let mut line = vec![b'x'; bytes.max(1)];
    if let Some(last) = line.last_mut() {
        *last = b'\n';
    }
    let mut out = std::io::stdout().lock();
    for request in std::io::stdin().lock().lines() {
        if request.is_err() {
            break;
        }
        out.write_all(&line).unwrap();
        out.flush().unwrap();
    }
}

/// Median time for a request line to bring back a `bytes`-long line through a pipe, read as
/// the sidecar's answers are read (`pipe_floor` in a child).
fn pipe_floor_median(bytes: usize, calls: usize) -> Duration {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--pipe-floor", &bytes.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut buf = Vec::new();
    let mut v = Vec::new();
    for _ in 0..calls + 1 {
        let t = Instant::now();
        stdin.write_all(b"{}\n").unwrap();
        stdin.flush().unwrap();
        buf.clear();
        out.read_until(b'\n', &mut buf).unwrap();
        v.push(t.elapsed());
    }
    drop(stdin);
    let _ = child.wait();
    v.remove(0); // the first includes the child's start
    median(&v)
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("--pipe-floor") {
        let bytes = std::env::args()
            .nth(2)
            .and_then(|b| b.parse().ok())
            .unwrap_or(1);
        return pipe_floor(bytes);
    }
    let bin = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/outrigger".into());
    // Absolute: the sidecars run in their own workspace directory.
    let bin = std::fs::canonicalize(&bin)
        .unwrap_or_else(|e| panic!("no binary at {bin}: {e}"))
        .display()
        .to_string();
    std::thread::spawn(|| {
        std::thread::sleep(WATCHDOG);
        println!("growth_bench: watchdog: still running after {WATCHDOG:?}; giving up");
        std::process::exit(2);
    });
    let started = Instant::now();
    let mut rows: Vec<Row> = Vec::new();
    let mut raw: Vec<String> = Vec::new();

    // --- Bare boot: spawn → ready and RSS at ready (median of 20); the floor of a spawn is
    // the bench spawning and reaping `true`.
    let (bare_ready, bare_rss) = {
        let (home, ws) = (tempdir(), tempdir());
        let mut ready = Vec::new();
        let mut rss = Vec::new();
        for _ in 0..BARE_SPAWNS {
            let (s, d) = Sidecar::spawn(&bin, home.path(), ws.path(), &[], "bare");
            ready.push(d);
            rss.push(s.rss_kib());
            s.close();
        }
        raw.push(format!(
            "bare spawn -> ready: median {:.3} ms, min {:.3}, max {:.3} (n={BARE_SPAWNS}); VmRSS at ready: median {} KiB",
            ms(median(&ready)),
            ms(*ready.iter().min().unwrap()),
            ms(*ready.iter().max().unwrap()),
            median_u64(&rss)
        ));
        (median(&ready), median_u64(&rss))
    };
    let true_spawn = {
        let mut v = Vec::new();
        for _ in 0..BARE_SPAWNS {
            let t = Instant::now();
            let st = Command::new("true")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("spawn true");
            v.push(t.elapsed());
            assert!(st.success());
        }
        median(&v)
    };
    raw.push(format!(
        "floor: spawn + reap `true`: median {:.3} ms",
        ms(true_spawn)
    ));

    // --- Pipelined pings (like process_bench).
    let pings_per_s = {
        let (home, ws) = (tempdir(), tempdir());
        let (mut s, _) = Sidecar::spawn(&bin, home.path(), ws.path(), &[], "pings");
        let mut payload = Vec::with_capacity(PIPELINED_PINGS * 50);
        for i in 0..PIPELINED_PINGS {
            payload.extend_from_slice(
                format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"system.ping\"}}\n")
                    .as_bytes(),
            );
        }
        let mut stdin = s.stdin.take().expect("stdin");
        let t = Instant::now();
        let writer = std::thread::spawn(move || {
            stdin.write_all(&payload).expect("write pings");
            stdin
        });
        let mut got = 0usize;
        let mut errors = 0usize;
        let mut buf = Vec::new();
        while got < PIPELINED_PINGS {
            buf.clear();
            if s.out.read_until(b'\n', &mut buf).expect("read") == 0 {
                break;
            }
            if buf.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":") {
                got += 1;
                if is_error_response(&buf) {
                    errors += 1;
                }
            }
        }
        let elapsed = t.elapsed();
        s.stdin = Some(writer.join().expect("writer"));
        if errors > 0 {
            failure(&format!("{errors} pipelined pings answered with an error"));
        }
        let rate = got as f64 / elapsed.as_secs_f64();
        raw.push(format!(
            "pipelined pings: {got} in {:.1} ms = {rate:.0}/s (VmRSS after {} KiB)",
            ms(elapsed),
            s.rss_kib()
        ));
        s.close();
        rate
    };

    // --- First system.ping after the marker (median over 10 spawns); floor: a warm ping.
    let (first_ping, warm_ping) = {
        let (home, ws) = (tempdir(), tempdir());
        let mut first = Vec::new();
        let mut warm = Vec::new();
        for _ in 0..PING_SPAWNS {
            let (mut s, _) = Sidecar::spawn(&bin, home.path(), ws.path(), &[], "first-ping");
            let (d, _) = s.call("system.ping", Value::Null);
            first.push(d);
            let mut last = Duration::ZERO;
            for _ in 0..10 {
                last = s.call("system.ping", Value::Null).0;
            }
            warm.push(last);
            s.close();
        }
        raw.push(format!(
            "first ping after ready: median {:.3} ms, max {:.3} ms; warm ping (11th): median {:.3} ms",
            ms(median(&first)),
            ms(*first.iter().max().unwrap()),
            ms(median(&warm))
        ));
        (median(&first), median(&warm))
    };

    // --- tool.list on a bare boot (floor of the 10k-tool list).
    let (bare_list, bare_tools) = {
        let (home, ws) = (tempdir(), tempdir());
        let (mut s, _) = Sidecar::spawn(&bin, home.path(), ws.path(), &[], "bare-list");
        let (_, v) = s.call("tool.list", Value::Null);
        let n = v["result"].as_array().map_or(0, Vec::len);
        let mut lat = Vec::new();
        for _ in 0..LIST_CALLS {
            lat.push(s.call("tool.list", Value::Null).0);
        }
        s.close();
        raw.push(format!(
            "bare tool.list ({n} tools): median {:.3} ms over {LIST_CALLS}",
            ms(median(&lat))
        ));
        (median(&lat), n)
    };

    // --- 10,000 plugin tools.
    {
        let (home, ws) = (tempdir(), tempdir());
        write_plugins(home.path());
        let mut ready = Vec::new();
        let mut rss_ready = Vec::new();
        let mut rss_list = Vec::new();
        let mut cpu_ready = Vec::new();
        let mut first_list = Vec::new();
        let mut lat = Vec::new();
        let mut n_tools = 0;
        let mut list_bytes = 0;
        // The first boot parses every manifest and writes the cache (<home>/cache/plugins);
        // the rest read it, as every boot after an install does.
        let cold = {
            let (s, d) = Sidecar::spawn(&bin, home.path(), ws.path(), &[], "plugins-cold");
            s.close();
            d
        };
        for i in 0..PLUGIN_SPAWNS {
            let (mut s, d) = Sidecar::spawn(&bin, home.path(), ws.path(), &[], "plugins");
            ready.push(d);
            rss_ready.push(s.rss_kib());
            cpu_ready.push(s.cpu());
            let (d, v) = s.call("tool.list", Value::Null);
            first_list.push(d);
            rss_list.push(s.rss_kib());
            n_tools = v["result"].as_array().map_or(0, Vec::len);
            list_bytes = s.buf.len();
            if i + 1 == PLUGIN_SPAWNS {
                for _ in 0..LIST_CALLS {
                    lat.push(s.call("tool.list", Value::Null).0);
                }
                raw.push(format!(
                    "10k plugins: VmRSS after {} tool.list calls: {} KiB",
                    LIST_CALLS + 1,
                    s.rss_kib()
                ));
            }
            s.close();
        }
        let expect = PLUGIN_FILES * TOOLS_PER_FILE + bare_tools;
        if n_tools != expect {
            println!("note: tool.list listed {n_tools} tools, expected {expect}");
        }
        raw.push(format!(
            "10k plugins ({n_tools} tools, tool.list response {list_bytes} bytes): spawn -> ready median {:.3} ms (min {:.3}, max {:.3}, n={PLUGIN_SPAWNS}), sidecar CPU at ready median {:.3} ms; VmRSS at ready median {} KiB, after one tool.list median {} KiB; first tool.list median {:.3} ms; tool.list median {:.3} ms, p99 {:.3} ms over {LIST_CALLS}",
            ms(median(&ready)),
            ms(*ready.iter().min().unwrap()),
            ms(*ready.iter().max().unwrap()),
            ms(median(&cpu_ready)),
            median_u64(&rss_ready),
            median_u64(&rss_list),
            ms(median(&first_list)),
            ms(median(&lat)),
            ms(p99(&lat)),
        ));
        let floor = pipe_floor_median(list_bytes + 1, LIST_CALLS);
        raw.push(format!(
            "pipe floor: a {}-byte line per request line, median {:.3} ms over {LIST_CALLS}",
            list_bytes + 1,
            ms(floor)
        ));
        let (r_ready, r_list) = (median_u64(&rss_ready), median_u64(&rss_list));
        rows.push(row(
            "RSS at ready, 10,000 plugin tools",
            format!("{:.1} MiB (bare boot)", mib(bare_rss)),
            format!("{:.1} MiB", mib(r_ready)),
            diff_mib(r_ready, bare_rss),
            "≤ 40 MiB",
        ));
        rows.push(row(
            "RSS after one tool.list, 10,000 plugin tools",
            format!("{:.1} MiB (at ready)", mib(r_ready)),
            format!("{:.1} MiB", mib(r_list)),
            diff_mib(r_list, r_ready),
            "flat",
        ));
        rows.push(row(
            "spawn → ready, 10,000 plugin tools (median of 5, manifests cached)",
            format!("{} (bare boot)", f_ms(bare_ready)),
            f_ms(median(&ready)),
            diff_ms(median(&ready), bare_ready),
            "≤ 60 ms",
        ));
        rows.push(row(
            "same, first boot (every manifest parsed, the cache written)",
            format!("{} (bare boot)", f_ms(bare_ready)),
            f_ms(cold),
            diff_ms(cold, bare_ready),
            "",
        ));
        rows.push(row(
            "tool.list latency, 10,000 tools (median of 10)",
            format!("{} (bare boot, {bare_tools} tools)", f_ms(bare_list)),
            f_ms(median(&lat)),
            diff_ms(median(&lat), bare_list),
            "≤ 20 ms",
        ));
        rows.push(row(
            "tool.list latency, 10,000 tools, over its bytes through a pipe",
            format!("{} (pipe floor)", f_ms(floor)),
            f_ms(median(&lat)),
            diff_ms(median(&lat), floor),
            "—",
        ));
    }

    // --- bash via tool.invoke: sandboxed, unsandboxed, and plain bash; back to back, and
    // spaced `BASH_GAP` apart as model rounds space a turn's commands (some kernel costs,
    // like a cgroup move, only show after a pause).
    {
        let plain_bash = |n: usize, gap: Duration| {
            let mut v = Vec::new();
            for i in 0..n + BASH_WARMUP {
                std::thread::sleep(gap);
                let t = Instant::now();
                let o = Command::new("bash")
                    .args(["-c", "true"])
                    .stdin(Stdio::null())
                    .output()
                    .expect("bash");
                let d = t.elapsed();
                assert!(o.status.success());
                if i >= BASH_WARMUP {
                    v.push(d);
                }
            }
            v
        };
        let plain = plain_bash(BASH_CALLS, Duration::ZERO);
        let plain_spaced = plain_bash(BASH_SPACED_CALLS, BASH_GAP);
        let mut invoke_n = |env: &[(&str, &str)], tag: &str, n: usize, gap: Duration| {
            let (home, ws) = (tempdir(), tempdir());
            let (mut s, _) = Sidecar::spawn(&bin, home.path(), ws.path(), env, tag);
            let params = json!({"name": "bash", "arguments": {"command": "true"},
                "consentGranted": true, "context": {"cwd": ws.path()}});
            let mut v = Vec::new();
            for i in 0..n + BASH_WARMUP {
                std::thread::sleep(gap);
                let (id, f) = s.frame("tool.invoke", &params);
                let (d, r) = s.call_frame(id, &f, "tool.invoke bash");
                if r["result"]["success"] != true {
                    failure(&format!("{tag}: bash call failed: {}", r["result"]));
                }
                if i == 0 {
                    raw.push(format!("{tag}: first result: {}", r["result"]));
                }
                if i >= BASH_WARMUP {
                    v.push(d);
                }
            }
            s.close();
            v
        };
        let sandboxed = invoke_n(&[], "bash sandboxed", BASH_CALLS, Duration::ZERO);
        let unsandboxed = invoke_n(
            &[("OUTRIGGER_SANDBOX_ENABLED", "false")],
            "bash no sandbox",
            BASH_CALLS,
            Duration::ZERO,
        );
        let spaced = invoke_n(&[], "bash sandboxed, spaced", BASH_SPACED_CALLS, BASH_GAP);
        let cold_spaced = invoke_n(
            &[("OUTRIGGER_SANDBOX_WARM_IDLE_MS", "0")],
            "bash sandboxed, spaced, warm spawn off",
            BASH_SPACED_CALLS,
            BASH_GAP,
        );
        raw.push(format!(
            "bash -c true {} ms apart (n={BASH_SPACED_CALLS}): plain median {:.3} ms; tool.invoke sandboxed median {:.3} p99 {:.3} ms; same with sandbox_warm_idle_ms=0 median {:.3} p99 {:.3} ms",
            BASH_GAP.as_millis(),
            ms(median(&plain_spaced)),
            ms(median(&spaced)),
            ms(p99(&spaced)),
            ms(median(&cold_spaced)),
            ms(p99(&cold_spaced)),
        ));
        rows.push(row(
            "sandboxed bash -c true via tool.invoke, 100 ms apart, median",
            format!("{} (plain bash, same spacing)", f_ms(median(&plain_spaced))),
            f_ms(median(&spaced)),
            diff_ms(median(&spaced), median(&plain_spaced)),
            "≤ +1 ms over plain",
        ));
        rows.push(row(
            "same, sandbox_warm_idle_ms = 0 (every command cold), median",
            format!("{} (plain bash, same spacing)", f_ms(median(&plain_spaced))),
            f_ms(median(&cold_spaced)),
            diff_ms(median(&cold_spaced), median(&plain_spaced)),
            "(split: warm spawn's share)",
        ));
        raw.push(format!(
            "bash -c true (n={BASH_CALLS} after {BASH_WARMUP} warm-ups): plain median {:.3} p99 {:.3} ms; tool.invoke sandboxed median {:.3} p99 {:.3} ms; tool.invoke sandbox_enabled=false median {:.3} p99 {:.3} ms",
            ms(median(&plain)),
            ms(p99(&plain)),
            ms(median(&sandboxed)),
            ms(p99(&sandboxed)),
            ms(median(&unsandboxed)),
            ms(p99(&unsandboxed)),
        ));
        rows.push(row(
            "sandboxed bash -c true via tool.invoke, median of 200",
            format!("{} (plain bash)", f_ms(median(&plain))),
            f_ms(median(&sandboxed)),
            diff_ms(median(&sandboxed), median(&plain)),
            "≤ +1 ms over plain",
        ));
        rows.push(row(
            "sandboxed bash -c true via tool.invoke, p99 of 200",
            format!("{} (plain bash)", f_ms(p99(&plain))),
            f_ms(p99(&sandboxed)),
            diff_ms(p99(&sandboxed), p99(&plain)),
            "≤ 3 ms",
        ));
        rows.push(row(
            "bash -c true via tool.invoke, sandbox_enabled=false, median",
            format!("{} (plain bash)", f_ms(median(&plain))),
            f_ms(median(&unsandboxed)),
            diff_ms(median(&unsandboxed), median(&plain)),
            "(split: tool's own handling)",
        ));
        rows.push(row(
            "bash -c true via tool.invoke, sandbox_enabled=false, p99",
            format!("{} (plain bash)", f_ms(p99(&plain))),
            f_ms(p99(&unsandboxed)),
            diff_ms(p99(&unsandboxed), p99(&plain)),
            "(split)",
        ));
    }

    // --- Chat turns against the fake model server.
    let fake = Fake::start();
    let base = json!({"provider": "openai_compat", "model": "fake-model",
        "baseUrl": fake.base_url(), "apiKey": "k"});
    let with = |extra: Value| {
        let mut p = base.clone();
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p
    };

    // Follow-up turns re-sending N history messages (the record already holds them).
    {
        let (home, ws) = (tempdir(), tempdir());
        let (mut s, _) = Sidecar::spawn(&bin, home.path(), ws.path(), &[], "history");
        let mut results = Vec::new();
        // The third: a window the seed turn's history overflows, so it is compacted and
        // every follow-up re-sends more than the record's (compacted) transcript holds.
        for (n, window) in [
            (100usize, 1_000_000u64),
            (6_000, 1_000_000),
            (6_000, 50_000),
        ] {
            let compacted = window < 1_000_000;
            let chat = format!("chat_hist_{n}_{window}");
            // N - 1 messages ending with a user message; the seed turn's answer makes N.
            let mut conv: Vec<Value> = (0..n - 1)
                .map(|i| {
                    if i.is_multiple_of(2) {
                        json!({"role": "user", "content": format!("question {i}: what does module {} do with the cache?", i % 97)})
                    } else {
                        json!({"role": "assistant", "content": format!("answer {i}: it keeps entries for {} minutes.", i % 13)})
                    }
                })
                .collect();
            let params = |conv: &Vec<Value>, k: usize| {
                with(
                    json!({"chatId": chat, "streamId": format!("str_hist_{n}_{k}"),
                    "cwd": ws.path(), "maxContextTokens": window, "messages": conv}),
                )
            };
            let (c0, b0) = fake.snapshot();
            let seed = s.turn(&params(&conv, 0));
            let (c1, b1) = fake.snapshot();
            raw.push(format!(
                "history N={n}: seed turn ({} messages) {:.3} ms ({} request, server {:.3} ms)",
                conv.len(),
                ms(seed),
                c1 - c0,
                ms(b1 - b0)
            ));
            let mut wall = Vec::new();
            let mut server = Vec::new();
            let cpu0 = s.cpu();
            for k in 1..=FOLLOW_UPS {
                conv.push(json!({"role": "assistant", "content": "ok"}));
                conv.push(json!({"role": "user", "content": format!("follow-up {k}: and then?")}));
                let (_, b0) = fake.snapshot();
                wall.push(s.turn(&params(&conv, k)));
                let (_, b1) = fake.snapshot();
                server.push(b1 - b0);
            }
            let cpu = (s.cpu() - cpu0) / FOLLOW_UPS as u32;
            let rss = s.rss_kib();
            // A re-seed (history not recognized) would re-append everything: seqs would jump.
            let (_, m) = s.call("agent.session.messages", json!({"recordId": chat}));
            let msgs = m["result"]["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let last_seq = msgs.last().and_then(|x| x["seq"].as_i64()).unwrap_or(-1);
            if !compacted && (msgs.len() != conv.len() + 1 || last_seq > 2 * msgs.len() as i64) {
                println!(
                    "note: history N={n}: the record has {} messages, last seq {last_seq} (expected {} and no re-seed)",
                    msgs.len(),
                    conv.len() + 1
                );
            }
            let n = if compacted {
                format!("{n} (window {window}, compacted)")
            } else {
                n.to_string()
            };
            raw.push(format!(
                "history N={n}: record after the follow-ups: {} messages, last seq {last_seq}",
                msgs.len()
            ));
            raw.push(format!(
                "history N={n}: follow-up (N prior + 1 new, up to {} messages) request -> stream.done median {:.3} ms (min {:.3}, max {:.3}, n={FOLLOW_UPS}); fake server's own time median {:.3} ms; sidecar CPU (all threads) mean {:.3} ms per follow-up; VmRSS after {rss} KiB",
                conv.len(),
                ms(median(&wall)),
                ms(*wall.iter().min().unwrap()),
                ms(*wall.iter().max().unwrap()),
                ms(median(&server)),
                ms(cpu),
            ));
            results.push((median(&wall), median(&server)));
        }
        s.close();
        let ((w100, s100), (w6k, s6k), (wc, _)) = (results[0], results[1], results[2]);
        rows.push(row(
            "follow-up turn, 6,000 re-sent messages (request → stream.done, median of 7)",
            format!("{} (N = 100)", f_ms(w100)),
            f_ms(w6k),
            diff_ms(w6k, w100),
            "≤ +1 ms at 6,000 vs 100",
        ));
        rows.push(row(
            "  same, minus the fake server's own time",
            f_ms(w100.saturating_sub(s100)),
            f_ms(w6k.saturating_sub(s6k)),
            diff_ms(w6k.saturating_sub(s6k), w100.saturating_sub(s100)),
            "",
        ));
        rows.push(row(
            "  same, the history compacted by the first turn (window 50,000 tokens)",
            format!("{} (N = 6,000, not compacted)", f_ms(w6k)),
            f_ms(wc),
            diff_ms(wc, w6k),
            "",
        ));
    }

    // Fixed cost per model round: 10-round turns (9 read_file calls, then text).
    let (per_round_turn, per_round_floor, turn10) = {
        let (home, ws) = (tempdir(), tempdir());
        std::fs::write(ws.path().join("notes.txt"), "alpha\nbeta\ngamma\n").expect("notes");
        let (mut s, _) = Sidecar::spawn(&bin, home.path(), ws.path(), &[], "rounds");
        let mut per_round = Vec::new();
        let mut walls = Vec::new();
        let mut servers = Vec::new();
        let mut cpus = Vec::new();
        for k in 0..=ROUND_TURNS {
            let (c0, b0) = fake.snapshot();
            let cpu0 = s.cpu();
            fake.tool_rounds.store(ROUNDS - 1, Ordering::SeqCst);
            let d = s.turn(&with(json!({"chatId": format!("chat_rounds_{k}"),
                "streamId": format!("str_rounds_{k}"), "cwd": ws.path(),
                "messages": [{"role": "user", "content": "read notes.txt ten times"}]})));
            let (c1, b1) = fake.snapshot();
            let cpu = s.cpu() - cpu0;
            if c1 - c0 != ROUNDS {
                println!(
                    "note: a {ROUNDS}-round turn made {} provider requests",
                    c1 - c0
                );
            }
            // The first turn opens the connection and builds the HTTP client: a warm-up.
            if k > 0 {
                walls.push(d);
                servers.push(b1 - b0);
                cpus.push(cpu);
                per_round.push(d.saturating_sub(b1 - b0) / ROUNDS as u32);
            }
        }
        s.close();
        let mut conn = TcpStream::connect(("127.0.0.1", fake.port)).expect("connect");
        conn.set_nodelay(true).expect("nodelay");
        let mut floor = Vec::new();
        let mut fwalls = Vec::new();
        for k in 0..=ROUND_TURNS {
            let (w, b) = direct_rounds(&fake, &mut conn, ROUNDS);
            if k > 0 {
                fwalls.push(w);
                floor.push(w.saturating_sub(b) / ROUNDS as u32);
            }
        }
        raw.push(format!(
            "{ROUNDS}-round turn: wall median {:.3} ms, fake server's own time median {:.3} ms, (wall - server)/{ROUNDS} median {:.3} ms (n={ROUND_TURNS}), sidecar CPU (all threads) median {:.3} ms per turn; direct HTTP, {ROUNDS} requests: wall median {:.3} ms, (wall - server)/{ROUNDS} median {:.3} ms",
            ms(median(&walls)),
            ms(median(&servers)),
            ms(median(&per_round)),
            ms(median(&cpus)),
            ms(median(&fwalls)),
            ms(median(&floor)),
        ));
        (
            median(&per_round),
            median(&floor),
            (median(&walls), median(&servers)),
        )
    };
    rows.push(row(
        "fixed cost per model round above the provider (10-round turn)",
        format!("{} (direct HTTP)", f_ms(per_round_floor)),
        f_ms(per_round_turn),
        diff_ms(per_round_turn, per_round_floor),
        "≤ 0.3 ms per round",
    ));

    // RSS after 100 small turns (each a new chat: one user message, a text answer).
    {
        let (home, ws) = (tempdir(), tempdir());
        let (mut s, _) = Sidecar::spawn(&bin, home.path(), ws.path(), &[], "small-turns");
        let at_ready = s.rss_kib();
        let mut walls = Vec::new();
        let mut servers = Vec::new();
        for k in 0..SMALL_TURNS {
            let (_, b0) = fake.snapshot();
            walls.push(s.turn(&with(json!({"chatId": format!("chat_small_{k}"),
                "streamId": format!("str_small_{k}"), "cwd": ws.path(),
                "messages": [{"role": "user", "content": format!("small question {k}")}]}))));
            let (_, b1) = fake.snapshot();
            servers.push(b1 - b0);
        }
        let after = s.rss_kib();
        s.close();
        let (w1, s1) = (median(&walls[1..]), median(&servers[1..]));
        let (w10, s10) = turn10;
        let marginal =
            (w10.saturating_sub(s10)).saturating_sub(w1.saturating_sub(s1)) / (ROUNDS as u32 - 1);
        raw.push(format!(
            "small turns: VmRSS at ready {at_ready} KiB, after {SMALL_TURNS} turns {after} KiB; one-round turn wall median {:.3} ms (p99 {:.3}), server median {:.3} ms; marginal cost of a round ((10-round - 1-round, both minus server) / 9): {:.3} ms",
            ms(w1),
            ms(p99(&walls[1..])),
            ms(s1),
            ms(marginal)
        ));
        rows.push(row(
            "RSS after 100 small turns",
            format!("{:.1} MiB (at ready)", mib(at_ready)),
            format!("{:.1} MiB", mib(after)),
            diff_mib(after, at_ready),
            "≤ 14 MiB",
        ));
    }

    rows.push(row(
        "first system.ping after ready (median over 10 spawns)",
        format!("{} (warm ping)", f_ms(warm_ping)),
        f_ms(first_ping),
        diff_ms(first_ping, warm_ping),
        "≤ 1 ms",
    ));
    rows.push(row(
        "spawn → ready, bare (median of 20)",
        format!("{} (spawn + reap `true`)", f_ms(true_spawn)),
        f_ms(bare_ready),
        diff_ms(bare_ready, true_spawn),
        "≤ 1.5 ms",
    ));
    rows.push(row(
        "RSS at ready, bare (median of 20)",
        "—".into(),
        format!("{:.1} MiB", mib(bare_rss)),
        "—".into(),
        "≤ 6 MiB",
    ));
    rows.push(row(
        "pipelined system.ping throughput (100,000)",
        "—".into(),
        format!("{:.0}/s", pings_per_s),
        "—".into(),
        "≥ 400k/s",
    ));

    println!();
    println!("| figure | floor | measured | difference or ratio | target |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.figure, r.floor, r.measured, r.diff, r.target
        );
    }
    println!();
    println!("Raw numbers:");
    for l in &raw {
        println!("- {l}");
    }
    let notes = STDERR_NOTES.lock().unwrap();
    if !notes.is_empty() {
        println!();
        println!("Sidecar stderr warnings/errors ({}):", notes.len());
        for n in notes.iter().take(20) {
            println!("  {n}");
        }
    }
    println!();
    println!(
        "growth_bench: done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let failures = FAILURES.load(Ordering::SeqCst);
    if failures > 0 {
        println!("growth_bench: {failures} protocol error(s)");
        std::process::exit(1);
    }
}

/// Whether a response line is an error response (`"error":` right after the id).
fn is_error_response(line: &[u8]) -> bool {
    line.windows(9).take(48).any(|w| w == b",\"error\":")
}
