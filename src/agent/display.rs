//! The display filter for streamed assistant text (reference §1.6, `stream.chunk {delta}`):
//! models sometimes write pseudo tool-call markup or echo blocks into their text. The host's
//! display deltas have those blocks removed, content included; raw chunks keep them.
//!
//! Stripped blocks: `<function_results>…</function_results>`, `<function_calls>…
//! </function_calls>`, `<tool_call>…</tool_call>`, `<tool_result>…</tool_result>`,
//! `<invoke …>…</invoke>` (any of these opening tags may carry attributes; a self-closing
//! `<invoke …/>` is removed alone), and the token-style `<|tool_call_begin|>…
//! <|tool_call_end|>` and `<|tool_calls_section_begin|>…<|tool_calls_section_end|>`.
//!
//! The filter works on deltas split anywhere (a marker may arrive one character at a
//! time): outside a block it holds back only text from a `<` that may still begin an opening
//! marker, at most [`MAX_HOLD`] bytes; inside a block it discards the content and keeps only
//! what may begin the closing marker. Text is only ever cut at a `<`, so a UTF-8 character
//! (a UTF-16 surrogate pair on the host's side) is never split. Other text containing `<`
//! (`a < b`, `<div>`, `Vec<String>`) passes through unchanged.

/// Tag names whose `<name …>…</name>` blocks are stripped.
const TAGS: &[(&str, &str)] = &[
    ("<function_results", "</function_results>"),
    ("<function_calls", "</function_calls>"),
    ("<tool_call", "</tool_call>"),
    ("<tool_result", "</tool_result>"),
    ("<invoke", "</invoke>"),
];

/// Token-style markers, opening and closing, matched exactly.
const TOKENS: &[(&str, &str)] = &[
    ("<|tool_call_begin|>", "<|tool_call_end|>"),
    ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
];

/// Bytes an opening tag's attributes may take (after the name, up to and including `>`).
/// A longer "tag" is not markup and goes through as text.
pub const MAX_ATTR_BYTES: usize = 256;

/// The longest opening marker: the most text ever held back outside a block.
pub const MAX_HOLD: usize = {
    let mut max = 0;
    let mut i = 0;
    while i < TAGS.len() {
        let n = TAGS[i].0.len() + MAX_ATTR_BYTES;
        if n > max {
            max = n;
        }
        i += 1;
    }
    let mut i = 0;
    while i < TOKENS.len() {
        if TOKENS[i].0.len() > max {
            max = TOKENS[i].0.len();
        }
        i += 1;
    }
    max
};

/// What the text at a `<` is.
enum Open {
    /// Not an opening marker.
    No,
    /// Could still become one: more text is needed.
    Maybe,
    /// An opening marker of `len` bytes; its block ends at `close` (none when self-closing).
    Tag {
        len: usize,
        close: Option<&'static str>,
    },
}

/// Classifies `s` (which starts with `<`). `at_end`: no more text will come.
fn open_at(s: &str, at_end: bool) -> Open {
    let mut maybe = false;
    for (open, close) in TOKENS {
        if s.starts_with(open) {
            return Open::Tag {
                len: open.len(),
                close: Some(*close),
            };
        }
        maybe |= open.starts_with(s);
    }
    for (name, close) in TAGS {
        if s.len() <= name.len() {
            maybe |= name.starts_with(s);
            continue;
        }
        if !s.starts_with(name) {
            continue;
        }
        match tag_end(&s[name.len()..]) {
            TagEnd::Closed { len, self_closing } => {
                return Open::Tag {
                    len: name.len() + len,
                    close: (!self_closing).then_some(*close),
                };
            }
            TagEnd::Open => maybe = true,
            TagEnd::NotATag => {}
        }
    }
    if maybe && !at_end {
        Open::Maybe
    } else {
        Open::No
    }
}

enum TagEnd {
    /// The tag ends after `len` bytes (the `>` included).
    Closed {
        len: usize,
        self_closing: bool,
    },
    /// No `>` yet, within the attribute budget.
    Open,
    NotATag,
}

/// After a tag name: `>` right away, or whitespace or `/` then attributes up to a `>` outside
/// quotes, within [`MAX_ATTR_BYTES`]. Anything else (`<invoker>`) is not this tag.
fn tag_end(rest: &str) -> TagEnd {
    let b = rest.as_bytes();
    match b.first() {
        Some(b'>') => {
            return TagEnd::Closed {
                len: 1,
                self_closing: false,
            };
        }
        Some(b' ' | b'\t' | b'\n' | b'\r' | b'/') => {}
        _ => return TagEnd::NotATag,
    }
    let mut quote: Option<u8> = None;
    for (i, &c) in b.iter().enumerate().take(MAX_ATTR_BYTES) {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                b'"' | b'\'' => quote = Some(c),
                b'>' => {
                    return TagEnd::Closed {
                        len: i + 1,
                        self_closing: i > 0 && b[i - 1] == b'/',
                    };
                }
                _ => {}
            },
        }
    }
    if b.len() < MAX_ATTR_BYTES {
        TagEnd::Open
    } else {
        TagEnd::NotATag
    }
}

