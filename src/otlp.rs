//! `trace.export`: a stream's trace as OTLP/HTTP protobuf (the `opentelemetry-proto` types,
//! sent with our reqwest client), following the OpenTelemetry GenAI conventions: one
//! `invoke_agent` root span per turn, a `chat {model}` span per provider request and an
//! `execute_tool {name}` span per tool execution under it.
//!
//! `metadata` privacy (the default) sends no prompt, completion, tool argument, result or
//! error text: only names, ids, counts, timings, statuses and error types. `full` adds the
//! spans' other attributes and the trace's events (their payloads are already clipped to 500
//! characters by the recorder).

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span, status,
};
use prost::Message;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::agent::trace::{Span as TraceSpan, TraceData};

/// What leaves the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privacy {
    Metadata,
    Full,
}

impl Privacy {
    pub fn parse(s: Option<&str>) -> Result<Privacy, String> {
        match s {
            None | Some("metadata") => Ok(Privacy::Metadata),
            Some("full") => Ok(Privacy::Full),
            Some(other) => Err(format!(
                "privacyMode must be \"metadata\" (no message, argument or result text) or \"full\", got \"{other}\""
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Privacy::Metadata => "metadata",
            Privacy::Full => "full",
        }
    }
}

/// Span attributes that never carry text a user or model wrote, kept under `metadata`.
const METADATA_ATTRS: &[&str] = &[
    "model",
    "round",
    "messages",
    "callId",
    "parentCallId",
    "tools",
    "costUsd",
];

fn kv(key: &str, v: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    }
}

fn s(key: &str, v: impl Into<String>) -> KeyValue {
    kv(key, any_value::Value::StringValue(v.into()))
}

fn i(key: &str, v: u64) -> KeyValue {
    kv(
        key,
        any_value::Value::IntValue(i64::try_from(v).unwrap_or(i64::MAX)),
    )
}

/// A JSON attribute as an OTLP value: numbers and booleans as themselves, strings as given,
/// anything else as its JSON text.
fn json_kv(key: &str, v: &Value) -> KeyValue {
    match v {
        Value::Bool(b) => kv(key, any_value::Value::BoolValue(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(x), _) => kv(key, any_value::Value::IntValue(x)),
            (None, Some(f)) => kv(key, any_value::Value::DoubleValue(f)),
            _ => s(key, n.to_string()),
        },
        Value::String(t) => s(key, t.clone()),
        other => s(key, other.to_string()),
    }
}

/// Deterministic OTLP ids from ours: the same trace exports the same ids every time.
fn id_bytes(parts: &[&str], len: usize) -> Vec<u8> {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize()[..len].to_vec()
}

fn nanos(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}

fn status_of(s: &str, message: Option<String>) -> Option<Status> {
    let code = match s {
        "ok" | "completed" => status::StatusCode::Ok,
        "running" => status::StatusCode::Unset,
        _ => status::StatusCode::Error,
    };
    Some(Status {
        message: message.unwrap_or_default(),
        code: code as i32,
    })
}

/// The export request for `t` and how many spans it holds.
pub fn request(t: &TraceData, privacy: Privacy) -> (ExportTraceServiceRequest, usize) {
    let h = &t.trace;
    let trace_id = id_bytes(&[&h.trace_id], 16);
    let root_id = id_bytes(&[&h.trace_id, "root"], 8);
    let end_ms = h
        .duration_ms
        .map(|d| h.started_at_ms.saturating_add(d))
        .or_else(|| t.spans.iter().filter_map(|s| s.end_ms).max())
        .unwrap_or(h.started_at_ms);
    let mut root_attrs = vec![
        s("gen_ai.operation.name", "invoke_agent"),
        s("gen_ai.agent.name", "outrigger"),
        s("gen_ai.request.model", h.model_id.clone()),
        s("outrigger.trace_id", h.trace_id.clone()),
        s("outrigger.stream_id", h.stream_id.clone()),
        i("outrigger.span_count", h.span_count),
        i("outrigger.event_count", h.event_count),
        i("outrigger.total_tokens", h.total_tokens),
    ];
    if let Some(c) = h.session_id.as_ref().or(h.chat_id.as_ref()) {
        root_attrs.push(s("gen_ai.conversation.id", c.clone()));
    }
    if h.had_error {
        root_attrs.push(s("error.type", h.status.clone()));
    }
    let root_message = match privacy {
        Privacy::Full => h.error_message.clone(),
        Privacy::Metadata => None,
    };
    let mut root = Span {
        trace_id: trace_id.clone(),
        span_id: root_id.clone(),
        name: "invoke_agent outrigger".into(),
        kind: span::SpanKind::Internal as i32,
        start_time_unix_nano: nanos(h.started_at_ms),
        end_time_unix_nano: nanos(end_ms),
        attributes: root_attrs,
        status: status_of(&h.status, root_message),
        ..Default::default()
    };
    if privacy == Privacy::Full {
        root.events = t
            .events
            .iter()
            .map(|e| span::Event {
                time_unix_nano: nanos(e.timestamp_ms),
                name: e.name.clone(),
                attributes: {
                    let mut a = vec![s("outrigger.event.kind", e.kind.clone())];
                    if let Some(p) = &e.payload {
                        a.push(s("outrigger.event.payload", p.to_string()));
                    }
                    a
                },
                ..Default::default()
            })
            .collect();
    }
    let mut spans = vec![root];
    spans.extend(
        t.spans
            .iter()
            .map(|sp| child(sp, &trace_id, &root_id, h, privacy)),
    );
    let n = spans.len();
    let req = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    s("service.name", "outrigger"),
                    s("service.version", crate::protocol::VERSION),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "outrigger".into(),
                    version: crate::protocol::VERSION.into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    (req, n)
}

/// One recorded span as a child of the turn's root.
fn child(
    sp: &TraceSpan,
    trace_id: &[u8],
    root: &[u8],
    h: &crate::agent::trace::Header,
    privacy: Privacy,
) -> Span {
    let our_trace = h.trace_id.as_str();
    let llm = sp.kind == "llm";
    // A request recorded without its model (the compaction summary) used the turn's.
    let model = sp
        .attrs
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(&h.model_id);
    let mut attrs = Vec::new();
    if llm {
        attrs.push(s("gen_ai.operation.name", "chat"));
        attrs.push(s("gen_ai.request.model", model));
        if let Some(u) = sp.attrs.get("usage") {
            for (from, to) in [
                ("promptTokens", "gen_ai.usage.input_tokens"),
                ("completionTokens", "gen_ai.usage.output_tokens"),
                ("cachedPromptTokens", "gen_ai.usage.cache_read.input_tokens"),
            ] {
                if let Some(n) = u.get(from).and_then(Value::as_u64) {
                    attrs.push(i(to, n));
                }
            }
        }
    } else {
        attrs.push(s("gen_ai.operation.name", "execute_tool"));
        attrs.push(s("gen_ai.tool.name", sp.name.clone()));
        if let Some(id) = sp.attrs.get("callId").and_then(Value::as_str) {
            attrs.push(s("gen_ai.tool.call.id", id));
        }
    }
    let failed = !matches!(sp.status.as_str(), "ok" | "running");
    if failed {
        // The kind of failure, never its text (which may quote arguments or output).
        attrs.push(s(
            "error.type",
            if llm { "provider_error" } else { "tool_error" },
        ));
    }
    for (k, v) in &sp.attrs {
        let keep = match privacy {
            Privacy::Full => k != "usage",
            Privacy::Metadata => METADATA_ATTRS.contains(&k.as_str()),
        };
        if keep {
            attrs.push(json_kv(&format!("outrigger.{k}"), v));
        }
    }
    let message = match privacy {
        Privacy::Full => sp
            .attrs
            .get("error")
            .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string)),
        Privacy::Metadata => None,
    };
    Span {
        trace_id: trace_id.to_vec(),
        span_id: id_bytes(&[our_trace, &sp.span_id], 8),
        parent_span_id: root.to_vec(),
        name: if llm {
            format!("chat {model}").trim_end().to_string()
        } else {
            format!("execute_tool {}", sp.name)
        },
        kind: if llm {
            span::SpanKind::Client
        } else {
            span::SpanKind::Internal
        } as i32,
        start_time_unix_nano: nanos(sp.start_ms),
        end_time_unix_nano: nanos(sp.end_ms.unwrap_or(sp.start_ms)),
        attributes: attrs,
        status: status_of(&sp.status, message),
        ..Default::default()
    }
}

