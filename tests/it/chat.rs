//! `agent.chat.stream` over the real binary's pipes: scripted and fake-OpenAI providers,
//! real file and bash tools, every terminal status, content modes, traces, steer and fork.

use crate::common::Sidecar;
use crate::support::chat_helpers::*;
use crate::support::fake_openai::{FakeServer, Reply};
use serde_json::{Value, json};

fn ws() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("notes.txt"),
        "alpha\nthe needle is here\nomega\n",
    )
    .unwrap();
    std::fs::create_dir(d.path().join("src")).unwrap();
    std::fs::write(d.path().join("src/lib.rs"), "fn needle() {}\n").unwrap();
    d
}

#[test]
fn plain_text_turn_streams_deltas_records_and_reports_usage() {
    let mut s = Sidecar::start();
    let p = merge(
        scripted(
            json!([{"text": ["Hel", "lo"], "usage": {"promptTokens": 12, "completionTokens": 2, "cachedPromptTokens": 4}}]),
            "hi",
        ),
        json!({"chatId": "chat_plain", "useCoreLoop": false}),
    );
    let r = run(&mut s, p);
    assert!(r.id.starts_with("str_") && r.id.len() == 36, "{}", r.id);
    assert_eq!(r.text(), "Hello");
    let d = &r.done;
    assert_eq!(d["ok"], true);
    assert_eq!(d["status"], "completed");
    assert_eq!(
        d["reason"],
        "assistant produced final response with no pending tools"
    );
    assert!(d["traceId"].as_str().unwrap().starts_with("trace_"));
    assert_eq!(d["traceId"].as_str().unwrap().len(), 6 + 32);
    assert_eq!(d["usage"]["promptTokens"], 12);
    assert_eq!(d["usage"]["completionTokens"], 2);
    assert_eq!(d["usage"]["totalTokens"], 14);
    assert_eq!(d["usage"]["cachedPromptTokens"], 4);
    assert!(d.get("cancelled").is_none());
    let m = messages(&mut s, "chat_plain");
    assert_eq!(m.len(), 2, "{m:?}");
    assert_eq!(
        (m[0]["role"].as_str(), m[0]["content"].as_str()),
        (Some("user"), Some("hi"))
    );
    assert_eq!(
        (m[1]["role"].as_str(), m[1]["content"].as_str()),
        (Some("assistant"), Some("Hello"))
    );
    // A second turn with the host's full history appends only the delta.
    let p2 = json!({"provider": "scripted", "model": "m", "chatId": "chat_plain",
        "script": [{"text": "again"}],
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"},
                     {"role": "user", "content": "more"}]});
    assert_eq!(run(&mut s, p2).done["status"], "completed");
    let m = messages(&mut s, "chat_plain");
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(m[3]["content"], "again");
}

