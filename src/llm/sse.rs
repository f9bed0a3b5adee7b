//! A linear Server-Sent-Events splitter: bytes in, `(event, data)` frames out.
//!
//! Our own rather than `eventsource-stream`, which re-copies its buffer after every line and
//! turns quadratic on large reads (reference/crates.md §5). Each byte is scanned once; the
//! buffer is compacted once per `feed`, and only the unfinished event is kept. A one-line
//! `data:` event (the common case) is handed out as a slice of the buffer, without a copy.
//!
//! Accepted: `\n` and `\r\n` line ends, multi-line `data:` (joined with `\n`), `:` comments,
//! `event:` (passed through), other fields (`id:`, `retry:`) ignored. At end of input an
//! unterminated last line and event are still delivered: servers that close right after
//! `data: [DONE]` without the blank line are common.

/// The most bytes one event may span before the stream is refused: a server that never
/// sends a newline must not grow our memory without bound. Not user-tunable.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched event. `data` is the joined `data:` lines (not UTF-8 checked here: the
/// JSON decoder validates what it reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    pub event: Option<&'a str>,
    pub data: &'a [u8],
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "an SSE event grew past {MAX_EVENT_BYTES} bytes without ending; the server is not sending Server-Sent Events"
)]
pub struct SseTooLarge;

#[derive(Debug, Default)]
pub struct SseSplitter {
    /// Bytes of the unfinished event (and line) carried over between reads.
    buf: Vec<u8>,
    st: State,
}

/// Positions are offsets into whichever slice is being scanned: `buf`, or the caller's
/// read directly when nothing was carried over (no copy of the bulk of a large read).
#[derive(Debug, Default)]
struct State {
    /// Where the newline search resumes (bytes before it hold no newline of the open line).
    scan: usize,
    line_start: usize,
    /// Start of the event being assembled: nothing before it is needed any more.
    event_start: usize,
    /// The first `data:` value of the open event, as a range of the scanned slice.
    first_data: Option<(usize, usize)>,
    /// Set once a second `data:` line arrives: the joined copy.
    joined: Option<Vec<u8>>,
    event: Option<String>,
}

impl SseSplitter {
    pub fn new() -> SseSplitter {
        SseSplitter::default()
    }

