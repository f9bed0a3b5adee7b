//! `tool.list`, `tool.invoke`, `plugin.tools.describe`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::app::App;
use crate::protocol::NoParams;
use crate::protocol::ToolResult;
use crate::protocol::tools::{
    PluginToolsDescribeResult, RegisteredTool, ToolInvokeParams, ToolList,
};
use crate::rpc::error::{ErrorKind, RpcError};
use crate::tools::ToolContext;
use crate::tools::router::Entry;

/// The full row (`plugin.tools.describe`).
fn registered(e: &Entry) -> RegisteredTool {
    RegisteredTool {
        name: e.name.clone(),
        description: e.description.clone(),
        schema: e.parameters.clone(),
        mode: e.mode,
        exposure: e.exposure,
        require_consent: e.require_consent,
        concurrency_safe: e.concurrency_safe,
        plugin: e.plugin.clone(),
    }
}

pub async fn list(app: Arc<App>, _: NoParams) -> Result<ToolList, RpcError> {
    Ok(ToolList(app.router.describe()))
}

pub async fn describe(app: Arc<App>, _: NoParams) -> Result<PluginToolsDescribeResult, RpcError> {
    let tools = app
        .router
        .describe()
        .iter()
        .map(|e| registered(e))
        .collect();
    Ok(PluginToolsDescribeResult { tools })
}

static CALLS: AtomicU64 = AtomicU64::new(1);

pub async fn invoke(app: Arc<App>, p: ToolInvokeParams) -> Result<ToolResult, RpcError> {
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
    let workspace_root = crate::tools::fs::root::resolve(
        p.context.cwd.as_deref(),
        crate::tools::fs::root::CONTEXT_CWD,
        app.settings().workspace_root.as_deref(),
    )
    .map_err(|e| RpcError::invalid_params(e.to_string()))?;
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
        host_fs: Default::default(),
    };
    Ok(app.router.dispatch(&p.name, p.arguments, ctx).await)
}
