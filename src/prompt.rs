//! Prompt rendering: the `{column}` instruction of a CSV batch and the teammate template.
//!
//! Both are pure: text and values in, text out. The instruction syntax follows the seed
//! `taskmaster-protocol.md` (`spawn_agents_on_csv`): `{column}` inserts that column's value,
//! `{{` and `}}` are literal braces, and inserted values are never expanded again. Ours on
//! top: `{file:column}` and `{image:column}` mark where the file the column names goes (read
//! when the item starts, [`crate::inline`]). The teammate template
//! (`templates/teammate.md`) is a minijinja template.

use std::collections::HashSet;
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::inline::{InlineKind, InlinePart};

/// The teammate template compiled into the binary (`templates/teammate.md`).
pub(crate) const DEFAULT_TEAMMATE_TEMPLATE: &str = include_str!("../templates/teammate.md");

/// Where the default template's item begins: what comes before is the same for every item
/// of a batch (the contract, the instruction, the schema), what follows is the item's own.
const ITEM_HEADING: &str = "\n## Your item";

/// A rendered prompt split where its item begins ([`ITEM_HEADING`]): `(shared, own)`, the
/// part every item of the batch shares and the item's own part; `None` when the prompt has
/// no such heading after some text (a template of the user's own). The Anthropic backend
/// caches the shared part; a completed item's record keeps it once for the team.
pub(crate) fn split_at_item(prompt: &str) -> Option<(&str, &str)> {
    match prompt.find(ITEM_HEADING) {
        Some(at) if at > 0 => Some(prompt.split_at(at)),
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Text(String),
    /// A column placeholder and the 1-based line it is on.
    Column(String, u64),
    /// `{file:column}` / `{image:column}`: the file the column names, and the line.
    Inline(InlineKind, String, u64),
}

/// A parsed `{column}` instruction template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Instruction {
    segments: Vec<Segment>,
}

