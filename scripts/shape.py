#!/usr/bin/env python3
"""The shape of the source tree: files over a line count and functions over a length.

Usage: scripts/shape.py [--file-max 1000] [--fn-max 120] [src]

Reads every .rs file under the folder (default src/), counts its lines, and measures each
`fn` from its signature line to the line of its closing brace (braces inside strings, chars
and comments are skipped). Prints the files and functions over the limits, then the totals
the architecture notes quote: files over the file limit, functions of 100 lines or more,
functions over the function limit, and `pub fn` / `pub(crate) fn` counts. Exit 1 when
anything is over a limit, so it can gate a review.
"""
import argparse
import os
import re
import sys

FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)")


def strip(line, state):
    """The line without string, char and comment contents; state carries block comments and
    strings across lines."""
    out = []
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if state["block"]:
            if line.startswith("*/", i):
                state["block"] -= 1
                i += 2
            elif line.startswith("/*", i):
                state["block"] += 1
                i += 2
            else:
                i += 1
            continue
        if state["raw"] is not None:
            end = '"' + "#" * state["raw"]
            if line.startswith(end, i):
                state["raw"] = None
                i += len(end)
            else:
                i += 1
            continue
        if state["str"]:
            if c == "\\":
                i += 2
            elif c == '"':
                state["str"] = False
                i += 1
            else:
                i += 1
            continue
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"] += 1
            i += 2
            continue
        m = re.match(r'b?r(#*)"', line[i:])
        if m and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] == "_")):
            state["raw"] = len(m.group(1))
            i += len(m.group(0))
            continue
        if c == '"':
            state["str"] = True
            i += 1
            continue
        if c == "'":
            m = re.match(r"'(\\.[^']*|[^'\\])'", line[i:])
            if m:
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    state = {"block": 0, "str": False, "raw": None}
    clean = [strip(l, state) for l in lines]
    found = []
    for idx, l in enumerate(clean):
        m = FN.match(l)
        if not m:
            continue
        depth = 0
        opened = False
        for j in range(idx, len(clean)):
            for ch in clean[j]:
                if ch == "{":
                    depth += 1
                    opened = True
                elif ch == "}":
                    depth -= 1
                elif ch == ";" and not opened and depth == 0:
                    break
            else:
                if opened and depth == 0:
                    found.append((m.group(1), idx + 1, j - idx + 1))
                    break
                continue
            break
    return len(lines), found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--file-max", type=int, default=1000)
    ap.add_argument("--fn-max", type=int, default=120)
    ap.add_argument("root", nargs="?", default="src")
    a = ap.parse_args()
    big_files, long_fns, over_fns = [], 0, []
    pub_fn = crate_fn = 0
    for dirpath, _, names in os.walk(a.root):
        for name in sorted(names):
            if not name.endswith(".rs"):
                continue
            p = os.path.join(dirpath, name)
            n, fns = functions(p)
            with open(p, encoding="utf-8") as f:
                text = f.read()
            pub_fn += len(re.findall(r"\bpub\s+(?:const\s+)?(?:async\s+)?fn\b", text))
            crate_fn += len(re.findall(r"\bpub\((?:crate|super|in [^)]*)\)\s+(?:const\s+)?(?:async\s+)?fn\b", text))
            if n > a.file_max:
                big_files.append((n, p))
            for fname, line, length in fns:
                if length >= 100:
                    long_fns += 1
                if length > a.fn_max:
                    over_fns.append((length, f"{p}:{line}", fname))
    for n, p in sorted(big_files, reverse=True):
        print(f"file {n:5} lines  {p}")
    for length, at, fname in sorted(over_fns, reverse=True):
        print(f"fn   {length:5} lines  {at} {fname}")
    print(f"files over {a.file_max} lines: {len(big_files)}; functions of 100+ lines: {long_fns}; "
          f"over {a.fn_max}: {len(over_fns)}; pub fn: {pub_fn}; pub(crate|super) fn: {crate_fn}")
    return 1 if big_files or over_fns else 0


if __name__ == "__main__":
    sys.exit(main())
