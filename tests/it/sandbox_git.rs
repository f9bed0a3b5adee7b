//! Nothing git would run outside the sandbox: a repository a sandboxed command creates is
//! kept but loses its hooks and every config entry that runs a command, other protected
//! names it creates are removed, and what an existing repository runs from the workspace
//! stays read-only. Proven with a real `git commit` outside the sandbox afterwards.

use std::path::Path;
use std::process::Command;

use crate::common::Sidecar;
use serde_json::{Value, json};

fn bash(s: &mut Sidecar, ws: &Path, command: &str) -> Value {
    s.ok(
        "tool.invoke",
        json!({"name": "bash", "arguments": {"command": command}, "consentGranted": true,
               "context": {"cwd": ws}}),
    )
}

/// Runs git as the user would, outside the sandbox (no global or system config).
fn git(ws: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .current_dir(ws)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn hooks_and_config_a_sandboxed_git_init_leaves_never_run_on_the_next_commit() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mark = |n: &str| outside.path().join(n);
    let script = |path: &Path| format!("#!/bin/sh\\ntouch {}\\n", path.display());
    let cmd = [
        "git init -q .".to_string(),
        "git config user.email m@example.com".into(),
        "git config user.name model".into(),
        format!(
            "printf '{}' > .git/hooks/pre-commit",
            script(&mark("pre-commit"))
        ),
        "chmod +x .git/hooks/pre-commit".into(),
        format!(
            "printf '{}' > .git/hooks/post-commit",
            script(&mark("post-commit"))
        ),
        "chmod +x .git/hooks/post-commit".into(),
        "mkdir .githooks".into(),
        format!(
            "printf '{}' > .githooks/pre-commit",
            script(&mark("hooks-path"))
        ),
        "chmod +x .githooks/pre-commit".into(),
        "git config core.hooksPath .githooks".into(),
        format!("printf '{}' > fsmon.sh", script(&mark("fsmonitor"))),
        "chmod +x fsmon.sh".into(),
        "git config core.fsmonitor \"$PWD/fsmon.sh\"".into(),
        format!(
            "git config filter.x.clean 'touch {}; cat'",
            mark("filter").display()
        ),
        "echo '* filter=x' > .gitattributes".into(),
        format!(
            "git config core.sshCommand 'touch {}'",
            mark("ssh").display()
        ),
        "printf '[include]\\n\\tpath = ../evil.cfg\\n' >> .git/config".into(),
        "echo '{}' > .mcp.json".into(),
        "echo 'export X=1' > .envrc".into(),
        "mkdir .vscode && echo '{}' > .vscode/tasks.json".into(),
        "echo hello > f.txt".into(),
        "ls .git/hooks/pre-commit && git config --get core.hooksPath".into(),
    ]
    .join(" && ");
    let mut s = Sidecar::start();
    let tr = bash(&mut s, ws.path(), &cmd);
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(
        tr["data"]["stdout"], ".git/hooks/pre-commit\n.githooks\n",
        "the command itself did all of it: {tr}"
    );
    // The user's next commit, outside the sandbox.
    let add = git(ws.path(), &["add", "-A"]);
    assert!(add.status.success(), "{add:?}");
    let commit = git(ws.path(), &["commit", "-q", "-m", "after the model"]);
    assert!(commit.status.success(), "{commit:?}");
    let status = git(ws.path(), &["status", "--porcelain"]);
    assert!(status.status.success(), "{status:?}");
    let log = git(ws.path(), &["log", "--format=%an %s"]);
    assert_eq!(
        String::from_utf8_lossy(&log.stdout),
        "model after the model\n",
        "the model's user.name survives: {log:?}"
    );
    for n in [
        "pre-commit",
        "post-commit",
        "hooks-path",
        "fsmonitor",
        "filter",
        "ssh",
    ] {
        assert!(!mark(n).exists(), "{n} ran outside the sandbox");
    }
    // And the result said what was undone.
    let cleanup = tr["data"]["protectedCleanup"].to_string();
    for needle in [
        "pre-commit",
        "post-commit",
        "core.hookspath",
        "core.fsmonitor",
        "core.sshcommand",
        "filter.x.clean",
        "include.path",
        ".mcp.json",
        ".envrc",
        ".vscode",
    ] {
        assert!(cleanup.contains(needle), "{needle} not reported: {tr}");
    }
    // The other protected names are gone.
    assert!(ws.path().join(".git/HEAD").exists());
    assert!(ws.path().join("f.txt").exists());
    for n in [".mcp.json", ".envrc", ".vscode"] {
        assert!(!ws.path().join(n).exists(), "{n} left behind");
    }
}

