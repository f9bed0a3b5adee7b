//! Turns the semantic SSE events of a streamed `/responses` call into `LlmEvent`s: pure,
//! no I/O.
//!
//! Text and reasoning-summary deltas go out as they arrive; function calls are accumulated
//! by output item (argument deltas, then the `done` events' whole arguments win) and emitted
//! at the end with the usage, the reasoning items (state) and the finish reason. The stream
//! ends with `response.completed`, `response.incomplete` or `response.failed` (no `[DONE]`).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::super::accumulate::classify;
use super::super::native::Decode;
use super::super::sse::Frame;
use super::super::types::{LlmError, LlmEvent, RawChunk, ToolCall, Usage};
use super::STATE_KEY;

/// One event: only the members this decoder reads (the rest of each event is skipped).
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    /// A string for text deltas; kept raw because some delta events carry objects.
    #[serde(borrow, default)]
    delta: Option<&'a RawValue>,
    #[serde(borrow, default)]
    item_id: Option<Cow<'a, str>>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(default)]
    content_index: Option<u64>,
    /// A string from OpenAI; kept loose so an odd gateway's shape cannot fail the stream.
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    item: Option<Value>,
    /// The whole response object: large and only read on the terminal events.
    #[serde(borrow, default)]
    response: Option<&'a RawValue>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

/// The members of the response object the terminal events read.
#[derive(Deserialize, Default)]
struct ResponseObj {
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    incomplete_details: Option<Value>,
    #[serde(default)]
    output: Option<Value>,
}

#[derive(Debug, Default)]
struct Call {
    /// The output item's id (`fc_…`): what argument deltas name.
    item_id: String,
    /// What a `function_call_output` answers (`call_…`): the tool call's id.
    call_id: String,
    name: String,
    args: String,
}

#[derive(Debug)]
pub struct Decoder {
    raw: bool,
    calls: Vec<Call>,
    /// `reasoning` output items as received (id, summary, encrypted_content): the state.
    reasoning: Vec<Value>,
    /// Output items whose text arrived as deltas (their `done` event repeats it).
    streamed: Vec<String>,
    /// Whether any text or reasoning delta arrived (for items that come without an id).
    any_delta: bool,
    /// The reasoning part the last reasoning text belonged to: a new part (the summary's
    /// next paragraph, or the next item) starts after a blank line.
    reasoning_at: Option<(String, u64)>,
    usage: Option<Usage>,
    finish: Option<String>,
    done: bool,
}

impl Decoder {
    pub fn new(raw: bool) -> Decoder {
        Decoder {
            raw,
            calls: Vec::new(),
            reasoning: Vec::new(),
            streamed: Vec::new(),
            any_delta: false,
            reasoning_at: None,
            usage: None,
            finish: None,
            done: false,
        }
    }

    fn content(&mut self, text: String, out: &mut Vec<LlmEvent>) {
        if text.is_empty() {
            return;
        }
        if self.raw {
            out.push(LlmEvent::Content { text: text.clone() });
            out.push(LlmEvent::Raw(RawChunk {
                content_delta: Some(text),
                ..RawChunk::default()
            }));
        } else {
            out.push(LlmEvent::Content { text });
        }
    }

    fn reasoning_text(&mut self, at: (String, u64), text: &str, out: &mut Vec<LlmEvent>) {
        if text.is_empty() {
            return;
        }
        let text = match &self.reasoning_at {
            Some(prev) if *prev != at => format!("\n\n{text}"),
            _ => text.to_string(),
        };
        self.reasoning_at = Some(at);
        if self.raw {
            out.push(LlmEvent::Reasoning { text: text.clone() });
            out.push(LlmEvent::Raw(RawChunk {
                reasoning_delta: Some(text),
                ..RawChunk::default()
            }));
        } else {
            out.push(LlmEvent::Reasoning { text });
        }
    }

