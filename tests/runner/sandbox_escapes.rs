//! `--sandbox landlock` against issue 25's escapes: a teammate that plants links for the
//! runner to write through, makes device nodes, looks for the unsandboxed servers, tricks the
//! runner's git, leaves a daemon, pushes input into the terminal, outlives its time limit or
//! rewrites the batch definition. The layout and helpers are `sandbox.rs`'s.

use std::process::Command;

use serde_json::Value;

use crate::harness::{Run, Sandbox, agent, by_id, git, landlock_or_skip};
use crate::sandbox::{
    assert_no_survivors, attack, is_root, layout, rows, run, run_cmd, run_with, terminal_or_skip,
    under_terminal, workspace, worktree_attack,
};

/// Issue 25, escape 1: a teammate plants its stderr log as a link to a sibling's
/// `report.json` and prints a forged report to stderr; the runner, which creates that log on
/// the first byte, wrote through the link and the victim — which wrote no report — ended
/// `completed` "FORGED". The runner never follows a link in a teammate's folder: it replaces
/// it with a file of its own (and reads a report only from a plain file). With and without
/// the sandbox: the runner's own writes are not confined by it.
#[test]
fn a_teammate_cannot_make_the_runner_write_a_siblings_report_through_a_link() {
    let modes: &[&str] = if landlock_or_skip("link forge") {
        &["none", "landlock"]
    } else {
        &["none"]
    };
    for mode in modes {
        let sb = layout(&[("victim", "wait_attack"), ("forger", "link_forge")]);
        let r = run_with(&sb, mode, &[]);
        assert_eq!(r.code, 1, "{mode}: the victim did not complete: {r:?}");
        // Unconfined the forger plants the link; under the sandbox it cannot even do that:
        // its logs lie beside its writable folder, not in it.
        let planted = if *mode == "landlock" { "EACCES" } else { "ok" };
        assert_eq!(
            attack(&sb, "2-forger").get("link 1-victim"),
            Some(&Value::from(planted)),
            "{mode}"
        );
        let rows = rows(&sb);
        assert_eq!(
            rows["victim"]["status"], "failed",
            "{mode}: {:?}",
            rows["victim"]
        );
        assert_ne!(rows["victim"]["summary"], "FORGED");
        let victim_report = workspace(&sb).join("teammates/1-victim/work/report.json");
        assert!(
            !victim_report.exists(),
            "{mode}: nothing was written through the link"
        );
        let log = workspace(&sb).join("teammates/2-forger/attempt-1.stderr.log");
        let meta = std::fs::symlink_metadata(&log).expect("the forger's stderr log");
        assert!(
            meta.file_type().is_file(),
            "{mode}: the runner's own file, not the link"
        );
        assert_no_survivors(&sb);
    }
}

