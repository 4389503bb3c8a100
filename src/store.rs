//! The task store (DESIGN §3, seed `todo-skill.md`): `<git root>/.agent-tasks/` for a
//! project, `~/.agent-tasks/` globally, or any folder given with `--store`. It holds the inbox
//! `todo.md`, batch files `todo-N.md`, checkpoints `cp-YYYYMMDD-HHMMSS.md`, optional
//! `templates/` and `runners/` overrides, `runner.toml`, task fragments under `fragments/`,
//! and team workspaces under `teams/`.
//!
//! This module reads and writes store files; it never starts processes. Every
//! read-modify-write of a store file happens under the store lock ([`Store::lock`]).

pub(crate) mod links;
pub(crate) mod lock;
mod moving;

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

pub(crate) use links::TodoFile;
pub(crate) use lock::StoreLock;

use crate::error::{Error, Result};
use crate::settings::FileSettings;
use crate::source::todo::{BatchRef, Mark, Problem, TodoDocument};

/// The store folder's name inside a project.
pub(crate) const STORE_DIR: &str = ".agent-tasks";

/// Which store a command asked for.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScopeFlags {
    /// `--store DIR`.
    pub store: Option<PathBuf>,
    /// `--global`.
    pub global: bool,
    /// `--project`.
    pub project: bool,
}

/// An opened store.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    /// The store folder (absolute).
    pub dir: PathBuf,
    /// The project root when this is a project store (teammates run there).
    pub project_root: Option<PathBuf>,
}

/// Read a todo file of a store (the inbox or a batch file) and parse it losslessly; problems
/// are left in the document for the caller to judge.
///
/// Errors: the file cannot be read or is not UTF-8 (exit 2, naming it).
pub(crate) fn read_todo(path: &Path) -> Result<(String, TodoDocument)> {
    let text = read_utf8(path)?;
    let doc = TodoDocument::parse(&text);
    Ok((text, doc))
}

/// Parse a todo file, refusing one with problems (exit 2, naming file and line).
pub(crate) fn parse_checked(path: &Path, text: &str) -> Result<TodoDocument> {
    let doc = TodoDocument::parse(text);
    refuse(path, doc.problems().iter().collect())?;
    Ok(doc)
}

/// Parse the inbox: a problem on an item's line (a bad `@after:` or `@context:` token) is a
/// warning naming that line — the item is listed, but not handed out until it is fixed;
/// a problem elsewhere (a frontmatter or code fence never closed) refuses the file.
///
/// Errors: the first problem outside the items (exit 2, naming file and line).
pub(crate) fn parse_inbox(path: &Path, text: &str) -> Result<TodoDocument> {
    let doc = TodoDocument::parse(text);
    refuse(path, doc.file_problems())?;
    for p in doc.problems() {
        crate::shown::warn(format_args!(
            "{}:{}: {}; that item is not handed out until it is fixed",
            path.display(),
            p.line,
            p.message
        ));
    }
    Ok(doc)
}

/// Refuse `path` for the first of `problems`, if any (exit 2).
fn refuse(path: &Path, problems: Vec<&Problem>) -> Result<()> {
    let Some(p) = problems.first() else {
        return Ok(());
    };
    let more = match problems.len() - 1 {
        0 => String::new(),
        n => format!(" (and {n} more problem(s))"),
    };
    Err(Error::input_at(
        path,
        Some(p.line as u64),
        format!("{}{more}", p.message),
    ))
}

/// Read a text file the user gave (a todo file, a checkpoint body).
///
/// Errors: the file cannot be read or is not UTF-8 (exit 2, naming it).
pub(crate) fn read_utf8(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::read_input("it", path, e))?;
    String::from_utf8(bytes)
        .map_err(|_| Error::input_at(path, None, "not valid UTF-8; save it as UTF-8"))
}

/// Today's date in local time, `YYYY-MM-DD` (the inbox's "last updated" line, batch
/// `created` dates, `completed.md` lines).
pub(crate) fn today() -> String {
    jiff::Zoned::now().strftime("%Y-%m-%d").to_string()
}

