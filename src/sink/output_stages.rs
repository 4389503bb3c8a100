//! The columns of a staged batch's output (BATCH.md `stages:`, issue 33): still one row per
//! input row. The runner's columns describe the row's whole chain ([`overall`]: completed
//! only when every stage completed; otherwise the first stage that did not, its error named
//! `stage STAGE: …`); then, per stage, `STAGE.status`, `STAGE.summary`, `STAGE.error`,
//! `STAGE.model` (the model that answered, as the CLI or API says), for a stage that fans
//! out to candidates `STAGE.winner` and `STAGE.candidates` (as the whole-item columns), one
//! `STAGE.<field>` per property of its `output_schema` (without one, `STAGE.result`: the
//! report's `output` as JSON) and its hand-off fields (`STAGE.files_modified`, …).

use serde_json::{Value, json};

use super::output_csv::Layout;
use crate::report::ItemStatus;
use crate::run::record::outcome::Outcome;

/// The report's hand-off fields each stage has a column for.
const HANDOFF: [&str; 5] = [
    "files_modified",
    "files_created",
    "tests",
    "blocker",
    "next_steps",
];

/// One stage's part of the layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StageColumns {
    /// The stage's name.
    pub name: String,
    /// Its output schema's properties; `None`: one `STAGE.result` column.
    pub fields: Option<Vec<String>>,
    /// It may fan out to candidates (its own `best_of:`, the batch's, a row's cell): it has
    /// `STAGE.winner` and `STAGE.candidates` columns.
    pub best_of: bool,
}

impl StageColumns {
    /// Its column names, in order.
    pub(crate) fn headers(&self) -> Vec<String> {
        let n = &self.name;
        let mut h = vec![
            format!("{n}.status"),
            format!("{n}.summary"),
            format!("{n}.error"),
            format!("{n}.model"),
        ];
        if self.best_of {
            h.extend([format!("{n}.winner"), format!("{n}.candidates")]);
        }
        match &self.fields {
            Some(fields) => h.extend(fields.iter().map(|f| format!("{n}.{f}"))),
            None => h.push(format!("{n}.result")),
        }
        h.extend(HANDOFF.iter().map(|k| format!("{n}.{k}")));
        h
    }
}

/// The layout of a staged batch's output: the input columns, no output columns of its own,
/// the runner's columns, then each stage's ([`StageColumns::headers`]).
pub(crate) fn layout(
    inputs: &[String],
    stages: Vec<StageColumns>,
    worktree: bool,
    guard_formulas: bool,
) -> Layout {
    let none = json!({"properties": {}});
    let mut l = super::output_csv::layout(inputs, Some(&none), worktree, guard_formulas);
    for s in &stages {
        l.headers.extend(s.headers());
    }
    l.stages = stages;
    l
}

