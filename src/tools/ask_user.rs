//! `ask_user` (tools.md, reference §3.15): the model asks the user structured questions.
//! This file owns the model-facing schema and the normalisation at the model-JSON boundary
//! (aliases `name→id`, `message→text`, `choices→options`, a derived and capped `header`);
//! the turn sends the canonical payload to the host (`ask_user.request`) and records the
//! answers. Violations come back as errors naming the fix, so the model retries.

use crate::strict::Invalid;
use std::collections::HashSet;

use serde_json::{Map, Value, json};

pub use crate::protocol::host::AskUserQuestion;

pub const NAME: &str = "ask_user";
pub const MIN_QUESTIONS: usize = 1;
pub const MAX_QUESTIONS: usize = 4;
pub const MIN_OPTIONS: usize = 2;
pub const MAX_OPTIONS: usize = 4;
/// Characters of a question's `header` (the chip a host shows).
pub const MAX_HEADER_CHARS: usize = 12;
/// Characters of `intro`, `outro` and a question's `text`.
pub const MAX_TEXT_CHARS: usize = 2_000;
/// Characters of an id, an option label or a placeholder.
pub const MAX_SHORT_CHARS: usize = 200;

pub const DESCRIPTION: &str = "Ask the user one to four structured questions and wait for \
the answers. Use it when you cannot proceed without a decision or a fact only the user has; \
do not use it for things you can find out with your tools. Each question has a unique id, the \
text to show, a type (select: pick from 2-4 options; text: free text; password: hidden free \
text) and, for select, the options. The result maps each question id to the user's answer; \
an empty mapping means the user did not answer, so proceed with your best judgement and say so.";

/// The model-facing parameter schema.
pub fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "intro": {"type": "string", "description": "One sentence saying why you ask."},
            "outro": {"type": "string", "description": "Optional closing line."},
            "questions": {
                "type": "array", "minItems": MIN_QUESTIONS, "maxItems": MAX_QUESTIONS,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "Unique key for the answer."},
                        "text": {"type": "string", "description": "The question."},
                        "header": {"type": "string", "description": "A label of at most 12 characters."},
                        "type": {"type": "string", "enum": ["select", "text", "password"]},
                        "options": {"type": "array", "minItems": MIN_OPTIONS, "maxItems": MAX_OPTIONS,
                                    "items": {"type": "string"}},
                        "multiSelect": {"type": "boolean", "description": "select only: allow several options."},
                        "placeholder": {"type": "string"}
                    },
                    "required": ["id", "text", "type"]
                }
            }
        },
        "required": ["intro", "questions"]
    })
}

/// The OpenAI function descriptor offered to the model.
pub fn descriptor() -> Value {
    json!({"type": "function", "function": {
        "name": NAME, "description": DESCRIPTION, "parameters": parameters()}})
}

/// The canonical payload: `{intro, outro?, questions}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    pub intro: String,
    pub outro: Option<String>,
    pub questions: Vec<AskUserQuestion>,
}

fn take_alias(o: &mut Map<String, Value>, canonical: &str, aliases: &[&str]) {
    if o.contains_key(canonical) {
        for a in aliases {
            o.remove(*a);
        }
        return;
    }
    for a in aliases {
        if let Some(v) = o.remove(*a) {
            o.insert(canonical.to_string(), v);
            return;
        }
    }
}

fn text_of(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn capped(field: &str, s: String, max: usize) -> Result<String, String> {
    if s.chars().count() > max {
        return Err(format!(
            "{field} is longer than {max} characters; shorten it"
        ));
    }
    Ok(s)
}

/// A header from the question text: its first words within `MAX_HEADER_CHARS`.
pub fn derive_header(text: &str) -> String {
    let mut out = String::new();
    for word in text.split_whitespace() {
        let word: String = word
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '-')
            .collect();
        if word.is_empty() {
            continue;
        }
        let extra = usize::from(!out.is_empty());
        if out.chars().count() + extra + word.chars().count() > MAX_HEADER_CHARS {
            break;
        }
        if extra == 1 {
            out.push(' ');
        }
        out.push_str(&word);
    }
    if out.is_empty() {
        out = text.chars().take(MAX_HEADER_CHARS).collect();
    }
    out
}