    fn mark_streamed(&mut self, id: Option<&str>) {
        self.any_delta = true;
        if let Some(id) = id
            && self.streamed.last().map(String::as_str) != Some(id)
            && !self.streamed.iter().any(|s| s == id)
        {
            self.streamed.push(id.to_string());
        }
    }

    fn was_streamed(&self, id: Option<&str>) -> bool {
        match id {
            Some(id) => self.streamed.iter().any(|s| s == id),
            None => self.any_delta,
        }
    }

    /// The call an event about output item `item_id` belongs to, created if it is new.
    fn call_for(&mut self, item_id: &str) -> &mut Call {
        let pos = match self.calls.iter().rposition(|c| c.item_id == item_id) {
            Some(p) => p,
            // A delta without an item id continues the last call.
            None if item_id.is_empty() && !self.calls.is_empty() => self.calls.len() - 1,
            None => {
                self.calls.push(Call {
                    item_id: item_id.to_string(),
                    ..Call::default()
                });
                self.calls.len() - 1
            }
        };
        &mut self.calls[pos]
    }

    /// A `function_call` item (added or done): ids and name fill in; the `done` item's
    /// arguments are the whole text and replace what the deltas built.
    fn call_item(&mut self, item: &Value, whole_args: bool) {
        let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
        let (item_id, call_id) = (s("id"), s("call_id"));
        let pos = self.calls.iter().rposition(|c| {
            (!item_id.is_empty() && c.item_id == item_id)
                || (!call_id.is_empty() && c.call_id == call_id)
        });
        let call = match pos {
            Some(p) => &mut self.calls[p],
            None => {
                self.calls.push(Call {
                    item_id: item_id.to_string(),
                    ..Call::default()
                });
                let last = self.calls.len() - 1;
                &mut self.calls[last]
            }
        };
        if call.item_id.is_empty() {
            call.item_id = item_id.to_string();
        }
        if !call_id.is_empty() {
            call.call_id = call_id.to_string();
        }
        if !s("name").is_empty() {
            call.name = s("name").to_string();
        }
        if let Some(a) = item.get("arguments").and_then(Value::as_str)
            && (whole_args || call.args.is_empty())
        {
            call.args = a.to_string();
        }
    }

    /// A finished output item (`response.output_item.done`, or one of the final response's
    /// `output`): calls complete, reasoning items are kept, and text that never came as
    /// deltas (a gateway that sends only whole items) is emitted now.
    fn item_done(&mut self, item: Value, out: &mut Vec<LlmEvent>) {
        let id = item.get("id").and_then(Value::as_str).map(str::to_string);
        match item.get("type").and_then(Value::as_str) {
            Some("function_call") => self.call_item(&item, true),
            Some("reasoning") => {
                if !self.was_streamed(id.as_deref()) {
                    let texts = item.get("summary").and_then(Value::as_array);
                    for (n, t) in texts.into_iter().flatten().enumerate() {
                        if let Some(t) = t.get("text").and_then(Value::as_str) {
                            let at = (id.clone().unwrap_or_default(), n as u64);
                            self.reasoning_text(at, t, out);
                        }
                    }
                    self.mark_streamed(id.as_deref());
                }
                // The final response's `output` repeats the items `output_item.done` gave.
                let known = id.is_some()
                    && self
                        .reasoning
                        .iter()
                        .any(|r| r.get("id").and_then(Value::as_str) == id.as_deref());
                if !known {
                    self.reasoning.push(item);
                }
            }
            Some("message") => {
                if self.was_streamed(id.as_deref()) {
                    return;
                }
                let parts = item.get("content").and_then(Value::as_array);
                let mut text = String::new();
                for p in parts.into_iter().flatten() {
                    let t = match p.get("type").and_then(Value::as_str) {
                        Some("output_text") => p.get("text"),
                        Some("refusal") => p.get("refusal"),
                        _ => None,
                    };
                    text.push_str(t.and_then(Value::as_str).unwrap_or_default());
                }
                self.mark_streamed(id.as_deref());
                self.content(text, out);
            }
            _ => {}
        }
    }

