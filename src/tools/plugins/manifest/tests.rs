//! Unit tests of `manifest`.

use super::*;
use std::fs;

fn exe(dir: &Path, rel: &str) -> PathBuf {
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(&p, "#!/bin/sh\necho '{\"ok\":true,\"result\":null}'\n").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn write(dir: &Path, file: &str, body: &str) -> PathBuf {
    let p = dir.join(file);
    fs::write(&p, body).unwrap();
    p
}

const TOOL: &str =
    "[[tools]]\nname = \"t\"\ndescription = \"d\"\nexec = \"bin/t\"\ntimeout = \"10s\"\n";

/// Loads `body` (written as `plugin.toml` next to an executable `bin/t`) and returns the
/// error text, asserting it names the file and `field`.
fn err_for(body: &str, field: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    exe(dir.path(), "bin/t");
    let path = write(dir.path(), "plugin.toml", body);
    let err = load_file(&path).unwrap_err().to_string();
    assert!(
        err.contains(&path.display().to_string()),
        "error does not name the file: {err}"
    );
    assert!(err.contains(field), "error does not name `{field}`: {err}");
    err
}

#[test]
fn loads_a_full_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let forecast = exe(dir.path(), "bin/forecast");
    let path = write(
        dir.path(),
        "weather.toml",
        r#"
description = "Weather lookups"

[[tools]]
name = "get_forecast"
description = "Forecast for a city"
exec = "bin/forecast"
args = ["--json"]
timeout = "10s"
mode = "read"
exposure = "deferred"
env = { FOO = "bar" }
parameters = '''{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}'''

[[tools]]
name = "alerts_v2-x"
description = "Alerts"
exec = "bin/forecast"
timeout = 1500
"#,
    );
    let m = load_file(&path).unwrap();
    assert_eq!(m.name, "weather");
    assert_eq!(m.description.as_deref(), Some("Weather lookups"));
    assert_eq!(m.path, path);
    assert_eq!(m.tools.len(), 2);
    let t = &m.tools[0];
    assert_eq!(t.name, "get_forecast");
    assert_eq!(t.exec, forecast);
    assert!(t.exec.is_absolute());
    assert_eq!(t.args, vec!["--json".to_string()]);
    assert_eq!(t.timeout, Duration::from_secs(10));
    assert_eq!(t.mode.as_deref(), Some("read"));
    assert_eq!(t.exposure.as_deref(), Some("deferred"));
    assert_eq!(t.env.get("FOO").map(String::as_str), Some("bar"));
    assert_eq!(t.parameters.value()["required"], json!(["city"]));
    let u = &m.tools[1];
    assert_eq!(u.timeout, Duration::from_millis(1500));
    assert_eq!(u.parameters.value(), json!({"type": "object"}));
    assert_eq!(u.mode, None);
    assert_eq!(u.exposure, None);
    assert!(u.args.is_empty() && u.env.is_empty());
}

#[test]
fn explicit_name_and_absolute_exec() {
    let dir = tempfile::tempdir().unwrap();
    let abs = exe(dir.path(), "elsewhere/run");
    let sub = dir.path().join("manifests");
    fs::create_dir(&sub).unwrap();
    let path = write(
        &sub,
        "x.toml",
        &format!(
            "name = \"renamed\"\n[[tools]]\nname = \"t\"\ndescription = \"d\"\nexec = \"{}\"\ntimeout = \"2m\"\n",
            abs.display()
        ),
    );
    let m = load_file(&path).unwrap();
    assert_eq!(m.name, "renamed");
    assert_eq!(m.tools[0].exec, abs);
    assert_eq!(m.tools[0].timeout, Duration::from_secs(120));
}

