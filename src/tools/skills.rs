//! `skills.list` core (reference behaviour §3.11): discover `SKILL.md` files under skill roots,
//! validate their YAML front-matter, resolve overrides and layers, and select the skills a
//! request's conditions allow. Pure library code: the RPC layer maps every [`SkillsError`] to
//! -32602 and converts [`SkillsListing`] into the wire result.
//!
//! # Failure policy
//! Only request-level problems are errors; every per-skill problem becomes a warning so one bad
//! skill never hides the others.
//!
//! * Empty `roots`, more than [`MAX_ROOTS`] roots, a root that is missing, not a directory or
//!   unreadable → [`SkillsError`] naming the root. All roots are checked before any is scanned.
//! * Entries of a root that are not directories (a README, …) → ignored silently.
//! * A skill dir without `SKILL.md` → skipped silently (scratch and helper dirs are normal).
//! * `SKILL.md` that is not a regular file, unreadable, not UTF-8, or larger than
//!   [`MAX_SKILL_FILE_BYTES`] → skipped, warning.
//! * No front-matter (first line not `---`), unclosed front-matter, malformed YAML, front-matter
//!   that is not a mapping → skipped, warning.
//! * Missing/invalid `name`, a field of the wrong type, an unknown `layer`/`match` value →
//!   skipped, warning. An invalid `match` is not defaulted to `any`: that would silently widen
//!   where a gated skill shows up.
//! * A `null` value (e.g. `tags:` with nothing after it) counts as absent.
//! * Unknown front-matter keys (`license`, `allowed-tools`, … from other skill ecosystems) →
//!   ignored, so shared skill folders keep working.
//! * `description` longer than [`DESCRIPTION_SOFT_LIMIT`] characters → listed, warning.
//! * Two dirs in the same root declaring the same `name` → the first by dir name is kept, the
//!   other skipped with a warning (almost certainly a copy-paste mistake). The same `name` in a
//!   later root replaces the earlier one silently: that is the override feature.
//! * More than [`MAX_SKILL_DIRS_PER_ROOT`] skill dirs in a root → the first ones by name are
//!   used, warning. Content beyond [`MAX_CONTENT_BYTES`] per skill (after `{scripts}`
//!   substitution) or [`MAX_TOTAL_CONTENT_BYTES`] in total → skipped, warning. More than
//!   [`MAX_WARNINGS`] warnings → the rest are summarised in one final warning.
//!
//! # Other decisions
//! * Overrides are resolved before selection: a later root's conditional skill that the request
//!   does not satisfy hides the earlier root's version instead of letting it resurface.
//! * Roots may be relative; they are made absolute against the process cwd (lexically, without
//!   resolving symlinks) so `skillsDir` and `{scripts}` are always absolute paths.
//! * Symlinked skill dirs and `SKILL.md` files are followed (skills are commonly symlinked in).
//! * `displayName` defaults to `name` when absent or empty.
//! * `content` is the body after the closing `---` line with leading line breaks removed (the
//!   conventional blank separator line is not content), then `{scripts}` substituted.
//! * A UTF-8 BOM and CRLF line endings are tolerated around the `---` delimiters.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_yaml_ng::{Mapping, Value};

/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// Larger `SKILL.md` files are skipped: skills are prompt text, not data.
pub const MAX_SKILL_FILE_BYTES: u64 = 1024 * 1024;
/// Skill dirs read per root; bounds work on a mistaken root such as `$HOME`.
pub const MAX_SKILL_DIRS_PER_ROOT: usize = 1000;
/// Roots per request.
pub const MAX_ROOTS: usize = 32;
/// Cap on one skill's content after `{scripts}` substitution, which can amplify a body.
pub const MAX_CONTENT_BYTES: usize = 2 * 1024 * 1024;
/// Cap on all content read in one request, so the reply stays a sane size.
pub const MAX_TOTAL_CONTENT_BYTES: usize = 32 * 1024 * 1024;
/// Warnings returned per request (plus one summary line when more were dropped).
pub const MAX_WARNINGS: usize = 256;
/// `description` length (characters) above which a warning is recorded.
pub const DESCRIPTION_SOFT_LIMIT: usize = 1024;
/// Maximum `name` length.
pub const NAME_MAX_LEN: usize = 64;
/// `priority` when the front-matter has none.
pub const DEFAULT_PRIORITY: i64 = 500;
/// Priority at or above which a skill without an explicit `layer` is eager.
pub const EAGER_PRIORITY: i64 = 850;