#[test]
fn what_an_existing_repository_runs_from_the_workspace_stays_read_only() {
    let ws = tempfile::tempdir().unwrap();
    assert!(git(ws.path(), &["init", "-q", "."]).status.success());
    std::fs::create_dir(ws.path().join(".husky")).unwrap();
    std::fs::write(ws.path().join(".husky/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::create_dir(ws.path().join("scripts")).unwrap();
    std::fs::write(ws.path().join("scripts/clean.sh"), "#!/bin/sh\ncat\n").unwrap();
    assert!(
        git(ws.path(), &["config", "core.hooksPath", ".husky"])
            .status
            .success()
    );
    assert!(
        git(
            ws.path(),
            &["config", "filter.c.clean", "./scripts/clean.sh --x"]
        )
        .status
        .success()
    );
    let mut s = Sidecar::start();
    let tr = bash(
        &mut s,
        ws.path(),
        "echo 'touch /tmp/pwned' >> .husky/pre-commit 2>/dev/null || echo husky-ro; \
         echo x >> scripts/clean.sh 2>/dev/null || echo script-ro; \
         echo y > scripts/other.sh && echo other-rw",
    );
    assert_eq!(
        tr["data"]["stdout"], "husky-ro\nscript-ro\nother-rw\n",
        "{tr}"
    );
}

#[test]
fn without_namespaces_an_existing_repository_loses_only_what_the_command_added() {
    let ws = tempfile::tempdir().unwrap();
    assert!(git(ws.path(), &["init", "-q", "."]).status.success());
    let hooks = ws.path().join(".git/hooks");
    std::fs::write(hooks.join("pre-push"), "#!/bin/sh\nexit 0\n").unwrap();
    assert!(
        git(ws.path(), &["config", "user.name", "owner"])
            .status
            .success()
    );
    let mut s = Sidecar::start_with(crate::common::Opts {
        env: vec![(
            "OUTRIGGER_SANDBOX_DISABLE_LAYERS".into(),
            "namespaces".into(),
        )],
        ..Default::default()
    });
    let tr = bash(
        &mut s,
        ws.path(),
        "printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/pre-commit && \
         chmod +x .git/hooks/pre-commit && git config core.fsmonitor ./x && echo wrote",
    );
    assert_eq!(
        tr["data"]["stdout"], "wrote\n",
        "writable without namespaces: {tr}"
    );
    assert_eq!(tr["data"]["_sandbox"]["enforcement"], "partial", "{tr}");
    assert!(!hooks.join("pre-commit").exists(), "{tr}");
    assert!(
        hooks.join("pre-push").exists(),
        "the user's own hook stays: {tr}"
    );
    let cfg = git(ws.path(), &["config", "--list", "--local"]);
    let cfg = String::from_utf8_lossy(&cfg.stdout);
    assert!(
        cfg.contains("user.name=owner") && !cfg.contains("fsmonitor"),
        "{cfg}"
    );
}

#[test]
fn the_file_tools_never_write_inside_a_git_directory() {
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path();
    assert!(git(w, &["init", "-q"]).status.success());
    std::fs::create_dir_all(w.join("sub")).unwrap();
    std::os::unix::fs::symlink(w.join(".git/hooks"), w.join("sub/h")).unwrap();
    let mut s = Sidecar::start();
    let invoke = |s: &mut Sidecar, name: &str, args: Value| {
        s.ok(
            "tool.invoke",
            json!({"name": name, "arguments": args, "consentGranted": true,
                   "context": {"cwd": w}}),
        )
    };
    let hook = "#!/bin/sh\ntouch \"$HOME/pwned\"\n";
    for path in [
        ".git/hooks/pre-commit",
        ".git/config",
        ".GIT/hooks/post-checkout",
        "sub/h/pre-commit",
        ".git",
        "sub/.git",
    ] {
        let r = invoke(&mut s, "write_file", json!({"path": path, "content": hook}));
        assert_eq!(r["success"], false, "{path}: {r}");
        assert_eq!(r["data"]["code"], "path_protected", "{path}: {r}");
        assert!(r["error"].as_str().unwrap().contains("git"), "{r}");
    }
    assert!(!w.join(".git/hooks/pre-commit").exists());
    assert!(!w.join("sub/.git").exists());
    // apply_patch is refused the same way, and nothing of the patch is written.
    let r = invoke(
        &mut s,
        "apply_patch",
        json!({"patches": [{"path": ".git/description",
                            "edits": [{"oldText": "Unnamed", "newText": "x"}]}]}),
    );
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("git directory"),
        "{r}"
    );
    let description = std::fs::read_to_string(w.join(".git/description")).unwrap();
    assert!(description.contains("Unnamed"), "{description}");
    // Ordinary files next to the repository are still written.
    let r = invoke(
        &mut s,
        "write_file",
        json!({"path": "notes.txt", "content": "ok\n"}),
    );
    assert_eq!(r["success"], true, "{r}");
    // And the user's next commit runs no hook.
    assert!(git(w, &["add", "notes.txt"]).status.success());
    let out = git(
        w,
        &[
            "-c",
            "user.name=u",
            "-c",
            "user.email=u@x",
            "commit",
            "-qm",
            "m",
        ],
    );
    assert!(out.status.success(), "{out:?}");
}
