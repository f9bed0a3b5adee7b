//! Host tools (`toolsViaHost`, reverse `tool.invoke`) and approvals (`approval.request`,
//! rules for the session and for always) over the real binary's pipes; the test is the host.

use crate::support::fake_openai;

use std::time::{Duration, Instant};

use crate::common::{Opts, Sidecar};
use crate::support::chat_helpers::*;
use crate::support::host::*;
use serde_json::{Value, json};

fn host_turn(script: Value, tools: Value) -> Value {
    merge(
        scripted(script, "go"),
        json!({"toolsViaHost": true, "tools": tools, "chatId": "chat_h"}),
    )
}

fn bash_call(id: &str, cmd: &str) -> Value {
    json!({"toolCalls": [{"id": id, "name": "bash", "arguments": {"command": cmd}}]})
}

fn ws() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn results(st: &Streamed) -> Vec<Value> {
    st.with("toolResult").into_iter().cloned().collect()
}

#[test]
fn host_tool_round_trip_with_tool_context() {
    let mut s = Sidecar::start();
    let tools = json!([descriptor(
        "get_events",
        json!({"day": {"type": "string"}}),
        &["day"]
    )]);
    let mut p = host_turn(
        json!([
            {"toolCalls": [{"id": "c1", "name": "get_events", "arguments": {"day": "mon"}}]},
            {"text": "You have one event."}
        ]),
        tools,
    );
    p["toolContext"] = json!({"userId": "u1", "workspace": "w"});
    p["recordId"] = json!("rec_host_1");
    let id = start(&mut s, p);
    let (st, reqs) = drive(&mut s, &id, |_| {
        Reply::Result(json!({"success": true, "data": {"events": ["standup"]}, "calendar": "work"}))
    });
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    let r = &reqs[0];
    assert_eq!(r["method"], "tool.invoke");
    assert_eq!(r["id"], "srv_1");
    let p = &r["params"];
    assert_eq!(p["id"], "c1");
    assert_eq!(p["name"], "get_events");
    assert_eq!(p["arguments"], json!({"day": "mon"}));
    let ctx = &p["context"];
    assert_eq!(ctx["chatId"], "chat_h");
    assert_eq!(ctx["streamId"], id.as_str());
    assert_eq!(ctx["recordId"], "rec_host_1");
    assert_eq!(ctx["round"], 0);
    assert_eq!(ctx["userId"], "u1");
    assert_eq!(ctx["workspace"], "w");
    assert_eq!(st.done["status"], "completed", "{:?}", st.done);
    assert_eq!(results(&st)[0]["success"], true);
    let body = tool_body(&messages(&mut s, "rec_host_1"), "c1");
    assert_eq!(body["data"]["events"], json!(["standup"]));
    // An extra flat key of the host's ToolResult is folded into data.
    assert_eq!(body["data"]["calendar"], "work");
}

#[test]
fn offered_tools_are_the_hosts_plus_local_interaction_tools() {
    use fake_openai::{FakeServer, Reply as Http};
    let server = FakeServer::start(vec![Http::fixture("openai_reference")]);
    let mut s = Sidecar::start();
    let p = json!({"provider": "openai_compat", "model": "gpt-4o-mini", "baseUrl": server.base_url(),
        "apiKey": "k", "messages": [{"role": "user", "content": "hi"}],
        "toolsViaHost": true, "askUser": true,
        "tools": [descriptor("get_events", json!({}), &[]), descriptor("open_editor", json!({}), &[])]});
    let st = run(&mut s, p);
    assert_eq!(st.done["status"], "completed", "{:?}", st.done);
    let req = &server.requests()[0];
    let names: Vec<&str> = req.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "get_events",
            "open_editor",
            "todo_write",
            "ask_user",
            "delegate_subagent"
        ]
    );
}

