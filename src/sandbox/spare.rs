//! Warm spawn. A cold start costs the sidecar a fork of itself and an exec of our own 18 MB
//! binary (the launcher), and, where process limits use a cgroup, the move into the command's
//! cgroup: on cgroup v1 (and v2 without `favordynmods`) that move waits for an RCU grace
//! period, 10–20 ms whenever the previous move was more than a few ms ago, which in a real
//! turn (model rounds between commands) is every time.
//!
//! A spare is that process started ahead of time: our binary in its own process group and
//! its own fresh cgroup, death signal armed, blocked on fd 3 for one order. The order carries
//! what `Command` would have set (argv, cwd, environment, stdin) and the launch spec; the
//! spare then runs the very code the cold launcher runs (or execs the command directly when
//! the sandbox is off). Up to `sandbox_warm_spares` wait at once (two by default), the oldest
//! serves first, each is replaced after use (the first replacement takes over the cgroup the
//! command did not need), and each is let go after `sandbox_warm_idle_ms` unused.
//!
//! Why two: a spare joins its cgroup itself, and that move waits for an RCU grace period
//! (10–15 ms here). With one spare, started when the one before was taken, commands back to
//! back met a spare still in its move (p99 ~22 ms). The oldest of two has had two commands'
//! time, and two commands in parallel both start warm.
//!
//! When the last two sandboxed commands had the same policy, the spare is also told that
//! policy once the command before it is over, and confines itself ahead (see
//! [`super::ahead`]); it then serves that policy only.
//!
//! The order socket comes in on fd 0 and the spare moves it to fd 3 (fd 0 becomes
//! `/dev/null`): stdio is all `posix_spawn` can place, and without a `pre_exec` hook the
//! sidecar starts spares with `posix_spawn` (a `vfork`), not a `fork` that copies its page
//! tables and leaves it copy-on-write faults (~1 ms of CPU per spare, perf). A command that
//! reads stdin gets the pipe's read end with its order (`SCM_RIGHTS` on the `O` byte).
//!
//! Messages on fd 3: `P` + length + launch spec (JSON; at most once, first), `O` + length +
//! order. Reply (the socket is closed by `exec`): `A` when the order was accepted, then EOF
//! when the command (or the launcher) runs, or the 4-byte errno of a failed `exec`;
//! `E` + errno when `chdir` failed; `S` when what the spare prepared no longer fits. `S` or
//! nothing at all (the spare died): the caller starts the command cold instead.
//!
//! A prepared spare's init answers `B` instead of `A` and keeps the socket: `R` once the
//! command starts, then `X` + the 4-byte exit code once the command and everything it started
//! are dead. The caller has the result then, while init and the spare still exit (tearing
//! down the namespaces is ~1 ms on their way out).

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use super::ahead::{self, Ahead};
use super::cgroup::{CommandCgroup, join_in_child};
use super::launcher::{self, ERROR_PREFIX, LAUNCH_FAILED};
use super::policy::LaunchSpec;

/// The hidden subcommand a spare runs: `<exe> __spawn-spare <sidecar pid> [<cgroup.procs>]`.
pub const SUBCOMMAND: &str = "__spawn-spare";
/// Where the spare finds its order socket.
const ORDER_FD: libc::c_int = 3;
/// An order larger than this is refused (argv and environment are bounded far below it).
const MAX_ORDER: usize = 64 << 20;
/// Message tags on the order socket: the order, and the launch spec to prepare for ahead
/// (see [`super::ahead`]), which comes first when sent at all.
const ORDER: u8 = b'O';
const PREPARE: u8 = b'P';

/// What the spare is to become.
pub struct Order<'a> {
    /// Run through the launcher with this spec; `None` execs `argv` directly.
    pub launch: Option<&'a LaunchSpec>,
    /// `argv[0]` is the program, looked up on the order's `PATH` like `Command` does.
    pub argv: Vec<&'a OsStr>,
    pub cwd: &'a Path,
    /// The whole environment.
    pub env: Vec<(OsString, OsString)>,
    /// `/dev/null` on stdin; otherwise the spare's stdin pipe stays.
    pub stdin_null: bool,
}

fn put(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    buf.extend_from_slice(bytes);
}