#[test]
fn relative_exec_resolves_against_the_manifest_dir_not_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("plugins");
    let target = exe(&sub, "tools/run.sh");
    write(
        &sub,
        "p.toml",
        "[[tools]]\nname = \"t\"\ndescription = \"d\"\nexec = \"tools/run.sh\"\ntimeout = \"500ms\"\n",
    );
    let m = load_dir(&sub).unwrap();
    assert_eq!(m[0].tools[0].exec, target);
    // A bare name is a file next to the manifest, not a $PATH lookup.
    write(
        &sub,
        "q.toml",
        "[[tools]]\nname = \"t\"\ndescription = \"d\"\nexec = \"sh\"\ntimeout = \"1s\"\n",
    );
    let err = load_dir(&sub).unwrap_err().to_string();
    assert!(
        err.contains("q.toml") && err.contains("tools[0].exec"),
        "{err}"
    );
    assert!(err.contains(&sub.join("sh").display().to_string()), "{err}");
}

#[test]
fn parameters_as_a_toml_table() {
    let dir = tempfile::tempdir().unwrap();
    exe(dir.path(), "bin/t");
    let path = write(
        dir.path(),
        "p.toml",
        &format!(
            "{TOOL}parameters = {{ type = \"object\", properties = {{ city = {{ type = \"string\" }}, days = {{ type = \"integer\", maximum = 14 }} }}, required = [\"city\"] }}\n"
        ),
    );
    let m = load_file(&path).unwrap();
    assert_eq!(
        m.tools[0].parameters.value(),
        json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "maximum": 14}},
            "required": ["city"]
        })
    );
    // The sub-table form works too, and a missing top-level type is filled in.
    let path = write(
        dir.path(),
        "q.toml",
        &format!("{TOOL}[tools.parameters.properties.city]\ntype = \"string\"\n"),
    );
    let m = load_file(&path).unwrap();
    assert_eq!(
        m.tools[0].parameters.value(),
        json!({"type": "object", "properties": {"city": {"type": "string"}}})
    );
}

#[test]
fn unknown_keys_are_rejected() {
    let err = err_for(&format!("colour = \"red\"\n{TOOL}"), "colour");
    assert!(err.contains("line 1"), "{err}");
    let err = err_for(&format!("{TOOL}timout = \"5s\"\n"), "timout");
    assert!(err.contains("line 6"), "{err}");
}

#[test]
fn tool_list_errors() {
    let err = err_for("name = \"p\"\n", "tools");
    assert!(err.contains("[[tools]]"), "{err}");
    let many: String = (0..=MAX_TOOLS_PER_MANIFEST)
        .map(|i| TOOL.replace("\"t\"", &format!("\"t{i}\"")))
        .collect();
    let err = err_for(&many, "tools");
    assert!(err.contains("257") && err.contains("256"), "{err}");
    let err = err_for(&format!("{TOOL}{TOOL}"), "tools[1].name");
    assert!(err.contains("declared twice"), "{err}");
}

#[test]
fn name_errors() {
    for bad in ["", "has space", "dotted.name", "ünï", &"x".repeat(65)] {
        let body = TOOL.replace("name = \"t\"", &format!("name = \"{bad}\""));
        err_for(&body, "tools[0].name");
    }
    let ok = TOOL.replace("name = \"t\"", &format!("name = \"{}\"", "x".repeat(64)));
    let dir = tempfile::tempdir().unwrap();
    exe(dir.path(), "bin/t");
    load_file(&write(dir.path(), "p.toml", &ok)).unwrap();
    err_for(&TOOL.replace("name = \"t\"\n", ""), "tools[0].name");
    err_for(&format!("name = \"a b\"\n{TOOL}"), "name");
    // A file stem that is not a valid name needs an explicit `name`.
    let dir = tempfile::tempdir().unwrap();
    exe(dir.path(), "bin/t");
    let path = write(dir.path(), "my plugin.toml", TOOL);
    let err = load_file(&path).unwrap_err().to_string();
    assert!(
        err.contains("name:") && err.contains("rename the file"),
        "{err}"
    );
}

#[test]
fn description_is_required() {
    err_for(
        &TOOL.replace("description = \"d\"\n", ""),
        "tools[0].description",
    );
    err_for(
        &TOOL.replace("description = \"d\"", "description = \"  \""),
        "tools[0].description",
    );
}

