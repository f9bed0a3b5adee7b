//! The only code that writes stdout. Every frame goes through one channel to one thread,
//! one line each, with U+2028/U+2029 escaped (JavaScript line readers split on them), and
//! the buffer is flushed whenever the queue drains.

use std::cell::Cell;
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::thread::JoinHandle;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use super::error::{Outcome, RpcError};

/// Frames waiting for the writer. Senders append under the lock and wake the writer only
/// when it sleeps; the writer takes the whole buffer at once, so a burst costs one
/// `write` and one wake-up rather than one per frame (group commit).
#[derive(Default)]
struct Queue {
    buf: Vec<u8>,
    /// Where the bytes to write start in `buf` (a large frame taken whole keeps its room).
    start: usize,
    /// Flush requests satisfied once the bytes queued before them are written.
    acks: Vec<oneshot::Sender<()>>,
    sleeping: bool,
    /// Threads in `Out::wait_for_room` (the input reader), woken when the writer takes the
    /// queue; counted so the writer signals only when someone waits.
    waiting_for_room: usize,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    room: Condvar,
    broken: AtomicBool,
}

/// Batches above this size are not kept around after they are written.
const KEEP_BUFFER_BYTES: usize = 4 << 20;
/// After a batch this large, free heap pages go back to the kernel (`memory::trim`).
const TRIM_AFTER_BYTES: usize = 1 << 20;
/// A frame this large, sent while nothing is queued, becomes the queue rather than being
/// copied into it; smaller ones are copied, so the queue's buffer is reused.
const TAKE_WHOLE_BYTES: usize = 64 << 10;

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run<W: Write>(&self, mut sink: W) {
        let mut batch = Vec::new();
        let mut ok = true;
        loop {
            let (acks, start) = {
                let mut q = self.lock();
                while q.buf.is_empty() && q.acks.is_empty() {
                    q.sleeping = true;
                    q = self.wake.wait(q).unwrap_or_else(|e| e.into_inner());
                }
                std::mem::swap(&mut batch, &mut q.buf);
                if q.waiting_for_room > 0 {
                    self.room.notify_all();
                }
                (std::mem::take(&mut q.acks), std::mem::take(&mut q.start))
            };
            let bytes = batch.get(start..).unwrap_or_default();
            if ok && !bytes.is_empty() {
                ok = sink.write_all(bytes).and_then(|_| sink.flush()).is_ok();
                if !ok && !self.broken.swap(true, Ordering::SeqCst) {
                    tracing::warn!("stdout is closed; dropping further frames");
                }
            }
            let big = batch.len() > TRIM_AFTER_BYTES;
            batch.clear();
            if batch.capacity() > KEEP_BUFFER_BYTES {
                batch = Vec::new();
            }
            if big {
                crate::memory::trim();
            }
            for ack in acks {
                let _ = ack.send(());
            }
        }
    }
}

thread_local! {
    /// The writer (`Out::id`) whose wake-ups this thread holds back during a corked poll; 0
    /// when none.
    static CORKED: Cell<usize> = const { Cell::new(0) };
}

/// A corked poll wakes the writer early once this much waits, so a long poll neither holds
/// answers back nor lets the queue grow far before the writer starts on it.
const CORK_BYTES: usize = 64 << 10;

/// `Out::corked`'s future.
pub struct Corked<F> {
    fut: Pin<Box<F>>,
    out: Out,
}

impl<F: Future> Future for Corked<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let outer = CORKED.replace(self.out.id());
        let result = self.fut.as_mut().poll(cx);
        CORKED.set(outer);
        self.out.uncork();
        result
    }
}

/// A cheap, cloneable handle for sending frames to the writer thread.
#[derive(Clone)]
pub struct Out {
    shared: Arc<Shared>,
}

#[derive(Serialize)]
struct Notification<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct Request<'a> {
    jsonrpc: &'static str,
    id: &'a str,
    method: &'a str,
    params: &'a Value,
}

#[derive(Serialize)]
struct Failure<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    error: Value,
}

const NULL_ID: &str = "null";

