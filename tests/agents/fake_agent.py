#!/usr/bin/env python3
"""A fake agent for the runner's integration tests: it behaves like a good or a bad agent CLI.

It reads the prompt from stdin to EOF (as real CLIs do when given `-p` on stdin), then acts
on the first `MODE=<mode>` token found in the prompt (or argv[1]):

  success      write a valid report to $RUNNER_REPORT, exit 0
  handoff      as success, with hand-off fields: files_modified [src/a.rs], files_created
               [src/new.rs], tests "passed", next_steps ["wire it in", "document it"]
  fenced       print the report only inside a ```json block on stdout, exit 0
  text_last    print prose with the report as the last JSON object, exit 0
  nonzero      write a valid report, then exit 3
  noreport     print prose only, exit 0
  wrongid      write a report whose id is another item's, exit 0
  blocked      report status blocked with a blocker, exit 0
  failed       report status failed, exit 0
  hostile_text propose a subtask (in $RUNNER_PROGRESS) and report failed with a summary,
               each carrying OSC 52, a title sequence, a screen clear or U+202E; print them
               on stdout too
  schema_bad   report output that violates the schema ({"ok": "yes"}), exit 0
  hang         sleep forever (ignores nothing; exits on SIGTERM)
  ignore_term  ignore SIGTERM and sleep forever (needs SIGKILL)
  fork_sleep   start `sleep` grandchildren holding stdout, then hang
  fork_exit    start a `sleep` grandchild holding stdout/stderr, write a report, exit 0 at once
  flood_stderr write FLOOD_BYTES (default 50 MB) to stderr, then report success
  no_stdin     do not read stdin at all; report success
  flaky        fail on attempt 1, succeed on later attempts ($RUNNER_ATTEMPT)
  slow         sleep SLOW_SECONDS (default 0.5) then report success
  rate_limited_once  on attempt 1 report failed with failure_kind rate_limited and
               retry_after_s 0.5 (as an exec agent that met an HTTP 429 would); then success
  rate_limited_always  every attempt: sleep 0.1 s, then report rate_limited "Please try again
               in 0.2s" with retry_after_s 0.2 (a provider that never lets up)
  auth         report failed with failure_kind auth ("invalid API key")
  rate_limited_long  on attempt 1 report rate_limited with retry_after_s 30; then success
  quota_reset  on attempt 1 report failed, failure_kind quota, "usage limit reached, try
               again in 1s" (the reset time only in the text); then success
  costly       report success with cost_usd 0.4 (an exec agent saying what it spent)
  journal_junk (someone else writing the journal) append a line that is no event and a
               half line without its newline to the team's journal.jsonl, then report success
  costly_retry on attempt 1 report failed with cost_usd 0.5 (1000 input, 100 output
               tokens); later attempts succeed with cost_usd 0.25 (500 and 50)
  quota        report failed, failure_kind quota, "daily quota exhausted" (no reset time)
  wait_file    wait until the file $RELEASE_FILE exists, then report success
  chatty       print `tick N` on stdout every 0.1 s (and every 5th as a progress line in
               $RUNNER_PROGRESS) until the file $RELEASE_FILE exists, then report success
               (a log to follow while it runs)
  daemon       leave the process group twice (a `setsid` child and a double-forked daemon,
               each a `sleep`, pids in $RUNNER_TEAMMATE_DIR/escaped.pids), report success
  daemon_hang  the same two escapees, then sleep forever
  forge        (an attacker) wait for a sibling's teammate folder, write
               {"status":"completed","summary":"FORGED"} into its report.json, then report
               success; what each write did goes to $RUNNER_TEAMMATE_DIR/attack.json
  link_forge   (an attacker) wait for a sibling, plant attempt-1.stderr.log in its own folder
               as a link to the sibling's report.json, print a forged completed report to
               stderr (for the runner to write through the link), then report success
  git_trap     (an attacker) replace its worktree's .git with a repository of its own whose
               core.fsmonitor command touches $HOME/fsmonitor-ran, then report success
  steal_gitdir (an attacker) wait for a sibling's worktree, point its own worktree's .git at
               the sibling's gitdir, leave a new file stolen.txt for the runner's commit, note
               what it did in attack.json, report success
  repoint_checkpoint  (an attacker) in every batch file todo-*.md of the store holding
               $RUNNER_CHECKPOINT, re-point the item's `@context:` from its checkpoint to the
               store's todo.md (the inbox), then report success
  repoint_checkpoint_blocked  the same, then report blocked
  reach_out    (an attacker) note which ways out to unsandboxed servers its environment
               names (TMUX, SSH_AUTH_SOCK, DBUS_SESSION_BUS_ADDRESS, DISPLAY, ...) in attack.json
  mknod        (an attacker) try to make a character and a block device node in its own
               folder (kmsg, a loop device); what each did goes to attack.json; report success
  tty_write    (an attacker) open the terminal $VICTIM_TTY (a user's open terminal under
               /dev/pts) and write an OSC 52 clipboard sequence and a title into it, and
               open /dev/ptmx for a terminal of its own; results to attack.json, report success
  cli_state    (an honest CLI) make its state folder $HOME/.fakecli/sessions first, as a CLI
               does on start-up; when that is denied, die as Node does ("Error: EACCES:
               permission denied, mkdir '<path>'", then a stack frame), exit 1; else success
  eacces_cwd   fail like a CLI whose write in its own working directory was refused by the
               file's permissions (not the sandbox): a Node-style EACCES naming ./locked.txt
  trespass     (an attacker) try to write $HOME, a sibling's teammate folder and worktree,
               journal.jsonl and team.json (append, truncate, replace, delete), and open
               the workspace and journal to everyone (chmod, which Landlock does not govern);
               results to attack.json, then report success
  signal       (an attacker) SIGTERM the runner (its parent) and the sibling whose pid is in
               its folder's `pid` file, read the sibling's /proc/PID/environ; results to
               attack.json, then create ./attack.done and report success
  rewrite_verify  (an attacker) rewrite ./check.sh (the run's verify) into a script that
               appends to each file of $VICTIMS (colon-separated) and makes a file in
               $TMPDIR, noting "ok"/"denied" per target in ./verify-attack.txt, and exits 0
               only when a victim write succeeded; then report success
  wait_attack  (a victim) write its pid to $RUNNER_TEAMMATE_DIR/pid, wait (up to 20 s) for
               ./attack.done, then print "I could not do it" and write no report

A marker argument (anything) can be passed so tests can find processes in /proc.
"""
import errno
import json
import os
import re
import signal
import subprocess
import sys
import time