const SCRIPTS_PLACEHOLDER: &str = "{scripts}";
const NAME_PATTERN: &str = "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$";

/// What to list (the RPC layer builds it from `protocol::tools::SkillsListParams`).
#[derive(Debug, Clone, Default)]
pub struct SkillsQuery {
    pub roots: Vec<PathBuf>,
    pub conditions: Vec<String>,
    pub exclude: Vec<String>,
    pub ignore_conditions: bool,
}

/// Whether a skill is injected up front or only listed in the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Eager,
    Catalog,
}

/// How a skill's `conditions` are matched against the request's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchMode {
    #[default]
    Any,
    All,
}

/// One listed skill, serialised in camelCase as the §3.11 result row.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SkillRow {
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub priority: i64,
    pub tags: Vec<String>,
    pub conditions: Vec<String>,
    #[serde(rename = "match")]
    pub match_mode: MatchMode,
    pub layer: Layer,
    pub model_invocable: bool,
    pub content: String,
    pub dir_name: String,
    pub skills_dir: String,
}

/// The `skills.list` result: selected rows plus per-skill problems.
#[derive(Debug, Serialize)]
pub struct SkillsListing {
    pub skills: Vec<SkillRow>,
    pub warnings: Vec<String>,
}

/// Request-level failures; all are the caller's to fix, so the RPC layer reports -32602.
#[derive(Debug, thiserror::Error)]
pub enum SkillsError {
    #[error("roots is empty: pass at least one skills directory in roots")]
    NoRoots,
    #[error("roots lists {count} directories: pass at most {MAX_ROOTS}")]
    TooManyRoots { count: usize },
    #[error("skills root {} does not exist: pass an existing directory in roots", .root.display())]
    RootNotFound { root: PathBuf },
    #[error(
        "skills root {} is not a directory: pass the directory that contains the skill folders",
        .root.display()
    )]
    RootNotADirectory { root: PathBuf },
    #[error("skills root {} cannot be read ({source}): check that it exists and is readable", .root.display())]
    RootUnreadable {
        root: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Lists the skills under `q.roots` that `q` selects, ordered by priority descending then name
/// ascending: the most important skills first, and name as a stable tie-break (names are unique
/// after overrides, so the order is total and deterministic).
pub fn list_skills(q: &SkillsQuery) -> Result<SkillsListing, SkillsError> {
    let roots = check_roots(&q.roots)?;
    let mut warnings = Warnings::default();
    let mut budget = MAX_TOTAL_CONTENT_BYTES;
    let mut by_name: BTreeMap<String, SkillRow> = BTreeMap::new();

    for (given, abs) in &roots {
        let mut in_root: HashMap<String, String> = HashMap::new();
        for dir_name in skill_dir_names(given, abs, &mut warnings)? {
            let Some(row) = load_skill(abs, &dir_name, &mut budget, &mut warnings) else {
                continue;
            };
            if let Some(first_dir) = in_root.get(&row.name) {
                warnings.push(format!(
                    "{}: name '{}' is already used by {} in the same root; skill skipped (rename one of them)",
                    skill_file_display(abs, &row.dir_name),
                    row.name,
                    first_dir
                ));
                continue;
            }
            in_root.insert(row.name.clone(), row.dir_name.clone());
            by_name.insert(row.name.clone(), row);
        }
    }

    let requested: HashSet<&str> = q.conditions.iter().map(String::as_str).collect();
    let excluded: HashSet<&str> = q.exclude.iter().map(String::as_str).collect();
    let mut skills: Vec<SkillRow> = by_name
        .into_values()
        .filter(|row| selected(row, &requested, &excluded, q.ignore_conditions))
        .collect();
    skills.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then_with(|| a.name.cmp(&b.name))
    });

    Ok(SkillsListing {
        skills,
        warnings: warnings.finish(),
    })
}

