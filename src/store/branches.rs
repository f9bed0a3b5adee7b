//! Forks and the branch family: cut points, labels, lineage, children and the bounded tree.

use std::collections::HashSet;

use rusqlite::Connection;
use serde_json::Value;

use super::error::StoreError;
use super::records::{Projected, RecordRow, record_row};

/// Ancestors followed from a record (the reference's lineage corruption bound).
pub const MAX_LINEAGE_DEPTH: usize = 32;
/// Nodes returned by one `tree` call.
pub const MAX_TREE_NODES: usize = 500;
/// Characters of a derived branch label, the ellipsis included.
pub const LABEL_CHARS: usize = 60;

pub const ROOT_LABEL: &str = "root";
pub const EMPTY_PREFIX_LABEL: &str = "(empty prefix)";

/// Where a fork cuts its source. Precedence when a host names several: `UntilSeq` >
/// `BeforeUserIndex` > `BeforeLastUser` (applied by the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutPoint {
    /// The whole visible transcript.
    Whole,
    /// Messages with `seq <= n`.
    UntilSeq(i64),
    /// Up to and including user message N (0-based among user messages).
    BeforeUserIndex(u64),
    /// Up to and including the last user message (the fork re-asks it).
    BeforeLastUser,
}

/// How many leading messages a cut keeps, and the source seq it records.
pub fn cut(
    transcript: &[Projected],
    at: CutPoint,
    last_seq: Option<i64>,
    record_id: &str,
) -> Result<(usize, Option<i64>), StoreError> {
    let users = || {
        transcript
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role() == "user")
            .map(|(i, _)| i)
    };
    match at {
        CutPoint::Whole => Ok((transcript.len(), last_seq)),
        CutPoint::UntilSeq(n) => Ok((
            transcript.iter().take_while(|m| m.seq <= n).count(),
            Some(n),
        )),
        CutPoint::BeforeUserIndex(n) => {
            let i = usize::try_from(n)
                .ok()
                .and_then(|n| users().nth(n))
                .ok_or_else(|| StoreError::UserIndex {
                    index: n,
                    record: record_id.to_string(),
                })?;
            Ok((i + 1, Some(transcript[i].seq)))
        }
        CutPoint::BeforeLastUser => {
            let i = transcript
                .iter()
                .rposition(|m| m.role() == "user")
                .ok_or_else(|| StoreError::NoUserMessage(record_id.to_string()))?;
            Ok((i + 1, Some(transcript[i].seq)))
        }
    }
}

/// A message's text: a string content, or its text parts joined by spaces.
fn text_of(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                _ => p.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// The branch label of a seed: its last user message, whitespace collapsed, at most
/// `LABEL_CHARS` characters with `…`; `(empty prefix)` when there is no user text.
pub fn derive_label(messages: &[Value]) -> String {
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"));
    let text = last_user.map(text_of).unwrap_or_default();
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return EMPTY_PREFIX_LABEL.to_string();
    }
    if collapsed.chars().count() <= LABEL_CHARS {
        return collapsed;
    }
    let head: String = collapsed.chars().take(LABEL_CHARS - 1).collect();
    format!("{}…", head.trim_end())
}

/// One record in a branch view.
#[derive(Debug, Clone, PartialEq)]
pub struct BranchNode {
    pub record_id: String,
    pub source_record_id: Option<String>,
    pub source_until_seq: Option<i64>,
    pub label: String,
    pub depth: usize,
}

fn node(row: &RecordRow, depth: usize) -> BranchNode {
    let label = match (&row.source_record_id, &row.label) {
        (None, _) => ROOT_LABEL.to_string(),
        (Some(_), Some(l)) => l.clone(),
        (Some(_), None) => EMPTY_PREFIX_LABEL.to_string(),
    };
    BranchNode {
        record_id: row.record_id.clone(),
        source_record_id: row.source_record_id.clone(),
        source_until_seq: row.source_until_seq,
        label,
        depth,
    }
}

/// Root → self, depths numbered from the root reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Lineage {
    pub nodes: Vec<BranchNode>,
    /// The walk stopped at `MAX_LINEAGE_DEPTH` ancestors before reaching a root.
    pub truncated: bool,
}

