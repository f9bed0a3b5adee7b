//! Runs one plugin tool call: spawn the executable, feed the arguments on stdin, read one JSON
//! envelope from stdout, and turn it into an [`ExecOutcome`].
//!
//! The child gets its own process group so a timeout, a cancellation or a shutdown can kill
//! everything it started (a `cmd &` grandchild, a subshell), not just the direct child. The
//! group is also killed after the child exits normally: stragglers would otherwise hold our
//! stdout pipe open and keep the call from finishing. Children start through
//! `sandbox::spawn` (the sandbox launcher when the service is installed).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::Child;
use tokio_util::sync::CancellationToken;

use super::manifest::{PluginToolSpec, format_duration};
use crate::lifecycle::Lifecycle;
use crate::sandbox::capture::{Capture, Reader};
use crate::sandbox::spawn::{PrivateTmp, SpawnSpec, Spawned, Stdin, spawn};
use crate::sandbox::{ExecSandboxRequest, Marker};

/// Bytes of each stream's start kept in a summary.
const SUMMARY_HEAD: usize = 900;
/// Bytes of each stream's end kept in a summary. Head + tail + marker stay under 2,000 chars.
const SUMMARY_TAIL: usize = 900;
/// How much of a stream's end is remembered past the capture limit (enough for the summary
/// tail plus a UTF-8 boundary adjustment).
const TAIL_KEEP: usize = 1024;
/// Longest a plugin's error kind may be before it is cut.
const MAX_KIND_LEN: usize = 64;
/// After the group is killed, how long the readers may take to drain what the pipes still hold.
/// Only a process that left the group (setsid) while keeping our pipe open can make this bite;
/// generous because a loaded runtime (hundreds of concurrent calls on two cores) may not get
/// to a reader for a while, and cutting a reader short loses output already in the pipe.
const DRAIN_GRACE: Duration = Duration::from_secs(5);
/// How long to wait for the kernel to let us reap a SIGKILLed child.
const REAP_GRACE: Duration = Duration::from_secs(5);

/// How one call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecOutcome {
    /// Exit 0 and `{"ok": true, "result": ...}` on stdout.
    Ok {
        result: Value,
        /// What the model should see instead of `result`, when the plugin provided one.
        model_result: Option<Value>,
        stdout_bytes: u64,
        stderr_bytes: u64,
        duration: Duration,
    },
    /// The plugin ran and failed: `ok: false`, invalid output, a non-zero exit or a signal.
    Failed {
        /// The plugin's own slug for `ok: false`; otherwise one of `nonzero_exit`, `signal`,
        /// `invalid_output`, `output_too_large`, `exec_error`.
        kind: String,
        message: String,
        /// `None` when the process died on a signal.
        exit_code: Option<i32>,
        stdout_summary: String,
        stderr_summary: String,
    },
    /// The tool's timeout elapsed; the process group was killed. `after` is the timeout.
    TimedOut {
        after: Duration,
        stdout_summary: String,
        stderr_summary: String,
    },
    /// The cancellation token fired; the process group was killed.
    Cancelled,
    /// The executable could not be started (missing, not executable, bad cwd, ...).
    SpawnFailed { message: String },
}

impl ExecOutcome {
    pub fn is_ok(&self) -> bool {
        matches!(self, ExecOutcome::Ok { .. })
    }

