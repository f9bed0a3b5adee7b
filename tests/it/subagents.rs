//! Sub-agents over the real binary's pipes: `delegate_subagent` offered to the model, child
//! agent loops on the same fake OpenAI-compatible provider (chosen per request by
//! `FakeRouter`), their results, notifications, usage, records, profiles, limits and cancel.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Sidecar, pids_with_arg, wait_until};
use crate::support::agents::*;
use crate::support::chat_helpers::*;
use crate::support::fake_router::{self, FakeRouter, RouterReply, RouterRequest};

/// The parent (first user message `user`) answers `first` until it has a tool result, then
/// `PARENT-DONE`; any other request (a child) is answered by `child`.
fn parent_then(
    user: &'static str,
    first: RouterReply,
    child: impl Fn(&Value) -> RouterReply + Send + Sync + 'static,
) -> impl Fn(&Value) -> RouterReply + Send + Sync + 'static {
    move |body: &Value| {
        if fake_router::first_user(body).as_deref() == Some(user) {
            if last_role(body) == "tool" {
                RouterReply::text(PARENT_DONE)
            } else {
                first.clone()
            }
        } else {
            child(body)
        }
    }
}

const ONE_USER: &str = "Find the needle for me.";

/// One delegation of `NEEDLE_TASK` (general-purpose); the parent's requests cost 100 + 10.
fn single_delegation(chat_id: &str) -> (FakeRouter, Sidecar, tempfile::TempDir, Streamed) {
    let server = FakeRouter::start(parent_then(
        ONE_USER,
        RouterReply::tool(DELEGATE, json!({"task": NEEDLE_TASK})).usage(100, 10),
        needle_child,
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, chat_id, ONE_USER, w.path(), json!({})),
    );
    (server, s, w, r)
}

