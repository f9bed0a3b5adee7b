//! The one way child processes start: their own process group, a death signal, registration
//! with the lifecycle (so shutdown kills the group), and, when a launch spec is given, the
//! sandbox launcher in front of the command.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::cgroup::{CommandCgroup, join_in_child};
use super::launcher::SUBCOMMAND;
use super::policy::LaunchSpec;
pub use super::private_tmp::{PrivateTmp, remove_tmp_parent, sweep_stale_tmp};
use super::spare::{self, ExitReport, Order, Outcome, Started};
use crate::lifecycle::Lifecycle;

/// Spawn attempts when exec(2) says ETXTBSY: the file is briefly held open for writing (being
/// replaced, or a concurrent fork inherited a writer's descriptor).
const SPAWN_ATTEMPTS: u32 = 5;

/// What to run.
pub struct SpawnSpec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// `Some`: exactly this environment; `None`: inherit ours.
    pub env: Option<Vec<(OsString, OsString)>>,
    /// Added on top (plugin manifests' `env`, `TMPDIR`).
    pub extra_env: Vec<(OsString, OsString)>,
    pub stdin: Stdin,
    /// Run through the launcher with this spec; `None` runs the program directly.
    pub launch: Option<LaunchSpec>,
    /// Our own executable (the launcher). Without it a launch spec cannot be honoured and
    /// the caller must not ask for one.
    pub launcher: Option<PathBuf>,
    /// The command's pids cgroup (`Prepared::cgroup`): the child joins it before `exec`, and
    /// the returned [`Group`] owns it (killing what is left in it when done).
    pub cgroup: Option<CommandCgroup>,
    /// Start it in a warm spare (see [`super::spare`]) when one fits, and keep that many
    /// spares waiting that long. Needs `launcher`.
    pub warm: Option<super::spare::Warm>,
    /// A pseudo-terminal's slave side: it becomes the command's stdin, stdout and stderr and
    /// its controlling terminal (the child leads a new session instead of only a new process
    /// group, so `^C` written to the master reaches the command). `stdin` and `warm` are
    /// ignored.
    pub terminal: Option<std::os::fd::OwnedFd>,
}

/// The command's stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stdin {
    Null,
    Piped,
}

/// Builds the command: launcher in front when asked, own process group, death signal.
fn command(spec: &SpawnSpec) -> std::io::Result<Command> {
    let mut cmd = match (&spec.launch, &spec.launcher) {
        (Some(launch), Some(exe)) => {
            let json = serde_json::to_string(launch).map_err(std::io::Error::other)?;
            let mut c = Command::new(exe);
            c.arg(SUBCOMMAND)
                .arg("--spec")
                .arg(json)
                .arg("--")
                .arg(&spec.program)
                .args(&spec.args);
            c
        }
        (Some(_), None) => {
            return Err(std::io::Error::other(
                "the sandbox launcher is unavailable in this process",
            ));
        }
        (None, _) => {
            let mut c = Command::new(&spec.program);
            c.args(&spec.args);
            let parent = std::process::id() as libc::pid_t;
            // SAFETY: only async-signal-safe syscalls run between fork and exec.
            unsafe {
                c.pre_exec(move || {
                    if libc::prctl(
                        libc::PR_SET_PDEATHSIG,
                        libc::SIGKILL as libc::c_ulong,
                        0,
                        0,
                        0,
                    ) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    if libc::getppid() != parent {
                        return Err(std::io::Error::other("the parent exited during spawn"));
                    }
                    Ok(())
                });
            }
            c
        }
    };
    if spec.terminal.is_some() {
        // SAFETY: setsid and ioctl are async-signal-safe; fd 0 is the terminal by now (std
        // sets up stdio before running the hooks).
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    if let Some(cg) = &spec.cgroup {
        let procs = cg.procs_path().to_owned();
        // SAFETY: the hook only makes async-signal-safe calls (open, write, close).
        unsafe {
            cmd.pre_exec(move || join_in_child(&procs));
        }
    }
    if let Some(env) = &spec.env {
        cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    }
    cmd.envs(spec.extra_env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .kill_on_drop(true);
    match &spec.terminal {
        Some(tty) => {
            // A session leader is its own group leader already (setsid above); asking for
            // a process group too would make setsid fail.
            cmd.stdin(Stdio::from(tty.try_clone()?))
                .stdout(Stdio::from(tty.try_clone()?))
                .stderr(Stdio::from(tty.try_clone()?));
        }
        None => {
            cmd.stdin(match spec.stdin {
                Stdin::Null => Stdio::null(),
                Stdin::Piped => Stdio::piped(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        }
    }
    Ok(cmd)
}

/// A started child and its process group (killed and unregistered when dropped).
pub struct Spawned<'a> {
    pub child: Child,
    pub group: Group<'a>,
    /// Where a prepared warm spare reports the exit code (see [`Spawned::wait_code`]).
    pub exit: Option<ExitReport>,
}

impl Spawned<'_> {
    /// Waits for the command and returns its exit code (128 + the signal when killed). A
    /// prepared warm spare reports it once the command and everything it started are dead,
    /// before its own exit tears the namespaces down; the child is reaped later.
    pub async fn wait_code(&mut self) -> std::io::Result<i32> {
        if let Some(exit) = &mut self.exit {
            if let Some(code) = exit.code().await {
                return Ok(code);
            }
            self.exit = None;
        }
        self.child.wait().await.map(exit_code)
    }

    /// After [`Spawned::wait_code`]: the exit came from the init of the command's PID
    /// namespace, which killed and reaped everything else in it first, so nothing the
    /// command started is left to kill.
    pub fn namespace_emptied(&self) -> bool {
        self.exit.is_some()
    }
}

/// A child's exit status as a shell reports it: the code, or 128 + the signal.
pub fn exit_code(s: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
}

/// Spawns `spec`, retrying briefly on ETXTBSY, and registers its group with `lifecycle`.
pub async fn spawn(
    mut spec: SpawnSpec,
    lifecycle: Option<&Lifecycle>,
) -> std::io::Result<Spawned<'_>> {
    let mut ended_tx = None;
    if let (Some(warm), Some(exe), None) = (spec.warm, spec.launcher.clone(), &spec.terminal) {
        let mut env = match &spec.env {
            Some(e) => e.clone(),
            None => std::env::vars_os().collect(),
        };
        // Later entries win, as with `Command::envs`.
        env.extend(spec.extra_env.iter().cloned());
        let order = Order {
            launch: spec.launch.as_ref(),
            argv: std::iter::once(spec.program.as_os_str())
                .chain(spec.args.iter().map(OsString::as_os_str))
                .collect(),
            cwd: &spec.cwd,
            env,
            stdin_null: spec.stdin == Stdin::Null,
        };
        let (tx, ended) = tokio::sync::oneshot::channel();
        match spare::run(&exe, &order, &mut spec.cgroup, warm, ended).await {
            Outcome::Started(started) => {
                let Started {
                    child,
                    cgroup,
                    exit,
                } = *started;
                let mut spawned = registered(child, cgroup, lifecycle, Some(tx))?;
                spawned.exit = exit;
                return Ok(spawned);
            }
            Outcome::Failed(e) => return Err(e),
            Outcome::Cold => ended_tx = Some(tx),
        }
    }
    let mut cmd = command(&spec)?;
    let mut attempt = 1;
    let child = loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < SPAWN_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => break other?,
        }
    };
    // Our copies of the terminal's slave side go, so the master reads EOF once the command's
    // processes have all closed it.
    drop(cmd);
    spec.terminal = None;
    registered(child, spec.cgroup.take(), lifecycle, ended_tx)
}

