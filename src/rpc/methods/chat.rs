//! `agent.chat.stream` / `cancel` / `steer` / `compact` / `fork`: validate, prepare the
//! starting transcript, answer `{streamId}` at once, then run the CoreLoop as tracked work
//! and finish with exactly one `stream.done`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent::notices::Emitter;
use crate::agent::params::{self, ChatParams, Method};
use crate::agent::persist;
use crate::agent::run::{Completion, Status, Turn};
use crate::agent::seed::{self, Start};
use crate::agent::stream::StreamHandle;
use crate::app::App;
use crate::llm::{LlmSettings, Message, Role, Usage};
use crate::rpc::dispatch::Call;
use crate::rpc::error::{ErrorKind, Outcome, RpcError, reply, reply_null};
use crate::store::{CutPoint, ForkRequest};

/// After a cancel, a turn that has not wound down within this long is dropped (hard stop).
pub const CANCEL_WATCHDOG: Duration = Duration::from_secs(5);

/// Runs a turn; once `cancel` fires, the turn gets `after` to wind down cooperatively and is
/// then dropped (its tools' process groups die with their guards) and reported cancelled.
async fn with_watchdog(
    run: impl std::future::Future<Output = Completion>,
    cancel: tokio_util::sync::CancellationToken,
    after: Duration,
) -> Completion {
    tokio::pin!(run);
    tokio::select! {
        c = &mut run => c,
        _ = async { cancel.cancelled().await; tokio::time::sleep(after).await } => Completion {
            status: Status::Cancelled,
            reason: format!(
                "cancelled by host request (the turn did not wind down within {} s and was stopped)",
                after.as_secs_f64()
            ),
        },
    }
}

pub async fn stream(app: Arc<App>, call: Call) -> Outcome {
    start(app, call, Method::Stream).await
}

pub async fn fork(app: Arc<App>, call: Call) -> Outcome {
    start(app, call, Method::Fork).await
}

fn storage(e: String) -> RpcError {
    RpcError::new(ErrorKind::Storage, e)
}

/// The record a turn appends to: a fork's new record, else `recordId`, `chatId`, the stream id.
fn record_for(p: &ChatParams, method: Method) -> String {
    match method {
        Method::Fork => format!(
            "{}:fork:{}",
            p.record_id.as_deref().unwrap_or_default(),
            p.stream_id
        ),
        Method::Stream => p
            .record_id
            .clone()
            .or_else(|| p.chat_id.clone())
            .unwrap_or_else(|| p.stream_id.clone()),
    }
}

/// The starting transcript, with store checks that must fail before the reply.
async fn prepare(
    app: &Arc<App>,
    p: &mut ChatParams,
    method: Method,
) -> Result<(String, Start, Option<usize>), RpcError> {
    let store = &app.store;
    if method == Method::Fork {
        let source = p.record_id.clone().unwrap_or_default();
        let new_id = record_for(p, method);
        let req = ForkRequest {
            source: source.clone(),
            cut: p.fork_until_seq.map_or(CutPoint::Whole, CutPoint::UntilSeq),
            new_record_id: Some(new_id.clone()),
            label: None,
        };
        persist::call(store, move |s| s.fork(&req))
            .await
            .map_err(|e| {
                if e.contains("not found") {
                    RpcError::new(ErrorKind::NotFound, e)
                } else {
                    RpcError::invalid_params(e)
                }
            })?;
        let projected = persist::projection(store, &new_id)
            .await
            .map_err(storage)?
            .unwrap_or_default();
        let Start {
            mut items,
            persisted,
        } = seed::resume(&projected, p.system_prompt.as_deref());
        items.extend(std::mem::take(&mut p.messages));
        let count = items.len();
        return Ok((new_id, Start { items, persisted }, Some(count)));
    }
    let record = record_for(p, method);
    if p.resume {
        let projected = persist::projection(store, &record).await.map_err(storage)?;
        let projected = projected.filter(|v| !v.is_empty()).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "record {record} has no history to resume; start it with messages instead"
            ))
        })?;
        let start = seed::resume(&projected, p.system_prompt.as_deref());
        return Ok((record, start, None));
    }
    let mut host = Vec::with_capacity(p.messages.len() + 1);
    if let Some(sp) = &p.system_prompt {
        host.push(Message::new(Role::System, sp.clone()));
    }
    host.extend(std::mem::take(&mut p.messages));
    let start = seed::reconcile(store, &record, host)
        .await
        .map_err(storage)?;
    Ok((record, start, None))
}

