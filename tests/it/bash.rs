//! The `bash` tool over the pipes: `tool.invoke {name: "bash", consentGranted: true,
//! context: {cwd}}` against the real binary, with real processes (no mocks).

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::common::{Opts, Sidecar, WAIT, pids_with_arg, wait_until};
use serde_json::{Value, json};

fn bash(s: &mut Sidecar, ws: &Path, args: Value) -> Value {
    s.ok(
        "tool.invoke",
        json!({"name": "bash", "arguments": args, "consentGranted": true,
               "context": {"cwd": ws}}),
    )
}

fn run(s: &mut Sidecar, ws: &Path, command: &str) -> Value {
    bash(s, ws, json!({"command": command}))
}

/// A per-test unique `sleep` argument, so process scans never see another test's sleeps.
fn unique_secs(tag: u32) -> String {
    format!("{}.{:06}{tag}", 3000 + tag, std::process::id() % 1_000_000)
}

#[test]
fn success_and_data_shape() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let tr = run(&mut s, ws.path(), "echo hello; pwd");
    assert_eq!(tr["success"], true, "{tr}");
    let d = &tr["data"];
    assert_eq!(d["exitCode"], 0, "{tr}");
    let cwd = ws.path().canonicalize().unwrap();
    assert_eq!(d["stdout"], format!("hello\n{}\n", cwd.display()), "{tr}");
    assert_eq!(d["stderr"], "", "{tr}");
    assert_eq!(d["truncated"], false, "{tr}");
    assert!(d["durationMs"].is_u64(), "{tr}");
    assert!(d.get("file_path").is_none(), "{tr}");
    assert_eq!(d["_sandbox"]["backend"], "landlock", "{tr}");
    assert_eq!(d["_sandbox"]["enforcement"], "full", "{tr}");
    // stdin is /dev/null: cat ends at once.
    let tr = run(&mut s, ws.path(), "cat; echo after");
    assert_eq!(tr["data"]["stdout"], "after\n", "{tr}");
}

#[test]
fn nonzero_exit_empty_command_and_consent() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let tr = run(&mut s, ws.path(), "echo out; echo err >&2; exit 3");
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["needsFollowup"], true, "{tr}");
    assert_eq!(tr["error"], "exit 3", "{tr}");
    assert_eq!(tr["data"]["exitCode"], 3, "{tr}");
    assert_eq!(tr["data"]["stdout"], "out\n", "{tr}");
    assert_eq!(tr["data"]["stderr"], "err\n", "{tr}");

    let tr = run(&mut s, ws.path(), "   ");
    assert_eq!(tr["success"], false, "{tr}");
    assert!(
        tr["error"]
            .as_str()
            .unwrap()
            .starts_with("command is empty"),
        "{tr}"
    );

    let r = s.call(
        "tool.invoke",
        json!({"name": "bash", "arguments": {"command": "touch x"}, "context": {"cwd": ws.path()}}),
    );
    assert_eq!(r["error"]["code"], -32002, "{r}");
    assert_eq!(r["error"]["data"]["flag"], "consentGranted", "{r}");
    assert!(!ws.path().join("x").exists());
}

#[test]
fn timeout_kills_a_grandchild_that_ignores_sigterm_and_a_background_sleep() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let (a, b, c) = (unique_secs(1), unique_secs(2), unique_secs(3));
    let cmd = format!(
        "sh -c 'trap \"\" TERM; sleep {a}' & sleep {b} & echo started; echo warn >&2; sleep {c}"
    );
    let tr = bash(
        &mut s,
        ws.path(),
        json!({"command": cmd, "timeoutMs": 1500}),
    );
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["data"]["timedOut"], true, "{tr}");
    assert!(tr["data"]["exitCode"].is_null(), "{tr}");
    assert!(
        tr["error"]
            .as_str()
            .unwrap()
            .contains("timed out after 1500 ms"),
        "{tr}"
    );
    assert_eq!(
        tr["data"]["stdout"], "started\n",
        "output so far is returned: {tr}"
    );
    assert_eq!(tr["data"]["stderr"], "warn\n", "{tr}");
    for arg in [&a, &b, &c] {
        assert!(
            wait_until(Duration::from_secs(5), || pids_with_arg(arg).is_empty()),
            "sleep {arg} survived the timeout: {:?}",
            pids_with_arg(arg)
        );
    }
    s.ok("system.ping", Value::Null);
}