#[test]
fn tools_without_tools_via_host_is_refused() {
    let mut s = Sidecar::start();
    let p = merge(
        scripted(json!([{"text": "x"}]), "hi"),
        json!({"tools": [descriptor("get_x", json!({}), &[])]}),
    );
    let r = s.call("agent.chat.stream", p);
    assert_eq!(code(&r), -32602);
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains("toolsViaHost"), "{msg}");
    // A host tool may not take a name the sidecar runs itself.
    let p = host_turn(
        json!([{"text": "x"}]),
        json!([descriptor("todo_write", json!({}), &[])]),
    );
    let r = s.call("agent.chat.stream", p);
    assert_eq!(code(&r), -32602);
    assert!(
        r["error"]["message"].as_str().unwrap().contains("reserved"),
        "{r}"
    );
}

#[test]
fn host_answers_out_of_order() {
    let mut s = Sidecar::start();
    let tools = json!([
        descriptor("get_a", json!({}), &[]),
        descriptor("get_b", json!({}), &[])
    ]);
    let p = merge(
        host_turn(
            json!([
                {"toolCalls": [{"id": "ca", "name": "get_a", "arguments": {}},
                               {"id": "cb", "name": "get_b", "arguments": {}}]},
                {"text": "both"}
            ]),
            tools,
        ),
        json!({"recordId": "rec_order"}),
    );
    let id = start(&mut s, p);
    // Read-mode host tools run together: both requests are pending at once.
    let first = reverse(&mut s, "tool.invoke");
    let second = reverse(&mut s, "tool.invoke");
    let (a, b) = if first["params"]["name"] == "get_a" {
        (first, second)
    } else {
        (second, first)
    };
    answer(&mut s, &b, json!({"success": true, "data": {"who": "b"}}));
    answer(&mut s, &a, json!({"success": true, "data": {"who": "a"}}));
    let st = finish(&mut s, &id, Vec::new());
    assert_eq!(st.done["status"], "completed");
    let msgs = messages(&mut s, "rec_order");
    assert_eq!(tool_body(&msgs, "ca")["data"]["who"], "a");
    assert_eq!(tool_body(&msgs, "cb")["data"]["who"], "b");
}

#[test]
fn host_errors_unknown_method_and_malformed_results_fail_the_call_only() {
    let mut s = Sidecar::start();
    let tools = json!([
        descriptor("get_err", json!({}), &[]),
        descriptor("get_nomethod", json!({}), &[]),
        descriptor("get_bad", json!({}), &[])
    ]);
    let p = merge(
        host_turn(
            json!([
                {"toolCalls": [{"id": "e1", "name": "get_err", "arguments": {}},
                               {"id": "e2", "name": "get_nomethod", "arguments": {}},
                               {"id": "e3", "name": "get_bad", "arguments": {}}]},
                {"text": "recovered"}
            ]),
            tools,
        ),
        json!({"recordId": "rec_errs"}),
    );
    let id = start(&mut s, p);
    let (st, reqs) = drive(&mut s, &id, |r| match r["params"]["name"].as_str() {
        Some("get_err") => Reply::Error(-32000, "calendar offline".into()),
        Some("get_nomethod") => Reply::Error(-32601, "Method not found".into()),
        _ => Reply::Result(json!({"success": "yes"})),
    });
    assert_eq!(reqs.len(), 3);
    assert_eq!(st.done["status"], "completed", "{:?}", st.done);
    assert_eq!(st.text(), "recovered");
    let msgs = messages(&mut s, "rec_errs");
    let e1 = tool_body(&msgs, "e1");
    assert_eq!(e1["success"], false);
    let err = e1["error"].as_str().unwrap();
    assert!(
        err.contains("-32000") && err.contains("calendar offline"),
        "{err}"
    );
    let err = tool_body(&msgs, "e2")["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        err.contains("-32601") && err.contains("does not implement tool.invoke"),
        "{err}"
    );
    let err = tool_body(&msgs, "e3")["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        err.contains("malformed") && err.contains("success"),
        "{err}"
    );
    // needsFollowup on each, so the model is re-prompted.
    for r in results(&st) {
        assert_eq!(r["success"], false);
    }
}

