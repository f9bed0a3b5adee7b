//! Unit tests of `openai`.

use super::*;
use crate::llm::types::{Message, Role};
use serde_json::Map;

/// The body as a tree, for inspection.
fn body_value(
    r: &LlmRequest,
    c: &CompatFlags,
    d: Option<&SamplingDefaults>,
    f: MaxTokensField,
) -> Value {
    serde_json::to_value(build_body(r, c, d, f)).unwrap()
}

fn wire_messages(m: &[Message], c: &CompatFlags) -> Vec<Value> {
    serde_json::from_value(serde_json::to_value(WireMessages(m, c)).unwrap()).unwrap()
}
use crate::llm::types::ToolCall;
use std::sync::Arc;

fn req() -> LlmRequest {
    LlmRequest {
        model: "m".into(),
        messages: Arc::new(vec![Message::new(Role::User, "hi")]),
        ..LlmRequest::default()
    }
}

#[test]
fn reference_body_has_no_optional_fields() {
    let b = body_value(
        &req(),
        &CompatFlags::default(),
        None,
        MaxTokensField::MaxTokens,
    );
    assert_eq!(
        b,
        json!({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,
               "stream_options":{"include_usage":true}})
    );
}

#[test]
fn flags_gate_fields_and_provider_options_win() {
    let mut r = req();
    r.temperature = Some(0.7);
    r.reasoning_effort = Some("low".into());
    r.max_tokens = Some(100);
    r.tool_choice = Some(json!("required"));
    r.provider_options.insert("temperature".into(), json!(1.0));
    let compat = crate::llm::compat::resolve("https://api.moonshot.ai/v1", None);
    let b = body_value(&r, &compat, None, MaxTokensField::MaxCompletionTokens);
    assert_eq!(b["temperature"], json!(1.0), "host pass-through wins");
    assert!(b.get("reasoning_effort").is_none(), "gated");
    assert_eq!(b["max_completion_tokens"], json!(100));
    assert!(b.get("max_tokens").is_none());
    assert_eq!(b["tool_choice"], "required");
    let ds = crate::llm::compat::resolve("https://api.deepseek.com", None);
    let b = body_value(&r, &ds, None, MaxTokensField::MaxTokens);
    assert_eq!(b["tool_choice"], "auto", "forced choice downgraded");
    let glm = crate::llm::compat::resolve("https://api.z.ai/api/paas/v4", None);
    assert!(
        body_value(&r, &glm, None, MaxTokensField::MaxTokens)
            .get("stream_options")
            .is_none()
    );
}

#[test]
fn presets_fill_only_unset_fields() {
    let mut r = req();
    r.temperature = Some(0.2);
    let mut extra = Map::new();
    extra.insert("top_k".into(), json!(20));
    extra.insert("model".into(), json!("evil"));
    let d = SamplingDefaults {
        temperature: Some(0.6),
        top_p: Some(0.95),
        extra_body: extra,
        ..SamplingDefaults::default()
    };
    let b = body_value(
        &r,
        &CompatFlags::default(),
        Some(&d),
        MaxTokensField::MaxTokens,
    );
    assert_eq!(b["temperature"], json!(0.2));
    assert_eq!(b["top_p"], json!(0.95));
    assert_eq!(b["top_k"], json!(20));
    assert_eq!(b["model"], "m");
}

#[test]
fn reasoning_echo_on_tool_call_turns() {
    let call = ToolCall {
        id: "c1".into(),
        name: "f".into(),
        arguments: json!({"a": 1}),
        arguments_error: None,
        extra_content: Some(json!({"google": {"thought_signature": "sig"}})),
    };
    let mut with = Message::new(Role::Assistant, "");
    with.tool_calls = vec![call.clone()];
    with.reasoning = Some("thought".into());
    let mut without = Message::new(Role::Assistant, "");
    without.tool_calls = vec![call];
    let mut plain = Message::new(Role::Assistant, "done");
    plain.reasoning = Some("r".into());
    let msgs = [with, without, plain];

    let def = wire_messages(&msgs, &CompatFlags::default());
    assert_eq!(def[0]["reasoning"], "thought");
    assert_eq!(def[0]["content"], Value::Null);
    assert_eq!(
        def[0]["tool_calls"][0]["function"]["arguments"],
        "{\"a\":1}"
    );
    assert_eq!(
        def[0]["tool_calls"][0]["extra_content"]["google"]["thought_signature"],
        "sig"
    );
    assert!(def[1].get("reasoning").is_none());
    assert!(
        def[2].get("reasoning").is_none(),
        "only tool-call turns echo"
    );

    let ds = crate::llm::compat::resolve("https://api.deepseek.com", None);
    let w = wire_messages(&msgs, &ds);
    assert_eq!(w[0]["reasoning_content"], "thought");
    assert_eq!(w[1]["reasoning_content"], "", "empty echo for DeepSeek");
    assert!(w[0].get("reasoning").is_none());
}