#[test]
fn shutdown_cancels_a_running_command_and_returns_its_output() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let secs = unique_secs(4);
    s.send(
        &json!({"jsonrpc": "2.0", "id": "long", "method": "tool.invoke", "params": {
        "name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
        "arguments": {"command": format!("echo begun; sleep {secs}")}}}),
    );
    assert!(
        wait_until(WAIT, || !pids_with_arg(&secs).is_empty()),
        "the command started"
    );
    let r = s.call("system.shutdown", Value::Null);
    assert!(r["result"].is_null(), "{r}");
    let resp = s.response(&json!("long"));
    let tr = &resp["result"];
    assert_eq!(tr["success"], false, "{resp}");
    assert_eq!(tr["data"]["cancelled"], true, "{resp}");
    assert!(
        tr["error"].as_str().unwrap().starts_with("cancelled"),
        "{resp}"
    );
    assert_eq!(tr["data"]["stdout"], "begun\n", "{resp}");
    assert!(
        wait_until(Duration::from_secs(5), || pids_with_arg(&secs).is_empty()),
        "the cancelled command survived"
    );
    assert_eq!(s.wait_exit(WAIT).code(), Some(0));
}

/// Splits `head\n[N bytes omitted]\ntail`.
fn split_marker(text: &str) -> (String, usize, String) {
    let (head, rest) = text.split_once("\n[").expect("a marker");
    let (n, tail) = rest.split_once(" bytes omitted]\n").expect("a marker");
    (head.to_string(), n.parse().unwrap(), tail.to_string())
}

#[test]
fn long_output_keeps_start_and_end_with_exact_counts_and_is_saved_privately() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let tr = run(
        &mut s,
        ws.path(),
        "for i in $(seq 1 4000); do echo line$i; done",
    );
    assert_eq!(tr["success"], true, "{tr}");
    let full: String = (1..=4000).map(|i| format!("line{i}\n")).collect();
    let out = tr["data"]["stdout"].as_str().unwrap();
    assert!(out.len() <= 12_288, "{}", out.len());
    let (head, omitted, tail) = split_marker(out);
    assert_eq!(
        head.len() + omitted + tail.len(),
        full.len(),
        "exact byte count"
    );
    assert!(full.starts_with(&head) && full.ends_with(&tail));
    assert!(tail.ends_with("line4000\n"));
    assert_eq!(tr["data"]["truncated"], true, "{tr}");

    let path = tr["data"]["file_path"].as_str().expect("file_path");
    let saved = Path::new(path);
    assert!(
        saved.starts_with(ws.path().join(".outrigger/tmp/bash-output")),
        "{path}"
    );
    assert_eq!(std::fs::read_to_string(saved).unwrap(), full);
    assert_eq!(std::fs::metadata(saved).unwrap().mode() & 0o777, 0o600);
    let dir = saved.parent().unwrap();
    assert_eq!(std::fs::metadata(dir).unwrap().mode() & 0o777, 0o700);
}

#[test]
fn stderr_has_priority_on_failure() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let make = |c: char| format!("head -c 30000 /dev/zero | tr '\\0' {c}");
    let cmd = format!("{}; {} >&2; exit 1", make('o'), make('e'));
    let tr = run(&mut s, ws.path(), &cmd);
    assert_eq!(tr["data"]["exitCode"], 1, "{tr}");
    let out = tr["data"]["stdout"].as_str().unwrap();
    let err = tr["data"]["stderr"].as_str().unwrap();
    assert!(out.len() + err.len() <= 12_288);
    assert!(
        err.len() > 2 * out.len(),
        "stderr first: {} vs {}",
        err.len(),
        out.len()
    );
    for text in [out, err] {
        let (h, n, t) = split_marker(text);
        assert_eq!(h.len() + n + t.len(), 30_000);
    }
    // On success stdout comes first.
    let cmd = format!("{}; {} >&2", make('o'), make('e'));
    let tr = run(&mut s, ws.path(), &cmd);
    let out = tr["data"]["stdout"].as_str().unwrap();
    let err = tr["data"]["stderr"].as_str().unwrap();
    assert!(
        out.len() > 2 * err.len(),
        "stdout first: {} vs {}",
        out.len(),
        err.len()
    );
}

