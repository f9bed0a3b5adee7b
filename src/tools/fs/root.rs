//! Which directory a call's workspace is. A call names it (`tool.invoke` `context.cwd`, the
//! chat's `cwd`); otherwise the config's `workspace_root`; otherwise the process's working
//! directory, but only when that is a plausible project: a desktop app started from a dock
//! runs with `/` (or the user's home) as its working directory, and a workspace there would
//! let the file tools and the sandbox write anywhere. `/` is never a workspace.

use std::path::{Path, PathBuf};

/// How the caller names its workspace, for messages: `context.cwd` or `cwd`.
#[derive(Debug, Clone, Copy)]
pub struct Param(pub &'static str);

/// `tool.invoke`'s `context.cwd`.
pub const CONTEXT_CWD: Param = Param("context.cwd");
/// `agent.chat.stream`'s `cwd`.
pub const CHAT_CWD: Param = Param("cwd");

/// The three ways to name a workspace, as every refusal lists them.
const FIX: &str = "pass context.cwd (tool.invoke) or cwd (agent.chat.stream), or set workspace_root in the config";

#[derive(Debug, thiserror::Error)]
pub enum RootError {
    #[error("{param} must be an absolute path, got {path}")]
    NotAbsolute { param: &'static str, path: PathBuf },
    #[error("{param} {path} is not a directory")]
    NotDirectory { param: &'static str, path: PathBuf },
    #[error(
        "{source_name} is {path}, which is /: the whole filesystem cannot be a workspace; to name a project directory, {FIX}"
    )]
    FilesystemRoot { source_name: String, path: PathBuf },
    #[error(
        "no workspace given ({param} and config workspace_root are unset) and the process's working directory is {dir}, {what}, which is no safe workspace; {FIX}"
    )]
    UnsafeProcessCwd {
        param: &'static str,
        dir: PathBuf,
        what: &'static str,
    },
    #[error("no workspace given and the process's working directory cannot be read ({msg}); {FIX}")]
    NoProcessCwd { msg: String },
}

/// Resolves a call's workspace root: `given` (the call's param), else `configured` (config
/// `workspace_root`), else the process's working directory unless that is `/` or `$HOME`.
/// The result is never `/`.
pub fn resolve(
    given: Option<&Path>,
    param: Param,
    configured: Option<&Path>,
) -> Result<PathBuf, RootError> {
    let Param(param) = param;
    if let Some(dir) = given {
        return checked(dir, param, param);
    }
    if let Some(dir) = configured {
        return checked(dir, "workspace_root", "config workspace_root");
    }
    let cwd =
        std::env::current_dir().map_err(|e| RootError::NoProcessCwd { msg: e.to_string() })?;
    let real = std::fs::canonicalize(&cwd).unwrap_or_else(|_| cwd.clone());
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| std::fs::canonicalize(&h).unwrap_or_else(|_| PathBuf::from(h)));
    let what = if real.parent().is_none() {
        "the filesystem root"
    } else if home.as_deref() == Some(real.as_path()) {
        "the user's home directory"
    } else {
        return Ok(cwd);
    };
    Err(RootError::UnsafeProcessCwd {
        param,
        dir: cwd,
        what,
    })
}

/// An explicitly named root: absolute, a directory, and not `/` (through links too).
fn checked(dir: &Path, param: &'static str, source_name: &str) -> Result<PathBuf, RootError> {
    if !dir.is_absolute() {
        return Err(RootError::NotAbsolute {
            param,
            path: dir.to_path_buf(),
        });
    }
    if !dir.is_dir() {
        return Err(RootError::NotDirectory {
            param,
            path: dir.to_path_buf(),
        });
    }
    if is_filesystem_root(dir) {
        return Err(RootError::FilesystemRoot {
            source_name: source_name.to_string(),
            path: dir.to_path_buf(),
        });
    }
    Ok(dir.to_path_buf())
}

/// Whether `dir` is `/` once `..` and symlinks are resolved.
pub fn is_filesystem_root(dir: &Path) -> bool {
    std::fs::canonicalize(dir).is_ok_and(|c| c.parent().is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_roots_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let ok = resolve(Some(dir.path()), CONTEXT_CWD, None).unwrap();
        assert_eq!(ok, dir.path());
        let e = resolve(Some(Path::new("/")), CONTEXT_CWD, None).unwrap_err();
        assert!(matches!(e, RootError::FilesystemRoot { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("context.cwd") && msg.contains("workspace_root"),
            "{msg}"
        );
        // Through `..` and a link too.
        let up = dir.path().join("../../../../../../../../../../..");
        assert!(resolve(Some(&up), CHAT_CWD, None).is_err());
        std::os::unix::fs::symlink("/", dir.path().join("slash")).unwrap();
        assert!(resolve(Some(&dir.path().join("slash")), CHAT_CWD, None).is_err());
        assert!(matches!(
            resolve(Some(Path::new("rel")), CHAT_CWD, None),
            Err(RootError::NotAbsolute { param: "cwd", .. })
        ));
        assert!(matches!(
            resolve(Some(&dir.path().join("missing")), CHAT_CWD, None),
            Err(RootError::NotDirectory { .. })
        ));
        // The configured root is used when the call names none, and checked the same way.
        assert_eq!(
            resolve(None, CHAT_CWD, Some(dir.path())).unwrap(),
            dir.path()
        );
        let e = resolve(None, CHAT_CWD, Some(Path::new("/"))).unwrap_err();
        assert!(e.to_string().contains("config workspace_root"), "{e}");
        // The call's own root wins over the configured one.
        assert_eq!(
            resolve(Some(dir.path()), CHAT_CWD, Some(Path::new("/"))).unwrap(),
            dir.path()
        );
    }
}
