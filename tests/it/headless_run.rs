//! `outrigger run`, the headless one-shot mode, checked against `docs/headless.md` from the
//! outside: the real binary with its own `OUTRIGGER_HOME`, driven as a shell or an eval
//! runner drives it. Only what a user can observe is checked: stdout in each output format,
//! stderr, the exit code, files the tools wrote, the requests a model server received, and
//! the durable record (read back by a sidecar on the same store after the run exits).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::common::{Sidecar, pids_with_arg, wait_until};
use crate::support::fake_openai::{FakeServer, Reply};
use crate::support::fake_router::{self, FakeRouter, RouterReply};
use crate::support::headless::{DEADLINE, Input, Running, contents, record_messages, run, script};
use crate::support::mcp_deps::mcp_venv_python;

/// How long a run may take to end once it was signalled.
const AFTER_SIGNAL: Duration = Duration::from_secs(10);

/// The final answer of `tool_turns`.
const ANSWER: &str = "The needle is in notes.txt.";

/// A workspace with a file to find.
fn ws() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("notes.txt"),
        "alpha\nthe needle is here\nomega\n",
    )
    .unwrap();
    d
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn db(home: &Path) -> PathBuf {
    home.join("outrigger.db")
}

/// Round 1 narrates, then reads and greps (real read-only tools); round 2 answers in pieces.
fn tool_turns() -> Vec<Value> {
    vec![
        json!({"text": "Let me look. ",
               "toolCalls": [{"id": "read_1", "name": "read_file", "arguments": {"path": "notes.txt"}},
                             {"id": "grep_1", "name": "grep", "arguments": {"pattern": "needle", "path": "."}}],
               "usage": {"promptTokens": 100, "completionTokens": 10}}),
        json!({"text": ["The needle ", "is in notes.txt."],
               "usage": {"promptTokens": 200, "completionTokens": 20, "cachedPromptTokens": 50}}),
    ]
}

/// A script whose only turn waits 30 s before answering.
fn slow_turns() -> Vec<Value> {
    vec![json!({"delayMs": 30000, "text": "too late"})]
}

/// The `{id, name, success}` of each `toolCalls` entry.
fn calls(result: &Value) -> Vec<(String, String, bool)> {
    result["toolCalls"]
        .as_array()
        .unwrap_or_else(|| panic!("toolCalls is not a list: {result}"))
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["name"].as_str().unwrap().to_string(),
                c["success"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn call(id: &str, name: &str, ok: bool) -> (String, String, bool) {
    (id.into(), name.into(), ok)
}

fn nonempty_str<'a>(v: &'a Value, key: &str) -> &'a str {
    let s = v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string: {v}"));
    assert!(!s.is_empty(), "{key} is empty: {v}");
    s
}

/// The `user` and `assistant` messages of a model request, as (role, text).
fn dialogue(body: &Value) -> Vec<(String, String)> {
    fake_router::messages(body)
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                fake_router::content_text(m),
            )
        })
        .collect()
}

fn pair(role: &str, text: &str) -> (String, String) {
    (role.into(), text.into())
}

// ---- 1. text -------------------------------------------------------------------------------

#[test]
fn text_prints_only_the_last_rounds_answer() {
    let (home, w, d) = (tmp(), ws(), tmp());
    let sc = script(d.path(), "t.jsonl", &tool_turns());
    let o = run(
        home.path(),
        &[
            "run",
            "--script",
            s(&sc),
            "--cwd",
            s(w.path()),
            "Where is the needle?",
        ],
    );
    o.expect_code(0);
    assert_eq!(o.stdout, format!("{ANSWER}\n"), "{}", o.dump());
    assert!(
        !o.stderr.contains("[tool]"),
        "tool activity without --verbose\n{}",
        o.dump()
    );
}

#[test]
fn text_verbose_puts_tool_activity_on_stderr_only() {
    let (home, w, d) = (tmp(), ws(), tmp());
    let sc = script(d.path(), "t.jsonl", &tool_turns());
    let o = run(
        home.path(),
        &[
            "run",
            "--verbose",
            "--script",
            s(&sc),
            "--cwd",
            s(w.path()),
            "Where is the needle?",
        ],
    );
    o.expect_code(0);
    assert_eq!(o.stdout, format!("{ANSWER}\n"), "{}", o.dump());
    let tool_lines: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.starts_with("[tool] "))
        .collect();
    for name in ["read_file", "grep"] {
        assert!(
            tool_lines
                .iter()
                .any(|l| l.starts_with(&format!("[tool] {name} "))),
            "no [tool] {name} line\n{}",
            o.dump()
        );
        assert!(
            tool_lines
                .iter()
                .any(|l| l.starts_with(&format!("[tool] {name} ok"))),
            "no [tool] {name} ok line\n{}",
            o.dump()
        );
    }
}

/// The doc's own example, on this repository.
#[test]
fn text_demo_script_prints_the_documented_answer() {
    let home = tmp();
    let root = env!("CARGO_MANIFEST_DIR");
    let demo = format!("{root}/examples/demo-script.jsonl");
    let o = run(
        home.path(),
        &[
            "run",
            "--script",
            &demo,
            "--cwd",
            root,
            "Where is the CoreLoop?",
        ],
    );
    o.expect_code(0);
    assert_eq!(
        o.stdout,
        "The CoreLoop is in src/agent/: run.rs holds the round loop (Turn::rounds), and mod.rs lists its modules.\n",
        "{}",
        o.dump()
    );
}