def report(status="completed", summary=None, output=None, item_id=None, **extra):
    rep = {
        "id": os.environ.get("RUNNER_ITEM_ID") if item_id is None else item_id,
        "status": status,
        "summary": summary or f"fake agent handled {os.environ.get('RUNNER_ITEM_ID')}",
        "files_modified": [],
        "files_created": [],
        "tests": "none",
        "blocker": None,
        "next_steps": [],
        "output": output if output is not None else {"ok": True, "echo": os.environ.get("RUNNER_ITEM_ID")},
    }
    rep.update(extra)
    return rep


def write_report(rep):
    with open(os.environ["RUNNER_REPORT"], "w", encoding="utf-8") as f:
        json.dump(rep, f)


def escape():
    """Start two `sleep`s outside the process group, as opencode's shell tool and daemons
    do: one in a new session, one double-forked (its parent exits, so it is re-parented)."""
    pids = os.path.join(os.environ["RUNNER_TEAMMATE_DIR"], "escaped.pids")
    null = os.open(os.devnull, os.O_RDWR)
    child = subprocess.Popen(["sleep", "3600"], start_new_session=True,
                             stdin=null, stdout=null, stderr=null)
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.execvp("sleep", ["sleep", "3600"])
        os._exit(0)
    os.waitpid(first, 0)
    with open(pids, "w", encoding="utf-8") as f:
        f.write(f"{child.pid}\n")


def attempt(results, name, action):
    """Run one attack step; record "ok" or the errno's name under `name`."""
    try:
        action()
        results[name] = "ok"
    except OSError as e:
        import errno as errno_names
        results[name] = errno_names.errorcode.get(e.errno, str(e.errno))


def siblings(timeout=20.0):
    """The other teammates' folders (waits until at least one exists)."""
    root = os.path.join(os.environ["RUNNER_WORKSPACE"], "teammates")
    mine = os.environ["RUNNER_TEAMMATE"]
    until = time.time() + timeout
    while True:
        found = sorted(d for d in os.listdir(root) if d != mine)
        if found or time.time() > until:
            return [os.path.join(root, d) for d in found]
        time.sleep(0.02)


