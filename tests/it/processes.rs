//! Nothing a command starts outlives it, and a command cannot start more than
//! `sandbox_max_processes`: the six ways of detaching a process (`&`, `setsid`, `nohup`,
//! `disown`, a double fork that also calls `setsid`, a child ignoring SIGTERM/SIGHUP) plus
//! `setsid -f`, for `bash` and for plugin executables, after the call ends and after the
//! sidecar is SIGKILLed; a fork bomb and a burst of 300 children within the cap; the
//! `bash_max_timeout_ms` ceiling. Real processes, found on the host by unique `sleep`
//! arguments (a plugin's `$$` is a namespace pid now).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{BIN, Opts, Sidecar, WAIT, pids_with_arg, wait_until};
use crate::support::plugins::{Plugins, atomic_write, tool};
use serde_json::{Value, json};

/// Unique `sleep` arguments for one test: `<base>.<our pid><style>`.
pub(crate) fn markers(base: u32, n: usize) -> Vec<String> {
    (1..=n)
        .map(|i| format!("{base}.{:06}{i}", std::process::id() % 1_000_000))
        .collect()
}

/// A bash script that detaches one `sleep` per style, waits until all of them run (seen in
/// its own /proc), and prints how many it saw.
pub(crate) fn detach_script(m: &[String]) -> String {
    format!(
        "sleep {} &\n\
         setsid sleep {} &\n\
         nohup sleep {} >/dev/null 2>&1 &\n\
         sleep {} & disown\n\
         ( setsid sleep {} & ) &\n\
         sh -c 'trap \"\" TERM HUP INT; exec sleep {}' &\n\
         setsid -f sleep {}\n\
         for i in $(seq 100); do\n\
           n=0; for m in {}; do\n\
             for c in /proc/[0-9]*/cmdline; do\n\
               if tr '\\0' ' ' < $c 2>/dev/null | grep -q \"^sleep $m \"; then n=$((n+1)); break; fi\n\
             done\n\
           done\n\
           [ $n -ge {} ] && break; sleep 0.05\n\
         done\n",
        m[0],
        m[1],
        m[2],
        m[3],
        m[4],
        m[5],
        m[6],
        m.join(" "),
        m.len()
    )
}

pub(crate) fn all_running(m: &[String]) -> bool {
    m.iter().all(|x| !pids_with_arg(x).is_empty())
}

pub(crate) fn survivors(m: &[String]) -> Vec<String> {
    m.iter()
        .filter(|x| !pids_with_arg(x).is_empty())
        .cloned()
        .collect()
}

pub(crate) fn assert_none_survive(m: &[String], what: &str) {
    let ok = wait_until(Duration::from_secs(5), || survivors(m).is_empty());
    assert!(ok, "{what}: still running: {:?}", survivors(m));
}

fn bash_call(id: &str, ws: &Path, command: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tool.invoke", "params": {
        "name": "bash", "consentGranted": true, "context": {"cwd": ws},
        "arguments": {"command": command}}})
}

/// A plugin dir with `detach` (detaches, reports, exits) and `detach_hold` (detaches, then
/// hangs), both bash scripts.
fn detach_plugins(m: &[String]) -> Plugins {
    let p = Plugins::new();
    let script = detach_script(m);
    let exit = format!(
        "#!/bin/bash\ncat >/dev/null\n{script}echo \"{{\\\"ok\\\": true, \\\"result\\\": $n}}\"\n"
    );
    let hold = format!("#!/bin/bash\ncat >/dev/null\n{script}sleep 600\n");
    atomic_write(&p.path().join("bin/detach"), &exit, 0o755);
    atomic_write(&p.path().join("bin/detach_hold"), &hold, 0o755);
    p.manifest(
        "detach.toml",
        &format!(
            "{}{}",
            tool("detach", "Detaches children", "detach", "20s", ""),
            tool(
                "detach_hold",
                "Detaches, then hangs",
                "detach_hold",
                "2m",
                ""
            )
        ),
    );
    p
}

#[test]
fn detached_bash_children_die_when_the_call_ends() {
    let ws = tempfile::tempdir().unwrap();
    let m = markers(3701, 7);
    let mut s = Sidecar::start();
    let script = format!("{}echo $n", detach_script(&m));
    let tr = s.ok(
        "tool.invoke",
        json!({"name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
               "arguments": {"command": script}}),
    );
    assert_eq!(tr["data"]["stdout"], "7\n", "all seven started: {tr}");
    assert_none_survive(&m, "bash call ended");
}

