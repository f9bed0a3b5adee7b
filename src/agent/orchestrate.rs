//! Multi-agent orchestration: `orchestration: {enabled: true, maxDepth?, maxParallel?,
//! childMaxRounds?}` offers six tools with which the model drives child loops running in
//! the background: `agent_spawn`, `agent_wait`, `agent_send`, `agent_interrupt`,
//! `agent_close`, `agent_list`. They share the turn's pool (budget, lineage, registry) with
//! `delegate_subagent`; children still running when the turn ends are cancelled.
// The errors here are the tool results the model gets, built once per call: boxing them
// would buy nothing.
#![allow(clippy::result_large_err)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::chat::CANCEL_WATCHDOG;
use super::delegate::{self, Outcome, Parent, Pool, Slot, Started, lock};
use super::params::ChatParams;
use super::run::Status;
use super::stream::StreamHandle;
use super::{persist, seed};
use crate::llm::{Message, Role, Usage};
use crate::tools::ToolResult;

pub const SPAWN: &str = "agent_spawn";
pub const SEND: &str = "agent_send";
pub const WAIT: &str = "agent_wait";
pub const CLOSE: &str = "agent_close";
pub const LIST: &str = "agent_list";
pub const INTERRUPT: &str = "agent_interrupt";
pub const NAMES: [&str; 6] = [SPAWN, SEND, WAIT, CLOSE, LIST, INTERRUPT];
/// The profile name orchestrated children report.
pub const PROFILE: &str = "orchestrated";

const DEFAULT_MAX_DEPTH: u32 = 1;
const MAX_MAX_DEPTH: u32 = 4;
const DEFAULT_CHILD_MAX_ROUNDS: u64 = 8;
/// `agent_wait` without `timeoutMs`.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// The resolved `orchestration` param, as seen from one turn.
#[derive(Debug, Clone)]
pub struct Orchestration {
    pub max_depth: u32,
    pub max_parallel: u32,
    pub child_max_rounds: u64,
    /// 0 for the host's turn.
    pub depth: u32,
    /// Lineage prefix of this turn's children.
    pub prefix: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    enabled: bool,
    max_depth: Option<u32>,
    max_parallel: Option<u32>,
    child_max_rounds: Option<u64>,
}

/// `None` unless `enabled: true`.
pub fn parse(v: Option<&Value>, max_rounds_ceiling: u64) -> Result<Option<Orchestration>, String> {
    let raw: Raw = match v {
        None | Some(Value::Null) | Some(Value::Bool(false)) => return Ok(None),
        Some(v @ Value::Object(_)) => crate::strict::decode_at(v, "orchestration")?,
        Some(other) => {
            return Err(format!(
                "orchestration must be an object {{enabled: true, maxDepth?, maxParallel?, childMaxRounds?}}, got {other}"
            ));
        }
    };
    let max_depth = raw.max_depth.unwrap_or(DEFAULT_MAX_DEPTH);
    if !(1..=MAX_MAX_DEPTH).contains(&max_depth) {
        return Err(format!(
            "orchestration.maxDepth must be between 1 and {MAX_MAX_DEPTH}, got {max_depth}"
        ));
    }
    let max_parallel = raw
        .max_parallel
        .unwrap_or(super::subagent::DEFAULT_MAX_PARALLEL);
    if !(1..=super::subagent::MAX_MAX_PARALLEL).contains(&max_parallel) {
        return Err(format!(
            "orchestration.maxParallel must be between 1 and {}, got {max_parallel}",
            super::subagent::MAX_MAX_PARALLEL
        ));
    }
    let child_max_rounds = raw.child_max_rounds.unwrap_or(DEFAULT_CHILD_MAX_ROUNDS);
    if !(1..=max_rounds_ceiling).contains(&child_max_rounds) {
        return Err(format!(
            "orchestration.childMaxRounds must be between 1 and {max_rounds_ceiling}, got {child_max_rounds}"
        ));
    }
    Ok(raw.enabled.then(|| Orchestration {
        max_depth,
        max_parallel,
        child_max_rounds,
        depth: 0,
        prefix: "0".into(),
    }))
}

