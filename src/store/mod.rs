//! The durable store: sessions, append-only history records with fork provenance, and the
//! single-writer lease. SQLite in WAL mode; every append is its own committed transaction,
//! so a killed process loses nothing that was acknowledged. Schema and rules:
//! `docs/store.md`.
//!
//! rusqlite is blocking: async callers go through `tokio::task::spawn_blocking` (the
//! handlers in `rpc/methods/sessions.rs` show the pattern). One connection behind a mutex
//! is enough: appends are sub-millisecond and the lease makes us the only writer.

pub mod approvals;
pub mod branches;
pub mod browse;
pub mod error;
pub mod ids;
pub mod lease;
pub mod records;
pub mod schema;
pub mod sessions;
pub mod traces;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use rusqlite::Connection;
use serde_json::{Map, Value, json};

pub use approvals::ApprovalRule;
pub use branches::{BranchNode, CutPoint, Lineage, Tree, TreeNode, derive_label};
pub use error::{ErrorClass, StoreError};
pub use records::{Boundary, BoundaryAction, Entry, ItemKind, Projected, Seed};
pub use schema::SyncMode;
pub use sessions::{AgentSession, NewSession, SessionFilter};
pub use traces::{TraceRow, TraceWrite};

use lease::Lease;
use records::{NewRecord, insert_entry};

pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    /// `None` for a read-only store (`open_read_only`), which never writes.
    lease: Option<Lease>,
    sync: SyncMode,
}

/// A fork request (`agent.session.fork`).
#[derive(Debug, Clone)]
pub struct ForkRequest {
    pub source: String,
    pub cut: CutPoint,
    pub new_record_id: Option<String>,
    pub label: Option<String>,
}

/// The result of a fork (`protocol::session::BranchPoint` on the wire).
#[derive(Debug, Clone, PartialEq)]
pub struct BranchPoint {
    pub record_id: String,
    pub source_record_id: String,
    pub source_until_seq: Option<i64>,
    pub label: String,
    pub seed_messages: usize,
}

/// The bookkeeping entries that bracket a compaction (v3 `compaction_start` /
/// `compaction_summary`); neither is a message.
#[derive(Debug, Clone)]
pub enum CompactionMarker {
    Start {
        compaction_id: String,
        reason: String,
        action: BoundaryAction,
        /// `span_start_index`, `span_end_index`, `pre_tokens`, … as the compactor has them.
        extra: Map<String, Value>,
    },
    Summary {
        compaction_id: String,
        summary_text: String,
    },
}

