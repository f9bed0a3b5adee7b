//! Starting a turn: register the stream, pick its record, prepare the starting transcript
//! (fork, resume, or the host's history reconciled with the record), then — once the host
//! has its `{streamId}` answer — run the loop as tracked work and finish with exactly one
//! `Done` carrying the usage and cost.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::events::{Done, UsageReport};
use super::notices::Emitter;
use super::params::{ChatParams, Method};
use super::persist;
use super::run::{Completion, Status, Totals, Turn};
use super::seed::{self, Start};
use super::stream::StreamHandle;
use super::trace::Trace;
use super::{Agent, AgentError};
use crate::llm::catalog::Pricing;
use crate::llm::{Message, Role, Usage};
use crate::store::{CutPoint, ErrorClass, ForkRequest, StoreError};

/// After a cancel, a turn that has not wound down within this long is dropped (hard stop).
pub const CANCEL_WATCHDOG: Duration = Duration::from_secs(5);

impl From<StoreError> for AgentError {
    fn from(e: StoreError) -> Self {
        match e.class() {
            ErrorClass::NotFound => AgentError::NotFound(e.to_string()),
            ErrorClass::InvalidParams => AgentError::InvalidParams(e.to_string()),
            ErrorClass::Storage => AgentError::Storage(e.to_string()),
        }
    }
}

pub use crate::protocol::chat::StreamStarted as Started;

