//! Unit tests of `exec`.

use super::*;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

const CAP: usize = 1024 * 1024;

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn spec(exec: PathBuf, timeout: Duration) -> PluginToolSpec {
    PluginToolSpec {
        name: "t".into(),
        description: "d".into(),
        parameters: json!({"type": "object"}).into(),
        exec,
        args: vec![],
        timeout,
        mode: None,
        exposure: None,
        env: BTreeMap::new(),
    }
}

async fn run_body(body: &str, args: Value) -> (ExecOutcome, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(script(dir.path(), "tool", body), Duration::from_secs(20));
    let out = run_tool(&s, &args, dir.path(), &CancellationToken::new(), None, CAP).await;
    (out, dir)
}

/// Whether `pid` is gone: absent from /proc, or a zombie waiting for init to reap it.
fn dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

async fn wait_dead(pid: i32) -> bool {
    for _ in 0..100 {
        if dead(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

async fn read_pid(path: &Path) -> i32 {
    for _ in 0..250 {
        if let Ok(s) = std::fs::read_to_string(path)
            && let Ok(pid) = s.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no pid written to {}", path.display());
}

#[tokio::test]
async fn success() {
    let (out, _d) = run_body(r#"echo '{"ok": true, "result": {"n": 1}}'"#, json!({})).await;
    let ExecOutcome::Ok {
        result,
        model_result,
        stdout_bytes,
        stderr_bytes,
        ..
    } = &out
    else {
        panic!("{out:?}");
    };
    assert_eq!(result, &json!({"n": 1}));
    assert_eq!(model_result, &None);
    assert_eq!(*stdout_bytes, 33);
    assert_eq!(*stderr_bytes, 0);
    let tr = out.to_tool_result("t");
    assert_eq!(tr, json!({"success": true, "data": {"result": {"n": 1}}}));
    let typed: crate::protocol::ToolResult = serde_json::from_value(tr).unwrap();
    assert!(typed.success);
}

#[tokio::test]
async fn model_result_is_passed_beside_result() {
    let (out, _d) = run_body(
        r#"echo '{"ok": true, "result": {"diff": "long"}, "model_result": "short"}' ; echo noise >&2"#,
        json!({}),
    )
    .await;
    assert!(
        matches!(&out, ExecOutcome::Ok { model_result: Some(m), stderr_bytes: 6, .. } if m == "short"),
        "{out:?}"
    );
    assert_eq!(
        out.to_tool_result("t"),
        json!({"success": true, "data": {"result": {"diff": "long"}, "modelResult": "short"}})
    );
}

#[tokio::test]
async fn ok_false_reports_kind_and_message_without_details() {
    let (out, _d) = run_body(
        r#"echo '{"ok": false, "error": {"kind": "invalid_input", "message": "path not found", "details": "SECRET"}}'; echo warn >&2"#,
        json!({}),
    )
    .await;
    let ExecOutcome::Failed {
        kind,
        message,
        exit_code,
        stderr_summary,
        ..
    } = &out
    else {
        panic!("{out:?}");
    };
    assert_eq!(kind, "invalid_input");
    assert_eq!(message, "path not found");
    assert_eq!(*exit_code, Some(0));
    assert_eq!(stderr_summary, "warn\n");
    let tr = out.to_tool_result("t");
    assert_eq!(tr["success"], json!(false));
    assert_eq!(tr["needsFollowup"], json!(true));
    assert_eq!(tr["error"], json!("invalid_input: path not found"));
    assert_eq!(tr["data"]["kind"], json!("invalid_input"));
    assert_eq!(tr["data"]["exitCode"], json!(0));
    assert_eq!(tr["data"]["stderr"], json!("warn\n"));
    // `details` is dropped everywhere, the stdout summary included.
    assert!(!tr.to_string().contains("SECRET"), "{tr}");
    assert!(
        tr["data"]["stdout"]
            .as_str()
            .unwrap()
            .contains("path not found")
    );
    serde_json::from_value::<crate::protocol::ToolResult>(tr).unwrap();
}

#[tokio::test]
async fn nonzero_exit_with_ok_true_is_a_failure() {
    let (out, _d) = run_body(
        r#"echo '{"ok": true, "result": 1}'; echo oops >&2; exit 3"#,
        json!({}),
    )
    .await;
    let ExecOutcome::Failed {
        kind,
        message,
        exit_code,
        stdout_summary,
        stderr_summary,
    } = &out
    else {
        panic!("{out:?}");
    };
    assert_eq!(kind, "nonzero_exit");
    assert!(
        message.contains("status 3") && message.contains("ok: true"),
        "{message}"
    );
    assert_eq!(*exit_code, Some(3));
    assert_eq!(stdout_summary, "{\"ok\": true, \"result\": 1}\n");
    assert_eq!(stderr_summary, "oops\n");
    assert_eq!(out.to_tool_result("t")["data"]["exitCode"], json!(3));

    // An ok:false envelope keeps its own kind, with the exit code attached.
    let (out, _d) = run_body(
        r#"echo '{"ok": false, "error": {"kind": "busy", "message": "try later"}}'; exit 2"#,
        json!({}),
    )
    .await;
    assert!(
        matches!(&out, ExecOutcome::Failed { kind, exit_code: Some(2), .. } if kind == "busy"),
        "{out:?}"
    );
    // No envelope at all plus a non-zero exit: the exit is the cause.
    let (out, _d) = run_body("echo 'Traceback...' >&2; exit 1", json!({})).await;
    assert!(
        matches!(&out, ExecOutcome::Failed { kind, exit_code: Some(1), stderr_summary, .. }
            if kind == "nonzero_exit" && stderr_summary == "Traceback...\n"),
        "{out:?}"
    );
}

#[tokio::test]
async fn invalid_output_is_a_failure() {
    for (body, needle) in [
        ("echo 'not json'", "not valid JSON"),
        ("echo '[1]'", "not a JSON object"),
        ("echo '{\"result\": 1}'", "boolean \"ok\""),
        ("echo '{\"ok\": true}'", "no \"result\""),
        (
            "echo '{\"ok\":true,\"result\":1}{\"ok\":true,\"result\":2}'",
            "not valid JSON",
        ),
        ("true", "nothing to stdout"),
    ] {
        let (out, _d) = run_body(body, json!({})).await;
        let ExecOutcome::Failed {
            kind,
            message,
            exit_code,
            ..
        } = &out
        else {
            panic!("{body}: {out:?}");
        };
        assert_eq!(kind, "invalid_output", "{body}");
        assert!(message.contains(needle), "{body}: {message}");
        assert_eq!(*exit_code, Some(0));
    }
}

#[tokio::test]
async fn stdout_capture_is_bounded() {
    let limit = 64 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        script(
            dir.path(),
            "big",
            "head -c 5000000 /dev/zero | tr '\\000' a\necho '{\"ok\":true,\"result\":1}'",
        ),
        Duration::from_secs(20),
    );
    let started = Instant::now();
    let out = run_tool(
        &s,
        &json!({}),
        dir.path(),
        &CancellationToken::new(),
        None,
        limit,
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(15));
    let ExecOutcome::Failed {
        kind,
        message,
        stdout_summary,
        ..
    } = &out
    else {
        panic!("{out:?}");
    };
    assert_eq!(kind, "output_too_large");
    assert!(
        message.contains("5000023") && message.contains("65536"),
        "{message}"
    );
    assert!(stdout_summary.chars().count() <= 2000);
    // 900 head bytes and 900 tail bytes (ending in the envelope) are shown.
    let omitted = 5_000_023 - 900 - 900;
    assert!(
        stdout_summary.contains(&format!("\n[{omitted} bytes omitted]\n")),
        "{stdout_summary}"
    );
    assert!(stdout_summary.ends_with("{\"ok\":true,\"result\":1}\n"));

    // Bulk stderr is drained and counted without failing the call.
    let s = spec(
        script(
            dir.path(),
            "noisy",
            "head -c 5000000 /dev/zero >&2\necho '{\"ok\":true,\"result\":1}'",
        ),
        Duration::from_secs(20),
    );
    let out = run_tool(
        &s,
        &json!({}),
        dir.path(),
        &CancellationToken::new(),
        None,
        limit,
    )
    .await;
    assert!(
        matches!(
            out,
            ExecOutcome::Ok {
                stderr_bytes: 5_000_000,
                ..
            }
        ),
        "{out:?}"
    );
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        script(
            dir.path(),
            "hang",
            "sh -c 'trap \"\" TERM; sleep 30' &\necho $! > grandchild.pid\necho started\nsleep 30",
        ),
        Duration::from_millis(700),
    );
    let (lifecycle, _rx) = Lifecycle::new();
    let started = Instant::now();
    let out = run_tool(
        &s,
        &json!({}),
        dir.path(),
        &CancellationToken::new(),
        Some(&lifecycle),
        CAP,
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let ExecOutcome::TimedOut {
        after,
        stdout_summary,
        ..
    } = &out
    else {
        panic!("{out:?}");
    };
    assert_eq!(*after, Duration::from_millis(700));
    assert_eq!(stdout_summary, "started\n");
    let pid = read_pid(&dir.path().join("grandchild.pid")).await;
    assert!(
        wait_dead(pid).await,
        "grandchild {pid} survived the timeout"
    );
    let tr = out.to_tool_result("hang");
    assert_eq!(tr["success"], json!(false));
    assert_eq!(tr["data"]["kind"], json!("timeout"));
    assert_eq!(tr["data"]["timeoutMs"], json!(700));
    let err = tr["error"].as_str().unwrap();
    assert!(
        err.contains("700ms") && err.contains("process group was killed") && err.contains("hang"),
        "{err}"
    );
}

#[tokio::test]
async fn cancellation_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        script(
            dir.path(),
            "hang",
            "sleep 30 &\necho $! > grandchild.pid\nsleep 30",
        ),
        Duration::from_secs(30),
    );
    let token = CancellationToken::new();
    let pidfile = dir.path().join("grandchild.pid");
    let started = Instant::now();
    let args = json!({});
    let (out, pid) = tokio::join!(run_tool(&s, &args, dir.path(), &token, None, CAP), async {
        let pid = read_pid(&pidfile).await;
        token.cancel();
        pid
    });
    assert_eq!(out, ExecOutcome::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        wait_dead(pid).await,
        "grandchild {pid} survived the cancellation"
    );
    let tr = out.to_tool_result("hang");
    assert_eq!(tr["data"]["kind"], json!("cancelled"));
    assert!(tr.get("needsFollowup").is_none());

    // Already cancelled: nothing is started.
    let out = run_tool(&s, &json!({}), dir.path(), &token, None, CAP).await;
    assert_eq!(out, ExecOutcome::Cancelled);
}

#[tokio::test]
async fn lifecycle_shutdown_kills_a_running_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        script(dir.path(), "hang", "echo $$ > self.pid\nsleep 30"),
        Duration::from_secs(30),
    );
    let (lifecycle, _rx) = Lifecycle::new();
    let pidfile = dir.path().join("self.pid");
    let args = json!({});
    let token = CancellationToken::new();
    let (out, _) = tokio::join!(
        run_tool(&s, &args, dir.path(), &token, Some(&lifecycle), CAP),
        async {
            read_pid(&pidfile).await;
            lifecycle.kill_children();
        }
    );
    assert!(
        matches!(&out, ExecOutcome::Failed { kind, exit_code: None, message, .. }
            if kind == "signal" && message.contains("SIGKILL")),
        "{out:?}"
    );
}