#[test]
fn detached_bash_children_die_with_a_sigkilled_sidecar() {
    let ws = tempfile::tempdir().unwrap();
    let m = markers(3702, 7);
    let mut s = Sidecar::start();
    s.send(&bash_call(
        "bg",
        ws.path(),
        &format!("{}sleep 600", detach_script(&m)),
    ));
    assert!(wait_until(WAIT, || all_running(&m)), "all seven started");
    s.child.kill().unwrap(); // SIGKILL
    let _ = s.child.wait();
    assert_none_survive(&m, "sidecar SIGKILLed during a bash call");
}

#[test]
fn detached_plugin_children_die_when_the_call_ends() {
    let m = markers(3703, 7);
    let p = detach_plugins(&m);
    let mut s = p.start();
    let tr = s.ok("tool.invoke", json!({"name": "detach", "arguments": {}}));
    assert_eq!(tr["success"], true, "{tr}");
    assert_eq!(tr["data"]["result"], 7, "all seven started: {tr}");
    assert_none_survive(&m, "plugin call ended");
    s.ok("system.ping", Value::Null);
}

#[test]
fn detached_plugin_children_die_with_a_sigkilled_sidecar() {
    let m = markers(3704, 7);
    let p = detach_plugins(&m);
    let mut s = p.start();
    s.send(
        &json!({"jsonrpc": "2.0", "id": "hold", "method": "tool.invoke",
                   "params": {"name": "detach_hold", "arguments": {}}}),
    );
    assert!(wait_until(WAIT, || all_running(&m)), "all seven started");
    s.child.kill().unwrap(); // SIGKILL
    let _ = s.child.wait();
    assert_none_survive(&m, "sidecar SIGKILLed during a plugin call");
}

#[test]
fn detached_plugin_children_die_on_timeout() {
    let m = markers(3705, 7);
    let p = Plugins::new();
    let body = format!(
        "#!/bin/bash\ncat >/dev/null\n{}sleep 600\n",
        detach_script(&m)
    );
    atomic_write(&p.path().join("bin/slow"), &body, 0o755);
    p.manifest("slow.toml", &tool("slow", "Times out", "slow", "4s", ""));
    let mut s = p.start();
    s.send(
        &json!({"jsonrpc": "2.0", "id": "slow", "method": "tool.invoke",
                   "params": {"name": "slow", "arguments": {}}}),
    );
    assert!(wait_until(WAIT, || all_running(&m)), "all seven started");
    let r = s.response(&json!("slow"));
    assert_eq!(r["result"]["data"]["kind"], "timeout", "{r}");
    assert_none_survive(&m, "plugin timed out");
}

/// The sidecar's pids cgroup directory (v1 hierarchy mounted at the usual place).
fn v1_pids_dir(pid: i32) -> Option<std::path::PathBuf> {
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = own
        .lines()
        .find_map(|l| l.split_once(":pids:").map(|(_, p)| p.to_string()))?;
    let dir = Path::new("/sys/fs/cgroup/pids").join(path.trim_start_matches('/'));
    dir.exists().then_some(dir)
}

/// The sidecar's command cgroups, except the one a parked warm spare waits in (its only
/// member is the spare: `sandbox_warm_idle_ms`).
fn command_cgroups(base: &Path, sidecar: i32) -> Vec<String> {
    std::fs::read_dir(base)
        .map(|d| {
            d.flatten()
                .filter(|e| !is_spare_cgroup(&e.path()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("outrigger-{sidecar}-")))
                .collect()
        })
        .unwrap_or_default()
}

fn is_spare_cgroup(dir: &Path) -> bool {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    let pids: Vec<&str> = procs.split_whitespace().collect();
    pids.len() == 1
        && std::fs::read(format!("/proc/{}/cmdline", pids[0]))
            .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(&b"__spawn-spare"[..]))
}

fn limited(max: u32, extra: &[(&str, &str)]) -> Sidecar {
    let mut env = vec![(
        "OUTRIGGER_SANDBOX_MAX_PROCESSES".to_string(),
        max.to_string(),
    )];
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Sidecar::start_with(Opts {
        env,
        ..Default::default()
    })
}