    /// The outcome as a `ToolResult` JSON object (see `protocol::ToolResult`).
    ///
    /// Failures set `needsFollowup` so the model gets a turn to react; a cancellation does not,
    /// since nobody is waiting for the answer.
    pub fn to_tool_result(&self, tool: &str) -> Value {
        match self {
            ExecOutcome::Ok {
                result,
                model_result,
                ..
            } => {
                let mut data = Map::new();
                data.insert("result".into(), result.clone());
                if let Some(m) = model_result {
                    data.insert("modelResult".into(), m.clone());
                }
                json!({"success": true, "data": data})
            }
            ExecOutcome::Failed {
                kind,
                message,
                exit_code,
                stdout_summary,
                stderr_summary,
            } => failure(
                format!("{kind}: {message}"),
                kind,
                *exit_code,
                stdout_summary,
                stderr_summary,
                None,
            ),
            ExecOutcome::TimedOut {
                after,
                stdout_summary,
                stderr_summary,
            } => failure(
                format!(
                    "timeout: plugin tool `{tool}` did not finish within its {} timeout; its process group was killed",
                    format_duration(*after)
                ),
                "timeout",
                None,
                stdout_summary,
                stderr_summary,
                Some(("timeoutMs", json!(after.as_millis() as u64))),
            ),
            ExecOutcome::Cancelled => json!({
                "success": false,
                "error": format!("cancelled: plugin tool `{tool}` was cancelled; its process group was killed"),
                "data": {"kind": "cancelled"},
            }),
            ExecOutcome::SpawnFailed { message } => failure(
                format!("spawn_failed: {message}"),
                "spawn_failed",
                None,
                "",
                "",
                None,
            ),
        }
    }
}

fn failure(
    error: String,
    kind: &str,
    exit_code: Option<i32>,
    stdout: &str,
    stderr: &str,
    extra: Option<(&str, Value)>,
) -> Value {
    let mut data = Map::new();
    data.insert("kind".into(), json!(kind));
    data.insert("exitCode".into(), json!(exit_code));
    data.insert("stdout".into(), json!(stdout));
    data.insert("stderr".into(), json!(stderr));
    if let Some((k, v)) = extra {
        data.insert(k.into(), v);
    }
    json!({"success": false, "needsFollowup": true, "error": error, "data": data})
}

/// Runs `spec` once with `args` on stdin and `cwd` as working directory.
///
/// `max_capture` bounds the bytes kept from each of stdout and stderr; output beyond it is
/// read and discarded (so the child never blocks on a full pipe), and a stdout that overflowed
/// is reported as `output_too_large` since its envelope cannot be trusted. The child gets the
/// sidecar's environment scrubbed like bash's (`bash_env_inherit`/`_deny`/`_allow` and the
/// secret-name patterns) plus `spec.env`.
pub async fn run_tool(
    spec: &PluginToolSpec,
    args: &Value,
    cwd: &Path,
    cancel: &CancellationToken,
    lifecycle: Option<&Lifecycle>,
    max_capture: usize,
) -> ExecOutcome {
    run_sandboxed(spec, args, cwd, cancel, lifecycle, max_capture, None)
        .await
        .0
}

/// [`run_tool`] with the call's sandbox request; also returns the `_sandbox` marker the call
/// ran under (`None` when no sandbox service is installed, e.g. in unit tests).
///
/// Plugin executables run through the sandbox launcher in a PID namespace of their own, like
/// bash: whatever they start (`setsid`, double fork) dies with the call, and with the sidecar.
/// (So `$$` is a namespace pid.) They also get a pids cgroup or `RLIMIT_NPROC`
/// (`sandbox_max_processes`). Without an installed service they run directly, still in
/// their own group with a death signal.
pub async fn run_sandboxed(
    spec: &PluginToolSpec,
    args: &Value,
    cwd: &Path,
    cancel: &CancellationToken,
    lifecycle: Option<&Lifecycle>,
    max_capture: usize,
    request: Option<&ExecSandboxRequest>,
) -> (ExecOutcome, Option<Marker>) {
    let sandbox = crate::sandbox::global();
    let marker = match &sandbox {
        Some(sb) => Some(sb.describe(request.and_then(|r| r.network)).await.marker),
        None => None,
    };
    let outcome = run_inner(
        spec,
        args,
        cwd,
        cancel,
        lifecycle,
        max_capture,
        request,
        sandbox,
    )
    .await;
    (outcome, marker)
}

