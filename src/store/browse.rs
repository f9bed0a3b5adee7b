//! Browsing the store (`outrigger inspect`): a page of records with what a list shows of
//! each, filtered by a search text. Read-only.

use rusqlite::{Connection, params};

use super::error::StoreError;

/// Characters of a record's title (its fork label or first user message).
pub const TITLE_CHARS: usize = 120;

/// One record as a session list shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordSummary {
    pub record_id: String,
    pub label: Option<String>,
    pub source_record_id: Option<String>,
    pub source_until_seq: Option<i64>,
    /// The fork label, else the first user message (≤ `TITLE_CHARS`), else the record id.
    pub title: String,
    pub created_at: String,
    /// When its last entry was written.
    pub updated_at: String,
    pub entry_count: u64,
    pub trace_count: u64,
}

/// Whether `text` contains `needle` (already lowercased), ignoring case in any script.
fn contains_folded(text: &str, needle: &str) -> bool {
    text.to_lowercase().contains(needle)
}

/// `text_contains(text, needle)` for the search: SQLite's own LIKE folds ASCII only.
fn register_search(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function(
        "text_contains",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let text = ctx.get::<Option<String>>(0)?;
            let needle = ctx.get::<String>(1)?;
            Ok(text.is_some_and(|t| contains_folded(&t, &needle)))
        },
    )
}

fn title_of(label: Option<&str>, first_user: Option<String>, record_id: &str) -> String {
    let text = label
        .map(str::to_string)
        .or(first_user)
        .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| record_id.to_string());
    if text.chars().count() <= TITLE_CHARS {
        return text;
    }
    let cut: String = text.chars().take(TITLE_CHARS - 1).collect();
    format!("{cut}…")
}

/// Records whose id, label or any stored message text contains `query` (ignoring case),
/// newest activity first; returns the page and whether more follow it. Message text is
/// the `content` (or a part's `text`) of every stored message, seeds included, never the
/// JSON around it.
pub fn records(
    conn: &Connection,
    query: Option<&str>,
    limit: usize,
    offset: usize,
) -> Result<(Vec<RecordSummary>, bool), StoreError> {
    let needle = query.filter(|q| !q.is_empty()).map(str::to_lowercase);
    register_search(conn)?;
    let mut q = conn.prepare(
        "SELECT r.record_id, r.label, r.source_record_id, r.source_until_seq, r.created_at, \
           (SELECT max(e.created_at) FROM entries e WHERE e.record_id = r.record_id) AS updated, \
           (SELECT count(*) FROM entries e WHERE e.record_id = r.record_id), \
           (SELECT count(*) FROM traces t WHERE t.record_id = r.record_id), \
           (SELECT json_extract(e.body, '$.message.content') FROM entries e \
              WHERE e.record_id = r.record_id AND e.kind = 'user' ORDER BY e.seq LIMIT 1) \
         FROM records r \
         WHERE ?1 IS NULL OR text_contains(r.record_id, ?1) OR text_contains(r.label, ?1) \
           OR EXISTS (SELECT 1 FROM entries e, json_tree(e.body) t \
                      WHERE e.record_id = r.record_id AND t.key IN ('content', 'text') \
                        AND t.type = 'text' AND text_contains(t.atom, ?1)) \
         ORDER BY coalesce(updated, r.created_at) DESC, r.record_id \
         LIMIT ?2 OFFSET ?3",
    )?;
    let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    // One more than asked: tells whether another page follows.
    let rows = q.query_map(
        params![needle, as_i64(limit.saturating_add(1)), as_i64(offset)],
        |r| {
            let record_id: String = r.get(0)?;
            let label: Option<String> = r.get(1)?;
            let created_at: String = r.get(4)?;
            let first_user: Option<String> = r
                .get::<_, Option<rusqlite::types::Value>>(8)?
                .and_then(|v| match v {
                    rusqlite::types::Value::Text(t) => Some(t),
                    _ => None,
                });
            Ok(RecordSummary {
                title: title_of(label.as_deref(), first_user, &record_id),
                source_record_id: r.get(2)?,
                source_until_seq: r.get(3)?,
                updated_at: r
                    .get::<_, Option<String>>(5)?
                    .unwrap_or_else(|| created_at.clone()),
                entry_count: r.get::<_, i64>(6)?.try_into().unwrap_or(0),
                trace_count: r.get::<_, i64>(7)?.try_into().unwrap_or(0),
                created_at,
                label,
                record_id,
            })
        },
    )?;
    let mut out = rows.collect::<Result<Vec<_>, _>>()?;
    let more = out.len() > limit;
    out.truncate(limit);
    Ok((out, more))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_folds_case_in_any_script() {
        assert!(contains_folded("Ask Émilie ÅNGSTRÖM", "émilie ångström"));
        assert!(contains_folded("50%_a\\b", "%_a\\"));
        assert!(!contains_folded("abc", "abd"));
    }

    #[test]
    fn titles_prefer_the_label_and_are_bounded() {
        assert_eq!(title_of(Some("try B"), Some("hi".into()), "r"), "try B");
        assert_eq!(
            title_of(None, Some("  hi\n there ".into()), "r"),
            "hi there"
        );
        assert_eq!(title_of(None, None, "r"), "r");
        let long = "é".repeat(500);
        let t = title_of(None, Some(long), "r");
        assert_eq!(t.chars().count(), TITLE_CHARS);
        assert!(t.ends_with('…'));
    }
}
