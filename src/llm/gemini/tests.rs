//! Unit tests of `gemini`: the fixtures of `tests/fixtures/gemini/` (whole and cut at every
//! byte), the request body, schemas, and error typing.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::*;
use crate::llm::test_events::{calls, fixture, text_of};

fn load(name: &str) -> Vec<u8> {
    fixture("gemini", name)
}
use crate::llm::native::decode_parts;
use crate::llm::types::{
    LlmErrorKind, LlmEvent, Message, Part, RawChunk, Role, SamplingDefaults, ToolCall, Usage,
};

fn decode(body: &[u8], raw: bool) -> (Vec<LlmEvent>, Option<LlmError>) {
    decode_parts(&mut Decoder::new(raw), &[body])
}

fn usage(events: &[LlmEvent]) -> Option<Usage> {
    events.iter().find_map(|e| match e {
        LlmEvent::Usage(u) => Some(*u),
        _ => None,
    })
}

fn finish(events: &[LlmEvent]) -> Option<String> {
    match events.last() {
        Some(LlmEvent::Finish { reason }) => Some(reason.clone()),
        _ => None,
    }
}

fn state(events: &[LlmEvent]) -> Option<Value> {
    events.iter().find_map(|e| match e {
        LlmEvent::State { data } => Some(data.clone()),
        _ => None,
    })
}

const FIXTURES: &[&str] = &[
    "text",
    "thinking_signature",
    "tool_calls",
    "tool_call_with_id",
    "cached_usage",
    "max_tokens",
    "safety",
    "prompt_blocked",
    "error_midstream",
    "error_rate_limit",
    "error_overflow",
    "error_invalid_argument",
    "truncated",
    "malformed_call",
];

#[test]
fn every_fixture_is_listed() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gemini");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_suffix(".sse").map(str::to_string)
        })
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = FIXTURES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

#[test]
fn every_fixture_cut_at_every_byte_boundary_gives_identical_events() {
    for name in FIXTURES {
        let body = load(name);
        for raw in [false, true] {
            let whole = decode(&body, raw);
            for i in 0..=body.len() {
                let cut = decode_parts(&mut Decoder::new(raw), &[&body[..i], &body[i..]]);
                assert_eq!(cut, whole, "{name} cut at byte {i} (raw {raw})");
            }
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            let one_by_one = decode_parts(&mut Decoder::new(raw), &bytes);
            assert_eq!(one_by_one, whole, "{name} byte by byte (raw {raw})");
        }
    }
}

#[test]
fn text_stream() {
    let (ev, err) = decode(&load("text"), false);
    assert_eq!(err, None);
    assert_eq!(
        text_of(&ev).0,
        "The sky is blue because of Rayleigh scattering: short wavelengths scatter more. ✓"
    );
    assert_eq!(
        usage(&ev),
        Some(Usage {
            prompt: 9,
            completion: 18,
            total: 27,
            cached: 0,
            cache_write: 0
        })
    );
    assert_eq!(state(&ev), None);
    assert_eq!(finish(&ev).as_deref(), Some("stop"));
    // Content deltas in arrival order, then usage, then finish.
    assert!(matches!(ev[0], LlmEvent::Content { .. }));
    assert_eq!(ev.len(), 5);
}

#[test]
fn thoughts_are_reasoning_and_the_answer_signature_is_state() {
    let (ev, err) = decode(&load("thinking_signature"), false);
    assert_eq!(err, None);
    let (content, reasoning) = text_of(&ev);
    assert_eq!(content, "Yes, 97 is prime.");
    assert!(reasoning.starts_with("**Weighing the options**"));
    assert!(reasoning.ends_with("up to 9."));
    assert_eq!(
        state(&ev),
        Some(json!({"google": {"textSignature": "CiQBVKhc7ZsigA=="}}))
    );
    let u = usage(&ev).unwrap();
    assert_eq!((u.prompt, u.completion, u.total), (12, 306, 318));
    // Usage, then state, then finish.
    let n = ev.len();
    assert!(matches!(ev[n - 3], LlmEvent::Usage(_)));
    assert!(matches!(ev[n - 2], LlmEvent::State { .. }));
    assert_eq!(finish(&ev).as_deref(), Some("stop"));
}

