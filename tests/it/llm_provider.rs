//! The model provider end to end: `outrigger llm-probe` against a fake OpenAI-compatible
//! server replaying vendor fixtures, retry, cancel, compat flags, the scripted provider,
//! and `compat.describe` over JSON-RPC.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{Sidecar, base_command, run_once};
use crate::support::fake_openai::{FakeServer, Reply};
use serde_json::{Value, json};

struct Probe {
    code: i32,
    events: Vec<Value>,
    stderr: String,
}

fn probe_env(args: &[&str], env: &[(&str, &str)]) -> Probe {
    let home = tempfile::tempdir().unwrap();
    let mut all = vec!["llm-probe"];
    all.extend_from_slice(args);
    let (status, out, err) = run_once(home.path(), &all, env, b"");
    let events = out
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout line not JSON ({e}): {l}"))
        })
        .collect();
    Probe {
        code: status.code().unwrap_or(-1),
        events,
        stderr: err,
    }
}

/// Fast retries for tests: 1 ms base.
fn probe(args: &[&str]) -> Probe {
    probe_env(args, &[("OUTRIGGER_LLM_RETRY_BASE_MS", "1")])
}

fn against(server: &FakeServer, extra: &[&str]) -> Probe {
    let url = server.base_url();
    let mut args = vec!["--base-url", url.as_str(), "--model", "fake-model"];
    args.extend_from_slice(extra);
    if !extra.iter().any(|a| a.starts_with("--messages")) {
        args.push("hi");
    }
    probe(&args)
}

fn of<'a>(p: &'a Probe, kind: &str) -> Vec<&'a Value> {
    p.events.iter().filter(|e| e["event"] == kind).collect()
}

fn joined(p: &Probe, kind: &str) -> String {
    of(p, kind)
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect()
}

#[test]
fn reference_stream_and_request_shape() {
    let server = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let p = against(&server, &["--api-key", "sk-test"]);
    assert_eq!(p.code, 0, "{:?} {}", p.events, p.stderr);
    assert_eq!(joined(&p, "content"), "Hello");
    assert_eq!(
        of(&p, "usage")[0],
        &json!({"event":"usage","promptTokens":9,"completionTokens":2,"totalTokens":11,"cachedPromptTokens":0})
    );
    assert_eq!(
        p.events.last().unwrap(),
        &json!({"event":"finish","reason":"stop"})
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(r.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        r.body,
        json!({"model":"fake-model","messages":[{"role":"user","content":"hi"}],"stream":true,
               "stream_options":{"include_usage":true}}),
        "no temperature, tool_choice or max_tokens unless set"
    );
}

#[test]
fn vendor_divergences_end_to_end() {
    // (fixture, extra args, content, reasoning, tool calls, finish)
    type Case<'a> = (&'a str, &'a [&'a str], &'a str, &'a str, Value, &'a str);
    let cases: &[Case] = &[
        (
            "reasoning_content_deepseek",
            &[],
            "42",
            "Let me think.",
            json!([]),
            "stop",
        ),
        (
            "reasoning_ollama",
            &[],
            "Two",
            "We count.",
            json!([]),
            "stop",
        ),
        (
            "think_tags",
            &[],
            "Hi!",
            "The user wants hi.",
            json!([]),
            "stop",
        ),
        ("usage_in_choice_moonshot", &[], "Yo", "", json!([]), "stop"),
        (
            "reasoning_openrouter",
            &[
                "--compat",
                r#"{"reasoningDeltaFields":["reasoning","reasoning_content"]}"#,
            ],
            "Done",
            "Let me",
            json!([]),
            "stop",
        ),
        (
            "tool_calls_reference",
            &[],
            "",
            "",
            json!([["call_A","get_weather",{"city":"Paris"}],["call_B","get_time",{"tz":"CET"}]]),
            "tool_calls",
        ),
        (
            "tool_call_missing_index_gemini",
            &[],
            "",
            "",
            json!([["g1","get_weather",{"city":"Paris"}],["g2","get_time",{"tz":"CET"}]]),
            "stop",
        ),
        (
            "tool_calls_all_index_zero",
            &[],
            "",
            "",
            json!([["call_1","read",{"a":1}],["call_2","read",{"b":2}]]),
            "tool_calls",
        ),
        (
            "tool_call_empty_name_fragments",
            &[],
            "",
            "",
            json!([["365174485","search",{"q":"rust"}]]),
            "tool_calls",
        ),
        (
            "tool_call_object_arguments",
            &[],
            "",
            "",
            json!([["call_o","get_weather",{"city":"Paris","days":2}]]),
            "stop",
        ),
        (
            "azure_prompt_filter_preamble",
            &[],
            "Hi there",
            "",
            json!([]),
            "stop",
        ),
        (
            "crlf_multiline_data",
            &[],
            "multi-line",
            "",
            json!([]),
            "stop",
        ),
        ("no_done_after_finish", &[], "fine", "", json!([]), "stop"),
    ];
    for (fixture, extra, content, reasoning, calls, finish) in cases {
        let server = FakeServer::start(vec![Reply::fixture(fixture)]);
        let p = against(&server, extra);
        assert_eq!(p.code, 0, "{fixture}: {:?} {}", p.events, p.stderr);
        assert_eq!(joined(&p, "content"), *content, "{fixture}");
        assert_eq!(joined(&p, "reasoning"), *reasoning, "{fixture}");
        let got: Vec<Value> = of(&p, "toolCall")
            .iter()
            .map(|c| json!([c["id"], c["name"], c["arguments"]]))
            .collect();
        assert_eq!(Value::Array(got), *calls, "{fixture}");
        assert_eq!(p.events.last().unwrap()["reason"], *finish, "{fixture}");
    }
}