/// Validates every root up front so a bad root fails the request before any work is done.
/// Returns `(as given, absolute)` pairs: errors name the caller's spelling, rows the absolute.
fn check_roots(roots: &[PathBuf]) -> Result<Vec<(PathBuf, PathBuf)>, SkillsError> {
    if roots.is_empty() {
        return Err(SkillsError::NoRoots);
    }
    if roots.len() > MAX_ROOTS {
        return Err(SkillsError::TooManyRoots { count: roots.len() });
    }
    let mut out = Vec::with_capacity(roots.len());
    for root in roots {
        match fs::metadata(root) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(SkillsError::RootNotADirectory { root: root.clone() }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(SkillsError::RootNotFound { root: root.clone() });
            }
            Err(source) => {
                return Err(SkillsError::RootUnreadable {
                    root: root.clone(),
                    source,
                });
            }
        }
        let abs = std::path::absolute(root).map_err(|source| SkillsError::RootUnreadable {
            root: root.clone(),
            source,
        })?;
        out.push((root.clone(), abs));
    }
    Ok(out)
}

/// Names of the directories in `abs`, sorted, capped at [`MAX_SKILL_DIRS_PER_ROOT`].
fn skill_dir_names(
    given: &Path,
    abs: &Path,
    warnings: &mut Warnings,
) -> Result<Vec<OsString>, SkillsError> {
    let entries = fs::read_dir(abs).map_err(|source| SkillsError::RootUnreadable {
        root: given.to_path_buf(),
        source,
    })?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                warnings.push(format!(
                    "{}: listing stopped early ({e}); some skills may be missing",
                    abs.display()
                ));
                break;
            }
        };
        // file_type() avoids a stat per entry; only symlinks need following.
        let is_dir = match entry.file_type() {
            Ok(t) if t.is_dir() => true,
            Ok(t) if t.is_symlink() => match fs::metadata(entry.path()) {
                Ok(meta) => meta.is_dir(),
                Err(e) => {
                    warnings.push(format!(
                        "{}: cannot follow symlink ({e}); entry skipped",
                        entry.path().display()
                    ));
                    false
                }
            },
            Ok(_) => false,
            Err(e) => {
                warnings.push(format!(
                    "{}: cannot inspect entry ({e}); entry skipped",
                    entry.path().display()
                ));
                false
            }
        };
        if is_dir {
            names.push(entry.file_name());
        }
    }
    names.sort();
    if names.len() > MAX_SKILL_DIRS_PER_ROOT {
        warnings.push(format!(
            "{}: {} skill directories found; only the first {MAX_SKILL_DIRS_PER_ROOT} by name were read",
            abs.display(),
            names.len()
        ));
        names.truncate(MAX_SKILL_DIRS_PER_ROOT);
    }
    Ok(names)
}

/// Reads and validates one skill dir; `None` means skipped (with a warning unless the dir simply
/// has no `SKILL.md`).
fn load_skill(
    root: &Path,
    dir_name: &OsString,
    budget: &mut usize,
    warnings: &mut Warnings,
) -> Option<SkillRow> {
    let skill_dir = root.join(dir_name);
    let file = skill_dir.join(SKILL_FILE);
    let text = match read_skill_file(&file, *budget) {
        Ok(Some(text)) => text,
        Ok(None) => return None,
        Err(problem) => {
            warnings.push(format!("{}: {problem}; skill skipped", file.display()));
            return None;
        }
    };
    let scripts = skill_dir.join("scripts").to_string_lossy().into_owned();
    let dir_name = dir_name.to_string_lossy().into_owned();
    let skills_dir = root.to_string_lossy().into_owned();
    match parse_skill(&text, &scripts, dir_name, skills_dir) {
        Ok((row, soft_warning)) => {
            if row.content.len() > *budget {
                warnings.push(format!(
                    "{}: the request's total content limit ({MAX_TOTAL_CONTENT_BYTES} bytes) is used up; skill skipped (use fewer roots)",
                    file.display()
                ));
                return None;
            }
            *budget -= row.content.len();
            if let Some(w) = soft_warning {
                warnings.push(format!("{}: {w}", file.display()));
            }
            Some(row)
        }
        Err(problem) => {
            warnings.push(format!("{}: {problem}; skill skipped", file.display()));
            None
        }
    }
}

