//! The tokens of an item line (`@context:VALUE`, `@after:1,2,todo-3#1`,
//! `@fragment:NAME#ROUND/STEP`) and the runner note line (`> runner: TEXT`) of an item's
//! continuation.
//!
//! A word that would be a token but starts with a backslash (`\@context:x`) is a title word
//! with that one backslash removed, as Markdown shows it: [`escape_title`] writes text a user
//! typed so that it reads back as exactly that text.

use std::fmt;
use std::ops::Range;

use super::fragment_mark::FragmentMark;
use super::{Problem, TodoItem};

/// What a runner note line starts with, after its indentation.
pub(super) const NOTE_PREFIX: &str = "> runner:";

/// The token prefixes.
const TOKEN_PREFIXES: [&str; 3] = [CONTEXT_PREFIX, AFTER_PREFIX, FRAGMENT_PREFIX];
/// The prefix of a checkpoint reference.
const CONTEXT_PREFIX: &str = "@context:";
/// The prefix of a list of prerequisites.
const AFTER_PREFIX: &str = "@after:";
/// The prefix of a fragment mark ([`FragmentMark`]).
const FRAGMENT_PREFIX: &str = "@fragment:";

/// A prerequisite held in a batch file: item `item` of `todo-<batch>.md`, written
/// `@after:todo-<batch>#<item>`. `runner resolve` writes it on an inbox item whose
/// prerequisite moved to that batch, and hands the item out only once it is ticked there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BatchRef {
    /// N of `todo-N.md`.
    pub batch: u32,
    /// The item's number in that file.
    pub item: u32,
}

impl fmt::Display for BatchRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "todo-{}#{}", self.batch, self.item)
    }
}

/// One prerequisite named by an `@after:` token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Prerequisite {
    /// An item of the same file, by number.
    Item(u32),
    /// An item of a batch file.
    Batch(BatchRef),
}

impl fmt::Display for Prerequisite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prerequisite::Item(n) => write!(f, "{n}"),
            Prerequisite::Batch(b) => write!(f, "{b}"),
        }
    }
}

/// What the `@` tokens of an item's text say.
pub(super) struct Tokens {
    pub(super) title: String,
    pub(super) context: Option<String>,
    pub(super) after: Vec<u32>,
    pub(super) after_batches: Vec<BatchRef>,
    pub(super) fragment: Option<FragmentMark>,
}