#[test]
fn text_stdout_stays_clean_with_debug_logs() {
    let (home, w, d) = (tmp(), ws(), tmp());
    let sc = script(d.path(), "t.jsonl", &tool_turns());
    let o = run(
        home.path(),
        &[
            "run",
            "--log-level",
            "DEBUG",
            "--script",
            s(&sc),
            "--cwd",
            s(w.path()),
            "Where is the needle?",
        ],
    );
    o.expect_code(0);
    assert_eq!(o.stdout, format!("{ANSWER}\n"), "{}", o.dump());
    assert!(
        !o.stderr.trim().is_empty(),
        "no logs at DEBUG\n{}",
        o.dump()
    );
}

#[test]
fn text_verbose_shows_a_denial_naming_the_flag() {
    let (home, w, d) = (tmp(), ws(), tmp());
    let turns = vec![
        json!({"toolCalls": [{"id": "b1", "name": "bash", "arguments": {"command": "echo made > made.txt"}}]}),
        json!({"text": "done"}),
    ];
    let sc = script(d.path(), "t.jsonl", &turns);
    let o = run(
        home.path(),
        &[
            "run",
            "--verbose",
            "--deny",
            "bash",
            "--script",
            s(&sc),
            "--cwd",
            s(w.path()),
            "make a file",
        ],
    );
    o.expect_code(0);
    assert_eq!(o.stdout, "done\n", "{}", o.dump());
    assert!(
        o.stderr
            .lines()
            .any(|l| l.starts_with("[tool] bash denied") && l.contains("--deny")),
        "{}",
        o.dump()
    );
    assert!(!w.path().join("made.txt").exists(), "bash ran");
}

// ---- 2. json -------------------------------------------------------------------------------

#[test]
fn json_prints_one_result_object_and_the_turn_is_recorded() {
    let (home, w, d) = (tmp(), ws(), tmp());
    let sc = script(d.path(), "t.jsonl", &tool_turns());
    let o = run(
        home.path(),
        &[
            "run",
            "--output-format",
            "json",
            "--script",
            s(&sc),
            "--cwd",
            s(w.path()),
            "Where is the needle?",
        ],
    );
    o.expect_code(0);
    let r = o.result();
    assert_eq!(r["result"], ANSWER, "{r}");
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(
        r["reason"], "assistant produced final response with no pending tools",
        "{r}"
    );
    assert_eq!(r["exitCode"], 0, "{r}");
    assert!(r.get("error").is_none(), "error on a completed turn: {r}");
    let u = &r["usage"];
    assert_eq!(u["promptTokens"], 300, "{r}");
    assert_eq!(u["completionTokens"], 30, "{r}");
    assert_eq!(u["totalTokens"], 330, "{r}");
    assert_eq!(u["cachedPromptTokens"], 50, "{r}");
    nonempty_str(&r, "sessionId");
    let record = nonempty_str(&r, "recordId").to_string();
    nonempty_str(&r, "traceId");
    assert!(
        nonempty_str(&r, "streamId").starts_with("str_"),
        "streamId: {r}"
    );
    assert!(r["durationMs"].is_u64(), "durationMs: {r}");
    assert_eq!(
        calls(&r),
        vec![
            call("read_1", "read_file", true),
            call("grep_1", "grep", true)
        ]
    );
    for c in r["toolCalls"].as_array().unwrap() {
        assert!(c.get("error").is_none(), "error on a successful call: {c}");
    }
    assert_eq!(r["denials"], json!([]), "{r}");

    // The durable record holds the prompt and the answer.
    let m = contents(&record_messages(&db(home.path()), &record));
    assert_eq!(m.first().map(String::as_str), Some("Where is the needle?"));
    assert_eq!(m.last().map(String::as_str), Some(ANSWER), "{m:?}");
}

// ---- 3. stream-json ------------------------------------------------------------------------

