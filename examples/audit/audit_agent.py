#!/usr/bin/env python3
"""Example agent for `runner batch examples/audit/BATCH.md`: audits one markdown file.

It behaves like an agent CLI run by the `exec` runner: it reads its prompt on stdin (and
ignores it: the work is fixed), finds its item in the environment the runner sets, and writes
its report to $RUNNER_REPORT. The item id (or, as a stage of BATCH-stages.md, the row id
$RUNNER_ROW_ID) is the file's path, relative to the folder the runner was started in (the
repository root).

Checks: the file exists and is UTF-8; it has a `# ` title; a `---` frontmatter, if present,
is closed and holds `key: value` lines; every relative link `[text](path)` points to a file
or folder that exists. The report is `completed` when the audit ran (its findings are in
`output`), `failed` when the file cannot be read.
"""
import json
import os
import re
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def frontmatter_state(lines):
    if not lines or lines[0].strip() != "---":
        return "none"
    for line in lines[1:]:
        if line.strip() == "---":
            return "valid"
        if line.strip() and not line.startswith((" ", "-", "#")) and ":" not in line:
            return "invalid"
    return "unclosed"


def read_text(text):
    """What the text of a markdown file shows: its title, frontmatter, relative link targets
    and line count (no file system needed: what a model given the text can tell)."""
    lines = text.splitlines()
    in_fence = False
    links, has_title = [], False
    for line in lines:
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if line.startswith("# "):
            has_title = True
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            links.append(target)
    return {
        "has_title": has_title,
        "frontmatter": frontmatter_state(lines),
        "relative_links": links,
        "lines": len(lines),
    }


def audit(path):
    with open(path, encoding="utf-8") as f:
        seen = read_text(f.read())
    broken = []
    for target in seen["relative_links"]:
        local = target.split("#", 1)[0]
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), local))
        if not os.path.exists(resolved):
            broken.append(target)
    return {
        "has_title": seen["has_title"],
        "frontmatter": seen["frontmatter"],
        "links_checked": len(seen["relative_links"]),
        "broken_links": broken,
        "lines": seen["lines"],
    }


def main():
    sys.stdin.read()  # the prompt; this example's work does not depend on it
    # A stage of a chain (BATCH-stages.md) is told its row apart from its own id.
    path = os.environ.get("RUNNER_ROW_ID") or os.environ["RUNNER_ITEM_ID"]
    report = {"id": path, "files_modified": [], "files_created": [], "tests": "none", "next_steps": []}
    try:
        out = audit(path)
    except (OSError, UnicodeDecodeError) as e:
        report.update(status="failed", summary=f"cannot read {path}: {e}", output={})
    else:
        problems = []
        if not out["has_title"]:
            problems.append("no title")
        if out["frontmatter"] in ("invalid", "unclosed"):
            problems.append(f"frontmatter {out['frontmatter']}")
        if out["broken_links"]:
            problems.append(f"{len(out['broken_links'])} broken link(s)")
        verdict = "; ".join(problems) if problems else "no problems"
        report.update(
            status="completed",
            summary=f"{path}: {out['links_checked']} relative link(s) checked, {verdict}",
            output=out,
        )
    with open(os.environ["RUNNER_REPORT"], "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    print(report["summary"])


if __name__ == "__main__":
    main()
