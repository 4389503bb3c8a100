//! The bad-input catalogue: every case must exit 2 (or 3 for the environment), name the
//! file and line (where there is one) and what to do, and leave the tree byte-identical.

use crate::harness::{Sandbox, agent};

struct Case {
    what: &'static str,
    files: &'static [(&'static str, &'static [u8])],
    args: &'static [&'static str],
    /// Append `-- python3 fake_agent.py`.
    agent: bool,
    code: i32,
    want: &'static [&'static str],
}

const GOOD_CSV: &[u8] = b"id,mode\na,success\n";
const GOOD_INSTR: &[u8] = b"Do {id}. MODE={mode}\n";
const BATCH_ARGS: &[&str] = &[
    "batch",
    "--input",
    "in.csv",
    "--instruction",
    "instr.md",
    "--id-column",
    "id",
];

macro_rules! csv_case {
    ($what:expr, $csv:expr, $($want:expr),+) => {
        Case { what: $what, files: &[("in.csv", $csv), ("instr.md", GOOD_INSTR)], args: BATCH_ARGS, agent: true, code: 2, want: &[$($want),+] }
    };
}

const RUNNER_FILE_ARGS: &[&str] = &[
    "batch",
    "--input",
    "in.csv",
    "--instruction",
    "instr.md",
    "--runner-file",
    "r.toml",
];

/// A batch run with the runner definition `r.toml` holding `$toml`.
macro_rules! runner_file_case {
    ($what:expr, $toml:expr, $($want:expr),+) => {
        Case {
            what: $what,
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR), ("r.toml", $toml)],
            args: RUNNER_FILE_ARGS,
            agent: false,
            code: 2,
            want: &[$($want),+],
        }
    };
}

