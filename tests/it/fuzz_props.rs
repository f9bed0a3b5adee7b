//! Property tests of the input parsers (issue 12, item 9): the stable-toolchain half of the
//! fuzzing, run in CI. The coverage-guided half is `fuzz/` (`cargo +nightly fuzz run`).
//!
//! One block per target: the JSON-RPC frame parser, the SSE splitter, `apply_edits` (and the
//! unified diff it returns), the `apply_patch` argument parser (and the tool over a temporary
//! workspace), path resolution, and the plugin manifest parser. Each asserts outcomes, not
//! only "no panic". The default budget keeps the module at a few seconds in a debug build;
//! `PROPTEST_CASES=100000 cargo test --test it fuzz_props` scales every block up. Failures
//! are not persisted to files (the shrunk input is printed; add it to the regression tests
//! at the end).

use crate::fuzz_oracles::{apply_unified, check_edits, check_write_read, occurrences, sse_oracle};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use outrigger::llm::sse::{Frame, MAX_EVENT_BYTES, OwnedFrame, SseSplitter, split_all};
use outrigger::rpc::frame::{Incoming, Line, classify, parse_line};
use outrigger::tools::fs::edit::{Edit, Level, apply_edits};
use outrigger::tools::fs::patch::PatchArgs;
use outrigger::tools::fs::paths::Workspace;
use outrigger::tools::fs::root;
use outrigger::tools::plugins::manifest::{
    MAX_TIMEOUT, format_duration, parse_duration, parse_str,
};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde_json::{Map, Value, json};

/// `cases` unless `PROPTEST_CASES` says otherwise; failures are not written to files.
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        // `prop_assume!` rejects (the unique-replacement block) scale with the cases.
        max_global_rejects: cases.saturating_mul(4).max(1024),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A Fisher–Yates shuffle driven by a generated seed (so it shrinks with the case).
fn shuffle<T>(v: &mut [T], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.swap(i, (seed >> 33) as usize % (i + 1));
    }
}

/// JSON text of a string.
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn settings() -> outrigger::config::Settings {
    let inputs = outrigger::config::Inputs {
        home: PathBuf::from("/nonexistent-outrigger-home"),
        ..Default::default()
    };
    outrigger::config::Config::load(&inputs).unwrap().settings()
}

// ---------------------------------------------------------------------------------------
// Frame parser
// ---------------------------------------------------------------------------------------

/// JSON string literals, some with escapes serde_json refuses (lone surrogates).
fn garbage_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>().prop_map(|s| js(&s)),
        prop::collection::vec(
            select(vec![
                "\\ud83d",
                "\\ude00",
                "\\udfff",
                "\\uD800",
                "\\\\ud83d",
                "\\ud83d\\ude00",
                "x",
                "é",
                "😀",
                "\\n",
                "\\u0000",
                "\\\"",
                "\\/",
            ]),
            0..6,
        )
        .prop_map(|v| format!("\"{}\"", v.concat())),
    ]
}

/// Syntactically valid JSON text whose values may not decode: lone surrogates, numbers
/// beyond f64, huge integers, deep-ish nesting.
fn garbage_json() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        select(vec![
            "null",
            "true",
            "false",
            "0",
            "-0",
            "1e400",
            "-1e400",
            "1.5e-400",
            "123456789012345678901234567890",
            "1E+2",
            "-0.0e-0",
        ])
        .prop_map(String::from),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(|n| n.to_string())),
        garbage_string(),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((garbage_string(), inner), 0..6).prop_map(|v| {
                let members: Vec<String> = v.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

/// `params`: an object or an array of garbage.
fn garbage_params() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(garbage_json(), 0..5).prop_map(|v| format!("[{}]", v.join(","))),
        prop::collection::vec((garbage_string(), garbage_json()), 0..5).prop_map(|v| {
            let members: Vec<String> = v.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
            format!("{{{}}}", members.join(","))
        }),
    ]
}

/// A usable id as written: strings (lone surrogates kept as text), numbers, null.
fn id_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>().prop_map(|s| js(&s)),
        garbage_string(),
        any::<i64>().prop_map(|n| n.to_string()),
        select(vec![
            "1.50",
            "-0",
            "0e0",
            "1E+2",
            "1e400",
            "123456789012345678901234567890",
            "null",
            "-1.5e-400",
        ])
        .prop_map(String::from),
    ]
}

/// Members that are not part of the envelope, with garbage values.
fn extra_members() -> impl Strategy<Value = Vec<(String, String)>> {
    const RESERVED: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
    prop::collection::vec(
        (
            any::<String>().prop_filter("not an envelope member", |k| {
                !RESERVED.contains(&k.as_str())
            }),
            garbage_json(),
        ),
        0..3,
    )
    .prop_map(|v| v.into_iter().map(|(k, v)| (js(&k), v)).collect())
}

/// A JSON object line from members, in the given order, separated by `ws`.
fn object_line(members: &[(String, String)], ws: &str) -> String {
    let parts: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("{ws}{k}{ws}:{ws}{v}{ws}"))
        .collect();
    format!("{ws}{{{}}}{ws}", parts.join(","))
}

fn json_ws() -> impl Strategy<Value = &'static str> {
    select(vec!["", " ", "\t", "\r", "\n", " \t"])
}

/// Arbitrary JSON values without out-of-range numbers or duplicate keys.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        any::<String>().prop_map(Value::String),
        select(vec![
            "jsonrpc", "2.0", "id", "method", "params", "result", "error"
        ])
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                select(vec![
                    "jsonrpc", "id", "method", "params", "result", "error", "x"
                ])
                .prop_map(String::from),
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    Insert(Index, u8),
    Delete(Index),
    Replace(Index, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Delete),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Replace(i, b)),
    ]
}

/// Whether `bytes` is one JSON text (serde_json does not check the UTF-8 of strings it
/// skips, so that is checked first, as the frame parser does).
fn is_json(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes)
        .is_ok_and(|t| serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok())
}

