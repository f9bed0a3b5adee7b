//! SSE split + JSON decode throughput of the OpenAI-compatible stream decoder on a
//! 100,000-event body held in memory. Target (release): ≥ 1.5 M events/s.
//!
//! The body is a realistic OpenAI stream (~230 B per content chunk, as measured in
//! reference/crates.md §5), fed in network-sized reads: 1,500 B (one TCP segment),
//! 16 KiB (a typical socket read) and the whole body at once (a backlog). Before the
//! criterion groups run, a plain timing loop prints events/s to stderr (only under
//! `cargo bench`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use outrigger::llm::accumulate::{DecodeOptions, Decoder};
use outrigger::llm::sse::SseSplitter;
use outrigger::llm::types::LlmEvent;

const EVENTS: usize = 100_000;

/// 100,000 content chunks, then a finish chunk, a usage chunk and `[DONE]`.
fn body() -> Vec<u8> {
    let mut b = Vec::with_capacity(EVENTS * 240);
    for i in 0..EVENTS {
        // Vary the token a little so the decoder cannot benefit from identical input.
        let word = [
            "Hello", " world", ",", " the", " quick", " brown", " fox", "\\n",
        ][i % 8];
        b.extend_from_slice(
            format!(
                "data: {{\"id\":\"chatcmpl-AbC123\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"system_fingerprint\":\"fp_0ba0d124f1\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{word}\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null}}\n\n"
            )
            .as_bytes(),
        );
    }
    b.extend_from_slice(b"data: {\"id\":\"chatcmpl-AbC123\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n");
    b.extend_from_slice(b"data: {\"id\":\"chatcmpl-AbC123\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":100000,\"total_tokens\":100009,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n");
    b.extend_from_slice(b"data: [DONE]\n\n");
    b
}

/// Decodes like the provider does: per read, split and decode into a reused buffer, then
/// hand the events over (here: count and drop them).
fn decode(body: &[u8], read: usize) -> usize {
    let mut split = SseSplitter::new();
    let mut dec = Decoder::new(DecodeOptions::default());
    let mut out: Vec<LlmEvent> = Vec::new();
    let mut count = 0;
    let mut failed = false;
    for part in body.chunks(read) {
        split
            .feed(part, |f| failed |= dec.frame(f, &mut out).is_err())
            .expect("events fit");
        count += out.len();
        black_box(&out);
        out.clear();
    }
    split.finish(|f| failed |= dec.frame(f, &mut out).is_err());
    dec.finish(&mut out).expect("the stream finishes");
    assert!(!failed && matches!(out.last(), Some(LlmEvent::Finish { .. })));
    count + out.len()
}

const READS: &[(&str, usize)] = &[
    ("1500B reads", 1500),
    ("16KiB reads", 16 * 1024),
    ("whole body", usize::MAX),
];

/// This thread's CPU time: on a shared machine it shows the decoder's own cost even when
/// other work steals the cores (wall-clock rates are printed beside it).
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn print_rates(body: &[u8]) {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    for (name, read) in READS {
        let (mut wall, mut cpu) = (f64::MAX, f64::MAX);
        for _ in 0..10 {
            let (t, c) = (Instant::now(), cpu_seconds());
            black_box(decode(body, *read));
            wall = wall.min(t.elapsed().as_secs_f64());
            cpu = cpu.min(cpu_seconds() - c);
        }
        eprintln!(
            "sse decode, {name}: {:.2} M events/s wall, {:.2} M events/s CPU time (best of 10; {:.1} MB body)",
            EVENTS as f64 / wall / 1e6,
            EVENTS as f64 / cpu / 1e6,
            body.len() as f64 / 1e6
        );
    }
}

fn bench(c: &mut Criterion) {
    let body = body();
    print_rates(&body);
    let mut g = c.benchmark_group("sse_decode_100k");
    g.throughput(Throughput::Elements(EVENTS as u64));
    g.sample_size(10);
    for (name, read) in READS {
        g.bench_function(*name, |b| b.iter(|| black_box(decode(&body, *read))));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
