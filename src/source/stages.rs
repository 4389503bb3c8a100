//! Stages per row (BATCH.md `stages:`, issue 33): each row of a CSV batch runs as a chain of
//! teammates, one per stage, in the order `after:` gives (by default the stage before). A
//! stage is an item of its own (`ROW/STAGE`, [`crate::item::stage_id`]) that waits for its
//! earlier stages like any item waits for its prerequisites, so a stage that does not
//! complete stops its row's chain (the later stages are skipped, never started) and nothing
//! else; resume, `--only` and the journal work per stage.
//!
//! A later stage's instruction may use what an earlier one (one it waits for, directly or
//! not) reported: `{STAGE.summary}`, `{STAGE.status}`, `{STAGE.error}`, `{STAGE.output}`
//! (its whole output as JSON) and `{STAGE.output.FIELD}` (a field of its output; with an
//! `output_schema`, one of its properties). These are filled in when the stage starts
//! ([`fill`]), from the earlier stages' journaled outcomes
//! ([`crate::schedule::stage_values::fill_from`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::item::{StageOf, WorkItem, stage_id, teammate_name};
use crate::prompt::Instruction;
use crate::report::ItemStatus;
use crate::settings::Overrides;

/// What a stage's placeholder may read of an earlier stage's outcome.
const VALUE_NAMES: [&str; 4] = ["summary", "status", "error", "output"];

/// One stage of the batch, ready to make items.
pub(crate) struct Stage {
    /// Its name (`audit`).
    pub name: String,
    /// Its instruction (the batch's preamble first).
    pub instruction: Instruction,
    /// Its own text without the preamble, for the items' titles.
    pub own: Instruction,
    /// Where the instruction was written (BATCH.md or its `instruction_file`), for messages.
    pub path: PathBuf,
    /// The stages it waits for, by index.
    pub after: Vec<usize>,
    /// What it changes of the batch's settings.
    pub overrides: Overrides,
    /// Its output schema (its own, else the batch's), as given.
    pub schema: Option<Value>,
}

impl Stage {
    /// The top-level properties of its output schema; `None` without one.
    pub(crate) fn fields(&self) -> Option<Vec<String>> {
        self.schema
            .as_ref()
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
    }
}

/// The stages of a batch, in BATCH.md's order.
pub(crate) struct Chain {
    /// The stages.
    pub stages: Vec<Stage>,
}

impl Chain {
    /// Take stage `name` out of the chain (`--judge stage NAME`: it judges candidates and is
    /// no stage of a row): a stage that came after it comes after what it came after.
    /// `None` when there is no such stage.
    pub(crate) fn take(&mut self, name: &str) -> Option<Stage> {
        let j = self.stages.iter().position(|s| s.name == name)?;
        let taken = self.stages.remove(j);
        for s in &mut self.stages {
            if s.after.contains(&j) {
                s.after.retain(|a| *a != j);
                for a in &taken.after {
                    if !s.after.contains(a) {
                        s.after.push(*a);
                    }
                }
            }
            for a in &mut s.after {
                if *a > j {
                    *a -= 1;
                }
            }
        }
        Some(taken)
    }

