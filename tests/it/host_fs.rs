//! `hostFs` of `agent.chat.stream` over the real binary's pipes, the test acting as the host
//! (an editor with buffers): under `hostFs.read` the file tools take a file's text from the
//! reverse `fs.read_text`, under `hostFs.write` they hand it to `fs.write_text`, and every
//! check on the disk path (containment, blocked paths, size, read-before-write on the sha256
//! of the host's text, the truncation guard) still comes first (docs/protocol.md, "Reverse
//! requests").

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sha2::Digest;

use crate::common::{Opts, Sidecar};
use crate::support::chat_helpers::*;
use crate::support::host::*;
use serde_json::{Value, json};

/// A workspace directory, canonical: `fs.read_text` names the absolute (real) path.
struct Ws {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Ws {
    fn new() -> Ws {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        Ws { _tmp: tmp, root }
    }

    fn p(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// The absolute path the host is asked about.
    fn abs(&self, name: &str) -> String {
        self.p(name).display().to_string()
    }

    fn put(&self, name: &str, bytes: impl AsRef<[u8]>) {
        let p = self.p(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(p, bytes).unwrap();
    }

    /// The file's text on disk (`None`: it does not exist).
    fn disk(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.p(name)).ok()
    }
}

fn sha(text: &str) -> String {
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// One scripted model turn calling one tool.
fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"toolCalls": [{"id": id, "name": name, "arguments": arguments}]})
}

/// A scripted turn on `ws`, its record (and chat) `record`, with `hostFs` when not null.
fn turn(script: Value, ws: &Ws, record: &str, host_fs: Value) -> Value {
    let mut p = merge(
        scripted(script, "work on the files"),
        json!({"cwd": ws.root, "chatId": record}),
    );
    if !host_fs.is_null() {
        p["hostFs"] = host_fs;
    }
    p
}

/// The host as an editor: a buffer per absolute path. `fs.read_text` answers the buffer (an
/// error when there is none), `fs.write_text` replaces it and answers `null`;
/// `read_replies` (in order, before the buffer) and `write_errors` override the answers for
/// a path.
#[derive(Default)]
struct Editor {
    buffers: HashMap<String, String>,
    read_replies: HashMap<String, Vec<Reply>>,
    write_errors: HashMap<String, (i64, String)>,
}

impl Editor {
    fn with(buffers: &[(String, &str)]) -> Editor {
        Editor {
            buffers: buffers
                .iter()
                .map(|(p, t)| (p.clone(), t.to_string()))
                .collect(),
            ..Editor::default()
        }
    }

