//! The loop's typed events as frames: `stream.chunk`, `stream.error`, `stream.done`. Hot-path
//! chunks serialize from borrowed structs, no `Value` tree.

use serde::Serialize;
use serde_json::Value;

use super::writer::Out;
use crate::agent::events::{Event, EventSink};
use crate::llm::RawChunk;

/// Writes a turn's events to stdout through the one writer.
pub struct FrameSink(pub Out);

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

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    stream_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call: Option<ToolCallChunk<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notice: Option<&'a Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolCallChunk<'a> {
    id: &'a str,
    name: &'a str,
    arguments: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_id: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StreamError<'a> {
    stream_id: &'a str,
    kind: &'a str,
    message: &'a str,
    trace_id: &'a str,
}

impl FrameSink {
    fn chunk(&self, c: Chunk<'_>) {
        self.0.notify("stream.chunk", &c);
    }
}

impl EventSink for FrameSink {
    fn emit(&self, event: Event<'_>) {
        let empty = |stream_id| Chunk {
            stream_id,
            tool_call: None,
            tool_result: None,
            notice: None,
        };
        match event {
            Event::Delta { stream_id, text } => self.0.notify(
                "stream.chunk",
                &Delta {
                    stream_id,
                    delta: Some(text),
                    reasoning_delta: None,
                },
            ),
            Event::Reasoning { stream_id, text } => self.0.notify(
                "stream.chunk",
                &Delta {
                    stream_id,
                    delta: None,
                    reasoning_delta: Some(text),
                },
            ),
            Event::Raw { stream_id, chunk } => self.0.notify(
                "stream.chunk",
                &Raw {
                    stream_id,
                    raw_chunk: chunk,
                },
            ),
            Event::ToolCall {
                stream_id,
                call,
                parent,
            } => self.chunk(Chunk {
                tool_call: Some(ToolCallChunk {
                    id: &call.id,
                    name: &call.name,
                    arguments: &call.arguments,
                    parent_id: parent,
                }),
                ..empty(stream_id)
            }),
            Event::ToolResult { stream_id, result } => self.chunk(Chunk {
                tool_result: Some(result),
                ..empty(stream_id)
            }),
            Event::Notice { stream_id, notice } => self.chunk(Chunk {
                notice: Some(notice),
                ..empty(stream_id)
            }),
            Event::Error {
                stream_id,
                kind,
                message,
                trace_id,
            } => self.0.notify(
                "stream.error",
                &StreamError {
                    stream_id,
                    kind,
                    message,
                    trace_id,
                },
            ),
            Event::Done(done) => self.0.notify("stream.done", done),
            Event::Child(child) => self.0.notify("agent.child", child),
        }
    }
}
