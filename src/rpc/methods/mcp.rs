//! `mcp.list`: the configured MCP servers (`mcp_servers`), their state and tools.

use std::sync::Arc;

use crate::app::App;
use crate::protocol::tools::{McpListParams, McpListResult};
use crate::rpc::error::RpcError;

pub async fn list(app: Arc<App>, p: McpListParams) -> Result<McpListResult, RpcError> {
    let mcp = &app.agent.mcp;
    if p.start {
        let cancel = app.lifecycle.token();
        // Failures are in the list (state `failed`, with the error).
        let _ = mcp.ensure_started(&cancel).await;
    }
    Ok(McpListResult {
        servers: mcp.list(),
    })
}
