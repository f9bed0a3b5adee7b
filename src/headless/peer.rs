//! One end of a JSON-RPC 2.0 line connection: requests we send and the answers we await,
//! frames we write, and what the other side sends us. `outrigger run` and `acp` talk to their
//! child sidecar through one; `acp` also talks to its editor through one (over our own
//! stdin/stdout).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// What the other side sends that is not an answer to one of our requests.
#[derive(Debug)]
pub enum Incoming {
    Notification {
        method: String,
        params: Value,
    },
    /// A request for us: answer it with [`Peer::respond`] or [`Peer::respond_error`].
    Request {
        id: Value,
        method: String,
        params: Value,
    },
}

/// How one request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    #[error("{message} (error {code})")]
    Rpc {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    #[error("the other side closed the connection before answering")]
    Closed,
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, CallError>>>>>;

pub struct Peer<W> {
    writer: tokio::sync::Mutex<Option<W>>,
    pending: Pending,
    next_id: AtomicU64,
}

impl<W: AsyncWrite + Unpin + Send> Peer<W> {
    /// A peer writing to `writer`; `reader` is read on a task, and what is not an answer to
    /// our requests comes out of the returned channel (closed at EOF).
    pub fn new<R>(writer: W, reader: R) -> (Peer<W>, mpsc::UnboundedReceiver<Incoming>)
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let pending: Pending = Arc::default();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(read_frames(reader, Arc::clone(&pending), tx));
        let peer = Peer {
            writer: tokio::sync::Mutex::new(Some(writer)),
            pending,
            next_id: AtomicU64::new(1),
        };
        (peer, rx)
    }

    /// Writes one frame as a line; false when the connection is closed.
    pub async fn send(&self, frame: &Value) -> bool {
        let mut line = frame.to_string();
        line.push('\n');
        let mut guard = self.writer.lock().await;
        let Some(w) = guard.as_mut() else {
            return false;
        };
        w.write_all(line.as_bytes()).await.is_ok() && w.flush().await.is_ok()
    }

    /// Sends a request and waits for its answer (or the connection's end).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id, tx);
        }
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if !self.send(&frame).await {
            if let Ok(mut p) = self.pending.lock() {
                p.remove(&id);
            }
            return Err(CallError::Closed);
        }
        rx.await.unwrap_or(Err(CallError::Closed))
    }

    pub async fn notify(&self, method: &str, params: Value) -> bool {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// Answers a request.
    pub async fn respond(&self, id: Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    /// Refuses a request.
    pub async fn respond_error(&self, id: Value, code: i64, message: &str, data: Option<Value>) {
        let mut error = json!({"code": code, "message": message});
        if let Some(d) = data {
            error["data"] = d;
        }
        self.send(&json!({"jsonrpc": "2.0", "id": id, "error": error}))
            .await;
    }

    /// Closes the writing side (a child sidecar sees EOF on its stdin).
    pub async fn close(&self) {
        self.writer.lock().await.take();
    }
}

async fn read_frames<R: AsyncRead + Unpin>(
    reader: R,
    pending: Pending,
    tx: mpsc::UnboundedSender<Incoming>,
) {
    let mut lines = BufReader::new(reader).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(mut frame) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let method = frame
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let params = frame
            .get_mut("params")
            .map(Value::take)
            .unwrap_or(Value::Null);
        match (method, frame.get("id").cloned()) {
            (Some(method), Some(id)) if !id.is_null() => {
                let _ = tx.send(Incoming::Request { id, method, params });
            }
            (Some(method), _) => {
                let _ = tx.send(Incoming::Notification { method, params });
            }
            (None, Some(id)) => {
                let Some(waiter) = id
                    .as_u64()
                    .and_then(|id| pending.lock().ok().and_then(|mut p| p.remove(&id)))
                else {
                    continue;
                };
                let answer = match frame.get_mut("error") {
                    Some(e) => Err(CallError::Rpc {
                        code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: e
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        data: e.get_mut("data").map(Value::take),
                    }),
                    None => Ok(frame
                        .get_mut("result")
                        .map(Value::take)
                        .unwrap_or(Value::Null)),
                };
                let _ = waiter.send(answer);
            }
            (None, None) => {}
        }
    }
    // EOF: whoever still waits learns the other side is gone.
    if let Ok(mut p) = pending.lock() {
        for (_, w) in p.drain() {
            let _ = w.send(Err(CallError::Closed));
        }
    }
}
