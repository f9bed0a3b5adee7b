//! The workspace file tools over the pipes: `read_file`, `write_file`, `edit_file` and
//! `apply_patch` through `tool.invoke` with `context.cwd` a tempdir workspace.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::{Opts, Sidecar};
use serde_json::{Value, json};

struct Ws {
    s: Sidecar,
    dir: tempfile::TempDir,
    session: Option<String>,
}

impl Ws {
    fn start() -> Ws {
        Ws::with_env(vec![])
    }

    fn with_env(env: Vec<(&str, &str)>) -> Ws {
        let s = Sidecar::start_with(Opts {
            env: env
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        });
        Ws {
            s,
            dir: tempfile::tempdir().unwrap(),
            session: None,
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn p(&self, name: &str) -> PathBuf {
        self.root().join(name)
    }

    fn put(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.p(name);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, bytes).unwrap();
        p
    }

    fn text(&self, name: &str) -> String {
        fs::read_to_string(self.p(name)).unwrap()
    }

    fn invoke_in(&mut self, cwd: &Path, name: &str, args: Value) -> Value {
        let mut ctx = json!({"cwd": cwd});
        if let Some(sid) = &self.session {
            ctx["sessionId"] = json!(sid);
        }
        self.s.ok(
            "tool.invoke",
            json!({"name": name, "arguments": args, "context": ctx}),
        )
    }

    fn invoke(&mut self, name: &str, args: Value) -> Value {
        let root = self.root().to_path_buf();
        self.invoke_in(&root, name, args)
    }

    /// The `data` of a successful call.
    fn ok(&mut self, name: &str, args: Value) -> Value {
        let r = self.invoke(name, args.clone());
        assert_eq!(r["success"], true, "{name} {args} failed: {r}");
        r["data"].clone()
    }

    /// `(data.code, error)` of a failed, recoverable call.
    fn err(&mut self, name: &str, args: Value) -> (String, String) {
        let r = self.invoke(name, args.clone());
        assert_eq!(r["success"], false, "{name} {args} succeeded: {r}");
        assert_eq!(r["needsFollowup"], true, "{r}");
        (
            r["data"]["code"].as_str().unwrap_or_default().to_string(),
            r["error"].as_str().unwrap_or_default().to_string(),
        )
    }

    fn read(&mut self, path: &str) -> Value {
        self.ok("read_file", json!({"path": path}))
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn big_text(bytes: usize) -> String {
    let line = "abcdefghijklmnopqrstuvwxyz0123456789\n";
    line.repeat(bytes / line.len() + 1)
}

// ---------------------------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------------------------

#[test]
fn tools_are_registered_with_modes() {
    let mut w = Ws::start();
    let list = w.s.ok("tool.list", Value::Null);
    let mode = |n: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == n)
            .unwrap_or_else(|| panic!("{n} not listed"))["mode"]
            .clone()
    };
    assert_eq!(mode("read_file"), "read");
    assert_eq!(mode("write_file"), "safe_write");
    assert_eq!(mode("edit_file"), "safe_write");
    assert_eq!(mode("apply_patch"), "safe_write");
}

// ---------------------------------------------------------------------------------------------
// read_file
// ---------------------------------------------------------------------------------------------

#[test]
fn read_versions_match_the_contract_vectors() {
    let mut w = Ws::start();
    let cases = [
        (
            "empty.txt",
            "",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ),
        (
            "ascii.txt",
            "hello world",
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9",
        ),
        (
            "cjk.txt",
            "中文测试",
            "e350545d18735c5dd2dec50dcb971f3eb4cdda24b95a79bdb6b553f6a01ceb87",
        ),
        (
            "lines.txt",
            "line1\nline2\n",
            "2751a3a2f303ad21752038085e2b8c5f98ecff61a2e4ebbd43506a941725be80",
        ),
    ];
    for (name, text, version) in cases {
        w.put(name, text);
        let d = w.read(name);
        assert_eq!(d["version"], version, "{name}");
        assert_eq!(d["content"], text);
        assert_eq!(d["path"], name);
        assert_eq!(d["partial"], false);
    }
    assert_eq!(w.read("empty.txt")["totalLines"], 0);
    assert_eq!(w.read("lines.txt")["totalLines"], 2);
    assert_eq!(w.read("ascii.txt")["totalLines"], 1);
}

#[test]
fn read_pages_by_line_and_numbers_lines() {
    let mut w = Ws::start();
    let text: String = (1..=5000).map(|i| format!("row {i}\n")).collect();
    w.put("big.txt", &text);
    let d = w.read("big.txt");
    assert_eq!(d["totalLines"], 5000);
    assert_eq!(d["partial"], true);
    assert_eq!(d["nextOffset"], 2001);
    let content = d["content"].as_str().unwrap();
    assert_eq!(content.lines().count(), 2000);
    assert!(content.starts_with("row 1\n") && content.ends_with("row 2000\n"));
    // The version is of the whole file, not the page.
    let whole = w.ok("read_file", json!({"path": "big.txt", "limit": 10000}));
    assert_eq!(whole["version"], d["version"]);
    assert_eq!(whole["partial"], false);

    let d = w.ok(
        "read_file",
        json!({"path": "big.txt", "offset": 4999, "limit": 5, "lineNumbers": true}),
    );
    assert_eq!(d["content"], "  4999\trow 4999\n  5000\trow 5000\n");
    assert_eq!(d["partial"], true);
    assert!(d.get("nextOffset").is_none());
    let (code, msg) = w.err("read_file", json!({"path": "big.txt", "offset": 5001}));
    assert_eq!(code, "offset_out_of_range");
    assert!(msg.contains("5000 lines"), "{msg}");
}

#[test]
fn read_clips_long_output_with_a_marker() {
    let mut w = Ws::with_env(vec![("OUTRIGGER_MAX_OUTPUT_CHARS", "1000")]);
    let text = "x".repeat(4000) + &"y".repeat(1000);
    w.put("long.txt", &text);
    let d = w.read("long.txt");
    let content = d["content"].as_str().unwrap();
    assert!(
        content.contains("\n...[4000 chars truncated]...\n"),
        "{content}"
    );
    assert!(content.starts_with(&"x".repeat(200)));
    assert!(content.ends_with(&"y".repeat(800)));
    assert_eq!(d["partial"], true);
    assert_eq!(d["truncatedChars"], 4000);
}

#[test]
fn read_refuses_binary_non_utf8_oversized_and_directories() {
    let mut w = Ws::with_env(vec![("OUTRIGGER_MAX_READ_BYTES", "4096")]);
    w.put("bin.dat", b"abc\0def");
    let (code, msg) = w.err("read_file", json!({"path": "bin.dat"}));
    assert_eq!(code, "binary");
    assert!(msg.contains("bin.dat") && msg.contains("NUL"), "{msg}");
    // A NUL after the first 8 KiB does not make it binary (but this one is too big here).
    w.put("latin1.txt", b"caf\xe9\n");
    let (code, msg) = w.err("read_file", json!({"path": "latin1.txt"}));
    assert_eq!(code, "not_utf8");
    assert!(msg.contains("UTF-8") && msg.contains("offset 3"), "{msg}");
    w.put("huge.txt", big_text(5000));
    let (code, msg) = w.err("read_file", json!({"path": "huge.txt"}));
    assert_eq!(code, "too_large");
    assert!(
        msg.contains("max_read_bytes") && msg.contains("grep"),
        "{msg}"
    );
    fs::create_dir(w.p("sub")).unwrap();
    assert_eq!(w.err("read_file", json!({"path": "sub"})).0, "is_directory");
    assert_eq!(
        w.err("read_file", json!({"path": "missing.txt"})).0,
        "not_found"
    );
}

#[test]
fn nul_after_the_sniff_window_is_text() {
    let mut w = Ws::start();
    let mut bytes = vec![b'a'; 9000];
    bytes.push(0);
    w.put("late-nul.txt", &bytes);
    let d = w.read("late-nul.txt");
    assert_eq!(d["content"].as_str().unwrap().len(), 9001);
}

// ---------------------------------------------------------------------------------------------
// Containment
// ---------------------------------------------------------------------------------------------

#[test]
fn escapes_are_refused_naming_path_and_root() {
    let mut w = Ws::start();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret.txt"), "s").unwrap();
    let outside_file = outside.path().join("secret.txt").display().to_string();

    let (code, msg) = w.err("read_file", json!({"path": "../x.txt"}));
    assert_eq!(code, "path_escapes");
    assert!(msg.contains("path escapes workspace: ../x.txt"), "{msg}");
    let root = fs::canonicalize(w.root()).unwrap().display().to_string();
    assert!(msg.contains(&root), "{msg}");

    assert_eq!(
        w.err("read_file", json!({"path": outside_file})).0,
        "path_escapes"
    );
    assert_eq!(
        w.err("write_file", json!({"path": outside_file, "content": "x"}))
            .0,
        "path_escapes"
    );
    assert_eq!(
        w.err(
            "write_file",
            json!({"path": "a/../../evil.txt", "content": "x"})
        )
        .0,
        "path_escapes"
    );

    // A symlinked file and a symlinked directory leading out.
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), w.p("link.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path(), w.p("outdir")).unwrap();
    assert_eq!(
        w.err("read_file", json!({"path": "link.txt"})).0,
        "path_escapes"
    );
    assert_eq!(
        w.err("read_file", json!({"path": "outdir/secret.txt"})).0,
        "path_escapes"
    );
    assert_eq!(
        w.err(
            "write_file",
            json!({"path": "outdir/new.txt", "content": "x"})
        )
        .0,
        "path_escapes"
    );
    assert!(!outside.path().join("new.txt").exists());
    assert_eq!(
        fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "s"
    );

    // A symlink that stays inside is fine.
    w.put("real.txt", "inside");
    std::os::unix::fs::symlink(w.p("real.txt"), w.p("alias.txt")).unwrap();
    assert_eq!(w.read("alias.txt")["content"], "inside");
}

#[test]
fn a_symlink_swapped_in_after_a_read_is_refused() {
    let mut w = Ws::start();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("target.txt"), "outside").unwrap();
    w.put("f.txt", "inside");
    assert_eq!(w.read("f.txt")["content"], "inside");
    fs::remove_file(w.p("f.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("target.txt"), w.p("f.txt")).unwrap();
    let (code, msg) = w.err("read_file", json!({"path": "f.txt"}));
    assert_eq!(code, "path_escapes", "{msg}");
    assert!(!msg.contains("outside\""), "{msg}");
    // Writing through it does not touch the outside file either.
    let _ = w.invoke("write_file", json!({"path": "f.txt", "content": "pwned"}));
    assert_eq!(
        fs::read_to_string(outside.path().join("target.txt")).unwrap(),
        "outside"
    );
}

#[test]
fn blocked_paths_are_refused_even_inside_the_workspace() {
    let mut w = Ws::start();
    // The workspace is OUTRIGGER_HOME (= HOME in the harness): ~/.ssh and $OUTRIGGER_HOME/secrets
    // are inside it, and still refused.
    let home = w.s.home.path().to_path_buf();
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/id_ed25519"), "key").unwrap();
    fs::create_dir_all(home.join("secrets")).unwrap();
    fs::write(home.join("secrets/token"), "t").unwrap();
    std::os::unix::fs::symlink(home.join(".ssh/id_ed25519"), home.join("innocent.txt")).unwrap();
    for path in [".ssh/id_ed25519", "secrets/token", "innocent.txt"] {
        let r = w.invoke_in(&home, "read_file", json!({"path": path}));
        assert_eq!(r["success"], false, "{path}: {r}");
        assert_eq!(r["data"]["code"], "path_blocked", "{path}: {r}");
        assert!(r["error"].as_str().unwrap().contains("blocked"), "{r}");
    }
    let r = w.invoke_in(
        &home,
        "write_file",
        json!({"path": ".ssh/authorized_keys", "content": "x"}),
    );
    assert_eq!(r["data"]["code"], "path_blocked", "{r}");
    assert!(!home.join(".ssh/authorized_keys").exists());
}

#[test]
fn readable_and_writable_roots_extend_the_workspace() {
    let extra_r = tempfile::tempdir().unwrap();
    let extra_w = tempfile::tempdir().unwrap();
    fs::write(extra_r.path().join("r.txt"), "r").unwrap();
    let rr = extra_r.path().display().to_string();
    let wr = extra_w.path().display().to_string();
    let mut w = Ws::with_env(vec![
        ("OUTRIGGER_READABLE_ROOTS", rr.as_str()),
        ("OUTRIGGER_WRITABLE_ROOTS", wr.as_str()),
    ]);
    let r_file = extra_r.path().join("r.txt").display().to_string();
    assert_eq!(w.read(&r_file)["content"], "r");
    assert_eq!(
        w.err("write_file", json!({"path": r_file, "content": "x"}))
            .0,
        "path_escapes"
    );
    let w_file = extra_w.path().join("w.txt").display().to_string();
    w.ok("write_file", json!({"path": w_file, "content": "w"}));
    assert_eq!(
        fs::read_to_string(extra_w.path().join("w.txt")).unwrap(),
        "w"
    );
}

// ---------------------------------------------------------------------------------------------
// The CAS table
// ---------------------------------------------------------------------------------------------

#[test]
fn new_files_are_never_gated_and_report_bytes() {
    let mut w = Ws::start();
    let d = w.ok(
        "write_file",
        json!({"path": "dir/new.txt", "content": "héllo 中"}),
    );
    assert_eq!(d["bytes"], "héllo 中".len());
    assert_eq!(d["path"], "dir/new.txt");
    assert_eq!(d["version"], w.read("dir/new.txt")["version"]);
    assert_eq!(w.text("dir/new.txt"), "héllo 中");
    // Its own write refreshed the state: a second write needs no read.
    w.ok(
        "write_file",
        json!({"path": "dir/new.txt", "content": "again"}),
    );
    assert_eq!(w.text("dir/new.txt"), "again");
}

#[test]
fn unread_existing_file_is_refused_with_the_fix() {
    let mut w = Ws::start();
    w.put("a.txt", "old");
    let (code, msg) = w.err("write_file", json!({"path": "a.txt", "content": "new"}));
    assert_eq!(code, "not_read");
    assert!(
        msg.contains("read it first, then write with the read version"),
        "{msg}"
    );
    let (code, _) = w.err(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"oldText": "old", "newText": "new"}]}),
    );
    assert_eq!(code, "not_read");
    assert_eq!(w.text("a.txt"), "old");
    // An explicit, matching token is enough.
    let v = w.read("a.txt")["version"].clone();
    let mut other = Ws::start();
    other.put("a.txt", "old");
    other.ok(
        "write_file",
        json!({"path": "a.txt", "content": "new", "expectedVersion": v}),
    );
    assert_eq!(other.text("a.txt"), "new");
}

