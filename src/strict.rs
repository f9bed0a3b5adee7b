//! Strict decoding of params: one place that turns serde's errors into messages a host
//! engineer can act on. An unknown field is named with the nearest known one
//! (`unknown field 'maxRoundz' (did you mean 'maxRounds'?)`), a type error names the field
//! path and what was expected (`maxRounds: expected an integer, got "5"`).
//!
//! It lives at the crate root, not in `rpc/`, because `agent/` and `llm/` parse params too
//! and must not import from the wire layer.

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Visitor};

/// A value a caller sent that does not fit; the message names the field and the fix. The
/// one error type for input validation across modules (params, messages, tool arguments),
/// mapped to `invalid_params` at the wire and shown to the model as a recoverable failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// Reads as the message (tests and callers match on its text).
impl std::ops::Deref for Invalid {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<&str> for Invalid {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl From<String> for Invalid {
    fn from(s: String) -> Self {
        Invalid(s)
    }
}

impl From<&str> for Invalid {
    fn from(s: &str) -> Self {
        Invalid(s.to_string())
    }
}

impl From<Invalid> for String {
    fn from(e: Invalid) -> Self {
        e.0
    }
}
use serde_json::Value;
use serde_path_to_error::Segment;

/// Normalised similarity a name must reach to be suggested: `strsim` Damerau-Levenshtein (a
/// swapped pair like `mdoe` is one edit) over names lowercased with `_`/`-` removed (so
/// `max_rounds` finds `maxRounds`).
const SUGGESTION_FLOOR: f64 = 0.6;
/// Up to this many known names are listed when nothing is close enough to suggest.
const MAX_LISTED: usize = 12;
/// A bad value is quoted up to this many characters.
const MAX_QUOTED: usize = 80;

/// Words hosts reach for that are no near spelling of the field they mean:
/// `(what they sent, the field it belongs in)`. Used only when the target is a known field.
const HINTS: &[(&str, &str)] = &[
    ("prompt", "messages"),
    ("input", "messages"),
    ("query", "messages"),
    ("history", "messages"),
    ("text", "content"),
    ("body", "content"),
    ("message", "content"),
    ("args", "arguments"),
    ("params", "arguments"),
    ("parameters", "arguments"),
    ("input", "arguments"),
    ("tool", "name"),
];

/// Decodes `v` into `T`, with every failure worded as described in the module docs.
pub fn decode<T: DeserializeOwned>(v: &Value) -> Result<T, Invalid> {
    decode_at(v, "")
}

/// As `decode`, with `prefix` (e.g. `messages[2]`) in front of every path in the message.
pub fn decode_at<T: DeserializeOwned>(v: &Value, prefix: &str) -> Result<T, Invalid> {
    serde_path_to_error::deserialize(v)
        .map_err(|e| describe(&e, v, prefix))
        .map_err(Invalid::from)
}

/// The field names (aliases included) a derived `Deserialize` struct accepts. For a type
/// that is not a plain struct (flatten, maps, enums) the list is empty.
pub fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields = None;
    // The capture always "fails" once it has the names; the error is not interesting.
    let _ = T::deserialize(Capture(&mut fields));
    fields.unwrap_or(&[])
}

/// `unknown field 'x' (did you mean 'y'?)`, or the known names when none is close.
/// `at` is the path of the object holding the field (empty at the top level).
pub fn unknown_field(at: &str, field: &str, known: &[&str]) -> String {
    let lead = if at.is_empty() {
        String::new()
    } else {
        format!("{at}: ")
    };
    if let Some(s) = suggest(field, known) {
        return format!("{lead}unknown field '{field}' (did you mean '{s}'?)");
    }
    if known.is_empty() {
        return format!("{lead}unknown field '{field}': no fields are accepted here");
    }
    if known.len() <= MAX_LISTED {
        return format!(
            "{lead}unknown field '{field}'; expected one of: {}",
            known.join(", ")
        );
    }
    format!("{lead}unknown field '{field}'; see docs/protocol.md for the accepted fields")
}

/// The known name nearest to `field`, if one is near enough to be what was meant.
pub fn suggest<'a>(field: &str, known: &[&'a str]) -> Option<&'a str> {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let want = norm(field);
    if let Some(hit) = HINTS
        .iter()
        .filter(|(from, _)| norm(from) == want)
        .find_map(|(_, to)| known.iter().find(|k| *k == to))
    {
        return Some(hit);
    }
    known
        .iter()
        .map(|k| (strsim::normalized_damerau_levenshtein(&want, &norm(k)), *k))
        .filter(|(score, _)| *score >= SUGGESTION_FLOOR)
        // Best score first; on a tie the camelCase spelling over a snake_case alias.
        .max_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| b.1.contains('_').cmp(&a.1.contains('_')))
                .then_with(|| b.1.cmp(a.1))
        })
        .map(|(_, k)| k)
}

