use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::super::native::{Decode, NativeConfig, Wire, decode_parts};
use super::super::types::{
    LlmError, LlmErrorKind, LlmEvent, LlmRequest, Message, Part, RawChunk, Role, SamplingDefaults,
    ToolCall, Usage,
};
use super::{Decoder, ResponsesWire};
use crate::llm::test_events::{fixture, text_of};

fn load(name: &str) -> Vec<u8> {
    fixture("responses", name)
}

const FIXTURES: &[&str] = &[
    "text",
    "reasoning_tool_calls",
    "incomplete_max_tokens",
    "failed_server_error",
    "error_context_length",
    "error_rate_limit_nested",
    "cut_before_completed",
];

fn decode(parts: &[&[u8]], raw: bool) -> (Vec<LlmEvent>, Option<LlmError>) {
    let mut dec = Decoder::new(raw);
    decode_parts(&mut dec, parts)
}

fn decode_fixture(name: &str) -> (Vec<LlmEvent>, Option<LlmError>) {
    decode(&[&load(name)], false)
}

/// The events after the text deltas: tool calls, usage, state, finish (in that order).
fn tail(events: &[LlmEvent]) -> Vec<LlmEvent> {
    events
        .iter()
        .filter(|e| !matches!(e, LlmEvent::Content { .. } | LlmEvent::Reasoning { .. }))
        .cloned()
        .collect()
}

fn usage(prompt: u64, completion: u64, total: u64, cached: u64) -> LlmEvent {
    LlmEvent::Usage(Usage {
        prompt,
        completion,
        total,
        cached,
        cache_write: 0,
    })
}

fn finish(reason: &str) -> LlmEvent {
    LlmEvent::Finish {
        reason: reason.into(),
    }
}

#[test]
fn text_stream() {
    let (events, err) = decode_fixture("text");
    assert_eq!(err, None);
    let (content, reasoning) = text_of(&events);
    assert_eq!(content, "Hi there! Say \"double bubble bath\" — déjà vu.\n");
    assert_eq!(reasoning, "");
    // One Content per delta: the `.done` repeats and the final output add nothing.
    let n = events
        .iter()
        .filter(|e| matches!(e, LlmEvent::Content { .. }))
        .count();
    assert_eq!(n, 5);
    assert_eq!(tail(&events), vec![usage(37, 11, 48, 0), finish("stop")]);
}

#[test]
fn reasoning_summary_state_and_two_tool_calls() {
    let (events, err) = decode_fixture("reasoning_tool_calls");
    assert_eq!(err, None);
    let (content, reasoning) = text_of(&events);
    assert_eq!(content, "");
    assert_eq!(
        reasoning,
        "**Checking the weather**\n\nThe user wants Paris and Tokyo.\n\n**Calling tools**\n\nI'll call get_weather twice."
    );
    let t = tail(&events);
    assert_eq!(t.len(), 5, "{t:?}");
    assert_eq!(
        t[0],
        LlmEvent::ToolCall(ToolCall {
            id: "call_Xq3vR9sLw2mN8pK1".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "Paris, France"}),
            arguments_error: None,
            extra_content: None,
        })
    );
    assert_eq!(
        t[1],
        LlmEvent::ToolCall(ToolCall {
            id: "call_Bz7tY4hJc6dF0gQ5".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "Tokyo, Japan", "unit": "c"}),
            arguments_error: None,
            extra_content: None,
        })
    );
    // Usage with the cached prompt tokens (reasoning tokens are inside `completion`).
    assert_eq!(t[2], usage(1200, 180, 1380, 1024));
    let LlmEvent::State { data } = &t[3] else {
        panic!("expected State, got {:?}", t[3]);
    };
    let items = data["responses"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["type"], "reasoning");
    assert_eq!(
        items[0]["id"],
        "rs_68af1c4f12c481909a8cbe0ff4d3c1bb0a3c6ad5e4a1e7f2"
    );
    assert!(
        items[0]["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("gAAAAAB")
    );
    assert_eq!(items[0]["summary"].as_array().unwrap().len(), 2);
    assert_eq!(t[4], finish("tool_calls"));
}

