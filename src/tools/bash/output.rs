//! Bash output as the model sees it: cleaned (ANSI removed, OSC 8 links as `text (uri)`,
//! CRLF → LF) and bounded to a byte budget that keeps each stream's start and end around an
//! exact `[N bytes omitted]` marker, stderr first when the command failed.

/// Removes escape sequences, rewrites OSC 8 hyperlinks as `text (uri)` and folds CRLF to LF.
pub fn clean(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    // An open OSC 8 link: its uri, and where its text starts in `out`.
    let mut link: Option<(String, usize)> = None;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            0x1b => {
                let (next, osc) = skip_escape(b, i);
                if let Some(body) = osc
                    && let Some(rest) = body.strip_prefix("8;")
                {
                    let uri = rest.split_once(';').map_or("", |(_, u)| u).to_string();
                    if uri.is_empty() {
                        if let Some((uri, start)) = link.take() {
                            let text = &out[start..];
                            if !uri.is_empty() && text != uri {
                                out.push_str(&format!(" ({uri})"));
                            }
                        }
                    } else {
                        link = Some((uri, out.len()));
                    }
                }
                i = next;
            }
            b'\r' if b.get(i + 1) == Some(&b'\n') => i += 1,
            _ => {
                // Copy the run up to the next ESC or CR in one go (it is valid UTF-8: the
                // delimiters are ASCII).
                let end = b[i..]
                    .iter()
                    .position(|&c| c == 0x1b || c == b'\r')
                    .map_or(b.len(), |p| i + p.max(1));
                out.push_str(&s[i..end]);
                i = end;
            }
        }
    }
    out
}

/// Skips the escape sequence starting at `i` (an ESC); returns the index after it and, for
/// an OSC sequence, its body.
fn skip_escape(b: &[u8], i: usize) -> (usize, Option<String>) {
    match b.get(i + 1) {
        // CSI: parameters and intermediates, then one final byte in 0x40..=0x7e.
        Some(b'[') => {
            let mut j = i + 2;
            while j < b.len() && !(0x40..=0x7e).contains(&b[j]) {
                j += 1;
            }
            ((j + 1).min(b.len()), None)
        }
        // OSC (and DCS/PM/APC, same termination): ends at BEL or ESC \.
        Some(b']') | Some(b'P') | Some(b'^') | Some(b'_') => {
            let osc = b[i + 1] == b']';
            let mut j = i + 2;
            while j < b.len() {
                if b[j] == 0x07 {
                    let body = osc.then(|| String::from_utf8_lossy(&b[i + 2..j]).into_owned());
                    return (j + 1, body);
                }
                if b[j] == 0x1b && b.get(j + 1) == Some(&b'\\') {
                    let body = osc.then(|| String::from_utf8_lossy(&b[i + 2..j]).into_owned());
                    return (j + 2, body);
                }
                j += 1;
            }
            (b.len(), None)
        }
        // Two-byte sequences (ESC =, ESC 7, ESC ( B …).
        Some(b'(') | Some(b')') => ((i + 3).min(b.len()), None),
        Some(_) => (i + 2, None),
        None => (i + 1, None),
    }
}

/// One stream as returned: its text and how many bytes were left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Bounded {
    pub text: String,
    pub omitted: usize,
}

/// Fits `stdout` and `stderr` into `budget` bytes. The priority stream (stderr when the
/// command failed) is served first, but the other keeps at least a quarter of the budget
/// when it has that much.
pub fn bound(stdout: &str, stderr: &str, budget: usize, stderr_first: bool) -> (Bounded, Bounded) {
    let (first, second) = if stderr_first {
        (stderr, stdout)
    } else {
        (stdout, stderr)
    };
    let reserve = second.len().min(budget / 4);
    let first_allot = first.len().min(budget - reserve);
    let second_allot = budget - first_allot;
    let a = fit(first, first_allot);
    let b = fit(second, second_allot);
    if stderr_first { (b, a) } else { (a, b) }
}

