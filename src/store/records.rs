//! Append-only history records: entries keyed by `(record_id, seq)`, one transaction per
//! append, and the tolerant reader that turns them back into a transcript.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value, json};

use super::error::StoreError;

/// The entry format written (reference §2.9 "v3"); older rows (no `v`, or 2) read fine.
pub const ENTRY_FORMAT: i64 = 3;

/// What an item entry holds (`kind` of a message entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemKind {
    System,
    User,
    Assistant,
    Tool,
    SteerInject,
    SkillsCatalog,
    /// `loop.*` bookkeeping messages, e.g. `loop.abort_skip`; the string is the full kind.
    Loop(String),
}

impl ItemKind {
    pub fn as_str(&self) -> &str {
        match self {
            ItemKind::System => "system",
            ItemKind::User => "user",
            ItemKind::Assistant => "assistant",
            ItemKind::Tool => "tool",
            ItemKind::SteerInject => "steer.inject",
            ItemKind::SkillsCatalog => "skills.catalog",
            ItemKind::Loop(s) => s,
        }
    }

    pub fn parse(s: &str) -> Option<ItemKind> {
        Some(match s {
            "system" => ItemKind::System,
            "user" => ItemKind::User,
            "assistant" => ItemKind::Assistant,
            "tool" => ItemKind::Tool,
            "steer.inject" => ItemKind::SteerInject,
            "skills.catalog" => ItemKind::SkillsCatalog,
            s if s.starts_with("loop.") && s.len() > 5 => ItemKind::Loop(s.to_string()),
            _ => return None,
        })
    }

    /// The kind a plain message gets from its role (`user` → `User`, …).
    pub fn for_role(role: &str) -> Option<ItemKind> {
        match role {
            "system" | "user" | "assistant" | "tool" => ItemKind::parse(role),
            _ => None,
        }
    }
}

/// Why the visible transcript restarts (`compaction.boundary` `action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundaryAction {
    Compact,
    OverflowRecovery,
    HostRevision,
    MicroCompact,
}

impl BoundaryAction {
    pub fn as_str(self) -> &'static str {
        match self {
            BoundaryAction::Compact => "compact",
            BoundaryAction::OverflowRecovery => "overflow_recovery",
            BoundaryAction::HostRevision => "host_revision",
            BoundaryAction::MicroCompact => "micro_compact",
        }
    }
}

/// A seed: messages copied in whole, with fork provenance when they came from a record.
#[derive(Debug, Clone, Default)]
pub struct Seed {
    /// `(source_record_id, source_until_seq)`; `None` for a re-seed after a boundary.
    pub source: Option<(String, i64)>,
    pub messages: Vec<Value>,
    /// Branch label stored with a new record; derived from the messages when `None`.
    pub label: Option<String>,
    pub token_estimate: u64,
}

/// A `compaction.boundary`: everything before it leaves the visible transcript.
#[derive(Debug, Clone)]
pub struct Boundary {
    pub reason: String,
    pub action: BoundaryAction,
    pub turn_id: Option<String>,
    pub replacement_count: Option<u64>,
    pub pre_tokens: Option<u64>,
    pub post_tokens: Option<u64>,
    pub compaction_id: Option<String>,
}

/// One entry as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub seq: i64,
    /// `item`, `seed`, `boundary`, `compaction_start`, `compaction_summary`.
    pub entry: String,
    pub kind: String,
    pub token_estimate: u64,
    /// The whole entry object as stored (the §2.9 line).
    pub body: Value,
}

/// A message of the visible transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct Projected {
    /// The entry's seq; every message of a seed carries the seed's seq.
    pub seq: i64,
    pub kind: String,
    pub message: Value,
}

