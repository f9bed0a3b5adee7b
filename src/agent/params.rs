//! `agent.chat.stream` / `agent.chat.fork` params: parsing and validation in the reference's
//! order (§1.8), all before any provider request. Every failure is an `invalid_params`
//! message naming the field and the fix.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::approval;
use super::host_tools::{self, HostTools};
use super::subagent::{self, ProfileModel, Subagent};
use crate::harness::ToolsStrategy;
use crate::llm::{
    self, LlmSettings, Message, Provider, ProviderParams, Role, SamplingDefaults, catalog,
    presets::PresetMode,
};
use crate::sandbox::ExecSandboxRequest;
use crate::strict;

/// `maxRounds` when unset (DESIGN.md loop defaults) and its ceiling.
pub const DEFAULT_MAX_ROUNDS: u64 = 80;
pub const MAX_MAX_ROUNDS: u64 = 10_000;
/// Consecutive failed tool results that end the turn, when unset; and its ceiling.
pub const DEFAULT_MAX_TOOL_ERRORS: u64 = 16;
pub const MAX_MAX_TOOL_ERRORS: u64 = 10_000;
/// Per-tool backstop when unset (sidecar.md), and the ceiling of tool and soft timeouts.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 300_000;
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;
/// Tool calls a turn may run when `budgetMaxToolCalls` is unset (reference 0.6.72).
pub const DEFAULT_MAX_TOOL_CALLS: u64 = 10_000;
pub const MAX_MAX_TOOL_CALLS: u64 = 1_000_000;
/// Ceiling of `budgetTokens` and `maxContextTokens` (a typo must not mean "unbounded").
pub const MAX_TOKENS_CEILING: u64 = 1_000_000_000_000;
/// Cached prompt tokens count this much toward the token budget (sidecar.md).
pub const CACHED_TOKEN_WEIGHT: f64 = 0.1;
/// A `systemPrompt` longer than this many characters (~4096 tokens) is cut with a marker.
pub const MAX_SYSTEM_PROMPT_CHARS: usize = 16_384;

/// The raw params beside `ProviderParams`. A key neither struct knows is refused by
/// `refuse_unknown`; the reference features this build does not have are known but refused
/// by `refuse_unsupported` with their own message.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    /// Read from the params object itself (`parse_messages`): decoding it here would copy
    /// the whole history once more.
    #[serde(default, rename = "messages")]
    _messages: Option<serde::de::IgnoredAny>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_tokens: Option<u64>,
    reasoning_effort: Option<String>,
    provider_options: Option<Map<String, Value>>,
    presets: Option<Value>,
    /// Accepted and ignored: every stream runs the CoreLoop (DESIGN.md).
    #[serde(rename = "useCoreLoop")]
    _use_core_loop: Option<Value>,
    stream_id: Option<String>,
    chat_id: Option<String>,
    record_id: Option<String>,
    #[serde(default)]
    resume: bool,
    /// Seed the turn with the record's projection and append `messages` to it.
    #[serde(default)]
    from_record: bool,
    max_rounds: Option<u64>,
    max_tool_errors: Option<u64>,
    budget_tokens: Option<u64>,
    budget_max_tool_calls: Option<u64>,
    soft_timeout_ms: Option<i64>,
    tool_timeout_ms: Option<i64>,
    steer_mode: Option<String>,
    max_context_tokens: Option<u64>,
    content_mode: Option<String>,
    #[serde(default)]
    stream_raw_chunks: bool,
    system_prompt: Option<String>,
    cwd: Option<PathBuf>,
    tools_strategy: Option<String>,
    exec_sandbox: Option<ExecSandboxRequest>,
    session_id: Option<String>,
    host_fs: Option<crate::protocol::chat::HostFsParam>,
    // host interaction
    tools: Option<Value>,
    tools_via_host: Option<bool>,
    tool_context: Option<Value>,
    approval: Option<Value>,
    ask_user: Option<bool>,
    run_code: Option<bool>,
    // agent.chat.fork sources
    until_seq: Option<i64>,
    trace_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteerMode {
    Boundary,
    Interrupt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentMode {
    All,
    Final,
}

/// The resolved loop knobs.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    pub max_rounds: u64,
    pub max_tool_errors: u64,
    pub budget_tokens: u64,
    pub max_tool_calls: u64,
    pub soft_timeout: Option<Duration>,
    pub tool_timeout: Duration,
    pub steer_mode: SteerMode,
    pub window: u64,
    pub content_mode: ContentMode,
    pub raw_chunks: bool,
    pub strategy: ToolsStrategy,
}

