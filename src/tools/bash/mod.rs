//! `bash {command, timeoutMs?, description?, raw_output?}` (mode `local`): `bash -c` without
//! rc files, stdin `/dev/null`, in the workspace, through the sandbox launcher unless the
//! config disables it, with a scrubbed environment. On timeout or cancel the whole process
//! group gets SIGTERM, then SIGKILL after a grace period, and what was captured is returned.

mod host_spawn;
pub mod output;
pub mod saved;
pub mod session;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::sandbox::capture::{Capture, Reader};
use crate::sandbox::launcher::{ERROR_PREFIX, LAUNCH_FAILED};
use crate::sandbox::protect;
use crate::sandbox::spawn::{PrivateTmp, SpawnSpec, Stdin, spawn, terminate};
use crate::sandbox::{Marker, Sandbox, secrets};
use crate::tools::{Tool, ToolContext, ToolFuture, ToolMode, ToolResult};

/// The schema's bound on `timeoutMs` (the key's ceiling, a day); the config's
/// `bash_max_timeout_ms` (default ten minutes) clamps what a call gets.
pub const TIMEOUT_CEILING_MS: u64 = crate::config::keys::BASH_TIMEOUT_CEILING_MS as u64;
/// Between SIGTERM and SIGKILL on timeout or cancel.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// After the command ends, how long the readers may take to drain the pipes (generous: a
/// loaded runtime may be slow to reach a reader, and cutting it short loses output).
const DRAIN_GRACE: Duration = Duration::from_secs(5);
/// Bytes of a stream's end remembered past the save cap (the model sees the true end).
const TAIL_KEEP: usize = 64 * 1024;

pub struct BashTool {
    sandbox: Arc<Sandbox>,
    /// Workspaces whose saved output was pruned this process.
    pruned: Mutex<HashSet<PathBuf>>,
}

impl BashTool {
    pub const NAME: &'static str = "bash";

    pub fn new(sandbox: Arc<Sandbox>) -> BashTool {
        BashTool {
            sandbox,
            pruned: Mutex::new(HashSet::new()),
        }
    }

    /// Prunes a workspace's saved output once per process, in the background.
    fn prune_once(&self, workspace: &Path) {
        let first = self
            .pruned
            .lock()
            .map(|mut s| s.insert(workspace.to_path_buf()))
            .unwrap_or(false);
        if first {
            let ws = workspace.to_path_buf();
            tokio::task::spawn_blocking(move || saved::prune(&ws));
        }
    }
}

impl Tool for BashTool {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "Run a shell command with bash in the workspace and return its exit code, stdout and \
         stderr. stdin is empty. By default the command can write only inside the workspace and \
         a private temp dir ($TMPDIR), .git and agent configuration stay read-only, and the \
         network is off. Long output keeps its start and end; the full output is saved and \
         data.file_path names the file. Output is cleaned (ANSI escapes removed, OSC 8 links \
         as text (uri), CRLF as LF) unless raw_output is true. Commands time out (timeoutMs, \
         default 120000)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command line to run."},
                "timeoutMs": {
                    "type": "integer", "minimum": 1, "maximum": TIMEOUT_CEILING_MS,
                    "description": "Kill the command after this many milliseconds (default 120000). A value above the configured ceiling (bash_max_timeout_ms, default 600000) is lowered to it."
                },
                "description": {"type": "string", "description": "What the command does, in a few words."},
                "raw_output": {
                    "type": "boolean",
                    "description": "true returns stdout and stderr as captured: ANSI escapes, OSC 8 links and CRLF are kept."
                }
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    fn mode(&self) -> ToolMode {
        ToolMode::Local
    }

    fn call(self: Arc<Self>, ctx: ToolContext, args: Map<String, Value>) -> ToolFuture {
        Box::pin(async move { self.run(ctx, args).await })
    }
}

/// How the command ended.
enum End {
    Exited(i32),
    TimedOut,
    Cancelled,
    WaitFailed(String),
}

