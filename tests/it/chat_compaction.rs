//! Compaction (manual, pressure, overflow recovery) and spill of oversized tool output.

use crate::common::Sidecar;
use crate::support::chat_helpers::*;
use serde_json::{Value, json};

/// `pairs` user/assistant exchanges of `len`-char messages, then a final user message.
fn history(pairs: usize, len: usize) -> Vec<Value> {
    let mut v = Vec::new();
    for i in 0..pairs {
        v.push(json!({"role": "user", "content": format!("question {i} {}", "q".repeat(len))}));
        v.push(json!({"role": "assistant", "content": format!("answer {i} {}", "a".repeat(len))}));
    }
    v.push(json!({"role": "user", "content": "the current question"}));
    v
}

#[test]
fn manual_compaction_summarizes_with_the_turns_provider() {
    let mut s = Sidecar::start();
    let w = tempfile::tempdir().unwrap();
    std::fs::write(w.path().join("a.txt"), "x\n").unwrap();
    let script = json!([
        {"events": [{"text": "working"}, {"delayMs": 3000},
            {"toolCall": {"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}}}]},
        {"text": "SUMMARY OF EARLIER"},
        {"text": "final"}
    ]);
    let p = json!({"provider": "scripted", "model": "m", "script": script, "chatId": "chat_cmp",
        "cwd": w.path(), "messages": history(5, 20)});
    let id = start(&mut s, p);
    let frames = until(&mut s, &id, |f| f["params"]["delta"] == "working");
    assert_eq!(
        s.ok("agent.chat.compact", json!({"streamId": id})),
        json!({"ok": true})
    );
    let r = finish(&mut s, &id, frames);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(
        r.text(),
        "workingfinal",
        "the summary is not shown to the host"
    );
    let n: Vec<&Value> = r.notices("hook_action");
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(n[0]["action"], "compact");
    assert_eq!(n[0]["hook"], "pre_step");
    assert_eq!(n[0]["compacted"], true);
    assert_eq!(n[0]["summary"], "provider");
    assert!(n[0]["postTokens"].as_u64() < n[0]["preTokens"].as_u64());
    // The visible record restarts at the boundary: head, summary, kept tail, answer.
    let m = messages(&mut s, "chat_cmp");
    assert_eq!(
        m[0]["content"].as_str().unwrap(),
        format!("question 0 {}", "q".repeat(20))
    );
    assert!(
        m[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("[Summary of the earlier conversation]\nSUMMARY OF EARLIER"),
        "{m:?}"
    );
    assert_eq!(m.last().unwrap()["content"], "final");
    assert!(m.len() < 14, "{}", m.len());
    assert!(
        m.iter().any(|x| x["role"] == "tool"),
        "the tool result stays with its call"
    );
    let t = s.ok("trace.fetch", json!({"traceId": r.done["traceId"]}));
    assert_eq!(t["trace"]["spanCount"], 4, "2 rounds + 1 summary + 1 tool");
}

#[test]
fn pressure_compaction_falls_back_to_an_excerpt_summary() {
    let mut s = Sidecar::start();
    let script = json!([
        {"error": {"kind": "http", "status": 400, "message": "summaries not allowed"}},
        {"text": "answered"}
    ]);
    let p = json!({"provider": "scripted", "model": "m", "script": script, "chatId": "chat_pressure",
        "maxContextTokens": 400, "messages": history(8, 300)});
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let n = r.notices("hook_action");
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(n[0]["compacted"], true);
    assert_eq!(n[0]["summary"], "excerpt");
    assert!(
        n[0]["reason"]
            .as_str()
            .unwrap()
            .contains("context pressure")
    );
    let m = messages(&mut s, "chat_pressure");
    assert!(
        m[1]["content"]
            .as_str()
            .unwrap()
            .contains("earlier messages, excerpted"),
        "{m:?}"
    );
    assert_eq!(m.last().unwrap()["content"], "answered");
}

#[test]
fn context_overflow_is_recovered_by_compaction() {
    let mut s = Sidecar::start();
    let script = json!([
        {"error": {"kind": "context_overflow", "message": "too long"}},
        {"text": "short summary"},
        {"text": "recovered"}
    ]);
    let p =
        json!({"provider": "scripted", "model": "m", "script": script, "messages": history(5, 50)});
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let n = r.notices("hook_action");
    assert_eq!(n[0]["action"], "overflow_recovery");
    assert_eq!(n[0]["hook"], "on_request_error");
    assert_eq!(r.text(), "recovered");
}

#[test]
fn oversized_tool_output_is_spilled_to_a_file() {
    let mut s = Sidecar::start();
    let w = tempfile::tempdir().unwrap();
    let line = format!("{}\n", "a".repeat(99));
    std::fs::write(w.path().join("big.txt"), line.repeat(400)).unwrap();
    let script = json!([
        {"toolCalls": [{"id": "big", "name": "read_file", "arguments": {"path": "big.txt"}}]},
        {"text": "that was long"}
    ]);
    let p = merge(
        scripted(script, "x"),
        json!({"cwd": w.path(), "chatId": "chat_spill"}),
    );
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let n = r.notices("hook_action");
    assert_eq!(n[0]["action"], "spill", "{n:?}");
    let path = n[0]["path"].as_str().unwrap().to_string();
    let spilled = std::fs::read_to_string(&path).unwrap();
    assert!(spilled.matches('a').count() >= 39_600);
    let m = messages(&mut s, "chat_spill");
    let tool = m.iter().find(|x| x["role"] == "tool").unwrap();
    let content = tool["content"].as_str().unwrap();
    assert!(content.contains("spilled to") && content.contains(&path));
    assert!(content.len() < 4000, "{}", content.len());
}

/// One turn of `chat_resend` with the host's whole history, a window it fits and one
/// scripted answer; it must complete.
fn resend(s: &mut Sidecar, messages: &[Value], answer: &str) -> Streamed {
    let p = json!({"provider": "scripted", "model": "m", "script": [{"text": answer}],
        "chatId": "chat_resend", "maxContextTokens": 100000, "messages": messages});
    let r = run(s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    r
}

/// A host that re-sends its whole history every turn keeps doing so after the record was
/// compacted: its messages are matched against everything it has seen, so the next turn
/// appends only what is new to the compacted transcript. No re-seed, no second summary.
#[test]
fn a_host_resending_its_history_after_a_compaction_does_not_compact_again() {
    let mut s = Sidecar::start();
    let first = history(8, 300);
    let script = json!([{"text": "SUMMARY OF EARLIER"}, {"text": "answered"}]);
    let p = json!({"provider": "scripted", "model": "m", "script": script, "chatId": "chat_resend",
        "maxContextTokens": 400, "messages": first});
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.notices("hook_action").len(), 1, "the first turn compacts");
    let compacted = messages(&mut s, "chat_resend");
    assert!(compacted.len() < 17, "{compacted:?}");

    // The host's own view: everything it sent, the answer it was shown, a new question.
    let mut again = history(8, 300);
    again.push(json!({"role": "assistant", "content": "answered"}));
    again.push(json!({"role": "user", "content": "and the next question"}));
    let r = resend(&mut s, &again, "second answer");
    assert!(r.notices("hook_action").is_empty(), "{:?}", r.frames);
    let m = messages(&mut s, "chat_resend");
    // The compacted transcript, then only the new question and the answer.
    assert_eq!(m.len(), compacted.len() + 2, "{m:?}");
    assert_eq!(m[..compacted.len()], compacted[..]);
    assert_eq!(m[m.len() - 2]["content"], "and the next question");
    assert_eq!(m[m.len() - 1]["content"], "second answer");

    // Again (what the host has seen is now kept in memory from the last turn).
    again.push(json!({"role": "assistant", "content": "second answer"}));
    again.push(json!({"role": "user", "content": "a third question"}));
    let r = resend(&mut s, &again, "third answer");
    assert!(r.notices("hook_action").is_empty(), "{:?}", r.frames);
    let m = messages(&mut s, "chat_resend");
    assert_eq!(m.len(), compacted.len() + 4, "{m:?}");
    assert_eq!(m[m.len() - 2]["content"], "a third question");

    // A host that changed an old message still gets its history as sent (a re-seed).
    let mut edited = again.clone();
    edited[0] = json!({"role": "user", "content": "an edited first question"});
    edited.push(json!({"role": "assistant", "content": "third answer"}));
    edited.push(json!({"role": "user", "content": "third"}));
    resend(&mut s, &edited, "fourth answer");
    let m = messages(&mut s, "chat_resend");
    assert_eq!(m[0]["content"], "an edited first question");
    assert_eq!(m.len(), edited.len() + 1, "{m:?}");
}
