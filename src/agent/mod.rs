//! The CoreLoop: `agent.chat.*` turns. `params` validates a request, `run` is the loop (one
//! round as reference §2.3), `compaction` manages the context, `persist` writes the durable
//! record, `stream` holds the live turns that cancel/steer/compact reach, `trace` keeps the
//! per-stream traces, `notices` is what the host sees.

pub mod approval;
pub mod compaction;
mod context;
pub mod display;
mod exec;
pub mod headless;
pub mod host_tools;
pub mod notices;
pub mod params;
pub mod persist;
pub mod run;
pub mod seed;
pub mod stream;
pub mod trace;

/// Live streams and kept traces, owned by the `App`.
#[derive(Default)]
pub struct AgentState {
    pub streams: stream::Streams,
    pub traces: trace::Traces,
    /// `*_for_session` approval decisions.
    pub approvals: approval::SessionRules,
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