#[test]
fn a_late_answer_after_the_timeout_is_dropped() {
    let mut s = Sidecar::start();
    let p = merge(
        host_turn(
            json!([
                {"toolCalls": [{"id": "t1", "name": "get_slow", "arguments": {}}]},
                {"text": "moved on"}
            ]),
            json!([descriptor("get_slow", json!({}), &[])]),
        ),
        json!({"toolTimeoutMs": 300, "recordId": "rec_late"}),
    );
    let id = start(&mut s, p);
    let req = reverse(&mut s, "tool.invoke");
    let st = finish(&mut s, &id, Vec::new());
    assert_eq!(st.done["status"], "completed");
    let r = &results(&st)[0];
    assert_eq!(r["success"], false);
    assert!(
        r["error"].as_str().unwrap().contains("toolTimeoutMs=300"),
        "{r}"
    );
    // The answer arrives after the wait ended: logged and dropped, the sidecar serves on.
    answer(&mut s, &req, json!({"success": true}));
    s.ok("system.ping", json!({}));
    let body = tool_body(&messages(&mut s, "rec_late"), "t1");
    assert_eq!(body["success"], false);
}

#[test]
fn cancel_ends_a_wait_the_host_never_answers() {
    let mut s = Sidecar::start();
    let p = host_turn(
        json!([{"toolCalls": [{"id": "n1", "name": "get_never", "arguments": {}}]}, {"text": "x"}]),
        json!([descriptor("get_never", json!({}), &[])]),
    );
    let id = start(&mut s, p);
    reverse(&mut s, "tool.invoke");
    let t = Instant::now();
    s.ok("agent.chat.cancel", json!({"streamId": id}));
    let st = finish(&mut s, &id, Vec::new());
    assert_eq!(st.done["status"], "cancelled");
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
}

// ---- approvals ----

fn approval_turn(script: Value, cwd: &std::path::Path, record: &str) -> Value {
    merge(
        scripted(script, "work"),
        json!({"approval": {"mode": "host"}, "cwd": cwd, "recordId": record}),
    )
}

fn approvals(st: &Streamed) -> Vec<Value> {
    st.notices("approval").into_iter().cloned().collect()
}

