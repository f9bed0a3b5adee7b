//! `outrigger run` flags, and their checks before anything starts (docs/headless.md).

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::config::Config;

/// The longest `--timeout` (a week): a bound, not a wish.
pub const MAX_TIMEOUT_SECS: f64 = 604_800.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    StreamJson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApprovalFlag {
    Auto,
    Deny,
}

/// The model and the turn's bounds: shared by `run` and `acp`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProviderFlags {
    /// `openai_compat` (default), `ollama` or `scripted` (env OUTRIGGER_PROVIDER, config
    /// `provider`). The key comes from OUTRIGGER_API_KEY.
    #[arg(long)]
    pub provider: Option<String>,
    /// The model id (env OUTRIGGER_MODEL, config `model`); required unless scripted.
    #[arg(long)]
    pub model: Option<String>,
    /// The OpenAI-compatible endpoint (env OUTRIGGER_BASE_URL, config `base_url`).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The scripted provider's script (JSON Lines, one model turn per line); implies
    /// `--provider scripted`.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Replaces the built-in system prompt.
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,
    /// Model requests at most per turn (exit 3 when reached).
    #[arg(long, value_name = "N")]
    pub max_rounds: Option<u64>,
    /// Total tokens at most per turn (exit 3 when reached).
    #[arg(long, value_name = "N")]
    pub budget_tokens: Option<u64>,
}

/// The provider part of a turn's params, resolved from flags, env and config.
#[derive(Debug, Clone)]
pub struct Model {
    pub params: Map<String, Value>,
    pub provider: String,
    pub model: String,
}

impl ProviderFlags {
    /// Resolves the provider, model, endpoint and bounds; an error is exit 2 and names the fix.
    pub fn resolve(&self, config: &Config) -> Result<Model, String> {
        let mut params = Map::new();
        let provider;
        let model;
        if let Some(script) = &self.script {
            if self.provider.as_deref().is_some_and(|p| p != "scripted") {
                return Err("--script runs the scripted provider; drop --provider".into());
            }
            provider = "scripted".to_string();
            model = self.model.clone().unwrap_or_else(|| "scripted".into());
            params.insert("scriptPath".into(), json!(absolute(script)?));
        } else {
            // Without an endpoint the default is OpenAI itself; with one, a compatible server.
            let has_base = self.base_url.is_some() || config_str(config, "base_url").is_some();
            provider = self
                .provider
                .clone()
                .or_else(|| config_str(config, "provider"))
                .unwrap_or_else(|| if has_base { "openai_compat" } else { "openai" }.into());
            if provider == "scripted" {
                return Err("--provider scripted needs --script FILE".into());
            }
            model = self
                .model
                .clone()
                .filter(|m| !m.is_empty())
                .or_else(|| config_str(config, "model"))
                .ok_or("no model configured: pass --model, set OUTRIGGER_MODEL, or set `model` in the config file")?;
            let base_url = self
                .base_url
                .clone()
                .or_else(|| config_str(config, "base_url"));
            // The sidecar builds the same provider: its errors (a missing key naming the
            // variables tried, a compat server without an endpoint) come before any child.
            let pp = crate::llm::ProviderParams {
                provider: provider.clone(),
                model: model.clone(),
                base_url: base_url.clone(),
                ..Default::default()
            };
            if let Err(e) =
                crate::llm::build_provider(&pp, crate::llm::LlmSettings::default(), None)
            {
                return Err(match base_url {
                    None => format!("{e}; or pass --base-url for a local server"),
                    Some(_) => e.to_string(),
                });
            }
            if let Some(u) = base_url {
                params.insert("baseUrl".into(), json!(u));
            }
        }
        params.insert("provider".into(), json!(provider));
        params.insert("model".into(), json!(model));
        if let Some(s) = &self.system_prompt {
            params.insert("systemPrompt".into(), json!(s));
        }
        if let Some(n) = self.max_rounds {
            params.insert("maxRounds".into(), json!(n));
        }
        if let Some(n) = self.budget_tokens {
            params.insert("budgetTokens".into(), json!(n));
        }
        Ok(Model {
            params,
            provider,
            model,
        })
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ProviderFlags,
    /// Workspace the file tools and bash work in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Wall-clock bound on the turn, in seconds: at the deadline the turn is cancelled and
    /// recorded (status `timeout`, exit 1).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// MCP servers for the turn: `{"mcpServers": {NAME: {command, args?, env?, cwd?}}}` or a
    /// list of `{name?, command, args?, env?, cwd?}` (stdio only).
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// The session (the record's chat id): continued when it exists, started when not.
    #[arg(long, visible_alias = "chat-id", value_name = "ID")]
    pub session: Option<String>,
    /// Continue this durable record (its id from a previous run's result).
    #[arg(long, value_name = "RECORD", conflicts_with = "session")]
    pub resume: Option<String>,
    /// Run this tool without asking under `--approval deny` (repeatable, or comma-separated).
    #[arg(long, value_name = "TOOL", value_delimiter = ',')]
    pub allow: Vec<String>,
    /// Refuse every call of this tool (repeatable, or comma-separated).
    #[arg(long, value_name = "TOOL", value_delimiter = ',')]
    pub deny: Vec<String>,
    /// `auto`: calls run, the sandbox bounds them; `deny`: every local or destructive call not
    /// named by --allow is refused.
    #[arg(long, value_enum, default_value = "auto")]
    pub approval: ApprovalFlag,
    /// `text` (the answer), `json` (one result object) or `stream-json` (one event per line).
    #[arg(long, value_enum, default_value = "text")]
    pub output_format: Format,
    /// `text`: tool activity on stderr.
    #[arg(long)]
    pub verbose: bool,
    /// The user message, or `-` to read it from stdin (stdin is read only then).
    pub prompt: Option<String>,
}

/// Everything a run needs, checked.
#[derive(Debug)]
pub struct Plan {
    pub params: Value,
    pub prompt: String,
    pub provider: String,
    pub model: String,
    pub cwd: PathBuf,
    pub format: Format,
    pub verbose: bool,
    pub timeout: Option<std::time::Duration>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub approval: ApprovalFlag,
    /// `--session`: continue the record when it exists.
    pub session: Option<String>,
    /// `--resume`: the record must exist.
    pub resume: Option<String>,
}

fn absolute(p: &Path) -> Result<PathBuf, String> {
    std::path::absolute(p).map_err(|e| format!("cannot resolve {}: {e}", p.display()))
}

fn config_str(config: &Config, key: &str) -> Option<String> {
    config
        .merged()
        .get(key)
        .and_then(|r| r.value.as_str().map(str::to_string))
        .filter(|s| !s.is_empty())
}

/// Reads `--mcp-config`: the `mcpServers` map Claude Code and Zed use, or our list.
pub fn mcp_entries(path: &Path) -> Result<Vec<Value>, String> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("--mcp-config {name}: {e}"))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| format!("--mcp-config {name}: not JSON: {e}"))?;
    let servers = match v {
        Value::Array(a) => return Ok(a),
        Value::Object(mut o) => match o.remove("mcpServers") {
            Some(Value::Object(m)) => m,
            _ => {
                return Err(format!(
                    "--mcp-config {name}: expected {{\"mcpServers\": {{NAME: {{command, args?, env?}}}}}} or a list of servers"
                ));
            }
        },
        _ => return Err(format!("--mcp-config {name}: expected an object or a list")),
    };
    servers
        .into_iter()
        .map(|(server, entry)| {
            let Value::Object(mut e) = entry else {
                return Err(format!(
                    "--mcp-config {name}: mcpServers.{server} must be an object"
                ));
            };
            match e.remove("type") {
                None => {}
                Some(Value::String(t)) if t == "stdio" => {}
                Some(t) => {
                    return Err(format!(
                        "--mcp-config {name}: mcpServers.{server} has type {t}: only stdio servers \
                         ({{command, args?}}) can be started for one run; put HTTP servers in the \
                         config file's mcp_servers"
                    ));
                }
            }
            if e.contains_key("url") {
                return Err(format!(
                    "--mcp-config {name}: mcpServers.{server} has a url: only stdio servers can be \
                     started for one run; put HTTP servers in the config file's mcp_servers"
                ));
            }
            e.insert("name".into(), json!(server));
            Ok(Value::Object(e))
        })
        .collect()
}