    /// Every stage stage `i` waits for, directly or not.
    pub(crate) fn before(&self, i: usize) -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<usize> = self.stages[i].after.clone();
        while let Some(j) = todo.pop() {
            if seen.insert(j) {
                todo.extend(self.stages[j].after.iter().copied());
            }
        }
        seen
    }

    /// The stages no other stage waits for: where a row's chain ends.
    pub(crate) fn ends(&self) -> Vec<usize> {
        (0..self.stages.len())
            .filter(|i| !self.stages.iter().any(|s| s.after.contains(i)))
            .collect()
    }

    /// The stages in an order where each comes after those it waits for (BATCH.md's order
    /// where it allows).
    pub(crate) fn order(&self) -> Vec<usize> {
        let mut done: Vec<usize> = Vec::new();
        while done.len() < self.stages.len() {
            let before = done.len();
            for i in 0..self.stages.len() {
                if !done.contains(&i) && self.stages[i].after.iter().all(|a| done.contains(a)) {
                    done.push(i);
                }
            }
            if done.len() == before {
                // A circle: refused when BATCH.md was read.
                break;
            }
        }
        done
    }

    /// Whether `name` is a value of an earlier stage of stage `i` (`audit.summary`).
    fn is_stage_value(&self, i: usize, name: &str) -> bool {
        let Some((stage, what)) = name.split_once('.') else {
            return false;
        };
        self.stages
            .iter()
            .position(|s| s.name == stage)
            .is_some_and(|j| self.before(i).contains(&j))
            && (VALUE_NAMES.contains(&what) || what.starts_with("output."))
    }

    /// Check every placeholder of every stage (and each stage's verify command) names a
    /// column or a value of an earlier stage; with a schema, `{STAGE.output.FIELD}` must be
    /// one of its properties.
    ///
    /// Errors: exit 2, naming the stage's file and line, the unknown names and what is
    /// available.
    pub(crate) fn check(&self, columns: &[String]) -> Result<()> {
        for (i, stage) in self.stages.iter().enumerate() {
            let mut known: Vec<String> = columns.to_vec();
            for j in self.before(i) {
                let s = &self.stages[j];
                known.extend(VALUE_NAMES.iter().map(|v| format!("{}.{v}", s.name)));
                match s.fields() {
                    Some(fields) => {
                        known.extend(fields.iter().map(|f| format!("{}.output.{f}", s.name)))
                    }
                    // Without a schema any field may come: each is taken as written.
                    None => known.extend(
                        stage_fields_used(&stage.instruction, &s.name)
                            .into_iter()
                            .map(|f| format!("{}.output.{f}", s.name)),
                    ),
                }
            }
            // A value of a stage this one does not come after: say so, and how.
            let before = self.before(i);
            for p in stage.own.placeholders() {
                let Some((other, _)) = p.split_once('.') else {
                    continue;
                };
                if let Some(j) = self.stages.iter().position(|s| s.name == other)
                    && !before.contains(&j)
                {
                    return Err(Error::input_at(
                        &stage.path,
                        None,
                        format!(
                            "stage `{}` uses {{{p}}}, but it does not come after stage `{other}`, so that value is not there when it starts; add `after: {other}` to it (or list it with the others)",
                            stage.name
                        ),
                    ));
                }
            }
            let what = format!("the instruction of stage `{}`", stage.name);
            // Its own text: the preamble's placeholders are the batch's, checked with it.
            stage.own.check_columns(&stage.path, &what, &known)?;
            if let Some(verify) = &stage.overrides.verify {
                let argv = shlex::split(verify).unwrap_or_default();
                crate::prompt::check_verify(&argv, columns)
                    .map_err(|e| e.within(&format!("stage `{}`", stage.name)))?;
            }
        }
        Ok(())
    }

    /// The items of one row: one per stage, in [`Chain::order`], each waiting for its
    /// earlier stages; the first ones also wait for the row's own prerequisites (`deps`:
    /// other rows' ids; a row's chain is done when its last stages are). `profile` gives
    /// each stage's profile for this row.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn items(
        &self,
        headers: &[String],
        number: u64,
        line: u64,
        id: &str,
        values: &[String],
        deps: &[String],
        profile: impl Fn(usize) -> Option<u32>,
    ) -> Vec<WorkItem> {
        let ends = self.ends();
        let row_content = crate::item::content_hash(values.iter().map(String::as_str));
        let vars: Vec<(String, String)> = headers
            .iter()
            .cloned()
            .zip(values.iter().cloned())
            .collect();
        self.order()
            .into_iter()
            .map(|i| {
                let stage = &self.stages[i];
                let (body, inline, slots) = stage
                    .instruction
                    .render_with(headers, values, &|n| self.is_stage_value(i, n));
                let mut after: Vec<String> = stage
                    .after
                    .iter()
                    .map(|j| stage_id(id, &self.stages[*j].name))
                    .collect();
                if stage.after.is_empty() {
                    for d in deps {
                        after.extend(ends.iter().map(|e| stage_id(d, &self.stages[*e].name)));
                    }
                }
                let (own, _, own_slots) = stage
                    .own
                    .render_with(headers, values, &|n| self.is_stage_value(i, n));
                // The title is made before the earlier stages ran: their values by name.
                let own = with_markers(&own, &own_slots);
                let title = format!("{}: {}", stage.name, crate::item::title_of(&own, id));
                WorkItem {
                    id: stage_id(id, &stage.name),
                    title,
                    line,
                    teammate: format!("{}.{}", teammate_name(number, id), stage.name),
                    vars: vars.clone(),
                    body,
                    inline,
                    checkpoint: None,
                    after,
                    content: crate::item::content_hash([row_content.as_str(), &stage.name]),
                    stage: Some(Box::new(StageOf {
                        row: id.to_owned(),
                        name: stage.name.clone(),
                        index: i,
                        slots,
                    })),
                    profile: profile(i),
                    candidate: None,
                }
            })
            .collect()
    }
}