impl Store {
    /// Takes the lease on `<path>.lock`, then opens (creating when missing) the database.
    /// A second process on the same file gets `StoreError::Owned` naming the owner's pid.
    pub fn open(path: &Path, sync: SyncMode) -> Result<Store, StoreError> {
        let started = Instant::now();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
                path: path.to_path_buf(),
                why: format!("cannot create the directory {}: {e}", dir.display()),
            })?;
        }
        let lease = lease::acquire(path)?;
        let opened = Connection::open(path).map_err(|e| StoreError::Open {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
        let mut conn = opened;
        let setup = schema::configure(&conn, sync).and_then(|()| schema::ensure(&mut conn));
        let version = setup.map_err(|e| StoreError::Open {
            path: path.to_path_buf(),
            why: format!("{e} (is it an SQLite database?)"),
        })?;
        if version > schema::SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found: version,
                supported: schema::SCHEMA_VERSION,
            });
        }
        tracing::debug!(
            "store open: {} (schema {version}, {sync:?}) in {} µs",
            path.display(),
            started.elapsed().as_micros()
        );
        Ok(Store {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
            lease: Some(lease),
            sync,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lease file; `None` for a read-only store.
    pub fn lock_path(&self) -> Option<&Path> {
        self.lease.as_ref().map(|l| l.path.as_path())
    }

    /// Opens an existing database for reading only, without the lease, so it works beside
    /// the live sidecar that holds it (`outrigger inspect`). WAL lets it read committed
    /// rows while that process writes. Every write through it fails.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let open_err = |why: String| StoreError::Open {
            path: path.to_path_buf(),
            why,
        };
        if !path.is_file() {
            return Err(open_err("no database file there".into()));
        }
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
            | rusqlite::OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| open_err(e.to_string()))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| open_err(e.to_string()))?;
        let version: String = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .map_err(|e| open_err(format!("{e} (is it an Outrigger store?)")))?;
        let found = version.trim().parse::<i64>().unwrap_or(0);
        if found > schema::SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found,
                supported: schema::SCHEMA_VERSION,
            });
        }
        Ok(Store {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
            lease: None,
            sync: SyncMode::Normal,
        })
    }

    /// The schema version the database records.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        let v: String = self.conn().query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )?;
        Ok(v.trim().parse::<i64>().unwrap_or(0))
    }

    /// A page of records for browsing (`outrigger inspect`), newest activity first.
    pub fn browse_records(
        &self,
        query: Option<&str>,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<browse::RecordSummary>, bool), StoreError> {
        browse::records(&self.conn(), query, limit, offset)
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a half transaction behind (rusqlite
        // rolls back on drop), so a poisoned mutex is safe to reuse.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` in one IMMEDIATE transaction and commits it: the unit of durability.
    /// `BEGIN` and `COMMIT` are cached statements: rusqlite's `Transaction` parses both
    /// again on every write, 3–4 % of the sidecar's CPU in a turn of small rounds (perf).
    fn write<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        /// Rolls back unless committed (an error, or a panic in `f`).
        struct Open<'a>(&'a Connection, bool);
        impl Drop for Open<'_> {
            fn drop(&mut self) {
                if !self.1 {
                    let _ = self.0.execute_batch("ROLLBACK");
                }
            }
        }
        let conn = self.conn();
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        let mut open = Open(&conn, false);
        let out = f(&conn)?;
        conn.prepare_cached("COMMIT")?.execute([])?;
        open.1 = true;
        drop(open);
        Ok(out)
    }

    // ---- sessions ----

    /// Inserts or overwrites a session (same `session_id`); `createdAt` survives overwrites.
    pub fn upsert_session(&self, s: &NewSession) -> Result<AgentSession, StoreError> {
        let now = crate::clock::now_iso8601();
        self.write(|tx| sessions::upsert(tx, s, &now))
    }

    pub fn get_session(&self, session_id: &str) -> Result<AgentSession, StoreError> {
        sessions::get(&self.conn(), session_id)?
            .ok_or_else(|| StoreError::SessionNotFound(session_id.to_string()))
    }

    pub fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<AgentSession>, StoreError> {
        sessions::list(&self.conn(), filter)
    }

    // ---- approval rules ----

    /// Stores (or replaces) a permanent approval rule.
    pub fn put_approval_rule(
        &self,
        tool: &str,
        category: &str,
        decision: &str,
    ) -> Result<(), StoreError> {
        let rule = ApprovalRule {
            tool_name: tool.to_string(),
            category: category.to_string(),
            decision: decision.to_string(),
            created_at: crate::clock::now_iso8601(),
        };
        self.write(|tx| approvals::put(tx, &rule))
    }

    /// The stored decision for (tool, category), if any.
    pub fn approval_rule(&self, tool: &str, category: &str) -> Result<Option<String>, StoreError> {
        approvals::get(&self.conn(), tool, category)
    }

    pub fn list_approval_rules(&self) -> Result<Vec<ApprovalRule>, StoreError> {
        approvals::list(&self.conn())
    }

    pub fn clear_approval_rules(
        &self,
        tool: Option<&str>,
        category: Option<&str>,
    ) -> Result<usize, StoreError> {
        self.write(|tx| approvals::clear(tx, tool, category))
    }

    // ---- traces ----

    /// Stores a finished trace in one committed transaction.
    pub fn put_trace(&self, t: &TraceRow) -> Result<(), StoreError> {
        self.write(|tx| traces::put(tx, t).map(|_| ()))
    }

    /// Applies trace writes in order in one transaction (the trace writer batches what
    /// queued up meanwhile). Returns, per `Finish` in order, the stored body (its JSON text)
    /// and how many traces retention removed.
    pub fn write_traces(&self, batch: &[TraceWrite]) -> Result<Vec<(String, usize)>, StoreError> {
        self.write(|tx| {
            let mut finished = Vec::new();
            for w in batch {
                match w {
                    TraceWrite::Begin(row) => traces::begin(tx, row)?,
                    TraceWrite::Span {
                        trace_id,
                        seq,
                        body,
                        header,
                    } => traces::put_span(tx, trace_id, *seq, body, header.as_deref())?,
                    TraceWrite::Finish { row, prune } => {
                        let body = traces::put(tx, row)?;
                        let pruned = match prune {
                            Some((older_than, keep)) => traces::prune(tx, older_than, *keep)?,
                            None => 0,
                        };
                        finished.push((body, pruned));
                    }
                }
            }
            Ok(finished)
        })
    }

    /// A stored trace's `{trace, spans, events}`; `None` when unknown.
    pub fn get_trace(&self, trace_id: &str) -> Result<Option<Value>, StoreError> {
        traces::get(&self.conn(), trace_id)
    }

    /// Headers of the traces stored for a record, oldest first, at most `limit`.
    pub fn traces_for_record(
        &self,
        record_id: &str,
        limit: usize,
    ) -> Result<Vec<Value>, StoreError> {
        traces::for_record(&self.conn(), record_id, limit)
    }

    // ---- appends (each one a committed transaction) ----

    /// Appends one message; the record is created on its first append. Returns its seq.
    pub fn append(
        &self,
        record_id: &str,
        kind: ItemKind,
        message: &Value,
        token_estimate: u64,
    ) -> Result<i64, StoreError> {
        self.append_item(record_id, kind, message, token_estimate, None)
    }

    /// `append` with the turn id the entry belongs to.
    pub fn append_item(
        &self,
        record_id: &str,
        kind: ItemKind,
        message: &Value,
        token_estimate: u64,
        turn_id: Option<&str>,
    ) -> Result<i64, StoreError> {
        records::check_message(message)?;
        let now = crate::clock::now_iso8601();
        let item = [(&kind, message, token_estimate)];
        self.write(|tx| records::insert_items(tx, record_id, item, turn_id, &now))
            .map(|(seq, _)| seq)
    }

    /// Whether a commit waits for the disk (`FULL`: an `fsync` per commit) or only for a
    /// WAL append (`NORMAL`).
    pub fn syncs_each_commit(&self) -> bool {
        self.sync == SyncMode::Full
    }

    /// Appends items in order in one transaction (all or none); returns the record's version
    /// after it. A turn that starts with 6,000 new messages commits once, not 6,000 times.
    pub fn append_items(
        &self,
        record_id: &str,
        items: &[(ItemKind, Value, u64)],
    ) -> Result<Option<i64>, StoreError> {
        for (_, m, _) in items {
            records::check_message(m)?;
        }
        if items.is_empty() {
            return self.record_version(record_id);
        }
        let now = crate::clock::now_iso8601();
        let items = items.iter().map(|(k, m, t)| (k, m, *t));
        self.write(|tx| records::insert_items(tx, record_id, items, None, &now))
            .map(|(_, next)| Some(next))
    }

    /// A number that changes with every entry written to the record (records are
    /// append-only, so its next seq), or `None` when it does not exist. Lets a cache of the
    /// record's transcript tell whether it is still current without reading it.
    pub fn record_version(&self, record_id: &str) -> Result<Option<i64>, StoreError> {
        Ok(records::record_row(&self.conn(), record_id)?.map(|r| r.next_seq))
    }

    /// Appends a seed. On a new record it sets the record's fork provenance and label;
    /// on an existing one (a re-seed after a boundary) provenance is left alone.
    pub fn append_seed(&self, record_id: &str, seed: &Seed) -> Result<i64, StoreError> {
        for m in &seed.messages {
            records::check_message(m)?;
        }
        let label = seed
            .label
            .clone()
            .unwrap_or_else(|| derive_label(&seed.messages));
        let fields = records::seed_fields(seed);
        let reserve = i64::try_from(seed.messages.len()).unwrap_or(i64::MAX / 2);
        let now = crate::clock::now_iso8601();
        self.write(|tx| {
            let created = NewRecord {
                source: seed.source.as_ref(),
                label: seed.source.as_ref().map(|_| label.as_str()),
            };
            insert_entry(tx, record_id, fields, reserve, Some(created), &now)
        })
    }

    /// Appends a `compaction.boundary`: the visible transcript restarts after it (the
    /// compactor follows it with a seed holding the compacted messages).
    pub fn append_boundary(&self, record_id: &str, b: &Boundary) -> Result<i64, StoreError> {
        self.require_record(record_id)?;
        let fields = records::boundary_fields(b);
        let now = crate::clock::now_iso8601();
        self.write(|tx| insert_entry(tx, record_id, fields, 0, None, &now))
    }

    pub fn append_compaction(
        &self,
        record_id: &str,
        marker: &CompactionMarker,
    ) -> Result<i64, StoreError> {
        self.require_record(record_id)?;
        let mut fields = Map::new();
        match marker {
            CompactionMarker::Start {
                compaction_id,
                reason,
                action,
                extra,
            } => {
                fields.insert("entry".into(), json!("compaction_start"));
                fields.insert("kind".into(), json!("compaction.start"));
                fields.insert("compaction_id".into(), json!(compaction_id));
                fields.insert("reason".into(), json!(reason));
                fields.insert("action".into(), json!(action.as_str()));
                for (k, v) in extra {
                    fields.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            CompactionMarker::Summary {
                compaction_id,
                summary_text,
            } => {
                fields.insert("entry".into(), json!("compaction_summary"));
                fields.insert("kind".into(), json!("compaction.summary"));
                fields.insert("compaction_id".into(), json!(compaction_id));
                fields.insert("summary_text".into(), json!(summary_text));
            }
        }
        let now = crate::clock::now_iso8601();
        self.write(|tx| insert_entry(tx, record_id, fields, 0, None, &now))
    }

    // ---- reads ----

    pub fn record_exists(&self, record_id: &str) -> Result<bool, StoreError> {
        Ok(records::record_row(&self.conn(), record_id)?.is_some())
    }

    fn require_record(&self, record_id: &str) -> Result<(), StoreError> {
        if self.record_exists(record_id)? {
            Ok(())
        } else {
            Err(StoreError::RecordNotFound(record_id.to_string()))
        }
    }

    /// Every readable entry in seq order (corrupt rows skipped and logged).
    pub fn entries(&self, record_id: &str) -> Result<Vec<Entry>, StoreError> {
        let conn = self.conn();
        if records::record_row(&conn, record_id)?.is_none() {
            return Err(StoreError::RecordNotFound(record_id.to_string()));
        }
        records::load(&conn, record_id)
    }

    /// The visible transcript: post-boundary messages, seeds expanded (each seeded message
    /// carries the seed's seq). What `resume` replays and `agent.session.messages` shows.
    pub fn projection(&self, record_id: &str) -> Result<Vec<Projected>, StoreError> {
        Ok(records::project(&self.entries(record_id)?))
    }

    /// What the host has seen of the record: `records::host_history`, for reconciling a
    /// host that re-sends its whole history after a compaction.
    pub fn host_history(&self, record_id: &str) -> Result<Vec<Projected>, StoreError> {
        Ok(records::host_history(&self.entries(record_id)?))
    }

    // ---- branches ----

    /// Writes a new record whose only entry is a seed cut from `req.source`'s visible
    /// transcript. The source is never touched. One transaction.
    pub fn fork(&self, req: &ForkRequest) -> Result<BranchPoint, StoreError> {
        let new_id = match &req.new_record_id {
            Some(id) => {
                records::check_record_id(id)?;
                id.clone()
            }
            None => ids::fork_record_id(&req.source),
        };
        let now = crate::clock::now_iso8601();
        self.write(|tx| {
            if records::record_row(tx, &req.source)?.is_none() {
                return Err(StoreError::RecordNotFound(req.source.clone()));
            }
            if records::record_row(tx, &new_id)?.is_some() {
                return Err(StoreError::RecordExists(new_id.clone()));
            }
            let entries = records::load(tx, &req.source)?;
            let transcript = records::project(&entries);
            let (kept, until) = branches::cut(
                &transcript,
                req.cut,
                records::last_seq(&entries),
                &req.source,
            )?;
            let messages: Vec<Value> = transcript[..kept]
                .iter()
                .map(|p| p.message.clone())
                .collect();
            let label = req.label.clone().unwrap_or_else(|| derive_label(&messages));
            let token_estimate = entries_tokens(&entries, &transcript[..kept]);
            let source = (req.source.clone(), until.unwrap_or(-1));
            let seed = Seed {
                source: Some(source.clone()),
                messages,
                label: Some(label.clone()),
                token_estimate,
            };
            let fields = records::seed_fields(&seed);
            let reserve = i64::try_from(kept).unwrap_or(i64::MAX / 2);
            let created = NewRecord {
                source: Some(&source),
                label: Some(&label),
            };
            insert_entry(tx, &new_id, fields, reserve, Some(created), &now)?;
            Ok(BranchPoint {
                record_id: new_id.clone(),
                source_record_id: req.source.clone(),
                source_until_seq: until,
                label,
                seed_messages: kept,
            })
        })
    }

    pub fn lineage(&self, record_id: &str) -> Result<Lineage, StoreError> {
        branches::lineage(&self.conn(), record_id)
    }

    /// Direct forks of `record_id`; `depth` is stamped on each node.
    pub fn children(&self, record_id: &str, depth: usize) -> Result<Vec<BranchNode>, StoreError> {
        branches::children(&self.conn(), record_id, depth)
    }

    pub fn tree(&self, record_id: &str) -> Result<Tree, StoreError> {
        branches::tree(&self.conn(), record_id)
    }
}

/// Token estimate of the kept messages: the sum over the item entries they came from
/// (seeded messages share their seed's estimate, counted once).
fn entries_tokens(entries: &[Entry], kept: &[Projected]) -> u64 {
    let seqs: std::collections::HashSet<i64> = kept.iter().map(|p| p.seq).collect();
    entries
        .iter()
        .filter(|e| seqs.contains(&e.seq))
        .map(|e| e.token_estimate)
        .sum()
}

#[cfg(test)]
mod tests;
