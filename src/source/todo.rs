//! Lossless parser and editor of the todo inbox (`todo.md`) and of batch files (`todo-N.md`).
//!
//! This module does no IO: it takes the text of a file and gives back values, or edited text.
//! Every byte it does not mean to change is kept: line endings (`\n`, `\r\n`, a last line
//! without one), a leading UTF-8 BOM, tabs, trailing spaces, everything inside code fences.
//!
//! # Format
//!
//! The formats come from `seeds/todo-skill.md` ("todo.md 文件格式", "todo-N.md 批次文件格式"),
//! the `[~]` mark from `seeds/task-management-protocol.md`, and DESIGN.md §3 ("Inbox todo.md",
//! "Batch todo-N.md"), which wins where they differ.
//!
//! ```text
//! ---                                   optional YAML frontmatter (batch files):
//! source: todo.md                       `key: value` lines, kept as raw lines
//! created: "2026-04-27"
//! status: pending
//! ---
//! # TODO
//!
//! Last updated: 2026-04-27              or `最后更新: 2026-04-27` (`:` or `：`)
//!
//! ## 📋 Todo                            a Todo section: todo / to do / 待办 / 任务
//! - [ ] a task @context:cp-20260427-143000.md @after:2
//!   continuation lines are indented more than the item's marker
//!   > runner: one note line the runner keeps up to date
//!   - [~] a nested item is an item of its own
//! - [x] a done task
//!
//! ## 💡 Ideas                           an Ideas section: idea / ideas / 想法 / 灵感
//! - [ ] an idea
//! ```
//!
//! Rules, in the order the parser applies them:
//!
//! - Frontmatter: the first line is `---` and a later line is `---`. Without the closing
//!   line there is no frontmatter, and a [`Problem`] says so.
//! - Code fences (```` ``` ```` or `~~~`, at least three, possibly indented) hide their
//!   content: nothing inside is an item or a heading. A fence closes on a line holding a run
//!   of the same character at least as long as the opening one, and nothing else.
//! - Items: `- [ ] text`, `* [ ] text` or `+ [ ] text`, possibly indented; the mark is
//!   ` ` (open), `x`/`X` (done) or `~` (in progress). Items are numbered 1.. in file order
//!   across the whole file, nested ones included; `@after:` and `--select` use these numbers.
//! - Continuation: a non-blank line indented more than the marker of the innermost open item
//!   belongs to it (a tab counts as 4 columns). An item ends at a line indented no more than
//!   its marker (another item, a heading, unindented text), so blank lines belong to the item
//!   only when an indented continuation line follows them. A nested item is its own item; the
//!   text after it, indented more than the parent's marker but not the child's, is the
//!   parent's again.
//! - Headings (`#` to `######`, indented at most 3 columns, outside items) open a section
//!   classified by its words ([`Section::classify`]). A subheading whose words name no
//!   section inherits the section of the enclosing `##`-or-deeper heading; a level-1 heading
//!   (the `# TODO` title) is not inherited. Items before any heading are [`Section::Other`].
//! - Tokens: `@context:VALUE` names the item's checkpoint, `@after:1,2` the items that must
//!   complete first. The title is the item text without these tokens, whitespace collapsed.
//! - Runner note: the first continuation line starting (after its indentation) with
//!   `> runner:` is the runner's note on the item ([`TodoDocument::set_note`]).

use std::fmt;
use std::fmt::Write as _;

/// The byte order mark some editors put at the start of a UTF-8 file.
const BOM: char = '\u{feff}';
/// What a runner note line starts with, after its indentation.
const NOTE_PREFIX: &str = "> runner:";
/// How many columns a tab counts for when measuring indentation.
const TAB_COLUMNS: usize = 4;
/// The heading written for a new Todo section.
const TODO_HEADING: &str = "## 📋 Todo";
/// The heading written for a new Ideas section.
const IDEAS_HEADING: &str = "## 💡 Ideas";
/// Words that make a heading a Todo section (compared lowercased).
const TODO_WORDS: [&str; 5] = ["todo", "to do", "to-do", "待办", "任务"];
/// Words that make a heading an Ideas section (compared lowercased).
const IDEA_WORDS: [&str; 3] = ["idea", "想法", "灵感"];

// ---------------------------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------------------------

/// The state of an item's checkbox: `[ ]`, `[x]` / `[X]`, or `[~]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mark {
    /// `[ ]`: not started.
    Open,
    /// `[x]` or `[X]`: done.
    Done,
    /// `[~]`: being worked on (seed `task-management-protocol.md`).
    InProgress,
}

impl Mark {
    /// The character this mark writes between the brackets: `' '`, `'x'` or `'~'`.
    #[must_use]
    pub fn as_char(self) -> char {
        match self {
            Mark::Open => ' ',
            Mark::Done => 'x',
            Mark::InProgress => '~',
        }
    }

    /// Reads a checkbox character: `' '` is [`Mark::Open`], `'x'` and `'X'` are
    /// [`Mark::Done`], `'~'` is [`Mark::InProgress`]; any other character is `None`.
    #[must_use]
    pub fn from_char(c: char) -> Option<Self> {
        match c {
            ' ' => Some(Mark::Open),
            'x' | 'X' => Some(Mark::Done),
            '~' => Some(Mark::InProgress),
            _ => None,
        }
    }
}

/// The kind of section an item sits in, from the words of the heading above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Section {
    /// Under a heading naming todos (`## 📋 Todo`, `## 待办`, `## Tasks 任务`, ...).
    Todo,
    /// Under a heading naming ideas (`## 💡 Ideas`, `## 想法`, `## 灵感`, ...).
    Ideas,
    /// Under any other heading, or before the first heading.
    Other,
}