/// Everything a turn needs, validated.
#[derive(Clone)]
pub struct ChatParams {
    pub provider: Arc<dyn Provider>,
    pub model: String,
    pub pricing: Option<catalog::Pricing>,
    pub messages: Vec<Message>,
    pub system_prompt: Option<String>,
    pub stream_id: String,
    pub chat_id: Option<String>,
    pub record_id: Option<String>,
    pub resume: bool,
    /// `fromRecord: true`: `messages` are appended to the record's projection.
    pub from_record: bool,
    pub cfg: LoopConfig,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u64>,
    pub reasoning_effort: Option<String>,
    pub provider_options: Map<String, Value>,
    pub cwd: PathBuf,
    pub exec_sandbox: Option<ExecSandboxRequest>,
    /// The model takes image input (the catalog says so, or does not know the model).
    pub image_input: bool,
    /// The file tools' text through the host (`hostFs`).
    pub host_fs: crate::protocol::chat::HostFsParam,
    pub session_id: Option<String>,
    pub fork_until_seq: Option<i64>,
    /// `toolsViaHost: true`: the host's tools, run over reverse `tool.invoke`.
    pub host_tools: Option<HostTools>,
    /// `toolContext`, merged into the context of every reverse `tool.invoke`.
    pub tool_context: Map<String, Value>,
    /// `approval`, as asked; `chat` resolves it against the config (`approval_mode`).
    pub approval: ApprovalRequest,
    /// `askUser: true`: `ask_user` is offered and answered over `ask_user.request`.
    pub ask_user: bool,
    /// `subagent`: `delegate_subagent` is offered (on unless `false`); `None` for children.
    pub subagent: Option<Arc<Subagent>>,
    /// A sub-agent's tool domain: calls to anything else fail with `tool_not_delegated`.
    pub tool_filter: Option<Arc<[String]>>,
    /// `orchestration: {enabled: true, …}`: the six `agent_*` tools.
    pub orchestration: Option<Arc<super::orchestrate::Orchestration>>,
    /// `runCode: true`: `run_code` is offered this turn even when the config leaves it off.
    pub run_code: bool,
    /// `mcp`: stdio MCP servers started for this turn (not under `toolsViaHost`).
    pub mcp: Vec<crate::mcp::entry::ServerEntry>,
    /// The turn's own router once its MCP servers are mounted (sub-agents inherit it);
    /// `None`: the shared one.
    pub router: Option<Arc<crate::tools::Router>>,
}

/// Whether the model takes images: the catalog says so, or does not know the model.
fn takes_images(info: &catalog::ModelInfo) -> bool {
    !info.known || info.input.iter().any(|i| i == "image")
}

/// A turn's `approval` param before the config has its say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApprovalRequest {
    pub mode: Option<approval::Mode>,
    pub timeout: Option<Duration>,
}

/// Names the sidecar always runs itself, never the host.
pub const LOCAL_TOOLS: &[&str] = &[
    crate::tools::ask_user::NAME,
    crate::tools::todo::NAME,
    super::subagent::NAME,
    super::orchestrate::SPAWN,
    super::orchestrate::SEND,
    super::orchestrate::WAIT,
    super::orchestrate::CLOSE,
    super::orchestrate::LIST,
    super::orchestrate::INTERRUPT,
    crate::tools::run_code::NAME,
];

fn parse_approval(v: Option<&Value>) -> Result<ApprovalRequest, String> {
    let o = match v {
        None | Some(Value::Null) => return Ok(ApprovalRequest::default()),
        Some(Value::Object(o)) => o,
        Some(_) => {
            return Err(
                "approval must be an object {mode: \"auto\" | \"host\", timeoutMs?}".into(),
            );
        }
    };
    let mut out = ApprovalRequest::default();
    for (k, v) in o {
        match k.as_str() {
            "mode" => {
                let m = v.as_str().unwrap_or_default();
                out.mode =
                    Some(approval::Mode::parse(m).ok_or_else(|| {
                        format!("approval.mode must be 'auto' or 'host', got {v}")
                    })?);
            }
            "timeoutMs" if v.is_null() => {}
            "timeoutMs" => {
                let n = v.as_i64().ok_or_else(|| {
                    format!("approval.timeoutMs must be an integer number of milliseconds, got {v}")
                })?;
                out.timeout = timeout_ms("approval.timeoutMs", Some(n))?;
            }
            "storePath" | "policyPath" => {
                return Err(format!(
                    "approval.{k} is not supported: always-rules live in the durable store \
                     (see approval.list / approval.clear); remove it"
                ));
            }
            other => {
                return Err(strict::unknown_field(
                    "approval",
                    other,
                    &["mode", "timeoutMs", "storePath", "policyPath"],
                ));
            }
        }
    }
    Ok(out)
}

