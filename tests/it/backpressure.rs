//! Bounded intake, the control lane and `request.cancel`, over the real binary's pipes.
//! Every in-flight slot is held by a slow request the test itself releases (a cancel, or a
//! file the command waits for), so nothing here depends on how fast the machine is.

use crate::common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{Opts, Sidecar, WAIT, pids_with_arg, wait_until};
use serde_json::{Value, json};

fn sixteen_slots() -> Sidecar {
    Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_MAX_INFLIGHT_REQUESTS".into(), "16".into())],
        ..Default::default()
    })
}

fn req(id: impl Into<Value>, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params})
}

fn assert_cancelled(r: &Value) {
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(r["error"]["data"]["kind"], "cancelled", "{r}");
}

fn cancel(s: &mut Sidecar, id: Value) -> bool {
    let r = s.ok("request.cancel", json!({ "id": id }));
    r["cancelled"]
        .as_bool()
        .unwrap_or_else(|| panic!("{{cancelled: bool}} expected: {r}"))
}

fn vm_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Writes `n` `debug.echo` requests of 4,000 characters each on a thread of its own (the
/// writes block once the sidecar stops reading); the counter says how many went through.
fn flood(
    mut stdin: std::process::ChildStdin,
    n: usize,
) -> (Arc<AtomicUsize>, std::thread::JoinHandle<()>) {
    let progress = Arc::new(AtomicUsize::new(0));
    let written = progress.clone();
    let writer = std::thread::spawn(move || {
        let pad = "x".repeat(4000);
        for i in 0..n {
            let mut f = serde_json::to_vec(&req(i, "debug.echo", json!({ "value": pad }))).unwrap();
            f.push(b'\n');
            if stdin.write_all(&f).is_err() {
                return;
            }
            written.fetch_add(1, Ordering::SeqCst);
        }
        // Keep stdin open until the test is done, so EOF plays no part.
        std::thread::sleep(WAIT);
    });
    (progress, writer)
}

/// The sidecar with one setting, stdin and stdout piped, no ready line to read first.
fn piped(home: &std::path::Path, (key, value): (&str, &str)) -> std::process::Child {
    common::base_command(home)
        .env(key, value)
        .arg("--quiet-ready")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Asserts that the flood stalls before all `n` frames are written (stdin is no longer read)
/// with the sidecar's RSS under `bound_kib`.
fn stalls_bounded(progress: &AtomicUsize, n: usize, pid: u32, bound_kib: u64, how: &str) {
    let stalled_at = until_stalled(progress, n);
    let rss = vm_rss_kib(pid);
    assert!(
        stalled_at < n,
        "stdin was read on {how}: all {n} frames were taken in (RSS {rss} KiB)"
    );
    assert!(
        rss < bound_kib,
        "RSS {rss} KiB with {stalled_at} frames written {how}"
    );
}

/// Waits until the flood stops making progress (or is all written); returns how far it got.
fn until_stalled(progress: &AtomicUsize, n: usize) -> usize {
    let deadline = Instant::now() + WAIT;
    let mut last = usize::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = progress.load(Ordering::SeqCst);
        if now == last || now == n || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

#[test]
fn control_lane_answers_while_every_slot_is_busy_and_requests_are_queued() {
    let mut s = sixteen_slots();
    // Slot 1 waits for the host's answer to a reverse request; slots 2-16 sleep.
    s.send(&req(
        "rev",
        "debug.reverse",
        json!({"method": "read_state.seed", "params": {"state": {}}, "timeoutMs": 600_000}),
    ));
    let reverse = s.wait_for(WAIT, |v| v["method"] == "read_state.seed");
    for i in 0..15 {
        s.send(&req(
            format!("sleep{i}"),
            "debug.sleep",
            json!({"ms": 600_000}),
        ));
    }
    for i in 0..8 {
        s.send(&req(
            format!("queued{i}"),
            "debug.echo",
            json!({"value": i}),
        ));
    }
    s.send(&req("ping", "system.ping", json!({})));
    s.send(&req(
        "cancel",
        "agent.chat.cancel",
        json!({"streamId": "none"}),
    ));
    s.send(&req(
        "steer",
        "agent.chat.steer",
        json!({"streamId": "none", "content": "hi"}),
    ));
    s.send(&req(
        "compact",
        "agent.chat.compact",
        json!({"streamId": "none"}),
    ));
    s.send(&json!({"jsonrpc": "2.0", "id": reverse["id"], "result": {"ok": true}}));

    // Every control answer, and the reverse round trip, arrive while the sleeps still run.
    let mut pending: HashSet<&str> = ["ping", "cancel", "steer", "compact", "rev"].into();
    let mut rev_answered = false;
    let mut queued_seen = HashSet::new();
    while !pending.is_empty() {
        let f = s.next_frame(WAIT).expect("control answers arrive");
        let id = f["id"].as_str().unwrap_or_default().to_string();
        assert!(!id.starts_with("sleep"), "a sleep answered first: {f}");
        // A queued request may start only in the slot the reverse call frees.
        assert!(
            !id.starts_with("queued") || rev_answered,
            "a queued request ran while every slot was busy: {f}"
        );
        assert!(f.get("error").is_none(), "{f}");
        rev_answered |= id == "rev";
        pending.remove(id.as_str());
        if id.starts_with("queued") {
            queued_seen.insert(id);
        }
    }
    // Release the sleeps; everything else is answered.
    for i in 0..15 {
        assert!(cancel(&mut s, json!(format!("sleep{i}"))));
        assert_cancelled(&s.response(&json!(format!("sleep{i}"))));
    }
    for i in 0..8 {
        let id = format!("queued{i}");
        if !queued_seen.contains(&id) {
            assert_eq!(s.response(&json!(id))["result"], i);
        }
    }
}

#[test]
fn request_cancel_running_queued_unknown_and_by_exact_id() {
    let mut s = sixteen_slots();
    // A running request.
    s.send(&req("long", "debug.sleep", json!({"ms": 600_000})));
    assert!(cancel(&mut s, json!("long")));
    assert_cancelled(&s.response(&json!("long")));
    // Finished or never sent.
    assert!(!cancel(&mut s, json!("long")));
    assert!(!cancel(&mut s, json!("nope")));
    // Ids compare by JSON type: 7 is not "7".
    s.send(&req(7, "debug.sleep", json!({"ms": 600_000})));
    assert!(!cancel(&mut s, json!("7")));
    assert!(cancel(&mut s, json!(7)));
    assert_cancelled(&s.response(&json!(7)));

    // A queued request, behind sixteen running ones.
    for i in 0..16 {
        s.send(&req(format!("h{i}"), "debug.sleep", json!({"ms": 600_000})));
    }
    s.send(&req("queued", "debug.echo", json!({"value": 1})));
    assert!(cancel(&mut s, json!("queued")));
    assert_cancelled(&s.response(&json!("queued")));
    // Cancelling a running one frees its slot for the next request.
    assert!(cancel(&mut s, json!("h0")));
    assert_cancelled(&s.response(&json!("h0")));
    assert_eq!(s.ok("debug.echo", json!({"value": "after"})), "after");

    // Params: the id is required and must be an id.
    for bad in [json!({}), json!({"id": {"a": 1}}), json!({"id": [1]})] {
        let r = s.call("request.cancel", bad.clone());
        assert_eq!(r["error"]["code"], -32602, "{bad}: {r}");
    }
    for i in 1..16 {
        assert!(cancel(&mut s, json!(format!("h{i}"))));
    }
}

#[test]
fn cancelled_bash_leaves_no_process_behind() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let secs = format!("{}.{:06}1", 30, std::process::id() % 1_000_000);
    s.send(&req(
        "bash",
        "tool.invoke",
        json!({"name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
               "arguments": {"command": format!("sleep {secs}")}}),
    ));
    assert!(
        wait_until(WAIT, || !pids_with_arg(&secs).is_empty()),
        "the command started"
    );
    assert!(cancel(&mut s, json!("bash")));
    assert_cancelled(&s.response(&json!("bash")));
    assert!(
        wait_until(WAIT, || pids_with_arg(&secs).is_empty()),
        "sleep {secs} outlived its cancelled request: {:?}",
        pids_with_arg(&secs)
    );
    assert_eq!(s.ok("system.ping", json!({}))["status"], "ok");
}

/// Sixteen slots held by commands that wait for a file, then thousands of 4 KB frames from a
/// writer thread: the sidecar stops reading (the writer blocks), its RSS stays bounded, and
/// once the file appears every request is answered. Before bounded intake the reader took
/// all ~100 MB in (RSS 257 MB for 60,000 frames) and the writer never blocked.
#[test]
fn a_flood_behind_busy_slots_blocks_the_writer_and_keeps_rss_bounded() {
    const FLOOD: usize = 24_000;
    const RSS_BOUND_KIB: u64 = 64 * 1024;
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut child = piped(home.path(), ("OUTRIGGER_MAX_INFLIGHT_REQUESTS", "16"));
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, frames) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                break;
            }
        }
    });
    let ready = frames.recv_timeout(WAIT).unwrap();
    assert_eq!(ready["method"], "lifecycle.ready");

    let mut gate = Vec::new();
    for i in 0..16 {
        let f = req(
            format!("gate{i}"),
            "tool.invoke",
            json!({"name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
                   "arguments": {"command": "until [ -e go ]; do sleep 0.05; done; echo released",
                                 "timeoutMs": 600_000}}),
        );
        gate.extend(serde_json::to_vec(&f).unwrap());
        gate.push(b'\n');
    }
    stdin.write_all(&gate).unwrap();

    let (progress, writer) = flood(stdin, FLOOD);
    stalls_bounded(&progress, FLOOD, pid, RSS_BOUND_KIB, "behind busy slots");
    assert!(
        frames.try_recv().is_err(),
        "nothing is answered while every slot is held"
    );

    // Release the slots: every request is answered, the writer finishes.
    std::fs::write(ws.path().join("go"), "").unwrap();
    let mut gates = 0;
    let mut echoes = 0;
    while gates + echoes < 16 + FLOOD {
        let f = frames
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{gates} gates and {echoes} echoes answered, then none"));
        assert!(f.get("error").is_none(), "{f}");
        if f["id"].is_string() {
            assert_eq!(f["result"]["success"], true, "{f}");
            gates += 1;
        } else {
            assert_eq!(f["result"].as_str().map(str::len), Some(4000));
            echoes += 1;
        }
    }
    // The sidecar can answer the last frame before the writer thread counts it written.
    assert!(
        wait_until(WAIT, || progress.load(Ordering::SeqCst) == FLOOD),
        "the writer finished: {} of {FLOOD}",
        progress.load(Ordering::SeqCst)
    );
    let _ = child.kill();
    let _ = child.wait();
    drop(writer);
}

