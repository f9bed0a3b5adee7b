//! Framing, classification, ids, batches, concurrency and the reverse channel, over pipes.

use crate::common;

use std::time::Duration;

use crate::common::{Opts, Sidecar, WAIT, wait_until};
use serde_json::{Value, json};

#[test]
fn ready_marker_then_lifecycle_ready_first() {
    let s = Sidecar::start();
    let m = s.ready_marker.clone().unwrap();
    assert_eq!(m["status"], "ok");
    assert_eq!(m["protocolVersion"], "0.1.0");
    assert_eq!(m["pid"], json!(s.pid()));
    assert_eq!(m["runtime"], "rust");
}

#[test]
fn lifecycle_ready_params() {
    let home = tempfile::tempdir().unwrap();
    let (status, out, err) = common::run_once(home.path(), &[], &[], b"");
    assert!(status.success());
    let first: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(first["method"], "lifecycle.ready");
    let p = &first["params"];
    assert_eq!(p["protocolVersion"], "0.1.0");
    assert_eq!(p["listenInfo"]["transport"], "stdio");
    assert!(p["pid"].as_i64().unwrap() > 0);
    assert!(p["version"].is_string());
    assert!(err.starts_with("__SIDECAR_READY__:{"), "{err}");
}

#[test]
fn ping_reports_health() {
    let mut s = Sidecar::start();
    let h = s.ok("system.ping", Value::Null);
    for k in [
        "status",
        "version",
        "protocolVersion",
        "uptimeMs",
        "pid",
        "pythonVersion",
        "runtime",
        "rustVersion",
        "platform",
        "loadedProviders",
        "loadedTools",
        "activeTraces",
        "checks",
    ] {
        assert!(h.get(k).is_some(), "ping lacks {k}: {h}");
    }
    assert_eq!(h["status"], "ok");
    assert_eq!(h["runtime"], "rust");
    assert_eq!(h["pid"], json!(s.pid()));
    let platform = h["platform"].as_str().unwrap();
    assert_eq!(platform, format!("linux-{}", std::env::consts::ARCH));
    assert!(h["rustVersion"].as_str().unwrap().starts_with("1."));
    // python3 is on this machine: once the background probe has answered (ping never waits
    // for it), the field names its version.
    let py = std::process::Command::new("python3")
        .arg("--version")
        .output();
    if let Ok(o) = py {
        let want = String::from_utf8_lossy(&o.stdout)
            .trim()
            .replace("Python ", "");
        let mut seen = Value::Null;
        let named = wait_until(Duration::from_secs(10), || {
            seen = s.ok("system.ping", Value::Null)["pythonVersion"].clone();
            seen == json!(want)
        });
        assert!(named, "pythonVersion {seen}, want {want}");
    }
    assert!(h["uptimeMs"].as_u64().is_some());
    assert!(h["loadedTools"].as_u64().is_some());
}

#[test]
fn ping_python_version_null_without_python() {
    let mut s = Sidecar::start_with(Opts {
        env: vec![(
            "OUTRIGGER_RUN_CODE_PYTHON".into(),
            "/nonexistent/python3".into(),
        )],
        ..Default::default()
    });
    let h = s.ok("system.ping", Value::Null);
    assert!(h["pythonVersion"].is_null(), "{h}");
}

#[test]
fn parse_errors_and_invalid_utf8_keep_serving() {
    let mut s = Sidecar::start();
    s.send_raw(b"{not json\n");
    let e = s.next_frame(WAIT).unwrap();
    assert_eq!(e["error"]["code"], -32700);
    assert_eq!(e["error"]["data"]["kind"], "parse");
    assert!(e["id"].is_null() && e.as_object().unwrap().contains_key("id"));

    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}\n");
    let e = s.next_frame(WAIT).unwrap();
    assert_eq!(e["error"]["code"], -32700);
    assert!(e["error"]["message"].as_str().unwrap().contains("UTF-8"));

    // Blank lines are skipped silently.
    s.send_raw(b"\n   \n\r\n");
    assert_eq!(s.ok("system.ping", Value::Null)["status"], "ok");
}