#[allow(clippy::too_many_arguments)]
async fn run_inner(
    spec: &PluginToolSpec,
    args: &Value,
    cwd: &Path,
    cancel: &CancellationToken,
    lifecycle: Option<&Lifecycle>,
    max_capture: usize,
    request: Option<&ExecSandboxRequest>,
    sandbox: Option<std::sync::Arc<crate::sandbox::Sandbox>>,
) -> ExecOutcome {
    if cancel.is_cancelled() {
        return ExecOutcome::Cancelled;
    }
    let tmp = match &sandbox {
        Some(_) => match PrivateTmp::create() {
            Ok(t) => Some(t),
            Err(e) => {
                return ExecOutcome::SpawnFailed {
                    message: format!(
                        "cannot create a private temp dir for {}: {e}",
                        spec.exec.display()
                    ),
                };
            }
        },
        None => None,
    };
    // Undoes what the plugin left on the workspace's protected names; declared before the
    // spawned group so it runs (on drop) after the group is gone.
    let mut _protect_guard = None;
    let (launch, launcher, cgroup, warm) = match &sandbox {
        Some(sb) => match sb
            .prepare(cwd, request, tmp.as_ref().map(PrivateTmp::path), true)
            .await
        {
            Ok(mut p) => {
                // The plugin's own directory stays readable although `$OUTRIGGER_HOME` is not.
                p.reveal(spec.exec.parent().map(Path::to_path_buf));
                _protect_guard = p.guard.take();
                (
                    p.launch,
                    sb.launcher().map(Path::to_path_buf),
                    p.cgroup,
                    p.warm,
                )
            }
            Err(e) => {
                return ExecOutcome::SpawnFailed {
                    message: format!("the sandbox refused to run {}: {e}", spec.exec.display()),
                };
            }
        },
        None => (None, None, None, None),
    };
    let mut extra_env: Vec<(OsString, OsString)> =
        spec.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    if let Some(t) = &tmp {
        for k in ["TMPDIR", "TMP", "TEMP"] {
            extra_env.push((k.into(), t.path().as_os_str().to_os_string()));
        }
    }
    let request = SpawnSpec {
        program: spec.exec.clone(),
        args: spec.args.iter().map(OsString::from).collect(),
        cwd: cwd.to_path_buf(),
        // The sidecar's environment scrubbed like bash's (`bash_env_*`, secret names).
        env: Some(crate::sandbox::secrets::command_env(
            sandbox.as_ref().and_then(|sb| sb.settings()).as_deref(),
        )),
        extra_env,
        stdin: Stdin::Piped,
        launch,
        launcher,
        cgroup,
        warm,
        terminal: None,
    };

    let start = Instant::now();
    // From here on every exit path, including this future being dropped, kills and
    // unregisters the group (see `Group`).
    let Spawned {
        mut child,
        group: mut guard,
        ..
    } = match spawn(request, lifecycle).await {
        Ok(s) => s,
        Err(e) => {
            return ExecOutcome::SpawnFailed {
                message: format!(
                    "cannot start {} (in {}): {e}",
                    spec.exec.display(),
                    cwd.display()
                ),
            };
        }
    };

    let stdin_task = child.stdin.take().map(|mut stdin| {
        let payload = args.to_string().into_bytes();
        tokio::spawn(async move {
            // A plugin may exit without reading its arguments; the broken pipe is not an error.
            let _ = stdin.write_all(&payload).await;
            let _ = stdin.shutdown().await;
        })
    });
    let stop = CancellationToken::new();
    let out_reader = Reader::spawn(child.stdout.take(), max_capture, TAIL_KEEP, stop.clone());
    let err_reader = Reader::spawn(child.stderr.take(), max_capture, TAIL_KEEP, stop.clone());

    let end = tokio::select! {
        biased;
        _ = cancel.cancelled() => End::Cancelled,
        st = child.wait() => End::Exited(st),
        _ = tokio::time::sleep(spec.timeout) => End::TimedOut,
    };
    let duration = start.elapsed();

    // Also after a normal exit: stragglers would hold our pipes open. Any straggler keeps the
    // group id alive; with none left, the id could only be recycled in the microseconds since
    // the reap, which pid allocation (sequential, wrapping at pid_max) makes practically moot.
    guard.kill();
    let reaped = match &end {
        End::Exited(_) => true,
        _ => reap(&mut child).await,
    };
    if reaped {
        // Done with the group; the guard must not signal a possibly recycled id later.
        guard.disarm();
    }
    if let Some(t) = stdin_task {
        t.abort();
    }
    let deadline = tokio::time::Instant::now() + DRAIN_GRACE;
    let out = out_reader.finish(&stop, deadline).await;
    let err = err_reader.finish(&stop, deadline).await;
    drop(guard);

    match end {
        End::Cancelled => ExecOutcome::Cancelled,
        End::TimedOut => ExecOutcome::TimedOut {
            after: spec.timeout,
            stdout_summary: summary(&out),
            stderr_summary: summary(&err),
        },
        End::Exited(Err(e)) => ExecOutcome::Failed {
            kind: "exec_error".into(),
            message: format!("waiting for the plugin failed: {e}"),
            exit_code: None,
            stdout_summary: summary(&out),
            stderr_summary: summary(&err),
        },
        End::Exited(Ok(status)) => interpret(status, &out, &err, duration),
    }
}

