//! `sandbox.describe`: the `{backend, enforcement}` marker a command run with this egress
//! would carry, so a host can pick a posture it can satisfy (e.g. before `requireFull`).

use std::sync::Arc;

use crate::app::App;
use crate::protocol::tools::{SandboxDescribeParams, SandboxDescription};
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, RpcError, reply};

pub async fn describe(_app: Arc<App>, call: Call) -> Outcome {
    // `allowedHosts`, `shell` and `writableRoots` are accepted and do not change the answer:
    // enforcement depends on egress alone.
    let p: SandboxDescribeParams = call.params()?;
    let Some(sandbox) = crate::sandbox::global() else {
        return Err(RpcError::internal("the sandbox service is not installed"));
    };
    let a = sandbox.describe(p.network).await;
    reply(&SandboxDescription {
        backend: a.marker.backend,
        enforcement: a.marker.enforcement,
        missing: a.missing,
    })
}
