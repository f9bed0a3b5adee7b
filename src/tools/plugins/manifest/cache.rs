//! Checked manifests kept between boots: `<home>/cache/plugins/<dir key>/<file name>.json`.
//!
//! Parsing the TOML and checking every schema was ~60 % of a 10,000-tool boot's CPU, for
//! manifests that rarely change. An entry holds what `validate` made of one manifest, keyed by
//! the SHA-256 of its text, its path and the executable that wrote it, so an edit, a move or
//! an upgrade misses and parses again. The one thing that can change under an unchanged text,
//! the executables, is checked on every boot; anything short of a clean hit takes the full
//! parse, which also gives the usual errors. A cache that cannot be read or written is no
//! cache: boot never fails because of it.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use super::{
    EXPOSURES, MAX_MANIFEST_BYTES, MAX_TIMEOUT, MAX_TOOLS_PER_MANIFEST, MODES, PluginManifest,
    PluginToolSpec, resolve_exec,
};
use crate::tools::Schema;

/// Bumped when the entry's shape or meaning changes (the build stamp covers code changes).
const FORMAT: u32 = 1;
/// Largest entry read: a manifest's checked form is about its own size.
const MAX_ENTRY_BYTES: u64 = 4 * MAX_MANIFEST_BYTES;
/// A temp file this old is a killed writer's, not a concurrent boot's.
const STALE_TEMP: Duration = Duration::from_secs(60);

/// The cache of one plugin directory's manifests.
pub struct Cache {
    dir: PathBuf,
    build: &'static str,
}

/// One manifest's checked form. `Cow`s borrow from the manifest when written and own what
/// is read.
#[derive(Serialize, Deserialize)]
struct Entry<'a> {
    format: u32,
    build: Cow<'a, str>,
    path: Cow<'a, str>,
    sha256: Cow<'a, str>,
    name: Cow<'a, str>,
    description: Option<Cow<'a, str>>,
    tools: Vec<EntryTool<'a>>,
}

#[derive(Serialize, Deserialize)]
struct EntryTool<'a> {
    name: Cow<'a, str>,
    description: Cow<'a, str>,
    parameters: Cow<'a, RawValue>,
    exec: Cow<'a, str>,
    args: Cow<'a, [String]>,
    timeout_ms: u64,
    mode: Option<Cow<'a, str>>,
    exposure: Option<Cow<'a, str>>,
    env: Cow<'a, BTreeMap<String, String>>,
}