/// Issue 25, escape 4: as root, a teammate made a character device (`kmsg`) and a loop block
/// device in its own folder and wrote through them. Under the sandbox it may make neither;
/// without it (the control) root can.
#[test]
fn a_teammate_cannot_make_device_nodes_under_the_sandbox() {
    if !landlock_or_skip("mknod") {
        return;
    }
    let sb = layout(&[("a", "mknod")]);
    let r = run(&sb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let results = attack(&sb, "1-a");
    for node in ["char", "block"] {
        assert_ne!(
            results.get(node),
            Some(&Value::from("ok")),
            "{node}: {results:?}"
        );
    }
    assert!(!workspace(&sb).join("teammates/1-a/work/kmsg").exists());
    if is_root() {
        let sb = layout(&[("a", "mknod")]);
        let r = run_with(&sb, "none", &[]);
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!(
            attack(&sb, "1-a").get("char"),
            Some(&Value::from("ok")),
            "the control"
        );
    }
    assert_no_survivors(&sb);
}

/// Issue 25, escape 3 (in part): the environment named the tmux server (whose `run-shell`
/// ran a command outside the sandbox), the SSH agent, the session bus and the displays.
/// Under the sandbox a teammate starts without them; without it (the control) it has them.
#[test]
fn a_sandboxed_teammate_is_not_told_where_the_unsandboxed_servers_are() {
    if !landlock_or_skip("reach out") {
        return;
    }
    let ways = [
        ("TMUX", "/tmp/tmux-0/default,1,0"),
        ("TMUX_PANE", "%1"),
        ("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1"),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/0/bus"),
        ("DISPLAY", ":0"),
        ("WAYLAND_DISPLAY", "wayland-0"),
    ];
    for (mode, told) in [("landlock", 0), ("none", ways.len())] {
        let sb = layout(&[("a", "reach_out")]);
        let out = run_cmd(&sb, mode, &[]).envs(ways).output().expect("runner");
        assert_eq!(out.status.code(), Some(0), "{mode}");
        let seen = attack(&sb, "1-a");
        assert_eq!(seen.len(), told, "{mode}: {seen:?}");
    }
}

/// Issue 25, escape 7: a store reached through a symlink into the working directory passed
/// the "workspace inside the teammates' writable area" check (a teammate then appended to
/// the journal), and `--store ../s3`, outside it, was refused. Both are judged by where
/// the paths really lead: since issue 49 the linked store's team goes to the state folder
/// (it would lie where teammates write), and a `--workspace` named through the link is
/// refused.
#[test]
fn the_workspace_check_follows_links_and_dotdot_to_where_they_lead() {
    if !landlock_or_skip("store link") {
        return;
    }
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("work/inside")).expect("work");
    std::os::unix::fs::symlink(sb.join("work/inside"), sb.join("via-link")).expect("link");
    let fake = agent("fake_agent.py");
    let run_in = |store: &str, extra: &[&str]| -> crate::harness::Run {
        let add = sb
            .cmd(&["add", "--store", store, "Tidy up MODE=success"])
            .current_dir(sb.join("work"))
            .output()
            .expect("add");
        assert_eq!(add.status.code(), Some(0), "{store}: {add:?}");
        sb.cmd(&[
            "resolve",
            "--store",
            store,
            "--yes",
            "--sandbox",
            "landlock",
            // The teammates' findings are read from their folders after the run.
            "--keep-logs",
        ])
        .args(extra)
        .args(["--", "python3", &fake])
        .current_dir(sb.join("work"))
        .output()
        .expect("resolve")
        .into()
    };
    let linked = sb.join("via-link").display().to_string();
    let r = run_in(&linked, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("sandbox landlock"), "{r:?}");
    assert!(
        !sb.join("work/inside/teams").exists(),
        "through the link the store is inside: its team is kept elsewhere: {r:?}"
    );
    let ws = sb.join("via-link/ws").display().to_string();
    let r = run_in(&linked, &["--workspace", &ws]);
    assert_eq!(r.code, 2, "through the link it is inside: {r:?}");
    assert!(r.stderr.contains("lies inside"), "{r:?}");
    assert!(!sb.join("work/inside/ws").exists());
    let r = run_in("../s3", &[]);
    assert_eq!(r.code, 0, "../s3 is outside the working directory: {r:?}");
}

/// Issue 25, escape 2: a teammate replaced its worktree's `.git` with a repository of its
/// own whose `core.fsmonitor` names a command; the runner's `git status` after the attempt
/// ran it outside the sandbox. The runner checks that the worktree still points into its
/// repository before running git there (and never runs a repository's fsmonitor or hooks).
#[test]
fn a_teammate_cannot_make_the_runners_git_run_its_command() {
    if !landlock_or_skip("git trap") {
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
    sb.write_rows(&[("a", "git_trap")]);
    let r: Run = sb
        .fake_batch_cmd(&["--sandbox", "landlock", "--isolate", "worktree"])
        .output()
        .expect("runner")
        .into();
    assert!(
        !sb.join("home/fsmonitor-ran").exists(),
        "the trap ran: {r:?}"
    );
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "failed", "{:?}", rows["a"]);
    assert!(
        rows["a"]["error"].contains("no longer points into the repository"),
        "{:?}",
        rows["a"]
    );
    assert_no_survivors(&sb);
}

