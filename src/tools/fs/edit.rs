//! The edit algorithm shared by `edit_file`, `apply_patch` and `workspace.apply_edits`
//! (reference §3.8): every edit is located against the original content by the first match
//! level (exact → trim → unicode) that yields exactly one match; spans must not overlap; the
//! batch applies atomically; the result carries a unified diff (3 context lines, hunks
//! closer than 7 unchanged lines merged).

use std::collections::HashMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Context lines around each diff hunk. With this radius `similar` merges hunks whose gap is
/// at most 2 × 3 = 6 unchanged lines, the reference rule.
const DIFF_CONTEXT: usize = 3;
/// How long the diff may search for a minimal edit script before settling for a coarser
/// (still correct) one: a pathological input must not stall the call.
const DIFF_TIMEOUT: Duration = Duration::from_secs(2);

/// One replacement.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Edit {
    /// Text to find: non-empty, matching exactly one place (levels: see the description).
    pub old_text: String,
    /// Replacement text, inserted verbatim.
    pub new_text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Exact,
    Trim,
    Unicode,
}

/// Where one replacement landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchInfo {
    pub level: Level,
    /// 0-based line index of the match start.
    pub start_line: usize,
    pub old_line_count: usize,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EditOutcome {
    pub content: String,
    pub diff: String,
    /// Number of edits applied (each counts once, even under `replaceAll`).
    pub applied: usize,
    /// In file order.
    pub matches: Vec<MatchInfo>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EditCode {
    EmptyOld,
    NoEdits,
    Ambiguous,
    NotFound,
    Overlap,
}

impl EditCode {
    pub fn as_str(self) -> &'static str {
        match self {
            EditCode::EmptyOld => "empty_old",
            EditCode::NoEdits => "no_edits",
            EditCode::Ambiguous => "ambiguous",
            EditCode::NotFound => "not_found",
            EditCode::Overlap => "overlap",
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct EditError {
    pub code: EditCode,
    pub message: String,
    /// The 0-based index of the offending edit, when one is to blame.
    pub edit: Option<usize>,
}

/// A located replacement: byte span in the original content.
#[derive(Debug, Clone)]
struct Span {
    start: usize,
    end: usize,
    edit: usize,
    level: Level,
}

/// Applies `edits` to `content`. `file_path` labels the diff (`a/<path>`, `b/<path>`).
/// With `replace_all`, an edit whose `oldText` occurs exactly replaces every (non-overlapping)
/// occurrence; otherwise it must match one place.
pub fn apply_edits(
    content: &str,
    edits: &[Edit],
    file_path: &str,
    replace_all: bool,
) -> Result<EditOutcome, EditError> {
    if edits.is_empty() {
        return Err(EditError {
            code: EditCode::NoEdits,
            message: format!(
                "no edits given for {file_path}; pass at least one {{oldText, newText}}"
            ),
            edit: None,
        });
    }
    if let Some(i) = edits.iter().position(|e| e.old_text.is_empty()) {
        return Err(EditError {
            code: EditCode::EmptyOld,
            message: format!(
                "edit {i} for {file_path} has an empty oldText; quote the text to replace (to create a file, write it whole)"
            ),
            edit: Some(i),
        });
    }
    let lines = LineIndex::new(content);
    let mut folded: Option<Folded> = None;
    let mut spans = Vec::new();
    for (i, e) in edits.iter().enumerate() {
        if replace_all {
            let all: Vec<Span> = content
                .match_indices(e.old_text.as_str())
                .map(|(s, m)| Span {
                    start: s,
                    end: s + m.len(),
                    edit: i,
                    level: Level::Exact,
                })
                .collect();
            if !all.is_empty() {
                spans.extend(all);
                continue;
            }
        }
        spans.push(locate(content, &lines, &mut folded, e, i, file_path)?);
    }
    spans.sort_by_key(|s| (s.start, s.end));
    for w in spans.windows(2) {
        if w[1].start < w[0].end {
            let (a, b) = (w[0].edit.min(w[1].edit), w[0].edit.max(w[1].edit));
            return Err(EditError {
                code: EditCode::Overlap,
                message: format!(
                    "edits {a} and {b} for {file_path} overlap (both touch line {}); merge them into one edit",
                    lines.line_of(w[1].start) + 1
                ),
                edit: Some(b),
            });
        }
    }
    let mut out = String::with_capacity(content.len());
    let mut at = 0;
    let mut matches = Vec::with_capacity(spans.len());
    for s in &spans {
        out.push_str(&content[at..s.start]);
        out.push_str(&edits[s.edit].new_text);
        at = s.end;
        matches.push(MatchInfo {
            level: s.level,
            start_line: lines.line_of(s.start),
            old_line_count: content[s.start..s.end].matches('\n').count() + 1,
        });
    }
    out.push_str(&content[at..]);
    let diff = unified_diff(content, &out, file_path);
    Ok(EditOutcome {
        content: out,
        diff,
        applied: edits.len(),
        matches,
    })
}

/// A unified diff with `--- a/<path>` / `+++ b/<path>` headers; empty when nothing changed.
pub fn unified_diff(old: &str, new: &str, file_path: &str) -> String {
    if old == new {
        return String::new();
    }
    let diff = similar::TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new);
    diff.unified_diff()
        .context_radius(DIFF_CONTEXT)
        .header(&format!("a/{file_path}"), &format!("b/{file_path}"))
        .to_string()
}

fn locate(
    content: &str,
    lines: &LineIndex,
    folded: &mut Option<Folded>,
    e: &Edit,
    i: usize,
    file_path: &str,
) -> Result<Span, EditError> {
    let mut ambiguous = 0usize;
    let old = e.old_text.as_str();
    let span = |(start, end): (usize, usize), level| Span {
        start,
        end,
        edit: i,
        level,
    };
    match find_exact(content, old) {
        Found::One(s) => return Ok(span(s, Level::Exact)),
        Found::Many(n) => ambiguous = ambiguous.max(n),
        Found::None => {}
    }
    match find_trim(content, lines, old) {
        Found::One(s) => return Ok(span(s, Level::Trim)),
        Found::Many(n) => ambiguous = ambiguous.max(n),
        Found::None => {}
    }
    // Folding only changes something when either side has a foldable character.
    if content.chars().any(|c| fold(c) != c) || old.chars().any(|c| fold(c) != c) {
        let f = folded.get_or_insert_with(|| Folded::new(content));
        match f.find(old) {
            Found::One(s) => return Ok(span(s, Level::Unicode)),
            Found::Many(n) => ambiguous = ambiguous.max(n),
            Found::None => {}
        }
    }
    if ambiguous > 0 {
        Err(EditError {
            code: EditCode::Ambiguous,
            message: format!(
                "edit {i}: oldText matches {ambiguous} places in {file_path}; include more surrounding lines so it matches one place, or pass replaceAll: true to replace every exact occurrence"
            ),
            edit: Some(i),
        })
    } else {
        Err(EditError {
            code: EditCode::NotFound,
            message: format!(
                "edit {i}: oldText not found in {file_path} (tried exact, whitespace-trimmed lines and unicode-punctuation matching); read the file again and copy the text exactly"
            ),
            edit: Some(i),
        })
    }
}

enum Found {
    None,
    One((usize, usize)),
    /// At least two; the count seen.
    Many(usize),
}

/// Most matches counted when reporting ambiguity.
const MAX_COUNTED: usize = 1000;

/// Every occurrence, overlapping ones included (`aa` is ambiguous in `aaa`), up to
/// `MAX_COUNTED`.
///
/// Restarting a substring search one character past each hit re-reads the whole needle per
/// hit (hits × needle length: quadratic for a long periodic needle), so after a hit the
/// search goes on with Knuth–Morris–Pratt, which carries what it matched over, until no
/// prefix of the needle is pending, and only then hands back to the fast search. Both look
/// at bytes: the needle starts with a character's first byte, which valid UTF-8 has only at
/// character boundaries, so the byte hits are the character hits.
fn find_all_overlapping(hay: &str, needle: &str) -> Vec<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let mut out = Vec::new();
    if n.is_empty() {
        return out;
    }
    let finder = memchr::memmem::Finder::new(n);
    let mut fallback: Option<Vec<usize>> = None;
    let mut from = 0;
    while let Some(p) = finder.find(&h[from..]) {
        let at = from + p;
        out.push(at);
        if out.len() >= MAX_COUNTED {
            return out;
        }
        let f = fallback.get_or_insert_with(|| prefix_function(n));
        // The KMP state after a whole match: the longest border of the needle.
        let mut q = f[n.len() - 1];
        let mut j = at + n.len();
        while q > 0 && j < h.len() {
            while q > 0 && h[j] != n[q] {
                q = f[q - 1];
            }
            if h[j] == n[q] {
                q += 1;
            }
            j += 1;
            if q == n.len() {
                out.push(j - n.len());
                if out.len() >= MAX_COUNTED {
                    return out;
                }
                q = f[q - 1];
            }
        }
        // Nothing of the needle is pending before `j`: any further hit starts at `j` or later.
        from = j;
    }
    out
}

fn find_exact(content: &str, old: &str) -> Found {
    let all = find_all_overlapping(content, old);
    match all.as_slice() {
        [] => Found::None,
        [s] => Found::One((*s, s + old.len())),
        many => Found::Many(many.len()),
    }
}

/// Byte offsets of line starts; lines are split on `\n`.
struct LineIndex {
    starts: Vec<usize>,
    len: usize,
}

impl LineIndex {
    fn new(content: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', content.as_bytes()).map(|i| i + 1));
        LineIndex {
            starts,
            len: content.len(),
        }
    }

    fn count(&self) -> usize {
        self.starts.len()
    }

    /// Byte span of line `i` without its newline.
    fn span(&self, i: usize) -> (usize, usize) {
        let start = self.starts[i];
        let end = self.starts.get(i + 1).map_or(self.len, |n| n - 1);
        (start, end)
    }

    fn line_of(&self, offset: usize) -> usize {
        self.starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1)
    }
}

