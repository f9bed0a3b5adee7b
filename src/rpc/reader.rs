//! Reads the input (stdin in serve mode) as bytes, one frame per line, on the server core's
//! reader thread. A line longer than the limit is discarded up to its newline (never
//! buffered whole) and reported.

use std::io::{BufRead, ErrorKind};

pub enum ReadEvent<'a> {
    Line(&'a [u8]),
    TooLong {
        len: usize,
    },
    /// Everything read so far has been reported; the next read may block.
    Drained,
}

/// Where a partial line stands between reads.
enum Partial {
    Collecting(Vec<u8>),
    Discarding(usize),
}

/// Calls `on_event` for every non-blank line (without its `\n` / `\r\n`), then returns at EOF
/// or on a read error.
pub fn read_lines<R: BufRead>(
    mut input: R,
    max_frame: usize,
    mut on_event: impl FnMut(ReadEvent<'_>),
) -> std::io::Result<()> {
    let mut partial = Partial::Collecting(Vec::new());
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            // EOF: a last line without a newline is still a frame.
            match partial {
                Partial::Discarding(len) => on_event(ReadEvent::TooLong { len }),
                Partial::Collecting(line) => emit(&line, &mut on_event),
            }
            on_event(ReadEvent::Drained);
            return Ok(());
        }
        let n = buf.len();
        let mut start = 0;
        while let Some(i) = memchr::memchr(b'\n', &buf[start..]) {
            let chunk = &buf[start..start + i];
            start += i + 1;
            match &mut partial {
                Partial::Discarding(len) => {
                    on_event(ReadEvent::TooLong {
                        len: *len + chunk.len(),
                    });
                    partial = Partial::Collecting(Vec::new());
                }
                Partial::Collecting(line) if line.is_empty() => {
                    // The common case: a whole line inside the buffer, no copy.
                    if chunk.len() > max_frame {
                        on_event(ReadEvent::TooLong { len: chunk.len() });
                    } else {
                        emit(chunk, &mut on_event);
                    }
                }
                Partial::Collecting(line) => {
                    let len = line.len() + chunk.len();
                    if len > max_frame {
                        on_event(ReadEvent::TooLong { len });
                    } else {
                        line.extend_from_slice(chunk);
                        emit(line, &mut on_event);
                    }
                    partial = Partial::Collecting(Vec::new());
                }
            }
        }
        let rest = &buf[start..];
        match &mut partial {
            Partial::Discarding(len) => *len += rest.len(),
            Partial::Collecting(line) if line.len() + rest.len() > max_frame => {
                partial = Partial::Discarding(line.len() + rest.len());
            }
            Partial::Collecting(line) => line.extend_from_slice(rest),
        }
        input.consume(n);
        on_event(ReadEvent::Drained);
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
            ReadEvent::Drained => {}
        })
        .unwrap();
        out
    }

    #[test]
    fn splits_skips_blank_and_limits() {
        for cap in [1, 2, 3, 7, 64] {
            let got = run(
                b"ab\r\n\n  \ncd\n0123456789abc\nef\n0123456789abcdef",
                cap,
                10,
            );
            assert_eq!(
                got,
                vec!["ab", "cd", "TOO_LONG 13", "ef", "TOO_LONG 16"],
                "cap {cap}"
            );
        }
    }

    #[test]
    fn exactly_the_limit_is_accepted() {
        for cap in [1, 4, 64] {
            assert_eq!(run(b"0123456789\n", cap, 10), vec!["0123456789"]);
        }
    }
}
