//! The built-in runner definitions against fake CLIs that print each real CLI's output
//! shapes (tests/agents/fake_cli.py, tests/fixtures/cli/). Issue: runner definitions.

use std::collections::BTreeMap;

use crate::harness::{Sandbox, agent, by_id};

const CLIS: &[&str] = &[
    "claude",
    "codex",
    "gemini",
    "opencode",
    "cursor-agent",
    "amp",
    "aider",
];

/// A sandbox whose bin/ holds every fake CLI, with a one-row batch (id 1, the id the
/// fixtures' reports carry).
fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("bin")).expect("bin");
    std::fs::create_dir_all(sb.join("record")).expect("record");
    for cli in CLIS {
        std::os::unix::fs::symlink(agent("fake_cli.py"), sb.join("bin").join(cli))
            .expect("symlink");
    }
    sb.write("in.csv", "id\n1\n");
    sb.write("instr.md", "Add a greet helper for item {id}.\n");
    sb
}

fn path_with_bin(sb: &Sandbox) -> String {
    format!(
        "{}:{}",
        sb.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn run_cli(
    sb: &Sandbox,
    cli: &str,
    scenario: &str,
    extra: &[&str],
) -> (crate::harness::Run, BTreeMap<String, String>) {
    let out = sb
        .join(&format!("out-{cli}-{scenario}.csv"))
        .display()
        .to_string();
    let mut args = vec![
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--output",
        &out,
        "--runner",
        cli,
        "--format",
        "plain",
        // The fake CLIs fail the same way on every attempt: a rate limit ends the item at
        // once instead of pausing the team for up to an hour (the pause has its own tests).
        "--rate-limit-wait",
        "0s",
    ];
    args.extend_from_slice(extra);
    let r: crate::harness::Run = sb
        .cmd(&args)
        .env("PATH", path_with_bin(sb))
        .env("FAKE_CLI_SCENARIO", scenario)
        .env("FAKE_CLI_RECORD", sb.join("record"))
        .env("CLAUDECODE", "1")
        .output()
        .expect("run")
        .into();
    let rows = by_id(std::path::Path::new(&out), "id");
    (r, rows["1"].clone())
}

fn recorded(sb: &Sandbox, cli: &str) -> serde_json::Value {
    serde_json::from_str(&sb.read(&format!("record/{cli}-1.json"))).expect("record")
}

fn argv(v: &serde_json::Value) -> Vec<String> {
    v["argv"]
        .as_array()
        .expect("argv")
        .iter()
        .map(|a| a.as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn every_cli_success_completes_and_every_failure_shape_fails() {
    let sb = sandbox();
    for cli in CLIS {
        let (r, row) = run_cli(&sb, cli, "success", &[]);
        assert_eq!(r.code, 0, "{cli} success: {r:?}");
        assert_eq!(row["status"], "completed", "{cli}: {row:?}");
        assert_eq!(row["summary"], "did it", "{cli}: {row:?}");
        for scenario in ["error", "max_turns", "no_json"] {
            if !std::path::Path::new(&format!(
                "{}/tests/fixtures/cli/{cli}/{scenario}.out",
                env!("CARGO_MANIFEST_DIR")
            ))
            .exists()
            {
                continue;
            }
            let (r, row) = run_cli(&sb, cli, scenario, &[]);
            assert_eq!(r.code, 1, "{cli} {scenario}: {r:?}");
            assert_eq!(row["status"], "failed", "{cli} {scenario}: {row:?}");
            assert!(
                !row["error"].is_empty(),
                "{cli} {scenario}: a reason is given"
            );
        }
    }
}

#[test]
fn claude_rate_limit_with_exit_0_is_failed_not_completed() {
    let sb = sandbox();
    let (_, row) = run_cli(&sb, "claude", "error", &[]);
    assert_eq!(row["status"], "failed");
    assert_eq!(row["exit_code"], "0");
    assert!(
        row["error"].contains("the agent reported an error: API Error: Rate limit reached"),
        "{row:?}"
    );
    assert_eq!(row["failure_kind"], "rate_limited", "{row:?}");
    let (_, row) = run_cli(&sb, "claude", "max_turns", &[]);
    assert!(row["error"].starts_with("exited with code 1"), "{row:?}");
}

#[test]
fn a_stream_with_a_byte_order_mark_and_lone_surrogates_still_completes() {
    let sb = sandbox();
    let (r, row) = run_cli(&sb, "claude", "bom_surrogate", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(row["status"], "completed", "{row:?}");
    assert_eq!(row["summary"], "renamed caf\u{FFFD}.txt", "{row:?}");
    assert_eq!(row["cost_usd"], "0.01", "the result line was read: {row:?}");
}

#[test]
fn claude_at_its_turn_limit_says_so_not_only_its_exit_code() {
    let sb = sandbox();
    let (_, row) = run_cli(&sb, "claude", "max_turns_no_errors", &[]);
    assert_eq!(row["status"], "failed", "{row:?}");
    assert_eq!(row["failure_kind"], "agent_error", "{row:?}");
    assert_eq!(
        row["error"], "exited with code 1: stopped at its turn limit after 3 turns",
        "{row:?}"
    );
    // With its `errors` text, the words of both.
    let (_, row) = run_cli(&sb, "claude", "max_turns", &[]);
    assert_eq!(
        row["error"],
        "exited with code 1: stopped at its turn limit after 3 turns: Reached maximum number of turns (2)",
        "{row:?}"
    );
}

#[test]
fn codex_turn_failed_fails_the_attempt_even_when_codex_exits_0_after_a_report() {
    let sb = sandbox();
    let (_, row) = run_cli(&sb, "codex", "failed_exit_0", &[]);
    assert_eq!(row["status"], "failed", "{row:?}");
    assert_eq!(row["exit_code"], "0", "{row:?}");
    assert_eq!(row["failure_kind"], "api_error", "{row:?}");
    assert!(
        row["error"].contains("the agent reported an error: stream disconnected before completion"),
        "{row:?}"
    );
}

#[test]
fn claude_argv_stdin_env_and_usage_columns() {
    let sb = sandbox();
    let (r, row) = run_cli(
        &sb,
        "claude",
        "success",
        &[
            "--model",
            "opus",
            "--agent-arg",
            "--max-turns",
            "--agent-arg",
            "7",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let rec = recorded(&sb, "claude");
    let ws = sb
        .join("out-claude-success.runner/teammates/1-1/work")
        .display()
        .to_string();
    assert_eq!(
        argv(&rec),
        vec![
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--add-dir",
            &ws,
            "--permission-mode",
            "acceptEdits",
            "--model",
            "opus",
            "--max-turns",
            "7"
        ]
    );
    let prompt = sb.prompt("out-claude-success.runner", "1");
    assert_eq!(
        rec["stdin"].as_str(),
        Some(prompt.as_str()),
        "the prompt arrives on stdin"
    );
    assert_eq!(
        rec["claudecode_set"], false,
        "CLAUDECODE is unset for the child"
    );
    assert_eq!(row["session_id"], "3f6c1c1e-8a2b-4d7e-9b1a-5c2e7d9f0a41");
    // Claude said 0.0412965; outputs carry micro-dollars.
    assert_eq!(row["cost_usd"], "0.041296");
    assert_eq!(row["turns"], "3");
    assert!(
        !row["input_tokens"].is_empty() && !row["output_tokens"].is_empty(),
        "{row:?}"
    );
    assert!(
        r.stdout.contains("$0.041296"),
        "the closing summary has the total cost: {r:?}"
    );
    let team: serde_json::Value =
        serde_json::from_str(&sb.read("out-claude-success.runner/team.json")).expect("team");
    assert_eq!(team["cost_usd"], 0.0412965);
}

#[test]
fn definition_variables_can_be_overridden() {
    let sb = sandbox();
    run_cli(&sb, "claude", "success", &["--var", "permission_mode=plan"]);
    assert!(
        argv(&recorded(&sb, "claude"))
            .windows(2)
            .any(|w| w == ["--permission-mode", "plan"])
    );
    run_cli(&sb, "codex", "success", &["--var", "sandbox=read-only"]);
    let codex = argv(&recorded(&sb, "codex"));
    assert!(
        codex.windows(2).any(|w| w == ["--sandbox", "read-only"]),
        "{codex:?}"
    );
}

#[test]
fn codex_gets_a_private_sqlite_home_and_reads_its_prompt_from_stdin() {
    let sb = sandbox();
    let (_, row) = run_cli(&sb, "codex", "success", &[]);
    let rec = recorded(&sb, "codex");
    let args = argv(&rec);
    assert_eq!(args.first().map(String::as_str), Some("exec"));
    assert_eq!(
        args.last().map(String::as_str),
        Some("-"),
        "`-` (prompt on stdin) stays last"
    );
    let home = rec["env"]["CODEX_SQLITE_HOME"]
        .as_str()
        .expect("CODEX_SQLITE_HOME");
    assert!(
        home.starts_with(
            &sb.join("out-codex-success.runner/teammates/1-1/work/state")
                .display()
                .to_string()
        ),
        "{home}"
    );
    assert_eq!(row["session_id"], "019ad3f4-81c0-7800-8aa1-bbab2a035a53");
    assert_eq!(row["input_tokens"], "24763");
}

#[test]
fn aider_reads_a_prompt_file_and_cursor_takes_the_prompt_as_last_argument() {
    let sb = sandbox();
    run_cli(&sb, "aider", "success", &[]);
    let rec = recorded(&sb, "aider");
    let prompt = sb.prompt("out-aider-success.runner", "1");
    assert_eq!(rec["prompt_file"].as_str(), Some(prompt.as_str()));
    assert!(rec["stdin"].is_null());
    run_cli(&sb, "cursor-agent", "success", &[]);
    let rec = recorded(&sb, "cursor-agent");
    let prompt = sb.prompt("out-cursor-agent-success.runner", "1");
    assert_eq!(argv(&rec).last().map(String::as_str), Some(prompt.as_str()));
}

#[test]
fn runners_lists_installed_clis_with_versions_and_hints_for_missing_ones() {
    let sb = sandbox();
    std::fs::remove_file(sb.join("bin/amp")).expect("rm");
    let r: crate::harness::Run = sb
        .cmd(&["runners"])
        .env("PATH", path_with_bin(&sb))
        .output()
        .expect("run")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let claude = r
        .stdout
        .lines()
        .find(|l| l.starts_with("claude "))
        .expect("claude line");
    assert!(
        claude.contains(&sb.join("bin/claude").display().to_string())
            && claude.contains("claude 9.9.9 (fake)"),
        "{claude}"
    );
    let amp = r
        .stdout
        .lines()
        .find(|l| l.starts_with("amp "))
        .expect("amp line");
    assert!(amp.contains("missing") && amp.contains("install:"), "{amp}");
}

/// `runner runners --store` lists a definition only the store has, and `--runner-file` one
/// more, each checked and marked with the file it came from (its program asked its version
/// only with `--versions`); a broken file is exit 2.
#[test]
fn runners_lists_the_store_s_own_definitions_and_a_runner_file() {
    let sb = sandbox();
    let def = |name: &str, program: &str| {
        format!(
            "name='{name}'\ndescription='{name} here'\nprogram='{program}'\nversion_args=['--version']\n"
        )
    };
    sb.write("st/runners/mocka.toml", def("mocka", "claude"));
    sb.write("st/runners/notes.txt", "not a definition");
    sb.write("x.toml", def("mine", "no-such-cli-xyz"));
    let runners = |args: &[&str]| -> crate::harness::Run {
        sb.cmd(args)
            .env("PATH", path_with_bin(&sb))
            .output()
            .expect("run")
            .into()
    };
    let r = runners(&["runners", "--store", "st", "--runner-file", "x.toml"]);
    assert_eq!(r.code, 0, "{r:?}");
    let line = |name: &str| {
        r.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} line: {r:?}"))
            .to_owned()
    };
    let mocka = line("mocka");
    assert!(
        mocka.contains(&sb.join("bin/claude").display().to_string())
            && mocka.contains("(not run; --versions)")
            && mocka.contains("[st/runners/mocka.toml] mocka here"),
        "{mocka}"
    );
    // A file's program is asked its version only when the user asks.
    let asked = runners(&["runners", "--store", "st", "--versions"]);
    assert!(
        asked
            .stdout
            .lines()
            .any(|l| l.starts_with("mocka ") && l.contains("claude 9.9.9 (fake)")),
        "{asked:?}"
    );
    let mine = line("mine");
    assert!(
        mine.contains("missing") && mine.contains("[x.toml]"),
        "{mine}"
    );
    assert!(!r.stdout.contains("notes"), "{r:?}");
    assert!(!line("claude").contains('['), "the built-in is not marked");
    // A broken definition is refused as a run would refuse it.
    sb.write(
        "st/runners/broken.toml",
        "name='broken'\nprogram='x'\nprompt='file'\n",
    );
    let r = runners(&["runners", "--store", "st"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("broken.toml:3:"), "{r:?}");
}

#[test]
fn without_a_runner_the_first_installed_cli_is_used_and_none_is_exit_3() {
    let sb = sandbox();
    std::fs::remove_file(sb.join("bin/claude")).expect("rm");
    let args = [
        "batch",
        "--input",
        "in.csv",
        "--instruction",
        "instr.md",
        "--format",
        "plain",
    ];
    let r: crate::harness::Run = sb
        .cmd(&args)
        .env("PATH", path_with_bin(&sb))
        .env("FAKE_CLI_RECORD", sb.join("record"))
        .output()
        .expect("run")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        sb.join("record/codex-1.json").exists(),
        "codex comes after claude in the order"
    );
    let empty = sb.join("empty-bin");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let before = sb.tree();
    let r: crate::harness::Run = sb
        .cmd(&args)
        .env("PATH", &empty)
        .output()
        .expect("run")
        .into();
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains("looked for: claude, codex, gemini"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before);
    // A chosen CLI that is missing names its install hint.
    let r: crate::harness::Run = sb
        .cmd(&[
            "batch",
            "--input",
            "in.csv",
            "--instruction",
            "instr.md",
            "--runner",
            "gemini",
        ])
        .env("PATH", &empty)
        .output()
        .expect("run")
        .into();
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr
            .contains("`gemini` was not found on PATH; npm install -g @google/gemini-cli"),
        "{r:?}"
    );
}

#[test]
fn a_user_definition_overrides_and_a_broken_one_is_exit_2() {
    let sb = sandbox();
    sb.write("mine.toml", "name='mine'\nprogram='claude'\nargs=['-p','--output-format','stream-json']\nprompt='stdin'\noutput='jsonl'\ncolour='blue'\n[result]\nfinal_text={pointer='/result',when={'/type'='result'}}\n");
    let out = sb.join("mine.csv").display().to_string();
    let r: crate::harness::Run = sb
        .cmd(&[
            "batch",
            "--input",
            "in.csv",
            "--instruction",
            "instr.md",
            "--output",
            &out,
            "--runner-file",
            "mine.toml",
        ])
        .env("PATH", path_with_bin(&sb))
        .env("FAKE_CLI_RECORD", sb.join("record"))
        .output()
        .expect("run")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("mine.toml:6: unknown key `colour` ignored"),
        "{r:?}"
    );
    assert_eq!(
        argv(&recorded(&sb, "claude")),
        vec!["-p", "--output-format", "stream-json"]
    );
    sb.write(
        "bad.toml",
        "name='bad'\nprogram='claude'\nargs=['-p']\nprompt='carrier-pigeon'\noutput='text'\n",
    );
    let before = sb.tree();
    let r: crate::harness::Run = sb
        .cmd(&[
            "batch",
            "--input",
            "in.csv",
            "--instruction",
            "instr.md",
            "--runner-file",
            "bad.toml",
        ])
        .env("PATH", path_with_bin(&sb))
        .output()
        .expect("run")
        .into();
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("bad.toml:4:") && r.stderr.contains("prompt"),
        "{r:?}"
    );
    assert_eq!(sb.tree(), before);
}

/// Issue 29: `runner runners --check` judges a definition against recorded transcripts,
/// offline. Every sample in examples/transcripts/ gets the verdict it names.
#[test]
fn every_recorded_transcript_gets_the_verdict_it_expects() {
    let sb = Sandbox::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/transcripts");
    for cli in ["claude", "codex", "gemini", "opencode"] {
        let mut files: Vec<String> = std::fs::read_dir(root.join(cli))
            .expect("transcripts")
            .flatten()
            .map(|e| e.path().display().to_string())
            .collect();
        files.sort();
        let mut args = vec!["runners", "--check", cli];
        args.extend(files.iter().map(String::as_str));
        let r = sb.run(&args);
        assert_eq!(r.code, 0, "{cli}: {r:?}");
        let judged: Vec<&str> = r.stdout.lines().filter(|l| l.ends_with("  ok")).collect();
        assert_eq!(judged.len(), files.len(), "{cli}: {r:?}");
    }
}

#[test]
fn a_transcript_that_gets_another_verdict_fails_the_check_and_a_bad_one_is_refused() {
    let sb = Sandbox::new();
    sb.write(
        "limit.toml",
        "exit_code = 1\nexpect = \"completed\"\nstderr = '''\nError: 429 Too Many Requests\n'''\n",
    );
    let r = sb.run(&["runners", "--check", "exec", "limit.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains("failed")
            && r.stdout.contains("rate_limited")
            && r.stdout.contains("EXPECTED completed"),
        "{r:?}"
    );
    sb.write("bad.toml", "exit_code = 0\nstdout = 'x'\nstdot = 'typo'\n");
    let r = sb.run(&["runners", "--check", "exec", "limit.toml", "bad.toml"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("bad.toml:3:") && r.stdout.is_empty(),
        "{r:?}"
    );
    let r = sb.run(&["runners", "--check", "claud", "limit.toml"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("claude"), "a suggestion: {r:?}");
    let r = sb.run(&["runners", "--check", "exec"]);
    assert_eq!(r.code, 2, "transcripts are required: {r:?}");
    // A typo in `expect` is bad input, not a failed check.
    sb.write("typo.toml", "stdout = 'x'\nexpect = \"rate-limited\"\n");
    let r = sb.run(&["runners", "--check", "exec", "typo.toml"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("typo.toml:2:") && r.stderr.contains("did you mean `rate_limited`"),
        "{r:?}"
    );
    // An HTTP definition prints nothing to judge.
    let r = sb.run(&["runners", "--check", "openai", "limit.toml"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("sends HTTP requests"), "{r:?}");
}

/// A pattern's `hint` reaches the reason also when the CLI exits 0 and flags the error in its
/// output (claude's `is_error`), as it does for a non-zero exit.
#[test]
fn a_patterns_hint_is_given_when_the_cli_flags_the_error_and_exits_0() {
    let sb = Sandbox::new();
    let claude = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("runners/claude.toml"),
    )
    .expect("claude.toml");
    let def = claude.replacen(
        "[failure]\npatterns = [",
        "[failure]\npatterns = [\n  { kind = \"quota\", regex = \"Rate limit reached\", hint = \"buy more\" },",
        1,
    );
    assert_ne!(def, claude, "the [failure] table moved");
    sb.write("c1.toml", def);
    sb.write(
        "flagged.toml",
        r#"exit_code = 0
expect = "quota"
stdout = '''
{"type":"result","subtype":"success","is_error":true,"result":"API Error: Rate limit reached"}
'''
"#,
    );
    let r = sb.run(&["runners", "--check", "c1.toml", "flagged.toml"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("(buy more)"), "{r:?}");
}

/// Shell completion offers the runner names and the words `--isolate`, `--sandbox` and
/// `--retry-on` take, not file names; `--runner` still takes a store's own definition name.
#[test]
fn completion_offers_runner_names_and_flag_values() {
    let sb = Sandbox::new();
    let r = sb.run(&["completions", "bash"]);
    assert_eq!(r.code, 0, "{r:?}");
    let offered = |flag: &str| -> String {
        let at = r
            .stdout
            .find(&format!("{flag})"))
            .unwrap_or_else(|| panic!("{flag} in the script"));
        r.stdout[at..].lines().nth(1).unwrap_or_default().to_owned()
    };
    let runner = offered("--runner");
    for name in ["claude", "codex", "gemini", "pi", "exec", "openai"] {
        assert!(runner.contains(name), "{runner}");
    }
    assert!(offered("--sandbox").contains("auto none landlock"));
    assert!(offered("--isolate").contains("none worktree"));
    assert!(offered("--retry-on").contains("timed_out"));
    // Offered, not imposed: an unknown name reaches the definition lookup and its message.
    let r = sb.run(&["batch", "--runner", "my-own", "--dry-run", "x.md"]);
    assert!(!r.stderr.contains("invalid value"), "{r:?}");
}

/// The quick-start form over a BATCH.md written for the exec runner: `--runner claude` on
/// the command line replaces the file's runner and its `command`, with a note; a program
/// after `--` with a runner that starts its own is still refused.
#[test]
fn a_command_line_runner_replaces_the_batch_files_exec_command() {
    let sb = sandbox();
    sb.write(
        "BATCH.md",
        "---\nrunner: exec\ncommand: [python3, my_agent.py]\n---\nDo {id}.\n",
    );
    std::fs::copy(sb.join("in.csv"), sb.join("workers-input.csv")).expect("input");
    let r: crate::harness::Run = sb
        .cmd(&[
            "batch", "BATCH.md", "--runner", "claude", "--format", "plain",
        ])
        .env("PATH", path_with_bin(&sb))
        .env("FAKE_CLI_SCENARIO", "success")
        .env("FAKE_CLI_RECORD", sb.join("record"))
        .output()
        .expect("run")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains(
            "note: runner `claude` from the command line replaces the file's `runner: exec` and its `command` (python3 my_agent.py)"
        ),
        "{r:?}"
    );
    assert_eq!(argv(&recorded(&sb, "claude"))[0], "-p", "claude ran");
    let r = sb
        .cmd(&[
            "batch", "BATCH.md", "--runner", "claude", "--", "python3", "x.py",
        ])
        .env("PATH", path_with_bin(&sb))
        .output()
        .expect("run");
    assert_eq!(r.status.code(), Some(2));
}
