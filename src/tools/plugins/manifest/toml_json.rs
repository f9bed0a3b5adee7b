//! `parameters` read from the TOML document straight into JSON. Going through `toml::Value`
//! and converting cost ~18 % of boot with 10,000 plugin tools. What JSON cannot hold (a TOML
//! datetime, nan, ±inf) is recorded, not raised, so the error names the field like any other
//! manifest mistake.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The `parameters` value as written.
pub enum Parameters {
    /// A JSON text (`parameters = '''{...}'''`).
    Text(String),
    /// A TOML table, already JSON; `Err` names what JSON cannot represent.
    Table(Result<Value, String>),
    /// Anything else, by its TOML type name.
    Other(&'static str),
}

/// toml's serde representation of a datetime: a one-member table with this key.
const DATETIME_KEY: &str = "$__toml_private_datetime";

/// A value as JSON (or what JSON cannot hold in it), with its TOML type name.
struct Node(Result<Value, String>, &'static str);

impl<'de> Deserialize<'de> for Parameters {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Parameters, D::Error> {
        Ok(match d.deserialize_any(Json)? {
            Node(Ok(Value::String(s)), "string") => Parameters::Text(s),
            Node(v, "table") => Parameters::Table(v),
            Node(_, kind) => Parameters::Other(kind),
        })
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(Json)
    }
}

struct Json;

impl<'de> Visitor<'de> for Json {
    type Value = Node;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a TOML value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Node, E> {
        Ok(Node(Ok(Value::Bool(b)), "boolean"))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Node, E> {
        Ok(Node(Ok(Value::from(n)), "integer"))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Node, E> {
        Ok(Node(Ok(Value::from(n)), "integer"))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Node, E> {
        let v = serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| format!("contains {f}, which JSON cannot represent"));
        Ok(Node(v, "float"))
    }

    fn visit_str<E>(self, s: &str) -> Result<Node, E> {
        Ok(Node(Ok(Value::String(s.to_string())), "string"))
    }

    fn visit_string<E>(self, s: String) -> Result<Node, E> {
        Ok(Node(Ok(Value::String(s)), "string"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut out = Vec::new();
        let mut problem = None;
        while let Some(Node(v, _)) = seq.next_element::<Node>()? {
            match v {
                Ok(v) => out.push(v),
                Err(e) => {
                    problem.get_or_insert(e);
                }
            }
        }
        Ok(Node(problem.map_or(Ok(Value::Array(out)), Err), "array"))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut out = Map::new();
        let mut problem = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == DATETIME_KEY {
                let d: String = map.next_value()?;
                let msg =
                    format!("contains the TOML datetime {d}, which JSON has no type for; quote it");
                return Ok(Node(Err(msg), "datetime"));
            }
            let Node(v, _) = map.next_value::<Node>()?;
            match v {
                Ok(v) => {
                    out.insert(key, v);
                }
                Err(e) => {
                    problem.get_or_insert(e);
                }
            }
        }
        Ok(Node(problem.map_or(Ok(Value::Object(out)), Err), "table"))
    }
}
