//! Store unit tests on a temp database.

use super::*;
use serde_json::json;

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("sub/x.db"), SyncMode::Normal).unwrap();
    (dir, store)
}

fn msg(role: &str, text: &str) -> Value {
    json!({"role": role, "content": text})
}

fn roles(p: &[Projected]) -> Vec<(i64, String)> {
    p.iter().map(|m| (m.seq, m.role().to_string())).collect()
}

#[test]
fn lease_refuses_a_second_open_and_names_the_owner() {
    let (dir, _store) = open();
    let e = Store::open(&dir.path().join("sub/x.db"), SyncMode::Normal)
        .err()
        .unwrap();
    let text = e.to_string();
    assert!(text.starts_with("store already owned: "), "{text}");
    assert!(text.contains("x.db"), "{text}");
    assert!(
        text.contains(&format!("pid {}", std::process::id())),
        "{text}"
    );
    assert_eq!(e.class(), ErrorClass::Storage);
}

#[test]
fn lease_is_released_on_drop() {
    let (dir, store) = open();
    drop(store);
    Store::open(&dir.path().join("sub/x.db"), SyncMode::Full).unwrap();
}

#[test]
fn appends_get_increasing_seqs_and_project() {
    let (_d, s) = open();
    assert_eq!(
        s.append("r", ItemKind::System, &msg("system", "sys"), 1)
            .unwrap(),
        0
    );
    assert_eq!(
        s.append("r", ItemKind::User, &msg("user", "q"), 2).unwrap(),
        1
    );
    let call = json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "add", "arguments": {}}]});
    assert_eq!(
        s.append_item("r", ItemKind::Assistant, &call, 3, Some("t1"))
            .unwrap(),
        2
    );
    let p = s.projection("r").unwrap();
    assert_eq!(
        roles(&p),
        vec![
            (0, "system".into()),
            (1, "user".into()),
            (2, "assistant".into())
        ]
    );
    assert_eq!(p[2].message, call);
    let e = s.entries("r").unwrap();
    assert_eq!(e[2].body["turn_id"], "t1");
    assert_eq!(e[2].body["v"], 3);
    assert_eq!(e[2].token_estimate, 3);
    assert!(matches!(
        s.projection("nope"),
        Err(StoreError::RecordNotFound(_))
    ));
    assert!(matches!(
        s.append("r", ItemKind::User, &json!({"content": "x"}), 0),
        Err(StoreError::Invalid { .. })
    ));
}

#[test]
fn seeds_reserve_seqs_and_boundaries_cut_the_projection() {
    let (_d, s) = open();
    let seed = Seed {
        source: Some(("src".into(), 7)),
        messages: vec![msg("user", "a"), msg("assistant", "b"), msg("user", "c")],
        label: None,
        token_estimate: 9,
    };
    assert_eq!(s.append_seed("f", &seed).unwrap(), 0);
    assert_eq!(
        s.append("f", ItemKind::Assistant, &msg("assistant", "d"), 1)
            .unwrap(),
        4
    );
    assert_eq!(
        roles(&s.projection("f").unwrap()),
        vec![
            (0, "user".into()),
            (0, "assistant".into()),
            (0, "user".into()),
            (4, "assistant".into())
        ]
    );
    let l = s.lineage("f").unwrap();
    assert_eq!(l.nodes.last().unwrap().label, "c");
    assert_eq!(l.nodes.last().unwrap().source_until_seq, Some(7));

    let b = Boundary {
        reason: "pressure".into(),
        action: BoundaryAction::Compact,
        turn_id: None,
        replacement_count: Some(3),
        pre_tokens: Some(100),
        post_tokens: None,
        compaction_id: Some("k1".into()),
    };
    s.append_compaction(
        "f",
        &CompactionMarker::Start {
            compaction_id: "k1".into(),
            reason: "pressure".into(),
            action: BoundaryAction::Compact,
            extra: Map::new(),
        },
    )
    .unwrap();
    assert_eq!(s.append_boundary("f", &b).unwrap(), 6);
    let reseed = Seed {
        source: None,
        messages: vec![msg("user", "summary")],
        label: None,
        token_estimate: 1,
    };
    assert_eq!(s.append_seed("f", &reseed).unwrap(), 7);
    assert_eq!(
        s.append("f", ItemKind::User, &msg("user", "next"), 1)
            .unwrap(),
        9
    );
    assert_eq!(
        roles(&s.projection("f").unwrap()),
        vec![(7, "user".into()), (9, "user".into())]
    );
    // What the host saw: the fork's seed and items, not the summary, then the new item.
    assert_eq!(
        roles(&s.host_history("f").unwrap()),
        vec![
            (0, "user".into()),
            (0, "assistant".into()),
            (0, "user".into()),
            (4, "assistant".into()),
            (9, "user".into())
        ]
    );
    // A host revision restarts it with the host's messages.
    let revision = Boundary {
        action: BoundaryAction::HostRevision,
        compaction_id: None,
        ..b.clone()
    };
    s.append_boundary("f", &revision).unwrap();
    let host_seed = Seed {
        messages: vec![msg("user", "edited")],
        ..reseed.clone()
    };
    let at = s.append_seed("f", &host_seed).unwrap();
    assert_eq!(
        roles(&s.host_history("f").unwrap()),
        vec![(at, "user".into())]
    );
    // The re-seed did not change provenance.
    assert_eq!(
        s.lineage("f")
            .unwrap()
            .nodes
            .last()
            .unwrap()
            .source_record_id
            .as_deref(),
        Some("src")
    );
    assert!(matches!(
        s.append_boundary("ghost", &b),
        Err(StoreError::RecordNotFound(_))
    ));
}

