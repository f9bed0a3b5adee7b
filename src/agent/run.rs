//! The loop. One round (reference §2.3): drain steers → maxRounds guard → soft timeout →
//! pre-step compaction → flush the record → stream the provider → no tool calls: done;
//! tool calls: commit the call message, run the batches, round_end, next round.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::Agent;
use super::approval;
use super::compaction as cx;
use super::display::DisplayFilter;
use super::exec::ExecEnd;
use super::notices::Emitter;
use super::params::{ChatParams, ContentMode};
use super::persist;
use super::seed;
use super::stream::StreamHandle;
use super::trace::Trace;
use crate::host::HostLink;
use crate::llm::{LlmError, LlmEvent, LlmRequest, Message, Role, ToolCall, Usage};
use crate::protocol::host::ReadStateSeed;
use crate::store::{BoundaryAction, ItemKind};
use crate::tools::ask_user;
use crate::tools::todo::{self, Todo};

/// A cancelled or interrupted tool gets this long to stop (and kill its process group)
/// before its future is dropped; well inside the 5 s cancel promise.
pub const TOOL_STOP_GRACE: Duration = Duration::from_secs(2);
/// A steer message longer than this many characters is cut with a visible marker.
pub const MAX_STEER_CHARS: usize = 32_000;

pub const WRAP_UP_PROMPT: &str = "Time is up for this turn. Do not call any more tools: answer now with what you have, and say what is left undone.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Completed,
    Failed,
    BudgetExhausted,
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::BudgetExhausted => "budget_exhausted",
            Status::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Completion {
    pub status: Status,
    pub reason: String,
}

fn done(status: Status, reason: impl Into<String>) -> Completion {
    Completion {
        status,
        reason: reason.into(),
    }
}

/// Token totals of the turn, shared so the watchdog can report them after a hard stop.
pub type Totals = Arc<Mutex<Usage>>;

/// A turn in progress.
pub struct Turn {
    pub agent: Arc<Agent>,
    pub p: ChatParams,
    pub handle: Arc<StreamHandle>,
    pub emit: Emitter,
    pub trace: Trace,
    pub record_id: String,
    /// Shared with the round's request (copied only if a push meets a request still alive).
    pub items: Arc<Vec<Message>>,
    pub kinds: Vec<ItemKind>,
    /// `items[..persisted]` are in the durable record.
    pub persisted: usize,
    pub totals: Totals,
    pub(super) budget_used: u64,
    pub(super) rounds: u64,
    pub(super) tool_errors: u64,
    pub(super) tool_calls_run: u64,
    /// Prompt tokens the provider reported last, and the transcript length at that request.
    pub(super) last_prompt: Option<(u64, usize)>,
    pub(super) compact_armed: bool,
    pub(super) wrap_up: bool,
    pub(super) started: Instant,
    /// Requests to the host (reverse calls), behind the seam the loop owns.
    pub(super) host: Arc<dyn HostLink>,
    pub(super) approval: approval::Policy,
    /// The model's checklist (`todo_write`), rebuilt from the record on resume.
    pub(super) todos: Vec<Todo>,
    pub(super) todo_reminders: u32,
    /// Strips pseudo tool-call markup from display deltas (raw chunks keep it).
    pub(super) display: DisplayFilter,
    /// The descriptors offered, with the router generation they were built from.
    offered: Option<(u64, Arc<[Value]>)>,
    /// See `seed::Start::canonical`; `None` once the turn rewrites its items (compaction).
    pub(super) canonical: Option<usize>,
    /// See `seed::Start::seen`.
    seen: Option<Vec<Message>>,
    /// The record's version after the last commit (see `Store::record_version`).
    version: Option<i64>,
    /// This turn's sub-agents (`delegate_subagent`).
    pub pool: Arc<super::delegate::Pool>,
    /// `requiredProfiles` reminders sent this turn.
    subagent_reminders: u32,
    /// The turn's own MCP servers (its `mcp` entries), closed when it ends.
    mcp: Option<crate::mcp::mount::TurnMount>,
    /// Images from this round's results (`view_image`), sent as one user message after them.
    pub(super) images: Vec<crate::llm::types::Part>,
    /// `Some(items.len())` after a round whose results are left to be committed beside the
    /// next request (`stream_round`); `None` once they are in the record. Every way out of
    /// `rounds` from there (cancel, budgets, compaction, the request) flushes first.
    beside: Option<usize>,
}