    /// Feeds one network read; calls `f` for every event it completes.
    pub fn feed(&mut self, bytes: &[u8], mut f: impl FnMut(Frame<'_>)) -> Result<(), SseTooLarge> {
        if self.buf.is_empty() {
            // Scan the read in place and keep only its unfinished tail.
            self.st.run(bytes, &mut f);
            let cut = self.st.event_start;
            self.buf.extend_from_slice(&bytes[cut..]);
            self.st.rebase(cut);
        } else {
            self.buf.extend_from_slice(bytes);
            self.st.run(&self.buf, &mut f);
            let cut = self.st.event_start;
            if cut > 0 {
                self.buf.drain(..cut);
                self.st.rebase(cut);
            }
        }
        if self.buf.len() > MAX_EVENT_BYTES {
            return Err(SseTooLarge);
        }
        Ok(())
    }

    /// End of input: delivers an unterminated last line and event.
    pub fn finish(&mut self, mut f: impl FnMut(Frame<'_>)) {
        let data = &self.buf;
        let st = &mut self.st;
        if st.line_start < data.len() {
            let mut end = data.len();
            if data[end - 1] == b'\r' {
                end -= 1;
            }
            let start = st.line_start;
            st.line_start = data.len();
            st.line(data, start, end, &mut f);
        }
        st.dispatch(data, &mut f);
        self.buf.clear();
        self.st = State::default();
    }
}

impl State {
    fn run(&mut self, data: &[u8], f: &mut impl FnMut(Frame<'_>)) {
        while let Some(off) = memchr::memchr(b'\n', &data[self.scan..]) {
            let nl = self.scan + off;
            let mut end = nl;
            if end > self.line_start && data[end - 1] == b'\r' {
                end -= 1;
            }
            let start = self.line_start;
            self.line_start = nl + 1;
            self.scan = nl + 1;
            self.line(data, start, end, f);
        }
        self.scan = data.len();
    }

    fn rebase(&mut self, cut: usize) {
        self.scan -= cut;
        self.line_start -= cut;
        self.event_start -= cut;
        if let Some((a, b)) = &mut self.first_data {
            *a -= cut;
            *b -= cut;
        }
    }

    fn line(&mut self, data: &[u8], start: usize, end: usize, f: &mut impl FnMut(Frame<'_>)) {
        if start == end {
            self.dispatch(data, f);
            self.event_start = self.line_start;
            return;
        }
        let line = &data[start..end];
        if line[0] == b':' {
            return;
        }
        let (name_end, value_start) = match memchr::memchr(b':', line) {
            Some(c) if line.get(c + 1) == Some(&b' ') => (c, c + 2),
            Some(c) => (c, c + 1),
            None => (line.len(), line.len()),
        };
        let (vs, ve) = (start + value_start, end);
        match &line[..name_end] {
            b"data" => match (&mut self.joined, self.first_data) {
                (Some(j), _) => {
                    j.push(b'\n');
                    j.extend_from_slice(&data[vs..ve]);
                }
                (None, Some((a, b))) => {
                    let mut j = Vec::with_capacity(b - a + 1 + ve - vs);
                    j.extend_from_slice(&data[a..b]);
                    j.push(b'\n');
                    j.extend_from_slice(&data[vs..ve]);
                    self.joined = Some(j);
                }
                (None, None) => self.first_data = Some((vs, ve)),
            },
            b"event" => {
                self.event = Some(String::from_utf8_lossy(&data[vs..ve]).into_owned());
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, data: &[u8], f: &mut impl FnMut(Frame<'_>)) {
        let event = self.event.take();
        let first = self.first_data.take();
        let joined = self.joined.take();
        let bytes: &[u8] = match (&joined, first) {
            (Some(j), _) => j,
            (None, Some((a, b))) => &data[a..b],
            // An event with no data lines is not dispatched (SSE rules).
            (None, None) => return,
        };
        f(Frame {
            event: event.as_deref(),
            data: bytes,
        });
    }
}

/// An owned frame: `(event, data)`.
pub type OwnedFrame = (Option<String>, Vec<u8>);

/// Test and bench helper: every frame of a whole body, owned.
pub fn split_all(body: &[u8]) -> Result<Vec<OwnedFrame>, SseTooLarge> {
    let mut out = Vec::new();
    let mut s = SseSplitter::new();
    let mut push = |f: Frame<'_>| out.push((f.event.map(str::to_string), f.data.to_vec()));
    s.feed(body, &mut push)?;
    s.finish(&mut push);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(parts: &[&[u8]]) -> Vec<(Option<String>, String)> {
        let mut out = Vec::new();
        let mut s = SseSplitter::new();
        let mut push = |f: Frame<'_>| {
            out.push((
                f.event.map(str::to_string),
                String::from_utf8(f.data.to_vec()).unwrap(),
            ))
        };
        for p in parts {
            s.feed(p, &mut push).unwrap();
        }
        s.finish(&mut push);
        out
    }

    fn d(s: &str) -> (Option<String>, String) {
        (None, s.to_string())
    }

    #[test]
    fn lf_and_crlf_and_comments() {
        let body = b": keep-alive\n\ndata: {\"a\":1}\n\n: OPENROUTER PROCESSING\r\n\r\ndata: x\r\n\r\ndata: [DONE]\n\n";
        assert_eq!(frames(&[body]), vec![d("{\"a\":1}"), d("x"), d("[DONE]")]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newline() {
        let body = b"data: {\"a\":\ndata: 1}\nid: 7\nretry: 10\n\n";
        assert_eq!(frames(&[body]), vec![d("{\"a\":\n1}")]);
    }

    #[test]
    fn event_field_is_passed_and_reset() {
        let body = b"event: error\ndata: boom\n\ndata: next\n\n";
        assert_eq!(
            frames(&[body]),
            vec![(Some("error".into()), "boom".into()), d("next")]
        );
    }

    #[test]
    fn no_space_after_colon_and_field_without_colon() {
        let body = b"data:tight\n\ndata\n\n";
        assert_eq!(frames(&[body]), vec![d("tight"), d("")]);
    }

    #[test]
    fn unterminated_tail_is_delivered_at_eof() {
        assert_eq!(
            frames(&[b"data: a\n\ndata: [DONE]"]),
            vec![d("a"), d("[DONE]")]
        );
        assert_eq!(frames(&[b"data: [DONE]\n"]), vec![d("[DONE]")]);
        assert_eq!(frames(&[b"data: [DONE]\r"]), vec![d("[DONE]")]);
    }

    #[test]
    fn crlf_split_between_cr_and_lf() {
        assert_eq!(frames(&[b"data: a\r", b"\n\r", b"\n"]), vec![d("a")]);
    }

    #[test]
    fn every_byte_boundary_gives_the_same_frames() {
        let body: &[u8] =
            b"data: one\r\n\r\n: c\n\ndata: two\ndata: lines\n\nevent: error\ndata: e\n\ndata: [DONE]\n\n";
        let whole = frames(&[body]);
        for i in 0..=body.len() {
            for j in i..=body.len() {
                assert_eq!(
                    frames(&[&body[..i], &body[i..j], &body[j..]]),
                    whole,
                    "split at {i},{j}"
                );
            }
        }
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut s = SseSplitter::new();
        let chunk = vec![b'x'; 1024 * 1024];
        let mut err = None;
        for _ in 0..20 {
            if let Err(e) = s.feed(&chunk, |_| {}) {
                err = Some(e);
                break;
            }
        }
        assert_eq!(err, Some(SseTooLarge));
    }

    #[test]
    fn buffer_only_keeps_the_open_event() {
        let mut s = SseSplitter::new();
        for _ in 0..1000 {
            s.feed(b"data: {\"x\":1}\n\n", |_| {}).unwrap();
        }
        assert!(s.buf.is_empty());
        s.feed(b"data: par", |_| {}).unwrap();
        assert_eq!(s.buf.len(), 9);
    }
}
