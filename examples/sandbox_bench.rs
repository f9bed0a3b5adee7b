//! Spawn overhead of the sandbox launcher: `bash -c true` run plainly versus through
//! `outrigger __sandbox-exec` with every layer (user/mount/net/PID namespaces, Landlock,
//! seccomp), median of 50 each (after 5 warm-up runs).
//!
//! `cargo build --release && cargo run --release --example sandbox_bench [path/to/outrigger]`
//! (default `target/release/outrigger`). `SANDBOX_BENCH_GAP_MS=N` waits N ms before each run,
//! as model rounds do between a turn's commands (some kernel costs only show after a pause).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use outrigger::sandbox::{LaunchSpec, Layers, Policy};

const RUNS: usize = 50;
const WARMUP: usize = 5;

/// CPU time (user + system) of every waited-for descendant so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage fills the struct.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Sorted wall-clock times and sorted CPU times of `RUNS` runs.
fn time(mut make: impl FnMut() -> Command) -> (Vec<Duration>, Vec<Duration>) {
    let (mut wall, mut cpu) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
    let gap = std::env::var("SANDBOX_BENCH_GAP_MS")
        .ok()
        .and_then(|g| g.parse().ok())
        .map(Duration::from_millis);
    for i in 0..RUNS + WARMUP {
        if let Some(g) = gap {
            std::thread::sleep(g);
        }
        let mut cmd = make();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let c0 = children_cpu();
        let t = Instant::now();
        let status = cmd.status().expect("spawn");
        let d = t.elapsed();
        let c = children_cpu() - c0;
        assert!(status.success(), "run {i} failed: {status}");
        if i >= WARMUP {
            wall.push(d);
            cpu.push(c);
        }
    }
    wall.sort();
    cpu.sort();
    (wall, cpu)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let exe = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/release/outrigger"));
    let ws = std::env::temp_dir().join(format!("outrigger-bench-{}", std::process::id()));
    std::fs::create_dir_all(ws.join(".git")).expect("workspace");
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let spec = |layers: Layers| LaunchSpec {
        policy: Policy::for_workspace(
            &ws,
            &[],
            false,
            vec![],
            vec![home.join(".ssh"), home.join(".outrigger/secrets")],
        ),
        layers,
        tmp_dir: None,
        parent: std::process::id() as i32,
        max_processes: None,
    };
    let through = |layers: Layers| {
        let json = serde_json::to_string(&spec(layers)).expect("spec");
        let exe = exe.clone();
        move || {
            let mut c = Command::new(&exe);
            c.args([
                "__sandbox-exec",
                "--spec",
                &json,
                "--",
                "bash",
                "-c",
                "true",
            ]);
            c
        }
    };
    let plain = time(|| {
        let mut c = Command::new("bash");
        c.args(["-c", "true"]);
        c
    });
    let none = time(through(Layers::default()));
    let ll_sc = time(through(Layers {
        landlock: true,
        seccomp: true,
        ..Default::default()
    }));
    let no_netns = time(through(Layers {
        namespaces: true,
        pid_namespace: true,
        net_namespace: false,
        landlock: true,
        seccomp: true,
    }));
    let all = time(through(Layers {
        namespaces: true,
        pid_namespace: true,
        net_namespace: true,
        landlock: true,
        seccomp: true,
    }));
    let med = |v: &[Duration]| ms(v[v.len() / 2]);
    println!("bash -c true, median of {RUNS} (ms): wall-clock | CPU (user+sys, whole tree)");
    for (label, (w, c)) in [
        ("plain", &plain),
        ("launcher, no layers", &none),
        ("launcher, landlock + seccomp", &ll_sc),
        ("launcher, all but the network namespace", &no_netns),
        ("launcher, every layer (+ namespaces)", &all),
    ] {
        println!("  {label:<38} {:>7.3} | {:>6.3}", med(w), med(c));
    }
    println!(
        "  {:<38} {:>7.3} | {:>6.3}",
        "added by every layer",
        med(&all.0) - med(&plain.0),
        med(&all.1) - med(&plain.1)
    );
    let _ = std::fs::remove_dir_all(&ws);
}
