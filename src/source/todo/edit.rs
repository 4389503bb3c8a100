//! Edits of a document that change only the bytes they must: an item's mark and runner
//! note, removing item blocks, the "last updated" date, appending an item to a section.

use super::lines::{insert_lines, keep_lines, render_lines};
use super::scan::{Heading, dedent_join, is_blank, leading_indent};
use super::tokens::{NOTE_PREFIX, Prerequisite};
use super::{EditError, IDEAS_HEADING, Mark, Section, TODO_HEADING, TodoDocument};

/// Makes one line of text: line breaks become spaces, ends trimmed.
pub(super) fn single_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ").trim().to_string()
}

impl TodoDocument {
    /// Sets an item's checkbox, changing only the character between its brackets (`[X]` is
    /// left alone when asked for [`Mark::Done`]).
    ///
    /// # Errors
    ///
    /// [`EditError::UnknownItem`] if no item has this number.
    pub(crate) fn set_mark(&mut self, number: u32, mark: Mark) -> Result<(), EditError> {
        let index = self.index_of(number)?;
        if self.items.get(index).is_some_and(|item| item.mark == mark) {
            return Ok(());
        }
        let span = self.span(number)?;
        let (line_index, at) = (span.line, span.mark_byte);
        let text = self.line_text(line_index);
        let (Some(head), Some(tail)) = (text.get(..at), text.get(at + 1..)) else {
            return Err(EditError::UnknownItem(number));
        };
        let new_text = format!("{head}{}{tail}", mark.as_char());
        if let Some(line) = self.lines.get_mut(line_index) {
            line.text = new_text;
        }
        self.reload();
        Ok(())
    }

    /// Puts, replaces or removes an item's runner note: one line
    /// `<item indentation>  > runner: <text>`. With `Some(text)` an existing note line (the
    /// first continuation line starting with `> runner:`) is rewritten in place, keeping its
    /// indentation and line ending; otherwise a note line is inserted after the item's own
    /// continuation lines (before its nested items and any blank lines ending it), so that it
    /// never splits the item's text. Line breaks in `text` become spaces. With `None` the note
    /// line is removed. Other continuation lines are untouched.
    ///
    /// # Errors
    ///
    /// [`EditError::UnknownItem`] if no item has this number.
    pub(crate) fn set_note(&mut self, number: u32, note: Option<&str>) -> Result<(), EditError> {
        let span = self.span(number)?.clone();
        let body = note.map(|text| {
            let text = single_line(text);
            if text.is_empty() {
                NOTE_PREFIX.to_string()
            } else {
                format!("{NOTE_PREFIX} {text}")
            }
        });
        match (body, span.note_line) {
            (Some(body), Some(at)) => {
                if let Some(line) = self.lines.get_mut(at) {
                    let indent = leading_indent(&line.text).bytes;
                    let indent = line.text.get(..indent).unwrap_or("");
                    line.text = format!("{indent}{body}");
                }
            }
            (Some(body), None) => {
                let indent = self
                    .line_text(span.line)
                    .get(..span.indent_bytes)
                    .unwrap_or("");
                let text = format!("{indent}  {body}");
                let ending = self.newline_ending();
                // After the item's own text: up to its first nested item, without the blank
                // lines that end it.
                let mut at = self
                    .spans
                    .iter()
                    .map(|s| s.line)
                    .find(|l| *l > span.line && *l <= span.block_end)
                    .unwrap_or(span.block_end + 1);
                while at > span.line + 1 && self.line_text(at - 1).trim().is_empty() {
                    at -= 1;
                }
                insert_lines(&mut self.lines, at, vec![text], ending);
            }
            (None, Some(at)) => {
                let mut remove = vec![false; self.lines.len()];
                if let Some(flag) = remove.get_mut(at) {
                    *flag = true;
                }
                self.lines = keep_lines(&self.lines, &remove);
            }
            (None, None) => return Ok(()),
        }
        self.reload();
        Ok(())
    }