/// The outcome a row's chain stands for, from its stages' (in the layout's order; `None`
/// where a stage has none yet): completed when every stage completed; else the first stage
/// (in that order) that did not, its error as `stage STAGE: …`. Attempts, time, cost and
/// tokens add up; the times span the chain; the summary is the last completed stage's; the
/// files modified and created are every stage's; the other hand-off fields are those of the
/// deciding stage (the last one, when all completed).
/// `None` while a stage that may still run has no outcome.
pub(crate) fn overall(row: &str, names: &[String], stages: &[Option<Outcome>]) -> Option<Outcome> {
    let deciding = names.iter().zip(stages).find(|(_, o)| {
        o.as_ref()
            .is_some_and(|o| o.status != ItemStatus::Completed)
    });
    if deciding.is_none() && stages.iter().any(Option::is_none) {
        return None;
    }
    let ran: Vec<&Outcome> = stages.iter().flatten().collect();
    let last_done = ran
        .iter()
        .rev()
        .find(|o| o.status == ItemStatus::Completed)
        .copied();
    let base = match deciding {
        Some((_, Some(o))) => o,
        _ => *ran.last()?,
    };
    let mut o = base.clone();
    o.id = row.to_owned();
    if let Some((name, Some(d))) = deciding {
        o.error = match d.error.is_empty() {
            true => format!("stage {name}: {}", d.status),
            false => format!("stage {name}: {}", d.error),
        };
    }
    o.summary = last_done.map(|d| d.summary.clone()).unwrap_or_default();
    o.attempts = ran.iter().map(|s| s.attempts).sum();
    o.duration_s = ran.iter().map(|s| s.duration_s).sum();
    o.started_at = ran
        .iter()
        .map(|s| s.started_at.as_str())
        .filter(|t| !t.is_empty())
        .min()
        .unwrap_or_default()
        .to_owned();
    o.finished_at = ran
        .iter()
        .map(|s| s.finished_at.as_str())
        .max()
        .unwrap_or_default()
        .to_owned();
    let sum_f =
        |f: fn(&Outcome) -> Option<f64>| ran.iter().filter_map(|s| f(s)).reduce(|a, b| a + b);
    let sum_u =
        |f: fn(&Outcome) -> Option<u64>| ran.iter().filter_map(|s| f(s)).reduce(|a, b| a + b);
    o.cost_usd = sum_f(|s| s.cost_usd);
    o.input_tokens = sum_u(|s| s.input_tokens);
    o.output_tokens = sum_u(|s| s.output_tokens);
    o.turns = sum_u(|s| s.turns);
    o.output = Value::Null;
    // The files the chain touched: every stage's, in order, once each.
    if let Some(Value::Object(report)) = o.report.as_mut() {
        for key in ["files_modified", "files_created"] {
            let mut all: Vec<Value> = Vec::new();
            for s in &ran {
                let list = s
                    .report
                    .as_ref()
                    .and_then(|r| r.get(key))
                    .and_then(Value::as_array);
                for f in list.into_iter().flatten() {
                    if !all.contains(f) {
                        all.push(f.clone());
                    }
                }
            }
            report.insert(key.into(), Value::Array(all));
        }
    }
    Some(o)
}

/// Each stage's cells of a CSV row, after the runner's.
pub(crate) fn cells(layout: &Layout, stages: &[Option<Outcome>]) -> Vec<String> {
    let mut out = Vec::new();
    for (cols, o) in layout.stages.iter().zip(stages) {
        let headers = cols.headers();
        let handoff_from = headers.len() - HANDOFF.len();
        for (i, v) in values(cols, o.as_ref()).into_iter().enumerate() {
            // An output field BATCH.md's `raw_columns` names is written as it is.
            let agent = |v: String| layout.agent_value(&headers[i], v);
            out.push(match v {
                Value::Null => String::new(),
                Value::String(s) => agent(s),
                // An empty hand-off list is an empty cell, as in the runner's columns; an
                // output field's `[]` is the teammate's value, written as JSON.
                Value::Array(a) if a.is_empty() && i >= handoff_from => String::new(),
                other => agent(other.to_string()),
            });
        }
    }
    out
}

/// Each stage's fields of a JSON Lines row, named as the CSV's columns.
pub(crate) fn fields(layout: &Layout, stages: &[Option<Outcome>]) -> Vec<(String, Value)> {
    layout
        .stages
        .iter()
        .zip(stages)
        .flat_map(|(cols, o)| cols.headers().into_iter().zip(values(cols, o.as_ref())))
        .collect()
}

