//! A runner definition's `warm_up`: one run of the CLI before a team of more than one
//! teammate starts, so that parallel first starts do not race on the state a CLI makes on its
//! first start. OpenCode 1.18.33 on a fresh HOME: each `opencode run` applies its database
//! migrations (read which are applied, then `CREATE TABLE …` in a transaction); two at once
//! both create the tables and one dies with "Failed query: CREATE TABLE … params:".

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::agent::definition::RunnerDef;

/// Longest a warm-up may take; past it the CLI is ended and the team starts anyway.
const LIMIT: Duration = Duration::from_secs(120);

/// Run `def`'s `warm_up` once, from `cwd`, when `jobs` teammates run at once and its
/// `unless` path is not there. What went wrong (it could not start, failed, took too long)
/// is a warning: the team starts anyway, and its attempts say the rest.
pub(crate) fn warm_up(def: &RunnerDef, jobs: usize, cwd: &Path) {
    let Some(w) = &def.warm_up else {
        return;
    };
    if jobs < 2 || made_already(w.unless.as_deref()) {
        return;
    }
    let started = Instant::now();
    match run(&def.program, &w.args, cwd) {
        Ok(()) => tracing::info!(
            "{}: warmed up once before the team starts (`{} {}`, {:.1?}): its first start makes state that teammates starting together would race on",
            def.name,
            def.program,
            w.args.join(" "),
            started.elapsed()
        ),
        Err(why) => tracing::warn!(
            "{}: its warm-up before the team starts (`{} {}`) {why}; teammates starting together may race on its first-start state",
            def.name,
            def.program,
            w.args.join(" ")
        ),
    }
}

/// Whether the state a warm-up makes is there already (`unless` expanded with the runner's
/// environment); `false` when there is no such path to look at.
fn made_already(unless: Option<&str>) -> bool {
    let lookup = |name: &str| std::env::var_os(name);
    unless
        .and_then(|u| crate::sandbox::expand_write(u, &lookup))
        .is_some_and(|p: PathBuf| p.exists())
}

/// `program args` from `cwd`, stdin empty, output discarded but the end of stderr, in a
/// process group of its own that is killed past [`LIMIT`].
///
/// Errors: what went wrong, as the end of a sentence ("exited with code 1: …").
fn run(program: &str, args: &[String], cwd: &Path) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let err_file = tempfile::tempfile().map_err(|e| format!("could not start: {e}"))?;
    let mut child = std::process::Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(
            err_file
                .try_clone()
                .map_err(|e| format!("could not start: {e}"))?,
        )
        .process_group(0)
        .spawn()
        .map_err(|e| format!("could not start: {e}"))?;
    let until = Instant::now() + LIMIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) | Err(_) => {
                if let Ok(pid) = i32::try_from(child.id()) {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                let _ = child.wait();
                return Err(format!("did not end within {LIMIT:?} and was stopped"));
            }
        }
    };
    if status.success() {
        return Ok(());
    }
    let said = last_line(err_file);
    Err(match (status.code(), said) {
        (Some(c), Some(l)) => format!("exited with code {c}: {l}"),
        (Some(c), None) => format!("exited with code {c}"),
        (None, _) => "was killed by a signal".to_owned(),
    })
}

/// The last line of `file` that says something, without terminal escapes.
fn last_line(mut file: std::fs::File) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(4096))).ok()?;
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.lines()
        .map(|l| crate::report::one_line(l, 200))
        .rev()
        .find(|l| l.chars().any(char::is_alphanumeric))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_warm_up_says_how_and_a_made_state_skips_it() {
        let dir = tempfile::tempdir().expect("tmp");
        assert_eq!(
            run("sh", &["-c".into(), "exit 0".into()], dir.path()),
            Ok(())
        );
        assert_eq!(
            run(
                "sh",
                &[
                    "-c".into(),
                    "echo first >&2; echo 'no database' >&2; exit 3".into()
                ],
                dir.path()
            ),
            Err("exited with code 3: no database".into())
        );
        assert!(
            run("/nonexistent/cli", &[], dir.path())
                .is_err_and(|e| e.starts_with("could not start"))
        );
        let there = dir.path().join("opencode.db");
        std::fs::write(&there, "").expect("db");
        assert!(made_already(there.to_str()));
        assert!(!made_already(dir.path().join("none.db").to_str()));
        assert!(!made_already(None));
    }
}
