//! The SSE splitter: the first byte picks a chunking; the frames of the chunked feed must
//! be those of one whole read, and those the documented rules give.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outrigger::llm::sse::{Frame, SseSplitter, split_all};

#[path = "../oracles.rs"]
mod oracles;

fuzz_target!(|data: &[u8]| {
    let Some((&seed, body)) = data.split_first() else {
        return;
    };
    let whole = split_all(body).expect("far below the event bound");
    assert_eq!(whole, oracles::sse_oracle(body));
    // Chunks of pseudo-random sizes 0..=seed%32 (empty reads included).
    let mut out = Vec::new();
    let mut push = |f: Frame<'_>| out.push((f.event.map(str::to_string), f.data.to_vec()));
    let mut s = SseSplitter::new();
    let (mut at, mut x, mut last_empty) = (0usize, u32::from(seed), false);
    while at < body.len() {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let mut n = (x >> 16) as usize % (usize::from(seed % 32) + 2);
        if last_empty {
            n = n.max(1);
        }
        let n = n.min(body.len() - at);
        last_empty = n == 0;
        s.feed(&body[at..at + n], &mut push)
            .expect("far below the event bound");
        at += n;
    }
    s.finish(&mut push);
    assert_eq!(out, whole);
});
