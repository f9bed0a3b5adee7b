//! An MCP server's tool on our router: `mcp__<server>__<tool>`, its input schema (the router
//! validates arguments against it before the call), a mode from the server's annotations,
//! and `CallToolResult` mapped onto a ToolResult.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::client::{CallError, McpClient, RemoteTool};
use super::entry::tool_name;
use crate::tools::router::elapsed_ms;
use crate::tools::{Schema, Tool, ToolContext, ToolFuture, ToolMode, ToolResult};

/// Base64 image or audio data above this many bytes is left out of the result (its type and
/// size stay): the model cannot see pixels in a tool message, and the bytes would cost tokens.
pub const MAX_INLINE_BINARY: usize = 64 * 1024;
/// Longest description kept from a server (the model reads it every round).
const MAX_DESCRIPTION_CHARS: usize = 2048;

pub struct McpTool {
    name: String,
    server: Arc<str>,
    remote: String,
    description: String,
    schema: Schema,
    mode: ToolMode,
    client: Arc<dyn McpClient>,
}

impl McpTool {
    pub fn new(server: &Arc<str>, t: &RemoteTool, client: Arc<dyn McpClient>) -> McpTool {
        // Hints from an untrusted server only ever pick a mode; `external` otherwise.
        let mode = if t.read_only {
            ToolMode::Read
        } else if t.destructive {
            ToolMode::Destructive
        } else {
            ToolMode::External
        };
        let mut description: String = t.description.chars().take(MAX_DESCRIPTION_CHARS).collect();
        if description.is_empty() {
            description = format!("Tool {} of the MCP server {server}.", t.name);
        }
        McpTool {
            name: tool_name(server, &t.name),
            server: server.clone(),
            remote: t.name.clone(),
            description,
            schema: Schema::from_value(&t.input_schema),
            mode,
            client,
        }
    }

    /// The server's own name for the tool.
    pub fn remote_name(&self) -> &str {
        &self.remote
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.schema.value()
    }

    fn schema(&self) -> Schema {
        self.schema.clone()
    }

    fn mode(&self) -> ToolMode {
        self.mode
    }

    fn call(self: Arc<Self>, ctx: ToolContext, args: Map<String, Value>) -> ToolFuture {
        Box::pin(async move {
            let started = std::time::Instant::now();
            let call = self.client.call_tool(&self.remote, args);
            let r = tokio::select! {
                r = call => r,
                _ = ctx.cancel.cancelled() => {
                    return ToolResult::recoverable(format!(
                        "the call to {} on MCP server '{}' was cancelled", self.remote, self.server
                    ));
                }
            };
            let mut out = match r {
                Ok(v) => map_result(&self.server, &self.remote, &v),
                Err(CallError::Refused(m)) => ToolResult::recoverable(format!(
                    "MCP server '{}' refused the call to {}: {m}",
                    self.server, self.remote
                )),
                Err(CallError::Closed(how)) => {
                    let mut r = ToolResult::recoverable(format!(
                        "MCP server '{}' {how} during the call to {}; its tools are unavailable until it is started again",
                        self.server, self.remote
                    ));
                    let stderr = self.client.stderr_tail();
                    if !stderr.trim().is_empty() {
                        r = r.with_data("stderr", stderr);
                    }
                    r.with_data("exit", how)
                }
            };
            out = out
                .with_data("server", self.server.to_string())
                .with_data("tool", self.remote.clone());
            out.with_data("durationMs", elapsed_ms(started))
        })
    }
}