fn cases() -> Vec<Case> {
    vec![
        // --- runner definition files (`--runner-file`)
        runner_file_case!(
            "a result pointer without its leading slash",
            b"name='r'\nprogram='sh'\nargs=[]\noutput='json'\n[result]\ncost_usd = { pointer = 'cost' }\n",
            "r.toml:6:",
            "`result.cost_usd`",
            "`cost` is not a JSON pointer",
            "write \"/cost\""
        ),
        runner_file_case!(
            "prompt = file that no argument names",
            b"name='r'\nprogram='sh'\nargs=['-x']\nprompt='file'\n",
            "r.toml:4:",
            "add `{prompt_file}`",
            "prompt = \"stdin\""
        ),
        runner_file_case!(
            "[sandbox] vars naming a variable [vars] does not define",
            b"name='r'\nprogram='sh'\n[vars]\nmode='x'\n[sandbox]\nvars = { mdoe = 'y' }\n",
            "r.toml:6:",
            "`[sandbox] vars` sets `mdoe`, which `[vars]` does not define"
        ),
        runner_file_case!(
            "a relative [sandbox] writes entry",
            b"name='r'\nprogram='sh'\n[sandbox]\nwrites = ['~/.r/', 'state/']\n",
            "r.toml:4:",
            "`[sandbox] writes` entry `state/` is relative; write it from `~/` (HOME), `/` or `{env.NAME}`"
        ),
        runner_file_case!(
            "an unknown kind",
            b"name='r'\nkind = 'htp'\n",
            "r.toml:2:",
            "unknown kind `htp`; did you mean `http`?"
        ),
        runner_file_case!(
            "a misspelt key in a pointer table",
            b"name='r'\nprogram='sh'\noutput='json'\n[result]\nfinal_text = { pointr = '/r' }\n",
            "r.toml:5:",
            "`result.final_text`",
            "did you mean `pointer`?",
            "a JSON pointer such as"
        ),
        runner_file_case!(
            "a bad regex in [failure]",
            b"name='r'\nprogram='sh'\n[failure]\nignore = []\npatterns = [{ kind = 'auth', regex = '(' }]\n",
            "r.toml:5:",
            "`failure.patterns[0].regex`",
            "invalid regex"
        ),
        runner_file_case!(
            "a bad failure kind",
            b"name='r'\nprogram='sh'\n[failure]\npatterns = [{ kind = 'oops', regex = 'x' }]\n",
            "r.toml:4:",
            "(key `failure.patterns[0].kind`)",
            "unknown variant `oops`"
        ),
        runner_file_case!(
            "a bad exit code in [failure]",
            b"name='r'\nprogram='sh'\n[failure]\n\nexit_codes = { 0 = 'auth' }\n",
            "r.toml:5:",
            "`failure.exit_codes.0`",
            "an integer from 1 to 255"
        ),
        runner_file_case!(
            "a definition without a name",
            b"description = 'mine'\nprogram='sh'\n",
            "r.toml: `name` is required",
            "add `name = \"mine\"`"
        ),
        runner_file_case!(
            "an empty name",
            b"description = 'mine'\nname = ''\nprogram='sh'\n",
            "r.toml:2: `name` is required and must not be empty"
        ),
        Case {
            what: "--runner and --runner-file together",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR), ("r.toml", b"name='r'\nprogram='sh'\n")],
            args: &["batch", "--runner", "codex", "--runner-file", "r.toml"],
            agent: false,
            code: 2,
            want: &["--runner <NAME>", "cannot be used with", "--runner-file <FILE>"],
        },
        // --- flags a runner would drop
        Case {
            what: "--model with a runner that takes no model",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &["batch", "--input", "in.csv", "--instruction", "instr.md", "--runner", "amp", "--model", "m1"],
            agent: false,
            code: 2,
            want: &["runner `amp` has no place for --model", "`--model m1` would be dropped"],
        },
        Case {
            what: "--model with the exec runner",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &["batch", "--input", "in.csv", "--instruction", "instr.md", "--model", "opus"],
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
            args: &["batch", "--input", "in.csv", "--instruction", "instr.md", "--agent-arg", "--fast"],
            agent: true,
            code: 2,
            want: &[
                "so --agent-arg would be dropped",
                "(e.g. `-- ./agent.sh --fast`)",
            ],
        },
        // --- CSV input
        csv_case!(
            "ragged row",
            b"id,mode\na,success\nb\n",
            "in.csv:3:",
            "1 fields but the header has 2"
        ),
        csv_case!(
            "duplicate header",
            b"id,id\na,b\n",
            "in.csv:1:",
            "duplicate column name `id`"
        ),
        csv_case!(
            "unnamed column",
            b"id,,mode\na,b,c\n",
            "in.csv:1:",
            "column 2 has no name"
        ),
        csv_case!(
            "missing id column",
            b"key,mode\na,success\n",
            "in.csv:1:",
            "no id column `id`",
            "key, mode"
        ),
        csv_case!("empty id", b"id,mode\n,success\n", "in.csv:2:", "is empty"),
        csv_case!(
            "duplicate id",
            b"id,mode\na,success\na,x\n",
            "in.csv:3:",
            "duplicate id `a` (first on line 2)"
        ),
        csv_case!(
            "not UTF-8",
            b"id,mode\na,caf\xe9\n",
            "in.csv:2:",
            "CSV UTF-8"
        ),
        csv_case!("empty file", b"", "in.csv:1:", "no header row"),
        csv_case!(
            "quote never closed",
            b"id,mode\na,\"open\nb,x\n",
            "in.csv:2:",
            "never closed"
        ),
        csv_case!(
            "CRLF ragged row",
            b"id,mode\r\na,success\r\nb,x,y\r\n",
            "in.csv:3:"
        ),
        // --- instruction template
        Case {
            what: "unknown placeholder",
            files: &[("in.csv", GOOD_CSV), ("instr.md", b"Do {id} {nope}\n")],
            args: BATCH_ARGS,
            agent: true,
            code: 2,
            want: &[
                "instr.md",
                "{nope}",
                "in the instruction",
                "names are: id, mode",
            ],
        },
        Case {
            what: "unclosed brace",
            files: &[("in.csv", GOOD_CSV), ("instr.md", b"Do {id}\nand {mode\n")],
            args: BATCH_ARGS,
            agent: true,
            code: 2,
            want: &["instr.md:2:", "never closed"],
        },
        Case {
            what: "instruction not UTF-8",
            files: &[("in.csv", GOOD_CSV), ("instr.md", b"Do \xff{id}\n")],
            args: BATCH_ARGS,
            agent: true,
            code: 2,
            want: &["instr.md", "UTF-8"],
        },
        // --- BATCH.md
        Case {
            what: "BATCH.md without frontmatter",
            files: &[("BATCH.md", b"Do {id}\n"), ("workers-input.csv", GOOD_CSV)],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: 2,
            want: &["BATCH.md:1:", "frontmatter"],
        },
        Case {
            what: "BATCH.md frontmatter never closed",
            files: &[
                ("BATCH.md", b"---\nid_column: id\nDo {id}\n"),
                ("workers-input.csv", GOOD_CSV),
            ],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: 2,
            want: &["BATCH.md:1:", "never closed"],
        },
        Case {
            what: "BATCH.md wrong type",
            files: &[
                (
                    "BATCH.md",
                    b"---\nid_column: id\nmax_workers: many\n---\nDo {id}\n",
                ),
                ("workers-input.csv", GOOD_CSV),
            ],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: 2,
            want: &["BATCH.md:3:", "`max_workers` must be a whole number"],
        },
        Case {
            what: "BATCH.md bad YAML",
            files: &[
                ("BATCH.md", b"---\nid_column: [id\n---\nDo {id}\n"),
                ("workers-input.csv", GOOD_CSV),
            ],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: 2,
            want: &["BATCH.md", "not valid YAML"],
        },
        Case {
            what: "BATCH.md empty instruction",
            files: &[
                ("BATCH.md", b"---\nid_column: id\n---\n\n"),
                ("workers-input.csv", GOOD_CSV),
            ],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: 2,
            want: &["BATCH.md:4:", "instruction"],
        },
        Case {
            what: "BATCH.md invalid schema",
            files: &[
                (
                    "BATCH.md",
                    b"---\nid_column: id\noutput_schema: {type: 5}\n---\nDo {id}\n",
                ),
                ("workers-input.csv", GOOD_CSV),
            ],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: 2,
            want: &["BATCH.md:3:", "`output_schema` must be a valid JSON Schema"],
        },
        Case {
            what: "BATCH.md missing input",
            files: &[("BATCH.md", b"---\nid_column: id\n---\nDo {id}\n")],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: 2,
            want: &["workers-input.csv", "cannot read the input CSV"],
        },
        Case {
            what: "schema file not JSON",
            files: &[
                ("in.csv", GOOD_CSV),
                ("instr.md", GOOD_INSTR),
                ("s.json", b"{\n  \"type\": \n"),
            ],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--output-schema",
                "s.json",
            ],
            agent: true,
            code: 2,
            want: &["s.json:3:", "not valid JSON"],
        },
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
        Case {
            what: "--trace in a folder nobody can make files in, root included (/proc)",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &["batch", "--input", "in.csv", "--instruction", "instr.md", "--trace", "/proc/t.json"],
            agent: true,
            code: 2,
            want: &["--trace /proc/t.json: cannot write in the folder /proc"],
        },
        Case {
            what: "--worktree-copy without worktrees",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &["batch", "--input", "in.csv", "--instruction", "instr.md", "--worktree-copy", ".env"],
            agent: true,
            code: 2,
            want: &["--worktree-copy needs --isolate worktree: it prepares each teammate's git worktree"],
        },
        Case {
            what: "--junit onto a folder",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR), ("c/keep.txt", b"x\n")],
            args: &["batch", "--input", "in.csv", "--instruction", "instr.md", "--junit", "c"],
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
        // --- runner definitions
        Case {
            what: "unknown runner",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--runner",
                "hal9000",
            ],
            agent: false,
            code: 2,
            want: &["unknown runner `hal9000`", "claude, codex"],
        },
        runner_file_case!(
            "runner file with a bad value",
            b"name='r'\nprogram='sh'\nargs=[]\nprompt='stdin'\noutput='xml'\n",
            "r.toml:5:",
            "output"
        ),
        runner_file_case!(
            "runner file with an unknown placeholder",
            b"name='r'\nprogram='sh'\nargs=['{nope}']\nprompt='stdin'\noutput='text'\n",
            "r.toml:3:",
            "(key `args[0]`)",
            "{nope}"
        ),
        Case {
            what: "missing program",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--",
                "no-such-program-xyz",
            ],
            agent: false,
            code: 3,
            want: &["`no-such-program-xyz` was not found on PATH"],
        },
        Case {
            what: "missing program given as a path",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--",
                "./no-such-agent.sh",
            ],
            agent: false,
            code: 3,
            want: &["`./no-such-agent.sh` does not exist"],
        },
        Case {
            what: "agent file without the executable bit",
            files: &[
                ("in.csv", GOOD_CSV),
                ("instr.md", GOOD_INSTR),
                ("agent.sh", b"#!/bin/sh\nexit 0\n"),
            ],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--",
                "./agent.sh",
            ],
            agent: false,
            code: 3,
            want: &["`./agent.sh` is not executable", "chmod +x"],
        },
        Case {
            what: "exec without a command",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--runner",
                "exec",
            ],
            agent: false,
            code: 2,
            want: &["needs a command"],
        },
        // --- todo files, checkpoints, templates, store config
        Case {
            what: "inbox with a bad @after, selected",
            files: &[("S/todo.md", b"## Todo\n- [ ] a\n- [ ] b @after:x\n")],
            args: &["resolve", "--store", "S", "--yes", "--select", "2"],
            agent: true,
            code: 2,
            want: &["todo.md:3:", "@after"],
        },
        Case {
            what: "a cycle among selected inbox items",
            files: &[(
                "S/todo.md",
                b"## Todo\n- [ ] a\n- [ ] b\n- [ ] c\n- [ ] d\n- [ ] e @after:6\n- [ ] f @after:5\n",
            )],
            args: &["resolve", "--store", "S", "--yes", "--select", "5,6"],
            agent: true,
            code: 2,
            // The inbox's numbers and line (the batch would number them 1 and 2).
            want: &["todo.md", "line 6: a cycle of prerequisites: 5 → 6 → 5"],
        },
        Case {
            what: "a --verify placeholder a todo item has no value for",
            files: &[("S/todo.md", b"## Todo\n- [ ] a\n")],
            args: &[
                "resolve",
                "--store",
                "S",
                "--yes",
                "--verify",
                "test -f {id}",
            ],
            agent: true,
            code: 2,
            want: &["--verify", "{id}", "names are: item, title, checkpoint"],
        },
        Case {
            what: "inbox not UTF-8",
            files: &[("S/todo.md", b"## Todo\n- [ ] caf\xe9\n")],
            args: &["list", "--store", "S"],
            agent: false,
            code: 2,
            want: &["todo.md", "UTF-8"],
        },
        Case {
            what: "batch with a cycle",
            files: &[(
                "S/todo-1.md",
                b"---\nstatus: pending\n---\n## Todo\n- [ ] a @after:2\n- [ ] b @after:1\n",
            )],
            args: &["run", "S/todo-1.md"],
            agent: true,
            code: 2,
            want: &["todo-1.md", "a cycle of prerequisites: 1 → 2 → 1"],
        },
        Case {
            what: "batch that does not exist",
            files: &[],
            args: &["run", "S/todo-9.md"],
            agent: true,
            code: 2,
            want: &["todo-9.md", "no such batch file"],
        },
        Case {
            what: "a file that is no batch (no items)",
            files: &[("S/notes.txt", b"Some notes.\nNothing to tick here.\n")],
            args: &["run", "S/notes.txt"],
            agent: true,
            code: 2,
            want: &["notes.txt: holds no items", "not a todo batch"],
        },
        Case {
            what: "a CSV batch's BATCH.md given to run",
            files: &[
                ("S/BATCH.md", b"---\nid_column: id\n---\nDo {id}\n"),
                ("S/workers-input.csv", GOOD_CSV),
            ],
            args: &["run", "S/BATCH.md"],
            agent: true,
            code: 2,
            want: &["BATCH.md: holds no items", "`runner batch "],
        },
        Case {
            what: "batch checkpoint missing",
            files: &[("S/todo-1.md", b"## Todo\n- [ ] a @context:cp-gone.md\n")],
            args: &["run", "S/todo-1.md"],
            agent: true,
            code: 2,
            want: &["todo-1.md: line 2: item 1:", "cp-gone.md: no such checkpoint"],
        },
        Case {
            what: "batch checkpoint outside the store",
            files: &[
                ("S/todo-1.md", b"## Todo\n- [ ] a @context:../secret.md\n"),
                ("secret.md", b"x"),
            ],
            args: &["run", "S/todo-1.md"],
            agent: true,
            code: 2,
            want: &["todo-1.md: line 2", "leaves the store"],
        },
        Case {
            what: "broken teammate template",
            files: &[
                ("S/todo-1.md", b"## Todo\n- [ ] a\n"),
                ("S/templates/teammate.md", b"Hello\n{{ item.nope }}\n"),
            ],
            args: &["run", "S/todo-1.md"],
            agent: true,
            code: 2,
            want: &["templates/teammate.md", "line 2"],
        },
        Case {
            what: "broken checkpoint template",
            files: &[
                ("S/todo.md", b"## Todo\n"),
                ("S/templates/checkpoint.md", b"---\n{% if %}\n"),
            ],
            args: &["add", "--store", "S", "x"],
            agent: false,
            code: 2,
            want: &["templates/checkpoint.md:2:"],
        },
        Case {
            what: "store runner.toml with an unknown key",
            files: &[
                ("S/todo-1.md", b"## Todo\n- [ ] a\n"),
                ("S/runner.toml", b"runner = 'exec'\nmax_wrokers = 3\n"),
            ],
            args: &["run", "S/todo-1.md"],
            agent: true,
            code: 2,
            want: &["runner.toml:2:", "max_wrokers"],
        },
        Case {
            what: "add with an empty text",
            files: &[],
            args: &["add", "--store", "S", "  "],
            agent: false,
            code: 2,
            want: &["the item text is empty"],
        },
        Case {
            what: "--junit over the input CSV",
            files: &[("in.csv", GOOD_CSV), ("instr.md", GOOD_INSTR)],
            args: &[
                "batch",
                "--input",
                "in.csv",
                "--instruction",
                "instr.md",
                "--junit",
                "in.csv",
            ],
            agent: true,
            code: 2,
            want: &[
                "in.csv",
                "the JUnit report would overwrite the input",
                "--junit",
            ],
        },
        Case {
            what: "--junit over the todo batch file",
            files: &[("S/todo-1.md", b"## Todo\n- [ ] a\n")],
            args: &["run", "S/todo-1.md", "--junit", "S/todo-1.md"],
            agent: true,
            code: 2,
            want: &[
                "todo-1.md",
                "the JUnit report would overwrite the batch file",
            ],
        },
    ]
}

