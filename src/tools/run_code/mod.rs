//! `run_code {code, description}`: the model writes the body of a Python function whose tool
//! calls (`tools.read_file(path=…)`) run inside one round. The program runs in a child
//! interpreter under the sandbox launcher (the sidecar never runs model code itself), with an
//! allowlisted environment, speaking JSON lines with us (protocol v1, `driver.py`); each
//! nested call goes to a [`Nested`] dispatcher the caller provides.

use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::sandbox::spawn::{PrivateTmp, SpawnSpec, Spawned, Stdin, spawn};
use crate::tools::router::elapsed_ms;
use crate::tools::{Router, Tool, ToolContext, ToolFuture, ToolMode, ToolResult};

pub const NAME: &str = "run_code";
/// The driver, shipped inside the binary and written next to the program for each run.
const DRIVER: &str = include_str!("driver.py");
/// Longest program accepted (characters).
pub const MAX_SOURCE_CHARS: usize = 100_000;
/// Nested tool calls one program may make.
pub const MAX_CALLS: usize = 32;
/// Longest protocol line from the child; a longer one is a flood.
const MAX_LINE_BYTES: usize = 4 << 20;
/// Log text kept (the rest counted as dropped).
const MAX_LOG_BYTES: usize = 12_288;
/// A nested call's result as kept in `data.calls` (the program gets it whole).
const MAX_CALL_RESULT_CHARS: usize = 2_000;
/// stderr kept for a failure report.
const MAX_STDERR_BYTES: usize = 4_096;
/// What the child may see of our environment (plus `PYTHONDONTWRITEBYTECODE=1` and its temp
/// dir): the import guard is no boundary (`().__class__.__subclasses__()` reaches `os`), so
/// secrets must not be there at all.
const ENV_ALLOWED: &[&str] = &["PATH", "HOME", "LANG", "LC_*", "PYTHONPATH"];

/// Runs the program's nested calls.
pub trait Nested: Send {
    fn call<'a>(
        &'a mut self,
        name: &'a str,
        args: Map<String, Value>,
    ) -> Pin<Box<dyn Future<Output = ToolResult> + Send + 'a>>;
}

/// Nested calls straight to a router (`tool.invoke run_code`): schema validation, no turn.
pub struct RouterNested {
    pub router: Arc<Router>,
    pub ctx: ToolContext,
}

impl Nested for RouterNested {
    fn call<'a>(
        &'a mut self,
        name: &'a str,
        args: Map<String, Value>,
    ) -> Pin<Box<dyn Future<Output = ToolResult> + Send + 'a>> {
        Box::pin(dispatch_local(&self.router, name, args, self.ctx.clone()))
    }
}

/// A nested call on `router` (schema validation first, as for any call). Approvals are the
/// caller's: a turn puts each nested call to its approval layer before this.
pub async fn dispatch_local(
    router: &Router,
    name: &str,
    args: Map<String, Value>,
    ctx: ToolContext,
) -> ToolResult {
    router.dispatch(name, Value::Object(args), ctx).await
}

/// Where and how programs run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub python: PathBuf,
    pub timeout: Duration,
    /// `OUTRIGGER_SIDECAR_CONFINED=1`: the host already sandboxes us; the child inherits.
    pub confined: bool,
}

impl Settings {
    pub fn from_config(s: &crate::config::Settings) -> Settings {
        Settings {
            python: s
                .run_code_python
                .clone()
                .unwrap_or_else(|| PathBuf::from("python3")),
            timeout: Duration::from_millis(s.run_code_timeout_ms),
            confined: std::env::var("OUTRIGGER_SIDECAR_CONFINED")
                .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes")),
        }
    }
}

fn allowed_env(tmp: &Path) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| {
            let k = k.to_string_lossy();
            ENV_ALLOWED
                .iter()
                .any(|p| crate::sandbox::secrets::wildcard(p, &k))
        })
        .collect();
    for k in ["TMPDIR", "TMP", "TEMP"] {
        env.push((k.into(), tmp.as_os_str().to_os_string()));
    }
    env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
    env
}

fn failure(error: impl Into<String>, data: Map<String, Value>) -> ToolResult {
    let mut r = ToolResult::recoverable(error);
    r.data = Some(data);
    r
}

/// One message from the child.
#[derive(Debug)]
enum Msg {
    Log(String),
    Call {
        id: u64,
        tool: String,
        args: Map<String, Value>,
    },
    Done(Result<Value, String>),
}

