//! `write_file` and `edit_file`, the read-before-write gate they share with `apply_patch`,
//! and the atomic replace (an unnamed `O_TMPFILE` file in the same directory, the target's
//! mode bits, fsync, link and rename).

// Failures are the `ToolResult` handed back to the model (a cold path), so the large `Err`
// variant costs nothing worth boxing for.
#![allow(clippy::result_large_err)]

use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag};
use nix::unistd::UnlinkatFlags;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::FsTool;
use super::edit::{Edit, apply_edits};
use super::paths::Workspace;
use super::read::{load_bytes_to_replace, load_text, path_failure};
use super::state::version_of;
use super::{FsEnv, fail};
use crate::tools::{ToolContext, ToolMode, ToolResult};

/// The truncation guard applies to existing files at least this large…
pub const TRUNCATION_GUARD_MIN_BYTES: usize = 8192;
/// …when the new content is shorter than max(this, a quarter of the old size).
pub const TRUNCATION_GUARD_FLOOR: usize = 512;

/// Which rules of the gate apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// A blind full overwrite: refused after a partial read.
    Write,
    /// A targeted, matched edit: allowed after a partial read.
    Edit,
}

/// The read-before-write gate. `current` is the file's bytes (`None`: it does not exist, a
/// plain create that is never gated).
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_gate(
    env: &FsEnv,
    ctx: &ToolContext,
    abs: &Path,
    shown: &str,
    current: Option<&[u8]>,
    expected: Option<&str>,
    gate: Gate,
    require_read: bool,
) -> Result<(), ToolResult> {
    let Some(current) = current else {
        return Ok(());
    };
    let now = version_of(current);
    let seen = env.state.get(ctx.session_id.as_deref(), abs);
    if let Some(want) = expected {
        if !want.eq_ignore_ascii_case(&now) {
            return Err(fail(
                "conflict",
                format!(
                    "conflict: {shown} changed since version {want} (it is now {now}); read it again and retry with the new version"
                ),
            )
            .with_data("currentVersion", now));
        }
    } else {
        match &seen {
            None if require_read => {
                return Err(fail(
                    "not_read",
                    format!(
                        "{shown} already exists but this session has not read it; read it first, then write with the read version"
                    ),
                ));
            }
            None => {}
            Some(s) if s.version != now => {
                return Err(fail(
                    "conflict",
                    format!(
                        "conflict: {shown} was modified since this session read it (read version {}, now {now}); read it again, then retry",
                        s.version
                    ),
                )
                .with_data("currentVersion", now));
            }
            Some(_) => {}
        }
    }
    if gate == Gate::Write
        && let Some(s) = &seen
        && s.partial
        && s.version == now
    {
        return Err(fail(
            "partial_view",
            format!(
                "{shown}: this session only read part of it (paged or clipped), so a full overwrite would destroy lines it has not seen; read the rest, or change it with edit_file"
            ),
        ));
    }
    Ok(())
}

fn is_not_found(r: &ToolResult) -> bool {
    r.data.as_ref().and_then(|d| d.get("code")) == Some(&json!("not_found"))
}

/// The existing file's bytes (any content: only hashed), or `None` when it does not exist.
pub(crate) fn read_existing_bytes(
    ctx: &ToolContext,
    ws: &Workspace,
    path: &str,
    max_bytes: u64,
) -> Result<Option<Vec<u8>>, ToolResult> {
    match load_bytes_to_replace(ctx, ws, path, max_bytes) {
        Ok((bytes, _)) => Ok(Some(bytes)),
        Err(r) if is_not_found(&r) => Ok(None),
        Err(r) => Err(r),
    }
}

/// The existing file's text, or `None` when it does not exist.
pub(crate) fn read_existing(
    ctx: &ToolContext,
    ws: &Workspace,
    path: &str,
    max_bytes: u64,
) -> Result<Option<String>, ToolResult> {
    match load_text(ctx, ws, path, max_bytes) {
        Ok((text, _)) => Ok(Some(text)),
        Err(r) if is_not_found(&r) => Ok(None),
        Err(r) => Err(r),
    }
}

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Temp names are `.outrigger-<pid>-<n>.tmp`.
const TEMP_PREFIX: &str = ".outrigger-";
const TEMP_SUFFIX: &str = ".tmp";

