//! What a host sees of a turn: `stream.chunk` variants, `stream.error` and `stream.done`
//! (reference §1.6). Hot-path chunks serialize from borrowed structs, no `Value` tree.

use serde::Serialize;
use serde_json::{Value, json};

use crate::llm::{RawChunk, ToolCall};
use crate::rpc::Out;

/// Characters of a tool result shown in `toolResult.resultPreview`.
pub const PREVIEW_CHARS: usize = 300;

#[derive(Clone)]
pub struct Emitter {
    out: Out,
    pub stream_id: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Delta<'a> {
    stream_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_delta: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Raw<'a> {
    stream_id: &'a str,
    raw_chunk: &'a RawChunk,
}

/// `text` cut to `n` characters with `…` when longer.
pub fn preview(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_string();
    }
    let mut s: String = text.chars().take(n).collect();
    s.push('…');
    s
}

impl Emitter {
    pub fn new(out: Out, stream_id: String) -> Emitter {
        Emitter { out, stream_id }
    }

    pub fn delta(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.out.notify(
            "stream.chunk",
            &Delta {
                stream_id: &self.stream_id,
                delta: Some(text),
                reasoning_delta: None,
            },
        );
    }

    pub fn reasoning(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.out.notify(
            "stream.chunk",
            &Delta {
                stream_id: &self.stream_id,
                delta: None,
                reasoning_delta: Some(text),
            },
        );
    }

    pub fn raw(&self, chunk: &RawChunk) {
        self.out.notify(
            "stream.chunk",
            &Raw {
                stream_id: &self.stream_id,
                raw_chunk: chunk,
            },
        );
    }

    fn chunk(&self, key: &str, v: Value) {
        self.out
            .notify("stream.chunk", &json!({"streamId": self.stream_id, key: v}));
    }

    pub fn tool_call(&self, c: &ToolCall) {
        self.chunk(
            "toolCall",
            json!({"id": c.id, "name": c.name, "arguments": c.arguments}),
        );
    }

    pub fn tool_result(&self, v: Value) {
        self.chunk("toolResult", v);
    }

    pub fn notice(&self, v: Value) {
        self.chunk("notice", v);
    }

    pub fn error(&self, kind: &str, message: &str, trace_id: &str) {
        self.out.notify(
            "stream.error",
            &json!({"streamId": self.stream_id, "kind": kind, "message": message, "traceId": trace_id}),
        );
    }

    pub fn done(&self, v: Value) {
        self.out.notify("stream.done", &v);
    }
}