#[test]
fn stream_json_streams_the_turn_and_ends_with_the_json_result() {
    let (home, w, d) = (tmp(), ws(), tmp());
    let sc = script(d.path(), "t.jsonl", &tool_turns());
    let args = |format: &'static str| {
        vec![
            "run".to_string(),
            "--output-format".into(),
            format.into(),
            "--script".into(),
            s(&sc).into(),
            "--cwd".into(),
            s(w.path()).into(),
            "Where is the needle?".into(),
        ]
    };
    let sargs = args("stream-json");
    let o = run(
        home.path(),
        &sargs.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    o.expect_code(0);
    let lines = o.json_lines();
    assert!(lines.len() >= 3, "{}", o.dump());
    for l in &lines {
        assert!(l["type"].is_string(), "a line without type: {l}");
    }

    let start = &lines[0];
    assert_eq!(start["type"], "start", "first line: {start}");
    let stream = nonempty_str(start, "streamId");
    let record = nonempty_str(start, "recordId");
    let session = nonempty_str(start, "sessionId");
    assert_eq!(start["provider"], "scripted", "{start}");
    nonempty_str(start, "model");
    assert_eq!(
        std::fs::canonicalize(nonempty_str(start, "cwd")).unwrap(),
        std::fs::canonicalize(w.path()).unwrap(),
        "{start}"
    );

    let of = |ty: &str| -> Vec<(usize, &Value)> {
        lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l["type"] == ty)
            .collect()
    };
    let deltas: String = of("delta")
        .iter()
        .map(|(_, l)| l["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, format!("Let me look. {ANSWER}"), "{}", o.dump());
    let tool_calls = of("toolCall");
    let ids: Vec<&str> = tool_calls
        .iter()
        .map(|(_, l)| l["toolCall"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["read_1", "grep_1"], "{}", o.dump());
    assert_eq!(tool_calls[0].1["toolCall"]["name"], "read_file");
    assert_eq!(
        tool_calls[0].1["toolCall"]["arguments"]["path"],
        "notes.txt"
    );
    let results = of("toolResult");
    assert_eq!(results.len(), 2, "{}", o.dump());
    for (i, r) in &results {
        let id = r["toolResult"]["id"].as_str().unwrap();
        assert_eq!(r["toolResult"]["success"], true, "{r}");
        assert!(r["toolResult"]["name"].is_string(), "{r}");
        let (ci, _) = tool_calls
            .iter()
            .find(|(_, c)| c["toolCall"]["id"] == id)
            .unwrap_or_else(|| panic!("a result without its call: {r}"));
        assert!(ci < i, "result before its call: {}", o.dump());
    }
    // The answer streams after the tools ran.
    let last_result_at = results.iter().map(|(i, _)| *i).max().unwrap();
    let answer_delta_at = of("delta")
        .iter()
        .find(|(_, l)| l["delta"] == "The needle ")
        .map(|(i, _)| *i)
        .unwrap();
    assert!(last_result_at < answer_delta_at, "{}", o.dump());

    let last = o.last_result();
    assert_eq!(of("result").len(), 1, "{}", o.dump());
    assert_eq!(last["streamId"], stream);
    assert_eq!(last["recordId"], record);
    assert_eq!(last["sessionId"], session);

    // The same turn in `json` gives the same object.
    let home2 = tmp();
    let jargs = args("json");
    let j = run(
        home2.path(),
        &jargs.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    j.expect_code(0);
    let jr = j.result();
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&last), keys(&jr), "stream-json {last}\njson {jr}");
    for k in [
        "type",
        "result",
        "status",
        "reason",
        "exitCode",
        "usage",
        "toolCalls",
        "denials",
    ] {
        assert_eq!(last[k], jr[k], "{k}: stream-json {last}\njson {jr}");
    }
}

// ---- 4. an OpenAI-compatible server --------------------------------------------------------

#[test]
fn openai_compat_server_gets_the_model_prompt_and_system_prompt() {
    let server = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let home = tmp();
    let url = server.base_url();
    let o = run(
        home.path(),
        &[
            "run",
            "--provider",
            "openai_compat",
            "--base-url",
            &url,
            "--model",
            "m",
            "--system-prompt",
            "You are a headless test.",
            "--output-format",
            "json",
            "hello there",
        ],
    );
    o.expect_code(0);
    let r = o.result();
    assert_eq!(r["result"], "Hello", "{r}");
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["usage"]["promptTokens"], 9, "{r}");
    assert_eq!(r["usage"]["totalTokens"], 11, "{r}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert!(
        reqs[0].path.ends_with("/chat/completions"),
        "{}",
        reqs[0].path
    );
    let body = &reqs[0].body;
    assert_eq!(body["model"], "m", "{body}");
    assert_eq!(
        fake_router::first_user(body).as_deref(),
        Some("hello there"),
        "{body}"
    );
    assert_eq!(
        fake_router::system(body).as_deref(),
        Some("You are a headless test."),
        "{body}"
    );

    // Text: just the answer.
    let home = tmp();
    let o = run(
        home.path(),
        &[
            "run",
            "--provider",
            "openai_compat",
            "--base-url",
            &url,
            "--model",
            "m",
            "hello again",
        ],
    );
    o.expect_code(0);
    assert_eq!(o.stdout, "Hello\n", "{}", o.dump());
}

#[test]
fn model_and_base_url_come_from_the_environment() {
    let server = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let home = tmp();
    let url = server.base_url();
    let o = Running::start(
        home.path(),
        &["run", "hi"],
        &[
            ("OUTRIGGER_PROVIDER", "openai_compat"),
            ("OUTRIGGER_MODEL", "env-model"),
            ("OUTRIGGER_BASE_URL", &url),
        ],
        Input::Null,
    )
    .finish(DEADLINE);
    o.expect_code(0);
    assert_eq!(o.stdout, "Hello\n", "{}", o.dump());
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].body["model"], "env-model");
}

// ---- 5. exit codes -------------------------------------------------------------------------

#[test]
fn no_prompt_is_a_usage_error() {
    let (home, d) = (tmp(), tmp());
    let sc = script(d.path(), "t.jsonl", &[json!({"text": "unused"})]);
    let o = run(home.path(), &["run", "--script", s(&sc)]);
    o.expect_code(2);
    assert_eq!(o.stdout, "", "{}", o.dump());
    assert!(!o.stderr.trim().is_empty(), "{}", o.dump());
    run(home.path(), &["run"]).expect_code(2);
}