impl Projected {
    pub fn role(&self) -> &str {
        self.message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// A record's provenance row.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordRow {
    pub record_id: String,
    pub source_record_id: Option<String>,
    pub source_until_seq: Option<i64>,
    pub label: Option<String>,
    pub next_seq: i64,
}

impl RecordRow {
    /// Reads a row that selected `record_id, source_record_id, source_until_seq, label,
    /// next_seq`, in that order.
    pub fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RecordRow> {
        Ok(RecordRow {
            record_id: r.get(0)?,
            source_record_id: r.get(1)?,
            source_until_seq: r.get(2)?,
            label: r.get(3)?,
            next_seq: r.get(4)?,
        })
    }
}

pub fn record_row(conn: &Connection, id: &str) -> Result<Option<RecordRow>, StoreError> {
    // Cached statements: these run several times per model round (parsing SQL was 6 % of
    // a long first turn's CPU).
    Ok(conn
        .prepare_cached(
            "SELECT record_id, source_record_id, source_until_seq, label, next_seq
             FROM records WHERE record_id = ?1",
        )?
        .query_row([id], RecordRow::from_row)
        .optional()?)
}

pub fn check_message(message: &Value) -> Result<(), StoreError> {
    match message.get("role") {
        Some(Value::String(r)) if !r.is_empty() => Ok(()),
        _ => Err(StoreError::invalid(
            "message",
            "a message must be an object with a non-empty string `role`",
        )),
    }
}

pub fn check_record_id(id: &str) -> Result<(), StoreError> {
    if id.trim().is_empty() {
        return Err(StoreError::invalid("recordId", "it must not be empty"));
    }
    Ok(())
}

/// What a new record row gets when a seed creates it.
pub struct NewRecord<'a> {
    pub source: Option<&'a (String, i64)>,
    pub label: Option<&'a str>,
}

/// Writes one entry inside the caller's transaction and returns its seq. `reserve` extra
/// seqs stay unused after it (a seed's messages own `seq+1 ..= seq+reserve`, so later
/// items sort after them, as in the reference).
pub fn insert_entry(
    conn: &Connection,
    record_id: &str,
    fields: Map<String, Value>,
    reserve: i64,
    created: Option<NewRecord<'_>>,
    now: &str,
) -> Result<i64, StoreError> {
    check_record_id(record_id)?;
    let seq = next_seq_or_create(conn, record_id, created.as_ref(), now)?;
    let entry = fields
        .get("entry")
        .and_then(Value::as_str)
        .unwrap_or("item")
        .to_string();
    let kind = fields
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let token_estimate = fields
        .get("token_estimate")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    // `entry`, `v`, `seq` lead the object, like the reference's lines.
    let mut body = Map::new();
    body.insert("entry".into(), json!(entry));
    body.insert("v".into(), json!(ENTRY_FORMAT));
    body.insert("seq".into(), json!(seq));
    for (k, v) in fields {
        body.entry(k).or_insert(v);
    }
    let text = serde_json::to_string(&Value::Object(body))?;
    conn.prepare_cached(INSERT_ENTRY)?.execute(params![
        record_id,
        seq,
        entry,
        kind,
        i64::try_from(token_estimate).unwrap_or(i64::MAX),
        text,
        now
    ])?;
    set_next_seq(conn, record_id, seq + 1 + reserve)?;
    Ok(seq)
}

const INSERT_ENTRY: &str =
    "INSERT INTO entries (record_id, seq, entry, kind, token_estimate, body, created_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// The record's next seq, creating the record (with `created`'s provenance) when missing.
fn next_seq_or_create(
    conn: &Connection,
    record_id: &str,
    created: Option<&NewRecord<'_>>,
    now: &str,
) -> Result<i64, StoreError> {
    if let Some(row) = record_row(conn, record_id)? {
        return Ok(row.next_seq);
    }
    let (src, until) = match created.and_then(|c| c.source) {
        Some((s, u)) => (Some(s.as_str()), Some(*u)),
        None => (None, None),
    };
    let label = created.and_then(|c| c.label);
    conn.execute(
        "INSERT INTO records (record_id, source_record_id, source_until_seq, label,
                              next_seq, created_at)
         VALUES (?1, ?2, ?3, ?4, 0, ?5)",
        params![record_id, src, until, label, now],
    )?;
    Ok(0)
}

