//! `ls`, `glob` and `grep` over the pipes, through `tool.invoke` with `context.cwd` a tempdir
//! workspace: glob order and limits, grep paging, context, multiline, types, binary files,
//! exclusions, .gitignore, symlinks, blocked paths and the walk budget.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::common::{Opts, Sidecar};
use serde_json::{Value, json};

struct Ws {
    s: Sidecar,
    dir: tempfile::TempDir,
}

impl Ws {
    fn start() -> Ws {
        Ws::with_env(vec![])
    }

    fn with_env(env: Vec<(&str, String)>) -> Ws {
        let s = Sidecar::start_with(Opts {
            env: env.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            ..Default::default()
        });
        Ws {
            s,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn root(&self) -> PathBuf {
        fs::canonicalize(self.dir.path()).unwrap()
    }

    fn put(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.root().join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, bytes).unwrap();
        p
    }

    /// Writes a file and sets its mtime to `secs` after the epoch.
    fn put_at(&self, name: &str, secs: u64) {
        let p = self.put(name, "x\n");
        let f = fs::File::options().write(true).open(p).unwrap();
        f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            .unwrap();
    }

    /// The tool result (`success`, `data`, …).
    fn call(&mut self, name: &str, args: Value) -> Value {
        let root = self.root();
        self.s.ok(
            "tool.invoke",
            json!({"name": name, "arguments": args, "context": {"cwd": root}}),
        )
    }

    fn ok(&mut self, name: &str, args: Value) -> Value {
        let r = self.call(name, args.clone());
        assert_eq!(r["success"], true, "{name} {args}: {r}");
        r["data"].clone()
    }

    fn err(&mut self, name: &str, args: Value) -> String {
        let r = self.call(name, args.clone());
        assert_eq!(r["success"], false, "{name} {args} should fail: {r}");
        r["error"].as_str().unwrap().to_string()
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

// ---------------------------------------------------------------------------------------------
// glob
// ---------------------------------------------------------------------------------------------

#[test]
fn glob_is_newest_first_with_ties_by_path_and_limits() {
    let mut w = Ws::start();
    w.put_at("old.rs", 1_000);
    w.put_at("src/new.rs", 3_000);
    w.put_at("src/b_tie.rs", 2_000);
    w.put_at("src/a_tie.rs", 2_000);
    w.put_at("notes.md", 4_000);
    let d = w.ok("glob", json!({"pattern": "*.rs"}));
    assert_eq!(
        strings(&d["files"]),
        vec!["src/new.rs", "src/a_tie.rs", "src/b_tie.rs", "old.rs"]
    );
    assert_eq!(d["total"], 4);
    assert_eq!(d["truncated"], false);

    let d = w.ok("glob", json!({"pattern": "**/*.rs", "limit": 2}));
    assert_eq!(strings(&d["files"]), vec!["src/new.rs", "src/a_tie.rs"]);
    assert_eq!(d["total"], 4);
    assert_eq!(d["truncated"], true);
    assert!(d["output"].as_str().unwrap().contains("Showing 2 of 4"));

    // A pattern with a slash is anchored at the search root; `path` moves the root.
    let d = w.ok("glob", json!({"pattern": "src/*.rs"}));
    assert_eq!(d["total"], 3);
    let d = w.ok("glob", json!({"pattern": "*.rs", "path": "src"}));
    assert_eq!(d["total"], 3);
    let d = w.ok("glob", json!({"pattern": "./*.rs"}));
    assert_eq!(strings(&d["files"]), vec!["old.rs"]);

    // The ceiling is enforced by the schema; 0 is refused too.
    for bad in [0, 1001] {
        let e = w.err("glob", json!({"pattern": "*", "limit": bad}));
        assert!(e.contains("limit"), "{e}");
    }
}

#[test]
fn glob_default_limit_is_100() {
    let mut w = Ws::start();
    for i in 0..130 {
        w.put(&format!("f/{i:03}.txt"), "x");
    }
    let d = w.ok("glob", json!({"pattern": "*.txt"}));
    assert_eq!(d["files"].as_array().unwrap().len(), 100);
    assert_eq!(d["total"], 130);
    assert_eq!(d["truncated"], true);
}

#[test]
fn glob_skips_exclusions_and_gitignored_but_keeps_hidden() {
    let mut w = Ws::start();
    w.put("src/main.rs", "x");
    w.put(".hidden/dot.rs", "x");
    w.put("node_modules/pkg/index.rs", "x");
    w.put("target/debug/build.rs", "x");
    w.put("a/vendor/v.rs", "x");
    w.put(".git/hooks/h.rs", "x");
    w.put("gen/ignored.rs", "x");
    w.put(".gitignore", "gen/\n");
    let d = w.ok("glob", json!({"pattern": "*.rs"}));
    let mut files = strings(&d["files"]);
    files.sort();
    assert_eq!(files, vec![".hidden/dot.rs", "src/main.rs"]);
    // Rooted inside an excluded directory, the search runs.
    let d = w.ok("glob", json!({"pattern": "*.rs", "path": "node_modules"}));
    assert_eq!(strings(&d["files"]), vec!["node_modules/pkg/index.rs"]);
    // Escaping the workspace is refused with the path named.
    let e = w.err("glob", json!({"pattern": "*", "path": "../.."}));
    assert!(e.contains("escapes workspace"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// grep paging
// ---------------------------------------------------------------------------------------------

fn numbered(n: usize, every: usize) -> String {
    (1..=n)
        .map(|i| {
            if i % every == 0 {
                format!("line {i} MATCH\n")
            } else {
                format!("line {i} plain\n")
            }
        })
        .collect()
}

#[test]
fn grep_content_pages_cover_every_match_once() {
    let mut w = Ws::start();
    w.put("a.txt", numbered(250, 1));
    w.put("b.txt", numbered(20, 2));
    let mut seen = Vec::new();
    let mut offset = 0u64;
    let mut pages = 0;
    loop {
        let d = w.ok(
            "grep",
            json!({"pattern": "MATCH", "outputMode": "content", "offset": offset}),
        );
        pages += 1;
        let hits = d["matches"].as_array().unwrap();
        assert!(hits.len() <= 100, "headLimit default 100");
        for h in hits {
            seen.push((
                h["path"].as_str().unwrap().to_string(),
                h["line"].as_u64().unwrap(),
            ));
        }
        assert!(d["output"].as_str().unwrap().lines().count() <= 200);
        match d.get("next_offset") {
            Some(n) => {
                assert_eq!(d["truncated"], true);
                offset = n.as_u64().unwrap();
                assert_eq!(offset as usize, seen.len());
            }
            None => break,
        }
        assert!(pages < 10, "paging must end");
    }
    assert_eq!(pages, 3);
    let mut expected: Vec<(String, u64)> = (1..=250).map(|i| ("a.txt".to_string(), i)).collect();
    expected.extend((1..=10).map(|i| ("b.txt".to_string(), i * 2)));
    assert_eq!(
        seen, expected,
        "sorted by path then line, no gaps or repeats"
    );

    // headLimit sets the page size; the ceiling is 500.
    let d = w.ok(
        "grep",
        json!({"pattern": "MATCH", "outputMode": "content", "headLimit": 7, "offset": 248}),
    );
    let lines: Vec<u64> = d["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, vec![249, 250, 2, 4, 6, 8, 10]);
    assert_eq!(d["next_offset"], 255);
    let e = w.err("grep", json!({"pattern": "x", "headLimit": 501}));
    assert!(e.contains("headLimit"), "{e}");
}

#[test]
fn grep_content_pages_stop_at_200_rendered_lines() {
    let mut w = Ws::start();
    // Matches every 10th line with 3 lines of context each side: 7 lines per match plus a
    // separator, so 100 results cannot fit in 200 lines.
    w.put("big.txt", numbered(2000, 10));
    let mut offset = 0u64;
    let mut all = Vec::new();
    loop {
        let d = w.ok(
            "grep",
            json!({"pattern": "MATCH", "outputMode": "content", "context": 3, "offset": offset}),
        );
        let out = d["output"].as_str().unwrap();
        assert!(out.lines().count() <= 200, "{} lines", out.lines().count());
        let hits = d["matches"].as_array().unwrap();
        assert!(!hits.is_empty());
        for h in hits {
            let line = h["line"].as_u64().unwrap();
            let after = h.get("after").map_or(0, |a| a.as_array().unwrap().len());
            assert_eq!(h["before"].as_array().unwrap().len(), 3);
            assert_eq!(after, if line == 2000 { 0 } else { 3 }, "{h}");
            all.push(line);
        }
        match d.get("next_offset") {
            Some(n) => {
                assert!(
                    hits.len() < 100,
                    "the line budget, not headLimit, ended the page"
                );
                offset = n.as_u64().unwrap();
            }
            None => break,
        }
    }
    assert_eq!(all, (1..=200).map(|i| i * 10).collect::<Vec<u64>>());
}

#[test]
fn grep_files_and_count_modes_page_too() {
    let mut w = Ws::start();
    for i in 0..12 {
        w.put(&format!("d/f{i:02}.txt"), "hit\nhit\nmiss\n");
    }
    w.put("d/none.txt", "miss\n");
    let d = w.ok("grep", json!({"pattern": "hit", "headLimit": 5}));
    assert_eq!(d["mode"], "files_with_matches");
    assert_eq!(
        strings(&d["files"]),
        vec![
            "d/f00.txt",
            "d/f01.txt",
            "d/f02.txt",
            "d/f03.txt",
            "d/f04.txt"
        ]
    );
    assert_eq!(d["next_offset"], 5);
    let d = w.ok(
        "grep",
        json!({"pattern": "hit", "headLimit": 5, "offset": 10}),
    );
    assert_eq!(strings(&d["files"]), vec!["d/f10.txt", "d/f11.txt"]);
    assert!(d.get("next_offset").is_none());
    assert_eq!(d["truncated"], false);

    let d = w.ok(
        "grep",
        json!({"pattern": "hit", "outputMode": "count", "headLimit": 3, "offset": 3}),
    );
    assert_eq!(
        d["counts"],
        json!([
            {"path": "d/f03.txt", "count": 2},
            {"path": "d/f04.txt", "count": 2},
            {"path": "d/f05.txt", "count": 2}
        ])
    );
    assert_eq!(d["numMatches"], 6);
    assert_eq!(d["next_offset"], 6);
    assert!(d["output"].as_str().unwrap().starts_with("d/f03.txt:2\n"));

    let d = w.ok("grep", json!({"pattern": "absent-xyz"}));
    assert_eq!(d["output"], "No files found");
    assert_eq!(d["numFiles"], 0);
}

// ---------------------------------------------------------------------------------------------
// grep matching
// ---------------------------------------------------------------------------------------------

#[test]
fn grep_context_lines_and_rendering() {
    let mut w = Ws::start();
    w.put(
        "c.txt",
        "one\ntwo\nTARGET a\nfour\nfive\nsix\nseven\nTARGET b\nnine\n",
    );
    let d = w.ok(
        "grep",
        json!({"pattern": "TARGET", "outputMode": "content", "before": 1, "after": 1}),
    );
    let hits = d["matches"].as_array().unwrap();
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0]["line"], 3);
    assert_eq!(hits[0]["before"], json!([{"line": 2, "text": "two"}]));
    assert_eq!(hits[0]["after"], json!([{"line": 4, "text": "four"}]));
    assert_eq!(hits[1]["before"], json!([{"line": 7, "text": "seven"}]));
    assert_eq!(
        d["output"],
        "c.txt\n2-two\n3:TARGET a\n4-four\n--\n7-seven\n8:TARGET b\n9-nine"
    );
    // Overlapping windows print each line once.
    let d = w.ok(
        "grep",
        json!({"pattern": "TARGET", "outputMode": "content", "context": 3}),
    );
    let out = d["output"].as_str().unwrap();
    assert_eq!(
        out.lines().filter(|l| l.starts_with("5-")).count(),
        1,
        "{out}"
    );
    assert!(!out.contains("--"), "{out}");
    // Case folding.
    let d = w.ok(
        "grep",
        json!({"pattern": "target", "outputMode": "count", "ignoreCase": true}),
    );
    assert_eq!(d["counts"][0]["count"], 2);
}

#[test]
fn grep_multiline() {
    let mut w = Ws::start();
    w.put("m.rs", "fn alpha(\n    x: u32,\n) {}\nfn beta() {}\n");
    let e = w.err("grep", json!({"pattern": "alpha\\(\\n"}));
    assert!(e.contains("multiline"), "{e}");
    let d = w.ok(
        "grep",
        json!({"pattern": "alpha\\(.*?\\) \\{", "multiline": true, "outputMode": "content"}),
    );
    let lines: Vec<u64> = d["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["line"].as_u64().unwrap())
        .collect();
    assert_eq!(
        lines,
        vec![1, 2, 3],
        "each line of a spanning match is a result"
    );
    // Without multiline `.` stops at the line end.
    let d = w.ok(
        "grep",
        json!({"pattern": "alpha\\(.*\\) \\{", "outputMode": "count"}),
    );
    assert_eq!(d["numFiles"], 0);
    // `^` anchors at each line either way.
    let d = w.ok(
        "grep",
        json!({"pattern": "^fn", "multiline": true, "outputMode": "count"}),
    );
    assert_eq!(d["counts"][0]["count"], 2);
}

#[test]
fn grep_types_and_globs() {
    let mut w = Ws::start();
    w.put("src/a.rs", "needle\n");
    w.put("src/b.py", "needle\n");
    w.put("web/c.ts", "needle\n");
    w.put("web/d.tsx", "needle\n");
    w.put("main.go", "needle\n");
    let files = |w: &mut Ws, args: Value| -> Vec<String> {
        let mut a = args;
        a["pattern"] = json!("needle");
        strings(&w.ok("grep", a)["files"])
    };
    assert_eq!(files(&mut w, json!({"type": "rust"})), vec!["src/a.rs"]);
    assert_eq!(files(&mut w, json!({"type": "py"})), vec!["src/b.py"]);
    assert_eq!(
        files(&mut w, json!({"type": "ts"})),
        vec!["web/c.ts", "web/d.tsx"]
    );
    assert_eq!(files(&mut w, json!({"type": "golang"})), vec!["main.go"]);
    assert_eq!(
        files(&mut w, json!({"glob": "*.{rs,go}"})),
        vec!["main.go", "src/a.rs"]
    );
    assert_eq!(files(&mut w, json!({"glob": "web/*.ts"})), vec!["web/c.ts"]);
    assert_eq!(
        files(&mut w, json!({"glob": "!*.ts*", "path": "web"})),
        Vec::<String>::new()
    );
    let e = w.err("grep", json!({"pattern": "x", "type": "cobol"}));
    assert!(e.contains("unknown type") && e.contains("rust"), "{e}");
    let e = w.err("grep", json!({"pattern": "x", "glob": "a["}));
    assert!(e.contains("a["), "{e}");
    // A file as `path` is searched directly.
    assert_eq!(files(&mut w, json!({"path": "src/b.py"})), vec!["src/b.py"]);
}

#[test]
fn grep_skips_binary_files() {
    let mut w = Ws::start();
    let mut early = b"needle here\n".to_vec();
    early.push(0);
    early.extend_from_slice(b"needle again\n");
    w.put("early.bin", &early);
    // A NUL after the first 8 KiB does not make a file binary: all of it is searched.
    let mut late = b"needle first\n".to_vec();
    late.extend(std::iter::repeat_n(b'a', 9000));
    late.push(b'\n');
    late.push(0);
    late.extend_from_slice(b"needle after nul\n");
    w.put("late.dat", &late);
    w.put("text.txt", "needle\n");
    let d = w.ok(
        "grep",
        json!({"pattern": "needle", "outputMode": "content"}),
    );
    let got: Vec<(String, u64)> = d["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_string(),
                h["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("late.dat".to_string(), 1),
            ("late.dat".to_string(), 3),
            ("text.txt".to_string(), 1)
        ]
    );
}

#[test]
fn grep_caps_long_lines_around_the_match() {
    let mut w = Ws::start();
    let line = format!("{}NEEDLE{}\n", "x".repeat(5000), "y".repeat(5000));
    w.put("min.js", &line);
    let d = w.ok(
        "grep",
        json!({"pattern": "NEEDLE", "outputMode": "content"}),
    );
    let text = d["matches"][0]["text"].as_str().unwrap();
    assert!(text.contains("NEEDLE"));
    assert!(text.chars().count() <= 402, "{}", text.chars().count());
    assert!(text.starts_with('…') && text.ends_with('…'));
}

#[test]
fn grep_honours_gitignore_exclusions_and_hidden() {
    let mut w = Ws::start();
    w.put(".gitignore", "*.log\n");
    w.put("keep.txt", "needle\n");
    w.put("debug.log", "needle\n");
    w.put(".env.example", "needle\n");
    w.put("node_modules/x/i.js", "needle\n");
    w.put("build/out.txt", "needle\n");
    let d = w.ok("grep", json!({"pattern": "needle"}));
    assert_eq!(strings(&d["files"]), vec![".env.example", "keep.txt"]);
    let d = w.ok("grep", json!({"pattern": "needle", "path": "build"}));
    assert_eq!(strings(&d["files"]), vec!["build/out.txt"]);
}

// ---------------------------------------------------------------------------------------------
// Symlinks, blocked paths, the walk budget
// ---------------------------------------------------------------------------------------------

#[test]
fn symlinks_follow_only_files_inside_the_workspace() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret.txt"), "needle outside\n").unwrap();
    let mut w = Ws::start();
    let root = w.root();
    w.put("real/target.txt", "needle inside\n");
    w.put("node_modules/dep.txt", "needle dep\n");
    fs::create_dir_all(root.join("links")).unwrap();
    symlink(
        &root.join("real/target.txt"),
        &root.join("links/to_file.txt"),
    );
    symlink(
        &outside.path().join("secret.txt"),
        &root.join("links/out.txt"),
    );
    symlink(&root.join("real"), &root.join("links/dir"));
    symlink(
        &root.join("node_modules/dep.txt"),
        &root.join("links/dep.txt"),
    );
    symlink(&root.join("missing"), &root.join("links/dangling.txt"));
    let d = w.ok(
        "grep",
        json!({"pattern": "needle", "outputMode": "content"}),
    );
    let got: Vec<(String, String)> = d["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_string(),
                h["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("links/to_file.txt".to_string(), "needle inside".to_string()),
            ("real/target.txt".to_string(), "needle inside".to_string()),
        ]
    );
    let d = w.ok("glob", json!({"pattern": "*.txt", "path": "links"}));
    assert_eq!(strings(&d["files"]), vec!["links/to_file.txt"]);
    // ls names links without resolving them.
    let d = w.ok("ls", json!({"path": "links"}));
    let names: Vec<(String, String)> = d["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(names.len(), 5);
    assert!(names.iter().all(|(_, t)| t == "symlink"), "{names:?}");
}

#[test]
fn blocked_paths_are_never_searched() {
    let probe = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(probe.path()).unwrap();
    let mut w = Ws::with_env(vec![(
        "OUTRIGGER_BLOCKED_PATHS",
        format!(
            "{}:{}",
            root.join("secrets").display(),
            root.join("creds.txt").display()
        ),
    )]);
    w.dir = probe;
    w.put("secrets/key.txt", "needle\n");
    w.put("creds.txt", "needle\n");
    w.put("open.txt", "needle\n");
    let d = w.ok("grep", json!({"pattern": "needle"}));
    assert_eq!(strings(&d["files"]), vec!["open.txt"]);
    let d = w.ok("glob", json!({"pattern": "*.txt"}));
    assert_eq!(strings(&d["files"]), vec!["open.txt"]);
    let e = w.err("grep", json!({"pattern": "needle", "path": "secrets"}));
    assert!(e.contains("blocked"), "{e}");
    let d = w.ok("ls", json!({}));
    let names: Vec<&str> = d["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["open.txt"]);
}

#[test]
fn walk_budget_stops_and_says_so() {
    let mut w = Ws::with_env(vec![("OUTRIGGER_MAX_WALK_ENTRIES", "1000".into())]);
    for i in 0..1200 {
        w.put(&format!("many/{i:04}.txt"), "needle\n");
    }
    let d = w.ok("glob", json!({"pattern": "*.txt", "limit": 1000}));
    assert_eq!(d["truncated"], true);
    assert!(d["total"].as_u64().unwrap() < 1200);
    assert!(d["note"].as_str().unwrap().contains("max_walk_entries"));
    let d = w.ok(
        "grep",
        json!({"pattern": "needle", "outputMode": "count", "headLimit": 500, "offset": 500}),
    );
    assert_eq!(d["truncated"], true);
    assert!(d["output"].as_str().unwrap().contains("max_walk_entries"));
}

// ---------------------------------------------------------------------------------------------
// ls
// ---------------------------------------------------------------------------------------------

#[test]
fn ls_lists_one_directory() {
    let mut w = Ws::start();
    w.put("b.txt", "12345");
    w.put("a/inner.txt", "x");
    w.put(".hidden", "");
    w.put("debug.log", "x");
    w.put("node_modules/x.js", "x");
    w.put("target/t", "x");
    let d = w.ok("ls", json!({"ignore": ["*.log"]}));
    assert_eq!(d["path"], ".");
    assert_eq!(
        d["entries"],
        json!([
            {"name": ".hidden", "type": "file", "size": 0},
            {"name": "a", "type": "dir"},
            {"name": "b.txt", "type": "file", "size": 5}
        ])
    );
    assert_eq!(d["excluded"], json!(["node_modules", "target"]));
    assert_eq!(d["truncated"], false);
    assert!(
        d["output"]
            .as_str()
            .unwrap()
            .starts_with(".hidden (0 bytes)\na/\nb.txt (5 bytes)")
    );
    let d = w.ok("ls", json!({"path": "node_modules"}));
    assert_eq!(d["entries"][0]["name"], "x.js");
    let e = w.err("ls", json!({"path": "b.txt"}));
    assert!(e.contains("not a directory"), "{e}");
    let e = w.err("ls", json!({"path": "nope"}));
    assert!(e.contains("nope"), "{e}");
}

#[test]
fn tools_are_read_mode_and_direct() {
    let mut w = Ws::start();
    let list = w.s.ok("tool.list", Value::Null);
    let tools = list.as_array().unwrap().clone();
    for name in ["ls", "glob", "grep"] {
        let t = tools
            .iter()
            .find(|t| t["function"]["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing from {list}"));
        assert_eq!(t["mode"], "read", "{t}");
        assert_eq!(t["exposure"], "direct", "{t}");
    }
}

#[test]
fn grep_deep_offsets_in_a_file_with_many_matches() {
    let mut w = Ws::start();
    // More match lines than a worker stores per file, so the page is found by a second search.
    w.put("a_many.txt", numbered(1500, 1));
    w.put("b_after.txt", "MATCH tail\n");
    let d = w.ok(
        "grep",
        json!({"pattern": "MATCH", "outputMode": "content", "context": 1, "headLimit": 50, "offset": 1200}),
    );
    let hits = d["matches"].as_array().unwrap();
    let lines: Vec<u64> = hits.iter().map(|h| h["line"].as_u64().unwrap()).collect();
    assert_eq!(lines, (1201..=1250).collect::<Vec<u64>>());
    assert_eq!(d["next_offset"], 1250);
    let d = w.ok(
        "grep",
        json!({"pattern": "MATCH", "outputMode": "content", "headLimit": 10, "offset": 1495}),
    );
    let got: Vec<(String, u64)> = d["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_string(),
                h["line"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut expected: Vec<(String, u64)> = (1496..=1500)
        .map(|i| ("a_many.txt".to_string(), i))
        .collect();
    expected.push(("b_after.txt".to_string(), 1));
    assert_eq!(got, expected);
    assert!(d.get("next_offset").is_none());
    let d = w.ok("grep", json!({"pattern": "MATCH", "outputMode": "count"}));
    assert_eq!(d["counts"][0]["count"], 1500);
}