/// `endpoint` as the traces URL: a collector's base (`http://host:4318`) gets
/// `/v1/traces`; a URL already ending in it is used as is.
pub fn traces_url(endpoint: &str) -> Result<String, String> {
    let e = endpoint.trim().trim_end_matches('/');
    if !(e.starts_with("http://") || e.starts_with("https://")) {
        return Err(format!(
            "the OTLP endpoint '{e}' must start with http:// or https:// (e.g. http://localhost:4318)"
        ));
    }
    Ok(if e.ends_with("/v1/traces") {
        e.to_string()
    } else {
        format!("{e}/v1/traces")
    })
}

/// Headers the exporter writes itself; a call or the config may not replace them.
const RESERVED_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
];

/// Where an export goes: the traces URL and the headers to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub url: String,
    pub headers: Vec<(String, String)>,
}

impl Target {
    /// The call's endpoint, else config `otlp_endpoint`. Config `otlp_headers` (an API key,
    /// say) go only to the configured collector, never to an endpoint a call names; the
    /// call's headers win (names compared without case).
    pub fn resolve(
        endpoint: Option<&str>,
        headers: Option<std::collections::BTreeMap<String, String>>,
        settings: &crate::config::Settings,
    ) -> Result<Target, String> {
        let own = endpoint.filter(|e| !e.trim().is_empty());
        let config_headers = match own {
            None => settings.otlp_headers.as_deref().unwrap_or(""),
            Some(_) => "",
        };
        let endpoint = own.or(settings.otlp_endpoint.as_deref()).ok_or(
            "no collector: pass endpoint (e.g. http://localhost:4318) or set the config key otlp_endpoint",
        )?;
        let url = traces_url(endpoint)?;
        let mut all =
            parse_headers(config_headers).map_err(|e| format!("config otlp_headers: {e}"))?;
        all.extend(headers.unwrap_or_default());
        let mut unique: Vec<(String, String)> = Vec::with_capacity(all.len());
        for (k, v) in all {
            let k = k.to_ascii_lowercase();
            unique.retain(|(h, _)| *h != k);
            unique.push((k, v));
        }
        for (k, v) in &unique {
            if RESERVED_HEADERS.contains(&k.as_str()) {
                return Err(format!(
                    "header '{k}' is set by the exporter itself (OTLP/HTTP protobuf); leave it out"
                ));
            }
            if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err()
                || reqwest::header::HeaderValue::from_str(v).is_err()
            {
                return Err(format!(
                    "header '{k}' is not a valid HTTP header name and value"
                ));
            }
        }
        Ok(Target {
            url,
            headers: unique,
        })
    }
}

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

