use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::super::native::{Decode, NativeConfig, Wire, decode_parts};
use super::super::types::{
    LlmError, LlmErrorKind, LlmEvent, LlmRequest, Message, Part, RawChunk, Role, SamplingDefaults,
    ToolCall, Usage,
};
use super::*;
use crate::llm::test_events::{Summary, fixture, summarize};

fn load(name: &str) -> Vec<u8> {
    fixture("anthropic", name)
}

// ---------------------------------------------------------------- stream

const FIXTURES: &[&str] = &[
    "text_basic",
    "tool_use",
    "tools_parallel",
    "thinking",
    "thinking_redacted_tool_cached",
    "cache_read_cumulative",
    "error_overloaded",
    "error_prompt_too_long",
    "truncated",
];

fn decode(parts: &[&[u8]], raw: bool) -> (Vec<LlmEvent>, Option<LlmError>) {
    let mut d = Decoder::new(raw);
    decode_parts(&mut d, parts)
}

fn whole(name: &str) -> (Vec<LlmEvent>, Option<LlmError>) {
    let b = load(name);
    decode(&[&b], false)
}

fn usage(input: u64, read: u64, write: u64, output: u64) -> Option<Usage> {
    let prompt = input + read + write;
    Some(Usage {
        prompt,
        completion: output,
        total: prompt + output,
        cached: read,
        cache_write: write,
    })
}

#[test]
fn text_stream() {
    let (ev, err) = whole("text_basic");
    assert_eq!(err, None);
    assert_eq!(
        ev,
        vec![
            LlmEvent::Content {
                text: "Hello".into()
            },
            LlmEvent::Content { text: "!".into() },
            LlmEvent::Usage(usage(25, 0, 0, 15).unwrap()),
            LlmEvent::Finish {
                reason: "stop".into()
            },
        ]
    );
}

#[test]
fn tool_use_stream() {
    let (ev, err) = whole("tool_use");
    let s = summarize(&ev, &err);
    assert_eq!(
        s,
        Summary {
            content: "Okay, let's check the weather for San Francisco, CA:".into(),
            calls: vec![(
                "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                "get_weather".into(),
                json!({"location": "San Francisco, CA", "unit": "fahrenheit"})
            )],
            usage: usage(472, 0, 0, 89),
            finish: Some("tool_calls".into()),
            ..Summary::default()
        }
    );
    // Tool calls come after the text, then usage, then finish.
    assert!(matches!(ev[ev.len() - 3], LlmEvent::ToolCall(_)));
}

#[test]
fn parallel_tools_and_empty_input() {
    let (ev, err) = whole("tools_parallel");
    let s = summarize(&ev, &err);
    assert_eq!(
        s.calls,
        vec![
            (
                "toolu_01A".into(),
                "get_weather".into(),
                json!({"location": "Paris, France"})
            ),
            (
                "toolu_01B".into(),
                "get_time".into(),
                json!({"timezone": "Europe/Paris"})
            ),
            ("toolu_01C".into(), "list_cities".into(), json!({})),
        ]
    );
    assert_eq!(s.finish.as_deref(), Some("tool_calls"));
    assert!(ev.iter().all(|e| match e {
        LlmEvent::ToolCall(c) => c.arguments_error.is_none(),
        _ => true,
    }));
}

#[test]
fn thinking_becomes_reasoning_and_state() {
    let (ev, err) = whole("thinking");
    let s = summarize(&ev, &err);
    assert_eq!(
        s.reasoning,
        "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0\n\nSo GCD(1071, 462) = 21"
    );
    assert_eq!(
        s.content,
        "The greatest common divisor of 1071 and 462 is **21**."
    );
    assert_eq!(s.usage, None, "the documented example carries no usage");
    assert_eq!(
        s.state,
        Some(json!({"anthropic": {"content": [{
            "type": "thinking",
            "thinking": s.reasoning,
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds...",
        }]}}))
    );
    assert_eq!(s.finish.as_deref(), Some("stop"));
    // State goes right before Finish.
    assert!(matches!(ev[ev.len() - 2], LlmEvent::State { .. }));
}

