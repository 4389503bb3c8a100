//! The sandbox's keeper server (issue 49: one small process per run hands each confined
//! attempt to a keeper it forked, which serves one attempt after another): teammates it
//! keeps stay apart, also one after another under one keeper, a runner killed with
//! `kill -9` leaves nothing of its run alive (the server, its keepers, their agents), and a
//! server killed under running attempts fails them with a clear kind and the run ends.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{landlock_or_skip, wait_for};
use crate::sandbox::{assert_no_survivors, attack, layout, rows, run, run_cmd, workspace};

/// The fake agents of a sandbox that are running (`hang` mode), by their command line (not
/// the runner's, nor a keeper's that names the agent in its arguments).
fn agents(sb: &crate::harness::Sandbox) -> usize {
    sb.live_processes()
        .iter()
        .filter(|(_, cmd)| {
            cmd.contains("fake_agent.py")
                && !cmd.contains("--instruction")
                && !cmd.contains("runner-keeper")
        })
        .count()
}

/// The parent pid of process `pid` (field 4 of `/proc/PID/stat`).
fn ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The keeper server of the run `runner` (its child running the keeper program).
fn server_of(sb: &crate::harness::Sandbox, runner: u32) -> Option<u32> {
    sb.live_processes()
        .into_iter()
        .find(|(pid, cmd)| ppid(*pid) == Some(runner) && cmd.contains("runner-keeper"))
        .map(|(pid, _)| pid)
}

fn wait_exit(child: &mut Child, secs: u64) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            return Some(st);
        }
        if Instant::now() > until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two attackers and their victims, all kept by the one server of the run: each keeper is a
/// `runner-keeper` forked by that server (not the runner), and still neither teammate may
/// write the other's folder.
#[test]
fn teammates_kept_by_one_server_still_cannot_write_each_others_folders() {
    if !landlock_or_skip("keeper server: attacker and victim") {
        return;
    }
    let sb = layout(&[
        ("victim", "wait_attack"),
        ("forger", "forge"),
        ("p1", "keeper_probe"),
        ("p2", "keeper_probe"),
    ]);
    let r = run(&sb, &[]);
    assert_eq!(r.code, 1, "the victim did not complete: {r:?}");
    assert_eq!(
        attack(&sb, "2-forger").get("report 1-victim"),
        Some(&Value::from("EACCES"))
    );
    let rows = rows(&sb);
    assert_ne!(rows["victim"]["summary"], "FORGED", "{:?}", rows["victim"]);
    let (p1, p2) = (attack(&sb, "3-p1"), attack(&sb, "4-p2"));
    for p in [&p1, &p2] {
        assert_eq!(p["keeper_exe"], "runner-keeper", "{p:?}");
        assert_eq!(
            p["server_exe"], "runner-keeper",
            "forked by the server: {p:?}"
        );
        assert_eq!(p["home"], "EACCES", "{p:?}");
    }
    assert_eq!(p1["server_pid"], p2["server_pid"], "one server for the run");
    assert_no_survivors(&sb);
}

