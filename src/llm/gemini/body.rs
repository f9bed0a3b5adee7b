//! The `streamGenerateContent` request body (https://ai.google.dev/api/generate-content),
//! written from borrowed views of the request: the history is not copied per round.
//!
//! Messages become `contents` turns (`user` / `model`); system messages become
//! `systemInstruction`; tool results are `functionResponse` parts of a `user` turn; turns
//! of the same role in a row are merged (Gemini wants them alternating, and the loop puts a
//! user message with images right after a round's tool results).

use std::borrow::Cow;
use std::collections::HashMap;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::super::native::TopLevel;
use super::super::types::{LlmRequest, Message, Part, Role, SamplingDefaults, ToolCall};
use super::schema;

/// What Gemini 3 accepts in place of a signature on a call it did not make (a history from
/// another model or vendor), per https://ai.google.dev/gemini-api/docs/thought-signatures.
pub const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

/// `extra_body` members (a preset's, in the OpenAI spelling or Gemini's) that belong in
/// `generationConfig`: at the top level Gemini would refuse them as unknown fields.
const GENERATION_KEYS: &[(&str, &str)] = &[
    ("top_k", "topK"),
    ("topK", "topK"),
    ("stop", "stopSequences"),
    ("stop_sequences", "stopSequences"),
    ("stopSequences", "stopSequences"),
    ("seed", "seed"),
    ("presence_penalty", "presencePenalty"),
    ("presencePenalty", "presencePenalty"),
    ("frequency_penalty", "frequencyPenalty"),
    ("frequencyPenalty", "frequencyPenalty"),
];

/// The whole body. Preset values fill only what the request left unset; `extra_body`
/// members fill keys nothing else set; `providerOptions` are written last and replace any
/// top-level member of the same name (`generationConfig` included, whole).
pub struct Body<'a> {
    req: &'a LlmRequest,
    defaults: Option<&'a SamplingDefaults>,
    system: Vec<&'a str>,
    contents: Vec<Turn<'a>>,
}

struct Turn<'a> {
    role: &'static str,
    parts: Vec<WirePart<'a>>,
}

enum WirePart<'a> {
    Text {
        text: &'a str,
        signature: Option<&'a str>,
    },
    Inline {
        mime: &'a str,
        data: &'a str,
    },
    File {
        mime: &'a str,
        uri: &'a str,
    },
    Call {
        name: &'a str,
        /// Gemini's own call id, when it gave one.
        id: Option<&'a str>,
        args: Cow<'a, Value>,
        signature: Option<&'a str>,
    },
    Response {
        name: &'a str,
        id: Option<&'a str>,
        content: &'a str,
    },
}

impl<'a> Body<'a> {
    pub fn new(req: &'a LlmRequest, defaults: Option<&'a SamplingDefaults>) -> Body<'a> {
        let levels = uses_thinking_level(&req.model);
        let mut system = Vec::new();
        let mut contents: Vec<Turn<'a>> = Vec::new();
        // Call id -> function name: a tool result names its function, Gemini has no ids.
        // Later calls overwrite earlier ones with the same id (ids may repeat across rounds).
        let mut names: HashMap<&'a str, (&'a str, Option<&'a str>)> = HashMap::new();
        for m in req.messages.iter() {
            match m.role {
                Role::System => {
                    if !m.content.is_empty() {
                        system.push(m.content.as_str());
                    }
                    system.extend(m.parts.iter().filter_map(|p| p.text.as_deref()));
                }
                Role::User => push(&mut contents, "user", user_parts(m)),
                Role::Assistant => {
                    for c in &m.tool_calls {
                        names.insert(c.id.as_str(), (c.name.as_str(), vendor_id(c)));
                    }
                    push(&mut contents, "model", model_parts(m, levels));
                }
                Role::Tool => {
                    let id = m.tool_call_id.as_deref().unwrap_or("");
                    let call = names.get(id).copied();
                    let name = call
                        .map(|(n, _)| n)
                        .or(m.name.as_deref())
                        .filter(|n| !n.is_empty())
                        .unwrap_or("tool");
                    let part = WirePart::Response {
                        name,
                        id: call.and_then(|(_, v)| v),
                        content: &m.content,
                    };
                    push(&mut contents, "user", vec![part]);
                }
            }
        }
        system.retain(|s| !s.is_empty());
        Body {
            req,
            defaults,
            system,
            contents,
        }
    }
}