#[test]
fn timeout_errors() {
    for bad in [
        "\"0s\"", "0", "-5", "\"10\"", "\"10h\"", "\"1.5s\"", "\"s\"", "1.5", "\"601s\"",
        "\"11m\"", "600001",
    ] {
        let body = TOOL.replace("timeout = \"10s\"", &format!("timeout = {bad}"));
        let err = err_for(&body, "tools[0].timeout");
        assert!(err.contains("10s") || err.contains("10m"), "{bad}: {err}");
    }
    err_for(&TOOL.replace("timeout = \"10s\"\n", ""), "tools[0].timeout");
    // The ceiling itself is allowed.
    let dir = tempfile::tempdir().unwrap();
    exe(dir.path(), "bin/t");
    let body = TOOL.replace("\"10s\"", "\"10m\"");
    let m = load_file(&write(dir.path(), "p.toml", &body)).unwrap();
    assert_eq!(m.tools[0].timeout, MAX_TIMEOUT);
}

#[test]
fn parameters_errors() {
    for bad in [
        "'''[1,2]'''",
        "'''{not json'''",
        "'''{\"type\":\"array\"}'''",
        "'''{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"strang\"}}}'''",
        "[1, 2]",
        "42",
        "{ when = 2024-01-01 }",
    ] {
        err_for(
            &format!("{TOOL}parameters = {bad}\n"),
            "tools[0].parameters",
        );
    }
}

#[test]
fn unresolvable_schemas_are_rejected_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    exe(dir.path(), "bin/t");
    for schema in [
        r#"{"$schema":"http://example.com/custom-meta","type":"object"}"#,
        r#"{"type":"object","properties":{"a":{"$ref":"http://example.com/a.json"}}}"#,
        r##"{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}"##,
    ] {
        let path = write(
            dir.path(),
            "p.toml",
            &format!("{TOOL}parameters = '''{schema}'''\n"),
        );
        // Unresolvable references fail at load, not on the first call.
        let err = load_file(&path).unwrap_err().to_string();
        assert!(err.contains("tools[0].parameters"), "{err}");
    }
}

#[test]
fn mode_and_exposure_vocabularies() {
    let err = err_for(&format!("{TOOL}mode = \"writey\"\n"), "tools[0].mode");
    assert!(err.contains("safe_write"), "{err}");
    let err = err_for(
        &format!("{TOOL}exposure = \"secret\"\n"),
        "tools[0].exposure",
    );
    assert!(err.contains("deferred"), "{err}");
}

