//! The Messages request body, written as views over the request (no `Value` tree per
//! message, like the OpenAI body).
//!
//! Cache stability: a message's serialisation depends only on that message and the ones
//! merged into its turn, never on later ones, except the one `cache_control` breakpoint on
//! the last block of the last turn, which moves forward as the conversation grows.

use std::borrow::Cow;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use super::super::native::TopLevel;
use super::super::types::{LlmRequest, Message, Part, Role, SamplingDefaults, ToolCall};
use super::{ANSWER_ROOM_TOKENS, DEFAULT_MAX_TOKENS, THINKING_BUDGETS, VENDOR};

/// The API's smallest thinking budget.
const MIN_BUDGET: u64 = 1024;

/// Sampling members the API refuses while thinking.
const SAMPLING_KEYS: &[&str] = &["temperature", "top_p", "top_k"];

/// The thinking budget for a `reasoning_effort` value, or `None` for no thinking.
/// Unknown words get the `medium` budget (an effort was asked for; the value is a preset's).
pub fn thinking_budget(effort: &str) -> Option<u64> {
    let e = effort.trim().to_ascii_lowercase();
    if matches!(e.as_str(), "" | "none" | "off" | "disabled" | "false") {
        return None;
    }
    if let Ok(n) = e.parse::<u64>() {
        return (n > 0).then_some(n.max(MIN_BUDGET));
    }
    let medium = THINKING_BUDGETS
        .iter()
        .find(|(k, _)| *k == "medium")
        .map_or(8192, |(_, v)| *v);
    Some(
        THINKING_BUDGETS
            .iter()
            .find(|(k, _)| *k == e)
            .map_or(medium, |(_, v)| *v),
    )
}

/// The whole body. Preset values fill what the request left unset; `extra_body` fills keys
/// nothing else wrote; `providerOptions` are written last and replace typed fields.
pub struct Body<'a> {
    req: &'a LlmRequest,
    defaults: Option<&'a SamplingDefaults>,
    system: Vec<Cow<'a, str>>,
    turns: Vec<Turn<'a>>,
    /// Thinking we write (`None`: off, or `providerOptions.thinking` decides).
    budget: Option<u64>,
    /// Thinking is on (ours or the host's): sampling fields are left out.
    thinking_on: bool,
    /// The budget that `max_tokens` must exceed (ours or the host's).
    budget_floor: Option<u64>,
}

struct Turn<'a> {
    role: &'static str,
    blocks: Vec<Block<'a>>,
}