#[test]
fn thinking_redacted_tool_and_cache_usage() {
    let (ev, err) = whole("thinking_redacted_tool_cached");
    let s = summarize(&ev, &err);
    assert_eq!(err, None);
    assert_eq!(
        s.reasoning,
        "The user wants the weather in Paris. I should call get_weather."
    );
    assert_eq!(s.content, "Checking the weather.");
    assert_eq!(
        s.calls,
        vec![(
            "toolu_01Paris".into(),
            "get_weather".into(),
            json!({"location": "Paris"})
        )]
    );
    assert_eq!(s.usage, usage(21, 0, 188086, 393));
    assert_eq!(
        s.state,
        Some(json!({"anthropic": {"content": [
            {"type": "thinking", "thinking": s.reasoning,
             "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
            {"type": "redacted_thinking",
             "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
        ]}}))
    );
    let order: Vec<&str> = ev
        .iter()
        .filter_map(|e| match e {
            LlmEvent::ToolCall(_) => Some("call"),
            LlmEvent::Usage(_) => Some("usage"),
            LlmEvent::State { .. } => Some("state"),
            LlmEvent::Finish { .. } => Some("finish"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["call", "usage", "state", "finish"]);
}

#[test]
fn cache_read_usage_and_length() {
    let (ev, err) = whole("cache_read_cumulative");
    let s = summarize(&ev, &err);
    assert_eq!(s.usage, usage(50, 1800, 248, 12));
    assert_eq!(s.usage.map(|u| u.prompt), Some(2098));
    assert_eq!(s.finish.as_deref(), Some("length"));
}

#[test]
fn overloaded_mid_stream_is_retryable_after_partial_text() {
    let (ev, err) = whole("error_overloaded");
    assert_eq!(ev, vec![LlmEvent::Content { text: "Hel".into() }]);
    let e = err.expect("error");
    assert_eq!(
        e,
        LlmError::Stream {
            message: "overloaded_error: Overloaded".into(),
            client_fault: false
        }
    );
    assert!(e.retryable());
}

#[test]
fn prompt_too_long_in_stream_is_overflow() {
    let (ev, err) = whole("error_prompt_too_long");
    assert!(ev.is_empty());
    assert_eq!(err.map(|e| e.kind()), Some(LlmErrorKind::ContextOverflow));
}

#[test]
fn cut_stream_fails() {
    let (ev, err) = whole("truncated");
    let s = summarize(&ev, &err);
    assert_eq!(s.content, "Hello wor");
    assert_eq!(s.finish, None);
    match err {
        Some(LlmError::Stream {
            message,
            client_fault: false,
        }) => assert!(message.contains("ended before"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn stop_reason_without_message_stop_is_complete() {
    let body = b"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n";
    let (ev, err) = decode(&[body], false);
    assert_eq!(err, None);
    assert_eq!(
        ev.last(),
        Some(&LlmEvent::Finish {
            reason: "stop".into()
        })
    );
}

#[test]
fn every_fixture_cut_anywhere_decodes_the_same() {
    for name in FIXTURES {
        let b = load(name);
        let (want_ev, want_err) = decode(&[&b], true);
        for i in 0..=b.len() {
            let (ev, err) = decode(&[&b[..i], &b[i..]], true);
            assert_eq!(ev, want_ev, "{name} cut at {i}");
            assert_eq!(err, want_err, "{name} cut at {i}");
        }
        let bytes: Vec<&[u8]> = b.chunks(1).collect();
        let (ev, err) = decode(&bytes, true);
        assert_eq!((ev, err), (want_ev, want_err), "{name} byte by byte");
    }
}

#[test]
fn raw_chunks_per_delta_and_call() {
    let b = load("thinking_redacted_tool_cached");
    let (ev, _) = decode(&[&b], true);
    let raws: Vec<&RawChunk> = ev
        .iter()
        .filter_map(|e| match e {
            LlmEvent::Raw(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(
        raws[0].reasoning_delta.as_deref(),
        Some("The user wants the weather in Paris. ")
    );
    assert!(
        raws.iter()
            .any(|r| r.content_delta.as_deref() == Some("Checking the weather."))
    );
    assert!(
        raws.iter()
            .any(|r| r.finish_reason.as_deref() == Some("tool_calls"))
    );
    let call = raws.iter().find_map(|r| r.tool_call_delta.as_ref());
    assert_eq!(call.map(|c| c.name.as_str()), Some("get_weather"));
    let (plain, _) = decode(&[&b], false);
    assert!(!plain.iter().any(|e| matches!(e, LlmEvent::Raw(_))));
}

#[test]
fn invalid_tool_json_is_kept_raw_with_error() {
    let body = concat!(
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\": 1\"}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let (ev, err) = decode(&[body.as_bytes()], false);
    assert_eq!(err, None);
    let call = ev
        .iter()
        .find_map(|e| match e {
            LlmEvent::ToolCall(c) => Some(c),
            _ => None,
        })
        .expect("call");
    assert_eq!(call.arguments, json!("{\"a\": 1"));
    assert!(call.arguments_error.is_some());
    assert_eq!(
        ev.last(),
        Some(&LlmEvent::Finish {
            reason: "length".into()
        })
    );
}

fn error_event(kind: &str, message: &str) -> LlmError {
    let data = json!({"type": "error", "error": {"type": kind, "message": message}}).to_string();
    let body = format!("event: error\ndata: {data}\n\n");
    decode(&[body.as_bytes()], false).1.expect("error")
}

#[test]
fn in_stream_errors_are_typed() {
    assert_eq!(
        error_event("api_error", "Internal server error"),
        LlmError::Stream {
            message: "api_error: Internal server error".into(),
            client_fault: false
        }
    );
    let e = error_event("invalid_request_error", "messages.1: bad");
    assert_eq!(
        e,
        LlmError::Stream {
            message: "invalid_request_error: messages.1: bad".into(),
            client_fault: true
        }
    );
    assert!(!e.retryable());
    assert_eq!(
        error_event("rate_limit_error", "slow down"),
        LlmError::RateLimited {
            retry_after: None,
            body: "rate_limit_error: slow down".into()
        }
    );
    assert_eq!(
        error_event(
            "invalid_request_error",
            "prompt is too long: 5 tokens > 4 maximum"
        )
        .kind(),
        LlmErrorKind::ContextOverflow
    );
    // Plain text under `event: error`.
    let (_, e) = decode(&[b"event: error\ndata: upstream exploded\n\n"], false);
    assert_eq!(
        e,
        Some(LlmError::Stream {
            message: "upstream exploded".into(),
            client_fault: false
        })
    );
}

#[test]
fn unknown_events_and_blocks_are_ignored() {
    let body = concat!(
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"s\",\"name\":\"web_search\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
        "event: something_new\ndata: {\"type\":\"something_new\",\"x\":1}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"Hi\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"citations_delta\",\"citation\":{}}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let (ev, err) = decode(&[body.as_bytes()], false);
    assert_eq!(err, None);
    assert_eq!(
        ev,
        vec![
            LlmEvent::Content { text: "Hi".into() },
            LlmEvent::Finish {
                reason: "stop".into()
            }
        ]
    );
}

#[test]
fn done_after_message_stop() {
    let mut d = Decoder::new(false);
    let mut out = Vec::new();
    assert!(!d.is_done());
    let stop = super::super::sse::Frame {
        event: Some("message_stop"),
        data: b"{\"type\":\"message_stop\"}",
    };
    d.frame(stop, &mut out).expect("frame");
    assert!(d.is_done());
}

#[test]
fn http_errors_are_typed() {
    let ra = Some(Duration::from_secs(3));
    assert_eq!(
        http_error(429, "slow".into(), ra),
        LlmError::RateLimited {
            retry_after: ra,
            body: "slow".into()
        }
    );
    let e = http_error(
        529,
        "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"
            .into(),
        None,
    );
    assert_eq!(e.status(), Some(529));
    assert!(e.retryable());
    assert_eq!(
        http_error(
            400,
            "{\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 201000 tokens > 200000 maximum\"}}".into(),
            None
        )
        .kind(),
        LlmErrorKind::ContextOverflow
    );
    match http_error(401, "invalid x-api-key".into(), None) {
        LlmError::Http {
            status: 401, body, ..
        } => assert!(body.contains("ANTHROPIC_API_KEY"), "{body}"),
        other => panic!("{other:?}"),
    }
    let e = http_error(400, "bad".into(), None);
    assert_eq!(e.kind(), LlmErrorKind::Http);
    assert!(!e.retryable());
}

// ---------------------------------------------------------------- request

fn wire(defaults: Option<SamplingDefaults>) -> AnthropicWire {
    AnthropicWire::new(NativeConfig {
        base_url: "https://api.anthropic.com".into(),
        api_key: "sk-ant-test".into(),
        defaults,
    })
}

fn req(messages: Vec<Message>) -> LlmRequest {
    LlmRequest {
        model: "claude-sonnet-4-5".into(),
        messages: Arc::new(messages),
        ..LlmRequest::default()
    }
}

fn body_of(w: &AnthropicWire, r: &LlmRequest) -> Value {
    let call = w.call(r).expect("call");
    serde_json::from_slice(&call.body).expect("json body")
}

fn body(r: &LlmRequest) -> Value {
    body_of(&wire(None), r)
}

fn msg(role: Role, content: &str) -> Message {
    Message::new(role, content)
}

fn tool_msg(id: &str, content: &str) -> Message {
    let mut m = msg(Role::Tool, content);
    m.tool_call_id = Some(id.into());
    m
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args,
        arguments_error: None,
        extra_content: None,
    }
}

fn image_part(data: Option<&str>, url: Option<&str>, mt: Option<&str>) -> Part {
    Part {
        kind: "image".into(),
        text: None,
        url: url.map(Into::into),
        data: data.map(Into::into),
        media_type: mt.map(Into::into),
    }
}

fn text_part(t: &str) -> Part {
    Part {
        kind: "text".into(),
        text: Some(t.into()),
        url: None,
        data: None,
        media_type: None,
    }
}

const EPH: &str = r#"{"type":"ephemeral"}"#;

fn eph() -> Value {
    json!({"type": "ephemeral"})
}

#[test]
fn url_headers_and_basics() {
    let w = wire(None);
    let c = w.call(&req(vec![msg(Role::User, "Hi")])).expect("call");
    assert_eq!(c.url, "https://api.anthropic.com/v1/messages");
    assert!(
        c.headers
            .contains(&("x-api-key".to_string(), "sk-ant-test".to_string()))
    );
    assert!(
        c.headers
            .contains(&("anthropic-version".to_string(), "2023-06-01".to_string()))
    );
    let b: Value = serde_json::from_slice(&c.body).expect("json");
    assert_eq!(
        b,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 8192,
            "stream": true,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Hi", "cache_control": eph()}
            ]}],
        })
    );
    let v1 = AnthropicWire::new(NativeConfig {
        base_url: "http://localhost:8080/v1".into(),
        api_key: String::new(),
        defaults: None,
    });
    let c = v1.call(&req(vec![msg(Role::User, "Hi")])).expect("call");
    assert_eq!(c.url, "http://localhost:8080/v1/messages");
    assert!(!c.headers.iter().any(|(k, _)| k == "x-api-key"));
    assert_eq!(v1.name(), "anthropic");
}

#[test]
fn system_messages_are_top_level_blocks() {
    let b = body(&req(vec![
        msg(Role::System, "You are terse."),
        msg(Role::System, "Answer in French."),
        msg(Role::User, "Hi"),
    ]));
    assert_eq!(
        b["system"],
        json!([
            {"type": "text", "text": "You are terse."},
            {"type": "text", "text": "Answer in French.", "cache_control": eph()},
        ])
    );
    let roles: Vec<&str> = b["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(roles, ["user"]);
}

fn tools() -> Arc<[Value]> {
    Arc::from(vec![
        json!({"type": "function", "function": {
            "name": "read_file", "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
        }}),
        json!({"type": "function", "function": {"name": "now"}}),
    ])
}

#[test]
fn tools_are_converted_with_one_breakpoint() {
    let mut r = req(vec![msg(Role::User, "Hi")]);
    r.tools = tools();
    let b = body(&r);
    assert_eq!(
        b["tools"],
        json!([
            {"name": "read_file", "description": "Read a file",
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
            {"name": "now", "input_schema": {"type": "object", "properties": {}},
             "cache_control": eph()},
        ])
    );
    assert!(b.get("tool_choice").is_none());
}

#[test]
fn tool_choice_mapping() {
    let cases = [
        (json!("auto"), Some(json!({"type": "auto"}))),
        (json!("required"), Some(json!({"type": "any"}))),
        (json!("none"), Some(json!({"type": "none"}))),
        (
            json!({"type": "function", "function": {"name": "now"}}),
            Some(json!({"type": "tool", "name": "now"})),
        ),
        (json!("bogus"), None),
    ];
    for (given, want) in cases {
        let mut r = req(vec![msg(Role::User, "Hi")]);
        r.tools = tools();
        r.tool_choice = Some(given.clone());
        assert_eq!(body(&r).get("tool_choice").cloned(), want, "{given}");
    }
    // No tools: no tool_choice (the API refuses one alone).
    let mut r = req(vec![msg(Role::User, "Hi")]);
    r.tool_choice = Some(json!("auto"));
    assert!(body(&r).get("tool_choice").is_none());
}

fn tool_round() -> Vec<Message> {
    let mut a = msg(Role::Assistant, "Reading both.");
    a.tool_calls = vec![
        call("toolu_1", "read_file", json!({"path": "a.txt"})),
        call("toolu_2", "view_image", json!({"path": "b.png"})),
    ];
    let mut img = msg(Role::User, "");
    img.parts = vec![
        text_part("Image from view_image:"),
        image_part(Some("iVBORw0KGgo="), None, Some("image/png")),
    ];
    vec![
        msg(Role::System, "sys"),
        msg(Role::User, "Read a.txt and show b.png"),
        a,
        tool_msg("toolu_1", "hello"),
        tool_msg("toolu_2", "image attached below"),
        img,
    ]
}

#[test]
fn tool_round_merges_results_and_image_into_one_user_turn() {
    let b = body(&req(tool_round()));
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Read a.txt and show b.png"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.txt"}},
                {"type": "tool_use", "id": "toolu_2", "name": "view_image", "input": {"path": "b.png"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "image attached below"},
                {"type": "text", "text": "Image from view_image:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                 "cache_control": eph()},
            ]},
        ])
    );
}

#[test]
fn consecutive_same_role_merge_and_empty_messages_drop() {
    let mut r = req(vec![
        msg(Role::User, "one"),
        msg(Role::User, "two"),
        msg(Role::Assistant, ""),
        msg(Role::User, "three"),
        msg(Role::Assistant, "a"),
        msg(Role::Assistant, "b"),
        msg(Role::User, "four"),
    ]);
    // A tool result after user text still goes first in the turn.
    Arc::make_mut(&mut r.messages).push(tool_msg("t9", "late"));
    let b = body(&r);
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "one"},
                {"type": "text", "text": "two"},
                {"type": "text", "text": "three"},
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": "b"},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t9", "content": "late"},
                {"type": "text", "text": "four", "cache_control": eph()},
            ]},
        ])
    );
}

