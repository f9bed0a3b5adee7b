//! The registry of live turns: stream id → cancel token, steer inbox and the manual-compact
//! flag. `agent.chat.cancel` / `steer` / `compact` reach a running loop only through this.

use crate::strict::Invalid;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::params::SteerMode;

/// One running turn's control surface.
pub struct StreamHandle {
    pub stream_id: String,
    /// The durable record the turn appends to (one live turn per record).
    pub record_id: String,
    /// The turn's one cancellation token (a child of the shutdown token).
    pub cancel: CancellationToken,
    pub steer_mode: SteerMode,
    steer: Mutex<VecDeque<String>>,
    compact: AtomicBool,
    /// Cancelled by an `interrupt`-mode steer: stops the current tool phase only.
    tool_phase: Mutex<CancellationToken>,
}

impl StreamHandle {
    pub fn new(
        stream_id: String,
        record_id: String,
        cancel: CancellationToken,
        steer_mode: SteerMode,
    ) -> StreamHandle {
        let phase = cancel.child_token();
        StreamHandle {
            stream_id,
            record_id,
            cancel,
            steer_mode,
            steer: Mutex::new(VecDeque::new()),
            compact: AtomicBool::new(false),
            tool_phase: Mutex::new(phase),
        }
    }

    fn inbox(&self) -> std::sync::MutexGuard<'_, VecDeque<String>> {
        self.steer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a steer message; in interrupt mode also stops the running tool phase.
    pub fn steer(&self, content: String) {
        self.inbox().push_back(content);
        if self.steer_mode == SteerMode::Interrupt {
            self.tool_phase
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .cancel();
        }
    }

    pub fn drain_steers(&self) -> Vec<String> {
        self.inbox().drain(..).collect()
    }

    pub fn has_steer(&self) -> bool {
        !self.inbox().is_empty()
    }

    pub fn request_compact(&self) {
        self.compact.store(true, Ordering::SeqCst);
    }

    pub fn take_compact(&self) -> bool {
        self.compact.swap(false, Ordering::SeqCst)
    }

    /// A fresh token for the next tool phase (a child of the turn's token). In interrupt
    /// mode a steer already waiting cancels it at once: the model asked for these calls
    /// before it saw the steer, so they are skipped and the steer goes to the next request.
    pub fn begin_tool_phase(&self) -> CancellationToken {
        let t = self.cancel.child_token();
        *self.tool_phase.lock().unwrap_or_else(|e| e.into_inner()) = t.clone();
        if self.steer_mode == SteerMode::Interrupt && self.has_steer() {
            t.cancel();
        }
        t
    }
}

/// Live turns by stream id.
#[derive(Default)]
pub struct Streams {
    map: Mutex<HashMap<String, Arc<StreamHandle>>>,
}

impl Streams {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<StreamHandle>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a turn; refused (naming why) when the stream id is live or another live
    /// turn appends to the same record (two writers would interleave one transcript).
    pub fn insert(&self, h: Arc<StreamHandle>) -> Result<(), Invalid> {
        let mut m = self.lock();
        if m.contains_key(&h.stream_id) {
            return Err(Invalid::from(format!(
                "streamId {} is already streaming; omit streamId for a fresh one",
                h.stream_id
            )));
        }
        if let Some(other) = m.values().find(|o| o.record_id == h.record_id) {
            return Err(Invalid::from(format!(
                "record {} already has a running turn ({}); cancel it or wait for its stream.done",
                h.record_id, other.stream_id
            )));
        }
        m.insert(h.stream_id.clone(), h);
        Ok(())
    }

    pub fn get(&self, id: &str) -> Option<Arc<StreamHandle>> {
        self.lock().get(id).cloned()
    }

    pub fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}