/// The six descriptors.
pub fn descriptors() -> Vec<Value> {
    let id = json!({"type": "string", "description": "The child's id, as agent_spawn returned it (e.g. \"0.1\")."});
    let tool = |name: &str, description: &str, properties: Value, required: &[&str]| {
        json!({"type": "function", "function": {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required,
                "additionalProperties": false}}})
    };
    vec![
        tool(
            SPAWN,
            "Start a child agent in the background on a self-contained task and return its id at once. The child has your tools (narrowed by toolFilter) and its own context: put everything it needs in task. Collect its answer with agent_wait.",
            json!({"task": {"type": "string"}, "toolFilter": {"type": "array", "items": {"type": "string"}, "description": "Tool names the child may use."}}),
            &["task"],
        ),
        tool(
            WAIT,
            "Wait for a child to finish and return its answer; if it is still running at timeoutMs, returns status \"running\".",
            json!({"childId": id, "timeoutMs": {"type": "integer", "minimum": 1}}),
            &["childId"],
        ),
        tool(
            SEND,
            "Send a message to a child: a running child gets it before its next step; a finished or interrupted child is resumed with it as a follow-up.",
            json!({"childId": id, "message": {"type": "string"}}),
            &["childId", "message"],
        ),
        tool(
            INTERRUPT,
            "Stop a running child; it stays addressable and agent_send resumes it.",
            json!({"childId": id}),
            &["childId"],
        ),
        tool(
            CLOSE,
            "Stop a child for good (if running) and refuse further messages to it.",
            json!({"childId": id}),
            &["childId"],
        ),
        tool(
            LIST,
            "List this turn's children with their status.",
            json!({}),
            &[],
        ),
    ]
}

/// What the last finished turn of a child gave.
#[derive(Clone)]
struct Last {
    status: Status,
    reason: String,
    answer: String,
    rounds: u64,
    usage: Usage,
}

#[derive(Default)]
struct State {
    running: Option<(CancellationToken, Arc<StreamHandle>)>,
    last: Option<Last>,
    interrupting: bool,
    interrupted: bool,
    closed: bool,
    /// Usage of the last turn not yet reported to the parent's model (`agent_wait`).
    unreported: Option<Usage>,
}

/// One child of a turn, delegated or orchestrated.
pub struct Entry {
    pub id: String,
    pub record: String,
    pub trace_id: String,
    pub task: String,
    pub profile: String,
    pub depth: u32,
    /// What a resumed turn runs with (orchestrated children only).
    params: Option<ChatParams>,
    state: Mutex<State>,
}

impl Entry {
    pub(super) fn new(s: &Started, task: &str, profile: &str, depth: u32) -> Arc<Entry> {
        Arc::new(Entry {
            id: s.child_id.clone(),
            record: s.record.clone(),
            trace_id: s.trace.id.clone(),
            task: task.to_string(),
            profile: profile.to_string(),
            depth,
            params: None,
            state: Mutex::new(State::default()),
        })
    }

    /// Records how a turn of the child ended.
    pub(super) fn finish(&self, o: &Outcome) {
        let mut st = lock(&self.state);
        st.running = None;
        st.interrupted = std::mem::take(&mut st.interrupting);
        st.unreported = Some(o.usage);
        st.last = Some(Last {
            status: o.status,
            reason: o.reason.clone(),
            answer: o.answer.clone(),
            rounds: o.rounds,
            usage: o.usage,
        });
    }

    fn status(&self) -> String {
        let st = lock(&self.state);
        if st.running.is_some() {
            "running".into()
        } else if st.closed {
            "closed".into()
        } else if st.interrupted {
            "interrupted".into()
        } else {
            st.last
                .as_ref()
                .map_or("running", |l| l.status.as_str())
                .to_string()
        }
    }

    fn running(&self) -> bool {
        lock(&self.state).running.is_some()
    }

    fn row(&self) -> Value {
        json!({"childId": self.id, "status": self.status(), "task": self.task,
            "recordId": self.record, "depth": self.depth, "profile": self.profile})
    }
}

impl Pool {
    pub(super) fn register(&self, e: Arc<Entry>) {
        lock(&self.children).push(e);
    }

    fn find(&self, id: &str) -> Option<Arc<Entry>> {
        lock(&self.children).iter().find(|e| e.id == id).cloned()
    }

    /// Waits until `done` holds or `within` passes; `done` is checked on every change.
    async fn wait_until(&self, within: Duration, done: impl Fn() -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done() {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return done();
            }
        }
    }

    /// Cancels the children still running and waits for them (the turn is ending).
    pub async fn wind_down(&self) {
        let running: Vec<Arc<Entry>> = lock(&self.children)
            .iter()
            .filter(|e| e.running())
            .cloned()
            .collect();
        if running.is_empty() {
            return;
        }
        for e in &running {
            if let Some((cancel, _)) = &lock(&e.state).running {
                cancel.cancel();
            }
        }
        let all_stopped = || running.iter().all(|e| !e.running());
        self.wait_until(CANCEL_WATCHDOG + Duration::from_secs(1), all_stopped)
            .await;
    }
}