#[test]
fn a_corrupt_row_is_skipped_not_fatal() {
    let (_d, s) = open();
    for (i, t) in ["one", "two", "three"].iter().enumerate() {
        s.append("r", ItemKind::User, &msg("user", t), i as u64)
            .unwrap();
    }
    s.conn()
        .execute(
            "UPDATE entries SET body = '{\"entry\":\"item\",\"v' WHERE seq = 1",
            [],
        )
        .unwrap();
    s.conn()
        .execute(
            "UPDATE entries SET body = replace(body, '\"v\":3', '\"v\":9') WHERE seq = 2",
            [],
        )
        .unwrap();
    let p = s.projection("r").unwrap();
    assert_eq!(roles(&p), vec![(0, "user".into())]);
    // Appends go on after the damage.
    assert_eq!(
        s.append("r", ItemKind::User, &msg("user", "four"), 0)
            .unwrap(),
        3
    );
}

#[test]
fn sessions_upsert_get_list() {
    let (_d, s) = open();
    let mk = |id: &str, user: &str, chat: &str, active: bool| NewSession {
        session_id: id.into(),
        user_id: user.into(),
        project_id: None,
        chat_id: chat.into(),
        current_stage: "plan".into(),
        next_stage: None,
        scenario: Some("agent-entry".into()),
        stage_data: Some(json!({"k": 1})),
        is_active: active,
    };
    let a = s.upsert_session(&mk("s1", "u1", "c1", true)).unwrap();
    s.upsert_session(&mk("s2", "u2", "c1", false)).unwrap();
    let mut changed = mk("s1", "u1", "c9", true);
    changed.current_stage = "build".into();
    let a2 = s.upsert_session(&changed).unwrap();
    assert_eq!(a2.created_at, a.created_at);
    assert_eq!(a2.chat_id, "c9");
    assert_eq!(s.get_session("s1").unwrap().current_stage, "build");
    assert!(matches!(
        s.get_session("zz"),
        Err(StoreError::SessionNotFound(_))
    ));
    let all = s.list_sessions(&SessionFilter::default()).unwrap();
    assert_eq!(all.len(), 2);
    let f = SessionFilter {
        active_only: true,
        ..Default::default()
    };
    assert_eq!(s.list_sessions(&f).unwrap().len(), 1);
    let f = SessionFilter {
        chat_id: Some("c1".into()),
        ..Default::default()
    };
    assert_eq!(s.list_sessions(&f).unwrap()[0].session_id, "s2");
}

