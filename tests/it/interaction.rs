//! Host interaction mid-turn (issue 10) over the real binary's pipes, the test acting as the
//! host: `ask_user` (aliases, invalid questions, host cancel, under `toolsViaHost`),
//! `todo_write` (validation, notices, the completion gate, resume), `read_state.seed` after
//! a crash mid-turn, and `bash` under `execSandbox.hostSpawn`.

use std::path::Path;
use std::time::Duration;

use crate::common::Sidecar;
use crate::common::{on_db, sigkill};
use crate::support::chat_helpers::*;
use crate::support::host::*;
use serde_json::{Value, json};

/// Every frame not yet claimed, until the sidecar stays quiet for `quiet`.
fn drain(s: &mut Sidecar, quiet: Duration) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(f) = s.next_frame(quiet) {
        out.push(f);
    }
    out
}

/// The reverse requests for `method` among `frames`.
fn reverse_in<'a>(frames: &'a [Value], method: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|f| is_reverse(f) && f["method"] == method)
        .collect()
}

/// The `toolResult` chunk of call `id`.
fn tool_result<'a>(r: &'a Streamed, id: &str) -> &'a Value {
    r.with("toolResult")
        .into_iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no toolResult for {id}: {:?}", r.frames))
}

fn todo(id: &str, content: &str, status: &str) -> Value {
    json!({"id": id, "content": content, "status": status})
}

fn todo_call(id: &str, todos: Value) -> Value {
    json!({"toolCalls": [{"id": id, "name": "todo_write", "arguments": {"todos": todos}}]})
}

// ---------------------------------------------------------------------------------------
// ask_user

#[test]
fn ask_user_aliases_are_normalised_before_the_host_sees_them() {
    let mut s = Sidecar::start();
    let script = json!([
        {"toolCalls": [{"id": "q1", "name": "ask_user", "arguments": {
            "intro": "I need to know the paint colour.",
            "questions": [{"name": "color", "message": "Which colour?", "choices": ["red", "blue"]}]}}]},
        {"text": "Painting it blue."}
    ]);
    let p = merge(
        scripted(script, "paint the fence"),
        json!({"askUser": true, "chatId": "chat_ask_alias"}),
    );
    let id = start(&mut s, p);
    let req = reverse(&mut s, "ask_user.request");
    assert_eq!(req["jsonrpc"], "2.0", "{req}");
    let params = &req["params"];
    assert_eq!(params["intro"], "I need to know the paint colour.", "{req}");
    assert_eq!(params["streamId"], id.as_str(), "{req}");
    assert_eq!(params["chatId"], "chat_ask_alias", "{req}");
    assert!(params.get("outro").is_none(), "{req}");
    let qs = params["questions"].as_array().expect("questions list");
    assert_eq!(qs.len(), 1, "{req}");
    let q = &qs[0];
    for alias in ["name", "message", "choices"] {
        assert!(
            q.get(alias).is_none(),
            "alias {alias} leaked to the host: {q}"
        );
    }
    assert_eq!(
        *q,
        json!({"id": "color", "text": "Which colour?", "type": "select",
               "options": ["red", "blue"], "multiSelect": false, "header": "Which colour"}),
        "{req}"
    );
    answer(&mut s, &req, json!({"answers": {"color": "blue"}}));
    let r = finish(&mut s, &id, Vec::new());
    assert_eq!(r.done["ok"], true, "{:?}", r.frames);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.text(), "Painting it blue.");
    assert_eq!(tool_result(&r, "q1")["success"], true);
    let m = messages(&mut s, "chat_ask_alias");
    let body = tool_body(&m, "q1");
    assert_eq!(body["success"], true, "{body}");
    assert_eq!(body["data"]["answers"], json!({"color": "blue"}), "{body}");
    assert_eq!(body["data"]["questions"][0]["id"], "color", "{body}");
}

