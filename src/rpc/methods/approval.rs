//! `approval.list` / `approval.clear`: the permanent approval rules (`allow_always`,
//! `deny_always`) the host's answers stored; the decisions themselves are the approval
//! layer's (`agent/approval.rs`).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;

use crate::agent::persist;
use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{ErrorKind, Outcome, RpcError, reply};

fn storage(e: String) -> RpcError {
    RpcError::new(ErrorKind::Storage, e)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {}

pub async fn list(app: Arc<App>, call: Call) -> Outcome {
    let _: ListParams = call.params()?;
    let rules = persist::call(&app.store, |s| s.list_approval_rules())
        .await
        .map_err(storage)?;
    reply(&json!({ "rules": rules }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClearParams {
    tool_name: Option<String>,
    category: Option<String>,
}

pub async fn clear(app: Arc<App>, call: Call) -> Outcome {
    let p: ClearParams = call.params()?;
    let cleared = persist::call(&app.store, move |s| {
        s.clear_approval_rules(p.tool_name.as_deref(), p.category.as_deref())
    })
    .await
    .map_err(storage)?;
    reply(&json!({ "cleared": cleared }))
}
