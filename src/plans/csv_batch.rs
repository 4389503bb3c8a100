//! The CSV batch source adapter (DESIGN §3, seed `taskmaster-protocol.md`): an input CSV and
//! an instruction template become a [`Plan`] — one item per selected row, the output layout,
//! and the sinks (`workers-output.csv`, the shard sidecar; `--junit` and `--trace` come with
//! [`Plan::new`]).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::overlap;
use crate::error::{Error, Result};
use crate::item::{WorkItem, teammate_name};
use crate::options::selection::Only;
use crate::prompt::{DEFAULT_TEAMMATE_TEMPLATE, Instruction, TeammateTemplate};
use crate::run::RunSpec;
use crate::run::record::team::{self, BatchId};
use crate::schedule::dispatcher::ItemStream;
use crate::schedule::plan::{self, ItemSource, Plan, PlanFile, WorkspaceFrom};
use crate::settings::Settings;
use crate::sink::Sinks;
use crate::sink::output::Output;
use crate::sink::output_csv;
use crate::sink::previous::Previous;
use crate::sink::selection::Selection;
use crate::sink::shard_meta::ShardSidecar;
use crate::source::csv_input;
use crate::source::input::{InputRow, InputTable, Spool};
use crate::source::stages::Chain;

use super::choices::{Choices, choices, column};

/// The column that names a row's prerequisites (ids separated by `;`).
pub(crate) const DEPENDS_ON: &str = "depends_on";

/// The name of the copy of stdin's rows in the workspace (`--input -`).
pub(crate) const STDIN_COPY: &str = "stdin.csv";

/// The files of a CSV batch, resolved from flags and BATCH.md.
pub(crate) struct CsvBatchFiles {
    /// The input CSV ([`crate::source::input::STDIN_NAME`] when the rows come from stdin).
    pub input: PathBuf,
    /// The rows read from stdin (`--input -`); `None`: they are read from `input`.
    pub stdin: Option<Spool>,
    /// The input's field delimiter (`,`, `;`, a tab, ...).
    pub delimiter: u8,
    /// The instruction template's text.
    pub instruction: String,
    /// Where the instruction comes from (BATCH.md or `--instruction FILE`), for messages.
    pub instruction_path: PathBuf,
    /// 1-based line of that file where the instruction starts.
    pub instruction_line: u64,
    /// The id column (`None`: the row number is the id).
    pub id_column: Option<String>,
    /// Where the files of `{file:…}` and `{image:…}` are read, and their caps.
    pub files: crate::inline::FileRoot,
    /// The output CSV (absolute).
    pub output: PathBuf,
    /// The output schema and its compiled validator.
    pub schema: Option<(Value, jsonschema::Validator)>,
    /// Every file the batch reads besides the input and instruction (BATCH.md, the schema
    /// file), named for the message when an output would overwrite it.
    pub reads: Vec<(&'static str, PathBuf)>,
    /// With BATCH.md's `stages:`, each row's chain (the instruction is then their
    /// preamble).
    pub stages: Option<crate::source::stages::Chain>,
    /// `runner_column`: the column naming a row's own runner.
    pub runner_column: Option<String>,
    /// `model_column`: the column naming a row's own model.
    pub model_column: Option<String>,
    /// `files_column`: the column naming the files a row will touch (overlap warnings).
    pub files_column: Option<String>,
    /// `raw_columns`: output fields written without the formula guard.
    pub raw_columns: output_csv::RawColumns,
}

/// The rows of the batch this run covers, as work items, streamed from the input.
struct Rows {
    table: InputTable,
    instruction: Instruction,
    selection: Selection,
    /// Prerequisites by id, when the input has a `depends_on` column.
    deps: Option<HashMap<String, Vec<String>>>,
    /// Stages, and each row's own runner and model.
    choices: Arc<Choices>,
}

impl ItemSource for Rows {
    fn items(&self) -> Result<ItemStream> {
        let rows = self.table.rows()?;
        let headers = self.table.headers.clone();
        let instruction = self.instruction.clone();
        let selection = self.selection.clone();
        let deps = self.deps.clone();
        let choices = self.choices.clone();
        Ok(Box::new(
            rows.filter_map(move |row| {
                let row = match row {
                    Ok(r) => r,
                    Err(e) => return Some(vec![Err(e)]),
                };
                if !selection.runs(&row.id) {
                    return None;
                }
                // A prerequisite not run now but completed in the previous output is met.
                let mut after = deps
                    .as_ref()
                    .and_then(|d| d.get(&row.id))
                    .cloned()
                    .unwrap_or_default();
                after.retain(|d| !selection.completed_before(d));
                let items = match &choices.chain {
                    None => {
                        let profile = choices.profile(None, &row.values);
                        let mut item = to_item(after, &headers, &instruction, row);
                        item.profile = profile;
                        vec![Ok(item)]
                    }
                    Some(chain) => chain
                        .items(
                            &headers,
                            row.number,
                            row.line,
                            &row.id,
                            &row.values,
                            &after,
                            |i| choices.profile(Some(i), &row.values),
                        )
                        .into_iter()
                        .map(Ok)
                        .collect(),
                };
                Some(items)
            })
            .flatten(),
        ))
    }

