#!/usr/bin/env bash
# Benchmarks of the runner against xargs -P and GNU parallel (issue: benchmarks).
#
#   scripts/bench.sh            full run; writes BENCHMARKS.md (needs a release build)
#   scripts/bench.sh --smoke    tiny sizes, no targets, prints results only (used by the tests)
#
# Environment: RUNNER_BIN (default target/release/runner), BENCH_DIR (default a temp dir),
# BENCH_ONLY=sandbox (section 8 alone; prints its results, writes no BENCHMARKS.md),
# BENCH_ONLY=queue (section 12 alone, the same way), BENCH_ONLY=ratelimit (section 5).
# Measures, on this machine, in one run:
#   1. overhead: N rows with a trivial agent (writes a report) at -j 8, vs xargs -P 8 and
#      GNU parallel --joblog over the same items and the same agent;
#   2. makespan: 64 rows of a 0.5 s sleep at -j 8 (ideal 4.0 s);
#   3. memory: peak RSS of --dry-run and of a full run over a 100,000-row CSV, of a run
#      whose agent writes 1 GiB to stdout, and of the refusal (exit 2) of hostile inputs: a
#      header of 1,000,000 columns and a 100 MiB cell;
#   4. start-up: `runner --version` and `runner list` on an empty store;
#   5. rate limits: a stand-in API on 127.0.0.1 that serves 2 requests at once (429 with
#      Retry-After: 1 above that), 0.5 s each; 48 items at -j 8 vs xargs -P 8 and GNU
#      parallel -j 8 --retries 3; 200 items with a bad key; 60 items whose agent script is
#      missing (a broken set-up);
#   6. HTTP backend: N rows, one chat-completions request each (--runner openai, -j 8) against
#      a local stand-in that answers at once (examples/audit/model_standin.py --answer fixed),
#      vs xargs -P 8 curl over the same rows and server; and the runner's peak RSS.
#  6b. the Batch API: N rows as one job (--batch-api) against the same stand-in, whose job
#      is done at once: the runner's own time around it, and its peak RSS.
#   7. live output: 20,000 rows with the trivial agent at -j 8, the output CSV kept current
#      while the run goes on, vs xargs -P 8 over the same items;
#   8. the sandbox: 1,000 rows with the trivial agent at -j 8 under --sandbox none and
#      --sandbox landlock (keeper, own session, Landlock domain): wall and CPU per attempt;
#      and the overhead rows under --sandbox landlock against xargs -P 8;
#   9. what a completed item leaves on disk (KB, entries) and the CPU against xargs -P 8,
#      paired runs over the overhead rows, beside the layout's floors (in C and on tokio);
#  10. with BENCH_MILLION=1: a million rows' full run (peak RSS), resume and status.
#  11. the live page (`runner serve`, scripts/live_page_bench.py): a 100,000-item team's
#      journal served — the time to serve it (the journal read) and the page's first load
#      (HTML, banner, first page of rows) — and 200 events a second for 10 s through the
#      event stream: events received per second, how far behind the last one arrived.
#  12. many machines (issue 54): 60 items of 0.2–2 s on 4 workers × 2 slots, one worker
#      1.5× slower, against a local redis-server: static shards (--shard K/4), the shared
#      queue (--queue), and the queue longest first (--order longest-first); makespan over
#      the lower bound (total work over the fleet's speed, or the longest item).
# Run it on a quiet machine, and not within five minutes of deleting many files (a previous
# run of this script deletes half a million at its end): ext4 avoids reusing recently freed
# inode numbers, and scanning past them slows every file the runner creates.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SMOKE=0
[ "${1:-}" = "--smoke" ] && SMOKE=1

if [ $SMOKE = 1 ]; then
    N_OVERHEAD=40; N_MAKESPAN=8; SLEEP=0.1; N_MEMORY=300; FLOOD_MB=8; RUNS=1
    N_LIMITED=8; N_BADKEY=20; N_HTTP=40; N_BATCH_API=50; N_LIVE=200; N_SANDBOX=20; PAIRS=1
    HOSTILE_COLS=20000; HOSTILE_CELL_MB=17; N_PAGE=300; PAGE_RATE=50; PAGE_SECS=1
else
    N_OVERHEAD=2000; N_MAKESPAN=64; SLEEP=0.5; N_MEMORY=100000; FLOOD_MB=1024; RUNS=5
    N_LIMITED=48; N_BADKEY=200; N_HTTP=2000; N_BATCH_API=10000; N_LIVE=20000; N_SANDBOX=1000; PAIRS=7
    HOSTILE_COLS=1000000; HOSTILE_CELL_MB=100; N_PAGE=100000; PAGE_RATE=200; PAGE_SECS=10
fi

need() {
    local missing=()
    for p in "$@"; do command -v "$p" >/dev/null 2>&1 || missing+=("$p"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ $SMOKE = 1 ]; then return 1; fi
    echo "installing ${missing[*]} from Debian's packages" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}
HAVE_TOOLS=1
need hyperfine parallel || HAVE_TOOLS=0
[ -x /usr/bin/time ] || { [ $SMOKE = 1 ] || need time; }

RUNNER=${RUNNER_BIN:-$ROOT/target/release/runner}
if [ ! -x "$RUNNER" ]; then
    echo "building the release binary" >&2
    cargo build --release --locked >&2
fi
RUNNER=$(realpath "$RUNNER")
if [ -n "${BENCH_DIR:-}" ]; then
    WORK=$BENCH_DIR
else
    # Half a million files by the end (the 100,000-row run): not left behind in /tmp.
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
cd "$WORK"
# The file system the runs write to, and for ext4 whether it has a journal: without one,
# ext4 skips inodes freed in the last minute when it makes a file (`recently_deleted`), so
# deleting files while creating others costs more there (see BENCHMARKS.md's notes).
FS=$(df -T . | awk 'NR == 2 {print $2}')
if [ "$FS" = ext4 ]; then
    dev=$(basename "$(df . | awk 'NR == 2 {print $1}')")
    if [ "$(cat "/sys/fs/ext4/$dev/journal_task" 2>/dev/null)" = "<none>" ]; then
        FS="ext4 without a journal"
    else
        FS="ext4 with a journal"
    fi
fi

# The trivial agent: reads its input to EOF, writes a report (to /dev/null without
# RUNNER_REPORT, as under xargs and parallel). A compiled program when a C compiler is there,
# so that the tools' own costs are what is compared; else a shell script.
cat > agent.c <<'AGENT'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void) {
    char buf[65536];
    while (read(0, buf, sizeof buf) > 0) {}
    const char *p = getenv("RUNNER_REPORT");
    FILE *f = fopen(p ? p : "/dev/null", "w");
    if (!f) return 1;
    fputs("{\"status\":\"completed\",\"summary\":\"ok\"}", f);
    return fclose(f) != 0;
}
AGENT
if cc -O2 -o agent agent.c 2>/dev/null; then
    AGENT_KIND="a compiled C program (agent.c)"
else
    printf '#!/bin/sh\ncat > /dev/null\nprintf %s > "${RUNNER_REPORT:-/dev/null}"\n' "'{\"status\":\"completed\",\"summary\":\"ok\"}'" > agent
    chmod +x agent
    AGENT_KIND="a shell script (no C compiler found)"
