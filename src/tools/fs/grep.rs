//! `grep`: regex search over the walk, on grep-searcher/grep-regex, with Steiner's paging.
//!
//! Files are walked in parallel, sorted by path, then searched by two workers in that order
//! with a bounded look-ahead; the page is built in order, so results are deterministic and
//! the search stops as soon as the page (plus one result, to know another page exists) is
//! complete.

use std::fs::File;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::FsTool;
use super::glob::{PathFilter, walk_limit_note};
use super::paths::Workspace;
use super::read::{BINARY_SNIFF_BYTES, path_failure};
use super::walk::{Candidate, WALK_THREADS, WalkSpec, path_order, walk_files};
use super::{FsEnv, fail};
use crate::tools::{ToolContext, ToolMode, ToolResult};

/// Results per page when `headLimit` is not given.
pub const DEFAULT_HEAD_LIMIT: usize = 100;
/// The largest `headLimit` accepted.
pub const MAX_HEAD_LIMIT: usize = 500;
/// Lines a content page renders, headers, separators, context and the paging note included.
pub const PAGE_LINES: usize = 200;
/// Characters of a line shown (a window around the match on longer lines).
pub const LINE_CAP: usize = 400;
/// The largest `before`/`after`/`context`, so one result always fits on a page.
pub const MAX_CONTEXT: usize = 50;
/// Match lines a worker keeps per file before the page is known; a file with more whose
/// page lies further in is searched again for exactly that window.
const STORE_CAP: usize = MAX_HEAD_LIMIT + 1;
/// Files searched ahead of the one the page is waiting for: enough that one big file does
/// not stall the other worker.
const LOOKAHEAD: usize = 4096;
/// Stored lines buffered ahead of the page at most (content mode); past it, workers wait.
const MAX_BUFFERED_LINES: usize = 100_000;
/// Most memory one file's search may hold (a very long line, or a whole file in multiline
/// mode); a file needing more is skipped.
const HEAP_LIMIT: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Paths of files with at least one match (the default).
    #[default]
    FilesWithMatches,
    /// Matching lines with line numbers and optional context.
    Content,
    /// Matching lines per file.
    Count,
}

