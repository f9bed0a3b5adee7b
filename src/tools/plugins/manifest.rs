//! Plugin manifests: `*.toml` files that declare executable tools.
//!
//! ```toml
//! name = "weather"                  # optional; defaults to the file stem
//! description = "Weather lookups"   # optional
//!
//! [[tools]]
//! name = "get_forecast"             # required, [A-Za-z0-9_-]{1,64}, unique in the file
//! description = "Forecast for a city"  # required, non-empty
//! exec = "bin/forecast"             # required; relative paths resolve against this file's directory
//! args = ["--json"]                 # optional
//! timeout = "10s"                   # required; "500ms" | "10s" | "2m" or an integer of ms; 0 < t <= 10m
//! mode = "read"                     # optional: read | safe_write | destructive | local | external
//! exposure = "deferred"             # optional: direct | deferred | hidden (absent means direct)
//! env = { UNITS = "metric" }        # optional; added to the inherited environment
//! parameters = '''{"type":"object","properties":{"city":{"type":"string"}}}'''
//! # ...or as a TOML table: parameters = { type = "object", properties = { city = { type = "string" } } }
//! ```
//!
//! Everything is checked at load, so a broken plugin fails boot naming the file, the field and
//! the fix instead of failing on the model's first call. Unknown keys are rejected: a typo such
//! as `timout` must not silently drop a bound.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::PluginError;
use crate::tools::Schema;

/// Largest manifest file accepted.
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;
/// Most tools one manifest may declare.
pub const MAX_TOOLS_PER_MANIFEST: usize = 256;
/// Longest per-call timeout a manifest may declare.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest tool (and plugin) name: the common limit of provider function-name rules.
pub const MAX_NAME_LEN: usize = crate::tools::MAX_TOOL_NAME_LEN;
/// Accepted `mode` values (the harness's ToolMode vocabulary).
pub const MODES: &[&str] = &["read", "safe_write", "destructive", "local", "external"];
/// Accepted `exposure` values (the ToolExposure tiers).
pub const EXPOSURES: &[&str] = &["direct", "deferred", "hidden"];

/// One loaded manifest file.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginManifest {
    pub name: String,
    pub description: Option<String>,
    /// The manifest file (absolute).
    pub path: PathBuf,
    /// Shared with the registered tools, so the inventory is held once.
    pub tools: Vec<Arc<PluginToolSpec>>,
}

/// One tool a manifest declares, fully validated and resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object whose top-level `type` is `"object"`.
    pub parameters: Schema,
    /// Absolute path of the executable.
    pub exec: PathBuf,
    pub args: Vec<String>,
    pub timeout: Duration,
    /// One of [`MODES`]; `None` lets the router infer it from the name.
    pub mode: Option<String>,
    /// One of [`EXPOSURES`]; `None` means `direct`.
    pub exposure: Option<String>,
    /// Added to (and overriding) the sidecar's environment for each call.
    pub env: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: Option<String>,
    description: Option<String>,
    tools: Option<Vec<RawTool>>,
}

// Required fields are `Option` so their absence gets our message (with the fix), not serde's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: Option<String>,
    description: Option<String>,
    exec: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    timeout: Option<toml::Value>,
    mode: Option<String>,
    exposure: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    parameters: Option<toml_json::Parameters>,
}

/// Loads every `*.toml` manifest in `dir`, in file-name order.
///
/// Files whose name starts with `.` (editor droppings) or `_` (the way to disable a manifest
/// without deleting it) are skipped, as are other extensions and subdirectories. The first bad
/// manifest fails the whole load: an installed tool must not silently disappear.
pub fn load_dir(dir: &Path) -> Result<Vec<PluginManifest>, PluginError> {
    let loaded = load_dir_then(dir, None, &|_| ())?;
    Ok(loaded.into_iter().map(|(m, ())| m).collect())
}

