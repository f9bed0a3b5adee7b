//! OpenAI's Responses API (`POST {base}/responses`, streamed): also what xAI serves.
//!
//! Stateless on purpose (`store: false`): every round sends the whole history, and the
//! reasoning the model did before a tool call goes back as its encrypted reasoning items
//! (`include: ["reasoning.encrypted_content"]`), kept in the assistant message's
//! `reasoning_details` as `{"responses": {"items": [...]}}` (see `LlmEvent::State`).

use std::time::Duration;

use super::accumulate::is_overflow;
use super::native::{Decode, HttpCall, NativeConfig, Wire};
use super::types::{LlmError, LlmRequest};

mod body;
mod decode;

pub use body::Body;
pub use decode::Decoder;

/// The key under which this provider's state lives in `reasoning_details`.
pub const STATE_KEY: &str = "responses";

pub struct ResponsesWire {
    cfg: NativeConfig,
}

impl ResponsesWire {
    pub fn new(cfg: NativeConfig) -> ResponsesWire {
        ResponsesWire { cfg }
    }

    /// The vendor variable an auth failure points at (the same wire serves OpenAI and xAI).
    fn key_var(&self) -> &'static str {
        if self.cfg.base_url.contains("x.ai") {
            "XAI_API_KEY"
        } else {
            "OPENAI_API_KEY"
        }
    }
}

impl Wire for ResponsesWire {
    fn name(&self) -> &'static str {
        "responses"
    }

    fn call(&self, req: &LlmRequest) -> Result<HttpCall, LlmError> {
        let body = super::encode_body(
            &Body {
                req,
                defaults: self.cfg.defaults.as_ref(),
            },
            req,
        )
        .map_err(|e| LlmError::Config {
            message: format!("could not write the Responses request body: {e}"),
        })?;
        let mut headers = Vec::with_capacity(1);
        // A local server may take no key; an empty bearer would only confuse its logs.
        if !self.cfg.api_key.is_empty() {
            headers.push((
                "authorization".to_string(),
                format!("Bearer {}", self.cfg.api_key),
            ));
        }
        Ok(HttpCall {
            url: format!("{}/responses", self.cfg.base_url.trim_end_matches('/')),
            headers,
            body,
        })
    }

    fn decoder(&self, req: &LlmRequest) -> Box<dyn Decode> {
        Box::new(Decoder::new(req.raw_chunks))
    }

    fn http_error(&self, status: u16, body: String, retry_after: Option<Duration>) -> LlmError {
        match status {
            429 => LlmError::RateLimited { retry_after, body },
            400 | 413 | 422 if is_overflow(&body.to_ascii_lowercase()) => {
                LlmError::ContextOverflow { message: body }
            }
            401 | 403 => LlmError::Http {
                status,
                body: format!(
                    "{body} — check the API key (apiKey, OUTRIGGER_API_KEY or {})",
                    self.key_var()
                ),
                retry_after,
            },
            _ => super::openai::http_error(status, body, retry_after),
        }
    }
}

#[cfg(test)]
mod tests;
