//! `system.ping`, `system.shutdown`, `system.shutdown_now`.

use std::sync::Arc;

use crate::app::App;
use crate::lifecycle::Cause;
use crate::protocol::SidecarHealth;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, RpcError, reply_null};

// Takes no params and refuses none: a liveness probe answers whatever it carries.
pub async fn ping(app: Arc<App>) -> Result<SidecarHealth, RpcError> {
    // Never waits for the python probe: `pythonVersion` is null until it has answered.
    Ok(app.health())
}

// Raw `Call` form: answers `null` (`reply_now`) before the stop begins.
pub async fn shutdown(app: Arc<App>, call: Call) -> Outcome {
    call.reply_now(reply_null());
    app.lifecycle.request_stop(Cause::Graceful);
    reply_null()
}

// Raw `Call` form: answers `null` (`reply_now`) before the stop begins.
pub async fn shutdown_now(app: Arc<App>, call: Call) -> Outcome {
    call.reply_now(reply_null());
    app.lifecycle.request_stop(Cause::Now);
    reply_null()
}
