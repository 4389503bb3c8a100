#!/usr/bin/env python3
"""A fake agent for the best-of tests: one task, several candidates that do it differently.

Candidate K ($RUNNER_CANDIDATE) does what the prompt's `CK=ACTIONS` token says (actions
comma-separated, in order); a candidate without a token just reports success:
  lines:N    write N lines to answer.txt in its working directory (its diff)
  ok         write ok.txt in its working directory (what the tests' verify looks for)
  score:X    write X to score.txt in its working directory (what the score command prints)
  cost:X     print {"cost": X} on stdout at once (a JSON Lines runner definition reads it)
             and report cost_usd X
  hang       sleep an hour (until the runner stops it); its pid goes to hang-K.pid beside LOG
  fail       report failed
  wait:NAME  wait until the file NAME beside LOG exists
  release    wait until the file $RELEASE_FILE exists
  save       write the prompt it got to prompt-K.txt beside LOG
  winner:X   report `winner: X` in its output (what a judge stage names)
The judge stage of an item runs without $RUNNER_CANDIDATE: it is candidate 0 (`C0=…`).
Every run first appends `cK` to the file the prompt's `LOG=<path>` token names, and leaves
`started-K` beside it.
"""
import json
import os
import re
import sys
import time


def main():
    prompt = sys.stdin.read()
    k = os.environ.get("RUNNER_CANDIDATE", "0")
    log = re.search(r"LOG=(\S+)", prompt)
    if log:
        with open(log.group(1), "a", encoding="utf-8") as f:
            f.write(f"c{k}\n")
        with open(os.path.join(os.path.dirname(log.group(1)), f"started-{k}"), "w") as f:
            f.write("started\n")
    found = re.search(rf"\bC{k}=(\S+)", prompt)
    actions = found.group(1).split(",") if found else []
    status, cost, winner = "completed", None, None
    for action in actions:
        name, _, arg = action.partition(":")
        if name == "lines":
            with open("answer.txt", "w", encoding="utf-8") as f:
                f.write("".join(f"line {i} of candidate {k}\n" for i in range(int(arg))))
        elif name == "ok":
            with open("ok.txt", "w", encoding="utf-8") as f:
                f.write("ok\n")
        elif name == "score":
            with open("score.txt", "w", encoding="utf-8") as f:
                f.write(arg + "\n")
        elif name == "cost":
            cost = float(arg)
            print(json.dumps({"cost": cost}), flush=True)
        elif name == "hang":
            if log:
                pid_file = os.path.join(os.path.dirname(log.group(1)), f"hang-{k}.pid")
                with open(pid_file, "w", encoding="utf-8") as f:
                    f.write(str(os.getpid()))
            time.sleep(3600)
        elif name == "fail":
            status = "failed"
        elif name == "wait" and log:
            path = os.path.join(os.path.dirname(log.group(1)), arg)
            while not os.path.exists(path):
                time.sleep(0.02)
        elif name == "save" and log:
            with open(os.path.join(os.path.dirname(log.group(1)), f"prompt-{k}.txt"), "w") as f:
                f.write(prompt)
        elif name == "winner":
            winner = arg
        elif name == "release":
            while not os.path.exists(os.environ["RELEASE_FILE"]):
                time.sleep(0.05)
    report = {
        "id": os.environ.get("RUNNER_ITEM_ID"),
        "status": status,
        "summary": f"candidate {k} did it",
        "files_modified": [],
        "files_created": [],
        "tests": "none",
        "blocker": None,
        "next_steps": [],
        "output": {"candidate": k},
    }
    if cost is not None:
        report["cost_usd"] = cost
    if winner is not None:
        report["output"]["winner"] = winner
    with open(os.environ["RUNNER_REPORT"], "w", encoding="utf-8") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