#[test]
fn images_by_bytes_data_url_and_url() {
    let mut u = msg(Role::User, "ignored when parts are given");
    u.parts = vec![
        text_part("look"),
        image_part(Some("AAAA"), Some("outrigger-image:x"), None),
        image_part(None, Some("data:image/jpeg;base64,/9j/4AAQ"), None),
        image_part(None, Some("https://example.com/cat.webp"), None),
        image_part(None, None, None),
    ];
    let b = body(&req(vec![u]));
    assert_eq!(
        b["messages"][0]["content"],
        json!([
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.webp"},
             "cache_control": eph()},
        ])
    );
}

#[test]
fn state_goes_back_first_and_verbatim() {
    // Decode a thinking tool round, store it the way the loop does, send the next round.
    let (ev, _) = whole("thinking_redacted_tool_cached");
    let s = summarize(&ev, &None);
    let mut a = msg(Role::Assistant, &s.content);
    a.reasoning = Some(s.reasoning.clone());
    a.reasoning_details = s.state.clone();
    a.tool_calls = s
        .calls
        .iter()
        .map(|(id, name, args)| call(id, name, args.clone()))
        .collect();
    let mut r = req(vec![
        msg(Role::User, "Weather in Paris?"),
        a,
        tool_msg("toolu_01Paris", "18°C, cloudy"),
    ]);
    r.reasoning_effort = Some("low".into());
    let b = body(&r);
    let state = s.state.expect("state");
    let blocks = state["anthropic"]["content"].as_array().expect("blocks");
    assert_eq!(
        b["messages"][1],
        json!({"role": "assistant", "content": [
            blocks[0],
            blocks[1],
            {"type": "text", "text": "Checking the weather."},
            {"type": "tool_use", "id": "toolu_01Paris", "name": "get_weather", "input": {"location": "Paris"}},
        ]})
    );
    // Byte for byte: the stored blocks appear as they serialise.
    let raw = String::from_utf8(wire(None).call(&r).expect("call").body).expect("utf8");
    for blk in blocks {
        assert!(raw.contains(&blk.to_string()), "{blk}");
    }
    // A thinking assistant turn last: its breakpoint skips the thinking blocks.
    let mut last = msg(Role::Assistant, "");
    last.reasoning_details = Some(state.clone());
    let b = body(&req(vec![msg(Role::User, "q"), last]));
    assert_eq!(b["messages"][1]["content"], Value::Array(blocks.clone()));
}

