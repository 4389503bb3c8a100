//! `--dry-run`: the plan of a run as people read it, written before anything is created.

use std::io::Write;

use super::Format;
use crate::run::record::journal::Replay;
use crate::schedule::plan::Plan;

/// Lines of each rendered prompt shown by `--dry-run`, from the item's section on.
const DRY_RUN_PROMPT_LINES: usize = 4;

/// `--dry-run`: print the plan (team, shard, runner argv, each item with its prerequisites
/// and the first lines of its rendered prompt) without running or writing anything. Items
/// that `earlier` (the team's journal, when it has one) shows completed with the same content
/// are marked and not counted as running. With `--format json` it goes to stderr: stdout is
/// for JSON events only.
///
/// Errors: the source failed while reading items.
pub(crate) fn print_plan(
    plan: &Plan,
    earlier: Option<&Replay>,
    backend: &dyn crate::run::backend::Backend,
) -> crate::error::Result<()> {
    let spec = &plan.spec;
    // What planning warned of, on stderr as a run shows it, before the plan itself.
    for w in &spec.warnings {
        crate::ui::warn(w);
    }
    let done_before = |item: &crate::item::WorkItem| {
        earlier
            .is_some_and(|r| crate::run::record::journal::done_before(&r.ledger, &spec.rerun, item))
    };
    let resumed = match earlier {
        Some(r) => crate::run::record::journal::count_done_before(
            &r.ledger,
            &spec.rerun,
            plan.source.items()?,
        )?,
        None => 0,
    };
    let mut out = SafeLines(if spec.settings.format == Format::Json {
        Box::new(std::io::stderr().lock())
    } else {
        Box::new(std::io::stdout().lock())
    });
    for line in heading_lines(plan, resumed)
        .into_iter()
        .chain(chain_lines(spec))
    {
        let _ = writeln!(out, "{line}");
    }
    let mut first = true;
    // Items whose task text cannot be made (a `{file:}` that is not there): they fail at
    // once, and what waits on them (a row's later stages) is skipped.
    let mut failing: Vec<String> = Vec::new();
    // The candidates and most attempts of the items that fan out, in all.
    let mut fanned = (0u64, 0u64);
    for item in plan.source.items()? {
        let mut item = item?;
        // An earlier stage's values are known once it ran: shown by name.
        crate::source::stages::fill(&mut item, |id, what| {
            let stage = id.rsplit('/').next().unwrap_or_default();
            Ok(format!("«{stage}.{what}»"))
        })?;
        if first {
            first = false;
            if let Some(line) = command_line(spec, backend, &item) {
                let _ = writeln!(out, "{line}");
            }
            let _ = writeln!(out, "Items:");
        }
        if done_before(&item) {
            let _ = writeln!(
                out,
                "  {}  (id {})  completed earlier; not run again",
                item.teammate, item.id
            );
            continue;
        }
        if let Some(dep) = item.after.iter().find(|d| failing.contains(d)) {
            let _ = writeln!(
                out,
                "  {}  (id {})  skipped when run: {dep}, which it waits for, fails",
                item.teammate, item.id
            );
            failing.push(item.id.clone());
            continue;
        }
        let (lines, fails) = item_lines(spec, &item);
        if let Some((_, candidates, worst)) = fan_out_line(spec, &item) {
            fanned = (fanned.0 + candidates, fanned.1 + worst);
        }
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
        if fails {
            failing.push(item.id.clone());
        }
    }
    if first {
        let _ = writeln!(out, "Items: none");
    }
    if fanned.0 > 0 && fan_out_varies(spec) {
        let _ = writeln!(
            out,
            "Best of N in all: {} candidate(s), at most {} attempt(s)",
            fanned.0, fanned.1
        );
    }
    if !failing.is_empty() {
        let _ = writeln!(
            out,
            "Will not complete, as planned now: {} item(s): {}",
            failing.len(),
            failing.join(", ")
        );
    }
    Ok(())
}