/// `text` with each slot's placeholder shown by name (`«audit.summary»`).
pub(crate) fn with_markers(text: &str, slots: &[(usize, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for (at, name) in slots {
        let at = (*at).min(text.len());
        out.push_str(text.get(from..at).unwrap_or_default());
        out.push_str(&format!("«{name}»"));
        from = at;
    }
    out.push_str(text.get(from..).unwrap_or_default());
    out
}

/// The fields `{STAGE.output.FIELD}` of stage `stage` that `instruction` uses.
fn stage_fields_used(instruction: &Instruction, stage: &str) -> Vec<String> {
    let prefix = format!("{stage}.output.");
    instruction
        .placeholders()
        .into_iter()
        .filter_map(|p| p.strip_prefix(&prefix).map(str::to_owned))
        .collect()
}

/// Fill a stage item's slots ([`StageOf::slots`]) with its earlier stages' values: `value`
/// gets the earlier stage's item id and what of it (`summary`, `output.problems`); the file
/// parts after the slots move with the text. An item with no slots is left as it is.
///
/// Errors: what `value` says (the journal cannot be read).
pub(crate) fn fill(
    item: &mut WorkItem,
    mut value: impl FnMut(&str, &str) -> Result<String>,
) -> Result<()> {
    let Some(stage) = item.stage.as_mut() else {
        return Ok(());
    };
    if stage.slots.is_empty() {
        return Ok(());
    }
    let slots = std::mem::take(&mut stage.slots);
    let row = stage.row.clone();
    let mut body = String::with_capacity(item.body.len());
    let mut from = 0;
    // (offset in the old text, bytes inserted there)
    let mut grown: Vec<(usize, usize)> = Vec::new();
    for (at, name) in slots {
        let at = at.min(item.body.len());
        body.push_str(item.body.get(from..at).unwrap_or_default());
        from = at;
        let (stage_name, what) = name.split_once('.').unwrap_or((name.as_str(), ""));
        let text = value(&stage_id(&row, stage_name), what)?;
        body.push_str(&text);
        grown.push((at, text.len()));
    }
    body.push_str(item.body.get(from..).unwrap_or_default());
    for part in &mut item.inline {
        let shift: usize = grown
            .iter()
            .filter(|(at, _)| *at <= part.at)
            .map(|(_, n)| n)
            .sum();
        part.at += shift;
    }
    item.body = body;
    Ok(())
}

/// The mark of a stage's status in a chain line: `✔` completed, `✘` failed or timed out,
/// `⏸` blocked, `–` skipped or cancelled (not run), `…` not finished.
pub(crate) fn mark(status: Option<ItemStatus>) -> &'static str {
    match status {
        Some(ItemStatus::Completed) => "✔",
        Some(ItemStatus::Failed | ItemStatus::TimedOut) => "✘",
        Some(ItemStatus::Blocked) => "⏸",
        Some(ItemStatus::Skipped | ItemStatus::Cancelled) => "–",
        None => "…",
    }
}

/// Where a stage of a row is, for a chain line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Finished with this status.
    Finished(ItemStatus),
    /// Running now (`▶`).
    Running,
    /// Not started, not finished (`…`).
    Pending,
}

/// A row's chain as one line: `r2: audit ✔ → fix ✘ → verify –` (`▶` running, `…` not
/// started).
pub(crate) fn chain_line(row: &str, stages: &[(String, Place)]) -> String {
    let chain: Vec<String> = stages
        .iter()
        .map(|(name, place)| {
            let m = match place {
                Place::Finished(s) => mark(Some(*s)),
                Place::Running => "▶",
                Place::Pending => mark(None),
            };
            format!("{name} {m}")
        })
        .collect();
    format!("{row}: {}", chain.join(" → "))
}

