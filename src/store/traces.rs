//! Finished per-stream traces (`trace.fetch` after the in-memory copy is gone or the process
//! restarted). One row per trace, written once when its stream finishes; the body is the
//! `{trace, spans, events}` object exactly as `trace.fetch` returns it, already bounded by
//! the in-memory limits (`agent::trace::MAX_EVENTS`, `PAYLOAD_CHARS`).

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde_json::Value;

use super::error::StoreError;

/// One finished trace as stored.
#[derive(Debug, Clone)]
pub struct TraceRow {
    pub trace_id: String,
    pub record_id: String,
    pub status: String,
    pub created_at: String,
    /// `{trace, spans, events}` as `trace.fetch` answers.
    pub body: Value,
}

/// Inserts the trace; a second write of the same id replaces it (a trace is written once,
/// so this only matters if a stream is ever finished twice).
pub fn put(tx: &Transaction<'_>, t: &TraceRow) -> Result<(), StoreError> {
    let body = serde_json::to_string(&t.body)?;
    tx.execute(
        "INSERT OR REPLACE INTO traces (trace_id, record_id, status, created_at, body) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![t.trace_id, t.record_id, t.status, t.created_at, body],
    )?;
    Ok(())
}

/// The stored `{trace, spans, events}`; `None` when unknown. A body that no longer parses
/// reads as unknown, with a `warn` naming the trace (tolerant reads, docs/store.md).
pub fn get(conn: &Connection, trace_id: &str) -> Result<Option<Value>, StoreError> {
    let body: Option<String> = conn
        .query_row(
            "SELECT body FROM traces WHERE trace_id = ?1",
            [trace_id],
            |r| r.get(0),
        )
        .optional()?;
    Ok(body.and_then(|b| match serde_json::from_str(&b) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!("trace {trace_id}: skipping corrupt stored trace: {e}");
            None
        }
    }))
}