#[test]
fn parallel_calls_keep_their_signature_and_get_unique_ids() {
    let (ev, err) = decode(&load("tool_calls"), false);
    assert_eq!(err, None);
    let c = calls(&ev);
    assert_eq!(c.len(), 3);
    assert_eq!(c[0].id, "call_rsp-tools-1_0");
    assert_eq!(c[1].id, "call_rsp-tools-1_1");
    assert_eq!(c[2].id, "call_rsp-tools-1_2");
    assert_eq!(
        (c[0].name.as_str(), &c[0].arguments),
        ("get_weather", &json!({"location": "Paris"}))
    );
    assert_eq!(c[1].arguments, json!({"location": "London"}));
    assert_eq!(
        (c[2].name.as_str(), &c[2].arguments),
        ("get_time", &json!({}))
    );
    assert_eq!(
        c[0].extra_content,
        Some(json!({"google": {"thought_signature": "EvsBCvgBAdHtim9sig1"}}))
    );
    assert_eq!(c[1].extra_content, None);
    assert!(c.iter().all(|c| c.arguments_error.is_none()));
    assert_eq!(text_of(&ev).1, "Checking both cities.");
    assert_eq!(state(&ev), None, "call signatures ride on the calls");
    assert_eq!(usage(&ev).map(|u| u.completion), Some(90));
    assert_eq!(finish(&ev).as_deref(), Some("tool_calls"));
}

#[test]
fn a_call_with_its_own_id_keeps_it() {
    let (ev, _) = decode(&load("tool_call_with_id"), false);
    let c = calls(&ev);
    assert_eq!(c[0].id, "fc-7f3a");
    assert_eq!(c[0].arguments, json!({"path": "src/main.rs", "limit": 20}));
}

#[test]
fn calls_without_response_id_still_get_ids() {
    let body = b"data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{}}}]},\"finishReason\":\"STOP\"}]}\n\n";
    let (ev, err) = decode(body, false);
    assert_eq!(err, None);
    let id = &calls(&ev)[0].id;
    assert!(
        id.starts_with("call_") && id.ends_with("_0") && id.len() > 8,
        "{id}"
    );
}

#[test]
fn cached_tokens() {
    let (ev, err) = decode(&load("cached_usage"), false);
    assert_eq!(err, None);
    assert_eq!(
        usage(&ev),
        Some(Usage {
            prompt: 2100,
            completion: 4,
            total: 2104,
            cached: 2048,
            cache_write: 0
        })
    );
}

#[test]
fn finish_reasons_normalised() {
    assert_eq!(
        finish(&decode(&load("max_tokens"), false).0).as_deref(),
        Some("length")
    );
    let (ev, err) = decode(&load("safety"), false);
    assert_eq!(err, None);
    assert_eq!(text_of(&ev).0, "I can");
    assert_eq!(finish(&ev).as_deref(), Some("safety"));
}

fn error_of(name: &str) -> (Vec<LlmEvent>, LlmError) {
    let (ev, err) = decode(&load(name), false);
    (ev, err.unwrap_or_else(|| panic!("{name}: no error")))
}