#[test]
fn ask_user_invalid_questions_are_recovered_in_the_same_turn() {
    let mut s = Sidecar::start();
    let script = json!([
        {"toolCalls": [{"id": "bad", "name": "ask_user", "arguments": {
            "intro": "Quick question.", "questions": [{"type": "text"}]}}]},
        {"toolCalls": [{"id": "good", "name": "ask_user", "arguments": {
            "intro": "Quick question.", "questions": [{"id": "name", "text": "What is your name?"}]}}]},
        {"text": "Hello, Ada."}
    ]);
    let p = merge(
        scripted(script, "greet me"),
        json!({"askUser": true, "chatId": "chat_ask_bad"}),
    );
    let id = start(&mut s, p);
    // The bad call is answered by the sidecar itself, before any question reaches the host.
    let mut frames = until(&mut s, &id, |f| f["params"]["toolResult"]["id"] == "bad");
    let bad = frames.last().unwrap()["params"]["toolResult"].clone();
    assert_eq!(bad["success"], false, "{bad}");
    let err = bad["error"].as_str().expect("error text");
    assert!(err.contains("ask_user"), "{err}");
    assert!(
        err.contains("id"),
        "the error should name the missing id: {err}"
    );
    assert!(err.contains("questions[0]"), "{err}");
    let req = reverse(&mut s, "ask_user.request");
    assert_eq!(
        req["params"]["questions"][0]["id"], "name",
        "the first question the host sees is the corrected call's: {req}"
    );
    assert_eq!(req["params"]["questions"][0]["type"], "text", "{req}");
    answer(&mut s, &req, json!({"answers": {"name": "Ada"}}));
    frames.extend(until(&mut s, &id, |f| f["method"] == "stream.done"));
    let r = finish(&mut s, &id, frames);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.done["ok"], true);
    assert_eq!(r.text(), "Hello, Ada.");
    assert_eq!(tool_result(&r, "good")["success"], true);
    let rest = drain(&mut s, Duration::from_millis(300));
    assert!(
        reverse_in(&rest, "ask_user.request").is_empty(),
        "only one ask_user.request may be sent: {rest:?}"
    );
    let m = messages(&mut s, "chat_ask_bad");
    let b = tool_body(&m, "bad");
    assert_eq!(b["success"], false, "{b}");
    let g = tool_body(&m, "good");
    assert_eq!(g["data"]["answers"], json!({"name": "Ada"}), "{g}");
}

#[test]
fn ask_user_host_cancel_gives_empty_answers_and_is_unknown_without_ask_user() {
    let mut s = Sidecar::start();
    let script = json!([
        {"toolCalls": [{"id": "q1", "name": "ask_user", "arguments": {
            "intro": "Which branch?", "questions": [{"id": "branch", "text": "Branch to use?",
            "type": "select", "options": ["main", "dev"]}]}}]},
        {"text": "No answer; using main."}
    ]);
    let p = merge(
        scripted(script, "deploy"),
        json!({"askUser": true, "chatId": "chat_ask_cancel"}),
    );
    let id = start(&mut s, p);
    let req = reverse(&mut s, "ask_user.request");
    answer_error(&mut s, &req, -32800, "user cancelled");
    let r = finish(&mut s, &id, Vec::new());
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.done["ok"], true);
    assert_eq!(r.text(), "No answer; using main.");
    assert_eq!(tool_result(&r, "q1")["success"], true);
    let m = messages(&mut s, "chat_ask_cancel");
    let body = tool_body(&m, "q1");
    assert_eq!(body["success"], true, "{body}");
    assert_eq!(body["data"]["answers"], json!({}), "{body}");
    let msg = body["message"].as_str().unwrap_or_default();
    assert!(msg.contains("user cancelled"), "{body}");

    // Without askUser the tool does not exist for the model, and the host is never asked.
    let script = json!([
        {"toolCalls": [{"id": "q2", "name": "ask_user", "arguments": {
            "intro": "x", "questions": [{"id": "a", "text": "b?"}]}}]},
        {"text": "fine"}
    ]);
    let p = merge(scripted(script, "again"), json!({"chatId": "chat_ask_off"}));
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let t = tool_result(&r, "q2");
    assert_eq!(t["success"], false, "{t}");
    assert!(
        t["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Unknown tool: ask_user"),
        "{t}"
    );
    let rest = drain(&mut s, Duration::from_millis(300));
    assert!(reverse_in(&rest, "ask_user.request").is_empty(), "{rest:?}");
}

