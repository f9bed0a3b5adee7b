//! The protocol as one table: every method (name → params type → result type), every
//! notification and every reverse request, declared once. The dispatcher's handler table,
//! `docs/protocol.md`'s completeness test, `schemas/outrigger.schema.json` and
//! `schemas/outrigger.d.ts` are all checked against it.

use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, schema_for};
use serde_json::{Map, Value, json};

/// One request/response pair.
pub struct Call {
    pub name: &'static str,
    pub params: fn() -> Schema,
    pub result: fn() -> Schema,
}

/// One notification (no answer).
pub struct Notification {
    pub name: &'static str,
    pub params: fn() -> Schema,
}

fn schema_of<T: JsonSchema>() -> Schema {
    schema_for!(T)
}

const fn call<P: JsonSchema, R: JsonSchema>(name: &'static str) -> Call {
    Call {
        name,
        params: schema_of::<P>,
        result: schema_of::<R>,
    }
}

const fn note<P: JsonSchema>(name: &'static str) -> Notification {
    Notification {
        name,
        params: schema_of::<P>,
    }
}

use super::catalog as cat;
use super::debug as d;
use super::host as h;
use super::session as ses;
use super::tools as t;
use super::*;

/// Every method a host can call (the `debug.*` diagnostics are in `DEBUG_METHODS`).
pub const METHODS: &[Call] = &[
    call::<NoParams, SidecarHealth>("system.ping"),
    call::<NoParams, ()>("system.shutdown"),
    call::<NoParams, ()>("system.shutdown_now"),
    call::<ConfigGetParams, ConfigGetResult>("config.get"),
    call::<ConfigSetParams, ()>("config.set"),
    call::<NoParams, t::ToolList>("tool.list"),
    call::<t::ToolInvokeParams, ToolResult>("tool.invoke"),
    call::<NoParams, t::PluginToolsDescribeResult>("plugin.tools.describe"),
    call::<NoParams, t::PluginListResult>("plugin.list"),
    call::<t::McpListParams, t::McpListResult>("mcp.list"),
    call::<t::PluginNameParams, t::PluginResult>("plugin.enable"),
    call::<t::PluginNameParams, t::PluginResult>("plugin.disable"),
    call::<t::PluginNameParams, t::PluginResult>("plugin.reload"),
    call::<t::SkillsListParams, t::SkillsListResult>("skills.list"),
    call::<NoParams, t::HarnessDescription>("harness.describe"),
    call::<NoParams, cat::CatalogDescribeResult>("catalog.describe"),
    call::<NoParams, cat::PresetsDescribeResult>("presets.describe"),
    call::<cat::PresetsResolveParams, cat::PresetsResolveResult>("presets.resolve"),
    call::<cat::ModelsListParams, cat::ModelsListResult>("models.list"),
    call::<t::SandboxDescribeParams, t::SandboxDescription>("sandbox.describe"),
    call::<NoParams, cat::CompatDescribeResult>("compat.describe"),
    call::<t::ApplyEditsParams, t::ApplyEditsResult>("workspace.apply_edits"),
    call::<ses::SessionCreateParams, ses::AgentSession>("agent.session.create"),
    call::<ses::SessionResumeParams, ses::AgentSession>("agent.session.resume"),
    call::<ses::SessionListParams, ses::SessionListResult>("agent.session.list"),
    call::<ses::RecordRef, ses::SessionMessagesResult>("agent.session.messages"),
    call::<ses::SessionForkParams, ses::BranchPoint>("agent.session.fork"),
    call::<ses::RecordRef, ses::SessionBranchesResult>("agent.session.branches"),
    call::<ses::RecordRef, ses::SessionTreeResult>("agent.session.tree"),
    call::<chat::ChatStreamParams, chat::StreamStarted>("agent.chat.stream"),
    call::<chat::StreamRef, ()>("agent.chat.cancel"),
    call::<chat::SteerParams, chat::SteerResult>("agent.chat.steer"),
    call::<chat::StreamRef, chat::CompactResult>("agent.chat.compact"),
    call::<chat::ChatStreamParams, chat::StreamStarted>("agent.chat.fork"),
    call::<ses::TraceFetchParams, ses::TraceFetchResult>("trace.fetch"),
    call::<ses::TraceExportParams, ses::TraceExportResult>("trace.export"),
    call::<h::ApprovalListParams, h::ApprovalListResult>("approval.list"),
    call::<h::ApprovalClearParams, h::ApprovalClearResult>("approval.clear"),
    call::<RequestCancelParams, RequestCancelResult>("request.cancel"),
];