impl Section {
    /// Classifies a heading's text (without the leading `#`s) by its words, ignoring case
    /// and emoji: containing `todo`, `to do`, `to-do`, `待办` or `任务` gives
    /// [`Section::Todo`]; otherwise containing `idea`, `想法` or `灵感` gives
    /// [`Section::Ideas`]; anything else is [`Section::Other`].
    #[must_use]
    pub fn classify(heading: &str) -> Self {
        let lower = heading.to_lowercase();
        if TODO_WORDS.iter().any(|word| lower.contains(word)) {
            Section::Todo
        } else if IDEA_WORDS.iter().any(|word| lower.contains(word)) {
            Section::Ideas
        } else {
            Section::Other
        }
    }
}

/// Something wrong in a document that did not stop it from being parsed.
///
/// Examples: a frontmatter that is never closed, an `@after:x` that is not a list of item
/// numbers, an `@after` naming its own item or an item that does not exist, an unclosed
/// code fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line number the problem is about.
    pub line: usize,
    /// What is wrong, as a sentence for a person.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Why an edit of a [`TodoDocument`] could not be made. A failed edit changes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditError {
    /// No item has this number (items are numbered 1..=`items().len()`).
    UnknownItem(u32),
    /// [`TodoDocument::append_item`] was asked for [`Section::Other`], which has no heading
    /// to append under.
    OtherSection,
    /// [`TodoDocument::append_item`]'s lines would not read back as one new item with its
    /// continuation, leaving the rest alone: the section ends inside a code fence that is
    /// never closed, the next heading is indented and would become continuation text, or a
    /// continuation line is itself an item line.
    NotReadBack,
}

impl fmt::Display for EditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EditError::UnknownItem(number) => write!(f, "there is no item {number}"),
            EditError::OtherSection => {
                write!(
                    f,
                    "items can only be appended to the Todo or the Ideas section"
                )
            }
            EditError::NotReadBack => write!(
                f,
                "the appended item would not read back as written \
                 (a code fence left open, or an indented heading after it?)"
            ),
        }
    }
}

impl std::error::Error for EditError {}

/// One task-list item of a document, with what the parser read from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TodoItem {
    /// 1-based position among all items of the file, in file order (nested items included).
    pub number: u32,
    /// 1-based line number of the item line (`- [ ] ...`).
    pub line: usize,
    /// Columns of indentation before the list marker (a tab counts as 4).
    pub indent: usize,
    /// The checkbox state.
    pub mark: Mark,
    /// The section the item sits in.
    pub section: Section,
    /// The item text without `@context:` / `@after:` tokens, whitespace collapsed to single
    /// spaces. May be empty.
    pub title: String,
    /// The value of the first `@context:VALUE` token (e.g. `cp-20260427-143000.md`).
    pub context: Option<String>,
    /// The item numbers named by `@after:` tokens, in the order written. Holds every
    /// well-formed number, even one naming the item itself or no item; such numbers are also
    /// reported in [`TodoDocument::problems`].
    pub after: Vec<u32>,
    /// The item's own continuation lines (not nested items, not the runner note), without
    /// line endings, their common indentation removed, leading and trailing blank lines
    /// dropped, joined by `"\n"`. Empty if there are none.
    pub continuation: String,
    /// The text of the runner note line (`> runner: TEXT`), trimmed, if the item has one.
    pub note: Option<String>,
    /// The number of the item this one is nested in, if any.
    pub parent: Option<u32>,
    /// The exact bytes of the item line and its own continuation lines (note included,
    /// nested items excluded), line endings included.
    pub raw: String,
}

/// A parsed `todo.md` or `todo-N.md`: the lines of the file plus what was read from them.
///
/// [`TodoDocument::parse`] never fails; problems are listed by [`TodoDocument::problems`].
/// [`TodoDocument::render`] (also `to_string()`) gives back exactly the parsed bytes until an
/// edit is made. Edits (`set_*`, [`TodoDocument::append_item`]) change only the bytes they
/// must, then re-read the document, so [`TodoDocument::items`] is always up to date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TodoDocument {
    bom: bool,
    lines: Vec<Line>,
    /// Index of the closing `---` of the frontmatter, which spans lines `0..=close`.
    frontmatter_close: Option<usize>,
    items: Vec<TodoItem>,
    /// Where each item is, parallel to `items`.
    spans: Vec<ItemSpan>,
    headings: Vec<Heading>,
    /// For each line: whether it is part of a code fence (delimiters included).
    code_lines: Vec<bool>,
    problems: Vec<Problem>,
}

// ---------------------------------------------------------------------------------------------
// Private model
// ---------------------------------------------------------------------------------------------

/// How a line ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The last line of a file without a final newline.
    None,
    Lf,
    CrLf,
}

impl Ending {
    fn as_str(self) -> &'static str {
        match self {
            Ending::None => "",
            Ending::Lf => "\n",
            Ending::CrLf => "\r\n",
        }
    }
}

/// One line of the file: its text without the ending, and the ending.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    text: String,
    ending: Ending,
}

/// Where an item is in the lines (0-based indexes).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ItemSpan {
    /// The item line.
    line: usize,
    /// The last line of the item's block: its continuation and its nested items.
    block_end: usize,
    /// Byte offset of the mark character inside the item line.
    mark_byte: usize,
    /// Byte length of the indentation before the list marker.
    indent_bytes: usize,
    /// The runner note line, if any.
    note_line: Option<usize>,
}

/// A heading outside code fences and items.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Heading {
    line: usize,
    level: usize,
    /// The section its own words name.
    own: Section,
    /// The section its lines belong to (own, or inherited).
    effective: Section,
}

