//! A git config file reader that follows git's own parser (`config.c`) closely enough to see
//! every entry git would see, and the allowlist of entries that never make git run anything.
//! A file is sanitised by re-writing it from the entries kept, in canonical form, so nothing
//! this reader did not understand survives.

use std::collections::HashSet;

/// One `section[.subsection].key = value` entry. `section` and `key` are lower-cased like
/// git's; `subsection` keeps its case (lower-cased in the old `[section.sub]` form, as git
/// does); `value` is `None` for a bare `key` (boolean true).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    pub section: String,
    pub subsection: Option<String>,
    pub key: String,
    pub value: Option<String>,
}

impl Entry {
    /// `section.subsection.key`, as `git config --list` prints it.
    pub fn name(&self) -> String {
        match &self.subsection {
            Some(s) => format!("{}.{s}.{}", self.section, self.key),
            None => format!("{}.{}", self.section, self.key),
        }
    }
}

/// What a file parses to: its entries up to the first error, and whether there was one (git
/// refuses such a file altogether).
#[derive(Debug, Default)]
pub struct Parsed {
    pub entries: Vec<Entry>,
    pub error: bool,
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

struct Reader<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    eof: bool,
}

impl Reader<'_> {
    /// git's `get_next_char`: CRLF reads as LF, and the end of input as a final LF.
    fn next(&mut self) -> char {
        match self.chars.next() {
            None => {
                self.eof = true;
                '\n'
            }
            Some('\r') if self.chars.peek() == Some(&'\n') => {
                self.chars.next();
                '\n'
            }
            Some(c) => c,
        }
    }
}

/// Parses `text` like git does.
pub fn parse(text: &str) -> Parsed {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut r = Reader {
        chars: text.chars().peekable(),
        eof: false,
    };
    let mut out = Parsed::default();
    let mut section: Option<(String, Option<String>)> = None;
    let mut comment = false;
    loop {
        let c = r.next();
        if c == '\n' {
            if r.eof {
                return out;
            }
            comment = false;
            continue;
        }
        if comment || is_space(c) {
            continue;
        }
        if c == '#' || c == ';' {
            comment = true;
            continue;
        }
        if c == '[' {
            match base_var(&mut r) {
                Some(s) => section = Some(s),
                None => break,
            }
            continue;
        }
        if !c.is_ascii_alphabetic() {
            break;
        }
        let Some((sec, sub)) = section.clone() else {
            // A key before any section: git refuses the file.
            break;
        };
        let mut key = String::from(c.to_ascii_lowercase());
        let mut c = r.next();
        while !r.eof && is_key_char(c) {
            key.push(c.to_ascii_lowercase());
            c = r.next();
        }
        while c == ' ' || c == '\t' {
            c = r.next();
        }
        let value = if c == '\n' {
            None
        } else if c != '=' {
            break;
        } else {
            match value(&mut r) {
                Some(v) => Some(v),
                None => break,
            }
        };
        out.entries.push(Entry {
            section: sec,
            subsection: sub,
            key,
            value,
        });
        if r.eof {
            return out;
        }
    }
    out.error = true;
    out
}

/// After `[`: the section name, and the subsection of `[section "sub"]` or `[section.sub]`.
fn base_var(r: &mut Reader<'_>) -> Option<(String, Option<String>)> {
    let mut name = String::new();
    loop {
        let c = r.next();
        if r.eof {
            return None;
        }
        if c == ']' {
            break;
        }
        if is_space(c) {
            let sub = extended_base_var(r)?;
            if name.is_empty() || name.contains('.') {
                return None;
            }
            return Some((name, Some(sub)));
        }
        if !is_key_char(c) && c != '.' {
            return None;
        }
        name.push(c.to_ascii_lowercase());
    }
    match name.split_once('.') {
        Some((sec, sub)) if !sec.is_empty() => Some((sec.to_string(), Some(sub.to_string()))),
        Some(_) => None,
        None if name.is_empty() => None,
        None => Some((name, None)),
    }
}

/// `"sub"]` after the space of `[section "sub"]`.
fn extended_base_var(r: &mut Reader<'_>) -> Option<String> {
    let mut c = r.next();
    while is_space(c) {
        if c == '\n' {
            return None;
        }
        c = r.next();
    }
    if c != '"' {
        return None;
    }
    let mut sub = String::new();
    loop {
        let mut c = r.next();
        if c == '\n' {
            return None;
        }
        if c == '"' {
            break;
        }
        if c == '\\' {
            c = r.next();
            if c == '\n' {
                return None;
            }
        }
        sub.push(c);
    }
    (r.next() == ']').then_some(sub)
}

