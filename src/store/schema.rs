//! The schema, created on first open, and the connection settings. Opening never scans
//! data: boot stays at about a millisecond whatever the database holds.

use rusqlite::{Connection, OptionalExtension};

use super::error::StoreError;

/// Bump when the tables change; `open` refuses databases from a newer build.
pub const SCHEMA_VERSION: i64 = 4;

const DDL: &str = "
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    session_id    TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL,
    chat_id       TEXT NOT NULL,
    project_id    TEXT,
    current_stage TEXT NOT NULL,
    next_stage    TEXT,
    scenario      TEXT,
    stage_data    TEXT,
    is_active     INTEGER NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_user ON sessions(user_id);
CREATE INDEX IF NOT EXISTS sessions_chat ON sessions(chat_id);
CREATE TABLE IF NOT EXISTS records (
    record_id        TEXT PRIMARY KEY,
    source_record_id TEXT,
    source_until_seq INTEGER,
    label            TEXT,
    next_seq         INTEGER NOT NULL,
    created_at       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_source ON records(source_record_id);
CREATE TABLE IF NOT EXISTS entries (
    record_id      TEXT NOT NULL,
    seq            INTEGER NOT NULL,
    entry          TEXT NOT NULL,
    kind           TEXT NOT NULL,
    token_estimate INTEGER NOT NULL DEFAULT 0,
    body           TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    PRIMARY KEY (record_id, seq)
) WITHOUT ROWID;
-- Version 2: finished per-stream traces (`trace.fetch` across restarts).
CREATE TABLE IF NOT EXISTS traces (
    trace_id   TEXT PRIMARY KEY,
    record_id  TEXT NOT NULL,
    status     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    body       TEXT NOT NULL
);
-- Version 3: approval decisions the host made permanent (`allow_always` / `deny_always`).
CREATE TABLE IF NOT EXISTS approval_rules (
    tool_name  TEXT NOT NULL,
    category   TEXT NOT NULL,
    decision   TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (tool_name, category)
) WITHOUT ROWID;
-- Version 4: the spans of a trace still running, each written as it finishes, so a crash
-- keeps them; the finished trace's body replaces them.
CREATE TABLE IF NOT EXISTS trace_spans (
    trace_id TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    body     TEXT NOT NULL,
    PRIMARY KEY (trace_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS traces_record ON traces(record_id);
";

/// `synchronous` level: NORMAL survives a process crash (WAL), FULL also a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    Normal,
    Full,
}

impl SyncMode {
    pub fn parse(s: &str) -> Option<SyncMode> {
        match s.to_ascii_lowercase().as_str() {
            "normal" => Some(SyncMode::Normal),
            "full" => Some(SyncMode::Full),
            _ => None,
        }
    }

    fn pragma(self) -> &'static str {
        match self {
            SyncMode::Normal => "NORMAL",
            SyncMode::Full => "FULL",
        }
    }
}

pub fn configure(conn: &Connection, sync: SyncMode) -> Result<(), StoreError> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", sync.pragma())?;
    // We are the only writer (the lease), so waits only cover external readers.
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    // Room for every statement a turn caches (rusqlite keeps 16 by default, least recently
    // used out), so none is parsed again each round.
    conn.set_prepared_statement_cache_capacity(32);
    Ok(())
}

/// Creates the tables when missing and upgrades an older database in place (every version
/// so far only adds tables, which the `IF NOT EXISTS` DDL above already did); returns the
/// schema version now recorded. A newer version is returned untouched for `open` to refuse.
pub fn ensure(conn: &mut Connection) -> Result<i64, StoreError> {
    let tx = conn.transaction()?;
    tx.execute_batch(DDL)?;
    let found: Option<String> = tx
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    let version = match found {
        Some(v) => {
            let found = v.trim().parse::<i64>().unwrap_or(0);
            if found < SCHEMA_VERSION {
                tx.execute(
                    "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
                    [SCHEMA_VERSION.to_string()],
                )?;
                SCHEMA_VERSION
            } else {
                found
            }
        }
        None => {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?1)",
                [SCHEMA_VERSION.to_string()],
            )?;
            SCHEMA_VERSION
        }
    };
    tx.commit()?;
    Ok(version)
}
