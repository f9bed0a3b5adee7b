//! Trace writes to the store, in the order they happen and off the turn's path. A trace's
//! start and its finished spans are queued and committed together at most `FLUSH_DELAY`
//! later, in one transaction (on the worker when it is small and commits skip the `fsync`,
//! else on the blocking pool: `commits_in_place`); a finished trace is committed at once
//! (its `stream.done` waits for it) with everything queued before it. A short turn thus
//! costs one commit for its whole trace, and a crash loses at most the spans of the last
//! `FLUSH_DELAY`. A failed write costs only the trace's durability.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::trace::SpanRef;
use crate::store::{Store, TraceRow, TraceWrite};

/// How long a started trace or a finished span may wait to be committed.
pub const FLUSH_DELAY: Duration = Duration::from_millis(20);

/// Most queued writes a flush commits on the worker that runs it (`commits_in_place`).
const INLINE_WRITES: usize = 16;

/// What the writer answers for a finished trace: the stored body (its JSON text) and how
/// many traces retention removed.
pub type Finished = Result<(String, usize), String>;

struct Job {
    write: Queued,
    done: Option<tokio::sync::oneshot::Sender<Finished>>,
}

/// A queued write: a trace's start or finish as built, or a finished span serialised only if
/// its batch needs it.
enum Queued {
    Write(TraceWrite),
    Span(SpanRef),
}

pub struct Writer {
    store: Arc<Store>,
    queue: Mutex<Vec<Job>>,
    /// A delayed flush is on its way.
    scheduled: AtomicBool,
    /// Held while a batch is taken and committed, so batches commit in queue order.
    commit: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Writer {
    pub fn new(store: Arc<Store>) -> Writer {
        Writer {
            store,
            queue: Mutex::new(Vec::new()),
            scheduled: AtomicBool::new(false),
            commit: Mutex::new(()),
        }
    }

    /// Queues a trace's start (its header row), committed within `FLUSH_DELAY`.
    pub fn queue_begin(self: &Arc<Self>, row: TraceRow) {
        self.push_delayed(Queued::Write(TraceWrite::Begin(row)));
    }

    /// Queues a finished span, committed within `FLUSH_DELAY` unless its trace finishes
    /// first (its whole body replaces it).
    pub fn queue_span(self: &Arc<Self>, span: SpanRef) {
        self.push_delayed(Queued::Span(span));
    }

    fn push_delayed(self: &Arc<Self>, write: Queued) {
        lock(&self.queue).push(Job { write, done: None });
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            self.flush_after(FLUSH_DELAY);
        }
    }

    /// Commits `write` (a finished trace) with everything queued before it; answers once
    /// it is committed.
    pub async fn finish(self: &Arc<Self>, write: TraceWrite) -> Finished {
        let (tx, rx) = tokio::sync::oneshot::channel();
        lock(&self.queue).push(Job {
            write: Queued::Write(write),
            done: Some(tx),
        });
        self.flush_after(Duration::ZERO);
        rx.await
            .unwrap_or_else(|_| Err("the trace writer stopped".into()))
    }

