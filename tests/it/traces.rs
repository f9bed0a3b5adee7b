//! Finished traces are persisted: after a restart on the same database `trace.fetch` still
//! answers with the same trace; unknown ids stay `-32004`.

use std::time::Duration;

use crate::common::on_db;
use crate::support::chat_helpers::*;
use serde_json::json;

#[test]
fn a_finished_trace_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("traces.db");
    let w = tempfile::tempdir().unwrap();
    std::fs::write(w.path().join("notes.txt"), "hello\n").unwrap();
    let mut s = on_db(&db);
    let script = json!([
        {"toolCalls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "ok"}
    ]);
    let r = run(
        &mut s,
        merge(
            scripted(script, "x"),
            json!({"cwd": w.path(), "chatId": "chat_trace"}),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let trace_id = r.done["traceId"].clone();
    let before = s.ok("trace.fetch", json!({"traceId": trace_id}));
    assert_eq!(before["trace"]["spanCount"], 3);
    s.ok("system.shutdown_now", json!({}));
    assert!(s.wait_exit(Duration::from_secs(10)).success());
    drop(s);

    let mut s = on_db(&db);
    let after = s.ok("trace.fetch", json!({"traceId": trace_id}));
    assert_eq!(after["trace"]["traceId"], trace_id);
    assert_eq!(after["trace"]["status"], "completed");
    assert_eq!(after["trace"]["spanCount"], before["trace"]["spanCount"]);
    assert_eq!(after["trace"]["eventCount"], before["trace"]["eventCount"]);
    assert_eq!(
        after["spans"].as_array().unwrap().len(),
        before["spans"].as_array().unwrap().len()
    );
    assert_eq!(
        after["events"].as_array().unwrap().len(),
        before["events"].as_array().unwrap().len()
    );
    let r = s.call("trace.fetch", json!({"traceId": "trace_nope"}));
    assert_eq!(code(&r), -32004);
}

#[test]
fn traces_dropped_from_memory_are_fetched_from_the_store() {
    // No memory for finished traces at all: every fetch after the stream ends is the
    // store's copy, identical to what the live trace said.
    let mut s = crate::common::Sidecar::start_with(crate::common::Opts {
        env: vec![("OUTRIGGER_TRACE_MEMORY_BYTES".into(), "0".into())],
        ..Default::default()
    });
    let mut ids = Vec::new();
    for i in 0..3 {
        let r = run(
            &mut s,
            merge(
                scripted(json!([{"text": "ok"}]), "x"),
                json!({"chatId": format!("chat_mem_{i}")}),
            ),
        );
        assert_eq!(r.done["status"], "completed");
        ids.push(r.done["traceId"].clone());
    }
    for id in ids {
        let t = s.ok("trace.fetch", json!({"traceId": id}));
        assert_eq!(t["trace"]["traceId"], id);
        assert_eq!(t["trace"]["status"], "completed");
        assert!(t["events"].as_array().is_some_and(|e| !e.is_empty()), "{t}");
    }
    let h = s.ok("system.ping", json!(null));
    assert_eq!(h["activeTraces"], 0);
}

/// Retention: with `trace_max_stored: 1` the store keeps only the newest trace once a pass
/// runs (with the process's first stored trace, then every 64th); memory answers until the
/// process restarts, the store after.
#[test]
fn stored_traces_beyond_trace_max_stored_are_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("traces.db");
    let opts = |db: &std::path::Path| crate::common::Opts {
        args: vec!["--storage-path".into(), db.display().to_string()],
        env: vec![("OUTRIGGER_TRACE_MAX_STORED".into(), "1".into())],
        ..crate::common::Opts::default()
    };
    let mut s = crate::common::Sidecar::start_with(opts(&db));
    let mut ids = Vec::new();
    // The 1st and the 65th stored traces run a pass.
    for i in 0..65 {
        let r = run(
            &mut s,
            merge(
                scripted(json!([{"text": "ok"}]), "x"),
                json!({"chatId": format!("chat_keep_{i}")}),
            ),
        );
        assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
        ids.push(r.done["traceId"].clone());
    }
    s.ok("system.shutdown_now", json!({}));
    assert!(s.wait_exit(Duration::from_secs(10)).success());
    drop(s);

    let mut s = crate::common::Sidecar::start_with(opts(&db));
    let last = s.ok("trace.fetch", json!({"traceId": ids[64]}));
    assert_eq!(last["trace"]["traceId"], ids[64]);
    for old in [&ids[0], &ids[1], &ids[63]] {
        let r = s.call("trace.fetch", json!({"traceId": old}));
        assert_eq!(r["error"]["code"], -32004, "{old}: {r}");
    }
}

/// Spans are stored as they finish: SIGKILL mid-turn (while a tool runs) and the restarted
/// sidecar still answers `trace.fetch` for the turn's trace (its id from the stream's start)
/// with every span that had finished, the trace marked `interrupted`.
#[test]
fn finished_spans_survive_a_sigkill_mid_turn() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("traces.db");
    let w = tempfile::tempdir().unwrap();
    std::fs::write(w.path().join("notes.txt"), "hello\n").unwrap();
    let mut s = on_db(&db);
    let script = json!([
        {"toolCalls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"toolCalls": [{"id": "b1", "name": "bash", "arguments": {"command": "sleep 60"}}]},
        {"text": "never"}
    ]);
    let p = merge(
        scripted(script, "read then wait"),
        json!({"cwd": w.path(), "chatId": "chat_span_crash"}),
    );
    let started = s.ok("agent.chat.stream", p);
    let id = started["streamId"].as_str().unwrap().to_string();
    let trace_id = started["traceId"].clone();
    assert!(
        trace_id.as_str().is_some_and(|t| !t.is_empty()),
        "{started}"
    );
    until(&mut s, &id, |f| f["params"]["toolCall"]["id"] == "b1");
    // While the turn runs the live trace answers: the first request and read_file finished.
    let live = s.ok("trace.fetch", json!({"traceId": trace_id}));
    assert_eq!(live["trace"]["status"], "running", "{live}");
    let done_before: Vec<String> = live["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["status"] != "running")
        .map(|x| x["name"].as_str().unwrap().to_string())
        .collect();
    assert!(done_before.len() >= 2, "{live}");
    // The span writes go through the store's writer thread: wait until they are committed
    // (read beside the live sidecar, as `outrigger inspect` does).
    let stored = || -> usize {
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
        let Ok(c) = rusqlite::Connection::open_with_flags(&db, flags) else {
            return 0;
        };
        c.query_row(
            "SELECT count(*) FROM trace_spans WHERE trace_id = ?1",
            [trace_id.as_str().unwrap()],
            |r| r.get::<_, i64>(0),
        )
        .map_or(0, |n| n as usize)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while stored() < done_before.len() {
        assert!(std::time::Instant::now() < deadline, "spans never stored");
        std::thread::sleep(Duration::from_millis(10));
    }
    crate::common::sigkill(&mut s);
    drop(s);

    let mut s = on_db(&db);
    let t = s.ok("trace.fetch", json!({"traceId": trace_id}));
    assert_eq!(t["trace"]["status"], "interrupted", "{t}");
    assert_eq!(t["trace"]["hadError"], true);
    let spans = t["spans"].as_array().unwrap();
    let names: Vec<&str> = spans.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert!(
        names.len() >= done_before.len(),
        "{names:?} vs {done_before:?}"
    );
    assert_eq!(names[..2], ["llm.request", "read_file"], "{t}");
    assert!(
        spans
            .iter()
            .all(|x| x["status"] == "ok" && x["endMs"].as_u64().is_some()),
        "only finished spans are kept: {t}"
    );
    // The bash span never finished: it is not there.
    assert!(!names.contains(&"bash"), "{names:?}");
    // A later turn on the same database stores its own trace whole, untouched by the old one.
    let r = run(
        &mut s,
        merge(
            scripted(json!([{"text": "ok"}]), "x"),
            json!({"chatId": "chat_after"}),
        ),
    );
    assert_eq!(r.done["status"], "completed");
    let t2 = s.ok("trace.fetch", json!({"traceId": r.done["traceId"]}));
    assert_eq!(t2["trace"]["status"], "completed");
}
