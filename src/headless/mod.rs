//! `outrigger run`: one agent turn from a shell (docs/headless.md). It is a host of a child
//! sidecar: it sends one `agent.chat.stream`, answers what the sidecar asks of its host by
//! the flags (never by waiting for a person), prints the turn in the chosen format and exits
//! with a code that says how the turn ended.

mod args;
mod output;
pub mod peer;
pub mod sidecar;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::signal::unix::{SignalKind, signal};

pub use args::{ApprovalFlag, Format, Model, ProviderFlags, RunArgs};
use output::Report;
pub use output::clip;
use sidecar::{CallError, Incoming, Sidecar, SpawnOpts};

/// How long a cancelled turn may take to be recorded before the sidecar is killed.
const CANCEL_GRACE: Duration = Duration::from_secs(15);
/// How long the sidecar may take to stop after the turn.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_BUDGET: i32 = 3;

/// The sidecar's error code for something it does not have (docs/protocol.md).
const NOT_FOUND: i64 = -32004;

/// The flags every subcommand shares that the child sidecar must see.
#[derive(Debug, Clone, Default)]
pub struct Globals {
    pub storage_path: Option<PathBuf>,
    pub no_web_tools: bool,
    pub log_level: Option<String>,
}

/// Runs the turn and returns the process's exit code.
pub fn run(args: RunArgs, globals: Globals, config: &crate::config::Config) -> i32 {
    let format = args.output_format;
    let plan = match args.plan(config) {
        Ok(p) => p,
        Err(e) => return usage(format, &e),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return usage(format, &format!("cannot start the runtime: {e}")),
    };
    rt.block_on(drive(plan, globals))
}

/// A run that ends before its turn: the reason on stderr, and the result object in the json
/// formats. Returns `code`.
fn early_end(format: Format, msg: &str, code: i32) -> i32 {
    eprintln!("outrigger run: {msg}");
    if format != Format::Text {
        let mut f = Map::new();
        f.insert("status".into(), json!("failed"));
        f.insert("reason".into(), json!(msg));
        f.insert("exitCode".into(), json!(code));
        Report::new(format, false).finish(f);
    }
    code
}

/// A usage or configuration error (exit 2).
fn usage(format: Format, msg: &str) -> i32 {
    early_end(format, msg, EXIT_USAGE)
}

/// What the flags decide for one `approval.request`.
fn decide(plan: &args::Plan, p: &Value) -> (&'static str, String) {
    let name = p["toolName"].as_str().unwrap_or("");
    if plan.deny.iter().any(|d| d == name) {
        return ("deny_once", format!("refused by --deny {name}"));
    }
    if plan.approval == ApprovalFlag::Deny && !plan.allow.iter().any(|a| a == name) {
        return (
            "deny_once",
            format!("refused by --approval deny (allow it with --allow {name})"),
        );
    }
    ("allow_once", "allowed by the run's flags".into())
}

/// The names in a `tool.list` answer (a list of descriptors).
fn tool_names(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name")?.as_str().map(str::to_string))
        .collect()
}

/// Checks `--allow` / `--deny` names against the sidecar's tools and the per-turn ones.
async fn check_names(sc: &Sidecar, plan: &args::Plan) -> Result<(), Early> {
    if plan.allow.is_empty() && plan.deny.is_empty() {
        return Ok(());
    }
    let list = sc.request("tool.list", json!({})).await?;
    let mut known = tool_names(&list);
    known.extend(
        crate::agent::params::LOCAL_TOOLS
            .iter()
            .map(|s| s.to_string()),
    );
    for (flag, names) in [("--allow", &plan.allow), ("--deny", &plan.deny)] {
        for n in names {
            if !known.contains(n) && !n.starts_with("mcp__") {
                known.sort();
                known.dedup();
                return Err(Early::Refused(format!(
                    "{flag} {n}: no such tool; the tools are {}",
                    known.join(", ")
                )));
            }
        }
    }
    Ok(())
}

/// Why the run could not start the turn.
enum Early {
    /// The sidecar exited (it said why on stderr).
    Closed,
    Refused(String),
}

impl From<CallError> for Early {
    fn from(e: CallError) -> Early {
        match e {
            CallError::Closed => Early::Closed,
            e => Early::Refused(e.to_string()),
        }
    }
}

/// Which record the turn continues: `--resume` must exist, `--session` may.
async fn seed(
    sc: &Sidecar,
    plan: &args::Plan,
    params: &mut Map<String, Value>,
) -> Result<(), Early> {
    let (record, must) = match (&plan.resume, &plan.session) {
        (Some(r), _) => (r.clone(), true),
        (None, Some(s)) => (s.clone(), false),
        (None, None) => {
            let id = format!("run_{}", crate::store::ids::random_hex(16));
            params.insert("chatId".into(), json!(id));
            return Ok(());
        }
    };
    let exists = match sc
        .request("agent.session.messages", json!({"recordId": record}))
        .await
    {
        Ok(got) => got["messages"].as_array().is_some_and(|m| !m.is_empty()),
        Err(CallError::Rpc {
            code: NOT_FOUND,
            message,
            ..
        }) if message.starts_with("record not found") => false,
        Err(e) => return Err(e.into()),
    };
    if must && !exists {
        return Err(Early::Refused(format!(
            "record not found: {record} (a previous run's recordId; check --storage-path / OUTRIGGER_HOME)"
        )));
    }
    if plan.resume.is_some() {
        params.insert("recordId".into(), json!(record));
    } else {
        params.insert("chatId".into(), json!(record));
    }
    if exists {
        params.insert("fromRecord".into(), json!(true));
    }
    Ok(())
}

