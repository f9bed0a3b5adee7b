//! Tool execution for the loop: batches (consecutive concurrency-safe calls together,
//! others alone), `toolTimeoutMs`, cancel and interrupting steers, spill, and the tool
//! messages and `toolResult` chunks.

use std::path::PathBuf;

use futures_util::future::join_all;
use serde_json::{Map, Value, json};

use super::compaction::{self as cx, pick};
use super::notices::{PREVIEW_CHARS, preview};
use super::run::{TOOL_STOP_GRACE, Turn};
use crate::llm::{Message, Role, ToolCall};
use crate::store::ItemKind;
use crate::tools::{ToolContext, ToolResult};

impl Turn {
    /// Closes calls that will not run with a failed tool message each (no dangling calls).
    pub(super) fn skip_all(&mut self, calls: &[ToolCall], why: &str) {
        for c in calls {
            let r = ToolResult {
                success: false,
                error: Some(why.to_string()),
                ..Default::default()
            };
            self.push_result(c, r, None);
        }
    }

    fn spill_dir(&self) -> PathBuf {
        self.app
            .config()
            .home()
            .join("spill")
            .join(&self.emit.stream_id)
    }

    /// Appends the tool message and emits `toolResult`. Returns whether it succeeded.
    fn push_result(&mut self, c: &ToolCall, mut r: ToolResult, round: Option<u64>) -> bool {
        let sandbox = r.data.as_mut().and_then(|d| d.remove("_sandbox"));
        let duration = r.data.as_ref().and_then(|d| d.get("durationMs")).cloned();
        let mut body = Map::new();
        body.insert("success".into(), json!(r.success));
        if let Some(e) = &r.error {
            body.insert("error".into(), json!(e));
        }
        if let Some(d) = &r.data {
            body.insert("data".into(), Value::Object(d.clone()));
        }
        if let Some(m) = &r.message {
            body.insert("message".into(), json!(m));
        }
        let mut content = Value::Object(body).to_string();
        let window = self.p.cfg.window;
        if content.chars().count() > pick(window, cx::SPILL_MAX_INLINE) {
            match cx::spill(
                &content,
                &self.spill_dir(),
                &c.id,
                pick(window, cx::SPILL_PREVIEW),
            ) {
                Ok((inline, path)) => {
                    let mut n = Map::new();
                    n.insert("hook".into(), json!("post_tool_result"));
                    n.insert("action".into(), json!("spill"));
                    n.insert(
                        "reason".into(),
                        json!(format!(
                            "tool output of {} characters spilled",
                            content.chars().count()
                        )),
                    );
                    n.insert("path".into(), json!(path));
                    n.insert("round".into(), json!(round.unwrap_or(self.rounds)));
                    self.notice("hook_action", n);
                    content = inline;
                }
                Err(e) => tracing::warn!("spill failed, keeping the output inline: {e}"),
            }
        }
        let mut chunk = Map::new();
        chunk.insert("id".into(), json!(c.id));
        chunk.insert("name".into(), json!(c.name));
        chunk.insert("success".into(), json!(r.success));
        if let Some(d) = duration {
            chunk.insert("durationMs".into(), d);
        }
        if let Some(e) = &r.error {
            chunk.insert("error".into(), json!(e));
        }
        chunk.insert(
            "resultPreview".into(),
            json!(preview(&content, PREVIEW_CHARS)),
        );
        if let Some(s) = sandbox {
            chunk.insert("sandbox".into(), s);
        }
        let chunk = Value::Object(chunk);
        self.trace
            .event("tool_call_result", &c.name, Some(chunk.clone()));
        if !r.success {
            self.trace.event(
                "tool_error",
                &c.name,
                Some(json!({"id": c.id, "error": r.error})),
            );
        }
        self.emit.tool_result(chunk);
        let mut m = Message::new(Role::Tool, content);
        m.name = Some(c.name.clone());
        m.tool_call_id = Some(c.id.clone());
        self.push(m, ItemKind::Tool);
        r.success
    }