#[test]
fn in_stream_errors_are_typed() {
    let (ev, e) = error_of("error_midstream");
    assert_eq!(
        text_of(&ev).0,
        "Partial",
        "text before the error was emitted"
    );
    assert!(!ev.iter().any(|e| matches!(e, LlmEvent::Finish { .. })));
    assert_eq!(e.kind(), LlmErrorKind::Stream);
    assert!(e.retryable());
    assert!(
        e.to_string()
            .contains("try again later. (UNAVAILABLE, code 503)"),
        "{e}"
    );

    let (_, e) = error_of("error_rate_limit");
    assert_eq!(
        e,
        LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(38)),
            body: "You exceeded your current quota, please check your plan and billing details."
                .into()
        }
    );

    let (_, e) = error_of("error_overflow");
    assert_eq!(e.kind(), LlmErrorKind::ContextOverflow);

    let (_, e) = error_of("error_invalid_argument");
    assert_eq!(
        e,
        LlmError::Stream {
            message: "Function call is missing a thought_signature in functionCall parts. (INVALID_ARGUMENT, code 400)".into(),
            client_fault: true
        }
    );
    assert!(!e.retryable());

    let (_, e) = error_of("prompt_blocked");
    assert!(matches!(
        e,
        LlmError::Stream {
            client_fault: true,
            ..
        }
    ));
    assert!(e.to_string().contains("PROHIBITED_CONTENT"));

    let (_, e) = error_of("malformed_call");
    assert!(e.retryable());
    assert!(e.to_string().contains("print(default_api.x("), "{e}");
}

