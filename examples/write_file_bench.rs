//! `write_file` through `tool.invoke` against a built binary (not a test):
//!   cargo build --release && cargo run --release --example write_file_bench -- target/release/outrigger
//! 500 creates then 500 overwrites of 4 KiB files in a directory that also holds 2,000 other
//! files (every write lists the directory for stale temp files), and 20 writes of 8 MiB.
//! Prints the median and mean wall time per call, as the host sees it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Host {
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Host {
    fn call(&mut self, params: Value) -> Duration {
        self.next += 1;
        let frame =
            json!({"jsonrpc": "2.0", "id": self.next, "method": "tool.invoke", "params": params});
        let t = Instant::now();
        self.stdin
            .write_all(format!("{frame}\n").as_bytes())
            .expect("write");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("answer");
        let took = t.elapsed();
        let r: Value = serde_json::from_str(&line).expect("JSON answer");
        assert_eq!(r["result"]["success"], true, "{r}");
        took
    }
}

fn report(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let mean = v.iter().sum::<Duration>() / v.len() as u32;
    println!(
        "{name}: median {:.3} ms, mean {:.3} ms over {}",
        v[v.len() / 2].as_secs_f64() * 1e3,
        mean.as_secs_f64() * 1e3,
        v.len()
    );
}

fn main() {
    let bin = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/outrigger".into());
    let home = tempfile::tempdir().expect("tempdir");
    // Beside the target directory, so the filesystem is the one the project is on.
    let ws = tempfile::tempdir_in("target").expect("workspace");
    for i in 0..2000 {
        std::fs::write(ws.path().join(format!("other-{i}.txt")), "x").expect("seed");
    }
    let mut child = Command::new(&bin)
        .env("OUTRIGGER_HOME", home.path())
        .env("OUTRIGGER_REQUIRE_READ_BEFORE_WRITE", "false")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the binary");
    let mut host = Host {
        stdin: child.stdin.take().expect("stdin"),
        stdout: BufReader::new(child.stdout.take().expect("stdout")),
        next: 0,
    };
    let mut line = String::new();
    host.stdout.read_line(&mut line).expect("lifecycle.ready");
    let cwd = ws.path().canonicalize().expect("canonical workspace");
    let small = "0123456789abcdef\n".repeat(241); // 4,097 bytes
    let write = |host: &mut Host, path: &str, content: &str| {
        host.call(
            json!({"name": "write_file", "arguments": {"path": path, "content": content},
                         "context": {"cwd": cwd}}),
        )
    };
    let creates = (0..500)
        .map(|i| write(&mut host, &format!("f-{i}.txt"), &small))
        .collect();
    report("create 4 KiB", creates);
    let overwrites = (0..500)
        .map(|i| write(&mut host, &format!("f-{i}.txt"), &small.replace('0', "1")))
        .collect();
    report("overwrite 4 KiB", overwrites);
    let big = "0123456789abcdef\n".repeat(8 << 20 >> 4);
    let bigs = (0..20)
        .map(|i| write(&mut host, &format!("big-{}.txt", i % 2), &big))
        .collect();
    report("write 8 MiB", bigs);
    drop(host);
    let _ = child.wait();
}
