//! The native providers (Anthropic Messages, OpenAI Responses, Google Gemini) over the real
//! binary's pipes, each against a loopback fake vendor that streams the vendor's own SSE
//! (written here from the vendors' documented stream shapes) and records every request:
//! whole CoreLoop turns with the real `read_file` tool, the tool result and the assistant's
//! call sent back in the vendor's shape, auth headers and missing keys, vendor state echoed
//! verbatim (Anthropic thinking signatures, Responses encrypted reasoning, Gemini thought
//! signatures), Anthropic prompt-cache breakpoints and a byte-stable prefix, usage with
//! cache tokens, in-stream errors, retries, overflow recovery, and `models.list`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::common::{Opts, Sidecar};
use crate::support::chat_helpers::*;
use crate::support::fake_openai::{FakeServer, Recorded, Reply};

const KEY: &str = "sk-test-native-0123";
const NOTES: &str = "alpha\nthe needle is here\nomega\n";
const NEEDLE: &str = "the needle is here";
const QUESTION: &str = "where is the needle?";

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// A workspace with `notes.txt` (and `other.txt`) for `read_file`.
fn ws() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("notes.txt"), NOTES).unwrap();
    std::fs::write(d.path().join("other.txt"), "second file\n").unwrap();
    d
}

/// `agent.chat.stream` params for a native provider on `base`.
fn chat(provider: &str, model: &str, base: &str, w: &tempfile::TempDir) -> Value {
    json!({"provider": provider, "model": model, "baseUrl": base, "apiKey": KEY,
           "cwd": w.path(), "toolsStrategy": "minimal",
           "messages": [{"role": "user", "content": QUESTION}]})
}

/// Named SSE events (Anthropic, Responses): `event: <type>\ndata: <json>\n\n`.
fn named_sse(events: &[Value]) -> Vec<u8> {
    let mut out = String::new();
    for e in events {
        let name = e["type"].as_str().expect("event type");
        out.push_str(&format!("event: {name}\ndata: {e}\n\n"));
    }
    out.into_bytes()
}

/// Data-only SSE with CRLF line ends, as Gemini's `alt=sse` sends it.
fn data_sse(chunks: &[Value]) -> Vec<u8> {
    let mut out = String::new();
    for c in chunks {
        out.push_str(&format!("data: {c}\r\n\r\n"));
    }
    out.into_bytes()
}

/// A value for a failure message, cut short.
fn short(v: &impl std::fmt::Display) -> String {
    let text = v.to_string();
    match text.char_indices().nth(3000) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

fn reasoning_text(r: &Streamed) -> String {
    r.with("reasoningDelta")
        .iter()
        .filter_map(|v| v.as_str())
        .collect()
}

fn retries(r: &Streamed) -> Vec<&Value> {
    r.notices("hook_action")
        .into_iter()
        .filter(|n| n["hook"] == "on_request_error" && n["action"] == "retry")
        .collect()
}

fn overflow_notices(r: &Streamed) -> Vec<&Value> {
    r.notices("hook_action")
        .into_iter()
        .filter(|n| n["action"] == "overflow_recovery")
        .collect()
}

/// The turn completed with `text`; the frames are in the failure message.
fn assert_completed(r: &Streamed, text: &str) {
    assert_eq!(
        r.done["status"],
        "completed",
        "done {} frames {}",
        r.done,
        short(&json!(r.frames))
    );
    assert_eq!(r.text(), text, "{}", short(&json!(r.frames)));
}

/// The turn failed and its reason (and the `stream.error`) name `needle`.
fn assert_failed_naming(r: &Streamed, needle: &str) {
    assert_eq!(r.done["status"], "failed", "{}", short(&json!(r.frames)));
    assert_eq!(r.done["ok"], false);
    let reason = r.done["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(needle),
        "reason {reason:?} lacks {needle:?}"
    );
    let errs = r.errors();
    assert_eq!(errs.len(), 1, "{}", short(&json!(r.frames)));
    assert!(
        errs[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(needle),
        "{}",
        errs[0]
    );
}

/// Asserts the single `toolResult` of the turn read the needle, and its id is the call's.
fn assert_read_the_needle(r: &Streamed, call_id: Option<&str>) -> String {
    let calls = r.with("toolCall");
    assert_eq!(calls.len(), 1, "{}", short(&json!(r.frames)));
    assert_eq!(calls[0]["name"], "read_file");
    assert_eq!(calls[0]["arguments"], json!({"path": "notes.txt"}));
    let id = calls[0]["id"].as_str().unwrap().to_string();
    if let Some(want) = call_id {
        assert_eq!(id, want);
    }
    let results = r.with("toolResult");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["id"], id.as_str());
    assert_eq!(results[0]["success"], true, "{}", results[0]);
    assert!(
        results[0]["resultPreview"]
            .as_str()
            .unwrap_or_default()
            .contains(NEEDLE),
        "{}",
        results[0]
    );
    id
}

/// Polls until `server` recorded `n` requests (they are recorded before the reply is written,
/// so after a turn they are all there; this only guards the ordering).
fn requests_n(server: &FakeServer, n: usize) -> Vec<Recorded> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = server.requests();
        if r.len() >= n || std::time::Instant::now() > deadline {
            assert_eq!(r.len(), n, "requests: {}", short(&json!(bodies(&r))));
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn bodies(r: &[Recorded]) -> Vec<&Value> {
    r.iter().map(|x| &x.body).collect()
}

/// Every `cache_control` member anywhere in `v`.
fn count_cache_control(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            usize::from(m.contains_key("cache_control"))
                + m.values().map(count_cache_control).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_cache_control).sum(),
        _ => 0,
    }
}

// ---------------------------------------------------------------------------------------------
// Vendor streams
// ---------------------------------------------------------------------------------------------

/// Anthropic Messages stream events (https://docs.anthropic.com/en/api/messages-streaming).
mod claude {
    use serde_json::{Value, json};

    pub fn start(usage: Value) -> Vec<Value> {
        vec![
            json!({"type": "message_start", "message": {"id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5",
                "stop_reason": null, "stop_sequence": null, "usage": usage}}),
            json!({"type": "ping"}),
        ]
    }

    pub fn text(index: u64, pieces: &[&str]) -> Vec<Value> {
        let mut v = vec![json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "text", "text": ""}})];
        for p in pieces {
            v.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": p}}));
        }
        v.push(json!({"type": "content_block_stop", "index": index}));
        v
    }

    pub fn thinking(index: u64, pieces: &[&str], signature: &str) -> Vec<Value> {
        let mut v = vec![json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}})];
        for p in pieces {
            v.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "thinking_delta", "thinking": p}}));
        }
        v.push(json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "signature_delta", "signature": signature}}));
        v.push(json!({"type": "content_block_stop", "index": index}));
        v
    }

    /// A `tool_use` block whose input arrives as `input_json_delta` fragments.
    pub fn tool_use(index: u64, id: &str, name: &str, fragments: &[&str]) -> Vec<Value> {
        let mut v = vec![json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})];
        v.push(json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": ""}}));
        for f in fragments {
            v.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": f}}));
        }
        v.push(json!({"type": "content_block_stop", "index": index}));
        v
    }

    pub fn end(stop_reason: &str, output_tokens: u64) -> Vec<Value> {
        vec![
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": output_tokens}}),
            json!({"type": "message_stop"}),
        ]
    }

    pub fn usage(input: u64) -> Value {
        json!({"input_tokens": input, "cache_creation_input_tokens": 0,
               "cache_read_input_tokens": 0, "output_tokens": 1})
    }

    pub fn body(parts: Vec<Vec<Value>>) -> Vec<u8> {
        let events: Vec<Value> = parts.into_iter().flatten().collect();
        super::named_sse(&events)
    }

    /// A whole answer: `text` in two deltas, `end_turn`.
    pub fn answer(text: &str) -> Vec<u8> {
        let (a, b) = text.split_at(text.len() / 2);
        body(vec![
            start(usage(30)),
            self::text(0, &[a, b]),
            end("end_turn", 7),
        ])
    }

    /// A round that reads `path` (arguments in three fragments).
    pub fn read_call(id: &str, path: &str) -> Vec<u8> {
        let args = format!("{{\"path\": \"{path}\"}}");
        let (a, rest) = args.split_at(4);
        let (b, c) = rest.split_at(rest.len() / 2);
        body(vec![
            start(usage(40)),
            text(0, &["Let me ", "look."]),
            tool_use(1, id, "read_file", &[a, b, c]),
            end("tool_use", 20),
        ])
    }
}

/// OpenAI Responses stream events
/// (https://platform.openai.com/docs/api-reference/responses-streaming).
mod oai {
    use serde_json::{Value, json};

    pub struct Item {
        pub events: Vec<Value>,
        pub item: Value,
    }