/// `messages[0].toolCalls[1].name` style rendering, after `prefix`.
fn render(prefix: &str, segments: &[&Segment]) -> String {
    let mut out = prefix.to_string();
    for s in segments {
        match s {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    out
}

/// The value the path points at in the original params, when it can be found.
fn lookup<'v>(root: &'v Value, segments: &[&Segment]) -> Option<&'v Value> {
    let mut at = root;
    for s in segments {
        at = match s {
            Segment::Seq { index } => at.get(*index)?,
            Segment::Map { key } => at.get(key.as_str())?,
            Segment::Enum { .. } | Segment::Unknown => at,
        };
    }
    Some(at)
}

/// A value as JSON text for an error message, cut after `MAX_QUOTED` characters.
pub fn quote(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= MAX_QUOTED {
        return s;
    }
    let cut: String = s.chars().take(MAX_QUOTED).collect();
    format!("{cut}…")
}

/// serde's expectation (`u64`, `a string`, `struct Foo`) in a host's words.
fn expected(exp: &str, got: Option<&Value>) -> String {
    let negative = got.and_then(Value::as_i64).is_some_and(|n| n < 0);
    match exp {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" if negative => {
            "a non-negative integer".into()
        }
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" | "i8" | "i16" | "i32" | "i64" | "i128"
        | "isize" => "an integer".into(),
        "f32" | "f64" => "a number".into(),
        "a borrowed string" | "path string" | "a string" | "string" => "a string".into(),
        "a boolean" => "a boolean (true or false)".into(),
        "a sequence" => "a list".into(),
        "a map" => "an object".into(),
        "unit" => "null".into(),
        e if e.starts_with("struct ") => "an object".into(),
        e => e.to_string(),
    }
}

/// Backtick-quoted names in serde's `expected one of `a`, `b`` text.
fn ticked(list: &str) -> Vec<&str> {
    list.split('`').skip(1).step_by(2).collect()
}

fn describe(
    e: &serde_path_to_error::Error<serde_json::Error>,
    root: &Value,
    prefix: &str,
) -> String {
    let segments: Vec<&Segment> = e.path().iter().collect();
    let msg = e.inner().to_string();
    let here = render(prefix, &segments);
    let lead = |p: &str| {
        if p.is_empty() {
            String::new()
        } else {
            format!("{p}: ")
        }
    };
    // serde's wording is fixed by `serde::de::Error`'s default methods, which serde_json
    // does not override; the field name is user text, so the separator is searched from
    // the right (serde's own lists never contain it).
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        let (field, known) = match rest.rfind("`, expected ") {
            Some(i) => (&rest[..i], ticked(&rest[i + 1..])),
            None => (
                rest.split("`, there are no fields").next().unwrap_or(rest),
                vec![],
            ),
        };
        // The path ends with the unknown key itself; the message names the object.
        let parent = render(prefix, &segments[..segments.len().saturating_sub(1)]);
        return unknown_field(&parent, field, &known);
    }
    if let Some(rest) = msg.strip_prefix("unknown variant `") {
        let (value, known) = match rest.rfind("`, expected ") {
            Some(i) => (&rest[..i], ticked(&rest[i + 1..])),
            None => (
                rest.split("`, there are no variants")
                    .next()
                    .unwrap_or(rest),
                vec![],
            ),
        };
        return match suggest(value, &known) {
            Some(s) => format!(
                "{}unknown value '{value}' (did you mean '{s}'?)",
                lead(&here)
            ),
            None => format!(
                "{}unknown value '{value}'; expected one of: {}",
                lead(&here),
                known.join(", ")
            ),
        };
    }
    if let Some(rest) = msg.strip_prefix("missing field `") {
        let field = rest.strip_suffix('`').unwrap_or(rest);
        let path = if here.is_empty() {
            field.to_string()
        } else {
            format!("{here}.{field}")
        };
        return format!("{path} is required");
    }
    let typed = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "));
    if let Some(rest) = typed
        && let Some((unexpected, exp)) = rest.rsplit_once(", expected ")
    {
        let got = lookup(root, &segments);
        let shown = got.map_or_else(|| unexpected.to_string(), quote);
        let name = if here.is_empty() { "params" } else { &here };
        return format!("{name}: expected {}, got {shown}", expected(exp, got));
    }
    format!("{}{msg}", lead(&here))
}

