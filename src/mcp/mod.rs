//! MCP both ways, on `rmcp` (pinned) kept behind `client`: the client side mounts MCP
//! servers' tools on a router (a turn's own `mcp` entries on the turn's router; the config's
//! `mcp_servers` on the shared one); `server` is `outrigger mcp`, serving our own tools to
//! editors over stdio.

pub mod client;
pub mod configured;
pub mod entry;
pub mod mount;
pub mod server;
pub mod tool;

use std::time::Duration;

pub use configured::Configured;

/// The config's MCP limits, read when servers start.
#[derive(Debug, Clone, Copy)]
pub struct McpSettings {
    /// `mcp_startup_timeout_ms`: spawn + initialize + the first tools/list.
    pub startup_timeout: Duration,
    /// `mcp_direct_tool_limit`: more mounted MCP tools than this go to the deferred tier.
    pub direct_limit: usize,
    /// `mcp_max_tools`: tools kept per server.
    pub max_tools: usize,
}

impl McpSettings {
    pub fn from_settings(s: &crate::config::Settings) -> McpSettings {
        McpSettings {
            startup_timeout: Duration::from_millis(s.mcp_startup_timeout_ms),
            direct_limit: s.mcp_direct_tool_limit,
            max_tools: s.mcp_max_tools,
        }
    }
}