#[test]
fn openai_compat_without_a_model_is_exit_2_and_sends_nothing() {
    let server = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let home = tmp();
    let url = server.base_url();
    let o = run(
        home.path(),
        &[
            "run",
            "--provider",
            "openai_compat",
            "--base-url",
            &url,
            "hi",
        ],
    );
    o.expect_code(2);
    assert!(
        o.stderr.contains("--model") || o.stderr.contains("OUTRIGGER_MODEL"),
        "{}",
        o.dump()
    );
    assert_eq!(o.stdout, "", "{}", o.dump());
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}

#[test]
fn default_openai_endpoint_without_a_key_is_exit_2() {
    let home = tmp();
    let o = run(
        home.path(),
        &["run", "--provider", "openai", "--model", "m", "hi"],
    );
    o.expect_code(2);
    assert!(o.stderr.contains("OUTRIGGER_API_KEY"), "{}", o.dump());
    assert!(o.stderr.contains("OPENAI_API_KEY"), "{}", o.dump());
    // A compatible server has no default endpoint: the error names baseUrl.
    let o = run(
        home.path(),
        &["run", "--provider", "openai_compat", "--model", "m", "hi"],
    );
    o.expect_code(2);
    assert!(o.stderr.contains("baseUrl"), "{}", o.dump());
    // A native provider's key variables are named too.
    let o = run(
        home.path(),
        &[
            "run",
            "--provider",
            "anthropic",
            "--model",
            "claude-sonnet-4-5",
            "hi",
        ],
    );
    o.expect_code(2);
    assert!(o.stderr.contains("ANTHROPIC_API_KEY"), "{}", o.dump());
}

/// "An error before the turn starts … still prints the object in the `json` formats, with
/// `status: "failed"` and `exitCode: 2`": configuration errors included.
#[test]
fn json_format_reports_configuration_errors_as_a_result_object() {
    let server = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let url = server.base_url();
    let cases: [&[&str]; 2] = [
        &[
            "--provider",
            "openai_compat",
            "--base-url",
            url.as_str(),
            "hi",
        ],
        &["--provider", "openai_compat", "--model", "m", "hi"],
    ];
    for case in cases {
        let home = tmp();
        let mut args = vec!["run", "--output-format", "json"];
        args.extend_from_slice(case);
        let o = run(home.path(), &args);
        o.expect_code(2);
        let r = o.result();
        assert_eq!(r["status"], "failed", "{args:?}: {r}");
        assert_eq!(r["exitCode"], 2, "{args:?}: {r}");
    }
    assert!(server.requests().is_empty());
}

#[test]
fn provider_error_is_exit_1_with_the_error() {
    let (home, d) = (tmp(), tmp());
    let sc = script(
        d.path(),
        "err.jsonl",
        &[
            json!({"error": {"kind": "http", "status": 400, "message": "bad request from the script"}}),
        ],
    );
    let o = run(
        home.path(),
        &["run", "--output-format", "json", "--script", s(&sc), "hi"],
    );
    o.expect_code(1);
    let r = o.result();
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["exitCode"], 1, "{r}");
    nonempty_str(&r["error"], "kind");
    assert!(
        nonempty_str(&r["error"], "message").contains("bad request from the script"),
        "{r}"
    );
    nonempty_str(&r, "reason");
    nonempty_str(&r, "recordId");

    // Text: no answer on stdout, the reason on stderr.
    let home = tmp();
    let o = run(home.path(), &["run", "--script", s(&sc), "hi"]);
    o.expect_code(1);
    assert_eq!(o.stdout.trim(), "", "{}", o.dump());
    assert!(
        o.stderr.contains("bad request from the script"),
        "{}",
        o.dump()
    );
}

#[test]
fn unreachable_server_is_exit_1_and_says_so() {
    let home = tmp();
    let o = run(
        home.path(),
        &[
            "run",
            "--provider",
            "openai_compat",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "hi",
        ],
    );
    o.expect_code(1);
    let err = o.stderr.to_lowercase();
    assert!(
        err.contains("unreachable") || err.contains("connect"),
        "{}",
        o.dump()
    );
    assert!(err.contains("127.0.0.1:9"), "{}", o.dump());
}

#[test]
fn max_rounds_reached_is_exit_3() {
    let (home, w, d) = (tmp(), ws(), tmp());
    let sc = script(d.path(), "t.jsonl", &tool_turns());
    let o = run(
        home.path(),
        &[
            "run",
            "--max-rounds",
            "1",
            "--output-format",
            "json",
            "--script",
            s(&sc),
            "--cwd",
            s(w.path()),
            "Where is the needle?",
        ],
    );
    o.expect_code(3);
    let r = o.result();
    assert_eq!(r["status"], "budget_exhausted", "{r}");
    assert_eq!(r["exitCode"], 3, "{r}");
    assert!(
        nonempty_str(&r, "reason").to_lowercase().contains("round"),
        "{r}"
    );
}