/// Strips tool-call markup from a stream of text deltas.
#[derive(Debug, Default)]
pub struct DisplayFilter {
    /// Outside a block: held-back text starting at a `<` that may begin an opening marker.
    /// Inside a block: the block's end so far when it may begin the closing marker.
    pending: String,
    /// The closing marker of the block being discarded.
    inside: Option<&'static str>,
}

impl DisplayFilter {
    pub fn new() -> DisplayFilter {
        DisplayFilter::default()
    }

    /// Feeds one streamed delta; returns the text safe to display now (may be empty). The
    /// common delta (no `<`, nothing held back) passes through without a copy.
    pub fn push<'a>(&mut self, delta: &'a str) -> std::borrow::Cow<'a, str> {
        if self.pending.is_empty() && self.inside.is_none() && !delta.contains('<') {
            return std::borrow::Cow::Borrowed(delta);
        }
        std::borrow::Cow::Owned(self.feed(delta, false))
    }

    /// End of the stream: returns whatever is still held back (an unterminated opening tag
    /// that never closed is dropped with its content; a lone '<' that turned out not to be
    /// a tag is returned).
    pub fn finish(&mut self) -> String {
        let out = self.feed("", true);
        self.pending.clear();
        self.inside = None;
        out
    }

    fn feed(&mut self, delta: &str, at_end: bool) -> String {
        let joined;
        let buf: &str = if self.pending.is_empty() {
            delta
        } else {
            joined = std::mem::take(&mut self.pending) + delta;
            &joined
        };
        let mut out = String::new();
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            if let Some(close) = self.inside {
                if let Some(k) = rest.find(close) {
                    pos += k + close.len();
                    self.inside = None;
                    continue;
                }
                // The content is dropped; only a possible start of the closing marker stays.
                if !at_end
                    && let Some(k) = rest.rfind('<')
                    && close.starts_with(&rest[k..])
                {
                    self.pending = rest[k..].to_string();
                }
                return out;
            }
            let mut from = 0;
            let next = loop {
                let Some(k) = rest[from..].find('<') else {
                    break None;
                };
                let at = from + k;
                match open_at(&rest[at..], at_end) {
                    Open::No => from = at + 1,
                    Open::Maybe => {
                        out.push_str(&rest[..at]);
                        self.pending = rest[at..].to_string();
                        return out;
                    }
                    Open::Tag { len, close } => break Some((at, len, close)),
                }
            };
            match next {
                None => {
                    out.push_str(rest);
                    return out;
                }
                Some((at, len, close)) => {
                    out.push_str(&rest[..at]);
                    pos += at + len;
                    self.inside = close;
                }
            }
        }
    }
}

