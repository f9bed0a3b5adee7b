//! Warm spawn (`sandbox_warm_idle_ms`): after a command the sidecar parks a spare process
//! in its own fresh cgroup, and the next command runs in it. A command must behave exactly as
//! when started cold: same environment, cwd, stdin, sandbox, exit status, process limit, and
//! nothing it starts outlives it. Each test proves the warm path was taken: the command runs
//! in the cgroup the parked spare was in, and the spare is consumed.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Opts, Sidecar, WAIT, wait_until};
use crate::processes::{all_running, assert_none_survive, detach_script, markers, survivors};
use crate::support::plugins::{Plugins, atomic_write, tool};

/// Parked spares of `sidecar`: its children running `__spawn-spare` that run no command:
/// their only children (a spare prepared for a policy has forked the namespace's init) run
/// `__spawn-spare` too and have none. (A spare running a sandboxed command keeps that
/// command line; it is the launcher then, and the command is its init's child.)
fn spares(sidecar: i32) -> Vec<i32> {
    let procs = ppids();
    let childless = |pid: i32| !procs.iter().any(|(_, pp, _)| *pp == pid);
    procs
        .iter()
        .filter(|(pid, ppid, spare)| {
            *ppid == sidecar
                && *spare
                && procs
                    .iter()
                    .filter(|(_, pp, _)| pp == pid)
                    .all(|(c, _, s)| *s && childless(*c))
        })
        .map(|(pid, _, _)| *pid)
        .collect()
}

/// Every process: (pid, ppid, whether it runs `__spawn-spare`).
fn ppids() -> Vec<(i32, i32, bool)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // The ppid is the second field after the parenthesised command name.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if let Some(ppid) = ppid {
            let spare = cmd.split(|b| *b == 0).nth(1) == Some(&b"__spawn-spare"[..]);
            out.push((pid, ppid, spare));
        }
    }
    out
}

/// `sandbox_warm_spares = 1`: the tests that follow one spare through its life (which one
/// serves, which one is prepared) run with one; the pool of two has its own tests below.
const ONE: (&str, &str) = ("OUTRIGGER_SANDBOX_WARM_SPARES", "1");

fn one(mut env: Vec<(String, String)>) -> Opts {
    env.push((ONE.0.into(), ONE.1.into()));
    Opts {
        env,
        ..Default::default()
    }
}

/// A sidecar keeping one warm spare.
fn start_one() -> Sidecar {
    Sidecar::start_with(one(vec![]))
}

/// Waits for exactly one parked spare and returns its pid.
fn parked(s: &Sidecar) -> i32 {
    assert!(
        wait_until(WAIT, || spares(s.pid()).len() == 1),
        "one spare parked: {:?}",
        spares(s.pid())
    );
    spares(s.pid())[0]
}

/// Whether `pid` has exited (gone, or a zombie nobody reaped yet).
fn gone(pid: i32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
        || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| st.contains(") Z "))
}

/// The pids-hierarchy line of a process's `/proc/<pid>/cgroup`.
fn pids_cgroup(pid: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.contains(":pids:"))
        .unwrap_or("")
        .to_string()
}

/// A parked spare's pids line once it has joined its own cgroup (it does so after it
/// starts, which under load can take a while); as read last if it never leaves the root.
fn spare_cgroup(spare: i32) -> String {
    let line = || pids_cgroup(&spare.to_string());
    wait_until(WAIT, || !line().ends_with(":/"));
    line()
}

fn bash(s: &mut Sidecar, ws: &Path, command: &str) -> Value {
    s.ok(
        "tool.invoke",
        json!({"name": "bash", "consentGranted": true, "context": {"cwd": ws},
               "arguments": {"command": command}}),
    )
}

/// Everything a command can observe about how it was started, minus what differs per call
/// by design (the private temp dir, the cgroup's number).
const PROBE: &str = r#"env | grep -v -e '^TMPDIR=' -e '^TMP=' -e '^TEMP=' -e '^_=' | sort
echo "pwd=$(pwd)"
echo "stdin=$(cat | wc -c)"
echo "sigpipe=$(trap -p PIPE | wc -c)"
touch "$OUTSIDE/x" 2>/dev/null && echo "outside=written" || echo "outside=refused"
cat ~/.netrc 2>/dev/null || echo "netrc=hidden"
echo "tmp=$(touch "$TMPDIR/x" && echo ok)"
echo "cg=$(grep :pids: /proc/self/cgroup | sed 's/-[0-9]*$//')"
echo "pidsmax=$(cat /sys/fs/cgroup/pids$(grep :pids: /proc/self/cgroup | cut -d: -f3)/pids.max 2>/dev/null)"
exit 3"#;