fn parse(line: &str) -> Result<Msg, String> {
    let v: Value = serde_json::from_str(line).map_err(|_| {
        let head: String = line.chars().take(120).collect();
        format!("the program wrote something that is not protocol JSON to stdout: {head:?}")
    })?;
    match v.get("type").and_then(Value::as_str) {
        Some("log") => Ok(Msg::Log(
            v.get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        )),
        Some("call") => Ok(Msg::Call {
            id: v.get("id").and_then(Value::as_u64).unwrap_or(0),
            tool: v
                .get("tool")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            args: v
                .get("arguments")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        }),
        Some("done") if v.get("ok") == Some(&Value::Bool(true)) => Ok(Msg::Done(Ok(v
            .get("value")
            .cloned()
            .unwrap_or(Value::Null)))),
        Some("done") => Ok(Msg::Done(Err(v
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("the program failed")
            .to_string()))),
        _ => Err(format!(
            "the program sent an unknown protocol message: {line}"
        )),
    }
}

/// "the program's interpreter exited with status 3 {when}", once it is reaped.
async fn exited(child: &mut tokio::process::Child, when: &str) -> String {
    match child.wait().await {
        Ok(s) => match s.code() {
            Some(c) => format!("the program's interpreter exited with status {c} {when}"),
            None => format!("the program's interpreter was killed ({s}) {when}"),
        },
        Err(e) => format!("the program's interpreter went away {when} ({e})"),
    }
}

/// The `_sandbox` marker of this run, or the `sandbox_unavailable` failure.
async fn marker(settings: &Settings, ctx: &ToolContext) -> Result<Value, ToolResult> {
    if settings.confined {
        return Ok(json!({"backend": "inherited", "enforcement": "partial", "via": "layer1"}));
    }
    let none = json!({"backend": "none", "enforcement": "none"});
    let Some(sb) = crate::sandbox::global() else {
        return Err(unavailable(none));
    };
    let network = ctx.exec_sandbox.as_ref().and_then(|r| r.network);
    let m = sb.describe(network).await.marker;
    if m.backend == "none" {
        return Err(unavailable(none));
    }
    Ok(json!({"backend": m.backend, "enforcement": m.enforcement}))
}

fn unavailable(marker: Value) -> ToolResult {
    let mut data = Map::new();
    data.insert("_sandbox".into(), marker);
    failure("sandbox_unavailable", data).with_data(
        "message",
        "run_code runs programs only inside a sandbox, and this machine has no sandbox backend",
    )
}

