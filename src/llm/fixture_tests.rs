//! The splitter and decoder over every fixture of `tests/fixtures/sse/` (one per vendor
//! divergence and error shape of reference/hosts-and-users.md §4): what each decodes to,
//! and that cutting the body at any byte boundary changes nothing.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::accumulate::{DecodeOptions, decode_parts};
use super::compat;
use super::test_events::{Summary, fixture, summarize};
use super::types::{LlmError, LlmErrorKind, LlmEvent, Usage};

fn load(name: &str) -> Vec<u8> {
    fixture("sse", name)
}

fn usage(prompt: u64, completion: u64, total: u64, cached: u64) -> Option<Usage> {
    Some(Usage {
        prompt,
        completion,
        total,
        cached,
        cache_write: 0,
    })
}

fn ok(content: &str, reasoning: &str, finish: &str) -> Summary {
    Summary {
        content: content.into(),
        reasoning: reasoning.into(),
        finish: Some(finish.into()),
        ..Summary::default()
    }
}

fn failed(content: &str, kind: LlmErrorKind) -> Summary {
    Summary {
        content: content.into(),
        error: Some(kind),
        ..Summary::default()
    }
}

fn call(id: &str, name: &str, args: Value) -> (String, String, Value) {
    (id.into(), name.into(), args)
}

/// (fixture, base URL whose compat flags apply, expected summary).
fn cases() -> Vec<(&'static str, &'static str, Summary)> {
    let ref_url = "https://api.openai.com/v1";
    vec![
        (
            "openai_reference",
            ref_url,
            Summary {
                usage: usage(9, 2, 11, 0),
                ..ok("Hello", "", "stop")
            },
        ),
        ("no_usage", ref_url, ok("Hi", "", "stop")),
        (
            "usage_on_finish_glm",
            "https://api.z.ai/api/paas/v4",
            Summary {
                usage: usage(12, 40, 52, 0),
                ..ok("Hi", "", "stop")
            },
        ),
        (
            "usage_in_choice_moonshot",
            "https://api.moonshot.ai/v1",
            Summary {
                usage: usage(19, 13, 32, 0),
                ..ok("Yo", "", "stop")
            },
        ),
        (
            "usage_continuous_vllm",
            ref_url,
            Summary {
                usage: usage(5, 3, 8, 0),
                ..ok("AB", "", "stop")
            },
        ),
        (
            "usage_openrouter_cost",
            "https://openrouter.ai/api/v1",
            Summary {
                usage: usage(7, 3, 10, 4),
                ..ok("Hey", "", "stop")
            },
        ),
        (
            "reasoning_content_deepseek",
            "https://api.deepseek.com",
            Summary {
                usage: usage(20, 10, 30, 16),
                ..ok("42", "Let me think.", "stop")
            },
        ),
        (
            "cached_tokens_hit_field",
            ref_url,
            Summary {
                usage: usage(100, 1, 101, 64),
                ..ok("ok", "", "stop")
            },
        ),
        (
            "reasoning_openrouter",
            "https://openrouter.ai/api/v1",
            Summary {
                usage: usage(3, 4, 7, 0),
                ..ok("Done", "Let me", "stop")
            },
        ),
        (
            "reasoning_details_only",
            ref_url,
            ok("3", "Plan: add.", "stop"),
        ),
        (
            "reasoning_ollama",
            "http://localhost:11434/v1",
            ok("Two", "We count.", "stop"),
        ),
        (
            "think_tags",
            ref_url,
            ok("Hi!", "The user wants hi.", "stop"),
        ),
        (
            "reasoning_only_empty_answer",
            "https://api.deepseek.com",
            ok("", "Nothing to add.", "stop"),
        ),
        (
            "tool_calls_reference",
            ref_url,
            Summary {
                calls: vec![
                    call("call_A", "get_weather", json!({"city": "Paris"})),
                    call("call_B", "get_time", json!({"tz": "CET"})),
                ],
                ..ok("", "", "tool_calls")
            },
        ),
        (
            "tool_call_whole_chunk",
            ref_url,
            Summary {
                calls: vec![call("call_x1", "get_weather", json!({"city": "Paris"}))],
                ..ok("", "", "tool_calls")
            },
        ),
        (
            "tool_call_missing_index_gemini",
            ref_url,
            Summary {
                calls: vec![
                    call("g1", "get_weather", json!({"city": "Paris"})),
                    call("g2", "get_time", json!({"tz": "CET"})),
                ],
                usage: usage(30, 12, 42, 0),
                ..ok("", "", "stop")
            },
        ),
        (
            "tool_calls_all_index_zero",
            ref_url,
            Summary {
                calls: vec![
                    call("call_1", "read", json!({"a": 1})),
                    call("call_2", "read", json!({"b": 2})),
                ],
                ..ok("", "", "tool_calls")
            },
        ),
        (
            "tool_call_empty_name_fragments",
            ref_url,
            Summary {
                calls: vec![call("365174485", "search", json!({"q": "rust"}))],
                ..ok("", "", "tool_calls")
            },
        ),
        (
            "tool_call_object_arguments",
            ref_url,
            Summary {
                calls: vec![call(
                    "call_o",
                    "get_weather",
                    json!({"city": "Paris", "days": 2}),
                )],
                ..ok("", "", "stop")
            },
        ),
        (
            "tool_call_cut_by_length",
            ref_url,
            Summary {
                calls: vec![call(
                    "call_L",
                    "write_file",
                    json!("{\"path\":\"a.txt\",\"content\":\"lo"),
                )],
                ..ok("", "", "length")
            },
        ),
        (
            "azure_prompt_filter_preamble",
            ref_url,
            ok("Hi there", "", "stop"),
        ),
        ("crlf_multiline_data", ref_url, ok("multi-line", "", "stop")),
        ("no_done_after_finish", ref_url, ok("fine", "", "stop")),
        (
            "truncated_no_finish",
            ref_url,
            failed("Hello", LlmErrorKind::Stream),
        ),
        (
            "error_openai_in_200",
            ref_url,
            failed("", LlmErrorKind::Stream),
        ),
        (
            "error_openrouter_midstream",
            ref_url,
            failed("Partial", LlmErrorKind::Stream),
        ),
        (
            "error_vllm_object",
            ref_url,
            failed("", LlmErrorKind::Stream),
        ),
        ("error_lmstudio", ref_url, failed("", LlmErrorKind::Stream)),
        (
            "error_quota_then_done",
            ref_url,
            failed("", LlmErrorKind::Stream),
        ),
        (
            "error_event_field",
            ref_url,
            failed("Par", LlmErrorKind::Stream),
        ),
        (
            "error_context_in_stream",
            ref_url,
            failed("", LlmErrorKind::ContextOverflow),
        ),
        (
            "finish_context_window_glm",
            "https://api.z.ai/api/paas/v4",
            failed("Sum", LlmErrorKind::ContextOverflow),
        ),
        ("finish_sensitive_glm", ref_url, ok("I", "", "sensitive")),
    ]
}

