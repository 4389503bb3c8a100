//! Finding a team workspace from what a user names (`runner status`, `show`, `logs`): the
//! folder itself, its `team.json`, the batch's output CSV or team name, or a `todo-N.md` —
//! or, once every item completed and the workspace was removed, the team's archive. Also the
//! teams `runner clean` acts on: the one named (a workspace, a store team, a CSV team's name
//! or output, or a team whose workspace is gone but whose branches are left), or every team
//! here. Reads only.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::fsutil::real_path;
use crate::run::events::Event;
use crate::run::isolation::leftovers;
use crate::run::record::history::{self, History};
use crate::run::record::team::Snapshot;
use crate::run::record::{archive, journal};
use crate::state_dir::is_workspace;
use crate::store::Store;

/// A team as a command finds it: its live workspace, or the archive left when every item
/// completed and the workspace was removed ([`crate::run::record::archive`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Found {
    /// A workspace folder holding `team.json`.
    Workspace(PathBuf),
    /// An archive file (`todo-N.archive.jsonl`).
    Archive(PathBuf),
}

impl Found {
    /// The folder or file.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Found::Workspace(p) | Found::Archive(p) => p,
        }
    }

    /// The team's state: its `team.json`, or its archive's [`archive::Archive::snapshot`].
    ///
    /// Errors: the file cannot be read or is not a snapshot or archive (exit 2, naming file
    /// and line).
    pub(crate) fn snapshot(&self) -> Result<Snapshot> {
        match self {
            Found::Archive(p) => Ok(archive::read(p)?.snapshot()),
            Found::Workspace(dir) => {
                let p = dir.join("team.json");
                let text =
                    std::fs::read_to_string(&p).map_err(|e| Error::read_input("it", &p, e))?;
                let mut s: Snapshot = serde_json::from_str(&text).map_err(|e| {
                    Error::input_at(
                        &p,
                        Some(e.line() as u64),
                        format!("not a team snapshot: {e}"),
                    )
                })?;
                if s.state == "running" && !crate::run::record::team::alive(s.pid) {
                    s.catch_up(&dir.join("journal.jsonl"));
                }
                Ok(s)
            }
        }
    }

    /// Where a todo team's record went when its workspace was removed: for
    /// `<store>/teams/todo-resolve-N`, `<store>/todo-N.archive.jsonl` if it exists now.
    pub(crate) fn archived(&self) -> Option<Found> {
        let Found::Workspace(dir) = self else {
            return None;
        };
        let dir = crate::state_dir::origin_of(dir);
        let n = dir.file_name()?.to_str()?.strip_prefix("todo-resolve-")?;
        let teams = dir.parent()?;
        if teams.file_name()? != "teams" {
            return None;
        }
        let batch = teams.parent()?.join(format!("todo-{n}.md"));
        let archive = crate::run::record::archive::beside_batch(&batch);
        archive.is_file().then_some(Found::Archive(archive))
    }

    /// Every attempt and outcome the team recorded ([`history`]).
    ///
    /// Errors: the journal or archive cannot be read (exit 2).
    pub(crate) fn history(&self) -> Result<History> {
        match self {
            Found::Workspace(dir) => history::read(&dir.join("journal.jsonl")),
            Found::Archive(p) => Ok(history::from_events(archive::read(p)?.events)),
        }
    }

    /// The recorded events of item `id`, in order.
    ///
    /// Errors: the journal or archive cannot be read (exit 2).
    pub(crate) fn events_of(&self, id: &str) -> Result<Vec<Event>> {
        match self {
            Found::Workspace(dir) => journal::events_of(&dir.join("journal.jsonl"), id),
            Found::Archive(p) => Ok(archive::read(p)?.events_of(id)),
        }
    }

    /// The item `name` names — its id, else its teammate's name (`1-a`, `todo-task-1`: what
    /// the summary and `status` print) — as its id and its recorded events, in order; `None`
    /// when no item of that id or teammate has started or finished.
    ///
    /// Errors: the journal or archive cannot be read (exit 2).
    pub(crate) fn item_named(&self, name: &str) -> Result<Option<(String, Vec<Event>)>> {
        // Only the journal lines that name it are decoded (a team may have 100,000 items).
        let all = match self {
            Found::Workspace(dir) => journal::events_naming(&dir.join("journal.jsonl"), name)?,
            Found::Archive(p) => archive::read(p)?.events,
        };
        let id = match all.iter().any(|e| journal::is_of_item(e, name)) {
            true => name.to_owned(),
            false => match all.iter().find_map(|e| id_of_teammate(e, name)) {
                Some(id) => id,
                None => return Ok(None),
            },
        };
        let events = match self {
            // Named by its teammate: the lines that name its id.
            Found::Workspace(dir) if id != name => {
                journal::events_of(&dir.join("journal.jsonl"), &id)?
            }
            _ => all
                .into_iter()
                .filter(|e| journal::is_of_item(e, &id))
                .collect(),
        };
        Ok(Some((id, events)))
    }

    /// The workspace folder; for an archive, an error saying what was not kept (`what`:
    /// "the logs").
    ///
    /// Errors: it is an archive (exit 2).
    pub(crate) fn workspace(&self, what: &str) -> Result<&Path> {
        match self {
            Found::Workspace(p) => Ok(p),
            Found::Archive(p) => Err(Error::Usage(format!(
                "{}: the team workspace was removed with {what}; the archive keeps each \
                 item's attempts and report (`runner show ITEM {}`); keep a workspace with \
                 --keep-team",
                p.display(),
                p.display()
            ))),
        }
    }
}

