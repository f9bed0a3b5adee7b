//! One `bash_session` terminal: the command on a pseudo-terminal inside the sandbox (the same
//! launcher, policy and marker as `bash`), a reader that buffers its output between calls
//! (bounded, the oldest dropped and counted), and a keeper that reaps it, kills what it left
//! and undoes what it did to protected names.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::unix::AsyncFd;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::super::{KILL_GRACE, Setup, setup};
use crate::config::Settings;
use crate::lifecycle::Lifecycle;
use crate::sandbox::spawn::exit_code;
use crate::sandbox::spawn::{Group, PrivateTmp, spawn, terminate};
use crate::sandbox::{Marker, Sandbox, protect, pty};
use crate::tools::{ToolContext, ToolResult};

/// The terminal's size: wide, so programs that format for the width wrap little.
const ROWS: u16 = 40;
const COLS: u16 = 200;
/// After the command ends, how long its output may take to drain from the terminal.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How long a write may wait for the terminal to take input (a command that stops reading
/// fills the terminal's input queue).
pub const WRITE_WAIT: Duration = Duration::from_secs(10);

/// How far the command got.
#[derive(Debug, Clone, Default)]
struct Life {
    /// Bumped on every chunk of output.
    seq: u64,
    /// Set once the command was reaped and its output drained: the exit status (128 + the
    /// signal when killed).
    exit: Option<i32>,
    /// Protected names the command left changed and that were put back.
    cleanup: Vec<String>,
}

/// Output produced and not yet returned.
struct Pending {
    buf: VecDeque<u8>,
    /// Oldest bytes dropped past `cap` since the last call.
    dropped: u64,
    cap: usize,
}

impl Pending {
    fn push(&mut self, b: &[u8]) {
        self.buf.extend(b);
        if self.buf.len() > self.cap {
            let over = self.buf.len() - self.cap;
            self.buf.drain(..over);
            self.dropped += over as u64;
        }
    }

    /// Takes everything, except (while the command runs) a trailing partial UTF-8 character
    /// or escape sequence, which waits for the rest.
    fn take(&mut self, running: bool) -> (Vec<u8>, u64) {
        let all: &[u8] = self.buf.make_contiguous();
        let end = if running {
            complete_len(all)
        } else {
            all.len()
        };
        let taken: Vec<u8> = self.buf.drain(..end).collect();
        (taken, std::mem::take(&mut self.dropped))
    }
}

/// The length of `b` without a trailing incomplete UTF-8 character or escape sequence.
fn complete_len(b: &[u8]) -> usize {
    let mut end = b.len();
    for back in 1..=end.min(3) {
        let c = b[end - back];
        if c & 0xC0 == 0x80 {
            continue;
        }
        let need = match c {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        if back < need {
            end -= back;
        }
        break;
    }
    let from = end.saturating_sub(256);
    if let Some(p) = b[from..end].iter().rposition(|&c| c == 0x1b) {
        let esc = &b[from + p..end];
        let complete = match esc.get(1) {
            None => false,
            Some(b'[') => esc[2..].iter().any(|c| (0x40..=0x7e).contains(c)),
            Some(b']') => esc.contains(&0x07) || esc.windows(2).skip(1).any(|w| w == b"\x1b\\"),
            Some(_) => true,
        };
        if !complete {
            end = from + p;
        }
    }
    end
}

/// What one call collected.
pub struct Collected {
    pub bytes: Vec<u8>,
    pub dropped: u64,
    /// `Some` once the command ended (and everything it wrote is in `bytes`).
    pub exit: Option<i32>,
    pub cleanup: Vec<String>,
    /// The call was cancelled while it waited.
    pub cancelled: bool,
}

pub struct Terminal {
    pub id: String,
    pub command: String,
    /// The launcher's (or the command's) pid, its process group and session.
    pub pid: i32,
    pub marker: Marker,
    pub workspace: PathBuf,
    started: Instant,
    last_used: Mutex<Instant>,
    master: Arc<AsyncFd<File>>,
    pending: Arc<Mutex<Pending>>,
    life: watch::Receiver<Life>,
    /// Cancelled to end the command: SIGHUP and SIGTERM to its group, SIGKILL after a grace.
    end: CancellationToken,
    /// One `write_stdin` at a time types (reads never wait: a long poll must not hold
    /// keystrokes back).
    pub typing: tokio::sync::Mutex<()>,
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.end.cancel();
    }
}

