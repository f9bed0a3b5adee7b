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
    /// The turn's trace: `trace.fetch` answers for it while the turn runs, and keeps its
    /// finished spans after a crash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
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
    /// What sub-agents (`delegate_subagent`) used, already included in the totals above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<ChildUsage>,
}

/// Sub-agents' share of a turn's usage.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChildUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cached_prompt_tokens: u64,
}

/// `agent.child`: a sub-agent's lifecycle, on its parent's stream. `child_spawned` first,
/// then one of `child_completed`, `child_failed`, `child_cancelled`; all before the
/// parent's `stream.done`. The child's own chunks are not sent; its record and trace hold
/// them.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentChild {
    pub stream_id: String,
    /// `child_spawned`, `child_completed`, `child_failed`, `child_cancelled`; orchestrated
    /// children also `child_interrupted`, `child_resumed`.
    pub kind: String,
    /// Lineage id, `0.1`, `0.2`, … (unique within the parent's chat).
    pub child_id: String,
    /// 1 for the turn's own children, 2 for theirs (orchestration `maxDepth`).
    pub depth: u32,
    /// The sub-task (`child_spawned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The profile that ran it (`general-purpose` when untyped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The child's own record, `<chatId>:child:<childId>`, linked to the parent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_id: Option<String>,
    /// The child's trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The child turn's status (end kinds): `completed`, `failed`, `budget_exhausted`,
    /// `cancelled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Why it failed (`child_failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
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
    /// Set on a call a `run_code` program made: the `run_code` call's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
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
    /// Set on the result of a call a `run_code` program made: the `run_code` call's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// An image the call showed the model (`view_image`, an MCP image block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ChunkImage>,
}

/// `toolResult.image`: enough for a thumbnail.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChunkImage {
    pub media_type: String,
    pub width: u32,
    pub height: u32,
    /// `outrigger-image:<sha256>.<ext>`: the stored file, in `images/` beside the store; absent
    /// when the image was not sent (a text-only model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
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

/// `approval` of `agent.chat.stream`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalParam {
    /// `auto` (default, unless the config says `host`) or `host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// How long one `approval.request` waits (1–86400000); default `approval_timeout_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
}

/// `hostFs` of `agent.chat.stream`: the file tools (`read_file`, `write_file`, `edit_file`,
/// `apply_patch`) read and/or write file text through the host (`fs.read_text`,
/// `fs.write_text`), so an editor's unsaved buffers are what the model sees and edits.
/// Containment, blocked paths and the read-before-write rules are checked as ever.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostFsParam {
    #[serde(default)]
    pub read: bool,
    #[serde(default)]
    pub write: bool,
}

/// `agent.chat.stream` / `agent.chat.fork` params. Unknown fields are refused naming the
/// nearest known one; `base_url` / `api_key` are accepted for `baseUrl` / `apiKey`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatStreamParams {
    /// `openai_compat` (`openai`, `openai-compatible`), `ollama`, or `scripted`.
    pub provider: String,
    /// The model id (any string for `scripted`).
    #[serde(default)]
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Falls back to `OUTRIGGER_API_KEY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// OpenAI-compatible wire quirks (`compat.describe` lists the keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<Map<String, Value>>,
    /// `{enabled: bool}` or `{override: {…}}` (`presets.describe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presets: Option<Value>,
    /// `scripted` provider: the model's turns inline (docs/scripted-provider.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<Vec<Value>>,
    /// `scripted` provider: a JSON Lines file of turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_path: Option<String>,
    /// The conversation (the shape `agent.session.messages` returns); `[]` only with
    /// `resume`. With `fromRecord`, only the new messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<crate::llm::Message>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Checked against the model catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Passed through to the provider's request body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<Map<String, Value>>,
    /// Accepted and ignored: every stream runs the CoreLoop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_core_loop: Option<bool>,
    /// Default `str_<32 hex>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// The durable record; default `chatId`, else the stream id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_id: Option<String>,
    /// Continue the record with no new messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<bool>,
    /// Seed the turn with the record and append `messages` (send only what is new).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_record: Option<bool>,
    /// Provider requests at most (1–10000, default 80).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u64>,
    /// Consecutive failed tool results that end the turn (1–10000, default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_errors: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_max_tool_calls: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_timeout_ms: Option<i64>,
    /// Per tool call (default 300000); also bounds host tool and ask_user waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout_ms: Option<i64>,
    /// `boundary` (default) or `interrupt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steer_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_context_tokens: Option<u64>,
    /// `all` (default) or `final`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_raw_chunks: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Absolute workspace directory for the file tools and bash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `full` (default), `minimal` or `progressive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_strategy: Option<String>,
    /// `{network?, allowedHosts?, writableRoots?, requireFull?, requireBackend?, shell?,
    /// hostSpawn?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_sandbox: Option<Map<String, Value>>,
    /// The file tools' read-state session; default the record id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Host tool descriptors (OpenAI function shape, optional `mode`); needs `toolsViaHost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_via_host: Option<bool>,
    /// Merged into every reverse `tool.invoke` context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_context: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalParam>,
    /// Offer `ask_user` (answered over `ask_user.request`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_user: Option<bool>,
    /// Offer `run_code` this turn (a Python program whose tool calls run in one round, in the
    /// sandbox; `docs/run-code.md`), also when the config leaves it off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_code: Option<bool>,
    /// `agent.chat.fork`: cut the source record after this seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_seq: Option<i64>,
    /// `agent.chat.fork` from a trace: refused (pass `recordId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// File text through the host: `{read?, write?}` (both default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_fs: Option<HostFsParam>,
    /// Stdio MCP servers for this turn (at most 16): their tools are the turn's as
    /// `mcp__<name>__<tool>`; closed when the turn ends. Ignored under `toolsViaHost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<Vec<McpServerEntry>>,
    /// `{enabled, maxDepth?, maxParallel?, childMaxRounds?}`: the six `agent_*` tools
    /// (`docs/agents.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orchestration: Option<Value>,
    /// Not supported: refused unless null, false or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Value>,
    /// Not supported: refused unless null, false or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_state: Option<Value>,
    /// Not supported: refused unless null, false or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anti_hallucination: Option<Value>,
    /// `delegate_subagent` (on by default): `false` turns it off; `{toolFilter?, maxParallel?,
    /// maxRounds?, maxToolErrors?, profiles?, requiredProfiles?}` shapes it (`docs/agents.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<Value>,
}

/// One per-turn MCP server (`mcp` of `agent.chat.stream`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    /// Tools are named `mcp__<name>__<tool>`; defaults to the command's file name. Characters
    /// outside `[A-Za-z0-9_-]` become `_`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The program that runs the server (no shell).
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Added to the server's environment (which has no secret-looking variables otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<std::collections::BTreeMap<String, String>>,
    /// Relative to the turn's `cwd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}
