//! Tool parameter schemas narrowed to Gemini's `Schema`, "a select subset of an OpenAPI 3.0
//! schema object" (https://ai.google.dev/api/caching#Schema). Gemini refuses the whole
//! request for any member it does not know (`Invalid JSON payload received. Unknown name
//! "additionalProperties"`), so this keeps only the documented members:
//!
//! `type format title description nullable enum maxItems minItems properties required
//! minProperties maxProperties minLength maxLength pattern example anyOf propertyOrdering
//! default items minimum maximum`
//!
//! and rewrites what has a Gemini spelling: a `type` list (`["string","null"]`) becomes one
//! type plus `nullable` (several types become `anyOf`); `oneOf` becomes `anyOf`; a `{"type":
//! "null"}` branch becomes `nullable`; a string `const` becomes a one-value `enum`; local
//! `$ref`s (`#/$defs/X`, `#/definitions/X`) are inlined (to a bounded depth); an `enum` of
//! non-strings moves into the description (Gemini's enums are strings); `format` is kept
//! only where Gemini takes it (`enum`/`date-time` on strings, `float`/`double` on numbers,
//! `int32`/`int64` on integers); `required` keeps only declared properties; an empty
//! `properties` map is dropped ("should be non-empty for OBJECT type"); an array without
//! `items` gets string items ("items: missing field").
//!
//! Dropped: `$schema $id $ref(non-local) $defs definitions $comment additionalProperties
//! patternProperties propertyNames unevaluatedProperties allOf not if then else
//! dependentSchemas dependentRequired examples const(non-string) exclusiveMinimum
//! exclusiveMaximum multipleOf uniqueItems contains prefixItems readOnly writeOnly
//! deprecated contentEncoding contentMediaType strict` and anything else not listed above.

use serde_json::{Map, Value, json};

/// How deep schemas (and `$ref` chains) are followed; below it a schema becomes `{}`. A
/// recursive `$ref` would otherwise never end.
const MAX_DEPTH: usize = 24;

/// The `parameters` of a function declaration, or `None` when the function takes none
/// (Gemini refuses an OBJECT with no properties; the declaration then goes without).
pub fn parameters(schema: &Value) -> Option<Value> {
    let mut s = clean(schema, schema, 0);
    let has_props = s
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    if !has_props {
        return None;
    }
    s.insert("type".into(), json!("object"));
    Some(Value::Object(s))
}

