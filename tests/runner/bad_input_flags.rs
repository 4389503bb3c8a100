//! The bad-input catalogue's flag cases (`bad_input_cases.rs` holds the rest): a flag a
//! runner would drop, a flag with a bad value or that clashes with another.

use crate::bad_input_cases::{Case, GOOD_CSV, GOOD_INSTR};

/// Flags a runner would drop.
pub(crate) fn dropped_flag_cases() -> Vec<Case> {
    vec![
        // --- flags a runner would drop
        Case {
            what: "--model with a runner that takes no model",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--runner",
                "amp",
                "--model",
                "m1",
            ],
            agent: false,
            code: 2,
            want: &[
                "runner `amp` has no place for --model",
                "`--model m1` would be dropped",
            ],
        },
        Case {
            what: "--model with the exec runner",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--model",
                "opus",
            ],
            agent: true,
            code: 2,
            want: &[
                "the exec runner passes nothing extra to its program, so --model would be dropped",
                "after `--` (e.g. `-- ./agent.sh --model opus`)",
            ],
        },
        Case {
            what: "--agent-arg with the exec runner",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--agent-arg",
                "--fast",
            ],
            agent: true,
            code: 2,
            want: &[
                "so --agent-arg would be dropped",
                "(e.g. `-- ./agent.sh --fast`)",
            ],
        },
    ]
}

/// Flags with a value out of range or of the wrong kind.
pub(crate) fn flag_value_cases() -> Vec<Case> {
    vec![
        // --- flags
        Case {
            what: "bad --timeout",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--timeout",
                "soon",
            ],
            agent: true,
            code: 2,
            want: &["--timeout `soon` is not a duration"],
        },
        Case {
            what: "--jobs with a bad value",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--jobs",
                "0.5x",
            ],
            agent: true,
            code: 2,
            want: &[
                "--jobs `0.5x`",
                "a number, 0 for as many as allowed, or a share of the CPUs",
            ],
        },
        Case {
            what: "--max-fail 0",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--max-fail",
                "0",
            ],
            agent: true,
            code: 2,
            want: &["--max-fail `0` must be a whole number ≥ 1", "3:immediate"],
        },
        Case {
            what: "--max-cost-usd below zero",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--max-cost-usd=-1",
            ],
            agent: true,
            code: 2,
            want: &["--max-cost-usd `-1` must be a number of US dollars above 0"],
        },
        Case {
            what: "a negative number given the usual way (no `=`)",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--jobs",
                "-2",
            ],
            agent: true,
            code: 2,
            want: &["--jobs `-2` must be a number"],
        },
        Case {
            what: "-o onto a file that is no output of the runner",
            files: &[
                ("in.csv", GOOD_CSV),
                ("instr.md", GOOD_INSTR),
                ("notes.txt", b"my notes\n"),
            ],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "-o",
                "notes.txt",
            ],
            agent: true,
            code: 2,
            want: &["notes.txt: the file exists and is not an output CSV of the runner"],
        },
    ]
}

/// Flags naming a file or folder the runner may not write, and more bad values.
pub(crate) fn output_file_flag_cases() -> Vec<Case> {
    vec![
        Case {
            what: "--trace in a folder nobody can make files in, root included (/proc)",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--trace",
                "/proc/t.json",
            ],
            agent: true,
            code: 2,
            want: &["--trace /proc/t.json: cannot write in the folder /proc"],
        },
        Case {
            what: "--worktree-copy without worktrees",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--worktree-copy",
                ".env",
            ],
            agent: true,
            code: 2,
            want: &[
                "--worktree-copy needs --isolate worktree: it prepares each teammate's git worktree",
            ],
        },
        Case {
            what: "--junit onto a folder",
            files: &[
                ("in.csv", GOOD_CSV),
                ("instr.md", GOOD_INSTR),
                ("c/keep.txt", b"x\n"),
            ],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--junit",
                "c",
            ],
            agent: true,
            code: 2,
            want: &["--junit c: that is a folder; give the path of a file"],
        },
        Case {
            what: "--junit onto a file that is no JUnit report",
            files: &[
                ("in.csv", GOOD_CSV),
                ("instr.md", GOOD_INSTR),
                ("notes.txt", b"my notes\n"),
            ],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--junit",
                "notes.txt",
            ],
            agent: true,
            code: 2,
            want: &["--junit notes.txt: the file exists and is not a JUnit report"],
        },
        Case {
            what: "--trace onto a file that is no trace",
            files: &[
                ("in.csv", GOOD_CSV),
                ("instr.md", GOOD_INSTR),
                ("notes.txt", b"{\"a\": 1}\n"),
            ],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--trace",
                "notes.txt",
            ],
            agent: true,
            code: 2,
            want: &["--trace notes.txt: the file exists and is not a trace of a run"],
        },
        Case {
            what: "a negative duration given the usual way (no `=`)",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--timeout",
                "-5s",
            ],
            agent: true,
            code: 2,
            want: &["--timeout `-5s` is not a duration"],
        },
    ]
}

