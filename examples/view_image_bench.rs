//! `view_image` of a 4,000 x 3,000 PNG scaled to 1,568 (issue 21): time per call and the
//! sidecar's peak RSS.
//!   cargo build --release --bin outrigger && cargo build --release --example view_image_bench
//!   target/release/examples/view_image_bench target/release/outrigger
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

#[path = "shared/mod.rs"]
mod shared;
use shared::{Sidecar, median, vm_hwm_kib, vm_rss_kib};
use std::time::{Duration, Instant};

use serde_json::json;

const CALLS: usize = 10;

fn main() {
    let bin = std::env::args()
        .nth(1)
        .expect("usage: view_image_bench <path to outrigger>");
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    // Smooth gradients and a grid, like a large screenshot (a noisy photo of this size is
    // over the 10 MiB source cap as PNG).
    let img = image::RgbImage::from_fn(4000, 3000, |x, y| {
        let grid = if x % 50 == 0 || y % 50 == 0 { 255 } else { 0 };
        image::Rgb([(x / 16) as u8, (y / 12) as u8, grid])
    });
    let src = ws.path().join("big.png");
    img.save(&src).unwrap();
    let size = std::fs::metadata(&src).unwrap().len();
    let mut s = Sidecar::start(&bin, home.path(), ws.path(), &[]);
    let pid = s.pid();
    let rss_ready = vm_rss_kib(pid);
    let mut times: Vec<Duration> = Vec::new();
    let mut last = serde_json::Value::Null;
    for _ in 0..CALLS {
        let started = Instant::now();
        last = s.call(
            "tool.invoke",
            json!({"name": "view_image", "arguments": {"path": "big.png"}}),
        );
        times.push(started.elapsed());
    }
    let d = &last["result"]["data"];
    assert_eq!(last["result"]["success"], true, "{last}");
    println!(
        "source 4000x3000 PNG ({:.1} MB) -> {}x{} {} ({} bytes)",
        size as f64 / 1e6,
        d["width"],
        d["height"],
        d["mediaType"],
        d["bytes"]
    );
    println!(
        "view_image via tool.invoke: median {:.1} ms, min {:.1} ms over {CALLS}",
        median(&times).as_secs_f64() * 1000.0,
        times.iter().min().unwrap().as_secs_f64() * 1000.0
    );
    println!(
        "sidecar VmRSS at ready {rss_ready} KiB, after {} KiB, peak (VmHWM) {} KiB",
        vm_rss_kib(pid),
        vm_hwm_kib(pid)
    );
}
