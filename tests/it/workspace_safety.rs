//! Issue 12, over the pipes: a killed `write_file` leaves nothing glob, grep or ls show (and
//! its temp file does not outlive the next write), and a workspace is never `/`, nor a
//! dock-started app's working directory (`/` or `$HOME`) by default.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::sigkill;
use crate::common::{Opts, Sidecar};
use serde_json::{Value, json};

fn invoke(s: &mut Sidecar, cwd: Option<&Path>, name: &str, args: Value) -> Value {
    let mut params = json!({"name": name, "arguments": args});
    if let Some(cwd) = cwd {
        params["context"] = json!({"cwd": cwd});
    }
    s.call("tool.invoke", params)
}

/// The `data` of a successful tool call.
fn ok(s: &mut Sidecar, cwd: &Path, name: &str, args: Value) -> Value {
    let r = invoke(s, Some(cwd), name, args.clone());
    assert_eq!(r["result"]["success"], true, "{name} {args}: {r}");
    r["result"]["data"].clone()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Whether the process holds a file under `dir` open (the write's temp file: named, or an
/// `O_TMPFILE` shown as `dir/#N (deleted)`); the directory itself does not count.
fn has_file_open_under(pid: i32, dir: &Path) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .filter_map(|e| fs::read_link(e.path()).ok())
        .any(|l| l.starts_with(dir) && l != dir)
}

/// Sends a large `write_file` and SIGKILLs the sidecar while the file is being written.
/// Returns whether the kill landed mid-write (the write can win the race; the caller retries).
fn kill_mid_write(root: &Path, name: &str, content: &str) -> bool {
    let mut s = Sidecar::start();
    s.send(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "tool.invoke",
        "params": {"name": "write_file", "arguments": {"path": name, "content": content},
                   "context": {"cwd": root}},
    }));
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if has_file_open_under(s.pid(), root) {
            sigkill(&mut s);
            return true;
        }
        // The answer came first: the whole write finished before it could be caught.
        if s.next_frame(Duration::from_millis(1)).is_some() {
            return false;
        }
    }
    panic!("write_file neither opened a file under {root:?} nor answered");
}

#[test]
fn sigkill_during_a_large_write_file_leaves_no_visible_temp_file() {
    let ws = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(ws.path()).unwrap();
    // What a writer killed before this change (or on a filesystem without O_TMPFILE) leaves:
    // a named temp file of a process that no longer exists (a pid above any pid_max).
    let stale = ".outrigger-999999999-0.tmp";
    fs::write(root.join(stale), "needle in a stale temp file\n").unwrap();
    let content = "needle in a large file being written\n".repeat(1 << 20); // 37 MiB
    let mut caught = None;
    for attempt in 0..5 {
        let name = format!("big-{attempt}.txt");
        if kill_mid_write(&root, &name, &content) {
            caught = Some(name);
            break;
        }
    }
    let big = caught.expect("no attempt caught write_file mid-write");

    let mut s = Sidecar::start();
    // The target is whole or absent, never torn.
    if let Ok(meta) = fs::metadata(root.join(&big)) {
        assert_eq!(meta.len() as usize, content.len());
    }
    let shown = [
        ok(&mut s, &root, "glob", json!({"pattern": "**/*"})),
        ok(&mut s, &root, "ls", json!({})),
        ok(
            &mut s,
            &root,
            "grep",
            json!({"pattern": "needle", "outputMode": "files_with_matches"}),
        ),
    ];
    for data in &shown {
        assert!(!data.to_string().contains(".outrigger-"), "{data}");
    }
    // The next write into the directory removes what a dead writer left.
    ok(
        &mut s,
        &root,
        "write_file",
        json!({"path": "small.txt", "content": "x\n"}),
    );
    let left = names_in(&root);
    assert!(
        left.iter().all(|n| !n.starts_with(".outrigger-")),
        "{left:?}"
    );
    assert!(left.contains(&"small.txt".to_string()), "{left:?}");
}

#[test]
fn a_write_keeps_mode_bits_and_replaces_atomically_with_no_temp_name_left() {
    use std::os::unix::fs::PermissionsExt;
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    let p = root.join("run.sh");
    fs::write(&p, "#!/bin/sh\necho a\n").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o751)).unwrap();
    let ino_before = std::os::unix::fs::MetadataExt::ino(&fs::metadata(&p).unwrap());
    let mut s = Sidecar::start();
    ok(&mut s, root, "read_file", json!({"path": "run.sh"}));
    ok(
        &mut s,
        root,
        "write_file",
        json!({"path": "run.sh", "content": "#!/bin/sh\necho b\n"}),
    );
    let meta = fs::metadata(&p).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o751);
    // Replaced by a new inode (renamed over), not rewritten in place.
    assert_ne!(std::os::unix::fs::MetadataExt::ino(&meta), ino_before);
    assert_eq!(fs::read_to_string(&p).unwrap(), "#!/bin/sh\necho b\n");
    ok(
        &mut s,
        root,
        "write_file",
        json!({"path": "d/new.txt", "content": "n"}),
    );
    assert_eq!(names_in(root), ["d", "run.sh"]);
    assert_eq!(names_in(&root.join("d")), ["new.txt"]);
}

