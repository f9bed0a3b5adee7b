//! The OpenAI-compatible streaming provider: `POST {baseUrl}/chat/completions` with
//! `stream: true`, decoded by our splitter and `accumulate::Decoder`, retried per policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::accumulate::{DecodeOptions, Decoder, is_overflow};
use super::compat::{CompatFlags, MaxTokensField};
use super::retry::parse_retry_after;
use super::sse::Frame;
use super::types::{LlmError, LlmEvent, LlmItem, LlmRequest, SamplingDefaults};
use super::{LlmSettings, LlmStream, Provider, STREAM_CHANNEL_CAPACITY};

/// The most bytes of an HTTP error body kept for the error message. Not user-tunable.
pub const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Everything one provider instance needs; built by `llm::build_provider`.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Without the trailing slash; `/chat/completions` is appended.
    pub base_url: String,
    pub api_key: Option<String>,
    pub compat: CompatFlags,
    /// Preset values for fields the request leaves unset (the presets layer's seam).
    pub defaults: Option<SamplingDefaults>,
    pub settings: LlmSettings,
}

pub struct OpenAiProvider {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: OpenAiConfig,
    /// `{base_url}/chat/completions`, and parsed once (`None` if it does not parse: the
    /// request then fails with the client's own message). Parsing it for every request
    /// was ~1.5 % of a turn of small rounds (perf).
    url: String,
    parsed: Option<reqwest::Url>,
    /// Set after the server refused our max-tokens field and accepted the other one.
    swapped_max_tokens: AtomicBool,
}

impl OpenAiProvider {
    pub fn new(cfg: OpenAiConfig) -> OpenAiProvider {
        let url = format!("{}/chat/completions", cfg.base_url);
        let parsed = reqwest::Url::parse(&url).ok();
        OpenAiProvider {
            inner: Arc::new(Inner {
                cfg,
                url,
                parsed,
                swapped_max_tokens: AtomicBool::new(false),
            }),
        }
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.inner.cfg
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai_compat"
    }

    fn stream(&self, req: LlmRequest, cancel: CancellationToken) -> LlmStream {
        let (tx, rx) = mpsc::channel(STREAM_CHANNEL_CAPACITY);
        let inner = self.inner.clone();
        tokio::spawn(async move { run(inner, req, cancel, tx).await });
        LlmStream::new(rx)
    }
}

impl Inner {
    fn max_field(&self) -> MaxTokensField {
        let f = self.cfg.compat.max_tokens_field;
        if self.swapped_max_tokens.load(Ordering::Relaxed) {
            f.other()
        } else {
            f
        }
    }
}

async fn run(
    inner: Arc<Inner>,
    req: LlmRequest,
    cancel: CancellationToken,
    tx: mpsc::Sender<LlmItem>,
) {
    let policy = inner.cfg.settings.retry;
    let mut attempt: u32 = 1;
    let mut swapped_once = false;
    loop {
        let body = match super::encode_body(
            &build_body(
                &req,
                &inner.cfg.compat,
                inner.cfg.defaults.as_ref(),
                inner.max_field(),
            ),
            &req,
        ) {
            Ok(b) => b,
            Err(e) => {
                let _ = tx
                    .send(Err(LlmError::Config {
                        message: format!("cannot encode the request body: {e}"),
                    }))
                    .await;
                return;
            }
        };
        let mut emitted = false;
        let result = attempt_once(&inner, body, &req, &cancel, &tx, &mut emitted).await;
        let err = match result {
            Ok(()) => return,
            Err(e) => e,
        };
        if cancel.is_cancelled() || matches!(err, LlmError::Cancelled) {
            let _ = tx.send(Err(LlmError::Cancelled)).await;
            return;
        }
        // o-series / GPT-5 refuse `max_tokens` (and some servers the other one): switch
        // once, remember it for this provider, and do not count it as an attempt.
        if !swapped_once && !emitted && refused_max_tokens_field(&err, &req) {
            swapped_once = true;
            let now = inner.swapped_max_tokens.load(Ordering::Relaxed);
            inner.swapped_max_tokens.store(!now, Ordering::Relaxed);
            tracing::info!(
                field = inner.max_field().as_str(),
                "provider refused the max-tokens field; retrying with the other one"
            );
            continue;
        }
        let retry = super::native::retry_after_failure(
            err,
            emitted,
            attempt,
            &policy,
            "openai_compat",
            &cancel,
            &tx,
        );
        if !retry.await {
            return;
        }
        attempt += 1;
    }
}