fi
# The floor of the workspace layout (section 9): every file DESIGN §6b asks for, done by one
# thread with no runtime. Left out without a C compiler.
cc -O2 -o layout-floor "$ROOT/scripts/layout-floor.c" 2>/dev/null || rm -f layout-floor
# The same work on tokio's multi-threaded runtime, the one the runner is built on
# (examples/layout_floor.rs); a release build, so not in a smoke run.
TOKIO_FLOOR=
if [ $SMOKE = 0 ] && [ -z "${BENCH_ONLY:-}" ]; then
    TOKIO_FLOOR=$( (cd "$ROOT" && cargo build --release --locked --example layout_floor --message-format=json 2>/dev/null) | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "layout_floor":
        print(m["executable"])' ) || TOKIO_FLOOR=
fi
printf 'Item {id}.\n' > instr.md
rows() { { echo id; seq 1 "$1"; } > "$2"; }

# Median / min / max of hyperfine's JSON export, seconds.
stats() { python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(f'{r["median"]:.3f} {r["min"]:.3f} {r["max"]:.3f}')
PY
}
# Wall time of one run of a command, seconds (no hyperfine in smoke mode).
once() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N); calc "($e-$s)/1000000000" 3; }
# Arithmetic without bc: calc EXPR DECIMALS.
calc() { awk "BEGIN { printf \"%.${2}f\", $1 }"; }
# Peak RSS of one run of a command, MiB.
rss() { /usr/bin/time -v "$@" 2>&1 >/dev/null | awk -F: '/Maximum resident set size/ {printf "%.1f", $2/1024}'; }

results=()
note() { results+=("$1"); echo "$1"; }

# 8. The sandbox (run by `sandbox_section`, at its place below or alone with
# BENCH_ONLY=sandbox). Per attempt: the same rows under --sandbox none and landlock, run
# from a folder of their own with the output outside it (the sandbox refuses a workspace
# its teammates could write); wall and user+sys CPU of the whole process tree, medians of 3
# runs each. Then the overhead rows (section 1) under --sandbox landlock, the same way,
# against xargs -P 8 (hyperfine, $RUNS runs), and unconfined (--sandbox none) beside them.
# Last, the floor (scripts/landlock-floor.c, when a C compiler is there): the CPU any
# confinement costs per attempt over a plain fork and exec, done by a small C process —
# confining the agent's process alone, and with a keeper process forked per attempt — and
# from it the best overhead row possible: the unconfined row + N × floor CPU / 2 cores,
# over xargs.
sandbox_section() {
if [ -x /usr/bin/time ] && "$RUNNER" runners 2>/dev/null | grep -q -- '--sandbox landlock is available'; then
    rows "$N_SANDBOX" sb.csv
    rm -rf sb-runs sb-work && mkdir sb-runs sb-work
    sb_run() { # mode → "wall cpu" seconds
        local out; out=$(mktemp -d -p "$WORK/sb-runs")/out.csv
        (cd sb-work && /usr/bin/time -f '%e %U %S' "$RUNNER" batch --input ../sb.csv \
            --instruction ../instr.md --id-column id --output "$out" --jobs 8 --format plain \
            --sandbox "$1" -- ../agent 2>&1 >/dev/null | tail -n 1 | awk '{printf "%s %.2f", $1, $2 + $3}')
        test "$(grep -c ',completed,' "$out")" = "$N_SANDBOX" || { echo "sandbox run ($1) did not complete every row" >&2; exit 1; }
    }
    median3() { sort -n | sed -n 2p; }
    sync
    sb_none=(); sb_ll=()
    for _ in 1 2 3; do sb_none+=("$(sb_run none)"); sb_ll+=("$(sb_run landlock)"); done
    sn_wall=$(printf '%s\n' "${sb_none[@]}" | awk '{print $1}' | median3)
    sn_cpu=$(printf '%s\n' "${sb_none[@]}" | awk '{print $2}' | median3)
    sl_wall=$(printf '%s\n' "${sb_ll[@]}" | awk '{print $1}' | median3)
    sl_cpu=$(printf '%s\n' "${sb_ll[@]}" | awk '{print $2}' | median3)
    sb_wall_ms=$(calc "($sl_wall - $sn_wall) * 8 * 1000 / $N_SANDBOX" 2)
    sb_cpu_ms=$(calc "($sl_cpu - $sn_cpu) * 1000 / $N_SANDBOX" 2)
    note "sandbox: $N_SANDBOX rows -j8: none ${sn_wall}s wall ${sn_cpu}s cpu, landlock ${sl_wall}s wall ${sl_cpu}s cpu; per attempt +${sb_wall_ms} ms of a slot, +${sb_cpu_ms} ms cpu"
    # The overhead rows, confined: the output outside the working directory (sb-work).
    rows "$N_OVERHEAD" sbo.csv
    tail -n +2 sbo.csv > sbo.txt
    printf '%s\n' "cd sb-work && $RUNNER batch --input ../sbo.csv --instruction ../instr.md --id-column id --output \$(mktemp -d -p ../sb-runs)/out.csv --jobs 8 --format plain --sandbox landlock -- ../agent > /dev/null" > run-sb-runner.sh
    printf '%s\n' "xargs -P 8 -n 1 ./agent < sbo.txt" > run-sb-xargs.sh
    sed 's/--sandbox landlock/--sandbox none/' run-sb-runner.sh > run-sb-none.sh
    if [ $HAVE_TOOLS = 1 ]; then
        hyperfine -N --style none --runs "$RUNS" --warmup 1 --prepare sync --export-json h-sb-runner.json "bash run-sb-runner.sh" >/dev/null
        hyperfine -N --style none --runs "$RUNS" --warmup 1 --prepare sync --export-json h-sb-xargs.json "bash run-sb-xargs.sh" >/dev/null
        hyperfine -N --style none --runs "$RUNS" --warmup 1 --prepare sync --export-json h-sb-none.json "bash run-sb-none.sh" >/dev/null
        read -r so_med so_min so_max < <(stats h-sb-runner.json)
        read -r sx_med sx_min sx_max < <(stats h-sb-xargs.json)
        read -r sn_med sn_min sn_max < <(stats h-sb-none.json)
    else
        so_med=$(once bash run-sb-runner.sh); so_min=$so_med; so_max=$so_med
        sx_med=$(once bash run-sb-xargs.sh); sx_min=$sx_med; sx_max=$sx_med
        sn_med=$(once bash run-sb-none.sh); sn_min=$sn_med; sn_max=$sn_med
    fi
    ratio_sb=$(calc "$so_med / $sx_med" 2)
    note "overhead under the sandbox: $N_OVERHEAD rows -j8 --sandbox landlock: runner ${so_med}s (${so_min}-${so_max}), xargs ${sx_med}s (${sx_min}-${sx_max}); runner/xargs ${ratio_sb}x; unconfined beside them ${sn_med}s (${sn_min}-${sn_max}), $(calc "$sn_med / $sx_med" 2)x"
    if cc -O2 -o landlock-floor "$ROOT/scripts/landlock-floor.c" 2>/dev/null; then
        floor_out=$(./landlock-floor "$N_SANDBOX" 3 "$WORK/agent" < /dev/null)
        floor_ms=$(printf '%s\n' "$floor_out" | awk '$1 == "ruleset" {print $NF}')
        keeper_ms=$(printf '%s\n' "$floor_out" | awk '$1 == "keeper" {print $NF}')
        note "the floor per confined attempt, CPU over a plain fork and exec: ${floor_ms} ms confining the agent's process, ${keeper_ms} ms with a keeper forked per attempt; best overhead row possible: $(calc "($sn_med + $N_OVERHEAD * $floor_ms / 1000 / 2) / $sx_med" 2)x (with a keeper per attempt: $(calc "($sn_med + $N_OVERHEAD * $keeper_ms / 1000 / 2) / $sx_med" 2)x)"
    fi
else
    sn_wall=-; sn_cpu=-; sl_wall=-; sl_cpu=-; sb_wall_ms=-; sb_cpu_ms=-
    so_med=-; so_min=-; so_max=-; sx_med=-; sx_min=-; sx_max=-; ratio_sb=-
    note "sandbox: not measured (this kernel cannot run --sandbox landlock, or no /usr/bin/time)"
fi
}
if [ "${BENCH_ONLY:-}" = sandbox ]; then
    sandbox_section
    exit 0
fi

