//! The one place that knows JSON-RPC error codes. Modules return typed errors; the
//! `From<…> for RpcError` impls at the end of this file map each to a kind (so handlers use
//! `?`), and the code follows from the kind.

use serde::Serialize;
use serde_json::{Map, Value, json};

/// The `data.kind` vocabulary hosts switch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    Parse,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    Internal,
    BudgetExhausted,
    PolicyDenied,
    ToolFailed,
    EditFailed,
    NotFound,
    Storage,
    TransportClosed,
    Timeout,
    Cancelled,
}

impl ErrorKind {
    pub fn code(self) -> i64 {
        match self {
            ErrorKind::Parse => -32700,
            ErrorKind::InvalidRequest => -32600,
            ErrorKind::MethodNotFound => -32601,
            ErrorKind::InvalidParams => -32602,
            ErrorKind::Internal | ErrorKind::Cancelled => -32603,
            ErrorKind::BudgetExhausted => -32001,
            ErrorKind::PolicyDenied => -32002,
            ErrorKind::ToolFailed | ErrorKind::EditFailed => -32003,
            ErrorKind::NotFound | ErrorKind::Storage => -32004,
            ErrorKind::TransportClosed | ErrorKind::Timeout => -32005,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Parse => "parse",
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::MethodNotFound => "method_not_found",
            ErrorKind::InvalidParams => "invalid_params",
            ErrorKind::Internal => "internal",
            ErrorKind::BudgetExhausted => "budget_exhausted",
            ErrorKind::PolicyDenied => "policy_denied",
            ErrorKind::ToolFailed => "tool_failed",
            ErrorKind::EditFailed => "edit_failed",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Storage => "storage",
            ErrorKind::TransportClosed => "transport_closed",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Cancelled => "cancelled",
        }
    }
}

/// A handler's successful result, already serialized (no intermediate `Value` tree). The JSON
/// text starts `HEAD_ROOM` bytes into its buffer, so the response's head
/// (`{"jsonrpc":"2.0","id":…,"result":`) is written in front of it in place: a result of
/// megabytes (a 10,000-tool list) is not copied again into its frame.
pub struct Reply {
    buf: Vec<u8>,
}

/// Room for the head of a response whose id is up to 32 bytes of JSON (the head is 32 bytes
/// plus the id); a longer id costs one copy of the result (`Reply::into_frame`).
pub const HEAD_ROOM: usize = 64;

impl Reply {
    /// The result's JSON text.
    pub fn json(&self) -> &[u8] {
        self.buf.get(HEAD_ROOM..).unwrap_or_default()
    }

    /// The `head` parts, the result and `tail` as one frame: the buffer and where the frame
    /// starts in it. The head goes into the reserved room when it fits, else the frame is a
    /// new buffer.
    pub fn into_frame(mut self, head: &[&[u8]], tail: &[u8]) -> (Vec<u8>, usize) {
        let len: usize = head.iter().map(|p| p.len()).sum();
        if len <= HEAD_ROOM {
            let start = HEAD_ROOM - len;
            let mut at = start;
            for part in head {
                self.buf[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
            self.buf.extend_from_slice(tail);
            return (self.buf, start);
        }
        let mut frame = Vec::with_capacity(len + self.json().len() + tail.len() + 1);
        for part in head {
            frame.extend_from_slice(part);
        }
        frame.extend_from_slice(self.json());
        frame.extend_from_slice(tail);
        (frame, 0)
    }
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.json()))
    }
}

/// What every handler returns.
pub type Outcome = Result<Reply, RpcError>;

/// Serializes a result for the wire.
pub fn reply<T: Serialize + ?Sized>(value: &T) -> Outcome {
    let mut buf = with_head_room();
    serde_json::to_writer(&mut buf, value)
        .map_err(|e| RpcError::internal(format!("could not encode the result: {e}")))?;
    Ok(Reply { buf })
}

/// A result that writes its own JSON text (`JsonText`).
pub fn reply_text<T: crate::protocol::JsonText + ?Sized>(value: &T) -> Outcome {
    let mut buf = with_head_room();
    value.write_json(&mut buf);
    Ok(Reply { buf })
}

/// A result's buffer before its text: `HEAD_ROOM` reserved bytes.
fn with_head_room() -> Vec<u8> {
    let mut buf = Vec::with_capacity(HEAD_ROOM + 128);
    buf.resize(HEAD_ROOM, 0);
    buf
}

