#!/usr/bin/env python3
"""Example agent for the second stage of `runner batch examples/audit/BATCH-stages.md`.

It judges a markdown file from what the first stage (`audit`) found, which the runner puts
into this stage's prompt (`{audit.output.has_title}` and the like in BATCH-stages.md). It
reads only its prompt on stdin — the lines `title: …`, `frontmatter: …` and
`broken links: …` — and writes its report to $RUNNER_REPORT: `output.verdict` is `ok` or
`needs work`, with the reasons.
"""
import json
import os
import sys


def field(prompt, name):
    for line in prompt.splitlines():
        if line.strip().startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return None


def main():
    prompt = sys.stdin.read()
    title = field(prompt, "title")
    frontmatter = field(prompt, "frontmatter")
    broken = field(prompt, "broken links")
    report = {"files_modified": [], "files_created": [], "tests": "none", "next_steps": []}
    if title is None or frontmatter is None or broken is None:
        report.update(
            status="failed",
            summary="the prompt does not carry the audit's findings",
            output={},
        )
    else:
        reasons = []
        if title != "true":
            reasons.append("no title")
        if frontmatter in ("invalid", "unclosed"):
            reasons.append(f"frontmatter {frontmatter}")
        links = json.loads(broken or "[]")
        if links:
            reasons.append("broken links: " + ", ".join(links))
        verdict = "needs work" if reasons else "ok"
        report.update(
            status="completed",
            summary=verdict + (": " + "; ".join(reasons) if reasons else ""),
            output={"verdict": verdict, "reasons": reasons},
        )
    with open(os.environ["RUNNER_REPORT"], "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