/// `s` if it fits in `allot` bytes, else its start and end around the marker, all within
/// `allot` (marker included) and cut on character boundaries.
pub fn fit(s: &str, allot: usize) -> Bounded {
    if s.len() <= allot {
        return Bounded {
            text: s.to_string(),
            omitted: 0,
        };
    }
    // The marker's length depends on the count; size it for the worst case.
    let marker_room = marker(s.len()).len();
    let keep = allot.saturating_sub(marker_room);
    let head = floor_boundary(s, keep / 2);
    let tail_start = ceil_boundary(s, s.len() - (keep - keep / 2));
    let tail_start = tail_start.max(head);
    let omitted = tail_start - head;
    Bounded {
        text: format!("{}{}{}", &s[..head], marker(omitted), &s[tail_start..]),
        omitted,
    }
}

/// The end of `s` within `allot` bytes, marker included: output read as it arrives, where
/// the newest lines matter most. The marker (`[N bytes omitted{note}]`) leads.
pub fn fit_tail(s: &str, allot: usize, note: &str) -> Bounded {
    if s.len() <= allot {
        return Bounded {
            text: s.to_string(),
            omitted: 0,
        };
    }
    let tail_marker = |n: usize| format!("[{n} bytes omitted{note}]\n");
    let keep = allot.saturating_sub(tail_marker(s.len()).len());
    let start = ceil_boundary(s, s.len() - keep.min(s.len()));
    Bounded {
        text: format!("{}{}", tail_marker(start), &s[start..]),
        omitted: start,
    }
}

fn marker(omitted: usize) -> String {
    format!("\n[{omitted} bytes omitted]\n")
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_is_removed_and_links_become_text_with_uri() {
        assert_eq!(clean("\x1b[1;31mred\x1b[0m plain"), "red plain");
        assert_eq!(
            clean("see \x1b]8;;https://x.dev/a\x1b\\the docs\x1b]8;;\x1b\\ now"),
            "see the docs (https://x.dev/a) now"
        );
        assert_eq!(
            clean("\x1b]8;id=1;https://x.dev\x07https://x.dev\x1b]8;;\x07"),
            "https://x.dev"
        );
        assert_eq!(clean("a\r\nb\r\n"), "a\nb\n");
        assert_eq!(clean("progress\r50%\rdone"), "progress\r50%\rdone");
        assert_eq!(clean("\x1b]0;title\x07ok"), "ok");
        assert_eq!(clean("é\x1b[Kü"), "éü");
    }

    #[test]
    fn fit_keeps_start_and_end_with_an_exact_count() {
        let s: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let b = fit(&s, 200);
        assert!(b.text.len() <= 200, "{}", b.text.len());
        let (head, rest) = b.text.split_once("\n[").unwrap();
        let (count, tail) = rest.split_once(" bytes omitted]\n").unwrap();
        assert_eq!(count.parse::<usize>().unwrap(), b.omitted);
        assert_eq!(head.len() + tail.len() + b.omitted, 1000);
        assert!(s.starts_with(head) && s.ends_with(tail));
        assert_eq!(fit("short", 200).text, "short");
    }

    #[test]
    fn fit_tail_keeps_the_end_behind_an_exact_count() {
        let s = "é".repeat(500) + "THE END";
        let b = fit_tail(&s, 120, "; saved");
        assert!(b.text.len() <= 120, "{}", b.text.len());
        let (head, tail) = b.text.split_once("]\n").unwrap();
        assert_eq!(head, format!("[{} bytes omitted; saved", b.omitted));
        assert!(s.ends_with(tail) && tail.ends_with("THE END"));
        assert_eq!(b.omitted + tail.len(), s.len());
        assert_eq!(fit_tail("short", 120, "").text, "short");
    }

    #[test]
    fn stderr_gets_priority_on_failure() {
        let out = "o".repeat(5000);
        let err = "e".repeat(5000);
        let (o, e) = bound(&out, &err, 4000, true);
        assert!(o.text.len() + e.text.len() <= 4000);
        assert!(e.text.len() > o.text.len());
        let (o, e) = bound(&out, &err, 4000, false);
        assert!(o.text.len() > e.text.len());
        let (o, e) = bound("small", &err, 4000, false);
        assert_eq!(o.text, "small");
        assert!(e.omitted > 0);
    }
}
