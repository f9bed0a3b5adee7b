//! Strict params over the real binary's pipes: a misspelt or unknown field is refused with
//! `-32602` naming it and the nearest known one, a type error names the field, every field
//! of the reference's `agent.chat.stream` stays accepted, and the history
//! `agent.session.messages` returns can be sent back as `messages` unchanged.

use crate::common::Sidecar;
use crate::support::chat_helpers::*;
use serde_json::{Value, json};

/// The error message of a `-32602` response, failing on anything else.
fn invalid(r: &Value) -> String {
    assert_eq!(code(r), -32602, "{r}");
    assert_eq!(r["error"]["data"]["kind"], "invalid_params", "{r}");
    r["error"]["message"].as_str().unwrap().to_string()
}

fn stream_err(s: &mut Sidecar, extra: Value) -> String {
    let p = merge(scripted(json!([{"text": "hi"}]), "hello"), extra);
    invalid(&s.call("agent.chat.stream", p))
}

fn ws() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("notes.txt"), "alpha\nthe needle\n").unwrap();
    d
}

#[test]
fn chat_stream_refuses_misspelt_fields_with_the_nearest_known_one() {
    let mut s = Sidecar::start();
    assert_eq!(
        stream_err(&mut s, json!({"maxRoundz": 5})),
        "unknown field 'maxRoundz' (did you mean 'maxRounds'?)"
    );
    assert_eq!(
        stream_err(&mut s, json!({"max_rounds": 5})),
        "unknown field 'max_rounds' (did you mean 'maxRounds'?)"
    );
    assert_eq!(
        stream_err(&mut s, json!({"temprature": 0.1})),
        "unknown field 'temprature' (did you mean 'temperature'?)"
    );
    // `prompt` instead of `messages`: refused, not a turn with an empty user message.
    let p = json!({"provider": "scripted", "model": "m", "script": [{"text": "hi"}],
        "prompt": "hello"});
    assert_eq!(
        invalid(&s.call("agent.chat.stream", p)),
        "unknown field 'prompt' (did you mean 'messages'?)"
    );
    // A message with `text` instead of `content`.
    assert_eq!(
        stream_err(
            &mut s,
            json!({"messages": [{"role": "user", "text": "hello"}]})
        ),
        "messages[0]: unknown field 'text' (did you mean 'content'?)"
    );
    // The old output spelling of a tool message's id.
    let e = stream_err(
        &mut s,
        json!({"messages": [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "toolCalls": [{"id": "c1", "name": "ls", "arguments": {}}]},
            {"role": "tool", "content": "{}", "tool_call_id": "c1"}]}),
    );
    assert_eq!(
        e,
        "messages[2]: unknown field 'tool_call_id' (did you mean 'toolCallId'?)"
    );
    // Far from every known name: no guess, a pointer to the docs.
    let e = stream_err(&mut s, json!({"zzzzzz": 1}));
    assert!(e.starts_with("unknown field 'zzzzzz';"), "{e}");
    assert!(e.contains("docs/protocol.md"), "{e}");
    // Nothing ran: the refusals wrote no record.
    let r = s.call("agent.session.messages", json!({"recordId": "none"}));
    assert_eq!(code(&r), -32004);
}

#[test]
fn chat_stream_type_errors_and_message_rules_name_the_field() {
    let mut s = Sidecar::start();
    assert_eq!(
        stream_err(&mut s, json!({"maxRounds": "5"})),
        "maxRounds: expected an integer, got \"5\""
    );
    assert_eq!(
        stream_err(&mut s, json!({"streamRawChunks": "yes"})),
        "streamRawChunks: expected a boolean (true or false), got \"yes\""
    );
    assert_eq!(
        stream_err(&mut s, json!({"maxRounds": -2})),
        "maxRounds: expected a non-negative integer, got -2"
    );
    assert_eq!(
        stream_err(
            &mut s,
            json!({"messages": [{"role": "user", "content": ["hi"]}]})
        ),
        "messages[0].content: expected a string, got [\"hi\"]"
    );
    let e = stream_err(&mut s, json!({"messages": [{"role": "user"}]}));
    assert!(e.starts_with("messages[0]: content is required"), "{e}");
    let e = stream_err(
        &mut s,
        json!({"messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": "{}"}]}),
    );
    assert!(e.starts_with("messages[1]: toolCallId is required"), "{e}");
    // The reference's wording for a bad role is kept.
    let e = stream_err(
        &mut s,
        json!({"messages": [{"role": "wizard", "content": "x"}]}),
    );
    assert!(e.starts_with("invalid role: 'wizard'"), "{e}");
    // Refused features keep their own message.
    for (k, v) in [
        ("skills", json!({"roots": ["/x"]})),
        ("worldState", json!({"a": 1})),
        ("antiHallucination", json!(true)),
    ] {
        let e = stream_err(&mut s, json!({ k: v }));
        assert!(e.starts_with(&format!("{k} is not supported")), "{k}: {e}");
    }
}

