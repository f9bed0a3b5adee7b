//! The `/chat/completions` request body, serialised straight from the turn's messages.
//!
//! Building a `Value` tree first cost a map, keys and a copy of every string per message per
//! round: at 6,000 messages that was most of a round's overhead. These views borrow the
//! request and write JSON text directly.

use std::sync::{Arc, Mutex, Weak};

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::super::compat::{CompatFlags, MaxTokensField};
use super::super::types::{LlmRequest, Message, Part, Role, SamplingDefaults, ToolCall};

/// The whole body. Typed fields are gated by the compat flags; preset values fill only what
/// the request left unset; `extra_body` fills keys nothing else set; `providerOptions` are
/// written last and replace any typed field of the same name.
pub struct Body<'a> {
    pub req: &'a LlmRequest,
    pub compat: &'a CompatFlags,
    pub defaults: Option<&'a SamplingDefaults>,
    pub max_field: MaxTokensField,
}

/// The JSON text of the tool list the last request offered. A turn's rounds share one `Arc`
/// of descriptors (rebuilt only when the router changes); writing them out again every
/// round, descriptions escaped and schemas walked, was most of a short round's body.
static TOOLS_TEXT: Mutex<Option<WrittenTools>> = Mutex::new(None);

/// A tool list (held weakly) and its JSON text.
type WrittenTools = (Weak<[Value]>, Arc<RawValue>);

fn tools_text(tools: &Arc<[Value]>) -> Option<Arc<RawValue>> {
    let slot = || TOOLS_TEXT.lock().unwrap_or_else(|e| e.into_inner());
    // The `Weak` keeps the list's allocation, so a live upgrade equal to `tools` is the
    // very list the text was written from.
    if let Some((list, text)) = slot().as_ref()
        && list.upgrade().is_some_and(|l| Arc::ptr_eq(&l, tools))
    {
        return Some(text.clone());
    }
    let text: Arc<RawValue> = serde_json::value::to_raw_value(&**tools).ok()?.into();
    *slot() = Some((Arc::downgrade(tools), text.clone()));
    Some(text)
}

/// The messages in the OpenAI chat shape.
pub struct WireMessages<'a>(pub &'a [Message], pub &'a CompatFlags);

struct WireMessage<'a>(&'a Message, &'a CompatFlags);

struct WireCall<'a>(&'a ToolCall);

struct Function<'a> {
    name: &'a str,
    arguments: &'a Value,
}

struct Parts<'a>(&'a [Part]);

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let req = self.req;
        let c = self.compat;
        let none = SamplingDefaults::default();
        let d = self.defaults.unwrap_or(&none);
        let replaced = |k: &str| req.provider_options.contains_key(k);
        let mut written: Vec<&str> = Vec::with_capacity(12);
        let mut m = s.serialize_map(None)?;
        // A typed field, unless `providerOptions` replaces it.
        macro_rules! field {
            ($k:expr, $v:expr) => {{
                let k: &'static str = $k;
                written.push(k);
                if !replaced(k) {
                    m.serialize_entry(k, $v)?;
                }
            }};
        }
        field!("model", &req.model);
        field!("messages", &WireMessages(&req.messages, c));
        field!("stream", &true);
        if c.supports_usage_in_streaming {
            field!("stream_options", &json!({"include_usage": true}));
        }
        if !req.tools.is_empty() {
            match tools_text(&req.tools) {
                Some(text) => field!("tools", &*text),
                None => field!("tools", &&*req.tools),
            }
        }
        if let Some(tc) = &req.tool_choice {
            let forced = tc.as_str() == Some("required") || tc.is_object();
            if forced && !c.supports_forced_tool_choice {
                field!("tool_choice", &"auto");
            } else {
                field!("tool_choice", tc);
            }
        }
        if c.supports_temperature
            && let Some(t) = req.temperature.or(d.temperature)
        {
            field!("temperature", &t);
        }
        if let Some(p) = req.top_p.or(d.top_p) {
            field!("top_p", &p);
        }
        if let Some(n) = req.max_tokens.or(d.max_tokens) {
            field!(self.max_field.as_str(), &n);
        }
        if c.supports_reasoning_effort
            && let Some(e) = req
                .reasoning_effort
                .as_ref()
                .or(d.reasoning_effort.as_ref())
        {
            field!("reasoning_effort", e);
        }
        for (k, v) in &d.extra_body {
            if !written.contains(&k.as_str()) && !replaced(k) {
                m.serialize_entry(k, v)?;
            }
        }
        for (k, v) in &req.provider_options {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl Serialize for WireMessages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for m in self.0 {
            seq.serialize_element(&WireMessage(m, self.1))?;
        }
        seq.end()
    }
}