/// The key of a manifest's bytes (or a directory's path).
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Cache {
    /// The cache for the manifests of `plugin_dir`, under `root`; `None` when this process
    /// cannot name the executable it runs (no stamp to key entries by).
    pub fn for_dir(root: &Path, plugin_dir: &Path) -> Option<Cache> {
        let build = build_stamp()?;
        let dir = std::path::absolute(plugin_dir).ok()?;
        let key = digest(dir.to_str()?.as_bytes());
        Some(Cache {
            dir: root.join(&key[..16]),
            build,
        })
    }

    fn entry_path(&self, manifest: &Path) -> Option<PathBuf> {
        let name = manifest.file_name()?.to_str()?;
        Some(self.dir.join(format!("{name}.json")))
    }

    /// The checked manifest at `path` whose text has `sha256`, if an entry holds it and its
    /// executables are still runnable files.
    pub fn get(&self, path: &Path, sha256: &str) -> Option<PluginManifest> {
        let file = std::fs::File::open(self.entry_path(path)?).ok()?;
        let bytes = super::read_capped(file, MAX_ENTRY_BYTES).ok()?;
        if bytes.len() as u64 > MAX_ENTRY_BYTES {
            return None;
        }
        let entry: Entry = serde_json::from_slice(&bytes).ok()?;
        let fresh = entry.format == FORMAT
            && entry.build == self.build
            && Some(entry.path.as_ref()) == path.to_str()
            && entry.sha256 == sha256;
        if !fresh || entry.tools.len() > MAX_TOOLS_PER_MANIFEST {
            return None;
        }
        let mut names = HashSet::new();
        let mut runnable: HashMap<String, bool> = HashMap::new();
        let mut tools = Vec::with_capacity(entry.tools.len());
        for t in entry.tools {
            // What `validate` guarantees, checked again cheaply: an entry edited by hand or
            // cut short must not bring in a tool the manifest could not. The schema is written
            // into replies as it is, so a line break in it (only possible between tokens)
            // would split a frame.
            let params = t.parameters.get();
            let sane = crate::tools::valid_tool_name(&t.name)
                && names.insert(t.name.to_string())
                && !t.description.trim().is_empty()
                && params.starts_with('{')
                && memchr::memchr2(b'\n', b'\r', params.as_bytes()).is_none()
                && t.timeout_ms > 0
                && Duration::from_millis(t.timeout_ms) <= MAX_TIMEOUT
                && t.mode.as_deref().is_none_or(|m| MODES.contains(&m))
                && t.exposure.as_deref().is_none_or(|x| EXPOSURES.contains(&x))
                && Path::new(t.exec.as_ref()).is_absolute();
            if !sane
                || !*runnable
                    .entry(t.exec.to_string())
                    .or_insert_with_key(|e| resolve_exec(e, Path::new("/")).is_ok())
            {
                return None;
            }
            tools.push(Arc::new(PluginToolSpec {
                name: t.name.into_owned(),
                description: t.description.into_owned(),
                parameters: Schema::from_raw(t.parameters.into_owned()),
                exec: PathBuf::from(t.exec.into_owned()),
                args: t.args.into_owned(),
                timeout: Duration::from_millis(t.timeout_ms),
                mode: t.mode.map(Cow::into_owned),
                exposure: t.exposure.map(Cow::into_owned),
                env: t.env.into_owned(),
            }));
        }
        if tools.is_empty() || !crate::tools::valid_tool_name(&entry.name) {
            return None;
        }
        Some(PluginManifest {
            name: entry.name.into_owned(),
            description: entry.description.map(Cow::into_owned),
            path: path.to_path_buf(),
            tools,
        })
    }

    /// Records `manifest`, checked from a text with `sha256`. Best effort: written beside and
    /// renamed, so a reader sees a whole entry or none.
    pub fn put(&self, manifest: &PluginManifest, sha256: &str) {
        let (Some(target), Some(path)) = (self.entry_path(&manifest.path), manifest.path.to_str())
        else {
            return;
        };
        let mut tools = Vec::with_capacity(manifest.tools.len());
        for t in &manifest.tools {
            let Some(exec) = t.exec.to_str() else {
                return;
            };
            tools.push(EntryTool {
                name: Cow::Borrowed(&t.name),
                description: Cow::Borrowed(&t.description),
                parameters: Cow::Borrowed(t.parameters.raw()),
                exec: Cow::Borrowed(exec),
                args: Cow::Borrowed(&t.args),
                timeout_ms: u64::try_from(t.timeout.as_millis()).unwrap_or(u64::MAX),
                mode: t.mode.as_deref().map(Cow::Borrowed),
                exposure: t.exposure.as_deref().map(Cow::Borrowed),
                env: Cow::Borrowed(&t.env),
            });
        }
        let entry = Entry {
            format: FORMAT,
            build: Cow::Borrowed(self.build),
            path: Cow::Borrowed(path),
            sha256: Cow::Borrowed(sha256),
            name: Cow::Borrowed(&manifest.name),
            description: manifest.description.as_deref().map(Cow::Borrowed),
            tools,
        };
        let Ok(bytes) = serde_json::to_vec(&entry) else {
            return;
        };
        let Some(name) = target.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        let tmp = self.dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let written = std::fs::create_dir_all(&self.dir)
            .and_then(|()| std::fs::write(&tmp, &bytes))
            .and_then(|()| std::fs::rename(&tmp, &target));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            tracing::debug!(
                "plugin manifest cache: cannot write {}: {e}",
                target.display()
            );
        }
    }

    /// Removes the entries of manifests that are no longer in the directory (`kept`: the
    /// manifests loaded), so the cache stays the size of what is installed, and temp files a
    /// killed writer left (older than a minute, so a concurrent boot's are spared).
    pub fn prune(&self, kept: &[&Path]) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let keep: HashSet<PathBuf> = kept.iter().filter_map(|p| self.entry_path(p)).collect();
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            let stale = if name.starts_with('.') {
                name.ends_with(".tmp")
                    && e.metadata()
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_TEMP))
            } else {
                name.ends_with(".json") && !keep.contains(&path)
            };
            if stale {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// This executable's identity (version, size, modification time): an entry written by any
/// other build, whose checks may differ, misses.
fn build_stamp() -> Option<&'static str> {
    static STAMP: OnceLock<Option<String>> = OnceLock::new();
    STAMP
        .get_or_init(|| {
            let exe = std::env::current_exe().ok()?;
            let meta = std::fs::metadata(exe).ok()?;
            let mtime = meta
                .modified()
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?;
            Some(format!(
                "{}:{}:{}",
                env!("CARGO_PKG_VERSION"),
                meta.len(),
                mtime.as_nanos()
            ))
        })
        .as_deref()
}

#[cfg(test)]
mod tests;
