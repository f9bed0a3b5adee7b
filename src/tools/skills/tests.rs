//! Unit tests of `skills`.

use super::*;
use std::path::Path;
use tempfile::TempDir;

fn write_skill(root: &Path, dir: &str, text: &str) {
    let d = root.join(dir);
    fs::create_dir_all(&d).unwrap();
    fs::write(d.join(SKILL_FILE), text).unwrap();
}

fn simple(root: &Path, dir: &str, name: &str, extra: &str) {
    write_skill(
        root,
        dir,
        &format!("---\nname: {name}\n{extra}---\nBody of {name}.\n"),
    );
}

fn query(roots: &[&Path]) -> SkillsQuery {
    SkillsQuery {
        roots: roots.iter().map(|r| r.to_path_buf()).collect(),
        ..SkillsQuery::default()
    }
}

fn names(listing: &SkillsListing) -> Vec<&str> {
    listing.skills.iter().map(|s| s.name.as_str()).collect()
}

fn warning_about(listing: &SkillsListing, dir: &str) -> String {
    let needle = format!("{dir}/{SKILL_FILE}");
    let hits: Vec<&String> = listing
        .warnings
        .iter()
        .filter(|w| w.contains(&needle))
        .collect();
    assert_eq!(hits.len(), 1, "warnings: {:?}", listing.warnings);
    hits[0].clone()
}

#[test]
fn row_with_every_field() {
    let root = TempDir::new().unwrap();
    write_skill(
        root.path(),
        "deploy",
        "---\nname: deploy-app\ndisplayName: Deploy App\ndescription: Ships the app.\n\
         priority: 700\nlayer: eager\nconditions:\n  - tool:local_exec_shell\n  - os:linux\n\
         match: all\ndisable-model-invocation: true\ntags: [ops, release]\n\
         license: MIT\n---\n\n# Deploy\nRun it.\n",
    );
    let q = SkillsQuery {
        conditions: vec!["tool:local_exec_shell".into(), "os:linux".into()],
        ..query(&[root.path()])
    };
    let out = list_skills(&q).unwrap();
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let abs = std::path::absolute(root.path()).unwrap();
    assert_eq!(
        out.skills,
        vec![SkillRow {
            name: "deploy-app".into(),
            display_name: "Deploy App".into(),
            description: "Ships the app.".into(),
            priority: 700,
            tags: vec!["ops".into(), "release".into()],
            conditions: vec!["tool:local_exec_shell".into(), "os:linux".into()],
            match_mode: MatchMode::All,
            layer: Layer::Eager,
            model_invocable: false,
            content: "# Deploy\nRun it.\n".into(),
            dir_name: "deploy".into(),
            skills_dir: abs.to_string_lossy().into_owned(),
        }]
    );
}

#[test]
fn row_serialises_camel_case_with_match_key() {
    let root = TempDir::new().unwrap();
    simple(root.path(), "a", "a", "");
    let out = list_skills(&query(&[root.path()])).unwrap();
    let json = serde_json::to_value(&out).unwrap();
    let row = &json["skills"][0];
    let mut keys: Vec<&str> = row
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "conditions",
            "content",
            "description",
            "dirName",
            "displayName",
            "layer",
            "match",
            "modelInvocable",
            "name",
            "priority",
            "skillsDir",
            "tags"
        ]
    );
    assert_eq!(row["match"], "any");
    assert_eq!(row["layer"], "catalog");
    assert_eq!(json["warnings"], serde_json::json!([]));
}

#[test]
fn defaults_apply_when_fields_absent_or_null() {
    let root = TempDir::new().unwrap();
    simple(root.path(), "plain", "plain", "tags:\ndisplayName: ''\n");
    let out = list_skills(&query(&[root.path()])).unwrap();
    let row = &out.skills[0];
    assert_eq!(row.display_name, "plain");
    assert_eq!(row.description, "");
    assert_eq!(row.priority, DEFAULT_PRIORITY);
    assert_eq!(row.layer, Layer::Catalog);
    assert_eq!(row.match_mode, MatchMode::Any);
    assert!(row.tags.is_empty() && row.conditions.is_empty());
    assert!(row.model_invocable);
    assert_eq!(row.content, "Body of plain.\n");
    assert!(out.warnings.is_empty());
}