#[test]
fn internal_error_is_retryable() {
    let e = decode::stream_error(
        &json!({"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}),
    );
    assert!(matches!(
        e,
        LlmError::Stream {
            client_fault: false,
            ..
        }
    ));
}

#[test]
fn stream_cut_before_finish_reason_fails() {
    let (ev, e) = error_of("truncated");
    assert_eq!(text_of(&ev).0, "The answer is forty");
    assert_eq!(
        e,
        LlmError::Stream {
            message: "the Gemini stream ended before finishReason: the connection was cut".into(),
            client_fault: false
        }
    );
    assert!(!Decoder::new(false).is_done());
}

#[test]
fn garbage_data_is_a_stream_error() {
    let (_, e) = decode(b"data: <html>oops</html>\n\n", false);
    assert!(matches!(
        e,
        Some(LlmError::Stream {
            client_fault: false,
            ..
        })
    ));
}

#[test]
fn raw_chunks_per_delta_and_call() {
    let (ev, _) = decode(&load("tool_calls"), true);
    let raws: Vec<&RawChunk> = ev
        .iter()
        .filter_map(|e| match e {
            LlmEvent::Raw(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(
        raws[0].reasoning_delta.as_deref(),
        Some("Checking both cities.")
    );
    assert_eq!(raws[1].finish_reason.as_deref(), Some("stop"));
    let tool_raws = raws.iter().filter(|r| r.tool_call_delta.is_some()).count();
    assert_eq!(tool_raws, 3);
    let (ev, _) = decode(&load("text"), true);
    assert!(ev.iter().any(
        |e| matches!(e, LlmEvent::Raw(r) if r.content_delta.as_deref() == Some("The sky is blue"))
    ));
}

// ---- request ----

fn wire(defaults: Option<SamplingDefaults>) -> GeminiWire {
    GeminiWire::new(NativeConfig {
        base_url: "https://generativelanguage.googleapis.com/v1beta/".into(),
        api_key: "k-123".into(),
        defaults,
    })
}

fn req(model: &str, messages: Vec<Message>) -> LlmRequest {
    LlmRequest {
        model: model.into(),
        messages: Arc::new(messages),
        ..LlmRequest::default()
    }
}

fn body_of(r: &LlmRequest) -> Value {
    body_with(r, None)
}

fn body_with(r: &LlmRequest, d: Option<SamplingDefaults>) -> Value {
    let call = wire(d).call(r).unwrap();
    serde_json::from_slice(&call.body).unwrap()
}

fn msg(role: Role, content: &str) -> Message {
    Message::new(role, content)
}

fn call(id: &str, name: &str, args: Value, sig: Option<&str>) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args,
        arguments_error: None,
        extra_content: sig.map(|s| json!({"google": {"thought_signature": s}})),
    }
}

fn tool(id: &str, content: &str) -> Message {
    let mut m = msg(Role::Tool, content);
    m.tool_call_id = Some(id.into());
    m
}

fn image(data: Option<&str>, url: Option<&str>, mime: Option<&str>) -> Part {
    Part {
        kind: "image".into(),
        text: None,
        url: url.map(str::to_string),
        data: data.map(str::to_string),
        media_type: mime.map(str::to_string),
    }
}

#[test]
fn url_header_and_model_names() {
    let r = req("models/gemini-2.5-flash", vec![msg(Role::User, "hi")]);
    let c = wire(None).call(&r).unwrap();
    assert_eq!(
        c.url,
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        c.headers,
        vec![("x-goog-api-key".to_string(), "k-123".to_string())]
    );
    assert!(!c.url.contains("k-123"), "the key never rides in the URL");
    assert_eq!(
        stream_url("https://x/v1beta", "gemini-3-pro-preview").unwrap(),
        "https://x/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        stream_url("https://x/v1beta", "tunedModels/my-model").unwrap(),
        "https://x/v1beta/tunedModels/my-model:streamGenerateContent?alt=sse"
    );
    for bad in ["", "models/", "a?key=1"] {
        assert!(
            matches!(stream_url("https://x", bad), Err(LlmError::Config { .. })),
            "{bad}"
        );
    }
    assert_eq!(wire(None).name(), "google");
}

#[test]
fn minimal_body() {
    let b = body_of(&req("gemini-2.5-flash", vec![msg(Role::User, "hi")]));
    assert_eq!(
        b,
        json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    );
}

#[test]
fn system_goes_to_system_instruction() {
    let b = body_of(&req(
        "gemini-2.5-flash",
        vec![
            msg(Role::System, "Be brief."),
            msg(Role::User, "hi"),
            msg(Role::System, "Answer in French."),
        ],
    ));
    assert_eq!(
        b["systemInstruction"],
        json!({"parts": [{"text": "Be brief."}, {"text": "Answer in French."}]})
    );
    assert_eq!(b["contents"].as_array().unwrap().len(), 1);
}

#[test]
fn tool_round_shapes_merge_and_state_echo() {
    let mut a1 = msg(Role::Assistant, "Let me look.");
    a1.tool_calls = vec![
        call(
            "c1",
            "get_weather",
            json!({"location": "Paris"}),
            Some("sigA"),
        ),
        call("c2", "get_weather", json!({"location": "London"}), None),
    ];
    let mut img = msg(Role::User, "");
    img.parts = vec![image(Some("iVBORw0"), None, Some("image/png"))];
    let mut a2 = msg(Role::Assistant, "Paris is sunny.");
    a2.reasoning = Some("thought text is not sent back".into());
    a2.reasoning_details = Some(json!({"google": {"textSignature": "sigT"}}));
    let r = req(
        "gemini-2.5-flash",
        vec![
            msg(Role::User, "Weather?"),
            a1,
            tool("c1", r#"{"temp": 21, "sky": "sunny"}"#),
            tool("c2", "rainy, 14C"),
            img,
            a2,
            msg(Role::User, "Thanks"),
        ],
    );
    let b = body_of(&r);
    assert_eq!(
        b["contents"],
        json!([
            {"role": "user", "parts": [{"text": "Weather?"}]},
            {"role": "model", "parts": [
                {"text": "Let me look."},
                {"functionCall": {"name": "get_weather", "args": {"location": "Paris"}}, "thoughtSignature": "sigA"},
                {"functionCall": {"name": "get_weather", "args": {"location": "London"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"temp": 21, "sky": "sunny"}}},
                {"functionResponse": {"name": "get_weather", "response": {"result": "rainy, 14C"}}},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0"}}
            ]},
            {"role": "model", "parts": [{"text": "Paris is sunny.", "thoughtSignature": "sigT"}]},
            {"role": "user", "parts": [{"text": "Thanks"}]}
        ])
    );
}

#[test]
fn decoded_state_goes_back_verbatim() {
    // What the decoder emitted for a round is what the next body carries.
    let (ev, _) = decode(&load("tool_calls"), false);
    let mut a = msg(Role::Assistant, "");
    a.tool_calls = calls(&ev);
    let (ev2, _) = decode(&load("thinking_signature"), false);
    let mut a2 = msg(Role::Assistant, &text_of(&ev2).0);
    a2.reasoning_details = state(&ev2);
    let mut msgs = vec![msg(Role::User, "q"), a];
    for c in calls(&ev) {
        msgs.push(tool(&c.id, "ok"));
    }
    msgs.push(a2);
    let b = body_of(&req("gemini-3-pro-preview", msgs));
    let model = &b["contents"][1]["parts"];
    assert_eq!(model[0]["thoughtSignature"], "EvsBCvgBAdHtim9sig1");
    assert!(model[1].get("thoughtSignature").is_none());
    assert_eq!(
        b["contents"][2]["parts"][2]["functionResponse"]["name"],
        "get_time"
    );
    assert_eq!(
        b["contents"][3]["parts"],
        json!([{"text": "Yes, 97 is prime.", "thoughtSignature": "CiQBVKhc7ZsigA=="}])
    );
}

#[test]
fn foreign_state_is_ignored_and_unsigned_calls_get_the_stand_in_on_gemini_3() {
    let mut a = msg(Role::Assistant, "x");
    a.reasoning_details = Some(json!([{"type": "reasoning.text", "text": "or"}]));
    a.tool_calls = vec![
        call("c1", "f", json!({}), None),
        call("c2", "g", json!({}), None),
    ];
    let msgs = vec![msg(Role::User, "q"), a, tool("c1", "1"), tool("c2", "2")];
    let b = body_of(&req("gemini-3-flash-preview", msgs.clone()));
    let parts = &b["contents"][1]["parts"];
    assert_eq!(parts[0], json!({"text": "x"}));
    assert_eq!(parts[1]["thoughtSignature"], body::SKIP_SIGNATURE);
    assert!(parts[2].get("thoughtSignature").is_none());
    let b = body_of(&req("gemini-2.5-pro", msgs));
    assert!(
        b["contents"][1]["parts"][1]
            .get("thoughtSignature")
            .is_none()
    );
}

#[test]
fn tool_names_follow_the_latest_call_with_that_id() {
    let mut a1 = msg(Role::Assistant, "");
    a1.tool_calls = vec![call("call_0", "first", json!({}), None)];
    let mut a2 = msg(Role::Assistant, "");
    a2.tool_calls = vec![call("call_0", "second", json!({}), None)];
    let mut orphan = tool("zzz", "?");
    orphan.name = Some("named".into());
    let b = body_of(&req(
        "gemini-2.5-flash",
        vec![
            msg(Role::User, "q"),
            a1,
            tool("call_0", "1"),
            a2,
            tool("call_0", "2"),
            orphan,
        ],
    ));
    let c = b["contents"].as_array().unwrap();
    assert_eq!(c[2]["parts"][0]["functionResponse"]["name"], "first");
    assert_eq!(c[4]["parts"][0]["functionResponse"]["name"], "second");
    assert_eq!(c[4]["parts"][1]["functionResponse"]["name"], "named");
}

#[test]
fn raw_text_arguments_go_as_an_object() {
    let mut a = msg(Role::Assistant, "");
    let mut bad = call("c1", "f", Value::String("{\"a\":1}".into()), None);
    bad.arguments_error = Some("x".into());
    a.tool_calls = vec![bad, call("c2", "g", Value::String("{oops".into()), None)];
    let b = body_of(&req("gemini-2.5-flash", vec![msg(Role::User, "q"), a]));
    let p = &b["contents"][1]["parts"];
    assert_eq!(p[0]["functionCall"]["args"], json!({"a": 1}));
    assert_eq!(p[1]["functionCall"]["args"], json!({}));
}

#[test]
fn images_in_every_spelling() {
    let mut u = msg(Role::User, "ignored when parts are given");
    u.parts = vec![
        Part {
            kind: "text".into(),
            text: Some("Look:".into()),
            url: None,
            data: None,
            media_type: None,
        },
        image(Some("AAAA"), None, None),
        image(None, Some("data:image/jpeg;base64,/9j/4AAQ"), None),
        image(None, Some("https://example.com/cat.webp?x=1"), None),
        image(None, Some("data:text/plain,not-base64"), None),
    ];
    let b = body_of(&req("gemini-2.5-flash", vec![u]));
    assert_eq!(
        b["contents"][0]["parts"],
        json!([
            {"text": "Look:"},
            {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
            {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AAQ"}},
            {"fileData": {"mimeType": "image/webp", "fileUri": "https://example.com/cat.webp?x=1"}}
        ])
    );
}

#[test]
fn empty_turns_are_left_out() {
    let b = body_of(&req(
        "gemini-2.5-flash",
        vec![
            msg(Role::User, "a"),
            msg(Role::Assistant, ""),
            msg(Role::User, "b"),
        ],
    ));
    assert_eq!(
        b["contents"],
        json!([{"role": "user", "parts": [{"text": "a"}, {"text": "b"}]}])
    );
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "Weather for a place",
        "parameters": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "location": {"type": "string", "format": "uri", "minLength": 1},
                "unit": {"type": ["string", "null"], "enum": ["c", "f", null]},
                "when": {"type": "string", "format": "date-time"},
                "days": {"type": "integer", "enum": [1, 3, 7], "description": "Span", "exclusiveMinimum": 0},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "place": {"$ref": "#/$defs/Place"},
                "mode": {"oneOf": [{"const": "fast"}, {"const": "slow"}]},
                "extra": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}
            },
            "required": ["location", "ghost"],
            "$defs": {"Place": {"type": "object", "properties": {"lat": {"type": "number", "format": "double"}}}}
        }
    }})
}

