//! `skills.list` over the pipes, against skill roots written into temporary directories.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::Sidecar;
use serde_json::{Value, json};

/// Writes `<root>/<dir>/SKILL.md` with the given text.
fn skill(root: &Path, dir: &str, text: &str) -> PathBuf {
    let d = root.join(dir);
    fs::create_dir_all(&d).unwrap();
    let f = d.join("SKILL.md");
    fs::write(&f, text).unwrap();
    f
}

/// A SKILL.md made of front-matter lines and a body.
fn md(front: &str, body: &str) -> String {
    format!("---\n{front}\n---\n\n{body}")
}

fn list(s: &mut Sidecar, params: Value) -> Value {
    s.ok("skills.list", params)
}

fn names(r: &Value) -> Vec<String> {
    r["skills"]
        .as_array()
        .unwrap_or_else(|| panic!("skills is an array: {r}"))
        .iter()
        .map(|row| row["name"].as_str().unwrap().to_owned())
        .collect()
}

fn row<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed: {r}"))
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

fn assert_invalid_params_naming(r: &Value, needle: &str) {
    assert!(r.get("result").is_none(), "expected an error: {r}");
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains(needle), "error names {needle:?}: {r}");
}

#[test]
fn rows_carry_every_field() {
    let root = tempfile::tempdir().unwrap();
    let r0 = root.path();
    skill(
        r0,
        "pdf-dir",
        &md(
            "name: pdf-tools\ndisplayName: PDF Tools\ndescription: Work with PDF files\npriority: 900\ntags: [pdf, documents]\nlicense: MIT",
            "Run {scripts}/extract.sh on the file.\nThen {scripts}/ocr.sh.\n",
        ),
    );
    skill(r0, "plain", &md("name: plain", "Plain body\n"));
    let mut s = Sidecar::start();
    let r = list(&mut s, json!({"roots": [p(r0)]}));
    assert_eq!(r["warnings"], json!([]), "{r}");
    assert_eq!(names(&r), ["pdf-tools", "plain"], "{r}");

    let scripts = r0.join("pdf-dir").join("scripts");
    let expected = json!({
        "name": "pdf-tools",
        "displayName": "PDF Tools",
        "description": "Work with PDF files",
        "priority": 900,
        "tags": ["pdf", "documents"],
        "conditions": [],
        "match": "any",
        "layer": "eager",
        "modelInvocable": true,
        "content": format!(
            "Run {}/extract.sh on the file.\nThen {}/ocr.sh.\n",
            p(&scripts),
            p(&scripts)
        ),
        "dirName": "pdf-dir",
        "skillsDir": p(r0),
    });
    assert_eq!(row(&r, "pdf-tools"), &expected, "{r}");

    // Defaults.
    let expected = json!({
        "name": "plain",
        "displayName": "plain",
        "description": "",
        "priority": 500,
        "tags": [],
        "conditions": [],
        "match": "any",
        "layer": "catalog",
        "modelInvocable": true,
        "content": "Plain body\n",
        "dirName": "plain",
        "skillsDir": p(r0),
    });
    assert_eq!(row(&r, "plain"), &expected, "{r}");
}

#[test]
fn model_invocation_can_be_disabled() {
    let root = tempfile::tempdir().unwrap();
    skill(
        root.path(),
        "manual",
        &md("name: manual\ndisable-model-invocation: true", "x"),
    );
    let mut s = Sidecar::start();
    let r = list(&mut s, json!({"roots": [p(root.path())]}));
    assert_eq!(row(&r, "manual")["modelInvocable"], false, "{r}");
}

