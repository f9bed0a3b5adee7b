//! Sub-agents: `delegate_subagent` runs a child CoreLoop on the turn's pool. A child is a
//! real `Turn` on the same provider (or its profile's model) with the parent's tool surface
//! minus delegation, narrowed by `toolFilter`; its own record `<chatId>:child:<id>` is
//! seeded with the task and linked to the parent's record (so `agent.session.tree` shows
//! it); its own trace; its events go nowhere but its record and trace. The parent's stream
//! gets `agent.child` lifecycle notifications, and its usage and token budget include the
//! child's.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::chat::{CANCEL_WATCHDOG, store_trace, with_watchdog};
use super::events::{AgentChild, Event, EventSink};
use super::notices::Emitter;
use super::params::{ChatParams, ContentMode, MAX_TIMEOUT_MS};
use super::run::{Status, Totals, Turn};
use super::stream::StreamHandle;
use super::subagent::{GENERAL, Profile, Subagent};
use super::trace::Trace;
use super::{Agent, persist, seed};
use crate::llm::{Message, Role, Usage};
use crate::store::Seed;
use crate::tools::ToolResult;

/// Tries at finding a free child record name before giving up.
const MAX_NAME_PROBES: u32 = 10_000;

/// One turn's sub-agents: the parallel budget, the lineage numbering and what they used.
pub struct Pool {
    max_parallel: u32,
    active: AtomicU32,
    next: AtomicU32,
    /// Lineage prefix of this turn's children: `0` at the top, the child's id below it.
    prefix: String,
    usage: Mutex<Option<Usage>>,
    /// Profiles a child completed for (`requiredProfiles`).
    delegated: Mutex<BTreeSet<String>>,
    /// Every child of the turn, delegated or orchestrated (`agent_list`).
    pub(super) children: Mutex<Vec<Arc<super::orchestrate::Entry>>>,
    /// Signalled whenever a child's state changes.
    pub(super) changed: tokio::sync::Notify,
}

/// A place in the pool, given back when dropped.
pub(super) struct Slot(Arc<Pool>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    pub fn new(max_parallel: u32, prefix: String) -> Arc<Pool> {
        Arc::new(Pool {
            max_parallel,
            active: AtomicU32::new(0),
            next: AtomicU32::new(0),
            prefix,
            usage: Mutex::new(None),
            delegated: Mutex::new(BTreeSet::new()),
            children: Mutex::new(Vec::new()),
            changed: tokio::sync::Notify::new(),
        })
    }

    pub(super) fn acquire(self: &Arc<Self>) -> Option<Slot> {
        self.active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_parallel).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self.clone()))
    }

    /// What the children used, when any ran.
    pub fn children_usage(&self) -> Option<Usage> {
        *lock(&self.usage)
    }

    pub fn delegated(&self, profile: &str) -> bool {
        lock(&self.delegated).contains(profile)
    }

    pub(super) fn add_usage(&self, u: Usage) {
        add(lock(&self.usage).get_or_insert_with(Usage::default), u);
    }

    pub(super) fn budget_error(&self) -> ToolResult {
        failure(
            format!(
                "orchestration_budget_exceeded: {} sub-agents are already running (maxParallel); wait for them, or delegate one at a time",
                self.max_parallel
            ),
            "orchestration_budget_exceeded",
        )
        .with_data("maxParallel", self.max_parallel)
    }
}

/// Drops a child's stream events: hosts read the child's record or trace.
struct Discard;

