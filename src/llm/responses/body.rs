//! The `/responses` request body, written straight from the turn's messages (views that
//! borrow the request, as `openai/body.rs`: no `Value` tree per message per round).
//!
//! The history becomes `input` items: user messages, assistant text, `function_call` and
//! `function_call_output` items, and before an assistant turn the encrypted reasoning items
//! it carried (its state). Items need no role alternation, so nothing is merged.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::super::native::TopLevel;
use super::super::types::{LlmRequest, Message, Part, Role, SamplingDefaults, ToolCall};
use super::STATE_KEY;

/// The whole body. Preset values fill only what the request left unset; `extra_body` fills
/// keys nothing else set; `providerOptions` are written last and replace any typed field of
/// the same name.
pub struct Body<'a> {
    pub req: &'a LlmRequest,
    pub defaults: Option<&'a SamplingDefaults>,
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
        if let Some(system) = instructions(&req.messages) {
            field!("instructions", &system);
        }
        field!("input", &Input(&req.messages));
        field!("stream", &true);
        // Stateless: the history (with its encrypted reasoning) travels in every request.
        field!("store", &false);
        // Only for a model that reasons: one the catalog knows as not reasoning (gpt-4o,
        // gpt-4.1) may refuse the include. An unknown model is assumed to reason.
        let reasons = req.reasoning_effort.is_some() || d.reasoning_effort.is_some() || {
            let info = crate::llm::catalog::resolve(&req.model, None);
            !info.known || info.reasoning
        };
        if reasons {
            field!("include", &["reasoning.encrypted_content"]);
        }
        if !req.tools.is_empty() {
            field!("tools", &Tools(&req.tools));
        }
        if let Some(tc) = &req.tool_choice {
            field!("tool_choice", &ToolChoice(tc));
        }
        if let Some(t) = req.temperature.or(d.temperature) {
            field!("temperature", &t);
        }
        if let Some(p) = req.top_p.or(d.top_p) {
            field!("top_p", &p);
        }
        if let Some(n) = req.max_tokens.or(d.max_tokens) {
            field!("max_output_tokens", &n);
        }
        if let Some(e) = req
            .reasoning_effort
            .as_ref()
            .or(d.reasoning_effort.as_ref())
        {
            field!("reasoning", &Reasoning(e));
        }
        top.end(&d.extra_body, |_| true)
    }
}

/// Every system message's text, in order, joined by a blank line (`None` when there is
/// none): the Responses API takes the system prompt as `instructions`.
fn instructions(msgs: &[Message]) -> Option<String> {
    let mut out = String::new();
    for m in msgs.iter().filter(|m| m.role == Role::System) {
        let text = message_text(m);
        if text.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&text);
    }
    (!out.is_empty()).then_some(out)
}

/// A message's text: `content`, or its text parts when `content` is empty.
fn message_text(m: &Message) -> std::borrow::Cow<'_, str> {
    if !m.content.is_empty() || m.parts.is_empty() {
        return std::borrow::Cow::Borrowed(&m.content);
    }
    let texts: Vec<&str> = m
        .parts
        .iter()
        .filter(|p| p.kind != "image")
        .filter_map(|p| p.text.as_deref())
        .collect();
    std::borrow::Cow::Owned(texts.join("\n"))
}

struct Reasoning<'a>(&'a str);

impl Serialize for Reasoning<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("effort", self.0)?;
        // Without it the stream carries no reasoning text to show.
        m.serialize_entry("summary", "auto")?;
        m.end()
    }
}

/// The history as `input` items.
struct Input<'a>(&'a [Message]);

impl Serialize for Input<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for m in self.0 {
            match m.role {
                Role::System => {}
                Role::User => seq.serialize_element(&UserItem(m))?,
                Role::Assistant => {
                    for item in state_items(m) {
                        seq.serialize_element(&ReasoningEcho(item))?;
                    }
                    let text = message_text(m);
                    if !text.is_empty() {
                        seq.serialize_element(&AssistantText(&text))?;
                    }
                    for c in &m.tool_calls {
                        seq.serialize_element(&FunctionCall(c))?;
                    }
                }
                Role::Tool => seq.serialize_element(&CallOutput(m))?,
            }
        }
        seq.end()
    }
}

/// The reasoning items this provider stored on an assistant turn that can go back: those
/// with their encrypted content (without it a reasoning item names stored server state,
/// which `store: false` does not keep, and the API answers 404). State of another vendor,
/// or OpenRouter's list, is ignored.
fn state_items(m: &Message) -> impl Iterator<Item = &serde_json::Map<String, Value>> {
    m.reasoning_details
        .as_ref()
        .and_then(|d| d.get(STATE_KEY))
        .and_then(|r| r.get("items"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .filter(|o| {
            o.get("type").and_then(Value::as_str) == Some("reasoning")
                && o.get("encrypted_content")
                    .and_then(Value::as_str)
                    .is_some_and(|c| !c.is_empty())
        })
}

/// A stored reasoning item as received, without its `id`: an id makes the API pair the
/// item with the output item that followed it by id (a 400 "provided without its required
/// following item" unless every function call goes back with its own item id too), while
/// the encrypted content alone is what a stateless client needs (Codex sends it so).
struct ReasoningEcho<'a>(&'a serde_json::Map<String, Value>);

impl Serialize for ReasoningEcho<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.0 {
            if k != "id" {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}

struct UserItem<'a>(&'a Message);

impl Serialize for UserItem<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let msg = self.0;
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("role", "user")?;
        if msg.parts.is_empty() {
            m.serialize_entry("content", &[InputText(&msg.content)])?;
        } else {
            m.serialize_entry("content", &InputParts(&msg.parts))?;
        }
        m.end()
    }
}

