//! Process faults (issue 14): open-file limits, Ctrl-Z / `fg`, and processes that leave a
//! teammate's process group (`setsid`, daemons).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Run, Sandbox, by_id, wait_for};

const WS: &str = "workers-output.runner";
/// Part of the fake agent's command line (the runner's names it too, after `--instruction`).
const AGENT: &str = "fake_agent.py";
/// Part of the command line of a process the fake agent let escape.
const ESCAPEE: &str = "sleep 3600";

fn journal_count(sb: &Sandbox, event: &str) -> usize {
    std::fs::read_to_string(sb.join(WS).join("journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&format!("\"event\":\"{event}\"")))
        .count()
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(ok.success(), "kill {sig} {pid}");
}

fn wait_exit(child: &mut Child, secs: u64) -> i32 {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            use std::os::unix::process::ExitStatusExt;
            return st.code().unwrap_or(128 + st.signal().unwrap_or(0));
        }
        assert!(Instant::now() < until, "runner did not exit within {secs}s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The state letter of process `pid` (`R`, `S`, `T` stopped, `Z`…), `None` when it is gone.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim_start().chars().next()
}

/// Zombies whose parent is `ppid` (ended, but not reaped).
fn zombies_of(ppid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let mut fields = stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .split_whitespace();
        if fields.next() == Some("Z") && fields.next() == Some(ppid.to_string().as_str()) {
            found.push(pid);
        }
    }
    found
}

/// Pids of the sandbox's live processes other than runners whose command line contains
/// `needle`.
fn pids_of(sb: &Sandbox, needle: &str) -> Vec<u32> {
    sb.live_processes()
        .into_iter()
        .filter(|(_, cmdline)| cmdline.contains(needle) && !cmdline.contains("--instruction"))
        .map(|(pid, _)| pid)
        .collect()
}

/// `cmd` run by bash after `ulimit ARGS` (the limit applies to the runner and its children).
fn under_ulimit(cmd: &Command, ulimit: &str) -> Command {
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(format!("ulimit {ulimit} && exec \"$@\""))
        .arg("bash")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .stdin(Stdio::null());
    if let Some(dir) = cmd.get_current_dir() {
        c.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c
}

fn rows_all(sb: &Sandbox, n: usize, mode: &str) {
    let rows: Vec<(String, &str)> = (0..n).map(|i| (format!("r{i}"), mode)).collect();
    let rows: Vec<(&str, &str)> = rows.iter().map(|(id, m)| (id.as_str(), *m)).collect();
    sb.write_rows(&rows);
}

fn assert_all_completed(sb: &Sandbox, n: usize, r: &Run) {
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows.len(), n, "{r:?}");
    let not_completed: Vec<_> = rows
        .values()
        .filter(|row| row["status"] != "completed")
        .map(|row| format!("{}: {} {}", row["id"], row["status"], row["error"]))
        .collect();
    assert!(not_completed.is_empty(), "{not_completed:#?}\n{r:?}");
}

#[test]
fn a_tiny_open_file_limit_caps_jobs_with_one_warning_and_every_item_completes() {
    let sb = Sandbox::new();
    rows_all(&sb, 60, "success");
    let cmd = sb.fake_batch_cmd(&["--jobs", "1000"]);
    let r: Run = under_ulimit(&cmd, "-n 64")
        .output()
        .expect("spawn runner")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert_all_completed(&sb, 60, &r);
    assert_eq!(
        r.stderr.matches("only enough open files").count(),
        1,
        "one warning says --jobs was capped: {r:?}"
    );
    let left = sb.survivors_after(2.0);
    assert!(left.is_empty(), "processes survived: {left:?}");
}

#[test]
fn a_low_soft_open_file_limit_is_raised_so_no_item_fails_for_want_of_descriptors() {
    let sb = Sandbox::new();
    rows_all(&sb, 80, "success");
    let cmd = sb.fake_batch_cmd(&["--jobs", "7"]);
    let r: Run = under_ulimit(&cmd, "-Sn 48")
        .output()
        .expect("spawn runner")
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert_all_completed(&sb, 80, &r);
    assert!(
        !r.stderr.contains("only enough open files"),
        "the hard limit leaves room for 7: {r:?}"
    );
    assert!(sb.survivors_after(2.0).is_empty());
}

