//! Per-stream traces (`trace.fetch` after the in-memory copy is gone or the process
//! restarted, and `outrigger inspect`). One row per trace: written with status `running` when
//! its stream starts, each span added to `trace_spans` as it finishes (a crash keeps them),
//! and the row replaced by the finished body when the stream ends, which drops those span
//! rows. The body is the `{trace, spans, events}` object exactly as `trace.fetch` returns it,
//! already bounded by the in-memory limits (`agent::trace::MAX_EVENTS`, `PAYLOAD_CHARS`).

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use super::error::StoreError;

/// One finished trace as stored.
#[derive(Debug, Clone)]
pub struct TraceRow {
    pub trace_id: String,
    pub record_id: String,
    pub status: String,
    pub created_at: String,
    /// `{trace, spans, events}` as `trace.fetch` answers, as JSON text (written as it is:
    /// built straight from the live trace, never through a `Value` tree).
    pub body: String,
}

/// One write of the trace writer (`Store::write_traces`).
#[derive(Debug, Clone)]
pub enum TraceWrite {
    /// A trace starts: its header row, status `running`.
    Begin(TraceRow),
    /// A span of a running trace finished (`seq`: its index; `body`: the span as JSON;
    /// `header`: the trace's running body as it is now, `{trace, spans: [], events: []}`,
    /// so counts and tokens read current).
    Span {
        trace_id: String,
        seq: usize,
        body: String,
        header: Option<String>,
    },
    /// The trace finished: its whole body, with retention (`older_than`, `keep`) applied in
    /// the same transaction when given.
    Finish {
        row: TraceRow,
        prune: Option<(String, usize)>,
    },
}

/// What a trace row written again does to the one stored.
enum Conflict {
    Replace,
    Ignore,
}

/// Writes the trace's row: `INSERT OR REPLACE` or `INSERT OR IGNORE` (cached statements, as
/// every statement here: a turn writes traces each round). Returns the body as stored.
fn insert(tx: &Connection, t: &TraceRow, conflict: Conflict) -> Result<String, StoreError> {
    let sql = match conflict {
        Conflict::Replace => {
            "INSERT OR REPLACE INTO traces (trace_id, record_id, status, created_at, body) \
             VALUES (?1, ?2, ?3, ?4, ?5)"
        }
        Conflict::Ignore => {
            "INSERT OR IGNORE INTO traces (trace_id, record_id, status, created_at, body) \
             VALUES (?1, ?2, ?3, ?4, ?5)"
        }
    };
    tx.prepare_cached(sql)?.execute(params![
        t.trace_id,
        t.record_id,
        t.status,
        t.created_at,
        t.body
    ])?;
    Ok(t.body.clone())
}

/// Inserts the trace, replacing a running row of the same id and dropping the span rows it
/// had (the body carries them all now). Returns the body as stored.
pub fn put(tx: &Connection, t: &TraceRow) -> Result<String, StoreError> {
    let body = insert(tx, t, Conflict::Replace)?;
    tx.prepare_cached("DELETE FROM trace_spans WHERE trace_id = ?1")?
        .execute([&t.trace_id])?;
    Ok(body)
}

/// A running trace's first row (its header, no spans yet); ignored when the trace is
/// already stored.
pub fn begin(tx: &Connection, t: &TraceRow) -> Result<(), StoreError> {
    insert(tx, t, Conflict::Ignore).map(|_| ())
}

/// One finished span of a running trace (`seq` is its index in the trace) and the trace's
/// running body (`header`). Written only while the trace's row is still running: a span that
/// arrives after the finished body is already in it.
pub fn put_span(
    tx: &Connection,
    trace_id: &str,
    seq: usize,
    body: &str,
    header: Option<&str>,
) -> Result<(), StoreError> {
    if let Some(header) = header {
        tx.prepare_cached(
            "UPDATE traces SET body = ?2 WHERE trace_id = ?1 AND status = 'running'",
        )?
        .execute(params![trace_id, header])?;
    }
    tx.prepare_cached(
        "INSERT OR REPLACE INTO trace_spans (trace_id, seq, body) \
         SELECT ?1, ?2, ?3 WHERE EXISTS \
         (SELECT 1 FROM traces WHERE trace_id = ?1 AND status = 'running')",
    )?
    .execute(params![
        trace_id,
        i64::try_from(seq).unwrap_or(i64::MAX),
        body
    ])?;
    Ok(())
}