/// Leading whitespace of a line.
#[derive(Debug, Clone, Copy)]
struct Indent {
    bytes: usize,
    columns: usize,
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
struct RawItem {
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
struct Scan {
    items: Vec<RawItem>,
    headings: Vec<Heading>,
    code_lines: Vec<bool>,
    problems: Vec<Problem>,
}

/// A frontmatter `key: value` line, located.
#[derive(Debug, Clone)]
struct FrontmatterEntry {
    line: usize,
    /// Byte offset right after the `:`.
    after_colon: usize,
    value_start: usize,
    value_end: usize,
    style: QuoteStyle,
    value: String,
}

/// How a YAML scalar is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuoteStyle {
    Plain,
    Single,
    Double,
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

impl TodoDocument {
    /// Parses the text of a `todo.md` or `todo-N.md`. Never fails and never panics: anything
    /// odd is reported by [`TodoDocument::problems`]. An empty text is an empty document.
    #[must_use]
    pub fn parse(text: &str) -> Self {
        let (bom, body) = match text.strip_prefix(BOM) {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        Self::from_lines(bom, split_lines(body))
    }

    fn from_lines(bom: bool, lines: Vec<Line>) -> Self {
        let mut problems = Vec::new();
        let frontmatter_close = find_frontmatter(&lines, &mut problems);
        let body_start = frontmatter_close.map_or(0, |close| close + 1);
        let scan = Scanner::new(&lines).run(body_start);
        problems.extend(scan.problems);
        let (items, spans) = build_items(&lines, &scan.items, &mut problems);
        problems.sort_by_key(|problem| problem.line);
        Self {
            bom,
            lines,
            frontmatter_close,
            items,
            spans,
            headings: scan.headings,
            code_lines: scan.code_lines,
            problems,
        }
    }

    /// Re-reads the document after its lines were edited.
    fn reload(&mut self) {
        let lines = std::mem::take(&mut self.lines);
        *self = Self::from_lines(self.bom, lines);
    }

    /// The exact text of the document: the parsed bytes, plus any edits made since.
    #[must_use]
    pub fn render(&self) -> String {
        render_lines(self.bom, &self.lines)
    }

    /// All items in file order; `items()[k]` has number `k + 1`.
    #[must_use]
    pub fn items(&self) -> &[TodoItem] {
        &self.items
    }

    /// The item with this 1-based number, or `None` if there is none.
    #[must_use]
    pub fn item(&self, number: u32) -> Option<&TodoItem> {
        self.index_of(number)
            .ok()
            .and_then(|index| self.items.get(index))
    }

    /// Everything odd found while parsing, ordered by line.
    #[must_use]
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Whether the text started with a UTF-8 byte order mark (it is kept when rendering).
    #[must_use]
    pub fn has_bom(&self) -> bool {
        self.bom
    }

    /// The document's line ending style: the ending of its first line that has one
    /// (`"\n"` or `"\r\n"`), or `"\n"` for a document without any line ending.
    /// Lines the editor inserts use it.
    #[must_use]
    pub fn newline(&self) -> &'static str {
        self.newline_ending().as_str()
    }

    fn newline_ending(&self) -> Ending {
        self.lines
            .iter()
            .map(|line| line.ending)
            .find(|ending| *ending != Ending::None)
            .unwrap_or(Ending::Lf)
    }

    /// The exact text of an item's whole block: its line, its continuation and its nested
    /// items with theirs (what [`TodoDocument::remove_items`] would remove), or `None` if no
    /// item has this number.
    #[must_use]
    pub fn block(&self, number: u32) -> Option<String> {
        let span = self.span(number).ok()?;
        let lines = self.lines.get(span.line..=span.block_end)?;
        Some(render_lines(false, lines))
    }

    fn index_of(&self, number: u32) -> Result<usize, EditError> {
        usize::try_from(number)
            .ok()
            .and_then(|n| n.checked_sub(1))
            .filter(|index| *index < self.items.len())
            .ok_or(EditError::UnknownItem(number))
    }

    fn span(&self, number: u32) -> Result<&ItemSpan, EditError> {
        let index = self.index_of(number)?;
        self.spans.get(index).ok_or(EditError::UnknownItem(number))
    }

    fn line_text(&self, index: usize) -> &str {
        self.lines.get(index).map_or("", |line| line.text.as_str())
    }
}

impl fmt::Display for TodoDocument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

/// Splits text into lines, each keeping its exact ending. A final line without a newline
/// has [`Ending::None`]; text ending in a newline has no empty last line.
fn split_lines(text: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some((head, tail)) = rest.split_once('\n') {
        let line = match head.strip_suffix('\r') {
            Some(text) => Line {
                text: text.to_string(),
                ending: Ending::CrLf,
            },
            None => Line {
                text: head.to_string(),
                ending: Ending::Lf,
            },
        };
        lines.push(line);
        rest = tail;
    }
    if !rest.is_empty() {
        lines.push(Line {
            text: rest.to_string(),
            ending: Ending::None,
        });
    }
    lines
}

fn render_lines(bom: bool, lines: &[Line]) -> String {
    let mut out = String::with_capacity(lines.iter().map(|line| line.text.len() + 2).sum());
    if bom {
        out.push(BOM);
    }
    for line in lines {
        out.push_str(&line.text);
        out.push_str(line.ending.as_str());
    }
    out
}

/// Finds the closing `---` of a frontmatter that opens on the first line.
fn find_frontmatter(lines: &[Line], problems: &mut Vec<Problem>) -> Option<usize> {
    let first = lines.first()?;
    if !is_frontmatter_delimiter(&first.text) {
        return None;
    }
    let close = lines
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, line)| is_frontmatter_delimiter(&line.text))
        .map(|(index, _)| index);
    if close.is_none() {
        problems.push(Problem {
            line: 1,
            message: "the frontmatter opened on line 1 is never closed by a `---` line; \
                      the file is read as if it had no frontmatter"
                .to_string(),
        });
    }
    close
}

fn is_frontmatter_delimiter(text: &str) -> bool {
    text.trim_end() == "---"
}

fn is_blank(text: &str) -> bool {
    text.chars().all(char::is_whitespace)
}

