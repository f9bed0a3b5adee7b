//! `system.ping`, `system.shutdown`, `system.shutdown_now`.

use std::sync::Arc;

use crate::app::App;
use crate::lifecycle::Cause;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, reply, reply_null};

pub async fn ping(app: Arc<App>, _call: Call) -> Outcome {
    // The first ping may wait for the (already started) python probe; later ones never do.
    app.python_version().await;
    reply(&app.health())
}

pub async fn shutdown(app: Arc<App>, call: Call) -> Outcome {
    call.reply_now(reply_null());
    app.lifecycle.request_stop(Cause::Graceful);
    reply_null()
}

pub async fn shutdown_now(app: Arc<App>, call: Call) -> Outcome {
    call.reply_now(reply_null());
    app.lifecycle.request_stop(Cause::Now);
    reply_null()
}
