//! `outrigger inspect`: the read-only web page over the store, served on loopback. Each test
//! builds a database with the real sidecar (scripted provider), starts the inspector on it
//! and talks raw HTTP/1.1 to it over a `TcpStream`, as a browser on this machine would.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ExitStatus, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Sidecar, WAIT, base_command, line_channel, on_db, run_once, wait_until};
use crate::support::chat_helpers::*;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// ---------------------------------------------------------------------------------------
// HTTP/1.1 over a bare TcpStream.

struct Resp {
    status: u16,
    /// Header names lowercased, in order.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl std::fmt::Debug for Resp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HTTP {} {:?} {}",
            self.status,
            self.headers,
            String::from_utf8_lossy(&self.body)
        )
    }
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap_or_else(|e| panic!("body not UTF-8: {e}"))
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {self:?}"))
    }
}

/// Sends `raw` (a whole request) to `addr` and reads the response until the server closes.
fn exchange(addr: SocketAddr, head_only: bool, raw: &[u8]) -> Resp {
    let mut s =
        TcpStream::connect_timeout(&addr, WAIT).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.set_write_timeout(Some(WAIT)).unwrap();
    s.write_all(raw).unwrap();
    s.flush().unwrap();
    let mut buf = Vec::new();
    if let Err(e) = s.read_to_end(&mut buf) {
        // A reset after a complete response is still a response; a timeout is not.
        assert!(
            !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "no whole response from {addr} within {WAIT:?}: got {:?}",
            String::from_utf8_lossy(&buf)
        );
    }
    parse_response(&buf, head_only)
}

fn parse_response(buf: &[u8], head_only: bool) -> Resp {
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(buf)));
    let head = std::str::from_utf8(&buf[..end]).expect("header block is UTF-8");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap();
    assert!(
        version.starts_with("HTTP/1."),
        "status line {status_line:?}"
    );
    let status: u16 = parts
        .next()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (k, v) = l
                .split_once(':')
                .unwrap_or_else(|| panic!("header line {l:?}"));
            (k.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let rest = &buf[end + 4..];
    let mut r = Resp {
        status,
        headers,
        body: Vec::new(),
    };
    if head_only {
        r.body = rest.to_vec();
        return r;
    }
    let chunked = r
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    r.body = if chunked {
        dechunk(rest)
    } else if let Some(n) = r.header("content-length") {
        let n: usize = n.parse().unwrap();
        assert!(rest.len() >= n, "short body: {} of {n} bytes", rest.len());
        rest[..n].to_vec()
    } else {
        rest.to_vec()
    };
    r
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size_text = std::str::from_utf8(&b[..eol]).unwrap();
        let size_text = size_text.split(';').next().unwrap().trim();
        let size = usize::from_str_radix(size_text, 16).unwrap();
        b = &b[eol + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// A request to 127.0.0.1:`port` with `Connection: close`. `host: None` sends the usual
/// `Host: 127.0.0.1:<port>`; `Some("")` sends no Host header at all.
fn http(
    port: u16,
    method: &str,
    target: &str,
    host: Option<&str>,
    headers: &[(&str, &str)],
) -> Resp {
    let mut req = format!("{method} {target} HTTP/1.1\r\n");
    match host {
        None => req.push_str(&format!("Host: 127.0.0.1:{port}\r\n")),
        Some("") => {}
        Some(h) => req.push_str(&format!("Host: {h}\r\n")),
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !matches!(method, "GET" | "HEAD") {
        req.push_str("Content-Length: 0\r\n");
    }
    req.push_str("Connection: close\r\n\r\n");
    exchange(
        SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        method == "HEAD",
        req.as_bytes(),
    )
}

/// Every byte but the unreserved ones as `%XX`.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `enc` with lowercase hex digits in the escapes.
fn enc_lower(s: &str) -> String {
    let encoded = enc(s);
    let mut out = String::new();
    let mut chars = encoded.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '%' {
            for _ in 0..2 {
                out.push(chars.next().unwrap().to_ascii_lowercase());
            }
        }
    }
    out
}

/// The headers every response carries.
fn assert_hardened(r: &Resp, what: &str) {
    assert_eq!(r.header("cache-control"), Some("no-store"), "{what}: {r:?}");
    assert_eq!(
        r.header("x-content-type-options"),
        Some("nosniff"),
        "{what}: {r:?}"
    );
    assert_eq!(
        r.header("referrer-policy"),
        Some("no-referrer"),
        "{what}: {r:?}"
    );
}

fn assert_json_type(r: &Resp, what: &str) {
    let ct = r.header("content-type").unwrap_or("");
    assert!(
        ct.starts_with("application/json"),
        "{what}: content-type {ct:?}: {r:?}"
    );
}

/// An error response: `status`, JSON `{"error": {"code": status, "message": "..."}}` and the
/// usual headers. Returns the message.
fn assert_error(r: &Resp, status: u16, what: &str) -> String {
    assert_eq!(r.status, status, "{what}: {r:?}");
    assert_json_type(r, what);
    assert_hardened(r, what);
    let v = r.json();
    let top: Vec<&String> = v.as_object().expect("error body object").keys().collect();
    assert_eq!(top, ["error"], "{what}: {v}");
    let mut keys: Vec<&String> = v["error"]
        .as_object()
        .expect("error object")
        .keys()
        .collect();
    keys.sort();
    assert_eq!(keys, ["code", "message"], "{what}: {v}");
    assert_eq!(v["error"]["code"], json!(status), "{what}: {v}");
    let msg = v["error"]["message"].as_str().expect("message string");
    assert!(!msg.trim().is_empty(), "{what}: empty message: {v}");
    msg.to_string()
}

// ---------------------------------------------------------------------------------------
// The inspector process.

struct Inspector {
    child: Child,
    /// Held open: the inspector serves until killed, whatever its stdin does.
    _stdin: Option<ChildStdin>,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
    url: String,
    port: u16,
    token: String,
    /// `OUTRIGGER_HOME`/`HOME` of the process when the test did not give one.
    _home: Option<tempfile::TempDir>,
}

impl Inspector {
    /// `outrigger inspect --storage-path <db>`.
    fn on(db: &Path) -> Inspector {
        Inspector::start(
            None,
            &["inspect", "--storage-path", &db.display().to_string()],
        )
    }

    /// The binary with `args` (home: `OUTRIGGER_HOME`, a fresh empty one when `None`); waits
    /// for the one stdout line and checks its shape.
    fn start(home: Option<&Path>, args: &[&str]) -> Inspector {
        let own = match home {
            Some(_) => None,
            None => Some(tempfile::tempdir().unwrap()),
        };
        let home_path = home.map_or_else(
            || own.as_ref().unwrap().path().to_path_buf(),
            Path::to_path_buf,
        );
        let mut cmd = base_command(&home_path);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn outrigger inspect");
        let stdin = child.stdin.take();
        let stdout = line_channel(child.stdout.take().unwrap());
        let stderr = line_channel(child.stderr.take().unwrap());
        let line = match stdout.recv_timeout(WAIT) {
            Ok(l) => l,
            Err(e) => {
                let _ = child.kill();
                let status = child.wait();
                let err: Vec<String> = stderr.try_iter().collect();
                panic!("`outrigger {args:?}` printed no URL ({e:?}, {status:?}); stderr: {err:#?}");
            }
        };
        let rest = line
            .strip_prefix("http://127.0.0.1:")
            .unwrap_or_else(|| panic!("the URL is not on 127.0.0.1: {line:?}"));
        let (port, token) = rest
            .split_once("/?token=")
            .unwrap_or_else(|| panic!("URL shape: {line:?}"));
        let port: u16 = port.parse().unwrap_or_else(|_| panic!("port in {line:?}"));
        assert_ne!(port, 0, "{line:?}");
        Inspector {
            child,
            _stdin: stdin,
            stdout,
            stderr,
            url: line.clone(),
            port,
            token: token.to_string(),
            _home: own,
        }
    }

    /// `GET path` with the token as `Authorization: Bearer`.
    fn get(&self, path: &str) -> Resp {
        let auth = format!("Bearer {}", self.token);
        http(self.port, "GET", path, None, &[("Authorization", &auth)])
    }

    /// `path` with `?token=` (or `&token=`) appended.
    fn with_token(&self, path: &str) -> String {
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{path}{sep}token={}", self.token)
    }

    /// A JSON endpoint that must answer 200.
    fn api(&self, path: &str) -> Value {
        let r = self.get(path);
        assert_eq!(r.status, 200, "GET {path}: {r:?}");
        assert_json_type(&r, path);
        assert_hardened(&r, path);
        r.json()
    }

    fn record_ids(&self, query: &str) -> Vec<String> {
        ids(&self.api(&format!("/api/records{query}")))
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }

    fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "inspect did not exit within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Inspector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The rest of a dead process's output lines (until its pipe closes, at most `WAIT`).
fn drain(rx: &Receiver<String>) -> Vec<String> {
    let mut out = Vec::new();
    let deadline = Instant::now() + WAIT;
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) => out.push(l),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return out,
            Err(e) => panic!("the output did not close: {e:?} after {out:?}"),
        }
    }
}

