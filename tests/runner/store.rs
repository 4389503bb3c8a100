//! The todo store under concurrent writers and odd input (issue 14): one store lock for
//! every read-modify-write, item text that reads back as typed, prerequisites that outlive
//! a resolve, and a batch file that disappears during its run.
//!
//! Interleavings are made exact, never timed: `RUNNER_PAUSE=<point>` stops a runner (SIGSTOP)
//! at a named step of its edit; the test acts, then continues it (SIGCONT). A second writer
//! is started and the test goes on once it says it waits for the store lock, or has exited.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use crate::harness::{Run, Sandbox, agent, by_id};

fn fake() -> String {
    agent("fake_agent.py")
}

/// `runner add --store S TEXT` in the sandbox.
fn add(sb: &Sandbox, text: &str) -> Run {
    sb.run(&["add", "--store", "S", text])
}

/// `runner resolve --store S --format plain EXTRA -- python3 fake_agent.py`, as arguments.
fn resolve_args(extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["resolve", "--store", "S", "--format", "plain"]
        .map(String::from)
        .to_vec();
    a.extend(extra.iter().map(|s| s.to_string()));
    a.extend(["--".into(), "python3".into(), fake()]);
    a
}

fn resolve(sb: &Sandbox, extra: &[&str]) -> Run {
    let a = resolve_args(extra);
    sb.run(&a.iter().map(String::as_str).collect::<Vec<_>>())
}

fn checkpoints(sb: &Sandbox) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(sb.join("S"))
        .expect("store")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("cp-"))
        .collect();
    v.sort();
    v
}

/// Whether process `pid` is stopped (state `T` in /proc).
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

/// A runner started in the background, with its stderr read line by line.
pub(crate) struct Started {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Started {
    fn spawn(mut cmd: Command) -> Started {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn runner");
        let (tx, lines) = mpsc::channel();
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Started { child, lines }
    }