/// Where the plan goes: each write shown, never obeyed ([`crate::ui::terminal_safe`]) —
/// item ids, titles and prompts are a user's or a teammate's text.
struct SafeLines<'a>(Box<dyn Write + 'a>);

impl Write for SafeLines<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = crate::ui::terminal_safe(&String::from_utf8_lossy(buf));
        self.0.write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The plan's lines before its items: the team and how many items run (`resumed` of them
/// completed earlier), the workspace, output, sandbox, settings, time limit, limits, stages.
fn heading_lines(plan: &Plan, resumed: u64) -> Vec<String> {
    let spec = &plan.spec;
    let shard = spec
        .settings
        .shard
        .map(|s| format!(", shard {}/{}", s.k, s.n))
        .unwrap_or_default();
    let earlier_note = if resumed > 0 {
        format!(" ({resumed} completed earlier, not run again)")
    } else {
        String::new()
    };
    let mut lines = vec![
        format!(
            "Plan for team {}: {} of {} item(s){shard}{earlier_note}, {} at a time, {}",
            spec.team,
            plan.selected - resumed,
            plan.total,
            spec.settings.jobs,
            match &spec.settings.runner.replaces_builtin {
                Some(file) => replaced_text(&spec.settings.runner.name, file),
                None => format!("runner {}", spec.settings.runner.name),
            }
        ),
        format!(
            "Workspace: {} (dry run: nothing is created)",
            spec.workspace.display()
        ),
        format!("Output: {}", plan.output.display()),
        format!("Sandbox: {}", sandbox_line(spec)),
    ];
    lines.extend(settings_lines(&spec.settings, spec.schema.is_some()));
    let timeout = spec.settings.timeout.map_or("none".to_string(), |t| {
        humantime::format_duration(t).to_string()
    });
    lines.push(format!(
        "Time limit per attempt: {timeout}; retries: {}",
        spec.settings.retries
    ));
    if spec.settings.best_of > 1 {
        let n = spec.settings.best_of as u64;
        let items = plan.selected - resumed;
        lines.push(format!(
            "Best of {n}: each item goes to {n} candidates (teammates ITEM.c1 … ITEM.c{n}, each its own folder{}{}), judge {}; {} (each candidate's attempt counts against --jobs and --max-cost-usd)",
            if spec.isolation.is_some() { " and worktree" } else { "" },
            match spec.settings.best_of_runners.is_empty() {
                true => String::new(),
                false => {
                    let each: Vec<&str> = spec
                        .candidates
                        .iter()
                        .filter_map(|p| spec.profiles.get(*p as usize))
                        .map(|p| p.label.as_str())
                        .collect();
                    format!("; {}", each.join(", "))
                }
            },
            match &spec.judge_stage {
                Some(j) => format!(
                    "stage {} (once per item whose candidates two or more passed, each of them in its prompt)",
                    j.name
                ),
                None => spec.settings.judge.word().to_owned(),
            },
            match fan_out_varies(spec) {
                true => "rows and stages may choose their own fan-out (see under Items), the totals after the items".to_owned(),
                false => format!(
                    "{} candidate(s) in all, at most {} attempt(s)",
                    items * n,
                    items * n * (1 + spec.settings.retries as u64)
                ),
            },
        ));
    }
    let limits = &spec.settings.limits;
    lines.push(format!(
        "Limits: rate limits wait up to {} per item; budget: {}; max-fail: {}",
        humantime::format_duration(limits.rate_limit_wait),
        limits.max_cost_usd.map_or("none".into(), |c| format!(
            "${}",
            crate::run::record::outcome::usd_text(c)
        )),
        limits.max_fail.map_or("none".into(), |m| format!(
            "{}{}",
            m.count,
            if m.immediate { ":immediate" } else { "" }
        )),
    ));
    lines.extend(stage_lines(spec));
    lines
}