struct AssistantText<'a>(&'a str);

impl Serialize for AssistantText<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("role", "assistant")?;
        m.serialize_entry("content", &[OutputText(self.0)])?;
        m.end()
    }
}

struct OutputText<'a>(&'a str);

impl Serialize for OutputText<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "output_text")?;
        m.serialize_entry("text", self.0)?;
        m.end()
    }
}

struct InputText<'a>(&'a str);

impl Serialize for InputText<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "input_text")?;
        m.serialize_entry("text", self.0)?;
        m.end()
    }
}

/// Text and image parts as `input_text` / `input_image` content.
struct InputParts<'a>(&'a [Part]);

impl Serialize for InputParts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for p in self.0 {
            if p.kind == "image" {
                // A part with neither bytes nor URL has nothing to show; the API would
                // refuse an empty `image_url`.
                if let Some(url) = image_url(p) {
                    seq.serialize_element(&InputImage(&url))?;
                }
            } else {
                seq.serialize_element(&InputText(p.text.as_deref().unwrap_or_default()))?;
            }
        }
        seq.end()
    }
}

/// The bytes as a `data:` URL win over a reference (as in the chat body).
fn image_url(p: &Part) -> Option<String> {
    match (&p.data, &p.url) {
        (Some(d), _) => Some(format!(
            "data:{};base64,{d}",
            p.media_type.as_deref().unwrap_or("image/png")
        )),
        (None, Some(u)) if !u.is_empty() => Some(u.clone()),
        _ => None,
    }
}

struct InputImage<'a>(&'a str);

impl Serialize for InputImage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "input_image")?;
        m.serialize_entry("image_url", self.0)?;
        m.end()
    }
}

struct FunctionCall<'a>(&'a ToolCall);

impl Serialize for FunctionCall<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("type", "function_call")?;
        m.serialize_entry("call_id", &c.id)?;
        m.serialize_entry("name", &c.name)?;
        // The wire wants the arguments as JSON text; unparsable ones go back as they came.
        match &c.arguments {
            Value::String(text) => m.serialize_entry("arguments", text)?,
            Value::Null => m.serialize_entry("arguments", "{}")?,
            v => m.serialize_entry("arguments", &v.to_string())?,
        }
        m.end()
    }
}

/// A tool result. Image parts (if a tool message has any) go as an `input_image` list,
/// which `function_call_output` accepts beside a plain string.
struct CallOutput<'a>(&'a Message);

impl Serialize for CallOutput<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let msg = self.0;
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("type", "function_call_output")?;
        m.serialize_entry("call_id", msg.tool_call_id.as_deref().unwrap_or_default())?;
        if msg.parts.is_empty() {
            m.serialize_entry("output", &msg.content)?;
        } else {
            m.serialize_entry("output", &InputParts(&msg.parts))?;
        }
        m.end()
    }
}

/// The request's OpenAI chat tool descriptors, flattened (`{type, name, description,
/// parameters, strict}`); anything not in the chat shape (a built-in tool such as
/// `web_search`, or an already flat descriptor) goes as given.
struct Tools<'a>(&'a [Value]);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for t in self.0 {
            match t.get("function").filter(|f| f.is_object()) {
                Some(f) if t.get("type").and_then(Value::as_str) == Some("function") => {
                    seq.serialize_element(&FlatFunction(f))?
                }
                _ => seq.serialize_element(t)?,
            }
        }
        seq.end()
    }
}

struct FlatFunction<'a>(&'a Value);

impl Serialize for FlatFunction<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry("name", f.get("name").unwrap_or(&Value::Null))?;
        if let Some(d) = f.get("description").filter(|d| !d.is_null()) {
            m.serialize_entry("description", d)?;
        }
        match f.get("parameters").filter(|p| !p.is_null()) {
            Some(p) => m.serialize_entry("parameters", p)?,
            None => m.serialize_entry("parameters", &EmptySchema)?,
        }
        // The Responses API makes function tools strict unless told otherwise, and strict
        // mode refuses ordinary schemas (optional properties, no `additionalProperties`):
        // keep the chat API's meaning, where strict is opt-in.
        m.serialize_entry(
            "strict",
            &f.get("strict").and_then(Value::as_bool).unwrap_or(false),
        )?;
        m.end()
    }
}

/// `{"type": "object", "properties": {}}`: a function that takes no arguments.
struct EmptySchema;

impl Serialize for EmptySchema {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "object")?;
        m.serialize_entry("properties", &serde_json::Map::new())?;
        m.end()
    }
}

/// `"auto" | "none" | "required"` pass; the chat shape `{type:"function", function:{name}}`
/// becomes `{type:"function", name}`; anything else goes as given.
struct ToolChoice<'a>(&'a Value);

impl Serialize for ToolChoice<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let tc = self.0;
        match tc
            .get("function")
            .and_then(|f| f.get("name"))
            .filter(|_| tc.get("type").and_then(Value::as_str) == Some("function"))
        {
            Some(name) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", "function")?;
                m.serialize_entry("name", name)?;
                m.end()
            }
            None => tc.serialize(s),
        }
    }
}