#[test]
fn incomplete_is_length_with_usage() {
    let (events, err) = decode_fixture("incomplete_max_tokens");
    assert_eq!(err, None);
    assert_eq!(text_of(&events).0, "Once upon a time");
    assert_eq!(tail(&events), vec![usage(20, 16, 36, 0), finish("length")]);
}

#[test]
fn in_stream_errors_are_typed() {
    let (events, err) = decode_fixture("failed_server_error");
    assert!(events.is_empty());
    match err {
        Some(LlmError::Stream {
            message,
            client_fault: false,
        }) => {
            assert!(message.contains("The server had an error"), "{message}");
            assert!(message.contains("server_error"), "{message}");
        }
        other => panic!("expected a retryable stream error, got {other:?}"),
    }

    let (_, err) = decode_fixture("error_context_length");
    assert!(
        matches!(&err, Some(LlmError::ContextOverflow { message }) if message.contains("context window")),
        "{err:?}"
    );

    let (_, err) = decode_fixture("error_rate_limit_nested");
    assert!(
        matches!(&err, Some(LlmError::RateLimited { retry_after: None, body }) if body.contains("tokens per min")),
        "{err:?}"
    );
}

#[test]
fn failed_with_a_request_problem_is_not_retried() {
    let body = br#"data: {"type":"response.failed","response":{"status":"failed","error":{"code":"invalid_prompt","message":"Invalid prompt: flagged."}}}

"#;
    let (_, err) = decode(&[body], false);
    let err = err.unwrap();
    assert_eq!(err.kind(), LlmErrorKind::Stream);
    assert!(!err.retryable(), "{err:?}");
}

#[test]
fn a_stream_cut_before_the_terminal_event_fails() {
    let (events, err) = decode_fixture("cut_before_completed");
    // The half call is never emitted.
    assert!(events.is_empty(), "{events:?}");
    match err {
        Some(LlmError::Stream {
            message,
            client_fault: false,
        }) => assert!(message.contains("ended before"), "{message}"),
        other => panic!("expected a stream error, got {other:?}"),
    }
}

#[test]
fn every_fixture_cut_at_every_byte_boundary_gives_identical_events() {
    for name in FIXTURES {
        let body = load(name);
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        for raw in [false, true] {
            let whole = decode(&[&body], raw);
            assert_eq!(
                decode(&bytes, raw),
                whole,
                "{name} (raw {raw}) byte by byte"
            );
        }
        // Raw chunks on: every event of the plain decode, and more.
        let whole = decode(&[&body], true);
        for i in 0..=body.len() {
            let cut = decode(&[&body[..i], &body[i..]], true);
            assert_eq!(cut, whole, "{name} cut at {i}");
        }
    }
}

#[test]
fn raw_chunks_mirror_deltas_calls_and_finish() {
    let (events, err) = decode(&[&load("reasoning_tool_calls")], true);
    assert_eq!(err, None);
    let raws: Vec<&RawChunk> = events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::Raw(r) => Some(r),
            _ => None,
        })
        .collect();
    let reasoning: String = raws
        .iter()
        .filter_map(|r| r.reasoning_delta.clone())
        .collect();
    assert_eq!(reasoning, text_of(&events).1);
    let calls: Vec<&str> = raws
        .iter()
        .filter_map(|r| r.tool_call_delta.as_ref().map(|c| c.id.as_str()))
        .collect();
    assert_eq!(calls, ["call_Xq3vR9sLw2mN8pK1", "call_Bz7tY4hJc6dF0gQ5"]);
    assert!(
        raws.iter()
            .any(|r| r.finish_reason.as_deref() == Some("tool_calls"))
    );
}

#[test]
fn whole_items_without_deltas_are_not_lost() {
    // A gateway that forwards only finished items (and the final response).
    let body = br#"data: {"type":"response.output_item.done","item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Think."}],"encrypted_content":"enc"}}

data: {"type":"response.output_item.done","item":{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello"}]}}

data: {"type":"response.completed","response":{"status":"completed","output":[{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Think."}],"encrypted_content":"enc"},{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello"}]},{"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":"{\"a\":1}"}],"usage":{"input_tokens":3,"output_tokens":2}}}

"#;
    let (events, err) = decode(&[body], false);
    assert_eq!(err, None);
    assert_eq!(text_of(&events), ("Hello".into(), "Think.".into()));
    let t = tail(&events);
    assert!(
        matches!(&t[0], LlmEvent::ToolCall(c) if c.id == "call_1" && c.arguments == json!({"a": 1}))
    );
    // No total: input + output.
    assert_eq!(t[1], usage(3, 2, 5, 0));
    assert!(
        matches!(&t[2], LlmEvent::State { data } if data["responses"]["items"].as_array().unwrap().len() == 1)
    );
    assert_eq!(t[3], finish("tool_calls"));
}