enum Block<'a> {
    Text(&'a str),
    Image(ImageSource<'a>),
    ToolUse(&'a ToolCall),
    ToolResult(&'a Message),
    /// A state block (thinking, redacted thinking) sent back exactly as received.
    Verbatim(&'a Value),
}

enum ImageSource<'a> {
    Base64 { media_type: &'a str, data: &'a str },
    Url(&'a str),
}

impl<'a> Body<'a> {
    pub fn new(req: &'a LlmRequest, defaults: Option<&'a SamplingDefaults>) -> Body<'a> {
        let (system, turns) = arrange(&req.messages);
        let effort = req
            .reasoning_effort
            .as_deref()
            .or(defaults.and_then(|d| d.reasoning_effort.as_deref()));
        let (mut budget, mut thinking_on, mut budget_floor) = (None, false, None);
        match req.provider_options.get("thinking") {
            // The host's own thinking object wins; read it only to keep the body valid.
            Some(t) => {
                thinking_on =
                    t.is_object() && t.get("type").and_then(Value::as_str) != Some("disabled");
                budget_floor = t.get("budget_tokens").and_then(Value::as_u64);
            }
            None => {
                // The API refuses a forced tool choice with thinking; the explicit choice wins.
                let forced = req.tool_choice.as_ref().is_some_and(|c| {
                    matches!(c.as_str(), Some("required" | "any")) || c.is_object()
                });
                if !forced {
                    budget = effort.and_then(thinking_budget);
                    thinking_on = budget.is_some();
                    budget_floor = budget;
                }
            }
        }
        Body {
            req,
            defaults,
            system,
            turns,
            budget,
            thinking_on,
            budget_floor,
        }
    }

    fn max_tokens(&self) -> u64 {
        let asked = self
            .req
            .max_tokens
            .or(self.defaults.and_then(|d| d.max_tokens))
            .unwrap_or(DEFAULT_MAX_TOKENS);
        match self.budget_floor {
            Some(b) if asked <= b => b.saturating_add(ANSWER_ROOM_TOKENS),
            _ => asked,
        }
    }
}

/// Splits the history into the system blocks and alternating turns: `tool` messages are
/// user turns, consecutive same-role messages merge, messages with nothing to send drop.
fn arrange(messages: &[Message]) -> (Vec<Cow<'_, str>>, Vec<Turn<'_>>) {
    let mut system = Vec::new();
    let mut turns: Vec<Turn<'_>> = Vec::new();
    let mut blocks = Vec::new();
    for m in messages {
        let role = match m.role {
            Role::System => {
                let t = plain_text(m);
                if has_text(&t) {
                    system.push(t);
                }
                continue;
            }
            Role::User | Role::Tool => "user",
            Role::Assistant => "assistant",
        };
        message_blocks(m, &mut blocks);
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(t) if t.role == role => {
                for b in blocks.drain(..) {
                    push_block(t, b);
                }
            }
            _ => {
                let mut t = Turn {
                    role,
                    blocks: Vec::with_capacity(blocks.len()),
                };
                for b in blocks.drain(..) {
                    push_block(&mut t, b);
                }
                turns.push(t);
            }
        }
    }
    (system, turns)
}

/// Tool results go before anything else in a user turn (the API wants them first).
fn push_block<'a>(t: &mut Turn<'a>, b: Block<'a>) {
    if matches!(b, Block::ToolResult(_)) {
        let at = t
            .blocks
            .iter()
            .position(|x| !matches!(x, Block::ToolResult(_)))
            .unwrap_or(t.blocks.len());
        t.blocks.insert(at, b);
    } else {
        t.blocks.push(b);
    }
}

/// The API refuses empty and whitespace-only text blocks.
fn has_text(t: &str) -> bool {
    !t.trim().is_empty()
}

/// A system message's text: its content, else its text parts joined.
fn plain_text(m: &Message) -> Cow<'_, str> {
    if !m.content.is_empty() || m.parts.is_empty() {
        return Cow::Borrowed(&m.content);
    }
    let texts: Vec<&str> = m.parts.iter().filter_map(|p| p.text.as_deref()).collect();
    Cow::Owned(texts.join("\n"))
}

fn message_blocks<'a>(m: &'a Message, out: &mut Vec<Block<'a>>) {
    match m.role {
        Role::System => {}
        Role::Tool => out.push(Block::ToolResult(m)),
        Role::User => {
            if m.parts.is_empty() {
                if has_text(&m.content) {
                    out.push(Block::Text(&m.content));
                }
            } else {
                part_blocks(&m.parts, out);
            }
        }
        Role::Assistant => {
            if let Some(state) = state_blocks(m) {
                out.extend(state.iter().map(Block::Verbatim));
            }
            if has_text(&m.content) {
                out.push(Block::Text(&m.content));
            }
            out.extend(m.tool_calls.iter().map(Block::ToolUse));
        }
    }
}

/// The thinking blocks this vendor's decoder stored on the message
/// (`{"anthropic": {"content": [...]}}`; a bare list under the key is accepted too).
fn state_blocks(m: &Message) -> Option<&Vec<Value>> {
    let s = m.reasoning_details.as_ref()?.get(VENDOR)?;
    s.get("content")
        .and_then(Value::as_array)
        .or_else(|| s.as_array())
}

fn part_blocks<'a>(parts: &'a [Part], out: &mut Vec<Block<'a>>) {
    for p in parts {
        if p.kind == "image" {
            if let Some(src) = image_source(p) {
                out.push(Block::Image(src));
            }
        } else if let Some(t) = p.text.as_deref().filter(|t| has_text(t)) {
            out.push(Block::Text(t));
        }
    }
}

