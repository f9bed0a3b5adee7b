//! `read_file`: a page of a UTF-8 text file, with the version (sha256 of the whole file) the
//! writers check against.

// Failures are the `ToolResult` handed back to the model (a cold path), so the large `Err`
// variant costs nothing worth boxing for.
#![allow(clippy::result_large_err)]

use std::io::Read;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Map;

use super::FsTool;
use super::paths::{PathError, Workspace};
use super::state::version_of;
use super::{FsEnv, clip, fail};
use crate::tools::{ToolContext, ToolMode, ToolResult};

/// Lines returned when `limit` is not given.
pub const DEFAULT_READ_LINES: usize = 2000;
/// Bytes searched for a NUL to call a file binary.
pub const BINARY_SNIFF_BYTES: usize = 8192;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadArgs {
    /// File path, relative to the workspace root or absolute.
    pub path: String,
    /// 1-based line number to start at (default 1; 0 is read as 1).
    #[serde(default)]
    pub offset: Option<u64>,
    /// Most lines to return (default 2000).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
    /// Prefix each line with its 1-based number and a tab.
    #[serde(default)]
    pub line_numbers: Option<bool>,
}

const DESCRIPTION: &str = "Read a UTF-8 text file in the workspace. Relative paths resolve against the workspace root. \
Returns up to `limit` lines (default 2000) starting at the 1-based line `offset`, plus `version` (sha256 of the whole file) and `totalLines`. \
`lineNumbers: true` prefixes each line with its number and a tab; the prefix is not part of the file. \
Output longer than the character limit keeps its start and end around a `...[N chars truncated]...` marker. \
`partial: true` means the result does not show the whole file (paged or clipped). \
Binary files, non-UTF-8 files and files over the size limit are refused.";

/// The `read_file` tool.
pub fn tool(env: Arc<FsEnv>) -> FsTool<ReadArgs> {
    FsTool::new(
        "read_file",
        DESCRIPTION.to_string(),
        ToolMode::Read,
        env,
        read_file,
    )
    .inline_when(small_local_read)
}

/// Largest file `read_file` reads without leaving the async worker.
pub(super) const INLINE_READ_BYTES: u64 = 256 << 10;

/// A small regular file read from disk (not through the host, whose answer is awaited).
pub(super) fn small_local_read(ctx: &ToolContext, a: &ReadArgs) -> bool {
    !ctx.host_fs.read
        && std::fs::metadata(ctx.workspace_root.join(&a.path))
            .is_ok_and(|m| m.is_file() && m.len() <= INLINE_READ_BYTES)
}

/// The whole text of a file, checked: regular, at most `max_bytes`, no NUL in the first
/// 8 KiB, valid UTF-8. Returns the bytes' text and the opened file's real path.
pub(crate) fn load_text(
    ctx: &ToolContext,
    ws: &Workspace,
    path: &str,
    max_bytes: u64,
) -> Result<(String, std::path::PathBuf), ToolResult> {
    let (bytes, real) = load_bytes(ctx, ws, path, max_bytes)?;
    check_text(&bytes, path)?;
    // Checked just above; the conversion cannot fail.
    match String::from_utf8(bytes) {
        Ok(text) => Ok((text, real)),
        Err(_) => Err(fail("not_utf8", format!("{path} is not valid UTF-8"))),
    }
}

/// The bytes as text: no NUL in the first 8 KiB, valid UTF-8.
fn check_text<'a>(bytes: &'a [u8], path: &str) -> Result<&'a str, ToolResult> {
    let sniff = &bytes[..bytes.len().min(BINARY_SNIFF_BYTES)];
    if let Some(at) = memchr::memchr(0, sniff) {
        return Err(fail(
            "binary",
            format!(
                "{path} looks binary (NUL byte at offset {at}); only text files are read — inspect it with a hex dump or a format-specific tool"
            ),
        ));
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) => {
            let at = e.valid_up_to();
            Err(fail(
                "not_utf8",
                format!(
                    "{path} is not valid UTF-8 (first invalid byte at offset {at}); only UTF-8 text is read — convert it (e.g. iconv -f latin1 -t utf-8) or inspect the bytes with a hex dump"
                ),
            ))
        }
    }
}

/// The whole bytes of a regular file of at most `max_bytes`, and its real path. Under the
/// turn's `hostFs.read` the bytes are the host's (an editor's buffer) once the disk path
/// passed every check.
pub(crate) fn load_bytes(
    ctx: &ToolContext,
    ws: &Workspace,
    path: &str,
    max_bytes: u64,
) -> Result<(Vec<u8>, std::path::PathBuf), ToolResult> {
    load(ctx, ws, path, max_bytes, false)
}

/// As [`load_bytes`], for a file about to be replaced whole (`write_file`): one that is not
/// text is the disk's bytes rather than refused, since the host holds no buffer of it.
pub(crate) fn load_bytes_to_replace(
    ctx: &ToolContext,
    ws: &Workspace,
    path: &str,
    max_bytes: u64,
) -> Result<(Vec<u8>, std::path::PathBuf), ToolResult> {
    load(ctx, ws, path, max_bytes, true)
}

fn load(
    ctx: &ToolContext,
    ws: &Workspace,
    path: &str,
    max_bytes: u64,
    binary_from_disk: bool,
) -> Result<(Vec<u8>, std::path::PathBuf), ToolResult> {
    let (bytes, real) = load_disk_bytes(ws, path, max_bytes)?;
    if !ctx.host_fs.read {
        return Ok((bytes, real));
    }
    // An editor holds text: a binary or non-UTF-8 file is refused as it would be from disk.
    if let Err(e) = check_text(&bytes, path) {
        return if binary_from_disk {
            Ok((bytes, real))
        } else {
            Err(e)
        };
    }
    match super::host_io::read(ctx, &real, path, max_bytes) {
        Some(host) => Ok((host?, real)),
        None => Ok((bytes, real)),
    }
}