/// Issue 49: a teammate pointed its worktree's `.git` at a sibling's gitdir (which lies
/// under the repository's `worktrees/` too); the runner's commit after the attempt landed on
/// the sibling's branch. The runner accepts only the gitdir git registered for that worktree:
/// it runs no git there, the item fails saying so, and the sibling's branch is unchanged. In
/// both modes: it is the runner's own commit that must not be misled.
#[test]
fn a_teammate_cannot_make_the_runner_commit_onto_a_siblings_branch() {
    let modes: &[&str] = if landlock_or_skip("gitdir theft") {
        &["none", "landlock"]
    } else {
        &["none"]
    };
    for mode in modes {
        let sb = Sandbox::new();
        git(sb.path(), &["init", "-q", "-b", "main"]);
        sb.write("README.md", "original\n");
        sb.write(
            ".gitignore",
            // The victim's release is no work of its own: its branch stays at the base.
            "*.runner/\nworkers-output*.csv\nin.csv\ninstr.md\nattack.done\n",
        );
        git(sb.path(), &["add", "-A"]);
        git(sb.path(), &["commit", "-q", "-m", "init"]);
        let base = git(sb.path(), &["rev-parse", "HEAD"]);
        std::fs::create_dir_all(sb.join("home")).expect("mkdir home");
        sb.write_rows(&[("victim", "wait_attack"), ("thief", "steal_gitdir")]);
        // The victim is released once the thief's attempt is over (its worktree is its own).
        let (_, results) = worktree_attack(&sb, mode, "2-thief", "1-victim");
        assert_eq!(
            results.get("repoint"),
            Some(&Value::from("ok")),
            "{results:?}"
        );
        let branches = git(
            sb.path(),
            &["branch", "--list", "runner/*", "--format=%(refname:short)"],
        );
        let victim = branches
            .lines()
            .find(|b| b.ends_with("/1-victim"))
            .unwrap_or_else(|| panic!("{mode}: no victim branch in {branches}"));
        assert_eq!(
            git(sb.path(), &["rev-parse", victim]),
            base,
            "{mode}: the runner committed onto the victim's branch"
        );
        let rows = by_id(&sb.join("workers-output.csv"), "id");
        let thief = &rows["thief"];
        assert_eq!(thief["status"], "failed", "{mode}: {thief:?}");
        assert!(
            thief["error"].contains("own git folder"),
            "{mode}: {thief:?}"
        );
        assert!(thief["commit"].is_empty(), "{mode}: {thief:?}");
        assert_eq!(sb.read("README.md"), "original\n");
        assert_no_survivors(&sb);
    }
}

/// Whether process `pid` is alive (a zombie is not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|t| !t.trim_start().starts_with('Z'))
    })
}

/// Issue 25, escape 6: a daemon started with `env -i` (no mark), in a session of its own and
/// re-parented, outlived its attempt and the run. Under the sandbox the attempt's keeper — a
/// subreaper outside the teammate's domain, which the teammate cannot kill — ends it with the
/// attempt; without the sandbox the runner, its subreaper, ends it with the run at the latest
/// (issue 50; it survived before).
#[test]
fn a_daemon_that_drops_its_mark_does_not_outlive_its_attempt() {
    if !landlock_or_skip("env -i daemon") {
        return;
    }
    for mode in ["landlock", "none"] {
        let sb = layout(&[("a", "env_i_daemon")]);
        let r = run_with(&sb, mode, &[]);
        assert_eq!(r.code, 0, "{mode}: {r:?}");
        let pidfile = workspace(&sb).join("teammates/1-a/work/daemon.pid");
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap_or_else(|e| panic!("{mode}: {}: {e}", pidfile.display()))
            .trim()
            .parse()
            .expect("pid");
        let survived = alive(pid);
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        if mode == "landlock" {
            assert!(!survived, "the daemon {pid} outlived its sandboxed attempt");
            let results = attack(&sb, "1-a");
            assert_eq!(
                results.get("kill_parent"),
                Some(&Value::from("EPERM")),
                "the teammate killed its keeper: {results:?}"
            );
            assert_no_survivors(&sb);
        } else {
            assert!(!survived, "the daemon {pid} outlived the unconfined run");
            assert_no_survivors(&sb);
        }
    }
}

