//! The Anthropic Messages provider: `POST {baseUrl}/v1/messages` with `stream: true`,
//! on the shared native transport ([`super::native`]).
//!
//! - The body ([`body`]): system messages as the top-level `system` blocks, strict
//!   user/assistant alternation (tool results and the loop's image message merged into one
//!   user turn), `thinking` from `reasoning_effort` ([`THINKING_BUDGETS`]), and prompt-cache
//!   breakpoints on the last tool, the last system block and the last message's last block.
//! - The stream ([`decode`]): text and thinking deltas as they come, tool calls, usage with
//!   cache reads and writes, and the thinking blocks with their signatures as
//!   `LlmEvent::State {"anthropic": {"content": [...]}}`, which the next round's body puts
//!   back first in that assistant turn (the API refuses a thinking tool loop without them).

use std::time::Duration;

use super::native::{Decode, HttpCall, NativeConfig, Wire};
use super::types::{LlmError, LlmRequest};

mod body;
mod decode;

pub use body::{Body, thinking_budget};
pub use decode::{Decoder, stream_error};

/// The key of this vendor's state in `LlmEvent::State` and `reasoning_details`.
pub const VENDOR: &str = "anthropic";

/// The `anthropic-version` header every request carries.
pub const API_VERSION: &str = "2023-06-01";

/// The environment variable named when the key is refused (401/403).
pub const KEY_VAR: &str = "ANTHROPIC_API_KEY";

/// `reasoning_effort` → `thinking.budget_tokens`. The API's floor is 1024; `none`, `off`,
/// `disabled` and an empty value turn thinking off; a number is taken as the budget.
pub const THINKING_BUDGETS: &[(&str, u64)] = &[
    ("minimal", 1024),
    ("low", 2048),
    ("medium", 8192),
    ("high", 24576),
    ("xhigh", 32768),
    ("max", 32768),
];

/// `max_tokens` when neither the request nor the preset gives one (the API requires it).
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

/// Answer room added above the thinking budget when `max_tokens` does not exceed it (the
/// API refuses `budget_tokens >= max_tokens`).
pub const ANSWER_ROOM_TOKENS: u64 = 8192;

pub struct AnthropicWire {
    cfg: NativeConfig,
}

impl AnthropicWire {
    pub fn new(cfg: NativeConfig) -> AnthropicWire {
        AnthropicWire { cfg }
    }

    pub fn config(&self) -> &NativeConfig {
        &self.cfg
    }

    /// `{base}/v1/messages`; a base that already ends in `/v1` gets only `/messages`.
    pub fn url(&self) -> String {
        let base = self.cfg.base_url.trim_end_matches('/');
        if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        }
    }
}

impl Wire for AnthropicWire {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn call(&self, req: &LlmRequest) -> Result<HttpCall, LlmError> {
        let body =
            super::encode_body(&Body::new(req, self.cfg.defaults.as_ref()), req).map_err(|e| {
                LlmError::Config {
                    message: format!("cannot encode the Anthropic request body: {e}"),
                }
            })?;
        let mut headers = vec![("anthropic-version".to_string(), API_VERSION.to_string())];
        // Anthropic-compatible local servers may run without a key.
        if !self.cfg.api_key.is_empty() {
            headers.push(("x-api-key".to_string(), self.cfg.api_key.clone()));
        }
        Ok(HttpCall {
            url: self.url(),
            headers,
            body,
        })
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn Decode> {
        Box::new(Decoder::new(req.raw_chunks))
    }

    fn http_error(&self, status: u16, body: String, retry_after: Option<Duration>) -> LlmError {
        http_error(status, body, retry_after)
    }
}

/// An HTTP error status typed for Anthropic: 429 rate limit; 529 (overloaded) and 503 stay
/// `Http` (retried as 5xx); "prompt is too long" on 400/413 is a context overflow; 401/403
/// name the key variables.
pub fn http_error(status: u16, body: String, retry_after: Option<Duration>) -> LlmError {
    match status {
        429 => LlmError::RateLimited { retry_after, body },
        503 | 529 => LlmError::Http {
            status,
            body,
            retry_after,
        },
        400 | 413 if super::accumulate::is_overflow(&body.to_ascii_lowercase()) => {
            LlmError::ContextOverflow { message: body }
        }
        401 | 403 => LlmError::Http {
            status,
            body: format!("{body} — check the API key (apiKey, OUTRIGGER_API_KEY or {KEY_VAR})"),
            retry_after,
        },
        _ => super::openai::http_error(status, body, retry_after),
    }
}

#[cfg(test)]
mod tests;
