//! Making an attempt ready for a backend: the teammate folder (an earlier attempt's report
//! moved aside, the working-context skeleton), the prompt file, the argv and environment
//! from the runner definition, the state folders, and with isolation the worktree and its
//! one-time set-up command; under `--sandbox landlock`, what the attempt may write
//! ([`writable`]).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;

use crate::agent::definition::{AttemptArgs, Invocation};
use crate::item::WorkItem;
use crate::run::RunSpec;
use crate::run::isolation::worktree::Worktree;
use crate::run::record::folder::TeammateFolder;
use crate::run::supervise::process::Cancel;

use super::attempt::AttemptLogs;
use super::helpers::{HelperFailure, run_setup};

/// An attempt made ready for a backend by [`prepare`].
pub(super) struct Prepared {
    /// The rendered prompt.
    pub(super) prompt: Arc<str>,
    /// `<teammate dir>/prompt.md`.
    pub(super) prompt_file: PathBuf,
    /// `prompt_file` is written: the invocation names it.
    pub(super) prompt_file_written: bool,
    /// Where the teammate writes its report (`RUNNER_REPORT`).
    pub(super) report_path: PathBuf,
    /// The argv and environment changes of the runner definition, for this attempt.
    pub(super) invocation: Invocation,
    /// The teammate's worktree, with isolation.
    pub(super) worktree: Option<Worktree>,
    /// The working directory: the worktree, else the run's.
    pub(super) cwd: PathBuf,
    /// The variables the attempt's processes get (values as raw bytes).
    pub(super) env: Vec<(String, OsString)>,
    /// With `--sandbox landlock`: what the attempt may write ([`writable`]).
    pub(super) sandbox: Option<Vec<PathBuf>>,
    /// The teammate folder was made for this attempt: nothing of an earlier attempt or run
    /// (logs, progress) can be in it, so none is looked for.
    pub(super) new_folder: bool,
}

/// Whether the agents of `spec` start inside a git work tree: always with `--isolate
/// worktree`, else when the run's working directory is in one (a `.git` above it).
pub(crate) fn agent_in_git_work_tree(spec: &RunSpec) -> bool {
    spec.isolation.is_some()
        || *spec
            .cwd_in_git
            .get_or_init(|| crate::store::git_root(&spec.cwd).is_some())
}

/// Prepare an attempt: the teammate folder ([`fresh_folder`]), the prompt file, the argv and
/// environment from the runner definition ([`environment`]), the state folders, and with
/// isolation the worktree and its one-time set-up command.
///
/// Errors: why the attempt cannot start, with the set-up command's log when that failed.
pub(super) async fn prepare(
    spec: &RunSpec,
    item: &WorkItem,
    logs: &AttemptLogs<'_>,
    new_item: bool,
    prompt: crate::error::Result<String>,
    cancel: watch::Receiver<Cancel>,
) -> Result<Prepared, HelperFailure> {
    let (dir, attempt) = (logs.dir, logs.attempt);
    let folder = spec.teammate(&item.teammate);
    let work = folder.work();
    let report_path = folder.report();
    let new_folder = fresh_folder(spec, item, &folder, logs)?;
    let prompt: Arc<str> = prompt
        .map_err(|e| HelperFailure::before(format!("cannot render the prompt: {e}")))?
        .into();
    let prompt_file = folder.prompt();
    let args = AttemptArgs {
        prompt_file: &prompt_file,
        report: &report_path,
        workspace: &work,
        prompt: &prompt,
        model: spec.settings_for(item).model.as_deref(),
        agent_args: &spec.settings_for(item).agent_args,
        command: &spec.settings_for(item).command,
        vars: &spec.settings_for(item).vars,
        in_git_work_tree: agent_in_git_work_tree(spec),
    };
    // The item's own runner: a stage's, a row's, a `--best-of` candidate's.
    let invocation = spec
        .settings_for(item)
        .runner
        .invocation(&args)
        .map_err(|e| HelperFailure::before(e.to_string()))?;
    // The file is written before the attempt only for an agent that reads it by its name; a
    // prompt on stdin or in an argument is handed over from memory.
    let prompt_file_written = invocation.names(&prompt_file);
    if !prompt_file_written && attempt > 1 {
        // An earlier attempt's prompt must not pass for this one's while it is held.
        let _ = std::fs::remove_file(&prompt_file);
    }
    if prompt_file_written {
        crate::fsutil::write_private_file(&prompt_file, prompt.as_bytes()).map_err(|e| {
            HelperFailure::before(format!("cannot write {}: {e}", prompt_file.display()))
        })?;
    }
    let worktree = match &spec.isolation {
        None => None,
        Some(iso) => {
            let path = spec.workspace.join("worktrees").join(&item.teammate);
            // An item of a `--serialize-overlaps` chain starts from the merge of the one
            // before it (which finished before it started).
            let from = spec.runs_after(&item.id).and_then(|_| iso.target_head());
            Some(
                iso.prepare(&item.teammate, &path, new_item, from.as_deref())
                    .await
                    .map_err(|e| HelperFailure::before(e.to_string()))?,
            )
        }
    };
    let cwd = worktree
        .as_ref()
        .map_or_else(|| spec.cwd.clone(), |w| w.path.clone());
    let env = environment(spec, item, &folder, logs, worktree.as_ref(), &invocation)?;
    if let (Some(wt), Some(iso)) = (&worktree, &spec.isolation)
        && let Some(setup) = &iso.setup
        && !dir.join(".worktree-setup-done").exists()
    {
        run_setup(spec, item, setup, &wt.path, logs, &env, cancel).await?;
        iso.record_setup(wt)
            .await
            .map_err(|e| HelperFailure::before(format!("after worktree setup: {e}")))?;
        let _ = std::fs::write(dir.join(".worktree-setup-done"), b"");
    }
    let sandbox = (spec.settings.sandbox == crate::sandbox::Mode::Landlock)
        .then(|| writable(spec, item, &cwd, &work, &env));
    Ok(Prepared {
        prompt,
        prompt_file,
        prompt_file_written,
        report_path,
        invocation,
        worktree,
        cwd,
        env,
        sandbox,
        new_folder,
    })
}