/// [`load_dir`], also running `then` on each manifest on the parser thread that read it
/// (the registry builds its router entries there instead of after, on one thread).
/// `cache_root`: where checked manifests are kept between boots (see [`cache`]).
pub fn load_dir_then<T: Send>(
    dir: &Path,
    cache_root: Option<&Path>,
    then: &(dyn Fn(&PluginManifest) -> T + Sync),
) -> Result<Vec<(PluginManifest, T)>, PluginError> {
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PluginError::MissingDir {
                dir: dir.to_path_buf(),
            });
        }
        Err(e) => {
            return Err(PluginError::Dir {
                dir: dir.to_path_buf(),
                msg: format!("cannot read it: {e}"),
            });
        }
    };
    if !meta.is_dir() {
        return Err(PluginError::Dir {
            dir: dir.to_path_buf(),
            msg: "is not a directory; point the plugin directory setting at a directory of *.toml manifests".into(),
        });
    }
    let entries = std::fs::read_dir(dir).map_err(|e| PluginError::Dir {
        dir: dir.to_path_buf(),
        msg: format!("cannot list it: {e}"),
    })?;
    let mut files: Vec<(OsString, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| PluginError::Dir {
            dir: dir.to_path_buf(),
            msg: format!("cannot list it: {e}"),
        })?;
        let file_name = entry.file_name();
        let Some(name) = file_name.to_str() else {
            continue;
        };
        if !name.ends_with(".toml") || name.starts_with('.') || name.starts_with('_') {
            continue;
        }
        let path = entry.path();
        // Follows symlinks, so a linked manifest counts and a directory named `x.toml` does not.
        if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            files.push((file_name, path));
        }
    }
    files.sort();

    let paths: Vec<PathBuf> = files.into_iter().map(|(_, p)| p).collect();
    let cache = cache_root.and_then(|root| cache::Cache::for_dir(root, dir));
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    let mut out = Vec::with_capacity(paths.len());
    // Results come back in file order, so the first bad manifest is still the one reported.
    for loaded in load_files(&paths, cache.as_ref(), then) {
        let (manifest, extra) = loaded?;
        if let Some(first) = seen.get(&manifest.name) {
            return Err(PluginError::DuplicatePlugin {
                name: manifest.name,
                path: manifest.path,
                first: first.clone(),
            });
        }
        seen.insert(manifest.name.clone(), manifest.path.clone());
        out.push((manifest, extra));
    }
    if let Some(cache) = &cache {
        let kept: Vec<&Path> = out.iter().map(|(m, _)| m.path.as_path()).collect();
        cache.prune(&kept);
    }
    Ok(out)
}

/// Parses the files on up to `available_parallelism` threads (TOML parsing and schema checks
/// are CPU work: 10,000 tools took ~300 ms on one core), results in input order.
fn load_files<T: Send>(
    paths: &[PathBuf],
    cache: Option<&cache::Cache>,
    then: &(dyn Fn(&PluginManifest) -> T + Sync),
) -> Vec<Result<(PluginManifest, T), PluginError>> {
    let one = |p: &PathBuf| {
        load_file_with(p, cache).map(|m| {
            let extra = then(&m);
            (m, extra)
        })
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(paths.len());
    if threads <= 1 {
        return paths.iter().map(one).collect();
    }
    let chunk = paths.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = paths
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(one).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .zip(paths.chunks(chunk))
            .flat_map(|(h, part)| {
                // A panicking parser thread fails its files, naming them, instead of the boot.
                h.join().unwrap_or_else(|_| {
                    part.iter()
                        .map(|p| {
                            Err(PluginError::Read {
                                path: p.clone(),
                                msg: "the manifest parser failed on it".into(),
                            })
                        })
                        .collect()
                })
            })
            .collect()
    })
}

/// Loads and validates one manifest file.
pub fn load_file(path: &Path) -> Result<PluginManifest, PluginError> {
    load_file_with(path, None)
}

/// [`load_file`], through `cache` when there is one: a hit skips the parse and the checks.
fn load_file_with(
    path: &Path,
    cache: Option<&cache::Cache>,
) -> Result<PluginManifest, PluginError> {
    // Absolute first, so `path` and every resolved `exec` stay valid whatever the cwd later is.
    let path = std::path::absolute(path).map_err(|e| PluginError::Read {
        path: path.to_path_buf(),
        msg: format!("cannot resolve the path: {e}"),
    })?;
    let bytes = read_bounded(&path)?;
    let Some(cache) = cache else {
        return parse_str(&utf8(bytes, &path)?, path);
    };
    // Keyed by the bytes: an entry was only written for a text that parsed, so a hit skips
    // the UTF-8 check too.
    let sha256 = cache::digest(&bytes);
    if let Some(hit) = cache.get(&path, &sha256) {
        return Ok(hit);
    }
    let manifest = parse_str(&utf8(bytes, &path)?, path)?;
    cache.put(&manifest, &sha256);
    Ok(manifest)
}