/// Line-wise match ignoring each line's leading/trailing whitespace. The span covers whole
/// lines and ends before the last matched line's newline.
///
/// Comparing the wanted lines at every start line costs lines × wanted lines (an 80,000-line
/// crafted input took 10 s), so the wanted lines are numbered and the sequence of numbers is
/// searched with Knuth–Morris–Pratt: linear, and the same hits in the same order.
fn find_trim(content: &str, lines: &LineIndex, old: &str) -> Found {
    let want: Vec<&str> = old.split('\n').map(str::trim).collect();
    let k = want.len();
    if k > lines.count() {
        return Found::None;
    }
    let mut ids: HashMap<&str, usize> = HashMap::with_capacity(k);
    let pattern: Vec<usize> = want
        .iter()
        .map(|w| {
            let next = ids.len();
            *ids.entry(w).or_insert(next)
        })
        .collect();
    let fallback = prefix_function(&pattern);
    let mut hits = Vec::new();
    // How many wanted lines the lines just seen match.
    let mut q = 0;
    for i in 0..lines.count() {
        let (s, e) = lines.span(i);
        // A line that is none of the wanted ones breaks every partial match at once.
        let Some(&id) = ids.get(content[s..e].trim()) else {
            q = 0;
            continue;
        };
        while q > 0 && pattern[q] != id {
            q = fallback[q - 1];
        }
        if pattern[q] == id {
            q += 1;
        }
        if q == k {
            hits.push(i + 1 - k);
            if hits.len() >= MAX_COUNTED {
                break;
            }
            q = fallback[q - 1];
        }
    }
    match hits.as_slice() {
        [] => Found::None,
        [i] => Found::One((lines.span(*i).0, lines.span(i + k - 1).1)),
        many => Found::Many(many.len()),
    }
}

