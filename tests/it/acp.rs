//! `outrigger acp`, the Agent Client Protocol (v1) agent, checked against `docs/acp.md` with a
//! real ACP client: the Python SDK (`agent-client-protocol`) driving the binary over stdio
//! from `tests/fixtures/acp/client.py` (see `support::acp`). The model is the scripted provider
//! (`--script`), or a fake OpenAI-compatible server where the test needs to see what the model
//! was sent. Only what an editor can observe is checked: the ACP frames, the files the tools
//! wrote, the processes left, the exit, and what the model server received.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{on_db, pids_with_arg, wait_until};
use crate::support::acp::{Dir, Observed, chunk_text, drive, fake_mcp_server};
use crate::support::fake_router::{FakeRouter, RouterReply};
use crate::support::headless::{run, script};
use crate::support::mcp_deps::mcp_venv_python;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `acp --script FILE` with `turns` as the script (written into `dir`).
fn scripted(dir: &Dir, turns: &[Value]) -> Vec<String> {
    let path = script(&dir.path, "script.jsonl", turns);
    vec!["acp".into(), "--script".into(), s(&path).to_string()]
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Runs `scenario` against `outrigger acp ARGS` on `home`.
fn go(home: &Dir, agent: &[String], scenario: Value) -> Observed {
    drive(&home.path, &args(agent), &[], &scenario)
}

fn init() -> Value {
    json!({"op": "initialize"})
}

fn new_session(cwd: &Dir) -> Value {
    json!({"op": "new_session", "cwd": cwd.s()})
}

fn prompt(text: &str) -> Value {
    json!({"op": "prompt", "text": text})
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"toolCalls": [{"id": id, "name": name, "arguments": arguments}]})
}

/// The `diff` item of a tool call update's content.
fn diff_of<'a>(o: &Observed, update: &'a Value) -> &'a Value {
    update["content"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "diff"))
        .unwrap_or_else(|| panic!("no diff content in {update}\n{}", o.dump()))
}

/// The position of `update` among the run's updates (arrival order).
fn seq_of(o: &Observed, pred: impl Fn(&Value) -> bool) -> u64 {
    o.entries()
        .into_iter()
        .find(|e| pred(&e["update"]))
        .unwrap_or_else(|| panic!("no such update\n{}", o.dump()))["seq"]
        .as_u64()
        .unwrap()
}

/// A `tool_call`'s status. ACP's schema defaults it to `pending` and the reference
/// implementation omits the default on the wire (`skip_serializing_if = is_default`), so an
/// absent status is `pending` to every ACP client.
fn status(c: &Value) -> &str {
    match c.get("status") {
        None => "pending",
        Some(s) => s.as_str().unwrap_or("<not a string>"),
    }
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

// ---- initialize --------------------------------------------------------------------------

#[test]
fn initialize_answers_version_1_with_load_session_and_outrigger() {
    let (home, d) = (Dir::new(), Dir::new());
    let agent = scripted(&d, &[json!({"text": "unused"})]);
    let o = go(&home, &agent, json!([init()]));
    o.ok(0);
    // The raw answer, not the SDK's parse (which fills in defaults).
    let r = &o.raw_response(0)["result"];
    assert_eq!(r["protocolVersion"], 1, "{}", o.dump());
    let caps = &r["agentCapabilities"];
    assert_eq!(caps["loadSession"], true, "{}", o.dump());
    let prompt_caps = &caps["promptCapabilities"];
    assert_eq!(prompt_caps["image"], false, "{}", o.dump());
    assert_eq!(prompt_caps["audio"], false, "{}", o.dump());
    assert_eq!(prompt_caps["embeddedContext"], true, "{}", o.dump());
    let mcp_caps = &caps["mcpCapabilities"];
    assert_eq!(mcp_caps["http"], false, "{}", o.dump());
    assert_eq!(mcp_caps["sse"], false, "{}", o.dump());
    assert_eq!(r["agentInfo"]["name"], "outrigger", "{}", o.dump());
    assert!(
        r["agentInfo"]["version"]
            .as_str()
            .is_some_and(|v| !v.is_empty()),
        "agentInfo.version\n{}",
        o.dump()
    );
    assert!(
        r.get("authMethods")
            .is_none_or(|m| m.as_array().is_some_and(Vec::is_empty)),
        "no authMethods expected\n{}",
        o.dump()
    );
    o.assert_clean();
}

// ---- a prompt: text and reasoning ---------------------------------------------------------

#[test]
fn prompt_streams_thought_and_message_chunks_and_ends_the_turn() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let agent = scripted(
        &d,
        &[json!({"reasoning": ["Let me ", "think."], "text": ["Hello ", "from ", "Outrigger."]})],
    );
    let o = go(
        &home,
        &agent,
        json!([init(), new_session(&ws), prompt("Say hello")]),
    );
    let sid = o.session_id(1);
    assert!(!sid.is_empty());
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    assert_eq!(
        o.text_in(2, "agent_message_chunk"),
        "Hello from Outrigger.",
        "{}",
        o.dump()
    );
    assert_eq!(
        o.text_in(2, "agent_thought_chunk"),
        "Let me think.",
        "{}",
        o.dump()
    );
    for u in o.kind_in(2, "agent_message_chunk") {
        assert_eq!(u["content"]["type"], "text", "{}", o.dump());
    }
    // Reasoning streamed before the answer, and every update names the session.
    let last_thought = o
        .entries()
        .into_iter()
        .filter(|e| e["update"]["sessionUpdate"] == "agent_thought_chunk")
        .map(|e| e["seq"].as_u64().unwrap())
        .max()
        .unwrap();
    let first_message = seq_of(&o, |u| u["sessionUpdate"] == "agent_message_chunk");
    assert!(last_thought < first_message, "{}", o.dump());
    for e in o.entries() {
        assert_eq!(e["sessionId"], sid.as_str(), "{}", o.dump());
    }
    o.assert_clean();
}

// ---- file tools: edit tool calls with diffs ------------------------------------------------