#[test]
fn the_gate_can_be_turned_off() {
    let mut w = Ws::with_env(vec![("OUTRIGGER_REQUIRE_READ_BEFORE_WRITE", "0")]);
    w.put("a.txt", "old");
    w.ok("write_file", json!({"path": "a.txt", "content": "new"}));
    assert_eq!(w.text("a.txt"), "new");
}

#[test]
fn explicit_token_mismatch_is_a_conflict() {
    let mut w = Ws::start();
    w.put("a.txt", "one");
    w.read("a.txt");
    let stale = "0".repeat(64);
    let (code, msg) = w.err(
        "write_file",
        json!({"path": "a.txt", "content": "two", "expectedVersion": stale}),
    );
    assert_eq!(code, "conflict");
    assert!(
        msg.contains("a.txt") && msg.contains("read it again"),
        "{msg}"
    );
    let (code, _) = w.err(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"oldText": "one", "newText": "two"}], "expectedVersion": stale}),
    );
    assert_eq!(code, "conflict");
    assert_eq!(w.text("a.txt"), "one");
}

#[test]
fn external_modification_is_a_conflict_until_reread() {
    let mut w = Ws::start();
    w.put("a.txt", "one\n");
    w.read("a.txt");
    w.put("a.txt", "changed by someone else\n");
    let (code, msg) = w.err("write_file", json!({"path": "a.txt", "content": "mine\n"}));
    assert_eq!(code, "conflict");
    assert!(msg.contains("modified since"), "{msg}");
    let (code, _) = w.err(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"oldText": "changed", "newText": "x"}]}),
    );
    assert_eq!(code, "conflict");
    assert_eq!(w.text("a.txt"), "changed by someone else\n");
    w.read("a.txt");
    w.ok("write_file", json!({"path": "a.txt", "content": "mine\n"}));
    assert_eq!(w.text("a.txt"), "mine\n");
}

