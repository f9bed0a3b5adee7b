//! Classifying one inbound line: request, notification, response, batch or error.
//! Pure functions, so every shape is unit-tested without a process.
//!
//! The envelope (`jsonrpc`, `id`, `method`) is read first with `params`, `result` and
//! `error` kept as raw text, and those are decoded after: a value serde_json refuses inside
//! params (a lone UTF-16 surrogate a JS host wrote for text cut inside an emoji, a number
//! beyond f64 like `1e400`) must not cost the request its id. Lone surrogates become U+FFFD;
//! anything else undecodable is answered -32602 with the id, naming the field. Only text
//! that is not JSON at all is a -32700 with `id: null`.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// A request id exactly as the host wrote it (numbers keep their text form).
pub type RawId = Box<RawValue>;

#[derive(Debug)]
pub enum Incoming {
    Request {
        id: RawId,
        method: String,
        params: Value,
        /// [`SPLIT_MESSAGES`] methods: `messages`, kept as text out of `params`.
        messages: Option<Box<RawValue>>,
    },
    Notification {
        method: String,
        params: Value,
        messages: Option<Box<RawValue>>,
    },
    /// A request (`id` set) or notification whose envelope is valid but whose params do not
    /// decode; a request is answered -32602 with its id, `field` naming the bad value.
    BadParams {
        id: Option<RawId>,
        method: String,
        message: String,
        field: String,
    },
    /// A host's answer to one of our reverse requests.
    Response {
        id: String,
        outcome: Result<Value, Value>,
    },
    /// Not a valid JSON-RPC message; answered with -32600 (and the id when it was usable).
    Invalid { id: Option<RawId>, message: String },
}

#[derive(Debug)]
pub enum Line {
    Single(Incoming),
    Batch(Vec<Incoming>),
    EmptyBatch,
    ParseError(String),
}

/// `Some(value)` even when the member is `null`, so "present" and "absent" stay distinct.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Members as raw text: reading them checks only JSON syntax, so no value inside can fail
/// the envelope (and nothing is built for members that are not used).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    id: Option<RawId>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// Parses one line (already stripped of its newline). `bytes` is not empty or blank.
pub fn parse_line(bytes: &[u8]) -> Line {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            return Line::ParseError(format!(
                "Parse error: invalid UTF-8 at byte {}; frames must be UTF-8 JSON",
                e.valid_up_to()
            ));
        }
    };
    match text.trim_start().as_bytes().first() {
        Some(b'[') => match serde_json::from_str::<Vec<&RawValue>>(text) {
            Ok(items) if items.is_empty() => Line::EmptyBatch,
            Ok(items) => Line::Batch(items.iter().map(|r| classify(r.get())).collect()),
            Err(e) => Line::ParseError(parse_message(&e)),
        },
        // One pass in the common case: reading the envelope also checks the whole line's syntax.
        Some(b'{') => match serde_json::from_str::<Envelope>(text) {
            Ok(env) => Line::Single(classify_envelope(env)),
            // Valid JSON that is no envelope (a duplicate member) is -32600, not -32700.
            Err(e) => match serde_json::from_str::<serde::de::IgnoredAny>(text) {
                Ok(_) => Line::Single(with_surrogates_replaced(text).unwrap_or_else(|| {
                    Incoming::Invalid {
                        id: None,
                        message: format!("Invalid request: {}", without_position(&e)),
                    }
                })),
                Err(e) => Line::ParseError(parse_message(&e)),
            },
        },
        _ => match serde_json::from_str::<serde::de::IgnoredAny>(text) {
            Ok(_) => Line::Single(Incoming::Invalid {
                id: None,
                message:
                    "Invalid request: a frame must be a JSON object (or a batch array of objects)"
                        .into(),
            }),
            Err(e) => Line::ParseError(parse_message(&e)),
        },
    }
}

fn parse_message(e: &serde_json::Error) -> String {
    format!("Parse error: {e}")
}

