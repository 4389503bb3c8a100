//! Task fragments (DESIGN §3 "Fragments", issue 33): a named chain of steps with
//! `{variables}`, kept in `<store>/fragments/NAME.toml`, that `runner apply NAME k=v…` appends
//! to the inbox as items linked by `@after`.
//!
//! ```toml
//! description = "Cut a release"          # optional: what `runner fragments` shows
//! [[steps]]
//! key = "notes"                          # letters, digits, `-`, `_`; unique in the file
//! subject = "Write release notes for {version}"   # the item's title: one line
//! [[steps]]
//! key = "tag"
//! subject = "Tag {version} after checking {branch}"
//! description = "optional continuation text"      # the item's continuation lines
//! after = ["notes"]                      # keys of steps that must complete first
//! ```
//!
//! `{name}` in `subject` and `description` is a variable; `{{` and `}}` are literal braces;
//! a value is inserted as given and never expanded again — the rules (and the parser,
//! [`Instruction`]) of a CSV batch's instruction. `{file:…}` and `{image:…}` have no meaning
//! here and are refused.
//!
//! This module is pure: text in, values out. The store reads the files
//! ([`crate::store::Store::fragment`]); `commands::fragments` writes the inbox.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::error::{Error, Result};
use crate::prompt::Instruction;
use crate::source::todo::is_step_key;

/// A parsed, checked fragment file.
#[derive(Debug, Clone)]
pub(crate) struct Fragment {
    /// Its name: the file's stem.
    pub name: String,
    /// The file.
    pub path: PathBuf,
    /// Its `description` (empty when it has none).
    pub description: String,
    /// Its steps, in file order.
    pub steps: Vec<Step>,
}

/// One `[[steps]]` table.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    /// Its `key`.
    pub key: String,
    /// Its `subject` template, as written.
    pub subject: String,
    /// Its `description` template, as written (empty when it has none).
    pub description: String,
    /// The keys of the steps it comes after.
    pub after: Vec<String>,
    /// The 1-based line of its `key` in the file.
    pub line: u64,
    subject_t: Instruction,
    description_t: Instruction,
}

/// A step rendered with the variables' values: what becomes an inbox item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RenderedStep {
    /// The step's key.
    pub key: String,
    /// The item's title.
    pub subject: String,
    /// The item's continuation text (empty when none).
    pub description: String,
    /// The keys of the steps it comes after.
    pub after: Vec<String>,
    /// The 1-based line of its `key` in the fragment file (for messages).
    pub line: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(default)]
    description: String,
    #[serde(default)]
    steps: Vec<StepDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepDoc {
    key: Spanned<String>,
    subject: Spanned<String>,
    #[serde(default)]
    description: Option<Spanned<String>>,
    #[serde(default)]
    after: Vec<Spanned<String>>,
}

