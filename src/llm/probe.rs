//! `outrigger llm-probe`: one model request from the command line, every event printed as
//! one JSON line. It exercises the provider end to end until the agent loop lands; the
//! printing itself is the binary's (`emit`), this module never writes to stdout.

use std::path::PathBuf;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::types::{LlmError, LlmRequest, Message, Role};
use super::{LlmSettings, ProviderParams, build_provider, parse_messages};

#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    /// openai_compat (default), openai, openai-compatible, ollama or scripted.
    #[arg(long, default_value = "openai_compat")]
    pub provider: String,
    /// API base URL, e.g. https://api.openai.com/v1 (default: $OUTRIGGER_BASE_URL).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// API key sent as a bearer token (default: $OUTRIGGER_API_KEY).
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
    #[arg(long, default_value = "")]
    pub model: String,
    /// A system message placed before the prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// The whole conversation as a JSON list of messages (replaces --system and the prompt).
    #[arg(long, value_name = "JSON")]
    pub messages: Option<String>,
    /// OpenAI tool descriptors as a JSON list.
    #[arg(long, value_name = "JSON")]
    pub tools: Option<String>,
    /// auto, none, required, or a JSON object.
    #[arg(long)]
    pub tool_choice: Option<String>,
    #[arg(long)]
    pub temperature: Option<f64>,
    #[arg(long)]
    pub top_p: Option<f64>,
    #[arg(long)]
    pub max_tokens: Option<u64>,
    #[arg(long)]
    pub reasoning_effort: Option<String>,
    /// Compat flag overrides as a JSON object (see compat.describe).
    #[arg(long, value_name = "JSON")]
    pub compat: Option<String>,
    /// Extra body members as a JSON object; they win over everything.
    #[arg(long, value_name = "JSON")]
    pub provider_options: Option<String>,
    /// JSONL script for --provider scripted.
    #[arg(long, value_name = "PATH")]
    pub script_path: Option<PathBuf>,
    /// Also print the raw chunk view (`streamRawChunks`).
    #[arg(long)]
    pub raw: bool,
    /// The user message.
    pub prompt: Option<String>,
}

/// Exit codes: 0 finished, 1 provider error, 2 bad arguments, 130 cancelled (signal).
pub fn run(args: ProbeArgs, settings: LlmSettings, emit: &mut dyn FnMut(&Value)) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            emit(
                &json!({"event": "error", "kind": "config", "message": format!("cannot start the runtime: {e}")}),
            );
            return 1;
        }
    };
    rt.block_on(probe(args, settings, emit))
}

fn bad(emit: &mut dyn FnMut(&Value), message: String) -> i32 {
    emit(&json!({"event": "error", "kind": "config", "message": message}));
    2
}

fn json_arg(name: &str, s: &Option<String>) -> Result<Option<Value>, String> {
    s.as_deref()
        .map(|t| {
            serde_json::from_str(t).map_err(|e| format!("--{name} is not valid JSON ({e}): {t}"))
        })
        .transpose()
}

fn request(args: &ProbeArgs) -> Result<LlmRequest, String> {
    let messages = match json_arg("messages", &args.messages)? {
        Some(v) => parse_messages(&v)?,
        None => {
            let mut m = Vec::new();
            if let Some(s) = &args.system {
                m.push(Message::new(Role::System, s.clone()));
            }
            let Some(p) = &args.prompt else {
                return Err("give a prompt (or --messages)".into());
            };
            m.push(Message::new(Role::User, p.clone()));
            m
        }
    };
    let tools = match json_arg("tools", &args.tools)? {
        None => Vec::new(),
        Some(Value::Array(t)) => t,
        Some(_) => return Err("--tools must be a JSON list of tool descriptors".into()),
    };
    let tool_choice = args.tool_choice.as_deref().map(|t| {
        serde_json::from_str::<Value>(t)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!(t))
    });
    let provider_options = match json_arg("provider-options", &args.provider_options)? {
        None => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => return Err("--provider-options must be a JSON object".into()),
    };
    Ok(LlmRequest {
        model: args.model.clone(),
        messages: std::sync::Arc::new(messages),
        tools: tools.into(),
        tool_choice,
        temperature: args.temperature,
        top_p: args.top_p,
        max_tokens: args.max_tokens,
        reasoning_effort: args.reasoning_effort.clone(),
        provider_options,
        raw_chunks: args.raw,
    })
}

async fn probe(args: ProbeArgs, settings: LlmSettings, emit: &mut dyn FnMut(&Value)) -> i32 {
    let compat = match json_arg("compat", &args.compat) {
        Ok(c) => c,
        Err(e) => return bad(emit, e),
    };
    let req = match request(&args) {
        Ok(r) => r,
        Err(e) => return bad(emit, e),
    };
    let params = ProviderParams {
        provider: args.provider.clone(),
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        api_key: args.api_key.clone(),
        compat,
        script: None,
        script_path: args.script_path.clone(),
    };
    let provider = match build_provider(&params, settings, None) {
        Ok(p) => p,
        Err(e) => return bad(emit, e.to_string()),
    };
    let cancel = CancellationToken::new();
    spawn_signal_cancel(cancel.clone());
    let mut stream = provider.stream(req, cancel);
    while let Some(item) = stream.next().await {
        match item {
            Ok(ev) => emit(&serde_json::to_value(&ev).unwrap_or(Value::Null)),
            Err(e) => {
                emit(&error_json(&e));
                return if matches!(e, LlmError::Cancelled) {
                    130
                } else {
                    1
                };
            }
        }
    }
    0
}

/// The printed form of an error: `{event:"error", kind, message, status?, retryAfterMs?}`.
pub fn error_json(e: &LlmError) -> Value {
    let mut v = json!({"event": "error", "kind": e.kind().as_str(), "message": e.to_string()});
    if let Some(s) = e.status() {
        v["status"] = json!(s);
    }
    if let Some(ra) = e.retry_after() {
        v["retryAfterMs"] = json!(u64::try_from(ra.as_millis()).unwrap_or(u64::MAX));
    }
    v
}

/// SIGINT / SIGTERM cancel the request (the stream then ends with a `cancelled` error).
fn spawn_signal_cancel(cancel: CancellationToken) {
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            tracing::warn!(
                "cannot install signal handlers; llm-probe cannot be interrupted cleanly"
            );
            return;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        cancel.cancel();
    });
}