/// serde_json's message without its ` at line L column C`, which would point into a part of
/// the frame rather than the frame.
fn without_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// A usable id is a string, a number or null; anything else is dropped.
fn usable_id(id: Option<RawId>) -> Option<RawId> {
    id.filter(|r| is_usable_id(r))
}

fn is_usable_id(r: &RawValue) -> bool {
    matches!(
        r.get().as_bytes().first(),
        Some(b'"' | b'-' | b'0'..=b'9' | b'n')
    )
}

/// Classifies one JSON text that is known to be valid JSON (a batch item).
pub fn classify(text: &str) -> Incoming {
    match serde_json::from_str::<Envelope>(text) {
        Ok(env) => classify_envelope(env),
        Err(_) if !text.starts_with('{') => Incoming::Invalid {
            id: None,
            message: "Invalid request: a batch item must be a JSON object".into(),
        },
        Err(e) => with_surrogates_replaced(text).unwrap_or_else(|| Incoming::Invalid {
            id: None,
            message: format!("Invalid request: {}", without_position(&e)),
        }),
    }
}

/// The envelope of valid JSON whose first read failed, read again with lone surrogates
/// replaced: a member *name* holding one (an unknown member a JS host wrote) fails serde's key
/// decoding before the raw members can help, and would otherwise cost the request its id.
/// `None` when there was nothing to replace or it still is no envelope.
fn with_surrogates_replaced(text: &str) -> Option<Incoming> {
    let (fixed, _) = replace_lone_surrogates(text);
    let fixed = fixed?;
    serde_json::from_str::<Envelope>(&fixed)
        .ok()
        .map(classify_envelope)
}

fn classify_envelope(env: Envelope<'_>) -> Incoming {
    let invalid = |id: Option<RawId>, message: &str| Incoming::Invalid {
        id: usable_id(id),
        message: message.to_string(),
    };
    if !env.jsonrpc.is_some_and(is_version_2) {
        return invalid(env.id, "Invalid request: \"jsonrpc\" must be \"2.0\"");
    }
    if let Some(p) = env.params
        && !matches!(p.get().as_bytes().first(), Some(b'{' | b'['))
    {
        return invalid(
            env.id,
            "Invalid request: \"params\" must be an object or an array",
        );
    }
    match env.method {
        Some(raw) if raw.get().starts_with('"') => {
            let method = match decode(raw) {
                Ok(Value::String(m)) => m,
                // A string always decodes (lone surrogates are replaced) to a string.
                _ => return invalid(env.id, "Invalid request: \"method\" must be a string"),
            };
            let id = match env.id {
                Some(id) if !is_usable_id(&id) => {
                    return invalid(
                        None,
                        "Invalid request: \"id\" must be a string, a number or null",
                    );
                }
                id => id,
            };
            let split = env
                .params
                .filter(|_| SPLIT_MESSAGES.contains(&method.as_str()))
                .and_then(split_messages);
            let (params, messages) = match split {
                Some(split) => split,
                None => match env.params.map(decode) {
                    None => (Value::Null, None),
                    Some(Ok(v)) => (v, None),
                    Some(Err(bad)) => {
                        return Incoming::BadParams {
                            id,
                            method,
                            message: bad.message("params"),
                            field: bad.field("params"),
                        };
                    }
                },
            };
            match id {
                None => Incoming::Notification {
                    method,
                    params,
                    messages,
                },
                Some(id) => Incoming::Request {
                    id,
                    method,
                    params,
                    messages,
                },
            }
        }
        Some(_) => invalid(env.id, "Invalid request: \"method\" must be a string"),
        None => {
            let string_id = env
                .id
                .as_ref()
                .and_then(|r| serde_json::from_str::<String>(r.get()).ok());
            // The answer is decoded like params; one that does not decode still settles the
            // waiting call, as an error naming the field.
            let answer = |raw: &RawValue, name: &str| {
                decode(raw).map_err(|bad| {
                    serde_json::json!({
                        "code": -32602,
                        "message": format!("the host's answer does not decode: {}: {}", bad.field(name), bad.reason),
                        "data": {"kind": "invalid_params", "field": bad.field(name)},
                    })
                })
            };
            match (string_id, env.result, env.error) {
                (Some(id), Some(result), _) => Incoming::Response {
                    id,
                    outcome: answer(result, "result"),
                },
                (Some(id), None, Some(error)) => Incoming::Response {
                    id,
                    outcome: answer(error, "error").and_then(Err),
                },
                _ => invalid(env.id, "Invalid request: missing method"),
            }
        }
    }
}

