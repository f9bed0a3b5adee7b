//! A host's end of the pipes: starts this binary as the sidecar and speaks JSON-RPC to it.
//! `outrigger run` and `outrigger acp` are both hosts of a child sidecar, so a headless or
//! editor turn takes exactly the code path a desktop host's turn takes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::{mpsc, oneshot};

/// What the sidecar sends that is not an answer to one of our requests.
#[derive(Debug)]
pub enum Incoming {
    Notification {
        method: String,
        params: Value,
    },
    /// A reverse request (`approval.request`, `ask_user.request`, …): answer it with
    /// [`Sidecar::respond`].
    Request {
        id: Value,
        method: String,
        params: Value,
    },
}

/// How one request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    #[error("{message} (error {code})")]
    Rpc {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    #[error("the sidecar exited before answering")]
    Closed,
}

/// How to start the child.
#[derive(Debug, Default, Clone)]
pub struct SpawnOpts {
    pub storage_path: Option<PathBuf>,
    pub no_web_tools: bool,
    pub log_level: String,
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, CallError>>>>>;

pub struct Sidecar {
    child: tokio::sync::Mutex<Child>,
    pid: Option<u32>,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Pending,
    next_id: AtomicU64,
}

impl Sidecar {
    /// Starts the sidecar in its own process group (a terminal's Ctrl-C reaches only the
    /// host, which cancels the turn cooperatively) and returns it with the stream of what it
    /// sends. Its stderr (logs) is ours.
    pub fn spawn(
        opts: &SpawnOpts,
    ) -> std::io::Result<(Arc<Sidecar>, mpsc::UnboundedReceiver<Incoming>)> {
        let exe = std::env::current_exe()?;
        let mut cmd = tokio::process::Command::new(exe);
        cmd.arg("--quiet-ready")
            .arg("--log-level")
            .arg(&opts.log_level);
        if let Some(p) = &opts.storage_path {
            cmd.arg("--storage-path").arg(p);
        }
        if opts.no_web_tools {
            cmd.arg("--no-web-tools");
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the sidecar's pipes are missing"));
        };
        let pending: Pending = Arc::default();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(read_frames(stdout, Arc::clone(&pending), tx));
        let pid = child.id();
        Ok((
            Arc::new(Sidecar {
                child: tokio::sync::Mutex::new(child),
                pid,
                stdin: tokio::sync::Mutex::new(Some(stdin)),
                pending,
                next_id: AtomicU64::new(1),
            }),
            rx,
        ))
    }

    async fn send(&self, frame: &Value) -> bool {
        let mut line = frame.to_string();
        line.push('\n');
        let mut guard = self.stdin.lock().await;
        let Some(stdin) = guard.as_mut() else {
            return false;
        };
        stdin.write_all(line.as_bytes()).await.is_ok() && stdin.flush().await.is_ok()
    }

    /// Sends a request and waits for its answer (or the sidecar's exit).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id, tx);
        }
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if !self.send(&frame).await {
            if let Ok(mut p) = self.pending.lock() {
                p.remove(&id);
            }
            return Err(CallError::Closed);
        }
        rx.await.unwrap_or(Err(CallError::Closed))
    }

    /// Answers a reverse request.
    pub async fn respond(&self, id: Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    /// Refuses a reverse request.
    pub async fn respond_error(&self, id: Value, code: i64, message: &str) {
        let frame =
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        self.send(&frame).await;
    }

    /// Waits for the process to exit.
    pub async fn wait(&self) -> Option<ExitStatus> {
        self.child.lock().await.wait().await.ok()
    }

    /// Kills the sidecar's whole process group (what it started goes with it).
    pub fn kill_group(&self) {
        if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }

    /// Stops the sidecar: `system.shutdown` (it flushes the record and stops its tools),
    /// stdin closed, then at most `grace` before the group is killed.
    pub async fn shutdown(&self, grace: Duration) -> Option<ExitStatus> {
        let ask = async {
            let _ = self.request("system.shutdown", json!({})).await;
            self.stdin.lock().await.take();
            self.wait().await
        };
        match tokio::time::timeout(grace, ask).await {
            Ok(status) => status,
            Err(_) => {
                self.kill_group();
                self.wait().await
            }
        }
    }
}

async fn read_frames(
    stdout: tokio::process::ChildStdout,
    pending: Pending,
    tx: mpsc::UnboundedSender<Incoming>,
) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(mut frame) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let method = frame
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let params = frame
            .get_mut("params")
            .map(Value::take)
            .unwrap_or(Value::Null);
        match (method, frame.get("id").cloned()) {
            (Some(method), Some(id)) if !id.is_null() => {
                let _ = tx.send(Incoming::Request { id, method, params });
            }
            (Some(method), _) => {
                let _ = tx.send(Incoming::Notification { method, params });
            }
            (None, Some(id)) => {
                let Some(waiter) = id
                    .as_u64()
                    .and_then(|id| pending.lock().ok().and_then(|mut p| p.remove(&id)))
                else {
                    continue;
                };
                let answer = match frame.get_mut("error") {
                    Some(e) => Err(CallError::Rpc {
                        code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: e
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        data: e.get_mut("data").map(Value::take),
                    }),
                    None => Ok(frame
                        .get_mut("result")
                        .map(Value::take)
                        .unwrap_or(Value::Null)),
                };
                let _ = waiter.send(answer);
            }
            (None, None) => {}
        }
    }
    // EOF: whoever still waits learns the sidecar is gone.
    if let Ok(mut p) = pending.lock() {
        for (_, w) in p.drain() {
            let _ = w.send(Err(CallError::Closed));
        }
    }
}
