//! The keeper as a program of its own: `runner-keeper` (`src/bin/runner-keeper.rs`), or the
//! runner binary itself with [`KEEPER_ARG`] first when `runner-keeper` is not installed
//! beside it (`cargo run` builds only `runner`). The runner starts it with `posix_spawn`
//! ([`command`]), so an attempt costs the exec of this small program, never a copy of the
//! runner's address space (issue 49: the forked keeper cost +3.5 ms of CPU per attempt, most
//! of it page-table copies and the copy-on-write faults of a keeper sharing the runner's
//! memory for the attempt's whole life).
//!
//! Its command line, written only by [`command`]:
//!
//! ```text
//! runner-keeper [--write PATH]... -- EXECUTABLE ARGV0 [ARG]...
//! ```
//!
//! It makes the Landlock ruleset of the `--write` paths ([`super::ruleset`]), then becomes
//! the attempt's keeper and starts `EXECUTABLE` (an absolute path the runner resolved) with
//! `ARGV0 ARG...` confined ([`super::shim::keep_program`]). Its environment, working
//! directory, stdio and process group are the agent's: the runner set them on the spawn.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

/// The keeper program's file name, installed beside `runner` (`cargo install`, `cargo build`).
pub(crate) const KEEPER_PROGRAM: &str = "runner-keeper";

/// The first argument that makes the runner binary act as the keeper (the fallback when
/// [`KEEPER_PROGRAM`] is missing). Not part of the command line users see.
pub(crate) const KEEPER_ARG: &str = "__keeper";

/// The keeper's exit code when its program could not be exec'd (as a shell's for a command
/// it cannot run); its stderr then holds [`cannot_start`]'s line alone.
pub(crate) const CANNOT_EXEC: i32 = 127;

/// What a start of `program` that failed with `why` is called, confined or not (the
/// keeper's line, the runner's reason).
pub(crate) fn cannot_start(program: &str, why: &std::io::Error) -> String {
    format!("cannot start `{program}`: {why}")
}

/// The reason a confined attempt that exited with `code` and wrote `stderr` did not start:
/// the keeper could not exec its program. `None` for any other attempt.
pub(crate) fn not_started(code: Option<i32>, stderr: &[u8]) -> Option<String> {
    let line = std::str::from_utf8(stderr).ok()?.strip_suffix('\n')?;
    (code == Some(CANNOT_EXEC) && line.starts_with("cannot start `") && !line.contains('\n'))
        .then(|| line.to_string())
}

/// The keeper to start: [`KEEPER_PROGRAM`] beside the running binary, else the running
/// binary with [`KEEPER_ARG`]; `None` when the running binary cannot be found.
static KEEPER: LazyLock<Option<(PathBuf, Option<&'static str>)>> = LazyLock::new(|| {
    let exe = std::env::current_exe().ok()?;
    let beside = exe.with_file_name(KEEPER_PROGRAM);
    match beside.is_file() {
        true => Some((beside, None)),
        false => Some((exe, Some(KEEPER_ARG))),
    }
});

/// The command that starts `program` with `args` confined to writing beneath `writes`,
/// under its keeper: the keeper program with the resolved executable. `path` is the `PATH`
/// the program is looked up in (the child's), `cwd` its working directory (a relative
/// program with a `/` is taken from there, as the standard library does). The caller sets
/// the environment, working directory, stdio and process group, which are the agent's.
///
/// Errors: the program is not found or not executable (`NotFound`, as a spawn of it would
/// fail), or the running binary cannot be found to start the keeper.
pub(crate) fn command(
    program: &str,
    args: &[String],
    writes: &[PathBuf],
    path: Option<&OsStr>,
    cwd: &Path,
) -> std::io::Result<std::process::Command> {
    let not_found = || std::io::Error::from(std::io::ErrorKind::NotFound);
    let executable = which::which_in(program, path, cwd).map_err(|_| not_found())?;
    let (keeper, first) = KEEPER.as_ref().ok_or_else(not_found)?;
    let mut cmd = std::process::Command::new(keeper);
    cmd.args(first);
    for w in writes {
        cmd.arg("--write").arg(w);
    }
    cmd.arg("--").arg(executable).arg(program).args(args);
    Ok(cmd)
}

