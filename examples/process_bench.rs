//! Whole-process benchmark against a built binary (not a test):
//!   cargo build --release && cargo run --release --example process_bench -- target/release/outrigger
//! Reports spawn → ready marker (median of 20), VmRSS right after ready, and pipelined
//! `system.ping` throughput over 100,000 requests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

#[path = "shared/mod.rs"]
mod shared;
use shared::{median, vm_rss_kib};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

fn spawn(bin: &str, home: &std::path::Path) -> std::process::Child {
    Command::new(bin)
        .env("OUTRIGGER_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the binary")
}

fn wait_marker(child: &mut std::process::Child) -> BufReader<std::process::ChildStderr> {
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    loop {
        line.clear();
        if err.read_line(&mut line).expect("read stderr") == 0 {
            panic!("no ready marker");
        }
        if line.starts_with("__SIDECAR_READY__:") {
            return err;
        }
    }
}

fn main() {
    let bin = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/outrigger".into());
    let home = tempfile::tempdir().expect("tempdir");

    let mut ready = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let mut child = spawn(&bin, home.path());
        let _err = wait_marker(&mut child);
        ready.push(t.elapsed());
        rss.push(vm_rss_kib(child.id()));
        drop(child.stdin.take());
        let _ = child.wait();
    }
    rss.sort();
    println!(
        "spawn -> ready marker: median {:.2} ms (min {:.2}, max {:.2}) over 20",
        median(&ready).as_secs_f64() * 1e3,
        ready.iter().min().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        ready.iter().max().map_or(0.0, |d| d.as_secs_f64() * 1e3),
    );
    println!("VmRSS right after ready: median {} KiB", rss[rss.len() / 2]);

    let n = 100_000usize;
    let mut child = spawn(&bin, home.path());
    let _err = wait_marker(&mut child);
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("lifecycle.ready");
    let mut payload = Vec::with_capacity(n * 50);
    for i in 0..n {
        payload.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"system.ping\"}}\n").as_bytes(),
        );
    }
    let t = Instant::now();
    let writer = std::thread::spawn(move || {
        stdin.write_all(&payload).expect("write pings");
        stdin
    });
    let mut got = 0usize;
    let mut buf = Vec::new();
    while got < n {
        buf.clear();
        if out.read_until(b'\n', &mut buf).expect("read") == 0 {
            break;
        }
        if buf.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":") {
            got += 1;
        }
    }
    let elapsed = t.elapsed();
    let rss_after = vm_rss_kib(child.id());
    drop(writer.join());
    let mut rest = Vec::new();
    let _ = out.read_to_end(&mut rest);
    let _ = child.wait();
    println!(
        "pipelined pings: {got} in {:.1} ms = {:.0} pings/s (VmRSS after: {rss_after} KiB)",
        elapsed.as_secs_f64() * 1e3,
        got as f64 / elapsed.as_secs_f64()
    );
}