/// Issue 25, escape 3: a teammate pushed a command into the terminal `runner` was started
/// from (`TIOCSTI` on its controlling terminal; as root on any pseudo-terminal), and the
/// user's shell ran it after `runner` returned. Under the sandbox a teammate is in a session
/// of its own with no controlling terminal, and no device ioctl is allowed; without it the
/// teammate has no controlling terminal either (issue 50).
#[test]
fn a_sandboxed_teammate_has_no_terminal_to_push_input_into() {
    if !landlock_or_skip("tty") {
        return;
    }
    if !terminal_or_skip("tty") {
        return;
    }
    for mode in ["landlock", "none"] {
        let sb = layout(&[("a", "tty")]);
        let out = under_terminal(run_cmd(&sb, mode, &[]), &sb.join("work"));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let results = attack(&sb, "1-a");
        if mode == "landlock" {
            assert_eq!(
                results.get("sid_is_me"),
                Some(&Value::Bool(true)),
                "{results:?}"
            );
            let pushed: Vec<_> = results
                .iter()
                .filter(|(k, v)| k.as_str() != "sid_is_me" && v.as_str() == Some("ok"))
                .collect();
            assert!(
                pushed.is_empty(),
                "reached a terminal: {pushed:?} of {results:?}"
            );
            assert!(
                results.keys().any(|k| k.starts_with("sti_pts_")),
                "{results:?}"
            );
        } else {
            // Unconfined, a teammate is in a session of its own too (issue 50), so it has no
            // controlling terminal either; as root it may still reach a pseudo-terminal by
            // name, which only the sandbox's device rule stops.
            assert_eq!(
                results.get("sid_is_me"),
                Some(&Value::Bool(true)),
                "{results:?}"
            );
            assert_eq!(
                results.get("open_tty"),
                Some(&Value::from("ENXIO")),
                "{results:?}"
            );
        }
        assert_no_survivors(&sb);
    }
}

