//! The tool runtime: the `Tool` trait, modes and exposure tiers, the router that dispatches
//! by name, `tool_search`, executable plugins and skills.

pub mod ask_user;
pub mod bash;
pub mod fs;
pub mod mode;
pub mod plugins;
pub mod router;
pub mod run_code;
pub mod schema;
pub mod search;
pub mod skills;
pub mod todo;
pub mod tool_search;
pub mod web;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::lifecycle::Lifecycle;
pub use crate::protocol::ToolResult;
pub use mode::{ToolMode, classify};
pub use router::Router;
pub use schema::Schema;

/// The tier deciding whether the model is offered a tool, and whether search finds it.
/// Dispatch never looks at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(rename = "ToolExposure")]
pub enum Exposure {
    /// Offered in the model's tool list.
    Direct,
    /// Not offered; found by `tool_search`.
    Deferred,
    /// Neither offered nor searchable nor suggested; still dispatchable by name.
    Hidden,
}

impl Exposure {
    pub fn parse(s: &str) -> Option<Exposure> {
        match s {
            "direct" => Some(Exposure::Direct),
            "deferred" => Some(Exposure::Deferred),
            "hidden" => Some(Exposure::Hidden),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Exposure::Direct => "direct",
            Exposure::Deferred => "deferred",
            Exposure::Hidden => "hidden",
        }
    }
}

/// What a call runs with.
#[derive(Clone)]
pub struct ToolContext {
    /// Relative paths resolve against this directory, never the process cwd.
    pub workspace_root: PathBuf,
    /// Cancelled when the caller gives up (turn cancel, shutdown).
    pub cancel: CancellationToken,
    pub call_id: String,
    pub session_id: Option<String>,
    /// Where child process groups are registered so they die with us.
    pub lifecycle: Option<Arc<Lifecycle>>,
    /// The caller's sandbox request for commands (`context.execSandbox`); `None` means the
    /// config's default posture.
    pub exec_sandbox: Option<crate::sandbox::ExecSandboxRequest>,
    /// The host, for tools that hand work to it (`bash` under `execSandbox.hostSpawn`).
    pub host: Option<Arc<dyn crate::host::HostLink>>,
    /// Where the call comes from (`chatId`, `streamId`, `recordId`, `round`), passed on to
    /// the host with requests made on the call's behalf.
    pub host_context: Map<String, Value>,
    /// The file tools read and/or write through the host (`hostFs` of a turn).
    pub host_fs: crate::protocol::chat::HostFsParam,
}

impl ToolContext {
    pub fn new(workspace_root: PathBuf) -> ToolContext {
        ToolContext {
            workspace_root,
            cancel: CancellationToken::new(),
            call_id: String::new(),
            session_id: None,
            lifecycle: None,
            exec_sandbox: None,
            host: None,
            host_context: Map::new(),
            host_fs: Default::default(),
        }
    }
}

pub type ToolFuture = Pin<Box<dyn Future<Output = ToolResult> + Send>>;

/// A tool the model (or a host) can call. The description is the model-facing contract:
/// what the tool does and how, not product policy.
pub trait Tool: Send + Sync + 'static {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// The input JSON Schema (an object schema).
    fn parameters(&self) -> Value;
    /// The schema as the router keeps it; tools that already hold one share it.
    fn schema(&self) -> Schema {
        Schema::from_value(&self.parameters())
    }
    fn mode(&self) -> ToolMode {
        classify(self.name())
    }
    fn exposure(&self) -> Exposure {
        Exposure::Direct
    }
    /// May run in parallel with other concurrency-safe calls.
    fn concurrency_safe(&self) -> bool {
        self.mode() == ToolMode::Read
    }
    /// `tool.invoke` refuses it without `consentGranted: true`.
    fn require_consent(&self) -> bool {
        self.mode() == ToolMode::Local
    }
    fn call(self: Arc<Self>, ctx: ToolContext, args: Map<String, Value>) -> ToolFuture;
}

impl ToolResult {
    pub fn ok(data: Map<String, Value>) -> ToolResult {
        ToolResult {
            success: true,
            data: Some(data),
            ..Default::default()
        }
    }

    /// A failure the model can recover from (`needsFollowup: true`).
    pub fn recoverable(error: impl Into<String>) -> ToolResult {
        ToolResult {
            success: false,
            needs_followup: Some(true),
            error: Some(error.into()),
            ..Default::default()
        }
    }

    /// The text the model gets for this result (the tool message's content, and what
    /// `outrigger mcp` returns as text): `{success, error?, data?, message?}` as JSON, without
    /// the `_sandbox` marker (which goes to the host, not the model).
    pub fn model_text(&self) -> String {
        let mut body = Map::new();
        body.insert("success".into(), Value::Bool(self.success));
        if let Some(e) = &self.error {
            body.insert("error".into(), Value::String(e.clone()));
        }
        if let Some(d) = &self.data {
            let mut d = d.clone();
            d.remove("_sandbox");
            body.insert("data".into(), Value::Object(d));
        }
        if let Some(m) = &self.message {
            body.insert("message".into(), Value::String(m.clone()));
        }
        Value::Object(body).to_string()
    }

    pub fn with_data(mut self, key: &str, value: impl Into<Value>) -> ToolResult {
        self.data
            .get_or_insert_with(Map::new)
            .insert(key.to_string(), value.into());
        self
    }
}

/// Longest tool name: the common limit of provider function-name rules.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Provider function-name rules (OpenAI: `^[a-zA-Z0-9_-]{1,64}$`) bound every tool name.
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `s` with every character outside `[A-Za-z0-9_-]` replaced by `_` (names made from
/// outside input: MCP server and tool names, spill file names).
pub fn sanitize_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// "a string", "an object", … for error messages about JSON values.
pub fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `tools.md`'s terminal predicate: `terminal == true`, or a failure that does not ask for a
/// follow-up.
pub fn is_terminal_result(result: Option<&ToolResult>) -> bool {
    match result {
        None => false,
        Some(r) => r.terminal == Some(true) || (!r.success && r.needs_followup != Some(true)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_predicate() {
        assert!(!is_terminal_result(None));
        assert!(!is_terminal_result(Some(&ToolResult::ok(Map::new()))));
        let mut t = ToolResult::ok(Map::new());
        t.terminal = Some(true);
        assert!(is_terminal_result(Some(&t)));
        assert!(!is_terminal_result(Some(&ToolResult::recoverable("x"))));
        let hard = ToolResult {
            success: false,
            error: Some("down".into()),
            ..Default::default()
        };
        assert!(is_terminal_result(Some(&hard)));
    }
}