#[test]
fn priority_decides_layer_without_explicit_layer() {
    let root = TempDir::new().unwrap();
    simple(root.path(), "a", "low", "priority: 849\n");
    simple(root.path(), "b", "edge", "priority: 850\n");
    simple(root.path(), "c", "high", "priority: 1000\n");
    simple(root.path(), "d", "negative", "priority: -5\n");
    let out = list_skills(&query(&[root.path()])).unwrap();
    let layer = |n: &str| out.skills.iter().find(|s| s.name == n).unwrap().layer;
    assert_eq!(layer("low"), Layer::Catalog);
    assert_eq!(layer("edge"), Layer::Eager);
    assert_eq!(layer("high"), Layer::Eager);
    assert_eq!(layer("negative"), Layer::Catalog);
}

#[test]
fn explicit_layer_wins_over_priority() {
    let root = TempDir::new().unwrap();
    simple(
        root.path(),
        "a",
        "demoted",
        "priority: 900\nlayer: catalog\n",
    );
    simple(root.path(), "b", "promoted", "priority: 10\nlayer: eager\n");
    let out = list_skills(&query(&[root.path()])).unwrap();
    let layer = |n: &str| out.skills.iter().find(|s| s.name == n).unwrap().layer;
    assert_eq!(layer("demoted"), Layer::Catalog);
    assert_eq!(layer("promoted"), Layer::Eager);
}

#[test]
fn later_root_overrides_by_name() {
    let base = TempDir::new().unwrap();
    let user = TempDir::new().unwrap();
    simple(base.path(), "review", "review", "description: base\n");
    simple(base.path(), "only-base", "only-base", "");
    // Different dir name, same skill name: override is by name, not by dir.
    simple(user.path(), "my-review", "review", "description: user\n");
    let out = list_skills(&query(&[base.path(), user.path()])).unwrap();
    assert_eq!(names(&out), ["only-base", "review"]);
    let review = out.skills.iter().find(|s| s.name == "review").unwrap();
    assert_eq!(review.description, "user");
    assert_eq!(review.dir_name, "my-review");
    assert_eq!(
        review.skills_dir,
        std::path::absolute(user.path()).unwrap().to_string_lossy()
    );
    assert!(out.warnings.is_empty());
}

#[test]
fn override_applies_before_selection() {
    let base = TempDir::new().unwrap();
    let user = TempDir::new().unwrap();
    simple(base.path(), "s", "s", "");
    simple(user.path(), "s", "s", "conditions: [tool:x]\n");
    let out = list_skills(&query(&[base.path(), user.path()])).unwrap();
    assert!(out.skills.is_empty());
}

#[test]
fn duplicate_name_in_one_root_keeps_first_and_warns() {
    let root = TempDir::new().unwrap();
    simple(root.path(), "a-dir", "same", "description: first\n");
    simple(root.path(), "b-dir", "same", "description: second\n");
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert_eq!(out.skills.len(), 1);
    assert_eq!(out.skills[0].description, "first");
    let w = warning_about(&out, "b-dir");
    assert!(w.contains("already used by a-dir"), "{w}");
}

#[test]
fn conditions_match_any() {
    let root = TempDir::new().unwrap();
    simple(
        root.path(),
        "a",
        "shell",
        "conditions: [tool:shell, tool:exec]\n",
    );
    simple(root.path(), "b", "free", "");
    let mut q = query(&[root.path()]);
    assert_eq!(names(&list_skills(&q).unwrap()), ["free"]);
    q.conditions = vec!["tool:exec".into()];
    assert_eq!(names(&list_skills(&q).unwrap()), ["free", "shell"]);
    q.conditions = vec!["tool:other".into()];
    assert_eq!(names(&list_skills(&q).unwrap()), ["free"]);
}

#[test]
fn conditions_match_all() {
    let root = TempDir::new().unwrap();
    simple(
        root.path(),
        "a",
        "both",
        "conditions: [tool:shell, os:linux]\nmatch: all\n",
    );
    let mut q = query(&[root.path()]);
    q.conditions = vec!["tool:shell".into()];
    assert!(list_skills(&q).unwrap().skills.is_empty());
    q.conditions = vec!["os:linux".into(), "extra".into(), "tool:shell".into()];
    assert_eq!(names(&list_skills(&q).unwrap()), ["both"]);
}

