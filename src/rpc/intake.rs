//! Admission bookkeeping. Requests that are not control methods: at most
//! `max_inflight_requests` run, at most `max_queued_requests` wait in order, and every
//! queued or running request with an id can be cancelled by that id (`request.cancel`).
//! Control methods have their own `max_inflight_control_requests` slots: they never wait for
//! the others, and a flood of them still cannot grow memory without bound.
//! Pure bookkeeping over an opaque job type, so it is tested without a process or an App.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// What a started job carries: the token `request.cancel` fires, and where it is registered.
pub struct Ticket {
    seq: u64,
    key: Option<String>,
    pub cancel: CancellationToken,
}

/// The outcome of offering a job.
pub enum Admit<J> {
    /// A slot was free: run it now, and call `finish` with the ticket when it ends.
    Start(Ticket, J),
    /// Every slot is busy; it waits in the queue and comes back from a `finish`.
    Queued,
    /// Slots and queue are full: the job is handed back; wait for `room` and offer it again.
    Full(J),
}

struct Waiting<J> {
    ticket: Ticket,
    job: J,
}

struct State<J> {
    running: usize,
    next_seq: u64,
    queue: VecDeque<Waiting<J>>,
    /// Canonical id text → the cancel tokens of its queued or running requests (a host may
    /// reuse an id while an earlier request with it still runs; a cancel hits all of them).
    live: HashMap<String, Vec<(u64, CancellationToken)>>,
}

pub struct Intake<J> {
    max_running: usize,
    max_queued: usize,
    state: Mutex<State<J>>,
    /// Signalled whenever a queue place or a slot frees; the dispatcher is the one waiter.
    room: Notify,
    control: std::sync::Arc<Semaphore>,
}

impl<J> Intake<J> {
    pub fn new(max_running: usize, max_queued: usize, max_control: usize) -> Self {
        Intake {
            control: std::sync::Arc::new(Semaphore::new(max_control.max(1))),
            max_running: max_running.max(1),
            max_queued,
            state: Mutex::new(State {
                running: 0,
                next_seq: 0,
                queue: VecDeque::new(),
                live: HashMap::new(),
            }),
            room: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<J>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Offers a job; `key` is its id (see `id_key`) when it can be cancelled by id.
    pub fn admit(&self, key: Option<String>, job: J) -> Admit<J> {
        let mut s = self.lock();
        // The queue is only non-empty while every slot is busy, so a free slot means the job
        // is next in line.
        let start = s.running < self.max_running;
        if !start && s.queue.len() >= self.max_queued {
            return Admit::Full(job);
        }
        let seq = s.next_seq;
        s.next_seq += 1;
        let cancel = CancellationToken::new();
        if let Some(k) = &key {
            s.live
                .entry(k.clone())
                .or_default()
                .push((seq, cancel.clone()));
        }
        let ticket = Ticket { seq, key, cancel };
        if start {
            s.running += 1;
            Admit::Start(ticket, job)
        } else {
            s.queue.push_back(Waiting { ticket, job });
            Admit::Queued
        }
    }

    /// Offers a job, waiting while slots and queue are full. Returns the job to start now,
    /// if it got a slot at once.
    pub async fn admit_waiting(&self, key: Option<String>, mut job: J) -> Option<(Ticket, J)> {
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            // Registered before the check, so a slot freed in between still wakes us.
            room.as_mut().enable();
            match self.admit(key.clone(), job) {
                Admit::Start(t, j) => return Some((t, j)),
                Admit::Queued => return None,
                Admit::Full(j) => job = j,
            }
            room.await;
        }
    }

    /// A started job ended (answered, failed or cancelled): forgets its id and hands its slot
    /// to the oldest waiting job, which the caller must start.
    pub fn finish(&self, ticket: &Ticket) -> Option<(Ticket, J)> {
        let next = {
            let mut s = self.lock();
            forget(&mut s.live, ticket);
            match s.queue.pop_front() {
                Some(w) => Some((w.ticket, w.job)),
                None => {
                    s.running = s.running.saturating_sub(1);
                    None
                }
            }
        };
        self.room.notify_one();
        next
    }

    /// Cancels every queued or running request with this id. Running ones get their token
    /// fired (their task answers); queued ones are removed and handed back to be answered.
    /// `found` is false when no request with the id is queued or running.
    pub fn cancel(&self, key: &str) -> Cancelled<J> {
        let (found, removed) = {
            let mut s = self.lock();
            let Some(entries) = s.live.remove(key) else {
                return Cancelled {
                    found: false,
                    removed: Vec::new(),
                };
            };
            let mut removed = Vec::new();
            for (seq, token) in entries {
                token.cancel();
                if let Some(i) = s.queue.iter().position(|w| w.ticket.seq == seq)
                    && let Some(w) = s.queue.remove(i)
                {
                    removed.push(w.job);
                }
            }
            (true, removed)
        };
        if !removed.is_empty() {
            self.room.notify_one();
        }
        Cancelled { found, removed }
    }

    /// A control-method slot; waits only while `max_inflight_control_requests` control
    /// methods run (a flood of pings, or pings waiting for the first health probe).
    pub async fn control_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.control.clone().acquire_owned().await.ok()
    }

