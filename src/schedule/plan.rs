//! The plan of a run (DESIGN §1): one value a source adapter builds ([`RunSpec::new`],
//! [`Plan::new`], then only what differs) and validates before anything is written, and
//! [`crate::schedule::pipeline::run`] carries out. The files it writes are what its
//! sinks declare ([`Plan::outputs`]), so [`Plan::check`] sees every one. Also the planning
//! check of the dependency graph (`@after:` on todo items, `depends_on` in CSV; seeds
//! `pi-dag-workflow` `blockedBy` and `taskmaster-protocol` `depends_on`), pure: items in,
//! errors out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fsutil::same_file;
use crate::item::WorkItem;
use crate::run::RunSpec;
use crate::run::record::team::{self, BatchId};
use crate::schedule::dispatcher::ItemStream;
use crate::schedule::layout::{check_workspace_folder, teammate_roots, written_by_teammates};
use crate::sink::Sinks;
use crate::sink::junit::Junit;
use crate::sink::notify::Notify;
use crate::sink::terminal_progress::TerminalProgress;
use crate::sink::trace::Trace;

pub(crate) use crate::sink::plan_file::PlanFile;

/// Where a run's items come from, in input order. A source can be read more than once (the
/// dry run, the run, the isolation step and sinks that list every item each read it).
pub(crate) trait ItemSource: Send + Sync {
    /// A fresh stream of the items this run covers.
    ///
    /// Errors: the batch cannot be read any more (moved, changed, unreadable).
    fn items(&self) -> Result<ItemStream>;

    /// Attempts an earlier output records for items this run covers (a replay from the
    /// output alone, with no journal), for their attempt numbers to go on from.
    fn attempts_before(&self) -> Vec<(String, u32)> {
        Vec::new()
    }
}

/// Items held in memory (a todo batch: tens of items).
pub(crate) struct ItemList(pub Vec<WorkItem>);

impl ItemSource for ItemList {
    fn items(&self) -> Result<ItemStream> {
        Ok(Box::new(self.0.clone().into_iter().map(Ok)))
    }
}

/// One run, validated: what runs, how, and what it leaves.
pub(crate) struct Plan {
    /// The run's places and settings.
    pub spec: RunSpec,
    /// The items this run covers.
    pub source: Arc<dyn ItemSource>,
    /// How many items this run covers.
    pub selected: u64,
    /// How many items the batch holds in all (the dry run says "selected of total").
    pub total: u64,
    /// The sinks, in the order they finish: the source's, then those every run may have
    /// ([`Plan::new`]; the terminal UI is added by the pipeline). What they declare is what
    /// the run writes ([`Plan::outputs`]).
    pub sinks: Sinks,
    /// The main output table, named in the closing summary.
    pub output: PathBuf,
    /// Where the workspace's record goes when every item completed, before the workspace is
    /// removed ([`crate::run::record::archive`]; todo batches without `--keep-team`). `None`: the
    /// workspace stays.
    pub archive: Option<PathBuf>,
    /// The batch the workspace belongs to (recorded in it, refused by another batch's).
    pub batch: BatchId,
    /// What places the workspace, for messages that ask to move it.
    pub workspace_from: WorkspaceFrom,
    /// Files the run reads and never writes (input CSV, instruction, BATCH.md, schema,
    /// checkpoints).
    pub inputs: Vec<PlanFile>,
    /// Files the teammate prompt names besides the teammate's own folder (checkpoints).
    pub named_in_prompt: Vec<PathBuf>,
    /// Folders whose files no file named by a flag (`--output`, `--junit`, `--trace`) may
    /// replace: the todo store of a todo batch (its inbox, batch files, checkpoints). Every
    /// team workspace is guarded as well, found by its journal.
    pub guarded: Vec<PathBuf>,
    /// Rows read from stdin (`runner batch --input -`) and where in the workspace the
    /// pipeline copies them once the workspace is open: a pipe cannot be read again, and the
    /// copy lets the batch be resumed (`--input - < <workspace>/stdin.csv`).
    pub stdin_copy: Option<(crate::source::input::Spool, PathBuf)>,
    /// Interrupts sent by the caller besides SIGINT, SIGTERM and SIGHUP (`runner mcp`: a
    /// cancelled call, the `stop` tool, the client gone); each `send(())` counts as one
    /// Ctrl-C ([`crate::schedule::dispatcher::Interrupts`]). `None`: the signals only.
    pub interrupt: Option<tokio::sync::mpsc::UnboundedReceiver<()>>,
    /// The shared work queue this run is a worker of (`--queue`): its items come from there
    /// instead of straight from `source`. `None`: a run of its own.
    pub queue: Option<Box<dyn crate::schedule::feed::SharedQueue>>,
    /// Each item's expected duration, by id, with `--order longest-first`
    /// ([`crate::plans::order`]): the items start (or are seeded) longest first. `None`: in
    /// input order.
    pub weights: Option<Arc<HashMap<String, f64>>>,
}