/// After `=`: git's `parse_value` (quotes, escapes, continuation lines, trailing comments).
fn value(r: &mut Reader<'_>) -> Option<String> {
    let (mut quote, mut comment, mut space) = (false, false, 0usize);
    let mut v = String::new();
    loop {
        let c = r.next();
        if c == '\n' {
            return (!quote).then_some(v);
        }
        if comment {
            continue;
        }
        if is_space(c) && !quote {
            if !v.is_empty() {
                space += 1;
            }
            continue;
        }
        if !quote && (c == ';' || c == '#') {
            comment = true;
            continue;
        }
        for _ in 0..space {
            v.push(' ');
        }
        space = 0;
        if c == '\\' {
            let e = r.next();
            if r.eof {
                return None;
            }
            match e {
                '\n' => continue,
                't' => v.push('\t'),
                'b' => v.push('\u{8}'),
                'n' => v.push('\n'),
                '\\' | '"' => v.push(e),
                _ => return None,
            }
            continue;
        }
        if c == '"' {
            quote = !quote;
            continue;
        }
        v.push(c);
    }
}

/// Writes `entries` as a config file git reads back to the same entries.
pub fn serialize(entries: &[Entry]) -> String {
    let mut out = String::new();
    let mut current: Option<(&str, Option<&str>)> = None;
    for e in entries {
        let here = (e.section.as_str(), e.subsection.as_deref());
        if current != Some(here) {
            match &e.subsection {
                Some(s) => {
                    let s = s.replace('\\', "\\\\").replace('"', "\\\"");
                    out.push_str(&format!("[{} \"{s}\"]\n", e.section));
                }
                None => out.push_str(&format!("[{}]\n", e.section)),
            }
            current = Some(here);
        }
        match &e.value {
            None => out.push_str(&format!("\t{}\n", e.key)),
            Some(v) => {
                let mut q = String::with_capacity(v.len() + 2);
                for c in v.chars() {
                    match c {
                        '\\' => q.push_str("\\\\"),
                        '"' => q.push_str("\\\""),
                        '\n' => q.push_str("\\n"),
                        '\t' => q.push_str("\\t"),
                        '\u{8}' => q.push_str("\\b"),
                        c => q.push(c),
                    }
                }
                out.push_str(&format!("\t{} = \"{q}\"\n", e.key));
            }
        }
    }
    out
}

/// `core` keys that only describe the repository or the work tree.
const CORE_SAFE: &[&str] = &[
    "repositoryformatversion",
    "filemode",
    "bare",
    "logallrefupdates",
    "ignorecase",
    "precomposeunicode",
    "symlinks",
    "autocrlf",
    "eol",
    "safecrlf",
    "quotepath",
    "abbrev",
    "sharedrepository",
    "checkstat",
    "trustctime",
    "untrackedcache",
    "splitindex",
    "whitespace",
    "preloadindex",
    "longpaths",
    "commitgraph",
    "multipackindex",
    "sparsecheckout",
    "sparsecheckoutcone",
    "warnambiguousrefs",
    "protecthfs",
    "protectntfs",
    "compression",
    "loosecompression",
    "bigfilethreshold",
    "commentchar",
    "commentstring",
];