#[test]
fn tools_are_declared_with_a_gemini_schema() {
    let mut r = req("gemini-2.5-flash", vec![msg(Role::User, "hi")]);
    r.tools = Arc::from(vec![
        weather_tool(),
        json!({"type": "function", "function": {"name": "now", "description": "", "parameters": {"type": "object", "properties": {}}}}),
        json!({"type": "web_search"}),
    ]);
    let b = body_of(&r);
    assert_eq!(
        b["tools"],
        json!([{"functionDeclarations": [
            {"name": "get_weather", "description": "Weather for a place", "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "minLength": 1},
                    "unit": {"type": "string", "enum": ["c", "f"], "nullable": true},
                    "when": {"type": "string", "format": "date-time"},
                    "days": {"type": "integer", "description": "Span (one of: 1, 3, 7)"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "place": {"type": "object", "properties": {"lat": {"type": "number", "format": "double"}}},
                    "mode": {"anyOf": [{"enum": ["fast"]}, {"enum": ["slow"]}]},
                    "extra": {"type": "object"}
                },
                "required": ["location"]
            }},
            {"name": "now"}
        ]}])
    );
    assert!(b.get("toolConfig").is_none());
}

#[test]
fn schema_edge_cases() {
    // A recursive reference ends; several types become anyOf; a lone anyOf branch merges.
    let s = json!({"type": "object", "properties": {
        "node": {"$ref": "#/$defs/Node"},
        "either": {"type": ["string", "integer"]},
        "maybe": {"anyOf": [{"type": "string", "description": "d"}, {"type": "null"}]},
        "tuple": {"type": "array", "items": [{"type": "number"}, {"type": "string"}]},
        "anything": {"type": "array"},
        "free": {"type": "array", "items": true}
    }, "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}});
    let p = schema_parameters(&s).unwrap();
    assert_eq!(
        p["properties"]["either"],
        json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})
    );
    assert_eq!(
        p["properties"]["maybe"],
        json!({"type": "string", "description": "d", "nullable": true})
    );
    assert_eq!(
        p["properties"]["tuple"],
        json!({"type": "array", "items": {"type": "number"}})
    );
    for k in ["anything", "free"] {
        assert_eq!(
            p["properties"][k],
            json!({"type": "array", "items": {"type": "string"}})
        );
    }
    let mut depth = 0;
    let mut cur = &p["properties"]["node"];
    while let Some(next) = cur.get("properties").and_then(|p| p.get("next")) {
        depth += 1;
        cur = next;
    }
    assert!(depth > 3 && depth < 40, "{depth}");
    assert_eq!(schema_parameters(&json!({"type": "object"})), None);
    assert_eq!(schema_parameters(&json!("nonsense")), None);
}