#[test]
fn bad_arguments_are_kept_raw_with_the_reason() {
    let body = br#"data: {"type":"response.output_item.added","item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":""}}

data: {"type":"response.function_call_arguments.delta","item_id":"fc_1","delta":"{\"a\":"}

data: {"type":"response.incomplete","response":{"incomplete_details":{"reason":"max_output_tokens"}}}

"#;
    let (events, err) = decode(&[body], false);
    assert_eq!(err, None);
    match &events[0] {
        LlmEvent::ToolCall(c) => {
            assert_eq!(c.arguments, Value::String("{\"a\":".into()));
            assert!(c.arguments_error.is_some());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(events.last(), Some(&finish("length")));
}

#[test]
fn a_frame_that_is_not_json_fails_the_stream() {
    let (_, err) = decode(&[b"data: {not json\n\n"], false);
    assert_eq!(err.map(|e| e.kind()), Some(LlmErrorKind::Stream));
}

// ---- the request ----

fn wire(base: &str, defaults: Option<SamplingDefaults>) -> ResponsesWire {
    ResponsesWire::new(NativeConfig {
        base_url: base.into(),
        api_key: "sk-test".into(),
        defaults,
    })
}

fn req(messages: Vec<Message>) -> LlmRequest {
    LlmRequest {
        model: "gpt-5-mini".into(),
        messages: Arc::new(messages),
        ..LlmRequest::default()
    }
}

fn body_of(w: &ResponsesWire, r: &LlmRequest) -> Value {
    let call = w.call(r).unwrap();
    serde_json::from_slice(&call.body).unwrap()
}

fn user(text: &str) -> Message {
    Message::new(Role::User, text)
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

fn tool_result(id: &str, content: &str) -> Message {
    let mut m = Message::new(Role::Tool, content);
    m.tool_call_id = Some(id.into());
    m
}

#[test]
fn url_headers_and_fixed_fields() {
    let w = wire("https://api.openai.com/v1/", None);
    let r = req(vec![user("hi")]);
    let c = w.call(&r).unwrap();
    assert_eq!(c.url, "https://api.openai.com/v1/responses");
    assert_eq!(
        c.headers,
        vec![("authorization".to_string(), "Bearer sk-test".to_string())]
    );
    let b = body_of(&w, &r);
    assert_eq!(
        b,
        json!({
            "model": "gpt-5-mini",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
        })
    );
}

#[test]
fn system_messages_become_instructions() {
    let w = wire("https://api.openai.com/v1", None);
    let r = req(vec![
        Message::new(Role::System, "Be brief."),
        user("hi"),
        Message::new(Role::System, "Answer in French."),
    ]);
    let b = body_of(&w, &r);
    assert_eq!(b["instructions"], "Be brief.\n\nAnswer in French.");
    let input = b["input"].as_array().unwrap();
    assert_eq!(input.len(), 1);
    assert_eq!(input[0]["role"], "user");
}

#[test]
fn tool_round_history_and_consecutive_messages() {
    let w = wire("https://api.openai.com/v1", None);
    let mut asst = Message::new(Role::Assistant, "Checking.");
    asst.tool_calls = vec![
        call("call_1", "get_weather", json!({"location": "Paris"})),
        call("call_2", "broken", Value::String("{\"a\":".into())),
    ];
    let mut shot = user("");
    shot.parts = vec![
        Part {
            kind: "text".into(),
            text: Some("Screenshot:".into()),
            url: None,
            data: None,
            media_type: None,
        },
        Part {
            kind: "image".into(),
            text: None,
            url: None,
            data: Some("iVBORw0KGgo=".into()),
            media_type: Some("image/png".into()),
        },
        Part {
            kind: "image".into(),
            text: None,
            url: Some("data:image/jpeg;base64,/9j/4AAQ".into()),
            data: None,
            media_type: None,
        },
    ];
    let r = req(vec![
        user("weather?"),
        asst,
        tool_result("call_1", "18 C"),
        tool_result("call_2", "error: bad arguments"),
        // The loop's extra user turn right after the tool results: items need no
        // alternation, so it stays its own item after them.
        shot,
    ]);
    let b = body_of(&w, &r);
    assert_eq!(
        b["input"],
        json!([
            {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather",
             "arguments": "{\"location\":\"Paris\"}"},
            {"type": "function_call", "call_id": "call_2", "name": "broken", "arguments": "{\"a\":"},
            {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
            {"type": "function_call_output", "call_id": "call_2", "output": "error: bad arguments"},
            {"role": "user", "content": [
                {"type": "input_text", "text": "Screenshot:"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
                {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/4AAQ"},
            ]},
        ])
    );
}

#[test]
fn tools_are_flattened_and_tool_choice_mapped() {
    let w = wire("https://api.openai.com/v1", None);
    let mut r = req(vec![user("hi")]);
    r.tools = Arc::from(vec![
        json!({"type": "function", "function": {"name": "read", "description": "Read a file",
               "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}),
        json!({"type": "function", "function": {"name": "now", "strict": true}}),
        json!({"type": "web_search"}),
    ]);
    r.tool_choice = Some(json!({"type": "function", "function": {"name": "read"}}));
    let b = body_of(&w, &r);
    assert_eq!(
        b["tools"],
        json!([
            {"type": "function", "name": "read", "description": "Read a file",
             "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
             "strict": false},
            {"type": "function", "name": "now",
             "parameters": {"type": "object", "properties": {}}, "strict": true},
            {"type": "web_search"},
        ])
    );
    assert_eq!(
        b["tool_choice"],
        json!({"type": "function", "name": "read"})
    );
    for s in ["auto", "none", "required"] {
        r.tool_choice = Some(json!(s));
        assert_eq!(body_of(&w, &r)["tool_choice"], json!(s));
    }
}

fn reasoning_state() -> Value {
    json!({"responses": {"items": [{
        "id": "rs_1", "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Think."}],
        "encrypted_content": "gAAAA-secret"
    }]}})
}

#[test]
fn state_goes_back_before_the_turn_it_belongs_to() {
    let w = wire("https://api.openai.com/v1", None);
    let mut asst = Message::new(Role::Assistant, "");
    asst.tool_calls = vec![call("call_1", "f", json!({}))];
    asst.reasoning = Some("Think.".into());
    asst.reasoning_details = Some(reasoning_state());
    let r = req(vec![user("go"), asst, tool_result("call_1", "ok")]);
    let b = body_of(&w, &r);
    assert_eq!(
        b["input"],
        json!([
            {"role": "user", "content": [{"type": "input_text", "text": "go"}]},
            // As received, without the id (the encrypted content carries it all).
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Think."}],
             "encrypted_content": "gAAAA-secret"},
            {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
        ])
    );
}

#[test]
fn foreign_or_unusable_state_is_ignored() {
    let w = wire("https://api.openai.com/v1", None);
    for details in [
        json!({"anthropic": [{"type": "thinking", "thinking": "x", "signature": "s"}]}),
        json!([{"type": "reasoning.encrypted", "data": "x"}]),
        json!({"responses": {"items": [{"id": "rs_1", "type": "reasoning", "summary": []}]}}),
        json!({"responses": "garbage"}),
    ] {
        let mut asst = Message::new(Role::Assistant, "Done.");
        asst.reasoning_details = Some(details.clone());
        let b = body_of(&w, &req(vec![user("go"), asst]));
        assert_eq!(
            b["input"][1],
            json!({"role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}),
            "{details}"
        );
        assert_eq!(b["input"].as_array().unwrap().len(), 2, "{details}");
    }
}

#[test]
fn decoded_state_round_trips_into_the_next_request() {
    let (events, _) = decode_fixture("reasoning_tool_calls");
    let mut asst = Message::new(Role::Assistant, "");
    for e in events {
        match e {
            LlmEvent::ToolCall(c) => asst.tool_calls.push(c),
            LlmEvent::State { data } => asst.reasoning_details = Some(data),
            _ => {}
        }
    }
    let r = req(vec![
        user("weather in Paris and Tokyo?"),
        asst,
        tool_result("call_Xq3vR9sLw2mN8pK1", "18 C"),
        tool_result("call_Bz7tY4hJc6dF0gQ5", "25 C"),
    ]);
    let b = body_of(&wire("https://api.openai.com/v1", None), &r);
    let kinds: Vec<&str> = b["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().or(i["role"].as_str()).unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "user",
            "reasoning",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output"
        ]
    );
    assert!(
        b["input"][1]["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("gAAAAAB")
    );
    assert_eq!(
        b["input"][2]["arguments"],
        "{\"location\":\"Paris, France\"}"
    );
}

#[test]
fn sampling_fields_defaults_and_provider_options() {
    let defaults = SamplingDefaults {
        temperature: Some(0.2),
        top_p: Some(0.9),
        max_tokens: Some(4096),
        reasoning_effort: Some("low".into()),
        extra_body: Map::from_iter([
            ("service_tier".to_string(), json!("flex")),
            ("temperature".to_string(), json!(1.5)),
            ("truncation".to_string(), json!("auto")),
        ]),
    };
    let w = wire("https://api.openai.com/v1", Some(defaults));
    let mut r = req(vec![user("hi")]);
    let b = body_of(&w, &r);
    assert_eq!(b["temperature"], json!(0.2));
    assert_eq!(b["top_p"], json!(0.9));
    assert_eq!(b["max_output_tokens"], json!(4096));
    assert_eq!(b["reasoning"], json!({"effort": "low", "summary": "auto"}));
    assert_eq!(b["service_tier"], "flex");
    assert_eq!(b["truncation"], "auto");

    // Explicit request fields win over the preset; providerOptions win over everything.
    r.temperature = Some(0.7);
    r.max_tokens = Some(100);
    r.reasoning_effort = Some("high".into());
    r.provider_options = Map::from_iter([
        ("store".to_string(), json!(true)),
        ("truncation".to_string(), json!("disabled")),
        ("include".to_string(), json!([])),
    ]);
    let call = w.call(&r).unwrap();
    let text = String::from_utf8(call.body.clone()).unwrap();
    assert_eq!(text.matches("\"store\"").count(), 1, "{text}");
    assert_eq!(text.matches("\"truncation\"").count(), 1, "{text}");
    let b: Value = serde_json::from_slice(&call.body).unwrap();
    assert_eq!(b["temperature"], json!(0.7));
    assert_eq!(b["max_output_tokens"], json!(100));
    assert_eq!(b["reasoning"], json!({"effort": "high", "summary": "auto"}));
    assert_eq!(b["store"], json!(true));
    assert_eq!(b["include"], json!([]));
    assert_eq!(b["truncation"], "disabled");
}

#[test]
fn http_errors_are_typed() {
    let w = wire("https://api.openai.com/v1", None);
    let ra = Some(Duration::from_secs(3));
    assert_eq!(
        w.http_error(429, "slow down".into(), ra),
        LlmError::RateLimited {
            retry_after: ra,
            body: "slow down".into()
        }
    );
    let overflow = r#"{"error":{"message":"Your input exceeds the context window of this model.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
    assert_eq!(
        w.http_error(400, overflow.into(), None).kind(),
        LlmErrorKind::ContextOverflow
    );
    match w.http_error(401, "bad key".into(), None) {
        LlmError::Http { status, body, .. } => {
            assert_eq!(status, 401);
            assert!(body.contains("OPENAI_API_KEY"), "{body}");
        }
        other => panic!("{other:?}"),
    }
    match wire("https://api.x.ai/v1", None).http_error(403, "no".into(), None) {
        LlmError::Http { body, .. } => assert!(body.contains("XAI_API_KEY"), "{body}"),
        other => panic!("{other:?}"),
    }
    assert!(w.http_error(503, "overloaded".into(), None).retryable());
    assert!(!w.http_error(400, "bad request".into(), None).retryable());
}

#[test]
fn decoder_ignores_frames_after_the_terminal_event() {
    let mut dec = Decoder::new(false);
    let body = load("text");
    let (events, err) = decode_parts(&mut dec, &[&body]);
    assert_eq!(err, None);
    assert!(dec.is_done());
    assert!(matches!(events.last(), Some(LlmEvent::Finish { .. })));
}
