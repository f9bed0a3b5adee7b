//! Turns SSE frames of an OpenAI-compatible stream into `LlmEvent`s: pure, no I/O.
//!
//! Handles the vendor divergences of reference/hosts-and-users.md §4: usage in any placement
//! (last one wins), reasoning from the configured delta fields, `reasoning_details` or
//! `<think>` tags, tool calls accumulated by index (whole calls, missing or repeated
//! indexes, empty name fragments, object-typed arguments) and dispatched from what was
//! accumulated when the stream ends, and every error-inside-a-200 shape.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::sse::Frame;
use super::types::{LlmError, LlmEvent, RawChunk, ToolCall, Usage};

/// What the decoder reads beyond the reference shape (from the compat flags).
#[derive(Debug, Clone)]
pub struct DecodeOptions {
    pub reasoning_fields: Vec<String>,
    pub cached_fields: Vec<String>,
    pub raw: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        let f = super::compat::CompatFlags::default();
        DecodeOptions {
            reasoning_fields: f.reasoning_delta_fields,
            cached_fields: f.cached_tokens_fields,
            raw: false,
        }
    }
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(borrow, default)]
    usage: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    object: Option<Cow<'a, str>>,
    /// vLLM's older top-level error shape carries `message` and `code` beside `object`.
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    code: Option<Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: Option<i64>,
    #[serde(borrow, default)]
    delta: Option<Fields<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    usage: Option<&'a RawValue>,
}

/// A JSON object kept as borrowed `(key, raw value)` pairs: the delta's member names are
/// configuration (`reasoningDeltaFields`). The first few pairs live inline and small: a
/// delta has two or three members, and an allocation or a large move per event shows up
/// in the throughput. Member names that need unescaping are skipped (no vendor sends them).
struct Fields<'a> {
    inline: [Option<(&'a str, &'a RawValue)>; INLINE_FIELDS],
    more: Vec<(&'a str, &'a RawValue)>,
}

const INLINE_FIELDS: usize = 4;

/// A borrowed member name, or `None` when it had escapes.
struct Key<'a>(Option<&'a str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Key<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'a>, E> {
                Ok(Key(Some(v)))
            }
            fn visit_str<E>(self, _: &str) -> Result<Key<'a>, E> {
                Ok(Key(None))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

impl<'a> Fields<'a> {
    fn get(&self, k: &str) -> Option<&'a RawValue> {
        self.inline
            .iter()
            .map_while(|p| p.as_ref())
            .chain(self.more.iter())
            .find(|(n, v)| *n == k && v.get() != "null")
            .map(|(_, v)| *v)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Fields<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Fields<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Fields<'a>, M::Error> {
                let mut f = Fields {
                    inline: [None; INLINE_FIELDS],
                    more: Vec::new(),
                };
                let mut n = 0;
                while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
                    let val: &'de RawValue = m.next_value()?;
                    let Some(k) = k else { continue };
                    match f.inline.get_mut(n) {
                        Some(slot) => *slot = Some((k, val)),
                        None => f.more.push((k, val)),
                    }
                    n += 1;
                }
                Ok(f)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// A JSON string value; strings without escapes are copied straight out of the raw text
/// (one parser run per content delta is measurable at a million events a second).
fn raw_string(v: &RawValue) -> Option<String> {
    let t = v.get();
    if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') && !t.contains('\\') {
        return Some(t[1..t.len() - 1].to_string());
    }
    serde_json::from_str::<Option<String>>(t).ok().flatten()
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<i64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
    #[serde(default)]
    extra_content: Option<Value>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// A string fragment (the norm) or a whole JSON object (Ollama's native shape).
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Debug, Default)]
struct Slot {
    index: Option<i64>,
    id: String,
    name: String,
    args: String,
    extra: Option<Value>,
}

/// Routes `<think>…</think>` inside content to reasoning, across chunk boundaries.
#[derive(Debug, Default)]
struct ThinkRouter {
    inside: bool,
    /// A possible partial tag held back until the next chunk.
    pending: String,
    /// Just closed a think block: drop the newlines templates put after it.
    after_close: bool,
}

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