fn ids(records: &Value) -> Vec<String> {
    records["records"]
        .as_array()
        .unwrap_or_else(|| panic!("no records array: {records}"))
        .iter()
        .map(|r| r["recordId"].as_str().unwrap().to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------
// Databases made by the real sidecar.

const A: &str = "chat_alpha";
/// `:`, `/`, spaces and non-ASCII: it must travel percent-encoded.
const B: &str = "proj:ü/β chat №2";
const FORK: &str = "chat_alpha:try-b";
const A_USER: &str = "What do the notes say?";
const A_USER_2: &str = "Anything else in there?";
/// Longer than a title (120 characters), with a word no other record has.
const B_USER: &str = "Please read notes.txt and then tell me everything you know about the Quokka, \
                      its habitat on Rottnest Island, its diet, and why it always seems to smile at tourists.";
/// A second message in B: quotes, a backslash and non-ASCII letters, as people type them.
const B_USER_2: &str =
    r#"Is it really the "happiest animal" in C:\Zoo\Guide? Ask Émilie Ångström."#;

struct Fixture {
    dir: tempfile::TempDir,
    db: PathBuf,
    _ws: tempfile::TempDir,
    /// The traces of A's and B's two turns each, from their `stream.done`.
    traces_a: Vec<String>,
    traces_b: Vec<String>,
    /// `agent.session.fork`'s answer.
    fork: Value,
    /// Answers of a sidecar restarted on the finished database.
    messages: HashMap<String, Value>,
    trees: HashMap<String, Value>,
    fetched: HashMap<String, Value>,
}

/// Waits for the wall clock to pass the next millisecond, so what is written after has a
/// later `created_at` (ISO, millisecond precision) than what was written before: the record
/// list's "newest activity first" is then one order, not a tie.
fn next_millisecond() {
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    };
    let start = now();
    assert!(
        wait_until(WAIT, || now() > start + 1),
        "the clock stands still"
    );
}

fn scripted_turn(s: &mut Sidecar, script: Value, user: &str, extra: Value) -> Streamed {
    next_millisecond();
    let r = run(s, merge(scripted(script, user), extra));
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    r
}

fn shutdown(mut s: Sidecar) {
    s.ok("system.shutdown", Value::Null);
    assert!(s.wait_exit(WAIT).success());
}

/// Two chats with read_file calls (A over two turns), a labelled fork of A before its last
/// user message; then the sidecar's own answers about them, from a restart on the database.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("inspect.db");
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "The notes say hello.\n").unwrap();
    let cwd = ws.path().display().to_string();
    let read = |id: &str| json!({"toolCalls": [{"id": id, "name": "read_file", "arguments": {"path": "notes.txt"}}]});

    let mut s = on_db(&db);
    let a1 = scripted_turn(
        &mut s,
        json!([read("a1"), {"text": "They say hello."}]),
        A_USER,
        json!({"chatId": A, "cwd": cwd}),
    );
    let b = scripted_turn(
        &mut s,
        json!([read("b1"), {"text": "Quokkas are small marsupials."}]),
        B_USER,
        json!({"chatId": B, "cwd": cwd}),
    );
    let b2 = scripted_turn(
        &mut s,
        json!([{"text": "So they say."}]),
        B_USER_2,
        json!({"chatId": B, "cwd": cwd, "fromRecord": true}),
    );
    let a2 = scripted_turn(
        &mut s,
        json!([read("a2"), {"text": "Nothing else."}]),
        A_USER_2,
        json!({"chatId": A, "cwd": cwd, "fromRecord": true}),
    );
    next_millisecond();
    let fork = s.ok(
        "agent.session.fork",
        json!({"recordId": A, "beforeLastUser": true, "label": "try B", "newRecordId": FORK}),
    );
    assert_eq!(fork["recordId"], FORK, "{fork}");
    shutdown(s);

    let mut s = on_db(&db);
    let mut messages = HashMap::new();
    let mut trees = HashMap::new();
    for r in [A, B, FORK] {
        messages.insert(
            r.to_string(),
            s.ok("agent.session.messages", json!({"recordId": r})),
        );
        trees.insert(
            r.to_string(),
            s.ok("agent.session.tree", json!({"recordId": r})),
        );
    }
    let traces_a: Vec<String> = [&a1, &a2]
        .iter()
        .map(|r| r.done["traceId"].as_str().unwrap().to_string())
        .collect();
    let traces_b: Vec<String> = [&b, &b2]
        .iter()
        .map(|r| r.done["traceId"].as_str().unwrap().to_string())
        .collect();
    let mut fetched = HashMap::new();
    for t in traces_a.iter().chain(&traces_b) {
        fetched.insert(t.clone(), s.ok("trace.fetch", json!({"traceId": t})));
    }
    shutdown(s);

    // The fixture is what the tests think it is: tool calls and their results are stored.
    let a_msgs = messages[A]["messages"].as_array().unwrap();
    assert!(
        a_msgs
            .iter()
            .any(|m| m["toolCalls"][0]["name"] == "read_file"),
        "{a_msgs:?}"
    );
    assert!(
        a_msgs
            .iter()
            .any(|m| m["role"] == "tool" && m["toolCallId"] == "a2"),
        "{a_msgs:?}"
    );
    let mut all: Vec<&String> = traces_a.iter().chain(&traces_b).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 4, "one trace per turn");

    Fixture {
        dir,
        db,
        _ws: ws,
        traces_a,
        traces_b,
        fork,
        messages,
        trees,
        fetched,
    }
}