    /// Removes whole item blocks (item line, continuation, nested items with theirs) and
    /// returns `(the document without them, the removed blocks)`. Blocks are exact text
    /// (BOM excluded), in file order; an item nested in another removed item goes with its
    /// block and is not listed on its own. Numbers may repeat and come in any order. Blank
    /// lines around a block stay. The document itself is not changed: parse the returned
    /// text to go on.
    ///
    /// # Errors
    ///
    /// [`EditError::UnknownItem`] for the first number that names no item.
    pub(crate) fn remove_items(&self, numbers: &[u32]) -> Result<(String, Vec<String>), EditError> {
        let mut selected = vec![false; self.items.len()];
        for &number in numbers {
            let index = self.index_of(number)?;
            if let Some(flag) = selected.get_mut(index) {
                *flag = true;
            }
        }
        let mut remove = vec![false; self.lines.len()];
        let mut blocks = Vec::new();
        let mut covered_until: Option<usize> = None;
        for (span, _) in self
            .spans
            .iter()
            .zip(&selected)
            .filter(|(_, chosen)| **chosen)
        {
            if covered_until.is_some_and(|end| span.line <= end) {
                continue;
            }
            covered_until = Some(span.block_end);
            let range = span.line..=span.block_end;
            blocks.push(render_lines(
                false,
                self.lines.get(range.clone()).unwrap_or(&[]),
            ));
            for flag in remove.get_mut(range).unwrap_or(&mut []) {
                *flag = true;
            }
        }
        let kept = keep_lines(&self.lines, &remove);
        Ok((render_lines(self.bom, &kept), blocks))
    }

    /// Replaces the date on the first "last updated" line outside the frontmatter and code
    /// fences: `最后更新: 2026-04-27` or `Last updated: 2026-04-27` (English case-insensitive,
    /// `:` or `：`, decoration like `**`, `>` or `-` allowed). Only the first word after the
    /// colon is replaced (or the date is added if there is none). Returns whether such a
    /// line was found; without one the document is unchanged.
    pub(crate) fn set_last_updated(&mut self, date: &str) -> bool {
        let date = single_line(date);
        let start = self.frontmatter_close.map_or(0, |close| close + 1);
        let found = (start..self.lines.len())
            .filter(|&index| self.code_lines.get(index) != Some(&true))
            .find_map(|index| {
                let text = self.line_text(index);
                last_updated_value(text).map(|(from, to)| (index, from, to))
            });
        let Some((index, from, to)) = found else {
            return false;
        };
        let text = self.line_text(index);
        let (Some(head), Some(tail)) = (text.get(..from), text.get(to..)) else {
            return false;
        };
        let space = if from == to && !head.ends_with([' ', '\t']) {
            " "
        } else {
            ""
        };
        let new_text = format!("{head}{space}{date}{tail}");
        if let Some(line) = self.lines.get_mut(index) {
            line.text = new_text;
        }
        self.reload();
        true
    }

    /// Appends an item `- [ ] TEXT` to the end of the Todo or Ideas section: after the last
    /// non-blank line before the next heading that ends the section (one of the same or a
    /// higher level, or of another section). Each line of `continuation` follows, indented
    /// by two spaces (leading and trailing blank lines dropped). If the section has no
    /// heading, `## 📋 Todo` / `## 💡 Ideas` is added at the end of the document first.
    /// Line breaks in `text` become spaces. Returns the new item's number.
    ///
    /// # Errors
    ///
    /// [`EditError::OtherSection`] for [`Section::Other`]; [`EditError::NotReadBack`] if the
    /// new lines would not read back as exactly one more item with this continuation (the
    /// section ends in an unclosed code fence, or an indented heading follows). On error the
    /// document is unchanged.
    pub(crate) fn append_item(
        &mut self,
        section: Section,
        text: &str,
        continuation: &str,
    ) -> Result<u32, EditError> {
        let heading = match section {
            Section::Todo => TODO_HEADING,
            Section::Ideas => IDEAS_HEADING,
            Section::Other => return Err(EditError::OtherSection),
        };
        let mut new_texts = Vec::new();
        let insert_at = if let Some(last) = self.section_end(section) {
            last + 1
        } else {
            if self.lines.last().is_some_and(|line| !is_blank(&line.text)) {
                new_texts.push(String::new());
            }
            new_texts.push(heading.to_string());
            self.lines.len()
        };
        let item_line_index = insert_at + new_texts.len();
        let title = single_line(text);
        new_texts.push(if title.is_empty() {
            "- [ ]".to_string()
        } else {
            format!("- [ ] {title}")
        });
        let continuation_lines = continuation_texts(continuation);
        let expected: Vec<&str> = continuation_lines.iter().map(String::as_str).collect();
        let expected = dedent_join(&expected);
        new_texts.extend(continuation_lines);
        let mut lines = self.lines.clone();
        insert_lines(&mut lines, insert_at, new_texts, self.newline_ending());
        let mut candidate = Self::from_lines(self.bom, lines);
        let number = candidate
            .items
            .iter()
            .find(|item| item.line == item_line_index + 1 && item.continuation == expected)
            .filter(|_| candidate.items.len() == self.items.len() + 1)
            .map(|item| item.number)
            .ok_or(EditError::NotReadBack)?;
        // Inserted before later items (a Todo item above the Ideas): they move up one number,
        // and so must every `@after:` naming them, the new item's own included (written with
        // the numbers `runner list` showed).
        if candidate.items.iter().any(|i| i.number > number) {
            candidate.renumber_after(|p| match p {
                Prerequisite::Item(n) if n >= number => Some(Prerequisite::Item(n + 1)),
                other => Some(other),
            });
        }
        *self = candidate;
        Ok(number)
    }

