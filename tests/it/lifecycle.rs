//! Shutdown paths, exit codes and the lifecycle notifications, over pipes.

use crate::common;

use std::time::Duration;

use crate::common::{Opts, Sidecar, WAIT};
use serde_json::{Value, json};

fn shutdown_reason(s: &mut Sidecar) -> Value {
    s.notification("lifecycle.shutdown")["params"]["reason"].clone()
}

#[test]
fn shutdown_answers_null_then_notifies_and_exits_zero() {
    let mut s = Sidecar::start();
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "system.shutdown"}));
    let r = s.next_frame(WAIT).unwrap();
    assert_eq!(r["id"], 1);
    assert!(
        r.as_object().unwrap().contains_key("result") && r["result"].is_null(),
        "{r}"
    );
    let n = s.next_frame(WAIT).unwrap();
    assert_eq!(n["method"], "lifecycle.shutdown");
    assert_eq!(n["params"]["reason"], "normal");
    assert!(s.wait_exit(WAIT).success());
    assert!(
        s.next_line(Duration::from_millis(200)).is_none(),
        "nothing after lifecycle.shutdown"
    );
}

#[test]
fn shutdown_drains_in_flight_work() {
    let mut s = Sidecar::start();
    s.send(&json!({"jsonrpc": "2.0", "id": "sleeper", "method": "debug.sleep", "params": {"ms": 600000}}));
    s.ok("system.ping", Value::Null);
    s.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "system.shutdown"}));
    // The in-flight request is cancelled and still answered before the process goes.
    let r = s.response(&json!("sleeper"));
    assert_eq!(r["error"]["data"]["kind"], "cancelled", "{r}");
    assert_eq!(shutdown_reason(&mut s), "normal");
    assert!(s.wait_exit(WAIT).success());
}

#[test]
fn shutdown_now_exits_at_once() {
    let mut s = Sidecar::start();
    s.send(
        &json!({"jsonrpc": "2.0", "id": "slow", "method": "debug.sleep", "params": {"ms": 600000}}),
    );
    s.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "system.shutdown_now"}));
    let r = s.response(&json!(3));
    assert!(r["result"].is_null());
    assert_eq!(shutdown_reason(&mut s), "normal");
    assert!(s.wait_exit(WAIT).success());
}

#[test]
fn stdin_eof_answers_pending_then_exits_zero() {
    let home = tempfile::tempdir().unwrap();
    let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"system.ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"debug.sleep\",\"params\":{\"ms\":50}}";
    let (status, out, _) = common::run_once(home.path(), &[], &[], input);
    assert_eq!(status.code(), Some(0));
    let frames: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames.first().unwrap()["method"], "lifecycle.ready");
    assert!(
        frames
            .iter()
            .any(|f| f["id"] == 1 && f["result"]["status"] == "ok")
    );
    // A last line without a newline is still a frame; the drain cancels it and it is
    // still answered before the process goes.
    assert!(
        frames
            .iter()
            .any(|f| f["id"] == 2 && f["error"]["data"]["kind"] == "cancelled"),
        "{out}"
    );
    let last = frames.last().unwrap();
    assert_eq!(last["method"], "lifecycle.shutdown");
    assert_eq!(last["params"]["reason"], "eof");
}

#[test]
fn stdin_eof_while_running() {
    let mut s = Sidecar::start();
    s.ok("system.ping", Value::Null);
    s.close_stdin();
    assert_eq!(shutdown_reason(&mut s), "eof");
    assert_eq!(s.wait_exit(WAIT).code(), Some(0));
}

fn signal_exit(sig: nix::sys::signal::Signal) {
    let mut s = Sidecar::start();
    s.send(
        &json!({"jsonrpc": "2.0", "id": "slow", "method": "debug.sleep", "params": {"ms": 600000}}),
    );
    s.ok("system.ping", Value::Null);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(s.pid()), sig).unwrap();
    assert_eq!(shutdown_reason(&mut s), "normal");
    assert_eq!(s.wait_exit(WAIT).code(), Some(0));
}

#[test]
fn sigterm_exits_zero() {
    signal_exit(nix::sys::signal::Signal::SIGTERM);
}

#[test]
fn sigint_exits_zero() {
    signal_exit(nix::sys::signal::Signal::SIGINT);
}

#[test]
fn quiet_ready_skips_only_the_marker() {
    let mut s = Sidecar::start_with(Opts {
        args: vec!["--quiet-ready".into()],
        ..Default::default()
    });
    assert_eq!(s.ok("system.ping", Value::Null)["status"], "ok");
    s.ok("system.shutdown", Value::Null);
    assert!(s.wait_exit(WAIT).success());
    let err = s.stderr_rest();
    assert!(!err.contains("__SIDECAR_READY__"), "{err}");
}

#[test]
fn version_and_help() {
    let home = tempfile::tempdir().unwrap();
    let (status, out, _) = common::run_once(home.path(), &["--version"], &[], b"");
    assert!(status.success());
    assert!(out.starts_with("outrigger "), "{out}");
    let (status, out, _) = common::run_once(home.path(), &["--help"], &[], b"");
    assert!(status.success());
    for flag in [
        "--log-level",
        "--quiet-ready",
        "--storage-path",
        "--dump-config",
    ] {
        assert!(out.contains(flag), "--help lacks {flag}");
    }
}

#[test]
fn exits_when_parent_goes_away_with_stdin_still_open() {
    let home = tempfile::tempdir().unwrap();
    let (reader, _writer_kept_open) = std::io::pipe().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        // Explicit redirections: a background job's stdin would otherwise be /dev/null.
        // The shell lingers a second so the sidecar has booted and seen its first parent.
        .arg("exec 3<&0; \"$BIN\" <&3 3<&- >\"$OUTRIGGER_HOME/out\" 2>\"$OUTRIGGER_HOME/err\" & echo $!; sleep 1")
        .env("BIN", common::BIN)
        .env("OUTRIGGER_HOME", home.path())
        .stdin(reader)
        .output()
        .unwrap();
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    let deadline = std::time::Instant::now() + WAIT;
    // Gone, or a zombie waiting for its new parent to reap it.
    let gone = || {
        std::fs::read_to_string(proc_dir.join("stat"))
            .map(|s| {
                s.split(") ")
                    .nth(1)
                    .is_some_and(|rest| rest.starts_with('Z'))
            })
            .unwrap_or(true)
    };
    while !gone() {
        assert!(
            std::time::Instant::now() < deadline,
            "orphaned sidecar {pid} kept running"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let err = std::fs::read_to_string(home.path().join("err")).unwrap();
    assert!(
        err.contains("host went away"),
        "stopped for another reason: {err}"
    );
    let out = std::fs::read_to_string(home.path().join("out")).unwrap();
    let last: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["method"], "lifecycle.shutdown");
}