    pub fn reasoning(out: u64, id: &str, summary: &[&str], encrypted: &str) -> Item {
        let text: String = summary.concat();
        let item = json!({"id": id, "type": "reasoning",
            "summary": [{"type": "summary_text", "text": text}], "encrypted_content": encrypted});
        let mut events = vec![
            json!({"type": "response.output_item.added", "output_index": out,
                "item": {"id": id, "type": "reasoning", "summary": []}}),
            json!({"type": "response.reasoning_summary_part.added", "item_id": id, "output_index": out,
                "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
        ];
        for p in summary {
            events.push(
                json!({"type": "response.reasoning_summary_text.delta", "item_id": id,
                "output_index": out, "summary_index": 0, "delta": p}),
            );
        }
        events.push(
            json!({"type": "response.reasoning_summary_text.done", "item_id": id,
            "output_index": out, "summary_index": 0, "text": text}),
        );
        events.push(json!({"type": "response.reasoning_summary_part.done", "item_id": id,
            "output_index": out, "summary_index": 0, "part": {"type": "summary_text", "text": text}}));
        events.push(
            json!({"type": "response.output_item.done", "output_index": out, "item": item.clone()}),
        );
        Item { events, item }
    }

    /// A `function_call` item whose arguments arrive as several deltas.
    pub fn call(out: u64, item_id: &str, call_id: &str, name: &str, fragments: &[&str]) -> Item {
        let args: String = fragments.concat();
        let item = json!({"type": "function_call", "id": item_id, "call_id": call_id, "name": name,
            "arguments": args, "status": "completed"});
        let mut events = vec![
            json!({"type": "response.output_item.added", "output_index": out,
            "item": {"type": "function_call", "id": item_id, "call_id": call_id, "name": name,
                     "arguments": "", "status": "in_progress"}}),
        ];
        for f in fragments {
            events.push(
                json!({"type": "response.function_call_arguments.delta", "item_id": item_id,
                "output_index": out, "delta": f}),
            );
        }
        events.push(
            json!({"type": "response.function_call_arguments.done", "item_id": item_id,
            "output_index": out, "arguments": args}),
        );
        events.push(
            json!({"type": "response.output_item.done", "output_index": out, "item": item.clone()}),
        );
        Item { events, item }
    }

    pub fn message(out: u64, id: &str, pieces: &[&str]) -> Item {
        let text: String = pieces.concat();
        let part = json!({"type": "output_text", "text": text, "annotations": []});
        let item = json!({"id": id, "type": "message", "status": "completed", "role": "assistant",
            "content": [part]});
        let mut events = vec![
            json!({"type": "response.output_item.added", "output_index": out,
                "item": {"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
            json!({"type": "response.content_part.added", "item_id": id, "output_index": out,
                "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        ];
        for p in pieces {
            events.push(json!({"type": "response.output_text.delta", "item_id": id,
                "output_index": out, "content_index": 0, "delta": p}));
        }
        events.push(
            json!({"type": "response.output_text.done", "item_id": id, "output_index": out,
            "content_index": 0, "text": text}),
        );
        events.push(
            json!({"type": "response.content_part.done", "item_id": id, "output_index": out,
            "content_index": 0, "part": part}),
        );
        events.push(
            json!({"type": "response.output_item.done", "output_index": out, "item": item.clone()}),
        );
        Item { events, item }
    }

    pub fn usage(input: u64, cached: u64, output: u64) -> Value {
        json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
               "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
               "total_tokens": input + output})
    }

    fn response(id: &str, status: &str, output: Value, usage: Value) -> Value {
        json!({"id": id, "object": "response", "created_at": 1741290958, "status": status,
               "model": "gpt-5", "output": output, "usage": usage, "store": false})
    }

    /// `response.created`, `in_progress`, the items' events, then `terminal` (when given),
    /// every event numbered.
    pub fn stream(id: &str, items: Vec<Item>, terminal: Option<Value>) -> Vec<u8> {
        let mut events = vec![
            json!({"type": "response.created", "response": response(id, "in_progress", json!([]), Value::Null)}),
            json!({"type": "response.in_progress", "response": response(id, "in_progress", json!([]), Value::Null)}),
        ];
        for i in items {
            events.extend(i.events);
        }
        events.extend(terminal);
        for (n, e) in events.iter_mut().enumerate() {
            e["sequence_number"] = json!(n);
        }
        super::named_sse(&events)
    }

    pub fn completed(id: &str, items: Vec<Item>, usage: Value) -> Vec<u8> {
        let output: Vec<Value> = items.iter().map(|i| i.item.clone()).collect();
        let done = json!({"type": "response.completed",
            "response": response(id, "completed", json!(output), usage)});
        stream(id, items, Some(done))
    }

    pub fn answer(text: &str) -> Vec<u8> {
        let (a, b) = text.split_at(text.len() / 2);
        completed(
            "resp_answer",
            vec![message(0, "msg_answer", &[a, b])],
            usage(30, 0, 7),
        )
    }

    pub fn read_call(call_id: &str, path: &str) -> Vec<u8> {
        let args = format!("{{\"path\":\"{path}\"}}");
        let (a, rest) = args.split_at(5);
        let (b, c) = rest.split_at(rest.len() / 2);
        completed(
            "resp_call",
            vec![call(0, "fc_0001", call_id, "read_file", &[a, b, c])],
            usage(40, 16, 20),
        )
    }
}

/// Gemini `streamGenerateContent?alt=sse` chunks
/// (https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent).
mod gem {
    use serde_json::{Value, json};

    pub fn chunk(
        response_id: &str,
        parts: Value,
        finish: Option<&str>,
        usage: Option<Value>,
    ) -> Value {
        let mut c = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(f) = finish {
            c["finishReason"] = json!(f);
        }
        let mut v =
            json!({"candidates": [c], "modelVersion": "gemini-2.5-pro", "responseId": response_id});
        if let Some(u) = usage {
            v["usageMetadata"] = u;
        }
        v
    }

    pub fn usage(prompt: u64, candidates: u64) -> Value {
        json!({"promptTokenCount": prompt, "candidatesTokenCount": candidates,
               "totalTokenCount": prompt + candidates})
    }

    pub fn answer(text: &str) -> Vec<u8> {
        let (a, b) = text.split_at(text.len() / 2);
        super::data_sse(&[
            chunk("resp-answer", json!([{"text": a}]), None, None),
            chunk(
                "resp-answer",
                json!([{"text": b}]),
                Some("STOP"),
                Some(usage(30, 7)),
            ),
        ])
    }

    /// A round calling `read_file` (Gemini sends a call whole, in one part).
    pub fn read_call(path: &str, extra: Value) -> Vec<u8> {
        let mut part = json!({"functionCall": {"name": "read_file", "args": {"path": path}}});
        if let (Value::Object(p), Value::Object(e)) = (&mut part, extra) {
            p.extend(e);
        }
        super::data_sse(&[
            chunk("resp-call", json!([{"text": "Let me look."}]), None, None),
            chunk(
                "resp-call",
                json!([part]),
                Some("STOP"),
                Some(
                    json!({"promptTokenCount": 40, "candidatesTokenCount": 20, "totalTokenCount": 60, "cachedContentTokenCount": 16}),
                ),
            ),
        ])
    }
}

// ---------------------------------------------------------------------------------------------
// Vendor request validators (what the real APIs refuse)
// ---------------------------------------------------------------------------------------------

/// An Anthropic Messages body the API would take: required members, user first, strict
/// alternation, no empty content, every `tool_result` answering a `tool_use` of the turn
/// before, at most 4 cache breakpoints.
fn check_anthropic_body(b: &Value) {
    assert!(b["model"].is_string(), "{b}");
    assert!(b["max_tokens"].as_u64().is_some_and(|n| n > 0), "{b}");
    assert_eq!(b["stream"], true, "{b}");
    let msgs = b["messages"].as_array().expect("messages");
    assert!(!msgs.is_empty());
    assert_eq!(msgs[0]["role"], "user", "first turn: {}", short(b));
    for w in msgs.windows(2) {
        assert_ne!(
            w[0]["role"],
            w[1]["role"],
            "roles must alternate: {}",
            short(b)
        );
    }
    for (i, m) in msgs.iter().enumerate() {
        let content = &m["content"];
        assert!(
            content.as_str().is_some_and(|s| !s.is_empty())
                || content.as_array().is_some_and(|a| !a.is_empty()),
            "empty content in message {i}: {}",
            short(b)
        );
        for block in content.as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                let id = block["tool_use_id"].as_str().unwrap_or_default();
                let prev = &msgs[i - 1];
                assert_eq!(prev["role"], "assistant");
                assert!(
                    prev["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|c| c["type"] == "tool_use" && c["id"] == id),
                    "tool_result {id} answers no tool_use of the turn before: {}",
                    short(b)
                );
            }
        }
    }
    assert!(
        count_cache_control(b) <= 4,
        "more than 4 breakpoints: {}",
        short(b)
    );
}

/// A Responses body: `input` items, every `function_call_output` answering an earlier
/// `function_call`.
fn check_responses_body(b: &Value) {
    assert!(b["model"].is_string(), "{b}");
    assert_eq!(b["stream"], true, "{b}");
    let input = b["input"].as_array().expect("input");
    assert!(!input.is_empty());
    let mut calls = Vec::new();
    for item in input {
        match item["type"].as_str() {
            Some("function_call") => calls.push(item["call_id"].clone()),
            Some("function_call_output") => assert!(
                calls.contains(&item["call_id"]),
                "output for an unknown call: {}",
                short(b)
            ),
            _ => {}
        }
    }
}

/// A Gemini body: `contents` starting with a user turn, roles `user`/`model`, no empty
/// `parts`, as many `functionResponse` parts as the model turn before made calls.
fn check_gemini_body(b: &Value) {
    let contents = b["contents"].as_array().expect("contents");
    assert!(!contents.is_empty());
    assert_eq!(contents[0]["role"], "user", "{}", short(b));
    for (i, c) in contents.iter().enumerate() {
        assert!(
            c["role"] == "user" || c["role"] == "model",
            "role {}",
            c["role"]
        );
        let parts = c["parts"].as_array().expect("parts");
        assert!(!parts.is_empty(), "empty parts in turn {i}: {}", short(b));
        let responses = parts
            .iter()
            .filter(|p| p.get("functionResponse").is_some())
            .count();
        if responses > 0 {
            let prev = &contents[i - 1];
            assert_eq!(prev["role"], "model", "{}", short(b));
            let calls = prev["parts"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p.get("functionCall").is_some())
                .count();
            assert_eq!(calls, responses, "{}", short(b));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Whole turns with a real tool
// ---------------------------------------------------------------------------------------------

#[test]
fn anthropic_tool_turn_sends_the_tool_result_and_the_tool_use_back() {
    let server = FakeServer::start(vec![
        Reply::sse(claude::read_call(
            "toolu_01A09q90qw90lq917835lq9",
            "notes.txt",
        )),
        Reply::sse(claude::answer("The needle is in notes.txt.")),
    ]);
    let mut s = Sidecar::start();
    let w = ws();
    // `…/v1` is accepted and stripped: requests still go to `/v1/messages`.
    let r = run(
        &mut s,
        chat("anthropic", "claude-sonnet-4-5", &server.base_url(), &w),
    );
    assert_completed(&r, "Let me look.The needle is in notes.txt.");
    assert_read_the_needle(&r, Some("toolu_01A09q90qw90lq917835lq9"));
    // Usage of both rounds.
    assert_eq!(r.done["usage"]["promptTokens"], 70, "{}", r.done);
    assert_eq!(r.done["usage"]["completionTokens"], 27, "{}", r.done);

    let reqs = requests_n(&server, 2);
    for q in &reqs {
        assert_eq!(q.method, "POST");
        assert_eq!(q.path, "/v1/messages");
        check_anthropic_body(&q.body);
    }
    let tools = reqs[0].body["tools"].as_array().expect("tools offered");
    let read = tools
        .iter()
        .find(|t| t["name"] == "read_file")
        .expect("read_file offered");
    assert_eq!(read["input_schema"]["type"], "object", "{read}");
    assert!(
        read.get("function").is_none(),
        "OpenAI shape leaked: {read}"
    );

    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{}", short(&reqs[1].body));
    assert_eq!(msgs[0]["role"], "user");
    let assistant = &msgs[1];
    assert_eq!(assistant["role"], "assistant");
    let blocks = assistant["content"].as_array().unwrap();
    let kinds: Vec<&str> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["text", "tool_use"], "{assistant}");
    assert_eq!(blocks[0]["text"], "Let me look.");
    assert_eq!(blocks[1]["id"], "toolu_01A09q90qw90lq917835lq9");
    assert_eq!(blocks[1]["name"], "read_file");
    assert_eq!(blocks[1]["input"], json!({"path": "notes.txt"}));
    let user = &msgs[2];
    assert_eq!(user["role"], "user");
    let result = &user["content"][0];
    assert_eq!(result["type"], "tool_result", "{user}");
    assert_eq!(result["tool_use_id"], "toolu_01A09q90qw90lq917835lq9");
    assert!(result["content"].to_string().contains(NEEDLE), "{result}");
}

#[test]
fn responses_tool_turn_sends_the_function_call_and_its_output_back() {
    let server = FakeServer::start(vec![
        Reply::sse(oai::read_call("call_R2d2", "notes.txt")),
        Reply::sse(oai::answer("The needle is in notes.txt.")),
    ]);
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(&mut s, chat("responses", "gpt-5", &server.base_url(), &w));
    assert_completed(&r, "The needle is in notes.txt.");
    assert_read_the_needle(&r, Some("call_R2d2"));
    assert_eq!(r.done["usage"]["promptTokens"], 70, "{}", r.done);
    assert_eq!(r.done["usage"]["completionTokens"], 27, "{}", r.done);
    assert_eq!(r.done["usage"]["cachedPromptTokens"], 16, "{}", r.done);

    let reqs = requests_n(&server, 2);
    for q in &reqs {
        assert_eq!(q.method, "POST");
        assert_eq!(q.path, "/v1/responses");
        check_responses_body(&q.body);
    }
    let tools = reqs[0].body["tools"].as_array().expect("tools offered");
    let read = tools
        .iter()
        .find(|t| t["name"] == "read_file")
        .expect("read_file offered flat");
    assert_eq!(read["type"], "function");
    assert!(read["parameters"].is_object(), "{read}");

    let input = reqs[1].body["input"].as_array().unwrap();
    let call_at = input
        .iter()
        .position(|i| i["type"] == "function_call")
        .unwrap_or_else(|| panic!("no function_call: {}", short(&reqs[1].body)));
    let call = &input[call_at];
    assert_eq!(call["call_id"], "call_R2d2");
    assert_eq!(call["name"], "read_file");
    let args: Value = serde_json::from_str(call["arguments"].as_str().expect("arguments text"))
        .expect("arguments JSON");
    assert_eq!(args, json!({"path": "notes.txt"}));
    let out_at = input
        .iter()
        .position(|i| i["type"] == "function_call_output")
        .expect("function_call_output");
    assert!(out_at > call_at);
    let out = &input[out_at];
    assert_eq!(out["call_id"], "call_R2d2");
    assert!(out["output"].to_string().contains(NEEDLE), "{out}");
    assert_eq!(input[0]["role"], "user");
    assert!(input[0].to_string().contains(QUESTION));
}

#[test]
fn gemini_tool_turn_sends_the_function_call_and_a_function_response_back() {
    let server = FakeServer::start(vec![
        Reply::sse(gem::read_call("notes.txt", json!({}))),
        Reply::sse(gem::answer("The needle is in notes.txt.")),
    ]);
    let mut s = Sidecar::start();
    let w = ws();
    let base = format!("http://127.0.0.1:{}/v1beta", server.port);
    let r = run(&mut s, chat("google", "gemini-2.5-pro", &base, &w));
    assert_completed(&r, "Let me look.The needle is in notes.txt.");
    assert_read_the_needle(&r, None);
    assert_eq!(r.done["usage"]["promptTokens"], 70, "{}", r.done);
    assert_eq!(r.done["usage"]["cachedPromptTokens"], 16, "{}", r.done);

    let reqs = requests_n(&server, 2);
    for q in &reqs {
        assert_eq!(q.method, "POST");
        assert_eq!(
            q.path,
            "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        );
        check_gemini_body(&q.body);
    }
    let decls = reqs[0].body["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap_or_else(|| panic!("no functionDeclarations: {}", short(&reqs[0].body)));
    assert!(decls.iter().any(|d| d["name"] == "read_file"));

    let contents = reqs[1].body["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3, "{}", short(&reqs[1].body));
    let model = &contents[1];
    assert_eq!(model["role"], "model");
    let call = model["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p.get("functionCall").is_some())
        .unwrap_or_else(|| panic!("no functionCall in {model}"));
    assert_eq!(call["functionCall"]["name"], "read_file");
    assert_eq!(call["functionCall"]["args"], json!({"path": "notes.txt"}));
    let user = &contents[2];
    assert_eq!(user["role"], "user");
    let resp = &user["parts"][0]["functionResponse"];
    assert_eq!(resp["name"], "read_file", "{user}");
    assert!(resp["response"].is_object(), "{resp}");
    assert!(resp["response"].to_string().contains(NEEDLE), "{resp}");
}

/// A Gemini call that came with an `id` must be answered with that id
/// (FunctionResponse.id: "populated by the client to match the corresponding function call
/// id"; Firebase: "This must be sent back in the associated FunctionResponse").
#[test]
fn gemini_call_id_is_used_and_sent_back_on_the_function_response() {
    // The call's id rides inside functionCall.
    let part = json!({"functionCall": {"id": "fc-7f3a", "name": "read_file", "args": {"path": "notes.txt"}},
                      "thoughtSignature": "c2lnLWlk"});
    let with_id = data_sse(&[gem::chunk(
        "resp-id",
        json!([part]),
        Some("STOP"),
        Some(gem::usage(40, 20)),
    )]);
    let server = FakeServer::start(vec![Reply::sse(with_id), Reply::sse(gem::answer("done"))]);
    let mut s = Sidecar::start();
    let w = ws();
    let base = format!("http://127.0.0.1:{}/v1beta", server.port);
    let r = run(&mut s, chat("gemini", "gemini-2.5-pro", &base, &w));
    assert_completed(&r, "done");
    assert_read_the_needle(&r, Some("fc-7f3a"));
    let reqs = requests_n(&server, 2);
    let contents = reqs[1].body["contents"].as_array().unwrap();
    let resp = &contents[2]["parts"][0]["functionResponse"];
    assert_eq!(
        resp["id"],
        "fc-7f3a",
        "the functionResponse does not carry the call's id: {}",
        short(&reqs[1].body)
    );
}

/// A 24×16 PNG for `view_image`.
fn png() -> Vec<u8> {
    let img = image::RgbImage::from_fn(24, 16, |x, y| image::Rgb([x as u8 * 10, y as u8 * 15, 77]));
    let mut out = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// A round with two calls (`read_file notes.txt`, `view_image pic.png`), then an answer: the
/// second request must carry both results and the viewed image, which the loop appends as
/// a user message right after the tool messages (vendors with strict alternation merge it
/// into the tool results' turn).
fn parallel_calls_with_an_image(
    provider: &str,
    model: &str,
    base: String,
    server: &FakeServer,
) -> Vec<Recorded> {
    let mut s = Sidecar::start();
    let w = ws();
    std::fs::write(w.path().join("pic.png"), png()).unwrap();
    let mut p = chat(provider, model, &base, &w);
    // `minimal` does not offer view_image.
    p.as_object_mut().unwrap().remove("toolsStrategy");
    let r = run(&mut s, p);
    assert_completed(&r, "Both seen.");
    let results = r.with("toolResult");
    assert_eq!(results.len(), 2, "{}", short(&json!(r.frames)));
    assert!(results.iter().all(|x| x["success"] == true), "{results:?}");
    requests_n(server, 2)
}

const PNG_B64_START: &str = "iVBORw0KGgo";

#[test]
fn anthropic_parallel_results_and_the_viewed_image_share_one_user_turn() {
    let round1 = claude::body(vec![
        claude::start(claude::usage(40)),
        claude::tool_use(
            0,
            "toolu_p1",
            "read_file",
            &["{\"path\":", " \"notes.txt\"}"],
        ),
        claude::tool_use(
            1,
            "toolu_p2",
            "view_image",
            &["{\"path\":", " \"pic.png\"}"],
        ),
        claude::end("tool_use", 20),
    ]);
    let server = FakeServer::start(vec![
        Reply::sse(round1),
        Reply::sse(claude::answer("Both seen.")),
    ]);
    let reqs =
        parallel_calls_with_an_image("anthropic", "claude-sonnet-4-5", server.base_url(), &server);
    let b = &reqs[1].body;
    check_anthropic_body(b);
    let msgs = b["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{}", short(b));
    let ids: Vec<&Value> = msgs[1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "tool_use")
        .map(|c| &c["id"])
        .collect();
    assert_eq!(ids, [&json!("toolu_p1"), &json!("toolu_p2")]);
    let blocks = msgs[2]["content"].as_array().unwrap();
    let kinds: Vec<&str> = blocks.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(
        &kinds[..2],
        ["tool_result", "tool_result"],
        "tool results first: {kinds:?}"
    );
    assert_eq!(blocks[0]["tool_use_id"], "toolu_p1");
    assert_eq!(blocks[1]["tool_use_id"], "toolu_p2");
    let image = blocks
        .iter()
        .find(|c| c["type"] == "image")
        .unwrap_or_else(|| panic!("no image block in the user turn: {kinds:?}"));
    assert_eq!(image["source"]["type"], "base64", "{}", short(image));
    assert_eq!(image["source"]["media_type"], "image/png");
    assert!(
        image["source"]["data"]
            .as_str()
            .unwrap_or_default()
            .starts_with(PNG_B64_START),
        "{}",
        short(image)
    );
}

#[test]
fn responses_parallel_outputs_and_the_viewed_image_follow_the_calls() {
    let round1 = oai::completed(
        "resp_par",
        vec![
            oai::call(
                0,
                "fc_p1",
                "call_p1",
                "read_file",
                &["{\"path\":", "\"notes.txt\"}"],
            ),
            oai::call(
                1,
                "fc_p2",
                "call_p2",
                "view_image",
                &["{\"path\":", "\"pic.png\"}"],
            ),
        ],
        oai::usage(40, 0, 20),
    );
    let server = FakeServer::start(vec![
        Reply::sse(round1),
        Reply::sse(oai::answer("Both seen.")),
    ]);
    let reqs = parallel_calls_with_an_image("responses", "gpt-5", server.base_url(), &server);
    let b = &reqs[1].body;
    check_responses_body(b);
    let input = b["input"].as_array().unwrap();
    let kinds: Vec<&str> = input
        .iter()
        .map(|i| i["type"].as_str().or(i["role"].as_str()).unwrap_or("?"))
        .collect();
    let calls: Vec<&Value> = input
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| &i["call_id"])
        .collect();
    assert_eq!(calls, [&json!("call_p1"), &json!("call_p2")], "{kinds:?}");
    let outputs: Vec<&Value> = input
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| &i["call_id"])
        .collect();
    assert_eq!(outputs, [&json!("call_p1"), &json!("call_p2")], "{kinds:?}");
    let last = input.last().unwrap();
    assert_eq!(
        last["role"], "user",
        "the image message comes last: {kinds:?}"
    );
    let image = last["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "input_image")
        .unwrap_or_else(|| panic!("no input_image: {}", short(last)));
    assert!(
        image["image_url"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&format!("data:image/png;base64,{PNG_B64_START}")),
        "{}",
        short(image)
    );
}

#[test]
fn gemini_parallel_responses_and_the_viewed_image_share_one_user_turn() {
    let round1 = data_sse(&[gem::chunk(
        "resp-par",
        json!([
            {"functionCall": {"name": "read_file", "args": {"path": "notes.txt"}}, "thoughtSignature": "c2lnLXBhcg=="},
            {"functionCall": {"name": "view_image", "args": {"path": "pic.png"}}}
        ]),
        Some("STOP"),
        Some(gem::usage(40, 20)),
    )]);
    let server = FakeServer::start(vec![
        Reply::sse(round1),
        Reply::sse(gem::answer("Both seen.")),
    ]);
    let base = format!("http://127.0.0.1:{}/v1beta", server.port);
    let reqs = parallel_calls_with_an_image("google", "gemini-2.5-pro", base, &server);
    let b = &reqs[1].body;
    check_gemini_body(b);
    let contents = b["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3, "{}", short(b));
    let calls: Vec<&Value> = contents[1]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p.get("functionCall").is_some())
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["thoughtSignature"], "c2lnLXBhcg==");
    assert!(
        calls[1].get("thoughtSignature").is_none(),
        "only the first parallel call was signed: {}",
        calls[1]
    );
    let parts = contents[2]["parts"].as_array().unwrap();
    let names: Vec<&Value> = parts
        .iter()
        .filter_map(|p| p.get("functionResponse"))
        .map(|r| &r["name"])
        .collect();
    assert_eq!(names, [&json!("read_file"), &json!("view_image")]);
    let inline = parts
        .iter()
        .find_map(|p| p.get("inlineData"))
        .unwrap_or_else(|| panic!("no inlineData in the user turn: {}", short(&contents[2])));
    assert_eq!(inline["mimeType"], "image/png");
    assert!(
        inline["data"]
            .as_str()
            .unwrap_or_default()
            .starts_with(PNG_B64_START)
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Auth headers, missing keys, aliases
// ---------------------------------------------------------------------------------------------

#[test]
fn auth_headers_per_vendor_through_every_alias() {
    let mut s = Sidecar::start();
    let w = ws();
    // Anthropic and its alias, with the base URL given bare.
    for name in ["anthropic", "claude"] {
        let server = FakeServer::start(vec![Reply::sse(claude::answer("hi there"))]);
        let base = format!("http://127.0.0.1:{}", server.port);
        let r = run(&mut s, chat(name, "claude-sonnet-4-5", &base, &w));
        assert_completed(&r, "hi there");
        let q = &requests_n(&server, 1)[0];
        assert_eq!(q.path, "/v1/messages", "{name}");
        assert_eq!(q.header("x-api-key"), Some(KEY), "{name}");
        assert_eq!(q.header("anthropic-version"), Some("2023-06-01"), "{name}");
        assert_eq!(
            q.header("authorization"),
            None,
            "{name}: key also as bearer"
        );
        assert_eq!(q.body["model"], "claude-sonnet-4-5");
    }
    for name in ["responses", "openai-responses", "xai"] {
        let server = FakeServer::start(vec![Reply::sse(oai::answer("hi there"))]);
        let r = run(&mut s, chat(name, "gpt-5", &server.base_url(), &w));
        assert_completed(&r, "hi there");
        let q = &requests_n(&server, 1)[0];
        assert_eq!(q.path, "/v1/responses", "{name}");
        assert_eq!(
            q.header("authorization"),
            Some(format!("Bearer {KEY}").as_str()),
            "{name}"
        );
        assert_eq!(q.header("x-api-key"), None, "{name}");
        assert_eq!(q.body["model"], "gpt-5");
    }
    for name in ["google", "gemini"] {
        let server = FakeServer::start(vec![Reply::sse(gem::answer("hi there"))]);
        let base = format!("http://127.0.0.1:{}/v1beta", server.port);
        let r = run(&mut s, chat(name, "gemini-2.5-flash", &base, &w));
        assert_completed(&r, "hi there");
        let q = &requests_n(&server, 1)[0];
        assert_eq!(
            q.path, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            "{name}"
        );
        assert_eq!(q.header("x-goog-api-key"), Some(KEY), "{name}");
        assert!(!q.path.contains("key="), "key in the URL: {}", q.path);
        assert!(!q.path.contains(KEY), "key in the URL: {}", q.path);
        assert_eq!(q.header("authorization"), None, "{name}");
    }
}

#[test]
fn keys_come_from_the_vendor_variables_and_a_refused_key_names_them() {
    let mut s = Sidecar::start_with(Opts {
        env: vec![
            ("ANTHROPIC_API_KEY".into(), "env-anthropic".into()),
            ("OPENAI_API_KEY".into(), "env-openai".into()),
            ("GOOGLE_API_KEY".into(), "env-google".into()),
        ],
        ..Opts::default()
    });
    let w = ws();
    let no_key = |mut p: Value| {
        p.as_object_mut().unwrap().remove("apiKey");
        p
    };
    let a = FakeServer::start(vec![Reply::sse(claude::answer("ok"))]);
    let r = run(
        &mut s,
        no_key(chat("anthropic", "claude-sonnet-4-5", &a.base_url(), &w)),
    );
    assert_completed(&r, "ok");
    assert_eq!(
        requests_n(&a, 1)[0].header("x-api-key"),
        Some("env-anthropic")
    );
    let o = FakeServer::start(vec![Reply::sse(oai::answer("ok"))]);
    let r = run(
        &mut s,
        no_key(chat("responses", "gpt-5", &o.base_url(), &w)),
    );
    assert_completed(&r, "ok");
    assert_eq!(
        requests_n(&o, 1)[0].header("authorization"),
        Some("Bearer env-openai")
    );
    let g = FakeServer::start(vec![Reply::sse(gem::answer("ok"))]);
    let base = format!("http://127.0.0.1:{}/v1beta", g.port);
    let r = run(
        &mut s,
        no_key(chat("google", "gemini-2.5-flash", &base, &w)),
    );
    assert_completed(&r, "ok");
    assert_eq!(
        requests_n(&g, 1)[0].header("x-goog-api-key"),
        Some("env-google")
    );

    // A key the vendor refuses: not retried, and the error says where keys come from.
    let refused = [
        (
            "anthropic",
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            "ANTHROPIC_API_KEY",
        ),
        (
            "responses",
            401,
            r#"{"error":{"message":"Incorrect API key provided: sk-test.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
            "OPENAI_API_KEY",
        ),
        (
            "google",
            403,
            r#"{"error":{"code":403,"message":"Method doesn't allow unregistered callers.","status":"PERMISSION_DENIED"}}"#,
            "GEMINI_API_KEY",
        ),
    ];
    for (provider, status, body, var) in refused {
        let server = FakeServer::start(vec![Reply::status(status, body)]);
        let (model, base) = match provider {
            "anthropic" => (
                "claude-sonnet-4-5",
                format!("http://127.0.0.1:{}", server.port),
            ),
            "responses" => ("gpt-5", server.base_url()),
            _ => (
                "gemini-2.5-flash",
                format!("http://127.0.0.1:{}/v1beta", server.port),
            ),
        };
        let r = run(&mut s, chat(provider, model, &base, &w));
        assert_failed_naming(&r, var);
        assert_failed_naming(&r, &status.to_string());
        assert_eq!(
            requests_n(&server, 1).len(),
            1,
            "{provider}: a refused key was retried"
        );
    }
}

#[test]
fn a_missing_key_or_base_url_refuses_the_chat_before_any_request() {
    let server = FakeServer::start(vec![Reply::sse(claude::answer("never"))]);
    let mut s = Sidecar::start();
    let w = ws();
    let cases = [
        ("anthropic", "claude-sonnet-4-5", vec!["ANTHROPIC_API_KEY"]),
        ("claude", "claude-sonnet-4-5", vec!["ANTHROPIC_API_KEY"]),
        ("responses", "gpt-5", vec!["OPENAI_API_KEY"]),
        ("openai-responses", "gpt-5", vec!["OPENAI_API_KEY"]),
        ("xai", "grok-4", vec!["XAI_API_KEY"]),
        (
            "google",
            "gemini-2.5-pro",
            vec!["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        ),
        (
            "gemini",
            "gemini-2.5-pro",
            vec!["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        ),
    ];
    for (provider, model, vars) in cases {
        let mut p = chat(provider, model, &server.base_url(), &w);
        p.as_object_mut().unwrap().remove("apiKey");
        let r = s.call("agent.chat.stream", p);
        assert_eq!(code(&r), -32602, "{provider}: {r}");
        let msg = r["error"]["message"].as_str().unwrap_or_default();
        for v in vars.iter().chain(&["apiKey", "OUTRIGGER_API_KEY"]) {
            assert!(msg.contains(v), "{provider}: {msg:?} does not name {v}");
        }
    }
    // A compat server has no default endpoint.
    let mut p = chat("openai_compat", "some-model", "", &w);
    p.as_object_mut().unwrap().remove("baseUrl");
    let r = s.call("agent.chat.stream", p);
    assert_eq!(code(&r), -32602, "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("baseUrl"), "{msg}");
    assert!(server.requests().is_empty(), "a request reached the vendor");
}

// ---------------------------------------------------------------------------------------------
// 3. Vendor state echoed verbatim, reasoning shown
// ---------------------------------------------------------------------------------------------

#[test]
fn anthropic_thinking_streams_as_reasoning_and_goes_back_signed_before_the_tool_use() {
    let signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/=";
    let round1 = claude::body(vec![
        claude::start(claude::usage(40)),
        claude::thinking(
            0,
            &["The user wants the needle. ", "I should read notes.txt."],
            signature,
        ),
        claude::tool_use(
            1,
            "toolu_think1",
            "read_file",
            &["{\"pat", "h\": \"notes", ".txt\"}"],
        ),
        claude::end("tool_use", 30),
    ]);
    let server = FakeServer::start(vec![
        Reply::sse(round1),
        Reply::sse(claude::answer("Found it.")),
    ]);
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat("anthropic", "claude-sonnet-4-5", &server.base_url(), &w),
    );
    assert_completed(&r, "Found it.");
    assert_eq!(
        reasoning_text(&r),
        "The user wants the needle. I should read notes.txt."
    );
    assert_read_the_needle(&r, Some("toolu_think1"));
    let reqs = requests_n(&server, 2);
    check_anthropic_body(&reqs[1].body);
    let assistant = &reqs[1].body["messages"][1];
    assert_eq!(assistant["role"], "assistant", "{}", short(&reqs[1].body));
    let blocks = assistant["content"].as_array().unwrap();
    assert_eq!(
        blocks[0],
        json!({"type": "thinking",
               "thinking": "The user wants the needle. I should read notes.txt.",
               "signature": signature}),
        "the thinking block must come back first, whole and signed: {assistant}"
    );
    let tool_at = blocks
        .iter()
        .position(|b| b["type"] == "tool_use")
        .expect("tool_use");
    assert!(tool_at > 0);
    assert_eq!(blocks[tool_at]["id"], "toolu_think1");
    assert_eq!(
        blocks.iter().filter(|b| b["type"] == "thinking").count(),
        1,
        "{assistant}"
    );
    // The thinking block never carries a breakpoint.
    assert!(blocks[0].get("cache_control").is_none());
}

#[test]
fn responses_encrypted_reasoning_goes_back_before_the_function_call() {
    let encrypted = "gAAAAABoISQ1x1dNZ9-FAKE-ENCRYPTED-REASONING-6q8_bR0ayw==";
    let round1 = oai::completed(
        "resp_reason",
        vec![
            oai::reasoning(
                0,
                "rs_68a1",
                &["**Finding the needle**\n\n", "I will read notes.txt."],
                encrypted,
            ),
            oai::call(
                1,
                "fc_68a2",
                "call_Xy7",
                "read_file",
                &["{\"path\"", ":\"notes", ".txt\"}"],
            ),
        ],
        oai::usage(40, 0, 30),
    );
    let server = FakeServer::start(vec![
        Reply::sse(round1),
        Reply::sse(oai::answer("Found it.")),
    ]);
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat("openai-responses", "gpt-5", &server.base_url(), &w),
    );
    assert_completed(&r, "Found it.");
    assert_eq!(
        reasoning_text(&r),
        "**Finding the needle**\n\nI will read notes.txt."
    );
    assert_read_the_needle(&r, Some("call_Xy7"));
    let reqs = requests_n(&server, 2);
    assert_eq!(
        reqs[0].body["include"],
        json!(["reasoning.encrypted_content"]),
        "without include the API sends no encrypted reasoning"
    );
    assert_eq!(reqs[0].body["store"], false);
    let input = reqs[1].body["input"].as_array().unwrap();
    let reasoning: Vec<(usize, &Value)> = input
        .iter()
        .enumerate()
        .filter(|(_, i)| i["type"] == "reasoning")
        .collect();
    assert_eq!(
        reasoning.len(),
        1,
        "one reasoning item (not repeated from response.completed): {}",
        short(&reqs[1].body)
    );
    let (at, item) = reasoning[0];
    // Verbatim, except the item id, which a stateless (`store: false`) client leaves out.
    let mut want = json!({"type": "reasoning",
        "summary": [{"type": "summary_text", "text": "**Finding the needle**\n\nI will read notes.txt."}],
        "encrypted_content": encrypted});
    if item.get("id").is_some() {
        want["id"] = json!("rs_68a1");
    }
    assert_eq!(item, &want);
    let call_at = input
        .iter()
        .position(|i| i["type"] == "function_call")
        .unwrap();
    assert!(at < call_at, "reasoning must precede its function_call");
    assert_eq!(input[call_at]["call_id"], "call_Xy7");
}

#[test]
fn gemini_thought_signature_rides_back_beside_its_function_call() {
    let signature = "CiQBVKhc7ZsigA9PZbmXFAKEsignatureBytes==";
    let round1 = data_sse(&[
        gem::chunk(
            "resp-think",
            json!([{"text": "**Locating** the needle: ", "thought": true}]),
            None,
            None,
        ),
        gem::chunk(
            "resp-think",
            json!([{"text": "read notes.txt.", "thought": true}]),
            None,
            None,
        ),
        gem::chunk(
            "resp-think",
            json!([{"functionCall": {"name": "read_file", "args": {"path": "notes.txt"}},
                    "thoughtSignature": signature}]),
            Some("STOP"),
            Some(json!({"promptTokenCount": 40, "candidatesTokenCount": 10,
                        "thoughtsTokenCount": 25, "totalTokenCount": 75})),
        ),
    ]);
    let server = FakeServer::start(vec![
        Reply::sse(round1),
        Reply::sse(gem::answer("Found it.")),
    ]);
    let mut s = Sidecar::start();
    let w = ws();
    let base = format!("http://127.0.0.1:{}/v1beta", server.port);
    let r = run(&mut s, chat("google", "gemini-2.5-pro", &base, &w));
    assert_completed(&r, "Found it.");
    assert_eq!(
        reasoning_text(&r),
        "**Locating** the needle: read notes.txt."
    );
    assert_read_the_needle(&r, None);
    // Thinking tokens are billed as output.
    assert_eq!(r.done["usage"]["completionTokens"], 35 + 7, "{}", r.done);
    let reqs = requests_n(&server, 2);
    check_gemini_body(&reqs[1].body);
    let model = &reqs[1].body["contents"][1];
    assert_eq!(model["role"], "model", "{}", short(&reqs[1].body));
    let parts = model["parts"].as_array().unwrap();
    let call = parts
        .iter()
        .find(|p| p.get("functionCall").is_some())
        .expect("functionCall");
    assert_eq!(
        call["thoughtSignature"], signature,
        "the signature must sit in the functionCall's own part: {model}"
    );
    assert!(
        !model.to_string().contains("Locating"),
        "thought text sent back as content: {model}"
    );
}

/// Turn 1 (a tool round with vendor state, then an answer) and turn 2 continuing the same
/// record with only the new message (`fromRecord`): the first request of turn 2 still
/// carries turn 1's state, read back from the record.
fn next_turn_request(provider: &str, model: &str, base: String, server: &FakeServer) -> Value {
    let mut s = Sidecar::start();
    let w = ws();
    let record = format!("rec_state_{provider}");
    let mut p = chat(provider, model, &base, &w);
    p["recordId"] = json!(record);
    let r = run(&mut s, p.clone());
    assert_eq!(r.done["status"], "completed", "{}", short(&json!(r.frames)));
    assert!(r.text().ends_with("Found it."), "{}", r.text());
    p["messages"] = json!([{"role": "user", "content": "and now?"}]);
    p["fromRecord"] = json!(true);
    let r = run(&mut s, p);
    assert_completed(&r, "Nothing else.");
    requests_n(server, 3)[2].body.clone()
}

#[test]
fn anthropic_and_responses_state_survives_into_the_next_turn() {
    let signature = "EqQBCgIYAhIMnextTurnSignature==";
    let round1 = claude::body(vec![
        claude::start(claude::usage(40)),
        claude::thinking(0, &["Read it."], signature),
        claude::tool_use(1, "toolu_n1", "read_file", &["{\"path\": \"notes.txt\"}"]),
        claude::end("tool_use", 30),
    ]);
    let server = FakeServer::start(vec![
        Reply::sse(round1),
        Reply::sse(claude::answer("Found it.")),
        Reply::sse(claude::answer("Nothing else.")),
    ]);
    let b = next_turn_request("anthropic", "claude-sonnet-4-5", server.base_url(), &server);
    check_anthropic_body(&b);
    let assistant = &b["messages"][1];
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "Read it.", "signature": signature}),
        "{}",
        short(&b)
    );

    let encrypted = "gAAAAABnextTurnEncrypted==";
    let round1 = oai::completed(
        "resp_n",
        vec![
            oai::reasoning(0, "rs_n1", &["Read it."], encrypted),
            oai::call(
                1,
                "fc_n1",
                "call_n1",
                "read_file",
                &["{\"path\":\"notes.txt\"}"],
            ),
        ],
        oai::usage(40, 0, 30),
    );
    let server = FakeServer::start(vec![
        Reply::sse(round1),
        Reply::sse(oai::answer("Found it.")),
        Reply::sse(oai::answer("Nothing else.")),
    ]);
    let b = next_turn_request("responses", "gpt-5", server.base_url(), &server);
    check_responses_body(&b);
    let input = b["input"].as_array().unwrap();
    assert!(
        input
            .iter()
            .any(|i| i["type"] == "reasoning" && i["encrypted_content"] == encrypted),
        "{}",
        short(&b)
    );
}

/// Gemini's thought signature rides on the tool call (`extra_content`); the next turn
/// rebuilt from the record should still send it beside its functionCall.
#[test]
fn gemini_call_signature_survives_into_the_next_turn() {
    let server = FakeServer::start(vec![
        Reply::sse(gem::read_call(
            "notes.txt",
            json!({"thoughtSignature": "c2lnLW5leHQtdHVybg=="}),
        )),
        Reply::sse(gem::answer("Found it.")),
        Reply::sse(gem::answer("Nothing else.")),
    ]);
    let base = format!("http://127.0.0.1:{}/v1beta", server.port);
    let b = next_turn_request("google", "gemini-2.5-pro", base, &server);
    check_gemini_body(&b);
    let call = b["contents"][1]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p.get("functionCall").is_some())
        .cloned()
        .unwrap_or_else(|| panic!("{}", short(&b)));
    assert_eq!(
        call["thoughtSignature"], "c2lnLW5leHQtdHVybg==",
        "turn 1's signature was lost on the way through the record: {call}"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Anthropic prompt caching
// ---------------------------------------------------------------------------------------------

/// A loopback server like `FakeServer` that keeps each request body's exact bytes: the
/// prompt-cache check compares serialisations, which a parsed `Value` would reorder.
struct RawServer {
    port: u16,
    bodies: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl RawServer {
    fn start(replies: Vec<Vec<u8>>) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (b2, s2) = (bodies.clone(), stop.clone());
        std::thread::spawn(move || {
            for (n, conn) in listener.incoming().enumerate() {
                if s2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let Some(body) = read_raw_body(&conn) else {
                    continue;
                };
                b2.lock().unwrap().push(body);
                let reply = &replies[n.min(replies.len() - 1)];
                let mut w = conn;
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
                let _ = w.write_all(head.as_bytes());
                let _ = w.write_all(reply);
                let _ = w.flush();
            }
        });
        RawServer { port, bodies, stop }
    }

    fn bodies(&self) -> Vec<String> {
        self.bodies.lock().unwrap().clone()
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn read_raw_body(conn: &TcpStream) -> Option<String> {
    let mut r = BufReader::new(conn.try_clone().ok()?);
    let mut len = 0usize;
    let mut first = true;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() && !first {
            break;
        }
        first = false;
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    String::from_utf8(body).ok()
}

/// The raw text of the body's top-level members `system` and `tools`, and of each message.
struct Parts {
    system: String,
    tools: String,
    messages: Vec<String>,
}

fn raw_parts(body: &str) -> Parts {
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        #[serde(borrow)]
        system: &'a RawValue,
        #[serde(borrow)]
        tools: &'a RawValue,
        #[serde(borrow)]
        messages: Vec<&'a RawValue>,
    }
    let top: Top<'_> = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("body without system/tools/messages ({e}): {}", short(&body)));
    Parts {
        system: top.system.get().to_string(),
        tools: top.tools.get().to_string(),
        messages: top.messages.iter().map(|m| m.get().to_string()).collect(),
    }
}

/// `raw` (one message) with its one `cache_control` member removed.
fn without_breakpoint(raw: &str) -> String {
    const MARK: &str = r#""cache_control":{"type":"ephemeral"}"#;
    assert_eq!(
        raw.matches("cache_control").count(),
        1,
        "the last message must carry exactly one breakpoint: {raw}"
    );
    let with_comma_before = format!(",{MARK}");
    let with_comma_after = format!("{MARK},");
    if raw.contains(&with_comma_before) {
        raw.replacen(&with_comma_before, "", 1)
    } else if raw.contains(&with_comma_after) {
        raw.replacen(&with_comma_after, "", 1)
    } else {
        panic!("breakpoint not in the form {MARK}: {raw}")
    }
}

/// `v` with `cache_control` removed from the last block of its content.
fn strip_last_block_breakpoint(mut v: Value) -> Value {
    if let Some(last) = v["content"].as_array_mut().and_then(|a| a.last_mut()) {
        last.as_object_mut().unwrap().remove("cache_control");
    }
    v
}

#[test]
fn anthropic_breakpoints_sit_on_the_last_tool_system_and_message_and_the_prefix_is_stable() {
    let server = RawServer::start(vec![
        claude::read_call("toolu_c1", "notes.txt"),
        claude::read_call("toolu_c2", "other.txt"),
        claude::answer("All read."),
    ]);
    let mut s = Sidecar::start();
    let w = ws();
    let p = json!({"provider": "anthropic", "model": "claude-sonnet-4-5",
        "baseUrl": format!("http://127.0.0.1:{}", server.port), "apiKey": KEY,
        "cwd": w.path(), "toolsStrategy": "minimal",
        "systemPrompt": "You are a careful assistant. Answer briefly.",
        "messages": [
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": QUESTION}]});
    let r = run(&mut s, p);
    assert_completed(&r, "Let me look.Let me look.All read.");
    let raw = server.bodies();
    assert_eq!(raw.len(), 3, "{raw:?}");
    let parsed: Vec<Value> = raw
        .iter()
        .map(|b| serde_json::from_str(b).unwrap())
        .collect();
    for (i, b) in parsed.iter().enumerate() {
        check_anthropic_body(b);
        let tools = b["tools"].as_array().expect("tools");
        assert!(tools.len() > 1);
        for (j, t) in tools.iter().enumerate() {
            let want = if j + 1 == tools.len() {
                json!({"type": "ephemeral"})
            } else {
                Value::Null
            };
            assert_eq!(t["cache_control"], want, "request {i} tool {j}: {t}");
        }
        let system = b["system"].as_array().expect("system as blocks");
        assert!(
            system.iter().any(|x| x["text"]
                .as_str()
                .unwrap_or_default()
                .contains("careful assistant")),
            "{system:?}"
        );
        assert_eq!(
            system.last().unwrap()["cache_control"],
            json!({"type": "ephemeral"}),
            "request {i} system: {system:?}"
        );
        let msgs = b["messages"].as_array().unwrap();
        let last = msgs.last().unwrap()["content"].as_array().unwrap();
        assert_eq!(
            last.last().unwrap()["cache_control"],
            json!({"type": "ephemeral"}),
            "request {i}: last message {:?}",
            msgs.last()
        );
        // Exactly three breakpoints: last tool, system, last message.
        assert_eq!(count_cache_control(b), 3, "request {i}: {}", short(b));
    }
    // Round k → k+1: system, tools and every message request k sent are the same JSON …
    for k in 0..2 {
        let (a, b) = (&parsed[k], &parsed[k + 1]);
        assert_eq!(a["system"], b["system"], "system changed {k}→{}", k + 1);
        assert_eq!(a["tools"], b["tools"], "tools changed {k}→{}", k + 1);
        let (am, bm) = (
            a["messages"].as_array().unwrap(),
            b["messages"].as_array().unwrap(),
        );
        let n = am.len();
        assert!(bm.len() > n);
        for i in 0..n {
            let want = if i + 1 == n {
                strip_last_block_breakpoint(am[i].clone())
            } else {
                am[i].clone()
            };
            assert_eq!(want, bm[i], "message {i} changed {k}→{}", k + 1);
        }
        // … and the same bytes.
        let (ra, rb) = (raw_parts(&raw[k]), raw_parts(&raw[k + 1]));
        assert_eq!(ra.system, rb.system, "system bytes changed {k}→{}", k + 1);
        assert_eq!(ra.tools, rb.tools, "tools bytes changed {k}→{}", k + 1);
        for i in 0..n {
            let want = if i + 1 == n {
                without_breakpoint(&ra.messages[i])
            } else {
                ra.messages[i].clone()
            };
            assert_eq!(
                want,
                rb.messages[i],
                "message {i} bytes changed {k}→{}",
                k + 1
            );
        }
    }
}

#[test]
fn anthropic_usage_counts_cache_reads_and_writes_in_the_prompt() {
    let body = claude::body(vec![
        claude::start(
            json!({"input_tokens": 12, "cache_creation_input_tokens": 300,
                             "cache_read_input_tokens": 2000, "output_tokens": 1}),
        ),
        claude::text(0, &["cached ", "answer"]),
        claude::end("end_turn", 25),
    ]);
    let server = FakeServer::start(vec![Reply::sse(body)]);
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat("anthropic", "claude-sonnet-4-5", &server.base_url(), &w),
    );
    assert_completed(&r, "cached answer");
    let u = &r.done["usage"];
    assert_eq!(u["promptTokens"], 12 + 2000 + 300, "{u}");
    assert_eq!(u["cachedPromptTokens"], 2000, "{u}");
    assert_eq!(u["completionTokens"], 25, "{u}");
    assert_eq!(u["totalTokens"], 12 + 2000 + 300 + 25, "{u}");
}

// ---------------------------------------------------------------------------------------------
// 5. Errors: in-stream errors, retries, overflow recovery
// ---------------------------------------------------------------------------------------------

/// For one vendor: an error event after some text fails the turn (no retry once output was
/// shown); a retryable error event before any output is retried; a client-fault error
/// event is not; a stream cut before the vendor's terminal event fails the turn; a 429 with
/// `Retry-After: 0` is retried at once.
struct ErrorCases {
    provider: &'static str,
    model: &'static str,
    /// The base URL for a server's port.
    base: fn(u16) -> String,
    partial_then_error: Vec<u8>,
    error_message: &'static str,
    retryable_first: Vec<u8>,
    client_fault_first: Vec<u8>,
    client_fault_message: &'static str,
    cut: Vec<u8>,
    answer: fn(&str) -> Vec<u8>,
    rate_limit_body: &'static str,
}

fn run_error_cases(c: ErrorCases) {
    let mut s = Sidecar::start();
    let w = ws();
    let turn = |s: &mut Sidecar, server: &FakeServer| {
        run(s, chat(c.provider, c.model, &(c.base)(server.port), &w))
    };

    let server = FakeServer::start(vec![
        Reply::sse(c.partial_then_error),
        Reply::sse((c.answer)("must not be asked")),
    ]);
    let r = turn(&mut s, &server);
    assert_failed_naming(&r, c.error_message);
    assert_eq!(
        requests_n(&server, 1).len(),
        1,
        "{}: retried after output was shown",
        c.provider
    );

    let server = FakeServer::start(vec![
        Reply::sse(c.retryable_first),
        Reply::sse((c.answer)("second try")),
    ]);
    let r = turn(&mut s, &server);
    assert_completed(&r, "second try");
    assert_eq!(retries(&r).len(), 1, "{}", short(&json!(r.frames)));
    requests_n(&server, 2);

    let server = FakeServer::start(vec![
        Reply::sse(c.client_fault_first),
        Reply::sse((c.answer)("must not be asked")),
    ]);
    let r = turn(&mut s, &server);
    assert_failed_naming(&r, c.client_fault_message);
    assert_eq!(
        requests_n(&server, 1).len(),
        1,
        "{}: a client-fault error was retried",
        c.provider
    );

    let server = FakeServer::start(vec![
        Reply::sse(c.cut),
        Reply::sse((c.answer)("must not be asked")),
    ]);
    let r = turn(&mut s, &server);
    assert_failed_naming(&r, "ended before");
    assert_eq!(requests_n(&server, 1).len(), 1, "{}", c.provider);

    let server = FakeServer::start(vec![
        Reply::status(429, c.rate_limit_body).header("retry-after", "0"),
        Reply::sse((c.answer)("after the limit")),
    ]);
    let r = turn(&mut s, &server);
    assert_completed(&r, "after the limit");
    let n = retries(&r);
    assert_eq!(n.len(), 1, "{}", short(&json!(r.frames)));
    assert_eq!(n[0]["delayMs"], 0, "Retry-After: 0 waited: {}", n[0]);
    requests_n(&server, 2);
}

#[test]
fn anthropic_stream_errors_retries_and_cuts() {
    let partial_then_error = {
        let mut b = claude::body(vec![
            claude::start(claude::usage(10)),
            claude::text(0, &["Half an ans"]),
        ]);
        b.extend_from_slice(
            b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}\n\n",
        );
        b
    };
    let overloaded = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n".to_vec();
    let invalid = b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"messages.1.content.0: unexpected tool_use_id\"}}\n\n".to_vec();
    let cut = claude::body(vec![
        claude::start(claude::usage(10)),
        claude::text(0, &["cut short"]),
    ]);
    run_error_cases(ErrorCases {
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        base: |p| format!("http://127.0.0.1:{p}"),
        partial_then_error,
        error_message: "Internal server error",
        retryable_first: overloaded,
        client_fault_first: invalid,
        client_fault_message: "unexpected tool_use_id",
        cut,
        answer: claude::answer,
        rate_limit_body: r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
    });
}

#[test]
fn responses_stream_errors_retries_and_cuts() {
    let partial_then_error = {
        let m = oai::message(0, "msg_p", &["Half an ans"]);
        let mut events = m.events;
        events.truncate(3); // added, part added, one delta
        let err = json!({"type": "error", "code": "server_error",
            "message": "The server had an error while processing your request.", "param": null});
        oai::stream(
            "resp_p",
            vec![oai::Item {
                events,
                item: Value::Null,
            }],
            Some(err),
        )
    };
    let failed = |code: &str, message: &str| {
        json!({"type": "response.failed", "response": {"id": "resp_f", "object": "response",
            "status": "failed", "output": [], "usage": null,
            "error": {"code": code, "message": message}}})
    };
    let retryable_first = oai::stream(
        "resp_f",
        vec![],
        Some(failed("server_error", "The model is overloaded.")),
    );
    let client_fault_first = oai::stream(
        "resp_f",
        vec![],
        Some(failed("invalid_prompt", "Invalid prompt: flagged content.")),
    );
    let cut = {
        let m = oai::message(0, "msg_c", &["cut ", "short"]);
        oai::stream("resp_c", vec![m], None)
    };
    run_error_cases(ErrorCases {
        provider: "responses",
        model: "gpt-5",
        base: |p| format!("http://127.0.0.1:{p}/v1"),
        partial_then_error,
        error_message: "The server had an error while processing your request.",
        retryable_first,
        client_fault_first,
        client_fault_message: "Invalid prompt: flagged content.",
        cut,
        answer: oai::answer,
        rate_limit_body: r#"{"error":{"message":"Rate limit reached for gpt-5 on tokens per min (TPM).","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#,
    });
}

#[test]
fn gemini_stream_errors_retries_and_cuts() {
    let partial_then_error = data_sse(&[
        gem::chunk("resp-e", json!([{"text": "Half an ans"}]), None, None),
        json!({"error": {"code": 500, "message": "An internal error has occurred. Please retry.", "status": "INTERNAL"}}),
    ]);
    let retryable_first = data_sse(&[json!({"error": {"code": 503,
        "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}})]);
    let client_fault_first = data_sse(&[json!({"error": {"code": 400,
        "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"}})]);
    let cut = data_sse(&[gem::chunk(
        "resp-c",
        json!([{"text": "cut short"}]),
        None,
        None,
    )]);
    run_error_cases(ErrorCases {
        provider: "google",
        model: "gemini-2.5-flash",
        base: |p| format!("http://127.0.0.1:{p}/v1beta"),
        partial_then_error,
        error_message: "An internal error has occurred",
        retryable_first,
        client_fault_first,
        client_fault_message: "Request contains an invalid argument.",
        cut,
        answer: gem::answer,
        rate_limit_body: r#"{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}"#,
    });
}

#[test]
fn anthropic_529_overloaded_is_retried() {
    let server = FakeServer::start(vec![
        Reply::status(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Reply::sse(claude::answer("back again")),
    ]);
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat("claude", "claude-sonnet-4-5", &server.base_url(), &w),
    );
    assert_completed(&r, "back again");
    let n = retries(&r);
    assert_eq!(n.len(), 1, "{}", short(&json!(r.frames)));
    assert!(
        n[0]["reason"].as_str().unwrap_or_default().contains("529"),
        "{}",
        n[0]
    );
    requests_n(&server, 2);
}

/// `pairs` user/assistant exchanges, then the current question: more than the 16 messages
/// compaction keeps for a large window, so there is a middle to summarize.
fn history(pairs: usize) -> Vec<Value> {
    let mut v = Vec::new();
    for i in 0..pairs {
        v.push(json!({"role": "user", "content": format!("question {i} {}", "q".repeat(60))}));
        v.push(json!({"role": "assistant", "content": format!("answer {i} {}", "a".repeat(60))}));
    }
    v.push(json!({"role": "user", "content": "the current question"}));
    v
}

/// The vendor's overflow error, then the summary the compaction asks for, then the answer:
/// the host sees an `overflow_recovery` notice and the recovered answer; the last request
/// carries the summary.
fn overflow_recovers(provider: &str, model: &str, base: String, server: &FakeServer) {
    let mut s = Sidecar::start();
    let p = json!({"provider": provider, "model": model, "baseUrl": base, "apiKey": KEY,
                   "chatId": format!("chat_overflow_{provider}"), "messages": history(12)});
    let r = run(&mut s, p);
    assert_completed(&r, "recovered");
    let n = overflow_notices(&r);
    assert_eq!(n.len(), 1, "{}", short(&json!(r.frames)));
    assert_eq!(n[0]["hook"], "on_request_error");
    assert_eq!(n[0]["compacted"], true, "{}", n[0]);
    assert_eq!(n[0]["summary"], "provider", "{}", n[0]);
    let reqs = requests_n(server, 3);
    let last = reqs[2].body.to_string();
    assert!(
        last.contains("SUMMARY-OF-EARLIER"),
        "{provider}: the retried request lacks the summary: {}",
        short(&last)
    );
    assert!(
        last.len() < reqs[0].body.to_string().len(),
        "{provider}: nothing was compacted"
    );
}

#[test]
fn anthropic_prompt_too_long_is_recovered_by_compaction() {
    let server = FakeServer::start(vec![
        Reply::status(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215123 tokens > 200000 maximum"}}"#,
        ),
        Reply::sse(claude::answer("SUMMARY-OF-EARLIER")),
        Reply::sse(claude::answer("recovered")),
    ]);
    overflow_recovers("anthropic", "claude-sonnet-4-5", server.base_url(), &server);
    for q in server.requests() {
        check_anthropic_body(&q.body);
    }
}

#[test]
fn responses_context_length_exceeded_is_recovered_by_compaction() {
    let err = json!({"type": "error", "code": "context_length_exceeded",
        "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "param": "input"});
    let server = FakeServer::start(vec![
        Reply::sse(oai::stream("resp_o", vec![], Some(err))),
        Reply::sse(oai::answer("SUMMARY-OF-EARLIER")),
        Reply::sse(oai::answer("recovered")),
    ]);
    overflow_recovers("responses", "gpt-5", server.base_url(), &server);
    for q in server.requests() {
        check_responses_body(&q.body);
    }
}

#[test]
fn gemini_input_token_count_exceeded_is_recovered_by_compaction() {
    let server = FakeServer::start(vec![
        Reply::status(
            400,
            r#"{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
        ),
        Reply::sse(gem::answer("SUMMARY-OF-EARLIER")),
        Reply::sse(gem::answer("recovered")),
    ]);
    let base = format!("http://127.0.0.1:{}/v1beta", server.port);
    overflow_recovers("google", "gemini-2.5-pro", base, &server);
    for q in server.requests() {
        check_gemini_body(&q.body);
    }
}

// ---------------------------------------------------------------------------------------------
// 6. models.list
// ---------------------------------------------------------------------------------------------

fn listed<'a>(r: &'a Value, id_suffix: &str) -> &'a Value {
    r["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"].as_str().unwrap_or_default().ends_with(id_suffix))
        .unwrap_or_else(|| panic!("{id_suffix} not listed: {r}"))
}

#[test]
fn models_list_speaks_anthropic_and_google() {
    let mut s = Sidecar::start();
    let a = FakeServer::start(vec![Reply::status(
        200,
        r#"{"data":[
          {"id":"claude-sonnet-4-5-20250929","display_name":"Claude Sonnet 4.5","type":"model","created_at":"2025-09-29T00:00:00Z"},
          {"id":"claude-zz-unlisted-1","display_name":"Claude ZZ","type":"model","created_at":"2025-01-01T00:00:00Z"}],
          "has_more":false,"first_id":"claude-sonnet-4-5-20250929","last_id":"claude-zz-unlisted-1"}"#,
    )]);
    let r = s.ok(
        "models.list",
        json!({"provider": "anthropic", "baseUrl": format!("http://127.0.0.1:{}", a.port), "apiKey": KEY}),
    );
    assert_eq!(r["catalogStatus"], "live", "{r}");
    let q = &requests_n(&a, 1)[0];
    assert_eq!(q.method, "GET");
    assert_eq!(q.path, "/v1/models");
    assert_eq!(q.header("x-api-key"), Some(KEY));
    assert_eq!(q.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(q.header("authorization"), None);
    assert_eq!(
        listed(&r, "claude-sonnet-4-5-20250929")["name"],
        "Claude Sonnet 4.5"
    );
    assert_eq!(listed(&r, "claude-zz-unlisted-1")["name"], "Claude ZZ");

    let g = FakeServer::start(vec![Reply::status(
        200,
        r#"{"models":[
          {"name":"models/gemini-2.5-pro","version":"2.5","displayName":"Gemini 2.5 Pro",
           "inputTokenLimit":1048576,"outputTokenLimit":65536,
           "supportedGenerationMethods":["generateContent","countTokens"]},
          {"name":"models/gemini-zz-test","displayName":"Gemini ZZ",
           "inputTokenLimit":123456,"outputTokenLimit":8192,
           "supportedGenerationMethods":["generateContent"]}]}"#,
    )]);
    let r = s.ok(
        "models.list",
        json!({"provider": "google", "baseUrl": format!("http://127.0.0.1:{}/v1beta", g.port), "apiKey": KEY}),
    );
    assert_eq!(r["catalogStatus"], "live", "{r}");
    let q = &requests_n(&g, 1)[0];
    assert_eq!(q.method, "GET");
    assert_eq!(q.path, "/v1beta/models");
    assert_eq!(q.header("x-goog-api-key"), Some(KEY));
    assert!(!q.path.contains("key="), "{}", q.path);
    assert_eq!(q.header("authorization"), None);
    let pro = listed(&r, "gemini-2.5-pro");
    assert_eq!(pro["name"], "Gemini 2.5 Pro");
    assert_eq!(pro["window"], 1048576, "{pro}");
    // An unknown model's window can only come from inputTokenLimit.
    assert_eq!(listed(&r, "gemini-zz-test")["window"], 123456, "{r}");
}