/// `Ok(None)` when there is no `SKILL.md` (silent skip); `Err` carries a warning text.
fn read_skill_file(file: &Path, budget: usize) -> Result<Option<String>, String> {
    let meta = match fs::metadata(file) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot inspect file ({e})")),
    };
    if !meta.is_file() {
        return Err(format!("{SKILL_FILE} is not a regular file"));
    }
    if meta.len() > MAX_SKILL_FILE_BYTES {
        return Err(too_large(meta.len()));
    }
    if usize::try_from(meta.len()).map_or(true, |len| len > budget) {
        return Err(format!(
            "the request's total content limit ({MAX_TOTAL_CONTENT_BYTES} bytes) is used up (use fewer roots)"
        ));
    }
    let mut bytes = Vec::new();
    fs::File::open(file)
        // take() guards against a file that grew after the metadata check.
        .and_then(|f| f.take(MAX_SKILL_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read file ({e})"))?;
    if bytes.len() as u64 > MAX_SKILL_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| format!("file is not valid UTF-8 ({e})"))
}

fn too_large(len: u64) -> String {
    format!("file is {len} bytes, over the {MAX_SKILL_FILE_BYTES}-byte limit; shrink it")
}

/// Builds a row from `SKILL.md` text; the second value is a soft (still listed) warning.
fn parse_skill(
    text: &str,
    scripts: &str,
    dir_name: String,
    skills_dir: String,
) -> Result<(SkillRow, Option<String>), String> {
    let (yaml, body) = split_front_matter(text)?;
    let value: Value = serde_yaml_ng::from_str(yaml)
        .map_err(|e| format!("front-matter is not valid YAML ({e})"))?;
    let empty = Mapping::new();
    let fm = match &value {
        Value::Mapping(m) => m,
        // An empty block parses as null; report it as the missing name below.
        Value::Null => &empty,
        other => {
            return Err(format!(
                "front-matter must be a YAML mapping of fields, found {}",
                kind(other)
            ));
        }
    };

    let name = match opt_string(fm, "name")? {
        Some(name) => name,
        None => return Err("front-matter has no `name`; add `name: <skill-name>`".to_owned()),
    };
    validate_name(&name)?;
    let description = opt_string(fm, "description")?.unwrap_or_default();
    let priority = opt_i64(fm, "priority")?.unwrap_or(DEFAULT_PRIORITY);
    let layer = match opt_string(fm, "layer")?.as_deref() {
        None => {
            if priority >= EAGER_PRIORITY {
                Layer::Eager
            } else {
                Layer::Catalog
            }
        }
        Some("eager") => Layer::Eager,
        Some("catalog") => Layer::Catalog,
        Some(other) => return Err(format!("`layer` is '{other}'; use `eager` or `catalog`")),
    };
    let match_mode = match opt_string(fm, "match")?.as_deref() {
        None | Some("any") => MatchMode::Any,
        Some("all") => MatchMode::All,
        Some(other) => return Err(format!("`match` is '{other}'; use `any` or `all`")),
    };
    let conditions = opt_string_list(fm, "conditions")?;
    let tags = opt_string_list(fm, "tags")?;
    let display_name = opt_string(fm, "displayName")?
        .filter(|d| !d.trim().is_empty())
        .unwrap_or_else(|| name.clone());
    let model_invocable = !opt_bool(fm, "disable-model-invocation")?.unwrap_or(false);

    let content = substitute_scripts(body.trim_start_matches(['\r', '\n']), scripts)?;
    let description_chars = description.chars().count();
    let soft_warning = (description_chars > DESCRIPTION_SOFT_LIMIT).then(|| {
        format!(
            "description is {description_chars} characters, over the {DESCRIPTION_SOFT_LIMIT}-character soft limit; listed anyway, consider shortening it"
        )
    });

    let row = SkillRow {
        name,
        display_name,
        description,
        priority,
        tags,
        conditions,
        match_mode,
        layer,
        model_invocable,
        content,
        dir_name,
        skills_dir,
    };
    Ok((row, soft_warning))
}

