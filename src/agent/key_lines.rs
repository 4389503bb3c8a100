//! Where each key of a runner definition is written: the 1-based line of a key path such as
//! `result.cost_usd` or `failure.patterns[1].regex`, read from the TOML parser's spans (the
//! `toml` crate's `DeTable`), so a message about a key can name its line.

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A parsed TOML document and its text, for looking up the line of a key.
pub(crate) struct KeyLines<'t> {
    text: &'t str,
    doc: DeTable<'t>,
}

impl<'t> KeyLines<'t> {
    /// The lines of `doc`, parsed from `text`.
    pub(crate) fn new(text: &'t str, doc: DeTable<'t>) -> KeyLines<'t> {
        KeyLines { text, doc }
    }

    /// The document's top-level table.
    pub(crate) fn root(&self) -> &DeTable<'t> {
        &self.doc
    }

    /// The 1-based line holding byte `offset` of the text.
    pub(crate) fn line_at(&self, offset: usize) -> u64 {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|b| **b == b'\n')
            .count() as u64
            + 1
    }

    /// The line of `path` — keys joined by `.`, array elements as `[N]` (serde's path form,
    /// `failure.patterns[1].regex`) — or of the deepest part of it that exists (its table, its
    /// array); `None` when even its first key is absent.
    pub(crate) fn line(&self, path: &str) -> Option<u64> {
        let mut at: Option<usize> = None;
        let mut table = Some(&self.doc);
        let mut array: Option<&[Spanned<DeValue<'t>>]> = None;
        for part in segments(path) {
            let value = match part {
                Segment::Key(key) => {
                    let found = table.and_then(|t| t.iter().find(|(k, _)| &**k.get_ref() == key));
                    let Some((k, v)) = found else {
                        break;
                    };
                    at = Some(k.span().start);
                    v
                }
                Segment::Index(i) => {
                    let Some(v) = array.and_then(|a| a.get(i)) else {
                        break;
                    };
                    at = Some(v.span().start);
                    v
                }
            };
            (table, array) = match value.get_ref() {
                DeValue::Table(t) => (Some(t), None),
                DeValue::Array(a) => (None, Some(&a[..])),
                _ => (None, None),
            };
            if table.is_none() && array.is_none() {
                break;
            }
        }
        at.map(|o| self.line_at(o))
    }
}

enum Segment<'p> {
    Key(&'p str),
    Index(usize),
}

/// `a.b[2].c` → `a`, `b`, `2`, `c`.
fn segments(path: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, indexes) = part.split_once('[').unwrap_or((part, ""));
        if !key.is_empty() {
            out.push(Segment::Key(key));
        }
        for index in indexes.split('[') {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                out.push(Segment::Index(i));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_tables_and_array_elements_have_their_lines() {
        let text = "name = 'x'\nargs = [\n  '-p',\n  '{nope}',\n]\n[result]\nturns = '/t'\n\
                    [failure]\npatterns = [\n  { kind = 'quota', regex = 'q' },\n  { kind = 'auth', regex = '(' },\n]\n";
        let doc = DeTable::parse(text).expect("valid").into_inner();
        let k = KeyLines::new(text, doc);
        assert_eq!(k.line("name"), Some(1));
        assert_eq!(k.line("args[1]"), Some(4));
        assert_eq!(k.line("result"), Some(6));
        assert_eq!(k.line("result.turns"), Some(7));
        assert_eq!(k.line("failure.patterns[1].regex"), Some(11));
        assert_eq!(k.line("failure.patterns[7]"), Some(9), "the array's line");
        assert_eq!(
            k.line("result.nope"),
            Some(6),
            "a missing key: its table's line"
        );
        assert_eq!(k.line("nope"), None);
    }
}