/// `CallToolResult` (as JSON) → ToolResult: text blocks joined into `data.text`, other blocks
/// kept in `data.content` with their sizes, `structuredContent` in `data.structuredContent`;
/// `isError` → a failure the model may follow up on, its text as the error.
pub fn map_result(server: &str, tool: &str, v: &Value) -> ToolResult {
    let blocks = v
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut texts: Vec<&str> = Vec::new();
    let mut others: Vec<Value> = Vec::new();
    let mut images: Vec<Value> = Vec::new();
    for b in &blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => texts.push(b.get("text").and_then(Value::as_str).unwrap_or_default()),
            // An image the model can take goes to it as an image, the way view_image's does;
            // the block stays described (type and size) without its bytes.
            Some("image") => {
                let shown = b.get("mimeType").and_then(Value::as_str).and_then(|m| {
                    crate::tools::fs::image::attachment(
                        m,
                        b.get("data").and_then(Value::as_str).unwrap_or_default(),
                    )
                });
                let mut block = binary_block(b);
                if let (Some(i), Value::Object(o)) = (shown, &mut block) {
                    o.remove("data");
                    o.insert("shownAsImage".into(), json!(true));
                    images.push(i);
                }
                others.push(block);
            }
            Some("audio") => others.push(binary_block(b)),
            Some("resource") => others.push(resource_block(b)),
            _ => others.push(b.clone()),
        }
    }
    let text = texts.join("\n");
    let mut data = Map::new();
    data.insert("text".into(), json!(text));
    if !others.is_empty() {
        data.insert("content".into(), Value::Array(others));
    }
    if let Some(s) = v.get("structuredContent").filter(|s| !s.is_null()) {
        data.insert("structuredContent".into(), s.clone());
    }
    if !images.is_empty() {
        data.insert(
            crate::tools::fs::image::IMAGE_KEY.into(),
            Value::Array(images),
        );
    }
    if v.get("isError").and_then(Value::as_bool) == Some(true) {
        let error = if text.trim().is_empty() {
            format!("MCP tool {tool} on server '{server}' reported an error without a message")
        } else {
            text
        };
        let mut r = ToolResult::recoverable(error);
        r.data = Some(data);
        return r;
    }
    ToolResult::ok(data)
}

/// Decoded size of base64 text (padding excluded).
fn decoded_len(b64: &str) -> usize {
    let s = b64.trim_end_matches('=');
    s.len() * 3 / 4
}

fn binary_block(b: &Value) -> Value {
    let data = b.get("data").and_then(Value::as_str).unwrap_or_default();
    let mut out = Map::new();
    out.insert("type".into(), b.get("type").cloned().unwrap_or(Value::Null));
    if let Some(m) = b.get("mimeType") {
        out.insert("mimeType".into(), m.clone());
    }
    out.insert("bytes".into(), json!(decoded_len(data)));
    if data.len() <= MAX_INLINE_BINARY {
        out.insert("data".into(), json!(data));
    } else {
        out.insert("omitted".into(), json!(true));
    }
    Value::Object(out)
}

fn resource_block(b: &Value) -> Value {
    let r = b.get("resource").cloned().unwrap_or(Value::Null);
    let mut out = Map::new();
    out.insert("type".into(), json!("resource"));
    for k in ["uri", "mimeType", "text"] {
        if let Some(v) = r.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    if let Some(blob) = r.get("blob").and_then(Value::as_str) {
        out.insert("bytes".into(), json!(decoded_len(blob)));
        if blob.len() <= MAX_INLINE_BINARY {
            out.insert("blob".into(), json!(blob));
        } else {
            out.insert("omitted".into(), json!(true));
        }
    } else if let Some(t) = r.get("text").and_then(Value::as_str) {
        out.insert("bytes".into(), json!(t.len()));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_structured_and_images_are_mapped() {
        let v = json!({
            "content": [
                {"type": "text", "text": "one"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "text", "text": "two"},
                {"type": "resource_link", "uri": "demo://x", "name": "x"}
            ],
            "structuredContent": {"a": 1},
            "isError": false
        });
        let r = map_result("s", "t", &v);
        assert!(r.success);
        let d = r.data.unwrap();
        assert_eq!(d["text"], "one\ntwo");
        assert_eq!(d["structuredContent"], json!({"a": 1}));
        assert_eq!(d["content"][0]["type"], "image");
        assert_eq!(d["content"][0]["bytes"], 8);
        assert_eq!(d["content"][0]["data"], "iVBORw0KGgo=");
        assert_eq!(d["content"][1]["type"], "resource_link");
    }

    #[test]
    fn is_error_becomes_a_recoverable_failure() {
        let v = json!({"content": [{"type": "text", "text": "Invalid timezone"}], "isError": true});
        let r = map_result("time", "get_current_time", &v);
        assert!(!r.success);
        assert_eq!(r.needs_followup, Some(true));
        assert_eq!(r.error.as_deref(), Some("Invalid timezone"));
        let empty = map_result("time", "x", &json!({"content": [], "isError": true}));
        assert!(empty.error.unwrap().contains("without a message"));
    }

    #[test]
    fn big_binary_is_left_out_with_its_size() {
        let big = "A".repeat(MAX_INLINE_BINARY + 4);
        let v = json!({"content": [{"type": "image", "data": big, "mimeType": "image/png"}]});
        let d = map_result("s", "t", &v).data.unwrap();
        assert_eq!(d["content"][0]["omitted"], true);
        assert!(d["content"][0].get("data").is_none());
        assert_eq!(d["content"][0]["bytes"], (MAX_INLINE_BINARY + 4) * 3 / 4);
    }
}