    /// The last non-blank line of a section (or its heading line), or `None` if no heading
    /// names the section. Prefers the first `##`-or-deeper heading naming it.
    fn section_end(&self, section: Section) -> Option<usize> {
        let naming = |heading: &&Heading| heading.own == section;
        let pick = self
            .headings
            .iter()
            .position(|heading| naming(&heading) && heading.level >= 2)
            .or_else(|| self.headings.iter().position(|heading| naming(&heading)))?;
        let start = self.headings.get(pick)?;
        let end = self
            .headings
            .iter()
            .skip(pick + 1)
            .find(|next| next.level <= start.level || next.effective != section)
            .map_or(self.lines.len(), |next| next.line);
        let last = (start.line + 1..end)
            .rev()
            .find(|&index| !is_blank(self.line_text(index)));
        Some(last.unwrap_or(start.line))
    }
}

/// The continuation lines of an appended item, indented by two spaces.
fn continuation_texts(continuation: &str) -> Vec<String> {
    let lines: Vec<&str> = continuation
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect();
    let first = lines.iter().position(|line| !is_blank(line));
    let last = lines.iter().rposition(|line| !is_blank(line));
    let (Some(first), Some(last)) = (first, last) else {
        return Vec::new();
    };
    lines
        .get(first..=last)
        .unwrap_or(&[])
        .iter()
        .map(|line| {
            if is_blank(line) {
                String::new()
            } else {
                format!("  {}", line.trim_end())
            }
        })
        .collect()
}

/// Finds the date of a "last updated" line: the byte range of the first word after the
/// colon (empty at the insertion point if there is none).
fn last_updated_value(text: &str) -> Option<(usize, usize)> {
    let body = text.trim_start_matches([' ', '\t', '>', '*', '_', '-', '#']);
    let label_start = text.len() - body.len();
    let mut at = label_start + last_updated_label(body)?;
    let decoration = |c: char| matches!(c, ' ' | '\t' | '*' | '_');
    at += skip_while(text, at, decoration);
    let colon = text.get(at..)?.chars().next()?;
    if colon != ':' && colon != '：' {
        return None;
    }
    at += colon.len_utf8();
    at += skip_while(text, at, decoration);
    let rest = text.get(at..)?;
    let len = rest
        .find(|c: char| c.is_whitespace() || c == '*' || c == '_')
        .unwrap_or(rest.len());
    Some((at, at + len))
}

/// The byte length of a `最后更新` or `last updated` label (also `last-updated`) at the
/// start of `body`.
fn last_updated_label(body: &str) -> Option<usize> {
    const CHINESE: &str = "最后更新";
    if body.starts_with(CHINESE) {
        return Some(CHINESE.len());
    }
    let bytes = body.as_bytes();
    if !bytes.get(..4)?.eq_ignore_ascii_case(b"last") {
        return None;
    }
    let separator = bytes
        .get(4..)?
        .iter()
        .take_while(|b| matches!(b, b' ' | b'-' | b'_'))
        .count();
    let word = 4 + separator;
    let matches = separator > 0 && bytes.get(word..word + 7)?.eq_ignore_ascii_case(b"updated");
    matches.then_some(word + 7)
}

