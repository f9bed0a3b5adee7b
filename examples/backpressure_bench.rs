//! Back-pressure benchmark against a built binary (not a test):
//!   cargo build --release --examples
//!   cargo run --release --example backpressure_bench -- target/release/outrigger
//!
//! With `max_inflight_requests` = 16, every slot held by `debug.sleep {ms: 5000}`:
//! - ping: one warm-up ping (the first ping of a process waits for the python probe), then
//!   500 queued 4 KB `debug.echo` behind the sleeps, then 20 `system.ping` one at a time; the
//!   latency of the first and the median of the 20;
//! - flood: 60,000 4 KB `debug.echo` frames written from a writer thread behind the sleeps;
//!   VmRSS after ready, its peak while the slots are busy, the frames the sidecar had taken in
//!   (the writer's progress) just before the sleeps end, and the time until every request is
//!   answered.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

#[path = "shared/mod.rs"]
mod shared;
use shared::vm_rss_kib;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const SLEEP_MS: u64 = 5000;
const QUEUED: usize = 500;
const PINGS: usize = 20;
const FLOOD: usize = 60_000;

struct Proc {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    _home: tempfile::TempDir,
}

fn spawn(bin: &str) -> Proc {
    let home = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(bin)
        .env("OUTRIGGER_HOME", home.path())
        .env("OUTRIGGER_DEBUG_METHODS", "1")
        .env("OUTRIGGER_MAX_INFLIGHT_REQUESTS", "16")
        .arg("--quiet-ready")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the binary");
    let stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("lifecycle.ready");
    Proc {
        child,
        stdin,
        out,
        _home: home,
    }
}

fn sleeps() -> Vec<u8> {
    let mut b = Vec::new();
    for i in 0..16 {
        b.extend_from_slice(
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":\"sleep{i}\",\"method\":\"debug.sleep\",\"params\":{{\"ms\":{SLEEP_MS}}}}}\n"
            )
            .as_bytes(),
        );
    }
    b
}

fn echo(id: usize, pad: &str) -> Vec<u8> {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"debug.echo\",\"params\":{{\"value\":\"{pad}\"}}}}\n"
    )
    .into_bytes()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Sends one ping and reads until its answer; returns the round trip.
fn ping(p: &mut Proc, id: &str) -> Duration {
    let t = Instant::now();
    p.stdin
        .write_all(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"method\":\"system.ping\"}}\n")
                .as_bytes(),
        )
        .expect("write ping");
    let want = format!("\"id\":\"{id}\"");
    let mut line = String::new();
    loop {
        line.clear();
        if p.out.read_line(&mut line).expect("read") == 0 {
            panic!("stdout closed");
        }
        if line.contains(&want) {
            return t.elapsed();
        }
    }
}

fn ping_while_busy(bin: &str, report: &mut impl Write) {
    let mut p = spawn(bin);
    ping(&mut p, "warm");
    let pad = "x".repeat(4000);
    let mut head = sleeps();
    for i in 0..QUEUED {
        head.extend(echo(i, &pad));
    }
    p.stdin.write_all(&head).expect("write");
    let mut lat = Vec::new();
    for i in 0..PINGS {
        lat.push(ping(&mut p, &format!("ping{i}")));
    }
    let first = lat[0];
    lat.sort();
    let _ = writeln!(
        report,
        "ping with 16 slots busy and {QUEUED} requests queued: first {:.2} ms, median of {PINGS} {:.2} ms, max {:.2} ms",
        ms(first),
        ms(lat[PINGS / 2]),
        ms(lat[PINGS - 1]),
    );
    let _ = p.child.kill();
    let _ = p.child.wait();
}

fn flood_while_busy(bin: &str, report: &mut impl Write) {
    let p = spawn(bin);
    let pid = p.child.id();
    let rss_ready = vm_rss_kib(pid);
    let Proc {
        mut child,
        mut stdin,
        mut out,
        _home,
    } = p;
    stdin.write_all(&sleeps()).expect("write sleeps");
    let start = Instant::now();
    let written = Arc::new(AtomicUsize::new(0));
    let progress = written.clone();
    let writer = std::thread::spawn(move || {
        let pad = "x".repeat(4000);
        for i in 0..FLOOD {
            if stdin.write_all(&echo(i, &pad)).is_err() {
                break;
            }
            progress.fetch_add(1, Ordering::SeqCst);
        }
        stdin
    });
    let done = Arc::new(AtomicBool::new(false));
    let finished = done.clone();
    let reader = std::thread::spawn(move || {
        let mut got = 0usize;
        let mut buf = Vec::new();
        while got < 16 + FLOOD {
            buf.clear();
            if out.read_until(b'\n', &mut buf).unwrap_or(0) == 0 {
                break;
            }
            got += 1;
        }
        finished.store(true, Ordering::SeqCst);
        (got, start.elapsed())
    });
    let mut peak_busy = 0;
    let mut peak = 0;
    let mut taken_in_busy = 0;
    let busy_until = Duration::from_millis(SLEEP_MS - 200);
    while !done.load(Ordering::SeqCst) {
        let rss = vm_rss_kib(pid);
        peak = peak.max(rss);
        if start.elapsed() < busy_until {
            peak_busy = peak_busy.max(rss);
            taken_in_busy = written.load(Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let rss_end = vm_rss_kib(pid);
    let (got, all_answered) = reader.join().expect("reader");
    let _ = writer.join();
    let _ = writeln!(
        report,
        "flood of {FLOOD} x 4 KB behind 16 busy slots: VmRSS after ready {rss_ready} KiB, peak while busy {peak_busy} KiB, \
         peak overall {peak} KiB, at the end {rss_end} KiB; frames written before the slots freed {taken_in_busy}; \
         {got} answers, the last {:.2} s after the flood began",
        all_answered.as_secs_f64()
    );
    let _ = child.kill();
    let _ = child.wait();
}

fn main() {
    let bin = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/outrigger".into());
    // The report is this program's output.
    let mut report = std::io::stdout().lock();
    ping_while_busy(&bin, &mut report);
    flood_while_busy(&bin, &mut report);
}