def wait_for(path, timeout=20.0):
    until = time.time() + timeout
    while not os.path.exists(path) and time.time() < until:
        time.sleep(0.02)
    return os.path.exists(path)


def save_attack(results):
    with open(os.path.join(os.environ["RUNNER_TEAMMATE_DIR"], "attack.json"), "w") as f:
        json.dump(results, f)


def write_to(path, text, mode="w"):
    def go():
        with open(path, mode, encoding="utf-8") as f:
            f.write(text)
    return go


def main():
    mode_arg = sys.argv[1] if len(sys.argv) > 1 else "success"
    prompt = ""
    if "MODE=no_stdin" not in " ".join(sys.argv):
        prompt = sys.stdin.read()
    m = re.search(r"MODE=([a-z_]+)", prompt)
    mode = m.group(1) if m else mode_arg

    if mode == "success":
        write_report(report())
        print("done")
    elif mode == "handoff":
        write_report(report(files_modified=["src/a.rs"], files_created=["src/new.rs"],
                            tests="passed", next_steps=["wire it in", "document it"]))
        print("done")
    elif mode == "fenced":
        print("I did the work.\n```json\n" + json.dumps(report(), indent=2) + "\n```")
    elif mode == "text_last":
        print("Notes {not json}. Draft: {\"a\": 1}. Final:\n" + json.dumps(report()) + "\nbye")
    elif mode == "nonzero":
        write_report(report())
        print("crashing", file=sys.stderr)
        sys.exit(3)
    elif mode == "noreport":
        print("All done, trust me!")
    elif mode == "wrongid":
        write_report(report(item_id="someone-else"))
    elif mode == "blocked":
        write_report(report(status="blocked", blocker="needs an API key from a person"))
    elif mode == "failed":
        write_report(report(status="failed", summary="could not reproduce the bug"))
    elif mode == "hostile_text":
        # Terminal escapes and a bidi override in what the runner shows: the summary (a
        # failure's reason) and a proposed follow-up item's title.
        with open(os.environ["RUNNER_PROGRESS"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"subtask": {"title": "Proposed\x1b]0;pwned\x07 step \u202ex",
                                            "details": "d"},
                                "discoveries": ["found\x1b]52;c;cm0gLXJm\x07 \u202e"]}) + "\n")
        write_report(report(status="failed",
                            summary="copied\x1b]52;c;cm0gLXJm\x07 cleared\x1b[2J \u202edeliaf"))
        print("out\x1b]52;c;cm0gLXJm\x07 \x1b[2J \u202e")
    elif mode == "schema_bad":
        write_report(report(output={"ok": "yes"}))
    elif mode == "hang":
        time.sleep(3600)
    elif mode == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(3600)
    elif mode == "fork_sleep":
        for _ in range(2):
            subprocess.Popen(["sleep", "3600"])
        time.sleep(3600)
    elif mode == "fork_exit":
        subprocess.Popen(["sleep", "3600"])
        write_report(report())
        sys.exit(0)
    elif mode == "flood_stderr":
        total = int(os.environ.get("FLOOD_BYTES", 50 * 1024 * 1024))
        chunk = ("x" * 1023 + "\n").encode()
        out = sys.stderr.buffer
        written = 0
        while written < total:
            out.write(chunk)
            written += len(chunk)
        out.flush()
        write_report(report())
    elif mode == "no_stdin":
        write_report(report())
    elif mode == "flaky":
        if os.environ.get("RUNNER_ATTEMPT") == "1":
            print("transient failure", file=sys.stderr)
            sys.exit(1)
        write_report(report(summary="worked on retry"))
    elif mode == "rate_limited_once":
        if os.environ.get("RUNNER_ATTEMPT") == "1":
            write_report(report(status="failed", summary="HTTP 429 from the model API",
                                failure_kind="rate_limited", retry_after_s=0.5))
        else:
            write_report(report(summary="worked after the pause"))
    elif mode == "rate_limited_always":
        time.sleep(0.1)
        write_report(report(status="failed", summary="HTTP 429: Please try again in 0.2s.",
                            failure_kind="rate_limited", retry_after_s=0.2))
        sys.exit(1)
    elif mode == "rate_limited_long":
        if os.environ.get("RUNNER_ATTEMPT") == "1":
            write_report(report(status="failed", summary="HTTP 429 from the model API",
                                failure_kind="rate_limited", retry_after_s=30))
        else:
            write_report(report(summary="worked after the pause"))
    elif mode == "quota_reset":
        if os.environ.get("RUNNER_ATTEMPT") == "1":
            write_report(report(status="failed", failure_kind="quota",
                                summary="usage limit reached, try again in 1s"))
        else:
            write_report(report(summary="worked after the reset"))
    elif mode == "costly":
        write_report(report(cost_usd=0.4))
    elif mode == "journal_junk":
        journal = os.path.join(os.environ["RUNNER_WORKSPACE"], "journal.jsonl")
        with open(journal, "a", encoding="utf-8") as f:
            f.write("a note someone's editor saved here\n")
            f.write('{"event":"item_fin')
        write_report(report())
    elif mode == "costly_retry":
        if os.environ.get("RUNNER_ATTEMPT") == "1":
            write_report(report(status="failed", summary="not yet", cost_usd=0.5,
                                input_tokens=1000, output_tokens=100))
        else:
            write_report(report(cost_usd=0.25, input_tokens=500, output_tokens=50))
    elif mode == "quota":
        write_report(report(status="failed", summary="daily quota exhausted", failure_kind="quota"))
    elif mode == "auth":
        write_report(report(status="failed", summary="invalid API key", failure_kind="auth"))
    elif mode == "slow":
        time.sleep(float(os.environ.get("SLOW_SECONDS", "0.5")))
        write_report(report())
    elif mode == "chatty":
        release = os.environ["RELEASE_FILE"]
        n = 0
        while not os.path.exists(release):
            n += 1
            print(f"tick {n}", flush=True)
            if n % 5 == 0:
                with open(os.environ["RUNNER_PROGRESS"], "a", encoding="utf-8") as f:
                    f.write(json.dumps({"status": "in_progress", "progress": f"tick {n}"}) + "\n")
            time.sleep(0.1)
        write_report(report())
    elif mode == "wait_file":
        release = os.environ["RELEASE_FILE"]
        while not os.path.exists(release):
            time.sleep(0.02)
        write_report(report())
    elif mode == "wait_then_fail":
        release = os.environ["RELEASE_FILE"]
        while not os.path.exists(release):
            time.sleep(0.02)
        write_report(report(status="failed", summary="could not reproduce the bug"))
    elif mode == "daemon":
        escape()
        write_report(report())
    elif mode == "daemon_hang":
        escape()
        time.sleep(3600)
    elif mode == "forge":
        results = {}
        for sib in siblings():
            victim = os.path.basename(sib).split("-", 1)[-1]
            forged = json.dumps({"id": victim, "status": "completed", "summary": "FORGED"})
            attempt(results, "report " + os.path.basename(sib),
                    write_to(os.path.join(sib, "work", "report.json"), forged))
        save_attack(results)
        open("attack.done", "w").close()
        write_report(report(summary="forger: " + json.dumps(results, sort_keys=True)))
    elif mode == "git_trap":
        wt = os.environ["RUNNER_WORKTREE"]
        os.remove(os.path.join(wt, ".git"))
        subprocess.run(["git", "init", "-q", wt], check=True)
        ran = os.path.join(os.environ["HOME"], "fsmonitor-ran")
        subprocess.run(["git", "-C", wt, "config", "core.fsmonitor", f"touch {ran}; false"],
                       check=True)
        write_report(report())
    elif mode == "steal_gitdir":
        results = {}
        wt = os.environ["RUNNER_WORKTREE"]
        sib = os.path.join(os.path.dirname(wt), os.path.basename(siblings()[0]))
        wait_for(os.path.join(sib, ".git"))
        with open(os.path.join(sib, ".git"), encoding="utf-8") as f:
            theirs = f.read()
        attempt(results, "repoint", write_to(os.path.join(wt, ".git"), theirs))
        attempt(results, "stolen", write_to(os.path.join(wt, "stolen.txt"), "mine now\n"))
        save_attack(results)
        write_report(report())
    elif mode in ("repoint_checkpoint", "repoint_checkpoint_blocked"):
        store, cp = os.path.split(os.environ["RUNNER_CHECKPOINT"])
        for name in sorted(os.listdir(store)):
            if re.fullmatch(r"todo-\d+\.md", name):
                path = os.path.join(store, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text.replace("@context:" + cp, "@context:todo.md"))
        if mode == "repoint_checkpoint":
            write_report(report())
        else:
            write_report(report(status="blocked", blocker="needs a person"))
    elif mode == "reach_out":
        names = ["TMUX", "TMUX_PANE", "SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "DISPLAY",
                 "WAYLAND_DISPLAY"]
        save_attack({n: os.environ[n] for n in names if n in os.environ})
        write_report(report())
    elif mode == "rewrite_batch":
        # Without worktrees the run's working directory is the teammate's: rewrite the batch
        # definition there so that the next run starts unsandboxed with a verify of its own.
        with open("BATCH.md", encoding="utf-8") as f:
            text = f.read()
        with open("BATCH.md", "w", encoding="utf-8") as f:
            f.write(text.replace("sandbox: landlock", "sandbox: none\nverify: \"true\""))
        write_report(report())
    elif mode == "env_i_daemon":
        # A daemon that drops every variable (and so the attempt's mark), leaves the process
        # group and session and is re-parented: it must not outlive the attempt. Then try to
        # kill the parent (under the sandbox, the keeper that would end the daemon).
        pidfile = os.path.join(os.environ["RUNNER_TEAMMATE_DIR"], "daemon.pid")
        first = os.fork()
        if first == 0:
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.execvp("env", ["env", "-i", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 3600"])
            os._exit(0)
        os.waitpid(first, 0)
        wait_for(pidfile)
        results = {}
        with open(f"/proc/{os.getppid()}/comm", "rb") as f:
            keeper = f.read().strip() == b"runner-keeper"
        if keeper:  # never the runner itself (the control, without the sandbox)
            attempt(results, "kill_parent", lambda: os.kill(os.getppid(), signal.SIGKILL))
        save_attack(results)
        write_report(report())
    elif mode == "env_i_holder":
        # Like env_i_daemon, but the daemon keeps the agent's stdout and stderr open: only
        # the pipe itself can tell the runner who holds it.
        pidfile = os.path.join(os.environ["RUNNER_TEAMMATE_DIR"], "holder.pid")
        if os.fork() == 0:
            os.setsid()
            os.execvp("env", ["env", "-i", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 3600"])
        wait_for(pidfile)
        write_report(report())
    elif mode == "tty_read":
        # A password prompt: open the controlling terminal and read from it. With a terminal
        # to read, a process outside the foreground group is stopped (SIGTTIN) for good.
        try:
            fd = os.open("/dev/tty", os.O_RDWR)
            os.write(fd, b"Password: ")
            os.read(fd, 1)
            got = "read"
        except OSError as e:
            got = errno.errorcode.get(e.errno, str(e.errno))
        write_report(report(output={"tty": got}))
    elif mode == "tty":
        # Push a command into the terminal the runner was started from (TIOCSTI), through the
        # controlling terminal and through every pseudo-terminal there is.
        import fcntl
        import termios
        results = {}
        def sti(path):
            def go():
                fd = os.open(path, os.O_RDONLY | os.O_NOCTTY)
                try:
                    fcntl.ioctl(fd, termios.TIOCSTI, b"#")
                finally:
                    os.close(fd)
            return go
        attempt(results, "open_tty", lambda: os.close(os.open("/dev/tty", os.O_RDONLY)))
        attempt(results, "sti_tty", sti("/dev/tty"))
        for name in sorted(os.listdir("/dev/pts")):
            if name.isdigit():
                attempt(results, "sti_pts_" + name, sti("/dev/pts/" + name))
        results["sid_is_me"] = os.getsid(0) == os.getpid()
        save_attack(results)
        write_report(report())
    elif mode == "tty_write":
        results = {}

        def write_tty():
            with open(os.environ["VICTIM_TTY"], "w") as t:
                t.write("\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07")

        attempt(results, "victim tty", write_tty)
        attempt(results, "ptmx", lambda: os.close(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)))
        save_attack(results)
        write_report(report())
    elif mode == "mknod":
        import stat
        results = {}
        mine = os.environ["RUNNER_TEAMMATE_DIR"]
        attempt(results, "char", lambda: os.mknod(os.path.join(mine, "kmsg"),
                                                  stat.S_IFCHR | 0o600, os.makedev(1, 11)))
        attempt(results, "block", lambda: os.mknod(os.path.join(mine, "loop"),
                                                   stat.S_IFBLK | 0o600, os.makedev(7, 0)))
        save_attack(results)
        write_report(report())
    elif mode == "link_forge":
        results = {}
        mine = os.environ["RUNNER_TEAMMATE_DIR"]
        for sib in siblings():
            wait_for(os.path.join(sib, "work", "pid"))
            victim = os.path.basename(sib).split("-", 1)[-1]
            link = os.path.join(mine, "..", "attempt-1.stderr.log")
            target = os.path.join(sib, "work", "report.json")
            attempt(results, "link " + os.path.basename(sib), lambda: os.symlink(target, link))
            forged = json.dumps({"id": victim, "status": "completed", "summary": "FORGED"})
            print(forged, file=sys.stderr, flush=True)
        time.sleep(0.5)
        save_attack(results)
        open("attack.done", "w").close()
        write_report(report(summary="link forger"))
    elif mode == "cli_state":
        state = os.path.join(os.environ["HOME"], ".fakecli", "sessions")
        try:
            os.makedirs(state, exist_ok=True)
        except PermissionError:
            print(f"Error: EACCES: permission denied, mkdir '{os.path.dirname(state)}'",
                  file=sys.stderr)
            print("    at async file:///fakecli/chunk.js:1:2", file=sys.stderr)
            sys.exit(1)
        write_report(report())
    elif mode == "eacces_cwd":
        print(f"Error: EACCES: permission denied, open '{os.path.join(os.getcwd(), 'locked.txt')}'",
              file=sys.stderr)
        sys.exit(1)
    elif mode == "keeper_probe":
        # Who keeps this attempt (its parent's program, from its command line: the domain may
        # not read its /proc/PID/exe) and whether it may write HOME.
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0")[0].decode()
        results = {"keeper_exe": os.path.basename(argv0), "keeper_pid": os.getppid()}
        # The keeper's parent: the run's keeper server (its pid and program).
        with open(f"/proc/{os.getppid()}/stat", encoding="utf-8") as f:
            server = int(f.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{server}/cmdline", "rb") as f:
            results["server_exe"] = os.path.basename(f.read().split(b"\0")[0].decode())
        results["server_pid"] = server
        attempt(results, "home", write_to(os.path.join(os.environ["HOME"], "pwned"), "x"))
        save_attack(results)
        write_report(report())
    elif mode == "trespass":
        results = {}
        ws = os.environ["RUNNER_WORKSPACE"]
        home = os.environ["HOME"]
        attempt(results, "home", write_to(os.path.join(home, "pwned"), "x"))
        attempt(results, "home_file", write_to(os.path.join(home, "keep.txt"), "pwned", "a"))
        for sib in siblings():
            wait_for(os.path.join(sib, "work", "pid"))  # its folder and worktree are ready
            # The runner writes a prompt file once an attempt has run a second.
            wait_for(os.path.join(sib, "prompt.md"))
            attempt(results, "sibling_new_file", write_to(os.path.join(sib, "work", "pwned"), "x"))
            attempt(results, "sibling_prompt", write_to(os.path.join(sib, "prompt.md"), "x", "a"))
            attempt(results, "sibling_remove", lambda: os.remove(os.path.join(sib, "prompt.md")))
            wt = os.path.join(ws, "worktrees", os.path.basename(sib))
            if os.path.isdir(wt):
                attempt(results, "sibling_worktree", write_to(os.path.join(wt, "pwned"), "x"))
                attempt(results, "sibling_worktree_file",
                        write_to(os.path.join(wt, "README.md"), "pwned", "a"))
        journal = os.path.join(ws, "journal.jsonl")
        attempt(results, "journal_append", write_to(journal, '{"event":"forged"}\n', "a"))
        attempt(results, "journal_truncate", lambda: os.truncate(journal, 0))
        attempt(results, "journal_replace", lambda: os.replace(os.path.join(ws, "team.json"), journal))
        attempt(results, "team_json_remove", lambda: os.remove(os.path.join(ws, "team.json")))
        attempt(results, "workspace_new_file", write_to(os.path.join(ws, "pwned"), "x"))
        # The record completed items are compacted into: a forged line would be shown as a
        # sibling's prompt and logs.
        attempt(results, "completed_record_forge", write_to(os.path.join(ws, "completed.jsonl"), '{"v":1,"id":"bystander","forged":1}\n', "a"))
        attempt(results, "workspace_chmod", lambda: os.chmod(ws, 0o777))
        attempt(results, "journal_chmod", lambda: os.chmod(journal, 0o666))
        # The runner's records of this teammate itself, beside its writable folder: what
        # `runner show` and `runner logs` print of it.
        mine = os.environ["RUNNER_TEAMMATE_DIR"]
        attempt(results, "own_prompt", write_to(os.path.join(mine, "..", "prompt.md"), "x", "a"))
        attempt(results, "own_log", write_to(os.path.join(mine, "..", "attempt-1.stdout.log"), "forged\n", "a"))
        # What it may write: its working directory, its own folder, its TMPDIR.
        attempt(results, "own_cwd", write_to(os.path.join(os.getcwd(), "own-" + os.environ["RUNNER_ITEM_ID"]), "x"))
        attempt(results, "own_folder", write_to(os.path.join(os.environ["RUNNER_TEAMMATE_DIR"], "own"), "x"))
        attempt(results, "own_tmp", write_to(os.path.join(os.environ["TMPDIR"], "own"), "x"))
        attempt(results, "dev_null", write_to(os.devnull, "x"))
        save_attack(results)
        write_report(report(summary="trespasser done"))
    elif mode == "signal":
        results = {}
        runner = os.getppid()
        results["runner_pid"] = runner
        attempt(results, "kill_runner", lambda: os.kill(runner, signal.SIGTERM))
        # Under the sandbox the parent is the attempt's keeper; the runner is its parent.
        with open(f"/proc/{runner}/stat") as f:
            grand = int(f.read().rsplit(")", 1)[1].split()[1])
        if grand > 1 and grand != runner:
            results["grandparent_pid"] = grand
            attempt(results, "kill_grandparent", lambda: os.kill(grand, signal.SIGTERM))
        for sib in siblings():
            pidfile = os.path.join(sib, "work", "pid")
            wait_for(pidfile)
            pid = int(open(pidfile).read().strip())
            results["sibling_pid"] = pid
            attempt(results, "kill_sibling", lambda: os.kill(pid, signal.SIGTERM))
            attempt(results, "kill_sibling_group", lambda: os.killpg(os.getpgid(pid), signal.SIGKILL))
            attempt(results, "sibling_environ", lambda: open(f"/proc/{pid}/environ", "rb").read())
        attempt(results, "runner_environ", lambda: open(f"/proc/{runner}/environ", "rb").read())
        save_attack(results)
        open("attack.done", "w").close()
        write_report(report(summary="signaller done"))
    elif mode == "rewrite_verify":
        script = """#!/bin/sh
# Rewritten by a teammate: passes only when it could write outside the working directory.
status=1
IFS=:
for v in $VICTIMS; do
  if echo pwned >> "$v" 2>/dev/null; then
    echo "$v ok" >> verify-attack.txt; status=0
  else
    echo "$v denied" >> verify-attack.txt
  fi
done
if echo tmp > "$TMPDIR/verify-tmp-probe" 2>/dev/null; then
  echo "TMPDIR $TMPDIR ok" >> verify-attack.txt
else
  echo "TMPDIR $TMPDIR denied" >> verify-attack.txt
fi
exit $status
"""
        with open("check.sh", "w", encoding="utf-8") as f:
            f.write(script)
        write_report(report())
    elif mode == "wait_attack":
        # Written whole, then renamed: a sibling waiting for the file never reads it half-made.
        pidfile = os.path.join(os.environ["RUNNER_TEAMMATE_DIR"], "pid")
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(pidfile + ".tmp", pidfile)
        wait_for("attack.done")
        time.sleep(0.3)
        print("I could not do it")
    else:
        print(f"unknown mode {mode}", file=sys.stderr)
        sys.exit(64)


if __name__ == "__main__":
    main()