/// What [`command`] wrote: the paths the agent may write, the executable and its argv.
#[derive(Debug, PartialEq)]
struct KeeperArgs {
    writes: Vec<PathBuf>,
    executable: CString,
    argv: Vec<CString>,
}

/// Read the keeper's arguments (after the program name and [`KEEPER_ARG`]).
///
/// Errors: the usage line, when they are not what [`command`] writes.
fn parse(mut args: impl Iterator<Item = OsString>) -> Result<KeeperArgs, String> {
    let usage = || {
        format!(
            "usage: {KEEPER_PROGRAM} [--write PATH]... -- EXECUTABLE ARGV0 [ARG]... (started by the runner, not by hand)"
        )
    };
    let c_string = |s: OsString| CString::new(s.as_bytes()).map_err(|_| usage());
    let mut writes = Vec::new();
    loop {
        match args.next() {
            Some(a) if a == "--write" => writes.push(PathBuf::from(args.next().ok_or_else(usage)?)),
            Some(a) if a == "--" => break,
            _ => return Err(usage()),
        }
    }
    let executable = c_string(args.next().ok_or_else(usage)?)?;
    let argv = args.map(c_string).collect::<Result<Vec<_>, _>>()?;
    if argv.is_empty() {
        return Err(usage());
    }
    Ok(KeeperArgs {
        writes,
        executable,
        argv,
    })
}

/// The keeper program: parse the arguments, make the ruleset, keep the confined agent and
/// exit as it did. A ruleset that cannot be made ends it with exit code 3 and a line on
/// stderr (the agent never runs unconfined); wrong arguments with exit code 2.
pub(crate) fn main(args: impl Iterator<Item = OsString>) -> ! {
    let args = match parse(args) {
        Ok(a) => a,
        Err(usage) => {
            eprintln!("{usage}");
            std::process::exit(crate::error::EXIT_INPUT)
        }
    };
    let ruleset = match super::ruleset(&args.writes) {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("runner sandbox: {e}; the agent was not started");
            std::process::exit(crate::error::EXIT_ENVIRONMENT)
        }
    };
    super::shim::keep_program(ruleset, &args.executable, &args.argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> impl Iterator<Item = OsString> {
        args.iter()
            .map(OsString::from)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn the_keeper_reads_back_what_the_runner_writes() {
        let cmd = command(
            "sh",
            &["-c".into(), "echo hi".into()],
            &[PathBuf::from("/w/a"), PathBuf::from("/w b")],
            std::env::var_os("PATH").as_deref(),
            Path::new("/"),
        )
        .expect("sh is on PATH");
        let mut written = cmd.get_args().map(OsString::from).peekable();
        if written.peek().is_some_and(|a| a == KEEPER_ARG) {
            written.next();
        }
        let read = parse(written).expect("parsed");
        assert_eq!(read.writes, [PathBuf::from("/w/a"), PathBuf::from("/w b")]);
        assert!(read.executable.to_bytes().ends_with(b"/sh"), "{read:?}");
        assert!(Path::new(OsStr::from_bytes(read.executable.to_bytes())).is_absolute());
        let argv: Vec<&[u8]> = read.argv.iter().map(|a| a.to_bytes()).collect();
        assert_eq!(argv, [&b"sh"[..], b"-c", b"echo hi"]);
    }

    #[test]
    fn a_program_that_is_not_there_fails_before_anything_starts() {
        let err = command(
            "no-such-agent-cli",
            &[],
            &[],
            Some(OsStr::new("/nonexistent")),
            Path::new("/"),
        )
        .expect_err("not found");
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn arguments_the_runner_does_not_write_are_refused() {
        for bad in [
            &[][..],
            &["--write"],
            &["--write", "/a"],
            &["--", "/bin/sh"],
            &["--other", "--", "/bin/sh", "sh"],
        ] {
            assert!(parse(os(bad)).is_err(), "{bad:?}");
        }
        assert!(parse(os(&["--", "/bin/sh", "sh"])).is_ok());
    }
}
