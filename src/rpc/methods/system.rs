//! `system.ping`, `system.shutdown`, `system.shutdown_now`.

use std::sync::Arc;

use serde_json::Value;

use crate::app::App;
use crate::lifecycle::Cause;
use crate::rpc::dispatch::Call;
use crate::rpc::error::RpcError;

pub async fn ping(app: Arc<App>, _call: Call) -> Result<Value, RpcError> {
    // The first ping may wait for the (already started) python probe; later ones never do.
    app.python_version().await;
    serde_json::to_value(app.health()).map_err(|e| RpcError::internal(e.to_string()))
}

pub async fn shutdown(app: Arc<App>, call: Call) -> Result<Value, RpcError> {
    call.reply_now(Ok(Value::Null));
    app.lifecycle.request_stop(Cause::Graceful);
    Ok(Value::Null)
}

pub async fn shutdown_now(app: Arc<App>, call: Call) -> Result<Value, RpcError> {
    call.reply_now(Ok(Value::Null));
    app.lifecycle.request_stop(Cause::Now);
    Ok(Value::Null)
}