#[test]
fn multi_round_tool_turn_with_real_file_tools_and_bash() {
    let mut s = Sidecar::start();
    let w = ws();
    let tools = s.ok("tool.list", json!({}));
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        names.contains(&"read_file") && names.contains(&"grep"),
        "{names:?}"
    );
    let has_bash = names.contains(&"bash");
    let mut round2 = vec![json!({"id": "g1", "name": "grep", "arguments": {"pattern": "needle"}})];
    if has_bash {
        round2.push(
            json!({"id": "b1", "name": "bash", "arguments": {"command": "wc -l < notes.txt"}}),
        );
    }
    let script = json!([
        {"text": "Let me look. ", "toolCalls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"toolCalls": round2},
        {"text": ["The needle ", "is in notes.txt."]}
    ]);
    let p = merge(
        scripted(script, "where is the needle?"),
        json!({"cwd": w.path(), "chatId": "chat_tools"}),
    );
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let calls = r.with("toolCall");
    assert_eq!(calls[0]["name"], "read_file");
    assert_eq!(calls[0]["arguments"]["path"], "notes.txt");
    let results = r.with("toolResult");
    assert_eq!(results.len(), if has_bash { 3 } else { 2 });
    assert_eq!(results[0]["id"], "r1");
    assert_eq!(results[0]["success"], true, "{}", results[0]);
    assert!(
        results[0]["resultPreview"]
            .as_str()
            .unwrap()
            .contains("needle")
    );
    assert!(results[0]["durationMs"].is_u64());
    assert_eq!(results[1]["name"], "grep");
    assert!(
        results[1]["resultPreview"]
            .as_str()
            .unwrap()
            .contains("notes.txt"),
        "{}",
        results[1]
    );
    if has_bash {
        let b = results[2];
        assert_eq!(b["success"], true, "{b}");
        assert!(b["resultPreview"].as_str().unwrap().contains('3'), "{b}");
        assert!(b["sandbox"]["backend"].is_string(), "{b}");
    }
    let ends = r.notices("round_end");
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[0]["round"], 0);
    assert_eq!(ends[1]["status"], "executing");
    assert_eq!(r.text(), "Let me look. The needle is in notes.txt.");
    // Order: the round's tool call, its result, then round_end.
    let kinds: Vec<&str> = r
        .chunks()
        .iter()
        .map(|c| {
            ["delta", "toolCall", "toolResult", "notice"]
                .into_iter()
                .find(|k| c.get(*k).is_some())
                .unwrap_or("?")
        })
        .collect();
    assert_eq!(
        &kinds[..4],
        ["delta", "toolCall", "toolResult", "notice"],
        "{kinds:?}"
    );
    // The record holds every message with tool calls and results.
    let m = messages(&mut s, "chat_tools");
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    let mut want = vec!["user", "assistant", "tool", "assistant", "tool"];
    if has_bash {
        want.push("tool");
    }
    want.push("assistant");
    assert_eq!(roles, want);
    assert_eq!(m[1]["toolCalls"][0]["name"], "read_file");
    assert_eq!(m[2]["toolCallId"], "r1");
}

#[test]
fn invalid_params_fail_before_any_provider_request() {
    let server = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let mut s = Sidecar::start();
    let base = json!({"provider": "openai_compat", "model": "fake-model", "baseUrl": server.base_url(), "apiKey": "k"});
    let cases = [
        json!({"messages": [{"role": "wizard", "content": "x"}]}),
        json!({"systemPrompt": "a", "messages": [{"role": "system", "content": "b"}, {"role": "user", "content": "c"}]}),
        json!({"contentMode": "partial", "messages": [{"role": "user", "content": "c"}]}),
        json!({"resume": true, "chatId": "x", "messages": [{"role": "user", "content": "c"}]}),
        json!({"resume": true, "messages": []}),
        json!({"resume": true, "chatId": "never_written", "messages": []}),
        json!({"messages": []}),
        json!({"toolTimeoutMs": 0, "messages": [{"role": "user", "content": "c"}]}),
        json!({"maxRounds": 100000, "messages": [{"role": "user", "content": "c"}]}),
        json!({"mcp": [{"command": ""}], "messages": [{"role": "user", "content": "c"}]}),
        json!({"mcp": [{"name": "a", "command": "x"}, {"name": "a", "command": "y"}], "messages": [{"role": "user", "content": "c"}]}),
        json!({"reasoningEffort": "low", "messages": [{"role": "user", "content": "c"}]}),
    ];
    for c in cases {
        let r = s.call("agent.chat.stream", merge(base.clone(), c.clone()));
        assert_eq!(code(&r), -32602, "{c} → {r}");
    }
    let r = s.call(
        "agent.chat.stream",
        json!({"provider": "nope", "model": "m", "messages": []}),
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("failed to construct LLM provider"),
        "{r}"
    );
    assert!(server.requests().is_empty(), "a provider request was made");
}