#[test]
fn ask_user_under_tools_via_host_is_answered_locally() {
    let mut s = Sidecar::start();
    let weather = descriptor(
        "get_weather",
        json!({"city": {"type": "string"}}),
        &["city"],
    );
    let script = json!([
        {"toolCalls": [
            {"id": "w1", "name": "get_weather", "arguments": {"city": "Paris"}},
            {"id": "q1", "name": "ask_user", "arguments": {"intro": "Units?",
                "questions": [{"id": "units", "text": "Celsius or Fahrenheit?", "options": ["C", "F"]}]}}
        ]},
        {"text": "21 C in Paris."}
    ]);
    let p = merge(
        scripted(script, "weather?"),
        json!({"toolsViaHost": true, "tools": [weather], "askUser": true,
               "chatId": "chat_ask_host"}),
    );
    let id = start(&mut s, p);
    let inv = reverse(&mut s, "tool.invoke");
    assert_eq!(inv["id"], "srv_1", "{inv}");
    assert_eq!(inv["params"]["id"], "w1", "{inv}");
    assert_eq!(inv["params"]["name"], "get_weather", "{inv}");
    assert_eq!(
        inv["params"]["arguments"],
        json!({"city": "Paris"}),
        "{inv}"
    );
    assert_eq!(inv["params"]["context"]["streamId"], id.as_str(), "{inv}");
    assert_eq!(inv["params"]["context"]["chatId"], "chat_ask_host", "{inv}");
    answer(
        &mut s,
        &inv,
        json!({"success": true, "data": {"tempC": 21}}),
    );
    let req = reverse(&mut s, "ask_user.request");
    assert_eq!(req["id"], "srv_2", "{req}");
    assert_eq!(req["params"]["questions"][0]["id"], "units", "{req}");
    assert_eq!(req["params"]["questions"][0]["type"], "select", "{req}");
    answer(&mut s, &req, json!({"answers": {"units": "C"}}));
    let r = finish(&mut s, &id, Vec::new());
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.text(), "21 C in Paris.");
    let rest = drain(&mut s, Duration::from_millis(300));
    assert!(
        reverse_in(&rest, "tool.invoke").is_empty(),
        "ask_user must never go out as tool.invoke: {rest:?}"
    );
    let m = messages(&mut s, "chat_ask_host");
    assert_eq!(tool_body(&m, "w1")["data"]["tempC"], 21);
    assert_eq!(
        tool_body(&m, "q1")["data"]["answers"],
        json!({"units": "C"})
    );
}

// ---------------------------------------------------------------------------------------
// todo_write

#[test]
fn todo_write_validates_and_emits_todos_notices_with_a_summary() {
    let mut s = Sidecar::start();
    let list = json!([
        todo("1", "Read the code", "completed"),
        todo("2", "Write the fix", "in_progress"),
        todo("3", "Run the tests", "pending"),
    ]);
    let script = json!([
        todo_call("t_bad", json!([todo("1", "A", "in_progress"), todo("2", "B", "in_progress")])),
        todo_call("t_ok", list.clone()),
        todo_call("t_done", json!([
            todo("1", "Read the code", "completed"),
            todo("2", "Write the fix", "completed"),
            todo("3", "Run the tests", "completed"),
        ])),
        {"text": "All three steps are done."}
    ]);
    let p = merge(
        scripted(script, "fix the bug"),
        json!({"chatId": "chat_todo_notice"}),
    );
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.text(), "All three steps are done.");

    let bad = tool_result(&r, "t_bad");
    assert_eq!(bad["success"], false, "{bad}");
    assert!(
        bad["error"]
            .as_str()
            .unwrap_or_default()
            .contains("at most one"),
        "{bad}"
    );
    assert_eq!(tool_result(&r, "t_ok")["success"], true);

    // One notice per successful call, carrying the list; none for the refused call.
    let notices = r.notices("todos");
    assert_eq!(notices.len(), 2, "{:?}", r.frames);
    assert_eq!(notices[0]["todos"], list, "{}", notices[0]);
    assert_eq!(
        notices[1]["todos"][2]["status"], "completed",
        "{}",
        notices[1]
    );
    // The notice comes with its call: after t_ok's toolCall, before t_done's.
    let pos = |pred: &dyn Fn(&Value) -> bool| r.frames.iter().position(pred).unwrap();
    let first_notice = pos(&|f| f["params"]["notice"]["kind"] == "todos");
    assert!(pos(&|f| f["params"]["toolCall"]["id"] == "t_ok") < first_notice);
    assert!(first_notice < pos(&|f| f["params"]["toolCall"]["id"] == "t_done"));
    assert!(r.notices("todo_reminder").is_empty(), "{:?}", r.frames);

    let m = messages(&mut s, "chat_todo_notice");
    let ok = tool_body(&m, "t_ok");
    assert_eq!(ok["success"], true, "{ok}");
    assert_eq!(
        ok["data"]["summary"],
        json!({"total": 3, "pending": 1, "inProgress": 1, "completed": 1}),
        "{ok}"
    );
    assert_eq!(ok["data"]["todos"], list, "{ok}");
    let bad = tool_body(&m, "t_bad");
    assert_eq!(bad["success"], false, "{bad}");
}

