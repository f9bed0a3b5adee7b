//! A turn's voice: the `Emitter` turns what the loop does into `Event`s for its sink
//! (reference §1.6 for what the host makes of them).

use std::sync::Arc;

use serde_json::Value;

use super::events::{Done, Event, EventSink};
use crate::llm::{RawChunk, ToolCall};

/// Characters of a tool result shown in `toolResult.resultPreview`.
pub const PREVIEW_CHARS: usize = 300;

#[derive(Clone)]
pub struct Emitter {
    sink: Arc<dyn EventSink>,
    pub stream_id: String,
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
    pub fn new(sink: Arc<dyn EventSink>, stream_id: String) -> Emitter {
        Emitter { sink, stream_id }
    }

    pub fn delta(&self, text: &str) {
        if !text.is_empty() {
            self.sink.emit(Event::Delta {
                stream_id: &self.stream_id,
                text,
            });
        }
    }

    pub fn reasoning(&self, text: &str) {
        if !text.is_empty() {
            self.sink.emit(Event::Reasoning {
                stream_id: &self.stream_id,
                text,
            });
        }
    }

    pub fn raw(&self, chunk: &RawChunk) {
        self.sink.emit(Event::Raw {
            stream_id: &self.stream_id,
            chunk,
        });
    }

    pub fn tool_call(&self, call: &ToolCall) {
        self.sink.emit(Event::ToolCall {
            stream_id: &self.stream_id,
            call,
            parent: None,
        });
    }

    /// A call made inside the call `parent` (a `run_code` program's nested call).
    pub fn nested_tool_call(&self, call: &ToolCall, parent: &str) {
        self.sink.emit(Event::ToolCall {
            stream_id: &self.stream_id,
            call,
            parent: Some(parent),
        });
    }

    pub fn tool_result(&self, result: Value) {
        self.sink.emit(Event::ToolResult {
            stream_id: &self.stream_id,
            result: &result,
        });
    }

    pub fn notice(&self, notice: Value) {
        self.sink.emit(Event::Notice {
            stream_id: &self.stream_id,
            notice: &notice,
        });
    }

    pub fn error(&self, kind: &str, message: &str, trace_id: &str) {
        self.sink.emit(Event::Error {
            stream_id: &self.stream_id,
            kind,
            message,
            trace_id,
        });
    }

    pub fn done(&self, done: &Done) {
        self.sink.emit(Event::Done(done));
    }

    pub fn child(&self, child: &super::events::AgentChild) {
        self.sink.emit(Event::Child(child));
    }
}