/// Results of the request's `delegate_subagent` calls, in call order, parsed from the tool
/// messages' JSON content.
fn delegation_results(req: &RouterRequest) -> Vec<Value> {
    let msgs = req.messages();
    let ids: Vec<Value> = msgs
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["function"]["name"] == DELEGATE)
        .map(|c| c["id"].clone())
        .collect();
    ids.iter()
        .map(|id| {
            let m = msgs
                .iter()
                .find(|m| m["role"] == "tool" && &m["tool_call_id"] == id)
                .unwrap_or_else(|| panic!("no tool message for {id}: {msgs:?}"));
            let text = fake_router::content_text(m);
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("tool message is not JSON ({e}): {text}"))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------

#[test]
fn delegate_tool_is_offered_by_default_and_removed_by_false() {
    let server = FakeRouter::start(|_| RouterReply::text("hi"));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, "sub_offer_on", "hello", w.path(), json!({})),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let req = &server.requests()[0];
    let t = req
        .tool(DELEGATE)
        .unwrap_or_else(|| panic!("{DELEGATE} not offered: {:?}", req.tool_names()));
    let params = &t["function"]["parameters"];
    assert_eq!(params["type"], "object", "{t}");
    assert_eq!(params["properties"]["task"]["type"], "string", "{t}");
    let required: Vec<&str> = params["required"]
        .as_array()
        .unwrap_or_else(|| panic!("required list: {t}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(required.contains(&"task"), "{t}");
    assert!(!required.contains(&"subagent_type"), "{t}");
    if let Some(st) = params["properties"].get("subagent_type") {
        assert_eq!(st["type"], "string", "{t}");
        let names: Vec<&str> = st["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("subagent_type enum: {t}"))
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(names.contains(&"general-purpose"), "{t}");
    }

    let r = run(
        &mut s,
        chat(
            &server,
            "sub_offer_off",
            "hello",
            w.path(),
            json!({"subagent": false}),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert!(!reqs[1].offers(DELEGATE), "{:?}", reqs[1].tool_names());
    assert!(reqs[1].offers("read_file"), "{:?}", reqs[1].tool_names());

    // The minimal strategy's four tools leave delegation out unless it is asked for.
    for (id, extra, offered) in [
        ("sub_offer_min", json!({"toolsStrategy": "minimal"}), false),
        (
            "sub_offer_min_on",
            json!({"toolsStrategy": "minimal", "subagent": true}),
            true,
        ),
    ] {
        let r = run(&mut s, chat(&server, id, "hello", w.path(), extra));
        assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
        let reqs = server.requests();
        let last = reqs.last().unwrap();
        assert_eq!(
            last.offers(DELEGATE),
            offered,
            "{id}: {:?}",
            last.tool_names()
        );
        assert!(last.offers("bash"), "{id}: {:?}", last.tool_names());
    }
}

#[test]
fn bad_subagent_config_is_refused_naming_the_field() {
    let server = FakeRouter::start(|_| RouterReply::text("hi"));
    let mut s = Sidecar::start();
    let w = ws();
    let cases = [
        (json!({"maxParalel": 2}), "maxParalel"),
        (json!({"maxParallel": "4"}), "maxParallel"),
        (json!({"maxRounds": -1}), "maxRounds"),
        (json!({"maxToolErrors": "x"}), "maxToolErrors"),
        (json!({"toolFilter": "read_file"}), "toolFilter"),
        (json!({"requiredProfiles": "reviewer"}), "requiredProfiles"),
        (json!({"profiles": ["reviewer"]}), "profiles"),
        (
            json!({"profiles": {"reviewer": {"concurrent": "yes"}}}),
            "concurrent",
        ),
        (
            json!({"profiles": {"reviewer": {"colour": "red"}}}),
            "colour",
        ),
        (
            json!({"profiles": {"reviewer": {"systemPrompt": 3}}}),
            "systemPrompt",
        ),
    ];
    for (cfg, field) in cases {
        let r = s.call(
            "agent.chat.stream",
            chat(
                &server,
                "sub_bad",
                "hello",
                w.path(),
                json!({"subagent": cfg.clone()}),
            ),
        );
        assert_eq!(code(&r), -32602, "{cfg} → {r}");
        let msg = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains(field),
            "{cfg}: message does not name {field}: {r}"
        );
    }
    let r = s.call(
        "agent.chat.stream",
        chat(
            &server,
            "sub_bad",
            "hello",
            w.path(),
            json!({"subagent": "yes"}),
        ),
    );
    assert_eq!(code(&r), -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("subagent"),
        "{r}"
    );
    assert!(server.requests().is_empty(), "a provider request was made");
    // A well-formed configuration is accepted.
    let cfg = json!({"toolFilter": ["read_file"], "maxParallel": 2, "maxRounds": 4, "maxToolErrors": 2,
        "profiles": {"reviewer": {"toolFilter": ["read_file"], "model": "fake-model", "maxRounds": 3,
            "concurrent": true, "description": "Reviews", "systemPrompt": "Review."}},
        "requiredProfiles": []});
    let r = run(
        &mut s,
        chat(
            &server,
            "sub_good",
            "hello",
            w.path(),
            json!({"subagent": cfg}),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
}

#[test]
fn profiles_appear_in_the_tool_enum_and_description() {
    let server = FakeRouter::start(|_| RouterReply::text("hi"));
    let mut s = Sidecar::start();
    let w = ws();
    let cfg = json!({"profiles": {
        "reviewer": {"description": "Reviews a diff for bugs"},
        "scout": {"description": "Finds where things are", "concurrent": true}
    }});
    let r = run(
        &mut s,
        chat(
            &server,
            "sub_enum",
            "hello",
            w.path(),
            json!({"subagent": cfg}),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let t = server.requests()[0]
        .tool(DELEGATE)
        .expect("delegate_subagent offered");
    let names: Vec<String> = t["function"]["parameters"]["properties"]["subagent_type"]["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("subagent_type enum: {t}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        sorted(names),
        ["general-purpose", "reviewer", "scout"],
        "{t}"
    );
    let desc = t["function"]["description"].as_str().unwrap_or_default();
    let lines: Vec<&str> = desc.lines().map(str::trim).collect();
    for want in [
        "reviewer: Reviews a diff for bugs",
        "scout: Finds where things are",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(want)),
            "description has no line {want:?}: {desc}"
        );
    }
}

#[test]
fn child_runs_on_the_same_provider_with_the_task_and_real_tools() {
    let (server, _s, _w, r) = single_delegation("sub_child_req");
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let parent = parent_requests(&server, ONE_USER);
    assert_eq!(parent.len(), 2, "parent requests");
    let child = server.requests_for(NEEDLE_TASK);
    assert_eq!(child.len(), 2, "child requests: {:?}", server.requests());
    let first = &child[0];
    // [user (task)] only: no profile system prompt was set.
    let msgs = first.messages();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(fake_router::content_text(&msgs[0]), NEEDLE_TASK);
    assert_eq!(first.system(), None);
    assert_eq!(first.body["model"], "fake-model");
    assert_eq!(first.path, parent[0].path);
    // The parent's tools minus delegate_subagent.
    let want: Vec<String> = parent[0]
        .tool_names()
        .into_iter()
        .filter(|n| n != DELEGATE)
        .collect();
    assert!(want.iter().any(|n| n == "read_file"), "{want:?}");
    assert_eq!(sorted(first.tool_names()), sorted(want));
    // The child's read_file really ran on the turn's cwd.
    let results = child[1].tool_results();
    assert_eq!(results.len(), 1, "{:?}", child[1].messages());
    assert!(results[0].contains("the needle is here"), "{}", results[0]);
    // The child's requests come after the parent's first and before its second.
    assert!(first.arrived >= parent[0].arrived && child[1].arrived <= parent[1].arrived);
}

#[test]
fn parent_gets_the_child_result_as_the_tool_message() {
    let (server, _s, _w, r) = single_delegation("sub_result");
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let parent = parent_requests(&server, ONE_USER);
    assert_eq!(parent.len(), 2);
    let res = delegation_results(&parent[1]);
    assert_eq!(res.len(), 1);
    let v = &res[0];
    assert_eq!(v["success"], true, "{v}");
    let d = &v["data"];
    assert_eq!(d["childId"], "0.1", "{v}");
    assert_eq!(d["recordId"], "sub_result:child:0.1", "{v}");
    assert_eq!(d["profile"], "general-purpose", "{v}");
    assert_eq!(d["status"], "completed", "{v}");
    assert_eq!(d["rounds"], 2, "{v}");
    assert_eq!(
        d["usage"],
        json!({"promptTokens": 14, "completionTokens": 6, "totalTokens": 20, "cachedPromptTokens": 0}),
        "{v}"
    );
    assert_eq!(d["result"], CHILD_ANSWER, "{v}");
    assert!(d["durationMs"].is_u64(), "{v}");
    assert_eq!(r.text(), PARENT_DONE);
}

#[test]
fn agent_child_notifications_bracket_the_child_before_done() {
    let (_server, _s, _w, r) = single_delegation("sub_notes");
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    // `finish` stops at stream.done: everything in r.frames came before it.
    let ev = child_events(&r);
    assert_eq!(ev.len(), 2, "{ev:?}");
    let spawned = &ev[0];
    assert_eq!(spawned["streamId"], r.id.as_str());
    assert_eq!(spawned["kind"], "child_spawned", "{spawned}");
    assert_eq!(spawned["childId"], "0.1");
    assert_eq!(spawned["depth"], 1);
    assert_eq!(spawned["task"], NEEDLE_TASK);
    assert_eq!(spawned["profile"], "general-purpose");
    assert_eq!(spawned["recordId"], "sub_notes:child:0.1");
    let end = &ev[1];
    assert_eq!(end["streamId"], r.id.as_str());
    assert_eq!(end["kind"], "child_completed", "{end}");
    assert_eq!(end["childId"], "0.1");
    assert_eq!(end["depth"], 1);
    assert_eq!(end["status"], "completed");
    // The spawn comes after the parent's delegate_subagent call was announced.
    let pos = |pred: &dyn Fn(&Value) -> bool| r.frames.iter().position(pred).unwrap();
    let call = pos(&|f| f["params"]["toolCall"]["name"] == DELEGATE);
    let spawn = pos(&|f| f["method"] == "agent.child");
    assert!(call < spawn, "{:?}", r.frames);
}

#[test]
fn child_chunks_do_not_reach_the_parent_stream() {
    let (_server, _s, _w, r) = single_delegation("sub_quiet");
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.text(), PARENT_DONE);
    let calls = r.with("toolCall");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["name"], DELEGATE);
    assert_eq!(r.with("toolResult").len(), 1, "{:?}", r.frames);
    for c in r.chunks() {
        let text = c.to_string();
        assert!(
            !text.contains("CHILD-ANSWER") || c.get("toolResult").is_some(),
            "child text on the parent stream: {c}"
        );
        assert!(
            !text.contains("\"read_file\""),
            "child tool chunk on the parent stream: {c}"
        );
    }
    // Only the parent's frames: stream.chunk / agent.child / stream.done.
    for f in &r.frames {
        let m = f["method"].as_str().unwrap();
        assert!(
            ["stream.chunk", "agent.child", "stream.done"].contains(&m),
            "{f}"
        );
    }
}

#[test]
fn tool_filter_narrows_child_tools_and_refuses_the_rest() {
    const USER: &str = "Delegate with a filter.";
    const TASK: &str = "Try to write ran.txt with bash.";
    let server = FakeRouter::start(parent_then(
        USER,
        RouterReply::tool(DELEGATE, json!({"task": TASK})),
        |body| {
            if last_role(body) == "tool" {
                RouterReply::text("child saw the refusal")
            } else {
                RouterReply::tool("bash", json!({"command": "echo ran > ran.txt"}))
            }
        },
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(
            &server,
            "sub_filter",
            USER,
            w.path(),
            json!({"subagent": {"toolFilter": ["read_file"]}}),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let child = server.requests_for(TASK);
    assert_eq!(child.len(), 2, "{:?}", server.requests());
    assert_eq!(child[0].tool_names(), ["read_file"]);
    let results = child[1].tool_results();
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("tool_not_delegated"), "{}", results[0]);
    assert!(
        !w.path().join("ran.txt").exists(),
        "the undelegated tool ran"
    );
    let res = delegation_results(&parent_requests(&server, USER)[1]);
    assert_eq!(res[0]["success"], true, "{}", res[0]);
    assert_eq!(res[0]["data"]["result"], "child saw the refusal");
}

#[test]
fn profile_sets_system_prompt_model_and_tool_filter() {
    const USER: &str = "Get this reviewed.";
    const TASK: &str = "Review the change in notes.txt.";
    let server = FakeRouter::start(parent_then(
        USER,
        RouterReply::tool(DELEGATE, json!({"task": TASK, "subagent_type": "reviewer"})),
        |_| RouterReply::text("LGTM"),
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let cfg = json!({"toolFilter": ["read_file"], "profiles": {"reviewer": {
        "toolFilter": ["write_file", "edit_file"], "model": "review-model",
        "systemPrompt": "You review code.", "description": "Reviews changes"}}});
    let r = run(
        &mut s,
        chat(
            &server,
            "sub_profile",
            USER,
            w.path(),
            json!({"subagent": cfg}),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let child = server.requests_for(TASK);
    assert_eq!(child.len(), 1, "{:?}", server.requests());
    let c = &child[0];
    assert_eq!(c.body["model"], "review-model");
    let msgs = c.messages();
    let shape: Vec<(String, String)> = msgs
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_string(),
                fake_router::content_text(m),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("system".to_string(), "You review code.".to_string()),
            ("user".to_string(), TASK.to_string())
        ]
    );
    assert_eq!(sorted(c.tool_names()), ["edit_file", "write_file"]);
    // The parent kept its own model.
    assert_eq!(
        parent_requests(&server, USER)[0].body["model"],
        "fake-model"
    );
    let res = delegation_results(&parent_requests(&server, USER)[1]);
    assert_eq!(res[0]["data"]["profile"], "reviewer", "{}", res[0]);
    assert_eq!(res[0]["data"]["result"], "LGTM");
    assert_eq!(child_events(&r)[0]["profile"], "reviewer");
}

#[test]
fn unknown_subagent_type_fails_listing_registered_names() {
    const USER: &str = "Use a wizard.";
    const TASK: &str = "Do wizard things.";
    let server = FakeRouter::start(parent_then(
        USER,
        RouterReply::tool(DELEGATE, json!({"task": TASK, "subagent_type": "wizard"})),
        |_| RouterReply::text("should not run"),
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let cfg = json!({"profiles": {"reviewer": {"description": "Reviews"}}});
    let r = run(
        &mut s,
        chat(
            &server,
            "sub_unknown",
            USER,
            w.path(),
            json!({"subagent": cfg}),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert!(server.requests_for(TASK).is_empty(), "a child ran");
    let parent = parent_requests(&server, USER);
    assert_eq!(parent.len(), 2);
    let res = delegation_results(&parent[1]);
    assert_eq!(res[0]["success"], false, "{}", res[0]);
    let err = res[0]["error"].as_str().unwrap_or_default();
    assert!(err.contains("unknown subagent_type"), "{err}");
    assert!(
        err.contains("general-purpose") && err.contains("reviewer"),
        "{err}"
    );
}

#[test]
fn delegations_over_max_parallel_fail_with_budget_error() {
    const USER: &str = "Fan out three ways.";
    let calls = ["Task A", "Task B", "Task C"]
        .iter()
        .map(|t| (DELEGATE, json!({"task": t, "subagent_type": "worker"})))
        .collect();
    let server = FakeRouter::start(parent_then(USER, RouterReply::tool_calls(calls), |body| {
        RouterReply::text(format!(
            "done {}",
            fake_router::first_user(body).unwrap_or_default()
        ))
    }));
    let mut s = Sidecar::start();
    let w = ws();
    let cfg = json!({"maxParallel": 2, "profiles": {"worker": {"concurrent": true, "description": "Works"}}});
    let r = run(
        &mut s,
        chat(
            &server,
            "sub_parallel_cap",
            USER,
            w.path(),
            json!({"subagent": cfg}),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let res = delegation_results(&parent_requests(&server, USER)[1]);
    assert_eq!(res.len(), 3);
    assert_eq!(res[0]["success"], true, "{}", res[0]);
    assert_eq!(res[0]["data"]["result"], "done Task A");
    assert_eq!(res[1]["success"], true, "{}", res[1]);
    assert_eq!(res[1]["data"]["result"], "done Task B");
    assert_eq!(res[2]["success"], false, "{}", res[2]);
    let err = res[2]["error"].as_str().unwrap_or_default();
    assert!(err.contains("orchestration_budget_exceeded"), "{err}");
    assert_eq!(server.requests_for("Task A").len(), 1);
    assert_eq!(server.requests_for("Task B").len(), 1);
    assert!(server.requests_for("Task C").is_empty(), "the overflow ran");
}

/// Two delegations in one parent round to `profile`, children answering after 300 ms.
fn two_slow_children(chat_id: &str, user: &'static str, cfg: Value) -> (FakeRouter, Streamed) {
    let calls = ["Slow task 1", "Slow task 2"]
        .iter()
        .map(|t| (DELEGATE, json!({"task": t, "subagent_type": "worker"})))
        .collect();
    let server = FakeRouter::start(parent_then(user, RouterReply::tool_calls(calls), |_| {
        RouterReply::text("slow answer").delay(Duration::from_millis(300))
    }));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, chat_id, user, w.path(), json!({"subagent": cfg})),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let res = delegation_results(&parent_requests(&server, user)[1]);
    assert_eq!(res.len(), 2);
    assert!(res.iter().all(|v| v["success"] == true), "{res:?}");
    (server, r)
}

fn child_pair(server: &FakeRouter) -> (RouterRequest, RouterRequest) {
    let a = server.requests_for("Slow task 1");
    let b = server.requests_for("Slow task 2");
    assert_eq!((a.len(), b.len()), (1, 1), "{:?}", server.requests());
    (a[0].clone(), b[0].clone())
}

#[test]
fn concurrent_profile_children_overlap() {
    let t = Instant::now();
    let (server, _r) = two_slow_children(
        "sub_concurrent",
        "Run two workers at once.",
        json!({"profiles": {"worker": {"concurrent": true, "description": "Works"}}}),
    );
    let (a, b) = child_pair(&server);
    let (ar, br) = (a.replied.unwrap(), b.replied.unwrap());
    assert!(
        a.arrived < br && b.arrived < ar,
        "children did not overlap: a {:?}..{:?}, b {:?}..{:?}",
        a.arrived - t,
        ar - t,
        b.arrived - t,
        br - t
    );
}

#[test]
fn non_concurrent_children_run_one_after_another() {
    let t = Instant::now();
    let (server, _r) = two_slow_children(
        "sub_serial",
        "Run two workers in turn.",
        json!({"profiles": {"worker": {"description": "Works"}}}),
    );
    let (a, b) = child_pair(&server);
    let (first, second) = if a.arrived <= b.arrived {
        (a, b)
    } else {
        (b, a)
    };
    let fr = first.replied.unwrap();
    assert!(
        second.arrived >= fr,
        "children overlapped: first {:?}..{:?}, second arrived {:?}",
        first.arrived - t,
        fr - t,
        second.arrived - t
    );
}

#[test]
fn required_profile_gets_another_round_until_delegated() {
    const USER: &str = "Fix the bug.";
    const TASK: &str = "Review the fix.";
    let server = FakeRouter::start(|body: &Value| {
        if fake_router::first_user(body).as_deref() != Some(USER) {
            return RouterReply::text("LGTM");
        }
        match fake_router::last_message(body) {
            Some((role, _)) if role == "tool" => RouterReply::text("final after review"),
            Some((role, text)) if role == "user" && text.contains("reviewer") && text != USER => {
                RouterReply::tool(DELEGATE, json!({"task": TASK, "subagent_type": "reviewer"}))
            }
            _ => RouterReply::text("done without review"),
        }
    });
    let mut s = Sidecar::start();
    let w = ws();
    let cfg = json!({"profiles": {"reviewer": {"description": "Reviews"}}, "requiredProfiles": ["reviewer"]});
    let r = run(
        &mut s,
        chat(
            &server,
            "sub_required",
            USER,
            w.path(),
            json!({"subagent": cfg}),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let parent = parent_requests(&server, USER);
    assert_eq!(parent.len(), 3, "{:?}", server.requests());
    let nudges: Vec<String> = parent
        .iter()
        .filter_map(|q| q.last_message())
        .filter(|(role, text)| role == "user" && text != USER)
        .map(|(_, text)| text)
        .collect();
    assert_eq!(nudges.len(), 1, "{nudges:?}");
    assert!(
        nudges[0].contains("reviewer") && nudges[0].contains(DELEGATE),
        "{}",
        nudges[0]
    );
    assert_eq!(
        parent[1].last_message().map(|(r, _)| r).as_deref(),
        Some("user")
    );
    assert_eq!(server.requests_for(TASK).len(), 1);
    assert!(r.text().contains("final after review"), "{}", r.text());
    let ev = child_events(&r);
    assert_eq!(
        ev.first().map(|e| e["profile"].clone()),
        Some(json!("reviewer"))
    );
}

#[test]
fn a_failing_child_is_a_failed_delegation() {
    const USER: &str = "Delegate to a broken child.";
    const TASK: &str = "This child's provider fails.";
    let server = FakeRouter::start(parent_then(
        USER,
        RouterReply::tool(DELEGATE, json!({"task": TASK})),
        |_| RouterReply::http_error(500),
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(&mut s, chat(&server, "sub_fail", USER, w.path(), json!({})));
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert!(!server.requests_for(TASK).is_empty());
    let res = delegation_results(&parent_requests(&server, USER)[1]);
    assert_eq!(res[0]["success"], false, "{}", res[0]);
    assert!(
        !res[0]["error"].as_str().unwrap_or_default().is_empty(),
        "{}",
        res[0]
    );
    let ev = child_events(&r);
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert_eq!(ev[0]["kind"], "child_spawned");
    assert_eq!(ev[1]["kind"], "child_failed", "{}", ev[1]);
    assert_eq!(ev[1]["childId"], "0.1");
    assert_eq!(ev[1]["status"], "failed");
    assert!(ev[1]["error"].is_string(), "{}", ev[1]);
}

#[test]
fn usage_includes_children_and_breaks_them_out() {
    let (_server, _s, _w, r) = single_delegation("sub_usage");
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let u = &r.done["usage"];
    // Parent: (100 + 10) for the delegating round, (10 + 5) for the answer; child: 2 × (7 + 3).
    assert_eq!(u["promptTokens"], 124, "{u}");
    assert_eq!(u["completionTokens"], 21, "{u}");
    assert_eq!(u["totalTokens"], 145, "{u}");
    assert_eq!(u["cachedPromptTokens"], 0, "{u}");
    assert_eq!(
        u["children"],
        json!({"promptTokens": 14, "completionTokens": 6, "totalTokens": 20, "cachedPromptTokens": 0}),
        "{u}"
    );
}

#[test]
fn children_tokens_count_against_budget_tokens() {
    const USER: &str = "Delegate an expensive child.";
    const TASK: &str = "Read notes.txt three times.";
    // Parent alone: 2 × 15 = 30 tokens, under the budget of 100; the child spends 150 per
    // request.
    let server = FakeRouter::start(parent_then(
        USER,
        RouterReply::tool(DELEGATE, json!({"task": TASK})),
        |body| {
            if fake_router::tool_results(body).len() < 3 {
                RouterReply::tool("read_file", json!({"path": "notes.txt"})).usage(100, 50)
            } else {
                RouterReply::text("read it thrice").usage(100, 50)
            }
        },
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(
            &server,
            "sub_budget",
            USER,
            w.path(),
            json!({"budgetTokens": 100}),
        ),
    );
    assert_eq!(r.done["status"], "budget_exhausted", "{:?}", r.frames);
    assert_eq!(r.done["reason"], "token budget exceeded");
    assert_eq!(r.notices("budget_exhausted")[0]["budget"], "tokens");
    assert!(
        r.done["usage"]["totalTokens"].as_u64().unwrap_or(0) > 100,
        "{}",
        r.done
    );
}

#[test]
fn child_record_is_a_node_of_the_parent_tree() {
    let (_server, mut s, _w, r) = single_delegation("sub_tree");
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let parent = r.done["recordId"].as_str().expect("recordId").to_string();
    let child = format!("{parent}:child:0.1");
    assert_eq!(child, "sub_tree:child:0.1");
    let t = s.ok("agent.session.tree", json!({"recordId": parent}));
    assert_eq!(t["tree"]["recordId"], parent.as_str(), "{t}");
    let kids = t["tree"]["children"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let node = kids
        .iter()
        .find(|k| k["recordId"] == child.as_str())
        .unwrap_or_else(|| panic!("no child node {child}: {t}"));
    assert_eq!(node["sourceRecordId"], parent.as_str(), "{node}");
    assert_eq!(node["depth"], 1, "{node}");
    // The child's own transcript: task, read_file call, its result, the answer.
    let m = messages(&mut s, &child);
    assert_eq!(m.first().map(|x| x["role"].clone()), Some(json!("user")));
    assert_eq!(m[0]["content"], NEEDLE_TASK);
    assert!(
        m.iter()
            .any(|x| x["role"] == "assistant" && x["toolCalls"][0]["name"] == "read_file"),
        "{m:?}"
    );
    assert!(m.iter().any(|x| x["role"] == "tool"), "{m:?}");
    let last = m.last().unwrap();
    assert_eq!(
        (last["role"].as_str(), last["content"].as_str()),
        (Some("assistant"), Some(CHILD_ANSWER))
    );
    // The parent's record holds its own conversation, not the child's.
    let pm = messages(&mut s, &parent);
    assert!(
        !pm.iter()
            .any(|x| x["toolCalls"].to_string().contains("read_file")),
        "{pm:?}"
    );
    assert_eq!(pm.last().unwrap()["content"], PARENT_DONE);
}

#[test]
fn cancelling_the_parent_cancels_the_child_and_kills_its_bash() {
    const USER: &str = "Delegate a long command.";
    const TASK: &str = "Run the long command.";
    let mut s = Sidecar::start();
    if !has_bash(&mut s) {
        eprintln!("bash is not registered; cancel during a child's bash not covered here");
        return;
    }
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_micros();
    // A number, so `sleep 30 <marker>` sleeps (GNU sleep sums its arguments).
    let marker = format!("0.{}{:06}", std::process::id(), micros);
    let cmd = format!("sleep 30 {marker}");
    let server = FakeRouter::start(parent_then(
        USER,
        RouterReply::tool(DELEGATE, json!({"task": TASK})),
        move |body| {
            if last_role(body) == "tool" {
                RouterReply::text("slept")
            } else {
                RouterReply::tool("bash", json!({"command": cmd}))
            }
        },
    ));
    let w = ws();
    let id = start(
        &mut s,
        chat(&server, "sub_cancel", USER, w.path(), json!({})),
    );
    let mut frames = until(&mut s, &id, |f| {
        f["method"] == "agent.child" && f["params"]["kind"] == "child_spawned"
    });
    assert!(
        wait_until(Duration::from_secs(20), || !pids_with_arg(&marker)
            .is_empty()),
        "the child's bash never started"
    );
    let t = Instant::now();
    assert_eq!(
        s.ok("agent.chat.cancel", json!({"streamId": id})),
        json!(null)
    );
    frames.extend(until(&mut s, &id, |f| f["method"] == "stream.done"));
    let r = finish(&mut s, &id, frames);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "done took {:?}",
        t.elapsed()
    );
    assert_eq!(r.done["status"], "cancelled", "{:?}", r.frames);
    assert_eq!(r.done["cancelled"], true);
    let ev = child_events(&r);
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert_eq!(ev[0]["kind"], "child_spawned");
    assert_eq!(ev[1]["kind"], "child_cancelled", "{}", ev[1]);
    assert_eq!(ev[1]["childId"], "0.1");
    assert_eq!(ev[1]["status"], "cancelled");
    assert!(
        wait_until(Duration::from_secs(5), || pids_with_arg(&marker).is_empty()),
        "the child's sleep survived the cancel: {:?}",
        pids_with_arg(&marker)
    );
    // The parent made no further request after the cancel.
    assert_eq!(parent_requests(&server, USER).len(), 1);
}

#[test]
fn harness_describe_lists_subagent_as_implemented() {
    let mut s = Sidecar::start();
    let h = s.ok("harness.describe", Value::Null);
    let rows = h["available"]["orchestration"]
        .as_array()
        .unwrap_or_else(|| panic!("{h}"));
    let sub = rows
        .iter()
        .find(|r| r["impl"] == "subagent")
        .unwrap_or_else(|| panic!("no subagent row: {h}"));
    assert_eq!(sub["implemented"], true, "{sub}");
}