impl Terminal {
    /// Starts `command` with `bash -c` on a new terminal in the sandbox; a refusal or a
    /// failure to start is returned as the tool's result.
    pub async fn start(
        id: String,
        command: &str,
        ctx: &ToolContext,
        sandbox: &Sandbox,
        settings: &Settings,
    ) -> Result<Terminal, ToolResult> {
        let Setup {
            tmp,
            marker,
            guard,
            mut spec,
        } = setup(sandbox, ctx, settings, super::NAME, command).await?;
        let fail = |msg: String| super::super::with_marker(ToolResult::recoverable(msg), &marker);
        let pty = pty::open(ROWS, COLS)
            .map_err(|e| fail(format!("bash_session: cannot open a terminal: {e}")))?;
        // SAFETY: the File owns its descriptor for the AsyncFd's whole life and always
        // returns the same one.
        let master = unsafe { AsyncFd::register(pty.master) }.map_err(|e| {
            fail(format!(
                "bash_session: cannot watch the terminal: {}",
                std::io::Error::from(e)
            ))
        })?;
        let master = Arc::new(master);
        // No colours or cursor games, and no pager waiting for a key nobody presses.
        for (k, v) in [
            ("TERM", "dumb"),
            ("PAGER", "cat"),
            ("GIT_PAGER", "cat"),
            ("NO_COLOR", "1"),
        ] {
            spec.extra_env.push((k.into(), v.into()));
        }
        // Spares have their stdio fixed: a terminal starts cold.
        spec.warm = None;
        spec.terminal = Some(pty.slave);
        let workspace = spec.cwd.clone();
        // The group is registered with the lifecycle by hand: it outlives this call.
        let spawned = spawn(spec, None).await.map_err(|e| {
            fail(format!(
                "bash_session: cannot start bash in {}: {e}",
                workspace.display()
            ))
        })?;
        let pid = spawned.group.pgid();
        let lifecycle = ctx.lifecycle.clone();
        if let Some(l) = &lifecycle {
            l.register_child_group(pid);
        }
        let pending = Arc::new(Mutex::new(Pending {
            buf: VecDeque::new(),
            dropped: 0,
            cap: settings.bash_session_buffer_bytes,
        }));
        let (tx, rx) = watch::channel(Life::default());
        let tx = Arc::new(tx);
        let stop_reader = CancellationToken::new();
        let end = CancellationToken::new();
        tokio::spawn(read_loop(
            master.clone(),
            pending.clone(),
            tx.clone(),
            stop_reader.clone(),
        ));
        tokio::spawn(keep(Keeper {
            child: spawned.child,
            master: master.clone(),
            group: spawned.group,
            lifecycle,
            guard,
            tmp,
            end: end.clone(),
            life: tx,
            stop_reader,
        }));
        let now = Instant::now();
        Ok(Terminal {
            id,
            command: command.to_string(),
            pid,
            marker,
            workspace,
            started: now,
            last_used: Mutex::new(now),
            master,
            pending,
            life: rx,
            end,
            typing: tokio::sync::Mutex::new(()),
        })
    }

    pub fn running(&self) -> bool {
        self.life.borrow().exit.is_none()
    }

    pub fn exit(&self) -> Option<i32> {
        self.life.borrow().exit
    }

    pub fn idle(&self) -> Duration {
        self.last_used
            .lock()
            .map(|t| t.elapsed())
            .unwrap_or_default()
    }

    pub fn age(&self) -> Duration {
        self.started.elapsed()
    }

    /// Waits `wait` (or until the command has ended and its output drained, or `cancel`),
    /// then takes the output produced since the last call.
    pub async fn collect(&self, wait: Duration, cancel: &CancellationToken) -> Collected {
        let mut rx = self.life.clone();
        let deadline = tokio::time::Instant::now() + wait;
        let mut cancelled = false;
        loop {
            if rx.borrow_and_update().exit.is_some() {
                break;
            }
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    cancelled = true;
                    break;
                }
                r = rx.changed() => if r.is_err() { break },
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        let life = rx.borrow().clone();
        let (bytes, dropped) = self
            .pending
            .lock()
            .map(|mut p| p.take(life.exit.is_none()))
            .unwrap_or_default();
        if let Ok(mut t) = self.last_used.lock() {
            *t = Instant::now();
        }
        Collected {
            bytes,
            dropped,
            exit: life.exit,
            cleanup: life.cleanup,
            cancelled,
        }
    }

