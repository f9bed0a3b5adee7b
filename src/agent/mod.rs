//! The CoreLoop: `agent.chat.*` turns. `params` validates a request, `chat` prepares and
//! launches a turn, `run` is the loop (one round as reference §2.3), `compaction` manages
//! the context, `persist` writes the durable record, `stream` holds the live turns that
//! cancel/steer/compact reach, `trace` keeps the per-stream traces, `events`/`notices` are
//! what the host sees. The loop reaches the rest of the process only through the handles in
//! `Agent` (store, router, lifecycle, config, file tools, the host seam, the event sink); it
//! imports nothing from `rpc` or `app`.

pub mod approval;
pub mod chat;
pub mod compaction;
mod context;
mod delegate;
pub mod display;
pub mod events;
mod exec;
pub mod host_tools;
pub mod images;
pub mod notices;
mod offered;
pub mod orchestrate;
pub mod params;
pub mod persist;
pub mod run;
pub mod seed;
pub mod stream;
pub mod subagent;
pub mod trace;
mod trace_writer;
pub mod transcripts;

use std::sync::Arc;

use crate::config::SharedConfig;
use crate::host::HostLink;
use crate::lifecycle::Lifecycle;
use crate::store::Store;
use crate::tools::Router;
use crate::tools::fs::FsEnv;

/// What turns run with, built once by the composition root, plus the live turns, the kept
/// traces and the session approval rules.
pub struct Agent {
    pub store: Arc<Store>,
    pub router: Arc<Router>,
    pub lifecycle: Arc<Lifecycle>,
    pub config: SharedConfig,
    /// The file tools' shared state (resume re-seeds its read state).
    pub fs: Arc<FsEnv>,
    /// Requests to the host (reverse calls).
    pub host: Arc<dyn HostLink>,
    /// Where turns' events go.
    pub sink: Arc<dyn events::EventSink>,
    pub streams: stream::Streams,
    pub traces: trace::Traces,
    /// `*_for_session` approval decisions.
    pub approvals: approval::SessionRules,
    /// Recent records' transcripts, so a follow-up turn does not re-read its history.
    pub transcripts: transcripts::Transcripts,
    /// The config's `mcp_servers`, started on first use.
    pub mcp: Arc<crate::mcp::Configured>,
    /// The tool list last offered, reused by turns with the same inputs.
    offered: offered::Offered,
}

impl Agent {
    /// Where images shown to the model are kept: beside the store.
    pub fn images_dir(&self) -> std::path::PathBuf {
        images::dir_for(self.store.path())
    }

    pub fn new(
        store: Arc<Store>,
        router: Arc<Router>,
        lifecycle: Arc<Lifecycle>,
        config: SharedConfig,
        fs: Arc<FsEnv>,
        host: Arc<dyn HostLink>,
        sink: Arc<dyn events::EventSink>,
    ) -> Agent {
        let settings = config.settings();
        let (cache_bytes, trace_bytes) =
            (settings.transcript_cache_bytes, settings.trace_memory_bytes);
        let mcp = {
            let shared = config.clone();
            crate::mcp::Configured::new(
                settings.mcp_servers.clone(),
                router.clone(),
                lifecycle.clone(),
                crate::sandbox::global().and_then(|s| s.launcher().map(Into::into)),
                settings
                    .workspace_root
                    .clone()
                    .or_else(|| std::env::current_dir().ok())
                    .unwrap_or_else(|| "/".into()),
                Arc::new(move || crate::mcp::McpSettings::from_settings(&shared.settings())),
            )
        };
        Agent {
            mcp,
            transcripts: transcripts::Transcripts::new(cache_bytes),
            traces: trace::Traces::durable(trace_bytes, store.clone()),
            store,
            router,
            lifecycle,
            config,
            fs,
            host,
            sink,
            streams: stream::Streams::default(),
            approvals: approval::SessionRules::default(),
            offered: offered::Offered::default(),
        }
    }
}

/// Why a turn could not start (mapped to wire codes by `rpc`).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AgentError {
    /// The request itself is wrong; the message names the field and the fix.
    #[error("{0}")]
    InvalidParams(String),
    /// A record or stream the request names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The durable store failed.
    #[error("{0}")]
    Storage(String),
}

pub mod ids {
    use crate::store::ids::random_hex;

    /// `str_<32 hex>`.
    pub fn stream_id() -> String {
        format!("str_{}", random_hex(16))
    }

    /// `trace_<32 hex>`.
    pub fn trace_id() -> String {
        format!("trace_{}", random_hex(16))
    }
}

#[cfg(test)]
mod tests {
    /// The loop talks to the host through `events` and `host` only: no file under
    /// `src/agent/` or `src/tools/` may reach up into the wire or the composition root.
    #[test]
    fn no_upward_imports() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut stack = vec![root.join("agent"), root.join("tools")];
        let mut checked = 0;
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("source dir") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let text = std::fs::read_to_string(&path).expect("source file");
                // Spelled in pieces so this file does not match itself.
                for module in ["rpc", "app", "serve"] {
                    let bad = format!("crate::{module}");
                    assert!(!text.contains(&bad), "{} uses {bad}", path.display());
                }
                checked += 1;
            }
        }
        assert!(checked > 20, "only {checked} files checked");
    }
}