/// A frame on its way to the writer: `buf[start..]`, without its newline.
pub struct Frame {
    pub buf: Vec<u8>,
    pub start: usize,
}

impl Frame {
    pub fn bytes(&self) -> &[u8] {
        self.buf.get(self.start..).unwrap_or_default()
    }
}

impl From<Vec<u8>> for Frame {
    fn from(buf: Vec<u8>) -> Frame {
        Frame { buf, start: 0 }
    }
}

/// Encodes a response frame (no newline). `id` `None` means `"id": null`. A result is framed
/// in its own buffer (`Reply::into_frame`), so a large one is not copied.
pub fn encode_response(id: Option<&RawValue>, result: Outcome) -> Frame {
    match result {
        Ok(v) => {
            let id = id.map_or(NULL_ID, RawValue::get).as_bytes();
            let head: [&[u8]; 3] = [b"{\"jsonrpc\":\"2.0\",\"id\":", id, b",\"result\":"];
            let (buf, start) = v.into_frame(&head, b"}");
            escape_frame(Frame { buf, start })
        }
        Err(e) => {
            let null: Box<RawValue>;
            let id = match id {
                Some(id) => id,
                None => {
                    null = RawValue::from_string(NULL_ID.to_string()).unwrap_or_default();
                    &null
                }
            };
            let failure = Failure {
                jsonrpc: "2.0",
                id,
                error: e.to_json(),
            };
            let bytes = serde_json::to_vec(&failure).unwrap_or_else(|e| internal_failure(id, &e));
            escape_separators(bytes).into()
        }
    }
}

/// A frame that could not be serialized still gets an answer.
fn internal_failure(id: &RawValue, e: &serde_json::Error) -> Vec<u8> {
    let err = RpcError::internal(format!("could not encode the result: {e}"));
    serde_json::to_vec(&Failure {
        jsonrpc: "2.0",
        id,
        error: err.to_json(),
    })
    .unwrap_or_else(|_| b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"encode failure\"}}".to_vec())
}

/// Replaces raw U+2028 / U+2029 (E2 80 A8 / E2 80 A9) with their `\u` escapes. In valid JSON
/// they can only occur inside strings, where the escape means the same character.
pub fn escape_separators(bytes: Vec<u8>) -> Vec<u8> {
    escape_frame(bytes.into()).buf
}