impl OutputMode {
    fn as_str(self) -> &'static str {
        match self {
            OutputMode::FilesWithMatches => "files_with_matches",
            OutputMode::Content => "content",
            OutputMode::Count => "count",
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression (Rust regex syntax; escape literal `{`, `(`, `.` …).
    pub pattern: String,
    /// File or directory to search, relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Only files matching these globs (`*.rs`, `src/**/*.ts`, `*.{js,ts}`; comma or space
    /// separated; a leading `!` excludes).
    #[serde(default)]
    pub glob: Option<String>,
    /// Only files of one type: c, cpp, css, go, html, java, js, json, kotlin, md, php, py,
    /// rb, rust, scala, sh, sql, swift, ts, xml, yaml.
    #[serde(default, rename = "type")]
    pub file_type: Option<String>,
    /// `files_with_matches` (default), `content` or `count`.
    #[serde(default)]
    pub output_mode: Option<OutputMode>,
    /// Case-insensitive match.
    #[serde(default)]
    pub ignore_case: Option<bool>,
    /// Let `.` match newlines and patterns span lines.
    #[serde(default)]
    pub multiline: Option<bool>,
    /// Lines of context before each match (content mode).
    #[serde(default)]
    #[schemars(range(max = 50))]
    pub before: Option<u64>,
    /// Lines of context after each match (content mode).
    #[serde(default)]
    #[schemars(range(max = 50))]
    pub after: Option<u64>,
    /// Lines of context before and after each match (content mode).
    #[serde(default)]
    #[schemars(range(max = 50))]
    pub context: Option<u64>,
    /// Page size in results (files, count rows or matching lines): default 100, at most 500.
    #[serde(default)]
    #[schemars(range(min = 1, max = 500))]
    pub head_limit: Option<u64>,
    /// Results to skip: pass the previous page's `next_offset`.
    #[serde(default)]
    pub offset: Option<u64>,
}

const DESCRIPTION: &str = "Search file contents with a regular expression (ripgrep engine and syntax). \
outputMode: `files_with_matches` (default) lists matching files, `content` shows matching lines as `line:text` under each file header (context lines as `line-text`), `count` gives matches per file. \
Filter with `glob` (`*.rs`, `src/**/*.ts`, `*.{js,ts}`) or `type` (rust, py, ts, go, …). `ignoreCase`, `multiline` (`.` matches newlines, patterns may span lines), `before`/`after`/`context` (content mode). \
Honours .gitignore/.ignore, includes hidden files, skips binary files and .git, node_modules, target, dist, build, vendor and similar directories. \
Results are paged: `headLimit` per page (default 100, max 500; content pages also stop at 200 rendered lines); when `next_offset` is present, call again with `offset` set to it. Long lines are cut to 400 characters around the match.";

/// `type` values and the extensions they select.
const TYPES: &[(&str, &[&str])] = &[
    ("c", &["c", "h"]),
    (
        "cpp",
        &[
            "cpp", "cc", "cxx", "c++", "hpp", "hh", "hxx", "h++", "h", "inl",
        ],
    ),
    ("css", &["css", "scss", "sass", "less"]),
    ("go", &["go"]),
    ("golang", &["go"]),
    ("html", &["html", "htm", "xhtml"]),
    ("java", &["java"]),
    ("js", &["js", "jsx", "mjs", "cjs"]),
    ("json", &["json", "jsonl", "json5"]),
    ("kotlin", &["kt", "kts"]),
    ("md", &["md", "markdown", "mdx"]),
    ("php", &["php", "phtml"]),
    ("py", &["py", "pyi"]),
    ("rb", &["rb", "rake", "gemspec"]),
    ("rust", &["rs"]),
    ("scala", &["scala", "sc", "sbt"]),
    ("sh", &["sh", "bash", "zsh"]),
    ("sql", &["sql"]),
    ("swift", &["swift"]),
    ("ts", &["ts", "tsx", "mts", "cts"]),
    ("xml", &["xml", "xsd", "xsl", "xslt", "svg"]),
    ("yaml", &["yaml", "yml"]),
];

fn type_extensions(name: &str) -> Result<&'static [&'static str], String> {
    TYPES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, e)| *e)
        .ok_or_else(|| {
            let names: Vec<&str> = TYPES.iter().map(|(n, _)| *n).collect();
            format!(
                "unknown type {name:?}; use one of {} (or filter with `glob`)",
                names.join(", ")
            )
        })
}

/// The `grep` tool.
pub fn tool(env: Arc<FsEnv>) -> FsTool<GrepArgs> {
    FsTool::new(
        "grep",
        DESCRIPTION.to_string(),
        ToolMode::Read,
        env,
        run_grep,
    )
}

/// Everything a search needs, validated.
pub struct Query {
    pub matcher: RegexMatcher,
    pub mode: OutputMode,
    pub multiline: bool,
    pub before: usize,
    pub after: usize,
    pub head_limit: usize,
    pub offset: u64,
}

impl Query {
    /// The error is an `invalid_pattern` message.
    pub fn from_args(args: &GrepArgs) -> Result<Query, String> {
        let multiline = args.multiline.unwrap_or(false);
        let mut b = RegexMatcherBuilder::new();
        b.case_insensitive(args.ignore_case.unwrap_or(false))
            // `^`/`$` match at line boundaries, as in rg.
            .multi_line(true);
        if multiline {
            b.dot_matches_new_line(true);
        } else {
            // Lets the searcher find candidate lines fast; a pattern that must match `\n`
            // is refused with a hint below.
            b.line_terminator(Some(b'\n'));
        }
        let matcher = b.build(&args.pattern).map_err(|e| {
            let msg = e.to_string();
            let hint = if msg.contains("\\n") || msg.contains("line terminator") {
                " — set multiline: true to match across lines"
            } else {
                " — escape regex metacharacters to search for them literally"
            };
            format!("invalid regex {:?}: {msg}{hint}", args.pattern)
        })?;
        let mode = args.output_mode.unwrap_or_default();
        let ctx = args.context.unwrap_or(0);
        let clamp = |v: Option<u64>| {
            usize::try_from(v.unwrap_or(ctx))
                .unwrap_or(MAX_CONTEXT)
                .min(MAX_CONTEXT)
        };
        let (before, after) = if mode == OutputMode::Content {
            (clamp(args.before), clamp(args.after))
        } else {
            (0, 0)
        };
        Ok(Query {
            matcher,
            mode,
            multiline,
            before,
            after,
            head_limit: args
                .head_limit
                .map_or(DEFAULT_HEAD_LIMIT, |h| {
                    usize::try_from(h).unwrap_or(MAX_HEAD_LIMIT)
                })
                .clamp(1, MAX_HEAD_LIMIT),
            offset: args.offset.unwrap_or(0),
        })
    }