/// Walks seed provenance up from `record_id`. Unknown record → `RecordNotFound`; a loop
/// → `Cycle`. A source that no longer exists ends the walk there.
pub fn lineage(conn: &Connection, record_id: &str) -> Result<Lineage, StoreError> {
    let start =
        record_row(conn, record_id)?.ok_or_else(|| StoreError::RecordNotFound(record_id.into()))?;
    let mut seen = HashSet::from([start.record_id.clone()]);
    let mut chain = vec![start];
    let mut truncated = false;
    while let Some(src) = chain.last().and_then(|r| r.source_record_id.clone()) {
        if seen.contains(&src) {
            return Err(StoreError::Cycle(src));
        }
        if chain.len() > MAX_LINEAGE_DEPTH {
            truncated = true;
            break;
        }
        let Some(row) = record_row(conn, &src)? else {
            break;
        };
        seen.insert(src);
        chain.push(row);
    }
    chain.reverse();
    let nodes = chain.iter().enumerate().map(|(d, r)| node(r, d)).collect();
    Ok(Lineage { nodes, truncated })
}

/// Records whose seed points at `record_id`, oldest first.
pub fn children(
    conn: &Connection,
    record_id: &str,
    depth: usize,
) -> Result<Vec<BranchNode>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT record_id, source_record_id, source_until_seq, label, next_seq
         FROM records WHERE source_record_id = ?1 ORDER BY rowid",
    )?;
    let rows = stmt.query_map([record_id], RecordRow::from_row)?;
    let mut out = Vec::new();
    for row in rows {
        match row {
            Ok(r) if r.record_id != record_id => out.push(node(&r, depth)),
            Ok(_) => {}
            Err(e) => tracing::warn!("skipping an unreadable record row: {e}"),
        }
    }
    Ok(out)
}

#[derive(Debug, Clone, PartialEq)]
pub struct TreeNode {
    pub node: BranchNode,
    pub children: Vec<TreeNode>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    pub record_id: String,
    pub tree: TreeNode,
    pub node_count: usize,
    pub truncated: bool,
}