/// The item id of `event` when it is about the teammate named `teammate`.
fn id_of_teammate(event: &Event, teammate: &str) -> Option<String> {
    match event {
        Event::AttemptStarted {
            id, teammate: t, ..
        }
        | Event::AttemptFinished {
            id, teammate: t, ..
        } if t == teammate => Some(id.clone()),
        Event::ItemFinished(o) if o.teammate == teammate => Some(o.id.clone()),
        _ => None,
    }
}

/// The folders a team named by `p` may be in, most direct first: `p` itself; its parent
/// (`p` is a `team.json`); the `.runner` folder of a batch output or team name (`X.csv` →
/// `X.runner`, `NAME` → `NAME.runner`: a CSV team's workspace is `<output stem>.runner`); a
/// `todo-N.md`'s store team (`teams/todo-resolve-N` beside it); and for each, its place in
/// the user's state folder ([`crate::state_dir::for_origin`]), after all those.
pub(crate) fn candidates(p: &Path) -> Vec<PathBuf> {
    let mut out = beside(p);
    let moved: Vec<PathBuf> = out
        .iter()
        .filter_map(|c| crate::state_dir::for_origin(c))
        .collect();
    out.extend(moved);
    out
}

/// [`candidates`] where earlier versions put them: beside the outputs.
fn beside(p: &Path) -> Vec<PathBuf> {
    let mut appended = p.as_os_str().to_owned();
    appended.push(".runner");
    let mut out = vec![
        p.to_owned(),
        p.parent().map(Path::to_owned).unwrap_or_default(),
        p.with_extension("runner"),
        PathBuf::from(appended),
        p.parent()
            .unwrap_or(Path::new("."))
            .join("teams")
            .join(crate::source::todo::team_name(p)),
    ];
    // The folder given to `-o`: the workspaces in it, most recently updated first.
    if p.is_dir() {
        let mut inside: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(p)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|d| d.extension().is_some_and(|x| x == "runner"))
            .chain(crate::state_dir::workspaces_beneath(&[p]))
            .filter_map(|d| {
                let at = std::fs::metadata(d.join("team.json"))
                    .and_then(|m| m.modified())
                    .ok()?;
                Some((at, d))
            })
            .collect();
        inside.sort_by_key(|e| std::cmp::Reverse(e.0));
        out.extend(inside.into_iter().map(|(_, d)| d));
        // The default name, there or cleaned away (then its archive is beside it).
        out.push(p.join("workers-output.runner"));
    }
    // A BATCH.md: the workspace of the output it names (else of its default output).
    if p.extension().is_some_and(|x| x == "md") {
        // Its `workspace:` key first, then the workspace of the output it names.
        out.extend(batch_workspace(p));
        if let Some(output) = batch_output(p) {
            out.extend(candidates_of_output(&output));
        }
    }
    out
}

/// The folder a batch definition file's `workspace:` key names, if it has one.
fn batch_workspace(batch: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(batch).ok()?;
    if !text.trim_start().starts_with("---") {
        return None;
    }
    crate::source::batch_spec::parse(batch, &text)
        .ok()?
        .settings
        .workspace
}

