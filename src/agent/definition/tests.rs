use super::*;
use std::collections::BTreeMap;

/// `proven` must name the version `.ci/run` installs for the end-to-end tests, and a test
/// file that exists; every CLI `.ci/run` installs has a definition that says so.
#[test]
fn proven_versions_are_the_ones_ci_installs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ci = std::fs::read_to_string(root.join(".ci/run")).expect(".ci/run");
    let pinned: BTreeMap<&str, &str> = ci
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            matches!(w.next(), Some("e2e_npm" | "e2e_pip"))
                .then(|| Some((w.next()?, w.nth(1)?)))
                .flatten()
        })
        .collect();
    assert!(pinned.contains_key("claude"), "{pinned:?}");
    for (name, text) in BUILTIN {
        let (def, warnings) =
            RunnerDef::parse_with_warnings(Path::new(name), text).expect("built-in parses");
        assert!(warnings.is_empty(), "{name}: {warnings:?}");
        match (&def.proven, pinned.get(name)) {
            (Some(p), Some(v)) => {
                assert_eq!(&p.version, v, "{name}: proven vs .ci/run");
                assert!(root.join(&p.test).is_file(), "{name}: {} exists", p.test);
            }
            (None, None) => {}
            (p, v) => panic!("{name}: proven {p:?} but .ci/run pins {v:?}"),
        }
    }
}

#[test]
fn an_unknown_runner_names_the_built_in_ones_and_the_closest() {
    let e = load("claud", None, None).expect_err("unknown").to_string();
    assert!(
        e.contains("unknown runner `claud`; did you mean `claude`?"),
        "{e}"
    );
    assert!(e.contains("codex"), "{e}");
}

fn args<'a>(command: &'a [String], vars: &'a BTreeMap<String, String>) -> AttemptArgs<'a> {
    AttemptArgs {
        prompt_file: Path::new("/t/prompt.md"),
        report: Path::new("/t/report.json"),
        workspace: Path::new("/t"),
        prompt: "do it",
        model: None,
        agent_args: &[],
        command,
        vars,
        in_git_work_tree: true,
    }
}

#[test]
fn every_builtin_parses() {
    for (name, _) in BUILTIN {
        let def = load(name, None, None).expect("builtin parses");
        assert_eq!(&def.name, name);
    }
}

/// The prompt file is written before the agent starts only when it reads it by name.
#[test]
fn an_invocation_says_whether_it_names_the_prompt_file() {
    let vars = BTreeMap::new();
    let cmd = vec!["agent".to_string()];
    let names = |def: &RunnerDef| {
        def.invocation(&args(&cmd, &vars))
            .expect("inv")
            .names(Path::new("/t/prompt.md"))
    };
    let parsed = |toml: &str| RunnerDef::parse(Path::new("x.toml"), toml).expect("parses");
    assert!(!names(&load("exec", None, None).expect("exec")));
    assert!(names(&parsed(
        "name='x'\nprogram='x'\nargs=['--message-file={prompt_file}']\nprompt='file'\n"
    )));
    assert!(names(&parsed(
        "name='x'\nprogram='x'\nargs=[]\n[env]\nset={P='{prompt_file}'}\n"
    )));
}

#[test]
fn exec_runs_the_command_with_prompt_on_stdin() {
    let def = load("exec", None, None).expect("exec");
    let cmd = vec!["python3".to_string(), "a.py".to_string(), "{x}".to_string()];
    let vars = BTreeMap::new();
    let inv = def.invocation(&args(&cmd, &vars)).expect("expands");
    assert_eq!(inv.program, "python3");
    assert_eq!(inv.args, vec!["a.py", "{x}"]);
    assert!(inv.prompt_on_stdin);
    assert!(def.invocation(&args(&[], &vars)).is_err());
}

#[test]
fn prompt_pipe_puts_the_prompt_on_stdin_through_a_pipe() {
    let vars = BTreeMap::new();
    let parsed = |toml: &str| RunnerDef::parse(Path::new("x.toml"), toml).expect("parses");
    let def = parsed("name='x'\nprogram='x'\nargs=[]\nprompt='pipe'\n");
    let inv = def.invocation(&args(&[], &vars)).expect("expands");
    assert!(inv.prompt_on_stdin && inv.stdin_pipe, "{inv:?}");
    let def = parsed("name='x'\nprogram='x'\nargs=[]\nprompt='stdin'\n");
    let inv = def.invocation(&args(&[], &vars)).expect("expands");
    assert!(inv.prompt_on_stdin && !inv.stdin_pipe, "{inv:?}");
}

