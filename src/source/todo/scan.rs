//! Reading the body of a document: indentation, item lines, headings, code fences, and the
//! one pass ([`Scanner`]) that finds items with their continuation and nested items, then
//! turns them into [`TodoItem`]s ([`build_items`]).

use super::lines::Line;
use super::tokens::{check_after_references, is_note_line, note_text, parse_tokens};
use super::{Mark, Problem, Section, TodoItem};

/// How many columns a tab counts for when measuring indentation.
const TAB_COLUMNS: usize = 4;

/// Where an item is in the lines (0-based indexes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ItemSpan {
    /// The item line.
    pub(super) line: usize,
    /// The last line of the item's block: its continuation and its nested items.
    pub(super) block_end: usize,
    /// Byte offset of the mark character inside the item line.
    pub(super) mark_byte: usize,
    /// Byte length of the indentation before the list marker.
    pub(super) indent_bytes: usize,
    /// Byte offset of the item text (after the checkbox and the blanks after it) inside the
    /// item line: where its tokens are read.
    pub(super) text_start: usize,
    /// The runner note line, if any.
    pub(super) note_line: Option<usize>,
}

/// A heading outside code fences and items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Heading {
    pub(super) line: usize,
    pub(super) level: usize,
    /// The section its own words name.
    pub(super) own: Section,
    /// The section its lines belong to (own, or inherited).
    pub(super) effective: Section,
}

/// Leading whitespace of a line.
#[derive(Debug, Clone, Copy)]
pub(super) struct Indent {
    pub(super) bytes: usize,
    pub(super) columns: usize,
}

/// What [`parse_item_line`] read from an item line.
#[derive(Debug, Clone, Copy)]
struct ItemLine {
    indent: Indent,
    mark: Mark,
    mark_byte: usize,
    text_start: usize,
}

/// An item as the scanner found it, before its text is read.
#[derive(Debug, Clone)]
pub(super) struct RawItem {
    line: ItemLine,
    line_index: usize,
    section: Section,
    parent: Option<usize>,
    /// Continuation line indexes (the item line excluded), increasing.
    own: Vec<usize>,
    block_end: usize,
}

/// An open code fence.
#[derive(Debug, Clone, Copy)]
struct Fence {
    ch: u8,
    len: usize,
    line: usize,
    /// Whether its lines belong to the innermost open item.
    owned: bool,
}

/// What the scanner found in the body (everything after the frontmatter).
pub(super) struct Scan {
    pub(super) items: Vec<RawItem>,
    pub(super) headings: Vec<Heading>,
    pub(super) code_lines: Vec<bool>,
    pub(super) problems: Vec<Problem>,
}

pub(super) fn is_blank(text: &str) -> bool {
    text.chars().all(char::is_whitespace)
}

pub(super) fn leading_indent(text: &str) -> Indent {
    let mut indent = Indent {
        bytes: 0,
        columns: 0,
    };
    for byte in text.bytes() {
        match byte {
            b' ' => indent.columns += 1,
            b'\t' => indent.columns += TAB_COLUMNS,
            _ => break,
        }
        indent.bytes += 1;
    }
    indent
}

/// How many spaces and tabs start `bytes[from..]`.
pub(super) fn count_blanks(bytes: &[u8], from: usize) -> usize {
    bytes.get(from..).map_or(0, |rest| {
        rest.iter()
            .take_while(|b| matches!(b, b' ' | b'\t'))
            .count()
    })
}

/// Reads `- [ ] text` (or `*`, `+`; mark ` `, `x`, `X`, `~`), possibly indented. The `]`
/// must be followed by a space, a tab or the end of the line.
fn parse_item_line(text: &str) -> Option<ItemLine> {
    let indent = leading_indent(text);
    let bytes = text.as_bytes();
    let marker = indent.bytes;
    if !matches!(bytes.get(marker), Some(b'-' | b'*' | b'+')) {
        return None;
    }
    let gap = count_blanks(bytes, marker + 1);
    if gap == 0 {
        return None;
    }
    let open = marker + 1 + gap;
    if bytes.get(open) != Some(&b'[') || bytes.get(open + 2) != Some(&b']') {
        return None;
    }
    let mark = Mark::from_char(char::from(*bytes.get(open + 1)?))?;
    let after = open + 3;
    if !matches!(bytes.get(after), None | Some(b' ' | b'\t')) {
        return None;
    }
    Some(ItemLine {
        indent,
        mark,
        mark_byte: open + 1,
        text_start: after + count_blanks(bytes, after),
    })
}

