//! `runner skill install`: the todo skill (`skills/todo/SKILL.md`) where an agent finds it —
//! Claude Code's skills folder (`.claude/skills/todo/SKILL.md` in the project or in HOME),
//! or for Codex a section of `AGENTS.md` (the project's, or `~/.codex/AGENTS.md`), added
//! once and updated in place, never duplicated. A file the runner did not write is never
//! overwritten.

use std::path::{Path, PathBuf};

use crate::cli::{SkillAgent, SkillInstallArgs};
use crate::error::{Error, Result};

/// The skill as shipped (Claude Code's format: frontmatter `name`, `description`).
pub(crate) const TODO_SKILL: &str = include_str!("../../skills/todo/SKILL.md");

/// What marks a file (or an `AGENTS.md` section) as written by this command.
const MARK: &str = "Written by `runner skill install`";
const BEGIN: &str = "<!-- runner todo skill: begin (written by `runner skill install`) -->";
const END: &str = "<!-- runner todo skill: end -->";

/// Install it; 0 when done (or already up to date).
///
/// Errors: `--project` outside a git repository, no HOME for `--global`, a file there that
/// the runner did not write (exit 2, nothing changed), or it cannot be written (exit 3).
pub(crate) fn install(args: SkillInstallArgs) -> Result<i32> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::Environment(format!("cannot read the current directory: {e}")))?;
    let root = match (args.global, crate::store::git_root(&cwd)) {
        (true, _) => home()?,
        (false, Some(repo)) => repo,
        (false, None) if args.project => {
            return Err(Error::Usage(format!(
                "--project: {} is not in a git repository; use --global for your own skills",
                cwd.display()
            )));
        }
        (false, None) => home()?,
    };
    let (path, text) = match args.agent() {
        SkillAgent::Claude => {
            let path = root.join(".claude/skills/todo/SKILL.md");
            let old = read(&path)?;
            if let Some(old) = &old
                && !old.contains(MARK)
            {
                return Err(Error::Usage(format!(
                    "{} exists and was not written by `runner skill install`; move it away (or rename your skill) and run this again",
                    path.display()
                )));
            }
            (path, TODO_SKILL.to_owned())
        }
        SkillAgent::Codex => {
            let path = match args.global {
                true => root.join(".codex/AGENTS.md"),
                false => root.join("AGENTS.md"),
            };
            let old = read(&path)?.unwrap_or_default();
            (path.clone(), agents_md(&old, &path)?)
        }
    };
    if read(&path)?.as_deref() == Some(text.as_str()) {
        crate::ui::outln(format_args!(
            "The todo skill is up to date in {}",
            path.display()
        ));
        return Ok(0);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
    }
    crate::fsutil::write_atomic(&path, text.as_bytes())?;
    crate::ui::outln(format_args!(
        "Installed the todo skill in {}",
        path.display()
    ));
    Ok(0)
}

/// `old` (an `AGENTS.md`) with the skill's section added at its end, or the section it
/// already has replaced.
///
/// Errors: a begin mark without its end (a hand edit): nothing is guessed (exit 2).
fn agents_md(old: &str, path: &Path) -> Result<String> {
    // The skill without its frontmatter: AGENTS.md is plain Markdown.
    let body = TODO_SKILL
        .strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n"))
        .map_or(TODO_SKILL, |(_, body)| body)
        .trim();
    let section = format!("{BEGIN}\n{body}\n{END}\n");
    match (old.find(BEGIN), old.find(END)) {
        (Some(b), Some(e)) if e > b => Ok(format!(
            "{}{section}{}",
            &old[..b],
            old[e + END.len()..].trim_start_matches('\n')
        )),
        (None, None) => {
            let sep = match old.trim_end().is_empty() {
                true => "",
                false => "\n\n",
            };
            Ok(format!("{}{sep}{section}", old.trim_end()))
        }
        _ => Err(Error::Usage(format!(
            "{}: the todo skill's section is cut (one of its two marks is missing); mend or remove it and run this again",
            path.display()
        ))),
    }
}

fn read(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::read_input("it", path, e)),
    }
}

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| Error::Environment("HOME is not set: no place for --global".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_skill_is_in_claude_codes_format_and_marked_as_ours() {
        assert!(TODO_SKILL.starts_with("---\nname: todo\ndescription: \""));
        assert!(TODO_SKILL.contains(MARK));
        for command in [
            "runner list --format json",
            "runner add",
            "runner resolve",
            "--select",
            "runner status --brief",
        ] {
            assert!(TODO_SKILL.contains(command), "{command}");
        }
    }

    #[test]
    fn an_agents_md_gets_the_section_once_and_keeps_the_rest() {
        let p = Path::new("AGENTS.md");
        let once = agents_md("# Rules\n\nBe brief.\n", p).expect("added");
        assert!(once.starts_with("# Rules\n\nBe brief.\n\n<!-- runner todo skill: begin"));
        assert!(!once.contains("name: todo"), "no frontmatter");
        let twice = agents_md(&format!("{once}\n## Later\n"), p).expect("replaced");
        assert_eq!(twice.matches(BEGIN).count(), 1, "{twice}");
        assert!(
            twice.ends_with("<!-- runner todo skill: end -->\n## Later\n"),
            "{twice}"
        );
        let cut = once.replace(END, "");
        assert!(agents_md(&cut, p).is_err());
    }
}