/// What each item's attempt sends, shown for the first `item`: the backend's request, or
/// the agent CLI's command line (secrets hidden) and how the prompt reaches it.
fn command_line(
    spec: &crate::run::RunSpec,
    backend: &dyn crate::run::backend::Backend,
    item: &crate::item::WorkItem,
) -> Option<String> {
    // The item's own stage (or row choice) says which backend and schema it runs with.
    let backend = spec
        .profile_of(item)
        .map_or(backend, |p| p.backend.as_ref());
    if let Some(request) = backend.describe(spec.schema_for(item).is_some()) {
        let each = match spec.stages.is_empty() {
            true => "each item",
            false => "first stage; each stage's own under Stages",
        };
        return Some(format!("Request ({each}): {request}"));
    }
    let folder = spec.teammate(&item.teammate);
    let (prompt_file, report, work) = (folder.prompt(), folder.report(), folder.work());
    let args = crate::agent::definition::AttemptArgs {
        prompt_file: &prompt_file,
        report: &report,
        workspace: &work,
        prompt: "<prompt>",
        model: spec.settings.model.as_deref(),
        agent_args: &spec.settings.agent_args,
        command: &spec.settings.command,
        vars: &spec.settings.vars,
        in_git_work_tree: crate::schedule::unit::agent_in_git_work_tree(spec),
    };
    let inv = spec.settings.runner.invocation(&args).ok()?;
    let how = match spec.settings.runner.prompt {
        crate::agent::PromptMode::Stdin => "prompt on stdin",
        crate::agent::PromptMode::Pipe => "prompt on stdin through a pipe",
        crate::agent::PromptMode::File => "prompt in prompt.md",
        crate::agent::PromptMode::Argument => "prompt as an argument",
    };
    let argv: Vec<String> = crate::redact::agent_argv(std::iter::once(inv.program).chain(inv.args))
        .iter()
        .map(|a| shell_quote(a))
        .collect();
    Some(format!(
        "Command (first item): {}   ({how})",
        argv.join(" ")
    ))
}

/// An item that runs: its teammate, id and prerequisites, then the first lines of its
/// rendered prompt from its own section on. The files the instruction inlines are read as
/// the run would read them; one that cannot be used is shown as the item's failure (then
/// `true`).
fn item_lines(spec: &crate::run::RunSpec, item: &crate::item::WorkItem) -> (Vec<String>, bool) {
    let (prompt, fails) = match crate::schedule::unit::item_text(spec, item) {
        Ok(text) => (
            crate::schedule::unit::render_prompt(spec, item, &text.body, None)
                .unwrap_or_else(|e| format!("(cannot render: {e})")),
            false,
        ),
        Err(why) => (
            format!("## Your item\n(fails with kind input: {why})"),
            true,
        ),
    };
    let after = if item.after.is_empty() {
        String::new()
    } else {
        format!("  after: {}", item.after.join(", "))
    };
    let mut lines = vec![format!("  {}  (id {}){after}", item.teammate, item.id)];
    lines.extend(fan_out_line(spec, item).map(|(line, _, _)| line));
    let body = prompt
        .lines()
        .skip_while(|l| !l.starts_with("## Your item"))
        .filter(|l| !l.trim().is_empty())
        .take(DRY_RUN_PROMPT_LINES);
    // A long value (a whole file in a cell) shows as its start.
    lines.extend(body.map(|line| format!("      | {}", crate::report::one_line(line, 200))));
    (lines, fails)
}