/// Parses and validates manifest text as if read from `path` (absolute: it names the file in
/// errors, gives the default plugin name and the directory relative `exec` paths resolve
/// against). `load_file` after reading; public so the parser can be fuzzed without files.
pub fn parse_str(text: &str, path: PathBuf) -> Result<PluginManifest, PluginError> {
    let raw: RawManifest = toml::from_str(text).map_err(|e| PluginError::Parse {
        path: path.clone(),
        msg: describe_toml_error(text, &e),
    })?;
    validate(raw, path)
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, PluginError> {
    let read_err = |e: std::io::Error| PluginError::Read {
        path: path.to_path_buf(),
        msg: format!("cannot read it: {e}"),
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let bytes = read_capped(file, MAX_MANIFEST_BYTES).map_err(read_err)?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(PluginError::Read {
            path: path.to_path_buf(),
            msg: format!(
                "is larger than {MAX_MANIFEST_BYTES} bytes; split it into several manifests"
            ),
        });
    }
    Ok(bytes)
}

/// At most `max + 1` bytes of `file`: one more than allowed, so the caller can tell "too
/// large". `take` rather than trusting the size in metadata: the file may grow while it is read.
fn read_capped(file: std::fs::File, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn utf8(bytes: Vec<u8>, path: &Path) -> Result<String, PluginError> {
    String::from_utf8(bytes).map_err(|e| PluginError::Read {
        path: path.to_path_buf(),
        msg: format!(
            "is not valid UTF-8 (first bad byte at offset {}); save it as UTF-8",
            e.utf8_error().valid_up_to()
        ),
    })
}

/// One line: `line N: <message>`, so the error names the offending key without the
/// multi-line source excerpt toml's Display adds.
fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim_end();
    match e.span() {
        Some(span) => {
            let start = span.start.min(text.len());
            // Bytes, not str slicing: a span off a char boundary must not panic.
            let before = &text.as_bytes()[..start];
            let line_start = before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            let line_no = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let source = text
                .get(line_start..)
                .and_then(|rest| rest.lines().next())
                .unwrap_or("")
                .trim();
            // The source line names the key even when the message only names a type.
            if source.is_empty() {
                format!("line {line_no}: {msg}")
            } else {
                let source: String = source.chars().take(80).collect();
                format!("line {line_no} (`{source}`): {msg}")
            }
        }
        None => msg.to_string(),
    }
}

fn validate(raw: RawManifest, path: PathBuf) -> Result<PluginManifest, PluginError> {
    let invalid = |field: String, msg: String| PluginError::Invalid {
        path: path.clone(),
        field,
        msg,
    };

    let name = match raw.name {
        Some(n) => {
            if !crate::tools::valid_tool_name(&n) {
                return Err(invalid(
                    "name".into(),
                    format!(
                        "`{n}` is not a valid plugin name; use 1-{MAX_NAME_LEN} characters from A-Z a-z 0-9 _ -"
                    ),
                ));
            }
            n
        }
        None => {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !crate::tools::valid_tool_name(&stem) {
                return Err(invalid(
                    "name".into(),
                    format!(
                        "the file name `{stem}` is not a valid plugin name; rename the file or set name = \"...\" (1-{MAX_NAME_LEN} characters from A-Z a-z 0-9 _ -)"
                    ),
                ));
            }
            stem
        }
    };

    let raw_tools = raw.tools.unwrap_or_default();
    if raw_tools.is_empty() {
        return Err(invalid(
            "tools".into(),
            "no tools declared; add at least one [[tools]] table".into(),
        ));
    }
    if raw_tools.len() > MAX_TOOLS_PER_MANIFEST {
        return Err(invalid(
            "tools".into(),
            format!(
                "declares {} tools, more than the {MAX_TOOLS_PER_MANIFEST} allowed per manifest; split it into several manifests",
                raw_tools.len()
            ),
        ));
    }

    let base = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let mut names = HashSet::new();
    let mut tools = Vec::with_capacity(raw_tools.len());
    // Tools of one manifest usually share an executable: inspect each path once.
    let mut execs: HashMap<String, Result<PathBuf, String>> = HashMap::new();
    for (i, t) in raw_tools.into_iter().enumerate() {
        let spec = validate_tool(t, &base, &mut execs)
            .map_err(|(key, msg)| invalid(format!("tools[{i}].{key}"), msg))?;
        if !names.insert(spec.name.clone()) {
            return Err(invalid(
                format!("tools[{i}].name"),
                format!(
                    "tool `{}` is declared twice in this manifest; rename or remove one",
                    spec.name
                ),
            ));
        }
        tools.push(Arc::new(spec));
    }

    Ok(PluginManifest {
        name,
        description: raw.description,
        path,
        tools,
    })
}

/// Validates one `[[tools]]` table; errors are `(key, message)` for the caller to place.
fn validate_tool(
    t: RawTool,
    base: &Path,
    execs: &mut HashMap<String, Result<PathBuf, String>>,
) -> Result<PluginToolSpec, (&'static str, String)> {
    let name = t
        .name
        .ok_or(("name", "is required; add name = \"my_tool\"".to_string()))?;
    if !crate::tools::valid_tool_name(&name) {
        return Err((
            "name",
            format!(
                "`{name}` is not a valid tool name; use 1-{MAX_NAME_LEN} characters from A-Z a-z 0-9 _ - (provider APIs reject others)"
            ),
        ));
    }
    let description = t.description.filter(|d| !d.trim().is_empty()).ok_or((
        "description",
        "is required and must not be empty; the model picks tools by it".to_string(),
    ))?;
    let timeout = match t.timeout {
        Some(v) => parse_timeout(&v).map_err(|m| ("timeout", m))?,
        None => {
            return Err((
                "timeout",
                "is required; add e.g. timeout = \"10s\"".to_string(),
            ));
        }
    };
    let parameters = match t.parameters {
        Some(v) => parse_parameters(v).map_err(|m| ("parameters", m))?,
        None => json!({"type": "object"}),
    };
    let parameters = Schema::from_value(&parameters);
    if let Some(m) = &t.mode
        && !MODES.contains(&m.as_str())
    {
        return Err((
            "mode",
            format!("`{m}` is not a mode; use one of {}", MODES.join(", ")),
        ));
    }
    if let Some(x) = &t.exposure
        && !EXPOSURES.contains(&x.as_str())
    {
        return Err((
            "exposure",
            format!(
                "`{x}` is not an exposure; use one of {}",
                EXPOSURES.join(", ")
            ),
        ));
    }
    // NUL bytes cannot cross exec(2); catching them here beats a spawn failure per call.
    if t.args.iter().any(|a| a.contains('\0')) {
        return Err(("args", "an argument contains a NUL byte; remove it".into()));
    }
    for (k, v) in &t.env {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err((
                "env",
                format!(
                    "`{k}` is not a valid variable name; it must be non-empty, without `=` or NUL"
                ),
            ));
        }
        if v.contains('\0') {
            return Err((
                "env",
                format!("the value of `{k}` contains a NUL byte; remove it"),
            ));
        }
    }
    let exec_raw = t.exec.filter(|e| !e.is_empty()).ok_or((
        "exec",
        "is required; add exec = \"path/to/executable\"".to_string(),
    ))?;
    let exec = execs
        .entry(exec_raw)
        .or_insert_with_key(|raw| resolve_exec(raw, base))
        .clone()
        .map_err(|m| ("exec", m))?;

    Ok(PluginToolSpec {
        name,
        description,
        parameters,
        exec,
        args: t.args,
        timeout,
        mode: t.mode,
        exposure: t.exposure,
        env: t.env,
    })
}