/// The bytes win over a reference; a `data:` URL is sent as its base64 bytes.
fn image_source(p: &Part) -> Option<ImageSource<'_>> {
    if let Some(data) = p.data.as_deref() {
        return Some(ImageSource::Base64 {
            media_type: p.media_type.as_deref().unwrap_or("image/png"),
            data,
        });
    }
    let url = p.url.as_deref().filter(|u| !u.is_empty())?;
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((meta, data)) = rest.split_once(',')
        && let Some(mt) = meta.strip_suffix(";base64")
    {
        let media_type = if mt.is_empty() {
            p.media_type.as_deref().unwrap_or("image/png")
        } else {
            mt
        };
        return Some(ImageSource::Base64 { media_type, data });
    }
    Some(ImageSource::Url(url))
}

/// `{"type": "ephemeral"}`, written without building a `Value`.
struct Ephemeral;

impl Serialize for Ephemeral {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("type", "ephemeral")?;
        m.end()
    }
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let req = self.req;
        let none = SamplingDefaults::default();
        let d = self.defaults.unwrap_or(&none);
        let mut top = TopLevel::new(s.serialize_map(None)?, req);
        macro_rules! field {
            ($k:expr, $v:expr) => {
                top.field($k, $v)?
            };
        }
        field!("model", &req.model);
        field!("max_tokens", &self.max_tokens());
        field!("stream", &true);
        if let Some(b) = self.budget {
            field!("thinking", &Thinking(b));
        }
        // The API refuses sampling changes while thinking.
        if !self.thinking_on {
            if let Some(t) = req.temperature.or(d.temperature) {
                field!("temperature", &t);
            }
            if let Some(p) = req.top_p.or(d.top_p) {
                field!("top_p", &p);
            }
        }
        // Written in the order the API renders the prompt (tools, system, messages), so the
        // body's byte prefix is the cached prefix.
        if !req.tools.is_empty() {
            if let Some(tc) = req.tool_choice.as_ref().and_then(tool_choice) {
                field!("tool_choice", &tc);
            }
            field!("tools", &Tools(&req.tools));
        }
        if !self.system.is_empty() {
            field!("system", &System(&self.system));
        }
        field!("messages", &Turns(&self.turns));
        // A preset's `top_k` is a sampling change too.
        top.end(&d.extra_body, |k| {
            !(self.thinking_on && SAMPLING_KEYS.contains(&k))
        })
    }
}

struct Thinking(u64);

impl Serialize for Thinking {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "enabled")?;
        m.serialize_entry("budget_tokens", &self.0)?;
        m.end()
    }
}

/// The OpenAI `tool_choice` in Anthropic's shape (`None` for a value it cannot mean).
fn tool_choice(v: &Value) -> Option<Value> {
    let mut o = Map::new();
    match v {
        Value::String(s) => {
            let t = match s.as_str() {
                "auto" => "auto",
                "required" | "any" => "any",
                "none" => "none",
                _ => return None,
            };
            o.insert("type".into(), Value::from(t));
        }
        Value::Object(c) => {
            let name = c
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| c.get("name"))
                .and_then(Value::as_str)?;
            o.insert("type".into(), Value::from("tool"));
            o.insert("name".into(), Value::from(name));
        }
        _ => return None,
    }
    Some(Value::Object(o))
}

struct Tools<'a>(&'a [Value]);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        let last = self.0.len().saturating_sub(1);
        for (i, t) in self.0.iter().enumerate() {
            seq.serialize_element(&Tool(t, i == last))?;
        }
        seq.end()
    }
}

/// One tool: an OpenAI function descriptor converted, anything else (an Anthropic-shaped
/// or server tool) passed through; the last one carries the breakpoint.
struct Tool<'a>(&'a Value, bool);

impl Serialize for Tool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Some(obj) = self.0.as_object() else {
            return self.0.serialize(s);
        };
        let mut m = s.serialize_map(None)?;
        match obj.get("function").and_then(Value::as_object) {
            Some(f) => {
                m.serialize_entry("name", f.get("name").unwrap_or(&Value::Null))?;
                if let Some(d) = f
                    .get("description")
                    .and_then(Value::as_str)
                    .filter(|d| !d.is_empty())
                {
                    m.serialize_entry("description", d)?;
                }
                match f.get("parameters").filter(|p| p.is_object()) {
                    Some(p) => m.serialize_entry("input_schema", p)?,
                    None => m.serialize_entry("input_schema", &EmptySchema)?,
                }
            }
            None => {
                for (k, v) in obj {
                    if k != "cache_control" {
                        m.serialize_entry(k, v)?;
                    }
                }
            }
        }
        if self.1 {
            m.serialize_entry("cache_control", &Ephemeral)?;
        }
        m.end()
    }
}

