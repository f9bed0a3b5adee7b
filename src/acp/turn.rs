//! `session/prompt` as one sidecar turn, and `session/load` as a replay of the record.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::{Editor, Fail, State, open_session, updates};
use crate::headless::sidecar::{CallError, Incoming};
use crate::protocol::chat::HostFsParam;

async fn notify(editor: &Editor, session: &str, update: Value) {
    editor
        .notify(
            "session/update",
            json!({"sessionId": session, "update": update}),
        )
        .await;
}

fn sidecar_error(e: CallError) -> Fail {
    match e {
        CallError::Rpc {
            code: -32602,
            message,
            ..
        } => Fail::invalid(message),
        e => Fail::internal(e.to_string()),
    }
}

/// `session/load`: replays the record and registers the session (its next prompt continues
/// the record, and the sidecar rebuilds the file tools' read state from it).
pub async fn load(state: &Arc<State>, req: &Value) -> Result<(), Fail> {
    let sid = req["sessionId"].as_str().unwrap_or("").to_string();
    let got = match state
        .sc
        .request("agent.session.messages", json!({"recordId": sid}))
        .await
    {
        Ok(got) => got,
        Err(CallError::Rpc { code: -32004, .. }) => return Err(Fail::not_found(&sid)),
        Err(e) => return Err(sidecar_error(e)),
    };
    let messages: Vec<crate::llm::Message> =
        serde_json::from_value(got["messages"].clone()).unwrap_or_default();
    if messages.is_empty() {
        return Err(Fail::not_found(&sid));
    }
    open_session(state, &sid, req, true)?;
    let cwd = PathBuf::from(req["cwd"].as_str().unwrap_or(""));
    for u in updates::replay(&messages, &cwd) {
        notify(&state.editor, &sid, u).await;
    }
    Ok(())
}

/// The user message of a prompt: text blocks, embedded resources as context, links named.
fn message(prompt: &Value) -> Result<String, Fail> {
    let mut out = String::new();
    for b in prompt.as_array().into_iter().flatten() {
        match b["type"].as_str() {
            Some("text") => out.push_str(b["text"].as_str().unwrap_or("")),
            Some("resource") => {
                let r = &b["resource"];
                let uri = r["uri"].as_str().unwrap_or("");
                match r["text"].as_str() {
                    Some(t) => {
                        out.push_str(&format!("\n<context path=\"{uri}\">\n{t}\n</context>\n"))
                    }
                    None => out.push_str(&format!("\n(attached: {uri}, binary, not shown)\n")),
                }
            }
            Some("resource_link") => {
                out.push_str(&format!(
                    "\n(linked: {})\n",
                    b["uri"].as_str().unwrap_or("")
                ));
            }
            other => {
                return Err(Fail::invalid(format!(
                    "prompt content of type {} is not supported (promptCapabilities: text and embedded context)",
                    other.unwrap_or("?")
                )));
            }
        }
    }
    if out.trim().is_empty() {
        return Err(Fail::invalid("the prompt has no text".into()));
    }
    Ok(out)
}

