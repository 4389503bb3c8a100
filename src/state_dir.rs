//! The user's state folder, where a team workspace goes when the place beside its output
//! lies where teammates write (DESIGN §6b, issue 49): `$XDG_STATE_HOME/teammate-runner/`, or
//! `~/.local/state/teammate-runner/` (the XDG base directory default; Codex and Claude Code
//! keep their state under the home folder the same way).
//!
//! A workspace there is named after the place it stands for — its *origin*, the
//! `<output stem>.runner` folder or the store's `teams/<team>` a run would have used — so
//! every command finds it again from the same arguments as before: the origin's real path
//! hashed ([`crate::hash::Fnv`]) into `teams/<name>-<16 hex digits>/`. The workspace records
//! its origin in a file of its own ([`ORIGIN`]) for listings (`status --list`, `clean`).
//! Reads and path arithmetic only, but [`record_origin`].

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The file in a workspace kept in the state folder that names its origin (one line: the
/// absolute path of the folder it stands for).
pub(crate) const ORIGIN: &str = "origin";

/// `$XDG_STATE_HOME/teammate-runner` when that variable is an absolute path (the XDG rule:
/// a relative one is ignored), else `$HOME/.local/state/teammate-runner`; `None` without
/// either.
pub(crate) fn root() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".local/state"))
        })?;
    Some(state.join("teammate-runner"))
}

/// Where the workspace that stands for `origin` lies in the state folder:
/// `<root>/teams/<origin's name without .runner>-<FNV of its real path, 16 hex digits>`
/// (`/p/workers-output.runner` → `teams/workers-output-1f0c…`). `None` without a state
/// folder ([`root`]).
pub(crate) fn for_origin(origin: &Path) -> Option<PathBuf> {
    Some(beneath(&root()?, origin))
}

/// [`for_origin`] in the state folder `root`.
fn beneath(root: &Path, origin: &Path) -> PathBuf {
    let real = crate::fsutil::real_path(origin);
    let name = real
        .file_name()
        .map_or("team".into(), |n| n.to_string_lossy().into_owned());
    let name = name.strip_suffix(".runner").unwrap_or(&name);
    let key = crate::hash::fnv(real.as_os_str().as_encoded_bytes());
    root.join("teams").join(format!("{name}-{key:016x}"))
}

/// Whether `dir` holds a team workspace (a run took its lock, wrote its snapshot or its
/// journal there).
pub(crate) fn is_workspace(dir: &Path) -> bool {
    ["team.json", "lock", "journal.jsonl"]
        .iter()
        .any(|f| dir.join(f).is_file())
}

/// The workspace that stands for `origin` as it is on disk now: `origin` itself when a run
/// left one there (an earlier version, or a layout that did not need moving), else its
/// place in the state folder when a run left one there; `None` when neither holds one.
pub(crate) fn existing(origin: &Path) -> Option<PathBuf> {
    if is_workspace(origin) {
        return Some(origin.to_owned());
    }
    for_origin(origin).filter(|p| is_workspace(p))
}

/// Record in workspace `ws` (in the state folder) the origin it stands for; done once, as
/// the run opens the workspace.
///
/// Errors: the file cannot be written.
pub(crate) fn record_origin(ws: &Path, origin: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = ws.join(ORIGIN);
    // The path's own bytes: a folder's name need not be UTF-8.
    let mut text = crate::fsutil::real_path(origin)
        .as_os_str()
        .as_bytes()
        .to_vec();
    text.push(b'\n');
    if std::fs::read(&path).is_ok_and(|t| t == text) {
        return Ok(());
    }
    std::fs::write(&path, text).map_err(|e| Error::io("write", &path, e))
}

/// The origin workspace `ws` stands for: the one its [`ORIGIN`] file names, else `ws`
/// itself (a workspace beside its output is its own origin).
pub(crate) fn origin_of(ws: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    std::fs::read(ws.join(ORIGIN))
        .ok()
        .map(|t| {
            let line = t.strip_suffix(b"\n").unwrap_or(&t);
            PathBuf::from(std::ffi::OsStr::from_bytes(line))
        })
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| ws.to_owned())
}

/// Every workspace in the state folder with the origin it records, in name order.
pub(crate) fn workspaces() -> Vec<(PathBuf, PathBuf)> {
    let Some(teams) = root().map(|r| r.join("teams")) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, PathBuf)> = std::fs::read_dir(&teams)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| is_workspace(p) && p.join(ORIGIN).is_file())
        .map(|p| {
            let origin = origin_of(&p);
            (p, origin)
        })
        .collect();
    out.sort();
    out
}

/// The workspaces in the state folder whose origin lies beneath one of `dirs` (real paths
/// compared), for listings of the teams "here".
pub(crate) fn workspaces_beneath(dirs: &[&Path]) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> = dirs.iter().map(|d| crate::fsutil::real_path(d)).collect();
    workspaces()
        .into_iter()
        .filter(|(_, origin)| dirs.iter().any(|d| origin.starts_with(d)))
        .map(|(ws, _)| ws)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_in_the_state_folder_is_named_after_its_origin_and_records_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("state");
        let origin = dir.path().join("proj/workers-output.runner");
        let a = beneath(&root, &origin);
        assert!(a.starts_with(root.join("teams")), "{}", a.display());
        assert!(
            a.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("workers-output-")),
            "{}",
            a.display()
        );
        assert_eq!(beneath(&root, &origin), a, "the same every time");
        assert_ne!(
            beneath(&root, &dir.path().join("other/workers-output.runner")),
            a,
            "another output's team has another workspace"
        );
        assert!(!is_workspace(&a));
        std::fs::create_dir_all(&a).expect("mkdir");
        std::fs::write(a.join("lock"), "").expect("write");
        assert!(is_workspace(&a));
        assert_eq!(origin_of(&a), a, "no origin recorded: its own");
        record_origin(&a, &origin).expect("recorded");
        assert_eq!(origin_of(&a), crate::fsutil::real_path(&origin));
    }
}
