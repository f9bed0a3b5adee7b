//! Unit tests of `accumulate`.

use super::*;
use serde_json::json;

use crate::llm::test_events::{calls, text_of as text};

fn run(body: &str) -> (Vec<LlmEvent>, Option<LlmError>) {
    decode_parts(&[body.as_bytes()], DecodeOptions::default())
}

#[test]
fn think_tags_across_boundaries() {
    let body = "data: {\"choices\":[{\"delta\":{\"content\":\"<thi\"}}]}\n\n\
                data: {\"choices\":[{\"delta\":{\"content\":\"nk>plan</th\"}}]}\n\n\
                data: {\"choices\":[{\"delta\":{\"content\":\"ink>\\n\\nanswer <b>\"}}]}\n\n\
                data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    let (ev, err) = run(body);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(text(&ev), ("answer <b>".into(), "plan".into()));
}

#[test]
fn held_back_partial_tag_is_flushed_at_end() {
    let body =
        "data: {\"choices\":[{\"delta\":{\"content\":\"a <thi\"},\"finish_reason\":\"stop\"}]}\n\n";
    assert_eq!(text(&run(body).0).0, "a <thi");
}

#[test]
fn invalid_arguments_are_kept_with_an_error() {
    let body = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\"}}]},\"finish_reason\":\"length\"}]}\n\n";
    let c = calls(&run(body).0);
    assert_eq!(c[0].arguments, json!("{\"a\":"));
    assert!(c[0].arguments_error.is_some());
}

#[test]
fn missing_id_is_minted_and_empty_arguments_are_an_object() {
    let body = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"f\"}}]},\"finish_reason\":\"stop\"}]}\n\n";
    let c = calls(&run(body).0);
    assert_eq!(c[0].id, "call_0");
    assert_eq!(c[0].arguments, json!({}));
}

#[test]
fn truncated_stream_is_an_error() {
    let (ev, err) = run("data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n");
    assert_eq!(text(&ev).0, "Hel");
    assert!(
        matches!(
            err,
            Some(LlmError::Stream {
                client_fault: false,
                ..
            })
        ),
        "{err:?}"
    );
}

#[test]
fn unknown_finish_without_output_fails_and_with_output_is_other() {
    let (_, err) = run("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"weird\"}]}\n\n");
    assert!(err.is_some());
    let (ev, err) = run(
        "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"weird\"}]}\n\n",
    );
    assert!(err.is_none());
    assert_eq!(
        ev.last(),
        Some(&LlmEvent::Finish {
            reason: "other".into()
        })
    );
}

#[test]
fn classify_overflow_and_rate_limit() {
    assert!(matches!(
        error_from_json(
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#
        ),
        LlmError::ContextOverflow { .. }
    ));
    assert!(matches!(
        error_from_json(r#"{"error":{"message":"slow down","code":429}}"#),
        LlmError::RateLimited { .. }
    ));
}