    /// Writes `bytes` to the terminal as typed input; fails when the command has ended or the
    /// terminal takes no input for `WRITE_WAIT`.
    pub async fn write(&self, bytes: &[u8], cancel: &CancellationToken) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + WRITE_WAIT;
        let mut off = 0;
        while off < bytes.len() {
            if let Some(code) = self.exit() {
                return Err(format!("the command has exited (exit {code})"));
            }
            let mut guard = tokio::select! {
                g = self.master.writable() => g.map_err(|e| format!("the terminal failed: {e}"))?,
                _ = cancel.cancelled() => return Err("cancelled".into()),
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(format!(
                        "the terminal took {off} of {} bytes in {} s: the command is not reading its input",
                        bytes.len(),
                        WRITE_WAIT.as_secs()
                    ));
                }
            };
            match guard.try_io(|fd| {
                let mut w: &File = fd.get_ref();
                w.write(&bytes[off..])
            }) {
                Err(_would_block) => continue,
                Ok(Ok(n)) => off += n,
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // EIO: nothing holds the terminal any more.
                Ok(Err(e)) => return Err(format!("the terminal refused input: {e}")),
            }
        }
        if let Ok(mut t) = self.last_used.lock() {
            *t = Instant::now();
        }
        Ok(())
    }

    /// Ends the command (SIGHUP and SIGTERM to its group, SIGKILL after a grace) and returns what it
    /// wrote last.
    pub async fn kill(&self) -> Collected {
        self.end.cancel();
        // The keeper's worst case: the grace, `terminate`'s 5 s wait after SIGKILL, the drain.
        let bound = KILL_GRACE + Duration::from_secs(5) + DRAIN_GRACE + Duration::from_secs(1);
        self.collect(bound, &CancellationToken::new()).await
    }

    /// Ends the command without waiting.
    pub fn end(&self) {
        self.end.cancel();
    }
}

/// Reads the terminal into `pending` until every holder of its slave side closed it (EIO) or
/// `stop`.
async fn read_loop(
    master: Arc<AsyncFd<File>>,
    pending: Arc<Mutex<Pending>>,
    life: Arc<watch::Sender<Life>>,
    stop: CancellationToken,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let mut guard = tokio::select! {
            g = master.readable() => match g {
                Ok(g) => g,
                Err(_) => break,
            },
            _ = stop.cancelled() => break,
        };
        match guard.try_io(|fd| {
            let mut r: &File = fd.get_ref();
            r.read(&mut buf)
        }) {
            Err(_would_block) => continue,
            Ok(Ok(0)) => break,
            Ok(Ok(n)) => {
                if let Ok(mut p) = pending.lock() {
                    p.push(&buf[..n]);
                }
                life.send_modify(|l| l.seq += 1);
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(Err(_)) => break,
        }
    }
    // Wakes the keeper waiting for the drain.
    life.send_modify(|l| l.seq += 1);
    stop.cancel();
}

/// SIGHUP to every process group of the terminal's session (`sid`, the launcher's pid) and
/// to its foreground group: an interactive shell moves itself and each job into groups of
/// their own, and a shell whose job has the terminal is not in the foreground group.
fn hang_up(master: &AsyncFd<File>, sid: i32) {
    use std::os::fd::AsRawFd;
    let mut groups = session_groups(sid);
    // SAFETY: TIOCGPGRP on the master reads the slave side's foreground group.
    let fg = unsafe { libc::tcgetpgrp(master.get_ref().as_raw_fd()) };
    groups.push(fg);
    groups.sort_unstable();
    groups.dedup();
    for g in groups.into_iter().filter(|g| *g > 1) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(g),
            nix::sys::signal::Signal::SIGHUP,
        );
    }
}

