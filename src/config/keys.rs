//! The defaults table. It doubles as the schema: every layer is checked against it.

use serde_json::{Value, json};

/// What a key accepts. Env strings are coerced to this type before the check.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// One of a fixed set of strings.
    Choice(&'static [&'static str]),
    /// A string, or `null` for "unset".
    OptPath,
    /// An integer within `[min, max]` (max is the key's ceiling).
    Int { min: i64, max: i64 },
    /// A number within `[min, max]`.
    Float { min: f64, max: f64 },
}

impl Kind {
    pub fn describe(&self) -> String {
        match self {
            Kind::Choice(c) => format!("one of {}", c.join(", ")),
            Kind::OptPath => "a string (a path) or null".to_string(),
            Kind::Int { min, max } => format!("an integer from {min} to {max}"),
            Kind::Float { min, max } => format!("a number from {min} to {max}"),
        }
    }

    /// Checks a JSON value against the kind.
    pub fn check(&self, v: &Value) -> bool {
        match self {
            Kind::Choice(c) => v.as_str().is_some_and(|s| c.contains(&s)),
            Kind::OptPath => v.is_null() || v.as_str().is_some_and(|s| !s.is_empty()),
            Kind::Int { min, max } => v.as_i64().is_some_and(|n| n >= *min && n <= *max),
            Kind::Float { min, max } => v
                .as_f64()
                .is_some_and(|n| n.is_finite() && n >= *min && n <= *max),
        }
    }

    /// Coerces an environment string to this kind's JSON type (the check follows).
    pub fn coerce_env(&self, s: &str) -> Value {
        let t = s.trim();
        match self {
            // Choices are case-insensitive in env, like on the command line.
            Kind::Choice(c) => Value::String(
                c.iter()
                    .find(|x| x.eq_ignore_ascii_case(t))
                    .map_or_else(|| s.to_string(), |x| x.to_string()),
            ),
            Kind::OptPath => {
                if t.is_empty() || t.eq_ignore_ascii_case("null") {
                    Value::Null
                } else {
                    Value::String(s.to_string())
                }
            }
            Kind::Int { .. } => t
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or_else(|_| Value::String(s.to_string())),
            Kind::Float { .. } => t
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(|f| json!(f))
                .unwrap_or_else(|| Value::String(s.to_string())),
        }
    }
}

#[derive(Debug)]
pub struct KeySpec {
    pub name: &'static str,
    pub kind: Kind,
    pub default: fn() -> Value,
    pub doc: &'static str,
}

pub const LOG_LEVELS: &[&str] = &["DEBUG", "INFO", "WARNING", "ERROR"];

/// One gibibyte: the ceiling of `max_frame_bytes`.
pub const MAX_FRAME_CEILING: i64 = 1 << 30;

pub static KEYS: &[KeySpec] = &[
    KeySpec {
        name: "log_level",
        kind: Kind::Choice(LOG_LEVELS),
        default: || json!("INFO"),
        doc: "stderr log level",
    },
    KeySpec {
        name: "grace_period_seconds",
        kind: Kind::Float {
            min: 0.0,
            max: 300.0,
        },
        default: || json!(5.0),
        doc: "how long a graceful shutdown waits for in-flight work",
    },
    KeySpec {
        name: "storage_path",
        kind: Kind::OptPath,
        default: || Value::Null,
        doc: "SQLite store path; null means $OUTRIGGER_HOME/outrigger.db",
    },
    KeySpec {
        name: "max_frame_bytes",
        kind: Kind::Int {
            min: 1024,
            max: MAX_FRAME_CEILING,
        },
        default: || json!(64 * 1024 * 1024),
        doc: "longest accepted stdin line; longer lines are discarded and refused",
    },
    KeySpec {
        name: "max_inflight_requests",
        kind: Kind::Int {
            min: 16,
            max: 1_000_000,
        },
        default: || json!(1024),
        doc: "requests running at once; further frames wait to be read (back-pressure)",
    },
    KeySpec {
        name: "plugin_max_output_bytes",
        kind: Kind::Int {
            min: 1024,
            max: 64 * 1024 * 1024,
        },
        default: || json!(1024 * 1024),
        doc: "bytes of a plugin call's stdout (and stderr) kept; more stdout fails the call",
    },
];

pub fn spec(name: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|k| k.name == name)
}

pub fn names() -> Vec<&'static str> {
    KEYS.iter().map(|k| k.name).collect()
}
