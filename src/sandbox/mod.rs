//! `--sandbox landlock` (DESIGN §10): each teammate's process tree in its own Linux Landlock
//! domain that may write only its own area, in a session of its own (no controlling
//! terminal), kept by a process that ends everything the tree leaves behind ([`shim`]).
//!
//! [`client::start`] is the one way to start a command confined: the runner's one keeper
//! server ([`server`], the small `runner-keeper` program, [`keeper`]) hands the attempt to
//! a keeper it forked (one that waits for work, else a new one: a keeper serves one attempt
//! after another), which makes the ruleset, becomes the attempt's keeper ([`shim`]) and
//! forks the program's process; that process makes itself a session, restricts itself and
//! execs the program, which (with everything it starts) inherits the domain. What goes over
//! the attempt's socket: [`wire`]. The runner's address space is never copied for it, no
//! keeper is exec'd (nor, mostly, forked) per attempt, and neither the async runner nor a
//! keeper ever restricts itself.
//!
//! The ruleset handles every filesystem *write* right of the kernel's ABI (reads and
//! execution stay open) and allows them beneath the given paths and the usual devices, but
//! no device ioctl anywhere (`IoctlDev`: no `TIOCSTI` into a terminal); it scopes signals and
//! abstract unix sockets, so a teammate can signal neither the runner, its keeper nor a
//! sibling. Landlock's domain rules deny ptrace (and so `/proc/<pid>/environ`) of any
//! process outside the teammate's own domain (seen for an unprivileged user; a teammate
//! running as root could still read another root process's environment in our tests).

pub(crate) mod client;
pub(crate) mod keeper;
mod server;
pub(crate) mod shim;
mod wire;

use std::ffi::OsString;
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetError, Scope, path_beneath_rules,
};

use crate::error::{Error, Result};

/// The oldest Landlock ABI `--sandbox landlock` runs on: 6 (Linux 6.12) is the first that
/// scopes signals, without which a teammate could stop its siblings and the runner.
pub(crate) const MIN_ABI: i32 = 6;

/// Devices every teammate may write (never ioctl): its own terminal (it has none: it starts
/// in a session of its own), the null sinks, randomness, shared memory. Those that do not
/// exist are skipped.
pub(crate) const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/urandom",
    "/dev/random",
    "/dev/shm",
];

/// The pseudo-terminal devices, granted only to a definition that declares it needs one
/// (`[sandbox] pty = true`): `/dev/pts` holds every terminal the user has open, and a
/// teammate that may write them can print into them (issue 49: OSC 52 clipboard writes and
/// title sequences reached the user's terminals).
pub(crate) const PTY_DEVICES: &[&str] = &["/dev/pts", "/dev/ptmx"];

/// How teammates are confined (`--sandbox`, DESIGN §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Mode {
    /// Not at all: a teammate can do anything the user can.
    #[default]
    None,
    /// Each teammate in its own Landlock domain.
    Landlock,
    /// The default: [`Mode::Landlock`] where the kernel and the run's layout allow it, else
    /// [`Mode::None`] with one line saying why. A plan settles it before it runs
    /// (`Plan::settle_sandbox`); nothing runs under `Auto` itself.
    Auto,
}

impl Mode {
    /// The values `--sandbox` takes, for messages.
    pub(crate) const VALUES: &str = "auto, none or landlock";

    /// Parse `--sandbox` / `sandbox`.
    ///
    /// Errors: a value other than auto, none or landlock (exit 2).
    pub(crate) fn parse(text: &str) -> Result<Mode> {
        match text.trim() {
            "none" => Ok(Mode::None),
            "landlock" => Ok(Mode::Landlock),
            "auto" => Ok(Mode::Auto),
            other => Err(Error::bad_value(
                "--sandbox",
                other,
                format!("must be {}", Mode::VALUES),
            )),
        }
    }

    /// `none`, `landlock` or `auto`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Landlock => "landlock",
            Mode::Auto => "auto",
        }
    }
}

/// Why `--sandbox auto` cannot use Landlock on a kernel with this `abi` (see
/// [`kernel_abi`]); `None` when it can.
pub(crate) fn auto_refusal(abi: Option<i32>) -> Option<String> {
    match abi {
        None => Some("this kernel has no Landlock".into()),
        Some(v) if v < MIN_ABI => Some(format!(
            "this kernel has Landlock ABI {v}, and confining teammates needs ABI {MIN_ABI} (Linux 6.12+)"
        )),
        Some(_) => None,
    }
}