/// What a valid request line must give: a request (or bad params) keeping the exact id.
fn check_request(
    line: &str,
    id_text: &str,
    method: Option<&str>,
    params_text: &str,
) -> Result<(), TestCaseError> {
    match parse_line(line.as_bytes()) {
        Line::Single(Incoming::Request {
            id,
            method: m,
            params,
            ..
        }) => {
            prop_assert_eq!(id.get(), id_text, "{}", line);
            if let Some(want) = method {
                prop_assert_eq!(m.as_str(), want);
            }
            match serde_json::from_str::<Value>(params_text) {
                Ok(v) => prop_assert_eq!(params, v),
                Err(_) => prop_assert!(!params_text.contains("e400"), "{}", line),
            }
        }
        Line::Single(Incoming::BadParams {
            id: Some(id),
            method: m,
            field,
            ..
        }) => {
            prop_assert_eq!(id.get(), id_text, "{}", line);
            if let Some(want) = method {
                prop_assert_eq!(m.as_str(), want);
            }
            prop_assert!(params_text.contains("e400"), "bad params in {line}");
            prop_assert!(field.starts_with("params"), "{}", field);
        }
        other => prop_assert!(false, "{line:?} gave {other:?}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    /// Any bytes: no panic; invalid UTF-8 and non-JSON are -32700, anything else is not.
    #[test]
    fn frame_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let line = parse_line(&bytes);
        let parse_error = matches!(line, Line::ParseError(_));
        prop_assert_eq!(parse_error, !is_json(&bytes), "{:?} gave {:?}", bytes, line);
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let _ = classify(text);
        }
    }

    /// Arbitrary strings through `classify` (documented for valid JSON, must not panic on
    /// anything) and `parse_line`.
    #[test]
    fn frame_arbitrary_text(text in "\\PC{0,64}|[\\[\\]{}\":,0-9a-z\\\\ ]{0,64}") {
        let _ = classify(&text);
        let line = parse_line(text.as_bytes());
        prop_assert_eq!(matches!(line, Line::ParseError(_)), !is_json(text.as_bytes()));
    }

    /// A request with a string/number/null id and a string method keeps its exact id
    /// whatever its params hold and whatever else the object carries, in any member order.
    #[test]
    fn frame_request_keeps_its_id(
        id in id_text(),
        method in prop_oneof![
            any::<String>().prop_map(|m| (js(&m), Some(m))),
            garbage_string().prop_map(|m| (m, None)),
        ],
        params in prop::option::of(garbage_params()),
        extra in extra_members(),
        ws in json_ws(),
        order in any::<u64>(),
    ) {
        let mut members = vec![
            (js("jsonrpc"), js("2.0")),
            (js("id"), id.clone()),
            (js("method"), method.0.clone()),
        ];
        if let Some(p) = &params {
            members.push((js("params"), p.clone()));
        }
        members.extend(extra);
        shuffle(&mut members, order);
        let line = object_line(&members, ws);
        check_request(&line, &id, method.1.as_deref(), params.as_deref().unwrap_or("null"))?;
        // The same request inside a batch: one item per request, ids kept.
        let batch = format!("[{line},{line}]");
        match parse_line(batch.as_bytes()) {
            Line::Batch(items) => {
                prop_assert_eq!(items.len(), 2);
                for item in items {
                    let ok = match &item {
                        Incoming::Request { id: got, .. } => got.get() == id,
                        Incoming::BadParams { id: Some(got), .. } => got.get() == id,
                        _ => false,
                    };
                    prop_assert!(ok, "{} gave {:?}", batch, item);
                }
            }
            other => prop_assert!(false, "{batch:?} gave {other:?}"),
        }
    }

    /// Without an id it is a notification; a string id with `result`/`error` and no
    /// method is a response to that id.
    #[test]
    fn frame_notifications_and_responses(
        method in any::<String>(),
        s in any::<String>(),
        answer in garbage_json(),
        is_error in any::<bool>(),
        ws in json_ws(),
    ) {
        let line = object_line(&[(js("jsonrpc"), js("2.0")), (js("method"), js(&method))], ws);
        match parse_line(line.as_bytes()) {
            Line::Single(Incoming::Notification { method: m, params, .. }) => {
                prop_assert_eq!(m, method);
                prop_assert!(params.is_null());
            }
            other => prop_assert!(false, "{line:?} gave {other:?}"),
        }
        let member = if is_error { "error" } else { "result" };
        let line = object_line(
            &[(js("jsonrpc"), js("2.0")), (js("id"), js(&s)), (js(member), answer.clone())],
            ws,
        );
        match parse_line(line.as_bytes()) {
            Line::Single(Incoming::Response { id, outcome }) => {
                prop_assert_eq!(id, s);
                if let Ok(v) = serde_json::from_str::<Value>(&answer) {
                    if is_error {
                        prop_assert_eq!(outcome, Err(v));
                    } else {
                        prop_assert_eq!(outcome, Ok(v));
                    }
                }
            }
            other => prop_assert!(false, "{line:?} gave {other:?}"),
        }
    }

    /// Valid JSON is never a parse error: objects are single messages, arrays batches (one
    /// item each), scalars invalid requests without an id.
    #[test]
    fn frame_valid_json_is_classified(v in any_json()) {
        let text = serde_json::to_string(&v).unwrap();
        match (&v, parse_line(text.as_bytes())) {
            (Value::Object(_), Line::Single(_)) => {}
            (Value::Array(a), Line::EmptyBatch) => prop_assert!(a.is_empty()),
            (Value::Array(a), Line::Batch(items)) => prop_assert_eq!(a.len(), items.len()),
            (_, Line::Single(Incoming::Invalid { id: None, .. })) => {}
            (_, other) => prop_assert!(false, "{text} gave {other:?}"),
        }
    }

    /// Byte-level damage to a valid request: never a panic, and still -32700 exactly when
    /// the damaged line is not JSON.
    #[test]
    fn frame_mutated_request(
        id in id_text(),
        params in garbage_params(),
        muts in prop::collection::vec(mutation(), 1..6),
    ) {
        let mut bytes = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m","params":{params}}}"#)
            .into_bytes();
        for m in muts {
            match m {
                Mutation::Insert(i, b) => bytes.insert(i.index(bytes.len() + 1), b),
                Mutation::Delete(i) if !bytes.is_empty() => {
                    bytes.remove(i.index(bytes.len()));
                }
                Mutation::Replace(i, b) if !bytes.is_empty() => {
                    let at = i.index(bytes.len());
                    bytes[at] = b;
                }
                _ => {}
            }
        }
        let line = parse_line(&bytes);
        prop_assert_eq!(matches!(line, Line::ParseError(_)), !is_json(&bytes));
    }
}

// ---------------------------------------------------------------------------------------
// SSE splitter
// ---------------------------------------------------------------------------------------

