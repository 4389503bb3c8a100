//! `runner batch`: one teammate per row of a CSV file (DESIGN §2, §3, §8). Resolves which
//! files the flags and BATCH.md name, then hands one plan to the pipeline.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cli::BatchArgs;
use crate::error::{EXIT_OK, Error, Result};
use crate::fsutil::{absolute, resolve};
use crate::plans::csv_batch::{self, CsvBatchFiles};
use crate::run::backend::Backend;
use crate::schedule::pipeline::{self, Ran};
use crate::schedule::plan::Plan;
use crate::settings::{self, Settings};
use crate::source::batch_spec::{self, BatchSpec, SchemaSource};
use crate::source::csv_input;
use crate::source::input::{self, Spool};

/// The text of a batch file the user wrote (BATCH.md, the instruction), read up to
/// [`input::MAX_PROMPT_BYTES`]: either becomes part of every prompt.
///
/// Errors (exit 2, naming the file): unreadable, larger than that, not UTF-8.
fn read_text(path: &Path, what: &'static str) -> Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| {
            f.take(input::MAX_PROMPT_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
        })
        .map_err(|e| Error::read_input(what, path, e))?;
    if bytes.len() > input::MAX_PROMPT_BYTES {
        return Err(Error::input_at(
            path,
            None,
            format!(
                "{what} is over {}, more than a prompt may hold; keep large content in files and name them in it",
                input::mib(input::MAX_PROMPT_BYTES as u64)
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        Error::input_at(
            path,
            None,
            format!("{what} is not valid UTF-8; save it as UTF-8"),
        )
    })
}

/// Run `runner batch` and return the exit code.
pub(crate) fn run(args: BatchArgs) -> Result<i32> {
    let (plan, backend) = plan(args)?;
    carry_out(plan, backend)
}

/// The plan of `runner batch ARGS` (its sinks may be added to) and the backend it runs on.
/// What BATCH.md's reading warned of leads the plan's warnings; when no plan can be made,
/// those warnings are printed before the error (a misspelled key often explains it).
///
/// Errors: as [`files`], [`Settings::resolve`] and [`csv_batch::plan`] (exit 2).
pub(crate) fn plan(args: BatchArgs) -> Result<(Plan, Arc<dyn Backend>)> {
    let spec = match &args.batch {
        Some(p) => batch_spec::parse(p, &read_text(p, "the batch definition")?)?,
        None => BatchSpec::default(),
    };
    match plan_of(&args, &spec) {
        Ok((mut plan, backend)) => {
            plan.spec.warnings.splice(0..0, spec.warnings);
            Ok((plan, backend))
        }
        Err(e) => {
            for w in &spec.warnings {
                crate::ui::warn(w);
            }
            Err(e)
        }
    }
}

/// [`plan`] once BATCH.md (`spec`) is read.
///
/// Errors: as [`plan`].
fn plan_of(args: &BatchArgs, spec: &BatchSpec) -> Result<(Plan, Arc<dyn Backend>)> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::Environment(format!("cannot read the current directory: {e}")))?;
    let mut files = files(args, spec)?;
    // Every output's folder at once: a blocked one is named with the others.
    let output_flag = match &args.output {
        Some(_) => "-o",
        None => "the output",
    };
    crate::fsutil::check_parents(&[
        (Some(&files.output), output_flag),
        (args.run.junit.as_deref(), "--junit"),
        (args.run.trace.as_deref(), "--trace"),
    ])?;
    let mut settings = Settings::resolve(&args.run, &args.command, &spec.settings, None)?;
    settings.raw_columns = spec.raw_columns.clone();
    let backend = crate::run::backend::for_settings(&settings)?;
    if files.input == Path::new("-") {
        // Every flag is checked before stdin is read.
        files.input = PathBuf::from(input::STDIN_NAME);
        files.stdin = Some(Spool::read(std::io::stdin().lock())?);
    }
    Ok((csv_batch::plan(files, settings, cwd)?, backend))
}

/// Carry out `plan` on `backend` ([`pipeline::run`]) and show what it did: the plan of a
/// dry run, else what isolation left, the closing summary and where the record went when
/// the workspace was removed. Every command that runs a plan ends here (`runner batch`,
/// `runner run`, `runner resolve`). Returns the exit code.
///
/// Errors: the pipeline's.
pub(crate) fn carry_out(plan: Plan, backend: Arc<dyn Backend>) -> Result<i32> {
    // `--serve`: the page lives as long as this call.
    let _live = super::serve::for_run(&plan)?;
    let finished = match pipeline::run(plan, backend.clone(), crate::ui::reporter)? {
        Ran::Planned { plan, earlier } => {
            crate::ui::print_plan(&plan, earlier.as_ref(), backend.as_ref())?;
            return Ok(EXIT_OK);
        }
        Ran::Finished(f) => f,
    };
    let format = finished.format;
    if let Some(end) = &finished.isolation {
        crate::ui::print_isolation(end, format);
    }
    crate::ui::print_summary(
        &finished.summary,
        Some(&finished.output),
        finished.workspace.as_deref(),
        format,
    );
    if let Some(to) = &finished.archived_to {
        crate::ui::say(
            format,
            format!(
                "Every item completed; the team workspace was removed (keep it with --keep-team); its record is in {}.",
                to.display()
            ),
        );
    }
    Ok(finished.code)
}

