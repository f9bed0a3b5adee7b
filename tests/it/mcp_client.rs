//! The MCP client side over the real binary's pipes: a turn's own `mcp` servers (real ones:
//! `mcp-server-time`, `server-everything`; and `tests/fixtures/mcp/fake_server.py` on the
//! official Python SDK), the configured `mcp_servers` (stdio and Streamable HTTP), `mcp.list`,
//! failures, cancel, process cleanup, the deferred tier and `tools/list_changed`. The model
//! is a fake OpenAI server that plays a list of replies and records what it was sent.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, Opts, Sidecar, run_once, sigkill, wait_until, write_file};
use crate::support::chat_helpers::*;
use crate::support::fake_router::{self, FakeRouter, RouterReply};
use crate::support::host::descriptor;
use crate::support::mcp_deps::{mcp_dir, mcp_venv_python};

/// How long a server may take to go once its turn (or the sidecar) ends: stdin closed, 1 s,
/// TERM, 2 s, KILL, with room to spare.
const GONE: Duration = Duration::from_secs(6);

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/fake_server.py")
}

/// A stdio entry running the fake server; `env` is passed to it.
fn fake(name: &str, env: Value) -> Value {
    json!({"name": name, "command": mcp_venv_python(), "args": [fixture()], "env": env})
}

/// The fake server under a shell that ignores SIGTERM and, once the server exits (at stdin
/// EOF), stays behind as `sleep 60` (still ignoring TERM) in the same process group: only
/// the KILL of the group ends it. Writes its own pid to `sh_pid`.
fn stubborn(name: &str, pid_file: &Path, sh_pid: &Path) -> Value {
    json!({"name": name, "command": "sh",
           "args": ["-c", "trap '' TERM; echo $$ > \"$1.tmp\"; mv \"$1.tmp\" \"$1\"; \"$2\" \"$3\"; exec sleep 60",
                    "sh", sh_pid, mcp_venv_python(), fixture()],
           "env": {"FAKE_PID_FILE": pid_file}})
}

/// A fake OpenAI server playing `replies` in order within a turn: request k (k assistant
/// messages in it) gets `replies[k]`, and a final text answer past the end.
fn model(replies: Vec<RouterReply>) -> FakeRouter {
    FakeRouter::start(move |body| {
        let k = fake_router::messages(body)
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        replies
            .get(k)
            .cloned()
            .unwrap_or_else(|| RouterReply::text("DONE"))
    })
}

/// `agent.chat.stream` params on `m`, with `extra` merged in.
fn turn(m: &FakeRouter, cwd: &Path, extra: Value) -> Value {
    merge(
        json!({"provider": "openai_compat", "model": "fake-model", "baseUrl": m.base_url(),
               "apiKey": "k", "cwd": cwd, "maxRounds": 8,
               "messages": [{"role": "user", "content": "go"}]}),
        extra,
    )
}

/// The tool messages the model got in its last request, parsed (the full results, in order).
fn tool_messages(m: &FakeRouter) -> Vec<Value> {
    let reqs = m.requests();
    let last = reqs.last().expect("the model got no request");
    last.tool_results()
        .iter()
        .map(|t| {
            serde_json::from_str(t)
                .unwrap_or_else(|e| panic!("tool message is not JSON ({e}): {t}"))
        })
        .collect()
}

fn assert_ok(r: &Streamed) {
    assert_eq!(r.done["ok"], true, "the turn did not complete: {}", r.done);
}

/// The `mcp_mounted` notice's servers (exactly one notice).
fn mounted(r: &Streamed) -> Vec<Value> {
    let n = r.notices("mcp_mounted");
    assert_eq!(n.len(), 1, "one mcp_mounted notice: {:?}", r.chunks());
    n[0]["servers"].as_array().unwrap().clone()
}

/// Whether `pid` is a live process (a zombie counts as gone).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

/// Waits for the fake server's pid file and reads it.
fn read_pid(path: &Path) -> i32 {
    assert!(
        wait_until(common::WAIT, || path.is_file()),
        "{} was never written",
        path.display()
    );
    let text = std::fs::read_to_string(path).unwrap();
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("pid file {text:?}: {e}"))
}

/// Polls until `pid` is gone (checked alive before the action that should end it).
fn assert_gone(pid: i32, what: &str) {
    let t = Instant::now();
    assert!(
        wait_until(GONE, || !alive(pid)),
        "{what}: MCP server pid {pid} still alive after {GONE:?}"
    );
    eprintln!("{what}: pid {pid} gone after {:?}", t.elapsed());
}

fn tool_result<'a>(r: &'a Streamed, name: &str) -> Vec<&'a Value> {
    r.with("toolResult")
        .into_iter()
        .filter(|t| t["name"] == name)
        .collect()
}

// ---------------------------------------------------------------------------------------------