/// Whether git never runs anything because of this entry (an allowlist: whatever is not
/// named here — hooks paths, fsmonitor, ssh/editor/pager commands, filter/diff/merge
/// drivers, credential helpers, aliases, includes, remote helpers — is not kept).
pub fn is_safe(e: &Entry) -> bool {
    let k = e.key.as_str();
    let sub = e.subsection.is_some();
    match e.section.as_str() {
        "core" => !sub && CORE_SAFE.contains(&k),
        "user" | "author" | "committer" | "color" | "advice" | "status" | "log" => true,
        "extensions" => !sub,
        "init" => !sub && k == "defaultbranch",
        "remote" => {
            sub && [
                "url",
                "pushurl",
                "fetch",
                "push",
                "tagopt",
                "prune",
                "mirror",
                "skipdefaultupdate",
                "skipfetchall",
                "promisor",
                "partialclonefilter",
            ]
            .contains(&k)
        }
        "branch" => sub && ["remote", "pushremote", "merge", "rebase", "description"].contains(&k),
        "submodule" => sub && ["url", "active", "branch", "shallow", "ignore"].contains(&k),
        "pull" => !sub && ["rebase", "ff"].contains(&k),
        "push" => !sub && ["default", "autosetupremote", "followtags"].contains(&k),
        "fetch" => !sub && ["prune", "prunetags"].contains(&k),
        "merge" => !sub && ["ff", "conflictstyle"].contains(&k),
        "rebase" => !sub && ["autosquash", "autostash", "updaterefs"].contains(&k),
        "diff" => {
            !sub && [
                "renames",
                "algorithm",
                "noprefix",
                "mnemonicprefix",
                "context",
                "indentheuristic",
                "colormoved",
            ]
            .contains(&k)
        }
        "index" => !sub && k == "version",
        _ => false,
    }
}

/// The sanitised text of a config file: entries that are safe or in `keep` (the entries the
/// file had before the command), in canonical form; `None` when nothing needs to change.
/// Also returns the names of the entries dropped.
pub fn sanitize(text: &str, keep: &HashSet<Entry>) -> Option<(String, Vec<String>)> {
    let parsed = parse(text);
    let (kept, dropped): (Vec<Entry>, Vec<Entry>) = parsed
        .entries
        .into_iter()
        .partition(|e| is_safe(e) || keep.contains(e));
    if dropped.is_empty() && !parsed.error {
        return None;
    }
    let mut names: Vec<String> = dropped.iter().map(Entry::name).collect();
    if parsed.error {
        names.push("(an unparsable rest of the file)".into());
    }
    Some((serialize(&kept), names))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<(String, Option<String>)> {
        parse(text)
            .entries
            .into_iter()
            .map(|e| (e.name(), e.value))
            .collect()
    }

    #[test]
    fn parses_like_git() {
        let text = "\u{feff}# c\n[core]\n\trepositoryformatversion = 0\n\tbare\n[remote \"Origin\"]\n\
                    url = \"a b\" ; tail\n[Alias] co = checkout # x\n[a.B]\nk = v1 \\\n  v2  \n\
                    [filter \"x\"]clean=\"q\\\"\\\\\\t\"\r\n";
        assert_eq!(
            names(text),
            vec![
                ("core.repositoryformatversion".into(), Some("0".into())),
                ("core.bare".into(), None),
                ("remote.Origin.url".into(), Some("a b".into())),
                ("alias.co".into(), Some("checkout".into())),
                ("a.b.k".into(), Some("v1   v2".into())),
                ("filter.x.clean".into(), Some("q\"\\\t".into())),
            ]
        );
        assert!(!parse(text).error);
        assert!(parse("[core]\nk = \"open\n").error);
        assert!(parse("k = v\n").error);
        assert!(parse("[core]\nk = \\q\n").error);
    }

    #[test]
    fn round_trips_and_strips_what_runs() {
        let text = "[core]\n\trepositoryformatversion = 0\n\thooksPath = /tmp/h\n\tfsmonitor = ./x\n\
                    [user]\n\tname = A \\\"B\\\"\n[include]\n\tpath = ../evil\n\
                    [diff \"z\"]\n\ttextconv = sh -c x\n[remote \"o\"]\n\turl = u\n\tuploadpack = evil\n";
        let (out, dropped) = sanitize(text, &HashSet::new()).unwrap();
        assert_eq!(
            dropped,
            [
                "core.hookspath",
                "core.fsmonitor",
                "include.path",
                "diff.z.textconv",
                "remote.o.uploadpack"
            ]
        );
        assert_eq!(
            names(&out),
            vec![
                ("core.repositoryformatversion".into(), Some("0".into())),
                ("user.name".into(), Some("A \"B\"".into())),
                ("remote.o.url".into(), Some("u".into())),
            ]
        );
        // What was there before is kept.
        let before: HashSet<Entry> = parse("[core]\n\tfsmonitor = ./x\n")
            .entries
            .into_iter()
            .collect();
        let (_, dropped) = sanitize(text, &before).unwrap();
        assert!(!dropped.contains(&"core.fsmonitor".to_string()));
        assert!(sanitize("[core]\n\tbare = false\n", &HashSet::new()).is_none());
    }
}