#[test]
fn errors_inside_a_200_keep_partial_text_and_are_not_retried() {
    for (fixture, partial, kind) in [
        ("error_openrouter_midstream", "Partial", "stream"),
        ("error_event_field", "Par", "stream"),
        ("truncated_no_finish", "Hello", "stream"),
        ("error_context_in_stream", "", "context_overflow"),
        ("finish_context_window_glm", "Sum", "context_overflow"),
    ] {
        let server = FakeServer::start(vec![Reply::fixture(fixture)]);
        let p = against(&server, &[]);
        assert_eq!(p.code, 1, "{fixture}");
        assert_eq!(joined(&p, "content"), partial, "{fixture}");
        let last = p.events.last().unwrap();
        assert_eq!(last["event"], "error", "{fixture}");
        assert_eq!(last["kind"], kind, "{fixture}: {last}");
        if !partial.is_empty() || kind == "context_overflow" {
            assert_eq!(
                server.requests().len(),
                1,
                "{fixture}: no retry after output"
            );
        }
    }
}

#[test]
fn an_error_before_any_output_is_retried() {
    let server = FakeServer::start(vec![
        Reply::fixture("error_openai_in_200"),
        Reply::fixture("no_usage"),
    ]);
    let p = against(&server, &[]);
    assert_eq!(p.code, 0, "{:?}", p.events);
    assert_eq!(of(&p, "retry").len(), 1);
    assert_eq!(joined(&p, "content"), "Hi");
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_non_streamed_json_completion_is_accepted() {
    let completion = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Whole","reasoning_content":"why","tool_calls":[{"id":"c9","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}"#;
    let server = FakeServer::start(vec![Reply::status(200, completion)]);
    let p = against(&server, &[]);
    assert_eq!(p.code, 0, "{:?}", p.events);
    assert_eq!(joined(&p, "content"), "Whole");
    assert_eq!(joined(&p, "reasoning"), "why");
    assert_eq!(of(&p, "toolCall")[0]["arguments"], json!({"a": 1}));
    assert_eq!(of(&p, "usage")[0]["totalTokens"], 6);
    assert_eq!(p.events.last().unwrap()["reason"], "tool_calls");
}

