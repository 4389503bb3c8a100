//! `--sandbox landlock` (issue 17): attacking teammates (fake agents in `forge`, `trespass`,
//! `signal` modes) fail to forge a sibling's report, write outside their area or signal the
//! runner and their siblings; honest teammates complete; a layout that would let a teammate
//! write the workspace is refused before anything is written.
//!
//! The layout of these runs keeps the workspace outside the teammates' working directory:
//! `<sandbox>/work` is the run's cwd, the output (and so `workers-output.runner/`) lies in
//! `<sandbox>/out`, the input beside them. Its helpers serve `sandbox_escapes.rs` too (issue
//! 25's escapes).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::harness::{Run, Sandbox, agent, by_id, git, landlock_or_skip};

/// A sandbox with `in.csv` (`id,mode` rows), `instr.md`, `work/` (the cwd), `out/` and
/// `home/` (HOME, holding `keep.txt`).
pub(crate) fn layout(rows: &[(&str, &str)]) -> Sandbox {
    let sb = Sandbox::new();
    sb.write_rows(rows);
    std::fs::create_dir_all(sb.join("work")).expect("mkdir work");
    std::fs::create_dir_all(sb.join("out")).expect("mkdir out");
    sb.write("home/keep.txt", "mine\n");
    sb
}

/// `runner batch` over the layout with the fake agent, from `work/`, output in `out/`.
pub(crate) fn run(sb: &Sandbox, extra: &[&str]) -> Run {
    run_with(sb, "landlock", extra)
}

/// [`run`] with `--sandbox MODE` (none at all, so the default `auto`, when `mode` is empty).
pub(crate) fn run_with(sb: &Sandbox, mode: &str, extra: &[&str]) -> Run {
    let r: Run = run_cmd(sb, mode, extra)
        .output()
        .expect("spawn runner")
        .into();
    eprintln!("{r:?}");
    r
}

/// The command [`run_with`] runs.
pub(crate) fn run_cmd(sb: &Sandbox, mode: &str, extra: &[&str]) -> Command {
    let fake = agent("fake_agent.py");
    run_agent_cmd(sb, mode, extra, &["--", "python3", &fake])
}

/// [`run_cmd`] with `agent` (`-- PROGRAM ARGS`, or `--runner-file FILE`) in place of the fake
/// agent after `--`.
pub(crate) fn run_agent_cmd(sb: &Sandbox, mode: &str, extra: &[&str], agent: &[&str]) -> Command {
    let (input, instr, output) = (
        sb.join("in.csv"),
        sb.join("instr.md"),
        sb.join("out/workers-output.csv"),
    );
    let mut args: Vec<String> = [
        "batch",
        "--input",
        &input.display().to_string(),
        "--instruction",
        &instr.display().to_string(),
        "--output",
        &output.display().to_string(),
        "--id-column",
        "id",
        "--format",
        "plain",
        "--jobs",
        "4",
        // Attackers leave their findings in their folders, read after the run.
        "--keep-logs",
    ]
    .map(String::from)
    .to_vec();
    if !mode.is_empty() {
        args.extend(["--sandbox".into(), mode.into()]);
    }
    args.extend(extra.iter().chain(agent).map(|s| s.to_string()));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = sb.cmd(&argv);
    cmd.current_dir(sb.join("work"));
    cmd
}

/// Whether `script` (util-linux) is there to give the runner a terminal; skips `what` when not.
pub(crate) fn terminal_or_skip(what: &str) -> bool {
    let there = Command::new("script").arg("--version").output().is_ok();
    if !there {
        crate::skip::skip(format!(
            "{what}: no `script` (util-linux) to give the runner a terminal"
        ));
    }
    there
}

/// Run `cmd` from `dir` with a terminal of its own: `script` starts it on a new
/// pseudo-terminal, its controlling terminal. Returns what `script` printed (the
/// terminal's output) and its exit status (the command's).
pub(crate) fn under_terminal(cmd: Command, dir: &std::path::Path) -> std::process::Output {
    let line: Vec<String> = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy().replace('\'', r"'\''")))
        .collect();
    let mut under_tty = Command::new("script");
    under_tty
        .args(["-qec", &line.join(" "), "/dev/null"])
        .current_dir(dir)
        .stdin(std::process::Stdio::null());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => under_tty.env(k, v),
            None => under_tty.env_remove(k),
        };
    }
    under_tty.output().expect("script")
}