/// What places a run's workspace: a CSV batch's output (`<output stem>.runner` beside it),
/// or a todo batch's store (`<store>/teams/<team>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkspaceFrom {
    /// `runner batch`: `--output` (or BATCH.md's `output`).
    Output,
    /// `runner resolve` / `runner run`: the store (`--store`, `--global`, `--project`).
    Store,
}

impl WorkspaceFrom {
    /// The option that moves the workspace.
    pub(crate) fn flag(self) -> &'static str {
        match self {
            WorkspaceFrom::Output => "--output",
            WorkspaceFrom::Store => "--store",
        }
    }
}

impl RunSpec {
    /// The run of team `team` in `workspace`, teammates working in `cwd` under `settings`
    /// with the prompt `template`, its worktree isolation prepared when the settings ask
    /// for it ([`crate::run::isolation::prepare`]); no schema, profiles, stages, inlined files
    /// or ids to rerun — a source sets those it has with `RunSpec { schema, ..RunSpec::new(…)? }`.
    /// (Here, beside [`Plan::new`]: a plan is what builds a run's spec.)
    ///
    /// Errors: the isolation cannot be set up (not a git repository, no commit, a detached
    /// HEAD with `--merge`; exit 2).
    pub(crate) fn new(
        team: String,
        workspace: PathBuf,
        cwd: PathBuf,
        settings: crate::settings::Settings,
        template: crate::prompt::TeammateTemplate,
    ) -> Result<RunSpec> {
        let isolation = crate::run::isolation::prepare(&settings, &cwd, &team)?;
        let mut settings = settings;
        let warnings = std::mem::take(&mut settings.warnings);
        Ok(RunSpec {
            team,
            origin: workspace.clone(),
            workspace,
            cwd,
            pipe_wait: crate::settings::PIPE_WAIT,
            settings,
            template,
            schema: None,
            isolation,
            rerun: Default::default(),
            files: None,
            cwd_in_git: Default::default(),
            profiles: Vec::new(),
            candidates: Vec::new(),
            stages: Vec::new(),
            judge_stage: None,
            shared_prompts: Default::default(),
            warnings,
            command_line: None,
            chains: Vec::new(),
        })
    }
}

impl Plan {
    /// The plan of running `spec` over the items of `source`, for `batch`, its workspace
    /// placed by `workspace_from`, its main output `output`; the source's `sinks` are
    /// followed by those every run may have (`--junit`, `--trace`, `--notify`, the terminal's
    /// OSC 9;4 progress). It reads no file, names
    /// nothing in the prompt, guards no folder, archives nothing and counts no item: a
    /// source sets what differs with `Plan { selected, total, inputs, ..Plan::new(…) }`.
    pub(crate) fn new(
        spec: RunSpec,
        source: Arc<dyn ItemSource>,
        mut sinks: Sinks,
        batch: BatchId,
        workspace_from: WorkspaceFrom,
        output: PathBuf,
    ) -> Plan {
        // Sinks every run may have, after the source's own.
        if let Some(path) = spec.settings.junit.clone() {
            let items = source.clone();
            let team = format!("{} ({})", spec.team, batch_label(&batch.input));
            sinks.push(Box::new(Junit::new(
                path,
                team,
                Box::new(move || items.items()),
            )));
        }
        if let Some(path) = spec.settings.trace.clone() {
            sinks.push(Box::new(Trace::new(path, spec.team.clone())));
        }
        if !spec.settings.notify.is_empty() {
            sinks.push(Box::new(Notify::new(
                &spec.settings.notify,
                spec.team.clone(),
            )));
        }
        if let Some(progress) = TerminalProgress::on_stderr() {
            sinks.push(Box::new(progress));
        }
        Plan {
            spec,
            source,
            selected: 0,
            total: 0,
            sinks,
            output,
            archive: None,
            batch,
            workspace_from,
            inputs: Vec::new(),
            named_in_prompt: Vec::new(),
            guarded: Vec::new(),
            stdin_copy: None,
            interrupt: None,
            queue: None,
            weights: None,
        }
    }

