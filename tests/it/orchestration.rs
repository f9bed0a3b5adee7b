//! Orchestration over the real binary's pipes: `orchestration: {enabled: true}` offers the
//! model `agent_spawn` / `agent_wait` / `agent_send` / `agent_close` / `agent_interrupt` /
//! `agent_list`; children run in the background on the same fake OpenAI-compatible provider
//! (chosen per request by `FakeRouter`). The parent's replies are scripted by round: the
//! number of tool messages in its request picks the next tool call, so each parent round
//! calls the next orchestration tool.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Sidecar, pids_with_arg, wait_until};
use crate::support::agents::*;
use crate::support::chat_helpers::*;
use crate::support::fake_router::{self, FakeRouter, RouterReply, RouterRequest};

const SPAWN: &str = "agent_spawn";
const WAIT: &str = "agent_wait";
const SEND: &str = "agent_send";
const CLOSE: &str = "agent_close";
const INTERRUPT: &str = "agent_interrupt";
const LIST: &str = "agent_list";
const ORCH_TOOLS: [&str; 6] = [SPAWN, WAIT, SEND, CLOSE, INTERRUPT, LIST];

/// `agents::chat` with room for the orchestration rounds.
fn chat(server: &FakeRouter, chat_id: &str, user: &str, cwd: &Path, extra: Value) -> Value {
    crate::support::agents::chat(
        server,
        chat_id,
        user,
        cwd,
        merge(json!({"maxRounds": 12}), extra),
    )
}

/// Orchestration on, with `extra` configuration keys.
fn orch(extra: Value) -> Value {
    json!({"orchestration": merge(json!({"enabled": true}), extra)})
}

/// Routes the parent (first user message `user`) by its round, the number of tool messages
/// in its request; any other request (a child) is answered by `child`.
fn script(
    user: &'static str,
    parent: impl Fn(usize, &Value) -> RouterReply + Send + Sync + 'static,
    child: impl Fn(&Value) -> RouterReply + Send + Sync + 'static,
) -> impl Fn(&Value) -> RouterReply + Send + Sync + 'static {
    move |body: &Value| {
        if fake_router::first_user(body).as_deref() == Some(user) {
            parent(fake_router::tool_results(body).len(), body)
        } else {
            child(body)
        }
    }
}

/// Counts a child's model requests, so the parent's script can hold its next tool call until
/// the child's first request is in flight (under load a child may not have reached its
/// provider yet when the parent's next round comes).
#[derive(Clone, Default)]
struct Gate(Arc<AtomicUsize>);

impl Gate {
    fn hit(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    /// Waits (up to 20 s) for `n` requests, then returns `reply`.
    fn after(&self, n: usize, reply: RouterReply) -> RouterReply {
        assert!(
            wait_until(Duration::from_secs(20), || self.0.load(Ordering::SeqCst)
                >= n),
            "the child made fewer than {n} requests"
        );
        reply
    }
}

fn done() -> RouterReply {
    RouterReply::text(PARENT_DONE)
}

/// One tool call of a request's history: its name, arguments and parsed result.
#[derive(Debug, Clone)]
struct Call {
    name: String,
    args: Value,
    result: Value,
}

/// The tool calls in the body's history, in call order, with their results parsed from the
/// tool messages' JSON content (`Null` when a call has no tool message yet).
fn calls(body: &Value) -> Vec<Call> {
    let msgs = fake_router::messages(body);
    msgs.iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|c| {
            let args = c["function"]["arguments"]
                .as_str()
                .and_then(|a| serde_json::from_str(a).ok())
                .unwrap_or(Value::Null);
            let result = msgs
                .iter()
                .find(|m| m["role"] == "tool" && m["tool_call_id"] == c["id"])
                .map(|m| {
                    let text = fake_router::content_text(m);
                    serde_json::from_str(&text)
                        .unwrap_or_else(|e| panic!("tool message is not JSON ({e}): {text}"))
                })
                .unwrap_or(Value::Null);
            Call {
                name: c["function"]["name"].as_str().unwrap_or_default().into(),
                args,
                result,
            }
        })
        .collect()
}

/// The results of the body's calls to `name`, in call order.
fn results_of(body: &Value, name: &str) -> Vec<Value> {
    calls(body)
        .into_iter()
        .filter(|c| c.name == name)
        .map(|c| c.result)
        .collect()
}

/// The childId the `n`-th `agent_spawn` of the body's history returned (a placeholder when
/// it returned none, so the run goes on and the assertions say what went wrong).
fn spawned(body: &Value, n: usize) -> String {
    results_of(body, SPAWN)
        .get(n)
        .and_then(|r| r["data"]["childId"].as_str().map(str::to_string))
        .unwrap_or_else(|| format!("<no childId from spawn {n}>"))
}

/// The parent's last request: its history holds every call and result of the turn.
fn last_parent(server: &FakeRouter, user: &str) -> RouterRequest {
    parent_requests(server, user)
        .pop()
        .unwrap_or_else(|| panic!("no parent request: {}", overview(server)))
}

fn kinds(ev: &[Value]) -> Vec<String> {
    ev.iter()
        .map(|e| e["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A request's messages as (role, text) pairs.
fn shape(req: &RouterRequest) -> Vec<(String, String)> {
    req.messages()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_string(),
                fake_router::content_text(m),
            )
        })
        .collect()
}