/// One stage's values, in [`StageColumns::headers`] order (`null` where it has none).
fn values(cols: &StageColumns, o: Option<&Outcome>) -> Vec<Value> {
    let text = |s: &str| match s.is_empty() {
        true => Value::Null,
        false => json!(s),
    };
    let mut v = vec![
        o.map_or(Value::Null, |o| json!(o.status.to_string())),
        o.map_or(Value::Null, |o| text(&o.summary)),
        o.map_or(Value::Null, |o| text(&o.error)),
        json!(o.and_then(|o| o.model.clone())),
    ];
    if cols.best_of {
        let b = o.and_then(|o| o.best_of.as_deref());
        v.push(b.map_or(Value::Null, |b| text(&b.winner_text())));
        v.push(b.map_or(Value::Null, |b| text(&b.candidates_text())));
    }
    let output = o.map_or(&Value::Null, |o| &o.output);
    match &cols.fields {
        Some(fields) => v.extend(
            fields
                .iter()
                .map(|f| output.get(f).cloned().unwrap_or(Value::Null)),
        ),
        None => v.push(output.clone()),
    }
    v.extend(HANDOFF.iter().map(|k| {
        o.and_then(|o| o.report.as_ref())
            .and_then(|r| r.get(*k))
            .cloned()
            .unwrap_or(Value::Null)
    }));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(id: &str, status: ItemStatus, summary: &str) -> Outcome {
        let mut o = Outcome::not_run(id, id, id, status, String::new());
        o.summary = summary.into();
        o.attempts = 1;
        o.duration_s = 2.0;
        o.cost_usd = Some(0.5);
        if status == ItemStatus::Failed {
            o.error = "tests fail".into();
        }
        o
    }

    #[test]
    fn the_row_is_completed_only_when_every_stage_is_and_else_names_the_stage() {
        let names = vec!["audit".to_string(), "fix".into(), "verify".into()];
        let all = [
            Some(done("r/audit", ItemStatus::Completed, "found 2")),
            Some(done("r/fix", ItemStatus::Completed, "fixed")),
            Some(done("r/verify", ItemStatus::Completed, "checked")),
        ];
        let o = overall("r", &names, &all).expect("done");
        assert_eq!(
            (o.status, o.attempts, o.id.as_str()),
            (ItemStatus::Completed, 3, "r")
        );
        assert_eq!(o.summary, "checked");
        assert_eq!(o.cost_usd, Some(1.5));
        let stopped = [
            Some(done("r/audit", ItemStatus::Completed, "found 2")),
            Some(done("r/fix", ItemStatus::Failed, "")),
            Some(done("r/verify", ItemStatus::Skipped, "")),
        ];
        let o = overall("r", &names, &stopped).expect("decided");
        assert_eq!(o.status, ItemStatus::Failed);
        assert_eq!(o.error, "stage fix: tests fail");
        assert_eq!(o.summary, "found 2");
        let going = [Some(done("r/audit", ItemStatus::Completed, "")), None, None];
        assert!(overall("r", &names, &going).is_none(), "still running");
    }

    #[test]
    fn each_stage_has_its_columns_after_the_runners() {
        let stages = vec![
            StageColumns {
                name: "audit".into(),
                fields: Some(vec!["problems".into()]),
                best_of: false,
            },
            StageColumns {
                name: "fix".into(),
                fields: None,
                best_of: false,
            },
        ];
        let l = layout(&["path".into()], stages, false, true);
        let at = |h: &str| l.headers.iter().position(|x| x == h).expect(h);
        assert!(at("status") < at("audit.status"));
        assert_eq!(l.runner_column("status"), Some(at("status")));
        assert!(!l.headers.iter().any(|h| h == "result"));
        assert_eq!(
            &l.headers[at("audit.status")..at("fix.status")],
            [
                "audit.status",
                "audit.summary",
                "audit.error",
                "audit.model",
                "audit.problems",
                "audit.files_modified",
                "audit.files_created",
                "audit.tests",
                "audit.blocker",
                "audit.next_steps"
            ]
        );
        let mut a = done("r/audit", ItemStatus::Completed, "=cmd");
        a.output = json!({"problems": ["x"]});
        let cells = cells(&l, &[Some(a), None]);
        assert_eq!(cells.len(), l.stage_cells());
        assert_eq!(&cells[..5], ["completed", "'=cmd", "", "", "[\"x\"]"]);
    }
}
