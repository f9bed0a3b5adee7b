//! Crash safety: SIGKILL the sidecar mid-turn, restart on the same database, find every
//! committed entry, and continue with `resume: true` (the dangling call closed).

use std::path::PathBuf;

use crate::common::{on_db, sigkill};
use crate::support::chat_helpers::*;
use serde_json::json;
use tempfile::TempDir;

/// A database path in a directory of its own and a workspace holding `file` with `text`.
fn db_and_workspace(file: &str, text: &str) -> (TempDir, PathBuf, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("chat.db");
    let w = tempfile::tempdir().unwrap();
    std::fs::write(w.path().join(file), text).unwrap();
    (dir, db, w)
}

#[test]
fn sigkill_mid_tool_then_resume_closes_the_dangling_call() {
    let (_dir, db, w) = db_and_workspace("a.txt", "one\ntwo\n");
    let mut s = on_db(&db);
    if !s
        .ok("tool.list", json!({}))
        .to_string()
        .contains("\"bash\"")
    {
        eprintln!("bash is not registered; using the provider delay variant only");
        return;
    }
    let script = json!([
        {"toolCalls": [{"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": "now waiting", "toolCalls": [{"id": "b1", "name": "bash", "arguments": {"command": "sleep 60"}}]},
    ]);
    let p = merge(
        scripted(script, "read then wait"),
        json!({"cwd": w.path(), "chatId": "chat_crash"}),
    );
    let id = start(&mut s, p);
    // The second round's call message is committed before bash starts; kill while it runs.
    until(&mut s, &id, |f| f["params"]["toolCall"]["id"] == "b1");
    sigkill(&mut s);
    drop(s);

    let mut s = on_db(&db);
    let m = messages(&mut s, "chat_crash");
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"], "{m:?}");
    assert_eq!(m[0]["content"], "read then wait");
    assert_eq!(m[1]["toolCalls"][0]["id"], "r1");
    assert!(
        m[2]["content"]
            .as_str()
            .unwrap()
            .contains("\"success\":true")
    );
    assert_eq!(m[3]["toolCalls"][0]["id"], "b1");
    assert_eq!(m[3]["content"], "now waiting");
    let seqs: Vec<i64> = m.iter().map(|x| x["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");

    // Resume: the record is the transcript; the call is closed; no user message duplicated.
    let p = json!({"provider": "scripted", "model": "m", "script": [{"text": "resumed answer"}],
        "chatId": "chat_crash", "resume": true, "messages": [], "cwd": w.path(),
        "systemPrompt": "You are careful."});
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.text(), "resumed answer");
    let m = messages(&mut s, "chat_crash");
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant"
        ],
        "{m:?}"
    );
    assert_eq!(m[4]["toolCallId"], "b1");
    assert!(m[4]["content"].as_str().unwrap().contains("interrupted"));
    assert_eq!(m[5]["content"], "resumed answer");
    assert_eq!(m.iter().filter(|x| x["role"] == "user").count(), 1);
    // Resume of an unknown record, or with messages, is refused before any request.
    let r = s.call(
        "agent.chat.stream",
        json!({"provider": "scripted", "model": "m", "script": [],
        "chatId": "chat_none", "resume": true, "messages": []}),
    );
    assert_eq!(code(&r), -32602);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no history to resume")
    );
}

#[test]
fn sigkill_while_streaming_keeps_the_user_message() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("chat.db");
    let mut s = on_db(&db);
    let p = merge(
        scripted(
            json!([{"events": [{"text": "partial"}, {"delayMs": 60000}, {"text": "never"}]}]),
            "remember me",
        ),
        json!({"chatId": "chat_crash2"}),
    );
    let id = start(&mut s, p);
    until(&mut s, &id, |f| f["params"]["delta"] == "partial");
    sigkill(&mut s);
    drop(s);
    let mut s = on_db(&db);
    let m = messages(&mut s, "chat_crash2");
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(
        (m[0]["role"].as_str(), m[0]["content"].as_str()),
        (Some("user"), Some("remember me"))
    );
    // Resume answers the recorded question.
    let r = run(
        &mut s,
        json!({"provider": "scripted", "model": "m", "script": [{"text": "answer"}],
        "recordId": "chat_crash2", "resume": true}),
    );
    assert_eq!(r.done["status"], "completed");
    let m = messages(&mut s, "chat_crash2");
    assert_eq!(m.len(), 2);
    assert_eq!(m[1]["content"], "answer");
}

#[test]
fn resume_reseeds_the_file_tools_read_state() {
    let (_dir, db, w) = db_and_workspace("f.txt", "v1\n");
    let mut s = on_db(&db);
    let script = json!([
        {"toolCalls": [{"id": "r1", "name": "read_file", "arguments": {"path": "f.txt"}}]},
        {"events": [{"text": "read it"}, {"delayMs": 60000}]}
    ]);
    let id = start(
        &mut s,
        merge(
            scripted(script, "x"),
            json!({"cwd": w.path(), "chatId": "chat_rs"}),
        ),
    );
    until(&mut s, &id, |f| f["params"]["delta"] == "read it");
    sigkill(&mut s);
    drop(s);
    // After a restart the process has no read state; resume rebuilds it from the record, so
    // an edit of the file read before the crash is allowed without reading it again.
    let mut s = on_db(&db);
    let script = json!([
        {"toolCalls": [{"id": "e1", "name": "edit_file", "arguments": {"path": "f.txt", "edits": [{"oldText": "v1", "newText": "v2"}]}}]},
        {"text": "edited"}
    ]);
    let r = run(
        &mut s,
        json!({"provider": "scripted", "model": "m", "script": script, "chatId": "chat_rs",
        "resume": true, "cwd": w.path()}),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let res = r.with("toolResult");
    assert_eq!(res[0]["success"], true, "{}", res[0]);
    assert_eq!(
        std::fs::read_to_string(w.path().join("f.txt")).unwrap(),
        "v2\n"
    );
}

/// A round's tool results are committed while the next request goes out; when that commit
/// fails, the turn fails with the store's error and nothing of the next answer is shown.
#[test]
fn results_that_cannot_be_committed_fail_the_turn_before_the_next_answer_shows() {
    let (_dir, db, w) = db_and_workspace("a.txt", "one\ntwo\n");
    let mut s = on_db(&db);
    // The store refuses tool results (a full disk would, for every write).
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER no_results BEFORE INSERT ON entries WHEN NEW.kind = 'tool'
         BEGIN SELECT RAISE(ABORT, 'injected: no room for results'); END;",
    )
    .unwrap();
    drop(conn);
    let script = json!([
        {"toolCalls": [{"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": "an answer that must not show"},
    ]);
    let p = merge(
        scripted(script, "read it"),
        json!({"cwd": w.path(), "chatId": "chat_unrecorded"}),
    );
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "failed", "{:?}", r.frames);
    let reason = r.done["reason"].as_str().unwrap();
    assert!(
        reason.contains("cannot write the durable record chat_unrecorded")
            && reason.contains("injected: no room for results"),
        "{reason}"
    );
    assert!(!r.text().contains("must not show"), "{:?}", r.frames);
    // The call is in the record; its result is not, and the process keeps serving.
    let m = messages(&mut s, "chat_unrecorded");
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant"], "{m:?}");
    assert_eq!(m[1]["toolCalls"][0]["id"], "r1");
    s.ok("system.ping", json!({}));
}