#[test]
fn tool_choice_maps_to_function_calling_config() {
    let cases = [
        (
            json!("auto"),
            Some(json!({"functionCallingConfig": {"mode": "AUTO"}})),
        ),
        (
            json!("none"),
            Some(json!({"functionCallingConfig": {"mode": "NONE"}})),
        ),
        (
            json!("required"),
            Some(json!({"functionCallingConfig": {"mode": "ANY"}})),
        ),
        (
            json!({"type": "function", "function": {"name": "get_weather"}}),
            Some(
                json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}),
            ),
        ),
        (json!("whatever"), None),
    ];
    for (tc, want) in cases {
        let mut r = req("gemini-2.5-flash", vec![msg(Role::User, "hi")]);
        r.tools = Arc::from(vec![weather_tool()]);
        r.tool_choice = Some(tc.clone());
        assert_eq!(body_of(&r).get("toolConfig").cloned(), want, "{tc}");
    }
    // Without tools there is nothing to configure.
    let mut r = req("gemini-2.5-flash", vec![msg(Role::User, "hi")]);
    r.tool_choice = Some(json!("required"));
    assert!(body_of(&r).get("toolConfig").is_none());
}

#[test]
fn generation_config_and_thinking() {
    let mut r = req("gemini-2.5-flash", vec![msg(Role::User, "hi")]);
    r.temperature = Some(0.2);
    r.top_p = Some(0.9);
    r.max_tokens = Some(512);
    r.reasoning_effort = Some("medium".into());
    assert_eq!(
        body_of(&r)["generationConfig"],
        json!({"temperature": 0.2, "topP": 0.9, "maxOutputTokens": 512,
               "thinkingConfig": {"thinkingBudget": 8192, "includeThoughts": true}})
    );
    let budget = |e: &str| body::thinking_config(e, false);
    assert_eq!(
        budget("low"),
        json!({"thinkingBudget": 1024, "includeThoughts": true})
    );
    assert_eq!(
        budget("high"),
        json!({"thinkingBudget": 24576, "includeThoughts": true})
    );
    assert_eq!(budget("none"), json!({"thinkingBudget": 0}));
    assert_eq!(
        budget("minimal"),
        json!({"thinkingBudget": 512, "includeThoughts": true})
    );
    assert_eq!(
        budget("2048"),
        json!({"thinkingBudget": 2048, "includeThoughts": true})
    );
    assert_eq!(
        budget("auto"),
        json!({"thinkingBudget": -1, "includeThoughts": true})
    );
    // Gemini 3 takes a level.
    r.model = "models/gemini-3-pro-preview".into();
    r.reasoning_effort = Some("LOW".into());
    assert_eq!(
        body_of(&r)["generationConfig"]["thinkingConfig"],
        json!({"thinkingLevel": "low", "includeThoughts": true})
    );
    assert_eq!(
        body::thinking_config("none", true),
        json!({"thinkingLevel": "minimal", "includeThoughts": true})
    );
    assert!(body::uses_thinking_level("gemini-3.1-flash"));
    assert!(body::uses_thinking_level("gemini-10-ultra"));
    assert!(!body::uses_thinking_level("gemini-2.5-pro"));
    assert!(!body::uses_thinking_level("gemini-flash-latest"));
    assert!(!body::uses_thinking_level("gemma-3-27b-it"));
}