fn skip_while(text: &str, from: usize, pattern: impl Fn(char) -> bool) -> usize {
    text.get(from..).map_or(0, |rest| {
        rest.len() - rest.trim_start_matches(pattern).len()
    })
}

#[cfg(test)]
mod tests {
    use super::super::new_files::inbox_template;
    use super::super::test_support::{SEED_INBOX, item, parse};
    use super::*;

    #[test]
    fn set_mark_changes_one_character() {
        let mut doc = parse(SEED_INBOX);
        assert_eq!(doc.set_mark(1, Mark::Done), Ok(()));
        assert_eq!(
            doc.render(),
            SEED_INBOX.replacen("- [ ] 完成", "- [x] 完成", 1)
        );
        assert_eq!(item(&doc, 1).mark, Mark::Done);
        assert_eq!(doc.set_mark(2, Mark::InProgress), Ok(()));
        assert_eq!(item(&doc, 2).mark, Mark::InProgress);
        assert_eq!(doc.set_mark(2, Mark::Open), Ok(()));
        assert_eq!(doc.set_mark(1, Mark::Open), Ok(()));
        assert_eq!(doc.render(), SEED_INBOX);
        assert_eq!(doc.set_mark(3, Mark::Done), Err(EditError::UnknownItem(3)));
        assert_eq!(doc.set_mark(0, Mark::Done), Err(EditError::UnknownItem(0)));
        assert_eq!(doc.render(), SEED_INBOX);
    }

    #[test]
    fn set_mark_keeps_crlf_bom_and_capital_x() {
        let text = "\u{feff}- [X] a\r\n\t* [ ] b\r\n+ [~] c";
        let mut doc = parse(text);
        doc.set_mark(1, Mark::Done).ok();
        doc.set_mark(2, Mark::Done).ok();
        doc.set_mark(3, Mark::Done).ok();
        assert_eq!(doc.render(), "\u{feff}- [X] a\r\n\t* [x] b\r\n+ [x] c");
    }

    // ---- set_note -----------------------------------------------------------------------------

    #[test]
    fn set_note_inserts_replaces_and_removes() {
        let text = "- [ ] a\n  context line\n  - [ ] child\n- [ ] b\n";
        let mut doc = parse(text);
        assert_eq!(doc.set_note(1, Some("failed: timed out")), Ok(()));
        // After the item's own text, before its nested item.
        let noted =
            "- [ ] a\n  context line\n  > runner: failed: timed out\n  - [ ] child\n- [ ] b\n";
        assert_eq!(doc.render(), noted);
        assert_eq!(item(&doc, 1).note.as_deref(), Some("failed: timed out"));
        assert_eq!(item(&doc, 1).continuation, "context line");
        assert_eq!(doc.set_note(1, Some("completed\nin 3s")), Ok(()));
        assert_eq!(
            doc.render(),
            noted.replace("failed: timed out", "completed in 3s")
        );
        assert_eq!(doc.set_note(2, Some("child note")), Ok(()));
        assert_eq!(
            doc.render(),
            "- [ ] a\n  context line\n  > runner: completed in 3s\n  - [ ] child\n    > runner: child note\n- [ ] b\n"
        );
        assert_eq!(item(&doc, 2).note.as_deref(), Some("child note"));
        assert_eq!(doc.set_note(2, None), Ok(()));
        assert_eq!(doc.set_note(1, None), Ok(()));
        assert_eq!(doc.render(), text);
        assert_eq!(doc.set_note(1, None), Ok(()));
        assert_eq!(doc.render(), text);
        assert_eq!(doc.set_note(4, Some("x")), Err(EditError::UnknownItem(4)));
        // Blank lines ending an item's text stay after the note.
        let mut doc = parse("- [ ] a\n  one\n  two\n\n- [ ] b\n");
        assert_eq!(doc.set_note(1, Some("done")), Ok(()));
        assert_eq!(
            doc.render(),
            "- [ ] a\n  one\n  two\n  > runner: done\n\n- [ ] b\n"
        );
        assert_eq!(item(&doc, 1).continuation, "one\ntwo");
    }

