//! Real kernel enforcement through the launcher (Landlock ABI 7, seccomp, unprivileged user
//! namespaces on this host), driven over the pipes with `tool.invoke` of `bash` and
//! `sandbox.describe`. These run as root: Landlock and seccomp still apply to root, and the
//! checks below would hold unchanged for an unprivileged user.

use crate::common;

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::Path;

use crate::common::{Opts, Sidecar, pids_with_arg, wait_until};
use serde_json::{Value, json};

fn invoke(s: &mut Sidecar, ws: &Path, command: &str, exec_sandbox: Option<Value>) -> Value {
    let mut context = json!({"cwd": ws});
    if let Some(e) = exec_sandbox {
        context["execSandbox"] = e;
    }
    s.ok(
        "tool.invoke",
        json!({"name": "bash", "arguments": {"command": command}, "consentGranted": true,
               "context": context}),
    )
}

/// A python snippet that tries `op` on `path` and prints OK or the errno name.
fn py_try(op: &str) -> String {
    format!(
        "python3 -c 'import errno,sys\ntry:\n    {op}\n    print(\"OK\")\nexcept OSError as e:\n    print(errno.errorcode[e.errno])'"
    )
}

fn stdout(tr: &Value) -> String {
    tr["data"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn writes_inside_the_workspace_only_and_git_stays_read_only() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".git")).unwrap();
    std::fs::write(ws.path().join(".git/config"), "[core]\n").unwrap();
    std::fs::write(ws.path().join("AGENTS.md"), "be nice\n").unwrap();
    let mut s = Sidecar::start();

    let out_file = outside.path().join("escape");
    let cmd = [
        py_try("open(\"inside.txt\", \"w\").write(\"x\")"),
        py_try(&format!("open(\"{}\", \"w\")", out_file.display())),
        py_try("open(\".git/config\", \"a\").write(\"evil\")"),
        py_try("open(\".git/hooks-new\", \"w\")"),
        py_try("open(\"AGENTS.md\", \"w\")"),
        py_try("import os; os.mkdir(\"sub\"); open(\"sub/f\", \"w\").write(\"y\")"),
        py_try("import os; open(os.environ[\"TMPDIR\"] + \"/t\", \"w\").write(\"t\")"),
        py_try("open(\"/etc/outrigger-test\", \"w\")"),
    ]
    .join("; ");
    let tr = invoke(&mut s, ws.path(), &cmd, None);
    assert_eq!(tr["success"], true, "{tr}");
    let lines: Vec<String> = stdout(&tr).lines().map(String::from).collect();
    assert_eq!(
        lines,
        [
            "OK", "EACCES", "EROFS", "EROFS", "EROFS", "OK", "OK", "EACCES"
        ],
        "{tr}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("inside.txt")).unwrap(),
        "x"
    );
    assert!(!out_file.exists());
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        tr["data"]["_sandbox"],
        json!({"backend": "landlock", "enforcement": "full"})
    );
}

#[test]
fn hidden_paths_are_unreadable_whatever_the_settings_say() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join("secrets")).unwrap();
    std::fs::write(home.path().join("secrets/key"), "hunter2").unwrap();
    std::fs::write(home.path().join("notes.txt"), "public").unwrap();
    let key = home.path().join("secrets/key");
    // Even a writable root over the home does not expose the secrets; the whole
    // `$OUTRIGGER_HOME` is hidden now (covered by an empty tmpfs: ENOENT).
    let mut s = Sidecar::start_with(Opts {
        env: vec![(
            "OUTRIGGER_SANDBOX_WRITABLE_ROOTS".into(),
            home.path().display().to_string(),
        )],
        home: Some(home),
        ..Default::default()
    });
    let notes = key.parent().unwrap().parent().unwrap().join("notes.txt");
    let cmd = format!(
        "{}; {}; cat {} 2>&1 | grep -c hunter2",
        py_try(&format!("open(\"{}\").read()", key.display())),
        py_try(&format!("open(\"{}\").read()", notes.display())),
        key.display()
    );
    let tr = invoke(&mut s, ws.path(), &cmd, None);
    assert_eq!(stdout(&tr), "ENOENT\nENOENT\n0\n", "{tr}");
}