    fn answer(&mut self, req: &Value) -> Reply {
        let path = req["params"]["path"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match req["method"].as_str() {
            Some("fs.read_text") => {
                if let Some(queue) = self.read_replies.get_mut(&path)
                    && !queue.is_empty()
                {
                    return queue.remove(0);
                }
                match self.buffers.get(&path) {
                    Some(t) => Reply::Result(json!({"content": t})),
                    None => Reply::Error(-32000, format!("no buffer for {path}")),
                }
            }
            Some("fs.write_text") => {
                if let Some((c, m)) = self.write_errors.get(&path) {
                    return Reply::Error(*c, m.clone());
                }
                let content = req["params"]["content"].as_str().unwrap().to_string();
                self.buffers.insert(path, content);
                Reply::Result(Value::Null)
            }
            _ => Reply::Error(-32601, "Method not found".into()),
        }
    }
}

/// Runs a turn to its end with `ed` answering the host requests.
fn run_with(s: &mut Sidecar, params: Value, ed: &mut Editor) -> (Streamed, Vec<Value>) {
    let id = start(s, params);
    drive(s, &id, |r| ed.answer(r))
}

/// The `fs.*` requests among `reqs`, as `(method, params)`.
fn fs_reqs(reqs: &[Value]) -> Vec<(String, Value)> {
    reqs.iter()
        .filter(|r| r["method"].as_str().is_some_and(|m| m.starts_with("fs.")))
        .map(|r| {
            (
                r["method"].as_str().unwrap().to_string(),
                r["params"].clone(),
            )
        })
        .collect()
}

fn methods(reqs: &[Value]) -> Vec<String> {
    reqs.iter()
        .map(|r| r["method"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The tool result body of call `id` in `record`.
fn body(s: &mut Sidecar, record: &str, id: &str) -> Value {
    tool_body(&messages(s, record), id)
}

/// Asserts call `id` failed with `data.code` `want`; returns its body.
fn failed(s: &mut Sidecar, record: &str, id: &str, want: &str) -> Value {
    let b = body(s, record, id);
    assert_eq!(b["success"], false, "{id}: {b}");
    assert_eq!(b["data"]["code"], want, "{id}: {b}");
    b
}

fn ok_body(s: &mut Sidecar, record: &str, id: &str) -> Value {
    let b = body(s, record, id);
    assert_eq!(b["success"], true, "{id}: {b}");
    b
}

// ---- reads -----------------------------------------------------------------------------

#[test]
fn read_file_under_host_read_returns_the_hosts_text_and_its_version() {
    let ws = Ws::new();
    ws.put("a.txt", "the disk's text\n");
    let host_text = "the editor's text\nwith an unsaved second line\n";
    let mut ed = Editor::with(&[(ws.abs("a.txt"), host_text)]);
    let mut s = Sidecar::start();
    let p = turn(
        json!([call("r1", "read_file", json!({"path": "a.txt"})), {"text": "read it"}]),
        &ws,
        "rec_hfs_read",
        json!({"read": true}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    assert_eq!(methods(&reqs), ["fs.read_text"], "{reqs:?}");
    let r = &reqs[0];
    assert!(r["id"].as_str().unwrap().starts_with("srv_"), "{r}");
    // The absolute path and the call's context: callId plus the turn's keys.
    let p = &r["params"];
    assert_eq!(p["path"], ws.abs("a.txt").as_str(), "{r}");
    let ctx = &p["context"];
    assert_eq!(ctx["callId"], "r1", "{r}");
    assert_eq!(ctx["streamId"], st.id.as_str(), "{r}");
    assert_eq!(ctx["chatId"], "rec_hfs_read", "{r}");
    assert_eq!(ctx["recordId"], "rec_hfs_read", "{r}");
    assert_eq!(ctx["round"], 0, "{r}");
    assert!(p.get("content").is_none(), "{r}");

    let b = ok_body(&mut s, "rec_hfs_read", "r1");
    let d = &b["data"];
    assert_eq!(d["content"], host_text, "{b}");
    assert_eq!(d["version"], sha(host_text), "{b}");
    assert_ne!(d["version"], sha("the disk's text\n"), "{b}");
    assert_eq!(d["totalLines"], 2, "{b}");
    assert_eq!(d["partial"], false, "{b}");
    assert_eq!(ws.disk("a.txt").as_deref(), Some("the disk's text\n"));
}

#[test]
fn fs_read_text_names_the_absolute_path_whatever_form_the_model_used() {
    let ws = Ws::new();
    ws.put("sub/b.txt", "disk b\n");
    let abs = ws.abs("sub/b.txt");
    let mut ed = Editor::with(&[(abs.clone(), "buffer b\n")]);
    let mut s = Sidecar::start();
    let p = turn(
        json!([
            call("r1", "read_file", json!({"path": "sub/b.txt"})),
            call("r2", "read_file", json!({"path": "./sub/../sub/b.txt"})),
            call("r3", "read_file", json!({"path": abs})),
            {"text": "done"}
        ]),
        &ws,
        "rec_hfs_paths",
        json!({"read": true, "write": false}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    let fs = fs_reqs(&reqs);
    assert_eq!(fs.len(), 3, "{reqs:?}");
    for ((m, p), call) in fs.iter().zip(["r1", "r2", "r3"]) {
        assert_eq!(m, "fs.read_text");
        assert_eq!(p["path"], abs.as_str(), "{call}: {p}");
        assert_eq!(p["context"]["callId"], call, "{p}");
    }
    // Each round is a new round number in the context.
    let rounds: Vec<i64> = fs
        .iter()
        .map(|(_, p)| p["context"]["round"].as_i64().unwrap())
        .collect();
    assert_eq!(rounds, [0, 1, 2], "{reqs:?}");
    for id in ["r1", "r2", "r3"] {
        assert_eq!(
            ok_body(&mut s, "rec_hfs_paths", id)["data"]["content"],
            "buffer b\n"
        );
    }
}

#[test]
fn refused_paths_never_reach_the_host() {
    let ws = Ws::new();
    let outside = Ws::new();
    outside.put("o.txt", "outside\n");
    ws.put("secret.txt", "a secret\n");
    ws.put("dir/inner.txt", "x\n");
    ws.put("ok.txt", "disk ok\n");
    let outside_name = outside.root.file_name().unwrap().to_str().unwrap();
    let escape = format!("../{outside_name}/o.txt");
    // Every path has a buffer: the host would answer, were it asked.
    let mut ed = Editor::with(&[
        (ws.abs("secret.txt"), "buffer secret\n"),
        (ws.abs("dir"), "buffer dir\n"),
        (
            ws.abs("missing.txt"),
            "buffer of a file only the editor has\n",
        ),
        (outside.abs("o.txt"), "buffer outside\n"),
        (ws.abs("ok.txt"), "buffer ok\n"),
    ]);
    let blocked = json!([ws.abs("secret.txt")]).to_string();
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_BLOCKED_PATHS".into(), blocked)],
        ..Opts::default()
    });
    let script = json!([
        {"toolCalls": [
            {"id": "blocked", "name": "read_file", "arguments": {"path": "secret.txt"}},
            {"id": "outside", "name": "read_file", "arguments": {"path": outside.abs("o.txt")}},
            {"id": "escape", "name": "read_file", "arguments": {"path": escape}},
            {"id": "missing", "name": "read_file", "arguments": {"path": "missing.txt"}},
            {"id": "dir", "name": "read_file", "arguments": {"path": "dir"}}
        ]},
        {"toolCalls": [
            {"id": "w_blocked", "name": "write_file", "arguments": {"path": "secret.txt", "content": "x"}},
            {"id": "w_outside", "name": "write_file", "arguments": {"path": outside.abs("new.txt"), "content": "x"}},
            {"id": "e_missing", "name": "edit_file", "arguments": {"path": "missing.txt",
                "edits": [{"oldText": "buffer", "newText": "b"}]}}
        ]},
        {"text": "refused"}
    ]);
    let p = turn(
        script,
        &ws,
        "rec_hfs_refused",
        json!({"read": true, "write": true}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    assert!(
        fs_reqs(&reqs).is_empty(),
        "a refused path reached the host: {reqs:?}"
    );
    let rec = "rec_hfs_refused";
    failed(&mut s, rec, "blocked", "path_blocked");
    failed(&mut s, rec, "outside", "path_escapes");
    failed(&mut s, rec, "escape", "path_escapes");
    // "a file that exists only as an unsaved buffer is not found".
    failed(&mut s, rec, "missing", "not_found");
    failed(&mut s, rec, "dir", "is_directory");
    failed(&mut s, rec, "w_blocked", "path_blocked");
    failed(&mut s, rec, "w_outside", "path_escapes");
    failed(&mut s, rec, "e_missing", "not_found");
    assert_eq!(ws.disk("secret.txt").as_deref(), Some("a secret\n"));
    assert!(!outside.p("new.txt").exists());
    assert!(!ws.p("missing.txt").exists());
}

/// docs/protocol.md: `fs.read_text` is sent "after the disk path passed containment,
/// blocked-path, size and text checks": a file that is binary or not UTF-8 on disk is
/// refused as such, without asking the host.
#[test]
fn a_binary_or_non_utf8_file_on_disk_is_refused_without_asking_the_host() {
    let ws = Ws::new();
    ws.put("blob.bin", b"PK\x03\x04\x00\x00binary\x00data");
    ws.put("latin1.txt", b"caf\xe9\n");
    let mut ed = Editor::with(&[
        (ws.abs("blob.bin"), "a text buffer\n"),
        (ws.abs("latin1.txt"), "café\n"),
    ]);
    let mut s = Sidecar::start();
    let p = turn(
        json!([
            {"toolCalls": [
                {"id": "bin", "name": "read_file", "arguments": {"path": "blob.bin"}},
                {"id": "l1", "name": "read_file", "arguments": {"path": "latin1.txt"}}
            ]},
            {"text": "done"}
        ]),
        &ws,
        "rec_hfs_binary",
        json!({"read": true}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    let bin = body(&mut s, "rec_hfs_binary", "bin");
    let l1 = body(&mut s, "rec_hfs_binary", "l1");
    assert!(
        fs_reqs(&reqs).is_empty(),
        "the host was asked for files that fail the disk's text checks: {reqs:?}\nbin: {bin}\nl1: {l1}"
    );
    assert_eq!(bin["data"]["code"], "binary", "{bin}");
    assert_eq!(l1["data"]["code"], "not_utf8", "{l1}");
}

/// An editor holds no buffer of a binary file, so `write_file` replacing one whole hashes the
/// disk's bytes for its version check instead of refusing the file as unreadable text; the
/// host is not asked to read it and gets the write.
#[test]
fn write_file_replaces_a_binary_file_under_host_read_from_its_disk_version() {
    let ws = Ws::new();
    let blob: &[u8] = b"PK\x03\x04\x00\x00binary\x00data";
    ws.put("blob.bin", blob);
    let version = hex::encode(sha2::Sha256::digest(blob));
    let mut ed = Editor::default();
    let mut s = Sidecar::start();
    let p = turn(
        json!([
            call(
                "stale",
                "write_file",
                json!({"path": "blob.bin", "content": "text now\n", "expectedVersion": sha("other")})
            ),
            call(
                "w1",
                "write_file",
                json!({"path": "blob.bin", "content": "text now\n", "expectedVersion": version})
            ),
            {"text": "done"}
        ]),
        &ws,
        "rec_hfs_replace_binary",
        json!({"read": true, "write": true}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    let rec = "rec_hfs_replace_binary";
    let stale = failed(&mut s, rec, "stale", "conflict");
    assert_eq!(stale["data"]["currentVersion"], version.as_str(), "{stale}");
    let b = ok_body(&mut s, rec, "w1");
    assert_eq!(b["data"]["created"], false, "{b}");
    assert_eq!(methods(&reqs), ["fs.write_text"], "{reqs:?}");
    assert_eq!(ed.buffers[&ws.abs("blob.bin")], "text now\n");
}

#[test]
fn size_limits_apply_to_the_disk_file_and_to_the_hosts_text() {
    let ws = Ws::new();
    ws.put("big_on_disk.txt", "x".repeat(4096));
    ws.put("small_on_disk.txt", "small\n");
    let big_buffer = "y".repeat(4096);
    let mut ed = Editor::with(&[
        (ws.abs("big_on_disk.txt"), "small buffer\n"),
        (ws.abs("small_on_disk.txt"), big_buffer.as_str()),
    ]);
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_MAX_READ_BYTES".into(), "1024".into())],
        ..Opts::default()
    });
    let p = turn(
        json!([
            call("big_disk", "read_file", json!({"path": "big_on_disk.txt"})),
            call("big_host", "read_file", json!({"path": "small_on_disk.txt"})),
            {"text": "done"}
        ]),
        &ws,
        "rec_hfs_size",
        json!({"read": true}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    // Too large on disk: refused before the host is asked. The host's text over the limit:
    // asked, then refused.
    let fs = fs_reqs(&reqs);
    assert_eq!(fs.len(), 1, "{reqs:?}");
    assert_eq!(fs[0].1["path"], ws.abs("small_on_disk.txt").as_str());
    failed(&mut s, "rec_hfs_size", "big_disk", "too_large");
    let b = failed(&mut s, "rec_hfs_size", "big_host", "too_large");
    assert!(b["error"].as_str().unwrap().contains("4096"), "{b}");
}

#[test]
fn host_read_failures_fail_the_call_with_io() {
    let ws = Ws::new();
    for f in ["err.txt", "nomethod.txt", "nocontent.txt", "notstring.txt"] {
        ws.put(f, "on disk\n");
    }
    let mut ed = Editor::default();
    ed.read_replies.insert(
        ws.abs("err.txt"),
        vec![Reply::Error(-32000, "buffer locked by the editor".into())],
    );
    ed.read_replies.insert(
        ws.abs("nomethod.txt"),
        vec![Reply::Error(-32601, "Method not found".into())],
    );
    ed.read_replies.insert(
        ws.abs("nocontent.txt"),
        vec![Reply::Result(json!({"text": "wrong key"}))],
    );
    ed.read_replies.insert(
        ws.abs("notstring.txt"),
        vec![Reply::Result(json!({"content": 42}))],
    );
    let mut s = Sidecar::start();
    let p = turn(
        json!([
            call("e1", "read_file", json!({"path": "err.txt"})),
            call("e2", "read_file", json!({"path": "nomethod.txt"})),
            call("e3", "read_file", json!({"path": "nocontent.txt"})),
            call("e4", "edit_file", json!({"path": "notstring.txt",
                "edits": [{"oldText": "on disk", "newText": "edited"}]})),
            {"text": "the editor misbehaved"}
        ]),
        &ws,
        "rec_hfs_readfail",
        json!({"read": true, "write": true}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    assert_eq!(
        methods(&reqs),
        ["fs.read_text"; 4],
        "no write after a failed read: {reqs:?}"
    );
    let rec = "rec_hfs_readfail";
    let b = failed(&mut s, rec, "e1", "io");
    let err = b["error"].as_str().unwrap();
    assert!(err.contains("buffer locked by the editor"), "{b}");
    assert!(
        err.contains("err.txt"),
        "the call's error names the file: {b}"
    );
    failed(&mut s, rec, "e2", "io");
    let b = failed(&mut s, rec, "e3", "io");
    assert!(b["error"].as_str().unwrap().contains("content"), "{b}");
    failed(&mut s, rec, "e4", "io");
    // The disk is never a fallback for a failed host read.
    assert_eq!(ws.disk("notstring.txt").as_deref(), Some("on disk\n"));
}

// ---- writes ------------------------------------------------------------------------------

#[test]
fn write_file_under_host_write_sends_the_whole_content_and_leaves_the_disk_alone() {
    let ws = Ws::new();
    ws.put("a.txt", "old on disk\n");
    let mut ed = Editor::default();
    let new_a = "brand new\ncontent for a\n";
    let new_file = "a file the editor creates\n";
    let mut s = Sidecar::start();
    let p = turn(
        json!([
            call("r1", "read_file", json!({"path": "a.txt"})),
            call("w1", "write_file", json!({"path": "a.txt", "content": new_a})),
            call("w2", "write_file", json!({"path": "sub/dir/new.txt", "content": new_file})),
            {"text": "written"}
        ]),
        &ws,
        "rec_hfs_write",
        json!({"write": true}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    // Reads come from the disk (hostFs.read is off); both writes go to the host.
    assert_eq!(
        methods(&reqs),
        ["fs.write_text", "fs.write_text"],
        "{reqs:?}"
    );
    let (w1, w2) = (&reqs[0]["params"], &reqs[1]["params"]);
    assert_eq!(w1["path"], ws.abs("a.txt").as_str(), "{w1}");
    assert_eq!(w1["content"], new_a, "{w1}");
    assert_eq!(w1["context"]["callId"], "w1", "{w1}");
    assert_eq!(w1["context"]["streamId"], st.id.as_str(), "{w1}");
    assert_eq!(w1["context"]["recordId"], "rec_hfs_write", "{w1}");
    assert_eq!(w1["context"]["round"], 1, "{w1}");
    assert_eq!(w2["path"], ws.abs("sub/dir/new.txt").as_str(), "{w2}");
    assert_eq!(w2["content"], new_file, "{w2}");
    assert_eq!(w2["context"]["callId"], "w2", "{w2}");

    let rec = "rec_hfs_write";
    assert_eq!(
        ok_body(&mut s, rec, "r1")["data"]["content"],
        "old on disk\n"
    );
    let b = ok_body(&mut s, rec, "w1");
    assert_eq!(b["data"]["version"], sha(new_a), "{b}");
    assert_eq!(b["data"]["bytes"], new_a.len(), "{b}");
    assert_eq!(b["data"]["created"], false, "{b}");
    let b = ok_body(&mut s, rec, "w2");
    assert_eq!(b["data"]["created"], true, "{b}");
    assert_eq!(b["data"]["version"], sha(new_file), "{b}");
    // Nothing on disk: the host creates files and directories.
    assert_eq!(ws.disk("a.txt").as_deref(), Some("old on disk\n"));
    assert!(
        !ws.p("sub").exists(),
        "the sidecar created the new file's directory"
    );
    assert_eq!(ed.buffers[&ws.abs("a.txt")], new_a);
    assert_eq!(ed.buffers[&ws.abs("sub/dir/new.txt")], new_file);
    // No temp file left behind in the workspace either.
    let names: Vec<String> = std::fs::read_dir(&ws.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["a.txt"], "{names:?}");
}

#[test]
fn edit_file_under_host_read_and_write_edits_the_hosts_text() {
    let ws = Ws::new();
    ws.put("notes.txt", "alpha\nsaved beta\n");
    let buffer = "alpha\nunsaved beta\nmore unsaved\n";
    let edited = "alpha\ngamma\nmore unsaved\n";
    let mut ed = Editor::with(&[(ws.abs("notes.txt"), buffer)]);
    let mut s = Sidecar::start();
    let p = turn(
        json!([
            call("r1", "read_file", json!({"path": "notes.txt"})),
            // "unsaved beta" is only in the editor's buffer.
            call("e1", "edit_file", json!({"path": "notes.txt",
                "edits": [{"oldText": "unsaved beta", "newText": "gamma"}]})),
            call("r2", "read_file", json!({"path": "notes.txt"})),
            {"text": "edited"}
        ]),
        &ws,
        "rec_hfs_edit",
        json!({"read": true, "write": true}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    let fs = fs_reqs(&reqs);
    let seen: Vec<(&str, &str)> = fs
        .iter()
        .map(|(m, p)| {
            (
                m.as_str(),
                p["context"]["callId"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("fs.read_text", "r1"),
            ("fs.read_text", "e1"),
            ("fs.write_text", "e1"),
            ("fs.read_text", "r2")
        ],
        "{reqs:?}"
    );
    assert_eq!(fs[2].1["path"], ws.abs("notes.txt").as_str());
    assert_eq!(fs[2].1["content"], edited, "the whole edited buffer");
    let rec = "rec_hfs_edit";
    let r1 = ok_body(&mut s, rec, "r1");
    assert_eq!(r1["data"]["version"], sha(buffer), "{r1}");
    let e1 = ok_body(&mut s, rec, "e1");
    assert_eq!(e1["data"]["version"], sha(edited), "{e1}");
    let diff = e1["data"]["diff"].as_str().unwrap();
    assert!(
        diff.contains("-unsaved beta") && diff.contains("+gamma"),
        "{diff}"
    );
    let r2 = ok_body(&mut s, rec, "r2");
    assert_eq!(r2["data"]["content"], edited, "{r2}");
    assert_eq!(r2["data"]["version"], sha(edited), "{r2}");
    assert_eq!(ws.disk("notes.txt").as_deref(), Some("alpha\nsaved beta\n"));
}

#[test]
fn apply_patch_under_host_fs_patches_the_hosts_buffers() {
    let ws = Ws::new();
    ws.put("a.txt", "a on disk\n");
    ws.put("b.txt", "b on disk\n");
    let mut ed = Editor::with(&[
        (ws.abs("a.txt"), "a in the editor\n"),
        (ws.abs("b.txt"), "b in the editor\n"),
    ]);
    let mut s = Sidecar::start();
    let p = turn(
        json!([
            {"toolCalls": [
                {"id": "ra", "name": "read_file", "arguments": {"path": "a.txt"}},
                {"id": "rb", "name": "read_file", "arguments": {"path": "b.txt"}}
            ]},
            call("p1", "apply_patch", json!({"patches": [
                {"path": "a.txt", "edits": [{"oldText": "a in the editor", "newText": "A patched"}]},
                {"path": "b.txt", "edits": [{"oldText": "b in the editor", "newText": "B patched"}]}
            ]})),
            {"text": "patched"}
        ]),
        &ws,
        "rec_hfs_patch",
        json!({"read": true, "write": true}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    let writes: Vec<(String, String)> = fs_reqs(&reqs)
        .into_iter()
        .filter(|(m, _)| m == "fs.write_text")
        .map(|(_, p)| {
            assert_eq!(p["context"]["callId"], "p1", "{p}");
            (
                p["path"].as_str().unwrap().to_string(),
                p["content"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        writes,
        [
            (ws.abs("a.txt"), "A patched\n".to_string()),
            (ws.abs("b.txt"), "B patched\n".to_string())
        ],
        "{reqs:?}"
    );
    let b = ok_body(&mut s, "rec_hfs_patch", "p1");
    assert_eq!(b["data"]["versions"]["a.txt"], sha("A patched\n"), "{b}");
    assert_eq!(ed.buffers[&ws.abs("a.txt")], "A patched\n");
    assert_eq!(ed.buffers[&ws.abs("b.txt")], "B patched\n");
    assert_eq!(ws.disk("a.txt").as_deref(), Some("a on disk\n"));
    assert_eq!(ws.disk("b.txt").as_deref(), Some("b on disk\n"));
}

#[test]
fn a_host_error_to_fs_write_text_fails_the_call_with_io_and_the_disk_is_untouched() {
    let ws = Ws::new();
    ws.put("notes.txt", "alpha\nsaved\n");
    let buffer = "alpha\nunsaved\n";
    let mut ed = Editor::with(&[(ws.abs("notes.txt"), buffer)]);
    for f in ["notes.txt", "fresh.txt"] {
        ed.write_errors
            .insert(ws.abs(f), (-32000, "the editor refused the write".into()));
    }
    let mut s = Sidecar::start();
    let p = turn(
        json!([
            call("r1", "read_file", json!({"path": "notes.txt"})),
            call("e1", "edit_file", json!({"path": "notes.txt",
                "edits": [{"oldText": "unsaved", "newText": "changed"}]})),
            call("w1", "write_file", json!({"path": "fresh.txt", "content": "new\n"})),
            call("w2", "write_file", json!({"path": "notes.txt", "content": "whole\n"})),
            {"text": "could not write"}
        ]),
        &ws,
        "rec_hfs_writefail",
        json!({"read": true, "write": true}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    let writes: Vec<String> = fs_reqs(&reqs)
        .into_iter()
        .filter(|(m, _)| m == "fs.write_text")
        .map(|(_, p)| p["context"]["callId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(writes, ["e1", "w1", "w2"], "{reqs:?}");
    let rec = "rec_hfs_writefail";
    for id in ["e1", "w1", "w2"] {
        let b = failed(&mut s, rec, id, "io");
        assert!(
            b["error"]
                .as_str()
                .unwrap()
                .contains("the editor refused the write"),
            "{id}: {b}"
        );
    }
    // Nothing was written on disk, and the buffer is what it was.
    assert_eq!(ws.disk("notes.txt").as_deref(), Some("alpha\nsaved\n"));
    assert!(!ws.p("fresh.txt").exists());
    assert_eq!(ed.buffers[&ws.abs("notes.txt")], buffer);
}

#[test]
fn read_before_write_versions_and_the_truncation_guard_use_the_hosts_text() {
    let ws = Ws::new();
    ws.put("unread.txt", "on disk\n");
    ws.put("changing.txt", "on disk\n");
    // Small on disk, large in the editor: the guard weighs the editor's text.
    ws.put("big.txt", "small\n");
    let big = "line of the editor's buffer\n".repeat(400);
    assert!(big.len() >= 8192);
    let mut ed = Editor::with(&[
        (ws.abs("unread.txt"), "unread buffer\n"),
        (ws.abs("changing.txt"), "second version\n"),
        (ws.abs("big.txt"), big.as_str()),
    ]);
    // The first read of changing.txt sees one text; the user types before the write.
    ed.read_replies.insert(
        ws.abs("changing.txt"),
        vec![Reply::Result(json!({"content": "first version\n"}))],
    );
    let mut s = Sidecar::start();
    let p = turn(
        json!([
            call("w_unread", "write_file", json!({"path": "unread.txt", "content": "x\n"})),
            call("r_changing", "read_file", json!({"path": "changing.txt"})),
            call("w_changing", "write_file", json!({"path": "changing.txt", "content": "y\n"})),
            call("e_changing", "edit_file", json!({"path": "changing.txt",
                "edits": [{"oldText": "second", "newText": "third"}]})),
            call("r_big", "read_file", json!({"path": "big.txt"})),
            call("w_big", "write_file", json!({"path": "big.txt", "content": "tiny\n"})),
            {"text": "refused"}
        ]),
        &ws,
        "rec_hfs_gate",
        json!({"read": true, "write": true}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    assert!(
        !methods(&reqs).iter().any(|m| m == "fs.write_text"),
        "a refused write reached the host: {reqs:?}"
    );
    let rec = "rec_hfs_gate";
    failed(&mut s, rec, "w_unread", "not_read");
    assert_eq!(
        ok_body(&mut s, rec, "r_changing")["data"]["version"],
        sha("first version\n")
    );
    let b = failed(&mut s, rec, "w_changing", "conflict");
    assert_eq!(b["data"]["currentVersion"], sha("second version\n"), "{b}");
    failed(&mut s, rec, "e_changing", "conflict");
    assert_eq!(ok_body(&mut s, rec, "r_big")["data"]["version"], sha(&big));
    failed(&mut s, rec, "w_big", "truncation_guard");
    for (f, want) in [
        ("unread.txt", "on disk\n"),
        ("changing.txt", "on disk\n"),
        ("big.txt", "small\n"),
    ] {
        assert_eq!(ws.disk(f).as_deref(), Some(want), "{f}");
    }
    assert_eq!(ed.buffers[&ws.abs("unread.txt")], "unread buffer\n");
}

#[test]
fn read_before_write_applies_under_host_write_alone() {
    let ws = Ws::new();
    ws.put("a.txt", "on disk\n");
    let mut ed = Editor::default();
    let mut s = Sidecar::start();
    let p = turn(
        json!([
            call("w1", "write_file", json!({"path": "a.txt", "content": "blind\n"})),
            {"text": "refused"}
        ]),
        &ws,
        "rec_hfs_gate_w",
        json!({"write": true}),
    );
    let (st, reqs) = run_with(&mut s, p, &mut ed);
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    assert!(reqs.is_empty(), "{reqs:?}");
    failed(&mut s, "rec_hfs_gate_w", "w1", "not_read");
    assert_eq!(ws.disk("a.txt").as_deref(), Some("on disk\n"));
}

// ---- a host that does not answer --------------------------------------------------------

#[test]
fn an_unanswered_fs_read_text_ends_at_cancel_and_at_the_tool_timeout() {
    let ws = Ws::new();
    ws.put("a.txt", "on disk\n");
    let mut s = Sidecar::start();
    let p = turn(
        json!([call("r1", "read_file", json!({"path": "a.txt"})), {"text": "x"}]),
        &ws,
        "rec_hfs_cancel",
        json!({"read": true}),
    );
    let id = start(&mut s, p);
    let req = reverse(&mut s, "fs.read_text");
    assert_eq!(req["params"]["context"]["callId"], "r1", "{req}");
    let t = Instant::now();
    s.ok("agent.chat.cancel", json!({"streamId": id}));
    let st = finish(&mut s, &id, Vec::new());
    assert_eq!(st.done["status"], "cancelled", "{:?}", st.frames);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // The answer after the wait ended is dropped; the sidecar serves on.
    answer(&mut s, &req, json!({"content": "late\n"}));
    s.ok("system.ping", json!({}));

    // With a short toolTimeoutMs the call fails and the turn goes on.
    let mut p = turn(
        json!([call("r2", "read_file", json!({"path": "a.txt"})), {"text": "moved on"}]),
        &ws,
        "rec_hfs_timeout",
        json!({"read": true}),
    );
    p["toolTimeoutMs"] = json!(1000);
    let t = Instant::now();
    let id = start(&mut s, p);
    let (st, reqs) = drive(&mut s, &id, |_| Reply::Silent);
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert_eq!(methods(&reqs), ["fs.read_text"], "{reqs:?}");
    assert_eq!(st.done["status"], "completed", "{:?}", st.frames);
    assert_eq!(st.text(), "moved on");
    let b = body(&mut s, "rec_hfs_timeout", "r2");
    assert_eq!(b["success"], false, "{b}");
    assert!(
        b.get("data").and_then(|d| d.get("content")).is_none(),
        "no text without the host: {b}"
    );
    answer(&mut s, &reqs[0], json!({"content": "late\n"}));
    s.ok("system.ping", json!({}));
}

#[test]
fn stdin_eof_ends_an_unanswered_fs_write_text_and_nothing_is_written() {
    let ws = Ws::new();
    let mut s = Sidecar::start();
    let p = turn(
        json!([call("w1", "write_file", json!({"path": "new.txt", "content": "n\n"})), {"text": "x"}]),
        &ws,
        "rec_hfs_eof",
        json!({"write": true}),
    );
    let id = start(&mut s, p);
    let req = reverse(&mut s, "fs.write_text");
    assert_eq!(req["params"]["content"], "n\n", "{req}");
    let t = Instant::now();
    s.close_stdin();
    let st = finish(&mut s, &id, Vec::new());
    assert_eq!(st.done["status"], "cancelled", "{:?}", st.frames);
    assert!(s.wait_exit(Duration::from_secs(10)).success());
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(!ws.p("new.txt").exists());
}

// ---- without hostFs, and malformed ------------------------------------------------------

#[test]
fn without_host_fs_the_file_tools_use_the_disk_and_send_no_fs_requests() {
    let ws = Ws::new();
    ws.put("a.txt", "alpha\nbeta\n");
    let mut s = Sidecar::start();
    for (record, host_fs) in [
        ("rec_hfs_absent", Value::Null),
        ("rec_hfs_off", json!({"read": false, "write": false})),
        ("rec_hfs_empty", json!({})),
        ("rec_hfs_null", json!(null)),
    ] {
        let old = ws.disk("a.txt").unwrap();
        let added = format!("{record}\n");
        let mut p = turn(
            json!([
                call("r1", "read_file", json!({"path": "a.txt"})),
                call("e1", "edit_file", json!({"path": "a.txt",
                    "edits": [{"oldText": "beta\n", "newText": format!("beta\n{added}")}]})),
                call("w1", "write_file", json!({"path": format!("{record}.txt"), "content": "w\n"})),
                {"text": "on disk"}
            ]),
            &ws,
            record,
            Value::Null,
        );
        // Absent, or given as off, empty or null.
        if record != "rec_hfs_absent" {
            p["hostFs"] = host_fs;
        }
        let mut ed = Editor::default();
        let (st, reqs) = run_with(&mut s, p, &mut ed);
        assert_eq!(st.done["status"], "completed", "{record}: {:?}", st.frames);
        assert!(reqs.is_empty(), "{record}: {reqs:?}");
        assert_eq!(
            ok_body(&mut s, record, "r1")["data"]["content"],
            old.as_str(),
            "{record}"
        );
        ok_body(&mut s, record, "e1");
        ok_body(&mut s, record, "w1");
        assert_eq!(
            ws.disk("a.txt").unwrap(),
            old.replacen("beta\n", &format!("beta\n{added}"), 1),
            "{record}"
        );
        assert_eq!(
            ws.disk(&format!("{record}.txt")).as_deref(),
            Some("w\n"),
            "{record}"
        );
    }
}

#[test]
fn a_malformed_host_fs_is_refused_naming_it() {
    let mut s = Sidecar::start();
    for (bad, needles) in [
        (json!({"read": true, "sync": true}), &["hostFs", "sync"][..]),
        (json!({"raed": true}), &["hostFs", "raed", "read"][..]),
        (json!({"read": "yes"}), &["hostFs", "read"][..]),
        (json!({"write": 1}), &["hostFs", "write"][..]),
        (json!(true), &["hostFs"][..]),
        (json!("read"), &["hostFs"][..]),
        (json!(["read"]), &["hostFs"][..]),
    ] {
        let p = merge(
            scripted(json!([{"text": "never"}]), "hi"),
            json!({"hostFs": bad}),
        );
        let r = s.call("agent.chat.stream", p);
        assert_eq!(code(&r), -32602, "{bad}: {r}");
        let msg = r["error"]["message"].as_str().unwrap();
        for n in needles {
            assert!(msg.contains(n), "{bad}: {msg:?} should name {n}");
        }
    }
    // Nothing started: no stream frame, no host request.
    assert!(s.next_frame(Duration::from_millis(300)).is_none());
}
