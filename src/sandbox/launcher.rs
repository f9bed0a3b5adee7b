//! `outrigger __sandbox-exec --spec <json> -- argv…`: the launcher. A fresh, single-threaded
//! process (the sidecar re-executes itself), so namespaces can be entered and restrictions
//! applied safely before `execvp`. The sidecar itself never restricts itself.
//!
//! Process shape:
//! - PID-namespace mode: launcher → init (pid 1 of a new PID namespace, our code: reaps and
//!   reports) → command. The launcher dies with the sidecar (`PR_SET_PDEATHSIG(SIGKILL)`),
//!   init dies with the launcher, and the kernel kills the whole namespace with init, so no
//!   grandchild (even one that called `setsid`) outlives us. Init mounts its own `/proc` and
//!   applies Landlock and seccomp to itself before forking the command.
//! - Otherwise: launcher (child subreaper, restricted itself) → command. The death signal is
//!   SIGUSR1, whose handler SIGKILLs the launcher's whole process group.
//!
//! All of them share the launcher's process group, which the sidecar signals (SIGTERM, then
//! SIGKILL) on timeout or cancel. The launcher and init ignore SIGTERM/SIGINT/SIGHUP/SIGQUIT
//! (via no-op handlers, which `exec` resets) so they can still report the command's status.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

use serde::Serialize;

use super::policy::LaunchSpec;
use super::{landlock_layer, namespaces, seccomp_layer};

/// The hidden subcommand name.
pub const SUBCOMMAND: &str = "__sandbox-exec";
/// Exit status when the launcher itself fails (bad spec, an expected layer failed).
pub const LAUNCH_FAILED: i32 = 125;
/// Exit status when the command cannot be executed.
pub const EXEC_FAILED: i32 = 127;
/// Prefix of the launcher's own stderr lines, so callers can tell them from the command's.
pub const ERROR_PREFIX: &str = "outrigger-sandbox:";

/// Entry point for the subcommand; returns the process exit status.
pub fn main(spec: Option<&str>, probe: bool, argv: &[OsString]) -> i32 {
    if probe {
        let report = run_probe();
        match serde_json::to_string(&report) {
            Ok(s) => {
                use std::io::Write;
                // The probe subcommand reports to its parent on stdout.
                let mut out = std::io::stdout().lock(); // stdout-ok
                let _ = writeln!(out, "{s}");
                return 0;
            }
            Err(_) => return LAUNCH_FAILED,
        }
    }
    let spec: LaunchSpec = match spec.map(serde_json::from_str) {
        Some(Ok(s)) => s,
        Some(Err(e)) => return fail(&format!("--spec is not a valid launch spec: {e}")),
        None => return fail("--spec <json> is required"),
    };
    if argv.is_empty() {
        return fail("no command given after --");
    }
    run(&spec, argv)
}

/// Launches `argv` under `spec` from this (single-threaded) process and returns the exit
/// status to end with; failures are reported on stderr. The cold launcher and a warm spare
/// (`spare`) both end up here.
pub(super) fn run(spec: &LaunchSpec, argv: &[OsString]) -> i32 {
    match launch(spec, argv) {
        Ok(code) => code,
        Err(msg) => fail(&msg),
    }
}

/// The fast path `main` takes before building the whole CLI: `Some(exit status)` when
/// `args` are `<exe> __sandbox-exec [--probe] [--spec <json>] [-- argv…]`, else `None`.
/// (Every sandboxed command starts here, so clap's setup cost is worth skipping.)
pub fn from_args(mut args: impl Iterator<Item = OsString>) -> Option<i32> {
    let _exe = args.next();
    if args.next()? != SUBCOMMAND {
        return None;
    }
    let (mut spec, mut probe) = (None, false);
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("--probe") => probe = true,
            Some("--spec") => spec = args.next(),
            Some("--") => break,
            _ => {
                return Some(fail(&format!(
                    "unexpected argument {}; usage: {SUBCOMMAND} [--probe] --spec <json> -- <command> [args…]",
                    a.to_string_lossy()
                )));
            }
        }
    }
    let argv: Vec<OsString> = args.collect();
    let spec = match spec.map(OsString::into_string) {
        Some(Ok(s)) => Some(s),
        Some(Err(_)) => return Some(fail("--spec is not UTF-8")),
        None => None,
    };
    Some(main(spec.as_deref(), probe, &argv))
}