/// One word of an item's text, as the parser reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Token<'a> {
    /// `@context:VALUE`: the text after the colon, possibly empty.
    Context(&'a str),
    /// `@after:VALUE`: the text after the colon, possibly empty or malformed.
    After(&'a str),
    /// `@fragment:VALUE`: the text after the colon, possibly empty or malformed.
    Fragment(&'a str),
    /// Any other word: part of the title (an escaped token without its backslash).
    Word(&'a str),
}

/// Whether `word` is a token word once `\`s are stripped from its front.
fn is_token_like(word: &str) -> bool {
    let bare = word.trim_start_matches('\\');
    TOKEN_PREFIXES.iter().any(|p| bare.starts_with(p))
}

/// The words of an item's text (the item line after its checkbox), split at whitespace as
/// [`str::split_whitespace`] splits, each with its byte range in `text` and what it is. A
/// word is a token only as a whole: `x@after:1` is a title word, and so is `\@after:1`
/// (as `@after:1`).
pub(super) fn tokens(text: &str) -> impl Iterator<Item = (Range<usize>, Token<'_>)> {
    let mut from = 0;
    std::iter::from_fn(move || {
        let rest = text.get(from..)?;
        let start = from + (rest.len() - rest.trim_start().len());
        let word = text.get(start..)?;
        let len = word.find(char::is_whitespace).unwrap_or(word.len());
        let word = word.get(..len).filter(|word| !word.is_empty())?;
        from = start + len;
        let token = if let Some(value) = word.strip_prefix(CONTEXT_PREFIX) {
            Token::Context(value)
        } else if let Some(value) = word.strip_prefix(AFTER_PREFIX) {
            Token::After(value)
        } else if let Some(value) = word.strip_prefix(FRAGMENT_PREFIX) {
            Token::Fragment(value)
        } else if word.starts_with('\\') && is_token_like(word) {
            Token::Word(word.get(1..).unwrap_or(word))
        } else {
            Token::Word(word)
        };
        Some((start..from, token))
    })
}

/// `text` (one line, as a user gave it to `runner add`, which pins the checkpoint itself)
/// written so that every word that would read as a `@context:` or `@fragment:` token — bare
/// or already escaped — reads back as exactly that word of the title: it gets one more
/// backslash in front. `@after:` words are left alone: they are how a new item names its
/// prerequisites.
#[must_use]
pub(crate) fn escape_title(text: &str) -> String {
    escape_words(text, &[CONTEXT_PREFIX, FRAGMENT_PREFIX])
}

/// `text` written so that it reads back as exactly this title, whatever it holds: every
/// token-like word (`@context:`, `@after:`, `@fragment:`) gets one more backslash in front.
/// For titles the runner renders (a fragment step's subject), whose links it writes itself.
#[must_use]
pub(crate) fn escape_text(text: &str) -> String {
    escape_words(text, &TOKEN_PREFIXES)
}

/// One more backslash before each word starting (after its backslashes) with one of
/// `prefixes`.
fn escape_words(text: &str, prefixes: &[&str]) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    // Each piece is a word and at most one whitespace character after it.
    for piece in text.split_inclusive(char::is_whitespace) {
        let word = piece.trim_end_matches(char::is_whitespace);
        let bare = word.trim_start_matches('\\');
        if prefixes.iter().any(|p| bare.starts_with(p)) {
            out.push('\\');
        }
        out.push_str(piece);
    }
    out
}

/// Reads `@context:VALUE`, `@after:N,M` and `@fragment:NAME#ROUND/STEP` tokens; the
/// remaining words are the title.
pub(super) fn parse_tokens(text: &str, line: usize, problems: &mut Vec<Problem>) -> Tokens {
    let mut words = Vec::new();
    let mut context: Option<String> = None;
    let mut fragment: Option<FragmentMark> = None;
    let mut after = Vec::new();
    let mut report = |message: String| problems.push(Problem { line, message });
    for (_, token) in tokens(text) {
        match token {
            Token::Context(value) => {
                if value.is_empty() {
                    report("`@context:` names no checkpoint file".to_string());
                } else if context.is_some() {
                    report(format!(
                        "a second @context (`{value}`) is ignored; the first one is used"
                    ));
                } else {
                    context = Some(value.to_string());
                }
            }
            Token::After(value) => parse_after(value, &mut after, &mut report),
            Token::Fragment(value) => match FragmentMark::parse(value) {
                Ok(_) if fragment.is_some() => report(format!(
                    "a second @fragment (`{value}`) is ignored; an item comes from one step"
                )),
                Ok(mark) => fragment = Some(mark),
                Err(message) => report(message),
            },
            Token::Word(word) => words.push(word),
        }
    }
    let (items, batches) = after.iter().fold((vec![], vec![]), |(mut i, mut b), p| {
        match p {
            Prerequisite::Item(n) => i.push(*n),
            Prerequisite::Batch(r) => b.push(*r),
        }
        (i, b)
    });
    Tokens {
        title: words.join(" "),
        context,
        after: items,
        after_batches: batches,
        fragment,
    }
}

/// A positive decimal number written with digits only.
fn number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Reads the comma-separated prerequisites of one `@after:` token into `after`: item
/// numbers of the same file, and `todo-N#K` items of batch files.
fn parse_after(value: &str, after: &mut Vec<Prerequisite>, report: &mut impl FnMut(String)) {
    if value.is_empty() {
        report("`@after:` names no items; write item numbers like `@after:1,2`".to_string());
        return;
    }
    for part in value.split(',') {
        match parse_part(part.trim(), value) {
            Ok(p) => after.push(p),
            Err(message) => report(message),
        }
    }
}

/// One part of the `@after:` value `value`, or what is wrong with it.
fn parse_part(part: &str, value: &str) -> Result<Prerequisite, String> {
    let batch = part
        .strip_prefix("todo-")
        .and_then(|r| r.split_once('#'))
        .and_then(|(b, i)| Some((number(b)?, number(i)?)));
    match (number(part), batch) {
        (Some(0), _) => Err("`@after:0`: items are numbered from 1".to_string()),
        (Some(n), _) => Ok(Prerequisite::Item(n)),
        (None, Some((batch, item))) if batch > 0 && item > 0 => {
            Ok(Prerequisite::Batch(BatchRef { batch, item }))
        }
        _ => Err(format!(
            "invalid @after value `{part}` in `@after:{value}`: expected item numbers like \
             `@after:1,2`, or an item of a batch file like `@after:todo-3#1`"
        )),
    }
}

/// An item line whose text starts at byte `text_start`, with every `@after:` token of its
/// text rewritten: each prerequisite the parser reads from the token ([`parse_after`])
/// becomes `renumber(prerequisite)`, and is dropped if that is `None`; malformed parts, which
/// the parser reports, are kept as written for their author to fix. A token left with
/// nothing is removed with the spaces before it. `None` if the text holds no `@after:`
/// token (then nothing needs rewriting).
pub(super) fn renumber_after(
    line: &str,
    text_start: usize,
    renumber: impl Fn(Prerequisite) -> Option<Prerequisite>,
) -> Option<String> {
    let text = line.get(text_start..)?;
    let mut out = String::with_capacity(line.len());
    let mut copied = 0;
    let mut found = false;
    for (range, token) in tokens(text) {
        let Token::After(value) = token else { continue };
        found = true;
        out.push_str(line.get(copied..text_start + range.start)?);
        copied = text_start + range.end;
        let kept: Vec<String> = value
            .split(',')
            .filter_map(|part| match parse_part(part.trim(), value) {
                Ok(p) => renumber(p).map(|p| p.to_string()),
                Err(_) => Some(part.to_string()).filter(|p| !p.trim().is_empty()),
            })
            .collect();
        if kept.is_empty() {
            out.truncate(out.trim_end_matches(' ').len());
        } else {
            out.push_str("@after:");
            out.push_str(&kept.join(","));
        }
    }
    if !found {
        return None;
    }
    out.push_str(line.get(copied..)?);
    Some(out)
}

/// Reports `@after` numbers naming the item itself or no item.
pub(super) fn check_after_references(items: &[TodoItem], problems: &mut Vec<Problem>) {
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

pub(super) fn is_note_line(text: &str) -> bool {
    text.trim_start_matches([' ', '\t'])
        .starts_with(NOTE_PREFIX)
}

pub(super) fn note_text(text: &str) -> String {
    let body = text.trim_start_matches([' ', '\t']);
    body.strip_prefix(NOTE_PREFIX)
        .unwrap_or(body)
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{item, parse};
    use super::*;

    #[test]
    fn tokens_are_whole_words_with_their_byte_ranges() {
        let text = "fix  @after:1,2\t@context:cp.md x@after:3 `@after:4` @after:";
        let found: Vec<(&str, Token<'_>)> = tokens(text)
            .map(|(range, token)| (text.get(range).unwrap_or("?"), token))
            .collect();
        assert_eq!(
            found,
            [
                ("fix", Token::Word("fix")),
                ("@after:1,2", Token::After("1,2")),
                ("@context:cp.md", Token::Context("cp.md")),
                ("x@after:3", Token::Word("x@after:3")),
                ("`@after:4`", Token::Word("`@after:4`")),
                ("@after:", Token::After("")),
            ]
        );
        assert_eq!(tokens(" \u{3000} ").count(), 0);
    }

    #[test]
    fn renumbering_rewrites_only_after_tokens() {
        let line = "- [ ] a @after:1,2 x@after:1 @after:3 tail";
        let map = |p: Prerequisite| match p {
            Prerequisite::Item(n) => (n != 1).then_some(Prerequisite::Item(n + 10)),
            other => Some(other),
        };
        assert_eq!(
            renumber_after(line, 6, map).as_deref(),
            Some("- [ ] a @after:12 x@after:1 @after:13 tail")
        );
        let gone = |_: Prerequisite| None;
        assert_eq!(
            renumber_after("- [ ] a  @after:1 tail @after:x", 6, gone).as_deref(),
            Some("- [ ] a tail @after:x"),
            "an emptied token goes with the spaces before it; a malformed one stays"
        );
        assert_eq!(
            renumber_after("- [ ] @after:1", 6, gone).as_deref(),
            Some("- [ ]"),
            "the line stays an item"
        );
        assert_eq!(renumber_after("- [ ] see x@after:1", 6, map), None);
        assert_eq!(
            renumber_after("- [ ] a @after:+1,2", 6, |p| match p {
                Prerequisite::Item(n) => Some(Prerequisite::Item(n + 1)),
                other => Some(other),
            })
            .as_deref(),
            Some("- [ ] a @after:+1,3"),
            "`+1` is no item number to the parser either: it is left for its author"
        );
    }

    #[test]
    fn batch_items_are_prerequisites_too() {
        let doc = parse("- [ ] a @after:todo-3#1,2\n- [ ] b\n- [ ] c @after:todo-0#1,todo-3\n");
        assert_eq!(item(&doc, 1).after, [2]);
        assert_eq!(
            item(&doc, 1).after_batches,
            [BatchRef { batch: 3, item: 1 }]
        );
        assert_eq!(BatchRef { batch: 3, item: 1 }.to_string(), "todo-3#1");
        assert!(item(&doc, 3).after_batches.is_empty());
        assert_eq!(doc.problems().len(), 2, "{:?}", doc.problems());
        assert!(
            doc.problems()[0]
                .message
                .contains("`todo-0#1` in `@after:todo-0#1,todo-3`")
        );
    }

    #[test]
    fn escaped_tokens_are_title_words_and_typed_text_reads_back() {
        for typed in [
            "Document the @context:cp-x.md syntax",
            "a \\@context:x and \\\\@context:y",
            "mail @bob \\@bob",
        ] {
            let doc = parse(&format!("- [ ] {} @context:cp-1.md\n", escape_title(typed)));
            assert!(doc.problems().is_empty(), "{typed}: {:?}", doc.problems());
            assert_eq!(item(&doc, 1).title, typed);
            assert_eq!(item(&doc, 1).context.as_deref(), Some("cp-1.md"));
            assert!(item(&doc, 1).after.is_empty());
        }
        assert_eq!(
            escape_title("B @after:1"),
            "B @after:1",
            "a prerequisite stays one"
        );
        assert_eq!(item(&parse("- [ ] \\@after:1\n"), 1).title, "@after:1");
    }

    #[test]
    fn fragment_marks_are_tokens_not_title_words() {
        let doc = parse(
            "- [ ] Tag 1.2 @after:1 @fragment:release#1/tag(notes)\n- [ ] b @fragment:x\n- [ ] c @fragment:a#1/b @fragment:a#2/b\n",
        );
        let tag = item(&doc, 1);
        assert_eq!(tag.title, "Tag 1.2");
        assert_eq!(tag.after, [1]);
        let mark = tag.fragment.as_ref().expect("mark");
        assert_eq!(mark.to_string(), "release#1/tag(notes)");
        assert_eq!(item(&doc, 2).fragment, None);
        assert_eq!(item(&doc, 2).title, "b");
        assert_eq!(
            item(&doc, 3).fragment.as_ref().map(|m| m.round),
            Some(1),
            "the first one counts"
        );
        let lines: Vec<usize> = doc.problems().iter().map(|p| p.line).collect();
        assert_eq!(lines, [1, 2, 3], "{:?}", doc.problems());
        assert!(doc.problems()[1].message.contains("NAME#ROUND/STEP"));
        assert!(doc.problems()[2].message.contains("second @fragment"));
    }

    #[test]
    fn rendered_text_reads_back_whatever_it_holds() {
        for typed in [
            "see @after:1 and @fragment:a#1/b",
            "\\@context:x @contextual",
        ] {
            let doc = parse(&format!("- [ ] {} @fragment:f#1/s\n", escape_text(typed)));
            assert!(doc.problems().is_empty(), "{typed}: {:?}", doc.problems());
            assert_eq!(item(&doc, 1).title, typed);
            assert!(item(&doc, 1).after.is_empty());
            assert_eq!(
                item(&doc, 1).fragment.as_ref().map(ToString::to_string),
                Some("f#1/s".to_owned())
            );
        }
        assert_eq!(escape_title("x @fragment:a#1/b"), "x \\@fragment:a#1/b");
    }

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
}