    fn searcher(&self) -> Searcher {
        SearcherBuilder::new()
            // Line numbers cost a newline count over every buffer; only content shows them.
            .line_number(self.mode == OutputMode::Content)
            .multi_line(self.multiline)
            .before_context(self.before)
            .after_context(self.after)
            .heap_limit(Some(HEAP_LIMIT))
            .build()
    }
}

fn run_grep(env: &FsEnv, ctx: &ToolContext, args: GrepArgs) -> ToolResult {
    let settings = env.settings();
    let ws = match env.workspace(ctx, &settings) {
        Ok(ws) => ws,
        Err(e) => return fail("io", e),
    };
    let query = match Query::from_args(&args) {
        Ok(q) => q,
        Err(e) => return fail("invalid_pattern", e),
    };
    let path = args.path.as_deref().unwrap_or(".");
    let root = match ws.resolve_read(path) {
        Ok(r) => r,
        Err(e) => return path_failure(e),
    };
    if !root.exists() {
        return fail("not_found", format!("{path}: no such file or directory"));
    }
    let filter = match args.glob.as_deref().map(PathFilter::list).transpose() {
        Ok(f) => f,
        Err(e) => return fail("invalid_glob", e),
    };
    let exts = match args.file_type.as_deref().map(type_extensions).transpose() {
        Ok(e) => e,
        Err(e) => return fail("invalid_type", e),
    };
    let accept = |rel: &Path| {
        filter.as_ref().is_none_or(|f| f.matches(rel))
            && exts.is_none_or(|exts| {
                rel.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| exts.contains(&e))
            })
    };
    let spec = WalkSpec {
        root: &root,
        max_entries: settings.max_walk_entries,
        want_mtime: false,
        accept: &accept,
        blocked: &settings.blocked_paths,
    };
    let walked = walk_files(&ws, &spec, &ctx.cancel);
    if walked.cancelled {
        return fail("cancelled", "grep was cancelled");
    }
    let mut files = walked.files;
    files.sort_unstable_by(|a, b| path_order(&a.path, &b.path));
    // The walk-limit note takes a line of the page.
    let reserved = usize::from(walked.limited);
    let page = match search(&ws, &query, &files, reserved, &ctx.cancel) {
        Some(p) => p,
        None => return fail("cancelled", "grep was cancelled"),
    };
    let note = walked
        .limited
        .then(|| walk_limit_note(settings.max_walk_entries));
    ToolResult::ok(page.into_data(&query, note))
}

// ---------------------------------------------------------------------------------------------
// Per-file search
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Match,
    Before,
    After,
}

#[derive(Debug, Clone)]
struct Event {
    line: u64,
    text: String,
    kind: Kind,
}

/// What one search of one file found.
#[derive(Debug, Default)]
struct FileHits {
    /// Match lines seen, skipped ones included (the file's total when `more` is false).
    seen: u64,
    /// Local index of the first stored match line.
    first: u64,
    /// Stored match lines and their context, in file order.
    events: Vec<Event>,
    /// The search stopped at the store cap: there are more match lines than stored.
    more: bool,
}

struct HitSink<'a> {
    mode: OutputMode,
    matcher: &'a RegexMatcher,
    stop: &'a AtomicBool,
    /// Match lines to skip before storing (content mode).
    skip: u64,
    /// Match lines to store (content mode).
    cap: usize,
    stored: usize,
    last_stored: bool,
    pending: Vec<Event>,
    hits: FileHits,
}