async fn start(app: Arc<App>, call: Call, method: Method) -> Outcome {
    let settings = LlmSettings::from_settings(&app.settings());
    let mut p = params::parse(&call.params, settings, method).map_err(RpcError::invalid_params)?;
    // Registered before the store is touched: a second turn on the same record (or stream
    // id) is refused before it can write anything.
    let record_id = record_for(&p, method);
    let shutdown = app.lifecycle.token();
    let handle = Arc::new(StreamHandle::new(
        p.stream_id.clone(),
        record_id,
        shutdown.child_token(),
        p.cfg.steer_mode,
    ));
    app.agent
        .streams
        .insert(handle.clone())
        .map_err(RpcError::invalid_params)?;
    let (record_id, start, seed_count) = match prepare(&app, &mut p, method).await {
        Ok(v) => v,
        Err(e) => {
            app.agent.streams.remove(&p.stream_id);
            return Err(e);
        }
    };
    if p.resume {
        reseed_read_state(&app, &p, &record_id, &start.items);
    }
    let stream_id = p.stream_id.clone();
    let emit = Emitter::new(app.out.clone(), stream_id.clone());
    let trace = app.agent.traces.start(
        &stream_id,
        p.chat_id.clone(),
        p.session_id.clone(),
        &p.model,
    );
    trace.event(
        "stage_start",
        "coreloop.run",
        Some(json!({"recordId": record_id, "resume": p.resume})),
    );
    let totals = Arc::new(Mutex::new(Usage::default()));
    let pricing = p.pricing;
    let turn = Turn::new(
        app.clone(),
        p,
        handle.clone(),
        emit.clone(),
        trace.clone(),
        record_id.clone(),
        start.items,
        start.persisted,
        totals.clone(),
    );
    let answer = match seed_count {
        Some(n) => json!({"streamId": stream_id, "seedMessages": n, "recordId": record_id}),
        None => json!({"streamId": stream_id}),
    };
    call.reply_now(reply(&answer));
    let app2 = app.clone();
    app.lifecycle.spawn(async move {
        let c = with_watchdog(turn.run(), handle.cancel.clone(), CANCEL_WATCHDOG).await;
        let mut reason = c.reason;
        if c.status == Status::Cancelled && shutdown.is_cancelled() {
            reason = "cancelled by shutdown".into();
        }
        let failed = c.status == Status::Failed;
        trace.event(
            "completion",
            "completion",
            Some(json!({"status": c.status.as_str(), "reason": reason})),
        );
        trace.finish(c.status.as_str(), failed.then(|| reason.clone()));
        // Persist before done so a host holding the done's traceId can fetch it even after
        // a restart. A failed write only costs the trace, never the stream.
        let row = trace.to_row(&record_id);
        if let Err(e) = persist::call(&app2.store, move |s| s.put_trace(&row)).await {
            tracing::warn!("trace {}: cannot persist it: {e}", trace.id);
        }
        if failed {
            emit.error("LoopError", &reason, &trace.id);
        }
        let u = *totals.lock().unwrap_or_else(|e| e.into_inner());
        let mut usage = json!({
            "promptTokens": u.prompt, "completionTokens": u.completion,
            "totalTokens": u.total, "cachedPromptTokens": u.cached,
        });
        if let Some(pr) = pricing {
            let uncached = u.prompt.saturating_sub(u.cached) as f64;
            let cached_rate = pr.cached_per_mtok.unwrap_or(pr.prompt_per_mtok);
            let cost = (uncached * pr.prompt_per_mtok
                + u.cached as f64 * cached_rate
                + u.completion as f64 * pr.completion_per_mtok)
                / 1_000_000.0;
            usage["costUsd"] = json!(cost);
        }
        let mut done = json!({
            "streamId": emit.stream_id, "ok": c.status == Status::Completed,
            "status": c.status.as_str(), "reason": reason, "traceId": trace.id,
            "recordId": record_id, "usage": usage,
        });
        if c.status == Status::Cancelled {
            done["cancelled"] = json!(true);
        }
        // Unregister before done: a host reacting to done sees the stream as gone.
        app2.agent.streams.remove(&emit.stream_id);
        emit.done(done);
    });
    reply(&answer)
}

