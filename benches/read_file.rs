//! `read_file` of a 50 MB text file (first page of 2,000 lines) through the tool itself, plus
//! the sha256 of the same bytes alone for scale (the version covers the whole file, so every
//! read hashes all of it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use outrigger::config::{Config, Inputs};
use outrigger::tools::fs::FsEnv;
use outrigger::tools::fs::read;
use outrigger::tools::fs::state::version_of;
use outrigger::tools::{Tool, ToolContext};
use serde_json::{Value, json};

const FILE_BYTES: usize = 50 * 1000 * 1000;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = String::with_capacity(FILE_BYTES + 100);
    let mut i = 0u64;
    while text.len() < FILE_BYTES {
        text.push_str(&format!(
            "{i:>8} the quick brown fox jumps over the lazy dog, 中文 {:x}\n",
            i.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ));
        i += 1;
    }
    std::fs::write(dir.path().join("big.txt"), &text).expect("write");
    let bytes = text.into_bytes();

    let mut settings = Config::load(&Inputs {
        home: dir.path().join("home"),
        ..Default::default()
    })
    .expect("config")
    .settings();
    settings.max_read_bytes = 64 * 1024 * 1024;
    let settings = Arc::new(settings);
    let env = FsEnv::new(Arc::new(move || settings.clone()));
    let tool = Arc::new(read::tool(env));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let root = dir.path().to_path_buf();
    let call = |args: Value| {
        let ctx = ToolContext::new(root.clone());
        let Value::Object(args) = args else {
            unreachable!()
        };
        let r = rt.block_on(tool.clone().call(ctx, args));
        assert!(r.success, "{:?}", r.error);
        r
    };

    let mut g = c.benchmark_group("read_file_50MB");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("first_page", |b| {
        b.iter(|| black_box(call(json!({"path": "big.txt"}))))
    });
    g.bench_function("first_page_line_numbers", |b| {
        b.iter(|| black_box(call(json!({"path": "big.txt", "lineNumbers": true}))))
    });
    g.bench_function("last_page", |b| {
        b.iter(|| black_box(call(json!({"path": "big.txt", "offset": i - 1999}))))
    });
    g.bench_function("sha256_only", |b| b.iter(|| black_box(version_of(&bytes))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
