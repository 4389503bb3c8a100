//! The `@fragment:` token: which fragment, round and step an item was made from
//! (`runner apply`, DESIGN §3 "Fragments").
//!
//! ```text
//! @fragment:release#2/tag(notes,build)
//!           ^name   ^round ^step ^the step's prerequisites, as applied (optional)
//! ```
//!
//! The prerequisites are the step's `after` keys when the round was applied. They outlive the
//! `@after:` links, which `runner resolve` drops once a prerequisite is met, so `runner reset`
//! and `runner clean --completed` can still tell what follows what within a round.

use std::fmt;

/// The value of an `@fragment:` token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct FragmentMark {
    /// The fragment's name (its file `<store>/fragments/NAME.toml`).
    pub name: String,
    /// Which application of the fragment (1, 2, …: one more than the latest in the store).
    pub round: u32,
    /// The step's `key`.
    pub step: String,
    /// The keys of the steps this one comes after, as applied.
    pub after: Vec<String>,
}

/// Whether `word` is a fragment name: ASCII letters, digits, `_`, `-` and `.`, not starting
/// with `.` or `-` (so it is a plain file name and a token word).
#[must_use]
pub(crate) fn is_fragment_name(word: &str) -> bool {
    !word.starts_with(['.', '-'])
        && !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Whether `word` is a step key: ASCII letters, digits, `_` and `-`.
#[must_use]
pub(crate) fn is_step_key(word: &str) -> bool {
    !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

impl FragmentMark {
    /// Reads the value of an `@fragment:` token (the text after the colon).
    ///
    /// # Errors
    ///
    /// What is wrong with it, as a sentence naming the expected form.
    pub(crate) fn parse(value: &str) -> Result<FragmentMark, String> {
        let bad = || {
            format!(
                "invalid @fragment value `{value}`: expected NAME#ROUND/STEP, like \
                 `@fragment:release#1/tag` (optionally followed by the step's prerequisites, \
                 `(notes,build)`)"
            )
        };
        let (name, rest) = value.split_once('#').ok_or_else(bad)?;
        let (round, rest) = rest.split_once('/').ok_or_else(bad)?;
        let (step, after) = match rest.split_once('(') {
            None => (rest, Vec::new()),
            Some((step, list)) => {
                let list = list.strip_suffix(')').ok_or_else(bad)?;
                let keys: Vec<String> = list.split(',').map(str::to_owned).collect();
                if !keys.iter().all(|k| is_step_key(k)) {
                    return Err(bad());
                }
                (step, keys)
            }
        };
        let round = match round.parse::<u32>() {
            Ok(r) if r > 0 && round.bytes().all(|b| b.is_ascii_digit()) => r,
            _ => return Err(bad()),
        };
        if !is_fragment_name(name) || !is_step_key(step) {
            return Err(bad());
        }
        Ok(FragmentMark {
            name: name.to_owned(),
            round,
            step: step.to_owned(),
            after,
        })
    }

    /// `NAME#ROUND/STEP`, without the prerequisites: how messages name the item's step.
    #[must_use]
    pub(crate) fn short(&self) -> String {
        format!("{}#{}/{}", self.name, self.round, self.step)
    }
}

impl fmt::Display for FragmentMark {
    /// The token's value as written: `NAME#ROUND/STEP`, then `(A,B)` when the step has
    /// prerequisites.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.short())?;
        if !self.after.is_empty() {
            write!(f, "({})", self.after.join(","))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_read_back_as_written() {
        for text in [
            "release#1/notes",
            "rel.v2#12/tag(notes)",
            "a_b#3/c-d(x,y_z)",
        ] {
            let mark = FragmentMark::parse(text).expect(text);
            assert_eq!(mark.to_string(), text);
        }
        let mark = FragmentMark::parse("release#2/tag(notes,build)").expect("parses");
        assert_eq!(
            (mark.name.as_str(), mark.round, mark.step.as_str()),
            ("release", 2, "tag")
        );
        assert_eq!(mark.after, ["notes", "build"]);
        assert_eq!(mark.short(), "release#2/tag");
    }

    #[test]
    fn malformed_marks_say_the_form() {
        for text in [
            "",
            "release",
            "release#1",
            "release#0/a",
            "release#+1/a",
            "release#x/a",
            "#1/a",
            ".hidden#1/a",
            "../x#1/a",
            "release#1/",
            "release#1/a(b",
            "release#1/a()",
            "release#1/a(b,)",
            "release#1/a b",
        ] {
            let e = FragmentMark::parse(text).expect_err(text);
            assert!(e.contains("NAME#ROUND/STEP"), "{text}: {e}");
        }
    }
}