#[test]
fn defaults_fill_what_the_request_left_unset() {
    let mut extra = Map::new();
    extra.insert("top_k".into(), json!(40));
    extra.insert("stop".into(), json!("END"));
    extra.insert(
        "safetySettings".into(),
        json!([{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}]),
    );
    let d = SamplingDefaults {
        temperature: Some(1.0),
        top_p: Some(0.95),
        max_tokens: Some(1000),
        reasoning_effort: Some("low".into()),
        extra_body: extra,
    };
    let mut r = req("gemini-2.5-flash", vec![msg(Role::User, "hi")]);
    r.temperature = Some(0.3);
    let b = body_with(&r, Some(d));
    assert_eq!(
        b["generationConfig"],
        json!({"temperature": 0.3, "topP": 0.95, "maxOutputTokens": 1000, "topK": 40,
               "stopSequences": ["END"],
               "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": true}})
    );
    assert_eq!(b["safetySettings"][0]["threshold"], "BLOCK_NONE");
    assert!(b.get("top_k").is_none() && b.get("stop").is_none());
}

#[test]
fn provider_options_win() {
    let mut extra = Map::new();
    extra.insert("cachedContent".into(), json!("cachedContents/preset"));
    let d = SamplingDefaults {
        extra_body: extra,
        ..SamplingDefaults::default()
    };
    let mut r = req("gemini-2.5-flash", vec![msg(Role::User, "hi")]);
    r.temperature = Some(0.3);
    r.provider_options.insert(
        "generationConfig".into(),
        json!({"temperature": 1.5, "responseMimeType": "application/json"}),
    );
    r.provider_options
        .insert("cachedContent".into(), json!("cachedContents/abc"));
    let call = wire(Some(d)).call(&r).unwrap();
    let text = String::from_utf8(call.body.clone()).unwrap();
    assert_eq!(
        text.matches("\"generationConfig\":").count(),
        1,
        "no duplicate key: {text}"
    );
    assert_eq!(text.matches("\"cachedContent\":").count(), 1, "{text}");
    let b: Value = serde_json::from_slice(&call.body).unwrap();
    assert_eq!(
        b["generationConfig"],
        json!({"temperature": 1.5, "responseMimeType": "application/json"})
    );
    assert_eq!(b["cachedContent"], "cachedContents/abc");
}

#[test]
fn http_errors_are_typed() {
    let e = http_error(429, "{}".into(), Some(Duration::from_secs(3)));
    assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
    assert_eq!(e.kind(), LlmErrorKind::RateLimited);
    let body = r#"{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}"#;
    assert_eq!(
        http_error(429, body.into(), None).retry_after(),
        Some(Duration::from_millis(1500))
    );
    let over = r#"{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#;
    assert_eq!(
        http_error(400, over.into(), None).kind(),
        LlmErrorKind::ContextOverflow
    );
    let key = r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"reason":"API_KEY_INVALID"}]}}"#;
    let e = http_error(400, key.into(), None);
    assert!(e.to_string().contains("GEMINI_API_KEY"), "{e}");
    assert!(!e.retryable());
    let e = http_error(403, "denied".into(), None);
    assert!(
        e.to_string()
            .contains("check the API key (apiKey, OUTRIGGER_API_KEY"),
        "{e}"
    );
    let e = http_error(503, "overloaded".into(), None);
    assert_eq!(e.status(), Some(503));
    assert!(e.retryable());
    assert_eq!(
        http_error(400, "bad".into(), None).kind(),
        LlmErrorKind::Http
    );
}