impl Order<'_> {
    fn encode(&self) -> Result<Vec<u8>, String> {
        let mut b = vec![ORDER, 0, 0, 0, 0];
        let launch = match self.launch {
            Some(l) => serde_json::to_vec(l).map_err(|e| e.to_string())?,
            None => Vec::new(),
        };
        put(&mut b, &launch);
        b.push(u8::from(self.stdin_null));
        put(&mut b, self.cwd.as_os_str().as_bytes());
        b.extend_from_slice(&(self.argv.len() as u32).to_le_bytes());
        for a in &self.argv {
            put(&mut b, a.as_bytes());
        }
        b.extend_from_slice(&(self.env.len() as u32).to_le_bytes());
        for (k, v) in &self.env {
            put(&mut b, k.as_bytes());
            put(&mut b, v.as_bytes());
        }
        let len = b.len() - 5;
        if len > MAX_ORDER {
            return Err(format!(
                "the spawn order is {len} bytes (limit {MAX_ORDER})"
            ));
        }
        b[1..5].copy_from_slice(&(len as u32).to_le_bytes());
        Ok(b)
    }
}

/// An order as the spare reads it.
struct Received {
    launch: Option<LaunchSpec>,
    argv: Vec<OsString>,
    cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
    stdin_null: bool,
    /// The read end of the command's stdin pipe, sent with the order when not `stdin_null`.
    stdin: Option<OwnedFd>,
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("the spawn order is truncated".into());
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Ok(h)
    }
    fn u32(&mut self) -> Result<usize, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()?;
        self.take(n)
    }
    fn os(&mut self) -> Result<OsString, String> {
        Ok(OsString::from_vec(self.bytes()?.to_vec()))
    }
}

fn decode(body: &[u8]) -> Result<Received, String> {
    let mut c = Cursor(body);
    let launch = match c.bytes()? {
        [] => None,
        j => Some(serde_json::from_slice(j).map_err(|e| format!("launch spec: {e}"))?),
    };
    let stdin_null = c.take(1)?[0] != 0;
    let cwd = PathBuf::from(c.os()?);
    let argc = c.u32()?;
    let argv = (0..argc).map(|_| c.os()).collect::<Result<Vec<_>, _>>()?;
    let envc = c.u32()?;
    let env = (0..envc)
        .map(|_| Ok((c.os()?, c.os()?)))
        .collect::<Result<Vec<_>, String>>()?;
    if !c.0.is_empty() {
        return Err("the spawn order has trailing bytes".into());
    }
    if argv.is_empty() {
        return Err("the spawn order has no command".into());
    }
    Ok(Received {
        launch,
        argv,
        cwd,
        env,
        stdin_null,
        stdin: None,
    })
}

// ---- the spare process ----

/// The fast path `main` takes first: `Some(exit status)` when `args` are
/// `<exe> __spawn-spare <pid> [<cgroup.procs>]`.
pub fn from_args(mut args: impl Iterator<Item = OsString>) -> Option<i32> {
    let _exe = args.next();
    if args.next()? != SUBCOMMAND {
        return None;
    }
    let parent = args.next().and_then(|p| p.to_str()?.parse::<i32>().ok());
    let procs = args.next().and_then(|p| CString::new(p.into_vec()).ok());
    Some(spare_main(parent.unwrap_or(0), procs))
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn reply(bytes: &[u8]) {
    // SAFETY: writing a valid buffer to our order socket; a failure means the sidecar left.
    unsafe { libc::write(ORDER_FD, bytes.as_ptr().cast(), bytes.len()) };
}

fn read_exact(buf: &mut [u8]) -> bool {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: reading into the unfilled rest of `buf`.
        let n = unsafe { libc::read(ORDER_FD, buf[done..].as_mut_ptr().cast(), buf.len() - done) };
        match n {
            n if n > 0 => done += n as usize,
            0 => return false,
            _ if errno() == libc::EINTR => {}
            _ => return false,
        }
    }
    true
}

