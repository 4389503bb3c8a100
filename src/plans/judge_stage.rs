//! `--judge stage NAME` / BATCH.md `judge: stage NAME` at planning (DESIGN §13): the stage
//! NAME is taken out of BATCH.md's `stages:` (it runs for no row as a stage, only as the
//! judge of an item's candidates), its instruction checked (row columns and
//! `{candidates}`), and it becomes a profile of the run with its own runner, model and
//! schema — and no `--verify` but its own.

use crate::error::{Error, Result};
use crate::options::best_of::Judge;
use crate::run::{JudgeStage, Profile};
use crate::settings::Settings;
use crate::source::stages::Stage;

use super::csv_batch::CsvBatchFiles;

/// The value the judge's instruction gets the surviving candidates in.
const CANDIDATES: &str = "candidates";

/// With `judge: stage NAME`: take stage NAME out of `files.stages` (no stages left: the
/// batch's instruction is each row's again) and check its instruction against `headers`
/// and `{candidates}`. `None` for another judge.
///
/// Errors (exit 2, nothing written): the batch has no stages, none named NAME, NAME was
/// its only stage and BATCH.md has no body for the rows, or its instruction names an
/// unknown column.
pub(super) fn take(
    files: &mut CsvBatchFiles,
    settings: &Settings,
    headers: &[String],
) -> Result<Option<Stage>> {
    let Judge::Stage(name) = &settings.judge else {
        return Ok(None);
    };
    let path = files.instruction_path.clone();
    let whose = format!("`judge: stage {name}` (--judge or BATCH.md's judge)");
    let Some(chain) = files.stages.as_mut() else {
        return Err(Error::Usage(format!(
            "{whose}: {} has no `stages:`; declare the judge stage there (`stages: [{{name: {name}, instruction: \"Pick the best: {{candidates}}\"}}]`) and run the batch with that BATCH.md",
            path.display()
        )));
    };
    let names: Vec<String> = chain.stages.iter().map(|s| s.name.clone()).collect();
    let Some(stage) = chain.take(name) else {
        return Err(Error::input_at(
            &path,
            None,
            format!(
                "{whose}: there is no stage named `{name}`{}; its stages are: {}",
                crate::suggest::did_you_mean(name, names.iter().map(String::as_str)),
                names.join(", ")
            ),
        ));
    };
    if chain.stages.is_empty() {
        if files.instruction.trim().is_empty() {
            return Err(Error::input_at(
                &path,
                None,
                format!(
                    "{whose}: `{name}` is its only stage and the body (the rows' instruction) is empty; write what each candidate does below the frontmatter"
                ),
            ));
        }
        files.stages = None;
    }
    let mut known: Vec<String> = headers.to_vec();
    known.push(CANDIDATES.into());
    stage.own.check_columns(
        &stage.path,
        &format!("the instruction of judge stage `{name}`"),
        &known,
    )?;
    Ok(Some(stage))
}

/// The judge stage as the run holds it: its profile added to `profiles` — the batch's
/// settings with the stage's changes, no fan-out of its own, `--verify` only when the
/// stage sets its own, and its own `output_schema` only (not the batch's).
///
/// Errors: the stage's runner, model, schema or backend are bad (exit 2, naming it).
pub(super) fn profile(
    files: &CsvBatchFiles,
    settings: &Settings,
    stage: Stage,
    profiles: &mut Vec<Profile>,
) -> Result<JudgeStage> {
    let none = (String::new(), String::new(), String::new());
    let Some(mut p) = super::choices::profile(files, settings, Some(&stage), &none, "")? else {
        return Err(Error::Usage(format!(
            "judge stage `{}`: no settings could be made for it",
            stage.name
        )));
    };
    // The batch's schema is the candidates' (a stage without one of its own inherits it);
    // the judge's report has its own shape (`winner`).
    if stage.schema.is_some() && stage.schema == files.schema.as_ref().map(|(v, _)| v.clone()) {
        p.schema = None;
    }
    if stage.overrides.verify.is_none() {
        p.settings.verify = None;
    }
    p.settings = p.settings.without_fan_out();
    p.settings.judge = Judge::Passing;
    profiles.push(p);
    Ok(JudgeStage {
        name: stage.name,
        instruction: stage.instruction,
        profile: (profiles.len() - 1) as u32,
    })
}