#[test]
fn ansi_is_cleaned_unless_raw_output() {
    let ws = tempfile::tempdir().unwrap();
    let cmd = r"printf '\033[1;31mred\033[0m \033]8;;https://e.example/x\033\\docs\033]8;;\033\\\r\nnext\r\n'";
    let mut s = Sidecar::start();
    let tr = run(&mut s, ws.path(), cmd);
    assert_eq!(
        tr["data"]["stdout"], "red docs (https://e.example/x)\nnext\n",
        "{tr}"
    );
    drop(s);
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_BASH_RAW_OUTPUT".into(), "true".into())],
        ..Default::default()
    });
    let tr = run(&mut s, ws.path(), cmd);
    assert!(
        tr["data"]["stdout"]
            .as_str()
            .unwrap()
            .contains("\x1b[1;31m"),
        "{tr}"
    );
}

#[test]
fn raw_output_argument_keeps_ansi_and_wins_over_the_config() {
    let ws = tempfile::tempdir().unwrap();
    let cmd = r"printf '\033[32mgreen\033[0m\r\n'";
    let mut s = Sidecar::start();
    // Default: cleaned.
    let tr = run(&mut s, ws.path(), cmd);
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["stdout"], "green\n", "{tr}");
    // raw_output: false is the default spelled out.
    let tr = bash(
        &mut s,
        ws.path(),
        json!({"command": cmd, "raw_output": false}),
    );
    assert_eq!(tr["data"]["stdout"], "green\n", "{tr}");
    // raw_output: true keeps the escapes and the CRLF.
    let tr = bash(
        &mut s,
        ws.path(),
        json!({"command": cmd, "raw_output": true}),
    );
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["stdout"], "\x1b[32mgreen\x1b[0m\r\n", "{tr}");
    // A non-boolean is refused by the schema.
    let tr = bash(
        &mut s,
        ws.path(),
        json!({"command": cmd, "raw_output": "yes"}),
    );
    assert_eq!(tr["success"], false, "{tr}");
    assert!(tr["error"].as_str().unwrap().contains("raw_output"), "{tr}");
    drop(s);
    // The call's value wins over the config default in both directions.
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_BASH_RAW_OUTPUT".into(), "true".into())],
        ..Default::default()
    });
    let tr = bash(
        &mut s,
        ws.path(),
        json!({"command": cmd, "raw_output": false}),
    );
    assert_eq!(tr["data"]["stdout"], "green\n", "{tr}");
    let tr = run(&mut s, ws.path(), cmd);
    assert_eq!(tr["data"]["stdout"], "\x1b[32mgreen\x1b[0m\r\n", "{tr}");
}

#[test]
fn secrets_are_absent_from_the_environment() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![
            ("OPENAI_API_KEY".into(), "sk-leak".into()),
            ("GH_TOKEN".into(), "gh-leak".into()),
            ("DB_SECRET".into(), "db-leak".into()),
            ("OUTRIGGER_PROFILE_HINT".into(), "or-leak".into()),
            ("BASH_ENV".into(), "/nonexistent/rc".into()),
            ("VISIBLE_VAR".into(), "seen".into()),
        ],
        ..Default::default()
    });
    let tr = run(&mut s, ws.path(), "env");
    let env = tr["data"]["stdout"].as_str().unwrap();
    assert!(env.contains("VISIBLE_VAR=seen"), "{env}");
    for leak in ["sk-leak", "gh-leak", "db-leak", "or-leak", "BASH_ENV"] {
        assert!(!env.contains(leak), "{leak} reached the command: {env}");
    }
    assert!(env.contains("TMPDIR=/"), "a private TMPDIR: {env}");
}