#[test]
fn completion_gate_reminds_once_when_the_model_answers_too_early() {
    let mut s = Sidecar::start();
    let script = json!([
        todo_call("t1", json!([todo("a", "Collect the numbers", "completed"),
                               todo("b", "Write the summary table", "pending")])),
        {"text": "Here are the numbers."},
        todo_call("t2", json!([todo("a", "Collect the numbers", "completed"),
                               todo("b", "Write the summary table", "completed")])),
        {"text": "Summary table written."}
    ]);
    let p = merge(scripted(script, "report"), json!({"chatId": "chat_gate"}));
    let r = run(&mut s, p);
    // Four provider rounds exactly: fewer leaves the last answer unsaid, more fails with
    // the scripted provider's "no more turns".
    assert_eq!(r.done["ok"], true, "{:?}", r.frames);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert!(r.errors().is_empty(), "{:?}", r.errors());
    assert_eq!(r.text(), "Here are the numbers.Summary table written.");
    let reminders = r.notices("todo_reminder");
    assert_eq!(reminders.len(), 1, "{:?}", r.frames);
    assert_eq!(reminders[0]["pending"], json!(["b"]), "{}", reminders[0]);
    // The reminder follows the early answer and precedes the model's fix.
    let pos = |pred: &dyn Fn(&Value) -> bool| r.frames.iter().position(pred).unwrap();
    let early = pos(&|f| f["params"]["delta"] == "Here are the numbers.");
    let rem = pos(&|f| f["params"]["notice"]["kind"] == "todo_reminder");
    let fix = pos(&|f| f["params"]["toolCall"]["id"] == "t2");
    assert!(early < rem && rem < fix, "{:?}", r.frames);

    let m = messages(&mut s, "chat_gate");
    let reminder_msg = m
        .iter()
        .find(|x| {
            x["role"] == "user"
                && x["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("Write the summary table"))
        })
        .unwrap_or_else(|| panic!("no reminder naming item b in the record: {m:?}"));
    assert!(
        !reminder_msg["content"]
            .as_str()
            .unwrap()
            .contains("Collect the numbers"),
        "a completed item is not named: {reminder_msg}"
    );
    let last = m.last().unwrap();
    assert_eq!(last["role"], "assistant", "{last}");
    assert_eq!(last["content"], "Summary table written.", "{last}");
}

#[test]
fn completion_gate_lets_the_answer_stand_after_two_reminders() {
    let mut s = Sidecar::start();
    let script = json!([
        todo_call("t1", json!([todo("x", "Ship the release", "pending")])),
        {"text": "early one"},
        {"text": "early two"},
        {"text": "early three"}
    ]);
    let r = run(
        &mut s,
        merge(scripted(script, "ship"), json!({"chatId": "chat_gate2"})),
    );
    assert_eq!(r.done["ok"], true, "{:?}", r.frames);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.text(), "early oneearly twoearly three");
    let reminders = r.notices("todo_reminder");
    assert_eq!(reminders.len(), 2, "{:?}", r.frames);
    for (i, n) in reminders.iter().enumerate() {
        assert_eq!(n["pending"], json!(["x"]), "{n}");
        assert_eq!(n["reminder"], i as u64 + 1, "{n}");
    }
    let m = messages(&mut s, "chat_gate2");
    assert_eq!(m.last().unwrap()["content"], "early three");
}