fn is_version_2(raw: &RawValue) -> bool {
    raw.get() == "\"2.0\"" || serde_json::from_str::<String>(raw.get()).is_ok_and(|s| s == "2.0")
}

/// Methods whose params keep `messages` as raw text, decoded by the handler straight into
/// messages: the one member that grows with a conversation (a 6,000-message history through a
/// `Value` tree, then out of it, was about half a follow-up turn's CPU).
pub const SPLIT_MESSAGES: [&str; 2] = ["agent.chat.stream", "agent.chat.fork"];

/// A params object as its members but `messages`, which stays text. `None` when any other
/// member does not decode as it is (a lone surrogate): the whole object then takes the
/// repairing path of [`decode`].
fn split_messages(raw: &RawValue) -> Option<(Value, Option<Box<RawValue>>)> {
    struct Split(serde_json::Map<String, Value>, Option<Box<RawValue>>);
    impl<'de> Deserialize<'de> for Split {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Split, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Split;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Split, A::Error> {
                    let mut rest = serde_json::Map::new();
                    let mut messages = None;
                    while let Some(key) = map.next_key::<String>()? {
                        if key == "messages" {
                            messages = Some(map.next_value::<Box<RawValue>>()?);
                        } else {
                            rest.insert(key, map.next_value()?);
                        }
                    }
                    Ok(Split(rest, messages))
                }
            }
            d.deserialize_map(V)
        }
    }
    let Split(rest, messages) = serde_json::from_str(raw.get()).ok()?;
    Some((Value::Object(rest), messages))
}

/// A member kept as text ([`SPLIT_MESSAGES`]), decoded as params are: lone surrogates
/// replaced, anything else undecodable named.
pub fn decode_member(raw: &RawValue) -> Result<Value, Undecodable> {
    decode(raw)
}

/// Why a member's raw text did not decode.
#[derive(Debug)]
pub struct Undecodable {
    /// Where inside the member (`serde_path_to_error` form, `.` for the member itself).
    path: String,
    reason: String,
}

impl Undecodable {
    /// `Invalid params: params.x: reason`, as a -32602 names it.
    pub fn message(&self, member: &str) -> String {
        format!("Invalid params: {}: {}", self.field(member), self.reason)
    }

    pub fn field(&self, member: &str) -> String {
        match self.path.as_str() {
            "." | "" => member.to_string(),
            p if p.starts_with('[') => format!("{member}{p}"),
            p => format!("{member}.{p}"),
        }
    }
}

/// Logs the first replacement at warn (a host bug worth seeing once), the rest at debug.
static SURROGATE_WARNED: AtomicBool = AtomicBool::new(false);