# 12. Many machines: four workers on this machine stand for four machines (the items sleep,
# so the two cores are not what limits them); the fourth sleeps 1.5× as long per item.
queue_section() {
q_static=-; q_queue=-; q_lf=-
if ! command -v redis-server >/dev/null 2>&1; then
    note "many machines: not measured (no redis-server)"
    return 0
fi
local n=60 port dir lb
[ $SMOKE = 1 ] && n=12
{ echo "id,secs"; for i in $(seq 1 $n); do
    # 0.2–2 s, spread evenly over the items in a fixed shuffled order.
    echo "$i,$(calc "0.2 + 1.8 * (($i * 37) % $n) / ($n - 1)" 2)"; done; } > q.csv
printf 'SECS={secs}\n' > q-instr.md
cat > q-agent <<'SH'
#!/bin/sh
secs=$(grep -o 'SECS=[0-9.]*' | head -n 1 | cut -d= -f2)
sleep "$(awk "BEGIN { print $secs * ${QUEUE_SLOW:-1} }")"
printf '{"status":"completed","summary":"ok"}' > "$RUNNER_REPORT"
SH
chmod +x q-agent
# The lower bound: the work over the fleet's speed (3 × 2 slots at 1, 2 slots at 1/1.5),
# or the longest item on a fast slot.
lb=$(awk -F, 'NR > 1 { s += $2; if ($2 > m) m = $2 } END { b = s / (6 + 2 / 1.5); if (m > b) b = m; printf "%.3f", b }' q.csv)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
dir=$(mktemp -d -p "$WORK")
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" --daemonize no >/dev/null 2>&1 &
local redis_pid=$!
for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
fleet() { # flags… → makespan of four workers, seconds
    local s e pids=() k out
    redis-cli -p "$port" flushall >/dev/null
    out=$(mktemp -d -p "$WORK")
    s=$(date +%s%N)
    for k in 1 2 3 4; do
        local slow=1; [ $k = 4 ] && slow=1.5
        local flags=("$@"); flags=("${flags[@]//@K@/$k}")
        QUEUE_SLOW=$slow "$RUNNER" batch --input q.csv --instruction q-instr.md --id-column id \
            -j 2 --format plain --output "$out/w$k.csv" "${flags[@]}" -- ./q-agent >/dev/null 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    e=$(date +%s%N)
    calc "($e - $s) / 1000000000" 3
}
local t_static t_queue t_lf
t_static=$(fleet --shard @K@/4)
t_queue=$(fleet --queue "redis://127.0.0.1:$port")
t_lf=$(fleet --queue "redis://127.0.0.1:$port" --order longest-first --weight-column secs)
kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null || true
q_static=$(calc "$t_static / $lb" 2); q_queue=$(calc "$t_queue / $lb" 2); q_lf=$(calc "$t_lf / $lb" 2)
q_lb=$lb; q_ts=$t_static; q_tq=$t_queue; q_tl=$t_lf
note "many machines: $n items of 0.2-2 s, 4 workers x 2 slots, one 1.5x slower; lower bound ${lb}s: static shards ${t_static}s (${q_static}x), queue ${t_queue}s (${q_queue}x), queue longest-first ${t_lf}s (${q_lf}x)"
}
if [ "${BENCH_ONLY:-}" = queue ]; then
    queue_section
    exit 0
fi

# 5. Rate limits ------------------------------------------------------------------------
# The stand-in API: at most 2 requests at once, each 0.5 s; above that HTTP 429 with
# Retry-After: 1; a wrong key is 401. GET answers what it saw: requests, 429s, requests
# served and the seconds it spent serving them (the capacity bound is computed from its
# real service time, not from the 0.5 s it sleeps).
# Three shapes of the same 48 items, each against a fresh stand-in, bound = items × service
# time / 2: the bench's own agent (sh + curl, a few ms to start); a Python agent (urllib:
# ~0.15 s of its own start-up before the request, ~0.65 s per item, so at 2 at once the API
# idles a quarter of the time); and a fleet of 3 worker processes (--queue on a local
# redis-server, -j 8 each, the sh agent) sharing the one stand-in.
ratelimit_section() {
cat > api.py <<'API'
import http.server, json, sys, threading, time
slots = threading.BoundedSemaphore(2)
st = {"seen": 0, "limited": 0, "served": 0, "busy_s": 0.0}
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def reply(self, code, body, headers=()):
        self.send_response(code)
        for k, v in headers: self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        with lock: body = json.dumps(st).encode()
        self.reply(200, body)
    def do_POST(self):
        with lock: st["seen"] += 1
        if self.headers.get("Authorization") != "Bearer good":
            return self.reply(401, b'{"error":{"message":"Incorrect API key provided"}}')
        if not slots.acquire(blocking=False):
            with lock: st["limited"] += 1
            return self.reply(429, b'{"error":{"message":"Rate limit reached"}}', [("Retry-After", "1")])
        t = time.monotonic()
        try:
            time.sleep(0.5)
            self.reply(200, b'{"answer":42}')
        finally:
            with lock:
                st["served"] += 1
                st["busy_s"] += time.monotonic() - t
            slots.release()
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
API
# The exec agent: one request with curl (a few ms to start, so the API's capacity is what is
# measured); the report says completed, or failed with the failure kind (and the Retry-After)
# of the answer. Exits 1 when it failed, for xargs and parallel.
cat > caller.sh <<'CALLER'
#!/bin/sh
cat > /dev/null 2>&1 || true
report=${RUNNER_REPORT:-/dev/null}
headers=$(mktemp)
code=$(curl -s -o /dev/null -D "$headers" -w '%{http_code}' -X POST -d '{}' \
    -H "Authorization: Bearer $KEY" "$API")
after=$(awk 'tolower($1) == "retry-after:" { gsub(/\r/, "", $2); print $2 }' "$headers")
rm -f "$headers"
case $code in
    200) printf '{"status":"completed","summary":"answered"}' > "$report"; exit 0 ;;
    429) kind=rate_limited ;;
    401) kind=auth ;;
    *) kind=api_error ;;
esac
printf '{"status":"failed","summary":"HTTP %s","failure_kind":"%s"%s}' "$code" "$kind" \
    "${after:+,\"retry_after_s\":$after}" > "$report"
exit 1
CALLER
# The same agent in Python: its interpreter and urllib take ~0.15 s before the request.
cat > caller.py <<'CALLER'
#!/usr/bin/env python3
import json, os, sys, urllib.error, urllib.request
sys.stdin.read()
req = urllib.request.Request(os.environ["API"], data=b"{}", method="POST",
                             headers={"Authorization": "Bearer " + os.environ["KEY"]})
try:
    with urllib.request.urlopen(req) as r:
        code, after = r.status, None
except urllib.error.HTTPError as e:
    code, after = e.code, e.headers.get("Retry-After")
out = {"status": "completed", "summary": "answered"}
if code != 200:
    kind = {429: "rate_limited", 401: "auth"}.get(code, "api_error")
    out = {"status": "failed", "summary": f"HTTP {code}", "failure_kind": kind}
    if after: out["retry_after_s"] = float(after)
