//! Reading a child's stdout/stderr: each pipe is drained on its own task into a [`Capture`]
//! (a bounded head, the last bytes, and the total), the task stops when a token fires, and
//! [`Reader::finish`] collects it before a deadline. Bash and the plugin runner both use it;
//! what they render from a capture stays with them.

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Size of one read from a pipe.
const READ_BUF: usize = 64 * 1024;

/// A stream's first `limit` bytes plus its last `tail_keep` bytes (at least; up to twice that)
/// and its total length: bounded memory however much the child writes.
#[derive(Debug)]
pub struct Capture {
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
    limit: usize,
    tail_keep: usize,
}

impl Capture {
    pub fn new(limit: usize, tail_keep: usize) -> Capture {
        Capture {
            head: Vec::new(),
            tail: Vec::new(),
            total: 0,
            limit,
            tail_keep,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let take = self.limit.saturating_sub(self.head.len()).min(chunk.len());
        self.head.extend_from_slice(&chunk[..take]);
        let rest = &chunk[take..];
        if !rest.is_empty() {
            self.tail.extend_from_slice(rest);
            // Trim in batches so the copy cost stays amortised.
            if self.tail.len() > 2 * self.tail_keep {
                let cut = self.tail.len() - self.tail_keep;
                self.tail.drain(..cut);
            }
        }
    }

    /// The stream's first bytes, up to the limit.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// The bytes past the limit that were remembered: the stream's end.
    pub fn tail(&self) -> &[u8] {
        &self.tail
    }

    /// Bytes the stream carried in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The head limit this capture was made with.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes between the head and the tail that were dropped (0: the capture is the stream).
    pub fn omitted(&self) -> u64 {
        self.total - (self.head.len() + self.tail.len()) as u64
    }

    /// Whether the stream went past the head limit (even if the tail still holds the rest).
    pub fn past_limit(&self) -> bool {
        self.total > self.head.len() as u64
    }
}

/// Reads of what is already buffered once a reader is told to stop.
const FINAL_READS: usize = 64;

/// One pipe being read on its own task.
pub struct Reader {
    task: Option<JoinHandle<Capture>>,
    limit: usize,
    tail_keep: usize,
}

impl Reader {
    /// Starts reading `pipe` (nothing to read when `None`) until EOF, a read error, or `stop`.
    pub fn spawn<R>(
        pipe: Option<R>,
        limit: usize,
        tail_keep: usize,
        stop: CancellationToken,
    ) -> Reader
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        Reader {
            task: pipe.map(|r| tokio::spawn(read_capped(r, limit, tail_keep, stop))),
            limit,
            tail_keep,
        }
    }

    /// What was read: waits for the task until `deadline`, then fires `stop` (which ends every
    /// reader sharing it) and takes what the task had. A failed task yields an empty capture.
    pub async fn finish(self, stop: &CancellationToken, deadline: Instant) -> Capture {
        let empty = || Capture::new(self.limit, self.tail_keep);
        let Some(mut task) = self.task else {
            return empty();
        };
        match tokio::time::timeout_at(deadline, &mut task).await {
            Ok(res) => res.unwrap_or_else(|_| empty()),
            Err(_) => {
                stop.cancel();
                task.await.unwrap_or_else(|_| empty())
            }
        }
    }
}

async fn read_capped<R: AsyncRead + Unpin>(
    mut r: R,
    limit: usize,
    tail_keep: usize,
    stop: CancellationToken,
) -> Capture {
    let mut cap = Capture::new(limit, tail_keep);
    let mut buf = vec![0u8; READ_BUF];
    loop {
        tokio::select! {
            // Stop first, so a stream that never pauses cannot starve it.
            biased;
            _ = stop.cancelled() => {
                // What is already in the pipe was written before the stop: keep it (a loaded
                // machine can leave the reader behind the writer's exit).
                // Bounded: a writer still running cannot keep us here.
                for _ in 0..FINAL_READS {
                    match futures_util::FutureExt::now_or_never(r.read(&mut buf)) {
                        Some(Ok(n)) if n > 0 => cap.push(&buf[..n]),
                        _ => break,
                    }
                }
                break;
            }
            res = r.read(&mut buf) => match res {
                Ok(0) | Err(_) => break,
                Ok(n) => cap.push(&buf[..n]),
            },
        }
    }
    cap
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_and_counts_everything() {
        let data: Vec<u8> = (0..10_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut c = Capture::new(100, 50);
        for chunk in data.chunks(333) {
            c.push(chunk);
        }
        assert_eq!(c.head(), &data[..100]);
        assert!(c.tail().len() >= 50 && c.tail().len() <= 100);
        assert!(data.ends_with(c.tail()));
        assert_eq!(c.total(), 10_000);
        assert_eq!(c.omitted(), (10_000 - 100 - c.tail().len()) as u64);
        assert!(c.past_limit());

        // Short streams fit whole; a stream just past the limit is past it without a gap.
        let mut c = Capture::new(10, 50);
        c.push(b"hello");
        assert_eq!(
            (c.head(), c.omitted(), c.past_limit()),
            (&b"hello"[..], 0, false)
        );
        c.push(b" world!");
        assert_eq!(
            (c.tail(), c.omitted(), c.past_limit()),
            (&b"d!"[..], 0, true)
        );
    }

    #[tokio::test]
    async fn reads_to_eof_and_stops_on_the_token() {
        let stop = CancellationToken::new();
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let r = Reader::spawn(Some(&b"abcdef"[..]), 4, 8, stop.clone());
        let c = r.finish(&stop, far).await;
        assert_eq!(
            (c.head(), c.tail(), c.total()),
            (&b"abcd"[..], &b"ef"[..], 6)
        );
        assert!(!stop.is_cancelled());

        // A pipe that never ends: the deadline fires the token and the reader gives up.
        let (_writer, pending) = tokio::io::duplex(16);
        let r = Reader::spawn(Some(pending), 4, 8, stop.clone());
        let c = r.finish(&stop, Instant::now()).await;
        assert!(stop.is_cancelled());
        assert_eq!(c.total(), 0);

        let none = Reader::spawn(None::<&[u8]>, 4, 8, CancellationToken::new());
        assert_eq!(none.finish(&stop, far).await.total(), 0);
    }
}