#[test]
fn http_500_is_tried_three_times_then_reported() {
    let server = FakeServer::start(vec![Reply::status(500, r#"{"error":{"message":"boom"}}"#)]);
    let p = against(&server, &[]);
    assert_eq!(p.code, 1);
    assert_eq!(server.requests().len(), 3, "exactly 3 attempts");
    let retries = of(&p, "retry");
    assert_eq!(retries.len(), 2);
    assert_eq!(retries[0]["attempt"], 1);
    assert_eq!(retries[1]["attempt"], 2);
    // base 1 ms: attempt 1 waits 1 ms × [0.8, 1.2), attempt 2 waits 2 ms × [0.8, 1.2).
    assert!(retries[0]["delayMs"].as_u64().unwrap() <= 1);
    assert!(retries[1]["delayMs"].as_u64().unwrap() <= 2);
    let last = p.events.last().unwrap();
    assert_eq!(
        (last["kind"].as_str(), last["status"].as_u64()),
        (Some("http"), Some(500))
    );
    assert!(last["message"].as_str().unwrap().contains("boom"));
}

#[test]
fn max_attempts_comes_from_config() {
    let server = FakeServer::start(vec![Reply::status(503, "down")]);
    let url = server.base_url();
    let p = probe_env(
        &["--base-url", &url, "--model", "m", "hi"],
        &[
            ("OUTRIGGER_LLM_RETRY_BASE_MS", "1"),
            ("OUTRIGGER_LLM_MAX_ATTEMPTS", "1"),
        ],
    );
    assert_eq!(p.code, 1);
    assert_eq!(server.requests().len(), 1);
    assert!(of(&p, "retry").is_empty());
}

#[test]
fn client_errors_are_not_retried_but_408_409_429_are() {
    for (status, retried) in [
        (400, false),
        (401, false),
        (404, false),
        (408, true),
        (409, true),
        (429, true),
    ] {
        let server = FakeServer::start(vec![Reply::status(
            status,
            r#"{"error":{"message":"nope"}}"#,
        )]);
        let p = against(&server, &[]);
        assert_eq!(p.code, 1, "{status}");
        let n = server.requests().len();
        assert_eq!(n, if retried { 3 } else { 1 }, "{status}");
        let last = p.events.last().unwrap();
        assert_eq!(last["status"], status, "{last}");
        let kind = if status == 429 {
            "rate_limited"
        } else {
            "http"
        };
        assert_eq!(last["kind"], kind);
    }
}

#[test]
fn retry_after_is_honoured_over_the_backoff() {
    let server = FakeServer::start(vec![
        Reply::status(429, r#"{"error":{"message":"slow down"}}"#).header("Retry-After", "0"),
        Reply::fixture("no_usage"),
    ]);
    let url = server.base_url();
    // A one-minute backoff base: only Retry-After: 0 can make this retry immediate.
    let p = probe_env(
        &["--base-url", &url, "--model", "m", "hi"],
        &[
            ("OUTRIGGER_LLM_RETRY_BASE_MS", "60000"),
            ("OUTRIGGER_LLM_RETRY_MAX_MS", "60000"),
        ],
    );
    assert_eq!(p.code, 0, "{:?}", p.events);
    assert_eq!(of(&p, "retry")[0]["delayMs"], 0);
    assert_eq!(joined(&p, "content"), "Hi");
}

#[test]
fn context_overflow_status_is_typed_and_not_retried() {
    let server = FakeServer::start(vec![Reply::status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}"#,
    )]);
    let p = against(&server, &[]);
    assert_eq!(p.events.last().unwrap()["kind"], "context_overflow");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn refused_max_tokens_field_is_switched_once() {
    let server = FakeServer::start(vec![
        Reply::status(
            400,
            r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#,
        ),
        Reply::fixture("no_usage"),
    ]);
    let p = against(&server, &["--max-tokens", "50"]);
    assert_eq!(p.code, 0, "{:?}", p.events);
    assert!(of(&p, "retry").is_empty(), "a field switch is not a retry");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["max_tokens"], 50);
    assert_eq!(reqs[1].body["max_completion_tokens"], 50);
    assert!(reqs[1].body.get("max_tokens").is_none());
}

#[test]
fn compat_flags_shape_the_body_and_unknown_keys_fail() {
    let server = FakeServer::start(vec![Reply::fixture("no_usage")]);
    let compat = r#"{"maxTokensField":"max_completion_tokens","supportsUsageInStreaming":false,"supportsTemperature":false,"supportsForcedToolChoice":false,"supportsReasoningEffort":false}"#;
    let tools = r#"[{"type":"function","function":{"name":"echo","parameters":{}}}]"#;
    let p = against(
        &server,
        &[
            "--compat",
            compat,
            "--max-tokens",
            "9",
            "--temperature",
            "0.3",
            "--tools",
            tools,
            "--tool-choice",
            "required",
            "--reasoning-effort",
            "low",
            "--provider-options",
            r#"{"top_k":20}"#,
        ],
    );
    assert_eq!(p.code, 0, "{:?}", p.events);
    let b = &server.requests()[0].body;
    assert_eq!(b["max_completion_tokens"], 9);
    assert!(b.get("stream_options").is_none());
    assert!(b.get("temperature").is_none());
    assert!(b.get("reasoning_effort").is_none());
    assert_eq!(b["tool_choice"], "auto");
    assert_eq!(b["tools"][0]["function"]["name"], "echo");
    assert_eq!(b["top_k"], 20);

    let p = against(&server, &["--compat", r#"{"supportsTemprature":false}"#]);
    assert_eq!(p.code, 2);
    let msg = p.events[0]["message"].as_str().unwrap();
    assert!(msg.contains("supportsTemprature"), "{msg}");
    assert_eq!(
        server.requests().len(),
        1,
        "no request after a bad compat key"
    );
}

#[test]
fn reasoning_is_echoed_on_tool_call_turns() {
    let server = FakeServer::start(vec![Reply::fixture("no_usage")]);
    let messages = json!([
        {"role":"user","content":"weather?"},
        {"role":"assistant","content":"","toolCalls":[{"id":"c1","name":"get_weather","arguments":{"city":"Paris"}}],"reasoning":"need data"},
        {"role":"tool","content":"{\"success\":true}","toolCallId":"c1","name":"get_weather"},
        {"role":"assistant","content":"","toolCalls":[{"id":"c2","name":"get_weather","arguments":{}}]},
        {"role":"tool","content":"{}","toolCallId":"c2"}
    ])
    .to_string();
    let compat =
        r#"{"reasoningEchoField":"reasoning_content","echoEmptyReasoningForToolCalls":true}"#;
    let p = against(&server, &["--messages", &messages, "--compat", compat]);
    assert_eq!(p.code, 0, "{:?}", p.events);
    let m = &server.requests()[0].body["messages"];
    assert_eq!(m[1]["reasoning_content"], "need data");
    assert_eq!(
        m[1]["tool_calls"][0]["function"]["arguments"],
        "{\"city\":\"Paris\"}"
    );
    assert_eq!(m[2]["tool_call_id"], "c1");
    assert_eq!(m[3]["reasoning_content"], "");
}

#[test]
fn env_fallbacks_and_ollama_suffix() {
    let server = FakeServer::start(vec![Reply::fixture("no_usage")]);
    let root = format!("http://127.0.0.1:{}", server.port);
    let p = probe_env(
        &["--provider", "ollama", "--model", "qwen3:8b", "hi"],
        &[
            ("OUTRIGGER_BASE_URL", &root),
            ("OUTRIGGER_API_KEY", "env-key"),
        ],
    );
    assert_eq!(p.code, 0, "{:?} {}", p.events, p.stderr);
    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer env-key"));
}

#[test]
fn raw_chunks_view() {
    let server = FakeServer::start(vec![Reply::fixture("tool_calls_reference")]);
    let p = against(&server, &["--raw"]);
    let raws = of(&p, "raw");
    assert!(raws.iter().any(|r| r["finishReason"] == "tool_calls"));
    let whole: Vec<_> = raws
        .iter()
        .filter(|r| r.get("toolCallDelta").is_some())
        .collect();
    assert_eq!(whole.len(), 2);
    assert_eq!(
        whole[0]["toolCallDelta"]["arguments"],
        json!({"city":"Paris"})
    );
}

#[test]
fn cancel_mid_stream_returns_promptly() {
    let mut body =
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"first\"}}]}\n\n".to_vec();
    body.extend_from_slice(b": keep-alive\n\n");
    let server = FakeServer::start(vec![Reply::sse(body).hang()]);
    let home = tempfile::tempdir().unwrap();
    let url = server.base_url();
    let mut child = base_command(home.path())
        .args(["llm-probe", "--base-url", &url, "--model", "m", "hi"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first, json!({"event":"content","text":"first"}));
    // The stream is now blocked in a read that will never complete on its own.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "llm-probe did not stop after cancel"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let rest: Vec<Value> = lines
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert_eq!(
        rest,
        vec![json!({"event":"error","kind":"cancelled","message":"cancelled"})]
    );
    assert_eq!(status.code(), Some(130));
    assert_eq!(server.requests().len(), 1, "cancel never retries");
}

#[test]
fn scripted_provider_replays_jsonl() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/scripts/tool_round.jsonl"
    );
    let p = probe(&["--provider", "scripted", "--script-path", path, "hi"]);
    assert_eq!(p.code, 0);
    assert_eq!(
        p.events,
        vec![
            json!({"event":"reasoning","text":"The user wants the weather."}),
            json!({"event":"content","text":"Let me "}),
            json!({"event":"content","text":"check. "}),
            json!({"event":"toolCall","id":"c1","name":"get_weather","arguments":{"city":"Paris"}}),
            json!({"event":"usage","promptTokens":22,"completionTokens":6,"totalTokens":28,"cachedPromptTokens":0}),
            json!({"event":"finish","reason":"tool_calls"}),
        ]
    );
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/scripts/events_and_error.jsonl"
    );
    let p = probe(&["--provider", "scripted", "--script-path", path, "hi"]);
    assert_eq!(p.code, 1);
    assert_eq!(joined(&p, "content"), "Hello");
    assert_eq!(
        p.events.last().unwrap(),
        &json!({"event":"error","kind":"rate_limited","status":429,"retryAfterMs":1500,
                "message":"rate limited by the provider (HTTP 429): slow down"})
    );
}

#[test]
fn scripted_format_errors_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::write_file(
        dir.path(),
        "bad.jsonl",
        "{\"text\":\"ok\"}\n\n{\"txt\":\"typo\"}\n",
    );
    let p = probe(&[
        "--provider",
        "scripted",
        "--script-path",
        path.to_str().unwrap(),
        "hi",
    ]);
    assert_eq!(p.code, 2);
    let msg = p.events[0]["message"].as_str().unwrap();
    assert!(msg.contains("line 3") && msg.contains("txt"), "{msg}");
}

#[test]
fn compat_describe_over_rpc() {
    let mut s = Sidecar::start();
    let r = s.ok("compat.describe", Value::Null);
    let flags = r["flags"].as_array().unwrap();
    let keys: Vec<&str> = flags.iter().map(|f| f["key"].as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "supportsUsageInStreaming",
            "maxTokensField",
            "supportsReasoningEffort",
            "supportsTemperature",
            "reasoningDeltaFields",
            "reasoningEchoField",
            "supportsForcedToolChoice",
            "echoEmptyReasoningForToolCalls",
            "cachedTokensFields"
        ]
    );
    for f in flags {
        for k in ["field", "kind", "default", "description"] {
            assert!(f.get(k).is_some_and(|v| !v.is_null()), "{f} lacks {k}");
        }
    }
    assert_eq!(flags[1]["kind"], "enum:max_tokens,max_completion_tokens");
    assert_eq!(
        flags[4]["default"],
        json!(["reasoning_content", "reasoning"])
    );
}
