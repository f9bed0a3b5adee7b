//! Executable plugins end to end over the pipes: real shell-script executables and TOML
//! manifests written by each test into its own tempdir, loaded by the sidecar through
//! `OUTRIGGER_PLUGIN_DIR` (or `$OUTRIGGER_HOME/plugins/`), driven with `tool.invoke`,
//! `tool.list`, `plugin.*` and `system.ping`. See docs/plugins.md and docs/protocol.md.

use crate::common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{Opts, Sidecar, WAIT};
use crate::support::plugins::{Plugins, atomic_write, boot_failure_with, tool};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn invoke(s: &mut Sidecar, name: &str, args: Value) -> Value {
    s.ok("tool.invoke", json!({"name": name, "arguments": args}))
}

fn assert_duration(tr: &Value) {
    assert!(
        tr["data"]["durationMs"].is_u64() || tr["data"]["durationMs"].is_f64(),
        "every dispatched result carries data.durationMs: {tr}"
    );
}

fn tool_list_names(s: &mut Sidecar) -> Vec<String> {
    let list = s.ok("tool.list", Value::Null);
    list.as_array()
        .unwrap_or_else(|| panic!("tool.list result is an array: {list}"))
        .iter()
        .map(|r| r["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn tool_row(s: &mut Sidecar, name: &str) -> Option<Value> {
    let list = s.ok("tool.list", Value::Null);
    list.as_array()
        .unwrap()
        .iter()
        .find(|r| r["function"]["name"] == name)
        .cloned()
}

fn plugin_row(s: &mut Sidecar, name: &str) -> Value {
    let r = s.ok("plugin.list", Value::Null);
    r["plugins"]
        .as_array()
        .unwrap_or_else(|| panic!("plugin.list has plugins[]: {r}"))
        .iter()
        .find(|p| p["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("plugin {name} not in plugin.list: {r}"))
}

fn loaded_tools(s: &mut Sidecar) -> u64 {
    let h = s.ok("system.ping", Value::Null);
    h["loadedTools"]
        .as_u64()
        .unwrap_or_else(|| panic!("loadedTools is a count: {h}"))
}

fn error_of(r: &Value) -> &Value {
    assert!(r.get("result").is_none(), "expected an RPC error: {r}");
    &r["error"]
}

fn assert_invalid_params_naming(r: &Value, needle: &str) {
    let e = error_of(r);
    assert_eq!(e["code"], -32602, "{r}");
    let msg = e["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(needle),
        "error message should name {needle:?}: {r}"
    );
}

/// A process is gone when /proc has no entry for it, or it is a zombie waiting to be reaped
/// (the container's pid 1 may not reap orphans).
fn gone(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
    }
}

fn wait_gone(pid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if gone(pid) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// A per-test unique `sleep` argument: plugins run in a PID namespace, so their `$$` and `$!`
/// are not host pids; the tests find their processes on the host by this argument instead.
fn unique_secs(tag: u32) -> String {
    format!("{}.{:06}{tag}", 60 + tag, std::process::id() % 1_000_000)
}

/// Host pids of processes with `arg` in their command line, once there are `n` of them.
fn running(arg: &str, n: usize) -> Vec<i32> {
    assert!(
        common::wait_until(WAIT, || common::pids_with_arg(arg).len() >= n),
        "sleep {arg} never started"
    );
    common::pids_with_arg(arg)
}

fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}

const FORECAST_PARAMS: &str = r#"parameters = '''
{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
'''"#;

/// A `weather` plugin with a succeeding `get_forecast` and an `echo_args` that returns its stdin.
fn weather(p: &Plugins) -> PathBuf {
    p.script(
        "forecast",
        r#"cat >/dev/null; echo '{"ok": true, "result": {"city": "Oslo", "tempC": 21}}'"#,
    );
    p.script(
        "echo_args",
        r#"input=$(cat); printf '{"ok": true, "result": %s}\n' "$input""#,
    );
    p.manifest(
        "weather.toml",
        &format!(
            "name = \"weather\"\ndescription = \"Weather lookups\"\n\n{}{}",
            tool(
                "get_forecast",
                "Weather forecast for a city",
                "forecast",
                "10s",
                FORECAST_PARAMS
            ),
            tool(
                "echo_args",
                "Echo the arguments back",
                "echo_args",
                "10s",
                "mode = \"safe_write\"\nexposure = \"deferred\""
            )
        ),
    )
}

// ---------------------------------------------------------------------------------------------
// The call contract
// ---------------------------------------------------------------------------------------------

#[test]
fn success_returns_result_and_duration() {
    let p = Plugins::new();
    weather(&p);
    let mut s = p.start();
    let tr = invoke(&mut s, "get_forecast", json!({"city": "Oslo"}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(
        tr["data"]["result"],
        json!({"city": "Oslo", "tempC": 21}),
        "{tr}"
    );
    assert!(
        tr["data"].get("modelResult").is_none_or(Value::is_null),
        "no modelResult unless the plugin gave one: {tr}"
    );
    assert!(tr.get("error").is_none_or(Value::is_null), "{tr}");
    assert_duration(&tr);
}

#[test]
fn args_reach_the_executable_on_stdin() {
    let p = Plugins::new();
    weather(&p);
    let mut s = p.start();
    let args = json!({"city": "Zürich", "days": 3, "nested": {"list": [1, "two", null, true]}});
    let tr = invoke(&mut s, "echo_args", args.clone());
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["result"], args, "{tr}");

    // `arguments` absent means {}.
    let tr = s.ok("tool.invoke", json!({"name": "echo_args"}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["result"], json!({}), "{tr}");
}

#[test]
fn plugin_runs_in_the_context_cwd() {
    let p = Plugins::new();
    p.script(
        "pwd",
        r#"printf '{"ok": true, "result": "%s"}\n' "$(pwd -P)""#,
    );
    p.manifest(
        "cwd.toml",
        &tool(
            "where_am_i",
            "Print the working directory",
            "pwd",
            "10s",
            "",
        ),
    );
    let mut s = p.start();
    let ws = tempfile::tempdir().unwrap();
    let tr = s.ok(
        "tool.invoke",
        json!({"name": "where_am_i", "arguments": {}, "context": {"cwd": ws.path()}}),
    );
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(
        tr["data"]["result"].as_str().map(PathBuf::from),
        Some(ws.path().canonicalize().unwrap()),
        "{tr}"
    );
}

#[test]
fn model_result_is_passed_beside_result() {
    let p = Plugins::new();
    p.script(
        "bulky",
        r#"echo '{"ok": true, "result": {"rows": [1, 2, 3, 4, 5]}, "model_result": "5 rows"}'"#,
    );
    p.script(
        "null_model",
        r#"echo '{"ok": true, "result": 7, "model_result": null}'"#,
    );
    p.manifest(
        "bulky.toml",
        &(tool("bulky", "Bulky result", "bulky", "10s", "")
            + &tool("null_model", "Null model result", "null_model", "10s", "")),
    );
    let mut s = p.start();
    let tr = invoke(&mut s, "bulky", json!({}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["modelResult"], "5 rows", "{tr}");
    assert_eq!(
        tr["data"]["result"],
        json!({"rows": [1, 2, 3, 4, 5]}),
        "{tr}"
    );
    assert_duration(&tr);

    // "model_result": null counts as absent.
    let tr = invoke(&mut s, "null_model", json!({}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["result"], 7, "{tr}");
    assert!(
        tr["data"].get("modelResult").is_none_or(Value::is_null),
        "{tr}"
    );
}

#[test]
fn ok_false_keeps_its_own_kind_and_message() {
    let p = Plugins::new();
    p.script(
        "nocity",
        r#"echo '{"ok": false, "error": {"kind": "city_not_found", "message": "no city called Atlantis", "details": "SECRET-DETAILS"}}'
echo 'log line' >&2"#,
    );
    p.script(
        "busy",
        r#"echo '{"ok": false, "error": {"kind": "busy", "message": "try later"}}'; exit 4"#,
    );
    p.manifest(
        "fails.toml",
        &(tool("find_city", "Find a city", "nocity", "10s", "")
            + &tool("busy_tool", "Always busy", "busy", "10s", "")),
    );
    let mut s = p.start();
    let tr = invoke(&mut s, "find_city", json!({}));
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["needsFollowup"], true, "{tr}");
    assert_eq!(
        tr["error"], "city_not_found: no city called Atlantis",
        "{tr}"
    );
    assert_eq!(tr["data"]["kind"], "city_not_found", "{tr}");
    assert_eq!(tr["data"]["exitCode"], 0, "{tr}");
    assert!(
        !tr.to_string().contains("SECRET-DETAILS"),
        "error.details is never passed on: {tr}"
    );
    assert_duration(&tr);

    // With a non-zero exit the envelope still gives the kind; the exit code is attached.
    let tr = invoke(&mut s, "busy_tool", json!({}));
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["error"], "busy: try later", "{tr}");
    assert_eq!(tr["data"]["kind"], "busy", "{tr}");
    assert_eq!(tr["data"]["exitCode"], 4, "{tr}");
}

#[test]
fn nonzero_exit_is_a_failure_even_with_ok_true() {
    let p = Plugins::new();
    p.script(
        "liar",
        r#"echo '{"ok": true, "result": "looks fine"}'; echo 'Traceback: boom' >&2; exit 3"#,
    );
    p.manifest(
        "liar.toml",
        &tool("liar", "Claims success then exits 3", "liar", "10s", ""),
    );
    let mut s = p.start();
    let tr = invoke(&mut s, "liar", json!({}));
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["needsFollowup"], true, "{tr}");
    assert_eq!(tr["data"]["kind"], "nonzero_exit", "{tr}");
    assert_eq!(tr["data"]["exitCode"], 3, "{tr}");
    assert!(
        tr["error"].as_str().unwrap().starts_with("nonzero_exit: "),
        "{tr}"
    );
    assert!(
        tr["data"]["stderr"]
            .as_str()
            .unwrap()
            .contains("Traceback: boom"),
        "{tr}"
    );
    assert!(tr["data"].get("result").is_none(), "{tr}");
    assert_duration(&tr);
}

#[test]
fn invalid_json_stdout_is_invalid_output() {
    let p = Plugins::new();
    p.script("garbage", "echo 'this is not json {'");
    p.script("noresult", r#"echo '{"ok": true}'"#);
    p.manifest(
        "garbage.toml",
        &(tool("garbage", "Prints garbage", "garbage", "10s", "")
            + &tool("noresult", "ok without result", "noresult", "10s", "")),
    );
    let mut s = p.start();
    let tr = invoke(&mut s, "garbage", json!({}));
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["needsFollowup"], true, "{tr}");
    assert_eq!(tr["data"]["kind"], "invalid_output", "{tr}");
    assert_eq!(tr["data"]["exitCode"], 0, "{tr}");
    assert!(
        tr["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid_output: "),
        "{tr}"
    );
    assert!(
        tr["data"]["stdout"]
            .as_str()
            .unwrap()
            .contains("this is not json {"),
        "{tr}"
    );
    assert_duration(&tr);

    let tr = invoke(&mut s, "noresult", json!({}));
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["data"]["kind"], "invalid_output", "{tr}");
}

#[test]
fn timeout_kills_a_grandchild_that_ignores_sigterm() {
    let p = Plugins::new();
    let grandchild = unique_secs(1);
    p.script(
        "hang",
        &format!("sh -c 'trap \"\" TERM; sleep {grandchild}' &\necho started\nsleep 30"),
    );
    p.manifest(
        "hang.toml",
        &tool(
            "hang",
            "Hangs with a stubborn grandchild",
            "hang",
            "300ms",
            "",
        ),
    );
    let mut s = p.start();
    // The script sleeps 30 s, longer than the harness's 20 s response wait: only the timeout
    // can produce this answer.
    let tr = invoke(&mut s, "hang", json!({}));
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["needsFollowup"], true, "{tr}");
    assert_eq!(tr["data"]["kind"], "timeout", "{tr}");
    assert_eq!(tr["data"]["timeoutMs"], 300, "{tr}");
    let err = tr["error"].as_str().unwrap();
    assert!(
        err.starts_with("timeout: ")
            && err.contains("hang")
            && err.contains("300ms")
            && err.contains("killed"),
        "the error names the tool, the timeout and the group kill: {tr}"
    );
    assert_duration(&tr);

    let gone_all = || common::pids_with_arg(&grandchild).is_empty();
    assert!(
        common::wait_until(Duration::from_secs(5), gone_all),
        "grandchild sleep {grandchild} survived the plugin timeout"
    );
    // The sidecar is still healthy.
    s.ok("system.ping", Value::Null);
}

#[test]
fn sigterm_to_the_sidecar_kills_a_running_plugin_group() {
    let p = Plugins::new();
    let (c, g) = (unique_secs(2), unique_secs(3));
    p.script(
        "hang",
        &format!("sh -c 'trap \"\" TERM; sleep {g}' &\nsleep {c}"),
    );
    p.manifest(
        "hang.toml",
        &tool("hang_long", "Hangs for a minute", "hang", "2m", ""),
    );
    let mut s = p.start();
    s.send(
        &json!({"jsonrpc": "2.0", "id": "long", "method": "tool.invoke",
        "params": {"name": "hang_long", "arguments": {}}}),
    );
    let child = running(&c, 1)[0];
    let grandchild = running(&g, 1)[0];
    assert!(!gone(child) && !gone(grandchild), "plugin is running");
    // A running plugin call does not block other requests.
    s.ok("system.ping", Value::Null);

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(s.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = s.wait_exit(WAIT);
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0");
    assert!(
        wait_gone(child, Duration::from_secs(5)),
        "plugin process {child} survived the sidecar's SIGTERM"
    );
    assert!(
        wait_gone(grandchild, Duration::from_secs(5)),
        "plugin grandchild {grandchild} survived the sidecar's SIGTERM"
    );
}

// ---------------------------------------------------------------------------------------------
// Consent
// ---------------------------------------------------------------------------------------------

#[test]
fn local_mode_needs_consent() {
    let p = Plugins::new();
    let marker = p.scratch("ran");
    p.script(
        "touch",
        &format!(
            "echo ran >> {}\necho '{{\"ok\": true, \"result\": \"touched\"}}'",
            q(&marker)
        ),
    );
    p.manifest(
        "local.toml",
        &tool(
            "touch_home",
            "Touch a file on the user's machine",
            "touch",
            "10s",
            "mode = \"local\"",
        ),
    );
    let mut s = p.start();

    for params in [
        json!({"name": "touch_home", "arguments": {}}),
        json!({"name": "touch_home", "arguments": {}, "consentGranted": false}),
    ] {
        let r = s.call("tool.invoke", params);
        let e = error_of(&r);
        assert_eq!(e["code"], -32002, "{r}");
        assert_eq!(e["data"]["flag"], "consentGranted", "{r}");
        assert_eq!(e["data"]["tool"], "touch_home", "{r}");
        assert_eq!(e["data"]["mode"], "local", "{r}");
        assert_eq!(e["data"]["kind"], "policy_denied", "{r}");
    }
    assert!(!marker.exists(), "a refused call must not run the plugin");

    let tr = s.ok(
        "tool.invoke",
        json!({"name": "touch_home", "arguments": {}, "consentGranted": true}),
    );
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["result"], "touched", "{tr}");
    assert!(marker.exists(), "the consented call ran the plugin");

    let d = s.ok("plugin.tools.describe", Value::Null);
    let row = d["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "touch_home")
        .cloned()
        .unwrap_or_else(|| panic!("{d}"));
    assert_eq!(row["mode"], "local", "{row}");
    assert_eq!(
        row["requireConsent"], true,
        "a local tool requires consent: {row}"
    );
}

// ---------------------------------------------------------------------------------------------
// Listing
// ---------------------------------------------------------------------------------------------

#[test]
fn tool_list_rows_carry_mode_and_exposure_from_the_manifest() {
    let p = Plugins::new();
    p.script("ok", r#"echo '{"ok": true, "result": null}'"#);
    p.manifest(
        "tiers.toml",
        &(tool("tier_direct", "A direct tool", "ok", "10s", "mode = \"destructive\"\nexposure = \"direct\"")
            + &tool("tier_deferred", "A deferred tool", "ok", "10s", "mode = \"external\"\nexposure = \"deferred\"")
            + &tool("tier_hidden", "A hidden tool", "ok", "10s", "mode = \"safe_write\"\nexposure = \"hidden\"")
            + &tool("tier_default", "No exposure given", "ok", "10s", "mode = \"read\"\n")
            + &tool(
                "tier_params",
                "With a schema",
                "ok",
                "10s",
                "[tools.parameters]\ntype = \"object\"\nproperties = { city = { type = \"string\" } }\nrequired = [\"city\"]\n",
            )),
    );
    let mut s = p.start();
    let list = s.ok("tool.list", Value::Null);
    let rows = list.as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["function"]["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "tool.list is sorted by name");

    let row = |n: &str| {
        rows.iter()
            .find(|r| r["function"]["name"] == n)
            .unwrap_or_else(|| panic!("{n} missing from tool.list: {list}"))
            .clone()
    };
    for (name, mode, exposure) in [
        ("tier_direct", "destructive", "direct"),
        ("tier_deferred", "external", "deferred"),
        ("tier_hidden", "safe_write", "hidden"),
        ("tier_default", "read", "direct"),
    ] {
        let r = row(name);
        assert_eq!(r["type"], "function", "{r}");
        assert_eq!(r["mode"], mode, "{r}");
        assert_eq!(r["exposure"], exposure, "{r}");
        assert!(r["function"]["description"].is_string(), "{r}");
        assert_eq!(r["function"]["parameters"]["type"], "object", "{r}");
    }
    assert_eq!(
        row("tier_hidden")["function"]["description"],
        "A hidden tool"
    );
    let params = &row("tier_params")["function"]["parameters"];
    assert_eq!(params["properties"]["city"]["type"], "string", "{params}");
    assert_eq!(params["required"], json!(["city"]), "{params}");
}

#[test]
fn plugin_tools_describe_rows_carry_the_plugin() {
    let p = Plugins::new();
    weather(&p);
    let mut s = p.start();
    let d = s.ok("plugin.tools.describe", Value::Null);
    let tools = d["tools"].as_array().unwrap_or_else(|| panic!("{d}"));
    let row = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == n)
            .unwrap_or_else(|| panic!("{n} missing: {d}"))
            .clone()
    };
    let f = row("get_forecast");
    assert_eq!(f["plugin"], "weather", "{f}");
    assert_eq!(f["description"], "Weather forecast for a city", "{f}");
    assert_eq!(f["schema"]["required"], json!(["city"]), "{f}");
    assert_eq!(f["mode"], "read", "{f}");
    assert_eq!(f["exposure"], "direct", "{f}");
    assert_eq!(f["requireConsent"], false, "{f}");
    assert!(f["concurrencySafe"].is_boolean(), "{f}");
    let e = row("echo_args");
    assert_eq!(e["plugin"], "weather", "{e}");
    assert_eq!(e["mode"], "safe_write", "{e}");
    assert_eq!(e["exposure"], "deferred", "{e}");
    // Built-ins have plugin: null.
    let ts = row("tool_search");
    assert!(
        ts.as_object().unwrap().contains_key("plugin") && ts["plugin"].is_null(),
        "{ts}"
    );
    // Every row has every field.
    for t in tools {
        for k in [
            "name",
            "description",
            "schema",
            "mode",
            "exposure",
            "requireConsent",
            "concurrencySafe",
            "plugin",
        ] {
            assert!(t.as_object().unwrap().contains_key(k), "{k} missing in {t}");
        }
    }
}

#[test]
fn plugin_list_row_shape() {
    let p = Plugins::new();
    let manifest = weather(&p);
    // The plugin name defaults to the file stem.
    p.script("ok", r#"echo '{"ok": true, "result": null}'"#);
    let stem = p.manifest(
        "stem-named.toml",
        &tool("stem_tool", "Stem tool", "ok", "10s", ""),
    );
    // `_`-prefixed manifests are skipped.
    p.manifest(
        "_disabled.toml",
        &tool("never_loaded", "Skipped", "ok", "10s", ""),
    );
    let mut s = p.start();

    let r = s.ok("plugin.list", Value::Null);
    let plugins = r["plugins"].as_array().unwrap_or_else(|| panic!("{r}"));
    assert_eq!(plugins.len(), 2, "{r}");
    let w = plugin_row(&mut s, "weather");
    assert_eq!(
        fs::canonicalize(w["origin"].as_str().unwrap()).unwrap(),
        fs::canonicalize(&manifest).unwrap(),
        "{w}"
    );
    let tools: BTreeSet<&str> = w["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(tools, BTreeSet::from(["get_forecast", "echo_args"]), "{w}");
    assert_eq!(w["enabled"], true, "{w}");
    assert_eq!(w["reloadable"], true, "{w}");

    let st = plugin_row(&mut s, "stem-named");
    assert_eq!(st["tools"], json!(["stem_tool"]), "{st}");
    assert_eq!(
        fs::canonicalize(st["origin"].as_str().unwrap()).unwrap(),
        fs::canonicalize(&stem).unwrap(),
        "{st}"
    );
    assert!(!tool_list_names(&mut s).contains(&"never_loaded".to_owned()));
}

#[test]
fn plugins_load_from_outrigger_home() {
    let home = tempfile::tempdir().unwrap();
    let pdir = home.path().join("plugins");
    fs::create_dir(&pdir).unwrap();
    let exe = pdir.join("home_tool.sh");
    atomic_write(
        &exe,
        "#!/bin/sh\necho '{\"ok\": true, \"result\": \"from home\"}'\n",
        0o755,
    );
    fs::write(
        pdir.join("homeplug.toml"),
        format!(
            "[[tools]]\nname = \"home_tool\"\ndescription = \"A tool from OUTRIGGER_HOME\"\nexec = \"{}\"\ntimeout = 5000\nmode = \"read\"\n",
            exe.display()
        ),
    )
    .unwrap();
    let mut s = Sidecar::start_with(Opts {
        home: Some(home),
        ..Default::default()
    });
    let tr = invoke(&mut s, "home_tool", json!({}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["result"], "from home", "{tr}");
    assert_eq!(
        plugin_row(&mut s, "homeplug")["tools"],
        json!(["home_tool"])
    );
}

#[test]
fn loaded_tools_counts_the_registry() {
    let mut bare = Sidecar::start();
    let baseline = loaded_tools(&mut bare);
    assert!(baseline >= 1, "tool_search is always registered");
    drop(bare);

    let p = Plugins::new();
    p.script("ok", r#"echo '{"ok": true, "result": null}'"#);
    p.manifest(
        "three.toml",
        &(tool("count_a", "A", "ok", "10s", "")
            + &tool("count_b", "B", "ok", "10s", "exposure = \"deferred\"")
            + &tool("count_c", "C", "ok", "10s", "exposure = \"hidden\"")),
    );
    let mut s = p.start();
    assert_eq!(
        loaded_tools(&mut s),
        baseline + 3,
        "hidden and deferred tools count too"
    );
    s.ok("plugin.disable", json!({"name": "three"}));
    assert_eq!(
        loaded_tools(&mut s),
        baseline,
        "disabled tools leave the registry"
    );
    s.ok("plugin.enable", json!({"name": "three"}));
    assert_eq!(loaded_tools(&mut s), baseline + 3);
}

// ---------------------------------------------------------------------------------------------
// enable / disable / reload
// ---------------------------------------------------------------------------------------------

#[test]
fn disable_and_enable() {
    let p = Plugins::new();
    weather(&p);
    let mut s = p.start();
    assert_eq!(
        invoke(&mut s, "get_forecast", json!({"city": "Oslo"}))["success"],
        true
    );

    let r = s.ok("plugin.disable", json!({"name": "weather"}));
    assert_eq!(r["plugin"]["name"], "weather", "{r}");
    assert_eq!(r["plugin"]["enabled"], false, "{r}");
    assert!(r["plugin"]["tools"].is_array(), "{r}");
    assert!(r["plugin"]["origin"].is_string(), "{r}");
    assert!(r["plugin"]["reloadable"].is_boolean(), "{r}");

    let tr = invoke(&mut s, "get_forecast", json!({"city": "Oslo"}));
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["needsFollowup"], true, "{tr}");
    assert_eq!(tr["data"]["unknownTool"], "get_forecast", "{tr}");
    assert!(
        tr["error"]
            .as_str()
            .unwrap()
            .starts_with("Unknown tool: get_forecast"),
        "{tr}"
    );
    let names = tool_list_names(&mut s);
    assert!(!names.contains(&"get_forecast".to_owned()), "{names:?}");
    assert!(!names.contains(&"echo_args".to_owned()), "{names:?}");
    assert_eq!(plugin_row(&mut s, "weather")["enabled"], false);
    let d = s.ok("plugin.tools.describe", Value::Null);
    assert!(
        !d["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["plugin"] == "weather"),
        "{d}"
    );

    // Disabling a disabled plugin names it.
    let r = s.call("plugin.disable", json!({"name": "weather"}));
    assert_invalid_params_naming(&r, "weather");

    let r = s.ok("plugin.enable", json!({"name": "weather"}));
    assert_eq!(r["plugin"]["enabled"], true, "{r}");
    let tr = invoke(&mut s, "get_forecast", json!({"city": "Oslo"}));
    assert_eq!(tr["success"], true, "{tr}");
    assert!(tool_list_names(&mut s).contains(&"get_forecast".to_owned()));
    assert_eq!(plugin_row(&mut s, "weather")["enabled"], true);

    // Enabling an enabled plugin names it.
    let r = s.call("plugin.enable", json!({"name": "weather"}));
    assert_invalid_params_naming(&r, "weather");
}

#[test]
fn unknown_plugin_is_invalid_params_naming_it() {
    let p = Plugins::new();
    weather(&p);
    let mut s = p.start();
    for method in ["plugin.enable", "plugin.disable", "plugin.reload"] {
        let r = s.call(method, json!({"name": "no_such_plugin"}));
        assert_invalid_params_naming(&r, "no_such_plugin");
    }
    // Missing name.
    let r = s.call("plugin.reload", json!({}));
    assert_eq!(error_of(&r)["code"], -32602, "{r}");
}

#[test]
fn reload_picks_up_a_changed_manifest() {
    let p = Plugins::new();
    let manifest = weather(&p);
    let mut s = p.start();
    assert_eq!(
        tool_row(&mut s, "get_forecast").unwrap()["function"]["description"],
        "Weather forecast for a city"
    );
    assert!(tool_row(&mut s, "get_humidity").is_none());

    p.script(
        "humidity",
        r#"echo '{"ok": true, "result": {"humidity": 0.8}}'"#,
    );
    p.manifest(
        "weather.toml",
        &format!(
            "name = \"weather\"\n\n{}{}{}",
            tool(
                "get_forecast",
                "Five-day forecast for a city",
                "forecast",
                "10s",
                FORECAST_PARAMS
            ),
            tool(
                "echo_args",
                "Echo the arguments back",
                "echo_args",
                "10s",
                "exposure = \"deferred\""
            ),
            tool(
                "get_humidity",
                "Relative humidity for a city",
                "humidity",
                "10s",
                "mode = \"read\"\nexposure = \"deferred\""
            )
        ),
    );
    let r = s.ok("plugin.reload", json!({"name": "weather"}));
    assert_eq!(r["plugin"]["name"], "weather", "{r}");
    assert_eq!(r["plugin"]["enabled"], true, "{r}");
    let tools: BTreeSet<&str> = r["plugin"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        BTreeSet::from(["get_forecast", "echo_args", "get_humidity"]),
        "{r}"
    );
    assert_eq!(
        fs::canonicalize(r["plugin"]["origin"].as_str().unwrap()).unwrap(),
        fs::canonicalize(&manifest).unwrap()
    );

    assert_eq!(
        tool_row(&mut s, "get_forecast").unwrap()["function"]["description"],
        "Five-day forecast for a city"
    );
    let h = tool_row(&mut s, "get_humidity").expect("reloaded tool in tool.list");
    assert_eq!(h["exposure"], "deferred", "{h}");
    let tr = invoke(&mut s, "get_humidity", json!({}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["result"], json!({"humidity": 0.8}), "{tr}");

    // A tool removed from the manifest disappears on reload.
    p.manifest(
        "weather.toml",
        &tool(
            "get_forecast",
            "Forecast only",
            "forecast",
            "10s",
            FORECAST_PARAMS,
        ),
    );
    s.ok("plugin.reload", json!({"name": "weather"}));
    let names = tool_list_names(&mut s);
    assert!(names.contains(&"get_forecast".to_owned()), "{names:?}");
    assert!(!names.contains(&"get_humidity".to_owned()), "{names:?}");
    assert!(!names.contains(&"echo_args".to_owned()), "{names:?}");
    let tr = invoke(&mut s, "get_humidity", json!({}));
    assert_eq!(tr["data"]["unknownTool"], "get_humidity", "{tr}");
}

#[test]
fn reload_with_a_broken_manifest_keeps_the_old_tools() {
    let p = Plugins::new();
    weather(&p);
    let mut s = p.start();
    p.manifest(
        "weather.toml",
        "name = \"weather\"\n[[tools]]\nname = \"get_forecast\"\ndescription = \"x\"\nexec = \"bin/forecast\"\ntimout = \"5s\"\n",
    );
    let r = s.call("plugin.reload", json!({"name": "weather"}));
    assert_invalid_params_naming(&r, "timout");

    let tr = invoke(&mut s, "get_forecast", json!({"city": "Oslo"}));
    assert_eq!(tr["success"], true, "old registration still works: {tr}");
    let tr = invoke(&mut s, "echo_args", json!({"a": 1}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(
        tool_row(&mut s, "get_forecast").unwrap()["function"]["description"],
        "Weather forecast for a city"
    );
    let w = plugin_row(&mut s, "weather");
    assert_eq!(w["enabled"], true, "{w}");
    assert_eq!(w["tools"].as_array().unwrap().len(), 2, "{w}");
}

#[test]
fn reload_that_steals_another_plugins_tool_is_refused() {
    let p = Plugins::new();
    p.script("alpha", r#"echo '{"ok": true, "result": "alpha"}'"#);
    p.script("beta", r#"echo '{"ok": true, "result": "beta"}'"#);
    p.manifest(
        "alpha.toml",
        &tool("alpha_tool", "Alpha", "alpha", "10s", ""),
    );
    p.manifest("beta.toml", &tool("beta_tool", "Beta", "beta", "10s", ""));
    let mut s = p.start();

    p.manifest(
        "beta.toml",
        &(tool("beta_tool", "Beta v2", "beta", "10s", "")
            + &tool("alpha_tool", "Stolen", "beta", "10s", "")),
    );
    let r = s.call("plugin.reload", json!({"name": "beta"}));
    assert_invalid_params_naming(&r, "alpha_tool");

    let tr = invoke(&mut s, "alpha_tool", json!({}));
    assert_eq!(tr["data"]["result"], "alpha", "alpha keeps its tool: {tr}");
    let tr = invoke(&mut s, "beta_tool", json!({}));
    assert_eq!(tr["data"]["result"], "beta", "{tr}");
    assert_eq!(plugin_row(&mut s, "beta")["tools"], json!(["beta_tool"]));
    assert_eq!(
        tool_row(&mut s, "beta_tool").unwrap()["function"]["description"],
        "Beta"
    );
}

#[test]
fn reload_keeps_a_disabled_plugin_disabled() {
    let p = Plugins::new();
    weather(&p);
    let mut s = p.start();
    s.ok("plugin.disable", json!({"name": "weather"}));
    p.script("humidity", r#"echo '{"ok": true, "result": 1}'"#);
    p.manifest(
        "weather.toml",
        &(tool(
            "get_forecast",
            "Forecast v2",
            "forecast",
            "10s",
            FORECAST_PARAMS,
        ) + &tool("get_humidity", "Humidity", "humidity", "10s", "")),
    );
    let r = s.ok("plugin.reload", json!({"name": "weather"}));
    assert_eq!(r["plugin"]["enabled"], false, "{r}");
    let names = tool_list_names(&mut s);
    assert!(!names.contains(&"get_forecast".to_owned()), "{names:?}");
    assert!(!names.contains(&"get_humidity".to_owned()), "{names:?}");

    s.ok("plugin.enable", json!({"name": "weather"}));
    let tr = invoke(&mut s, "get_humidity", json!({}));
    assert_eq!(
        tr["success"], true,
        "enable registers the reloaded tools: {tr}"
    );
    assert_eq!(
        tool_row(&mut s, "get_forecast").unwrap()["function"]["description"],
        "Forecast v2"
    );
}

// ---------------------------------------------------------------------------------------------
// Boot failures
// ---------------------------------------------------------------------------------------------

#[test]
fn conflicting_tool_names_abort_boot() {
    let p = Plugins::new();
    p.script("ok", r#"echo '{"ok": true, "result": null}'"#);
    p.manifest("alpha.toml", &tool("dup_tool", "First", "ok", "10s", ""));
    p.manifest("beta.toml", &tool("dup_tool", "Second", "ok", "10s", ""));
    let err = p.boot_failure();
    assert!(err.contains("dup_tool"), "stderr names the tool: {err}");
    assert!(
        err.contains("alpha") && err.contains("beta"),
        "stderr names both plugins: {err}"
    );
}

#[test]
fn plugin_shadowing_a_builtin_aborts_boot() {
    let p = Plugins::new();
    p.script("ok", r#"echo '{"ok": true, "result": null}'"#);
    p.manifest(
        "shadow.toml",
        &tool("tool_search", "Not the real one", "ok", "10s", ""),
    );
    let err = p.boot_failure();
    assert!(err.contains("tool_search"), "{err}");
}

#[test]
fn broken_manifest_aborts_boot_naming_the_file() {
    let p = Plugins::new();
    weather(&p);
    p.manifest(
        "zz_broken.toml",
        "[[tools]]\nname = \"broken\"\ndescription = \"x\"\nexec = \"bin/forecast\"\ntimeout = \"11m\"\n",
    );
    let err = p.boot_failure();
    assert!(
        err.contains("zz_broken.toml"),
        "stderr names the file: {err}"
    );
    assert!(err.contains("timeout"), "stderr names the field: {err}");
}

#[test]
fn missing_executable_aborts_boot() {
    let p = Plugins::new();
    p.manifest(
        "ghost.toml",
        &tool("ghost", "Executable missing", "does_not_exist", "10s", ""),
    );
    let err = p.boot_failure();
    assert!(err.contains("ghost.toml"), "{err}");
}

#[test]
fn missing_plugin_dir_aborts_boot_naming_it() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("no-such-plugin-dir");
    let err = boot_failure_with(
        home.path(),
        &[("OUTRIGGER_PLUGIN_DIR", &missing.display().to_string())],
    );
    assert!(
        err.contains(&missing.display().to_string()),
        "stderr names the directory: {err}"
    );
}

#[test]
fn enable_that_conflicts_is_refused_and_the_plugin_stays_disabled() {
    let p = Plugins::new();
    p.script("alpha", r#"echo '{"ok": true, "result": "alpha"}'"#);
    p.script("beta", r#"echo '{"ok": true, "result": "beta"}'"#);
    p.manifest(
        "alpha.toml",
        &(tool("alpha_one", "Alpha one", "alpha", "10s", "")
            + &tool("shared_name", "Alpha's", "alpha", "10s", "")),
    );
    p.manifest("beta.toml", &tool("beta_tool", "Beta", "beta", "10s", ""));
    let mut s = p.start();

    s.ok("plugin.disable", json!({"name": "alpha"}));
    // While alpha is disabled, beta takes one of its names.
    p.manifest(
        "beta.toml",
        &(tool("beta_tool", "Beta", "beta", "10s", "")
            + &tool("shared_name", "Beta's now", "beta", "10s", "")),
    );
    s.ok("plugin.reload", json!({"name": "beta"}));
    assert_eq!(
        invoke(&mut s, "shared_name", json!({}))["data"]["result"],
        "beta"
    );

    let r = s.call("plugin.enable", json!({"name": "alpha"}));
    assert_invalid_params_naming(&r, "shared_name");
    let a = plugin_row(&mut s, "alpha");
    assert_eq!(
        a["enabled"], false,
        "a failed enable leaves it disabled: {a}"
    );
    // All or nothing: alpha_one was not left registered.
    let tr = invoke(&mut s, "alpha_one", json!({}));
    assert_eq!(tr["data"]["unknownTool"], "alpha_one", "{tr}");
    assert_eq!(
        invoke(&mut s, "shared_name", json!({}))["data"]["result"],
        "beta"
    );
}

#[test]
fn reload_of_a_deleted_manifest_keeps_the_old_tools() {
    let p = Plugins::new();
    let manifest = weather(&p);
    let mut s = p.start();
    fs::remove_file(&manifest).unwrap();
    let r = s.call("plugin.reload", json!({"name": "weather"}));
    assert_invalid_params_naming(&r, "weather.toml");
    let tr = invoke(&mut s, "get_forecast", json!({"city": "Oslo"}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(plugin_row(&mut s, "weather")["enabled"], true);
}

#[test]
fn plugin_dir_equal_to_home_plugins_loads_once() {
    // A host that points OUTRIGGER_PLUGIN_DIR at $OUTRIGGER_HOME/plugins/ names one directory
    // twice; its manifests are still one set of plugins, not duplicates of themselves.
    let home = tempfile::tempdir().unwrap();
    let pdir = home.path().join("plugins");
    fs::create_dir(&pdir).unwrap();
    atomic_write(
        &pdir.join("t.sh"),
        "#!/bin/sh\necho '{\"ok\": true, \"result\": 1}'\n",
        0o755,
    );
    fs::write(
        pdir.join("same.toml"),
        "[[tools]]\nname = \"same_tool\"\ndescription = \"d\"\nexec = \"t.sh\"\ntimeout = \"5s\"\nmode = \"read\"\n",
    )
    .unwrap();
    let (status, out, err) = common::run_once(
        home.path(),
        &["--quiet-ready"],
        &[("OUTRIGGER_PLUGIN_DIR", &pdir.display().to_string())],
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"plugin.list\"}\n",
    );
    assert_eq!(status.code(), Some(0), "boot fails: {err}");
    let resp: Value = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["id"] == 1)
        .unwrap_or_else(|| panic!("no plugin.list answer: {out}"));
    assert_eq!(
        resp["result"]["plugins"].as_array().unwrap().len(),
        1,
        "{resp}"
    );
}

#[test]
fn stdout_past_the_configured_capture_limit_fails_the_call() {
    let p = Plugins::new();
    p.script(
        "loud",
        r#"printf '{"ok": true, "result": "'; head -c 20000 /dev/zero | tr '\0' a; printf '"}\n'"#,
    );
    p.script(
        "medium",
        r#"printf '{"ok": true, "result": "'; head -c 1500 /dev/zero | tr '\0' b; printf '"}\n'"#,
    );
    p.manifest(
        "loud.toml",
        &(tool("loud", "Too much output", "loud", "10s", "")
            + &tool("medium", "Some output", "medium", "10s", "")),
    );
    let home = tempfile::tempdir().unwrap();
    fs::write(
        home.path().join("config.json"),
        r#"{"plugin_max_output_bytes": 4096}"#,
    )
    .unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: p.env(),
        home: Some(home),
        ..Default::default()
    });
    let tr = invoke(&mut s, "loud", json!({}));
    assert_eq!(tr["success"], false, "{tr}");
    assert_eq!(tr["data"]["kind"], "output_too_large", "{tr}");
    let tr = invoke(&mut s, "medium", json!({}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["result"].as_str().map(str::len), Some(1500));
}

#[test]
fn large_arguments_reach_a_plugin_that_ignores_stdin() {
    let p = Plugins::new();
    p.script("deaf", r#"echo '{"ok": true, "result": "ignored"}'"#);
    p.script(
        "wc",
        r#"n=$(wc -c); printf '{"ok": true, "result": %s}\n' "$n""#,
    );
    p.manifest(
        "big.toml",
        &(tool("deaf", "Ignores stdin", "deaf", "10s", "")
            + &tool("count_bytes", "Counts stdin bytes", "wc", "10s", "")),
    );
    let mut s = p.start();
    let big = "x".repeat(2 * 1024 * 1024);
    let tr = invoke(&mut s, "deaf", json!({"blob": big}));
    assert_eq!(tr["success"], true, "{tr}");
    let tr = invoke(&mut s, "count_bytes", json!({"blob": big}));
    assert_eq!(tr["success"], true, "{tr}");
    let expected = serde_json::to_string(&json!({"blob": big})).unwrap().len() as u64;
    let got = tr["data"]["result"].as_u64().unwrap();
    assert!(
        got == expected || got == expected + 1,
        "the whole argument object arrives on stdin: {got} vs {expected}"
    );
}

#[test]
fn reload_swaps_registrations_without_a_gap() {
    // `plugin.reload` "swaps the registrations": a call racing a reload of an unchanged
    // manifest must find the tool (old or new registration), never "Unknown tool".
    let p = Plugins::new();
    p.script("ok", r#"echo '{"ok": true, "result": "ok"}'"#);
    let mut m = String::from("name = \"many\"\n");
    for i in 1..=200 {
        m += &tool(&format!("many_{i:03}"), "One of many", "ok", "10s", "");
    }
    p.manifest("many.toml", &m);
    let mut s = p.start();
    let mut invokes = vec![];
    for i in 0..300 {
        s.send(
            &json!({"jsonrpc": "2.0", "id": format!("reload-{i}"), "method": "plugin.reload",
            "params": {"name": "many"}}),
        );
        let id = format!("invoke-{i}");
        s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tool.invoke",
            "params": {"name": "many_200", "arguments": {}}}));
        invokes.push(id);
    }
    let mut unknown = vec![];
    for id in &invokes {
        let r = s.response(&json!(id));
        assert!(r.get("error").is_none(), "{r}");
        if r["result"]["success"] != true {
            unknown.push(r["result"].clone());
        }
    }
    for i in 0..300 {
        let r = s.response(&json!(format!("reload-{i}")));
        assert!(r.get("error").is_none(), "{r}");
    }
    assert!(
        unknown.is_empty(),
        "{} of {} calls racing a reload failed; first: {}",
        unknown.len(),
        invokes.len(),
        unknown[0]
    );
}

#[test]
fn shutdown_cancels_a_running_plugin_call_and_answers_it() {
    let p = Plugins::new();
    let c = unique_secs(4);
    p.script("hang", &format!("exec sleep {c}"));
    p.manifest(
        "hang.toml",
        &tool("hang_long", "Hangs for a minute", "hang", "2m", ""),
    );
    let mut s = p.start();
    s.send(
        &json!({"jsonrpc": "2.0", "id": "long", "method": "tool.invoke",
        "params": {"name": "hang_long", "arguments": {}}}),
    );
    let child = running(&c, 1)[0];
    s.send(&json!({"jsonrpc": "2.0", "id": "bye", "method": "system.shutdown"}));
    let r = s.response(&json!("long"));
    // Answered before the process goes: either a cancelled ToolResult or a cancelled error.
    let kind = if r.get("error").is_some() {
        r["error"]["data"]["kind"].clone()
    } else {
        assert_eq!(r["result"]["success"], false, "{r}");
        r["result"]["data"]["kind"].clone()
    };
    assert_eq!(kind, "cancelled", "{r}");
    let n = s.notification("lifecycle.shutdown");
    assert_eq!(n["params"]["reason"], "normal", "{n}");
    assert!(s.wait_exit(WAIT).success());
    assert!(
        wait_gone(child, Duration::from_secs(5)),
        "plugin {child} survived shutdown"
    );
}

#[test]
fn stdin_eof_kills_a_running_plugin() {
    let p = Plugins::new();
    let (c, g) = (unique_secs(5), unique_secs(6));
    p.script("hang", &format!("sleep {g} &\nsleep {c}"));
    p.manifest(
        "hang.toml",
        &tool("hang_long", "Hangs for a minute", "hang", "2m", ""),
    );
    let mut s = p.start();
    s.send(
        &json!({"jsonrpc": "2.0", "id": "long", "method": "tool.invoke",
        "params": {"name": "hang_long", "arguments": {}}}),
    );
    let child = running(&c, 1)[0];
    let grandchild = running(&g, 1)[0];
    s.close_stdin();
    let n = s.notification("lifecycle.shutdown");
    assert_eq!(n["params"]["reason"], "eof", "{n}");
    assert_eq!(s.wait_exit(WAIT).code(), Some(0));
    for pid in [child, grandchild] {
        assert!(
            wait_gone(pid, Duration::from_secs(5)),
            "plugin process {pid} survived stdin EOF"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Checked manifests kept between boots (`<home>/cache/plugins/`)
// ---------------------------------------------------------------------------------------------

/// One boot that answers a `tool.list` and exits: the listed rows, or the stderr of a
/// boot that failed.
fn boot_and_list(home: &Path, p: &Plugins) -> Result<Vec<Value>, String> {
    let dir = p.path().display().to_string();
    let env = [
        ("OUTRIGGER_PLUGIN_DIR", dir.as_str()),
        ("OUTRIGGER_SANDBOX_WRITABLE_ROOTS", dir.as_str()),
    ];
    let req = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tool.list\"}\n";
    let (status, out, err) = common::run_once(home, &[], &env, req);
    if status.code() != Some(0) {
        return Err(err);
    }
    let reply = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["id"] == 1)
        .unwrap_or_else(|| panic!("no tool.list answer: {out}"));
    Ok(reply["result"].as_array().cloned().unwrap_or_default())
}

fn described(rows: &[Value], name: &str) -> Option<String> {
    rows.iter()
        .find(|r| r["function"]["name"] == name)
        .and_then(|r| r["function"]["description"].as_str().map(str::to_owned))
}

/// The cache's entries by file name, with their modification times.
fn cache_entries(home: &Path) -> std::collections::BTreeMap<String, std::time::SystemTime> {
    let root = home.join("cache").join("plugins");
    let mut entries = std::collections::BTreeMap::new();
    for dir in fs::read_dir(&root).into_iter().flatten().flatten() {
        for e in fs::read_dir(dir.path()).into_iter().flatten().flatten() {
            let modified = e.metadata().unwrap().modified().unwrap();
            entries.insert(e.file_name().to_string_lossy().into_owned(), modified);
        }
    }
    entries
}

fn entry_names(home: &Path) -> BTreeSet<String> {
    cache_entries(home).into_keys().collect()
}

#[test]
fn a_cached_manifest_follows_every_edit_and_its_executable() {
    let home = tempfile::tempdir().unwrap();
    let p = Plugins::new();
    p.script("ok", r#"echo '{"ok": true, "result": null}'"#);
    let params =
        "parameters = '''{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}'''";
    p.manifest(
        "weather.toml",
        &tool("forecast", "First words", "ok", "10s", params),
    );
    p.manifest("extra.toml", &tool("extra_tool", "Extra", "ok", "10s", ""));

    let first = boot_and_list(home.path(), &p).unwrap();
    assert_eq!(
        described(&first, "forecast").as_deref(),
        Some("First words")
    );
    assert_eq!(
        entry_names(home.path()),
        BTreeSet::from([
            "extra.toml.json".to_string(),
            "weather.toml.json".to_string()
        ]),
        "each manifest checked once is kept"
    );
    // From the cache: the same rows, and the entries read, not written again.
    let written = cache_entries(home.path());
    let second = boot_and_list(home.path(), &p).unwrap();
    assert_eq!(first, second);
    assert_eq!(
        cache_entries(home.path()),
        written,
        "a hit rewrites nothing"
    );

    // An edit of the same length (so size and maybe mtime agree) is still seen.
    p.manifest(
        "weather.toml",
        &tool("forecast", "Other words", "ok", "10s", params),
    );
    let edited = boot_and_list(home.path(), &p).unwrap();
    assert_eq!(
        described(&edited, "forecast").as_deref(),
        Some("Other words")
    );

    // A removed manifest's tools go, and so does its entry.
    fs::remove_file(p.path().join("extra.toml")).unwrap();
    let fewer = boot_and_list(home.path(), &p).unwrap();
    assert!(described(&fewer, "extra_tool").is_none());
    assert_eq!(
        entry_names(home.path()),
        BTreeSet::from(["weather.toml.json".to_string()])
    );

    // The executable is checked on every boot: gone, the boot fails as it would uncached.
    fs::remove_file(p.path().join("bin/ok")).unwrap();
    let err = boot_and_list(home.path(), &p).unwrap_err();
    assert!(
        err.contains("weather.toml") && err.contains("exec") && err.contains("does not exist"),
        "{err}"
    );
}

#[test]
fn a_damaged_cache_entry_is_parsed_again_and_rewritten() {
    let home = tempfile::tempdir().unwrap();
    let p = Plugins::new();
    p.script("ok", r#"echo '{"ok": true, "result": null}'"#);
    p.manifest(
        "weather.toml",
        &tool("forecast", "Forecast", "ok", "10s", ""),
    );
    let first = boot_and_list(home.path(), &p).unwrap();
    let root = home.path().join("cache").join("plugins");
    let entry = fs::read_dir(&root)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path()
        .join("weather.toml.json");
    let good = fs::read_to_string(&entry).unwrap();
    // A tool the manifest does not declare, written into the entry by hand, never loads.
    fs::write(&entry, good.replace("\"forecast\"", "\"not a name!\"")).unwrap();
    assert_eq!(boot_and_list(home.path(), &p).unwrap(), first);
    assert_eq!(fs::read_to_string(&entry).unwrap(), good, "rewritten whole");
    fs::write(&entry, &good[..good.len() / 3]).unwrap();
    assert_eq!(boot_and_list(home.path(), &p).unwrap(), first);
    assert_eq!(fs::read_to_string(&entry).unwrap(), good);
}