impl Instruction {
    /// Parse `text`. `path` and `first_line` (the 1-based line `text` starts on in that
    /// file) are for messages.
    ///
    /// Errors: a `{` that is never closed, an empty `{}`, or a name containing a newline;
    /// the message says to write `{{` for a literal brace.
    pub(crate) fn parse(path: &Path, first_line: u64, text: &str) -> Result<Instruction> {
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        let line_of = |consumed: &str| first_line + consumed.matches('\n').count() as u64;
        while let Some(pos) = rest.find(['{', '}']) {
            literal.push_str(&rest[..pos]);
            let brace = &rest[pos..];
            if let Some(after) = brace.strip_prefix("{{") {
                literal.push('{');
                rest = after;
            } else if let Some(after) = brace.strip_prefix("}}") {
                literal.push('}');
                rest = after;
            } else if let Some(after) = brace.strip_prefix('}') {
                literal.push('}');
                rest = after;
            } else {
                let consumed = &text[..text.len() - brace.len()];
                let Some(close) = brace.find('}') else {
                    return Err(Error::input_at(
                        path,
                        Some(line_of(consumed)),
                        "a `{` is never closed; write `{{` for a literal brace",
                    ));
                };
                let name = &brace[1..close];
                if name.is_empty() || name.contains('\n') || name.contains('{') {
                    return Err(Error::input_at(
                        path,
                        Some(line_of(consumed)),
                        format!(
                            "`{}` is not a column placeholder; write `{{{{` and `}}}}` for literal braces",
                            &brace[..(close + 1).min(40)]
                        ),
                    ));
                }
                if !literal.is_empty() {
                    segments.push(Segment::Text(std::mem::take(&mut literal)));
                }
                let line = line_of(consumed);
                segments.push(match InlineKind::of_placeholder(name) {
                    Some((kind, "")) => {
                        return Err(Error::input_at(
                            path,
                            Some(line),
                            format!(
                                "`{{{name}}}` names no column; write `{{{}:COLUMN}}`, COLUMN \
                                 holding the file's path",
                                kind.word()
                            ),
                        ));
                    }
                    Some((kind, column)) => Segment::Inline(kind, column.to_owned(), line),
                    None => Segment::Column(name.to_owned(), line),
                });
                rest = &brace[close + 1..];
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            segments.push(Segment::Text(literal));
        }
        Ok(Instruction { segments })
    }

    /// How many bytes this instruction renders to for a row whose value in column `name`
    /// is `len(name)` bytes long (for [`crate::source::input::MAX_PROMPT_BYTES`], checked as
    /// the input is scanned, before any value is kept). A file placeholder counts the path
    /// (the file's size is checked when the item starts).
    pub(crate) fn rendered_len(&self, len: impl Fn(&str) -> usize) -> usize {
        self.segments.iter().fold(0usize, |n, s| {
            n.saturating_add(match s {
                Segment::Text(t) => t.len(),
                Segment::Column(c, _) | Segment::Inline(_, c, _) => len(c),
            })
        })
    }

    /// The distinct column names the template uses (those of `{file:…}` and `{image:…}`
    /// too), in first-use order.
    pub(crate) fn placeholders(&self) -> Vec<&str> {
        let mut seen = HashSet::new();
        self.segments
            .iter()
            .filter_map(|s| match s {
                Segment::Column(c, _) | Segment::Inline(_, c, _) if seen.insert(c.as_str()) => {
                    Some(c.as_str())
                }
                _ => None,
            })
            .collect()
    }

    /// Whether the template inlines a file or an image anywhere.
    pub(crate) fn inlines(&self) -> bool {
        self.segments
            .iter()
            .any(|s| matches!(s, Segment::Inline(..)))
    }

    /// Check every placeholder names one of `columns`; `what` names the template in the
    /// message (`the instruction`, `the --verify command`).
    ///
    /// Errors: lists every unknown placeholder and the available columns.
    pub(crate) fn check_columns(&self, path: &Path, what: &str, columns: &[String]) -> Result<()> {
        let unknown: Vec<&str> = self
            .placeholders()
            .into_iter()
            .filter(|p| !columns.iter().any(|c| c == p))
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let line = self.segments.iter().find_map(|s| match s {
            Segment::Column(c, line) | Segment::Inline(_, c, line)
                if unknown.contains(&c.as_str()) =>
            {
                Some(*line)
            }
            _ => None,
        });
        Err(Error::input_at(
            path,
            line,
            format!(
                "unknown placeholder{} {} in {what}; the available names are: {}. \
                 Write `{{{{` and `}}}}` for literal braces",
                if unknown.len() > 1 { "s" } else { "" },
                unknown
                    .iter()
                    .map(|u| format!("{{{u}}}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                match columns.len() {
                    n if n > 40 => format!("{}, … and {} more", columns[..40].join(", "), n - 40),
                    _ => columns.join(", "),
                }
            ),
        ))
    }

    /// Render with a row's values (`headers[i]` ↔ `values[i]`). A value is inserted verbatim
    /// and never expanded again. A placeholder with no value renders empty (callers check
    /// columns first with [`Instruction::check_columns`]). A file placeholder renders
    /// nothing: it is returned as an [`InlinePart`] at its byte offset in the text, for
    /// [`crate::inline::expand`] when the item starts.
    pub(crate) fn render(
        &self,
        headers: &[String],
        values: &[String],
    ) -> (String, Vec<InlinePart>) {
        let (out, parts, _) = self.render_with(headers, values, &|_| false);
        (out, parts)
    }

    /// [`Instruction::render`], with the placeholders `later` says are filled in later (a
    /// stage's `{audit.summary}`, [`crate::source::stages`]) left out of the text and
    /// returned as `(byte offset, name)`, in order.
    #[allow(clippy::type_complexity)]
    pub(crate) fn render_with(
        &self,
        headers: &[String],
        values: &[String],
        later: &dyn Fn(&str) -> bool,
    ) -> (String, Vec<InlinePart>, Vec<(usize, String)>) {
        let mut slots = Vec::new();
        let mut out = String::new();
        let mut parts = Vec::new();
        let value = |c: &str| {
            headers
                .iter()
                .position(|h| h == c)
                .and_then(|i| values.get(i))
                .map_or("", String::as_str)
        };
        for s in &self.segments {
            match s {
                Segment::Text(t) => out.push_str(t),
                Segment::Column(c, _) if later(c) => slots.push((out.len(), c.clone())),
                Segment::Column(c, _) => out.push_str(value(c)),
                Segment::Inline(kind, c, _) => parts.push(InlinePart {
                    at: out.len(),
                    kind: *kind,
                    column: c.clone(),
                    value: value(c).to_owned(),
                }),
            }
        }
        (out, parts, slots)
    }
}

/// One `name: value` pair shown to the teammate.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Var {
    /// Column name.
    pub name: String,
    /// Its value.
    pub value: String,
}

/// The item as the teammate template sees it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ItemContext {
    /// Item id.
    pub id: String,
    /// One-line title.
    pub title: String,
    /// The task text (rendered instruction, or todo item text with continuation lines).
    pub body: String,
    /// Absolute checkpoint path, if any.
    pub checkpoint: Option<String>,
    /// The checkpoint's text, for an agent that cannot read files (`answer_only`); `None`
    /// otherwise.
    pub checkpoint_text: Option<String>,
    /// The item's values (CSV row), shown as a list.
    pub vars: Vec<Var>,
}