/// Decodes a member's raw text: strictly first (the common case costs one parse), then with
/// lone surrogates replaced by U+FFFD, naming the field of anything that still fails.
fn decode(raw: &RawValue) -> Result<Value, Undecodable> {
    let text = raw.get();
    if let Ok(v) = serde_json::from_str(text) {
        return Ok(v);
    }
    let (fixed, replaced) = replace_lone_surrogates(text);
    let text = fixed.as_deref().unwrap_or(text);
    if replaced > 0 {
        if SURROGATE_WARNED.swap(true, Ordering::Relaxed) {
            tracing::debug!("replaced {replaced} lone UTF-16 surrogate escape(s) with U+FFFD");
        } else {
            tracing::warn!(
                "replaced {replaced} lone UTF-16 surrogate escape(s) with U+FFFD (the host cut \
                 text inside a surrogate pair; later replacements are logged at debug)"
            );
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize::<_, Value>(&mut de).map_err(|e| Undecodable {
        path: e.path().to_string(),
        reason: without_position(e.inner()),
    })
}

/// Replaces every `\uD800`–`\uDFFF` escape that is not half of a high–low pair with
/// `\uFFFD`. `text` is syntactically valid JSON, so a backslash only occurs inside a string
/// and starts an escape. Returns the new text (`None` when nothing changed) and the count.
fn replace_lone_surrogates(text: &str) -> (Option<String>, usize) {
    let b = text.as_bytes();
    let unit = |at: usize| -> Option<u16> {
        let hex = b.get(at..at + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        std::str::from_utf8(&hex[2..])
            .ok()
            .and_then(|h| u16::from_str_radix(h, 16).ok())
    };
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut count = 0;
    let mut i = 0;
    while let Some(p) = b.get(i..).and_then(|rest| memchr::memchr(b'\\', rest)) {
        let at = i + p;
        let Some(u) = unit(at) else {
            // Any other escape (`\\` included) is two bytes.
            i = at + 2;
            continue;
        };
        i = at + 6;
        let lone = match u {
            0xD800..=0xDBFF => match unit(at + 6) {
                Some(0xDC00..=0xDFFF) => {
                    i = at + 12;
                    false
                }
                _ => true,
            },
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
            o.push_str(&text[copied..at]);
            o.push_str("\\ufffd");
            copied = at + 6;
            count += 1;
        }
    }
    if let Some(o) = &mut out {
        o.push_str(&text[copied..]);
    }
    (out, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(s: &str) -> Incoming {
        match parse_line(s.as_bytes()) {
            Line::Single(i) => i,
            other => panic!("expected single, got {other:?}"),
        }
    }

    #[test]
    fn request_keeps_id_text() {
        match single(r#"{"jsonrpc":"2.0","id":1.50,"method":"m"}"#) {
            Incoming::Request {
                id, method, params, ..
            } => {
                assert_eq!(id.get(), "1.50");
                assert_eq!(method, "m");
                assert!(params.is_null());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_lone_surrogate_in_a_member_name_keeps_the_id() {
        // Found by the frame fuzzer: an unknown top-level member named with a lone surrogate.
        match single(r#"{"jsonrpc":"2.0","id":5,"method":"m","\ud800":1}"#) {
            Incoming::Request { id, method, .. } => {
                assert_eq!(id.get(), "5");
                assert_eq!(method, "m");
            }
            other => panic!("{other:?}"),
        }
        let batch = parse_line(br#"[{"jsonrpc":"2.0","id":"b","method":"m","\udfff":[]}]"#);
        match batch {
            Line::Batch(items) => match &items[..] {
                [Incoming::Request { id, .. }] => assert_eq!(id.get(), "\"b\""),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn params_are_decoded_after_the_envelope() {
        // Lone surrogates become U+FFFD; pairs and other escapes are kept.
        match single(
            r#"{"jsonrpc":"2.0","id":7,"method":"m","params":{"a":"x\ud83d","\udc00":"\ud83d\ude00\\ud83d"}}"#,
        ) {
            Incoming::Request { id, params, .. } => {
                assert_eq!(id.get(), "7");
                assert_eq!(
                    params,
                    serde_json::json!({"a": "x\u{FFFD}", "\u{FFFD}": "\u{1F600}\\ud83d"})
                );
            }
            other => panic!("{other:?}"),
        }
        // A number beyond f64: the request keeps its id and the field is named.
        match single(r#"{"jsonrpc":"2.0","id":"q","method":"m","params":[{"n":[0,1e400]}]}"#) {
            Incoming::BadParams {
                id, field, message, ..
            } => {
                assert_eq!(id.map(|i| i.get().to_string()).as_deref(), Some("\"q\""));
                assert_eq!(field, "params[0].n[1]");
                assert!(message.contains("out of range"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        // A method with a lone surrogate is a (not found) method, not an invalid request.
        match single(r#"{"jsonrpc":"2\u002e0","id":1,"method":"a\ud83d"}"#) {
            Incoming::Request { method, .. } => assert_eq!(method, "a\u{FFFD}"),
            other => panic!("{other:?}"),
        }
        // A duplicate member is valid JSON but no envelope: -32600, not -32700.
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#),
            Incoming::Invalid { id: None, .. }
        ));
        assert!(matches!(
            parse_line(br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1e400}"#),
            Line::ParseError(_)
        ));
    }

    #[test]
    fn host_answers_always_settle() {
        match single(r#"{"jsonrpc":"2.0","id":"srv_1","result":{"text":"cut \ud83d"}}"#) {
            Incoming::Response { id, outcome } => {
                assert_eq!(id, "srv_1");
                assert_eq!(outcome, Ok(serde_json::json!({"text": "cut \u{FFFD}"})));
            }
            other => panic!("{other:?}"),
        }
        // An answer that cannot decode settles the call as an error naming the field.
        match single(r#"{"jsonrpc":"2.0","id":"srv_2","result":{"n":1e400}}"#) {
            Incoming::Response {
                outcome: Err(e), ..
            } => {
                assert_eq!(e["code"], -32602);
                assert_eq!(e["data"]["field"], "result.n");
            }
            other => panic!("{other:?}"),
        }
        match single(r#"{"jsonrpc":"2.0","id":"srv_3","error":{"code":1,"message":"\udfff"}}"#) {
            Incoming::Response {
                outcome: Err(e), ..
            } => assert_eq!(e["message"], "\u{FFFD}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn surrogate_scan_edges() {
        let fix = |s: &str| replace_lone_surrogates(s);
        assert_eq!(fix(r#""plain""#), (None, 0));
        assert_eq!(fix(r#""\\ud83d""#), (None, 0)); // an escaped backslash, not an escape
        assert_eq!(fix(r#""\ud83d\ud83d\ude00""#).1, 1);
        assert_eq!(
            fix(r#""\uD83D" "\uDE00""#),
            (Some(r#""\ufffd" "\ufffd""#.to_string()), 2)
        );
    }

    #[test]
    fn shapes() {
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","method":"m"}"#),
            Incoming::Notification { .. }
        ));
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":"srv_1","result":null}"#),
            Incoming::Response {
                outcome: Ok(Value::Null),
                ..
            }
        ));
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":"srv_1","error":{"code":1}}"#),
            Incoming::Response {
                outcome: Err(_),
                ..
            }
        ));
        match single(r#"{"jsonrpc":"2.0","id":1}"#) {
            Incoming::Invalid { id, message } => {
                assert_eq!(id.map(|i| i.get().to_string()).as_deref(), Some("1"));
                assert!(message.contains("missing method"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            single(r#"{"jsonrpc":"1.0","id":1,"method":"m"}"#),
            Incoming::Invalid { .. }
        ));
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"m"}"#),
            Incoming::Invalid { id: None, .. }
        ));
        assert!(matches!(single("5"), Incoming::Invalid { id: None, .. }));
        assert!(matches!(parse_line(b"[]"), Line::EmptyBatch));
        assert!(matches!(parse_line(b"{nope"), Line::ParseError(_)));
        assert!(matches!(parse_line(b"\xff\xfe"), Line::ParseError(_)));
        match parse_line(br#"[{"jsonrpc":"2.0","id":1,"method":"a"},5]"#) {
            Line::Batch(v) => {
                assert!(matches!(v[0], Incoming::Request { .. }));
                assert!(matches!(v[1], Incoming::Invalid { .. }));
            }
            other => panic!("{other:?}"),
        }
    }
}