/// Relative paths (bare names included) resolve against the manifest's directory, never
/// `$PATH`, so what runs does not depend on the sidecar's environment.
fn resolve_exec(raw: &str, base: &Path) -> Result<PathBuf, String> {
    let p = Path::new(raw);
    let exec = if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    };
    let hint = if p.is_absolute() {
        String::new()
    } else {
        format!(
            " (relative paths resolve against the manifest's directory {})",
            base.display()
        )
    };
    match std::fs::metadata(&exec) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "{} does not exist{hint}; fix the path or install the executable",
            exec.display()
        )),
        Err(e) => Err(format!("cannot inspect {}: {e}{hint}", exec.display())),
        Ok(m) if !m.is_file() => Err(format!(
            "{} is not a file; point exec at an executable file",
            exec.display()
        )),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => Err(format!(
            "{} is not executable; run chmod +x on it",
            exec.display()
        )),
        Ok(_) => Ok(exec),
    }
}

fn parse_timeout(v: &toml::Value) -> Result<Duration, String> {
    const FIX: &str =
        "write e.g. timeout = \"500ms\", \"10s\", \"2m\" or an integer number of milliseconds";
    let d = match v {
        toml::Value::Integer(ms) => {
            if *ms <= 0 {
                return Err(format!("must be greater than zero; {FIX}"));
            }
            Duration::from_millis(ms.unsigned_abs())
        }
        toml::Value::String(s) => {
            parse_duration(s).ok_or_else(|| format!("`{s}` is not a duration; {FIX}"))?
        }
        other => {
            return Err(format!(
                "must be a string or an integer, not a {}; {FIX}",
                other.type_str()
            ));
        }
    };
    if d.is_zero() {
        return Err(format!("must be greater than zero; {FIX}"));
    }
    if d > MAX_TIMEOUT {
        return Err(format!(
            "{} is over the ceiling of {}; lower it",
            format_duration(d),
            format_duration(MAX_TIMEOUT)
        ));
    }
    Ok(d)
}

