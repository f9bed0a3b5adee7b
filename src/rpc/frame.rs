//! Classifying one inbound line: request, notification, response, batch or error.
//! Pure functions, so every shape is unit-tested without a process.

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
    },
    Notification {
        method: String,
        params: Value,
    },
    /// A host's answer to one of our reverse requests.
    Response {
        id: String,
        outcome: Result<Value, Value>,
    },
    /// Not a valid JSON-RPC message; answered with -32600 (and the id when it was usable).
    Invalid {
        id: Option<RawId>,
        message: String,
    },
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

#[derive(Deserialize)]
struct Envelope {
    #[serde(default, deserialize_with = "present")]
    jsonrpc: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    id: Option<RawId>,
    #[serde(default, deserialize_with = "present")]
    method: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    params: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    error: Option<Value>,
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
        Some(b'[') => match serde_json::from_str::<Vec<Box<RawValue>>>(text) {
            Ok(items) if items.is_empty() => Line::EmptyBatch,
            Ok(items) => Line::Batch(items.iter().map(|r| classify(r.get())).collect()),
            Err(e) => Line::ParseError(parse_message(&e)),
        },
        Some(b'{') => match serde_json::from_str::<serde::de::IgnoredAny>(text) {
            Ok(_) => Line::Single(classify(text)),
            Err(e) => Line::ParseError(parse_message(&e)),
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

/// A usable id is a string, a number or null; anything else is dropped.
fn usable_id(id: Option<RawId>) -> Option<RawId> {
    id.filter(|r| {
        matches!(
            r.get().as_bytes().first(),
            Some(b'"' | b'-' | b'0'..=b'9' | b'n')
        )
    })
}

/// Classifies one JSON text that is known to be valid JSON.
pub fn classify(text: &str) -> Incoming {
    let env: Envelope = match serde_json::from_str(text) {
        Ok(e) => e,
        Err(e) => {
            return Incoming::Invalid {
                id: None,
                message: format!("Invalid request: {e}"),
            };
        }
    };
    let invalid = |id: Option<RawId>, message: &str| Incoming::Invalid {
        id: usable_id(id),
        message: message.to_string(),
    };
    if env.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return invalid(env.id, "Invalid request: \"jsonrpc\" must be \"2.0\"");
    }
    if let Some(p) = &env.params
        && !(p.is_object() || p.is_array())
    {
        return invalid(
            env.id,
            "Invalid request: \"params\" must be an object or an array",
        );
    }
    match env.method {
        Some(Value::String(method)) => {
            let params = env.params.unwrap_or(Value::Null);
            match env.id {
                None => Incoming::Notification { method, params },
                Some(id) if usable_id(Some(id.clone())).is_none() => invalid(
                    None,
                    "Invalid request: \"id\" must be a string, a number or null",
                ),
                Some(id) => Incoming::Request { id, method, params },
            }
        }
        Some(_) => invalid(env.id, "Invalid request: \"method\" must be a string"),
        None => {
            let string_id = env
                .id
                .as_ref()
                .and_then(|r| serde_json::from_str::<String>(r.get()).ok());
            match (string_id, env.result, env.error) {
                (Some(id), Some(result), _) => Incoming::Response {
                    id,
                    outcome: Ok(result),
                },
                (Some(id), None, Some(error)) => Incoming::Response {
                    id,
                    outcome: Err(error),
                },
                _ => invalid(env.id, "Invalid request: missing method"),
            }
        }
    }
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
            Incoming::Request { id, method, params } => {
                assert_eq!(id.get(), "1.50");
                assert_eq!(method, "m");
                assert!(params.is_null());
            }
            other => panic!("{other:?}"),
        }
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