impl EventSink for Discard {
    fn emit(&self, _: Event<'_>) {}
}

/// The child's params: the parent's provider, limits and tool surface, minus delegation
/// (depth 1), narrowed by the profile's or the configuration's `toolFilter`.
pub(super) fn child_params(
    p: &ChatParams,
    sub: &Subagent,
    profile: Option<&Profile>,
) -> ChatParams {
    let mut cfg = p.cfg.clone();
    if let Some(n) = profile.and_then(|pr| pr.max_rounds).or(sub.max_rounds) {
        cfg.max_rounds = n;
    }
    if let Some(n) = sub.max_tool_errors {
        cfg.max_tool_errors = n;
    }
    cfg.content_mode = ContentMode::All;
    cfg.raw_chunks = false;
    let model = profile.and_then(|pr| pr.model.as_ref());
    let filter = profile
        .and_then(|pr| pr.tool_filter.as_ref())
        .or(sub.tool_filter.as_ref());
    ChatParams {
        provider: model.map_or_else(|| p.provider.clone(), |m| m.provider.clone()),
        model: model.map_or_else(|| p.model.clone(), |m| m.model.clone()),
        pricing: model.map_or(p.pricing, |m| m.pricing),
        messages: Vec::new(),
        system_prompt: None,
        stream_id: p.stream_id.clone(),
        chat_id: p.chat_id.clone(),
        record_id: None,
        resume: false,
        from_record: false,
        cfg,
        host_fs: p.host_fs,
        image_input: model.map_or(p.image_input, |m| m.image_input),
        temperature: p.temperature,
        top_p: p.top_p,
        max_tokens: p.max_tokens,
        reasoning_effort: p.reasoning_effort.clone(),
        provider_options: p.provider_options.clone(),
        cwd: p.cwd.clone(),
        exec_sandbox: p.exec_sandbox.clone(),
        session_id: p.session_id.clone(),
        fork_until_seq: None,
        host_tools: p.host_tools.clone(),
        tool_context: p.tool_context.clone(),
        approval: p.approval,
        ask_user: false,
        subagent: None,
        tool_filter: filter.map(|f| f.iter().cloned().collect()),
        orchestration: None,
        // A child runs on its parent's router (MCP tools included) and starts no servers.
        mcp: Vec::new(),
        run_code: false,
        router: p.router.clone(),
    }
}

/// How long a delegation may take before the parent stops waiting: the child's own bounds
/// (its soft timeout, else a tool timeout per round), at most a day.
pub(super) fn backstop(child: &ChatParams) -> Duration {
    let per_rounds = child
        .cfg
        .tool_timeout
        .saturating_mul(u32::try_from(child.cfg.max_rounds + 1).unwrap_or(u32::MAX));
    child
        .cfg
        .soft_timeout
        .map_or(per_rounds, |s| s + child.cfg.tool_timeout)
        .min(Duration::from_millis(MAX_TIMEOUT_MS))
}

/// One delegation, ready to run.
pub(super) struct Job {
    /// Its place in the parallel budget, taken when the round's calls are laid out (in
    /// call order, whatever order their futures are first polled in); `None`: over it.
    pub slot: Option<Slot>,
    pub parent: Parent,
    pub params: ChatParams,
    pub profile: Option<Profile>,
    pub task: String,
    pub call_id: String,
    pub cancel: CancellationToken,
}

pub(super) fn failure(error: String, kind: &str) -> ToolResult {
    ToolResult {
        success: false,
        error: Some(error),
        ..Default::default()
    }
    .with_data("kind", kind)
}

/// Where a child reports to: its parent's stream, trace, totals and pool.
#[derive(Clone)]
pub(super) struct Parent {
    pub agent: Arc<Agent>,
    pub pool: Arc<Pool>,
    pub record: String,
    pub emit: Emitter,
    pub trace: Trace,
    pub totals: Totals,
}

/// A started child: its lineage id, record and trace.
pub(super) struct Started {
    pub child_id: String,
    pub record: String,
    pub trace: Trace,
}

/// How a child's turn ended.
pub(super) struct Outcome {
    pub status: Status,
    pub reason: String,
    pub answer: String,
    pub rounds: u64,
    pub usage: Usage,
}

impl Parent {
    /// An `agent.child` notification about a child.
    pub(super) fn notify(
        &self,
        e: &super::orchestrate::Entry,
        kind: &str,
        status: Option<&str>,
        error: Option<&str>,
    ) {
        self.emit.child(&AgentChild {
            stream_id: self.emit.stream_id.clone(),
            kind: kind.to_string(),
            child_id: e.id.clone(),
            depth: e.depth,
            task: (kind == "child_spawned").then(|| e.task.clone()),
            profile: Some(e.profile.clone()),
            record_id: Some(e.record.clone()),
            trace_id: Some(e.trace_id.clone()),
            status: status.map(str::to_string),
            error: error.map(str::to_string),
        });
    }