fn set_next_seq(conn: &Connection, record_id: &str, next: i64) -> Result<(), StoreError> {
    conn.prepare_cached("UPDATE records SET next_seq = ?2 WHERE record_id = ?1")?
        .execute(params![record_id, next])?;
    Ok(())
}

/// An `item` entry's stored body, its fields in the sorted order `insert_entry`'s `Map` writes
/// other entries in; serialised straight from the borrowed message rather than through a
/// cloned `Map` (perf: the clone, the map and its drop were ~2 % of a turn of small rounds).
#[derive(serde::Serialize)]
struct ItemBody<'a> {
    entry: &'static str,
    kind: &'a str,
    message: &'a Value,
    seq: i64,
    token_estimate: u64,
    turn_id: Option<&'a str>,
    v: i64,
}

/// Appends `items` (kind, message, token estimate) as `item` entries of `turn_id` inside the
/// caller's transaction, creating the record when missing: one read of the record's row and
/// one update of its next seq for the batch. Returns the first entry's seq and the record's
/// next seq after them (equal for no items, and then nothing is written).
pub fn insert_items<'a>(
    conn: &Connection,
    record_id: &str,
    items: impl IntoIterator<Item = (&'a ItemKind, &'a Value, u64)>,
    turn_id: Option<&str>,
    now: &str,
) -> Result<(i64, i64), StoreError> {
    check_record_id(record_id)?;
    let mut items = items.into_iter().peekable();
    if items.peek().is_none() {
        let next = record_row(conn, record_id)?.map_or(0, |r| r.next_seq);
        return Ok((next, next));
    }
    let first = next_seq_or_create(conn, record_id, None, now)?;
    let mut insert = conn.prepare_cached(INSERT_ENTRY)?;
    let mut seq = first;
    for (kind, message, tokens) in items {
        let text = serde_json::to_string(&ItemBody {
            entry: "item",
            kind: kind.as_str(),
            message,
            seq,
            token_estimate: tokens,
            turn_id,
            v: ENTRY_FORMAT,
        })?;
        insert.execute(params![
            record_id,
            seq,
            "item",
            kind.as_str(),
            i64::try_from(tokens).unwrap_or(i64::MAX),
            text,
            now
        ])?;
        seq += 1;
    }
    drop(insert);
    set_next_seq(conn, record_id, seq)?;
    Ok((first, seq))
}

pub fn seed_fields(seed: &Seed) -> Map<String, Value> {
    let kinds: Vec<String> = seed
        .messages
        .iter()
        .map(|m| {
            m.get("role")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect();
    let mut m = Map::new();
    m.insert("entry".into(), json!("seed"));
    m.insert("kind".into(), json!("history.seed"));
    m.insert("turn_id".into(), Value::Null);
    m.insert("token_estimate".into(), json!(seed.token_estimate));
    m.insert(
        "source_record_id".into(),
        json!(seed.source.as_ref().map(|s| &s.0)),
    );
    m.insert(
        "source_until_seq".into(),
        json!(seed.source.as_ref().map(|s| s.1)),
    );
    m.insert("messages".into(), json!(seed.messages));
    m.insert("message_kinds".into(), json!(kinds));
    m
}

pub fn boundary_fields(b: &Boundary) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("entry".into(), json!("boundary"));
    m.insert("kind".into(), json!("compaction.boundary"));
    m.insert("turn_id".into(), json!(b.turn_id));
    m.insert("reason".into(), json!(b.reason));
    m.insert("action".into(), json!(b.action.as_str()));
    let optional = [
        ("replacement_count", b.replacement_count),
        ("pre_tokens", b.pre_tokens),
        ("post_tokens", b.post_tokens),
    ];
    for (k, v) in optional {
        if let Some(v) = v {
            m.insert(k.into(), json!(v));
        }
    }
    if let Some(id) = &b.compaction_id {
        m.insert("compaction_id".into(), json!(id));
    }
    m
}

/// All readable entries in seq order. A row that does not parse, or that a newer build
/// wrote, is skipped with a warning naming it: one bad row never hides the rest.
pub fn load(conn: &Connection, record_id: &str) -> Result<Vec<Entry>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, entry, kind, token_estimate, body FROM entries
         WHERE record_id = ?1 ORDER BY seq",
    )?;
    let rows = stmt.query_map([record_id], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, String>(4)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, entry, kind, tokens, text) = match row {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("record {record_id}: skipping an unreadable entry row: {e}");
                continue;
            }
        };
        match parse_body(&entry, &text) {
            Ok(body) => out.push(Entry {
                seq,
                entry,
                kind,
                token_estimate: u64::try_from(tokens).unwrap_or(0),
                body,
            }),
            Err(why) => {
                tracing::warn!("record {record_id}: skipping corrupt entry seq {seq}: {why}");
            }
        }
    }
    Ok(out)
}