with open(os.environ.get("RUNNER_REPORT", "/dev/null"), "w") as f: json.dump(out, f)
sys.exit(0 if code == 200 else 1)
CALLER
chmod +x caller.sh caller.py
rows "$N_LIMITED" limited.csv
api_pid=
start_api() {
    if [ -n "$api_pid" ]; then kill "$api_pid" 2>/dev/null; wait "$api_pid" 2>/dev/null || true; fi
    rm -f api.port
    python3 api.py > api.port &
    api_pid=$!
    for _ in $(seq 50); do [ -s api.port ] && break; sleep 0.1; done
    API="http://127.0.0.1:$(cat api.port)/v1/call"
}
api_stats() { curl -s "http://127.0.0.1:$(cat api.port)/" 2>/dev/null || python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:$(cat api.port)/').read().decode())"; }
count() { api_stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["seen"])'; }
# rl_shape NAME AGENT [WORKERS]: a fresh stand-in, the 48 items (on WORKERS processes
# sharing a redis queue when given); sets <NAME>_time, _done, _ideal (the capacity bound
# from the stand-in's service time), _429.
rl_shape() {
    local name=$1 agent=$2 workers=${3:-0} s e out st k pids=() port= redis_pid=
    start_api
    # Outputs in a folder of their own: a new team each time (the workspace's place, in the
    # user's state folder here, follows the output's path).
    out=$(mktemp -d -p "$WORK")
    rm -f "$name".log
    if [ "$workers" -gt 0 ]; then
        port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" --daemonize no >/dev/null 2>&1 &
        redis_pid=$!
        for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    fi
    s=$(date +%s%N)
    if [ "$workers" -gt 0 ]; then
        for k in $(seq 1 "$workers"); do
            API=$API KEY=good "$RUNNER" batch --input limited.csv --instruction instr.md \
                --output "$out/w$k.csv" --jobs 8 --format plain --queue "redis://127.0.0.1:$port" \
                -- "$agent" >> "$name.log" 2>&1 &
            pids+=($!)
        done
        for k in "${pids[@]}"; do wait "$k" || true; done
    else
        API=$API KEY=good "$RUNNER" batch --input limited.csv --instruction instr.md --output "$out/w.csv" \
            --jobs 8 --format plain -- "$agent" > "$name.log" 2>&1 || true
    fi
    e=$(date +%s%N)
    if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null || true; fi
    st=$(api_stats)
    printf -v "${name}_time" '%s' "$(calc "($e-$s)/1000000000" 2)"
    printf -v "${name}_done" '%s' "$(cat "$out"/w*.csv | grep -c ',completed,' || true)"
    printf -v "${name}_ideal" '%s' "$(python3 -c 'import json,sys; s=json.loads(sys.argv[1]); print("%.2f" % (int(sys.argv[2]) * s["busy_s"] / max(s["served"], 1) / 2))' "$st" "$N_LIMITED")"
    printf -v "${name}_429" '%s' "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["limited"])' "$st")"
}
rl_shape rl ./caller.sh
rl_shape rlpy ./caller.py
rl_fleet_note="fleet: not measured (no redis-server)"
rlq_time=-; rlq_done=-; rlq_ideal=1; rlq_429=-
if command -v redis-server >/dev/null 2>&1; then
    rl_shape rlq ./caller.sh 3
    rl_fleet_note="3 workers sharing the queue: $rlq_done of $N_LIMITED in ${rlq_time}s (bound ${rlq_ideal}s, **$(calc "$rlq_time / $rlq_ideal" 2)×**, $rlq_429 × 429)"
fi
start_api
s=$(date +%s%N)
x_done=$(seq 1 "$N_LIMITED" | API=$API KEY=good xargs -P 8 -I{} sh -c './caller.sh </dev/null && echo ok' 2>/dev/null | grep -c ok || true)
e=$(date +%s%N)
x_time=$(calc "($e-$s)/1000000000" 2)
p_note="GNU parallel not installed"
if command -v parallel >/dev/null 2>&1; then
    s=$(date +%s%N)
    p_done=$(seq 1 "$N_LIMITED" | API=$API KEY=good parallel -j 8 --retries 3 './caller.sh </dev/null && echo ok' 2>/dev/null | grep -c ok || true)
    e=$(date +%s%N)
    p_note="GNU parallel -j 8 --retries 3: $p_done of $N_LIMITED in $(calc "($e-$s)/1000000000" 2)s"
fi
note "rate limits: $N_LIMITED items, API serving 2 at once: runner -j 8 completed $rl_done of $N_LIMITED in ${rl_time}s (bound ${rl_ideal}s, $rl_429 × 429); Python agent $rlpy_done in ${rlpy_time}s (bound ${rlpy_ideal}s, $rlpy_429 × 429); $rl_fleet_note; xargs -P 8: $x_done of $N_LIMITED in ${x_time}s; $p_note"
rows "$N_BADKEY" badkey.csv
rm -rf badkey-out.csv badkey-out.runner
before=$(count)
s=$(date +%s%N)
API=$API KEY=wrong "$RUNNER" batch --input badkey.csv --instruction instr.md --output badkey-out.csv \
    --jobs 8 --format plain -- ./caller.sh > badkey.log 2>&1 || true
e=$(date +%s%N)
bk_time=$(calc "($e-$s)/1000000000" 2)
bk_attempts=$(( $(count) - before ))
note "bad key: $N_BADKEY items -j 8: $bk_attempts attempts started, ${bk_time}s"
# A broken set-up (issue 32): the agent's script is not there; 60 rows, --retries 2 (180
# attempts if every row tried all of them).
rows 60 setup.csv
rm -rf setup-out.csv setup-out.runner
s=$(date +%s%N)
"$RUNNER" batch --input setup.csv --instruction instr.md --output setup-out.csv --jobs 8 \
    --retries 2 --format plain -- sh ./no-such-agent.sh > setup.log 2>&1 || true
e=$(date +%s%N)
su_time=$(calc "($e-$s)/1000000000" 2)
su_ws=$(grep -o 'workspace [^;]*' setup.log | head -n 1 | cut -d' ' -f2-)
su_attempts=$(grep -c '"attempt_started"' "${su_ws:-setup-out.runner}/journal.jsonl" || true)
note "broken set-up: 60 items -j 8 --retries 2: $su_attempts attempts started, ${su_time}s"
kill "$api_pid" 2>/dev/null || true
test "$rl_done" = "$N_LIMITED" || { echo "rate-limit run did not complete every row" >&2; exit 1; }
test "$rlpy_done" = "$N_LIMITED" || { echo "rate-limit run (Python agent) did not complete every row" >&2; exit 1; }
}
if [ "${BENCH_ONLY:-}" = ratelimit ]; then
    ratelimit_section
    exit 0
fi

# 1. Overhead --------------------------------------------------------------------------
rows "$N_OVERHEAD" over.csv
tail -n +2 over.csv > over.txt
# Each timed runner run writes into a folder of its own (runs/<n>/): deleting the previous
# run's ~8,000 files just before it would time ext4's inode allocator instead, which avoids
# reusing inode numbers freed in the last minutes; the "after deleting" row measures that.
rm -rf runs && mkdir runs
run_runner="$RUNNER batch --input over.csv --instruction instr.md --id-column id --output \$(mktemp -d -p runs)/out.csv --jobs 8 --format plain -- ./agent > /dev/null"
run_xargs="xargs -P 8 -n 1 ./agent < over.txt"
prep_parallel="rm -f joblog"
run_parallel="parallel --will-cite -j 8 --joblog joblog ./agent {} < over.txt"
prep_again="rm -rf again.csv again.runner"
run_again="$RUNNER batch --input over.csv --instruction instr.md --id-column id --output again.csv --jobs 8 --format plain -- ./agent > /dev/null"
printf '%s\n' "$run_runner" > run-runner.sh
printf '%s\n' "$run_xargs" > run-xargs.sh
printf '%s\n' "$run_parallel" > run-parallel.sh
printf '%s\n' "$run_again" > run-again.sh
if [ $HAVE_TOOLS = 1 ]; then
    # Every timed run starts with the previous run's files written back (sync), so that one
    # tool's write-back does not land in another's time.
    hyperfine -N --style none --runs "$RUNS" --warmup 1 --prepare sync --export-json h-runner.json "bash run-runner.sh" >/dev/null
    hyperfine -N --style none --runs "$RUNS" --warmup 1 --prepare sync --export-json h-xargs.json "bash run-xargs.sh" >/dev/null
    hyperfine -N --style none --runs "$RUNS" --warmup 1 --prepare "bash -c '$prep_parallel && sync'" --export-json h-parallel.json "bash run-parallel.sh" >/dev/null
    hyperfine -N --style none --runs "$RUNS" --warmup 1 --prepare "bash -c '$prep_again && sync'" --export-json h-again.json "bash run-again.sh" >/dev/null
    read -r r_med r_min r_max < <(stats h-runner.json)
    read -r x_med x_min x_max < <(stats h-xargs.json)
    read -r p_med p_min p_max < <(stats h-parallel.json)
    read -r a_med a_min a_max < <(stats h-again.json)
