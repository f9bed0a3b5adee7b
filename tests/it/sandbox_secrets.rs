//! Secrets out of the sandbox's reach, over the pipes against the real binary: credential
//! files and the store unreadable from bash and plugin executables (only this stream's spill
//! files readable), secret-looking variables absent in any case, `bash_env_inherit`, a hard
//! link to a credential refused by the file tools, and AF_VSOCK / AF_NETLINK sockets refused.

use std::path::{Path, PathBuf};

use crate::common::{Opts, Sidecar};
use crate::support::chat_helpers::{merge, messages, run, scripted};
use serde_json::{Value, json};

/// The credential files of the built-in list, relative to `$HOME`.
const CREDENTIALS: &[&str] = &[
    ".git-credentials",
    ".netrc",
    ".docker/config.json",
    ".kube/config",
    ".config/gh/hosts.yml",
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".gnupg/private-keys-v1.d/k.key",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".config/gcloud/application_default_credentials.json",
    ".azure/msal_token_cache.json",
    ".mozilla/firefox/p/logins.json",
    ".config/google-chrome/Default/Cookies",
    ".config/chromium/Default/Login Data",
];

/// A `$HOME` full of credentials (each file holds `SECRET-<n>`), apart from `$OUTRIGGER_HOME`.
fn user_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    for (n, rel) in CREDENTIALS.iter().enumerate() {
        let p = home.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("SECRET-{n}\n")).unwrap();
    }
    home
}

fn bash(s: &mut Sidecar, ws: &Path, command: &str, context: Value) -> Value {
    let mut ctx = json!({"cwd": ws});
    if let (Some(c), Some(extra)) = (ctx.as_object_mut(), context.as_object()) {
        c.extend(extra.clone());
    }
    s.ok(
        "tool.invoke",
        json!({"name": "bash", "arguments": {"command": command}, "consentGranted": true,
               "context": ctx}),
    )
}