fn spare_main(parent: i32, procs: Option<CString>) -> i32 {
    // SAFETY: plain prctl/getppid/dup2/open. The sidecar may have died between spawn and here.
    unsafe {
        // The order socket, from fd 0 to where the protocol wants it; fd 0 is `/dev/null`
        // until an order brings the command's stdin.
        if libc::dup2(0, ORDER_FD) < 0 {
            return LAUNCH_FAILED;
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if null < 0 || libc::dup2(null, 0) < 0 {
            return LAUNCH_FAILED;
        }
        libc::close(null);
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
            || parent <= 0
            || libc::getppid() != parent
        {
            return LAUNCH_FAILED;
        }
    }
    // The slow part, paid before any command is waiting for it. A failure ends the spare
    // without a reply: the command then starts cold and joins its cgroup there.
    if let Some(p) = &procs
        && join_in_child(p).is_err()
    {
        return LAUNCH_FAILED;
    }
    match read_message() {
        Message::Order(order) => become_command(order),
        Message::Prepare(spec) => prepared(spec),
        Message::None => 0, // let go unused
        Message::Bad => LAUNCH_FAILED,
    }
}

enum Message {
    Order(Box<Received>),
    Prepare(LaunchSpec),
    /// The socket closed before a message: the spare was let go.
    None,
    Bad,
}

/// Reads the first byte of a message, and the descriptor sent with it, if any.
fn read_tag() -> Option<(u8, Option<OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::FromRawFd;
    let mut tag = [0u8; 1];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    loop {
        let mut iov = [std::io::IoSliceMut::new(&mut tag)];
        match recvmsg::<()>(
            ORDER_FD,
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) if msg.bytes == 1 => {
                let mut fd = None;
                for c in msg.cmsgs().into_iter().flatten() {
                    if let ControlMessageOwned::ScmRights(fds) = c {
                        for raw in fds {
                            // SAFETY: received with this message, so ours to own (and close).
                            let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                            fd.get_or_insert(owned);
                        }
                    }
                }
                return Some((tag[0], fd));
            }
            Err(nix::errno::Errno::EINTR) => {}
            _ => return None,
        }
    }
}

fn read_message() -> Message {
    let mut head = [0u8; 5];
    let Some((tag, fd)) = read_tag() else {
        return Message::None;
    };
    head[0] = tag;
    if !read_exact(&mut head[1..]) {
        return Message::Bad;
    }
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_ORDER {
        return Message::Bad;
    }
    let mut body = vec![0u8; len];
    if !read_exact(&mut body) {
        return Message::Bad;
    }
    let decoded = match head[0] {
        ORDER => decode(&body).map(|o| Message::Order(Box::new(Received { stdin: fd, ..o }))),
        PREPARE => serde_json::from_slice(&body)
            .map(Message::Prepare)
            .map_err(|e| format!("launch spec: {e}")),
        _ => Err("the spawn order has an unknown tag".into()),
    };
    decoded.unwrap_or_else(|e| {
        eprintln!("{ERROR_PREFIX} {e}");
        Message::Bad
    })
}

/// A spare told its next command's policy: enters the namespaces and forks init, which
/// prepares the rest and then waits for the order (see [`super::ahead`]). A failure here
/// ends the spare without a reply, so the command starts cold and reports it.
fn prepared(spec: LaunchSpec) -> i32 {
    if !ahead::preparable(&spec) || launcher::prologue(&spec).is_err() {
        return LAUNCH_FAILED;
    }
    let init = launcher::fork_init(|alive| {
        if !launcher::init_start(alive) {
            return LAUNCH_FAILED;
        }
        let Ok(ready) = Ahead::prepare(spec) else {
            return LAUNCH_FAILED;
        };
        let order = match read_message() {
            Message::Order(o) => o,
            Message::None => return 0,
            _ => return LAUNCH_FAILED,
        };
        let Some(launch) = order.launch.as_ref().filter(|l| ready.serves(l)) else {
            // Changed since it was prepared: the sidecar starts the command cold.
            reply(b"S");
            return LAUNCH_FAILED;
        };
        let args = match launcher::c_args(&order.argv) {
            Ok(a) => a,
            Err(_) => {
                reply(b"S");
                return LAUNCH_FAILED;
            }
        };
        if !settle(&order, b'B') {
            return LAUNCH_FAILED;
        }
        // The socket stays ours (not the command's) for the exit code.
        // SAFETY: marks our order socket close-on-exec.
        unsafe { libc::fcntl(ORDER_FD, libc::F_SETFD, libc::FD_CLOEXEC) };
        reply(b"R");
        let code = ready.finish(launch, &args);
        report_exit(code)
    });
    match init {
        Ok(pid) => {
            // Only init answers orders now, and only init and the command hold the command's
            // stdio: its pipes read EOF once they are done, not once we have exited.
            // SAFETY: closing our copies of the order socket and of stdin, stdout, stderr.
            unsafe {
                for fd in [ORDER_FD, 0, 1, 2] {
                    libc::close(fd);
                }
            }
            launcher::wait_for(pid)
        }
        Err(_) => LAUNCH_FAILED,
    }
}