else
    r_med=$(once bash run-runner.sh); r_min=$r_med; r_max=$r_med
    x_med=$(once bash run-xargs.sh); x_min=$x_med; x_max=$x_med
    p_med=$x_med; p_min=$x_med; p_max=$x_med
    a_med=$r_med; a_min=$r_med; a_max=$r_med
fi
for out in runs/*/out.csv $([ $HAVE_TOOLS = 1 ] && echo again.csv); do
    test "$(grep -c ',completed,' "$out")" = "$N_OVERHEAD" || { echo "overhead run $out did not complete every row" >&2; exit 1; }
done
ratio_x=$(calc "$r_med / $x_med" 2)
ratio_p=$(calc "$p_med / $r_med" 2)
ratio_a=$(calc "$a_med / $x_med" 2)
note "overhead $N_OVERHEAD rows -j8: runner ${r_med}s (${r_min}-${r_max}), xargs ${x_med}s (${x_min}-${x_max}), parallel ${p_med}s (${p_min}-${p_max}); runner/xargs ${ratio_x}x, parallel/runner ${ratio_p}x; runner after deleting the previous workspace ${a_med}s (${a_min}-${a_max})"

# 2. Makespan --------------------------------------------------------------------------
rows "$N_MAKESPAN" span.csv
cat > sleeper.sh <<SLEEPER
#!/bin/sh
cat > /dev/null
sleep $SLEEP
printf '{"status":"completed","summary":"ok"}' > "\$RUNNER_REPORT"
SLEEPER
chmod +x sleeper.sh
prep_span="rm -rf span-out.csv span-out.runner"
run_span="$RUNNER batch --input span.csv --instruction instr.md --output span-out.csv --jobs 8 --format plain -- ./sleeper.sh > /dev/null"
if [ $HAVE_TOOLS = 1 ]; then
    hyperfine -N --style none --runs 3 --prepare "$prep_span" --export-json h-span.json "bash -c \"$run_span\"" >/dev/null
    read -r s_med s_min s_max < <(stats h-span.json)
else
    s_med=$(once bash -c "$prep_span; $run_span"); s_min=$s_med; s_max=$s_med
fi
test "$(grep -c ',completed,' span-out.csv)" = "$N_MAKESPAN" || { echo "makespan run did not complete every row" >&2; exit 1; }
ideal=$(calc "$N_MAKESPAN / 8 * $SLEEP" 2)
note "makespan $N_MAKESPAN x ${SLEEP}s sleep -j8: ${s_med}s (${s_min}-${s_max}); ideal ${ideal}s"

# 3. Memory ----------------------------------------------------------------------------
rows "$N_MEMORY" big.csv
m_dry=$(rss "$RUNNER" batch --input big.csv --instruction instr.md --id-column id --output big-out.csv --dry-run -- ./agent)
rm -rf big-out.csv big-out.runner
m_full=$(rss "$RUNNER" batch --input big.csv --instruction instr.md --id-column id --output big-out.csv --jobs 8 --format plain -- ./agent)
test "$(grep -c ',completed,' big-out.csv)" = "$N_MEMORY" || { echo "memory run did not complete every row" >&2; exit 1; }
printf 'id\n1\n' > one.csv
cat > flood.sh <<FLOOD
#!/bin/sh
cat > /dev/null
head -c $((FLOOD_MB * 1024 * 1024)) /dev/zero
printf '{"status":"completed","summary":"flooded"}' > "\$RUNNER_REPORT"
FLOOD
chmod +x flood.sh
rm -rf flood-out.csv flood-out.runner
m_flood=$(rss "$RUNNER" batch --input one.csv --instruction instr.md --output flood-out.csv --format plain -- ./flood.sh)
grep -q ',completed,' flood-out.csv || { echo "flood run did not complete" >&2; exit 1; }
note "memory: --dry-run over $N_MEMORY rows ${m_dry} MiB; full run over $N_MEMORY rows ${m_full} MiB; agent writing ${FLOOD_MB} MiB to stdout ${m_flood} MiB"
# Hostile inputs: refused (exit 2) without holding them.
awk -v n="$HOSTILE_COLS" 'BEGIN { for (i = 0; i < n; i++) printf "%sc%d", (i ? "," : ""), i; print "" }' > wide.csv
{ printf 'id,v\n1,"'; head -c $((HOSTILE_CELL_MB * 1024 * 1024)) /dev/zero | tr '\0' x; printf '"\n'; } > cell.csv
m_wide=$(rss "$RUNNER" batch --input wide.csv --instruction instr.md --output wide-out.csv -- ./agent || true)
m_cell=$(rss "$RUNNER" batch --input cell.csv --instruction instr.md --output cell-out.csv -- ./agent || true)
test ! -e wide-out.csv && test ! -e cell-out.csv || { echo "a hostile input was run" >&2; exit 1; }
rm -f wide.csv cell.csv
note "memory: refusing $HOSTILE_COLS columns ${m_wide} MiB; refusing a ${HOSTILE_CELL_MB} MiB cell ${m_cell} MiB"

# 4. Start-up --------------------------------------------------------------------------
mkdir -p empty-store
if [ $HAVE_TOOLS = 1 ]; then
    hyperfine -N --style none --runs 30 --warmup 3 --export-json h-version.json "$RUNNER --version" >/dev/null
    hyperfine -N --style none --runs 30 --warmup 3 --export-json h-list.json "$RUNNER list --store empty-store" >/dev/null
    read -r v_med v_min v_max < <(stats h-version.json)
    read -r l_med l_min l_max < <(stats h-list.json)
else
    v_med=$(once "$RUNNER" --version); v_min=$v_med; v_max=$v_med
    l_med=$(once "$RUNNER" list --store empty-store); l_min=$l_med; l_max=$l_med
fi
note "start-up: --version ${v_med}s (${v_min}-${v_max}); list on an empty store ${l_med}s (${l_min}-${l_max})"

# 5. Rate limits (ratelimit_section, above) -------------------------------------------
ratelimit_section

# 6. HTTP backend -----------------------------------------------------------------------
python3 "$ROOT/examples/audit/model_standin.py" --answer fixed > standin.out &
standin_pid=$!
for _ in $(seq 50); do [ -s standin.out ] && break; sleep 0.1; done
BASE=$(awk '{print $2}' standin.out)
rows "$N_HTTP" http.csv
tail -n +2 http.csv > http.txt
rm -rf http-out.csv http-out.runner
run_http="OPENAI_BASE_URL=$BASE $RUNNER batch --input http.csv --instruction instr.md --id-column id --output http-out.csv --runner openai --model standin --jobs 8 --format plain"
s=$(date +%s%N)
m_http=$(OPENAI_BASE_URL=$BASE rss "$RUNNER" batch --input http.csv --instruction instr.md --id-column id \
    --output http-out.csv --runner openai --model standin --jobs 8 --format plain)
e=$(date +%s%N)
h_time=$(calc "($e-$s)/1000000000" 3)
h_done=$(grep -c ',completed,' http-out.csv || true)
run_curl="xargs -P 8 -I{} curl -s -o /dev/null -H 'Content-Type: application/json' -d '{\"model\":\"standin\",\"messages\":[{\"role\":\"user\",\"content\":\"Item {}.\"}]}' $BASE/chat/completions < http.txt"
s=$(date +%s%N)
bash -c "$run_curl"
e=$(date +%s%N)
c_time=$(calc "($e-$s)/1000000000" 3)
# 6b. The Batch API: every row in one job (upload, create, poll, download) against the same
# stand-in, whose job is done at once: the time is the runner's own around it.
rows "$N_BATCH_API" bapi.csv
rm -rf bapi-out.csv bapi-out.runner
run_bapi="OPENAI_BASE_URL=$BASE $RUNNER batch --input bapi.csv --instruction instr.md --id-column id --output bapi-out.csv --runner openai --model standin --batch-api --var poll_max_s=0.5 --format plain"
s=$(date +%s%N)
m_bapi=$(OPENAI_BASE_URL=$BASE rss "$RUNNER" batch --input bapi.csv --instruction instr.md --id-column id \
    --output bapi-out.csv --runner openai --model standin --batch-api --var poll_max_s=0.5 --format plain)
e=$(date +%s%N)
b_time=$(calc "($e-$s)/1000000000" 3)
b_done=$(grep -c ',completed,' bapi-out.csv || true)
note "batch api: $N_BATCH_API rows in one job: $b_done completed in ${b_time}s (${m_bapi} MiB peak RSS)"
test "$b_done" = "$N_BATCH_API" || { echo "Batch API run did not complete every row" >&2; exit 1; }
kill "$standin_pid" 2>/dev/null || true
h_ratio=$(calc "$c_time / $h_time" 2)
note "http backend: $N_HTTP rows -j 8: runner $h_done completed in ${h_time}s (${m_http} MiB peak RSS); xargs -P 8 curl ${c_time}s; xargs+curl/runner ${h_ratio}x"
test "$h_done" = "$N_HTTP" || { echo "HTTP run did not complete every row" >&2; exit 1; }

# 7. The output kept current at 20,000 rows ----------------------------------------------
# A live rewrite reads every row, so its cost grows with the batch: it is throttled to a
# tenth of the run (sink/live.rs); this measures what is left of it against xargs.
rows "$N_LIVE" live.csv
tail -n +2 live.csv > live.txt
rm -rf live-runs && mkdir live-runs
run_live="$RUNNER batch --input live.csv --instruction instr.md --id-column id --output \$(mktemp -d -p live-runs)/out.csv --jobs 8 --format plain -- ./agent > /dev/null"
printf '%s\n' "$run_live" > run-live.sh
printf '%s\n' "xargs -P 8 -n 1 ./agent < live.txt" > run-live-xargs.sh
if [ $HAVE_TOOLS = 1 ]; then
    hyperfine -N --style none --runs 3 --prepare sync --export-json h-live.json "bash run-live.sh" >/dev/null
    hyperfine -N --style none --runs 3 --prepare sync --export-json h-live-xargs.json "bash run-live-xargs.sh" >/dev/null
    read -r lv_med lv_min lv_max < <(stats h-live.json)
    read -r lx_med lx_min lx_max < <(stats h-live-xargs.json)
else
    lv_med=$(once bash run-live.sh); lv_min=$lv_med; lv_max=$lv_med
    lx_med=$(once bash run-live-xargs.sh); lx_min=$lx_med; lx_max=$lx_med
fi
for out in live-runs/*/out.csv; do
    test "$(grep -c ',completed,' "$out")" = "$N_LIVE" || { echo "live run $out did not complete every row" >&2; exit 1; }