fn temp_name() -> String {
    format!(
        "{TEMP_PREFIX}{}-{}{TEMP_SUFFIX}",
        std::process::id(),
        TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// The pid in a name of the form `.outrigger-<pid>-<n>.tmp`, or `None` for any other name.
/// Exact, so that no file of the user's is ever taken for one of ours.
fn temp_pid(name: &OsStr) -> Option<i32> {
    let mid = name
        .to_str()?
        .strip_prefix(TEMP_PREFIX)?
        .strip_suffix(TEMP_SUFFIX)?;
    let (pid, seq) = mid.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(seq))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Whether `name` is one of `atomic_write`'s temp files (left behind only by a process killed
/// mid-write): `glob`, `grep` and `ls` do not show them.
pub fn is_temp_name(name: &OsStr) -> bool {
    temp_pid(name).is_some()
}

/// Removes the temp files a killed writer left in `dir`: those whose pid is no live process
/// (a live one may be another sidecar's write in progress). Best effort.
fn remove_stale_temps(dir: &OwnedFd) {
    use std::os::fd::AsRawFd;
    // Listed through the descriptor's /proc link, so it is the directory already verified.
    let Ok(listing) = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
        return;
    };
    let stale: Vec<std::ffi::OsString> = listing
        .flatten()
        .map(|e| e.file_name())
        .filter(|name| {
            temp_pid(name).is_some_and(|pid| {
                pid > 0
                    && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
                        == Err(nix::errno::Errno::ESRCH)
            })
        })
        .collect();
    for name in stale {
        match nix::unistd::unlinkat(dir, name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) => tracing::info!("removed {name:?}, left by a writer that was killed"),
            Err(e) => tracing::debug!("cannot remove the stale temp file {name:?}: {e}"),
        }
    }
}

/// A test hook: with `OUTRIGGER_DEBUG_METHODS=1`, a write whose target file name equals
/// `OUTRIGGER_DEBUG_FAIL_RENAME` fails just before the rename (exercises cleanup/rollback).
fn injected_rename_failure(name: &OsStr) -> bool {
    static NAME: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let target = NAME.get_or_init(|| {
        let on = std::env::var("OUTRIGGER_DEBUG_METHODS").is_ok_and(|v| v == "1");
        on.then(|| std::env::var("OUTRIGGER_DEBUG_FAIL_RENAME").ok())
            .flatten()
    });
    target.as_deref().is_some_and(|t| OsStr::new(t) == name)
}

/// The file being written: unnamed (`O_TMPFILE`, so a kill mid-write leaves nothing), or
/// named where the filesystem cannot do that.
enum Temp {
    Unnamed(std::fs::File),
    Named(std::fs::File, String),
}

impl Temp {
    fn file(&mut self) -> &mut std::fs::File {
        match self {
            Temp::Unnamed(f) | Temp::Named(f, _) => f,
        }
    }
}

fn open_unnamed(dir: &OwnedFd) -> Option<Temp> {
    // Naming it needs /proc (`link_unnamed`); without it the file could never be linked in.
    static PROC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*PROC.get_or_init(|| Path::new("/proc/self/fd").is_dir()) {
        return None;
    }
    // Not O_EXCL: that would forbid the linkat that names it.
    nix::fcntl::openat(
        dir.as_fd(),
        ".",
        OFlag::O_TMPFILE | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o666),
    )
    .ok()
    .map(|fd| Temp::Unnamed(std::fs::File::from(fd)))
}

fn open_named(dir: &OwnedFd) -> nix::Result<Temp> {
    let tmp = temp_name();
    let fd = nix::fcntl::openat(
        dir.as_fd(),
        tmp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::from_bits_truncate(0o666),
    )?;
    Ok(Temp::Named(std::fs::File::from(fd), tmp))
}

/// Gives an unnamed file `name` in `dir` (which must not exist) through its `/proc/self/fd`
/// link: `linkat` with `AT_EMPTY_PATH` would need CAP_DAC_READ_SEARCH.
fn link_unnamed(f: &std::fs::File, dir: &OwnedFd, name: &OsStr) -> nix::Result<()> {
    use std::os::fd::AsRawFd;
    let proc_path = format!("/proc/self/fd/{}", f.as_raw_fd());
    nix::unistd::linkat(
        nix::fcntl::AT_FDCWD,
        proc_path.as_str(),
        dir.as_fd(),
        name,
        AtFlags::AT_SYMLINK_FOLLOW,
    )
}