#[test]
fn placeholders_vars_and_model() {
    let def = RunnerDef::parse(
        Path::new("x.toml"),
        "name='x'\nprogram='x'\nargs=['-p','--mode','{var.mode}','{model_args}','--out={report}']\n\
         model_args=['--model','{model}']\nprompt='stdin'\noutput='json'\n[vars]\nmode='safe'\n",
    )
    .expect("valid");
    let vars = BTreeMap::new();
    let mut a = args(&[], &vars);
    assert_eq!(
        def.invocation(&a).expect("ok").args,
        vec!["-p", "--mode", "safe", "--out=/t/report.json"]
    );
    a.model = Some("m1");
    let over = BTreeMap::from([("mode".to_string(), "wide".to_string())]);
    a.vars = &over;
    assert_eq!(
        def.invocation(&a).expect("ok").args,
        vec![
            "-p",
            "--mode",
            "wide",
            "--model",
            "m1",
            "--out=/t/report.json"
        ]
    );
}

#[test]
fn env_values_expand_placeholders_and_double_braces_are_literal() {
    let def = RunnerDef::parse(
        Path::new("x.toml"),
        "name='x'\nprogram='x'\nargs=['a}b', '{{x}}']\nprompt='stdin'\noutput='jsonl'\n\
         [env]\nset = { P = '{{\"dir\":{{\"{workspace}/*\":\"allow\"}}}}', Q = 'fixed' }\n",
    )
    .expect("valid");
    let vars = BTreeMap::new();
    let inv = def.invocation(&args(&[], &vars)).expect("ok");
    assert_eq!(inv.args, vec!["a}b", "{x}"]);
    assert_eq!(
        inv.env_set,
        vec![
            ("P".to_string(), r#"{"dir":{"/t/*":"allow"}}"#.to_string()),
            ("Q".to_string(), "fixed".to_string())
        ]
    );
    let bad = RunnerDef::parse(
        Path::new("x.toml"),
        "name='x'\nprogram='x'\nargs=[]\nprompt='stdin'\noutput='text'\n[env]\nset={P='{nope}'}\n",
    );
    assert!(
        bad.is_err(),
        "an unknown placeholder in [env] set is refused"
    );
}

#[test]
fn no_git_args_only_outside_a_git_work_tree() {
    let def = RunnerDef::parse(
        Path::new("x.toml"),
        "name='x'\nprogram='x'\nargs=['-y','{no_git_args}','{agent_args}']\n\
         no_git_args=['--no-git']\nprompt='stdin'\noutput='text'\n",
    )
    .expect("valid");
    let vars = BTreeMap::new();
    let mut a = args(&[], &vars);
    assert_eq!(def.invocation(&a).expect("ok").args, vec!["-y"]);
    a.in_git_work_tree = false;
    assert_eq!(def.invocation(&a).expect("ok").args, vec!["-y", "--no-git"]);
}

/// The message `text` (as `r.toml`) is refused with.
fn refused(text: &str) -> String {
    RunnerDef::parse(Path::new("r.toml"), text)
        .expect_err("refused")
        .to_string()
}

const HEAD: &str = "name='x'\nprogram='x'\nargs=[]\nprompt='stdin'\noutput='json'\n";

#[test]
fn invalid_definitions_name_file_and_key() {
    let (_, warnings) = RunnerDef::parse_with_warnings(
        Path::new("r.toml"),
        "name='x'\nprogram='x'\nargs=[]\nprompt='stdin'\noutput='text'\nbogus=1\n[result]\nfinal='/x'\n",
    )
    .expect("unknown keys only warn");
    assert_eq!(
        warnings,
        vec![
            "r.toml:6: unknown key `bogus` ignored",
            "r.toml:8: unknown key `result.final` ignored; did you mean `final_text`?"
        ]
    );
    let e = refused("name='x'\nprogram='x'\nargs=[]\nprompt='stdin'\noutput=3\n");
    assert!(e.starts_with("r.toml:5:") && e.contains("`output`"), "{e}");
    let e = refused("name='x'\nprogram='x'\nargs=['-p',\n '{nope}']\nprompt='stdin'\n");
    assert!(
        e.starts_with("r.toml:4:") && e.contains("`args[1]`") && e.contains("{nope}"),
        "{e}"
    );
    let e = refused("name='x'\nprogram='x'\nargs=[]\n[env]\nset = { A = '{var.v}' }\n");
    assert!(e.starts_with("r.toml:5:") && e.contains("{var.v}"), "{e}");
}

/// Unknown keys and tables warn at their line with the closest known key, as BATCH.md's.
#[test]
fn unknown_keys_and_tables_name_their_line_and_the_closest_key() {
    let (_, warnings) = RunnerDef::parse_with_warnings(
        Path::new("r.toml"),
        &format!("{HEAD}outptu='text'\n[envv]\nunset=[]\n[result]\nturnz='/t'\n"),
    )
    .expect("unknown keys only warn");
    assert_eq!(
        warnings,
        vec![
            "r.toml:7: unknown key `envv` ignored; did you mean `env`?",
            "r.toml:6: unknown key `outptu` ignored; did you mean `output`?",
            "r.toml:10: unknown key `result.turnz` ignored; did you mean `turns`?",
        ]
    );
}

/// `text` (as `r.toml`) is refused with a message starting with `at` (file and line) and
/// holding each of `parts`.
fn assert_refused(text: &str, at: &str, parts: &[&str]) {
    let e = refused(text);
    assert!(e.starts_with(at), "{e}\nshould start with {at:?}");
    for part in parts {
        assert!(e.contains(part), "{e}\nlacks {part:?}");
    }
}

/// A pointer without its leading `/` never matches anything (the cost column stayed
/// empty and `--max-cost-usd` never fired): refused at its line with the fix.
#[test]
fn a_pointer_must_start_with_a_slash() {
    assert_refused(
        &format!(
            "{HEAD}[result]\nturns = '/t'\n\
             cost_usd = {{ pointer = 'cost', when = {{ '/type' = 'result' }} }}\n"
        ),
        "r.toml:8:",
        &[
            "`result.cost_usd`",
            "`cost` is not a JSON pointer",
            "\"/cost\"",
        ],
    );
    assert_refused(
        &format!("{HEAD}[result]\ncost_usd = 'usage.cost'\n"),
        "r.toml:7:",
        &["\"/usage/cost\""],
    );
    assert_refused(
        &format!("{HEAD}[result]\nturns = {{ pointer = '/t', when = {{ type = 'x' }} }}\n"),
        "r.toml:7:",
        &["`type` is not a JSON pointer"],
    );
    // The empty pointer is the whole object; `/a/b` is a pointer.
    RunnerDef::parse(
        Path::new("r.toml"),
        &format!("{HEAD}[result]\nfinal_text = ''\nturns = '/a/b'\n"),
    )
    .expect("valid pointers");
}

/// A mistyped pointer table says which key and what shapes are allowed (it said "data
/// did not match any variant of untagged enum Pointer").
#[test]
fn a_bad_pointer_names_its_key_and_the_shapes_allowed() {
    assert_refused(
        &format!("{HEAD}[result]\nfinal_text = {{ pointr = '/r' }}\n"),
        "r.toml:7:",
        &[
            "`result.final_text`",
            "unknown key `pointr` in a pointer table; did you mean `pointer`?",
            "{ pointer = \"/item/text\", when =",
        ],
    );
    let turns = |v: &str| format!("{HEAD}[result]\nturns = {v}\n");
    assert_refused(&turns("3"), "r.toml:7:", &["a JSON pointer such as"]);
    assert_refused(&turns("{ when = {} }"), "r.toml:7:", &["needs `pointer`"]);
}

/// `prompt = "file"` without `{prompt_file}` would start the agent without its prompt.
#[test]
fn a_prompt_file_the_args_never_name_is_refused() {
    assert_refused(
        "name='x'\nprogram='x'\nargs=['--yes']\nprompt='file'\n",
        "r.toml:4:",
        &["add `{prompt_file}`"],
    );
    for ok in [
        "name='x'\nprogram='x'\nargs=['--file={prompt_file}']\nprompt='file'\n",
        "name='x'\nprogram='x'\nargs=[]\nprompt='file'\n[env]\nset={P='{prompt_file}'}\n",
        // The other modes always deliver it: stdin, or the last argument.
        "name='x'\nprogram='x'\nargs=[]\nprompt='stdin'\n",
        "name='x'\nprogram='x'\nargs=[]\nprompt='argument'\n",
    ] {
        RunnerDef::parse(Path::new("r.toml"), ok).expect(ok);
    }
}

#[test]
fn an_unknown_kind_names_its_line_and_the_closest() {
    assert_refused(
        "name='x'\nkind = 'htp'\n",
        "r.toml:2:",
        &["unknown kind `htp`; did you mean `http`? (known: process, http)"],
    );
}

/// `[env] set` and `[env] files` take variable names, never the runner's own, and two
/// files never share one path; a file's text expands like `set`.
#[test]
fn env_variables_must_be_names_the_runner_does_not_set() {
    for (body, says) in [
        ("files = { 'A/B' = 'x' }", "`env.files.A/B`"),
        ("set = { '1X' = 'x' }", "is not a variable name"),
        ("set = { RUNNER_REPORT = 'x' }", "set by the runner"),
        ("files = { TMPDIR = 'x' }", "set by the runner"),
        ("files = { CFG = 'a', cfg = 'b' }", "only in case"),
        ("files = { CFG = '{var.nope}' }", "`env.files.CFG`"),
    ] {
        let e = refused(&format!("{HEAD}[env]\n{body}\n"));
        assert!(e.contains(says) && e.contains("r.toml:7"), "{body}: {e}");
    }
    let def = RunnerDef::parse(
        Path::new("r.toml"),
        &format!("{HEAD}[vars]\nn = '2'\n[env]\nfiles = {{ CFG = '{{{{\"n\":{{var.n}}}}}}' }}\n"),
    )
    .expect("valid");
    assert_eq!(def.env.files["CFG"], "{{\"n\":{var.n}}}");
}

/// `[failure]` entries are refused at their own line, under their own key.
#[test]
fn failure_entries_are_refused_at_their_own_line() {
    let pattern = |p: &str| {
        format!(
            "{HEAD}[failure]\nignore = ['ok']\npatterns = [\n  \
             {{ kind = 'quota', regex = 'q' }},\n  {p},\n]\n"
        )
    };
    assert_refused(
        &pattern("{ kind = 'auth', regex = '(' }"),
        "r.toml:10:",
        &["`failure.patterns[1].regex`", "invalid regex"],
    );
    assert_refused(
        &pattern("{ kind = 'nope', regex = 'x' }"),
        "r.toml:10:",
        &["`failure.patterns[1].kind`"],
    );
    let failure = |t: &str| format!("{HEAD}[failure]\n{t}\n");
    assert_refused(
        &failure("ignore = ['a',\n '[']"),
        "r.toml:8:",
        &["`failure.ignore[1]`"],
    );
    assert_refused(
        &failure("\nexit_codes = { x = 'auth' }"),
        "r.toml:8:",
        &["`failure.exit_codes.x`"],
    );
}

#[test]
fn a_name_is_required_and_not_empty() {
    let e = refused("description = 'mine'\nprogram='x'\n");
    assert!(e.starts_with("r.toml: `name` is required"), "{e}");
    let e = refused("description = 'mine'\nname = ''\nprogram='x'\n");
    assert!(
        e.starts_with("r.toml:2: `name` is required and must not be empty"),
        "{e}"
    );
}

#[test]
fn huge_prompt_argument_is_refused() {
    let def = RunnerDef::parse(
        Path::new("x.toml"),
        "name='x'\nprogram='x'\nargs=['{prompt}']\nprompt='argument'\noutput='text'\n",
    )
    .expect("valid");
    let vars = BTreeMap::new();
    let big = "x".repeat(super::placeholders::MAX_PROMPT_ARG_BYTES + 1);
    let mut a = args(&[], &vars);
    a.prompt = &big;
    assert!(
        def.invocation(&a)
            .expect_err("too big")
            .to_string()
            .contains("limit")
    );
}