    fn flush_after(self: &Arc<Self>, delay: Duration) {
        let me = self.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    if me.commits_in_place() {
                        me.flush();
                    } else {
                        let _ = tokio::task::spawn_blocking(move || me.flush()).await;
                    }
                });
            }
            // Outside a runtime (unit tests): now, on this thread.
            Err(_) => me.flush(),
        }
    }

    /// Whether the next flush is cheap enough for the worker: a few writes, no retention pass,
    /// and commits that append to the WAL without an `fsync` (`synchronous = NORMAL`).
    /// Handing it to the blocking pool cost four thread switches per flush (perf stat). A
    /// hint: jobs queued between this check and the flush join the batch.
    fn commits_in_place(&self) -> bool {
        if self.store.syncs_each_commit() {
            return false;
        }
        let queue = lock(&self.queue);
        queue.len() <= INLINE_WRITES
            && queue.iter().all(|j| {
                !matches!(
                    &j.write,
                    Queued::Write(TraceWrite::Finish { prune: Some(_), .. })
                )
            })
    }

    fn flush(&self) {
        let _order = lock(&self.commit);
        // Cleared before taking the batch: a job queued after this schedules its own flush.
        self.scheduled.store(false, Ordering::Release);
        let jobs = std::mem::take(&mut *lock(&self.queue));
        if jobs.is_empty() {
            return;
        }
        let mut waiting = Vec::new();
        let writes = jobs
            .into_iter()
            .map(|j| {
                waiting.extend(j.done);
                j.write
            })
            .collect();
        let batch = coalesce(writes);
        let written = self.store.write_traces(&batch);
        if let Err(e) = &written {
            tracing::warn!("cannot store {} trace write(s): {e}", batch.len());
        }
        let mut results = written.map(Vec::into_iter).map_err(|e| e.to_string());
        for done in waiting {
            let r = match &mut results {
                Ok(it) => it.next().ok_or_else(|| "no result".to_string()),
                Err(e) => Err(e.clone()),
            };
            let _ = done.send(r);
        }
    }
}