/// Retention: removes traces created before `older_than` (an ISO 8601 UTC time, as
/// `created_at` is written), then all but the newest `keep`. Returns how many went.
pub fn prune(tx: &Connection, older_than: &str, keep: usize) -> Result<usize, StoreError> {
    let by_age = tx.execute("DELETE FROM traces WHERE created_at < ?1", [older_than])?;
    let by_count = tx.execute(
        "DELETE FROM traces WHERE trace_id IN (SELECT trace_id FROM traces \
         ORDER BY created_at DESC, trace_id DESC LIMIT -1 OFFSET ?1)",
        [i64::try_from(keep).unwrap_or(i64::MAX)],
    )?;
    // Spans whose trace went (pruned while running, after a crash).
    tx.execute(
        "DELETE FROM trace_spans WHERE trace_id NOT IN (SELECT trace_id FROM traces)",
        [],
    )?;
    Ok(by_age + by_count)
}

/// The stored `{trace, spans, events}`; `None` when unknown. A running trace's finished
/// spans are read from their own rows. A body that no longer parses reads as unknown, with
/// a `warn` naming the trace (tolerant reads, docs/store.md).
pub fn get(conn: &Connection, trace_id: &str) -> Result<Option<Value>, StoreError> {
    let row: Option<(String, String)> = conn
        .query_row(
            "SELECT status, body FROM traces WHERE trace_id = ?1",
            [trace_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((status, body)) = row else {
        return Ok(None);
    };
    let mut body: Value = match serde_json::from_str(&body) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("trace {trace_id}: skipping corrupt stored trace: {e}");
            return Ok(None);
        }
    };
    if status == "running" {
        let mut q =
            conn.prepare("SELECT body FROM trace_spans WHERE trace_id = ?1 ORDER BY seq")?;
        let spans: Vec<Value> = q
            .query_map([trace_id], |r| r.get::<_, String>(0))?
            .filter_map(|b| b.ok().and_then(|b| serde_json::from_str(&b).ok()))
            .collect();
        // The stored header is the one written at the start: count what is there now.
        body["trace"]["spanCount"] = spans.len().into();
        body["spans"] = Value::Array(spans);
    }
    Ok(Some(body))
}