    #[test]
    fn set_note_keeps_the_indentation_of_an_existing_note() {
        let text = "- [ ] p\n - [ ] c\n > runner: old\n";
        let mut doc = parse(text);
        assert_eq!(item(&doc, 1).note.as_deref(), Some("old"));
        doc.set_note(1, Some("new")).ok();
        assert_eq!(doc.render(), "- [ ] p\n - [ ] c\n > runner: new\n");
        assert_eq!(item(&doc, 1).note.as_deref(), Some("new"));
        assert_eq!(item(&doc, 2).note, None);
    }

    #[test]
    fn set_note_replaces_a_note_anywhere_in_the_continuation() {
        let text = "- [ ] a\n  first\n  > runner: old\n  last\n";
        let mut doc = parse(text);
        assert_eq!(item(&doc, 1).continuation, "first\nlast");
        doc.set_note(1, Some("new")).ok();
        assert_eq!(doc.render(), "- [ ] a\n  first\n  > runner: new\n  last\n");
    }

    #[test]
    fn set_note_keeps_crlf_tabs_and_missing_final_newline() {
        let mut doc = parse("x\r\n\t- [ ] a");
        doc.set_note(1, Some("ok")).ok();
        assert_eq!(doc.render(), "x\r\n\t- [ ] a\r\n\t  > runner: ok");
        assert_eq!(item(&doc, 1).note.as_deref(), Some("ok"));
        doc.set_note(1, None).ok();
        assert_eq!(doc.render(), "x\r\n\t- [ ] a");
    }

    // ---- remove_items -------------------------------------------------------------------------

    #[test]
    fn remove_items_takes_whole_blocks() {
        let text = "# TODO\n\n## 📋 Todo\n- [ ] a @context:cp-1.md\n  a text\n\n  more a\n- [ ] b\n  - [ ] b child\n    child text\n- [ ] c\n\n## 💡 Ideas\n- [ ] idea\n";
        let doc = parse(text);
        let (rest, blocks) = match doc.remove_items(&[3, 1, 2, 1]) {
            Ok(result) => result,
            Err(error) => panic!("{error}"),
        };
        assert_eq!(
            rest,
            "# TODO\n\n## 📋 Todo\n- [ ] c\n\n## 💡 Ideas\n- [ ] idea\n"
        );
        assert_eq!(
            blocks,
            [
                "- [ ] a @context:cp-1.md\n  a text\n\n  more a\n",
                "- [ ] b\n  - [ ] b child\n    child text\n"
            ]
        );
        assert_eq!(
            doc.render(),
            text,
            "remove_items does not change the document"
        );
    }

    #[test]
    fn remove_items_can_take_a_child_alone() {
        let doc = parse("- [ ] p\n  - [ ] c\n  p text\n");
        let result = doc.remove_items(&[2]);
        assert_eq!(
            result,
            Ok((
                "- [ ] p\n  p text\n".to_string(),
                vec!["  - [ ] c\n".to_string()]
            ))
        );
    }

    #[test]
    fn remove_items_keeps_crlf_and_the_missing_final_newline() {
        let doc = parse("\u{feff}- [ ] a\r\n- [ ] b\r\n  b text");
        let result = doc.remove_items(&[2]);
        assert_eq!(
            result,
            Ok((
                "\u{feff}- [ ] a".to_string(),
                vec!["- [ ] b\r\n  b text".to_string()]
            ))
        );
        assert_eq!(doc.remove_items(&[]), Ok((doc.render(), Vec::new())));
        assert_eq!(doc.remove_items(&[1, 7]), Err(EditError::UnknownItem(7)));
        assert_eq!(
            doc.remove_items(&[1, 2]),
            Ok((
                "\u{feff}".to_string(),
                vec!["- [ ] a\r\n".to_string(), "- [ ] b\r\n  b text".to_string()]
            ))
        );
    }

    // ---- set_last_updated ---------------------------------------------------------------------