const SSE_TOKENS: &[&[u8]] = &[
    b"data:",
    b"data: ",
    b"data",
    b"dat",
    b"event:",
    b"event: ",
    b"id: 1",
    b"retry: 5",
    b":",
    b": keep-alive",
    b"\n",
    b"\n",
    b"\r\n",
    b"\r",
    b"\n\n",
    b"x",
    b" ",
    b"[DONE]",
    b"{\"a\":1}",
    "é".as_bytes(),
    b"\xff",
    b"\0",
];

fn sse_body() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            6 => select(SSE_TOKENS.to_vec()).prop_map(<[u8]>::to_vec),
            1 => prop::collection::vec(any::<u8>(), 0..4),
        ],
        0..48,
    )
    .prop_map(|v| v.concat())
}

/// Feeds `body` cut at `cuts` (sorted offsets), then finishes.
fn sse_chunked(s: &mut SseSplitter, body: &[u8], cuts: &[usize]) -> Vec<OwnedFrame> {
    let mut out = Vec::new();
    let mut push = |f: Frame<'_>| out.push((f.event.map(str::to_string), f.data.to_vec()));
    let mut at = 0;
    for &c in cuts {
        s.feed(&body[at..c], &mut push).unwrap();
        at = c;
    }
    s.feed(&body[at..], &mut push).unwrap();
    s.finish(&mut push);
    out
}

proptest! {
    #![proptest_config(config(256))]

    /// The same bytes in any chunking (empty chunks and single bytes included) give the
    /// frames of one whole read, which are the documented rules' frames.
    #[test]
    fn sse_chunk_invariance(
        body in sse_body(),
        cuts in prop::collection::vec(any::<Index>(), 0..10),
    ) {
        let whole = split_all(&body).unwrap();
        prop_assert_eq!(&whole, &sse_oracle(&body), "body {:?}", String::from_utf8_lossy(&body));
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
        cuts.sort_unstable();
        let mut s = SseSplitter::new();
        prop_assert_eq!(&sse_chunked(&mut s, &body, &cuts), &whole);
        // A finished splitter starts over: the same body again gives the same frames.
        let bytewise: Vec<usize> = (0..=body.len()).collect();
        prop_assert_eq!(&sse_chunked(&mut s, &body, &bytewise), &whole);
        // Bounded: frames never hold more data than the body, nor outnumber its lines.
        let data: usize = whole.iter().map(|(_, d)| d.len()).sum();
        prop_assert!(data <= body.len());
        prop_assert!(whole.len() <= body.iter().filter(|&&b| b == b'\n').count() + 1);
    }

    /// Arbitrary bytes: no panic, and chunk invariance still holds.
    #[test]
    fn sse_arbitrary_bytes(
        body in prop::collection::vec(any::<u8>(), 0..512),
        cut in any::<Index>(),
    ) {
        let whole = split_all(&body).unwrap();
        let mut s = SseSplitter::new();
        prop_assert_eq!(&sse_chunked(&mut s, &body, &[cut.index(body.len() + 1)]), &whole);
        prop_assert_eq!(whole, sse_oracle(&body));
    }
}

#[test]
fn sse_an_event_that_never_ends_is_refused_in_any_chunking() {
    // One data line per read and never a blank line: the open event grows past the bound.
    let mut s = SseSplitter::new();
    let line = format!("data: {}\n", "x".repeat(64 * 1024 - 7));
    let mut reads = 0;
    let err = loop {
        reads += 1;
        if let Err(e) = s.feed(line.as_bytes(), |_| panic!("no event ends")) {
            break e;
        }
        assert!(reads * line.len() <= MAX_EVENT_BYTES + line.len());
    };
    assert!(err.to_string().contains("without ending"));
}

// ---------------------------------------------------------------------------------------
// apply_edits
// ---------------------------------------------------------------------------------------

/// Pieces with the characters each match level cares about: whitespace, newlines (CRLF
/// too), multi-byte text and the punctuation the unicode level folds.
const EDIT_TOKENS: &[&str] = &[
    "a", "b", "x", "ab", " ", "  ", "\t", "\n", "\n", "\r\n", "\r", "é", "“", "”", "\"", "—", "-",
    "’", "'", "\u{a0}", "…", ".",
];

fn edit_text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(select(EDIT_TOKENS.to_vec()), 0..max).prop_map(|v| v.concat())
}

/// An `oldText` source: literal text, or a slice of the content.
#[derive(Debug, Clone)]
enum Old {
    Text(String),
    Slice(Index, Index),
}

fn old_source() -> impl Strategy<Value = Old> {
    prop_oneof![
        edit_text(5).prop_map(Old::Text),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Old::Slice(a, b)),
    ]
}

/// A slice of `s` between two char boundaries picked by `a` and `b`.
fn slice_of(s: &str, a: Index, b: Index) -> String {
    let bounds: Vec<usize> = (0..=s.len()).filter(|&i| s.is_char_boundary(i)).collect();
    let (i, j) = (a.get(&bounds), b.get(&bounds));
    s[*i.min(j)..*i.max(j)].to_string()
}