#[test]
fn identical_content_touch_is_not_a_conflict() {
    let mut w = Ws::start();
    w.put("a.txt", "same\n");
    w.read("a.txt");
    // Rewrite the same bytes and move the mtime.
    w.put("a.txt", "same\n");
    let f = fs::File::options().write(true).open(w.p("a.txt")).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .unwrap();
    drop(f);
    w.ok("write_file", json!({"path": "a.txt", "content": "new\n"}));
    assert_eq!(w.text("a.txt"), "new\n");
}

#[test]
fn a_file_deleted_since_the_read_is_a_plain_create() {
    let mut w = Ws::start();
    w.put("a.txt", "one");
    w.read("a.txt");
    fs::remove_file(w.p("a.txt")).unwrap();
    let d = w.ok("write_file", json!({"path": "a.txt", "content": "two"}));
    assert_eq!(d["created"], true);
    assert_eq!(w.text("a.txt"), "two");
}

#[test]
fn partial_read_refuses_a_blind_overwrite_but_allows_an_edit() {
    let mut w = Ws::start();
    let text: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
    w.put("a.txt", &text);
    assert_eq!(w.read("a.txt")["partial"], true);
    let (code, msg) = w.err(
        "write_file",
        json!({"path": "a.txt", "content": text.clone()}),
    );
    assert_eq!(code, "partial_view");
    assert!(msg.contains("part of it"), "{msg}");
    let d = w.ok(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"oldText": "line 5\n", "newText": "line five\n"}]}),
    );
    assert_eq!(d["applied"], 1);
    assert!(w.text("a.txt").contains("line five\n"));
    // The own edit cleared the flag: a full write now goes through.
    w.ok(
        "write_file",
        json!({"path": "a.txt", "content": text.clone()}),
    );
    // A full read clears it too.
    w.read("a.txt");
    w.ok("read_file", json!({"path": "a.txt", "limit": 5000}));
    w.ok("write_file", json!({"path": "a.txt", "content": text}));
}