impl ThinkRouter {
    /// Whether `text` passes through as content untouched (the common case: no tag in
    /// sight, nothing held back, not inside a think block, no newlines to drop).
    fn is_plain(&self, text: &str) -> bool {
        !self.inside && !self.after_close && self.pending.is_empty() && !text.contains('<')
    }

    /// Splits `text` into `(is_reasoning, piece)` segments.
    fn push(&mut self, text: &str, out: &mut Vec<(bool, String)>) {
        if !self.inside && self.pending.is_empty() && !text.contains('<') {
            self.emit(false, text, out);
            return;
        }
        let mut s = std::mem::take(&mut self.pending);
        s.push_str(text);
        let mut rest: &str = &s;
        loop {
            let tag = if self.inside { CLOSE } else { OPEN };
            if let Some(p) = rest.find(tag) {
                self.emit(self.inside, &rest[..p], out);
                self.inside = !self.inside;
                if !self.inside {
                    self.after_close = true;
                }
                rest = &rest[p + tag.len()..];
                continue;
            }
            let keep = (1..tag.len())
                .rev()
                .find(|&n| {
                    rest.len() >= n
                        && rest.is_char_boundary(rest.len() - n)
                        && tag.starts_with(&rest[rest.len() - n..])
                })
                .unwrap_or(0);
            self.emit(self.inside, &rest[..rest.len() - keep], out);
            self.pending = rest[rest.len() - keep..].to_string();
            break;
        }
    }

    fn flush(&mut self, out: &mut Vec<(bool, String)>) {
        let p = std::mem::take(&mut self.pending);
        self.emit(self.inside, &p, out);
    }

    fn emit(&mut self, reasoning: bool, text: &str, out: &mut Vec<(bool, String)>) {
        let text = if !reasoning && self.after_close {
            let t = text.trim_start_matches(['\n', '\r']);
            if !t.is_empty() {
                self.after_close = false;
            }
            t
        } else {
            text
        };
        if !text.is_empty() {
            out.push((reasoning, text.to_string()));
        }
    }
}

/// Finish reasons passed through as they are; anything else is reported as `other`.
const KNOWN_FINISH: &[&str] = &[
    "stop",
    "length",
    "tool_calls",
    "content_filter",
    "function_call",
    "sensitive",
];

/// The stream decoder: feed it frames, then `finish` at `[DONE]` or end of input.
#[derive(Debug)]
pub struct Decoder {
    opts: DecodeOptions,
    slots: Vec<Slot>,
    think: ThinkRouter,
    segments: Vec<(bool, String)>,
    usage: Option<Usage>,
    finish: Option<String>,
    done: bool,
    /// Whether any content, reasoning or tool call arrived (an empty `other` finish fails).
    produced: bool,
}

impl Decoder {
    pub fn new(opts: DecodeOptions) -> Decoder {
        Decoder {
            opts,
            slots: Vec::new(),
            think: ThinkRouter::default(),
            segments: Vec::new(),
            usage: None,
            finish: None,
            done: false,
            produced: false,
        }
    }