/// The output a batch definition file (BATCH.md) writes: its `output:` (relative to its
/// folder; a folder gets the default name), else `workers-output.csv` beside it. `None` when
/// the file is not a batch definition.
fn batch_output(batch: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(batch).ok()?;
    if !text.trim_start().starts_with("---") {
        return None;
    }
    let spec = crate::source::batch_spec::parse(batch, &text).ok()?;
    let base = batch.parent().unwrap_or(Path::new("."));
    let output = match spec.output {
        Some(o) => crate::fsutil::resolve(base, &o),
        None => base.join("workers-output.csv"),
    };
    Some(
        match output.is_dir() || output.as_os_str().to_string_lossy().ends_with('/') {
            true => output.join("workers-output.csv"),
            false => output,
        },
    )
}

/// Where the workspace of the output file `output` lies (`out.csv` → `out.runner`, or its
/// place in the user's state folder).
fn candidates_of_output(output: &Path) -> Vec<PathBuf> {
    let mut appended = output.as_os_str().to_owned();
    appended.push(".runner");
    let beside = [output.with_extension("runner"), PathBuf::from(appended)];
    let moved: Vec<PathBuf> = beside
        .iter()
        .filter_map(|c| crate::state_dir::for_origin(c))
        .collect();
    beside.into_iter().chain(moved).collect()
}