/// The permission request for one `approval.request`, and our decision for the client's pick.
async fn permission(
    editor: &Editor,
    sid: &str,
    cwd: &std::path::Path,
    p: &Value,
) -> (String, String) {
    let tool = p["toolName"].as_str().unwrap_or("");
    let call = updates::tool_call(
        p["callId"].as_str().unwrap_or(""),
        tool,
        &p["arguments"],
        cwd,
        "pending",
    );
    let options = json!([
        {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
        {"optionId": "allow_always", "name": format!("Always allow {tool}"), "kind": "allow_always"},
        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        {"optionId": "reject_always", "name": format!("Always reject {tool}"), "kind": "reject_always"},
    ]);
    let mut update = call;
    if let Value::Object(m) = &mut update {
        m.remove("sessionUpdate");
    }
    let answer = editor
        .request(
            "session/request_permission",
            json!({"sessionId": sid, "toolCall": update, "options": options}),
        )
        .await;
    match answer {
        Ok(r) if r.pointer("/outcome/outcome") == Some(&json!("selected")) => {
            let picked = r
                .pointer("/outcome/optionId")
                .and_then(Value::as_str)
                .unwrap_or("");
            let kind = match picked {
                "allow_once" => "allow_once",
                "allow_always" => "allow_always",
                "reject_always" => "deny_always",
                _ => "deny_once",
            };
            (
                kind.to_string(),
                format!("the editor's user chose {picked}"),
            )
        }
        Ok(_) => (
            "deny_once".into(),
            "the permission request was cancelled".into(),
        ),
        Err(e) => (
            "deny_once".into(),
            format!("the permission request failed: {e}"),
        ),
    }
}

/// A call in flight: what its result update needs.
struct Pending {
    tool: String,
    /// A writing file tool (`write_file`, `edit_file`, `apply_patch`): what it reads is kept.
    writes: bool,
    /// For `write_file` / `edit_file`: the file its diff is shown for.
    edit: Option<PathBuf>,
    /// The call's arguments, for an edit (its text after is computed from them).
    args: Value,
}

/// `session/prompt`: runs one turn and answers its stop reason.
pub async fn prompt(state: &Arc<State>, req: &Value) -> Result<&'static str, Fail> {
    let sid = req["sessionId"].as_str().unwrap_or("").to_string();
    let text = message(&req["prompt"])?;
    let stream = format!("str_{}", crate::store::ids::random_hex(16));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (cwd, client, mut params) = {
        let mut sessions = state
            .sessions
            .lock()
            .map_err(|_| Fail::internal("the session table is poisoned".into()))?;
        let Some(s) = sessions.get_mut(&sid) else {
            return Err(Fail::not_found(&sid));
        };
        if let Some(running) = &s.stream {
            return Err(Fail::invalid(format!(
                "session {sid} already has a running prompt ({running}); cancel it first"
            )));
        }
        let mut params = state.base.clone();
        params.insert("chatId".into(), json!(sid));
        params.insert("streamId".into(), json!(stream));
        params.insert("cwd".into(), json!(s.cwd));
        params.insert(
            "messages".into(),
            json!([{"role": "user", "content": text}]),
        );
        if s.started {
            params.insert("fromRecord".into(), json!(true));
        }
        params.insert("approval".into(), json!({"mode": "host"}));
        // Reads always come through us: the sidecar reads a file before it writes it, so the
        // text an edit's diff starts from is taken in that read, before the write can happen
        // (reading the disk when the `toolCall` chunk arrives raced the tool). Without the
        // client's `fs`, we serve the reads from the disk.
        let client = state.fs.lock().map(|f| *f).unwrap_or_default();
        params.insert(
            "hostFs".into(),
            json!({"read": true, "write": client.write}),
        );
        params.insert(
            "askUser".into(),
            json!(state.elicitation.load(std::sync::atomic::Ordering::Relaxed)),
        );
        if !s.mcp.is_empty() {
            params.insert("mcp".into(), Value::Array(s.mcp.clone()));
        }
        s.stream = Some(stream.clone());
        (s.cwd.clone(), client, params)
    };
    if let Ok(mut r) = state.routes.lock() {
        r.insert(stream.clone(), tx);
    }
    let started = state
        .sc
        .request(
            "agent.chat.stream",
            Value::Object(std::mem::take(&mut params)),
        )
        .await;
    let ran = started.is_ok();
    let outcome = match started {
        Ok(_) => follow(state, &sid, &cwd, client, &mut rx).await,
        Err(e) => Err(sidecar_error(e)),
    };
    if let Ok(mut r) = state.routes.lock() {
        r.remove(&stream);
    }
    if let Ok(mut sessions) = state.sessions.lock()
        && let Some(s) = sessions.get_mut(&sid)
    {
        s.stream = None;
        // Once a turn ran the record exists (a failed turn records the message too).
        s.started |= ran;
    }
    outcome
}

