//! Store glue: messages to and from the record's v3 message shape, and async wrappers that
//! run the blocking store calls off the async workers. Every append is one committed
//! transaction (docs/store.md), so "appended" means "survives a SIGKILL".

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::llm::{Message, Role, ToolCall};
use crate::store::{ItemKind, Projected, Seed, Store, StoreError};

/// ≈ chars / 4 plus a little per message: the reference's heuristic `token_estimate`.
pub fn estimate_tokens(m: &Message) -> u64 {
    let mut chars = m.content.chars().count();
    for c in &m.tool_calls {
        chars += c.name.len() + c.arguments.to_string().len();
    }
    if let Some(r) = &m.reasoning {
        chars += r.chars().count();
    }
    (chars as u64).div_ceil(4) + 4
}

/// A message as the record stores it (§2.9: snake_case keys, text content).
pub fn to_record(m: &Message) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), json!(m.role.as_str()));
    o.insert("content".into(), json!(m.content));
    if let Some(n) = &m.name {
        o.insert("name".into(), json!(n));
    }
    if let Some(id) = &m.tool_call_id {
        o.insert("tool_call_id".into(), json!(id));
    }
    if !m.tool_calls.is_empty() {
        let calls: Vec<Value> = m
            .tool_calls
            .iter()
            .map(|c| {
                let mut o = json!({"id": c.id, "name": c.name, "arguments": c.arguments});
                // Vendor data the call must be replayed with (Gemini's thought signature).
                if let Some(x) = &c.extra_content {
                    o["extra_content"] = x.clone();
                }
                o
            })
            .collect();
        o.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(r) = &m.reasoning {
        o.insert("reasoning".into(), json!(r));
    }
    if let Some(d) = &m.reasoning_details {
        o.insert("reasoning_details".into(), d.clone());
    }
    if !m.parts.is_empty() {
        // A stored image keeps its reference, not its bytes (`images`).
        let parts: Vec<Value> = m
            .parts
            .iter()
            .map(|p| {
                let mut p = p.clone();
                if p.url
                    .as_deref()
                    .is_some_and(|u| u.starts_with(super::images::SCHEME))
                {
                    p.data = None;
                }
                serde_json::to_value(p).unwrap_or(Value::Null)
            })
            .collect();
        o.insert("parts".into(), Value::Array(parts));
    }
    Value::Object(o)
}

/// Content as text: a string, or the text parts of a part list (older writers).
fn content_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// A record message back into a `Message`; `None` for an unknown role.
pub fn from_record(v: &Value) -> Option<Message> {
    let role = Role::parse(v.get("role")?.as_str()?).ok()?;
    let mut m = Message::new(role, content_text(v.get("content")));
    let s = |k: &str, alt: &str| {
        v.get(k)
            .or_else(|| v.get(alt))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    m.name = s("name", "name");
    m.tool_call_id = s("tool_call_id", "toolCallId");
    m.reasoning = s("reasoning", "reasoningContent");
    m.reasoning_details = v.get("reasoning_details").cloned();
    if let Some(Value::Array(parts)) = v.get("parts") {
        m.parts = parts
            .iter()
            .filter_map(|p| serde_json::from_value(p.clone()).ok())
            .collect();
    }
    if let Some(Value::Array(calls)) = v.get("tool_calls").or_else(|| v.get("toolCalls")) {
        m.tool_calls = calls
            .iter()
            .filter_map(|c| {
                Some(ToolCall {
                    id: c.get("id")?.as_str()?.to_string(),
                    name: c.get("name")?.as_str()?.to_string(),
                    arguments: c.get("arguments").cloned().unwrap_or(json!({})),
                    arguments_error: None,
                    extra_content: c
                        .get("extra_content")
                        .or_else(|| c.get("extraContent"))
                        .filter(|x| !x.is_null())
                        .cloned(),
                })
            })
            .collect();
    }
    Some(m)
}

pub fn kind_for(m: &Message) -> ItemKind {
    match m.role {
        Role::System => ItemKind::System,
        Role::User => ItemKind::User,
        Role::Assistant => ItemKind::Assistant,
        Role::Tool => ItemKind::Tool,
    }
}

async fn blocking<T: Send + 'static>(
    store: &Arc<Store>,
    f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let store = store.clone();
    match crate::blocking::in_place(move || f(&store)).await {
        Ok(r) => r,
        Err(e) => Err(StoreError::Task(e.to_string())),
    }
}