/// What a retry tells the next attempt (DESIGN §4).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RetryContext {
    /// The attempt about to run (2, 3, ...).
    pub attempt: u32,
    /// How the previous attempt ended (`failed`, `timed_out`, ...).
    pub status: String,
    /// Its one-line reason.
    pub reason: String,
    /// Its report, pretty JSON, if it wrote one.
    pub report: Option<String>,
    /// The teammate's `working-context.md`, if it kept one.
    pub working_context: Option<String>,
}

/// Everything the teammate template is rendered with.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PromptContext {
    /// Team name.
    pub team: String,
    /// Teammate name.
    pub teammate: String,
    /// The item.
    pub item: ItemContext,
    /// Absolute path where the report is written (`RUNNER_REPORT`).
    pub report_path: String,
    /// Absolute path of the teammate's `working-context.md`.
    pub working_context: String,
    /// Absolute path of the teammate's progress file (`RUNNER_PROGRESS`,
    /// [`crate::progress`]).
    pub progress_path: String,
    /// The output schema, pretty JSON, when one is set.
    pub output_schema: Option<String>,
    /// Set on attempts after the first.
    pub retry: Option<RetryContext>,
    /// The agent has no tools (the HTTP backend): its answer is its report, it keeps no
    /// working context and reads no files.
    pub answer_only: bool,
}

/// The compiled teammate template.
pub(crate) struct TeammateTemplate {
    env: minijinja::Environment<'static>,
    path: std::path::PathBuf,
}

impl TeammateTemplate {
    /// Compile `source` (from `path`, for messages) and render it once with sample values so
    /// that a typo fails at start-up, not on the first item.
    ///
    /// Errors: template syntax errors and references to unknown variables, with the line.
    pub(crate) fn new(path: &Path, source: &str) -> Result<TeammateTemplate> {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.set_keep_trailing_newline(true);
        env.add_template_owned("teammate", source.to_owned())
            .map_err(|e| template_error(path, &e))?;
        let t = TeammateTemplate {
            env,
            path: path.to_owned(),
        };
        let sample = PromptContext {
            team: "team".into(),
            teammate: "teammate".into(),
            item: ItemContext {
                id: "1".into(),
                title: "t".into(),
                body: "b".into(),
                checkpoint: Some("/cp.md".into()),
                checkpoint_text: Some("c".into()),
                vars: vec![Var {
                    name: "a".into(),
                    value: "b".into(),
                }],
            },
            report_path: "/r.json".into(),
            working_context: "/w.md".into(),
            progress_path: "/p.jsonl".into(),
            output_schema: Some("{}".into()),
            retry: Some(RetryContext {
                attempt: 2,
                status: "failed".into(),
                reason: "r".into(),
                report: Some("{}".into()),
                working_context: Some("w".into()),
            }),
            answer_only: false,
        };
        t.render(&sample)?;
        t.render(&PromptContext {
            answer_only: true,
            ..sample
        })?;
        Ok(t)
    }

    /// Render the prompt for one attempt.
    ///
    /// Errors: the template error, naming the template file and line (only possible for
    /// values the start-up check did not cover).
    pub(crate) fn render(&self, ctx: &PromptContext) -> Result<String> {
        self.env
            .get_template("teammate")
            .and_then(|t| t.render(ctx))
            .map_err(|e| Error::input_at(&self.path, None, describe(&e)))
    }
}

/// A render error as `line N: what` (minijinja names the line where rendering failed).
fn describe(e: &minijinja::Error) -> String {
    match e.line() {
        Some(line) => format!("line {line}: {e}"),
        None => e.to_string(),
    }
}

fn template_error(path: &Path, e: &minijinja::Error) -> Error {
    Error::input_at(
        path,
        e.line().map(|l| l as u64),
        format!("template error: {e}"),
    )
}