#[test]
fn every_reference_field_is_accepted() {
    let w = ws();
    let mut s = Sidecar::start();
    // Reference §1.8, with harmless values, and this build's own fields. The refused
    // features are left out (their "off" values are checked below).
    let p = json!({
        "provider": "scripted", "model": "o4-mini",
        "messages": [{"role": "user", "content": "hello"}],
        "baseUrl": "http://127.0.0.1:9/v1", "apiKey": "k",
        "temperature": 0.2, "maxTokens": 256, "reasoningEffort": "low",
        "providerOptions": {}, "compat": {}, "presets": {"enabled": false},
        "useCoreLoop": true, "streamId": "str_all_fields", "chatId": "chat_all",
        "recordId": "rec_all", "resume": false, "maxRounds": 3, "maxToolErrors": 2,
        "budgetTokens": 1000000, "budgetMaxToolCalls": 5, "softTimeoutMs": 60000,
        "toolTimeoutMs": 30000, "steerMode": "boundary", "maxContextTokens": 100000,
        "contentMode": "all", "streamRawChunks": false, "systemPrompt": "Be brief.",
        "tools": [], "toolsViaHost": false, "toolContext": {}, "askUser": false,
        "execSandbox": {}, "approval": {"mode": "auto"}, "subagent": false,
        "script": [{"text": "all fields"}], "cwd": w.path(), "toolsStrategy": "full",
        "sessionId": "sess_all", "topP": 0.9, "fromRecord": false
    });
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.text(), "all fields");
    assert_eq!(r.done["recordId"], "rec_all");
    // The fork's own fields, with the scripted provider's file form.
    let script = w.path().join("turns.jsonl");
    std::fs::write(&script, "{\"text\": \"forked\"}\n").unwrap();
    let p = json!({"provider": "scripted", "model": "m", "scriptPath": script,
        "recordId": "rec_all", "untilSeq": 1, "messages": [], "cwd": w.path()});
    let r = s.ok("agent.chat.fork", p.clone());
    let id = r["streamId"].as_str().unwrap().to_string();
    assert_eq!(finish(&mut s, &id, vec![]).done["status"], "completed");
    let e = invalid(&s.call("agent.chat.fork", merge(p, json!({"traceId": "t"}))));
    assert!(
        e.starts_with("forking from a traceId is not supported"),
        "{e}"
    );

    // The refused features' "off" values, and the snake_case aliases.
    let p = merge(
        scripted(json!([{"text": "off"}]), "hello"),
        json!({"mcp": [], "skills": [], "worldState": null, "antiHallucination": false,
               "orchestration": null, "base_url": "http://127.0.0.1:9/v1", "api_key": "k",
               "cwd": w.path()}),
    );
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    // `tools: []` without toolsViaHost still means "no descriptors".
    let p = merge(
        scripted(json!([{"text": "none"}]), "hello"),
        json!({"tools": [], "cwd": w.path()}),
    );
    assert_eq!(run(&mut s, p).done["status"], "completed");
}