/// Init, once the command is over: ends everything else in the namespace, reaps it, lets go
/// of the command's stdio and sends `X` + `code`. Returns `code` (init's exit status).
fn report_exit(code: i32) -> i32 {
    // SAFETY: as pid 1 of the namespace, -1 reaches every other process in it (and nothing
    // outside); then reap until none is left.
    unsafe {
        libc::kill(-1, libc::SIGKILL);
        let mut status = 0;
        while libc::waitpid(-1, &mut status, 0) > 0 || errno() == libc::EINTR {}
        for fd in [0, 1, 2] {
            libc::close(fd);
        }
    }
    reply_tagged(b'X', code);
    code
}

/// Accepts the order (`accept`: `A`, or `B` from a prepared init) and puts it in place:
/// cwd, stdin, environment. False: refused (and said why on the socket).
fn settle(order: &Received, accept: u8) -> bool {
    reply(&[accept]);
    let Ok(cwd) = CString::new(order.cwd.as_os_str().as_bytes()) else {
        reply_tagged(b'E', libc::EINVAL);
        return false;
    };
    // SAFETY: a valid path.
    if unsafe { libc::chdir(cwd.as_ptr()) } != 0 {
        reply_tagged(b'E', errno());
        return false;
    }
    // Stdin is `/dev/null` already (see `spare_main`) unless the order brought a pipe.
    match (&order.stdin, order.stdin_null) {
        (Some(pipe), false) => {
            // SAFETY: the received pipe over our stdin (dup2 clears close-on-exec).
            if unsafe { libc::dup2(pipe.as_raw_fd(), 0) } < 0 {
                reply_tagged(b'E', errno());
                return false;
            }
        }
        (None, false) => {
            reply_tagged(b'E', libc::EBADF);
            return false;
        }
        (_, true) => {}
    }
    set_environment(&order.env);
    true
}

fn become_command(order: Box<Received>) -> i32 {
    if !settle(&order, b'A') {
        return LAUNCH_FAILED;
    }
    match &order.launch {
        Some(spec) => {
            // The launcher reports its own failures on stderr, as when started cold.
            // SAFETY: closing our end of the order socket: the sidecar reads EOF.
            unsafe { libc::close(ORDER_FD) };
            launcher::run(spec, &order.argv)
        }
        None => {
            let args = match launcher::c_args(&order.argv) {
                Ok(a) => a,
                Err(_) => {
                    reply(&libc::EINVAL.to_le_bytes());
                    return LAUNCH_FAILED;
                }
            };
            // SAFETY: marks our order socket close-on-exec, so a good exec closes it.
            unsafe { libc::fcntl(ORDER_FD, libc::F_SETFD, libc::FD_CLOEXEC) };
            launcher::exec_or_report(&args, |e| reply(&e.to_le_bytes()))
        }
    }
}

/// `tag` + a 4-byte value: `E` + errno, `X` + exit code.
fn reply_tagged(tag: u8, value: i32) {
    let mut b = [0u8; 5];
    b[0] = tag;
    b[1..].copy_from_slice(&value.to_le_bytes());
    reply(&b);
}

/// Replaces our (empty) environment with the order's, for `execvp` and the launcher.
fn set_environment(env: &[(OsString, OsString)]) {
    // SAFETY: the spare is single-threaded; nothing else reads the environment meanwhile.
    unsafe {
        libc::clearenv();
        for (k, v) in env {
            if k.is_empty() || k.as_bytes().contains(&b'=') {
                continue;
            }
            if let (Ok(k), Ok(v)) = (CString::new(k.as_bytes()), CString::new(v.as_bytes())) {
                libc::setenv(k.as_ptr(), v.as_ptr(), 1);
            }
        }
    }
}

// ---- the sidecar's side ----

/// Which spare can serve a command: started from the same executable, its cgroup (if any)
/// under the same base.
#[derive(Clone, PartialEq, Eq, Debug)]
struct Key {
    exe: PathBuf,
    cgroup_base: Option<PathBuf>,
}

struct Spare {
    id: u64,
    key: Key,
    child: Child,
    order: tokio::net::UnixStream,
    cgroup: Option<CommandCgroup>,
    /// The launch spec it prepared for (see [`super::ahead`]): it serves only that policy.
    ahead: Option<LaunchSpec>,
}

