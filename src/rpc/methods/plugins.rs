//! `plugin.list`, `plugin.enable`, `plugin.disable`, `plugin.reload`.

use std::sync::Arc;

use crate::app::App;
use crate::protocol::NoParams;
use crate::protocol::tools::{PluginInfo, PluginListResult, PluginNameParams, PluginResult};
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, RpcError, reply};
use crate::tools::plugins::{PluginOpError, PluginRow};

fn info(row: PluginRow) -> PluginInfo {
    PluginInfo {
        name: row.name,
        origin: row.origin,
        tools: row.tools,
        enabled: row.enabled,
        reloadable: row.reloadable,
    }
}

pub async fn list(app: Arc<App>, call: Call) -> Outcome {
    let _: NoParams = call.params()?;
    let plugins = app.plugins.list().into_iter().map(info).collect();
    reply(&PluginListResult { plugins })
}

fn answer(r: Result<PluginRow, PluginOpError>) -> Outcome {
    match r {
        Ok(row) => reply(&PluginResult { plugin: info(row) }),
        // Unknown names, wrong states and manifests that no longer load are all the
        // caller's to fix.
        Err(e) => Err(RpcError::invalid_params(e.to_string())),
    }
}

pub async fn enable(app: Arc<App>, call: Call) -> Outcome {
    let p: PluginNameParams = call.params()?;
    answer(app.plugins.enable(&p.name))
}

pub async fn disable(app: Arc<App>, call: Call) -> Outcome {
    let p: PluginNameParams = call.params()?;
    answer(app.plugins.disable(&p.name))
}

pub async fn reload(app: Arc<App>, call: Call) -> Outcome {
    let p: PluginNameParams = call.params()?;
    answer(app.plugins.reload(&p.name))
}