    /// (running, queued) right now.
    pub fn counts(&self) -> (usize, usize) {
        let s = self.lock();
        (s.running, s.queue.len())
    }
}

pub struct Cancelled<J> {
    pub found: bool,
    /// Jobs taken out of the queue, never started: answer each as cancelled.
    pub removed: Vec<J>,
}

fn forget(live: &mut HashMap<String, Vec<(u64, CancellationToken)>>, ticket: &Ticket) {
    let Some(key) = &ticket.key else { return };
    if let Some(v) = live.get_mut(key) {
        v.retain(|(seq, _)| *seq != ticket.seq);
        if v.is_empty() {
            live.remove(key);
        }
    }
}

/// The key a request id is registered under: its canonical JSON text, so `7` and `"7"`
/// differ while `"a\/b"` and `"a/b"` (the same string) match.
pub fn id_key(raw: &str) -> String {
    serde_json::from_str::<serde_json::Value>(raw)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| raw.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started<J>(a: Admit<J>) -> (Ticket, J) {
        match a {
            Admit::Start(t, j) => (t, j),
            _ => panic!("expected a start"),
        }
    }

    #[test]
    fn slots_then_queue_then_full_and_hand_off_in_order() {
        let i = Intake::new(2, 2, 1);
        let (t1, _) = started(i.admit(Some("1".into()), 1));
        let (_t2, _) = started(i.admit(None, 2));
        assert!(matches!(i.admit(Some("3".into()), 3), Admit::Queued));
        assert!(matches!(i.admit(None, 4), Admit::Queued));
        assert!(matches!(i.admit(None, 5), Admit::Full(5)));
        assert_eq!(i.counts(), (2, 2));
        // The first finisher hands its slot to the oldest waiter.
        let (t3, j3) = i.finish(&t1).expect("hand-off");
        assert_eq!(j3, 3);
        assert_eq!(i.counts(), (2, 1));
        assert!(!i.cancel("1").found, "a finished id is forgotten");
        // Cancelling a running job fires its token; it stays running until it finishes.
        let c = i.cancel("3");
        assert!(c.found && c.removed.is_empty());
        assert!(t3.cancel.is_cancelled());
        assert_eq!(i.finish(&t3).map(|(_, j)| j), Some(4));
        assert_eq!(i.counts(), (2, 0));
    }

    #[test]
    fn cancel_removes_queued_jobs_and_frees_their_place() {
        let i = Intake::new(1, 1, 1);
        let (t, _) = started(i.admit(None, "run"));
        assert!(matches!(i.admit(Some("\"q\"".into()), "q"), Admit::Queued));
        assert!(matches!(i.admit(None, "x"), Admit::Full("x")));
        let c = i.cancel("\"q\"");
        assert!(c.found);
        assert_eq!(c.removed, vec!["q"]);
        assert!(matches!(i.admit(None, "x"), Admit::Queued));
        assert!(!i.cancel("\"q\"").found);
        assert_eq!(i.finish(&t).map(|(_, j)| j), Some("x"));
    }

    #[test]
    fn zero_queue_means_wait_for_a_slot() {
        let i = Intake::new(1, 0, 1);
        let (t, _) = started(i.admit(None, 1));
        assert!(matches!(i.admit(None, 2), Admit::Full(2)));
        assert!(i.finish(&t).is_none());
        assert_eq!(i.counts(), (0, 0));
        let _ = started(i.admit(None, 2));
    }

    #[test]
    fn ids_compare_by_json_value_and_type() {
        assert_eq!(id_key("7"), "7");
        assert_eq!(id_key("\"7\""), "\"7\"");
        assert_ne!(id_key("7"), id_key("\"7\""));
        assert_eq!(id_key(r#""a\/b""#), id_key(r#""a/b""#));
        assert_eq!(id_key("null"), "null");
    }

    #[tokio::test]
    async fn a_full_intake_waits_until_a_slot_frees() {
        let i = std::sync::Arc::new(Intake::new(1, 0, 1));
        let (t, _) = started(i.admit(None, 1));
        let i2 = i.clone();
        let waiter = tokio::spawn(async move { i2.admit_waiting(None, 2).await.map(|(_, j)| j) });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        assert!(i.finish(&t).is_none());
        assert_eq!(waiter.await.ok().flatten(), Some(2));
    }
}