#[test]
fn other_vendors_state_is_ignored() {
    for details in [
        json!([{"type": "reasoning.encrypted", "data": "x"}]),
        json!({"responses": {"items": []}}),
        json!({"anthropic": "nonsense"}),
    ] {
        let mut a = msg(Role::Assistant, "ok");
        a.reasoning = Some("thought".into());
        a.reasoning_details = Some(details);
        let b = body(&req(vec![msg(Role::User, "q"), a, msg(Role::User, "more")]));
        assert_eq!(
            b["messages"][1],
            json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
        );
    }
    // A bare list under the key is accepted.
    let mut a = msg(Role::Assistant, "ok");
    a.reasoning_details = Some(json!({"anthropic": [{"type": "redacted_thinking", "data": "d"}]}));
    let b = body(&req(vec![msg(Role::User, "q"), a, msg(Role::User, "more")]));
    assert_eq!(
        b["messages"][1]["content"][0],
        json!({"type": "redacted_thinking", "data": "d"})
    );
}

#[test]
fn tool_call_inputs_are_objects() {
    let mut a = msg(Role::Assistant, "");
    a.tool_calls = vec![
        call("t1", "f", json!("{\"x\": 1}")),
        call("t2", "g", json!("{\"x\": 1")),
        call("t3", "h", Value::Null),
    ];
    let b = body(&req(vec![
        msg(Role::User, "q"),
        a,
        tool_msg("t1", ""),
        tool_msg("t2", "bad args"),
        tool_msg("t3", "ok"),
    ]));
    let inputs: Vec<&Value> = b["messages"][1]["content"]
        .as_array()
        .expect("content")
        .iter()
        .map(|c| &c["input"])
        .collect();
    assert_eq!(inputs, [&json!({"x": 1}), &json!({}), &json!({})]);
    // An empty tool result has no content member.
    assert_eq!(
        b["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "t1"})
    );
}

#[test]
fn thinking_from_effort() {
    let mut r = req(vec![msg(Role::User, "Hi")]);
    r.reasoning_effort = Some("medium".into());
    r.temperature = Some(0.3);
    r.top_p = Some(0.9);
    r.max_tokens = Some(4000);
    let b = body(&r);
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192})
    );
    assert_eq!(b["max_tokens"], json!(8192 + 8192));
    assert!(b.get("temperature").is_none() && b.get("top_p").is_none());
    // A max_tokens above the budget stays.
    r.max_tokens = Some(32000);
    assert_eq!(body(&r)["max_tokens"], json!(32000));
    for (effort, budget) in [
        ("minimal", Some(1024)),
        ("low", Some(2048)),
        ("high", Some(24576)),
        ("none", None),
        ("off", None),
        ("5000", Some(5000)),
        ("10", Some(1024)),
    ] {
        assert_eq!(thinking_budget(effort), budget, "{effort}");
        r.reasoning_effort = Some(effort.into());
        let b = body(&r);
        assert_eq!(
            b.get("thinking").map(|t| t["budget_tokens"].clone()),
            budget.map(Value::from),
            "{effort}"
        );
        assert_eq!(b.get("temperature").is_some(), budget.is_none(), "{effort}");
    }
    // A forced tool choice turns thinking off (the API refuses both).
    r.reasoning_effort = Some("high".into());
    r.tools = tools();
    r.tool_choice = Some(json!("required"));
    let b = body(&r);
    assert!(b.get("thinking").is_none());
    assert_eq!(b["tool_choice"], json!({"type": "any"}));
    assert_eq!(b["temperature"], json!(0.3));
}