/// The team name of the workspace `workspace`: the `team` its `team.json` records, else the
/// folder's name without `.runner`.
pub(crate) fn team_of(workspace: &Path) -> String {
    std::fs::read_to_string(workspace.join("team.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["team"].as_str().map(str::to_owned))
        .unwrap_or_else(|| {
            let name = workspace
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            name.strip_suffix(".runner").unwrap_or(&name).to_owned()
        })
}

/// A team to clean: its workspace, or `None` when that is gone and only its branches are
/// left in the repository here.
pub(crate) struct CleanTarget {
    /// The team's name (its branches are `runner/<team>/*`).
    pub team: String,
    /// Its workspace folder (a real path), if it is still there.
    pub workspace: Option<PathBuf>,
}

/// The team in the workspace `workspace`.
fn at(workspace: &Path) -> CleanTarget {
    let ws = real_path(workspace);
    CleanTarget {
        team: team_of(&ws),
        workspace: Some(ws),
    }
}

/// The team `arg` names: a workspace folder; a team of the store; a CSV team's name or its
/// output (`NAME`, `NAME.csv` → `NAME.runner` here, [`candidates`]); a team with a worktree
/// in the repository here; else, when its workspace is gone, its branches `runner/<team>/*`
/// there (`arg` the team's name or its old workspace path).
///
/// Errors: none of these (exit 2, saying where it looked).
pub(crate) fn clean_named(arg: &str, store: &Store) -> Result<CleanTarget> {
    let p = Path::new(arg);
    if is_workspace(p) {
        return Ok(at(p));
    }
    // A store team by its name: never a path (joined to the store, an absolute one would
    // name any folder at all), and only a folder a run made.
    let ws = store.team_dir(arg);
    if p.components().count() == 1 && !arg.starts_with('.') && is_workspace(&ws) {
        return Ok(CleanTarget {
            team: arg.to_owned(),
            workspace: Some(ws),
        });
    }
    if let Some(ws) = candidates(p).iter().find(|c| is_workspace(c)) {
        return Ok(at(ws));
    }
    let name = p.file_name().map_or(arg.into(), |n| n.to_string_lossy());
    let name = match (name.strip_suffix(".runner"), p.extension()) {
        (Some(stem), _) => stem.to_owned(),
        (None, Some(x)) if x == "csv" => name.strip_suffix(".csv").unwrap_or(&name).to_owned(),
        (None, _) => name.into_owned(),
    };
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let repo = leftovers::repo_at(&here);
    if let Some(repo) = &repo {
        let in_repo = leftovers::workspaces_in(repo);
        if let Some(ws) = in_repo.into_iter().find(|w| team_of(w) == name) {
            return Ok(at(&ws));
        }
        if leftovers::orphaned(repo, &name).is_some() {
            return Ok(CleanTarget {
                team: name,
                workspace: None,
            });
        }
    }
    let repo = repo.map_or(String::new(), |r| {
        format!(
            ", nor branches {}* in {}",
            crate::run::isolation::worktree::branch_prefix(&name),
            r.display()
        )
    });
    Err(Error::Unknown {
        what: "team".into(),
        name: arg.to_string(),
        suggestion: String::new(),
        hint: format!(
            "there is none in {} (and no team workspace at that path or in its .runner folder{repo})",
            store.dir.join("teams").display()
        ),
    })
}

/// Every team to clean when none is named, and the teams that left branches in the
/// repository here with no workspace found.
pub(crate) fn clean_every(store: &Store) -> (Vec<CleanTarget>, Vec<String>) {
    let teams = store.dir.join("teams");
    let mut out: Vec<CleanTarget> = std::fs::read_dir(&teams)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| CleanTarget {
            team: e.file_name().to_string_lossy().into_owned(),
            workspace: Some(e.path()),
        })
        .collect();
    // CSV-batch teams here and below (`<output stem>.runner/` beside their outputs), and those whose
    // worktrees the repository here holds, wherever their output went.
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let repo = leftovers::repo_at(&here);
    let csv_teams = runner_folders_beneath(&here)
        .into_iter()
        .filter(|p| p.join("team.json").is_file() || p.join("journal.jsonl").is_file());
    let in_repo = repo.iter().flat_map(|r| leftovers::workspaces_in(r));
    // Those kept in the user's state folder for outputs here or teams of the store.
    let moved = crate::state_dir::workspaces_beneath(&[&here, &store.dir]);
    for p in csv_teams
        .chain(named_by_batches(&here))
        .chain(in_repo)
        .chain(moved)
    {
        let ws = real_path(&p);
        if !out
            .iter()
            .any(|t| t.workspace.as_deref().map(real_path).as_ref() == Some(&ws))
        {
            out.push(at(&ws));
        }
    }
    let known: Vec<String> = out.iter().map(|t| t.team.clone()).collect();
    let orphans = repo
        .as_deref()
        .map_or(Vec::new(), |r| leftovers::orphan_teams(r, &known));
    out.sort_by(|a, b| a.team.cmp(&b.team));
    (out, orphans)
}

/// How many folders below the current one bare `status`, `status --list` and `clean` look
/// for `*.runner/` workspaces beside outputs (`-o results/2026/out.csv` is two down).
pub(crate) const SEARCH_LEVELS: usize = 3;

/// Most folders [`runner_folders_beneath`] opens (a home folder must not take minutes).
const SEARCH_FOLDERS: usize = 5_000;

/// The `*.runner` folders in `dir` and up to [`SEARCH_LEVELS`] folders below it, not
/// looking into hidden folders (`.git`), `node_modules`, `target` or a workspace itself,
/// and opening at most [`SEARCH_FOLDERS`] folders, nearest first.
pub(crate) fn runner_folders_beneath(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut level = vec![dir.to_owned()];
    let mut opened = 0;
    for _ in 0..=SEARCH_LEVELS {
        let mut next = Vec::new();
        for d in level {
            if opened >= SEARCH_FOLDERS {
                break;
            }
            opened += 1;
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                if name.ends_with(".runner") {
                    out.push(e.path());
                } else if !name.starts_with('.') && name != "node_modules" && name != "target" {
                    next.push(e.path());
                }
            }
        }
        next.sort();
        level = next;
    }
    out
}

/// The workspaces (there now) of the outputs that the batch definitions (`*.md` with a
/// frontmatter) in folder `dir` name: `output: out-http/workers-output.csv` puts its team in
/// `out-http/`.
fn named_by_batches(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "md"))
        .filter_map(|p| batch_output(&p))
        .flat_map(|o| candidates_of_output(&o))
        .filter(|ws| ws.join("team.json").is_file() || ws.join("journal.jsonl").is_file())
        .collect()
}

/// Whether `p` is a team's archive file (`*.archive.jsonl`).
fn is_archive(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".archive.jsonl"))
        && p.is_file()
}

/// Find the team: a folder with team.json, team.json itself, an output CSV or a team name
/// (its `.runner` folder), a `todo-N.md` (its store's `teams/todo-resolve-N`, else its archive
/// `todo-N.archive.jsonl`), an archive itself, or, without an argument, the most recently
/// updated team here ([`known`]).
///
/// Errors: nothing there is a team workspace or archive (exit 2).
pub(crate) fn locate(arg: Option<&Path>) -> Result<Found> {
    locate_in(arg, None)
}