/// Runs [`PROBE`] cold, then warm, checks what must hold either way and that both saw the
/// same; returns the output.
fn same_cold_and_warm(env: Vec<(String, String)>) -> String {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".netrc"), "machine x password hunter2\n").unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut env = env;
    env.push((ONE.0.into(), ONE.1.into()));
    env.push(("AWS_SECRET_ACCESS_KEY".into(), "leaked".into()));
    env.push(("OUTRIGGER_SANDBOX_MAX_PROCESSES".into(), "77".into()));
    let outside = tempfile::tempdir().unwrap();
    // Kept by the environment scrub (no secret-like name): where the probe tries to write.
    env.push(("OUTSIDE".into(), outside.path().display().to_string()));
    let mut s = Sidecar::start_with(Opts {
        env,
        home: Some(home),
        ..Default::default()
    });
    assert!(
        spares(s.pid()).is_empty(),
        "no spare before the first command"
    );
    let cold = bash(&mut s, ws.path(), PROBE);
    let spare = parked(&s);
    let spare_cg = spare_cgroup(spare);
    let warm = bash(
        &mut s,
        ws.path(),
        &format!("grep :pids: /proc/self/cgroup >&2\n{PROBE}"),
    );
    // The warm command ran in the spare's cgroup, and the spare was used up.
    assert!(!spare_cg.is_empty(), "the spare is in a pids cgroup");
    assert_eq!(
        warm["data"]["stderr"].as_str().unwrap().trim(),
        spare_cg,
        "{warm}"
    );
    assert!(!spares(s.pid()).contains(&spare), "the spare was consumed");
    parked(&s);

    for r in [&cold, &warm] {
        assert_eq!(r["data"]["exitCode"], 3, "{r}");
        let out = r["data"]["stdout"].as_str().unwrap();
        assert!(!out.contains("AWS_SECRET_ACCESS_KEY"), "{out}");
        assert!(
            out.contains(&format!("pwd={}\n", ws.path().display())),
            "{out}"
        );
        assert!(out.contains("stdin=0\n"), "{out}");
        assert!(out.contains("sigpipe=0\n"), "SIGPIPE at its default: {out}");
        assert!(out.contains("tmp=ok\n"), "{out}");
        assert!(out.contains("pidsmax=77\n"), "{out}");
    }
    assert_eq!(cold["data"]["stdout"], warm["data"]["stdout"]);
    cold["data"]["stdout"].as_str().unwrap().to_string()
}

#[test]
fn a_sandboxed_command_is_the_same_cold_and_warm() {
    // The sandbox held in both.
    let out = same_cold_and_warm(vec![]);
    assert!(out.contains("outside=refused\n"), "{out}");
    assert!(out.contains("netrc=hidden\n"), "{out}");
    assert!(!out.contains("hunter2"), "{out}");
}

#[test]
fn an_unsandboxed_command_is_the_same_cold_and_warm_and_is_the_spare_itself() {
    let out = same_cold_and_warm(vec![("OUTRIGGER_SANDBOX_ENABLED".into(), "false".into())]);
    assert!(out.contains("outside=written\n"), "{out}");
    // Without the launcher the spare execs bash itself: `$$` is the parked spare's pid.
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start_with(one(vec![(
        "OUTRIGGER_SANDBOX_ENABLED".into(),
        "false".into(),
    )]));
    bash(&mut s, ws.path(), "true");
    let spare = parked(&s);
    let r = bash(&mut s, ws.path(), "echo $$");
    assert_eq!(r["data"]["stdout"], format!("{spare}\n"), "{r}");
}