#[test]
fn invalid_requests_get_32600() {
    let mut s = Sidecar::start();
    for (frame, id) in [
        (r#"{"jsonrpc":"2.0","id":7}"#, json!(7)),
        (
            r#"{"jsonrpc":"1.0","id":8,"method":"system.ping"}"#,
            json!(8),
        ),
        (r#"{"id":9,"method":"system.ping"}"#, json!(9)),
        (r#"{"jsonrpc":"2.0","id":10,"method":5}"#, json!(10)),
        (
            r#"{"jsonrpc":"2.0","id":11,"method":"system.ping","params":3}"#,
            json!(11),
        ),
        (r#"[1,2]"#, Value::Null),
        (r#"42"#, Value::Null),
    ] {
        s.send_raw(format!("{frame}\n").as_bytes());
        let r = s.next_frame(WAIT).unwrap();
        let r = if r.is_array() { r[0].clone() } else { r };
        assert_eq!(r["error"]["code"], -32600, "{frame} → {r}");
        assert_eq!(r["error"]["data"]["kind"], "invalid_request");
        assert_eq!(r["id"], id, "{frame}");
    }
    assert_eq!(s.ok("system.ping", Value::Null)["status"], "ok");
}

/// The frames that lost their id before issue 12 (answered `{"id": null, "error": -32600}`,
/// so the host's promise never settled): a lone surrogate a JS host's `JSON.stringify`
/// writes for text cut inside an emoji, a number beyond f64, and both nested deeper.
#[test]
fn undecodable_params_keep_the_request_id() {
    let mut s = Sidecar::start();
    let send = |s: &mut Sidecar, id: &str, params: &str| {
        s.send_raw(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"debug.echo\",\"params\":{params}}}\n")
                .as_bytes(),
        );
    };
    // A lone high surrogate is replaced by U+FFFD; the request runs.
    send(&mut s, "41", r#"{"value":"cut \ud83d"}"#);
    let r = s.response(&json!(41));
    assert_eq!(r["result"], "cut \u{FFFD}", "{r}");
    // A lone low surrogate in a key, a high one before a plain escape, a real pair kept.
    send(
        &mut s,
        r#""s-2""#,
        r#"{"value":{"\ude00k":"\ud83d\u0041 and \ud83d\ude00"}}"#,
    );
    let r = s.response(&json!("s-2"));
    assert_eq!(
        r["result"],
        json!({"\u{FFFD}k": "\u{FFFD}A and \u{1F600}"}),
        "{r}"
    );
    // A member *name* outside params with a lone surrogate (found by the frame fuzzer).
    s.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"debug.echo\",\"params\":{\"value\":1},\"\\ud800\":1}\n",
    );
    let r = s.response(&json!(42));
    assert_eq!(r["result"], 1, "{r}");
    // A number out of range: -32602 with the id, naming the field.
    send(&mut s, "43", r#"{"value":1e400}"#);
    let r = s.response(&json!(43));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["kind"], "invalid_params");
    assert_eq!(r["error"]["data"]["field"], "params.value", "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("params.value") && msg.contains("out of range"),
        "{msg}"
    );
    send(
        &mut s,
        r#""n-4""#,
        r#"{"value":{"deep":[1,-1e400]},"x":"\ud83d"}"#,
    );
    let r = s.response(&json!("n-4"));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["field"], "params.value.deep[1]", "{r}");
    // An unknown method with such params is still -32601 with its id.
    s.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":45,\"method\":\"no.such\",\"params\":{\"v\":1e400}}\n",
    );
    let r = s.response(&json!(45));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    // A notification with such params gets no answer; the next request does.
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"debug.echo\",\"params\":{\"value\":1e400}}\n");
    send(&mut s, "46", r#"{"value":"after"}"#);
    let r = s.next_frame(WAIT).unwrap();
    assert_eq!(r["id"], 46, "{r}");
    assert_eq!(r["result"], "after");
    // In a batch, each item keeps its id.
    s.send_raw(
        b"[{\"jsonrpc\":\"2.0\",\"id\":47,\"method\":\"debug.echo\",\"params\":{\"value\":\"\\udc00\"}},\
          {\"jsonrpc\":\"2.0\",\"id\":48,\"method\":\"debug.echo\",\"params\":{\"value\":1e999}}]\n",
    );
    let r = s.next_frame(WAIT).unwrap();
    let arr = r.as_array().expect("a batch answer");
    assert_eq!(arr[0]["id"], 47);
    assert_eq!(arr[0]["result"], "\u{FFFD}");
    assert_eq!(arr[1]["id"], 48);
    assert_eq!(arr[1]["error"]["code"], -32602);
    // Only an envelope that is not JSON at all is -32700 with a null id.
    s.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":49,\"method\":\"debug.echo\",\"params\":{\"value\":1e400}\n",
    );
    let r = s.next_frame(WAIT).unwrap();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert!(r["id"].is_null());
}

#[test]
fn unknown_method_names_it() {
    let mut s = Sidecar::start();
    let r = s.call("no.such", json!({}));
    assert_eq!(r["error"]["code"], -32601);
    assert_eq!(r["error"]["data"]["method"], "no.such");
    assert_eq!(r["error"]["data"]["kind"], "method_not_found");
}

#[test]
fn ids_are_echoed_exactly() {
    let mut s = Sidecar::start();
    for raw in [
        r#"1.50"#,
        r#""abc""#,
        r#"1e3"#,
        r#"-7"#,
        r#""\u00e9x""#,
        r#"123456789012345678901234567890"#,
    ] {
        s.send_raw(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{raw},\"method\":\"system.ping\"}}\n").as_bytes(),
        );
        let line = s.next_line(WAIT).unwrap();
        assert!(
            line.starts_with(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{raw},")),
            "id {raw} not echoed verbatim: {line}"
        );
    }
}

#[test]
fn notifications_get_no_response() {
    let mut s = Sidecar::start();
    s.send(&json!({"jsonrpc": "2.0", "method": "system.ping"}));
    s.send(&json!({"jsonrpc": "2.0", "method": "no.such.method", "params": {}}));
    s.send(&json!({"jsonrpc": "2.0", "id": "after", "method": "system.ping"}));
    let next = s.next_frame(WAIT).unwrap();
    assert_eq!(next["id"], "after", "a notification was answered: {next}");
    assert!(s.next_line(Duration::from_millis(300)).is_none());
}

#[test]
fn batches() {
    let mut s = Sidecar::start();
    s.send_raw(
        br#"[{"jsonrpc":"2.0","id":1,"method":"system.ping"},{"jsonrpc":"2.0","method":"system.ping"},{"jsonrpc":"2.0","id":"x","method":"nope"},{"foo":1}]"#,
    );
    s.send_raw(b"\n");
    let r = s.next_frame(WAIT).unwrap();
    let arr = r.as_array().expect("batch answered with an array");
    assert_eq!(arr.len(), 3, "{r}");
    assert_eq!(arr[0]["id"], 1);
    assert_eq!(arr[0]["result"]["status"], "ok");
    assert_eq!(arr[1]["id"], "x");
    assert_eq!(arr[1]["error"]["code"], -32601);
    assert_eq!(arr[2]["error"]["code"], -32600);

    // Only notifications: no reply at all.
    s.send_raw(b"[{\"jsonrpc\":\"2.0\",\"method\":\"system.ping\"}]\n");
    // Empty batch: one error object, not an array.
    s.send_raw(b"[]\n");
    let r = s.next_frame(WAIT).unwrap();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(r["id"].is_null());
}

#[test]
fn eight_mib_frame_round_trips() {
    let mut s = Sidecar::start();
    let big = "x".repeat(8 << 20);
    let r = s.ok("debug.echo", json!({"value": big}));
    assert_eq!(r.as_str().map(str::len), Some(8 << 20));
}

#[test]
fn over_limit_frame_is_refused_and_next_works() {
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_MAX_FRAME_BYTES".into(), "4096".into())],
        ..Default::default()
    });
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"debug.echo\",\"params\":{{\"value\":\"{}\"}}}}\n",
        "y".repeat(10_000)
    );
    s.send_raw(big.as_bytes());
    let r = s.next_frame(WAIT).unwrap();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("max_frame_bytes") && msg.contains("4096"),
        "{msg}"
    );
    assert_eq!(r["error"]["data"]["limit"], 4096);
    assert_eq!(s.ok("system.ping", Value::Null)["status"], "ok");
}