/// An item that fans out (the batch's `--best-of`, its stage's `best_of:`, its row's
/// `best_of_column` cell): to how many candidates (and their runners), and the most attempts
/// they make (each candidate's first and every retry): the line, the candidates and the
/// attempts.
fn fan_out_line(
    spec: &crate::run::RunSpec,
    item: &crate::item::WorkItem,
) -> Option<(String, u64, u64)> {
    let s = spec.settings_for(item);
    if s.best_of <= 1 {
        return None;
    }
    let runners: Vec<String> = (1..=s.best_of)
        .filter_map(|k| {
            spec.candidate_profile(item, k)
                .filter(|p| Some(*p) != item.profile)
        })
        .filter_map(|p| spec.profiles.get(p as usize))
        .map(|p| match &p.settings.model {
            Some(m) => format!("{}:{m}", p.settings.runner.name),
            None => p.settings.runner.name.clone(),
        })
        .collect();
    let worst: u64 = (1..=s.best_of)
        .map(|k| {
            let c = crate::item::WorkItem {
                profile: spec.candidate_profile(item, k),
                ..item.clone()
            };
            1 + u64::from(spec.settings_for(&c).retries)
        })
        .sum();
    let line = format!(
        "      best of {}{}: at most {worst} attempt(s), judge {}",
        s.best_of,
        match runners.is_empty() {
            true => String::new(),
            false => format!(" ({})", runners.join(", ")),
        },
        s.judge.word()
    );
    Some((line, u64::from(s.best_of), worst))
}

/// Whether an item's fan-out may differ from the batch's: rows choose theirs
/// (`best_of_column`) or a stage has its own (`best_of:`).
fn fan_out_varies(spec: &crate::run::RunSpec) -> bool {
    spec.settings.best_of_column.is_some() || !spec.stages.is_empty()
}

