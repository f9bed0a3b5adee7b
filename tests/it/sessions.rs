//! `agent.session.*` and the durable store over pipes: sessions, records, forks, branch
//! views, the single-writer lease, restarts and crashes.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{Opts, Sidecar, WAIT};
use serde_json::{Value, json};

fn db_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("store/x.db")
}

fn start_on(db: &Path) -> Sidecar {
    Sidecar::start_with(Opts {
        args: vec!["--storage-path".into(), db.display().to_string()],
        ..Default::default()
    })
}

/// `(code, data.kind, message)` of an error response.
fn error_of(r: &Value) -> (i64, String, String) {
    let e = &r["error"];
    assert!(e.is_object(), "expected an error: {r}");
    (
        e["code"].as_i64().unwrap(),
        e["data"]["kind"].as_str().unwrap().to_string(),
        e["message"].as_str().unwrap().to_string(),
    )
}

fn append(s: &mut Sidecar, record: &str, role: &str, content: &str) -> i64 {
    let r = s.ok(
        "debug.record.append",
        json!({"recordId": record, "role": role, "content": content}),
    );
    r["seq"].as_i64().unwrap()
}

/// A record `chat` of system, user q1, assistant a1, user q2, assistant a2 (seqs 0..4).
fn conversation(s: &mut Sidecar, record: &str) {
    for (role, text) in [
        ("system", "be brief"),
        ("user", "question 1"),
        ("assistant", "answer 1"),
        ("user", "question 2"),
        ("assistant", "answer 2"),
    ] {
        append(s, record, role, text);
    }
}