fn read_prompt(arg: Option<String>) -> Result<String, String> {
    match arg.as_deref() {
        None => Err("no prompt: give it as an argument, or `-` to read it from stdin".into()),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
            if s.trim().is_empty() {
                return Err("the prompt read from stdin is empty".into());
            }
            Ok(s)
        }
        Some(p) if p.trim().is_empty() => Err("the prompt is empty".into()),
        Some(p) => Ok(p.to_string()),
    }
}

impl RunArgs {
    /// Checks the flags against each other and the environment; an error is exit 2.
    pub fn plan(self, config: &Config) -> Result<Plan, String> {
        let cwd = match &self.cwd {
            Some(c) => absolute(c)?,
            None => std::env::current_dir()
                .map_err(|e| format!("cannot read the current directory: {e}"))?,
        };
        if !cwd.is_dir() {
            return Err(format!("--cwd {}: not a directory", cwd.display()));
        }
        let timeout = match self.timeout {
            None => None,
            Some(t) if t.is_finite() && t > 0.0 && t <= MAX_TIMEOUT_SECS => {
                Some(std::time::Duration::from_secs_f64(t))
            }
            Some(t) => {
                return Err(format!(
                    "--timeout {t}: give seconds greater than 0 and at most {MAX_TIMEOUT_SECS}"
                ));
            }
        };
        for name in self.allow.iter().chain(&self.deny) {
            if name.trim().is_empty() {
                return Err("--allow and --deny take tool names; one is empty".into());
            }
        }
        if let Some(both) = self.allow.iter().find(|a| self.deny.contains(a)) {
            return Err(format!(
                "{both} is given to both --allow and --deny; keep one"
            ));
        }
        let Model {
            mut params,
            provider,
            model,
        } = self.model.resolve(config)?;
        params.insert("cwd".into(), json!(cwd));
        if let Some(path) = &self.mcp_config {
            params.insert("mcp".into(), Value::Array(mcp_entries(path)?));
        }
        if !self.deny.is_empty() || self.approval == ApprovalFlag::Deny {
            // The flags answer each `approval.request`; nobody is asked.
            params.insert("approval".into(), json!({"mode": "host"}));
        }
        // Nobody is there to answer: the model is not offered ask_user.
        params.insert("askUser".into(), json!(false));
        let prompt = read_prompt(self.prompt)?;
        Ok(Plan {
            params: Value::Object(params),
            prompt,
            provider,
            model,
            cwd,
            format: self.output_format,
            verbose: self.verbose,
            timeout,
            allow: self.allow,
            deny: self.deny,
            approval: self.approval,
            session: self.session,
            resume: self.resume,
        })
    }
}
