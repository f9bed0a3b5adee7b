//! Decode throughput of the native providers' stream decoders (Anthropic Messages, OpenAI
//! Responses, Gemini) beside the OpenAI-compatible one: 100,000 text deltas in each vendor's
//! event shape, held in memory, fed in 16 KiB reads through the same splitter the stream uses.
//! Prints events/s per provider (best of five runs).
//!   cargo bench --bench native_sse
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::time::{Duration, Instant};

use outrigger::llm::accumulate::{DecodeOptions, Decoder};
use outrigger::llm::native::{Decode, NativeConfig, Wire};
use outrigger::llm::sse::SseSplitter;
use outrigger::llm::types::{LlmEvent, LlmRequest};

const EVENTS: usize = 100_000;
const READ: usize = 16 * 1024;
const WORDS: [&str; 8] = [
    "Hello", " world", ",", " the", " quick", " brown", " fox", "\\n",
];

fn openai_body() -> Vec<u8> {
    let mut b = Vec::new();
    for i in 0..EVENTS {
        let w = WORDS[i % 8];
        b.extend_from_slice(format!("data: {{\"id\":\"chatcmpl-AbC123\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{w}\"}},\"finish_reason\":null}}]}}\n\n").as_bytes());
    }
    b.extend_from_slice(b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":100000,\"total_tokens\":100009}}\n\ndata: [DONE]\n\n");
    b
}

fn anthropic_body() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n");
    b.extend_from_slice(b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
    for i in 0..EVENTS {
        let w = WORDS[i % 8];
        b.extend_from_slice(format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{w}\"}}}}\n\n").as_bytes());
    }
    b.extend_from_slice(
        b"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    );
    b.extend_from_slice(b"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":100000}}\n\n");
    b.extend_from_slice(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    b
}

fn responses_body() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n");
    b.extend_from_slice(b"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}\n\n");
    for i in 0..EVENTS {
        let w = WORDS[i % 8];
        b.extend_from_slice(format!("event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{},\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"{w}\"}}\n\n", i + 2).as_bytes());
    }
    b.extend_from_slice(b"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":100002,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"output\":[{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"...\",\"annotations\":[]}]}],\"usage\":{\"input_tokens\":9,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":100000,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":100009}}}\n\n");
    b
}

fn gemini_body() -> Vec<u8> {
    let mut b = Vec::new();
    for i in 0..EVENTS {
        let w = WORDS[i % 8];
        b.extend_from_slice(format!("data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"{w}\"}}],\"role\":\"model\"}},\"index\":0}}],\"modelVersion\":\"gemini-2.5-flash\"}}\r\n\r\n").as_bytes());
    }
    b.extend_from_slice(b"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":100000,\"totalTokenCount\":100009},\"modelVersion\":\"gemini-2.5-flash\"}\r\n\r\n");
    b
}

/// Splits and decodes `body` in `READ`-byte reads; returns the content events seen.
fn run(body: &[u8], dec: &mut dyn Decode) -> usize {
    let mut split = SseSplitter::new();
    let mut out: Vec<LlmEvent> = Vec::new();
    let mut n = 0;
    for part in body.chunks(READ) {
        split
            .feed(part, |f| dec.frame(f, &mut out).unwrap())
            .unwrap();
        n += out
            .drain(..)
            .filter(|e| matches!(e, LlmEvent::Content { .. }))
            .count();
    }
    split.finish(|f| dec.frame(f, &mut out).unwrap());
    dec.finish(&mut out).unwrap();
    n + out
        .iter()
        .filter(|e| matches!(e, LlmEvent::Content { .. }))
        .count()
}

fn best(body: &[u8], make: &dyn Fn() -> Box<dyn Decode>) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut seen = 0;
    for _ in 0..5 {
        let mut dec = make();
        let t = Instant::now();
        seen = run(body, dec.as_mut());
        best = best.min(t.elapsed());
    }
    (best, seen)
}

/// Builds a fresh decoder for one run.
type MakeDecoder<'a> = Box<dyn Fn() -> Box<dyn Decode> + 'a>;

fn cfg() -> NativeConfig {
    NativeConfig {
        base_url: "http://127.0.0.1:1".into(),
        api_key: "k".into(),
        defaults: None,
    }
}

fn main() {
    let req = LlmRequest::default();
    let anthropic = outrigger::llm::anthropic::AnthropicWire::new(cfg());
    let responses = outrigger::llm::responses::ResponsesWire::new(cfg());
    let gemini = outrigger::llm::gemini::GeminiWire::new(cfg());
    let rows: Vec<(&str, Vec<u8>, MakeDecoder)> = vec![
        (
            "openai_compat",
            openai_body(),
            Box::new(|| Box::new(Decoder::new(DecodeOptions::default()))),
        ),
        (
            "anthropic",
            anthropic_body(),
            Box::new(|| anthropic.decoder(&req)),
        ),
        (
            "responses",
            responses_body(),
            Box::new(|| responses.decoder(&req)),
        ),
        ("google", gemini_body(), Box::new(|| gemini.decoder(&req))),
    ];
    for (name, body, make) in &rows {
        let (t, seen) = best(body, make.as_ref());
        assert_eq!(seen, EVENTS, "{name}: content events");
        println!(
            "{name:>13}: {:>6.2} M events/s ({:.1} ms for {EVENTS} events, {:.1} MB, {} KiB reads)",
            EVENTS as f64 / t.as_secs_f64() / 1e6,
            t.as_secs_f64() * 1000.0,
            body.len() as f64 / 1e6,
            READ / 1024
        );
    }
}