#[test]
fn ctrl_z_stops_every_teammate_and_fg_continues_them_without_counting_the_stop() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "wait_file"), ("b", "wait_file")]);
    let release = sb.join("release");
    let mut runner = sb
        .fake_batch_cmd(&["--jobs", "2", "--timeout", "3s"])
        .env("RELEASE_FILE", &release)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner");
    let mut agents = Vec::new();
    wait_for("both agents to run", 30, || {
        agents = pids_of(&sb, AGENT);
        journal_count(&sb, "attempt_started") == 2 && agents.len() == 2
    });
    signal(runner.id(), "-TSTP");
    wait_for("the runner and both agents to be stopped", 10, || {
        state(runner.id()) == Some('T') && agents.iter().all(|p| state(*p) == Some('T'))
    });
    // Longer than the time limit: stopped time must not count, and nobody works meanwhile.
    std::thread::sleep(Duration::from_secs(4));
    for pid in &agents {
        assert_eq!(state(*pid), Some('T'), "agent {pid} kept working");
    }
    std::fs::write(&release, "go").expect("release");
    signal(runner.id(), "-CONT");
    assert_eq!(wait_exit(&mut runner, 30), 0);
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b"] {
        assert_eq!(
            rows[id]["status"], "completed",
            "{id}: {}",
            rows[id]["error"]
        );
    }
    assert!(sb.survivors_after(2.0).is_empty());
}

#[test]
fn processes_that_left_a_teammates_group_end_with_its_attempt() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "daemon"), ("b", "wait_file")]);
    let release = sb.join("release");
    let mut runner = sb
        .fake_batch_cmd(&["--jobs", "1"])
        .env("RELEASE_FILE", &release)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner");
    wait_for("a to finish and b to start", 30, || {
        journal_count(&sb, "item_finished") == 1 && journal_count(&sb, "attempt_started") == 2
    });
    // The run goes on, but a's attempt is over: nothing it started may live on.
    wait_for("a's escaped sleeps to end while b still runs", 10, || {
        pids_of(&sb, ESCAPEE).is_empty()
    });
    assert!(
        runner.try_wait().expect("wait").is_none(),
        "the run goes on (b waits for its release)"
    );
    // They came to the runner (their subreaper) when their parents died: it reaps them.
    wait_for("the runner to reap the ended escapees", 10, || {
        zombies_of(runner.id()).is_empty()
    });
    std::fs::write(&release, "go").expect("release");
    assert_eq!(wait_exit(&mut runner, 30), 0);
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed", "{}", rows["a"]["error"]);
    assert_eq!(rows["b"]["status"], "completed", "{}", rows["b"]["error"]);
    assert!(sb.survivors_after(2.0).is_empty());
}

#[test]
fn a_timeout_ends_the_processes_that_left_the_teammates_group() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "daemon_hang")]);
    let r = sb.fake_batch(&["--timeout", "2s", "--grace", "1s"]);
    assert_eq!(r.code, 1, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "timed_out", "{r:?}");
    let left = sb.survivors_after(2.0);
    assert!(left.is_empty(), "processes survived: {left:?}");
}

#[test]
fn ctrl_c_ends_the_processes_that_left_a_teammates_group() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "daemon_hang")]);
    let mut runner = sb
        .fake_batch_cmd(&["--grace", "1s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner");
    let pids = sb.join(&format!("{WS}/teammates/1-a/work/escaped.pids"));
    wait_for("the agent's processes to leave its group", 30, || {
        pids.exists()
    });
    signal(runner.id(), "-INT");
    assert_eq!(wait_exit(&mut runner, 30), 130);
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "cancelled");
    let left = sb.survivors_after(2.0);
    assert!(left.is_empty(), "processes survived: {left:?}");
}