/// Diagnostics, served only with `OUTRIGGER_DEBUG_METHODS=1`.
pub const DEBUG_METHODS: &[Call] = &[
    call::<d::DebugSleepParams, d::DebugSleepResult>("debug.sleep"),
    call::<d::DebugEchoParams, d::DebugEchoResult>("debug.echo"),
    call::<d::DebugReverseParams, d::DebugReverseResult>("debug.reverse"),
    call::<d::DebugRecordAppendParams, d::DebugRecordAppendResult>("debug.record.append"),
];

/// Every notification the sidecar sends.
pub const NOTIFICATIONS: &[Notification] = &[
    note::<LifecycleReady>("lifecycle.ready"),
    note::<LifecycleShutdown>("lifecycle.shutdown"),
    note::<chat::StreamChunk>("stream.chunk"),
    note::<chat::StreamError>("stream.error"),
    note::<chat::StreamDone>("stream.done"),
    note::<chat::AgentChild>("agent.child"),
];

/// Every request the sidecar sends to its host.
pub const REVERSE_REQUESTS: &[Call] = &[
    call::<h::ToolInvokeRequest, ToolResult>("tool.invoke"),
    call::<h::ApprovalRequest, h::ApprovalAnswer>("approval.request"),
    call::<h::AskUserRequest, h::AskUserAnswer>("ask_user.request"),
    call::<h::ReadStateSeed, h::ReadStateSeedAck>("read_state.seed"),
    call::<h::HostSpawnRequest, h::HostSpawnResult>("host.process.spawn"),
    call::<h::FsReadTextRequest, h::FsReadTextResult>("fs.read_text"),
    call::<h::FsWriteTextRequest, h::FsWriteTextResult>("fs.write_text"),
];

/// Moves a root schema and its `$defs` into `defs` (refs stay `#/$defs/X`, which resolve at
/// the bundle's root) and returns a reference to it.
fn hoist(schema: Schema, defs: &mut BTreeMap<String, Value>) -> Value {
    let mut v = schema.to_value();
    let Value::Object(o) = &mut v else {
        return v;
    };
    if let Some(Value::Object(inner)) = o.remove("$defs") {
        for (k, d) in inner {
            insert_def(defs, k, d);
        }
    }
    o.remove("$schema");
    let Some(title) = o.get("title").and_then(Value::as_str).map(str::to_string) else {
        return v;
    };
    // A type hoisted as a root and the same type met as another's `$defs` entry must
    // compare equal: only roots carry a title.
    o.remove("title");
    // `()` and other scalars have no structure worth a name.
    if title == "null" {
        return v;
    }
    insert_def(defs, title.clone(), v);
    json!({ "$ref": format!("#/$defs/{title}") })
}

/// Two different types under one schema name would silently share a definition; the name
/// is marked so `bundle_refs_resolve` fails and names the clash.
fn insert_def(defs: &mut BTreeMap<String, Value>, name: String, def: Value) {
    match defs.get(&name) {
        Some(existing) if *existing != def => {
            defs.insert(format!("{name}__CLASH"), def);
        }
        Some(_) => {}
        None => {
            defs.insert(name, def);
        }
    }
}

fn calls(list: &[Call], defs: &mut BTreeMap<String, Value>) -> Map<String, Value> {
    list.iter()
        .map(|c| {
            let params = hoist((c.params)(), defs);
            let result = hoist((c.result)(), defs);
            (
                c.name.to_string(),
                json!({"params": params, "result": result}),
            )
        })
        .collect()
}