fn registered(
    child: Child,
    cgroup: Option<CommandCgroup>,
    lifecycle: Option<&Lifecycle>,
    ended: Option<tokio::sync::oneshot::Sender<()>>,
) -> std::io::Result<Spawned<'_>> {
    // process_group(0) (or setsid) makes the child its own group leader, so its pid is the
    // pgid.
    let Some(pgid) = child.id().and_then(|p| i32::try_from(p).ok()) else {
        return Err(std::io::Error::other(
            "the child exited before its pid could be read",
        ));
    };
    if let Some(l) = lifecycle {
        l.register_child_group(pgid);
    }
    Ok(Spawned {
        child,
        exit: None,
        group: Group {
            pgid,
            lifecycle,
            armed: true,
            cgroup,
            _ended: ended,
        },
    })
}

/// A registered process group: SIGKILLed (if still armed) and unregistered on drop, however
/// the owner ends (a dropped future included).
pub struct Group<'a> {
    pgid: i32,
    lifecycle: Option<&'a Lifecycle>,
    armed: bool,
    /// Removed (after killing what is left in it) when the group is dropped.
    cgroup: Option<CommandCgroup>,
    /// Dropped with the group: tells the next spare the command is over (see
    /// `spare::refill`).
    _ended: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Group<'_> {
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        // Never 0 or 1: killpg(0) is our own group and 1 is init.
        if self.armed && self.pgid > 1 {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.pgid), sig);
        }
    }

    /// SIGKILL to the group and to everything in the command's cgroup (which also reaches
    /// processes that left the group with `setsid`).
    pub fn kill(&self) {
        self.signal(nix::sys::signal::Signal::SIGKILL);
        if let Some(cg) = &self.cgroup {
            cg.kill_all();
        }
    }

    /// Done with the group (its leader was reaped and it was killed): never signal the id
    /// again, since it could be recycled.
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        // Disarmed: the leader was reaped and the group killed; what is left in the cgroup
        // is killed by its removal (see `CommandCgroup`'s drop).
        if self.armed {
            self.kill();
        }
        if let Some(l) = self.lifecycle {
            l.unregister_child_group(self.pgid);
        }
    }
}

/// SIGTERM to the group, then SIGKILL after `grace` if the leader is still running; waits for
/// the leader. Returns whether it was reaped.
pub async fn terminate(child: &mut Child, group: &Group<'_>, grace: Duration) -> bool {
    group.signal(nix::sys::signal::Signal::SIGTERM);
    if let Ok(Ok(_)) = tokio::time::timeout(grace, child.wait()).await {
        group.kill();
        return true;
    }
    group.kill();
    matches!(
        tokio::time::timeout(Duration::from_secs(5), child.wait()).await,
        Ok(Ok(_))
    )
}
