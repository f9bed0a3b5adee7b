//! `workspace.apply_edits` over the pipes: the pure edit algorithm, its result shape, its
//! error codes (`-32003`, kind `edit_failed`, `data.code`) and the diff hunk rule.

use crate::common::Sidecar;
use serde_json::{Value, json};

fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line{i}\n")).collect()
}

fn hunks(diff: &str) -> usize {
    diff.lines().filter(|l| l.starts_with("@@")).count()
}

fn failure(s: &mut Sidecar, params: Value) -> Value {
    let r = s.call("workspace.apply_edits", params);
    let e = r["error"].clone();
    assert!(!e.is_null(), "expected an error: {r}");
    assert_eq!(e["code"], -32003, "{e}");
    assert_eq!(e["kind"], "edit_failed", "{e}");
    assert_eq!(e["data"]["kind"], "edit_failed", "{e}");
    e
}

#[test]
fn applies_and_reports_the_reference_shape() {
    let mut s = Sidecar::start();
    let r = s.ok(
        "workspace.apply_edits",
        json!({"content": "a\nb\nc\n", "edits": [{"oldText": "b", "newText": "B"}]}),
    );
    assert_eq!(r["content"], "a\nB\nc\n");
    assert_eq!(r["applied"], 1);
    assert_eq!(
        r["matches"],
        json!([{"level": "exact", "startLine": 1, "oldLineCount": 1}])
    );
    assert_eq!(
        r["diff"],
        "--- a/file\n+++ b/file\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    );
    let r = s.ok(
        "workspace.apply_edits",
        json!({"content": "x\n", "edits": [{"oldText": "x", "newText": "y"}], "filePath": "src/m.rs"}),
    );
    assert!(
        r["diff"]
            .as_str()
            .unwrap()
            .starts_with("--- a/src/m.rs\n+++ b/src/m.rs\n")
    );
}

#[test]
fn match_levels_and_file_order() {
    let mut s = Sidecar::start();
    let content = "fn main() {\n    let a = 1;\n    let b = 2;\n}\n// it’s “quoted” — ok\n";
    let r = s.ok(
        "workspace.apply_edits",
        json!({"content": content, "edits": [
            {"oldText": "// it's \"quoted\" - ok", "newText": "// plain"},
            {"oldText": "let a = 1;\nlet b = 2;", "newText": "let c = 3;"},
            {"oldText": "fn main()", "newText": "fn start()"}
        ]}),
    );
    assert_eq!(r["content"], "fn start() {\nlet c = 3;\n}\n// plain\n");
    assert_eq!(r["applied"], 3);
    // Listed in file order, not input order.
    assert_eq!(
        r["matches"],
        json!([
            {"level": "exact", "startLine": 0, "oldLineCount": 1},
            {"level": "trim", "startLine": 1, "oldLineCount": 2},
            {"level": "unicode", "startLine": 4, "oldLineCount": 1}
        ])
    );
}

#[test]
fn every_error_code() {
    let mut s = Sidecar::start();
    let cases = [
        (json!({"content": "abc", "edits": []}), "no_edits"),
        (
            json!({"content": "abc", "edits": [{"oldText": "", "newText": "x"}]}),
            "empty_old",
        ),
        (
            json!({"content": "abc", "edits": [{"oldText": "zz", "newText": "x"}]}),
            "not_found",
        ),
        (
            json!({"content": "ab ab", "edits": [{"oldText": "ab", "newText": "x"}]}),
            "ambiguous",
        ),
        (
            json!({"content": "hello world", "edits": [
                {"oldText": "hello wo", "newText": "x"},
                {"oldText": "lo world", "newText": "y"}
            ]}),
            "overlap",
        ),
    ];
    for (params, code) in cases {
        let e = failure(&mut s, params.clone());
        assert_eq!(e["data"]["code"], code, "{params}: {e}");
        assert!(!e["message"].as_str().unwrap().is_empty());
    }
    // A later edit failing keeps the whole batch from applying (and names that edit).
    let e = failure(
        &mut s,
        json!({"content": "one two", "edits": [
            {"oldText": "one", "newText": "1"},
            {"oldText": "three", "newText": "3"}
        ]}),
    );
    assert_eq!(e["data"]["code"], "not_found");
    assert_eq!(e["data"]["edit"], 1);
    // Malformed params are invalid_params, not edit failures.
    let r = s.call("workspace.apply_edits", json!({"content": "x"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[test]
fn replace_all_replaces_every_exact_occurrence() {
    let mut s = Sidecar::start();
    let r = s.ok(
        "workspace.apply_edits",
        json!({"content": "ab ab ab", "edits": [{"oldText": "ab", "newText": "x"}], "replaceAll": true}),
    );
    assert_eq!(r["content"], "x x x");
    assert_eq!(r["matches"].as_array().unwrap().len(), 3);
}

#[test]
fn diff_hunks_merge_only_across_small_gaps() {
    let mut s = Sidecar::start();
    let content = numbered(30);
    let diff = |s: &mut Sidecar, a: usize, b: usize| {
        let r = s.ok(
            "workspace.apply_edits",
            json!({"content": content, "edits": [
                {"oldText": format!("line{a}\n"), "newText": format!("L{a}\n")},
                {"oldText": format!("line{b}\n"), "newText": format!("L{b}\n")}
            ]}),
        );
        r["diff"].as_str().unwrap().to_string()
    };
    // 2 lines apart: one hunk.
    let d = diff(&mut s, 3, 5);
    assert_eq!(hunks(&d), 1, "{d}");
    assert!(d.contains("@@ -1,8 +1,8 @@"), "{d}");
    // 23 lines apart (lines 2 and 25): two hunks.
    let d = diff(&mut s, 2, 25);
    assert_eq!(hunks(&d), 2, "{d}");
    assert!(
        d.contains("@@ -1,5 +1,5 @@") && d.contains("@@ -22,7 +22,7 @@"),
        "{d}"
    );
    // The boundary: 6 unchanged lines between changes merge, 7 split.
    assert_eq!(hunks(&diff(&mut s, 10, 17)), 1);
    assert_eq!(hunks(&diff(&mut s, 10, 18)), 2);
}

/// Inputs crafted against the matcher (issue 12): every line is the same, so a naive search
/// re-compares tens of thousands of lines (or bytes) at each of thousands of candidate starts.
/// Before the linear matcher these took 10–25 s of CPU in release (`docs/benchmarks.md`) and
/// ran past the harness's wait; the results pin what the linear one must still find.
#[test]
fn crafted_80000_line_inputs_keep_their_results() {
    let mut s = Sidecar::start();
    let n = 80_000;
    // Trim level: the indented lines only match once trimmed; the one `b` makes it unique.
    let content = format!("{}  b\n", "  a\n".repeat(n));
    let old = format!("{}b", "a\n".repeat(n / 2));
    let r = s.ok(
        "workspace.apply_edits",
        json!({"content": content, "edits": [{"oldText": old, "newText": "x"}]}),
    );
    assert_eq!(
        r["matches"],
        json!([{"level": "trim", "startLine": n / 2, "oldLineCount": n / 2 + 1}])
    );
    assert_eq!(r["content"], format!("{}x\n", "  a\n".repeat(n / 2)));

    // Trim level, no match: the last wanted line is nowhere.
    let e = failure(
        &mut s,
        json!({"content": "a\n".repeat(n), "edits": [{"oldText": format!("{}zz", "a\n".repeat(n / 2)), "newText": "x"}]}),
    );
    assert_eq!(e["data"]["code"], "not_found", "{e}");

    // Exact level: a long periodic needle occurs at every line from 0 to 40,000 (overlapping);
    // that is ambiguous, and the trim level then finds the one place ending on the last (empty)
    // line.
    let line = format!("{}\n", "a".repeat(100));
    let r = s.ok(
        "workspace.apply_edits",
        json!({"content": line.repeat(n), "edits": [{"oldText": line.repeat(n / 2), "newText": "x"}]}),
    );
    assert_eq!(
        r["matches"],
        json!([{"level": "trim", "startLine": n / 2, "oldLineCount": n / 2 + 1}])
    );
    assert_eq!(r["content"], format!("{}x", line.repeat(n / 2)));

    // Unicode level: ambiguous, and the count is capped where it always was.
    let e = failure(
        &mut s,
        json!({"content": "\u{2019}\n".repeat(n), "edits": [{"oldText": "'\n".repeat(n / 2), "newText": "x"}]}),
    );
    assert_eq!(e["data"]["code"], "ambiguous", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("matches 1000 places"),
        "{e}"
    );
}
