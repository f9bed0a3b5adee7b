//! The `debug.*` diagnostics (served only with `OUTRIGGER_DEBUG_METHODS=1`): a handler that
//! sleeps, an echo, a reverse-request round trip and a direct append to a history record.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `debug.sleep` params.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DebugSleepParams {
    /// How long to sleep, in milliseconds (at most 600000).
    pub ms: u64,
}

/// `debug.sleep` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DebugSleepResult {
    pub slept_ms: u64,
}

/// `debug.echo` params.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DebugEchoParams {
    /// Any JSON value (required; `null` is a value).
    pub value: Value,
}

/// `debug.echo` result: `value`, unchanged.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct DebugEchoResult(pub Value);

fn default_reverse_timeout() -> u64 {
    10_000
}

/// `debug.reverse` params: a reverse request to send to the host.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DebugReverseParams {
    /// The reverse request's method.
    pub method: String,
    /// Its params, sent as they are.
    #[serde(default)]
    pub params: Value,
    /// How long to wait for the host's answer (at most 600000).
    #[serde(default = "default_reverse_timeout")]
    pub timeout_ms: u64,
}

/// Why a `debug.reverse` round trip got no result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DebugReverseError {
    /// The host's error code; only when the host answered with an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    pub message: String,
    /// `timeout`, `cancelled`, `transport_closed`, or the host error's `kind` (its own or
    /// its `data.kind`; `null` when it named none).
    pub kind: Option<String>,
    /// The host error's `data` (`null` when it sent none); only when the host answered
    /// with an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// `debug.reverse` result: exactly one of `result` (the host's answer) or `error`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DebugReverseResult {
    /// The host answered with a result.
    Result(Value),
    /// The host answered with an error, did not answer in time, or went away.
    Error(DebugReverseError),
}

/// `debug.record.append` params: one message for a history record.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DebugRecordAppendParams {
    /// The record (created on its first append); not blank.
    pub record_id: String,
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    pub content: Value,
    /// The entry kind when it differs from the role: `steer.inject`, `skills.catalog` or
    /// `loop.<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default)]
    pub token_estimate: u64,
}

/// `debug.record.append` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DebugRecordAppendResult {
    /// The new entry's sequence number in the record.
    pub seq: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reverse_results_keep_their_shapes() {
        let ok = DebugReverseResult::Result(json!({"a": 1}));
        assert_eq!(
            serde_json::to_value(ok).unwrap(),
            json!({"result": {"a": 1}})
        );
        // A host error always carries code, kind and data (null when the host named none).
        let host = DebugReverseResult::Error(DebugReverseError {
            code: Some(-1),
            message: "no".into(),
            kind: None,
            data: Some(Value::Null),
        });
        assert_eq!(
            serde_json::to_value(host).unwrap(),
            json!({"error": {"code": -1, "message": "no", "kind": null, "data": null}})
        );
        let timeout = DebugReverseResult::Error(DebugReverseError {
            code: None,
            message: "late".into(),
            kind: Some("timeout".into()),
            data: None,
        });
        assert_eq!(
            serde_json::to_value(timeout).unwrap(),
            json!({"error": {"message": "late", "kind": "timeout"}})
        );
        let echo = DebugEchoResult(json!([1, "x"]));
        assert_eq!(serde_json::to_value(echo).unwrap(), json!([1, "x"]));
    }
}