impl BashTool {
    async fn run(&self, ctx: ToolContext, args: Map<String, Value>) -> ToolResult {
        let command = args.get("command").and_then(Value::as_str).unwrap_or("");
        if command.trim().is_empty() {
            return ToolResult::recoverable(
                "command is empty: pass the bash command line in `command`",
            );
        }
        let Some(settings) = self.sandbox.settings() else {
            return ToolResult::recoverable("bash: the configuration cannot be read");
        };
        let (timeout_ms, clamped) = effective_timeout(
            args.get("timeoutMs").and_then(Value::as_u64),
            settings.bash_timeout_ms,
            settings.bash_max_timeout_ms,
        );
        // The call's `raw_output` wins over the config default.
        let raw = args
            .get("raw_output")
            .and_then(Value::as_bool)
            .unwrap_or(settings.bash_raw_output);
        if ctx.exec_sandbox.as_ref().is_some_and(|r| r.host_spawn) {
            let r = host_spawn::run(&ctx, command, timeout_ms, raw, &settings).await;
            return note_clamp(r, timeout_ms, clamped);
        }
        let workspace = ctx.workspace_root.clone();
        self.prune_once(&workspace);

        let Setup {
            tmp,
            marker,
            guard,
            spec,
        } = match setup(&self.sandbox, &ctx, &settings, Self::NAME, command).await {
            Ok(s) => s,
            Err(r) => return r,
        };
        let started = Instant::now();
        let lifecycle = ctx.lifecycle.as_deref();
        let mut spawned = match spawn(spec, lifecycle).await {
            Ok(s) => s,
            Err(e) => {
                return with_marker(
                    ToolResult::recoverable(format!(
                        "bash: cannot start bash in {}: {e}",
                        workspace.display()
                    )),
                    &marker,
                );
            }
        };
        let stop = CancellationToken::new();
        // Each stream keeps its first `SAVE_CAP` bytes (what gets saved) and its end.
        let out_reader = Reader::spawn(
            spawned.child.stdout.take(),
            saved::SAVE_CAP,
            TAIL_KEEP,
            stop.clone(),
        );
        let err_reader = Reader::spawn(
            spawned.child.stderr.take(),
            saved::SAVE_CAP,
            TAIL_KEEP,
            stop.clone(),
        );

        let end = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => End::Cancelled,
            st = spawned.wait_code() => match st {
                Ok(code) => End::Exited(code),
                Err(e) => End::WaitFailed(e.to_string()),
            },
            _ = tokio::time::sleep(Duration::from_millis(timeout_ms)) => End::TimedOut,
        };
        let reaped = match end {
            End::Exited(_) | End::WaitFailed(_) => {
                // Stragglers (a `cmd &` outside a PID namespace) would hold the pipes open.
                if !spawned.namespace_emptied() {
                    spawned.group.kill();
                }
                true
            }
            End::TimedOut | End::Cancelled => {
                terminate(&mut spawned.child, &spawned.group, KILL_GRACE).await
            }
        };
        if reaped {
            spawned.group.disarm();
        }
        let deadline = tokio::time::Instant::now() + DRAIN_GRACE;
        let out = out_reader.finish(&stop, deadline).await;
        let err = err_reader.finish(&stop, deadline).await;
        drop(spawned);
        drop(tmp);
        // Everything the command started is dead: undo what it left on protected names.
        let cleanup = match guard {
            Some(g) => g.finish_async().await,
            None => Vec::new(),
        };
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);

        let stdout = text(&out, raw);
        let stderr = text(&err, raw);
        if let End::Exited(LAUNCH_FAILED) = end
            && let Some(line) = stderr.lines().find(|l| l.starts_with(ERROR_PREFIX))
        {
            return with_marker(
                ToolResult::recoverable(format!(
                    "bash did not run: the sandbox launcher failed: {}",
                    line.trim_start_matches(ERROR_PREFIX).trim()
                ))
                .with_data("kind", "sandbox_failed"),
                &marker,
            );
        }
        let failed = !matches!(end, End::Exited(0));
        let (bo, be) = output::bound(&stdout, &stderr, settings.bash_max_output_bytes, failed);
        let truncated = bo.omitted > 0 || be.omitted > 0 || out.omitted() > 0 || err.omitted() > 0;
        let mut data = Map::new();
        data.insert(
            "exitCode".into(),
            match end {
                End::Exited(c) => json!(c),
                _ => Value::Null,
            },
        );
        data.insert("stdout".into(), json!(bo.text));
        data.insert("stderr".into(), json!(be.text));
        data.insert("truncated".into(), json!(truncated));
        data.insert("durationMs".into(), json!(duration_ms));
        if !cleanup.is_empty() {
            data.insert("protectedCleanup".into(), json!(cleanup));
        }
        if truncated {
            match saved::save(&workspace, &ctx.call_id, &stdout, &stderr) {
                Ok(p) => {
                    data.insert("file_path".into(), json!(p.display().to_string()));
                }
                Err(e) => tracing::warn!(
                    "bash: cannot save the full output under {}: {e}",
                    workspace.join(saved::OUTPUT_DIR).display()
                ),
            }
        }
        let result = match &end {
            End::Exited(0) => ToolResult::ok(data),
            End::Exited(c) => failure(format!("exit {c}"), data),
            End::TimedOut => failure(
                format!("bash timed out after {timeout_ms} ms; its process group was killed (output so far is in data)"),
                data,
            )
            .with_data("timedOut", true),
            End::Cancelled => failure(
                "cancelled: the command's process group was killed (output so far is in data)".into(),
                data,
            )
            .with_data("cancelled", true),
            End::WaitFailed(e) => failure(format!("bash: waiting for the command failed: {e}"), data),
        };
        with_marker(note_clamp(result, timeout_ms, clamped), &marker)
    }
}