/// A database with one small record, for the tests about the server rather than the data.
fn small_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("small.db");
    let mut s = on_db(&db);
    s.ok(
        "debug.record.append",
        json!({"recordId": "chat_small", "role": "user", "content": "hi"}),
    );
    shutdown(s);
    (dir, db)
}

/// What the database itself says about a record: created_at, the last entry's created_at and
/// the number of entries.
fn stored_facts(db: &Path, record: &str) -> (String, String, i64) {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let created: String = conn
        .query_row(
            "SELECT created_at FROM records WHERE record_id = ?1",
            [record],
            |r| r.get(0),
        )
        .unwrap();
    let last: String = conn
        .query_row(
            "SELECT created_at FROM entries WHERE record_id = ?1 ORDER BY seq DESC LIMIT 1",
            [record],
            |r| r.get(0),
        )
        .unwrap();
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM entries WHERE record_id = ?1",
            [record],
            |r| r.get(0),
        )
        .unwrap();
    (created, last, n)
}

/// Every row of every table, as text, sorted (the WAL's committed rows included).
fn dump(db: &Path) -> Vec<String> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut out = Vec::new();
    for t in tables {
        let mut q = conn.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = q.column_count();
        let rows = q
            .query_map([], |r| {
                (0..n)
                    .map(|i| r.get::<_, rusqlite::types::Value>(i))
                    .collect::<Result<Vec<_>, _>>()
            })
            .unwrap();
        for row in rows {
            out.push(format!("{t}: {:?}", row.unwrap()));
        }
    }
    out.sort();
    out
}

/// The file names in `dir` but SQLite's `-wal` and `-shm`.
fn files_but_wal(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with("-wal") && !n.ends_with("-shm"))
        .collect();
    v.sort();
    v
}

fn lock_pid(db: &Path) -> String {
    let mut p = db.as_os_str().to_owned();
    p.push(".lock");
    std::fs::read_to_string(PathBuf::from(p))
        .unwrap()
        .trim()
        .to_string()
}

// ---------------------------------------------------------------------------------------
// 1. The token.

#[test]
fn every_request_needs_the_runs_token() {
    let (_dir, db) = small_db();
    let one = Inspector::on(&db);
    let two = Inspector::on(&db);
    for t in [&one.token, &two.token] {
        assert_eq!(t.len(), 32, "{t}");
        assert!(
            t.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "token is not lowercase hex: {t}"
        );
    }
    assert_ne!(one.token, two.token, "a new token each run");
    assert_eq!(
        one.url,
        format!("http://127.0.0.1:{}/?token={}", one.port, one.token)
    );

    let p = one.port;
    // No token at all.
    for path in ["/api/info", "/", "/api/records"] {
        let r = http(p, "GET", path, None, &[]);
        assert_error(&r, 401, &format!("GET {path} without a token"));
    }
    // A wrong token, as a query parameter or a bearer header: the other run's, and this
    // run's with its case changed.
    let upper = one.token.to_ascii_uppercase();
    for wrong in [two.token.as_str(), upper.as_str(), "0123"] {
        let r = http(p, "GET", &format!("/api/info?token={wrong}"), None, &[]);
        assert_error(&r, 403, &format!("?token={wrong}"));
        let auth = format!("Bearer {wrong}");
        let r = http(p, "GET", "/api/info", None, &[("Authorization", &auth)]);
        assert_error(&r, 403, &format!("Bearer {wrong}"));
    }
    // The right token, either way.
    let r = http(p, "GET", &one.with_token("/api/info"), None, &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_hardened(&r, "?token=");
    assert_eq!(r.json()["readOnly"], true);
    let r = one.get("/api/info");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["readOnly"], true);
    // Each run knows only its own token.
    let r = http(two.port, "GET", &two.with_token("/api/records"), None, &[]);
    assert_eq!(r.status, 200, "{r:?}");
    let r = http(two.port, "GET", &one.with_token("/api/records"), None, &[]);
    assert_error(&r, 403, "the other run's token");
    // Exactly one line on stdout.
    assert!(
        one.stdout.try_recv().is_err(),
        "inspect printed more than its URL on stdout"
    );
}

// ---------------------------------------------------------------------------------------
// 2. The Host header guard (DNS rebinding).

