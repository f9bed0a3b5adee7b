//! Checks frames against the protocol bundle: notification params, reverse-request params,
//! error objects, and the result of every response whose request method is known.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use serde_json::{Value, json};

fn bundle() -> &'static Value {
    static B: OnceLock<Value> = OnceLock::new();
    B.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schemas/outrigger.schema.json");
        let text = std::fs::read_to_string(path).expect("schemas/outrigger.schema.json");
        serde_json::from_str(&text).expect("bundle is JSON")
    })
}

type Validators = HashMap<String, Option<jsonschema::Validator>>;

/// A validator for one entry schema, compiled once, resolving `$ref`s in the bundle.
fn check_against(key: &str, entry: &Value, instance: &Value, frame: &Value) {
    static CACHE: OnceLock<Mutex<Validators>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    let v = cache.entry(key.to_string()).or_insert_with(|| {
        let mut doc = entry.clone();
        if let Value::Object(o) = &mut doc {
            o.insert("$defs".into(), bundle()["$defs"].clone());
        } else {
            return None;
        }
        Some(jsonschema::validator_for(&doc).unwrap_or_else(|e| panic!("{key}: {e}")))
    });
    if let Some(v) = v {
        let errors: Vec<String> = v
            .iter_errors(instance)
            .take(5)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "frame does not match the protocol bundle ({key}): {errors:?}\nframe: {frame}"
        );
    }
}

/// Checks one frame; `method` is the request's method when this is a response to it.
pub fn check(frame: &Value, method: Option<&str>) {
    let b = bundle();
    let is_request_id = frame.get("id").is_some();
    match frame.get("method").and_then(Value::as_str) {
        Some(m) if !is_request_id => {
            let entry = &b["notifications"][m];
            assert!(
                !entry.is_null(),
                "notification {m} is not in the bundle: {frame}"
            );
            check_against(
                &format!("notification {m}"),
                &entry["params"],
                &frame["params"],
                frame,
            );
        }
        Some(m) => {
            let entry = &b["reverseRequests"][m];
            if !entry.is_null() {
                check_against(
                    &format!("reverse {m}"),
                    &entry["params"],
                    &frame["params"],
                    frame,
                );
            }
        }
        None => {
            if let Some(err) = frame.get("error") {
                check_against(
                    "RpcErrorObject",
                    &json!({"$ref": "#/$defs/RpcErrorObject"}),
                    err,
                    frame,
                );
            } else if let Some(m) = method {
                let entry = if b["methods"][m].is_null() {
                    &b["debugMethods"][m]
                } else {
                    &b["methods"][m]
                };
                if !entry.is_null() {
                    let result = frame.get("result").unwrap_or(&Value::Null);
                    check_against(&format!("result {m}"), &entry["result"], result, frame);
                }
            }
        }
    }
}