#[test]
fn todo_list_survives_resume_and_the_gate_still_applies() {
    let mut s = Sidecar::start();
    let script = json!([
        todo_call("t1", json!([todo("d1", "Deploy the staging site", "pending")])),
        {"text": "Planned."},
        {"text": "Planned."},
        {"text": "Planned."}
    ]);
    let a = run(
        &mut s,
        merge(
            scripted(script, "plan"),
            json!({"chatId": "chat_todo_resume"}),
        ),
    );
    assert_eq!(a.done["status"], "completed", "{:?}", a.frames);
    let record = a.done["recordId"].as_str().unwrap().to_string();
    assert_eq!(record, "chat_todo_resume");

    // A new stream on the same record knows the list only from the record.
    let b = run(
        &mut s,
        json!({"provider": "scripted", "model": "scripted-model", "recordId": record,
               "resume": true, "messages": [],
               "script": [{"text": "Resumed."}, {"text": "Resumed."}, {"text": "Resumed."}]}),
    );
    assert_eq!(b.done["status"], "completed", "{:?}", b.frames);
    let reminders = b.notices("todo_reminder");
    assert!(
        !reminders.is_empty(),
        "no reminder after resume: {:?}",
        b.frames
    );
    assert_eq!(reminders[0]["pending"], json!(["d1"]), "{}", reminders[0]);
    assert_eq!(reminders.len(), 2, "{:?}", b.frames);
    let m = messages(&mut s, &record);
    let named = m
        .iter()
        .filter(|x| {
            x["role"] == "user"
                && x["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("Deploy the staging site"))
        })
        .count();
    assert!(
        named >= 2,
        "the resumed turn's reminders name the item: {m:?}"
    );
}

// ---------------------------------------------------------------------------------------
// read_state.seed

#[test]
fn read_state_seed_after_a_crash_mid_turn() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("chat.db");
    let version = "ab".repeat(32);
    let read_file = descriptor("read_file", json!({"path": {"type": "string"}}), &["path"]);

    let mut s = on_db(&db);
    let script = json!([
        {"toolCalls": [{"id": "r1", "name": "read_file", "arguments": {"path": "/abs/a.txt"}}]},
        {"toolCalls": [{"id": "r2", "name": "read_file", "arguments": {"path": "/abs/b.txt"}}]},
        {"text": "unreachable"}
    ]);
    let p = merge(
        scripted(script, "read two files"),
        json!({"toolsViaHost": true, "tools": [read_file.clone()], "chatId": "chat_seed"}),
    );
    let id = start(&mut s, p);
    let first = reverse(&mut s, "tool.invoke");
    assert_eq!(first["params"]["id"], "r1", "{first}");
    answer(
        &mut s,
        &first,
        json!({"success": true, "data": {"path": "/abs/a.txt", "version": version}}),
    );
    let second = reverse(&mut s, "tool.invoke");
    assert_eq!(second["params"]["id"], "r2", "{second}");
    // The host never answers r2: the process dies while it waits.
    let seen = until(&mut s, &id, |f| f["params"]["toolResult"]["id"] == "r1");
    assert_eq!(
        seen.last().unwrap()["params"]["toolResult"]["success"],
        true
    );
    sigkill(&mut s);
    drop(s);

    let mut s = on_db(&db);
    let id = start(
        &mut s,
        json!({"provider": "scripted", "model": "scripted-model", "recordId": "chat_seed",
               "resume": true, "messages": [], "toolsViaHost": true, "tools": [read_file],
               "script": [{"text": "Resumed after the crash."}]}),
    );
    // Everything up to the seed request, in order: no model output comes before it.
    let mut before = Vec::new();
    let seed = loop {
        let f = s
            .next_frame(HOST_WAIT)
            .expect("read_state.seed before the first model request");
        if is_reverse(&f) && f["method"] == "read_state.seed" {
            break f;
        }
        before.push(f);
    };
    assert!(
        !before
            .iter()
            .any(|f| f["method"] == "stream.chunk" || f["method"] == "stream.done"),
        "stream output before read_state.seed: {before:?}"
    );
    assert!(reverse_in(&before, "tool.invoke").is_empty(), "{before:?}");
    assert_eq!(
        seed["params"]["state"],
        json!({"/abs/a.txt": version}),
        "{seed}"
    );
    answer(&mut s, &seed, json!({"ok": true}));
    let frames: Vec<Value> = before
        .into_iter()
        .filter(|f| f.get("id").is_none() && f["params"]["streamId"] == id.as_str())
        .collect();
    let r = finish(&mut s, &id, frames);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.text(), "Resumed after the crash.");
    let m = messages(&mut s, "chat_seed");
    let r2 = tool_body(&m, "r2");
    assert_eq!(r2["success"], false, "{r2}");
    assert!(
        r2["error"]
            .as_str()
            .unwrap_or_default()
            .contains("interrupted"),
        "{r2}"
    );
}

