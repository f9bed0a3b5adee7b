//! The transport the native providers share (Anthropic Messages, OpenAI Responses, Gemini):
//! one streamed POST per attempt, split by our SSE splitter, decoded by the vendor's
//! [`Decode`], retried per policy while nothing was emitted. A vendor is data and two small
//! pieces: how a request goes on the wire ([`Wire::call`]) and how its events decode.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::openai::{network, read_capped, send_all};
use super::retry::{jitter, parse_retry_after};
use super::sse::{Frame, SseSplitter};
use super::types::{LlmError, LlmEvent, LlmItem, LlmRequest};
use super::{LlmSettings, LlmStream, Provider, STREAM_CHANNEL_CAPACITY};

/// One HTTP request: where, with which headers (besides `content-type` and `accept`), and
/// the JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpCall {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A vendor's stream decoder: SSE frames in, `LlmEvent`s out. `finish` runs when the body
/// ended (or `is_done` said the vendor's last event came) and emits what was accumulated:
/// tool calls, usage, the vendor state (`LlmEvent::State`), then `Finish`.
pub trait Decode: Send {
    fn frame(&mut self, f: Frame<'_>, out: &mut Vec<LlmEvent>) -> Result<(), LlmError>;
    fn finish(&mut self, out: &mut Vec<LlmEvent>) -> Result<(), LlmError>;
    fn is_done(&self) -> bool;
}

/// A vendor's wire.
pub trait Wire: Send + Sync + 'static {
    /// The provider's name (`anthropic`, `responses`, `google`).
    fn name(&self) -> &'static str;
    /// The request for `req` (errors are `LlmError::Config`).
    fn call(&self, req: &LlmRequest) -> Result<HttpCall, LlmError>;
    fn decoder(&self, req: &LlmRequest) -> Box<dyn Decode>;
    /// An HTTP error status typed by what it means for this vendor (rate limit, overload,
    /// context overflow, auth naming the key variable).
    fn http_error(&self, status: u16, body: String, retry_after: Option<Duration>) -> LlmError;
}

pub struct NativeProvider<W: Wire> {
    wire: Arc<W>,
    settings: LlmSettings,
}

impl<W: Wire> NativeProvider<W> {
    pub fn new(wire: W, settings: LlmSettings) -> NativeProvider<W> {
        NativeProvider {
            wire: Arc::new(wire),
            settings,
        }
    }

    pub fn wire(&self) -> &W {
        &self.wire
    }
}

impl<W: Wire> Provider for NativeProvider<W> {
    fn name(&self) -> &str {
        self.wire.name()
    }

    fn stream(&self, req: LlmRequest, cancel: CancellationToken) -> LlmStream {
        let (tx, rx) = mpsc::channel(STREAM_CHANNEL_CAPACITY);
        let wire = self.wire.clone();
        let settings = self.settings;
        tokio::spawn(async move { run(&*wire, settings, req, cancel, tx).await });
        LlmStream::new(rx)
    }
}

