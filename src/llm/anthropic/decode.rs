//! The Messages stream: `message_start`, per-block `content_block_start` / `_delta` /
//! `_stop`, `message_delta` (stop reason, usage), `message_stop`; `ping` and unknown events
//! are ignored, `error` fails the stream typed by its `error.type`.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::super::accumulate::is_overflow;
use super::super::native::Decode;
use super::super::sse::Frame;
use super::super::types::{LlmError, LlmEvent, RawChunk, ToolCall, Usage};
use super::VENDOR;

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    content_block: Option<StartBlock>,
    #[serde(default)]
    message: Option<StartMessage>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<Value>,
}

/// A `content_block_delta` delta or a `message_delta` delta (disjoint members).
#[derive(Deserialize, Default)]
struct Delta {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct StartBlock {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Value>,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    usage: Option<RawUsage>,
}

#[derive(Deserialize, Default)]
struct RawUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

/// What one content block accumulated.
#[derive(Debug)]
enum Acc {
    Text,
    Thinking {
        text: String,
        signature: String,
    },
    Redacted {
        data: String,
    },
    Tool {
        id: String,
        name: String,
        json: String,
        /// The `input` of `content_block_start` (the whole input when no delta follows).
        start: Option<Value>,
    },
    /// Server tool blocks and future types: nothing to show or send back here.
    Other,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_creation: u64,
}

/// The stream decoder of one request.
#[derive(Debug)]
pub struct Decoder {
    raw: bool,
    /// Blocks by their stream `index` (few per message: searched, not indexed, so a
    /// hostile index cannot make us allocate).
    blocks: Vec<(u64, Acc)>,
    usage: Option<Counts>,
    stop: Option<String>,
    done: bool,
}

impl Decoder {
    pub fn new(raw: bool) -> Decoder {
        Decoder {
            raw,
            blocks: Vec::new(),
            usage: None,
            stop: None,
            done: false,
        }
    }

    fn block(&mut self, index: u64) -> Option<&mut Acc> {
        self.blocks
            .iter_mut()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, a)| a)
    }

    fn take_usage(&mut self, u: &RawUsage) {
        let c = self.usage.get_or_insert_with(Counts::default);
        // Later events carry cumulative counts: each member present replaces the last.
        if let Some(n) = u.input_tokens {
            c.input = n;
        }
        if let Some(n) = u.output_tokens {
            c.output = n;
        }
        if let Some(n) = u.cache_read_input_tokens {
            c.cache_read = n;
        }
        if let Some(n) = u.cache_creation_input_tokens {
            c.cache_creation = n;
        }
    }

    fn content(&self, text: String, out: &mut Vec<LlmEvent>) {
        if text.is_empty() {
            return;
        }
        if self.raw {
            out.push(LlmEvent::Raw(RawChunk {
                content_delta: Some(text.clone()),
                ..RawChunk::default()
            }));
        }
        out.push(LlmEvent::Content { text });
    }

    fn reasoning(&self, text: String, out: &mut Vec<LlmEvent>) {
        if text.is_empty() {
            return;
        }
        if self.raw {
            out.push(LlmEvent::Raw(RawChunk {
                reasoning_delta: Some(text.clone()),
                ..RawChunk::default()
            }));
        }
        out.push(LlmEvent::Reasoning { text });
    }

    fn start(&mut self, index: u64, b: StartBlock, out: &mut Vec<LlmEvent>) {
        let acc = match b.kind.as_str() {
            "text" => {
                self.content(b.text.unwrap_or_default(), out);
                Acc::Text
            }
            "thinking" => {
                let text = b.thinking.unwrap_or_default();
                self.reasoning(text.clone(), out);
                Acc::Thinking {
                    text,
                    signature: b.signature.unwrap_or_default(),
                }
            }
            "redacted_thinking" => Acc::Redacted {
                data: b.data.unwrap_or_default(),
            },
            "tool_use" => Acc::Tool {
                id: b.id.unwrap_or_default(),
                name: b.name.unwrap_or_default(),
                json: String::new(),
                start: b.input,
            },
            _ => Acc::Other,
        };
        self.blocks.push((index, acc));
    }

    fn delta(&mut self, index: u64, d: Delta, out: &mut Vec<LlmEvent>) {
        match d.kind.as_deref() {
            Some("text_delta") => self.content(d.text.unwrap_or_default(), out),
            Some("thinking_delta") => {
                let t = d.thinking.unwrap_or_default();
                if let Some(Acc::Thinking { text, .. }) = self.block(index) {
                    text.push_str(&t);
                }
                self.reasoning(t, out);
            }
            Some("signature_delta") => {
                // The SDKs set, not append: the signature comes whole.
                if let Some(Acc::Thinking { signature, .. }) = self.block(index) {
                    *signature = d.signature.unwrap_or_default();
                }
            }
            Some("input_json_delta") => {
                if let Some(Acc::Tool { json, .. }) = self.block(index) {
                    json.push_str(d.partial_json.as_deref().unwrap_or(""));
                }
            }
            // citations_delta and future kinds carry nothing we show.
            _ => {}
        }
    }
}

/// Normalised finish reasons; anything else passes through as the vendor's word.
fn finish_reason(stop: &str) -> String {
    match stop {
        "end_turn" | "stop_sequence" => "stop",
        "tool_use" => "tool_calls",
        "max_tokens" | "model_context_window_exceeded" => "length",
        other => other,
    }
    .to_string()
}