#[test]
fn time_server_answers_and_reports_its_errors() {
    let time = mcp_dir().join("venv/bin/mcp-server-time");
    let m = model(vec![
        RouterReply::tool(
            "mcp__time__get_current_time",
            json!({"timezone": "Europe/London"}),
        ),
        RouterReply::tool(
            "mcp__time__get_current_time",
            json!({"timezone": "Not/AZone"}),
        ),
    ]);
    let mut s = Sidecar::start();
    let w = tempfile::tempdir().unwrap();
    let mcp = json!([{"name": "time", "command": time, "args": ["--local-timezone", "UTC"]}]);
    let r = run(&mut s, turn(&m, w.path(), json!({"mcp": mcp})));
    assert_ok(&r);
    let servers = mounted(&r);
    assert_eq!(servers.len(), 1, "{servers:?}");
    assert_eq!(servers[0]["name"], "time");
    assert_eq!(servers[0]["exposure"], "direct");
    assert!(servers[0]["tools"].as_u64().unwrap() >= 2, "{servers:?}");
    // The model was offered the server's tools, with their schemas.
    let first = &m.requests()[0];
    let t = first
        .tool("mcp__time__get_current_time")
        .unwrap_or_else(|| panic!("not offered: {:?}", first.tool_names()));
    assert!(
        t["function"]["parameters"]["properties"]["timezone"].is_object(),
        "{t}"
    );
    assert!(first.offers("mcp__time__convert_time"));

    let chunks = tool_result(&r, "mcp__time__get_current_time");
    assert_eq!(chunks.len(), 2, "{chunks:?}");
    assert_eq!(chunks[0]["success"], true, "{}", chunks[0]);
    assert_eq!(chunks[1]["success"], false, "{}", chunks[1]);
    let full = tool_messages(&m);
    assert_eq!(full.len(), 2, "{full:?}");
    let ok = &full[0];
    assert_eq!(ok["success"], true, "{ok}");
    assert_eq!(ok["data"]["structuredContent"]["timezone"], "Europe/London");
    assert!(
        ok["data"]["text"]
            .as_str()
            .unwrap()
            .contains("Europe/London"),
        "{ok}"
    );
    assert_eq!(ok["data"]["server"], "time");
    assert_eq!(ok["data"]["tool"], "get_current_time");
    assert!(ok["data"]["durationMs"].is_u64(), "{ok}");
    let bad = &full[1];
    assert_eq!(bad["success"], false, "{bad}");
    let err = bad["error"].as_str().unwrap();
    assert!(
        err.contains("Invalid timezone") && err.contains("Not/AZone"),
        "{bad}"
    );
    assert_eq!(chunks[1]["error"], bad["error"]);
}

#[test]
fn everything_server_image_block_reaches_the_model() {
    let bin = mcp_dir().join("npm/node_modules/.bin/mcp-server-everything");
    let m = model(vec![RouterReply::tool(
        "mcp__everything__get-tiny-image",
        json!({}),
    )]);
    let mut s = Sidecar::start();
    let w = tempfile::tempdir().unwrap();
    let mcp = json!([{"name": "everything", "command": bin}]);
    let r = run(&mut s, turn(&m, w.path(), json!({"mcp": mcp})));
    assert_ok(&r);
    assert_eq!(mounted(&r)[0]["name"], "everything");
    let full = tool_messages(&m);
    assert_eq!(full.len(), 1, "{full:?}");
    let d = &full[0]["data"];
    assert_eq!(full[0]["success"], true, "{}", full[0]);
    let images: Vec<&Value> = d["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content blocks: {d}"))
        .iter()
        .filter(|b| b["type"] == "image")
        .collect();
    assert_eq!(images.len(), 1, "{d}");
    assert_eq!(images[0]["mimeType"], "image/png");
    assert!(images[0]["bytes"].as_u64().unwrap() > 0, "{}", images[0]);
    // The image goes to the model as an image (as view_image's do), not as base64 text.
    assert_eq!(images[0]["shownAsImage"], true, "{}", images[0]);
    assert!(images[0].get("data").is_none(), "{}", images[0]);
    let reqs = m.requests();
    let last = reqs.last().unwrap();
    let parts: Vec<Value> = last
        .messages()
        .into_iter()
        .filter(|msg| msg["role"] == "user")
        .filter_map(|msg| msg["content"].as_array().cloned())
        .flatten()
        .collect();
    let url = parts
        .iter()
        .find(|p| p["type"] == "image_url")
        .and_then(|p| p["image_url"]["url"].as_str())
        .unwrap_or_else(|| panic!("no image part in the next request: {parts:?}"));
    assert!(url.starts_with("data:image/png;base64,"), "{url}");
    assert!(
        parts.iter().any(|p| p["text"]
            .as_str()
            .is_some_and(|t| t.contains("mcp__everything__get-tiny-image"))),
        "{parts:?}"
    );
    // The text blocks around the image are joined.
    let text = d["text"].as_str().unwrap();
    assert!(text.contains('\n') && text.contains("image"), "{text}");
}