impl Serialize for WireMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (msg, compat) = (self.0, self.1);
        let mut o = s.serialize_map(None)?;
        o.serialize_entry("role", msg.role.as_str())?;
        if !msg.parts.is_empty() {
            o.serialize_entry("content", &Parts(&msg.parts))?;
        } else if msg.role == Role::Assistant
            && msg.content.is_empty()
            && !msg.tool_calls.is_empty()
        {
            o.serialize_entry("content", &())?;
        } else {
            o.serialize_entry("content", &msg.content)?;
        }
        if let Some(n) = &msg.name {
            o.serialize_entry("name", n)?;
        }
        if let Some(id) = &msg.tool_call_id {
            o.serialize_entry("tool_call_id", id)?;
        }
        // Reasoning goes back only on assistant turns that made tool calls (DeepSeek V4 and
        // Kimi refuse such turns without it), under the compat field.
        if !msg.tool_calls.is_empty() {
            let calls: Vec<WireCall<'_>> = msg.tool_calls.iter().map(WireCall).collect();
            o.serialize_entry("tool_calls", &calls)?;
            match msg.reasoning.as_deref().filter(|r| !r.is_empty()) {
                Some(r) => o.serialize_entry(&compat.reasoning_echo_field, r)?,
                None if compat.echo_empty_reasoning_for_tool_calls => {
                    o.serialize_entry(&compat.reasoning_echo_field, "")?;
                }
                None => {}
            }
            // OpenRouter's list; a native provider's state (an object keyed by vendor) means
            // nothing to an OpenAI-compatible server.
            if let Some(d) = msg.reasoning_details.as_ref().filter(|d| d.is_array()) {
                o.serialize_entry("reasoning_details", d)?;
            }
        }
        o.end()
    }
}

impl Serialize for WireCall<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut o = s.serialize_map(None)?;
        o.serialize_entry("id", &c.id)?;
        o.serialize_entry("type", "function")?;
        o.serialize_entry(
            "function",
            &Function {
                name: &c.name,
                arguments: &c.arguments,
            },
        )?;
        if let Some(x) = &c.extra_content {
            o.serialize_entry("extra_content", x)?;
        }
        o.end()
    }
}

impl Serialize for Function<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_map(Some(2))?;
        o.serialize_entry("name", self.name)?;
        // The wire wants the arguments as a JSON string.
        match self.arguments {
            Value::String(text) => o.serialize_entry("arguments", text)?,
            v => o.serialize_entry("arguments", &v.to_string())?,
        }
        o.end()
    }
}

impl Serialize for Parts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for p in self.0 {
            seq.serialize_element(&wire_part(p))?;
        }
        seq.end()
    }
}

fn wire_part(p: &Part) -> Value {
    match p.kind.as_str() {
        "image" => {
            // The bytes win over a reference (a stored image's `outrigger-image:` name
            // means nothing to the model).
            let url = match (&p.url, &p.data) {
                (_, Some(d)) => format!(
                    "data:{};base64,{d}",
                    p.media_type.as_deref().unwrap_or("image/png")
                ),
                (Some(u), None) => u.clone(),
                (None, None) => String::new(),
            };
            json!({"type": "image_url", "image_url": {"url": url}})
        }
        _ => json!({"type": "text", "text": p.text.clone().unwrap_or_default()}),
    }
}
