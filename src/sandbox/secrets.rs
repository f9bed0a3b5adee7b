//! What sandboxed commands and plugin executables must not see: the sidecar's own home
//! (`$OUTRIGGER_HOME`: the store with every workspace's transcripts, plugin manifests with
//! their keys, spill files of other sessions), the credential locations of
//! [`crate::config::keys::BUILTIN_BLOCKED_PATHS`] plus the config's `blocked_paths`, and
//! secret-looking environment variables.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use super::landlock_layer::Resolver;

/// Environment variable name patterns (`*` wildcard, matched case-insensitively) removed
/// from every sandboxed command's and plugin executable's environment, whatever the config
/// says (only `bash_env_allow` lets a name through).
pub const SECRET_ENV_PATTERNS: &[&str] = &[
    "*KEY*",
    "*SECRET*",
    "*TOKEN*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "*AUTH*",
    "*COOKIE*",
    "*SESSION*",
    "OUTRIGGER_*",
];

/// What `bash_env_inherit = "core"` keeps.
pub const CORE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "SHELL", "LANG", "LC_*", "TERM", "TMPDIR", "TZ",
];

/// Variables removed whatever the lists say: they make a non-interactive bash read files.
const ALWAYS_REMOVED: &[&str] = &["BASH_ENV", "ENV"];

/// `bash_env_inherit`: which of the sidecar's variables a command starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EnvInherit {
    /// Everything, minus the secret patterns and `bash_env_deny`.
    #[default]
    All,
    /// Only [`CORE_ENV`] (minus `bash_env_deny`).
    Core,
    /// Nothing.
    None,
}

impl EnvInherit {
    pub const CHOICES: &'static [&'static str] = &["all", "core", "none"];

    pub fn parse(s: &str) -> Option<EnvInherit> {
        match s {
            "all" => Some(EnvInherit::All),
            "core" => Some(EnvInherit::Core),
            "none" => Some(EnvInherit::None),
            _ => None,
        }
    }
}

/// Whether `name` matches a `*`-wildcard pattern, ASCII case-insensitively. Allocates
/// nothing: it runs for every variable against every pattern on each command.
pub fn wildcard(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let mut parts = p.split(|b| *b == b'*');
    let first = parts.next().unwrap_or_default();
    let Some(last) = parts.next_back() else {
        return p.eq_ignore_ascii_case(n);
    };
    if n.len() < first.len() + last.len()
        || !n[..first.len()].eq_ignore_ascii_case(first)
        || !n[n.len() - last.len()..].eq_ignore_ascii_case(last)
    {
        return false;
    }
    let mut rest = &n[first.len()..n.len() - last.len()];
    for mid in parts {
        match find_ignore_case(rest, mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

fn find_ignore_case(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// The environment a command gets from `vars`: an `allow` pattern keeps a name whatever else
/// says (except `BASH_ENV`/`ENV`, always removed); otherwise `inherit` decides what is
/// considered, and the secret patterns and `deny` remove from that. Names that are not UTF-8
/// are matched on their lossy form.
pub fn scrub_env(
    vars: impl Iterator<Item = (OsString, OsString)>,
    inherit: EnvInherit,
    deny: &[String],
    allow: &[String],
) -> Vec<(OsString, OsString)> {
    vars.filter(|(k, _)| {
        let name = k.to_string_lossy();
        if ALWAYS_REMOVED.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
            return false;
        }
        if allow.iter().any(|p| wildcard(p, &name)) {
            return true;
        }
        let considered = match inherit {
            EnvInherit::All => true,
            EnvInherit::Core => CORE_ENV.iter().any(|p| wildcard(p, &name)),
            EnvInherit::None => false,
        };
        considered
            && !SECRET_ENV_PATTERNS.iter().any(|p| wildcard(p, &name))
            && !deny.iter().any(|p| wildcard(p, &name))
    })
    .collect()
}

/// The sidecar's own environment as a command gets it under `settings` (the built-in
/// defaults when there are none).
pub fn command_env(settings: Option<&crate::config::Settings>) -> Vec<(OsString, OsString)> {
    match settings {
        Some(s) => scrubbed(s.bash_env_inherit, &s.bash_env_deny, &s.bash_env_allow),
        None => scrubbed(EnvInherit::All, &[], &[]),
    }
}

/// [`scrub_env`] of our own environment, the last answer kept per setting: our environment
/// does not change while we run (nothing here calls `set_var`), and matching every variable
/// against the patterns was ~0.05 ms of each sandboxed command's setup (perf, issue 13).
fn scrubbed(inherit: EnvInherit, deny: &[String], allow: &[String]) -> Vec<(OsString, OsString)> {
    struct Last {
        inherit: EnvInherit,
        deny: Vec<String>,
        allow: Vec<String>,
        env: Vec<(OsString, OsString)>,
    }
    static LAST: std::sync::Mutex<Option<Last>> = std::sync::Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = last.as_ref()
        && l.inherit == inherit
        && l.deny == deny
        && l.allow == allow
    {
        return l.env.clone();
    }
    let env = scrub_env(std::env::vars_os(), inherit, deny, allow);
    *last = Some(Last {
        inherit,
        deny: deny.to_vec(),
        allow: allow.to_vec(),
        env: env.clone(),
    });
    env
}

/// `$OUTRIGGER_HOME/spill/<stream>`: the current session's spilled tool output, the one
/// part of the home a command may read. `None` for a stream id that is not a single plain
/// path component.
pub fn spill_dir(home: &Path, stream_id: &str) -> Option<PathBuf> {
    let mut parts = Path::new(stream_id).components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(_)), None) => Some(home.join("spill").join(stream_id)),
        _ => None,
    }
}