fn ed(old: &str, new: &str) -> Edit {
    Edit {
        old_text: old.into(),
        new_text: new.into(),
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// Any batch: no panic, consistent error codes, a diff that turns the old content into
    /// the new, and a failing edit fails the whole batch.
    #[test]
    fn edits_arbitrary_batches(
        content in edit_text(40),
        edits in prop::collection::vec((old_source(), edit_text(5)), 0..4),
        replace_all in any::<bool>(),
    ) {
        let edits: Vec<Edit> = edits
            .into_iter()
            .map(|(old, new)| {
                let old = match old {
                    Old::Text(t) => t,
                    Old::Slice(a, b) => slice_of(&content, a, b),
                };
                ed(&old, &new)
            })
            .collect();
        check_edits(&content, &edits, replace_all).map_err(TestCaseError::fail)?;
    }

    /// Arbitrary unicode: no panic, and the same invariants.
    #[test]
    fn edits_arbitrary_text(
        content in "\\PC{0,48}",
        old in "\\PC{0,6}",
        new in "\\PC{0,6}",
        replace_all in any::<bool>(),
    ) {
        check_edits(&content, &[ed(&old, &new)], replace_all).map_err(TestCaseError::fail)?;
    }

    /// Replacing text that occurs once gives exactly the spliced string, at the exact level
    /// and on the right line.
    #[test]
    fn edits_unique_replacement(
        pre in edit_text(20),
        needle in edit_text(6),
        post in edit_text(20),
        new in edit_text(6),
    ) {
        let content = format!("{pre}{needle}{post}");
        prop_assume!(!needle.is_empty() && occurrences(&content, &needle) == 1);
        let o = apply_edits(&content, &[ed(&needle, &new)], "file", false).unwrap();
        prop_assert_eq!(&o.content, &format!("{pre}{new}{post}"));
        prop_assert_eq!(o.applied, 1);
        prop_assert_eq!(o.matches.len(), 1);
        prop_assert_eq!(o.matches[0].level, Level::Exact);
        prop_assert_eq!(o.matches[0].start_line, pre.matches('\n').count());
        prop_assert_eq!(o.matches[0].old_line_count, needle.matches('\n').count() + 1);
    }

    /// `replaceAll` of text that occurs is `str::replace`.
    #[test]
    fn edits_replace_all_is_str_replace(
        content in edit_text(40),
        a in any::<Index>(),
        b in any::<Index>(),
        new in edit_text(6),
    ) {
        let needle = slice_of(&content, a, b);
        prop_assume!(!needle.is_empty());
        let o = apply_edits(&content, &[ed(&needle, &new)], "file", true).unwrap();
        prop_assert_eq!(&o.content, &content.replace(&needle, &new));
        prop_assert_eq!(o.matches.len(), content.matches(&needle).count());
    }

    /// Unique, disjoint edits in any order give the content with each one spliced in.
    #[test]
    fn edits_disjoint_batch(
        parts in prop::collection::vec((edit_text(8), edit_text(4)), 1..5),
        tail in edit_text(8),
        order in any::<u64>(),
    ) {
        // Each marker is unique and cannot be confused with the filler text.
        let mut content = String::new();
        let mut want = String::new();
        let mut edits = Vec::new();
        for (i, (filler, new)) in parts.iter().enumerate() {
            let marker = format!("<{i}>");
            content.push_str(filler);
            content.push_str(&marker);
            want.push_str(filler);
            want.push_str(new);
            edits.push(ed(&marker, new));
        }
        content.push_str(&tail);
        want.push_str(&tail);
        shuffle(&mut edits, order);
        let o = apply_edits(&content, &edits, "file", false).unwrap();
        prop_assert_eq!(&o.content, &want);
        let rebuilt = apply_unified(&content, &o.diff);
        prop_assert_eq!(rebuilt.as_deref(), Some(want.as_str()));
    }
}

// ---------------------------------------------------------------------------------------
// apply_patch: the argument parser and the tool
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct GenPatch {
    path: String,
    edits: Vec<(String, String)>,
    /// Absent, `null`, or a string.
    version: Option<Option<String>>,
}

fn gen_patch() -> impl Strategy<Value = GenPatch> {
    (
        any::<String>(),
        prop::collection::vec((any::<String>(), any::<String>()), 0..3),
        prop::option::of(prop::option::of("[0-9a-f]{0,16}")),
    )
        .prop_map(|(path, edits, version)| GenPatch {
            path,
            edits,
            version,
        })
}

/// How a generated patch is damaged before parsing.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Damage {
    None,
    UnknownTop,
    UnknownFile,
    UnknownEdit,
    DropPath,
    DropEdits,
    DropOld,
    DropNew,
    PathNotString,
    EditsNotArray,
}

fn object_text(mut members: Vec<(String, String)>, shuffle: u64) -> String {
    // Rotate by a case-chosen amount: member order must not matter.
    if !members.is_empty() {
        let k = (shuffle as usize) % members.len();
        members.rotate_left(k);
    }
    let parts: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("{}:{v}", js(k)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

fn patch_text(patches: &[GenPatch], damage: Damage, shuffle: u64) -> String {
    let files: Vec<String> = patches
        .iter()
        .enumerate()
        .map(|(fi, p)| {
            let edits: Vec<String> = p
                .edits
                .iter()
                .enumerate()
                .map(|(ei, (o, n))| {
                    let mut m = Vec::new();
                    if !(fi == 0 && ei == 0 && damage == Damage::DropOld) {
                        m.push(("oldText".to_string(), js(o)));
                    }
                    if !(fi == 0 && ei == 0 && damage == Damage::DropNew) {
                        m.push(("newText".to_string(), js(n)));
                    }
                    if fi == 0 && ei == 0 && damage == Damage::UnknownEdit {
                        m.push(("replaceAll".to_string(), "true".to_string()));
                    }
                    object_text(m, shuffle)
                })
                .collect();
            let mut m = Vec::new();
            let first = fi == 0;
            if !(first && damage == Damage::DropPath) {
                let v = if first && damage == Damage::PathNotString {
                    "[]".to_string()
                } else {
                    js(&p.path)
                };
                m.push(("path".to_string(), v));
            }
            if !(first && damage == Damage::DropEdits) {
                let v = if first && damage == Damage::EditsNotArray {
                    "{}".to_string()
                } else {
                    format!("[{}]", edits.join(","))
                };
                m.push(("edits".to_string(), v));
            }
            match &p.version {
                None => {}
                Some(None) => m.push(("expectedVersion".to_string(), "null".to_string())),
                Some(Some(v)) => m.push(("expectedVersion".to_string(), js(v))),
            }
            if first && damage == Damage::UnknownFile {
                m.push(("expected_version".to_string(), js("x")));
            }
            object_text(m, shuffle / 7)
        })
        .collect();
    let mut top = vec![("patches".to_string(), format!("[{}]", files.join(",")))];
    if damage == Damage::UnknownTop {
        top.push(("dryRun".to_string(), "false".to_string()));
    }
    object_text(top, shuffle / 49)
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    })
}

/// The three files of the `apply_patch` workspace and the paths that name them.
const PATCH_FILES: [&str; 3] = ["f0", "f1", "sub/f2"];

fn patch_path() -> impl Strategy<Value = (String, Option<usize>)> {
    select(vec![
        ("f0", Some(0)),
        ("./f0", Some(0)),
        ("f1", Some(1)),
        ("sub/../f1", Some(1)),
        ("sub/f2", Some(2)),
        ("sub//f2", Some(2)),
        ("ROOT/f0", Some(0)),
        ("missing", None),
        ("../escape", None),
        ("/etc/hostname", None),
        ("", None),
    ])
    .prop_map(|(p, i)| (p.to_string(), i))
}

