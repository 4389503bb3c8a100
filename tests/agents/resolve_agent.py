#!/usr/bin/env python3
"""A fake coding agent for the conflict tests. An item's teammate edits files as
edit_agent.py does (`EDIT <path>=<text>` in the prompt). A resolver (its teammate,
$RUNNER_TEAMMATE, ends with `.resolve`) works on the merge in progress in its working
directory as $RESOLVE says:
  union    keep both sides of every conflict: the marker lines are dropped
  break    union, then write broken.txt too (what the tests' checks reject)
  markers  leave the files as they are, markers and all
  hang     write its pid to resolving.pid in $RUNNER_TEAMMATE_DIR and sleep an hour
$RESOLVE may list one mode per attempt (`markers,hang`: the first attempt leaves markers, the
second and later hang), by $RUNNER_ATTEMPT. It never commits: the runner commits the merge.
"""
import os
import runpy
import sys
import time

MARKERS = ("<<<<<<< ", "=======", ">>>>>>> ", "||||||| ")


def resolve(mode):
    sys.stdin.read()
    if mode == "hang":
        pid_file = os.path.join(os.environ["RUNNER_TEAMMATE_DIR"], "resolving.pid")
        with open(pid_file + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pid_file + ".tmp", pid_file)  # whole when it appears
        time.sleep(3600)
    if mode == "markers":
        return
    for root, dirs, files in os.walk("."):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = os.path.join(root, name)
            try:
                with open(path, encoding="utf-8") as f:
                    lines = f.readlines()
            except (UnicodeDecodeError, OSError):
                continue
            kept = [l for l in lines if not l.startswith(MARKERS)]
            if kept != lines:
                with open(path, "w", encoding="utf-8") as f:
                    f.writelines(kept)
    if mode == "break":
        with open("broken.txt", "w", encoding="utf-8") as f:
            f.write("broken\n")


if __name__ == "__main__":
    if os.environ.get("RUNNER_TEAMMATE", "").endswith(".resolve"):
        modes = os.environ.get("RESOLVE", "union").split(",")
        attempt = int(os.environ.get("RUNNER_ATTEMPT", "1"))
        resolve(modes[min(attempt, len(modes)) - 1])
    else:
        runpy.run_path(os.path.join(os.path.dirname(__file__), "edit_agent.py"), run_name="__main__")