/// Every request as one line: its number, its first user message and its messages' shape.
fn overview(server: &FakeRouter) -> String {
    server
        .requests()
        .iter()
        .map(|r| {
            format!(
                "#{} {:?}: {:?}",
                r.n,
                r.first_user().unwrap_or_default(),
                shape(r)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn pair(role: &str, text: &str) -> (String, String) {
    (role.to_string(), text.to_string())
}

fn has_user(req: &RouterRequest, text: &str) -> bool {
    shape(req).contains(&pair("user", text))
}

fn err(v: &Value) -> String {
    v["error"].as_str().unwrap_or_default().to_string()
}

/// `v.data` has each of `want`'s fields with its value (tool results also carry fields
/// every tool adds, such as `durationMs`).
fn assert_fields(v: &Value, want: Value) {
    for (k, x) in want.as_object().unwrap() {
        assert_eq!(&v["data"][k], x, "data.{k}: {v}");
    }
}

fn required(tool: &Value) -> Vec<String> {
    tool["function"]["parameters"]["required"]
        .as_array()
        .unwrap_or_else(|| panic!("required list: {tool}"))
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

// ---------------------------------------------------------------------------------------------

#[test]
fn spawn_returns_at_once_and_wait_gets_the_child_answer() {
    const USER: &str = "Spawn a needle finder and wait for it.";
    let server = FakeRouter::start(script(
        USER,
        |round, _| match round {
            0 => RouterReply::tool(SPAWN, json!({"task": NEEDLE_TASK})),
            1 => RouterReply::tool(WAIT, json!({"childId": "0.1"})),
            _ => done(),
        },
        // The child's first reply waits 600 ms, so a blocking spawn would show.
        |body| {
            let r = needle_child(body);
            if last_role(body) == "tool" {
                r
            } else {
                r.delay(Duration::from_millis(600))
            }
        },
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, "orch_wait", USER, w.path(), orch(json!({}))),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.text(), PARENT_DONE);
    let parent = parent_requests(&server, USER);
    assert_eq!(parent.len(), 3, "{}", overview(&server));

    // The parent is offered the six tools (and still delegate_subagent).
    for t in ORCH_TOOLS.iter().chain([&DELEGATE]) {
        assert!(parent[0].offers(t), "{t}: {:?}", parent[0].tool_names());
    }

    // agent_spawn returned at once, before the child's first reply.
    let spawn = &results_of(&parent[2].body, SPAWN)[0];
    assert_eq!(spawn["success"], true, "{spawn}");
    assert_fields(
        spawn,
        json!({"childId": "0.1", "recordId": "orch_wait:child:0.1", "status": "running"}),
    );
    let child = server.requests_for(NEEDLE_TASK);
    assert_eq!(child.len(), 2, "child requests: {}", overview(&server));
    assert!(
        parent[1].arrived < child[0].replied.unwrap(),
        "the parent's next round came after the child's first reply: spawn blocked"
    );

    // The child: [user: task], the parent's tools minus delegation and orchestration.
    assert_eq!(shape(&child[0]), [pair("user", NEEDLE_TASK)]);
    assert_eq!(child[0].body["model"], "fake-model");
    let want: Vec<String> = parent[0]
        .tool_names()
        .into_iter()
        .filter(|n| n != DELEGATE && !ORCH_TOOLS.contains(&n.as_str()))
        .collect();
    assert!(want.iter().any(|n| n == "read_file"), "{want:?}");
    assert_eq!(sorted(child[0].tool_names()), sorted(want));
    let read = child[1].tool_results();
    assert_eq!(read.len(), 1);
    assert!(read[0].contains("the needle is here"), "{}", read[0]);

    // agent_wait: completed with the child's final answer.
    let wait = &results_of(&parent[2].body, WAIT)[0];
    assert_eq!(wait["success"], true, "{wait}");
    let d = &wait["data"];
    assert_eq!(d["childId"], "0.1", "{wait}");
    assert_eq!(d["status"], "completed", "{wait}");
    assert_eq!(d["result"], CHILD_ANSWER, "{wait}");
    if !d["rounds"].is_null() {
        assert_eq!(d["rounds"], 2, "{wait}");
    }
    let child_usage = json!({"promptTokens": 14, "completionTokens": 6, "totalTokens": 20,
                             "cachedPromptTokens": 0});
    if !d["usage"].is_null() {
        assert_eq!(d["usage"], child_usage, "{wait}");
    }

    // stream.done usage: parent 3 × (10 + 5), child 2 × (7 + 3).
    let u = &r.done["usage"];
    assert_eq!(u["children"], child_usage, "{u}");
    assert_eq!(u["promptTokens"], 44, "{u}");
    assert_eq!(u["completionTokens"], 21, "{u}");
    assert_eq!(u["totalTokens"], 65, "{u}");

    // The child's record holds its conversation.
    let m = messages(&mut s, "orch_wait:child:0.1");
    assert_eq!(
        m.first().map(|x| x["content"].clone()),
        Some(json!(NEEDLE_TASK))
    );
    let last = m.last().unwrap();
    assert_eq!(
        (last["role"].as_str(), last["content"].as_str()),
        (Some("assistant"), Some(CHILD_ANSWER)),
        "{m:?}"
    );
}

#[test]
fn wait_timeout_reports_running_then_a_later_wait_completes() {
    const USER: &str = "Spawn a slow child and poll it.";
    const TASK: &str = "Answer slowly.";
    let server = FakeRouter::start(script(
        USER,
        |round, _| match round {
            0 => RouterReply::tool(SPAWN, json!({"task": TASK})),
            1 => RouterReply::tool(WAIT, json!({"childId": "0.1", "timeoutMs": 100})),
            2 => RouterReply::tool(WAIT, json!({"childId": "0.1"})),
            _ => done(),
        },
        |_| RouterReply::text("slow answer").delay(Duration::from_millis(800)),
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, "orch_timeout", USER, w.path(), orch(json!({}))),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let parent = parent_requests(&server, USER);
    assert_eq!(parent.len(), 4, "{}", overview(&server));
    let waits = results_of(&parent[3].body, WAIT);
    assert_eq!(waits.len(), 2);

    let first = &waits[0];
    assert_eq!(first["success"], true, "{first}");
    assert_eq!(first["data"]["childId"], "0.1", "{first}");
    assert_eq!(first["data"]["status"], "running", "{first}");
    assert!(first["data"]["result"].is_null(), "{first}");
    let child = server.requests_for(TASK);
    assert_eq!(child.len(), 1, "{}", overview(&server));
    // The timed-out wait waited about its timeout, and returned before the child answered.
    let waited = parent[2].arrived - parent[1].completed.unwrap();
    assert!(
        waited >= Duration::from_millis(80),
        "wait returned after {waited:?}"
    );
    assert!(
        child[0].replied.is_none_or(|t| parent[2].arrived < t),
        "the timed-out wait returned only after the child's reply"
    );

    let second = &waits[1];
    assert_eq!(second["success"], true, "{second}");
    assert_eq!(second["data"]["status"], "completed", "{second}");
    assert_eq!(second["data"]["result"], "slow answer", "{second}");
    assert_eq!(
        kinds(&child_events(&r)),
        ["child_spawned", "child_completed"]
    );
}

#[test]
fn send_to_a_running_child_is_a_steer_in_its_next_request() {
    const USER: &str = "Spawn a child and steer it.";
    const TASK: &str = "Read notes.txt, then answer.";
    const STEER: &str = "Also mention omega.";
    let gate = Gate::default();
    let g2 = gate.clone();
    let server = FakeRouter::start(script(
        USER,
        move |round, _| match round {
            0 => RouterReply::tool(SPAWN, json!({"task": TASK})),
            1 => gate.after(
                1,
                RouterReply::tool(SEND, json!({"childId": "0.1", "message": STEER})),
            ),
            2 => RouterReply::tool(WAIT, json!({"childId": "0.1"})),
            _ => done(),
        },
        // The first reply (a tool call) waits 1 s: the steer arrives while it is pending.
        move |body| {
            g2.hit();
            let steered = fake_router::messages(body)
                .iter()
                .any(|m| m["role"] == "user" && fake_router::content_text(m) == STEER);
            if steered {
                RouterReply::text("answer with omega")
            } else if fake_router::tool_results(body).is_empty() {
                RouterReply::tool("read_file", json!({"path": "notes.txt"}))
                    .delay(Duration::from_millis(1000))
            } else {
                RouterReply::text("answer without the steer")
            }
        },
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, "orch_steer", USER, w.path(), orch(json!({}))),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let last = last_parent(&server, USER);
    let send = &results_of(&last.body, SEND)[0];
    assert_eq!(send["success"], true, "{send}");
    assert_fields(
        send,
        json!({"childId": "0.1", "status": "running", "delivered": "steer"}),
    );
    let child = server.requests_for(TASK);
    assert_eq!(child.len(), 2, "{}", overview(&server));
    assert!(!has_user(&child[0], STEER), "{:?}", shape(&child[0]));
    assert!(
        has_user(&child[1], STEER),
        "the steer is not a user message of the child's next request: {:?}",
        shape(&child[1])
    );
    assert_eq!(shape(&child[1])[0], pair("user", TASK));
    let wait = &results_of(&last.body, WAIT)[0];
    assert_eq!(wait["data"]["status"], "completed", "{wait}");
    assert_eq!(wait["data"]["result"], "answer with omega", "{wait}");
    // A steer is not a resume.
    assert_eq!(
        kinds(&child_events(&r)),
        ["child_spawned", "child_completed"]
    );
}

#[test]
fn send_after_completion_resumes_the_child_with_its_old_messages() {
    const USER: &str = "Spawn a child, then ask it a follow-up.";
    const TASK: &str = "Say the first answer.";
    const FOLLOWUP: &str = "Now say the second answer.";
    const FIRST: &str = "FIRST-ANSWER";
    const SECOND: &str = "SECOND-ANSWER";
    let server = FakeRouter::start(script(
        USER,
        |round, _| match round {
            0 => RouterReply::tool(SPAWN, json!({"task": TASK})),
            1 => RouterReply::tool(WAIT, json!({"childId": "0.1"})),
            2 => RouterReply::tool(SEND, json!({"childId": "0.1", "message": FOLLOWUP})),
            3 => RouterReply::tool(WAIT, json!({"childId": "0.1"})),
            _ => done(),
        },
        |body| match fake_router::last_message(body) {
            Some((role, text)) if role == "user" && text == FOLLOWUP => RouterReply::text(SECOND),
            _ => RouterReply::text(FIRST),
        },
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, "orch_resume", USER, w.path(), orch(json!({}))),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let last = last_parent(&server, USER);
    let waits = results_of(&last.body, WAIT);
    assert_eq!(waits.len(), 2, "{:?}", calls(&last.body));
    assert_eq!(waits[0]["data"]["status"], "completed", "{}", waits[0]);
    assert_eq!(waits[0]["data"]["result"], FIRST, "{}", waits[0]);
    let send = &results_of(&last.body, SEND)[0];
    assert_eq!(send["success"], true, "{send}");
    assert_fields(
        send,
        json!({"childId": "0.1", "status": "running", "delivered": "resumed"}),
    );
    let child = server.requests_for(TASK);
    assert_eq!(child.len(), 2, "{}", overview(&server));
    assert_eq!(
        shape(&child[1]),
        [
            pair("user", TASK),
            pair("assistant", FIRST),
            pair("user", FOLLOWUP)
        ]
    );
    assert_eq!(waits[1]["success"], true, "{}", waits[1]);
    assert_eq!(waits[1]["data"]["status"], "completed", "{}", waits[1]);
    assert_eq!(waits[1]["data"]["result"], SECOND, "{}", waits[1]);
    assert_eq!(
        kinds(&child_events(&r)),
        [
            "child_spawned",
            "child_completed",
            "child_resumed",
            "child_completed"
        ]
    );
    // The follow-up turn ran on the child's record.
    let m = messages(&mut s, "orch_resume:child:0.1");
    let texts: Vec<(String, String)> = m
        .iter()
        .map(|x| {
            (
                x["role"].as_str().unwrap_or_default().to_string(),
                x["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        texts,
        [
            pair("user", TASK),
            pair("assistant", FIRST),
            pair("user", FOLLOWUP),
            pair("assistant", SECOND)
        ]
    );
}

#[test]
fn interrupt_keeps_the_child_and_send_resumes_it() {
    const USER: &str = "Spawn a child, interrupt it, resume it.";
    const TASK: &str = "Think for a long time.";
    const RESUME: &str = "Answer now instead.";
    let gate = Gate::default();
    let g2 = gate.clone();
    let server = FakeRouter::start(script(
        USER,
        move |round, _| match round {
            0 => RouterReply::tool(SPAWN, json!({"task": TASK})),
            1 => gate.after(1, RouterReply::tool(INTERRUPT, json!({"childId": "0.1"}))),
            2 => RouterReply::tool(SEND, json!({"childId": "0.1", "message": RESUME})),
            3 => RouterReply::tool(WAIT, json!({"childId": "0.1"})),
            _ => done(),
        },
        move |body| {
            g2.hit();
            let resumed = fake_router::messages(body)
                .iter()
                .any(|m| m["role"] == "user" && fake_router::content_text(m) == RESUME);
            if resumed {
                RouterReply::text("RESUMED-ANSWER")
            } else {
                RouterReply::text("LATE-ANSWER").delay(Duration::from_millis(2000))
            }
        },
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, "orch_interrupt", USER, w.path(), orch(json!({}))),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let parent = parent_requests(&server, USER);
    assert_eq!(parent.len(), 5, "{}", overview(&server));
    let last = &parent[4];
    let int = &results_of(&last.body, INTERRUPT)[0];
    assert_eq!(int["success"], true, "{int}");
    assert_eq!(int["data"]["childId"], "0.1", "{int}");
    assert_eq!(int["data"]["status"], "interrupted", "{int}");
    let child = server.requests_for(TASK);
    assert_eq!(child.len(), 2, "{}", overview(&server));
    assert!(
        child[0].replied.is_none_or(|t| parent[2].arrived < t),
        "agent_interrupt waited for the child's pending reply"
    );
    let send = &results_of(&last.body, SEND)[0];
    assert_eq!(send["success"], true, "{send}");
    assert_fields(
        send,
        json!({"childId": "0.1", "status": "running", "delivered": "resumed"}),
    );
    let resumed = shape(&child[1]);
    assert_eq!(resumed.first(), Some(&pair("user", TASK)), "{resumed:?}");
    assert_eq!(resumed.last(), Some(&pair("user", RESUME)), "{resumed:?}");
    assert!(
        !resumed.iter().any(|(_, t)| t.contains("LATE-ANSWER")),
        "the interrupted reply reached the child: {resumed:?}"
    );
    let wait = &results_of(&last.body, WAIT)[0];
    assert_eq!(wait["data"]["status"], "completed", "{wait}");
    assert_eq!(wait["data"]["result"], "RESUMED-ANSWER", "{wait}");
}

#[test]
fn close_cancels_a_running_child_and_a_later_send_fails() {
    const USER: &str = "Spawn a child and close it.";
    const TASK: &str = "Take your time.";
    let gate = Gate::default();
    let g2 = gate.clone();
    let server = FakeRouter::start(script(
        USER,
        move |round, _| match round {
            0 => RouterReply::tool(SPAWN, json!({"task": TASK})),
            1 => gate.after(1, RouterReply::tool(CLOSE, json!({"childId": "0.1"}))),
            2 => RouterReply::tool(SEND, json!({"childId": "0.1", "message": "still there?"})),
            _ => done(),
        },
        move |_| {
            g2.hit();
            RouterReply::text("too late").delay(Duration::from_millis(2000))
        },
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, "orch_close", USER, w.path(), orch(json!({}))),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let parent = parent_requests(&server, USER);
    assert_eq!(parent.len(), 4, "{}", overview(&server));
    let last = &parent[3];
    let close = &results_of(&last.body, CLOSE)[0];
    assert_eq!(close["success"], true, "{close}");
    assert_eq!(close["data"]["childId"], "0.1", "{close}");
    let status = close["data"]["status"].as_str().unwrap_or_default();
    assert!(
        ["cancelled", "closed"].contains(&status),
        "closing a running child left status {status:?}: {close}"
    );
    let child = server.requests_for(TASK);
    assert_eq!(child.len(), 1, "{}", overview(&server));
    assert!(
        child[0].replied.is_none_or(|t| parent[2].arrived < t),
        "agent_close waited for the child's pending reply"
    );
    let send = &results_of(&last.body, SEND)[0];
    assert_eq!(send["success"], false, "{send}");
    assert!(err(send).contains("closed"), "{send}");
    let ev = child_events(&r);
    assert_eq!(kinds(&ev), ["child_spawned", "child_cancelled"], "{ev:?}");
    assert_eq!(ev[1]["childId"], "0.1");
    assert_eq!(ev[1]["status"], "cancelled", "{}", ev[1]);
}

#[test]
fn list_shows_orchestrated_and_delegated_children() {
    const USER: &str = "Delegate one, spawn one, list them.";
    const D_TASK: &str = "Delegated task.";
    const O_TASK: &str = "Orchestrated task.";
    let server = FakeRouter::start(script(
        USER,
        |round, body| match round {
            0 => RouterReply::tool(DELEGATE, json!({"task": D_TASK})),
            1 => RouterReply::tool(SPAWN, json!({"task": O_TASK})),
            2 => RouterReply::tool(LIST, json!({})),
            3 => RouterReply::tool(WAIT, json!({"childId": spawned(body, 0)})),
            _ => done(),
        },
        |body| {
            if fake_router::first_user(body).as_deref() == Some(O_TASK) {
                RouterReply::text("O done").delay(Duration::from_millis(1500))
            } else {
                RouterReply::text("D done")
            }
        },
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, "orch_list", USER, w.path(), orch(json!({}))),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let last = last_parent(&server, USER);
    let del = &results_of(&last.body, DELEGATE)[0];
    assert_eq!(del["success"], true, "{del}");
    let spawn = &results_of(&last.body, SPAWN)[0];
    assert_eq!(spawn["success"], true, "{spawn}");
    let (d_id, o_id) = (
        del["data"]["childId"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        spawn["data"]["childId"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    );
    assert!(!d_id.is_empty() && !o_id.is_empty(), "{del} {spawn}");
    assert_ne!(d_id, o_id, "two children share an id");
    assert_eq!(
        spawn["data"]["recordId"],
        format!("orch_list:child:{o_id}"),
        "{spawn}"
    );

    let list = &results_of(&last.body, LIST)[0];
    assert_eq!(list["success"], true, "{list}");
    let kids = list["data"]["children"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no children list: {list}"));
    assert_eq!(kids.len(), 2, "{list}");
    let find = |task: &str| {
        kids.iter()
            .find(|k| k["task"] == task)
            .cloned()
            .unwrap_or_else(|| panic!("no child for {task:?}: {list}"))
    };
    let d = find(D_TASK);
    assert_eq!(d["childId"], d_id.as_str(), "{d}");
    assert_eq!(d["profile"], "general-purpose", "{d}");
    assert_eq!(d["status"], "completed", "{d}");
    assert_eq!(d["depth"], 1, "{d}");
    assert_eq!(d["recordId"], format!("orch_list:child:{d_id}"), "{d}");
    let o = find(O_TASK);
    assert_eq!(o["childId"], o_id.as_str(), "{o}");
    assert_eq!(o["profile"], "orchestrated", "{o}");
    assert_eq!(o["status"], "running", "{o}");
    assert_eq!(o["depth"], 1, "{o}");
    assert_eq!(o["recordId"], format!("orch_list:child:{o_id}"), "{o}");

    let wait = &results_of(&last.body, WAIT)[0];
    assert_eq!(wait["data"]["result"], "O done", "{wait}");
    let ev = child_events(&r);
    let spawned_profiles: Vec<(String, String)> = ev
        .iter()
        .filter(|e| e["kind"] == "child_spawned")
        .map(|e| {
            (
                e["task"].as_str().unwrap_or_default().to_string(),
                e["profile"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        spawned_profiles,
        [
            pair(D_TASK, "general-purpose"),
            pair(O_TASK, "orchestrated")
        ]
    );
}

#[test]
fn unknown_child_id_fails_naming_the_id() {
    const USER: &str = "Talk to a child that does not exist.";
    const ID: &str = "9.9";
    let server = FakeRouter::start(script(
        USER,
        |round, _| match round {
            0 => RouterReply::tool_calls(vec![
                (WAIT, json!({"childId": ID})),
                (SEND, json!({"childId": ID, "message": "hello"})),
                (CLOSE, json!({"childId": ID})),
                (INTERRUPT, json!({"childId": ID})),
            ]),
            _ => done(),
        },
        |_| RouterReply::text("no child should run"),
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, "orch_unknown", USER, w.path(), orch(json!({}))),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let parent = parent_requests(&server, USER);
    assert_eq!(parent.len(), 2, "{}", overview(&server));
    assert_eq!(server.requests().len(), 2, "a child ran");
    let cs = calls(&parent[1].body);
    assert_eq!(cs.len(), 4, "{cs:?}");
    for c in cs {
        assert_eq!(c.args["childId"], ID, "{c:?}");
        assert_eq!(c.result["success"], false, "{}: {}", c.name, c.result);
        assert!(
            err(&c.result).contains(ID),
            "{} error does not name {ID}: {}",
            c.name,
            c.result
        );
    }
    assert!(child_events(&r).is_empty(), "{:?}", child_events(&r));
}

#[test]
fn spawn_over_max_parallel_fails_with_budget_error() {
    const USER: &str = "Spawn past the budget.";
    const TASK_A: &str = "Slow task A.";
    const TASK_B: &str = "Overflow task B.";
    const TASK_C: &str = "Later task C.";
    let server = FakeRouter::start(script(
        USER,
        |round, body| match round {
            0 => RouterReply::tool(SPAWN, json!({"task": TASK_A})),
            1 => RouterReply::tool(SPAWN, json!({"task": TASK_B})),
            2 => RouterReply::tool(WAIT, json!({"childId": spawned(body, 0)})),
            3 => RouterReply::tool(SPAWN, json!({"task": TASK_C})),
            4 => RouterReply::tool(WAIT, json!({"childId": spawned(body, 2)})),
            _ => done(),
        },
        |body| match fake_router::first_user(body).as_deref() {
            Some(TASK_A) => RouterReply::text("A done").delay(Duration::from_millis(1000)),
            Some(t) => RouterReply::text(format!("done: {t}")),
            None => RouterReply::text("?"),
        },
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(
            &server,
            "orch_budget",
            USER,
            w.path(),
            orch(json!({"maxParallel": 1})),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let last = last_parent(&server, USER);
    let spawns = results_of(&last.body, SPAWN);
    assert_eq!(spawns.len(), 3, "{:?}", calls(&last.body));
    assert_eq!(spawns[0]["success"], true, "{}", spawns[0]);
    assert_eq!(spawns[1]["success"], false, "{}", spawns[1]);
    assert!(
        err(&spawns[1]).contains("orchestration_budget_exceeded"),
        "{}",
        spawns[1]
    );
    // Once A finished, its slot is free again.
    assert_eq!(spawns[2]["success"], true, "{}", spawns[2]);
    let waits = results_of(&last.body, WAIT);
    assert_eq!(waits[0]["data"]["result"], "A done", "{}", waits[0]);
    assert_eq!(
        waits[1]["data"]["result"],
        format!("done: {TASK_C}"),
        "{}",
        waits[1]
    );
    assert!(server.requests_for(TASK_B).is_empty(), "the overflow ran");
    assert_eq!(server.requests_for(TASK_C).len(), 1);
}

#[test]
fn turn_end_cancels_running_children_and_kills_their_bash() {
    const USER: &str = "Spawn a long command and leave.";
    const TASK: &str = "Run the long command.";
    let mut s = Sidecar::start();
    if !has_bash(&mut s) {
        eprintln!("bash is not registered; a running child's bash at turn end not covered here");
        return;
    }
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_micros();
    // A number, so `sleep 30 <marker>` sleeps (GNU sleep sums its arguments).
    let marker = format!("0.{}{:06}", std::process::id(), micros);
    let cmd = format!("sleep 30 {marker}");
    let m2 = marker.clone();
    let server = FakeRouter::start(script(
        USER,
        move |round, _| match round {
            0 => RouterReply::tool(SPAWN, json!({"task": TASK})),
            // The parent ends its turn once the child's sleep runs.
            _ => {
                wait_until(Duration::from_secs(20), || !pids_with_arg(&m2).is_empty());
                done()
            }
        },
        move |body| {
            if last_role(body) == "tool" {
                RouterReply::text("slept")
            } else {
                RouterReply::tool("bash", json!({"command": cmd}))
            }
        },
    ));
    let w = ws();
    let t = Instant::now();
    let r = run(
        &mut s,
        chat(&server, "orch_turn_end", USER, w.path(), orch(json!({}))),
    );
    let alive = pids_with_arg(&marker);
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "the turn took {:?}",
        t.elapsed()
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.text(), PARENT_DONE);
    let child = server.requests_for(TASK);
    assert!(!child.is_empty(), "{}", overview(&server));
    assert!(
        child.iter().all(|c| c.tool_results().is_empty()),
        "the child's bash finished instead of being cancelled"
    );
    let ev = child_events(&r);
    assert_eq!(kinds(&ev), ["child_spawned", "child_cancelled"], "{ev:?}");
    assert_eq!(ev[1]["childId"], "0.1");
    assert_eq!(ev[1]["status"], "cancelled", "{}", ev[1]);
    let pos = |kind: &str| {
        r.frames
            .iter()
            .position(|f| f["method"] == "agent.child" && f["params"]["kind"] == kind)
            .unwrap()
    };
    let done_at = r
        .frames
        .iter()
        .position(|f| f["method"] == "stream.done")
        .unwrap();
    assert!(pos("child_cancelled") < done_at);
    // Gone at stream.done (a second's grace for the kernel to finish the SIGKILLed ones).
    assert!(
        alive.is_empty()
            || wait_until(Duration::from_secs(1), || pids_with_arg(&marker).is_empty()),
        "the child's sleep survived the parent's turn: {:?}",
        pids_with_arg(&marker)
    );
}

#[test]
fn bad_orchestration_config_is_refused_and_disabled_offers_no_agent_tools() {
    let server = FakeRouter::start(|_| RouterReply::text("hi"));
    let mut s = Sidecar::start();
    let w = ws();
    let cases = [
        (json!({"enabled": true, "maxDepht": 2}), "maxDepht"),
        (json!({"enabled": true, "maxDepth": 0}), "maxDepth"),
        (json!({"enabled": true, "maxDepth": 5}), "maxDepth"),
        (json!({"enabled": true, "maxDepth": "2"}), "maxDepth"),
        (json!({"enabled": true, "maxParallel": 0}), "maxParallel"),
        (json!({"enabled": true, "maxParallel": 65}), "maxParallel"),
        (json!({"enabled": true, "maxParallel": "4"}), "maxParallel"),
        (
            json!({"enabled": true, "childMaxRounds": "8"}),
            "childMaxRounds",
        ),
        (
            json!({"enabled": true, "childMaxRounds": -1}),
            "childMaxRounds",
        ),
        (json!({"enabled": "yes"}), "enabled"),
        (json!("on"), "orchestration"),
        (json!([true]), "orchestration"),
    ];
    for (cfg, field) in cases {
        let r = s.call(
            "agent.chat.stream",
            chat(
                &server,
                "orch_bad",
                "hello",
                w.path(),
                json!({"orchestration": cfg.clone()}),
            ),
        );
        assert_eq!(code(&r), -32602, "{cfg} → {r}");
        let msg = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains(field),
            "{cfg}: message does not name {field}: {r}"
        );
    }
    assert!(server.requests().is_empty(), "a provider request was made");

    // Without enabled: true nothing is added.
    for (i, cfg) in [json!({}), json!({"enabled": false})]
        .into_iter()
        .enumerate()
    {
        let r = run(
            &mut s,
            chat(
                &server,
                &format!("orch_off_{i}"),
                "hello",
                w.path(),
                json!({"orchestration": cfg.clone()}),
            ),
        );
        assert_eq!(r.done["status"], "completed", "{cfg}: {:?}", r.frames);
        let req = server.requests().pop().unwrap();
        let names = req.tool_names();
        assert!(
            !names.iter().any(|n| n.starts_with("agent_")),
            "{cfg}: {names:?}"
        );
        assert!(req.offers("read_file") && req.offers(DELEGATE), "{names:?}");
    }

    // Enabled (with every key in range): the six tools, with their required arguments.
    let r = run(
        &mut s,
        chat(
            &server,
            "orch_on",
            "hello",
            w.path(),
            orch(json!({"maxDepth": 4, "maxParallel": 64, "childMaxRounds": 3})),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let req = server.requests().pop().unwrap();
    for t in ORCH_TOOLS {
        assert!(req.offers(t), "{t}: {:?}", req.tool_names());
    }
    let spawn = req.tool(SPAWN).unwrap();
    assert_eq!(
        spawn["function"]["parameters"]["properties"]["task"]["type"], "string",
        "{spawn}"
    );
    assert_eq!(
        spawn["function"]["parameters"]["properties"]["toolFilter"]["type"], "array",
        "{spawn}"
    );
    assert_eq!(required(&spawn), ["task"], "{spawn}");
    assert_eq!(required(&req.tool(WAIT).unwrap()), ["childId"]);
    assert_eq!(
        sorted(required(&req.tool(SEND).unwrap())),
        ["childId", "message"]
    );
    for t in [CLOSE, INTERRUPT] {
        assert_eq!(required(&req.tool(t).unwrap()), ["childId"], "{t}");
    }
}

#[test]
fn agent_child_notifications_follow_each_child_in_order() {
    const USER: &str = "Two children, one interrupted.";
    const TASK_A: &str = "Quick task A.";
    const TASK_B: &str = "Slow task B.";
    const RESUME: &str = "Finish B now.";
    let gate = Gate::default();
    let g2 = gate.clone();
    let server = FakeRouter::start(script(
        USER,
        move |round, body| match round {
            0 => RouterReply::tool(SPAWN, json!({"task": TASK_A})),
            1 => RouterReply::tool(WAIT, json!({"childId": spawned(body, 0)})),
            2 => RouterReply::tool(SPAWN, json!({"task": TASK_B})),
            3 => gate.after(
                1,
                RouterReply::tool(INTERRUPT, json!({"childId": spawned(body, 1)})),
            ),
            4 => RouterReply::tool(
                SEND,
                json!({"childId": spawned(body, 1), "message": RESUME}),
            ),
            5 => RouterReply::tool(WAIT, json!({"childId": spawned(body, 1)})),
            _ => done(),
        },
        move |body| {
            let resumed = fake_router::messages(body)
                .iter()
                .any(|m| m["role"] == "user" && fake_router::content_text(m) == RESUME);
            match fake_router::first_user(body).as_deref() {
                Some(TASK_A) => RouterReply::text("A done"),
                _ if resumed => RouterReply::text("B done"),
                _ => {
                    g2.hit();
                    RouterReply::text("B late").delay(Duration::from_millis(2000))
                }
            }
        },
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, "orch_events", USER, w.path(), orch(json!({}))),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let last = last_parent(&server, USER);
    let ids: Vec<String> = (0..2).map(|n| spawned(&last.body, n)).collect();
    assert_ne!(ids[0], ids[1]);
    let ev = child_events(&r);
    let seq: Vec<(String, String)> = ev
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap_or_default().to_string(),
                e["childId"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        seq,
        [
            pair("child_spawned", &ids[0]),
            pair("child_completed", &ids[0]),
            pair("child_spawned", &ids[1]),
            pair("child_interrupted", &ids[1]),
            pair("child_resumed", &ids[1]),
            pair("child_completed", &ids[1]),
        ],
        "{ev:?}"
    );
    for e in &ev {
        assert_eq!(e["streamId"], r.id.as_str(), "{e}");
        assert_eq!(e["depth"], 1, "{e}");
    }
    for (e, task, id) in [(&ev[0], TASK_A, &ids[0]), (&ev[2], TASK_B, &ids[1])] {
        assert_eq!(e["task"], task, "{e}");
        assert_eq!(e["profile"], "orchestrated", "{e}");
        assert_eq!(e["recordId"], format!("orch_events:child:{id}"), "{e}");
    }
    assert_eq!(ev[1]["status"], "completed", "{}", ev[1]);
    assert_eq!(ev[5]["status"], "completed", "{}", ev[5]);
    // Each spawn notification follows its agent_spawn call's announcement.
    let call_at = r
        .frames
        .iter()
        .position(|f| f["params"]["toolCall"]["name"] == SPAWN)
        .unwrap_or_else(|| panic!("no agent_spawn toolCall chunk: {:?}", r.frames));
    let spawn_at = r
        .frames
        .iter()
        .position(|f| f["method"] == "agent.child")
        .unwrap();
    assert!(call_at < spawn_at, "{:?}", r.frames);
    let wait = results_of(&last.body, WAIT);
    assert_eq!(wait[1]["data"]["result"], "B done", "{}", wait[1]);
}

#[test]
fn max_depth_two_gives_children_the_agent_tools_and_tool_filter_narrows() {
    const USER: &str = "Spawn a nested-capable child and a narrow one.";
    const TASK_A: &str = "Child with the agent tools.";
    const TASK_B: &str = "Child with read_file only.";
    let server = FakeRouter::start(script(
        USER,
        |round, body| match round {
            0 => RouterReply::tool(SPAWN, json!({"task": TASK_A})),
            1 => RouterReply::tool(WAIT, json!({"childId": spawned(body, 0)})),
            2 => RouterReply::tool(SPAWN, json!({"task": TASK_B, "toolFilter": ["read_file"]})),
            3 => RouterReply::tool(WAIT, json!({"childId": spawned(body, 1)})),
            _ => done(),
        },
        |_| RouterReply::text("ok"),
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(
            &server,
            "orch_depth",
            USER,
            w.path(),
            orch(json!({"maxDepth": 2})),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let parent = parent_requests(&server, USER);
    let a = server.requests_for(TASK_A);
    assert_eq!(a.len(), 1, "{}", overview(&server));
    // Depth 1 < maxDepth 2: the child keeps the six tools; never delegate_subagent.
    let want: Vec<String> = parent[0]
        .tool_names()
        .into_iter()
        .filter(|n| n != DELEGATE)
        .collect();
    assert_eq!(sorted(a[0].tool_names()), sorted(want));
    for t in ORCH_TOOLS {
        assert!(a[0].offers(t), "{t}: {:?}", a[0].tool_names());
    }
    let b = server.requests_for(TASK_B);
    assert_eq!(b.len(), 1, "{}", overview(&server));
    assert_eq!(b[0].tool_names(), ["read_file"]);
    let waits = results_of(&parent.last().unwrap().body, WAIT);
    assert_eq!(waits.len(), 2);
    assert!(
        waits.iter().all(|v| v["data"]["result"] == "ok"),
        "{waits:?}"
    );
}

#[test]
fn child_max_rounds_bounds_a_child_and_wait_reports_it() {
    const USER: &str = "Spawn a child that never stops calling tools.";
    const TASK: &str = "Read notes.txt forever.";
    let server = FakeRouter::start(script(
        USER,
        |round, _| match round {
            0 => RouterReply::tool(SPAWN, json!({"task": TASK})),
            1 => RouterReply::tool(WAIT, json!({"childId": "0.1"})),
            _ => done(),
        },
        |_| RouterReply::tool("read_file", json!({"path": "notes.txt"})),
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(
            &server,
            "orch_rounds",
            USER,
            w.path(),
            orch(json!({"childMaxRounds": 2})),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    // Exactly childMaxRounds model requests from the child.
    assert_eq!(server.requests_for(TASK).len(), 2, "{}", overview(&server));
    let waited = &results_of(&last_parent(&server, USER).body, WAIT)[0];
    assert_eq!(waited["data"]["status"], "budget_exhausted", "{waited}");
    assert!(
        waited["data"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("maxRounds=2"),
        "{waited}"
    );
    let ev = child_events(&r);
    assert_eq!(kinds(&ev), ["child_spawned", "child_failed"], "{ev:?}");
    assert_eq!(ev[1]["status"], "budget_exhausted", "{}", ev[1]);
}

#[test]
fn spawn_refuses_a_malformed_tool_filter() {
    const USER: &str = "Spawn with a bad filter.";
    let server = FakeRouter::start(script(
        USER,
        |round, _| match round {
            0 => RouterReply::tool(
                SPAWN,
                json!({"task": "anything", "toolFilter": ["read_file", "no such tool!"]}),
            ),
            1 => RouterReply::tool(SPAWN, json!({"task": "anything", "toolFilter": [DELEGATE]})),
            _ => done(),
        },
        |_| done(),
    ));
    let mut s = Sidecar::start();
    let w = ws();
    let r = run(
        &mut s,
        chat(&server, "orch_filter", USER, w.path(), orch(json!({}))),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let last = last_parent(&server, USER);
    let results = results_of(&last.body, SPAWN);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        err(&results[0]).contains("'no such tool!' is not a tool name"),
        "{}",
        results[0]
    );
    assert!(err(&results[1]).contains("one level"), "{}", results[1]);
    assert!(child_events(&r).is_empty(), "no child ran");
}
