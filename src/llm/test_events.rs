//! What the decoders' unit tests share: fixtures by vendor and the views of a decoded
//! stream they assert on.

use std::path::PathBuf;

use serde_json::Value;

use super::types::{LlmError, LlmErrorKind, LlmEvent, ToolCall, Usage};

/// `tests/fixtures/<dir>/<name>.sse`.
pub fn fixture(dir: &str, name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
        .join(format!("{name}.sse"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The streamed (content, reasoning) text.
pub fn text_of(events: &[LlmEvent]) -> (String, String) {
    let mut content = String::new();
    let mut reasoning = String::new();
    for e in events {
        match e {
            LlmEvent::Content { text } => content.push_str(text),
            LlmEvent::Reasoning { text } => reasoning.push_str(text),
            _ => {}
        }
    }
    (content, reasoning)
}

pub fn calls(events: &[LlmEvent]) -> Vec<ToolCall> {
    events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

/// A decoded stream in one value, for whole-stream comparisons.
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    pub content: String,
    pub reasoning: String,
    pub calls: Vec<(String, String, Value)>,
    pub usage: Option<Usage>,
    pub state: Option<Value>,
    pub finish: Option<String>,
    pub error: Option<LlmErrorKind>,
}

pub fn summarize(events: &[LlmEvent], err: &Option<LlmError>) -> Summary {
    let (content, reasoning) = text_of(events);
    let mut s = Summary {
        content,
        reasoning,
        calls: calls(events)
            .into_iter()
            .map(|c| (c.id, c.name, c.arguments))
            .collect(),
        error: err.as_ref().map(LlmError::kind),
        ..Summary::default()
    };
    for e in events {
        match e {
            LlmEvent::Usage(u) => s.usage = Some(*u),
            LlmEvent::State { data } => s.state = Some(data.clone()),
            LlmEvent::Finish { reason } => s.finish = Some(reason.clone()),
            _ => {}
        }
    }
    s
}