#[test]
fn after_kill_9_the_next_run_ends_what_the_dead_runs_teammates_left_outside_their_group() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "daemon_hang")]);
    let mut runner = sb
        .fake_batch_cmd(&[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner");
    let pids = sb.join(&format!("{WS}/teammates/1-a/work/escaped.pids"));
    wait_for("the agent's processes to leave its group", 30, || {
        pids.exists()
    });
    signal(runner.id(), "-KILL");
    wait_exit(&mut runner, 10);
    assert!(
        !pids_of(&sb, ESCAPEE).is_empty(),
        "the dead runner's escaped processes are still running"
    );
    sb.write("in.csv", "id,mode\na,success\n");
    let r = sb.fake_batch(&[]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed");
    let left = sb.survivors_after(2.0);
    assert!(
        left.is_empty(),
        "processes of the dead run survived: {left:?}"
    );
}

/// `kill -9` while the team waits out a rate limit: the journal has the pause, no teammate is
/// left, and the next run makes the attempt again (numbered on) and completes the item.
#[test]
fn after_kill_9_during_a_rate_limit_pause_the_next_run_completes_the_item() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "rate_limited_long")]);
    let mut runner = sb
        .fake_batch_cmd(&[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner");
    let journal = sb.join(&format!("{WS}/journal.jsonl"));
    wait_for("the team to pause", 30, || {
        std::fs::read_to_string(&journal).is_ok_and(|j| j.contains(r#""event":"team_paused""#))
    });
    signal(runner.id(), "-KILL");
    wait_exit(&mut runner, 10);
    let left = sb.survivors_after(2.0);
    assert!(left.is_empty(), "nothing runs during the pause: {left:?}");
    let r = sb.fake_batch(&[]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    assert_eq!(rows["a"]["status"], "completed", "{:?}", rows["a"]);
    assert_eq!(
        rows["a"]["attempts"], "2",
        "numbered on from the killed run"
    );
    assert_eq!(rows["a"]["summary"], "worked after the pause");
}

/// Issue 24: the runner alone stopped (`kill -STOP`, a debugger, a paused VM) while its
/// teammates go on. An agent that ended within its limit meanwhile is judged by the success
/// rule, not `timed_out`; and time the runner spent stopped does not count against an
/// attempt still running, whoever stopped it.
#[test]
fn a_stopped_runner_judges_what_ended_meanwhile_and_does_not_count_its_stop() {
    // First the agent ends while the runner is stopped (1 s of agent against a 3 s limit).
    // Then it ends only after the runner continues from a stop longer than its limit: it
    // waits for a file made after `kill -CONT`, so however long its own start takes on a
    // loaded machine (over 2 s was seen), the stop is all that could count against it, and
    // must not (issue 50: the outcome never hangs on how fast the agent runs).
    for (mode, limit, out) in [
        ("slow", "3s", "ended.csv"),
        ("wait_file", "4s", "running.csv"),
    ] {
        let sb = Sandbox::new();
        sb.write_rows(&[("a", mode)]);
        let release = sb.join("release");
        let mut runner = sb
            .fake_batch_cmd(&["--timeout", limit, "-o", out])
            .env("SLOW_SECONDS", "1")
            .env("RELEASE_FILE", &release)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn runner");
        let ws = out.replace(".csv", ".runner");
        let started = |sb: &Sandbox| {
            std::fs::read_to_string(sb.join(&ws).join("journal.jsonl"))
                .unwrap_or_default()
                .contains("\"event\":\"attempt_started\"")
        };
        wait_for("the agent to start", 30, || started(&sb));
        signal(runner.id(), "-STOP");
        wait_for("the runner to be stopped", 10, || {
            state(runner.id()) == Some('T')
        });
        // Longer than either limit.
        std::thread::sleep(Duration::from_secs_f64(4.5));
        signal(runner.id(), "-CONT");
        std::fs::write(&release, "go").expect("release");
        assert_eq!(wait_exit(&mut runner, 30), 0, "{out}");
        let rows = by_id(&sb.join(out), "id");
        assert_eq!(
            rows["a"]["status"], "completed",
            "{out}: {}",
            rows["a"]["error"]
        );
        assert_eq!(rows["a"]["exit_code"], "0", "{out}");
        assert!(sb.survivors_after(1.0).is_empty());
    }
}

/// Issue 24: `runner status` on a team whose runner is stopped says so (it showed it as
/// running) and how to continue it.
#[test]
fn status_shows_a_stopped_runner_as_paused_with_how_to_continue_it() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "wait_file")]);
    let release = sb.join("release");
    let mut runner = sb
        .fake_batch_cmd(&[])
        .env("RELEASE_FILE", &release)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner");
    wait_for("the agent to start", 30, || {
        journal_count(&sb, "attempt_started") == 1
    });
    wait_for("team.json to show it running", 30, || {
        sb.read_opt(&format!("{WS}/team.json"))
            .is_some_and(|t| t.contains("\"1-a\""))
    });
    signal(runner.id(), "-STOP");
    wait_for("the runner to be stopped", 10, || {
        state(runner.id()) == Some('T')
    });
    let brief = sb.run(&["status", "--brief"]);
    let pid = runner.id();
    assert!(
        brief.stdout.contains(&format!(
            "paused (its runner, pid {pid}, is stopped; `kill -CONT {pid}` or `fg` continues it)"
        )),
        "{brief:?}"
    );
    signal(runner.id(), "-CONT");
    let brief = sb.run(&["status", "--brief"]);
    assert!(!brief.stdout.contains("paused"), "{brief:?}");
    std::fs::write(&release, "go").expect("release");
    assert_eq!(wait_exit(&mut runner, 30), 0);
    assert!(sb.survivors_after(1.0).is_empty());
}

