//! The tokens of an item line (`@context:VALUE`, `@after:1,2`) and the runner note line
//! (`> runner: TEXT`) of an item's continuation.

use std::ops::Range;

use super::{Problem, TodoItem};

/// What a runner note line starts with, after its indentation.
pub(super) const NOTE_PREFIX: &str = "> runner:";

/// What the `@` tokens of an item's text say.
pub(super) struct Tokens {
    pub(super) title: String,
    pub(super) context: Option<String>,
    pub(super) after: Vec<u32>,
}

/// One word of an item's text, as the parser reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Token<'a> {
    /// `@context:VALUE`: the text after the colon, possibly empty.
    Context(&'a str),
    /// `@after:VALUE`: the text after the colon, possibly empty or malformed.
    After(&'a str),
    /// Any other word: part of the title.
    Word(&'a str),
}

/// The words of an item's text (the item line after its checkbox), split at whitespace as
/// [`str::split_whitespace`] splits, each with its byte range in `text` and what it is. A
/// word is a token only as a whole: `x@after:1` is a title word.
pub(super) fn tokens(text: &str) -> impl Iterator<Item = (Range<usize>, Token<'_>)> {
    let mut from = 0;
    std::iter::from_fn(move || {
        let rest = text.get(from..)?;
        let start = from + (rest.len() - rest.trim_start().len());
        let word = text.get(start..)?;
        let len = word.find(char::is_whitespace).unwrap_or(word.len());
        let word = word.get(..len).filter(|word| !word.is_empty())?;
        from = start + len;
        let token = if let Some(value) = word.strip_prefix("@context:") {
            Token::Context(value)
        } else if let Some(value) = word.strip_prefix("@after:") {
            Token::After(value)
        } else {
            Token::Word(word)
        };
        Some((start..from, token))
    })
}

/// Reads `@context:VALUE` and `@after:N,M` tokens; the remaining words are the title.
pub(super) fn parse_tokens(text: &str, line: usize, problems: &mut Vec<Problem>) -> Tokens {
    let mut words = Vec::new();
    let mut context: Option<String> = None;
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
            Token::Word(word) => words.push(word),
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

/// An item line whose text starts at byte `text_start`, with every `@after:` token of its
/// text rewritten: each number the parser reads from the token ([`parse_after`]) becomes
/// `renumber(number)`, and is dropped if that is `None` (malformed parts, which the parser
/// ignores, are dropped too). A token left with no number is removed with the spaces before
/// it. `None` if the text holds no `@after:` token (then nothing needs rewriting).
pub(super) fn renumber_after(
    line: &str,
    text_start: usize,
    renumber: impl Fn(u32) -> Option<u32>,
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
        let mut numbers = Vec::new();
        parse_after(value, &mut numbers, &mut |_| {});
        let kept: Vec<String> = numbers
            .into_iter()
            .filter_map(&renumber)
            .map(|number| number.to_string())
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
        let map = |n: u32| (n != 1).then_some(n + 10);
        assert_eq!(
            renumber_after(line, 6, map).as_deref(),
            Some("- [ ] a @after:12 x@after:1 @after:13 tail")
        );
        let gone = |_: u32| None;
        assert_eq!(
            renumber_after("- [ ] a  @after:1 tail @after:x", 6, gone).as_deref(),
            Some("- [ ] a tail"),
            "an emptied token goes with the spaces before it"
        );
        assert_eq!(
            renumber_after("- [ ] @after:1", 6, gone).as_deref(),
            Some("- [ ]"),
            "the line stays an item"
        );
        assert_eq!(renumber_after("- [ ] see x@after:1", 6, map), None);
        assert_eq!(
            renumber_after("- [ ] a @after:+1,2", 6, Some).as_deref(),
            Some("- [ ] a @after:2"),
            "`+1` is no item number to the parser either"
        );
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
