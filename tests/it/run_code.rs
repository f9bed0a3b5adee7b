//! `run_code` over the pipes: a Python program (real `python3`, real sandbox launcher) whose
//! `tools.*` calls run inside one tool call. Driven through `tool.invoke {name: "run_code",
//! consentGranted: true, context: {cwd}}` (nested calls go straight to the sidecar's router)
//! and through scripted-provider turns with `runCode: true`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{Opts, Sidecar, WAIT, pids_with_arg, wait_until, write_file};
use crate::support::chat_helpers::{self, finish, merge, messages, scripted, until};
use crate::support::host::tool_body;
use serde_json::{Value, json};

/// Python that puts the real `os` module's globals in `g`, around the import guard (the
/// guard is no boundary; the sandbox and the scrubbed environment are).
const OS_ROUTE: &str = "g = next(c for c in ().__class__.__base__.__subclasses__() if c.__name__ == \"_wrap_close\").__init__.__globals__\n";

const ALLOWED: [&str; 17] = [
    "json",
    "math",
    "datetime",
    "re",
    "collections",
    "itertools",
    "functools",
    "decimal",
    "statistics",
    "textwrap",
    "string",
    "unicodedata",
    "html",
    "typing",
    "operator",
    "copy",
    "numbers",
];

/// A sidecar with `run_code` registered (`OUTRIGGER_RUN_CODE=1`) plus `env`.
fn start(env: &[(&str, &str)]) -> Sidecar {
    let mut all = vec![("OUTRIGGER_RUN_CODE".to_string(), "1".to_string())];
    all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Sidecar::start_with(Opts {
        env: all,
        ..Opts::default()
    })
}

/// `tool.invoke run_code` in workspace `ws`; returns the ToolResult.
fn run_code(s: &mut Sidecar, ws: &Path, code: &str) -> Value {
    s.ok(
        "tool.invoke",
        json!({"name": "run_code", "arguments": {"code": code, "description": "test program"},
               "consentGranted": true, "context": {"cwd": ws}}),
    )
}

/// Sends `tool.invoke run_code` and waits at most `within` for its result; `None` when none
/// came (the sidecar is still running the program).
fn run_code_within(s: &mut Sidecar, ws: &Path, code: &str, within: Duration) -> Option<Value> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = format!(
        "rc-{}",
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tool.invoke",
                   "params": {"name": "run_code",
                              "arguments": {"code": code, "description": "test program"},
                              "consentGranted": true, "context": {"cwd": ws}}}));
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let f = s.next_frame(left)?;
        if f["id"] == id.as_str() {
            assert!(f.get("error").is_none(), "{f}");
            return Some(f["result"].clone());
        }
    }
}

/// The value of a successful run.
fn value(tr: &Value) -> Value {
    assert_eq!(tr["success"], true, "{tr}");
    assert!(
        tr["data"].as_object().unwrap().contains_key("value"),
        "{tr}"
    );
    tr["data"]["value"].clone()
}

/// The error of a failed run.
fn error(tr: &Value) -> String {
    assert_eq!(tr["success"], false, "{tr}");
    tr["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error string: {tr}"))
        .to_string()
}

/// A per-test unique `sleep` argument, so process scans never see another test's sleeps.
fn unique_secs(tag: u32) -> String {
    format!("{}.{:06}{tag}", 4000 + tag, std::process::id() % 1_000_000)
}

/// SIGKILLs, by pid, whatever still runs with a test's unique sleep argument when the test
/// ends, passed or failed.
struct Reap(String);