#[test]
fn a_call_whose_cwd_vanished_is_refused_and_the_spare_serves_the_next() {
    let ws = tempfile::tempdir().unwrap();
    let gone = ws.path().join("sub");
    std::fs::create_dir(&gone).unwrap();
    let mut s = start_one();
    let r = bash(&mut s, &gone, "pwd");
    assert_eq!(r["data"]["exitCode"], 0, "{r}");
    let spare = parked(&s);
    std::fs::remove_dir(&gone).unwrap();
    let r = s.call(
        "tool.invoke",
        json!({"name": "bash", "consentGranted": true, "context": {"cwd": &gone},
               "arguments": {"command": "pwd"}}),
    );
    let refused = r["error"]["code"] == -32602 || r["result"]["success"] == false;
    assert!(refused, "{r}");
    let spare_cg = spare_cgroup(spare);
    let r = bash(&mut s, ws.path(), "grep :pids: /proc/self/cgroup");
    assert_eq!(
        r["data"]["stdout"].as_str().unwrap().trim(),
        spare_cg,
        "{r}"
    );
}

#[test]
fn detached_children_of_a_warm_command_die_when_it_ends_and_on_timeout() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start_one();
    bash(&mut s, ws.path(), "true");
    parked(&s);
    let m = markers(3801, 7);
    let r = bash(&mut s, ws.path(), &format!("{}echo $n", detach_script(&m)));
    assert_eq!(r["data"]["stdout"], "7\n", "all seven started: {r}");
    assert_none_survive(&m, "warm bash call ended");

    parked(&s);
    let m = markers(3802, 7);
    let r = s.ok(
        "tool.invoke",
        json!({"name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
               "arguments": {"command": format!("{}sleep 600", detach_script(&m)),
                             "timeoutMs": 3000}}),
    );
    assert_eq!(r["data"]["timedOut"], true, "{r}");
    assert_none_survive(&m, "warm bash call timed out");
}

#[test]
fn a_warm_command_and_the_parked_spare_die_with_a_sigkilled_sidecar() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start_one();
    bash(&mut s, ws.path(), "true");
    parked(&s);
    let m = markers(3803, 7);
    s.send(
        &json!({"jsonrpc": "2.0", "id": "bg", "method": "tool.invoke", "params": {
        "name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
        "arguments": {"command": format!("{}sleep 600", detach_script(&m))}}}),
    );
    assert!(wait_until(WAIT, || all_running(&m)), "all seven started");
    let next = parked(&s);
    s.child.kill().unwrap(); // SIGKILL
    let _ = s.child.wait();
    assert_none_survive(&m, "sidecar SIGKILLed during a warm bash call");
    assert!(
        wait_until(Duration::from_secs(5), || gone(next)),
        "the parked spare {next} outlived the sidecar"
    );
}

#[test]
fn an_idle_spare_is_let_go_and_warm_spawn_can_be_turned_off() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start_with(one(vec![(
        "OUTRIGGER_SANDBOX_WARM_IDLE_MS".into(),
        "300".into(),
    )]));
    bash(&mut s, ws.path(), "true");
    let spare = parked(&s);
    let cg = spare_cgroup(spare);
    assert!(
        wait_until(Duration::from_secs(5), || spares(s.pid()).is_empty()),
        "the idle spare was let go"
    );
    // Its cgroup went with it.
    if let Some(rel) = cg.split(":pids:").nth(1) {
        let dir = Path::new("/sys/fs/cgroup/pids").join(rel.trim_start_matches('/'));
        assert!(
            wait_until(Duration::from_secs(5), || !dir.exists()),
            "{} left behind",
            dir.display()
        );
    }

    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_SANDBOX_WARM_IDLE_MS".into(), "0".into())],
        ..Default::default()
    });
    for _ in 0..2 {
        let r = bash(&mut s, ws.path(), "echo cold");
        assert_eq!(r["data"]["stdout"], "cold\n", "{r}");
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(spares(s.pid()).is_empty(), "no spare with warm spawn off");
}