pub(crate) fn workspace(sb: &Sandbox) -> PathBuf {
    sb.join("out/workers-output.runner")
}

/// The attack results a teammate recorded (`attack.json` in its writable folder).
pub(crate) fn attack(sb: &Sandbox, teammate: &str) -> BTreeMap<String, Value> {
    let path = workspace(sb)
        .join("teammates")
        .join(teammate)
        .join("work/attack.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("attack.json")
}

pub(crate) fn rows(sb: &Sandbox) -> BTreeMap<String, BTreeMap<String, String>> {
    by_id(&sb.join("out/workers-output.csv"), "id")
}

pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

/// Run the two rows of `sb` (a victim, then an attacker) each in its own worktree under
/// `--sandbox MODE` (`--jobs 2 --keep-logs`); once the attacker `attacker` has written its
/// `attack.json`, release the victim waiting in worktree `victim` (its `attack.done`, which
/// it cannot see otherwise). Returns the run and the attack's results.
pub(crate) fn worktree_attack(
    sb: &Sandbox,
    mode: &str,
    attacker: &str,
    victim: &str,
) -> (Run, BTreeMap<String, Value>) {
    let child = sb
        .fake_batch_cmd(&[
            "--sandbox",
            mode,
            "--isolate",
            "worktree",
            "--jobs",
            "2",
            "--keep-logs",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let ws = sb.join("workers-output.runner");
    let attack_file = ws.join("teammates").join(attacker).join("work/attack.json");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !attack_file.exists() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::write(ws.join("worktrees").join(victim).join("attack.done"), "").expect("release");
    let r: Run = child.wait_with_output().expect("wait").into();
    eprintln!("{mode}: {r:?}");
    let text = std::fs::read_to_string(&attack_file).expect("attack.json");
    (r, serde_json::from_str(&text).expect("json"))
}

pub(crate) fn assert_no_survivors(sb: &Sandbox) {
    let left = sb.survivors_after(5.0);
    assert!(left.is_empty(), "left running: {left:?}");
}

#[test]
fn a_forging_teammate_cannot_write_its_siblings_report_and_the_victim_is_judged_on_its_own() {
    if !landlock_or_skip("forge") {
        return;
    }
    let sb = layout(&[("victim", "wait_attack"), ("forger", "forge")]);
    let r = run(&sb, &[]);
    assert_eq!(r.code, 1, "the victim did not complete: {r:?}");
    assert!(r.stdout.contains("sandbox landlock"), "{r:?}");

    let results = attack(&sb, "2-forger");
    assert_eq!(
        results.get("report 1-victim"),
        Some(&Value::from("EACCES")),
        "{results:?}"
    );
    let rows = rows(&sb);
    assert_eq!(rows["victim"]["status"], "failed", "{:?}", rows["victim"]);
    assert_ne!(rows["victim"]["summary"], "FORGED");
    assert!(
        !rows["victim"]["error"].is_empty(),
        "judged on its own (no report): {:?}",
        rows["victim"]
    );
    assert_eq!(
        rows["forger"]["status"], "completed",
        "{:?}",
        rows["forger"]
    );
    let victim_report = workspace(&sb).join("teammates/1-victim/work/report.json");
    assert!(!victim_report.exists(), "no report was forged");
    assert_no_survivors(&sb);
}

/// A runner definition cannot open the workspace to its teammates through the attempt's own
/// variables: `[sandbox] writes` entries that expand into the workspace
/// (`{env.RUNNER_WORKSPACE}`, `{env.TMPDIR}/../..` — the teammates folder) are not granted,
/// with a warning, and the forger fails as without them (found by a new user's review).
#[test]
fn writes_that_expand_into_the_workspace_are_not_granted_and_the_forgery_fails() {
    if !landlock_or_skip("writes into the workspace") {
        return;
    }
    let sb = layout(&[("victim", "wait_attack"), ("forger", "forge")]);
    let fake = agent("fake_agent.py");
    sb.write(
        "opening.toml",
        format!(
            "name = \"opening\"\nprogram = \"python3\"\nargs = [{fake:?}]\nprompt = \"stdin\"\noutput = \"text\"\n[sandbox]\nwrites = [\"{{env.RUNNER_WORKSPACE}}/\", \"{{env.TMPDIR}}/../../\", \"{{env.RUNNER_TEAMMATE_DIR}}/../\"]\n"
        ),
    );
    let file = sb.join("opening.toml").display().to_string();
    let r: Run = run_agent_cmd(&sb, "landlock", &[], &["--runner-file", &file])
        .output()
        .expect("spawn runner")
        .into();
    assert_eq!(r.code, 1, "the victim did not complete: {r:?}");
    assert!(
        r.stderr.contains("reaches into the team workspace") && r.stderr.contains("not granted"),
        "{r:?}"
    );
    let results = attack(&sb, "2-forger");
    assert_eq!(
        results.get("report 1-victim"),
        Some(&Value::from("EACCES")),
        "{results:?}"
    );
    assert_ne!(rows(&sb)["victim"]["summary"], "FORGED");
    assert_no_survivors(&sb);
}

/// The control: the same forger without the sandbox makes the victim — which wrote no report
/// and printed "I could not do it" — end completed with the forged summary (issue 17).
#[test]
fn without_the_sandbox_the_same_forgery_succeeds() {
    let sb = layout(&[("victim", "wait_attack"), ("forger", "forge")]);
    let r = run_with(&sb, "none", &[]);
    assert!(r.stdout.contains("sandbox none"), "{r:?}");
    assert_eq!(
        attack(&sb, "2-forger").get("report 1-victim"),
        Some(&Value::from("ok"))
    );
    let rows = rows(&sb);
    assert_eq!(
        rows["victim"]["status"], "completed",
        "{:?}",
        rows["victim"]
    );
    assert_eq!(rows["victim"]["summary"], "FORGED");
    assert_eq!(r.code, 0, "{r:?}");
    assert_no_survivors(&sb);
}

/// Under the sandbox a teammate writes only its working directory, its own `work/` folder
/// and TMPDIR: not a sibling's files, the journal or the record of completed items, nor the
/// runner's records of itself — its prompt and logs (DESIGN §6b).
#[test]
fn a_trespassing_teammate_writes_nothing_outside_its_area() {
    if !landlock_or_skip("trespass") {
        return;
    }
    let sb = layout(&[("bystander", "wait_attack"), ("intruder", "trespass")]);
    // The bystander waits for attack.done, which the trespasser never writes: give it one.
    // Snapshot what must not change once the bystander's folder exists.
    let child = {
        let (input, instr, output) = (
            sb.join("in.csv"),
            sb.join("instr.md"),
            sb.join("out/workers-output.csv"),
        );
        let fake = agent("fake_agent.py");
        sb.cmd(&[
            "batch",
            "--input",
            &input.display().to_string(),
            "--instruction",
            &instr.display().to_string(),
            "--output",
            &output.display().to_string(),
            "--id-column",
            "id",
            "--format",
            "plain",
            "--jobs",
            "2",
            "--sandbox",
            "landlock",
            // The teammates' findings are read from their folders after the run.
            "--keep-logs",
            "--",
            "python3",
            &fake,
        ])
        .current_dir(sb.join("work"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn runner")
    };
    let attack_file = workspace(&sb).join("teammates/2-intruder/work/attack.json");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !attack_file.exists() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let journal_during = std::fs::read(workspace(&sb).join("journal.jsonl")).expect("journal");
    let bystander_files: Vec<_> = std::fs::read_dir(workspace(&sb).join("teammates/1-bystander"))
        .expect("bystander folder")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    std::fs::write(sb.join("work/attack.done"), "").expect("release the bystander");
    let r: Run = child.wait_with_output().expect("wait").into();
    eprintln!("{r:?}");

    let results = attack(&sb, "2-intruder");
    for denied in [
        "home",
        "home_file",
        "sibling_new_file",
        "sibling_prompt",
        "sibling_remove",
        "journal_append",
        "journal_truncate",
        "journal_replace",
        "team_json_remove",
        "workspace_new_file",
        "completed_record_forge",
        "own_prompt",
        "own_log",
    ] {
        assert_eq!(
            results.get(denied),
            Some(&Value::from("EACCES")),
            "{denied}: {results:?}"
        );
    }
    for allowed in ["own_cwd", "own_folder", "own_tmp", "dev_null"] {
        assert_eq!(
            results.get(allowed),
            Some(&Value::from("ok")),
            "{allowed}: {results:?}"
        );
    }
    // Nothing changed there.
    assert!(!sb.join("home/pwned").exists());
    assert_eq!(sb.read("home/keep.txt"), "mine\n");
    let ws = workspace(&sb);
    assert!(!ws.join("pwned").exists() && ws.join("team.json").is_file());
    assert!(!ws.join("teammates/1-bystander/work/pwned").exists());
    assert!(ws.join("teammates/1-bystander/prompt.md").is_file());
    let journal = std::fs::read(ws.join("journal.jsonl")).expect("journal");
    assert!(
        journal.starts_with(&journal_during),
        "the journal only grew by the runner's own events"
    );
    let text = String::from_utf8_lossy(&journal);
    assert!(!text.contains("forged"), "{text}");
    assert!(
        !bystander_files.is_empty() && ws.join("teammates/1-bystander").is_dir(),
        "the bystander's folder is intact"
    );
    assert!(
        !ws.join("completed.jsonl").exists(),
        "no record was forged (the intruder's folder is kept: --keep-logs)"
    );
    // Landlock does not govern modes: a chmod gets through, and the run undoes it.
    assert_eq!(results.get("workspace_chmod"), Some(&Value::from("ok")));
    let mode = |p: PathBuf| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).expect("stat").permissions())
            & 0o777
    };
    assert_eq!(mode(ws.clone()), 0o700, "the workspace is private again");
    assert_eq!(mode(ws.join("journal.jsonl")), 0o600, "the journal too");
    // The run itself is judged as usual.
    assert_eq!(r.code, 1, "{r:?}");
    let rows = rows(&sb);
    assert_eq!(
        rows["intruder"]["status"], "completed",
        "{:?}",
        rows["intruder"]
    );
    assert_eq!(
        rows["bystander"]["status"], "failed",
        "{:?}",
        rows["bystander"]
    );
    assert_no_survivors(&sb);
}

#[test]
fn a_teammate_cannot_signal_the_runner_or_a_sibling_nor_read_their_environment() {
    if !landlock_or_skip("signal") {
        return;
    }
    let sb = layout(&[("target", "wait_attack"), ("signaller", "signal")]);
    let r = run(&sb, &[]);
    let results = attack(&sb, "2-signaller");
    // The parent is the attempt's keeper, its parent the runner: neither may be signalled.
    assert!(results.contains_key("grandparent_pid"), "{results:?}");
    for denied in [
        "kill_runner",
        "kill_grandparent",
        "kill_sibling",
        "kill_sibling_group",
    ] {
        assert_eq!(
            results.get(denied),
            Some(&Value::from("EPERM")),
            "{denied}: {results:?}"
        );
    }
    // Landlock denies ptrace-reading a process outside the domain (`/proc/PID/environ`)
    // to an unprivileged teammate; as root the read went through on the test kernel (6.18),
    // so it is only asserted when the tests run as a normal user (README: Security model).
    if !is_root() {
        for denied in ["sibling_environ", "runner_environ"] {
            assert_eq!(
                results.get(denied),
                Some(&Value::from("EACCES")),
                "{denied}: {results:?}"
            );
        }
    } else {
        eprintln!("note: running as root; environ reads: {results:?}");
    }
    // The runner lived to write every output; the target ended on its own (no report), not
    // by a signal.
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains("Summary") || r.stdout.contains("completed"),
        "{r:?}"
    );
    let rows = rows(&sb);
    assert_eq!(
        rows["signaller"]["status"], "completed",
        "{:?}",
        rows["signaller"]
    );
    assert_eq!(rows["target"]["status"], "failed", "{:?}", rows["target"]);
    assert_eq!(rows["target"]["exit_code"], "0", "{:?}", rows["target"]);
    assert_no_survivors(&sb);
}

#[test]
fn honest_teammates_complete_under_the_sandbox() {
    if !landlock_or_skip("honest") {
        return;
    }
    let ids: Vec<String> = (1..=6).map(|i| format!("i{i}")).collect();
    let items: Vec<(&str, &str)> = ids.iter().map(|i| (i.as_str(), "success")).collect();
    let sb = layout(&items);
    let r = run(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("sandbox landlock"),
        "the start line says so: {r:?}"
    );
    let rows = rows(&sb);
    assert_eq!(rows.len(), 6);
    assert!(
        rows.values().all(|r| r["status"] == "completed"),
        "{rows:?}"
    );
    let journal = std::fs::read_to_string(workspace(&sb).join("journal.jsonl")).expect("journal");
    assert!(journal.contains(r#""sandbox":"landlock""#), "{journal}");
    assert_no_survivors(&sb);
    let dry = run(&sb, &["--dry-run"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(
        dry.stdout
            .contains("Sandbox: landlock (each teammate writes only the working directory"),
        "{dry:?}"
    );
}

/// The default, `--sandbox auto`, is Landlock where the kernel has it and the workspace
/// lies outside what teammates write: the forger of the test above fails the same way
/// without any flag. Where the workspace lies inside the working directory, auto runs
/// unconfined and says why and what to change on the first line; `--sandbox none` opts out,
/// and the first line says what that means and the flag that confines.
#[test]
fn the_default_sandbox_confines_teammates_where_the_layout_allows_and_says_why_not_where_not() {
    if !landlock_or_skip("auto") {
        return;
    }
    let sb = layout(&[("victim", "wait_attack"), ("forger", "forge")]);
    let r = run_with(&sb, "", &[]);
    assert_eq!(r.code, 1, "the victim did not complete: {r:?}");
    assert!(r.stdout.contains("; sandbox landlock\n"), "{r:?}");
    let results = attack(&sb, "2-forger");
    assert_eq!(
        results.get("report 1-victim"),
        Some(&Value::from("EACCES")),
        "{results:?}"
    );
    assert_eq!(rows(&sb)["victim"]["status"], "failed");

    let inside = Sandbox::new();
    inside.write_rows(&[("a", "success")]);
    let r = inside.fake_batch(&[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(&format!(
            "; sandbox none (auto: the workspace lies inside {0}, which teammates write (so does the user's state folder {0}/home/.local/state/teammate-runner); to confine them, set XDG_STATE_HOME to a folder outside it, or give --workspace DIR outside it, or use --isolate worktree; a teammate can forge another's verdict or edit the journal)\n",
            inside.path().display()
        )),
        "{r:?}"
    );
    let opted_out = inside.fake_batch(&["--sandbox", "none"]);
    assert!(
        opted_out.stdout.contains(
            "; sandbox none (a teammate can forge another's verdict or edit the journal; --sandbox landlock confines them)\n"
        ),
        "{opted_out:?}"
    );
}

/// A CLI that cannot make its own state folder under the sandbox fails with a reason that
/// names the folder and the definition key that allows it; declared as a folder in
/// `[sandbox] writes`, the runner makes it when missing and the same CLI completes.
#[test]
fn a_denied_state_folder_is_named_with_the_key_that_allows_it_and_declaring_it_works() {
    if !landlock_or_skip("state folder") {
        return;
    }
    let sb = layout(&[("a", "cli_state"), ("b", "eacces_cwd")]);
    let r = run(&sb, &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let row = &rows(&sb)["a"];
    let home = sb.join("home/.fakecli");
    assert!(
        row["error"].starts_with(&format!(
            "the sandbox denied writing {} (if the agent needs it, add it to `[sandbox] writes` of a runner definition",
            home.display()
        )),
        "{row:?}"
    );
    // A refusal in what the sandbox grants (the working directory) is not the sandbox's.
    assert!(
        rows(&sb)["b"]["error"].starts_with("exited with code 1: Error: EACCES"),
        "{:?}",
        rows(&sb)["b"]
    );
    assert!(!home.exists());

    let fake = agent("fake_agent.py");
    sb.write(
        "fakecli.toml",
        format!(
            "name = \"fakecli\"\nprogram = \"python3\"\nargs = [{fake:?}]\nprompt = \"stdin\"\noutput = \"text\"\n[sandbox]\nwrites = [\"~/.fakecli/\"]\n"
        ),
    );
    let file = sb.join("fakecli.toml").display().to_string();
    sb.write_rows(&[("a", "cli_state")]);
    let r: Run = run_agent_cmd(&sb, "landlock", &[], &["--runner-file", &file])
        .output()
        .expect("spawn runner")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(home.join("sessions").is_dir(), "{r:?}");
    assert_eq!(rows(&sb)["a"]["status"], "completed");
}

#[test]
fn a_workspace_inside_the_working_directory_is_refused_with_exit_2_writing_nothing() {
    if !landlock_or_skip("refuse") {
        return;
    }
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    let before = sb.tree();
    let r = sb.fake_batch(&["--sandbox", "landlock"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("lies inside") && r.stderr.contains("--workspace DIR outside it"),
        "says what to change: {r:?}"
    );
    assert!(r.stderr.contains("--isolate worktree"), "{r:?}");
    assert_eq!(sb.tree(), before, "nothing was written");
    // The dry run says the same, and a run that names no sandbox is not refused.
    let dry = sb.fake_batch(&["--sandbox", "landlock", "--dry-run"]);
    assert_eq!(dry.code, 2, "{dry:?}");
    let plain = sb.fake_batch(&["--dry-run"]);
    assert_eq!(plain.code, 0, "{plain:?}");
    assert!(
        plain.stdout.contains("Sandbox: none")
            && plain.stdout.contains("auto: the workspace lies inside"),
        "{plain:?}"
    );
}

#[test]
fn an_unknown_sandbox_is_a_usage_error() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "success")]);
    let r = sb.fake_batch(&["--sandbox", "docker"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("must be auto, none or landlock"), "{r:?}");
}

#[test]
fn with_worktrees_a_teammate_writes_its_own_worktree_only() {
    if !landlock_or_skip("worktree") {
        return;
    }
    let sb = Sandbox::new();
    git(sb.path(), &["init", "-q", "-b", "main"]);
    sb.write("README.md", "original\n");
    sb.write(
        ".gitignore",
        "*.runner/\nworkers-output*.csv\nin.csv\ninstr.md\n",
    );
    git(sb.path(), &["add", "-A"]);
    git(sb.path(), &["commit", "-q", "-m", "init"]);
    std::fs::create_dir_all(sb.join("home")).expect("mkdir home");
    sb.write_rows(&[("bystander", "wait_attack"), ("intruder", "trespass")]);
    // The bystander is released by hand once the attack is over (it works in its own
    // worktree, so it cannot see the intruder's attack.done).
    let (_, results) = worktree_attack(&sb, "landlock", "2-intruder", "1-bystander");
    let ws = sb.join("workers-output.runner");
    for denied in [
        "sibling_worktree",
        "sibling_worktree_file",
        "sibling_new_file",
        "journal_append",
        "home",
    ] {
        assert_eq!(
            results.get(denied),
            Some(&Value::from("EACCES")),
            "{denied}: {results:?}"
        );
    }
    assert_eq!(
        results.get("own_cwd"),
        Some(&Value::from("ok")),
        "{results:?}"
    );
    assert!(
        !sb.join("own-intruder").exists(),
        "the main tree is not its cwd"
    );
    assert!(!ws.join("worktrees/1-bystander/pwned").exists());
    assert_eq!(sb.read("README.md"), "original\n");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(
        rows["intruder"]["status"], "completed",
        "{:?}",
        rows["intruder"]
    );
    assert_no_survivors(&sb);
}

#[test]
fn a_todo_run_whose_store_is_inside_its_working_directory_gets_advice_it_can_follow() {
    if !landlock_or_skip("todo refuse") {
        return;
    }
    let sb = Sandbox::new();
    let r = sb.run(&["add", "--store", "S", "Tidy up MODE=success"]);
    assert_eq!(r.code, 0, "{r:?}");
    sb.write("S/runner.toml", "sandbox = \"landlock\"\n");
    let before = sb.tree();
    let fake = agent("fake_agent.py");
    let r = sb.run(&["resolve", "--store", "S", "--yes", "--", "python3", &fake]);
    assert_eq!(r.code, 2, "{r:?}");
    // HOME (and so the state folder) lies in the working directory too.
    assert!(
        r.stderr.contains("lies inside")
            && r.stderr.contains("--isolate worktree")
            && r.stderr.contains("--workspace DIR outside it")
            && r.stderr.contains("XDG_STATE_HOME"),
        "says what a todo run can change: {r:?}"
    );
    assert!(
        !r.stderr.contains("--output"),
        "resolve has no --output: {r:?}"
    );
    assert_eq!(sb.tree(), before, "nothing was written");
}

/// A confined agent that cannot be executed (its script names an interpreter that is not
/// there) fails its item with the reason it has unconfined — the sandbox is not blamed, no
/// exit code is made up — and neither the attempt's keeper nor anything else is left
/// running.
#[test]
fn a_confined_agent_that_cannot_be_executed_fails_as_it_does_unconfined_and_leaves_nothing() {
    if !landlock_or_skip("cannot exec") {
        return;
    }
    let mut errors = Vec::new();
    for mode in ["landlock", "none"] {
        let sb = layout(&[("a", "success")]);
        sb.write("work/agent.sh", "#!/no/such/interpreter\necho never\n");
        let script = sb.join("work/agent.sh");
        let mut perms = std::fs::metadata(&script).expect("script").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&script, perms).expect("chmod");
        let script = script.display().to_string();
        let r: Run = run_agent_cmd(&sb, mode, &[], &["--", &script])
            .output()
            .expect("spawn runner")
            .into();
        assert_eq!(r.code, 1, "{mode}: {r:?}");
        assert!(r.stdout.contains(&format!("sandbox {mode}")), "{r:?}");
        let rows = rows(&sb);
        assert_eq!(rows["a"]["status"], "failed", "{mode}: {:?}", rows["a"]);
        assert!(
            rows["a"]["error"].contains("No such file or directory"),
            "{mode}: {:?}",
            rows["a"]
        );
        assert!(!rows["a"]["error"].contains("sandbox"), "{:?}", rows["a"]);
        errors.push(rows["a"]["error"].replace(&sb.path().display().to_string(), "<sb>"));
        assert_no_survivors(&sb);
    }
    assert_eq!(errors[0], errors[1], "the same reason with and without");
}

/// The keeper is the small `runner-keeper` program installed beside `runner`; a runner
/// without it beside (`cargo run` builds only `runner`) keeps its confined attempts with its
/// own binary, confined just the same.
#[test]
fn the_keeper_program_keeps_the_attempt_and_a_runner_without_it_keeps_them_itself() {
    if !landlock_or_skip("keeper program") {
        return;
    }
    let installed = std::path::Path::new(env!("CARGO_BIN_EXE_runner"));
    assert!(
        installed.with_file_name("runner-keeper").is_file(),
        "cargo builds runner-keeper beside runner"
    );
    for (alone, keeper) in [(false, "runner-keeper"), (true, "runner")] {
        let sb = layout(&[("a", "keeper_probe")]);
        let mut cmd = run_cmd(&sb, "landlock", &[]);
        if alone {
            let copy = sb.join("bin/runner");
            std::fs::create_dir_all(sb.join("bin")).expect("mkdir bin");
            std::fs::copy(installed, &copy).expect("copy runner");
            let mut with_copy = Command::new(&copy);
            with_copy.args(cmd.get_args());
            for (k, v) in cmd.get_envs() {
                match v {
                    Some(v) => with_copy.env(k, v),
                    None => with_copy.env_remove(k),
                };
            }
            with_copy.current_dir(sb.join("work"));
            cmd = with_copy;
        }
        let r: Run = cmd.output().expect("spawn runner").into();
        assert_eq!(r.code, 0, "alone={alone}: {r:?}");
        assert!(r.stdout.contains("sandbox landlock"), "{r:?}");
        let results = attack(&sb, "1-a");
        assert_eq!(results["keeper_exe"], keeper, "alone={alone}: {results:?}");
        assert_eq!(results["home"], "EACCES", "alone={alone}: {results:?}");
        assert!(!sb.join("home/pwned").exists());
        assert_no_survivors(&sb);
    }
}