/// Issue 50: the runner and its agents get SIGTERM together (a process-tree kill, an IDE
/// closing its terminal). The agents, killed by a signal the runner did not send, ended
/// `failed / agent_error`; they were interrupted with the run, so they end `cancelled` (and
/// run again on the next run), and nothing is left running.
#[test]
fn agents_terminated_together_with_the_runner_end_cancelled() {
    let sb = Sandbox::new();
    sb.write_rows(&[("a", "hang"), ("b", "hang")]);
    let mut runner = sb
        .fake_batch_cmd(&["--grace", "2s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner");
    wait_for("both agents to start", 30, || {
        journal_count(&sb, "attempt_started") == 2
    });
    let agents = || -> Vec<String> {
        sb.live_processes()
            .into_iter()
            .filter(|(pid, cmd)| *pid != runner.id() && cmd.contains("fake_agent.py"))
            .map(|(pid, _)| pid.to_string())
            .collect()
    };
    wait_for("both agents to run", 30, || agents().len() == 2);
    let agents = agents();
    // One kill for all, the agents first, as a tree kill delivers it (its status is not
    // looked at: a pid read from /proc may be gone by now, and kill still signals the rest).
    Command::new("kill")
        .arg("-TERM")
        .args(&agents)
        .arg(runner.id().to_string())
        .status()
        .expect("kill");
    assert_eq!(wait_exit(&mut runner, 30), 130);
    let rows = by_id(&sb.join("workers-output.csv"), "id");
    for id in ["a", "b"] {
        assert_eq!(rows[id]["status"], "cancelled", "{:?}", rows[id]);
    }
    assert!(sb.survivors_after(2.0).is_empty());
}

/// Issue 50: an unconfined agent whose helper opens `/dev/tty` for a password prompt (git,
/// ssh) was stopped by `SIGTTIN` and waited out its whole time limit when the runner had a
/// terminal. Every teammate now starts in a session of its own: the open fails at once
/// (`ENXIO`) and the agent goes on to finish its item.
#[test]
fn an_unconfined_agent_that_asks_the_terminal_for_a_password_is_not_stopped() {
    use crate::sandbox::{layout, rows, run_cmd, terminal_or_skip, under_terminal};
    if !terminal_or_skip("tty_read") {
        return;
    }
    let sb = layout(&[("a", "tty_read")]);
    let out = under_terminal(
        run_cmd(&sb, "none", &["--timeout", "20s"]),
        &sb.join("work"),
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let row = &rows(&sb)["a"];
    assert_eq!(row["status"], "completed", "{row:?}\n{shown}");
    assert_eq!(row["result"], r#"{"tty":"ENXIO"}"#, "{row:?}");
    assert!(sb.survivors_after(5.0).is_empty());
}

/// Issue 50: a process that left the session and cleared its environment (`setsid env -i`,
/// as daemon and MCP launchers do) kept the agent's output open with no mark to find it by:
/// it survived the run while the warning said it was "ended" by "a process the runner could
/// not name". It is found by the pipe it holds, named, ended, and the run says so.
#[test]
fn a_holder_that_dropped_its_mark_and_session_is_found_by_its_pipe_and_ended() {
    use crate::sandbox::{layout, rows, run_with, workspace};
    let sb = layout(&[("a", "env_i_holder")]);
    let r = run_with(&sb, "none", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(rows(&sb)["a"]["status"], "completed", "{r:?}");
    let pidfile = workspace(&sb).join("teammates/1-a/work/holder.pid");
    let pid =
        std::fs::read_to_string(&pidfile).unwrap_or_else(|e| panic!("{}: {e}", pidfile.display()));
    let pid = pid.trim();
    assert!(
        r.stderr.contains(&format!("sleep (pid {pid})"))
            && r.stderr
                .contains("kept the agent's output open after it exited; ended"),
        "the holder is named as ended: {r:?}"
    );
    assert_eq!(
        state(pid.parse().expect("pid")).filter(|s| *s != 'Z'),
        None,
        "the holder {pid} survived"
    );
    assert!(sb.survivors_after(5.0).is_empty());
}