/// The git work tree containing `start`: the nearest of `start` and its ancestors that holds
/// a `.git` entry, looking no higher than git itself does — not into a folder named in
/// `GIT_CEILING_DIRECTORIES`, nor above it ([`ceiling_dirs`]), unless that folder is `start`.
/// `None` when there is none below the ceiling.
pub(crate) fn git_root(start: &Path) -> Option<PathBuf> {
    let ceilings = ceiling_dirs(std::env::var_os("GIT_CEILING_DIRECTORIES").as_deref());
    git_root_below(start, &ceilings)
}

/// [`git_root`] with the ceiling folders given (real paths, as [`ceiling_dirs`] makes them).
fn git_root_below(start: &Path, ceilings: &[PathBuf]) -> Option<PathBuf> {
    let is_ceiling = |d: &Path| {
        let real = d.canonicalize().unwrap_or_else(|_| d.to_owned());
        ceilings.contains(&real)
    };
    start
        .ancestors()
        .enumerate()
        .take_while(|(i, d)| *i == 0 || ceilings.is_empty() || !is_ceiling(d))
        .map(|(_, d)| d)
        .find(|d| d.join(".git").exists())
        .map(Path::to_owned)
}

/// The folders of a `GIT_CEILING_DIRECTORIES` value, read as git reads it (git(1),
/// ENVIRONMENT): colon-separated; a relative entry is ignored; an entry is resolved to its
/// real path (symlinks followed) and dropped when that fails, except after an empty entry,
/// from which on entries are taken as written.
fn ceiling_dirs(value: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let Some(value) = value else {
        return Vec::new();
    };
    let mut resolve = true;
    let mut dirs = Vec::new();
    for entry in value.as_bytes().split(|b| *b == b':') {
        if entry.is_empty() {
            resolve = false;
            continue;
        }
        let entry = Path::new(std::ffi::OsStr::from_bytes(entry));
        if !entry.is_absolute() {
            continue;
        }
        match resolve {
            true => dirs.extend(entry.canonicalize().ok()),
            false => dirs.push(entry.to_owned()),
        }
    }
    dirs
}

/// For a command that only reads (`list`, `status`): the store named by `--store DIR` must be
/// there, so a mistyped path is refused rather than created or read as empty.
///
/// Errors: `dir` is not a folder (exit 2, naming it and that `runner add --store DIR`
/// creates a store).
pub(crate) fn check_given(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    Err(Error::missing_file(
        dir,
        "store folder (--store)",
        format!(
            "{}check the path, or create the store with `runner add --store {} TEXT`",
            match dir.exists() {
                true => "it is not a folder; ",
                false => "",
            },
            dir.display()
        ),
    ))
}

/// How the store was chosen, for `choose`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// `list`: defaults to the project store.
    DefaultProject,
    /// `add`, `resolve`: inside a repository the user must choose.
    Choice,
}

/// Pick the store. `ask` is called only when a choice is needed and stdin is a terminal; it
/// returns `true` for the project store.
///
/// Errors: `--project` outside a git repository; a needed choice without a terminal
/// (exit 2, naming the flags); no home folder for the global store (exit 3).
pub(crate) fn choose(
    flags: &ScopeFlags,
    cwd: &Path,
    need: Need,
    interactive: bool,
    ask: impl FnOnce(&Path) -> Result<bool>,
) -> Result<Store> {
    if flags.global && flags.project {
        return Err(Error::Conflict {
            flag: "--global".into(),
            other: "--project".into(),
            why: "give one of them".into(),
        });
    }
    if let Some(dir) = &flags.store {
        return Ok(Store {
            dir: crate::fsutil::absolute(dir),
            project_root: None,
        });
    }
    let global = || -> Result<Store> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .ok_or_else(|| {
                Error::Environment(
                    "HOME is not set, so there is no global store; use --store DIR".into(),
                )
            })?;
        Ok(Store {
            dir: PathBuf::from(home).join(STORE_DIR),
            project_root: None,
        })
    };
    if flags.global {
        return global();
    }
    let root = git_root(cwd);
    let project = |root: PathBuf| Store {
        dir: root.join(STORE_DIR),
        project_root: Some(root),
    };
    match (flags.project, root) {
        (true, Some(root)) => Ok(project(root)),
        (true, None) => Err(Error::needs(
            "--project",
            "a git repository",
            format!(
                "{} is not inside one, so there is no project store; use --global",
                cwd.display()
            ),
        )),
        (false, None) => global(),
        (false, Some(root)) => match need {
            Need::DefaultProject => Ok(project(root)),
            Need::Choice if interactive => {
                if ask(&root)? {
                    Ok(project(root))
                } else {
                    global()
                }
            }
            Need::Choice => Err(Error::needs(
                "this command",
                "a store",
                format!(
                    "inside the git repository {}, say which one with --project ({}) or --global (~/{STORE_DIR})",
                    root.display(),
                    root.join(STORE_DIR).display()
                ),
            )),
        },
    }
}

