//! What a teammate is told: an item's task text with the files its instruction inlines
//! ([`item_text`]), the prompt rendered from the team's template ([`render_prompt`]), and
//! what a retry is told about the attempt before it ([`retry_context`]).

use std::path::Path;

use crate::inline::Expanded;
use crate::item::WorkItem;
use crate::prompt::{ItemContext, PromptContext, RetryContext, Var};
use crate::run::RunSpec;
use crate::run::backend::read_capped;
use crate::run::record::folder::TeammateFolder;

use super::attempt::AttemptResult;

/// Most bytes of an unstructured `working-context.md` carried into a retry prompt (a
/// structured one carries Part A and the last journal entry, each capped on its own), and
/// of a checkpoint inlined for an agent that cannot read files.
const WORKING_CONTEXT_MAX: u64 = 64 * 1024;

/// Longest value listed under "Values of this item", characters (the instruction carries the
/// values it uses in full; the listing must not double a huge field's size).
const VAR_SHOWN_MAX: usize = 300;

/// `v` as the prompt lists it: whole, or its first [`VAR_SHOWN_MAX`] characters with a note
/// saying where the rest is (an agent that only answers cannot read the input file).
fn shown_value(v: &str, line: u64, answer_only: bool) -> String {
    if v.chars().count() <= VAR_SHOWN_MAX {
        return v.to_owned();
    }
    let head: String = v.chars().take(VAR_SHOWN_MAX).collect();
    let total = v.chars().count();
    match answer_only {
        true => format!(
            "{head}… (cut: {total} characters in all; the instruction carries what it uses)"
        ),
        false => format!(
            "{head}… (cut: {total} characters in all; the full value is in the input row starting on line {line})"
        ),
    }
}

/// The task text of `item` with the files its instruction inlines read into it
/// ([`crate::inline::expand`]), and its images (for an agent that only answers).
///
/// Errors: why the item's files cannot be used — the item fails with kind `input`.
pub(crate) fn item_text(spec: &RunSpec, item: &WorkItem) -> Result<Expanded, String> {
    match &spec.files {
        Some(root) if !item.inline.is_empty() => crate::inline::expand(
            &item.body,
            &item.inline,
            root,
            spec.settings_for(item).runner.answers_only(),
        ),
        _ => Ok(Expanded {
            body: item.body.clone(),
            images: Vec::new(),
        }),
    }
}

/// Render the teammate prompt for `item` whose task text is `body` ([`item_text`]) (pure);
/// `retry` is set on attempts after the first.
pub(crate) fn render_prompt(
    spec: &RunSpec,
    item: &WorkItem,
    body: &str,
    retry: Option<RetryContext>,
) -> crate::error::Result<String> {
    let folder = spec.teammate(&item.teammate);
    let answer_only = spec.settings_for(item).runner.answers_only();
    // Checked at start-up (`Plan::check`): every path here can be named.
    let named = |p: &Path| {
        crate::schedule::plan::name_in_prompt(spec, &item.teammate, p)
            .unwrap_or_else(|| p.display().to_string())
    };
    let ctx = PromptContext {
        team: spec.team.clone(),
        teammate: item.teammate.clone(),
        item: ItemContext {
            id: item.id.clone(),
            // A title that only repeats the body's first line is left out of the heading.
            title: if body
                .trim_start()
                .starts_with(item.title.trim_end_matches('…'))
            {
                String::new()
            } else {
                item.title.clone()
            },
            body: body.to_owned(),
            checkpoint: item.checkpoint.as_ref().map(|p| named(p)),
            // An agent without tools cannot read the checkpoint: it gets the text.
            checkpoint_text: item
                .checkpoint
                .as_ref()
                .filter(|_| answer_only)
                .and_then(|p| read_capped(p, WORKING_CONTEXT_MAX)),
            vars: item
                .vars
                .iter()
                .map(|(n, v)| Var {
                    name: n.clone(),
                    value: shown_value(v, item.line, answer_only),
                })
                .collect(),
        },
        report_path: named(&folder.report()),
        working_context: named(&folder.working_context()),
        progress_path: named(&folder.progress()),
        output_schema: spec
            .schema
            .as_ref()
            .map(|s| serde_json::to_string_pretty(&s.0).unwrap_or_default()),
        retry,
        answer_only,
    };
    spec.template.render(&ctx)
}

/// What attempt `next` of `item` is told about the one before (`result`): its verdict, its
/// report and the working context the teammate left in `dir`.
pub(super) fn retry_context(
    folder: &TeammateFolder,
    item: &WorkItem,
    next: u32,
    result: &AttemptResult,
) -> RetryContext {
    RetryContext {
        attempt: next,
        status: result.verdict.status.to_string(),
        reason: result.verdict.reason.clone(),
        report: result
            .report
            .as_ref()
            .map(|r| serde_json::to_string_pretty(&r.raw).unwrap_or_default()),
        working_context: crate::working_context::carry(
            &folder.working_context(),
            &item.teammate,
            WORKING_CONTEXT_MAX,
            read_capped,
        ),
    }
}