async fn run<W: Wire>(
    wire: &W,
    settings: LlmSettings,
    req: LlmRequest,
    cancel: CancellationToken,
    tx: mpsc::Sender<LlmItem>,
) {
    let mut attempt: u32 = 1;
    loop {
        let call = match wire.call(&req) {
            Ok(c) => c,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        let mut emitted = false;
        let err = match attempt_once(wire, &settings, call, &req, &cancel, &tx, &mut emitted).await
        {
            Ok(()) => return,
            Err(e) => e,
        };
        if !retry_after_failure(
            err,
            emitted,
            attempt,
            &settings.retry,
            wire.name(),
            &cancel,
            &tx,
        )
        .await
        {
            return;
        }
        attempt += 1;
    }
}

/// After a failed attempt: sends the `Retry` note and sleeps the policy's delay, returning
/// `true` for another attempt; or ends the stream with the error (`Cancelled` on cancel;
/// never retried once something was emitted) and returns `false`. Every provider's loop.
pub(super) async fn retry_after_failure(
    err: LlmError,
    emitted: bool,
    attempt: u32,
    policy: &super::RetryPolicy,
    provider: &str,
    cancel: &CancellationToken,
    tx: &mpsc::Sender<LlmItem>,
) -> bool {
    if cancel.is_cancelled() || matches!(err, LlmError::Cancelled) {
        let _ = tx.send(Err(LlmError::Cancelled)).await;
        return false;
    }
    let delay = if emitted {
        None
    } else {
        policy.delay(attempt, &err, jitter())
    };
    let Some(delay) = delay else {
        let _ = tx.send(Err(err)).await;
        return false;
    };
    let note = LlmEvent::Retry {
        attempt,
        delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        error: err.to_string(),
    };
    tracing::warn!(provider, attempt, delay_ms = delay.as_millis() as u64, error = %err, "provider request failed; retrying");
    if tx.send(Ok(note)).await.is_err() {
        return false;
    }
    tokio::select! {
        biased;
        _ = cancel.cancelled() => {
            let _ = tx.send(Err(LlmError::Cancelled)).await;
            false
        }
        _ = tokio::time::sleep(delay) => true,
    }
}

async fn attempt_once<W: Wire>(
    wire: &W,
    settings: &LlmSettings,
    call: HttpCall,
    req: &LlmRequest,
    cancel: &CancellationToken,
    tx: &mpsc::Sender<LlmItem>,
    emitted: &mut bool,
) -> Result<(), LlmError> {
    let client = super::http_client(settings, &call.url)?;
    let url = call.url;
    let mut rb = client
        .post(&url)
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(call.body);
    for (k, v) in &call.headers {
        rb = rb.header(k.as_str(), v.as_str());
    }
    let mut resp = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(LlmError::Cancelled),
        r = tokio::time::timeout(settings.idle_timeout, rb.send()) => match r {
            Err(_) => return Err(LlmError::Network {
                message: format!(
                    "{} sent no response for {} ms (llm_idle_timeout_ms)",
                    redact(&url),
                    settings.idle_timeout.as_millis()
                ),
            }),
            Ok(r) => r.map_err(|e| network(&redact(&url), &e.without_url()))?,
        },
    };
    let status = resp.status();
    if !status.is_success() {
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let text = read_capped(&mut resp, cancel, settings.idle_timeout).await?;
        return Err(wire.http_error(status.as_u16(), text, retry_after));
    }
    let mut dec = wire.decoder(req);
    pump(
        &mut resp,
        &redact(&url),
        settings,
        dec.as_mut(),
        tx,
        cancel,
        emitted,
    )
    .await
}

/// Reads an SSE response to its end (or the decoder's last event): split, decode, hand each
/// batch of events to the consumer as it comes, then the decoder's `finish`. The same for
/// every provider; `url` is for messages only.
pub(super) async fn pump(
    resp: &mut reqwest::Response,
    url: &str,
    settings: &LlmSettings,
    dec: &mut dyn Decode,
    tx: &mpsc::Sender<LlmItem>,
    cancel: &CancellationToken,
    emitted: &mut bool,
) -> Result<(), LlmError> {
    let mut split = SseSplitter::new();
    let mut out: Vec<LlmEvent> = Vec::new();
    let mut failed: Option<LlmError> = None;
    loop {
        let chunk = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(LlmError::Cancelled),
            // The consumer dropped the stream: stop reading now, not at the next chunk.
            _ = tx.closed() => return Err(LlmError::Cancelled),
            r = tokio::time::timeout(settings.idle_timeout, resp.chunk()) => match r {
                Err(_) => return Err(LlmError::Network {
                    message: format!(
                        "no data from {url} for {} ms (llm_idle_timeout_ms); the stream stalled",
                        settings.idle_timeout.as_millis()
                    ),
                }),
                Ok(Err(e)) => return Err(network(url, &e.without_url())),
                Ok(Ok(c)) => c,
            },
        };
        let mut on_frame = |f: Frame<'_>| {
            if failed.is_none()
                && let Err(e) = dec.frame(f, &mut out)
            {
                failed = Some(e);
            }
        };
        match &chunk {
            Some(bytes) => split
                .feed(bytes, &mut on_frame)
                .map_err(|e| LlmError::Stream {
                    message: e.to_string(),
                    client_fault: false,
                })?,
            None => split.finish(&mut on_frame),
        }
        // Events decoded before an in-stream error still reach the consumer (partial text).
        send_all(&mut out, tx, cancel, emitted).await?;
        if let Some(e) = failed.take() {
            return Err(e);
        }
        if chunk.is_none() || dec.is_done() {
            break;
        }
    }
    dec.finish(&mut out)?;
    send_all(&mut out, tx, cancel, emitted).await
}

/// `url` without its query, for messages (a key must never reach a log through a URL).
fn redact(url: &str) -> String {
    match url.split_once('?') {
        Some((base, _)) => format!("{base}?…"),
        None => url.to_string(),
    }
}

