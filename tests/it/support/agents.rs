//! Fixtures shared by the sub-agent tests (`subagents.rs`, `orchestration.rs`): a workspace
//! with a needle to find, chat params on the fake router, and readers of what came back.

use std::path::Path;

use serde_json::{Value, json};

use super::chat_helpers::{Streamed, merge};
use super::fake_router::{self, FakeRouter, RouterReply, RouterRequest};
use crate::common::Sidecar;

pub const DELEGATE: &str = "delegate_subagent";
pub const PARENT_DONE: &str = "PARENT-DONE";
pub const NEEDLE_TASK: &str = "Read notes.txt and report the line with the needle.";
pub const CHILD_ANSWER: &str = "CHILD-ANSWER: the needle is here";

/// A workspace whose notes.txt holds the needle.
pub fn ws() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("notes.txt"),
        "alpha\nthe needle is here\nomega\n",
    )
    .unwrap();
    d
}

/// `agent.chat.stream` params on the fake router (`maxRounds` 8 unless `extra` says).
pub fn chat(server: &FakeRouter, chat_id: &str, user: &str, cwd: &Path, extra: Value) -> Value {
    merge(
        json!({"provider": "openai_compat", "model": "fake-model", "baseUrl": server.base_url(),
               "apiKey": "k", "chatId": chat_id, "cwd": cwd, "maxRounds": 8,
               "messages": [{"role": "user", "content": user}]}),
        extra,
    )
}

pub fn last_role(body: &Value) -> String {
    fake_router::last_message(body)
        .map(|(r, _)| r)
        .unwrap_or_default()
}

/// A child that reads notes.txt, then answers `CHILD_ANSWER`; 7 + 3 tokens per request.
pub fn needle_child(body: &Value) -> RouterReply {
    if last_role(body) == "tool" {
        RouterReply::text(CHILD_ANSWER).usage(7, 3)
    } else {
        RouterReply::tool("read_file", json!({"path": "notes.txt"})).usage(7, 3)
    }
}

/// The parent's requests (first user message `user`).
pub fn parent_requests(server: &FakeRouter, user: &str) -> Vec<RouterRequest> {
    server.requests_for(user)
}

/// The `agent.child` notifications' params, in order.
pub fn child_events(r: &Streamed) -> Vec<Value> {
    r.frames
        .iter()
        .filter(|f| f["method"] == "agent.child")
        .map(|f| f["params"].clone())
        .collect()
}

pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

pub fn has_bash(s: &mut Sidecar) -> bool {
    s.ok("tool.list", json!({}))
        .to_string()
        .contains("\"bash\"")
}