#[test]
fn fork_copies_a_cut_and_never_touches_the_source() {
    let (_d, s) = open();
    for m in [
        msg("system", "s"),
        msg("user", "q1"),
        msg("assistant", "a1"),
        msg("user", "q2"),
        msg("assistant", "a2"),
    ] {
        let kind = ItemKind::for_role(m["role"].as_str().unwrap()).unwrap();
        s.append("src", kind, &m, 1).unwrap();
    }
    let before = s.entries("src").unwrap();
    let req = |cut, id: Option<&str>| ForkRequest {
        source: "src".into(),
        cut,
        new_record_id: id.map(String::from),
        label: None,
    };
    let bp = s.fork(&req(CutPoint::BeforeLastUser, None)).unwrap();
    assert!(bp.record_id.starts_with("src:fork:"));
    assert_eq!(
        (bp.seed_messages, bp.source_until_seq, bp.label.as_str()),
        (4, Some(3), "q2")
    );
    let bp = s.fork(&req(CutPoint::Whole, Some("w"))).unwrap();
    assert_eq!((bp.seed_messages, bp.source_until_seq), (5, Some(4)));
    assert!(matches!(
        s.fork(&req(CutPoint::Whole, Some("w"))),
        Err(StoreError::RecordExists(_))
    ));
    assert!(matches!(
        s.fork(&ForkRequest {
            source: "none".into(),
            ..req(CutPoint::Whole, None)
        }),
        Err(StoreError::RecordNotFound(_))
    ));
    // Fork of a fork: the seed's messages carry seq 0.
    let bp = s
        .fork(&ForkRequest {
            source: "w".into(),
            ..req(CutPoint::BeforeUserIndex(0), Some("w2"))
        })
        .unwrap();
    assert_eq!(
        (bp.seed_messages, bp.source_until_seq, bp.label.as_str()),
        (2, Some(0), "q1")
    );
    assert_eq!(s.entries("src").unwrap(), before);
    let kids = s.children("src", 1).unwrap();
    assert_eq!(kids.len(), 2);
    let t = s.tree("w2").unwrap();
    assert_eq!((t.node_count, t.truncated), (4, false));
    assert_eq!(t.tree.node.label, "root");
    assert_eq!(t.tree.children[1].children[0].node.record_id, "w2");
    assert_eq!(t.tree.children[1].children[0].node.depth, 2);
}

#[test]
fn cycles_are_storage_errors() {
    let (_d, s) = open();
    s.append("a", ItemKind::User, &msg("user", "x"), 0).unwrap();
    s.fork(&ForkRequest {
        source: "a".into(),
        cut: CutPoint::Whole,
        new_record_id: Some("b".into()),
        label: None,
    })
    .unwrap();
    s.conn()
        .execute(
            "UPDATE records SET source_record_id = 'b', source_until_seq = 0 WHERE record_id = 'a'",
            [],
        )
        .unwrap();
    let e = s.tree("b").unwrap_err();
    assert!(matches!(e, StoreError::Cycle(_)), "{e}");
    assert_eq!(e.class(), ErrorClass::Storage);
    assert!(matches!(s.lineage("a"), Err(StoreError::Cycle(_))));
}

#[test]
fn tree_bounds() {
    let (_d, s) = open();
    s.append("r", ItemKind::User, &msg("user", "x"), 0).unwrap();
    // A chain 34 deep: depth 33 is cut.
    let mut prev = "r".to_string();
    for i in 0..34 {
        let id = format!("c{i}");
        s.fork(&ForkRequest {
            source: prev.clone(),
            cut: CutPoint::Whole,
            new_record_id: Some(id.clone()),
            label: None,
        })
        .unwrap();
        prev = id;
    }
    let t = s.tree("r").unwrap();
    assert!(t.truncated);
    assert_eq!(t.node_count, 33);
    let from_tip = s.lineage("c33").unwrap();
    assert!(from_tip.truncated);
    assert_eq!(from_tip.nodes.len(), MAX_LINEAGE_DEPTH_NODES);
}

const MAX_LINEAGE_DEPTH_NODES: usize = branches::MAX_LINEAGE_DEPTH + 1;