/// Listeners the sandboxed command tries to reach: TCP on loopback, a pathname unix socket
/// and an abstract unix socket.
struct Listeners {
    _tcp: std::net::TcpListener,
    port: u16,
    _unix: UnixListener,
    unix_path: std::path::PathBuf,
    _abs: UnixListener,
    abs_name: String,
    _dir: tempfile::TempDir,
}

fn listeners() -> Listeners {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let unix_path = dir.path().join("sock");
    let unix = UnixListener::bind(&unix_path).unwrap();
    let abs_name = format!("outrigger-test-{}-{port}", std::process::id());
    let abs =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(abs_name.as_bytes()).unwrap())
            .unwrap();
    Listeners {
        _tcp: tcp,
        port,
        _unix: unix,
        unix_path,
        _abs: abs,
        abs_name,
        _dir: dir,
    }
}

fn network_probe(l: &Listeners) -> String {
    [
        py_try(&format!(
            "import socket; socket.create_connection((\"127.0.0.1\", {}), timeout=5)",
            l.port
        )),
        py_try(&format!(
            "import socket; c = socket.socket(socket.AF_UNIX); c.connect(\"{}\")",
            l.unix_path.display()
        )),
        py_try(&format!(
            "import socket; c = socket.socket(socket.AF_UNIX); c.connect(\"\\0{}\")",
            l.abs_name
        )),
    ]
    .join("; ")
}

#[test]
fn network_off_blocks_tcp_and_unix_sockets_and_network_on_allows_them() {
    let l = listeners();
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let tr = invoke(&mut s, ws.path(), &network_probe(&l), None);
    assert_eq!(stdout(&tr), "EPERM\nEPERM\nEPERM\n", "{tr}");
    assert_eq!(tr["data"]["_sandbox"]["enforcement"], "full", "{tr}");

    let tr = invoke(
        &mut s,
        ws.path(),
        &network_probe(&l),
        Some(json!({"network": true})),
    );
    assert_eq!(stdout(&tr), "OK\nOK\nOK\n", "{tr}");
    assert_eq!(
        tr["data"]["_sandbox"],
        json!({"backend": "landlock", "enforcement": "partial"}),
        "{tr}"
    );
    // The files stay confined with the network on.
    let tr = invoke(
        &mut s,
        ws.path(),
        &py_try("open(\"/etc/outrigger-test\", \"w\")"),
        Some(json!({"network": true})),
    );
    assert_eq!(stdout(&tr), "EACCES\n", "{tr}");
}

#[test]
fn network_can_be_opened_by_config() {
    let l = listeners();
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_SANDBOX_NETWORK".into(), "true".into())],
        ..Default::default()
    });
    let tr = invoke(&mut s, ws.path(), &network_probe(&l), None);
    assert_eq!(stdout(&tr), "OK\nOK\nOK\n", "{tr}");
    let d = s.ok("sandbox.describe", json!({}));
    assert_eq!(d["enforcement"], "partial", "{d}");
}

#[test]
fn describe_agrees_with_what_a_call_reports() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    for (describe, exec) in [
        (json!({}), None),
        (json!({"network": false}), Some(json!({"network": false}))),
        (
            json!({"network": true, "allowedHosts": ["example.com"], "shell": "bash"}),
            Some(json!({"network": true, "allowedHosts": ["example.com"]})),
        ),
    ] {
        let d = s.ok("sandbox.describe", describe.clone());
        let tr = invoke(&mut s, ws.path(), "true", exec);
        assert_eq!(
            json!({"backend": d["backend"], "enforcement": d["enforcement"]}),
            tr["data"]["_sandbox"],
            "describe {describe} → {d}; call → {tr}"
        );
    }
    let d = s.ok("sandbox.describe", json!({}));
    assert_eq!(d["backend"], "landlock");
    assert_eq!(d["enforcement"], "full");
    assert_eq!(d["missing"], json!([]));
    let d = s.ok("sandbox.describe", json!({"network": true}));
    assert_eq!(d["enforcement"], "partial");
    assert!(d["missing"][0].as_str().unwrap().contains("network"), "{d}");
}

