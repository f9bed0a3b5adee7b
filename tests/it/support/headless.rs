//! Drives `outrigger run` (the headless one-shot mode) as a shell or eval runner would: spawn
//! the binary with its own `OUTRIGGER_HOME`, read stdout line by line with deadlines, send
//! it signals, and collect its exit code, stdout and stderr. A child still running when a
//! deadline passes is killed and the test fails with what it printed so far.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{self, base_command};

/// How long any one `outrigger run` may take before the test gives up on it.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// What the run's stdin is.
pub enum Input {
    /// `/dev/null`.
    Null,
    /// These bytes, then EOF.
    Bytes(Vec<u8>),
    /// A pipe the test keeps open and never writes to.
    Open,
}

/// A running `outrigger run`.
pub struct Running {
    pub child: Child,
    /// Held so that `Input::Open` stays open for the life of the run.
    _stdin: Option<ChildStdin>,
    out: Receiver<String>,
    err: Receiver<String>,
    /// Stdout lines read so far (with their newline).
    pub seen: Vec<String>,
    started: Instant,
}

/// How a run ended.
#[derive(Debug)]
pub struct Output {
    /// The exit code (`None`: ended by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// From spawn to exit.
    pub elapsed: Duration,
    /// Whether stderr reached EOF soon after the exit: nothing the run started (the sidecar,
    /// its tools) still holds it.
    pub stderr_closed: bool,
}

fn raw_lines(r: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(r);
        loop {
            let mut buf = Vec::new();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let s = String::from_utf8_lossy(&buf).into_owned();
                    if tx.send(s).is_err() {
                        break;
                    }
                }
            }
        }
    });
    rx
}

impl Running {
    /// Spawns `outrigger ARGS` on `home` (`args` usually start with `run`).
    pub fn start(home: &Path, args: &[&str], env: &[(&str, &str)], input: Input) -> Running {
        let mut cmd = base_command(home);
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.stdin(match input {
            Input::Null => Stdio::null(),
            Input::Bytes(_) | Input::Open => Stdio::piped(),
        });
        let mut child = cmd.spawn().expect("spawn outrigger run");
        let mut stdin = child.stdin.take();
        if let Input::Bytes(bytes) = input {
            let mut w = stdin.take().unwrap();
            std::thread::spawn(move || {
                let _ = w.write_all(&bytes);
                // Dropping `w` closes the pipe: EOF.
            });
        }
        let out = raw_lines(child.stdout.take().unwrap());
        let err = raw_lines(child.stderr.take().unwrap());
        Running {
            child,
            _stdin: stdin,
            out,
            err,
            seen: Vec::new(),
            started: Instant::now(),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `sig` to the run process (only to it, not to its group).
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig).unwrap();
    }

    /// Kills the run and fails the test with what it printed so far.
    fn fail(&mut self, what: &str) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        while let Ok(l) = self.err.recv_timeout(Duration::from_millis(500)) {
            err.push_str(&l);
        }
        while let Ok(l) = self.out.try_recv() {
            self.seen.push(l);
        }
        panic!(
            "outrigger run: {what} (after {:?})\nstdout so far:\n{}\nstderr so far:\n{err}",
            self.started.elapsed(),
            self.seen.concat()
        );
    }

    /// Waits for a stdout line satisfying `pred` (lines before it are kept in `seen`).
    pub fn wait_line(&mut self, within: Duration, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if pred(&l) {
                        return l;
                    }
                }
                Err(RecvTimeoutError::Timeout) => self.fail("no awaited stdout line in time"),
                Err(RecvTimeoutError::Disconnected) => {
                    self.fail("stdout closed before the awaited line")
                }
            }
        }
    }

    /// Waits for a stdout line that is a JSON object of `type` `ty` and returns it.
    pub fn wait_type(&mut self, within: Duration, ty: &str) -> Value {
        let line = self.wait_line(within, |l| {
            serde_json::from_str::<Value>(l).is_ok_and(|v| v["type"] == ty)
        });
        serde_json::from_str(&line).unwrap()
    }

    /// Waits for the exit (killing the run and failing past `within`), then collects the rest
    /// of stdout and stderr.
    pub fn finish(mut self, within: Duration) -> Output {
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() >= deadline {
                self.fail(&format!("did not exit within {within:?}"));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let elapsed = self.started.elapsed();
        // Stdout is the run's own pipe; stderr may be shared with what it started, so give
        // it a bounded time to close.
        let drain = Instant::now() + Duration::from_secs(5);
        let mut stdout = self.seen.concat();
        while let Ok(l) = self
            .out
            .recv_timeout(drain.saturating_duration_since(Instant::now()))
        {
            stdout.push_str(&l);
        }
        let mut stderr = String::new();
        let stderr_closed = loop {
            match self
                .err
                .recv_timeout(drain.saturating_duration_since(Instant::now()))
            {
                Ok(l) => stderr.push_str(&l),
                Err(RecvTimeoutError::Disconnected) => break true,
                Err(RecvTimeoutError::Timeout) => break false,
            }
        };
        Output {
            code: status.code(),
            stdout,
            stderr,
            elapsed,
            stderr_closed,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `outrigger ARGS` on `home` with stdin at `/dev/null` and waits for it.
pub fn run(home: &Path, args: &[&str]) -> Output {
    Running::start(home, args, &[], Input::Null).finish(DEADLINE)
}

impl Output {
    /// For assertion messages.
    pub fn dump(&self) -> String {
        format!(
            "exit {:?} after {:?}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.elapsed, self.stdout, self.stderr
        )
    }

    /// Asserts the exit code.
    pub fn expect_code(&self, code: i32) -> &Output {
        assert_eq!(self.code, Some(code), "{}", self.dump());
        self
    }

    /// Every stdout line parsed as JSON (each must parse).
    pub fn json_lines(&self) -> Vec<Value> {
        assert!(
            self.stdout.is_empty() || self.stdout.ends_with('\n'),
            "stdout does not end with a newline: {}",
            self.dump()
        );
        self.stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| {
                    panic!("stdout line is not JSON ({e}): {l:?}\n{}", self.dump())
                })
            })
            .collect()
    }

    /// The single JSON object of the `json` format (stdout is exactly one line).
    pub fn result(&self) -> Value {
        let lines = self.json_lines();
        assert_eq!(lines.len(), 1, "json: one line expected\n{}", self.dump());
        let v = lines.into_iter().next().unwrap();
        assert_eq!(v["type"], "result", "{}", self.dump());
        v
    }

    /// The last line of the `stream-json` format, which must be the result object.
    pub fn last_result(&self) -> Value {
        let lines = self.json_lines();
        let last = lines.last().cloned().unwrap_or_else(|| {
            panic!("stream-json: no lines\n{}", self.dump());
        });
        assert_eq!(last["type"], "result", "last line\n{}", self.dump());
        last
    }
}

/// Writes `turns` as a scripted-provider JSON Lines file in `dir`.
pub fn script(dir: &Path, name: &str, turns: &[Value]) -> PathBuf {
    let text: String = turns.iter().map(|t| format!("{t}\n")).collect();
    common::write_file(dir, name, &text)
}

/// The visible messages of `record` in the store at `db` (a sidecar on it; the run must have
/// exited, since the store admits one process).
pub fn record_messages(db: &Path, record: &str) -> Vec<Value> {
    let mut s = common::on_db(db);
    crate::support::chat_helpers::messages(&mut s, record)
}

/// The messages' contents as text, in order.
pub fn contents(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(crate::support::fake_router::content_text)
        .collect()
}