/// Which method the params came with: fork has its own source rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Stream,
    Fork,
}

/// Reference params naming features this build does not implement: refused rather than
/// silently ignored, so a host never believes they took effect.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("skills", "skills injection"),
    ("worldState", "world-state injection"),
    ("antiHallucination", "the anti-hallucination gate"),
];

fn refuse_unsupported(obj: &Map<String, Value>) -> Result<(), String> {
    for (key, what) in UNSUPPORTED {
        let set = match obj.get(*key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if set {
            return Err(format!(
                "{key} is not supported by this sidecar ({what} is not implemented); remove it"
            ));
        }
    }
    Ok(())
}

/// Every top-level key the chat params accept: `Raw`'s and `ProviderParams`' fields
/// (aliases such as `base_url` included) and the refused reference features.
fn known_fields() -> &'static [&'static str] {
    static KNOWN: OnceLock<Vec<&'static str>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let mut k = strict::fields_of::<Raw>().to_vec();
        k.extend(strict::fields_of::<ProviderParams>());
        k.extend(UNSUPPORTED.iter().map(|(name, _)| *name));
        k.push("subagent");
        k.push("orchestration");
        k.push("mcp");
        k
    })
}

/// A misspelt knob must not silently fall back to its default: any key outside
/// `known_fields` is refused naming the nearest known one.
fn refuse_unknown(obj: &Map<String, Value>) -> Result<(), String> {
    let known = known_fields();
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(strict::unknown_field("", k, known)),
        None => Ok(()),
    }
}

fn ranged(name: &str, v: Option<u64>, default: u64, min: u64, max: u64) -> Result<u64, String> {
    let n = v.unwrap_or(default);
    if n < min || n > max {
        return Err(format!("{name} must be between {min} and {max}, got {n}"));
    }
    Ok(n)
}

fn timeout_ms(name: &str, v: Option<i64>) -> Result<Option<Duration>, String> {
    match v {
        None => Ok(None),
        Some(n) if n <= 0 => Err(format!(
            "{name} must be a positive number of milliseconds, got {n}; omit it for the default"
        )),
        Some(n) if n.unsigned_abs() > MAX_TIMEOUT_MS => Err(format!(
            "{name} must be at most {MAX_TIMEOUT_MS} ms, got {n}"
        )),
        Some(n) => Ok(Some(Duration::from_millis(n.unsigned_abs()))),
    }
}

/// `budgetTokens` when unset: `max(2 × window, floor(maxRounds × window × 0.1))`.
pub fn default_budget(max_rounds: u64, window: u64) -> u64 {
    let scaled = (max_rounds as f64 * window as f64 * CACHED_TOKEN_WEIGHT).floor() as u64;
    scaled.max(window.saturating_mul(2))
}

/// Caps a system prompt fragment, marking the cut.
pub fn cap_system_prompt(s: &str) -> String {
    if s.chars().count() <= MAX_SYSTEM_PROMPT_CHARS {
        return s.to_string();
    }
    let cut: String = s.chars().take(MAX_SYSTEM_PROMPT_CHARS).collect();
    format!("{cut}\n[fragment truncated]")
}

/// Validates `agent.chat.stream` (or `.fork`) params in the reference's order: params object
/// → provider construction → messages → resume → systemPrompt → contentMode.
/// `configured_root` is config `workspace_root`, the workspace when `cwd` is not given.
/// `messages` is what the wire decoded of a `messages` member it kept apart from `v`
/// (`None`: it is in `v`, if anywhere).
pub fn parse(
    v: &Value,
    messages: Option<Result<Vec<Message>, crate::strict::Invalid>>,
    settings: LlmSettings,
    method: Method,
    configured_root: Option<&Path>,
) -> Result<ChatParams, super::AgentError> {
    checked(v, messages, settings, method, configured_root)
        .map_err(super::AgentError::InvalidParams)
}