#[test]
fn thousand_pipelined_pings() {
    let mut s = Sidecar::start();
    let mut buf = Vec::new();
    for i in 0..1000 {
        buf.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"system.ping\"}}\n").as_bytes(),
        );
    }
    s.send_raw(&buf);
    let mut seen = vec![false; 1000];
    for _ in 0..1000 {
        let f = s.next_frame(WAIT).expect("a ping response");
        let id = f["id"].as_u64().unwrap() as usize;
        assert_eq!(f["result"]["status"], "ok");
        assert!(!seen[id], "id {id} answered twice");
        seen[id] = true;
    }
    assert!(seen.iter().all(|x| *x));
}

#[test]
fn back_pressure_still_answers_everything() {
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_MAX_INFLIGHT_REQUESTS".into(), "16".into())],
        ..Default::default()
    });
    let mut buf = Vec::new();
    for i in 0..20 {
        buf.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"debug.sleep\",\"params\":{{\"ms\":20}}}}\n")
                .as_bytes(),
        );
    }
    for i in 20..500 {
        buf.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"system.ping\"}}\n").as_bytes(),
        );
    }
    s.send_raw(&buf);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..500 {
        let f = s.next_frame(WAIT).expect("every request is answered");
        assert!(f.get("error").is_none(), "{f}");
        assert!(seen.insert(f["id"].as_u64().unwrap()));
    }
}

