//! The bad-input catalogue's `notify` cases: a target that looks like a
//! URL of another scheme or holds a comma list, an empty list, a command whose program is
//! missing (exit 3, naming where it was set).

use crate::bad_input_cases::{Case, GOOD_CSV, GOOD_INSTR};

/// The BATCH.md `$md` of workers-input.csv, run with the fake agent.
macro_rules! batch_md_case {
    ($what:expr, $md:expr, $code:expr, $($want:expr),+) => {
        Case {
            what: $what,
            files: &[("BATCH.md", $md), ("workers-input.csv", GOOD_CSV)],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: $code,
            want: &[$($want),+],
        }
    };
}

/// A todo batch of the store `S` whose runner.toml is `$toml`.
macro_rules! runner_toml_case {
    ($what:expr, $toml:expr, $code:expr, $($want:expr),+) => {
        Case {
            what: $what,
            files: &[("S/todo-1.md", b"## Todo\n- [ ] a\n"), ("S/runner.toml", $toml)],
            args: &["run", "S/todo-1.md"],
            agent: true,
            code: $code,
            want: &[$($want),+],
        }
    };
}

/// A batch of in.csv with `--notify $target`.
macro_rules! flag_case {
    ($what:expr, $target:expr, $code:expr, $($want:expr),+) => {
        Case {
            what: $what,
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &["batch", "--input", "in.csv", "--instruction", "instr.md", "--notify", $target],
            agent: true,
            code: $code,
            want: &[$($want),+],
        }
    };
}

const ACCEPTED: &str = "http:// or https:// webhook URL, `bell`, or a command line";

pub(crate) fn notify_cases() -> Vec<Case> {
    vec![
        batch_md_case!(
            "BATCH.md notify with another scheme",
            b"---\nid_column: id\nnotify: ftp://x\n---\nDo {id}\n",
            2,
            "BATCH.md:3:",
            "ftp://",
            ACCEPTED
        ),
        batch_md_case!(
            "BATCH.md notify as a comma list",
            b"---\nid_column: id\nnotify: bell,http://x\n---\nDo {id}\n",
            2,
            "BATCH.md:3:",
            "comma list"
        ),
        batch_md_case!(
            "BATCH.md notify an empty list",
            b"---\nid_column: id\nnotify: [ ]\n---\nDo {id}\n",
            2,
            "BATCH.md:3:",
            "give a target or remove the key"
        ),
        batch_md_case!(
            "BATCH.md notify command not installed",
            b"---\nid_column: id\nnotify: no-such-notifier-program --x\n---\nDo {id}\n",
            3,
            "BATCH.md:3",
            "no-such-notifier-program"
        ),
        runner_toml_case!(
            "runner.toml notify with another scheme",
            b"runner = 'exec'\nnotify = 'ftp://x'\n",
            2,
            "runner.toml:2:",
            "ftp://",
            ACCEPTED
        ),
        runner_toml_case!(
            "runner.toml notify an empty list",
            b"runner = 'exec'\nnotify = [ ]\n",
            2,
            "runner.toml:2:",
            "give a target or remove the key"
        ),
        runner_toml_case!(
            "runner.toml notify command not installed",
            b"runner = 'exec'\n\nnotify = 'no-such-notifier-program'\n",
            3,
            "runner.toml:3",
            "no-such-notifier-program"
        ),
        flag_case!(
            "--notify with another scheme",
            "ftp://x",
            2,
            "--notify",
            "ftp://",
            ACCEPTED
        ),
        flag_case!(
            "--notify as a comma list",
            "bell,http://x",
            2,
            "--notify",
            "comma list"
        ),
        flag_case!(
            "--notify command not installed",
            "no-such-notifier-program",
            3,
            "--notify",
            "no-such-notifier-program"
        ),
    ]
}