fn checked(
    v: &Value,
    messages: Option<Result<Vec<Message>, crate::strict::Invalid>>,
    settings: LlmSettings,
    method: Method,
    configured_root: Option<&Path>,
) -> Result<ChatParams, String> {
    let Value::Object(obj) = v else {
        return Err("params must be an object".into());
    };
    refuse_unknown(obj)?;
    let raw: Raw = strict::decode(v)?;
    refuse_unsupported(obj)?;
    // Provider construction.
    let mut pp: ProviderParams = strict::decode(v)?;
    if pp.provider.trim().is_empty() {
        // Only a base URL: the catalog's wire kind for that host names the provider.
        match pp.base_url.as_deref().and_then(llm::provider_for) {
            Some(p) => pp.provider = p.to_string(),
            None => {
                return Err(
                    "failed to construct LLM provider: provider is required (e.g. \"openai_compat\", \"anthropic\", \"responses\", \"google\" or \"scripted\")".into(),
                );
            }
        }
    }
    if pp.provider != "scripted" && pp.model.trim().is_empty() {
        return Err(
            "failed to construct LLM provider: model is required (e.g. \"gpt-4o-mini\")".into(),
        );
    }
    let base = pp.base_url.clone().unwrap_or_default();
    let info = catalog::resolve(&pp.model, pp.base_url.as_deref());
    // The compat gate runs first: a vendor whose flags refuse the field (Moonshot) has it
    // dropped silently by the provider, so it is not validated against the catalog.
    let effort_allowed = match &pp.compat {
        Some(v) => llm::compat::CompatOverrides::from_value(v)
            .map(|o| llm::compat::resolve(&base, Some(o)).supports_reasoning_effort)
            .map_err(|e| format!("failed to construct LLM provider: {e}"))?,
        None => llm::compat::resolve(&base, None).supports_reasoning_effort,
    };
    if let Some(effort) = raw.reasoning_effort.as_ref().filter(|_| effort_allowed) {
        catalog::check_reasoning_effort(&info, effort)
            .map_err(|e| format!("failed to construct LLM provider: {e}"))?;
    }
    let mode = PresetMode::parse(raw.presets.as_ref())
        .map_err(|e| format!("failed to construct LLM provider: {e}"))?;
    let sampling = |model: &str| {
        mode.preset_for(&base, model).map(|p| SamplingDefaults {
            temperature: p.temperature,
            top_p: p.top_p,
            max_tokens: p.max_tokens,
            reasoning_effort: p.reasoning_effort,
            extra_body: p.extra_body.unwrap_or_default(),
        })
    };
    let defaults = sampling(&pp.model);
    let provider = llm::build_provider(&pp, settings, defaults)
        .map_err(|e| format!("failed to construct LLM provider: {e}"))?;
    // A sub-agent profile's `model`: the same provider settings, that model.
    let profile_model = |model: &str| -> Result<ProfileModel, String> {
        let mut pp = pp.clone();
        pp.model = model.to_string();
        let provider = llm::build_provider(&pp, settings, sampling(model))
            .map_err(|e| format!("cannot build its provider: {e}"))?;
        let info = catalog::resolve(model, pp.base_url.as_deref());
        Ok(ProfileModel {
            model: model.to_string(),
            provider,
            image_input: takes_images(&info),
            pricing: info.pricing,
        })
    };
    // `minimal` offers four tools; delegation joins them only when asked for.
    let subagent_param = match obj.get("subagent") {
        None if raw.tools_strategy.as_deref() == Some("minimal") => Some(&Value::Bool(false)),
        other => other,
    };
    let subagent = subagent::parse(
        subagent_param,
        MAX_MAX_ROUNDS,
        MAX_MAX_TOOL_ERRORS,
        &profile_model,
    )?
    .map(Arc::new);
    let orchestration =
        super::orchestrate::parse(obj.get("orchestration"), MAX_MAX_ROUNDS)?.map(Arc::new);
    // Messages.
    let messages = match (messages, obj.get("messages")) {
        (Some(decoded), _) => decoded?,
        (None, None | Some(Value::Null)) => Vec::new(),
        (None, Some(m)) => llm::parse_messages(m)?,
    };
    if method == Method::Stream && !raw.resume && messages.is_empty() {
        return Err(
            "messages must not be empty (send at least one user message, or resume: true)".into(),
        );
    }
    // Resume.
    if raw.resume {
        if method == Method::Fork {
            return Err(
                "agent.chat.fork does not take resume; fork, then resume the new record".into(),
            );
        }
        if !messages.is_empty() {
            return Err(
                "resume: true requires messages to be empty (the record is the transcript)".into(),
            );
        }
        if raw
            .record_id
            .as_deref()
            .or(raw.chat_id.as_deref())
            .is_none_or(|s| s.trim().is_empty())
        {
            return Err(
                "resume: true requires recordId (or chatId) naming the record to continue".into(),
            );
        }
    }
    // systemPrompt exclusivity.
    if raw.system_prompt.is_some()
        && !raw.resume
        && messages.first().is_some_and(|m| m.role == Role::System)
    {
        return Err(
            "systemPrompt and a leading system message are mutually exclusive; send one of them"
                .into(),
        );
    }
    // contentMode.
    let content_mode = match raw.content_mode.as_deref() {
        None | Some("all") => ContentMode::All,
        Some("final") => ContentMode::Final,
        Some(other) => {
            return Err(format!(
                "contentMode must be 'all' or 'final', got '{other}'"
            ));
        }
    };
    let steer_mode = match raw.steer_mode.as_deref() {
        None | Some("boundary") => SteerMode::Boundary,
        Some("interrupt") => SteerMode::Interrupt,
        Some(other) => {
            return Err(format!(
                "steerMode must be 'boundary' or 'interrupt', got '{other}'"
            ));
        }
    };
    let strategy = match raw.tools_strategy.as_deref() {
        None => ToolsStrategy::Full,
        Some(s) => ToolsStrategy::parse(s).ok_or_else(|| {
            format!("toolsStrategy must be 'full', 'minimal' or 'progressive', got '{s}'")
        })?,
    };
    if method == Method::Fork {
        if raw.trace_id.is_some() {
            return Err(
                "forking from a traceId is not supported; pass recordId (and untilSeq)".into(),
            );
        }
        if raw.record_id.as_deref().is_none_or(|s| s.trim().is_empty()) {
            return Err("agent.chat.fork requires recordId naming the record to fork".into());
        }
    }
    let max_rounds = ranged(
        "maxRounds",
        raw.max_rounds,
        DEFAULT_MAX_ROUNDS,
        1,
        MAX_MAX_ROUNDS,
    )?;
    let max_tool_errors = ranged(
        "maxToolErrors",
        raw.max_tool_errors,
        DEFAULT_MAX_TOOL_ERRORS,
        1,
        MAX_MAX_TOOL_ERRORS,
    )?;
    let max_tool_calls = ranged(
        "budgetMaxToolCalls",
        raw.budget_max_tool_calls,
        DEFAULT_MAX_TOOL_CALLS,
        1,
        MAX_MAX_TOOL_CALLS,
    )?;
    let window = match raw.max_context_tokens {
        Some(w) => ranged("maxContextTokens", Some(w), w, 1, MAX_TOKENS_CEILING)?,
        None => info.window,
    };
    let budget_tokens = match raw.budget_tokens {
        Some(b) => ranged("budgetTokens", Some(b), b, 1, MAX_TOKENS_CEILING)?,
        None => default_budget(max_rounds, window),
    };
    let tool_timeout = timeout_ms("toolTimeoutMs", raw.tool_timeout_ms)?
        .unwrap_or(Duration::from_millis(DEFAULT_TOOL_TIMEOUT_MS));
    let soft_timeout = timeout_ms("softTimeoutMs", raw.soft_timeout_ms)?;
    let cwd = crate::tools::fs::root::resolve(
        raw.cwd.as_deref(),
        crate::tools::fs::root::CHAT_CWD,
        configured_root,
    )
    .map_err(|e| e.to_string())?;
    let via_host = raw.tools_via_host.unwrap_or(false);
    let host_tools = match (&raw.tools, via_host) {
        (Some(t), false) if t.as_array().is_none_or(|a| !a.is_empty()) => {
            return Err(
                "tools is given without toolsViaHost: true; set toolsViaHost: true so the host runs \
                 them (the sidecar's own tools need no descriptors), or remove tools"
                    .into(),
            );
        }
        (Some(t), true) => Some(host_tools::parse(t, LOCAL_TOOLS)?),
        (None, true) => Some(HostTools::default()),
        (_, false) => None,
    };
    let tool_context = match raw.tool_context {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(
                "toolContext must be an object (merged into each tool.invoke context)".into(),
            );
        }
    };
    let approval = parse_approval(raw.approval.as_ref())?;
    // MCP entries, last of the checks (as the reference orders them): nothing has started.
    let mcp = match obj.get("mcp") {
        None => Vec::new(),
        Some(v) => crate::mcp::entry::parse_turn(v)?,
    };
    let stream_id = match raw.stream_id {
        Some(s) if s.trim().is_empty() => return Err("streamId must not be empty".into()),
        Some(s) => s,
        None => super::ids::stream_id(),
    };
    Ok(ChatParams {
        provider,
        model: pp.model.clone(),
        pricing: info.pricing,
        image_input: takes_images(&info),
        messages,
        system_prompt: raw.system_prompt.map(|s| cap_system_prompt(&s)),
        stream_id,
        chat_id: raw.chat_id.filter(|s| !s.trim().is_empty()),
        record_id: raw.record_id.filter(|s| !s.trim().is_empty()),
        resume: raw.resume,
        from_record: raw.from_record,
        cfg: LoopConfig {
            max_rounds,
            max_tool_errors,
            budget_tokens,
            max_tool_calls,
            soft_timeout,
            tool_timeout,
            steer_mode,
            window,
            content_mode,
            raw_chunks: raw.stream_raw_chunks,
            strategy,
        },
        temperature: raw.temperature,
        top_p: raw.top_p,
        max_tokens: raw.max_tokens,
        reasoning_effort: raw.reasoning_effort,
        provider_options: raw.provider_options.unwrap_or_default(),
        cwd,
        exec_sandbox: raw.exec_sandbox,
        host_fs: raw.host_fs.unwrap_or_default(),
        session_id: raw.session_id,
        fork_until_seq: raw.until_seq,
        host_tools,
        tool_context,
        approval,
        ask_user: raw.ask_user.unwrap_or(false),
        run_code: raw.run_code.unwrap_or(false),
        subagent,
        tool_filter: None,
        orchestration,
        mcp,
        router: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire type hosts generate code from lists exactly the fields the parser accepts.
    #[test]
    fn wire_type_matches_the_accepted_fields() {
        let mut wire: Vec<&str> =
            strict::fields_of::<crate::protocol::chat::ChatStreamParams>().to_vec();
        wire.extend(["base_url", "api_key"]);
        wire.sort_unstable();
        let mut known = known_fields().to_vec();
        known.sort_unstable();
        known.dedup();
        assert_eq!(wire, known);
    }
    use serde_json::json;

    fn p(v: Value) -> Result<ChatParams, String> {
        checked(&v, None, LlmSettings::default(), Method::Stream, None)
    }

    fn scripted(extra: Value) -> Value {
        let mut base = json!({"provider": "scripted", "model": "m", "script": [{"text": "hi"}],
            "messages": [{"role": "user", "content": "hi"}]});
        if let (Value::Object(b), Value::Object(e)) = (&mut base, extra) {
            b.extend(e);
        }
        base
    }

    #[test]
    fn budget_formula_vectors() {
        assert_eq!(default_budget(12, 131_072), 262_144);
        assert_eq!(default_budget(80, 60_000), 480_000);
        assert_eq!(default_budget(80, 131_072), 1_048_576);
    }

    #[test]
    fn defaults_and_order() {
        let c = p(scripted(json!({}))).unwrap();
        assert_eq!(c.cfg.max_rounds, 80);
        assert_eq!(c.cfg.max_tool_errors, 16);
        assert_eq!(c.cfg.tool_timeout, Duration::from_millis(300_000));
        assert!(c.stream_id.starts_with("str_") && c.stream_id.len() == 36);
        // Provider construction comes before message validation.
        let e = p(json!({"provider": "bogus", "messages": [{"role": "wizard", "content": ""}]}))
            .err()
            .unwrap();
        assert!(e.contains("failed to construct LLM provider"), "{e}");
        let e = p(scripted(
            json!({"messages": [{"role": "wizard", "content": "x"}]}),
        ))
        .err()
        .unwrap();
        assert!(e.starts_with("invalid role: 'wizard'"), "{e}");
        let e = p(scripted(json!({"resume": true}))).err().unwrap();
        assert!(e.contains("messages to be empty"), "{e}");
        let e = p(scripted(json!({"resume": true, "messages": []})))
            .err()
            .unwrap();
        assert!(e.contains("recordId"), "{e}");
        let e = p(scripted(
            json!({"systemPrompt": "x", "messages": [{"role": "system", "content": "s"}]}),
        ))
        .err()
        .unwrap();
        assert!(e.contains("mutually exclusive"), "{e}");
        let e = p(scripted(json!({"contentMode": "some"}))).err().unwrap();
        assert!(e.contains("'all' or 'final'"), "{e}");
        assert!(p(scripted(json!({"toolTimeoutMs": 0}))).is_err());
        assert!(p(scripted(json!({"maxRounds": 0}))).is_err());
        assert_eq!(
            p(scripted(json!({"mcp": [{"command": "x"}]})))
                .unwrap()
                .mcp
                .len(),
            1
        );
        let e = p(scripted(json!({"mcp": [{"args": []}]}))).err().unwrap();
        assert!(e.starts_with("mcp[0].command is required"), "{e}");
        assert!(p(scripted(json!({"subagent": false, "useCoreLoop": false}))).is_ok());
        let c = p(scripted(json!({"maxContextTokens": 1000, "maxRounds": 3}))).unwrap();
        assert_eq!(c.cfg.budget_tokens, 2000);
    }

    #[test]
    fn unknown_keys_are_refused_with_the_nearest_known_one() {
        let e = |extra: Value| p(scripted(extra)).err().unwrap();
        assert_eq!(
            e(json!({"maxRoundz": 5})),
            "unknown field 'maxRoundz' (did you mean 'maxRounds'?)"
        );
        assert_eq!(
            e(json!({"max_rounds": 5})),
            "unknown field 'max_rounds' (did you mean 'maxRounds'?)"
        );
        assert_eq!(
            e(json!({"prompt": "hi"})),
            "unknown field 'prompt' (did you mean 'messages'?)"
        );
        // Provider fields belong to the same object: a typo there is caught too.
        assert_eq!(
            e(json!({"scriptPth": "x"})),
            "unknown field 'scriptPth' (did you mean 'scriptPath'?)"
        );
        assert_eq!(
            e(json!({"maxRounds": "5"})),
            "maxRounds: expected an integer, got \"5\""
        );
        let e2 = e(json!({"messages": [{"role": "user", "text": "hi"}]}));
        assert_eq!(
            e2,
            "messages[0]: unknown field 'text' (did you mean 'content'?)"
        );
        assert_eq!(
            e(json!({"approval": {"mdoe": "host"}})),
            "approval: unknown field 'mdoe' (did you mean 'mode'?)"
        );
        // Refused features keep their own message.
        assert!(e(json!({"skills": {"roots": ["/x"]}})).starts_with("skills is not supported"));
    }

    #[test]
    fn every_reference_field_is_known() {
        let known = known_fields();
        for f in [
            "provider",
            "model",
            "messages",
            "baseUrl",
            "base_url",
            "apiKey",
            "api_key",
            "temperature",
            "maxTokens",
            "reasoningEffort",
            "providerOptions",
            "compat",
            "presets",
            "useCoreLoop",
            "streamId",
            "chatId",
            "recordId",
            "resume",
            "maxRounds",
            "maxToolErrors",
            "budgetTokens",
            "budgetMaxToolCalls",
            "softTimeoutMs",
            "toolTimeoutMs",
            "steerMode",
            "maxContextTokens",
            "contentMode",
            "streamRawChunks",
            "systemPrompt",
            "antiHallucination",
            "worldState",
            "skills",
            "tools",
            "toolsViaHost",
            "toolContext",
            "askUser",
            "mcp",
            "execSandbox",
            "approval",
            "subagent",
            "orchestration",
            "script",
            "scriptPath",
            "cwd",
            "toolsStrategy",
            "sessionId",
            "topP",
            "untilSeq",
            "traceId",
            "fromRecord",
        ] {
            assert!(known.contains(&f), "{f} is not accepted");
        }
        let c = p(scripted(json!({"fromRecord": true, "recordId": "r"}))).unwrap();
        assert!(c.from_record);
        assert!(!p(scripted(json!({}))).unwrap().from_record);
    }
}