/// `messages` with their kinds, appended in order in one transaction.
pub async fn append_many(
    store: &Arc<Store>,
    record: &str,
    items: &[(ItemKind, &Message)],
) -> Result<Option<i64>, StoreError> {
    let rows: Vec<(ItemKind, Value, u64)> = items
        .iter()
        .map(|(k, m)| (k.clone(), to_record(m), estimate_tokens(m)))
        .collect();
    // A round's appends (its call message, then its results) are a few WAL pages without an
    // fsync: cheaper written right here than handing the worker's other tasks to another
    // thread (`block_in_place`), about two context switches per commit. Long batches and
    // commits that wait for the disk still leave the worker.
    if rows.len() <= INLINE_APPEND_ITEMS && !store.syncs_each_commit() {
        return store.append_items(record, &rows);
    }
    let record = record.to_string();
    blocking(store, move |s| s.append_items(&record, &rows)).await
}

/// Most items an append writes without leaving the async worker (see `append_many`).
const INLINE_APPEND_ITEMS: usize = 16;

pub async fn append_seed(
    store: &Arc<Store>,
    record: &str,
    messages: &[Message],
) -> Result<i64, StoreError> {
    let seed = Seed {
        source: None,
        messages: messages.iter().map(to_record).collect(),
        label: None,
        token_estimate: messages.iter().map(estimate_tokens).sum(),
    };
    let record = record.to_string();
    blocking(store, move |s| s.append_seed(&record, &seed)).await
}

/// The record's visible transcript, or `None` when the record does not exist.
pub async fn projection(
    store: &Arc<Store>,
    record: &str,
) -> Result<Option<Vec<Projected>>, StoreError> {
    let record = record.to_string();
    blocking(store, move |s| {
        if !s.record_exists(&record)? {
            return Ok(None);
        }
        s.projection(&record).map(Some)
    })
    .await
}

pub async fn call<T: Send + 'static>(
    store: &Arc<Store>,
    f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    blocking(store, f).await
}

/// A record's visible transcript as `agent.session.messages` answers it (also what
/// `outrigger inspect` serves): the shape `agent.chat.stream` takes as `messages`
/// (camelCase, `seq` in front), so a host can send the history back unchanged; entries that
/// are no chat message (an unknown role) are left out, as the loop leaves them out of its
/// transcript.
pub fn transcript(
    record_id: String,
    projected: Vec<Projected>,
) -> crate::protocol::session::SessionMessagesResult {
    let messages: Vec<Message> = projected
        .into_iter()
        .filter_map(|e| match from_record(&e.message) {
            Some(mut m) => {
                m.seq = Some(e.seq);
                Some(m)
            }
            None => {
                tracing::warn!(
                    "agent.session.messages: skipping record {} seq {}: role {:?} is not a chat role",
                    record_id,
                    e.seq,
                    e.role()
                );
                None
            }
        })
        .collect();
    crate::protocol::session::SessionMessagesResult {
        record_id,
        messages,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip() {
        let mut m = Message::new(Role::Assistant, "hi");
        m.tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "add".into(),
            arguments: json!({"a": 1}),
            arguments_error: None,
            extra_content: None,
        });
        let v = to_record(&m);
        assert_eq!(v["tool_calls"][0]["name"], "add");
        assert_eq!(from_record(&v).unwrap(), m);
        let parts = json!({"role": "tool", "content": [{"type": "text", "text": "3"}], "tool_call_id": "c1"});
        let t = from_record(&parts).unwrap();
        assert_eq!(
            (t.content.as_str(), t.tool_call_id.as_deref()),
            ("3", Some("c1"))
        );
    }
}