/// One slot, four confined attempts in a row, all kept by one keeper (issue 49: a keeper
/// serves one attempt after another, so an attempt costs no fork and exit of a keeper): the
/// first leaves a daemon that dropped its mark, which is dead when the run ends and could not
/// kill the keeper; the second ignores SIGTERM and is killed at its time limit; the next two,
/// under the same keeper, complete (nothing sent to the killed one reaches them) and may
/// still not write HOME.
#[test]
fn one_keeper_serves_attempts_one_after_another_and_nothing_of_one_reaches_the_next() {
    if !landlock_or_skip("keeper server: one keeper, attempts in a row") {
        return;
    }
    let sb = layout(&[
        ("a", "env_i_daemon"),
        ("b", "ignore_term"),
        ("c", "keeper_probe"),
        ("d", "keeper_probe"),
    ]);
    let r = run(
        &sb,
        &[
            "--jobs",
            "1",
            "--timeout",
            "4s",
            "--grace",
            "1s",
            "--retries",
            "0",
        ],
    );
    assert_eq!(r.code, 1, "b timed out: {r:?}");
    let rows = rows(&sb);
    assert_eq!(rows["b"]["status"], "timed_out", "{:?}", rows["b"]);
    for id in ["a", "c", "d"] {
        assert_eq!(rows[id]["status"], "completed", "{id}: {:?}", rows[id]);
    }
    let daemon = std::fs::read_to_string(workspace(&sb).join("teammates/1-a/work/daemon.pid"))
        .expect("daemon.pid");
    let daemon: u32 = daemon.trim().parse().expect("pid");
    // Dead, or a zombie (it dropped the sandbox's mark, so `live_processes` cannot see it).
    let alive = std::fs::read_to_string(format!("/proc/{daemon}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|t| !t.trim_start().starts_with('Z'))
    });
    let _ = std::process::Command::new("kill")
        .args(["-9", &daemon.to_string()])
        .stderr(Stdio::null())
        .status();
    assert!(!alive, "the daemon {daemon} outlived its attempt");
    assert_eq!(
        attack(&sb, "1-a").get("kill_parent"),
        Some(&Value::from("EPERM"))
    );
    let (c, d) = (attack(&sb, "3-c"), attack(&sb, "4-d"));
    assert_eq!(c["keeper_pid"], d["keeper_pid"], "one keeper: {c:?} {d:?}");
    assert_eq!(c["server_pid"], d["server_pid"], "{c:?} {d:?}");
    for p in [&c, &d] {
        assert_eq!(p["keeper_exe"], "runner-keeper", "{p:?}");
        assert_eq!(p["home"], "EACCES", "{p:?}");
    }
    assert!(!sb.join("home/pwned").exists());
    assert_no_survivors(&sb);
}

/// `kill -9` of the runner while confined agents run: its control socket closes, the server
/// exits, and each keeper, told by its parent's death, kills its agent's tree — nothing of
/// the run is left, the server included.
#[test]
fn kill_9_of_the_runner_leaves_no_confined_agent_nor_keeper_alive() {
    if !landlock_or_skip("keeper server: kill -9 of the runner") {
        return;
    }
    let sb = layout(&[("a", "hang"), ("b", "hang")]);
    let mut runner = run_cmd(&sb, "landlock", &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner");
    wait_for("both confined agents to run", 60, || agents(&sb) == 2);
    runner.kill().expect("kill -9");
    assert!(wait_exit(&mut runner, 10).is_some(), "the runner is gone");
    assert_no_survivors(&sb);
}

/// The keeper server killed under running attempts: each keeper kills its agent's tree and
/// says so; the attempts fail as `setup` with that reason (not a hang, not a made-up exit
/// code), the run ends, and nothing is left.
#[test]
fn a_keeper_server_killed_mid_run_fails_its_attempts_clearly_and_the_run_ends() {
    if !landlock_or_skip("keeper server: killed mid-run") {
        return;
    }
    let sb = layout(&[("a", "hang"), ("b", "hang")]);
    let mut runner = run_cmd(&sb, "landlock", &["--retries", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner");
    wait_for("both confined agents to run", 60, || agents(&sb) == 2);
    let server = server_of(&sb, runner.id()).expect("a keeper server runs");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &server.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = wait_exit(&mut runner, 60).expect("the run ends");
    assert_eq!(status.code(), Some(1), "{status:?}");
    let rows = rows(&sb);
    for id in ["a", "b"] {
        assert_eq!(rows[id]["status"], "failed", "{:?}", rows[id]);
        assert_eq!(rows[id]["failure_kind"], "setup", "{:?}", rows[id]);
        assert!(
            rows[id]["error"].contains("keeper server ended"),
            "{:?}",
            rows[id]
        );
    }
    assert_no_survivors(&sb);
}