#[test]
fn require_full_and_require_backend_refuse_when_unmet() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let marker = ws.path().join("ran");
    let cmd = format!("touch {}", marker.display());
    let tr = invoke(
        &mut s,
        ws.path(),
        &cmd,
        Some(json!({"network": true, "requireFull": true})),
    );
    assert_eq!(tr["success"], false, "{tr}");
    let err = tr["error"].as_str().unwrap();
    assert!(
        err.contains("requireFull") && err.contains("partial") && err.contains("network"),
        "{err}"
    );
    assert_eq!(tr["data"]["kind"], "sandbox_unmet", "{tr}");
    assert_eq!(tr["data"]["_sandbox"]["enforcement"], "partial", "{tr}");

    let tr = invoke(
        &mut s,
        ws.path(),
        &cmd,
        Some(json!({"requireBackend": "seatbelt"})),
    );
    let err = tr["error"].as_str().unwrap();
    assert!(
        err.contains("requireBackend") && err.contains("seatbelt") && err.contains("landlock"),
        "{err}"
    );
    assert!(!marker.exists(), "a refused call must not run");

    // Met: it runs.
    let tr = invoke(
        &mut s,
        ws.path(),
        &cmd,
        Some(json!({"requireFull": true, "requireBackend": "landlock"})),
    );
    assert_eq!(tr["success"], true, "{tr}");
    assert!(marker.exists());
}

#[test]
fn managed_pin_cannot_be_loosened_per_call() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let managed = home.path().join("managed.json");
    std::fs::write(&managed, r#"{"sandbox_network": false}"#).unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![(
            "OUTRIGGER_MANAGED_CONFIG_PATH".into(),
            managed.display().to_string(),
        )],
        home: Some(home),
        ..Default::default()
    });
    let tr = invoke(&mut s, ws.path(), "true", Some(json!({"network": true})));
    assert_eq!(tr["success"], false, "{tr}");
    assert!(tr["error"].as_str().unwrap().contains("managed"), "{tr}");
}

#[test]
fn disabled_sandbox_runs_unconfined_and_says_so() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_SANDBOX_ENABLED".into(), "false".into())],
        ..Default::default()
    });
    let f = outside.path().join("free");
    let tr = invoke(&mut s, ws.path(), &format!("touch {}", f.display()), None);
    assert_eq!(tr["success"], true, "{tr}");
    assert!(f.exists());
    assert_eq!(
        tr["data"]["_sandbox"],
        json!({"backend": "none", "enforcement": "none"})
    );
    let d = s.ok("sandbox.describe", json!({}));
    assert_eq!(d["enforcement"], "none", "{d}");
    let tr = invoke(
        &mut s,
        ws.path(),
        "true",
        Some(json!({"requireFull": true})),
    );
    assert_eq!(tr["success"], false, "{tr}");
    assert!(
        tr["error"].as_str().unwrap().contains("sandbox_enabled"),
        "{tr}"
    );
}