fn leading_indent(text: &str) -> Indent {
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
fn count_blanks(bytes: &[u8], from: usize) -> usize {
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
struct Scanner<'a> {
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
    fn new(lines: &'a [Line]) -> Self {
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

    fn run(mut self, start: usize) -> Scan {
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
fn build_items(
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
            note_line,
        });
    }
    check_after_references(&items, problems);
    (items, spans)
}

fn item_number(position: usize) -> u32 {
    u32::try_from(position + 1).unwrap_or(u32::MAX)
}

/// What the `@` tokens of an item's text say.
struct Tokens {
    title: String,
    context: Option<String>,
    after: Vec<u32>,
}

/// Reads `@context:VALUE` and `@after:N,M` tokens; the remaining words are the title.
fn parse_tokens(text: &str, line: usize, problems: &mut Vec<Problem>) -> Tokens {
    let mut words = Vec::new();
    let mut context: Option<String> = None;
    let mut after = Vec::new();
    let mut report = |message: String| problems.push(Problem { line, message });
    for word in text.split_whitespace() {
        if let Some(value) = word.strip_prefix("@context:") {
            if value.is_empty() {
                report("`@context:` names no checkpoint file".to_string());
            } else if context.is_some() {
                report(format!(
                    "a second @context (`{value}`) is ignored; the first one is used"
                ));
            } else {
                context = Some(value.to_string());
            }
        } else if let Some(value) = word.strip_prefix("@after:") {
            parse_after(value, &mut after, &mut report);
        } else {
            words.push(word);
        }
    }
    Tokens {
        title: words.join(" "),
        context,
        after,
    }
}

/// Reads the comma-separated item numbers of one `@after:` token into `after`.
fn parse_after(value: &str, after: &mut Vec<u32>, report: &mut impl FnMut(String)) {
    if value.is_empty() {
        report("`@after:` names no items; write item numbers like `@after:1,2`".to_string());
        return;
    }
    for part in value.split(',') {
        let part = part.trim();
        let number = if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            None
        } else {
            part.parse::<u32>().ok()
        };
        match number {
            Some(0) => report("`@after:0`: items are numbered from 1".to_string()),
            Some(number) => after.push(number),
            None => report(format!(
                "invalid @after value `{part}` in `@after:{value}`: expected item numbers like `@after:1,2`"
            )),
        }
    }
}

/// Reports `@after` numbers naming the item itself or no item.
fn check_after_references(items: &[TodoItem], problems: &mut Vec<Problem>) {
    let count = items.len();
    for item in items {
        for &number in &item.after {
            let message = if number == item.number {
                format!("item {number} names itself in @after")
            } else if usize::try_from(number).map_or(true, |n| n > count) {
                format!("@after:{number} names no item (the file has {count})")
            } else {
                continue;
            };
            problems.push(Problem {
                line: item.line,
                message,
            });
        }
    }
}

fn is_note_line(text: &str) -> bool {
    text.trim_start_matches([' ', '\t'])
        .starts_with(NOTE_PREFIX)
}

fn note_text(text: &str) -> String {
    let body = text.trim_start_matches([' ', '\t']);
    body.strip_prefix(NOTE_PREFIX)
        .unwrap_or(body)
        .trim()
        .to_string()
}

/// Drops leading and trailing blank lines, removes the common indentation (in columns),
/// blanks whitespace-only lines, and joins with `"\n"`.
fn dedent_join(lines: &[&str]) -> String {
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

// ---------------------------------------------------------------------------------------------
// Frontmatter
// ---------------------------------------------------------------------------------------------

impl TodoDocument {
    /// Whether the document starts with a closed `---` ... `---` frontmatter.
    #[must_use]
    pub fn has_frontmatter(&self) -> bool {
        self.frontmatter_close.is_some()
    }

    /// The value of a top-level `key: value` line of the frontmatter, with quotes removed
    /// (`"..."` with its escapes, `'...'`) and, for an unquoted value, a trailing ` # comment`
    /// dropped. `Some("")` for `key:` without a value; `None` if there is no frontmatter or
    /// no such key. Keys match exactly (case-sensitive); the first matching line wins.
    #[must_use]
    pub fn frontmatter_value(&self, key: &str) -> Option<String> {
        self.frontmatter_entry(key).map(|entry| entry.value)
    }

    /// Sets a frontmatter key. If the key has a line, only its value is replaced (keeping
    /// the quote style where the new value allows it, and any comment); otherwise a line
    /// `key: value` is inserted before the closing `---`. Values that YAML would misread
    /// unquoted are written double-quoted. Returns `false`, changing nothing, if the
    /// document has no frontmatter; `true` otherwise.
    pub fn set_frontmatter_value(&mut self, key: &str, value: &str) -> bool {
        let Some(close) = self.frontmatter_close else {
            return false;
        };
        if let Some(entry) = self.frontmatter_entry(key) {
            self.replace_frontmatter_value(&entry, value);
        } else {
            let text = format!("{key}: {}", yaml_scalar(value, QuoteStyle::Plain));
            let ending = self.newline_ending();
            insert_lines(&mut self.lines, close, vec![text], ending);
        }
        self.reload();
        true
    }

    /// Rewrites the value of a located `key: value` line, keeping the rest of the line.
    fn replace_frontmatter_value(&mut self, entry: &FrontmatterEntry, value: &str) {
        let text = self.line_text(entry.line);
        let (Some(head), Some(tail)) = (text.get(..entry.value_start), text.get(entry.value_end..))
        else {
            return;
        };
        let mut formatted = yaml_scalar(value, entry.style);
        if entry.value_start == entry.after_colon && !formatted.is_empty() {
            formatted.insert(0, ' ');
        }
        if tail.starts_with('#') {
            formatted.push(' ');
        }
        let new_text = format!("{head}{formatted}{tail}");
        if let Some(line) = self.lines.get_mut(entry.line) {
            line.text = new_text;
        }
    }

    fn frontmatter_entry(&self, key: &str) -> Option<FrontmatterEntry> {
        let close = self.frontmatter_close?;
        (1..close).find_map(|index| parse_key_line(self.line_text(index), key, index))
    }
}

/// Reads a top-level `key: value` line if its key is `key`.
fn parse_key_line(text: &str, key: &str, line: usize) -> Option<FrontmatterEntry> {
    if text.starts_with([' ', '\t']) {
        return None;
    }
    let colon = text.find(':')?;
    if text.get(..colon)?.trim() != key {
        return None;
    }
    let after_colon = colon + 1;
    let value_start = after_colon + count_blanks(text.as_bytes(), after_colon);
    let rest = text.get(value_start..)?;
    let (style, len, value) = match rest.chars().next() {
        Some('"') => {
            let (len, value) = read_double_quoted(rest);
            (QuoteStyle::Double, len, value)
        }
        Some('\'') => {
            let (len, value) = read_single_quoted(rest);
            (QuoteStyle::Single, len, value)
        }
        _ => {
            let value = plain_value(rest);
            (QuoteStyle::Plain, value.len(), value.to_string())
        }
    };
    Some(FrontmatterEntry {
        line,
        after_colon,
        value_start,
        value_end: value_start + len,
        style,
        value,
    })
}

/// An unquoted scalar: up to a ` #` comment, trailing whitespace dropped.
fn plain_value(rest: &str) -> &str {
    if rest.starts_with('#') {
        return "";
    }
    let comment = [rest.find(" #"), rest.find("\t#")]
        .into_iter()
        .flatten()
        .min();
    rest.get(..comment.unwrap_or(rest.len()))
        .unwrap_or(rest)
        .trim_end()
}

/// Reads a `"..."` scalar starting at `rest`: bytes used (quotes included) and its value.
/// An unclosed scalar runs to the end of the line.
fn read_double_quoted(rest: &str) -> (usize, String) {
    let mut value = String::new();
    let mut chars = rest.char_indices().skip(1);
    while let Some((index, c)) = chars.next() {
        match c {
            '"' => return (index + 1, value),
            '\\' => match chars.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, 't')) => value.push('\t'),
                Some((_, 'r')) => value.push('\r'),
                Some((_, '0')) => value.push('\0'),
                Some((_, 'u')) => {
                    let hex: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
                    match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                        Some(decoded) if hex.len() == 4 => value.push(decoded),
                        _ => {
                            value.push_str("\\u");
                            value.push_str(&hex);
                        }
                    }
                }
                Some((_, escaped @ ('"' | '\\' | '/'))) => value.push(escaped),
                Some((_, other)) => {
                    value.push('\\');
                    value.push(other);
                }
                None => value.push('\\'),
            },
            c => value.push(c),
        }
    }
    (rest.len(), value)
}