#[test]
fn budget_tokens_reached_is_exit_3() {
    let (home, w, d) = (tmp(), ws(), tmp());
    let turns = vec![
        json!({"toolCalls": [{"id": "read_1", "name": "read_file", "arguments": {"path": "notes.txt"}}],
               "usage": {"promptTokens": 1000, "completionTokens": 100}}),
        json!({"text": "answer", "usage": {"promptTokens": 1000, "completionTokens": 100}}),
    ];
    let sc = script(d.path(), "t.jsonl", &turns);
    let o = run(
        home.path(),
        &[
            "run",
            "--budget-tokens",
            "10",
            "--output-format",
            "json",
            "--script",
            s(&sc),
            "--cwd",
            s(w.path()),
            "go",
        ],
    );
    o.expect_code(3);
    let r = o.result();
    assert_eq!(r["status"], "budget_exhausted", "{r}");
    assert_eq!(r["exitCode"], 3, "{r}");
}

#[test]
fn resume_of_a_missing_record_is_exit_2() {
    let (home, d) = (tmp(), tmp());
    let sc = script(d.path(), "t.jsonl", &[json!({"text": "unused"})]);
    let o = run(
        home.path(),
        &[
            "run",
            "--resume",
            "no_such_record",
            "--script",
            s(&sc),
            "hi",
        ],
    );
    o.expect_code(2);
    assert!(o.stderr.contains("no_such_record"), "{}", o.dump());
    assert_eq!(o.stdout, "", "{}", o.dump());

    // A request the sidecar refused: the json formats still print the result object.
    let o = run(
        home.path(),
        &[
            "run",
            "--output-format",
            "json",
            "--resume",
            "no_such_record",
            "--script",
            s(&sc),
            "hi",
        ],
    );
    o.expect_code(2);
    let r = o.result();
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["exitCode"], 2, "{r}");
}

#[test]
fn bad_tool_names_and_flags_are_exit_2() {
    let (home, d) = (tmp(), tmp());
    let sc = script(d.path(), "t.jsonl", &[json!({"text": "unused"})]);
    let cases: [(&[&str], &str); 5] = [
        (&["--deny", "not_a_tool"], "not_a_tool"),
        (&["--allow", "not_a_tool"], "not_a_tool"),
        (&["--deny", "bash,not_a_tool"], "not_a_tool"),
        (&["--allow", "bash", "--deny", "bash"], "bash"),
        (&["--output-format", "yaml"], "yaml"),
    ];
    for (flags, named) in cases {
        let mut args = vec!["run", "--script", s(&sc)];
        args.extend_from_slice(flags);
        args.push("hi");
        let o = run(home.path(), &args);
        assert_eq!(o.code, Some(2), "{flags:?}\n{}", o.dump());
        assert!(o.stderr.contains(named), "{flags:?}\n{}", o.dump());
        assert_eq!(o.stdout, "", "{flags:?}\n{}", o.dump());
    }
}

#[test]
fn a_store_held_by_another_sidecar_is_exit_2() {
    let holder = Sidecar::start();
    let d = tmp();
    let sc = script(d.path(), "t.jsonl", &[json!({"text": "unused"})]);
    let o = run(
        holder.home.path(),
        &["run", "--output-format", "json", "--script", s(&sc), "hi"],
    );
    o.expect_code(2);
    let r = o.result();
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["exitCode"], 2, "{r}");
    assert!(
        o.stderr.contains("already owned") || r.to_string().contains("already owned"),
        "the lease holder is not named\n{}",
        o.dump()
    );

    let o = run(holder.home.path(), &["run", "--script", s(&sc), "hi"]);
    o.expect_code(2);
    assert!(o.stderr.contains("already owned"), "{}", o.dump());
    assert_eq!(o.stdout, "", "{}", o.dump());
}

// ---- 6. stdin ------------------------------------------------------------------------------

#[test]
fn dash_reads_the_prompt_from_stdin() {
    let server = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let home = tmp();
    let url = server.base_url();
    let o = Running::start(
        home.path(),
        &[
            "run",
            "--provider",
            "openai_compat",
            "--base-url",
            &url,
            "--model",
            "m",
            "-",
        ],
        &[],
        Input::Bytes(b"Summarise the notes\nin one line.\n".to_vec()),
    )
    .finish(DEADLINE);
    o.expect_code(0);
    assert_eq!(o.stdout, "Hello\n", "{}", o.dump());
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let user = fake_router::first_user(&reqs[0].body).unwrap();
    assert!(
        user.contains("Summarise the notes\nin one line."),
        "{user:?}"
    );
}

#[test]
fn open_stdin_is_not_waited_on_without_dash() {
    let (home, d) = (tmp(), tmp());
    let sc = script(d.path(), "t.jsonl", &[json!({"text": "ok"})]);
    let running = Running::start(
        home.path(),
        &["run", "--script", s(&sc), "hi"],
        &[],
        Input::Open,
    );
    let o = running.finish(Duration::from_secs(20));
    o.expect_code(0);
    assert_eq!(o.stdout, "ok\n", "{}", o.dump());
}

// ---- 7. approvals --------------------------------------------------------------------------