    /// Every file and folder the sinks write, as they declare them
    /// ([`crate::sink::Sink::writes`]; the output table, its shard sidecar, the todo batch
    /// file, table and store, the `--junit` report, the `--trace` file).
    pub(crate) fn outputs(&self) -> Vec<PlanFile> {
        self.sinks.writes()
    }

    /// Every file and folder this run writes: the workspace and [`Plan::outputs`].
    pub(crate) fn written(&self) -> Vec<PlanFile> {
        let flag = match self.spec.settings.workspace {
            Some(_) => "--workspace",
            None => self.workspace_from.flag(),
        };
        let mut all = vec![PlanFile::new("workspace", &self.spec.workspace, flag)];
        all.extend(self.outputs());
        all
    }

    /// The guarded folder `path` would land in: a team workspace (a folder holding a
    /// `journal.jsonl` or `team.json`, this run's own included), or one of [`Plan::guarded`].
    fn guarded_folder(&self, path: &Path) -> Option<PathBuf> {
        let real = crate::fsutil::real_path(path);
        if let Some(ws) = real
            .ancestors()
            .skip(1)
            .find(|a| a.join("journal.jsonl").is_file() || a.join("team.json").is_file())
        {
            return Some(ws.to_owned());
        }
        let own = crate::fsutil::real_path(&self.spec.workspace);
        if real.starts_with(&own) {
            return Some(own);
        }
        self.guarded
            .iter()
            .map(|g| crate::fsutil::real_path(g))
            .find(|g| real.starts_with(g))
    }

    /// The start-up checks every plan passes before anything is written (the pipeline runs
    /// them first, also for a dry run): no file the run writes is one it reads or another it
    /// writes (through `..`, symlinks and hard links too); the workspace belongs to this
    /// batch; the prompt can name every path it must (and with worktrees the workspace path
    /// is UTF-8); with `--merge`, the main working tree is clean but for the runner's own
    /// files.
    ///
    /// Errors: the first problem found (exit 2), naming the file and what to do.
    pub(crate) fn check(&self) -> Result<()> {
        self.definition_guard()
            .check(self.spec.settings.accept_changes)?;
        let written = self.written();
        // The agent program and the verify command's files are inputs too.
        let programs: Vec<PlanFile> = self
            .program_files()
            .iter()
            .map(|p| PlanFile::new("agent program or its file", p, ""))
            .collect();
        for (i, out) in written.iter().enumerate() {
            let clash = self
                .inputs
                .iter()
                .chain(&programs)
                .chain(&written[..i])
                .find(|other| same_file(&out.path, &other.path));
            if let Some(other) = clash {
                return Err(Error::Usage(format!(
                    "{}: the {} would overwrite the {} ({}); choose another {}",
                    out.path.display(),
                    out.what,
                    other.what,
                    other.path.display(),
                    out.flag
                )));
            }
        }
        for out in written
            .iter()
            .filter(|o| !o.flag.is_empty() && o.what != "workspace")
        {
            if let Some(folder) = self.guarded_folder(&out.path) {
                return Err(Error::Usage(format!(
                    "{}: the {} would be written inside {}, whose files the runner keeps (a team workspace's journal is what resume reads; a store holds the inbox and checkpoints); choose another {}",
                    out.path.display(),
                    out.what,
                    folder.display(),
                    out.flag
                )));
            }
        }
        // A file chosen by a flag replaces only an earlier file of its kind, as the sink that
        // declared it says ([`PlanFile::replacing`]): a slip of `-o` onto someone's notes
        // must not destroy them.
        for out in &written {
            if let Some(r) = out.replaces {
                crate::fsutil::check_replaceable(&out.path, out.flag, r.kind, r.ours)?;
            }
        }
        if let Some(dir) = &self.spec.settings.workspace {
            check_workspace_folder(dir)?;
        }
        team::check_owner(&self.spec.workspace, &self.batch)?;
        let probe = "1-x";
        let named = std::iter::once(self.spec.teammate(probe).report())
            .chain(self.named_in_prompt.iter().cloned());
        for path in named {
            if name_in_prompt(&self.spec, probe, &path).is_none() {
                return Err(Error::Usage(format!(
                    "{}: the teammate prompt must name this path, and it is not UTF-8 (nor is it below the teammates' working folder {}); run from the folder that holds it, or choose an --output (or a --workspace) whose path is UTF-8",
                    path.display(),
                    working_dir(&self.spec, probe).display()
                )));
            }
        }
        if self.spec.isolation.is_some() && self.spec.workspace.to_str().is_none() {
            return Err(Error::Usage(format!(
                "{}: --isolate worktree needs a workspace whose path is UTF-8 (worktree paths are given to git as text); choose an --output (or a --workspace) whose path is UTF-8",
                self.spec.workspace.display()
            )));
        }
        // Candidates sharing one work tree would edit the same files (DESIGN §13).
        let most = self.spec.most_candidates();
        if most > 1
            && self.spec.isolation.is_none()
            && crate::schedule::unit::agent_in_git_work_tree(&self.spec)
        {
            return Err(Error::Usage(format!(
                "best of {most}: the teammates work in a git repository, and candidates sharing its work tree would edit the same files; add --isolate worktree (each candidate works in its own worktree and branch; --merge then merges only the winner's)",
            )));
        }
        self.check_sandbox()?;
        if let Some(iso) = &self.spec.isolation
            && self.spec.settings.merge
        {
            let ours: Vec<PathBuf> = written.into_iter().map(|f| f.path).collect();
            crate::run::isolation::check_clean(iso, &ours)?;
        }
        Ok(())
    }
}