/// The hidden list for a command in `workspace`: each entry made absolute (relative entries
/// are relative to the workspace, like the file tools' `blocked_paths`), and a hidden
/// directory that contains the workspace replaced by its entries that do not (recursively),
/// so a workspace kept under `$OUTRIGGER_HOME` still works while its siblings stay hidden.
///
/// The last answer is kept with what it depended on (see [`Resolver::depends_on`]): a command
/// in the same workspace with the same list re-checks those paths with one `lstat` each
/// instead of resolving ~35 paths again (~0.2 ms of the sidecar's CPU per sandboxed command).
pub fn hidden_for(workspace: &Path, hidden: &[PathBuf]) -> Vec<PathBuf> {
    static LAST: std::sync::Mutex<Option<Answer>> = std::sync::Mutex::new(None);
    {
        let last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = last.as_ref()
            && a.asked(workspace, hidden)
            && Resolver::unchanged(&a.looked)
        {
            return a.out.clone();
        }
    }
    let mut resolver = Resolver::default();
    let ws = resolver.canonical(workspace);
    let mut out: Vec<PathBuf> = Vec::new();
    let mut carved = false;
    for h in hidden {
        let abs = if h.is_absolute() {
            h.clone()
        } else {
            workspace.join(h)
        };
        let c = resolver.canonical(&abs);
        if ws.starts_with(&c) && ws != c {
            // Depends on a listing: not kept.
            carved = true;
            carve(&c, &ws, &mut out);
        } else {
            out.push(c);
        }
    }
    out.sort();
    out.dedup();
    let looked = resolver.depends_on().filter(|_| !carved);
    *LAST.lock().unwrap_or_else(|e| e.into_inner()) = looked.map(|looked| Answer {
        workspace: workspace.to_path_buf(),
        hidden: hidden.to_vec(),
        looked,
        out: out.clone(),
    });
    out
}

/// [`hidden_for`]'s last answer and what it depended on.
struct Answer {
    workspace: PathBuf,
    hidden: Vec<PathBuf>,
    looked: Vec<(PathBuf, bool)>,
    out: Vec<PathBuf>,
}

