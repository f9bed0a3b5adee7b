//! `trace.fetch`: one stream's trace (header, spans, events), from memory while it is kept
//! there, else from the store (finished traces are persisted).

use std::sync::Arc;

use serde::Deserialize;

use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{ErrorKind, Outcome, RpcError, reply};
use crate::rpc::methods::sessions::with_store;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FetchParams {
    trace_id: String,
}

pub async fn fetch(app: Arc<App>, call: Call) -> Outcome {
    let p: FetchParams = call.params()?;
    if let Some(v) = app.agent.traces.fetch(&p.trace_id) {
        return reply(&v);
    }
    let id = p.trace_id.clone();
    match with_store(&app, move |st| st.get_trace(&id)).await? {
        Some(v) => reply(&v),
        None => Err(RpcError::new(
            ErrorKind::NotFound,
            format!(
                "trace not found: {} (neither running nor stored; traces are stored when their \
                 stream finishes, in the database given by --storage-path)",
                p.trace_id
            ),
        )),
    }
}