fn refused_max_tokens_field(err: &LlmError, req: &LlmRequest) -> bool {
    let LlmError::Http {
        status: 400, body, ..
    } = err
    else {
        return false;
    };
    req.max_tokens.is_some()
        && body.contains("max_tokens")
        && (body.contains("max_completion_tokens") || body.contains("unsupported_parameter"))
}

/// One HTTP request and its stream. `emitted` turns true once an event reached the
/// consumer: after that a failure is reported, never retried (it would duplicate text).
async fn attempt_once(
    inner: &Inner,
    body: Vec<u8>,
    req: &LlmRequest,
    cancel: &CancellationToken,
    tx: &mpsc::Sender<LlmItem>,
    emitted: &mut bool,
) -> Result<(), LlmError> {
    let cfg = &inner.cfg;
    let url = &inner.url;
    let client = super::http_client(&cfg.settings, url)?;
    let rb = match &inner.parsed {
        Some(parsed) => client.post(parsed.clone()),
        None => client.post(url.as_str()),
    };
    let mut rb = rb
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(key) = cfg.api_key.as_deref().filter(|k| !k.is_empty()) {
        rb = rb.bearer_auth(key);
    }
    let mut resp = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(LlmError::Cancelled),
        r = tokio::time::timeout(cfg.settings.idle_timeout, rb.send()) => match r {
            Err(_) => return Err(LlmError::Network {
                message: format!(
                    "{url} sent no response for {} ms (llm_idle_timeout_ms)",
                    cfg.settings.idle_timeout.as_millis()
                ),
            }),
            Ok(r) => r.map_err(|e| network(url, &e))?,
        },
    };
    let status = resp.status();
    if !status.is_success() {
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let text = read_capped(&mut resp, cancel, cfg.settings.idle_timeout).await?;
        return Err(http_error(status.as_u16(), text, retry_after));
    }

    let mut dec = Decoder::new(DecodeOptions {
        reasoning_fields: cfg.compat.reasoning_delta_fields.clone(),
        cached_fields: cfg.compat.cached_tokens_fields.clone(),
        raw: req.raw_chunks,
    });
    let mut out: Vec<LlmEvent> = Vec::new();
    let is_json = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if is_json {
        // Some proxies ignore `stream: true` and answer with one completion object.
        let text = read_all(&mut resp, cancel, cfg.settings.idle_timeout, url).await?;
        let chunk = completion_as_chunk(&text)?;
        dec.frame(
            Frame {
                event: None,
                data: chunk.as_bytes(),
            },
            &mut out,
        )?;
        dec.finish(&mut out)?;
        return send_all(&mut out, tx, cancel, emitted).await;
    }
    super::native::pump(&mut resp, url, &cfg.settings, &mut dec, tx, cancel, emitted).await
}

pub(super) async fn send_all(
    out: &mut Vec<LlmEvent>,
    tx: &mpsc::Sender<LlmItem>,
    cancel: &CancellationToken,
    emitted: &mut bool,
) -> Result<(), LlmError> {
    for ev in out.drain(..) {
        *emitted = true;
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(LlmError::Cancelled),
            r = tx.send(Ok(ev)) => {
                // The consumer went away: nobody is listening, stop like a cancel.
                if r.is_err() {
                    return Err(LlmError::Cancelled);
                }
            }
        }
    }
    Ok(())
}

pub(super) fn network(url: &str, e: &reqwest::Error) -> LlmError {
    let msg = super::error_chain(e);
    LlmError::Network {
        message: if msg.contains(url) {
            format!("{msg}; check baseUrl and that the server is reachable")
        } else {
            format!("{msg} ({url}); check baseUrl and that the server is reachable")
        },
    }
}

