//! Steps every command that runs teammates shares: build the run spec, run the dispatcher
//! on a runtime, and turn the summary into an exit code.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::config::{self, RunOptions};
use crate::error::{EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_OK, Error, Result};
use crate::prompt::TeammateTemplate;
use crate::report::ItemStatus;
use crate::run::RunSpec;
use crate::run::dispatcher::{self, ItemStream};
use crate::run::events::{Reporter, RunSummary};
use crate::run::team::Team;
use crate::run::worktree::Isolation;

/// Assemble the run spec from validated options and the run's places.
pub fn run_spec(
    opts: RunOptions,
    isolation: Option<Arc<Isolation>>,
    team: String,
    workspace: PathBuf,
    cwd: PathBuf,
    template: TeammateTemplate,
    schema: Option<(Value, jsonschema::Validator)>,
) -> RunSpec {
    RunSpec {
        team,
        workspace,
        cwd,
        jobs: opts.jobs,
        timeout: opts.timeout,
        grace: opts.grace,
        pipe_wait: config::PIPE_WAIT,
        retries: opts.retries,
        retry_on: opts.retry_on,
        retry_delay: opts.retry_delay,
        log_cap: opts.log_cap,
        runner: opts.runner,
        command: opts.command,
        model: opts.model,
        agent_args: opts.agent_args,
        vars: opts.vars,
        template,
        schema,
        verify: opts.verify,
        isolation,
        rerun: Default::default(),
    }
}

/// Set up worktree isolation when `--isolate worktree`: the repository of `cwd`, and for
/// `--merge` a clean main working tree (ignoring the runner's own folders in `exclude`).
///
/// Errors: not a git repository, no commit, a dirty working tree with --merge (exit 2).
pub fn isolation(
    opts: &RunOptions,
    cwd: &Path,
    team: &str,
    exclude: &[PathBuf],
) -> Result<Option<Arc<Isolation>>> {
    if !opts.isolate {
        return Ok(None);
    }
    let iso = Isolation::new(
        cwd,
        team,
        opts.worktree_copy.clone(),
        opts.worktree_setup.clone(),
    )
    .map_err(Error::Input)?;
    for rel in &iso.copy {
        if !iso.repo.join(rel).exists() {
            return Err(Error::Input(format!(
                "--worktree-copy {}: no such file in {}",
                rel.display(),
                iso.repo.display()
            )));
        }
    }
    if opts.merge {
        let rel: Vec<PathBuf> = exclude
            .iter()
            .filter_map(|p| p.strip_prefix(&iso.repo).ok().map(Path::to_owned))
            .collect();
        let dirty = crate::run::worktree::dirty(&iso.repo, &rel).map_err(Error::Input)?;
        if !dirty.is_empty() {
            return Err(Error::Input(format!(
                "--merge needs a clean working tree in {}, and it has changes: {}; commit or stash them first",
                iso.repo.display(),
                dirty.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
            )));
        }
        if iso.base_branch.is_none() {
            return Err(Error::Input(
                "--merge needs a checked-out branch to merge into (HEAD is detached)".into(),
            ));
        }
    }
    Ok(Some(Arc::new(iso)))
}

/// After a run with worktree isolation: merge completed branches in item order (with
/// `--merge`; a conflict makes that item `failed`, recorded in the journal, its branch and
/// worktree kept), remove the worktrees of completed items, delete merged branches, and
/// print what is left for the user. The summary is corrected for items a merge failed.
///
/// Errors: the journal cannot be written.
pub fn finish_isolation(
    spec: &RunSpec,
    team: &mut Team,
    ids: &[String],
    merge: bool,
    quiet: bool,
    summary: &mut RunSummary,
) -> Result<()> {
    let Some(iso) = &spec.isolation else {
        return Ok(());
    };
    let mut merged = Vec::new();
    let mut to_merge = Vec::new();
    let mut kept = Vec::new();
    for id in ids {
        let Some(mut o) = team.outcome(id)? else {
            continue;
        };
        let Some(branch) = o.branch.clone() else {
            continue;
        };
        let path = spec.workspace.join("worktrees").join(&o.teammate);
        if o.status != ItemStatus::Completed {
            if path.exists() {
                kept.push((o.teammate.clone(), path, branch));
            }
            continue;
        }
        if merge {
            match iso.merge(&branch, &o.title) {
                Ok(()) => {
                    let _ = iso.remove(&path);
                    iso.delete_branch(&branch);
                    merged.push(branch);
                }
                Err(reason) => {
                    o.status = ItemStatus::Failed;
                    o.error = reason;
                    team.record(&crate::run::journal::Entry::ItemFinished {
                        outcome: Box::new(o.clone()),
                    })?;
                    summary.demote(&o);
                    kept.push((o.teammate.clone(), path, branch));
                }
            }
        } else {
            let _ = iso.remove(&path);
            to_merge.push(branch);
        }
    }
    let _ = crate::run::worktree::git_sync(&iso.repo, &["worktree", "prune"], &[]);
    if quiet {
        return Ok(());
    }
    let target = iso.base_branch.clone().unwrap_or_else(|| "HEAD".into());
    if !merged.is_empty() {
        println!("Merged into {target}: {}", merged.join(", "));
    }
    if !to_merge.is_empty() {
        println!("Completed branches to merge (git merge --no-ff BRANCH):");
        for b in &to_merge {
            println!("  {b}");
        }
    }
    if !kept.is_empty() {
        println!("Worktrees kept for inspection (remove them with `runner clean`):");
        for (teammate, path, branch) in &kept {
            println!("  {teammate}: {} (branch {branch})", path.display());
        }
    }
    Ok(())
}

