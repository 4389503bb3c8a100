//! Where a run's team workspace goes, by what its teammates may write (DESIGN §6b, §10):
//! the folders every teammate may write under the sandbox ([`teammate_roots`]), the place of
//! the workspace that keeps it out of them ([`place_workspace`]), and what a folder named by
//! `--workspace` must be ([`check_workspace_folder`]). The plan judges a layout with these
//! (`Plan::layout_conflict`, `Plan::definition_guard`).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::settings::Settings;

/// A folder every teammate may write under the sandbox besides its own.
pub(crate) struct Root {
    /// The folder.
    pub path: PathBuf,
    /// What it is, for messages.
    pub what: String,
    /// The `[sandbox] writes` entry it was expanded from; `None` for the working directory
    /// and the shared device folders.
    pub entry: Option<String>,
}

/// The folders every teammate may write under `--sandbox landlock` besides its own: the
/// run's working directory without isolation, the device folders the sandbox grants
/// (`/dev/shm`, `/dev/pts`: shared by every teammate), and the paths its runner definition
/// declares (expanded with the runner's environment; the attempt's own variables are
/// checked as each attempt starts, `unit::writable`). None for a runner that starts no
/// process (the HTTP backend).
pub(crate) fn teammate_roots(settings: &Settings, cwd: &Path) -> Vec<Root> {
    if settings.runner.answers_only() {
        return Vec::new();
    }
    let lookup = |name: &str| std::env::var_os(name);
    let mut roots = Vec::new();
    if !settings.isolate {
        roots.push(Root {
            path: cwd.to_owned(),
            what: "the working directory every teammate writes".into(),
            entry: None,
        });
    }
    let pty = if settings.runner.sandbox.pty {
        crate::sandbox::PTY_DEVICES
    } else {
        &[]
    };
    roots.extend(
        crate::sandbox::DEVICES
            .iter()
            .chain(pty)
            .map(Path::new)
            .filter(|d| d.is_dir())
            .map(|d| Root {
                path: d.to_owned(),
                what: "a device folder every teammate writes".into(),
                entry: None,
            }),
    );
    roots.extend(settings.runner.sandbox.writes.iter().filter_map(|w| {
        Some(Root {
            path: crate::sandbox::expand_write(w, &lookup)?,
            what: format!("`{w}` of the runner definition's [sandbox] writes"),
            entry: Some(w.clone()),
        })
    }));
    roots
}

/// A folder `--workspace` names must be a team workspace already, or new, or empty: the
/// runner makes it private and `runner clean` removes it whole, so a folder of the user's
/// (their files beside the team's) is refused.
///
/// Errors: it is a file, or a non-empty folder that holds no team workspace (exit 2).
pub(crate) fn check_workspace_folder(dir: &Path) -> Result<()> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(_) => return Ok(()),
    };
    let refuse = |what: &str| {
        Err(Error::Usage(format!(
            "{}: --workspace must name a new or empty folder, or a team workspace; this is {what}, and the runner would make it private and `runner clean` would remove it whole; give another folder",
            dir.display()
        )))
    };
    if !meta.is_dir() {
        return refuse("not a folder");
    }
    if crate::state_dir::is_workspace(dir) {
        return Ok(());
    }
    match std::fs::read_dir(dir).map(|mut d| d.next().is_none()) {
        Ok(true) => Ok(()),
        _ => refuse("a folder with other files in it"),
    }
}

/// Whether a path holds or lies in a folder teammates may write ([`teammate_roots`], real
/// paths compared): a workspace there is not out of their reach.
pub(crate) fn written_by_teammates(settings: &Settings, cwd: &Path) -> impl Fn(&Path) -> bool {
    let roots: Vec<PathBuf> = teammate_roots(settings, cwd)
        .iter()
        .map(|r| crate::fsutil::real_path(&r.path))
        .collect();
    move |p: &Path| {
        let p = crate::fsutil::real_path(p);
        roots.iter().any(|r| p.starts_with(r) || r.starts_with(&p))
    }
}

/// Where the team workspace standing for `origin` (`<output stem>.runner` beside a CSV
/// batch's output, `<store>/teams/<team>`) goes, DESIGN §6b: the folder `--workspace` names;
/// else where a run of this batch left one ([`crate::state_dir::existing`]: beside its
/// output, as earlier versions did, or in the state folder); else `origin` when no teammate
/// writes there ([`teammate_roots`]); else its place in the user's state folder when no
/// teammate writes that ([`crate::state_dir::for_origin`]); else `origin` (the sandbox then
/// falls back or refuses, saying why). Reads only; the same for the same arguments, so every
/// command finds the team again.
pub(crate) fn place_workspace(origin: &Path, settings: &Settings, cwd: &Path) -> PathBuf {
    if let Some(dir) = &settings.workspace {
        return dir.clone();
    }
    if let Some(ws) = crate::state_dir::existing(origin) {
        return ws;
    }
    let written = written_by_teammates(settings, cwd);
    if !written(origin) {
        return origin.to_owned();
    }
    match crate::state_dir::for_origin(origin) {
        Some(state) if !written(&state) => state,
        _ => origin.to_owned(),
    }
}