/// The KMP prefix function: `out[i]` is the length of the longest proper prefix of
/// `p[..=i]` that is also its suffix.
fn prefix_function<T: PartialEq>(p: &[T]) -> Vec<usize> {
    let mut out = vec![0; p.len()];
    let mut q = 0;
    for i in 1..p.len() {
        while q > 0 && p[i] != p[q] {
            q = out[q - 1];
        }
        if p[i] == p[q] {
            q += 1;
        }
        out[i] = q;
    }
    out
}

/// The 1:1 punctuation folding of the unicode level.
fn fold(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
        '\u{2014}' | '\u{2013}' | '\u{2015}' => '-',
        '\u{2026}' | '\u{00B7}' => '.',
        '\u{00A0}' => ' ',
        other => other,
    }
}

fn fold_str(s: &str) -> String {
    s.chars().map(fold).collect()
}

/// The content folded, with what it takes to map folded byte offsets back. Folding maps a
/// character to one character, so only byte widths shift; `shifts` records, at each folded
/// offset after a narrowed character, the cumulative bytes dropped so far.
struct Folded {
    text: String,
    shifts: Vec<(usize, usize)>,
}

impl Folded {
    fn new(content: &str) -> Folded {
        let mut text = String::with_capacity(content.len());
        let mut shifts = Vec::new();
        let mut dropped = 0;
        for c in content.chars() {
            let f = fold(c);
            text.push(f);
            if f.len_utf8() != c.len_utf8() {
                dropped += c.len_utf8() - f.len_utf8();
                shifts.push((text.len(), dropped));
            }
        }
        Folded { text, shifts }
    }

    fn original(&self, folded_offset: usize) -> usize {
        let i = self.shifts.partition_point(|(at, _)| *at <= folded_offset);
        folded_offset + if i == 0 { 0 } else { self.shifts[i - 1].1 }
    }