impl Drop for Reap {
    fn drop(&mut self) {
        for pid in pids_with_arg(&self.0) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

fn no_sleep_left(arg: &str) {
    assert!(
        wait_until(Duration::from_secs(5), || pids_with_arg(arg).is_empty()),
        "sleep {arg} survived: {:?}",
        pids_with_arg(arg)
    );
}

/// A nested call's kept result: the tool's result as JSON text (or an object).
/// A `data.calls` entry's result: `{success, error?, text}`, where `text` is the tool
/// message's JSON (cut at 2,000 characters); returned parsed, with `success` checked to agree.
fn call_result(call: &Value) -> Value {
    let r = &call["result"];
    let text = r["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no result text: {call}"));
    let parsed: Value = serde_json::from_str(text).unwrap_or_else(|_| json!(text));
    assert_eq!(parsed["success"], r["success"], "{call}");
    parsed
}

#[test]
fn one_program_greps_reads_and_edits() {
    let ws = tempfile::tempdir().unwrap();
    write_file(ws.path(), "a.txt", "nothing here\n");
    write_file(ws.path(), "b.txt", "first line\nthe needle is here\nlast\n");
    let mut s = start(&[]);
    let code = r#"hits = tools.grep(pattern="needle")
files = hits["data"]["files"]
r = tools.read_file(path=files[0])
e = tools.call("edit_file", path=files[0], edits=[{"oldText": "needle", "newText": "thread"}], expectedVersion=r["data"]["version"])
print("edited", files[0])
return {"files": files, "first": r["data"]["content"].splitlines()[0], "applied": e["data"]["applied"], "ok": [hits["success"], r["success"], e["success"]]}"#;
    let tr = run_code(&mut s, ws.path(), code);
    assert_eq!(
        value(&tr),
        json!({"files": ["b.txt"], "first": "first line", "applied": 1, "ok": [true, true, true]}),
        "{tr}"
    );
    let d = &tr["data"];
    assert_eq!(d["description"], "test program", "{tr}");
    assert_eq!(d["_sandbox"]["backend"], "landlock", "{tr}");
    assert!(d["logs"].as_str().unwrap().contains("edited b.txt"), "{tr}");
    let calls = d["calls"].as_array().unwrap();
    let tools: Vec<&str> = calls.iter().map(|c| c["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["grep", "read_file", "edit_file"], "{tr}");
    assert_eq!(calls[0]["arguments"], json!({"pattern": "needle"}), "{tr}");
    assert_eq!(calls[1]["arguments"], json!({"path": "b.txt"}), "{tr}");
    assert_eq!(calls[2]["arguments"]["path"], "b.txt", "{tr}");
    assert!(calls[2]["arguments"]["expectedVersion"].is_string(), "{tr}");
    for c in calls {
        let r = call_result(c);
        assert_eq!(r["success"], true, "{c}");
    }
    assert!(
        call_result(&calls[1])["data"]["content"]
            .as_str()
            .unwrap()
            .contains("the needle is here"),
        "{tr}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("b.txt")).unwrap(),
        "first line\nthe thread is here\nlast\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "nothing here\n"
    );
}

#[test]
fn value_types_and_a_non_json_value() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[]);
    let cases = [
        (
            r#"return {"a": [1, 2.5, True, None], "b": {"c": "d"}}"#,
            json!({"a": [1, 2.5, true, null], "b": {"c": "d"}}),
        ),
        (
            r#"return [1, "two", None, False]"#,
            json!([1, "two", null, false]),
        ),
        ("return None", json!(null)),
        ("x = 1", json!(null)),
        (r#"return "h\u00e9llo""#, json!("héllo")),
        ("return 42", json!(42)),
    ];
    for (code, want) in cases {
        let tr = run_code(&mut s, ws.path(), code);
        assert_eq!(value(&tr), want, "{code}: {tr}");
    }
    let tr = run_code(&mut s, ws.path(), "return object()");
    let e = error(&tr);
    assert!(e.contains("object") && e.contains("not JSON"), "{tr}");
    assert!(tr["data"].get("value").is_none_or(Value::is_null), "{tr}");
    let tr = run_code(&mut s, ws.path(), "return {1, 2}");
    let e = error(&tr);
    assert!(e.contains("set") && e.contains("not JSON"), "{tr}");
    // An exception in the program is a failed result naming it.
    let tr = run_code(&mut s, ws.path(), "raise ValueError('bad input')");
    assert!(error(&tr).contains("ValueError: bad input"), "{tr}");
}

#[test]
fn allowed_imports_work_and_others_are_refused_naming_the_list() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[]);
    let checks = [
        ("json", r#"json.loads("[1]") == [1]"#),
        ("math", "math.sqrt(16) == 4"),
        (
            "datetime",
            r#"datetime.datetime.strptime("2024-03-05 10:11", "%Y-%m-%d %H:%M").day == 5 and datetime.date(2024, 1, 2).isoformat() == "2024-01-02""#,
        ),
        ("re", r#"re.sub(r"a+", "b", "caat") == "cbt""#),
        ("collections", r#"collections.Counter("aab")["a"] == 2"#),
        ("itertools", "list(itertools.chain([1], [2])) == [1, 2]"),
        (
            "functools",
            "functools.reduce(lambda a, b: a + b, [1, 2, 3]) == 6",
        ),
        (
            "decimal",
            r#"str(decimal.Decimal("0.1") + decimal.Decimal("0.2")) == "0.3""#,
        ),
        ("statistics", "statistics.mean([1, 2, 3]) == 2"),
        ("textwrap", r#"textwrap.dedent("  a\n  b") == "a\nb""#),
        ("string", r#"string.ascii_lowercase[:3] == "abc""#),
        (
            "unicodedata",
            r#"unicodedata.name("\u00e9") == "LATIN SMALL LETTER E WITH ACUTE""#,
        ),
        ("html", r#"html.escape("<a>") == "&lt;a&gt;""#),
        ("typing", "typing.get_origin(typing.List[int]) is list"),
        ("operator", "operator.add(2, 3) == 5"),
        ("copy", "copy.deepcopy([[1]]) == [[1]]"),
        ("numbers", "isinstance(3, numbers.Integral)"),
    ];
    assert_eq!(checks.len(), ALLOWED.len());
    let mut code = String::from("res = {}\n");
    for (m, check) in checks {
        code.push_str(&format!(
            "try:\n    import {m}\n    res[\"{m}\"] = bool({check})\nexcept BaseException as e:\n    res[\"{m}\"] = \"%s: %s\" % (type(e).__name__, e)\n"
        ));
    }
    code.push_str("return res\n");
    let tr = run_code(&mut s, ws.path(), &code);
    let got = value(&tr);
    for m in ALLOWED {
        assert_eq!(got[m], true, "import {m}: {}", got[m]);
    }

    let refused = [
        ("os", "import os"),
        ("subprocess", "import subprocess"),
        ("socket", "import socket"),
        ("sys", "import sys"),
        ("os", "x = __import__(\"os\")"),
        ("os", "from os import path"),
    ];
    let mut code = String::from("res = []\n");
    for (_, stmt) in refused {
        code.push_str(&format!(
            "try:\n    {stmt}\n    res.append(\"imported\")\nexcept BaseException as e:\n    res.append(\"%s: %s\" % (type(e).__name__, e))\n"
        ));
    }
    code.push_str("return res\n");
    let tr = run_code(&mut s, ws.path(), &code);
    let got = value(&tr);
    for (i, (module, stmt)) in refused.iter().enumerate() {
        let msg = got[i].as_str().unwrap();
        assert!(
            msg.starts_with("ImportError") && msg.contains(module),
            "{stmt}: {msg}"
        );
        for m in ALLOWED {
            assert!(msg.contains(m), "{stmt}: the message lacks {m}: {msg}");
        }
    }
    // Uncaught, the refusal fails the run with the same message.
    let tr = run_code(&mut s, ws.path(), "import subprocess\nreturn 1");
    let e = error(&tr);
    assert!(
        e.contains("ImportError") && e.contains("subprocess") && e.contains("json, math, datetime"),
        "{tr}"
    );
}

#[test]
fn the_environment_is_scrubbed_on_both_routes() {
    let ws = tempfile::tempdir().unwrap();
    let secrets = [
        ("SECRET_TOKEN", "tok-s3cr3t-77810"),
        ("OPENAI_API_KEY", "sk-leak-99310"),
        ("OUTRIGGER_SOMETHING", "outrigger-leak-55210"),
    ];
    let mut s = start(&secrets);
    let code = format!(
        "{OS_ROUTE}environ = dict(g[\"environ\"])
fd = g[\"open\"](\"/proc/self/environ\", g[\"O_RDONLY\"])
raw = b\"\"
while True:
    chunk = g[\"read\"](fd, 65536)
    if not chunk:
        break
    raw += chunk
g[\"close\"](fd)
proc = [e.decode(\"utf-8\", \"replace\") for e in raw.split(b\"\\0\") if e]
return {{\"environ\": environ, \"proc\": proc}}"
    );
    let tr = run_code(&mut s, ws.path(), &code);
    let v = value(&tr);
    let environ = v["environ"].as_object().unwrap();
    let proc: Vec<&str> = v["proc"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    // Both routes really read the environment.
    assert!(environ.contains_key("PATH"), "{v}");
    assert!(proc.iter().any(|e| e.starts_with("PATH=")), "{v}");
    assert_eq!(environ["PYTHONDONTWRITEBYTECODE"], "1", "{v}");
    assert!(proc.contains(&"PYTHONDONTWRITEBYTECODE=1"), "{v}");
    let names: Vec<String> = environ
        .keys()
        .cloned()
        .chain(
            proc.iter()
                .map(|e| e.split_once('=').map_or(*e, |p| p.0).to_string()),
        )
        .collect();
    for n in &names {
        assert!(!n.starts_with("OUTRIGGER_"), "{n} leaked: {v}");
    }
    let text = v.to_string();
    for (k, val) in secrets {
        assert!(!text.contains(k), "{k} leaked: {v}");
        assert!(!text.contains(val), "the value of {k} leaked: {v}");
    }
}

#[test]
fn nested_run_code_is_refused_inside_the_program() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[]);
    let code = r#"try:
    tools.run_code(code="return 1", description="x")
    return "no error"
except ToolError as e:
    return str(e)"#;
    let tr = run_code(&mut s, ws.path(), code);
    let v = value(&tr);
    assert!(
        v.as_str()
            .unwrap()
            .contains("run_code cannot call run_code"),
        "{tr}"
    );
}

#[test]
fn the_33rd_call_raises_naming_the_limit() {
    let ws = tempfile::tempdir().unwrap();
    write_file(ws.path(), "x.txt", "x");
    let mut s = start(&[]);
    let code = r#"done = 0
for i in range(33):
    try:
        tools.ls(path=".")
        done += 1
    except ToolError as e:
        return {"done": done, "error": str(e)}
return {"done": done}"#;
    let tr = run_code(&mut s, ws.path(), code);
    let v = value(&tr);
    assert_eq!(v["done"], 32, "{v}");
    let e = v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error: {v}"));
    assert!(e.contains("32") && e.contains("at most"), "{e}");
    let calls = tr["data"]["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 32, "{tr}");
    assert!(calls.iter().all(|c| c["tool"] == "ls"), "{tr}");
}

#[test]
fn source_cap_is_100000_characters() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[]);
    // 100,000 characters (200,000 bytes) is accepted: the cap counts characters.
    let head = "return 1\n#";
    let code = format!("{head}{}", "é".repeat(100_000 - head.len()));
    assert_eq!(code.chars().count(), 100_000);
    let tr = run_code(&mut s, ws.path(), &code);
    assert_eq!(value(&tr), json!(1), "{}", tr["error"]);
    // One more is refused before any process starts: no sandbox marker, no logs, no calls.
    let code = format!("{head}{}", "#".repeat(100_001 - head.len()));
    let t = Instant::now();
    let tr = run_code(&mut s, ws.path(), &code);
    let took = t.elapsed();
    let e = error(&tr);
    assert!(e.contains("100000") && e.contains("100001"), "{e}");
    let d = tr["data"].as_object().unwrap();
    for k in ["_sandbox", "logs", "calls", "value"] {
        assert!(!d.contains_key(k), "{k} present: a process ran? {d:?}");
    }
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn timeout_kills_the_program_and_what_it_started() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[("OUTRIGGER_RUN_CODE_TIMEOUT_MS", "1500")]);
    let arg = unique_secs(1);
    let _reap = Reap(arg.clone());
    let pid_file = ws.path().join("sleep.pid");
    let code = format!(
        "{OS_ROUTE}g[\"system\"](\"sleep {arg} & echo $! > {}\")\nwhile True:\n    pass",
        pid_file.display()
    );
    expect_timeout(&mut s, ws.path(), &code);
    assert!(pid_file.exists(), "the program never started its sleep");
    no_sleep_left(&arg);
    s.ok("system.ping", Value::Null);
}

/// Runs `code` on a sidecar with `run_code_timeout_ms=1500`: a failure naming the limit must
/// come within 4 s.
fn expect_timeout(s: &mut Sidecar, ws: &Path, code: &str) -> Value {
    let t = Instant::now();
    let tr = run_code_within(s, ws, code, Duration::from_secs(8)).unwrap_or_else(|| {
        panic!(
            "no result {:?} after the start, with run_code_timeout_ms=1500",
            t.elapsed()
        )
    });
    let took = t.elapsed();
    let e = error(&tr);
    assert!(
        e.contains("run_code_timeout_ms=1500"),
        "{e}: {}",
        tr["data"]
    );
    assert!(took < Duration::from_secs(4), "{took:?}");
    tr
}

#[test]
fn timeout_applies_while_a_nested_call_runs() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[("OUTRIGGER_RUN_CODE_TIMEOUT_MS", "1500")]);
    let arg = unique_secs(4);
    let _reap = Reap(arg.clone());
    // bash's own timeout is 120 s; the program's limit is 1.5 s.
    let code = format!("tools.bash(command=\"sleep {arg}\")\nreturn 1");
    expect_timeout(&mut s, ws.path(), &code);
    no_sleep_left(&arg);
}

#[test]
fn timeout_applies_when_the_program_never_reads_its_reply() {
    let ws = tempfile::tempdir().unwrap();
    // A read_file reply of ~100 KB: more than the pipe to the program holds.
    write_file(
        ws.path(),
        "big.txt",
        &format!("{}\n", "y".repeat(99)).repeat(3000),
    );
    let mut s = start(&[("OUTRIGGER_RUN_CODE_TIMEOUT_MS", "1500")]);
    let arg = unique_secs(5);
    let _reap = Reap(arg.clone());
    let code = format!(
        "{OS_ROUTE}g[\"write\"](1, b'{{\"v\": 1, \"type\": \"call\", \"id\": 1, \"tool\": \"read_file\", \"arguments\": {{\"path\": \"big.txt\", \"limit\": 3000}}}}\\n')\ng[\"system\"](\"sleep {arg}\")"
    );
    expect_timeout(&mut s, ws.path(), &code);
    no_sleep_left(&arg);
}

#[test]
fn confined_program_that_closes_stdout_still_times_out() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[
        ("OUTRIGGER_RUN_CODE_TIMEOUT_MS", "1500"),
        ("OUTRIGGER_SIDECAR_CONFINED", "1"),
    ]);
    let arg = unique_secs(6);
    let _reap = Reap(arg.clone());
    // stdout closes (EOF for the sidecar) while the interpreter keeps running.
    let code = format!("{OS_ROUTE}g[\"close\"](1)\ng[\"system\"](\"sleep {arg}\")");
    let t = Instant::now();
    let tr = run_code_within(&mut s, ws.path(), &code, Duration::from_secs(8))
        .unwrap_or_else(|| panic!("no result {:?} after the start", t.elapsed()));
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    assert_eq!(tr["success"], false, "{tr}");
    no_sleep_left(&arg);
}

#[test]
fn cancel_of_a_turn_kills_the_program_and_what_it_started() {
    let ws = tempfile::tempdir().unwrap();
    // run_code is off in the config; the turn asks for it.
    let mut s = Sidecar::start();
    let (bg, fg) = (unique_secs(2), unique_secs(3));
    let _reap = (Reap(bg.clone()), Reap(fg.clone()));
    let pid_file = ws.path().join("sleep.pid");
    let code = format!(
        "{OS_ROUTE}g[\"system\"](\"sleep {bg} & echo $! > {}\")\ng[\"system\"](\"sleep {fg}\")\nreturn 1",
        pid_file.display()
    );
    let script = json!([
        {"toolCalls": [{"id": "rc", "name": "run_code", "arguments": {"code": code, "description": "spin"}}]},
        {"text": "never"}
    ]);
    let p = merge(
        scripted(script, "run it"),
        json!({"cwd": ws.path(), "runCode": true}),
    );
    let id = chat_helpers::start(&mut s, p);
    let mut frames = until(&mut s, &id, |f| f["params"]["toolCall"]["id"] == "rc");
    assert!(
        wait_until(Duration::from_secs(20), || pid_file.exists()
            && !pids_with_arg(&fg).is_empty()),
        "the program never started its sleeps"
    );
    assert!(
        !pids_with_arg(&bg).is_empty(),
        "background sleep not running"
    );
    let t = Instant::now();
    s.ok("agent.chat.cancel", json!({"streamId": id}));
    frames.extend(until(&mut s, &id, |f| f["method"] == "stream.done"));
    let r = finish(&mut s, &id, frames);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(r.done["status"], "cancelled", "{:?}", r.frames);
    let res = r.with("toolResult");
    assert_eq!(res.len(), 1, "{:?}", r.frames);
    assert_eq!(res[0]["success"], false, "{}", res[0]);
    no_sleep_left(&bg);
    no_sleep_left(&fg);
}

#[test]
fn garbage_exit_and_flood_on_stdout_fail_without_hanging() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[]);
    let t = Instant::now();
    let tr = run_code(
        &mut s,
        ws.path(),
        &format!("{OS_ROUTE}g[\"write\"](1, b\"garbage\\n\")\nreturn 1"),
    );
    let e = error(&tr);
    assert!(
        e.contains("not protocol JSON") && e.contains("garbage"),
        "{tr}"
    );

    let tr = run_code(&mut s, ws.path(), &format!("{OS_ROUTE}g[\"_exit\"](3)"));
    let e = error(&tr);
    assert!(e.contains("exit") && e.contains('3'), "{tr}");

    let tr = run_code(
        &mut s,
        ws.path(),
        &format!("{OS_ROUTE}g[\"write\"](1, b\"x\" * (5 << 20))\nreturn 1"),
    );
    let e = error(&tr);
    assert!(e.contains("flood"), "{tr}");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    // Still serving, and a good program still runs.
    let tr = run_code(&mut s, ws.path(), "return 7");
    assert_eq!(value(&tr), json!(7));
}

/// Whether `tool.list` names `run_code`.
fn lists_run_code(s: &mut Sidecar) -> bool {
    let list = s.ok("tool.list", json!({}));
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"read_file"), "{list}");
    names.contains(&"run_code")
}

#[test]
fn no_python_unregisters_run_code_and_says_why() {
    let mut s = start(&[("OUTRIGGER_RUN_CODE_PYTHON", "/nonexistent/python3")]);
    assert!(
        wait_until(Duration::from_secs(10), || !lists_run_code(&mut s)),
        "run_code still registered without a Python"
    );
    let h = s.ok("system.ping", Value::Null);
    assert!(h["pythonVersion"].is_null(), "{h}");
    let line = s.stderr_line_matching("run_code is off", WAIT);
    assert!(line.contains("Python"), "{line}");
    let ws = tempfile::tempdir().unwrap();
    let tr = s.ok(
        "tool.invoke",
        json!({"name": "run_code", "arguments": {"code": "return 1", "description": "x"},
               "consentGranted": true, "context": {"cwd": ws.path()}}),
    );
    assert!(error(&tr).contains("Unknown tool: run_code"), "{tr}");
}

#[test]
fn the_default_python_is_reported_and_run_code_stays() {
    let out = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .expect("python3 on PATH");
    let want = String::from_utf8_lossy(&out.stdout)
        .trim()
        .replace("Python ", "");
    let mut s = start(&[]);
    let mut seen = Value::Null;
    assert!(
        wait_until(Duration::from_secs(10), || {
            seen = s.ok("system.ping", Value::Null)["pythonVersion"].clone();
            seen == json!(want)
        }),
        "pythonVersion {seen}, want {want}"
    );
    assert!(lists_run_code(&mut s));
}

#[test]
fn confined_sidecar_marks_the_run_inherited() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[("OUTRIGGER_SIDECAR_CONFINED", "1")]);
    let tr = run_code(&mut s, ws.path(), "return 1");
    assert_eq!(value(&tr), json!(1));
    assert_eq!(
        tr["data"]["_sandbox"],
        json!({"backend": "inherited", "enforcement": "partial", "via": "layer1"}),
        "{tr}"
    );
}

