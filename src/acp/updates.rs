//! A turn's `stream.chunk`s and a record's messages as ACP `session/update` payloads
//! (docs/acp.md). Pure: the wire JSON only, so each mapping is tested on its own.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::headless::clip;
use crate::llm::{Message, Role};

/// Characters of a tool result shown in the editor (the full result is in the record).
pub const MAX_RESULT_CHARS: usize = 8_000;
/// Bytes of a file read to show a diff; a larger file gets no diff.
pub const MAX_DIFF_BYTES: u64 = 1 << 20;

pub fn text(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

/// ACP's tool kind for one of our tools.
pub fn kind(tool: &str) -> &'static str {
    match tool {
        "read_file" | "ls" | "view_image" => "read",
        "write_file" | "edit_file" | "apply_patch" => "edit",
        "grep" | "glob" | "tool_search" => "search",
        "bash" | "run_code" => "execute",
        "web_fetch" | "web_search" => "fetch",
        "todo_write" => "think",
        _ => "other",
    }
}

/// `bash: cargo test`, `read_file src/main.rs`, or the tool's name.
pub fn title(tool: &str, args: &Value) -> String {
    let arg = |k: &str| args.get(k).and_then(Value::as_str);
    match (
        tool,
        arg("command"),
        arg("path"),
        arg("pattern"),
        arg("url"),
        arg("query"),
    ) {
        ("bash", Some(c), ..) => format!("bash: {}", clip(c, 120)),
        (_, _, Some(p), ..) => format!("{tool} {}", clip(p, 200)),
        (_, _, _, Some(p), ..) => format!("{tool} {}", clip(p, 120)),
        (_, _, _, _, Some(u), _) => format!("{tool} {}", clip(u, 200)),
        (_, _, _, _, _, Some(q)) => format!("{tool}: {}", clip(q, 120)),
        _ => tool.to_string(),
    }
}

/// The file a call works on, absolute (against the session's workspace).
pub fn location(cwd: &Path, args: &Value) -> Option<PathBuf> {
    let p = args.get("path").and_then(Value::as_str)?;
    Some(cwd.join(p))
}

pub fn tool_call(id: &str, tool: &str, args: &Value, cwd: &Path, status: &str) -> Value {
    let locations: Vec<Value> = location(cwd, args)
        .map(|p| json!({"path": p}))
        .into_iter()
        .collect();
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "title": title(tool, args),
        "kind": kind(tool),
        "status": status,
        "locations": locations,
        "rawInput": args,
    })
}

/// The result of a call. `diff` is `(path, old, new)` for a file edit.
pub fn tool_result(
    id: &str,
    success: bool,
    shown: &str,
    raw: Value,
    diff: Option<(PathBuf, Option<String>, String)>,
    image: Option<(String, String)>,
) -> Value {
    let mut content = Vec::new();
    if let Some((mime, data)) = image {
        content.push(json!({"type": "content", "content": {"type": "image", "mimeType": mime, "data": data}}));
    }
    if let Some((path, old, new)) = diff {
        let mut d = json!({"type": "diff", "path": path, "newText": new});
        if let Some(o) = old {
            d["oldText"] = json!(o);
        }
        content.push(d);
    }
    if !shown.is_empty() {
        content.push(json!({"type": "content", "content": {"type": "text", "text": clip(shown, MAX_RESULT_CHARS)}}));
    }
    json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": id,
        "status": if success { "completed" } else { "failed" },
        "content": content,
        "rawOutput": raw,
    })
}

/// A `todo_write` list as an ACP plan.
pub fn plan(todos: &Value) -> Option<Value> {
    let entries: Vec<Value> = todos
        .as_array()?
        .iter()
        .map(|t| {
            let status = match t.get("status").and_then(Value::as_str) {
                Some("in_progress") => "in_progress",
                Some("completed") => "completed",
                _ => "pending",
            };
            json!({
                "content": t.get("content").and_then(Value::as_str).unwrap_or(""),
                "priority": "medium",
                "status": status,
            })
        })
        .collect();
    Some(json!({"sessionUpdate": "plan", "entries": entries}))
}

/// Reads a file for a diff: `None` when it is missing, not UTF-8 or too large.
pub fn read_for_diff(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_DIFF_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Whether a tool message's body says the call failed (`{"success": false, …}`).
fn failed(body: &str) -> bool {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("success").and_then(Value::as_bool))
        == Some(false)
}

/// A record's transcript as the updates a client replays on `session/load`.
pub fn replay(messages: &[Message], cwd: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for m in messages {
        match m.role {
            Role::User if !m.content.is_empty() => {
                out.push(text("user_message_chunk", &m.content));
            }
            Role::Assistant => {
                if let Some(r) = m.reasoning.as_deref().filter(|r| !r.is_empty()) {
                    out.push(text("agent_thought_chunk", r));
                }
                if !m.content.is_empty() {
                    out.push(text("agent_message_chunk", &m.content));
                }
                for c in &m.tool_calls {
                    out.push(tool_call(&c.id, &c.name, &c.arguments, cwd, "pending"));
                }
            }
            Role::Tool => {
                if let Some(id) = &m.tool_call_id {
                    out.push(tool_result(
                        id,
                        !failed(&m.content),
                        &m.content,
                        Value::Null,
                        None,
                        None,
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_titles_and_locations() {
        assert_eq!(kind("edit_file"), "edit");
        assert_eq!(kind("mcp__x__y"), "other");
        assert_eq!(title("bash", &json!({"command": "ls -la"})), "bash: ls -la");
        assert_eq!(
            title("read_file", &json!({"path": "a.rs"})),
            "read_file a.rs"
        );
        let c = tool_call(
            "c1",
            "write_file",
            &json!({"path": "a.txt"}),
            Path::new("/w"),
            "pending",
        );
        assert_eq!(c["locations"][0]["path"], "/w/a.txt");
        assert_eq!(c["kind"], "edit");
    }

    #[test]
    fn results_carry_diffs_and_plans_map_statuses() {
        let r = tool_result(
            "c1",
            true,
            "ok",
            json!({}),
            Some(("/w/a".into(), None, "new".into())),
            Some(("image/png".into(), "iVBOR".into())),
        );
        assert_eq!(r["content"][0]["content"]["type"], "image");
        assert_eq!(r["content"][1]["type"], "diff");
        assert!(r["content"][1].get("oldText").is_none());
        assert_eq!(r["status"], "completed");
        let p =
            plan(&json!([{"content": "a", "status": "in_progress"}, {"content": "b"}])).unwrap();
        assert_eq!(p["entries"][0]["status"], "in_progress");
        assert_eq!(p["entries"][1]["status"], "pending");
    }

    #[test]
    fn replay_orders_messages_and_marks_failures() {
        let mut a = Message::new(Role::Assistant, "");
        a.tool_calls.push(crate::llm::ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            arguments: json!({"command": "x"}),
            arguments_error: None,
            extra_content: None,
        });
        let mut t = Message::new(Role::Tool, r#"{"success": false}"#);
        t.tool_call_id = Some("c1".into());
        let u = replay(&[Message::new(Role::User, "hi"), a, t], Path::new("/w"));
        assert_eq!(u[0]["sessionUpdate"], "user_message_chunk");
        assert_eq!(u[1]["sessionUpdate"], "tool_call");
        assert_eq!(u[2]["status"], "failed");
    }
}