/// Whole-text convenience: `strip(text) == push(text) + finish()`.
pub fn strip(text: &str) -> String {
    let mut f = DisplayFilter::new();
    let mut out = f.push(text).into_owned();
    out.push_str(&f.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `parts` one by one, checking the memory bound after each.
    fn feed(parts: &[&str]) -> String {
        let mut f = DisplayFilter::new();
        let mut out = String::new();
        for p in parts {
            out.push_str(&f.push(p));
            assert!(f.pending.len() <= MAX_HOLD, "{:?}", f.pending);
        }
        out.push_str(&f.finish());
        assert!(f.pending.is_empty() && f.inside.is_none());
        out
    }

    #[test]
    fn each_block_kind_is_stripped_with_its_content() {
        let cases = [
            "a<function_results>{\"ok\": true}</function_results>b",
            "a<function_calls>\n<invoke name=\"x\">\n</invoke>\n</function_calls>b",
            "a<tool_call>{\"name\": \"bash\"}</tool_call>b",
            "a<tool_result>exit 0</tool_result>b",
            "a<invoke name=\"read_file\">\n<parameter name=\"path\">src/x.rs</parameter>\n</invoke>b",
            "a<invoke>x</invoke>b",
            "a<invoke\n  name='q > r'>x</invoke>b",
            "a<|tool_call_begin|>functions.bash:0<|tool_call_argument_begin|>{}<|tool_call_end|>b",
            "a<|tool_calls_section_begin|><|tool_call_begin|>x<|tool_call_end|><|tool_calls_section_end|>b",
            "a<tool_call id=\"1\">x</tool_call>b",
            "a<invoke name=\"x\"/>b",
        ];
        for c in cases {
            assert_eq!(strip(c), "ab", "{c}");
        }
        assert_eq!(
            strip("one <tool_call>x</tool_call> two <tool_result>y</tool_result> three"),
            "one  two  three"
        );
    }

    #[test]
    fn text_with_angle_brackets_passes_unchanged() {
        let cases = [
            "a < b",
            "if a<b && c>d {}",
            "<div>hello</div>",
            "Vec<String>",
            "HashMap<String, Vec<u8>>",
            "<tool>x</tool>",
            "<invoker>x</invoker>",
            "<tool_calls>x</tool_calls>",
            "<|im_start|>user",
            "<<>> <",
            "x <",
            "</tool_call> stray closer",
            "1 <2 <3",
        ];
        for c in cases {
            assert_eq!(strip(c), c, "{c}");
            // Char by char as well.
            let chars: Vec<String> = c.chars().map(String::from).collect();
            let parts: Vec<&str> = chars.iter().map(String::as_str).collect();
            assert_eq!(feed(&parts), c, "{c}");
        }
    }

    #[test]
    fn every_split_point_gives_the_same_text() {
        let sample = "Let me look. <function_calls>\n<invoke name=\"grep\">\n<parameter \
                      name=\"pattern\">fn main</parameter>\n</invoke>\n</function_calls>\nSo a < b \
                      and Vec<String> — naïve café 😀 <tool_call>{\"x\": \"é\"}</tool_call>ok \
                      <|tool_calls_section_begin|><|tool_call_begin|>f:0<|tool_call_end|>\
                      <|tool_calls_section_end|>done <function_results>r</function_results>. \
                      <tool_result>🦀</tool_result>end <invoke name='a/>'>z</invoke> x<";
        let whole = strip(sample);
        assert_eq!(
            whole,
            "Let me look. \nSo a < b and Vec<String> — naïve café 😀 ok done . end  x<"
        );
        for (i, _) in sample.char_indices().skip(1) {
            let (a, b) = sample.split_at(i);
            assert_eq!(feed(&[a, b]), whole, "split at {i}");
        }
        // And one character at a time.
        let chars: Vec<String> = sample.chars().map(String::from).collect();
        let parts: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(feed(&parts), whole);
    }

    #[test]
    fn unterminated_block_is_dropped_and_a_lone_angle_is_returned() {
        assert_eq!(
            strip("before <tool_call>{\"name\": \"bash\", \"arg"),
            "before "
        );
        assert_eq!(strip("before <invoke name=\"x\">partial"), "before ");
        assert_eq!(strip("ends with <"), "ends with <");
        assert_eq!(strip("ends with <tool_ca"), "ends with <tool_ca");
        assert_eq!(
            strip("ends with <|tool_call_be"),
            "ends with <|tool_call_be"
        );
        let mut f = DisplayFilter::new();
        assert_eq!(f.push("x <"), "x ");
        assert_eq!(f.push("tool_c"), "");
        assert_eq!(f.push("all>secret"), "");
        assert_eq!(f.push(" more</tool_"), "");
        assert_eq!(f.finish(), "");
        // A closed block resumes the text.
        let mut f = DisplayFilter::new();
        assert_eq!(f.push("<tool_call>a</tool_"), "");
        assert_eq!(f.push("call>after"), "after");
        assert_eq!(f.finish(), "");
    }

    #[test]
    fn multibyte_text_around_tags_is_never_split() {
        let sample = "héllo<tool_call>ü😀</tool_call>wörld 😀<ß<invoke a=\"é\">日本</invoke>語";
        let whole = strip(sample);
        assert_eq!(whole, "héllowörld 😀<ß語");
        for (i, _) in sample.char_indices().skip(1) {
            let (a, b) = sample.split_at(i);
            let mut f = DisplayFilter::new();
            let x = f.push(a);
            let y = f.push(b);
            let z = f.finish();
            // Every piece is a whole &str; the pieces make the whole.
            assert_eq!(format!("{x}{y}{z}"), whole, "split at {i}");
        }
        // Astral characters (surrogate pairs in UTF-16) stay whole next to markers.
        assert_eq!(strip("😀<|tool_call_begin|>😀<|tool_call_end|>😀"), "😀😀");
    }

    #[test]
    fn memory_stays_bounded() {
        // Inside a block, content is discarded, not buffered.
        let mut f = DisplayFilter::new();
        assert_eq!(f.push("<function_results>"), "");
        for _ in 0..1000 {
            assert_eq!(f.push("lots of output <<< </function_result"), "");
            assert!(f.pending.len() < "</function_results>".len());
        }
        assert_eq!(f.push("s>tail"), "tail");
        // An opening tag whose attributes never end is released as text after the budget.
        let long = format!("<invoke {}", "a".repeat(MAX_ATTR_BYTES * 2));
        let mut f = DisplayFilter::new();
        let mut out = String::new();
        for c in long.chars() {
            out.push_str(&f.push(&c.to_string()));
            assert!(f.pending.len() <= MAX_HOLD);
        }
        out.push_str(&f.finish());
        assert_eq!(out, long);
        assert_eq!(strip(&long), long);
    }
}