/// What a call of one of the six tools runs with.
pub(super) struct Env {
    pub parent: Parent,
    /// What a child of this turn starts from (`child_params` of the parent's): the parent's
    /// own params hold the host's whole history, which no child needs.
    pub child: ChatParams,
    pub orchestration: Arc<Orchestration>,
    /// Token budget the parent has left.
    pub budget_left: u64,
    /// The parent turn's cancel: children are cancelled with it.
    pub turn_cancel: CancellationToken,
    pub call_id: String,
}

fn id_of(args: &Value) -> Result<&str, ToolResult> {
    args.get("childId")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ToolResult::recoverable("childId is required: the id agent_spawn returned"))
}

fn entry(pool: &Pool, args: &Value) -> Result<Arc<Entry>, ToolResult> {
    let id = id_of(args)?;
    pool.find(id).ok_or_else(|| {
        let known: Vec<String> = lock(&pool.children).iter().map(|e| e.id.clone()).collect();
        ToolResult::recoverable(format!(
            "no child {id} in this turn; children: {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ))
        .with_data("kind", "unknown_child")
    })
}

fn ok(pairs: &[(&str, Value)]) -> ToolResult {
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert((*k).to_string(), v.clone());
    }
    ToolResult::ok(m)
}

/// Runs one of the six tools.
pub(super) async fn call(env: Env, name: &str, args: Value) -> ToolResult {
    let r = match name {
        SPAWN => spawn(&env, &args).await,
        WAIT => wait(&env, &args).await,
        SEND => send(&env, &args).await,
        INTERRUPT => stop(&env, &args, false).await,
        CLOSE => stop(&env, &args, true).await,
        LIST => Ok(ok(&[(
            "children",
            Value::Array(
                lock(&env.parent.pool.children)
                    .iter()
                    .map(|e| e.row())
                    .collect(),
            ),
        )])),
        other => Err(ToolResult::recoverable(format!("unknown tool {other}"))),
    };
    r.unwrap_or_else(|e| e)
}

async fn spawn(env: &Env, args: &Value) -> Result<ToolResult, ToolResult> {
    let task = args
        .get("task")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ToolResult::recoverable("task is required: the whole sub-task, with what to return")
        })?;
    let filter: Option<Vec<String>> = match args.get("toolFilter") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    ToolResult::recoverable("toolFilter must be a list of tool names")
                })?,
        ),
        Some(_) => {
            return Err(ToolResult::recoverable(
                "toolFilter must be a list of tool names",
            ));
        }
    };
    let filter = super::subagent::filter(filter, "toolFilter")
        .map_err(ToolResult::recoverable)?
        .map(Arc::from);
    let Some(slot) = env.parent.pool.acquire() else {
        return Err(env.parent.pool.budget_error());
    };
    let o = &env.orchestration;
    let mut params = env.child.clone();
    params.cfg.max_rounds = o.child_max_rounds;
    params.cfg.budget_tokens = params.cfg.budget_tokens.min(env.budget_left.max(1));
    params.tool_filter = filter;
    let items = vec![Message::new(Role::User, task.to_string())];
    let started = env
        .parent
        .start(&params, task, PROFILE, &items, &env.call_id)
        .await?;
    params.orchestration = (o.depth + 1 < o.max_depth).then(|| {
        Arc::new(Orchestration {
            depth: o.depth + 1,
            prefix: started.child_id.clone(),
            ..(**o).clone()
        })
    });
    let mut e = Entry::new(&started, task, PROFILE, o.depth + 1);
    if let Some(e) = Arc::get_mut(&mut e) {
        e.params = Some(params.clone());
    }
    env.parent.pool.register(e.clone());
    env.parent.notify(&e, "child_spawned", None, None);
    let n = items.len();
    launch(
        env,
        &e,
        params,
        seed::Start::stored(items, n),
        started.trace,
        slot,
    );
    Ok(ok(&[
        ("childId", json!(e.id)),
        ("recordId", json!(e.record)),
        ("status", json!("running")),
    ]))
}

/// Runs a turn of the child in the background (tracked work), reporting its end.
fn launch(
    env: &Env,
    e: &Arc<Entry>,
    params: ChatParams,
    start: seed::Start,
    trace: super::trace::Trace,
    slot: Slot,
) {
    let cancel = env.turn_cancel.child_token();
    let handle = Arc::new(StreamHandle::new(
        params.stream_id.clone(),
        e.record.clone(),
        cancel.clone(),
        params.cfg.steer_mode,
    ));
    {
        let mut st = lock(&e.state);
        st.running = Some((cancel.clone(), handle.clone()));
        st.interrupted = false;
    }
    let (parent, e) = (env.parent.clone(), e.clone());
    let agent = parent.agent.clone();
    agent.lifecycle.spawn(async move {
        let record = e.record.clone();
        let o = parent
            .run_turn(params, &record, start, cancel, &trace, Some(&handle))
            .await;
        drop(slot);
        let interrupted = lock(&e.state).interrupting;
        let kind = if interrupted {
            "child_interrupted"
        } else {
            delegate::end_kind(o.status)
        };
        let failed = matches!(o.status, Status::Failed | Status::BudgetExhausted);
        parent.notify(
            &e,
            kind,
            Some(if interrupted {
                "interrupted"
            } else {
                o.status.as_str()
            }),
            failed.then_some(o.reason.as_str()),
        );
        e.finish(&o);
        parent.pool.changed.notify_waiters();
    });
}

