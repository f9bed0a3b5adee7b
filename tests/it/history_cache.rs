//! A follow-up turn starts from the record's transcript kept in memory when the last turn on
//! the record left it current: what the model is sent must be exactly what reading the
//! record gives (a restarted sidecar, or the cache turned off).

use crate::common::{Opts, Sidecar, on_db};
use crate::support::chat_helpers::*;
use crate::support::fake_openai::{FakeServer, Reply};
use serde_json::{Value, json};

/// Turn 1 (a user message with an image part, a tool call, an answer), then optionally a
/// restart, then turn 2 re-sending the host's history plus a question (or with
/// `fromRecord`, only the question). Returns the messages turn 2 sent the model.
fn second_turn_history(restart: bool, cache_bytes: Option<u64>, from_record: bool) -> Value {
    let server = FakeServer::start(vec![
        Reply::fixture("tool_calls_reference"),
        Reply::fixture("openai_reference"),
        Reply::fixture("openai_reference"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let start = |db: &std::path::Path| match cache_bytes {
        None => on_db(db),
        Some(n) => Sidecar::start_with(Opts {
            args: vec!["--storage-path".into(), db.display().to_string()],
            env: vec![("OUTRIGGER_TRANSCRIPT_CACHE_BYTES".into(), n.to_string())],
            ..Opts::default()
        }),
    };
    let mut s = start(&db);
    let base = json!({"provider": "openai_compat", "model": "fake-model",
        "baseUrl": server.base_url(), "apiKey": "k", "chatId": "chat_hc", "cwd": dir.path()});
    let first_user = json!({"role": "user", "content": "look at this",
        "parts": [{"type": "text", "text": "look at this"},
                  {"type": "image", "url": "https://example.com/a.png"}]});
    let r = run(
        &mut s,
        merge(
            base.clone(),
            json!({"systemPrompt": "be brief", "messages": [first_user]}),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.errors());
    let answer = r.text();
    assert!(!answer.is_empty());
    if restart {
        drop(s);
        s = start(&db);
    }
    let second = if from_record {
        json!({"fromRecord": true, "messages": [{"role": "user", "content": "and then?"}]})
    } else {
        json!({"systemPrompt": "be brief", "messages": [first_user,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "and then?"}]})
    };
    let r = run(&mut s, merge(base, second));
    assert_eq!(r.done["status"], "completed", "{:?}", r.errors());
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3, "turn 1 took two requests, turn 2 one");
    // Turn 3 on the same sidecar still sees everything turn 2 committed.
    let record = messages(&mut s, "chat_hc");
    assert_eq!(record.last().unwrap()["role"], "assistant");
    reqs[2].body["messages"].clone()
}

#[test]
fn a_kept_transcript_sends_what_the_record_would() {
    let kept = second_turn_history(false, None, false);
    let reread = second_turn_history(true, None, false);
    let off = second_turn_history(false, Some(0), false);
    assert_eq!(kept, reread, "kept vs re-read after a restart");
    assert_eq!(kept, off, "kept vs the cache turned off");
    let roles: Vec<&str> = kept
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "user"
        ],
        "{kept}"
    );
    // The record keeps a message's parts: turn 1's image part is re-sent, hit or miss.
    assert_eq!(
        kept[1]["content"],
        json!([
            {"type": "text", "text": "look at this"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
        ]),
        "{kept}"
    );
}

#[test]
fn from_record_turns_start_the_same_from_memory_or_the_store() {
    let kept = second_turn_history(false, None, true);
    let reread = second_turn_history(true, None, true);
    assert_eq!(kept, reread);
    assert_eq!(
        kept.as_array().unwrap().last().unwrap()["content"],
        "and then?"
    );
}
