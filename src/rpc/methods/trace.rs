//! `trace.fetch`: one stream's trace (header, spans, events), from memory while it is kept
//! there, else from the store (finished traces are persisted).

use std::sync::Arc;

use crate::agent::trace::{from_stored, mark_interrupted};
use crate::app::App;
use crate::otlp;
use crate::protocol::session::{
    TraceExportParams, TraceExportResult, TraceFetchParams, TraceFetchResult,
};
use crate::rpc::error::{ErrorKind, RpcError};
use crate::rpc::methods::sessions::with_store;

/// `trace.export`: the trace (from memory or the store) as OTLP/HTTP protobuf to the collector.
pub async fn export(app: Arc<App>, p: TraceExportParams) -> Result<TraceExportResult, RpcError> {
    let settings = app.settings();
    let mode = p
        .privacy_mode
        .as_deref()
        .unwrap_or(settings.otlp_privacy_mode.as_str());
    let privacy = otlp::Privacy::parse(Some(mode)).map_err(RpcError::invalid_params)?;
    let target = otlp::Target::resolve(p.endpoint.as_deref(), p.headers, &settings)
        .map_err(RpcError::invalid_params)?;
    let trace = fetch(
        app.clone(),
        TraceFetchParams {
            trace_id: p.trace_id.clone(),
        },
    )
    .await?;
    let (req, spans) = otlp::request(&trace, privacy);
    let sent = otlp::send(&target, &req, &settings).await;
    Ok(TraceExportResult {
        status: if sent.is_ok() { "exported" } else { "failed" }.into(),
        trace_id: p.trace_id,
        privacy_mode: privacy.as_str().into(),
        spans: if sent.is_ok() { spans } else { 0 },
        error: sent.err(),
    })
}

pub async fn fetch(app: Arc<App>, p: TraceFetchParams) -> Result<TraceFetchResult, RpcError> {
    if let Some(d) = app.agent.traces.fetch(&p.trace_id) {
        return Ok(d);
    }
    let id = p.trace_id.clone();
    let stored = with_store(&app, move |st| st.get_trace(&id)).await?;
    // A body that no longer reads as a trace is treated like a corrupt one: unknown, with a
    // `warn` naming it (tolerant reads, docs/store.md).
    let found = stored.and_then(|body| match from_stored(body) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::warn!(
                "trace {}: skipping unreadable stored trace: {e}",
                p.trace_id
            );
            None
        }
    });
    match found {
        Some(mut d) => {
            // Running traces are always kept in memory: a stored one that is still running
            // belongs to a process that ended mid-turn. Its finished spans are all there.
            mark_interrupted(&mut d.trace);
            Ok(d)
        }
        None => Err(RpcError::new(
            ErrorKind::NotFound,
            format!(
                "trace not found: {} (neither running nor stored; traces are stored when their \
                 stream finishes, in the database given by --storage-path)",
                p.trace_id
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::trace::Traces;
    use serde_json::{Map, Value, json};

    /// The wire answer carries exactly what the trace recorder stores, from either source.
    #[test]
    fn memory_and_stored_traces_answer_the_same() {
        let traces = Traces::default();
        let t = traces.start("str_1", Some("chat".into()), None, "m", "rec");
        t.event("stage_start", "start", Some(json!({"round": 0})));
        t.event("completion", "done", None);
        let span = t.start_span("llm.request", "llm", Map::new());
        t.end_span(span, "ok", Map::new());
        t.add_tokens(12);
        t.finish("completed", None);

        let stored: Value = serde_json::from_str(&t.to_row("rec").body).unwrap();
        let from_store: TraceFetchResult = from_stored(stored.clone()).unwrap();
        let from_memory = traces.fetch(&t.id).unwrap();
        assert_eq!(from_store, from_memory);
        // The wire shape is the stored shape, key for key.
        assert_eq!(serde_json::to_value(&from_memory).unwrap(), stored);
        assert!(stored["trace"].get("chatId").is_some());
        assert!(stored["trace"].get("sessionId").is_none());
        assert!(stored["events"][1].get("payload").is_none());

        // Once stored, memory keeps the compact text; it answers the same.
        assert_eq!(traces.active(), 0);
        traces.stored(&t.id, serde_json::to_string(&stored).unwrap());
        assert_eq!(traces.fetch(&t.id).unwrap(), from_store);
        // Beyond the byte budget the oldest stored trace leaves memory (the store answers).
        let body = |t: &crate::agent::trace::Trace| serde_json::to_string(&t.snapshot()).unwrap();
        // The budget holds one finished trace like these, not two (durations may add a digit).
        let probe = Traces::default();
        let p = probe.start("str_a", None, None, "m", "rec");
        p.finish("completed", None);
        let small = Traces::new(body(&p).len() + 8);
        let a = small.start("str_a", None, None, "m", "rec");
        a.finish("completed", None);
        let b = small.start("str_b", None, None, "m", "rec");
        assert_eq!(small.active(), 1);
        small.stored(&a.id, body(&a));
        b.finish("completed", None);
        small.stored(&b.id, body(&b));
        assert!(small.fetch(&a.id).is_none());
        assert_eq!(small.fetch(&b.id).unwrap().trace.stream_id, "str_b");
    }
}