/// Follows the turn's frames until `stream.done`; `client` is what of `hostFs` the editor serves
/// (the rest of the reads are ours, from the disk).
async fn follow(
    state: &Arc<State>,
    sid: &str,
    cwd: &std::path::Path,
    client: HostFsParam,
    rx: &mut mpsc::UnboundedReceiver<Incoming>,
) -> Result<&'static str, Fail> {
    let editor = &state.editor;
    let mut calls: HashMap<String, Pending> = HashMap::new();
    let mut files = Files {
        client,
        max_read_bytes: state.max_read_bytes,
        seen: HashMap::new(),
        written: HashMap::new(),
    };
    let mut error: Option<String> = None;
    while let Some(msg) = rx.recv().await {
        match msg {
            Incoming::Notification { method, params } => match method.as_str() {
                "stream.chunk" => {
                    chunk(
                        editor,
                        sid,
                        cwd,
                        &params,
                        &mut calls,
                        &mut files,
                        &state.images_dir,
                    )
                    .await
                }
                "stream.error" => {
                    error = Some(format!(
                        "{}: {}",
                        params["kind"].as_str().unwrap_or("error"),
                        params["message"].as_str().unwrap_or("")
                    ));
                }
                "stream.done" => {
                    return match params["status"].as_str() {
                        Some("completed") => Ok("end_turn"),
                        Some("budget_exhausted") => Ok("max_turn_requests"),
                        Some("cancelled") => Ok("cancelled"),
                        _ => Err(Fail::internal(error.unwrap_or_else(|| {
                            params["reason"]
                                .as_str()
                                .unwrap_or("the turn failed")
                                .to_string()
                        }))),
                    };
                }
                _ => {}
            },
            Incoming::Request { id, method, params } => match method.as_str() {
                "approval.request" => {
                    let (kind, reason) = permission(editor, sid, cwd, &params).await;
                    state
                        .sc
                        .respond(id, json!({"kind": kind, "reason": reason}))
                        .await;
                }
                "fs.read_text" | "fs.write_text" => {
                    let answer = files.forward(editor, sid, &method, &params, &calls).await;
                    match answer {
                        Ok(v) => state.sc.respond(id, v).await,
                        Err(e) => state.sc.respond_error(id, -32603, &e).await,
                    }
                }
                "ask_user.request" => {
                    let answers = super::elicit::ask(editor, sid, &params).await;
                    state.sc.respond(id, json!({"answers": answers})).await;
                }
                _ => {
                    state
                        .sc
                        .respond_error(
                            id,
                            -32601,
                            &format!("outrigger acp does not handle {method}"),
                        )
                        .await;
                }
            },
        }
    }
    Err(Fail::internal("the sidecar exited during the turn".into()))
}

/// One `stream.chunk` as updates.
async fn chunk(
    editor: &Editor,
    sid: &str,
    cwd: &std::path::Path,
    c: &Value,
    calls: &mut HashMap<String, Pending>,
    files: &mut Files,
    images: &std::path::Path,
) {
    if let Some(d) = c.get("delta").and_then(Value::as_str) {
        notify(editor, sid, updates::text("agent_message_chunk", d)).await;
    }
    if let Some(d) = c.get("reasoningDelta").and_then(Value::as_str) {
        notify(editor, sid, updates::text("agent_thought_chunk", d)).await;
    }
    if let Some(call) = c.get("toolCall") {
        let id = call["id"].as_str().unwrap_or("").to_string();
        let tool = call["name"].as_str().unwrap_or("").to_string();
        let args = &call["arguments"];
        let writes = updates::kind(&tool) == "edit";
        let edit = match writes {
            true if tool != "apply_patch" => updates::location(cwd, args),
            _ => None,
        };
        notify(
            editor,
            sid,
            updates::tool_call(&id, &tool, args, cwd, "pending"),
        )
        .await;
        if tool == crate::tools::todo::NAME
            && let Some(plan) = args.get("todos").and_then(updates::plan)
        {
            notify(editor, sid, plan).await;
        }
        let args = if edit.is_some() {
            args.clone()
        } else {
            Value::Null
        };
        calls.insert(
            id,
            Pending {
                tool,
                writes,
                edit,
                args,
            },
        );
    }
    if let Some(r) = c.get("toolResult") {
        let id = r["id"].as_str().unwrap_or("");
        let success = r["success"].as_bool() == Some(true);
        let pending = calls.remove(id);
        // An image the call showed the model, from the sidecar's store (the chunk names it).
        let picture = r
            .pointer("/image/url")
            .and_then(Value::as_str)
            .and_then(|u| crate::agent::images::file_of(images, u))
            .and_then(|f| std::fs::read(f).ok())
            .map(|bytes| {
                use base64::Engine as _;
                (
                    r["image"]["mediaType"]
                        .as_str()
                        .unwrap_or("image/png")
                        .to_string(),
                    base64::engine::general_purpose::STANDARD.encode(bytes),
                )
            });
        let written = files.written.remove(id);
        // `write_file` and `edit_file` read their one file once.
        let seen = files.seen.remove(id).and_then(|s| s.into_iter().next());
        let diff = match (written, pending.as_ref()) {
            _ if !success => None,
            (Some(w), _) => Some(w),
            (None, Some(p)) => p.edit.clone().and_then(|path| {
                let after =
                    after_text(p, seen.as_ref()).or_else(|| updates::read_for_diff(&path))?;
                Some((path, seen.and_then(|s| s.before), after))
            }),
            _ => None,
        };
        let shown = match (
            r.get("error").and_then(Value::as_str),
            r["resultPreview"].as_str(),
        ) {
            (Some(e), _) if !success => e.to_string(),
            (_, Some(p)) => p.to_string(),
            _ => String::new(),
        };
        let mut raw = Map::new();
        if let Some(p) = &pending {
            raw.insert("tool".into(), json!(p.tool));
        }
        for k in ["durationMs", "error", "sandbox"] {
            if let Some(v) = r.get(k) {
                raw.insert(k.into(), v.clone());
            }
        }
        notify(
            editor,
            sid,
            updates::tool_result(id, success, &shown, Value::Object(raw), diff, picture),
        )
        .await;
    }
}