    #[test]
    fn set_last_updated_replaces_only_the_date() {
        let mut doc = parse(SEED_INBOX);
        assert!(doc.set_last_updated("2026-05-01"));
        assert_eq!(
            doc.render(),
            SEED_INBOX.replace("2026-04-27\n\n##", "2026-05-01\n\n##")
        );
        for (before, after) in [
            (
                "Last updated: 2026-04-27\r\n",
                "Last updated: 2026-05-01\r\n",
            ),
            (
                "LAST UPDATED：2026-04-27 by me\n",
                "LAST UPDATED：2026-05-01 by me\n",
            ),
            ("最后更新：2026-04-27", "最后更新：2026-05-01"),
            (
                "**Last updated:** 2026-04-27\n",
                "**Last updated:** 2026-05-01\n",
            ),
            (
                "> last-updated: 2026-04-27\n",
                "> last-updated: 2026-05-01\n",
            ),
            ("Last updated:\n", "Last updated: 2026-05-01\n"),
        ] {
            let mut doc = parse(before);
            assert!(doc.set_last_updated("2026-05-01"), "{before}");
            assert_eq!(doc.render(), after);
        }
    }

    #[test]
    fn set_last_updated_without_a_line_changes_nothing() {
        for text in [
            "# TODO\n- [ ] a\n",
            "```\nLast updated: 2026-01-01\n```\n",
            "Updated: x\n",
            "",
        ] {
            let mut doc = parse(text);
            assert!(!doc.set_last_updated("2026-05-01"));
            assert_eq!(doc.render(), text);
        }
        let mut doc = parse("---\nlast updated: 1\n---\nLast updated: 2\n");
        assert!(doc.set_last_updated("3"));
        assert_eq!(doc.render(), "---\nlast updated: 1\n---\nLast updated: 3\n");
    }

    #[test]
    fn append_item_goes_to_the_end_of_its_section() {
        let mut doc = parse(&inbox_template("2026-04-27"));
        assert_eq!(
            doc.append_item(
                Section::Todo,
                "first @context:cp-1.md",
                "line 1\n\nline 2\n"
            ),
            Ok(1)
        );
        assert_eq!(doc.append_item(Section::Ideas, "an idea", ""), Ok(2));
        assert_eq!(doc.append_item(Section::Todo, "second", ""), Ok(2));
        assert_eq!(
            doc.render(),
            "# TODO\n\nLast updated: 2026-04-27\n\n## 📋 Todo\n- [ ] first @context:cp-1.md\n  line 1\n\n  line 2\n- [ ] second\n\n## 💡 Ideas\n- [ ] an idea\n"
        );
        assert_eq!(item(&doc, 1).continuation, "line 1\n\nline 2");
        assert_eq!(item(&doc, 3).section, Section::Ideas);
        assert_eq!(
            doc.append_item(Section::Other, "x", ""),
            Err(EditError::OtherSection)
        );
    }

    #[test]
    fn append_item_adds_a_missing_section() {
        let mut doc = parse("# TODO\r\nLast updated: x");
        assert_eq!(doc.append_item(Section::Ideas, "idea", ""), Ok(1));
        assert_eq!(
            doc.render(),
            "# TODO\r\nLast updated: x\r\n\r\n## 💡 Ideas\r\n- [ ] idea"
        );
        let mut empty = parse("");
        assert_eq!(empty.append_item(Section::Todo, "t", ""), Ok(1));
        assert_eq!(empty.render(), "## 📋 Todo\n- [ ] t\n");
    }

    #[test]
    fn append_item_respects_subsections_and_chinese_headings() {
        let mut doc = parse("## 📋 待办\n- [ ] a\n### 前端\n- [ ] b\n\n## 💡 想法\n- [ ] c\n");
        assert_eq!(doc.append_item(Section::Todo, "d", ""), Ok(3));
        assert_eq!(
            doc.render(),
            "## 📋 待办\n- [ ] a\n### 前端\n- [ ] b\n- [ ] d\n\n## 💡 想法\n- [ ] c\n"
        );
        let mut fenced = parse("## Todo\n```\n");
        assert_eq!(
            fenced.append_item(Section::Todo, "hidden", ""),
            Err(EditError::NotReadBack)
        );
        assert_eq!(fenced.render(), "## Todo\n```\n");
        let text = "## Todo\n  ## Ideas\n- [ ] idea\n";
        let mut indented = parse(text);
        assert_eq!(
            indented.append_item(Section::Todo, "t", ""),
            Err(EditError::NotReadBack)
        );
        assert_eq!(
            indented.append_item(Section::Ideas, "t", "- [ ] nested"),
            Err(EditError::NotReadBack)
        );
        assert_eq!(indented.render(), text);
    }
}