#[test]
fn plugin_calls_get_their_arguments_on_stdin_warm() {
    let p = Plugins::new();
    // Echoes its JSON arguments back as the result, with its own cgroup.
    atomic_write(
        &p.path().join("bin/echo_args"),
        "#!/bin/sh\nargs=$(cat)\ncg=$(grep :pids: /proc/self/cgroup)\nprintf '{\"ok\": true, \"result\": {\"args\": %s, \"cg\": \"%s\"}}\\n' \"$args\" \"$cg\"\n",
        0o755,
    );
    p.manifest(
        "echo.toml",
        &tool(
            "echo_args",
            "Echoes its arguments",
            "echo_args",
            "20s",
            "[tools.parameters]\ntype = \"object\"\nproperties = { n = { type = \"integer\" } }\n",
        ),
    );
    let mut env = p.env();
    env.push((ONE.0.into(), ONE.1.into()));
    let mut s = Sidecar::start_with(Opts {
        env,
        ..Default::default()
    });
    let first = s.ok(
        "tool.invoke",
        json!({"name": "echo_args", "arguments": {"n": 1}}),
    );
    assert_eq!(first["data"]["result"]["args"], json!({"n": 1}), "{first}");
    let spare = parked(&s);
    let spare_cg = spare_cgroup(spare);
    let second = s.ok(
        "tool.invoke",
        json!({"name": "echo_args", "arguments": {"n": 2}}),
    );
    assert_eq!(
        second["data"]["result"]["args"],
        json!({"n": 2}),
        "{second}"
    );
    assert_eq!(
        second["data"]["result"]["cg"], spare_cg,
        "ran in the spare: {second}"
    );
    // Two calls with one policy: the next spare prepares ahead, and its init gets the
    // stdin pipe with the order.
    let (spare, _init) = ready_ahead(&s);
    let spare_cg = spare_cgroup(spare);
    let third = s.ok(
        "tool.invoke",
        json!({"name": "echo_args", "arguments": {"n": 3}}),
    );
    assert_eq!(third["data"]["result"]["args"], json!({"n": 3}), "{third}");
    assert_eq!(
        third["data"]["result"]["cg"], spare_cg,
        "ran in the prepared spare: {third}"
    );
}

// ---- spares prepared ahead (`sandbox/ahead.rs`) ----

/// The syscall number of `recvmsg` on this architecture (a message's first byte is read with
/// it, for the descriptor that may come along), as `/proc/<pid>/syscall` shows it
/// (elsewhere: `None`, and a sleeping init is taken as done preparing).
#[cfg(target_arch = "x86_64")]
const SYS_RECVMSG: Option<&str> = Some("47");
#[cfg(target_arch = "aarch64")]
const SYS_RECVMSG: Option<&str> = Some("212");
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const SYS_RECVMSG: Option<&str> = None;

/// Whether `init` is blocked reading its order socket (fd 3).
fn waiting_for_order(init: i32) -> bool {
    match SYS_RECVMSG {
        Some(recvmsg) => std::fs::read_to_string(format!("/proc/{init}/syscall")).is_ok_and(|sc| {
            let mut f = sc.split_whitespace();
            f.next() == Some(recvmsg) && f.next() == Some("0x3")
        }),
        None => {
            std::thread::sleep(Duration::from_millis(500));
            std::fs::read_to_string(format!("/proc/{init}/stat")).is_ok_and(|st| {
                st.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('S'))
            })
        }
    }
}

/// Waits for a parked spare prepared ahead, done preparing: its child (the namespace's
/// init) is blocked reading the order socket (fd 3). Returns (spare, init).
fn ready_ahead(s: &Sidecar) -> (i32, i32) {
    let found = || -> Option<(i32, i32)> {
        let procs = ppids();
        spares(s.pid()).into_iter().find_map(|spare| {
            let (init, _, _) = procs.iter().find(|(_, pp, _)| *pp == spare)?;
            waiting_for_order(*init).then_some((spare, *init))
        })
    };
    assert!(
        wait_until(WAIT, || found().is_some()),
        "no spare prepared ahead: {:?}",
        spares(s.pid())
    );
    found().unwrap()
}