/// A loopback server that answers every connection with `head` + `body`, then holds
/// the connection open. Returns the base URL and a connection counter.
async fn hanging_server(
    head: &'static str,
    body: &'static str,
) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h = hits.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut c, _)) = l.accept().await else {
                return;
            };
            h.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = c.read(&mut buf).await;
                let _ = c.write_all(head.as_bytes()).await;
                let _ = c.write_all(body.as_bytes()).await;
                tokio::time::sleep(Duration::from_secs(3600)).await;
            });
        }
    });
    (format!("http://127.0.0.1:{port}/v1"), hits)
}

fn provider(base_url: String) -> OpenAiProvider {
    let mut settings = LlmSettings::default();
    settings.retry.base = Duration::from_millis(1);
    OpenAiProvider::new(OpenAiConfig {
        base_url,
        api_key: None,
        compat: CompatFlags::default(),
        defaults: None,
        settings,
    })
}

#[tokio::test]
async fn cancel_interrupts_a_read_in_progress() {
    let (url, hits) = hanging_server(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n",
    )
    .await;
    let cancel = CancellationToken::new();
    let mut s = provider(url).stream(req(), cancel.clone());
    let first = s.next().await.unwrap().unwrap();
    assert_eq!(first, LlmEvent::Content { text: "hi".into() });
    // The provider is now blocked reading a stream that never continues.
    cancel.cancel();
    let end = tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("cancel ends the read at once");
    assert_eq!(end, Some(Err(LlmError::Cancelled)));
    let after = tokio::time::timeout(Duration::from_secs(10), s.next()).await;
    assert_eq!(after.expect("the stream closes"), None);
    assert_eq!(hits.load(Ordering::SeqCst), 1, "no retry after cancel");
}

#[tokio::test]
async fn server_errors_take_three_attempts_with_two_retry_events() {
    let (url, hits) = hanging_server(
        "HTTP/1.1 503 Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\n",
        "down",
    )
    .await;
    let mut s = provider(url).stream(req(), CancellationToken::new());
    let mut items = Vec::new();
    let all = async {
        while let Some(i) = s.next().await {
            items.push(i);
        }
    };
    tokio::time::timeout(Duration::from_secs(30), all)
        .await
        .expect("the stream ends");
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    let retries: Vec<u32> = items
        .iter()
        .filter_map(|i| match i {
            Ok(LlmEvent::Retry { attempt, .. }) => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(retries, vec![1, 2]);
    assert!(matches!(
        items.last(),
        Some(Err(LlmError::Http { status: 503, .. }))
    ));
}

#[test]
fn http_errors_are_typed() {
    assert!(matches!(
        http_error(429, "x".into(), None),
        LlmError::RateLimited { .. }
    ));
    assert!(matches!(
        http_error(
            400,
            "This model's maximum context length is 4096 tokens".into(),
            None
        ),
        LlmError::ContextOverflow { .. }
    ));
    assert!(matches!(
        http_error(500, "x".into(), None),
        LlmError::Http { status: 500, .. }
    ));
}

#[test]
fn the_tool_list_text_is_reused_for_the_same_list_and_never_for_another() {
    let c = CompatFlags::default();
    let text = |r: &LlmRequest| {
        let body = build_body(r, &c, None, MaxTokensField::MaxTokens);
        String::from_utf8(crate::llm::encode_body(&body, r).unwrap()).unwrap()
    };
    let tools_of =
        |r: &LlmRequest| format!("\"tools\":{}", serde_json::to_string(&*r.tools).unwrap());
    let tool = |name: &str| json!({"type": "function", "function": {"name": name, "description": "says \"hi\"\n", "parameters": {"type": "object"}}});
    let mut r = req();
    r.tools = Arc::from(vec![tool("a"), tool("b")]);
    let first = text(&r);
    assert!(first.contains(&tools_of(&r)), "{first}");
    assert_eq!(text(&r), first, "the same list, written again");
    // Another list of the same length is written from its own contents.
    let mut other = req();
    other.tools = Arc::from(vec![tool("c"), tool("d")]);
    assert!(text(&other).contains(&tools_of(&other)));
    // A list dropped and another made (possibly at the same address): never the old text.
    drop(r);
    drop(other);
    let mut next = req();
    next.tools = Arc::from(vec![tool("e"), tool("f")]);
    let t = text(&next);
    assert!(
        t.contains(&tools_of(&next)) && !t.contains("\"name\":\"a\""),
        "{t}"
    );
}