/// Headers (`trace`) of the traces stored for a record, oldest first, at most `limit`.
pub fn for_record(
    conn: &Connection,
    record_id: &str,
    limit: usize,
) -> Result<Vec<Value>, StoreError> {
    let mut q = conn.prepare(
        "SELECT trace_id, json_extract(body, '$.trace') FROM traces WHERE record_id = ?1 \
         ORDER BY created_at, trace_id LIMIT ?2",
    )?;
    let rows = q.query_map(
        params![record_id, i64::try_from(limit).unwrap_or(i64::MAX)],
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
    )?;
    let mut out = Vec::new();
    for row in rows {
        let (id, body) = row?;
        match serde_json::from_str::<Value>(&body) {
            Ok(mut v) => {
                // A running trace's header is the one written at its start (as `get`).
                if v["status"] == "running" {
                    let n: i64 = conn.query_row(
                        "SELECT count(*) FROM trace_spans WHERE trace_id = ?1",
                        [&id],
                        |r| r.get(0),
                    )?;
                    v["spanCount"] = n.into();
                }
                out.push(v)
            }
            Err(e) => tracing::warn!("trace {id}: skipping corrupt stored trace: {e}"),
        }
    }
    Ok(out)
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
            body: "{}".into(),
        }
    }

    #[test]
    fn prune_removes_old_traces_then_all_but_the_newest() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE traces (trace_id TEXT PRIMARY KEY, record_id TEXT NOT NULL, \
             status TEXT NOT NULL, created_at TEXT NOT NULL, body TEXT NOT NULL); \
             CREATE TABLE trace_spans (trace_id TEXT NOT NULL, seq INTEGER NOT NULL, \
             body TEXT NOT NULL, PRIMARY KEY (trace_id, seq));",
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

    fn with_body(id: &str, status: &str) -> TraceRow {
        TraceRow {
            status: status.into(),
            body: serde_json::json!({"trace": {"traceId": id, "status": status}, "spans": [], "events": []})
                .to_string(),
            ..row(id, "2026-11-01T00:00:00.000Z")
        }
    }

    fn running_body(id: &str, tokens: u64) -> String {
        serde_json::json!({"trace": {"traceId": id, "status": "running", "totalTokens": tokens},
            "spans": [], "events": []})
        .to_string()
    }

    #[test]
    fn a_running_trace_reads_with_its_finished_spans_until_the_whole_trace_replaces_them() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::store::schema::ensure(&mut conn).unwrap();
        let tx = conn.transaction().unwrap();
        begin(&tx, &with_body("t", "running")).unwrap();
        // Out of order on purpose: reads come back by seq (10 after 9, not after 1).
        put_span(
            &tx,
            "t",
            10,
            r#"{"spanId": "span_0011"}"#,
            Some(&running_body("t", 7)),
        )
        .unwrap();
        put_span(
            &tx,
            "t",
            9,
            r#"{"spanId": "span_0010"}"#,
            Some(&running_body("t", 5)),
        )
        .unwrap();
        let got = get(&tx, "t").unwrap().unwrap();
        assert_eq!(got["spans"][0]["spanId"], "span_0010");
        assert_eq!(got["spans"][1]["spanId"], "span_0011");
        // The header is the last one written, its span count what is stored.
        assert_eq!(got["trace"]["totalTokens"], 5);
        assert_eq!(got["trace"]["spanCount"], 2);
        assert_eq!(for_record(&tx, "r", 10).unwrap()[0]["spanCount"], 2);
        // A second begin (never expected) does not reset it.
        begin(&tx, &with_body("t", "running")).unwrap();
        assert_eq!(
            get(&tx, "t").unwrap().unwrap()["spans"]
                .as_array()
                .unwrap()
                .len(),
            2
        );

        let mut done = with_body("t", "completed");
        done.body = serde_json::json!({"trace": {"traceId": "t", "status": "completed"},
            "spans": [{"spanId": "span_0001"}], "events": []})
        .to_string();
        put(&tx, &done).unwrap();
        let got = get(&tx, "t").unwrap().unwrap();
        assert_eq!(got["spans"], serde_json::json!([{"spanId": "span_0001"}]));
        assert_eq!(got["trace"]["status"], "completed");
        let left: i64 = tx
            .query_row("SELECT count(*) FROM trace_spans", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0);
        // A span that arrives after the finish is already in the body: not stored.
        put_span(&tx, "t", 3, "{}", Some(&running_body("t", 9))).unwrap();
        let left: i64 = tx
            .query_row("SELECT count(*) FROM trace_spans", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0);
        assert_eq!(for_record(&tx, "r", 10).unwrap()[0]["status"], "completed");
    }

    #[test]
    fn pruning_a_running_trace_drops_its_spans() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::store::schema::ensure(&mut conn).unwrap();
        let tx = conn.transaction().unwrap();
        begin(&tx, &with_body("t", "running")).unwrap();
        put_span(&tx, "t", 0, "{}", Some(&running_body("t", 1))).unwrap();
        assert_eq!(prune(&tx, "2026-12-01T00:00:00.000Z", 10).unwrap(), 1);
        let left: i64 = tx
            .query_row("SELECT count(*) FROM trace_spans", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0);
    }
}