#[test]
fn malformed_entries_are_refused_before_the_model_is_called() {
    let m = model(vec![RouterReply::text("never")]);
    let mut s = Sidecar::start();
    let w = tempfile::tempdir().unwrap();
    let pid_file = w.path().join("fake.pid");
    let good = fake("good", json!({"FAKE_PID_FILE": pid_file}));
    let too_many: Vec<Value> = (0..17)
        .map(|i| json!({"name": format!("s{i}"), "command": "x"}))
        .collect();
    let cases = [
        (json!({}), "mcp must be an array"),
        (json!([{}]), "mcp[0].command is required"),
        (
            json!([{"command": " "}]),
            "mcp[0].command must not be empty",
        ),
        (
            json!([good.clone(), {"command": ""}]),
            "mcp[1].command must not be empty",
        ),
        (
            json!([{"command": "x", "args": "a"}]),
            "mcp[0].args must be an array of strings",
        ),
        (
            json!([{"command": "x", "args": ["a", 1]}]),
            "mcp[0].args[1] must be a string",
        ),
        (
            json!([{"command": "x", "env": {"A": 1}}]),
            "mcp[0].env.A must be a string",
        ),
        (
            json!([{"command": "x", "bogus": 1}]),
            "mcp[0].bogus is not a field",
        ),
        (
            json!([{"name": "w", "url": "http://127.0.0.1:9/mcp"}]),
            "mcp[0].url is not a field",
        ),
        (
            json!([{"command": "a/x"}, {"name": "x", "command": "y"}]),
            "mcp[1]: duplicate server name 'x'",
        ),
        (json!(too_many), "at most 16"),
    ];
    for (mcp, want) in cases {
        let r = s.call(
            "agent.chat.stream",
            turn(&m, w.path(), json!({"mcp": mcp.clone()})),
        );
        assert_eq!(code(&r), -32602, "mcp {mcp}: {r}");
        let msg = r["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(want), "mcp {mcp}: want {want:?} in {r}");
    }
    assert!(
        m.requests().is_empty(),
        "the model was called: {:?}",
        m.requests()
    );
    assert!(!pid_file.exists(), "a server started for a refused request");
    // Still serving.
    s.ok("system.ping", json!({}));
}

#[test]
fn a_server_that_dies_at_start_is_a_notice_and_the_others_work() {
    let m = model(vec![
        RouterReply::tool("mcp__good_one__peek", json!({"text": "hi"})),
        RouterReply::tool("mcp__good_one__fail", json!({})),
        RouterReply::tool("mcp__good_one__refuse", json!({})),
    ]);
    let mut s = Sidecar::start();
    let w = tempfile::tempdir().unwrap();
    let mcp = json!([
        {"command": "sh", "args": ["-c", "echo boom >&2; exit 3"]},
        fake("good one", json!({})),
    ]);
    let r = run(&mut s, turn(&m, w.path(), json!({"mcp": mcp})));
    assert_ok(&r);
    let failed = r.notices("mcp_server_failed");
    assert_eq!(failed.len(), 1, "{:?}", r.chunks());
    // The name defaults to the command's basename.
    assert_eq!(failed[0]["name"], "sh");
    let err = failed[0]["error"].as_str().unwrap();
    assert!(
        err.contains("exited with status 3") && err.contains("boom"),
        "{err}"
    );
    // Only the good server is mounted, under its sanitised name.
    let servers = mounted(&r);
    assert_eq!(
        servers,
        vec![json!({"name": "good_one", "tools": 7, "exposure": "direct"})]
    );
    assert!(
        !m.requests()[0]
            .tool_names()
            .iter()
            .any(|n| n.starts_with("mcp__sh__")),
        "{:?}",
        m.requests()[0].tool_names()
    );
    let full = tool_messages(&m);
    assert_eq!(full.len(), 3, "{full:?}");
    assert_eq!(full[0]["success"], true, "{}", full[0]);
    assert_eq!(full[0]["data"]["text"], "peeked hi");
    // isError: a failure carrying the server's text.
    assert_eq!(full[1]["success"], false, "{}", full[1]);
    assert!(
        full[1]["error"]
            .as_str()
            .unwrap()
            .contains("the fake tool failed on purpose"),
        "{}",
        full[1]
    );
    // A JSON-RPC error answer.
    assert_eq!(full[2]["success"], false, "{}", full[2]);
    let e = full[2]["error"].as_str().unwrap();
    assert!(
        e.contains("MCP server 'good_one' refused the call to refuse")
            && e.contains("refused on purpose"),
        "{e}"
    );
}

#[test]
fn a_server_killed_mid_call_fails_the_call_and_the_turn_goes_on() {
    let m = model(vec![
        RouterReply::tool("mcp__fake__slow", json!({"seconds": 30})),
        RouterReply::tool("mcp__fake__crash", json!({})),
        RouterReply::tool("mcp__fake__pid", json!({})),
    ]);
    let mut s = Sidecar::start();
    let w = tempfile::tempdir().unwrap();
    let pid_file = w.path().join("fake.pid");
    let mcp = json!([fake("fake", json!({"FAKE_PID_FILE": pid_file}))]);
    let r = run(
        &mut s,
        turn(&m, w.path(), json!({"mcp": mcp, "toolTimeoutMs": 1000})),
    );
    assert_ok(&r);
    let pid = read_pid(&pid_file);
    let full = tool_messages(&m);
    assert_eq!(full.len(), 3, "{full:?}");
    // toolTimeoutMs stops a call that takes too long.
    assert_eq!(full[0]["success"], false, "{}", full[0]);
    assert_eq!(full[0]["error"], "tool_timeout", "{}", full[0]);
    // The crash.
    let crash = &full[1];
    assert_eq!(crash["success"], false, "{crash}");
    let e = crash["error"].as_str().unwrap();
    assert!(
        e.contains("MCP server 'fake' exited with status 7 during the call to crash"),
        "{crash}"
    );
    assert_eq!(crash["data"]["exit"], "exited with status 7", "{crash}");
    // Its tools are unavailable afterwards: a clear failure, not a hang.
    assert_eq!(full[2]["success"], false, "{}", full[2]);
    assert!(
        full[2]["error"]
            .as_str()
            .unwrap()
            .contains("MCP server 'fake'"),
        "{}",
        full[2]
    );
    assert!(!alive(pid));
}

/// Starts a turn whose model calls `slow {seconds: 60}` on a `stubborn` server; returns once
/// the call is in flight: the stream id, the server's pid and its TERM-ignoring shell's.
fn slow_call_on_stubborn_server(s: &mut Sidecar, m: &FakeRouter, w: &Path) -> (String, i32, i32) {
    let (pid_file, sh_file) = (w.join("fake.pid"), w.join("sh.pid"));
    let mcp = json!([stubborn("fake", &pid_file, &sh_file)]);
    let id = start(s, turn(m, w, json!({"mcp": mcp})));
    let (pid, sh) = (read_pid(&pid_file), read_pid(&sh_file));
    let sleeping = PathBuf::from(format!("{}.slow", pid_file.display()));
    assert!(
        wait_until(common::WAIT, || sleeping.is_file()),
        "the slow call never reached the server"
    );
    assert!(
        alive(pid) && alive(sh),
        "pids {pid} {sh} are not the server's"
    );
    (id, pid, sh)
}

#[test]
fn cancel_mid_call_ends_the_turn_and_the_server_group() {
    let m = model(vec![RouterReply::tool(
        "mcp__fake__slow",
        json!({"seconds": 60}),
    )]);
    let mut s = Sidecar::start();
    let w = tempfile::tempdir().unwrap();
    let (id, pid, sh) = slow_call_on_stubborn_server(&mut s, &m, w.path());
    let t = Instant::now();
    assert_eq!(
        s.ok("agent.chat.cancel", json!({"streamId": id})),
        json!(null)
    );
    let r = finish(&mut s, &id, Vec::new());
    assert_eq!(r.done["status"], "cancelled", "{}", r.done);
    eprintln!("stream.done {:?} after cancel", t.elapsed());
    assert!(
        t.elapsed() < Duration::from_secs(6),
        "done took {:?}",
        t.elapsed()
    );
    assert_gone(pid, "the server after cancel");
    // Its process group goes too, even a member that ignores TERM.
    assert_gone(sh, "the server's group after cancel");
    s.ok("system.ping", json!({}));
}

#[test]
fn sigkill_of_the_sidecar_takes_its_servers_down() {
    let m = model(vec![RouterReply::tool(
        "mcp__fake__slow",
        json!({"seconds": 60}),
    )]);
    let mut s = Sidecar::start();
    let w = tempfile::tempdir().unwrap();
    let (_id, pid, sh) = slow_call_on_stubborn_server(&mut s, &m, w.path());
    sigkill(&mut s);
    assert_gone(pid, "the server after SIGKILL of the sidecar");
    // Nobody is left to send TERM or KILL: only the launcher's parent-death signal ends the
    // group member that outlives stdin EOF.
    assert_gone(sh, "the server's group after SIGKILL of the sidecar");
}

#[test]
fn no_server_outlives_its_turn_when_it_completes_or_fails() {
    let mut s = Sidecar::start();
    let w = tempfile::tempdir().unwrap();
    for (i, fails) in [(0, false), (1, true)] {
        let pid_file = w.path().join(format!("fake{i}.pid"));
        // The model checks, while the turn runs, that the server's pid is a live process.
        let seen_alive = std::sync::Arc::new(std::sync::Mutex::new(None));
        let (seen, pf) = (seen_alive.clone(), pid_file.clone());
        let m = FakeRouter::start(move |body| {
            let k = fake_router::messages(body)
                .iter()
                .filter(|m| m["role"] == "assistant")
                .count();
            let pid: i32 = std::fs::read_to_string(&pf)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            *seen.lock().unwrap() = Some(alive(pid));
            match (k, fails) {
                (0, _) => RouterReply::tool("mcp__fake__pid", json!({})),
                (_, false) => RouterReply::text("DONE"),
                (_, true) => RouterReply::http_error(400),
            }
        });
        let mcp = json!([fake("fake", json!({"FAKE_PID_FILE": pid_file}))]);
        let r = run(&mut s, turn(&m, w.path(), json!({"mcp": mcp})));
        assert_eq!(r.done["ok"], !fails, "{}", r.done);
        let pid = read_pid(&pid_file);
        assert_eq!(
            *seen_alive.lock().unwrap(),
            Some(true),
            "pid {pid} was not live"
        );
        let full = tool_messages(&m);
        assert_eq!(full[0]["data"]["text"], pid.to_string());
        assert!(
            wait_until(GONE, || !alive(pid)),
            "pid {pid} outlived its turn (failed turn: {fails})"
        );
    }
    // A turn's tools are its own: the shared router never had them.
    let list = s.ok("tool.list", json!({}));
    assert!(!list.to_string().contains("mcp__fake__"), "{list}");
}

/// A sidecar whose config.json has `mcp_servers: servers`.
fn configured(servers: Value) -> Sidecar {
    let home = tempfile::tempdir().unwrap();
    write_file(
        home.path(),
        "config.json",
        &json!({"mcp_servers": servers}).to_string(),
    );
    Sidecar::start_with(Opts {
        home: Some(home),
        ..Opts::default()
    })
}

/// One turn that calls `tool {}` once; returns the stream and the full tool result.
fn call_once(s: &mut Sidecar, cwd: &Path, tool: &str) -> (Streamed, Value) {
    let m = model(vec![RouterReply::tool(tool, json!({}))]);
    let r = run(s, turn(&m, cwd, json!({})));
    assert_ok(&r);
    let full = tool_messages(&m);
    assert_eq!(full.len(), 1, "{full:?}");
    (r, full[0].clone())
}

fn server<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no server {name}: {list}"))
}