fn seqs_and_texts(messages: &Value) -> Vec<(i64, String)> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["seq"].as_i64().unwrap(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn stop(mut s: Sidecar) {
    s.ok("system.shutdown", Value::Null);
    assert!(s.wait_exit(WAIT).success());
}

fn is_iso8601(s: &str) -> bool {
    let b = s.as_bytes();
    s.len() == 24 && b[4] == b'-' && b[10] == b'T' && s.ends_with('Z')
}

#[test]
fn create_resume_list_and_upsert() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = start_on(&db_in(&dir));

    let a = s.ok("agent.session.create", json!({"chatId": "chat_1"}));
    let id = a["sessionId"].as_str().unwrap();
    assert!(id.starts_with("sess_") && id.len() == 37, "{id}");
    assert!(
        id[5..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(a["userId"], "local");
    assert_eq!(a["chatId"], "chat_1");
    assert_eq!(a["currentStage"], "plan");
    assert_eq!(a["scenario"], "agent-entry");
    assert_eq!(a["isActive"], true);
    assert!(is_iso8601(a["createdAt"].as_str().unwrap()), "{a}");
    assert_eq!(a["createdAt"], a["updatedAt"]);

    let b = s.ok(
        "agent.session.create",
        json!({"chatId": "chat_2", "sessionId": "s-b", "userId": "ann", "projectId": "p1",
               "currentStage": "build", "stageData": {"step": 2}, "isActive": false}),
    );
    assert_eq!(b["sessionId"], "s-b");
    assert_eq!(b["stageData"], json!({"step": 2}));
    assert_eq!(b["projectId"], "p1");
    assert_eq!(b["isActive"], false);

    // Upsert: same sessionId overwrites, createdAt survives.
    std::thread::sleep(Duration::from_millis(5));
    let b2 = s.ok(
        "agent.session.create",
        json!({"chatId": "chat_3", "sessionId": "s-b", "userId": "ann", "isActive": true}),
    );
    assert_eq!(b2["chatId"], "chat_3");
    assert_eq!(b2["currentStage"], "plan");
    assert!(b2.get("stageData").is_none(), "{b2}");
    assert_eq!(b2["createdAt"], b["createdAt"]);
    assert_ne!(b2["updatedAt"], b["updatedAt"]);
    assert_eq!(
        s.ok("agent.session.resume", json!({"sessionId": "s-b"})),
        b2
    );

    s.ok(
        "agent.session.create",
        json!({"chatId": "chat_1", "sessionId": "s-c", "userId": "ann", "isActive": false}),
    );
    let ids = |v: Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x["sessionId"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        ids(s.ok("agent.session.list", Value::Null)),
        [id, "s-b", "s-c"]
    );
    assert_eq!(
        ids(s.ok("agent.session.list", json!({"userId": "ann"}))),
        ["s-b", "s-c"]
    );
    assert_eq!(
        ids(s.ok("agent.session.list", json!({"chatId": "chat_1"}))),
        [id, "s-c"]
    );
    assert_eq!(
        ids(s.ok("agent.session.list", json!({"activeOnly": true}))),
        [id, "s-b"]
    );
    assert_eq!(
        ids(s.ok(
            "agent.session.list",
            json!({"userId": "ann", "activeOnly": true})
        )),
        ["s-b"]
    );

    let r = s.call("agent.session.resume", json!({"sessionId": "nope"}));
    assert_eq!(
        error_of(&r),
        (-32004, "not_found".into(), "session not found: nope".into())
    );
    let r = s.call("agent.session.create", json!({"userId": "x"}));
    assert_eq!(error_of(&r).0, -32602);
    assert!(error_of(&r).2.contains("chatId"), "{r}");
    let r = s.call("agent.session.resume", json!({}));
    assert_eq!(error_of(&r).0, -32602);
    let r = s.call("agent.session.list", json!({"activeOnly": "yes"}));
    assert_eq!(error_of(&r).0, -32602);
}

#[test]
fn default_store_lives_in_outrigger_home() {
    let mut s = Sidecar::start();
    s.ok("agent.session.create", json!({"chatId": "c"}));
    assert!(s.home.path().join("outrigger.db").is_file());
    assert!(s.home.path().join("outrigger.db.lock").is_file());
}

#[test]
fn sessions_and_records_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(&dir);
    let mut s = start_on(&db);
    let a = s.ok(
        "agent.session.create",
        json!({"chatId": "chat_1", "sessionId": "s1"}),
    );
    conversation(&mut s, "chat_1");
    let before = s.ok("agent.session.messages", json!({"recordId": "chat_1"}));
    stop(s);

    let mut s = start_on(&db);
    assert_eq!(s.ok("agent.session.resume", json!({"sessionId": "s1"})), a);
    assert_eq!(
        s.ok("agent.session.messages", json!({"recordId": "chat_1"})),
        before
    );
    // Seqs go on where they stopped.
    assert_eq!(append(&mut s, "chat_1", "user", "question 3"), 5);
}

#[test]
fn a_second_process_on_the_same_store_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(&dir);
    let first = start_on(&db);

    let mut second = Sidecar::start_with(Opts {
        args: vec!["--storage-path".into(), db.display().to_string()],
        wait_ready: false,
        ..Default::default()
    });
    let status = second.wait_exit(WAIT);
    assert_eq!(status.code(), Some(2));
    let err = second.stderr_rest();
    assert!(err.contains("store already owned"), "{err}");
    assert!(err.contains(&db.display().to_string()), "{err}");
    assert!(err.contains(&format!("pid {}", first.pid())), "{err}");
    assert!(!err.contains("__SIDECAR_READY__"), "{err}");
    assert!(second.next_line(Duration::from_millis(100)).is_none());

    stop(first);
    let mut third = start_on(&db);
    third.ok("system.ping", Value::Null);
}

#[test]
fn messages_project_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = start_on(&db_in(&dir));
    conversation(&mut s, "chat_1");
    let r = s.ok("agent.session.messages", json!({"recordId": "chat_1"}));
    assert_eq!(r["recordId"], "chat_1");
    assert_eq!(
        seqs_and_texts(&r["messages"]),
        vec![
            (0, "be brief".into()),
            (1, "question 1".into()),
            (2, "answer 1".into()),
            (3, "question 2".into()),
            (4, "answer 2".into())
        ]
    );
    assert_eq!(
        r["messages"][1],
        json!({"seq": 1, "role": "user", "content": "question 1"})
    );

    // A fork's seeded messages carry the seed's seq; new entries follow the reserved seqs.
    let bp = s.ok(
        "agent.session.fork",
        json!({"recordId": "chat_1", "beforeLastUser": true, "newRecordId": "f"}),
    );
    assert_eq!(bp["seedMessages"], 4);
    assert_eq!(append(&mut s, "f", "assistant", "answer 2b"), 5);
    let r = s.ok("agent.session.messages", json!({"recordId": "f"}));
    assert_eq!(
        seqs_and_texts(&r["messages"]),
        vec![
            (0, "be brief".into()),
            (0, "question 1".into()),
            (0, "answer 1".into()),
            (0, "question 2".into()),
            (5, "answer 2b".into())
        ]
    );
    // The source is untouched.
    let src = s.ok("agent.session.messages", json!({"recordId": "chat_1"}));
    assert_eq!(src["messages"].as_array().unwrap().len(), 5);

    let r = s.call("agent.session.messages", json!({"recordId": "ghost"}));
    assert_eq!(
        error_of(&r),
        (-32004, "not_found".into(), "record not found: ghost".into())
    );
    let r = s.call("agent.session.messages", json!({}));
    assert_eq!(error_of(&r).0, -32602);
    let r = s.call(
        "debug.record.append",
        json!({"recordId": "x", "role": "wizard", "content": "hi"}),
    );
    assert_eq!(error_of(&r).0, -32602);
}

