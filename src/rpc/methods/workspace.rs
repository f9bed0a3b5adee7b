//! `workspace.apply_edits`: the pure edit algorithm (the one `edit_file` and `apply_patch`
//! use) over a string, for hosts that hold the file themselves.

use std::sync::Arc;

use crate::app::App;
use crate::protocol::tools::{ApplyEditsParams, ApplyEditsResult, EditMatch, EditMatchLevel};
use crate::rpc::error::RpcError;
use crate::tools::fs::edit::{Edit, EditOutcome, Level, apply_edits as apply};

fn result(o: EditOutcome) -> ApplyEditsResult {
    ApplyEditsResult {
        content: o.content,
        diff: o.diff,
        applied: o.applied,
        matches: o
            .matches
            .into_iter()
            .map(|m| EditMatch {
                level: match m.level {
                    Level::Exact => EditMatchLevel::Exact,
                    Level::Trim => EditMatchLevel::Trim,
                    Level::Unicode => EditMatchLevel::Unicode,
                },
                start_line: m.start_line,
                old_line_count: m.old_line_count,
            })
            .collect(),
    }
}

pub async fn apply_edits(_: Arc<App>, p: ApplyEditsParams) -> Result<ApplyEditsResult, RpcError> {
    let path = p.file_path.unwrap_or_else(|| "file".to_string());
    let edits: Vec<Edit> = p
        .edits
        .into_iter()
        .map(|e| Edit {
            old_text: e.old_text,
            new_text: e.new_text,
        })
        .collect();
    let (content, replace_all) = (p.content, p.replace_all);
    // Matching and diffing a large buffer is CPU work: keep it off the async workers.
    let outcome = tokio::task::spawn_blocking(move || apply(&content, &edits, &path, replace_all))
        .await
        .map_err(|e| RpcError::internal(format!("apply_edits failed: {e}")))??;
    Ok(result(outcome))
}