/// Runs one program to its end. `nested` runs its tool calls.
pub async fn run(
    settings: &Settings,
    ctx: &ToolContext,
    args: &Map<String, Value>,
    nested: &mut dyn Nested,
) -> ToolResult {
    let started = Instant::now();
    let code = args.get("code").and_then(Value::as_str).unwrap_or_default();
    let description = args
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut data = Map::new();
    data.insert("description".into(), json!(description));
    let n = code.chars().count();
    if n > MAX_SOURCE_CHARS {
        return failure(
            format!(
                "the program is {n} characters; at most {MAX_SOURCE_CHARS}: split the work into several run_code calls"
            ),
            data,
        );
    }
    let sandbox = match marker(settings, ctx).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    data.insert("_sandbox".into(), sandbox);
    let tmp = match PrivateTmp::create() {
        Ok(t) => t,
        Err(e) => return failure(format!("cannot create the program's temp dir: {e}"), data),
    };
    let (driver, program) = (tmp.path().join("driver.py"), tmp.path().join("program.py"));
    if let Err(e) = std::fs::write(&driver, DRIVER).and_then(|_| std::fs::write(&program, code)) {
        return failure(format!("cannot write the program: {e}"), data);
    }
    // The sandbox as bash gets it (the turn's execSandbox), unless the host confines us.
    let mut _protect = None;
    let (launch, launcher, cgroup) = match (settings.confined, crate::sandbox::global()) {
        (false, Some(sb)) => match sb
            .prepare(
                &ctx.workspace_root,
                ctx.exec_sandbox.as_ref(),
                Some(tmp.path()),
                true,
            )
            .await
        {
            Ok(mut p) => {
                _protect = p.guard.take();
                (p.launch, sb.launcher().map(Path::to_path_buf), p.cgroup)
            }
            Err(e) => return failure(format!("the sandbox refused to run the program: {e}"), data),
        },
        _ => (None, None, None),
    };
    let spec = SpawnSpec {
        program: settings.python.clone(),
        args: vec!["-u".into(), "-B".into(), driver.into(), program.into()],
        cwd: ctx.workspace_root.clone(),
        env: Some(allowed_env(tmp.path())),
        extra_env: Vec::new(),
        stdin: Stdin::Piped,
        launch,
        launcher,
        cgroup,
        warm: None,
        terminal: None,
    };
    let Spawned {
        mut child, group, ..
    } = match spawn(spec, ctx.lifecycle.as_deref()).await {
        Ok(s) => s,
        Err(e) => {
            return failure(
                format!("cannot start {}: {e}", settings.python.display()),
                data,
            );
        }
    };
    let (Some(stdout), Some(mut stdin), Some(stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return failure("the program's pipes are missing", data);
    };
    let err_task = tokio::spawn(async move {
        let mut buf = Vec::new();
        let mut r = BufReader::new(stderr);
        let mut chunk = Vec::new();
        while r.read_until(b'\n', &mut chunk).await.is_ok_and(|n| n > 0) {
            if buf.len() < MAX_STDERR_BYTES {
                buf.extend_from_slice(&chunk[..chunk.len().min(MAX_STDERR_BYTES - buf.len())]);
            }
            chunk.clear();
        }
        String::from_utf8_lossy(&buf).into_owned()
    });
    let mut lines = BufReader::new(stdout);
    let mut logs = String::new();
    let mut dropped_log = 0usize;
    let mut calls: Vec<Value> = Vec::new();
    let deadline = tokio::time::Instant::now() + settings.timeout;
    // The whole exchange, nested calls and reply writes included, runs under the program's
    // deadline and the caller's cancel: a stuck tool or a program that stops reading cannot
    // hold the call.
    let exchange = async {
        loop {
            let mut line = Vec::new();
            let got = {
                let mut limited = (&mut lines).take(MAX_LINE_BYTES as u64 + 1);
                limited.read_until(b'\n', &mut line).await
            };
            match got {
                Ok(0) | Err(_) => return Err(exited(&mut child, "without finishing").await),
                Ok(_) if line.len() > MAX_LINE_BYTES => {
                    return Err(format!(
                        "the program flooded stdout (a line over {MAX_LINE_BYTES} bytes); print less"
                    ));
                }
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line);
            match parse(text.trim_end())? {
                Msg::Log(t) => {
                    if logs.len() + t.len() < MAX_LOG_BYTES {
                        logs.push_str(&t);
                        logs.push('\n');
                    } else {
                        dropped_log += t.len() + 1;
                    }
                }
                Msg::Done(r) => return r,
                Msg::Call { id, tool, args } => {
                    let (ok, result, error) = if tool == NAME {
                        (
                            false,
                            Value::Null,
                            "run_code cannot call run_code; do the work in this program"
                                .to_string(),
                        )
                    } else if calls.len() >= MAX_CALLS {
                        (
                            false,
                            Value::Null,
                            format!(
                                "run_code allows at most {MAX_CALLS} tool calls per program; this was call {}. Return what you have and continue in another round",
                                calls.len() + 1
                            ),
                        )
                    } else {
                        let r = nested.call(&tool, args.clone()).await;
                        // Bounded like bash output: the outcome, and the result's text cut.
                        let text = r.model_text();
                        let mut kept: String = text.chars().take(MAX_CALL_RESULT_CHARS).collect();
                        if kept.len() < text.len() {
                            kept.push('…');
                        }
                        let mut summary = json!({"success": r.success, "text": kept});
                        if let Some(e) = &r.error {
                            summary["error"] = json!(e);
                        }
                        calls.push(json!({"tool": tool, "arguments": args, "result": summary}));
                        let v = serde_json::to_value(&r).unwrap_or(Value::Null);
                        (r.success, v, r.error.clone().unwrap_or_default())
                    };
                    let reply = json!({"v": 1, "id": id, "ok": ok, "result": result,
                                       "error": if ok { Value::Null } else { json!(error) }});
                    let mut bytes = reply.to_string().into_bytes();
                    bytes.push(b'\n');
                    if stdin.write_all(&bytes).await.is_err() {
                        return Err(exited(&mut child, "during a tool call").await);
                    }
                }
            }
        }
    };
    let outcome: Result<Value, String> = tokio::select! {
        r = exchange => r,
        _ = tokio::time::sleep_until(deadline) => Err(format!(
            "the program did not finish within run_code_timeout_ms={}; it was stopped with everything it started",
            settings.timeout.as_millis())),
        _ = ctx.cancel.cancelled() => Err("cancelled: the program was stopped with everything it started".into()),
    };
    // The program and anything it started go, whatever happened.
    group.kill();
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
    drop(group);
    let stderr = tokio::time::timeout(Duration::from_millis(200), err_task)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    if dropped_log > 0 {
        logs.push_str(&format!("[{dropped_log} more bytes of output dropped]\n"));
    }
    data.insert("logs".into(), json!(logs));
    data.insert("calls".into(), Value::Array(calls));
    data.insert("durationMs".into(), json!(elapsed_ms(started)));
    match outcome {
        Ok(value) => {
            data.insert("value".into(), value);
            ToolResult::ok(data)
        }
        Err(e) => {
            if !stderr.trim().is_empty() {
                data.insert("stderr".into(), json!(stderr));
            }
            failure(e, data)
        }
    }
}

/// `run_code` on a router: nested calls go straight to that router.
pub struct RunCode {
    settings: Arc<dyn Fn() -> Settings + Send + Sync>,
    router: std::sync::Weak<Router>,
}

impl RunCode {
    pub fn new(settings: Arc<dyn Fn() -> Settings + Send + Sync>, router: &Arc<Router>) -> RunCode {
        RunCode {
            settings,
            router: Arc::downgrade(router),
        }
    }
}

/// The model-facing description and schema, shared with the turn's own `run_code`.
pub const DESCRIPTION: &str = "Run a short Python program whose tool calls happen in this one step: `code` is the body of a function, `return` gives the result (JSON: dicts, lists, strings, numbers, booleans, None). Call tools as tools.read_file(path=\"a.txt\") or tools.call(\"grep\", pattern=\"x\"); each returns the tool's result ({success, data, error}) and raises ToolError when it fails. print() goes to the logs. At most 32 tool calls; only the modules json, math, datetime, re, collections, itertools, functools, decimal, statistics, textwrap, string, unicodedata, html, typing, operator, copy and numbers can be imported. Use it to read, filter and edit many files at once.";

pub fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "The body of a Python function (4-space indented lines are fine); use tools.<name>(...) and return a JSON value."},
            "description": {"type": "string", "description": "One line saying what the program does."}
        },
        "required": ["code", "description"],
        "additionalProperties": false
    })
}

