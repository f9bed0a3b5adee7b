//! TypeScript declarations from our JSON Schemas (the subset schemars writes: objects with
//! properties, arrays, scalars, enums, consts, `anyOf`/`oneOf`, nullable type lists and
//! `$ref`s to `$defs`). Hand-written because the schemas are ours and small: a generator
//! crate would pull a JS toolchain or a large dependency tree for ~150 lines of mapping.

use serde_json::{Map, Value};

/// A valid TypeScript identifier from a schema name (`ToolResult`, `Message2`).
pub fn ident(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) || out.is_empty() {
        out.insert(0, '_');
    }
    out
}

fn quote_key(k: &str) -> String {
    let plain = !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if plain {
        k.to_string()
    } else {
        serde_json::to_string(k).unwrap_or_else(|_| format!("\"{k}\""))
    }
}

fn doc(schema: &Map<String, Value>, indent: &str) -> String {
    match schema.get("description").and_then(Value::as_str) {
        Some(d) if !d.trim().is_empty() => {
            let lines: Vec<String> = d
                .lines()
                .map(|l| format!("{indent} * {}", l.replace("*/", "*\\/")))
                .collect();
            format!("{indent}/**\n{}\n{indent} */\n", lines.join("\n"))
        }
        _ => String::new(),
    }
}

/// The TypeScript type of one schema node. `$ref`s to `#/$defs/X` become `X` (prefixed).
pub fn type_of(schema: &Value, prefix: &str, indent: &str) -> String {
    let o = match schema {
        Value::Bool(true) => return "unknown".into(),
        Value::Bool(false) => return "never".into(),
        Value::Object(o) => o,
        _ => return "unknown".into(),
    };
    if let Some(r) = o.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!("{prefix}{}", ident(name));
    }
    if let Some(c) = o.get("const") {
        return c.to_string();
    }
    if let Some(Value::Array(e)) = o.get("enum") {
        return e
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" | ");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = o.get(key) {
            let mut parts: Vec<String> = alts.iter().map(|a| type_of(a, prefix, indent)).collect();
            parts.dedup();
            return parts.join(" | ");
        }
    }
    if let Some(Value::Array(all)) = o.get("allOf") {
        return all
            .iter()
            .map(|a| type_of(a, prefix, indent))
            .collect::<Vec<_>>()
            .join(" & ");
    }
    match o.get("type") {
        Some(Value::Array(types)) => {
            let parts: Vec<String> = types
                .iter()
                .map(|t| {
                    let mut single = o.clone();
                    single.insert("type".into(), t.clone());
                    type_of(&Value::Object(single), prefix, indent)
                })
                .collect();
            parts.join(" | ")
        }
        Some(Value::String(t)) => match t.as_str() {
            "string" => "string".into(),
            "integer" | "number" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => {
                let item = o
                    .get("items")
                    .map_or_else(|| "unknown".to_string(), |i| type_of(i, prefix, indent));
                if item.contains(' ') {
                    format!("Array<{item}>")
                } else {
                    format!("{item}[]")
                }
            }
            "object" => object_type(o, prefix, indent),
            _ => "unknown".into(),
        },
        _ if o.contains_key("properties") => object_type(o, prefix, indent),
        _ => "unknown".into(),
    }
}