#[test]
fn every_bad_input_exits_2_or_3_names_the_place_and_changes_nothing() {
    let cases = cases();
    assert!(cases.len() >= 25, "the catalogue keeps at least 25 cases");
    let fake = agent("fake_agent.py");
    let mut failures = Vec::new();
    for case in &cases {
        let sb = Sandbox::new();
        for (rel, bytes) in case.files {
            sb.write(rel, bytes);
        }
        let before = sb.tree();
        let mut args: Vec<&str> = case.args.to_vec();
        if case.agent {
            args.extend_from_slice(&["--", "python3", &fake]);
        }
        let r = sb.run(&args);
        let mut problems = Vec::new();
        if r.code != case.code {
            problems.push(format!("exit {} instead of {}", r.code, case.code));
        }
        for want in case.want {
            if !r.stderr.contains(want) {
                problems.push(format!("stderr lacks {want:?}"));
            }
        }
        if r.stderr.contains("panicked") {
            problems.push("panicked".into());
        }
        if sb.tree() != before {
            problems.push("files changed".into());
        }
        if !problems.is_empty() {
            failures.push(format!("{}: {}\n{r:?}", case.what, problems.join(", ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Hostile sizes (issue 25): a header of 10,001 columns, a 17 MiB cell, a JSON Lines line
/// over 16 MiB or with 10,001 keys, a row whose task text (instruction with its values) is
/// over 16 MiB, a 17 MiB instruction — each exits 2 naming the file and line, before a
/// teammate starts, with nothing written.
#[test]
fn hostile_input_sizes_exit_2_naming_the_line_and_change_nothing() {
    const MIB: usize = 1 << 20;
    let wide: Vec<String> = (0..10_001).map(|i| format!("c{i}")).collect();
    let big = "x".repeat(17 * MIB);
    let six = "y".repeat(6 * MIB);
    let keys: Vec<String> = (0..10_001).map(|i| format!("\"k{i}\":1")).collect();
    // (what, files written over the good in.csv and instr.md, the input, what stderr says)
    type Hostile<'a> = (&'a str, Vec<(&'a str, Vec<u8>)>, &'a str, Vec<&'a str>);
    let cases: Vec<Hostile> = vec![
        (
            "10,001 columns",
            vec![("in.csv", format!("{}\n", wide.join(",")).into_bytes())],
            "in.csv",
            vec!["in.csv:1:", "10001 columns, more than the 10000"],
        ),
        (
            "a 17 MiB cell",
            vec![(
                "in.csv",
                format!("id,mode\na,success\nb,\"{big}\"\nc,success\n").into_bytes(),
            )],
            "in.csv",
            vec!["in.csv:3:", "this row is over 16 MiB"],
        ),
        (
            "a JSON Lines line over 16 MiB",
            vec![(
                "rows.jsonl",
                format!(
                    "{{\"id\":\"a\",\"mode\":\"success\"}}\n{{\"id\":\"b\",\"mode\":\"{big}\"}}\n"
                )
                .into_bytes(),
            )],
            "rows.jsonl",
            vec!["rows.jsonl:2:", "this row is over 16 MiB"],
        ),
        (
            "a JSON Lines row of 10,001 keys",
            vec![(
                "rows.jsonl",
                format!("{{\"id\":\"a\",\"mode\":\"success\",{}}}\n", keys.join(",")).into_bytes(),
            )],
            "rows.jsonl",
            vec!["rows.jsonl:1:", "columns, more than the 10000"],
        ),
        (
            "a task text over 16 MiB (a 6 MiB value used three times)",
            vec![
                (
                    "in.csv",
                    format!("id,mode\na,success\nb,{six}\n").into_bytes(),
                ),
                ("instr.md", b"Do {id}: {mode} {mode} {mode}\n".to_vec()),
            ],
            "in.csv",
            vec!["in.csv:3:", "over the 16 MiB an item may have"],
        ),
        (
            "a 17 MiB instruction",
            vec![("instr.md", big.clone().into_bytes())],
            "in.csv",
            vec!["instr.md", "the instruction is over 16 MiB"],
        ),
    ];
    let fake = agent("fake_agent.py");
    let mut failures = Vec::new();
    for (what, files, input, want) in cases {
        let sb = Sandbox::new();
        sb.write("in.csv", GOOD_CSV);
        sb.write("instr.md", GOOD_INSTR);
        for (rel, bytes) in &files {
            sb.write(rel, bytes);
        }
        let before = sb.tree();
        let r = sb.run(&[
            "batch",
            "--input",
            input,
            "--instruction",
            "instr.md",
            "--",
            "python3",
            &fake,
        ]);
        let mut problems = Vec::new();
        if r.code != 2 {
            problems.push(format!("exit {}", r.code));
        }
        for w in &want {
            if !r.stderr.contains(w) {
                problems.push(format!("stderr lacks {w:?}"));
            }
        }
        if sb.tree() != before {
            problems.push("files changed".into());
        }
        if !problems.is_empty() {
            let stderr: String = r.stderr.chars().take(600).collect();
            failures.push(format!("{what}: {}\n{stderr}", problems.join(", ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `cmd` run by a user who cannot write in the sandbox's `ro` folder (mode 0555): as it
/// is unless it is root (root writes anywhere), then as `nobody` (setpriv), running a link
/// (or a copy) of the binary from the sandbox, since the build folder may be closed to it.
fn as_user_who_cannot_write(sb: &Sandbox, cmd: std::process::Command) -> std::process::Command {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod")
    };
    if !sb.join("ro").exists() {
        std::fs::create_dir(sb.join("ro")).expect("mkdir");
    }
    mode(&sb.join("ro"), 0o555);
    let meta = std::fs::metadata("/proc/self").expect("/proc");
    if std::os::unix::fs::MetadataExt::uid(&meta) != 0 {
        return cmd;
    }
    mode(sb.path(), 0o777);
    let bin = sb.join("bin-runner");
    if std::fs::hard_link(cmd.get_program(), &bin).is_err() {
        std::fs::copy(cmd.get_program(), &bin).expect("copy the runner binary");
    }
    let mut as_nobody = std::process::Command::new("setpriv");
    as_nobody.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    as_nobody
        .arg(&bin)
        .args(cmd.get_args())
        .current_dir(sb.path());
    as_nobody.env("NO_COLOR", "1").env("HOME", sb.join("home"));
    as_nobody
}

/// A file asked for in a folder the user may not write (`-o`, `--junit`, `--trace`) is
/// refused before any teammate runs, naming the folder (`-o` was a confusing batch-record or
/// create error; `--junit`/`--trace` failed only after the whole batch had run).
#[test]
fn a_folder_the_user_cannot_write_is_refused_before_anything_runs() {
    let fake = agent("fake_agent.py");
    let cases: [(&[&str], &str); 3] = [
        (
            &["-o", "ro/out.csv"],
            "ro/out.csv: cannot write in the folder",
        ),
        (
            &["--junit", "ro/j.xml"],
            "--junit ro/j.xml: cannot write in the folder",
        ),
        (
            &["--trace", "ro/t.json"],
            "--trace ro/t.json: cannot write in the folder",
        ),
    ];
    for (extra, want) in cases {
        let sb = Sandbox::new();
        sb.write("in.csv", GOOD_CSV);
        sb.write("instr.md", b"Do {id}\n");
        let mut args = vec!["batch", "--input", "in.csv", "--instruction", "instr.md"];
        args.extend(["--id-column", "id"]);
        args.extend(extra);
        args.extend(["--", "python3", &fake]);
        let mut cmd = as_user_who_cannot_write(&sb, sb.cmd(&args));
        let before = sb.tree();
        let r: crate::harness::Run = cmd.output().expect("spawn runner").into();
        assert_eq!(r.code, 2, "{extra:?}: {r:?}");
        assert!(r.stderr.contains(want), "{extra:?}: {r:?}");
        assert!(!r.stderr.contains("started"), "{extra:?}: {r:?}");
        assert_eq!(sb.tree(), before, "{extra:?}: nothing on disk changes");
    }
}

/// Output folders that are not there yet are made, as most tools do (`-o newdir/`,
/// `--junit reports/j.xml`, `--trace tr/t.json`); a file standing where a folder must be is
/// refused before anything runs, every such problem in one message, and nothing changes.
#[test]
fn missing_output_folders_are_made_and_every_blocked_one_is_named_at_once() {
    let fake = agent("fake_agent.py");
    let sb = Sandbox::new();
    sb.write("in.csv", GOOD_CSV);
    sb.write("instr.md", b"Do {id}\n");
    let run = |extra: &[&str]| -> crate::harness::Run {
        let mut args = vec!["batch", "--input", "in.csv", "--instruction", "instr.md"];
        args.extend(["--id-column", "id"]);
        args.extend(extra);
        args.extend(["--", "python3", &fake]);
        sb.cmd(&args).output().expect("spawn runner").into()
    };
    let r = run(&[
        "-o",
        "new/deeper/",
        "--junit",
        "reports/ci/j.xml",
        "--trace",
        "tr/t.json",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    for made in [
        "new/deeper/workers-output.csv",
        "reports/ci/j.xml",
        "tr/t.json",
    ] {
        assert!(sb.join(made).is_file(), "{made}: {r:?}");
    }
    sb.write("blocker", b"a file, not a folder\n");
    let before = sb.tree();
    // A path that names a folder is no file to write.
    let r = run(&["--junit", "reports/"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("that is a folder"), "{r:?}");
    assert_eq!(sb.tree(), before, "nothing on disk changes");
    let r = run(&[
        "-o",
        "blocker/out.csv",
        "--junit",
        "blocker/j.xml",
        "--trace",
        "blocker/sub/t.json",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("blocker/out.csv: ")
            && r.stderr.contains("--junit blocker/j.xml: ")
            && r.stderr.contains("--trace blocker/sub/t.json: ")
            && r.stderr.contains("blocker is a file, not a folder"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing on disk changes");
}

/// `runner list` only reads: a store the user may not write is listed, with a warning that
/// its inbox was not created (it failed "cannot open the lock", exit 3).
#[test]
fn list_shows_a_store_the_user_cannot_write() {
    let sb = Sandbox::new();
    let mut cmd = as_user_who_cannot_write(&sb, sb.cmd(&["list", "--store", "ro"]));
    let before = sb.tree();
    let r: crate::harness::Run = cmd.output().expect("spawn runner").into();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Todo (0)"), "{r:?}");
    assert!(
        r.stderr.contains("warning: the inbox was not created"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing on disk changes");
}
