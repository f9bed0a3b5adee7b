//! `trace.fetch`: one stream's trace (header, spans, events), from memory while it is kept
//! there, else from the store (finished traces are persisted).

use std::sync::Arc;

use crate::agent::trace::from_stored;
use crate::app::App;
use crate::otlp;
use crate::protocol::session::{
    TraceExportParams, TraceExportResult, TraceFetchParams, TraceFetchResult,
};
use crate::rpc::error::{ErrorKind, RpcError};
use crate::rpc::methods::sessions::with_store;

/// `trace.export`: the trace (from memory or the store) as OTLP/HTTP protobuf to the collector.
pub async fn export(app: Arc<App>, p: TraceExportParams) -> Result<TraceExportResult, RpcError> {
    let privacy =
        otlp::Privacy::parse(p.privacy_mode.as_deref()).map_err(RpcError::invalid_params)?;
    let settings = app.settings();
    let own = p.endpoint.clone().filter(|e| !e.trim().is_empty());
    // Config headers (an API key, say) go only to the configured collector, never to an
    // endpoint a call names.
    let config_headers = if own.is_none() {
        settings.otlp_headers.as_deref().unwrap_or("")
    } else {
        ""
    };
    let endpoint = own
        .or(settings.otlp_endpoint.clone())
        .ok_or_else(|| {
            RpcError::invalid_params(
                "no collector: pass endpoint (e.g. http://localhost:4318) or set the config key otlp_endpoint",
            )
        })?;
    let url = otlp::traces_url(&endpoint).map_err(RpcError::invalid_params)?;
    let mut headers = parse_headers(config_headers)
        .map_err(|e| RpcError::invalid_params(format!("config otlp_headers: {e}")))?;
    // Names compare without case; a later one (the call's) replaces an earlier one.
    for (k, v) in p.headers.unwrap_or_default() {
        headers.push((k, v));
    }
    let mut unique: Vec<(String, String)> = Vec::with_capacity(headers.len());
    for (k, v) in headers {
        let k = k.to_ascii_lowercase();
        unique.retain(|(h, _)| *h != k);
        unique.push((k, v));
    }
    let headers = unique;
    for (k, v) in &headers {
        if RESERVED_HEADERS.contains(&k.as_str()) {
            return Err(RpcError::invalid_params(format!(
                "header '{k}' is set by the exporter itself (OTLP/HTTP protobuf); leave it out"
            )));
        }
        if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err()
            || reqwest::header::HeaderValue::from_str(v).is_err()
        {
            return Err(RpcError::invalid_params(format!(
                "header '{k}' is not a valid HTTP header name and value"
            )));
        }
    }
    let trace = fetch(
        app.clone(),
        TraceFetchParams {
            trace_id: p.trace_id.clone(),
        },
    )
    .await?;
    let (req, spans) = otlp::request(&trace, privacy);
    let client = crate::llm::http_client(&crate::llm::LlmSettings::from_settings(&settings))
        .map_err(|e| RpcError::internal(e.to_string()))?;
    let sent = otlp::send(&client, &url, &headers, &req, settings.otlp_timeout).await;
    Ok(TraceExportResult {
        status: if sent.is_ok() { "exported" } else { "failed" }.into(),
        trace_id: p.trace_id,
        privacy_mode: privacy.as_str().into(),
        spans: if sent.is_ok() { spans } else { 0 },
        error: sent.err(),
    })
}

/// Headers the exporter writes itself; a call or the config may not replace them.
const RESERVED_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
];

/// `name=value,name=value` (the `OTEL_EXPORTER_OTLP_HEADERS` format; values may be
/// percent-encoded, as there).
fn parse_headers(s: &str) -> Result<Vec<(String, String)>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| format!("'{p}' is not name=value"))?;
            let v = percent_encoding::percent_decode_str(v.trim())
                .decode_utf8_lossy()
                .into_owned();
            Ok((k.trim().to_string(), v))
        })
        .collect()
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
        Some(d) => Ok(d),
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
    use serde_json::{Map, json};

    /// The wire answer carries exactly what the trace recorder stores, from either source.
    #[test]
    fn memory_and_stored_traces_answer_the_same() {
        let traces = Traces::default();
        let t = traces.start("str_1", Some("chat".into()), None, "m");
        t.event("stage_start", "start", Some(json!({"round": 0})));
        t.event("completion", "done", None);
        let span = t.start_span("llm.request", "llm", Map::new());
        t.end_span(span, "ok", Map::new());
        t.add_tokens(12);
        t.finish("completed", None);

        let stored = t.to_row("rec").body;
        let from_store: TraceFetchResult = from_stored(stored.clone()).unwrap();
        let from_memory = traces.fetch(&t.id).unwrap();
        assert_eq!(from_store, from_memory);
        // The wire shape is the stored shape, key for key.
        assert_eq!(serde_json::to_value(&from_memory).unwrap(), stored);
        assert!(stored["trace"].get("chatId").is_some());
        assert!(stored["trace"].get("sessionId").is_none());
        assert!(stored["events"][1].get("payload").is_none());
    }
}
