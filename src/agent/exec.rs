//! Tool execution for the loop: batches (consecutive concurrency-safe calls together,
//! others alone), `toolTimeoutMs`, cancel and interrupting steers, spill, and the tool
//! messages and `toolResult` chunks.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::compaction::{self as cx, pick};
use super::delegate;
use super::host_tools::{self, HostTool, HostTools};
use super::notices::Emitter;
use super::notices::{PREVIEW_CHARS, preview};
use super::orchestrate;
use super::params::LOCAL_TOOLS;
use super::run::{TOOL_STOP_GRACE, Turn};
use super::subagent;
use crate::host::HostLink;
use crate::llm::{Message, Role, ToolCall};
use crate::protocol::host::{AskUserRequest, ToolInvokeRequest};
use crate::store::ItemKind;
use crate::tools::router::{args_object, elapsed_ms};
use crate::tools::{ToolContext, ToolMode, ToolResult, ask_user, run_code, todo};

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

    /// Takes a result's encoded image (`view_image`): stored once under the store's
    /// `images/`, queued for the model when it takes images, and described for the stream
    /// chunk (`{mediaType, width, height}`).
    fn take_images(&mut self, c: &ToolCall, r: &mut ToolResult, images: Value) -> Option<Value> {
        let list = match images {
            Value::Array(a) => a,
            one => vec![one],
        };
        let mut first = None;
        for image in list {
            let shown = self.take_image(c, r, image);
            first = first.or(shown);
        }
        first
    }

    fn take_image(&mut self, c: &ToolCall, r: &mut ToolResult, image: Value) -> Option<Value> {
        let media = image["mediaType"]
            .as_str()
            .unwrap_or("image/png")
            .to_string();
        let data = image["data"].as_str()?;
        let mut shown = json!({
            "mediaType": media,
            "width": image["width"],
            "height": image["height"],
        });
        let stored = if self.p.image_input {
            super::images::store(&self.agent.images_dir(), &media, data).map_err(|e| {
                tracing::warn!("{}: cannot store the image: {e}", c.name);
                format!("The image could not be stored ({e}), so it was not shown.")
            })
        } else {
            Err(format!(
                "The model {} does not take image input, so the image was not shown to it.",
                self.p.model
            ))
        };
        r.data
            .get_or_insert_with(Map::new)
            .insert("imageSent".into(), json!(stored.is_ok()));
        let url = match stored {
            Ok(url) => url,
            Err(why) => {
                r.message = Some(why);
                return Some(shown);
            }
        };
        shown["url"] = json!(url);
        let at = match r
            .data
            .as_ref()
            .and_then(|d| d.get("path"))
            .and_then(Value::as_str)
        {
            Some(path) => format!("{path}, "),
            None => String::new(),
        };
        let text = format!(
            "Image from {} call {} ({at}{}x{}):",
            c.name, c.id, image["width"], image["height"]
        );
        self.images.push(crate::llm::types::Part {
            kind: "text".into(),
            text: Some(text),
            url: None,
            data: None,
            media_type: None,
        });
        self.images.push(crate::llm::types::Part {
            kind: "image".into(),
            text: None,
            url: Some(url),
            data: Some(data.to_string()),
            media_type: Some(media),
        });
        Some(shown)
    }

    /// The round's images as one user message after its tool messages.
    fn push_images(&mut self) {
        if self.images.is_empty() {
            return;
        }
        let mut m = Message::new(Role::User, "");
        m.parts = std::mem::take(&mut self.images);
        self.push(m, ItemKind::User);
    }

    fn spill_dir(&self) -> PathBuf {
        self.agent
            .config
            .get()
            .home()
            .join("spill")
            .join(&self.emit.stream_id)
    }

    /// Appends the tool message and emits `toolResult`. Returns whether it succeeded.
    fn push_result(&mut self, c: &ToolCall, mut r: ToolResult, round: Option<u64>) -> bool {
        if c.name == todo::NAME
            && r.success
            && let Some(list) = r.data.as_ref().and_then(todo::from_result_data)
        {
            self.todos = list;
            let mut n = Map::new();
            n.insert("todos".into(), json!(self.todos));
            self.notice("todos", n);
        }
        // What a sub-agent spent counts against this turn's token budget.
        if (c.name == subagent::NAME || c.name == orchestrate::WAIT)
            && let Some(u) = r.data.as_ref().and_then(|d| d.get("usage"))
        {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            self.charge_budget(n("totalTokens"), n("cachedPromptTokens"));
        }
        let sandbox = r.data.as_mut().and_then(|d| d.remove("_sandbox"));
        let image = r
            .data
            .as_mut()
            .and_then(|d| d.remove(crate::tools::fs::image::IMAGE_KEY))
            .and_then(|i| self.take_images(c, &mut r, i));
        let duration = r.data.as_ref().and_then(|d| d.get("durationMs")).cloned();
        let mut content = r.model_text();
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
        if let Some(i) = image {
            chunk.insert("image".into(), i);
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

    /// Where a call runs: the sidecar's router, the host (`tool.invoke`), or `ask_user`.
    fn route(&self, name: &str) -> Route {
        if let Some(allowed) = &self.p.tool_filter
            && !allowed.iter().any(|a| a == name)
        {
            return Route::NotDelegated;
        }
        if name == subagent::NAME && self.p.subagent.is_some() {
            return Route::Delegate;
        }
        if let Some(o) = &self.p.orchestration
            && orchestrate::NAMES.contains(&name)
        {
            return Route::Orchestrate(o.clone());
        }
        if name == ask_user::NAME && self.p.ask_user {
            return Route::AskUser;
        }
        if name == run_code::NAME && self.router().get(run_code::NAME).is_some() {
            return Route::RunCode;
        }
        match &self.p.host_tools {
            Some(h) if !LOCAL_TOOLS.contains(&name) => match h.get(name) {
                Some(t) => Route::Host(t.clone()),
                None => Route::UnknownHost,
            },
            _ => Route::Local,
        }
    }

    /// The call's mode, when the tool is known.
    pub(super) fn mode_of(&self, name: &str) -> Option<ToolMode> {
        match self.route(name) {
            Route::Local | Route::RunCode => self.router().get(name).map(|e| e.mode),
            Route::Host(t) => Some(t.mode),
            Route::UnknownHost
            | Route::AskUser
            | Route::Delegate
            | Route::NotDelegated
            | Route::Orchestrate(_) => None,
        }
    }

    /// Whether the call may run beside its neighbours: read-only tools, and delegations
    /// to a `concurrent` profile.
    fn concurrency_safe(&self, c: &ToolCall) -> bool {
        match self.route(&c.name) {
            Route::Local => self
                .router()
                .get(&c.name)
                .is_none_or(|e| e.concurrency_safe),
            Route::Host(t) => t.mode == ToolMode::Read,
            Route::UnknownHost | Route::NotDelegated => true,
            Route::AskUser => false,
            Route::Delegate => self
                .p
                .subagent
                .as_ref()
                .is_some_and(|s| s.concurrent(&c.arguments)),
            Route::Orchestrate(_) => c.name == orchestrate::LIST,
            Route::RunCode => false,
        }
    }

    /// Runs the calls in batches: consecutive concurrency-safe calls together, others alone.
    /// Every call gets a tool message, whatever happens.
    pub(super) async fn execute(&mut self, calls: &[ToolCall], round: u64) -> ExecEnd {
        let phase = self.handle.begin_tool_phase();
        let mut batches: Vec<Vec<ToolCall>> = Vec::new();
        for c in calls {
            let safe = self.concurrency_safe(c);
            match batches.last_mut() {
                Some(b) if safe && b.iter().all(|x| self.concurrency_safe(x)) => b.push(c.clone()),
                _ => batches.push(vec![c.clone()]),
            }
        }
        let mut end = ExecEnd::Done;
        for batch in batches {
            // The earlier batches' results are in the record before this one's tools run;
            // the last batch's are the caller's to commit (beside the next request).
            if let Err(e) = self.flush().await {
                tracing::warn!("{e}");
            }
            if end == ExecEnd::Aborted {
                self.skip_all(&batch, "not executed: the host aborted the turn");
                continue;
            }
            if self.handle.cancel.is_cancelled() {
                end = ExecEnd::Cancelled;
                self.skip_all(&batch, "not executed: the turn was cancelled");
                continue;
            }
            if phase.is_cancelled() {
                self.skip_all(&batch, "not executed: skipped by a steer message");
                continue;
            }
            // Approvals first, one at a time: a person answers them in order.
            let mut plans = Vec::with_capacity(batch.len());
            for c in &batch {
                if end == ExecEnd::Aborted {
                    plans.push(Plan::Skip("not executed: the host aborted the turn"));
                    continue;
                }
                match self.approve(c, round).await {
                    Approval::Run(args) => {
                        let mut c = c.clone();
                        if let Some(a) = args {
                            c.arguments = Value::Object(a);
                        }
                        plans.push(Plan::Run(c));
                    }
                    Approval::Denied(r) => plans.push(Plan::Done(r)),
                    Approval::Abort => {
                        end = ExecEnd::Aborted;
                        plans.push(Plan::Skip("not executed: the host aborted the turn"));
                    }
                }
            }
            let mut spans = Vec::new();
            let mut futs = Vec::new();
            for p in &plans {
                let Plan::Run(c) = p else { continue };
                self.trace.event(
                    "tool_call_start",
                    &c.name,
                    Some(json!({"id": c.id, "name": c.name, "arguments": c.arguments})),
                );
                let mut a = Map::new();
                a.insert("callId".into(), json!(c.id));
                a.insert("round".into(), json!(round));
                spans.push(self.trace.start_span(&c.name, "tool", a));
                futs.push(self.run_one(c, &phase, round));
            }
            self.tool_calls_run += futs.len() as u64;
            let mut results = join_all(futs).await.into_iter().zip(spans);
            for (c, p) in batch.iter().zip(plans) {
                let r = match p {
                    Plan::Run(_) => {
                        let Some((r, span)) = results.next() else {
                            continue;
                        };
                        let mut a = Map::new();
                        if let Some(e) = &r.error {
                            a.insert("error".into(), json!(e));
                        }
                        self.trace
                            .end_span(span, if r.success { "ok" } else { "error" }, a);
                        r
                    }
                    Plan::Done(r) => r,
                    Plan::Skip(why) => {
                        self.skip_all(std::slice::from_ref(c), why);
                        continue;
                    }
                };
                if self.push_result(c, r, Some(round)) {
                    self.tool_errors = 0;
                } else {
                    self.tool_errors += 1;
                }
            }
            self.push_images();
            if end != ExecEnd::Aborted && self.handle.cancel.is_cancelled() {
                end = ExecEnd::Cancelled;
            }
        }
        end
    }

    /// What `toolContext` plus the turn's identity look like to the host.
    pub(super) fn host_context(&self, round: u64) -> Map<String, Value> {
        let mut ctx = self.p.tool_context.clone();
        if let Some(chat) = &self.p.chat_id {
            ctx.insert("chatId".into(), json!(chat));
        }
        ctx.insert("streamId".into(), json!(self.emit.stream_id));
        ctx.insert("recordId".into(), json!(self.record_id));
        ctx.insert("round".into(), json!(round));
        ctx
    }

    /// The failure for a call of a tool the host did not offer, listing what it did offer.
    fn unknown_host_tool(&self, name: &str) -> ToolResult {
        let mut listed: Vec<&str> = self
            .p
            .host_tools
            .iter()
            .flat_map(|h| h.tools.iter().map(|t| t.name.as_str()))
            .collect();
        listed.extend(LOCAL_TOOLS);
        ToolResult::recoverable(format!(
            "Unknown tool: {name}. Available tools: {}",
            listed.join(", ")
        ))
        .with_data("unknownTool", name)
    }

    /// One call under `toolTimeoutMs`, stopped by cancel or an interrupting steer.
    fn run_one(
        &self,
        c: &ToolCall,
        phase: &tokio_util::sync::CancellationToken,
        round: u64,
    ) -> impl std::future::Future<Output = ToolResult> + use<> {
        let router = self.router().clone();
        let host = self.host.clone();
        let name = c.name.clone();
        let id = c.id.clone();
        let args = c.arguments.clone();
        let bad_args = c.arguments_error.clone();
        let timeout = self.p.cfg.tool_timeout;
        let phase = phase.clone();
        let turn_cancel = self.handle.cancel.clone();
        let route = self.route(&c.name);
        let host_context = self.host_context(round);
        // Only a call the host does not offer needs the list of names, for its error.
        let unknown = matches!(route, Route::UnknownHost).then(|| self.unknown_host_tool(&c.name));
        let delegation = matches!(route, Route::Delegate).then(|| self.delegation(c, &phase));
        let orchestration = match &route {
            Route::Orchestrate(o) => Some(self.orchestration_env(o, &c.id)),
            _ => None,
        };
        let ctx = ToolContext {
            workspace_root: self.p.cwd.clone(),
            cancel: phase.child_token(),
            call_id: c.id.clone(),
            session_id: Some(self.session_key()),
            lifecycle: Some(self.agent.lifecycle.clone()),
            exec_sandbox: self.p.exec_sandbox.clone(),
            host: Some(host.clone()),
            host_context: host_context.clone(),
            host_fs: self.p.host_fs,
        };
        let nested = matches!(route, Route::RunCode).then(|| NestedEnv {
            router: router.clone(),
            host: host.clone(),
            host_tools: self.p.host_tools.clone(),
            emit: self.emit.clone(),
            trace: self.trace.clone(),
            parent: c.id.clone(),
            timeout,
            n: 0,
            ctx: ctx.clone(),
            approver: (self.approval.mode == super::approval::Mode::Host).then(|| self.approver()),
            round,
        });
        let run_code_settings = matches!(route, Route::RunCode)
            .then(|| run_code::Settings::from_config(&self.agent.config.settings()));
        let chat = self.p.chat_id.clone();
        let stream = self.emit.stream_id.clone();
        let name_for_errors = c.name.clone();
        async move {
            if let Some(e) = bad_args {
                return ToolResult::recoverable(format!(
                    "Invalid arguments for tool '{name}': the arguments were not valid JSON ({e}); send a JSON object"
                ));
            }
            let stop = ctx.cancel.clone();
            let started = std::time::Instant::now();
            // Host-bound calls bound themselves by `timeout` (naming the host in the
            // error); the backstop below only catches a local tool that ignores it.
            let (fut, backstop): (crate::tools::ToolFuture, _) = match route {
                Route::Local => (
                    Box::pin(async move { router.dispatch(&name, args, ctx).await }),
                    timeout,
                ),
                // Built before the future (it lists the host's names); never sent.
                Route::UnknownHost => return unknown.unwrap_or_default(),
                Route::NotDelegated => {
                    return ToolResult::recoverable(format!(
                        "tool_not_delegated: {name} is outside this sub-agent's tools (toolFilter); use the tools you were given"
                    ))
                    .with_data("kind", "tool_not_delegated")
                    .with_data("tool", name);
                }
                Route::Delegate => match delegation {
                    Some(Ok((job, backstop))) => (
                        Box::pin(async move {
                            delegate::run(job)
                                .await
                                .with_data("durationMs", elapsed_ms(started))
                        }),
                        backstop,
                    ),
                    Some(Err(r)) => return *r,
                    None => return ToolResult::default(),
                },
                Route::Orchestrate(_) => match orchestration {
                    Some(env) => (
                        Box::pin(async move {
                            orchestrate::call(env, &name, args)
                                .await
                                .with_data("durationMs", elapsed_ms(started))
                        }),
                        timeout + TOOL_STOP_GRACE,
                    ),
                    None => return ToolResult::default(),
                },
                Route::Host(tool) => {
                    let stop = stop.clone();
                    let name = name.clone();
                    (
                        Box::pin(async move {
                            let r = invoke_host(
                                host,
                                tool,
                                id,
                                name,
                                args,
                                host_context,
                                timeout,
                                stop,
                            )
                            .await;
                            r.with_data("durationMs", elapsed_ms(started))
                        }),
                        timeout + TOOL_STOP_GRACE,
                    )
                }
                Route::RunCode => match (nested, run_code_settings) {
                    (Some(mut env), Some(settings)) => (
                        Box::pin(async move {
                            // Checked as the router would; the turn runs the program itself so
                            // that nested calls go through its approvals and host tools.
                            let r = match router.get(&name).map(|e| e.checked_args(args)) {
                                Some(Ok(args)) => {
                                    run_code::run(&settings, &ctx, &args, &mut env).await
                                }
                                Some(Err(e)) => ToolResult::recoverable(e),
                                None => router.unknown_tool(&name),
                            };
                            r.with_data("durationMs", elapsed_ms(started))
                        }),
                        timeout + TOOL_STOP_GRACE,
                    ),
                    _ => return ToolResult::default(),
                },
                Route::AskUser => {
                    let stop = stop.clone();
                    (
                        Box::pin(async move {
                            let r = ask(host, args, chat, stream, timeout, stop).await;
                            r.with_data("durationMs", elapsed_ms(started))
                        }),
                        timeout + TOOL_STOP_GRACE,
                    )
                }
            };
            guarded(fut, &name_for_errors, backstop, stop, &phase, &turn_cancel).await
        }
    }
}

impl Turn {
    /// What this turn's children report to.
    fn parent(&self) -> delegate::Parent {
        delegate::Parent {
            agent: self.agent.clone(),
            pool: self.pool.clone(),
            record: self.record_id.clone(),
            emit: self.emit.clone(),
            trace: self.trace.clone(),
            totals: self.totals.clone(),
        }
    }

    /// What one of the six orchestration tools runs with.
    fn orchestration_env(
        &self,
        o: &Arc<orchestrate::Orchestration>,
        call_id: &str,
    ) -> orchestrate::Env {
        orchestrate::Env {
            parent: self.parent(),
            child: delegate::child_params(&self.p, &subagent::Subagent::default(), None),
            orchestration: o.clone(),
            budget_left: self.p.cfg.budget_tokens.saturating_sub(self.budget_used),
            turn_cancel: self.handle.cancel.clone(),
            call_id: call_id.to_string(),
        }
    }

    /// A `delegate_subagent` call made ready to run (with its backstop), or the result that
    /// refuses it (bad arguments, an unknown `subagent_type`).
    fn delegation(
        &self,
        c: &ToolCall,
        phase: &CancellationToken,
    ) -> Result<(delegate::Job, Duration), Box<ToolResult>> {
        let Some(sub) = &self.p.subagent else {
            return Err(Box::new(ToolResult::recoverable(
                "delegation is off for this turn",
            )));
        };
        let task = c
            .arguments
            .get("task")
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or_default();
        if task.is_empty() {
            return Err(Box::new(ToolResult::recoverable(
                "task is required: the whole sub-task as text, with what the sub-agent should return",
            )));
        }
        let kind = c.arguments.get("subagent_type");
        let kind = match kind {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(other) => {
                return Err(Box::new(ToolResult::recoverable(format!(
                    "subagent_type must be a string naming a profile, got {other}"
                ))));
            }
        };
        let profile = sub
            .profile(kind)
            .map_err(|e| ToolResult::recoverable(e).with_data("kind", "unknown_subagent_type"))?;
        let mut params = delegate::child_params(&self.p, sub, profile);
        // The child spends from what is left of the parent's token budget.
        let left = self.p.cfg.budget_tokens.saturating_sub(self.budget_used);
        params.cfg.budget_tokens = params.cfg.budget_tokens.min(left.max(1));
        let backstop = delegate::backstop(&params);
        Ok((
            delegate::Job {
                slot: self.pool.acquire(),
                parent: self.parent(),
                params,
                profile: profile.cloned(),
                task: task.to_string(),
                call_id: c.id.clone(),
                cancel: phase.child_token(),
            },
            backstop,
        ))
    }
}

/// Runs a call's future under its backstop, stopped by cancel or an interrupting steer.
async fn guarded(
    fut: crate::tools::ToolFuture,
    name: &str,
    backstop: Duration,
    stop: CancellationToken,
    phase: &CancellationToken,
    turn_cancel: &CancellationToken,
) -> ToolResult {
    tokio::pin!(fut);
    tokio::select! {
        // Cancel first: a tool that stops on the same signal must still read as
        // cancelled/interrupted, not as its own failure.
        biased;
        _ = tokio::time::sleep(backstop) => {
            stop.cancel();
            let _ = tokio::time::timeout(TOOL_STOP_GRACE, &mut fut).await;
            let ms = backstop.as_millis() as u64;
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

/// Sends one call to the host (`tool.invoke`) and reads its answer.
/// Where a `run_code` program's nested calls go: the turn's host tools under `toolsViaHost`,
/// else the turn's router; each shows on the stream as `toolCall`/`toolResult` with
/// `parentId` (the run_code call's id).
struct NestedEnv {
    router: Arc<crate::tools::Router>,
    host: Arc<dyn HostLink>,
    host_tools: Option<HostTools>,
    emit: Emitter,
    trace: super::trace::Trace,
    parent: String,
    timeout: Duration,
    n: u32,
    ctx: ToolContext,
    /// `approval: host`: each nested call is put to the host.
    approver: Option<super::approval::Approver>,
    round: u64,
}

impl run_code::Nested for NestedEnv {
    fn call<'a>(
        &'a mut self,
        name: &'a str,
        args: Map<String, Value>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ToolResult> + Send + 'a>> {
        Box::pin(async move {
            self.n += 1;
            let id = format!("{}.{}", self.parent, self.n);
            let mut ctx = self.ctx.clone();
            ctx.call_id = id.clone();
            let call = ToolCall {
                id: id.clone(),
                name: name.to_string(),
                arguments: Value::Object(args.clone()),
                arguments_error: None,
                extra_content: None,
            };
            self.emit.nested_tool_call(&call, &self.parent);
            // A child span of the run_code call's (linked by parentCallId).
            let mut attrs = Map::new();
            attrs.insert("callId".into(), json!(id));
            attrs.insert("parentCallId".into(), json!(self.parent));
            let span = self.trace.start_span(name, "tool", attrs);
            let started = std::time::Instant::now();
            let host_tool = match &self.host_tools {
                Some(h) if !LOCAL_TOOLS.contains(&name) => Some(h.get(name).cloned()),
                _ => None,
            };
            // Put to the host like the model's own calls (`approval: host`).
            let mut args = args;
            let mut refused = None;
            if let Some(a) = &self.approver {
                let mode = match &host_tool {
                    Some(t) => t.as_ref().map(|t| t.mode),
                    None => self.router.get(name).map(|e| e.mode),
                };
                match a.approve(&call, mode, self.round).await {
                    Approval::Run(Some(amended)) => args = amended,
                    Approval::Run(None) => {}
                    Approval::Denied(r) => refused = Some(r),
                    Approval::Abort => {
                        a.cancel.cancel();
                        refused = Some(ToolResult::recoverable(
                            "not executed: the host aborted the turn",
                        ));
                    }
                }
            }
            let mut r = match (refused, host_tool) {
                (Some(r), _) => r,
                (None, Some(Some(tool))) => {
                    invoke_host(
                        self.host.clone(),
                        tool,
                        id.clone(),
                        name.to_string(),
                        Value::Object(args),
                        ctx.host_context.clone(),
                        self.timeout,
                        ctx.cancel.clone(),
                    )
                    .await
                }
                (None, Some(None)) => ToolResult::recoverable(format!(
                    "Unknown tool: {name}; the host offers no such tool"
                )),
                (None, None) => run_code::dispatch_local(&self.router, name, args, ctx).await,
            };
            if r.data
                .as_ref()
                .is_none_or(|d| !d.contains_key("durationMs"))
            {
                r = r.with_data("durationMs", elapsed_ms(started));
            }
            let mut chunk = Map::new();
            chunk.insert("id".into(), json!(id));
            chunk.insert("name".into(), json!(name));
            chunk.insert("success".into(), json!(r.success));
            if let Some(d) = r.data.as_ref().and_then(|d| d.get("durationMs")) {
                chunk.insert("durationMs".into(), d.clone());
            }
            if let Some(e) = &r.error {
                chunk.insert("error".into(), json!(e));
            }
            chunk.insert(
                "resultPreview".into(),
                json!(preview(&r.model_text(), PREVIEW_CHARS)),
            );
            if let Some(s) = r.data.as_ref().and_then(|d| d.get("_sandbox")) {
                chunk.insert("sandbox".into(), s.clone());
            }
            chunk.insert("parentId".into(), json!(self.parent));
            self.emit.tool_result(Value::Object(chunk));
            let mut end = Map::new();
            if let Some(e) = &r.error {
                end.insert("error".into(), json!(e));
            }
            self.trace
                .end_span(span, if r.success { "ok" } else { "error" }, end);
            r
        })
    }
}

#[allow(clippy::too_many_arguments)]
async fn invoke_host(
    host: Arc<dyn HostLink>,
    tool: Arc<HostTool>,
    id: String,
    name: String,
    args: Value,
    context: Map<String, Value>,
    timeout: Duration,
    stop: CancellationToken,
) -> ToolResult {
    let args = match args_object(&name, args) {
        Ok(a) => a,
        Err(e) => return ToolResult::recoverable(e),
    };
    if let Err(e) = tool.validate(&args) {
        return ToolResult::recoverable(format!("Invalid arguments for tool '{name}': {e}"));
    }
    let params = ToolInvokeRequest {
        id,
        name: name.clone(),
        arguments: args,
        context,
    };
    let answer = host
        .call("tool.invoke", json!(params), timeout, &stop)
        .await;
    host_tools::read_result(&name, answer)
}

/// `ask_user`: normalise, ask the host, record the answers (an empty mapping when the host
/// cannot or will not answer, so the turn never hangs on it).
async fn ask(
    host: Arc<dyn HostLink>,
    args: Value,
    chat: Option<String>,
    stream: String,
    timeout: Duration,
    stop: CancellationToken,
) -> ToolResult {
    let payload = match ask_user::normalize(&args) {
        Ok(p) => p,
        Err(e) => return ToolResult::recoverable(format!("ask_user: {e}")),
    };
    let params = AskUserRequest {
        intro: payload.intro.clone(),
        questions: payload.questions.clone(),
        outro: payload.outro.clone(),
        chat_id: chat,
        stream_id: stream,
    };
    let answer = host
        .call("ask_user.request", json!(params), timeout, &stop)
        .await;
    let (answers, unanswered) = match answer {
        Ok(v) if v.get("answers").is_some_and(Value::is_object) => {
            (ask_user::answers_from(&v, &payload), None)
        }
        Ok(_) => (
            Map::new(),
            Some("the host's answer had no answers object".to_string()),
        ),
        Err(e) => (Map::new(), Some(e.to_string())),
    };
    let mut data = Map::new();
    data.insert("intro".into(), json!(payload.intro));
    data.insert("outro".into(), json!(payload.outro));
    data.insert("questions".into(), json!(payload.questions));
    data.insert("answers".into(), Value::Object(answers));
    let mut r = ToolResult::ok(data);
    if let Some(why) = unanswered {
        r.message = Some(format!(
            "The user did not answer ({why}); continue with your best judgement and say what you assumed."
        ));
    }
    r
}

/// Where a call runs.
#[derive(Clone)]
enum Route {
    Local,
    Host(Arc<HostTool>),
    /// A name the host did not offer: answered locally, never sent.
    UnknownHost,
    AskUser,
    /// `delegate_subagent`: a child loop on the turn's pool.
    Delegate,
    /// A sub-agent called a tool outside its `toolFilter`.
    NotDelegated,
    /// One of the six `agent_*` tools.
    Orchestrate(Arc<orchestrate::Orchestration>),
    /// `run_code`: the program's nested calls go where the turn's would.
    RunCode,
}

/// What happens to one call of a batch once approvals are in.
enum Plan {
    Run(ToolCall),
    Done(ToolResult),
    Skip(&'static str),
}

/// The approval layer's verdict on one call.
pub(super) enum Approval {
    /// Run it, with the host's amended arguments if any.
    Run(Option<Map<String, Value>>),
    Denied(ToolResult),
    Abort,
}

/// How a tool phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ExecEnd {
    Done,
    Cancelled,
    Aborted,
}