/// The writes a batch needs: none for a trace that also finishes in it (its whole body
/// replaces them), and one running header per trace (the newest). Moves the writes: a
/// finished trace's body is the whole trace, and copying it was 8 % of a turn's CPU (perf).
fn coalesce(writes: Vec<Queued>) -> Vec<TraceWrite> {
    let finished: HashSet<String> = writes
        .iter()
        .filter_map(|w| match w {
            Queued::Write(TraceWrite::Finish { row, .. }) => Some(row.trace_id.clone()),
            _ => None,
        })
        .collect();
    let mut last_span: HashMap<&str, usize> = HashMap::new();
    for (i, w) in writes.iter().enumerate() {
        if let Queued::Span(s) = w {
            last_span.insert(&s.trace_id, i);
        }
    }
    let newest: HashSet<usize> = last_span.into_values().collect();
    writes
        .into_iter()
        .enumerate()
        .filter_map(|(i, w)| match w {
            Queued::Span(s) if finished.contains(&s.trace_id) => None,
            Queued::Span(s) => s.write(newest.contains(&i)),
            Queued::Write(TraceWrite::Begin(row)) if finished.contains(&row.trace_id) => None,
            Queued::Write(w) => Some(w),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> TraceRow {
        TraceRow {
            trace_id: id.into(),
            record_id: "r".into(),
            status: "running".into(),
            created_at: "2026-12-02T00:00:00.000Z".into(),
            body: "{}".into(),
        }
    }

    /// Small batches under `NORMAL` commit on the worker; `FULL` commits, long batches and
    /// retention passes go to the blocking pool. Either way the writes are stored.
    #[test]
    fn small_batches_commit_in_place_under_normal_only() {
        use crate::store::SyncMode;
        let dir = tempfile::tempdir().unwrap();
        let open = |name: &str, sync| {
            let store = Store::open(&dir.path().join(name), sync).unwrap();
            Arc::new(Writer::new(Arc::new(store)))
        };
        let queue = |w: &Writer, write: TraceWrite| {
            lock(&w.queue).push(Job {
                write: Queued::Write(write),
                done: None,
            });
        };
        let normal = open("normal.db", SyncMode::Normal);
        assert!(normal.commits_in_place(), "nothing queued");
        queue(&normal, TraceWrite::Begin(row("a")));
        assert!(normal.commits_in_place());
        let finish = |prune| TraceWrite::Finish {
            row: row("a"),
            prune,
        };
        queue(
            &normal,
            finish(Some(("2026-01-01T00:00:00.000Z".into(), 10))),
        );
        assert!(!normal.commits_in_place(), "a retention pass");
        normal.flush();
        assert!(normal.store.get_trace("a").unwrap().is_some());
        for seq in 0..=INLINE_WRITES {
            queue(&normal, TraceWrite::Begin(row(&format!("b{seq}"))));
        }
        assert!(!normal.commits_in_place(), "more than INLINE_WRITES");
        let full = open("full.db", SyncMode::Full);
        queue(&full, finish(None));
        assert!(!full.commits_in_place(), "an fsync per commit");
    }

    #[test]
    fn a_batch_keeps_only_what_its_finished_traces_do_not_replace() {
        let traces = super::super::trace::Traces::new(1 << 20);
        let (a, b) = (
            traces.start("str_a", None, None, "m", "r"),
            traces.start("str_b", None, None, "m", "r"),
        );
        let span = |t: &super::super::trace::Trace, seq| {
            let i = t.start_span("llm.request", "llm", serde_json::Map::new());
            t.end_span(i, "ok", serde_json::Map::new());
            assert_eq!(i, seq);
            Queued::Span(t.span_ref(seq))
        };
        let write = |w: TraceWrite| Queued::Write(w);
        let writes = vec![
            write(TraceWrite::Begin(row(&a.id))),
            write(TraceWrite::Begin(row(&b.id))),
            span(&a, 0),
            span(&b, 0),
            span(&b, 1),
            write(TraceWrite::Finish {
                row: row(&a.id),
                prune: None,
            }),
        ];
        let out = coalesce(writes);
        let shape: Vec<String> = out
            .iter()
            .map(|w| match w {
                TraceWrite::Begin(r) => format!("begin {}", r.trace_id),
                TraceWrite::Span {
                    trace_id,
                    seq,
                    header,
                    ..
                } => format!("span {trace_id} {seq} {}", header.is_some()),
                TraceWrite::Finish { row, .. } => format!("finish {}", row.trace_id),
            })
            .collect();
        let (a, b) = (&a.id, &b.id);
        assert_eq!(
            shape,
            [
                format!("begin {b}"),
                format!("span {b} 0 false"),
                format!("span {b} 1 true"),
                format!("finish {a}")
            ]
        );
    }

    /// A finished span is serialised when its batch commits: alone it is stored with the
    /// running header as it is then; in a batch that also finishes its trace it is not
    /// written at all, the whole body carrying it.
    #[tokio::test]
    async fn spans_are_read_from_the_trace_at_commit_and_skipped_once_it_finishes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(
            Store::open(&dir.path().join("t.db"), crate::store::SyncMode::Normal).unwrap(),
        );
        let traces = super::super::trace::Traces::durable(1 << 20, store.clone());
        let t = traces.start("str_1", None, None, "m", "rec");
        let a = t.start_span("llm.request", "llm", serde_json::Map::new());
        t.end_span(a, "ok", serde_json::Map::new());
        t.add_tokens(7);
        tokio::time::sleep(FLUSH_DELAY * 4).await;
        let running = store.get_trace(&t.id).unwrap().unwrap();
        assert_eq!(running["trace"]["status"], "running");
        assert_eq!(
            running["trace"]["totalTokens"], 7,
            "the header as it was at commit"
        );
        assert_eq!(running["spans"].as_array().unwrap().len(), 1);
        assert_eq!(running["spans"][0]["status"], "ok");

        let b = t.start_span("tool.read_file", "tool", serde_json::Map::new());
        t.end_span(b, "ok", serde_json::Map::new());
        t.finish("completed", None);
        let (body, _) = t.store("rec", None).await.unwrap();
        let done = store.get_trace(&t.id).unwrap().unwrap();
        assert_eq!(
            done,
            serde_json::from_str::<serde_json::Value>(&body).unwrap()
        );
        assert_eq!(done["trace"]["status"], "completed");
        assert_eq!(done["spans"].as_array().unwrap().len(), 2);
        assert_eq!(done["spans"][1]["name"], "tool.read_file");
    }
}