#[test]
fn configured_server_is_shared_across_turns_and_restarted_once_after_a_crash() {
    let w = tempfile::tempdir().unwrap();
    let pid_file = w.path().join("fake.pid");
    let mut s = configured(json!([fake("fake", json!({"FAKE_PID_FILE": pid_file}))]));
    let (r1, a) = call_once(&mut s, w.path(), "mcp__fake__pid");
    // Configured servers are not the turn's own: no mcp_mounted notice.
    assert!(r1.notices("mcp_mounted").is_empty(), "{:?}", r1.chunks());
    assert_eq!(a["success"], true, "{a}");
    let p1: i32 = a["data"]["text"].as_str().unwrap().parse().unwrap();
    let (_, b) = call_once(&mut s, w.path(), "mcp__fake__pid");
    assert_eq!(b["data"]["text"], p1.to_string(), "a second server started");
    assert!(alive(p1), "the configured server ended with the turn");
    // On the shared router: tool.list and tool.invoke see it.
    let list = s.ok("tool.list", json!({}));
    let peek = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__fake__peek")
        .unwrap_or_else(|| panic!("tool.list lacks mcp__fake__peek: {list}"));
    assert_eq!(peek["mode"], "read");
    let inv = s.ok(
        "tool.invoke",
        json!({"name": "mcp__fake__peek", "arguments": {"text": "x"}, "context": {"cwd": w.path()}}),
    );
    assert_eq!(inv["success"], true, "{inv}");
    assert_eq!(inv["data"]["text"], "peeked x");

    let (_, c) = call_once(&mut s, w.path(), "mcp__fake__crash");
    assert_eq!(c["success"], false, "{c}");
    // (The exact wording is checked by a_server_killed_mid_call_fails_the_call_….)
    assert!(
        c["error"].as_str().unwrap().contains("MCP server 'fake'"),
        "{c}"
    );
    assert!(
        wait_until(common::WAIT, || {
            let l = s.ok("mcp.list", json!({}));
            server(&l, "fake")["state"] == "running"
        }),
        "not restarted: {}",
        s.ok("mcp.list", json!({}))
    );
    let l = s.ok("mcp.list", json!({}));
    let f = server(&l, "fake");
    assert_eq!(f["restarts"], 1, "{f}");
    let after_restart = f.clone();
    let (_, d) = call_once(&mut s, w.path(), "mcp__fake__pid");
    assert_eq!(d["success"], true, "{d}");
    let p2: i32 = d["data"]["text"].as_str().unwrap().parse().unwrap();
    assert_ne!(p1, p2);
    assert!(!alive(p1));
    // Restarted once only: a second crash leaves it failed, its tools gone.
    let (_, e) = call_once(&mut s, w.path(), "mcp__fake__crash");
    assert_eq!(e["success"], false, "{e}");
    assert!(
        wait_until(common::WAIT, || {
            let l = s.ok("mcp.list", json!({}));
            server(&l, "fake")["state"] == "failed"
        }),
        "{}",
        s.ok("mcp.list", json!({}))
    );
    let l = s.ok("mcp.list", json!({}));
    let f = server(&l, "fake");
    assert_eq!(f["restarts"], 1, "{f}");
    assert_eq!(f["tools"], json!([]), "{f}");
    let err = f["error"].as_str().unwrap_or_default();
    assert!(err.contains("exited with status 7"), "{f}");
    let list = s.ok("tool.list", json!({}));
    assert!(!list.to_string().contains("mcp__fake__"), "{list}");
    assert!(!alive(p2));
    // `error` is "why it failed, or how it last crashed": after the restart it still says
    // how the first one ended.
    assert!(
        after_restart["error"]
            .as_str()
            .unwrap_or_default()
            .contains("exited with status 7"),
        "mcp.list after the restart forgot how the server crashed: {after_restart}"
    );
}