#[test]
fn a_model_turn_uses_run_code_only_when_asked() {
    let ws = tempfile::tempdir().unwrap();
    write_file(ws.path(), "notes.txt", "alpha bravo 31337\nsecond line\n");
    let mut s = Sidecar::start();
    assert!(!lists_run_code(&mut s), "the config leaves run_code off");
    let code = "r = tools.read_file(path=\"notes.txt\")\nreturn {\"first\": r[\"data\"][\"content\"].splitlines()[0]}";
    let script = json!([
        {"toolCalls": [{"id": "rc1", "name": "run_code", "arguments": {"code": code, "description": "first line"}}]},
        {"text": "The first line is alpha bravo 31337."}
    ]);

    let p = merge(
        scripted(script.clone(), "first line of notes.txt?"),
        json!({"cwd": ws.path(), "chatId": "rc_turn_on", "runCode": true}),
    );
    let r = chat_helpers::run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    // The nested read_file shows on the stream inside the run_code call (parentId).
    let calls = r.with("toolCall");
    assert_eq!(calls.len(), 2, "{:?}", r.frames);
    assert_eq!(calls[0]["id"], "rc1");
    assert!(calls[0].get("parentId").is_none(), "{}", calls[0]);
    assert_eq!(calls[1]["name"], "read_file");
    assert_eq!(calls[1]["parentId"], "rc1", "{}", calls[1]);
    assert_eq!(calls[1]["arguments"], json!({"path": "notes.txt"}));
    let res = r.with("toolResult");
    assert_eq!(res.len(), 2, "{:?}", r.frames);
    assert_eq!(res[0]["name"], "read_file");
    assert_eq!(res[0]["parentId"], "rc1", "{}", res[0]);
    assert_eq!(res[0]["id"], calls[1]["id"]);
    assert_eq!(res[0]["success"], true, "{}", res[0]);
    assert!(
        res[0]["resultPreview"].as_str().unwrap().contains("alpha"),
        "{}",
        res[0]
    );
    assert_eq!(res[1]["id"], "rc1");
    assert!(res[1].get("parentId").is_none(), "{}", res[1]);
    // The trace has a span for the run_code call and a child span for the nested call.
    let trace = s.ok("trace.fetch", json!({"traceId": r.done["traceId"]}));
    let spans = trace["spans"].as_array().unwrap();
    let run = spans
        .iter()
        .find(|sp| sp["attrs"]["callId"] == "rc1")
        .unwrap_or_else(|| panic!("no run_code span: {trace}"));
    assert_eq!(run["name"], "run_code");
    let child = spans
        .iter()
        .find(|sp| sp["attrs"]["parentCallId"] == "rc1")
        .unwrap_or_else(|| panic!("no nested span: {trace}"));
    assert_eq!(child["name"], "read_file");
    assert_eq!(child["status"], "ok");
    assert_eq!(res[1]["success"], true, "{}", res[1]);
    let body = tool_body(&messages(&mut s, "rc_turn_on"), "rc1");
    assert_eq!(body["success"], true, "{body}");
    assert_eq!(
        body["data"]["value"],
        json!({"first": "alpha bravo 31337"}),
        "{body}"
    );
    assert_eq!(body["data"]["calls"][0]["tool"], "read_file", "{body}");
    assert_eq!(r.text(), "The first line is alpha bravo 31337.");
    // The turn's run_code did not register it on the sidecar.
    assert!(!lists_run_code(&mut s));

    // Without runCode the tool is not offered: the scripted call is an unknown tool.
    let p = merge(
        scripted(script, "first line of notes.txt?"),
        json!({"cwd": ws.path(), "chatId": "rc_turn_off"}),
    );
    let r = chat_helpers::run(&mut s, p);
    let res = r.with("toolResult");
    assert_eq!(res.len(), 1, "{:?}", r.frames);
    assert_eq!(res[0]["success"], false, "{}", res[0]);
    let body = tool_body(&messages(&mut s, "rc_turn_off"), "rc1");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("unknown tool"),
        "{body}"
    );
}