impl Answer {
    /// Asked for the same workspace and list (byte for byte).
    fn asked(&self, workspace: &Path, hidden: &[PathBuf]) -> bool {
        self.workspace.as_os_str() == workspace.as_os_str()
            && self.hidden.len() == hidden.len()
            && self
                .hidden
                .iter()
                .zip(hidden)
                .all(|(a, b)| a.as_os_str() == b.as_os_str())
    }
}

/// Pushes the entries of `dir` (recursively along the way to `keep`) except those leading
/// to `keep`.
fn carve(dir: &Path, keep: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p == keep {
            continue;
        }
        if keep.starts_with(&p) {
            carve(&p, keep, out);
        } else {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: Vec<(OsString, OsString)>) -> Vec<String> {
        v.into_iter()
            .map(|(k, _)| k.into_string().unwrap())
            .collect()
    }

    fn vars(list: &[&str]) -> Vec<(OsString, OsString)> {
        list.iter()
            .map(|k| (OsString::from(k), OsString::from("v")))
            .collect()
    }

    #[test]
    fn secret_names_go_in_any_case() {
        let v = vars(&[
            "PATH",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "openai_api_key",
            "GITHUB_TOKEN",
            "SSH_AUTH_SOCK",
            "my_Session_id",
            "npm_config_cookie",
            "DB_PASSWD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "OUTRIGGER_HOME",
            "outrigger_debug_methods",
            "BASH_ENV",
            "LANG",
            "EDITOR",
        ]);
        let kept = names(scrub_env(v.into_iter(), EnvInherit::All, &[], &[]));
        assert_eq!(kept, ["PATH", "LANG", "EDITOR"]);
    }

    #[test]
    fn inherit_levels_deny_and_allow() {
        let v = vars(&[
            "PATH",
            "HOME",
            "LC_ALL",
            "TZ",
            "EDITOR",
            "MY_API_KEY",
            "CUSTOM",
            "bash_env",
        ]);
        let core = names(scrub_env(v.clone().into_iter(), EnvInherit::Core, &[], &[]));
        assert_eq!(core, ["PATH", "HOME", "LC_ALL", "TZ"]);
        let none = names(scrub_env(
            v.clone().into_iter(),
            EnvInherit::None,
            &[],
            &["custom".into()],
        ));
        assert_eq!(none, ["CUSTOM"]);
        let all = names(scrub_env(
            v.into_iter(),
            EnvInherit::All,
            &["EDIT*".into()],
            &["my_api_*".into(), "BASH_ENV".into()],
        ));
        assert_eq!(
            all,
            ["PATH", "HOME", "LC_ALL", "TZ", "MY_API_KEY", "CUSTOM"]
        );
    }

    #[test]
    fn wildcards() {
        assert!(wildcard("*_TOKEN", "gh_token"));
        assert!(!wildcard("*_TOKEN", "TOKENS"));
        assert!(wildcard("A*B*C", "AxxBxxC"));
        assert!(!wildcard("A*B*C", "AC"));
        assert!(wildcard("EXACT", "exact"));
        assert!(wildcard("*KEY*", "KEY"));
        assert!(wildcard("*", ""));
        assert!(wildcard("a**b", "AB"));
        assert!(!wildcard("AB*BA", "ABA"));
        assert!(wildcard("*_aws_*", "MY_AWS_X"));
        assert!(!wildcard("*_AWS_*", "MY_AWSX"));
        assert!(wildcard("", ""));
        assert!(!wildcard("", "X"));
    }

    #[test]
    fn spill_dirs_are_one_component() {
        let h = Path::new("/h");
        assert_eq!(spill_dir(h, "s1"), Some(PathBuf::from("/h/spill/s1")));
        assert_eq!(spill_dir(h, "../x"), None);
        assert_eq!(spill_dir(h, "a/b"), None);
        assert_eq!(spill_dir(h, ""), None);
        assert_eq!(spill_dir(h, "/abs"), None);
    }

    #[test]
    fn our_scrubbed_environment_follows_each_setting() {
        let path = |env: &[(OsString, OsString)]| env.iter().any(|(k, _)| k == "PATH");
        assert!(
            std::env::var_os("PATH").is_some(),
            "the test runs with a PATH"
        );
        let all = scrubbed(EnvInherit::All, &[], &[]);
        assert_eq!(
            all,
            scrub_env(std::env::vars_os(), EnvInherit::All, &[], &[])
        );
        assert!(path(&all));
        // Each changed setting is answered afresh, not from the last answer.
        assert!(!path(&scrubbed(EnvInherit::All, &["PATH".into()], &[])));
        assert!(path(&scrubbed(EnvInherit::All, &["NOPE".into()], &[])));
        assert!(scrubbed(EnvInherit::None, &[], &[]).is_empty());
        assert_eq!(
            names(scrubbed(EnvInherit::None, &[], &["PATH".into()])),
            vec!["PATH"]
        );
        assert_eq!(scrubbed(EnvInherit::All, &[], &[]), all);
    }

    #[test]
    fn the_last_answer_is_kept_only_while_every_path_it_looked_at_is_as_it_was() {
        let d = tempfile::tempdir().unwrap();
        let root = super::super::landlock_layer::canonical(d.path());
        let ws = root.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let hidden = [
            root.join("home/.ssh"),
            root.join("home/.config/gh/hosts.yml"),
            PathBuf::from("rel"),
        ];
        let first = hidden_for(&ws, &hidden);
        assert_eq!(
            first,
            vec![
                root.join("home/.config/gh/hosts.yml"),
                root.join("home/.ssh"),
                ws.join("rel"),
            ]
        );
        assert_eq!(hidden_for(&ws, &hidden), first, "asked again");
        // `home` appears as a link: the answers follow it (a kept answer would not).
        std::fs::create_dir_all(root.join("real/.config")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("home")).unwrap();
        let linked = vec![
            root.join("real/.config/gh/hosts.yml"),
            root.join("real/.ssh"),
            ws.join("rel"),
        ];
        assert_eq!(hidden_for(&ws, &hidden), linked);
        assert_eq!(hidden_for(&ws, &hidden), linked, "asked again");
        // The link moves elsewhere; then a directory replaces it; then `rel` becomes a link.
        std::fs::remove_file(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("other")).unwrap();
        std::os::unix::fs::symlink(root.join("other"), root.join("home")).unwrap();
        assert_eq!(hidden_for(&ws, &hidden)[1], root.join("other/.ssh"));
        std::fs::remove_file(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("home/.config")).unwrap();
        assert_eq!(hidden_for(&ws, &hidden), first);
        assert_eq!(hidden_for(&ws, &hidden), first, "asked again");
        std::os::unix::fs::symlink(root.join("real"), ws.join("rel")).unwrap();
        assert_eq!(hidden_for(&ws, &hidden)[2], root.join("real"));
        // Another list or workspace is not answered from the last one.
        assert_eq!(
            hidden_for(&root, &hidden)[2],
            root.join("rel"),
            "another workspace"
        );
        assert_eq!(hidden_for(&ws, &hidden[..1]), vec![root.join("home/.ssh")]);
    }

    #[test]
    fn a_hidden_dir_holding_the_workspace_is_carved_around_it() {
        let d = tempfile::tempdir().unwrap();
        let home = super::super::landlock_layer::canonical(d.path());
        std::fs::create_dir_all(home.join("work/ws")).unwrap();
        std::fs::create_dir_all(home.join("work/other")).unwrap();
        std::fs::write(home.join("outrigger.db"), "").unwrap();
        let got = hidden_for(
            &home.join("work/ws"),
            &[home.clone(), PathBuf::from("rel"), PathBuf::from("/x/y")],
        );
        assert_eq!(
            got,
            vec![
                home.join("outrigger.db"),
                home.join("work/other"),
                home.join("work/ws/rel"),
                PathBuf::from("/x/y"),
            ]
        );
    }
}