/// A sandboxed attempt that outlives its time limit — one ignoring SIGTERM, one that started
/// processes outside its group and hangs — ends `timed_out` with nothing left running: the
/// runner asks the keeper to kill the tree instead of killing the keeper.
#[test]
fn a_sandboxed_attempt_that_times_out_leaves_nothing_running() {
    if !landlock_or_skip("timeout") {
        return;
    }
    let sb = layout(&[("a", "daemon_hang"), ("b", "ignore_term")]);
    let r = run(&sb, &["--timeout", "1s", "--grace", "1s"]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = rows(&sb);
    for id in ["a", "b"] {
        assert_eq!(rows[id]["status"], "timed_out", "{id}: {:?}", rows[id]);
    }
    assert_no_survivors(&sb);
}

/// Issue 25, escape 5: without worktrees a teammate rewrote `BATCH.md` (in the working
/// directory it may write) to `sandbox: none` with a verify of its own, and the next run
/// started unsandboxed from it. The run that saw the change says so; the next refuses to
/// start from it (exit 2, nothing written) until a person accepts it.
#[test]
fn a_batch_definition_a_teammate_rewrote_is_not_run_until_a_person_accepts_it() {
    if !landlock_or_skip("rewrite BATCH.md") {
        return;
    }
    let sb = layout(&[("a", "rewrite_batch")]);
    let fake = agent("fake_agent.py");
    sb.write(
        "work/BATCH.md",
        format!(
            "---\ninput: ../in.csv\noutput: ../out/workers-output.csv\nid_column: id\nsandbox: landlock\ncommand: [python3, {fake}]\n---\n{}",
            crate::harness::FAKE_INSTRUCTION
        ),
    );
    let batch = |extra: &[&str]| -> Run {
        let mut args = vec!["batch", "BATCH.md", "--format", "plain"];
        args.extend(extra);
        let mut cmd = sb.cmd(&args);
        cmd.current_dir(sb.join("work"));
        let r: Run = cmd.output().expect("runner").into();
        eprintln!("{r:?}");
        r
    };
    let first = batch(&[]);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(
        first
            .stderr
            .contains("BATCH.md changed while this run was going on"),
        "{first:?}"
    );
    let rewritten = std::fs::read_to_string(sb.join("work/BATCH.md")).expect("BATCH.md");
    assert!(rewritten.contains("sandbox: none"), "the attack happened");
    let output = std::fs::read(sb.join("out/workers-output.csv")).expect("output");
    let journal = std::fs::read(workspace(&sb).join("journal.jsonl")).expect("journal");

    let second = batch(&["--only", "a"]);
    assert_eq!(second.code, 2, "{second:?}");
    assert!(
        second
            .stderr
            .contains("BATCH.md changed while the last run")
            && second.stderr.contains("--accept-changes"),
        "{second:?}"
    );
    assert_eq!(
        std::fs::read(sb.join("out/workers-output.csv")).expect("output"),
        output
    );
    assert_eq!(
        std::fs::read(workspace(&sb).join("journal.jsonl")).expect("journal"),
        journal,
        "nothing written"
    );

    // A person read it and puts the sandbox back; an edit between runs is theirs.
    sb.write(
        "work/BATCH.md",
        rewritten.replace("sandbox: none", "sandbox: landlock"),
    );
    let accepted = batch(&["--only", "a", "--accept-changes"]);
    assert!(accepted.stdout.contains("sandbox landlock"), "{accepted:?}");
    assert_no_survivors(&sb);
}

/// Issue 49: `/dev/pts` was writable to every teammate, which wrote OSC 52 (clipboard) and
/// title sequences into the user's open terminals. Under the sandbox a teammate may neither
/// write a terminal of the user's nor make one (`/dev/ptmx`) unless its definition declares
/// it needs a pseudo-terminal (`[sandbox] pty = true`, the control).
#[test]
fn a_teammate_cannot_write_into_the_users_terminals_under_the_sandbox() {
    if !landlock_or_skip("tty write") {
        return;
    }
    // The victim: a terminal held open by another process, as a user's shell holds one.
    let mut holder = Command::new("python3")
        .args([
            "-c",
            "import os,sys,time\nm,s=os.openpty()\nprint(os.ttyname(s),flush=True)\ntime.sleep(60)",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    {
        use std::io::BufRead;
        let out = holder.stdout.take().expect("stdout");
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .expect("tty name");
    }
    let tty = line.trim().to_owned();
    assert!(tty.starts_with("/dev/pts/"), "{tty}");
    let fake = agent("fake_agent.py");
    for (pty, wanted) in [(false, "EACCES"), (true, "ok")] {
        let sb = layout(&[("a", "tty_write")]);
        sb.write(
            "tty.toml",
            format!(
                "name = \"ttycli\"\nprogram = \"python3\"\nargs = [{fake:?}]\nprompt = \"stdin\"\noutput = \"text\"\n[sandbox]\npty = {pty}\n"
            ),
        );
        let file = sb.join("tty.toml").display().to_string();
        let r: Run = crate::sandbox::run_agent_cmd(&sb, "landlock", &[], &["--runner-file", &file])
            .env("VICTIM_TTY", &tty)
            .output()
            .expect("spawn runner")
            .into();
        assert_eq!(r.code, 0, "{r:?}");
        let results = attack(&sb, "1-a");
        assert_eq!(
            results.get("victim tty"),
            Some(&Value::from(wanted)),
            "pty = {pty}: {results:?}"
        );
        assert_eq!(
            results.get("ptmx"),
            Some(&Value::from(wanted)),
            "pty = {pty}: {results:?}"
        );
        assert_no_survivors(&sb);
    }
    let _ = holder.kill();
    let _ = holder.wait();
}