#[test]
fn a_command_in_a_spare_prepared_ahead_is_the_same_as_cold() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".netrc"), "machine x password hunter2\n").unwrap();
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![
            ("OUTRIGGER_SANDBOX_MAX_PROCESSES".into(), "77".into()),
            ("OUTSIDE".into(), outside.path().display().to_string()),
            (ONE.0.into(), ONE.1.into()),
        ],
        home: Some(home),
        ..Default::default()
    });
    let cold = bash(&mut s, ws.path(), PROBE);
    parked(&s);
    // The second command with the same policy: the spare after it prepares for it.
    let warm = bash(&mut s, ws.path(), PROBE);
    let (spare, _) = ready_ahead(&s);
    let spare_cg = spare_cgroup(spare);
    let ahead = bash(
        &mut s,
        ws.path(),
        &format!("grep :pids: /proc/self/cgroup >&2\necho pid=$$\n{PROBE}"),
    );
    assert_eq!(
        ahead["data"]["stderr"].as_str().unwrap().trim(),
        spare_cg,
        "it ran in the prepared spare: {ahead}"
    );
    let out = ahead["data"]["stdout"].as_str().unwrap();
    // Pid 1 is the namespace's init, so the command is pid 2 as when started cold.
    let probe_out = out.strip_prefix("pid=2\n").expect(out);
    assert_eq!(probe_out, cold["data"]["stdout"].as_str().unwrap());
    assert_eq!(cold["data"]["stdout"], warm["data"]["stdout"]);
    assert_eq!(ahead["data"]["exitCode"], 3, "{ahead}");
    for want in [
        "outside=refused\n",
        "netrc=hidden\n",
        "tmp=ok\n",
        "pidsmax=77\n",
    ] {
        assert!(probe_out.contains(want), "{want}: {probe_out}");
    }
}

#[test]
fn a_file_made_beside_a_hidden_one_after_the_spare_prepared_is_readable() {
    // `$HOME` apart from `$OUTRIGGER_HOME` (hidden whole): a directory that holds a hidden
    // entry (`.netrc`) and others the command may read.
    let user_home = tempfile::tempdir().unwrap();
    let home_path = user_home.path().to_path_buf();
    std::fs::write(home_path.join(".netrc"), "machine x password hunter2\n").unwrap();
    std::fs::write(home_path.join("old.txt"), "there before\n").unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start_with(one(vec![("HOME".into(), home_path.display().to_string())]));
    bash(&mut s, ws.path(), "true");
    bash(&mut s, ws.path(), "true");
    let (spare, _) = ready_ahead(&s);
    let spare_cg = spare_cgroup(spare);
    // The home directory is what the ruleset's walk listed (it holds hidden entries); a
    // ruleset built before this file existed grants nothing for it.
    std::fs::write(home_path.join("fresh.txt"), "made after\n").unwrap();
    std::fs::create_dir(home_path.join("newdir")).unwrap();
    std::fs::write(home_path.join("newdir/f"), "inside\n").unwrap();
    let r = bash(
        &mut s,
        ws.path(),
        "grep :pids: /proc/self/cgroup >&2; cat ~/old.txt ~/fresh.txt ~/newdir/f; cat ~/.netrc 2>/dev/null || echo netrc=hidden",
    );
    assert_eq!(
        r["data"]["stdout"], "there before\nmade after\ninside\nnetrc=hidden\n",
        "{r}"
    );
    assert_eq!(
        r["data"]["stderr"].as_str().unwrap().trim(),
        spare_cg,
        "it still ran in the prepared spare: {r}"
    );
}

#[test]
fn a_protected_name_made_after_the_spare_prepared_stays_read_only() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start_one();
    bash(&mut s, ws.path(), "true");
    bash(&mut s, ws.path(), "true");
    ready_ahead(&s);
    // Not there when the spare bound the protected names read-only.
    std::fs::write(ws.path().join(".envrc"), "export A=1\n").unwrap();
    std::fs::create_dir(ws.path().join(".git")).unwrap();
    std::fs::write(ws.path().join(".git/config"), "[core]\n").unwrap();
    let r = bash(
        &mut s,
        ws.path(),
        "echo pwned >> .envrc && echo envrc=written || echo envrc=refused; \
         echo x >> .git/config && echo git=written || echo git=refused",
    );
    assert_eq!(r["data"]["stdout"], "envrc=refused\ngit=refused\n", "{r}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".envrc")).unwrap(),
        "export A=1\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".git/config")).unwrap(),
        "[core]\n"
    );
}

#[test]
fn a_spare_prepared_for_one_policy_never_serves_another() {
    policy_never_crosses(start_one());
}

#[test]
fn no_spare_of_two_prepared_for_one_policy_serves_another() {
    policy_never_crosses(Sidecar::start());
}

