//! `runner batch`: one teammate per row of a CSV file (DESIGN §2, §3, §8).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::common;
use crate::cli::BatchArgs;
use crate::config::{self, FileDefaults};
use crate::error::{Error, Result};
use crate::item::{WorkItem, teammate_name};
use crate::prompt::{DEFAULT_TEAMMATE_TEMPLATE, Instruction, TeammateTemplate};
use crate::run::dispatcher::ItemStream;
use crate::run::events::RunSummary;
use crate::run::outcome::{Fnv, Outcome};
use crate::run::selection::{Only, Shard, shard_of};
use crate::run::team::Team;
use crate::run::{RunSpec, plan};
use crate::sink::output_csv::{self, Layout};
use crate::sink::previous::Previous;
use crate::sink::shard_meta::ShardMeta;
use crate::source::batch_spec::{self, BatchSpec, SchemaSource};
use crate::source::csv_input::{self, CsvRow, CsvRows, CsvTable};

/// The column that names a row's prerequisites (ids separated by `;`).
pub const DEPENDS_ON: &str = "depends_on";

/// Everything `batch` needs, validated, before any file is written.
struct BatchPlan {
    input: PathBuf,
    table: CsvTable,
    instruction: Instruction,
    instruction_text: String,
    output: PathBuf,
    workspace: PathBuf,
    team: String,
    id_column: Option<String>,
    selection: Selection,
    layout: Layout,
    /// Prerequisites by id, when the input has a `depends_on` column.
    deps: Option<HashMap<String, Vec<String>>>,
    /// Items this run covers.
    selected: u64,
}

/// Which rows this run covers: its shard, and `--only` against the previous output. Cheap
/// to clone into the item stream.
#[derive(Clone)]
struct Selection {
    shard: Option<Shard>,
    only: Only,
    previous: Option<Arc<Previous>>,
}

impl Selection {
    /// Whether the row with `id` belongs to this run's output (its shard).
    fn in_shard(&self, id: &str) -> bool {
        self.shard.is_none_or(|s| s.contains(id))
    }

    /// Whether the previous output shows `id` completed.
    fn completed_before(&self, id: &str) -> bool {
        self.previous.as_ref().is_some_and(|p| p.completed(id))
    }

    /// Whether the row with `id` is run (shard and `--only`).
    fn runs(&self, id: &str) -> bool {
        self.in_shard(id)
            && match &self.only {
                Only::All => true,
                Only::Failed => !self.completed_before(id),
                Only::Ids(ids) => ids.contains(id),
            }
    }
}

fn read_text(path: &Path, what: &str) -> Result<String> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::Input(format!("{}: cannot read {what}: {e}", path.display())))?;
    String::from_utf8(bytes).map_err(|_| {
        Error::Input(format!(
            "{}: {what} is not valid UTF-8; save it as UTF-8",
            path.display()
        ))
    })
}

fn open_input(path: &Path) -> Result<std::fs::File> {
    std::fs::File::open(path).map_err(|e| {
        Error::Input(format!(
            "{}: cannot read the input CSV: {e}",
            path.display()
        ))
    })
}

