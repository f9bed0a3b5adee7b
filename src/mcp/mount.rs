//! Starting servers (in parallel, each within the startup timeout) and putting their tools on
//! a router; `TurnMount` is one turn's own servers on the turn's own router, refreshed on
//! `tools/list_changed` between rounds and closed when the turn ends.

use std::sync::Arc;

use futures_util::future::join_all;

use super::client::{self, ConnectCtx, McpClient, RemoteTool};
use super::entry::ServerEntry;
use super::tool::McpTool;
use crate::tools::router::Registration;
use crate::tools::{Exposure, Router};

/// A server that did not start, for the `mcp_server_failed` notice.
#[derive(Debug, Clone)]
pub struct Failure {
    pub name: String,
    pub error: String,
}

/// A started server and the tools it listed.
pub struct Started {
    pub name: Arc<str>,
    pub client: Arc<dyn McpClient>,
    pub tools: Vec<RemoteTool>,
}

/// Starts every entry at once; each gets the whole startup timeout.
pub async fn start_all(
    entries: &[ServerEntry],
    ctx: &ConnectCtx<'_>,
    max_tools: usize,
) -> (Vec<Started>, Vec<Failure>) {
    let results = join_all(entries.iter().map(|e| start_one(e, ctx, max_tools))).await;
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    for (e, r) in entries.iter().zip(results) {
        match r {
            Ok(s) => ok.push(s),
            Err(error) => {
                tracing::warn!("mcp {}: not started: {error}", e.name);
                failed.push(Failure {
                    name: e.name.clone(),
                    error,
                });
            }
        }
    }
    (ok, failed)
}

pub async fn start_one(
    entry: &ServerEntry,
    ctx: &ConnectCtx<'_>,
    max_tools: usize,
) -> Result<Started, String> {
    let conn = client::connect(entry, ctx)
        .await
        .map_err(|e| e.to_string())?;
    let client: Arc<dyn McpClient> = conn;
    let listed = tokio::time::timeout(ctx.startup_timeout, client.list_tools(max_tools)).await;
    let tools = match listed {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            client.close().await;
            return Err(e);
        }
        Err(_) => {
            client.close().await;
            return Err(format!(
                "tools/list did not finish within mcp_startup_timeout_ms={}",
                ctx.startup_timeout.as_millis()
            ));
        }
    };
    // The initial burst of list_changed (some servers register tools after `initialized`)
    // is already covered by the list just taken.
    let _ = client.take_tools_changed();
    tracing::info!("mcp {}: started with {} tool(s)", entry.name, tools.len());
    Ok(Started {
        name: entry.name.as_str().into(),
        client,
        tools,
    })
}

/// The router registrations of one server's tools.
pub fn registrations(
    name: &Arc<str>,
    client: &Arc<dyn McpClient>,
    tools: &[RemoteTool],
    exposure: Exposure,
) -> Vec<Registration> {
    tools
        .iter()
        .map(|t| {
            let mut r = Registration::new(Arc::new(McpTool::new(name, t, client.clone())));
            r.exposure = Some(exposure);
            r.plugin = Some(format!("mcp:{name}"));
            r
        })
        .collect()
}

/// Direct while the mounted MCP tools fit `mcp_direct_tool_limit`, deferred (found through
/// `tool_search`) past it, so a server with hundreds of tools does not flood the prompt.
pub fn exposure_for(count: usize, direct_limit: usize) -> Exposure {
    if count > direct_limit {
        Exposure::Deferred
    } else {
        Exposure::Direct
    }
}

/// Registers `regs` one server at a time; a server whose names collide is reported failed
/// and closed rather than failing the others. Returns the names registered per server.
pub async fn register(
    router: &Router,
    started: Vec<Started>,
    exposure: Exposure,
    failures: &mut Vec<Failure>,
) -> Vec<Mounted> {
    let mut out = Vec::new();
    for s in started {
        let regs = registrations(&s.name, &s.client, &s.tools, exposure);
        let names: Vec<String> = regs.iter().map(|r| r.tool.name().to_string()).collect();
        match router.swap(&[], regs) {
            Ok(()) => out.push(Mounted {
                name: s.name,
                client: s.client,
                tools: names,
            }),
            Err(e) => {
                s.client.close().await;
                failures.push(Failure {
                    name: s.name.to_string(),
                    error: format!("its tools cannot be registered: {e}"),
                });
            }
        }
    }
    out
}

/// A server whose tools are on a router.
pub struct Mounted {
    pub name: Arc<str>,
    pub client: Arc<dyn McpClient>,
    /// Our names of its tools, as registered.
    pub tools: Vec<String>,
}

impl Mounted {
    /// Re-lists the tools after `tools/list_changed` and swaps them in on `router`.
    pub async fn refresh(&mut self, router: &Router, exposure: Exposure, max_tools: usize) {
        if !self.client.take_tools_changed() {
            return;
        }
        match self.client.list_tools(max_tools).await {
            Ok(tools) => {
                let regs = registrations(&self.name, &self.client, &tools, exposure);
                let names: Vec<String> = regs.iter().map(|r| r.tool.name().to_string()).collect();
                match router.swap(&self.tools, regs) {
                    Ok(()) => {
                        tracing::info!(
                            "mcp {}: tool list refreshed ({} tools)",
                            self.name,
                            names.len()
                        );
                        self.tools = names;
                    }
                    Err(e) => {
                        tracing::warn!("mcp {}: refreshed tools not registered: {e}", self.name)
                    }
                }
            }
            Err(e) => tracing::warn!(
                "mcp {}: tools/list after list_changed failed: {e}",
                self.name
            ),
        }
    }
}

/// One turn's own servers, on the turn's router (a fork of the shared one).
pub struct TurnMount {
    pub router: Arc<Router>,
    servers: Vec<Mounted>,
    exposure: Exposure,
    max_tools: usize,
}

impl TurnMount {
    /// Starts the turn's servers and forks `base` with their tools on it.
    pub async fn start(
        entries: &[ServerEntry],
        base: &Router,
        ctx: &ConnectCtx<'_>,
        settings: &super::McpSettings,
    ) -> (TurnMount, Vec<Failure>) {
        let (started, mut failures) = start_all(entries, ctx, settings.max_tools).await;
        let count: usize = started.iter().map(|s| s.tools.len()).sum();
        let exposure = exposure_for(count, settings.direct_limit);
        let router = base.fork();
        let servers = register(&router, started, exposure, &mut failures).await;
        (
            TurnMount {
                router,
                servers,
                exposure,
                max_tools: settings.max_tools,
            },
            failures,
        )
    }

    /// The mounted servers for the `mcp_mounted` notice: name, tool count, tier.
    pub fn describe(&self) -> Vec<serde_json::Value> {
        self.servers
            .iter()
            .map(|s| {
                serde_json::json!({"name": s.name.as_ref(), "tools": s.tools.len(),
                                   "exposure": self.exposure.as_str()})
            })
            .collect()
    }

    /// Between rounds: servers that announced a changed tool list are re-listed.
    pub async fn refresh(&mut self) {
        for s in &mut self.servers {
            s.refresh(&self.router, self.exposure, self.max_tools).await;
        }
    }

    /// Closes every server (in parallel): stdin closed, TERM, KILL.
    pub async fn close(self) {
        join_all(self.servers.iter().map(|s| s.client.close())).await;
    }
}
