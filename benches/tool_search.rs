//! `tool_search` BM25 over 10,000 synthetic deferred tools. Target (release): median query
//! ≤ 50 µs, p99 ≤ 1 ms.
//!
//! Criterion reports mean and median only, so before the criterion groups run, a plain timing
//! loop prints per-query median / p99 / max to stderr (only under `cargo bench`, not when
//! `cargo test --benches` runs the benches once as smoke tests).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measuring program: it prints its figures and stops on any failure

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use outrigger::tools::search::{DEFAULT_MAX_RESULTS, SearchIndex};

const TOOLS: usize = 10_000;
const QUERIES: usize = 1_000;
const TIMING_ROUNDS: usize = 5;

/// Deterministic 64-bit LCG (Knuth's MMIX constants); the high bits are the usable ones.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Skewed toward small indices, so a few words are common and most are rare, as in real
    /// tool descriptions.
    fn skewed(&mut self, n: usize) -> usize {
        let a = self.below(n);
        let b = self.below(n);
        let c = self.below(n);
        a.min(b).min(c)
    }

    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[self.below(words.len())]
    }
}

const SERVERS: &[&str] = &[
    "github",
    "gitlab",
    "slack",
    "linear",
    "jira",
    "notion",
    "confluence",
    "figma",
    "stripe",
    "sentry",
    "datadog",
    "pagerduty",
    "zendesk",
    "hubspot",
    "salesforce",
    "asana",
    "trello",
    "airtable",
    "postgres",
    "mysql",
    "redis",
    "s3",
    "gcs",
    "kubernetes",
    "docker",
    "vercel",
    "netlify",
    "cloudflare",
    "twilio",
    "sendgrid",
    "discord",
    "teams",
    "gmail",
    "calendar",
    "drive",
    "dropbox",
    "box",
    "okta",
    "auth0",
    "shopify",
];

const VERBS: &[&str] = &[
    "create", "list", "get", "update", "delete", "search", "post", "send", "read", "write",
    "fetch", "sync", "archive", "restore", "assign", "close", "open", "merge", "comment", "upload",
    "download", "query", "run", "start", "stop", "deploy", "rollback", "export", "import",
    "approve",
];

const NOUNS: &[&str] = &[
    "issue",
    "issues",
    "repo",
    "repos",
    "message",
    "messages",
    "channel",
    "file",
    "files",
    "page",
    "pages",
    "ticket",
    "user",
    "users",
    "team",
    "project",
    "task",
    "comment",
    "branch",
    "commit",
    "pull",
    "request",
    "release",
    "build",
    "pipeline",
    "job",
    "incident",
    "alert",
    "dashboard",
    "metric",
    "invoice",
    "customer",
    "payment",
    "order",
    "product",
    "record",
    "table",
    "row",
    "bucket",
    "object",
    "event",
    "meeting",
    "document",
    "folder",
    "label",
    "milestone",
    "webhook",
    "secret",
    "token",
    "database",
];

const COMMON: &[&str] = &[
    "a",
    "the",
    "in",
    "for",
    "to",
    "of",
    "and",
    "from",
    "with",
    "by",
    "on",
    "an",
    "or",
    "new",
    "existing",
    "all",
    "given",
    "current",
    "workspace",
    "account",
    "returns",
    "optionally",
    "filtered",
    "matching",
    "specified",
    "authenticated",
    "details",
    "status",
    "id",
    "name",
];

fn capitalise(word: &str) -> String {
    let mut out = word.to_owned();
    if let Some(first) = out.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    out
}

/// Deterministic inventory: ~70 % `mcp__server__verb_noun`, the rest camelCase names; about
/// 8–20 description words drawn from skewed common / domain / rare vocabularies.
fn inventory() -> Vec<(String, String)> {
    let mut rng = Lcg(0x5eed_0001);
    (0..TOOLS)
        .map(|i| {
            let verb = rng.pick(VERBS);
            let noun = rng.pick(NOUNS);
            let name = if rng.below(10) < 7 {
                // Synthetic server ids past the named ones keep names mostly unique.
                let server = match rng.below(3) {
                    0 => rng.pick(SERVERS).to_owned(),
                    _ => format!("svc{}", rng.below(400)),
                };
                format!("mcp__{server}__{verb}_{noun}")
            } else {
                format!(
                    "{verb}{}{}{}",
                    capitalise(rng.pick(NOUNS)),
                    capitalise(noun),
                    i % 97
                )
            };
            let len = 8 + rng.below(13);
            let mut words: Vec<String> = vec![capitalise(verb), "a".into(), noun.into()];
            while words.len() < len {
                let w = match rng.below(10) {
                    0..=4 => COMMON[rng.skewed(COMMON.len())].to_owned(),
                    5..=7 => NOUNS[rng.skewed(NOUNS.len())].to_owned(),
                    8 => rng.pick(SERVERS).to_owned(),
                    _ => format!("term{}", rng.skewed(20_000)),
                };
                words.push(w);
            }
            (name, words.join(" ") + ".")
        })
        .collect()
}