#[test]
fn describe_reports_the_process_limit() {
    let mut s = Sidecar::start();
    let d = s.ok("sandbox.describe", json!({}));
    let limit = &d["processLimit"];
    assert_eq!(limit["max"], 256, "{d}");
    let mechanism = limit["mechanism"].as_str().unwrap();
    assert!(
        ["cgroup_v2", "cgroup_v1", "rlimit", "none"].contains(&mechanism),
        "{d}"
    );
    // This host has a writable v1 pids hierarchy (and no pids controller in cgroup2).
    if v1_pids_dir(s.pid()).is_some() {
        assert_eq!(mechanism, "cgroup_v1", "{d}");
    }
    // Without cgroups: RLIMIT_NPROC in the user namespace, except for root, which it does
    // not bind (the kernel exempts the initial namespace's root even inside a new one).
    let mut s = limited(64, &[("OUTRIGGER_SANDBOX_DISABLE_LAYERS", "cgroup")]);
    let d = s.ok("sandbox.describe", json!({}));
    let root = nix::unistd::geteuid().is_root();
    assert_eq!(
        d["processLimit"],
        json!({"mechanism": if root { "none" } else { "rlimit" }, "max": 64}),
        "{d}"
    );
    // Disabled namespaces leave nothing for the rlimit to bind in.
    let mut s = limited(
        64,
        &[("OUTRIGGER_SANDBOX_DISABLE_LAYERS", "cgroup,namespaces")],
    );
    let d = s.ok("sandbox.describe", json!({}));
    assert_eq!(
        d["processLimit"],
        json!({"mechanism": "none", "max": 64}),
        "{d}"
    );
}

#[test]
fn a_burst_of_children_stops_at_the_cap() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = limited(40, &[]);
    let d = s.ok("sandbox.describe", json!({}));
    if d["processLimit"]["mechanism"] == "none" {
        eprintln!("skipped: no process limit on this host ({d})");
        return;
    }
    // 300 children of about 1 s each: without a cap nearly all run at once; with it, bash's
    // forks fail (EAGAIN) and it retries them until the call's timeout.
    let m = markers(1, 1).remove(0);
    let command = format!("for i in $(seq 300); do sleep {m} & done 2>/dev/null; wait");
    s.send(
        &json!({"jsonrpc": "2.0", "id": "burst", "method": "tool.invoke", "params": {
        "name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
        "arguments": {"command": command, "timeoutMs": 3000}}}),
    );
    let started = Instant::now();
    let mut max = 0;
    while started.elapsed() < Duration::from_millis(2500) {
        max = max.max(pids_with_arg(&m).len());
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = s.response(&json!("burst"));
    assert!(r.get("result").is_some(), "{r}");
    assert!(max > 10, "children ran up to the cap: {max}");
    assert!(max <= 40, "{max} children ran at once, over the cap of 40");
    assert_none_survive(&[m], "burst call ended");
}

#[test]
fn a_fork_bomb_is_bounded_the_sidecar_stays_responsive_and_nothing_survives() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = limited(64, &[]);
    let d = s.ok("sandbox.describe", json!({}));
    if d["processLimit"]["mechanism"] == "none" {
        eprintln!("skipped: no process limit on this host ({d})");
        return;
    }
    let cgroups = v1_pids_dir(s.pid());
    let marker = format!("bomb{}", std::process::id());
    // The bomb itself returns at once (its pipelines run in the background); the `sleep`
    // keeps the call, and so the bomb's PID namespace, alive until the timeout.
    let command = format!(":(){{ :|:& }};:; sleep 30 # {marker}");
    s.send(
        &json!({"jsonrpc": "2.0", "id": "bomb", "method": "tool.invoke", "params": {
        "name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
        "arguments": {"command": command, "timeoutMs": 3000}}}),
    );
    let started = Instant::now();
    let mut max = 0;
    // The cgroups the bomb ran in (any with members during the call).
    let mut used: Vec<String> = Vec::new();
    let mut slowest_ping = Duration::ZERO;
    let mut n = 0;
    while started.elapsed() < Duration::from_millis(2500) {
        max = max.max(pids_with_arg(&command).len());
        if let Some(base) = &cgroups {
            for cg in command_cgroups(base, s.pid()) {
                let current = std::fs::read_to_string(base.join(&cg).join("pids.current"))
                    .unwrap_or_default();
                let current: usize = current.trim().parse().unwrap_or(0);
                max = max.max(current);
                if current > 0 && !used.contains(&cg) {
                    used.push(cg);
                }
            }
        }
        let t = Instant::now();
        n += 1;
        let id = format!("ping{n}");
        s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "system.ping"}));
        let _ = s.response(&json!(id));
        slowest_ping = slowest_ping.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = s.response(&json!("bomb"));
    let tr = &r["result"];
    assert_eq!(tr["data"]["timedOut"], true, "{r}");
    assert!(max > 4, "the bomb ran: {max}");
    assert!(max <= 64, "{max} processes at once, over the cap of 64");
    assert!(
        slowest_ping < Duration::from_secs(2),
        "the sidecar answered a ping in {slowest_ping:?} during the bomb"
    );
    assert!(
        wait_until(Duration::from_secs(5), || pids_with_arg(&command)
            .is_empty()),
        "{} bomb processes survived",
        pids_with_arg(&command).len()
    );
    if let Some(base) = &cgroups {
        assert!(!used.is_empty(), "the bomb ran in a command cgroup");
        // The bomb's cgroup is removed; what may remain is the one empty cgroup the sidecar
        // makes ahead for the next command.
        let left = || {
            let all = command_cgroups(base, s.pid());
            let empty = |cg: &String| {
                std::fs::read_to_string(base.join(cg).join("cgroup.procs"))
                    .is_ok_and(|p| p.trim().is_empty())
            };
            all.iter().any(|cg| used.contains(cg)) || all.len() > 1 || !all.iter().all(empty)
        };
        assert!(
            wait_until(Duration::from_secs(5), || !left()),
            "command cgroups left behind: {:?} (the bomb's: {used:?})",
            command_cgroups(base, s.pid())
        );
    }
    // Still healthy, and a normal command runs.
    let tr = s.ok(
        "tool.invoke",
        json!({"name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
               "arguments": {"command": "echo fine"}}),
    );
    assert_eq!(tr["data"]["stdout"], "fine\n", "{tr}");
}

