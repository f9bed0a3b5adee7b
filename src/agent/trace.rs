//! Per-stream traces (`trace.fetch`): one `llm.request` span per provider request, one span
//! per tool execution, and one event per loop event. Kept in memory, newest `MAX_TRACES`;
//! also written to the store as they go (`trace_writer`): the header when the stream starts,
//! each span as it finishes (a crash keeps them), the whole trace when it finishes. The store
//! answers `trace.fetch` once the memory copy is gone (evicted, or the process restarted).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use crate::clock::{iso8601_ms, now_ms};
use crate::store::{Store, TraceRow, TraceWrite};

pub use super::trace_writer::{Finished, Writer};

/// Traces kept in memory; the oldest finished one is dropped beyond this.
pub const MAX_TRACES: usize = 256;
/// Events recorded per trace; later ones are counted but not stored (a runaway turn must
/// not grow memory without bound).
pub const MAX_EVENTS: usize = 10_000;
/// Characters of an event payload kept (reference: ~500).
pub const PAYLOAD_CHARS: usize = 500;

/// The trace's parts are the wire types: the store keeps exactly what `trace.fetch` answers.
pub use crate::protocol::session::{
    TraceEvent as Event, TraceFetchResult as TraceData, TraceHeader as Header, TraceSpan as Span,
};

/// A stored trace left `running` by a process that ended mid-stream: reported as
/// `interrupted` (by `trace.fetch` and `outrigger inspect` alike); its finished spans stay.
pub fn mark_interrupted(h: &mut Header) {
    if h.status == "running" {
        h.status = "interrupted".into();
        h.had_error = true;
        h.error_message = Some("the process ended before this stream finished".into());
    }
}

/// Reads a stored body back (`store::TraceRow::body`).
pub fn from_stored(body: Value) -> Result<TraceData, serde_json::Error> {
    serde_json::from_value(body)
}

struct Data {
    header: Header,
    spans: Vec<Span>,
    events: Vec<Event>,
    finished: bool,
}

/// `TraceData` borrowed: the same fields, serialised to the same JSON.
#[derive(serde::Serialize)]
struct BodyRef<'a> {
    trace: &'a Header,
    spans: &'a [Span],
    events: &'a [Event],
}

/// A stored body `{trace, spans, events}` (a running trace's header row has no spans or
/// events: they are rows of their own).
fn body_json(trace: &Header, spans: &[Span], events: &[Event]) -> String {
    serde_json::to_string(&BodyRef {
        trace,
        spans,
        events,
    })
    .unwrap_or_else(|_| "null".into())
}

/// A finished span waiting in the trace writer's queue, read from its trace when the batch
/// is committed.
pub struct SpanRef {
    data: Arc<Mutex<Data>>,
    pub trace_id: String,
    pub seq: usize,
}

impl SpanRef {
    /// The span's store write: its JSON and, when `header` and the trace is still running,
    /// the trace's running header as it is now (`None` once finished: its whole body is on
    /// its way). `None` for a span index the trace does not have.
    pub fn write(&self, header: bool) -> Option<TraceWrite> {
        let d = self.data.lock().unwrap_or_else(|e| e.into_inner());
        let body = serde_json::to_string(d.spans.get(self.seq)?).ok()?;
        let header = (header && !d.finished).then(|| body_json(&d.header, &[], &[]));
        Some(TraceWrite::Span {
            trace_id: self.trace_id.clone(),
            seq: self.seq,
            body,
            header,
        })
    }
}

/// A handle the loop writes through.
#[derive(Clone)]
pub struct Trace {
    data: Arc<Mutex<Data>>,
    pub id: String,
    /// Where finished spans go as they finish (`None`: kept in memory only).
    writer: Option<Arc<Writer>>,
}