/// The whole family of `record_id` from its root, breadth first, so a cut by the node
/// bound keeps the shallow part. Depth ≤ `MAX_LINEAGE_DEPTH`, ≤ `MAX_TREE_NODES` nodes.
pub fn tree(conn: &Connection, record_id: &str) -> Result<Tree, StoreError> {
    let up = lineage(conn, record_id)?;
    let mut truncated = up.truncated;
    let Some(root) = up.nodes.into_iter().next() else {
        return Err(StoreError::RecordNotFound(record_id.into()));
    };
    let root = BranchNode { depth: 0, ..root };
    // Flat BFS list with parent indices, assembled into nested nodes at the end.
    let mut flat: Vec<(BranchNode, Option<usize>)> = vec![(root, None)];
    let mut seen: HashSet<String> = HashSet::from([flat[0].0.record_id.clone()]);
    let mut next = 0;
    while next < flat.len() {
        let (id, depth) = (flat[next].0.record_id.clone(), flat[next].0.depth);
        let kids = children(conn, &id, depth + 1)?;
        if !kids.is_empty() && depth >= MAX_LINEAGE_DEPTH {
            truncated = true;
        } else {
            for kid in kids {
                if !seen.insert(kid.record_id.clone()) {
                    continue;
                }
                if flat.len() >= MAX_TREE_NODES {
                    truncated = true;
                    break;
                }
                flat.push((kid, Some(next)));
            }
        }
        next += 1;
    }
    let node_count = flat.len();
    let mut built: Vec<Option<TreeNode>> = Vec::with_capacity(node_count);
    let mut kids_of: Vec<Vec<usize>> = vec![Vec::new(); node_count];
    for (i, (_, parent)) in flat.iter().enumerate() {
        if let Some(p) = parent {
            kids_of[*p].push(i);
        }
    }
    for (n, _) in &flat {
        built.push(Some(TreeNode {
            node: n.clone(),
            children: Vec::new(),
        }));
    }
    // Children always come after their parent in BFS order: fill from the back.
    for i in (0..node_count).rev() {
        let mut kids = Vec::with_capacity(kids_of[i].len());
        for &k in &kids_of[i] {
            if let Some(t) = built[k].take() {
                kids.push(t);
            }
        }
        if let Some(t) = built[i].as_mut() {
            t.children = kids;
        }
    }
    let tree = built
        .first_mut()
        .and_then(Option::take)
        .ok_or_else(|| StoreError::RecordNotFound(record_id.into()))?;
    Ok(Tree {
        record_id: record_id.to_string(),
        tree,
        node_count,
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(seq: i64, role: &str, text: &str) -> Projected {
        Projected {
            seq,
            kind: role.into(),
            message: json!({"role": role, "content": text}),
        }
    }

    fn transcript() -> Vec<Projected> {
        vec![
            p(0, "system", "sys"),
            p(1, "user", "q1"),
            p(2, "assistant", "a1"),
            p(3, "user", "q2"),
            p(4, "assistant", "a2"),
        ]
    }

    #[test]
    fn cut_points() {
        let t = transcript();
        assert_eq!(
            cut(&t, CutPoint::Whole, Some(4), "r").unwrap(),
            (5, Some(4))
        );
        assert_eq!(
            cut(&t, CutPoint::UntilSeq(2), Some(4), "r").unwrap(),
            (3, Some(2))
        );
        assert_eq!(
            cut(&t, CutPoint::UntilSeq(-1), Some(4), "r").unwrap(),
            (0, Some(-1))
        );
        assert_eq!(
            cut(&t, CutPoint::BeforeUserIndex(0), None, "r").unwrap(),
            (2, Some(1))
        );
        assert_eq!(
            cut(&t, CutPoint::BeforeUserIndex(1), None, "r").unwrap(),
            (4, Some(3))
        );
        assert_eq!(
            cut(&t, CutPoint::BeforeLastUser, None, "r").unwrap(),
            (4, Some(3))
        );
        let e = cut(&t, CutPoint::BeforeUserIndex(2), None, "r").unwrap_err();
        assert_eq!(
            e.to_string(),
            "user message index 2 not addressable in record: r"
        );
        let none = vec![p(0, "system", "s")];
        let e = cut(&none, CutPoint::BeforeLastUser, None, "r").unwrap_err();
        assert_eq!(e.to_string(), "no user message to fork before: r");
    }

    #[test]
    fn seeded_messages_share_a_seq() {
        // A fork's seed at seq 0 carries three messages; UntilSeq(0) keeps them all.
        let t = vec![
            p(0, "user", "a"),
            p(0, "assistant", "b"),
            p(0, "user", "c"),
            p(4, "assistant", "d"),
        ];
        assert_eq!(
            cut(&t, CutPoint::UntilSeq(0), Some(4), "r").unwrap(),
            (3, Some(0))
        );
        assert_eq!(
            cut(&t, CutPoint::BeforeUserIndex(0), None, "r").unwrap(),
            (1, Some(0))
        );
    }

    #[test]
    fn labels() {
        let m = |role: &str, c: Value| json!({"role": role, "content": c});
        assert_eq!(derive_label(&[]), "(empty prefix)");
        assert_eq!(derive_label(&[m("system", json!("s"))]), "(empty prefix)");
        assert_eq!(
            derive_label(&[
                m("user", json!("  first \n\t question  ")),
                m("assistant", json!("x"))
            ]),
            "first question"
        );
        assert_eq!(
            derive_label(&[
                m("user", json!("old")),
                m(
                    "user",
                    json!([{"type": "text", "text": "new"}, {"type": "image"}])
                )
            ]),
            "new"
        );
        let long = "word ".repeat(30);
        let l = derive_label(&[m("user", json!(long))]);
        assert_eq!(l.chars().count(), 60);
        assert!(l.ends_with('…'));
        assert!(l.starts_with("word word"));
        let exact = "x".repeat(60);
        assert_eq!(derive_label(&[m("user", json!(exact.clone()))]), exact);
        let over = "y".repeat(61);
        assert_eq!(
            derive_label(&[m("user", json!(over))]),
            format!("{}…", "y".repeat(59))
        );
        // Multi-byte characters count as one.
        let wide = "é".repeat(70);
        assert_eq!(derive_label(&[m("user", json!(wide))]).chars().count(), 60);
    }
}