impl Tool for RunCode {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> Value {
        parameters()
    }

    fn mode(&self) -> ToolMode {
        ToolMode::Local
    }

    fn call(self: Arc<Self>, ctx: ToolContext, args: Map<String, Value>) -> ToolFuture {
        Box::pin(async move {
            let Some(router) = self.router.upgrade() else {
                return ToolResult::recoverable("run_code: the tool router is gone");
            };
            let settings = (self.settings)();
            let mut nested = RouterNested {
                router,
                ctx: ctx.clone(),
            };
            run(&settings, &ctx, &args, &mut nested).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_lines_are_read_strictly() {
        assert!(
            matches!(parse(r#"{"v":1,"type":"log","text":"hi"}"#), Ok(Msg::Log(t)) if t == "hi")
        );
        assert!(matches!(
            parse(r#"{"v":1,"type":"call","id":3,"tool":"ls","arguments":{"path":"."}}"#),
            Ok(Msg::Call { id: 3, .. })
        ));
        assert!(matches!(
            parse(r#"{"v":1,"type":"done","ok":true,"value":[1]}"#),
            Ok(Msg::Done(Ok(_)))
        ));
        assert!(
            matches!(parse(r#"{"v":1,"type":"done","ok":false,"error":"E: x"}"#), Ok(Msg::Done(Err(e))) if e == "E: x")
        );
        assert!(parse("garbage").unwrap_err().contains("not protocol JSON"));
        assert!(
            parse(r#"{"type":"weird"}"#)
                .unwrap_err()
                .contains("unknown protocol message")
        );
    }

    #[test]
    fn the_child_environment_is_an_allowlist() {
        let env = allowed_env(Path::new("/tmp/x"));
        let names: Vec<String> = env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert!(names.contains(&"PYTHONDONTWRITEBYTECODE".to_string()));
        assert!(names.contains(&"TMPDIR".to_string()));
        for n in &names {
            assert!(
                !n.contains("KEY") && !n.contains("TOKEN") && !n.starts_with("OUTRIGGER_"),
                "{n} leaked"
            );
        }
    }
}
