//! Read-before-write state: per session, the version (sha256 of the bytes) of every file the
//! session has read or written, and whether that read was a partial view. It lives in the
//! process, not the transcript, so compaction cannot fold it away; resume re-seeds it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::paths::Workspace;

/// Lowercase hex sha256 of the bytes: the version token of `read_file` and the writers.
pub fn version_of(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// What the session last saw of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub version: String,
    /// The last read was paged or clipped: the session has not seen the whole file.
    pub partial: bool,
}

/// Session-scoped `path → Seen` maps. `None` sessions share one process-wide default.
#[derive(Debug, Default)]
pub struct ReadState {
    sessions: Mutex<HashMap<String, HashMap<PathBuf, Seen>>>,
}

/// The key of the process-wide default session (no session id given). Real session ids are
/// never empty, so it cannot collide.
const DEFAULT_SESSION: &str = "";

fn key(session: Option<&str>) -> String {
    session.unwrap_or(DEFAULT_SESSION).to_string()
}

impl ReadState {
    pub fn new() -> ReadState {
        ReadState::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<PathBuf, Seen>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, session: Option<&str>, path: &Path) -> Option<Seen> {
        self.lock()
            .get(&key(session))
            .and_then(|m| m.get(path))
            .cloned()
    }

    /// Records a successful read (`partial` as seen) or write (`partial: false`).
    pub fn record(&self, session: Option<&str>, path: &Path, version: String, partial: bool) {
        self.lock()
            .entry(key(session))
            .or_default()
            .insert(path.to_path_buf(), Seen { version, partial });
    }

    /// Re-seeds a session from `(absolute path, version)` pairs (e.g. rebuilt from the durable
    /// record on resume). Seeded entries count as full reads.
    pub fn seed(
        &self,
        session: Option<&str>,
        entries: impl IntoIterator<Item = (PathBuf, String)>,
    ) {
        let mut all = self.lock();
        let map = all.entry(key(session)).or_default();
        for (path, version) in entries {
            map.insert(
                path,
                Seen {
                    version,
                    partial: false,
                },
            );
        }
    }

    /// As `seed`, with paths as the tools report them (workspace-relative or absolute);
    /// entries that do not resolve inside the workspace are skipped. Returns how many were kept.
    pub fn seed_relative(
        &self,
        session: Option<&str>,
        ws: &Workspace,
        entries: &[(String, String)],
    ) -> usize {
        let resolved: Vec<(PathBuf, String)> = entries
            .iter()
            .filter_map(|(p, v)| ws.resolve_read(p).ok().map(|abs| (abs, v.clone())))
            .collect();
        let n = resolved.len();
        self.seed(session, resolved);
        n
    }

    /// Whether this process has seen the session read or write anything.
    pub fn knows(&self, session: Option<&str>) -> bool {
        self.lock()
            .get(&key(session))
            .is_some_and(|m| !m.is_empty())
    }

    /// Drops a session's state.
    pub fn clear(&self, session: Option<&str>) {
        self.lock().remove(&key(session));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_vectors() {
        let cases = [
            (
                "",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                "hello world",
                "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9",
            ),
            (
                "中文测试",
                "e350545d18735c5dd2dec50dcb971f3eb4cdda24b95a79bdb6b553f6a01ceb87",
            ),
            (
                "line1\nline2\n",
                "2751a3a2f303ad21752038085e2b8c5f98ecff61a2e4ebbd43506a941725be80",
            ),
            (
                "The quick brown fox jumps over the lazy dog 中文 123",
                "58117d7814c853d4309001a610af6de66b4b2e73dadff71ab5514ea674218644",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(version_of(text.as_bytes()), want, "{text:?}");
        }
    }

    #[test]
    fn sessions_are_separate_and_seedable() {
        let s = ReadState::new();
        let p = Path::new("/w/a");
        s.record(Some("s1"), p, "v1".into(), true);
        assert_eq!(s.get(Some("s1"), p).map(|x| x.partial), Some(true));
        assert_eq!(s.get(Some("s2"), p), None);
        assert_eq!(s.get(None, p), None);
        s.seed(None, vec![(p.to_path_buf(), "v2".into())]);
        assert_eq!(
            s.get(None, p),
            Some(Seen {
                version: "v2".into(),
                partial: false
            })
        );
        s.clear(Some("s1"));
        assert_eq!(s.get(Some("s1"), p), None);
    }
}