proptest! {
    #![proptest_config(config(256))]

    /// Any text: no panic.
    #[test]
    fn patch_arbitrary_text(text in "\\PC{0,128}|[\\[\\]{}\":,a-zA-Z ]{0,128}") {
        let _ = serde_json::from_str::<PatchArgs>(&text);
    }

    /// Any JSON value: no panic; an object (the only shape tool arguments arrive in) is
    /// accepted only with a `patches` array. (serde's derive also takes the positional
    /// form `[[...]]`, which arguments never have.)
    #[test]
    fn patch_arbitrary_json(v in any_json()) {
        let got = serde_json::from_value::<PatchArgs>(v.clone());
        if got.is_ok() {
            let positional = v.as_array().is_some_and(|a| a.len() == 1 && a[0].is_array());
            prop_assert!(
                positional || v.get("patches").is_some_and(Value::is_array),
                "{}",
                v
            );
        }
    }

    /// Generated patch arguments parse back to what was written, in any member order;
    /// unknown members, missing required ones and wrong types are refused.
    #[test]
    fn patch_round_trip(
        patches in prop::collection::vec(gen_patch(), 0..4),
        damage in select(vec![
            Damage::None,
            Damage::UnknownTop,
            Damage::UnknownFile,
            Damage::UnknownEdit,
            Damage::DropPath,
            Damage::DropEdits,
            Damage::DropOld,
            Damage::DropNew,
            Damage::PathNotString,
            Damage::EditsNotArray,
        ]),
        shuffle in any::<u64>(),
    ) {
        let text = patch_text(&patches, damage, shuffle);
        let got = serde_json::from_str::<PatchArgs>(&text);
        let first_edit = patches.first().is_some_and(|p| !p.edits.is_empty());
        let damaged = match damage {
            Damage::None => false,
            Damage::UnknownTop => true,
            Damage::DropOld | Damage::DropNew | Damage::UnknownEdit => first_edit,
            _ => !patches.is_empty(),
        };
        if damaged {
            prop_assert!(got.is_err(), "{} parsed", text);
            return Ok(());
        }
        let got = got.unwrap();
        prop_assert_eq!(got.patches.len(), patches.len());
        for (g, p) in got.patches.iter().zip(&patches) {
            prop_assert_eq!(&g.path, &p.path);
            prop_assert_eq!(&g.expected_version, &p.version.clone().flatten());
            let edits: Vec<(String, String)> =
                g.edits.iter().map(|e| (e.old_text.clone(), e.new_text.clone())).collect();
            prop_assert_eq!(&edits, &p.edits);
        }
        // Through a `Value` (the tool's own route) too.
        let v: Value = serde_json::from_str(&text).unwrap();
        prop_assert!(serde_json::from_value::<PatchArgs>(v).is_ok());
    }
}

proptest! {
    #![proptest_config(config(48))]

    /// The tool over a temporary workspace: it succeeds exactly when every path names one
    /// of the files, once, and every file's edits apply; then each file holds what
    /// `apply_edits` gives, and otherwise every file is left byte for byte as it was.
    #[test]
    fn patch_tool_is_all_or_nothing(
        contents in prop::collection::vec(edit_text(24), 3),
        patches in prop::collection::vec(
            (patch_path(), prop::collection::vec((old_source(), edit_text(4)), 0..3)),
            0..4,
        ),
    ) {
        use outrigger::tools::Tool;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        for (f, c) in PATCH_FILES.iter().zip(&contents) {
            std::fs::write(dir.path().join(f), c).unwrap();
        }
        let root_text = dir.path().display().to_string();
        let mut want = contents.clone();
        let mut ok = !patches.is_empty();
        let mut seen = Vec::new();
        let mut args = Vec::new();
        for ((path, file), edits) in &patches {
            let content = file.map(|i| contents[i].as_str()).unwrap_or("");
            let edits: Vec<Edit> = edits
                .iter()
                .map(|(old, new)| {
                    let old = match old {
                        Old::Text(t) => t.clone(),
                        Old::Slice(a, b) => slice_of(content, *a, *b),
                    };
                    ed(&old, new)
                })
                .collect();
            match file {
                Some(i) if !seen.contains(i) => {
                    seen.push(*i);
                    match apply_edits(content, &edits, PATCH_FILES[*i], false) {
                        Ok(o) => want[*i] = o.content,
                        Err(_) => ok = false,
                    }
                }
                _ => ok = false,
            }
            args.push(json!({"path": path.replace("ROOT", &root_text), "edits": edits}));
        }
        if !ok {
            want = contents.clone();
        }
        let mut s = settings();
        s.require_read_before_write = false;
        let s = Arc::new(s);
        let env = outrigger::tools::fs::FsEnv::new(Arc::new(move || s.clone()));
        let tool = Arc::new(outrigger::tools::fs::patch::tool(env));
        let ctx = outrigger::tools::ToolContext::new(dir.path().to_path_buf());
        let Value::Object(map) = json!({"patches": args}) else { unreachable!() };
        let result = runtime().block_on(tool.call(ctx, map));
        prop_assert_eq!(result.success, ok, "{:?}", result);
        for (f, w) in PATCH_FILES.iter().zip(&want) {
            let now = std::fs::read_to_string(dir.path().join(f)).unwrap();
            prop_assert_eq!(&now, w, "{}", f);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Path resolution
// ---------------------------------------------------------------------------------------

/// A workspace with links in and out of it and a blocked directory:
/// `sub/f`, `secret/k` (blocked), `out` → another directory, `sub/up` → `..`, `upup` →
/// `../..`, `slash` → `/`, `dang` → a missing absolute path, `loop` → itself, `inner` →
/// `sub`, `sec2` → `secret`, `fifo`-free.
struct PathFixture {
    _root: tempfile::TempDir,
    _outside: tempfile::TempDir,
    ws: Workspace,
}

fn path_fixture() -> &'static PathFixture {
    static FIXTURE: OnceLock<PathFixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        use std::os::unix::fs::symlink;
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("sub")).unwrap();
        std::fs::write(r.join("sub/f"), "f").unwrap();
        std::fs::create_dir_all(r.join("secret")).unwrap();
        std::fs::write(r.join("secret/k"), "k").unwrap();
        std::fs::write(outside.path().join("g"), "g").unwrap();
        symlink(outside.path(), r.join("out")).unwrap();
        symlink("..", r.join("sub/up")).unwrap();
        symlink("../..", r.join("upup")).unwrap();
        symlink("/", r.join("slash")).unwrap();
        symlink("/nonexistent-outrigger-fuzz/x", r.join("dang")).unwrap();
        symlink("loop", r.join("loop")).unwrap();
        symlink("sub", r.join("inner")).unwrap();
        symlink("secret", r.join("sec2")).unwrap();
        let mut s = settings();
        s.blocked_paths = vec![PathBuf::from("secret")];
        s.readable_roots = Vec::new();
        s.writable_roots = Vec::new();
        let ws = Workspace::new(r, &s).unwrap();
        PathFixture {
            _root: root,
            _outside: outside,
            ws,
        }
    })
}