/// Reads a `'...'` scalar (`''` is a quote): bytes used (quotes included) and its value.
fn read_single_quoted(rest: &str) -> (usize, String) {
    let mut value = String::new();
    let mut chars = rest.char_indices().skip(1).peekable();
    while let Some((index, c)) = chars.next() {
        if c != '\'' {
            value.push(c);
        } else if chars.peek().is_some_and(|(_, next)| *next == '\'') {
            chars.next();
            value.push('\'');
        } else {
            return (index + 1, value);
        }
    }
    (rest.len(), value)
}

/// Writes a YAML scalar in the wanted style, falling back to double quotes when needed.
fn yaml_scalar(value: &str, style: QuoteStyle) -> String {
    match style {
        QuoteStyle::Plain if is_plain_safe(value) => value.to_string(),
        QuoteStyle::Single if !value.chars().any(char::is_control) => {
            format!("'{}'", value.replace('\'', "''"))
        }
        _ => double_quoted(value),
    }
}

fn double_quoted(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether a value reads back as the same string when written without quotes.
fn is_plain_safe(value: &str) -> bool {
    let Some(first) = value.chars().next() else {
        return false;
    };
    value == value.trim()
        && !value.chars().any(char::is_control)
        && !value.contains(": ")
        && !value.contains(" #")
        && !value.ends_with(':')
        && !"-?:,[]{}#&*!|>'\"%@`~".contains(first)
}

// ---------------------------------------------------------------------------------------------
// Edits
// ---------------------------------------------------------------------------------------------

/// Inserts lines before index `at` (clamped to the end), each ending with `ending`. At the
/// end of a document whose last line has no ending, that line gets `ending` and the last
/// inserted line gets none, so the file still ends without a newline.
fn insert_lines(lines: &mut Vec<Line>, at: usize, texts: Vec<String>, ending: Ending) {
    let at = at.min(lines.len());
    let mut new_lines: Vec<Line> = texts
        .into_iter()
        .map(|text| Line { text, ending })
        .collect();
    if at == lines.len()
        && let Some(previous) = lines.last_mut()
        && previous.ending == Ending::None
        && let Some(last_new) = new_lines.last_mut()
    {
        previous.ending = ending;
        last_new.ending = Ending::None;
    }
    lines.splice(at..at, new_lines);
}

/// Keeps the lines not flagged `remove`. If the last line had no ending and was removed, the
/// new last line loses its ending, so the file still ends without a newline.
fn keep_lines(lines: &[Line], remove: &[bool]) -> Vec<Line> {
    let mut kept: Vec<Line> = lines
        .iter()
        .zip(remove.iter().copied().chain(std::iter::repeat(false)))
        .filter(|(_, removed)| !removed)
        .map(|(line, _)| line.clone())
        .collect();
    let last_removed_without_ending = lines.last().is_some_and(|line| line.ending == Ending::None)
        && remove.last() == Some(&true);
    if last_removed_without_ending && let Some(last) = kept.last_mut() {
        last.ending = Ending::None;
    }
    kept
}

/// Makes one line of text: line breaks become spaces, ends trimmed.
fn single_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ").trim().to_string()
}

