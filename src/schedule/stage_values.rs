//! The values of earlier stages a stage's instruction uses (`{STAGE.summary}`,
//! `{STAGE.output.FIELD}`, [`crate::source::stages`]): read from their journaled outcomes when
//! the stage starts and filled in with [`crate::source::stages::fill`].

use serde_json::Value;

use crate::error::Result;
use crate::item::WorkItem;
use crate::run::record::outcome::Outcome;
use crate::source::stages::fill;

/// The most bytes one `{STAGE.…}` value puts into a prompt; a longer one is cut with a note.
pub(crate) const VALUE_MAX: usize = 64 * 1024;

/// [`fill`] from the earlier stages' outcomes, read with `outcome` (by item id; `None`: the
/// value is empty).
///
/// Errors: the journal cannot be read.
pub(crate) fn fill_from(
    item: &mut WorkItem,
    mut outcome: impl FnMut(&str) -> Result<Option<Outcome>>,
) -> Result<()> {
    // Each earlier stage's outcome is read once, however many of its values are used.
    let mut read: Vec<(String, Option<Outcome>)> = Vec::new();
    fill(item, |id, what| {
        let at = match read.iter().position(|(r, _)| r == id) {
            Some(i) => i,
            None => {
                read.push((id.to_owned(), outcome(id)?));
                read.len() - 1
            }
        };
        Ok(read[at]
            .1
            .as_ref()
            .map(|o| value_of(o, what))
            .unwrap_or_default())
    })
}

/// The value `what` (`summary`, `status`, `error`, `output`, `output.FIELD[.FIELD…]`) of an
/// outcome, as text: strings as they are, other JSON as JSON; at most [`VALUE_MAX`] bytes.
pub(crate) fn value_of(o: &Outcome, what: &str) -> String {
    let text = match what {
        "summary" => o.summary.clone(),
        "status" => o.status.to_string(),
        "error" => o.error.clone(),
        "output" => json_text(&o.output),
        _ => match what.strip_prefix("output.") {
            Some(path) => path
                .split('.')
                .try_fold(&o.output, |v, key| v.get(key))
                .map(json_text)
                .unwrap_or_default(),
            None => String::new(),
        },
    };
    cut(text)
}

fn json_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn cut(mut text: String) -> String {
    if text.len() <= VALUE_MAX {
        return text;
    }
    let mut end = VALUE_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!("… (cut at {VALUE_MAX} bytes)"));
    text
}
