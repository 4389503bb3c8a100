//! The YAML frontmatter of a batch file (`---` ... `---`): finding it, reading a top-level
//! `key: value`, and rewriting one value in place with the quoting style it had.

use std::fmt::Write as _;

use super::lines::{Line, insert_lines};
use super::scan::count_blanks;
use super::{Problem, TodoDocument};

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
pub(super) enum QuoteStyle {
    Plain,
    Single,
    Double,
}

/// Finds the closing `---` of a frontmatter that opens on the first line.
pub(super) fn find_frontmatter(lines: &[Line], problems: &mut Vec<Problem>) -> Option<usize> {
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

impl TodoDocument {
    /// Whether the document starts with a closed `---` ... `---` frontmatter.
    #[must_use]
    #[cfg(test)]
    pub(crate) fn has_frontmatter(&self) -> bool {
        self.frontmatter_close.is_some()
    }

    /// The value of a top-level `key: value` line of the frontmatter, with quotes removed
    /// (`"..."` with its escapes, `'...'`) and, for an unquoted value, a trailing ` # comment`
    /// dropped. `Some("")` for `key:` without a value; `None` if there is no frontmatter or
    /// no such key. Keys match exactly (case-sensitive); the first matching line wins.
    #[must_use]
    pub(crate) fn frontmatter_value(&self, key: &str) -> Option<String> {
        self.frontmatter_entry(key).map(|entry| entry.value)
    }

    /// Sets a frontmatter key. If the key has a line, only its value is replaced (keeping
    /// the quote style where the new value allows it, and any comment); otherwise a line
    /// `key: value` is inserted before the closing `---`. Values that YAML would misread
    /// unquoted are written double-quoted. Returns `false`, changing nothing, if the
    /// document has no frontmatter; `true` otherwise.
    pub(crate) fn set_frontmatter_value(&mut self, key: &str, value: &str) -> bool {
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
pub(super) fn yaml_scalar(value: &str, style: QuoteStyle) -> String {
    match style {
        QuoteStyle::Plain if is_plain_safe(value) => value.to_string(),
        QuoteStyle::Single if !value.chars().any(char::is_control) => {
            format!("'{}'", value.replace('\'', "''"))
        }
        _ => double_quoted(value),
    }
}

pub(super) fn double_quoted(value: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::super::test_support::{SEED_INBOX, item, parse, titles};

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
}