#[test]
fn other_methods_refuse_unknown_fields_with_a_suggestion() {
    let mut s = Sidecar::start();
    let cases = [
        (
            "config.get",
            json!({"merge": true}),
            "unknown field 'merge' (did you mean 'merged'?)",
        ),
        (
            "tool.invoke",
            json!({"name": "ls", "argumnts": {}}),
            "unknown field 'argumnts' (did you mean 'arguments'?)",
        ),
        (
            "agent.session.list",
            json!({"active_only": true}),
            "unknown field 'active_only' (did you mean 'activeOnly'?)",
        ),
        (
            "trace.fetch",
            json!({"trace_id": "t"}),
            "unknown field 'trace_id' (did you mean 'traceId'?)",
        ),
        (
            "workspace.apply_edits",
            json!({"content": "a", "edits": [{"oldText": "a", "newTxt": "b"}]}),
            "edits[0]: unknown field 'newTxt' (did you mean 'newText'?)",
        ),
    ];
    for (method, params, want) in cases {
        assert_eq!(invalid(&s.call(method, params)), want, "{method}");
    }
    // A type error names the field.
    assert_eq!(
        invalid(&s.call("agent.session.list", json!({"activeOnly": "yes"}))),
        "activeOnly: expected a boolean (true or false), got \"yes\""
    );
    assert_eq!(
        invalid(&s.call("trace.fetch", json!({}))),
        "traceId is required"
    );
    // Methods that take no params say so instead of ignoring a filter.
    let e = invalid(&s.call("tool.list", json!({"mode": "read"})));
    assert_eq!(e, "unknown field 'mode': no fields are accepted here");
    s.ok("tool.list", json!({}));
    s.ok("tool.list", Value::Null);
}

#[test]
fn session_messages_round_trip_as_stream_messages() {
    let w = ws();
    let mut s = Sidecar::start();
    let script = json!([
        {"reasoning": "look first", "text": "Reading. ",
         "toolCalls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "It says alpha."}
    ]);
    let p = merge(
        scripted(script, "what is in notes.txt?"),
        json!({"recordId": "rec_trip", "systemPrompt": "Be brief.", "cwd": w.path()}),
    );
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);

    let before = messages(&mut s, "rec_trip");
    let roles: Vec<&str> = before.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
    // One shape: camelCase, tool calls as {id, name, arguments}.
    assert_eq!(
        before[2]["toolCalls"],
        json!([{"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}])
    );
    assert_eq!(before[2]["reasoning"], "look first");
    assert_eq!(before[3]["toolCallId"], "r1");
    for m in &before {
        for k in m.as_object().unwrap().keys() {
            assert!(!k.contains('_'), "snake_case key {k} in {m}");
        }
    }

    // The stored history, sent back unchanged plus a new question.
    let mut history = before.clone();
    history.push(json!({"role": "user", "content": "and the second line?"}));
    let p = json!({"provider": "scripted", "model": "scripted-model",
        "script": [{"text": "the needle"}], "recordId": "rec_trip", "cwd": w.path(),
        "messages": history});
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);

    // Only the delta was appended: no re-seed, no duplicate entries.
    let after = messages(&mut s, "rec_trip");
    assert_eq!(after.len(), before.len() + 2, "{after:#?}");
    assert_eq!(&after[..before.len()], &before[..]);
    assert_eq!(after[before.len()]["content"], "and the second line?");
    assert_eq!(after[before.len() + 1]["content"], "the needle");
}

// ---- `messages` as text: what a JSON value cannot carry -------------------------------------

/// Sends `agent.chat.stream` with `params` written as `{REST, "messages": MESSAGES}` (both raw
/// JSON text, so they can hold what a `Value` cannot: lone surrogates, `1e400`); returns the
/// response.
fn stream_raw(s: &mut Sidecar, id: u64, rest: &Value, messages: &str) -> Value {
    let rest = rest.to_string();
    let rest = rest.trim_end_matches('}');
    // One frame is one line.
    let messages = messages.replace('\n', " ");
    s.send_raw(
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"agent.chat.stream\",\"params\":{rest},\"messages\":{messages}}}}}\n"
        )
        .as_bytes(),
    );
    s.response(&json!(id))
}

/// Asserts the response started a stream and the stream completed.
fn completes(s: &mut Sidecar, r: &Value) {
    let id = r["result"]["streamId"]
        .as_str()
        .unwrap_or_else(|| panic!("no stream: {r}"));
    assert_eq!(finish(s, id, Vec::new()).done["status"], "completed", "{r}");
}

fn scripted_rest(chat: &str) -> Value {
    json!({"provider": "scripted", "model": "m", "script": [{"text": "done"}], "chatId": chat})
}

/// A long history arrives as text and is decoded straight into messages; what a `Value`
/// decode repairs or refuses is still repaired or refused the same way, naming the field.
#[test]
fn history_messages_keep_the_frame_rules_for_surrogates_and_undecodable_numbers() {
    let mut s = Sidecar::start();
    // A lone surrogate inside a message (text cut inside an emoji) becomes U+FFFD.
    let r = stream_raw(
        &mut s,
        1,
        &scripted_rest("c_sur"),
        r#"[{"role":"user","content":"cut \ud83d here"}]"#,
    );
    completes(&mut s, &r);
    let m = messages(&mut s, "c_sur");
    assert_eq!(m[0]["content"], "cut \u{FFFD} here", "{m:?}");

    // A lone surrogate in another member, with a history: both repaired.
    let mut rest = scripted_rest("c_sur2");
    rest["systemPrompt"] = json!("PLACEHOLDER");
    let rest_text = rest.to_string().replace("PLACEHOLDER", "sys \\udc00");
    s.send_raw(
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"agent.chat.stream\",\"params\":{},\"messages\":[{{\"role\":\"user\",\"content\":\"a \\ud800\"}}]}}}}\n",
            rest_text.trim_end_matches('}')
        )
        .as_bytes(),
    );
    let r = s.response(&json!(2));
    completes(&mut s, &r);
    let m = messages(&mut s, "c_sur2");
    assert_eq!(m[0]["content"], "sys \u{FFFD}", "{m:?}");
    assert_eq!(m[1]["content"], "a \u{FFFD}", "{m:?}");

    // A number beyond f64 in a call's arguments: -32602 with the id, naming the field.
    let r = stream_raw(
        &mut s,
        3,
        &scripted_rest("c_big"),
        r#"[{"role":"user","content":"go"},
            {"role":"assistant","content":null,"toolCalls":[{"id":"k","name":"ls","arguments":{"n":1e400}}]},
            {"role":"tool","toolCallId":"k","content":"{}"},
            {"role":"user","content":"again"}]"#,
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["kind"], "invalid_params", "{r}");
    assert_eq!(
        r["error"]["data"]["field"], "params.messages[1].toolCalls[0].arguments.n",
        "{r}"
    );
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("params.messages[1]") && msg.contains("out of range"),
        "{msg}"
    );
    // The sidecar keeps serving.
    assert_eq!(s.ok("system.ping", Value::Null)["status"], "ok");
}