#[test]
fn only_loopback_host_headers_are_served() {
    let (_dir, db) = small_db();
    let insp = Inspector::on(&db);
    let p = insp.port;
    let target = insp.with_token("/api/info");
    for ok in [format!("127.0.0.1:{p}"), format!("localhost:{p}")] {
        let r = http(p, "GET", &target, Some(&ok), &[]);
        assert_eq!(r.status, 200, "Host: {ok}: {r:?}");
        assert_eq!(r.json()["readOnly"], true);
    }
    let other_port = if p == 65535 { 1 } else { p + 1 };
    for bad in [
        format!("evil.example:{p}"),
        "evil.example".to_string(),
        format!("127.0.0.1:{other_port}"),
        format!("localhost.evil.example:{p}"),
        "127.0.0.1".to_string(),
    ] {
        let r = http(p, "GET", &target, Some(&bad), &[]);
        assert_error(&r, 403, &format!("Host: {bad}"));
        // The page too, not only the API.
        let r = http(p, "GET", &insp.with_token("/"), Some(&bad), &[]);
        assert_error(&r, 403, &format!("page with Host: {bad}"));
    }
    // No Host header at all is never served.
    let r = http(p, "GET", &target, Some(""), &[]);
    assert!(
        r.status == 403 || r.status == 400,
        "no Host header must not be served: {r:?}"
    );
}

// ---------------------------------------------------------------------------------------
// 3. Loopback only.

/// An IPv4 address of this machine that is not loopback: the source address the kernel
/// would route from (a UDP connect sends nothing), else `hostname -I`.
fn non_loopback_ipv4() -> Option<Ipv4Addr> {
    let usable = |ip: Ipv4Addr| !ip.is_loopback() && !ip.is_unspecified();
    for probe in ["10.255.255.1:9", "192.0.2.123:9", "8.8.8.8:53"] {
        if let Ok(sock) = UdpSocket::bind("0.0.0.0:0")
            && sock.connect(probe).is_ok()
            && let Ok(SocketAddr::V4(a)) = sock.local_addr()
            && usable(*a.ip())
        {
            return Some(*a.ip());
        }
    }
    let out = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|w| w.parse::<Ipv4Addr>().ok())
        .find(|ip| usable(*ip))
}

#[test]
fn it_listens_on_loopback_only() {
    let (_dir, db) = small_db();
    let insp = Inspector::on(&db);
    assert!(insp.url.starts_with("http://127.0.0.1:"), "{}", insp.url);
    // Control: the port does answer on 127.0.0.1.
    TcpStream::connect_timeout(&SocketAddr::from((Ipv4Addr::LOCALHOST, insp.port)), WAIT)
        .expect("the inspector listens on 127.0.0.1");
    match non_loopback_ipv4() {
        Some(ip) => {
            let addr = SocketAddr::from((ip, insp.port));
            let r = TcpStream::connect_timeout(&addr, Duration::from_secs(3));
            assert!(
                r.is_err(),
                "the inspector answers on the non-loopback address {addr}"
            );
        }
        None => println!(
            "it_listens_on_loopback_only: SKIPPED the non-loopback sub-check: this machine has \
             no non-loopback IPv4 address"
        ),
    }
    // Not on the IPv6 loopback or the wildcard either (it binds 127.0.0.1 only).
    let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, insp.port));
    assert!(
        TcpStream::connect_timeout(&v6, Duration::from_secs(3)).is_err(),
        "the inspector answers on [::1]"
    );
}

// ---------------------------------------------------------------------------------------
// 4. Methods, unknown paths, error bodies.

#[test]
fn only_get_and_head_and_unknown_paths_are_json_404s() {
    let (_dir, db) = small_db();
    let insp = Inspector::on(&db);
    let p = insp.port;
    let auth = format!("Bearer {}", insp.token);
    for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
        for path in [
            "/",
            "/api/info",
            "/api/records",
            "/api/records/chat_small/messages",
        ] {
            let r = http(p, method, path, None, &[("Authorization", &auth)]);
            let what = format!("{method} {path}");
            assert_error(&r, 405, &what);
            assert_eq!(r.header("allow"), Some("GET, HEAD"), "{what}: {r:?}");
        }
    }
    // HEAD: the GET's status and headers, no body.
    let r = http(p, "HEAD", "/api/info", None, &[("Authorization", &auth)]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_json_type(&r, "HEAD /api/info");
    assert_hardened(&r, "HEAD /api/info");
    assert!(r.body.is_empty(), "HEAD answered a body: {r:?}");
    let r = http(p, "HEAD", &insp.with_token("/"), None, &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body.is_empty(), "HEAD answered a body: {r:?}");

    for path in [
        "/nope",
        "/api",
        "/api/nope",
        "/api/records/chat_small/nope",
        "/api/traces",
        "/index.html.bak",
        "/app.js/x",
    ] {
        let r = insp.get(path);
        assert_error(&r, 404, &format!("GET {path}"));
    }
}

// ---------------------------------------------------------------------------------------
// 5. The page and its assets.

#[test]
fn the_page_carries_its_token_and_its_assets_are_served() {
    let (_dir, db) = small_db();
    let insp = Inspector::on(&db);
    let t = &insp.token;
    let r = http(insp.port, "GET", &format!("/?token={t}"), None, &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.header("content-type"),
        Some("text/html; charset=utf-8"),
        "{r:?}"
    );
    assert_hardened(&r, "the page");
    assert_eq!(r.header("content-security-policy"), Some(CSP), "{r:?}");
    let html = r.text();
    assert!(
        !html.contains("__TOKEN__"),
        "placeholder left in the page: {html}"
    );
    assert!(html.contains(&format!("app.js?token={t}")), "{html}");
    assert!(html.contains(&format!("app.css?token={t}")), "{html}");
    // The CSP forbids inline code and other origins: the page must not need them.
    let lower = html.to_ascii_lowercase();
    for (i, _) in lower.match_indices("<script") {
        let tag = &lower[i..i + lower[i..].find('>').unwrap()];
        assert!(tag.contains("src="), "an inline script: {tag}");
        assert!(
            !tag.contains("http:") && !tag.contains("https:") && !tag.contains("//"),
            "{tag}"
        );
    }
    assert!(!lower.contains("<style"), "an inline style block: {html}");
    assert!(
        !lower.contains(" style="),
        "an inline style attribute: {html}"
    );
    assert!(!lower.contains("javascript:"), "{html}");
    for handler in [
        "onclick=",
        "onload=",
        "onerror=",
        "onchange=",
        "oninput=",
        "onsubmit=",
    ] {
        assert!(!lower.contains(handler), "inline handler {handler}: {html}");
    }
    for href in lower.split("href=").skip(1) {
        let v = href.trim_start_matches(['"', '\'']);
        assert!(
            !v.starts_with("http") && !v.starts_with("//"),
            "an outside asset: {href}"
        );
    }

    for (path, ct) in [
        ("/app.js", "text/javascript; charset=utf-8"),
        ("/app.css", "text/css; charset=utf-8"),
    ] {
        let r = http(insp.port, "GET", &insp.with_token(path), None, &[]);
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert_eq!(r.header("content-type"), Some(ct), "{path}: {r:?}");
        assert_hardened(&r, path);
        assert!(!r.body.is_empty(), "{path} is empty");
        // The header works for the assets too.
        let r2 = insp.get(path);
        assert_eq!((r2.status, &r2.body), (200, &r.body), "{path} with Bearer");
        // Without the token: refused.
        let r = http(insp.port, "GET", path, None, &[]);
        assert_error(&r, 401, &format!("{path} without a token"));
        let r = http(insp.port, "GET", &format!("{path}?token=wrong"), None, &[]);
        assert_error(&r, 403, &format!("{path} with a wrong token"));
    }
    // The script sends the token as a bearer header on its fetches.
    let js = insp.get("/app.js").text();
    assert!(
        js.contains("Bearer"),
        "app.js never sends `Authorization: Bearer`"
    );
    // The page without a token is refused too.
    let r = http(insp.port, "GET", "/", None, &[]);
    assert_error(&r, 401, "the page without a token");
}

