//! The `streamGenerateContent?alt=sse` stream: each `data:` is a whole
//! `GenerateContentResponse` (https://ai.google.dev/api/generate-content). Text parts are
//! answer deltas, `thought: true` parts reasoning deltas, `functionCall` parts whole calls;
//! `usageMetadata` is cumulative (the last one wins). There is no terminal event: the body
//! ends, and a `finishReason` seen before that is what makes the answer complete.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::super::native::Decode;
use super::super::sse::Frame;
use super::super::types::{LlmError, LlmEvent, RawChunk, ToolCall, Usage};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    candidates: Option<Vec<Candidate>>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    response_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    finish_message: Option<String>,
    #[serde(default)]
    index: Option<u64>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    parts: Option<Vec<Part>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(default)]
    thought_signature: Option<String>,
    #[serde(default)]
    function_call: Option<FunctionCall>,
}

#[derive(Deserialize)]
struct FunctionCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    #[serde(default)]
    total_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

/// The per-request stream decoder.
#[derive(Debug)]
pub struct Decoder {
    raw: bool,
    /// Calls in arrival order, with Gemini's id when it sent one.
    calls: Vec<(Option<String>, ToolCall)>,
    /// The last signature on a part that is not a call (the answer's).
    text_signature: Option<String>,
    usage: Option<Usage>,
    finish: Option<String>,
    finish_message: Option<String>,
    response_id: Option<String>,
    produced: bool,
}

impl Decoder {
    pub fn new(raw: bool) -> Decoder {
        Decoder {
            raw,
            calls: Vec::new(),
            text_signature: None,
            usage: None,
            finish: None,
            finish_message: None,
            response_id: None,
            produced: false,
        }
    }

    fn part(&mut self, p: Part, out: &mut Vec<LlmEvent>) {
        let signature = p.thought_signature.filter(|s| !s.is_empty());
        if let Some(fc) = p.function_call {
            self.produced = true;
            let (arguments, arguments_error) = match fc.args {
                None | Some(Value::Null) => (Value::Object(Map::new()), None),
                Some(v @ Value::Object(_)) => (v, None),
                Some(other) => (
                    other,
                    Some("Gemini sent function arguments that are not a JSON object".to_string()),
                ),
            };
            let call = ToolCall {
                id: String::new(),
                name: fc.name.unwrap_or_default(),
                arguments,
                arguments_error,
                extra_content: signature.map(|s| json!({"google": {"thought_signature": s}})),
            };
            self.calls.push((fc.id.filter(|i| !i.is_empty()), call));
            return;
        }
        if let Some(s) = signature {
            self.text_signature = Some(s);
        }
        let Some(text) = p.text.filter(|t| !t.is_empty()) else {
            return;
        };
        self.produced = true;
        let thought = p.thought == Some(true);
        if self.raw {
            let mut r = RawChunk::default();
            if thought {
                r.reasoning_delta = Some(text.clone());
            } else {
                r.content_delta = Some(text.clone());
            }
            out.push(LlmEvent::Raw(r));
        }
        out.push(if thought {
            LlmEvent::Reasoning { text }
        } else {
            LlmEvent::Content { text }
        });
    }

    /// The normalised finish reason, or the error a reason without output stands for.
    fn reason(&self, wire: &str) -> Result<String, LlmError> {
        Ok(match wire {
            "STOP" if !self.calls.is_empty() => "tool_calls".into(),
            "STOP" => "stop".into(),
            "MAX_TOKENS" => "length".into(),
            // Nothing usable came: another attempt may well produce a valid call.
            "MALFORMED_FUNCTION_CALL" if !self.produced => {
                return Err(LlmError::Stream {
                    message: match &self.finish_message {
                        Some(m) => format!("Gemini produced a malformed function call: {m}"),
                        None => "Gemini produced a malformed function call".into(),
                    },
                    client_fault: false,
                });
            }
            other => other.to_ascii_lowercase(),
        })
    }
}

