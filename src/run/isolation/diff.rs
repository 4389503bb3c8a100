//! An item's diff as the HTML report and the live page show it (issue 57): what its branch
//! changes, read with `git diff` from the repository the team's `team.json` records. A
//! merged item's diff is what its merge brought into the target (`MERGE^1 MERGE`); an item
//! whose branch is still there (awaiting review, failed in the queue, or never merged) is
//! shown against where it left the target (`TARGET...BRANCH`). At most [`DIFF_SHOWN`] bytes
//! are read, cut at a line's end with a marker that says how to see the rest.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::worktree::{IsolationRecord, git_sync};
use crate::run::record::outcome::Outcome;

/// Most bytes of a diff shown.
pub(crate) const DIFF_SHOWN: usize = 64 << 10;

/// One item's diff, bounded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct ItemDiff {
    /// The diff's text (invalid UTF-8 replaced), at most [`DIFF_SHOWN`] bytes.
    pub text: String,
    /// When the diff was longer: what says so and how to see it whole.
    pub cut: Option<String>,
    /// Lines added and removed in the part shown (`+3 −1`).
    pub counts: String,
}

/// Where a team's diffs are read: its repository and the branch its items merge into.
#[derive(Debug, Clone)]
pub(crate) struct Diffs {
    repo: PathBuf,
    /// The target branch (`refs/heads/…`), else the run's base commit.
    target: String,
}

impl Diffs {
    /// The diffs of the team in `workspace`: `None` when it ran without worktrees (its
    /// `team.json` records no isolation) or the repository is gone.
    pub(crate) fn of_team(workspace: &Path) -> Option<Diffs> {
        let text = std::fs::read_to_string(workspace.join("team.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        let rec = serde_json::from_value::<IsolationRecord>(v.get("isolation")?.clone()).ok()?;
        if !rec.repo.is_dir() {
            return None;
        }
        let target = rec
            .base_branch
            .map_or(rec.base, |b| format!("refs/heads/{b}"));
        Some(Diffs {
            repo: rec.repo,
            target,
        })
    }

    /// The diff of `o`: its merge's when it merged, else its branch's while the branch is
    /// there; `None` for an item with neither (no worktree, a rejected branch).
    pub(crate) fn of(&self, o: &Outcome) -> Option<ItemDiff> {
        let (args, whole) = match (&o.merged, &o.branch) {
            (Some(merge), _) => (
                vec![format!("{merge}^1"), merge.clone()],
                format!("git show -m --first-parent {merge}"),
            ),
            (None, Some(branch)) => {
                let tip = format!("refs/heads/{branch}");
                if !git_sync(&self.repo, &["rev-parse", "--verify", "--quiet", &tip], &[]).ok {
                    return None;
                }
                let range = format!("{}...{tip}", self.target);
                (vec![range.clone()], format!("git diff {range}"))
            }
            (None, None) => return None,
        };
        let (bytes, more) = self.read(&args)?;
        Some(bounded(&bytes, more, &whole))
    }

    /// `git diff ARGS` in the repository, at most [`DIFF_SHOWN`] bytes of it, and whether
    /// there was more (the rest is not read: git is ended).
    fn read(&self, args: &[String]) -> Option<(Vec<u8>, bool)> {
        let mut child = Command::new("git")
            .args([
                "-c",
                "core.fsmonitor=false",
                "-c",
                "core.hooksPath=/dev/null",
            ])
            .args(["diff", "--no-color", "--no-ext-diff", "--no-textconv"])
            .args(args)
            .current_dir(&self.repo)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut bytes = Vec::new();
        let read = child
            .stdout
            .take()
            .map(|out| out.take(DIFF_SHOWN as u64 + 1).read_to_end(&mut bytes));
        let more = bytes.len() > DIFF_SHOWN;
        if more {
            let _ = child.kill();
        }
        let status = child.wait().ok()?;
        match (read, more || status.success()) {
            (Some(Ok(_)), true) => Some((bytes, more)),
            _ => None,
        }
    }
}

/// `bytes` of a diff as shown: whole, or (`more`) cut at the last line's end within
/// [`DIFF_SHOWN`] with a marker naming `whole`, the command that shows all of it.
fn bounded(bytes: &[u8], more: bool, whole: &str) -> ItemDiff {
    let mut shown = &bytes[..bytes.len().min(DIFF_SHOWN)];
    if more && let Some(end) = shown.iter().rposition(|b| *b == b'\n') {
        shown = &shown[..=end];
    }
    let text = String::from_utf8_lossy(shown).into_owned();
    let (mut added, mut removed) = (0, 0);
    for line in text.lines() {
        match line.as_bytes().first() {
            Some(b'+') if !line.starts_with("+++ ") => added += 1,
            Some(b'-') if !line.starts_with("--- ") => removed += 1,
            _ => {}
        }
    }
    let cut = more.then(|| {
        format!(
            "… the diff is cut here, after {} KiB; `{whole}` in the repository shows all of it",
            DIFF_SHOWN >> 10
        )
    });
    ItemDiff {
        text,
        cut,
        counts: format!("+{added} −{removed}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_diff_is_cut_at_a_lines_end_with_a_marker_and_a_short_one_is_whole() {
        let line = "+0123456789abcdef\n";
        let long = line.repeat(DIFF_SHOWN / line.len() + 10);
        let d = bounded(long.as_bytes(), true, "git diff main...b");
        assert!(
            d.text.len() <= DIFF_SHOWN && d.text.ends_with('\n'),
            "{}",
            d.text.len()
        );
        assert!(d.text.lines().all(|l| l == line.trim_end()));
        let marker = d.cut.expect("a marker");
        assert!(
            marker.contains("cut") && marker.contains("`git diff main...b`"),
            "{marker}"
        );
        let d = bounded(b"--- a/x\n+++ b/x\n-old\n+new\n+more\n", false, "");
        assert_eq!((d.cut, d.counts.as_str()), (None, "+2 −1"));
    }
}
