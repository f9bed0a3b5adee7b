//! Helpers for the chat tests: start a stream, collect its notifications until `stream.done`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::Sidecar;

pub const LONG: Duration = Duration::from_secs(30);

/// One stream's notifications in order, and its done params.
pub struct Streamed {
    pub id: String,
    pub frames: Vec<Value>,
    pub done: Value,
}

impl Streamed {
    pub fn chunks(&self) -> Vec<&Value> {
        self.frames
            .iter()
            .filter(|f| f["method"] == "stream.chunk")
            .map(|f| &f["params"])
            .collect()
    }

    pub fn text(&self) -> String {
        self.chunks()
            .iter()
            .filter_map(|c| c["delta"].as_str())
            .collect()
    }

    pub fn with(&self, key: &str) -> Vec<&Value> {
        self.chunks()
            .into_iter()
            .filter_map(|c| c.get(key))
            .collect()
    }

    pub fn notices(&self, kind: &str) -> Vec<&Value> {
        self.with("notice")
            .into_iter()
            .filter(|n| n["kind"] == kind)
            .collect()
    }

    pub fn errors(&self) -> Vec<&Value> {
        self.frames
            .iter()
            .filter(|f| f["method"] == "stream.error")
            .map(|f| &f["params"])
            .collect()
    }
}

/// A scripted-provider stream's params with a user message.
pub fn scripted(script: Value, user: &str) -> Value {
    json!({"provider": "scripted", "model": "scripted-model", "script": script,
           "messages": [{"role": "user", "content": user}]})
}

pub fn merge(mut base: Value, extra: Value) -> Value {
    if let (Value::Object(b), Value::Object(e)) = (&mut base, extra) {
        b.extend(e);
    }
    base
}

/// Starts a stream and returns its id.
pub fn start(s: &mut Sidecar, params: Value) -> String {
    let r = s.ok("agent.chat.stream", params);
    r["streamId"].as_str().expect("streamId").to_string()
}

/// The next notification of stream `id`.
pub fn next(s: &mut Sidecar, id: &str) -> Value {
    let id = id.to_string();
    s.wait_for(LONG, move |v| {
        v.get("id").is_none() && v["params"]["streamId"] == id.as_str()
    })
}

/// Collects notifications of stream `id` until its `stream.done`.
pub fn finish(s: &mut Sidecar, id: &str, mut frames: Vec<Value>) -> Streamed {
    if let Some(d) = frames.iter().find(|f| f["method"] == "stream.done") {
        let done = d["params"].clone();
        return Streamed {
            id: id.into(),
            frames,
            done,
        };
    }
    loop {
        let f = next(s, id);
        let is_done = f["method"] == "stream.done";
        frames.push(f.clone());
        if is_done {
            return Streamed {
                id: id.into(),
                done: f["params"].clone(),
                frames,
            };
        }
    }
}

/// Runs a whole stream.
pub fn run(s: &mut Sidecar, params: Value) -> Streamed {
    let id = start(s, params);
    finish(s, &id, Vec::new())
}

/// Reads frames of stream `id` until one satisfies `pred`; returns all read so far.
pub fn until(s: &mut Sidecar, id: &str, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut frames = Vec::new();
    loop {
        let f = next(s, id);
        let hit = pred(&f);
        assert!(
            hit || f["method"] != "stream.done",
            "stream ended before the awaited frame: {f}"
        );
        frames.push(f);
        if hit {
            return frames;
        }
    }
}

/// The record's visible messages.
pub fn messages(s: &mut Sidecar, record: &str) -> Vec<Value> {
    s.ok("agent.session.messages", json!({"recordId": record}))["messages"]
        .as_array()
        .unwrap()
        .clone()
}

/// Error code of a failed call.
pub fn code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {r}"))
}
