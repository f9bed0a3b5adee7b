//! `outrigger mcp`: our file tools and bash served over stdio MCP, driven by the official
//! Python MCP SDK client (`tests/fixtures/mcp/sdk_client.py`), plus one raw exchange to check
//! that stdout carries nothing but JSON-RPC frames.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, base_command, pids_with_arg, run_once, wait_until};
use crate::support::mcp_deps::mcp_venv_python;

const EXPOSED: [&str; 9] = [
    "read_file",
    "write_file",
    "edit_file",
    "apply_patch",
    "ls",
    "glob",
    "grep",
    "bash",
    "web_fetch",
];

/// Runs the SDK client script on `steps` against `outrigger mcp --root ROOT` and returns its
/// `{initialize, results}` line.
fn sdk(root: &Path, home: &Path, steps: &Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/sdk_client.py");
    let mut child = Command::new(mcp_venv_python())
        .arg(script)
        .arg(common::BIN)
        .arg(root)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("OUTRIGGER_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the SDK client");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(steps.to_string().as_bytes())
        .unwrap();
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the SDK client hung; stderr:\n{}", err.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert!(status.success(), "SDK client failed ({status}):\n{err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("client output ({e}): {out}\n{err}"))
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"op": "call", "name": name, "arguments": arguments})
}

/// The model's text of a call result (the one text block), parsed.
fn text_of(r: &Value) -> Value {
    let content = r["content"].as_array().expect("content");
    assert_eq!(content.len(), 1, "{r}");
    assert_eq!(content[0]["type"], "text", "{r}");
    serde_json::from_str(content[0]["text"].as_str().unwrap()).expect("text is JSON")
}

fn ok(r: &Value) -> &Value {
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["success"], true, "{r}");
    &r["structuredContent"]["data"]
}

fn failed(r: &Value) -> String {
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["success"], false, "{r}");
    r["structuredContent"]["error"]
        .as_str()
        .expect("error")
        .to_string()
}

fn version_of(bytes: &[u8]) -> String {
    outrigger::tools::fs::state::version_of(bytes)
}

