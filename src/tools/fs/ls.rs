//! `ls`: one directory's entries (not recursive), by name, without resolving symlinks.

use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, json};

use super::FsTool;
use super::read::path_failure;
use super::walk::is_excluded_name;
use super::write::is_temp_name;
use super::{FsEnv, fail};
use crate::tools::{ToolContext, ToolMode, ToolResult};

/// Entries listed at most; the rest are counted in `total`.
pub const MAX_LS_ENTRIES: usize = 1000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LsArgs {
    /// Directory to list, relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Glob patterns of entry names to leave out (`*.log`, `tmp*`).
    #[serde(default)]
    pub ignore: Option<Vec<String>>,
}

#[derive(Debug, Serialize)]
struct Entry {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
}

const DESCRIPTION: &str = "List one directory (not recursive): each entry's name, type (file, dir, symlink, other) and file size, sorted by name. \
Symlinks are listed by name, not resolved. Hidden entries are listed; .git, node_modules, target, dist, build, vendor and similar directories are left out and named in `excluded`. \
`ignore` takes glob patterns of names to leave out. Use `glob` to find files recursively.";

/// The `ls` tool.
pub fn tool(env: Arc<FsEnv>) -> FsTool<LsArgs> {
    FsTool::new("ls", DESCRIPTION.to_string(), ToolMode::Read, env, run_ls)
}

fn ignore_set(patterns: &[String]) -> Result<GlobSet, String> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(Glob::new(p).map_err(|e| format!("invalid ignore pattern {p:?}: {e}"))?);
    }
    b.build()
        .map_err(|e| format!("invalid ignore patterns: {e}"))
}

fn run_ls(env: &FsEnv, ctx: &ToolContext, args: LsArgs) -> ToolResult {
    let settings = env.settings();
    let ws = match env.workspace(ctx, &settings) {
        Ok(ws) => ws,
        Err(e) => return fail("io", e),
    };
    let ignore = match ignore_set(args.ignore.as_deref().unwrap_or_default()) {
        Ok(s) => s,
        Err(e) => return fail("invalid_pattern", e),
    };
    let path = args.path.as_deref().unwrap_or(".");
    let dir = match ws.resolve_read(path) {
        Ok(d) => d,
        Err(e) => return path_failure(e),
    };
    let reader = match std::fs::read_dir(&dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return fail("not_found", format!("{path}: no such file or directory"));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return fail(
                "not_directory",
                format!("{path} is a file, not a directory; read it with read_file"),
            );
        }
        Err(e) => return fail("io", format!("{path}: {e}")),
    };
    let mut entries = Vec::new();
    let mut excluded = Vec::new();
    for item in reader {
        if ctx.cancel.is_cancelled() {
            return fail("cancelled", "ls was cancelled");
        }
        let Ok(item) = item else { continue };
        let name = item.file_name();
        let shown = name.to_string_lossy().into_owned();
        if is_excluded_name(&name) {
            excluded.push(shown);
            continue;
        }
        // A write's temp file (left only by a killed writer) is not listed.
        if ignore.is_match(&name) || is_temp_name(&name) {
            continue;
        }
        let Ok(ft) = item.file_type() else { continue };
        // Blocked entries are left out; a symlink is only named, never resolved.
        if !ft.is_symlink() && !ws.is_readable(&item.path()) {
            continue;
        }
        let (kind, size) = if ft.is_symlink() {
            ("symlink", None)
        } else if ft.is_dir() {
            ("dir", None)
        } else if ft.is_file() {
            ("file", item.metadata().ok().map(|m| m.len()))
        } else {
            ("other", None)
        };
        entries.push(Entry {
            name: shown,
            kind,
            size,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    excluded.sort();
    let total = entries.len();
    entries.truncate(MAX_LS_ENTRIES);
    let mut lines: Vec<String> = entries
        .iter()
        .map(|e| match (e.kind, e.size) {
            ("dir", _) => format!("{}/", e.name),
            ("symlink", _) => format!("{}@", e.name),
            (_, Some(n)) => format!("{} ({n} bytes)", e.name),
            _ => e.name.clone(),
        })
        .collect();
    if lines.is_empty() {
        lines.push("(empty directory)".into());
    }
    if total > entries.len() {
        lines.push(format!(
            "(showing {} of {total} entries; use glob to narrow)",
            entries.len()
        ));
    }
    if !excluded.is_empty() {
        lines.push(format!("(excluded: {})", excluded.join(", ")));
    }
    let mut data = Map::new();
    data.insert("path".into(), json!(ws.display(&dir)));
    data.insert("entries".into(), json!(entries));
    data.insert("total".into(), json!(total));
    data.insert("truncated".into(), json!(total > entries.len()));
    data.insert("excluded".into(), json!(excluded));
    data.insert("output".into(), json!(lines.join("\n")));
    ToolResult::ok(data)
}