/// The batch's files: flags first, then BATCH.md's keys (relative to its folder), then the
/// defaults beside BATCH.md or the input.
///
/// Errors: neither BATCH.md nor `--input`/`--instruction`; an empty instruction; a schema
/// that does not load (exit 2).
fn files(args: &BatchArgs, spec: &BatchSpec) -> Result<CsvBatchFiles> {
    let base = match args.batch.as_ref().and_then(|p| p.parent()) {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let input = input_path(args, spec, &base)?;
    let delimiter = delimiter(args, spec, &input)?;
    let (instruction, instruction_path, instruction_line) = instruction(args, spec)?;
    let output = output_path(args, spec, &base, &input)?;
    let schema = match (&args.output_schema, &spec.output_schema) {
        (Some(p), _) => settings::load_schema(None, Some(p))?,
        (None, Some(SchemaSource::Inline(v))) => settings::load_schema(Some(v.clone()), None)?,
        (None, Some(SchemaSource::Path(p))) => {
            settings::load_schema(None, Some(&resolve(&base, p)))?
        }
        (None, None) => None,
    };
    let mut reads = Vec::new();
    if let Some(b) = &args.batch {
        reads.push(("batch definition", b.clone()));
    }
    // Each row a chain of stages: their instructions (the body is their preamble) and
    // schemas.
    let stages = match (&args.batch, spec.stages.is_empty()) {
        (Some(b), false) => {
            for s in &spec.stages {
                if let Some(f) = &s.instruction_file {
                    reads.push(("stage instruction", resolve(&base, f)));
                }
            }
            Some(crate::source::stages::chain(
                &spec.stages,
                b,
                &base,
                &instruction,
                schema.as_ref().map(|(v, _)| v),
                |p| read_text(p, "a stage's instruction"),
            )?)
        }
        _ => None,
    };
    if let Some(p) = &args.output_schema {
        reads.push(("output schema", p.clone()));
    }
    let files = file_root(args, spec, &base, &input)?;
    Ok(CsvBatchFiles {
        input,
        stdin: None,
        delimiter,
        instruction,
        instruction_path,
        instruction_line,
        id_column: args.id_column.clone().or(spec.id_column.clone()),
        files,
        output: absolute(&output),
        schema,
        reads,
        stages,
        runner_column: spec.runner_column.clone(),
        model_column: spec.model_column.clone(),
        files_column: spec.files_column.clone(),
        raw_columns: crate::sink::output_csv::RawColumns {
            names: spec.raw_columns.clone(),
            file: args.batch.clone().unwrap_or_default(),
            line: spec.raw_columns_line,
        },
    })
}

/// The input: `--input`, else BATCH.md's `input`, else `workers-input.csv` beside BATCH.md.
///
/// Errors: neither BATCH.md nor `--input` (exit 2).
fn input_path(args: &BatchArgs, spec: &BatchSpec, base: &Path) -> Result<PathBuf> {
    match (&args.input, &spec.input, &args.batch) {
        (Some(p), _, _) => Ok(p.clone()),
        (None, Some(p), _) => Ok(resolve(base, p)),
        (None, None, Some(_)) => Ok(base.join("workers-input.csv")),
        (None, None, None) => Err(Error::needs(
            "runner batch",
            "a BATCH.md, or --input FILE and --instruction FILE",
            "give the batch file, or the rows and the template for every row",
        )),
    }
}

/// The input's field delimiter: `--delimiter`, else BATCH.md's, else guessed from the
/// input's name.
///
/// Errors: `--delimiter` with a JSON Lines input, or a bad delimiter (exit 2).
fn delimiter(args: &BatchArgs, spec: &BatchSpec, input: &Path) -> Result<u8> {
    let format = input::input_format(input);
    if args.delimiter.is_some() && !format.has_delimiter() {
        return Err(Error::Conflict {
            flag: "--delimiter".into(),
            other: format!("the {} input {}", format.name(), input.display()),
            why: format!("{} has no delimiter; drop --delimiter", format.name()),
        });
    }
    match (&args.delimiter, spec.delimiter) {
        (Some(d), _) => csv_input::delimiter_for("--delimiter", Some(d), None),
        (None, Some(d)) => Ok(d),
        (None, None) => csv_input::delimiter_for("--delimiter", None, Some(input)),
    }
}

/// The instruction's text, the file it comes from and the line it starts on:
/// `--instruction FILE`, else BATCH.md's body.
///
/// Errors: neither; `--instruction` with BATCH.md's `stages:`; an empty instruction (exit
/// 2).
fn instruction(args: &BatchArgs, spec: &BatchSpec) -> Result<(String, PathBuf, u64)> {
    let (text, path, line) = match (&args.instruction, &args.batch) {
        (Some(p), _) => (read_text(p, "the instruction")?, p.clone(), 1),
        (None, Some(b)) => (spec.instruction.clone(), b.clone(), spec.instruction_line),
        (None, None) => {
            return Err(Error::needs(
                "--input",
                "--instruction FILE",
                "the instruction is the template for every row",
            ));
        }
    };
    if !spec.stages.is_empty() && args.instruction.is_some() {
        return Err(Error::Conflict {
            flag: "--instruction".into(),
            other: "a BATCH.md with `stages:`".into(),
            why: "each stage has its own instruction; edit them in BATCH.md".into(),
        });
    }
    if text.trim().is_empty() && spec.stages.is_empty() {
        return Err(Error::input_at(&path, None, "the instruction is empty"));
    }
    Ok((text, path, line))
}

/// The output: `--output`, else BATCH.md's `output`, else `workers-output.csv` beside
/// BATCH.md or the input; a folder gets that default name, and a shard's file its number.
///
/// Errors: a bad `--shard` (exit 2).
fn output_path(args: &BatchArgs, spec: &BatchSpec, base: &Path, input: &Path) -> Result<PathBuf> {
    // A shard's default output carries its number, so shards never share a file.
    let default_name = match settings::shard(&args.run)? {
        Some(s) => format!("workers-output.shard-{}-of-{}.csv", s.k, s.n),
        None => "workers-output.csv".to_string(),
    };
    let output = match (&args.output, &spec.output) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => resolve(base, p),
        (None, None) if args.batch.is_some() => base.join(&default_name),
        (None, None) => input.parent().unwrap_or(Path::new(".")).join(&default_name),
    };
    // A folder (existing, or written with a trailing `/`) gets the default file name; a file
    // named for a shard gets its number too (`out.csv` → `out.shard-2-of-4.csv`), so shards
    // sharing one folder never share one output and one workspace.
    if output.is_dir() || output.as_os_str().to_string_lossy().ends_with('/') {
        return Ok(output.join(&default_name));
    }
    Ok(match settings::shard(&args.run)? {
        Some(s) => crate::options::selection::shard_file(&output, s.k, s.n),
        None => output,
    })
}