/// The chain lines of the rows `ids` (items' ids with where each is) touch, in first-seen
/// order, each stage in `stages`' order; ids that are no stage item are left out.
pub(crate) fn chains<'a>(
    stages: &[String],
    ids: impl IntoIterator<Item = (&'a str, Place)>,
) -> Vec<(String, Vec<(String, Place)>)> {
    let mut rows: Vec<(String, Vec<(String, Place)>)> = Vec::new();
    for (id, place) in ids {
        let Some((row, stage)) = split_id(id, stages) else {
            continue;
        };
        let at = match rows.iter().position(|(r, _)| r == row) {
            Some(i) => i,
            None => {
                rows.push((
                    row.to_owned(),
                    stages.iter().map(|s| (s.clone(), Place::Pending)).collect(),
                ));
                rows.len() - 1
            }
        };
        if let Some(slot) = rows[at].1.iter_mut().find(|(s, _)| s == stage) {
            slot.1 = place;
        }
    }
    rows
}

/// The row and stage of a stage item's id (`r2/fix` → `("r2", "fix")`), when `stages` has
/// that stage.
pub(crate) fn split_id<'a>(id: &'a str, stages: &[String]) -> Option<(&'a str, &'a str)> {
    let (row, stage) = id.rsplit_once('/')?;
    stages.iter().any(|s| s == stage).then_some((row, stage))
}

