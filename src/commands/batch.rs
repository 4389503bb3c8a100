//! `runner batch`: one teammate per row of a CSV file (DESIGN §2, §3).

use std::path::{Path, PathBuf};

use super::common;
use crate::cli::BatchArgs;
use crate::config::{self, FileDefaults};
use crate::error::{Error, Result};
use crate::item::{WorkItem, teammate_name};
use crate::prompt::{DEFAULT_TEAMMATE_TEMPLATE, Instruction, TeammateTemplate};
use crate::run::dispatcher::ItemStream;
use crate::run::events::RunSummary;
use crate::run::team::Team;
use crate::sink::output_csv;
use crate::source::batch_spec::{self, SchemaSource};
use crate::source::csv_input::{self, CsvRows, CsvTable};

/// Everything `batch` needs, validated.
struct BatchPlan {
    input: PathBuf,
    table: CsvTable,
    instruction: Instruction,
    output: PathBuf,
    workspace: PathBuf,
    team: String,
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

/// Run `runner batch` and return the exit code.
pub fn run(args: BatchArgs) -> Result<i32> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::Environment(format!("cannot read the current directory: {e}")))?;
    let spec_file = match &args.batch {
        Some(p) => {
            let text = read_text(p, "the batch definition")?;
            Some(batch_spec::parse(p, &text)?)
        }
        None => None,
    };
    for w in spec_file.iter().flat_map(|s| &s.warnings) {
        tracing::warn!("{w}");
        eprintln!("warning: {w}");
    }
    let base = args
        .batch
        .as_ref()
        .and_then(|p| p.parent())
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .unwrap_or(Path::new("."))
        .to_owned();
    let spec = spec_file.clone().unwrap_or_default();

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
    let output = match (&args.output, &spec.output) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => config::resolve(&base, p),
        (None, None) if args.batch.is_some() => base.join("workers-output.csv"),
        (None, None) => input
            .parent()
            .unwrap_or(Path::new("."))
            .join("workers-output.csv"),
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
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "workers-output".into());
    let plan = BatchPlan {
        input: input.clone(),
        table,
        instruction,
        workspace: out_dir.join(format!("{stem}.runner")),
        team: stem,
        output,
    };
    let layout = output_csv::layout(&plan.table.headers, schema.as_ref().map(|s| &s.0));
    for w in &layout.warnings {
        eprintln!("warning: {w}");
    }
    let format = opts.format;
    let run_spec = common::run_spec(
        opts,
        plan.team.clone(),
        plan.workspace.clone(),
        cwd,
        template,
        schema,
    );

    // Everything is valid: from here on files are written.
    let mut team = Team::open(&plan.team, &plan.workspace)?;
    let items = row_items(&plan)?;
    let mut reporter = crate::ui::reporter(format);
    let summary = common::execute(
        run_spec,
        &mut team,
        items,
        Some(plan.table.rows),
        reporter.as_mut(),
    )?;
    write_output(&plan, &layout, &mut team, &summary)?;
    crate::ui::print_summary(&summary, Some(&plan.output), &plan.workspace, format);
    Ok(common::exit_code(&summary))
}

fn row_items(plan: &BatchPlan) -> Result<ItemStream> {
    let rows = CsvRows::new(open_input(&plan.input)?, &plan.table)?;
    let headers = plan.table.headers.clone();
    let instruction = plan.instruction.clone();
    Ok(Box::new(rows.map(move |row| {
        let row = row?;
        let body = instruction.render(&headers, &row.values);
        let title: String = row.id.chars().take(80).collect();
        Ok(WorkItem {
            teammate: teammate_name(row.number, &row.id),
            title,
            line: row.line,
            vars: headers.iter().cloned().zip(row.values).collect(),
            body,
            checkpoint: None,
            after: Vec::new(),
            id: row.id,
        })
    })))
}

fn write_output(
    plan: &BatchPlan,
    layout: &output_csv::Layout,
    team: &mut Team,
    summary: &RunSummary,
) -> Result<()> {
    let rows = CsvRows::new(open_input(&plan.input)?, &plan.table)?;
    let missing = if summary.interrupted {
        ("cancelled", "not started: the run was interrupted")
    } else {
        ("cancelled", "not started")
    };
    let mut failure: Option<Error> = None;
    output_csv::write(&plan.output, layout, |emit| {
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
            let outcome = match team.outcome(&row.id) {
                Ok(o) => o,
                Err(e) => {
                    failure = Some(e);
                    return Err(std::io::Error::other("cannot read the journal"));
                }
            };
            emit(output_csv::row(
                layout,
                &row.values,
                outcome.as_ref(),
                missing,
            ))?;
        }
        Ok(())
    })
    .map_err(|e| failure.take().unwrap_or(e))
}
