//! How a CSV batch's rows run when not all alike (issue 33, issue 52): stages, and a row's own
//! runner (`runner_column`), model (`model_column`) and fan-out (`best_of_column`) — each
//! (stage, runner cell, model cell, best-of cell) that occurs becomes a
//! [`crate::run::Profile`] of the run, checked before anything starts.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::options::best_of::BestOf;
use crate::settings::Settings;
use crate::source::input::InputTable;
use crate::source::stages::Chain;

use super::csv_batch::CsvBatchFiles;

/// A row's (runner, model, best-of) cells, trimmed; empty where the batch decides.
type Cells = (String, String, String);

/// How a row's items run when the batch has stages or lets a row choose its runner and
/// model (issue 33).
#[derive(Default)]
pub(super) struct Choices {
    /// Each row's chain of stages.
    pub chain: Option<Arc<Chain>>,
    /// The `runner_column`'s index.
    pub runner: Option<usize>,
    /// The `model_column`'s index.
    pub model: Option<usize>,
    /// The `best_of_column`'s index.
    pub best_of: Option<usize>,
    /// The profile of (stage, a row's runner cell, its model cell, its best-of cell) — the
    /// index into [`crate::run::RunSpec::profiles`]; absent: the batch's settings.
    profiles: HashMap<(Option<usize>, Cells), u32>,
}

impl Choices {
    /// A row's (runner, model, best-of) cells, trimmed; empty where the batch decides.
    fn cells(&self, values: &[String]) -> Cells {
        let cell = |i: Option<usize>| {
            i.and_then(|i| values.get(i))
                .map_or(String::new(), |v| v.trim().to_owned())
        };
        (cell(self.runner), cell(self.model), cell(self.best_of))
    }

    /// The profile of stage `stage` (`None`: the whole row) of a row with these values.
    pub(super) fn profile(&self, stage: Option<usize>, values: &[String]) -> Option<u32> {
        self.profiles.get(&(stage, self.cells(values))).copied()
    }
}

/// Most distinct (runner, model, best-of) choices the rows of one batch may make.
const CHOICES_MAX: usize = 64;

/// The stages and each row's runner, model and fan-out as profiles of the run: one per
/// (stage, row runner, row model, row best-of) that occurs, each checked now (its runner definition loads, its
/// program is installed, its schema compiles, its backend can be built).
///
/// Errors: exit 2 naming the file: a `runner_column` / `model_column` / `best_of_column`
/// that is no column, a runner a row or stage names that does not exist, a best-of cell
/// that is not one ([`chosen`]), more than [`CHOICES_MAX`] choices; exit 3 for a program
/// that is not installed.
pub(super) fn choices(
    files: &CsvBatchFiles,
    chain: Option<&Arc<Chain>>,
    table: &InputTable,
    settings: &Settings,
) -> Result<(Arc<Choices>, Vec<crate::run::Profile>)> {
    let mut choices = Choices {
        chain: None,
        runner: column(files, table, "runner_column", &files.runner_column)?,
        model: column(files, table, "model_column", &files.model_column)?,
        best_of: column(files, table, "best_of_column", &settings.best_of_column)?,
        profiles: HashMap::new(),
    };
    let seen = chosen(files, table, &choices)?;
    // A runner a row names must exist, even where every stage chooses its own.
    for ((runner, _, _), row) in seen.iter().filter(|((r, _, _), _)| !r.is_empty()) {
        crate::agent::definition::load(runner, None, None).map_err(|e| {
            e.within(&format!(
                "{}: row {row}, column `{}`",
                files.input.display(),
                files.runner_column.as_deref().unwrap_or_default()
            ))
        })?;
    }
    let stages: Vec<Option<usize>> = match chain {
        None => vec![None],
        Some(chain) => (0..chain.stages.len()).map(Some).collect(),
    };
    let mut profiles = Vec::new();
    for stage in stages {
        let spec = stage.and_then(|i| chain.map(|c| &c.stages[i]));
        for (choice, row) in &seen {
            if let Some(profile) = profile(files, settings, spec, choice, row)? {
                choices
                    .profiles
                    .insert((stage, choice.clone()), profiles.len() as u32);
                profiles.push(profile);
            }
        }
    }
    choices.chain = chain.cloned();
    Ok((Arc::new(choices), profiles))
}

/// The index of the column BATCH.md's `key` names (`runner_column: NAME`); `None` when it
/// names none.
///
/// Errors: exit 2 naming BATCH.md: `name` is no column of the input.
pub(super) fn column(
    files: &CsvBatchFiles,
    table: &InputTable,
    key: &str,
    name: &Option<String>,
) -> Result<Option<usize>> {
    let Some(name) = name else { return Ok(None) };
    match table.headers.iter().position(|h| h == name) {
        Some(i) => Ok(Some(i)),
        None => Err(Error::input_at(
            &files.instruction_path,
            None,
            format!(
                "`{key}: {name}` is not a column of {}{}; its columns are: {}",
                files.input.display(),
                crate::suggest::did_you_mean(name, table.headers.iter().map(String::as_str)),
                table.headers.join(", ")
            ),
        )),
    }
}