#[test]
fn fork_cut_points_ids_and_labels() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = start_on(&db_in(&dir));
    conversation(&mut s, "chat_1");
    let fork = |s: &mut Sidecar, params: Value| {
        let mut p = json!({"recordId": "chat_1"});
        p.as_object_mut()
            .unwrap()
            .extend(params.as_object().unwrap().clone());
        s.ok("agent.session.fork", p)
    };
    let shape = |bp: &Value| {
        (
            bp["seedMessages"].as_i64().unwrap(),
            bp["sourceUntilSeq"].as_i64().unwrap(),
            bp["label"].as_str().unwrap().to_string(),
        )
    };

    // No cut point: the whole record.
    let bp = fork(&mut s, json!({}));
    let id = bp["recordId"].as_str().unwrap();
    let suffix = id.strip_prefix("chat_1:fork:").unwrap();
    assert_eq!(suffix.len(), 12);
    assert!(suffix.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(bp["sourceRecordId"], "chat_1");
    assert_eq!(shape(&bp), (5, 4, "question 2".into()));

    assert_eq!(
        shape(&fork(&mut s, json!({"untilSeq": 2}))),
        (3, 2, "question 1".into())
    );
    assert_eq!(
        shape(&fork(&mut s, json!({"beforeUserIndex": 0}))),
        (2, 1, "question 1".into())
    );
    assert_eq!(
        shape(&fork(&mut s, json!({"beforeUserIndex": 1}))),
        (4, 3, "question 2".into())
    );
    assert_eq!(
        shape(&fork(&mut s, json!({"beforeLastUser": true}))),
        (4, 3, "question 2".into())
    );
    // Precedence: untilSeq > beforeUserIndex > beforeLastUser.
    assert_eq!(
        shape(&fork(
            &mut s,
            json!({"untilSeq": 1, "beforeUserIndex": 1, "beforeLastUser": true})
        )),
        (2, 1, "question 1".into())
    );
    assert_eq!(
        shape(&fork(
            &mut s,
            json!({"beforeUserIndex": 0, "beforeLastUser": true})
        )),
        (2, 1, "question 1".into())
    );
    // A prefix without a user message, and an explicit label.
    assert_eq!(
        shape(&fork(&mut s, json!({"untilSeq": 0}))),
        (1, 0, "(empty prefix)".into())
    );
    let bp = fork(&mut s, json!({"newRecordId": "mine", "label": "my branch"}));
    assert_eq!(
        (bp["recordId"].clone(), bp["label"].clone()),
        (json!("mine"), json!("my branch"))
    );

    // Long user text: whitespace collapsed, 60 characters with an ellipsis.
    let long = format!("  why   is\n\nthe {} sky blue", "very ".repeat(20));
    append(&mut s, "chat_1", "user", &long);
    let bp = fork(&mut s, json!({"beforeLastUser": true}));
    let label = bp["label"].as_str().unwrap();
    assert_eq!(label.chars().count(), 60, "{label}");
    assert!(label.starts_with("why is the very very"), "{label}");
    assert!(label.ends_with('…'), "{label}");

    // Errors.
    let r = s.call(
        "agent.session.fork",
        json!({"recordId": "chat_1", "beforeUserIndex": 9}),
    );
    assert_eq!(
        error_of(&r),
        (
            -32004,
            "not_found".into(),
            "user message index 9 not addressable in record: chat_1".into()
        )
    );
    append(&mut s, "sys_only", "system", "s");
    let r = s.call(
        "agent.session.fork",
        json!({"recordId": "sys_only", "beforeLastUser": true}),
    );
    assert_eq!(
        error_of(&r),
        (
            -32004,
            "not_found".into(),
            "no user message to fork before: sys_only".into()
        )
    );
    let r = s.call("agent.session.fork", json!({"recordId": "ghost"}));
    assert_eq!(
        error_of(&r),
        (-32004, "not_found".into(), "record not found: ghost".into())
    );
    let r = s.call(
        "agent.session.fork",
        json!({"recordId": "chat_1", "newRecordId": "mine"}),
    );
    let (code, kind, msg) = error_of(&r);
    assert_eq!((code, kind.as_str()), (-32602, "invalid_params"));
    assert!(msg.contains("mine"), "{msg}");
    let r = s.call(
        "agent.session.fork",
        json!({"recordId": "chat_1", "untilSeq": "2"}),
    );
    assert_eq!(error_of(&r).0, -32602);
}

