//! `glob`: files whose search-root-relative path matches a pattern, newest first. Also the
//! path filter `grep`'s `glob` argument uses (same matching rules).

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, json};

use super::FsTool;
use super::read::path_failure;
use super::walk::{WalkSpec, path_order, walk_files};
use super::{FsEnv, fail};
use crate::tools::{ToolContext, ToolMode, ToolResult};

/// Files returned when `limit` is not given.
pub const DEFAULT_GLOB_LIMIT: usize = 100;
/// The largest `limit` accepted.
pub const MAX_GLOB_LIMIT: usize = 1000;

/// Path matching shared by `glob` and `grep`'s `glob`: a pattern without `/` matches the file
/// name at any depth; one with `/` matches the path relative to the search root; a leading
/// `./` anchors to the root; a leading `!` excludes.
#[derive(Debug, Clone)]
pub struct PathFilter {
    name_include: GlobSet,
    path_include: GlobSet,
    name_exclude: GlobSet,
    path_exclude: GlobSet,
    any_include: bool,
}

impl PathFilter {
    /// One pattern (the `glob` tool: spaces and commas are part of it).
    pub fn single(pattern: &str) -> Result<PathFilter, String> {
        Self::build(std::iter::once(pattern))
    }

    /// A list separated by commas or whitespace outside `{…}` groups (`grep`'s `glob`).
    pub fn list(patterns: &str) -> Result<PathFilter, String> {
        let parts = split_patterns(patterns);
        if parts.is_empty() {
            return Err(format!("glob {patterns:?} has no pattern in it"));
        }
        Self::build(parts.iter().map(String::as_str))
    }

    fn build<'a>(patterns: impl Iterator<Item = &'a str>) -> Result<PathFilter, String> {
        let mut name_inc = GlobSetBuilder::new();
        let mut path_inc = GlobSetBuilder::new();
        let mut name_exc = GlobSetBuilder::new();
        let mut path_exc = GlobSetBuilder::new();
        let mut any_include = false;
        for raw in patterns {
            let (exclude, p) = match raw.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, raw),
            };
            let (anchored, p) = match p.strip_prefix("./") {
                Some(rest) => (true, rest),
                None => (false, p),
            };
            if p.is_empty() {
                return Err(format!("glob pattern {raw:?} is empty"));
            }
            if Path::new(p)
                .components()
                .any(|c| matches!(c, Component::ParentDir))
            {
                return Err(format!(
                    "glob pattern {raw:?} contains `..`; patterns match below the search root — pass `path` to search elsewhere"
                ));
            }
            let glob = GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .map_err(|e| format!("invalid glob pattern {raw:?}: {e}"))?;
            let by_path = anchored || p.contains('/');
            match (exclude, by_path) {
                (false, false) => name_inc.add(glob),
                (false, true) => path_inc.add(glob),
                (true, false) => name_exc.add(glob),
                (true, true) => path_exc.add(glob),
            };
            any_include |= !exclude;
        }
        let done = |b: GlobSetBuilder| b.build().map_err(|e| format!("invalid glob: {e}"));
        Ok(PathFilter {
            name_include: done(name_inc)?,
            path_include: done(path_inc)?,
            name_exclude: done(name_exc)?,
            path_exclude: done(path_exc)?,
            any_include,
        })
    }

    /// `rel` is relative to the search root.
    pub fn matches(&self, rel: &Path) -> bool {
        let name = rel.file_name().map(Path::new).unwrap_or(rel);
        if self.name_exclude.is_match(name) || self.path_exclude.is_match(rel) {
            return false;
        }
        !self.any_include || self.name_include.is_match(name) || self.path_include.is_match(rel)
    }
}