#[test]
fn host_thinking_object_wins_and_keeps_body_valid() {
    let mut r = req(vec![msg(Role::User, "Hi")]);
    r.reasoning_effort = Some("low".into());
    r.temperature = Some(0.5);
    r.max_tokens = Some(1000);
    r.provider_options.insert(
        "thinking".into(),
        json!({"type": "enabled", "budget_tokens": 4096}),
    );
    let b = body(&r);
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 4096})
    );
    assert_eq!(b["max_tokens"], json!(4096 + 8192));
    assert!(b.get("temperature").is_none());
    // Disabled by the host: sampling fields go out.
    r.provider_options
        .insert("thinking".into(), json!({"type": "disabled"}));
    let b = body(&r);
    assert_eq!(b["temperature"], json!(0.5));
    assert_eq!(b["max_tokens"], json!(1000));
}

#[test]
fn defaults_fill_and_provider_options_win() {
    let mut extra = Map::new();
    extra.insert("top_k".into(), json!(40));
    extra.insert("max_tokens".into(), json!(1));
    extra.insert("metadata".into(), json!({"user_id": "preset"}));
    let w = wire(Some(SamplingDefaults {
        temperature: Some(0.7),
        top_p: Some(0.95),
        max_tokens: Some(2048),
        reasoning_effort: None,
        extra_body: extra,
    }));
    let mut r = req(vec![msg(Role::User, "Hi")]);
    r.temperature = Some(0.2);
    r.provider_options
        .insert("metadata".into(), json!({"user_id": "host"}));
    r.provider_options
        .insert("model".into(), json!("claude-override"));
    let b = body_of(&w, &r);
    assert_eq!(b["temperature"], json!(0.2));
    assert_eq!(b["top_p"], json!(0.95));
    assert_eq!(
        b["max_tokens"],
        json!(2048),
        "a typed field beats extra_body"
    );
    assert_eq!(b["top_k"], json!(40));
    assert_eq!(b["metadata"], json!({"user_id": "host"}));
    assert_eq!(b["model"], json!("claude-override"));
    // Written once: no duplicate keys in the text.
    let raw = String::from_utf8(w.call(&r).expect("call").body).expect("utf8");
    assert_eq!(raw.matches("\"model\"").count(), 1);
    assert_eq!(raw.matches("\"metadata\"").count(), 1);
    // The preset's effort applies when the request has none.
    let w = wire(Some(SamplingDefaults {
        reasoning_effort: Some("high".into()),
        ..SamplingDefaults::default()
    }));
    let b = body_of(&w, &req(vec![msg(Role::User, "Hi")]));
    assert_eq!(b["thinking"]["budget_tokens"], json!(24576));
}