#[test]
fn truncation_guard_refuses_shrinking_a_big_file() {
    let mut w = Ws::start();
    let text = big_text(10_000);
    w.put("big.txt", &text);
    w.ok("read_file", json!({"path": "big.txt", "limit": 100000}));
    let (code, msg) = w.err("write_file", json!({"path": "big.txt", "content": "tiny"}));
    assert_eq!(code, "truncation_guard");
    assert!(
        msg.contains(&format!("Refusing to overwrite {}-byte", text.len()))
            && msg.contains("with 4 bytes"),
        "{msg}"
    );
    assert_eq!(w.text("big.txt"), text);
    // A quarter of it is allowed.
    let quarter = "q".repeat(text.len() / 4);
    w.ok("write_file", json!({"path": "big.txt", "content": quarter}));
    // Small files are not guarded.
    w.put("small.txt", "x".repeat(8000));
    w.read("small.txt");
    w.ok("write_file", json!({"path": "small.txt", "content": ""}));
}

#[test]
fn sessions_have_separate_read_state() {
    let mut w = Ws::start();
    w.put("a.txt", "one");
    w.session = Some("s1".into());
    w.read("a.txt");
    w.session = Some("s2".into());
    assert_eq!(
        w.err("write_file", json!({"path": "a.txt", "content": "x"}))
            .0,
        "not_read"
    );
    w.session = Some("s1".into());
    w.ok("write_file", json!({"path": "a.txt", "content": "x"}));
}

