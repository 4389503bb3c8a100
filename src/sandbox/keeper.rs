//! The keeper program: `runner-keeper` (`src/bin/runner-keeper.rs`), or the runner binary
//! itself with [`KEEPER_ARG`] first when `runner-keeper` is not installed beside it (`cargo
//! run` builds only `runner`). The runner starts it once, as the sandbox's keeper server
//! ([`super::server`], started by [`super::client`]); it takes no arguments and serves the
//! control socket on its stdin. Also here: finding the program, resolving an agent's
//! executable before anything starts, and reading back an exec that failed.

use std::ffi::{OsStr, OsString};
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

/// The keeper program to start and the first argument it needs ([`KEEPER_ARG`] when it is
/// the runner binary).
///
/// Errors: the running binary cannot be found (`NotFound`).
pub(crate) fn program() -> std::io::Result<(&'static Path, Option<&'static str>)> {
    KEEPER
        .as_ref()
        .map(|(path, first)| (path.as_path(), *first))
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
}

/// The executable the agent `program` is: looked up in `path` (the child's `PATH`), or a
/// relative path with a `/` taken from `cwd` (as the standard library does).
///
/// Errors: the program is not found or not executable (`NotFound`, as a spawn of it would
/// fail).
pub(crate) fn resolve(program: &str, path: Option<&OsStr>, cwd: &Path) -> std::io::Result<PathBuf> {
    which::which_in(program, path, cwd)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::NotFound))
}

/// The keeper program: serve the runner on stdin ([`super::server::serve`]). Arguments, or
/// a stdin that is not a socket (started by hand), end it with the usage line and exit
/// code 2.
pub(crate) fn main(mut args: impl Iterator<Item = OsString>) -> ! {
    let on_socket = nix::sys::stat::fstat(std::io::stdin())
        .is_ok_and(|st| (st.st_mode & nix::libc::S_IFMT) == nix::libc::S_IFSOCK);
    if args.next().is_some() || !on_socket {
        eprintln!(
            "usage: {KEEPER_PROGRAM} (started by the runner, its control socket on stdin; not by hand)"
        );
        std::process::exit(crate::error::EXIT_INPUT)
    }
    super::server::serve()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_that_is_not_there_fails_before_anything_starts() {
        let err = resolve(
            "no-such-agent-cli",
            Some(OsStr::new("/nonexistent")),
            Path::new("/"),
        )
        .expect_err("not found");
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        let sh = resolve("sh", std::env::var_os("PATH").as_deref(), Path::new("/"))
            .expect("sh is on PATH");
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{sh:?}");
    }
}
