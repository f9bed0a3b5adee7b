//! Model providers: the `Provider` trait, the OpenAI-compatible streaming provider with its
//! compat flags and retry policy, and the scripted provider.
//!
//! A provider turns an `LlmRequest` into a stream of `LlmEvent`s ending with `Finish` or an
//! `LlmError`. Cancelling the token interrupts whatever is in progress (connect, a read, a
//! retry sleep) and ends the stream with `LlmError::Cancelled`.

pub mod accumulate;
pub mod anthropic;
pub mod build;
pub mod catalog;
pub mod compat;
#[cfg(test)]
mod fixture_tests;
pub mod gemini;
pub mod models_list;
pub mod native;
pub mod openai;
pub mod presets;
pub mod probe;
pub mod responses;
pub mod retry;
pub mod scripted;
pub mod sse;
#[cfg(test)]
mod test_events;
pub mod types;

use crate::strict::Invalid;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use compat::{CompatFlags, CompatOverrides};
pub use retry::RetryPolicy;
pub use types::{
    LlmError, LlmErrorKind, LlmEvent, LlmItem, LlmRequest, Message, RawChunk, Role,
    SamplingDefaults, ToolCall, Usage,
};

/// Events buffered between a provider task and its consumer; a slow consumer holds the
/// provider back (and with it the socket read) instead of growing memory. Not user-tunable.
pub const STREAM_CHANNEL_CAPACITY: usize = 256;

/// A model provider. Object-safe: the loop holds an `Arc<dyn Provider>`.
pub trait Provider: Send + Sync {
    /// The wire name (`openai_compat`, `scripted`).
    fn name(&self) -> &str;
    /// Starts one model request. Must be called inside a tokio runtime.
    fn stream(&self, req: LlmRequest, cancel: CancellationToken) -> LlmStream;
}

/// The consumer end of a provider stream.
pub struct LlmStream {
    rx: mpsc::Receiver<LlmItem>,
}

impl LlmStream {
    pub fn new(rx: mpsc::Receiver<LlmItem>) -> LlmStream {
        LlmStream { rx }
    }

    /// The next event; `None` after the final `Finish` or error.
    pub async fn next(&mut self) -> Option<LlmItem> {
        self.rx.recv().await
    }
}

/// Tunables from the config (`llm_*` keys).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LlmSettings {
    pub connect_timeout: Duration,
    /// No byte at all for this long ends the attempt as a network error.
    pub idle_timeout: Duration,
    pub retry: RetryPolicy,
}

impl Default for LlmSettings {
    fn default() -> Self {
        LlmSettings {
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            retry: RetryPolicy::default(),
        }
    }
}

impl LlmSettings {
    pub fn from_settings(s: &crate::config::Settings) -> LlmSettings {
        LlmSettings {
            connect_timeout: s.llm_connect_timeout,
            idle_timeout: s.llm_idle_timeout,
            retry: RetryPolicy {
                max_attempts: s.llm_max_attempts,
                base: s.llm_retry_base,
                max: s.llm_retry_max,
            },
        }
    }
}

/// An error and its causes, `: `-joined: reqwest's own message leaves out the reason
/// ("connection refused", a TLS failure) that its sources carry.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    msg
}

/// Installs rustls' crypto provider (ring) for every HTTP client of the process: the model
/// provider's, MCP's Streamable HTTP, the web tools'. Idempotent; whoever builds a client
/// first installs it.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Redirects the plain-HTTP client follows, reqwest's default.
const MAX_REDIRECTS: usize = 10;

/// The HTTP client for requests to `url`, one per kind for the process, built on first use
/// (never before ready).
///
/// Plain `http://` URLs (a local model server, a loopback collector) get a client without
/// TLS roots: building the verifying client reads and parses every certificate under
/// `/etc/ssl/certs` (~150 files: 1–13 ms of the first turn, 0.3 MiB kept), which such a
/// sidecar never needs. Its redirects stay on plain HTTP (at most `MAX_REDIRECTS`, as
/// reqwest's own policy); one to `https://` is not followed, so the 3xx is reported.
pub fn http_client(settings: &LlmSettings, url: &str) -> Result<reqwest::Client, LlmError> {
    static TLS: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    static PLAIN: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    let plain = url
        .get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case("http://"));
    let slot = if plain { &PLAIN } else { &TLS };
    slot.get_or_init(|| {
        install_crypto();
        let mut b = reqwest::Client::builder().connect_timeout(settings.connect_timeout);
        if plain {
            b = b
                .tls_certs_only(std::iter::empty())
                .redirect(reqwest::redirect::Policy::custom(|a| {
                    if a.url().scheme() != "http" {
                        a.stop()
                    } else if a.previous().len() >= MAX_REDIRECTS {
                        a.error("too many redirects")
                    } else {
                        a.follow()
                    }
                }));
        }
        b.build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))
    })
    .clone()
    .map_err(|message| LlmError::Config { message })
}