fn push<'a>(contents: &mut Vec<Turn<'a>>, role: &'static str, parts: Vec<WirePart<'a>>) {
    if parts.is_empty() {
        return; // Gemini refuses a turn without parts.
    }
    match contents.last_mut() {
        Some(t) if t.role == role => t.parts.extend(parts),
        _ => contents.push(Turn { role, parts }),
    }
}

/// `parts` win over `content` (as on the OpenAI wire); empty text is left out (Gemini
/// refuses an empty text part).
fn user_parts(m: &Message) -> Vec<WirePart<'_>> {
    if m.parts.is_empty() {
        return text_part(&m.content, None).into_iter().collect();
    }
    m.parts
        .iter()
        .filter_map(|p| match p.kind.as_str() {
            "image" => image_part(p),
            _ => text_part(p.text.as_deref().unwrap_or(""), None),
        })
        .collect()
}

fn text_part<'a>(text: &'a str, signature: Option<&'a str>) -> Option<WirePart<'a>> {
    (!text.is_empty()).then_some(WirePart::Text { text, signature })
}

/// Bytes as `inlineData`; a `data:` URL is unpacked to the same; any other URL is a
/// `fileData` reference (uploaded files and, on current models, public URLs).
fn image_part(p: &Part) -> Option<WirePart<'_>> {
    if let Some(data) = p.data.as_deref() {
        let mime = p.media_type.as_deref().unwrap_or("image/png");
        return Some(WirePart::Inline { mime, data });
    }
    let url = p.url.as_deref()?;
    if let Some(rest) = url.strip_prefix("data:") {
        let (meta, data) = rest.split_once(',')?;
        let meta = meta.strip_suffix(";base64")?;
        let mime = meta.split(';').next().filter(|m| !m.is_empty());
        return Some(WirePart::Inline {
            mime: mime.unwrap_or("image/png"),
            data,
        });
    }
    let mime = p.media_type.as_deref().unwrap_or_else(|| guess_mime(url));
    Some(WirePart::File { mime, uri: url })
}

fn guess_mime(url: &str) -> &'static str {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    match path.rsplit('.').next() {
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("heic") => "image/heic",
        Some("heif") => "image/heif",
        _ => "image/jpeg",
    }
}

/// The answer text (with the answer's signature), then the calls (each with its own).
fn model_parts(m: &Message, levels: bool) -> Vec<WirePart<'_>> {
    let text_sig = m
        .reasoning_details
        .as_ref()
        .and_then(|d| d.get("google"))
        .and_then(|g| g.get("textSignature"))
        .and_then(Value::as_str);
    let mut parts: Vec<WirePart<'_>> = text_part(&m.content, text_sig).into_iter().collect();
    // Gemini 3 refuses a step whose first call has no signature; a call it did not make
    // gets the documented stand-in.
    let unsigned = m.tool_calls.iter().all(|c| call_signature(c).is_none());
    for (i, c) in m.tool_calls.iter().enumerate() {
        let signature =
            call_signature(c).or((levels && unsigned && i == 0).then_some(SKIP_SIGNATURE));
        parts.push(WirePart::Call {
            name: &c.name,
            id: vendor_id(c),
            args: call_args(&c.arguments),
            signature,
        });
    }
    parts
}

/// The call's id when Gemini gave it (the decoder marks those `google.id: true`); ids we
/// made up are never sent.
fn vendor_id(c: &ToolCall) -> Option<&str> {
    let g = c.extra_content.as_ref()?.get("google")?;
    (g.get("id")? == &Value::Bool(true)).then_some(c.id.as_str())
}

fn call_signature(c: &ToolCall) -> Option<&str> {
    let g = c.extra_content.as_ref()?.get("google")?;
    g.get("thought_signature")
        .or_else(|| g.get("thoughtSignature"))?
        .as_str()
}

/// `args` must be an object: arguments that were kept as raw text go as their object if
/// they parse to one, else as `{}`.
fn call_args(a: &Value) -> Cow<'_, Value> {
    match a {
        Value::Object(_) => Cow::Borrowed(a),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Cow::Owned(v),
            _ => Cow::Owned(json!({})),
        },
        _ => Cow::Owned(json!({})),
    }
}

