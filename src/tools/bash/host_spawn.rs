//! `bash` under `execSandbox.hostSpawn: true`: the host runs the command under its own
//! confinement (reverse `host.process.spawn`) and its answer is mapped onto bash's usual
//! result: output cleaned and bounded the same way, saved when cut, the host's sandbox
//! marker reported as it was given (`none` when the host says nothing we could vouch for).

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{failure, output, saved, with_marker};
use crate::config::Settings;
use crate::host::HostError;
use crate::protocol::host::{HostSpawnRequest, SpawnPolicy};
use crate::sandbox::Marker;
use crate::tools::{ToolContext, ToolResult};

/// Beyond the command's own timeout, how long the host may take to answer.
const HOST_SLACK: Duration = Duration::from_secs(10);

fn marker_from(v: Option<&Value>) -> Marker {
    let field = |k: &str| v.and_then(|m| m.get(k)).and_then(Value::as_str);
    let enforcement = field("enforcement")
        .filter(|e| matches!(*e, "full" | "partial" | "none"))
        .unwrap_or("none");
    Marker {
        backend: field("backend")
            .filter(|b| !b.is_empty())
            .unwrap_or("host")
            .to_string(),
        enforcement: enforcement.to_string(),
    }
}

pub(super) async fn run(
    ctx: &ToolContext,
    command: &str,
    timeout_ms: u64,
    raw: bool,
    settings: &Settings,
) -> ToolResult {
    let Some(host) = ctx.host.clone() else {
        return ToolResult::recoverable(
            "bash: execSandbox.hostSpawn is set but no host is connected to run the command",
        );
    };
    let req = ctx.exec_sandbox.clone().unwrap_or_default();
    let workspace = &ctx.workspace_root;
    let mut roots = vec![workspace.display().to_string()];
    for r in settings
        .sandbox_writable_roots
        .iter()
        .chain(req.writable_roots.iter().flatten())
    {
        let r = r.display().to_string();
        if !roots.contains(&r) {
            roots.push(r);
        }
    }
    let mut context = ctx.host_context.clone();
    context.insert("callId".into(), json!(ctx.call_id));
    let params = json!(HostSpawnRequest {
        command: command.to_string(),
        cwd: workspace.display().to_string(),
        timeout_ms,
        policy: SpawnPolicy {
            writable_roots: roots,
            network: req.network.unwrap_or(settings.sandbox_network),
            allowed_hosts: req.allowed_hosts.clone().unwrap_or_default(),
        },
        context,
    });
    let started = Instant::now();
    let wait = Duration::from_millis(timeout_ms) + HOST_SLACK;
    let answer = host
        .call("host.process.spawn", params, wait, &ctx.cancel)
        .await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let v = match answer {
        Ok(Value::Object(o)) => o,
        Ok(other) => {
            return ToolResult::recoverable(format!(
                "bash: the host answered host.process.spawn with {} instead of {{exitCode, stdout, stderr}}",
                crate::tools::json_type_name(&other)
            ));
        }
        Err(HostError::Cancelled { .. }) => {
            return ToolResult::recoverable("cancelled before the host finished the command")
                .with_data("cancelled", true);
        }
        Err(e) => {
            return ToolResult::recoverable(format!(
                "bash: the host could not run the command: {e}"
            ))
            .with_data("hostSpawn", true);
        }
    };
    let exit = match v.get("exitCode") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_i64() {
            Some(c) => Some(c),
            None => {
                return ToolResult::recoverable(
                    "bash: the host's exitCode is not an integer".to_string(),
                );
            }
        },
        Some(_) => {
            return ToolResult::recoverable(
                "bash: the host's exitCode must be an integer or null".to_string(),
            );
        }
    };
    let stream = |k: &str| -> Result<String, String> {
        match v.get(k) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) if raw => Ok(s.clone()),
            Some(Value::String(s)) => Ok(output::clean(s)),
            Some(_) => Err(format!("bash: the host's {k} must be a string")),
        }
    };
    let (stdout, stderr) = match (stream("stdout"), stream("stderr")) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(e), _) | (_, Err(e)) => return ToolResult::recoverable(e),
    };
    let marker = marker_from(v.get("sandbox"));
    let failed = exit != Some(0);
    let (bo, be) = output::bound(&stdout, &stderr, settings.bash_max_output_bytes, failed);
    let host_cut = v.get("truncated").and_then(Value::as_bool).unwrap_or(false);
    let truncated = host_cut || bo.omitted > 0 || be.omitted > 0;
    let mut data = Map::new();
    data.insert("exitCode".into(), json!(exit));
    data.insert("stdout".into(), json!(bo.text));
    data.insert("stderr".into(), json!(be.text));
    data.insert("truncated".into(), json!(truncated));
    data.insert("durationMs".into(), json!(duration_ms));
    data.insert("hostSpawn".into(), json!(true));
    if bo.omitted > 0 || be.omitted > 0 {
        match saved::save(workspace, &ctx.call_id, &stdout, &stderr) {
            Ok(p) => {
                data.insert("file_path".into(), json!(p.display().to_string()));
            }
            Err(e) => tracing::warn!("bash: cannot save the host's full output: {e}"),
        }
    }
    let result = match exit {
        Some(0) => ToolResult::ok(data),
        Some(c) => failure(format!("exit {c}"), data),
        None => failure(
            "the host reported no exit code (the command did not finish)".into(),
            data,
        ),
    };
    with_marker(result, &marker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_is_only_what_the_host_vouches_for() {
        let m = marker_from(Some(&json!({"backend": "seatbelt", "enforcement": "full"})));
        assert_eq!(
            (m.backend.as_str(), m.enforcement.as_str()),
            ("seatbelt", "full")
        );
        let m = marker_from(Some(&json!({"backend": "x", "enforcement": "total"})));
        assert_eq!(m.enforcement, "none");
        let m = marker_from(None);
        assert_eq!(
            (m.backend.as_str(), m.enforcement.as_str()),
            ("host", "none")
        );
    }
}
