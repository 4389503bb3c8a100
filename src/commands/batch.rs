//! `runner batch`: one teammate per row of a CSV file (DESIGN §2, §3, §8). Resolves which
//! files the flags and BATCH.md name, then hands one plan to the pipeline.

use std::path::{Path, PathBuf};

use crate::cli::BatchArgs;
use crate::error::{Error, Result};
use crate::fsutil::{absolute, resolve};
use crate::run::schedule::pipeline;
use crate::settings::{self, Settings};
use crate::source::batch_spec::{self, BatchSpec, SchemaSource};
use crate::source::csv_batch::{self, CsvBatchFiles};
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
pub fn run(args: BatchArgs) -> Result<i32> {
    let (plan, backend) = plan(args)?;
    pipeline::run(plan, backend)
}

/// The plan of `runner batch ARGS` (its sinks may be added to) and the backend it runs on.
///
/// Errors: as [`files`], [`Settings::resolve`] and [`csv_batch::plan`] (exit 2).
pub fn plan(
    args: BatchArgs,
) -> Result<(
    crate::run::schedule::plan::Plan,
    std::sync::Arc<dyn crate::run::backend::Backend>,
)> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::Environment(format!("cannot read the current directory: {e}")))?;
    let spec = match &args.batch {
        Some(p) => batch_spec::parse(p, &read_text(p, "the batch definition")?)?,
        None => BatchSpec::default(),
    };
    for w in &spec.warnings {
        eprintln!("warning: {w}");
    }
    let mut files = files(&args, &spec)?;
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
    let settings = Settings::resolve(&args.run, &args.command, &spec.settings, None)?;
    let backend = crate::run::backend::for_settings(&settings)?;
    if files.input == Path::new("-") {
        // Every flag is checked before stdin is read.
        files.input = PathBuf::from(input::STDIN_NAME);
        files.stdin = Some(Spool::read(std::io::stdin().lock())?);
    }
    Ok((csv_batch::plan(files, settings, cwd)?, backend))
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
    let input = match (&args.input, &spec.input, &args.batch) {
        (Some(p), _, _) => p.clone(),
        (None, Some(p), _) => resolve(&base, p),
        (None, None, Some(_)) => base.join("workers-input.csv"),
        (None, None, None) => {
            return Err(Error::needs(
                "runner batch",
                "a BATCH.md, or --input FILE and --instruction FILE",
                "give the batch file, or the rows and the template for every row",
            ));
        }
    };
    if args.delimiter.is_some() && input::InputFormat::of(&input) == input::InputFormat::Jsonl {
        return Err(Error::Conflict {
            flag: "--delimiter".into(),
            other: format!("the JSON Lines input {}", input.display()),
            why: "JSON Lines has no delimiter; drop --delimiter".into(),
        });
    }
    let delimiter = match (&args.delimiter, spec.delimiter) {
        (Some(d), _) => csv_input::delimiter_for("--delimiter", Some(d), None)?,
        (None, Some(d)) => d,
        (None, None) => csv_input::delimiter_for("--delimiter", None, Some(&input))?,
    };
    let (instruction, instruction_path, instruction_line) = match (&args.instruction, &args.batch) {
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
    if instruction.trim().is_empty() && spec.stages.is_empty() {
        return Err(Error::input_at(
            &instruction_path,
            None,
            "the instruction is empty",
        ));
    }
    // A shard's default output carries its number, so shards never share a file.
    let default_name = match settings::shard(&args.run)? {
        Some(s) => format!("workers-output.shard-{}-of-{}.csv", s.k, s.n),
        None => "workers-output.csv".to_string(),
    };
    let output = match (&args.output, &spec.output) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => resolve(&base, p),
        (None, None) if args.batch.is_some() => base.join(&default_name),
        (None, None) => input.parent().unwrap_or(Path::new(".")).join(&default_name),
    };
    // A folder (existing, or written with a trailing `/`) gets the default file name; a file
    // named for a shard gets its number too (`out.csv` → `out.shard-2-of-4.csv`), so shards
    // sharing one folder never share one output and one workspace.
    let output = if output.is_dir() || output.as_os_str().to_string_lossy().ends_with('/') {
        output.join(&default_name)
    } else {
        match settings::shard(&args.run)? {
            Some(s) => crate::options::selection::shard_file(&output, s.k, s.n),
            None => output,
        }
    };
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
    // Paths a row names are read inside the batch's folder: BATCH.md's, else the input's
    // (the working directory for rows from stdin).
    let dir = match (&args.file_root, &spec.file_root, &args.batch) {
        (Some(d), _, _) => d.clone(),
        (None, Some(d), _) => resolve(&base, d),
        (None, None, Some(_)) => base.clone(),
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
    let file_root = crate::source::inline::FileRoot {
        dir: crate::fsutil::real_path(&absolute(&dir)),
        file_cap: args
            .file_cap
            .or(spec.file_cap)
            .unwrap_or(crate::source::inline::DEFAULT_FILE_CAP),
        image_cap: args
            .image_cap
            .or(spec.image_cap)
            .unwrap_or(crate::source::inline::DEFAULT_IMAGE_CAP),
    };
    Ok(CsvBatchFiles {
        input,
        stdin: None,
        delimiter,
        instruction,
        instruction_path,
        instruction_line,
        id_column: args.id_column.clone().or(spec.id_column.clone()),
        files: file_root,
        output: absolute(&output),
        schema,
        reads,
        stages,
        runner_column: spec.runner_column.clone(),
        model_column: spec.model_column.clone(),
    })
}