#[test]
fn print_goes_to_bounded_logs() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[]);
    let tr = run_code(
        &mut s,
        ws.path(),
        "for i in range(100000):\n    print(\"line\", i)\nreturn \"printed\"",
    );
    assert_eq!(value(&tr), json!("printed"));
    let logs = tr["data"]["logs"].as_str().unwrap();
    assert!(logs.starts_with("line 0\nline 1\n"), "{}", &logs[..200]);
    assert!(logs.len() <= 12_288 + 100, "{} bytes", logs.len());
    let last = logs.lines().last().unwrap();
    assert!(last.contains("more bytes of output dropped"), "{last}");
    // What was dropped is counted: 100,000 lines are far more than what was kept.
    let dropped: u64 = last
        .trim_start_matches('[')
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("no count in {last}"));
    assert!(dropped > 500_000, "{last}");
}

#[test]
fn exit_during_a_nested_call_names_the_exit() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[]);
    // The call goes out by hand; the interpreter exits while the call (0.3 s) runs.
    let code = format!(
        "{OS_ROUTE}g[\"write\"](1, b'{{\"v\": 1, \"type\": \"call\", \"id\": 1, \"tool\": \"bash\", \"arguments\": {{\"command\": \"sleep 0.3\"}}}}\\n')\ng[\"_exit\"](3)"
    );
    let tr = run_code(&mut s, ws.path(), &code);
    let e = error(&tr);
    assert!(e.contains("exit") && e.contains('3'), "{tr}");
}

