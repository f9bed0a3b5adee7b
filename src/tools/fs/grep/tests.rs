//! Unit tests of `grep`.

use super::*;

fn args(v: Value) -> GrepArgs {
    serde_json::from_value(v).unwrap()
}

#[test]
fn long_lines_are_cut_around_the_match() {
    let m = RegexMatcher::new("NEEDLE").unwrap();
    let line = format!("{}NEEDLE{}\n", "a".repeat(1000), "b".repeat(1000));
    let w = window(line.as_bytes(), Some(&m));
    assert!(w.contains("NEEDLE"), "{w}");
    assert!(w.starts_with('…') && w.ends_with('…'));
    assert_eq!(w.chars().count(), LINE_CAP + 2);
    let short = window(b"short line\r\n", Some(&m));
    assert_eq!(short, "short line");
    let tail = format!("{}NEEDLE", "a".repeat(1000));
    let w = window(tail.as_bytes(), Some(&m));
    assert!(w.ends_with("NEEDLE") && w.starts_with('…'));
    let ctx = window("é".repeat(500).as_bytes(), None);
    assert_eq!(ctx.chars().count(), LINE_CAP + 1, "characters, not bytes");
}

#[test]
fn context_flags_and_limits() {
    let q = Query::from_args(&args(
        json!({"pattern": "x", "outputMode": "content", "context": 3, "after": 1}),
    ))
    .unwrap();
    assert_eq!((q.before, q.after), (3, 1));
    let q = Query::from_args(&args(json!({"pattern": "x", "context": 3}))).unwrap();
    assert_eq!((q.before, q.after), (0, 0), "context only in content mode");
    assert_eq!(q.head_limit, DEFAULT_HEAD_LIMIT);
    let e = Query::from_args(&args(json!({"pattern": "a(b"})))
        .err()
        .unwrap();
    assert!(e.contains("invalid regex"), "{e}");
    let e = Query::from_args(&args(json!({"pattern": "a\\nb"})))
        .err()
        .unwrap();
    assert!(e.contains("multiline"), "hint names multiline");
    assert!(Query::from_args(&args(json!({"pattern": "a\\nb", "multiline": true}))).is_ok());
}

#[test]
fn grouping_attaches_context() {
    let ev = |line, kind| Event {
        line,
        text: format!("l{line}"),
        kind,
    };
    let hits = group(
        "f",
        vec![
            ev(1, Kind::Before),
            ev(2, Kind::Match),
            ev(3, Kind::After),
            ev(5, Kind::Before),
            ev(6, Kind::Match),
        ],
    );
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0].before.len(), 1);
    assert_eq!(hits[0].after[0].line, 3);
    assert_eq!(hits[1].before[0].line, 5);
}

#[test]
fn a_cancelled_call_stops_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "needle\n").unwrap();
    let env = crate::tools::fs::test_env();
    let ctx = ToolContext::new(dir.path().to_path_buf());
    let r = run_grep(&env, &ctx, args(json!({"pattern": "needle"})));
    assert!(r.success, "{r:?}");
    ctx.cancel.cancel();
    let r = run_grep(&env, &ctx, args(json!({"pattern": "needle"})));
    assert!(!r.success);
    assert_eq!(r.data.unwrap()["code"], "cancelled");
}

#[test]
fn types_resolve() {
    assert_eq!(type_extensions("golang").unwrap(), &["go"]);
    assert!(type_extensions("cobol").unwrap_err().contains("rust"));
}