#[test]
fn fake_openai_turn_and_500s_retried_then_failed() {
    let server = FakeServer::start(vec![Reply::status(500, "{\"error\":\"boom\"}")]);
    let mut s = Sidecar::start();
    let p = json!({"provider": "openai_compat", "model": "fake-model", "baseUrl": server.base_url(),
        "apiKey": "k", "messages": [{"role": "user", "content": "hi"}]});
    let r = run(&mut s, p);
    let retries: Vec<&Value> = r
        .notices("hook_action")
        .into_iter()
        .filter(|n| n["hook"] == "on_request_error" && n["action"] == "retry")
        .collect();
    assert_eq!(retries.len(), 2, "{:?}", r.frames);
    assert!(retries[0]["delayMs"].is_u64());
    assert_eq!(r.errors().len(), 1);
    assert_eq!(r.errors()[0]["kind"], "LoopError");
    assert_eq!(r.done["status"], "failed");
    assert_eq!(r.done["ok"], false);
    assert_eq!(server.requests().len(), 3);
    // stream.error comes before done.
    let last_two: Vec<&str> = r.frames[r.frames.len() - 2..]
        .iter()
        .map(|f| f["method"].as_str().unwrap())
        .collect();
    assert_eq!(last_two, ["stream.error", "stream.done"]);

    let ok = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let p = json!({"provider": "openai_compat", "model": "fake-model", "baseUrl": ok.base_url(),
        "apiKey": "k", "messages": [{"role": "user", "content": "hi"}]});
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert!(!r.text().is_empty());
    let req = &ok.requests()[0];
    assert_eq!(req.body["stream"], true);
    assert!(
        req.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "read_file")
    );
}

#[test]
fn max_rounds_allows_exactly_n_requests() {
    let server = FakeServer::start(vec![Reply::fixture("tool_calls_reference")]);
    let mut s = Sidecar::start();
    let w = ws();
    let p = json!({"provider": "openai_compat", "model": "fake-model", "baseUrl": server.base_url(),
        "apiKey": "k", "maxRounds": 3, "cwd": w.path(), "messages": [{"role": "user", "content": "loop"}]});
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "budget_exhausted", "{:?}", r.frames);
    assert_eq!(r.done["reason"], "reached maxRounds=3 runaway guard");
    let n = r.notices("budget_exhausted");
    assert_eq!(n[0]["budget"], "rounds");
    assert_eq!(n[0]["rounds"], 3);
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn breaker_unknown_tools_token_budget_and_empty_answer() {
    let mut s = Sidecar::start();
    // Unknown tools are recoverable, until the consecutive-error breaker trips.
    let bad = json!({"toolCalls": [{"name": "get_stats", "arguments": {}}]});
    let p = merge(
        scripted(json!([bad, bad, bad]), "x"),
        json!({"maxToolErrors": 2}),
    );
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "failed");
    assert!(
        r.done["reason"]
            .as_str()
            .unwrap()
            .contains("too many consecutive tool errors")
    );
    let res = r.with("toolResult");
    assert_eq!(res.len(), 2);
    assert!(
        res[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("Unknown tool: get_stats."),
        "{}",
        res[0]
    );
    assert_eq!(r.errors()[0]["kind"], "LoopError");
    // One unknown tool, then an answer: the loop continues.
    let p = scripted(json!([bad, {"text": "done"}]), "x");
    assert_eq!(run(&mut s, p).done["status"], "completed");
    // Token budget: strictly greater than the limit ends the turn.
    let p = merge(
        scripted(
            json!([{"text": "big", "usage": {"promptTokens": 40, "completionTokens": 11}}]),
            "x",
        ),
        json!({"budgetTokens": 50}),
    );
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "budget_exhausted");
    assert_eq!(r.done["reason"], "token budget exceeded");
    assert_eq!(r.notices("budget_exhausted")[0]["budget"], "tokens");
    // An empty answer fails.
    let r = run(&mut s, scripted(json!([{"text": ""}]), "x"));
    assert_eq!(r.done["status"], "failed");
    assert_eq!(r.done["reason"], "no tool calls and no final response");
}

