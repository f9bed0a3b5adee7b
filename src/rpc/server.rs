//! The server core over any byte stream, apart from process concerns (runtime, signals, ready
//! marker, parent watch: `serve.rs`). A reader thread turns the input into lines and hands
//! them, a read's worth at a time, through a small bounded channel to one dispatcher task;
//! frames go out through the app's one writer (`Out`).
//!
//! Back-pressure: the dispatcher parses every line and runs control methods at once, but a
//! request that finds every in-flight slot busy and the queue full holds it up; then the
//! hand-off channel fills, the reader blocks in `send`, the input is no longer read and the
//! host's pipe fills. Memory stays bounded by the queue, the hand-off and one frame. The other
//! way round, a host that stops reading stdout: once `max_output_queue_bytes` wait for the
//! writer, the reader stops handing lines on (and so reading) until the writer takes them.

use std::future::Future;
use std::io::{BufReader, Read};
use std::sync::Arc;

use super::dispatch::{dispatch_line, refuse_too_long};
use super::reader::{ReadEvent, read_lines};
use crate::app::App;
use crate::lifecycle::Cause;

/// What the reader hands the dispatcher.
enum Inbound {
    Line(Vec<u8>),
    TooLong(usize),
    Eof,
}

/// Bytes asked of the input per read; one read's complete lines travel as one batch (one
/// wake-up per read instead of one per frame).
const READ_BUFFER: usize = 64 * 1024;

/// Batches in flight between reader and dispatcher: two let the reader fill one while the
/// dispatcher works through the other. This is a hand-off, not a queue: requests wait in the
/// intake queue (`max_queued_requests`), and this adds at most two reads' worth of lines.
const HANDOFF_BATCHES: usize = 2;

/// Starts reading `input` on its own thread and returns the dispatcher, which ends once the
/// input is exhausted (EOF or a read error) and every line before that was dispatched. At the
/// end it fails every pending reverse request (nobody is left to answer) and asks the
/// lifecycle to stop with `Cause::Eof`. Fails only when the reader thread cannot start.
pub fn serve<R: Read + Send + 'static>(
    app: Arc<App>,
    input: R,
) -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    let settings = app.settings();
    let (max_frame, max_output) = (settings.max_frame_bytes, settings.max_output_queue_bytes);
    let out = app.out.clone();
    let waiter = out.clone();
    let (batches, mut batch_rx) = tokio::sync::mpsc::channel::<Vec<Inbound>>(HANDOFF_BATCHES);
    std::thread::Builder::new()
        .name("rpc-reader".into())
        .spawn(move || {
            let input = BufReader::with_capacity(READ_BUFFER, input);
            let mut batch = Vec::new();
            let result = read_lines(input, max_frame, |ev| match ev {
                ReadEvent::Line(line) => batch.push(Inbound::Line(line.to_vec())),
                ReadEvent::TooLong { len } => batch.push(Inbound::TooLong(len)),
                ReadEvent::Drained if !batch.is_empty() => {
                    // Blocks while the host is not reading what it was sent.
                    waiter.wait_for_room(max_output);
                    // Blocks while the dispatcher is held up: this is where reading stops.
                    // An error means the dispatcher is gone (shutdown); the rest is dropped.
                    let _ = batches.blocking_send(std::mem::take(&mut batch));
                }
                ReadEvent::Drained => {}
            });
            if let Err(e) = result {
                tracing::warn!("input read failed: {e}");
            }
            batch.push(Inbound::Eof);
            let _ = batches.blocking_send(batch);
        })?;
    Ok(out.corked(async move {
        while let Some(batch) = batch_rx.recv().await {
            for item in batch {
                match item {
                    Inbound::Line(line) => dispatch_line(&app, &line).await,
                    Inbound::TooLong(len) => refuse_too_long(&app, len, max_frame),
                    Inbound::Eof => {
                        end_of_input(&app);
                        return;
                    }
                }
            }
        }
        // The reader ended without its EOF marker (it panicked): the input is gone all the same.
        end_of_input(&app);
    }))
}

fn end_of_input(app: &App) {
    // EOF drains like a graceful shutdown, which cancels in-flight work; cancelling here,
    // before the reverse waits fail, makes a turn waiting on the host end as cancelled
    // rather than race on with a "host closed" tool failure.
    app.lifecycle.cancel_work();
    // Nobody is left to answer a reverse request.
    app.reverse.close_all();
    app.lifecycle.request_stop(Cause::Eof);
}

#[cfg(test)]
mod tests {
    //! The core in-process over OS pipes: no binary, no process boundary.

    use std::io::{BufRead, Write};
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use serde_json::{Value, json};

    use super::*;
    use crate::config::{Config, Inputs, SharedConfig};
    use crate::lifecycle::Lifecycle;
    use crate::rpc::Out;
    use crate::rpc::dispatch::cancel_request;
    use crate::store::{Store, SyncMode};
    use crate::tools::Router;
    use crate::tools::plugins::PluginRegistry;