/// Reads an ATX heading (`#` to `######`, indented at most 3 columns): its level and text,
/// without a closing run of `#`.
fn parse_heading(text: &str) -> Option<(usize, String)> {
    let indent = leading_indent(text);
    if indent.columns > 3 {
        return None;
    }
    let rest = text.get(indent.bytes..)?;
    let level = rest.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let after = rest.get(level..)?;
    if !after.is_empty() && !after.starts_with([' ', '\t']) {
        return None;
    }
    let mut title = after.trim();
    let without_closing = title.trim_end_matches('#');
    if without_closing.is_empty() {
        title = "";
    } else if without_closing.ends_with([' ', '\t']) {
        title = without_closing.trim_end();
    }
    Some((level, title.to_string()))
}

/// A fence delimiter: its character, its length and what follows it.
fn fence_marker(text: &str) -> Option<(u8, usize, &str)> {
    let rest = text.trim_start_matches([' ', '\t']);
    let ch = *rest.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = rest.bytes().take_while(|b| *b == ch).count();
    if len < 3 {
        return None;
    }
    Some((ch, len, rest.get(len..).unwrap_or("")))
}

/// A line opening a fence: a backtick fence's info string may not hold a backtick.
fn fence_open(text: &str) -> Option<(u8, usize)> {
    let (ch, len, info) = fence_marker(text)?;
    if ch == b'`' && info.contains('`') {
        return None;
    }
    Some((ch, len))
}

fn fence_closes(fence: &Fence, text: &str) -> bool {
    matches!(fence_marker(text), Some((ch, len, rest)) if ch == fence.ch && len >= fence.len && is_blank(rest))
}

/// Walks the body once, finding items, their continuation, headings and code fences.
pub(super) struct Scanner<'a> {
    lines: &'a [Line],
    items: Vec<RawItem>,
    /// Open items, outermost first (indexes into `items`); their indents increase.
    open: Vec<usize>,
    /// Blank lines seen since the last non-blank line, not yet given to an item.
    pending_blanks: Vec<usize>,
    fence: Option<Fence>,
    headings: Vec<Heading>,
    /// Enclosing headings: (level, effective section).
    heading_path: Vec<(usize, Section)>,
    section: Section,
    code_lines: Vec<bool>,
}

impl<'a> Scanner<'a> {
    pub(super) fn new(lines: &'a [Line]) -> Self {
        Self {
            lines,
            items: Vec::new(),
            open: Vec::new(),
            pending_blanks: Vec::new(),
            fence: None,
            headings: Vec::new(),
            heading_path: Vec::new(),
            section: Section::Other,
            code_lines: vec![false; lines.len()],
        }
    }

    pub(super) fn run(mut self, start: usize) -> Scan {
        let lines = self.lines;
        for (index, line) in lines.iter().enumerate().skip(start) {
            self.scan_line(index, &line.text);
        }
        let mut problems = Vec::new();
        if let Some(fence) = self.fence {
            problems.push(Problem {
                line: fence.line + 1,
                message: "this code fence is never closed; the rest of the file is read as code"
                    .to_string(),
            });
        }
        Scan {
            items: self.items,
            headings: self.headings,
            code_lines: self.code_lines,
            problems,
        }
    }

    fn scan_line(&mut self, index: usize, text: &str) {
        if let Some(fence) = self.fence {
            self.mark_code(index);
            if fence.owned {
                self.own_line(index);
            }
            if fence_closes(&fence, text) {
                self.fence = None;
            }
            return;
        }
        if is_blank(text) {
            self.pending_blanks.push(index);
            return;
        }
        self.close_items(leading_indent(text).columns);
        if let Some(item_line) = parse_item_line(text) {
            self.open_item(index, item_line);
            return;
        }
        let owned = !self.open.is_empty();
        if owned {
            let blanks = std::mem::take(&mut self.pending_blanks);
            for blank in blanks {
                self.own_line(blank);
            }
            self.own_line(index);
        } else {
            self.pending_blanks.clear();
        }
        if let Some((ch, len)) = fence_open(text) {
            self.mark_code(index);
            self.fence = Some(Fence {
                ch,
                len,
                line: index,
                owned,
            });
        } else if !owned && let Some((level, title)) = parse_heading(text) {
            self.enter_heading(index, level, &title);
        }
    }

    fn mark_code(&mut self, index: usize) {
        if let Some(flag) = self.code_lines.get_mut(index) {
            *flag = true;
        }
    }

