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
/// so this only matters if a stream is ever finished twice). Returns the body's size.
pub fn put(tx: &Transaction<'_>, t: &TraceRow) -> Result<usize, StoreError> {
    let body = serde_json::to_string(&t.body)?;
    tx.execute(
        "INSERT OR REPLACE INTO traces (trace_id, record_id, status, created_at, body) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![t.trace_id, t.record_id, t.status, t.created_at, body],
    )?;
    Ok(body.len())
}

/// Retention: removes traces created before `older_than` (an ISO 8601 UTC time, as
/// `created_at` is written), then all but the newest `keep`. Returns how many went.
pub fn prune(tx: &Transaction<'_>, older_than: &str, keep: usize) -> Result<usize, StoreError> {
    let by_age = tx.execute("DELETE FROM traces WHERE created_at < ?1", [older_than])?;
    let by_count = tx.execute(
        "DELETE FROM traces WHERE trace_id IN (SELECT trace_id FROM traces \
         ORDER BY created_at DESC, trace_id DESC LIMIT -1 OFFSET ?1)",
        [i64::try_from(keep).unwrap_or(i64::MAX)],
    )?;
    Ok(by_age + by_count)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, created_at: &str) -> TraceRow {
        TraceRow {
            trace_id: id.into(),
            record_id: "r".into(),
            status: "completed".into(),
            created_at: created_at.into(),
            body: serde_json::json!({}),
        }
    }

    #[test]
    fn prune_removes_old_traces_then_all_but_the_newest() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE traces (trace_id TEXT PRIMARY KEY, record_id TEXT NOT NULL, \
             status TEXT NOT NULL, created_at TEXT NOT NULL, body TEXT NOT NULL);",
        )
        .unwrap();
        let tx = conn.transaction().unwrap();
        for (id, at) in [
            ("old", "2026-01-01T00:00:00.000Z"),
            ("a", "2026-11-01T00:00:00.000Z"),
            ("b", "2026-11-02T00:00:00.000Z"),
            ("c", "2026-11-03T00:00:00.000Z"),
        ] {
            put(&tx, &row(id, at)).unwrap();
        }
        // By age: "old" goes; by count: of a, b, c the newest two stay.
        assert_eq!(prune(&tx, "2026-06-01T00:00:00.000Z", 2).unwrap(), 2);
        let left: Vec<String> = tx
            .prepare("SELECT trace_id FROM traces ORDER BY trace_id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(left, ["b", "c"]);
        assert_eq!(prune(&tx, "2026-06-01T00:00:00.000Z", 2).unwrap(), 0);
    }
}