#[test]
fn exclude_drops_names() {
    let root = TempDir::new().unwrap();
    simple(root.path(), "a", "keep", "");
    simple(root.path(), "b", "drop", "priority: 900\n");
    let q = SkillsQuery {
        exclude: vec!["drop".into(), "not-there".into()],
        ..query(&[root.path()])
    };
    assert_eq!(names(&list_skills(&q).unwrap()), ["keep"]);
}

#[test]
fn ignore_conditions_lists_all_but_still_excludes() {
    let root = TempDir::new().unwrap();
    simple(
        root.path(),
        "a",
        "gated",
        "conditions: [tool:x]\nmatch: all\n",
    );
    simple(root.path(), "b", "other", "conditions: [tool:y]\n");
    simple(root.path(), "c", "dropped", "");
    let q = SkillsQuery {
        ignore_conditions: true,
        exclude: vec!["dropped".into()],
        ..query(&[root.path()])
    };
    assert_eq!(names(&list_skills(&q).unwrap()), ["gated", "other"]);
}

#[test]
fn scripts_placeholder_is_substituted_with_absolute_path() {
    let root = TempDir::new().unwrap();
    write_skill(
        root.path(),
        "tooling",
        "---\nname: tooling\n---\nRun {scripts}/build.sh then {scripts}/test.sh\n",
    );
    let out = list_skills(&query(&[root.path()])).unwrap();
    let scripts = std::path::absolute(root.path())
        .unwrap()
        .join("tooling")
        .join("scripts");
    let scripts = scripts.to_string_lossy();
    assert!(Path::new(scripts.as_ref()).is_absolute());
    assert_eq!(
        out.skills[0].content,
        format!("Run {scripts}/build.sh then {scripts}/test.sh\n")
    );
}

#[test]
fn relative_root_becomes_absolute() {
    // "." always exists; no files are written into the working tree.
    let roots = check_roots(&[PathBuf::from(".")]).unwrap();
    assert_eq!(roots[0].0, PathBuf::from("."));
    assert!(roots[0].1.is_absolute());
}

#[test]
fn invalid_names_are_skipped_with_warnings() {
    let root = TempDir::new().unwrap();
    let cases = [
        ("upper", "Upper".to_owned(), "must match"),
        ("double", "a--b".to_owned(), "`--`"),
        ("long", "a".repeat(65), "65 characters"),
        ("lead", "-lead".to_owned(), "must match"),
        ("trail", "trail-".to_owned(), "must match"),
        ("space", "'has space'".to_owned(), "must match"),
        ("empty", "''".to_owned(), "must match"),
        ("number", "42".to_owned(), "must be a string"),
    ];
    for (dir, name, _) in &cases {
        simple(root.path(), dir, name, "");
    }
    write_skill(root.path(), "missing", "---\ndescription: no name\n---\n");
    simple(root.path(), "max", &"b".repeat(64), "");
    simple(root.path(), "ok", "ok-1", "");
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert_eq!(names(&out), ["b".repeat(64).as_str(), "ok-1"]);
    for (dir, _, problem) in &cases {
        let w = warning_about(&out, dir);
        assert!(w.contains(problem) && w.ends_with("skill skipped"), "{w}");
    }
    assert!(warning_about(&out, "missing").contains("no `name`"));
    assert_eq!(out.warnings.len(), cases.len() + 1);
}

