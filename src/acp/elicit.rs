//! `ask_user` through the client's form elicitation (`elicitation/create`). The model is
//! offered `ask_user` only when the client advertised form elicitation at `initialize`.

use serde_json::{Map, Value, json};

use super::Editor;

/// One question as a form property: a choice list when it has options, else free text.
fn property(q: &Value) -> Value {
    let title = q["header"]
        .as_str()
        .filter(|h| !h.is_empty())
        .or(q["text"].as_str());
    let mut p = json!({"title": title, "description": q["text"]});
    match (
        q["options"].as_array(),
        q["multiSelect"].as_bool() == Some(true),
    ) {
        (Some(opts), true) => {
            p["type"] = json!("array");
            p["items"] = json!({"type": "string", "enum": opts});
        }
        (Some(opts), false) => {
            p["type"] = json!("string");
            p["enum"] = json!(opts);
        }
        (None, _) => p["type"] = json!("string"),
    }
    p
}

/// The `elicitation/create` params for one `ask_user.request`.
pub fn request(sid: &str, p: &Value) -> Value {
    let questions = p["questions"].as_array().cloned().unwrap_or_default();
    let mut properties = Map::new();
    let mut required = Vec::new();
    for q in &questions {
        let Some(id) = q["id"].as_str() else { continue };
        properties.insert(id.to_string(), property(q));
        required.push(json!(id));
    }
    let mut message = p["intro"].as_str().unwrap_or("").to_string();
    if message.is_empty() {
        message = "The agent has questions for you.".into();
    }
    json!({
        "mode": "form",
        "sessionId": sid,
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties, "required": required},
    })
}

/// Asks the client; a declined, cancelled or failed form answers nothing (`{}`), which the
/// model sees as no answers.
pub async fn ask(editor: &Editor, sid: &str, p: &Value) -> Value {
    match editor.request("elicitation/create", request(sid, p)).await {
        Ok(r) if r["action"] == "accept" => r.get("content").cloned().unwrap_or(json!({})),
        _ => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_become_a_typed_form() {
        let r = request(
            "s1",
            &json!({"intro": "Pick", "questions": [
                {"id": "db", "text": "Which database?", "header": "DB", "options": ["pg", "sqlite"], "multiSelect": false},
                {"id": "why", "text": "Why?", "header": ""},
            ]}),
        );
        assert_eq!(
            r["requestedSchema"]["properties"]["db"]["enum"],
            json!(["pg", "sqlite"])
        );
        assert_eq!(r["requestedSchema"]["properties"]["why"]["type"], "string");
        assert_eq!(r["mode"], "form");
    }
}
