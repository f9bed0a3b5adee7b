//! What goes into a provider (`LlmRequest`) and what comes out (`LlmEvent`, `LlmError`).

use crate::strict::Invalid;
use std::time::Duration;

use schemars::JsonSchema;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A chat role. Anything else in `messages[].role` is refused naming the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn parse(s: &str) -> Result<Role, Invalid> {
        match s {
            "system" => Ok(Role::System),
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            "tool" => Ok(Role::Tool),
            other => Err(Invalid::from(format!(
                "invalid role: '{other}'; use system, user, assistant or tool"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One part of a multi-part user message (§1.8 `parts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "MessagePart")]
pub struct Part {
    /// `text` or `image`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Base64 image bytes (sent as a `data:` URL with `mediaType`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

/// A chat message in the wire vocabulary of `agent.chat.stream`, camelCase. The one shape
/// for input (`messages`) and output (`agent.session.messages`), so a host can send a stored
/// history back unchanged. Unknown keys are refused naming the nearest known one
/// (`llm::parse_messages`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Message {
    /// The record's seq on output (`agent.session.messages`); accepted and ignored on input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    #[serde(deserialize_with = "de_role")]
    pub role: Role,
    /// Required on `system`, `user` (unless `parts` carries the content) and `tool`
    /// messages; an `assistant` turn with `toolCalls` may leave it empty or `null`. Always a
    /// string on output.
    #[serde(default, deserialize_with = "de_content")]
    #[schemars(with = "Option<String>")]
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The call a `tool` message answers (required there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The calls an `assistant` turn made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The model's reasoning on this (assistant) turn, echoed back per the compat flags.
    #[serde(
        default,
        alias = "reasoningContent",
        skip_serializing_if = "Option::is_none"
    )]
    pub reasoning: Option<String>,
    /// OpenRouter's structured reasoning, echoed back verbatim on tool-call turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_details: Option<Value>,
    /// Multi-part user content (text and images).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Part>,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Message {
        Message {
            seq: None,
            role,
            content: content.into(),
            name: None,
            tool_call_id: None,
            tool_calls: Vec::new(),
            reasoning: None,
            reasoning_details: None,
            parts: Vec::new(),
        }
    }
}

fn de_role<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Role, D::Error> {
    let s = String::deserialize(d)?;
    Role::parse(&s).map_err(serde::de::Error::custom)
}

/// `content` may be `null` (assistant tool-call turns) or missing.
fn de_content<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// A complete tool call: what the model asked for, after every fragment was accumulated.
/// In `messages[].toolCalls` unknown keys are refused, like the message's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "MessageToolCall")]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The parsed arguments; when they were not valid JSON, the raw text as a string
    /// (and `argumentsError` says why) so the loop can answer with a recoverable error.
    #[serde(default)]
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_error: Option<String>,
    /// Vendor data that must be echoed with the call on replay (Gemini `thought_signature`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_content: Option<Value>,
}

/// Token counts of one request. `cached` is the prompt tokens served from cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    #[serde(rename = "promptTokens", alias = "prompt_tokens", default)]
    pub prompt: u64,
    #[serde(rename = "completionTokens", alias = "completion_tokens", default)]
    pub completion: u64,
    #[serde(rename = "totalTokens", alias = "total_tokens", default)]
    pub total: u64,
    #[serde(rename = "cachedPromptTokens", alias = "cached_tokens", default)]
    pub cached: u64,
    /// Prompt tokens written to the vendor's cache this request (Anthropic
    /// `cache_creation_input_tokens`); part of `prompt`, billed above the plain rate.
    #[serde(rename = "cacheWriteTokens", default, skip_serializing_if = "is_zero")]
    pub cache_write: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The provider chunk as `streamRawChunks` forwards it: unset fields omitted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawChunk {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_delta: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_delta: Option<String>,
    /// Whole, never a fragment: the provider buffers argument fragments into one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_delta: Option<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

/// One thing a provider stream produced. A stream ends with `Finish` or an error.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "camelCase")]
pub enum LlmEvent {
    /// Display text (reasoning inside `<think>` tags already routed out).
    Content {
        text: String,
    },
    Reasoning {
        text: String,
    },
    /// Emitted when the stream ends, from what was accumulated (never from `finish_reason`).
    ToolCall(ToolCall),
    Usage(Usage),
    /// A failed attempt is being retried after `delayMs` (nothing had been emitted yet).
    Retry {
        attempt: u32,
        #[serde(rename = "delayMs")]
        delay_ms: u64,
        error: String,
    },
    /// Only when `LlmRequest::raw_chunks` is set.
    Raw(RawChunk),
    /// Vendor state of this answer that must go back verbatim on later rounds (Anthropic
    /// thinking blocks with their signatures, Responses reasoning items, Gemini thought
    /// signatures): an object keyed by the vendor (`{"anthropic": [...]}`), stored as the
    /// assistant message's `reasoning_details`. Sent before `Finish`, at most once.
    State {
        data: Value,
    },
    /// The wire `finish_reason` (`stop` also when tools were called, as some vendors send).
    Finish {
        reason: String,
    },
}

/// Fields a preset may fill when the request left them unset (the presets layer computes
/// this; the request builder only applies it). Explicit request fields always win.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplingDefaults {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u64>,
    pub reasoning_effort: Option<String>,
    /// Extra body members (e.g. `top_k`), below `providerOptions`.
    pub extra_body: Map<String, Value>,
}

/// One model request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlmRequest {
    pub model: String,
    /// Shared with the turn that sends it: a round does not copy its history.
    pub messages: Arc<Vec<Message>>,
    /// OpenAI tool descriptors, sent as given; built once per turn, shared by its rounds.
    pub tools: Arc<[Value]>,
    /// `"auto"`, `"none"`, `"required"` or `{type:"function", function:{name}}`.
    pub tool_choice: Option<Value>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u64>,
    pub reasoning_effort: Option<String>,
    /// Host pass-through body members; they win over everything the provider adds.
    pub provider_options: Map<String, Value>,
    /// Also emit `LlmEvent::Raw` per wire chunk (for `streamRawChunks`).
    pub raw_chunks: bool,
}

/// How an `LlmError` is handled: the retry policy and RPC mapping switch on this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmErrorKind {
    Http,
    ContextOverflow,
    RateLimited,
    Network,
    Stream,
    Cancelled,
    Config,
}

impl LlmErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LlmErrorKind::Http => "http",
            LlmErrorKind::ContextOverflow => "context_overflow",
            LlmErrorKind::RateLimited => "rate_limited",
            LlmErrorKind::Network => "network",
            LlmErrorKind::Stream => "stream",
            LlmErrorKind::Cancelled => "cancelled",
            LlmErrorKind::Config => "config",
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("provider answered HTTP {status}: {body}")]
    Http {
        status: u16,
        body: String,
        retry_after: Option<Duration>,
    },
    #[error("the request does not fit the model's context window: {message}")]
    ContextOverflow { message: String },
    #[error("rate limited by the provider (HTTP 429): {body}")]
    RateLimited {
        retry_after: Option<Duration>,
        body: String,
    },
    #[error("network error talking to the provider: {message}")]
    Network { message: String },
    /// An error reported inside a 200 stream, or a stream cut before it finished.
    #[error("provider stream failed: {message}")]
    Stream {
        message: String,
        /// True when the vendor signalled a client-side (4xx-like) error: not retried.
        client_fault: bool,
    },
    #[error("cancelled")]
    Cancelled,
    /// The provider could not be built or the request is malformed (never retried).
    #[error("{message}")]
    Config { message: String },
}

impl LlmError {
    pub fn kind(&self) -> LlmErrorKind {
        match self {
            LlmError::Http { .. } => LlmErrorKind::Http,
            LlmError::ContextOverflow { .. } => LlmErrorKind::ContextOverflow,
            LlmError::RateLimited { .. } => LlmErrorKind::RateLimited,
            LlmError::Network { .. } => LlmErrorKind::Network,
            LlmError::Stream { .. } => LlmErrorKind::Stream,
            LlmError::Cancelled => LlmErrorKind::Cancelled,
            LlmError::Config { .. } => LlmErrorKind::Config,
        }
    }

    /// Whether another attempt could succeed: network trouble, 5xx, 408/409/429, and
    /// server-side stream failures. Never after cancel, never other 4xx.
    pub fn retryable(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => matches!(status, 408 | 409 | 429 | 500..=599),
            LlmError::RateLimited { .. } | LlmError::Network { .. } => true,
            LlmError::Stream { client_fault, .. } => !client_fault,
            LlmError::ContextOverflow { .. } | LlmError::Cancelled | LlmError::Config { .. } => {
                false
            }
        }
    }

    /// The server's `Retry-After`, when it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Http { retry_after, .. } | LlmError::RateLimited { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }

    /// The HTTP status, for errors that had one.
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Http { status, .. } => Some(*status),
            LlmError::RateLimited { .. } => Some(429),
            _ => None,
        }
    }
}

pub type LlmItem = Result<LlmEvent, LlmError>;
