//! `plugin.list`, `plugin.enable`, `plugin.disable`, `plugin.reload`.

use std::sync::Arc;

use crate::app::App;
use crate::protocol::NoParams;
use crate::protocol::tools::{PluginInfo, PluginListResult, PluginNameParams, PluginResult};
use crate::rpc::error::RpcError;
use crate::tools::plugins::PluginRow;

fn info(row: PluginRow) -> PluginInfo {
    PluginInfo {
        name: row.name,
        origin: row.origin,
        tools: row.tools,
        enabled: row.enabled,
        reloadable: row.reloadable,
    }
}

pub async fn list(app: Arc<App>, _: NoParams) -> Result<PluginListResult, RpcError> {
    let plugins = app.plugins.list().into_iter().map(info).collect();
    Ok(PluginListResult { plugins })
}

pub async fn enable(app: Arc<App>, p: PluginNameParams) -> Result<PluginResult, RpcError> {
    let row = app.plugins.enable(&p.name)?;
    Ok(PluginResult { plugin: info(row) })
}

pub async fn disable(app: Arc<App>, p: PluginNameParams) -> Result<PluginResult, RpcError> {
    let row = app.plugins.disable(&p.name)?;
    Ok(PluginResult { plugin: info(row) })
}

pub async fn reload(app: Arc<App>, p: PluginNameParams) -> Result<PluginResult, RpcError> {
    let row = app.plugins.reload(&p.name)?;
    Ok(PluginResult { plugin: info(row) })
}
