//! `trace.fetch`: one stream's trace (header, spans, events) while it is kept in memory.

use std::sync::Arc;

use serde::Deserialize;

use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{ErrorKind, Outcome, RpcError, reply};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FetchParams {
    trace_id: String,
}

pub async fn fetch(app: Arc<App>, call: Call) -> Outcome {
    let p: FetchParams = call.params()?;
    match app.agent.traces.fetch(&p.trace_id) {
        Some(v) => reply(&v),
        None => Err(RpcError::new(
            ErrorKind::NotFound,
            format!(
                "trace not found: {} (traces are kept in memory for the newest {} streams of this process)",
                p.trace_id,
                crate::agent::trace::MAX_TRACES
            ),
        )),
    }
}
