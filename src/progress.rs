//! What a teammate says while it works (DESIGN §3, `RUNNER_PROGRESS`): each JSON line it
//! appends to the progress file in its `work/` folder, e.g.
//!
//! ```json
//! {"status":"in_progress","progress":"60%","discoveries":["the parser drops tabs"],"files":["src/a.rs"]}
//! {"status":"blocked","blocker":"needs the staging key","needs":"user"}
//! {"subtask":{"title":"Handle tabs in the parser","details":"seen in a.rs line 40"}}
//! ```
//!
//! A `subtask` is a follow-up the teammate proposes: in a todo batch it lands in the inbox,
//! after the teammate's own item, for a person to confirm like any other item
//! ([`crate::sink::proposals`]); it never starts by itself.
//!
//! The fields are those of the task-management protocol's progress updates (seed
//! `task-management-protocol.md`: claim, discoveries, blockers, hand-off). Every field is
//! optional, but a line must say something; unknown fields are refused, so a typo is a
//! warning rather than a silently lost word. A line that is not valid is ignored with a
//! warning and never ends the attempt: the report, not the progress file, decides the item.

use serde::{Deserialize, Serialize};

/// The progress file's name in the teammate's `work/` folder.
pub(crate) const FILE_NAME: &str = "progress.jsonl";

/// Longest line read, bytes (a longer one is ignored with a warning).
pub(crate) const MAX_LINE_BYTES: usize = 8 * 1024;

/// Most bytes of one attempt's progress file read; what follows is ignored, with one warning.
pub(crate) const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Most entries of `discoveries` and of `files`.
pub(crate) const MAX_ENTRIES: usize = 20;

/// Longest `progress` text, characters (`60%`, `3 of 5 files`).
pub(crate) const MAX_PROGRESS_CHARS: usize = 200;

/// Longest `blocker`, discovery or file entry, characters.
pub(crate) const MAX_TEXT_CHARS: usize = 1000;

/// The fields a progress line may have.
const FIELDS: [&str; 7] = [
    "status",
    "progress",
    "discoveries",
    "files",
    "blocker",
    "needs",
    "subtask",
];

/// Longest subtask title, characters (an inbox item's title line).
pub(crate) const MAX_TITLE_CHARS: usize = 200;

/// Longest subtask details, characters.
pub(crate) const MAX_DETAILS_CHARS: usize = 4000;

/// A follow-up a teammate proposes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Subtask {
    /// One line: what to do.
    pub title: String,
    /// More about it (the item's continuation lines in the inbox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
}

/// Where a teammate is, by its own word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum WorkState {
    /// Working.
    InProgress,
    /// Stuck until someone acts (`blocker` says on what, `needs` on whom).
    Blocked,
}

/// Whom a blocked teammate waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Needs {
    /// A person.
    User,
    /// Another teammate's work.
    OtherAgent,
    /// Something outside the team (a service, an approval).
    External,
}

/// One progress line, as read and journaled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Progress {
    /// `in_progress` or `blocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<WorkState>,
    /// How far, in the teammate's words (`60%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// What it found that others should know.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discoveries: Vec<String>,
    /// Files it is working on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// What stops it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<String>,
    /// Whom it waits for: `user`, `other-agent` or `external`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs: Option<Needs>,
    /// A follow-up it proposes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtask: Option<Subtask>,
}

impl Progress {
    /// Read one line of the progress file (without its newline).
    ///
    /// Errors: a one-line reason to warn with — not JSON, a field unknown or of the wrong
    /// type, nothing said, or over a bound ([`MAX_ENTRIES`], [`MAX_PROGRESS_CHARS`],
    /// [`MAX_TEXT_CHARS`]).
    pub(crate) fn parse(line: &str) -> Result<Progress, String> {
        let not_one = |e: serde_json::Error| {
            format!(
                "not a progress line ({e}); write one JSON object per line, e.g. {{\"status\":\"in_progress\",\"progress\":\"60%\"}}"
            )
        };
        let value: serde_json::Value = serde_json::from_str(line).map_err(not_one)?;
        // Checked here, not by serde: the journaled event carries these fields flattened
        // beside its own, where unknown fields must pass.
        if let Some(unknown) = value
            .as_object()
            .and_then(|o| o.keys().find(|k| !FIELDS.contains(&k.as_str())))
        {
            return Err(format!(
                "unknown field `{unknown}`, expected one of {}",
                FIELDS.join(", ")
            ));
        }
        let p: Progress = serde_json::from_value(value).map_err(not_one)?;
        if p == Progress::default() {
            return Err("says nothing: give at least one of status, progress, discoveries, files, blocker, needs, subtask".into());
        }
        let long = |what: &str, text: &str, max: usize| {
            (text.chars().count() > max).then(|| format!("{what} is over {max} characters"))
        };
        let mut problems = Vec::new();
        if let Some(t) = &p.progress {
            problems.extend(long("progress", t, MAX_PROGRESS_CHARS));
        }
        if let Some(t) = &p.blocker {
            problems.extend(long("blocker", t, MAX_TEXT_CHARS));
        }
        for (what, list) in [("discoveries", &p.discoveries), ("files", &p.files)] {
            if list.len() > MAX_ENTRIES {
                problems.push(format!(
                    "{what} has {} entries, at most {MAX_ENTRIES}",
                    list.len()
                ));
            }
            problems.extend(list.iter().find_map(|t| long(what, t, MAX_TEXT_CHARS)));
        }
        if let Some(s) = &p.subtask {
            if s.title.trim().is_empty() || s.title.contains(['\n', '\r']) {
                problems.push("subtask.title must be one line of text".into());
            }
            problems.extend(long("subtask.title", &s.title, MAX_TITLE_CHARS));
            if let Some(d) = &s.details {
                problems.extend(long("subtask.details", d, MAX_DETAILS_CHARS));
            }
        }
        match problems.first() {
            Some(first) => Err(first.clone()),
            None => Ok(p),
        }
    }