#[test]
fn priority_decides_layer_unless_declared_and_orders_rows() {
    let root = tempfile::tempdir().unwrap();
    let r0 = root.path();
    skill(r0, "a", &md("name: at-threshold\npriority: 850", "x"));
    skill(r0, "b", &md("name: below-threshold\npriority: 849", "x"));
    skill(
        r0,
        "c",
        &md("name: declared-eager\npriority: 10\nlayer: eager", "x"),
    );
    skill(
        r0,
        "d",
        &md("name: declared-catalog\npriority: 999\nlayer: catalog", "x"),
    );
    skill(r0, "e", &md("name: tie-b\npriority: 849", "x"));
    skill(r0, "f", &md("name: default-priority", "x"));
    let mut s = Sidecar::start();
    let r = list(&mut s, json!({"roots": [p(r0)]}));
    assert_eq!(row(&r, "at-threshold")["layer"], "eager", "{r}");
    assert_eq!(row(&r, "below-threshold")["layer"], "catalog", "{r}");
    assert_eq!(row(&r, "declared-eager")["layer"], "eager", "{r}");
    assert_eq!(row(&r, "declared-catalog")["layer"], "catalog", "{r}");
    assert_eq!(row(&r, "default-priority")["layer"], "catalog", "{r}");
    // Priority descending, then name.
    assert_eq!(
        names(&r),
        [
            "declared-catalog",
            "at-threshold",
            "below-threshold",
            "tie-b",
            "default-priority",
            "declared-eager"
        ],
        "{r}"
    );
}

#[test]
fn later_root_overrides_earlier_by_name() {
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    skill(
        one.path(),
        "shared",
        &md("name: shared\ndescription: from one", "one"),
    );
    skill(one.path(), "only-one", &md("name: only-one", "x"));
    // A different directory name, same skill name: the override is by name.
    skill(
        two.path(),
        "shared-v2",
        &md("name: shared\ndescription: from two", "two"),
    );
    skill(two.path(), "only-two", &md("name: only-two", "x"));
    let mut s = Sidecar::start();

    let r = list(&mut s, json!({"roots": [p(one.path()), p(two.path())]}));
    assert_eq!(r["warnings"], json!([]), "silent override: {r}");
    assert_eq!(names(&r), ["only-one", "only-two", "shared"], "{r}");
    let shared = row(&r, "shared");
    assert_eq!(shared["description"], "from two", "{r}");
    assert_eq!(shared["content"], "two", "{r}");
    assert_eq!(shared["dirName"], "shared-v2", "{r}");
    assert_eq!(shared["skillsDir"], p(two.path()), "{r}");

    let r = list(&mut s, json!({"roots": [p(two.path()), p(one.path())]}));
    let shared = row(&r, "shared");
    assert_eq!(shared["description"], "from one", "{r}");
    assert_eq!(shared["skillsDir"], p(one.path()), "{r}");
}

#[test]
fn conditions_select_skills() {
    let root = tempfile::tempdir().unwrap();
    let r0 = root.path();
    skill(r0, "py-any", &md("name: py-any\nconditions: [python]", "x"));
    skill(
        r0,
        "py-docker-all",
        &md(
            "name: py-docker-all\nconditions: [python, docker]\nmatch: all",
            "x",
        ),
    );
    skill(
        r0,
        "py-docker-any",
        &md(
            "name: py-docker-any\nconditions: [python, docker]\nmatch: any",
            "x",
        ),
    );
    skill(r0, "always", &md("name: always", "x"));
    let mut s = Sidecar::start();
    let root_s = p(r0);
    let mut sel = |extra: Value| {
        let mut params = json!({"roots": [root_s]});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        let r = list(&mut s, params);
        let mut n = names(&r);
        n.sort();
        (n, r)
    };

    assert_eq!(sel(json!({})).0, ["always"]);
    assert_eq!(sel(json!({"conditions": []})).0, ["always"]);
    assert_eq!(
        sel(json!({"conditions": ["python"]})).0,
        ["always", "py-any", "py-docker-any"]
    );
    assert_eq!(
        sel(json!({"conditions": ["docker"]})).0,
        ["always", "py-docker-any"]
    );
    assert_eq!(
        sel(json!({"conditions": ["python", "docker"]})).0,
        ["always", "py-any", "py-docker-all", "py-docker-any"]
    );
    assert_eq!(sel(json!({"conditions": ["rust"]})).0, ["always"]);

    let (n, r) = sel(json!({"ignoreConditions": true}));
    assert_eq!(n, ["always", "py-any", "py-docker-all", "py-docker-any"]);
    let all = row(&r, "py-docker-all");
    assert_eq!(all["conditions"], json!(["python", "docker"]), "{r}");
    assert_eq!(all["match"], "all", "{r}");

    assert_eq!(
        sel(json!({"ignoreConditions": true, "exclude": ["always", "py-any"]})).0,
        ["py-docker-all", "py-docker-any"]
    );
    assert_eq!(
        sel(json!({"conditions": ["python"], "exclude": ["py-any", "not-a-skill"]})).0,
        ["always", "py-docker-any"]
    );
}