/// Replaces `abs` with `bytes` atomically, keeping the target's mode bits: the bytes go to an
/// `O_TMPFILE` (unnamed) file in the same (verified) directory, fsynced, then linked in under
/// a temp name and renamed over the target (a new target is linked in directly). A kill while
/// writing leaves nothing; only the instant between link and rename leaves a temp name. A
/// filesystem without `O_TMPFILE` gets a named temp file from the start. Temp names are
/// hidden from glob/grep/ls, and stale ones are removed by the next write into the directory.
pub(crate) fn atomic_write(
    ctx: &ToolContext,
    ws: &Workspace,
    path: &str,
    abs: &Path,
    bytes: &[u8],
) -> Result<(), ToolResult> {
    if let Some(done) = super::host_io::write(ctx, abs, path, bytes) {
        return done;
    }
    let io = |what: &str, e: &dyn std::fmt::Display| {
        fail("io", format!("cannot write {path}: {what}: {e}"))
    };
    if let Some(parent) = abs.parent()
        && !parent.exists()
    {
        std::fs::create_dir_all(parent).map_err(|e| io("creating its directory", &e))?;
    }
    let (dir, name) = ws.open_parent_for_write(path, abs).map_err(path_failure)?;
    let mode = match nix::sys::stat::fstatat(
        dir.as_fd(),
        name.as_os_str(),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    ) {
        Ok(st) => {
            let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
            if kind == SFlag::S_IFDIR {
                return Err(fail(
                    "is_directory",
                    format!("{path} is a directory; pass a file path"),
                ));
            }
            (kind == SFlag::S_IFREG).then_some(st.st_mode & 0o7777)
        }
        Err(_) => None,
    };
    remove_stale_temps(&dir);
    let mut temp = match open_unnamed(&dir) {
        Some(t) => t,
        None => open_named(&dir).map_err(|e| io("creating a temp file beside it", &e))?,
    };
    let written = (|| -> Result<(), ToolResult> {
        let f = temp.file();
        f.write_all(bytes).map_err(|e| io("writing", &e))?;
        if let Some(m) = mode {
            f.set_permissions(std::fs::Permissions::from_mode(m))
                .map_err(|e| io("copying its mode bits", &e))?;
        }
        f.sync_all().map_err(|e| io("syncing", &e))?;
        if injected_rename_failure(&name) {
            return Err(io(
                "renaming into place",
                &"injected failure (OUTRIGGER_DEBUG_FAIL_RENAME)",
            ));
        }
        let rename = |tmp: &str| {
            nix::fcntl::renameat(dir.as_fd(), tmp, dir.as_fd(), name.as_os_str())
                .map_err(|e| io("renaming into place", &e))
        };
        match &temp {
            Temp::Named(_, tmp) => rename(tmp),
            Temp::Unnamed(f) => {
                // A new file is linked in under its own name: no temp name at all. EEXIST (it
                // appeared meanwhile) falls through to the replace path.
                if mode.is_none() && link_unnamed(f, &dir, &name).is_ok() {
                    return Ok(());
                }
                let tmp = temp_name();
                link_unnamed(f, &dir, OsStr::new(&tmp))
                    .map_err(|e| io("linking the written file into its directory", &e))?;
                rename(&tmp).inspect_err(|_| {
                    let _ = nix::unistd::unlinkat(&dir, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
                })
            }
        }
    })();
    match written {
        Ok(()) => {
            // Make the rename itself durable; a failure here loses nothing already visible.
            let _ = nix::unistd::fsync(dir.as_fd());
            Ok(())
        }
        Err(r) => {
            if let Temp::Named(_, tmp) = &temp {
                let _ = nix::unistd::unlinkat(&dir, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
            }
            Err(r)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// write_file
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteArgs {
    /// File path, relative to the workspace root or absolute.
    pub path: String,
    /// The complete new content.
    pub content: String,
    /// The `version` from read_file; the write is refused if the file changed since.
    #[serde(default)]
    pub expected_version: Option<String>,
}

const WRITE_DESCRIPTION: &str = "Create or overwrite a file in the workspace with `content` (UTF-8). Missing parent directories are created. \
Overwriting an existing file requires that this session read it with read_file (or that `expectedVersion` is passed); \
the write is refused if the file changed since that read (`version` mismatch), if the read was partial, \
or if a file of 8192+ bytes would shrink below max(512 bytes, a quarter of its size). New files are never refused for these reasons. \
The file is replaced atomically and keeps its permission bits. Returns `bytes` written and the new `version`.";

/// The `write_file` tool.
pub fn write_tool(env: Arc<FsEnv>) -> FsTool<WriteArgs> {
    FsTool::new(
        "write_file",
        WRITE_DESCRIPTION.to_string(),
        ToolMode::SafeWrite,
        env,
        write_file,
    )
}

fn write_file(env: &FsEnv, ctx: &ToolContext, args: WriteArgs) -> ToolResult {
    let settings = env.settings();
    let ws = match env.workspace(ctx, &settings) {
        Ok(ws) => ws,
        Err(e) => return fail("io", e),
    };
    let abs = match ws.resolve_write(&args.path) {
        Ok(p) => p,
        Err(e) => return path_failure(e),
    };
    let shown = ws.display(&abs);
    let _guard = env.lock_writes();
    let current = match read_existing_bytes(ctx, &ws, &args.path, settings.max_read_bytes) {
        Ok(c) => c,
        Err(r) => return r,
    };
    if let Err(r) = check_gate(
        env,
        ctx,
        &abs,
        &shown,
        current.as_deref(),
        args.expected_version.as_deref(),
        Gate::Write,
        settings.require_read_before_write,
    ) {
        return r;
    }
    if let Some(old) = &current {
        let (n, m) = (old.len(), args.content.len());
        if n >= TRUNCATION_GUARD_MIN_BYTES && m < TRUNCATION_GUARD_FLOOR.max(n / 4) {
            return fail(
                "truncation_guard",
                format!(
                    "Refusing to overwrite {n}-byte {shown} with {m} bytes. Writing a file whole replaces everything; change part of it with edit_file, or write the complete content"
                ),
            );
        }
    }
    if let Err(r) = atomic_write(ctx, &ws, &args.path, &abs, args.content.as_bytes()) {
        return r;
    }
    let version = version_of(args.content.as_bytes());
    env.state
        .record(ctx.session_id.as_deref(), &abs, version.clone(), false);
    ToolResult::ok(Map::new())
        .with_data("path", shown)
        .with_data("bytes", args.content.len())
        .with_data("version", version)
        .with_data("created", current.is_none())
}

// ---------------------------------------------------------------------------------------------
// edit_file
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditArgs {
    /// File path, relative to the workspace root or absolute.
    pub path: String,
    /// Replacements, each located in the original content; applied together or not at all.
    pub edits: Vec<Edit>,
    /// The `version` from read_file; the edit is refused if the file changed since.
    #[serde(default)]
    pub expected_version: Option<String>,
    /// Replace every exact occurrence of each `oldText` instead of requiring one match.
    #[serde(default)]
    pub replace_all: Option<bool>,
}

pub(crate) const MATCHING_RULES: &str = "Each `oldText` is located in the original content: first as an exact substring, \
then line by line ignoring each line's leading and trailing whitespace (the whole matched lines are replaced; `newText` is inserted as given, without re-indenting), \
then with typographic quotes, dashes, ellipsis and non-breaking spaces folded to ASCII. The first way that finds exactly one match is used. \
No match fails with code not_found, several with ambiguous; edits whose matches overlap fail with overlap; an empty oldText fails with empty_old.";

const EDIT_DESCRIPTION: &str = "Replace text in an existing workspace file. `edits` is a list of {oldText, newText}; all apply together or none do. \
MATCHING \
`replaceAll: true` replaces every exact occurrence of each oldText. \
The file must have been read in this session (or `expectedVersion` passed) and be unchanged since. \
Returns a unified diff, the new `version`, `applied` and where each match landed (`matches`: level, 0-based startLine, oldLineCount).";

/// The `edit_file` tool.
pub fn edit_tool(env: Arc<FsEnv>) -> FsTool<EditArgs> {
    FsTool::new(
        "edit_file",
        EDIT_DESCRIPTION.replace("MATCHING", MATCHING_RULES),
        ToolMode::SafeWrite,
        env,
        edit_file,
    )
}

/// A planned change to one file.
pub(crate) struct Plan {
    pub path: String,
    pub abs: std::path::PathBuf,
    pub shown: String,
    pub old: String,
    pub outcome: super::edit::EditOutcome,
}

/// Resolves, reads, gates and applies edits to one file without writing.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan_edit(
    env: &FsEnv,
    ctx: &ToolContext,
    ws: &Workspace,
    settings: &crate::config::Settings,
    path: &str,
    edits: &[Edit],
    expected: Option<&str>,
    replace_all: bool,
) -> Result<Plan, ToolResult> {
    let abs = ws.resolve_write(path).map_err(path_failure)?;
    let shown = ws.display(&abs);
    let Some(old) = read_existing(ctx, ws, path, settings.max_read_bytes)? else {
        return Err(fail(
            "not_found",
            format!("{shown} does not exist; create it with write_file"),
        ));
    };
    check_gate(
        env,
        ctx,
        &abs,
        &shown,
        Some(old.as_bytes()),
        expected,
        Gate::Edit,
        settings.require_read_before_write,
    )?;
    let outcome = apply_edits(&old, edits, &shown, replace_all).map_err(|e| {
        let mut r = fail(e.code.as_str(), format!("{e} (no change was made)"))
            .with_data("path", shown.as_str());
        if let Some(i) = e.edit {
            r = r.with_data("edit", i);
        }
        r
    })?;
    if outcome.content.len() as u64 > settings.max_read_bytes {
        return Err(fail(
            "too_large",
            format!(
                "editing {shown} would make it {} bytes, over the {}-byte limit (config max_read_bytes)",
                outcome.content.len(),
                settings.max_read_bytes
            ),
        ));
    }
    Ok(Plan {
        path: path.to_string(),
        abs,
        shown,
        old,
        outcome,
    })
}

fn edit_file(env: &FsEnv, ctx: &ToolContext, args: EditArgs) -> ToolResult {
    let settings = env.settings();
    let ws = match env.workspace(ctx, &settings) {
        Ok(ws) => ws,
        Err(e) => return fail("io", e),
    };
    let _guard = env.lock_writes();
    let plan = match plan_edit(
        env,
        ctx,
        &ws,
        &settings,
        &args.path,
        &args.edits,
        args.expected_version.as_deref(),
        args.replace_all.unwrap_or(false),
    ) {
        Ok(p) => p,
        Err(r) => return r,
    };
    if plan.outcome.content != plan.old
        && let Err(r) = atomic_write(
            ctx,
            &ws,
            &plan.path,
            &plan.abs,
            plan.outcome.content.as_bytes(),
        )
    {
        return r;
    }
    let version = version_of(plan.outcome.content.as_bytes());
    env.state
        .record(ctx.session_id.as_deref(), &plan.abs, version.clone(), false);
    ToolResult::ok(Map::new())
        .with_data("path", plan.shown)
        .with_data("version", version)
        .with_data("diff", plan.outcome.diff)
        .with_data("applied", plan.outcome.applied)
        .with_data(
            "matches",
            serde_json::to_value(&plan.outcome.matches).unwrap_or(Value::Null),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognised_exactly() {
        let name = temp_name();
        assert!(is_temp_name(OsStr::new(&name)), "{name}");
        assert_eq!(
            temp_pid(OsStr::new(&name)),
            i32::try_from(std::process::id()).ok()
        );
        assert_eq!(temp_pid(OsStr::new(".outrigger-12-0.tmp")), Some(12));
        for other in [
            ".outrigger-12.tmp",
            ".outrigger--0.tmp",
            ".outrigger-12-0.tmp~",
            ".outrigger-1x-0.tmp",
            "outrigger-12-0.tmp",
            ".outrigger-12-0.TMP",
            ".outrigger-99999999999-0.tmp",
        ] {
            assert!(!is_temp_name(OsStr::new(other)), "{other}");
        }
    }
}
