//! A tool's parameter schema held as its compact JSON text, shared by reference.
//!
//! A parsed `serde_json::Value` of a three-property schema costs ~3 KiB of heap in maps and
//! keys; its text is ~250 bytes. With 10,000 plugin tools that difference is the inventory's
//! memory, and every copy (`tool.list`, the model's tool list, `tool_search` matches) was a
//! deep clone. The text is written into responses as it is; the few readers that need the
//! tree (validator compile, schema checks) parse it once on demand.

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

#[derive(Clone)]
pub struct Schema(Repr);

#[derive(Clone)]
enum Repr {
    Text(Arc<RawValue>),
    /// Made on first use: the built-in file tools' schemas come from `schemars`, which was
    /// ~6 % of a bare boot's CPU for text no request before the first `tool.list` or turn reads.
    Lazy(Arc<Lazy>),
}

struct Lazy {
    text: OnceLock<Arc<RawValue>>,
    make: fn() -> Value,
}

impl Schema {
    /// The compact text of `value`.
    pub fn from_value(value: &Value) -> Schema {
        Schema(Repr::Text(raw_text(value)))
    }

    /// A schema already held as JSON text (a checked manifest read back from its cache).
    pub fn from_raw(raw: Box<RawValue>) -> Schema {
        Schema(Repr::Text(Arc::from(raw)))
    }

    /// The text of what `make` returns, made the first time it is read.
    pub fn lazy(make: fn() -> Value) -> Schema {
        Schema(Repr::Lazy(Arc::new(Lazy {
            text: OnceLock::new(),
            make,
        })))
    }

    /// The schema as a tree, parsed from the text.
    pub fn value(&self) -> Value {
        serde_json::from_str(self.text()).unwrap_or(Value::Null)
    }

    pub fn text(&self) -> &str {
        self.raw().get()
    }

    pub fn raw(&self) -> &RawValue {
        match &self.0 {
            Repr::Text(raw) => raw,
            Repr::Lazy(lazy) => lazy.text.get_or_init(|| raw_text(&(lazy.make)())),
        }
    }
}

fn raw_text(value: &Value) -> Arc<RawValue> {
    // Serialised straight into a `RawValue`: `from_string` would parse the text again to
    // check it (a fifth of a 10,000-tool boot's manifest checks). Serialising a `Value` cannot
    // fail (string keys only); `{}` is the fallback shape.
    match serde_json::value::to_raw_value(value) {
        Ok(raw) => Arc::from(raw),
        Err(_) => Arc::from(RawValue::from_string("{}".into()).unwrap_or_else(|_| Box::default())),
    }
}

impl Serialize for Schema {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw().serialize(s)
    }
}

// Through `Value`, so any deserializer works (a `RawValue` needs one reading text).
impl<'de> Deserialize<'de> for Schema {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Schema, D::Error> {
        Value::deserialize(d).map(|v| Schema::from_value(&v))
    }
}

impl PartialEq for Schema {
    fn eq(&self, other: &Schema) -> bool {
        self.text() == other.text()
    }
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

impl From<Value> for Schema {
    fn from(value: Value) -> Schema {
        Schema::from_value(&value)
    }
}

impl schemars::JsonSchema for Schema {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        Value::schema_name()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        Value::json_schema(g)
    }
    fn inline_schema() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn city() -> Value {
        MADE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        json!({"type": "object", "properties": {"city": {"type": "string"}}})
    }

    /// A lazy schema is made on its first read, once for all its clones, and reads, serializes
    /// and compares like the same schema made at once.
    #[test]
    fn a_lazy_schema_is_made_once_on_first_read() {
        let lazy = Schema::lazy(city);
        let copy = lazy.clone();
        assert_eq!(MADE.load(std::sync::atomic::Ordering::SeqCst), 0);
        let eager = Schema::from_value(&city());
        assert_eq!(MADE.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(copy.text(), eager.text());
        assert_eq!(lazy.value(), eager.value());
        assert_eq!(
            serde_json::to_string(&lazy).unwrap(),
            serde_json::to_string(&eager).unwrap()
        );
        assert!(lazy == eager);
        assert_eq!(MADE.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn text_round_trips_and_serialises_verbatim() {
        let v = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let s = Schema::from_value(&v);
        assert_eq!(s.value(), v);
        let wrapped = serde_json::to_string(&vec![s.clone(), s]).unwrap();
        assert_eq!(
            wrapped,
            r#"[{"properties":{"city":{"type":"string"}},"type":"object"},{"properties":{"city":{"type":"string"}},"type":"object"}]"#
        );
    }
}