/// The `null` result of void methods.
pub fn reply_null() -> Outcome {
    reply(&())
}

/// An error on its way to the wire: `{code, message, kind, data: {kind, …}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub kind: ErrorKind,
    pub message: String,
    /// Extra members merged into `data` beside `kind`.
    pub data: Map<String, Value>,
}

impl RpcError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        RpcError {
            kind,
            message: message.into(),
            data: Map::new(),
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.data.insert(key.to_string(), value.into());
        self
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidParams, message)
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidRequest, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            ErrorKind::MethodNotFound,
            format!("Method not found: '{method}'; see docs/protocol.md for the method list"),
        )
        .with("method", method)
    }

    /// The JSON error object. `kind` is also top-level: hosts of the reference read it there.
    pub fn to_json(&self) -> Value {
        let mut data = self.data.clone();
        data.insert("kind".into(), json!(self.kind.as_str()));
        json!({
            "code": self.kind.code(),
            "message": self.message,
            "kind": self.kind.as_str(),
            "data": data,
        })
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.kind.as_str())
    }
}

impl std::error::Error for RpcError {}

/// Store failures by class: missing things are `not_found`, refused input `invalid_params`,
/// the rest `storage`.
impl From<crate::store::StoreError> for RpcError {
    fn from(e: crate::store::StoreError) -> Self {
        use crate::store::{ErrorClass, StoreError};
        // A store task that panicked is our bug, not the database's.
        if let StoreError::Task(_) = e {
            return RpcError::internal(e.to_string());
        }
        let kind = match e.class() {
            ErrorClass::NotFound => ErrorKind::NotFound,
            ErrorClass::InvalidParams => ErrorKind::InvalidParams,
            ErrorClass::Storage => ErrorKind::Storage,
        };
        RpcError::new(kind, e.to_string())
    }
}

impl From<crate::agent::AgentError> for RpcError {
    fn from(e: crate::agent::AgentError) -> Self {
        use crate::agent::AgentError;
        match e {
            AgentError::InvalidParams(m) => RpcError::invalid_params(m),
            AgentError::NotFound(m) => RpcError::new(ErrorKind::NotFound, m),
            AgentError::Storage(m) => RpcError::new(ErrorKind::Storage, m),
        }
    }
}

/// A refused config change: a key pinned by the managed layer is `policy_denied`, anything
/// else (unknown key, wrong type, bad file) is the caller's to fix.
impl From<crate::config::ConfigError> for RpcError {
    fn from(e: crate::config::ConfigError) -> Self {
        use crate::config::ConfigError;
        match e {
            ConfigError::Pinned { .. } => RpcError::new(ErrorKind::PolicyDenied, e.to_string()),
            other => RpcError::invalid_params(other.to_string()),
        }
    }
}

/// `skills.list`: every failure (no roots, too many, missing or unreadable root) names the
/// roots the caller passed, so all are `invalid_params`.
impl From<crate::tools::skills::SkillsError> for RpcError {
    fn from(e: crate::tools::skills::SkillsError) -> Self {
        RpcError::invalid_params(e.to_string())
    }
}

/// `plugin.enable/disable/reload`: unknown names, wrong states and manifests that no longer
/// load are all the caller's to fix.
impl From<crate::tools::plugins::PluginOpError> for RpcError {
    fn from(e: crate::tools::plugins::PluginOpError) -> Self {
        RpcError::invalid_params(e.to_string())
    }
}

/// `workspace.apply_edits`: `edit_failed` with the edit algorithm's `code` and, when one edit
/// is to blame, its 0-based index as `edit`.
impl From<crate::tools::fs::edit::EditError> for RpcError {
    fn from(e: crate::tools::fs::edit::EditError) -> Self {
        let err = RpcError::new(ErrorKind::EditFailed, e.message).with("code", e.code.as_str());
        match e.edit {
            Some(i) => err.with("edit", i),
            None => err,
        }
    }
}

/// Provider-side failures outside a turn (a turn reports its own on `stream.error`): today
/// only `models.list`'s HTTP client construction reaches a handler, and that is `internal`.
impl From<crate::llm::LlmError> for RpcError {
    fn from(e: crate::llm::LlmError) -> Self {
        RpcError::internal(e.to_string())
    }
}