/// A sidecar whose working directory is `dir` and whose `$HOME` is `home`.
fn started_in(dir: &Path, home: tempfile::TempDir, env: Vec<(String, String)>) -> Sidecar {
    Sidecar::start_with(Opts {
        cwd: Some(dir.to_path_buf()),
        home: Some(home),
        env,
        ..Default::default()
    })
}

fn assert_names_every_fix(msg: &str) {
    for fix in ["context.cwd", "cwd (agent.chat.stream)", "workspace_root"] {
        assert!(msg.contains(fix), "{fix} not named: {msg}");
    }
}

#[test]
fn slash_is_never_a_workspace() {
    let mut s = started_in(Path::new("/"), tempfile::tempdir().unwrap(), vec![]);
    // No context.cwd: the process's working directory `/` is refused, naming the fixes.
    let r = invoke(
        &mut s,
        None,
        "write_file",
        json!({"path": "tmp/outrigger-should-not-exist.txt", "content": "x"}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains("working directory is /"), "{msg}");
    assert_names_every_fix(msg);
    assert!(!Path::new("/tmp/outrigger-should-not-exist.txt").exists());
    // Reads are refused too: the workspace is undecided, whatever the tool.
    let r = invoke(&mut s, None, "ls", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // `/` named explicitly, or through `..` or a link, is refused as well.
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/", d.path().join("slash")).unwrap();
    for cwd in [
        PathBuf::from("/"),
        d.path().join("../../../../../../../.."),
        d.path().join("slash"),
    ] {
        let r = invoke(
            &mut s,
            Some(&cwd),
            "write_file",
            json!({"path": "x.txt", "content": "x"}),
        );
        assert_eq!(r["error"]["code"], -32602, "{cwd:?}: {r}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("context.cwd is") && msg.contains("which is /"),
            "{msg}"
        );
    }
    // The chat's `cwd: "/"` is refused before the turn starts.
    let r = s.call(
        "agent.chat.stream",
        json!({"provider": "scripted", "model": "m", "script": [{"text": "hi"}],
               "messages": [{"role": "user", "content": "hi"}], "cwd": "/"}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("cwd is /") && msg.contains("which is /"),
        "{msg}"
    );
    // A named project directory works from the same process.
    ok(
        &mut s,
        d.path(),
        "write_file",
        json!({"path": "x.txt", "content": "x"}),
    );
}

#[test]
fn a_chat_without_cwd_in_a_dock_started_process_is_refused() {
    let mut s = started_in(Path::new("/"), tempfile::tempdir().unwrap(), vec![]);
    let r = s.call(
        "agent.chat.stream",
        json!({"provider": "scripted", "model": "m", "script": [{"text": "hi"}],
               "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains("working directory is /"), "{msg}");
    assert_names_every_fix(msg);
}

#[test]
fn home_as_the_process_directory_is_refused_and_workspace_root_is_used() {
    let home = tempfile::tempdir().unwrap();
    let home_path = home.path().to_path_buf();
    let mut s = started_in(&home_path, home, vec![]);
    let r = invoke(
        &mut s,
        None,
        "write_file",
        json!({"path": "x.txt", "content": "x"}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains("home directory"), "{msg}");
    assert_names_every_fix(msg);
    assert!(!home_path.join("x.txt").exists());
    // Naming home explicitly is the caller's choice and works.
    ok(
        &mut s,
        &home_path,
        "write_file",
        json!({"path": "named.txt", "content": "x"}),
    );
    drop(s);

    // Config `workspace_root` is the workspace of calls that name none.
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut s = started_in(
        Path::new("/"),
        home,
        vec![(
            "OUTRIGGER_WORKSPACE_ROOT".into(),
            ws.path().display().to_string(),
        )],
    );
    let r = invoke(
        &mut s,
        None,
        "write_file",
        json!({"path": "via-config.txt", "content": "c"}),
    );
    assert_eq!(r["result"]["success"], true, "{r}");
    assert_eq!(
        fs::read_to_string(ws.path().join("via-config.txt")).unwrap(),
        "c"
    );
    // …and `/` there is refused, naming the key.
    drop(s);
    let mut s = started_in(
        Path::new("/"),
        tempfile::tempdir().unwrap(),
        vec![("OUTRIGGER_WORKSPACE_ROOT".into(), "/".into())],
    );
    let r = invoke(
        &mut s,
        None,
        "write_file",
        json!({"path": "x.txt", "content": "x"}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains("config workspace_root is /"), "{msg}");
}