/// Resume rebuilds the file tools' read-before-write evidence from the record.
fn reseed_read_state(app: &Arc<App>, p: &ChatParams, record_id: &str, items: &[Message]) {
    let fs = &app.fs;
    let pairs = seed::read_state(items);
    if pairs.is_empty() {
        return;
    }
    let session = p
        .session_id
        .clone()
        .unwrap_or_else(|| record_id.to_string());
    let settings = fs.settings();
    match crate::tools::fs::paths::Workspace::new(&p.cwd, &settings) {
        Ok(ws) => {
            let n = fs.state.seed_relative(Some(&session), &ws, &pairs);
            tracing::debug!("resume {record_id}: re-seeded read state for {n} file(s)");
        }
        Err(e) => tracing::warn!("resume {record_id}: cannot re-seed the read state: {e}"),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StreamRef {
    stream_id: String,
}

pub async fn cancel(app: Arc<App>, call: Call) -> Outcome {
    let p: StreamRef = call.params()?;
    // Unknown or finished streams answer null, as the reference does.
    if let Some(h) = app.agent.streams.get(&p.stream_id) {
        h.cancel.cancel();
    }
    reply_null()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SteerParams {
    stream_id: String,
    content: String,
    #[serde(default)]
    exec_policy: Option<Value>,
}

pub async fn steer(app: Arc<App>, call: Call) -> Outcome {
    let p: SteerParams = call.params()?;
    if p.content.trim().is_empty() {
        return Err(RpcError::invalid_params(
            "content must not be blank: send the message to steer with",
        ));
    }
    if p.exec_policy.is_some_and(|v| !v.is_null()) {
        return Err(RpcError::invalid_params(
            "execPolicy is not supported by this sidecar (approval decisions come from approval.request); remove it",
        ));
    }
    match app.agent.streams.get(&p.stream_id) {
        Some(h) if !h.cancel.is_cancelled() => {
            h.steer(p.content);
            reply(&json!({"accepted": true}))
        }
        _ => reply(&json!({"accepted": false, "reason": "stream_not_active"})),
    }
}

pub async fn compact(app: Arc<App>, call: Call) -> Outcome {
    let p: StreamRef = call.params()?;
    match app.agent.streams.get(&p.stream_id) {
        Some(h) if !h.cancel.is_cancelled() => {
            h.request_compact();
            reply(&json!({"ok": true}))
        }
        _ => reply(&json!({"ok": false, "reason": "stream_not_active"})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn watchdog_hard_stops_a_wedged_turn() {
        let cancel = tokio_util::sync::CancellationToken::new();
        let wedged = std::future::pending::<Completion>();
        let c2 = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            c2.cancel();
        });
        let c = with_watchdog(wedged, cancel, Duration::from_millis(50)).await;
        assert_eq!(c.status, Status::Cancelled);
        assert!(c.reason.contains("did not wind down"), "{}", c.reason);
    }

    #[tokio::test]
    async fn a_turn_that_finishes_is_not_touched() {
        let cancel = tokio_util::sync::CancellationToken::new();
        let done = async {
            Completion {
                status: Status::Completed,
                reason: "ok".into(),
            }
        };
        let c = with_watchdog(done, cancel, Duration::from_millis(1)).await;
        assert_eq!(c.status, Status::Completed);
    }
}