/// Path components with no link or blocked name among them (the resolution of these is
/// lexical normalization).
const PLAIN: &[&str] = &[
    "", ".", "..", "sub", "f", "new", "é", "a\0b", " ", "~", "...",
];
const LINKED: &[&str] = &[
    "out", "up", "upup", "slash", "dang", "loop", "inner", "secret", "sec2", "k", "g",
];

#[derive(Debug, Clone)]
struct GenPath {
    /// 0: relative, 1: `/`, 2: the root, 3: `/tmp/`, 4: `//`.
    prefix: u8,
    comps: Vec<String>,
    trailing_slash: bool,
}

impl GenPath {
    fn text(&self, root: &Path) -> String {
        let prefix = match self.prefix {
            0 => String::new(),
            1 => "/".into(),
            2 => format!("{}/", root.display()),
            3 => "/tmp/".into(),
            _ => "//".into(),
        };
        let slash = if self.trailing_slash { "/" } else { "" };
        format!("{prefix}{}{slash}", self.comps.join("/"))
    }

    fn is_plain(&self) -> bool {
        self.comps
            .iter()
            .all(|c| PLAIN.contains(&c.as_str()) || c.starts_with("xxx"))
    }
}

fn gen_path() -> impl Strategy<Value = GenPath> {
    let comp = prop_oneof![
        6 => select(PLAIN.to_vec()).prop_map(String::from),
        4 => select(LINKED.to_vec()).prop_map(String::from),
        1 => (1usize..400).prop_map(|n| "x".repeat(n.max(3))),
        1 => any::<String>(),
    ];
    (0u8..5, prop::collection::vec(comp, 0..8), any::<bool>()).prop_map(
        |(prefix, comps, trailing_slash)| GenPath {
            prefix,
            comps,
            trailing_slash,
        },
    )
}

/// Lexical normalization, written independently: `.` and empty components dropped, `..`
/// pops (never above `/`).
fn lexical(abs: &str) -> PathBuf {
    let mut parts: Vec<&str> = Vec::new();
    for c in abs.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = PathBuf::from("/");
    for p in parts {
        out.push(p);
    }
    out
}

