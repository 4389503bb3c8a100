#!/usr/bin/env python3
"""Section 11 of scripts/bench.sh: the live page (`runner serve`) of a large team.

    live_page_bench.py RUNNER DIR ITEMS RATE SECONDS

1. Writes DIR/live.runner/ as a run of ITEMS items leaves it: team.json and a journal of
   run_started, then per item attempt_started, attempt_finished and item_finished (with
   a report), as docs/events.md describes them.
2. Starts `RUNNER serve DIR/live.runner`: `start_s` is the time until it prints its URL
   (the journal read into the server's state).
3. Loads the page as its script does, one request after the other: the HTML, the banner
   (/api/summary) and the first page of rows (/api/rows): `load_s`; then an item's panel
   (/api/item, its attempts and report), the first item's and a middle one's: `item_s`.
4. Appends RATE events a second for SECONDS seconds (attempt_started and progress lines of
   new items) while an event stream (/api/events) reads them: `events_per_s` received,
   `behind_s` how long after the last write its event arrived, `missed` events never
   received.

Prints `key=value` lines. Needs nothing but Python 3.
"""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request


def at(ms):
    t = time.gmtime(ms / 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", t) + ".%03dZ" % (ms % 1000)


def write_team(ws, items):
    os.makedirs(ws, exist_ok=True)
    with open(os.path.join(ws, "team.json"), "w") as f:
        json.dump({"team": "live"}, f)
    base = int(time.time() * 1000) - items * 10
    with open(os.path.join(ws, "journal.jsonl"), "w") as f:
        f.write(json.dumps({"v": 1, "event": "run_started", "at": at(base), "pid": 1,
                            "team": "live", "workspace": ws, "total": items, "resumed": 0,
                            "jobs": 8, "sandbox": "none"}) + "\n")
        for i in range(1, items + 1):
            t = base + i * 10
            ident, mate = str(i), "%d-%d" % (i, i)
            f.write(json.dumps({"v": 1, "event": "attempt_started", "id": ident,
                                "teammate": mate, "title": ident, "attempt": 1, "pgid": 0,
                                "at": at(t)}) + "\n")
            status = "completed" if i % 10 else "failed"
            f.write(json.dumps({"v": 1, "event": "attempt_finished", "id": ident,
                                "teammate": mate, "attempt": 1, "status": status,
                                "reason": "" if i % 10 else "the report says failed",
                                "retrying": False, "at": at(t + 5)}) + "\n")
            report = {"id": ident, "status": status, "summary": "handled item %s" % ident,
                      "files_modified": [], "files_created": [], "tests": "none",
                      "blocker": None, "next_steps": [], "output": {"ok": True, "n": i}}
            outcome = {"id": ident, "teammate": mate, "title": ident, "status": status,
                       "attempts": 1, "exit_code": 0, "duration_s": 0.005,
                       "started_at": at(t), "finished_at": at(t + 5),
                       "error": report["summary"] if status == "failed" else "",
                       "summary": report["summary"], "log": "", "output": report["output"],
                       "report": report, "files_modified": [], "files_created": [],
                       "tests": "none", "blocker": None, "next_steps": [], "cost_usd": None,
                       "input_tokens": None, "output_tokens": None, "turns": None,
                       "session_id": None, "content_hash": "%016x" % i, "branch": None,
                       "commit": None, "diffstat": None}
            if status == "failed":
                outcome["failure_kind"] = "agent_error"
            f.write(json.dumps({"v": 1, "event": "item_finished", "outcome": outcome}) + "\n")


def get(url):
    with urllib.request.urlopen(url) as r:
        return r.read()


def main():
    runner, folder, items, rate, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
        int(sys.argv[4]), float(sys.argv[5])
    ws = os.path.join(folder, "live.runner")
    write_team(ws, items)
    start = time.monotonic()
    serve = subprocess.Popen([runner, "serve", ws], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        url = None
        for line in serve.stdout:
            if "http://127.0.0.1:" in line:
                url = line[line.index("http://"):].split()[0]
                break
        start_s = time.monotonic() - start
        base, token = url.split("/?token=")
        q = "token=" + token
        t0 = time.monotonic()
        get(url)
        summary = json.loads(get(base + "/api/summary?" + q))
        rows = json.loads(get(base + "/api/rows?" + q + "&start=0&size=100"))
        load_s = time.monotonic() - t0
        assert summary["seen"] == items, summary["seen"]
        assert len(rows["rows"]) == min(100, items)
        # An item's panel (its attempts and report), the first item and one in the middle.
        t0 = time.monotonic()
        for ident in (1, items // 2):
            detail = json.loads(get(base + "/api/item?" + q + "&id=%d" % ident))
            assert detail["report"], detail
        item_s = (time.monotonic() - t0) / 2

        # Events: a stream from the journal's current end, a writer at RATE a second.
        received = []
        ready = threading.Event()

        def read_stream():
            with urllib.request.urlopen(base + "/api/events?" + q) as r:
                ready.set()
                for raw in r:
                    if raw.startswith(b"id: "):
                        received.append(time.monotonic())

        threading.Thread(target=read_stream, daemon=True).start()
        ready.wait(10)
        total = int(rate * seconds)
        journal = open(os.path.join(ws, "journal.jsonl"), "a")
        w0 = time.monotonic()
        for k in range(total):
            i = items + 1 + k // 2
            ident, mate = str(i), "%d-%d" % (i, i)
            if k % 2 == 0:
                e = {"v": 1, "event": "attempt_started", "id": ident, "teammate": mate,
                     "title": ident, "attempt": 1, "pgid": 0, "at": at(int(time.time() * 1000))}
            else:
                e = {"v": 1, "event": "progress", "id": ident, "teammate": mate, "attempt": 1,
                     "status": "in_progress", "progress": "50%", "at": at(int(time.time() * 1000))}
            journal.write(json.dumps(e) + "\n")
            journal.flush()
            pause = w0 + (k + 1) / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        last_write = time.monotonic()
        deadline = last_write + 10
        while len(received) < total and time.monotonic() < deadline:
            time.sleep(0.01)
        got = len(received)
        behind = (received[-1] - last_write) if got else float("nan")
        span = (received[-1] - w0) if got else float("nan")
        print("items=%d" % items)
        print("start_s=%.3f" % start_s)
        print("load_s=%.3f" % load_s)
        print("item_s=%.3f" % item_s)
        print("events=%d" % total)
        print("events_per_s=%.1f" % (got / span if got else 0))
        print("behind_s=%.3f" % max(behind, 0.0))
        print("missed=%d" % (total - got))
    finally:
        serve.kill()
        serve.wait()


if __name__ == "__main__":
    main()