impl Plan {
    /// Settle `--sandbox auto` (the default) into what this run does: Landlock where the
    /// kernel has it ([`crate::sandbox::MIN_ABI`]) and the team workspace lies outside what
    /// teammates write; else none, the reason kept in `settings.sandbox_why_none` for the
    /// run's first line. A runner that starts no process (the HTTP backend) has nothing to
    /// confine, whatever was asked. Under Landlock, the runner definition's `[sandbox] vars`
    /// (its CLI's own sandbox handed over to ours) apply where no `--var` set them.
    /// Idempotent; every run settles before its checks.
    pub(crate) fn settle_sandbox(&mut self) {
        use crate::sandbox::Mode;
        let settings = &self.spec.settings;
        let why_none = if settings.sandbox == Mode::None {
            None
        } else if settings.runner.answers_only() {
            Some("no process to confine: the HTTP backend sends the requests itself".to_string())
        } else if settings.sandbox == Mode::Auto {
            match crate::sandbox::auto_refusal(crate::sandbox::kernel_abi()) {
                Some(why) => Some(format!("auto: {why}")),
                None => self
                    .layout_conflict()
                    .map(|c| format!("auto: {}", c.briefly)),
            }
        } else {
            None
        };
        let settings = &mut self.spec.settings;
        if let Some(why) = why_none {
            settings.sandbox = Mode::None;
            settings.sandbox_why_none = Some(why);
        } else if settings.sandbox == Mode::Auto {
            settings.sandbox = Mode::Landlock;
        }
        let (mode, why) = (
            self.spec.settings.sandbox,
            self.spec.settings.sandbox_why_none.clone(),
        );
        // A stage's or a row's own runner is confined as the team is, with its own
        // definition's sandbox variables.
        for p in &mut self.spec.profiles {
            p.settings.sandbox = mode;
            p.settings.sandbox_why_none = why.clone();
        }
        let own = std::iter::once(&mut self.spec.settings)
            .chain(self.spec.profiles.iter_mut().map(|p| &mut p.settings));
        for settings in own {
            if settings.sandbox == Mode::Landlock {
                for (name, value) in &settings.runner.sandbox.vars {
                    settings
                        .vars
                        .entry(name.clone())
                        .or_insert_with(|| value.clone());
                }
            }
        }
    }

