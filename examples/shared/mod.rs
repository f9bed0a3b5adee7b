//! Helpers the measuring programs share (included with `#[path]`: each example is its own
//! crate, and a file directly in `examples/` would be taken for one more example).
#![allow(dead_code)] // each program uses its own subset

use std::time::Duration;

/// `VmRSS` of `pid` in KiB, from `/proc/<pid>/status` (0 when unreadable).
pub fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The median of a non-empty sample.
pub fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}
