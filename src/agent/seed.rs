//! A turn's starting transcript: resume (the record verbatim, dangling calls closed),
//! host-history reconciliation (§2.9), and the file tools' read state rebuilt from the
//! record's tool results.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use super::persist;
use crate::llm::{Message, Role};
use crate::store::{Boundary, BoundaryAction, Projected, Store, StoreError};

/// The content of the synthetic result that closes a call the record never answered.
pub const INTERRUPTED: &str = "{\"success\":false,\"error\":\"interrupted: the turn ended before this tool call produced a result\"}";

/// What a turn starts from.
pub struct Start {
    pub items: Vec<Message>,
    /// `items[..persisted]` are already in the record.
    pub persisted: usize,
    /// `Some(k)`: `items[..k]` are exactly what reading the record gives and every item after
    /// them is appended to it, so once the turn has committed everything its items are the
    /// record's transcript (worth keeping in memory for the next turn). `None` when the turn
    /// holds items the record does not (a replaced system prompt, a synthetic close in the
    /// middle, a re-seed).
    pub canonical: Option<usize>,
    /// What the host had seen of the record before this turn (`Store::host_history`), when
    /// the transcript differs from it (after a compaction); kept with the transcript at the
    /// end of the turn, so the next re-sent history is matched without reading the record.
    pub seen: Option<Vec<Message>>,
}

impl Start {
    /// `items`, of which the first `persisted` are already in the record as they are.
    pub fn stored(items: Vec<Message>, persisted: usize) -> Start {
        Start {
            items,
            persisted,
            canonical: Some(persisted),
            seen: None,
        }
    }
}

pub fn messages_of(p: &[Projected]) -> Vec<Message> {
    p.iter()
        .filter_map(|e| persist::from_record(&e.message))
        .collect()
}

/// Closes every tool call without a result with a synthetic "interrupted" tool message,
/// right after its answered siblings. Returns the index of the first inserted message.
pub fn close_dangling(items: &mut Vec<Message>) -> Option<usize> {
    let answered: HashSet<String> = items
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| m.tool_call_id.clone())
        .collect();
    let mut first = None;
    let mut i = 0;
    while i < items.len() {
        if items[i].role == Role::Assistant && !items[i].tool_calls.is_empty() {
            let missing: Vec<(String, String)> = items[i]
                .tool_calls
                .iter()
                .filter(|c| !answered.contains(&c.id))
                .map(|c| (c.id.clone(), c.name.clone()))
                .collect();
            let mut at = i + 1;
            while at < items.len() && items[at].role == Role::Tool {
                at += 1;
            }
            for (id, name) in missing {
                let mut m = Message::new(Role::Tool, INTERRUPTED);
                m.tool_call_id = Some(id);
                m.name = Some(name);
                items.insert(at, m);
                first.get_or_insert(at);
                at += 1;
            }
            i = at;
        } else {
            i += 1;
        }
    }
    first
}

/// `resume: true`: the projection becomes the seed; a `systemPrompt` replaces the leading
/// system message. Synthetic closes at the tail are recorded (the record continues
/// linearly); ones in the middle stay in memory so record order never diverges.
pub fn resume(mut items: Vec<Message>, system_prompt: Option<&str>) -> Start {
    let first = close_dangling(&mut items);
    let mut persisted = match first {
        // Inserted at the tail: new items to append, in record order.
        Some(i) if items[i..].iter().all(|m| m.role == Role::Tool) => i,
        _ => items.len(),
    };
    // A close in the middle stays in memory only.
    let mut canonical = match first {
        None => Some(persisted),
        Some(i) if i == persisted => Some(i),
        Some(_) => None,
    };
    if let Some(sp) = system_prompt {
        match items.first_mut() {
            Some(m) if m.role == Role::System => {
                if m.content != sp {
                    m.content = sp.to_string();
                    canonical = None;
                }
            }
            _ => {
                items.insert(0, Message::new(Role::System, sp));
                persisted += 1;
                canonical = None;
            }
        }
    }
    Start {
        items,
        persisted,
        canonical,
        seen: None,
    }
}

fn same(a: &Message, b: &Message) -> bool {
    a.role == b.role && a.content == b.content && a.tool_call_id == b.tool_call_id
}

/// Where the host's new messages start when `host` extends `base`: exactly (every message
/// the same), or by the host-visible view (user/system exact, assistant text by prefix, tool
/// results and empty assistant messages not compared).
fn delta_start(base: &[Message], host: &[Message]) -> Option<usize> {
    if host.len() >= base.len() && base.iter().zip(host).all(|(a, b)| same(a, b)) {
        return Some(base.len());
    }
    let visible: Vec<&Message> = base
        .iter()
        .filter(|m| match m.role {
            Role::System | Role::User => true,
            Role::Assistant => !m.content.is_empty(),
            Role::Tool => false,
        })
        .collect();
    let matches = host.len() >= visible.len()
        && visible.iter().zip(host).all(|(a, b)| {
            a.role == b.role
                && match a.role {
                    Role::Assistant => {
                        a.content.starts_with(&b.content) || b.content.starts_with(&a.content)
                    }
                    _ => a.content == b.content,
                }
        });
    matches.then_some(visible.len())
}