#[test]
fn deny_refuses_the_call_and_the_model_sees_the_flag() {
    let router = FakeRouter::start(|body| {
        if fake_router::tool_results(body).is_empty() {
            RouterReply::tool("bash", json!({"command": "echo made > made.txt"}))
        } else {
            RouterReply::text("done")
        }
    });
    let (home, w) = (tmp(), ws());
    let url = router.base_url();
    let o = run(
        home.path(),
        &[
            "run",
            "--provider",
            "openai_compat",
            "--base-url",
            &url,
            "--model",
            "m",
            "--cwd",
            s(w.path()),
            "--deny",
            "bash",
            "--output-format",
            "json",
            "make a file",
        ],
    );
    o.expect_code(0);
    let r = o.result();
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["result"], "done", "{r}");
    assert!(!w.path().join("made.txt").exists(), "bash ran");
    assert_eq!(calls(&r), vec![call("call_0_0", "bash", false)], "{r}");
    let denials = r["denials"].as_array().unwrap();
    assert_eq!(denials.len(), 1, "{r}");
    assert_eq!(denials[0]["id"], "call_0_0", "{r}");
    assert_eq!(denials[0]["name"], "bash", "{r}");
    assert!(
        nonempty_str(&denials[0], "reason").contains("--deny"),
        "{r}"
    );
    // The turn went on: the model's next request carries the refusal, naming the flag.
    let reqs = router.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    let refusal = reqs[1].tool_results();
    assert_eq!(refusal.len(), 1, "{refusal:?}");
    assert!(refusal[0].contains("--deny"), "{refusal:?}");
}

