//! `sandbox.describe`: the `{backend, enforcement}` marker a command run with this egress
//! would carry, so a host can pick a posture it can satisfy (e.g. before `requireFull`).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, RpcError, reply};

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DescribeParams {
    network: Option<bool>,
    /// Reported only: hosts are not enforced one by one, so any network is `partial`.
    #[serde(default)]
    allowed_hosts: Vec<String>,
    /// Accepted for parity; the Linux backend does not depend on the shell.
    #[serde(default)]
    shell: Option<Value>,
    /// Ignored: enforcement depends on egress alone.
    #[serde(default)]
    writable_roots: Option<Value>,
}

pub async fn describe(_app: Arc<App>, call: Call) -> Outcome {
    let p: DescribeParams = call.params()?;
    let _ = (&p.allowed_hosts, &p.shell, &p.writable_roots);
    let Some(sandbox) = crate::sandbox::global() else {
        return Err(RpcError::internal("the sandbox service is not installed"));
    };
    let a = sandbox.describe(p.network).await;
    reply(&json!({
        "backend": a.marker.backend,
        "enforcement": a.marker.enforcement,
        "missing": a.missing,
    }))
}