pub(crate) fn load_disk_bytes(
    ws: &Workspace,
    path: &str,
    max_bytes: u64,
) -> Result<(Vec<u8>, std::path::PathBuf), ToolResult> {
    let (file, real) = ws.open_read(path).map_err(path_failure)?;
    let meta = file
        .metadata()
        .map_err(|e| fail("io", format!("{path}: {e}")))?;
    if meta.is_dir() {
        return Err(fail(
            "is_directory",
            format!("{path} is a directory; list it instead of reading it"),
        ));
    }
    if !meta.is_file() {
        return Err(fail(
            "not_regular",
            format!(
                "{path} is not a regular file (a device, socket or pipe); only regular files are read"
            ),
        ));
    }
    if meta.len() > max_bytes {
        return Err(too_large(path, meta.len(), max_bytes));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // Bounded even if the file grows between the stat and the read.
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail("io", format!("{path}: {e}")))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(path, bytes.len() as u64, max_bytes));
    }
    Ok((bytes, real))
}

fn too_large(path: &str, size: u64, max: u64) -> ToolResult {
    fail(
        "too_large",
        format!(
            "{path} is {size} bytes, over the {max}-byte read limit (config max_read_bytes); search it with grep or view a slice with a shell command such as sed -n '100,200p'"
        ),
    )
}

pub(crate) fn path_failure(e: PathError) -> ToolResult {
    let code = match &e {
        PathError::Escapes { .. } => "path_escapes",
        PathError::Blocked { .. }
        | PathError::BlockedLink { .. }
        | PathError::LinkUnchecked { .. } => "path_blocked",
        PathError::GitDir { .. } => "path_protected",
        PathError::NotFound { .. } => "not_found",
        PathError::Empty { .. } => "invalid_path",
        PathError::Io { .. } | PathError::BadRoot { .. } => "io",
    };
    fail(code, e.to_string())
}

/// Files at least this big are hashed on a second thread (below it, a thread costs more than
/// it saves).
const PARALLEL_HASH_BYTES: usize = 1 << 20;

/// Lines in the text; a last line without a newline counts.
fn line_count(text: &str) -> usize {
    let nl = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    nl + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

/// The byte offset `n` lines after `from` (a line start), or the end of the text.
fn nth_line_start(text: &str, from: usize, n: usize) -> usize {
    if n == 0 {
        return from;
    }
    memchr::memchr_iter(b'\n', &text.as_bytes()[from..])
        .nth(n - 1)
        .map_or(text.len(), |i| from + i + 1)
}

fn read_file(env: &FsEnv, ctx: &ToolContext, args: ReadArgs) -> ToolResult {
    let settings = env.settings();
    let ws = match env.workspace(ctx, &settings) {
        Ok(ws) => ws,
        Err(e) => return fail("io", e),
    };
    let (bytes, real) = match load_bytes(ctx, &ws, &args.path, settings.max_read_bytes) {
        Ok(x) => x,
        Err(r) => return r,
    };
    if let Some(r) = super::image::describe(&bytes, &ws.display(&real)) {
        return r;
    }
    // The version hashes the whole file; on a big one, hash on a second thread while this
    // one validates the text and counts lines (the two take about as long).
    let (version, checked) = if bytes.len() >= PARALLEL_HASH_BYTES {
        std::thread::scope(|s| {
            let hash = s.spawn(|| version_of(&bytes));
            let checked = check_text(&bytes, &args.path).map(|t| (t, line_count(t)));
            (hash.join().unwrap_or_else(|_| version_of(&bytes)), checked)
        })
    } else {
        (
            version_of(&bytes),
            check_text(&bytes, &args.path).map(|t| (t, line_count(t))),
        )
    };
    let (text, total) = match checked {
        Ok(x) => x,
        Err(r) => return r,
    };
    let offset = usize::try_from(args.offset.unwrap_or(1).max(1)).unwrap_or(usize::MAX);
    let limit = usize::try_from(args.limit.unwrap_or(DEFAULT_READ_LINES as u64).max(1))
        .unwrap_or(usize::MAX);
    if offset > total.max(1) {
        return fail(
            "offset_out_of_range",
            format!(
                "offset {offset} is past the end of {} ({total} lines); pass an offset from 1 to {total}",
                args.path
            ),
        );
    }
    let first = offset - 1;
    let end_line = total.min(first.saturating_add(limit));
    let page = if total == 0 {
        ""
    } else {
        let from = nth_line_start(text, 0, first);
        let to = nth_line_start(text, from, end_line - first);
        &text[from..to]
    };
    let page = if args.line_numbers.unwrap_or(false) {
        let mut out = String::with_capacity(page.len() + (end_line - first) * 8);
        for (i, line) in page.split_inclusive('\n').enumerate() {
            out.push_str(&format!("{:>6}\t{line}", first + i + 1));
        }
        out
    } else {
        page.to_string()
    };
    let (content, cut) = clip(&page, settings.max_output_chars);
    let paged = first > 0 || end_line < total;
    let partial = paged || cut > 0;
    env.state
        .record(ctx.session_id.as_deref(), &real, version.clone(), partial);
    let mut r = ToolResult::ok(Map::new())
        .with_data("path", ws.display(&real))
        .with_data("content", content)
        .with_data("version", version)
        .with_data("partial", partial)
        .with_data("totalLines", total)
        .with_data("startLine", if total == 0 { 0 } else { offset })
        .with_data("endLine", end_line);
    if end_line < total {
        r = r.with_data("nextOffset", end_line + 1);
    }
    if cut > 0 {
        r = r.with_data("truncatedChars", cut);
    }
    r
}