#[test]
fn each_decision_kind() {
    let dir = ws();
    let mut s = Sidecar::start();
    let script = json!([
        bash_call("a1", "echo one"),
        bash_call("a2", "echo two"),
        bash_call("a3", "rm -f nothing-here"),
        bash_call("a4", "rm -f still-nothing"),
        bash_call("a5", "cat /dev/null"),
        {"toolCalls": [{"id": "a6", "name": "ls", "arguments": {}}]},
        bash_call("a7", "echo last"),
        {"text": "never reached"}
    ]);
    let id = start(&mut s, approval_turn(script, dir.path(), "rec_dec"));
    let mut n = 0;
    let (st, reqs) = drive(&mut s, &id, |r| {
        n += 1;
        Reply::Result(match r["params"]["arguments"]["command"].as_str() {
            Some("echo one") => json!({"kind": "allow_once"}),
            Some("echo two") => json!({"kind": "deny_once", "reason": "not now"}),
            Some("rm -f nothing-here") => json!({"kind": "deny_for_session"}),
            Some("cat /dev/null") => json!({"kind": "timed_out"}),
            _ => json!({"kind": "abort"}),
        })
    });
    // a4 is covered by the session rule, a6 (`ls`, read mode) needs no approval.
    let asked: Vec<&str> = reqs
        .iter()
        .map(|r| r["params"]["arguments"]["command"].as_str().unwrap())
        .collect();
    assert_eq!(
        asked,
        [
            "echo one",
            "echo two",
            "rm -f nothing-here",
            "cat /dev/null",
            "echo last"
        ]
    );
    let p = &reqs[0]["params"];
    assert_eq!(p["toolName"], "bash");
    assert_eq!(p["mode"], "local");
    assert_eq!(p["category"], "echo");
    assert_eq!(p["round"], 0);
    assert_eq!(p["streamId"], id.as_str());
    assert_eq!(st.done["status"], "cancelled");
    assert_eq!(st.done["reason"], "aborted_by_host");
    let msgs = messages(&mut s, "rec_dec");
    let ok = tool_body(&msgs, "a1");
    assert_eq!(ok["success"], true);
    assert_eq!(ok["data"]["stdout"], "one\n");
    let denied = tool_body(&msgs, "a2");
    assert_eq!(denied["success"], false);
    assert_eq!(denied["error"], "approval_denied");
    assert_eq!(denied["data"]["reason"], "not now");
    assert_eq!(
        tool_body(&msgs, "a3")["data"]["decision"],
        "deny_for_session"
    );
    assert_eq!(
        tool_body(&msgs, "a4")["data"]["decision"],
        "deny_for_session"
    );
    assert_eq!(tool_body(&msgs, "a5")["data"]["decision"], "timed_out");
    assert_eq!(tool_body(&msgs, "a6")["success"], true);
    let aborted = tool_body(&msgs, "a7");
    assert!(
        aborted["error"].as_str().unwrap().contains("aborted"),
        "{aborted}"
    );
    let sources: Vec<String> = approvals(&st)
        .iter()
        .map(|n| n["source"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        sources,
        ["host", "host", "host", "session_rule", "host", "host"]
    );
}

#[test]
fn amendments_are_revalidated() {
    let dir = ws();
    let mut s = Sidecar::start();
    let script = json!([
        bash_call("m1", "echo original"),
        bash_call("m2", "echo again"),
        {"text": "done"}
    ]);
    let id = start(&mut s, approval_turn(script, dir.path(), "rec_amend"));
    let (st, _) = drive(&mut s, &id, |r| {
        Reply::Result(match r["params"]["arguments"]["command"].as_str() {
            Some("echo original") => {
                json!({"kind": "allow_once", "amendment": {"command": "echo amended"}})
            }
            _ => json!({"kind": "allow_once", "amendment": {"command": 42}}),
        })
    });
    assert_eq!(st.done["status"], "completed");
    let msgs = messages(&mut s, "rec_amend");
    assert_eq!(tool_body(&msgs, "m1")["data"]["stdout"], "amended\n");
    let bad = tool_body(&msgs, "m2");
    assert_eq!(bad["success"], false);
    let err = bad["error"].as_str().unwrap();
    assert!(
        err.contains("amended arguments") && err.contains("invalid"),
        "{err}"
    );
    assert!(approvals(&st).iter().all(|n| n["amended"] == true));
}

#[test]
fn approvals_fail_closed_on_error_malformed_and_timeout() {
    let dir = ws();
    let mut s = Sidecar::start();
    let script = json!([
        bash_call("f1", "echo a"),
        bash_call("f2", "echo b"),
        bash_call("f3", "echo c"),
        {"text": "finished"}
    ]);
    let mut p = approval_turn(script, dir.path(), "rec_closed");
    p["approval"]["timeoutMs"] = json!(300);
    let id = start(&mut s, p);
    let mut late = None;
    let (st, _) = drive(&mut s, &id, |r| {
        match r["params"]["arguments"]["command"].as_str() {
            Some("echo a") => Reply::Error(-32000, "dialog crashed".into()),
            Some("echo b") => Reply::Result(json!({"kind": "sure"})),
            _ => {
                late = Some(r.clone());
                Reply::Silent
            }
        }
    });
    assert_eq!(st.done["status"], "completed");
    let msgs = messages(&mut s, "rec_closed");
    for (id, needle) in [
        ("f1", "dialog crashed"),
        ("f2", "malformed"),
        ("f3", "timeoutMs=300"),
    ] {
        let b = tool_body(&msgs, id);
        assert_eq!(b["success"], false, "{b}");
        assert_eq!(b["data"]["decision"], "deny_once", "{b}");
        let reason = b["data"]["reason"].as_str().unwrap();
        assert!(reason.contains(needle), "{id}: {reason}");
    }
    assert!(approvals(&st).iter().all(|n| n["source"] == "fail_closed"));
    // The late answer finds nobody waiting.
    answer(&mut s, &late.unwrap(), json!({"kind": "allow_once"}));
    s.ok("system.ping", json!({}));
}

#[test]
fn bash_categories_are_program_names() {
    let dir = ws();
    let mut s = Sidecar::start();
    let script = json!([
        bash_call("g1", "git --version"),
        bash_call("g2", "git --version > /dev/null && git --help > /dev/null"),
        bash_call("g3", "rm -f nope"),
        bash_call("g4", "git --version; rm -f nope"),
        {"text": "ok"}
    ]);
    let id = start(&mut s, approval_turn(script, dir.path(), "rec_cat"));
    let (st, reqs) = drive(&mut s, &id, |r| {
        Reply::Result(match r["params"]["category"].as_str() {
            Some("git") => json!({"kind": "allow_for_session"}),
            _ => json!({"kind": "deny_once"}),
        })
    });
    assert_eq!(st.done["status"], "completed");
    let cats: Vec<&str> = reqs
        .iter()
        .map(|r| r["params"]["category"].as_str().unwrap())
        .collect();
    // g2 is git only: covered for the session. rm, and a line that also runs rm, ask again.
    assert_eq!(cats, ["git", "rm", "git,rm"]);
    let msgs = messages(&mut s, "rec_cat");
    assert_eq!(tool_body(&msgs, "g2")["success"], true);
    assert_eq!(tool_body(&msgs, "g4")["error"], "approval_denied");
}

#[test]
fn always_rules_survive_a_restart_until_cleared() {
    let dir = ws();
    // One home for both processes (each Sidecar's own temp home goes with it).
    let home = tempfile::tempdir().unwrap();
    let on_home = || Opts {
        env: vec![("OUTRIGGER_HOME".into(), home.path().display().to_string())],
        ..Opts::default()
    };
    let mut s = Sidecar::start_with(on_home());
    let id = start(
        &mut s,
        approval_turn(
            json!([bash_call("p1", "echo kept"), {"text": "ok"}]),
            dir.path(),
            "rec_always_1",
        ),
    );
    let (_, reqs) = drive(&mut s, &id, |_| {
        Reply::Result(json!({"kind": "allow_always"}))
    });
    assert_eq!(reqs.len(), 1);
    let rules = s.ok("approval.list", json!({}))["rules"].clone();
    assert_eq!(rules.as_array().unwrap().len(), 1, "{rules}");
    assert_eq!(rules[0]["toolName"], "bash");
    assert_eq!(rules[0]["category"], "echo");
    assert_eq!(rules[0]["decision"], "allow_always");
    assert!(rules[0]["createdAt"].as_str().is_some());
    s.ok("system.shutdown", json!({}));
    s.wait_exit(Duration::from_secs(10));
    drop(s);

    // A new process on the same home: the rule still answers, no request is sent.
    let mut s = Sidecar::start_with(on_home());
    let id = start(
        &mut s,
        approval_turn(
            json!([bash_call("p2", "echo again"), {"text": "ok"}]),
            dir.path(),
            "rec_always_2",
        ),
    );
    let (st, reqs) = drive(&mut s, &id, |_| Reply::Result(json!({"kind": "deny_once"})));
    assert!(reqs.is_empty(), "{reqs:?}");
    assert_eq!(approvals(&st)[0]["source"], "stored_rule");
    assert_eq!(
        tool_body(&messages(&mut s, "rec_always_2"), "p2")["success"],
        true
    );
    assert_eq!(
        s.ok("approval.clear", json!({"toolName": "bash"}))["cleared"],
        1
    );
    assert_eq!(s.ok("approval.list", json!({}))["rules"], json!([]));
    let r = s.call("approval.clear", json!({"tool": "bash"}));
    assert_eq!(code(&r), -32602);
    let id = start(
        &mut s,
        approval_turn(
            json!([bash_call("p3", "echo third"), {"text": "ok"}]),
            dir.path(),
            "rec_always_3",
        ),
    );
    let (_, reqs) = drive(&mut s, &id, |_| {
        Reply::Result(json!({"kind": "allow_once"}))
    });
    assert_eq!(reqs.len(), 1, "asked again after clear");
}

#[test]
fn managed_config_forces_host_mode() {
    let dir = ws();
    let cfg = tempfile::tempdir().unwrap();
    let managed = cfg.path().join("managed.json");
    std::fs::write(&managed, r#"{"approval_mode": "host"}"#).unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![(
            "OUTRIGGER_MANAGED_CONFIG_PATH".into(),
            managed.display().to_string(),
        )],
        ..Opts::default()
    });
    let mut p = approval_turn(
        json!([bash_call("z1", "echo pinned"), {"text": "ok"}]),
        dir.path(),
        "rec_managed",
    );
    p["approval"] = json!({"mode": "auto"});
    let id = start(&mut s, p);
    let (st, reqs) = drive(&mut s, &id, |_| Reply::Result(json!({"kind": "deny_once"})));
    assert_eq!(reqs.len(), 1, "the managed pin still asks");
    assert_eq!(reqs[0]["method"], "approval.request");
    assert_eq!(results(&st)[0]["success"], false);
}