    /// True once `data: [DONE]` was seen; later frames are ignored.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Decodes one SSE frame into `out`.
    pub fn frame(&mut self, f: Frame<'_>, out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        if self.done {
            return Ok(());
        }
        let data = trim_ascii(f.data);
        if data == b"[DONE]" {
            self.done = true;
            return Ok(());
        }
        if f.event == Some("error") {
            return Err(error_from_text(data));
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Chunk<'_> = serde_json::from_slice(data).map_err(|e| LlmError::Stream {
            message: format!(
                "the provider sent an SSE event that is not a JSON chunk ({e}): {}",
                preview(data)
            ),
            client_fault: false,
        })?;
        if let Some(err) = chunk.error {
            return Err(error_from_json(err.get()));
        }
        if chunk.object.as_deref() == Some("error") {
            let msg = chunk.message.unwrap_or_else(|| preview(data));
            return Err(classify(msg, chunk.code.as_ref(), None));
        }
        if let Some(u) = chunk.usage {
            self.take_usage(u);
        }
        for choice in chunk.choices.iter().flatten() {
            if choice.index.is_some_and(|i| i != 0) {
                continue;
            }
            if let Some(u) = choice.usage {
                self.take_usage(u);
            }
            let mut raw = RawChunk::default();
            if let Some(delta) = &choice.delta {
                self.delta(delta, &mut raw, out)?;
            }
            if let Some(r) = &choice.finish_reason {
                raw.finish_reason = Some(r.to_string());
                self.finish_reason(r)?;
            }
            if self.opts.raw && raw != RawChunk::default() {
                out.push(LlmEvent::Raw(raw));
            }
        }
        Ok(())
    }

    fn delta(
        &mut self,
        d: &Fields<'_>,
        raw: &mut RawChunk,
        out: &mut Vec<LlmEvent>,
    ) -> Result<(), LlmError> {
        let mut reasoning = None;
        for field in &self.opts.reasoning_fields {
            if let Some(v) = d.get(field)
                && let Some(s) = raw_string(v)
                && !s.is_empty()
            {
                reasoning = Some(s);
                break;
            }
        }
        if reasoning.is_none()
            && let Some(v) = d.get("reasoning_details")
        {
            reasoning = details_text(v.get());
        }
        if let Some(r) = reasoning {
            self.produced = true;
            if self.opts.raw {
                raw.reasoning_delta = Some(r.clone());
            }
            out.push(LlmEvent::Reasoning { text: r });
        }
        if let Some(v) = d.get("content")
            && let Some(text) = raw_string(v)
            && !text.is_empty()
        {
            if self.opts.raw {
                raw.content_delta = Some(text.clone());
            }
            if self.think.is_plain(&text) {
                self.produced = true;
                out.push(LlmEvent::Content { text });
            } else {
                self.think.push(&text, &mut self.segments);
                self.drain_segments(out);
            }
        }
        if let Some(v) = d.get("tool_calls") {
            let calls: Vec<ToolCallDelta> =
                serde_json::from_str(v.get()).map_err(|e| LlmError::Stream {
                    message: format!(
                        "the provider sent malformed tool_calls ({e}): {}",
                        preview(v.get().as_bytes())
                    ),
                    client_fault: false,
                })?;
            for c in calls {
                self.tool_fragment(c);
            }
        }
        Ok(())
    }

    fn drain_segments(&mut self, out: &mut Vec<LlmEvent>) {
        for (reasoning, text) in self.segments.drain(..) {
            self.produced = true;
            out.push(if reasoning {
                LlmEvent::Reasoning { text }
            } else {
                LlmEvent::Content { text }
            });
        }
    }

    /// Accumulates one fragment. A new non-empty id on an index that already has a
    /// different id starts a new call (gateways that send every call as index 0); a
    /// fragment without index continues the call with its id, or the last one.
    fn tool_fragment(&mut self, c: ToolCallDelta) {
        self.produced = true;
        let id = c.id.filter(|s| !s.is_empty());
        let slot = match (c.index, &id) {
            (Some(i), id) => self
                .slots
                .iter()
                .rposition(|s| s.index == Some(i))
                .filter(|&p| match id {
                    Some(id) => self.slots[p].id.is_empty() || self.slots[p].id == *id,
                    None => true,
                }),
            (None, Some(id)) => self.slots.iter().rposition(|s| s.id == *id),
            (None, None) => self.slots.len().checked_sub(1),
        };
        let p = match slot {
            Some(p) => p,
            None => {
                self.slots.push(Slot {
                    index: c.index,
                    ..Slot::default()
                });
                self.slots.len() - 1
            }
        };
        let s = &mut self.slots[p];
        if let Some(id) = id {
            s.id = id;
        }
        if let Some(f) = c.function {
            if let Some(n) = f.name.filter(|n| !n.is_empty())
                && s.name.is_empty()
            {
                s.name = n;
            }
            match f.arguments {
                Some(Value::String(a)) => s.args.push_str(&a),
                Some(Value::Null) | None => {}
                Some(other) => s.args = other.to_string(),
            }
        }
        if let Some(x) = c.extra_content {
            s.extra = Some(x);
        }
    }

    fn finish_reason(&mut self, r: &str) -> Result<(), LlmError> {
        match r {
            "error" => Err(LlmError::Stream {
                message: "the provider ended the stream with finish_reason \"error\"".into(),
                client_fault: false,
            }),
            "model_context_window_exceeded" => Err(LlmError::ContextOverflow {
                message: "finish_reason model_context_window_exceeded".into(),
            }),
            "network_error" | "insufficient_system_resource" => Err(LlmError::Stream {
                message: format!("the provider ended the stream with finish_reason \"{r}\""),
                client_fault: false,
            }),
            _ => {
                self.finish = Some(r.to_string());
                Ok(())
            }
        }
    }

    fn take_usage(&mut self, raw: &RawValue) {
        let Ok(Value::Object(u)) = serde_json::from_str::<Value>(raw.get()) else {
            return;
        };
        let n = |k: &str| u.get(k).and_then(Value::as_u64);
        let prompt = n("prompt_tokens").unwrap_or(0);
        let completion = n("completion_tokens").unwrap_or(0);
        let cached = self
            .opts
            .cached_fields
            .iter()
            .find_map(|path| dotted(&u, path))
            .unwrap_or(0);
        self.usage = Some(Usage {
            prompt,
            completion,
            total: n("total_tokens").unwrap_or(prompt + completion),
            cached,
            cache_write: 0,
        });
    }

    /// End of the stream (`[DONE]` seen or the body ended): flushes held-back text, then
    /// emits the accumulated tool calls, the last usage and the finish reason.
    pub fn finish(&mut self, out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        if !self.done && self.finish.is_none() {
            return Err(LlmError::Stream {
                message: "the stream ended before the model finished (no finish_reason and no [DONE]): the connection was cut".into(),
                client_fault: false,
            });
        }
        self.think.flush(&mut self.segments);
        self.drain_segments(out);
        for (n, s) in std::mem::take(&mut self.slots).into_iter().enumerate() {
            let call = complete(n, s);
            if self.opts.raw {
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
        let reason = match self.finish.take() {
            None => "stop".to_string(),
            Some(r) if KNOWN_FINISH.contains(&r.as_str()) => r,
            Some(r) if !self.produced => {
                return Err(LlmError::Stream {
                    message: format!("the provider finished with \"{r}\" and produced no output"),
                    client_fault: false,
                });
            }
            Some(_) => "other".to_string(),
        };
        out.push(LlmEvent::Finish { reason });
        Ok(())
    }
}

/// A call's accumulated argument text as JSON: `{}` when empty; when it does not parse, the
/// raw text as a string and why (the loop answers the model with a recoverable error).
/// Every provider's decoder ends a call with this.
pub fn parse_arguments(raw: String) -> (Value, Option<String>) {
    if raw.trim().is_empty() {
        return (Value::Object(Map::new()), None);
    }
    match serde_json::from_str::<Value>(&raw) {
        Ok(v) => (v, None),
        Err(e) => (
            Value::String(raw),
            Some(format!(
                "the model's arguments are not valid JSON ({e}); they may have been cut off"
            )),
        ),
    }
}

fn complete(n: usize, s: Slot) -> ToolCall {
    let id = if s.id.is_empty() {
        format!("call_{n}")
    } else {
        s.id
    };
    let (arguments, arguments_error) = parse_arguments(s.args);
    ToolCall {
        id,
        name: s.name,
        arguments,
        arguments_error,
        extra_content: s.extra,
    }
}

/// `prompt_tokens_details.cached_tokens` style lookup.
fn dotted(u: &Map<String, Value>, path: &str) -> Option<u64> {
    let mut parts = path.split('.');
    let mut cur = u.get(parts.next()?)?;
    for p in parts {
        cur = cur.get(p)?;
    }
    cur.as_u64()
}

/// OpenRouter `reasoning_details`: the text of `reasoning.text` and `reasoning.summary`
/// entries (encrypted entries carry nothing to show).
fn details_text(raw: &str) -> Option<String> {
    let v: Vec<Value> = serde_json::from_str(raw).ok()?;
    let mut s = String::new();
    for d in &v {
        for k in ["text", "summary"] {
            if let Some(t) = d.get(k).and_then(Value::as_str) {
                s.push_str(t);
            }
        }
    }
    (!s.is_empty()).then_some(s)
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    b.trim_ascii()
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

/// `event: error` data: JSON with a message somewhere, or plain text.
fn error_from_text(data: &[u8]) -> LlmError {
    match std::str::from_utf8(data) {
        Ok(s) if serde_json::from_str::<Value>(s).is_ok() => error_from_json(s),
        _ => classify(preview(data), None, None),
    }
}

/// `{"error": …}` in any of its shapes: an object with `message`/`code`/`type`, or a string.
pub fn error_from_json(raw: &str) -> LlmError {
    let v: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
    let obj = v.get("error").filter(|e| !e.is_null()).unwrap_or(&v);
    let message = obj
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| obj.as_str().map(str::to_string))
        .unwrap_or_else(|| raw.chars().take(PREVIEW_BYTES).collect());
    classify(
        message,
        obj.get("code"),
        obj.get("type").and_then(Value::as_str),
    )
}

/// Maps an in-stream error to a typed one: context overflow and rate limits by their
/// vendor codes and wording, client faults (numeric 4xx, `invalid_request_error`) as
/// not retryable, the rest as retryable server trouble.
pub fn classify(message: String, code: Option<&Value>, kind: Option<&str>) -> LlmError {
    let code_str = code.map(|c| match c {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    let lower = message.to_ascii_lowercase();
    let code_l = code_str.as_deref().unwrap_or("").to_ascii_lowercase();
    if is_overflow(&lower) || code_l == "context_length_exceeded" {
        return LlmError::ContextOverflow { message };
    }
    if code_l == "429" || code_l.contains("rate_limit") || kind == Some("rate_limit_error") {
        return LlmError::RateLimited {
            retry_after: None,
            body: message,
        };
    }
    let numeric_4xx = code
        .and_then(Value::as_u64)
        .is_some_and(|n| (400..500).contains(&n));
    let client_fault = numeric_4xx
        || kind == Some("invalid_request_error")
        || kind == Some("BadRequestError")
        || code_l == "invalid_request_error";
    let message = match code_str {
        Some(c) if !c.is_empty() && c != "null" => format!("{message} (code {c})"),
        _ => message,
    };
    LlmError::Stream {
        message,
        client_fault,
    }
}

/// Vendor wordings of "the prompt is longer than the window".
pub fn is_overflow(lower: &str) -> bool {
    [
        "context_length_exceeded",
        "maximum context length",
        "context length",
        "context window",
        "prompt is too long",
        "too many tokens",
    ]
    .iter()
    .any(|p| lower.contains(p))
        // Gemini: "The input token count (N) exceeds the maximum number of tokens allowed".
        || (lower.contains("input token count") && lower.contains("exceeds"))
}

/// Splitter and decoder over a whole body cut into `parts`: the events, then the error
/// that ended the stream (if any). For tests and the benchmark.
pub fn decode_parts(parts: &[&[u8]], opts: DecodeOptions) -> (Vec<LlmEvent>, Option<LlmError>) {
    super::native::decode_parts(&mut Decoder::new(opts), parts)
}

#[cfg(test)]
mod tests;

/// The OpenAI-compatible decoder behind the native providers' trait, so one stream reader
/// (`native::pump`) serves every provider.
impl super::native::Decode for Decoder {
    fn frame(&mut self, f: Frame<'_>, out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        Decoder::frame(self, f, out)
    }

    fn finish(&mut self, out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        Decoder::finish(self, out)
    }

    fn is_done(&self) -> bool {
        Decoder::is_done(self)
    }
}