#[test]
fn content_mode_final_and_raw_chunks() {
    let mut s = Sidecar::start();
    let w = ws();
    let script = json!([
        {"text": ["narrating ", "the tool round"], "toolCalls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": ["final ", "answer"]}
    ]);
    let p = merge(
        scripted(script.clone(), "x"),
        json!({"contentMode": "final", "cwd": w.path()}),
    );
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed");
    let deltas = r.with("delta");
    assert_eq!(deltas, [&json!("final answer")]);
    assert_eq!(r.with("toolResult").len(), 1);
    assert_eq!(r.notices("round_end").len(), 1);
    // Raw chunks: every provider chunk, as well as the digested deltas.
    let p = merge(
        scripted(script, "x"),
        json!({"streamRawChunks": true, "cwd": w.path()}),
    );
    let r = run(&mut s, p);
    let raw = r.with("rawChunk");
    let raw_text: String = raw
        .iter()
        .filter_map(|c| c["contentDelta"].as_str())
        .collect();
    assert_eq!(raw_text, "narrating the tool roundfinal answer");
    assert!(
        raw.iter()
            .any(|c| c["toolCallDelta"]["name"] == "read_file")
    );
    assert!(raw.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(r.text(), "narrating the tool roundfinal answer");
    // Without the flag, no raw chunks.
    let r = run(&mut s, scripted(json!([{"text": "x"}]), "x"));
    assert!(r.with("rawChunk").is_empty());
}

#[test]
fn tool_timeout_is_a_failed_result_and_the_turn_continues() {
    let mut s = Sidecar::start();
    let w = ws();
    let names = s.ok("tool.list", json!({})).to_string();
    if !names.contains("\"bash\"") {
        eprintln!("bash is not registered; tool timeout not covered here");
        return;
    }
    let script = json!([
        {"toolCalls": [{"id": "slow", "name": "bash", "arguments": {"command": "sleep 30"}}]},
        {"text": "gave up waiting"}
    ]);
    let p = merge(
        scripted(script, "x"),
        json!({"toolTimeoutMs": 300, "cwd": w.path()}),
    );
    let started = std::time::Instant::now();
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let res = r.with("toolResult");
    assert_eq!(res[0]["success"], false);
    assert_eq!(res[0]["error"], "tool_timeout");
    assert!(
        res[0]["resultPreview"]
            .as_str()
            .unwrap()
            .contains("\"timeout\":true"),
        "{}",
        res[0]
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(25));
}

#[test]
fn trace_has_spans_and_events_and_ping_counts_active() {
    let mut s = Sidecar::start();
    let w = ws();
    let script = json!([
        {"toolCalls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "ok"}
    ]);
    let r = run(
        &mut s,
        merge(
            scripted(script, "x"),
            json!({"cwd": w.path(), "chatId": "chat_tr"}),
        ),
    );
    let t = s.ok("trace.fetch", json!({"traceId": r.done["traceId"]}));
    assert_eq!(t["trace"]["status"], "completed");
    assert_eq!(t["trace"]["spanCount"], 3);
    assert_eq!(t["trace"]["hadError"], false);
    let names: Vec<&str> = t["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.iter().filter(|n| **n == "llm.request").count(), 2);
    assert!(names.contains(&"read_file"));
    assert_eq!(t["spans"][0]["spanId"], "span_0001");
    let kinds: Vec<&str> = t["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    for k in [
        "llm_request",
        "llm_response",
        "tool_call_start",
        "tool_call_result",
        "completion",
    ] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let seqs: Vec<u64> = t["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    let r = s.call("trace.fetch", json!({"traceId": "trace_nope"}));
    assert_eq!(code(&r), -32004);
    // A live stream counts as an active trace.
    let id = start(
        &mut s,
        scripted(json!([{"delayMs": 60000, "text": "late"}]), "x"),
    );
    assert_eq!(s.ok("system.ping", json!({}))["activeTraces"], 1);
    s.ok("agent.chat.cancel", json!({"streamId": id}));
    assert_eq!(finish(&mut s, &id, vec![]).done["status"], "cancelled");
    assert_eq!(s.ok("system.ping", json!({}))["activeTraces"], 0);
}

#[test]
fn steer_boundary_reaches_the_next_request() {
    let mut s = Sidecar::start();
    let w = ws();
    let script = json!([
        {"events": [{"text": "working"}, {"delayMs": 3000},
            {"toolCall": {"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}}]},
        {"text": "steered answer"}
    ]);
    let id = start(
        &mut s,
        merge(
            scripted(script, "x"),
            json!({"cwd": w.path(), "chatId": "chat_steer"}),
        ),
    );
    // The first delta proves the round is streaming (its steer drain is behind it).
    let frames = until(&mut s, &id, |f| f["params"]["delta"] == "working");
    let a = s.ok(
        "agent.chat.steer",
        json!({"streamId": id, "content": "focus on omega"}),
    );
    assert_eq!(a, json!({"accepted": true}));
    let r = finish(&mut s, &id, frames);
    assert_eq!(r.done["status"], "completed");
    let kinds: Vec<String> = r
        .with("notice")
        .iter()
        .map(|n| n["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["round_end", "steer"]);
    assert_eq!(r.notices("steer")[0]["content"], "focus on omega");
    let m = messages(&mut s, "chat_steer");
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user", "assistant"]);
    assert_eq!(m[1]["content"], "working");
    assert_eq!(m[3]["content"], "focus on omega");
    // Finished or unknown streams refuse; blank content is an error.
    let a = s.ok(
        "agent.chat.steer",
        json!({"streamId": id, "content": "late"}),
    );
    assert_eq!(a, json!({"accepted": false, "reason": "stream_not_active"}));
    let r = s.call("agent.chat.steer", json!({"streamId": id, "content": "  "}));
    assert_eq!(code(&r), -32602);
    assert_eq!(
        s.ok("agent.chat.compact", json!({"streamId": "str_x"})),
        json!({"ok": false, "reason": "stream_not_active"})
    );
}

#[test]
fn steer_interrupt_stops_the_running_tool() {
    let mut s = Sidecar::start();
    let w = ws();
    if !s
        .ok("tool.list", json!({}))
        .to_string()
        .contains("\"bash\"")
    {
        eprintln!("bash is not registered; interrupt steer not covered here");
        return;
    }
    let script = json!([
        {"toolCalls": [{"id": "long", "name": "bash", "arguments": {"command": "sleep 40"}},
                        {"id": "after", "name": "bash", "arguments": {"command": "echo never"}}]},
        {"text": "switched"}
    ]);
    let p = merge(
        scripted(script, "x"),
        json!({"cwd": w.path(), "steerMode": "interrupt", "toolTimeoutMs": 60000}),
    );
    let id = start(&mut s, p);
    let mut frames = until(&mut s, &id, |f| f["params"]["toolCall"]["id"] == "after");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let started = std::time::Instant::now();
    assert_eq!(
        s.ok(
            "agent.chat.steer",
            json!({"streamId": id, "content": "stop that"})
        )["accepted"],
        true
    );
    frames.extend(until(&mut s, &id, |f| f["method"] == "stream.done"));
    let r = finish(&mut s, &id, frames);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let res = r.with("toolResult");
    assert_eq!(
        res[0]["error"], "interrupted by a steer message",
        "{}",
        res[0]
    );
    assert_eq!(res[1]["success"], false);
    assert!(res[1]["error"].as_str().unwrap().contains("not executed"));
    assert_eq!(r.notices("steer")[0]["content"], "stop that");
    assert_eq!(r.text(), "switched");
}

#[test]
fn fork_runs_a_turn_on_a_new_branch() {
    let mut s = Sidecar::start();
    let r = run(
        &mut s,
        merge(
            scripted(
                json!([{"text": "first answer"}]),
                "What is the   root question?",
            ),
            json!({"chatId": "chat_fk"}),
        ),
    );
    assert_eq!(r.done["status"], "completed");
    let f = s.ok(
        "agent.chat.fork",
        json!({"provider": "scripted", "model": "m", "script": [{"text": "branch answer"}], "recordId": "chat_fk",
               "messages": [{"role": "user", "content": "And a follow-up?"}]}),
    );
    let id = f["streamId"].as_str().unwrap().to_string();
    assert_eq!(f["seedMessages"], 3);
    let fork_id = format!("chat_fk:fork:{id}");
    assert_eq!(f["recordId"], fork_id);
    let r = finish(&mut s, &id, vec![]);
    assert_eq!(r.done["status"], "completed");
    assert_eq!(r.done["recordId"], fork_id);
    let m = messages(&mut s, &fork_id);
    let contents: Vec<&str> = m.iter().map(|x| x["content"].as_str().unwrap()).collect();
    assert_eq!(
        contents,
        [
            "What is the   root question?",
            "first answer",
            "And a follow-up?",
            "branch answer"
        ]
    );
    // The source is untouched; the tree shows the branch with its label.
    assert_eq!(messages(&mut s, "chat_fk").len(), 2);
    let t = s.ok("agent.session.tree", json!({"recordId": fork_id}));
    assert_eq!(t["recordId"], fork_id);
    assert_eq!(t["nodeCount"], 2);
    assert_eq!(t["tree"]["recordId"], "chat_fk");
    assert_eq!(t["tree"]["label"], "root");
    assert_eq!(t["tree"]["children"][0]["recordId"], fork_id);
    assert_eq!(
        t["tree"]["children"][0]["label"],
        "What is the root question?"
    );
    let b = s.ok("agent.session.branches", json!({"recordId": fork_id}));
    assert_eq!(b["lineage"].as_array().unwrap().len(), 2);
    // Unknown record → -32004; traceId forks are refused.
    let r = s.call(
        "agent.chat.fork",
        json!({"provider": "scripted", "model": "m", "script": [], "recordId": "nope"}),
    );
    assert_eq!(code(&r), -32004, "{r}");
    let r = s.call("agent.chat.fork", json!({"provider": "scripted", "model": "m", "script": [], "recordId": "chat_fk", "traceId": "trace_x"}));
    assert_eq!(code(&r), -32602);
}

#[test]
fn soft_timeout_wraps_up_without_tools() {
    let mut s = Sidecar::start();
    let w = ws();
    let slow_call = json!({"delayMs": 1500, "toolCalls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]});
    let p = merge(
        scripted(json!([slow_call, {"text": "wrapped up"}]), "take your time"),
        json!({"softTimeoutMs": 1000, "cwd": w.path(), "chatId": "chat_soft"}),
    );
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let n = r.notices("soft_timeout");
    assert_eq!(n.len(), 1, "{:?}", r.frames);
    assert_eq!(n[0]["round"], 1);
    // The wrap-up instruction is part of the transcript the last request saw.
    let m = messages(&mut s, "chat_soft");
    let contents: Vec<&str> = m.iter().map(|x| x["content"].as_str().unwrap()).collect();
    assert!(contents[3].starts_with("Time is up"), "{contents:?}");
    assert_eq!(contents[4], "wrapped up");
    // A wrap-up round that still calls tools ends the turn without running them.
    let p = merge(
        scripted(json!([slow_call, slow_call]), "x"),
        json!({"softTimeoutMs": 1000, "cwd": w.path()}),
    );
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "budget_exhausted");
    let res = r.with("toolResult");
    assert_eq!(res.len(), 2);
    assert!(res[1]["error"].as_str().unwrap().contains("not executed"));
}

#[test]
fn second_request_replays_calls_and_results_and_strategies_pick_tools() {
    let server = FakeServer::start(vec![
        Reply::fixture("tool_calls_reference"),
        Reply::fixture("openai_reference"),
    ]);
    let mut s = Sidecar::start();
    let w = ws();
    let p = json!({"provider": "openai_compat", "model": "fake-model", "baseUrl": server.base_url(),
        "apiKey": "k", "cwd": w.path(), "toolsStrategy": "minimal",
        "messages": [{"role": "user", "content": "go"}]});
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let offered: Vec<&str> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(!offered.is_empty());
    assert!(
        offered
            .iter()
            .all(|n| ["bash", "read_file", "write_file", "edit_file"].contains(n)),
        "{offered:?}"
    );
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let assistant = msgs.iter().find(|m| m["role"] == "assistant").unwrap();
    let call = &assistant["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert!(call["function"]["arguments"].is_string());
    let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], call["id"]);
    let content: Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert!(content.get("success").is_some(), "{content}");
}

#[test]
fn one_live_turn_per_record_and_per_stream_id() {
    let mut s = Sidecar::start();
    let slow = merge(
        scripted(json!([{"delayMs": 60000, "text": "late"}]), "x"),
        json!({"chatId": "chat_busy", "streamId": "str_mine"}),
    );
    let id = start(&mut s, slow.clone());
    assert_eq!(id, "str_mine");
    let r = s.call(
        "agent.chat.stream",
        merge(slow, json!({"streamId": "str_other"})),
    );
    assert_eq!(code(&r), -32602);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already has a running turn"),
        "{r}"
    );
    let r = s.call(
        "agent.chat.stream",
        merge(
            scripted(json!([{"text": "x"}]), "x"),
            json!({"streamId": "str_mine"}),
        ),
    );
    assert_eq!(code(&r), -32602);
    s.ok("agent.chat.cancel", json!({"streamId": id}));
    assert_eq!(finish(&mut s, &id, vec![]).done["status"], "cancelled");
    // The record is free again: a new turn on it runs.
    let r = run(
        &mut s,
        merge(
            scripted(json!([{"text": "free"}]), "y"),
            json!({"chatId": "chat_busy"}),
        ),
    );
    assert_eq!(r.done["status"], "completed");
}

#[test]
fn interrupt_steer_during_streaming_skips_the_calls_it_preempts() {
    let mut s = Sidecar::start();
    let w = ws();
    let script = json!([
        {"events": [{"text": "planning"}, {"delayMs": 3000},
            {"toolCall": {"id": "w1", "name": "write_file", "arguments": {"path": "out.txt", "content": "x"}}}]},
        {"text": "changed course"}
    ]);
    let p = merge(
        scripted(script, "x"),
        json!({"cwd": w.path(), "steerMode": "interrupt"}),
    );
    let id = start(&mut s, p);
    let frames = until(&mut s, &id, |f| f["params"]["delta"] == "planning");
    assert_eq!(
        s.ok(
            "agent.chat.steer",
            json!({"streamId": id, "content": "do not write"})
        )["accepted"],
        true
    );
    let r = finish(&mut s, &id, frames);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let res = r.with("toolResult");
    assert_eq!(res.len(), 1);
    assert!(
        res[0]["error"]
            .as_str()
            .unwrap()
            .contains("skipped by a steer message"),
        "{}",
        res[0]
    );
    assert!(!w.path().join("out.txt").exists());
    assert_eq!(r.notices("steer")[0]["content"], "do not write");
    assert_eq!(r.text(), "planningchanged course");
}

#[test]
fn host_history_reconciliation_visible_view_and_revision() {
    let mut s = Sidecar::start();
    let w = ws();
    // Turn 1 calls a tool, so the record holds tool messages the host never shows.
    let p1 = json!({"provider": "scripted", "model": "m", "chatId": "chat_rec", "cwd": w.path(),
        "script": [
            {"toolCalls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
            {"text": "It says alpha."}
        ],
        "messages": [{"role": "user", "content": "read notes"}]});
    assert_eq!(run(&mut s, p1).done["status"], "completed");
    let before = messages(&mut s, "chat_rec");
    assert!(before.iter().any(|m| m["role"] == "tool"), "{before:?}");

    // Turn 2: the host's view (no tool messages) plus a new question → only the delta is
    // appended; the tool messages stay.
    let p2 = json!({"provider": "scripted", "model": "m", "chatId": "chat_rec", "cwd": w.path(),
        "script": [{"text": "Yes."}],
        "messages": [{"role": "user", "content": "read notes"},
                     {"role": "assistant", "content": "It says alpha."},
                     {"role": "user", "content": "sure?"}]});
    assert_eq!(run(&mut s, p2).done["status"], "completed");
    let after = messages(&mut s, "chat_rec");
    assert_eq!(after.len(), before.len() + 2, "{after:?}");
    assert!(after.iter().any(|m| m["role"] == "tool"));
    assert_eq!(after.last().unwrap()["content"], "Yes.");

    // Turn 3: a history that diverges (the host edited its first message) → a host-revision
    // boundary and a re-seed: the visible span is the host's messages plus the new answer.
    let p3 = json!({"provider": "scripted", "model": "m", "chatId": "chat_rec",
        "script": [{"text": "Fresh start."}],
        "messages": [{"role": "user", "content": "something else entirely"}]});
    assert_eq!(run(&mut s, p3).done["status"], "completed");
    let revised = messages(&mut s, "chat_rec");
    let pairs: Vec<(&str, &str)> = revised
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("user", "something else entirely"),
            ("assistant", "Fresh start.")
        ],
        "{revised:?}"
    );
}

#[test]
fn reasoning_effort_is_strict_unless_compat_forbids_the_field() {
    let server = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let mut s = Sidecar::start();
    let base = json!({"provider": "openai_compat", "baseUrl": server.base_url(), "apiKey": "k",
        "messages": [{"role": "user", "content": "c"}]});
    // A misspelled level on a model with the knob names the levels it accepts.
    let r = s.call(
        "agent.chat.stream",
        merge(
            base.clone(),
            json!({"model": "gpt-oss-120b", "reasoningEffort": "hgih"}),
        ),
    );
    assert_eq!(code(&r), -32602, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains("low, medium, high"), "{msg}");
    // A model without the knob is refused...
    let r = s.call(
        "agent.chat.stream",
        merge(
            base.clone(),
            json!({"model": "gpt-4o", "reasoningEffort": "low"}),
        ),
    );
    assert_eq!(code(&r), -32602, "{r}");
    assert!(server.requests().is_empty());
    // ...unless the vendor's compat flags forbid the field: then it is dropped silently.
    let p = merge(
        base,
        json!({"model": "gpt-4o", "reasoningEffort": "low", "compat": {"supportsReasoningEffort": false}}),
    );
    assert_eq!(run(&mut s, p).done["status"], "completed");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert!(
        reqs[0].body.get("reasoning_effort").is_none(),
        "{}",
        reqs[0].body
    );
}

#[test]
fn display_deltas_strip_pseudo_tool_markup_that_raw_chunks_keep() {
    let mut s = Sidecar::start();
    let text = [
        "Sure. <function_res",
        "ults>{\"x\": 1}</function_results>",
        "Done <tool_call>{\"name\":\"x\"}</tool",
        "_call>here.",
    ];
    let p = merge(
        scripted(json!([{"text": text}]), "hi"),
        json!({"streamRawChunks": true, "recordId": "rec_strip"}),
    );
    let st = run(&mut s, p);
    assert_eq!(st.done["status"], "completed");
    assert_eq!(st.text(), "Sure. Done here.");
    let raw: String = st
        .with("rawChunk")
        .iter()
        .filter_map(|r| r["contentDelta"].as_str())
        .collect();
    assert_eq!(raw, text.concat());
    // The record keeps what the model wrote.
    let msgs = messages(&mut s, "rec_strip");
    assert_eq!(msgs.last().unwrap()["content"], text.concat());
}

#[test]
fn from_record_continues_a_chat_with_only_the_new_message() {
    let server = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let mut s = Sidecar::start();
    let turn = |content: &str, extra: Value| {
        merge(
            json!({"provider": "openai_compat", "model": "gpt-4o-mini", "baseUrl": server.base_url(),
                   "apiKey": "k", "recordId": "rec_follow",
                   "messages": [{"role": "user", "content": content}]}),
            extra,
        )
    };
    let first = run(&mut s, turn("first question", json!({})));
    assert_eq!(first.done["status"], "completed");
    let second = run(&mut s, turn("second question", json!({"fromRecord": true})));
    assert_eq!(second.done["status"], "completed", "{:?}", second.done);
    // The model saw the whole conversation, and only the new message was sent.
    let reqs = server.requests();
    let sent: Vec<(String, String)> = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let answer = first.text();
    assert_eq!(
        sent,
        [
            ("user".to_string(), "first question".to_string()),
            ("assistant".to_string(), answer.clone()),
            ("user".to_string(), "second question".to_string()),
        ]
    );
    // The record holds both turns, in order, with no re-seed.
    let msgs = messages(&mut s, "rec_follow");
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    // fromRecord on a record that does not exist, or with resume, is refused.
    let r = s.call(
        "agent.chat.stream",
        merge(
            turn("x", json!({"fromRecord": true})),
            json!({"recordId": "rec_none"}),
        ),
    );
    assert_eq!(code(&r), -32004, "{r}");
    let r = s.call(
        "agent.chat.stream",
        merge(
            turn("x", json!({"fromRecord": true, "resume": true})),
            json!({"messages": []}),
        ),
    );
    assert_eq!(code(&r), -32602, "{r}");
}