fn opts(url: &str, raw: bool) -> DecodeOptions {
    let f = compat::resolve(url, None);
    DecodeOptions {
        reasoning_fields: f.reasoning_delta_fields,
        cached_fields: f.cached_tokens_fields,
        raw,
    }
}

#[test]
fn every_fixture_has_a_case_and_decodes_as_expected() {
    let cases = cases();
    let mut on_disk: Vec<String> =
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sse"))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".sse").map(str::to_string))
            .collect();
    on_disk.sort();
    let mut named: Vec<String> = cases.iter().map(|c| c.0.to_string()).collect();
    named.sort();
    assert_eq!(on_disk, named, "every fixture needs an expectation");
    for (name, url, want) in cases {
        let (events, err) = decode_parts(&[&load(name)], opts(url, false));
        assert_eq!(
            summarize(&events, &err),
            want,
            "fixture {name}: {events:?} {err:?}"
        );
    }
}

#[test]
fn every_fixture_split_at_every_byte_boundary_gives_identical_events() {
    for (name, url, _) in cases() {
        let body = load(name);
        for raw in [false, true] {
            let whole = decode_parts(&[&body], opts(url, raw));
            for i in 0..=body.len() {
                let cut = decode_parts(&[&body[..i], &body[i..]], opts(url, raw));
                assert_eq!(cut, whole, "fixture {name} cut at byte {i} (raw {raw})");
            }
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            assert_eq!(
                decode_parts(&bytes, opts(url, raw)),
                whole,
                "{name} byte by byte"
            );
        }
    }
}

#[test]
fn error_shapes_keep_their_vendor_message() {
    let cases = [
        ("error_openai_in_200", "The server had an error", false),
        (
            "error_openrouter_midstream",
            "Provider disconnected unexpectedly",
            false,
        ),
        ("error_vllm_object", "maximum number of tokens", true),
        ("error_lmstudio", "Compute error.", false),
        ("error_quota_then_done", "quota exceeded", false),
        ("error_event_field", "overloaded", false),
    ];
    for (name, needle, client) in cases {
        let (_, err) = decode_parts(&[&load(name)], DecodeOptions::default());
        match err {
            Some(LlmError::Stream {
                message,
                client_fault,
            }) => {
                assert!(message.contains(needle), "{name}: {message}");
                assert_eq!(client_fault, client, "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn raw_view_carries_wire_deltas_and_whole_tool_calls() {
    let (events, _) = decode_parts(&[&load("think_tags")], opts("https://x", true));
    let raw_content: String = events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::Raw(r) => r.content_delta.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(
        raw_content, "<think>The user wants hi.</think>\n\nHi!",
        "raw is before tag routing"
    );
    let (events, _) = decode_parts(&[&load("tool_calls_reference")], opts("https://x", true));
    let raw_calls: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::Raw(r) => r.tool_call_delta.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(raw_calls.len(), 2);
    assert_eq!(raw_calls[0].arguments, json!({"city": "Paris"}));
    assert!(events.iter().any(
        |e| matches!(e, LlmEvent::Raw(r) if r.finish_reason.as_deref() == Some("tool_calls"))
    ));
}

#[test]
fn thought_signature_is_kept_for_replay() {
    let (events, _) = decode_parts(
        &[&load("tool_call_missing_index_gemini")],
        DecodeOptions::default(),
    );
    let LlmEvent::ToolCall(c) = &events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(
        c.extra_content,
        Some(json!({"google": {"thought_signature": "sigA"}}))
    );
}