impl Spare {
    fn fits(&self, key: &Key, launch: Option<&LaunchSpec>) -> bool {
        self.key == *key
            && match (&self.ahead, launch) {
                (None, _) => true,
                (Some(a), Some(l)) => ahead::same_policy(a, l),
                (Some(_), None) => false,
            }
    }
}

/// The waiting spares, oldest first.
static POOL: Mutex<Vec<Spare>> = Mutex::new(Vec::new());
/// The last sandboxed command's launch spec: when the next one has the same policy, the
/// spare after it is prepared for that policy.
static LAST: Mutex<Option<LaunchSpec>> = Mutex::new(None);

/// What the next spare prepares for: `launch`'s policy when the command before had it too
/// (so a host alternating policies keeps spares that serve either).
fn predict(launch: Option<&LaunchSpec>) -> Option<LaunchSpec> {
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let ahead = match (launch, last.as_ref()) {
        (Some(l), Some(p)) if ahead::preparable(l) && ahead::same_policy(l, p) => {
            Some(LaunchSpec {
                tmp_dir: None,
                max_processes: None,
                ..l.clone()
            })
        }
        _ => None,
    };
    *last = launch.cloned();
    ahead
}
static IDS: AtomicU64 = AtomicU64::new(1);

fn pool() -> std::sync::MutexGuard<'static, Vec<Spare>> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many spares wait, and how long each waits unused (`sandbox_warm_spares`,
/// `sandbox_warm_idle_ms`).
#[derive(Clone, Copy, Debug)]
pub struct Warm {
    pub idle: Duration,
    pub spares: usize,
}

/// Lets the waiting spares go (shutdown; tests).
pub fn discard() {
    let spares = std::mem::take(&mut *pool());
    drop(spares);
}

/// What a spare gave back.
pub enum Outcome {
    /// The command runs.
    Started(Box<Started>),
    /// `chdir` or `exec` failed the way a cold spawn reports it.
    Failed(std::io::Error),
    /// No spare could serve it: start cold.
    Cold,
}

fn cgroup_base(cg: Option<&CommandCgroup>) -> Option<PathBuf> {
    cg.and_then(|c| c.dir().parent()).map(Path::to_path_buf)
}

/// Runs `order` in the oldest waiting spare that fits (`cgroup` is the one prepared for the
/// command; the spare's own is used instead, its `pids.max` set from it), and starts the
/// next spare in the background with the unused cgroup.
pub async fn run(
    exe: &Path,
    order: &Order<'_>,
    cgroup: &mut Option<CommandCgroup>,
    warm: Warm,
    ended: tokio::sync::oneshot::Receiver<()>,
) -> Outcome {
    let key = Key {
        exe: exe.to_path_buf(),
        cgroup_base: cgroup_base(cgroup.as_ref()),
    };
    let (taken, unfit) = {
        let mut p = pool();
        match p.iter().position(|s| s.fits(&key, order.launch)) {
            Some(i) => (Some(p.remove(i)), None),
            // None fits (another binary or cgroup base, prepared for another policy): the
            // oldest makes room for one that will.
            None if !p.is_empty() => (None, Some(p.remove(0))),
            None => (None, None),
        }
    };
    drop(unfit);
    let outcome = match taken {
        Some(spare) => use_spare(spare, order, cgroup.as_ref().map(CommandCgroup::max)).await,
        None => Outcome::Cold,
    };
    // A started command keeps the spare's cgroup; the prepared one goes to the next spare.
    // A cold start uses the prepared one, and the next spare makes its own.
    let next_cg = match &outcome {
        Outcome::Started(..) => cgroup.take(),
        _ => cgroup.as_ref().and_then(|c| c.sibling().ok()),
    };
    if key.cgroup_base.is_some() == next_cg.is_some() {
        tokio::spawn(refill(key, next_cg, warm, predict(order.launch), ended));
    }
    outcome
}