    /// Closes the open items whose marker is indented at least `columns`.
    fn close_items(&mut self, columns: usize) {
        while let Some(&top) = self.open.last() {
            match self.items.get(top) {
                Some(item) if item.line.indent.columns < columns => break,
                _ => {
                    self.open.pop();
                }
            }
        }
    }

    /// Gives a line to the innermost open item, and grows the blocks of all open items.
    fn own_line(&mut self, index: usize) {
        let Some(&top) = self.open.last() else { return };
        if let Some(item) = self.items.get_mut(top) {
            item.own.push(index);
        }
        self.extend_open_blocks(index);
    }

    fn extend_open_blocks(&mut self, index: usize) {
        for &open in &self.open {
            if let Some(item) = self.items.get_mut(open) {
                item.block_end = index;
            }
        }
    }

    fn open_item(&mut self, index: usize, line: ItemLine) {
        self.pending_blanks.clear();
        self.extend_open_blocks(index);
        self.items.push(RawItem {
            line,
            line_index: index,
            section: self.section,
            parent: self.open.last().copied(),
            own: Vec::new(),
            block_end: index,
        });
        self.open.push(self.items.len() - 1);
    }

    fn enter_heading(&mut self, index: usize, level: usize, title: &str) {
        let own = Section::classify(title);
        while self
            .heading_path
            .last()
            .is_some_and(|(open_level, _)| *open_level >= level)
        {
            self.heading_path.pop();
        }
        let effective = match (own, self.heading_path.last()) {
            (Section::Other, Some(&(parent_level, parent_section))) if parent_level >= 2 => {
                parent_section
            }
            _ => own,
        };
        self.heading_path.push((level, effective));
        self.section = effective;
        self.headings.push(Heading {
            line: index,
            level,
            own,
            effective,
        });
    }
}

/// Turns scanned items into [`TodoItem`]s, reading their tokens and continuation.
pub(super) fn build_items(
    lines: &[Line],
    raws: &[RawItem],
    problems: &mut Vec<Problem>,
) -> (Vec<TodoItem>, Vec<ItemSpan>) {
    let text_of = |index: usize| lines.get(index).map_or("", |line| line.text.as_str());
    let mut items = Vec::with_capacity(raws.len());
    let mut spans = Vec::with_capacity(raws.len());
    for (position, raw) in raws.iter().enumerate() {
        let line_number = raw.line_index + 1;
        let body = text_of(raw.line_index)
            .get(raw.line.text_start..)
            .unwrap_or("");
        let tokens = parse_tokens(body, line_number, problems);
        let note_line = raw
            .own
            .iter()
            .copied()
            .find(|&index| is_note_line(text_of(index)));
        let continuation_lines: Vec<&str> = raw
            .own
            .iter()
            .copied()
            .filter(|&index| Some(index) != note_line)
            .map(text_of)
            .collect();
        let mut raw_text = String::new();
        for index in std::iter::once(raw.line_index).chain(raw.own.iter().copied()) {
            if let Some(line) = lines.get(index) {
                raw_text.push_str(&line.text);
                raw_text.push_str(line.ending.as_str());
            }
        }
        items.push(TodoItem {
            number: item_number(position),
            line: line_number,
            indent: raw.line.indent.columns,
            mark: raw.line.mark,
            section: raw.section,
            title: tokens.title,
            context: tokens.context,
            after: tokens.after,
            after_batches: tokens.after_batches,
            fragment: tokens.fragment,
            continuation: dedent_join(&continuation_lines),
            note: note_line.map(|index| note_text(text_of(index))),
            parent: raw.parent.map(item_number),
            raw: raw_text,
        });
        spans.push(ItemSpan {
            line: raw.line_index,
            block_end: raw.block_end,
            mark_byte: raw.line.mark_byte,
            indent_bytes: raw.line.indent.bytes,
            text_start: raw.line.text_start,
            note_line,
        });
    }
    check_after_references(&items, problems);
    (items, spans)
}

fn item_number(position: usize) -> u32 {
    u32::try_from(position + 1).unwrap_or(u32::MAX)
}