    /// Continue a stopped runner.
    pub(crate) fn resume(&self) {
        let status = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Wait for the end; stderr holds every line, including those already seen.
    pub(crate) fn finish(mut self, seen: Vec<String>) -> Run {
        let mut stdout = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            let _ = out.read_to_string(&mut stdout);
        }
        let status = self.child.wait().expect("wait");
        let mut stderr = seen;
        stderr.extend(self.lines.iter());
        Run {
            code: status.code().unwrap_or(-1),
            stdout,
            stderr: stderr.join("\n"),
        }
    }
}

/// Start `cmd` with `RUNNER_PAUSE=point` and return once it stands still there.
///
/// Panics if it ends without reaching the point.
pub(crate) fn start_paused(mut cmd: Command, point: &str) -> Started {
    cmd.env("RUNNER_PAUSE", point);
    let mut s = Started::spawn(cmd);
    loop {
        if stopped(s.child.id()) {
            return s;
        }
        if let Some(status) = s.child.try_wait().expect("try_wait") {
            let r = s.finish(Vec::new());
            panic!("ended ({status}) before pausing at {point}: {r:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Start `cmd` and return once it says it waits for the store lock, or has closed stderr
/// (finished). Returns the runner and the stderr lines read so far.
pub(crate) fn start_until_waiting(cmd: Command) -> (Started, Vec<String>) {
    let s = Started::spawn(cmd);
    let mut seen = Vec::new();
    while let Ok(line) = s.lines.recv() {
        let waiting = line.contains("waiting for the store lock");
        seen.push(line);
        if waiting {
            break;
        }
    }
    (s, seen)
}

fn cmd(sb: &Sandbox, args: &[String]) -> Command {
    sb.cmd(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Lines of `text` that are open items (`- [ ] ...`) starting with `title`.
fn open_items<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("- [ ] {title}")))
        .collect()
}

#[test]
fn ten_adds_at_once_keep_every_item_and_checkpoint() {
    let sb = Sandbox::new();
    let children: Vec<(usize, Child)> = (1..=10)
        .map(|i| {
            let c = sb
                .cmd(&["add", "--store", "S", &format!("item {i}")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn");
            (i, c)
        })
        .collect();
    for (i, c) in children {
        let r: Run = c.wait_with_output().expect("wait").into();
        assert_eq!(r.code, 0, "add {i}: {r:?}");
        assert!(r.stdout.contains("Added item"), "{r:?}");
    }
    let inbox = sb.read("S/todo.md");
    let cps = checkpoints(&sb);
    assert_eq!(cps.len(), 10, "{cps:?}");
    for i in 1..=10 {
        let lines: Vec<&str> = inbox
            .lines()
            .filter(|l| l.starts_with(&format!("- [ ] item {i} @context:")))
            .collect();
        assert_eq!(lines.len(), 1, "item {i} in {inbox}");
    }
    for cp in &cps {
        assert_eq!(
            inbox.matches(&format!("@context:{cp}")).count(),
            1,
            "{cp} is pinned on exactly one item: {inbox}"
        );
    }
    let r = sb.run(&["list", "--store", "S"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Todo (10)"), "{r:?}");
}

/// Order one: `resolve` is between reading and writing the inbox when `add` comes.
#[test]
fn an_add_during_resolves_edit_is_kept() {
    let sb = Sandbox::new();
    add(&sb, "A MODE=success");
    add(&sb, "B MODE=success");
    let resolving = start_paused(
        cmd(&sb, &resolve_args(&["--yes", "--select", "1"])),
        "resolve-edit",
    );
    let (adding, seen) = start_until_waiting(sb.cmd(&["add", "--store", "S", "C new"]));
    resolving.resume();
    let r = resolving.finish(Vec::new());
    let a = adding.finish(seen);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(a.code, 0, "{a:?}");
    let inbox = sb.read("S/todo.md");
    assert_eq!(open_items(&inbox, "B MODE=success").len(), 1, "{inbox}");
    assert_eq!(
        open_items(&inbox, "C new").len(),
        1,
        "the new item is kept: {inbox}"
    );
    assert!(!inbox.contains("A MODE=success"), "A moved out: {inbox}");
    let batch = sb.read("S/todo-1.md");
    assert!(batch.contains("- [x] A MODE=success"), "{batch}");
    assert!(
        !batch.contains("C new") && !batch.contains("B MODE"),
        "{batch}"
    );
}

/// Order two: `add` is between reading and writing the inbox when `resolve` comes.
#[test]
fn a_resolve_during_adds_edit_does_not_come_back_to_the_inbox() {
    let sb = Sandbox::new();
    add(&sb, "A MODE=success");
    add(&sb, "B MODE=success");
    let adding = start_paused(sb.cmd(&["add", "--store", "S", "C new"]), "add-edit");
    let (resolving, seen) =
        start_until_waiting(cmd(&sb, &resolve_args(&["--yes", "--select", "1"])));
    adding.resume();
    let a = adding.finish(Vec::new());
    let r = resolving.finish(seen);
    assert_eq!(a.code, 0, "{a:?}");
    assert_eq!(r.code, 0, "{r:?}");
    let inbox = sb.read("S/todo.md");
    assert!(
        !inbox.contains("A MODE=success"),
        "the item the run completed is not back in the inbox: {inbox}"
    );
    assert_eq!(open_items(&inbox, "B MODE=success").len(), 1, "{inbox}");
    assert_eq!(open_items(&inbox, "C new").len(), 1, "{inbox}");
    let batch = sb.read("S/todo-1.md");
    assert!(batch.contains("- [x] A MODE=success"), "{batch}");
}

#[test]
fn a_writer_that_waits_too_long_names_the_holder_and_changes_nothing() {
    let sb = Sandbox::new();
    add(&sb, "A");
    let holder = start_paused(sb.cmd(&["add", "--store", "S", "B"]), "add-edit");
    let before = sb.tree();
    let out = sb
        .cmd(&["add", "--store", "S", "C"])
        .env("RUNNER_STORE_LOCK_WAIT", "300ms")
        .output()
        .expect("run");
    let r: Run = out.into();
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains(&format!("pid {}", holder.child.id())),
        "names the holder: {r:?}"
    );
    assert_eq!(sb.tree(), before, "the refused add wrote nothing");
    holder.resume();
    let h = holder.finish(Vec::new());
    assert_eq!(h.code, 0, "{h:?}");
    let inbox = sb.read("S/todo.md");
    assert!(inbox.contains("- [ ] A @context:") && inbox.contains("- [ ] B @context:"));
    assert!(!inbox.contains("- [ ] C"), "{inbox}");
    assert_eq!(checkpoints(&sb).len(), 2);
}

#[test]
fn resolve_refuses_when_a_chosen_item_changed_before_it_was_moved() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write(
        "S/todo.md",
        "# TODO\n\n## Todo\n- [ ] A MODE=success\n- [ ] B MODE=success\n",
    );
    let resolving = start_paused(
        cmd(&sb, &resolve_args(&["--yes", "--select", "1"])),
        "resolve-chosen",
    );
    // A person rewrites item 1 while resolve holds the choice but not yet the lock.
    let edited = "# TODO\n\n## Todo\n- [ ] A, but different MODE=success\n- [ ] B MODE=success\n";
    sb.write("S/todo.md", edited);
    resolving.resume();
    let r = resolving.finish(Vec::new());
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("run `runner resolve` again"), "{r:?}");
    assert_eq!(sb.read("S/todo.md"), edited, "the person's edit stays");
    assert!(!sb.join("S/todo-1.md").exists(), "nothing was moved");
}

/// Issue 14, item 3: text the user typed reads back as that text.
#[test]
fn item_text_that_looks_like_a_token_reads_back_as_typed() {
    let sb = Sandbox::new();
    let typed = "Document the @context:cp-x.md syntax";
    let r = add(&sb, typed);
    assert_eq!(r.code, 0, "{r:?}");
    let r = sb.run(&["list", "--store", "S"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(&format!("1. [ ] {typed}  @context:cp-")),
        "{r:?}"
    );
    assert!(!r.stderr.contains("warning"), "{r:?}");
    let r = resolve(&sb, &["--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    let rows = by_id(&sb.join("S/todo-1.workers-output.csv"), "item");
    assert_eq!(rows["1"]["title"], typed);
    assert_eq!(rows["1"]["status"], "completed");
    // A prerequisite that names no item is refused before anything is written.
    let before = sb.tree();
    let r = add(&sb, "Then this @after:9");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("@after:9 names no item"), "{r:?}");
    assert_eq!(sb.tree(), before);
}

/// Issue 14, item 3: one bad line does not take the rest of the inbox with it.
#[test]
fn one_bad_item_is_named_while_the_others_are_listed_and_handed_out() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write(
        "S/todo.md",
        "# TODO\n\n## Todo\n- [ ] good MODE=success\n- [ ] bad @after:x MODE=success\n- [ ] also good MODE=success\n",
    );
    let r = sb.run(&["list", "--store", "S"]);
    assert_eq!(r.code, 0, "{r:?}");
    for title in ["good MODE", "bad MODE", "also good MODE"] {
        assert!(r.stdout.contains(title), "{title}: {r:?}");
    }
    assert!(
        r.stderr.contains("todo.md:5:") && r.stderr.contains("`x`"),
        "names the bad line: {r:?}"
    );
    let before = sb.tree();
    let r = resolve(&sb, &["--yes", "--select", "2"]);
    assert_eq!(r.code, 2, "the bad item itself is refused: {r:?}");
    assert!(r.stderr.contains("line 5"), "{r:?}");
    assert_eq!(sb.tree(), before);
    let r = resolve(&sb, &["--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    let batch = sb.read("S/todo-1.md");
    assert!(
        batch.contains("- [x] good MODE=success") && batch.contains("- [x] also good MODE=success"),
        "{batch}"
    );
    assert!(!batch.contains("bad"), "{batch}");
    let inbox = sb.read("S/todo.md");
    assert!(inbox.contains("- [ ] bad @after:x MODE=success"), "{inbox}");
    assert!(!inbox.contains("good"), "{inbox}");
}

/// Issue 14, item 4: the dependency survives its prerequisite's move and failure.
#[test]
fn a_dependent_waits_for_its_prerequisite_in_the_batch_until_that_completes() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write(
        "S/todo.md",
        "# TODO\n\n## Todo\n- [ ] A MODE=failed\n- [ ] B MODE=success @after:1\n",
    );
    let r = resolve(&sb, &["--yes", "--select", "1"]);
    assert_eq!(r.code, 1, "A fails: {r:?}");
    let inbox = sb.read("S/todo.md");
    assert!(
        inbox.contains("- [ ] B MODE=success @after:todo-1#1\n"),
        "{inbox}"
    );
    let r = sb.run(&["list", "--store", "S"]);
    assert!(
        r.stdout.contains("B MODE=success  @after:todo-1#1"),
        "{r:?}"
    );
    // B is not handed out while A has not completed.
    let before = sb.tree();
    let r = resolve(&sb, &["--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Nothing to resolve"), "{r:?}");
    let r = resolve(&sb, &["--yes", "--select", "1"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("waits for todo-1#1"), "{r:?}");
    assert_eq!(sb.tree(), before);
    // A is fixed and completes; now B goes.
    let batch = sb.read("S/todo-1.md");
    sb.write("S/todo-1.md", batch.replace("MODE=failed", "MODE=success"));
    let f = fake();
    let r = sb.run(&["run", "S/todo-1.md", "--", "python3", &f]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = resolve(&sb, &["--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    let batch = sb.read("S/todo-2.md");
    assert!(batch.contains("- [x] B MODE=success\n"), "{batch}");
}

/// Issue 14, item 5: the journal keeps the truth when the batch file goes away mid-run.
#[test]
fn a_batch_file_moved_during_its_run_still_gets_its_table_and_exit_1() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("S")).expect("store");
    sb.write(
        "S/todo-1.md",
        "---\nstatus: pending\n---\n## Todo\n- [ ] one MODE=success\n",
    );
    // The agent waits for its `[~]` mark to land, moves the batch away, and completes.
    sb.write(
        "mover.py",
        "import json, os, sys, time\nsys.stdin.read()\nwhile '- [~] one' not in open('S/todo-1.md').read():\n    time.sleep(0.01)\nos.rename('S/todo-1.md', 'S/moved.md')\njson.dump({'status': 'completed', 'summary': 'moved it'}, open(os.environ['RUNNER_REPORT'], 'w'))\n",
    );
    let r = sb.run(&[
        "run",
        "S/todo-1.md",
        "--format",
        "plain",
        "--",
        "python3",
        "mover.py",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("warning") && r.stderr.contains("todo-1.md"),
        "{r:?}"
    );
    let rows = by_id(&sb.join("S/todo-1.workers-output.csv"), "item");
    assert_eq!(rows["1"]["status"], "completed");
    assert_eq!(rows["1"]["title"], "one MODE=success");
    assert!(!sb.join("S/todo-1.md").exists(), "no batch file is made up");
    assert!(sb.read("S/moved.md").contains("- [~] one"));
    let journal = sb.read("S/teams/todo-resolve-1/journal.jsonl");
    assert!(
        journal.contains("item_finished"),
        "the workspace is kept: {journal}"
    );
}
