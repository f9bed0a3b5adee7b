//! Command-line flags. Serve mode is the default; helper subcommands hang off it.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "outrigger",
    version,
    about = "Agent runtime sidecar: JSON-RPC 2.0 over stdin/stdout, one object per line",
    long_about = "Outrigger is an agent runtime in one binary. A host spawns it and speaks JSON-RPC 2.0 \
                  to it over stdin/stdout, one JSON object per line. Logs and the \
                  __SIDECAR_READY__: marker go to stderr; stdout carries only JSON frames."
)]
pub struct Cli {
    /// Sidecar log level (always logged on stderr).
    #[arg(long, value_enum, ignore_case = true, global = true)]
    pub log_level: Option<LogLevel>,

    /// Skip the __SIDECAR_READY__ stderr marker (keep the lifecycle.ready stdout notification).
    #[arg(long)]
    pub quiet_ready: bool,

    /// Path of the durable SQLite store (default: $OUTRIGGER_HOME/outrigger.db).
    #[arg(long, value_name = "PATH", global = true)]
    pub storage_path: Option<PathBuf>,

    /// Print the merged configuration with the layer each value came from, then exit.
    #[arg(long)]
    pub dump_config: bool,

    /// Leave web_fetch and web_search out (the config key `web_tools: false`).
    #[arg(long, global = true)]
    pub no_web_tools: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write one JSON Schema file per wire type into DIR.
    Schemas {
        /// Directory to write the schema files into (created if missing): one JSON Schema
        /// per type, the bundle `outrigger.schema.json` and the declarations `outrigger.d.ts`.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Also (or only) write the TypeScript declarations to this file.
        #[arg(long, value_name = "FILE")]
        ts: Option<PathBuf>,
    },
    /// Send one model request and print every provider event as a JSON line (debugging).
    LlmProbe(crate::llm::probe::ProbeArgs),
    /// Run one agent turn headless and print the answer, a JSON result or JSON events
    /// (docs/headless.md). Exit 0 completed, 1 failed, 2 usage, 3 budget, 130 interrupted.
    Run(crate::headless::RunArgs),
    /// Serve the Agent Client Protocol over stdio, for editors such as Zed (docs/acp.md).
    Acp(crate::acp::AcpArgs),
    /// Serve a read-only web page of the store's sessions, branch trees and traces on
    /// 127.0.0.1 (prints its URL with a one-time token; runs beside a live sidecar).
    Inspect(crate::inspect::InspectArgs),
    /// Serve Outrigger's file tools and bash as an MCP server over stdio.
    Mcp {
        /// The workspace the tools work in: relative paths resolve against it and bash runs
        /// (and may write) only inside it. Default: the current directory.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// Internal: the sandbox launcher the sidecar runs commands through.
    #[command(name = "__sandbox-exec", hide = true)]
    SandboxExec {
        /// The launch spec (policy and layers) as JSON.
        #[arg(long)]
        spec: Option<String>,
        /// Report which layers this host can apply, as JSON, and exit.
        #[arg(long)]
        probe: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true)]
        argv: Vec<std::ffi::OsString>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "UPPER")]
pub enum LogLevel {
    Debug,
    Info,
    Warning,
    Error,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "DEBUG",
            LogLevel::Info => "INFO",
            LogLevel::Warning => "WARNING",
            LogLevel::Error => "ERROR",
        }
    }
}