impl Store {
    /// The inbox path.
    pub(crate) fn inbox(&self) -> PathBuf {
        self.dir.join("todo.md")
    }

    /// A template: `<store>/templates/<name>` if it exists, else the built-in `builtin`.
    ///
    /// Errors: the override exists but cannot be read.
    pub(crate) fn template(&self, name: &str, builtin: &str) -> Result<String> {
        let p = self.dir.join("templates").join(name);
        match std::fs::read_to_string(&p) {
            Ok(t) => Ok(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(builtin.to_owned()),
            Err(e) => Err(Error::read_input("the template", &p, e)),
        }
    }

    /// Read `<store>/runner.toml` (the settings of runs from this store, below the flags) if
    /// present.
    ///
    /// Errors: unreadable or invalid file (exit 2, naming the line and the key).
    pub(crate) fn settings(&self) -> Result<FileSettings> {
        let p = self.dir.join("runner.toml");
        match std::fs::read_to_string(&p) {
            Ok(text) => FileSettings::from_toml(&p, &text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileSettings::default()),
            Err(e) => Err(Error::read_input("it", &p, e)),
        }
    }

    /// The inbox text, or the template when there is none yet (`None` as the second value
    /// means the file does not exist).
    ///
    /// Errors: the inbox exists but cannot be read or is not UTF-8 (exit 3 / 2).
    pub(crate) fn read_inbox(&self, today: &str) -> Result<(String, bool)> {
        let p = self.inbox();
        match std::fs::read(&p) {
            Ok(bytes) => String::from_utf8(bytes)
                .map(|t| (t, true))
                .map_err(|_| Error::input_at(&p, None, "not valid UTF-8; save it as UTF-8")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let template = self.template("todo.md", crate::source::todo::INBOX_TEMPLATE)?;
                Ok((crate::source::todo::inbox_from(&template, today), false))
            }
            Err(e) => Err(Error::read_input("the inbox", &p, e)),
        }
    }

    /// Append `proposals` (a title, its details, the batch item it follows) to the inbox's
    /// Todo section as items `@after` that item, under the store lock: follow-ups teammates
    /// proposed ([`crate::progress::Subtask`]), which a person confirms like any other item.
    /// Returns their numbers in the inbox.
    ///
    /// Errors: the lock cannot be taken, the inbox cannot be read or written, or an item
    /// would not read back as given (then nothing is written).
    pub(crate) fn propose(&self, proposals: &[(String, String, BatchRef)]) -> Result<Vec<u32>> {
        if proposals.is_empty() {
            return Ok(Vec::new());
        }
        let _lock = self.lock()?;
        let today = today();
        let (text, _) = self.read_inbox(&today)?;
        let mut doc = TodoDocument::parse(&text);
        let mut numbers = Vec::new();
        for (title, details, after) in proposals {
            let line = format!(
                "{} @after:{after}",
                crate::source::todo::escape_title(title)
            );
            let n = doc
                .append_item(crate::source::todo::Section::Todo, &line, details)
                .map_err(|e| Error::input_at(&self.inbox(), None, e))?;
            numbers.push(n);
        }
        doc.set_last_updated(&today);
        crate::fsutil::write_atomic(&self.inbox(), doc.render().as_bytes())?;
        Ok(numbers)
    }

    /// Take the store lock for one edit (creating the store folder first), waiting a bounded
    /// time for another writer's edit to finish ([`lock::wait_limit`]). Read the files to
    /// edit after taking it, write them, then drop it.
    ///
    /// Errors: still held after the wait (exit 3, naming the holder's pid); the folder or
    /// the lock file cannot be created (exit 3); a bad `RUNNER_STORE_LOCK_WAIT` (exit 2).
    pub(crate) fn lock(&self) -> Result<StoreLock> {
        self.ensure()?;
        let lock = lock::acquire(&self.dir, lock::wait_limit()?)?;
        // A `resolve` killed between its two writes is finished first (`moving`).
        if let Some(said) = self.finish_move()? {
            crate::shown::warn(&said);
        }
        Ok(lock)
    }

    /// Create the store folder if needed.
    ///
    /// Errors: [`Error::Io`] when it cannot be created.
    pub(crate) fn ensure(&self) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io("create the store", &self.dir, e))
    }

    /// The batch files `todo-N.md` of the store, by N.
    pub(crate) fn batches(&self) -> Vec<(u32, PathBuf)> {
        let mut out: Vec<(u32, PathBuf)> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_owned();
                let n = name
                    .strip_prefix("todo-")?
                    .strip_suffix(".md")?
                    .parse::<u32>()
                    .ok()?;
                Some((n, e.path()))
            })
            .collect();
        out.sort();
        out
    }

    /// The batch items named by `@after:todo-N#K` in `doc` that are ticked (`[x]`) in their
    /// batch files now. A batch file that is missing or unreadable ticks none of them, so
    /// the items waiting for it stay where they are.
    pub(crate) fn finished_batch_items(&self, doc: &TodoDocument) -> HashSet<BatchRef> {
        let wanted: HashSet<BatchRef> = doc
            .items()
            .iter()
            .flat_map(|i| i.after_batches.iter().copied())
            .collect();
        let batches: HashSet<u32> = wanted.iter().map(|b| b.batch).collect();
        let mut done = HashSet::new();
        for n in batches {
            let Ok((_, batch)) = read_todo(&self.dir.join(format!("todo-{n}.md"))) else {
                continue;
            };
            done.extend(wanted.iter().copied().filter(|b| {
                b.batch == n && batch.item(b.item).is_some_and(|i| i.mark == Mark::Done)
            }));
        }
        done
    }

    /// The inbox (when it exists) and every batch file, read and parsed, in that order; the
    /// files that cannot be read (or are not UTF-8) come back as errors beside them.
    pub(crate) fn todo_files(&self) -> (Vec<TodoFile>, Vec<Error>) {
        let inbox = self.inbox();
        let paths = std::iter::once((None, inbox.clone()))
            .filter(|_| inbox.exists())
            .chain(self.batches().into_iter().map(|(n, p)| (Some(n), p)));
        let (mut files, mut errors) = (Vec::new(), Vec::new());
        for (batch, path) in paths {
            match read_todo(&path) {
                Ok((_, doc)) => files.push(TodoFile { path, batch, doc }),
                Err(e) => errors.push(e),
            }
        }
        (files, errors)
    }

    /// `<store>/fragments/`, where the fragment files `NAME.toml` are.
    pub(crate) fn fragments_dir(&self) -> PathBuf {
        self.dir.join("fragments")
    }

    /// The names of the store's fragments (`fragments/NAME.toml`), sorted.
    pub(crate) fn fragment_names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.fragments_dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.strip_suffix(".toml")?.to_owned();
                crate::source::todo::is_fragment_name(&name).then_some(name)
            })
            .collect();
        names.sort();
        names
    }

    /// Read and check the fragment `name` (`fragments/NAME.toml`).
    ///
    /// Errors (exit 2): a name that is not a plain file name; no such fragment (with the
    /// nearest name and the list); a file that cannot be read or does not check
    /// ([`crate::fragment::Fragment::parse`]).
    pub(crate) fn fragment(&self, name: &str) -> Result<crate::fragment::Fragment> {
        if !crate::source::todo::is_fragment_name(name) {
            return Err(Error::bad_value(
                "fragment name",
                name,
                "must be letters, digits, `_`, `-` and `.` (the file fragments/NAME.toml)",
            ));
        }
        let path = self.fragments_dir().join(format!("{name}.toml"));
        let text = match std::fs::read(&path) {
            Ok(bytes) => String::from_utf8(bytes)
                .map_err(|_| Error::input_at(&path, None, "not valid UTF-8; save it as UTF-8"))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let names = self.fragment_names();
                return Err(Error::Unknown {
                    what: "fragment".into(),
                    name: name.to_owned(),
                    suggestion: crate::suggest::did_you_mean(
                        name,
                        names.iter().map(String::as_str),
                    ),
                    hint: match names.is_empty() {
                        true => format!(
                            "the store has none yet: write {} (the format is in the README, \"Fragments\")",
                            path.display()
                        ),
                        false => format!("the store's fragments are: {}", names.join(", ")),
                    },
                });
            }
            Err(e) => return Err(Error::read_input("the fragment", &path, e)),
        };
        crate::fragment::Fragment::parse(name, &path, &text)
    }

    /// One more than the largest existing batch number.
    pub(crate) fn next_batch_number(&self) -> u32 {
        self.batches().last().map_or(1, |(n, _)| n + 1)
    }

    /// Write the new batch file `path` with `text`, durably, never replacing a file of that
    /// name (whoever made it).
    ///
    /// Errors: [`Error::Io`] when it exists or cannot be written.
    pub(crate) fn create_batch(&self, path: &Path, text: &str) -> Result<()> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        f.write_all(text.as_bytes())
            .map_err(|e| Error::io("write", path, e))?;
        f.sync_all().map_err(|e| Error::io("sync", path, e))
    }

    /// The folder the workspace of team `team` stands for: `<store>/teams/<team>/`
    /// (DESIGN §6b; where a run puts it is `schedule::layout::place_workspace`).
    pub(crate) fn team_origin(&self, team: &str) -> PathBuf {
        self.dir.join("teams").join(team)
    }

    /// The workspace of team `team` as it is on disk: `<store>/teams/<team>/`, or its place
    /// in the user's state folder ([`crate::state_dir::existing`]); the first when neither
    /// holds one.
    pub(crate) fn team_dir(&self, team: &str) -> PathBuf {
        let origin = self.team_origin(team);
        crate::state_dir::existing(&origin).unwrap_or(origin)
    }

    /// Write a new checkpoint `cp-<stamp>.md` (or `cp-<stamp>-2.md`, ... when taken) with
    /// `content`, never overwriting one. Returns its file name.
    ///
    /// Errors: [`Error::Io`] when it cannot be written.
    pub(crate) fn create_checkpoint(&self, stamp: &str, content: &str) -> Result<String> {
        use std::io::Write;
        for n in 1..1000 {
            let name = if n == 1 {
                format!("cp-{stamp}.md")
            } else {
                format!("cp-{stamp}-{n}.md")
            };
            let p = self.dir.join(&name);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&p)
            {
                Ok(mut f) => {
                    f.write_all(content.as_bytes())
                        .map_err(|e| Error::io("write", &p, e))?;
                    f.sync_all().map_err(|e| Error::io("sync", &p, e))?;
                    return Ok(name);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io("create", &p, e)),
            }
        }
        Err(Error::Environment(format!(
            "too many checkpoints named cp-{stamp}*.md in {}",
            self.dir.display()
        )))
    }

    /// The path of the checkpoint `reference` names when it is one of the store's own
    /// checkpoint files — `cp-….md` directly in the store, as [`Store::create_checkpoint`]
    /// names them — and passes [`Store::resolve_checkpoint`]; `None` for any other file (the
    /// inbox, a batch file, a file in a subfolder), which the runner never deletes.
    pub(crate) fn own_checkpoint(&self, reference: &str) -> Option<PathBuf> {
        let name = plain_name(reference)?;
        (name.starts_with("cp-") && name.ends_with(".md"))
            .then(|| self.resolve_checkpoint(name).ok())
            .flatten()
    }

    /// The absolute path of the checkpoint `reference` (from an `@context:` token), checked
    /// to be a file inside the store.
    ///
    /// Errors (exit 2): an absolute path, a `..` component, a path whose real location (after
    /// symlinks) is outside the store, or a missing file.
    pub(crate) fn resolve_checkpoint(&self, reference: &str) -> Result<PathBuf> {
        let rel = Path::new(reference);
        if rel.is_absolute() {
            return Err(Error::bad_value(
                "checkpoint",
                reference,
                "is an absolute path; name a file inside the store",
            ));
        }
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(Error::bad_value(
                "checkpoint",
                reference,
                "leaves the store (`..`); name a file inside it",
            ));
        }
        let path = self.dir.join(rel);
        let real = path.canonicalize().map_err(|_| {
            Error::missing_file(
                &path,
                "checkpoint",
                format!("name a file inside the store {}", self.dir.display()),
            )
        })?;
        let store = self
            .dir
            .canonicalize()
            .map_err(|e| Error::read_input("the store", &self.dir, e))?;
        if !real.starts_with(&store) {
            return Err(Error::bad_value(
                "checkpoint",
                reference,
                "is a link leading out of the store; refusing it",
            ));
        }
        if !real.is_file() {
            return Err(Error::missing_file(
                &path,
                "checkpoint file",
                "it is a folder or another kind of file; name a file inside the store",
            ));
        }
        Ok(path)
    }
}