#[test]
fn debug_logging_never_touches_stdout() {
    let home = tempfile::tempdir().unwrap();
    let mut input = String::new();
    for i in 0..20 {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"system.ping\"}}\n"
        ));
    }
    input.push_str("garbage\n{\"jsonrpc\":\"2.0\",\"id\":\"srv_77\",\"result\":1}\n");
    input.push_str("{\"jsonrpc\":\"2.0\",\"id\":\"c\",\"method\":\"config.set\",\"params\":{\"logLevel\":\"DEBUG\"}}\n");
    let (status, out, err) = common::run_once(
        home.path(),
        &["--log-level", "DEBUG"],
        &[],
        input.as_bytes(),
    );
    assert!(status.success());
    assert!(err.contains("DEBUG"), "debug logs go to stderr: {err}");
    let mut n = 0;
    for line in out.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("non-JSON stdout line ({e}): {line:?}"));
        assert_eq!(
            v.get("jsonrpc")
                .map(|_| true)
                .or(v.as_array().map(|_| true)),
            Some(true)
        );
        n += 1;
    }
    // ready + 20 pings + parse error + config.set + shutdown
    assert_eq!(n, 24, "{out}");
}

#[test]
fn sleeping_handler_does_not_delay_ping() {
    let mut s = Sidecar::start();
    s.send(
        &json!({"jsonrpc": "2.0", "id": "slow", "method": "debug.sleep", "params": {"ms": 3000}}),
    );
    s.send(&json!({"jsonrpc": "2.0", "id": "fast", "method": "system.ping"}));
    let first = s.next_frame(WAIT).unwrap();
    assert_eq!(first["id"], "fast", "ping waited behind a sleeping handler");
    let second = s.next_frame(WAIT).unwrap();
    assert_eq!(second["id"], "slow");
    assert_eq!(second["result"]["sleptMs"], 3000);
}

#[test]
fn line_separators_are_escaped() {
    let mut s = Sidecar::start();
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "debug.echo", "params": {"value": "a\u{2028}b\u{2029}c"}}));
    let line = s.next_line(WAIT).unwrap();
    assert!(line.contains(r"a\u2028b\u2029c"), "{line}");
    assert!(!line.contains('\u{2028}') && !line.contains('\u{2029}'));
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["result"], "a\u{2028}b\u{2029}c");
    // Also in error data (the method name is echoed there).
    let r = s.call("x\u{2028}y", json!({}));
    assert_eq!(r["error"]["data"]["method"], "x\u{2028}y");
}

#[test]
fn wrong_params_are_invalid_params() {
    let mut s = Sidecar::start();
    let r = s.call("config.get", json!([1]));
    assert_eq!(r["error"]["code"], -32602);
    assert!(r["error"]["message"].as_str().unwrap().contains("object"));
    let r = s.call("config.get", json!({"merged": "yes"}));
    assert_eq!(r["error"]["code"], -32602);
    let r = s.call("debug.sleep", json!({}));
    assert_eq!(r["error"]["code"], -32602);
    assert!(r["error"]["message"].as_str().unwrap().contains("ms"));
}

#[test]
fn reverse_requests_round_trip() {
    let mut s = Sidecar::start();
    s.send(&json!({"jsonrpc": "2.0", "id": "r1", "method": "debug.reverse", "params": {"method": "host.echo", "params": {"q": 1}}}));
    let req = s.wait_for(WAIT, |v| v["method"] == "host.echo");
    let rid = req["id"].as_str().unwrap().to_string();
    assert!(rid.starts_with("srv_"), "{req}");
    assert_eq!(req["params"]["q"], 1);
    // An answer to an id nobody waits for is dropped without a reply.
    s.send(&json!({"jsonrpc": "2.0", "id": "srv_999", "result": {}}));
    s.send(&json!({"jsonrpc": "2.0", "id": rid, "result": {"answers": {"a": "yes"}}}));
    let r = s.response(&json!("r1"));
    assert_eq!(r["result"]["result"]["answers"]["a"], "yes");

    // The host's error surfaces with its code and kind.
    s.send(&json!({"jsonrpc": "2.0", "id": "r2", "method": "debug.reverse", "params": {"method": "host.other"}}));
    let req = s.wait_for(WAIT, |v| v["method"] == "host.other");
    let rid2 = req["id"].as_str().unwrap().to_string();
    assert_ne!(rid, rid2);
    s.send(&json!({"jsonrpc": "2.0", "id": rid2, "error": {"code": -32601, "message": "no", "data": {"kind": "method_not_found"}}}));
    let r = s.response(&json!("r2"));
    assert_eq!(r["result"]["error"]["code"], -32601);
    assert_eq!(r["result"]["error"]["kind"], "method_not_found");

    // No answer: the per-call timeout.
    let r = s.ok(
        "debug.reverse",
        json!({"method": "host.slow", "timeoutMs": 100}),
    );
    assert_eq!(r["error"]["kind"], "timeout");
    let _ = s.wait_for(WAIT, |v| v["method"] == "host.slow");
    assert_eq!(s.ok("system.ping", Value::Null)["status"], "ok");
}