#[test]
fn multi_line_strings_keep_their_text() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[]);
    let code = "s = \"\"\"first\nsecond\"\"\"\nreturn s";
    let tr = run_code(&mut s, ws.path(), code);
    assert_eq!(value(&tr), json!("first\nsecond"), "{tr}");
}

#[test]
fn a_nan_return_value_names_its_type() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[]);
    let tr = run_code(&mut s, ws.path(), "return {\"x\": float(\"nan\")}");
    let e = error(&tr);
    assert!(e.contains("not JSON") && !e.contains("protocol"), "{tr}");
}

#[test]
fn a_non_json_call_argument_raises_inside_the_program() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[]);
    let code = "try:\n    tools.ls(path=\".\", depth=float(\"inf\"))\n    return \"sent\"\nexcept Exception as e:\n    return \"caught \" + type(e).__name__";
    let tr = run_code(&mut s, ws.path(), code);
    let v = value(&tr);
    assert!(v.as_str().unwrap().starts_with("caught "), "{tr}");
}

#[test]
fn the_program_writes_only_in_its_workspace() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mut s = start(&[]);
    let inside = ws.path().join("in.txt");
    let out = outside.path().join("out.txt");
    let code = format!(
        "{OS_ROUTE}res = []\nfor p in [{:?}, {:?}]:\n    try:\n        g[\"close\"](g[\"open\"](p, g[\"O_WRONLY\"] | g[\"O_CREAT\"], 0o644))\n        res.append(\"written\")\n    except OSError as e:\n        res.append(type(e).__name__)\nreturn res",
        inside.display().to_string(),
        out.display().to_string()
    );
    let tr = run_code(&mut s, ws.path(), &code);
    assert_eq!(value(&tr), json!(["written", "PermissionError"]), "{tr}");
    assert!(inside.exists());
    assert!(!out.exists());
}

