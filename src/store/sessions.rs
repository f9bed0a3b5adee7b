//! Agent sessions: one row per `sessionId`, upserted whole.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;

use super::error::StoreError;

/// A session row (`protocol::session::AgentSession` on the wire).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSession {
    pub session_id: String,
    pub user_id: String,
    pub project_id: Option<String>,
    pub chat_id: String,
    pub current_stage: String,
    pub next_stage: Option<String>,
    pub scenario: Option<String>,
    pub stage_data: Option<Value>,
    pub is_active: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// What `create` writes; the store stamps the times.
#[derive(Debug, Clone)]
pub struct NewSession {
    pub session_id: String,
    pub user_id: String,
    pub project_id: Option<String>,
    pub chat_id: String,
    pub current_stage: String,
    pub next_stage: Option<String>,
    pub scenario: Option<String>,
    pub stage_data: Option<Value>,
    pub is_active: bool,
}

#[derive(Debug, Clone, Default)]
pub struct SessionFilter {
    pub user_id: Option<String>,
    pub chat_id: Option<String>,
    pub active_only: bool,
}

const COLUMNS: &str = "session_id, user_id, project_id, chat_id, current_stage, next_stage, \
                       scenario, stage_data, is_active, created_at, updated_at";

fn from_row(r: &Row<'_>) -> rusqlite::Result<AgentSession> {
    let stage_data: Option<String> = r.get(7)?;
    Ok(AgentSession {
        session_id: r.get(0)?,
        user_id: r.get(1)?,
        project_id: r.get(2)?,
        chat_id: r.get(3)?,
        current_stage: r.get(4)?,
        next_stage: r.get(5)?,
        scenario: r.get(6)?,
        // A hand-edited, unparsable stageData reads as absent rather than hiding the row.
        stage_data: stage_data.and_then(|s| serde_json::from_str(&s).ok()),
        is_active: r.get(8)?,
        created_at: r.get(9)?,
        updated_at: r.get(10)?,
    })
}

/// Insert or overwrite; an overwrite keeps the original `createdAt`.
pub fn upsert(conn: &Connection, s: &NewSession, now: &str) -> Result<AgentSession, StoreError> {
    let stage_data = s.stage_data.as_ref().map(Value::to_string);
    conn.execute(
        "INSERT INTO sessions (session_id, user_id, project_id, chat_id, current_stage,
                               next_stage, scenario, stage_data, is_active, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)
         ON CONFLICT(session_id) DO UPDATE SET
            user_id = excluded.user_id, project_id = excluded.project_id,
            chat_id = excluded.chat_id, current_stage = excluded.current_stage,
            next_stage = excluded.next_stage, scenario = excluded.scenario,
            stage_data = excluded.stage_data, is_active = excluded.is_active,
            updated_at = excluded.updated_at",
        params![
            s.session_id,
            s.user_id,
            s.project_id,
            s.chat_id,
            s.current_stage,
            s.next_stage,
            s.scenario,
            stage_data,
            s.is_active,
            now
        ],
    )?;
    get(conn, &s.session_id)?.ok_or_else(|| StoreError::SessionNotFound(s.session_id.clone()))
}

pub fn get(conn: &Connection, id: &str) -> Result<Option<AgentSession>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM sessions WHERE session_id = ?1");
    Ok(conn.query_row(&sql, [id], from_row).optional()?)
}

/// Oldest first (insertion order).
pub fn list(conn: &Connection, f: &SessionFilter) -> Result<Vec<AgentSession>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM sessions
         WHERE (?1 IS NULL OR user_id = ?1) AND (?2 IS NULL OR chat_id = ?2)
           AND (?3 = 0 OR is_active = 1)
         ORDER BY rowid"
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params![f.user_id, f.chat_id, f.active_only], from_row)?;
    let mut out = Vec::new();
    for row in rows {
        match row {
            Ok(s) => out.push(s),
            // Tolerant: one damaged row is reported and skipped, never hides the rest.
            Err(e) => tracing::warn!("skipping an unreadable session row: {e}"),
        }
    }
    Ok(out)
}
