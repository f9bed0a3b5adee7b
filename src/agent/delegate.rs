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
    usage: Mutex<Option<Usage>>,
    /// Profiles a child completed for (`requiredProfiles`).
    delegated: Mutex<BTreeSet<String>>,
}

/// A place in the pool, given back when dropped.
struct Slot(Arc<Pool>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    pub fn new(max_parallel: u32) -> Arc<Pool> {
        Arc::new(Pool {
            max_parallel,
            active: AtomicU32::new(0),
            next: AtomicU32::new(0),
            usage: Mutex::new(None),
            delegated: Mutex::new(BTreeSet::new()),
        })
    }

    fn acquire(self: &Arc<Self>) -> Option<Slot> {
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
    pub agent: Arc<Agent>,
    pub pool: Arc<Pool>,
    pub params: ChatParams,
    pub profile: Option<Profile>,
    pub task: String,
    pub parent_record: String,
    pub parent_emit: Emitter,
    pub parent_trace: Trace,
    pub parent_totals: Totals,
    pub call_id: String,
    pub cancel: CancellationToken,
}

fn failure(error: String, kind: &str) -> ToolResult {
    ToolResult {
        success: false,
        error: Some(error),
        ..Default::default()
    }
    .with_data("kind", kind)
}

/// Runs the child to its end and turns it into the delegation's result.
pub(super) async fn run(job: Job) -> ToolResult {
    let Some(_slot) = job.pool.acquire() else {
        return failure(
            format!(
                "orchestration_budget_exceeded: {} sub-agents are already running (maxParallel); wait for them, or delegate one at a time",
                job.pool.max_parallel
            ),
            "orchestration_budget_exceeded",
        )
        .with_data("maxParallel", job.pool.max_parallel);
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
    let base = job
        .params
        .chat_id
        .clone()
        .unwrap_or_else(|| job.parent_record.clone());
    let (child_id, record) = match seed_record(&job, &base, &items).await {
        Ok(v) => v,
        Err(e) => {
            return failure(
                format!("the sub-agent's record cannot be written: {e}"),
                "storage",
            );
        }
    };
    let stream_id = job.params.stream_id.clone();
    let trace = job.agent.traces.start(
        &stream_id,
        job.params.chat_id.clone(),
        job.params.session_id.clone(),
        &job.params.model,
    );
    trace.event(
        "stage_start",
        "subagent.run",
        Some(
            json!({"recordId": record, "childId": child_id, "profile": profile_name,
            "parentTraceId": job.parent_trace.id, "parentCallId": job.call_id}),
        ),
    );
    job.parent_trace.event(
        "subagent_spawned",
        super::subagent::NAME,
        Some(
            json!({"childId": child_id, "recordId": record, "traceId": trace.id,
            "callId": job.call_id, "profile": profile_name}),
        ),
    );
    let note = |kind: &str, status: Option<&str>, error: Option<&str>| AgentChild {
        stream_id: stream_id.clone(),
        kind: kind.to_string(),
        child_id: child_id.clone(),
        depth: 1,
        task: (kind == "child_spawned").then(|| job.task.clone()),
        profile: Some(profile_name.clone()),
        record_id: Some(record.clone()),
        trace_id: Some(trace.id.clone()),
        status: status.map(str::to_string),
        error: error.map(str::to_string),
    };
    job.parent_emit.child(&note("child_spawned", None, None));

    let handle = Arc::new(StreamHandle::new(
        stream_id.clone(),
        record.clone(),
        job.cancel.clone(),
        job.params.cfg.steer_mode,
    ));
    let totals: Totals = Arc::new(Mutex::new(Usage::default()));
    let n = items.len();
    let turn = Turn::new(
        job.agent.clone(),
        job.params,
        handle,
        Emitter::new(Arc::new(Discard), stream_id.clone()),
        trace.clone(),
        record.clone(),
        seed::Start {
            items,
            persisted: n,
            canonical: Some(n),
        },
        None,
        totals.clone(),
    );
    let c = with_watchdog(turn.run(), job.cancel.clone(), CANCEL_WATCHDOG).await;
    store_trace(&job.agent, &trace, &c, &record).await;

    let used = *lock(&totals);
    add(&mut lock(&job.parent_totals), used);
    add(
        lock(&job.pool.usage).get_or_insert_with(Usage::default),
        used,
    );
    let (answer, rounds) = answer_of(&job.agent, &record).await;
    let (kind, ok) = match c.status {
        Status::Completed => ("child_completed", true),
        Status::Cancelled => ("child_cancelled", false),
        Status::Failed | Status::BudgetExhausted => ("child_failed", false),
    };
    job.parent_emit.child(&note(
        kind,
        Some(c.status.as_str()),
        (!ok && c.status != Status::Cancelled).then_some(c.reason.as_str()),
    ));
    if ok {
        lock(&job.pool.delegated).insert(profile_name.clone());
    }
    let mut data = Map::new();
    data.insert("childId".into(), json!(child_id));
    data.insert("recordId".into(), json!(record));
    data.insert("traceId".into(), json!(trace.id));
    data.insert("profile".into(), json!(profile_name));
    data.insert("status".into(), json!(c.status.as_str()));
    data.insert("rounds".into(), json!(rounds));
    data.insert(
        "usage".into(),
        json!({"promptTokens": used.prompt, "completionTokens": used.completion,
            "totalTokens": used.total, "cachedPromptTokens": used.cached}),
    );
    data.insert("result".into(), json!(answer));
    if ok {
        ToolResult::ok(data)
    } else {
        ToolResult {
            success: false,
            error: Some(format!(
                "sub-agent {child_id} ended {}: {}",
                c.status.as_str(),
                c.reason
            )),
            data: Some(data),
            ..Default::default()
        }
    }
}

fn add(t: &mut Usage, u: Usage) {
    t.prompt += u.prompt;
    t.completion += u.completion;
    t.total += u.total;
    t.cached += u.cached;
}

/// Picks the child's lineage id and writes its seed: the first free `<base>:child:0.N`
/// (ids continue across the chat's turns), linked to the parent record as it stands.
async fn seed_record(job: &Job, base: &str, items: &[Message]) -> Result<(String, String), String> {
    let messages: Vec<Value> = items.iter().map(persist::to_record).collect();
    let token_estimate = items.iter().map(persist::estimate_tokens).sum();
    let label: String = job.task.chars().take(80).collect();
    for _ in 0..MAX_NAME_PROBES {
        let n = job.pool.next.fetch_add(1, Ordering::AcqRel) + 1;
        let child_id = format!("0.{n}");
        let record = format!("{base}:child:{child_id}");
        let (rec, parent) = (record.clone(), job.parent_record.clone());
        let seed = Seed {
            source: None,
            messages: messages.clone(),
            label: Some(label.clone()),
            token_estimate,
        };
        let written = persist::call(&job.agent.store, move |s| {
            if s.record_exists(&rec)? {
                return Ok(false);
            }
            let until = s.record_version(&parent)?.map(|next| next - 1);
            let seed = Seed {
                source: until.map(|u| (parent, u)),
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
async fn answer_of(agent: &Arc<Agent>, record: &str) -> (String, u64) {
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