#[test]
fn write_file_then_edit_file_are_edit_tool_calls_with_diffs() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let w_args = json!({"path": "notes.txt", "content": "alpha\nbeta\n"});
    let e_args = json!({"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]});
    let agent = scripted(
        &d,
        &[
            call("w1", "write_file", w_args.clone()),
            call("e1", "edit_file", e_args.clone()),
            json!({"text": "Done."}),
        ],
    );
    let o = go(
        &home,
        &agent,
        json!({"permissionDefault": "allow_once",
               "steps": [init(), new_session(&ws), prompt("Write and edit notes.txt")]}),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    let abs = ws.join("notes.txt").display().to_string();
    for (id, tool, arguments) in [("w1", "write_file", &w_args), ("e1", "edit_file", &e_args)] {
        let c = o.tool_call(2, id);
        assert_eq!(c["kind"], "edit", "{id}\n{}", o.dump());
        assert_eq!(status(c), "pending", "{id}\n{}", o.dump());
        assert_eq!(
            c["locations"][0]["path"],
            abs.as_str(),
            "{id}\n{}",
            o.dump()
        );
        assert_eq!(&c["rawInput"], arguments, "{id}\n{}", o.dump());
        let title = c["title"].as_str().unwrap_or_default();
        assert!(
            title.contains(tool) && title.contains("notes.txt"),
            "{id}: title {title:?}\n{}",
            o.dump()
        );
        let done = o.final_update(2, id);
        assert_eq!(done["status"], "completed", "{id}\n{}", o.dump());
        assert!(
            done.get("rawOutput").is_some(),
            "{id}: rawOutput\n{}",
            o.dump()
        );
    }
    let w = diff_of(&o, o.final_update(2, "w1"));
    assert_eq!(w["path"], abs.as_str(), "{}", o.dump());
    assert_eq!(w["newText"], "alpha\nbeta\n", "{}", o.dump());
    assert!(
        w.get("oldText").is_none(),
        "oldText must be absent for a new file: {w}\n{}",
        o.dump()
    );
    let e = diff_of(&o, o.final_update(2, "e1"));
    assert_eq!(e["path"], abs.as_str(), "{}", o.dump());
    assert_eq!(e["oldText"], "alpha\nbeta\n", "{}", o.dump());
    assert_eq!(e["newText"], "alpha\ngamma\n", "{}", o.dump());
    assert_eq!(
        read(&ws.join("notes.txt")).as_deref(),
        Some("alpha\ngamma\n")
    );
    assert_eq!(o.text_in(2, "agent_message_chunk"), "Done.", "{}", o.dump());
    o.assert_clean();
}

/// Two edits of one file in one round run side by side: each diff starts from the text the
/// edit itself replaced, so the two chain (the disk holds the last one's `newText`). Reading
/// the file when a call is announced, or after it is reported, would show one edit's text in
/// the other's diff.
#[test]
fn two_edits_of_one_file_in_one_round_show_diffs_that_chain() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let original = "alpha\nbeta\n";
    std::fs::write(ws.join("notes.txt"), original).unwrap();
    let edit = |old: &str, new: &str| json!({"path": "notes.txt", "edits": [{"oldText": old, "newText": new}]});
    let agent = scripted(
        &d,
        &[
            call("r1", "read_file", json!({"path": "notes.txt"})),
            json!({"toolCalls": [
                {"id": "e1", "name": "edit_file", "arguments": edit("beta", "gamma")},
                {"id": "e2", "name": "edit_file", "arguments": edit("alpha", "omega")},
            ]}),
            json!({"text": "Done."}),
        ],
    );
    let o = go(
        &home,
        &agent,
        json!({"steps": [init(), new_session(&ws), prompt("Edit notes.txt twice")]}),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    let abs = ws.join("notes.txt").display().to_string();
    let diffs: Vec<&Value> = ["e1", "e2"]
        .iter()
        .map(|id| {
            let u = o.final_update(2, id);
            assert_eq!(u["status"], "completed", "{id}\n{}", o.dump());
            let d = diff_of(&o, u);
            assert_eq!(d["path"], abs.as_str(), "{}", o.dump());
            d
        })
        .collect();
    // Whichever ran first replaced the original; the other replaced its text.
    let (first, second) = if diffs[0]["oldText"] == original {
        (diffs[0], diffs[1])
    } else {
        (diffs[1], diffs[0])
    };
    assert_eq!(first["oldText"], original, "{}", o.dump());
    assert_eq!(second["oldText"], first["newText"], "{}", o.dump());
    assert_ne!(first["oldText"], first["newText"], "{}", o.dump());
    assert_eq!(second["newText"], "omega\ngamma\n", "{}", o.dump());
    assert_eq!(
        read(&ws.join("notes.txt")).as_deref(),
        Some("omega\ngamma\n")
    );
    o.assert_clean();
}

/// "every `local` or `destructive` tool call (bash, the writing file tools, …) is put to the
/// client first": a rejected `write_file` writes nothing; an allowed `edit_file` was asked.
#[test]
fn writing_file_tools_write_without_asking_and_show_diffs() {
    // docs/acp.md: only `local` and `destructive` calls are put to the client; the file tools
    // write inside the workspace without asking, and each edit shows as a diff.
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    std::fs::write(ws.join("old.txt"), "one\n").unwrap();
    let agent = scripted(
        &d,
        &[
            call("r1", "read_file", json!({"path": "old.txt"})),
            call(
                "w1",
                "write_file",
                json!({"path": "new.txt", "content": "fresh\n"}),
            ),
            call(
                "e1",
                "edit_file",
                json!({"path": "old.txt", "edits": [{"oldText": "one", "newText": "two"}]}),
            ),
            json!({"text": "Done."}),
        ],
    );
    let o = go(
        &home,
        &agent,
        json!({"permissionDefault": "reject_once",
               "steps": [init(), new_session(&ws), prompt("Write and edit")]}),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    assert!(
        o.permission_requests().is_empty(),
        "the file tools must not be put to the client\n{}",
        o.dump()
    );
    for id in ["w1", "e1"] {
        let u = o.final_update(2, id);
        assert_eq!(u["status"], "completed", "{}", o.dump());
        assert!(
            u["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "diff")),
            "{id} has no diff\n{}",
            o.dump()
        );
    }
    assert_eq!(read(&ws.join("new.txt")).as_deref(), Some("fresh\n"));
    assert_eq!(read(&ws.join("old.txt")).as_deref(), Some("two\n"));
    o.assert_clean();
}

// ---- bash and permissions ------------------------------------------------------------------

fn bash_turns(command: &str) -> Vec<Value> {
    vec![
        call("b1", "bash", json!({"command": command})),
        json!({"text": "Turn over."}),
    ]
}

#[test]
fn bash_allowed_once_asks_with_four_options_and_runs() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let command = "echo ran > made.txt";
    let agent = scripted(&d, &bash_turns(command));
    let o = go(
        &home,
        &agent,
        json!({"permissions": ["allow_once"],
               "steps": [init(), new_session(&ws), prompt("Run it")]}),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    let reqs = o.permission_requests();
    assert_eq!(reqs.len(), 1, "{}", o.dump());
    assert_eq!(reqs[0]["step"], 2, "{}", o.dump());
    assert_eq!(
        reqs[0]["sessionId"],
        o.session_id(1).as_str(),
        "{}",
        o.dump()
    );
    assert_eq!(reqs[0]["toolCall"]["toolCallId"], "b1", "{}", o.dump());
    let options = reqs[0]["options"].as_array().unwrap();
    let mut kinds: Vec<&str> = options
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        ["allow_always", "allow_once", "reject_always", "reject_once"],
        "{}",
        o.dump()
    );
    let mut ids: Vec<&str> = options
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4, "option ids must be distinct\n{}", o.dump());
    // The call was announced before the client was asked.
    let asked_at = o.v["agentRequests"][0]["seq"].as_u64().unwrap();
    let announced_at = seq_of(&o, |u| {
        u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "b1"
    });
    assert!(announced_at < asked_at, "{}", o.dump());
    let c = o.tool_call(2, "b1");
    assert_eq!(c["kind"], "execute", "{}", o.dump());
    assert_eq!(status(c), "pending", "{}", o.dump());
    assert_eq!(c["rawInput"]["command"], command, "{}", o.dump());
    let title = c["title"].as_str().unwrap_or_default();
    assert!(
        title.starts_with("bash") && title.contains(command),
        "title {title:?}\n{}",
        o.dump()
    );
    assert_eq!(
        o.final_update(2, "b1")["status"],
        "completed",
        "{}",
        o.dump()
    );
    assert_eq!(read(&ws.join("made.txt")).as_deref(), Some("ran\n"));
    assert_eq!(
        o.text_in(2, "agent_message_chunk"),
        "Turn over.",
        "{}",
        o.dump()
    );
    o.assert_clean();
}

#[test]
fn bash_rejected_or_cancelled_permission_fails_the_call_and_the_turn_goes_on() {
    for answer in ["reject_once", "cancelled"] {
        let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
        let agent = scripted(&d, &bash_turns("echo ran > made.txt"));
        let o = go(
            &home,
            &agent,
            json!({"permissions": [answer],
                   "steps": [init(), new_session(&ws), prompt("Run it")]}),
        );
        assert_eq!(o.permission_requests().len(), 1, "{answer}\n{}", o.dump());
        assert_eq!(
            o.final_update(2, "b1")["status"],
            "failed",
            "{answer}\n{}",
            o.dump()
        );
        assert!(!ws.join("made.txt").exists(), "{answer}: bash ran");
        assert_eq!(o.stop_reason(2), "end_turn", "{answer}\n{}", o.dump());
        assert_eq!(
            o.text_in(2, "agent_message_chunk"),
            "Turn over.",
            "{answer}\n{}",
            o.dump()
        );
        o.assert_clean();
    }
}

/// `allow_always` / `reject_always` become a stored rule: the next call is not put to the
/// client, and `approval.list` shows the rule.
#[test]
fn allow_always_and_reject_always_are_stored_rules() {
    for (answer, decision, runs) in [
        ("allow_always", "allow_always", true),
        ("reject_always", "deny_always", false),
    ] {
        let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
        let agent = scripted(&d, &bash_turns("echo x >> made.txt"));
        // The script replays from its first turn for each prompt (one stream per prompt).
        let o = go(
            &home,
            &agent,
            json!({"permissions": [answer], "permissionDefault": "reject_once",
                   "steps": [init(), new_session(&ws), prompt("First"), prompt("Second")]}),
        );
        let reqs = o.permission_requests();
        assert_eq!(reqs.len(), 1, "{answer}: asked again\n{}", o.dump());
        assert_eq!(reqs[0]["step"], 2, "{answer}\n{}", o.dump());
        let want = if runs { "completed" } else { "failed" };
        for step in [2, 3] {
            assert_eq!(o.stop_reason(step), "end_turn", "{answer}\n{}", o.dump());
            assert_eq!(
                o.final_update(step, "b1")["status"],
                want,
                "{answer}: step {step}\n{}",
                o.dump()
            );
        }
        let made = read(&ws.join("made.txt"));
        if runs {
            assert_eq!(made.as_deref(), Some("x\nx\n"), "{answer}");
        } else {
            assert_eq!(made, None, "{answer}");
        }
        o.assert_clean();
        let mut side = on_db(&home.join("outrigger.db"));
        let rules = side.ok("approval.list", json!({}))["rules"].clone();
        let rules = rules.as_array().unwrap();
        assert_eq!(rules.len(), 1, "{answer}: {rules:?}");
        assert_eq!(rules[0]["toolName"], "bash", "{answer}: {rules:?}");
        assert_eq!(rules[0]["decision"], decision, "{answer}: {rules:?}");
    }
}

// ---- todo_write --------------------------------------------------------------------------

#[test]
fn todo_write_becomes_a_plan() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let items = |statuses: [&str; 3]| {
        json!({"todos": [
            {"id": "1", "content": "Read the code", "status": statuses[0]},
            {"id": "2", "content": "Write the fix", "status": statuses[1]},
            {"id": "3", "content": "Run the tests", "status": statuses[2]},
        ]})
    };
    let agent = scripted(
        &d,
        &[
            call(
                "t1",
                "todo_write",
                items(["completed", "in_progress", "pending"]),
            ),
            call("t2", "todo_write", items(["completed"; 3])),
            json!({"text": "All done."}),
        ],
    );
    let o = go(
        &home,
        &agent,
        json!([init(), new_session(&ws), prompt("Fix it")]),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    let plans = o.kind_in(2, "plan");
    assert_eq!(plans.len(), 2, "one plan per todo_write\n{}", o.dump());
    let entries = |p: &Value| -> Vec<(String, String, String)> {
        p["entries"]
            .as_array()
            .unwrap_or_else(|| panic!("plan without entries: {p}"))
            .iter()
            .map(|e| {
                (
                    e["content"].as_str().unwrap_or_default().to_string(),
                    e["status"].as_str().unwrap_or_default().to_string(),
                    e["priority"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };
    let e = |c: &str, s: &str| (c.to_string(), s.to_string(), "medium".to_string());
    assert_eq!(
        entries(plans[0]),
        [
            e("Read the code", "completed"),
            e("Write the fix", "in_progress"),
            e("Run the tests", "pending")
        ],
        "{}",
        o.dump()
    );
    assert_eq!(
        entries(plans[1]),
        [
            e("Read the code", "completed"),
            e("Write the fix", "completed"),
            e("Run the tests", "completed")
        ],
        "{}",
        o.dump()
    );
    assert_eq!(o.tool_call(2, "t1")["kind"], "think", "{}", o.dump());
    assert!(
        o.permission_requests().is_empty(),
        "todo_write is not put to the client\n{}",
        o.dump()
    );
    assert_eq!(
        o.text_in(2, "agent_message_chunk"),
        "All done.",
        "{}",
        o.dump()
    );
    o.assert_clean();
}

// ---- cancel ------------------------------------------------------------------------------

#[test]
fn cancel_during_a_slow_model_answers_cancelled_and_records_the_turn() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let agent = scripted(&d, &[json!({"delayMs": 30000, "text": "late"})]);
    let o = go(
        &home,
        &agent,
        json!([init(), new_session(&ws),
               {"op": "prompt", "text": "Take your time", "cancelAfterMs": 500, "timeoutMs": 15000}]),
    );
    let r = o.ok(2);
    assert_eq!(r["stopReason"], "cancelled", "{}", o.dump());
    let took = r["cancelToAnswerMs"].as_u64().unwrap();
    assert!(
        took < 5000,
        "answered {took} ms after the cancel\n{}",
        o.dump()
    );
    assert!(
        !o.text_in(2, "agent_message_chunk").contains("late"),
        "{}",
        o.dump()
    );
    o.assert_clean();

    // "the partial turn is recorded": a new agent process replays the prompt.
    let sid = o.session_id(1);
    let o = go(
        &home,
        &agent,
        json!([init(), {"op": "load_session", "sessionId": sid, "cwd": ws.s()}]),
    );
    o.ok(1);
    assert!(
        o.text_in(1, "user_message_chunk")
            .contains("Take your time"),
        "{}",
        o.dump()
    );
    o.assert_clean();
}

#[test]
fn cancel_during_bash_stops_the_command() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    // A duration no other test uses, so its process can be found by argument.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let secs = format!("32.{:06}", nanos % 1_000_000);
    let command = format!("touch started.flag; sleep {secs}");
    let agent = scripted(&d, &bash_turns(&command));
    let flag = ws.join("started.flag");
    let scenario = json!({"permissions": ["allow_once"], "steps": [
        init(), new_session(&ws),
        {"op": "prompt", "text": "Wait a while", "background": true, "name": "p"},
        {"op": "wait_permissions", "count": 1},
        {"op": "wait_path", "path": flag, "timeoutMs": 20000},
        {"op": "sleep", "ms": 300},
        {"op": "cancel"},
        {"op": "await", "name": "p", "timeoutMs": 15000},
    ]});
    let home_path = home.path.clone();
    let agent2 = agent.clone();
    let t = std::thread::spawn(move || drive(&home_path, &args(&agent2), &[], &scenario));
    let mut started = false;
    wait_until(Duration::from_secs(30), || {
        started |= !pids_with_arg(&secs).is_empty();
        started || t.is_finished()
    });
    let o = t.join().unwrap();
    assert!(
        started,
        "the bash tool never started `{command}`\n{}",
        o.dump()
    );
    let r = o.ok(7);
    assert_eq!(r["stopReason"], "cancelled", "{}", o.dump());
    let took = o.step(7)["elapsedMs"].as_u64().unwrap();
    assert!(
        took < 5000,
        "answered {took} ms after the cancel\n{}",
        o.dump()
    );
    assert!(
        wait_until(Duration::from_secs(5), || pids_with_arg(&secs).is_empty()),
        "`{command}` outlived the cancel: {:?}",
        pids_with_arg(&secs)
    );
    assert!(
        !o.text_in(2, "agent_message_chunk").contains("Turn over."),
        "{}",
        o.dump()
    );
    o.assert_clean();
}

// ---- load ----------------------------------------------------------------------------------

#[test]
fn load_replays_the_record_rebuilds_read_state_and_continues_it() {
    let (home, d1, d2, ws) = (Dir::new(), Dir::new(), Dir::new(), Dir::new());
    let write = json!({"path": "notes.txt", "content": "alpha\nbeta\n"});
    let first = scripted(
        &d1,
        &[
            json!({"text": "Writing it. ",
                   "toolCalls": [{"id": "w1", "name": "write_file", "arguments": write}]}),
            json!({"text": "Wrote notes.txt."}),
        ],
    );
    let o = go(
        &home,
        &first,
        json!({"permissionDefault": "allow_once",
               "steps": [init(), new_session(&ws), prompt("Please write notes")]}),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    assert_eq!(
        read(&ws.join("notes.txt")).as_deref(),
        Some("alpha\nbeta\n")
    );
    o.assert_clean();
    let sid = o.session_id(1);

    // A new agent process on the same home. Its script edits the file without reading it:
    // that passes only when the read state was rebuilt from the record.
    let second = scripted(
        &d2,
        &[
            call(
                "e2",
                "edit_file",
                json!({"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}),
            ),
            json!({"text": "Edited."}),
        ],
    );
    let o = go(
        &home,
        &second,
        json!({"permissionDefault": "allow_once", "steps": [
            init(),
            {"op": "load_session", "sessionId": sid, "cwd": ws.s()},
            prompt("Now edit it"),
        ]}),
    );
    o.ok(1);
    // The replay, all before the load's answer, all naming the session.
    let answered_at = o.raw_response(1)["seq"].as_u64().unwrap();
    let replay: Vec<&Value> = o.entries().into_iter().filter(|e| e["step"] == 1).collect();
    assert!(!replay.is_empty(), "nothing replayed\n{}", o.dump());
    for e in &replay {
        assert!(e["seq"].as_u64().unwrap() < answered_at, "{}", o.dump());
        assert_eq!(e["sessionId"], sid.as_str(), "{}", o.dump());
    }
    assert!(
        o.text_in(1, "user_message_chunk")
            .contains("Please write notes"),
        "{}",
        o.dump()
    );
    let said = o.text_in(1, "agent_message_chunk");
    assert!(
        said.contains("Writing it.") && said.contains("Wrote notes.txt."),
        "{said:?}\n{}",
        o.dump()
    );
    let c = o.tool_call(1, "w1");
    assert_eq!(c["kind"], "edit", "{}", o.dump());
    assert_eq!(
        o.final_update(1, "w1")["status"],
        "completed",
        "{}",
        o.dump()
    );
    let user_at = seq_of(&o, |u| u["sessionUpdate"] == "user_message_chunk");
    let agent_at = seq_of(&o, |u| u["sessionUpdate"] == "agent_message_chunk");
    let call_at = seq_of(&o, |u| {
        u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "w1"
    });
    let result_at = seq_of(&o, |u| {
        u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "w1"
    });
    assert!(
        user_at < agent_at && call_at < result_at,
        "replay order\n{}",
        o.dump()
    );

    // The following prompt continues the session (the read-state claims are checked last).
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    assert_eq!(
        o.text_in(2, "agent_message_chunk"),
        "Edited.",
        "{}",
        o.dump()
    );
    o.assert_clean();
    let edited = o.final_update(2, "e2").clone();
    let second_run = o.dump();

    // A third process replays both prompts, in order.
    let o = go(
        &home,
        &second,
        json!([init(), {"op": "load_session", "sessionId": sid, "cwd": ws.s()}]),
    );
    o.ok(1);
    let users: Vec<String> = o
        .kind_in(1, "user_message_chunk")
        .into_iter()
        .map(chunk_text)
        .collect();
    let first_at = users.iter().position(|t| t.contains("Please write notes"));
    let second_at = users.iter().position(|t| t.contains("Now edit it"));
    assert!(
        first_at.is_some() && second_at.is_some() && first_at < second_at,
        "{users:?}\n{}",
        o.dump()
    );
    assert!(
        o.text_in(1, "agent_message_chunk").contains("Edited."),
        "{}",
        o.dump()
    );
    o.tool_call(1, "w1");
    o.tool_call(1, "e2");
    o.final_update(1, "e2");
    o.assert_clean();

    // "the file tools' read state … is rebuilt from it, also after a restart": the second
    // process's edit_file, with no read_file before it, passed the read-before-write check.
    assert_eq!(
        edited["status"], "completed",
        "edit_file after the restart, without a fresh read_file: {edited}\nsecond run:\n{second_run}"
    );
    assert_eq!(
        read(&ws.join("notes.txt")).as_deref(),
        Some("alpha\ngamma\n")
    );
}

#[test]
fn loading_an_unknown_session_is_resource_not_found() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let agent = scripted(&d, &[json!({"text": "unused"})]);
    let o = go(
        &home,
        &agent,
        json!([init(), {"op": "load_session", "sessionId": "acp_no_such_session", "cwd": ws.s()}]),
    );
    // ACP's "resource not found".
    let err = o.err(1);
    assert_eq!(err["code"], -32002, "{}", o.dump());
    assert!(
        err.to_string().to_lowercase().contains("not found"),
        "{err}\n{}",
        o.dump()
    );
    assert!(o.entries().is_empty(), "{}", o.dump());
    o.assert_clean();
}

// ---- MCP servers ---------------------------------------------------------------------------

#[test]
fn stdio_mcp_server_tools_are_called_and_the_server_stops() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let pid_file = d.join("mcp.pid");
    let agent = scripted(
        &d,
        &[
            call("m1", "mcp__fake__peek", json!({"text": "hi"})),
            json!({"text": "Peeked."}),
        ],
    );
    let server = json!({"name": "fake", "command": mcp_venv_python(), "args": [fake_mcp_server()],
                        "env": [{"name": "FAKE_PID_FILE", "value": pid_file}]});
    let o = go(
        &home,
        &agent,
        json!({"permissionDefault": "allow_once", "steps": [
            init(),
            {"op": "new_session", "cwd": ws.s(), "mcpServers": [server]},
            prompt("Peek"),
        ]}),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    let done = o.final_update(2, "m1");
    assert_eq!(done["status"], "completed", "{}", o.dump());
    assert!(
        done.to_string().contains("peeked hi"),
        "the tool's result: {done}\n{}",
        o.dump()
    );
    let pid: i32 = read(&pid_file)
        .unwrap_or_else(|| panic!("the MCP server never started\n{}", o.dump()))
        .trim()
        .parse()
        .unwrap();
    let gone = || {
        !Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
                st.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
    };
    assert!(
        wait_until(Duration::from_secs(6), gone),
        "the MCP server {pid} outlived the agent"
    );
    o.assert_clean();
}

#[test]
fn http_and_sse_mcp_servers_are_refused() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let agent = scripted(&d, &[json!({"text": "unused"})]);
    let o = go(
        &home,
        &agent,
        json!([
            init(),
            {"op": "new_session", "cwd": ws.s(), "mcpServers": [
                {"type": "http", "name": "remote", "url": "http://127.0.0.1:9/mcp", "headers": []}]},
            {"op": "new_session", "cwd": ws.s(), "mcpServers": [
                {"type": "sse", "name": "remote", "url": "http://127.0.0.1:9/sse", "headers": []}]},
        ]),
    );
    assert_eq!(o.err(1)["code"], -32602, "{}", o.dump());
    assert_eq!(o.err(2)["code"], -32602, "{}", o.dump());
    o.assert_clean();
}

// ---- stdout, logs, storage, exit -------------------------------------------------------------

/// With debug logging on and tools running, stdout still carries only ACP frames (checked
/// line by line by the driver), logs go to stderr, and `--storage-path` is honoured.
#[test]
fn stdout_is_only_frames_with_debug_logs_and_storage_path_is_honoured() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let store = d.join("elsewhere.db");
    let sc = script(
        &d.path,
        "script.jsonl",
        &[
            json!({"reasoning": "Noisy.", "text": "Running. ",
                   "toolCalls": [{"id": "b1", "name": "bash", "arguments": {"command": "echo to-stdout; echo to-stderr >&2"}},
                                 {"id": "l1", "name": "ls", "arguments": {}}]}),
            json!({"text": "Quiet now."}),
        ],
    );
    let agent = vec![
        "acp".to_string(),
        "--log-level".into(),
        "DEBUG".into(),
        "--storage-path".into(),
        s(&store).into(),
        "--script".into(),
        s(&sc).into(),
    ];
    let o = go(
        &home,
        &agent,
        json!({"permissionDefault": "allow_once",
               "steps": [init(), new_session(&ws), prompt("Make noise")]}),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    assert_eq!(
        o.final_update(2, "b1")["status"],
        "completed",
        "{}",
        o.dump()
    );
    assert_eq!(o.tool_call(2, "l1")["kind"], "read", "{}", o.dump());
    assert!(
        !o.v["agentStderr"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .is_empty(),
        "DEBUG logs nothing on stderr\n{}",
        o.dump()
    );
    o.assert_clean();
    assert!(store.is_file(), "no store at {}", store.display());
    assert!(
        !home.join("outrigger.db").exists(),
        "the default store was created too"
    );
}

#[test]
fn no_model_or_no_key_is_exit_2_naming_the_fix() {
    let home = Dir::new();
    let o = run(
        &home.path,
        &[
            "acp",
            "--provider",
            "openai_compat",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
    );
    o.expect_code(2);
    assert!(o.stderr.contains("--model"), "{}", o.dump());
    assert_eq!(o.stdout, "", "{}", o.dump());

    let o = run(&home.path, &["acp", "--provider", "openai", "--model", "m"]);
    o.expect_code(2);
    assert!(o.stderr.contains("OUTRIGGER_API_KEY"), "{}", o.dump());
    assert!(o.stderr.contains("OPENAI_API_KEY"), "{}", o.dump());
    assert_eq!(o.stdout, "", "{}", o.dump());

    // A compatible server has no default endpoint.
    let o = run(
        &home.path,
        &["acp", "--provider", "openai_compat", "--model", "m"],
    );
    o.expect_code(2);
    assert!(o.stderr.contains("baseUrl"), "{}", o.dump());
    assert_eq!(o.stdout, "", "{}", o.dump());
}

// ---- prompts: blocks, errors, budgets ------------------------------------------------------

fn router_agent(router: &FakeRouter) -> Vec<String> {
    vec![
        "acp".into(),
        "--provider".into(),
        "openai_compat".into(),
        "--base-url".into(),
        router.base_url(),
        "--model".into(),
        "m".into(),
    ]
}

#[test]
fn embedded_resources_and_links_reach_the_model_and_images_are_refused() {
    let router = FakeRouter::start(|_| RouterReply::text("Seen."));
    let (home, ws) = (Dir::new(), Dir::new());
    let file = ws.join("src/lib.rs").display().to_string();
    let readme = ws.join("README.md").display().to_string();
    let blocks = json!([
        {"type": "text", "text": "Explain this."},
        {"type": "resource", "resource": {"uri": format!("file://{file}"), "mimeType": "text/x-rust",
                                          "text": "pub fn answer() -> u32 { 42 }"}},
        {"type": "resource_link", "uri": format!("file://{readme}"), "name": "README.md"},
    ]);
    let image = json!([
        {"type": "text", "text": "And this picture."},
        {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
    ]);
    let o = go(
        &home,
        &router_agent(&router),
        json!([init(), new_session(&ws),
               {"op": "prompt", "blocks": blocks},
               {"op": "prompt", "blocks": image}]),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    assert_eq!(o.text_in(2, "agent_message_chunk"), "Seen.", "{}", o.dump());
    let reqs = router.requests();
    assert_eq!(
        reqs.len(),
        1,
        "the image prompt reached the model\n{}",
        o.dump()
    );
    let (role, text) = reqs[0].last_message().unwrap();
    assert_eq!(role, "user");
    assert!(text.contains("Explain this."), "{text}");
    assert!(
        text.contains("<context path=\"") && text.contains(&file),
        "the resource's path: {text}"
    );
    assert!(
        text.contains("pub fn answer() -> u32 { 42 }") && text.contains("</context>"),
        "the resource's text: {text}"
    );
    assert!(text.contains(&readme), "the resource link: {text}");
    o.err(3);
    o.assert_clean();
}

#[test]
fn ask_user_is_offered_only_to_clients_with_form_elicitation() {
    for (caps, offered) in [
        (json!({}), false),
        (json!({"elicitation": {"form": {}}}), true),
    ] {
        let router = FakeRouter::start(|_| RouterReply::text("Fine."));
        let (home, ws) = (Dir::new(), Dir::new());
        let o = go(
            &home,
            &router_agent(&router),
            json!([{"op": "initialize", "clientCapabilities": caps},
                   new_session(&ws), prompt("Hi")]),
        );
        assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
        let reqs = router.requests();
        assert_eq!(reqs.len(), 1, "{}", o.dump());
        assert_eq!(
            reqs[0].offers("ask_user"),
            offered,
            "capabilities {caps}: tools {:?}",
            reqs[0].tool_names()
        );
        o.assert_clean();
    }
}

#[test]
fn a_failed_turn_answers_a_json_rpc_error_with_the_turns_error() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let agent = scripted(
        &d,
        &[
            json!({"error": {"kind": "http", "status": 400, "message": "bad request from the script"}}),
        ],
    );
    let o = go(
        &home,
        &agent,
        json!([init(), new_session(&ws), prompt("Fail please")]),
    );
    let err = o.err(2);
    assert!(
        err["code"].is_i64(),
        "a JSON-RPC error: {err}\n{}",
        o.dump()
    );
    assert!(
        err.to_string().contains("bad request from the script"),
        "{err}\n{}",
        o.dump()
    );
    o.assert_clean();
}

#[test]
fn max_rounds_reached_is_max_turn_requests() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let sc = script(
        &d.path,
        "script.jsonl",
        &[
            call("l1", "ls", json!({})),
            json!({"text": "never reached"}),
        ],
    );
    let agent: Vec<String> = ["acp", "--max-rounds", "1", "--script", s(&sc)]
        .into_iter()
        .map(String::from)
        .collect();
    let o = go(
        &home,
        &agent,
        json!([init(), new_session(&ws), prompt("List")]),
    );
    assert_eq!(o.stop_reason(2), "max_turn_requests", "{}", o.dump());
    o.assert_clean();
}

// ---- provider flags, history ---------------------------------------------------------------

#[test]
fn provider_flags_and_environment_reach_the_model() {
    let router = FakeRouter::start(|_| RouterReply::text("Fine."));
    let (home, ws) = (Dir::new(), Dir::new());
    let mut agent = router_agent(&router);
    agent.extend([
        "--system-prompt".to_string(),
        "You are an ACP test.".into(),
        "--no-web-tools".into(),
    ]);
    let o = go(
        &home,
        &agent,
        json!([init(), new_session(&ws), prompt("Hello there")]),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    o.assert_clean();
    let reqs = router.requests();
    assert_eq!(reqs.len(), 1, "{}", o.dump());
    assert_eq!(reqs[0].body["model"], "m");
    assert_eq!(reqs[0].system().as_deref(), Some("You are an ACP test."));
    assert_eq!(reqs[0].first_user().as_deref(), Some("Hello there"));
    let names = reqs[0].tool_names();
    assert!(
        !names.iter().any(|n| n == "web_fetch" || n == "web_search"),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "read_file"), "{names:?}");

    // The model from OUTRIGGER_MODEL; web tools on by default.
    let home = Dir::new();
    let agent = [
        "acp",
        "--provider",
        "openai_compat",
        "--base-url",
        &router.base_url(),
    ]
    .map(String::from);
    let o = drive(
        &home.path,
        &args(&agent),
        &[("OUTRIGGER_MODEL", "env-model")],
        &json!([init(), new_session(&ws), prompt("Hi again")]),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    o.assert_clean();
    let last = router.requests().pop().unwrap();
    assert_eq!(last.body["model"], "env-model");
    assert!(last.offers("web_fetch"), "{:?}", last.tool_names());
}

/// Two prompts in one session: the second turn's model request carries the first exchange.
#[test]
fn a_later_prompt_continues_the_session_history() {
    let router = FakeRouter::start(|body| {
        if crate::support::fake_router::messages(body)
            .iter()
            .any(|m| m["role"] == "assistant")
        {
            RouterReply::text("Second answer.")
        } else {
            RouterReply::text("First answer.")
        }
    });
    let (home, ws) = (Dir::new(), Dir::new());
    let o = go(
        &home,
        &router_agent(&router),
        json!([
            init(),
            new_session(&ws),
            prompt("First question"),
            prompt("Second question")
        ]),
    );
    assert_eq!(
        o.text_in(2, "agent_message_chunk"),
        "First answer.",
        "{}",
        o.dump()
    );
    assert_eq!(
        o.text_in(3, "agent_message_chunk"),
        "Second answer.",
        "{}",
        o.dump()
    );
    o.assert_clean();
    let reqs = router.requests();
    assert_eq!(reqs.len(), 2, "{}", o.dump());
    let dialogue: Vec<(String, String)> = reqs[1]
        .messages()
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                crate::support::fake_router::content_text(m),
            )
        })
        .collect();
    let pair = |r: &str, t: &str| (r.to_string(), t.to_string());
    assert_eq!(
        dialogue,
        [
            pair("user", "First question"),
            pair("assistant", "First answer."),
            pair("user", "Second question")
        ]
    );
}

// ---- the client goes away ----------------------------------------------------------------

/// An editor closing the connection mid-turn (a running `bash` included): the agent exits on
/// its own and takes its sidecar and the command with it.
#[test]
fn closing_stdin_mid_turn_ends_the_agent_and_everything_it_started() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let secs = format!("33.{:06}", nanos % 1_000_000);
    let agent = scripted(
        &d,
        &bash_turns(&format!("touch started.flag; sleep {secs}")),
    );
    let flag = ws.join("started.flag");
    let scenario = json!({"permissions": ["allow_once"], "steps": [
        init(), new_session(&ws),
        {"op": "prompt", "text": "Wait a while", "background": true, "name": "p"},
        {"op": "wait_permissions", "count": 1},
        {"op": "wait_path", "path": flag, "timeoutMs": 20000},
        {"op": "sleep", "ms": 300},
        {"op": "close"},
    ]});
    let home_path = home.path.clone();
    let t = std::thread::spawn(move || drive(&home_path, &args(&agent), &[], &scenario));
    let mut started = false;
    wait_until(Duration::from_secs(30), || {
        started |= !pids_with_arg(&secs).is_empty();
        started || t.is_finished()
    });
    let o = t.join().unwrap();
    assert!(started, "the bash tool never started\n{}", o.dump());
    let exit = &o.ok(6)["exitedOnItsOwn"];
    assert_eq!(
        exit,
        &json!(true),
        "the agent did not exit after its stdin closed mid-turn\n{}",
        o.dump()
    );
    assert_eq!(o.v["badStdoutLines"], json!([]), "{}", o.dump());
    assert!(
        o.leftovers.is_empty(),
        "left behind: {:?}\n{}",
        o.leftovers,
        o.dump()
    );
    assert!(
        wait_until(Duration::from_secs(5), || pids_with_arg(&secs).is_empty()),
        "the command outlived the agent: {:?}",
        pids_with_arg(&secs)
    );
}

// ---- the client's buffers (fs/*) and forms (elicitation/create) ------------------------------

/// The text shown in a `tool_call_update`'s content items (besides the diff).
fn shown_text(u: &Value) -> String {
    u["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter(|i| i["type"] == "content")
                .filter_map(|i| i["content"]["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// A file on disk and a different unsaved buffer of it in the client, plus a buffer for a
/// file that exists only in the editor: `(abs path, ghost abs path)`.
fn buffers_setup(ws: &Dir) -> (String, String) {
    std::fs::write(ws.join("notes.txt"), "alpha\ndisk beta\n").unwrap();
    (
        ws.join("notes.txt").display().to_string(),
        ws.join("ghost.txt").display().to_string(),
    )
}

fn edit_turns() -> Vec<Value> {
    vec![
        call("r0", "read_file", json!({"path": "ghost.txt"})),
        call("r1", "read_file", json!({"path": "notes.txt"})),
        // "buffer beta" is only in the client's buffer.
        call(
            "e1",
            "edit_file",
            json!({"path": "notes.txt", "edits": [{"oldText": "buffer beta", "newText": "gamma"}]}),
        ),
        json!({"text": "Done."}),
    ]
}

const FS_METHODS: [&str; 2] = ["fs/read_text_file", "fs/write_text_file"];

#[test]
fn with_client_fs_the_file_tools_read_and_edit_the_clients_buffers() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let (abs, ghost) = buffers_setup(&ws);
    let buffer = "alpha\nbuffer beta\n";
    let edited = "alpha\ngamma\n";
    let agent = scripted(&d, &edit_turns());
    let o = go(
        &home,
        &agent,
        json!({"fs": {"readTextFile": true, "writeTextFile": true,
                      "buffers": {&abs: buffer, &ghost: "only in the editor\n"}},
               "steps": [init(), new_session(&ws), prompt("Edit the notes")]}),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    let sid = o.session_id(1);

    // A file that exists only as an unsaved buffer is not found; the client is not asked.
    assert_eq!(o.final_update(2, "r0")["status"], "failed", "{}", o.dump());
    assert!(
        o.fs_requests().iter().all(|r| r["path"] != ghost.as_str()),
        "the client was asked about a file missing on disk\n{}",
        o.dump()
    );

    // read_file shows the buffer, not the disk.
    let r1 = o.final_update(2, "r1");
    assert_eq!(r1["status"], "completed", "{}", o.dump());
    let shown = shown_text(r1);
    assert!(
        shown.contains("buffer beta") && !shown.contains("disk beta"),
        "read_file showed {shown:?}\n{}",
        o.dump()
    );

    // Both reads of notes.txt went to the client; the edit went back to it, whole.
    let reads = o.fs_requests_of("fs/read_text_file");
    assert_eq!(reads.len(), 2, "read_file and edit_file\n{}", o.dump());
    for r in &reads {
        assert_eq!(r["path"], abs.as_str(), "{}", o.dump());
        assert_eq!(r["sessionId"], sid.as_str(), "{}", o.dump());
        assert_eq!(r["served"], "buffer", "{}", o.dump());
    }
    let writes = o.agent_requests("fs/write_text_file");
    assert_eq!(writes.len(), 1, "{}", o.dump());
    assert_eq!(
        *writes[0],
        json!({"sessionId": sid, "path": abs, "content": edited}),
        "{}",
        o.dump()
    );
    assert_eq!(o.v["buffers"][&abs], edited, "{}", o.dump());
    // The disk is the client's business: unchanged.
    assert_eq!(
        read(&ws.join("notes.txt")).as_deref(),
        Some("alpha\ndisk beta\n")
    );

    // The diff is the buffer before and after.
    let e1 = o.final_update(2, "e1");
    assert_eq!(e1["status"], "completed", "{}", o.dump());
    let diff = diff_of(&o, e1);
    assert_eq!(diff["path"], abs.as_str(), "{}", o.dump());
    assert_eq!(diff["oldText"], buffer, "{}", o.dump());
    assert_eq!(diff["newText"], edited, "{}", o.dump());
    // The write reached the client before the call was reported done.
    let wrote_at = o.v["agentRequests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["method"] == "fs/write_text_file")
        .unwrap()["seq"]
        .as_u64()
        .unwrap();
    let done_at = seq_of(&o, |u| {
        u["sessionUpdate"] == "tool_call_update"
            && u["toolCallId"] == "e1"
            && u["status"] == "completed"
    });
    assert!(wrote_at < done_at, "{}", o.dump());
    assert!(o.permission_requests().is_empty(), "{}", o.dump());
    o.assert_clean_allowing(&FS_METHODS);
}

#[test]
fn with_only_read_text_file_the_edit_reads_the_buffer_and_writes_the_disk() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let (abs, _) = buffers_setup(&ws);
    let buffer = "alpha\nbuffer beta\n";
    let agent = scripted(&d, &edit_turns());
    let o = go(
        &home,
        &agent,
        json!({"fs": {"readTextFile": true, "writeTextFile": false, "buffers": {&abs: buffer}},
               "steps": [init(), new_session(&ws), prompt("Edit the notes")]}),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    assert_eq!(
        o.final_update(2, "e1")["status"],
        "completed",
        "{}",
        o.dump()
    );
    let reads = o.fs_requests_of("fs/read_text_file");
    assert_eq!(reads.len(), 2, "{}", o.dump());
    assert!(
        o.agent_requests("fs/write_text_file").is_empty(),
        "writeTextFile was not advertised\n{}",
        o.dump()
    );
    // The edit applied to the buffer's text landed on disk.
    assert_eq!(
        read(&ws.join("notes.txt")).as_deref(),
        Some("alpha\ngamma\n")
    );
    assert_eq!(o.v["buffers"][&abs], buffer, "{}", o.dump());
    // docs/acp.md: the diff comes "from the client's buffer when it does the writing, else
    // from the disk".
    let diff = diff_of(&o, o.final_update(2, "e1"));
    assert_eq!(diff["oldText"], "alpha\ndisk beta\n", "{}", o.dump());
    assert_eq!(diff["newText"], "alpha\ngamma\n", "{}", o.dump());
    o.assert_clean_allowing(&FS_METHODS);
}

#[test]
fn a_client_refusing_fs_write_text_file_fails_the_edit_and_nothing_is_written() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    let (abs, _) = buffers_setup(&ws);
    let buffer = "alpha\nbuffer beta\n";
    let agent = scripted(&d, &edit_turns());
    let o = go(
        &home,
        &agent,
        json!({"fs": {"buffers": {&abs: buffer},
                      "writeError": {"code": -32000, "message": "the buffer is read-only"}},
               "steps": [init(), new_session(&ws), prompt("Edit the notes")]}),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    let e1 = o.final_update(2, "e1");
    assert_eq!(e1["status"], "failed", "{}", o.dump());
    assert!(
        !e1["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "diff")),
        "a failed edit shows no diff\n{}",
        o.dump()
    );
    assert_eq!(
        o.fs_requests_of("fs/write_text_file").len(),
        1,
        "{}",
        o.dump()
    );
    assert_eq!(o.v["buffers"][&abs], buffer, "{}", o.dump());
    assert_eq!(
        read(&ws.join("notes.txt")).as_deref(),
        Some("alpha\ndisk beta\n")
    );
    o.assert_clean_allowing(&FS_METHODS);
}

#[test]
fn ask_user_goes_to_the_client_as_a_form_and_its_answers_reach_the_model() {
    let ask = json!({"intro": "A few choices first.", "questions": [
        {"id": "db", "text": "Which database?", "options": ["pg", "sqlite"]},
        {"id": "tags", "text": "Which tags?", "options": ["fast", "small"], "multiSelect": true},
        {"id": "why", "text": "Why?"}
    ]});
    let accepted = json!({"db": "pg", "tags": ["fast", "small"], "why": "it is quick"});
    for (answer, want) in [
        (
            json!({"action": "accept", "content": accepted}),
            accepted.clone(),
        ),
        (json!({"action": "decline"}), json!({})),
    ] {
        let ask = ask.clone();
        let router = FakeRouter::start(move |body| {
            if crate::support::fake_router::messages(body)
                .iter()
                .any(|m| m["role"] == "tool")
            {
                RouterReply::text("Thanks.")
            } else {
                RouterReply::tool("ask_user", ask.clone())
            }
        });
        let (home, ws) = (Dir::new(), Dir::new());
        let o = go(
            &home,
            &router_agent(&router),
            json!({"elicitation": {"answers": [answer]},
                   "steps": [init(), new_session(&ws), prompt("Set it up")]}),
        );
        let action = &answer["action"];
        assert_eq!(o.stop_reason(2), "end_turn", "{action}\n{}", o.dump());
        let sid = o.session_id(1);
        let forms = o.agent_requests("elicitation/create");
        assert_eq!(forms.len(), 1, "{action}\n{}", o.dump());
        let f = forms[0];
        assert_eq!(f["mode"], "form", "{}", o.dump());
        assert_eq!(f["sessionId"], sid.as_str(), "{}", o.dump());
        assert_eq!(f["message"], "A few choices first.", "{}", o.dump());
        let schema = &f["requestedSchema"];
        assert_eq!(schema["type"], "object", "{}", o.dump());
        let props = &schema["properties"];
        assert_eq!(props["db"]["type"], "string", "{}", o.dump());
        assert_eq!(props["db"]["enum"], json!(["pg", "sqlite"]), "{}", o.dump());
        assert_eq!(props["tags"]["type"], "array", "{}", o.dump());
        assert_eq!(
            props["tags"]["items"]["enum"],
            json!(["fast", "small"]),
            "{}",
            o.dump()
        );
        assert_eq!(props["why"]["type"], "string", "{}", o.dump());
        assert!(props["why"].get("enum").is_none(), "{}", o.dump());
        let mut required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        required.sort_unstable();
        assert_eq!(required, ["db", "tags", "why"], "{}", o.dump());
        // The SDK parsed the request as a form elicitation and the client answered it.
        assert_eq!(o.elicitation_requests().len(), 1, "{}", o.dump());

        // The tool result the model gets next carries the answers.
        let reqs = router.requests();
        assert_eq!(reqs.len(), 2, "{action}\n{}", o.dump());
        let results = reqs[1].tool_results();
        assert_eq!(results.len(), 1, "{results:?}");
        let result: Value = serde_json::from_str(&results[0])
            .unwrap_or_else(|e| panic!("tool result is not JSON ({e}): {}", results[0]));
        assert_eq!(result["data"]["answers"], want, "{action}: {result}");
        let asked = o
            .kind_in(2, "tool_call_update")
            .into_iter()
            .find(|u| u["rawOutput"]["tool"] == "ask_user")
            .unwrap_or_else(|| panic!("no ask_user result\n{}", o.dump()));
        assert_eq!(asked["status"], "completed", "{}", o.dump());
        assert_eq!(
            o.text_in(2, "agent_message_chunk"),
            "Thanks.",
            "{}",
            o.dump()
        );
        o.assert_clean_allowing(&["elicitation/create"]);
    }
}

// ---- images ---------------------------------------------------------------------------------

#[test]
fn a_viewed_image_is_shown_in_the_tool_call_update() {
    let (home, d, ws) = (Dir::new(), Dir::new(), Dir::new());
    image::RgbImage::from_pixel(40, 30, image::Rgb([200, 10, 10]))
        .save(ws.join("shot.png"))
        .unwrap();
    let agent = scripted(
        &d,
        &[
            call("v1", "view_image", json!({"path": "shot.png"})),
            json!({"text": "A red rectangle."}),
        ],
    );
    let o = go(
        &home,
        &agent,
        json!([init(), new_session(&ws), prompt("What is in shot.png?")]),
    );
    assert_eq!(o.stop_reason(2), "end_turn", "{}", o.dump());
    let u = o.final_update(2, "v1");
    assert_eq!(u["status"], "completed", "{}", o.dump());
    let image = u["content"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["content"]["type"] == "image"))
        .unwrap_or_else(|| panic!("no image content in the update\n{}", o.dump()));
    assert_eq!(image["content"]["mimeType"], "image/png", "{image}");
    let data = image["content"]["data"].as_str().unwrap();
    // Base64 of a PNG starts with the encoded signature.
    assert!(
        data.starts_with("iVBORw0KGgo"),
        "{}",
        &data[..data.len().min(40)]
    );
    o.assert_clean();
}