// ---------------------------------------------------------------------------------------------
// Atomic writes
// ---------------------------------------------------------------------------------------------

#[test]
fn writes_keep_mode_bits() {
    let mut w = Ws::start();
    let p = w.put("run.sh", "#!/bin/sh\necho hi\n");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o750)).unwrap();
    w.read("run.sh");
    w.ok(
        "write_file",
        json!({"path": "run.sh", "content": "#!/bin/sh\necho bye\n"}),
    );
    assert_eq!(
        fs::metadata(&p).unwrap().permissions().mode() & 0o7777,
        0o750
    );
    w.ok(
        "edit_file",
        json!({"path": "run.sh", "edits": [{"oldText": "bye", "newText": "ciao"}]}),
    );
    assert_eq!(
        fs::metadata(&p).unwrap().permissions().mode() & 0o7777,
        0o750
    );
    assert_eq!(w.text("run.sh"), "#!/bin/sh\necho ciao\n");
}

#[test]
fn a_failed_write_leaves_the_target_and_no_temp_file() {
    let mut w = Ws::with_env(vec![("OUTRIGGER_DEBUG_FAIL_RENAME", "target.txt")]);
    w.put("target.txt", "original");
    w.read("target.txt");
    let (code, msg) = w.err(
        "write_file",
        json!({"path": "target.txt", "content": "new"}),
    );
    assert_eq!(code, "io");
    assert!(
        msg.contains("target.txt") && msg.contains("renaming"),
        "{msg}"
    );
    assert_eq!(w.text("target.txt"), "original");
    assert_eq!(files_in(w.root()), vec!["target.txt"]);
    let (code, _) = w.err(
        "edit_file",
        json!({"path": "target.txt", "edits": [{"oldText": "original", "newText": "x"}]}),
    );
    assert_eq!(code, "io");
    assert_eq!(files_in(w.root()), vec!["target.txt"]);
    // A new file that fails is not created at all.
    let mut n = Ws::with_env(vec![("OUTRIGGER_DEBUG_FAIL_RENAME", "target.txt")]);
    n.err(
        "write_file",
        json!({"path": "target.txt", "content": "new"}),
    );
    assert!(files_in(n.root()).is_empty(), "{:?}", files_in(n.root()));
}