/// Build a [`Chain`] from BATCH.md's stages: read each `instruction_file` (relative to
/// `base`), put the batch's preamble before each instruction, load each stage's schema.
///
/// Errors: exit 2 naming the file: an instruction that cannot be read or parsed, a schema
/// that does not load.
pub(crate) fn chain(
    specs: &[crate::source::batch_spec::StageSpec],
    batch: &Path,
    base: &Path,
    preamble: &str,
    batch_schema: Option<&Value>,
    read: impl Fn(&Path) -> Result<String>,
) -> Result<Chain> {
    let mut stages = Vec::new();
    for s in specs {
        let (text, path, line) = match (&s.instruction, &s.instruction_file) {
            (Some(t), _) => (t.clone(), batch.to_owned(), s.line.unwrap_or(1)),
            (None, Some(f)) => {
                let p = crate::fsutil::resolve(base, f);
                let text = read(&p).map_err(|e| {
                    e.within(&format!(
                        "{}{}: stage `{}`: `instruction_file` (relative to BATCH.md's folder)",
                        batch.display(),
                        s.line.map(|l| format!(":{l}")).unwrap_or_default(),
                        s.name
                    ))
                })?;
                (text, p, 1)
            }
            (None, None) => {
                return Err(Error::input_at(
                    batch,
                    s.line,
                    format!("stage `{}` has no instruction", s.name),
                ));
            }
        };
        let own = Instruction::parse(&path, line, &text)?;
        let instruction = match preamble.trim().is_empty() {
            true => own.clone(),
            false => {
                Instruction::parse(&path, line, &format!("{}\n\n{text}", preamble.trim_end()))?
            }
        };
        let schema = match &s.output_schema {
            None => batch_schema.cloned(),
            Some(crate::source::batch_spec::SchemaSource::Inline(v)) => Some(v.clone()),
            Some(crate::source::batch_spec::SchemaSource::Path(p)) => {
                let p = crate::fsutil::resolve(base, p);
                crate::settings::load_schema(None, Some(&p))
                    .map_err(|e| {
                        e.within(&format!(
                            "{}{}: stage `{}`: `output_schema` (relative to BATCH.md's folder)",
                            batch.display(),
                            s.line.map(|l| format!(":{l}")).unwrap_or_default(),
                            s.name
                        ))
                    })?
                    .map(|(v, _)| v)
            }
        };
        stages.push(Stage {
            name: s.name.clone(),
            instruction,
            own,
            path,
            after: s.after.clone(),
            overrides: s.overrides.clone(),
            schema,
        });
    }
    Ok(Chain { stages })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, text: &str, after: &[usize], schema: Option<Value>) -> Stage {
        Stage {
            name: name.into(),
            instruction: Instruction::parse(Path::new("BATCH.md"), 1, text).expect("parse"),
            own: Instruction::parse(Path::new("BATCH.md"), 1, text).expect("parse"),
            path: PathBuf::from("BATCH.md"),
            after: after.to_vec(),
            overrides: Overrides::default(),
            schema,
        }
    }

    fn three() -> Chain {
        Chain {
            stages: vec![
                stage(
                    "audit",
                    "Audit {path}.",
                    &[],
                    Some(
                        serde_json::json!({"type":"object","properties":{"problems":{"type":"array"}}}),
                    ),
                ),
                stage(
                    "fix",
                    "Fix {path}: {audit.output.problems} ({audit.summary})",
                    &[0],
                    None,
                ),
                stage("verify", "Check {path} after {fix.status}", &[1], None),
            ],
        }
    }

    #[test]
    fn placeholders_may_name_columns_and_earlier_stages_only() {
        let cols = vec!["path".to_string()];
        three().check(&cols).expect("valid");
        let mut c = three();
        c.stages[0] = stage("audit", "Audit {path} after {fix.summary}", &[], None);
        let e = c.check(&cols).expect_err("a later stage").to_string();
        assert!(
            e.contains("{fix.summary}") && e.contains("add `after: fix`"),
            "{e}"
        );
        let mut c = three();
        c.stages[1] = stage("fix", "Fix {audit.output.nope}", &[0], None);
        let e = c.check(&cols).expect_err("not in the schema").to_string();
        assert!(
            e.contains("{audit.output.nope}") && e.contains("audit.output.problems"),
            "{e}"
        );
        let mut c = three();
        c.stages[2] = stage("verify", "{fix.output.anything} {audit.status}", &[1], None);
        c.check(&cols)
            .expect("no schema: any field; and transitive stages");
    }

    #[test]
    fn a_row_becomes_a_chain_of_items_that_wait_for_each_other() {
        let c = three();
        let headers = vec!["path".to_string()];
        let items = c.items(
            &headers,
            2,
            3,
            "r2",
            &["a.rs".into()],
            &["r1".into()],
            |i| Some(i as u32),
        );
        let ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["r2/audit", "r2/fix", "r2/verify"]);
        assert_eq!(
            items[0].after,
            ["r1/verify"],
            "a row's prerequisite is its whole chain"
        );
        assert_eq!(items[1].after, ["r2/audit"]);
        assert_eq!(items[2].teammate, "2-r2.verify");
        assert_eq!(items[1].profile, Some(1));
        assert_ne!(items[0].content, items[1].content);
        assert_eq!(items[1].body, "Fix a.rs:  ()");
    }

    #[test]
    fn fill_puts_earlier_values_in_and_moves_file_parts_with_the_text() {
        let c = three();
        let headers = vec!["path".to_string()];
        let mut items = c.items(&headers, 1, 2, "r", &["a.rs".into()], &[], |_| None);
        let fix = &mut items[1];
        fix.inline.push(crate::inline::InlinePart {
            at: fix.body.len(),
            kind: crate::inline::InlineKind::File,
            column: "path".into(),
            value: "a.rs".into(),
        });
        let mut audit = crate::run::record::outcome::Outcome::not_run(
            "r/audit",
            "1-r.audit",
            "audit",
            ItemStatus::Completed,
            String::new(),
        );
        audit.summary = "two problems".into();
        audit.output = serde_json::json!({"problems": ["tabs", "é"]});
        crate::schedule::stage_values::fill_from(fix, |id| {
            assert_eq!(id, "r/audit");
            Ok(Some(audit.clone()))
        })
        .expect("fill");
        assert_eq!(fix.body, "Fix a.rs: [\"tabs\",\"é\"] (two problems)");
        assert_eq!(
            fix.inline[0].at,
            fix.body.len(),
            "the file part moved with the text"
        );
    }

    #[test]
    fn chains_read_as_one_line() {
        let stages = ["audit".to_string(), "fix".into(), "verify".into()];
        let rows = chains(
            &stages,
            [
                ("r2/fix", Place::Finished(ItemStatus::Failed)),
                ("r2/audit", Place::Finished(ItemStatus::Completed)),
                ("r3/audit", Place::Running),
                ("r2/verify", Place::Finished(ItemStatus::Skipped)),
                ("other", Place::Running),
            ],
        );
        let lines: Vec<String> = rows.iter().map(|(r, s)| chain_line(r, s)).collect();
        assert_eq!(
            lines,
            [
                "r2: audit ✔ → fix ✘ → verify –",
                "r3: audit ▶ → fix … → verify …"
            ]
        );
        assert_eq!(split_id("a/b/fix", &["fix".into()]), Some(("a/b", "fix")));
        assert_eq!(split_id("a/b", &["fix".into()]), None);
    }
}
