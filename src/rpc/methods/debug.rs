//! Diagnostics for host test suites (`OUTRIGGER_DEBUG_METHODS=1`): a handler that sleeps,
//! an echo, a reverse request round-trip through the host, and a direct record append.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::agent::persist;
use crate::app::App;
use crate::protocol::debug::{
    DebugEchoParams, DebugEchoResult, DebugRecordAppendParams, DebugRecordAppendResult,
    DebugReverseError, DebugReverseParams, DebugReverseResult, DebugSleepParams, DebugSleepResult,
};
use crate::rpc::error::{ErrorKind, RpcError};
use crate::rpc::reverse::ReverseError;
use crate::store::ItemKind;

/// Ceiling for `debug.sleep` and `debug.reverse` waits: ten minutes.
const MAX_WAIT_MS: u64 = 600_000;

pub async fn sleep(app: Arc<App>, p: DebugSleepParams) -> Result<DebugSleepResult, RpcError> {
    if p.ms > MAX_WAIT_MS {
        return Err(RpcError::invalid_params(format!(
            "ms must be at most {MAX_WAIT_MS}"
        )));
    }
    let token = app.lifecycle.token();
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(p.ms)) => Ok(DebugSleepResult { slept_ms: p.ms }),
        _ = token.cancelled() => Err(RpcError::new(ErrorKind::Cancelled, "cancelled by shutdown")),
    }
}

pub async fn echo(_: Arc<App>, p: DebugEchoParams) -> Result<DebugEchoResult, RpcError> {
    Ok(DebugEchoResult(p.value))
}

/// A failure the host did not answer for: `{kind, message}`.
fn local_failure(kind: &str, e: &ReverseError) -> DebugReverseError {
    DebugReverseError {
        code: None,
        message: e.to_string(),
        kind: Some(kind.to_string()),
        data: None,
    }
}

pub async fn reverse(app: Arc<App>, p: DebugReverseParams) -> Result<DebugReverseResult, RpcError> {
    if p.timeout_ms > MAX_WAIT_MS {
        return Err(RpcError::invalid_params(format!(
            "timeoutMs must be at most {MAX_WAIT_MS}"
        )));
    }
    let answer = app
        .reverse
        .call(&p.method, p.params, Duration::from_millis(p.timeout_ms))
        .await;
    Ok(match answer {
        Ok(v) => DebugReverseResult::Result(v),
        Err(ReverseError::Host {
            code,
            message,
            kind,
            data,
            ..
        }) => DebugReverseResult::Error(DebugReverseError {
            code: Some(code),
            message,
            kind,
            // The host's error always reports its `data`, `null` when it sent none.
            data: Some(data.unwrap_or(Value::Null)),
        }),
        Err(e @ ReverseError::Timeout { .. }) => {
            DebugReverseResult::Error(local_failure("timeout", &e))
        }
        Err(e @ ReverseError::Cancelled { .. }) => {
            DebugReverseResult::Error(local_failure("cancelled", &e))
        }
        Err(e @ ReverseError::Closed { .. }) => {
            DebugReverseResult::Error(local_failure("transport_closed", &e))
        }
    })
}

/// `debug.record.append`: writes one message to a record the way the CoreLoop does, so
/// host tests can build records without a model.
pub async fn record_append(
    app: Arc<App>,
    p: DebugRecordAppendParams,
) -> Result<DebugRecordAppendResult, RpcError> {
    if p.record_id.trim().is_empty() {
        return Err(RpcError::invalid_params("recordId must not be empty"));
    }
    let kind = match &p.kind {
        Some(k) => ItemKind::parse(k),
        None => ItemKind::for_role(&p.role),
    }
    .ok_or_else(|| {
        RpcError::invalid_params(format!(
            "invalid role/kind {:?}: use system, user, assistant, tool, steer.inject, \
             skills.catalog or loop.<name>",
            p.kind.as_deref().unwrap_or(&p.role)
        ))
    })?;
    let message = json!({"role": p.role, "content": p.content});
    let (id, tokens) = (p.record_id, p.token_estimate);
    let seq = persist::call(&app.store, move |st| st.append(&id, kind, &message, tokens)).await?;
    Ok(DebugRecordAppendResult { seq })
}