/// Parses `<digits><unit>` with unit `ms`, `s` or `m`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (digits, unit) = s.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        "m" => Some(Duration::from_secs(n.checked_mul(60)?)),
        _ => None,
    }
}

/// The inverse of [`parse_duration`] for whole units: `2m`, `10s`, `1500ms`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms != 0 && ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms != 0 && ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

fn parse_parameters(v: toml_json::Parameters) -> Result<Value, String> {
    use toml_json::Parameters;
    let mut schema = match v {
        Parameters::Text(s) => serde_json::from_str::<Value>(&s).map_err(|e| {
            format!("is not valid JSON ({e}); write a JSON object string or a TOML table")
        })?,
        Parameters::Table(v) => v?,
        Parameters::Other(kind) => {
            return Err(format!(
                "must be a JSON Schema object (as a JSON string or a TOML table), not a TOML {kind}"
            ));
        }
    };
    let Some(obj) = schema.as_object_mut() else {
        return Err(format!(
            "must be a JSON object (a JSON Schema), not {}; e.g. {{\"type\":\"object\",\"properties\":{{...}}}}",
            crate::tools::json_type_name(&schema)
        ));
    };
    match obj.get("type") {
        // Arguments always arrive as one JSON object, and providers require that top level.
        None => {
            obj.insert("type".into(), Value::String("object".into()));
        }
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err(format!(
                "top-level \"type\" is {other}; it must be \"object\" because arguments arrive as one JSON object"
            ));
        }
    }
    check_schema(&schema)?;
    Ok(schema)
}

/// Meta-schema validation catches every structural mistake; only references, regexes and a
/// custom `$schema` need the full compile (a third of boot time with 10,000 tools), so only
/// schemas using them pay for it here. The router compiles every schema on first dispatch.
fn check_schema(schema: &Value) -> Result<(), String> {
    fn needs_compile(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.iter().any(|(k, v)| {
                matches!(
                    k.as_str(),
                    "$ref"
                        | "$dynamicRef"
                        | "$recursiveRef"
                        | "$schema"
                        | "pattern"
                        | "patternProperties"
                ) || needs_compile(v)
            }),
            Value::Array(a) => a.iter().any(needs_compile),
            _ => false,
        }
    }
    // A plain schema holds none of the keywords that need the compile, so it is checked
    // first: one walk of the tree instead of two.
    let problem = if plain_schema::certainly_valid(schema) {
        None
    } else if needs_compile(schema) {
        jsonschema::validator_for(schema).err()
    } else {
        jsonschema::meta::validate(schema).err()
    };
    match problem {
        None => Ok(()),
        Some(e) => {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_string() } else { at };
            Err(format!("is not a valid JSON Schema (at {at}): {e}"))
        }
    }
}

pub mod cache;
mod plain_schema;
mod toml_json;

#[cfg(test)]
mod tests;