#[test]
fn mcp_list_shows_idle_then_running_servers_with_modes() {
    let w = tempfile::tempdir().unwrap();
    let pid_file = w.path().join("fake.pid");
    let mut s = configured(json!([fake("fake", json!({"FAKE_PID_FILE": pid_file})),
               {"name": "web", "url": "http://127.0.0.1:9/mcp"}]));
    let l = s.ok("mcp.list", json!({}));
    assert_eq!(l["servers"].as_array().unwrap().len(), 2, "{l}");
    let f = server(&l, "fake");
    assert_eq!(f["state"], "idle", "{f}");
    assert_eq!(f["transport"], "stdio");
    assert_eq!(f["target"], mcp_venv_python().display().to_string());
    assert_eq!(f["restarts"], 0);
    assert_eq!(f["tools"], json!([]));
    let web = server(&l, "web");
    assert_eq!(web["transport"], "http");
    assert_eq!(web["target"], "http://127.0.0.1:9/mcp");
    assert!(!pid_file.exists(), "started before first use");

    let l = s.ok("mcp.list", json!({"start": true}));
    let f = server(&l, "fake");
    assert_eq!(f["state"], "running", "{f}");
    assert!(f["error"].is_null(), "{f}");
    let tools = f["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 7, "{f}");
    let mode = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == n)
            .unwrap_or_else(|| panic!("no {n}: {f}"))["mode"]
            .clone()
    };
    assert_eq!(mode("mcp__fake__peek"), "read");
    assert_eq!(mode("mcp__fake__crash"), "destructive");
    assert_eq!(mode("mcp__fake__pid"), "external");
    assert!(tools.iter().all(|t| t["exposure"] == "direct"), "{f}");
    assert_eq!(
        tools
            .iter()
            .find(|t| t["name"] == "mcp__fake__pid")
            .unwrap()["description"],
        "Return this server's process id"
    );
    // Nothing listens on port 9: failed, with the reason, and the sidecar goes on.
    let web = server(&l, "web");
    assert_eq!(web["state"], "failed", "{web}");
    assert!(
        !web["error"].as_str().unwrap_or_default().is_empty(),
        "{web}"
    );
    s.ok("system.ping", json!({}));
}