/// `{"type": "object", "properties": {}}` for a function without parameters.
struct EmptySchema;

impl Serialize for EmptySchema {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "object")?;
        m.serialize_entry("properties", &Map::new())?;
        m.end()
    }
}

struct System<'a>(&'a [Cow<'a, str>]);

impl Serialize for System<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        let last = self.0.len().saturating_sub(1);
        for (i, t) in self.0.iter().enumerate() {
            seq.serialize_element(&Marked(&Block::Text(t), i == last))?;
        }
        seq.end()
    }
}

struct Turns<'a>(&'a [Turn<'a>]);

impl Serialize for Turns<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        let n = self.0.len();
        for (i, t) in self.0.iter().enumerate() {
            // The moving breakpoint: the last block of the last turn that can carry one
            // (thinking blocks cannot).
            let mark = if i + 1 == n {
                t.blocks
                    .iter()
                    .rposition(|b| !matches!(b, Block::Verbatim(_)))
            } else {
                None
            };
            seq.serialize_element(&WireTurn(t, mark))?;
        }
        seq.end()
    }
}

struct WireTurn<'a>(&'a Turn<'a>, Option<usize>);

impl Serialize for WireTurn<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("role", self.0.role)?;
        m.serialize_entry("content", &Blocks(&self.0.blocks, self.1))?;
        m.end()
    }
}

struct Blocks<'a>(&'a [Block<'a>], Option<usize>);

impl Serialize for Blocks<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (i, b) in self.0.iter().enumerate() {
            seq.serialize_element(&Marked(b, self.1 == Some(i)))?;
        }
        seq.end()
    }
}

/// A block, with the cache breakpoint when the flag is set.
struct Marked<'a>(&'a Block<'a>, bool);

impl Serialize for Marked<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let b = self.0;
        if let Block::Verbatim(v) = b {
            return v.serialize(s);
        }
        let mut m = s.serialize_map(None)?;
        match b {
            Block::Text(t) => {
                m.serialize_entry("type", "text")?;
                m.serialize_entry("text", t)?;
            }
            Block::Image(src) => {
                m.serialize_entry("type", "image")?;
                m.serialize_entry("source", &Source(src))?;
            }
            Block::ToolUse(c) => {
                m.serialize_entry("type", "tool_use")?;
                m.serialize_entry("id", &c.id)?;
                m.serialize_entry("name", &c.name)?;
                m.serialize_entry("input", &tool_input(&c.arguments))?;
            }
            Block::ToolResult(msg) => {
                m.serialize_entry("type", "tool_result")?;
                m.serialize_entry("tool_use_id", msg.tool_call_id.as_deref().unwrap_or(""))?;
                if !msg.parts.is_empty() {
                    let mut inner = Vec::new();
                    part_blocks(&msg.parts, &mut inner);
                    m.serialize_entry("content", &Blocks(&inner, None))?;
                } else if !msg.content.is_empty() {
                    m.serialize_entry("content", &msg.content)?;
                }
            }
            Block::Verbatim(_) => {}
        }
        if self.1 {
            m.serialize_entry("cache_control", &Ephemeral)?;
        }
        m.end()
    }
}

/// `input` must be an object: arguments that were not valid JSON (kept as their raw text)
/// are parsed once more, else sent as `{}` (the tool result already told the model why).
fn tool_input(args: &Value) -> Cow<'_, Value> {
    match args {
        Value::Object(_) => Cow::Borrowed(args),
        Value::String(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(v @ Value::Object(_)) => Cow::Owned(v),
            _ => Cow::Owned(Value::Object(Map::new())),
        },
        _ => Cow::Owned(Value::Object(Map::new())),
    }
}

struct Source<'a>(&'a ImageSource<'a>);

impl Serialize for Source<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        match self.0 {
            ImageSource::Base64 { media_type, data } => {
                m.serialize_entry("type", "base64")?;
                m.serialize_entry("media_type", media_type)?;
                m.serialize_entry("data", data)?;
            }
            ImageSource::Url(u) => {
                m.serialize_entry("type", "url")?;
                m.serialize_entry("url", u)?;
            }
        }
        m.end()
    }
}
