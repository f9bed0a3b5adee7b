//! Oracles shared by the cargo-fuzz targets (`fuzz_targets/*.rs`) and the proptest module
//! (`tests/it/fuzz_props.rs`), included by both with `#[path]`: what must hold of the
//! parsers' outputs, written the obvious (slow, copying) way. Each check returns the first
//! violation as text; the fuzz target panics with it, the proptest fails the case.
#![allow(dead_code)] // each includer uses its own subset

use outrigger::llm::sse::OwnedFrame;
use outrigger::tools::fs::edit::{Edit, EditCode, Level, apply_edits};

macro_rules! ensure {
    ($cond:expr) => {
        if !$cond {
            return Err(format!("{} does not hold", stringify!($cond)));
        }
    };
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

macro_rules! ensure_eq {
    ($a:expr, $b:expr) => {
        if ($a) != ($b) {
            return Err(format!(
                "{} != {}: {:?} vs {:?}",
                stringify!($a),
                stringify!($b),
                $a,
                $b
            ));
        }
    };
    ($a:expr, $b:expr, $($fmt:tt)+) => {
        if ($a) != ($b) {
            return Err(format!($($fmt)+));
        }
    };
}

/// Every exact occurrence, overlapping ones included.
pub fn occurrences(hay: &str, needle: &str) -> usize {
    (0..=hay.len())
        .filter(|&i| hay.is_char_boundary(i) && hay[i..].starts_with(needle))
        .count()
}

/// The length of `s`'s first line as `diff_lines` splits it, without splitting the rest
/// (splitting the whole remaining diff per line made the oracle quadratic: a 1.2 KB input
/// took minutes under the fuzzer).
fn first_line_len(s: &str) -> usize {
    let b = s.as_bytes();
    match b.iter().position(|&c| c == b'\n' || c == b'\r') {
        None => s.len(),
        Some(i) if b[i] == b'\r' && b.get(i + 1) == Some(&b'\n') => i + 2,
        Some(i) => i + 1,
    }
}

/// Lines as `similar` splits them: `\r\n`, `\r` or `\n` ends a line and stays attached.
pub fn diff_lines(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        let end = match b[i] {
            b'\r' if b.get(i + 1) == Some(&b'\n') => i + 2,
            b'\r' | b'\n' => i + 1,
            _ => {
                i += 1;
                continue;
            }
        };
        out.push(&s[start..end]);
        start = end;
        i = end;
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// Applies a unified diff of `file` (as `unified_diff` writes it) to `old`; `None` when a
/// hunk does not fit `old` or the diff is malformed.
pub fn apply_unified(old: &str, diff: &str) -> Option<String> {
    if diff.is_empty() {
        return Some(old.to_string());
    }
    const NO_NEWLINE: &str = "\\ No newline at end of file\n";
    let old_lines = diff_lines(old);
    let mut rest = diff.strip_prefix("--- a/file\n+++ b/file\n")?;
    let mut out = String::new();
    let mut at = 0;
    while !rest.is_empty() {
        let nl = rest.find('\n')?;
        let header = rest[..nl].strip_prefix("@@ -")?.strip_suffix(" @@")?;
        rest = &rest[nl + 1..];
        let (range, _) = header.split_once(" +")?;
        let (start, len) = match range.split_once(',') {
            Some((s, l)) => (s.parse::<usize>().ok()?, l.parse::<usize>().ok()?),
            None => (range.parse::<usize>().ok()?, 1),
        };
        let first = if len == 0 {
            start
        } else {
            start.checked_sub(1)?
        };
        if first < at {
            return None;
        }
        for l in old_lines.get(at..first)? {
            out.push_str(l);
        }
        at = first;
        while let Some(tag) = rest.chars().next().filter(|c| matches!(c, ' ' | '-' | '+')) {
            rest = &rest[1..];
            let end = first_line_len(rest);
            let mut value = &rest[..end];
            rest = &rest[end..];
            if let Some(r) = rest.strip_prefix(NO_NEWLINE) {
                value = value.strip_suffix('\n')?;
                rest = r;
            }
            match tag {
                '+' => out.push_str(value),
                _ => {
                    if *old_lines.get(at)? != value {
                        return None;
                    }
                    if tag == ' ' {
                        out.push_str(value);
                    }
                    at += 1;
                }
            }
        }
    }
    for l in old_lines.get(at..)? {
        out.push_str(l);
    }
    Some(out)
}

/// The splitter's documented rules, written the obvious (quadratic, copying) way: lines end
/// at `\n` with one `\r` before it dropped; a last unterminated line counts (its `\r` dropped
/// too); a blank line dispatches; `:` lines are comments; `field:value` with one optional
/// space; `data` lines join with `\n`; `event` is kept (lossy UTF-8) until the next dispatch;
/// an event without data is not dispatched.
pub fn sse_oracle(body: &[u8]) -> Vec<OwnedFrame> {
    let strip_cr = |l: &[u8]| -> Vec<u8> { l.strip_suffix(b"\r").unwrap_or(l).to_vec() };
    let mut lines: Vec<Vec<u8>> = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.iter().position(|&b| b == b'\n') {
        lines.push(strip_cr(&rest[..i]));
        rest = &rest[i + 1..];
    }
    if !rest.is_empty() {
        lines.push(strip_cr(rest));
    }
    let mut out = Vec::new();
    let mut data: Option<Vec<u8>> = None;
    let mut event: Option<String> = None;
    let mut dispatch = |data: &mut Option<Vec<u8>>, event: &mut Option<String>| {
        let e = event.take();
        if let Some(d) = data.take() {
            out.push((e, d));
        }
    };
    for l in &lines {
        if l.is_empty() {
            dispatch(&mut data, &mut event);
            continue;
        }
        if l[0] == b':' {
            continue;
        }
        let (name, value) = match l.iter().position(|&b| b == b':') {
            Some(c) => {
                let v = &l[c + 1..];
                (&l[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&l[..], &[][..]),
        };
        match name {
            b"data" => match &mut data {
                Some(d) => {
                    d.push(b'\n');
                    d.extend_from_slice(value);
                }
                None => data = Some(value.to_vec()),
            },
            b"event" => event = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
    }
    dispatch(&mut data, &mut event);
    out
}

/// What must hold of any `apply_edits` call, whatever its outcome.
pub fn check_edits(content: &str, edits: &[Edit], replace_all: bool) -> Result<(), String> {
    let got = apply_edits(content, edits, "file", replace_all);
    let first_empty = edits.iter().position(|e| e.old_text.is_empty());
    match &got {
        Err(e) => {
            ensure!(e.edit.is_none_or(|i| i < edits.len()), "{:?}", e);
            if edits.is_empty() {
                ensure_eq!(e.code, EditCode::NoEdits);
            } else if let Some(i) = first_empty {
                ensure_eq!(e.code, EditCode::EmptyOld);
                ensure_eq!(e.edit, Some(i));
            }
            if e.code == EditCode::NotFound {
                let Some(i) = e.edit else {
                    return Err("not_found names no edit".into());
                };
                ensure_eq!(occurrences(content, &edits[i].old_text), 0);
            }
        }
        Ok(o) => {
            ensure!(!edits.is_empty() && first_empty.is_none());
            ensure_eq!(o.applied, edits.len());
            if !replace_all {
                ensure_eq!(o.matches.len(), edits.len());
                if let [e] = edits {
                    let exact = occurrences(content, &e.old_text) == 1;
                    ensure_eq!(o.matches[0].level == Level::Exact, exact, "{:?}", o.matches);
                }
            } else if let [e] = edits
                && content.contains(e.old_text.as_str())
            {
                ensure_eq!(o.content, content.replace(&e.old_text, &e.new_text));
            }
            ensure!(
                o.matches
                    .windows(2)
                    .all(|w| w[0].start_line <= w[1].start_line)
            );
            ensure_eq!(o.diff.is_empty(), o.content == content);
            let rebuilt = apply_unified(content, &o.diff);
            ensure_eq!(
                rebuilt.as_deref(),
                Some(o.content.as_str()),
                "the diff does not turn {:?} into {:?}:\n{}",
                content,
                o.content,
                o.diff
            );
        }
    }
    // Atomic: one more edit that matches nowhere fails the whole batch.
    let mut more = edits.to_vec();
    more.push(Edit {
        old_text: "\u{1}nowhere\u{2}".into(),
        new_text: "x".into(),
    });
    let Err(e) = apply_edits(content, &more, "file", replace_all) else {
        return Err("one more edit that matches nowhere did not fail the batch".into());
    };
    if got.is_ok() {
        ensure_eq!(e.code, EditCode::NotFound);
        ensure_eq!(e.edit, Some(edits.len()));
    }
    Ok(())
}

/// Whether a resolved path has a `.git` component (any case), where writes are refused.
pub fn in_git_dir(p: &std::path::Path) -> bool {
    p.components().any(|c| {
        c.as_os_str()
            .to_str()
            .is_some_and(|s| s.eq_ignore_ascii_case(".git"))
    })
}

/// Writes and reads of one path agree, except that a write into a `.git` directory is
/// refused (`GitDir`) where the read resolves.
pub fn check_write_read<E: std::fmt::Debug>(
    given: &str,
    write: &Result<std::path::PathBuf, E>,
    read: &Result<std::path::PathBuf, E>,
) -> Result<(), String> {
    match (write, read) {
        (Ok(w), _) if in_git_dir(w) => Err(format!("{given:?}: a write into .git resolved: {w:?}")),
        (Err(e), Ok(r)) if in_git_dir(r) && format!("{e:?}").starts_with("GitDir") => Ok(()),
        (w, r) if w.is_ok() != r.is_ok() => Err(format!("{given:?}: {w:?} / {r:?}")),
        _ => Ok(()),
    }
}