fn object_type(o: &Map<String, Value>, prefix: &str, indent: &str) -> String {
    let props = o.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = o
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let named = props.is_some_and(|p| !p.is_empty());
    // An explicit `additionalProperties` (a `#[serde(flatten)]` map beside named fields)
    // keeps its index signature, or a host could not read the other keys. Beside named
    // fields it is `unknown`: TypeScript requires every property to fit the index type
    // (TS2411). Absent means the same to JSON Schema but is left closed: a host building the
    // object keeps TypeScript's excess-property check.
    let extra = match o.get("additionalProperties") {
        Some(Value::Bool(false)) => None,
        Some(Value::Bool(true)) => Some("unknown".to_string()),
        Some(Value::Object(_)) if named => Some("unknown".to_string()),
        Some(v @ Value::Object(_)) => Some(type_of(v, prefix, indent)),
        _ if !named => Some("unknown".to_string()),
        _ => None,
    };
    let Some(props) = props.filter(|p| !p.is_empty()) else {
        return match extra {
            Some(e) => format!("{{ [key: string]: {e} }}"),
            None => "Record<string, never>".into(),
        };
    };
    let inner = format!("{indent}  ");
    let mut out = String::from("{\n");
    for (k, v) in props {
        if let Value::Object(m) = v {
            out.push_str(&doc(m, &inner));
        }
        let opt = if required.contains(&k.as_str()) {
            ""
        } else {
            "?"
        };
        out.push_str(&format!(
            "{inner}{}{opt}: {};\n",
            quote_key(k),
            type_of(v, prefix, &inner)
        ));
    }
    if let Some(e) = extra {
        out.push_str(&format!("{inner}[key: string]: {e};\n"));
    }
    out.push_str(indent);
    out.push('}');
    out
}

/// `export type Name = …;` for one named schema whose `$ref`s resolve against a shared
/// `$defs` (the protocol bundle's).
pub fn declaration(name: &str, schema: &Value) -> String {
    let body = type_of(schema, "", "");
    let d = schema.as_object().map(|m| doc(m, "")).unwrap_or_default();
    format!("{d}export type {} = {body};\n", ident(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_the_schemars_subset() {
        let s = json!({
            "description": "A thing.",
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "n": {"type": ["integer", "null"]},
                "kind": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "sub": {"$ref": "#/$defs/Sub"},
                "data-x": {"type": "object", "additionalProperties": true}
            },
            "required": ["id", "kind"],
            "$defs": {"Sub": {"type": "object", "properties": {"ok": {"const": true}}, "required": ["ok"]}}
        });
        let t = &declaration("Thing", &s);
        assert!(
            t.starts_with("/**\n * A thing.\n */\nexport type Thing = {"),
            "{t}"
        );
        assert!(t.contains("  id: string;"), "{t}");
        assert!(t.contains("  n?: number | null;"), "{t}");
        assert!(t.contains("  kind: \"a\" | \"b\";"), "{t}");
        assert!(t.contains("  tags?: string[];"), "{t}");
        assert!(t.contains("  sub?: Sub;"), "{t}");
        assert!(
            t.contains("  \"data-x\"?: { [key: string]: unknown };"),
            "{t}"
        );
        let sub = declaration("Sub", &s["$defs"]["Sub"]);
        assert!(sub.contains("ok: true;"), "{sub}");
        let empty = json!({"type": "object", "additionalProperties": false});
        assert!(declaration("Empty", &empty).contains("Record<string, never>"));
    }

    #[test]
    fn open_objects_with_fields_keep_their_index_signature() {
        // `Notice { kind, #[serde(flatten)] fields }`: the other keys must stay readable.
        let open = json!({
            "type": "object",
            "properties": {"kind": {"type": "string"}},
            "required": ["kind"],
            "additionalProperties": true
        });
        let t = declaration("Notice", &open);
        assert!(
            t.contains("  kind: string;\n  [key: string]: unknown;\n}"),
            "{t}"
        );
        // A typed map beside a field of another type: `unknown`, which every field fits.
        let typed = json!({
            "type": "object",
            "properties": {"kind": {"type": "string"}},
            "additionalProperties": {"type": "integer"}
        });
        let t = declaration("Counts", &typed);
        assert!(
            t.contains("  kind?: string;\n  [key: string]: unknown;"),
            "{t}"
        );
        let map = json!({"type": "object", "additionalProperties": {"type": "integer"}});
        assert!(declaration("Map", &map).contains("{ [key: string]: number }"));
        // Absent stays closed, so a host's typo in an object literal fails `tsc`.
        let plain = json!({"type": "object", "properties": {"kind": {"type": "string"}}});
        assert!(!declaration("Plain", &plain).contains("[key: string]"));
    }
}