#[test]
fn tree_node_bound() {
    let (_d, s) = open();
    s.append("r", ItemKind::User, &msg("user", "x"), 0).unwrap();
    for i in 0..500 {
        s.fork(&ForkRequest {
            source: "r".into(),
            cut: CutPoint::Whole,
            new_record_id: Some(format!("k{i}")),
            label: None,
        })
        .unwrap();
    }
    let t = s.tree("k3").unwrap();
    assert_eq!((t.node_count, t.truncated), (500, true));
    assert_eq!(t.tree.children.len(), 499);
}

#[test]
fn wal_and_the_sync_level_are_applied() {
    let dir = tempfile::tempdir().unwrap();
    for (mode, level) in [(SyncMode::Normal, 1), (SyncMode::Full, 2)] {
        let s = Store::open(&dir.path().join("y.db"), mode).unwrap();
        let got: i64 = s
            .conn()
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap();
        assert_eq!(got, level);
        let jm: String = s
            .conn()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(jm, "wal");
        let v: String = s
            .conn()
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(v, schema::SCHEMA_VERSION.to_string());
    }
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.db");
    let s = Store::open(&path, SyncMode::Normal).unwrap();
    s.conn()
        .execute(
            "UPDATE meta SET value = '99' WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    drop(s);
    let e = Store::open(&path, SyncMode::Normal).err().unwrap();
    assert!(
        matches!(e, StoreError::NewerSchema { found: 99, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("z.db"));
}

#[test]
fn not_a_database_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.db");
    std::fs::write(&path, vec![b'x'; 4096]).unwrap();
    let e = Store::open(&path, SyncMode::Normal).err().unwrap();
    assert!(e.to_string().contains("junk.db"), "{e}");
}

/// The version-1 schema verbatim, as a v1 build created it.
const V1_DDL: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, chat_id TEXT NOT NULL,
    project_id TEXT, current_stage TEXT NOT NULL, next_stage TEXT, scenario TEXT,
    stage_data TEXT, is_active INTEGER NOT NULL, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX sessions_user ON sessions(user_id);
CREATE INDEX sessions_chat ON sessions(chat_id);
CREATE TABLE records (
    record_id TEXT PRIMARY KEY, source_record_id TEXT, source_until_seq INTEGER,
    label TEXT, next_seq INTEGER NOT NULL, created_at TEXT NOT NULL
);
CREATE INDEX records_source ON records(source_record_id);
CREATE TABLE entries (
    record_id TEXT NOT NULL, seq INTEGER NOT NULL, entry TEXT NOT NULL, kind TEXT NOT NULL,
    token_estimate INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL, created_at TEXT NOT NULL,
    PRIMARY KEY (record_id, seq)
) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('schema_version', '1');
INSERT INTO records VALUES ('old', NULL, NULL, NULL, 1, '2026-01-01T00:00:00.000Z');
INSERT INTO entries VALUES ('old', 0, 'item', 'user', 1,
    '{\"entry\":\"item\",\"v\":3,\"seq\":0,\"kind\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}',
    '2026-01-01T00:00:00.000Z');
";

#[test]
fn a_v1_database_upgrades_in_place_to_v2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(V1_DDL)
        .unwrap();
    let s = Store::open(&path, SyncMode::Normal).unwrap();
    let version: String = s
        .conn()
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, schema::SCHEMA_VERSION.to_string());
    let tables: i64 = s
        .conn()
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'traces'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 1);
    // Old data still reads, and the new table works.
    assert_eq!(roles(&s.projection("old").unwrap()), [(0, "user".into())]);
    assert_eq!(s.get_trace("trace_x").unwrap(), None);
    drop(s);
    // Reopening a v2 database is a no-op.
    Store::open(&path, SyncMode::Normal).unwrap();
}

#[test]
fn traces_round_trip_and_unknown_is_none() {
    let (_d, s) = open();
    let body = json!({"trace": {"traceId": "trace_a", "status": "completed", "spanCount": 2},
                      "spans": [{"spanId": "span_0001"}], "events": []});
    s.put_trace(&TraceRow {
        trace_id: "trace_a".into(),
        record_id: "r".into(),
        status: "completed".into(),
        created_at: "2026-01-01T00:00:00.000Z".into(),
        body: body.to_string(),
    })
    .unwrap();
    assert_eq!(s.get_trace("trace_a").unwrap(), Some(body));
    assert_eq!(s.get_trace("trace_b").unwrap(), None);
}