#[test]
fn approval_deny_refuses_local_calls_unless_allowed() {
    let d = tmp();
    let turns = vec![
        json!({"toolCalls": [{"id": "b1", "name": "bash", "arguments": {"command": "echo made > made.txt"}},
                             {"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}]}),
        json!({"text": "done"}),
    ];
    let sc = script(d.path(), "t.jsonl", &turns);

    let (home, w) = (tmp(), ws());
    let o = run(
        home.path(),
        &[
            "run",
            "--approval",
            "deny",
            "--output-format",
            "stream-json",
            "--script",
            s(&sc),
            "--cwd",
            s(w.path()),
            "make a file",
        ],
    );
    o.expect_code(0);
    assert!(
        !w.path().join("made.txt").exists(),
        "bash ran\n{}",
        o.dump()
    );
    let r = o.last_result();
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(
        calls(&r),
        vec![call("b1", "bash", false), call("r1", "read_file", true)],
        "{r}"
    );
    let denials = r["denials"].as_array().unwrap();
    assert_eq!(denials.len(), 1, "{r}");
    assert_eq!(
        (&denials[0]["id"], &denials[0]["name"]),
        (&json!("b1"), &json!("bash"))
    );
    assert!(
        nonempty_str(&denials[0], "reason").contains("--approval"),
        "{r}"
    );
    let lines = o.json_lines();
    let approval = lines
        .iter()
        .find(|l| l["type"] == "approval" && l["approval"]["id"] == "b1")
        .unwrap_or_else(|| panic!("no approval line for b1\n{}", o.dump()));
    assert_eq!(approval["approval"]["name"], "bash", "{approval}");
    nonempty_str(&approval["approval"], "decision");
    let refused = lines
        .iter()
        .find(|l| l["type"] == "toolResult" && l["toolResult"]["id"] == "b1")
        .unwrap_or_else(|| panic!("no toolResult for b1\n{}", o.dump()));
    assert_eq!(refused["toolResult"]["success"], false, "{refused}");

    let (home, w) = (tmp(), ws());
    let o = run(
        home.path(),
        &[
            "run",
            "--approval",
            "deny",
            "--allow",
            "bash",
            "--output-format",
            "json",
            "--script",
            s(&sc),
            "--cwd",
            s(w.path()),
            "make a file",
        ],
    );
    o.expect_code(0);
    let r = o.result();
    assert_eq!(
        std::fs::read_to_string(w.path().join("made.txt"))
            .ok()
            .as_deref(),
        Some("made\n"),
        "{r}"
    );
    assert_eq!(
        calls(&r),
        vec![call("b1", "bash", true), call("r1", "read_file", true)],
        "{r}"
    );
    assert_eq!(r["denials"], json!([]), "{r}");
}

// ---- 8. signals ----------------------------------------------------------------------------

/// Starts a stream-json run of `turns`, waits for its `start` line and signals it.
fn signal_mid_turn(
    home: &Path,
    cwd: &Path,
    turns: &[Value],
    sig: Signal,
    before_signal: impl FnOnce(&mut Running),
) -> (crate::support::headless::Output, Duration, Value) {
    let d = tmp();
    let sc = script(d.path(), "t.jsonl", turns);
    let mut running = Running::start(
        home,
        &[
            "run",
            "--output-format",
            "stream-json",
            "--script",
            s(&sc),
            "--cwd",
            s(cwd),
            "first prompt",
        ],
        &[],
        Input::Null,
    );
    let start = running.wait_type(DEADLINE, "start");
    before_signal(&mut running);
    running.signal(sig);
    let signalled = Instant::now();
    let o = running.finish(DEADLINE);
    let took = signalled.elapsed();
    (o, took, start)
}

#[test]
fn sigint_cancels_records_and_the_record_can_be_resumed() {
    let (home, w) = (tmp(), ws());
    // Text streams, then the model stalls: the delta is on stdout while the turn runs.
    let turns = [json!({"events": [{"text": "partial "}, {"delayMs": 30000}, {"text": "rest"}]})];
    let (o, took, start) = signal_mid_turn(home.path(), w.path(), &turns, Signal::SIGINT, |r| {
        r.wait_type(DEADLINE, "delta");
    });
    o.expect_code(130);
    assert!(
        took < AFTER_SIGNAL,
        "exit {took:?} after SIGINT\n{}",
        o.dump()
    );
    let r = o.last_result();
    assert_eq!(r["status"], "cancelled", "{r}");
    assert_eq!(r["exitCode"], 130, "{r}");
    let record = nonempty_str(&r, "recordId").to_string();
    assert_eq!(start["recordId"], record.as_str());
    assert!(
        o.stderr_closed,
        "something the run started still holds its stderr"
    );

    // The record continues.
    let d = tmp();
    let sc = script(d.path(), "r.jsonl", &[json!({"text": "resumed answer"})]);
    let o = run(
        home.path(),
        &[
            "run",
            "--output-format",
            "json",
            "--resume",
            &record,
            "--script",
            s(&sc),
            "--cwd",
            s(w.path()),
            "second prompt",
        ],
    );
    o.expect_code(0);
    let r = o.result();
    assert_eq!(r["result"], "resumed answer", "{r}");
    assert_eq!(r["recordId"], record.as_str(), "{r}");
    let m = contents(&record_messages(&db(home.path()), &record));
    let first = m.iter().position(|c| c == "first prompt");
    let second = m.iter().position(|c| c == "second prompt");
    assert!(
        matches!((first, second), (Some(a), Some(b)) if a < b),
        "{m:?}"
    );
    assert_eq!(
        m.last().map(String::as_str),
        Some("resumed answer"),
        "{m:?}"
    );
}

#[test]
fn sigterm_cancels_with_exit_143() {
    let (home, w) = (tmp(), ws());
    let (o, took, _) = signal_mid_turn(
        home.path(),
        w.path(),
        &slow_turns(),
        Signal::SIGTERM,
        |_| {},
    );
    o.expect_code(143);
    assert!(
        took < AFTER_SIGNAL,
        "exit {took:?} after SIGTERM\n{}",
        o.dump()
    );
    let r = o.last_result();
    assert_eq!(r["status"], "cancelled", "{r}");
    assert_eq!(r["exitCode"], 143, "{r}");
    nonempty_str(&r, "recordId");
}

#[test]
fn sigint_during_a_bash_tool_leaves_no_process_behind() {
    let (home, w) = (tmp(), ws());
    // A duration no other test uses, so its processes can be found by argument.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let secs = format!("31.{:06}", nanos % 1_000_000);
    let command = format!("sleep {secs}");
    let turns = vec![
        json!({"toolCalls": [{"id": "s1", "name": "bash", "arguments": {"command": command}}]}),
        json!({"text": "never"}),
    ];
    let live = || {
        let mut p = pids_with_arg(&secs);
        p.extend(pids_with_arg(&command));
        p
    };
    let (o, took, _) = signal_mid_turn(home.path(), w.path(), &turns, Signal::SIGINT, |r| {
        r.wait_line(DEADLINE, |l| {
            l.contains("\"toolCall\"") && l.contains("\"s1\"")
        });
        assert!(
            wait_until(Duration::from_secs(20), || !live().is_empty()),
            "the bash tool never started `{command}`"
        );
    });
    o.expect_code(130);
    assert!(
        took < AFTER_SIGNAL,
        "exit {took:?} after SIGINT\n{}",
        o.dump()
    );
    let r = o.last_result();
    assert_eq!(r["status"], "cancelled", "{r}");
    nonempty_str(&r, "recordId");
    assert!(
        wait_until(Duration::from_secs(5), || live().is_empty()),
        "left behind: {:?}",
        live()
    );
    assert!(
        o.stderr_closed,
        "something the run started still holds its stderr"
    );
}

// ---- 9. sessions and the store -------------------------------------------------------------

#[test]
fn session_twice_continues_the_record() {
    let server = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let home = tmp();
    let url = server.base_url();
    let turn = |prompt: &str| {
        let o = run(
            home.path(),
            &[
                "run",
                "--provider",
                "openai_compat",
                "--base-url",
                &url,
                "--model",
                "m",
                "--session",
                "trial_7",
                "--output-format",
                "json",
                prompt,
            ],
        );
        o.expect_code(0);
        o.result()
    };
    let r1 = turn("first prompt");
    assert_eq!(r1["sessionId"], "trial_7", "{r1}");
    assert_eq!(r1["recordId"], "trial_7", "{r1}");
    let r2 = turn("second prompt");
    assert_eq!(r2["sessionId"], "trial_7", "{r2}");
    assert_eq!(r2["recordId"], "trial_7", "{r2}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        dialogue(&reqs[0].body),
        vec![pair("user", "first prompt")],
        "{}",
        reqs[0].body
    );
    assert_eq!(
        dialogue(&reqs[1].body),
        vec![
            pair("user", "first prompt"),
            pair("assistant", "Hello"),
            pair("user", "second prompt")
        ],
        "{}",
        reqs[1].body
    );
}

#[test]
fn storage_path_is_accepted_before_and_after_run() {
    let (home, d) = (tmp(), tmp());
    let sc = script(d.path(), "t.jsonl", &[json!({"text": "stored"})]);
    for (i, before) in [false, true].into_iter().enumerate() {
        let store = d.path().join(format!("elsewhere_{i}.db"));
        let mut args = vec!["run", "--storage-path", s(&store)];
        if before {
            args.swap(0, 1);
            args.swap(1, 2);
        }
        args.extend_from_slice(&["--output-format", "json", "--script", s(&sc), "hi"]);
        let o = run(home.path(), &args);
        o.expect_code(0);
        assert!(store.is_file(), "{args:?}: no store at {}", store.display());
        let record = nonempty_str(&o.result(), "recordId").to_string();
        let m = contents(&record_messages(&store, &record));
        assert_eq!(m, ["hi", "stored"], "{args:?}");
    }
    assert!(
        !db(home.path()).exists(),
        "the default store was created too"
    );
}

// ---- 10. timeout ---------------------------------------------------------------------------

#[test]
fn timeout_cancels_the_turn_with_exit_1() {
    let (home, d) = (tmp(), tmp());
    let sc = script(d.path(), "t.jsonl", &slow_turns());
    let o = run(
        home.path(),
        &[
            "run",
            "--timeout",
            "1",
            "--output-format",
            "json",
            "--script",
            s(&sc),
            "hi",
        ],
    );
    o.expect_code(1);
    assert!(o.elapsed < Duration::from_secs(20), "{}", o.dump());
    let r = o.result();
    assert_eq!(r["status"], "timeout", "{r}");
    assert_eq!(r["exitCode"], 1, "{r}");
    let record = nonempty_str(&r, "recordId").to_string();
    // Recorded: the prompt is in the store.
    let m = contents(&record_messages(&db(home.path()), &record));
    assert_eq!(m.first().map(String::as_str), Some("hi"), "{m:?}");
}

// ---- 11. web tools -------------------------------------------------------------------------

#[test]
fn no_web_tools_leaves_web_fetch_and_web_search_out() {
    let server = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let url = server.base_url();
    let offered = |extra: &[&str]| {
        let home = tmp();
        let mut args = vec![
            "run",
            "--provider",
            "openai_compat",
            "--base-url",
            &url,
            "--model",
            "m",
        ];
        args.extend_from_slice(extra);
        args.push("hi");
        run(home.path(), &args).expect_code(0);
        let reqs = server.requests();
        fake_router::tool_names(&reqs.last().unwrap().body)
    };
    // By default web_fetch is offered (`web_tools` defaults to true; web_search needs a
    // configured backend).
    let default = offered(&[]);
    assert!(default.iter().any(|n| n == "web_fetch"), "{default:?}");
    let without = offered(&["--no-web-tools"]);
    assert!(
        !without
            .iter()
            .any(|n| n == "web_fetch" || n == "web_search"),
        "{without:?}"
    );
    assert!(without.iter().any(|n| n == "read_file"), "{without:?}");
}

// ---- 12. MCP -------------------------------------------------------------------------------

#[test]
fn mcp_config_offers_the_servers_tools_and_stops_the_server() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/fake_server.py");
    let python = mcp_venv_python();
    let server = FakeServer::start(vec![Reply::fixture("openai_reference")]);
    let url = server.base_url();
    let d = tmp();
    let shapes = |pid_file: &Path| {
        [
            json!({"mcpServers": {"fake": {"command": python, "args": [fixture],
                                           "env": {"FAKE_PID_FILE": pid_file}}}}),
            json!([{"name": "fake", "command": python, "args": [fixture],
                    "env": {"FAKE_PID_FILE": pid_file}}]),
        ]
    };
    for i in 0..2 {
        let pid_file = d.path().join(format!("pid_{i}"));
        let config = d.path().join(format!("mcp_{i}.json"));
        std::fs::write(&config, shapes(&pid_file)[i].to_string()).unwrap();
        let home = tmp();
        let o = run(
            home.path(),
            &[
                "run",
                "--provider",
                "openai_compat",
                "--base-url",
                &url,
                "--model",
                "m",
                "--mcp-config",
                s(&config),
                "hi",
            ],
        );
        o.expect_code(0);
        assert_eq!(o.stdout, "Hello\n", "{}", o.dump());
        let names = fake_router::tool_names(&server.requests().last().unwrap().body);
        assert!(
            names.iter().any(|n| n == "mcp__fake__peek"),
            "shape {i}: {names:?}"
        );
        // The server ran, and is gone with the run.
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap_or_else(|e| panic!("shape {i}: the MCP server never started: {e}"))
            .trim()
            .parse()
            .unwrap();
        assert!(
            wait_until(Duration::from_secs(6), || !Path::new(&format!(
                "/proc/{pid}"
            ))
            .exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|st| st.split_whitespace().nth(2) == Some("Z"))),
            "shape {i}: the MCP server {pid} outlived the run"
        );
    }
}