#[test]
fn failed_nested_calls_raise_tool_error_and_are_listed() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start(&[]);
    let code = r#"out = {}
for key, name, args in [("missing", "read_file", {"path": "missing.txt"}), ("schema", "read_file", {"nope": 1}), ("unknown", "no_such_tool", {"x": 1})]:
    try:
        tools.call(name, **args)
        out[key] = "no error"
    except ToolError as e:
        out[key] = str(e)
out["ls"] = tools.ls(path=".")["success"]
return out"#;
    let tr = run_code(&mut s, ws.path(), code);
    let v = value(&tr);
    assert!(
        v["missing"].as_str().unwrap().contains("missing.txt"),
        "{v}"
    );
    assert!(
        v["schema"]
            .as_str()
            .unwrap()
            .contains("Invalid arguments for tool 'read_file'"),
        "{v}"
    );
    assert!(
        v["unknown"]
            .as_str()
            .unwrap()
            .contains("Unknown tool: no_such_tool"),
        "{v}"
    );
    assert_eq!(v["ls"], true, "{v}");
    let calls = tr["data"]["calls"].as_array().unwrap();
    let tools: Vec<&str> = calls.iter().map(|c| c["tool"].as_str().unwrap()).collect();
    assert_eq!(
        tools,
        ["read_file", "read_file", "no_such_tool", "ls"],
        "{tr}"
    );
    let ok: Vec<Value> = calls
        .iter()
        .map(|c| call_result(c)["success"].clone())
        .collect();
    assert_eq!(ok, [false, false, false, true], "{tr}");
}