#[test]
fn host_tools_take_their_mode_from_prefix_or_descriptor() {
    let mut s = Sidecar::start();
    let mut tools = json!([
        descriptor("delete_event", json!({"id": {"type": "string"}}), &["id"]),
        descriptor("open_file", json!({}), &[]),
        descriptor("get_day", json!({}), &[])
    ]);
    tools[1]["mode"] = json!("local");
    let p = merge(
        host_turn(
            json!([
                {"toolCalls": [{"id": "d1", "name": "delete_event", "arguments": {"id": "e9"}}]},
                {"toolCalls": [{"id": "d2", "name": "open_file", "arguments": {}}]},
                {"toolCalls": [{"id": "d3", "name": "get_day", "arguments": {}}]},
                {"text": "ok"}
            ]),
            tools,
        ),
        json!({"approval": {"mode": "host"}}),
    );
    let id = start(&mut s, p);
    let (st, reqs) = drive(&mut s, &id, |r| match r["method"].as_str() {
        Some("approval.request") if r["params"]["toolName"] == "delete_event" => {
            Reply::Result(json!({"kind": "allow_once", "amendment": {"id": "e10"}}))
        }
        Some("approval.request") => Reply::Result(json!({"kind": "deny_once"})),
        _ => Reply::Result(json!({"success": true, "data": {"got": r["params"]["arguments"]}})),
    });
    assert_eq!(st.done["status"], "completed");
    let methods: Vec<(&str, &str)> = reqs
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap(),
                r["params"]["mode"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        methods,
        [
            ("approval.request", "destructive"),
            ("tool.invoke", ""),
            ("approval.request", "local"),
            ("tool.invoke", "")
        ]
    );
    // The amended arguments are what the host ran.
    assert_eq!(reqs[1]["params"]["arguments"], json!({"id": "e10"}));
    assert_eq!(reqs[0]["params"]["category"], "destructive");
}

#[test]
fn stdin_eof_ends_a_pending_host_wait() {
    let mut s = Sidecar::start();
    let p = host_turn(
        json!([{"toolCalls": [{"id": "q1", "name": "get_q", "arguments": {}}]}, {"text": "x"}]),
        json!([descriptor("get_q", json!({}), &[])]),
    );
    let id = start(&mut s, p);
    reverse(&mut s, "tool.invoke");
    let t = Instant::now();
    s.close_stdin();
    let st = finish(&mut s, &id, Vec::new());
    assert_eq!(st.done["status"], "cancelled");
    let bye = s.notification("lifecycle.shutdown");
    assert_eq!(bye["params"]["reason"], "eof");
    assert!(s.wait_exit(Duration::from_secs(10)).success());
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}