#[test]
fn exec_errors() {
    err_for(&TOOL.replace("exec = \"bin/t\"\n", ""), "tools[0].exec");
    let err = err_for(&TOOL.replace("bin/t", "bin/missing"), "tools[0].exec");
    assert!(
        err.contains("does not exist") && err.contains("manifest's directory"),
        "{err}"
    );
    let err = err_for(&TOOL.replace("bin/t", "bin"), "tools[0].exec");
    assert!(err.contains("not a file"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let p = exe(dir.path(), "bin/t");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    let path = write(dir.path(), "p.toml", TOOL);
    let err = load_file(&path).unwrap_err().to_string();
    assert!(
        err.contains("tools[0].exec") && err.contains("chmod +x"),
        "{err}"
    );
}

#[test]
fn env_and_args_errors() {
    err_for(
        &format!("{TOOL}env = {{ \"A=B\" = \"x\" }}\n"),
        "tools[0].env",
    );
    err_for(
        &format!("{TOOL}env = {{ A = \"x\\u0000\" }}\n"),
        "tools[0].env",
    );
    err_for(&format!("{TOOL}args = [\"a\\u0000\"]\n"), "tools[0].args");
    err_for(
        &format!("{TOOL}env = {{ A = 1 }}\n"),
        "line 6 (`env = { A = 1 }`)",
    );
}

#[test]
fn file_level_errors() {
    let dir = tempfile::tempdir().unwrap();
    let big = write(
        dir.path(),
        "big.toml",
        &format!("{TOOL}# {}\n", "x".repeat(MAX_MANIFEST_BYTES as usize)),
    );
    let err = load_file(&big).unwrap_err().to_string();
    assert!(
        err.contains("big.toml") && err.contains("larger than"),
        "{err}"
    );
    let bad = write(dir.path(), "syntax.toml", "[[tools]\n");
    let err = load_file(&bad).unwrap_err().to_string();
    assert!(
        err.contains("syntax.toml") && err.contains("line 1"),
        "{err}"
    );
    let missing = dir.path().join("nope.toml");
    let err = load_file(&missing).unwrap_err().to_string();
    assert!(err.contains("nope.toml"), "{err}");
}

#[test]
fn load_dir_order_filters_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    exe(dir.path(), "bin/t");
    write(dir.path(), "b.toml", TOOL);
    write(dir.path(), "a.toml", TOOL);
    write(dir.path(), "_disabled.toml", "garbage");
    write(dir.path(), ".swap.toml", "garbage");
    write(dir.path(), "notes.txt", "garbage");
    fs::create_dir(dir.path().join("sub.toml")).unwrap();
    let names: Vec<_> = load_dir(dir.path())
        .unwrap()
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(names, ["a", "b"]);

    write(dir.path(), "c.toml", &format!("name = \"a\"\n{TOOL}"));
    let err = load_dir(dir.path()).unwrap_err().to_string();
    assert!(err.contains("c.toml") && err.contains("a.toml"), "{err}");

    let missing = dir.path().join("absent");
    let err = load_dir(&missing).unwrap_err().to_string();
    assert!(
        err.contains(&missing.display().to_string()) && err.contains("does not exist"),
        "{err}"
    );
    let err = load_dir(&dir.path().join("notes.txt"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a directory"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    assert!(load_dir(empty.path()).unwrap().is_empty());
}

#[test]
fn durations_round_trip() {
    assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
    assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
    assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
    assert_eq!(parse_duration("10"), None);
    assert_eq!(parse_duration("ms"), None);
    assert_eq!(parse_duration(" 1s"), None);
    assert_eq!(parse_duration("99999999999999999999m"), None);
    assert_eq!(format_duration(Duration::from_secs(120)), "2m");
    assert_eq!(format_duration(Duration::from_secs(10)), "10s");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
}

#[test]
fn parameters_json_cannot_hold_are_refused_naming_them() {
    let err = err_for(
        &format!("{TOOL}parameters = {{ type = \"object\", default = 1979-05-27 }}\n"),
        "tools[0].parameters",
    );
    assert!(
        err.contains("datetime") && err.contains("quote it"),
        "{err}"
    );
    let err = err_for(
        &format!("{TOOL}parameters = {{ type = \"object\", maximum = nan }}\n"),
        "tools[0].parameters",
    );
    assert!(err.contains("JSON cannot represent"), "{err}");
    let err = err_for(
        &format!("{TOOL}parameters = {{ type = \"object\", minimum = -inf }}\n"),
        "tools[0].parameters",
    );
    assert!(err.contains("JSON cannot represent"), "{err}");
}

#[test]
fn schemas_checked_at_load_without_a_compile_still_fail_boot() {
    // Structural mistakes are caught by meta-validation...
    let err = err_for(
        &format!(
            "{TOOL}parameters = '''{{\"type\":\"object\",\"properties\":{{\"a\":{{\"type\":\"strnig\"}}}}}}'''\n"
        ),
        "tools[0].parameters",
    );
    assert!(err.contains("not a valid JSON Schema"), "{err}");
    // ...and a bad regex (only a compile finds it) still fails at load, not on the first call.
    let err = err_for(
        &format!(
            "{TOOL}parameters = '''{{\"type\":\"object\",\"properties\":{{\"a\":{{\"type\":\"string\",\"pattern\":\"(unclosed\"}}}}}}'''\n"
        ),
        "tools[0].parameters",
    );
    assert!(err.contains("not a valid JSON Schema"), "{err}");
}