/// Durations, limits and their BATCH.md keys.
pub(crate) fn duration_and_limit_cases() -> Vec<Case> {
    vec![
        Case {
            what: "a duration past a year quoted as written",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--retry-delay",
                "99999h",
            ],
            agent: true,
            code: 2,
            want: &["--retry-delay `99999h` is longer than a year"],
        },
        Case {
            what: "--rate-limit-wait not a duration",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--rate-limit-wait",
                "forever",
            ],
            agent: true,
            code: 2,
            want: &["--rate-limit-wait `forever` is not a duration"],
        },
        Case {
            what: "BATCH.md max_fail, sandbox and rate_limit_wait name the file and line",
            files: &[
                (
                    "BATCH.md",
                    b"---\nid_column: id\nmax_fail: 0\n---\nDo {id}\n",
                ),
                ("workers-input.csv", GOOD_CSV),
            ],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: 2,
            want: &["BATCH.md:3:", "`max_fail` must be a whole number ≥ 1"],
        },
        Case {
            what: "BATCH.md bad sandbox",
            files: &[
                (
                    "BATCH.md",
                    b"---\nid_column: id\nsandbox: bogus\n---\nDo {id}\n",
                ),
                ("workers-input.csv", GOOD_CSV),
            ],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: 2,
            want: &["BATCH.md:3:", "`sandbox` must be auto, none or landlock"],
        },
        Case {
            what: "BATCH.md bad rate_limit_wait",
            files: &[
                (
                    "BATCH.md",
                    b"---\nid_column: id\nrate_limit_wait: abc\n---\nDo {id}\n",
                ),
                ("workers-input.csv", GOOD_CSV),
            ],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: 2,
            want: &["BATCH.md:3:", "`rate_limit_wait` must be a duration"],
        },
        Case {
            what: "BATCH.md max_cost_usd not a number",
            files: &[
                (
                    "BATCH.md",
                    b"---\nid_column: id\nmax_cost_usd: lots\n---\nDo {id}\n",
                ),
                ("workers-input.csv", GOOD_CSV),
            ],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: 2,
            want: &[
                "BATCH.md:3:",
                "`max_cost_usd` must be a number of US dollars above 0",
            ],
        },
        Case {
            what: "bad --retry-on",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--retry-on",
                "sometimes",
            ],
            agent: true,
            code: 2,
            want: &["--retry-on `sometimes`"],
        },
    ]
}

/// `--var`, an unknown flag, a bad placeholder.
pub(crate) fn var_and_unknown_flag_cases() -> Vec<Case> {
    vec![
        Case {
            what: "bad --var",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--var",
                "novalue",
            ],
            agent: true,
            code: 2,
            want: &["--var `novalue` must be NAME=VALUE"],
        },
        Case {
            what: "a --var the runner definition never uses",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--var",
                "foo=1",
            ],
            agent: true,
            code: 2,
            want: &["unknown --var `foo`; runner `exec` has no variables"],
        },
        Case {
            what: "unknown flag",
            files: &[],
            args: &["batch", "--frobnicate"],
            agent: false,
            code: 2,
            want: &["--frobnicate"],
        },
        Case {
            what: "verify placeholder unknown",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--verify",
                "test -f {nope}",
            ],
            agent: true,
            code: 2,
            want: &["--verify", "{nope}", "in the --verify command"],
        },
    ]
}