fn fail(msg: &str) -> i32 {
    eprintln!("{ERROR_PREFIX} {msg}");
    LAUNCH_FAILED
}

extern "C" fn noop(_: libc::c_int) {}

extern "C" fn parent_gone(_: libc::c_int) {
    // SAFETY: kill is async-signal-safe; 0 targets our own process group.
    unsafe {
        libc::kill(0, libc::SIGKILL);
    }
}

fn set_handler(sig: libc::c_int, handler: libc::sighandler_t) {
    // SAFETY: installs a plain handler (or SIG_DFL) with an empty mask.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

fn set_death_signal(sig: libc::c_int) -> Result<(), String> {
    // SAFETY: plain prctl.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(format!(
            "PR_SET_PDEATHSIG failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// What every launch does before the command is known: its own process group, the death
/// signal, the parent check, and (with `layers.namespaces`) the namespaces, inside which
/// the death signal and the parent are checked again. Returns whether the command gets a
/// PID namespace (then an init child must be forked; see [`fork_init`]).
pub(super) fn prologue(spec: &LaunchSpec) -> Result<bool, String> {
    let layers = spec.layers;
    let pidns = layers.namespaces && layers.pid_namespace;
    // SAFETY: setpgid on ourselves; EPERM (already a group leader) is fine.
    unsafe {
        libc::setpgid(0, 0);
    }
    let death = if pidns {
        libc::SIGKILL
    } else {
        set_handler(
            libc::SIGUSR1,
            parent_gone as *const () as libc::sighandler_t,
        );
        // SAFETY: plain prctl; orphans of the command are reparented to us.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
        libc::SIGUSR1
    };
    set_death_signal(death)?;
    check_parent(spec.parent)?;
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
        set_handler(sig, noop as *const () as libc::sighandler_t);
    }
    if layers.namespaces {
        namespaces::enter(&namespaces::Request {
            network: spec.policy.network || !layers.net_namespace,
            pid: pidns,
            protected: &spec.policy.protected_paths,
            hidden: &spec.policy.hidden_paths,
            revealed: &spec.policy.revealed_paths,
        })?;
        // Credentials changed: make sure the death signal survived.
        set_death_signal(death)?;
        check_parent(spec.parent)?;
    }
    Ok(pidns)
}

fn launch(spec: &LaunchSpec, argv: &[OsString]) -> Result<i32, String> {
    let pidns = prologue(spec)?;
    if spec.layers.namespaces {
        limit_processes(spec.max_processes)?;
    }
    // In PID-namespace mode the init child restricts itself (after mounting its own /proc,
    // which Landlock would forbid); otherwise we do, before forking the command.
    if !pidns {
        restrict(spec)?;
    }
    let args = c_args(argv)?;
    if pidns {
        let init = fork_init(|alive| {
            if !init_start(alive) {
                return LAUNCH_FAILED;
            }
            if let Err(msg) = restrict(spec) {
                eprintln!("{ERROR_PREFIX} {msg}");
                return LAUNCH_FAILED;
            }
            init_run(&args)
        })?;
        Ok(wait_for(init))
    } else {
        // SAFETY: getpid cannot fail.
        let me = unsafe { libc::getpid() };
        // SAFETY: the launcher is single-threaded here, so the child may run any code.
        match unsafe { libc::fork() } {
            -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
            0 => {
                let _ = set_death_signal(libc::SIGKILL);
                // SAFETY: getppid cannot fail.
                if unsafe { libc::getppid() } != me {
                    // SAFETY: _exit ends the process without running destructors.
                    unsafe { libc::_exit(LAUNCH_FAILED) }
                }
                exec(&args)
            }
            child => Ok(wait_for(child)),
        }
    }
}

/// `argv` as C strings.
pub(super) fn c_args(argv: &[OsString]) -> Result<Vec<CString>, String> {
    argv.iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| "an argument contains a NUL byte".to_string())
}