/// A file's text as a writing call read it (the sidecar reads before it writes).
struct Seen {
    path: String,
    /// What the sidecar was given: the client's buffer, or the disk.
    served: String,
    /// The text the call's write replaces: the same when the client writes or we read the
    /// disk, else the disk's text then (the buffer is read, the disk is written).
    before: Option<String>,
}

/// The text a successful `write_file` / `edit_file` wrote on disk, from its arguments and the
/// text it read: not read back, since a later call may already have changed the file.
fn after_text(p: &Pending, seen: Option<&Seen>) -> Option<String> {
    match p.tool.as_str() {
        "write_file" => p.args.get("content")?.as_str().map(str::to_string),
        "edit_file" => {
            let args: crate::tools::fs::write::EditArgs =
                serde_json::from_value(p.args.clone()).ok()?;
            crate::tools::fs::edit::apply_edits(
                &seen?.served,
                &args.edits,
                &args.path,
                args.replace_all.unwrap_or(false),
            )
            .ok()
            .map(|o| o.content)
        }
        _ => None,
    }
}

/// The turn's file text through us (`hostFs`): the client's `fs/*` where it offers them, else
/// the disk for reads; what an edit call read, to show its diff.
struct Files {
    /// What the client serves itself.
    client: HostFsParam,
    max_read_bytes: u64,
    /// Writing call id → the files it read, in order.
    seen: HashMap<String, Vec<Seen>>,
    /// Call id → (path, text before, text written) when the client did the writing.
    written: HashMap<String, (PathBuf, Option<String>, String)>,
}

impl Files {
    /// Answers `fs.read_text` / `fs.write_text`: the client's `fs/*` methods, or the disk.
    async fn forward(
        &mut self,
        editor: &Editor,
        sid: &str,
        method: &str,
        p: &Value,
        calls: &HashMap<String, Pending>,
    ) -> Result<Value, String> {
        let path = p["path"].as_str().unwrap_or("").to_string();
        let call = p.pointer("/context/callId").and_then(Value::as_str);
        let writing = call.filter(|c| calls.get(*c).is_some_and(|p| p.writes));
        if method == "fs.read_text" {
            let content = if self.client.read {
                let got = editor
                    .request("fs/read_text_file", json!({"sessionId": sid, "path": path}))
                    .await
                    .map_err(|e| format!("the editor refused fs/read_text_file: {e}"))?;
                let Some(content) = got["content"].as_str() else {
                    return Err("the editor's fs/read_text_file answer has no content".into());
                };
                content.to_string()
            } else {
                // Off the adapter's loop: a file may be up to `max_read_bytes`.
                let (at, max) = (path.clone(), self.max_read_bytes);
                tokio::task::spawn_blocking(move || read_disk(&at, max))
                    .await
                    .map_err(|e| format!("cannot read {path}: {e}"))??
            };
            if let Some(call) = writing {
                // Read here, before the sidecar writes: nothing can have changed it yet.
                let before = if self.client.write || !self.client.read {
                    Some(content.clone())
                } else {
                    updates::read_for_diff(std::path::Path::new(&path))
                };
                let served = content.clone();
                self.seen.entry(call.to_string()).or_default().push(Seen {
                    path: path.clone(),
                    served,
                    before,
                });
            }
            return Ok(json!({"content": content}));
        }
        let content = p["content"].as_str().unwrap_or("").to_string();
        editor
            .request(
                "fs/write_text_file",
                json!({"sessionId": sid, "path": path, "content": content}),
            )
            .await
            .map_err(|e| format!("the editor refused fs/write_text_file: {e}"))?;
        if let Some(call) = writing {
            let before = self.seen.get(call).and_then(|s| {
                s.iter()
                    .rev()
                    .find(|s| s.path == path)
                    .map(|s| s.served.clone())
            });
            self.written
                .insert(call.to_string(), (PathBuf::from(&path), before, content));
        }
        Ok(json!({}))
    }
}

/// A file's text from the disk for the sidecar, at most `max` bytes (the sidecar checked the
/// path and the size just before; this bounds a file that grew since).
fn read_disk(path: &str, max: u64) -> Result<String, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(format!(
            "{path} grew over the {max}-byte read limit (config max_read_bytes)"
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("{path} is not valid UTF-8"))
}
