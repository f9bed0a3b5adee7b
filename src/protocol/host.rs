//! Reverse requests (sidecar → host) and the approval-rule methods: params the sidecar
//! sends and the answers it accepts. The loop builds the params from these types, so the
//! schemas in `schemas/` are what goes on the wire.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `tool.invoke` (reverse) params: one model call of a host tool.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolInvokeRequest {
    /// The model's call id.
    pub id: String,
    pub name: String,
    pub arguments: Map<String, Value>,
    /// The turn's `toolContext` keys plus `chatId?`, `streamId`, `recordId`, `round`
    /// (which win over `toolContext`'s).
    pub context: Map<String, Value>,
}

/// `approval.request` params: a `local` or `destructive` call waiting for consent.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    pub tool_name: String,
    pub arguments: Value,
    /// The tool's mode: `local` or `destructive`.
    pub mode: String,
    /// What a remembered decision is keyed by: the mode, or for `bash` the command line's
    /// program names joined by `,`.
    pub category: String,
    /// 0-based round of the turn.
    pub round: u64,
    pub stream_id: String,
    /// The model's call id (as in the `toolCall` chunk).
    pub call_id: String,
}

/// A decision kind of `approval.request`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKind {
    AllowOnce,
    AllowForSession,
    AllowAlways,
    DenyOnce,
    DenyForSession,
    DenyAlways,
    Abort,
    TimedOut,
}

/// The host's answer to `approval.request`. Anything else fails closed (`deny_once`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalAnswer {
    pub kind: ApprovalKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Replacement arguments (allow kinds only), re-validated against the tool's schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amendment: Option<Map<String, Value>>,
}

/// One normalised `ask_user` question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AskUserQuestion {
    pub id: String,
    pub text: String,
    /// At most 12 characters, derived from `text` when the model gave none.
    pub header: String,
    /// `select`, `text` or `password`.
    #[serde(rename = "type")]
    pub kind: String,
    /// 2–4 options, for `select` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    pub multi_select: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
}

/// `ask_user.request` params.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AskUserRequest {
    pub intro: String,
    pub questions: Vec<AskUserQuestion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outro: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    pub stream_id: String,
}

/// The host's answer to `ask_user.request`; anything else records `answers: {}`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AskUserAnswer {
    /// Question id → the user's answer (a string, or a list for multi-select).
    pub answers: Map<String, Value>,
}

/// `read_state.seed` params: absolute path → sha256 (lowercase hex) of the content the
/// record shows was last read or written.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReadStateSeed {
    pub state: Map<String, Value>,
}

/// The host's answer to `read_state.seed`: any object the host likes (`{ok: true}` is
/// usual). The sidecar ignores it; only an error answer or a timeout is logged.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct ReadStateSeedAck(pub Map<String, Value>);

/// The confinement the sidecar would have applied (`host.process.spawn`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpawnPolicy {
    pub writable_roots: Vec<String>,
    pub network: bool,
    pub allowed_hosts: Vec<String>,
}

/// `host.process.spawn` params: `bash` under `execSandbox.hostSpawn`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostSpawnRequest {
    pub command: String,
    pub cwd: String,
    pub timeout_ms: u64,
    pub policy: SpawnPolicy,
    /// `callId` plus the turn's `chatId?`, `streamId`, `recordId`, `round`.
    pub context: Map<String, Value>,
}

/// The host's answer to `host.process.spawn`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostSpawnResult {
    /// `null` when the command did not finish.
    pub exit_code: Option<i64>,
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// `{backend, enforcement: full|partial|none}` as the host applied it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Map<String, Value>>,
}

/// `fs.read_text` params: a file tool reads a file under the turn's `hostFs.read`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsReadTextRequest {
    /// Absolute, inside the workspace (checked before the request).
    pub path: String,
    /// `callId` plus the turn's `chatId?`, `streamId`, `recordId`, `round`.
    pub context: Map<String, Value>,
}

/// The host's answer to `fs.read_text`: the file's whole text (an editor's buffer).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FsReadTextResult {
    pub content: String,
}

/// `fs.write_text` params: a file tool writes a file's whole text under `hostFs.write`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsWriteTextRequest {
    pub path: String,
    pub content: String,
    /// `callId` plus the turn's `chatId?`, `streamId`, `recordId`, `round`.
    pub context: Map<String, Value>,
}

/// The host's answer to `fs.write_text`: any object (or `null`); an error answer fails the
/// call and nothing is written on disk.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct FsWriteTextResult(pub Option<Map<String, Value>>);

/// One stored approval rule (`approval.list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRule {
    pub tool_name: String,
    pub category: String,
    /// `allow_always` or `deny_always`.
    pub decision: String,
    pub created_at: String,
}

/// `approval.list` params: none.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalListParams {}

/// `approval.list` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalListResult {
    pub rules: Vec<ApprovalRule>,
}

/// `approval.clear` params: both filters optional (absent matches all).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalClearParams {
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub category: Option<String>,
}

/// `approval.clear` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalClearResult {
    pub cleared: usize,
}