/// The payload as it is when its JSON is at most `PAYLOAD_CHARS` characters, else its first
/// `PAYLOAD_CHARS` as `{truncated}`. Serialises no further than it needs: a large tool
/// result was written whole (through `Display`, the slow path) only to be cut.
fn clip(v: Value) -> Value {
    // A UTF-8 character is at most 4 bytes, so this many bytes hold more than the limit.
    let mut w = Capped {
        // Most payloads are a few fields: one allocation, not a chain of doublings.
        buf: Vec::with_capacity(512),
        cap: 4 * (PAYLOAD_CHARS + 1),
    };
    let whole = serde_json::to_writer(&mut w, &v).is_ok();
    let text = match std::str::from_utf8(&w.buf) {
        Ok(t) => t,
        // Cut inside a character: the whole ones before it.
        Err(e) => std::str::from_utf8(&w.buf[..e.valid_up_to()]).unwrap_or_default(),
    };
    if whole && text.chars().nth(PAYLOAD_CHARS).is_none() {
        return v;
    }
    let cut: String = text.chars().take(PAYLOAD_CHARS).collect();
    json!({ "truncated": format!("{cut}…") })
}

/// Keeps the first `cap` bytes written, then refuses more (which stops the serialiser).
struct Capped {
    buf: Vec<u8>,
    cap: usize,
}

