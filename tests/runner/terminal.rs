//! What reaches the user's terminal (issue 49): titles a user typed or a teammate proposed,
//! and what teammates wrote, are shown, never obeyed, by every command that prints them,
//! while the files keep them as they are; a repository's definition that replaces a built-in
//! runner is announced, and listing definitions runs none of a repository's programs unless
//! asked; an unconfined run says what that means.

use crate::harness::{Run, Sandbox, agent};

/// OSC 52 (the clipboard) and a title sequence, a screen clear, a bidi override.
const OSC52: &str = "\x1b]52;c;cm0gLXJm\x07";
const CLEAR: &str = "\x1b[2J";
const RLO: char = '\u{202E}';

/// Fail unless neither stream of `r` carries an escape, a BEL, a C1 control or a bidi
/// control, naming `what` (the streams shown escaped, so a failure does not hit the
/// terminal that runs the tests).
fn assert_shown_not_obeyed(what: &str, r: &Run) {
    for (name, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        let raw = text.chars().find(|c| {
            matches!(c, '\x1b' | '\x07' | '\u{80}'..='\u{9f}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        });
        assert!(
            raw.is_none(),
            "{what}: {name} carries {raw:?}:\n{}",
            text.escape_debug()
        );
    }
}

/// A typed title and a teammate's proposal carrying escapes and a bidi override reach
/// `list`, `resolve` (its listing, progress lines and summary), `status` (plain, `--brief`,
/// `--list`) and the dry run's plan only as visible text; the inbox and the batch file keep
/// them byte for byte.
#[test]
fn typed_and_proposed_titles_reach_no_terminal_as_escapes() {
    let sb = Sandbox::new();
    let typed = format!("Typed{CLEAR} title{RLO} MODE=success");
    let hostile = format!("Hostile{OSC52} MODE=hostile_text");
    for title in [&typed, &hostile] {
        let r = sb.run(&["add", "--store", "S", title]);
        assert_eq!(r.code, 0, "{}", r.stderr.escape_debug());
    }
    let list = sb.run(&["list", "--store", "S"]);
    assert_eq!(list.code, 0, "{}", list.stderr.escape_debug());
    assert_shown_not_obeyed("list", &list);
    assert!(
        list.stdout
            .contains("Typed^[[2J title<U+202E> MODE=success")
            && list.stdout.contains("Hostile^[]52;c;cm0gLXJm^G"),
        "{}",
        list.stdout.escape_debug()
    );

    let fake = agent("fake_agent.py");
    let resolve = sb.run(&[
        "resolve", "--store", "S", "--yes", "--format", "plain", "--", "python3", &fake,
    ]);
    assert_eq!(resolve.code, 1, "{}", resolve.stderr.escape_debug());
    assert_shown_not_obeyed("resolve", &resolve);
    // The failure's reason is the teammate's summary: in its progress line and the summary.
    assert_eq!(
        resolve.stdout.matches("<U+202E>deliaf").count(),
        2,
        "{}",
        resolve.stdout.escape_debug()
    );
    // Files keep the text as it is: the batch the typed title, the inbox the proposal.
    assert!(sb.read("S/todo-1.md").contains(&typed));
    let inbox = sb.read("S/todo.md");
    assert!(
        inbox.contains(&format!("Proposed\x1b]0;pwned\x07 step {RLO}x")),
        "{}",
        inbox.escape_debug()
    );

    let list = sb.run(&["list", "--store", "S"]);
    assert_shown_not_obeyed("list after the run", &list);
    assert!(
        list.stdout.contains("Proposed^[]0;pwned^G step <U+202E>x"),
        "{}",
        list.stdout.escape_debug()
    );
    let team = sb.join("S/teams/todo-resolve-1").display().to_string();
    for args in [
        vec!["status", team.as_str()],
        vec!["status", team.as_str(), "--brief"],
        vec!["status", "--list", "--store", "S"],
        vec!["show", "2", team.as_str()],
        vec!["logs", "2", team.as_str(), "--stderr"],
    ] {
        let r = sb.run(&args);
        assert_shown_not_obeyed(&args.join(" "), &r);
    }

    // The dry run's plan shows each item's prompt: a row's value among it.
    sb.write_rows(&[("a", &format!("success {OSC52}{CLEAR} {RLO}x"))]);
    let dry = sb.fake_batch(&["--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr.escape_debug());
    assert_shown_not_obeyed("--dry-run", &dry);
    assert!(
        dry.stdout.contains("Handle a. MODE=success ") && dry.stdout.contains("<U+202E>x\n"),
        "{}",
        dry.stdout.escape_debug()
    );
}

/// A store definition named like a built-in whose program is `script`, version
/// `--version`, which runs the fake agent otherwise.
fn claude_toml(script: &str) -> String {
    format!(
        "name = \"claude\"\ndescription = \"the repository's claude\"\nprogram = \"{script}\"\nversion_args = [\"--version\"]\nargs = []\nprompt = \"stdin\"\noutput = \"text\"\n"
    )
}

/// A program that leaves `probed` beside itself when asked its version, and else acts as the
/// fake agent.
fn probe_script(sb: &Sandbox) -> String {
    let marker = sb.join("probed");
    let script = sb.write(
        "bin/repo-claude",
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo ran > '{}'; echo 1.0; exit 0; fi\nexec python3 '{}'\n",
            marker.display(),
            agent("fake_agent.py")
        ),
    );
    let mut perms = std::fs::metadata(&script).expect("script").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).expect("chmod");
    script.display().to_string()
}

/// A store's `runners/claude.toml` replaces `--runner claude`: the dry run and the run's
/// first line say so, naming the file.
#[test]
fn a_store_definition_that_replaces_a_built_in_is_announced() {
    let sb = Sandbox::new();
    let script = probe_script(&sb);
    sb.write("S/runners/claude.toml", claude_toml(&script));
    let r = sb.run(&["add", "--store", "S", "Do it MODE=success"]);
    assert_eq!(r.code, 0, "{r:?}");
    let file = sb.join("S/runners/claude.toml").display().to_string();
    let said = format!("runner claude from {file}, which replaces the built-in");
    let resolve = |extra: &[&str]| -> Run {
        let mut args = vec![
            "resolve", "--store", "S", "--yes", "--runner", "claude", "--format", "plain",
        ];
        args.extend_from_slice(extra);
        sb.run(&args)
    };
    let dry = resolve(&["--dry-run"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(dry.stdout.contains(&said), "{dry:?}");
    let run = resolve(&[]);
    assert_eq!(run.code, 0, "{run:?}");
    let first = run
        .stdout
        .lines()
        .find(|l| l.starts_with("Starting team"))
        .unwrap_or_default();
    assert!(first.ends_with(&said), "{run:?}");
}

/// `runner runners --store` lists a repository's definitions without running their
/// programs; `--versions` asks them.
#[test]
fn listing_definitions_runs_no_store_program_unless_asked() {
    let sb = Sandbox::new();
    let script = probe_script(&sb);
    sb.write("S/runners/claude.toml", claude_toml(&script));
    sb.write(
        "S/runners/mine.toml",
        claude_toml(&script).replace("name = \"claude\"", "name = \"mine\""),
    );
    let r = sb.run(&["runners", "--store", "S"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !sb.join("probed").exists(),
        "listing ran a store definition's program: {r:?}"
    );
    for name in ["claude", "mine"] {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} line: {r:?}"));
        assert!(line.contains("(not run; --versions)"), "{line}");
    }
    let claude = r.stdout.lines().find(|l| l.starts_with("claude "));
    assert!(
        claude.is_some_and(|l| l.contains("claude.toml] replaces the built-in")),
        "{r:?}"
    );
    let r = sb.run(&["runners", "--store", "S", "--versions"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(sb.join("probed").exists(), "--versions asks: {r:?}");
}

/// A run the user left unconfined says on its first line what a teammate can then do, and
/// the flag that confines it — or, on a kernel without Landlock, that nothing can here.
#[test]
fn an_unconfined_run_says_what_that_means_on_its_first_line() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    let r = sb.fake_batch(&["--sandbox", "none"]);
    assert_eq!(r.code, 0, "{r:?}");
    let first = r.stdout.lines().next().unwrap_or_default();
    let kernel_confines = sb
        .run(&["runners"])
        .stdout
        .contains("--sandbox landlock is available");
    let how = match kernel_confines {
        true => "--sandbox landlock confines them)",
        false => "so nothing confines them here)",
    };
    assert!(
        first.contains(
            "; sandbox none (a teammate can forge another's verdict or edit the journal; "
        ) && first.ends_with(how),
        "{r:?}"
    );
}

/// `args` run on a pseudo-terminal (`script`, util-linux): what the terminal received. `None`
/// (the test skips) without `script`.
fn on_a_terminal(sb: &Sandbox, args: &[&str]) -> Option<String> {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        crate::skip::skip("terminal: no `script` (util-linux) to give the runner a terminal");
        return None;
    }
    let cmd = sb.cmd(args);
    let line: Vec<String> = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy().replace('\'', r"'\''")))
        .collect();
    let mut under_tty = std::process::Command::new("script");
    under_tty
        .args(["-qec", &line.join(" "), "/dev/null"])
        .current_dir(sb.path())
        .stdin(std::process::Stdio::null());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => under_tty.env(k, v),
            None => under_tty.env_remove(k),
        };
    }
    let out = under_tty.output().expect("script");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// On a terminal — the progress display with its running teammates' titles and last lines,
/// `logs` and `show --prompt` — a teammate's OSC 52, title sequence, screen clear and bidi
/// override arrive as text (the display's own cursor moves aside).
#[test]
fn progress_logs_and_prompts_on_a_terminal_show_escapes_as_text() {
    let sb = Sandbox::new();
    let r = sb.run(&[
        "add",
        "--store",
        "S",
        &format!("Hostile{OSC52}{RLO} MODE=hostile_text"),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let fake = agent("fake_agent.py");
    let team = sb.join("S/teams/todo-resolve-1").display().to_string();
    let runs = [
        vec!["resolve", "--store", "S", "--yes", "--", "python3", &fake],
        vec!["logs", "1", &team],
        vec!["show", "1", &team, "--prompt"],
    ];
    for args in runs {
        let Some(seen) = on_a_terminal(&sb, &args) else {
            return;
        };
        let obeyed = ["\x1b]", CLEAR, "\x07", "\u{202E}"]
            .into_iter()
            .find(|s| seen.contains(s));
        assert!(
            obeyed.is_none() && seen.contains("<U+202E>"),
            "{}: {obeyed:?} reached the terminal:\n{}",
            args.join(" "),
            seen.escape_debug()
        );
    }
}