fn split_deps(value: &str) -> Vec<String> {
    value
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Stream the input once more: the batch fingerprint, the `depends_on` graph (checked), and
/// how many rows this run covers.
fn survey(plan: &mut BatchPlan, schema: Option<&serde_json::Value>) -> Result<String> {
    let mut fp = Fnv::default();
    {
        use std::io::Read;
        let mut f = open_input(&plan.input)?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = f
                .read(&mut buf)
                .map_err(|e| Error::io("read", &plan.input, e))?;
            if n == 0 {
                break;
            }
            fp.update(&buf[..n]);
        }
    }
    fp.update(b"\0instruction\0");
    fp.update(plan.instruction_text.as_bytes());
    fp.update(b"\0schema\0");
    fp.update(schema.map(|s| s.to_string()).unwrap_or_default().as_bytes());
    fp.update(b"\0id\0");
    fp.update(plan.id_column.as_deref().unwrap_or("").as_bytes());
    let dep_col = plan.table.headers.iter().position(|h| h == DEPENDS_ON);
    let mut deps: HashMap<String, Vec<String>> = HashMap::new();
    let mut selected = 0u64;
    let mut ids: HashSet<String> = HashSet::new();
    for row in CsvRows::new(open_input(&plan.input)?, &plan.table)? {
        let row = row?;
        if plan.selection.runs(&row.id) {
            selected += 1;
        }
        if let Only::Ids(wanted) = &plan.selection.only
            && wanted.contains(&row.id)
        {
            ids.insert(row.id.clone());
        }
        if let Some(c) = dep_col {
            let d = split_deps(row.values.get(c).map_or("", String::as_str));
            if !d.is_empty() {
                deps.insert(row.id.clone(), d);
            }
            ids.insert(row.id);
        }
    }
    if let Only::Ids(wanted) = &plan.selection.only {
        let unknown: Vec<&String> = wanted.iter().filter(|id| !ids.contains(*id)).collect();
        if !unknown.is_empty() {
            return Err(Error::Input(format!(
                "--only names ids that are not in {}: {} (ids are separated by commas)",
                plan.input.display(),
                join(&unknown)
            )));
        }
    }
    if dep_col.is_some() {
        let items: Vec<WorkItem> = ids
            .iter()
            .map(|id| WorkItem {
                id: id.clone(),
                title: String::new(),
                line: 0,
                teammate: String::new(),
                vars: Vec::new(),
                body: String::new(),
                checkpoint: None,
                after: deps.get(id).cloned().unwrap_or_default(),
                content: String::new(),
            })
            .collect();
        let mut items = items;
        items.sort_by(|a, b| a.id.cmp(&b.id));
        plan::check_dependencies(&items).map_err(|p| {
            Error::Input(format!(
                "{}: column `{DEPENDS_ON}`: {}",
                plan.input.display(),
                p.join("; ")
            ))
        })?;
        if let Some(shard) = plan.selection.shard {
            for (id, ds) in &deps {
                for d in ds {
                    if shard_of(id, shard.n) != shard_of(d, shard.n) {
                        return Err(Error::Input(format!(
                            "{}: item {id} waits for {d}, which is in another shard; shards must not depend on each other",
                            plan.input.display()
                        )));
                    }
                }
            }
        }
        plan.deps = Some(deps);
    }
    plan.selected = selected;
    Ok(fp.hex())
}

fn join(ids: &[&String]) -> String {
    let mut v: Vec<&str> = ids.iter().map(|s| s.as_str()).collect();
    v.sort();
    v.join(", ")
}