/// Split or not, the params are checked in the same order and a message's content rules
/// (`""` is content, `null` and missing are not) hold.
#[test]
fn history_messages_are_checked_in_order_with_the_content_rules() {
    let mut s = Sidecar::start();
    // A provider that cannot be built is reported before a bad message.
    let r = stream_raw(
        &mut s,
        1,
        &json!({"provider": "bogus", "model": "m"}),
        r#"[{"role":"wizard","content":"x"}]"#,
    );
    let e = invalid(&r);
    assert!(e.contains("bogus") && !e.contains("wizard"), "{e}");
    // Then the message, with the reference's wording.
    let r = stream_raw(
        &mut s,
        2,
        &scripted_rest("c_role"),
        r#"[{"role":"wizard","content":"x"}]"#,
    );
    assert!(invalid(&r).contains("invalid role: 'wizard'"), "{r}");
    // An assistant message with "" content and no calls is accepted; null or missing is not.
    let ok = r#"[{"role":"user","content":"q"},{"role":"assistant","content":""},{"role":"user","content":"q2"}]"#;
    let r = stream_raw(&mut s, 3, &scripted_rest("c_empty"), ok);
    completes(&mut s, &r);
    for (n, bad) in [
        (
            4,
            r#"[{"role":"user","content":"q"},{"role":"assistant","content":null},{"role":"user","content":"q2"}]"#,
        ),
        (
            5,
            r#"[{"role":"user","content":"q"},{"role":"assistant"},{"role":"user","content":"q2"}]"#,
        ),
    ] {
        let r = stream_raw(&mut s, n, &scripted_rest("c_empty2"), bad);
        assert_eq!(
            invalid(&r),
            "messages[1]: content is required on an assistant message without toolCalls"
        );
    }
    // `messages: null` is no messages.
    let r = stream_raw(&mut s, 6, &scripted_rest("c_null"), "null");
    assert!(invalid(&r).contains("messages must not be empty"), "{r}");
    // A `seq` sent back from `agent.session.messages` is accepted and ignored.
    let r = stream_raw(
        &mut s,
        7,
        &scripted_rest("c_seq"),
        r#"[{"seq":41,"role":"user","content":"q"}]"#,
    );
    completes(&mut s, &r);
    let m = messages(&mut s, "c_seq");
    assert_ne!(m[0]["seq"], 41, "{m:?}");
}
