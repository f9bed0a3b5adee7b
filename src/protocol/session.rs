//! `agent.session.*` (sessions, durable history records and their branches) and
//! `trace.fetch`. The store and the trace recorder keep their own row types; the handlers in
//! `rpc/methods/{sessions,trace}.rs` convert those into these wire types.

use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::llm::Message;

/// Schema transform for result types whose members are all always present (an unset one is
/// `null`, never omitted): lists every property as required, which the derive does not do
/// for `Option` fields.
pub(crate) fn all_required(schema: &mut Schema) {
    let names: Vec<Value> = match schema.get("properties").and_then(Value::as_object) {
        Some(props) => props.keys().cloned().map(Value::String).collect(),
        None => return,
    };
    schema.insert("required".into(), Value::Array(names));
}

/// `agent.session.create` params. Upsert: an existing `sessionId` is overwritten whole
/// (fields not given fall back to their defaults); its `createdAt` is kept.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionCreateParams {
    /// Not blank.
    pub chat_id: String,
    /// Default `sess_<32 hex>`; not blank when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Default `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Default `plan`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_stage: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_stage: Option<String>,
    /// Default `agent-entry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    /// Any JSON, stored as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_data: Option<Value>,
    /// Default `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_active: Option<bool>,
}

/// `agent.session.resume` params.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionResumeParams {
    pub session_id: String,
}

/// `agent.session.list` params (all optional; omitted params list every session).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionListParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// Only sessions with `isActive: true`.
    #[serde(default)]
    pub active_only: bool,
}

/// A session (`agent.session.create`/`resume` result, `agent.session.list` element). Times
/// are ISO-8601 UTC with milliseconds; absent optional fields are omitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentSession {
    pub session_id: String,
    pub user_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    pub chat_id: String,
    pub current_stage: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_stage: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    /// As given to `agent.session.create`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_data: Option<Value>,
    pub is_active: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// `agent.session.list` result: a bare array of sessions, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionListResult(pub Vec<AgentSession>);

/// `agent.session.messages`, `agent.session.branches` and `agent.session.tree` params.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordRef {
    pub record_id: String,
}

/// `agent.session.messages` result: the record's visible transcript (after its last
/// compaction boundary, seeds expanded), in the shape `agent.chat.stream` takes as
/// `messages`, each with its `seq` (a seeded message carries the seed's).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionMessagesResult {
    pub record_id: String,
    pub messages: Vec<Message>,
}

/// `agent.session.fork` params. The cut applies to the source's visible transcript, by
/// precedence `untilSeq` > `beforeUserIndex` > `beforeLastUser` > none (everything).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionForkParams {
    /// The source record (not blank).
    pub record_id: String,
    /// Keep the messages with `seq ≤ untilSeq`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_seq: Option<i64>,
    /// Keep up to and including user message N (0-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_user_index: Option<u64>,
    /// Keep up to and including the last user message (the fork re-asks it).
    #[serde(default)]
    pub before_last_user: bool,
    /// Default `<recordId>:fork:<12 hex>`; must not name an existing record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_record_id: Option<String>,
    /// Default: the last user message kept (at most 60 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// `agent.session.fork` result: the new record and where it branched off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = all_required)]
pub struct BranchPoint {
    pub record_id: String,
    pub source_record_id: String,
    /// `untilSeq`, the seq of the kept user message, or the source's last seq; null when the
    /// source has no entries.
    pub source_until_seq: Option<i64>,
    pub label: String,
    /// Messages in the new record's seed.
    pub seed_messages: usize,
}

/// One record in a branch view. A root has null provenance and label `root`; a fork's label
/// is its explicit `label`, else the last user message it kept (whitespace collapsed, at most
/// 60 characters ending in `…` when cut), or `(empty prefix)` when it kept no user text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = all_required)]
pub struct BranchNode {
    pub record_id: String,
    /// Always present; null on a root.
    pub source_record_id: Option<String>,
    /// Always present; null on a root.
    pub source_until_seq: Option<i64>,
    pub label: String,
    /// 0 at the root reached.
    pub depth: usize,
}

