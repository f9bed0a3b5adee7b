//! Reads stdin as bytes, one frame per line, on its own thread. A line longer than the
//! limit is discarded up to its newline (never buffered whole) and reported.

use std::io::{BufRead, ErrorKind};

pub enum ReadEvent<'a> {
    Line(&'a [u8]),
    TooLong { len: usize },
}

/// Calls `on_event` for every non-blank line (without its `\n` / `\r\n`), then returns at EOF
/// or on a read error.
pub fn read_lines<R: BufRead>(
    mut input: R,
    max_frame: usize,
    mut on_event: impl FnMut(ReadEvent<'_>),
) -> std::io::Result<()> {
    let mut line: Vec<u8> = Vec::new();
    let mut discarding: Option<usize> = None;
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            // EOF: a last line without a newline is still a frame.
            match discarding {
                Some(len) => on_event(ReadEvent::TooLong { len }),
                None => emit(&line, &mut on_event),
            }
            return Ok(());
        }
        let (chunk, consumed, ends) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        match discarding.as_mut() {
            Some(len) => *len += chunk.len(),
            None if line.len() + chunk.len() > max_frame => {
                discarding = Some(line.len() + chunk.len());
                line = Vec::new();
            }
            None => {
                // The common case: a whole line in the buffer, no copy needed.
                if ends && line.is_empty() {
                    emit(chunk, &mut on_event);
                    input.consume(consumed);
                    continue;
                }
                line.extend_from_slice(chunk);
            }
        }
        input.consume(consumed);
        if ends {
            match discarding.take() {
                Some(len) => on_event(ReadEvent::TooLong { len }),
                None => emit(&line, &mut on_event),
            }
            line.clear();
        }
    }
}

fn emit(line: &[u8], on_event: &mut impl FnMut(ReadEvent<'_>)) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    on_event(ReadEvent::Line(line));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &[u8], cap: usize, max: usize) -> Vec<String> {
        let r = std::io::BufReader::with_capacity(cap, input);
        let mut out = Vec::new();
        read_lines(r, max, |e| match e {
            ReadEvent::Line(l) => out.push(String::from_utf8_lossy(l).into_owned()),
            ReadEvent::TooLong { len } => out.push(format!("TOO_LONG {len}")),
        })
        .unwrap();
        out
    }

    #[test]
    fn splits_skips_blank_and_limits() {
        for cap in [1, 2, 3, 7, 64] {
            let got = run(b"ab\r\n\n  \ncd\n0123456789abc\nef", cap, 10);
            assert_eq!(got, vec!["ab", "cd", "TOO_LONG 13", "ef"], "cap {cap}");
        }
    }
}