    /// Runs the calls in batches: consecutive concurrency-safe calls together, others alone.
    /// Returns true when the turn was cancelled (every call still gets a tool message).
    pub(super) async fn execute(&mut self, calls: &[ToolCall], round: u64) -> bool {
        let phase = self.handle.begin_tool_phase();
        let mut batches: Vec<Vec<ToolCall>> = Vec::new();
        for c in calls {
            let safe = self
                .app
                .router
                .get(&c.name)
                .is_none_or(|e| e.concurrency_safe);
            match batches.last_mut() {
                Some(b)
                    if safe
                        && b.iter().all(|x| {
                            self.app
                                .router
                                .get(&x.name)
                                .is_none_or(|e| e.concurrency_safe)
                        }) =>
                {
                    b.push(c.clone())
                }
                _ => batches.push(vec![c.clone()]),
            }
        }
        let mut cancelled = false;
        for batch in batches {
            if self.handle.cancel.is_cancelled() {
                cancelled = true;
                self.skip_all(&batch, "not executed: the turn was cancelled");
                continue;
            }
            if phase.is_cancelled() {
                self.skip_all(&batch, "not executed: skipped by a steer message");
                continue;
            }
            let mut spans = Vec::new();
            for c in &batch {
                self.trace.event(
                    "tool_call_start",
                    &c.name,
                    Some(json!({"id": c.id, "name": c.name, "arguments": c.arguments})),
                );
                let mut a = Map::new();
                a.insert("callId".into(), json!(c.id));
                a.insert("round".into(), json!(round));
                spans.push(self.trace.start_span(&c.name, "tool", a));
            }
            self.tool_calls_run += batch.len() as u64;
            let futs = batch.iter().map(|c| self.run_one(c, &phase));
            let results = join_all(futs).await;
            for ((c, r), span) in batch.iter().zip(results).zip(spans) {
                let mut a = Map::new();
                if let Some(e) = &r.error {
                    a.insert("error".into(), json!(e));
                }
                self.trace
                    .end_span(span, if r.success { "ok" } else { "error" }, a);
                if self.push_result(c, r, Some(round)) {
                    self.tool_errors = 0;
                } else {
                    self.tool_errors += 1;
                }
            }
            if let Err(e) = self.flush().await {
                tracing::warn!("{e}");
            }
            if self.handle.cancel.is_cancelled() {
                cancelled = true;
            }
        }
        cancelled
    }

    /// One call under `toolTimeoutMs`, stopped by cancel or an interrupting steer.
    fn run_one(
        &self,
        c: &ToolCall,
        phase: &tokio_util::sync::CancellationToken,
    ) -> impl std::future::Future<Output = ToolResult> + use<> {
        let router = self.app.router.clone();
        let name = c.name.clone();
        let args = c.arguments.clone();
        let bad_args = c.arguments_error.clone();
        let timeout = self.p.cfg.tool_timeout;
        let phase = phase.clone();
        let turn_cancel = self.handle.cancel.clone();
        let ctx = ToolContext {
            workspace_root: self.p.cwd.clone(),
            cancel: phase.child_token(),
            call_id: c.id.clone(),
            session_id: Some(self.session_key()),
            lifecycle: Some(self.app.lifecycle.clone()),
            exec_sandbox: self.p.exec_sandbox.clone(),
        };
        async move {
            if let Some(e) = bad_args {
                return ToolResult::recoverable(format!(
                    "Invalid arguments for tool '{name}': the arguments were not valid JSON ({e}); send a JSON object"
                ));
            }
            let stop = ctx.cancel.clone();
            let fut = router.dispatch(&name, args, ctx);
            tokio::pin!(fut);
            tokio::select! {
                // Cancel first: a tool that stops on the same signal must still read as
                // cancelled/interrupted, not as its own failure.
                biased;
                _ = tokio::time::sleep(timeout) => {
                    stop.cancel();
                    let _ = tokio::time::timeout(TOOL_STOP_GRACE, &mut fut).await;
                    let ms = timeout.as_millis() as u64;
                    ToolResult {
                        success: false,
                        error: Some("tool_timeout".into()),
                        ..Default::default()
                    }
                    .with_data("timeout", true)
                    .with_data("timeoutMs", ms)
                    .with_data("message", format!("tool '{name}' produced no result within toolTimeoutMs={ms}; it was stopped"))
                }
                _ = phase.cancelled() => {
                    let finished = tokio::time::timeout(TOOL_STOP_GRACE, &mut fut).await;
                    let why = if turn_cancel.is_cancelled() { "cancelled" } else { "interrupted by a steer message" };
                    let mut r = finished.unwrap_or_default();
                    r.success = false;
                    if let Some(own) = r.error.replace(why.into()) {
                        r = r.with_data("toolError", own);
                    }
                    r
                }
                r = &mut fut => r,
            }
        }
    }
}