impl TodoDocument {
    /// Sets an item's checkbox, changing only the character between its brackets (`[X]` is
    /// left alone when asked for [`Mark::Done`]).
    ///
    /// # Errors
    ///
    /// [`EditError::UnknownItem`] if no item has this number.
    pub fn set_mark(&mut self, number: u32, mark: Mark) -> Result<(), EditError> {
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
    /// indentation and line ending; otherwise a note line is inserted directly below the item line. Line
    /// breaks in `text` become spaces. With `None` the note line is removed. Other
    /// continuation lines are untouched.
    ///
    /// # Errors
    ///
    /// [`EditError::UnknownItem`] if no item has this number.
    pub fn set_note(&mut self, number: u32, note: Option<&str>) -> Result<(), EditError> {
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
                insert_lines(&mut self.lines, span.line + 1, vec![text], ending);
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
    pub fn remove_items(&self, numbers: &[u32]) -> Result<(String, Vec<String>), EditError> {
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
    pub fn set_last_updated(&mut self, date: &str) -> bool {
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
    pub fn append_item(
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
        let candidate = Self::from_lines(self.bom, lines);
        let number = candidate
            .items
            .iter()
            .find(|item| item.line == item_line_index + 1 && item.continuation == expected)
            .filter(|_| candidate.items.len() == self.items.len() + 1)
            .map(|item| item.number)
            .ok_or(EditError::NotReadBack)?;
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

// ---------------------------------------------------------------------------------------------
// New files
// ---------------------------------------------------------------------------------------------

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
#[must_use]
pub fn batch_document(
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
pub const INBOX_TEMPLATE: &str = include_str!("../../templates/todo.md");

/// A new inbox `todo.md` from `template` (normally [`INBOX_TEMPLATE`], or a store's own
/// `templates/todo.md`) with `{{ date }}` replaced by `date`. Line breaks in `date` become
/// spaces.
#[must_use]
pub fn inbox_from(template: &str, date: &str) -> String {
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
pub fn inbox_template(date: &str) -> String {
    inbox_from(INBOX_TEMPLATE, date)
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    const SEED_INBOX: &str = "# TODO\n\n最后更新: 2026-04-27\n\n## 📋 Todo\n- [ ] 完成用户认证模块 @context:cp-20260427-143000.md\n  已写完 3 个 case，还差错误处理分支\n\n## 💡 Ideas\n- [ ] 想法描述\n";

    fn parse(text: &str) -> TodoDocument {
        let doc = TodoDocument::parse(text);
        assert_eq!(doc.render(), text, "round trip");
        doc
    }

    fn titles(doc: &TodoDocument) -> Vec<&str> {
        doc.items().iter().map(|item| item.title.as_str()).collect()
    }

    fn item(doc: &TodoDocument, number: u32) -> &TodoItem {
        match doc.item(number) {
            Some(item) => item,
            None => panic!("no item {number} in {doc:?}"),
        }
    }

    // ---- round trip -------------------------------------------------------------------------

    #[test]
    fn round_trips_fixtures() {
        let fixtures = [
            "",
            "\n",
            "\r\n",
            "\n\n\n",
            "no newline",
            "- [ ] item without newline",
            SEED_INBOX,
            "# TODO\r\n\r\n## 📋 Todo\r\n- [ ] a\r\n  cont\r\n",
            "\u{feff}# TODO\n- [ ] a\n",
            "\u{feff}",
            "- [ ] tab\n\tcontinued\n\t\tdeeper\n",
            "```\n- [ ] not an item\n```\n",
            "- [ ] a\n  - [x] b\n    - [X] c\n",
            "## 📋 待办\n- [ ] 中文\n## 💡 想法\n- [~] 灵感\n",
            "mixed\r\nendings\nhere\r\nlast",
            "lone\rcarriage\r",
            "trailing spaces   \n- [ ]   spaced   \n",
            "---\nsource: todo.md\n---\n",
            "---\nunterminated\n",
        ];
        for text in fixtures {
            let doc = parse(text);
            assert_eq!(doc.to_string(), text);
        }
    }

    #[test]
    fn bom_is_kept_and_not_part_of_the_first_line() {
        let doc = parse("\u{feff}---\nstatus: pending\n---\n- [ ] a\n");
        assert!(doc.has_bom());
        assert!(doc.has_frontmatter());
        assert_eq!(doc.frontmatter_value("status").as_deref(), Some("pending"));
        assert_eq!(item(&doc, 1).line, 4);
    }

    #[test]
    fn newline_style_is_the_first_ending() {
        assert_eq!(parse("a\r\nb\n").newline(), "\r\n");
        assert_eq!(parse("a\nb\r\n").newline(), "\n");
        assert_eq!(parse("no ending").newline(), "\n");
        assert_eq!(parse("").newline(), "\n");
    }

    // ---- items, sections, continuation --------------------------------------------------------

    #[test]
    fn reads_the_seed_inbox() {
        let doc = parse(SEED_INBOX);
        assert!(doc.problems().is_empty(), "{:?}", doc.problems());
        assert_eq!(doc.items().len(), 2);
        let task = item(&doc, 1);
        assert_eq!(task.number, 1);
        assert_eq!(task.line, 6);
        assert_eq!(task.indent, 0);
        assert_eq!(task.mark, Mark::Open);
        assert_eq!(task.section, Section::Todo);
        assert_eq!(task.title, "完成用户认证模块");
        assert_eq!(task.context.as_deref(), Some("cp-20260427-143000.md"));
        assert!(task.after.is_empty());
        assert_eq!(task.continuation, "已写完 3 个 case，还差错误处理分支");
        assert_eq!(task.note, None);
        assert_eq!(task.parent, None);
        assert_eq!(
            task.raw,
            "- [ ] 完成用户认证模块 @context:cp-20260427-143000.md\n  已写完 3 个 case，还差错误处理分支\n"
        );
        let idea = item(&doc, 2);
        assert_eq!(idea.section, Section::Ideas);
        assert_eq!(idea.title, "想法描述");
        assert_eq!(idea.context, None);
        assert_eq!(idea.raw, "- [ ] 想法描述\n");
    }

    #[test]
    fn classifies_headings_by_their_words() {
        for (heading, section) in [
            ("📋 Todo", Section::Todo),
            ("TODO", Section::Todo),
            ("To Do", Section::Todo),
            ("to-do list", Section::Todo),
            ("📋 待办", Section::Todo),
            ("任务", Section::Todo),
            ("💡 Ideas", Section::Ideas),
            ("idea", Section::Ideas),
            ("💡 想法", Section::Ideas),
            ("灵感", Section::Ideas),
            ("Done", Section::Other),
            ("", Section::Other),
        ] {
            assert_eq!(Section::classify(heading), section, "{heading}");
        }
    }

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

    // ---- tokens -------------------------------------------------------------------------------

    #[test]
    fn reads_after_and_context_tokens() {
        let doc = parse(
            "- [ ] one\n- [ ] two @after:1\n- [ ] three  @after:1,2   @context:cp-1.md  tail\n- [ ] ping @bob @after:2 @after:1\n",
        );
        assert!(doc.problems().is_empty(), "{:?}", doc.problems());
        assert_eq!(item(&doc, 2).after, [1]);
        assert_eq!(item(&doc, 3).after, [1, 2]);
        assert_eq!(item(&doc, 3).title, "three tail");
        assert_eq!(item(&doc, 3).context.as_deref(), Some("cp-1.md"));
        assert_eq!(item(&doc, 4).title, "ping @bob");
        assert_eq!(item(&doc, 4).after, [2, 1]);
    }

    #[test]
    fn reports_bad_tokens_without_failing() {
        let doc = parse(
            "- [ ] a @after:x\n- [ ] b @after:2\n- [ ] c @after:1,,9 @after:0 @after:\n- [ ] d @context: @context:a.md @context:b.md\n",
        );
        assert_eq!(item(&doc, 1).after, Vec::<u32>::new());
        assert_eq!(item(&doc, 2).after, [2]);
        assert_eq!(item(&doc, 3).after, [1, 9]);
        assert_eq!(item(&doc, 4).context.as_deref(), Some("a.md"));
        let lines: Vec<usize> = doc.problems().iter().map(|problem| problem.line).collect();
        assert_eq!(lines, [1, 2, 3, 3, 3, 3, 4, 4], "{:?}", doc.problems());
        assert!(doc.problems()[0].message.contains("`x`"));
        assert!(doc.problems()[1].message.contains("itself"));
        assert!(
            doc.problems()
                .iter()
                .any(|problem| problem.message.contains("@after:9 names no item"))
        );
        assert_eq!(
            doc.problems()[0].to_string(),
            format!("line 1: {}", doc.problems()[0].message)
        );
    }

    // ---- frontmatter --------------------------------------------------------------------------

    const BATCH: &str = "---\nsource: todo.md\ncreated: \"2026-04-27\"\nstatus: pending # or partial, done\nowner: 'O''Brien'\nempty:\n  nested: 1\n---\n\n## 📋 Todo\n- [ ] a\n";

    #[test]
    fn reads_frontmatter_values() {
        let doc = parse(BATCH);
        assert_eq!(doc.frontmatter_value("source").as_deref(), Some("todo.md"));
        assert_eq!(
            doc.frontmatter_value("created").as_deref(),
            Some("2026-04-27")
        );
        assert_eq!(doc.frontmatter_value("status").as_deref(), Some("pending"));
        assert_eq!(doc.frontmatter_value("owner").as_deref(), Some("O'Brien"));
        assert_eq!(doc.frontmatter_value("empty").as_deref(), Some(""));
        assert_eq!(doc.frontmatter_value("nested"), None);
        assert_eq!(doc.frontmatter_value("missing"), None);
        assert_eq!(item(&doc, 1).line, 11);
        let escaped = parse("---\nk: \"a\\\"b\\\\c\\u00e9\\n\"\n---\n");
        assert_eq!(
            escaped.frontmatter_value("k").as_deref(),
            Some("a\"b\\cé\n")
        );
    }

    #[test]
    fn unterminated_frontmatter_is_a_problem() {
        let doc = parse("---\nstatus: pending\n- [ ] a\n");
        assert!(!doc.has_frontmatter());
        assert_eq!(doc.frontmatter_value("status"), None);
        assert_eq!(doc.problems().len(), 1);
        assert_eq!(doc.problems()[0].line, 1);
        assert_eq!(titles(&doc), ["a"]);
    }

    #[test]
    fn sets_frontmatter_values_in_place() {
        let mut doc = parse(BATCH);
        assert!(doc.set_frontmatter_value("status", "done"));
        assert!(doc.set_frontmatter_value("created", "2026-05-01"));
        assert!(doc.set_frontmatter_value("owner", "Zoë"));
        assert!(doc.set_frontmatter_value("source", "a: b"));
        assert_eq!(
            doc.render(),
            "---\nsource: \"a: b\"\ncreated: \"2026-05-01\"\nstatus: done # or partial, done\nowner: 'Zoë'\nempty:\n  nested: 1\n---\n\n## 📋 Todo\n- [ ] a\n"
        );
        assert_eq!(doc.frontmatter_value("source").as_deref(), Some("a: b"));
        assert_eq!(doc.frontmatter_value("status").as_deref(), Some("done"));
    }

    #[test]
    fn inserts_a_missing_frontmatter_key_and_keeps_crlf() {
        let mut doc = parse("---\r\nsource: todo.md\r\n---\r\n- [ ] a\r\n");
        assert!(doc.set_frontmatter_value("status", "partial"));
        assert_eq!(
            doc.render(),
            "---\r\nsource: todo.md\r\nstatus: partial\r\n---\r\n- [ ] a\r\n"
        );
        assert!(doc.set_frontmatter_value("status", "done"));
        assert_eq!(
            doc.render(),
            "---\r\nsource: todo.md\r\nstatus: done\r\n---\r\n- [ ] a\r\n"
        );
        let mut bare = parse("---\nk:\nj: # c\n---\n");
        assert!(bare.set_frontmatter_value("k", "v"));
        assert!(bare.set_frontmatter_value("j", "w"));
        assert_eq!(bare.render(), "---\nk: v\nj: w # c\n---\n");
    }

    #[test]
    fn no_frontmatter_means_no_change() {
        let mut doc = parse(SEED_INBOX);
        assert!(!doc.set_frontmatter_value("status", "done"));
        assert_eq!(doc.render(), SEED_INBOX);
    }

    // ---- set_mark -----------------------------------------------------------------------------

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
        let noted =
            "- [ ] a\n  > runner: failed: timed out\n  context line\n  - [ ] child\n- [ ] b\n";
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
            "- [ ] a\n  > runner: completed in 3s\n  context line\n  - [ ] child\n    > runner: child note\n- [ ] b\n"
        );
        assert_eq!(item(&doc, 2).note.as_deref(), Some("child note"));
        assert_eq!(doc.set_note(2, None), Ok(()));
        assert_eq!(doc.set_note(1, None), Ok(()));
        assert_eq!(doc.render(), text);
        assert_eq!(doc.set_note(1, None), Ok(()));
        assert_eq!(doc.render(), text);
        assert_eq!(doc.set_note(4, Some("x")), Err(EditError::UnknownItem(4)));
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

    // ---- new files ----------------------------------------------------------------------------

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

    // ---- append_item --------------------------------------------------------------------------

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

    // ---- robustness ---------------------------------------------------------------------------

    const TRICKY: &str = "\u{feff}---\r\nsource: \"todo\\u00e9.md\r\ncreated: '2026'\n---\n# TODO\n\n最后更新：2026-04-27\n## 📋 待办\n- [ ] a @after:2,x @context:cp.md\n\t继续\n  - [~] b @after:1\n\n    b2\n```\n- [ ] fenced\n~~~\n````\n* [X] c\r\n+ [ ]\n  > runner: note\n## 💡 Ideas\n- [ ] é @after:\n   -  [x]   d\t\n";

    fn exercise(text: &str) {
        let doc = TodoDocument::parse(text);
        assert_eq!(doc.render(), text);
        let count = u32::try_from(doc.items().len()).unwrap_or(0);
        for number in 0..=count + 1 {
            let exists = doc.item(number).is_some();
            let mut edited = doc.clone();
            assert_eq!(edited.set_mark(number, Mark::Done).is_ok(), exists);
            if exists {
                assert_eq!(edited.items().len(), doc.items().len(), "{text:?}");
                assert_eq!(item(&edited, number).mark, Mark::Done);
            }
            assert_eq!(edited.set_note(number, Some("n")).is_ok(), exists);
            if exists {
                assert_eq!(edited.items().len(), doc.items().len(), "{text:?}");
                assert_eq!(item(&edited, number).note.as_deref(), Some("n"), "{text:?}");
            }
            let _ = edited.set_note(number, None);
            let _ = edited.set_mark(number, Mark::Open);
            assert_eq!(doc.remove_items(&[number]).is_ok(), exists);
            if let Some(block) = doc.block(number) {
                assert!(doc.render().contains(&block));
                assert!(block.starts_with(item(&doc, number).raw.lines().next().unwrap_or("")));
            }
        }
        let mut edited = doc.clone();
        edited.set_frontmatter_value("status", "done");
        edited.set_frontmatter_value("source", "x");
        edited.set_last_updated("2026-01-01");
        if let Ok(number) = edited.append_item(Section::Todo, "new", "cont") {
            assert_eq!(item(&edited, number).title, "new");
            assert_eq!(item(&edited, number).section, Section::Todo, "{text:?}");
            assert_eq!(item(&edited, number).continuation, "cont", "{text:?}");
        }
        let _ = edited.append_item(Section::Ideas, "idea", "");
        for item in edited.items() {
            assert!(item.number >= 1);
        }
        let all: Vec<u32> = (1..=count).collect();
        // Removing leading items can turn a later `---` line into a frontmatter opener; that
        // re-reading is inherent to the format, so the check skips such documents.
        if let Ok((rest, _)) = doc.remove_items(&all)
            && !rest.starts_with("---")
        {
            assert!(
                TodoDocument::parse(&rest).items().is_empty(),
                "{text:?} -> {rest:?}"
            );
        }
    }

    #[test]
    fn every_prefix_of_a_tricky_document_parses_and_round_trips() {
        for (index, _) in TRICKY
            .char_indices()
            .chain(std::iter::once((TRICKY.len(), ' ')))
        {
            let prefix = TRICKY.get(..index).unwrap_or("");
            exercise(prefix);
            exercise(TRICKY.get(index..).unwrap_or(""));
        }
    }

    #[test]
    fn random_documents_never_panic() {
        const PIECES: [&str; 24] = [
            "- [ ] ",
            "- [x] ",
            "* [~] ",
            "  ",
            "\t",
            "\n",
            "\r\n",
            "\r",
            "```",
            "~~~",
            "## ",
            "# Todo",
            "💡 Ideas",
            "---",
            "@after:",
            "1,2",
            "@context:",
            "x",
            "é",
            "> runner:",
            ":",
            "：",
            "Last updated",
            "\u{3000}",
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            usize::try_from(state % u64::try_from(bound).unwrap_or(1)).unwrap_or(0)
        };
        for _ in 0..400 {
            let length = next(40);
            let text: String = (0..length).map(|_| PIECES[next(PIECES.len())]).collect();
            exercise(&text);
        }
    }
}