/// Where the files a row names (`{file:…}`, `{image:…}`) are read, and their caps: the
/// batch's folder — `--file-root`, BATCH.md's `file_root`, BATCH.md's folder, else the
/// input's (the working directory for rows from stdin).
///
/// Errors: a `--file-root` or `file_root` that is not a folder (exit 2).
fn file_root(
    args: &BatchArgs,
    spec: &BatchSpec,
    base: &Path,
    input: &Path,
) -> Result<crate::inline::FileRoot> {
    let dir = match (&args.file_root, &spec.file_root, &args.batch) {
        (Some(d), _, _) => d.clone(),
        (None, Some(d), _) => resolve(base, d),
        (None, None, Some(_)) => base.to_owned(),
        (None, None, None) if input == Path::new("-") => PathBuf::from("."),
        (None, None, None) => match input.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        },
    };
    if !dir.is_dir() {
        let what = "is not a folder; give the folder the rows' file paths are relative to";
        match (&args.file_root, &args.batch) {
            (Some(_), _) => {
                return Err(Error::Usage(format!(
                    "--file-root {} {what}",
                    dir.display()
                )));
            }
            (None, Some(b)) if spec.file_root.is_some() => {
                return Err(Error::input_at(
                    b,
                    None,
                    format!("`file_root` {} {what}", dir.display()),
                ));
            }
            _ => {}
        }
    }
    Ok(crate::inline::FileRoot {
        dir: crate::fsutil::real_path(&absolute(&dir)),
        file_cap: args
            .file_cap
            .or(spec.file_cap)
            .unwrap_or(crate::inline::DEFAULT_FILE_CAP),
        image_cap: args
            .image_cap
            .or(spec.image_cap)
            .unwrap_or(crate::inline::DEFAULT_IMAGE_CAP),
    })
}
