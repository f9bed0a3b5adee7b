//! Google Gemini (Generative Language API) on its own wire: one streamed
//! `POST {base}/models/{model}:streamGenerateContent?alt=sse` per attempt, each SSE `data:`
//! a whole `GenerateContentResponse`. The request is built in [`body`], parameter schemas
//! are narrowed to what Gemini's `Schema` accepts in [`schema`], the stream is decoded in
//! [`decode`].
//!
//! Vendor state: a `thoughtSignature` on a `functionCall` part rides on that call
//! (`ToolCall::extra_content = {"google": {"thought_signature": …}}`, the shape of Google's
//! OpenAI-compatible endpoint); one on an answer part is `LlmEvent::State{data:
//! {"google": {"textSignature": …}}}`. Both are sent back where they came from.

use std::time::Duration;

use serde_json::Value;

use super::native::{Decode, HttpCall, NativeConfig, Wire};
use super::types::{LlmError, LlmRequest};

mod body;
mod decode;
mod schema;

pub use body::Body;
pub use decode::Decoder;
pub use schema::parameters as schema_parameters;

/// The vendor's own key variables, after `apiKey` and `OUTRIGGER_API_KEY` (for
/// `native::api_key`).
pub const KEY_VARS: &[&str] = &["GEMINI_API_KEY", "GOOGLE_API_KEY"];

pub struct GeminiWire {
    cfg: NativeConfig,
}

impl GeminiWire {
    pub fn new(cfg: NativeConfig) -> GeminiWire {
        GeminiWire { cfg }
    }
}

impl Wire for GeminiWire {
    fn name(&self) -> &'static str {
        "google"
    }

    fn call(&self, req: &LlmRequest) -> Result<HttpCall, LlmError> {
        let url = stream_url(&self.cfg.base_url, &req.model)?;
        let body =
            super::encode_body(&Body::new(req, self.cfg.defaults.as_ref()), req).map_err(|e| {
                LlmError::Config {
                    message: format!("could not write the Gemini request body: {e}"),
                }
            })?;
        // The key goes in a header, never the URL: URLs end up in logs and error messages.
        let headers = if self.cfg.api_key.is_empty() {
            Vec::new()
        } else {
            vec![("x-goog-api-key".to_string(), self.cfg.api_key.clone())]
        };
        Ok(HttpCall { url, headers, body })
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn Decode> {
        Box::new(Decoder::new(req.raw_chunks))
    }

    fn http_error(&self, status: u16, body: String, retry_after: Option<Duration>) -> LlmError {
        http_error(status, body, retry_after)
    }
}

/// `{base}/models/{model}:streamGenerateContent?alt=sse`. The model may be given as the
/// resource name (`models/gemini-2.5-flash`) or the bare id; a tuned model
/// (`tunedModels/x`) keeps its own collection.
pub fn stream_url(base_url: &str, model: &str) -> Result<String, LlmError> {
    let model = model.trim().trim_start_matches('/');
    let path = if model.starts_with("tunedModels/") {
        model.to_string()
    } else {
        format!("models/{}", model.strip_prefix("models/").unwrap_or(model))
    };
    let leaf = path.rsplit('/').next().unwrap_or("");
    if leaf.is_empty() || model.contains(['?', '#', ' ']) {
        return Err(LlmError::Config {
            message: format!("not a Gemini model name: \"{model}\""),
        });
    }
    Ok(format!(
        "{}/{path}:streamGenerateContent?alt=sse",
        base_url.trim_end_matches('/')
    ))
}

/// An HTTP error typed for Gemini: 429 (`RESOURCE_EXHAUSTED`) with the `RetryInfo` delay
/// when no `Retry-After` came, "input token count exceeds" as context overflow, a refused
/// key (401/403, or Gemini's 400 `API_KEY_INVALID`) naming where the key comes from.
pub fn http_error(status: u16, body: String, retry_after: Option<Duration>) -> LlmError {
    let retry_after = retry_after.or_else(|| retry_delay(&body));
    let lower = body.to_ascii_lowercase();
    if status == 429 {
        return LlmError::RateLimited { retry_after, body };
    }
    if matches!(status, 400 | 413) && is_overflow(&lower) {
        return LlmError::ContextOverflow { message: body };
    }
    let bad_key = lower.contains("api_key_invalid") || lower.contains("api key not valid");
    if matches!(status, 401 | 403) || (status == 400 && bad_key) {
        return LlmError::Http {
            status,
            body: format!(
                "{body} — check the API key (apiKey, OUTRIGGER_API_KEY or {})",
                KEY_VARS.join(" or ")
            ),
            retry_after,
        };
    }
    super::openai::http_error(status, body, retry_after)
}

/// Gemini's wording of an over-long prompt ("The input token count (1200293) exceeds the
/// maximum number of tokens allowed (1048576).") and the shared vendor wordings.
pub fn is_overflow(lower: &str) -> bool {
    (lower.contains("input token count") && lower.contains("exceeds"))
        || super::accumulate::is_overflow(lower)
}

/// The `google.rpc.RetryInfo` delay (`"retryDelay": "38s"`) in an error body.
pub fn retry_delay(body: &str) -> Option<Duration> {
    let v: Value = serde_json::from_str(body).ok()?;
    retry_info(v.get("error").unwrap_or(&v))
}

/// The `RetryInfo` delay among an error object's `details`.
fn retry_info(err: &Value) -> Option<Duration> {
    err.get("details")?
        .as_array()?
        .iter()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| d.get("retryDelay").and_then(Value::as_str))
        .and_then(parse_seconds)
}

/// A protobuf `Duration` in JSON: decimal seconds with an `s` suffix.
fn parse_seconds(s: &str) -> Option<Duration> {
    let secs: f64 = s.trim().strip_suffix('s')?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

#[cfg(test)]
mod tests;