/// The provider-selection subset of `agent.chat.stream` params (§1.8). Not
/// `deny_unknown_fields`: it shares the params object with the loop's fields, and
/// `agent::params` checks unknown keys against the union of both.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderParams {
    /// Defaulted so a missing provider gets the "provider is required" message.
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub model: String,
    #[serde(default, alias = "base_url")]
    pub base_url: Option<String>,
    #[serde(default, alias = "api_key")]
    pub api_key: Option<String>,
    #[serde(default)]
    pub compat: Option<Value>,
    #[serde(default)]
    pub script: Option<Value>,
    #[serde(default)]
    pub script_path: Option<PathBuf>,
}

pub use build::{
    DEFAULT_OLLAMA_BASE_URL, DEFAULT_OPENAI_BASE_URL, OPENAI_NAMES, build_provider, provider_for,
};

/// A request body as JSON, its buffer sized from the request's messages first: grown by
/// doubling, a long history's body was copied several times over, on fresh pages each time.
pub(crate) fn encode_body<T: serde::Serialize>(
    body: &T,
    req: &LlmRequest,
) -> serde_json::Result<Vec<u8>> {
    // Sized to hold the body at once: growing it by doubling (tool descriptors were not in
    // the estimate) was ~1 % of a turn of small rounds (perf). A descriptor is ~0.3-1.5 KB.
    let estimate: usize = req.messages.iter().map(|m| m.content.len() + 64).sum();
    let tools = req.tools.len().saturating_mul(1024);
    let mut out = Vec::with_capacity(estimate.saturating_add(tools).saturating_add(4096));
    serde_json::to_writer(&mut out, body)?;
    Ok(out)
}

/// Parses `messages` (§1.8); the error names the index and the problem.
pub fn parse_messages(v: &Value) -> Result<Vec<Message>, Invalid> {
    let Value::Array(items) = v else {
        return Err("messages must be a list of {role, content} objects".into());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, m)| parse_message(i, m).map_err(Invalid))
        .collect()
}

/// One message: the shape strictly (unknown keys refused with the nearest known one), then
/// what its role needs. `content` is checked on the raw object because `null` and a
/// missing key both decode to an empty string.
fn parse_message(i: usize, v: &Value) -> Result<Message, String> {
    let at = || format!("messages[{i}]");
    let Value::Object(o) = v else {
        return Err(format!(
            "{}: expected an object {{role, content}}, got {}",
            at(),
            crate::strict::quote(v)
        ));
    };
    // First, with the reference's wording hosts match on (`invalid role: 'x'`).
    if let Some(Value::String(r)) = o.get("role") {
        Role::parse(r)?;
    }
    // The plain decode first (a long history is thousands of messages); the path-tracking
    // one only to name what is wrong.
    let mut m = match Message::deserialize(v) {
        Ok(m) => m,
        Err(_) => crate::strict::decode_at::<Message>(v, &at())?,
    };
    let has_content = o.get("content").is_some_and(|c| !c.is_null());
    required(i, &m, has_content)?;
    // Output-only: the record assigns seqs.
    m.seq = None;
    Ok(m)
}

/// `messages` from its JSON text in one pass, no `Value` tree (a long history is thousands of
/// messages, re-sent every turn). `None` when something is wrong: decode it as a `Value` and
/// use [`parse_messages`], which names what. An empty `content` is `""`, `null` or missing,
/// which only the object tells apart: where that decides, that one message is checked the
/// `Value` way (a history with one empty answer keeps the one pass for the rest).
pub fn parse_messages_text(text: &str) -> Option<Vec<Message>> {
    let mut list: Vec<Message> = serde_json::from_str(text).ok()?;
    let mut items: Option<Vec<&serde_json::value::RawValue>> = None;
    for (i, m) in list.iter_mut().enumerate() {
        if required(i, m, !m.content.is_empty()).is_err() {
            let items = match &mut items {
                Some(items) => items,
                None => items.insert(serde_json::from_str(text).ok()?),
            };
            let v: Value = serde_json::from_str(items.get(i)?.get()).ok()?;
            *m = parse_message(i, &v).ok()?;
        }
        m.seq = None;
    }
    Some(list)
}