fn option_label(i: usize, j: usize, v: &Value) -> Result<String, String> {
    let label = match v {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Object(o) => text_of(o.get("label").or_else(|| o.get("value"))),
        Value::Number(_) | Value::Bool(_) => Some(v.to_string()),
        _ => None,
    }
    .filter(|s| !s.is_empty())
    .ok_or_else(|| format!("questions[{i}].options[{j}] must be a non-empty string"))?;
    capped(
        &format!("questions[{i}].options[{j}]"),
        label,
        MAX_SHORT_CHARS,
    )
}

fn question(i: usize, v: &Value, ids: &mut HashSet<String>) -> Result<AskUserQuestion, String> {
    let Value::Object(o) = v else {
        return Err(format!(
            "questions[{i}] must be an object {{id, text, type, options?}}"
        ));
    };
    let mut o = o.clone();
    take_alias(&mut o, "id", &["name"]);
    take_alias(&mut o, "text", &["message", "question", "prompt"]);
    take_alias(&mut o, "options", &["choices"]);
    let id = text_of(o.get("id")).ok_or_else(|| {
        format!("questions[{i}] needs a non-empty id (a short key such as \"color\"); `name` is accepted too")
    })?;
    let id = capped(&format!("questions[{i}].id"), id, MAX_SHORT_CHARS)?;
    if !ids.insert(id.clone()) {
        return Err(format!(
            "questions[{i}].id '{id}' is used twice; ids must be unique"
        ));
    }
    let text = text_of(o.get("text")).ok_or_else(|| {
        format!("questions[{i}] needs a non-empty text (the question to show); `message` is accepted too")
    })?;
    let text = capped(&format!("questions[{i}].text"), text, MAX_TEXT_CHARS)?;
    let options = match o.get("options") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(j, x)| option_label(i, j, x))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => {
            return Err(format!(
                "questions[{i}].options must be a list of 2 to 4 strings"
            ));
        }
    };
    let kind = match text_of(o.get("type")).as_deref() {
        None if options.is_empty() => "text",
        None => "select",
        Some("select") => "select",
        Some("text") => "text",
        Some("password") => "password",
        Some(other) => {
            return Err(format!(
                "questions[{i}].type must be 'select', 'text' or 'password', got '{other}'"
            ));
        }
    };
    if kind == "select" && !(MIN_OPTIONS..=MAX_OPTIONS).contains(&options.len()) {
        return Err(format!(
            "questions[{i}] is a select question and needs 2 to 4 options, got {}",
            options.len()
        ));
    }
    if kind != "select" && !options.is_empty() {
        return Err(format!(
            "questions[{i}] is a {kind} question and takes no options; use type 'select' to offer choices"
        ));
    }
    let header = match text_of(o.get("header")) {
        Some(h) => h.chars().take(MAX_HEADER_CHARS).collect(),
        None => derive_header(&text),
    };
    let multi = match o.get("multiSelect").or_else(|| o.get("multi_select")) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(format!("questions[{i}].multiSelect must be true or false")),
    };
    if multi && kind != "select" {
        return Err(format!(
            "questions[{i}].multiSelect applies to select questions only"
        ));
    }
    let placeholder = match text_of(o.get("placeholder")) {
        Some(p) => Some(capped(
            &format!("questions[{i}].placeholder"),
            p,
            MAX_SHORT_CHARS,
        )?),
        None => None,
    };
    Ok(AskUserQuestion {
        id,
        text,
        header,
        kind: kind.to_string(),
        options: (kind == "select").then_some(options),
        multi_select: multi,
        placeholder,
    })
}

/// Normalises and validates the model's arguments into the canonical payload.
pub fn normalize(args: &Value) -> Result<Payload, Invalid> {
    let Value::Object(o) = args else {
        return Err("arguments must be an object {intro, questions, outro?}".into());
    };
    let intro = text_of(o.get("intro"))
        .ok_or("intro is required: one sentence telling the user why you are asking".to_string())?;
    let intro = capped("intro", intro, MAX_TEXT_CHARS)?;
    let outro = match text_of(o.get("outro")) {
        Some(s) => Some(capped("outro", s, MAX_TEXT_CHARS)?),
        None => None,
    };
    let questions = match o.get("questions") {
        Some(Value::Array(a)) => a,
        Some(Value::Object(_)) => {
            return Err("questions must be a list of 1 to 4 question objects, not one object; wrap it in [ ]".into());
        }
        _ => {
            return Err(
                "questions is required: a list of 1 to 4 questions {id, text, type, options?}"
                    .into(),
            );
        }
    };
    if !(MIN_QUESTIONS..=MAX_QUESTIONS).contains(&questions.len()) {
        return Err(Invalid::from(format!(
            "questions must hold 1 to 4 questions, got {}; ask the most important ones first",
            questions.len()
        )));
    }
    let mut ids = HashSet::new();
    let questions = questions
        .iter()
        .enumerate()
        .map(|(i, q)| question(i, q, &mut ids))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Payload {
        intro,
        outro,
        questions,
    })
}