    const WAIT: Duration = Duration::from_secs(30);

    fn app_with(home: &Path, out: Out, env: &[(&str, &str)]) -> Arc<App> {
        let inputs = Inputs {
            home: home.to_path_buf(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        let shared = SharedConfig::new(Config::load(&inputs).unwrap());
        let store = Arc::new(Store::open(&home.join("core.db"), SyncMode::Normal).unwrap());
        let fs = crate::tools::fs::FsEnv::new(Arc::new({
            let shared = shared.clone();
            move || shared.settings()
        }));
        let plugins = PluginRegistry::new(Router::new(), 1 << 20);
        let (lifecycle, _stop) = Lifecycle::new();
        let log = crate::logging::init("ERROR");
        let mut app = App::new(shared, log, out, lifecycle, plugins, store, fs);
        app.debug_methods = true;
        Arc::new(app)
    }

    fn frame(id: &str, method: &str, params: Value) -> Vec<u8> {
        let mut f = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            f["params"] = params;
        }
        let mut b = serde_json::to_vec(&f).unwrap();
        b.push(b'\n');
        b
    }

    /// Waits until `progress` stops moving (the writer is blocked) and returns its value.
    fn settled(progress: &AtomicUsize) -> usize {
        let deadline = Instant::now() + WAIT;
        let mut last = progress.load(Ordering::SeqCst);
        loop {
            std::thread::sleep(Duration::from_millis(300));
            let now = progress.load(Ordering::SeqCst);
            if now == last || Instant::now() > deadline {
                return now;
            }
            last = now;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn control_lane_passes_busy_slots_and_a_full_queue_stops_reading() {
        let home = tempfile::tempdir().unwrap();
        let (in_rx, mut in_tx) = std::io::pipe().unwrap();
        let (out_rx, out_tx) = std::io::pipe().unwrap();
        let (out, _writer) = Out::start(out_tx);
        let app = app_with(
            home.path(),
            out,
            &[
                ("max_inflight_requests", "16"),
                ("max_queued_requests", "4"),
            ],
        );
        tokio::spawn(serve(app.clone(), in_rx).unwrap());
        let (frames_tx, frames) = mpsc::channel::<Value>();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out_rx).lines() {
                let Ok(line) = line else { break };
                if frames_tx
                    .send(serde_json::from_str(&line).unwrap())
                    .is_err()
                {
                    break;
                }
            }
        });

        // Every slot busy, the queue full, then a ping: it answers before anything else.
        let mut head = Vec::new();
        for i in 0..16 {
            head.extend(frame(
                &format!("s{i}"),
                "debug.sleep",
                json!({"ms": 600_000}),
            ));
        }
        for i in 0..4 {
            head.extend(frame(&format!("q{i}"), "debug.echo", json!({"value": i})));
        }
        head.extend(frame("ping", "system.ping", Value::Null));
        in_tx.write_all(&head).unwrap();
        let first = frames.recv_timeout(WAIT).unwrap();
        assert_eq!(first["id"], "ping", "{first}");
        assert_eq!(first["result"]["status"], "ok", "{first}");

        // A flood behind them: the writer blocks once the queue and the hand-off are full.
        let flood = 2_000;
        let progress = Arc::new(AtomicUsize::new(0));
        let written = progress.clone();
        let writer = std::thread::spawn(move || {
            let pad = "x".repeat(4000);
            for i in 0..flood {
                in_tx
                    .write_all(&frame(
                        &format!("f{i}"),
                        "debug.echo",
                        json!({"value": pad}),
                    ))
                    .unwrap();
                written.fetch_add(1, Ordering::SeqCst);
            }
            in_tx
        });
        let stalled_at = settled(&progress);
        assert!(
            stalled_at < flood,
            "the input was read past a full queue ({stalled_at} of {flood} frames written)"
        );
        assert_eq!(app.requests.counts(), (16, 4));
        assert!(frames.try_recv().is_err(), "nothing else was answered yet");

        // Freeing the slots (cancel by id, as request.cancel does) lets everything through.
        for i in 0..16 {
            assert!(cancel_request(&app, &format!("\"s{i}\"")));
        }
        let in_tx = writer.join().unwrap();
        let mut cancelled = 0;
        let mut echoed = 0;
        for _ in 0..(16 + 4 + flood) {
            let f = frames
                .recv_timeout(WAIT)
                .expect("every request is answered");
            if f["id"].as_str().is_some_and(|id| id.starts_with('s')) {
                assert_eq!(f["error"]["code"], -32603, "{f}");
                assert_eq!(f["error"]["data"]["kind"], "cancelled", "{f}");
                cancelled += 1;
            } else {
                assert!(f.get("error").is_none(), "{f}");
                echoed += 1;
            }
        }
        assert_eq!((cancelled, echoed), (16, 4 + flood));
        assert_eq!(app.requests.counts(), (0, 0));
        assert!(!cancel_request(&app, "\"s0\""), "a finished id is unknown");
        drop(in_tx);
    }
}
