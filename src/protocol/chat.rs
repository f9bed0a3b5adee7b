//! `agent.chat.*` results and the stream notifications (`stream.chunk`, `stream.error`,
//! `stream.done`). `StreamDone` is what the loop serializes; the chunk types describe the
//! frames `rpc::events` writes from borrowed data.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The answer to `agent.chat.stream` / `agent.chat.fork`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamStarted {
    pub stream_id: String,
    /// Forks only: messages in the new record's seed plus the ones sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_messages: Option<usize>,
    /// Forks only: the new record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_id: Option<String>,
}

/// `agent.chat.cancel` / `agent.chat.compact` params.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamRef {
    pub stream_id: String,
}

/// `agent.chat.steer` params.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SteerParams {
    pub stream_id: String,
    /// The message to steer with (not blank).
    pub content: String,
    /// Refused when set (approvals come from `approval.request`).
    #[serde(default)]
    pub exec_policy: Option<Value>,
}

/// `agent.chat.steer` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SteerResult {
    pub accepted: bool,
    /// `stream_not_active` when not accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `agent.chat.compact` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CompactResult {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Token totals of a turn as the host sees them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cached_prompt_tokens: u64,
    /// Only for models the catalog prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// `stream.done`: exactly one per stream, last.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamDone {
    pub stream_id: String,
    /// `status == "completed"`.
    pub ok: bool,
    /// `completed`, `failed`, `budget_exhausted` or `cancelled`.
    pub status: String,
    pub reason: String,
    pub trace_id: String,
    pub record_id: String,
    pub usage: UsageReport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<bool>,
}

/// `stream.error`: a terminal failure, before its `stream.done`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamError {
    pub stream_id: String,
    /// `LoopError`.
    pub kind: String,
    pub message: String,
    pub trace_id: String,
}

/// A call the model made (`stream.chunk` `toolCall`, `rawChunk.toolCallDelta`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallChunk {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// `{backend, enforcement}` of a sandboxed tool's run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SandboxMarker {
    pub backend: String,
    /// `full`, `partial` or `none`.
    pub enforcement: String,
}

/// A finished call (`stream.chunk` `toolResult`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultChunk {
    pub id: String,
    pub name: String,
    pub success: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The tool message's JSON, at most 300 characters plus `…`.
    pub result_preview: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMarker>,
}

/// A loop notice: `round_end`, `steer`, `hook_action`, `budget_exhausted`, `soft_timeout`,
/// `approval`, `todos`, `todo_reminder`; the other keys depend on the kind.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Notice {
    pub kind: String,
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

/// The provider chunk as `streamRawChunks` forwards it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawChunkFrame {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_delta: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_delta: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_delta: Option<ToolCallChunk>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

/// `stream.chunk`: `streamId` and exactly one payload.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamChunk {
    pub stream_id: String,
    /// Display text (pseudo tool-call markup stripped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_delta: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<ToolCallChunk>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResultChunk>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<Notice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_chunk: Option<RawChunkFrame>,
}