#[test]
fn a_failed_or_panicking_write_leaves_nothing_and_the_next_one_commits() {
    let (_d, s) = open();
    s.append("r", ItemKind::User, &msg("user", "kept"), 1)
        .unwrap();
    // Writes one entry inside the transaction, then fails.
    let insert = |c: &Connection, text: &str| {
        let m = msg("user", text);
        records::insert_items(
            c,
            "r",
            [(&ItemKind::User, &m, 1)],
            None,
            "2026-01-01T00:00:00Z",
        )
    };
    let failed: Result<(), StoreError> = s.write(|c| {
        insert(c, "lost")?;
        Err(StoreError::Invalid {
            what: "test",
            why: "boom".into(),
        })
    });
    assert!(failed.is_err());
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _: Result<(), StoreError> = s.write(|c| {
            insert(c, "lost too")?;
            panic!("in the middle of a write");
        });
    }));
    assert!(panicked.is_err());
    // No transaction was left open: this one begins, commits and follows the kept entry.
    assert_eq!(
        s.append("r", ItemKind::User, &msg("user", "next"), 1)
            .unwrap(),
        1
    );
    let texts: Vec<String> = s
        .projection("r")
        .unwrap()
        .iter()
        .map(|m| m.message["content"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(texts, ["kept", "next"]);
}

#[test]
fn a_batch_append_stores_the_same_bodies_as_single_appends_and_numbers_on() {
    let (_d, store) = open();
    let call = json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c1",
        "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]});
    let result = json!({"role": "tool", "tool_call_id": "c1", "content": "alpha\n\"q\" é"});
    store
        .append("one", ItemKind::User, &msg("user", "hi"), 2)
        .unwrap();
    store.append("one", ItemKind::Assistant, &call, 7).unwrap();
    store.append("one", ItemKind::Tool, &result, 5).unwrap();
    let items = vec![
        (ItemKind::User, msg("user", "hi"), 2),
        (ItemKind::Assistant, call, 7),
    ];
    // A new record is created by the batch; the next batch goes on from its end.
    assert_eq!(store.append_items("two", &items).unwrap(), Some(2));
    assert_eq!(
        store
            .append_items("two", &[(ItemKind::Tool, result, 5)])
            .unwrap(),
        Some(3)
    );
    assert_eq!(store.append_items("none", &[]).unwrap(), None);
    assert_eq!(store.record_version("none").unwrap(), None);
    assert_eq!(store.append_items("two", &[]).unwrap(), Some(3));
    let rows = |id: &str| -> Vec<(i64, String, String, i64, String)> {
        let c = store.conn();
        let mut q = c
            .prepare(
                "SELECT seq, entry, kind, token_estimate, body FROM entries \
                 WHERE record_id = ?1 ORDER BY seq",
            )
            .unwrap();
        q.query_map([id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    };
    let (one, two) = (rows("one"), rows("two"));
    assert_eq!(one.len(), 3);
    assert_eq!(one, two);
    // The bytes a `Map` of the same fields writes (sorted keys), as entries always were.
    let expected = json!({"entry": "item", "v": records::ENTRY_FORMAT, "seq": 2, "kind": "tool",
        "turn_id": null, "token_estimate": 5, "message": one[2].4.parse::<Value>().unwrap()["message"]});
    assert_eq!(one[2].4, expected.to_string());
    store
        .append_item(
            "one",
            ItemKind::User,
            &msg("user", "again"),
            1,
            Some("turn_9"),
        )
        .unwrap();
    let with_turn: Value = rows("one")[3].4.parse().unwrap();
    assert_eq!(
        (&with_turn["turn_id"], &with_turn["seq"]),
        (&json!("turn_9"), &json!(3))
    );
    assert_eq!(store.record_version("two").unwrap(), Some(3));
    let read: Vec<(i64, String)> = roles(&store.projection("two").unwrap());
    assert_eq!(
        read,
        vec![
            (0, "user".into()),
            (1, "assistant".into()),
            (2, "tool".into())
        ]
    );
}