/// The launcher alone, as an unprivileged user: `RLIMIT_NPROC` set inside its user namespace
/// bounds the command (root is exempt, so this is how the fallback is checked on a root host).
#[test]
fn the_rlimit_fallback_binds_an_unprivileged_user() {
    use std::process::Command;
    if !nix::unistd::geteuid().is_root() || Command::new("setpriv").arg("--help").output().is_err()
    {
        eprintln!("skipped: needs root (to switch to an unprivileged uid) and setpriv");
        return;
    }
    let spec = json!({
        "policy": {"writableRoots": [], "network": false, "allowedHosts": [],
                   "protectedPaths": [], "hiddenPaths": []},
        "layers": {"namespaces": true, "pidNamespace": true, "netNamespace": true,
                   "landlock": false, "seccomp": false},
        "tmpDir": null, "parent": 0, "maxProcesses": 16
    });
    // 40 children of about 1 s each; bash retries a fork that fails with EAGAIN.
    let m = markers(1, 1).remove(0);
    let script = format!("for i in $(seq 40); do sleep {m} & done 2>/dev/null; wait");
    let mut child = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
        .args([
            "__sandbox-exec",
            "--spec",
            &spec.to_string(),
            "--",
            "bash",
            "-c",
            &script,
        ])
        .current_dir("/")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut max = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        max = max.max(pids_with_arg(&m).len());
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    // The launcher, init and bash count too.
    assert!(
        max <= 13,
        "{max} children at once, over the cap of 16; stderr {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(max >= 5, "children ran up to the cap: {max}");
    assert_none_survive(&[m], "launcher exited");
}

#[test]
fn a_timeout_above_the_ceiling_is_clamped() {
    let ws = tempfile::tempdir().unwrap();
    let mut s = Sidecar::start_with(Opts {
        env: vec![("OUTRIGGER_BASH_MAX_TIMEOUT_MS".into(), "1500".into())],
        ..Default::default()
    });
    let started = Instant::now();
    let tr = s.ok(
        "tool.invoke",
        json!({"name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
               "arguments": {"command": "sleep 30", "timeoutMs": 600000}}),
    );
    assert_eq!(tr["data"]["timedOut"], true, "{tr}");
    assert_eq!(tr["data"]["timeoutMs"], 1500, "{tr}");
    assert_eq!(tr["data"]["timeoutClamped"], true, "{tr}");
    assert!(tr["error"].as_str().unwrap().contains("1500 ms"), "{tr}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // Within the ceiling: as asked, nothing added.
    let tr = s.ok(
        "tool.invoke",
        json!({"name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
               "arguments": {"command": "true", "timeoutMs": 1000}}),
    );
    assert_eq!(tr["success"], true, "{tr}");
    assert!(tr["data"].get("timeoutClamped").is_none(), "{tr}");
    // Beyond the schema's bound (the key's ceiling, a day): refused as invalid arguments.
    let tr = s.ok(
        "tool.invoke",
        json!({"name": "bash", "consentGranted": true, "context": {"cwd": ws.path()},
               "arguments": {"command": "true", "timeoutMs": 86_400_001u64}}),
    );
    assert_eq!(tr["success"], false, "{tr}");
    assert!(tr["error"].as_str().unwrap().contains("timeoutMs"), "{tr}");
}