/// A turn ready to run: everything that can fail before the host's answer has.
pub struct Prepared {
    agent: Arc<Agent>,
    turn: Turn,
    handle: Arc<StreamHandle>,
    emit: Emitter,
    trace: Trace,
    totals: Totals,
    pricing: Option<Pricing>,
    record_id: String,
    shutdown: CancellationToken,
    pub started: Started,
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

/// The starting transcript, with the store checks that must fail before the answer.
async fn starting_transcript(
    agent: &Agent,
    p: &mut ChatParams,
    method: Method,
) -> Result<Starting, AgentError> {
    let store = &agent.store;
    if method == Method::Fork {
        let source = p.record_id.clone().unwrap_or_default();
        let new_id = record_for(p, method);
        let req = ForkRequest {
            source,
            cut: p.fork_until_seq.map_or(CutPoint::Whole, CutPoint::UntilSeq),
            new_record_id: Some(new_id.clone()),
            label: None,
        };
        persist::call(store, move |s| s.fork(&req)).await?;
        let projected = persist::projection(store, &new_id)
            .await?
            .unwrap_or_default();
        let mut start = seed::resume(seed::messages_of(&projected), p.system_prompt.as_deref());
        start.items.extend(std::mem::take(&mut p.messages));
        let count = start.items.len();
        return Ok(Starting {
            record: new_id,
            start,
            seed_count: Some(count),
            version: None,
        });
    }
    let record = record_for(p, method);
    if p.from_record {
        // Continue the record: its projection is the seed and the sent messages follow it,
        // so a host sends only what is new.
        if p.resume {
            return Err(AgentError::InvalidParams(
                "fromRecord and resume are exclusive: resume continues without new messages, \
                 fromRecord appends the messages you send"
                    .into(),
            ));
        }
        if p.record_id.is_none() && p.chat_id.is_none() {
            return Err(AgentError::InvalidParams(
                "fromRecord: true requires recordId (or chatId) naming the record to continue"
                    .into(),
            ));
        }
        let (mine, version) = transcript(agent, &record).await?.ok_or_else(|| {
            AgentError::NotFound(format!(
                "record not found: {record}; start it without fromRecord"
            ))
        })?;
        let mut start = seed::resume(mine, p.system_prompt.as_deref());
        start.items.extend(std::mem::take(&mut p.messages));
        return Ok(Starting::at(record, start, version));
    }
    if p.resume {
        let (mine, version) = transcript(agent, &record)
            .await?
            .filter(|(v, _)| !v.is_empty())
            .ok_or_else(|| {
                AgentError::InvalidParams(format!(
                    "record {record} has no history to resume; start it with messages instead"
                ))
            })?;
        let start = seed::resume(mine, p.system_prompt.as_deref());
        return Ok(Starting::at(record, start, version));
    }
    // The sent messages as they are (moving thousands into a new list faulted in its pages).
    let mut host = std::mem::take(&mut p.messages);
    if let Some(sp) = &p.system_prompt {
        host.insert(0, Message::new(Role::System, sp.clone()));
    }
    let (mine, version) = transcript(agent, &record).await?.unwrap_or_default();
    let seen = agent
        .transcripts
        .take(&super::transcripts::seen_key(&record), version);
    let start = seed::reconcile(store, &record, mine, host, seen).await?;
    Ok(Starting::at(record, start, version))
}

/// Where a turn starts: its record, transcript, the seed size of a fork, and the record's
/// version the transcript was read at.
struct Starting {
    record: String,
    start: Start,
    seed_count: Option<usize>,
    version: Option<i64>,
}

impl Starting {
    fn at(record: String, start: Start, version: i64) -> Starting {
        Starting {
            record,
            start,
            seed_count: None,
            version: Some(version),
        }
    }
}

/// The record's transcript and version (`None` when it does not exist): from memory when
/// the last turn on it left a current copy, else read from the store.
async fn transcript(
    agent: &Agent,
    record: &str,
) -> Result<Option<(Vec<Message>, i64)>, StoreError> {
    // Only a kept copy needs the version first; otherwise one store call reads both.
    if agent.transcripts.holds(record) {
        let rec = record.to_string();
        let Some(version) = persist::call(&agent.store, move |s| s.record_version(&rec)).await?
        else {
            return Ok(None);
        };
        if let Some(items) = agent.transcripts.take(record, version) {
            return Ok(Some((items, version)));
        }
    }
    let rec = record.to_string();
    persist::call(&agent.store, move |s| {
        // Read together, so the version names exactly what was read.
        let Some(version) = s.record_version(&rec)? else {
            return Ok(None);
        };
        let projected = s.projection(&rec)?;
        Ok(Some((seed::messages_of(&projected), version)))
    })
    .await
}

/// Registers the stream and prepares its turn. Nothing is sent to the host yet.
pub async fn prepare(
    agent: &Arc<Agent>,
    mut p: ChatParams,
    method: Method,
) -> Result<Prepared, AgentError> {
    // Registered before the store is touched: a second turn on the same record (or stream
    // id) is refused before it can write anything.
    let record_id = record_for(&p, method);
    let shutdown = agent.lifecycle.token();
    let handle = Arc::new(StreamHandle::new(
        p.stream_id.clone(),
        record_id,
        shutdown.child_token(),
        p.cfg.steer_mode,
    ));
    agent
        .streams
        .insert(handle.clone())
        .map_err(|e| AgentError::InvalidParams(e.0))?;
    let Starting {
        record: record_id,
        start,
        seed_count,
        version,
    } = match starting_transcript(agent, &mut p, method).await {
        Ok(v) => v,
        Err(e) => {
            agent.streams.remove(&p.stream_id);
            return Err(e);
        }
    };
    // A resumed record, or one continued (`fromRecord`) by a process that has not seen the
    // session yet (a restart, an editor's `session/load`), gets its read state back from the
    // record; a session this process already follows keeps its own, more exact state.
    let session_key = p.session_id.clone().unwrap_or_else(|| record_id.clone());
    if p.resume || (p.from_record && !agent.fs.state.knows(Some(&session_key))) {
        reseed_read_state(agent, &p, &record_id, &start.items);
    }
    let stream_id = p.stream_id.clone();
    let emit = Emitter::new(agent.sink.clone(), stream_id.clone());
    let trace = agent.traces.start(
        &stream_id,
        p.chat_id.clone(),
        p.session_id.clone(),
        &p.model,
        &record_id,
    );
    trace.event(
        "stage_start",
        "coreloop.run",
        Some(json!({"recordId": record_id, "resume": p.resume})),
    );
    let totals: Totals = Arc::new(Mutex::new(Usage::default()));
    let pricing = p.pricing;
    let started = Started {
        stream_id,
        seed_messages: seed_count,
        record_id: seed_count.map(|_| record_id.clone()),
        trace_id: Some(trace.id.clone()),
    };
    let turn = Turn::new(
        agent.clone(),
        p,
        handle.clone(),
        emit.clone(),
        trace.clone(),
        record_id.clone(),
        start,
        version,
        totals.clone(),
    );
    Ok(Prepared {
        agent: agent.clone(),
        turn,
        handle,
        emit,
        trace,
        totals,
        pricing,
        record_id,
        shutdown,
        started,
    })
}

impl Prepared {
    /// Runs the turn as tracked work; its `Done` is the last event of the stream.
    pub fn launch(self) {
        let Prepared {
            agent,
            turn,
            handle,
            emit,
            trace,
            totals,
            pricing,
            record_id,
            shutdown,
            ..
        } = self;
        let lifecycle = agent.lifecycle.clone();
        let pool = turn.pool.clone();
        let chat_key = turn.session_key();
        lifecycle.spawn(async move {
            let mut c = with_watchdog(turn.run(), handle.cancel.clone(), CANCEL_WATCHDOG).await;
            if c.status == Status::Cancelled {
                // What the chat left running across turns (terminals) ends with it.
                agent.router.chat_cancelled(&chat_key);
            }
            if c.status == Status::Cancelled && shutdown.is_cancelled() {
                c.reason = "cancelled by shutdown".into();
            }
            store_trace(&agent, &trace, &c, &record_id).await;
            let settings = agent.config.settings();
            if settings.otlp_auto_export {
                crate::otlp::auto_export(trace.snapshot(), settings);
            }
            let failed = c.status == Status::Failed;
            let reason = c.reason;
            if failed {
                emit.error("LoopError", &reason, &trace.id);
            }
            let u = *totals.lock().unwrap_or_else(|e| e.into_inner());
            let mut usage = usage_report(u, pricing);
            usage.children = pool.children_usage().map(|c| super::events::ChildUsage {
                prompt_tokens: c.prompt,
                completion_tokens: c.completion,
                total_tokens: c.total,
                cached_prompt_tokens: c.cached,
            });
            let done = Done {
                stream_id: emit.stream_id.clone(),
                ok: c.status == Status::Completed,
                status: c.status.as_str().to_string(),
                reason,
                trace_id: trace.id.clone(),
                record_id,
                usage,
                cancelled: (c.status == Status::Cancelled).then_some(true),
            };
            // Unregister before done: a host reacting to done sees the stream as gone.
            agent.streams.remove(&emit.stream_id);
            emit.done(&done);
        });
    }
}

/// Token totals and, for priced models, the cost in USD.
pub fn usage_report(u: Usage, pricing: Option<Pricing>) -> UsageReport {
    let cost_usd = pricing.map(|pr| {
        let uncached = u.prompt.saturating_sub(u.cached) as f64;
        let cached_rate = pr.cached_per_mtok.unwrap_or(pr.prompt_per_mtok);
        (uncached * pr.prompt_per_mtok
            + u.cached as f64 * cached_rate
            + u.completion as f64 * pr.completion_per_mtok)
            / 1_000_000.0
    });
    UsageReport {
        prompt_tokens: u.prompt,
        completion_tokens: u.completion,
        total_tokens: u.total,
        cached_prompt_tokens: u.cached,
        cost_usd,
        children: None,
    }
}

/// Closes a finished turn's trace and stores it (before `done`, so a host holding the
/// done's traceId can fetch it even after a restart). A failed write costs only the trace.
pub(super) async fn store_trace(
    agent: &Arc<Agent>,
    trace: &Trace,
    c: &Completion,
    record_id: &str,
) {
    let failed = c.status == Status::Failed;
    trace.event(
        "completion",
        "completion",
        Some(json!({"status": c.status.as_str(), "reason": c.reason})),
    );
    trace.finish(c.status.as_str(), failed.then(|| c.reason.clone()));
    // Retention runs with the process's first stored trace and then every
    // `PRUNE_EVERY`th, in the same transaction (a full scan of `traces`: not every turn).
    static STORED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = STORED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let prune = n.is_multiple_of(PRUNE_EVERY).then(|| {
        let s = agent.config.settings();
        let day_ms = 24 * 3600 * 1000;
        let cutoff = crate::clock::now_ms().saturating_sub(s.trace_retention_days * day_ms);
        (crate::clock::iso8601_ms(cutoff), s.trace_max_stored)
    });
    match trace.store(record_id, prune).await {
        // In the store: the memory copy may now go when memory is short.
        Ok((body, pruned)) => {
            if pruned > 0 {
                tracing::debug!("trace retention removed {pruned} stored trace(s)");
            }
            agent.traces.stored(&trace.id, body)
        }
        Err(e) => tracing::warn!("trace {}: cannot persist it: {e}", trace.id),
    }
}

/// Stored traces between two retention passes.
const PRUNE_EVERY: u64 = 64;

/// Runs a turn; once `cancel` fires, the turn gets `after` to wind down cooperatively and is
/// then dropped (its tools' process groups die with their guards) and reported cancelled.
pub(super) async fn with_watchdog(
    run: impl std::future::Future<Output = Completion>,
    cancel: CancellationToken,
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

/// Resume rebuilds the file tools' read-before-write evidence from the record.
fn reseed_read_state(agent: &Agent, p: &ChatParams, record_id: &str, items: &[Message]) {
    let fs = &agent.fs;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn watchdog_hard_stops_a_wedged_turn() {
        let cancel = CancellationToken::new();
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
        let cancel = CancellationToken::new();
        let done = async {
            Completion {
                status: Status::Completed,
                reason: "ok".into(),
            }
        };
        let c = with_watchdog(done, cancel, Duration::from_millis(1)).await;
        assert_eq!(c.status, Status::Completed);
    }

    #[test]
    fn cost_only_for_priced_models() {
        let u = Usage {
            prompt: 1_000_000,
            completion: 1_000_000,
            total: 2_000_000,
            cached: 0,
            cache_write: 0,
        };
        assert_eq!(usage_report(u, None).cost_usd, None);
        let pr = Pricing {
            prompt_per_mtok: 1.0,
            completion_per_mtok: 2.0,
            cached_per_mtok: None,
        };
        assert_eq!(usage_report(u, Some(pr)).cost_usd, Some(3.0));
    }
}