    /// With `--sandbox landlock`, no teammate may be able to write the team workspace
    /// (journal, `team.json`, lock, siblings' folders) beyond its own teammate folder and
    /// worktree: refuse when the workspace and a writable root of a teammate hold one
    /// another ([`Plan::layout_conflict`]). Warns (once) when run as root.
    ///
    /// Errors: exit 2, naming the workspace, the root and what to change.
    fn check_sandbox(&self) -> Result<()> {
        let spec = &self.spec;
        if spec.settings.sandbox != crate::sandbox::Mode::Landlock {
            return Ok(());
        }
        // /proc/self belongs to the process's effective user.
        let root = std::os::unix::fs::MetadataExt::uid(
            &std::fs::metadata("/proc/self")
                .map_err(|e| Error::io("read", Path::new("/proc/self"), e))?,
        ) == 0;
        // Once per process: `resolve` checks its plan before it moves the items, and the
        // pipeline checks it again.
        static TOLD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if root && !TOLD.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(
                "running as root: under --sandbox landlock a teammate still has root's other powers (it can read other root processes' environments, change the owner of what it may write); run the runner as a normal user"
            );
        }
        if let Some(c) = self.layout_conflict() {
            return Err(Error::Usage(format!("--sandbox landlock: {}", c.fully)));
        }
        Ok(())
    }

    /// How the first writable root of a teammate ([`teammate_roots`]) that holds the team
    /// workspace or lies in it keeps teammates from being confined — Landlock grants a
    /// folder with everything beneath it — and what to change; `None` when none does.
    fn layout_conflict(&self) -> Option<Conflict> {
        let spec = &self.spec;
        let workspace = crate::fsutil::real_path(&spec.workspace);
        teammate_roots(&spec.settings, &spec.cwd)
            .into_iter()
            .find_map(|root| {
                let real = crate::fsutil::real_path(&root.path);
                let (holds, inside) = (workspace.starts_with(&real), real.starts_with(&workspace));
                if !holds && !inside {
                    return None;
                }
                let path = root.path.display();
                let ws = spec.workspace.display();
                Some(match &root.entry {
                    None => {
                        let (why, change) = self.why_workspace_here();
                        Conflict {
                            briefly: format!(
                                "the workspace lies inside {path}, which teammates write ({why}); to confine them, {change}"
                            ),
                            fully: format!(
                                "the team workspace {ws} lies inside {path} ({}; {why}), so a teammate could rewrite the journal or another teammate's report; {change}",
                                root.what
                            ),
                        }
                    }
                    Some(entry) => {
                        let how = if inside && !holds { "lies inside" } else { "holds" };
                        let said = format!(
                            "the runner definition's `[sandbox] writes` entry `{entry}` ({path}) {how} the team workspace {ws}"
                        );
                        Conflict {
                            briefly: format!("{said}; to confine teammates, narrow that entry"),
                            fully: format!(
                                "{said}, so a teammate could rewrite the journal or another teammate's report; narrow that entry (in a runner file: --runner-file)"
                            ),
                        }
                    }
                })
            })
    }

    /// Why the workspace lies where it does when that is inside what teammates write, and
    /// what moves it: `--workspace` chose it; an earlier run of this batch left it beside
    /// its output (resumed there); or the user's state folder lies there too.
    fn why_workspace_here(&self) -> (String, String) {
        let spec = &self.spec;
        let elsewhere = "give --workspace DIR outside it, or use --isolate worktree";
        if spec.settings.workspace.is_some() {
            return ("--workspace chose it".into(), elsewhere.into());
        }
        let written = written_by_teammates(&spec.settings, &spec.cwd);
        let state_apart = crate::state_dir::for_origin(&spec.origin).is_some_and(|s| !written(&s));
        if state_apart
            && spec.workspace == spec.origin
            && crate::state_dir::is_workspace(&spec.origin)
        {
            return (
                "an earlier run of this batch keeps it there".into(),
                format!(
                    "finish this batch or remove that workspace (`runner clean {}`): later runs keep theirs in the user's state folder; or {elsewhere}",
                    spec.origin.display()
                ),
            );
        }
        let state = match crate::state_dir::root() {
            Some(r) => format!("so does the user's state folder {}", r.display()),
            None => "no state folder elsewhere: HOME is not set".into(),
        };
        (
            state,
            format!("set XDG_STATE_HOME to a folder outside it, or {elsewhere}"),
        )
    }
}

/// Why a plan's layout cannot confine its teammates ([`Plan::layout_conflict`]).
struct Conflict {
    /// For the run's first line when `auto` runs unconfined.
    briefly: String,
    /// For the refusal of an explicit `--sandbox landlock` (exit 2).
    fully: String,
}

