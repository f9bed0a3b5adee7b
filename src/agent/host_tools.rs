//! Host-executed tools (`toolsViaHost: true`): the turn's `tools` descriptors are offered to
//! the model and each call goes to the host as a reverse `tool.invoke`. This file owns the
//! descriptor validation and the reading of the host's answer into a `ToolResult`: whatever
//! the host does (an error, -32601, a malformed result, no answer in time), the model gets a
//! failed result naming it, with `needsFollowup: true`, and the breaker counts it.

use crate::strict::Invalid;
use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::host::HostError;
use crate::tools::{ToolMode, ToolResult, classify, valid_tool_name};

/// Descriptors one turn may hand over.
pub const MAX_HOST_TOOLS: usize = 1_000;
/// Characters of one descriptor's description.
pub const MAX_DESCRIPTION_CHARS: usize = 16_384;

/// One host tool as offered to the model.
pub struct HostTool {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub mode: ToolMode,
    /// Compiled once; `None` when the host's schema does not compile (then nothing is
    /// checked locally and the host validates).
    validator: Option<jsonschema::Validator>,
}

impl HostTool {
    pub fn descriptor(&self) -> Value {
        json!({"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}})
    }

    /// Checks arguments against the host's schema.
    pub fn validate(&self, args: &Map<String, Value>) -> Result<(), Invalid> {
        let Some(v) = &self.validator else {
            return Ok(());
        };
        crate::tools::router::schema_problems(v, args)
    }
}

/// The turn's host tools, by name in the host's order.
#[derive(Default, Clone)]
pub struct HostTools {
    pub tools: Vec<Arc<HostTool>>,
}

impl HostTools {
    pub fn get(&self, name: &str) -> Option<&Arc<HostTool>> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// Validates `tools` (OpenAI descriptors `{type: "function", function: {name, description?,
/// parameters?}, mode?}`, or the flat `{name, description?, parameters?, mode?}`).
/// `reserved` names run locally and cannot be taken by the host.
pub fn parse(v: &Value, reserved: &[&str]) -> Result<HostTools, Invalid> {
    let Value::Array(items) = v else {
        return Err("tools must be a list of OpenAI function descriptors".into());
    };
    if items.len() > MAX_HOST_TOOLS {
        return Err(Invalid::from(format!(
            "tools holds {} descriptors; at most {MAX_HOST_TOOLS} are accepted",
            items.len()
        )));
    }
    let mut seen = HashSet::new();
    let mut tools = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(outer) = item else {
            return Err(Invalid::from(format!(
                "tools[{i}] must be an object {{type: \"function\", function: {{name, description, parameters}}}}"
            )));
        };
        let f = match outer.get("function") {
            Some(Value::Object(f)) => f,
            Some(_) => {
                return Err(Invalid::from(format!(
                    "tools[{i}].function must be an object"
                )));
            }
            None => outer,
        };
        if let Some(t) = outer.get("type").and_then(Value::as_str)
            && t != "function"
        {
            return Err(Invalid::from(format!(
                "tools[{i}].type must be \"function\", got \"{t}\""
            )));
        }
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("tools[{i}] has no function.name"))?;
        if !valid_tool_name(name) {
            return Err(Invalid::from(format!(
                "tools[{i}].function.name '{name}' is invalid: use 1-64 characters from [A-Za-z0-9_-]"
            )));
        }
        if reserved.contains(&name) {
            return Err(Invalid::from(format!(
                "tools[{i}].function.name '{name}' is reserved: the sidecar runs {name} itself; rename the host tool"
            )));
        }
        if !seen.insert(name.to_string()) {
            return Err(Invalid::from(format!(
                "tools[{i}].function.name '{name}' is listed twice"
            )));
        }
        let description = match f.get("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) if s.chars().count() <= MAX_DESCRIPTION_CHARS => s.clone(),
            Some(Value::String(_)) => {
                return Err(Invalid::from(format!(
                    "tools[{i}].function.description is longer than {MAX_DESCRIPTION_CHARS} characters"
                )));
            }
            Some(_) => {
                return Err(Invalid::from(format!(
                    "tools[{i}].function.description must be a string"
                )));
            }
        };
        let parameters = match f.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(_) => {
                return Err(Invalid::from(format!(
                    "tools[{i}].function.parameters must be a JSON Schema object"
                )));
            }
        };
        let mode = match outer.get("mode").or_else(|| f.get("mode")) {
            None | Some(Value::Null) => classify(name),
            Some(Value::String(m)) => ToolMode::parse(m).ok_or_else(|| {
                format!(
                    "tools[{i}].mode must be one of read, safe_write, destructive, local, external; got '{m}'"
                )
            })?,
            Some(_) => return Err(Invalid::from(format!("tools[{i}].mode must be a string"))),
        };
        let validator = match jsonschema::validator_for(&parameters) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!(
                    "host tool '{name}': its parameter schema does not compile ({e}); arguments are not checked locally"
                );
                None
            }
        };
        tools.push(Arc::new(HostTool {
            name: name.to_string(),
            description,
            parameters,
            mode,
            validator,
        }));
    }
    Ok(HostTools { tools })
}