async fn use_spare(mut spare: Spare, order: &Order<'_>, max: Option<u32>) -> Outcome {
    let bytes = match order.encode() {
        Ok(b) => b,
        Err(e) => return Outcome::Failed(std::io::Error::other(e)),
    };
    if let (Some(cg), Some(max)) = (&mut spare.cgroup, max)
        && cg.max() != max
        && cg.set_max(max).is_err()
    {
        return Outcome::Cold;
    }
    // A command that reads stdin gets a pipe, its read end sent with the order's first byte.
    let (stdin, sent) = if order.stdin_null {
        (None, 0)
    } else {
        let Ok((read, write)) = std::io::pipe() else {
            return Outcome::Cold;
        };
        match send_fd_now(&spare.order, &bytes[..1], &OwnedFd::from(read)) {
            Ok(1) => (Some(write), 1),
            _ => return Outcome::Cold,
        }
    };
    if spare.order.write_all(&bytes[sent..]).await.is_err() {
        return Outcome::Cold;
    }
    let exit = match answer(&mut spare.order).await {
        Answer::Running => None,
        Answer::Reporting(got) => Some(ExitReport {
            stream: spare.order,
            got,
        }),
        Answer::Failed(e) if e == libc::ETXTBSY => return Outcome::Cold, // the cold path retries it
        Answer::Failed(e) => return Outcome::Failed(std::io::Error::from_raw_os_error(e)),
        Answer::Cold => return Outcome::Cold,
    };
    if let Some(write) = stdin {
        match tokio::process::ChildStdin::from_std(std::process::ChildStdin::from(OwnedFd::from(
            write,
        ))) {
            Ok(w) => spare.child.stdin = Some(w),
            Err(e) => return Outcome::Failed(e),
        }
    }
    Outcome::Started(Box::new(Started {
        child: spare.child,
        cgroup: spare.cgroup.take(),
        exit,
    }))
}

/// A warm-started command.
pub struct Started {
    pub child: Child,
    /// The cgroup it runs in.
    pub cgroup: Option<CommandCgroup>,
    /// Where a prepared init reports the exit code.
    pub exit: Option<ExitReport>,
}

/// What a spare answered to its order.
enum Answer {
    /// Accepted; it runs (EOF).
    Running,
    /// A prepared init accepted and started it, and reports the exit code on the socket:
    /// what came after `B` `R` (a quick command's `X` can come in the same read).
    Reporting(Vec<u8>),
    /// `chdir`, stdin or `exec` failed with this errno.
    Failed(i32),
    /// Anything else (`S`, a spare that died): start the command cold.
    Cold,
}

/// Reads the answer: to EOF, or to `B` `R` (a prepared init keeps the socket).
async fn answer(stream: &mut tokio::net::UnixStream) -> Answer {
    let mut got = Vec::with_capacity(8);
    loop {
        let mut buf = [0u8; 16];
        match stream.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => return Answer::Cold,
        }
        if got.starts_with(b"BR") {
            return Answer::Reporting(got.split_off(2));
        }
    }
    match got.as_slice() {
        [b'A'] => Answer::Running,
        // `A` or `B`, `E` + errno: chdir or stdin failed; `A` + errno: exec failed.
        [b'A' | b'B', b'E', a, b, c, d] | [b'A', a, b, c, d] => {
            Answer::Failed(i32::from_le_bytes([*a, *b, *c, *d]))
        }
        _ => Answer::Cold,
    }
}

/// The socket a prepared init sends `X` + the exit code on, once the command and everything
/// it started are dead.
pub struct ExitReport {
    stream: tokio::net::UnixStream,
    /// What was read already.
    got: Vec<u8>,
}

impl ExitReport {
    /// The command's exit code (as the spare would exit with), or `None` when init died
    /// without reporting (the caller waits for the spare itself).
    pub async fn code(&mut self) -> Option<i32> {
        while self.got.len() < 5 {
            let mut buf = [0u8; 5];
            let n = self
                .stream
                .read(&mut buf[..5 - self.got.len()])
                .await
                .ok()?;
            if n == 0 {
                return None;
            }
            self.got.extend_from_slice(&buf[..n]);
        }
        let m = &self.got;
        (m[0] == b'X').then(|| i32::from_le_bytes([m[1], m[2], m[3], m[4]]))
    }
}