/// Splits `SKILL.md` into (front-matter YAML, body). The first line must be `---`.
fn split_front_matter(text: &str) -> Result<(&str, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Err("no front-matter: the first line must be `---`".to_owned());
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        if line.trim_end() == "---" {
            return Ok((&text[start..offset], &text[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err("front-matter is not closed: add a `---` line after the YAML fields".to_owned())
}

fn substitute_scripts(body: &str, scripts: &str) -> Result<String, String> {
    let hits = body.matches(SCRIPTS_PLACEHOLDER).count();
    let grown = hits.saturating_mul(scripts.len().saturating_sub(SCRIPTS_PLACEHOLDER.len()));
    if body.len().saturating_add(grown) > MAX_CONTENT_BYTES {
        return Err(format!(
            "content would exceed {MAX_CONTENT_BYTES} bytes after {SCRIPTS_PLACEHOLDER} substitution; shrink the body"
        ));
    }
    Ok(body.replace(SCRIPTS_PLACEHOLDER, scripts))
}

fn validate_name(name: &str) -> Result<(), String> {
    let len = name.chars().count();
    if len > NAME_MAX_LEN {
        return Err(format!(
            "name is {len} characters, over the {NAME_MAX_LEN}-character limit; shorten it"
        ));
    }
    if name.contains("--") {
        return Err(format!("name '{name}' contains `--`; use single hyphens"));
    }
    let bytes = name.as_bytes();
    let edge_ok = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let well_formed = match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            edge_ok(first) && edge_ok(last) && bytes.iter().all(|&b| edge_ok(b) || b == b'-')
        }
        _ => false,
    };
    if !well_formed {
        return Err(format!(
            "name '{name}' must match {NAME_PATTERN} (lowercase letters, digits, inner hyphens)"
        ));
    }
    Ok(())
}

fn selected(
    row: &SkillRow,
    requested: &HashSet<&str>,
    excluded: &HashSet<&str>,
    ignore_conditions: bool,
) -> bool {
    if excluded.contains(row.name.as_str()) {
        return false;
    }
    if ignore_conditions || row.conditions.is_empty() {
        return true;
    }
    let mut conditions = row
        .conditions
        .iter()
        .map(|c| requested.contains(c.as_str()));
    match row.match_mode {
        MatchMode::Any => conditions.any(|hit| hit),
        MatchMode::All => conditions.all(|hit| hit),
    }
}

/// A present, non-null front-matter value.
fn field<'a>(fm: &'a Mapping, key: &str) -> Option<&'a Value> {
    fm.get(key).filter(|v| !v.is_null())
}

fn opt_string(fm: &Mapping, key: &str) -> Result<Option<String>, String> {
    field(fm, key)
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| wrong_type(key, "a string", v))
        })
        .transpose()
}

fn opt_i64(fm: &Mapping, key: &str) -> Result<Option<i64>, String> {
    field(fm, key)
        .map(|v| v.as_i64().ok_or_else(|| wrong_type(key, "an integer", v)))
        .transpose()
}

fn opt_bool(fm: &Mapping, key: &str) -> Result<Option<bool>, String> {
    field(fm, key)
        .map(|v| {
            v.as_bool()
                .ok_or_else(|| wrong_type(key, "true or false", v))
        })
        .transpose()
}

fn opt_string_list(fm: &Mapping, key: &str) -> Result<Vec<String>, String> {
    let Some(v) = field(fm, key) else {
        return Ok(Vec::new());
    };
    let items = v
        .as_sequence()
        .ok_or_else(|| wrong_type(key, "a list of strings", v))?;
    items
        .iter()
        .map(|item| {
            item.as_str()
                .map(str::to_owned)
                .ok_or_else(|| wrong_type(key, "a list of strings", item))
        })
        .collect()
}

fn wrong_type(key: &str, expected: &str, found: &Value) -> String {
    format!("`{key}` must be {expected}, found {}", kind(found))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a float",
        Value::Number(n) if n.as_i64().is_none() => "an out-of-range integer",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

fn skill_file_display(root: &Path, dir_name: &str) -> String {
    root.join(dir_name).join(SKILL_FILE).display().to_string()
}

/// Collects warnings up to [`MAX_WARNINGS`], counting the rest for one summary line.
#[derive(Default)]
struct Warnings {
    list: Vec<String>,
    dropped: usize,
}

impl Warnings {
    fn push(&mut self, warning: String) {
        if self.list.len() < MAX_WARNINGS {
            self.list.push(warning);
        } else {
            self.dropped += 1;
        }
    }

    fn finish(mut self) -> Vec<String> {
        if self.dropped > 0 {
            self.list
                .push(format!("{} further warnings omitted", self.dropped));
        }
        self.list
    }
}

#[cfg(test)]
mod tests;