#[test]
fn branches_show_lineage_and_children() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = start_on(&db_in(&dir));
    conversation(&mut s, "chat_1");
    s.ok(
        "agent.session.fork",
        json!({"recordId": "chat_1", "untilSeq": 1, "newRecordId": "a"}),
    );
    s.ok(
        "agent.session.fork",
        json!({"recordId": "chat_1", "beforeLastUser": true, "newRecordId": "b"}),
    );
    s.ok(
        "agent.session.fork",
        json!({"recordId": "a", "newRecordId": "a1"}),
    );

    let r = s.ok("agent.session.branches", json!({"recordId": "a1"}));
    assert_eq!(
        r["lineage"],
        json!([
            {"recordId": "chat_1", "sourceRecordId": null, "sourceUntilSeq": null, "label": "root", "depth": 0},
            {"recordId": "a", "sourceRecordId": "chat_1", "sourceUntilSeq": 1, "label": "question 1", "depth": 1},
            {"recordId": "a1", "sourceRecordId": "a", "sourceUntilSeq": 0, "label": "question 1", "depth": 2}
        ])
    );
    assert_eq!(r["children"], json!([]));

    let r = s.ok("agent.session.branches", json!({"recordId": "chat_1"}));
    assert_eq!(r["lineage"].as_array().unwrap().len(), 1);
    let kids: Vec<(Value, Value, Value)> = r["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["recordId"].clone(),
                c["label"].clone(),
                c["depth"].clone(),
            )
        })
        .collect();
    assert_eq!(
        kids,
        vec![
            (json!("a"), json!("question 1"), json!(1)),
            (json!("b"), json!("question 2"), json!(1))
        ]
    );

    // Unknown record: a lone root and no children, not an error.
    let r = s.ok("agent.session.branches", json!({"recordId": "ghost"}));
    assert_eq!(
        r["lineage"],
        json!([{"recordId": "ghost", "sourceRecordId": null, "sourceUntilSeq": null, "label": "root", "depth": 0}])
    );
    assert_eq!(r["children"], json!([]));
}

#[test]
fn tree_is_the_whole_family() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = start_on(&db_in(&dir));
    conversation(&mut s, "chat_1");
    s.ok(
        "agent.session.fork",
        json!({"recordId": "chat_1", "untilSeq": 1, "newRecordId": "a"}),
    );
    s.ok(
        "agent.session.fork",
        json!({"recordId": "chat_1", "newRecordId": "b"}),
    );
    s.ok(
        "agent.session.fork",
        json!({"recordId": "b", "newRecordId": "b1"}),
    );

    // From a cousin: the tree is still rooted at chat_1.
    let r = s.ok("agent.session.tree", json!({"recordId": "a"}));
    assert_eq!(r["recordId"], "a");
    assert_eq!(r["nodeCount"], 4);
    assert_eq!(r["truncated"], false);
    let t = &r["tree"];
    assert_eq!(
        (
            &t["recordId"],
            &t["label"],
            &t["depth"],
            &t["sourceRecordId"],
            &t["sourceUntilSeq"]
        ),
        (
            &json!("chat_1"),
            &json!("root"),
            &json!(0),
            &Value::Null,
            &Value::Null
        )
    );
    assert_eq!(t["children"][0]["recordId"], "a");
    assert_eq!(t["children"][0]["sourceUntilSeq"], 1);
    assert_eq!(t["children"][0]["children"], json!([]));
    assert_eq!(t["children"][1]["children"][0]["recordId"], "b1");
    assert_eq!(t["children"][1]["children"][0]["depth"], 2);
    assert_eq!(
        s.ok("agent.session.tree", json!({"recordId": "b1"}))["tree"],
        *t
    );

    let r = s.call("agent.session.tree", json!({"recordId": "ghost"}));
    assert_eq!(
        error_of(&r),
        (-32004, "not_found".into(), "record not found: ghost".into())
    );
}