    /// Writes the child's seed record and opens its trace.
    pub(super) async fn start(
        &self,
        params: &ChatParams,
        task: &str,
        profile: &str,
        items: &[Message],
        call_id: &str,
    ) -> Result<Started, ToolResult> {
        let base = params.chat_id.clone().unwrap_or_else(|| {
            // Below the top, the parent's record already names the lineage.
            self.record
                .split(":child:")
                .next()
                .unwrap_or(&self.record)
                .to_string()
        });
        let (child_id, record) = seed_record(self, &base, task, items).await.map_err(|e| {
            failure(
                format!("the sub-agent's record cannot be written: {e}"),
                "storage",
            )
        })?;
        let trace = self.child_trace(
            params,
            &record,
            "subagent.run",
            json!({"recordId": record, "childId": child_id, "profile": profile,
                "parentTraceId": self.trace.id, "parentCallId": call_id}),
        );
        self.trace.event(
            "subagent_spawned",
            profile,
            Some(
                json!({"childId": child_id, "recordId": record, "traceId": trace.id,
                "callId": call_id, "profile": profile}),
            ),
        );
        Ok(Started {
            child_id,
            record,
            trace,
        })
    }

    /// A new trace for a child's turn, opened with `stage_start <stage>`.
    pub(super) fn child_trace(
        &self,
        params: &ChatParams,
        record: &str,
        stage: &str,
        attrs: Value,
    ) -> Trace {
        let trace = self.agent.traces.start(
            &params.stream_id,
            params.chat_id.clone(),
            params.session_id.clone(),
            &params.model,
            record,
        );
        trace.event("stage_start", stage, Some(attrs));
        trace
    }

    /// Runs one turn of a child on its record to its end (stored trace, usage added to the
    /// parent's totals and the pool's children usage) and reads its answer.
    pub(super) async fn run_turn(
        &self,
        params: ChatParams,
        record: &str,
        start: seed::Start,
        cancel: CancellationToken,
        trace: &Trace,
        steer: Option<&Arc<StreamHandle>>,
    ) -> Outcome {
        let stream_id = params.stream_id.clone();
        let handle = match steer {
            Some(h) => h.clone(),
            None => Arc::new(StreamHandle::new(
                stream_id.clone(),
                record.to_string(),
                cancel.clone(),
                params.cfg.steer_mode,
            )),
        };
        let totals: Totals = Arc::new(Mutex::new(Usage::default()));
        let turn = Turn::new(
            self.agent.clone(),
            params,
            handle,
            Emitter::new(Arc::new(Discard), stream_id),
            trace.clone(),
            record.to_string(),
            start,
            None,
            totals.clone(),
        );
        let c = with_watchdog(turn.run(), cancel, CANCEL_WATCHDOG).await;
        store_trace(&self.agent, trace, &c, record).await;
        let usage = *lock(&totals);
        add(&mut lock(&self.totals), usage);
        self.pool.add_usage(usage);
        let (answer, rounds) = answer_of(&self.agent, record).await;
        Outcome {
            status: c.status,
            reason: c.reason,
            answer,
            rounds,
            usage,
        }
    }
}

/// The result data every child reports: ids, status, rounds, usage, answer.
pub(super) fn outcome_data(e: &super::orchestrate::Entry, o: &Outcome) -> Map<String, Value> {
    let mut data = Map::new();
    data.insert("childId".into(), json!(e.id));
    data.insert("recordId".into(), json!(e.record));
    data.insert("traceId".into(), json!(e.trace_id));
    data.insert("profile".into(), json!(e.profile));
    data.insert("status".into(), json!(o.status.as_str()));
    data.insert("rounds".into(), json!(o.rounds));
    data.insert(
        "usage".into(),
        json!({"promptTokens": o.usage.prompt, "completionTokens": o.usage.completion,
            "totalTokens": o.usage.total, "cachedPromptTokens": o.usage.cached}),
    );
    data.insert("result".into(), json!(o.answer));
    data
}

/// The notification kind a child's end gets.
pub(super) fn end_kind(s: Status) -> &'static str {
    match s {
        Status::Completed => "child_completed",
        Status::Cancelled => "child_cancelled",
        Status::Failed | Status::BudgetExhausted => "child_failed",
    }
}