#[test]
fn wrong_field_types_are_skipped_with_warnings() {
    let root = TempDir::new().unwrap();
    let cases = [
        ("prio", "priority: high\n", "`priority` must be an integer"),
        ("prio-float", "priority: 1.5\n", "found a float"),
        ("tags", "tags: ops\n", "`tags` must be a list of strings"),
        ("tag-item", "tags: [1]\n", "found an integer"),
        (
            "cond",
            "conditions: {a: b}\n",
            "`conditions` must be a list",
        ),
        (
            "desc",
            "description: [x]\n",
            "`description` must be a string",
        ),
        (
            "dmi",
            "disable-model-invocation: 'yes'\n",
            "must be true or false",
        ),
        ("layer", "layer: lazy\n", "use `eager` or `catalog`"),
        ("match", "match: some\n", "use `any` or `all`"),
    ];
    for (dir, extra, _) in &cases {
        simple(root.path(), dir, dir, extra);
    }
    simple(root.path(), "zz-good", "good", "");
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert_eq!(names(&out), ["good"]);
    for (dir, _, problem) in &cases {
        let w = warning_about(&out, dir);
        assert!(w.contains(problem), "{w}");
    }
}

#[test]
fn malformed_yaml_is_skipped_with_warning() {
    let root = TempDir::new().unwrap();
    write_skill(
        root.path(),
        "bad",
        "---\nname: bad\ntags: [unclosed\n---\nbody\n",
    );
    write_skill(
        root.path(),
        "dup",
        "---\nname: dup\nname: dup2\n---\nbody\n",
    );
    write_skill(root.path(), "scalar", "---\njust text\n---\nbody\n");
    simple(root.path(), "good", "good", "");
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert_eq!(names(&out), ["good"]);
    assert!(warning_about(&out, "bad").contains("not valid YAML"));
    assert!(warning_about(&out, "dup").contains("not valid YAML"));
    assert!(warning_about(&out, "scalar").contains("must be a YAML mapping"));
}

#[test]
fn missing_or_unclosed_front_matter_warns() {
    let root = TempDir::new().unwrap();
    write_skill(root.path(), "none", "# Just markdown\nname: none\n");
    write_skill(root.path(), "late", "\n---\nname: late\n---\nbody\n");
    write_skill(root.path(), "open", "---\nname: open\nbody without end\n");
    write_skill(root.path(), "empty", "");
    write_skill(root.path(), "blank-fm", "---\n---\nbody\n");
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert!(out.skills.is_empty());
    assert!(warning_about(&out, "none").contains("first line must be `---`"));
    assert!(warning_about(&out, "late").contains("first line must be `---`"));
    assert!(warning_about(&out, "empty").contains("first line must be `---`"));
    assert!(warning_about(&out, "open").contains("not closed"));
    assert!(warning_about(&out, "blank-fm").contains("no `name`"));
}

#[test]
fn bom_crlf_and_no_trailing_newline_are_tolerated() {
    let root = TempDir::new().unwrap();
    write_skill(
        root.path(),
        "win",
        "\u{feff}---\r\nname: win\r\n---\r\n\r\nBody\r\n",
    );
    write_skill(root.path(), "bare", "---\nname: bare\n---");
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let content = |n: &str| {
        out.skills
            .iter()
            .find(|s| s.name == n)
            .unwrap()
            .content
            .clone()
    };
    assert_eq!(content("win"), "Body\r\n");
    assert_eq!(content("bare"), "");
}

#[test]
fn dirs_without_skill_md_and_loose_files_are_silent() {
    let root = TempDir::new().unwrap();
    fs::create_dir(root.path().join("scratch")).unwrap();
    fs::write(root.path().join("README.md"), "not a skill").unwrap();
    simple(root.path(), "real", "real", "");
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert_eq!(names(&out), ["real"]);
    assert!(out.warnings.is_empty());
}

#[test]
fn skill_md_that_is_a_directory_warns() {
    let root = TempDir::new().unwrap();
    fs::create_dir_all(root.path().join("odd").join(SKILL_FILE)).unwrap();
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert!(warning_about(&out, "odd").contains("not a regular file"));
}

#[test]
fn long_description_is_listed_with_warning() {
    let root = TempDir::new().unwrap();
    let long = "é".repeat(DESCRIPTION_SOFT_LIMIT + 1);
    simple(
        root.path(),
        "wordy",
        "wordy",
        &format!("description: {long}\n"),
    );
    simple(
        root.path(),
        "fits",
        "fits",
        &format!("description: {}\n", "é".repeat(DESCRIPTION_SOFT_LIMIT)),
    );
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert_eq!(names(&out), ["fits", "wordy"]);
    let w = warning_about(&out, "wordy");
    assert!(
        w.contains("1025 characters") && w.contains("soft limit"),
        "{w}"
    );
    assert_eq!(out.warnings.len(), 1);
}

