//! A host's end of the pipes: starts this binary as the sidecar and speaks JSON-RPC to it.
//! `outrigger run` and `outrigger acp` are both hosts of a child sidecar, so a headless or
//! editor turn takes exactly the code path a desktop host's turn takes.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use super::peer::Peer;
pub use super::peer::{CallError, Incoming};

/// How to start the child.
#[derive(Debug, Default, Clone)]
pub struct SpawnOpts {
    pub storage_path: Option<PathBuf>,
    pub no_web_tools: bool,
    pub log_level: String,
}

pub struct Sidecar {
    child: tokio::sync::Mutex<Child>,
    pid: Option<u32>,
    peer: Peer<ChildStdin>,
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
        let (peer, rx) = Peer::new(stdin, stdout);
        let pid = child.id();
        Ok((
            Arc::new(Sidecar {
                child: tokio::sync::Mutex::new(child),
                pid,
                peer,
            }),
            rx,
        ))
    }

    /// Sends a request and waits for its answer (or the sidecar's exit).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        self.peer.request(method, params).await
    }

    /// Answers a reverse request.
    pub async fn respond(&self, id: Value, result: Value) {
        self.peer.respond(id, result).await;
    }

    /// Refuses a reverse request.
    pub async fn respond_error(&self, id: Value, code: i64, message: &str) {
        self.peer.respond_error(id, code, message, None).await;
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
            self.peer.close().await;
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