/// Reminders the completion gate sends per turn before a final answer stands.
pub const MAX_TODO_REMINDERS: u32 = 2;
/// How long `read_state.seed` may take on a host-tools resume (best effort).
pub const READ_STATE_SEED_TIMEOUT: Duration = Duration::from_secs(10);

enum Streamed {
    Done {
        text: String,
        reasoning: String,
        calls: Vec<ToolCall>,
        finish: String,
        /// Vendor state to send back with this answer (`LlmEvent::State`).
        state: Option<Value>,
    },
    Cancelled {
        text: String,
    },
    Error(LlmError),
    /// The last round's results could not be committed (the answer was not read).
    Unrecorded(String),
}

impl Turn {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        agent: Arc<Agent>,
        p: ChatParams,
        handle: Arc<StreamHandle>,
        emit: Emitter,
        trace: Trace,
        record_id: String,
        start: seed::Start,
        version: Option<i64>,
        totals: Totals,
    ) -> Turn {
        let seed::Start {
            mut items,
            persisted,
            canonical,
            seen,
        } = start;
        super::images::hydrate(&agent.images_dir(), &mut items, p.image_input);
        let kinds = items.iter().map(persist::kind_for).collect();
        let todos = last_todos(&items);
        let settings = agent.config.settings();
        let approval = approval::Policy {
            mode: if settings.approval_pinned {
                approval::Mode::Host
            } else {
                p.approval.mode.unwrap_or(if settings.approval_host {
                    approval::Mode::Host
                } else {
                    approval::Mode::Auto
                })
            },
            timeout: p
                .approval
                .timeout
                .unwrap_or(Duration::from_millis(settings.approval_timeout_ms)),
        };
        let host: Arc<dyn HostLink> = agent.host.clone();
        // One budget and one lineage for delegation and orchestration.
        let pool = match &p.orchestration {
            Some(o) => super::delegate::Pool::new(o.max_parallel, o.prefix.clone()),
            None => super::delegate::Pool::new(
                p.subagent
                    .as_ref()
                    .map_or(super::subagent::DEFAULT_MAX_PARALLEL, |s| s.max_parallel),
                "0".into(),
            ),
        };
        Turn {
            pool,
            subagent_reminders: 0,
            mcp: None,
            images: Vec::new(),
            beside: None,
            host,
            approval,
            todos,
            todo_reminders: 0,
            display: DisplayFilter::new(),
            offered: None,
            canonical,
            seen,
            version,
            agent,
            p,
            handle,
            emit,
            trace,
            record_id,
            items: Arc::new(items),
            kinds,
            persisted,
            totals,
            budget_used: 0,
            rounds: 0,
            tool_errors: 0,
            tool_calls_run: 0,
            last_prompt: None,
            compact_armed: true,
            wrap_up: false,
            started: Instant::now(),
        }
    }

    pub(super) fn push(&mut self, m: Message, kind: ItemKind) {
        Arc::make_mut(&mut self.items).push(m);
        self.kinds.push(kind);
    }

    /// Appends every not-yet-persisted item, in order, in one committed transaction.
    pub(super) async fn flush(&mut self) -> Result<(), String> {
        let pending: Vec<(ItemKind, &Message)> = self.kinds[self.persisted..]
            .iter()
            .cloned()
            .zip(&self.items[self.persisted..])
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        let version = persist::append_many(&self.agent.store, &self.record_id, &pending)
            .await
            .map_err(|e| format!("cannot write the durable record {}: {e}", self.record_id))?;
        self.persisted = self.items.len();
        self.version = version;
        self.beside = None;
        Ok(())
    }

    /// The pending items (a round's tool results) committed once the request the provider
    /// task just started is on its way: yielding lets this worker run that task (and the
    /// connection's) up to the wait for the answer, so the commit overlaps the model's time
    /// with no other thread woken. Nothing of the answer is shown before they are in.
    async fn flush_beside(&mut self) -> Result<(), String> {
        if self.persisted < self.items.len() {
            tokio::task::yield_now().await;
        }
        self.flush().await
    }

    pub(super) fn notice(&self, kind: &str, mut v: Map<String, Value>) {
        v.insert("kind".into(), json!(kind));
        let v = Value::Object(v);
        self.trace.event(kind, kind, Some(v.clone()));
        self.emit.notice(v);
    }

    pub(super) fn failed(&self, reason: impl Into<String>) -> Completion {
        let reason = reason.into();
        self.trace
            .event("error", "error", Some(json!({"message": reason})));
        done(Status::Failed, reason)
    }

    /// Records what the model said before the cancel (never a tool call) and stops.
    pub(super) async fn cancelled(&mut self, partial: String) -> Completion {
        if !partial.is_empty() {
            self.push(Message::new(Role::Assistant, partial), ItemKind::Assistant);
        }
        if let Err(e) = self.flush().await {
            tracing::warn!("{e}");
        }
        done(Status::Cancelled, "cancelled by host request")
    }

    /// Boxed: a sub-agent's turn runs inside its parent's (`delegate_subagent`), and an
    /// opaque future type cannot contain itself.
    pub fn run(
        mut self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Completion> + Send>> {
        Box::pin(async move {
            self.mount_mcp().await;
            let completion = self.rounds().await;
            // Children still running are cancelled before the turn reports its end.
            self.pool.wind_down().await;
            // No server outlives its turn (a dropped turn kills them through their groups).
            if let Some(m) = self.mcp.take() {
                m.close().await;
            }
            self.keep_transcript();
            completion
        })
    }

    /// The router this turn dispatches on: its own when it mounted MCP servers.
    pub(super) fn router(&self) -> &Arc<crate::tools::Router> {
        self.p.router.as_ref().unwrap_or(&self.agent.router)
    }

    /// Starts the configured MCP servers on first use and this turn's own `mcp` entries (in
    /// parallel); a server that fails is a notice and the turn goes on without it. Under
    /// `toolsViaHost` the host owns the tools and nothing is mounted.
    async fn mount_mcp(&mut self) {
        // run_code is the sidecar's own, also under toolsViaHost (its nested calls go to the
        // host's tools there).
        self.mount_run_code();
        if self.p.host_tools.is_some() {
            if !self.p.mcp.is_empty() {
                tracing::info!(
                    "stream {}: mcp ignored under toolsViaHost",
                    self.emit.stream_id
                );
            }
            return;
        }
        let cancel = self.handle.cancel.clone();
        for f in self.agent.mcp.ensure_started(&cancel).await {
            self.mcp_failed(&f);
        }
        if self.p.mcp.is_empty() {
            return;
        }
        let settings = crate::mcp::McpSettings::from_settings(&self.agent.config.settings());
        let launcher = crate::sandbox::global().and_then(|s| s.launcher().map(Into::into));
        let ctx = crate::mcp::client::ConnectCtx {
            cwd: &self.p.cwd,
            lifecycle: Some(self.agent.lifecycle.clone()),
            launcher,
            startup_timeout: settings.startup_timeout,
            cancel: &cancel,
        };
        let entries = std::mem::take(&mut self.p.mcp);
        let (mount, failures) =
            crate::mcp::mount::TurnMount::start(&entries, self.router(), &ctx, &settings).await;
        self.p.mcp = entries;
        for f in &failures {
            self.mcp_failed(f);
        }
        let mut n = Map::new();
        n.insert("servers".into(), json!(mount.describe()));
        self.notice("mcp_mounted", n);
        self.p.router = Some(mount.router.clone());
        self.mcp = Some(mount);
    }

    /// `runCode: true` on a sidecar whose config leaves `run_code` off: the turn's own router
    /// gets it.
    fn mount_run_code(&mut self) {
        use crate::tools::run_code;
        if !self.p.run_code || self.router().get(run_code::NAME).is_some() {
            return;
        }
        let router = self.router().fork();
        let shared = self.agent.config.clone();
        let tool = run_code::RunCode::new(
            Arc::new(move || run_code::Settings::from_config(&shared.settings())),
            &router,
        );
        match router.register(crate::tools::router::Registration::new(Arc::new(tool))) {
            Ok(()) => self.p.router = Some(router),
            Err(e) => tracing::warn!("runCode: {e}"),
        }
    }

    fn mcp_failed(&self, f: &crate::mcp::mount::Failure) {
        let mut n = Map::new();
        n.insert("name".into(), json!(f.name));
        n.insert("error".into(), json!(f.error));
        self.notice("mcp_server_failed", n);
    }

    /// Leaves the transcript for the record's next turn, when it is exactly the record's.
    fn keep_transcript(&mut self) {
        let (Some(k), Some(version)) = (self.canonical, self.version) else {
            return;
        };
        if self.persisted != self.items.len() {
            return;
        }
        let mut items = std::mem::take(Arc::make_mut(&mut self.items));
        for m in items.iter_mut().skip(k) {
            *m = super::transcripts::canonical(m);
        }
        if let Some(mut seen) = self.seen.take() {
            seen.extend(items.iter().skip(k).cloned());
            let key = super::transcripts::seen_key(&self.record_id);
            self.agent.transcripts.put(&key, version, seen);
        }
        self.agent.transcripts.put(&self.record_id, version, items);
    }

    async fn rounds(&mut self) -> Completion {
        let mut recoveries = 0u32;
        if self.p.resume && self.p.host_tools.is_some() {
            self.seed_host_read_state().await;
        }
        loop {
            if self.handle.cancel.is_cancelled() {
                return self.cancelled(String::new()).await;
            }
            // MCP servers that announced a new tool list are re-listed between rounds.
            if let Some(m) = &mut self.mcp {
                m.refresh().await;
            }
            self.agent.mcp.refresh().await;
            // 1. steer inbox
            for s in self.handle.drain_steers() {
                let content = if s.chars().count() > MAX_STEER_CHARS {
                    let cut: String = s.chars().take(MAX_STEER_CHARS).collect();
                    format!("{cut}\n[steer message truncated at {MAX_STEER_CHARS} characters]")
                } else {
                    s
                };
                let mut n = Map::new();
                n.insert("content".into(), json!(content));
                self.notice("steer", n);
                self.push(Message::new(Role::User, content), ItemKind::SteerInject);
            }
            // 2. runaway guard
            if self.rounds >= self.p.cfg.max_rounds {
                let mut n = Map::new();
                n.insert("budget".into(), json!("rounds"));
                n.insert("rounds".into(), json!(self.rounds));
                self.notice("budget_exhausted", n);
                let _ = self.flush().await;
                return done(
                    Status::BudgetExhausted,
                    format!("reached maxRounds={} runaway guard", self.p.cfg.max_rounds),
                );
            }
            // 3. soft timeout: one final round without tools
            if let Some(limit) = self.p.cfg.soft_timeout
                && !self.wrap_up
                && self.started.elapsed() >= limit
            {
                self.wrap_up = true;
                let mut n = Map::new();
                n.insert(
                    "elapsedMs".into(),
                    json!(self.started.elapsed().as_millis() as u64),
                );
                n.insert("softTimeoutMs".into(), json!(limit.as_millis() as u64));
                n.insert("round".into(), json!(self.rounds));
                self.notice("soft_timeout", n);
                self.push(
                    Message::new(Role::User, WRAP_UP_PROMPT),
                    ItemKind::Loop("loop.wrap_up".into()),
                );
            }
            // 4. pre-step compaction (manual or pressure)
            if self.handle.take_compact() {
                if let Err(e) = self
                    .compact(
                        BoundaryAction::Compact,
                        "manual compaction requested by the host",
                        "pre_step",
                    )
                    .await
                {
                    return self.failed(e);
                }
            } else if self.pressure_high() {
                let reason = format!(
                    "context pressure reached {:.0}% of the {}-token window",
                    cx::TRIGGER_RATIO * 100.0,
                    self.p.cfg.window
                );
                if let Err(e) = self
                    .compact(BoundaryAction::Compact, &reason, "pre_step")
                    .await
                {
                    return self.failed(e);
                }
            }
            // 5. the user turn is durable before the provider hears of it; a round's tool
            // results alone are committed beside the next request (`stream_round`)
            if self.beside != Some(self.items.len())
                && let Err(e) = self.flush().await
            {
                return self.failed(e);
            }
            // 6. stream the provider
            let streamed = self.stream_round(!self.wrap_up).await;
            let (text, reasoning, calls, finish, state) = match streamed {
                Streamed::Cancelled { text } => return self.cancelled(text).await,
                Streamed::Error(LlmError::ContextOverflow { message })
                    if recoveries < cx::MAX_OVERFLOW_RECOVERIES =>
                {
                    recoveries += 1;
                    let reason = format!("the provider reported a context overflow: {message}");
                    if let Err(e) = self
                        .compact(
                            BoundaryAction::OverflowRecovery,
                            &reason,
                            "on_request_error",
                        )
                        .await
                    {
                        return self.failed(e);
                    }
                    continue;
                }
                Streamed::Error(e) => {
                    return self.failed(format!("model request failed: {e}"));
                }
                Streamed::Unrecorded(e) => return self.failed(e),
                Streamed::Done {
                    text,
                    reasoning,
                    calls,
                    finish,
                    state,
                } => (text, reasoning, calls, finish, state),
            };
            recoveries = 0;
            self.rounds += 1;
            let round = self.rounds - 1;
            let mut assistant = Message::new(Role::Assistant, text.clone());
            if !reasoning.is_empty() {
                assistant.reasoning = Some(reasoning);
            }
            assistant.reasoning_details = state;
            // token budget
            if self.budget_used > self.p.cfg.budget_tokens {
                self.push(assistant, ItemKind::Assistant);
                let _ = self.flush().await;
                let mut n = Map::new();
                n.insert("budget".into(), json!("tokens"));
                n.insert("used".into(), json!(self.budget_used));
                n.insert("limit".into(), json!(self.p.cfg.budget_tokens));
                self.notice("budget_exhausted", n);
                return done(Status::BudgetExhausted, "token budget exceeded");
            }
            self.trace_step(round, &finish, &text, &calls, "completion");
            if calls.is_empty() {
                if text.trim().is_empty() {
                    return self.failed("no tool calls and no final response");
                }
                if self.p.cfg.content_mode == ContentMode::Final {
                    self.emit.delta(&super::display::strip(&text));
                }
                self.push(assistant, ItemKind::Assistant);
                if let Err(e) = self.flush().await {
                    return self.failed(e);
                }
                // A steer that arrived during the answer gets its own round.
                if self.handle.has_steer() && !self.handle.cancel.is_cancelled() {
                    continue;
                }
                if self.todo_gate().await || self.subagent_gate() {
                    continue;
                }
                return done(
                    Status::Completed,
                    "assistant produced final response with no pending tools",
                );
            }
            if self.handle.cancel.is_cancelled() {
                return self.cancelled(text).await;
            }
            assistant.tool_calls = calls.clone();
            self.push(assistant, ItemKind::Assistant);
            // The call message is durable before any tool runs.
            if let Err(e) = self.flush().await {
                return self.failed(e);
            }
            for c in &calls {
                self.emit.tool_call(c);
            }
            if self.wrap_up {
                self.skip_all(
                    &calls,
                    "not executed: the turn's soft timeout withheld tools",
                );
                let _ = self.flush().await;
                return done(
                    Status::BudgetExhausted,
                    "soft timeout: the wrap-up round still asked for tools",
                );
            }
            if self.tool_calls_run + calls.len() as u64 > self.p.cfg.max_tool_calls {
                self.skip_all(&calls, "not executed: the turn's tool-call budget is spent");
                let _ = self.flush().await;
                let mut n = Map::new();
                n.insert("budget".into(), json!("tool_calls"));
                n.insert("limit".into(), json!(self.p.cfg.max_tool_calls));
                self.notice("budget_exhausted", n);
                return done(Status::BudgetExhausted, "tool call budget exceeded");
            }
            let end = self.execute(&calls, round).await;
            let goes_on = matches!(end, ExecEnd::Done)
                && self.tool_errors < self.p.cfg.max_tool_errors
                && !self.handle.cancel.is_cancelled();
            if goes_on {
                self.beside = Some(self.items.len());
            } else if let Err(e) = self.flush().await {
                return self.failed(e);
            }
            match end {
                ExecEnd::Cancelled => return done(Status::Cancelled, "cancelled by host request"),
                ExecEnd::Aborted => return done(Status::Cancelled, "aborted_by_host"),
                ExecEnd::Done => {}
            }
            if self.tool_errors >= self.p.cfg.max_tool_errors {
                return self.failed(format!(
                    "too many consecutive tool errors ({} ≥ maxToolErrors {})",
                    self.tool_errors, self.p.cfg.max_tool_errors
                ));
            }
            let mut n = Map::new();
            n.insert("status".into(), json!("executing"));
            n.insert("round".into(), json!(round));
            self.trace.event(
                "completion",
                "round_end",
                Some(json!({"round": round, "status": "executing", "reason": "tool observations were produced; continue"})),
            );
            n.insert("kind".into(), json!("round_end"));
            self.emit.notice(Value::Object(n));
        }
    }

    fn trace_step(&self, round: u64, finish: &str, text: &str, calls: &[ToolCall], kind: &str) {
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        self.trace.event(
            "llm_response",
            kind,
            Some(json!({
                "round": round, "traceStepId": format!("round_{round}"), "finishReason": finish,
                "textLength": text.chars().count(), "toolCalls": names, "toolCallCount": calls.len(),
                "toolErrorCount": self.tool_errors,
            })),
        );
    }

    /// The tool descriptors offered this round: the router's (by strategy), or under
    /// `toolsViaHost` the host's plus the interaction tools the sidecar answers itself.
    fn tools(&mut self) -> Arc<[Value]> {
        let generation = self.router().generation();
        if let Some((g, t)) = &self.offered
            && *g == generation
        {
            return t.clone();
        }
        let built: Arc<[Value]> = match &self.p.host_tools {
            // The host's descriptors come with each turn.
            Some(_) => self.build_tools().into(),
            None => {
                let key = super::offered::Key {
                    router: Arc::downgrade(self.router()),
                    generation,
                    strategy: self.p.cfg.strategy,
                    ask_user: self.p.ask_user,
                    subagent: self.p.subagent.as_ref().map(|s| s.descriptor()),
                    orchestration: self.p.orchestration.is_some(),
                    filter: self.p.tool_filter.clone(),
                };
                self.agent.offered.get_or_build(key, || self.build_tools())
            }
        };
        self.offered = Some((generation, built.clone()));
        built
    }

    fn build_tools(&self) -> Vec<Value> {
        let describe = |e: &crate::tools::router::Entry| {
            json!({"type": "function", "function": {
                "name": e.name, "description": e.description, "parameters": e.parameters.value()}})
        };
        let mut out: Vec<Value> = match &self.p.host_tools {
            Some(h) => {
                let mut v: Vec<Value> = h.tools.iter().map(|t| t.descriptor()).collect();
                v.extend(self.router().get(todo::NAME).map(|e| describe(&e)));
                v.extend(
                    self.router()
                        .get(crate::tools::run_code::NAME)
                        .map(|e| describe(&e)),
                );
                v
            }
            None => self
                .p
                .cfg
                .strategy
                .select(self.router())
                .iter()
                .map(|e| describe(e))
                .collect(),
        };
        if self.p.ask_user {
            out.push(ask_user::descriptor());
        }
        if let Some(sub) = &self.p.subagent {
            out.push(sub.descriptor());
        }
        if self.p.orchestration.is_some() {
            out.extend(super::orchestrate::descriptors());
        }
        if let Some(allowed) = &self.p.tool_filter {
            out.retain(|d| {
                d["function"]["name"]
                    .as_str()
                    .is_some_and(|n| allowed.iter().any(|a| a == n))
            });
        }
        out
    }

    /// `requiredProfiles`: a final answer before each required profile was delegated (and
    /// completed) gets a reminder naming them and one more round, at most
    /// `MAX_TODO_REMINDERS` times. Returns whether the loop goes on.
    fn subagent_gate(&mut self) -> bool {
        let Some(sub) = &self.p.subagent else {
            return false;
        };
        if self.wrap_up || self.subagent_reminders >= MAX_TODO_REMINDERS {
            return false;
        }
        let missing: Vec<String> = sub
            .required
            .iter()
            .filter(|r| !self.pool.delegated(r))
            .cloned()
            .collect();
        if missing.is_empty() {
            return false;
        }
        self.subagent_reminders += 1;
        let text = format!(
            "Before you give the final answer, delegate to each required sub-agent type that has not run yet: {}. Call {} with subagent_type set to it, then answer.",
            missing.join(", "),
            super::subagent::NAME
        );
        let mut n = Map::new();
        n.insert("missing".into(), json!(missing));
        n.insert("reminder".into(), json!(self.subagent_reminders));
        self.notice("subagent_required", n);
        self.push(
            Message::new(Role::User, text),
            ItemKind::Loop("loop.subagent_reminder".into()),
        );
        true
    }

    /// The completion gate: a final answer while checklist items are open gets a reminder
    /// naming them and one more round (at most `MAX_TODO_REMINDERS` per turn). Returns
    /// whether the loop goes on.
    async fn todo_gate(&mut self) -> bool {
        if self.wrap_up || self.todo_reminders >= MAX_TODO_REMINDERS {
            return false;
        }
        let open: Vec<String> = todo::unfinished(&self.todos)
            .iter()
            .map(|t| {
                let status = if t.status == todo::Status::InProgress {
                    "in progress"
                } else {
                    "pending"
                };
                format!("- [{}] {} ({status})", t.id, t.content)
            })
            .collect();
        if open.is_empty() {
            return false;
        }
        self.todo_reminders += 1;
        let text = format!(
            "Your checklist still has unfinished items:\n{}\nFinish them before you give the final answer, or call todo_write to mark what is done and what was dropped, then answer.",
            open.join("\n")
        );
        let mut n = Map::new();
        n.insert(
            "pending".into(),
            json!(
                todo::unfinished(&self.todos)
                    .iter()
                    .map(|t| &t.id)
                    .collect::<Vec<_>>()
            ),
        );
        n.insert("reminder".into(), json!(self.todo_reminders));
        n.insert("round".into(), json!(self.rounds.saturating_sub(1)));
        self.notice("todo_reminder", n);
        self.push(
            Message::new(Role::User, text),
            ItemKind::Loop("loop.todo_reminder".into()),
        );
        if let Err(e) = self.flush().await {
            tracing::warn!("{e}");
        }
        true
    }

    /// `read_state.seed` on a host-tools resume: the host's tools rebuild their
    /// read-before-write state from what the record shows was read or written. Best effort.
    async fn seed_host_read_state(&self) {
        let mut state = Map::new();
        for (path, version) in seed::read_state(&self.items) {
            let p = std::path::Path::new(&path);
            let abs = if p.is_absolute() {
                p.to_path_buf()
            } else {
                self.p.cwd.join(p)
            };
            state.insert(abs.display().to_string(), json!(version));
        }
        let n = state.len();
        let got = self
            .host
            .call(
                "read_state.seed",
                json!(ReadStateSeed { state }),
                READ_STATE_SEED_TIMEOUT,
                &self.handle.cancel,
            )
            .await;
        match got {
            Ok(_) => tracing::debug!("read_state.seed: sent {n} entr(ies) to the host"),
            Err(e) => tracing::warn!("read_state.seed ({n} entries) was not taken: {e}"),
        }
    }

    pub(super) fn request(&self, messages: Arc<Vec<Message>>, tools: Arc<[Value]>) -> LlmRequest {
        LlmRequest {
            model: self.p.model.clone(),
            messages,
            tools,
            tool_choice: None,
            temperature: self.p.temperature,
            top_p: self.p.top_p,
            max_tokens: self.p.max_tokens,
            reasoning_effort: self.p.reasoning_effort.clone(),
            provider_options: self.p.provider_options.clone(),
            raw_chunks: self.p.cfg.raw_chunks,
        }
    }

    fn charge(&mut self, u: Usage) {
        self.charge_budget(u.total, u.cached);
        self.trace.add_tokens(u.total);
        let mut t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        t.prompt += u.prompt;
        t.completion += u.completion;
        t.total += u.total;
        t.cached += u.cached;
    }

    /// Adds to the token budget's count: cached prompt tokens weigh `CACHED_TOKEN_WEIGHT`.
    pub(super) fn charge_budget(&mut self, total: u64, cached: u64) {
        let uncached = total.saturating_sub(cached);
        let charge = uncached + (cached as f64 * super::params::CACHED_TOKEN_WEIGHT).floor() as u64;
        self.budget_used = self.budget_used.saturating_add(charge);
    }

    async fn stream_round(&mut self, offer_tools: bool) -> Streamed {
        let tools = if offer_tools {
            self.tools()
        } else {
            Arc::from([])
        };
        let req = self.request(self.items.clone(), tools);
        let sent_len = self.items.len();
        let mut attrs = Map::new();
        attrs.insert("model".into(), json!(self.p.model));
        attrs.insert("round".into(), json!(self.rounds));
        attrs.insert("messages".into(), json!(sent_len));
        let span = self.trace.start_span("llm.request", "llm", attrs);
        self.trace.event(
            "llm_request",
            "llm_request",
            Some(json!({"round": self.rounds, "messages": sent_len, "tools": req.tools.len()})),
        );
        let final_mode = self.p.cfg.content_mode == ContentMode::Final;
        let mut s = self.p.provider.stream(req, self.handle.cancel.clone());
        let unrecorded = self.flush_beside().await.err();
        let (mut text, mut reasoning, mut calls) = (String::new(), String::new(), Vec::new());
        let mut finish = String::new();
        let mut state: Option<Value> = None;
        let mut usage: Option<Usage> = None;
        let outcome = loop {
            if let Some(e) = unrecorded {
                break Streamed::Unrecorded(e);
            }
            // The provider also watches the token; selecting here keeps the promise even
            // for a provider that does not.
            let item = tokio::select! {
                item = s.next() => item,
                _ = self.handle.cancel.cancelled() => None,
            };
            if self.handle.cancel.is_cancelled() {
                break Streamed::Cancelled {
                    text: std::mem::take(&mut text),
                };
            }
            match item {
                None => {
                    if !final_mode {
                        let held = self.display.finish();
                        self.emit.delta(&held);
                    }
                    break Streamed::Done {
                        text: std::mem::take(&mut text),
                        reasoning: std::mem::take(&mut reasoning),
                        calls: std::mem::take(&mut calls),
                        finish: std::mem::take(&mut finish),
                        state: state.take(),
                    };
                }
                Some(Ok(ev)) => match ev {
                    LlmEvent::Content { text: t } => {
                        if !final_mode {
                            let shown = self.display.push(&t);
                            self.emit.delta(&shown);
                        }
                        text.push_str(&t);
                    }
                    LlmEvent::Reasoning { text: t } => {
                        self.emit.reasoning(&t);
                        reasoning.push_str(&t);
                    }
                    // Announced once committed (see `run`), so a host that saw a call
                    // can rely on it being in the record.
                    LlmEvent::ToolCall(c) => calls.push(c),
                    LlmEvent::Usage(u) => usage = Some(u),
                    LlmEvent::Retry {
                        attempt,
                        delay_ms,
                        error,
                    } => {
                        // A retried draft is discarded (only the recovered answer counts).
                        self.display = DisplayFilter::new();
                        text.clear();
                        reasoning.clear();
                        calls.clear();
                        state = None;
                        let mut n = Map::new();
                        n.insert("hook".into(), json!("on_request_error"));
                        n.insert("action".into(), json!("retry"));
                        n.insert("reason".into(), json!(error));
                        n.insert("delayMs".into(), json!(delay_ms));
                        n.insert("attempt".into(), json!(attempt));
                        n.insert("round".into(), json!(self.rounds));
                        self.notice("hook_action", n);
                    }
                    LlmEvent::Raw(r) => {
                        if self.p.cfg.raw_chunks {
                            self.emit.raw(&r);
                        }
                    }
                    LlmEvent::Finish { reason } => finish = reason,
                    LlmEvent::State { data } => state = Some(data),
                },
                Some(Err(LlmError::Cancelled)) => {
                    break Streamed::Cancelled {
                        text: std::mem::take(&mut text),
                    };
                }
                Some(Err(e)) => break Streamed::Error(e),
            }
        };
        if let Some(u) = usage {
            self.charge(u);
            self.last_prompt = Some((u.prompt, sent_len));
        }
        let (status, mut end) = match &outcome {
            Streamed::Done { .. } => ("ok", Map::new()),
            Streamed::Cancelled { .. } => ("cancelled", Map::new()),
            Streamed::Error(e) => {
                let mut m = Map::new();
                m.insert("error".into(), json!(e.to_string()));
                ("error", m)
            }
            Streamed::Unrecorded(e) => {
                let mut m = Map::new();
                m.insert("error".into(), json!(e));
                ("error", m)
            }
        };
        if let Some(u) = usage {
            end.insert("usage".into(), json!(u));
            // The request's own cost, for timelines (`outrigger inspect`, OTLP in `full`).
            if let Some(c) = super::chat::usage_report(u, self.p.pricing).cost_usd {
                end.insert("costUsd".into(), json!(c));
            }
        }
        self.trace.end_span(span, status, end);
        if let Streamed::Done {
            text: t,
            reasoning: r,
            ..
        } = &outcome
        {
            if !t.is_empty() {
                self.trace.event(
                    "content_delta",
                    "content",
                    Some(json!({"chars": t.chars().count()})),
                );
            }
            if !r.is_empty() {
                self.trace.event(
                    "reasoning_delta",
                    "reasoning",
                    Some(json!({"chars": r.chars().count()})),
                );
            }
        }
        outcome
    }

    /// The file tools' read-state session: the record, so resume can re-seed it.
    pub fn session_key(&self) -> String {
        self.p
            .session_id
            .clone()
            .unwrap_or_else(|| self.record_id.clone())
    }
}

/// The checklist the record shows last (`todo_write`'s successful results).
fn last_todos(items: &[Message]) -> Vec<Todo> {
    items
        .iter()
        .rev()
        .filter(|m| m.role == Role::Tool && m.name.as_deref() == Some(todo::NAME))
        .find_map(|m| {
            let v: Value = serde_json::from_str(&m.content).ok()?;
            if v.get("success") != Some(&Value::Bool(true)) {
                return None;
            }
            todo::from_result_data(v.get("data")?.as_object()?)
        })
        .unwrap_or_default()
}