fn stdout(tr: &Value) -> String {
    tr["data"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `cat`s each path and prints `READ <path>` for each that worked.
fn cat_each(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| {
            format!(
                "cat '{}' >/dev/null 2>&1 && echo 'READ {}'",
                p.display(),
                p.display()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn credentials_and_the_store_are_unreadable_from_bash_and_plugins() {
    let user = user_home();
    let orhome = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    // A plugin installed in $OUTRIGGER_HOME/plugins: it still runs (its own dir is revealed).
    let pdir = orhome.path().join("plugins");
    std::fs::create_dir_all(pdir.join("bin")).unwrap();
    std::fs::write(pdir.join("bin/data.txt"), "plugin data\n").unwrap();
    let mut targets: Vec<PathBuf> = CREDENTIALS.iter().map(|c| user.path().join(c)).collect();
    for f in ["outrigger.db", "outrigger.db-wal", "plugins/cat.toml"] {
        targets.push(orhome.path().join(f));
    }
    let script = format!(
        "#!/bin/sh\nout=''\nfor f in {}; do cat \"$f\" >/dev/null 2>&1 && out=\"$out READ:$f\"; done\n\
         cat {}/bin/data.txt >/dev/null && out=\"$out CONTROL\"\n\
         printf '{{\"ok\": true, \"result\": \"%s\"}}\\n' \"$out\"\n",
        targets
            .iter()
            .map(|p| format!("'{}'", p.display()))
            .collect::<Vec<_>>()
            .join(" "),
        pdir.display()
    );
    let exe = pdir.join("bin/cat.sh");
    std::fs::write(&exe, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        pdir.join("cat.toml"),
        "[[tools]]\nname = \"cat_secrets\"\ndescription = \"Reads what it should not\"\n\
         exec = \"bin/cat.sh\"\ntimeout = \"10s\"\nmode = \"read\"\n",
    )
    .unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![("HOME".into(), user.path().display().to_string())],
        home: Some(orhome),
        ..Default::default()
    });
    let orhome = s.home.path().to_path_buf();
    assert!(orhome.join("outrigger.db").exists());

    let tr = bash(
        &mut s,
        ws.path(),
        &format!("{}; echo done", cat_each(&targets)),
        json!({}),
    );
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(stdout(&tr), "done\n", "{tr}");
    assert_eq!(tr["data"]["_sandbox"]["enforcement"], "full", "{tr}");
    // With a mount namespace, hidden directories are empty covers.
    let tr = bash(
        &mut s,
        ws.path(),
        &format!(
            "ls -A {}/.ssh {} | grep -v ':$' | grep -c . ; grep -rl SECRET {} 2>/dev/null | wc -l",
            user.path().display(),
            orhome.display(),
            user.path().display()
        ),
        json!({}),
    );
    assert_eq!(stdout(&tr), "0\n0\n", "{tr}");

    let tr = s.ok(
        "tool.invoke",
        json!({"name": "cat_secrets", "arguments": {}, "context": {"cwd": ws.path()}}),
    );
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["result"], " CONTROL", "{tr}");
}

#[test]
fn only_this_streams_spill_files_are_readable() {
    let mut s = Sidecar::start();
    let home = s.home.path().to_path_buf();
    std::fs::create_dir_all(home.join("spill/another-stream")).unwrap();
    std::fs::write(home.join("spill/another-stream/x.txt"), "OTHER-SESSION").unwrap();
    let w = tempfile::tempdir().unwrap();
    let line = format!("{}\n", "a".repeat(99));
    std::fs::write(w.path().join("big.txt"), line.repeat(400)).unwrap();
    let cmd = format!(
        "grep -q aaaa {h}/spill/*/big.txt && echo SPILL-READABLE; \
         cat {h}/spill/another-stream/x.txt; head -c 15 {h}/outrigger.db; echo end",
        h = home.display()
    );
    let script = json!([
        {"toolCalls": [{"id": "big", "name": "read_file", "arguments": {"path": "big.txt"}}]},
        {"toolCalls": [{"id": "look", "name": "bash", "arguments": {"command": cmd}}]},
        {"text": "done"}
    ]);
    let p = merge(
        scripted(script, "x"),
        json!({"cwd": w.path(), "chatId": "chat_spill_sbx"}),
    );
    let r = run(&mut s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let m = messages(&mut s, "chat_spill_sbx");
    let tool = m
        .iter()
        .filter(|x| x["role"] == "tool")
        .nth(1)
        .unwrap_or_else(|| panic!("{m:?}"));
    let body: Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    let out = body["data"]["stdout"].as_str().unwrap_or_default();
    assert!(
        out.starts_with("SPILL-READABLE\n"),
        "this stream's spill is readable: {body}"
    );
    assert!(!out.contains("OTHER-SESSION"), "{body}");
    assert!(!out.contains("SQLite format"), "{body}");
    assert!(out.ends_with("end\n"), "{body}");
}

#[test]
fn secret_variables_are_absent_in_any_case_and_inherit_levels_hold() {
    let ws = tempfile::tempdir().unwrap();
    let leaks = [
        ("AWS_SECRET_ACCESS_KEY", "leak-aws"),
        ("DB_PASSWORD", "leak-db"),
        ("openai_api_key", "leak-openai"),
        ("Gh_Token", "leak-gh"),
        ("SSH_AUTH_SOCK", "leak-ssh"),
        ("MY_SESSION_ID", "leak-session"),
        ("SOME_COOKIE_JAR", "leak-cookie"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "leak-gcp"),
        ("LDAP_PASSWD", "leak-passwd"),
    ];
    let mut env: Vec<(String, String)> = leaks
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.push(("VISIBLE_VAR".into(), "seen".into()));
    env.push(("LANG".into(), "C.UTF-8".into()));
    let plugins = tempfile::tempdir().unwrap();
    std::fs::create_dir(plugins.path().join("bin")).unwrap();
    let exe = plugins.path().join("bin/env.sh");
    std::fs::write(
        &exe,
        "#!/bin/sh\nif env | grep -q leak-; then r=leaked; else r=clean; fi\n\
         printf '{\"ok\": true, \"result\": \"%s %s\"}\\n' \"$r\" \"$PLUGIN_OWN\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        plugins.path().join("env.toml"),
        "[[tools]]\nname = \"env_probe\"\ndescription = \"Prints its environment\"\n\
         exec = \"bin/env.sh\"\ntimeout = \"10s\"\nmode = \"read\"\n\
         env = { PLUGIN_OWN = \"own-api-key-kept\" }\n",
    )
    .unwrap();
    env.push((
        "OUTRIGGER_PLUGIN_DIR".into(),
        plugins.path().display().to_string(),
    ));
    let mut s = Sidecar::start_with(Opts {
        env: env.clone(),
        ..Default::default()
    });
    let out = stdout(&bash(&mut s, ws.path(), "env", json!({})));
    assert!(out.contains("VISIBLE_VAR=seen"), "{out}");
    for (k, v) in leaks {
        assert!(!out.contains(v), "{k} reached the command: {out}");
    }
    assert!(!out.contains("OUTRIGGER_"), "{out}");
    let tr = s.ok(
        "tool.invoke",
        json!({"name": "env_probe", "arguments": {}, "context": {"cwd": ws.path()}}),
    );
    assert_eq!(tr["data"]["result"], "clean own-api-key-kept", "{tr}");
    drop(s);

    // core: only the core names (and our TMPDIR); an allow pattern lets one secret through.
    let mut core_env = env.clone();
    core_env.push(("OUTRIGGER_BASH_ENV_INHERIT".into(), "core".into()));
    core_env.push(("OUTRIGGER_BASH_ENV_ALLOW".into(), "db_pass*".into()));
    let mut s = Sidecar::start_with(Opts {
        env: core_env,
        ..Default::default()
    });
    let out = stdout(&bash(&mut s, ws.path(), "env", json!({})));
    assert!(
        out.contains("LANG=C.UTF-8") && out.contains("PATH="),
        "{out}"
    );
    assert!(out.contains("DB_PASSWORD=leak-db"), "allowed: {out}");
    assert!(!out.contains("VISIBLE_VAR"), "{out}");
    assert!(
        !out.contains("leak-aws") && !out.contains("leak-openai"),
        "{out}"
    );
    drop(s);

    // none: nothing inherited but what bash itself sets and our temp dir.
    let mut none_env = env;
    none_env.push(("OUTRIGGER_BASH_ENV_INHERIT".into(), "NONE".into()));
    let mut s = Sidecar::start_with(Opts {
        env: none_env,
        ..Default::default()
    });
    let out = stdout(&bash(&mut s, ws.path(), "/usr/bin/env", json!({})));
    let names: Vec<&str> = out.lines().filter_map(|l| l.split('=').next()).collect();
    for n in &names {
        assert!(
            ["TMPDIR", "TMP", "TEMP", "PWD", "SHLVL", "_", "OLDPWD"].contains(n),
            "{n} inherited under none: {out}"
        );
    }
    assert!(names.contains(&"TMPDIR"), "{out}");
}

#[test]
fn a_hard_link_to_a_credential_is_refused_by_the_file_tools() {
    let user = user_home();
    // The workspace shares the credentials' filesystem (both under the temp dir).
    let ws = tempfile::tempdir().unwrap();
    std::fs::hard_link(user.path().join(".netrc"), ws.path().join("notes.txt")).unwrap();
    std::fs::hard_link(
        user.path().join(".ssh/id_ed25519"),
        ws.path().join("key.txt"),
    )
    .unwrap();
    std::fs::write(ws.path().join("plain.txt"), "plain\n").unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![("HOME".into(), user.path().display().to_string())],
        ..Default::default()
    });
    for path in ["notes.txt", "key.txt"] {
        let r = s.ok(
            "tool.invoke",
            json!({"name": "read_file", "arguments": {"path": path}, "context": {"cwd": ws.path()}}),
        );
        assert_eq!(r["success"], false, "{path}: {r}");
        assert_eq!(r["data"]["code"], "path_blocked", "{path}: {r}");
        assert!(r["error"].as_str().unwrap().contains("hard link"), "{r}");
    }
    let r = s.ok(
        "tool.invoke",
        json!({"name": "read_file", "arguments": {"path": "plain.txt"}, "context": {"cwd": ws.path()}}),
    );
    assert_eq!(r["success"], true, "{r}");
    let r = s.ok(
        "tool.invoke",
        json!({"name": "grep", "arguments": {"pattern": "SECRET|plain", "outputMode": "content"},
               "context": {"cwd": ws.path()}}),
    );
    let text = r.to_string();
    assert!(text.contains("plain") && !text.contains("SECRET"), "{r}");
}

#[test]
fn vsock_and_netlink_sockets_are_refused_with_the_network_off() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    let py = "python3 -c '
import errno, socket
for fam, kind in [(socket.AF_VSOCK, socket.SOCK_STREAM), (socket.AF_NETLINK, socket.SOCK_RAW)]:
    try:
        socket.socket(fam, kind).close()
        print(\"OK\")
    except OSError as e:
        print(errno.errorcode[e.errno])
'";
    let tr = bash(&mut s, ws.path(), py, json!({}));
    assert_eq!(stdout(&tr), "EPERM\nEPERM\n", "{tr}");
    // With the network on, the rule is not applied (netlink works again).
    let tr = bash(
        &mut s,
        ws.path(),
        py,
        json!({"execSandbox": {"network": true}}),
    );
    assert!(stdout(&tr).ends_with("OK\n"), "{tr}");
}