/// With stages or rows that choose their runner: the chain each row runs, and what each
/// profile runs with (runner, command, model, verify, time limit, retries, schema); a
/// profile a row's choice made is named by that choice (`stage fix, model big`).
fn stage_lines(spec: &crate::run::RunSpec) -> Vec<String> {
    let mut lines = Vec::new();
    if !spec.stages.is_empty() {
        lines.push(format!(
            "Stages (each row, one teammate each; a stage that does not complete stops its row): {}",
            spec.stages.join(" → ")
        ));
    }
    for p in &spec.profiles {
        let s = &p.settings;
        let mut what = Vec::new();
        if !p.label.contains("runner ") {
            what.push(format!("runner {}", s.runner.name));
        }
        if !s.command.is_empty() {
            what.push(format!("command {}", shown_command(&s.command)));
        }
        if let Some(m) = s.model.as_ref().filter(|_| !p.label.contains("model ")) {
            what.push(format!("model {m}"));
        }
        if let Some(v) = &s.verify {
            what.push(format!("verify {}", shown_command(v)));
        }
        if let Some(t) = s.timeout {
            what.push(format!("time limit {}", humantime::format_duration(t)));
        }
        what.push(format!("retries {}", s.retries));
        if p.schema.is_some() {
            what.push("output schema".into());
        }
        // A request backend says how it asks for the report (strict json_schema, …).
        if let Some(request) = p.backend.describe(p.schema.is_some()) {
            // `POST URL   (model M, MODE)`: the MODE.
            let mode = request
                .lines()
                .next()
                .and_then(|l| l.split_once("   ("))
                .and_then(|(_, rest)| rest.strip_suffix(')')?.split_once(", "))
                .map(|(_, mode)| mode.to_owned());
            what.extend(mode);
        }
        lines.push(format!("  {}: {}", p.label, what.join(", ")));
    }
    lines
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

/// A built-in runner a repository's definition replaced, as the run's first line and the
/// plan announce it: `runner claude from FILE, which replaces the built-in`.
pub(crate) fn replaced_text(name: &str, file: &std::path::Path) -> String {
    format!(
        "runner {name} from {}, which replaces the built-in",
        file.display()
    )
}

/// What `--sandbox` means for this plan, in one line.
fn sandbox_line(spec: &crate::run::RunSpec) -> String {
    match spec.settings.sandbox {
        crate::sandbox::Mode::None => match spec.settings.unconfined() {
            Some(what) => format!("none ({what})"),
            None => "none".into(),
        },
        // A plan is settled before it is printed; `auto` here would be a bug, shown as such.
        crate::sandbox::Mode::Auto => "auto (not settled)".into(),
        crate::sandbox::Mode::Landlock => format!(
            "landlock (each teammate writes only {}, its teammate folder{})",
            match spec.isolation {
                Some(_) => "its worktree",
                None => "the working directory",
            },
            if spec.settings.runner.sandbox.writes.is_empty() {
                String::new()
            } else {
                format!(" and {}", spec.settings.runner.sandbox.writes.join(", "))
            }
        ),
    }
}

/// With `--serialize-overlaps`: the chains of rows that run one after another
/// (`Serialized: a → c → d`), or that none do.
fn chain_lines(spec: &crate::run::RunSpec) -> Vec<String> {
    if !spec.settings.serialize_overlaps {
        return Vec::new();
    }
    if spec.chains.is_empty() {
        return vec![
            "Serialized (--serialize-overlaps): no rows will touch the same files; all run in parallel"
                .into(),
        ];
    }
    let mut lines = vec![
        "Serialized (--serialize-overlaps): each row below starts once the one before it merged, from its merge; other rows run in parallel"
            .to_string(),
    ];
    lines.extend(spec.chains.iter().map(|c| format!("  {}", c.join(" → "))));
    lines
}

/// A command line of the user's as the plan shows it: quoted for a shell, secrets hidden
/// ([`crate::redact::agent_argv`]).
fn shown_command(argv: &[String]) -> String {
    let shown = crate::redact::agent_argv(argv.iter().cloned());
    shlex::try_join(shown.iter().map(String::as_str)).unwrap_or_default()
}

/// The settings a user checks before a run that the plan's other lines do not show: the
/// isolation (with worktree copy and set-up), the verify command, the output schema, the
/// model and agent arguments, kept formulas (or raw columns). Each only when it applies, but isolation.
fn settings_lines(s: &crate::settings::Settings, schema: bool) -> Vec<String> {
    let mut lines = vec![super::isolation_line(s).to_string()];
    if s.isolate && !s.worktree_copy.is_empty() {
        let copied: Vec<String> = s
            .worktree_copy
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        lines.push(format!(
            "  copied into each worktree: {}",
            copied.join(", ")
        ));
    }
    if s.merge && !s.review && s.on_conflict.hands_off() {
        let who = match &s.on_conflict {
            crate::options::on_conflict::OnConflict::Runner {
                name,
                model: Some(m),
            } => {
                format!("runner {name}, model {m}")
            }
            crate::options::on_conflict::OnConflict::Runner { name, model: None } => {
                format!("runner {name}")
            }
            _ => "the run's own runner".to_owned(),
        };
        lines.push(format!(
            "  a conflicting merge goes to a resolver ({who}; {} attempt(s) per item)",
            s.conflict_attempts
        ));
    }
    if let Some(setup) = s.worktree_setup.as_ref().filter(|_| s.isolate) {
        lines.push(format!(
            "  set-up in each worktree: {}",
            shown_command(setup)
        ));
    }
    if let Some(v) = &s.verify {
        lines.push(format!("Verify (must exit 0): {}", shown_command(v)));
    }
    if schema {
        lines.push("Output schema: each report's `output` is checked against it".into());
    }
    if let Some(m) = &s.model {
        lines.push(format!("Model: {m}"));
    }
    if s.keep_formulas {
        lines.push("Formulas: agents' values written as they are (--keep-formulas)".into());
    } else if !s.raw_columns.is_empty() {
        lines.push(format!(
            "Formulas: agents' values guarded with a leading ', but for {} (raw_columns)",
            s.raw_columns.join(", ")
        ));
    }
    if !s.notify.is_empty() {
        let to: Vec<String> = s.notify.iter().map(|t| t.shown()).collect();
        lines.push(format!(
            "Notify (the end, blocked items, the team's stop; once each): {}",
            to.join(", ")
        ));
    }
    lines.push(match s.keep_logs {
        true => "Completed items: their folders kept, with every log (--keep-logs)".into(),
        false => "Completed items: compacted into completed.jsonl (prompt, each log's last 4 KB), their folders removed; --keep-logs keeps them".into(),
    });
    lines
}