/// Every (runner, model, best-of) the rows choose, in first-seen order, each with the id of a
/// row that does; the batch's own (empty cells, no row) first.
///
/// Errors (exit 2, at the row): a best-of cell that is neither a number of candidates nor a
/// list of runners, a list naming a runner that does not exist, or a list beside the row's own runner or model; more than
/// [`CHOICES_MAX`] choices.
fn chosen(
    files: &CsvBatchFiles,
    table: &InputTable,
    choices: &Choices,
) -> Result<Vec<(Cells, String)>> {
    let mut seen: Vec<(Cells, String)> = vec![(Cells::default(), String::new())];
    if choices.runner.is_none() && choices.model.is_none() && choices.best_of.is_none() {
        return Ok(seen);
    }
    let column = |i: Option<usize>| {
        i.and_then(|i| table.headers.get(i))
            .map_or("", String::as_str)
    };
    for row in table.rows()? {
        let row = row?;
        let key = choices.cells(&row.values);
        if !key.2.is_empty() {
            let at = |what: String| {
                let column = column(choices.best_of);
                Error::input_at(
                    &files.input,
                    Some(row.line),
                    format!("column `{column}`: {what}"),
                )
            };
            let fan = key.2.parse::<BestOf>().map_err(|rule| {
                at(format!(
                    "`{}` {rule}; or leave the cell empty for the batch's own",
                    crate::shown::terminal_safe(&key.2)
                ))
            })?;
            // Each runner of a list must exist; said here, where the row's line is known.
            for (runner, _) in &fan.runners {
                crate::agent::definition::load(runner, None, None)
                    .map_err(|e| at(format!("`{}`: {e}", crate::shown::terminal_safe(&key.2))))?;
            }
            let own = !key.0.is_empty() || !key.1.is_empty();
            if !fan.runners.is_empty() && own {
                return Err(at(format!(
                    "`{}` gives each candidate its own runner, and the row names its own runner or model too; give the row one of them",
                    key.2
                )));
            }
        }
        if !seen.iter().any(|(k, _)| *k == key) {
            if seen.len() > CHOICES_MAX {
                return Err(Error::input_at(
                    &files.input,
                    Some(row.line),
                    format!(
                        "the rows choose more than {CHOICES_MAX} different runners, models and fan-outs; group them into fewer batches"
                    ),
                ));
            }
            seen.push((key, row.id.clone()));
        }
    }
    Ok(seen)
}

/// The profile of stage `stage` (`None`: a whole row) for rows choosing `(runner, model,
/// best-of)` (empty: the batch's), `row` one of them; `None` when it is the batch's own
/// settings.
///
/// Errors: the changed settings, the schema or the backend are bad, or a list of runners
/// to fan out to meets a stage's or row's own runner or model, named with whose choice it
/// was.
pub(super) fn profile(
    files: &CsvBatchFiles,
    settings: &Settings,
    stage: Option<&crate::source::stages::Stage>,
    (runner, model, best_of): &Cells,
    row: &str,
) -> Result<Option<crate::run::Profile>> {
    let mut o = stage.map(|s| s.overrides.clone()).unwrap_or_default();
    // A stage's own choice wins over the row's; the row's over the batch's.
    if o.runner.is_none() && !runner.is_empty() {
        o.runner = Some(runner.clone());
    }
    if o.model.is_none() && !model.is_empty() {
        o.model = Some(model.clone());
    }
    if o.best_of.is_none() && !best_of.is_empty() {
        // Checked by `chosen`.
        o.best_of = best_of.parse().ok();
    }
    if stage.is_none() && o.is_empty() {
        return Ok(None);
    }
    let mut label: Vec<String> = Vec::new();
    if let Some(s) = stage {
        label.push(format!("stage {}", s.name));
    }
    if let Some(r) = &o.runner {
        label.push(format!("runner {r}"));
    }
    if let Some(m) = &o.model {
        label.push(format!("model {m}"));
    }
    if let Some(b) = &o.best_of {
        label.push(format!("best of {}", fan_out(b)));
    }
    let label = label.join(", ");
    let whose = match (stage, row.is_empty()) {
        (Some(s), true) => format!("{}: stage `{}`", files.instruction_path.display(), s.name),
        (Some(s), false) => format!(
            "{}: stage `{}` of row {row} (the row chose {})",
            files.instruction_path.display(),
            s.name,
            [(runner, "runner"), (model, "model"), (best_of, "best of")]
                .iter()
                .filter(|(v, _)| !v.is_empty())
                .map(|(v, what)| format!("{what} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (None, _) => format!("{}: row {row} ({label})", files.input.display()),
    };
    let lists = o
        .best_of
        .as_ref()
        .map_or(&settings.best_of_runners, |b| &b.runners);
    if !lists.is_empty() && (o.runner.is_some() || o.model.is_some()) {
        return Err(Error::Usage(format!(
            "{whose}: its candidates each have their own runner (best of a list of runners), and it names its own runner or model too; give one of them"
        )));
    }
    let profile_settings = settings.with_overrides(&o).map_err(|e| e.within(&whose))?;
    let schema_value = match stage {
        Some(s) => s.schema.clone(),
        None => files.schema.as_ref().map(|(v, _)| v.clone()),
    };
    let schema = crate::settings::load_schema(schema_value, None)?;
    let backend =
        crate::run::backend::for_settings(&profile_settings).map_err(|e| e.within(&whose))?;
    Ok(Some(crate::run::Profile {
        label,
        settings: profile_settings,
        schema,
        backend,
        candidates: Vec::new(),
    }))
}

/// A fan-out as the plan names it: `3`, or `claude, codex:gpt-5`.
pub(crate) fn fan_out(b: &BestOf) -> String {
    match b.runners.is_empty() {
        true => b.count.to_string(),
        false => b
            .runners
            .iter()
            .map(|(r, m)| match m {
                Some(m) => format!("{r}:{m}"),
                None => r.clone(),
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}