/// The process groups of session `sid`, from `/proc/<pid>/stat` (pgrp and session are the
/// 3rd and 4th fields after the command name).
fn session_groups(sid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let name = e.file_name();
        if !name
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().take(4).collect();
        if let [_, _, pgrp, session] = f[..]
            && session.parse::<i32>() == Ok(sid)
            && let Ok(g) = pgrp.parse::<i32>()
        {
            out.push(g);
        }
    }
    out
}

struct Keeper {
    child: tokio::process::Child,
    master: Arc<AsyncFd<File>>,
    group: Group<'static>,
    lifecycle: Option<Arc<Lifecycle>>,
    guard: Option<protect::Guard>,
    tmp: PrivateTmp,
    end: CancellationToken,
    life: Arc<watch::Sender<Life>>,
    /// Cancelled by the reader when it is done; the keeper cancels it to stop a reader that
    /// a straggler keeps waiting.
    stop_reader: CancellationToken,
}

/// Waits for the command (or `end`), kills what is left of its group, lets the output drain,
/// puts protected names back, then publishes the exit status.
async fn keep(k: Keeper) {
    let Keeper {
        mut child,
        master,
        mut group,
        lifecycle,
        guard,
        tmp,
        end,
        life,
        stop_reader,
    } = k;
    let reaped = tokio::select! {
        st = child.wait() => {
            // Stragglers (a `cmd &` outside a PID namespace) would hold the terminal open.
            group.kill();
            st.is_ok()
        }
        _ = end.cancelled() => {
            // A hangup first, as when a terminal closes, to every group of its session (an
            // interactive shell moves into its own group, and ignores SIGTERM).
            group.signal(nix::sys::signal::Signal::SIGHUP);
            hang_up(&master, group.pgid());
            terminate(&mut child, &group, KILL_GRACE).await
        }
    };
    let code = match child.try_wait() {
        Ok(Some(s)) => exit_code(s),
        _ => 128 + libc::SIGKILL,
    };
    if reaped {
        group.disarm();
    }
    let pgid = group.pgid();
    drop(group);
    if let Some(l) = &lifecycle {
        l.unregister_child_group(pgid);
    }
    if tokio::time::timeout(DRAIN_GRACE, stop_reader.cancelled())
        .await
        .is_err()
    {
        stop_reader.cancel();
    }
    drop(tmp);
    let cleanup = match guard {
        Some(g) => g.finish_async().await,
        None => Vec::new(),
    };
    life.send_modify(|l| {
        l.exit = Some(code);
        l.cleanup = cleanup;
    });
}

/// The JSON the listing shows for one terminal.
pub fn summary(t: &Terminal) -> Value {
    serde_json::json!({
        "sessionId": t.id,
        "command": t.command,
        "running": t.running(),
        "exitCode": t.exit(),
        "pid": t.pid,
        "ageMs": u64::try_from(t.age().as_millis()).unwrap_or(u64::MAX),
        "idleMs": u64::try_from(t.idle().as_millis()).unwrap_or(u64::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_characters_and_escapes_wait_for_the_rest() {
        assert_eq!(complete_len(b"abc"), 3);
        assert_eq!(complete_len("aé".as_bytes()), 3);
        assert_eq!(complete_len(&"aé".as_bytes()[..2]), 1);
        assert_eq!(complete_len(&"a€".as_bytes()[..3]), 1);
        assert_eq!(complete_len(b"ok\x1b[3"), 2);
        assert_eq!(complete_len(b"ok\x1b[31m"), 7);
        assert_eq!(complete_len(b"ok\x1b]0;title"), 2);
        assert_eq!(complete_len(b"ok\x1b]0;title\x07"), 12);
        assert_eq!(complete_len(b"ok\x1b"), 2);
    }

    #[test]
    fn the_buffer_drops_the_oldest_and_counts_it() {
        let mut p = Pending {
            buf: VecDeque::new(),
            dropped: 0,
            cap: 8,
        };
        p.push(b"0123456789");
        p.push(b"ab");
        let (b, dropped) = p.take(true);
        assert_eq!(b, b"456789ab");
        assert_eq!(dropped, 4);
        assert_eq!(p.take(true), (Vec::new(), 0));
    }
}