/// Make the teammate folder ready for attempt `logs.attempt`: the runner's part and the
/// teammate's `work/` (both private), a report an earlier attempt left moved aside, and the
/// working-context skeleton written when there is no such file yet. Returns whether both
/// folders were made now (then they held nothing before).
///
/// Errors: a folder or the skeleton cannot be written.
fn fresh_folder(
    spec: &RunSpec,
    item: &WorkItem,
    folder: &TeammateFolder,
    logs: &AttemptLogs<'_>,
) -> Result<bool, HelperFailure> {
    let (dir, attempt) = (logs.dir, logs.attempt);
    let work = folder.work();
    let report_path = folder.report();
    // The runner's part, then the teammate's: both private (0700).
    let mut new_folder = true;
    for d in [dir, work.as_path()] {
        new_folder &= crate::fsutil::create_private_dir(d)
            .map_err(|e| HelperFailure::before(e.to_string()))?;
    }
    // Before anything starts: the attempt's number is taken even if the run is killed before
    // the journal hears of it ([`crate::run::record::folder::started_attempts`]).
    let marker = logs.path(crate::run::record::folder::STARTED);
    crate::fsutil::write_private_file(&marker, item.id.as_bytes())
        .map_err(|e| HelperFailure::before(format!("cannot write {}: {e}", marker.display())))?;
    // A report left by an earlier attempt must never count for this one: it is kept, out of
    // the teammate's reach, beside that attempt's logs. A new folder holds none.
    if !new_folder && report_path.exists() {
        let earlier = AttemptLogs {
            dir,
            attempt: attempt.saturating_sub(1).max(1),
        };
        let _ = std::fs::rename(&report_path, earlier.path("report.json"));
        let _ = std::fs::remove_file(&report_path);
    }
    // The working context's structure is in the file, not the prompt (which only points
    // at it); an earlier attempt's or the teammate's own file is kept. An agent that only
    // answers keeps none.
    if !spec.settings_for(item).runner.answers_only() {
        crate::working_context::seed(&work, &item.teammate).map_err(|e| {
            HelperFailure::before(format!(
                "cannot write {}: {e}",
                folder.working_context().display()
            ))
        })?;
    }
    Ok(new_folder)
}