#[test]
fn bad_exec_sandbox_is_invalid_params() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let r = s.call(
        "tool.invoke",
        json!({"name": "bash", "arguments": {"command": "true"}, "consentGranted": true,
               "context": {"cwd": ws.path(), "execSandbox": {"netwrk": true}}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let tr = invoke(
        &mut s,
        ws.path(),
        "true",
        Some(json!({"writableRoots": ["rel/dir"]})),
    );
    assert!(tr["error"].as_str().unwrap().contains("absolute"), "{tr}");
}

#[test]
fn plugin_executables_run_through_the_launcher() {
    use std::os::unix::fs::PermissionsExt;
    let plugins = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let escape = outside.path().join("escape");
    std::fs::create_dir(plugins.path().join("bin")).unwrap();
    let script = plugins.path().join("bin/probe");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif echo x > {} 2>/dev/null; then out=wrote; else out=denied; fi\n\
             echo ok > inside.txt\n\
             printf '{{\"ok\": true, \"result\": \"%s\"}}\\n' \"$out\"\n",
            escape.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        plugins.path().join("probe.toml"),
        "[[tools]]\nname = \"sandbox_probe\"\ndescription = \"Tries to escape\"\n\
         exec = \"bin/probe\"\ntimeout = \"10s\"\nmode = \"read\"\n",
    )
    .unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![(
            "OUTRIGGER_PLUGIN_DIR".into(),
            plugins.path().display().to_string(),
        )],
        ..Default::default()
    });
    let tr = s.ok(
        "tool.invoke",
        json!({"name": "sandbox_probe", "arguments": {}, "context": {"cwd": ws.path()}}),
    );
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["result"], "denied", "{tr}");
    assert!(!escape.exists());
    assert!(
        ws.path().join("inside.txt").exists(),
        "the workspace is writable"
    );
    assert_eq!(
        tr["data"]["_sandbox"],
        json!({"backend": "landlock", "enforcement": "full"}),
        "{tr}"
    );
    // The call's execSandbox reaches plugins too.
    let tr = s.ok(
        "tool.invoke",
        json!({"name": "sandbox_probe", "arguments": {},
               "context": {"cwd": ws.path(), "execSandbox": {"writableRoots": [outside.path()]}}}),
    );
    assert_eq!(tr["data"]["result"], "wrote", "{tr}");
    assert!(escape.exists());
}

#[test]
fn a_missing_layer_lowers_enforcement_is_logged_once_and_the_rest_still_holds() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".git")).unwrap();
    let l = listeners();
    let mut s = Sidecar::start_with(Opts {
        env: vec![(
            "OUTRIGGER_SANDBOX_DISABLE_LAYERS".into(),
            "namespaces".into(),
        )],
        ..Default::default()
    });
    let d = s.ok("sandbox.describe", json!({}));
    assert_eq!(d["backend"], "landlock", "{d}");
    assert_eq!(d["enforcement"], "partial", "{d}");
    assert!(
        d["missing"][0]
            .as_str()
            .unwrap()
            .contains("user namespaces"),
        "{d}"
    );

    let out_file = outside.path().join("x");
    let cmd = format!(
        "{}; {}; {}",
        py_try(&format!("open(\"{}\", \"w\")", out_file.display())),
        py_try("open(\".git/config\", \"w\")"),
        network_probe(&l)
    );
    let tr = invoke(&mut s, ws.path(), &cmd, None);
    assert_eq!(
        tr["data"]["_sandbox"],
        json!({"backend": "landlock", "enforcement": "partial"}),
        "{tr}"
    );
    // Files outside and the network stay closed; .git is what the missing layer gave up.
    assert_eq!(stdout(&tr), "EACCES\nOK\nEPERM\nEPERM\nEPERM\n", "{tr}");
    let tr = invoke(
        &mut s,
        ws.path(),
        "true",
        Some(json!({"requireFull": true})),
    );
    assert!(
        tr["error"].as_str().unwrap().contains("user namespaces"),
        "{tr}"
    );

    // Without a PID namespace the launcher is a subreaper that takes its group down with it.
    let secs = format!("4711.{}", std::process::id());
    s.send(
        &json!({"jsonrpc": "2.0", "id": "bg", "method": "tool.invoke", "params": {
        "name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
        "arguments": {"command": format!("sleep {secs} & wait")}}}),
    );
    assert!(wait_until(common::WAIT, || !pids_with_arg(&secs).is_empty()));
    s.child.kill().unwrap();
    let _ = s.child.wait();
    assert!(
        wait_until(std::time::Duration::from_secs(5), || pids_with_arg(&secs)
            .is_empty()),
        "sleep outlived the SIGKILLed sidecar"
    );
    let log = s.stderr_rest();
    assert_eq!(
        log.matches("sandbox layer unavailable").count(),
        1,
        "logged once: {log}"
    );
    assert!(log.contains("OUTRIGGER_SANDBOX_DISABLE_LAYERS"), "{log}");
}

