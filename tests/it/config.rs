//! Config layering with provenance, failure messages and --dump-config, over a temporary
//! OUTRIGGER_HOME.

use crate::common;

use crate::common::{Opts, Sidecar, WAIT, write_file};
use serde_json::{Value, json};

fn merged(s: &mut Sidecar) -> Value {
    s.ok("config.get", json!({"merged": true}))["merged"].clone()
}

#[test]
fn defaults_with_sources() {
    let mut s = Sidecar::start();
    let r = s.ok("config.get", Value::Null);
    assert_eq!(r["logLevel"], "INFO");
    assert_eq!(r["gracePeriodSeconds"], 5.0);
    assert_eq!(r["protocolVersion"], "0.1.0");
    assert!(r.get("merged").is_none());
    let m = merged(&mut s);
    assert_eq!(
        m["log_level"],
        json!({"value": "INFO", "source": "default"})
    );
    assert_eq!(
        m["storage_path"],
        json!({"value": null, "source": "default"})
    );
    assert_eq!(m["max_frame_bytes"]["value"], 64 * 1024 * 1024);
}

#[test]
fn every_layer_with_provenance() {
    let home = tempfile::tempdir().unwrap();
    write_file(
        home.path(),
        "config.json",
        r#"{"log_level":"WARNING","grace_period_seconds":2.5,"max_frame_bytes":100000,
            "profiles":{"dev":{"grace_period_seconds":1.0,"storage_path":"/tmp/p.db"},"other":{}}}"#,
    );
    let managed = write_file(home.path(), "managed.json", r#"{"max_frame_bytes":200000}"#);
    let mut s = Sidecar::start_with(Opts {
        home: Some(home),
        args: vec!["--storage-path".into(), "/tmp/cli.db".into()],
        env: vec![
            ("OUTRIGGER_PROFILE".into(), "dev".into()),
            ("OUTRIGGER_LOG_LEVEL".into(), "error".into()),
            (
                "OUTRIGGER_MANAGED_CONFIG_PATH".into(),
                managed.display().to_string(),
            ),
        ],
        ..Default::default()
    });
    let m = merged(&mut s);
    assert_eq!(m["log_level"], json!({"value": "ERROR", "source": "env"}));
    assert_eq!(
        m["grace_period_seconds"],
        json!({"value": 1.0, "source": "profile"})
    );
    assert_eq!(
        m["storage_path"],
        json!({"value": "/tmp/cli.db", "source": "cli"})
    );
    assert_eq!(
        m["max_frame_bytes"],
        json!({"value": 200000, "source": "managed"})
    );

    // Per-request override layer: config.set, previewed by config.get's override.
    s.ok("config.set", json!({"logLevel": "DEBUG"}));
    let r = s.ok("config.get", json!({"merged": true}));
    assert_eq!(r["logLevel"], "DEBUG");
    assert_eq!(r["merged"]["log_level"]["source"], "override");
    let p = s.ok(
        "config.get",
        json!({"merged": true, "override": {"grace_period_seconds": 9.0}}),
    );
    assert_eq!(
        p["merged"]["grace_period_seconds"],
        json!({"value": 9.0, "source": "override"})
    );
    assert_eq!(p["gracePeriodSeconds"], 9.0);
    assert_eq!(
        merged(&mut s)["grace_period_seconds"]["source"],
        "profile",
        "preview only"
    );

    // The managed file's keys cannot be loosened from below.
    let r = s.call("config.get", json!({"override": {"max_frame_bytes": 4096}}));
    assert_eq!(r["error"]["code"], -32002, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("managed"));
}

#[test]
fn config_set_validates_and_respects_pins() {
    let home = tempfile::tempdir().unwrap();
    let managed = write_file(home.path(), "managed.json", r#"{"log_level":"ERROR"}"#);
    let mut s = Sidecar::start();
    let r = s.call("config.set", json!({"logLevel": "LOUD"}));
    assert_eq!(r["error"]["code"], -32602);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("DEBUG, INFO, WARNING, ERROR")
    );
    let r = s.call("config.set", json!({}));
    assert_eq!(r["error"]["code"], -32602);
    let r = s.call("config.set", json!({"colour": "red"}));
    assert_eq!(r["error"]["code"], -32602);
    drop(s);

    let mut s = Sidecar::start_with(Opts {
        home: Some(home),
        env: vec![(
            "OUTRIGGER_MANAGED_CONFIG_PATH".into(),
            managed.display().to_string(),
        )],
        ..Default::default()
    });
    let r = s.call("config.set", json!({"logLevel": "DEBUG"}));
    assert_eq!(r["error"]["code"], -32002);
    assert_eq!(r["error"]["data"]["kind"], "policy_denied");
    assert_eq!(s.ok("config.get", Value::Null)["logLevel"], "ERROR");
}