#[tokio::test]
async fn background_straggler_does_not_stall_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        script(
            dir.path(),
            "bg",
            "sleep 30 &\necho $! > bg.pid\necho '{\"ok\":true,\"result\":\"done\"}'",
        ),
        Duration::from_secs(20),
    );
    let started = Instant::now();
    let out = run_tool(
        &s,
        &json!({}),
        dir.path(),
        &CancellationToken::new(),
        None,
        CAP,
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(&out, ExecOutcome::Ok { result, .. } if result == "done"),
        "{out:?}"
    );
    let pid = read_pid(&dir.path().join("bg.pid")).await;
    assert!(wait_dead(pid).await);
}

#[tokio::test]
async fn spawn_failure() {
    let dir = tempfile::tempdir().unwrap();
    let gone = script(dir.path(), "gone", "exit 0");
    std::fs::remove_file(&gone).unwrap();
    let s = spec(gone.clone(), Duration::from_secs(5));
    let out = run_tool(
        &s,
        &json!({}),
        dir.path(),
        &CancellationToken::new(),
        None,
        CAP,
    )
    .await;
    let ExecOutcome::SpawnFailed { message } = &out else {
        panic!("{out:?}");
    };
    assert!(message.contains(&gone.display().to_string()), "{message}");
    let tr = out.to_tool_result("gone");
    assert_eq!(tr["success"], json!(false));
    assert_eq!(tr["needsFollowup"], json!(true));
    assert_eq!(tr["data"]["kind"], json!("spawn_failed"));
    assert!(tr["error"].as_str().unwrap().starts_with("spawn_failed: "));

    let noexec = script(dir.path(), "noexec", "exit 0");
    std::fs::set_permissions(&noexec, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run_tool(
        &spec(noexec, Duration::from_secs(5)),
        &json!({}),
        dir.path(),
        &CancellationToken::new(),
        None,
        CAP,
    )
    .await;
    assert!(matches!(out, ExecOutcome::SpawnFailed { .. }), "{out:?}");
}

#[tokio::test]
async fn args_reach_stdin_and_cwd_is_the_workspace() {
    let args = json!({"city": "Oslo", "days": 3, "nested": {"q": "a \"quoted\" value"}});
    let (out, dir) = run_body(
        r#"args=$(cat); printf '{"ok": true, "result": {"args": %s, "cwd": "%s"}}' "$args" "$(pwd)""#,
        args.clone(),
    )
    .await;
    let ExecOutcome::Ok { result, .. } = &out else {
        panic!("{out:?}");
    };
    assert_eq!(result["args"], args);
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        std::fs::canonicalize(result["cwd"].as_str().unwrap()).unwrap(),
        cwd
    );
}