#[test]
fn the_python_sdk_lists_reads_edits_with_cas_and_runs_bash_sandboxed() {
    let root = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(root.path().join("keep.txt"), "keep\n").unwrap();
    let v0 = version_of(b"alpha\nbeta\n");
    let escape = outside.path().join("escape");
    let etc = "/etc/outrigger-mcp-test";

    let steps = json!([
        {"op": "list_tools"},
        // 1: overwriting a file this session never read is refused.
        call("write_file", json!({"path": "keep.txt", "content": "clobbered"})),
        // 2-4: read, edit with the read version, edit again with the now stale one.
        call("read_file", json!({"path": "notes.txt"})),
        call("edit_file", json!({"path": "notes.txt", "expectedVersion": v0,
                                 "edits": [{"oldText": "beta", "newText": "gamma"}]})),
        call("edit_file", json!({"path": "notes.txt", "expectedVersion": v0,
                                 "edits": [{"oldText": "alpha", "newText": "omega"}]})),
        // 5-8: bash, sandboxed.
        call("bash", json!({"command": "echo hi"})),
        call("bash", json!({"command": format!("touch {etc}")})),
        call("bash", json!({"command": format!("touch {}", escape.display())})),
        call("bash", json!({"command": "echo made > made.txt"})),
        // 9-10: registered on the router but not served.
        call("tool_search", json!({"query": "x"})),
        call("todo_write", json!({})),
    ]);
    let out = sdk(root.path(), home.path(), &steps);
    let init = &out["initialize"];
    assert_eq!(init["serverInfo"]["name"], "outrigger", "{init}");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    let r = out["results"].as_array().unwrap();
    assert_eq!(r.len(), 11, "{out}");

    // tools/list: exactly our nine, with schemas and mode annotations.
    let tools = r[0]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, EXPOSED, "{}", r[0]);
    for t in tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(t["inputSchema"]["properties"].is_object(), "{t}");
        assert!(!t["description"].as_str().unwrap().is_empty(), "{t}");
    }
    let tool = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap();
    for n in ["read_file", "ls", "glob", "grep"] {
        assert_eq!(tool(n)["annotations"]["readOnlyHint"], true, "{n}");
    }
    for n in ["write_file", "edit_file", "apply_patch", "bash"] {
        let a = &tool(n)["annotations"];
        assert_eq!(a["readOnlyHint"], false, "{n}: {a}");
        assert_eq!(a["destructiveHint"], false, "{n}: {a}");
    }
    let bash_schema = &tool("bash")["inputSchema"];
    assert_eq!(bash_schema["required"], json!(["command"]), "{bash_schema}");

    // Read before write.
    let e = failed(&r[1]);
    assert!(
        e.contains("has not read it") && e.contains("read it first"),
        "{e}"
    );
    assert_eq!(
        r[1]["structuredContent"]["data"]["code"], "not_read",
        "{}",
        r[1]
    );
    assert_eq!(
        std::fs::read_to_string(root.path().join("keep.txt")).unwrap(),
        "keep\n"
    );

    // Read, then CAS edits.
    let read = ok(&r[2]);
    assert_eq!(read["version"], v0, "{read}");
    assert!(read["content"].as_str().unwrap().contains("beta"), "{read}");
    // The text block is the tool message the model gets in a turn.
    assert_eq!(text_of(&r[2])["data"]["version"], v0);
    let edit = ok(&r[3]);
    let v1 = version_of(b"alpha\ngamma\n");
    assert_eq!(edit["version"], v1, "{edit}");
    let e = failed(&r[4]);
    assert!(e.starts_with("conflict:"), "{e}");
    assert_eq!(r[4]["structuredContent"]["data"]["currentVersion"], v1);
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes.txt")).unwrap(),
        "alpha\ngamma\n",
        "the edit landed on disk, the stale one did not"
    );

    // bash: runs, says how it was sandboxed in structured content (not in the model's text).
    let echo = ok(&r[5]);
    assert_eq!(echo["stdout"], "hi\n", "{echo}");
    let marker = &echo["_sandbox"];
    assert!(marker["backend"].is_string(), "{echo}");
    assert!(
        marker["enforcement"] == "full" || marker["enforcement"] == "partial",
        "bash ran unconfined: {echo}"
    );
    assert!(text_of(&r[5])["data"].get("_sandbox").is_none(), "{}", r[5]);
    assert_eq!(text_of(&r[5])["data"]["stdout"], "hi\n");
    // It cannot write outside --root.
    for (i, path) in [(6, Path::new(etc)), (7, escape.as_path())] {
        let e = failed(&r[i]);
        assert_eq!(e, "exit 1", "{}", r[i]);
        let stderr = r[i]["structuredContent"]["data"]["stderr"]
            .as_str()
            .unwrap();
        assert!(stderr.contains("touch"), "{stderr}");
        assert!(r[i]["structuredContent"]["data"]["_sandbox"].is_object());
        assert!(!path.exists(), "{} was created", path.display());
    }
    ok(&r[8]);
    assert_eq!(
        std::fs::read_to_string(root.path().join("made.txt")).unwrap(),
        "made\n"
    );

    // Only the nine are served.
    for i in [9, 10] {
        let p = &r[i]["protocolError"];
        assert_eq!(p["code"], -32602, "{}", r[i]);
        assert!(
            p["message"].as_str().unwrap().contains("unknown tool"),
            "{p}"
        );
    }

    // A new connection is a new session: what session one read does not count there.
    let out = sdk(
        root.path(),
        home.path(),
        &json!([
            call(
                "write_file",
                json!({"path": "notes.txt", "content": "fresh\n"})
            ),
            call("read_file", json!({"path": "notes.txt"})),
            call(
                "write_file",
                json!({"path": "notes.txt", "content": "fresh\n"})
            ),
        ]),
    );
    let r = out["results"].as_array().unwrap();
    let e = failed(&r[0]);
    assert!(e.contains("this session has not read it"), "{e}");
    assert_eq!(ok(&r[1])["version"], v1);
    assert_eq!(ok(&r[2])["version"], version_of(b"fresh\n"));
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes.txt")).unwrap(),
        "fresh\n"
    );
}

