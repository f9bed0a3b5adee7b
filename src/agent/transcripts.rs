//! Recent records' transcripts in memory, as their last turn left them.
//!
//! A host that re-sends its history (or continues with `fromRecord`) made every turn read the
//! whole record back and parse each entry: O(history) per turn, quadratic over a
//! conversation. A turn that ends with everything committed leaves its transcript here,
//! stamped with the record's version (records are append-only, so any write changes it); the
//! next turn on the record takes it when the stamp still matches and reads the store only
//! otherwise. The messages are kept in the record's own form (what reading the record would
//! give), so a hit and a miss start the turn identically.

use std::collections::HashMap;
use std::sync::Mutex;

use super::persist;
use crate::llm::Message;

pub struct Transcripts {
    max_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, Kept>,
    bytes: usize,
    tick: u64,
}

struct Kept {
    version: i64,
    items: Vec<Message>,
    bytes: usize,
    used: u64,
}

/// Roughly the heap a message holds (strings dominate).
fn approx_bytes(m: &Message) -> usize {
    let calls: usize = m
        .tool_calls
        .iter()
        .map(|c| c.id.len() + c.name.len() + 64 + c.arguments.to_string().len())
        .sum();
    std::mem::size_of::<Message>()
        + m.content.len()
        + m.reasoning.as_ref().map_or(0, String::len)
        + m.tool_call_id.as_ref().map_or(0, String::len)
        + calls
}

/// Where what the host has seen of `record` is kept (`seed::Start::seen`), beside its
/// transcript and stamped with the same version.
pub fn seen_key(record: &str) -> String {
    format!("{record}\u{0}seen")
}

/// `m` as reading it back from the record gives it (the record keeps text content, no
/// parts, no per-call decode errors).
pub fn canonical(m: &Message) -> Message {
    persist::from_record(&persist::to_record(m)).unwrap_or_else(|| m.clone())
}

impl Transcripts {
    /// `max_bytes` 0 keeps nothing.
    pub fn new(max_bytes: usize) -> Transcripts {
        Transcripts {
            max_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The transcript of `record` at `version`, removed from the cache (the turn owns it
    /// now); `None` when absent or stale (a stale copy is dropped).
    pub fn take(&self, record: &str, version: i64) -> Option<Vec<Message>> {
        let mut inner = self.lock();
        let kept = inner.map.remove(record)?;
        inner.bytes -= kept.bytes;
        (kept.version == version).then_some(kept.items)
    }

    /// Keeps `items` as `record`'s transcript at `version`, dropping the least recently kept
    /// transcripts to stay within the byte budget. One larger than the budget is not kept.
    pub fn put(&self, record: &str, version: i64, items: Vec<Message>) {
        let bytes: usize = items.iter().map(approx_bytes).sum();
        let mut inner = self.lock();
        if let Some(old) = inner.map.remove(record) {
            inner.bytes -= old.bytes;
        }
        if bytes > self.max_bytes {
            return;
        }
        while inner.bytes + bytes > self.max_bytes {
            let oldest = inner
                .map
                .iter()
                .min_by_key(|(_, k)| k.used)
                .map(|(r, _)| r.clone());
            match oldest.and_then(|r| inner.map.remove(&r)) {
                Some(k) => inner.bytes -= k.bytes,
                None => break,
            }
        }
        inner.tick += 1;
        let used = inner.tick;
        inner.bytes += bytes;
        inner.map.insert(
            record.to_string(),
            Kept {
                version,
                items,
                bytes,
                used,
            },
        );
    }

    /// Whether anything is kept for `record` (a miss then needs no version check first).
    pub fn holds(&self, record: &str) -> bool {
        self.lock().map.contains_key(record)
    }

    /// Bytes currently kept (diagnostics and tests).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Role;

    fn msgs(n: usize, text: &str) -> Vec<Message> {
        (0..n).map(|_| Message::new(Role::User, text)).collect()
    }

    #[test]
    fn a_stale_version_is_never_returned() {
        let t = Transcripts::new(1 << 20);
        t.put("r", 5, msgs(3, "hi"));
        assert!(t.take("r", 6).is_none(), "stale copy used");
        assert!(t.take("r", 5).is_none(), "the stale copy was dropped");
        t.put("r", 7, msgs(2, "hi"));
        assert_eq!(t.take("r", 7).map(|v| v.len()), Some(2));
        assert_eq!(t.bytes(), 0);
    }

    #[test]
    fn the_budget_drops_the_least_recent() {
        let one = msgs(10, &"x".repeat(1000));
        let size: usize = one.iter().map(approx_bytes).sum();
        let t = Transcripts::new(size * 2 + size / 2);
        t.put("a", 1, one.clone());
        t.put("b", 1, one.clone());
        t.put("c", 1, one.clone());
        assert!(t.bytes() <= size * 2 + size / 2);
        assert!(t.take("a", 1).is_none(), "the oldest went first");
        assert!(t.take("c", 1).is_some());
        // Larger than the whole budget: not kept at all.
        let t = Transcripts::new(size / 2);
        t.put("a", 1, one);
        assert_eq!(t.bytes(), 0);
        let off = Transcripts::new(0);
        off.put("a", 1, msgs(1, "x"));
        assert!(off.take("a", 1).is_none());
    }
}