    /// `response.completed` / `response.incomplete`: usage, any output item the stream did
    /// not deliver, and the finish reason.
    fn terminal(
        &mut self,
        kind: &str,
        response: Option<&RawValue>,
        out: &mut Vec<LlmEvent>,
    ) -> Result<(), LlmError> {
        let r = parse_response(response)?;
        if let Some(Value::Array(items)) = r.output {
            for item in items {
                self.item_done(item, out);
            }
        }
        if let Some(u) = r.usage.as_ref().and_then(usage) {
            self.usage = Some(u);
        }
        let reason = if kind == "response.incomplete" {
            let why = r
                .incomplete_details
                .as_ref()
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_str);
            match why {
                Some("max_output_tokens") | None => "length".to_string(),
                Some(other) => other.to_string(),
            }
        } else if self.calls.is_empty() {
            "stop".to_string()
        } else {
            "tool_calls".to_string()
        };
        if self.raw {
            out.push(LlmEvent::Raw(RawChunk {
                finish_reason: Some(reason.clone()),
                ..RawChunk::default()
            }));
        }
        self.finish = Some(reason);
        self.done = true;
        Ok(())
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
        // Not OpenAI's, but gateways that proxy the Responses API append it.
        if data == b"[DONE]" {
            self.done = true;
            return Ok(());
        }
        let ev: Event<'_> = serde_json::from_slice(data).map_err(|e| LlmError::Stream {
            message: format!(
                "the provider sent an SSE event that is not a JSON Responses event ({e}): {}",
                preview(data)
            ),
            client_fault: false,
        })?;
        let kind = ev.kind.as_deref().or(f.event).unwrap_or_default();
        match kind {
            "response.output_text.delta" | "response.refusal.delta" => {
                self.mark_streamed(ev.item_id.as_deref());
                self.content(delta_text(ev.delta), out);
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.mark_streamed(ev.item_id.as_deref());
                let part = ev.summary_index.or(ev.content_index).unwrap_or(0);
                let at = (ev.item_id.as_deref().unwrap_or_default().to_string(), part);
                self.reasoning_text(at, &delta_text(ev.delta), out);
            }
            "response.output_item.added" => {
                if let Some(item) = &ev.item
                    && item.get("type").and_then(Value::as_str) == Some("function_call")
                {
                    self.call_item(item, false);
                }
            }
            "response.function_call_arguments.delta" => {
                let text = delta_text(ev.delta);
                let call = self.call_for(ev.item_id.as_deref().unwrap_or_default());
                call.args.push_str(&text);
            }
            "response.function_call_arguments.done" => {
                if let Some(Value::String(a)) = ev.arguments {
                    self.call_for(ev.item_id.as_deref().unwrap_or_default())
                        .args = a;
                }
            }
            "response.output_item.done" => {
                if let Some(item) = ev.item {
                    self.item_done(item, out);
                }
            }
            "response.completed" | "response.incomplete" => {
                self.terminal(kind, ev.response, out)?;
            }
            "response.failed" => {
                let r = parse_response(ev.response)?;
                let err = r.error.unwrap_or(Value::Null);
                return Err(vendor_error(
                    err.get("code"),
                    err.get("message").and_then(Value::as_str),
                    "the provider reported response.failed",
                ));
            }
            "error" => {
                // Documented flat (`code`, `message`); seen nested under `error` too.
                let nested = ev.error.as_ref().filter(|e| e.is_object());
                let code = ev
                    .code
                    .as_ref()
                    .filter(|c| !c.is_null())
                    .or_else(|| nested.and_then(|e| e.get("code")));
                let message = ev.message.as_deref().or_else(|| {
                    nested
                        .and_then(|e| e.get("message"))
                        .and_then(Value::as_str)
                });
                return Err(vendor_error(
                    code,
                    message,
                    "the provider sent an error event",
                ));
            }
            // Lifecycle and `.done` repeats of what the deltas carried.
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        if !self.done {
            return Err(LlmError::Stream {
                message: "the stream ended before the response finished (no response.completed): the connection was cut".into(),
                client_fault: false,
            });
        }
        // A `[DONE]` without a terminal event leaves the reason to what arrived.
        let reason = match self.finish.take() {
            Some(r) => r,
            None if self.calls.is_empty() => "stop".to_string(),
            None => "tool_calls".to_string(),
        };
        let calls = std::mem::take(&mut self.calls);
        for (n, c) in calls.into_iter().enumerate() {
            let call = complete(n, c);
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
        if !self.reasoning.is_empty() {
            let items = std::mem::take(&mut self.reasoning);
            out.push(LlmEvent::State {
                data: json!({ STATE_KEY: { "items": items } }),
            });
        }
        out.push(LlmEvent::Finish { reason });
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }
}