/// Gemini 3 and later take `thinkingLevel`; earlier models (and aliases without a version)
/// take `thinkingBudget`, which Gemini 3 also accepts.
pub fn uses_thinking_level(model: &str) -> bool {
    let leaf = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let Some(rest) = leaf.strip_prefix("gemini-") else {
        return false;
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<u32>().is_ok_and(|major| major >= 3)
}

/// `reasoning_effort` as `thinkingConfig`. Budgets (2.5 models): none 0, minimal 512, low
/// 1024, medium 8192, high 24576 (the 2.5 Flash ceiling), a number as given, anything else
/// -1 (dynamic). Levels (Gemini 3+): minimal/low/medium/high as given, none as minimal (Pro
/// models cannot turn thinking off), xhigh/max as high; a number is still a budget.
pub fn thinking_config(effort: &str, levels: bool) -> Value {
    let e = effort.trim().to_ascii_lowercase();
    let budget = |n: i64| {
        if n == 0 {
            json!({"thinkingBudget": 0})
        } else {
            json!({"thinkingBudget": n, "includeThoughts": true})
        }
    };
    if let Ok(n) = e.parse::<i64>() {
        return budget(n);
    }
    if levels {
        let level = match e.as_str() {
            "none" | "off" | "minimal" => "minimal",
            "low" => "low",
            "medium" => "medium",
            "high" | "xhigh" | "max" => "high",
            _ => return json!({"includeThoughts": true}),
        };
        return json!({"thinkingLevel": level, "includeThoughts": true});
    }
    budget(match e.as_str() {
        "none" | "off" => 0,
        "minimal" => 512,
        "low" => 1024,
        "medium" => 8192,
        "high" | "xhigh" | "max" => 24576,
        _ => -1,
    })
}

/// `tool_choice` as `toolConfig.functionCallingConfig`.
pub fn tool_config(tc: &Value) -> Option<Value> {
    let mode = |m: &str| json!({"functionCallingConfig": {"mode": m}});
    match tc {
        Value::String(s) => match s.as_str() {
            "auto" => Some(mode("AUTO")),
            "none" => Some(mode("NONE")),
            "required" | "any" => Some(mode("ANY")),
            _ => None,
        },
        Value::Object(_) => {
            let name = tc
                .pointer("/function/name")
                .or_else(|| tc.get("name"))
                .and_then(Value::as_str)?;
            Some(json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}))
        }
        _ => None,
    }
}

/// OpenAI tool descriptors as Gemini `functionDeclarations` (non-function tools skipped).
pub fn declarations(tools: &[Value]) -> Vec<Value> {
    tools
        .iter()
        .filter_map(|t| {
            if t.get("type")
                .and_then(Value::as_str)
                .is_some_and(|k| k != "function")
            {
                return None;
            }
            let f = t.get("function").unwrap_or(t);
            let name = f.get("name").and_then(Value::as_str)?;
            let mut d = Map::new();
            d.insert("name".into(), json!(name));
            if let Some(desc) = f
                .get("description")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                d.insert("description".into(), json!(desc));
            }
            if let Some(p) = f.get("parameters").and_then(schema::parameters) {
                d.insert("parameters".into(), p);
            }
            Some(Value::Object(d))
        })
        .collect()
}