/// Every stdout line is one JSON-RPC 2.0 message.
fn frame(line: &str) -> Value {
    let v: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
    assert_eq!(v["jsonrpc"], "2.0", "{line}");
    assert!(
        v.get("id").is_some() || v.get("method").is_some(),
        "neither a response nor a message: {line}"
    );
    v
}

#[test]
fn stdout_carries_only_json_rpc_and_stdin_eof_stops_a_running_bash() {
    let root = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut child = base_command(home.path())
        .args(["mcp", "--root"])
        .arg(root.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = crate::common::line_channel(child.stdout.take().unwrap());
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut send = |v: Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    let mut seen: Vec<Value> = Vec::new();
    let response = |id: u64, seen: &mut Vec<Value>| -> Value {
        let deadline = Instant::now() + common::WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no response {id} ({e:?}); saw {seen:?}"));
            let v = frame(&line);
            seen.push(v.clone());
            if v["id"] == id {
                return v;
            }
        }
    };

    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "1"}}}),
    );
    let init = response(1, &mut seen);
    assert_eq!(init["result"]["serverInfo"]["name"], "outrigger", "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = response(2, &mut seen);
    assert_eq!(
        list["result"]["tools"].as_array().unwrap().len(),
        9,
        "{list}"
    );
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "bash", "arguments": {"command": "echo hi"}}}));
    let echo = response(3, &mut seen);
    assert_eq!(
        echo["result"]["structuredContent"]["data"]["stdout"], "hi\n",
        "{echo}"
    );

    // A long command, then the client goes away: its process group dies and we exit 0.
    let tag = format!("{}", 7_000_000 + std::process::id());
    send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "bash", "arguments": {"command": format!("sleep {tag}")}}}));
    assert!(
        wait_until(common::WAIT, || !pids_with_arg(&tag).is_empty()),
        "sleep never started"
    );
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("outrigger mcp did not exit after stdin closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "stderr:\n{}", err.join().unwrap());
    assert!(
        wait_until(Duration::from_secs(5), || pids_with_arg(&tag).is_empty()),
        "the sleep outlived the server"
    );
    // Whatever else reached stdout (the cancelled call's answer) is JSON-RPC too.
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(2)) {
        seen.push(frame(&line));
    }
    let stderr = err.join().unwrap();
    assert!(!stderr.contains("__SIDECAR_READY__"), "{stderr}");
}

#[test]
fn a_root_that_is_not_a_directory_exits_2() {
    let home = tempfile::tempdir().unwrap();
    let file = common::write_file(home.path(), "file.txt", "x");
    let missing = home.path().join("missing");
    for root in [&file, &missing] {
        let (status, out, err) = run_once(
            home.path(),
            &["mcp", "--root", root.to_str().unwrap()],
            &[],
            b"",
        );
        assert_eq!(status.code(), Some(2), "{err}");
        assert!(out.is_empty(), "stdout: {out:?}");
        assert!(
            err.contains("outrigger mcp: --root") && err.contains(root.to_str().unwrap()),
            "{err}"
        );
    }
    let (_, _, err) = run_once(
        home.path(),
        &["mcp", "--root", file.to_str().unwrap()],
        &[],
        b"",
    );
    assert!(err.contains("is not a directory"), "{err}");
}

#[test]
fn slash_and_an_implicit_home_are_no_workspace() {
    let home = tempfile::tempdir().unwrap();
    let refused = |args: &[&str], cwd: &Path, needle: &str| {
        let out = base_command(home.path())
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} in {cwd:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(err.contains(needle), "{args:?} in {cwd:?}: {err}");
    };
    // Where editors often start servers.
    refused(
        &["mcp"],
        Path::new("/"),
        "the current directory (no --root given) / is the filesystem root",
    );
    refused(
        &["mcp", "--root", "/"],
        home.path(),
        "--root / is the filesystem root",
    );
    refused(&["mcp"], home.path(), "is the home directory");
    // Named explicitly, the home is taken at its word (stdin is empty: it exits at once).
    let out = base_command(home.path())
        .args(["mcp", "--root"])
        .arg(home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}
