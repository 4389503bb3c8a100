#!/usr/bin/env python3
"""A stand-in for an OpenAI-compatible model server, on 127.0.0.1, for the HTTP variant of
the bundled example (`examples/audit/BATCH-http.md`, runner `openai`) and the benchmark.

It serves `POST /v1/chat/completions` as the OpenAI API reference gives it (a
`chat.completion` object with `choices[0].message.content`, `finish_reason`, `usage`), with
HTTP/1.1 keep-alive, and the Batch API's `POST /v1/files`, `POST /v1/batches`,
`GET /v1/batches/{id}` and the output file's content, each job done at once (`--batch-api`). It plays the model, from the prompt alone — like a model, it never reads
the disk: for a prompt that holds a markdown file's text between `<<<FILE` and `FILE>>>` lines
(the runner inlines it with `{file:path}`; `--answer audit`, the default) it answers with what
`audit_agent.py` tells from that text; with `--answer fixed` it answers every request at once
with a fixed completed report. No model and no key are involved.

    python3 examples/audit/model_standin.py -- runner batch examples/audit/BATCH-http.md

starts the stand-in on a free port, runs the command with OPENAI_BASE_URL pointing at it,
stops the stand-in and exits with the command's exit code. Without a command it serves until
interrupted (`--port N`, default a free one; it prints its base URL).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from audit_agent import read_text  # noqa: E402

NAME = re.compile(r"markdown file `([^`]+)`")
TEXT = re.compile(r"^<<<FILE\n(.*?)\n?FILE>>>$", re.S | re.M)
FIXED = json.dumps(
    {"status": "completed", "summary": "checked", "blocker": None, "output": {"ok": True}}
)


def answer_for(prompt, mode):
    """The report the stand-in "model" answers with, as JSON text."""
    if mode == "fixed":
        return FIXED
    name, text = NAME.search(prompt), TEXT.search(prompt)
    if not (name and text):
        return json.dumps(
            {"status": "failed", "summary": "the prompt holds no markdown file's text",
             "blocker": None, "output": {}}
        )
    findings = read_text(text.group(1))
    problems = [p for p, bad in (("no title", not findings["has_title"]),
                                 ("frontmatter " + findings["frontmatter"],
                                  findings["frontmatter"] in ("invalid", "unclosed"))) if bad]
    return json.dumps(
        {"status": "completed",
         "summary": f"{name.group(1)}: {len(findings['relative_links'])} relative link(s), "
                    + ("; ".join(problems) or "no problems"),
         "blocker": None, "output": findings}
    )


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes: without TCP_NODELAY the body waits for the
    # client's delayed ACK (about 40 ms) on every kept-alive connection.
    disable_nagle_algorithm = True
    mode = "audit"
    calls = 0
    files = {}
    jobs = {}

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        # The Batch API: a job is done at once; its output file answers every line.
        path = self.path.rstrip("/")
        if path.startswith("/v1/batches/"):
            job = Handler.jobs.get(path.rsplit("/", 1)[1])
            if job is None:
                self.reply(404, {"error": {"message": "no such batch", "type": "not_found"}})
                return
            n = len(job["lines"])
            self.reply(200, {"id": job["id"], "object": "batch", "status": "completed",
                             "endpoint": "/v1/chat/completions",
                             "input_file_id": job["input_file_id"],
                             "output_file_id": "out-" + job["id"], "error_file_id": None,
                             "request_counts": {"total": n, "completed": n, "failed": 0}})
            return
        if path.startswith("/v1/files/out-") and path.endswith("/content"):
            job = Handler.jobs.get(path[len("/v1/files/out-"):-len("/content")])
            if job is None:
                self.reply(404, {"error": {"message": "no such file", "type": "not_found"}})
                return
            out = []
            for line in job["lines"]:
                req = json.loads(line)
                prompt = "\n".join(m.get("content") or "" for m in req["body"].get("messages", [])
                                   if m.get("role") == "user" and isinstance(m.get("content"), str))
                out.append(json.dumps({"id": "batch_req", "custom_id": req["custom_id"], "error": None,
                                       "response": {"status_code": 200, "body": self.completion(
                                           req["body"], prompt)}}))
            data = ("\n".join(out) + "\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/jsonl")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.reply(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def completion(self, req, prompt):
        Handler.calls += 1
        content = answer_for(prompt, Handler.mode)
        return {
            "id": f"chatcmpl-standin-{Handler.calls}",
            "object": "chat.completion",
            "model": req.get("model", "standin"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content, "refusal": None}}],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(content) // 4,
                      "total_tokens": (len(prompt) + len(content)) // 4},
        }

    def batch_api(self, raw):
        path = self.path.rstrip("/")
        if path == "/v1/files":
            # multipart/form-data: the part named "file" holds the JSONL.
            boundary = self.headers.get("Content-Type", "").split("boundary=")[-1].strip('"')
            lines = []
            for part in raw.split(b"--" + boundary.encode()):
                head, _, body = part.partition(b"\r\n\r\n")
                if b'name="file"' in head:
                    lines = [l for l in body.rstrip(b"\r\n").decode().split("\n") if l.strip()]
            fid = f"file-{len(Handler.files) + 1}"
            Handler.files[fid] = lines
            self.reply(200, {"id": fid, "object": "file", "purpose": "batch", "bytes": len(raw)})
            return True
        if path == "/v1/batches":
            req = json.loads(raw)
            bid = f"batch_{len(Handler.jobs) + 1}"
            Handler.jobs[bid] = {"id": bid, "input_file_id": req["input_file_id"],
                                 "lines": Handler.files.get(req["input_file_id"], [])}
            self.reply(200, {"id": bid, "object": "batch", "status": "validating"})
            return True
        return False

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.batch_api(raw):
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.reply(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            req = json.loads(raw)
            prompt = "\n".join(
                m.get("content") or "" for m in req.get("messages", []) if m.get("role") == "user"
            )
        except (ValueError, AttributeError):
            self.reply(400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}})
            return
        self.reply(200, self.completion(req, prompt))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--answer", choices=["audit", "fixed"], default="audit")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    Handler.mode = args.answer
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print(f"serving {base}", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        return 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(os.environ, OPENAI_BASE_URL=base)
    child = subprocess.Popen(command, env=env)
    while True:
        try:
            code = child.wait()
            break
        except KeyboardInterrupt:
            # Ctrl-C reached the command too (same terminal); wait for it to stop.
            continue
    server.shutdown()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
