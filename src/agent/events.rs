//! What a turn tells its host, as typed events into a sink the loop owns. `rpc` turns them
//! into `stream.chunk` / `stream.error` / `stream.done` frames; the loop never sees the wire.
//! Events borrow their payloads, so the hot path (text deltas) allocates nothing here.

use serde_json::Value;

use crate::llm::{RawChunk, ToolCall};

/// One thing that happened in a turn.
pub enum Event<'a> {
    /// Display text (pseudo tool-call markup already stripped).
    Delta {
        stream_id: &'a str,
        text: &'a str,
    },
    Reasoning {
        stream_id: &'a str,
        text: &'a str,
    },
    /// The provider chunk as it came (`streamRawChunks`).
    Raw {
        stream_id: &'a str,
        chunk: &'a RawChunk,
    },
    /// A call the model made, once it is in the durable record; or, with `parent`, a call a
    /// `run_code` program made (`parent` is the run_code call's id).
    ToolCall {
        stream_id: &'a str,
        call: &'a ToolCall,
        parent: Option<&'a str>,
    },
    /// `{id, name, success, durationMs?, error?, resultPreview, sandbox?}`.
    ToolResult {
        stream_id: &'a str,
        result: &'a Value,
    },
    /// `{kind, …}`: round_end, steer, hook_action, approval, todos, …
    Notice {
        stream_id: &'a str,
        notice: &'a Value,
    },
    /// A terminal failure, before its `Done`.
    Error {
        stream_id: &'a str,
        kind: &'a str,
        message: &'a str,
        trace_id: &'a str,
    },
    /// Exactly one per turn, last.
    Done(&'a Done),
    /// A sub-agent's lifecycle (`agent.child`).
    Child(&'a AgentChild),
}

pub use crate::protocol::chat::{AgentChild, ChildUsage, StreamDone as Done, UsageReport};

/// Where a turn's events go.
pub trait EventSink: Send + Sync {
    fn emit(&self, event: Event<'_>);
}
