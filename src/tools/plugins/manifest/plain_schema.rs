//! A quick "certainly valid" answer for the plain schemas plugin tools write (types,
//! properties, required, bounds, descriptions), so boot skips the meta-schema validator for
//! them: it was ~9 % of a 10,000-tool boot's CPU. Anything this does not recognise (another
//! keyword, an unusual value) answers `false`, and the caller runs the full validator, which
//! also words every error. So this may only ever say `true` for what the meta-schema
//! accepts; the property test at the end holds it to that.

use serde_json::Value;

const TYPES: &[&str] = &[
    "array", "boolean", "integer", "null", "number", "object", "string",
];

/// `true` only when `v` is a valid draft 2020-12 schema made of the keywords below.
pub fn certainly_valid(v: &Value) -> bool {
    match v {
        Value::Bool(_) => true,
        Value::Object(m) => m.iter().all(|(k, v)| keyword_ok(k, v)),
        _ => false,
    }
}

fn keyword_ok(k: &str, v: &Value) -> bool {
    match k {
        "type" => match v {
            Value::String(s) => TYPES.contains(&s.as_str()),
            Value::Array(a) => {
                !a.is_empty()
                    && a.iter().enumerate().all(|(i, t)| {
                        t.as_str().is_some_and(|s| TYPES.contains(&s)) && !a[..i].contains(t)
                    })
            }
            _ => false,
        },
        "title" | "description" | "$comment" | "format" => v.is_string(),
        "default" | "const" => true,
        "enum" | "examples" => v.is_array(),
        "deprecated" | "readOnly" | "writeOnly" | "uniqueItems" => v.is_boolean(),
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => v.is_number(),
        "multipleOf" => v.as_f64().is_some_and(|n| n > 0.0),
        "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties" | "maxProperties" => {
            v.is_u64()
        }
        "required" => v.as_array().is_some_and(|a| {
            a.iter()
                .enumerate()
                .all(|(i, s)| s.is_string() && !a[..i].contains(s))
        }),
        "properties" => v
            .as_object()
            .is_some_and(|m| m.values().all(certainly_valid)),
        "items" | "additionalProperties" => certainly_valid(v),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn plain_tool_schemas_pass_and_odd_ones_go_to_the_validator() {
        let plain = json!({"type": "object", "properties": {
            "q": {"type": "string", "description": "filter"},
            "n": {"type": ["integer", "null"], "minimum": 1, "maximum": 500},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}
        }, "required": ["q"], "additionalProperties": false});
        assert!(certainly_valid(&plain));
        for odd in [
            json!({"type": "strin"}),
            json!({"type": []}),
            json!({"type": ["string", "string"]}),
            json!({"required": "q"}),
            json!({"required": ["q", "q"]}),
            json!({"minLength": -1}),
            json!({"minLength": 1.0}),
            json!({"multipleOf": 0}),
            json!({"properties": {"a": 3}}),
            json!({"oneOf": [{"type": "string"}]}),
        ] {
            assert!(!certainly_valid(&odd), "{odd}");
        }
    }

    /// Values a keyword might be given: right ones and near misses.
    fn value() -> impl Strategy<Value = Value> {
        prop::sample::select(vec![
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(1),
            json!(-1),
            json!(500),
            json!(1.5),
            json!(-0.5),
            json!(0.0),
            json!(""),
            json!("string"),
            json!("strin"),
            json!("integer"),
            json!("q"),
            json!([]),
            json!(["q"]),
            json!(["q", "q"]),
            json!(["q", "r"]),
            json!([1]),
            json!(["string", "null"]),
            json!(["string", "string"]),
            json!(["number", "strin"]),
            json!({}),
        ])
    }

    fn key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "type",
            "title",
            "description",
            "format",
            "default",
            "const",
            "enum",
            "examples",
            "deprecated",
            "readOnly",
            "uniqueItems",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "multipleOf",
            "minLength",
            "maxItems",
            "required",
            "properties",
            "items",
            "additionalProperties",
            "oneOf",
            "q",
        ])
        .prop_map(String::from)
    }

    fn schema() -> impl Strategy<Value = Value> {
        let leaf = prop::collection::btree_map(key(), value(), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect()));
        leaf.prop_recursive(4, 64, 4, |inner| {
            (
                prop::collection::btree_map(key(), value(), 0..4),
                prop::collection::btree_map("[a-c]", inner.clone(), 0..3),
                prop::option::of(inner.clone()),
                prop::option::of(inner),
                any::<bool>(),
            )
                .prop_map(|(m, props, items, extra, with_props)| {
                    let mut o: serde_json::Map<String, Value> = m.into_iter().collect();
                    if with_props {
                        o.insert(
                            "properties".into(),
                            Value::Object(props.into_iter().collect()),
                        );
                    }
                    if let Some(i) = items {
                        o.insert("items".into(), i);
                    }
                    if let Some(x) = extra {
                        o.insert("additionalProperties".into(), x);
                    }
                    Value::Object(o)
                })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12_000))]
        /// Sound: whatever this calls valid, the meta-schema validator accepts.
        #[test]
        fn never_accepts_what_the_meta_schema_refuses(s in schema()) {
            if certainly_valid(&s) {
                prop_assert!(jsonschema::meta::validate(&s).is_ok(), "{}", s);
            }
        }
    }
}
