//! The host seam: requests the sidecar makes of its host while it works (reverse
//! `tool.invoke`, `approval.request`, `ask_user.request`, `read_state.seed`,
//! `host.process.spawn`). The loop and the tools see only this trait; `rpc::reverse`
//! implements it over the wire, so neither `agent/` nor `tools/` imports `rpc/`.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// How a wait for the host ended without an answer. Each way out is distinct, so callers can
/// name what the host did.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HostError {
    #[error("host did not answer '{method}' within {ms} ms")]
    Timeout { method: String, ms: u128 },
    #[error("host answered '{method}' with error {code}: {message}")]
    Host {
        method: String,
        code: i64,
        message: String,
        kind: Option<String>,
        data: Option<Value>,
    },
    #[error("the host connection closed before '{method}' was answered")]
    Closed { method: String },
    #[error("the wait for the host's answer to '{method}' was cancelled")]
    Cancelled { method: String },
}

impl HostError {
    /// The host does not implement the method (it answered -32601).
    pub fn is_method_not_found(&self) -> bool {
        matches!(self, HostError::Host { code: -32601, .. })
    }
}

pub type HostFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, HostError>> + Send + 'a>>;

/// Sends one request to the host and waits for its answer: at most `timeout`, and no longer
/// than `cancel` stays untriggered. Nothing waits forever.
pub trait HostLink: Send + Sync {
    fn call<'a>(
        &'a self,
        method: &'a str,
        params: Value,
        timeout: Duration,
        cancel: &'a CancellationToken,
    ) -> HostFuture<'a>;
}