fn parse_body(entry: &str, text: &str) -> Result<Value, String> {
    let body: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    if !body.is_object() {
        return Err("not a JSON object".into());
    }
    let v = body.get("v").and_then(Value::as_i64).unwrap_or(1);
    if v > ENTRY_FORMAT {
        return Err(format!(
            "format v{v} is newer than this build's v{ENTRY_FORMAT}"
        ));
    }
    match entry {
        "item" => {
            let msg = body.get("message").ok_or("item without a message")?;
            check_message(msg).map_err(|e| e.to_string())?;
        }
        "seed" => {
            let msgs = body
                .get("messages")
                .and_then(Value::as_array)
                .ok_or("seed without a messages array")?;
            for m in msgs {
                check_message(m).map_err(|e| e.to_string())?;
            }
        }
        _ => {}
    }
    Ok(body)
}

/// The visible transcript: the messages after the last boundary, seeds expanded.
pub fn project(entries: &[Entry]) -> Vec<Projected> {
    expand(entries)
}

/// The messages of `entries` in order, seeds expanded, restarting at each boundary.
fn expand<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Vec<Projected> {
    let mut out = Vec::new();
    for e in entries {
        match e.entry.as_str() {
            "boundary" => out.clear(),
            "item" => {
                if let Some(m) = e.body.get("message") {
                    out.push(Projected {
                        seq: e.seq,
                        kind: e.kind.clone(),
                        message: m.clone(),
                    });
                }
            }
            "seed" => {
                let msgs = e.body.get("messages").and_then(Value::as_array);
                let kinds = e.body.get("message_kinds").and_then(Value::as_array);
                for (i, m) in msgs.into_iter().flatten().enumerate() {
                    let kind = kinds
                        .and_then(|k| k.get(i))
                        .and_then(Value::as_str)
                        .or_else(|| m.get("role").and_then(Value::as_str))
                        .unwrap_or("")
                        .to_string();
                    out.push(Projected {
                        seq: e.seq,
                        kind,
                        message: m.clone(),
                    });
                }
            }
            // compaction_start / compaction_summary are bookkeeping, not messages.
            _ => {}
        }
    }
    out
}

/// Every message the host has seen, in order: the visible transcript as it would be had no
/// compaction happened. A compaction boundary does not restart it (the host never saw the
/// summary) and the seed that follows one (the compacted transcript) is left out; a
/// `host_revision` restarts it with the host's own messages, as in `project`.
pub fn host_history(entries: &[Entry]) -> Vec<Projected> {
    let mut compacted = false;
    let mut kept: Vec<&Entry> = Vec::new();
    for e in entries {
        match e.entry.as_str() {
            "boundary" => {
                if e.body.get("action").and_then(Value::as_str) == Some("host_revision") {
                    kept.clear();
                    compacted = false;
                } else {
                    compacted = true;
                }
            }
            "seed" if compacted => compacted = false,
            "item" | "seed" => kept.push(e),
            _ => {}
        }
    }
    expand(kept)
}

/// The highest seq written to a record, if any.
pub fn last_seq(entries: &[Entry]) -> Option<i64> {
    entries.last().map(|e| e.seq)
}