impl Fragment {
    /// Parse and check the fragment `name` whose file `path` holds `text`.
    ///
    /// Errors (exit 2, naming the file and, where known, the line): bad TOML or an unknown
    /// key; no steps; a key that is not letters, digits, `-`, `_`, or is used twice; a
    /// subject that is empty or more than one line; an `after` naming no step or its own;
    /// steps that wait for each other; a placeholder that does not parse, is a file or image
    /// placeholder, or is not a variable name.
    pub(crate) fn parse(name: &str, path: &Path, text: &str) -> Result<Fragment> {
        let line_of = |span| Error::line_of(text, span);
        let at = |span: std::ops::Range<usize>, message: String| {
            Error::input_at(path, line_of(Some(span)), message)
        };
        let doc: FileDoc = toml::from_str(text)
            .map_err(|e| Error::input_at(path, line_of(e.span()), e.message().trim_end()))?;
        if doc.steps.is_empty() {
            return Err(Error::input_at(
                path,
                None,
                "the fragment has no steps; add `[[steps]]` tables with `key` and `subject`",
            ));
        }
        let mut lines: HashMap<String, u64> = HashMap::new();
        let mut steps = Vec::new();
        for s in &doc.steps {
            let key = s.key.get_ref();
            let line = line_of(Some(s.key.span())).unwrap_or(0);
            if !is_step_key(key) {
                return Err(at(
                    s.key.span(),
                    format!("step key `{key}`: use letters, digits, `-` and `_` only"),
                ));
            }
            if let Some(first) = lines.insert(key.clone(), line) {
                return Err(at(
                    s.key.span(),
                    format!("step key `{key}` is used twice (first on line {first})"),
                ));
            }
            let subject = s.subject.get_ref();
            if subject.trim().is_empty() || subject.trim().contains(['\n', '\r']) {
                return Err(at(
                    s.subject.span(),
                    format!(
                        "step `{key}`: `subject` is the item's title, one line of text; put \
                         more in `description`"
                    ),
                ));
            }
            let template = |value: &Spanned<String>, field: &str| -> Result<Instruction> {
                let first = line_of(Some(value.span())).unwrap_or(1);
                let t = Instruction::parse(path, first, value.get_ref())?;
                check_placeholders(&t, path, first, key, field)?;
                Ok(t)
            };
            let subject_t = template(&s.subject, "subject")?;
            let description_t = match &s.description {
                Some(d) => template(d, "description")?,
                None => Instruction::parse(path, line, "")?,
            };
            steps.push(Step {
                key: key.clone(),
                subject: subject.clone(),
                description: s
                    .description
                    .as_ref()
                    .map(|d| d.get_ref().clone())
                    .unwrap_or_default(),
                after: s.after.iter().map(|a| a.get_ref().clone()).collect(),
                line,
                subject_t,
                description_t,
            });
        }
        for (s, doc_step) in steps.iter().zip(&doc.steps) {
            for a in &doc_step.after {
                let named = a.get_ref();
                let problem = if named == &s.key {
                    format!("step `{}`: `after` names the step itself", s.key)
                } else if !lines.contains_key(named) {
                    format!(
                        "step `{}`: `after` names `{named}`, which is no step of this fragment{}; \
                         its steps are {}",
                        s.key,
                        crate::suggest::did_you_mean(named, steps.iter().map(|s| s.key.as_str())),
                        keys(&steps)
                    )
                } else {
                    continue;
                };
                return Err(at(a.span(), problem));
            }
        }
        let fragment = Fragment {
            name: name.to_owned(),
            path: path.to_owned(),
            description: doc.description.trim().to_owned(),
            steps,
        };
        if let Some(cycle) = fragment.cycle() {
            let first = fragment
                .steps
                .iter()
                .find(|s| cycle.contains(&s.key.as_str()));
            return Err(Error::input_at(
                path,
                first.map(|s| s.line),
                format!(
                    "the steps {} wait for each other (`after`): a cycle, so none could start",
                    cycle
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        Ok(fragment)
    }

    /// The variables the steps use, in first-use order.
    pub(crate) fn variables(&self) -> Vec<&str> {
        let mut seen = HashSet::new();
        self.steps
            .iter()
            .flat_map(|s| {
                let mut v = s.subject_t.placeholders();
                v.extend(s.description_t.placeholders());
                v
            })
            .filter(|v| seen.insert(*v))
            .collect()
    }

    /// The steps in the order they are applied: file order, except that a step comes after
    /// every step it names in `after` (a stable topological order).
    pub(crate) fn order(&self) -> Vec<&Step> {
        let mut placed: Vec<&Step> = Vec::with_capacity(self.steps.len());
        while placed.len() < self.steps.len() {
            let next = self.steps.iter().find(|s| {
                !placed.iter().any(|p| p.key == s.key)
                    && s.after.iter().all(|a| placed.iter().any(|p| &p.key == a))
            });
            // `parse` refused cycles; should one slip through, the rest keep file order.
            let Some(next) = next.or_else(|| {
                self.steps
                    .iter()
                    .find(|s| !placed.iter().any(|p| p.key == s.key))
            }) else {
                break;
            };
            placed.push(next);
        }
        placed
    }

    /// The steps of `order` rendered with `values` (`name`, `value` pairs).
    ///
    /// Errors (exit 2): a value for a name no step uses (with the nearest variable, and the
    /// list); a variable with no value (naming it, the fragment file and its line); a
    /// subject that renders empty.
    pub(crate) fn render(&self, values: &[(String, String)]) -> Result<Vec<RenderedStep>> {
        let variables = self.variables();
        if let Some((name, _)) = values
            .iter()
            .find(|(n, _)| !variables.contains(&n.as_str()))
        {
            return Err(Error::Unknown {
                what: "variable".into(),
                name: name.clone(),
                suggestion: crate::suggest::did_you_mean(name, variables.iter().copied()),
                hint: format!(
                    "fragment {} ({}) uses {}",
                    self.name,
                    self.path.display(),
                    match variables.is_empty() {
                        true => "no variables".to_owned(),
                        false => variables.join(", "),
                    }
                ),
            });
        }
        let given = |v: &str| values.iter().any(|(n, _)| n == v);
        if let Some(missing) = variables.iter().find(|v| !given(v)) {
            let line = self
                .steps
                .iter()
                .find(|s| {
                    s.subject_t.placeholders().contains(missing)
                        || s.description_t.placeholders().contains(missing)
                })
                .map(|s| s.line);
            return Err(Error::input_at(
                &self.path,
                line,
                format!(
                    "`{{{missing}}}` has no value; give it: `runner apply {} {}`",
                    self.name,
                    variables
                        .iter()
                        .map(|v| format!("{v}=…"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            ));
        }
        let headers: Vec<String> = values.iter().map(|(n, _)| n.clone()).collect();
        let cells: Vec<String> = values.iter().map(|(_, v)| v.clone()).collect();
        let mut out = Vec::new();
        for s in self.order() {
            let subject = s.subject_t.render(&headers, &cells).0;
            let subject = subject.split_whitespace().collect::<Vec<_>>().join(" ");
            if subject.is_empty() {
                return Err(Error::input_at(
                    &self.path,
                    Some(s.line),
                    format!(
                        "step `{}`: `subject` renders empty with these values; an item needs a title",
                        s.key
                    ),
                ));
            }
            out.push(RenderedStep {
                key: s.key.clone(),
                subject,
                description: s.description_t.render(&headers, &cells).0,
                after: s.after.clone(),
                line: s.line,
            });
        }
        Ok(out)
    }

    /// The keys of steps that wait for each other, if any do (a cycle and what waits on it).
    fn cycle(&self) -> Option<Vec<&str>> {
        let mut left: Vec<&Step> = self.steps.iter().collect();
        loop {
            let before = left.len();
            let keys: Vec<&str> = left.iter().map(|s| s.key.as_str()).collect();
            left.retain(|s| s.after.iter().any(|a| keys.contains(&a.as_str())));
            if left.is_empty() {
                return None;
            }
            if left.len() == before {
                return Some(left.iter().map(|s| s.key.as_str()).collect());
            }
        }
    }
}

/// The latest round of fragment `name` among the items of `docs` (the highest round of the
/// `@fragment:NAME#ROUND/…` marks), or `None` when it was never applied there.
pub(crate) fn latest_round<'a>(
    docs: impl IntoIterator<Item = &'a crate::source::todo::TodoDocument>,
    name: &str,
) -> Option<u32> {
    docs.into_iter()
        .flat_map(|d| d.items())
        .filter_map(|i| i.fragment.as_ref())
        .filter(|m| m.name == name)
        .map(|m| m.round)
        .max()
}

/// `a, b (after a)`: the steps with what each comes after, as `runner fragments` lists them.
pub(crate) fn keys(steps: &[Step]) -> String {
    steps
        .iter()
        .map(|s| match s.after.is_empty() {
            true => s.key.clone(),
            false => format!("{} (after {})", s.key, s.after.join(", ")),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuse `{file:…}`/`{image:…}` and placeholders that `runner apply NAME=VALUE` cannot name.
fn check_placeholders(
    t: &Instruction,
    path: &Path,
    line: u64,
    key: &str,
    field: &str,
) -> Result<()> {
    let bad = |message: String| Err(Error::input_at(path, Some(line), message));
    if t.inlines() {
        return bad(format!(
            "step `{key}`: `{field}` inlines a file (`{{file:…}}`, `{{image:…}}`), which a \
             fragment cannot; name the file in the text instead"
        ));
    }
    match t.placeholders().into_iter().find(|p| !is_variable(p)) {
        Some(p) => bad(format!(
            "step `{key}`: `{{{p}}}` in `{field}` is not a variable name (letters, digits, \
             `_`, `-`, `.`); write `{{{{` and `}}}}` for literal braces"
        )),
        None => Ok(()),
    }
}

/// Whether `name` can be a variable: ASCII letters, digits, `_`, `-`, `.`.
fn is_variable(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Read `runner apply`'s `NAME=VALUE` arguments, in the order given.
///
/// Errors (exit 2): an argument without `=` or with an empty name; a name given twice.
pub(crate) fn parse_assignments(args: &[String]) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for arg in args {
        let Some((name, value)) = arg.split_once('=').filter(|(n, _)| !n.is_empty()) else {
            return Err(Error::bad_value(
                "runner apply",
                arg,
                "must be NAME=VALUE, e.g. version=1.2",
            ));
        };
        if out.iter().any(|(n, _)| n == name) {
            return Err(Error::Usage(format!(
                "`{name}` is given twice; give each variable once"
            )));
        }
        if value.trim().is_empty() {
            // `version=` is a slip of the shell more often than a wish for blank text.
            return Err(Error::bad_value(
                "runner apply",
                arg,
                "gives the variable no value; write NAME=VALUE, e.g. version=1.2",
            ));
        }
        out.push((name.to_owned(), value.to_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RELEASE: &str = r#"description = "Cut a release"
[[steps]]
key = "tag"
subject = "Tag {version} after checking {branch}"
description = "optional continuation text"
after = ["notes"]
[[steps]]
key = "notes"
subject = "Write release notes for {version} ({{draft}})"
"#;

    fn parse(text: &str) -> Result<Fragment> {
        Fragment::parse("release", Path::new("S/fragments/release.toml"), text)
    }

    fn values(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn steps_render_in_dependency_order_with_their_variables() {
        let f = parse(RELEASE).expect("parses");
        assert_eq!(f.description, "Cut a release");
        assert_eq!(f.variables(), ["version", "branch"]);
        assert_eq!(keys(&f.steps), "tag (after notes), notes");
        let steps = f
            .render(&values(&[("branch", "main"), ("version", "1.2")]))
            .expect("renders");
        assert_eq!(
            steps,
            [
                RenderedStep {
                    key: "notes".into(),
                    subject: "Write release notes for 1.2 ({draft})".into(),
                    description: String::new(),
                    after: vec![],
                    line: 8,
                },
                RenderedStep {
                    key: "tag".into(),
                    subject: "Tag 1.2 after checking main".into(),
                    description: "optional continuation text".into(),
                    after: vec!["notes".into()],
                    line: 3,
                },
            ]
        );
        // A value is inserted as given, never expanded again.
        let steps = f
            .render(&values(&[("version", "{branch}"), ("branch", "x")]))
            .expect("renders");
        assert_eq!(steps[1].subject, "Tag {branch} after checking x");
    }

    #[test]
    fn a_missing_or_unknown_variable_is_refused_by_name() {
        let f = parse(RELEASE).expect("parses");
        let e = f
            .render(&values(&[("version", "1.2")]))
            .expect_err("missing");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "S/fragments/release.toml:3: `{branch}` has no value; give it: `runner apply release version=… branch=…`"
        );
        let e = f
            .render(&values(&[
                ("version", "1"),
                ("branch", "m"),
                ("verison", "2"),
            ]))
            .expect_err("unknown");
        assert_eq!(e.exit_code(), 2);
        let text = e.to_string();
        assert!(
            text.contains(
                "unknown variable `verison`; did you mean `version`?; fragment release ("
            ) && text.contains("release.toml) uses version, branch"),
            "{text}"
        );
    }

    #[test]
    fn bad_files_are_refused_with_their_line() {
        let cases = [
            ("steps = [", "release.toml:1:"),
            ("descripton = 'x'\n", "unknown field `descripton`"),
            ("description = 'x'\n", "has no steps"),
            (
                "[[steps]]\nkey = 'a b'\nsubject = 's'\n",
                ":2: step key `a b`",
            ),
            (
                "[[steps]]\nkey = 'a'\nsubject = 's'\n[[steps]]\nkey = 'a'\nsubject = 't'\n",
                ":5: step key `a` is used twice (first on line 2)",
            ),
            (
                "[[steps]]\nkey = 'notes'\nsubject = 's'\n[[steps]]\nkey = 'tag'\nsubject = 't'\nafter = ['note']\n",
                ":7: step `tag`: `after` names `note`, which is no step of this fragment; did you mean `notes`?",
            ),
            (
                "[[steps]]\nkey = 'a'\nsubject = 's'\nafter = ['a']\n",
                ":4: step `a`: `after` names the step itself",
            ),
            (
                "[[steps]]\nkey = 'a'\nsubject = 's'\nafter = ['b']\n[[steps]]\nkey = 'b'\nsubject = 't'\nafter = ['a']\n[[steps]]\nkey = 'c'\nsubject = 'u'\n",
                ":2: the steps `a`, `b` wait for each other",
            ),
            (
                "[[steps]]\nkey = 'a'\nsubject = ' '\n",
                ":3: step `a`: `subject` is the item's title",
            ),
            (
                "[[steps]]\nkey = 'a'\nsubject = \"x\\ny\"\n",
                "one line of text",
            ),
            (
                "[[steps]]\nkey = 'a'\nsubject = 'x {v'\n",
                ":3: a `{` is never closed",
            ),
            (
                "[[steps]]\nkey = 'a'\nsubject = 'x {file:v}'\n",
                "inlines a file",
            ),
            (
                "[[steps]]\nkey = 'a'\nsubject = 'x {a=b}'\n",
                "`{a=b}` in `subject` is not a variable name",
            ),
        ];
        for (text, expected) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.exit_code(), 2, "{text}");
            assert!(e.to_string().contains(expected), "{text}: {e}");
        }
    }

    #[test]
    fn assignments_are_name_equals_value_once_each() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_assignments(&args(&["version=1.2", "note=a=b"])).expect("ok"),
            values(&[("version", "1.2"), ("note", "a=b")])
        );
        for bad in [&["version"][..], &["=1"], &["a=1", "a=2"], &["empty="]] {
            let e = parse_assignments(&args(bad)).expect_err("refused");
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }
}