/// The host's answers, kept for known question ids only (strings, lists of strings, or
/// any JSON scalar the host chose).
pub fn answers_from(host: &Value, payload: &Payload) -> Map<String, Value> {
    let known: HashSet<&str> = payload.questions.iter().map(|q| q.id.as_str()).collect();
    let mut out = Map::new();
    if let Some(Value::Object(a)) = host.get("answers") {
        for (k, v) in a {
            if known.contains(k.as_str()) && !v.is_null() {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_and_defaults() {
        let p = normalize(&json!({"intro": "Pick", "questions": [
            {"name": "color", "message": "Which colour do you like best?", "choices": ["red", "blue"]},
            {"id": "why", "text": "Why?", "header": "A very long header"}
        ]}))
        .unwrap();
        let q0 = serde_json::to_value(&p.questions[0]).unwrap();
        assert_eq!(q0["id"], "color");
        assert_eq!(q0["text"], "Which colour do you like best?");
        assert_eq!(q0["type"], "select");
        assert_eq!(q0["options"], json!(["red", "blue"]));
        assert_eq!(q0["multiSelect"], false);
        assert_eq!(q0["header"], "Which colour");
        assert!(q0.get("name").is_none() && q0.get("choices").is_none());
        let q1 = serde_json::to_value(&p.questions[1]).unwrap();
        assert_eq!(q1["type"], "text");
        assert_eq!(
            q1["header"].as_str().unwrap().chars().count(),
            MAX_HEADER_CHARS
        );
    }

    #[test]
    fn errors_name_the_fix() {
        let e = normalize(&json!({"questions": [{"id": "a", "text": "b"}]})).unwrap_err();
        assert!(e.contains("intro is required"), "{e}");
        let e = normalize(&json!({"intro": "x", "questions": [{"text": "b"}]})).unwrap_err();
        assert!(e.contains("needs a non-empty id"), "{e}");
        let e = normalize(&json!({"intro": "x", "questions": [{"id": "a"}]})).unwrap_err();
        assert!(e.contains("needs a non-empty text"), "{e}");
        let e = normalize(&json!({"intro": "x", "questions": []})).unwrap_err();
        assert!(e.contains("1 to 4"), "{e}");
        let e = normalize(
            &json!({"intro": "x", "questions": [{"id": "a", "text": "b", "type": "select", "options": ["one"]}]}),
        )
        .unwrap_err();
        assert!(e.contains("2 to 4 options"), "{e}");
        let e = normalize(&json!({"intro": "x", "questions": [
            {"id": "a", "text": "b"}, {"id": "a", "text": "c"}]}))
        .unwrap_err();
        assert!(e.contains("used twice"), "{e}");
        let e = normalize(
            &json!({"intro": "x", "questions": [{"id": "a", "text": "b", "type": "radio"}]}),
        )
        .unwrap_err();
        assert!(e.contains("'radio'"), "{e}");
    }

    #[test]
    fn answers_keep_known_ids() {
        let p = normalize(&json!({"intro": "x", "questions": [{"id": "a", "text": "b"}]})).unwrap();
        let a = answers_from(&json!({"answers": {"a": "yes", "zzz": "no"}}), &p);
        assert_eq!(Value::Object(a), json!({"a": "yes"}));
        assert!(answers_from(&json!({"nope": 1}), &p).is_empty());
    }

    #[test]
    fn header_derivation() {
        assert_eq!(derive_header("Deploy to production now?"), "Deploy to");
        assert_eq!(derive_header("Supercalifragilistic"), "Supercalifra");
    }
}