impl Decode for Decoder {
    fn frame(&mut self, f: Frame<'_>, out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        let data = f.data.trim_ascii();
        if data.is_empty() || data == b"[DONE]" {
            return Ok(());
        }
        let r: Response = serde_json::from_slice(data).map_err(|e| LlmError::Stream {
            message: format!(
                "Gemini sent an SSE event that is not a GenerateContentResponse ({e}): {}",
                preview(data)
            ),
            client_fault: false,
        })?;
        if let Some(e) = &r.error {
            return Err(stream_error(e));
        }
        if self.response_id.is_none() {
            self.response_id = r.response_id.filter(|i| !i.is_empty());
        }
        if let Some(u) = r.usage_metadata {
            let prompt = u.prompt_token_count.unwrap_or(0);
            // Thinking tokens are output tokens (billed as such) but not in the candidates.
            let completion =
                u.candidates_token_count.unwrap_or(0) + u.thoughts_token_count.unwrap_or(0);
            self.usage = Some(Usage {
                prompt,
                completion,
                total: u.total_token_count.unwrap_or(prompt + completion),
                cached: u.cached_content_token_count.unwrap_or(0),
                cache_write: 0,
            });
        }
        let candidate = r
            .candidates
            .into_iter()
            .flatten()
            .find(|c| c.index.unwrap_or(0) == 0);
        let Some(c) = candidate else {
            if let Some(b) = r.prompt_feedback.and_then(|p| p.block_reason) {
                return Err(LlmError::Stream {
                    message: format!("Gemini blocked the prompt (blockReason {b})"),
                    client_fault: true,
                });
            }
            return Ok(());
        };
        for p in c.content.and_then(|c| c.parts).into_iter().flatten() {
            self.part(p, out);
        }
        if let Some(reason) = c.finish_reason.filter(|r| !r.is_empty()) {
            if self.raw {
                out.push(LlmEvent::Raw(RawChunk {
                    finish_reason: Some(reason.to_ascii_lowercase()),
                    ..RawChunk::default()
                }));
            }
            self.finish = Some(reason);
            self.finish_message = c.finish_message;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        let Some(wire) = self.finish.take() else {
            return Err(LlmError::Stream {
                message: "the Gemini stream ended before finishReason: the connection was cut"
                    .into(),
                client_fault: false,
            });
        };
        let reason = self.reason(&wire)?;
        // Gemini's calls carry no id (newer models may): one unique to this response, so
        // ids never repeat across the rounds of a session.
        let nonce = self.response_id.clone().unwrap_or_else(time_nonce);
        for (n, (id, mut call)) in std::mem::take(&mut self.calls).into_iter().enumerate() {
            match id {
                // Gemini's own id must come back on the call and its functionResponse:
                // remember that it is the vendor's (ours are not sent).
                Some(id) => {
                    let x = call
                        .extra_content
                        .get_or_insert_with(|| json!({"google": {}}));
                    if let Some(g) = x.get_mut("google").and_then(Value::as_object_mut) {
                        g.insert("id".into(), Value::Bool(true));
                    }
                    call.id = id;
                }
                None => call.id = format!("call_{nonce}_{n}"),
            }
            if self.raw {
                out.push(LlmEvent::Raw(RawChunk {
                    tool_call_delta: Some(call.clone()),
                    ..RawChunk::default()
                }));
            }
            out.push(LlmEvent::ToolCall(call));
        }
        if let Some(u) = self.usage.take() {
            out.push(LlmEvent::Usage(u));
        }
        if let Some(sig) = self.text_signature.take() {
            out.push(LlmEvent::State {
                data: json!({"google": {"textSignature": sig}}),
            });
        }
        out.push(LlmEvent::Finish { reason });
        Ok(())
    }

    fn is_done(&self) -> bool {
        false
    }
}

/// An `{"error": {code, message, status}}` inside the stream, typed by its status.
pub fn stream_error(e: &Value) -> LlmError {
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| e.as_str().map(str::to_string))
        .unwrap_or_else(|| preview(e.to_string().as_bytes()));
    let status = e.get("status").and_then(Value::as_str).unwrap_or("");
    let code = e.get("code").and_then(Value::as_u64);
    if status == "RESOURCE_EXHAUSTED" || code == Some(429) {
        return LlmError::RateLimited {
            retry_after: super::retry_info(e),
            body: message,
        };
    }
    if super::is_overflow(&message.to_ascii_lowercase()) {
        return LlmError::ContextOverflow { message };
    }
    let client_fault = matches!(
        status,
        "INVALID_ARGUMENT"
            | "FAILED_PRECONDITION"
            | "PERMISSION_DENIED"
            | "UNAUTHENTICATED"
            | "NOT_FOUND"
            | "OUT_OF_RANGE"
    ) || code
        .is_some_and(|c| (400..500).contains(&c) && !matches!(c, 408 | 409));
    let label = match (status, code) {
        ("", None) => String::new(),
        ("", Some(c)) => format!(" (code {c})"),
        (s, None) => format!(" ({s})"),
        (s, Some(c)) => format!(" ({s}, code {c})"),
    };
    LlmError::Stream {
        message: format!("{message}{label}"),
        client_fault,
    }
}

/// The longest stretch of a bad payload quoted in an error.
const PREVIEW_BYTES: usize = 300;

fn preview(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(PREVIEW_BYTES)]);
    if b.len() > PREVIEW_BYTES {
        format!("{s}…")
    } else {
        s.into_owned()
    }
}

/// Base-36 nanoseconds since the epoch: call ids for a response that came without a
/// `responseId`, distinct across restarts of a stored session.
fn time_nonce() -> String {
    let mut n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut s = Vec::new();
    loop {
        let d = (n % 36) as u8;
        s.push(if d < 10 { b'0' + d } else { b'a' + d - 10 });
        n /= 36;
        if n == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).unwrap_or_default()
}