/// Deterministic query mix: short keyword queries, longer natural-language ones, rare terms and
/// off-vocabulary ones (which should be the cheapest).
fn queries() -> Vec<String> {
    let mut rng = Lcg(0x0051_ea7c);
    (0..QUERIES)
        .map(|_| match rng.below(10) {
            0..=2 => format!("{} {}", rng.pick(VERBS), rng.pick(NOUNS)),
            3..=4 => rng.pick(NOUNS).to_owned(),
            5 => format!(
                "{} {} {}",
                rng.pick(SERVERS),
                rng.pick(VERBS),
                rng.pick(NOUNS)
            ),
            6..=7 => {
                // "find the open issues for a repository"-style sentences hit common words.
                let n = 4 + rng.below(5);
                (0..n)
                    .map(|k| match k % 3 {
                        0 => rng.pick(VERBS).to_owned(),
                        1 => COMMON[rng.skewed(COMMON.len())].to_owned(),
                        _ => rng.pick(NOUNS).to_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            }
            8 => format!("{} term{}", rng.pick(NOUNS), rng.below(20_000)),
            _ => format!("zz{} qq{}", rng.next(), rng.next()),
        })
        .collect()
}

fn build(tools: &[(String, String)]) -> SearchIndex {
    SearchIndex::build(tools.iter().map(|(n, d)| (n.as_str(), d.as_str())))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Per-query latency distribution, which criterion does not report.
fn print_latency_percentiles(tools: &[(String, String)], queries: &[String]) {
    let mut builds: Vec<Duration> = (0..5)
        .map(|_| {
            let start = Instant::now();
            black_box(build(tools));
            start.elapsed()
        })
        .collect();
    builds.sort();
    let index = build(tools);

    // Warm caches and the allocator before measuring.
    for q in queries {
        black_box(index.search(q, DEFAULT_MAX_RESULTS));
    }
    let mut samples = Vec::with_capacity(queries.len() * TIMING_ROUNDS);
    let mut empty = 0usize;
    for _ in 0..TIMING_ROUNDS {
        for q in queries {
            let start = Instant::now();
            let hits = black_box(index.search(black_box(q), DEFAULT_MAX_RESULTS));
            samples.push(start.elapsed());
            empty += usize::from(hits.is_empty());
        }
    }
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    eprintln!(
        "tool_search: {} tools, {} terms, {} queries x {} rounds",
        index.len(),
        index.vocabulary_len(),
        queries.len(),
        TIMING_ROUNDS
    );
    eprintln!("  build   median {:?}", percentile(&builds, 0.5));
    eprintln!(
        "  query   median {:?}  p99 {:?}  max {:?}  mean {:?}  (empty results: {})",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples[samples.len() - 1],
        mean,
        empty / TIMING_ROUNDS
    );
}

fn bench_tool_search(c: &mut Criterion) {
    let tools = inventory();
    let queries = queries();
    if std::env::args().any(|a| a == "--bench") {
        print_latency_percentiles(&tools, &queries);
    }

    let mut group = c.benchmark_group("tool_search");
    group.sample_size(20);
    group.bench_function("build_10k", |b| b.iter(|| build(black_box(&tools))));
    group.finish();

    let index = build(&tools);
    let mut group = c.benchmark_group("tool_search");
    group.bench_function("query_mix_10k", |b| {
        // One iteration = one query, cycling through the fixed mix.
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % queries.len();
            index.search(black_box(&queries[i]), DEFAULT_MAX_RESULTS)
        })
    });
    group.bench_function("query_common_words_10k", |b| {
        b.iter(|| index.search(black_box("read a file from the workspace"), 8))
    });
    group.finish();
}

criterion_group!(benches, bench_tool_search);
criterion_main!(benches);