#[test]
fn overriding_conditional_skill_hides_the_earlier_one() {
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    skill(one.path(), "s", &md("name: shared", "one"));
    skill(
        two.path(),
        "s",
        &md("name: shared\nconditions: [gpu]", "two"),
    );
    let mut s = Sidecar::start();
    let roots = json!([p(one.path()), p(two.path())]);
    let r = list(&mut s, json!({"roots": roots}));
    assert!(names(&r).is_empty(), "{r}");
    let r = list(&mut s, json!({"roots": roots, "conditions": ["gpu"]}));
    assert_eq!(row(&r, "shared")["content"], "two", "{r}");
}

#[test]
fn bad_skills_become_warnings() {
    let root = tempfile::tempdir().unwrap();
    let r0 = root.path();
    skill(r0, "good", &md("name: good", "fine"));
    let no_fm = skill(r0, "no-front-matter", "Just a body, no front-matter\n");
    let bad_name = skill(r0, "bad-name", &md("name: Bad_Name", "x"));
    let bad_yaml = skill(r0, "bad-yaml", &md("name: [unclosed", "x"));
    let bad_match = skill(r0, "bad-match", &md("name: bad-match\nmatch: some", "x"));
    // Not skills: a plain file and a directory without SKILL.md are ignored silently.
    fs::write(r0.join("README.md"), "not a skill").unwrap();
    fs::create_dir(r0.join("scratch")).unwrap();
    let mut s = Sidecar::start();
    let r = list(&mut s, json!({"roots": [p(r0)]}));
    assert_eq!(names(&r), ["good"], "{r}");
    let warnings: Vec<&str> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings.len(), 4, "one warning per bad skill: {r}");
    for f in [&no_fm, &bad_name, &bad_yaml, &bad_match] {
        assert!(
            warnings.iter().any(|w| w.contains(&p(f))),
            "a warning names {}: {r}",
            f.display()
        );
    }
    assert!(
        warnings.iter().any(|w| w.contains("Bad_Name")),
        "the warning says what is wrong: {r}"
    );
}

#[test]
fn request_errors_are_invalid_params() {
    let root = tempfile::tempdir().unwrap();
    skill(root.path(), "good", &md("name: good", "fine"));
    let mut s = Sidecar::start();

    let r = s.call("skills.list", json!({}));
    assert_invalid_params_naming(&r, "roots");
    let r = s.call("skills.list", Value::Null);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = s.call("skills.list", json!({"roots": []}));
    assert_invalid_params_naming(&r, "roots");

    let missing = root.path().join("no-such-root");
    let r = s.call(
        "skills.list",
        json!({"roots": [p(root.path()), p(&missing)]}),
    );
    assert_invalid_params_naming(&r, &p(&missing));

    let file = root.path().join("good").join("SKILL.md");
    let r = s.call("skills.list", json!({"roots": [p(&file)]}));
    assert_invalid_params_naming(&r, &p(&file));

    let r = s.call("skills.list", json!({"roots": "not-a-list"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}