#[test]
fn many_tools_go_to_the_deferred_tier_and_tool_search_finds_them() {
    let m = model(vec![
        RouterReply::tool("tool_search", json!({"query": "wareaet"})),
        RouterReply::tool("mcp__fake__tool_123", json!({})),
    ]);
    let mut s = Sidecar::start();
    let w = tempfile::tempdir().unwrap();
    let mcp = json!([fake("fake", json!({"FAKE_TOOLS": "200"}))]);
    let r = run(&mut s, turn(&m, w.path(), json!({"mcp": mcp.clone()})));
    assert_ok(&r);
    assert_eq!(
        mounted(&r),
        vec![json!({"name": "fake", "tools": 207, "exposure": "deferred"})]
    );
    let reqs = m.requests();
    let names = reqs[0].tool_names();
    assert!(!names.iter().any(|n| n.starts_with("mcp__")), "{names:?}");
    assert!(names.iter().any(|n| n == "tool_search"), "{names:?}");
    let full = tool_messages(&m);
    assert_eq!(full.len(), 2, "{full:?}");
    let matches = full[0]["data"]["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 1, "{}", full[0]);
    assert_eq!(matches[0]["name"], "mcp__fake__tool_123");
    assert_eq!(full[1]["success"], true, "{}", full[1]);
    assert_eq!(full[1]["data"]["text"], "record 123");

    // The limit is a config key: above 207 they stay direct.
    let m2 = model(vec![RouterReply::text("ok")]);
    let mut s2 = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_MCP_DIRECT_TOOL_LIMIT".into(), "300".into())],
        ..Opts::default()
    });
    let r2 = run(&mut s2, turn(&m2, w.path(), json!({"mcp": mcp})));
    assert_ok(&r2);
    assert_eq!(mounted(&r2)[0]["exposure"], "direct");
    assert!(m2.requests()[0].offers("mcp__fake__tool_123"));
}