/// Starts a spare with `cgroup` and parks it, unless the pool is full. Once the command that
/// made room is over (`ended`), tops the pool up (spares past the first make their own
/// cgroups) and, with `ahead`, tells every unprepared spare that policy; so neither takes a
/// core from that command.
async fn refill(
    key: Key,
    cgroup: Option<CommandCgroup>,
    warm: Warm,
    ahead: Option<LaunchSpec>,
    ended: tokio::sync::oneshot::Receiver<()>,
) {
    if pool().len() < warm.spares {
        park(&key, cgroup, warm);
    }
    tokio::select! {
        _ = ended => {}
        // A command longer than a spare's idle time: nothing waits to be prepared.
        () = tokio::time::sleep(warm.idle) => return,
    }
    while pool().len() < warm.spares {
        // Past the first, each spare makes its own cgroup, beside a parked one's.
        let cg = if key.cgroup_base.is_some() {
            let made = pool()
                .iter()
                .filter(|s| s.key == key)
                .find_map(|s| s.cgroup.as_ref())
                .map(CommandCgroup::sibling);
            match made {
                Some(Ok(cg)) => Some(cg),
                _ => break,
            }
        } else {
            None
        };
        if !park(&key, cg, warm) {
            break;
        }
    }
    if let Some(spec) = ahead {
        prepare(&spec);
    }
}

/// Starts a spare, parks it if there is room, and lets it go after `warm.idle` unused.
/// Whether it was parked.
fn park(key: &Key, cgroup: Option<CommandCgroup>, warm: Warm) -> bool {
    let spare = match start(key.clone(), cgroup) {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!("warm spawn: cannot start a spare: {e}");
            return false;
        }
    };
    let id = spare.id;
    {
        let mut p = pool();
        if p.len() >= warm.spares {
            return false; // a parallel refill filled it
        }
        p.push(spare);
    }
    tokio::spawn(async move {
        tokio::time::sleep(warm.idle).await;
        let idle_spare = {
            let mut p = pool();
            p.iter().position(|s| s.id == id).map(|i| p.remove(i))
        };
        drop(idle_spare);
    });
    true
}

/// Tells every parked spare that is not prepared yet to prepare for `spec`.
fn prepare(spec: &LaunchSpec) {
    let Ok(json) = serde_json::to_vec(spec) else {
        return;
    };
    let mut msg = vec![PREPARE];
    put(&mut msg, &json);
    let mut p = pool();
    // A few KiB into the empty buffer of a socket nothing else was written to.
    p.retain_mut(|spare| {
        if spare.ahead.is_some() {
            return true;
        }
        match send_now(&spare.order, &msg) {
            Ok(n) if n == msg.len() => {
                spare.ahead = Some(spec.clone());
                true
            }
            Ok(_) => false, // half a message: the spare is of no use
            Err(_) => true,
        }
    });
}