/// `agent.session.branches` result. An unknown record is no error: `lineage` is a lone root
/// node for it and `children` is empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionBranchesResult {
    /// Root → the record.
    pub lineage: Vec<BranchNode>,
    /// The record's direct forks, oldest first.
    pub children: Vec<BranchNode>,
    /// The walk up stopped after 32 ancestors before reaching a root.
    pub truncated: bool,
}

/// A record in `agent.session.tree`: a branch node with its forks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = all_required)]
pub struct TreeNode {
    pub record_id: String,
    /// Always present; null on the root.
    pub source_record_id: Option<String>,
    /// Always present; null on the root.
    pub source_until_seq: Option<i64>,
    pub label: String,
    pub depth: usize,
    /// Direct forks, oldest first.
    pub children: Vec<TreeNode>,
}

/// `agent.session.tree` result: the whole family of `recordId`, from its root, breadth first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionTreeResult {
    /// As asked.
    pub record_id: String,
    /// The family root.
    pub tree: TreeNode,
    pub node_count: usize,
    /// The family was cut at depth 32 or 500 nodes.
    pub truncated: bool,
}

/// `trace.fetch` params.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceFetchParams {
    pub trace_id: String,
}

/// `trace.export` params: the trace, and where and how to send it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceExportParams {
    pub trace_id: String,
    /// The collector (`http://host:4318`, or the full `…/v1/traces` URL); default config
    /// `otlp_endpoint`.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Extra request headers (e.g. an API key); they win over config `otlp_headers`.
    #[serde(default)]
    pub headers: Option<std::collections::BTreeMap<String, String>>,
    /// `metadata` (default: no message, argument or result text leaves the process) or
    /// `full`.
    #[serde(default)]
    pub privacy_mode: Option<String>,
}

/// `trace.export` result. A collector that is down, slow or refusing is `status: "failed"`
/// with the reason, never an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TraceExportResult {
    /// `exported` or `failed`.
    pub status: String,
    pub trace_id: String,
    pub privacy_mode: String,
    /// Spans sent: the turn's root and one per provider request and tool execution.
    pub spans: usize,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `trace.fetch` result: one stream's trace, from memory while it is kept there, else from
/// the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceFetchResult {
    pub trace: TraceHeader,
    /// One `llm.request` span per provider request, one per tool execution.
    pub spans: Vec<TraceSpan>,
    /// At most 10000, in order.
    pub events: Vec<TraceEvent>,
}

/// A trace's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TraceHeader {
    pub trace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub stream_id: String,
    /// `running` while the stream runs, then its `stream.done` status.
    pub status: String,
    /// Once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    pub had_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Events recorded, including any beyond the 10000 kept.
    pub event_count: u64,
    pub span_count: u64,
    pub total_tokens: u64,
    pub model_id: String,
    pub started_at_ms: u64,
    pub created_at: String,
    pub updated_at: String,
}

/// A timed operation of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TraceSpan {
    /// `span_0001`, `span_0002`, …
    pub span_id: String,
    pub trace_id: String,
    /// `llm.request` or the tool name.
    pub name: String,
    pub kind: String,
    pub start_ms: u64,
    /// Once ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// `running` until it ends.
    pub status: String,
    pub attrs: Map<String, Value>,
}

/// One loop event of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TraceEvent {
    /// `evt_000001`, …
    pub id: String,
    pub trace_id: String,
    /// `stage_start`, `llm_request`, `llm_response`, `content_delta`, `reasoning_delta`,
    /// `tool_call_start`, `tool_call_result`, `tool_error`, `steer`, `hook_action`,
    /// `budget_exhausted`, `soft_timeout`, `completion` or `error`.
    pub kind: String,
    pub name: String,
    /// 0-based.
    pub sequence: u64,
    pub timestamp_ms: u64,
    /// Free-form; a payload longer than 500 characters is replaced by `{truncated: "<first
    /// 500 characters>…"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}