#[test]
fn a_write_into_a_read_only_directory_fails_cleanly() {
    // Root ignores directory permissions; the injected-failure test covers cleanup there.
    if nix::unistd::geteuid().is_root() {
        return;
    }
    let mut w = Ws::start();
    w.put("ro/a.txt", "a");
    w.read("ro/a.txt");
    fs::set_permissions(w.p("ro"), fs::Permissions::from_mode(0o555)).unwrap();
    let (code, _) = w.err("write_file", json!({"path": "ro/a.txt", "content": "b"}));
    fs::set_permissions(w.p("ro"), fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(code, "io");
    assert_eq!(files_in(&w.p("ro")), vec!["a.txt"]);
    assert_eq!(w.text("ro/a.txt"), "a");
}

// ---------------------------------------------------------------------------------------------
// edit_file
// ---------------------------------------------------------------------------------------------

#[test]
fn edit_levels_results_and_error_codes() {
    let mut w = Ws::start();
    w.put(
        "code.py",
        "def f():\n    x = 1\n    return x\n\nprint(“hi”)\nprint(“hi”)\n",
    );
    w.read("code.py");
    // exact
    let d = w.ok(
        "edit_file",
        json!({"path": "code.py", "edits": [{"oldText": "x = 1", "newText": "x = 2"}]}),
    );
    assert_eq!(
        d["matches"],
        json!([{"level": "exact", "startLine": 1, "oldLineCount": 1}])
    );
    assert_eq!(d["applied"], 1);
    assert!(
        d["diff"]
            .as_str()
            .unwrap()
            .starts_with("--- a/code.py\n+++ b/code.py\n")
    );
    assert!(
        d["diff"]
            .as_str()
            .unwrap()
            .contains("-    x = 1\n+    x = 2\n")
    );
    assert_eq!(d["version"], w.read("code.py")["version"]);
    // trim
    let d = w.ok(
        "edit_file",
        json!({"path": "code.py", "edits": [{"oldText": "x = 2\nreturn x", "newText": "return 2"}]}),
    );
    assert_eq!(d["matches"][0]["level"], "trim");
    assert_eq!(d["matches"][0]["oldLineCount"], 2);
    assert!(w.text("code.py").starts_with("def f():\nreturn 2\n\n"));
    // ambiguous (the curly-quoted line appears twice), then unicode via replaceAll-free unique text
    let (code, msg) = w.err(
        "edit_file",
        json!({"path": "code.py", "edits": [{"oldText": "print(\"hi\")", "newText": "x"}]}),
    );
    assert_eq!(code, "ambiguous");
    assert!(msg.contains("2 places"), "{msg}");
    let d = w.ok(
        "edit_file",
        json!({"path": "code.py", "edits": [{"oldText": "print(\"hi\")\nprint(\"hi\")", "newText": "print('bye')"}]}),
    );
    assert_eq!(d["matches"][0]["level"], "unicode");
    assert!(w.text("code.py").ends_with("\nprint('bye')\n"));
    // replaceAll
    w.put("r.txt", "a-a-a");
    w.read("r.txt");
    let d = w.ok(
        "edit_file",
        json!({"path": "r.txt", "edits": [{"oldText": "a", "newText": "b"}], "replaceAll": true}),
    );
    assert_eq!(d["matches"].as_array().unwrap().len(), 3);
    assert_eq!(w.text("r.txt"), "b-b-b");
    // error codes, none of which changes the file
    let cases = [
        (json!([]), "no_edits"),
        (json!([{"oldText": "", "newText": "x"}]), "empty_old"),
        (json!([{"oldText": "zzz", "newText": "x"}]), "not_found"),
        (json!([{"oldText": "b", "newText": "x"}]), "ambiguous"),
        (
            json!([{"oldText": "b-b", "newText": "x"}, {"oldText": "-b-", "newText": "y"}]),
            "ambiguous",
        ),
        (
            json!([{"oldText": "b-b-", "newText": "x"}, {"oldText": "-b-b", "newText": "y"}]),
            "overlap",
        ),
    ];
    for (edits, want) in cases {
        let (code, msg) = w.err("edit_file", json!({"path": "r.txt", "edits": edits}));
        assert_eq!(code, want, "{edits}: {msg}");
        assert!(msg.contains("r.txt") || want == "no_edits", "{msg}");
    }
    assert_eq!(w.text("r.txt"), "b-b-b");
    assert_eq!(
        w.err(
            "edit_file",
            json!({"path": "nope.txt", "edits": [{"oldText": "a", "newText": "b"}]})
        )
        .0,
        "not_found"
    );
}

// ---------------------------------------------------------------------------------------------
// apply_patch
// ---------------------------------------------------------------------------------------------

#[test]
fn apply_patch_changes_every_file_and_reports_versions() {
    let mut w = Ws::start();
    w.put("a.txt", "alpha\n");
    w.put("b.txt", "beta\n");
    w.read("a.txt");
    w.read("b.txt");
    let d = w.ok(
        "apply_patch",
        json!({"patches": [
            {"path": "a.txt", "edits": [{"oldText": "alpha", "newText": "ALPHA"}]},
            {"path": "b.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}
        ]}),
    );
    assert_eq!(d["filesChanged"], json!(["a.txt", "b.txt"]));
    assert_eq!(w.text("a.txt"), "ALPHA\n");
    assert_eq!(w.text("b.txt"), "BETA\n");
    assert_eq!(d["versions"]["a.txt"], w.read("a.txt")["version"]);
    assert_eq!(d["versions"]["b.txt"], w.read("b.txt")["version"]);
    assert_eq!(d["diffs"][0]["path"], "a.txt");
    assert!(d["diffs"][1]["diff"].as_str().unwrap().contains("+BETA"));
}

#[test]
fn apply_patch_lists_changed_paths_in_patch_order() {
    let mut w = Ws::start();
    w.put("z.txt", "zulu\n");
    w.put("a.txt", "alpha\n");
    w.put("m.txt", "mike\n");
    for f in ["z.txt", "a.txt", "m.txt"] {
        w.read(f);
    }
    // z then a (an edit that changes nothing) then m: a is not listed, z stays before m.
    let d = w.ok(
        "apply_patch",
        json!({"patches": [
            {"path": "z.txt", "edits": [{"oldText": "zulu", "newText": "ZULU"}]},
            {"path": "a.txt", "edits": [{"oldText": "alpha", "newText": "alpha"}]},
            {"path": "m.txt", "edits": [{"oldText": "mike", "newText": "MIKE"}]}
        ]}),
    );
    assert_eq!(d["filesChanged"], json!(["z.txt", "m.txt"]), "{d}");
    assert_eq!(w.text("z.txt"), "ZULU\n");
    assert_eq!(w.text("a.txt"), "alpha\n");
    assert_eq!(w.text("m.txt"), "MIKE\n");
    assert_eq!(d["diffs"].as_array().unwrap().len(), 3, "{d}");
}

#[test]
fn apply_patch_plans_everything_before_writing() {
    let mut w = Ws::start();
    w.put("a.txt", "alpha\n");
    w.put("b.txt", "beta\n");
    w.read("a.txt");
    w.read("b.txt");
    let (code, msg) = w.err(
        "apply_patch",
        json!({"patches": [
            {"path": "a.txt", "edits": [{"oldText": "alpha", "newText": "ALPHA"}]},
            {"path": "b.txt", "edits": [{"oldText": "gamma", "newText": "GAMMA"}]}
        ]}),
    );
    assert_eq!(code, "not_found");
    assert!(
        msg.contains("b.txt") && msg.contains("no file was changed"),
        "{msg}"
    );
    assert_eq!(w.text("a.txt"), "alpha\n");
}

#[test]
fn apply_patch_rolls_back_when_a_later_write_fails() {
    let mut w = Ws::with_env(vec![("OUTRIGGER_DEBUG_FAIL_RENAME", "b.txt")]);
    w.put("a.txt", "alpha\n");
    w.put("b.txt", "beta\n");
    fs::set_permissions(w.p("a.txt"), fs::Permissions::from_mode(0o640)).unwrap();
    w.read("a.txt");
    w.read("b.txt");
    let (code, msg) = w.err(
        "apply_patch",
        json!({"patches": [
            {"path": "a.txt", "edits": [{"oldText": "alpha", "newText": "ALPHA"}]},
            {"path": "b.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}
        ]}),
    );
    assert_eq!(code, "write_failed");
    assert!(msg.contains("rolled back 1 file"), "{msg}");
    assert_eq!(w.text("a.txt"), "alpha\n");
    assert_eq!(w.text("b.txt"), "beta\n");
    assert_eq!(
        fs::metadata(w.p("a.txt")).unwrap().permissions().mode() & 0o7777,
        0o640
    );
    assert_eq!(files_in(w.root()), vec!["a.txt", "b.txt"]);
}

#[test]
fn a_binary_file_can_be_replaced_with_its_version() {
    let mut w = Ws::start();
    w.put("blob.bin", b"\x00\x01\xff");
    // read_file refuses it, so the only way in is an explicit token; a stale one conflicts and
    // names the current version.
    let v = "0".repeat(64);
    let (code, _) = w.err(
        "write_file",
        json!({"path": "blob.bin", "content": "text", "expectedVersion": v}),
    );
    assert_eq!(code, "conflict");
    let r = w.invoke(
        "write_file",
        json!({"path": "blob.bin", "content": "text", "expectedVersion": v}),
    );
    let now = r["data"]["currentVersion"].as_str().unwrap().to_string();
    assert_eq!(
        now,
        "26a66b061e8f48f39927c312f25293959729eee95978e2892d49d3512a5cc092"
    );
    w.ok(
        "write_file",
        json!({"path": "blob.bin", "content": "text", "expectedVersion": now}),
    );
    assert_eq!(w.text("blob.bin"), "text");
}

#[test]
fn a_multi_megabyte_file_pages_and_hashes_whole() {
    use sha2::Digest;
    let mut w = Ws::start();
    let text: String = (1..=100_000)
        .map(|i| format!("line number {i} 中文\n"))
        .collect();
    assert!(text.len() > 2 << 20);
    w.put("big.txt", &text);
    let d = w.ok(
        "read_file",
        json!({"path": "big.txt", "offset": 50_000, "limit": 2}),
    );
    assert_eq!(
        d["content"],
        "line number 50000 中文\nline number 50001 中文\n"
    );
    assert_eq!(d["totalLines"], 100_000);
    assert_eq!(
        d["version"],
        hex::encode(sha2::Sha256::digest(text.as_bytes()))
    );
    // Non-UTF-8 past the first page is still refused (the whole file is checked).
    let mut bad = text.into_bytes();
    bad.push(0xff);
    w.put("bad.txt", &bad);
    assert_eq!(w.err("read_file", json!({"path": "bad.txt"})).0, "not_utf8");
}
