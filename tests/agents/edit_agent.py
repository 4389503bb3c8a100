#!/usr/bin/env python3
"""A fake coding agent for the worktree tests: it edits files in its working directory as
the prompt says, like an agent CLI working on a repository.

Tokens in the prompt (read from stdin to EOF):
  EDIT <path>=<text>   write <text> plus a newline to <path> (creating folders)
  COMMIT               commit its own changes with git (the runner commits the rest)
  TRY-COMMIT           try to commit (git add, git commit) and point the repository's `main`
                       at its commit, going on whatever git answers; the report's
                       output.git says what git answered
  CHECK <path>         fail unless <path> exists (for setup/copy tests)
  HANG                 sleep forever after editing
It writes a completed report to $RUNNER_REPORT listing the files it touched.
"""
import json
import os
import re
import subprocess
import sys
import time


def main():
    prompt = sys.stdin.read()
    touched = []
    for path, text in re.findall(r"EDIT (\S+?)=(\S+)", prompt):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        touched.append(path)
    for path in re.findall(r"CHECK (\S+)", prompt):
        if not os.path.exists(path):
            print(f"missing {path} in {os.getcwd()}", file=sys.stderr)
            sys.exit(4)
    if "COMMIT" in prompt.split():
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "-c", "user.name=agent", "-c", "user.email=agent@example.com",
                        "commit", "-q", "-m", "agent's own commit"], check=True)
    git_said = {}
    if "TRY-COMMIT" in prompt.split():
        for step, argv in [
            ("add", ["git", "add", "-A"]),
            ("commit", ["git", "-c", "user.name=agent", "-c", "user.email=agent@example.com",
                        "commit", "-q", "-m", "agent's own commit"]),
            ("move_main", ["git", "update-ref", "refs/heads/main", "HEAD"]),
        ]:
            done = subprocess.run(argv, capture_output=True, text=True)
            git_said[step] = "ok" if done.returncode == 0 else done.stderr.strip()
    if "HANG" in prompt.split():
        time.sleep(3600)
    with open(os.environ["RUNNER_REPORT"], "w", encoding="utf-8") as f:
        json.dump({"status": "completed", "summary": f"edited {', '.join(touched) or 'nothing'}",
                   "files_modified": touched,
                   "output": {"cwd": os.getcwd(), "git": git_said}}, f)


if __name__ == "__main__":
    main()