/// The running kernel's Landlock ABI version; `None` when Landlock is not built in or not
/// enabled. Found once per process (every confined attempt asks) by asking the kernel
/// ([`shim::landlock_abi`]).
pub(crate) fn kernel_abi() -> Option<i32> {
    static ABI: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();
    *ABI.get_or_init(shim::landlock_abi)
}

/// Check that `abi` (see [`kernel_abi`]) can run `--sandbox landlock`.
///
/// Errors: no Landlock, or an ABI older than [`MIN_ABI`] (exit 3), saying what is needed.
pub(crate) fn check_abi(abi: Option<i32>) -> Result<()> {
    match abi {
        None => Err(Error::Environment(
            "--sandbox landlock: this kernel has no Landlock (it needs Linux 6.12 or later with Landlock enabled, e.g. `lsm=landlock,...` on the kernel command line); run with --sandbox none, or on such a kernel".into(),
        )),
        Some(v) if v < MIN_ABI => Err(Error::Environment(format!(
            "--sandbox landlock needs Landlock ABI {MIN_ABI} (Linux 6.12 or later: the first that keeps a teammate from signalling the runner and its siblings); this kernel has ABI {v}; run with --sandbox none, or on a newer kernel"
        ))),
        Some(_) => Ok(()),
    }
}

/// One line for `runner runners`: the kernel's Landlock ABI and whether `--sandbox
/// landlock` runs here.
pub(crate) fn describe(abi: Option<i32>) -> String {
    match abi {
        None => "Landlock: not available on this kernel (--sandbox landlock exits 3)".into(),
        Some(v) if v < MIN_ABI => format!(
            "Landlock: ABI {v} (--sandbox landlock needs ABI {MIN_ABI}, Linux 6.12+; it exits 3 here)"
        ),
        Some(v) => format!("Landlock: ABI {v} (--sandbox landlock is available)"),
    }
}

/// Expand one `[sandbox] writes` entry of a runner definition: a leading `~/` is `HOME`,
/// `{env.NAME}` is that variable (looked up with `lookup`), `{env.NAME:-DEFAULT}` is the
/// variable or, when it is unset or empty, `DEFAULT` (whose leading `~/` is `HOME`: the XDG
/// folders, `{env.XDG_DATA_HOME:-~/.local/share}/opencode/`). `None` when a variable it
/// names without a default is unset or empty, or the result is not absolute. A trailing `/`
/// (a folder the runner creates when missing, [`is_folder`]) is dropped.
pub(crate) fn expand_write(
    entry: &str,
    lookup: &dyn Fn(&str) -> Option<OsString>,
) -> Option<PathBuf> {
    let home = |rest: &str, text: &mut String| -> Option<usize> {
        match rest.strip_prefix("~/").or((rest == "~").then_some("")) {
            Some(tail) => {
                text.push_str(lookup("HOME")?.to_str()?);
                text.push('/');
                Some(rest.len() - tail.len())
            }
            None => Some(0),
        }
    };
    let mut text = String::new();
    let mut rest = &entry[home(entry, &mut text)?..];
    while let Some(start) = rest.find("{env.") {
        text.push_str(&rest[..start]);
        let after = &rest[start + 5..];
        let end = after.find('}')?;
        let (name, default) = match after[..end].split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (&after[..end], None),
        };
        match (lookup(name).filter(|v| !v.is_empty()), default) {
            (Some(value), _) => text.push_str(value.to_str()?),
            (None, Some(default)) => {
                let skip = home(default, &mut text)?;
                text.push_str(&default[skip..]);
            }
            (None, None) => return None,
        }
        rest = &after[end + 1..];
    }
    text.push_str(rest);
    while text.len() > 1 && text.ends_with('/') {
        text.pop();
    }
    let path = PathBuf::from(text);
    path.is_absolute().then_some(path)
}

/// Whether a `[sandbox] writes` entry names a folder the CLI makes on first use (it ends in
/// `/`): the runner creates it before the attempt when it is missing, since a teammate
/// cannot create it in a parent it may not write (opencode's first start makes
/// `~/.local/share/opencode`). Other entries that do not exist are skipped.
pub(crate) fn is_folder(entry: &str) -> bool {
    entry.ends_with('/')
}