/// What must hold of a path `resolve_*` accepted: inside the root, normalized, not blocked,
/// and every existing ancestor's real path inside the root too.
fn check_resolved(root: &Path, given: &str, p: &Path) -> Result<(), TestCaseError> {
    prop_assert!(p.starts_with(root), "{:?} resolved to {:?}", given, p);
    prop_assert!(
        p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
        "{:?} resolved to the unnormalized {:?}",
        given,
        p
    );
    prop_assert!(
        !p.starts_with(root.join("secret")),
        "{:?} reached the blocked {:?}",
        given,
        p
    );
    for a in p.ancestors().take_while(|a| a.starts_with(root)) {
        if let Ok(real) = std::fs::canonicalize(a) {
            prop_assert!(
                real.starts_with(root),
                "{:?}: {:?} is really {:?}",
                given,
                a,
                real
            );
            prop_assert!(
                !real.starts_with(root.join("secret")),
                "{:?}: {:?} is blocked",
                given,
                a
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    /// Whatever the path (`..`, links out, `/`, NUL, long or unicode components), what
    /// `resolve_write`/`resolve_read` accept is inside the root, and the directory opened
    /// for a write is really inside it.
    #[test]
    fn paths_stay_inside_the_root(g in gen_path()) {
        let fx = path_fixture();
        let root = fx.ws.root();
        let text = g.text(root);
        let write = fx.ws.resolve_write(&text);
        let read = fx.ws.resolve_read(&text);
        if let Ok(p) = &write {
            check_resolved(root, &text, p)?;
            if let Ok((fd, name)) = fx.ws.open_parent_for_write(&text, p) {
                use std::os::fd::AsRawFd;
                let dir = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
                let target = dir.join(name);
                prop_assert!(target.starts_with(root), "{:?} opens {:?}", text, target);
                prop_assert!(!target.starts_with(root.join("secret")), "{:?} opens {:?}", text, target);
            }
        }
        if let Ok(p) = &read {
            check_resolved(root, &text, p)?;
        }
        // Only the root is readable and writable here, so the two agree (but for `.git`).
        check_write_read(&text, &write, &read).map_err(TestCaseError::fail)?;
        // Without links, resolution is lexical: accepted exactly when the normalized path
        // is inside the root, and then it is that path.
        if g.is_plain() && !text.is_empty() {
            let abs = if text.starts_with('/') {
                text.clone()
            } else {
                format!("{}/{text}", root.display())
            };
            let want = lexical(&abs);
            if want.starts_with(root) {
                prop_assert_eq!(write.as_deref().ok(), Some(want.as_path()), "{:?}", text);
            } else {
                prop_assert!(write.is_err(), "{:?} resolved to {:?}", text, write);
            }
        }
    }

    /// The workspace root itself: an accepted root is an absolute directory that is not `/`.
    #[test]
    fn workspace_root_is_never_slash(g in gen_path()) {
        let fx = path_fixture();
        let text = g.text(fx.ws.root());
        let joined = if g.prefix == 0 {
            fx.ws.root().join(&text)
        } else {
            PathBuf::from(&text)
        };
        for given in [PathBuf::from(&text), joined] {
            if let Ok(p) = root::resolve(Some(&given), root::CONTEXT_CWD, None) {
                prop_assert!(p.is_absolute() && p.is_dir(), "{:?}", p);
                prop_assert!(!root::is_filesystem_root(&p), "{:?} is /", p);
                prop_assert!(Workspace::new(&p, &settings()).is_ok(), "{:?}", p);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Plugin manifest parser
// ---------------------------------------------------------------------------------------

const MODES: &[&str] = &["read", "safe_write", "destructive", "local", "external"];
const EXPOSURES: &[&str] = &["direct", "deferred", "hidden"];

/// A directory holding an executable `bin/t`, for manifests to point at.
fn plugin_dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        let exe = dir.path().join("bin/t");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    })
}

/// What must hold of any parse: an error names the file; a manifest is fully valid.
fn check_manifest(text: &str) -> Result<(), TestCaseError> {
    let path = plugin_dir().path().join("plugin.toml");
    match parse_str(text, path.clone()) {
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(msg.contains(&path.display().to_string()), "{}", msg);
        }
        Ok(m) => {
            prop_assert!(outrigger::tools::valid_tool_name(&m.name));
            prop_assert!(!m.tools.is_empty() && m.tools.len() <= 256);
            let mut names: Vec<&str> = m.tools.iter().map(|t| t.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            prop_assert_eq!(names.len(), m.tools.len());
            for t in &m.tools {
                prop_assert!(outrigger::tools::valid_tool_name(&t.name));
                prop_assert!(!t.description.trim().is_empty());
                prop_assert!(!t.timeout.is_zero() && t.timeout <= MAX_TIMEOUT);
                prop_assert!(t.exec.is_absolute());
                prop_assert_eq!(
                    serde_json::to_value(&t.parameters).unwrap()["type"].clone(),
                    json!("object")
                );
            }
        }
    }
    Ok(())
}

/// TOML-, JSON- and YAML-shaped pieces.
const MANIFEST_TOKENS: &[&str] = &[
    "[[tools]]\n",
    "[tools]\n",
    "[[tools.x]]\n",
    "name = ",
    "description = ",
    "exec = ",
    "timeout = ",
    "parameters = ",
    "mode = ",
    "exposure = ",
    "env = ",
    "args = ",
    "\"t\"",
    "\"d\"",
    "\"bin/t\"",
    "\"/bin/sh\"",
    "\"10s\"",
    "\"0ms\"",
    "\"99999999999999999999m\"",
    "'x'",
    "\"\"\"",
    "'''",
    "\"{\\\"type\\\":\\\"object\\\"}\"",
    "{ type = \"object\", properties = { a = { type = \"string\" } } }",
    "{ type = \"object\", pattern = \"(\" }",
    "{",
    "}",
    "[",
    "]",
    "=",
    ",",
    "\n",
    "\n",
    " ",
    "1",
    "-1",
    "600001",
    "1e400",
    "nan",
    "inf",
    "1979-05-27T07:32:00Z",
    "true",
    "#",
    "\\u00e9",
    "\"\\ud800\"",
    "a.b.c = 1\n",
    "- item\n",
    "key: value\n",
    "{\"name\": \"t\"}",
    "\0",
    "é",
];

fn manifest_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            8 => select(MANIFEST_TOKENS.to_vec()).prop_map(String::from),
            1 => "\\PC{0,6}",
        ],
        0..40,
    )
    .prop_map(|v| v.concat())
}

/// A well-formed tool: `(name suffix, description, args, timeout (kind, n), mode,
/// exposure, env, parameters, absolute exec)`.
#[derive(Debug, Clone)]
struct GenTool {
    suffix: String,
    description: String,
    args: Vec<String>,
    timeout: (u8, u64),
    mode: Option<&'static str>,
    exposure: Option<&'static str>,
    env: BTreeMap<String, String>,
    parameters: Option<(bool, BTreeMap<String, &'static str>)>,
    absolute_exec: bool,
}

fn gen_tool() -> impl Strategy<Value = GenTool> {
    let timeout = prop_oneof![
        (1u64..=600_000).prop_map(|n| (0u8, n)),
        (1u64..=600_000).prop_map(|n| (1u8, n)),
        (1u64..=600).prop_map(|n| (2u8, n)),
        (1u64..=10).prop_map(|n| (3u8, n)),
    ];
    let no_nul = || any::<String>().prop_map(|s| s.replace('\0', ""));
    (
        "[A-Za-z0-9_-]{0,20}",
        any::<String>().prop_map(|s| format!("{s}.")),
        prop::collection::vec(no_nul(), 0..3),
        timeout,
        prop::option::of(select(MODES.to_vec())),
        prop::option::of(select(EXPOSURES.to_vec())),
        prop::collection::btree_map(
            no_nul().prop_map(|k| format!("K{}", k.replace('=', ""))),
            no_nul(),
            0..3,
        ),
        prop::option::of((
            any::<bool>(),
            prop::collection::btree_map(
                "[a-z]{1,8}",
                select(vec!["string", "integer", "boolean", "array", "object"]),
                0..3,
            ),
        )),
        any::<bool>(),
    )
        .prop_map(
            |(
                suffix,
                description,
                args,
                timeout,
                mode,
                exposure,
                env,
                parameters,
                absolute_exec,
            )| {
                GenTool {
                    suffix,
                    description,
                    args,
                    timeout,
                    mode,
                    exposure,
                    env,
                    parameters,
                    absolute_exec,
                }
            },
        )
}

/// What a generated manifest must load as.
#[derive(Debug)]
struct WantManifest {
    name: String,
    description: Option<String>,
    path: PathBuf,
    tools: Vec<WantTool>,
}

#[derive(Debug)]
struct WantTool {
    name: String,
    description: String,
    parameters: Value,
    exec: PathBuf,
    args: Vec<String>,
    timeout: Duration,
    mode: Option<String>,
    exposure: Option<String>,
    env: BTreeMap<String, String>,
}

/// The manifest text (through the `toml` serializer) and the manifest it must load as.
fn gen_manifest(
    name: &Option<String>,
    description: &Option<String>,
    tools: &[GenTool],
) -> (String, WantManifest) {
    let dir = plugin_dir().path();
    let path = dir.join("plugin.toml");
    let mut doc = toml::Table::new();
    if let Some(n) = name {
        doc.insert("name".into(), n.clone().into());
    }
    if let Some(d) = description {
        doc.insert("description".into(), d.clone().into());
    }
    let mut raw_tools = Vec::new();
    let mut specs = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let tool_name = format!("t{i}{}", t.suffix)
            .chars()
            .take(64)
            .collect::<String>();
        let mut tt = toml::Table::new();
        tt.insert("name".into(), tool_name.clone().into());
        tt.insert("description".into(), t.description.clone().into());
        let exec_path = dir.join("bin/t");
        let exec_text = if t.absolute_exec {
            exec_path.display().to_string()
        } else {
            "bin/t".into()
        };
        tt.insert("exec".into(), exec_text.into());
        if !t.args.is_empty() {
            let args: Vec<toml::Value> = t.args.iter().map(|a| a.clone().into()).collect();
            tt.insert("args".into(), toml::Value::Array(args));
        }
        let (kind, n) = t.timeout;
        let (tv, timeout): (toml::Value, Duration) = match kind {
            0 => ((n as i64).into(), Duration::from_millis(n)),
            1 => (format!("{n}ms").into(), Duration::from_millis(n)),
            2 => (format!("{n}s").into(), Duration::from_secs(n)),
            _ => (format!("{n}m").into(), Duration::from_secs(n * 60)),
        };
        tt.insert("timeout".into(), tv);
        if let Some(m) = t.mode {
            tt.insert("mode".into(), m.into());
        }
        if let Some(x) = t.exposure {
            tt.insert("exposure".into(), x.into());
        }
        if !t.env.is_empty() {
            let env: toml::Table = t
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into()))
                .collect();
            tt.insert("env".into(), toml::Value::Table(env));
        }
        let parameters = match &t.parameters {
            None => json!({"type": "object"}),
            Some((as_json, props)) => {
                let props_json: Map<String, Value> = props
                    .iter()
                    .map(|(k, ty)| (k.clone(), json!({"type": ty})))
                    .collect();
                let schema = json!({"type": "object", "properties": props_json});
                if *as_json {
                    tt.insert("parameters".into(), schema.to_string().into());
                } else {
                    let mut props_toml = toml::Table::new();
                    for (k, ty) in props {
                        let mut p = toml::Table::new();
                        p.insert("type".into(), (*ty).into());
                        props_toml.insert(k.clone(), toml::Value::Table(p));
                    }
                    let mut p = toml::Table::new();
                    p.insert("type".into(), "object".into());
                    p.insert("properties".into(), toml::Value::Table(props_toml));
                    tt.insert("parameters".into(), toml::Value::Table(p));
                }
                schema
            }
        };
        raw_tools.push(toml::Value::Table(tt));
        specs.push(WantTool {
            name: tool_name,
            description: t.description.clone(),
            parameters,
            exec: exec_path,
            args: t.args.clone(),
            timeout,
            mode: t.mode.map(String::from),
            exposure: t.exposure.map(String::from),
            env: t.env.clone(),
        });
    }
    doc.insert("tools".into(), toml::Value::Array(raw_tools));
    let text = toml::to_string(&doc).unwrap();
    let manifest = WantManifest {
        name: name.clone().unwrap_or_else(|| "plugin".into()),
        description: description.clone(),
        path,
        tools: specs,
    };
    (text, manifest)
}