/// What a message's role needs (`has_content`: `content` is present and not `null`).
fn required(i: usize, m: &Message, has_content: bool) -> Result<(), String> {
    let at = || format!("messages[{i}]");
    let role = m.role.as_str();
    match m.role {
        Role::System | Role::User if !has_content && m.parts.is_empty() => Err(format!(
            "{}: content is required on a {role} message (the text, as a string)",
            at()
        )),
        Role::Assistant if !has_content && m.tool_calls.is_empty() => Err(format!(
            "{}: content is required on an assistant message without toolCalls",
            at()
        )),
        Role::Tool if m.tool_call_id.is_none() => Err(format!(
            "{}: toolCallId is required on a tool message (the id of the call it answers)",
            at()
        )),
        Role::Tool if !has_content => Err(format!(
            "{}: content is required on a tool message (the tool's result, as a string)",
            at()
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    mod text_path {
        use super::*;
        use proptest::prelude::*;

        /// One message's members from a small vocabulary: every content form (`"x"`, `""`,
        /// `null`, missing), each role, calls, call ids, parts, `seq`, unknown keys, wrong types.
        fn message() -> impl Strategy<Value = Value> {
            let role = prop_oneof![
                Just(json!("user")),
                Just(json!("assistant")),
                Just(json!("system")),
                Just(json!("tool")),
                Just(json!("wizard")),
                Just(json!(3)),
            ];
            let content = prop_oneof![
                Just(Some(json!("text"))),
                Just(Some(json!(""))),
                Just(Some(Value::Null)),
                Just(None),
                Just(Some(json!(["a"]))),
            ];
            let calls = prop_oneof![
                Just(None),
                Just(Some(json!([]))),
                Just(Some(
                    json!([{"id": "c", "name": "f", "arguments": {"a": 1}}])
                )),
                Just(Some(json!([{"id": "c", "name": "f", "argumnts": {}}]))),
            ];
            let extra = prop_oneof![
                Just(None),
                Just(Some(("toolCallId", json!("c")))),
                Just(Some(("seq", json!(7)))),
                Just(Some(("parts", json!([{"type": "text", "text": "p"}])))),
                Just(Some(("reasoningContent", json!("r")))),
                Just(Some(("text", json!("t")))),
                Just(Some(("name", json!(5)))),
            ];
            (role, content, calls, extra, any::<bool>()).prop_map(
                |(role, content, calls, extra, not_object)| {
                    if not_object {
                        return json!("not an object");
                    }
                    let mut o = serde_json::Map::new();
                    o.insert("role".into(), role);
                    if let Some(c) = content {
                        o.insert("content".into(), c);
                    }
                    if let Some(c) = calls {
                        o.insert("toolCalls".into(), c);
                    }
                    if let Some((k, v)) = extra {
                        o.insert(k.into(), v);
                    }
                    Value::Object(o)
                },
            )
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4_000))]
            /// The one-pass decode never answers differently from the checked one: what it
            /// returns the checked decode returns too, and what that refuses it leaves to it.
            #[test]
            fn text_decode_agrees_with_the_checked_decode(
                list in proptest::collection::vec(message(), 0..4),
            ) {
                let v = Value::Array(list);
                let checked = parse_messages(&v);
                if let Some(fast) = parse_messages_text(&v.to_string()) {
                    prop_assert_eq!(Ok(fast), checked.map_err(|e| e.0), "{}", v);
                }
            }
        }

        #[test]
        fn a_plain_history_takes_the_text_path() {
            let v = json!([
                {"role": "system", "content": "s"},
                {"seq": 3, "role": "user", "content": "q"},
                {"role": "assistant", "content": null, "toolCalls": [{"id": "c", "name": "f", "arguments": {}}]},
                {"role": "tool", "toolCallId": "c", "content": "{}"},
                {"role": "assistant", "content": "a"},
            ]);
            let fast = parse_messages_text(&v.to_string()).expect("settled in one pass");
            assert_eq!(Ok(fast), parse_messages(&v).map_err(|e| e.0));
        }

        /// Where content is required, `""` is content and `null` or missing is not; the
        /// message whose empty content decides is checked on its own object, the others stay
        /// in the one pass.
        #[test]
        fn an_empty_content_is_decided_by_its_own_object() {
            let ok = json!([
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": ""},
                {"seq": 4, "role": "user", "content": "q2"},
            ]);
            let fast = parse_messages_text(&ok.to_string()).expect("settled");
            assert_eq!(Ok(fast), parse_messages(&ok).map_err(|e| e.0));
            for content in [Some(json!(null)), None] {
                let mut m = json!({"role": "assistant"});
                if let Some(c) = content {
                    m["content"] = c;
                }
                let bad = json!([{"role": "user", "content": "q"}, m]);
                assert_eq!(parse_messages_text(&bad.to_string()), None, "{bad}");
                assert!(parse_messages(&bad).is_err(), "{bad}");
            }
        }
    }

    /// Serves each of `responses` to one connection, in order, on loopback.
    fn serve(responses: Vec<String>) -> String {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for r in responses {
                let Ok((mut c, _)) = l.accept() else { return };
                let mut buf = [0u8; 4096];
                let _ = c.read(&mut buf);
                let _ = c.write_all(r.as_bytes());
            }
        });
        format!("http://127.0.0.1:{port}")
    }

    /// GETs `base` through the client `http_client` picks for it.
    async fn get(base: &str) -> reqwest::Response {
        let client = http_client(&LlmSettings::default(), base).unwrap();
        client.get(base).send().await.unwrap()
    }

    #[tokio::test]
    async fn plain_http_follows_plain_redirects_and_reports_one_to_https() {
        let s = LlmSettings::default();
        let ok = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
        let target = serve(vec![ok.to_string()]);
        let hop = format!(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: {target}/x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        );
        let r = get(&serve(vec![hop])).await;
        assert_eq!(r.status(), 200);
        assert_eq!(r.text().await.unwrap(), "ok");

        let to_tls = "HTTP/1.1 307 Temporary Redirect\r\nlocation: https://127.0.0.1:9/x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
        let r = get(&serve(vec![to_tls.to_string()])).await;
        assert_eq!(r.status(), 307, "not followed onto TLS without roots");
        // HTTPS URLs get the verifying client.
        assert!(http_client(&s, "https://example.invalid/v1").is_ok());
    }

    fn params(v: Value) -> ProviderParams {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn provider_names_and_ollama_suffix() {
        for n in ["openai_compat", "openai", "openai-compatible"] {
            let p = params(json!({"provider": n, "model": "m", "baseUrl": "http://h/v1/"}));
            let prov = build_provider(&p, LlmSettings::default(), None).unwrap();
            assert_eq!(prov.name(), "openai_compat");
        }
        let p = params(json!({"provider": "bogus", "model": "m"}));
        let e = build_provider(&p, LlmSettings::default(), None)
            .err()
            .unwrap();
        assert!(e.to_string().contains("bogus"));
        let p = params(json!({"provider": "openai", "model": "m", "compat": {"nope": 1}}));
        let e = build_provider(&p, LlmSettings::default(), None)
            .err()
            .unwrap();
        assert!(e.to_string().contains("nope"), "{e}");
        let p = params(json!({"provider": "openai", "model": "m", "base_url": "ftp://x"}));
        assert!(build_provider(&p, LlmSettings::default(), None).is_err());
    }

    #[test]
    fn messages_parse_and_refuse_bad_roles() {
        let m = parse_messages(&json!([
            {"role": "assistant", "content": null, "toolCalls": [{"id": "c", "name": "f", "arguments": {}}], "reasoningContent": "r"},
            {"role": "tool", "content": "{}", "toolCallId": "c"}
        ]))
        .unwrap();
        assert_eq!(m[0].reasoning.as_deref(), Some("r"));
        assert_eq!(m[1].tool_call_id.as_deref(), Some("c"));
        let e = parse_messages(&json!([{"role": "wizard", "content": "x"}])).unwrap_err();
        assert!(e.starts_with("invalid role: 'wizard'"), "{e}");
    }

    #[test]
    fn messages_are_strict_and_role_aware() {
        let e = |v: Value| parse_messages(&v).unwrap_err();
        assert_eq!(
            e(json!([{"role": "user", "text": "hi"}])),
            "messages[0]: unknown field 'text' (did you mean 'content'?)"
        );
        assert_eq!(
            e(json!([{"role": "tool", "content": "x", "tool_call_id": "c"}])),
            "messages[0]: unknown field 'tool_call_id' (did you mean 'toolCallId'?)"
        );
        assert_eq!(
            e(
                json!([{"role": "assistant", "content": "", "toolCalls": [{"id": "c", "name": "f", "args": {}}]}])
            ),
            "messages[0].toolCalls[0]: unknown field 'args' (did you mean 'arguments'?)"
        );
        assert!(e(json!([{"role": "user"}])).starts_with("messages[0]: content is required"));
        assert!(
            e(json!([{"role": "user", "content": "a"}, {"role": "system", "content": null}]))
                .starts_with("messages[1]: content is required")
        );
        assert!(e(json!([{"role": "assistant"}])).contains("without toolCalls"));
        assert!(e(json!([{"role": "tool", "content": "x"}])).contains("toolCallId is required"));
        assert!(e(json!([{"content": "x"}])).contains("messages[0].role is required"));
        assert_eq!(
            e(json!([{"role": "user", "content": 5}])),
            "messages[0].content: expected a string, got 5"
        );
        assert!(e(json!(["hi"])).starts_with("messages[0]: expected an object"));
        // The output shape parses back: `seq` is accepted and dropped.
        let m = parse_messages(&json!([
            {"seq": 3, "role": "assistant", "content": "", "toolCalls": [{"id": "c", "name": "f", "arguments": {}}]},
            {"role": "user", "parts": [{"type": "text", "text": "hi"}]}
        ]))
        .unwrap();
        assert_eq!(m[0].seq, None);
    }
}