/// The path of the last write the sandbox denied, as the agent's stderr tells it (`EACCES:
/// permission denied, mkdir '/home/u/.qwen/extensions'` from Node,
/// `[Errno 13] Permission denied: '/x'` from Python, `bash: /x: Permission denied`): the
/// last of the lines of `stderr` that say so and name an absolute path. `None` when none
/// does. (Landlock answers EACCES; EROFS and "Read-only file system" are never its.)
pub(crate) fn denied_write(stderr: &str) -> Option<PathBuf> {
    static DENIED: std::sync::OnceLock<Option<(regex::Regex, regex::Regex)>> =
        std::sync::OnceLock::new();
    let (denied, path) = DENIED
        .get_or_init(|| {
            let denied = regex::Regex::new(
                r"(?i)\b(EACCES|EPERM|permission denied|operation not permitted)\b",
            );
            let path = regex::Regex::new(r#"['"`](/[^'"`]+)['"`]|(?:^|[\s,])(/[^\s:'"`,]+)"#);
            denied.ok().zip(path.ok())
        })
        .as_ref()?;
    stderr.lines().rev().find_map(|line| {
        if !denied.is_match(line) {
            return None;
        }
        let c = path.captures(line)?;
        c.get(1).or(c.get(2)).map(|m| PathBuf::from(m.as_str()))
    })
}

/// Variables that lead to unsandboxed servers a teammate could ask to run commands or act
/// for it (issue 25, escape 3: `tmux run-shell` ran a command outside the sandbox): the
/// tmux server, the SSH agent, the session bus, the X and Wayland displays.
pub(crate) const REACHING_OUT: &[&str] = &[
    "TMUX",
    "TMUX_PANE",
    "SSH_AUTH_SOCK",
    "DBUS_SESSION_BUS_ADDRESS",
    "DISPLAY",
    "WAYLAND_DISPLAY",
];

/// The variables a sandboxed attempt's process starts without: the definition's own
/// `unset`, and [`REACHING_OUT`] — except one the attempt sets itself (`set`: a definition
/// that keeps one on purpose sets it in its `[env]`).
pub(crate) fn unset_under_sandbox(
    unset: &[String],
    set: &[(String, std::ffi::OsString)],
) -> Vec<String> {
    let mut all = unset.to_vec();
    for name in REACHING_OUT {
        if !set.iter().any(|(k, _)| k == name) && !all.iter().any(|u| u == name) {
            all.push((*name).to_owned());
        }
    }
    all
}

/// What a teammate may do beneath the paths it may write: every write right of `abi` but
/// making device nodes (issue 25: as root, a teammate made `kmsg` and a loop device in its
/// own folder and wrote to them). Pipes and sockets may still be made (CLIs and the tools
/// they run use them in their `TMPDIR`).
///
/// No device ioctls either (`IoctlDev`, issue 25 escape 3: `TIOCSTI` pushed a command into
/// the user's terminal): a program in the domain sees the devices it opens as no terminal.
fn granted(abi: ABI) -> landlock::BitFlags<AccessFs> {
    AccessFs::from_write(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev)
}

/// The [`DEVICES`] that exist, each opened (`O_PATH`, close-on-exec) once per process with
/// whether it is a folder: the keeper server opens them before it forks a keeper, and every
/// ruleset takes its device rules from them (no lookups per attempt).
pub(crate) fn devices() -> &'static [(PathFd, bool)] {
    static OPEN: std::sync::OnceLock<Vec<(PathFd, bool)>> = std::sync::OnceLock::new();
    OPEN.get_or_init(|| {
        DEVICES
            .iter()
            .filter_map(|d| {
                let folder = std::fs::metadata(d).ok()?.is_dir();
                Some((PathFd::new(d).ok()?, folder))
            })
            .collect()
    })
}

