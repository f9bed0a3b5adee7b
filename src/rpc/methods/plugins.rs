//! `plugin.list`, `plugin.enable`, `plugin.disable`, `plugin.reload`.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;

use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, RpcError, reply};
use crate::strict::NoParams;
use crate::tools::plugins::{PluginOpError, PluginRow};

pub async fn list(app: Arc<App>, call: Call) -> Outcome {
    let _: NoParams = call.params()?;
    reply(&json!({ "plugins": app.plugins.list() }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameParams {
    name: String,
}

fn answer(r: Result<PluginRow, PluginOpError>) -> Outcome {
    match r {
        Ok(row) => reply(&json!({ "plugin": row })),
        // Unknown names, wrong states and manifests that no longer load are all the
        // caller's to fix.
        Err(e) => Err(RpcError::invalid_params(e.to_string())),
    }
}

pub async fn enable(app: Arc<App>, call: Call) -> Outcome {
    let p: NameParams = call.params()?;
    answer(app.plugins.enable(&p.name))
}

pub async fn disable(app: Arc<App>, call: Call) -> Outcome {
    let p: NameParams = call.params()?;
    answer(app.plugins.disable(&p.name))
}

pub async fn reload(app: Arc<App>, call: Call) -> Outcome {
    let p: NameParams = call.params()?;
    answer(app.plugins.reload(&p.name))
}