/// The most bytes of a bad payload quoted in an error.
const PREVIEW_BYTES: usize = 300;

fn preview(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(PREVIEW_BYTES)]);
    if b.len() > PREVIEW_BYTES {
        format!("{s}…")
    } else {
        s.into_owned()
    }
}

/// An in-stream `error` event typed by `error.type`: overflow wording → `ContextOverflow`,
/// `rate_limit_error` → `RateLimited`, client faults (invalid request, auth, permission,
/// not found, too large, billing) not retried, the rest (overloaded, api error) retried.
pub fn stream_error(error: Option<&Value>, raw: &[u8]) -> LlmError {
    let kind = error
        .and_then(|e| e.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| preview(raw));
    if is_overflow(&message.to_ascii_lowercase()) {
        return LlmError::ContextOverflow { message };
    }
    let text = if kind.is_empty() {
        message
    } else {
        format!("{kind}: {message}")
    };
    match kind {
        "rate_limit_error" => LlmError::RateLimited {
            retry_after: None,
            body: text,
        },
        "invalid_request_error"
        | "authentication_error"
        | "permission_error"
        | "not_found_error"
        | "request_too_large"
        | "billing_error" => LlmError::Stream {
            message: text,
            client_fault: true,
        },
        _ => LlmError::Stream {
            message: text,
            client_fault: false,
        },
    }
}

fn complete(id: String, name: String, json: String, start: Option<Value>) -> ToolCall {
    let (arguments, arguments_error) = if json.trim().is_empty() {
        // No delta: the start block's input is the whole input (`{}` when absent).
        match start {
            Some(v @ Value::Object(_)) => (v, None),
            _ => (Value::Object(Map::new()), None),
        }
    } else {
        super::super::accumulate::parse_arguments(json)
    };
    ToolCall {
        id,
        name,
        arguments,
        arguments_error,
        extra_content: None,
    }
}

impl Decode for Decoder {
    fn frame(&mut self, f: Frame<'_>, out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        if self.done {
            return Ok(());
        }
        let data = f.data.trim_ascii();
        if data.is_empty() {
            return Ok(());
        }
        let ev: Event = match serde_json::from_slice(data) {
            Ok(ev) => ev,
            Err(_) if f.event == Some("error") => return Err(stream_error(None, data)),
            Err(e) => {
                return Err(LlmError::Stream {
                    message: format!(
                        "Anthropic sent an SSE event that is not a JSON event ({e}): {}",
                        preview(data)
                    ),
                    client_fault: false,
                });
            }
        };
        let kind = ev.kind.as_deref().or(f.event).unwrap_or("");
        let index = ev.index.unwrap_or(0);
        match kind {
            "message_start" => {
                if let Some(u) = ev.message.and_then(|m| m.usage) {
                    self.take_usage(&u);
                }
            }
            "content_block_start" => {
                if let Some(b) = ev.content_block {
                    self.start(index, b, out);
                }
            }
            "content_block_delta" => {
                if let Some(d) = ev.delta {
                    self.delta(index, d, out);
                }
            }
            "message_delta" => {
                if let Some(u) = &ev.usage {
                    self.take_usage(u);
                }
                if let Some(r) = ev.delta.and_then(|d| d.stop_reason) {
                    let reason = finish_reason(&r);
                    if self.raw {
                        out.push(LlmEvent::Raw(RawChunk {
                            finish_reason: Some(reason),
                            ..RawChunk::default()
                        }));
                    }
                    self.stop = Some(r);
                }
            }
            "message_stop" => self.done = true,
            "error" => return Err(stream_error(ev.error.as_ref(), data)),
            // ping, content_block_stop and event types added later.
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        if !self.done && self.stop.is_none() {
            return Err(LlmError::Stream {
                message: "the Anthropic stream ended before message_stop (no stop_reason): the connection was cut".into(),
                client_fault: false,
            });
        }
        let mut state = Vec::new();
        for (_, acc) in std::mem::take(&mut self.blocks) {
            match acc {
                Acc::Tool {
                    id,
                    name,
                    json,
                    start,
                } => {
                    let call = complete(id, name, json, start);
                    if self.raw {
                        out.push(LlmEvent::Raw(RawChunk {
                            tool_call_delta: Some(call.clone()),
                            ..RawChunk::default()
                        }));
                    }
                    out.push(LlmEvent::ToolCall(call));
                }
                // A thinking block without its signature would be refused on the way back.
                Acc::Thinking { text, signature } if !signature.is_empty() => state.push(json!({
                    "type": "thinking",
                    "thinking": text,
                    "signature": signature,
                })),
                Acc::Redacted { data } if !data.is_empty() => state.push(json!({
                    "type": "redacted_thinking",
                    "data": data,
                })),
                _ => {}
            }
        }
        if let Some(c) = self.usage.take() {
            let prompt = c.input + c.cache_read + c.cache_creation;
            out.push(LlmEvent::Usage(Usage {
                prompt,
                completion: c.output,
                total: prompt + c.output,
                cached: c.cache_read,
                cache_write: c.cache_creation,
            }));
        }
        if !state.is_empty() {
            out.push(LlmEvent::State {
                data: json!({ VENDOR: { "content": state } }),
            });
        }
        let reason = self
            .stop
            .take()
            .map_or_else(|| "stop".to_string(), |r| finish_reason(&r));
        out.push(LlmEvent::Finish { reason });
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }
}