/// [`locate`], also looking in `store`'s teams and archives when no workspace is named.
///
/// Errors: as [`locate`].
pub(crate) fn locate_in(arg: Option<&Path>, store: Option<&Path>) -> Result<Found> {
    if let Some(p) = arg {
        let canonical = |c: PathBuf| c.canonicalize().unwrap_or(c);
        if let Some(dir) = candidates(p)
            .into_iter()
            .find(|c| c.join("team.json").is_file())
        {
            return Ok(Found::Workspace(canonical(dir)));
        }
        // An archive: given, beside a todo batch, or where a cleaned workspace was (its
        // output's `<stem>.archive.jsonl`, found through a BATCH.md or an output folder too).
        let mut archives = [p.to_owned(), crate::run::record::archive::beside_batch(p)]
            .into_iter()
            .chain(
                beside(p)
                    .into_iter()
                    .filter(|c| c.extension().is_some_and(|x| x == "runner"))
                    .map(|c| c.with_extension("archive.jsonl")),
            );
        return archives
            .find(|c| is_archive(c))
            .map(|c| Found::Archive(canonical(c)))
            .ok_or_else(|| {
                Error::missing_file(
                    p,
                    "team workspace (team.json) or archive",
                    "give the path of a *.runner/ folder or a *.archive.jsonl file",
                )
            });
    }
    known(store).pop().ok_or_else(|| {
        Error::missing_file(
            &std::env::current_dir().unwrap_or_default(),
            "team workspace or archive",
            "no *.runner/ or .agent-tasks/teams/ here, and no archive; give its path",
        )
    })
}

/// Every team here, oldest update first: `*.runner/` folders here and up to
/// [`SEARCH_LEVELS`] folders down ([`runner_folders_beneath`]), `*.archive.jsonl` files in
/// the current folder, the workspaces of the outputs the batch definitions (`*.md` with a
/// frontmatter) here name, the project store's teams and archives (`<git root>/.agent-tasks/`,
/// `./.agent-tasks/`) and, when given, those of `store`. Paths are canonical; each appears
/// once.
pub(crate) fn known(store: Option<&Path>) -> Vec<Found> {
    let mut found: Vec<(SystemTime, Found)> = Vec::new();
    let mut scan = |dir: &Path, runner_only: bool| {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if runner_only && p.extension().is_none_or(|x| x != "runner") {
                continue;
            }
            if let Ok(m) = std::fs::metadata(p.join("team.json")).and_then(|m| m.modified()) {
                found.push((m, Found::Workspace(p.canonicalize().unwrap_or(p))));
            }
        }
    };
    let store_dir = Path::new(crate::store::STORE_DIR);
    let cwd = std::env::current_dir().unwrap_or_default();
    let root_store = crate::store::git_root(&cwd).map(|r| r.join(crate::store::STORE_DIR));
    if let Some(s) = &root_store {
        scan(&s.join("teams"), false);
    }
    scan(store_dir.join("teams").as_path(), false);
    if let Some(store) = store {
        scan(&store.join("teams"), false);
    }
    // The workspaces of the outputs that the batch definitions here name (`output:
    // out-http/workers-output.csv`), and those kept in the user's state folder for outputs
    // or stores here.
    let mut here: Vec<&Path> = vec![&cwd, store_dir];
    here.extend(root_store.as_deref());
    here.extend(store);
    let moved = crate::state_dir::workspaces_beneath(&here);
    // Here and up to three folders down (`-o newdir/`, `-o results/2026/out.csv`).
    let beneath = runner_folders_beneath(Path::new("."));
    for ws in beneath
        .into_iter()
        .chain(named_by_batches(Path::new(".")))
        .chain(moved)
    {
        if let Ok(m) = std::fs::metadata(ws.join("team.json")).and_then(|m| m.modified()) {
            found.push((m, Found::Workspace(ws.canonicalize().unwrap_or(ws))));
        }
    }
    let archive_dirs = [
        Some(Path::new(".")),
        root_store.as_deref(),
        Some(store_dir),
        store,
    ];
    for dir in archive_dirs.into_iter().flatten() {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if is_archive(&p)
                && let Ok(m) = e.metadata().and_then(|m| m.modified())
            {
                found.push((m, Found::Archive(p.canonicalize().unwrap_or(p))));
            }
        }
    }
    found.sort();
    let mut seen = std::collections::HashSet::new();
    found
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| seen.insert(p.clone()))
        .collect()
}