/// A failed result the model can act on.
fn host_failure(name: &str, what: String) -> ToolResult {
    ToolResult::recoverable(format!("host tool '{name}': {what}")).with_data("hostError", true)
}

/// Reads the host's answer to `tool.invoke` into a `ToolResult`: `success` must be a
/// boolean; the known fields are type-checked; every other flat key is folded into `data`.
pub fn read_result(name: &str, answer: Result<Value, HostError>) -> ToolResult {
    let v = match answer {
        Ok(v) => v,
        Err(e) => {
            let what = match &e {
                HostError::Host { code: -32601, .. } => {
                    "the host does not implement tool.invoke (it answered -32601 method not found); \
                     it cannot run host tools"
                        .to_string()
                }
                HostError::Host { code, message, .. } => {
                    format!("the host answered tool.invoke with error {code}: {message}")
                }
                HostError::Timeout { ms, .. } => format!(
                    "the host did not answer tool.invoke within toolTimeoutMs={ms}"
                ),
                HostError::Closed { .. } => {
                    "the host connection closed before it answered tool.invoke".to_string()
                }
                HostError::Cancelled { .. } => "cancelled before the host answered".to_string(),
            };
            let mut r = host_failure(name, what);
            if matches!(e, HostError::Timeout { .. }) {
                r = r.with_data("timeout", true);
            }
            return r;
        }
    };
    match normalize(v) {
        Ok(r) => r,
        Err(why) => host_failure(
            name,
            format!("the host returned a malformed ToolResult ({why})"),
        ),
    }
}

fn normalize(v: Value) -> Result<ToolResult, String> {
    let Value::Object(mut o) = v else {
        return Err("expected an object with a boolean `success`".into());
    };
    let success = match o.remove("success") {
        Some(Value::Bool(b)) => b,
        Some(other) => {
            return Err(format!(
                "`success` must be a boolean, got {}",
                crate::tools::json_type_name(&other)
            ));
        }
        None => return Err("`success` is missing".into()),
    };
    let flag = |o: &mut Map<String, Value>, k: &str| -> Result<Option<bool>, String> {
        match o.remove(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(_) => Err(format!("`{k}` must be a boolean")),
        }
    };
    let text = |o: &mut Map<String, Value>, k: &str| -> Result<Option<String>, String> {
        match o.remove(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("`{k}` must be a string")),
        }
    };
    let terminal = flag(&mut o, "terminal")?;
    let needs_followup = flag(&mut o, "needsFollowup")?;
    let next_action = text(&mut o, "nextAction")?;
    let message = text(&mut o, "message")?;
    let error = text(&mut o, "error")?;
    let mut data = match o.remove("data") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(d)) => d,
        Some(other) => {
            let mut d = Map::new();
            d.insert("value".into(), other);
            d
        }
    };
    for (k, v) in o {
        data.entry(k).or_insert(v);
    }
    Ok(ToolResult {
        success,
        terminal,
        needs_followup,
        next_action,
        message,
        error,
        data: (!data.is_empty()).then_some(data),
        extra: Map::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors() {
        let t = parse(
            &json!([
                {"type": "function", "function": {"name": "get_events", "description": "d",
                 "parameters": {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]}}},
                {"name": "delete_event"},
                {"type": "function", "function": {"name": "open_editor"}, "mode": "local"}
            ]),
            &["ask_user"],
        )
        .unwrap();
        assert_eq!(t.tools.len(), 3);
        assert_eq!(t.tools[0].mode, ToolMode::Read);
        assert_eq!(t.tools[1].mode, ToolMode::Destructive);
        assert_eq!(t.tools[2].mode, ToolMode::Local);
        assert!(t.tools[0].validate(&Map::new()).is_err());
        let e = parse(&json!([{"name": "ask_user"}]), &["ask_user"])
            .err()
            .unwrap();
        assert!(e.contains("reserved"), "{e}");
        let e = parse(&json!([{"name": "a"}, {"name": "a"}]), &[])
            .err()
            .unwrap();
        assert!(e.contains("twice"), "{e}");
        assert!(parse(&json!([{"name": "bad name"}]), &[]).is_err());
        assert!(parse(&json!([{"name": "x", "mode": "risky"}]), &[]).is_err());
        assert!(parse(&json!({"name": "x"}), &[]).is_err());
    }

    #[test]
    fn results_fold_and_fail_with_a_name() {
        let r = read_result(
            "t",
            Ok(json!({"success": true, "data": {"a": 1}, "extra": "x"})),
        );
        assert!(r.success);
        assert_eq!(r.data.unwrap()["extra"], "x");
        let r = read_result("t", Ok(json!({"success": "yes"})));
        assert!(!r.success && r.needs_followup == Some(true));
        assert!(r.error.unwrap().contains("malformed"));
        let r = read_result(
            "t",
            Err(HostError::Host {
                method: "tool.invoke".into(),
                code: -32601,
                message: "no".into(),
                kind: None,
                data: None,
            }),
        );
        assert!(r.error.unwrap().contains("-32601"));
        let r = read_result(
            "t",
            Err(HostError::Timeout {
                method: "tool.invoke".into(),
                ms: 50,
            }),
        );
        assert!(r.error.unwrap().contains("toolTimeoutMs=50"));
    }
}