impl<'a> HitSink<'a> {
    fn new(
        mode: OutputMode,
        matcher: &'a RegexMatcher,
        stop: &'a AtomicBool,
        skip: u64,
        cap: usize,
    ) -> HitSink<'a> {
        HitSink {
            mode,
            matcher,
            stop,
            skip,
            cap,
            stored: 0,
            last_stored: false,
            pending: Vec::new(),
            hits: FileHits {
                first: skip,
                ..Default::default()
            },
        }
    }
}

impl Sink for HitSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        if self.stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let first_line = mat.line_number().unwrap_or(0);
        for (k, line) in mat.lines().enumerate() {
            let line_no = first_line + k as u64;
            match self.mode {
                OutputMode::FilesWithMatches => {
                    self.hits.seen = 1;
                    return Ok(false);
                }
                OutputMode::Count => self.hits.seen += 1,
                OutputMode::Content => {
                    let idx = self.hits.seen;
                    self.hits.seen += 1;
                    if idx < self.skip {
                        self.pending.clear();
                        self.last_stored = false;
                    } else if self.stored < self.cap {
                        self.hits.events.append(&mut self.pending);
                        self.hits.events.push(Event {
                            line: line_no,
                            text: window(line, Some(self.matcher)),
                            kind: Kind::Match,
                        });
                        self.stored += 1;
                        self.last_stored = true;
                    } else {
                        self.hits.seen -= 1;
                        self.hits.more = true;
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        let event = |kind| Event {
            line: c.line_number().unwrap_or(0),
            text: window(c.bytes(), None),
            kind,
        };
        match c.kind() {
            SinkContextKind::Before => self.pending.push(event(Kind::Before)),
            SinkContextKind::After if self.last_stored => self.hits.events.push(event(Kind::After)),
            _ => {}
        }
        Ok(true)
    }
}

/// Searches one file; `None` when it is binary (a NUL in its first 8 KiB) or unreadable.
/// A NUL further in does not make a file binary, so the rest is searched as text.
fn search_file(
    ws: &Workspace,
    searcher: &mut Searcher,
    q: &Query,
    stop: &AtomicBool,
    path: &Path,
    skip: u64,
    cap: usize,
) -> Option<FileHits> {
    let mut run = || -> std::io::Result<Option<FileHits>> {
        let mut file = File::open(path)?;
        // A hard link to a blocked file is as unreadable as the file itself.
        if ws.is_blocked_link(&file.metadata()?) {
            return Ok(None);
        }
        let mut head = vec![0u8; BINARY_SNIFF_BYTES];
        let mut filled = 0;
        let mut eof = false;
        while filled < head.len() {
            match file.read(&mut head[filled..]) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        head.truncate(filled);
        if memchr::memchr(0, &head).is_some() {
            return Ok(None);
        }
        let mut sink = HitSink::new(q.mode, &q.matcher, stop, skip, cap);
        if eof {
            // Most files fit in the sniffed head: search it in place, no further reads.
            searcher.search_slice(&q.matcher, &head, &mut sink)?;
        } else {
            searcher.search_reader(&q.matcher, Cursor::new(head).chain(file), &mut sink)?;
        }
        Ok(Some(sink.hits))
    };
    match run() {
        Ok(h) => h,
        Err(e) => {
            tracing::debug!("grep: skipping {}: {e}", path.display());
            None
        }
    }
}

/// A line without its terminator, lossily decoded, cut to `LINE_CAP` characters around the
/// first match of `matcher` (or from the start).
fn window(bytes: &[u8], matcher: Option<&RegexMatcher>) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    let total = text.chars().count();
    if total <= LINE_CAP {
        return text.into_owned();
    }
    let (m_start, m_len) = matcher
        .and_then(|m| m.find(bytes).ok().flatten())
        .map(|m| {
            // Byte offsets in the raw line → characters in the decoded text (lossy decoding
            // may shift them slightly on invalid UTF-8; the window stays valid regardless).
            let pre = String::from_utf8_lossy(&bytes[..m.start()]).chars().count();
            let len = String::from_utf8_lossy(&bytes[m.start()..m.end()])
                .chars()
                .count();
            (pre, len)
        })
        .unwrap_or((0, 0));
    let lead = (LINE_CAP - m_len.min(LINE_CAP)) / 2;
    let mut start = m_start.saturating_sub(lead);
    let end = (start + LINE_CAP).min(total);
    start = end - LINE_CAP;
    let mut out = String::with_capacity(LINE_CAP * 2);
    if start > 0 {
        out.push('…');
    }
    out.extend(text.chars().skip(start).take(LINE_CAP));
    if end < total {
        out.push('…');
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Ordered parallel search and paging
// ---------------------------------------------------------------------------------------------

type Slot = Mutex<Option<Option<FileHits>>>;

fn lock(m: &Slot) -> std::sync::MutexGuard<'_, Option<Option<FileHits>>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Searches `files` (sorted) in order with `WALK_THREADS` workers and builds the page.
/// Workers fill per-file slots; this thread consumes them in order and wakes only for the slot
/// it waits on, so a file costs no channel send or wake-up. `None` when cancelled.
fn search(
    ws: &Workspace,
    q: &Query,
    files: &[Candidate],
    reserved_lines: usize,
    cancel: &CancellationToken,
) -> Option<Page> {
    let mut pager = Pager::new(q, reserved_lines);
    let slots: Vec<Slot> = files.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let want = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let buffered = AtomicUsize::new(0);
    let throttle = Mutex::new(());
    let moved = Condvar::new();
    let waiters = AtomicUsize::new(0);
    let consumer = std::thread::current();
    let first_cap = usize::try_from(q.offset)
        .unwrap_or(usize::MAX)
        .saturating_add(q.head_limit + 1)
        .min(STORE_CAP);
    std::thread::scope(|s| {
        for _ in 0..WALK_THREADS {
            let (next, want, stop, buffered) = (&next, &want, &stop, &buffered);
            let (throttle, moved, waiters, consumer, slots) =
                (&throttle, &moved, &waiters, &consumer, &slots);
            s.spawn(move || {
                let mut searcher = q.searcher();
                // The file the page waits for never waits, so the page always progresses.
                let ahead = |i: usize| {
                    let w = want.load(Ordering::SeqCst);
                    i > w
                        && (i >= w + LOOKAHEAD
                            || buffered.load(Ordering::Relaxed) > MAX_BUFFERED_LINES)
                };
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= files.len() {
                        break;
                    }
                    if ahead(i) {
                        waiters.fetch_add(1, Ordering::SeqCst);
                        let mut g = throttle.lock().unwrap_or_else(|e| e.into_inner());
                        while ahead(i) && !stop.load(Ordering::Relaxed) {
                            g = moved
                                .wait_timeout(g, Duration::from_millis(20))
                                .map(|(g, _)| g)
                                .unwrap_or_else(|e| e.into_inner().0);
                        }
                        drop(g);
                        waiters.fetch_sub(1, Ordering::SeqCst);
                    }
                    if stop.load(Ordering::Relaxed) || cancel.is_cancelled() {
                        break;
                    }
                    let hits =
                        search_file(ws, &mut searcher, q, stop, &files[i].open, 0, first_cap);
                    let lines = hits.as_ref().map_or(0, |h| h.events.len());
                    buffered.fetch_add(lines, Ordering::Relaxed);
                    *lock(&slots[i]) = Some(hits);
                    if want.load(Ordering::SeqCst) == i {
                        consumer.unpark();
                    }
                }
            });
        }
        let mut research = q.searcher();
        let mut at = 0usize;
        while at < files.len() {
            if cancel.is_cancelled() {
                break;
            }
            let Some(hits) = lock(&slots[at]).take() else {
                // Woken by the worker that fills this slot; the timeout only bounds how late
                // a cancel is noticed.
                std::thread::park_timeout(Duration::from_millis(20));
                continue;
            };
            let file = &files[at];
            buffered.fetch_sub(
                hits.as_ref().map_or(0, |h| h.events.len()),
                Ordering::Relaxed,
            );
            let done = match hits {
                Some(h) => pager.feed(ws, file, h, |skip, cap| {
                    let no_stop = AtomicBool::new(false);
                    search_file(ws, &mut research, q, &no_stop, &file.open, skip, cap)
                }),
                None => false,
            };
            at += 1;
            want.store(at, Ordering::SeqCst);
            if waiters.load(Ordering::SeqCst) > 0 {
                moved.notify_all();
            }
            if done {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        moved.notify_all();
    });
    if cancel.is_cancelled() {
        return None;
    }
    Some(pager.page)
}

/// A matching line with its context, as the page shows it.
#[derive(Debug, Clone, Serialize)]
struct Hit {
    path: String,
    line: u64,
    text: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    before: Vec<CtxLine>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    after: Vec<CtxLine>,
}

#[derive(Debug, Clone, Serialize)]
struct CtxLine {
    line: u64,
    text: String,
}

#[derive(Debug, Default)]
struct Page {
    files: Vec<String>,
    counts: Vec<(String, u64)>,
    hits: Vec<Hit>,
    next_offset: Option<u64>,
}

struct Pager {
    mode: OutputMode,
    offset: u64,
    limit: usize,
    /// Results passed so far, skipped ones included.
    global: u64,
    /// Rendered content lines used on this page.
    lines: usize,
    last_path: Option<PathBuf>,
    last_line: u64,
    page: Page,
}

impl Pager {
    fn new(q: &Query, reserved_lines: usize) -> Pager {
        Pager {
            mode: q.mode,
            offset: q.offset,
            limit: q.head_limit,
            global: 0,
            lines: reserved_lines,
            last_path: None,
            last_line: 0,
            page: Page::default(),
        }
    }

    fn taken(&self) -> usize {
        match self.mode {
            OutputMode::FilesWithMatches => self.page.files.len(),
            OutputMode::Count => self.page.counts.len(),
            OutputMode::Content => self.page.hits.len(),
        }
    }

    /// Marks that another result exists after a full page.
    fn full(&mut self) -> bool {
        self.page.next_offset = Some(self.offset + self.taken() as u64);
        true
    }

    /// Takes one file's hits in order; true when the page is complete. `research(skip, cap)`
    /// searches the file again storing `cap` match lines after the first `skip`.
    fn feed(
        &mut self,
        ws: &Workspace,
        file: &Candidate,
        mut hits: FileHits,
        mut research: impl FnMut(u64, usize) -> Option<FileHits>,
    ) -> bool {
        if hits.seen == 0 {
            return false;
        }
        match self.mode {
            OutputMode::FilesWithMatches | OutputMode::Count => {
                if self.global < self.offset {
                    self.global += 1;
                    return false;
                }
                if self.taken() == self.limit {
                    return self.full();
                }
                self.global += 1;
                let path = ws.display(&file.path);
                if self.mode == OutputMode::Count {
                    self.page.counts.push((path, hits.seen));
                } else {
                    self.page.files.push(path);
                }
                false
            }
            OutputMode::Content => {
                let base = self.global;
                let path = ws.display(&file.path);
                loop {
                    let stored = group(&path, std::mem::take(&mut hits.events));
                    let count = stored.len() as u64;
                    for (k, hit) in stored.into_iter().enumerate() {
                        if base + hits.first + (k as u64) < self.offset {
                            continue;
                        }
                        if self.taken() == self.limit || !self.fits(&file.path, &hit) {
                            return self.full();
                        }
                        self.take(&file.path, hit);
                    }
                    if !hits.more {
                        self.global = base + hits.seen;
                        return false;
                    }
                    // More match lines than were stored: search again from where the page
                    // continues.
                    let next_local = (hits.first + count).max(self.offset.saturating_sub(base));
                    let cap = self.limit - self.taken() + 1;
                    match research(next_local, cap) {
                        Some(h) if h.seen > next_local => hits = h,
                        _ => {
                            self.global = base + next_local;
                            return false;
                        }
                    }
                }
            }
        }
    }

    /// Rendered lines `hit` costs here: header, separator, context and the line.
    fn cost(&self, path: &Path, hit: &Hit) -> usize {
        let new_file = self.last_path.as_deref() != Some(path);
        let first = hit.before.first().map_or(hit.line, |c| c.line);
        let gap = !new_file && first > self.last_line + 1;
        usize::from(new_file) + usize::from(gap) + hit.before.len() + 1 + hit.after.len()
    }

    fn fits(&self, path: &Path, hit: &Hit) -> bool {
        // One line stays free for the paging note.
        self.taken() == 0 || self.lines + self.cost(path, hit) < PAGE_LINES
    }

    fn take(&mut self, path: &Path, hit: Hit) {
        self.lines += self.cost(path, &hit);
        self.last_path = Some(path.to_path_buf());
        self.last_line = hit.after.last().map_or(hit.line, |c| c.line);
        self.page.hits.push(hit);
    }
}

/// Groups a file's events into hits: before-context goes with the next match line, after-
/// context with the previous one.
fn group(path: &str, events: Vec<Event>) -> Vec<Hit> {
    let mut out: Vec<Hit> = Vec::new();
    let mut before = Vec::new();
    for e in events {
        let line = CtxLine {
            line: e.line,
            text: e.text,
        };
        match e.kind {
            Kind::Before => before.push(line),
            Kind::After => match out.last_mut() {
                Some(h) => h.after.push(line),
                None => before.push(line),
            },
            Kind::Match => out.push(Hit {
                path: path.to_string(),
                line: line.line,
                text: line.text,
                before: std::mem::take(&mut before),
                after: Vec::new(),
            }),
        }
    }
    out
}

impl Page {
    fn into_data(self, q: &Query, note: Option<String>) -> Map<String, Value> {
        let mut data = Map::new();
        let mut out: Vec<String> = Vec::new();
        data.insert("mode".into(), json!(q.mode.as_str()));
        match q.mode {
            OutputMode::FilesWithMatches => {
                out.extend(self.files.iter().cloned());
                data.insert("numFiles".into(), json!(self.files.len()));
                data.insert("files".into(), json!(self.files));
            }
            OutputMode::Count => {
                let total: u64 = self.counts.iter().map(|(_, c)| c).sum();
                out.extend(self.counts.iter().map(|(p, c)| format!("{p}:{c}")));
                data.insert("numFiles".into(), json!(self.counts.len()));
                data.insert("numMatches".into(), json!(total));
                let rows: Vec<Value> = self
                    .counts
                    .iter()
                    .map(|(p, c)| json!({"path": p, "count": c}))
                    .collect();
                data.insert("counts".into(), Value::Array(rows));
            }
            OutputMode::Content => {
                let mut files = 0usize;
                let mut last: Option<(&str, u64)> = None;
                for h in &self.hits {
                    let first = h.before.first().map_or(h.line, |c| c.line);
                    match last {
                        Some((p, l)) if p == h.path => {
                            if first > l + 1 {
                                out.push("--".into());
                            }
                        }
                        _ => {
                            files += 1;
                            out.push(h.path.clone());
                        }
                    }
                    out.extend(h.before.iter().map(|c| format!("{}-{}", c.line, c.text)));
                    out.push(format!("{}:{}", h.line, h.text));
                    out.extend(h.after.iter().map(|c| format!("{}-{}", c.line, c.text)));
                    last = Some((&h.path, h.after.last().map_or(h.line, |c| c.line)));
                }
                data.insert("numFiles".into(), json!(files));
                data.insert("numMatches".into(), json!(self.hits.len()));
                data.insert("matches".into(), json!(self.hits));
            }
        }
        if out.is_empty() {
            out.push(
                if q.offset > 0 {
                    "No more results"
                } else if q.mode == OutputMode::FilesWithMatches {
                    "No files found"
                } else {
                    "No matches found"
                }
                .into(),
            );
        }
        if let Some(n) = self.next_offset {
            out.push(format!("[more results: call grep again with offset {n}]"));
            data.insert("next_offset".into(), json!(n));
        }
        data.insert(
            "truncated".into(),
            json!(self.next_offset.is_some() || note.is_some()),
        );
        if let Some(note) = note {
            out.push(format!("({note})"));
            data.insert("note".into(), json!(note));
        }
        data.insert("output".into(), json!(out.join("\n")));
        data
    }
}

#[cfg(test)]
mod tests;
