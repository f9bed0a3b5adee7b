//! The test as the host: wait for the sidecar's reverse requests (`srv_N` ids with a
//! `method`) and answer them, in any order.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::Sidecar;

pub const HOST_WAIT: Duration = Duration::from_secs(30);

/// Whether a frame is a request from the sidecar.
pub fn is_reverse(v: &Value) -> bool {
    v.get("method").is_some() && v["id"].as_str().is_some_and(|id| id.starts_with("srv_"))
}

/// The next reverse request for `method` (other frames stay in the backlog).
pub fn reverse(s: &mut Sidecar, method: &str) -> Value {
    let m = method.to_string();
    // Frames are checked against the protocol bundle as they are read (`common::frames`).
    s.wait_for(HOST_WAIT, move |v| {
        is_reverse(v) && v["method"] == m.as_str()
    })
}

/// Answers a reverse request with a result.
pub fn answer(s: &mut Sidecar, req: &Value, result: Value) {
    s.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": result}));
}

/// Answers a reverse request with an error.
pub fn answer_error(s: &mut Sidecar, req: &Value, code: i64, message: &str) {
    s.send(&json!({"jsonrpc": "2.0", "id": req["id"],
                   "error": {"code": code, "message": message}}));
}

/// Host tool descriptors in OpenAI's shape.
pub fn descriptor(name: &str, props: Value, required: &[&str]) -> Value {
    json!({"type": "function", "function": {"name": name, "description": format!("host tool {name}"),
        "parameters": {"type": "object", "properties": props, "required": required}}})
}

/// The parsed JSON body of the tool message for call `id` in a record's messages.
pub fn tool_body(messages: &[Value], id: &str) -> Value {
    let m = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no tool message for {id}: {messages:?}"));
    serde_json::from_str(m["content"].as_str().unwrap()).unwrap()
}

/// How the host answers one reverse request: a result, an error, or nothing at all.
pub enum Reply {
    Result(Value),
    Error(i64, String),
    Silent,
}

/// Runs stream `id` to its `stream.done`, answering every reverse request with `host`.
/// Returns the stream's frames and the reverse requests seen, in order.
pub fn drive(
    s: &mut Sidecar,
    id: &str,
    mut host: impl FnMut(&Value) -> Reply,
) -> (crate::support::chat_helpers::Streamed, Vec<Value>) {
    let mut frames = Vec::new();
    let mut requests = Vec::new();
    loop {
        let sid = id.to_string();
        let f = s.wait_for(HOST_WAIT, move |v| {
            is_reverse(v) || (v.get("id").is_none() && v["params"]["streamId"] == sid.as_str())
        });
        if is_reverse(&f) {
            match host(&f) {
                Reply::Result(r) => answer(s, &f, r),
                Reply::Error(c, m) => answer_error(s, &f, c, &m),
                Reply::Silent => {}
            }
            requests.push(f);
            continue;
        }
        let done = f["method"] == "stream.done";
        frames.push(f);
        if done {
            let d = frames
                .last()
                .map(|f| f["params"].clone())
                .unwrap_or_default();
            return (
                crate::support::chat_helpers::Streamed {
                    id: id.to_string(),
                    frames,
                    done: d,
                },
                requests,
            );
        }
    }
}