/// Sends what fits without waiting. On the descriptor itself: tokio's `try_write` refuses
/// until the reactor has reported the socket writable, which for a spare parked a moment
/// ago (a command that ended within milliseconds) it has not yet, and the policy was lost.
fn send_now(stream: &tokio::net::UnixStream, msg: &[u8]) -> std::io::Result<usize> {
    // SAFETY: sending a valid buffer on an open socket; MSG_DONTWAIT never blocks.
    let sent = unsafe {
        libc::send(
            stream.as_raw_fd(),
            msg.as_ptr().cast(),
            msg.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    usize::try_from(sent).map_err(|_| std::io::Error::last_os_error())
}

/// [`send_now`] with `fd` attached (`SCM_RIGHTS`).
fn send_fd_now(
    stream: &tokio::net::UnixStream,
    msg: &[u8],
    fd: &OwnedFd,
) -> std::io::Result<usize> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let fds = [fd.as_raw_fd()];
    sendmsg::<()>(
        stream.as_raw_fd(),
        &[std::io::IoSlice::new(msg)],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map_err(std::io::Error::from)
}

fn start(key: Key, cgroup: Option<CommandCgroup>) -> std::io::Result<Spare> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let mut cmd = Command::new(&key.exe);
    cmd.arg(SUBCOMMAND).arg(std::process::id().to_string());
    if let Some(cg) = &cgroup {
        cmd.arg(OsStr::from_bytes(cg.procs_path().to_bytes()));
    }
    // No `pre_exec` hook: std then starts it with `posix_spawn`. The socket goes in as
    // stdin, and `cmd` (dropped on return) holds our copy of their end.
    cmd.env_clear()
        .current_dir("/")
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let child = cmd.spawn()?;
    drop(cmd);
    ours.set_nonblocking(true)?;
    Ok(Spare {
        id: IDS.fetch_add(1, Ordering::Relaxed),
        key,
        child,
        order: tokio::net::UnixStream::from_std(ours)?,
        cgroup,
        ahead: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (tokio::net::UnixStream, std::os::unix::net::UnixStream) {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        (tokio::net::UnixStream::from_std(ours).unwrap(), theirs)
    }

    #[tokio::test]
    async fn an_exit_code_in_the_same_read_as_the_start_is_kept() {
        use std::io::Write;
        let (mut ours, mut theirs) = pair();
        let mut all = b"BRX".to_vec();
        all.extend_from_slice(&5i32.to_le_bytes());
        theirs.write_all(&all).unwrap();
        // Init keeps its end open until it exits: the answer must not wait for EOF.
        let read = tokio::time::timeout(std::time::Duration::from_secs(5), answer(&mut ours));
        let Ok(Answer::Reporting(got)) = read.await else {
            panic!("not reporting");
        };
        let mut report = ExitReport { stream: ours, got };
        assert_eq!(report.code().await, Some(5));
    }

    #[tokio::test]
    async fn answers_split_across_reads_are_read_whole() {
        use std::io::Write;
        let (mut ours, mut theirs) = pair();
        let writer = std::thread::spawn(move || {
            for part in [&b"B"[..], b"R", b"X\x07", b"\0\0\0"] {
                theirs.write_all(part).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            theirs
        });
        let Answer::Reporting(got) = answer(&mut ours).await else {
            panic!("not reporting");
        };
        let mut report = ExitReport { stream: ours, got };
        assert_eq!(report.code().await, Some(7));
        drop(writer.join().unwrap());

        // Init gone without a report: none.
        let (mut ours, mut theirs) = pair();
        theirs.write_all(b"BR").unwrap();
        drop(theirs);
        let Answer::Reporting(got) = answer(&mut ours).await else {
            panic!("not reporting");
        };
        assert_eq!(ExitReport { stream: ours, got }.code().await, None);

        let (mut ours, mut theirs) = pair();
        theirs.write_all(b"A").unwrap();
        drop(theirs);
        assert!(matches!(answer(&mut ours).await, Answer::Running));
        let (mut ours, mut theirs) = pair();
        theirs.write_all(b"BE\x02\0\0\0").unwrap();
        drop(theirs);
        assert!(matches!(answer(&mut ours).await, Answer::Failed(2)));
        let (mut ours, theirs) = pair();
        drop(theirs);
        assert!(matches!(answer(&mut ours).await, Answer::Cold));
    }

    #[tokio::test]
    async fn a_policy_reaches_a_socket_the_reactor_has_not_polled_yet() {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let ours = tokio::net::UnixStream::from_std(ours).unwrap();
        // No await in between: the reactor has not reported the socket writable.
        assert_eq!(send_now(&ours, b"P1234").unwrap(), 5);
        let mut got = [0u8; 5];
        std::io::Read::read_exact(&mut &theirs, &mut got).unwrap();
        assert_eq!(&got, b"P1234");
    }

    #[test]
    fn orders_round_trip_with_non_utf8_bytes() {
        let cwd = PathBuf::from(OsString::from_vec(b"/tmp/w\xff".to_vec()));
        let argv = [
            OsStr::new("bash"),
            OsStr::from_bytes(b"-c\xfe"),
            OsStr::new(""),
        ];
        let order = Order {
            launch: None,
            argv: argv.to_vec(),
            cwd: &cwd,
            env: vec![
                ("PATH".into(), "/usr/bin".into()),
                (OsString::from_vec(b"K\x80".to_vec()), OsString::new()),
            ],
            stdin_null: true,
        };
        let bytes = order.encode().expect("encodes");
        assert_eq!(bytes[0], ORDER);
        let len = u32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
        assert_eq!(len, bytes.len() - 5);
        let got = decode(&bytes[5..]).expect("decodes");
        assert_eq!(got.cwd, cwd);
        assert_eq!(
            got.argv,
            argv.iter().map(|a| a.to_os_string()).collect::<Vec<_>>()
        );
        assert_eq!(got.env, order.env);
        assert!(got.stdin_null && got.launch.is_none());
    }

    #[test]
    fn truncated_or_padded_orders_are_refused() {
        let cwd = PathBuf::from("/");
        let order = Order {
            launch: None,
            argv: vec![OsStr::new("true")],
            cwd: &cwd,
            env: Vec::new(),
            stdin_null: false,
        };
        let bytes = order.encode().expect("encodes");
        let body = &bytes[5..];
        for cut in 0..body.len() {
            assert!(decode(&body[..cut]).is_err(), "cut at {cut}");
        }
        let mut padded = body.to_vec();
        padded.push(0);
        assert!(decode(&padded).is_err());
    }
}
