//! Process lifetime: the registry of cancellable in-flight work, the child process groups
//! that must die with us, and the shutdown request channel.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Why the process is stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// `system.shutdown`: drain in-flight work, bounded by the grace period.
    Graceful,
    /// `system.shutdown_now`: stop at once.
    Now,
    /// stdin closed or the parent went away: drain like `Graceful`.
    Eof,
    /// SIGTERM / SIGINT: stop at once.
    Signal,
}

impl Cause {
    pub fn reason(self) -> &'static str {
        match self {
            Cause::Eof => "eof",
            _ => "normal",
        }
    }

    pub fn drains(self) -> bool {
        matches!(self, Cause::Graceful | Cause::Eof)
    }
}

pub struct Lifecycle {
    root: CancellationToken,
    tracker: TaskTracker,
    children: Mutex<HashSet<i32>>,
    stop_tx: mpsc::UnboundedSender<Cause>,
}

impl Lifecycle {
    pub fn new() -> (Lifecycle, mpsc::UnboundedReceiver<Cause>) {
        let (stop_tx, stop_rx) = mpsc::unbounded_channel();
        (
            Lifecycle {
                root: CancellationToken::new(),
                tracker: TaskTracker::new(),
                children: Mutex::new(HashSet::new()),
                stop_tx,
            },
            stop_rx,
        )
    }

    /// Runs `fut` as tracked in-flight work: a graceful shutdown waits for it (bounded).
    pub fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn(fut);
    }

    /// A token cancelled when shutdown begins; long-running work selects on a child of it.
    pub fn token(&self) -> CancellationToken {
        self.root.child_token()
    }

    pub fn request_stop(&self, cause: Cause) {
        let _ = self.stop_tx.send(cause);
    }

    /// Records a child process group (its pgid) to kill if we stop first.
    pub fn register_child_group(&self, pgid: i32) {
        self.children_guard().insert(pgid);
    }

    pub fn unregister_child_group(&self, pgid: i32) {
        self.children_guard().remove(&pgid);
    }

    fn children_guard(&self) -> std::sync::MutexGuard<'_, HashSet<i32>> {
        self.children.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Cancels in-flight work now, ahead of the `drain` that follows (stdin EOF: the turns
    /// must see the cancel before their host waits fail as closed).
    pub fn cancel_work(&self) {
        self.root.cancel();
    }

    /// Cancels in-flight work and waits up to `grace` for it to finish.
    pub async fn drain(&self, grace: Duration) -> bool {
        self.root.cancel();
        self.tracker.close();
        tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_ok()
    }

    /// SIGKILLs every child process group still registered.
    pub fn kill_children(&self) {
        let groups: Vec<i32> = self.children_guard().drain().collect();
        for pgid in groups {
            if pgid > 1 {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}