fn policy_never_crosses(mut s: Sidecar) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let ws = tempfile::tempdir().unwrap();
    let connect = format!(
        "(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused"
    );
    let call = |s: &mut Sidecar, network: bool| {
        s.ok(
            "tool.invoke",
            json!({"name": "bash", "consentGranted": true,
                   "context": {"cwd": ws.path(), "execSandbox": {"network": network}},
                   "arguments": {"command": connect}}),
        )
    };
    for _ in 0..2 {
        assert_eq!(call(&mut s, false)["data"]["stdout"], "refused\n");
    }
    ready_ahead(&s);
    let r = call(&mut s, true);
    assert_eq!(r["data"]["stdout"], "connected\n", "{r}");
    let r = call(&mut s, true);
    assert_eq!(r["data"]["stdout"], "connected\n", "{r}");
    ready_ahead(&s);
    let r = call(&mut s, false);
    assert_eq!(r["data"]["stdout"], "refused\n", "{r}");
}

#[test]
fn a_spare_prepared_ahead_dies_with_a_sigkilled_sidecar() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = start_one();
    bash(&mut s, ws.path(), "true");
    bash(&mut s, ws.path(), "true");
    let (spare, init) = ready_ahead(&s);
    s.child.kill().unwrap(); // SIGKILL
    let _ = s.child.wait();
    assert!(
        wait_until(Duration::from_secs(5), || gone(spare) && gone(init)),
        "the prepared spare {spare} or its init {init} outlived the sidecar"
    );
}

#[test]
fn a_prepared_spare_reports_only_once_everything_the_command_started_is_dead() {
    let ws = tempfile::tempdir().unwrap();
    // Without a cgroup to kill the command's tree, only the namespace's init can: the
    // `setsid` sleep leaves the process group and holds none of the command's pipes.
    let mut s = Sidecar::start_with(one(vec![(
        "OUTRIGGER_SANDBOX_DISABLE_LAYERS".into(),
        "cgroup".into(),
    )]));
    bash(&mut s, ws.path(), "true");
    bash(&mut s, ws.path(), "true");
    let (spare, init) = ready_ahead(&s);
    let m = markers(3803, 8);
    let r = bash(
        &mut s,
        ws.path(),
        &format!(
            "setsid sleep {} >/dev/null 2>&1 </dev/null &\n{}echo $n\necho err >&2\nexit 5",
            m[7],
            detach_script(&m[..7])
        ),
    );
    assert_eq!(r["data"]["exitCode"], 5, "{r}");
    assert_eq!(
        r["data"]["stdout"], "7\n",
        "all seven started, output whole: {r}"
    );
    assert_eq!(r["data"]["stderr"], "err\n", "{r}");
    // Not waited for: by the time the result is out, nothing the command started runs.
    assert_eq!(survivors(&m), Vec::<String>::new(), "still running");
    // It ran in the prepared spare, which is gone with it.
    assert!(
        wait_until(WAIT, || gone(spare) && gone(init)),
        "the spare {spare} or its init {init} was not reaped"
    );
    let r = bash(&mut s, ws.path(), "echo next");
    assert_eq!(r["data"]["stdout"], "next\n", "{r}");
}

// ---- the pool of two (`sandbox_warm_spares`, default 2) ----

/// Waits until `n` spares are parked, each in a pids cgroup of its own; returns them with
/// their cgroup lines.
fn parked_n(s: &Sidecar, n: usize) -> Vec<(i32, String)> {
    assert!(
        wait_until(WAIT, || spares(s.pid()).len() == n),
        "{n} spares parked: {:?}",
        spares(s.pid())
    );
    let got: Vec<(i32, String)> = spares(s.pid())
        .into_iter()
        .map(|p| (p, spare_cgroup(p)))
        .collect();
    let mut cgs: Vec<&String> = got.iter().map(|(_, cg)| cg).collect();
    cgs.sort();
    cgs.dedup();
    assert_eq!(cgs.len(), n, "each spare in its own cgroup: {got:?}");
    assert!(
        got.iter().all(|(_, cg)| !cg.ends_with(":/")),
        "every spare left the root cgroup: {got:?}"
    );
    got
}