#[test]
fn oversized_skill_md_is_skipped_with_warning() {
    let root = TempDir::new().unwrap();
    let body = "x".repeat(MAX_SKILL_FILE_BYTES as usize);
    write_skill(
        root.path(),
        "huge",
        &format!("---\nname: huge\n---\n{body}"),
    );
    simple(root.path(), "small", "small", "");
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert_eq!(names(&out), ["small"]);
    assert!(warning_about(&out, "huge").contains("over the 1048576-byte limit"));
}

#[test]
fn scripts_amplification_is_bounded() {
    let root = TempDir::new().unwrap();
    // ~1 MiB of placeholders would expand far beyond MAX_CONTENT_BYTES.
    let body = SCRIPTS_PLACEHOLDER.repeat(100_000);
    write_skill(
        root.path(),
        "bomb",
        &format!("---\nname: bomb\n---\n{body}"),
    );
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert!(out.skills.is_empty());
    assert!(warning_about(&out, "bomb").contains("substitution"));
}

#[test]
fn skill_dirs_per_root_are_capped() {
    let root = TempDir::new().unwrap();
    for i in 0..MAX_SKILL_DIRS_PER_ROOT {
        fs::create_dir(root.path().join(format!("d{i:04}"))).unwrap();
    }
    simple(root.path(), "d0000", "first", "");
    // Sorts after every d#### dir, so it falls beyond the cap.
    simple(root.path(), "zz", "beyond", "");
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert_eq!(names(&out), ["first"]);
    assert_eq!(out.warnings.len(), 1);
    assert!(out.warnings[0].contains("1001 skill directories"));
}

#[test]
fn warnings_are_capped_with_summary() {
    let mut w = Warnings::default();
    for i in 0..MAX_WARNINGS + 3 {
        w.push(format!("w{i}"));
    }
    let list = w.finish();
    assert_eq!(list.len(), MAX_WARNINGS + 1);
    assert_eq!(list[MAX_WARNINGS], "3 further warnings omitted");
}

#[test]
fn rows_ordered_by_priority_desc_then_name() {
    let root = TempDir::new().unwrap();
    simple(root.path(), "1", "zeta", "priority: 900\n");
    simple(root.path(), "2", "alpha", "priority: 100\n");
    simple(root.path(), "3", "beta", "priority: 900\n");
    simple(root.path(), "4", "gamma", "");
    let out = list_skills(&query(&[root.path()])).unwrap();
    assert_eq!(names(&out), ["beta", "zeta", "gamma", "alpha"]);
}

#[test]
fn nonexistent_root_is_an_error_naming_it() {
    let root = TempDir::new().unwrap();
    let missing = root.path().join("nope");
    // A valid root first: the bad one must still fail the whole request.
    let err = list_skills(&query(&[root.path(), &missing])).unwrap_err();
    assert!(matches!(err, SkillsError::RootNotFound { .. }));
    let msg = err.to_string();
    assert!(msg.contains(&missing.display().to_string()), "{msg}");
    assert!(msg.contains("does not exist"), "{msg}");
}

#[test]
fn file_root_is_an_error() {
    let root = TempDir::new().unwrap();
    let file = root.path().join("file.txt");
    fs::write(&file, "x").unwrap();
    let err = list_skills(&query(&[&file])).unwrap_err();
    assert!(matches!(err, SkillsError::RootNotADirectory { .. }));
    assert!(err.to_string().contains(&file.display().to_string()));
}

#[test]
fn empty_and_too_many_roots_are_errors() {
    let err = list_skills(&SkillsQuery::default()).unwrap_err();
    assert!(matches!(err, SkillsError::NoRoots));
    assert!(err.to_string().contains("roots"));
    let root = TempDir::new().unwrap();
    let many = vec![root.path(); MAX_ROOTS + 1];
    let err = list_skills(&query(&many)).unwrap_err();
    assert!(matches!(err, SkillsError::TooManyRoots { count } if count == MAX_ROOTS + 1));
}