pub(super) async fn read_capped(
    resp: &mut reqwest::Response,
    cancel: &CancellationToken,
    idle: Duration,
) -> Result<String, LlmError> {
    let mut buf = Vec::new();
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(LlmError::Cancelled),
            r = tokio::time::timeout(idle, resp.chunk()) => r,
        };
        match next {
            Ok(Ok(Some(b))) => {
                let room = MAX_ERROR_BODY_BYTES.saturating_sub(buf.len());
                buf.extend_from_slice(&b[..b.len().min(room)]);
                if buf.len() >= MAX_ERROR_BODY_BYTES {
                    break;
                }
            }
            // A body we cannot finish reading still makes a useful error with what we have.
            Ok(Ok(None)) | Ok(Err(_)) | Err(_) => break,
        }
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The most bytes of a non-streamed (`application/json`) completion we read. Not
/// user-tunable: it matches the largest SSE event we accept.
pub const MAX_JSON_BODY_BYTES: usize = super::sse::MAX_EVENT_BYTES;

async fn read_all(
    resp: &mut reqwest::Response,
    cancel: &CancellationToken,
    idle: Duration,
    url: &str,
) -> Result<String, LlmError> {
    let mut buf = Vec::new();
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(LlmError::Cancelled),
            r = tokio::time::timeout(idle, resp.chunk()) => r,
        };
        match next {
            Ok(Ok(Some(b))) => {
                buf.extend_from_slice(&b);
                if buf.len() > MAX_JSON_BODY_BYTES {
                    return Err(LlmError::Stream {
                        message: format!(
                            "the completion from {url} is larger than {MAX_JSON_BODY_BYTES} bytes"
                        ),
                        client_fault: false,
                    });
                }
            }
            Ok(Ok(None)) => break,
            Ok(Err(e)) => return Err(network(url, &e)),
            Err(_) => {
                return Err(LlmError::Network {
                    message: format!(
                        "no data from {url} for {} ms (llm_idle_timeout_ms)",
                        idle.as_millis()
                    ),
                });
            }
        }
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// A non-streamed completion (`choices[].message`) rewritten as one stream chunk, so the
/// same decoder (reasoning fields, tool calls, usage, errors) handles it.
pub fn completion_as_chunk(text: &str) -> Result<String, LlmError> {
    let v: Value = serde_json::from_str(text).map_err(|e| LlmError::Stream {
        message: format!("the provider answered with JSON that is not a completion ({e})"),
        client_fault: false,
    })?;
    if v.get("error").is_some_and(|e| !e.is_null()) {
        return Err(super::accumulate::error_from_json(text));
    }
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .cloned()
        .unwrap_or(Value::Null);
    let chunk = json!({
        "choices": [{
            "index": 0,
            "delta": choice.get("message").cloned().unwrap_or(json!({})),
            "finish_reason": choice.get("finish_reason").cloned().unwrap_or(json!("stop")),
        }],
        "usage": v.get("usage").cloned().unwrap_or(Value::Null),
    });
    Ok(chunk.to_string())
}

/// An HTTP error status with its body, typed by what it means.
pub fn http_error(status: u16, body: String, retry_after: Option<Duration>) -> LlmError {
    if status == 429 {
        return LlmError::RateLimited { retry_after, body };
    }
    if matches!(status, 400 | 413 | 422) && is_overflow(&body.to_ascii_lowercase()) {
        return LlmError::ContextOverflow { message: body };
    }
    LlmError::Http {
        status,
        body,
        retry_after,
    }
}

/// The request body for `req` (see [`body::Body`]).
pub fn build_body<'a>(
    req: &'a LlmRequest,
    compat: &'a CompatFlags,
    defaults: Option<&'a SamplingDefaults>,
    max_field: MaxTokensField,
) -> Body<'a> {
    Body {
        req,
        compat,
        defaults,
        max_field,
    }
}

mod body;
pub use body::{Body, WireMessages};

#[cfg(test)]
mod tests;