    /// One line for `runner status`: `blocked (needs user): needs the staging key`,
    /// `60%: the parser drops tabs` (line breaks in the teammate's text become spaces).
    pub(crate) fn brief(&self) -> String {
        let mut parts = Vec::new();
        if self.status == Some(WorkState::Blocked) {
            let needs = self.needs.map(|n| match n {
                Needs::User => " (needs user)",
                Needs::OtherAgent => " (needs other-agent)",
                Needs::External => " (needs external)",
            });
            parts.push(format!("blocked{}", needs.unwrap_or_default()));
        }
        if let Some(p) = &self.progress {
            parts.push(p.clone());
        }
        let head = parts.join(" ");
        let proposal = self
            .subtask
            .as_ref()
            .map(|s| format!("proposes: {}", s.title));
        let tail = self
            .blocker
            .as_ref()
            .or(self.discoveries.last())
            .or(self.files.last())
            .or(proposal.as_ref());
        let line = match (head.is_empty(), tail) {
            (true, Some(t)) => t.clone(),
            (false, Some(t)) => format!("{head}: {t}"),
            (_, None) => head,
        };
        line.replace(['\n', '\r', '\t'], " ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_of_the_protocol_reads_back_whole() {
        let p = Progress::parse(
            r#"{"status":"blocked","progress":"60%","discoveries":["tabs dropped"],"files":["a.rs"],"blocker":"no staging key","needs":"user"}"#,
        )
        .expect("valid");
        assert_eq!(p.status, Some(WorkState::Blocked));
        assert_eq!(p.needs, Some(Needs::User));
        assert_eq!(p.brief(), "blocked (needs user) 60%: no staging key");
        let again = serde_json::to_string(&p).expect("json");
        assert_eq!(Progress::parse(&again), Ok(p));
        assert_eq!(
            Progress::parse(r#"{"progress":"2 of 5","discoveries":["x"]}"#)
                .expect("valid")
                .brief(),
            "2 of 5: x"
        );
        assert_eq!(
            Progress::parse(r#"{"needs":"other-agent","status":"blocked"}"#)
                .expect("valid")
                .brief(),
            "blocked (needs other-agent)"
        );
    }

    #[test]
    fn a_bad_line_says_why_it_is_ignored() {
        for (line, why) in [
            ("working on it", "not a progress line"),
            (r#"{"status":"done"}"#, "not a progress line"),
            (r#"{"staus":"blocked"}"#, "unknown field `staus`"),
            (r#"{"needs":"boss"}"#, "not a progress line"),
            ("{}", "says nothing"),
            (r#"{"files":"a.rs"}"#, "not a progress line"),
        ] {
            let e = Progress::parse(line).expect_err(line);
            assert!(e.contains(why), "{line}: {e}");
        }
        let many = format!(r#"{{"files":{:?}}}"#, vec!["a"; MAX_ENTRIES + 1]);
        assert!(
            Progress::parse(&many)
                .expect_err("many")
                .contains("at most 20")
        );
        let long = format!(r#"{{"progress":"{}"}}"#, "x".repeat(MAX_PROGRESS_CHARS + 1));
        assert!(
            Progress::parse(&long)
                .expect_err("long")
                .contains("over 200")
        );
        for (line, why) in [
            (r#"{"subtask":{"title":""}}"#, "one line"),
            (r#"{"subtask":{"title":"a\nb"}}"#, "one line"),
            (
                r#"{"subtask":{"title":"a","due":"now"}}"#,
                "unknown field `due`",
            ),
            (r#"{"subtask":"fix it"}"#, "not a progress line"),
        ] {
            let e = Progress::parse(line).expect_err(line);
            assert!(e.contains(why), "{line}: {e}");
        }
    }

    #[test]
    fn a_proposed_subtask_reads_back() {
        let p = Progress::parse(r#"{"subtask":{"title":"Handle tabs","details":"a.rs:40"}}"#)
            .expect("valid");
        assert_eq!(p.brief(), "proposes: Handle tabs");
        let s = p.subtask.expect("subtask");
        assert_eq!(
            (s.title.as_str(), s.details.as_deref()),
            ("Handle tabs", Some("a.rs:40"))
        );
    }
}