// ---------------------------------------------------------------------------------------
// 6. The JSON endpoints.

#[test]
fn info_and_the_record_list() {
    let f = fixture();
    let insp = Inspector::on(&f.db);
    let info = insp.api("/api/info");
    assert_eq!(
        info,
        json!({"storagePath": f.db.display().to_string(), "schemaVersion": 4,
               "readOnly": true, "version": env!("CARGO_PKG_VERSION")})
    );

    let list = insp.api("/api/records");
    assert_eq!(
        (&list["limit"], &list["offset"], &list["truncated"]),
        (&json!(50), &json!(0), &json!(false)),
        "{list}"
    );
    // Newest activity first: the fork (made last), A (its second turn came after B's),
    // then B, though B was created after A.
    assert_eq!(ids(&list), [FORK, A, B], "{list}");
    let by_id: HashMap<String, &Value> = list["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["recordId"].as_str().unwrap().to_string(), r))
        .collect();
    let expect = [
        (A, Value::Null, Value::Null, Value::Null, 2),
        (B, Value::Null, Value::Null, Value::Null, 2),
        (
            FORK,
            json!("try B"),
            json!(A),
            f.fork["sourceUntilSeq"].clone(),
            0,
        ),
    ];
    for (id, label, source, until, traces) in expect {
        let r = by_id[id];
        let (created, updated, entries) = stored_facts(&f.db, id);
        assert_eq!(r["label"], label, "{id}: {r}");
        assert_eq!(r["sourceRecordId"], source, "{id}: {r}");
        assert_eq!(r["sourceUntilSeq"], until, "{id}: {r}");
        assert_eq!(r["createdAt"], json!(created), "{id}: {r}");
        assert_eq!(r["updatedAt"], json!(updated), "{id}: {r}");
        assert_eq!(r["entryCount"], json!(entries), "{id}: {r}");
        assert_eq!(r["traceCount"], json!(traces), "{id}: {r}");
    }
    assert!(f.fork["sourceUntilSeq"].is_i64(), "{}", f.fork);
    assert_eq!(by_id[A]["title"], A_USER);
    assert_eq!(by_id[FORK]["title"], "try B");
    // B's first message is longer than a title: cut to at most 120 characters, a prefix of it.
    let title = by_id[B]["title"].as_str().unwrap();
    assert!(title.chars().count() <= 120, "{title:?}");
    let stem = title
        .trim_end_matches('…')
        .trim_end_matches("...")
        .trim_end();
    assert!(stem.len() >= 60 && B_USER.starts_with(stem), "{title:?}");
    // Updated times are ordered as the list is.
    let updated: Vec<&str> = list["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["updatedAt"].as_str().unwrap())
        .collect();
    assert!(updated.windows(2).all(|w| w[0] >= w[1]), "{updated:?}");
}

#[test]
fn the_record_list_searches_and_pages() {
    let f = fixture();
    let insp = Inspector::on(&f.db);
    // A word of B's user message, in any case, finds only B.
    assert_eq!(insp.record_ids("?q=quokka"), [B]);
    assert_eq!(insp.record_ids("?q=qUOKKA"), [B]);
    // An assistant's text counts as message text.
    assert_eq!(insp.record_ids("?q=MARSUPIAL"), [B]);
    // A piece of a record id (percent-encoded in the query), and the fork's label.
    assert_eq!(insp.record_ids(&format!("?q={}", enc("ü/β"))), [B]);
    assert_eq!(insp.record_ids("?q=chat_alpha"), [FORK, A]);
    assert_eq!(insp.record_ids(&format!("?q={}", enc("TRY b"))), [FORK]);
    let none = insp.api("/api/records?q=zzz-no-such-text");
    assert_eq!(none["records"], json!([]));
    assert_eq!(none["truncated"], false);
    // A search still pages.
    let r = insp.api("/api/records?q=chat_alpha&limit=1");
    assert_eq!(
        (ids(&r), &r["truncated"]),
        (vec![FORK.to_string()], &json!(true))
    );

    // Paging over the three records (newest activity first: FORK, A, B).
    let page = |q: &str| {
        let r = insp.api(&format!("/api/records?{q}"));
        (
            ids(&r),
            r["limit"].clone(),
            r["offset"].clone(),
            r["truncated"].clone(),
        )
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        page("limit=1"),
        (s(&[FORK]), json!(1), json!(0), json!(true))
    );
    assert_eq!(
        page("limit=1&offset=1"),
        (s(&[A]), json!(1), json!(1), json!(true))
    );
    assert_eq!(
        page("limit=2"),
        (s(&[FORK, A]), json!(2), json!(0), json!(true))
    );
    assert_eq!(
        page("limit=3"),
        (s(&[FORK, A, B]), json!(3), json!(0), json!(false))
    );
    assert_eq!(
        page("limit=2&offset=1"),
        (s(&[A, B]), json!(2), json!(1), json!(false))
    );
    assert_eq!(
        page("offset=2"),
        (s(&[B]), json!(50), json!(2), json!(false))
    );
    assert_eq!(
        page("offset=3"),
        (s(&[]), json!(50), json!(3), json!(false))
    );
    assert_eq!(
        page("limit=500"),
        (s(&[FORK, A, B]), json!(500), json!(0), json!(false))
    );
    for bad in ["limit=0", "limit=501", "offset=-1"] {
        let r = insp.get(&format!("/api/records?{bad}"));
        let msg = assert_error(&r, 400, bad);
        if bad.starts_with("limit") {
            assert!(
                msg.contains('1') && msg.contains("500"),
                "{bad}: the range is not named: {msg}"
            );
        }
    }
}

/// `q` is matched against what a user reads (record ids, labels, message text) in any case:
/// text with quotes or a backslash is found as typed, and the store's own JSON keys are no
/// message text.
#[test]
fn search_matches_message_text_as_typed_in_any_case() {
    let f = fixture();
    let insp = Inspector::on(&f.db);
    let b = vec![B.to_string()];
    let none: Vec<String> = Vec::new();
    let cases = [
        ("Ask Émilie", &b, "non-ASCII text as stored"),
        (r#""happiest animal""#, &b, "a phrase with its quotes"),
        (r"C:\Zoo\Guide", &b, "a path with backslashes"),
        ("ÉMILIE ÅNGSTRÖM", &b, "non-ASCII letters in another case"),
        (
            "turn_id",
            &none,
            "a store key, in no message, label or record id",
        ),
        (
            "token_estimate",
            &none,
            "a store key, in no message, label or record id",
        ),
        (
            "message_kinds",
            &none,
            "a store key, in no message, label or record id",
        ),
    ];
    // Every case is tried, and all that fail are reported together.
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(text, want, why)| {
            let got = insp.record_ids(&format!("?q={}", enc(text)));
            (got != **want).then(|| format!("q={text:?} ({why}): got {got:?}, want {want:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "search mismatches:\n{}", wrong.join("\n"));
}

#[test]
fn messages_trees_and_traces_are_the_rpc_answers() {
    let f = fixture();
    let insp = Inspector::on(&f.db);
    for id in [A, B, FORK] {
        let e = enc(id);
        assert_eq!(
            insp.api(&format!("/api/records/{e}/messages")),
            f.messages[id],
            "messages of {id}"
        );
        assert_eq!(
            insp.api(&format!("/api/records/{e}/tree")),
            f.trees[id],
            "tree of {id}"
        );
    }
    // The family: A with its one fork, the same tree from either branch.
    let tree = &f.trees[FORK];
    assert_eq!(tree["nodeCount"], 2, "{tree}");
    assert_eq!(tree["tree"]["recordId"], A, "{tree}");
    let kids = tree["tree"]["children"].as_array().unwrap();
    assert_eq!(kids.len(), 1, "{tree}");
    assert_eq!(
        (&kids[0]["recordId"], &kids[0]["label"]),
        (&json!(FORK), &json!("try B"))
    );
    assert_eq!(f.trees[A]["tree"], tree["tree"]);
    assert_eq!(f.trees[B]["nodeCount"], 1);

    // Trace headers, oldest first: the traceIds the streams ended with.
    let header = |t: &str| f.fetched[t]["trace"].clone();
    assert_eq!(
        insp.api(&format!("/api/records/{A}/traces")),
        json!({"recordId": A, "traces": [header(&f.traces_a[0]), header(&f.traces_a[1])]})
    );
    assert_eq!(
        insp.api(&format!("/api/records/{}/traces", enc(B))),
        json!({"recordId": B, "traces": [header(&f.traces_b[0]), header(&f.traces_b[1])]})
    );
    assert_eq!(
        insp.api(&format!("/api/records/{}/traces", enc(FORK))),
        json!({"recordId": FORK, "traces": []})
    );
    for t in f.traces_a.iter().chain(&f.traces_b) {
        let got = insp.api(&format!("/api/traces/{}", enc(t)));
        assert_eq!(got, f.fetched[t], "trace {t}");
    }
    // The spans of a tool turn: a request, the tool, the answering request.
    let t = &f.fetched[&f.traces_a[0]];
    let spans: Vec<(&str, &str, &str)> = t["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap(),
                s["kind"].as_str().unwrap(),
                s["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        spans,
        [
            ("llm.request", "llm", "ok"),
            ("read_file", "tool", "ok"),
            ("llm.request", "llm", "ok")
        ],
        "{t}"
    );
    assert_eq!(t["spans"][1]["attrs"]["callId"], "a1", "{t}");
    assert_eq!(t["spans"][0]["attrs"]["model"], "scripted-model", "{t}");
}

#[test]
fn unknown_ids_are_404_and_encoded_ids_resolve() {
    let f = fixture();
    let insp = Inspector::on(&f.db);
    for path in [
        "/api/records/ghost/messages".to_string(),
        "/api/records/ghost/tree".to_string(),
        "/api/records/ghost/traces".to_string(),
        "/api/traces/trace_nope".to_string(),
        // B's id with its `/` left unencoded splits the path: not B.
        format!("/api/records/{}/messages", enc(B).replace("%2F", "/")),
        // Near misses of a real id.
        format!("/api/records/{}/messages", enc(&B.to_uppercase())),
        format!("/api/traces/{}x", enc(&f.traces_b[0])),
    ] {
        let r = insp.get(&path);
        assert_error(&r, 404, &path);
    }
    // `:` `/` space and non-ASCII, percent-encoded, with lowercase hex escapes too.
    let lower_hex = enc_lower(B);
    let got = insp.api(&format!("/api/records/{lower_hex}/messages"));
    assert_eq!(got, f.messages[B]);
    assert_eq!(got["recordId"], B);
    // Only the reserved characters encoded also works (the non-ASCII ones as UTF-8 escapes).
    let partly = B
        .replace(':', "%3A")
        .replace('/', "%2F")
        .replace(' ', "%20");
    let partly = partly
        .replace('ü', "%C3%BC")
        .replace('β', "%CE%B2")
        .replace('№', "%E2%84%96");
    assert_eq!(insp.api(&format!("/api/records/{partly}/tree")), f.trees[B]);
}

// ---------------------------------------------------------------------------------------
// 7. Beside a live sidecar.

#[test]
fn it_runs_beside_a_live_sidecar_and_sees_its_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.db");
    let ws = tempfile::tempdir().unwrap();
    let cwd = ws.path().display().to_string();
    let mut s = on_db(&db);
    scripted_turn(
        &mut s,
        json!([{"text": "one"}]),
        "first",
        json!({"chatId": "live_one"}),
    );
    assert_eq!(lock_pid(&db), s.pid().to_string());

    // The sidecar holds the write lease; the inspector starts anyway.
    let insp = Inspector::on(&db);
    assert_eq!(insp.record_ids(""), ["live_one"]);

    // The sidecar still writes, and the next request sees it.
    scripted_turn(
        &mut s,
        json!([{"text": "two"}]),
        "second",
        json!({"chatId": "live_two"}),
    );
    assert_eq!(insp.record_ids(""), ["live_two", "live_one"]);
    assert_eq!(
        insp.api("/api/records/live_two/messages"),
        s.ok("agent.session.messages", json!({"recordId": "live_two"}))
    );
    assert_eq!(
        lock_pid(&db),
        s.pid().to_string(),
        "the lease is still the sidecar's"
    );

    // A turn that is still running: its trace shows `running` with its finished spans.
    next_millisecond();
    let started = s.ok(
        "agent.chat.stream",
        merge(
            scripted(
                json!([{"toolCalls": [{"id": "sl", "name": "bash", "arguments": {"command": "sleep 30"}}]},
                       {"text": "never"}]),
                "wait a bit",
            ),
            json!({"chatId": "live_three", "cwd": cwd}),
        ),
    );
    let stream = started["streamId"].as_str().unwrap().to_string();
    let trace = started["traceId"]
        .as_str()
        .expect("traceId in the stream's start")
        .to_string();
    let seen = until(&mut s, &stream, |f| f["params"]["toolCall"]["id"] == "sl");
    let path = format!("/api/traces/{}", enc(&trace));
    let mut live = Value::Null;
    let found = wait_until(WAIT, || {
        let r = insp.get(&path);
        if r.status != 200 {
            return false;
        }
        live = r.json();
        live["spans"].as_array().is_some_and(|v| {
            v.iter()
                .any(|x| x["name"] == "llm.request" && x["status"] == "ok")
        })
    });
    assert!(
        found,
        "the running trace's finished llm span never showed: {live}"
    );
    assert_eq!(live["trace"]["traceId"], trace, "{live}");
    assert_eq!(live["trace"]["status"], "running", "{live}");
    let llm = live["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "llm.request")
        .unwrap();
    assert_eq!(llm["kind"], "llm", "{live}");
    assert!(llm["endMs"].is_u64(), "{live}");
    assert_eq!(llm["attrs"]["round"], 0, "{live}");
    // The running record and its trace are listed too.
    let list = insp.api("/api/records");
    assert_eq!(ids(&list)[0], "live_three", "{list}");
    let traces = insp.api("/api/records/live_three/traces");
    assert_eq!(traces["traces"][0]["traceId"], trace, "{traces}");
    assert_eq!(traces["traces"][0]["status"], "running", "{traces}");

    // Cancelled, the trace ends; the inspector then shows what trace.fetch says.
    s.ok("agent.chat.cancel", json!({"streamId": stream}));
    let done = finish(&mut s, &stream, seen);
    assert_eq!(done.done["status"], "cancelled", "{:?}", done.frames);
    let mut last = Value::Null;
    let ended = wait_until(WAIT, || {
        last = insp.api(&path);
        last["trace"]["status"] != "running"
    });
    assert!(ended, "the finished trace still reads as running: {last}");
    assert_eq!(last, s.ok("trace.fetch", json!({"traceId": trace})));

    // The sidecar stops and another starts while the inspector runs: the inspector never
    // held the lease, and it sees the new process's writes.
    shutdown(s);
    let mut s2 = on_db(&db);
    assert_eq!(lock_pid(&db), s2.pid().to_string());
    scripted_turn(
        &mut s2,
        json!([{"text": "four"}]),
        "fourth",
        json!({"chatId": "live_four"}),
    );
    assert_eq!(
        insp.record_ids(""),
        ["live_four", "live_three", "live_two", "live_one"]
    );
    drop(insp);
    shutdown(s2);
}

/// A trace whose sidecar died mid-turn is no longer running: the inspector answers for it
/// what `trace.fetch` does (`interrupted`, with the spans that finished).
#[test]
fn a_trace_cut_by_a_crash_reads_as_trace_fetch_answers_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let ws = tempfile::tempdir().unwrap();
    let mut s = on_db(&db);
    let started = s.ok(
        "agent.chat.stream",
        merge(
            scripted(
                json!([{"toolCalls": [{"id": "sl", "name": "bash", "arguments": {"command": "sleep 60"}}]},
                       {"text": "never"}]),
                "wait and die",
            ),
            json!({"chatId": "crashed", "cwd": ws.path()}),
        ),
    );
    let stream = started["streamId"].as_str().unwrap().to_string();
    let trace = started["traceId"].as_str().unwrap().to_string();
    until(&mut s, &stream, |f| f["params"]["toolCall"]["id"] == "sl");
    let insp = Inspector::on(&db);
    let path = format!("/api/traces/{}", enc(&trace));
    let stored = wait_until(WAIT, || {
        let r = insp.get(&path);
        r.status == 200
            && r.json()["spans"].as_array().is_some_and(|v| {
                v.iter()
                    .any(|x| x["name"] == "llm.request" && x["status"] == "ok")
            })
    });
    assert!(stored, "the finished llm span was never stored");
    crate::common::sigkill(&mut s);
    drop(s);

    // Nobody runs that turn any more.
    let got = insp.api(&path);
    let listed = insp.api("/api/records/crashed/traces");
    let mut s = on_db(&db);
    let want = s.ok("trace.fetch", json!({"traceId": trace}));
    shutdown(s);
    assert_eq!(want["trace"]["status"], "interrupted", "{want}");
    assert_eq!(got, want, "GET {path} with no sidecar running");
    assert_eq!(
        listed["traces"][0], want["trace"],
        "the record's trace list"
    );
}

// ---------------------------------------------------------------------------------------
// 8. The command line.

#[test]
fn the_command_line_finds_the_store_and_reports_failures() {
    // A missing database: exit 2 naming the path and the flags; nothing is created.
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("nowhere/none.db");
    let (status, out, err) = run_once(
        home.path(),
        &["inspect", "--storage-path", &missing.display().to_string()],
        &[],
        b"",
    );
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(
        err.contains("--storage-path") && err.contains("--home"),
        "{err}"
    );
    assert_eq!(out, "", "nothing on stdout when it cannot serve");
    assert!(
        !missing.exists() && !home.path().join("nowhere").exists(),
        "inspect created the store"
    );
    let empty = tempfile::tempdir().unwrap();
    let (status, _, err) = run_once(
        home.path(),
        &["inspect", "--home", &empty.path().display().to_string()],
        &[],
        b"",
    );
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains(&empty.path().join("outrigger.db").display().to_string()),
        "{err}"
    );
    assert!(!empty.path().join("outrigger.db").exists());

    // `--home DIR` reads DIR/outrigger.db, whatever OUTRIGGER_HOME says.
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("outrigger.db");
    let mut s = on_db(&db);
    s.ok(
        "debug.record.append",
        json!({"recordId": "in_home", "role": "user", "content": "hi"}),
    );
    shutdown(s);
    let elsewhere = tempfile::tempdir().unwrap();
    let insp = Inspector::start(
        Some(elsewhere.path()),
        &["inspect", "--home", &data.path().display().to_string()],
    );
    assert_eq!(
        insp.api("/api/info")["storagePath"],
        db.display().to_string()
    );
    assert_eq!(insp.record_ids(""), ["in_home"]);
    drop(insp);
    // No flag: $OUTRIGGER_HOME/outrigger.db.
    let insp = Inspector::start(Some(data.path()), &["inspect"]);
    assert_eq!(
        insp.api("/api/info")["storagePath"],
        db.display().to_string()
    );
    drop(insp);
    // `--storage-path` wins over `--home`.
    let insp = Inspector::start(
        Some(elsewhere.path()),
        &[
            "inspect",
            "--home",
            &empty.path().display().to_string(),
            "--storage-path",
            &db.display().to_string(),
        ],
    );
    assert_eq!(
        insp.api("/api/info")["storagePath"],
        db.display().to_string()
    );
    drop(insp);
    // `--storage-path` before the subcommand (a global flag) works too.
    let insp = Inspector::start(
        None,
        &["--storage-path", &db.display().to_string(), "inspect"],
    );
    assert_eq!(insp.record_ids(""), ["in_home"]);
    drop(insp);

    // `--port P` serves on P.
    let free = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let mut insp = Inspector::start(
        None,
        &[
            "inspect",
            "--storage-path",
            &db.display().to_string(),
            "--port",
            &port.to_string(),
        ],
    );
    assert_eq!(insp.port, port);
    assert_eq!(insp.record_ids(""), ["in_home"]);
    // SIGINT ends it with 0.
    insp.signal(nix::sys::signal::Signal::SIGINT);
    let status = insp.wait_exit(WAIT);
    assert_eq!(status.code(), Some(0), "after SIGINT: {status:?}");

    // A port in use: exit 1 naming the port.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (status, out, err) = run_once(
        home.path(),
        &[
            "inspect",
            "--storage-path",
            &db.display().to_string(),
            "--port",
            &port.to_string(),
        ],
        &[],
        b"",
    );
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains(&port.to_string()), "{err}");
    assert_eq!(out, "", "no URL for a port it could not bind");
    drop(taken);
}

// ---------------------------------------------------------------------------------------
// 9. Read-only.

#[test]
fn a_session_of_requests_changes_nothing_in_the_store() {
    let f = fixture();
    let db_bytes = std::fs::read(&f.db).unwrap();
    let rows = dump(&f.db);
    assert!(rows.len() > 20, "{rows:?}");
    let files = files_but_wal(f.dir.path());
    let mut insp = Inspector::on(&f.db);
    let auth = format!("Bearer {}", insp.token);
    let p = insp.port;

    // Everything a user could do in the page, and some things they should not.
    let mut paths = vec![
        "/".to_string(),
        "/app.js".to_string(),
        "/app.css".to_string(),
        "/api/info".to_string(),
        "/api/records".to_string(),
        "/api/records?q=quokka&limit=1&offset=0".to_string(),
        "/api/records?limit=0".to_string(),
        "/api/records/ghost/messages".to_string(),
        "/api/traces/trace_nope".to_string(),
    ];
    for id in [A, B, FORK] {
        for what in ["messages", "tree", "traces"] {
            paths.push(format!("/api/records/{}/{what}", enc(id)));
        }
    }
    for t in f.traces_a.iter().chain(&f.traces_b) {
        paths.push(format!("/api/traces/{}", enc(t)));
    }
    for path in &paths {
        let r = insp.get(path);
        assert!(
            r.status == 200 || r.status == 400 || r.status == 404,
            "{path}: {r:?}"
        );
        let r = http(p, "HEAD", path, None, &[("Authorization", &auth)]);
        assert!(r.body.is_empty(), "HEAD {path}: {r:?}");
        for method in ["POST", "PUT", "DELETE", "PATCH"] {
            let r = http(p, method, path, None, &[("Authorization", &auth)]);
            assert_error(&r, 405, &format!("{method} {path}"));
        }
    }

    // SIGTERM ends it with 0, having printed its one line only.
    insp.signal(nix::sys::signal::Signal::SIGTERM);
    let status = insp.wait_exit(WAIT);
    assert_eq!(status.code(), Some(0), "after SIGTERM: {status:?}");
    let more = drain(&insp.stdout);
    assert!(more.is_empty(), "stdout beyond the URL: {more:?}");
    // Its human line went to stderr.
    let err = drain(&insp.stderr);
    assert!(
        err.iter().any(|l| !l.trim().is_empty()),
        "nothing for a human on stderr"
    );

    // Not a byte of the database changed, and no file was added or removed beside it.
    assert!(
        std::fs::read(&f.db).unwrap() == db_bytes,
        "the database file changed"
    );
    assert_eq!(files_but_wal(f.dir.path()), files);
    assert!(dump(&f.db) == rows, "the database's rows changed");
    // The sidecar reads back what it wrote.
    let mut s = on_db(&f.db);
    for id in [A, B, FORK] {
        assert_eq!(
            s.ok("agent.session.messages", json!({"recordId": id})),
            f.messages[id],
            "{id}"
        );
        assert_eq!(
            s.ok("agent.session.tree", json!({"recordId": id})),
            f.trees[id],
            "{id}"
        );
    }
    for t in f.traces_a.iter().chain(&f.traces_b) {
        assert_eq!(
            s.ok("trace.fetch", json!({"traceId": t})),
            f.fetched[t],
            "{t}"
        );
    }
    shutdown(s);
}