/// Forks pid 1 of the new PID namespace, which runs `init` (given the read end of a pipe
/// that reads EOF if we die; see [`init_start`]) and exits with what it returns.
pub(super) fn fork_init(init: impl FnOnce(libc::c_int) -> i32) -> Result<libc::pid_t, String> {
    let mut fds = [0; 2];
    // SAFETY: valid out-array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: single-threaded process; the child only runs our code below.
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {
            // SAFETY: closing our copy of the write end.
            unsafe { libc::close(fds[1]) };
            let code = init(fds[0]);
            // SAFETY: leave without running our parent's atexit handlers.
            unsafe { libc::_exit(code) }
        }
        pid => {
            // SAFETY: closing our copy of the read end.
            unsafe { libc::close(fds[0]) };
            Ok(pid)
        }
    }
}

/// `RLIMIT_NPROC` for the command's tree. Called inside the new user namespace, where the
/// kernel counts the namespaced uid's processes only (just us so far), so the limit binds
/// this command alone; set before it, it would count all of the user's processes.
pub(super) fn limit_processes(max: Option<u32>) -> Result<(), String> {
    let Some(max) = max else {
        return Ok(());
    };
    let lim = libc::rlimit {
        rlim_cur: libc::rlim_t::from(max),
        rlim_max: libc::rlim_t::from(max),
    };
    // SAFETY: a valid rlimit for the duration of the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &lim) } != 0 {
        return Err(format!(
            "setrlimit(RLIMIT_NPROC, {max}): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

fn check_parent(expected: i32) -> Result<(), String> {
    // SAFETY: getppid cannot fail.
    if expected > 0 && unsafe { libc::getppid() } != expected {
        return Err(format!(
            "the sidecar (pid {expected}) exited before the command started"
        ));
    }
    Ok(())
}

/// Landlock then seccomp, as the spec's layers say.
fn restrict(spec: &LaunchSpec) -> Result<(), String> {
    if spec.layers.landlock {
        landlock_layer::apply(&spec.policy, spec.tmp_dir.as_deref())?;
    }
    if spec.layers.seccomp {
        seccomp_layer::apply(spec.policy.network)?;
    }
    Ok(())
}

/// Pid 1's start: the death signal, the check that the launcher is still there, and our
/// own `/proc`. False: the launcher is gone.
pub(super) fn init_start(alive: libc::c_int) -> bool {
    if set_death_signal(libc::SIGKILL).is_err() {
        return false;
    }
    // Our parent is outside the namespace (getppid() reads 0), so ask the pipe instead.
    let mut pfd = libc::pollfd {
        fd: alive,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is a valid pollfd for the call's duration; a zero timeout never blocks.
    if unsafe { libc::poll(&mut pfd, 1, 0) } != 0 {
        return false;
    }
    // SAFETY: done with the pipe.
    unsafe { libc::close(alive) };
    // Our own /proc: the command sees its namespace's processes, not the host's. Best effort
    // (a container that masks parts of /proc refuses it); it is not an enforcement layer.
    namespaces::mount_proc();
    true
}

/// Pid 1, restricted: starts the command, reaps everything, returns the command's status.
pub(super) fn init_run(args: &[CString]) -> i32 {
    // SAFETY: single-threaded.
    let cmd = match unsafe { libc::fork() } {
        -1 => return LAUNCH_FAILED,
        0 => exec(args),
        pid => pid,
    };
    wait_for(cmd)
}

/// Becomes the command. Never returns.
fn exec(args: &[CString]) -> ! {
    exec_or_report(args, |_| {})
}

/// Becomes the command; when `execvp` fails, hands its errno to `report`, says why on
/// stderr and exits 127 (not found) or 126. Never returns.
pub(super) fn exec_or_report(args: &[CString], report: impl FnOnce(i32)) -> ! {
    // Rust ignores SIGPIPE at startup; the command expects the default (`yes | head`).
    set_handler(libc::SIGPIPE, libc::SIG_DFL);
    let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: NUL-terminated argv of valid C strings.
    unsafe { libc::execvp(ptrs[0], ptrs.as_ptr()) };
    let e = std::io::Error::last_os_error();
    report(e.raw_os_error().unwrap_or(libc::EIO));
    let code = if e.raw_os_error() == Some(libc::ENOENT) {
        EXEC_FAILED
    } else {
        126
    };
    eprintln!(
        "{ERROR_PREFIX} cannot execute {}: {e}",
        args[0].to_string_lossy()
    );
    // SAFETY: leave without unwinding into the parent's copy of the stack.
    unsafe { libc::_exit(code) }
}

/// Waits for `pid` (reaping adopted orphans on the way) and returns its status as an exit
/// code: the code itself, or 128 + the signal.
pub(super) fn wait_for(pid: libc::pid_t) -> i32 {
    loop {
        let mut status = 0;
        // SAFETY: valid out-pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r == pid {
            return decode(status);
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return LAUNCH_FAILED;
        }
    }
}

fn decode(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        LAUNCH_FAILED
    }
}

/// What this host can enforce, found by trying each layer on the probe process itself.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProbeReport {
    pub landlock_abi: i32,
    pub namespaces: bool,
    pub pid_namespace: bool,
    pub seccomp: bool,
    /// Why a layer is unavailable, one line each.
    pub errors: Vec<String>,
}

/// Diagnostic: layers the probe reports unavailable without trying them (comma-separated
/// `landlock`, `namespaces`, `seccomp`; `cgroup` is read by the sidecar's process-limit
/// detection), to rehearse a restricted host.
pub const DISABLE_ENV: &str = "OUTRIGGER_SANDBOX_DISABLE_LAYERS";

fn run_probe() -> ProbeReport {
    let disabled = std::env::var(DISABLE_ENV).unwrap_or_default();
    let off = |layer: &str| disabled.split(',').any(|d| d.trim() == layer);
    let mut r = ProbeReport {
        landlock_abi: if off("landlock") {
            0
        } else {
            landlock_layer::kernel_abi()
        },
        ..Default::default()
    };
    if r.landlock_abi < 1 {
        r.errors
            .push("landlock: not supported or not enabled by this kernel".into());
    }
    let ns = if off("namespaces") {
        Err(format!("namespaces: disabled by {DISABLE_ENV}"))
    } else {
        Ok(())
    };
    match ns.and_then(|()| {
        namespaces::enter(&namespaces::Request {
            network: false,
            pid: true,
            ..Default::default()
        })
    }) {
        Ok(()) => match namespaces::can_bind_read_only(&std::env::temp_dir()) {
            Err(e) => r.errors.push(e),
            Ok(()) => {
                r.namespaces = true;
                // SAFETY: single-threaded; the child only exits.
                match unsafe { libc::fork() } {
                    // SAFETY: the child only reads its pid and exits.
                    0 => unsafe { libc::_exit(if libc::getpid() == 1 { 0 } else { 1 }) },
                    -1 => r.errors.push("namespaces: fork failed".into()),
                    pid => {
                        r.pid_namespace = wait_for(pid) == 0;
                    }
                }
            }
        },
        Err(e) => r.errors.push(e),
    }
    let sc = if off("seccomp") {
        Err(format!("seccomp: disabled by {DISABLE_ENV}"))
    } else {
        seccomp_layer::apply(false)
    };
    match sc {
        Ok(()) => r.seccomp = true,
        Err(e) => r.errors.push(e),
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> impl Iterator<Item = OsString> {
        a.iter().map(OsString::from).collect::<Vec<_>>().into_iter()
    }

    #[test]
    fn only_the_subcommand_takes_the_fast_path() {
        assert_eq!(from_args(args(&["outrigger"])), None);
        assert_eq!(from_args(args(&["outrigger", "schemas"])), None);
        assert_eq!(
            from_args(args(&["outrigger", SUBCOMMAND, "--bogus"])),
            Some(LAUNCH_FAILED)
        );
        // A valid spec but no command: refused before anything is applied.
        assert_eq!(
            from_args(args(&["outrigger", SUBCOMMAND, "--spec", "{}", "--"])),
            Some(LAUNCH_FAILED)
        );
        assert_eq!(
            from_args(args(&[
                "outrigger",
                SUBCOMMAND,
                "--spec",
                "not json",
                "--",
                "true"
            ])),
            Some(LAUNCH_FAILED)
        );
    }

    #[test]
    fn exit_statuses_decode_like_a_shell() {
        assert_eq!(decode(3 << 8), 3);
        assert_eq!(decode(libc::SIGKILL), 128 + libc::SIGKILL);
    }
}
