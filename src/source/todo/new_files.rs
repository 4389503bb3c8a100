//! The text of new files: a batch file `todo-N.md` for extracted blocks, and a new inbox
//! `todo.md` from its template; the team name a batch file runs as.

use super::edit::single_line;
use super::frontmatter::{QuoteStyle, double_quoted, yaml_scalar};
use super::{IDEAS_HEADING, TODO_HEADING};
use std::path::Path;

/// Builds a new batch file `todo-N.md` (seed format "todo-N.md 批次文件格式"):
///
/// ```text
/// ---
/// source: todo.md
/// created: "2026-04-27"
/// status: pending
/// ---
///
/// ## 📋 Todo
/// <todo blocks>
///
/// ## 💡 Ideas
/// <idea blocks>
/// ```
///
/// `source` is written unquoted when YAML allows it, `created` always double-quoted. Blocks
/// (as returned by [`TodoDocument::remove_items`]) are copied exactly; one that does not end
/// with a newline gets one, and empty blocks are skipped. `newline` is `"\r\n"` for CRLF
/// files; anything else means `"\n"`. Parsing the result gives the blocks' items in order.
///
/// [`TodoDocument::remove_items`]: super::TodoDocument::remove_items
#[must_use]
pub(crate) fn batch_document(
    source: &str,
    created: &str,
    todo_blocks: &[String],
    idea_blocks: &[String],
    newline: &str,
) -> String {
    let nl = if newline == "\r\n" { "\r\n" } else { "\n" };
    let header = [
        "---".to_string(),
        format!("source: {}", yaml_scalar(source, QuoteStyle::Plain)),
        format!("created: {}", double_quoted(created)),
        "status: pending".to_string(),
        "---".to_string(),
        String::new(),
        TODO_HEADING.to_string(),
    ];
    let mut out = String::new();
    for line in header {
        out.push_str(&line);
        out.push_str(nl);
    }
    push_blocks(&mut out, todo_blocks, nl);
    out.push_str(nl);
    out.push_str(IDEAS_HEADING);
    out.push_str(nl);
    push_blocks(&mut out, idea_blocks, nl);
    out
}

fn push_blocks(out: &mut String, blocks: &[String], nl: &str) {
    for block in blocks.iter().filter(|block| !block.is_empty()) {
        out.push_str(block);
        if !block.ends_with('\n') {
            out.push_str(nl);
        }
    }
}

/// The inbox template compiled into the binary (`templates/todo.md`); `{{ date }}` stands for
/// the last-updated date.
pub(crate) const INBOX_TEMPLATE: &str = include_str!("../../../templates/todo.md");

/// A new inbox `todo.md` from `template` (normally [`INBOX_TEMPLATE`], or a store's own
/// `templates/todo.md`) with `{{ date }}` replaced by `date`. Line breaks in `date` become
/// spaces.
#[must_use]
pub(crate) fn inbox_from(template: &str, date: &str) -> String {
    template.replace("{{ date }}", &single_line(date))
}

/// The default inbox `todo.md`, with `\n` line endings:
///
/// ```text
/// # TODO
///
/// Last updated: DATE
///
/// ## 📋 Todo
///
/// ## 💡 Ideas
/// ```
#[must_use]
/// The team name of a batch file: `todo-3.md` → `todo-resolve-3`.
pub(crate) fn team_name(batch: &Path) -> String {
    let stem = batch
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(
        "todo-resolve-{}",
        stem.strip_prefix("todo-").unwrap_or(&stem)
    )
}