/// Why the run stopped early, if it did.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Signal(i32),
    Timeout,
}

async fn drive(plan: args::Plan, globals: Globals) -> i32 {
    let format = plan.format;
    // First: a signal that comes once anything is printed must find the handlers in place.
    let (Ok(mut sigint), Ok(mut sigterm)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return usage(format, "cannot install the signal handlers");
    };
    let opts = SpawnOpts {
        storage_path: globals.storage_path,
        no_web_tools: globals.no_web_tools,
        log_level: globals.log_level.unwrap_or_else(|| "WARNING".into()),
    };
    let (sc, mut incoming) = match Sidecar::spawn(&opts) {
        Ok(s) => s,
        Err(e) => return usage(format, &format!("cannot start the sidecar: {e}")),
    };
    let mut params = match plan.params.clone() {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    params.insert(
        "messages".into(),
        json!([{"role": "user", "content": plan.prompt}]),
    );
    let prepared = async {
        check_names(&sc, &plan).await?;
        seed(&sc, &plan, &mut params).await
    };
    if let Err(e) = prepared.await {
        return startup_failure(&sc, format, e).await;
    }
    let started = Instant::now();
    let start = match sc
        .request("agent.chat.stream", Value::Object(params.clone()))
        .await
    {
        Ok(s) => s,
        Err(e) => return startup_failure(&sc, format, e.into()).await,
    };
    let stream_id = start["streamId"].as_str().unwrap_or("").to_string();
    let record_id = start["recordId"]
        .as_str()
        .or_else(|| params.get("recordId").and_then(Value::as_str))
        .or_else(|| params.get("chatId").and_then(Value::as_str))
        .unwrap_or(&stream_id)
        .to_string();
    let session_id = params
        .get("chatId")
        .and_then(Value::as_str)
        .unwrap_or(&record_id)
        .to_string();
    let mut report = Report::new(format, plan.verbose);
    let mut ids = Map::new();
    ids.insert("streamId".into(), json!(stream_id));
    ids.insert("recordId".into(), json!(record_id));
    ids.insert("sessionId".into(), json!(session_id));
    let mut start_fields = ids.clone();
    start_fields.insert("cwd".into(), json!(plan.cwd));
    start_fields.insert("provider".into(), json!(plan.provider));
    start_fields.insert("model".into(), json!(plan.model));
    report.start(start_fields);

    let deadline = plan.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut stop: Option<Stop> = None;
    let mut give_up: Option<tokio::time::Instant> = None;
    let mut done: Option<Value> = None;
    let cancel = |sc: &Arc<Sidecar>| {
        let sc = Arc::clone(sc);
        let id = stream_id.clone();
        tokio::spawn(async move {
            let _ = sc
                .request("agent.chat.cancel", json!({"streamId": id}))
                .await;
        });
    };
    loop {
        let timer = async {
            match (stop, deadline, give_up) {
                (_, _, Some(g)) => tokio::time::sleep_until(g).await,
                (None, Some(d), None) => tokio::time::sleep_until(d).await,
                _ => std::future::pending::<()>().await,
            }
        };
        let signalled = tokio::select! {
            msg = incoming.recv() => {
                let Some(msg) = msg else { break };
                match msg {
                    Incoming::Notification { method, params } => match method.as_str() {
                        "stream.chunk" if params["streamId"] == stream_id => {
                            if let Value::Object(c) = params {
                                report.chunk(c);
                            }
                        }
                        "stream.error" if params["streamId"] == stream_id => {
                            report.stream_error(params);
                        }
                        "stream.done" if params["streamId"] == stream_id => {
                            done = Some(params);
                            break;
                        }
                        _ => {}
                    },
                    Incoming::Request { id, method, params } => {
                        answer(&sc, &plan, &mut report, id, &method, &params).await;
                    }
                }
                None
            }
            _ = sigint.recv() => Some(Stop::Signal(130)),
            _ = sigterm.recv() => Some(Stop::Signal(143)),
            () = timer => {
                if give_up.is_some() {
                    // The cancelled turn was not recorded in time: stop everything.
                    sc.kill_group();
                    break;
                }
                Some(Stop::Timeout)
            }
        };
        if let Some(why) = signalled {
            if stop.is_some() {
                // A second signal: stop at once.
                sc.kill_group();
                stop = Some(why);
                break;
            }
            stop = Some(why);
            give_up = Some(tokio::time::Instant::now() + CANCEL_GRACE);
            cancel(&sc);
        }
    }
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut fields = Map::new();
    let code = match &done {
        Some(d) => {
            let status = d["status"].as_str().unwrap_or("failed").to_string();
            let (status, code) = match (status.as_str(), stop) {
                ("completed", _) => (status, EXIT_OK),
                ("budget_exhausted", _) => (status, EXIT_BUDGET),
                (_, Some(Stop::Timeout)) => ("timeout".to_string(), EXIT_FAILED),
                (_, Some(Stop::Signal(n))) => ("cancelled".to_string(), n),
                _ => (status, EXIT_FAILED),
            };
            fields.insert("status".into(), json!(status));
            let reason = match stop {
                Some(Stop::Timeout) => json!(format!(
                    "timeout: the turn ran past --timeout ({} s)",
                    plan.timeout.map_or(0.0, |t| t.as_secs_f64())
                )),
                _ => d["reason"].clone(),
            };
            fields.insert("reason".into(), reason);
            fields.insert("exitCode".into(), json!(code));
            fields.insert("usage".into(), d["usage"].clone());
            fields.extend(ids.clone());
            if let Some(t) = d.get("traceId") {
                fields.insert("traceId".into(), t.clone());
            }
            if let Some(r) = d.get("recordId").filter(|r| r.is_string()) {
                fields.insert("recordId".into(), r.clone());
            }
            code
        }
        None => {
            // No stream.done: killed after a second signal, or the sidecar died.
            let code = match stop {
                Some(Stop::Signal(n)) => n,
                _ => EXIT_FAILED,
            };
            let (status, reason) = match stop {
                Some(Stop::Signal(_)) => (
                    "cancelled",
                    "interrupted; the sidecar was stopped before it recorded the end of the turn"
                        .to_string(),
                ),
                Some(Stop::Timeout) => (
                    "timeout",
                    "timeout: the cancelled turn was not recorded in time; the sidecar was stopped"
                        .to_string(),
                ),
                None => {
                    let status = sc.wait().await;
                    (
                        "failed",
                        format!(
                            "the sidecar exited during the turn ({})",
                            status.map_or("unknown status".into(), |s| s.to_string())
                        ),
                    )
                }
            };
            fields.insert("status".into(), json!(status));
            fields.insert("reason".into(), json!(reason));
            fields.insert("exitCode".into(), json!(code));
            fields.extend(ids.clone());
            code
        }
    };
    fields.insert("durationMs".into(), json!(duration_ms));
    if format == Format::Text {
        say_how_it_ended(&fields, &report);
    }
    report.finish(fields);
    sc.shutdown(SHUTDOWN_GRACE).await;
    code
}

/// Text format: stdout has only the answer, so stderr says why a turn did not complete.
fn say_how_it_ended(fields: &Map<String, Value>, report: &Report) {
    let status = fields["status"].as_str().unwrap_or("");
    let reason = fields["reason"].as_str().unwrap_or("");
    let record = fields.get("recordId").and_then(Value::as_str).unwrap_or("");
    match status {
        "completed" => {}
        "cancelled" => {
            eprintln!("outrigger run: interrupted; continue with --resume {record}");
        }
        "budget_exhausted" => eprintln!("outrigger run: stopped: {reason}"),
        _ => match &report.error {
            Some(e) => eprintln!(
                "outrigger run: failed: {}: {}",
                e["kind"].as_str().unwrap_or(""),
                e["message"].as_str().unwrap_or("")
            ),
            None => eprintln!("outrigger run: {status}: {reason}"),
        },
    }
}

/// A failure before the turn started: a refused request, or the sidecar gone (its own exit
/// code wins: it exits 2 on a configuration error or a held store).
async fn startup_failure(sc: &Sidecar, format: Format, e: Early) -> i32 {
    let Early::Refused(msg) = e else {
        let status = tokio::time::timeout(SHUTDOWN_GRACE, sc.wait())
            .await
            .ok()
            .flatten();
        let code = status.and_then(|s| s.code()).unwrap_or(EXIT_FAILED);
        let msg =
            format!("the sidecar exited before the turn started (exit {code}); its error is above");
        let code = if code == EXIT_USAGE {
            EXIT_USAGE
        } else {
            EXIT_FAILED
        };
        return early_end(format, &msg, code);
    };
    let code = usage(format, &msg);
    sc.shutdown(SHUTDOWN_GRACE).await;
    code
}

/// Answers one reverse request from the sidecar by policy.
async fn answer(
    sc: &Sidecar,
    plan: &args::Plan,
    report: &mut Report,
    id: Value,
    method: &str,
    p: &Value,
) {
    match method {
        "approval.request" => {
            let (kind, reason) = decide(plan, p);
            report.approval(json!({
                "id": p["callId"],
                "name": p["toolName"],
                "category": p["category"],
                "decision": kind,
                "reason": reason,
            }));
            sc.respond(id, json!({"kind": kind, "reason": reason}))
                .await;
        }
        // Not offered headless; answered empty should a caller offer it anyway.
        "ask_user.request" => sc.respond(id, json!({"answers": {}})).await,
        _ => {
            sc.respond_error(
                id,
                -32601,
                &format!("outrigger run does not handle {method}"),
            )
            .await;
        }
    }
}