#[test]
fn at_most_four_breakpoints() {
    let mut r = req(tool_round());
    r.tools = tools();
    let raw = String::from_utf8(wire(None).call(&r).expect("call").body).expect("utf8");
    assert_eq!(raw.matches("cache_control").count(), 3);
}

/// The next round's body starts with this round's, up to the moving breakpoint: the
/// cached prefix is byte-stable.
#[test]
fn prefix_is_byte_stable_across_rounds() {
    let w = wire(None);
    let mut history = vec![
        msg(Role::System, "You are a coding agent."),
        msg(Role::User, "Read a.txt"),
    ];
    let mut prev: Option<Vec<u8>> = None;
    for round in 0..4 {
        let mut r = req(history.clone());
        r.tools = tools();
        r.reasoning_effort = Some("low".into());
        let b = w.call(&r).expect("call").body;
        if let Some(p) = &prev {
            let text = String::from_utf8(p.clone()).expect("utf8");
            let marker = format!(",\"cache_control\":{EPH}");
            let cut = text.rfind(&marker).expect("last breakpoint");
            assert!(
                b.starts_with(&p[..cut]),
                "round {round}: prefix changed\nprev: {}\nnext: {}",
                &text[..cut],
                String::from_utf8_lossy(&b)
            );
            // Everything after the moved breakpoint in the old body is the old tail.
            assert_eq!(&text[cut + marker.len()..], "}]}]}");
        }
        prev = Some(b);
        let mut a = msg(Role::Assistant, &format!("Round {round}."));
        a.reasoning_details = Some(json!({"anthropic": {"content": [
            {"type": "thinking", "thinking": format!("step {round}"), "signature": format!("sig{round}")}
        ]}}));
        a.tool_calls = vec![call(
            &format!("toolu_{round}"),
            "read_file",
            json!({"path": "a.txt", "line": round}),
        )];
        history.push(a);
        history.push(tool_msg(&format!("toolu_{round}"), "contents"));
        if round % 2 == 1 {
            let mut img = msg(Role::User, "");
            img.parts = vec![image_part(Some("AAAA"), None, Some("image/png"))];
            history.push(img);
        }
    }
}

