//! The bad-input catalogue of `bad_input.rs`: each case is the files written, the command,
//! the exit code and what stderr must say; one function per kind of input (the flags'
//! are in `bad_input_flags.rs`).

use crate::bad_input_flags::{
    dropped_flag_cases, duration_and_limit_cases, flag_value_cases, output_file_flag_cases,
    var_and_unknown_flag_cases,
};

pub(crate) struct Case {
    pub(crate) what: &'static str,
    pub(crate) files: &'static [(&'static str, &'static [u8])],
    pub(crate) args: &'static [&'static str],
    /// Append `-- python3 fake_agent.py`.
    pub(crate) agent: bool,
    pub(crate) code: i32,
    pub(crate) want: &'static [&'static str],
}

pub(crate) const GOOD_CSV: &[u8] = b"id,mode\na,success\n";
pub(crate) const GOOD_INSTR: &[u8] = b"Do {id}. MODE={mode}\n";
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

/// The whole catalogue, section by section.
pub(crate) fn cases() -> Vec<Case> {
    [
        definition_file_cases(),
        dropped_flag_cases(),
        csv_cases(),
        instruction_cases(),
        batch_md_cases(),
        flag_value_cases(),
        output_file_flag_cases(),
        duration_and_limit_cases(),
        var_and_unknown_flag_cases(),
        runner_definition_cases(),
        store_cases(),
        more_store_cases(),
        crate::bad_input_notify::notify_cases(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Runner definition files (`--runner-file`).
fn definition_file_cases() -> Vec<Case> {
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
    ]
}

/// CSV input.
fn csv_cases() -> Vec<Case> {
    vec![
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
    ]
}

/// The instruction template.
fn instruction_cases() -> Vec<Case> {
    vec![
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
    ]
}

/// BATCH.md.
fn batch_md_cases() -> Vec<Case> {
    vec![
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
            what: "BATCH.md notify not a target",
            files: &[
                (
                    "BATCH.md",
                    b"---\nid_column: id\nnotify: [bell, 42]\n---\nDo {id}\n",
                ),
                ("workers-input.csv", GOOD_CSV),
            ],
            args: &["batch", "BATCH.md"],
            agent: true,
            code: 2,
            want: &[
                "BATCH.md:3:",
                "`notify` must be an http:// or https:// webhook URL",
            ],
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
    ]
}

/// Runner definitions.
fn runner_definition_cases() -> Vec<Case> {
    vec![
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
    ]
}

/// Todo files, checkpoints, templates, store config (1 of 2).
fn store_cases() -> Vec<Case> {
    vec![
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
    ]
}

/// Todo files, checkpoints, templates, store config (2 of 2).
fn more_store_cases() -> Vec<Case> {
    vec![
        Case {
            what: "batch checkpoint missing",
            files: &[("S/todo-1.md", b"## Todo\n- [ ] a @context:cp-gone.md\n")],
            args: &["run", "S/todo-1.md"],
            agent: true,
            code: 2,
            want: &[
                "todo-1.md: line 2: item 1:",
                "cp-gone.md: no such checkpoint",
            ],
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