#[test]
fn without_landlock_the_backend_is_none() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![(
            "OUTRIGGER_SANDBOX_DISABLE_LAYERS".into(),
            "landlock,namespaces,seccomp".into(),
        )],
        ..Default::default()
    });
    let d = s.ok("sandbox.describe", json!({}));
    assert_eq!(
        (d["backend"].as_str(), d["enforcement"].as_str()),
        (Some("none"), Some("none")),
        "{d}"
    );
    let tr = invoke(
        &mut s,
        ws.path(),
        "true",
        Some(json!({"requireBackend": "landlock"})),
    );
    assert!(
        tr["error"].as_str().unwrap().contains("requireBackend"),
        "{tr}"
    );
    let tr = invoke(&mut s, ws.path(), "echo still runs", None);
    assert_eq!(tr["data"]["stdout"], "still runs\n", "{tr}");
    assert_eq!(tr["data"]["_sandbox"]["backend"], "none", "{tr}");
}

#[test]
fn the_command_sees_only_its_own_processes() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let sidecar = s.pid();
    let tr = invoke(
        &mut s,
        ws.path(),
        &format!(
            "echo $$; ls /proc > procs.txt; grep -c '^[0-9]' procs.txt; test -e /proc/{sidecar} && echo visible || echo hidden"
        ),
        None,
    );
    // Our init is pid 1, bash pid 2, `ls` the only other while it lists /proc (listing into a
    // file first: in a pipe, `grep` may or may not have started yet).
    assert_eq!(stdout(&tr), "2\n3\nhidden\n", "{tr}");
}

#[test]
fn private_temp_dirs_of_dead_sidecars_are_swept_after_ready() {
    let tmp = tempfile::tempdir().unwrap();
    // A pid that is certainly gone: a child we already reaped.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = tmp.path().join(format!("outrigger-sbx-{dead}-0-0badf00d"));
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("left.txt"), "x").unwrap();
    // Owned by a live process (this test): never touched.
    let live = tmp
        .path()
        .join(format!("outrigger-sbx-{}-0-0badf00d", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    let unrelated = tmp.path().join("outrigger-sbx-notapid");
    std::fs::create_dir(&unrelated).unwrap();
    // Today's shape: one directory per sidecar, a dir per command inside.
    let stale_parent = tmp.path().join(format!("outrigger-sbx-{dead}"));
    std::fs::create_dir_all(stale_parent.join("3-0badf00d")).unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![("TMPDIR".into(), tmp.path().display().to_string())],
        ..Default::default()
    });
    assert!(
        wait_until(std::time::Duration::from_secs(10), || !stale.exists()
            && !stale_parent.exists()),
        "the dead sidecar's dirs are still there"
    );
    assert!(live.exists() && unrelated.exists());
    // A command's private temp dir lies in the sidecar's own directory, gone on shutdown.
    let ws = tempfile::tempdir().unwrap();
    let tr = invoke(&mut s, ws.path(), "echo $TMPDIR", None);
    let own = tmp.path().join(format!("outrigger-sbx-{}", s.pid()));
    assert_eq!(
        Path::new(stdout(&tr).trim()).parent(),
        Some(own.as_path()),
        "{tr}"
    );
    assert!(own.is_dir());
    s.close_stdin();
    s.wait_exit(std::time::Duration::from_secs(10));
    assert!(!own.exists(), "{} left behind", own.display());
}