/// The environment of an attempt's processes: the `RUNNER_*` variables, a private `TMPDIR`,
/// the definition's `env.set`, its state folders (created), its `[env] files` (written
/// into the runner's part of the folder, new each attempt) and its `[env.home]` (made there,
/// new each attempt).
///
/// Errors: a state folder or an env file cannot be written.
fn environment(
    spec: &RunSpec,
    item: &WorkItem,
    folder: &TeammateFolder,
    logs: &AttemptLogs<'_>,
    worktree: Option<&Worktree>,
    invocation: &Invocation,
) -> Result<Vec<(String, OsString)>, HelperFailure> {
    let (dir, attempt) = (logs.dir, logs.attempt);
    let work = folder.work();
    // Paths go to the child as their raw bytes (a folder name need not be UTF-8).
    let var = |k: &str, v: &dyn AsRef<OsStr>| (k.to_string(), v.as_ref().to_owned());
    let mut env = vec![
        var("RUNNER_REPORT", &folder.report()),
        var("RUNNER_ITEM_ID", &item.id),
        var("RUNNER_TEAM", &spec.team),
        var("RUNNER_TEAMMATE", &item.teammate),
        var(
            "RUNNER_CHECKPOINT",
            &item.checkpoint.clone().unwrap_or_default(),
        ),
        var("RUNNER_WORKSPACE", &spec.workspace),
        var("RUNNER_TEAMMATE_DIR", &work),
        var("RUNNER_PROGRESS", &folder.progress()),
        var("RUNNER_ATTEMPT", &attempt.to_string()),
    ];
    // A stage of a row's chain (BATCH.md `stages:`) is told which.
    if let Some(stage) = &item.stage {
        env.push(var("RUNNER_STAGE", &stage.name));
        env.push(var("RUNNER_ROW_ID", &stage.row));
    }
    // A `--best-of` candidate is told its number (the same task goes to its siblings).
    if let Some(k) = item.candidate {
        env.push(var("RUNNER_CANDIDATE", &k.to_string()));
    }
    if let Some(wt) = worktree {
        env.push(var("RUNNER_WORKTREE", &wt.path));
    }
    // A private TMPDIR (0700): CLIs leave whole conversations in temporary files (Gemini's
    // error dumps), which no other user may read, and teammates never share one. It is the
    // teammate's `work/` folder itself: no folder of its own per attempt.
    env.push(var("TMPDIR", &work));
    env.extend(invocation.env_set.iter().map(|(k, v)| var(k, v)));
    for name in &invocation.state_dirs {
        let state = work.join("state").join(name.to_lowercase());
        crate::fsutil::create_private_dir(&state)
            .map_err(|e| HelperFailure::before(e.to_string()))?;
        env.push(var(name, &state));
    }
    for (name, text) in &invocation.env_files {
        // A new private file every attempt, never through a link an earlier attempt left.
        let path = dir.join(format!("{}.env-file", name.to_lowercase()));
        crate::fsutil::write_private_file(&path, text.as_bytes()).map_err(|e| {
            HelperFailure::before(format!(
                "cannot write {} (`[env] files`): {e}",
                path.display()
            ))
        })?;
        env.push(var(name, &path));
    }
    if let Some(home) = &invocation.env_home {
        // The user's own home for the CLI: the variable's value when they set it, else HOME.
        let theirs = std::env::var_os(&home.var)
            .or_else(|| std::env::var_os("HOME"))
            .map(std::path::PathBuf::from)
            .unwrap_or_default();
        let at = super::home::path_in(&work, home);
        if let Some(said) = super::home::make(home, &at, &theirs).map_err(HelperFailure::before)? {
            warn_once(&said);
        }
        env.push(var(&home.var, &at));
    }
    Ok(env)
}

/// Say `what` once per run (every attempt would find it the same).
fn warn_once(what: &str) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.iter().any(|s| s == what) {
        said.push(what.to_owned());
        tracing::warn!("{what}");
    }
}

/// What an attempt may write under `--sandbox landlock`: its working directory, its own
/// teammate folder (with its TMPDIR and state folders), and the paths its runner definition
/// declares, expanded with the attempt's environment (its own variables first). A declared
/// folder (an entry ending in `/`) is created when missing; other missing paths are skipped.
/// A declared path that holds the team workspace or lies in it — but in the attempt's own
/// folder or worktree — is dropped with a warning, whatever it was written as
/// (`{env.RUNNER_WORKSPACE}`, `{env.TMPDIR}/../..`): it would let the teammate rewrite the
/// journal or a sibling's report.
pub(crate) fn writable(
    spec: &RunSpec,
    item: &WorkItem,
    cwd: &Path,
    dir: &Path,
    env: &[(String, OsString)],
) -> Vec<PathBuf> {
    let lookup = |name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var_os(name))
    };
    let mut paths = vec![cwd.to_owned(), dir.to_owned()];
    let settings = spec.settings_for(item);
    if settings.runner.sandbox.pty {
        paths.extend(crate::sandbox::PTY_DEVICES.iter().map(PathBuf::from));
    }
    let declared = &settings.runner.sandbox.writes;
    if declared.is_empty() {
        // Nothing declared to check against the workspace: no real paths to look up (a
        // dozen system calls per attempt).
        return paths;
    }
    let workspace = crate::fsutil::real_path(&spec.workspace);
    let own: Vec<PathBuf> = [dir, cwd]
        .iter()
        .map(|p| crate::fsutil::real_path(p))
        .filter(|p| p.starts_with(&workspace))
        .collect();
    let apart = |path: &Path| {
        let real = crate::fsutil::real_path(path);
        let overlaps = real.starts_with(&workspace) || workspace.starts_with(&real);
        let ok = !overlaps || own.iter().any(|o| real.starts_with(o));
        if !ok {
            tracing::warn!(
                "{}: a `[sandbox] writes` entry of the runner definition reaches into the team workspace {}; not granted",
                path.display(),
                spec.workspace.display()
            );
        }
        ok
    };
    paths.extend(declared.iter().filter_map(|w| {
        let path = crate::sandbox::expand_write(w, &lookup)?;
        if !apart(&path) {
            return None;
        }
        if crate::sandbox::is_folder(w) && !path.exists() {
            // The CLI would have made it on its first start; made here because the
            // teammate may not write its parent. A failure leaves it skipped.
            if let Err(e) = std::fs::create_dir_all(&path) {
                tracing::debug!("{}: {e}", path.display());
            }
        }
        path.exists().then_some(path)
    }));
    paths
}