/// `reference` as one plain file name (`./` before it allowed); `None` for a path with a
/// folder in it.
fn plain_name(reference: &str) -> Option<&str> {
    let name = reference.trim().trim_start_matches("./");
    let mut parts = Path::new(name).components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(_)), None) => Some(name),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Store {
            dir: dir.path().join(STORE_DIR),
            project_root: None,
        };
        s.ensure().expect("mkdir");
        (dir, s)
    }

    #[test]
    fn checkpoints_get_distinct_names_in_the_same_second() {
        let (_d, s) = store();
        assert_eq!(
            s.create_checkpoint("20261130-010203", "a").expect("one"),
            "cp-20261130-010203.md"
        );
        assert_eq!(
            s.create_checkpoint("20261130-010203", "b").expect("two"),
            "cp-20261130-010203-2.md"
        );
    }

    #[test]
    fn only_the_stores_own_checkpoint_files_are_ones_the_runner_may_delete() {
        let (_d, s) = store();
        std::fs::create_dir_all(s.dir.join("notes")).expect("mkdir");
        for name in [
            "cp-1.md",
            "todo.md",
            "todo-1.md",
            "notes/cp-2.md",
            "cp-3.txt",
        ] {
            std::fs::write(s.dir.join(name), "x").expect("write");
        }
        assert_eq!(s.own_checkpoint("cp-1.md"), Some(s.dir.join("cp-1.md")));
        assert_eq!(s.own_checkpoint("./cp-1.md"), Some(s.dir.join("cp-1.md")));
        for other in [
            "todo.md",
            "todo-1.md",
            "notes/cp-2.md",
            "cp-3.txt",
            "cp-9.md",
            "../cp-1.md",
            "/etc/cp-1.md",
        ] {
            assert_eq!(s.own_checkpoint(other), None, "{other}");
        }
    }

    #[test]
    fn checkpoint_references_must_stay_inside_the_store() {
        let (d, s) = store();
        std::fs::write(s.dir.join("cp-1.md"), "x").expect("write");
        std::fs::write(d.path().join("secret.md"), "x").expect("write");
        std::os::unix::fs::symlink(d.path().join("secret.md"), s.dir.join("cp-link.md"))
            .expect("link");
        assert!(s.resolve_checkpoint("cp-1.md").is_ok());
        assert!(
            s.resolve_checkpoint("/etc/passwd")
                .expect_err("abs")
                .to_string()
                .contains("absolute")
        );
        assert!(
            s.resolve_checkpoint("../secret.md")
                .expect_err("dotdot")
                .to_string()
                .contains("..")
        );
        assert!(
            s.resolve_checkpoint("cp-link.md")
                .expect_err("link")
                .to_string()
                .contains("link")
        );
        assert!(matches!(
            s.resolve_checkpoint("cp-9.md").expect_err("missing"),
            Error::MissingFile { what, .. } if what == "checkpoint"
        ));
    }

    #[test]
    fn batch_numbers_continue_from_the_largest() {
        let (_d, s) = store();
        assert_eq!(s.next_batch_number(), 1);
        for n in [1, 3, 10] {
            std::fs::write(s.dir.join(format!("todo-{n}.md")), "").expect("write");
        }
        std::fs::write(s.dir.join("todo-x.md"), "").expect("write");
        assert_eq!(s.next_batch_number(), 11);
    }

    #[test]
    fn a_git_at_or_above_a_ceiling_folder_is_no_repository() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(d.path().join(".git")).expect("git");
        let sub = d.path().join("work/src");
        std::fs::create_dir_all(&sub).expect("sub");
        let ceilings = |v: &Path| ceiling_dirs(Some(v.as_os_str()));
        assert_eq!(git_root_below(&sub, &[]), Some(d.path().to_owned()));
        // git does not look into the ceiling folder, nor above it.
        assert_eq!(git_root_below(&sub, &ceilings(d.path())), None);
        assert_eq!(
            git_root_below(&sub, &ceilings(&d.path().join("work"))),
            None
        );
        // ... unless the search starts there.
        assert_eq!(
            git_root_below(d.path(), &ceilings(d.path())),
            Some(d.path().to_owned())
        );
        // A ceiling below the search's start does not matter.
        assert_eq!(
            git_root_below(&sub, &ceilings(&sub.join("deeper"))),
            Some(d.path().to_owned())
        );
        // A ceiling named through a symlink is its real folder.
        std::os::unix::fs::symlink(d.path().join("work"), d.path().join("link")).expect("ln");
        assert_eq!(
            git_root_below(&sub, &ceilings(&d.path().join("link"))),
            None
        );
    }

    #[test]
    fn ceiling_entries_are_read_as_git_reads_them() {
        let d = tempfile::tempdir().expect("tempdir");
        let real = d.path().canonicalize().expect("real");
        std::os::unix::fs::symlink(&real, d.path().join("link")).expect("ln");
        let link = d.path().join("link");
        let value = format!(
            "relative/dir:{}:/no/such/folder::{}:/no/such/folder",
            link.display(),
            link.display()
        );
        assert_eq!(
            ceiling_dirs(Some(std::ffi::OsStr::new(&value))),
            [real, link, PathBuf::from("/no/such/folder")],
            "relative entries ignored; resolved (or dropped) before the empty entry, as written after it"
        );
        assert!(ceiling_dirs(None).is_empty());
    }

    #[test]
    fn store_choice_rules() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(d.path().join(".git")).expect("git");
        let sub = d.path().join("src");
        std::fs::create_dir(&sub).expect("sub");
        let flags = ScopeFlags::default();
        let never = |_: &Path| -> Result<bool> { panic!("must not ask") };
        let s = choose(&flags, &sub, Need::DefaultProject, false, never).expect("list");
        assert_eq!(s.dir, d.path().join(STORE_DIR));
        let e = choose(&flags, &sub, Need::Choice, false, never).expect_err("needs a choice");
        assert!(e.to_string().contains("--project") && e.to_string().contains("--global"));
        let s = choose(&flags, &sub, Need::Choice, true, |_| Ok(true)).expect("asked");
        assert_eq!(s.project_root.as_deref(), Some(d.path()));
        let outside = tempfile::tempdir().expect("tempdir");
        let e = choose(
            &ScopeFlags {
                project: true,
                ..Default::default()
            },
            outside.path(),
            Need::Choice,
            false,
            never,
        );
        assert!(e.expect_err("no repo").to_string().contains("--global"));
    }
}
