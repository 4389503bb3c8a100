//! The tokens of an item line (`@context:VALUE`, `@after:1,2`) and the runner note line
//! (`> runner: TEXT`) of an item's continuation.

use super::{Problem, TodoItem};

/// What a runner note line starts with, after its indentation.
pub(super) const NOTE_PREFIX: &str = "> runner:";

/// What the `@` tokens of an item's text say.
pub(super) struct Tokens {
    pub(super) title: String,
    pub(super) context: Option<String>,
    pub(super) after: Vec<u32>,
}

/// Reads `@context:VALUE` and `@after:N,M` tokens; the remaining words are the title.
pub(super) fn parse_tokens(text: &str, line: usize, problems: &mut Vec<Problem>) -> Tokens {
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
