//! What `outrigger run` prints: the answer (`text`), one result object (`json`), or one
//! event per line (`stream-json`). Stdout carries only the format; every line is flushed.

use std::io::Write;

use serde_json::{Map, Value, json};

use super::args::Format;

/// One tool call of the turn, for the result's `toolCalls`.
struct Call {
    id: String,
    name: String,
    parent: Option<String>,
    success: Option<bool>,
    error: Option<String>,
}

/// The turn as it streams, and the printing of it.
pub struct Report {
    format: Format,
    verbose: bool,
    /// The current round's answer text; cleared when a round that called tools is followed
    /// by more text (text before tool calls is not the answer).
    answer: String,
    stale: bool,
    calls: Vec<Call>,
    denials: Vec<Value>,
    pub error: Option<Value>,
}

fn emit(line: &Value) {
    // `outrigger run` owns its stdout: the format, one flushed line at a time.
    let mut out = std::io::stdout().lock(); // stdout-ok
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// `s` cut to `n` characters, with `…` when cut.
pub fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

impl Report {
    pub fn new(format: Format, verbose: bool) -> Report {
        Report {
            format,
            verbose,
            answer: String::new(),
            stale: false,
            calls: Vec::new(),
            denials: Vec::new(),
            error: None,
        }
    }

    fn event(&self, kind: &str, field: &str, value: Value) {
        if self.format == Format::StreamJson {
            let mut m = Map::new();
            m.insert("type".into(), json!(kind));
            m.insert(field.into(), value);
            emit(&Value::Object(m));
        }
    }

    pub fn start(&self, fields: Map<String, Value>) {
        if self.format == Format::StreamJson {
            let mut m = Map::new();
            m.insert("type".into(), json!("start"));
            m.extend(fields);
            emit(&Value::Object(m));
        }
    }

    /// One `stream.chunk`'s params.
    pub fn chunk(&mut self, mut c: Map<String, Value>) {
        if let Some(Value::String(d)) = c.get("delta") {
            if self.stale {
                self.answer.clear();
                self.stale = false;
            }
            self.answer.push_str(d);
        }
        if let Some(call) = c.get("toolCall") {
            let parent = call
                .get("parentId")
                .and_then(Value::as_str)
                .map(str::to_string);
            if parent.is_none() {
                self.stale = true;
            }
            let name = call["name"].as_str().unwrap_or("").to_string();
            if self.verbose && self.format == Format::Text {
                eprintln!(
                    "[tool] {name} {}",
                    clip(
                        &call
                            .get("arguments")
                            .map(Value::to_string)
                            .unwrap_or_default(),
                        200
                    )
                );
            }
            self.calls.push(Call {
                id: call["id"].as_str().unwrap_or("").to_string(),
                name,
                parent,
                success: None,
                error: None,
            });
        }
        if let Some(r) = c.get("toolResult") {
            let id = r["id"].as_str().unwrap_or("");
            let success = r["success"].as_bool();
            let error = r.get("error").and_then(Value::as_str).map(str::to_string);
            if self.verbose && self.format == Format::Text {
                let name = r["name"].as_str().unwrap_or("");
                match (&error, success) {
                    (_, Some(true)) => eprintln!(
                        "[tool] {name} ok ({} ms)",
                        r.get("durationMs")
                            .map(Value::to_string)
                            .unwrap_or_default()
                    ),
                    (Some(e), _) => eprintln!("[tool] {name} failed: {}", clip(e, 300)),
                    (None, _) => eprintln!("[tool] {name} failed"),
                }
            }
            if let Some(call) = self.calls.iter_mut().rev().find(|c| c.id == id) {
                call.success = success;
                call.error = error;
            }
        }
        if let Some(n) = c.get("notice")
            && self.verbose
            && self.format == Format::Text
        {
            eprintln!("[notice] {}", clip(&n.to_string(), 300));
        }
        for key in [
            "delta",
            "reasoningDelta",
            "toolCall",
            "toolResult",
            "notice",
            "rawChunk",
        ] {
            if let Some(v) = c.remove(key) {
                self.event(key, key, v);
            }
        }
    }

    /// What the flags decided for a call that needed approval.
    pub fn approval(&mut self, decision: Value) {
        let denied = decision["decision"] != "allow_once";
        if denied {
            self.denials.push(json!({
                "id": decision["id"],
                "name": decision["name"],
                "reason": decision["reason"],
            }));
            if self.verbose && self.format == Format::Text {
                eprintln!(
                    "[tool] {} denied: {}",
                    decision["name"].as_str().unwrap_or(""),
                    decision["reason"].as_str().unwrap_or("")
                );
            }
        }
        self.event("approval", "approval", decision);
    }

    pub fn stream_error(&mut self, e: Value) {
        let err = json!({"kind": e["kind"], "message": e["message"]});
        self.event("error", "error", err.clone());
        self.error = Some(err);
    }

    /// The final answer: the last round's text.
    pub fn answer(&self) -> &str {
        if self.stale { "" } else { &self.answer }
    }

    fn calls(&self) -> Value {
        Value::Array(
            self.calls
                .iter()
                .map(|c| {
                    let mut m = Map::new();
                    m.insert("id".into(), json!(c.id));
                    m.insert("name".into(), json!(c.name));
                    m.insert("success".into(), json!(c.success.unwrap_or(false)));
                    if let Some(e) = &c.error {
                        m.insert("error".into(), json!(e));
                    }
                    if let Some(p) = &c.parent {
                        m.insert("parentId".into(), json!(p));
                    }
                    Value::Object(m)
                })
                .collect(),
        )
    }

    /// Prints the end of the run: the answer, or the result object. `fields` carries status,
    /// reason, exitCode and the ids.
    pub fn finish(&self, mut fields: Map<String, Value>) {
        match self.format {
            Format::Text => {
                let answer = self.answer();
                if !answer.is_empty() {
                    emit_text(answer);
                }
            }
            Format::Json | Format::StreamJson => {
                let mut m = Map::new();
                m.insert("type".into(), json!("result"));
                m.insert("result".into(), json!(self.answer()));
                m.append(&mut fields);
                if let Some(e) = &self.error {
                    m.entry("error").or_insert_with(|| e.clone());
                }
                m.insert("toolCalls".into(), self.calls());
                m.insert("denials".into(), Value::Array(self.denials.clone()));
                emit(&Value::Object(m));
            }
        }
    }
}

fn emit_text(answer: &str) {
    let mut out = std::io::stdout().lock(); // stdout-ok
    let _ = if answer.ends_with('\n') {
        write!(out, "{answer}")
    } else {
        writeln!(out, "{answer}")
    };
    let _ = out.flush();
}