/// Under `toolsViaHost` run_code is the sidecar's own, and its program's calls to the host's
/// tools go to the host as reverse `tool.invoke`, shown on the stream inside the run_code call.
#[test]
fn nested_calls_reach_host_tools_under_tools_via_host() {
    use crate::support::host::{Reply, descriptor, drive};
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let code = "a = tools.get_events(day=\"mon\")\nb = tools.get_events(day=\"tue\")\nreturn [a[\"data\"][\"count\"], b[\"data\"][\"count\"]]";
    let script = json!([
        {"toolCalls": [{"id": "rc1", "name": "run_code", "arguments": {"code": code, "description": "count"}}]},
        {"text": "done"}
    ]);
    let tools = json!([descriptor(
        "get_events",
        json!({"day": {"type": "string"}}),
        &["day"]
    )]);
    let p = merge(
        scripted(script, "count events"),
        json!({"cwd": ws.path(), "chatId": "rc_host", "runCode": true,
               "toolsViaHost": true, "tools": tools}),
    );
    let id = chat_helpers::start(&mut s, p);
    let (r, reqs) = drive(&mut s, &id, |req| {
        let day = req["params"]["arguments"]["day"].as_str().unwrap_or("");
        Reply::Result(json!({"success": true, "data": {"count": if day == "mon" { 3 } else { 5 }}}))
    });
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let invokes: Vec<&Value> = reqs
        .iter()
        .filter(|q| q["method"] == "tool.invoke")
        .collect();
    assert_eq!(invokes.len(), 2, "{reqs:?}");
    assert_eq!(invokes[0]["params"]["name"], "get_events");
    assert_eq!(invokes[0]["params"]["arguments"], json!({"day": "mon"}));
    let nested_count = r
        .with("toolResult")
        .iter()
        .filter(|t| t["parentId"] == "rc1")
        .count();
    assert_eq!(nested_count, 2, "{:?}", r.frames);
    let body = tool_body(&messages(&mut s, "rc_host"), "rc1");
    assert_eq!(body["success"], true, "{body}");
    assert_eq!(body["data"]["value"], json!([3, 5]), "{body}");
}