/// `schemas/outrigger.schema.json`: every method's params and result, every notification
/// and reverse request, with all types in one `$defs`.
pub fn bundle() -> Value {
    let mut defs = BTreeMap::new();
    let methods = calls(METHODS, &mut defs);
    let debug = calls(DEBUG_METHODS, &mut defs);
    let reverse = calls(REVERSE_REQUESTS, &mut defs);
    let notifications: Map<String, Value> = NOTIFICATIONS
        .iter()
        .map(|n| {
            (
                n.name.to_string(),
                json!({"params": hoist((n.params)(), &mut defs)}),
            )
        })
        .collect();
    let error = hoist(schema_of::<RpcErrorObject>(), &mut defs);
    // Wire types no table entry names directly but hosts still meet (a call in a message).
    hoist(schema_of::<ToolCall>(), &mut defs);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Outrigger protocol",
        "description": "JSON-RPC 2.0 over stdio: methods (host → sidecar), notifications and reverse requests (sidecar → host). Each entry refers into $defs.",
        "protocolVersion": PROTOCOL_VERSION,
        "methods": methods,
        "debugMethods": debug,
        "notifications": notifications,
        "reverseRequests": reverse,
        "error": error,
        "$defs": defs,
    })
}

fn ts_ref(v: &Value) -> String {
    super::ts::type_of(v, "", "    ")
}

/// `schemas/outrigger.d.ts`: a declaration per type plus the `Methods`, `Notifications` and
/// `ReverseRequests` maps a typed host is written against.
pub fn typescript() -> String {
    let b = bundle();
    let mut out = String::from(
        "// Generated by `outrigger schemas --ts`; do not edit. The wire types of the Outrigger\n// protocol (JSON-RPC 2.0 over stdio), from schemas/outrigger.schema.json.\n\n",
    );
    out.push_str(&format!(
        "export const PROTOCOL_VERSION = {};\n\n",
        json!(PROTOCOL_VERSION)
    ));
    if let Some(Value::Object(defs)) = b.get("$defs") {
        for (name, schema) in defs {
            out.push_str(&super::ts::declaration(name, schema));
            out.push('\n');
        }
    }
    for (map, key, with_result) in [
        ("Methods", "methods", true),
        ("DebugMethods", "debugMethods", true),
        ("ReverseRequests", "reverseRequests", true),
        ("Notifications", "notifications", false),
    ] {
        out.push_str(&format!("export interface {map} {{\n"));
        if let Some(Value::Object(entries)) = b.get(key) {
            for (name, e) in entries {
                let params = ts_ref(&e["params"]);
                if with_result {
                    let result = ts_ref(&e["result"]);
                    out.push_str(&format!(
                        "  {}: {{ params: {params}; result: {result} }};\n",
                        json!(name)
                    ));
                } else {
                    out.push_str(&format!("  {}: {params};\n", json!(name)));
                }
            }
        }
        out.push_str("}\n\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_dotted() {
        let mut seen = std::collections::HashSet::new();
        for c in METHODS.iter().chain(DEBUG_METHODS) {
            assert!(seen.insert(c.name), "{} twice", c.name);
            assert!(c.name.contains('.'), "{}", c.name);
        }
    }

    /// `serde_json::Value`'s schema: anything goes.
    fn is_any(s: &Schema) -> bool {
        s.as_value().get("title").and_then(Value::as_str) == Some("AnyValue")
    }

    /// Every entry a host codes against has a named type (debug diagnostics may echo
    /// anything).
    #[test]
    fn every_entry_is_typed() {
        for c in METHODS.iter().chain(REVERSE_REQUESTS) {
            assert!(!is_any(&(c.params)()), "{} params are untyped", c.name);
            assert!(!is_any(&(c.result)()), "{} result is untyped", c.name);
        }
        for n in NOTIFICATIONS {
            assert!(!is_any(&(n.params)()), "{} params are untyped", n.name);
        }
    }

    #[test]
    fn bundle_refs_resolve() {
        let b = bundle();
        let text = b.to_string();
        let defs = b["$defs"].as_object().unwrap();
        for part in text.split("\"$ref\":\"#/$defs/").skip(1) {
            let name = part.split('"').next().unwrap();
            assert!(defs.contains_key(name), "dangling $ref {name}");
        }
        assert!(jsonschema::validator_for(&b).is_ok());
        let clashes: Vec<&String> = defs.keys().filter(|k| k.ends_with("__CLASH")).collect();
        assert!(
            clashes.is_empty(),
            "two types share a schema name: {clashes:?}"
        );
    }
}