/// Temp dirs are made ahead and removed behind (off the command's path): each command
/// still gets its own, new and empty, mode 0700, and the one before it goes.
#[test]
fn each_command_gets_a_new_empty_private_tmpdir_and_the_last_one_goes() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let mut seen: Vec<String> = Vec::new();
    // More commands than dirs wait ready, so some are made ahead and some in place.
    for i in 0..5 {
        let tr = run(
            &mut s,
            ws.path(),
            "echo \"$TMPDIR\"; stat -c %a \"$TMPDIR\"; ls -A \"$TMPDIR\"; touch \"$TMPDIR/left\"",
        );
        assert_eq!(tr["success"], true, "{tr}");
        let out = tr["data"]["stdout"].as_str().unwrap_or_default();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines.len(),
            2,
            "command {i}: a mode and nothing listed: {out:?}"
        );
        assert_eq!(lines[1], "700", "command {i}: {out:?}");
        assert!(
            !seen.iter().any(|t| t == lines[0]),
            "command {i} reused {}",
            lines[0]
        );
        if let Some(last) = seen.last() {
            let last = Path::new(last);
            assert!(
                wait_until(WAIT, || !last.exists()),
                "{} outlived its command",
                last.display()
            );
        }
        seen.push(lines[0].to_string());
    }
}

/// A command that nests directories 16,000 deep in its temp dir: removing them used to
/// recurse once per level and overflow the removing thread's stack, aborting the sidecar.
/// Unsandboxed only for speed (the temp dir and its removal are the same): under Landlock
/// each `mkdir` walks up to the root, so building the tree takes quadratic time.
#[test]
fn a_deep_tree_left_in_the_private_tmpdir_is_removed_and_the_sidecar_lives() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_SANDBOX_ENABLED".into(), "false".into())],
        ..Default::default()
    });
    let tr = run(
        &mut s,
        ws.path(),
        "echo \"$TMPDIR\"; cd \"$TMPDIR\" && python3 -c 'import os\nfor _ in range(16000): os.mkdir(\"d\"); os.chdir(\"d\")' && echo nested",
    );
    let out = tr["data"]["stdout"].as_str().unwrap_or_default();
    assert!(out.ends_with("nested\n"), "{tr}");
    let tmp = Path::new(out.lines().next().unwrap_or_default()).to_path_buf();
    assert!(
        wait_until(Duration::from_secs(60), || !tmp.exists()),
        "{} is still there",
        tmp.display()
    );
    let tr = run(&mut s, ws.path(), "echo alive");
    assert_eq!(tr["data"]["stdout"], "alive\n", "{tr}");
}

#[test]
fn killing_the_sidecar_with_sigkill_leaves_no_child_running() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let (a, b, c) = (unique_secs(5), unique_secs(6), unique_secs(7));
    s.send(
        &json!({"jsonrpc": "2.0", "id": "bg", "method": "tool.invoke", "params": {
        "name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
        "arguments": {"command": format!(
            "sleep {a} & setsid sleep {b} & sh -c 'trap \"\" TERM HUP; sleep {c}' & wait")}}}),
    );
    assert!(
        wait_until(WAIT, || [&a, &b, &c]
            .iter()
            .all(|x| !pids_with_arg(x).is_empty())),
        "all three started"
    );
    s.child.kill().unwrap(); // SIGKILL
    let _ = s.child.wait();
    for arg in [&a, &b, &c] {
        assert!(
            wait_until(Duration::from_secs(5), || pids_with_arg(arg).is_empty()),
            "sleep {arg} outlived the SIGKILLed sidecar"
        );
    }
}

#[test]
fn sigterm_and_stdin_eof_kill_running_commands() {
    for how in ["sigterm", "eof"] {
        let ws = tempfile::tempdir().unwrap();
        let mut s = Sidecar::start();
        let (a, b) = (unique_secs(8), unique_secs(9));
        s.send(
            &json!({"jsonrpc": "2.0", "id": "run", "method": "tool.invoke", "params": {
            "name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
            "arguments": {"command": format!("setsid sleep {a} & sleep {b}")}}}),
        );
        assert!(
            wait_until(WAIT, || !pids_with_arg(&a).is_empty()
                && !pids_with_arg(&b).is_empty()),
            "started"
        );
        if how == "sigterm" {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(s.pid()),
                nix::sys::signal::Signal::SIGTERM,
            )
            .unwrap();
        } else {
            s.close_stdin();
        }
        assert_eq!(s.wait_exit(WAIT).code(), Some(0), "{how}");
        for arg in [&a, &b] {
            assert!(
                wait_until(Duration::from_secs(5), || pids_with_arg(arg).is_empty()),
                "sleep {arg} survived {how}"
            );
        }
    }
}