async fn wait(env: &Env, args: &Value) -> Result<ToolResult, ToolResult> {
    let e = entry(&env.parent.pool, args)?;
    let within = match args.get("timeoutMs") {
        None | Some(Value::Null) => DEFAULT_WAIT,
        Some(v) => Duration::from_millis(v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
            ToolResult::recoverable("timeoutMs must be a positive number of milliseconds")
        })?),
    }
    .min(env.child.cfg.tool_timeout);
    let stopped = env.parent.pool.wait_until(within, || !e.running()).await;
    if !stopped {
        return Ok(ok(&[
            ("childId", json!(e.id)),
            ("status", json!("running")),
        ]));
    }
    let (last, usage) = {
        let mut st = lock(&e.state);
        (st.last.clone(), st.unreported.take())
    };
    let Some(last) = last else {
        return Ok(ok(&[
            ("childId", json!(e.id)),
            ("status", json!(e.status())),
        ]));
    };
    let o = Outcome {
        status: last.status,
        reason: last.reason.clone(),
        answer: last.answer,
        rounds: last.rounds,
        usage: last.usage,
    };
    let mut data = delegate::outcome_data(&e, &o);
    data.insert("status".into(), json!(e.status()));
    // The parent's budget counts a child's usage once, when its model first sees it.
    if usage.is_none() {
        data.remove("usage");
    }
    if matches!(o.status, Status::Failed | Status::BudgetExhausted) {
        data.insert("reason".into(), json!(last.reason));
    }
    Ok(ToolResult::ok(data))
}

async fn send(env: &Env, args: &Value) -> Result<ToolResult, ToolResult> {
    let e = entry(&env.parent.pool, args)?;
    let message = args
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| ToolResult::recoverable("message is required"))?
        .to_string();
    {
        let st = lock(&e.state);
        if st.closed {
            return Err(ToolResult::recoverable(format!(
                "child {} is closed (agent_close); spawn a new one",
                e.id
            ))
            .with_data("kind", "child_closed"));
        }
        if let Some((_, handle)) = &st.running {
            handle.steer(message);
            return Ok(ok(&[
                ("childId", json!(e.id)),
                ("status", json!("running")),
                ("delivered", json!("steer")),
            ]));
        }
    }
    let Some(params) = e.params.clone() else {
        return Err(ToolResult::recoverable(format!(
            "child {} was a delegate_subagent call; it cannot be resumed",
            e.id
        )));
    };
    let Some(slot) = env.parent.pool.acquire() else {
        return Err(env.parent.pool.budget_error());
    };
    let projected = persist::projection(&env.parent.agent.store, &e.record)
        .await
        .map_err(|err| {
            ToolResult::recoverable(format!("the child's record cannot be read: {err}"))
        })?
        .unwrap_or_default();
    let mut items = seed::messages_of(&projected);
    let n = items.len();
    items.push(Message::new(Role::User, message));
    let trace = env.parent.child_trace(
        &params,
        &e.record,
        "subagent.resume",
        json!({"recordId": e.record, "childId": e.id, "parentTraceId": env.parent.trace.id}),
    );
    env.parent.notify(&e, "child_resumed", None, None);
    launch(env, &e, params, seed::Start::stored(items, n), trace, slot);
    Ok(ok(&[
        ("childId", json!(e.id)),
        ("status", json!("running")),
        ("delivered", json!("resumed")),
    ]))
}

/// `agent_interrupt` (`close: false`) and `agent_close`.
async fn stop(env: &Env, args: &Value, close: bool) -> Result<ToolResult, ToolResult> {
    let e = entry(&env.parent.pool, args)?;
    {
        let mut st = lock(&e.state);
        if close {
            st.closed = true;
        }
        if let Some((cancel, _)) = st.running.clone() {
            if !close {
                st.interrupting = true;
            }
            cancel.cancel();
        }
    }
    env.parent
        .pool
        .wait_until(CANCEL_WATCHDOG + Duration::from_secs(1), || !e.running())
        .await;
    Ok(ok(&[
        ("childId", json!(e.id)),
        ("status", json!(e.status())),
    ]))
}