/// POSTs the encoded request on the process's HTTP client within `otlp_timeout_ms`; `Err`
/// says why it did not arrive (the collector's status and body, unreachable, timed out).
pub async fn send(
    target: &Target,
    req: &ExportTraceServiceRequest,
    settings: &crate::config::Settings,
) -> Result<(), String> {
    let url = target.url.as_str();
    let client = crate::llm::http_client(&crate::llm::LlmSettings::from_settings(settings), url)
        .map_err(|e| e.to_string())?;
    let timeout = settings.otlp_timeout;
    let mut rb = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
        .timeout(timeout)
        .body(req.encode_to_vec());
    for (k, v) in &target.headers {
        rb = rb.header(k.as_str(), v.as_str());
    }
    let resp = rb.send().await.map_err(|e| {
        if e.is_timeout() {
            format!(
                "the collector at {url} did not answer within {} ms (otlp_timeout_ms)",
                timeout.as_millis()
            )
        } else {
            format!(
                "cannot reach the collector at {url}: {}",
                crate::llm::error_chain(&e.without_url())
            )
        }
    })?;
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let body = resp.text().await.unwrap_or_default();
    let body: String = body.chars().take(500).collect();
    Err(format!(
        "the collector at {url} answered HTTP {}: {body}",
        status.as_u16()
    ))
}

