//! The only code that writes stdout. Every frame goes through one channel to one thread,
//! one line each, with U+2028/U+2029 escaped (JavaScript line readers split on them), and
//! the buffer is flushed whenever the queue drains.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};

use super::error::RpcError;

enum Msg {
    Frame(Vec<u8>),
    /// Flush everything queued before this, then acknowledge.
    Flush(oneshot::Sender<()>),
}

/// A cheap, cloneable handle for sending frames to the writer thread.
#[derive(Clone)]
pub struct Out {
    tx: mpsc::UnboundedSender<Msg>,
    broken: Arc<AtomicBool>,
}

#[derive(Serialize)]
struct Notification<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct Request<'a> {
    jsonrpc: &'static str,
    id: &'a str,
    method: &'a str,
    params: &'a Value,
}

#[derive(Serialize)]
struct Success<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    result: &'a Value,
}

#[derive(Serialize)]
struct Failure<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    error: Value,
}

const NULL_ID: &str = "null";

/// Serializes a response frame (no newline). `id` `None` means `"id": null`.
pub fn encode_response(id: Option<&RawValue>, result: &Result<Value, RpcError>) -> Vec<u8> {
    let null: Box<RawValue> = RawValue::from_string(NULL_ID.to_string()).unwrap_or_default();
    let id = id.unwrap_or(&null);
    let bytes = match result {
        Ok(v) => serde_json::to_vec(&Success {
            jsonrpc: "2.0",
            id,
            result: v,
        }),
        Err(e) => serde_json::to_vec(&Failure {
            jsonrpc: "2.0",
            id,
            error: e.to_json(),
        }),
    };
    escape_separators(bytes.unwrap_or_else(|e| internal_failure(id, &e)))
}

/// A frame that could not be serialized still gets an answer.
fn internal_failure(id: &RawValue, e: &serde_json::Error) -> Vec<u8> {
    let err = RpcError::internal(format!("could not encode the result: {e}"));
    serde_json::to_vec(&Failure {
        jsonrpc: "2.0",
        id,
        error: err.to_json(),
    })
    .unwrap_or_else(|_| b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"encode failure\"}}".to_vec())
}

/// Replaces raw U+2028 / U+2029 (E2 80 A8 / E2 80 A9) with their `\u` escapes. In valid JSON
/// they can only occur inside strings, where the escape means the same character.
pub fn escape_separators(bytes: Vec<u8>) -> Vec<u8> {
    let needs = memchr::memmem::find_iter(&bytes, b"\xE2\x80")
        .any(|i| matches!(bytes.get(i + 2), Some(0xA8 | 0xA9)));
    if !needs {
        return bytes;
    }
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0xE2 && bytes.get(i + 1) == Some(&0x80) {
            match bytes.get(i + 2) {
                Some(0xA8) => {
                    out.extend_from_slice(b"\\u2028");
                    i += 3;
                    continue;
                }
                Some(0xA9) => {
                    out.extend_from_slice(b"\\u2029");
                    i += 3;
                    continue;
                }
                _ => {}
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

impl Out {
    /// Starts the writer thread over `sink` (stdout in the real process).
    pub fn start<W: Write + Send + 'static>(sink: W) -> (Out, JoinHandle<()>) {
        let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
        let broken = Arc::new(AtomicBool::new(false));
        let flag = broken.clone();
        let handle = std::thread::Builder::new()
            .name("stdout-writer".into())
            .spawn(move || {
                let mut w = std::io::BufWriter::with_capacity(64 * 1024, sink);
                let mut ok = true;
                while let Some(first) = rx.blocking_recv() {
                    let mut next = Some(first);
                    while let Some(msg) = next {
                        match msg {
                            Msg::Frame(bytes) => {
                                if ok {
                                    ok = w
                                        .write_all(&bytes)
                                        .and_then(|_| w.write_all(b"\n"))
                                        .is_ok();
                                }
                            }
                            Msg::Flush(ack) => {
                                ok = ok && w.flush().is_ok();
                                let _ = ack.send(());
                            }
                        }
                        next = rx.try_recv().ok();
                    }
                    ok = ok && w.flush().is_ok();
                    if !ok && !flag.swap(true, Ordering::SeqCst) {
                        tracing::warn!("stdout is closed; dropping further frames");
                    }
                }
                let _ = w.flush();
            })
            .unwrap_or_else(|e| {
                // Without a writer thread there is no protocol; nothing sensible is left to do.
                eprintln!("outrigger: cannot start the stdout writer thread: {e}");
                std::process::exit(70)
            });
        (Out { tx, broken }, handle)
    }

    pub fn send_bytes(&self, bytes: Vec<u8>) {
        let _ = self.tx.send(Msg::Frame(bytes));
    }

    pub fn respond(&self, id: Option<&RawValue>, result: &Result<Value, RpcError>) {
        self.send_bytes(encode_response(id, result));
    }

    pub fn notify<P: Serialize>(&self, method: &str, params: &P) {
        match serde_json::to_vec(&Notification {
            jsonrpc: "2.0",
            method,
            params,
        }) {
            Ok(b) => self.send_bytes(escape_separators(b)),
            Err(e) => tracing::error!("could not encode notification {method}: {e}"),
        }
    }

    pub fn request(&self, id: &str, method: &str, params: &Value) {
        match serde_json::to_vec(&Request {
            jsonrpc: "2.0",
            id,
            method,
            params,
        }) {
            Ok(b) => self.send_bytes(escape_separators(b)),
            Err(e) => tracing::error!("could not encode reverse request {method}: {e}"),
        }
    }

    /// Waits until everything queued so far is written and flushed.
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.tx.send(Msg::Flush(ack)).is_ok() {
            let _ = done.await;
        }
    }

    /// Whether stdout has failed (the host closed its end).
    pub fn is_broken(&self) -> bool {
        self.broken.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_are_escaped() {
        let v = serde_json::json!({"s": "a\u{2028}b\u{2029}c\u{2027}"});
        let out = escape_separators(serde_json::to_vec(&v).unwrap());
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("a\\u2028b\\u2029c\u{2027}"), "{text}");
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn null_id_response() {
        let out = encode_response(
            None,
            &Err(RpcError::new(super::super::error::ErrorKind::Parse, "x")),
        );
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert!(v["id"].is_null());
        assert_eq!(v["error"]["code"], -32700);
    }
}