/// Splits on commas and whitespace outside `{…}` (so `*.{rs,toml}` stays one pattern).
fn split_patterns(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    for ch in s.chars() {
        match ch {
            '{' => {
                depth += 1;
                cur.push(ch);
            }
            '}' => {
                depth = depth.saturating_sub(1);
                cur.push(ch);
            }
            c if depth == 0 && (c == ',' || c.is_whitespace()) => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// An absolute pattern becomes (its longest literal directory, the rest relative to it).
pub fn split_absolute(pattern: &str) -> Option<(PathBuf, String)> {
    if !pattern.starts_with('/') {
        return None;
    }
    let meta = |s: &str| s.contains(['*', '?', '[', '{']);
    let parts: Vec<&str> = pattern.split('/').collect();
    let literal = parts.iter().take_while(|p| !meta(p)).count();
    // The last component is the file pattern even when it has no metacharacter.
    let literal = literal.min(parts.len().saturating_sub(1));
    let base = parts[..literal].join("/");
    let rest = parts[literal..].join("/");
    Some((
        PathBuf::from(if base.is_empty() { "/" } else { &base }),
        rest,
    ))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GlobArgs {
    /// Glob such as `**/*.rs`, `src/*.ts` or `*.{json,yaml}`. Without `/` it matches file
    /// names at any depth; with `/` it matches the path relative to `path`.
    pub pattern: String,
    /// Directory to search, relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Most files to return (default 100, at most 1000).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u64>,
}

const DESCRIPTION: &str = "Find files by glob pattern, newest first (ties by path). \
A pattern without `/` matches file names at any depth (`*.rs`); with `/` it matches the path relative to `path` (`src/**/*.ts`); `{a,b}` alternatives work. \
Honours .gitignore/.ignore, includes hidden files, and skips .git, node_modules, target, dist, build, vendor and similar directories. \
Returns workspace-relative paths: at most `limit` (default 100, max 1000), with `total` and `truncated`.";

/// The `glob` tool.
pub fn tool(env: Arc<FsEnv>) -> FsTool<GlobArgs> {
    FsTool::new(
        "glob",
        DESCRIPTION.to_string(),
        ToolMode::Read,
        env,
        run_glob,
    )
}

fn run_glob(env: &FsEnv, ctx: &ToolContext, args: GlobArgs) -> ToolResult {
    let settings = env.settings();
    let ws = match env.workspace(ctx, &settings) {
        Ok(ws) => ws,
        Err(e) => return fail("io", e),
    };
    let (path, pattern) = match split_absolute(&args.pattern) {
        Some((base, rest)) => (base.display().to_string(), rest),
        None => (
            args.path.clone().unwrap_or_else(|| ".".into()),
            args.pattern.clone(),
        ),
    };
    let filter = match PathFilter::single(&pattern) {
        Ok(f) => f,
        Err(e) => return fail("invalid_pattern", e),
    };
    let root = match ws.resolve_read(&path) {
        Ok(r) => r,
        Err(e) => return path_failure(e),
    };
    if !root.is_dir() {
        return fail(
            "not_directory",
            format!(
                "{path} is not a directory; glob searches directories — pass a directory as `path`"
            ),
        );
    }
    let limit = args
        .limit
        .map_or(DEFAULT_GLOB_LIMIT, |l| {
            usize::try_from(l).unwrap_or(usize::MAX)
        })
        .clamp(1, MAX_GLOB_LIMIT);
    let accept = |rel: &Path| filter.matches(rel);
    let spec = WalkSpec {
        root: &root,
        max_entries: settings.max_walk_entries,
        want_mtime: true,
        accept: &accept,
        blocked: &settings.blocked_paths,
    };
    let outcome = walk_files(&ws, &spec, &ctx.cancel);
    if outcome.cancelled {
        return fail("cancelled", "glob was cancelled");
    }
    let mut found: Vec<(SystemTime, PathBuf)> = outcome
        .files
        .into_iter()
        .map(|c| (c.mtime.unwrap_or(SystemTime::UNIX_EPOCH), c.path))
        .collect();
    // Newest first; ties by path so the order is deterministic.
    found.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| path_order(&a.1, &b.1)));
    let total = found.len();
    let files: Vec<String> = found
        .iter()
        .take(limit)
        .map(|(_, p)| ws.display(p))
        .collect();
    let truncated = total > files.len() || outcome.limited;
    let mut output = if files.is_empty() {
        "No files found".to_string()
    } else {
        files.join("\n")
    };
    if total > files.len() {
        output.push_str(&format!(
            "\n(Showing {} of {total} matching files, newest first. Use a more specific pattern or path.)",
            files.len()
        ));
    }
    let mut data = Map::new();
    data.insert("files".into(), json!(files));
    data.insert("total".into(), json!(total));
    data.insert("truncated".into(), json!(truncated));
    if outcome.limited {
        let note = walk_limit_note(settings.max_walk_entries);
        output.push_str(&format!("\n({note})"));
        data.insert("note".into(), json!(note));
    }
    data.insert("output".into(), json!(output));
    ToolResult::ok(data)
}

/// The note added when the entry budget stopped a walk.
pub(crate) fn walk_limit_note(max: usize) -> String {
    format!(
        "the walk stopped after {max} entries (max_walk_entries), so results are incomplete; narrow `path` or the pattern"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_paths_anchors_and_excludes() {
        let f = PathFilter::single("*.rs").unwrap();
        assert!(f.matches(Path::new("a.rs")));
        assert!(f.matches(Path::new("src/deep/a.rs")));
        assert!(!f.matches(Path::new("src/a.rsx")));
        let f = PathFilter::single("src/*.rs").unwrap();
        assert!(f.matches(Path::new("src/a.rs")));
        assert!(!f.matches(Path::new("src/x/a.rs")), "* does not cross /");
        assert!(!f.matches(Path::new("lib/src/a.rs")));
        let f = PathFilter::single("**/*.rs").unwrap();
        assert!(f.matches(Path::new("a.rs")) && f.matches(Path::new("x/y/a.rs")));
        let f = PathFilter::single("./*.md").unwrap();
        assert!(f.matches(Path::new("README.md")));
        assert!(!f.matches(Path::new("docs/a.md")));
        let f = PathFilter::list("*.{rs,toml}, !build.rs").unwrap();
        assert!(f.matches(Path::new("Cargo.toml")));
        assert!(f.matches(Path::new("src/main.rs")));
        assert!(!f.matches(Path::new("build.rs")));
        let f = PathFilter::list("!*.lock").unwrap();
        assert!(f.matches(Path::new("a.rs")) && !f.matches(Path::new("Cargo.lock")));
        assert!(PathFilter::single("../*.rs").unwrap_err().contains(".."));
        assert!(PathFilter::single("a[").unwrap_err().contains("a["));
    }

    #[test]
    fn splits_lists_but_keeps_brace_groups() {
        assert_eq!(
            split_patterns("*.{rs,toml} *.md,src/**"),
            vec!["*.{rs,toml}", "*.md", "src/**"]
        );
    }

    #[test]
    fn absolute_patterns_split_at_the_first_glob() {
        assert_eq!(
            split_absolute("/ws/src/**/*.rs"),
            Some((PathBuf::from("/ws/src"), "**/*.rs".to_string()))
        );
        assert_eq!(
            split_absolute("/ws/Cargo.toml"),
            Some((PathBuf::from("/ws"), "Cargo.toml".to_string()))
        );
        assert_eq!(split_absolute("src/*.rs"), None);
    }
}