/// A deserializer that only records the field list `deserialize_struct` is given.
struct Capture<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> de::Deserializer<'de> for Capture<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(de::Error::custom("captured"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct P {
        max_rounds: Option<u64>,
        #[serde(alias = "base_url")]
        base_url: Option<String>,
        #[serde(default)]
        items: Vec<Item>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        name: String,
        count: Option<u32>,
    }

    fn err(v: Value) -> String {
        decode::<P>(&v).unwrap_err().0
    }

    #[test]
    fn unknown_fields_name_the_nearest_known_one() {
        assert_eq!(
            err(json!({"maxRoundz": 5})),
            "unknown field 'maxRoundz' (did you mean 'maxRounds'?)"
        );
        assert_eq!(
            err(json!({"max_rounds": 5})),
            "unknown field 'max_rounds' (did you mean 'maxRounds'?)"
        );
        assert_eq!(
            err(json!({"baseurl": "x"})),
            "unknown field 'baseurl' (did you mean 'baseUrl'?)"
        );
        assert_eq!(
            err(json!({"items": [{"name": "a"}, {"nme": "b"}]})),
            "items[1]: unknown field 'nme' (did you mean 'name'?)"
        );
        let e = err(json!({"zzz": 1}));
        assert!(
            e.starts_with("unknown field 'zzz'; expected one of: "),
            "{e}"
        );
        assert!(decode::<P>(&json!({"base_url": "x", "maxRounds": 2})).is_ok());
    }

    #[test]
    fn type_errors_name_the_path_and_the_expectation() {
        assert_eq!(
            err(json!({"maxRounds": "5"})),
            "maxRounds: expected an integer, got \"5\""
        );
        assert_eq!(
            err(json!({"maxRounds": -1})),
            "maxRounds: expected a non-negative integer, got -1"
        );
        assert_eq!(
            err(json!({"items": [{"name": "a", "count": 1.5}]})),
            "items[0].count: expected an integer, got 1.5"
        );
        assert_eq!(err(json!({"items": [{}]})), "items[0].name is required");
        assert_eq!(err(json!({"items": {}})), "items: expected a list, got {}");
        let long = "x".repeat(200);
        let e = err(json!({"baseUrl": [long]}));
        assert!(
            e.starts_with("baseUrl: expected a string, got [\"xxx"),
            "{e}"
        );
        assert!(e.ends_with('…'), "{e}");
    }

    #[test]
    fn field_lists_include_aliases() {
        let f = fields_of::<P>();
        assert!(f.contains(&"maxRounds") && f.contains(&"base_url"), "{f:?}");
        assert!(fields_of::<Value>().is_empty());
    }

    #[test]
    fn hints_cover_words_that_are_no_near_spelling() {
        assert_eq!(suggest("prompt", &["messages", "model"]), Some("messages"));
        assert_eq!(suggest("text", &["role", "content"]), Some("content"));
        assert_eq!(suggest("text", &["role"]), None);
    }
}