impl std::io::Write for Capped {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let room = self.cap.saturating_sub(self.buf.len());
        if room == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let n = b.len().min(room);
        self.buf.extend_from_slice(&b[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Trace {
    fn lock(&self) -> std::sync::MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn event(&self, kind: &str, name: &str, payload: Option<Value>) {
        let mut d = self.lock();
        let sequence = d.header.event_count;
        d.header.event_count += 1;
        if d.events.len() < MAX_EVENTS {
            let id = format!("evt_{:06}", sequence + 1);
            let trace_id = d.header.trace_id.clone();
            d.events.push(Event {
                id,
                trace_id,
                kind: kind.into(),
                name: name.into(),
                sequence,
                timestamp_ms: now_ms(),
                payload: payload.map(clip),
            });
        }
        d.header.updated_at = iso8601_ms(now_ms());
    }

    /// Opens a span; returns its index for `end_span`.
    pub fn start_span(&self, name: &str, kind: &str, attrs: Map<String, Value>) -> usize {
        let mut d = self.lock();
        let n = d.spans.len();
        let trace_id = d.header.trace_id.clone();
        d.spans.push(Span {
            span_id: format!("span_{:04}", n + 1),
            trace_id,
            name: name.into(),
            kind: kind.into(),
            start_ms: now_ms(),
            end_ms: None,
            duration_ms: None,
            status: "running".into(),
            attrs,
        });
        d.header.span_count += 1;
        n
    }

    pub fn end_span(&self, idx: usize, status: &str, attrs: Map<String, Value>) {
        {
            let mut d = self.lock();
            let Some(s) = d.spans.get_mut(idx) else {
                return;
            };
            let end = now_ms();
            s.end_ms = Some(end);
            s.duration_ms = Some(end.saturating_sub(s.start_ms));
            s.status = status.into();
            s.attrs.extend(attrs);
        }
        // Serialised when the writer commits it, if the batch still needs it: a trace that
        // finishes within the batch replaces its spans, and serialising each span and header
        // here anyway was ~2.5 % of a turn of small rounds (perf).
        if let Some(w) = &self.writer {
            w.queue_span(SpanRef {
                data: self.data.clone(),
                trace_id: self.id.clone(),
                seq: idx,
            });
        }
    }

    pub fn add_tokens(&self, n: u64) {
        self.lock().header.total_tokens += n;
    }

    pub fn finish(&self, status: &str, error: Option<String>) {
        let mut d = self.lock();
        let end = now_ms();
        d.header.duration_ms = Some(end.saturating_sub(d.header.started_at_ms));
        d.header.status = status.into();
        d.header.had_error = error.is_some();
        d.header.error_message = error;
        d.header.updated_at = iso8601_ms(end);
        d.finished = true;
    }

    /// Stores the finished trace (replacing its running row and span rows), applying
    /// retention (`older_than`, `keep`) in the same transaction when given. Without a writer
    /// (a trace kept in memory only) there is nothing to store.
    pub async fn store(&self, record_id: &str, prune: Option<(String, usize)>) -> Finished {
        let Some(w) = &self.writer else {
            return Err("this trace is kept in memory only".into());
        };
        let row = self.to_row(record_id);
        w.finish(TraceWrite::Finish { row, prune }).await
    }

    /// A copy of the trace as it is now.
    pub fn snapshot(&self) -> TraceData {
        let d = self.lock();
        TraceData {
            trace: d.header.clone(),
            spans: d.spans.clone(),
            events: d.events.clone(),
        }
    }

    /// `{trace, spans, events}` as JSON text, the body the store keeps (`from_stored` reads
    /// it): written straight from the trace under its lock, not from a copy through a
    /// `Value` tree (the copy, the tree and its drop were ~3 % of a turn of small rounds).
    pub fn to_json(&self) -> String {
        let d = self.lock();
        body_json(&d.header, &d.spans, &d.events)
    }

    /// The queued form of finished span `seq` (what `end_span` hands the writer).
    #[cfg(test)]
    pub(super) fn span_ref(&self, seq: usize) -> SpanRef {
        SpanRef {
            data: self.data.clone(),
            trace_id: self.id.clone(),
            seq,
        }
    }

    /// The row the store keeps for this trace as it is now.
    pub fn to_row(&self, record_id: &str) -> TraceRow {
        let (status, created_at) = {
            let d = self.lock();
            (d.header.status.clone(), d.header.created_at.clone())
        };
        TraceRow {
            trace_id: self.id.clone(),
            record_id: record_id.to_string(),
            status,
            created_at,
            body: self.to_json(),
        }
    }
}

/// All kept traces: running ones always, finished ones while they fit the byte budget
/// (`trace_memory_bytes`) and the count; once a finished trace is in the store it may be
/// dropped here, and `trace.fetch` reads it from the store.
pub struct Traces {
    inner: Mutex<(HashMap<String, Kept>, VecDeque<String>)>,
    /// Sizes of the finished traces that are already in the store, oldest first.
    stored: Mutex<(VecDeque<(String, usize)>, usize)>,
    max_bytes: usize,
    writer: Option<Arc<Writer>>,
}

/// A kept trace: the live handle while its stream may still write to it; once it is in the
/// store, its compact JSON. As `Value` trees a finished trace held ~2.3 times its JSON size,
/// so the budget, counted in JSON bytes, bounded less than half the memory it named.
enum Kept {
    Live(Trace),
    Stored(Box<str>),
}

impl Kept {
    fn finished(&self) -> bool {
        match self {
            Kept::Live(t) => t.lock().finished,
            Kept::Stored(_) => true,
        }
    }
}

impl Default for Traces {
    fn default() -> Traces {
        Traces::new(crate::config::DEFAULT_TRACE_MEMORY_BYTES)
    }
}

impl Traces {
    pub fn new(max_bytes: usize) -> Traces {
        Traces {
            inner: Mutex::new((HashMap::new(), VecDeque::new())),
            stored: Mutex::new((VecDeque::new(), 0)),
            max_bytes,
            writer: None,
        }
    }

    /// Traces that are also written to `store` as they go (the header when a stream starts,
    /// each span as it finishes, the whole trace at the end).
    pub fn durable(max_bytes: usize, store: Arc<Store>) -> Traces {
        Traces {
            writer: Some(Arc::new(Writer::new(store))),
            ..Traces::new(max_bytes)
        }
    }

    /// `id` is in the store as `body` (its JSON text, what the store wrote): memory keeps
    /// that text from now on, counted against the memory budget, and the oldest stored traces
    /// are dropped from memory to stay within it.
    pub fn stored(&self, id: &str, body: String) {
        let bytes = body.len();
        {
            let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(kept) = g.0.get_mut(id) {
                *kept = Kept::Stored(body.into_boxed_str());
            }
        }
        let mut drop_ids = Vec::new();
        {
            let mut s = self.stored.lock().unwrap_or_else(|e| e.into_inner());
            s.0.push_back((id.to_string(), bytes));
            s.1 += bytes;
            while s.1 > self.max_bytes {
                let Some((old, n)) = s.0.pop_front() else {
                    break;
                };
                s.1 -= n;
                drop_ids.push(old);
            }
        }
        if drop_ids.is_empty() {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for old in drop_ids {
            g.0.remove(&old);
            g.1.retain(|k| *k != old);
        }
    }

    /// Opens a trace for a stream writing to `record_id` (its header stored at once when
    /// the traces are durable).
    pub fn start(
        &self,
        stream_id: &str,
        chat_id: Option<String>,
        session_id: Option<String>,
        model: &str,
        record_id: &str,
    ) -> Trace {
        let id = super::ids::trace_id();
        let now = now_ms();
        let t = Trace {
            id: id.clone(),
            data: Arc::new(Mutex::new(Data {
                header: Header {
                    trace_id: id.clone(),
                    chat_id,
                    session_id,
                    stream_id: stream_id.into(),
                    status: "running".into(),
                    duration_ms: None,
                    had_error: false,
                    error_message: None,
                    event_count: 0,
                    span_count: 0,
                    total_tokens: 0,
                    model_id: model.into(),
                    started_at_ms: now,
                    created_at: iso8601_ms(now),
                    updated_at: iso8601_ms(now),
                },
                spans: Vec::new(),
                events: Vec::new(),
                finished: false,
            })),
            writer: self.writer.clone(),
        };
        if let Some(w) = &self.writer {
            w.queue_begin(t.to_row(record_id));
        }
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.0.insert(id.clone(), Kept::Live(t.clone()));
        g.1.push_back(id);
        while g.1.len() > MAX_TRACES {
            // Drop the oldest finished trace; running ones stay.
            let pos =
                g.1.iter()
                    .position(|k| g.0.get(k).is_none_or(Kept::finished));
            match pos.and_then(|p| g.1.remove(p)) {
                Some(k) => {
                    g.0.remove(&k);
                }
                None => break,
            }
        }
        t
    }

    /// A copy of a kept trace, for `trace.fetch`.
    pub fn fetch(&self, id: &str) -> Option<TraceData> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match g.0.get(id)? {
            Kept::Live(t) => {
                let t = t.clone();
                drop(g);
                Some(t.snapshot())
            }
            // Parsed outside the lock; a body that no longer parses is read from the store.
            Kept::Stored(text) => {
                let text = text.clone();
                drop(g);
                serde_json::from_str(&text).ok()
            }
        }
    }

    /// Traces whose stream is still running (`activeTraces` in ping).
    pub fn active(&self) -> usize {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.0.values().filter(|t| !t.finished()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The old rule, serialising everything: the reference for `clip`.
    fn clip_whole(v: Value) -> Value {
        let text = v.to_string();
        if text.chars().count() <= PAYLOAD_CHARS {
            return v;
        }
        let cut: String = text.chars().take(PAYLOAD_CHARS).collect();
        json!({ "truncated": format!("{cut}…") })
    }

    #[test]
    fn payloads_are_kept_up_to_the_limit_and_cut_at_it_in_characters() {
        let exact = "x".repeat(PAYLOAD_CHARS - 2); // with its quotes, exactly the limit
        let cases = [
            json!({"round": 3}),
            json!(exact),
            json!(format!("{exact}y")),
            json!("é".repeat(PAYLOAD_CHARS)),
            json!("€".repeat(PAYLOAD_CHARS * 3)),
            json!({"text": "𝄞".repeat(2 * PAYLOAD_CHARS), "n": 1}),
            json!(["a\"b\n", "x".repeat(10_000)]),
        ];
        for v in cases {
            assert_eq!(clip(v.clone()), clip_whole(v));
        }
        assert_eq!(clip(json!(exact)), json!(exact));
        let cut = clip(json!("x".repeat(100_000)));
        let t = cut["truncated"].as_str().unwrap();
        assert_eq!(t.chars().count(), PAYLOAD_CHARS + 1);
        assert!(t.ends_with('…'));
    }
}