/// Check a `--verify` command (argv; each argument a `{name}` template) before anything
/// runs: every placeholder must name one of an item's `names` (a CSV batch's columns; a todo
/// item's `item`, `title`, `checkpoint`). Unchecked, an unknown name would be rendered empty
/// and the check would test the wrong thing.
///
/// Errors: a malformed or unknown placeholder, naming `--verify` and the available names
/// (exit 2).
pub(crate) fn check_verify(argv: &[String], names: &[String]) -> Result<()> {
    for a in argv {
        let template = Instruction::parse(Path::new("--verify"), 1, a)?;
        if template.inlines() {
            return Err(Error::Usage(format!(
                "--verify argument `{a}`: `{{file:…}}` and `{{image:…}}` only go into the \
                 instruction; give the command the path with `{{COLUMN}}`"
            )));
        }
        template.check_columns(Path::new("--verify"), "the --verify command", names)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<Instruction> {
        Instruction::parse(Path::new("BATCH.md"), 5, t)
    }

    #[test]
    fn columns_and_literal_braces() {
        let i = parse("Audit {path} as {{\"json\": true}} for {owner}.").expect("valid");
        let h = vec!["path".to_string(), "owner".to_string()];
        let (out, files) = i.render(&h, &["a.md".into(), "ann".into()]);
        assert_eq!(out, "Audit a.md as {\"json\": true} for ann.");
        assert!(files.is_empty());
        assert_eq!(i.placeholders(), vec!["path", "owner"]);
    }

    #[test]
    fn inserted_values_are_never_expanded_again() {
        let i = parse("{a}").expect("valid");
        let h = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            i.render(&h, &["{b} {{x}}".into(), "NO".into()]).0,
            "{b} {{x}}"
        );
    }

    #[test]
    fn file_and_image_placeholders_mark_where_the_file_goes() {
        let i = parse("Audit {path}:\n{file:path}\nLooks like {image:shot}.").expect("valid");
        assert_eq!(i.placeholders(), vec!["path", "shot"]);
        assert!(i.inlines());
        let h = vec!["path".to_string(), "shot".to_string()];
        let (text, parts) = i.render(&h, &["a.md".into(), "s.png".into()]);
        assert_eq!(text, "Audit a.md:\n\nLooks like .");
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].at, parts[0].kind, parts[0].value.as_str()),
            (12, InlineKind::File, "a.md")
        );
        assert_eq!(
            (parts[1].at, parts[1].kind, parts[1].value.as_str()),
            (24, InlineKind::Image, "s.png")
        );
        // The column of a file placeholder is checked like any other.
        let e = parse("{file:nope}")
            .expect("valid")
            .check_columns(Path::new("BATCH.md"), "the instruction", &h)
            .expect_err("unknown column");
        assert!(e.to_string().contains("{nope}"), "{e}");
        let e = parse("x {file:}").expect_err("no column").to_string();
        assert!(e.contains("{file:COLUMN}"), "{e}");
        // Not in a --verify command.
        assert!(check_verify(&["cat".into(), "{file:path}".into()], &h).is_err());
    }

    #[test]
    fn unknown_placeholders_are_listed_with_columns() {
        let i = parse("{path} {nope} {nada}").expect("valid");
        let e = i.check_columns(
            Path::new("BATCH.md"),
            "the instruction",
            &["path".into(), "id".into()],
        );
        let msg = e.expect_err("unknown").to_string();
        assert!(
            msg.contains("{nope}, {nada}") && msg.contains("names are: path, id"),
            "{msg}"
        );
    }

    #[test]
    fn unclosed_brace_names_line() {
        let e = parse("line one\nline {two")
            .expect_err("unclosed")
            .to_string();
        assert!(e.starts_with("BATCH.md:6:"), "{e}");
    }

    #[test]
    fn default_template_renders_every_part() {
        let t = TeammateTemplate::new(Path::new("teammate.md"), DEFAULT_TEAMMATE_TEMPLATE)
            .expect("compiles");
        let ctx = PromptContext {
            team: "todo-resolve-1".into(),
            teammate: "todo-task-1".into(),
            item: ItemContext {
                id: "1".into(),
                title: "Fix auth".into(),
                body: "Fix auth\n3 cases left".into(),
                checkpoint: Some("/p/.agent-tasks/cp-1.md".into()),
                checkpoint_text: None,
                vars: vec![],
            },
            report_path: "/w/report.json".into(),
            working_context: "/w/working-context.md".into(),
            progress_path: "/w/progress.jsonl".into(),
            output_schema: None,
            retry: None,
            answer_only: false,
        };
        let out = t.render(&ctx).expect("renders");
        assert!(out.contains("Fix auth\n3 cases left"));
        assert!(out.contains("/p/.agent-tasks/cp-1.md"));
        assert!(out.contains("`/w/report.json`"));
        assert!(out.contains("\"id\": \"1\""));
        assert!(!out.contains("This is attempt"));
    }

    #[test]
    fn broken_template_is_an_input_error() {
        assert!(TeammateTemplate::new(Path::new("t.md"), "{{ nope }}").is_err());
        assert!(TeammateTemplate::new(Path::new("t.md"), "{% if %}").is_err());
    }
}