    fn find(&self, old: &str) -> Found {
        let needle = fold_str(old);
        let all = find_all_overlapping(&self.text, &needle);
        match all.as_slice() {
            [] => Found::None,
            [s] => Found::One((self.original(*s), self.original(s + needle.len()))),
            many => Found::Many(many.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ed(o: &str, n: &str) -> Edit {
        Edit {
            old_text: o.into(),
            new_text: n.into(),
        }
    }

    fn apply(content: &str, edits: &[Edit]) -> Result<EditOutcome, EditError> {
        apply_edits(content, edits, "file", false)
    }

    #[test]
    fn exact_level() {
        let r = apply("a\nb\nc\n", &[ed("b", "B")]).unwrap();
        assert_eq!(r.content, "a\nB\nc\n");
        assert_eq!(r.applied, 1);
        assert_eq!(
            r.matches,
            vec![MatchInfo {
                level: Level::Exact,
                start_line: 1,
                old_line_count: 1
            }]
        );
        assert_eq!(
            r.diff,
            "--- a/file\n+++ b/file\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
    }

    #[test]
    fn trailing_newline_counts_a_line() {
        let r = apply("a\nb\nc\n", &[ed("b\n", "")]).unwrap();
        assert_eq!(r.content, "a\nc\n");
        assert_eq!(r.matches[0].old_line_count, 2);
    }

    #[test]
    fn trim_level_inserts_verbatim() {
        let content = "fn f() {\n    let x = 1;\n    let y = 2;\n}\n";
        let r = apply(content, &[ed("let x = 1;\nlet y = 2;", "let z = 3;")]).unwrap();
        assert_eq!(r.matches[0].level, Level::Trim);
        assert_eq!(r.matches[0].start_line, 1);
        assert_eq!(r.matches[0].old_line_count, 2);
        // Indentation is not re-applied.
        assert_eq!(r.content, "fn f() {\nlet z = 3;\n}\n");
    }

    #[test]
    fn unicode_level_maps_offsets_back() {
        let content = "say “hi” — now\nnext ‘x’\n";
        let r = apply(content, &[ed("\"hi\" - now", "bye")]).unwrap();
        assert_eq!(r.matches[0].level, Level::Unicode);
        assert_eq!(r.content, "say bye\nnext ‘x’\n");
        let r = apply(content, &[ed("'x'", "y")]).unwrap();
        assert_eq!(r.content, "say “hi” — now\nnext y\n");
        assert_eq!(r.matches[0].start_line, 1);
        // NBSP and ellipsis fold too.
        let r = apply("a\u{00A0}b…\n", &[ed("a b.", "c")]).unwrap();
        assert_eq!(r.content, "c\n");
    }

    #[test]
    fn error_codes() {
        assert_eq!(apply("x", &[]).unwrap_err().code, EditCode::NoEdits);
        assert_eq!(
            apply("x", &[ed("", "y")]).unwrap_err().code,
            EditCode::EmptyOld
        );
        assert_eq!(
            apply("x", &[ed("zz", "y")]).unwrap_err().code,
            EditCode::NotFound
        );
        let e = apply("a\na\n", &[ed("a", "b")]).unwrap_err();
        assert_eq!(e.code, EditCode::Ambiguous);
        assert_eq!(e.edit, Some(0));
        // Overlapping occurrences are ambiguous too.
        assert_eq!(
            apply("aaa", &[ed("aa", "b")]).unwrap_err().code,
            EditCode::Ambiguous
        );
        let e = apply("hello world\n", &[ed("hello wo", "x"), ed("lo world", "y")]).unwrap_err();
        assert_eq!(e.code, EditCode::Overlap);
    }

    #[test]
    fn ambiguous_exact_falls_through_to_a_unique_later_level() {
        // "x = 1" occurs twice exactly, but only one line is exactly it once trimmed.
        let content = "  x = 1\nx = 1 + 2\n";
        let r = apply(content, &[ed("x = 1", "y")]).unwrap();
        assert_eq!(r.matches[0].level, Level::Trim);
        assert_eq!(r.content, "y\nx = 1 + 2\n");
    }

    #[test]
    fn batch_is_atomic_and_in_file_order() {
        let content = "one\ntwo\nthree\n";
        let r = apply(content, &[ed("three", "3"), ed("one", "1")]).unwrap();
        assert_eq!(r.content, "1\ntwo\n3\n");
        assert_eq!(r.applied, 2);
        assert_eq!(r.matches[0].start_line, 0);
        assert_eq!(r.matches[1].start_line, 2);
        assert!(apply(content, &[ed("one", "1"), ed("nope", "x")]).is_err());
    }

    #[test]
    fn replace_all() {
        let r = apply_edits("a b a b a", &[ed("a", "x")], "f", true).unwrap();
        assert_eq!(r.content, "x b x b x");
        assert_eq!(r.matches.len(), 3);
        assert_eq!(r.applied, 1);
    }

    /// The search as it was before KMP: restart one character past each hit.
    fn naive_overlapping(hay: &str, needle: &str) -> Vec<usize> {
        let mut out = Vec::new();
        let mut from = 0;
        while let Some(p) = hay[from..].find(needle) {
            let at = from + p;
            out.push(at);
            if out.len() >= MAX_COUNTED {
                break;
            }
            from = at + hay[at..].chars().next().map_or(1, char::len_utf8);
        }
        out
    }

    /// The trim level as it was before KMP: compare the wanted lines at every start line.
    fn naive_trim(content: &str, old: &str) -> Option<Vec<usize>> {
        let lines: Vec<&str> = content.split('\n').map(str::trim).collect();
        let want: Vec<&str> = old.split('\n').map(str::trim).collect();
        if want.len() > lines.len() {
            return None;
        }
        let hits: Vec<usize> = (0..=lines.len() - want.len())
            .filter(|&i| lines[i..i + want.len()] == want[..])
            .take(MAX_COUNTED)
            .collect();
        Some(hits)
    }

    /// Small strings over a tiny alphabet (multi-byte, whitespace and newlines included),
    /// so borders, periods and overlaps are common.
    fn random_text(seed: &mut u64, max_len: usize) -> String {
        const ALPHABET: [&str; 6] = ["a", "b", " ", "\n", "é", "a\n"];
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let len = (*seed >> 33) as usize % (max_len + 1);
        (0..len)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ALPHABET[(*seed >> 33) as usize % ALPHABET.len()]
            })
            .collect()
    }

    #[test]
    fn linear_searches_agree_with_the_naive_ones() {
        let mut seed = 7;
        for _ in 0..20_000 {
            let hay = random_text(&mut seed, 40);
            let needle = random_text(&mut seed, 6);
            if needle.is_empty() {
                continue;
            }
            assert_eq!(
                find_all_overlapping(&hay, &needle),
                naive_overlapping(&hay, &needle),
                "{hay:?} / {needle:?}"
            );
            let got = match find_trim(&hay, &LineIndex::new(&hay), &needle) {
                Found::None => Some(vec![]),
                Found::One((s, _)) => Some(vec![LineIndex::new(&hay).line_of(s)]),
                Found::Many(n) => Some(vec![usize::MAX; n]),
            };
            let want = naive_trim(&hay, &needle).map(|h| match h.len() {
                0 | 1 => h,
                n => vec![usize::MAX; n],
            });
            assert_eq!(got, want.or(Some(vec![])), "{hay:?} / {needle:?}");
        }
        // The cap holds for both.
        let hay = "a".repeat(3000);
        assert_eq!(find_all_overlapping(&hay, "aa").len(), MAX_COUNTED);
        let lines = "x\n".repeat(3000);
        assert!(matches!(
            find_trim(&lines, &LineIndex::new(&lines), "x"),
            Found::Many(MAX_COUNTED)
        ));
    }

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line{i}\n")).collect()
    }

    fn hunks(diff: &str) -> usize {
        diff.lines().filter(|l| l.starts_with("@@")).count()
    }

    #[test]
    fn diff_hunks_merge_within_six_lines() {
        let c = numbered(30);
        // Lines 2 and 25: far apart → two hunks.
        let r = apply(&c, &[ed("line2\n", "L2\n"), ed("line25\n", "L25\n")]).unwrap();
        assert_eq!(hunks(&r.diff), 2, "{}", r.diff);
        // Adjacent → one hunk.
        let r = apply(&c, &[ed("line2\n", "L2\n"), ed("line3\n", "L3\n")]).unwrap();
        assert_eq!(hunks(&r.diff), 1);
        // Gap of 6 unchanged lines (changes on 10 and 17) → merged; gap of 7 → split.
        let r = apply(&c, &[ed("line10\n", "X\n"), ed("line17\n", "Y\n")]).unwrap();
        assert_eq!(hunks(&r.diff), 1, "{}", r.diff);
        let r = apply(&c, &[ed("line10\n", "X\n"), ed("line18\n", "Y\n")]).unwrap();
        assert_eq!(hunks(&r.diff), 2, "{}", r.diff);
    }
}