enum End {
    Exited(std::io::Result<ExitStatus>),
    TimedOut,
    Cancelled,
}

async fn reap(child: &mut Child) -> bool {
    matches!(
        tokio::time::timeout(REAP_GRACE, child.wait()).await,
        Ok(Ok(_))
    )
}

/// At most ~2,000 chars: the whole stream when short, else its start and end around an exact
/// `[N bytes omitted]` marker.
fn summary(c: &Capture) -> String {
    let (head, tail) = (c.head(), c.tail());
    if c.omitted() == 0 {
        let mut all = head.to_vec();
        all.extend_from_slice(tail);
        return summarize(&all);
    }
    let h = head_cut(head, SUMMARY_HEAD);
    let t = tail_cut(tail, SUMMARY_TAIL);
    let omitted = c.total() - (h + t) as u64;
    join_summary(&head[..h], omitted, &tail[tail.len() - t..])
}

fn summarize(all: &[u8]) -> String {
    if all.len() <= SUMMARY_HEAD + SUMMARY_TAIL {
        return String::from_utf8_lossy(all).into_owned();
    }
    let h = head_cut(all, SUMMARY_HEAD);
    let t = tail_cut(all, SUMMARY_TAIL);
    join_summary(&all[..h], (all.len() - h - t) as u64, &all[all.len() - t..])
}