fn parse_response(raw: Option<&RawValue>) -> Result<ResponseObj, LlmError> {
    match raw {
        None => Ok(ResponseObj::default()),
        Some(r) if r.get() == "null" => Ok(ResponseObj::default()),
        Some(r) => serde_json::from_str(r.get()).map_err(|e| LlmError::Stream {
            message: format!(
                "the provider sent a malformed response object ({e}): {}",
                preview(r.get().as_bytes())
            ),
            client_fault: false,
        }),
    }
}

/// A delta's text (empty when it is not a string). Strings without escapes are copied
/// straight out of the raw text: one parser run per delta shows at high event rates.
fn delta_text(v: Option<&RawValue>) -> String {
    let Some(v) = v else {
        return String::new();
    };
    let t = v.get();
    if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') && !t.contains('\\') {
        return t[1..t.len() - 1].to_string();
    }
    serde_json::from_str::<String>(t).unwrap_or_default()
}

/// `usage` of the response object (`input_tokens` includes the cached ones;
/// `output_tokens` includes the reasoning ones).
fn usage(u: &Value) -> Option<Usage> {
    let u = u.as_object()?;
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let detail = |k: &str, d: &str| {
        u.get(k)
            .and_then(|v| v.get(d))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let (prompt, completion) = (n("input_tokens"), n("output_tokens"));
    Some(Usage {
        prompt,
        completion,
        total: u
            .get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(prompt + completion),
        cached: detail("input_tokens_details", "cached_tokens"),
        cache_write: 0,
    })
}

/// An in-stream error typed by its code: overflow and rate limits by `classify`, request
/// problems (`invalid_prompt`, the image codes, quota) as client faults that a retry cannot
/// fix, the rest (`server_error`, `vector_store_timeout`, unknown) as retryable.
fn vendor_error(code: Option<&Value>, message: Option<&str>, fallback: &str) -> LlmError {
    let message = message
        .filter(|m| !m.is_empty())
        .unwrap_or(fallback)
        .to_string();
    let code = code.filter(|c| !c.is_null());
    let client = code.and_then(Value::as_str).is_some_and(|c| {
        c.starts_with("invalid")
            || c.contains("image")
            || c.starts_with("unsupported")
            || c == "insufficient_quota"
    });
    match classify(message, code, None) {
        LlmError::Stream { message, .. } if client => LlmError::Stream {
            message,
            client_fault: true,
        },
        e => e,
    }
}

fn complete(n: usize, c: Call) -> ToolCall {
    let id = if !c.call_id.is_empty() {
        c.call_id
    } else if !c.item_id.is_empty() {
        c.item_id
    } else {
        format!("call_{n}")
    };
    let (arguments, arguments_error) = super::super::accumulate::parse_arguments(c.args);
    ToolCall {
        id,
        name: c.name,
        arguments,
        arguments_error,
        extra_content: None,
    }
}

/// The longest stretch of a bad payload quoted in an error (keeps messages readable).
const PREVIEW_BYTES: usize = 300;

fn preview(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(PREVIEW_BYTES)]);
    if b.len() > PREVIEW_BYTES {
        format!("{s}…")
    } else {
        s.into_owned()
    }
}
