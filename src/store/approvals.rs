//! Approval rules the host made permanent (`allow_always` / `deny_always`): one row per
//! (tool name, category), the latest decision wins. `approval.list` / `approval.clear`.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::error::StoreError;

/// One stored rule (`approval.list`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRule {
    pub tool_name: String,
    pub category: String,
    /// `allow_always` or `deny_always`.
    pub decision: String,
    pub created_at: String,
}

pub fn put(tx: &Connection, r: &ApprovalRule) -> Result<(), StoreError> {
    tx.execute(
        "INSERT OR REPLACE INTO approval_rules (tool_name, category, decision, created_at) \
         VALUES (?1, ?2, ?3, ?4)",
        params![r.tool_name, r.category, r.decision, r.created_at],
    )?;
    Ok(())
}

pub fn get(conn: &Connection, tool: &str, category: &str) -> Result<Option<String>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT decision FROM approval_rules WHERE tool_name = ?1 AND category = ?2",
            params![tool, category],
            |r| r.get(0),
        )
        .optional()?)
}

pub fn list(conn: &Connection) -> Result<Vec<ApprovalRule>, StoreError> {
    let mut st = conn.prepare(
        "SELECT tool_name, category, decision, created_at FROM approval_rules \
         ORDER BY tool_name, category",
    )?;
    let rows = st.query_map([], |r| {
        Ok(ApprovalRule {
            tool_name: r.get(0)?,
            category: r.get(1)?,
            decision: r.get(2)?,
            created_at: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Removes the rules matching both filters (an absent filter matches all); returns how many.
pub fn clear(
    tx: &Connection,
    tool: Option<&str>,
    category: Option<&str>,
) -> Result<usize, StoreError> {
    Ok(tx.execute(
        "DELETE FROM approval_rules WHERE (?1 IS NULL OR tool_name = ?1) \
         AND (?2 IS NULL OR category = ?2)",
        params![tool, category],
    )?)
}