/// Run `runner batch` and return the exit code.
pub fn run(args: BatchArgs) -> Result<i32> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::Environment(format!("cannot read the current directory: {e}")))?;
    let spec = match &args.batch {
        Some(p) => batch_spec::parse(p, &read_text(p, "the batch definition")?)?,
        None => BatchSpec::default(),
    };
    for w in &spec.warnings {
        eprintln!("warning: {w}");
    }
    let base = match args.batch.as_ref().and_then(|p| p.parent()) {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let input = match (&args.input, &spec.input, &args.batch) {
        (Some(p), _, _) => p.clone(),
        (None, Some(p), _) => config::resolve(&base, p),
        (None, None, Some(_)) => base.join("workers-input.csv"),
        (None, None, None) => {
            return Err(Error::Input(
                "give a BATCH.md, or --input FILE and --instruction FILE".into(),
            ));
        }
    };
    let (instruction_text, instruction_path, instruction_line) =
        match (&args.instruction, &args.batch) {
            (Some(p), _) => (read_text(p, "the instruction")?, p.clone(), 1),
            (None, Some(b)) => (spec.instruction.clone(), b.clone(), spec.instruction_line),
            (None, None) => {
                return Err(Error::Input(
                    "give --instruction FILE (the template for every row)".into(),
                ));
            }
        };
    if instruction_text.trim().is_empty() {
        return Err(Error::input_at(
            &instruction_path,
            None,
            "the instruction is empty",
        ));
    }
    let id_column = args.id_column.clone().or(spec.id_column.clone());
    let shard = Shard::parse(
        args.run.shard.as_deref(),
        args.run.shard_count,
        std::env::var("JOB_COMPLETION_INDEX").ok().as_deref(),
    )?;
    let only = Only::parse(args.run.only.as_deref())?;
    let default_name = match shard {
        Some(s) => format!("workers-output.shard-{}-of-{}.csv", s.k, s.n),
        None => "workers-output.csv".to_string(),
    };
    let output = match (&args.output, &spec.output) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => config::resolve(&base, p),
        (None, None) if args.batch.is_some() => base.join(&default_name),
        (None, None) => input.parent().unwrap_or(Path::new(".")).join(&default_name),
    };
    // A folder (existing, or written with a trailing `/`) gets the default file name.
    let output = if output.is_dir() || output.as_os_str().to_string_lossy().ends_with('/') {
        output.join(&default_name)
    } else {
        output
    };
    let schema = match (&args.output_schema, &spec.output_schema) {
        (Some(p), _) => config::load_schema(None, Some(p))?,
        (None, Some(SchemaSource::Inline(v))) => config::load_schema(Some(v.clone()), None)?,
        (None, Some(SchemaSource::Path(p))) => {
            config::load_schema(None, Some(&config::resolve(&base, p)))?
        }
        (None, None) => None,
    };
    let file_defaults = FileDefaults {
        runner: spec.runner.clone(),
        command: spec.command.clone(),
        jobs: spec.max_workers,
        timeout_s: spec.max_runtime_seconds,
        retries: spec.retries,
        verify: spec.verify.clone(),
        model: spec.model.clone(),
        isolate: spec.isolate.clone(),
        worktree_copy: spec.worktree_copy.clone(),
        worktree_setup: spec.worktree_setup.clone(),
    };
    let opts = config::run_options(&args.run, &args.command, &file_defaults, None)?;

    let table = csv_input::scan(open_input(&input)?, &input, id_column.as_deref())?;
    let instruction = Instruction::parse(&instruction_path, instruction_line, &instruction_text)?;
    instruction.check_columns(&instruction_path, &table.headers)?;
    if let Some(v) = &opts.verify {
        for a in v {
            Instruction::parse(Path::new("--verify"), 1, a)?
                .check_columns(Path::new("--verify"), &table.headers)?;
        }
    }
    let template = TeammateTemplate::new(
        Path::new("templates/teammate.md"),
        DEFAULT_TEAMMATE_TEMPLATE,
    )?;
    let output = config::absolute(&output);
    let out_dir = output.parent().unwrap_or(Path::new("/")).to_owned();
    if !out_dir.is_dir() {
        return Err(Error::Input(format!(
            "{}: the output folder does not exist; create it or choose another --output",
            out_dir.display()
        )));
    }
    // Never write over what the batch reads.
    let mut sources: Vec<(&str, PathBuf)> = vec![
        ("input", input.clone()),
        ("instruction", instruction_path.clone()),
    ];
    if let Some(b) = &args.batch {
        sources.push(("batch definition", b.clone()));
    }
    if let Some(p) = &args.output_schema {
        sources.push(("output schema", p.clone()));
    }
    for (what, p) in &sources {
        if config::same_file(p, &output) {
            return Err(Error::Input(format!(
                "{}: the output would overwrite the {what}; choose another --output",
                output.display()
            )));
        }
    }
    config::check_parent(args.run.junit.as_deref(), "--junit")?;
    let layout = output_csv::layout(&table.headers, schema.as_ref().map(|s| &s.0), opts.isolate);
    let mut seen_cols = HashSet::new();
    if let Some(dup) = layout
        .headers
        .iter()
        .find(|h| !seen_cols.insert(h.as_str()))
    {
        return Err(Error::input_at(
            &input,
            Some(1),
            format!(
                "column `{dup}` collides with one of the runner's output columns, even as runner_<name>; rename it"
            ),
        ));
    }
    let previous = match only {
        Only::All => None,
        _ if !output.exists() && only == Only::Failed => {
            return Err(Error::Input(format!(
                "{}: --only failed replays an existing output, and there is none",
                output.display()
            )));
        }
        _ if !output.exists() => None,
        _ => {
            let status_col = if layout.headers.iter().any(|h| h == "runner_status") {
                "runner_status"
            } else {
                "status"
            };
            Some(Previous::read(
                &output,
                &layout.headers,
                id_column.as_deref(),
                status_col,
            )?)
        }
    };
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "workers-output".into());
    let mut plan = BatchPlan {
        input,
        table,
        instruction,
        instruction_text,
        workspace: out_dir.join(format!("{stem}.runner")),
        team: stem,
        output,
        id_column,
        selection: Selection {
            shard,
            only,
            previous: previous.map(Arc::new),
        },
        layout,
        deps: None,
        selected: 0,
    };
    let fingerprint = survey(&mut plan, schema.as_ref().map(|s| &s.0))?;
    for w in &plan.layout.warnings {
        eprintln!("warning: {w}");
    }
    let format = opts.format;
    let dry_run = args.run.dry_run;
    let junit = args.run.junit.clone();
    let merge = opts.merge;
    let isolation = common::isolation(
        &opts,
        &cwd,
        &plan.team,
        std::slice::from_ref(&plan.workspace),
    )?;
    let run_spec = Arc::new(RunSpec {
        rerun: match &plan.selection.only {
            Only::Ids(ids) => ids.clone(),
            Only::All | Only::Failed => Default::default(),
        },
        ..common::run_spec(
            opts,
            isolation,
            plan.team.clone(),
            plan.workspace.clone(),
            cwd,
            template,
            schema,
        )
    });
    if dry_run {
        let items = row_items(&plan)?;
        common::print_plan(
            &run_spec,
            items,
            plan.selected,
            plan.table.rows,
            plan.selection.shard,
            format,
        )?;
        return Ok(0);
    }

    // Everything is valid: from here on files are written.
    let mut team = Team::open(&plan.team, &plan.workspace)?;
    let items = row_items(&plan)?;
    let mut reporter = crate::ui::reporter(format);
    let mut summary = common::execute(
        run_spec.clone(),
        &mut team,
        items,
        Some(plan.selected),
        reporter.as_mut(),
    )?;
    if run_spec.isolation.is_some() {
        let mut ids = Vec::new();
        for row in CsvRows::new(open_input(&plan.input)?, &plan.table)? {
            let row = row?;
            if plan.selection.runs(&row.id) {
                ids.push(row.id);
            }
        }
        common::finish_isolation(
            &run_spec,
            &mut team,
            &ids,
            merge,
            format == crate::ui::Format::Json,
            &mut summary,
        )?;
    }
    let outcomes = write_output(&plan, &mut team, &summary, junit.is_some())?;
    if let Some(s) = plan.selection.shard {
        ShardMeta {
            v: 1,
            fingerprint,
            k: s.k,
            n: s.n,
            rows: outcomes.1,
        }
        .write(&plan.output)?;
    }
    if let Some(path) = &junit {
        crate::sink::junit::write(path, &plan.team, &outcomes.0, summary.elapsed_s)?;
    }
    crate::ui::print_summary(&summary, Some(&plan.output), &plan.workspace, format);
    Ok(common::exit_code(&summary))
}