/// Drops leading and trailing blank lines, removes the common indentation (in columns),
/// blanks whitespace-only lines, and joins with `"\n"`.
pub(super) fn dedent_join(lines: &[&str]) -> String {
    let first = lines.iter().position(|line| !is_blank(line));
    let last = lines.iter().rposition(|line| !is_blank(line));
    let (Some(first), Some(last)) = (first, last) else {
        return String::new();
    };
    let lines = lines.get(first..=last).unwrap_or(&[]);
    let common = lines
        .iter()
        .filter(|line| !is_blank(line))
        .map(|line| leading_indent(line).columns)
        .min()
        .unwrap_or(0);
    let dedented: Vec<String> = lines
        .iter()
        .map(|line| {
            if is_blank(line) {
                String::new()
            } else {
                strip_columns(line, common)
            }
        })
        .collect();
    dedented.join("\n")
}

/// Removes `columns` columns of leading whitespace; a tab cut in two leaves spaces.
fn strip_columns(text: &str, columns: usize) -> String {
    let mut removed = 0;
    let mut cut = 0;
    for byte in text.bytes() {
        if removed >= columns {
            break;
        }
        match byte {
            b' ' => removed += 1,
            b'\t' => removed += TAB_COLUMNS,
            _ => break,
        }
        cut += 1;
    }
    let pad = " ".repeat(removed.saturating_sub(columns));
    format!("{pad}{}", text.get(cut..).unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{item, parse, titles};
    use super::super::{Mark, Section};
    use super::*;

    #[test]
    fn items_take_the_section_of_their_heading() {
        let text = "- [ ] before any heading\n# TODO\n- [ ] under the title\n## 📋 待办\n- [ ] 任务一\n### Frontend\n- [ ] inherited\n## 💡 想法\n- [x] 想法一\n## Archive\n- [X] archived\n";
        let doc = parse(text);
        let sections: Vec<Section> = doc.items().iter().map(|item| item.section).collect();
        assert_eq!(
            sections,
            [
                Section::Other,
                Section::Todo,
                Section::Todo,
                Section::Todo,
                Section::Ideas,
                Section::Other
            ]
        );
        assert_eq!(item(&doc, 5).mark, Mark::Done);
        assert_eq!(item(&doc, 6).mark, Mark::Done);
    }

    #[test]
    fn heading_levels_and_closing_hashes() {
        assert_eq!(parse_heading("## Todo ##"), Some((2, "Todo".to_string())));
        assert_eq!(parse_heading("#"), Some((1, String::new())));
        assert_eq!(parse_heading("   # x"), Some((1, "x".to_string())));
        assert_eq!(parse_heading("    # code"), None);
        assert_eq!(parse_heading("#tag"), None);
        assert_eq!(parse_heading("####### seven"), None);
        assert_eq!(parse_heading("## C#"), Some((2, "C#".to_string())));
    }

    #[test]
    fn reads_all_marks_and_markers() {
        let doc = parse("- [ ] a\n* [x] b\n+ [X] c\n- [~] d\n  -   [ ]   e\n-\t[ ]\tf\n- [ ]\n");
        let marks: Vec<Mark> = doc.items().iter().map(|item| item.mark).collect();
        assert_eq!(
            marks,
            [
                Mark::Open,
                Mark::Done,
                Mark::Done,
                Mark::InProgress,
                Mark::Open,
                Mark::Open,
                Mark::Open
            ]
        );
        assert_eq!(titles(&doc), ["a", "b", "c", "d", "e", "f", ""]);
    }

    #[test]
    fn rejects_lines_that_are_not_items() {
        let doc = parse("-[ ] a\n- [?] b\n- [ ]c\n- [] d\n1. [ ] e\n- plain\n[ ] f\n- [x]x\n");
        assert!(doc.items().is_empty(), "{:?}", doc.items());
    }

    #[test]
    fn continuation_rules() {
        let text = "- [ ] a\n  one\n\n  two after a blank\n\nunindented ends it\n  not continuation\n- [ ] b\nno lazy continuation\n- [ ] c\n  c1\n## heading ends it\n  x\n";
        let doc = parse(text);
        assert_eq!(item(&doc, 1).continuation, "one\n\ntwo after a blank");
        assert_eq!(item(&doc, 1).raw, "- [ ] a\n  one\n\n  two after a blank\n");
        assert_eq!(item(&doc, 2).continuation, "");
        assert_eq!(item(&doc, 2).raw, "- [ ] b\n");
        assert_eq!(item(&doc, 3).continuation, "c1");
        assert_eq!(
            doc.block(1).as_deref(),
            Some("- [ ] a\n  one\n\n  two after a blank\n")
        );
    }

    #[test]
    fn indented_hashes_and_frontmatter_lines_are_not_structure() {
        let text = "---\n- [ ] in frontmatter\n---\n## Todo\n- [ ] a\n  # run the tests\n  ## not a heading\n- [ ] b\n";
        let doc = parse(text);
        assert_eq!(titles(&doc), ["a", "b"]);
        assert_eq!(item(&doc, 1).line, 5);
        assert_eq!(
            item(&doc, 1).continuation,
            "# run the tests\n## not a heading"
        );
        assert_eq!(item(&doc, 2).section, Section::Todo);
    }

    #[test]
    fn continuation_is_dedented_by_columns() {
        let doc = parse("- [ ] a\n    four\n      six\n\t tab\n   \n    end\n");
        assert_eq!(item(&doc, 1).continuation, "four\n  six\n tab\n\nend");
        let doc = parse("\t- [ ] tabbed\n\t\tcont\n\t  two\n");
        assert_eq!(item(&doc, 1).indent, 4);
        assert_eq!(item(&doc, 1).continuation, "  cont\ntwo");
    }

    #[test]
    fn nested_items_are_items_of_their_own() {
        let text = "- [ ] parent\n  parent text\n  - [x] child\n    child text\n\n    more child text\n  - [ ] second child\n      - [~] grandchild\n  back to parent\n- [ ] sibling\n";
        let doc = parse(text);
        assert_eq!(
            titles(&doc),
            ["parent", "child", "second child", "grandchild", "sibling"]
        );
        let parents: Vec<Option<u32>> = doc.items().iter().map(|item| item.parent).collect();
        assert_eq!(parents, [None, Some(1), Some(1), Some(3), None]);
        let indents: Vec<usize> = doc.items().iter().map(|item| item.indent).collect();
        assert_eq!(indents, [0, 2, 2, 6, 0]);
        assert_eq!(item(&doc, 1).continuation, "parent text\nback to parent");
        assert_eq!(
            item(&doc, 1).raw,
            "- [ ] parent\n  parent text\n  back to parent\n"
        );
        assert_eq!(item(&doc, 2).continuation, "child text\n\nmore child text");
        assert_eq!(item(&doc, 3).continuation, "");
        assert_eq!(
            doc.block(1).as_deref(),
            Some(
                "- [ ] parent\n  parent text\n  - [x] child\n    child text\n\n    more child text\n  - [ ] second child\n      - [~] grandchild\n  back to parent\n"
            )
        );
        assert_eq!(
            doc.block(3).as_deref(),
            Some("  - [ ] second child\n      - [~] grandchild\n")
        );
        assert_eq!(doc.block(9), None);
    }

    #[test]
    fn code_fences_hide_items_and_headings() {
        let text = "## 📋 Todo\n```\n- [ ] not an item\n## not a heading\n```\n~~~~ md\n- [ ] nor this\n~~~\n```\n~~~~\n- [ ] real\n  ```sh\n  - [ ] inside the item's fence\nunindented in fence\n  ```\n  after fence\n";
        let doc = parse(text);
        assert_eq!(titles(&doc), ["real"]);
        assert_eq!(item(&doc, 1).section, Section::Todo);
        assert_eq!(item(&doc, 1).line, 11);
        assert_eq!(
            item(&doc, 1).continuation,
            "  ```sh\n  - [ ] inside the item's fence\nunindented in fence\n  ```\n  after fence"
        );
        assert!(doc.problems().is_empty(), "{:?}", doc.problems());
    }

    #[test]
    fn closing_fence_needs_the_same_char_and_length() {
        let doc = parse("````\n```\n~~~~\n- [ ] hidden\n````\n- [ ] seen\n");
        assert_eq!(titles(&doc), ["seen"]);
        let doc = parse("``` x ```\n- [ ] inline code is not a fence\n");
        assert_eq!(titles(&doc), ["inline code is not a fence"]);
        let doc = parse("```\n- [ ] hidden\n``` not a close\n");
        assert!(doc.items().is_empty());
        assert_eq!(doc.problems().len(), 1);
        assert_eq!(doc.problems()[0].line, 1);
    }

    #[test]
    fn numbering_is_file_order_across_sections() {
        let doc = parse("- [ ] zero\n## Todo\n- [ ] one\n  - [ ] nested\n## Ideas\n- [ ] idea\n");
        let numbers: Vec<(u32, usize)> = doc
            .items()
            .iter()
            .map(|item| (item.number, item.line))
            .collect();
        assert_eq!(numbers, [(1, 1), (2, 3), (3, 4), (4, 6)]);
        assert!(doc.item(0).is_none());
        assert!(doc.item(5).is_none());
    }
}