done
ratio_live=$(calc "$lv_med / $lx_med" 2)
note "live output: $N_LIVE rows -j8: runner ${lv_med}s (${lv_min}-${lv_max}), xargs ${lx_med}s (${lx_min}-${lx_max}); runner/xargs ${ratio_live}x"

# 8. The sandbox's cost per attempt --------------------------------------------------------
sandbox_section
if [ $SMOKE = 0 ]; then queue_section; fi

# 9. What a completed item leaves, and its CPU against xargs, paired ----------------------
# $PAIRS runs of the runner and of xargs -P 8 over the overhead rows, alternating; each
# pair's ratio of user+sys CPU of the whole process tree (/usr/bin/time counts every child
# waited for). After each runner run: `du -sk` of its output folder (the output CSV and the
# workspace) and every entry in it, over the rows. Beside each pair, the layout's floors
# over the same rows: scripts/layout-floor.c (one thread, no runtime: what the layout costs
# any tool that keeps it) and examples/layout_floor.rs (the same on tokio).
cpu_of() { /usr/bin/time -f '%U %S' "$@" 2>&1 >/dev/null | tail -n 1 | awk '{printf "%.3f", $1 + $2}'; }
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# "median min max" of the values on stdin, one a line.
spread() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)], v[1], v[NR]}'; }
rm -rf cmp && mkdir cmp
pair_ratios=(); kb_items=(); entries_items=(); floor_ratios=(); tokio_ratios=()
for _ in $(seq "$PAIRS"); do
    dir=$(mktemp -d -p cmp)
    sync
    rc=$(cpu_of "$RUNNER" batch --input over.csv --instruction instr.md --id-column id --output "$dir/out.csv" --jobs 8 --format plain -- ./agent)
    test "$(grep -c ',completed,' "$dir/out.csv")" = "$N_OVERHEAD" || { echo "compaction run did not complete every row" >&2; exit 1; }
    sync
    xc=$(cpu_of sh -c 'xargs -P 8 -n 1 ./agent < over.txt')
    pair_ratios+=("$(calc "$rc / $xc" 3)")
    if [ -x layout-floor ]; then
        sync
        fc=$(cpu_of ./layout-floor "$N_OVERHEAD" "$dir/floor" ./agent)
        test "$(wc -l < "$dir/floor/completed.jsonl")" = "$N_OVERHEAD" || { echo "the layout floor did not record every row" >&2; exit 1; }
        floor_ratios+=("$(calc "$fc / $xc" 3)")
        rm -rf "$dir/floor"
    fi
    if [ -n "$TOKIO_FLOOR" ]; then
        sync
        tc=$(cpu_of "$TOKIO_FLOOR" "$N_OVERHEAD" "$dir/floor" ./agent)
        test "$(wc -l < "$dir/floor/completed.jsonl")" = "$N_OVERHEAD" || { echo "the tokio floor did not record every row" >&2; exit 1; }
        tokio_ratios+=("$(calc "$tc / $xc" 3)")
        rm -rf "$dir/floor"
    fi
    kb_items+=("$(calc "$(du -sk "$dir" | cut -f1) / $N_OVERHEAD" 2)")
    entries_items+=("$(calc "$(find "$dir" -mindepth 1 | wc -l) / $N_OVERHEAD" 3)")