#[cfg(test)]
pub(crate) fn inbox_template(date: &str) -> String {
    inbox_from(INBOX_TEMPLATE, date)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{item, parse, titles};
    use super::super::{Mark, Section};
    use super::*;

    #[test]
    fn batch_document_has_the_seed_format() {
        let todo =
            vec!["- [ ] 任务描述 @context:cp-20260427-143000.md\n  续行补充上下文\n".to_string()];
        let ideas = vec!["- [ ] 想法描述".to_string()];
        let text = batch_document("todo.md", "2026-04-27", &todo, &ideas, "\n");
        assert_eq!(
            text,
            "---\nsource: todo.md\ncreated: \"2026-04-27\"\nstatus: pending\n---\n\n## 📋 Todo\n- [ ] 任务描述 @context:cp-20260427-143000.md\n  续行补充上下文\n\n## 💡 Ideas\n- [ ] 想法描述\n"
        );
        let doc = parse(&text);
        assert!(doc.problems().is_empty());
        assert_eq!(
            doc.frontmatter_value("created").as_deref(),
            Some("2026-04-27")
        );
        assert_eq!(doc.frontmatter_value("status").as_deref(), Some("pending"));
        assert_eq!(titles(&doc), ["任务描述", "想法描述"]);
        assert_eq!(item(&doc, 1).section, Section::Todo);
        assert_eq!(item(&doc, 1).continuation, "续行补充上下文");
        assert_eq!(item(&doc, 2).section, Section::Ideas);
        let empty = batch_document("todo.md", "2026-04-27", &[], &[], "\r\n");
        assert_eq!(
            empty,
            "---\r\nsource: todo.md\r\ncreated: \"2026-04-27\"\r\nstatus: pending\r\n---\r\n\r\n## 📋 Todo\r\n\r\n## 💡 Ideas\r\n"
        );
        assert!(parse(&empty).items().is_empty());
    }

    #[test]
    fn extracted_blocks_read_back_as_the_same_items() {
        let inbox = "\u{feff}# TODO\r\n\r\nLast updated: 2026-04-27\r\n\r\n## 📋 Todo\r\n- [ ] a @after:3\r\n  a text\r\n  - [ ] nested\r\n- [ ] b @context:cp-b.md\r\n```\r\n- [ ] fenced\r\n```\r\n- [~] c\r\n\r\n## 💡 Ideas\r\n- [ ] i1\r\n- [ ] i2\r\n";
        let doc = parse(inbox);
        let selected = [1, 4, 5];
        let Ok((rest, blocks)) = doc.remove_items(&selected) else {
            panic!("remove failed")
        };
        assert_eq!(
            rest,
            "\u{feff}# TODO\r\n\r\nLast updated: 2026-04-27\r\n\r\n## 📋 Todo\r\n- [ ] b @context:cp-b.md\r\n```\r\n- [ ] fenced\r\n```\r\n\r\n## 💡 Ideas\r\n- [ ] i2\r\n"
        );
        let (todo, ideas): (Vec<String>, Vec<String>) = (
            blocks.get(..2).unwrap_or(&[]).to_vec(),
            blocks.get(2..).unwrap_or(&[]).to_vec(),
        );
        let batch = batch_document("todo.md", "2026-04-27", &todo, &ideas, doc.newline());
        let parsed = parse(&batch);
        let expected: Vec<(String, Mark, Option<String>, String)> = [1, 2, 4, 5]
            .iter()
            .map(|&n| {
                let it = item(&doc, n);
                (
                    it.title.clone(),
                    it.mark,
                    it.context.clone(),
                    it.continuation.clone(),
                )
            })
            .collect();
        let got: Vec<(String, Mark, Option<String>, String)> = parsed
            .items()
            .iter()
            .map(|it| {
                (
                    it.title.clone(),
                    it.mark,
                    it.context.clone(),
                    it.continuation.clone(),
                )
            })
            .collect();
        assert_eq!(got, expected);
        let sections: Vec<Section> = parsed.items().iter().map(|it| it.section).collect();
        assert_eq!(
            sections,
            [Section::Todo, Section::Todo, Section::Todo, Section::Ideas]
        );
        assert!(batch.contains("\r\n## 💡 Ideas\r\n"));
        assert!(
            !batch.replace("\r\n", "").contains('\n'),
            "CRLF throughout: {batch:?}"
        );
    }

    #[test]
    fn inbox_template_is_the_default_inbox() {
        let text = inbox_template("2026-04-27");
        assert_eq!(
            text,
            "# TODO\n\nLast updated: 2026-04-27\n\n## 📋 Todo\n\n## 💡 Ideas\n"
        );
        let mut doc = parse(&text);
        assert!(doc.items().is_empty());
        assert!(doc.set_last_updated("2026-05-01"));
        assert_eq!(doc.render(), inbox_template("2026-05-01"));
    }
}