/// A process killed (and reaped) when the guard drops, even when the test fails.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn streamable_http_server_from_config() {
    let index =
        mcp_dir().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let port = free_port();
    let mut node = Killed(
        Command::new("node")
            .arg(&index)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn node"),
    );
    assert!(
        wait_until(Duration::from_secs(20), || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        }),
        "server-everything did not listen on {port}: {:?}",
        node.0.try_wait()
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut s = configured(json!([{"name": "web", "url": url}]));
    let w = tempfile::tempdir().unwrap();
    let m = model(vec![RouterReply::tool(
        "mcp__web__get-sum",
        json!({"a": 1, "b": 2}),
    )]);
    let r = run(&mut s, turn(&m, w.path(), json!({})));
    assert_ok(&r);
    assert!(m.requests()[0].offers("mcp__web__get-sum"));
    let full = tool_messages(&m);
    assert_eq!(full[0]["success"], true, "{}", full[0]);
    assert!(
        full[0]["data"]["text"].as_str().unwrap().contains('3'),
        "{}",
        full[0]
    );
    let l = s.ok("mcp.list", json!({}));
    let web = server(&l, "web");
    assert_eq!(web["state"], "running", "{web}");
    assert_eq!(web["transport"], "http");
    assert_eq!(web["target"], url);
    let sum = web["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__web__get-sum")
        .unwrap_or_else(|| panic!("{web}"));
    assert_eq!(sum["mode"], "read");
    drop(s);
    drop(node);
}

#[test]
fn list_changed_makes_a_new_tool_callable_next_round() {
    let m = model(vec![
        RouterReply::tool("mcp__fake__add_tool", json!({})),
        RouterReply::tool("mcp__fake__added", json!({})),
    ]);
    let mut s = Sidecar::start();
    let w = tempfile::tempdir().unwrap();
    let mcp = json!([fake("fake", json!({}))]);
    let r = run(&mut s, turn(&m, w.path(), json!({"mcp": mcp})));
    assert_ok(&r);
    let reqs = m.requests();
    assert!(reqs.len() >= 2, "{reqs:?}");
    assert!(!reqs[0].offers("mcp__fake__added"));
    assert!(
        reqs[1].offers("mcp__fake__added"),
        "{:?}",
        reqs[1].tool_names()
    );
    let full = tool_messages(&m);
    assert_eq!(full.len(), 2, "{full:?}");
    assert_eq!(full[0]["data"]["text"], "added");
    assert_eq!(full[1]["success"], true, "{}", full[1]);
    assert_eq!(full[1]["data"]["text"], "added works");
}

#[test]
fn tools_via_host_mounts_no_mcp_server() {
    let w = tempfile::tempdir().unwrap();
    let pid_file = w.path().join("turn.pid");
    let conf_pid = w.path().join("configured.pid");
    let mut s = configured(json!([fake("conf", json!({"FAKE_PID_FILE": conf_pid}))]));
    let p = merge(
        scripted(json!([{"text": "no tools needed"}]), "go"),
        json!({"toolsViaHost": true, "cwd": w.path(),
               "tools": [descriptor("get_events", json!({}), &[])],
               "mcp": [fake("fake", json!({"FAKE_PID_FILE": pid_file}))]}),
    );
    let r = run(&mut s, p);
    assert_ok(&r);
    assert_eq!(r.text(), "no tools needed");
    assert!(r.notices("mcp_mounted").is_empty(), "{:?}", r.chunks());
    assert!(r.notices("mcp_server_failed").is_empty());
    // Servers start before the first model request; the turn is over, so they never will.
    assert!(!pid_file.exists(), "the turn's mcp server started");
    assert!(!conf_pid.exists(), "the configured server started");
    let l = s.ok("mcp.list", json!({}));
    assert_eq!(server(&l, "conf")["state"], "idle", "{l}");
}

