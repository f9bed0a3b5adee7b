//! Requests from the sidecar to the host (`srv_1`, `srv_2`, …) and their pending answers.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;

use super::writer::Out;
use crate::host::{HostFuture, HostLink};
use tokio_util::sync::CancellationToken;

pub use crate::host::HostError as ReverseError;

type Pending = oneshot::Sender<Result<Value, Value>>;

pub struct Reverse {
    next: AtomicU64,
    /// Set at stdin EOF: nobody can answer any more, so new calls fail at once.
    closed: std::sync::atomic::AtomicBool,
    pending: Mutex<HashMap<String, Pending>>,
    out: Out,
}

impl Reverse {
    pub fn new(out: Out) -> Self {
        Reverse {
            next: AtomicU64::new(1),
            closed: std::sync::atomic::AtomicBool::new(false),
            pending: Mutex::new(HashMap::new()),
            out,
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `method` to the host and waits up to `timeout` for its answer.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ReverseError> {
        self.call_until(method, params, timeout, &CancellationToken::new())
            .await
    }

    /// As `call`, and gives up when `cancel` fires. A late answer finds no waiter and is
    /// logged and dropped by the dispatcher.
    pub async fn call_until(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, ReverseError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(ReverseError::Closed {
                method: method.to_string(),
            });
        }
        let id = format!("srv_{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id.clone(), tx);
        self.out.request(&id, method, &params);
        let answer = tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            a = tokio::time::timeout(timeout, rx) => Some(a),
        };
        self.pending().remove(&id);
        let Some(answer) = answer else {
            return Err(ReverseError::Cancelled {
                method: method.to_string(),
            });
        };
        match answer {
            Err(_) => Err(ReverseError::Timeout {
                method: method.to_string(),
                ms: timeout.as_millis(),
            }),
            Ok(Err(_)) => Err(ReverseError::Closed {
                method: method.to_string(),
            }),
            Ok(Ok(Ok(v))) => Ok(v),
            Ok(Ok(Err(e))) => Err(ReverseError::Host {
                method: method.to_string(),
                code: e.get("code").and_then(Value::as_i64).unwrap_or(-32000),
                message: e
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("host error")
                    .to_string(),
                kind: e
                    .get("kind")
                    .or_else(|| e.get("data").and_then(|d| d.get("kind")))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                data: e.get("data").cloned(),
            }),
        }
    }

    /// Routes a host response. Returns false for an id nobody is waiting for.
    pub fn resolve(&self, id: &str, outcome: Result<Value, Value>) -> bool {
        match self.pending().remove(id) {
            Some(tx) => tx.send(outcome).is_ok(),
            None => false,
        }
    }

    /// Fails every waiting call and every later one (the host went away).
    pub fn close_all(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.pending().clear();
    }
}

impl HostLink for Reverse {
    fn call<'a>(
        &'a self,
        method: &'a str,
        params: Value,
        timeout: Duration,
        cancel: &'a CancellationToken,
    ) -> HostFuture<'a> {
        Box::pin(self.call_until(method, params, timeout, cancel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn answers_errors_timeouts_and_close() {
        let (out, _h) = Out::start(std::io::sink());
        let r = Arc::new(Reverse::new(out));
        let r2 = r.clone();
        let call = tokio::spawn(async move {
            r2.call("ask", serde_json::json!({}), Duration::from_secs(5))
                .await
        });
        // Wait until the call is pending, then answer it.
        while r.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        assert!(!r.resolve("srv_999", Ok(Value::Null)));
        assert!(r.resolve("srv_1", Ok(serde_json::json!({"ok": true}))));
        assert_eq!(call.await.unwrap().unwrap()["ok"], true);

        let r2 = r.clone();
        let call =
            tokio::spawn(async move { r2.call("ask", Value::Null, Duration::from_secs(5)).await });
        while r.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        r.resolve(
            "srv_2",
            Err(serde_json::json!({"code": -1, "message": "no", "kind": "denied"})),
        );
        match call.await.unwrap() {
            Err(ReverseError::Host { code, kind, .. }) => {
                assert_eq!(code, -1);
                assert_eq!(kind.as_deref(), Some("denied"));
            }
            other => panic!("{other:?}"),
        }

        let t = r.call("slow", Value::Null, Duration::from_millis(10)).await;
        assert!(matches!(t, Err(ReverseError::Timeout { .. })));

        let r2 = r.clone();
        let call =
            tokio::spawn(async move { r2.call("x", Value::Null, Duration::from_secs(5)).await });
        while r.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        r.close_all();
        assert!(matches!(
            call.await.unwrap(),
            Err(ReverseError::Closed { .. })
        ));
    }
}
