//! Spawns the real binary and talks JSON-RPC to it over its pipes. Every frame read is
//! checked against `schemas/outrigger.schema.json` (`frames`).

pub mod frames;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_outrigger");
pub const WAIT: Duration = Duration::from_secs(20);

pub struct Sidecar {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Receiver<String>,
    /// Frames read but not yet claimed by a waiter.
    backlog: Vec<Value>,
    pub ready_marker: Option<Value>,
    next_id: u64,
    /// Method of each request sent with `call`, by id, to check its response's result.
    sent: std::collections::HashMap<String, String>,
    pub home: tempfile::TempDir,
}

pub struct Opts {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub home: Option<tempfile::TempDir>,
    pub wait_ready: bool,
    /// The sidecar's working directory (default: the test's).
    pub cwd: Option<PathBuf>,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            args: vec![],
            env: vec![],
            home: None,
            wait_ready: true,
            cwd: None,
        }
    }
}

pub fn base_command(home: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("OUTRIGGER_HOME", home)
        .env("OUTRIGGER_DEBUG_METHODS", "1");
    cmd
}

impl Sidecar {
    pub fn start() -> Sidecar {
        Self::start_with(Opts::default())
    }

    pub fn start_with(opts: Opts) -> Sidecar {
        let home = opts.home.unwrap_or_else(|| tempfile::tempdir().unwrap());
        let mut cmd = base_command(home.path());
        cmd.args(&opts.args);
        for (k, v) in &opts.env {
            cmd.env(k, v);
        }
        if let Some(dir) = &opts.cwd {
            cmd.current_dir(dir);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn outrigger");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut buf = Vec::new();
                match r.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let s = String::from_utf8(buf).expect("stdout is UTF-8");
                        if tx.send(s).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stderr_rx = line_channel(stderr);
        let mut s = Sidecar {
            child,
            stdin,
            lines,
            stderr: stderr_rx,
            backlog: vec![],
            ready_marker: None,
            next_id: 1000,
            sent: std::collections::HashMap::new(),
            home,
        };
        if opts.wait_ready {
            let quiet = opts.args.iter().any(|a| a == "--quiet-ready");
            if !quiet {
                let line = s.stderr_line_matching("__SIDECAR_READY__:", WAIT);
                let json = line.split_once("__SIDECAR_READY__:").unwrap().1;
                s.ready_marker = Some(serde_json::from_str(json).expect("marker JSON"));
            }
            let first = s.next_frame(WAIT).expect("lifecycle.ready frame");
            assert_eq!(first["method"], "lifecycle.ready", "first frame: {first}");
        }
        s
    }

    /// Waits for a stderr line containing `needle`.
    pub fn stderr_line_matching(&self, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        // The last lines seen, for the failure message (a sidecar that exits says why).
        let mut seen: Vec<String> = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return l,
                Ok(l) => {
                    if seen.len() == 20 {
                        seen.remove(0);
                    }
                    seen.push(l);
                }
                Err(e) => panic!(
                    "no stderr line with {needle:?}: {e:?}; stderr ended with:\n{}",
                    seen.join("\n")
                ),
            }
        }
    }

    /// Everything on stderr until it closes (after the process exits).
    pub fn stderr_rest(&self) -> String {
        let mut out = String::new();
        while let Ok(l) = self.stderr.recv_timeout(WAIT) {
            out.push_str(&l);
            out.push('\n');
        }
        out
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, frame: &Value) {
        let mut line = serde_json::to_vec(frame).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// The next raw stdout line.
    pub fn next_line(&mut self, within: Duration) -> Option<String> {
        match self.lines.recv_timeout(within) {
            Ok(l) => Some(l),
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    pub fn next_frame(&mut self, within: Duration) -> Option<Value> {
        if !self.backlog.is_empty() {
            return Some(self.backlog.remove(0));
        }
        let line = self.next_line(within)?;
        Some(self.parse_frame(&line))
    }

    /// Waits for the frame that satisfies `pred`, keeping the others for later.
    pub fn wait_for(&mut self, within: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(i);
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no matching frame: {e:?}; backlog {:?}", self.backlog));
            let v = self.parse_frame(&line);
            if pred(&v) {
                return v;
            }
            self.backlog.push(v);
        }
    }

    pub fn response(&mut self, id: &Value) -> Value {
        let id = id.clone();
        self.wait_for(WAIT, move |v| {
            v.get("id") == Some(&id) && v.get("method").is_none()
        })
    }

    pub fn notification(&mut self, method: &str) -> Value {
        self.wait_for(WAIT, |v| v["method"] == method && v.get("id").is_none())
    }

    /// Parses a stdout line and checks it against the protocol bundle.
    fn parse_frame(&mut self, line: &str) -> Value {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
        let method = v
            .get("id")
            .map(Value::to_string)
            .and_then(|id| self.sent.get(&id).cloned());
        crate::common::frames::check(&v, method.as_deref());
        v
    }

    /// Sends a request and returns the whole response frame.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.sent.insert(id.to_string(), method.to_string());
        let mut frame = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            frame["params"] = params;
        }
        self.send(&frame);
        self.response(&id)
    }

    /// Sends a request and returns its `result`, failing on an error response.
    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "sidecar did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the binary to completion with the given stdin and returns (status, stdout, stderr).
pub fn run_once(
    home: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    input: &[u8],
) -> (ExitStatus, String, String) {
    let mut cmd = base_command(home);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut out = String::new();
    let mut err = String::new();
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t = std::thread::spawn(move || {
        let mut e = String::new();
        let _ = se.read_to_string(&mut e);
        e
    });
    so.read_to_string(&mut out).unwrap();
    err.push_str(&t.join().unwrap());
    let _ = writer.join();
    let status = child.wait().unwrap();
    (status, out, err)
}

pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Host pids of live processes one of whose arguments is exactly `arg`.
pub fn pids_with_arg(arg: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline"))
            && cmd.split(|b| *b == 0).any(|a| a == arg.as_bytes())
        {
            out.push(pid);
        }
    }
    out
}

/// Polls `f` until it holds or `within` passes; returns its last answer.
pub fn wait_until(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    f()
}

/// A sidecar on the given database (`--storage-path`), for tests that restart on it.
pub fn on_db(db: &Path) -> Sidecar {
    Sidecar::start_with(Opts {
        args: vec!["--storage-path".into(), db.display().to_string()],
        ..Opts::default()
    })
}

/// SIGKILLs the sidecar (no shutdown ladder) and reaps it.
pub fn sigkill(s: &mut Sidecar) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(s.pid()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = s.wait_exit(Duration::from_secs(10));
}

/// Lines of `r` (without their newline) on a channel fed by a thread, so a test can wait for
/// them with a deadline.
pub fn line_channel(r: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            match line {
                Ok(l) => {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    });
    rx
}