done
read -r cpu_ratio cpu_lo cpu_hi < <(printf '%s\n' "${pair_ratios[@]}" | spread)
if [ ${#floor_ratios[@]} -gt 0 ]; then
    read -r floor_ratio floor_lo floor_hi < <(printf '%s\n' "${floor_ratios[@]}" | spread)
    floor_note="; the layout's floor/xargs ${floor_ratio}x (${floor_lo}-${floor_hi})"
else
    floor_ratio=-; floor_lo=-; floor_hi=-; floor_note="; no C compiler for the layout's floor"
fi
if [ ${#tokio_ratios[@]} -gt 0 ]; then
    read -r tokio_ratio tokio_lo tokio_hi < <(printf '%s\n' "${tokio_ratios[@]}" | spread)
    floor_note="$floor_note; on tokio ${tokio_ratio}x (${tokio_lo}-${tokio_hi})"
else
    tokio_ratio=-; tokio_lo=-; tokio_hi=-
fi
kb_item=$(printf '%s\n' "${kb_items[@]}" | median)
entries_item=$(printf '%s\n' "${entries_items[@]}" | median)
note "completed items: $N_OVERHEAD rows leave ${kb_item} KB and ${entries_item} entries per item; CPU runner/xargs ${cpu_ratio}x (${cpu_lo}-${cpu_hi}, $PAIRS pairs)${floor_note}"

# 10. A million rows (BENCH_MILLION=1; about 15 minutes and 4.5 GB of disk here) -----------
# Peak RSS of the full run, then the resume of the completed run (nothing left to do: the
# team opens from its ledger.bin, and the output it left is current) and `runner status`
# on it, wall seconds.
if [ "${BENCH_MILLION:-0}" = 1 ] && [ $SMOKE = 0 ]; then
    rows 1000000 million.csv
    rm -rf million-out.csv million-out.runner
    sync
    mm_rss=$(rss "$RUNNER" batch --input million.csv --instruction instr.md --id-column id --output million-out.csv --jobs 8 --format plain -- ./agent)
    test "$(grep -c ',completed,' million-out.csv)" = 1000000 || { echo "the million-row run did not complete every row" >&2; exit 1; }
    sync
    mm_resume=$(once "$RUNNER" batch --input million.csv --instruction instr.md --id-column id --output million-out.csv --jobs 8 --format plain -- ./agent)
    mm_status=$(once "$RUNNER" status million-out.runner)
    note "a million rows: full run ${mm_rss} MiB; resume of the completed run ${mm_resume}s; status ${mm_status}s"
    rm -rf million-out.csv million-out.runner million.csv
else
    mm_rss=-; mm_resume=-; mm_status=-
fi

# 11. Stages: N rows of three stages against 3N rows of one --------------------------------
# The same trivial agent, -j 8; each stage reads the one before it ({a.summary}). Medians
# of 3 alternating runs, wall seconds; a staged run must complete every row.
N_STAGES=$(( SMOKE == 1 ? 6 : 1000 ))
rows "$N_STAGES" stages.csv
rows $((3 * N_STAGES)) flat.csv
cat > STAGES.md <<'STAGES'
---
input: stages.csv
id_column: id
runner: exec
command: [./agent]
stages:
  - name: a
    instruction: "Item {id}, stage a."
  - name: b
    instruction: "Item {id} after {a.summary}."
  - name: c
    instruction: "Item {id} after {b.status}."
---
STAGES
st_runs=(); fl_runs=()
for _ in 1 2 3; do
    rm -rf st-out.csv st-out.runner fl-out.csv fl-out.runner
    sync
    st_runs+=("$(once "$RUNNER" batch STAGES.md --output st-out.csv --jobs 8 --format plain)")
    test "$(grep -c '^[0-9]*,completed,' st-out.csv)" = "$N_STAGES" || { echo "the staged run did not complete every row" >&2; exit 1; }
    sync
    fl_runs+=("$(once "$RUNNER" batch --input flat.csv --instruction instr.md --id-column id --output fl-out.csv --jobs 8 --format plain -- ./agent)")
done
st_time=$(printf '%s\n' "${st_runs[@]}" | median)
fl_time=$(printf '%s\n' "${fl_runs[@]}" | median)
st_ratio=$(calc "$st_time / $fl_time" 2)
note "stages: $N_STAGES rows x 3 stages ${st_time}s; $((3 * N_STAGES)) rows of one ${fl_time}s (${st_ratio}x)"
rm -rf st-out.csv st-out.runner fl-out.csv fl-out.runner

# 11. The live page ----------------------------------------------------------------------
mkdir -p live-page && rm -rf live-page/*
live_out=$(python3 "$ROOT/scripts/live_page_bench.py" "$RUNNER" "$PWD/live-page" "$N_PAGE" "$PAGE_RATE" "$PAGE_SECS")
lp() { printf '%s\n' "$live_out" | sed -n "s/^$1=//p"; }
lp_start=$(lp start_s); lp_load=$(lp load_s); lp_item=$(lp item_s); lp_eps=$(lp events_per_s); lp_behind=$(lp behind_s); lp_missed=$(lp missed)
note "live page: $N_PAGE items served in ${lp_start}s, first load ${lp_load}s, an item's panel ${lp_item}s; $PAGE_RATE events/s: ${lp_eps}/s received, ${lp_behind}s behind, $lp_missed missed"
rm -rf live-page

[ $SMOKE = 1 ] && { echo "smoke run ok"; exit 0; }

# BENCHMARKS.md ----------------------------------------------------------------------------
notes=""
if [ -f "$ROOT/BENCHMARKS.md" ]; then
    notes=$(sed -n '/^<!-- notes: kept by scripts\/bench.sh -->$/,$p' "$ROOT/BENCHMARKS.md")
fi
verdict() { if awk "BEGIN { exit !($1) }"; then echo met; else echo MISSED; fi; }
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
cat > "$ROOT/BENCHMARKS.md" <<MD
# Benchmarks

Measured by \`scripts/bench.sh\` on $(date -u +%Y-%m-%d) — $(nproc) cores ($cpu),
$(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr), runner $("$RUNNER" --version | cut -d' ' -f2) (commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)),
hyperfine $(hyperfine --version | cut -d' ' -f2), GNU parallel $(parallel --version | head -1 | awk '{print $3}').
Times are medians of $RUNS runs (min–max); memory is peak RSS from \`/usr/bin/time -v\`.
The runs write to $FS.
The runner's numbers include everything it writes: per-item folder, report and record,
the journal, team.json, and the output CSV.

## Targets

| what | measured | target | |
|---|---|---|---|
| overhead: $N_OVERHEAD rows, trivial agent, -j 8 | runner ${r_med}s (${r_min}–${r_max}); xargs -P 8 ${x_med}s (${x_min}–${x_max}); GNU parallel --joblog ${p_med}s (${p_min}–${p_max}) | runner ≤ 1.5× xargs: **${ratio_x}×**; ≥ 3× faster than parallel: **${ratio_p}×** | $(verdict "$ratio_x <= 1.5") / $(verdict "$ratio_p >= 3") |
| the same, right after deleting the previous run's workspace | runner ${a_med}s (${a_min}–${a_max}) | ≤ 1.5× xargs: **${ratio_a}×** (see the notes) | $(verdict "$ratio_a <= 1.5") |
| what a completed item leaves: $N_OVERHEAD rows, trivial agent (\`du -sk\` and every entry of the output folder, over the rows) | ${kb_item} KB and ${entries_item} entries per item (median of $PAIRS runs) | ≤ 4 KB and ≤ 1.5 entries | $(verdict "$kb_item <= 4 && $entries_item <= 1.5") |
| CPU: the same rows, runner against xargs -P 8, user+sys of the whole process tree, paired | runner/xargs **${cpu_ratio}×** (${cpu_lo}–${cpu_hi}, median of $PAIRS pairs) | ≤ 1.12× | $(verdict "$cpu_ratio <= 1.12") |
| the layout's floor: the same rows through \`scripts/layout-floor.c\` (one thread, no runtime: the folders, skeleton, pipes, report, journal and record lines the layout asks for, nothing else), paired with the same xargs runs | floor/xargs **${floor_ratio}×** (${floor_lo}–${floor_hi}); the same on tokio (\`examples/layout_floor.rs\`, the multi-threaded runtime the runner is built on) **${tokio_ratio}×** (${tokio_lo}–${tokio_hi}) | — (what the layout costs any tool that keeps it) | |
| a million rows (\`BENCH_MILLION=1\`): full run / resume of the completed run / \`runner status\` | ${mm_rss} MiB / ${mm_resume}s / ${mm_status}s | ≤ 64 MiB / ≤ 5 s / ≤ 0.5 s | $( [ "$mm_rss" = - ] && echo "not run" || echo "$(verdict "$mm_rss <= 64") / $(verdict "$mm_resume <= 5") / $(verdict "$mm_status <= 0.5")") |
| makespan: $N_MAKESPAN × ${SLEEP} s sleep, -j 8 | ${s_med}s (${s_min}–${s_max}) | ≤ 4.3 s (ideal ${ideal} s) | $(verdict "$s_med <= 4.3") |
| many machines: 60 items of 0.2–2 s, 4 workers × 2 slots, one 1.5× slower, makespan over the lower bound (${q_lb:-–} s) | static shards ${q_ts:-–}s, queue ${q_tq:-–}s, queue longest-first ${q_tl:-–}s | queue ≤ 1.2×: **${q_queue}×**; longest-first ≤ 1.08×: **${q_lf}×** (shards **${q_static}×**) | $(verdict "$q_queue <= 1.2") / $(verdict "$q_lf <= 1.08") |
| memory: --dry-run, $N_MEMORY rows | ${m_dry} MiB | ≤ 64 MiB | $(verdict "$m_dry <= 64") |
| memory: full run, $N_MEMORY rows, trivial agent | ${m_full} MiB | ≤ 64 MiB | $(verdict "$m_full <= 64") |
| memory: agent writing ${FLOOD_MB} MiB to stdout | ${m_flood} MiB | ≤ 32 MiB | $(verdict "$m_flood <= 32") |
| memory: refusing a header of $HOSTILE_COLS columns (exit 2) | ${m_wide} MiB (776 MiB before the bounds) | ≤ 96 MiB | $(verdict "$m_wide <= 96") |
| memory: refusing a ${HOSTILE_CELL_MB} MiB cell (exit 2) | ${m_cell} MiB (338 MiB before the bounds) | ≤ 96 MiB | $(verdict "$m_cell <= 96") |
| start-up: \`runner --version\` | ${v_med}s (${v_min}–${v_max}) | — | |
| start-up: \`runner list\` on an empty store | ${l_med}s (${l_min}–${l_max}) | — | |
| rate limits: $N_LIMITED items, an API serving 2 at once (429 + Retry-After: 1 above), 0.5 s each, -j 8; the bound is $N_LIMITED × the API's measured service time / 2 | sh + curl agent: $rl_done of $N_LIMITED in ${rl_time}s (bound ${rl_ideal}s, $rl_429 × 429); Python agent (~0.15 s start-up): $rlpy_done in ${rlpy_time}s (bound ${rlpy_ideal}s, $rlpy_429 × 429); xargs -P 8: $x_done of $N_LIMITED in ${x_time}s; $p_note | all complete, ≤ 1.15 × the bound in both shapes: **$(calc "$rl_time / $rl_ideal" 2)×** and **$(calc "$rlpy_time / $rlpy_ideal" 2)×** | $(verdict "$rl_done == $N_LIMITED && $rlpy_done == $N_LIMITED && $rl_time <= 1.15 * $rl_ideal && $rlpy_time <= 1.15 * $rlpy_ideal") |
| rate limits across a fleet: the same $N_LIMITED items on 3 workers (--queue, a local redis-server, -j 8 each, the sh agent) sharing the one API | $rl_fleet_note | all complete, ≤ 1.15 × the bound | $(verdict "\"$rlq_done\" == \"$N_LIMITED\" && $rlq_time <= 1.15 * $rlq_ideal") |
| bad key: $N_BADKEY items, -j 8 | $bk_attempts attempts, ${bk_time}s | ≤ 9 attempts, < 3 s | $(verdict "$bk_attempts <= 9 && $bk_time < 3") |
| broken set-up: 60 items, the agent's script missing, -j 8 --retries 2 | $su_attempts attempts, ${su_time}s | ≤ 11 attempts (8 + 3), < 3 s | $(verdict "$su_attempts <= 11 && $su_time < 3") |
| HTTP backend: $N_HTTP rows, one request each, a local stand-in answering at once, -j 8 | runner (\`--runner openai\`, every log, journal and output CSV): $h_done of $N_HTTP in ${h_time}s; \`xargs -P 8 curl\` (nothing kept): ${c_time}s | ≥ 2× faster than xargs + curl: **${h_ratio}×** | $(verdict "$h_done == $N_HTTP && $h_ratio >= 2") |
| memory: the HTTP run | ${m_http} MiB | < 64 MiB | $(verdict "$m_http < 64") |
| Batch API (\`--batch-api\`): $N_BATCH_API rows in one job, a stand-in whose job is done at once | $b_done of $N_BATCH_API in ${b_time}s: the runner's own time around the job (prompts, one upload, polls, one download, every log, journal and output CSV) | < 60 s | $(verdict "$b_done == $N_BATCH_API && $b_time < 60") |
| memory: the Batch API run | ${m_bapi} MiB | < 256 MiB | $(verdict "$m_bapi < 256") |
| the sandbox: $N_SANDBOX rows, trivial agent, -j 8 | none ${sn_wall}s wall, ${sn_cpu}s CPU; landlock ${sl_wall}s wall, ${sl_cpu}s CPU | per attempt ≤ 2 ms of a slot and ≤ 1 ms CPU: **+${sb_wall_ms} ms**, **+${sb_cpu_ms} ms** | $( [ "$sb_wall_ms" = - ] && echo "not run" || echo "$(verdict "$sb_wall_ms <= 2") / $(verdict "$sb_cpu_ms <= 1")") |
| overhead under the sandbox: $N_OVERHEAD rows, trivial agent, -j 8, \`--sandbox landlock\`, the output outside the working directory | runner ${so_med}s (${so_min}–${so_max}); xargs -P 8 ${sx_med}s (${sx_min}–${sx_max}) | runner ≤ 1.5× xargs: **${ratio_sb}×** | $( [ "$ratio_sb" = - ] && echo "not run" || verdict "$ratio_sb <= 1.5") |
| stages: $N_STAGES rows × 3 stages (each reading the one before) against $((3 * N_STAGES)) rows of one, trivial agent, -j 8 | staged ${st_time}s; flat ${fl_time}s (medians of 3) | ≤ 1.1× the flat run: **${st_ratio}×** | $(verdict "$st_ratio <= 1.1") |
| the live page (\`runner serve\`): a $N_PAGE-item team, the journal read, then the first load (HTML, banner, first 100 rows), and an item's panel | served in ${lp_start}s; first load ${lp_load}s; an item's panel ${lp_item}s | first load < 2 s | $(verdict "$lp_load < 2") |
| the live page's event stream: $PAGE_RATE journal events a second for $PAGE_SECS s | ${lp_eps} events/s received, the last ${lp_behind}s after it was written, $lp_missed missed | ≥ 200/s, < 1 s behind, none missed | $(verdict "$lp_eps >= 0.95 * $PAGE_RATE && $lp_behind < 1 && $lp_missed == 0") |
| overhead with the output kept current: $N_LIVE rows, trivial agent, -j 8 | runner ${lv_med}s (${lv_min}–${lv_max}); xargs -P 8 ${lx_med}s (${lx_min}–${lx_max}) | runner ≤ 1.5× xargs: **${ratio_live}×** | $(verdict "$ratio_live <= 1.5") |

## Commands

- runner: \`$run_runner\` (a new output folder per run)
- runner after deleting: \`$run_again\`, prepared with \`$prep_again\`
- xargs: \`$run_xargs\`
- GNU parallel: \`$run_parallel\`
- the layout's floors (section 9): \`./layout-floor $N_OVERHEAD DIR ./agent\` (\`cc -O2\` of \`scripts/layout-floor.c\`) and \`target/release/examples/layout_floor $N_OVERHEAD DIR ./agent\` (add \`current\` for the current-thread runtime)
- makespan: \`$run_span\` (sleeper.sh: sleep $SLEEP, then write the report) over $N_MAKESPAN rows
- HTTP backend: \`$run_http\` (stand-in: \`examples/audit/model_standin.py --answer fixed\`, one
  Python process, HTTP/1.1 keep-alive); against \`$run_curl\`
- memory: \`/usr/bin/time -v runner batch ... --dry-run\` and a full run over a $N_MEMORY-row CSV;
  an agent running \`head -c ${FLOOD_MB}MiB /dev/zero\`

Every timed run is prepared with \`sync\`. The agent is $AGENT_KIND: it reads its input to
EOF and writes the report to \`\$RUNNER_REPORT\` (xargs and parallel start the same program
once per item, with the item as its argument; there the report goes to /dev/null). The
runner gives it the prompt on stdin from memory and holds its stdout in memory, makes per
item a teammate folder with its `work/` and working context (the agent writes its report
there), writes three journal events, and reads the report back; a completed item's folder
is then compacted into one line of \`completed.jsonl\` and removed. CI does not run this script; \`tests/bench_smoke.rs\` runs
it with \`--smoke\` (tiny sizes, no targets) so it cannot rot.
MD
# Hand-written notes below the marker are kept from the previous BENCHMARKS.md.
if [ -n "$notes" ]; then
    printf '\n%s\n' "$notes" >> "$ROOT/BENCHMARKS.md"
fi
echo "wrote $ROOT/BENCHMARKS.md"
