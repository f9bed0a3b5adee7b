//! Every type on the wire (serde + schemars). `schemas/` is generated from `table`
//! by `outrigger schemas --out schemas` and a test fails when the two drift apart.

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub mod catalog;
pub mod chat;
pub mod debug;
pub mod host;
pub mod session;
pub mod table;
pub mod tools;
pub mod ts;

/// A result that writes its own JSON text, for the few results large enough that serde's
/// per-field work shows (a 10,000-tool list). It writes the same bytes as its `Serialize`
/// impl into the compact serializer; each implementor has a test comparing the two.
pub trait JsonText: Serialize {
    fn write_json(&self, out: &mut Vec<u8>);
}

/// `s` as a JSON string, escaped exactly as `serde_json` escapes it: text with nothing to
/// escape (nearly every name and description) is copied whole.
pub fn write_json_str(out: &mut Vec<u8>, s: &str) {
    // A fold, not `all`: without the early exit the scan is vectorised.
    let plain = !s
        .bytes()
        .fold(false, |e, b| e | (b < 0x20) | (b == b'"') | (b == b'\\'));
    if plain {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing a string into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

pub const PROTOCOL_VERSION: &str = "0.1.0";
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Reply of `system.ping`; also the payload of the `__SIDECAR_READY__:` stderr marker.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarHealth {
    /// `ok` once the process serves requests.
    pub status: Cow<'static, str>,
    pub version: Cow<'static, str>,
    pub protocol_version: Cow<'static, str>,
    pub uptime_ms: u64,
    pub pid: u32,
    /// Version of the `python3` that `run_code` uses, or null when none was found (or not yet probed).
    pub python_version: Option<String>,
    /// Always `rust`.
    pub runtime: Cow<'static, str>,
    pub rust_version: Cow<'static, str>,
    /// `linux-x86_64` style.
    pub platform: Cow<'static, str>,
    pub loaded_providers: Vec<String>,
    pub loaded_tools: usize,
    pub active_traces: usize,
    pub checks: BTreeMap<Cow<'static, str>, HealthCheck>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HealthCheck {
    pub status: Cow<'static, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Cow<'static, str>>,
}

/// `lifecycle.ready` params: the first frame on stdout.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleReady {
    pub version: String,
    pub protocol_version: String,
    pub pid: u32,
    pub listen_info: ListenInfo,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ListenInfo {
    /// Always `stdio`.
    pub transport: String,
}

/// `lifecycle.shutdown` params: the last frame on stdout.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct LifecycleShutdown {
    pub reason: ShutdownReason,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ShutdownReason {
    /// `system.shutdown`, `system.shutdown_now`, SIGTERM or SIGINT.
    Normal,
    /// stdin reached end of file (or the parent process went away).
    Eof,
}

/// What the assistant asks to run. No other members are allowed.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// Unique within a chat.
    pub id: String,
    /// A tool name registered with the runtime.
    pub name: String,
    /// Model-provided arguments, validated against the tool's schema.
    pub arguments: Map<String, Value>,
}

/// What the runtime reports back. Other members are allowed for forward compatibility.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub success: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs_followup: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Map<String, Value>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The `error` member of an error response.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RpcErrorObject {
    pub code: i64,
    pub message: String,
    /// Same as `data.kind`; kept top-level for hosts of the reference implementation.
    pub kind: String,
    /// Always carries `kind`; `-32601` adds `method`.
    pub data: Map<String, Value>,
}

/// `config.get` params.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigGetParams {
    /// Include every key with its value and the layer it came from.
    #[serde(default)]
    pub merged: bool,
    /// Preview per-request overrides (`{key: value}`) without applying them.
    #[serde(default, rename = "override")]
    pub overrides: Option<Map<String, Value>>,
}

/// `config.get` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigGetResult {
    pub log_level: String,
    pub grace_period_seconds: f64,
    pub version: String,
    pub protocol_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged: Option<BTreeMap<String, ConfigValue>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ConfigValue {
    pub value: Value,
    /// `default`, `file`, `profile`, `env`, `cli`, `override` or `managed`.
    pub source: String,
}

/// Params of a method that takes none (`{}` or omitted).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// `request.cancel` params: the id of the request to cancel, as the host sent it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestCancelParams {
    /// A string, number or null id.
    pub id: Value,
}

/// `request.cancel` result: whether a queued or running request had that id.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RequestCancelResult {
    pub cancelled: bool,
}

/// `config.set` params.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigSetParams {
    /// `DEBUG`, `INFO`, `WARNING` or `ERROR`; applies to later log lines at once.
    #[serde(default)]
    pub log_level: Option<String>,
}

/// One standalone JSON Schema per wire type: each of the bundle's definitions with the
/// definitions it refers to (transitively), by type name.
pub fn all_schemas() -> Vec<(String, Value)> {
    let bundle = table::bundle();
    let Some(defs) = bundle.get("$defs").and_then(Value::as_object) else {
        return Vec::new();
    };
    defs.iter()
        .map(|(name, def)| {
            let mut needed = std::collections::BTreeSet::new();
            let mut todo = vec![def];
            while let Some(v) = todo.pop() {
                for r in refs(v) {
                    if needed.insert(r.clone())
                        && let Some(d) = defs.get(&r)
                    {
                        todo.push(d);
                    }
                }
            }
            let mut one = serde_json::Map::new();
            one.insert(
                "$schema".into(),
                Value::from("https://json-schema.org/draft/2020-12/schema"),
            );
            one.insert("title".into(), Value::from(name.clone()));
            if let Value::Object(o) = def {
                one.extend(o.clone());
            }
            if !needed.is_empty() {
                let sub: serde_json::Map<String, Value> = needed
                    .iter()
                    .filter_map(|n| defs.get(n).map(|d| (n.clone(), d.clone())))
                    .collect();
                one.insert("$defs".into(), Value::Object(sub));
            }
            (name.clone(), Value::Object(one))
        })
        .collect()
}

/// The `#/$defs/X` names a schema node refers to.
fn refs(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match v {
        Value::Object(o) => {
            if let Some(r) = o.get("$ref").and_then(Value::as_str)
                && let Some(name) = r.strip_prefix("#/$defs/")
            {
                out.push(name.to_string());
            }
            for x in o.values() {
                out.extend(refs(x));
            }
        }
        Value::Array(a) => {
            for x in a {
                out.extend(refs(x));
            }
        }
        _ => {}
    }
    out
}

/// Pretty JSON with a trailing newline, for files people diff.
fn pretty<T: Serialize>(v: &T) -> std::io::Result<String> {
    let mut text = serde_json::to_string_pretty(v).map_err(std::io::Error::other)?;
    text.push('\n');
    Ok(text)
}

/// Writes one `<Name>.json` per type into `dir`, plus the bundle of the whole protocol
/// (`outrigger.schema.json`) and its TypeScript declarations (`outrigger.d.ts`).
pub fn write_schemas(dir: &std::path::Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let all = all_schemas();
    for (name, schema) in &all {
        std::fs::write(dir.join(format!("{name}.json")), pretty(schema)?)?;
    }
    std::fs::write(dir.join("outrigger.schema.json"), pretty(&table::bundle())?)?;
    std::fs::write(dir.join("outrigger.d.ts"), table::typescript())?;
    Ok(all.len() + 2)
}
