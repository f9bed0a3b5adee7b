//! `todo_write` (reference §3.15): the model keeps a checklist of its work. Each call
//! replaces the whole list; the turn shows it to the host (`notice {kind: "todos"}`) and
//! holds a final answer back while items are unfinished (the completion gate, in the loop).
//! The tool itself is pure: it validates and summarises; the list lives in the turn and in
//! the durable record (the tool message), so it survives resume.

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{Tool, ToolContext, ToolFuture, ToolMode, ToolResult};

pub const NAME: &str = "todo_write";
/// Items one list may hold.
pub const MAX_TODOS: usize = 50;
/// Characters of one item's `content`.
pub const MAX_CONTENT_CHARS: usize = 2_000;
/// Characters of one item's `id`.
pub const MAX_ID_CHARS: usize = 128;

const DESCRIPTION: &str = "Create or update your task checklist for this conversation. \
Each call replaces the whole list: send every item each time, with its current status. \
Use it for work with three or more steps: write the plan first, mark one item in_progress \
while you work on it, and mark items completed as soon as they are done. At most one item \
may be in_progress. Do not give your final answer while items are still pending or \
in_progress: finish them, or update the list to say what was dropped.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    InProgress,
    Completed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    pub id: String,
    pub content: String,
    pub status: Status,
}

/// `{total, pending, inProgress, completed}`.
pub fn summary(todos: &[Todo]) -> Value {
    let count = |s: Status| todos.iter().filter(|t| t.status == s).count();
    json!({
        "total": todos.len(),
        "pending": count(Status::Pending),
        "inProgress": count(Status::InProgress),
        "completed": count(Status::Completed),
    })
}

/// Items not yet completed.
pub fn unfinished(todos: &[Todo]) -> Vec<&Todo> {
    todos
        .iter()
        .filter(|t| t.status != Status::Completed)
        .collect()
}

/// Checks a `todos` argument; the error names the item and the fix.
pub fn validate(v: Option<&Value>) -> Result<Vec<Todo>, String> {
    let Some(Value::Array(items)) = v else {
        return Err("todos is required: a list of 1 to 50 items {id, content, status}".to_string());
    };
    if items.is_empty() || items.len() > MAX_TODOS {
        return Err(format!(
            "todos must hold 1 to {MAX_TODOS} items, got {}; send the whole list each call",
            items.len()
        ));
    }
    let mut out = Vec::with_capacity(items.len());
    let mut ids = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let Value::Object(o) = item else {
            return Err(format!(
                "todos[{i}] must be an object {{id, content, status}}"
            ));
        };
        let field = |k: &str| o.get(k).and_then(Value::as_str).map(str::trim);
        let id = field("id").filter(|s| !s.is_empty()).ok_or_else(|| {
            format!("todos[{i}].id must be a non-empty string (a short unique key such as \"1\")")
        })?;
        if id.chars().count() > MAX_ID_CHARS {
            return Err(format!(
                "todos[{i}].id is longer than {MAX_ID_CHARS} characters"
            ));
        }
        let content = field("content")
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("todos[{i}].content must be a non-empty string"))?;
        if content.chars().count() > MAX_CONTENT_CHARS {
            return Err(format!(
                "todos[{i}].content is longer than {MAX_CONTENT_CHARS} characters; keep items short"
            ));
        }
        let status = match field("status") {
            Some("pending") => Status::Pending,
            Some("in_progress") => Status::InProgress,
            Some("completed") => Status::Completed,
            other => {
                return Err(format!(
                    "todos[{i}].status must be 'pending', 'in_progress' or 'completed', got {}",
                    other.map_or("nothing".to_string(), |s| format!("'{s}'"))
                ));
            }
        };
        if !ids.insert(id.to_string()) {
            return Err(format!(
                "todos[{i}].id '{id}' is used twice; ids must be unique"
            ));
        }
        out.push(Todo {
            id: id.to_string(),
            content: content.to_string(),
            status,
        });
    }
    let busy: Vec<&str> = out
        .iter()
        .filter(|t| t.status == Status::InProgress)
        .map(|t| t.id.as_str())
        .collect();
    if busy.len() > 1 {
        return Err(format!(
            "at most one item may be in_progress, got {} ({}); finish one before starting the next",
            busy.len(),
            busy.join(", ")
        ));
    }
    Ok(out)
}

/// The list a successful `todo_write` result carries (`data.todos`), if any.
pub fn from_result_data(data: &Map<String, Value>) -> Option<Vec<Todo>> {
    serde_json::from_value(data.get("todos")?.clone()).ok()
}

pub struct TodoWrite;

impl Tool for TodoWrite {
    fn name(&self) -> &str {
        NAME
    }
    fn description(&self) -> &str {
        DESCRIPTION
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_TODOS,
                    "description": "The whole checklist, in order.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "description": "A short unique key, e.g. \"1\"."},
                            "content": {"type": "string", "description": "What to do, in a few words."},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                        },
                        "required": ["id", "content", "status"]
                    }
                }
            },
            "required": ["todos"]
        })
    }
    fn mode(&self) -> ToolMode {
        ToolMode::SafeWrite
    }
    fn call(self: Arc<Self>, _ctx: ToolContext, args: Map<String, Value>) -> ToolFuture {
        Box::pin(async move {
            match validate(args.get("todos")) {
                Ok(todos) => {
                    let mut data = Map::new();
                    data.insert("summary".into(), summary(&todos));
                    data.insert("todos".into(), json!(todos));
                    ToolResult::ok(data)
                }
                Err(e) => ToolResult::recoverable(format!("todo_write: {e}")),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, status: &str) -> Value {
        json!({"id": id, "content": format!("do {id}"), "status": status})
    }

    #[test]
    fn validation_names_the_fix() {
        let ok = validate(Some(&json!([
            item("a", "pending"),
            item("b", "in_progress")
        ])))
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(summary(&ok)["inProgress"], 1);
        assert_eq!(unfinished(&ok).len(), 2);
        let e = validate(Some(&json!([]))).unwrap_err();
        assert!(e.contains("1 to 50"), "{e}");
        let many: Vec<Value> = (0..51).map(|i| item(&i.to_string(), "pending")).collect();
        assert!(validate(Some(&json!(many))).is_err());
        let e = validate(Some(&json!([item("a", "pending"), item("a", "pending")]))).unwrap_err();
        assert!(e.contains("used twice"), "{e}");
        let e = validate(Some(&json!([
            item("a", "in_progress"),
            item("b", "in_progress")
        ])))
        .unwrap_err();
        assert!(e.contains("at most one item"), "{e}");
        let e = validate(Some(&json!([item("a", "done")]))).unwrap_err();
        assert!(e.contains("'done'"), "{e}");
        let e = validate(Some(&json!([{"id": "a", "status": "pending"}]))).unwrap_err();
        assert!(e.contains("content"), "{e}");
        assert!(validate(None).is_err());
    }

    #[test]
    fn result_round_trip() {
        let todos = validate(Some(&json!([item("a", "completed")]))).unwrap();
        let data = json!({"todos": todos, "summary": summary(&todos)});
        assert_eq!(from_result_data(data.as_object().unwrap()), Some(todos));
    }
}