/// Runs the child to its end and turns it into the delegation's result.
pub(super) async fn run(mut job: Job) -> ToolResult {
    let Some(_slot) = job.slot.take() else {
        return job.parent.pool.budget_error();
    };
    let profile_name = job
        .profile
        .as_ref()
        .map_or(GENERAL.to_string(), |p| p.name.clone());
    let mut items = Vec::new();
    if let Some(sp) = job.profile.as_ref().and_then(|p| p.system_prompt.clone()) {
        items.push(Message::new(Role::System, sp));
    }
    items.push(Message::new(Role::User, job.task.clone()));
    let started = match job
        .parent
        .start(&job.params, &job.task, &profile_name, &items, &job.call_id)
        .await
    {
        Ok(s) => s,
        Err(r) => return r,
    };
    let entry = super::orchestrate::Entry::new(&started, &job.task, &profile_name, 1);
    job.parent.pool.register(entry.clone());
    job.parent.notify(&entry, "child_spawned", None, None);
    let n = items.len();
    let o = job
        .parent
        .run_turn(
            job.params,
            &started.record,
            seed::Start::stored(items, n),
            job.cancel,
            &started.trace,
            None,
        )
        .await;
    let ok = o.status == Status::Completed;
    job.parent.notify(
        &entry,
        end_kind(o.status),
        Some(o.status.as_str()),
        (!ok && o.status != Status::Cancelled).then_some(o.reason.as_str()),
    );
    entry.finish(&o);
    job.parent.pool.changed.notify_waiters();
    if ok {
        lock(&job.parent.pool.delegated).insert(profile_name);
    }
    let data = outcome_data(&entry, &o);
    if ok {
        ToolResult::ok(data)
    } else {
        ToolResult {
            success: false,
            error: Some(format!(
                "sub-agent {} ended {}: {}",
                entry.id,
                o.status.as_str(),
                o.reason
            )),
            data: Some(data),
            ..Default::default()
        }
    }
}

pub(super) fn add(t: &mut Usage, u: Usage) {
    t.prompt += u.prompt;
    t.completion += u.completion;
    t.total += u.total;
    t.cached += u.cached;
}

/// Picks the child's lineage id and writes its seed: the first free `<base>:child:<prefix>.N`
/// (ids continue across the chat's turns), linked to the parent record as it stands.
async fn seed_record(
    parent: &Parent,
    base: &str,
    task: &str,
    items: &[Message],
) -> Result<(String, String), String> {
    let messages: Vec<Value> = items.iter().map(persist::to_record).collect();
    let token_estimate = items.iter().map(persist::estimate_tokens).sum();
    let label: String = task.chars().take(80).collect();
    for _ in 0..MAX_NAME_PROBES {
        let n = parent.pool.next.fetch_add(1, Ordering::AcqRel) + 1;
        let child_id = format!("{}.{n}", parent.pool.prefix);
        let record = format!("{base}:child:{child_id}");
        let (rec, parent_record) = (record.clone(), parent.record.clone());
        let seed = Seed {
            source: None,
            messages: messages.clone(),
            label: Some(label.clone()),
            token_estimate,
        };
        let written = persist::call(&parent.agent.store, move |s| {
            if s.record_exists(&rec)? {
                return Ok(false);
            }
            let until = s.record_version(&parent_record)?.map(|next| next - 1);
            let seed = Seed {
                source: until.map(|u| (parent_record, u)),
                ..seed
            };
            s.append_seed(&rec, &seed)?;
            Ok(true)
        })
        .await
        .map_err(|e| e.to_string())?;
        if written {
            return Ok((child_id, record));
        }
    }
    Err(format!("no free child record name under {base}:child:"))
}

/// The child's final answer (its last assistant text) and how many rounds it took.
pub(super) async fn answer_of(agent: &Arc<Agent>, record: &str) -> (String, u64) {
    let Ok(Some(p)) = persist::projection(&agent.store, record).await else {
        return (String::new(), 0);
    };
    let msgs = seed::messages_of(&p);
    let rounds = msgs.iter().filter(|m| m.role == Role::Assistant).count() as u64;
    let answer = msgs
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && m.tool_calls.is_empty())
        .map(|m| m.content.clone())
        .unwrap_or_default();
    (answer, rounds)
}