#[test]
fn tree_bounds_depth_and_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = start_on(&db_in(&dir));
    append(&mut s, "deep", "user", "q");
    let mut prev = "deep".to_string();
    for i in 0..33 {
        let id = format!("d{i}");
        s.ok(
            "agent.session.fork",
            json!({"recordId": prev, "newRecordId": id}),
        );
        prev = id;
    }
    // 34 records in a chain: depth 0..=32 are kept, d32 (depth 33) is cut.
    let r = s.ok("agent.session.tree", json!({"recordId": "deep"}));
    assert_eq!(
        (r["nodeCount"].clone(), r["truncated"].clone()),
        (json!(33), json!(true))
    );
    let r = s.ok("agent.session.tree", json!({"recordId": "d5"}));
    assert_eq!(r["truncated"], true);
    let r = s.ok("agent.session.tree", json!({"recordId": "d30"}));
    assert_eq!(r["tree"]["recordId"], "deep");

    append(&mut s, "wide", "user", "q");
    for i in 0..500 {
        s.ok(
            "agent.session.fork",
            json!({"recordId": "wide", "newRecordId": format!("w{i}")}),
        );
    }
    let r = s.ok("agent.session.tree", json!({"recordId": "w7"}));
    assert_eq!(
        (r["nodeCount"].clone(), r["truncated"].clone()),
        (json!(500), json!(true))
    );
    assert_eq!(r["tree"]["children"].as_array().unwrap().len(), 499);
}

/// Edits the database behind the store's back, with the sidecar stopped.
fn tamper(db: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(sql).unwrap();
}

#[test]
fn corruption_is_reported_not_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(&dir);
    let mut s = start_on(&db);
    conversation(&mut s, "chat_1");
    s.ok(
        "agent.session.fork",
        json!({"recordId": "chat_1", "newRecordId": "a"}),
    );
    stop(s);

    // A torn entry and a provenance loop.
    tamper(
        &db,
        "UPDATE entries SET body = '{\"entry\":\"item\",\"v\":3,\"seq\":2,\"mess' \
         WHERE record_id = 'chat_1' AND seq = 2;
         UPDATE records SET source_record_id = 'a', source_until_seq = 0 WHERE record_id = 'chat_1';",
    );
    let mut s = start_on(&db);
    let r = s.ok("agent.session.messages", json!({"recordId": "chat_1"}));
    assert_eq!(
        seqs_and_texts(&r["messages"]),
        vec![
            (0, "be brief".into()),
            (1, "question 1".into()),
            (3, "question 2".into()),
            (4, "answer 2".into())
        ]
    );
    let line = s.stderr_line_matching("skipping corrupt entry", WAIT);
    assert!(line.contains("chat_1") && line.contains("seq 2"), "{line}");

    let r = s.call("agent.session.tree", json!({"recordId": "a"}));
    let (code, kind, msg) = error_of(&r);
    assert_eq!((code, kind.as_str()), (-32004, "storage"));
    assert!(msg.contains("cycle"), "{msg}");
    let r = s.call("agent.session.branches", json!({"recordId": "a"}));
    assert_eq!(error_of(&r).0, -32004);
}

#[test]
fn an_acknowledged_append_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(&dir);
    let mut s = start_on(&db);
    append(&mut s, "chat_1", "user", "remember me");
    let seq = append(&mut s, "chat_1", "assistant", "the tool call");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(s.pid()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    s.wait_exit(WAIT);

    // The kernel released the lease with the process: a restart gets it.
    let mut s = start_on(&db);
    let r = s.ok("agent.session.messages", json!({"recordId": "chat_1"}));
    assert_eq!(
        seqs_and_texts(&r["messages"]),
        vec![(0, "remember me".into()), (seq, "the tool call".into())]
    );
}

#[test]
fn storage_sync_is_configurable_and_validated() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_STORAGE_SYNC".into(), "full".into())],
        args: vec!["--storage-path".into(), db_in(&dir).display().to_string()],
        ..Default::default()
    });
    let merged = s.ok("config.get", json!({"merged": true}));
    assert_eq!(
        merged["merged"]["storage_sync"],
        json!({"value": "full", "source": "env"})
    );
    append(&mut s, "r", "user", "x");

    let home = tempfile::tempdir().unwrap();
    let (status, _, err) = common::run_once(
        home.path(),
        &[],
        &[("OUTRIGGER_STORAGE_SYNC", "sometimes")],
        b"",
    );
    assert_eq!(status.code(), Some(2));
    assert!(err.contains("storage_sync"), "{err}");
}