    fn attempts_before(&self) -> Vec<(String, u32)> {
        let Some(previous) = &self.selection.previous else {
            return Vec::new();
        };
        previous
            .attempts(|id| self.selection.runs(id))
            .map(|(id, n)| (id.to_owned(), n))
            .collect()
    }
}

fn split_deps(value: &str) -> Vec<String> {
    value
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What one more pass over the input tells: the batch fingerprint, how many rows this run
/// covers, and the checked `depends_on` graph.
struct Survey {
    fingerprint: String,
    selected: u64,
    deps: Option<HashMap<String, Vec<String>>>,
    /// A hash of every id of the input, sorted (to tell which rows of the last output are
    /// gone): 8 bytes a row.
    ids: Vec<u64>,
}

/// Stream the scanned rows once more (from the snapshot, not the file): the batch
/// fingerprint, the `depends_on` graph (checked), and how many rows this run covers.
fn survey(
    files: &CsvBatchFiles,
    choices: &Choices,
    table: &InputTable,
    selection: &Selection,
) -> Result<Survey> {
    // The input's bytes were hashed as the scan read them.
    let mut fp = table.digest;
    fp.update(b"\0instruction\0");
    fp.update(files.instruction.as_bytes());
    fp.update(b"\0schema\0");
    let schema = files.schema.as_ref().map(|s| s.0.to_string());
    fp.update(schema.unwrap_or_default().as_bytes());
    if let Some(chain) = &choices.chain {
        // The stages' shape; their instructions may be edited as the batch's may.
        fp.update(b"\0stages\0");
        for st in &chain.stages {
            fp.update(st.name.as_bytes());
            fp.update(format!("{:?}", st.after).as_bytes());
            fp.update(
                st.schema
                    .as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or_default()
                    .as_bytes(),
            );
        }
    }
    fp.update(b"\0id\0");
    fp.update(files.id_column.as_deref().unwrap_or("").as_bytes());
    // A comma batch keeps the fingerprint it had before delimiters could be chosen.
    if files.delimiter != b',' {
        fp.update(b"\0delimiter\0");
        fp.update(&[files.delimiter]);
    }
    let dep_col = table.headers.iter().position(|h| h == DEPENDS_ON);
    let mut deps: HashMap<String, Vec<String>> = HashMap::new();
    let mut selected = 0u64;
    // Each id named by --only or needed by `depends_on`, with its row's line.
    let mut ids: HashMap<String, u64> = HashMap::new();
    let mut all_ids: Vec<u64> = Vec::new();
    for row in table.rows()? {
        let row = row?;
        all_ids.push(id_hash(&row.id));
        if selection.runs(&row.id) {
            selected += 1;
        }
        if let Only::Ids(wanted) = &selection.only
            && wanted.contains(&row.id)
        {
            ids.insert(row.id.clone(), row.line);
        }
        if let Some(c) = dep_col {
            let d = split_deps(row.values.get(c).map_or("", String::as_str));
            if !d.is_empty() {
                deps.insert(row.id.clone(), d);
            }
            ids.insert(row.id, row.line);
        }
    }
    if let Only::Ids(wanted) = &selection.only {
        let mut unknown: Vec<&str> = wanted
            .iter()
            .filter(|id| !ids.contains_key(*id))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            unknown.sort();
            let names: Vec<String> = choices
                .chain
                .as_ref()
                .map(|c| c.stages.iter().map(|s| s.name.clone()).collect())
                .unwrap_or_default();
            let stage_ids = unknown
                .iter()
                .any(|id| crate::source::stages::split_id(id, &names).is_some());
            return Err(Error::Usage(format!(
                "--only names ids that are not in {}: {} (ids are separated by commas){}",
                files.input.display(),
                unknown.join(", "),
                match stage_ids {
                    true =>
                        "; with stages, --only takes a row's id and reruns its whole chain (`--only failed` reruns a failed stage and those after it)",
                    false => "",
                }
            )));
        }
    }
    let deps = match dep_col {
        None => None,
        Some(_) => {
            check_deps(&files.input, &ids, &deps, selection)?;
            Some(deps)
        }
    };
    all_ids.sort_unstable();
    all_ids.dedup();
    Ok(Survey {
        fingerprint: fp.hex(),
        selected,
        deps,
        ids: all_ids,
    })
}

fn id_hash(id: &str) -> u64 {
    crate::hash::fnv(id.as_bytes())
}

/// Most ids named in the warning about rows gone from the input.
const GONE_NAMED: usize = 10;

/// The warning about rows the last output of this batch holds and the input no longer does
/// (they leave the output); `None` when there is no last output or nothing is gone. The
/// output is streamed: a million-row output is not held.
fn rows_gone(output: &Path, input: &Path, id_column: Option<&str>, ids: &[u64]) -> Option<String> {
    let file = std::fs::File::open(output).ok()?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(std::io::BufReader::new(file));
    let id_idx = match id_column {
        Some(c) => Some(rdr.headers().ok()?.iter().position(|h| h == c)?),
        None => None,
    };
    let mut gone: Vec<String> = Vec::new();
    let mut count = 0usize;
    let mut record = csv::StringRecord::new();
    let mut n = 0usize;
    while rdr.read_record(&mut record).ok()? {
        n += 1;
        let id = match id_idx {
            Some(i) => record.get(i).unwrap_or_default().to_owned(),
            None => n.to_string(),
        };
        if ids.binary_search(&id_hash(&id)).is_err() {
            count += 1;
            if gone.len() < GONE_NAMED {
                gone.push(id);
            }
        }
    }
    if gone.is_empty() {
        return None;
    }
    let more = match count > GONE_NAMED {
        true => format!(" and {} more", count - GONE_NAMED),
        false => String::new(),
    };
    Some(format!(
        "{} row(s) of the last run are no longer in {} and leave {}: {}{more}",
        count,
        input.display(),
        output.display(),
        gone.iter()
            .take(GONE_NAMED)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Check the `depends_on` graph: `ids` maps every row's id to its line in `input`.
fn check_deps(
    input: &Path,
    ids: &HashMap<String, u64>,
    deps: &HashMap<String, Vec<String>>,
    selection: &Selection,
) -> Result<()> {
    let mut rows: Vec<(&String, u64)> = ids.iter().map(|(id, line)| (id, *line)).collect();
    rows.sort_by_key(|(_, line)| *line);
    plan::check_dependencies(rows.iter().map(|(id, line)| plan::Waits {
        id,
        line: *line,
        after: deps.get(*id).map_or(&[], Vec::as_slice),
    }))
    .map_err(|p| {
        Error::input_at(
            input,
            None,
            format!(
                "column `{DEPENDS_ON}` (ids separated by `;`): {}",
                p.join("; ")
            ),
        )
    })?;
    plan::check_shards(
        selection.shard,
        deps.iter().map(|(id, ds)| (id.as_str(), ds.as_slice())),
    )
    .map_err(|why| Error::input_at(input, None, format!("column `{DEPENDS_ON}`: {why}")))?;
    Ok(())
}

fn to_item(
    after: Vec<String>,
    headers: &[String],
    instruction: &Instruction,
    row: InputRow,
) -> WorkItem {
    let (body, inline) = instruction.render(headers, &row.values);
    let content = crate::item::content_hash(row.values.iter().map(String::as_str));
    WorkItem {
        teammate: teammate_name(row.number, &row.id),
        title: crate::item::title_of(&body, &row.id),
        line: row.line,
        vars: headers.iter().cloned().zip(row.values).collect(),
        body,
        inline,
        checkpoint: None,
        after,
        content,
        stage: None,
        profile: None,
        candidate: None,
        id: row.id,
    }
}

/// Build the plan of a CSV batch: scan and check the input, the instruction and `--verify`
/// against its columns, lay out the output, read the previous output for `--only`, survey
/// the rows, and register the sinks (whose files the plan's checks then refuse over inputs).
/// Teammates work in `cwd`.
///
/// Errors: every problem of the input files (exit 2, naming the file and line), nothing
/// written.
pub(crate) fn plan(mut files: CsvBatchFiles, settings: Settings, cwd: PathBuf) -> Result<Plan> {
    // `--only failed` with a queue: the queue's verdicts say what failed (not this output).
    let (settings, reseed) = crate::queue::only_failed(settings);
    let (instruction, table) = scan(&files, &settings)?;
    let judge = super::judge_stage::take(&mut files, &settings, &table.headers)?;
    let chain = files.stages.take().map(Arc::new);
    if settings.batch_api && (files.runner_column.is_some() || files.model_column.is_some()) {
        return Err(super::batch_api_refused());
    }
    if let Some(chain) = &chain {
        chain.check(&table.headers)?;
    }
    let (choices, mut profiles) = choices(&files, chain.as_ref(), &table, &settings)?;
    let judge = judge
        .map(|j| super::judge_stage::profile(&files, &settings, j, &mut profiles))
        .transpose()?;
    let template = TeammateTemplate::new(
        Path::new("templates/teammate.md"),
        DEFAULT_TEAMMATE_TEMPLATE,
    )?;
    let output = files.output.clone();
    let out_dir = output.parent().unwrap_or(Path::new("/")).to_owned();
    // A folder not there yet is made with the team's workspace inside it.
    if let Some(why) = crate::fsutil::cannot_make_or_write(&out_dir) {
        return Err(Error::Usage(format!(
            "{}: {why}; choose another --output",
            output.display()
        )));
    }
    let layout = layout(&files, &choices, &table, &settings)?;
    check_same_shard(&output, settings.shard)?;
    let mut previous =
        previous_output(&output, &layout, &settings.only, files.id_column.as_deref())?;
    let mut warnings: Vec<String> = Vec::new();
    if let Some(p) = previous.as_mut() {
        let same_item = files.id_column.is_some();
        warnings.extend(forget_changed_rows(p, &table, &output, same_item)?);
    }
    let selection = Selection {
        shard: settings.shard,
        only: settings.only.clone(),
        previous: previous.map(Arc::new),
    };
    let survey = survey(&files, &choices, &table, &selection)?;
    warnings.extend(
        table
            .hint
            .iter()
            .map(|hint| format!("{}:1: {hint}", files.input.display())),
    );
    if table.skipped_empty > 0 {
        warnings.push(format!(
            "{}: skipped {} empty record{} after the last row (a spreadsheet's `,,,` lines)",
            files.input.display(),
            table.skipped_empty,
            if table.skipped_empty == 1 { "" } else { "s" }
        ));
    }
    warnings.extend(layout.warnings.iter().cloned());
    let team = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "workers-output".into());
    let origin = out_dir.join(format!("{team}.runner"));
    let workspace = crate::schedule::layout::place_workspace(&origin, &settings, &cwd);
    // Rows from stdin are kept in the workspace: that copy is the batch's input.
    let stdin_copy = files.stdin.clone().map(|s| (s, workspace.join(STDIN_COPY)));
    let batch = BatchId::new(
        stdin_copy.as_ref().map_or(&files.input, |(_, p)| p),
        survey.fingerprint.clone(),
    )
    .with_ids(files.id_column.as_deref());
    warnings.extend(rows_gone_warning(&files, &workspace, &batch, &survey.ids));
    let files_at = column(&files, &table, "files_column", &files.files_column)?;
    warnings.extend(overlap::warnings(&table, files_at, &workspace)?);
    let (staged, runs) = (choices.chain.is_some(), |id: &str| selection.runs(id));
    let chains = overlap::serial_chains(&settings, staged, &table, files_at, &workspace, &runs)?;
    let inputs = inputs(&files);
    let source: Arc<dyn ItemSource> = Arc::new(Rows {
        table: table.clone(),
        instruction,
        selection: selection.clone(),
        deps: survey.deps,
        choices: choices.clone(),
    });
    let shard = settings.shard.map(|s| (s, survey.fingerprint));
    let sinks = sinks(&output, &table, &selection, layout, shard);
    let mut spec = RunSpec {
        schema: files.schema,
        rerun: rerun(&selection.only, choices.chain.as_deref()),
        files: Some(files.files),
        profiles,
        stages: choices
            .chain
            .as_ref()
            .map(|c| c.stages.iter().map(|s| s.name.clone()).collect())
            .unwrap_or_default(),
        judge_stage: judge,
        origin,
        chains,
        ..RunSpec::new(team, workspace, cwd, settings, template)?
    };
    spec.warnings.extend(warnings);
    // Each stage of a row is an item of its own.
    let per_row = choices.chain.as_ref().map_or(1, |c| c.stages.len() as u64);
    let plan = Plan {
        selected: survey.selected * per_row,
        total: table.rows * per_row,
        inputs,
        stdin_copy,
        ..Plan::new(spec, source, sinks, batch, WorkspaceFrom::Output, output)
    };
    crate::queue::attach(super::order::apply(plan)?, reseed)
}

/// Parse the instruction and scan the input (CSV, or JSON Lines for a `.jsonl` file; the
/// only time the file is opened), and check the instruction and `--verify` against its
/// columns (a header that looks like data is the table's `hint`, which the plan warns of).
///
/// Errors: the instruction does not parse, the input is bad, a placeholder names no column
/// (exit 2, naming the file and line).
fn scan(files: &CsvBatchFiles, settings: &Settings) -> Result<(Instruction, InputTable)> {
    let instruction = Instruction::parse(
        &files.instruction_path,
        files.instruction_line,
        &files.instruction,
    )?;
    let table = crate::source::input::input_format(&files.input).scan(
        &files.input,
        files.stdin.clone(),
        files.delimiter,
        files.id_column.as_deref(),
        Some(&instruction),
    )?;
    instruction
        .check_columns(&files.instruction_path, "the instruction", &table.headers)
        .map_err(|e| csv_input::with_hint(e, table.hint.as_deref()))?;
    if let Some(v) = &settings.verify {
        crate::prompt::check_verify(v, &table.headers)?;
    }
    Ok((instruction, table))
}

/// The output's columns: the input's, then the runner's (per stage with `stages:`, with the
/// model that answered when rows choose their runner or model).
///
/// Errors: an input column collides with one of the runner's (exit 2, naming the input); a
/// `raw_columns` name is no output field ([`output_csv::Layout::with_raw`]).
fn layout(
    files: &CsvBatchFiles,
    choices: &Choices,
    table: &InputTable,
    settings: &Settings,
) -> Result<output_csv::Layout> {
    let layout = match &choices.chain {
        None => {
            let l = output_csv::layout(
                &table.headers,
                files.schema.as_ref().map(|s| &s.0),
                settings.isolate,
                !settings.keep_formulas,
            );
            // Rows that choose their runner or model say which model answered.
            let l = match choices.runner.is_some() || choices.model.is_some() {
                true => l.with_models(),
                false => l,
            };
            match settings.best_of > 1 || choices.best_of.is_some() {
                true => l.with_best_of(),
                false => l,
            }
        }
        Some(chain) => crate::sink::output_stages::layout(
            &table.headers,
            chain
                .stages
                .iter()
                .map(|s| crate::sink::output_stages::StageColumns {
                    name: s.name.clone(),
                    fields: s.fields(),
                    best_of: choices.best_of.is_some()
                        || s.overrides
                            .best_of
                            .as_ref()
                            .map_or(settings.best_of, |b| b.count)
                            > 1,
                })
                .collect(),
            settings.isolate,
            !settings.keep_formulas,
        ),
    }
    .with_raw(&files.raw_columns)?;
    let mut seen_cols = HashSet::new();
    if let Some(dup) = layout
        .headers
        .iter()
        .find(|h| !seen_cols.insert(h.as_str()))
    {
        return Err(Error::input_at(
            &files.input,
            Some(1),
            format!(
                "column `{dup}` collides with one of the runner's output columns, even as runner_<name>; rename it"
            ),
        ));
    }
    Ok(layout)
}

/// The warning about rows the last output holds that the input no longer does
/// ([`rows_gone`]) — only when the input changed since the last run of this workspace, which
/// is this batch's.
fn rows_gone_warning(
    files: &CsvBatchFiles,
    workspace: &Path,
    batch: &BatchId,
    ids: &[u64],
) -> Option<String> {
    let unchanged = team::recorded_batch(workspace).is_ok_and(|b| b.as_ref() == Some(batch));
    if unchanged || team::check_owner(workspace, batch).is_err() {
        return None;
    }
    rows_gone(&files.output, &files.input, files.id_column.as_deref(), ids)
}

/// What the run reads, for the plan's start-up checks: the input (not stdin), the
/// instruction, BATCH.md, the schema and stage instruction files.
fn inputs(files: &CsvBatchFiles) -> Vec<PlanFile> {
    let mut inputs = Vec::new();
    if files.stdin.is_none() {
        inputs.push(PlanFile::new("input", &files.input, ""));
    }
    inputs.push(PlanFile::new("instruction", &files.instruction_path, ""));
    inputs.extend(files.reads.iter().map(|(w, p)| PlanFile::new(w, p, "")));
    inputs
}

/// The sinks of a CSV batch: the output (CSV or JSON Lines) of the rows `selection` covers,
/// and with `--shard` (this shard and the batch fingerprint) its sidecar.
fn sinks(
    output: &Path,
    table: &InputTable,
    selection: &Selection,
    layout: output_csv::Layout,
    shard: Option<(crate::options::selection::Shard, String)>,
) -> Sinks {
    let mut sinks = Sinks::default();
    sinks.push(Box::new(Output::new(
        output.to_owned(),
        table.clone(),
        selection.clone(),
        layout,
    )));
    if let Some((shard, fingerprint)) = shard {
        sinks.push(Box::new(ShardSidecar {
            output: output.to_owned(),
            fingerprint,
            shard,
            table: table.clone(),
        }));
    }
    sinks
}

/// The ids run even when the journal has them completed: `--only ID` names rows, each
/// rerun with its whole chain of stages.
fn rerun(only: &Only, chain: Option<&Chain>) -> HashSet<String> {
    match only {
        Only::Ids(ids) => match chain {
            None => ids.clone(),
            Some(chain) => ids
                .iter()
                .flat_map(|id| {
                    chain
                        .stages
                        .iter()
                        .map(|s| crate::item::stage_id(id, &s.name))
                })
                .collect(),
        },
        Only::All | Only::Failed => HashSet::new(),
        // Blocked rows are run again even though the journal has their outcome.
        Only::Blocked => HashSet::new(),
    }
}

/// Refuse to replace an existing output that holds another slice of the batch: a shard's
/// output (its `.shard.json` sidecar says which) under another `--shard`, or the whole
/// batch's output under a shard. Each `runner batch --shard K/N -o FILE` with the same FILE
/// would otherwise replace the previous shard's rows.
///
/// Errors: exit 2, naming the file, both slices and what to do.
fn check_same_shard(output: &Path, shard: Option<crate::options::selection::Shard>) -> Result<()> {
    if !output.is_file() {
        return Ok(());
    }
    let sidecar = crate::sink::shard_meta::path_for(output);
    let recorded = match sidecar.is_file() {
        true => {
            let m = crate::sink::shard_meta::ShardMeta::read(output)?;
            Some((m.k, m.n))
        }
        false => None,
    };
    let now = shard.map(|s| (s.k, s.n));
    if recorded == now {
        return Ok(());
    }
    let name = |s: Option<(u32, u32)>| {
        s.map_or("the whole batch".to_string(), |(k, n)| {
            format!("shard {k}/{n}")
        })
    };
    Err(Error::Usage(format!(
        "{}: this output holds {}, and this run is {}: it would replace those rows; give each shard its own --output (e.g. {}), or leave --output out (shard outputs are then named <output>.shard-K-of-N.csv)",
        output.display(),
        name(recorded),
        name(now),
        now.map_or("out.csv".to_string(), |(k, n)| {
            let stem = output
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("{stem}.shard-{k}-of-{n}.csv")
        })
    )))
}

/// The previous output that `--only` replays (`None` for a run of every row, or no
/// output yet).
///
/// Errors: `--only failed` without an output to replay; an output whose columns differ.
/// Stop trusting the rows of the previous output whose input values differ from the input's
/// row of the same id ([`Previous::forget_changed`]; `same_item`: ids come from an id
/// column): they are run again rather than copied. Returns the warning that says how many,
/// if any.
///
/// Errors: the input cannot be read again.
fn forget_changed_rows(
    previous: &mut Previous,
    table: &InputTable,
    output: &Path,
    same_item: bool,
) -> Result<Option<String>> {
    let mut current = Vec::new();
    for row in table.rows()? {
        let row = row?;
        let print = crate::sink::previous::fingerprint(row.values.iter().map(String::as_str));
        current.push((row.id, print));
    }
    let changed =
        previous.forget_changed(current.iter().map(|(id, p)| (id.as_str(), *p)), same_item);
    let why = match same_item {
        true => "completed there, their input values changed since",
        false => {
            "each showed other input values under its row number (a row was inserted or removed above it)"
        }
    };
    Ok((changed > 0).then(|| {
        format!(
            "{}: {changed} row(s) are run again instead of copied: {why}",
            output.display()
        )
    }))
}

fn previous_output(
    output: &Path,
    layout: &output_csv::Layout,
    only: &Only,
    id_column: Option<&str>,
) -> Result<Option<Previous>> {
    match only {
        Only::All => Ok(None),
        _ if !output.exists() && matches!(only, Only::Failed | Only::Blocked) => {
            Err(Error::Usage(format!(
                "{}: --only {} replays an existing output, and there is none",
                output.display(),
                if *only == Only::Failed {
                    "failed"
                } else {
                    "blocked"
                }
            )))
        }
        _ if !output.exists() => Ok(None),
        _ => {
            let status_col = if layout.headers.iter().any(|h| h == "runner_status") {
                "runner_status"
            } else {
                "status"
            };
            crate::sink::output::output_format(output)
                .previous(
                    output,
                    &layout.headers,
                    layout.inputs,
                    id_column,
                    status_col,
                )
                .map(Some)
        }
    }
}
