//! `--order longest-first` (DESIGN §8a): each item's expected duration — its row's
//! `weight_column` number, else its `duration_s` in the previous output — for the pipeline to
//! start the longest first on one machine, and for a queue's first worker to seed them in
//! that order. Long items started last are what make a run end late.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::item::WorkItem;
use crate::options::order::Order;
use crate::schedule::plan::Plan;

/// `plan` with its items' expected durations when `--order longest-first` asks for them.
///
/// Errors (exit 2): `--weight-column` names no column of the input, or a row's value there
/// is not a number ≥ 0 (naming the input and line); the previous output cannot be read.
pub(crate) fn apply(mut plan: Plan) -> Result<Plan> {
    if plan.spec.settings.order != Order::LongestFirst {
        return Ok(plan);
    }
    let items = plan.source.items()?.collect::<Result<Vec<WorkItem>>>()?;
    let input = Path::new(&plan.batch.input).to_owned();
    let weights = match plan.spec.settings.weight_column.clone() {
        Some(column) => from_column(&column, &items, &input)?,
        None => previous_durations(&plan.output, plan.batch.ids.as_deref())?,
    };
    plan.weights = Some(Arc::new(weights));
    Ok(plan)
}

/// Each item's number in `column`; an empty cell gives none.
fn from_column(column: &str, items: &[WorkItem], input: &Path) -> Result<HashMap<String, f64>> {
    let mut weights = HashMap::new();
    let mut seen = false;
    for item in items {
        let Some((_, value)) = item.vars.iter().find(|(name, _)| name == column) else {
            continue;
        };
        seen = true;
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        match value.parse::<f64>() {
            Ok(w) if w.is_finite() && w >= 0.0 => {
                weights.insert(item.id.clone(), w);
            }
            _ => {
                return Err(Error::input_at(
                    input,
                    Some(item.line),
                    format!(
                        "weight_column `{column}`: `{}` is not a number ≥ 0 (an expected duration, in any unit)",
                        crate::shown::terminal_safe(value)
                    ),
                ));
            }
        }
    }
    if !seen && !items.is_empty() {
        return Err(Error::Usage(format!(
            "--weight-column `{column}`: {} has no such column; name the column that holds each row's expected duration",
            input.display()
        )));
    }
    Ok(weights)
}

/// Each item's `duration_s` in the previous CSV output, when there is one (an output of
/// another kind, or none, gives none: the input's order). `ids`: how the batch names its
/// items (`column NAME`, else by row number).
fn previous_durations(output: &Path, ids: Option<&str>) -> Result<HashMap<String, f64>> {
    let mut weights = HashMap::new();
    let Ok(file) = std::fs::File::open(output) else {
        return Ok(weights);
    };
    let mut rows = csv::ReaderBuilder::new().flexible(true).from_reader(file);
    let Ok(headers) = rows.headers().cloned() else {
        return Ok(weights);
    };
    let at = |name: &str| headers.iter().position(|h| h == name);
    let Some(duration) = at("duration_s") else {
        return Ok(weights);
    };
    let id_at = ids.and_then(|i| i.strip_prefix("column ")).and_then(at);
    for (n, row) in rows.records().enumerate() {
        let row = row.map_err(|e| {
            Error::input_at(
                output,
                None,
                format!("the previous output cannot be read: {e}"),
            )
        })?;
        let id = match id_at {
            Some(i) => row.get(i).unwrap_or_default().to_owned(),
            None => (n + 1).to_string(),
        };
        if let Some(d) = row
            .get(duration)
            .and_then(|d| d.trim().parse::<f64>().ok())
            .filter(|d| d.is_finite() && *d >= 0.0)
        {
            weights.insert(id, d);
        }
    }
    Ok(weights)
}