/// The Landlock ruleset of a teammate that may write beneath `writes` (and [`DEVICES`]),
/// created with its rules, not yet enforced: the descriptor [`shim`] restricts the agent's
/// process with. Every right of the newest ABI both the kernel and the crate know is
/// required (none is dropped silently). Paths of `writes` that cannot be opened (missing)
/// are skipped.
///
/// Errors: no Landlock or an ABI older than [`MIN_ABI`], or the kernel refused the ruleset.
fn ruleset(writes: &[PathBuf]) -> std::result::Result<std::os::fd::OwnedFd, String> {
    let abi = kernel_abi();
    check_abi(abi).map_err(|e| e.to_string())?;
    let abi = [ABI::V10, ABI::V9, ABI::V8, ABI::V7, ABI::V6]
        .into_iter()
        .find(|a| (*a as i32) <= abi.unwrap_or(0))
        .ok_or("no Landlock ABI this build knows")?;
    let device_rules = devices().iter().map(|(fd, folder)| {
        let access = match folder {
            true => granted(abi),
            false => granted(abi) & AccessFs::from_file(abi),
        };
        Ok::<_, RulesetError>(PathBeneath::new(fd, access))
    });
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_write(abi))
        .and_then(|r| r.scope(Scope::from_all(abi)))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(writes, granted(abi))))
        .and_then(|r| r.add_rules(device_rules))
        .map_err(|e| format!("cannot set up the Landlock sandbox: {e}"))?;
    Option::<std::os::fd::OwnedFd>::from(created)
        .ok_or_else(|| "the Landlock sandbox cannot be fully enforced here".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_or_missing_landlock_is_an_environment_error_saying_what_is_needed() {
        let none = check_abi(None).expect_err("refused");
        assert_eq!(none.exit_code(), 3);
        assert!(none.to_string().contains("no Landlock"), "{none}");
        let old = check_abi(Some(4)).expect_err("refused");
        assert_eq!(old.exit_code(), 3);
        assert!(
            old.to_string().contains("needs Landlock ABI 6") && old.to_string().contains("ABI 4"),
            "{old}"
        );
        assert!(check_abi(Some(6)).is_ok() && check_abi(Some(7)).is_ok());
        assert!(describe(None).contains("not available"));
        assert!(describe(Some(5)).contains("exits 3"));
        assert!(describe(Some(7)).contains("ABI 7"));
    }

    #[test]
    fn writes_expand_home_and_variables_and_skip_unset_ones() {
        let env = |k: &str| match k {
            "HOME" => Some(OsString::from("/home/u")),
            "CODEX_HOME" => Some(OsString::from("/srv/codex")),
            "EMPTY" => Some(OsString::new()),
            _ => None,
        };
        assert_eq!(
            expand_write("~/.claude", &env),
            Some(PathBuf::from("/home/u/.claude"))
        );
        assert_eq!(
            expand_write("{env.CODEX_HOME}", &env),
            Some(PathBuf::from("/srv/codex"))
        );
        assert_eq!(
            expand_write("{env.CODEX_HOME}/log", &env),
            Some(PathBuf::from("/srv/codex/log"))
        );
        assert_eq!(
            expand_write("{env.XDG_DATA_HOME:-~/.local/share}/opencode/", &env),
            Some(PathBuf::from("/home/u/.local/share/opencode"))
        );
        assert_eq!(
            expand_write("{env.CODEX_HOME:-~/.codex}/", &env),
            Some(PathBuf::from("/srv/codex"))
        );
        assert_eq!(
            expand_write("{env.EMPTY:-/var/x}", &env),
            Some(PathBuf::from("/var/x"))
        );
        assert!(is_folder("~/.qwen/") && !is_folder("~/.claude.json"));
        assert_eq!(expand_write("{env.UNSET}", &env), None);
        assert_eq!(expand_write("{env.EMPTY}", &env), None);
        assert_eq!(expand_write("relative", &env), None);
    }

    #[test]
    fn a_denied_write_is_found_in_the_words_of_node_python_shells_and_git() {
        let cases = [
            (
                "Error: EACCES: permission denied, mkdir '/h/.qwen/extensions'\n    at x (/a/b.js:1:2)",
                Some("/h/.qwen/extensions"),
            ),
            (
                "PermissionError: [Errno 13] Permission denied: '/etc/x'",
                Some("/etc/x"),
            ),
            (
                "bash: /srv/out.txt: Permission denied",
                Some("/srv/out.txt"),
            ),
            (
                "fatal: Unable to create '/r/.git/index.lock': Permission denied",
                Some("/r/.git/index.lock"),
            ),
            ("touch: cannot touch '/x': Read-only file system", None),
            ("Error: 401 permission denied by the API", None),
            ("all good", None),
        ];
        for (text, want) in cases {
            assert_eq!(denied_write(text), want.map(PathBuf::from), "{text}");
        }
    }

    #[test]
    fn modes_parse_and_name_themselves() {
        assert_eq!(Mode::parse("landlock").expect("ok"), Mode::Landlock);
        assert_eq!(Mode::parse("none").expect("ok").name(), "none");
        assert!(Mode::parse("docker").is_err());
    }
}