/// `otlp_auto_export`: a finished turn's trace goes to the configured collector in the
/// background, with `otlp_privacy_mode`; a failure is logged, never seen by the turn.
pub fn auto_export(trace: TraceData, settings: std::sync::Arc<crate::config::Settings>) {
    let target = match Target::resolve(None, None, &settings) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!("otlp_auto_export: {e}");
            return;
        }
    };
    let privacy =
        Privacy::parse(Some(settings.otlp_privacy_mode.as_str())).unwrap_or(Privacy::Metadata);
    tokio::spawn(async move {
        let (req, _) = request(&trace, privacy);
        if let Err(e) = send(&target, &req, &settings).await {
            tracing::warn!(trace = %trace.trace.trace_id, "otlp_auto_export failed: {e}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trace() -> TraceData {
        serde_json::from_value(json!({
            "trace": {"traceId": "trace_1", "sessionId": "s1", "streamId": "str_1", "status": "failed",
                "durationMs": 50, "hadError": true, "errorMessage": "SECRET in the error",
                "eventCount": 1, "spanCount": 2, "totalTokens": 30, "modelId": "m1",
                "startedAtMs": 1000, "createdAt": "x", "updatedAt": "y"},
            "spans": [
                {"spanId": "span_0001", "traceId": "trace_1", "name": "llm.request", "kind": "llm",
                 "startMs": 1001, "endMs": 1010, "durationMs": 9, "status": "ok",
                 "attrs": {"model": "m1", "round": 0, "usage": {"promptTokens": 20, "completionTokens": 10}}},
                {"spanId": "span_0002", "traceId": "trace_1", "name": "read_file", "kind": "tool",
                 "startMs": 1011, "endMs": 1020, "durationMs": 9, "status": "error",
                 "attrs": {"callId": "c1", "round": 0, "error": "SECRET not found"}}
            ],
            "events": [{"id": "evt_000001", "traceId": "trace_1", "kind": "llm_request", "name": "llm_request",
                "sequence": 0, "timestampMs": 1001, "payload": {"text": "SECRET prompt"}}]
        }))
        .unwrap()
    }

    fn attr<'a>(s: &'a Span, k: &str) -> Option<&'a any_value::Value> {
        s.attributes
            .iter()
            .find(|a| a.key == k)
            .and_then(|a| a.value.as_ref())
            .and_then(|v| v.value.as_ref())
    }

    #[test]
    fn spans_hang_under_one_root_with_stable_ids() {
        let (req, n) = request(&trace(), Privacy::Metadata);
        assert_eq!(n, 3);
        let spans = &req.resource_spans[0].scope_spans[0].spans;
        let root = &spans[0];
        assert_eq!(root.name, "invoke_agent outrigger");
        assert_eq!(root.trace_id.len(), 16);
        for s in &spans[1..] {
            assert_eq!(s.parent_span_id, root.span_id);
            assert_eq!(s.trace_id, root.trace_id);
        }
        assert_eq!(spans[1].name, "chat m1");
        assert_eq!(
            attr(&spans[1], "gen_ai.usage.input_tokens"),
            Some(&any_value::Value::IntValue(20))
        );
        assert_eq!(spans[2].name, "execute_tool read_file");
        assert_eq!(
            attr(&spans[2], "error.type"),
            Some(&any_value::Value::StringValue("tool_error".into()))
        );
        assert_eq!(
            spans[1].start_time_unix_nano, 1_001_000_000,
            "milliseconds become nanoseconds"
        );
        // The same trace exports the same ids.
        let (again, _) = request(&trace(), Privacy::Full);
        assert_eq!(
            again.resource_spans[0].scope_spans[0].spans[2].span_id,
            spans[2].span_id
        );
    }

    #[test]
    fn metadata_carries_no_text_and_full_does() {
        let (meta, _) = request(&trace(), Privacy::Metadata);
        let bytes = meta.encode_to_vec();
        assert!(!bytes.windows(6).any(|w| w == b"SECRET"));
        let (full, _) = request(&trace(), Privacy::Full);
        let spans = &full.resource_spans[0].scope_spans[0].spans;
        assert!(
            spans[0].events[0]
                .attributes
                .iter()
                .any(|a| format!("{a:?}").contains("SECRET prompt"))
        );
        assert_eq!(
            spans[2].status.as_ref().map(|s| s.message.as_str()),
            Some("SECRET not found")
        );
    }

    #[test]
    fn endpoints_and_privacy_modes_are_checked() {
        assert_eq!(
            traces_url("http://h:4318/").unwrap(),
            "http://h:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://h/v1/traces").unwrap(),
            "http://h/v1/traces"
        );
        assert!(traces_url("h:4318").is_err());
        assert_eq!(Privacy::parse(None).unwrap(), Privacy::Metadata);
        assert!(
            Privacy::parse(Some("all"))
                .unwrap_err()
                .contains("metadata")
        );
    }
}