/// `escape_separators` for the frame in `buf[start..]`: the same buffer when nothing needs
/// escaping, else a new one.
fn escape_frame(frame: Frame) -> Frame {
    let bytes = frame.bytes();
    let needs = memchr::memmem::find_iter(bytes, b"\xE2\x80")
        .any(|i| matches!(bytes.get(i + 2), Some(0xA8 | 0xA9)));
    if !needs {
        return frame;
    }
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0xE2 && bytes.get(i + 1) == Some(&0x80) {
            match bytes.get(i + 2) {
                Some(0xA8) => {
                    out.extend_from_slice(b"\\u2028");
                    i += 3;
                    continue;
                }
                Some(0xA9) => {
                    out.extend_from_slice(b"\\u2029");
                    i += 3;
                    continue;
                }
                _ => {}
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out.into()
}

impl Out {
    /// Starts the writer thread over `sink` (stdout in the real process).
    pub fn start<W: Write + Send + 'static>(sink: W) -> (Out, JoinHandle<()>) {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            room: Condvar::new(),
            broken: AtomicBool::new(false),
        });
        let writer = shared.clone();
        let handle = std::thread::Builder::new()
            .name("stdout-writer".into())
            .spawn(move || writer.run(sink))
            .unwrap_or_else(|e| {
                // Without a writer thread there is no protocol; nothing sensible is left to do.
                eprintln!("outrigger: cannot start the stdout writer thread: {e}");
                std::process::exit(70)
            });
        (Out { shared }, handle)
    }

    /// Queues one frame (without its newline).
    pub fn send_bytes(&self, bytes: Vec<u8>) {
        self.send_frame(bytes.into())
    }

    /// Queues one frame (without its newline).
    pub fn send_frame(&self, mut frame: Frame) {
        let wake = {
            let mut q = self.shared.lock();
            if q.buf.is_empty() && frame.bytes().len() > TAKE_WHOLE_BYTES {
                // Nothing queued: a large frame becomes the queue instead of being copied in.
                frame.buf.push(b'\n');
                q.buf = frame.buf;
                q.start = frame.start;
            } else {
                q.buf.extend_from_slice(frame.bytes());
                q.buf.push(b'\n');
            }
            let held = CORKED.get() == self.id() && q.buf.len() - q.start < CORK_BYTES;
            !held && std::mem::take(&mut q.sleeping)
        };
        if wake {
            self.shared.wake.notify_one();
        }
    }

    fn id(&self) -> usize {
        Arc::as_ptr(&self.shared) as usize
    }

    /// Blocks while more than `max_bytes` wait for the writer: the host has stopped reading
    /// stdout (its pipe is full and the writer blocked in `write`). For the input reader, so
    /// a host that stops reading stops being read too, and the queue stays bounded
    /// (`max_output_queue_bytes`). A closed stdout drains the queue (frames are dropped), so
    /// the wait always ends once the host is gone.
    pub fn wait_for_room(&self, max_bytes: usize) {
        let mut q = self.shared.lock();
        while q.buf.len() - q.start > max_bytes {
            q.waiting_for_room += 1;
            q = self.shared.room.wait(q).unwrap_or_else(|e| e.into_inner());
            q.waiting_for_room -= 1;
        }
    }

    /// Runs `fut` so that frames it sends to this writer from inside a poll wake the writer
    /// once, when the poll ends (or when `CORK_BYTES` are waiting), not once per frame. For
    /// the dispatcher: a burst of pipelined pings answered inline woke the writer thread per
    /// answer, and those wake-ups and the writer's sleeps were a quarter of a ping's CPU.
    pub fn corked<F: Future>(&self, fut: F) -> Corked<F> {
        Corked {
            fut: Box::pin(fut),
            out: self.clone(),
        }
    }

    /// Wakes the writer if frames wait while it sleeps (the end of a corked poll).
    fn uncork(&self) {
        let wake = {
            let mut q = self.shared.lock();
            q.buf.len() > q.start && std::mem::take(&mut q.sleeping)
        };
        if wake {
            self.shared.wake.notify_one();
        }
    }

    pub fn respond(&self, id: Option<&RawValue>, result: Outcome) {
        self.send_frame(encode_response(id, result));
    }

    pub fn notify<P: Serialize>(&self, method: &str, params: &P) {
        match serde_json::to_vec(&Notification {
            jsonrpc: "2.0",
            method,
            params,
        }) {
            Ok(b) => self.send_bytes(escape_separators(b)),
            Err(e) => tracing::error!("could not encode notification {method}: {e}"),
        }
    }

    pub fn request(&self, id: &str, method: &str, params: &Value) {
        match serde_json::to_vec(&Request {
            jsonrpc: "2.0",
            id,
            method,
            params,
        }) {
            Ok(b) => self.send_bytes(escape_separators(b)),
            Err(e) => tracing::error!("could not encode reverse request {method}: {e}"),
        }
    }

    /// Waits until everything queued so far is written and flushed.
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        let wake = {
            let mut q = self.shared.lock();
            q.acks.push(ack);
            std::mem::take(&mut q.sleeping)
        };
        if wake {
            self.shared.wake.notify_one();
        }
        let _ = done.await;
    }

    /// Whether stdout has failed (the host closed its end).
    pub fn is_broken(&self) -> bool {
        self.shared.broken.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_are_escaped() {
        let v = serde_json::json!({"s": "a\u{2028}b\u{2029}c\u{2027}"});
        let out = escape_separators(serde_json::to_vec(&v).unwrap());
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("a\\u2028b\\u2029c\u{2027}"), "{text}");
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }

    /// A sink the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Large frames taken whole into an empty queue and small ones copied in come out in order,
    /// one per line.
    #[tokio::test]
    async fn large_and_small_frames_keep_their_order() {
        let sink = Shared::default();
        let (out, _thread) = Out::start(sink.clone());
        let big = |c: u8| {
            let mut f = b"{\"a\":\"".to_vec();
            f.resize(TAKE_WHOLE_BYTES * 2, c);
            f.extend_from_slice(b"\"}");
            f
        };
        let frames = [
            big(b'x'),
            b"{\"n\":1}".to_vec(),
            big(b'y'),
            big(b'z'),
            b"{\"n\":2}".to_vec(),
        ];
        for f in &frames {
            out.send_bytes(f.clone());
        }
        out.flush().await;
        let mut want = Vec::new();
        for f in &frames {
            want.extend_from_slice(f);
            want.push(b'\n');
        }
        assert!(*sink.0.lock().unwrap() == want);
    }

    /// A sink that records each `write` call.
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Write for Writes {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().push(b.to_vec());
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn writer_asleep(out: &Out) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !out.shared.lock().sleeping {
            assert!(std::time::Instant::now() < deadline, "writer never slept");
            std::thread::yield_now();
        }
    }

    /// Frames sent during one corked poll reach the sink in one write, after the poll; past
    /// `CORK_BYTES` the writer is woken within the poll.
    #[tokio::test]
    async fn a_corked_poll_wakes_the_writer_once() {
        let sink = Writes::default();
        let (out, _thread) = Out::start(sink.clone());
        writer_asleep(&out);
        let o = out.clone();
        let seen = sink.clone();
        out.corked(async move {
            for n in 0..3 {
                o.send_bytes(format!("{{\"n\":{n}}}").into_bytes());
            }
            // Held: the writer sleeps through the poll (it would have written by now).
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(seen.0.lock().unwrap().is_empty());
        })
        .await;
        out.flush().await;
        assert_eq!(
            *sink.0.lock().unwrap(),
            vec![b"{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n".to_vec()]
        );

        writer_asleep(&out);
        let o = out.clone();
        let seen = sink.clone();
        out.corked(async move {
            o.send_bytes(vec![b'1'; CORK_BYTES]);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while seen.0.lock().unwrap().len() < 2 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "never written in the poll"
                );
                std::thread::yield_now();
            }
        })
        .await;
    }

    /// Results framed in their own buffers (the head in the reserved room, or copied when the
    /// id is too long for it) come out as whole lines, in order, separators escaped.
    #[tokio::test]
    async fn responses_framed_in_place_are_whole_lines() {
        use super::super::error::{HEAD_ROOM, reply};
        let sink = Shared::default();
        let (out, _thread) = Out::start(sink.clone());
        let big = "x".repeat(TAKE_WHOLE_BYTES * 2);
        let short = RawValue::from_string("7".into()).unwrap();
        let long = RawValue::from_string(format!("\"{}\"", "i".repeat(HEAD_ROOM * 2))).unwrap();
        let answers = [
            (Some(&*short), big.clone()),
            (Some(&*long), format!("{big}\u{2028}")),
            (None, "small".to_string()),
            (Some(&*short), big.clone()),
        ];
        for (id, result) in &answers {
            out.respond(*id, reply(result));
        }
        out.flush().await;
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), answers.len());
        for (line, (id, result)) in lines.iter().zip(&answers) {
            assert!(
                line.starts_with("{\"jsonrpc\":\"2.0\",\"id\":"),
                "{}",
                &line[..40]
            );
            assert!(!line.contains('\u{2028}'));
            let v: Value = serde_json::from_str(line).unwrap();
            let id: Value = id.map_or(Value::Null, |i| serde_json::from_str(i.get()).unwrap());
            assert_eq!(
                v,
                serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result})
            );
        }
    }

    #[test]
    fn null_id_response() {
        let out = encode_response(
            None,
            Err(RpcError::new(super::super::error::ErrorKind::Parse, "x")),
        );
        let v: Value = serde_json::from_slice(out.bytes()).unwrap();
        assert!(v["id"].is_null());
        assert_eq!(v["error"]["code"], -32700);
    }
}