/// A one-line title: the first non-blank line of the rendered instruction (markdown heading
/// marks dropped), at most 80 characters; the id when there is none.
fn title_of(body: &str, id: &str) -> String {
    let line = body
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or(id);
    let mut t: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        t.push('…');
    }
    t
}

fn to_item(
    plan_deps: Option<&HashMap<String, Vec<String>>>,
    headers: &[String],
    instruction: &Instruction,
    row: CsvRow,
) -> WorkItem {
    let body = instruction.render(headers, &row.values);
    let after = plan_deps
        .and_then(|d| d.get(&row.id))
        .cloned()
        .unwrap_or_default();
    let content = crate::item::content_hash(row.values.iter().map(String::as_str));
    WorkItem {
        teammate: teammate_name(row.number, &row.id),
        title: title_of(&body, &row.id),
        line: row.line,
        vars: headers.iter().cloned().zip(row.values).collect(),
        body,
        checkpoint: None,
        after,
        content,
        id: row.id,
    }
}

fn row_items(plan: &BatchPlan) -> Result<ItemStream> {
    let rows = CsvRows::new(open_input(&plan.input)?, &plan.table)?;
    let headers = plan.table.headers.clone();
    let instruction = plan.instruction.clone();
    let selection = plan.selection.clone();
    let deps = plan.deps.clone();
    Ok(Box::new(rows.filter_map(move |row| {
        let row = match row {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        if !selection.runs(&row.id) {
            return None;
        }
        let mut item = to_item(deps.as_ref(), &headers, &instruction, row);
        // A prerequisite not run now but completed in the previous output is met.
        item.after.retain(|d| !selection.completed_before(d));
        Some(Ok(item))
    })))
}

/// Write the output CSV in input order: rows run now from their outcomes, rows not run
/// again copied byte-for-byte from the previous output. Returns the outcomes (when `keep`)
/// and the input row numbers written.
fn write_output(
    plan: &BatchPlan,
    team: &mut Team,
    summary: &RunSummary,
    keep: bool,
) -> Result<(Vec<Outcome>, Vec<u64>)> {
    let rows = CsvRows::new(open_input(&plan.input)?, &plan.table)?;
    let missing = if summary.interrupted {
        ("cancelled", "not started: the run was interrupted")
    } else {
        ("cancelled", "not started")
    };
    let mut failure: Option<Error> = None;
    let mut kept = Vec::new();
    let mut numbers = Vec::new();
    let mut prev_file = match &plan.selection.previous {
        Some(p) => Some(p.open().map_err(|e| Error::io("read", &plan.output, e))?),
        None => None,
    };
    output_csv::write(&plan.output, &plan.layout, |emit, raw| {
        for row in rows {
            let row = match row {
                Ok(r) => r,
                Err(e) => {
                    failure = Some(e);
                    return Err(std::io::Error::other(
                        "the input changed while writing the output",
                    ));
                }
            };
            if !plan.selection.in_shard(&row.id) {
                continue;
            }
            numbers.push(row.number);
            if !plan.selection.runs(&row.id) {
                if let (Some(prev), Some(file)) = (&plan.selection.previous, prev_file.as_mut())
                    && let Some(bytes) = prev.raw(file, &row.id)?
                {
                    raw(&bytes)?;
                    continue;
                }
                emit(output_csv::row(
                    &plan.layout,
                    &row.values,
                    None,
                    ("skipped", "not selected by --only"),
                ))?;
                continue;
            }
            let outcome = match team.outcome(&row.id) {
                Ok(o) => o,
                Err(e) => {
                    failure = Some(e);
                    return Err(std::io::Error::other("cannot read the journal"));
                }
            };
            emit(output_csv::row(
                &plan.layout,
                &row.values,
                outcome.as_ref(),
                missing,
            ))?;
            if keep {
                kept.push(outcome.unwrap_or_else(|| {
                    let teammate = teammate_name(row.number, &row.id);
                    Outcome::not_run(
                        &row.id,
                        &teammate,
                        &row.id,
                        crate::report::ItemStatus::Cancelled,
                        missing.1.into(),
                    )
                }));
            }
        }
        Ok(())
    })
    .map_err(|e| failure.take().unwrap_or(e))?;
    Ok((kept, numbers))
}
