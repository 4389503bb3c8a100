#!/usr/bin/env python3
"""A fake agent CLI: installed (as a symlink) under the name of a real one — claude, codex,
gemini, opencode, cursor-agent, amp, aider — it records what it was given and prints that
CLI's real output shapes from tests/fixtures/cli/<name>/<scenario>.out.

Environment:
  FAKE_CLI_SCENARIO   success | error | max_turns | no_json | failed_exit_0 | bom_surrogate |
                      max_turns_no_errors
                      (default success)
  FAKE_CLI_RECORD     folder where <name>-<RUNNER_ITEM_ID>.json is written: argv, stdin,
                      the prompt file (aider's --message-file), and whether CLAUDECODE was set

Exit codes follow tests/fixtures/cli/README.md. `no_json` output goes to stderr, as the real
CLIs print those failures there. Like the real CLIs given a prompt on stdin, it reads stdin
to EOF; stdin must be closed by the runner or this hangs (which the tests would catch).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "cli")

# (scenario -> exit code) per CLI, from tests/fixtures/cli/README.md.
EXIT = {
    "claude": {"success": 0, "error": 0, "max_turns": 1, "no_json": 1, "bom_surrogate": 0,
               "max_turns_no_errors": 1},
    "codex": {"success": 0, "error": 1, "no_json": 1, "failed_exit_0": 0},
    "gemini": {"success": 0, "error": 1, "max_turns": 53, "no_json": 55},
    "opencode": {"success": 0, "error": 1, "no_json": 1},
    "cursor-agent": {"success": 0, "error": 1, "no_json": 1},
    "amp": {"success": 0, "error": 1, "no_json": 1},
    "aider": {"success": 0, "error": 0, "no_json": 1},
}
# Which CLIs take the prompt on stdin (the others: aider from --message-file, cursor-agent
# as the last argument).
STDIN = {"claude", "codex", "gemini", "opencode", "amp"}


def main():
    name = os.path.basename(sys.argv[0])
    scenario = os.environ.get("FAKE_CLI_SCENARIO", "success")
    args = sys.argv[1:]
    if args == ["--version"]:
        print(f"{name} 9.9.9 (fake)")
        return 0
    stdin = sys.stdin.read() if name in STDIN else None
    prompt_file = None
    if "--message-file" in args:
        with open(args[args.index("--message-file") + 1], encoding="utf-8") as f:
            prompt_file = f.read()
    record = os.environ.get("FAKE_CLI_RECORD")
    if record:
        path = os.path.join(record, f"{name}-{os.environ.get('RUNNER_ITEM_ID', 'x')}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(
                {"argv": args, "stdin": stdin, "prompt_file": prompt_file,
                 "claudecode_set": "CLAUDECODE" in os.environ, "env": {k: v for k, v in os.environ.items() if k.startswith(("CODEX_", "CURSOR_", "RUNNER_"))}},
                f,
            )
    with open(os.path.join(FIXTURES, name, f"{scenario}.out"), encoding="utf-8") as f:
        out = f.read()
    (sys.stderr if scenario == "no_json" else sys.stdout).write(out)
    return EXIT[name][scenario]


if __name__ == "__main__":
    sys.exit(main())