impl Body<'_> {
    fn generation_config(&self, d: &SamplingDefaults) -> Map<String, Value> {
        let req = self.req;
        let mut g = Map::new();
        if let Some(t) = req.temperature.or(d.temperature) {
            g.insert("temperature".into(), json!(t));
        }
        if let Some(p) = req.top_p.or(d.top_p) {
            g.insert("topP".into(), json!(p));
        }
        if let Some(n) = req.max_tokens.or(d.max_tokens) {
            g.insert("maxOutputTokens".into(), json!(n));
        }
        if let Some(e) = req
            .reasoning_effort
            .as_deref()
            .or(d.reasoning_effort.as_deref())
        {
            let levels = uses_thinking_level(&req.model);
            g.insert("thinkingConfig".into(), thinking_config(e, levels));
        }
        for (k, v) in &d.extra_body {
            if let Some((_, to)) = GENERATION_KEYS.iter().find(|(from, _)| from == k) {
                let v = match (*to, v) {
                    ("stopSequences", Value::String(s)) => json!([s]),
                    _ => v.clone(),
                };
                g.entry(*to).or_insert(v);
            }
        }
        g
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
        field!("contents", &self.contents);
        if !self.system.is_empty() {
            let parts: Vec<Value> = self.system.iter().map(|t| json!({"text": t})).collect();
            field!("systemInstruction", &json!({"parts": parts}));
        }
        let decls = declarations(&req.tools);
        if !decls.is_empty() {
            field!("tools", &json!([{"functionDeclarations": decls}]));
            if let Some(tc) = req.tool_choice.as_ref().and_then(tool_config) {
                field!("toolConfig", &tc);
            }
        }
        let g = self.generation_config(d);
        if !g.is_empty() {
            field!("generationConfig", &g);
        }
        // Sampling members go inside `generationConfig` (written above), never at the top.
        top.end(&d.extra_body, |k| {
            !GENERATION_KEYS.iter().any(|(from, _)| *from == k)
        })
    }
}

impl Serialize for Turn<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("role", self.role)?;
        m.serialize_entry("parts", &Parts(&self.parts))?;
        m.end()
    }
}

struct Parts<'p, 'a>(&'p [WirePart<'a>]);

impl Serialize for Parts<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for p in self.0 {
            seq.serialize_element(p)?;
        }
        seq.end()
    }
}

impl Serialize for WirePart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match self {
            WirePart::Text { text, signature } => {
                m.serialize_entry("text", text)?;
                if let Some(sig) = signature {
                    m.serialize_entry("thoughtSignature", sig)?;
                }
            }
            WirePart::Inline { mime, data } => {
                m.serialize_entry("inlineData", &Pair(("mimeType", mime), ("data", data)))?;
            }
            WirePart::File { mime, uri } => {
                m.serialize_entry("fileData", &Pair(("mimeType", mime), ("fileUri", uri)))?;
            }
            WirePart::Call {
                name,
                id,
                args,
                signature,
            } => {
                let call = FunctionCall {
                    name,
                    id: *id,
                    args,
                };
                m.serialize_entry("functionCall", &call)?;
                // Beside the call in the same part, exactly where Gemini put it.
                if let Some(sig) = signature {
                    m.serialize_entry("thoughtSignature", sig)?;
                }
            }
            WirePart::Response { name, id, content } => {
                let r = FunctionResponse {
                    name,
                    id: *id,
                    content,
                };
                m.serialize_entry("functionResponse", &r)?;
            }
        }
        m.end()
    }
}

/// A two-member object of strings, borrowed (image bytes are not copied per round).
struct Pair<'p>((&'p str, &'p str), (&'p str, &'p str));

impl Serialize for Pair<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry(self.0.0, self.0.1)?;
        m.serialize_entry(self.1.0, self.1.1)?;
        m.end()
    }
}

struct FunctionCall<'p> {
    name: &'p str,
    id: Option<&'p str>,
    args: &'p Value,
}

impl Serialize for FunctionCall<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if let Some(id) = self.id {
            m.serialize_entry("id", id)?;
        }
        m.serialize_entry("name", self.name)?;
        m.serialize_entry("args", self.args)?;
        m.end()
    }
}

struct FunctionResponse<'p> {
    name: &'p str,
    id: Option<&'p str>,
    content: &'p str,
}

impl Serialize for FunctionResponse<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if let Some(id) = self.id {
            m.serialize_entry("id", id)?;
        }
        m.serialize_entry("name", self.name)?;
        m.serialize_entry("response", &ResponseValue(self.content))?;
        m.end()
    }
}

/// `response` must be an object: a result that is a JSON object goes as itself (copied
/// as text, not parsed into a tree), anything else as `{"result": text}`.
struct ResponseValue<'p>(&'p str);

impl Serialize for ResponseValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.trim_start().starts_with('{')
            && let Ok(raw) = serde_json::from_str::<&RawValue>(self.0)
        {
            return raw.serialize(s);
        }
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("result", self.0)?;
        m.end()
    }
}