/// Run the dispatcher to the end on a multi-threaded runtime.
///
/// Errors: the runtime cannot start, or the dispatcher failed (journal unwritable, source
/// unreadable).
pub fn execute(
    spec: Arc<RunSpec>,
    team: &mut Team,
    items: ItemStream,
    total: Option<u64>,
    reporter: &mut dyn Reporter,
) -> Result<RunSummary> {
    // At least four workers, even on two cores: a worker is held while a child is spawned
    // (until it execs) and while its teammate folder is created, so with fewer workers cores
    // sit idle between agents (measured in BENCHMARKS.md).
    let workers = std::thread::available_parallelism().map_or(4, |n| n.get().max(4));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| Error::Environment(format!("cannot start the async runtime: {e}")))?;
    let summary = runtime.block_on(dispatcher::run(spec, team, items, total, reporter));
    // Never wait on a blocking task (a child reaper) at shutdown: every group is killed by now.
    runtime.shutdown_background();
    let summary = summary?;
    // The dispatcher's signal handlers stay installed; while the outputs are written, an
    // interrupt must still end the process (every file is replaced atomically, so stopping
    // here leaves old or new files, never half-written ones).
    std::thread::spawn(|| {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) else {
                return;
            };
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
            eprintln!("runner: interrupted while writing the outputs");
            std::process::exit(crate::error::EXIT_INTERRUPTED);
        });
    });
    Ok(summary)
}

/// The exit code of a finished run (DESIGN §7).
pub fn exit_code(s: &RunSummary) -> i32 {
    if s.interrupted {
        EXIT_INTERRUPTED
    } else if s.count(ItemStatus::Completed) == s.total() {
        EXIT_OK
    } else {
        EXIT_INCOMPLETE
    }
}

/// Today's date in local time, `YYYY-MM-DD`.
pub fn today() -> String {
    jiff::Zoned::now().strftime("%Y-%m-%d").to_string()
}

/// Lines of each rendered prompt shown by `--dry-run`, from the item's section on.
const DRY_RUN_PROMPT_LINES: usize = 4;

/// `--dry-run`: print the plan (team, shard, runner argv, each item with its prerequisites
/// and the first lines of its rendered prompt) without running or writing anything.
///
/// Errors: the source failed while reading items.
pub fn print_plan(
    spec: &RunSpec,
    items: ItemStream,
    selected: u64,
    total: u64,
    shard: Option<crate::run::selection::Shard>,
    format: crate::ui::Format,
) -> Result<()> {
    use std::io::Write;
    // With --format json, stdout is for JSON events only: the plan goes to stderr.
    let mut out: Box<dyn Write> = if format == crate::ui::Format::Json {
        Box::new(std::io::stderr().lock())
    } else {
        Box::new(std::io::stdout().lock())
    };
    let shard = shard
        .map(|s| format!(", shard {}/{}", s.k, s.n))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "Plan for team {}: {selected} of {total} item(s){shard}, {} at a time, runner {}",
        spec.team, spec.jobs, spec.runner.name
    );
    let _ = writeln!(
        out,
        "Workspace: {} (dry run: nothing is created)",
        spec.workspace.display()
    );
    let timeout = spec.timeout.map_or("none".to_string(), |t| {
        humantime::format_duration(t).to_string()
    });
    let _ = writeln!(
        out,
        "Time limit per attempt: {timeout}; retries: {}",
        spec.retries
    );
    let mut first = true;
    for item in items {
        let item = item?;
        let dir = spec.teammate_dir(&item.teammate);
        let prompt_file = dir.join("prompt.md");
        let report = dir.join("report.json");
        let prompt = crate::run::unit::render_prompt(spec, &item, None)
            .unwrap_or_else(|e| format!("(cannot render: {e})"));
        if first {
            first = false;
            let args = crate::agent::definition::AttemptArgs {
                prompt_file: &prompt_file,
                report: &report,
                workspace: &dir,
                prompt: "<prompt>",
                model: spec.model.as_deref(),
                agent_args: &spec.agent_args,
                command: &spec.command,
                vars: &spec.vars,
            };
            if let Ok(inv) = spec.runner.invocation(&args) {
                let how = match spec.runner.prompt {
                    crate::agent::PromptMode::Stdin => "prompt on stdin",
                    crate::agent::PromptMode::File => "prompt in prompt.md",
                    crate::agent::PromptMode::Argument => "prompt as an argument",
                };
                let argv: Vec<String> = std::iter::once(inv.program)
                    .chain(inv.args)
                    .map(|a| shell_quote(&a))
                    .collect();
                let _ = writeln!(out, "Command (first item): {}   ({how})", argv.join(" "));
            }
            let _ = writeln!(out, "Items:");
        }
        let after = if item.after.is_empty() {
            String::new()
        } else {
            format!("  after: {}", item.after.join(", "))
        };
        let _ = writeln!(out, "  {}  (id {}){after}", item.teammate, item.id);
        let body: Vec<&str> = prompt
            .lines()
            .skip_while(|l| !l.starts_with("## Your item"))
            .filter(|l| !l.trim().is_empty())
            .take(DRY_RUN_PROMPT_LINES)
            .collect();
        for line in body {
            let _ = writeln!(out, "      | {line}");
        }
    }
    if first {
        let _ = writeln!(out, "Items: none");
    }
    Ok(())
}

/// Quote an argument for display the way a POSIX shell would need it.
fn shell_quote(a: &str) -> String {
    if !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        a.to_owned()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}