/// What a sandboxed bash needs before it spawns (`bash` and `bash_session` alike).
pub(crate) struct Setup {
    /// The command's private `$TMPDIR` (removed when dropped: keep it until the command ends).
    pub tmp: PrivateTmp,
    pub marker: Marker,
    /// Finish it once the command's processes are dead.
    pub guard: Option<protect::Guard>,
    /// `bash --noprofile --norc -c <command>` in the workspace through the launcher, with
    /// the scrubbed environment and the temp dir set; stdin `/dev/null`.
    pub spec: SpawnSpec,
}

/// The private temp dir, the sandbox's launch spec for `ctx`, and the environment; a refusal
/// is returned as the tool's result (with the marker).
pub(crate) async fn setup(
    sandbox: &Sandbox,
    ctx: &ToolContext,
    settings: &Settings,
    tool: &str,
    command: &str,
) -> Result<Setup, ToolResult> {
    let tmp = PrivateTmp::create().map_err(|e| {
        ToolResult::recoverable(format!("{tool}: cannot create a private temp dir: {e}"))
    })?;
    let mut prepared = match sandbox
        .prepare(
            &ctx.workspace_root,
            ctx.exec_sandbox.as_ref(),
            Some(tmp.path()),
            true,
        )
        .await
    {
        Ok(p) => p,
        Err(e) => {
            let network = ctx.exec_sandbox.as_ref().and_then(|r| r.network);
            let marker = sandbox.describe(network).await.marker;
            return Err(with_marker(
                ToolResult::recoverable(format!("{tool} refused: {e}"))
                    .with_data("kind", "sandbox_unmet"),
                &marker,
            ));
        }
    };
    // This session's spill files stay readable although `$OUTRIGGER_HOME` is hidden.
    let stream = ctx.host_context.get("streamId").and_then(Value::as_str);
    if let (Some(home), Some(stream)) = (sandbox.home(), stream) {
        prepared.reveal(secrets::spill_dir(&home, stream));
    }
    let tmp_os = tmp.path().as_os_str().to_os_string();
    let mut env = secrets::command_env(Some(settings));
    for k in ["TMPDIR", "TMP", "TEMP"] {
        env.push((k.into(), tmp_os.clone()));
    }
    let spec = SpawnSpec {
        program: PathBuf::from("bash"),
        args: vec![
            "--noprofile".into(),
            "--norc".into(),
            "-c".into(),
            command.into(),
        ],
        cwd: ctx.workspace_root.clone(),
        env: Some(env),
        extra_env: Vec::new(),
        stdin: Stdin::Null,
        launch: prepared.launch.take(),
        launcher: sandbox.launcher().map(Path::to_path_buf),
        cgroup: prepared.cgroup.take(),
        warm: prepared.warm,
        terminal: None,
    };
    Ok(Setup {
        tmp,
        marker: prepared.marker.clone(),
        guard: prepared.guard.take(),
        spec,
    })
}

/// Says in the result that the call's `timeoutMs` was lowered to the ceiling.
fn note_clamp(r: ToolResult, timeout_ms: u64, clamped: bool) -> ToolResult {
    if clamped {
        r.with_data("timeoutMs", timeout_ms)
            .with_data("timeoutClamped", true)
    } else {
        r
    }
}

/// The timeout a call runs with, and whether its `timeoutMs` was lowered to the ceiling
/// (`bash_max_timeout_ms`, which also caps the default).
fn effective_timeout(asked: Option<u64>, default: u64, ceiling: u64) -> (u64, bool) {
    let ceiling = ceiling.max(1);
    match asked {
        Some(t) if t > ceiling => (ceiling, true),
        Some(t) => (t.max(1), false),
        None => (default.clamp(1, ceiling), false),
    }
}

fn failure(error: String, data: Map<String, Value>) -> ToolResult {
    ToolResult {
        data: Some(data),
        ..ToolResult::recoverable(error)
    }
}

pub(crate) fn with_marker(r: ToolResult, m: &Marker) -> ToolResult {
    r.with_data(
        "_sandbox",
        json!({"backend": m.backend, "enforcement": m.enforcement}),
    )
}

/// A captured stream as text (cleaned unless `raw`); a gap past the save cap is marked with
/// its exact byte count.
fn text(c: &Capture, raw: bool) -> String {
    let conv = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        if raw {
            s.into_owned()
        } else {
            output::clean(&s)
        }
    };
    let gap = c.omitted();
    if gap == 0 {
        let mut all = c.head().to_vec();
        all.extend_from_slice(c.tail());
        conv(&all)
    } else {
        format!(
            "{}\n[{gap} bytes omitted]\n{}",
            conv(c.head()),
            conv(c.tail())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_clamped_to_the_ceiling() {
        assert_eq!(effective_timeout(None, 120_000, 600_000), (120_000, false));
        assert_eq!(
            effective_timeout(Some(5_000), 120_000, 600_000),
            (5_000, false)
        );
        assert_eq!(
            effective_timeout(Some(900_000), 120_000, 600_000),
            (600_000, true)
        );
        assert_eq!(effective_timeout(None, 120_000, 60_000), (60_000, false));
        assert_eq!(effective_timeout(Some(0), 120_000, 600_000), (1, false));
    }
}