/// Host-history reconciliation. `host` is what the host sent (system prompt included).
/// An extension of the record's transcript (exact, or by the host-visible view) → the delta
/// is appended. After a compaction the transcript holds a summary the host never saw, so a
/// host re-sending its whole history is also matched against everything it has seen
/// (`Store::host_history`): the delta goes after the compacted transcript, with no re-seed
/// and no second compaction. Otherwise a `host_revision` boundary and a re-seed with the
/// host's messages.
pub async fn reconcile(
    store: &Arc<Store>,
    record: &str,
    mine: Vec<Message>,
    host: Vec<Message>,
    seen: Option<Vec<Message>>,
) -> Result<Start, StoreError> {
    if mine.is_empty() {
        return Ok(Start {
            items: host,
            persisted: 0,
            canonical: Some(0),
            seen: None,
        });
    }
    let delta =
        |from: usize, seen: Option<Vec<Message>>, mine: Vec<Message>, host: Vec<Message>| {
            let persisted = mine.len();
            let mut items = mine;
            items.extend(host.into_iter().skip(from));
            Start {
                items,
                persisted,
                canonical: Some(persisted),
                seen,
            }
        };
    if let Some(k) = delta_start(&mine, &host) {
        return Ok(delta(k, None, mine, host));
    }
    // What the host has seen: kept by the last turn (`seen`, current for this version of
    // the record), else read from the record.
    let seen = match seen {
        Some(s) => s,
        None => {
            let rec = record.to_string();
            messages_of(&persist::call(store, move |s| s.host_history(&rec)).await?)
        }
    };
    if let Some(k) = delta_start(&seen, &host) {
        // The host's new messages join `seen` at the end of the turn, with the turn's items.
        return Ok(delta(k, Some(seen), mine, host));
    }
    let rec = record.to_string();
    persist::call(store, move |s| {
        s.append_boundary(
            &rec,
            &Boundary {
                reason: "the host's messages diverge from the record".into(),
                action: BoundaryAction::HostRevision,
                turn_id: None,
                replacement_count: None,
                pre_tokens: None,
                post_tokens: None,
                compaction_id: None,
            },
        )
    })
    .await?;
    persist::append_seed(store, record, &host).await?;
    let n = host.len();
    Ok(Start {
        items: host,
        persisted: n,
        canonical: None,
        seen: None,
    })
}

/// `(path, version)` pairs from the record's successful file-tool results
/// (`data.path` + `data.version`, and `data.versions` maps for multi-file edits).
pub fn read_state(items: &[Message]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in items.iter().filter(|m| m.role == Role::Tool) {
        let Ok(v) = serde_json::from_str::<Value>(&m.content) else {
            continue;
        };
        if v.get("success") != Some(&Value::Bool(true)) {
            continue;
        }
        let Some(d) = v.get("data") else { continue };
        if let (Some(p), Some(ver)) = (
            d.get("path").and_then(Value::as_str),
            d.get("version").and_then(Value::as_str),
        ) {
            out.push((p.to_string(), ver.to_string()));
        }
        if let Some(Value::Object(map)) = d.get("versions") {
            for (p, ver) in map {
                if let Some(ver) = ver.as_str() {
                    out.push((p.clone(), ver.to_string()));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "f".into(),
            arguments: json!({}),
            arguments_error: None,
            extra_content: None,
        }
    }

    #[test]
    fn dangling_calls_are_closed_after_answered_siblings() {
        let mut a = Message::new(Role::Assistant, "");
        a.tool_calls = vec![call("c1"), call("c2")];
        let mut t1 = Message::new(Role::Tool, "ok");
        t1.tool_call_id = Some("c1".into());
        let mut items = vec![Message::new(Role::User, "u"), a, t1];
        assert_eq!(close_dangling(&mut items), Some(3));
        assert_eq!(items[3].tool_call_id.as_deref(), Some("c2"));
        assert!(items[3].content.contains("interrupted"));
        assert_eq!(close_dangling(&mut items), None);
    }

    #[test]
    fn resume_records_tail_closes_and_replaces_the_system_prompt() {
        let mut a = Message::new(Role::Assistant, "");
        a.tool_calls = vec![call("c1")];
        let proj: Vec<Projected> = [
            Message::new(Role::System, "old"),
            Message::new(Role::User, "u"),
            a,
        ]
        .iter()
        .enumerate()
        .map(|(i, m)| Projected {
            seq: i as i64,
            kind: "x".into(),
            message: persist::to_record(m),
        })
        .collect();
        let s = resume(messages_of(&proj), Some("new"));
        assert_eq!(s.items.len(), 4);
        assert_eq!(s.persisted, 3);
        assert_eq!(s.items[0].content, "new");
    }

    #[test]
    fn read_state_from_results() {
        let mut t = Message::new(
            Role::Tool,
            json!({"success": true, "data": {"path": "a.txt", "version": "v1"}}).to_string(),
        );
        t.tool_call_id = Some("c".into());
        let bad = Message::new(
            Role::Tool,
            json!({"success": false, "data": {"path": "b", "version": "v"}}).to_string(),
        );
        assert_eq!(
            read_state(&[t, bad]),
            vec![("a.txt".to_string(), "v1".to_string())]
        );
    }
}