impl Plan {
    /// The files among the agent command's and the verify command's words (the program, a
    /// script it runs), relative to the run's working directory.
    fn program_files(&self) -> Vec<PathBuf> {
        let settings = &self.spec.settings;
        settings
            .command
            .iter()
            .chain(settings.verify.iter().flatten())
            .map(|a| self.spec.cwd.join(a))
            .filter(|p| p.is_file())
            .collect()
    }

    /// The files that decide what the next run of this batch does and that a sandboxed
    /// teammate could rewrite (issue 25, escape 5): its inputs but checkpoints (BATCH.md, the
    /// input, the instruction, the schema), the runner definition's file, the agent program's
    /// and the verify command's files — those inside a teammate's writable roots. Nothing
    /// without `--sandbox landlock` (a teammate can write anything then).
    pub(crate) fn definition_guard(&self) -> crate::run::record::definition::Guard {
        let spec = &self.spec;
        let mut files = Vec::new();
        if spec.settings.sandbox == crate::sandbox::Mode::Landlock {
            let roots: Vec<PathBuf> = teammate_roots(&spec.settings, &spec.cwd)
                .iter()
                .map(|r| crate::fsutil::real_path(&r.path))
                .collect();
            let candidates = self
                .inputs
                .iter()
                .filter(|f| f.what != "checkpoint")
                .map(|f| f.path.clone())
                .chain(spec.settings.runner_from.clone())
                .chain(self.program_files());
            for file in candidates {
                let real = crate::fsutil::real_path(&file);
                if roots.iter().any(|r| real.starts_with(r)) && !files.contains(&real) {
                    files.push(real);
                }
            }
        }
        crate::run::record::definition::Guard::new(&spec.workspace, files)
    }
}

/// The batch's input as a JUnit suite shows it: relative to the current folder when inside
/// it.
fn batch_label(input: &str) -> String {
    let here = std::env::current_dir().unwrap_or_default();
    Path::new(input)
        .strip_prefix(&here)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| input.to_owned())
}

/// Where `teammate` works: its worktree with isolation, else the run's folder.
pub(crate) fn working_dir(spec: &RunSpec, teammate: &str) -> PathBuf {
    match spec.isolation {
        Some(_) => spec.workspace.join("worktrees").join(teammate),
        None => spec.cwd.clone(),
    }
}

/// How the prompt of `teammate` names `path` exactly: the absolute path, or (when that is
/// not UTF-8) the path relative to where the teammate works. `None` when it cannot, which
/// [`Plan::check`] refuses at start-up.
pub(crate) fn name_in_prompt(spec: &RunSpec, teammate: &str, path: &Path) -> Option<String> {
    crate::fsutil::name_in_text(path, &working_dir(spec, teammate))
}

/// One item as [`check_dependencies`] sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Waits<'a> {
    /// The item's id (a CSV row's id, a todo item's number in its file).
    pub id: &'a str,
    /// 1-based line of the file where the item is, named in problems (0: none is named).
    pub line: u64,
    /// The ids it waits for.
    pub after: &'a [String],
}

impl<'a> From<&'a WorkItem> for Waits<'a> {
    fn from(item: &'a WorkItem) -> Waits<'a> {
        Waits {
            id: &item.id,
            line: item.line,
            after: &item.after,
        }
    }
}

/// The one rule for prerequisites and shards, whatever the source: an item may not wait for
/// an item of another shard (that shard's run decides it, so this one could never know).
/// `waits` gives each item's id and the prerequisites still to finish (one completed before
/// is met wherever it is).
///
/// Errors: the first such pair, as `item A waits for B, which is in another shard` (the
/// caller names its file).
pub(crate) fn check_shards<'a>(
    shard: Option<crate::options::selection::Shard>,
    waits: impl IntoIterator<Item = (&'a str, &'a [String])>,
) -> std::result::Result<(), String> {
    let Some(shard) = shard else {
        return Ok(());
    };
    let of = |id: &str| crate::options::selection::shard_of(id, shard.n);
    for (id, after) in waits {
        if let Some(d) = after.iter().find(|d| of(d) != of(id)) {
            return Err(format!(
                "item {id} waits for {d}, which is in another shard; shards must not depend on each other (run the batch unsharded, or drop the prerequisite)"
            ));
        }
    }
    Ok(())
}

