//! `apply_patch`: edits to several files, every one planned against its original bytes, then
//! all written or none (files already written are restored when a later write fails).

// Failures are the `ToolResult` handed back to the model (a cold path), so the large `Err`
// variant costs nothing worth boxing for.
#![allow(clippy::result_large_err)]

use std::collections::HashSet;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::FsTool;
use super::edit::Edit;
use super::state::version_of;
use super::write::{MATCHING_RULES, Plan, atomic_write, plan_edit};
use super::{FsEnv, fail};
use crate::tools::{ToolContext, ToolMode, ToolResult};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilePatch {
    /// File path, relative to the workspace root or absolute.
    pub path: String,
    /// Replacements for this file, each located in its original content.
    pub edits: Vec<Edit>,
    /// The `version` from read_file; the patch is refused if the file changed since.
    #[serde(default)]
    pub expected_version: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchArgs {
    /// One entry per file; a file may appear once.
    pub patches: Vec<FilePatch>,
}

const DESCRIPTION: &str = "Apply {oldText, newText} edits to several existing workspace files as one change: \
every file's edits are matched against its current content first, and if any file fails nothing is written; \
if a write fails midway, files already written are restored. \
MATCHING \
Each file must have been read in this session (or its `expectedVersion` passed) and be unchanged since. \
Returns `filesChanged` (the paths whose content changed, in patch order), a diff per file and the new \
`versions` by path.";

/// The `apply_patch` tool.
pub fn tool(env: Arc<FsEnv>) -> FsTool<PatchArgs> {
    FsTool::new(
        "apply_patch",
        DESCRIPTION.replace("MATCHING", MATCHING_RULES),
        ToolMode::SafeWrite,
        env,
        apply_patch,
    )
}

fn apply_patch(env: &FsEnv, ctx: &ToolContext, args: PatchArgs) -> ToolResult {
    if args.patches.is_empty() {
        return fail(
            "no_edits",
            "no patches given; pass at least one {path, edits}",
        );
    }
    let settings = env.settings();
    let ws = match env.workspace(ctx, &settings) {
        Ok(ws) => ws,
        Err(e) => return fail("io", e),
    };
    let _guard = env.lock_writes();
    let mut plans: Vec<Plan> = Vec::with_capacity(args.patches.len());
    let mut seen = HashSet::new();
    for p in &args.patches {
        let plan = match plan_edit(
            env,
            ctx,
            &ws,
            &settings,
            &p.path,
            &p.edits,
            p.expected_version.as_deref(),
            false,
        ) {
            Ok(plan) => plan,
            Err(r) => {
                let msg = r.error.clone().unwrap_or_default();
                let mut r = r;
                r.error = Some(format!("{msg}; no file was changed"));
                return r;
            }
        };
        if !seen.insert(plan.abs.clone()) {
            return fail(
                "duplicate_path",
                format!(
                    "{} appears more than once; put all of a file's edits in one entry (no file was changed)",
                    plan.shown
                ),
            );
        }
        plans.push(plan);
    }
    let mut written: Vec<&Plan> = Vec::new();
    for plan in &plans {
        if plan.outcome.content == plan.old {
            continue;
        }
        if let Err(r) = atomic_write(
            ctx,
            &ws,
            &plan.path,
            &plan.abs,
            plan.outcome.content.as_bytes(),
        ) {
            let mut restored = Vec::new();
            let mut unrestored = Vec::new();
            for done in written.iter().rev() {
                match atomic_write(ctx, &ws, &done.path, &done.abs, done.old.as_bytes()) {
                    Ok(()) => restored.push(done.shown.clone()),
                    Err(e) => {
                        unrestored.push(format!("{} ({})", done.shown, e.error.unwrap_or_default()))
                    }
                }
            }
            let cause = r.error.unwrap_or_default();
            let summary = if unrestored.is_empty() {
                format!("rolled back {} file(s) already written", restored.len())
            } else {
                format!(
                    "could NOT restore {}; restored {}",
                    unrestored.join(", "),
                    restored.len()
                )
            };
            return fail("write_failed", format!("{cause}; {summary}"))
                .with_data("path", plan.shown.as_str())
                .with_data("restored", restored)
                .with_data("unrestored", unrestored);
        }
        written.push(plan);
    }
    let mut versions = Map::new();
    let mut diffs = Vec::new();
    // The paths whose content changed, in the order the patch listed them.
    let mut changed: Vec<String> = Vec::new();
    for plan in &plans {
        let version = version_of(plan.outcome.content.as_bytes());
        env.state
            .record(ctx.session_id.as_deref(), &plan.abs, version.clone(), false);
        if plan.outcome.content != plan.old {
            changed.push(plan.shown.clone());
        }
        versions.insert(plan.shown.clone(), Value::String(version));
        diffs.push(json!({
            "path": plan.shown,
            "diff": plan.outcome.diff,
            "applied": plan.outcome.applied,
            "matches": plan.outcome.matches,
        }));
    }
    ToolResult::ok(Map::new())
        .with_data("filesChanged", changed)
        .with_data("diffs", diffs)
        .with_data("versions", versions)
}
