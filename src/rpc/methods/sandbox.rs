//! `sandbox.describe`: the `{backend, enforcement}` marker a command run with this egress
//! would carry, so a host can pick a posture it can satisfy (e.g. before `requireFull`).

use std::sync::Arc;

use crate::app::App;
use crate::protocol::tools::{ProcessLimitDescription, SandboxDescribeParams, SandboxDescription};
use crate::rpc::error::RpcError;

/// `allowedHosts`, `shell` and `writableRoots` are accepted and do not change the answer:
/// enforcement depends on egress alone.
pub async fn describe(
    _: Arc<App>,
    p: SandboxDescribeParams,
) -> Result<SandboxDescription, RpcError> {
    let Some(sandbox) = crate::sandbox::global() else {
        return Err(RpcError::internal("the sandbox service is not installed"));
    };
    let a = sandbox.describe(p.network).await;
    let limit = sandbox.process_limit().await;
    Ok(SandboxDescription {
        backend: a.marker.backend,
        enforcement: a.marker.enforcement,
        missing: a.missing,
        process_limit: ProcessLimitDescription {
            mechanism: limit.mechanism.as_str().into(),
            max: limit.max,
        },
    })
}