fn join_summary(head: &[u8], omitted: u64, tail: &[u8]) -> String {
    format!(
        "{}\n[{omitted} bytes omitted]\n{}",
        String::from_utf8_lossy(head),
        String::from_utf8_lossy(tail)
    )
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// Length of the prefix to keep: at most `max`, backed off so a UTF-8 character is not split.
fn head_cut(b: &[u8], max: usize) -> usize {
    let mut n = max.min(b.len());
    let floor = n.saturating_sub(3);
    while n > floor && n < b.len() && is_continuation(b[n]) {
        n -= 1;
    }
    n
}

/// Length of the suffix to keep: at most `max`, shortened so it starts on a character.
fn tail_cut(b: &[u8], max: usize) -> usize {
    let mut n = max.min(b.len());
    let floor = n.saturating_sub(3);
    while n > floor && is_continuation(b[b.len() - n]) {
        n -= 1;
    }
    n
}

fn interpret(status: ExitStatus, out: &Capture, err: &Capture, duration: Duration) -> ExecOutcome {
    let failed = |kind: String, message: String| ExecOutcome::Failed {
        kind,
        message,
        exit_code: status.code(),
        stdout_summary: summary(out),
        stderr_summary: summary(err),
    };
    if let Some(sig) = status.signal() {
        let name = nix::sys::signal::Signal::try_from(sig)
            .map(|s| s.as_str().to_string())
            .unwrap_or_else(|_| format!("signal {sig}"));
        return failed("signal".into(), format!("the plugin was killed by {name}"));
    }
    let code = status.code().unwrap_or(-1);
    let envelope = if out.past_limit() {
        Err((
            "output_too_large",
            format!(
                "stdout was {} bytes, over the {}-byte capture limit; return less or write bulk data to a file",
                out.total(),
                out.limit()
            ),
        ))
    } else {
        parse_envelope(out.head())
    };

    match envelope {
        // The plugin's own failure report is the most specific, whatever the exit code.
        Ok(Envelope::Failure {
            kind,
            message,
            stdout_summary,
        }) => ExecOutcome::Failed {
            kind,
            message,
            exit_code: status.code(),
            stdout_summary,
            stderr_summary: summary(err),
        },
        _ if code != 0 => {
            let mut message = format!("the plugin exited with status {code}");
            if matches!(envelope, Ok(Envelope::Success { .. })) {
                message
                    .push_str(" despite reporting ok: true; a non-zero exit is always a failure");
            }
            failed("nonzero_exit".into(), message)
        }
        Err((kind, message)) => failed(kind.into(), message),
        Ok(Envelope::Success {
            result,
            model_result,
        }) => ExecOutcome::Ok {
            result,
            model_result,
            stdout_bytes: out.total(),
            stderr_bytes: err.total(),
            duration,
        },
    }
}

enum Envelope {
    Success {
        result: Value,
        model_result: Option<Value>,
    },
    Failure {
        kind: String,
        message: String,
        /// Summary of the envelope with `error.details` removed, in place of raw stdout.
        stdout_summary: String,
    },
}

fn parse_envelope(stdout: &[u8]) -> Result<Envelope, (&'static str, String)> {
    const CONTRACT: &str = "stdout must be one JSON object: {\"ok\": true, \"result\": ...} or {\"ok\": false, \"error\": {\"kind\": ..., \"message\": ...}}";
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Err((
            "invalid_output",
            format!("the plugin wrote nothing to stdout; {CONTRACT}"),
        ));
    }
    let v: Value = serde_json::from_slice(stdout).map_err(|e| {
        (
            "invalid_output",
            format!("stdout is not valid JSON ({e}); {CONTRACT}"),
        )
    })?;
    let Value::Object(mut obj) = v else {
        return Err((
            "invalid_output",
            format!("stdout is not a JSON object; {CONTRACT}"),
        ));
    };
    match obj.get("ok") {
        Some(Value::Bool(true)) => {
            let Some(result) = obj.remove("result") else {
                return Err((
                    "invalid_output",
                    format!("the envelope has \"ok\": true but no \"result\"; {CONTRACT}"),
                ));
            };
            let model_result = obj.remove("model_result").filter(|m| !m.is_null());
            Ok(Envelope::Success {
                result,
                model_result,
            })
        }
        // Lenient about the error's shape: it is a failure either way, and `details` is
        // deliberately dropped.
        Some(Value::Bool(false)) => {
            if let Some(Value::Object(e)) = obj.get_mut("error") {
                e.remove("details");
            }
            let (kind, message) = match obj.get("error") {
                Some(Value::Object(e)) => (
                    e.get("kind").and_then(Value::as_str),
                    e.get("message").and_then(Value::as_str),
                ),
                Some(Value::String(s)) => (None, Some(s.as_str())),
                _ => (None, None),
            };
            let kind = kind
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map_or_else(|| "plugin_error".to_string(), |k| truncate(k, MAX_KIND_LEN));
            let message = message.map_or_else(
                || "the plugin reported a failure without a message".to_string(),
                |m| summarize(m.as_bytes()),
            );
            let stdout_summary = summarize(Value::Object(obj.clone()).to_string().as_bytes());
            Ok(Envelope::Failure {
                kind,
                message,
                stdout_summary,
            })
        }
        _ => Err((
            "invalid_output",
            format!("the JSON object has no boolean \"ok\"; {CONTRACT}"),
        )),
    }
}

fn truncate(s: &str, max_chars: usize) -> String {
    s.chars().take(max_chars).collect()
}

#[cfg(test)]
mod tests;