#[test]
fn two_spares_wait_and_commands_back_to_back_each_take_one() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    bash(&mut s, ws.path(), "true");
    let mut waiting = parked_n(&s, 2);
    for i in 0..4 {
        let r = bash(
            &mut s,
            ws.path(),
            &format!("grep :pids: /proc/self/cgroup >&2; echo {i}"),
        );
        assert_eq!(r["data"]["stdout"], format!("{i}\n"), "{r}");
        let ran_in = r["data"]["stderr"].as_str().unwrap().trim().to_string();
        let used: Vec<i32> = waiting
            .iter()
            .filter(|(_, cg)| *cg == ran_in)
            .map(|(p, _)| *p)
            .collect();
        assert_eq!(
            used.len(),
            1,
            "command {i} ran in a parked spare: {r} {waiting:?}"
        );
        let now = parked_n(&s, 2);
        let pids: Vec<i32> = now.iter().map(|(p, _)| *p).collect();
        assert!(
            !pids.contains(&used[0]),
            "the spare that served was used up"
        );
        assert!(
            waiting
                .iter()
                .any(|(p, _)| *p != used[0] && pids.contains(p)),
            "the other spare still waits: before {waiting:?}, now {now:?}"
        );
        waiting = now;
    }
}

#[test]
fn two_commands_at_once_both_start_warm() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    bash(&mut s, ws.path(), "true");
    let waiting = parked_n(&s, 2);
    for id in ["a", "b"] {
        s.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tool.invoke", "params": {
            "name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
            "arguments": {"command": "grep :pids: /proc/self/cgroup; sleep 0.3"}}}),
        );
    }
    let mut ran_in: Vec<String> = ["a", "b"]
        .iter()
        .map(|id| {
            let r = s.response(&json!(id));
            assert_eq!(r["result"]["success"], true, "{r}");
            r["result"]["data"]["stdout"]
                .as_str()
                .unwrap()
                .trim()
                .to_string()
        })
        .collect();
    ran_in.sort();
    let mut parked_cgs: Vec<String> = waiting.into_iter().map(|(_, cg)| cg).collect();
    parked_cgs.sort();
    assert_eq!(
        ran_in, parked_cgs,
        "each ran in one of the two parked spares"
    );
    parked_n(&s, 2);
}

#[test]
fn both_spares_die_with_a_sigkilled_sidecar_and_go_when_idle() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start();
    bash(&mut s, ws.path(), "true");
    let both = parked_n(&s, 2);
    s.child.kill().unwrap(); // SIGKILL
    let _ = s.child.wait();
    assert!(
        wait_until(Duration::from_secs(5), || both
            .iter()
            .all(|(p, _)| gone(*p))),
        "a parked spare outlived the sidecar: {both:?}"
    );

    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_SANDBOX_WARM_IDLE_MS".into(), "400".into())],
        ..Default::default()
    });
    bash(&mut s, ws.path(), "true");
    let both = parked_n(&s, 2);
    assert!(
        wait_until(Duration::from_secs(5), || spares(s.pid()).is_empty()),
        "the idle spares were let go"
    );
    for (_, cg) in &both {
        let rel = cg.split(":pids:").nth(1).unwrap();
        let dir = Path::new("/sys/fs/cgroup/pids").join(rel.trim_start_matches('/'));
        assert!(
            wait_until(Duration::from_secs(5), || !dir.exists()),
            "{} left behind",
            dir.display()
        );
    }
}

#[test]
fn sandbox_warm_spares_sets_how_many_wait_and_zero_starts_cold() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_SANDBOX_WARM_SPARES".into(), "3".into())],
        ..Default::default()
    });
    bash(&mut s, ws.path(), "true");
    parked_n(&s, 3);

    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_SANDBOX_WARM_SPARES".into(), "0".into())],
        ..Default::default()
    });
    for _ in 0..2 {
        let r = bash(&mut s, ws.path(), "echo cold");
        assert_eq!(r["data"]["stdout"], "cold\n", "{r}");
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        spares(s.pid()).is_empty(),
        "no spare with sandbox_warm_spares = 0"
    );
    // Past the ceiling: the boot fails naming the key and its range.
    let home = tempfile::tempdir().unwrap();
    let (status, out, err) = crate::common::run_once(
        home.path(),
        &[],
        &[("OUTRIGGER_SANDBOX_WARM_SPARES", "5")],
        b"",
    );
    assert_eq!(status.code(), Some(2), "stdout {out} stderr {err}");
    assert!(
        err.contains("sandbox_warm_spares") && err.contains('4'),
        "{err}"
    );
}