/// A host that stops reading stdout: every request is cheap and answered at once, so without
/// a bound on the output queue the sidecar took the whole flood in and held every answer
/// (~100 MB). With `max_output_queue_bytes` at 1 MiB it stops reading stdin, the host's
/// writes block, RSS stays flat, and once the host reads again every answer comes, in order.
#[test]
fn a_host_that_stops_reading_stdout_is_not_read_either_and_rss_stays_bounded() {
    const FLOOD: usize = 24_000;
    const RSS_BOUND_KIB: u64 = 48 * 1024;
    let home = tempfile::tempdir().unwrap();
    let mut child = piped(home.path(), ("OUTRIGGER_MAX_OUTPUT_QUEUE_BYTES", "1048576"));
    let pid = child.id();
    let stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());

    // Nobody reads stdout.
    let (progress, writer) = flood(stdin, FLOOD);
    stalls_bounded(
        &progress,
        FLOOD,
        pid,
        RSS_BOUND_KIB,
        "with none of the answers read",
    );

    // The host reads again: everything is answered and the flood goes through.
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let ready: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(ready["method"], "lifecycle.ready");
    let mut answered = HashSet::new();
    for i in 0..FLOOD {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "EOF after {i} answers"
        );
        let f: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            f["result"].as_str().map(str::len),
            Some(4000),
            "{}",
            &line[..200]
        );
        assert!(
            answered.insert(f["id"].as_u64().unwrap()),
            "answered twice: {}",
            f["id"]
        );
    }
    assert_eq!(answered.len(), FLOOD);
    // The sidecar can answer the last frame before the writer thread counts it written.
    assert!(
        wait_until(WAIT, || progress.load(Ordering::SeqCst) == FLOOD),
        "the writer finished: {} of {FLOOD}",
        progress.load(Ordering::SeqCst)
    );
    let _ = child.kill();
    let _ = child.wait();
    drop(writer);
}