#[test]
fn malformed_mcp_servers_config_stops_the_sidecar_at_boot() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let boot = |env: &[(&str, &str)]| {
        let (status, out, err) = run_once(h, &[], env, b"");
        assert_eq!(status.code(), Some(2), "stdout {out} stderr {err}");
        assert!(out.is_empty(), "nothing on stdout when boot fails: {out}");
        err
    };
    write_file(h, "config.json", r#"{"mcp_servers": {"command": "x"}}"#);
    let e = boot(&[]);
    assert!(e.contains("mcp_servers") && e.contains("array"), "{e}");

    write_file(
        h,
        "config.json",
        r#"{"mcp_servers": [{"command": "x", "bogus": 1}]}"#,
    );
    let e = boot(&[]);
    assert!(e.contains("mcp_servers[0].bogus is not a field"), "{e}");

    write_file(
        h,
        "config.json",
        r#"{"mcp_servers": [{"command": "x"}, {"name": "x", "command": "y"}]}"#,
    );
    let e = boot(&[]);
    assert!(e.contains("duplicate server name 'x'"), "{e}");

    write_file(h, "config.json", "{}");
    let e = boot(&[(
        "OUTRIGGER_MCP_SERVERS",
        r#"[{"name": "web", "url": "ftp://example.com"}]"#,
    )]);
    assert!(
        e.contains("mcp_servers") && e.contains("http:// or https://") && e.contains("env"),
        "{e}"
    );
    let e = boot(&[("OUTRIGGER_MCP_SERVERS", "not json")]);
    assert!(e.contains("mcp_servers"), "{e}");

    // A well-formed list from the environment boots, and mcp.list shows it.
    let servers = json!([fake("envsrv", json!({}))]).to_string();
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_MCP_SERVERS".into(), servers)],
        ..Opts::default()
    });
    let l = s.ok("mcp.list", json!({}));
    assert_eq!(server(&l, "envsrv")["state"], "idle", "{l}");
}

/// Three real servers from two ecosystems in one turn (`mcp-server-git` and `mcp-server-time`
/// on Python, `server-filesystem` on Node): they start together and each answers its call.
#[test]
fn git_filesystem_and_time_servers_serve_one_turn() {
    let w = tempfile::tempdir().unwrap();
    let repo = w.path();
    write_file(repo, "notes.txt", "from the filesystem server\n");
    let git = |args: &[&str]| {
        let st = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(repo)
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "notes.txt"]);
    git(&["commit", "-q", "-m", "first"]);
    write_file(repo, "untracked.txt", "new\n");
    let m = model(vec![
        RouterReply::tool("mcp__git__git_status", json!({"repo_path": repo})),
        RouterReply::tool(
            "mcp__fs__read_text_file",
            json!({"path": repo.join("notes.txt")}),
        ),
        RouterReply::tool("mcp__time__get_current_time", json!({"timezone": "UTC"})),
    ]);
    let venv = mcp_dir().join("venv/bin");
    let mcp = json!([
        {"name": "git", "command": venv.join("mcp-server-git"), "args": ["--repository", repo]},
        {"name": "fs", "command": mcp_dir().join("npm/node_modules/.bin/mcp-server-filesystem"), "args": [repo]},
        {"name": "time", "command": venv.join("mcp-server-time")},
    ]);
    let mut s = Sidecar::start();
    let r = run(&mut s, turn(&m, repo, json!({"mcp": mcp})));
    assert_ok(&r);
    let mut names: Vec<String> = mounted(&r)
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["fs", "git", "time"]);
    assert!(
        r.notices("mcp_server_failed").is_empty(),
        "{:?}",
        r.chunks()
    );
    let full = tool_messages(&m);
    assert_eq!(full.len(), 3, "{full:?}");
    for t in &full {
        assert_eq!(t["success"], true, "{t}");
    }
    let text = |i: usize| full[i]["data"]["text"].as_str().unwrap().to_string();
    assert!(text(0).contains("untracked.txt"), "{}", text(0));
    assert!(
        text(1).contains("from the filesystem server"),
        "{}",
        text(1)
    );
    assert!(text(2).contains("UTC"), "{}", text(2));
}

/// A configured server belongs to the sidecar: cancelling the turn that started it stops that
/// turn's wait, not the server's start (which a later turn then uses).
#[test]
fn cancelling_the_first_turn_does_not_fail_a_configured_start() {
    let w = tempfile::tempdir().unwrap();
    let pid_file = w.path().join("fake.pid");
    // A server that takes a second to start.
    let slow = json!({"name": "fake", "command": "sh",
        "args": ["-c", "sleep 1; exec \"$0\" \"$1\"", mcp_venv_python(), fixture()],
        "env": {"FAKE_PID_FILE": pid_file}});
    let mut s = configured(json!([slow]));
    let m = model(vec![RouterReply::tool("mcp__fake__pid", json!({}))]);
    let id = start(&mut s, turn(&m, w.path(), json!({})));
    assert_eq!(
        s.ok("agent.chat.cancel", json!({"streamId": id})),
        json!(null)
    );
    let r = finish(&mut s, &id, Vec::new());
    assert_eq!(r.done["status"], "cancelled", "{}", r.done);
    assert!(
        m.requests().is_empty(),
        "the cancelled turn reached the model"
    );
    assert!(
        wait_until(Duration::from_secs(15), || {
            let l = s.ok("mcp.list", json!({}));
            server(&l, "fake")["state"] == "running"
        }),
        "the start did not finish: {}",
        s.ok("mcp.list", json!({}))
    );
    let (_, a) = call_once(&mut s, w.path(), "mcp__fake__pid");
    assert_eq!(a["success"], true, "{a}");
    assert_eq!(a["data"]["text"], read_pid(&pid_file).to_string());
}