proptest! {
    #![proptest_config(config(256))]

    /// Arbitrary text: no panic; errors name the file; what loads is valid.
    #[test]
    fn manifest_arbitrary_text(text in "\\PC{0,200}") {
        check_manifest(&text)?;
    }

    /// TOML-, JSON- and YAML-shaped soup: the same.
    #[test]
    fn manifest_token_soup(text in manifest_soup()) {
        check_manifest(&text)?;
    }

    /// A valid manifest loads as exactly what it declares (strings of any characters,
    /// every timeout form, tables and JSON strings for parameters).
    #[test]
    fn manifest_round_trip(
        name in prop::option::of("[A-Za-z0-9_-]{1,64}"),
        description in prop::option::of(any::<String>()),
        tools in prop::collection::vec(gen_tool(), 1..4),
    ) {
        let (text, want) = gen_manifest(&name, &description, &tools);
        match parse_str(&text, want.path.clone()) {
            Ok(got) => {
                prop_assert_eq!(&got.name, &want.name);
                prop_assert_eq!(&got.description, &want.description);
                prop_assert_eq!(&got.path, &want.path);
                prop_assert_eq!(got.tools.len(), want.tools.len());
                for (g, w) in got.tools.iter().zip(&want.tools) {
                    prop_assert_eq!(&g.name, &w.name);
                    prop_assert_eq!(&g.description, &w.description);
                    prop_assert_eq!(serde_json::to_value(&g.parameters).unwrap(), w.parameters.clone());
                    prop_assert_eq!(&g.exec, &w.exec);
                    prop_assert_eq!(&g.args, &w.args);
                    prop_assert_eq!(g.timeout, w.timeout);
                    prop_assert_eq!(&g.mode, &w.mode);
                    prop_assert_eq!(&g.exposure, &w.exposure);
                    prop_assert_eq!(&g.env, &w.env);
                }
            }
            Err(e) => prop_assert!(false, "{} refused: {}", text, e),
        }
    }

    /// `parse_duration`: no panic on anything; `<n><unit>` is exact (or `None` past
    /// `u64` seconds); `format_duration` output parses back.
    #[test]
    fn manifest_durations(
        text in "\\PC{0,24}|[0-9]{0,24}(ms|s|m|h|)",
        n in any::<u64>(),
        ms in any::<u64>(),
    ) {
        if let Some(d) = parse_duration(&text) {
            let digits = text.trim_end_matches(|c: char| !c.is_ascii_digit());
            prop_assert!(!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
            prop_assert!(["ms", "s", "m"].contains(&&text[digits.len()..]), "{:?} -> {:?}", text, d);
        }
        prop_assert_eq!(parse_duration(&format!("{n}ms")), Some(Duration::from_millis(n)));
        prop_assert_eq!(parse_duration(&format!("{n}s")), Some(Duration::from_secs(n)));
        prop_assert_eq!(
            parse_duration(&format!("{n}m")),
            n.checked_mul(60).map(Duration::from_secs)
        );
        prop_assert_eq!(parse_duration(&format!("{n}")), None);
        let d = Duration::from_millis(ms);
        prop_assert_eq!(parse_duration(&format_duration(d)), Some(d));
    }
}

/// Found by the `paths` fuzz target after `.git` writes became `path_protected`: the
/// harness's oracle still wanted writes and reads of one path to agree. Writes into a `.git`
/// directory are refused (any case, however reached) while reads resolve.
#[test]
fn regression_git_dir_writes_are_refused_reads_resolve() {
    let fx = path_fixture();
    let root = fx.ws.root();
    for text in [
        ".git".to_string(),
        ".GIT/hooks/pre-commit".to_string(),
        "sub/../.git/config".to_string(),
        format!("{}/.git/x", root.display()),
    ] {
        let write = fx.ws.resolve_write(&text);
        let read = fx.ws.resolve_read(&text);
        assert!(
            format!("{write:?}").starts_with("Err(GitDir"),
            "{text}: {write:?}"
        );
        assert!(read.is_ok(), "{text}: {read:?}");
        check_write_read(&text, &write, &read).unwrap();
    }
}