// ---------------------------------------------------------------------------------------
// host.process.spawn

fn spawn_bash(s: &mut Sidecar, id: &str, ws: &Path, command: &str) {
    s.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tool.invoke", "params": {
        "name": "bash", "arguments": {"command": command}, "consentGranted": true,
        "context": {"cwd": ws, "execSandbox": {"hostSpawn": true}}}}),
    );
}

#[test]
fn host_spawn_round_trip_maps_the_hosts_answer() {
    let ws = tempfile::tempdir().unwrap();
    let cwd = ws.path().display().to_string();
    let mut s = Sidecar::start();

    spawn_bash(&mut s, "hs1", ws.path(), "echo hi");
    let req = reverse(&mut s, "host.process.spawn");
    let p = &req["params"];
    assert_eq!(p["command"], "echo hi", "{req}");
    assert_eq!(p["cwd"], cwd.as_str(), "{req}");
    let roots: Vec<&str> = p["policy"]["writableRoots"]
        .as_array()
        .expect("writableRoots list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(roots.contains(&cwd.as_str()), "{req}");
    assert_eq!(p["policy"]["network"], false, "{req}");
    assert!(p["policy"]["allowedHosts"].is_array(), "{req}");
    answer(
        &mut s,
        &req,
        json!({"exitCode": 0, "stdout": "hi\r\n\u{1b}[31mred\u{1b}[0m", "stderr": "",
               "sandbox": {"backend": "seatbelt", "enforcement": "full"}}),
    );
    let resp = s.response(&json!("hs1"));
    let tr = &resp["result"];
    assert_eq!(tr["success"], true, "{resp}");
    let d = &tr["data"];
    assert_eq!(d["stdout"], "hi\nred", "{resp}");
    assert_eq!(d["stderr"], "", "{resp}");
    assert_eq!(d["exitCode"], 0, "{resp}");
    assert_eq!(d["hostSpawn"], true, "{resp}");
    assert_eq!(
        d["_sandbox"],
        json!({"backend": "seatbelt", "enforcement": "full"}),
        "{resp}"
    );

    // A non-zero exit is a failed result with the host's output kept.
    spawn_bash(&mut s, "hs2", ws.path(), "false");
    let req = reverse(&mut s, "host.process.spawn");
    assert_eq!(req["params"]["command"], "false", "{req}");
    answer(
        &mut s,
        &req,
        json!({"exitCode": 3, "stdout": "", "stderr": "boom\n",
               "sandbox": {"backend": "seatbelt", "enforcement": "full"}}),
    );
    let resp = s.response(&json!("hs2"));
    let tr = &resp["result"];
    assert_eq!(tr["success"], false, "{resp}");
    assert_eq!(tr["error"], "exit 3", "{resp}");
    assert_eq!(tr["data"]["exitCode"], 3, "{resp}");
    assert_eq!(tr["data"]["stderr"], "boom\n", "{resp}");

    // A host error is a failed result naming the host.
    spawn_bash(&mut s, "hs3", ws.path(), "echo x");
    let req = reverse(&mut s, "host.process.spawn");
    answer_error(&mut s, &req, -32000, "spawn refused by policy");
    let resp = s.response(&json!("hs3"));
    let tr = &resp["result"];
    assert_eq!(tr["success"], false, "{resp}");
    let err = tr["error"].as_str().unwrap_or_default();
    assert!(err.contains("host"), "{resp}");
    assert!(err.contains("spawn refused by policy"), "{resp}");
    assert!(!ws.path().join("x").exists());
}
