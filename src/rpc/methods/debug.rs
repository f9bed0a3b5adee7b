//! Diagnostics for host test suites (`OUTRIGGER_DEBUG_METHODS=1`): a handler that sleeps,
//! an echo, and a reverse request round-trip through the host.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{ErrorKind, Outcome, RpcError, reply};
use crate::rpc::reverse::ReverseError;

/// Ceiling for `debug.sleep` and `debug.reverse` waits: ten minutes.
const MAX_WAIT_MS: u64 = 600_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SleepParams {
    ms: u64,
}

pub async fn sleep(app: Arc<App>, call: Call) -> Outcome {
    let p: SleepParams = call.params()?;
    if p.ms > MAX_WAIT_MS {
        return Err(RpcError::invalid_params(format!(
            "ms must be at most {MAX_WAIT_MS}"
        )));
    }
    let token = app.lifecycle.token();
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(p.ms)) => reply(&json!({"sleptMs": p.ms})),
        _ = token.cancelled() => Err(RpcError::new(ErrorKind::Cancelled, "cancelled by shutdown")),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EchoParams {
    value: Value,
}

pub async fn echo(_app: Arc<App>, call: Call) -> Outcome {
    let p: EchoParams = call.params()?;
    reply(&p.value)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReverseParams {
    method: String,
    #[serde(default)]
    params: Value,
    #[serde(default = "default_timeout")]
    timeout_ms: u64,
}

fn default_timeout() -> u64 {
    10_000
}

pub async fn reverse(app: Arc<App>, call: Call) -> Outcome {
    let p: ReverseParams = call.params()?;
    if p.timeout_ms > MAX_WAIT_MS {
        return Err(RpcError::invalid_params(format!(
            "timeoutMs must be at most {MAX_WAIT_MS}"
        )));
    }
    let answer = app
        .reverse
        .call(&p.method, p.params, Duration::from_millis(p.timeout_ms))
        .await;
    reply(&match answer {
        Ok(v) => json!({"result": v}),
        Err(ReverseError::Host {
            code,
            message,
            kind,
            data,
            ..
        }) => json!({"error": {"code": code, "message": message, "kind": kind, "data": data}}),
        Err(e @ ReverseError::Timeout { .. }) => {
            json!({"error": {"kind": "timeout", "message": e.to_string()}})
        }
        Err(e @ ReverseError::Cancelled { .. }) => {
            json!({"error": {"kind": "cancelled", "message": e.to_string()}})
        }
        Err(e @ ReverseError::Closed { .. }) => {
            json!({"error": {"kind": "transport_closed", "message": e.to_string()}})
        }
    })
}
