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
mod tests {
    use super::*;
    use std::path::Path;
    use tempfile::TempDir;

    fn write_skill(root: &Path, dir: &str, text: &str) {
        let d = root.join(dir);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join(SKILL_FILE), text).unwrap();
    }

    fn simple(root: &Path, dir: &str, name: &str, extra: &str) {
        write_skill(
            root,
            dir,
            &format!("---\nname: {name}\n{extra}---\nBody of {name}.\n"),
        );
    }

    fn query(roots: &[&Path]) -> SkillsQuery {
        SkillsQuery {
            roots: roots.iter().map(|r| r.to_path_buf()).collect(),
            ..SkillsQuery::default()
        }
    }

    fn names(listing: &SkillsListing) -> Vec<&str> {
        listing.skills.iter().map(|s| s.name.as_str()).collect()
    }

    fn warning_about(listing: &SkillsListing, dir: &str) -> String {
        let needle = format!("{dir}/{SKILL_FILE}");
        let hits: Vec<&String> = listing
            .warnings
            .iter()
            .filter(|w| w.contains(&needle))
            .collect();
        assert_eq!(hits.len(), 1, "warnings: {:?}", listing.warnings);
        hits[0].clone()
    }

    #[test]
    fn row_with_every_field() {
        let root = TempDir::new().unwrap();
        write_skill(
            root.path(),
            "deploy",
            "---\nname: deploy-app\ndisplayName: Deploy App\ndescription: Ships the app.\n\
             priority: 700\nlayer: eager\nconditions:\n  - tool:local_exec_shell\n  - os:linux\n\
             match: all\ndisable-model-invocation: true\ntags: [ops, release]\n\
             license: MIT\n---\n\n# Deploy\nRun it.\n",
        );
        let q = SkillsQuery {
            conditions: vec!["tool:local_exec_shell".into(), "os:linux".into()],
            ..query(&[root.path()])
        };
        let out = list_skills(&q).unwrap();
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
        let abs = std::path::absolute(root.path()).unwrap();
        assert_eq!(
            out.skills,
            vec![SkillRow {
                name: "deploy-app".into(),
                display_name: "Deploy App".into(),
                description: "Ships the app.".into(),
                priority: 700,
                tags: vec!["ops".into(), "release".into()],
                conditions: vec!["tool:local_exec_shell".into(), "os:linux".into()],
                match_mode: MatchMode::All,
                layer: Layer::Eager,
                model_invocable: false,
                content: "# Deploy\nRun it.\n".into(),
                dir_name: "deploy".into(),
                skills_dir: abs.to_string_lossy().into_owned(),
            }]
        );
    }

    #[test]
    fn row_serialises_camel_case_with_match_key() {
        let root = TempDir::new().unwrap();
        simple(root.path(), "a", "a", "");
        let out = list_skills(&query(&[root.path()])).unwrap();
        let json = serde_json::to_value(&out).unwrap();
        let row = &json["skills"][0];
        let mut keys: Vec<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "conditions",
                "content",
                "description",
                "dirName",
                "displayName",
                "layer",
                "match",
                "modelInvocable",
                "name",
                "priority",
                "skillsDir",
                "tags"
            ]
        );
        assert_eq!(row["match"], "any");
        assert_eq!(row["layer"], "catalog");
        assert_eq!(json["warnings"], serde_json::json!([]));
    }

    #[test]
    fn defaults_apply_when_fields_absent_or_null() {
        let root = TempDir::new().unwrap();
        simple(root.path(), "plain", "plain", "tags:\ndisplayName: ''\n");
        let out = list_skills(&query(&[root.path()])).unwrap();
        let row = &out.skills[0];
        assert_eq!(row.display_name, "plain");
        assert_eq!(row.description, "");
        assert_eq!(row.priority, DEFAULT_PRIORITY);
        assert_eq!(row.layer, Layer::Catalog);
        assert_eq!(row.match_mode, MatchMode::Any);
        assert!(row.tags.is_empty() && row.conditions.is_empty());
        assert!(row.model_invocable);
        assert_eq!(row.content, "Body of plain.\n");
        assert!(out.warnings.is_empty());
    }

    #[test]
    fn priority_decides_layer_without_explicit_layer() {
        let root = TempDir::new().unwrap();
        simple(root.path(), "a", "low", "priority: 849\n");
        simple(root.path(), "b", "edge", "priority: 850\n");
        simple(root.path(), "c", "high", "priority: 1000\n");
        simple(root.path(), "d", "negative", "priority: -5\n");
        let out = list_skills(&query(&[root.path()])).unwrap();
        let layer = |n: &str| out.skills.iter().find(|s| s.name == n).unwrap().layer;
        assert_eq!(layer("low"), Layer::Catalog);
        assert_eq!(layer("edge"), Layer::Eager);
        assert_eq!(layer("high"), Layer::Eager);
        assert_eq!(layer("negative"), Layer::Catalog);
    }

    #[test]
    fn explicit_layer_wins_over_priority() {
        let root = TempDir::new().unwrap();
        simple(
            root.path(),
            "a",
            "demoted",
            "priority: 900\nlayer: catalog\n",
        );
        simple(root.path(), "b", "promoted", "priority: 10\nlayer: eager\n");
        let out = list_skills(&query(&[root.path()])).unwrap();
        let layer = |n: &str| out.skills.iter().find(|s| s.name == n).unwrap().layer;
        assert_eq!(layer("demoted"), Layer::Catalog);
        assert_eq!(layer("promoted"), Layer::Eager);
    }

    #[test]
    fn later_root_overrides_by_name() {
        let base = TempDir::new().unwrap();
        let user = TempDir::new().unwrap();
        simple(base.path(), "review", "review", "description: base\n");
        simple(base.path(), "only-base", "only-base", "");
        // Different dir name, same skill name: override is by name, not by dir.
        simple(user.path(), "my-review", "review", "description: user\n");
        let out = list_skills(&query(&[base.path(), user.path()])).unwrap();
        assert_eq!(names(&out), ["only-base", "review"]);
        let review = out.skills.iter().find(|s| s.name == "review").unwrap();
        assert_eq!(review.description, "user");
        assert_eq!(review.dir_name, "my-review");
        assert_eq!(
            review.skills_dir,
            std::path::absolute(user.path()).unwrap().to_string_lossy()
        );
        assert!(out.warnings.is_empty());
    }

    #[test]
    fn override_applies_before_selection() {
        let base = TempDir::new().unwrap();
        let user = TempDir::new().unwrap();
        simple(base.path(), "s", "s", "");
        simple(user.path(), "s", "s", "conditions: [tool:x]\n");
        let out = list_skills(&query(&[base.path(), user.path()])).unwrap();
        assert!(out.skills.is_empty());
    }

    #[test]
    fn duplicate_name_in_one_root_keeps_first_and_warns() {
        let root = TempDir::new().unwrap();
        simple(root.path(), "a-dir", "same", "description: first\n");
        simple(root.path(), "b-dir", "same", "description: second\n");
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert_eq!(out.skills.len(), 1);
        assert_eq!(out.skills[0].description, "first");
        let w = warning_about(&out, "b-dir");
        assert!(w.contains("already used by a-dir"), "{w}");
    }

    #[test]
    fn conditions_match_any() {
        let root = TempDir::new().unwrap();
        simple(
            root.path(),
            "a",
            "shell",
            "conditions: [tool:shell, tool:exec]\n",
        );
        simple(root.path(), "b", "free", "");
        let mut q = query(&[root.path()]);
        assert_eq!(names(&list_skills(&q).unwrap()), ["free"]);
        q.conditions = vec!["tool:exec".into()];
        assert_eq!(names(&list_skills(&q).unwrap()), ["free", "shell"]);
        q.conditions = vec!["tool:other".into()];
        assert_eq!(names(&list_skills(&q).unwrap()), ["free"]);
    }

    #[test]
    fn conditions_match_all() {
        let root = TempDir::new().unwrap();
        simple(
            root.path(),
            "a",
            "both",
            "conditions: [tool:shell, os:linux]\nmatch: all\n",
        );
        let mut q = query(&[root.path()]);
        q.conditions = vec!["tool:shell".into()];
        assert!(list_skills(&q).unwrap().skills.is_empty());
        q.conditions = vec!["os:linux".into(), "extra".into(), "tool:shell".into()];
        assert_eq!(names(&list_skills(&q).unwrap()), ["both"]);
    }

    #[test]
    fn exclude_drops_names() {
        let root = TempDir::new().unwrap();
        simple(root.path(), "a", "keep", "");
        simple(root.path(), "b", "drop", "priority: 900\n");
        let q = SkillsQuery {
            exclude: vec!["drop".into(), "not-there".into()],
            ..query(&[root.path()])
        };
        assert_eq!(names(&list_skills(&q).unwrap()), ["keep"]);
    }

    #[test]
    fn ignore_conditions_lists_all_but_still_excludes() {
        let root = TempDir::new().unwrap();
        simple(
            root.path(),
            "a",
            "gated",
            "conditions: [tool:x]\nmatch: all\n",
        );
        simple(root.path(), "b", "other", "conditions: [tool:y]\n");
        simple(root.path(), "c", "dropped", "");
        let q = SkillsQuery {
            ignore_conditions: true,
            exclude: vec!["dropped".into()],
            ..query(&[root.path()])
        };
        assert_eq!(names(&list_skills(&q).unwrap()), ["gated", "other"]);
    }

    #[test]
    fn scripts_placeholder_is_substituted_with_absolute_path() {
        let root = TempDir::new().unwrap();
        write_skill(
            root.path(),
            "tooling",
            "---\nname: tooling\n---\nRun {scripts}/build.sh then {scripts}/test.sh\n",
        );
        let out = list_skills(&query(&[root.path()])).unwrap();
        let scripts = std::path::absolute(root.path())
            .unwrap()
            .join("tooling")
            .join("scripts");
        let scripts = scripts.to_string_lossy();
        assert!(Path::new(scripts.as_ref()).is_absolute());
        assert_eq!(
            out.skills[0].content,
            format!("Run {scripts}/build.sh then {scripts}/test.sh\n")
        );
    }

    #[test]
    fn relative_root_becomes_absolute() {
        // "." always exists; no files are written into the working tree.
        let roots = check_roots(&[PathBuf::from(".")]).unwrap();
        assert_eq!(roots[0].0, PathBuf::from("."));
        assert!(roots[0].1.is_absolute());
    }

    #[test]
    fn invalid_names_are_skipped_with_warnings() {
        let root = TempDir::new().unwrap();
        let cases = [
            ("upper", "Upper".to_owned(), "must match"),
            ("double", "a--b".to_owned(), "`--`"),
            ("long", "a".repeat(65), "65 characters"),
            ("lead", "-lead".to_owned(), "must match"),
            ("trail", "trail-".to_owned(), "must match"),
            ("space", "'has space'".to_owned(), "must match"),
            ("empty", "''".to_owned(), "must match"),
            ("number", "42".to_owned(), "must be a string"),
        ];
        for (dir, name, _) in &cases {
            simple(root.path(), dir, name, "");
        }
        write_skill(root.path(), "missing", "---\ndescription: no name\n---\n");
        simple(root.path(), "max", &"b".repeat(64), "");
        simple(root.path(), "ok", "ok-1", "");
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert_eq!(names(&out), ["b".repeat(64).as_str(), "ok-1"]);
        for (dir, _, problem) in &cases {
            let w = warning_about(&out, dir);
            assert!(w.contains(problem) && w.ends_with("skill skipped"), "{w}");
        }
        assert!(warning_about(&out, "missing").contains("no `name`"));
        assert_eq!(out.warnings.len(), cases.len() + 1);
    }

    #[test]
    fn wrong_field_types_are_skipped_with_warnings() {
        let root = TempDir::new().unwrap();
        let cases = [
            ("prio", "priority: high\n", "`priority` must be an integer"),
            ("prio-float", "priority: 1.5\n", "found a float"),
            ("tags", "tags: ops\n", "`tags` must be a list of strings"),
            ("tag-item", "tags: [1]\n", "found an integer"),
            (
                "cond",
                "conditions: {a: b}\n",
                "`conditions` must be a list",
            ),
            (
                "desc",
                "description: [x]\n",
                "`description` must be a string",
            ),
            (
                "dmi",
                "disable-model-invocation: 'yes'\n",
                "must be true or false",
            ),
            ("layer", "layer: lazy\n", "use `eager` or `catalog`"),
            ("match", "match: some\n", "use `any` or `all`"),
        ];
        for (dir, extra, _) in &cases {
            simple(root.path(), dir, dir, extra);
        }
        simple(root.path(), "zz-good", "good", "");
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert_eq!(names(&out), ["good"]);
        for (dir, _, problem) in &cases {
            let w = warning_about(&out, dir);
            assert!(w.contains(problem), "{w}");
        }
    }

    #[test]
    fn malformed_yaml_is_skipped_with_warning() {
        let root = TempDir::new().unwrap();
        write_skill(
            root.path(),
            "bad",
            "---\nname: bad\ntags: [unclosed\n---\nbody\n",
        );
        write_skill(
            root.path(),
            "dup",
            "---\nname: dup\nname: dup2\n---\nbody\n",
        );
        write_skill(root.path(), "scalar", "---\njust text\n---\nbody\n");
        simple(root.path(), "good", "good", "");
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert_eq!(names(&out), ["good"]);
        assert!(warning_about(&out, "bad").contains("not valid YAML"));
        assert!(warning_about(&out, "dup").contains("not valid YAML"));
        assert!(warning_about(&out, "scalar").contains("must be a YAML mapping"));
    }

    #[test]
    fn missing_or_unclosed_front_matter_warns() {
        let root = TempDir::new().unwrap();
        write_skill(root.path(), "none", "# Just markdown\nname: none\n");
        write_skill(root.path(), "late", "\n---\nname: late\n---\nbody\n");
        write_skill(root.path(), "open", "---\nname: open\nbody without end\n");
        write_skill(root.path(), "empty", "");
        write_skill(root.path(), "blank-fm", "---\n---\nbody\n");
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert!(out.skills.is_empty());
        assert!(warning_about(&out, "none").contains("first line must be `---`"));
        assert!(warning_about(&out, "late").contains("first line must be `---`"));
        assert!(warning_about(&out, "empty").contains("first line must be `---`"));
        assert!(warning_about(&out, "open").contains("not closed"));
        assert!(warning_about(&out, "blank-fm").contains("no `name`"));
    }

    #[test]
    fn bom_crlf_and_no_trailing_newline_are_tolerated() {
        let root = TempDir::new().unwrap();
        write_skill(
            root.path(),
            "win",
            "\u{feff}---\r\nname: win\r\n---\r\n\r\nBody\r\n",
        );
        write_skill(root.path(), "bare", "---\nname: bare\n---");
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
        let content = |n: &str| {
            out.skills
                .iter()
                .find(|s| s.name == n)
                .unwrap()
                .content
                .clone()
        };
        assert_eq!(content("win"), "Body\r\n");
        assert_eq!(content("bare"), "");
    }

    #[test]
    fn dirs_without_skill_md_and_loose_files_are_silent() {
        let root = TempDir::new().unwrap();
        fs::create_dir(root.path().join("scratch")).unwrap();
        fs::write(root.path().join("README.md"), "not a skill").unwrap();
        simple(root.path(), "real", "real", "");
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert_eq!(names(&out), ["real"]);
        assert!(out.warnings.is_empty());
    }

    #[test]
    fn skill_md_that_is_a_directory_warns() {
        let root = TempDir::new().unwrap();
        fs::create_dir_all(root.path().join("odd").join(SKILL_FILE)).unwrap();
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert!(warning_about(&out, "odd").contains("not a regular file"));
    }

    #[test]
    fn long_description_is_listed_with_warning() {
        let root = TempDir::new().unwrap();
        let long = "é".repeat(DESCRIPTION_SOFT_LIMIT + 1);
        simple(
            root.path(),
            "wordy",
            "wordy",
            &format!("description: {long}\n"),
        );
        simple(
            root.path(),
            "fits",
            "fits",
            &format!("description: {}\n", "é".repeat(DESCRIPTION_SOFT_LIMIT)),
        );
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert_eq!(names(&out), ["fits", "wordy"]);
        let w = warning_about(&out, "wordy");
        assert!(
            w.contains("1025 characters") && w.contains("soft limit"),
            "{w}"
        );
        assert_eq!(out.warnings.len(), 1);
    }

    #[test]
    fn oversized_skill_md_is_skipped_with_warning() {
        let root = TempDir::new().unwrap();
        let body = "x".repeat(MAX_SKILL_FILE_BYTES as usize);
        write_skill(
            root.path(),
            "huge",
            &format!("---\nname: huge\n---\n{body}"),
        );
        simple(root.path(), "small", "small", "");
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert_eq!(names(&out), ["small"]);
        assert!(warning_about(&out, "huge").contains("over the 1048576-byte limit"));
    }

    #[test]
    fn scripts_amplification_is_bounded() {
        let root = TempDir::new().unwrap();
        // ~1 MiB of placeholders would expand far beyond MAX_CONTENT_BYTES.
        let body = SCRIPTS_PLACEHOLDER.repeat(100_000);
        write_skill(
            root.path(),
            "bomb",
            &format!("---\nname: bomb\n---\n{body}"),
        );
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert!(out.skills.is_empty());
        assert!(warning_about(&out, "bomb").contains("substitution"));
    }

    #[test]
    fn skill_dirs_per_root_are_capped() {
        let root = TempDir::new().unwrap();
        for i in 0..MAX_SKILL_DIRS_PER_ROOT {
            fs::create_dir(root.path().join(format!("d{i:04}"))).unwrap();
        }
        simple(root.path(), "d0000", "first", "");
        // Sorts after every d#### dir, so it falls beyond the cap.
        simple(root.path(), "zz", "beyond", "");
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert_eq!(names(&out), ["first"]);
        assert_eq!(out.warnings.len(), 1);
        assert!(out.warnings[0].contains("1001 skill directories"));
    }

    #[test]
    fn warnings_are_capped_with_summary() {
        let mut w = Warnings::default();
        for i in 0..MAX_WARNINGS + 3 {
            w.push(format!("w{i}"));
        }
        let list = w.finish();
        assert_eq!(list.len(), MAX_WARNINGS + 1);
        assert_eq!(list[MAX_WARNINGS], "3 further warnings omitted");
    }

    #[test]
    fn rows_ordered_by_priority_desc_then_name() {
        let root = TempDir::new().unwrap();
        simple(root.path(), "1", "zeta", "priority: 900\n");
        simple(root.path(), "2", "alpha", "priority: 100\n");
        simple(root.path(), "3", "beta", "priority: 900\n");
        simple(root.path(), "4", "gamma", "");
        let out = list_skills(&query(&[root.path()])).unwrap();
        assert_eq!(names(&out), ["beta", "zeta", "gamma", "alpha"]);
    }

    #[test]
    fn nonexistent_root_is_an_error_naming_it() {
        let root = TempDir::new().unwrap();
        let missing = root.path().join("nope");
        // A valid root first: the bad one must still fail the whole request.
        let err = list_skills(&query(&[root.path(), &missing])).unwrap_err();
        assert!(matches!(err, SkillsError::RootNotFound { .. }));
        let msg = err.to_string();
        assert!(msg.contains(&missing.display().to_string()), "{msg}");
        assert!(msg.contains("does not exist"), "{msg}");
    }

    #[test]
    fn file_root_is_an_error() {
        let root = TempDir::new().unwrap();
        let file = root.path().join("file.txt");
        fs::write(&file, "x").unwrap();
        let err = list_skills(&query(&[&file])).unwrap_err();
        assert!(matches!(err, SkillsError::RootNotADirectory { .. }));
        assert!(err.to_string().contains(&file.display().to_string()));
    }

    #[test]
    fn empty_and_too_many_roots_are_errors() {
        let err = list_skills(&SkillsQuery::default()).unwrap_err();
        assert!(matches!(err, SkillsError::NoRoots));
        assert!(err.to_string().contains("roots"));
        let root = TempDir::new().unwrap();
        let many = vec![root.path(); MAX_ROOTS + 1];
        let err = list_skills(&query(&many)).unwrap_err();
        assert!(matches!(err, SkillsError::TooManyRoots { count } if count == MAX_ROOTS + 1));
    }
}