#[tokio::test]
async fn env_and_args_are_passed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(
        script(
            dir.path(),
            "env",
            r#"printf '{"ok": true, "result": ["%s", "%s", "%s"]}' "$FOO" "$1" "$2""#,
        ),
        Duration::from_secs(5),
    );
    s.env.insert("FOO".into(), "bar baz".into());
    s.args = vec!["--json".into(), "x y".into()];
    let out = run_tool(
        &s,
        &json!({}),
        dir.path(),
        &CancellationToken::new(),
        None,
        CAP,
    )
    .await;
    assert!(
        matches!(&out, ExecOutcome::Ok { result, .. } if result == &json!(["bar baz", "--json", "x y"])),
        "{out:?}"
    );
}

#[tokio::test]
async fn plugin_that_ignores_stdin_still_succeeds() {
    // Arguments larger than a pipe buffer, never read: the writer must not wedge the call.
    let big = "x".repeat(1024 * 1024);
    let (out, _d) = run_body(r#"echo '{"ok": true, "result": 0}'"#, json!({"big": big})).await;
    assert!(out.is_ok(), "{out:?}");
}

#[test]
fn summaries_are_bounded_and_exact() {
    let mut short = Capture::new(10, TAIL_KEEP);
    short.push(b"hello");
    assert_eq!(summary(&short), "hello");

    let mut c = Capture::new(100, TAIL_KEEP);
    let data: Vec<u8> = (0..10_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    for chunk in data.chunks(333) {
        c.push(chunk);
    }
    assert_eq!(c.head().len(), 100);
    assert!(c.tail().len() <= 2 * TAIL_KEEP);
    let s = summary(&c);
    let expected_tail = String::from_utf8(data[data.len() - 900..].to_vec()).unwrap();
    let expected = format!(
        "{}\n[{} bytes omitted]\n{}",
        String::from_utf8(data[..100].to_vec()).unwrap(),
        10_000 - 100 - 900,
        expected_tail
    );
    assert_eq!(s, expected);

    // Multi-byte characters are never split at either cut.
    let text = "é".repeat(3000);
    let s = summarize(text.as_bytes());
    assert!(!s.contains('\u{FFFD}'));
    assert!(s.chars().count() <= 2000);
    let (h, rest) = s.split_once("\n[").unwrap();
    let (n, t) = rest.split_once(" bytes omitted]\n").unwrap();
    assert_eq!(h.len() + t.len() + n.parse::<usize>().unwrap(), text.len());
}