fn clean(v: &Value, root: &Value, depth: usize) -> Map<String, Value> {
    let mut out = Map::new();
    let Value::Object(o) = v else {
        return out;
    };
    if depth > MAX_DEPTH {
        return out;
    }
    // A local reference stands for its target (siblings of `$ref` are kept over it).
    if let Some(target) = o
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve(root, r))
    {
        out = clean(target, root, depth + 1);
    }
    let mut nullable = false;
    let mut types: Vec<&str> = Vec::new();
    match o.get("type") {
        Some(Value::String(t)) => types.push(t),
        Some(Value::Array(ts)) => {
            for t in ts.iter().filter_map(Value::as_str) {
                if t == "null" {
                    nullable = true;
                } else {
                    types.push(t);
                }
            }
        }
        _ => {}
    }
    match types.as_slice() {
        [] => {}
        [t] => {
            out.insert("type".into(), json!(t));
        }
        many => {
            let branches: Vec<Value> = many.iter().map(|t| json!({"type": t})).collect();
            out.insert("anyOf".into(), Value::Array(branches));
        }
    }
    for (k, val) in o {
        match k.as_str() {
            "nullable" => nullable |= val.as_bool() == Some(true),
            // Copied as they are, when of the type Gemini reads them as.
            "title" | "description" | "pattern" if val.is_string() => {
                out.insert(k.clone(), val.clone());
            }
            "minimum" | "maximum" if val.is_number() => {
                out.insert(k.clone(), val.clone());
            }
            "minItems" | "maxItems" | "minLength" | "maxLength" | "minProperties"
            | "maxProperties"
                if val.is_u64() =>
            {
                out.insert(k.clone(), val.clone());
            }
            "default" | "example" | "propertyOrdering" => {
                out.insert(k.clone(), val.clone());
            }
            "properties" => {
                if let Some(props) = val.as_object() {
                    let props: Map<String, Value> = props
                        .iter()
                        .map(|(name, s)| (name.clone(), Value::Object(clean(s, root, depth + 1))))
                        .collect();
                    if !props.is_empty() {
                        out.insert("properties".into(), Value::Object(props));
                    }
                }
            }
            "items" => {
                // A tuple (`items: [..]`, draft 4) has no Gemini spelling: its first shape.
                let first = match val {
                    Value::Array(a) => a.first(),
                    other => Some(other),
                };
                if let Some(s) = first {
                    out.insert("items".into(), Value::Object(clean(s, root, depth + 1)));
                }
            }
            "anyOf" | "oneOf" => {
                if let Some(branches) = val.as_array() {
                    let mut kept = Vec::new();
                    for b in branches {
                        if b.get("type").and_then(Value::as_str) == Some("null") {
                            nullable = true;
                        } else {
                            kept.push(Value::Object(clean(b, root, depth + 1)));
                        }
                    }
                    merge_any_of(&mut out, kept);
                }
            }
            _ => {}
        }
    }
    // After the loop: a non-string enum is written into the description.
    if let Some(e) = o.get("enum") {
        enum_values(&mut out, e, &mut nullable);
    } else if let Some(c) = o.get("const").and_then(Value::as_str) {
        out.insert("enum".into(), json!([c]));
    }
    if let Some(req) = o.get("required").and_then(Value::as_array) {
        let declared = out.get("properties").and_then(Value::as_object);
        let kept: Vec<Value> = req
            .iter()
            .filter(|n| {
                n.as_str()
                    .is_some_and(|n| declared.is_some_and(|p| p.contains_key(n)))
            })
            .cloned()
            .collect();
        if !kept.is_empty() {
            out.insert("required".into(), Value::Array(kept));
        }
    }
    if let Some(f) = o.get("format").and_then(Value::as_str) {
        let allowed: &[&str] = match out.get("type").and_then(Value::as_str) {
            Some("string") => &["enum", "date-time"],
            Some("number") => &["float", "double"],
            Some("integer") => &["int32", "int64"],
            _ => &[],
        };
        if allowed.contains(&f) {
            out.insert("format".into(), json!(f));
        }
    }
    // Gemini refuses an ARRAY without `items` ("items: missing field"); an array of
    // anything is offered as an array of strings.
    if out.get("type").and_then(Value::as_str) == Some("array")
        && out
            .get("items")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        out.insert("items".into(), json!({"type": "string"}));
    }
    if nullable {
        out.insert("nullable".into(), json!(true));
    }
    out
}

/// `#/$defs/Name` or `#/definitions/Name` (JSON-pointer escapes `~0`/`~1` honoured).
fn resolve<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let pointer = r.strip_prefix('#')?;
    if pointer.is_empty() {
        return None; // The root itself: a recursion, not a shape.
    }
    root.pointer(pointer)
}

/// `anyOf` branches (already cleaned): one left is the schema itself; none leaves nothing.
fn merge_any_of(out: &mut Map<String, Value>, mut kept: Vec<Value>) {
    match kept.len() {
        0 => {}
        1 => {
            if let Some(Value::Object(only)) = kept.pop() {
                for (k, v) in only {
                    out.entry(k).or_insert(v);
                }
            }
        }
        _ => {
            out.insert("anyOf".into(), Value::Array(kept));
        }
    }
}

/// Strings stay an `enum`; other values are named in the description instead.
fn enum_values(out: &mut Map<String, Value>, val: &Value, nullable: &mut bool) {
    let Some(values) = val.as_array() else {
        return;
    };
    let mut strings = Vec::new();
    let mut others = Vec::new();
    for v in values {
        match v {
            Value::Null => *nullable = true,
            Value::String(s) => strings.push(json!(s)),
            other => others.push(other.to_string()),
        }
    }
    if others.is_empty() {
        if !strings.is_empty() {
            out.insert("enum".into(), Value::Array(strings));
        }
        return;
    }
    let mut all: Vec<String> = strings.iter().map(Value::to_string).collect();
    all.extend(others);
    let note = format!("one of: {}", all.join(", "));
    let desc = match out.get("description").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => format!("{d} ({note})"),
        _ => note,
    };
    out.insert("description".into(), json!(desc));
}