#[test]
fn log_level_changes_live() {
    let mut s = Sidecar::start();
    s.ok("config.set", json!({"logLevel": "DEBUG"}));
    // An unknown reverse-response id is logged at debug level once DEBUG is on.
    s.send(&json!({"jsonrpc": "2.0", "id": "srv_4242", "result": 1}));
    let line = s.stderr_line_matching("srv_4242", WAIT);
    assert!(line.contains("DEBUG"), "{line}");
}

fn boot_error(home: &std::path::Path, env: &[(&str, &str)]) -> String {
    let (status, out, err) = common::run_once(home, &[], env, b"");
    assert_eq!(status.code(), Some(2), "stdout {out} stderr {err}");
    assert!(out.is_empty(), "nothing on stdout when boot fails: {out}");
    err
}

#[test]
fn boot_failures_name_the_problem() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();

    write_file(h, "config.json", "{\n  \"log_level\": \"INFO\",\n  oops\n}");
    let e = boot_error(h, &[]);
    assert!(e.contains("config.json") && e.contains("line 3"), "{e}");

    write_file(h, "config.json", r#"{"grace_period_seconds":"soon"}"#);
    let e = boot_error(h, &[]);
    assert!(
        e.contains("grace_period_seconds") && e.contains("file") && e.contains("number"),
        "{e}"
    );

    write_file(h, "config.json", r#"{"log_levle":"INFO"}"#);
    let e = boot_error(h, &[]);
    assert!(e.contains("log_levle") && e.contains("known keys"), "{e}");

    write_file(h, "config.json", r#"{"profiles":{"dev":{},"ci":{}}}"#);
    let e = boot_error(h, &[("OUTRIGGER_PROFILE", "prod")]);
    assert!(
        e.contains("prod") && e.contains("ci") && e.contains("dev"),
        "{e}"
    );

    let e = boot_error(h, &[("OUTRIGGER_MAX_FRAME_BYTES", "2147483648")]);
    assert!(
        e.contains("max_frame_bytes") && e.contains("env") && e.contains("1073741824"),
        "{e}"
    );

    let e = boot_error(h, &[("OUTRIGGER_GRACE_PERIOD_SECONDS", "abc")]);
    assert!(
        e.contains("grace_period_seconds") && e.contains("env"),
        "{e}"
    );

    let e = boot_error(
        h,
        &[("OUTRIGGER_MANAGED_CONFIG_PATH", "/nonexistent/managed.json")],
    );
    assert!(e.contains("/nonexistent/managed.json"), "{e}");

    let m = write_file(h, "managed.json", r#"{"log_level":7}"#);
    let e = boot_error(h, &[("OUTRIGGER_MANAGED_CONFIG_PATH", m.to_str().unwrap())]);
    assert!(e.contains("log_level") && e.contains("managed"), "{e}");
}

#[test]
fn dump_config_prints_merged_view() {
    let home = tempfile::tempdir().unwrap();
    write_file(home.path(), "config.json", r#"{"grace_period_seconds":3}"#);
    let (status, out, _) = common::run_once(
        home.path(),
        &["--dump-config", "--log-level", "DEBUG"],
        &[],
        b"",
    );
    assert!(status.success());
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["grace_period_seconds"],
        json!({"value": 3, "source": "file"})
    );
    assert_eq!(v["log_level"], json!({"value": "DEBUG", "source": "cli"}));
    assert_eq!(v["max_frame_bytes"]["source"], "default");
}

#[test]
fn json_log_format_on_stderr() {
    let home = tempfile::tempdir().unwrap();
    let input = b"{\"jsonrpc\":\"2.0\",\"id\":\"srv_1\",\"result\":1}\n";
    let (status, _, err) = common::run_once(
        home.path(),
        &["--log-level", "DEBUG"],
        &[("OUTRIGGER_LOG_FORMAT", "json")],
        input,
    );
    assert!(status.success());
    let mut logs = 0;
    for line in err.lines().filter(|l| !l.starts_with("__SIDECAR_READY__:")) {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v.get("level").is_some() && v.get("fields").is_some(), "{v}");
        logs += 1;
    }
    assert!(logs > 0, "no log lines: {err}");
}
