//! `tool.list`, `tool.invoke`, `plugin.tools.describe`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{ErrorKind, Outcome, RpcError, reply};
use crate::strict::NoParams;
use crate::tools::ToolContext;

pub async fn list(app: Arc<App>, call: Call) -> Outcome {
    let _: NoParams = call.params()?;
    let rows: Vec<Value> = app
        .router
        .describe()
        .iter()
        .map(|e| e.descriptor())
        .collect();
    reply(&rows)
}

pub async fn describe(app: Arc<App>, call: Call) -> Outcome {
    let _: NoParams = call.params()?;
    let rows: Vec<Value> = app.router.describe().iter().map(|e| e.row()).collect();
    reply(&json!({ "tools": rows }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InvokeParams {
    name: String,
    #[serde(default)]
    arguments: Value,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    consent_granted: bool,
    #[serde(default)]
    context: InvokeContext,
}

/// Open on purpose: hosts put their own keys (`chatId`, …) in a call's context, as they do
/// in a turn's `toolContext`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct InvokeContext {
    cwd: Option<PathBuf>,
    session_id: Option<String>,
    /// The sandbox posture for commands this call runs (see docs/protocol.md).
    exec_sandbox: Option<crate::sandbox::ExecSandboxRequest>,
    /// Hosts pass more (chatId, …); it is accepted and not needed here.
    #[serde(flatten)]
    _rest: Map<String, Value>,
}

static CALLS: AtomicU64 = AtomicU64::new(1);

pub async fn invoke(app: Arc<App>, call: Call) -> Outcome {
    let p: InvokeParams = call.params()?;
    if let Some(entry) = app.router.get(&p.name)
        && entry.require_consent
        && !p.consent_granted
    {
        return Err(RpcError::new(
            ErrorKind::PolicyDenied,
            format!(
                "tool '{}' runs on the user's machine (mode {}); ask the user, then pass consentGranted: true",
                entry.name,
                entry.mode.as_str()
            ),
        )
        .with("tool", entry.name.as_str())
        .with("mode", entry.mode.as_str())
        .with("flag", "consentGranted"));
    }
    let workspace_root = match p.context.cwd {
        Some(cwd) if !cwd.is_absolute() => {
            return Err(RpcError::invalid_params(format!(
                "context.cwd must be an absolute path, got {}",
                cwd.display()
            )));
        }
        Some(cwd) if !cwd.is_dir() => {
            return Err(RpcError::invalid_params(format!(
                "context.cwd {} is not a directory",
                cwd.display()
            )));
        }
        Some(cwd) => cwd,
        None => std::env::current_dir().map_err(|e| {
            RpcError::internal(format!("cannot read the process's working directory: {e}"))
        })?,
    };
    let ctx = ToolContext {
        workspace_root,
        cancel: app.lifecycle.token(),
        call_id: p
            .id
            .unwrap_or_else(|| format!("call_{}", CALLS.fetch_add(1, Ordering::Relaxed))),
        session_id: p.context.session_id,
        lifecycle: Some(app.lifecycle.clone()),
        exec_sandbox: p.context.exec_sandbox,
        host: Some(app.reverse.clone()),
        host_context: serde_json::Map::new(),
    };
    let result = app.router.dispatch(&p.name, p.arguments, ctx).await;
    reply(&result)
}