#[test]
fn decoder_trait_object_from_wire() {
    let w = wire(None);
    let mut r = req(vec![msg(Role::User, "Hi")]);
    r.raw_chunks = true;
    let mut d = w.decoder(&r);
    let b = load("text_basic");
    let (ev, err) = decode_parts(&mut *d, &[&b]);
    assert_eq!(err, None);
    assert!(ev.iter().any(|e| matches!(e, LlmEvent::Raw(_))));
}

#[test]
fn preset_top_k_dropped_while_thinking() {
    let mut extra = Map::new();
    extra.insert("top_k".into(), json!(40));
    let w = wire(Some(SamplingDefaults {
        extra_body: extra,
        ..SamplingDefaults::default()
    }));
    let mut r = req(vec![msg(Role::User, "Hi")]);
    assert_eq!(body_of(&w, &r)["top_k"], json!(40));
    r.reasoning_effort = Some("low".into());
    assert!(body_of(&w, &r).get("top_k").is_none());
    // The host's own value still goes out.
    r.provider_options.insert("top_k".into(), json!(5));
    assert_eq!(body_of(&w, &r)["top_k"], json!(5));
}

#[test]
fn whitespace_only_text_is_not_sent() {
    let b = body(&req(vec![
        msg(Role::System, "  \n"),
        msg(Role::User, "q"),
        msg(Role::Assistant, " \n "),
        msg(Role::User, "\t"),
        msg(Role::User, "r"),
    ]));
    assert!(b.get("system").is_none());
    assert_eq!(
        b["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "q"},
            {"type": "text", "text": "r", "cache_control": eph()},
        ]}])
    );
}

#[test]
fn huge_host_budget_does_not_overflow() {
    let mut r = req(vec![msg(Role::User, "Hi")]);
    r.provider_options.insert(
        "thinking".into(),
        json!({"type": "enabled", "budget_tokens": u64::MAX}),
    );
    assert_eq!(body(&r)["max_tokens"], json!(u64::MAX));
}