/// Check that every prerequisite names an item of `items` and that there is no cycle.
///
/// Errors: one line per problem, naming the line of the item and the ids as `items` has
/// them (`line 4: item 3 waits for 9, which is not in this batch`; `line 2: a cycle of
/// prerequisites: 1 → 2 → 1; …`, at the line of the cycle's first item).
pub(crate) fn check_dependencies<'a>(
    items: impl IntoIterator<Item = Waits<'a>>,
) -> Result<(), Vec<String>> {
    let items: Vec<Waits<'a>> = items.into_iter().collect();
    let at = |line: u64| match line {
        0 => String::new(),
        n => format!("line {n}: "),
    };
    let ids: HashMap<&str, u64> = items.iter().map(|i| (i.id, i.line)).collect();
    let mut problems = Vec::new();
    for item in &items {
        for dep in item.after {
            if dep == item.id {
                problems.push(format!(
                    "{}item {} waits for itself",
                    at(item.line),
                    item.id
                ));
            } else if !ids.contains_key(dep.as_str()) {
                problems.push(format!(
                    "{}item {} waits for {dep}, which is not in this batch",
                    at(item.line),
                    item.id
                ));
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    // Depth-first search with colours; report the first cycle found.
    let graph: HashMap<&str, Vec<&str>> = items
        .iter()
        .map(|i| (i.id, i.after.iter().map(String::as_str).collect()))
        .collect();
    #[derive(Clone, Copy, PartialEq)]
    enum Colour {
        Grey,
        Black,
    }
    let mut colour: HashMap<&str, Colour> = HashMap::new();
    for root in items.iter().map(|i| i.id) {
        if colour.contains_key(root) {
            continue;
        }
        let mut stack: Vec<(&str, usize)> = vec![(root, 0)];
        let mut path: Vec<&str> = vec![root];
        colour.insert(root, Colour::Grey);
        while let Some((node, next)) = stack.last().copied() {
            let deps = &graph[node];
            if next < deps.len() {
                if let Some(top) = stack.last_mut() {
                    top.1 += 1;
                }
                let dep = deps[next];
                match colour.get(dep) {
                    Some(Colour::Grey) => {
                        let start = path.iter().position(|p| *p == dep).unwrap_or(0);
                        let mut cycle: Vec<&str> = path[start..].to_vec();
                        cycle.push(dep);
                        problems.push(format!(
                            "{}a cycle of prerequisites: {}; none of them can start, so drop one \
                             of these prerequisites",
                            at(ids.get(dep).copied().unwrap_or(0)),
                            cycle.join(" → ")
                        ));
                        return Err(problems);
                    }
                    Some(Colour::Black) => {}
                    None => {
                        colour.insert(dep, Colour::Grey);
                        stack.push((dep, 0));
                        path.push(dep);
                    }
                }
            } else {
                colour.insert(node, Colour::Black);
                stack.pop();
                path.pop();
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::events::Reporter;
    use crate::sink::Sink;

    /// A new sink, registered with nothing else edited: it only declares the file it writes.
    struct Notes(PathBuf);

    impl Reporter for Notes {}

    impl Sink for Notes {
        fn writes(&self) -> Vec<PlanFile> {
            vec![
                PlanFile::new("notes", &self.0, "--notes")
                    .replacing("notes of the runner", |b| b.starts_with(b"notes")),
            ]
        }
    }

    /// The plan of a batch read from `input`, its sinks `sinks`, working in `dir`.
    fn plan_with(dir: &Path, input: &Path, sinks: Vec<Box<dyn Sink>>) -> Plan {
        let runner = crate::agent::definition::load("exec", None, None).expect("exec");
        let settings = crate::settings::Settings {
            command: vec!["agent".into()],
            ..crate::settings::Settings::for_test(runner)
        };
        let template = crate::prompt::TeammateTemplate::new(
            Path::new("teammate.md"),
            crate::prompt::DEFAULT_TEAMMATE_TEMPLATE,
        )
        .expect("template");
        let spec = RunSpec::new(
            "t".into(),
            dir.join("t.runner"),
            dir.into(),
            settings,
            template,
        )
        .expect("spec");
        let mut registered = Sinks::default();
        for s in sinks {
            registered.push(s);
        }
        let batch = BatchId::new(input, String::new());
        Plan {
            inputs: vec![PlanFile::new("input", input, "")],
            ..Plan::new(
                spec,
                Arc::new(ItemList(Vec::new())),
                registered,
                batch,
                WorkspaceFrom::Output,
                dir.join("out.csv"),
            )
        }
    }

    #[test]
    fn a_registered_sink_is_checked_with_no_other_edit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let input = dir.path().join("in.csv");
        std::fs::write(&input, "id\n1\n").expect("input");
        let notes = dir.path().join("notes.txt");
        let fine = plan_with(dir.path(), &input, vec![Box::new(Notes(notes.clone()))]);
        assert!(fine.check().is_ok());
        assert!(
            fine.written().iter().any(|f| f.path == notes),
            "its file is among the written ones"
        );
        assert_eq!(
            fine.sinks.files(),
            vec![notes.clone()],
            "and named by run_ended"
        );

        // Over an input.
        let e = plan_with(dir.path(), &input, vec![Box::new(Notes(input.clone()))])
            .check()
            .expect_err("over the input");
        assert_eq!(
            e.to_string(),
            format!(
                "{0}: the notes would overwrite the input ({0}); choose another --notes",
                input.display()
            )
        );
        // Over another sink's file.
        let other = dir.path().join("other.txt");
        let e = plan_with(
            dir.path(),
            &input,
            vec![
                Box::new(Notes(other.clone())),
                Box::new(Notes(other.clone())),
            ],
        )
        .check()
        .expect_err("over another output");
        assert!(
            e.to_string()
                .contains("the notes would overwrite the notes"),
            "{e}"
        );
        // Over an existing file that is not of its kind.
        std::fs::write(&other, "someone's draft\n").expect("draft");
        let e = plan_with(dir.path(), &input, vec![Box::new(Notes(other.clone()))])
            .check()
            .expect_err("over a file of another kind");
        assert!(e.to_string().contains("notes of the runner"), "{e}");
        std::fs::write(&other, "notes of an earlier run\n").expect("ours");
        assert!(
            plan_with(dir.path(), &input, vec![Box::new(Notes(other))])
                .check()
                .is_ok(),
            "its own kind of file is replaced"
        );
    }

    /// Item `id` on line `line` of its file, waiting for `after`.
    fn item(id: &str, line: u64, after: &[&str]) -> WorkItem {
        WorkItem {
            id: id.into(),
            title: id.into(),
            line,
            teammate: id.into(),
            vars: vec![],
            body: String::new(),
            inline: Vec::new(),
            checkpoint: None,
            after: after.iter().map(|s| s.to_string()).collect(),
            content: String::new(),
            stage: None,
            profile: None,
            candidate: None,
        }
    }

    fn check(items: &[WorkItem]) -> Result<(), Vec<String>> {
        check_dependencies(items.iter().map(Waits::from))
    }

    #[test]
    fn chains_and_diamonds_are_fine() {
        assert!(
            check(&[
                item("1", 1, &[]),
                item("2", 2, &["1"]),
                item("3", 3, &["2"])
            ])
            .is_ok()
        );
        assert!(
            check(&[
                item("a", 2, &[]),
                item("b", 3, &["a"]),
                item("c", 4, &["a"]),
                item("d", 5, &["b", "c"])
            ])
            .is_ok()
        );
    }

    #[test]
    fn unknown_ids_and_cycles_are_named_with_their_lines() {
        let e = check(&[item("1", 4, &["9"])]).expect_err("unknown");
        assert_eq!(
            e,
            vec!["line 4: item 1 waits for 9, which is not in this batch"]
        );
        let e = check(&[item("7", 3, &["7"])]).expect_err("itself");
        assert_eq!(e, vec!["line 3: item 7 waits for itself"]);
        let e = check(&[
            item("1", 2, &["3"]),
            item("2", 5, &["1"]),
            item("3", 9, &["2"]),
        ])
        .expect_err("cycle");
        assert!(e[0].starts_with("line 2: a cycle of prerequisites: 1 → 3 → 2 → 1; "));
        let e = check_dependencies([
            Waits {
                id: "a",
                line: 0,
                after: &["b".to_string()],
            },
            Waits {
                id: "b",
                line: 0,
                after: &["a".to_string()],
            },
        ])
        .expect_err("cycle");
        assert!(
            e[0].starts_with("a cycle of prerequisites: a → b → a; "),
            "no line to name: {e:?}"
        );
    }
}