/// Decodes a whole SSE body cut into `parts` (tests and benches: the same splitter and
/// decoder the stream uses).
pub fn decode_parts(dec: &mut dyn Decode, parts: &[&[u8]]) -> (Vec<LlmEvent>, Option<LlmError>) {
    let mut split = SseSplitter::new();
    let mut out = Vec::new();
    let mut failed: Option<LlmError> = None;
    for p in parts {
        let r = split.feed(p, |f| {
            if failed.is_none()
                && let Err(e) = dec.frame(f, &mut out)
            {
                failed = Some(e);
            }
        });
        if let Err(e) = r {
            return (
                out,
                Some(LlmError::Stream {
                    message: e.to_string(),
                    client_fault: false,
                }),
            );
        }
        if failed.is_some() || dec.is_done() {
            break;
        }
    }
    if failed.is_none() && !dec.is_done() {
        split.finish(|f| {
            if failed.is_none()
                && let Err(e) = dec.frame(f, &mut out)
            {
                failed = Some(e);
            }
        });
    }
    if failed.is_none()
        && let Err(e) = dec.finish(&mut out)
    {
        failed = Some(e);
    }
    (out, failed)
}

/// The API key a vendor's provider uses: `apiKey`, then `OUTRIGGER_API_KEY`, then the
/// vendor's own variables in order; the error names everything tried.
pub fn api_key(
    given: Option<&str>,
    vendor_vars: &[&str],
    provider: &str,
) -> Result<String, LlmError> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    if let Some(k) = given.filter(|k| !k.trim().is_empty()) {
        return Ok(k.to_string());
    }
    for var in std::iter::once("OUTRIGGER_API_KEY").chain(vendor_vars.iter().copied()) {
        if let Some(k) = env(var) {
            return Ok(k);
        }
    }
    let mut tried = vec!["apiKey".to_string(), "OUTRIGGER_API_KEY".to_string()];
    tried.extend(vendor_vars.iter().map(|v| v.to_string()));
    Err(LlmError::Config {
        message: format!(
            "no API key for provider \"{provider}\": set one of {} (tried in that order)",
            tried.join(", ")
        ),
    })
}

/// What every native provider is built from (`llm::build_provider` resolves it).
#[derive(Debug, Clone, PartialEq)]
pub struct NativeConfig {
    /// Without the trailing slash: `https://api.anthropic.com`,
    /// `https://api.openai.com/v1`, `https://generativelanguage.googleapis.com/v1beta`, or the
    /// host's `baseUrl`.
    pub base_url: String,
    pub api_key: String,
    /// Preset values for request fields left unset (as the OpenAI-compatible provider).
    pub defaults: Option<super::types::SamplingDefaults>,
}

/// Writes a vendor body's top-level members the same way for every vendor: typed fields
/// unless `providerOptions` replaces them, then a preset's `extra_body` for keys nothing
/// wrote (and the vendor does not refuse there), then `providerOptions`, last, as given.
pub struct TopLevel<'r, M> {
    m: M,
    options: &'r serde_json::Map<String, serde_json::Value>,
    written: Vec<&'static str>,
}

impl<'r, M: serde::ser::SerializeMap> TopLevel<'r, M> {
    pub fn new(m: M, req: &'r LlmRequest) -> TopLevel<'r, M> {
        TopLevel {
            m,
            options: &req.provider_options,
            written: Vec::with_capacity(16),
        }
    }

    /// A typed field, unless `providerOptions` replaces it.
    pub fn field<T: serde::Serialize + ?Sized>(
        &mut self,
        k: &'static str,
        v: &T,
    ) -> Result<(), M::Error> {
        self.written.push(k);
        if self.options.contains_key(k) {
            return Ok(());
        }
        self.m.serialize_entry(k, v)
    }

    /// `extra` members nothing wrote and `keep` accepts, then `providerOptions`.
    pub fn end(
        mut self,
        extra: &serde_json::Map<String, serde_json::Value>,
        keep: impl Fn(&str) -> bool,
    ) -> Result<M::Ok, M::Error> {
        for (k, v) in extra {
            if !self.written.contains(&k.as_str()) && !self.options.contains_key(k) && keep(k) {
                self.m.serialize_entry(k, v)?;
            }
        }
        for (k, v) in self.options {
            self.m.serialize_entry(k, v)?;
        }
        self.m.end()
    }
}