/// Under `approval: host` the host approves the run_code call itself and, one by one, each
/// nested call whose tool needs approval; reads run unasked, a denial raises in the program.
#[test]
fn nested_calls_are_put_to_the_host_under_host_approval() {
    use crate::support::host::{Reply, drive};
    let ws = tempfile::tempdir().unwrap();
    write_file(ws.path(), "a.txt", "x\n");
    let mut s = Sidecar::start();
    let code = "r = tools.read_file(path=\"a.txt\")\ntools.bash(command=\"touch allowed.txt\")\ntry:\n    tools.bash(command=\"rm -f a.txt\")\n    return \"ran\"\nexcept ToolError as e:\n    return [r[\"success\"], str(e)]";
    let script = json!([
        {"toolCalls": [{"id": "rc1", "name": "run_code", "arguments": {"code": code, "description": "try"}}]},
        {"text": "done"}
    ]);
    let p = merge(
        scripted(script, "go"),
        json!({"cwd": ws.path(), "chatId": "rc_appr", "runCode": true, "approval": {"mode": "host"}}),
    );
    let id = chat_helpers::start(&mut s, p);
    let (r, reqs) = drive(&mut s, &id, |req| {
        let cmd = req["params"]["arguments"]["command"].as_str().unwrap_or("");
        if cmd.starts_with("rm") {
            Reply::Result(json!({"decision": "deny_once", "reason": "keep a.txt"}))
        } else {
            Reply::Result(json!({"decision": "allow_once"}))
        }
    });
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let asked: Vec<&Value> = reqs
        .iter()
        .filter(|q| q["method"] == "approval.request")
        .collect();
    let names: Vec<(&str, &str)> = asked
        .iter()
        .map(|q| {
            (
                q["params"]["toolName"].as_str().unwrap(),
                q["params"]["callId"].as_str().unwrap(),
            )
        })
        .collect();
    // read_file (rc1.1) is a read: not asked.
    assert_eq!(
        names,
        [("run_code", "rc1"), ("bash", "rc1.2"), ("bash", "rc1.3")],
        "{reqs:?}"
    );
    let body = tool_body(&messages(&mut s, "rc_appr"), "rc1");
    assert_eq!(body["data"]["value"][0], true, "{body}");
    assert!(
        body["data"]["value"][1]
            .as_str()
            .unwrap()
            .contains("approval_denied"),
        "{body}"
    );
    assert!(ws.path().join("allowed.txt").exists());
    assert!(ws.path().join("a.txt").exists());
    // Each decision is a notice, as for the model's own calls.
    assert_eq!(r.notices("approval").len(), 3, "{:?}", r.chunks());
}

/// Without a sandbox backend no program runs: `sandbox_unavailable` with the `none` marker.
#[test]
fn no_sandbox_backend_refuses_to_run() {
    let ws = tempfile::tempdir().unwrap();
    let marker = ws.path().join("ran.txt");
    let mut s = start(&[(
        "OUTRIGGER_SANDBOX_DISABLE_LAYERS",
        "landlock,namespaces,seccomp",
    )]);
    let code = format!(
        "for c in ().__class__.__base__.__subclasses__():\n    if c.__name__ == \"_wrap_close\":\n        open({:?}, \"w\").write(\"x\")\nreturn 1",
        marker.display().to_string()
    );
    let r = run_code(&mut s, ws.path(), &code);
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"], "sandbox_unavailable", "{r}");
    assert_eq!(
        r["data"]["_sandbox"],
        json!({"backend": "none", "enforcement": "none"}),
        "{r}"
    );
    assert!(!marker.exists(), "the program ran");
}

/// A turn's run_code call is checked against the schema like any call: nothing runs.
#[test]
fn a_turn_checks_run_code_arguments() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let script = json!([
        {"toolCalls": [{"id": "rc1", "name": "run_code", "arguments": {"description": "no code"}}]},
        {"text": "done"}
    ]);
    let p = merge(
        scripted(script, "go"),
        json!({"cwd": ws.path(), "chatId": "rc_args", "runCode": true}),
    );
    let r = chat_helpers::run(&mut s, p);
    let res = r.with("toolResult");
    assert_eq!(res.len(), 1, "{:?}", r.frames);
    assert_eq!(res[0]["success"], false, "{}", res[0]);
    let err = res[0]["error"].as_str().unwrap();
    assert!(
        err.contains("Invalid arguments for tool 'run_code'") && err.contains("code"),
        "{err}"
    );
}
